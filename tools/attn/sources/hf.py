"""Hugging Face directories: config.json read family by family as transformers reads it, and
the weights in any of the four layouts (model.safetensors, its index, pytorch_model.bin, its index)."""
import json
import os

import numpy as np

from attn import modelfile as mf
from attn.archs import FAMILIES, REFUSED
from attn.archs.base import MISSING, conf, number, setting
from attn.errors import HF_TERMS, Bad, listing
from attn.safetensors import read_safetensors_stored
from attn.sources.gpt2 import GPT2_ACTIVATIONS, GPT2_BUFFERS, gpt2_cfg, gpt2_dims, gpt2_tensors
from attn.tensors import Source, Tensors, classifier, strip_prefix
from attn.torchfile import read_torch_state_dict


def read_hf_weights(d):
    """All weights of a Hugging Face directory as Stored, whichever of the four layouts it uses."""
    st, st_index = os.path.join(d, "model.safetensors"), os.path.join(d, "model.safetensors.index.json")
    pt, pt_index = os.path.join(d, "pytorch_model.bin"), os.path.join(d, "pytorch_model.bin.index.json")
    if os.path.exists(st):
        return read_safetensors_stored(st)
    for index, reader in ((st_index, read_safetensors_stored), (pt_index, read_torch_state_dict)):
        if os.path.exists(index):
            try:
                shards = sorted(set(json.load(open(index))["weight_map"].values()))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise Bad(index, "bad index file (%s)" % e)
            out = {}
            for s in shards:
                p = os.path.join(d, s)
                if not os.path.exists(p):
                    raise Bad(p, "shard named in %s is missing" % os.path.basename(index))
                part = reader(p)
                twice = sorted(set(part) & set(out))
                if twice:  # one copy would be dropped, and they may differ
                    raise Bad(p, "holds %s, which another shard holds too" % listing(twice))
                out.update(part)
            return out
    if os.path.exists(pt):
        return read_torch_state_dict(pt)
    raise Bad(d, "no model.safetensors, model.safetensors.index.json or pytorch_model.bin")
# What each RoPE scaling the format holds reads from a config's rope_scaling (or transformers
# 5's rope_parameters), as modeling_rope_utils.py does
ROPE_SCALINGS = {"linear": (mf.ROPE_SCALING_LINEAR, ("factor",)),
                 "llama3": (mf.ROPE_SCALING_LLAMA3, ("factor", "low_freq_factor", "high_freq_factor",
                                                     "original_max_position_embeddings"))}


def read_hf_dir(d):
    cpath = os.path.join(d, "config.json")
    if not os.path.exists(cpath):
        subs = sorted(e for e in os.listdir(d) if os.path.exists(os.path.join(d, e, "config.json")))
        hint = " (did you mean %s?)" % os.path.join(d, subs[0]) if subs else ""
        raise Bad(d, "a directory without config.json is not a Hugging Face model%s" % hint)
    try:
        c = json.load(open(cpath))
    except ValueError as e:
        raise Bad(cpath, "bad JSON: %s" % e)
    if not isinstance(c, dict):
        raise Bad(cpath, "not a JSON object")
    mt = c.get("model_type")
    q = c.get("quantization_config")
    if q is not None:  # GPTQ, AWQ, bitsandbytes, FP8...: weights the readers here do not dequantise
        method = q.get("quant_method") if isinstance(q, dict) else None
        raise Bad(cpath, "quantization_config%s: quantised Hugging Face weights are not supported by this build; "
                  "convert the unquantised checkpoint (or a GGUF)" % (" (quant_method %s)" % json.dumps(method)
                                                                     if method else ""))
    if isinstance(mt, str) and mt in FAMILIES:
        return READERS[FAMILIES[mt].kind](d, cpath, c)
    if isinstance(mt, str) and mt in REFUSED:
        raise Bad(cpath, REFUSED[mt])
    raise Bad(cpath, "unknown architecture model_type=%r (supported: %s)" % (mt, ", ".join(FAMILIES)))


def read_hf_gpt2(d, cpath, c, sd=None, terms=HF_TERMS):
    """sd: the weights, if not d's, under nanoGPT's names in nn.Linear's layout (GGUF), and terms
    how its messages name keys and tensors."""
    k = terms.key
    d_, L, H = (int(conf(cpath, c, key)) for key in ("n_embd", "n_layer", "n_head"))
    V = int(conf(cpath, c, "vocab_size"))
    S_field = "n_positions" if c.get("n_positions") else "n_ctx"
    S = int(conf(cpath, c, S_field))
    act = conf(cpath, c, "activation_function", "gelu_new")
    if act not in GPT2_ACTIVATIONS:
        raise Bad(cpath, "activation_function %r is not supported (%s)" % (act, ", ".join(GPT2_ACTIVATIONS)))
    for key, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                    ("add_cross_attention", False)):
        if bool(c.get(key, ok)) != ok:
            raise Bad(cpath, "%s = %s is not supported" % (key, c[key]))
    if d_ % H:
        raise Bad(cpath, "%s %d does not divide %s %d" % (k("n_head"), H, k("n_embd"), d_))
    # the feed-forward width: n_inner, or 4 x n_embd when it is null, as Hugging Face's GPT2MLP has it
    hidden = int(c.get("n_inner") or 4 * d_)
    why = "%s %d" % (k("n_inner"), hidden) if c.get("n_inner") else "4 x %s %d" % (k("n_embd"), d_)
    conv1d = sd is None  # Hugging Face's Conv1D matrices are (in, out), GGUF's (out, in)
    sd = strip_prefix(read_hf_weights(d), "transformer.") if conv1d else sd
    tn = Tensors(d, sd, gpt2_dims(d_, V, S, k(S_field), hidden, why, names=k),
                 ("h.%d.", L, "%s %d%s" % (k("n_layer"), L, terms.where)), skip=GPT2_BUFFERS, show=terms.tensor)
    t = gpt2_tensors(L, tn, transpose=conv1d, bias=True)
    cfg = gpt2_cfg(d_, hidden, L, H, V, S, GPT2_ACTIVATIONS[act], float(c.get("layer_norm_epsilon", 1e-5)),
                   bias=True)
    cfg["tied_classifier"] = int(classifier(tn, "lm_head.weight", t, bool(c.get("tie_word_embeddings", True))))
    return Source(cfg, t, "Hugging Face GPT-2 directory", skipped=tn.finish(), tok_hint=HF_TOKENIZER_HINT)


def rope_rows(n_heads, head_dim, rope_dims):
    """The rows that take Hugging Face's RoPE layout to FORMAT.md's: HF rotates the pairs
    (j, j + rope_dims/2) of each head, FORMAT.md the pairs (2j, 2j + 1)."""
    half = rope_dims // 2
    idx = np.concatenate([np.stack([np.arange(half), np.arange(half) + half], 1).reshape(-1),
                          np.arange(rope_dims, head_dim)])
    return (np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)


def rope_scaling_fields(cpath, rs, where, terms=HF_TERMS):
    """The header's RoPE scaling fields from a config's scaling object (where: its key, for
    messages); {} for none. A kind of scaling the format lacks is refused by name."""
    if rs is None:
        return {}
    if not isinstance(rs, dict):
        raise Bad(cpath, "%s is %s, not an object" % (where, json.dumps(rs)))
    kind = rs.get("rope_type", rs.get("type"))  # "type" is the older spelling
    if kind in (None, "default"):
        return {}
    if kind not in ROPE_SCALINGS:
        raise Bad(cpath, "%s rope_type %r is not supported by this build (supported: default, %s)"
                  % (where, kind, ", ".join(ROPE_SCALINGS)))
    code, keys = ROPE_SCALINGS[kind]
    name = {k: terms.key("%s %s" % (where, k)) for k in keys}
    v = {k: number(cpath, name[k], rs.get(k, MISSING), integer=k.startswith("original")) for k in keys}
    if v["factor"] < 1:
        raise Bad(cpath, "%s %s is below 1, which this build does not support" % (name["factor"], rs["factor"]))
    f = dict(rope_scaling=code, rope_factor=v["factor"])
    if kind == "llama3":
        if not v["low_freq_factor"] < v["high_freq_factor"]:
            raise Bad(cpath, "%s %s is not below %s %s, which this build needs"
                      % (name["low_freq_factor"], rs["low_freq_factor"], name["high_freq_factor"],
                         rs["high_freq_factor"]))
        f.update(rope_low_freq_factor=v["low_freq_factor"], rope_high_freq_factor=v["high_freq_factor"],
                 rope_original_ctx=v["original_max_position_embeddings"])
    return f


def hf_rope(cpath, c, fam, terms=HF_TERMS):
    """(rope_theta, the scaling fields, the local layers' RoPE base) as Hugging Face reads them:
    rope_theta, rope_scaling and Gemma 3's rope_local_base_freq, or transformers 5's
    rope_parameters (for Gemma 3, one object per kind of layer). The local base is None for a
    family without local layers."""
    rp, rs = c.get("rope_parameters"), c.get("rope_scaling")
    local = "rope_local_base_freq" in fam.defaults
    base = setting(c, fam, "rope_theta")
    local_base = setting(c, fam, "rope_local_base_freq") if local else None
    if rp is None:
        glob, scaling = base, rope_scaling_fields(cpath, rs, "rope_scaling", terms)
    else:
        if rs is not None:
            raise Bad(cpath, "has both rope_scaling and rope_parameters; which one Hugging Face uses depends on "
                      "its version")
        if not isinstance(rp, dict):
            raise Bad(cpath, "rope_parameters is %s, not an object" % json.dumps(rp))
        if local:
            full, sliding = (rp.get(k) or {} for k in ("full_attention", "sliding_attention"))
            if rope_scaling_fields(cpath, sliding, "rope_parameters sliding_attention"):
                raise Bad(cpath, "rope_parameters sliding_attention scales the local layers' RoPE, which this "
                          "build does not support (only the global layers')")
            local_base = sliding.get("rope_theta", local_base) if isinstance(sliding, dict) else local_base
        else:
            full = rp
        glob = full.get("rope_theta", base) if isinstance(full, dict) else base
        scaling = rope_scaling_fields(cpath, full, "rope_parameters" + (" full_attention" if local else ""))
    return (number(cpath, terms.key("rope_theta"), glob), scaling,
            None if local_base is None else number(cpath, terms.key("rope_local_base_freq"), local_base))


HF_TOKENIZER_HINT = "the model's tokenizer.json, or vocab.json with merges.txt beside it"


def read_hf_decoder(d, cpath, c, sd=None, terms=HF_TERMS, biases=None):
    """A Hugging Face Llama, Mistral, Qwen2, Qwen3 or Gemma 3 (text) directory. Each key is read
    as the family's configuration_*.py and modeling_*.py read it; a value they would act on
    that this build cannot reproduce is refused by name. sd: the weights, if not d's (GGUF);
    terms: how messages name its keys and tensors; biases: its bias_flags, if not what
    config.json's attention_bias and mlp_bias say (a GGUF's: the biases the file holds)."""
    k = terms.key
    mt = c["model_type"]
    fam = FAMILIES[mt]
    archs = c.get("architectures")
    if archs is not None and archs != [fam.hf_class]:
        raise Bad(cpath, "architectures %s is not supported by this build (model_type %s: %s)"
                  % (json.dumps(archs), mt, fam.hf_class))
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        conf(cpath, c, key)
    lim = mf.LIMITS
    dim, hidden, L, H, V = (number(cpath, k(key), c[key], integer=True, limit=lim[ours]) for key, ours in (
        ("hidden_size", "dim"), ("intermediate_size", "hidden_dim"), ("num_hidden_layers", "n_layers"),
        ("num_attention_heads", "n_heads"), ("vocab_size", "vocab_size")))
    kv, hd = setting(c, fam, "num_key_value_heads"), setting(c, fam, "head_dim")
    KV = H if kv is None else number(cpath, k("num_key_value_heads"), kv, integer=True, limit=lim["n_kv_heads"])
    hd = dim // H if hd is None else number(cpath, k("head_dim"), hd, integer=True, limit=lim["head_dim"])
    S = number(cpath, k("max_position_embeddings"), setting(c, fam, "max_position_embeddings"), integer=True)
    eps = number(cpath, k("rms_norm_eps"), setting(c, fam, "rms_norm_eps"))
    if H % KV:
        raise Bad(cpath, "%s %d does not divide %s %d" % (k("num_key_value_heads"), KV, k("num_attention_heads"), H))
    act = setting(c, fam, fam.act_key)
    if act not in fam.activations:
        raise Bad(cpath, "%s %s is not supported by this build (model_type %s: %s)"
                  % (fam.act_key, json.dumps(act), mt, " or ".join(fam.activations)))
    theta, scaling, local_theta = hf_rope(cpath, c, fam, terms)
    cfg = dict(scaling, dim=dim, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=KV, head_dim=hd,
               vocab_size=V, seq_len=S, rope_theta=theta, norm_eps=eps)
    desc = "Hugging Face %s directory" % mt
    context = fam.configure(cpath, c, cfg, terms, local_theta)
    if fam.qk_norm:
        cfg["arch_flags"] = cfg.get("arch_flags", 0) | mf.ARCH_QK_NORM | (mf.ARCH_QK_NORM_WHOLE if fam.qk_norm_whole
                                                                          else 0)
    rope_dims = int(hd * number(cpath, k("partial_rotary_factor"), c.get("partial_rotary_factor", 1.0), limit=1))
    if rope_dims % 2 or not 2 <= rope_dims <= hd:  # RoPE turns pairs
        raise Bad(cpath, "%s gives RoPE %d of a head's %d dimensions; it needs an even number from 2 to %d"
                  % (k("partial_rotary_factor"), rope_dims, hd, hd))
    cfg["rope_dims"] = rope_dims
    cfg["bias_flags"] = bias = fam.bias_flags(c) if biases is None else biases
    hidden, E = cfg["hidden_dim"], cfg.get("n_experts", 0)
    dims = {"d": (dim, "%s %d" % (k("hidden_size"), dim)), "h": (hidden, "%s %d" % (k(fam.ffn_key), hidden)),
            "E": (E, "%s %d" % (k(fam.ref_experts["count"] if fam.ref_experts else "num_experts"), E)),
            "S": (cfg.get("shared_dim", 0), "the shared expert's width %d" % cfg.get("shared_dim", 0)),
            "o": (1, "a gate of one output"),
            "q": (H * hd, "%s %d x %s %d" % (k("num_attention_heads"), H, k("head_dim"), hd)),
            "k": (KV * hd, "%s %d x %s %d" % (k("num_key_value_heads"), KV, k("head_dim"), hd)),
            "V": (V, "%s %d" % (k("vocab_size"), V)), "e": (hd, "%s %d" % (k("head_dim"), hd))}
    sd = read_hf_weights(d) if sd is None else sd
    tn = Tensors(d, sd, dims, ("model.layers.%d.", L, "%s %d%s" % (k("num_hidden_layers"), L, terms.where)),
                 skip=("rotary_emb.inv_freq",), show=terms.tensor)
    names = fam.layer_names(bias)
    # HF's q and k rows, and the q/k norms over a head (or over every head: OLMoE's), are in HF's RoPE layout
    qn, kn = (H, KV) if fam.qk_norm_whole else (1, 1)
    rows = {"wq": rope_rows(H, hd, rope_dims), "bq": rope_rows(H, hd, rope_dims), "wk": rope_rows(KV, hd, rope_dims),
            "bk": rope_rows(KV, hd, rope_dims), "q_norm_w": rope_rows(qn, hd, rope_dims),
            "k_norm_w": rope_rows(kn, hd, rope_dims)}
    t = {"tok_embedding": tn.take("model.embed_tokens.weight", "Vd"), "final_norm_w": tn.take("model.norm.weight", "d")}
    for i in range(L):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        for ours, (theirs, shape) in names.items():
            w = tn.take(p + theirs, shape)
            t[q + ours] = w.view(lambda a, r=rows[ours]: a[r]) if ours in rows else w
        t.update((q + ours, w) for ours, w in fam.take_experts(d, tn, p, E).items())
    tied = classifier(tn, "lm_head.weight", t, bool(setting(c, fam, "tie_word_embeddings")))
    cfg["tied_classifier"] = int(tied)
    # the keys that bring biases, for a message on unused ones (a GGUF's are the ones it holds)
    said = "attention_bias %s, mlp_bias %s, model_type %s in config.json" % (
        json.dumps(bool(c.get("attention_bias"))), json.dumps(bool(c.get("mlp_bias"))), mt) if biases is None else None
    return Source(cfg, t, desc, skipped=tn.finish(said), tok_hint=HF_TOKENIZER_HINT, context=context)


READERS = dict(decoder=read_hf_decoder, gpt2=read_hf_gpt2)  # by Family.kind
