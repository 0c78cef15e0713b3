"""make_random.py's models: the presets (one per knob combination), random weights for a
config, synthetic vocabularies, and attn.c model files and llama2.c tokenizer.bin files of them."""
import os
import struct

import numpy as np

from attn import modelfile as mf
from attn import outfile
from attn import tokenizer_blob


HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, which the paths below start from

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
    # version 8's experts (Qwen3-MoE's block): top 2 of 8 renormalised; top 3 of 6 as the softmax gives them
    "moe": dict(_llama, dim=64, hidden_dim=48, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, seq_len=128,
                arch_flags=mf.ARCH_QK_NORM, tied_classifier=0, n_experts=8, n_experts_used=2,
                moe_flags=mf.MOE_NORM_TOPK),
    "moe_unnormed": dict(_llama, dim=64, hidden_dim=32, n_layers=3, n_heads=4, vocab_size=300, seq_len=128,
                         n_experts=6, n_experts_used=3),
    # OLMoE's block: q and k normalised over the whole projection, top 2 of 8 as the softmax gives them
    "moe_whole_qk": dict(_llama, dim=64, hidden_dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300,
                         seq_len=128, arch_flags=mf.ARCH_QK_NORM | mf.ARCH_QK_NORM_WHOLE, tied_classifier=0,
                         n_experts=8, n_experts_used=2),
    "moe_shared": dict(_llama, dim=64, hidden_dim=32, n_layers=2, n_heads=4, vocab_size=300, seq_len=128,
                       bias_flags=mf.BIAS_QKV, tied_classifier=0, n_experts=8, n_experts_used=4, shared_dim=80),
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
        return tokenizer_blob.read_llama2c_tokenizer(tokenizer, V)
    named = {512: "tok512.bin", 32000: "tokenizer.bin"}
    if V in named and os.path.exists(os.path.join(SHARED, "models", named[V])):
        return tokenizer_blob.read_llama2c_tokenizer(os.path.join(SHARED, "models", named[V]), V)
    return synthetic_vocab(V)


def make_model(path, cfg, seed=0, tok=None, tokenizer=None):
    """Write a random-weight model file; returns (cfg, tok, tensors), the tensors as drawn (a
    Q8_0 file holds them rounded: read it back for what it holds)."""
    c = mf.complete_config(cfg)
    tok = tok or default_vocab(c["vocab_size"], tokenizer)
    t = random_tensors(c, seed)
    mf.write_model(path, c, tok, t)
    return c, tok, t


def write_llama2c_tokenizer(path, blob):
    """A llama2.c tokenizer.bin holding a blob's pieces and scores."""
    pieces, scores, _ = mf.parse_tokenizer(blob)
    out = [struct.pack("<i", max(len(p) for p in pieces))]
    for p, s in zip(pieces, scores):
        out.append(struct.pack("<fi", s, len(p)) + p)
    outfile.write(path, b"".join(out))
