"""The benchmark's Llama in llama.cpp's block types, as a GGUF file that convert.py then keeps
as it is (format version 6):

  bench/make_blocks.py MODEL.bin OUT.gguf q4_0|q4_k_m

q4_0: every matrix quantised to Q4_0 by ggml's reference quantiser (tools/attn/gguf_write.py),
the classifier Q6_K, as llama-quantize's Q4_0 does. q4_k_m: llama-quantize's Q4_K_M mix (Q6_K for
the classifier, and for wv and w2 in the first and last eighth of the layers and every third
between; Q4_K elsewhere), the Q4_K blocks random bytes with sane scales: this repository has no
Q4_K quantiser yet, and a step's speed does not depend on the values. Norms stay float32.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from attn import gguf_file as gguf  # noqa: E402
from attn import gguf_write  # noqa: E402
from attn import modelfile as mf  # noqa: E402

LAYER = dict(attn_norm_w="attn_norm", wq="attn_q", wk="attn_k", wv="attn_v", wo="attn_output",
             ffn_norm_w="ffn_norm", w1="ffn_gate", w3="ffn_up", w2="ffn_down")


def more_bits(layer, n_layers):
    """llama-quantize's use_more_bits: the layers whose wv and w2 Q4_K_M keeps in Q6_K."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def random_q4_k(shape, rng):
    """Q4_K blocks of random bytes, d and dmin float16s of a size that keeps activations tame."""
    b = rng.integers(0, 256, (shape[0] * shape[1] // 256, 144), dtype=np.uint8)
    for at in (0, 2):
        b[:, at:at + 2] = (rng.uniform(0.2, 1.0, (len(b), 1)) / 945 / shape[1] ** 0.5).astype("<f2").view(np.uint8)
    return b.reshape(-1)


def main(src, out, mix):
    c, _, t = mf.read_model(src)
    rng = np.random.default_rng(1)
    n = c["n_layers"]
    meta = {"general.architecture": "llama", "llama.context_length": c["seq_len"], "llama.embedding_length": c["dim"],
            "llama.feed_forward_length": c["hidden_dim"], "llama.block_count": n,
            "llama.attention.head_count": c["n_heads"], "llama.attention.head_count_kv": c["n_kv_heads"],
            "llama.rope.freq_base": c["rope_theta"], "llama.attention.layer_norm_rms_epsilon": c["norm_eps"],
            "llama.rope.dimension_count": c["rope_dims"], "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>"] + ["t%d" % i for i in range(c["vocab_size"] - 3)],
            "tokenizer.ggml.scores": np.zeros(c["vocab_size"], np.float32),
            "tokenizer.ggml.token_type": np.ones(c["vocab_size"], np.int32), "tokenizer.ggml.add_space_prefix": False}
    tensors = {"token_embd.weight": t["tok_embedding"]}
    for i in range(n):
        for ours, theirs in LAYER.items():
            tensors["blk.%d.%s.weight" % (i, theirs)] = t["layers.%d.%s" % (i, ours)]
    tensors["output_norm.weight"] = t["final_norm_w"]
    tensors["output.weight"] = t.get("classifier", t["tok_embedding"])

    def kind(name):
        if len(tensors[name].shape) == 1:
            return "F32"
        if name == "output.weight":
            return "Q6_K"
        if mix == "q4_0":
            return "Q4_0"
        layer, part = name.split(".")[1:3] if name.startswith("blk.") else (None, None)
        return "Q6_K" if part in ("attn_v", "ffn_down") and more_bits(int(layer), n) else "Q4_K"
    with gguf_write.GGUFWriter(out) as w:
        for k, v in meta.items():
            w.add(k, v)
        for name, v in tensors.items():
            w.add_tensor(name, v.shape, kind(name))
        for name, v in tensors.items():
            w.write_tensor(name, random_q4_k(v.shape, rng) if kind(name) == "Q4_K" else np.asarray(v, np.float32))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in ("q4_0", "q4_k_m"):
        sys.exit("usage: bench/make_blocks.py MODEL.bin OUT.gguf q4_0|q4_k_m")
    main(*sys.argv[1:])
    assert gguf.GGUFFile(sys.argv[2]).tensors
