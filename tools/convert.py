"""Convert a checkpoint into an attn.c model file (docs/FORMAT.md), or export one back.

  convert.py SRC OUT [--tokenizer TOK] [--seq-len N] [--quantize q8_0 [--group-size N]]
  convert.py --export-torch MODEL.bin OUT.pt

SRC is recognised by its content:
  llama2.c legacy .bin (7-int header), llama2.c `ak42` version 1 (fp32) and version 2
  (Q8_0, dequantised) .bin, llama2.c train.py checkpoints (.pt with model_args.dim),
  nanoGPT ckpt.pt (model_args.n_layer), a Hugging Face GPT-2 or Llama-family directory
  (llama, mistral, qwen2), this tool's own --export-torch output, and attn.c model files
  (a Q8_0 one dequantised), e.g. to quantise a model ./train wrote.
OUT holds float32 weights, or with --quantize q8_0 its matrices in int8 with a float32
scale per group of --group-size weights in a row (docs/FORMAT.md).
TOK: llama2.c tokenizer.bin; GPT-2 vocab.json (+ merges.txt beside it) or encoder.json
(+ vocab.bpe) or a directory holding them; Hugging Face tokenizer.json; nanoGPT meta.pkl.

--export-torch writes {'model': state_dict, 'attn_config': cfg, 'tokenizer': {...}} with
torch.save; the state dict uses the model file's tensor names, which are also the
parameter names of tools/reference.py's module (load_state_dict works on it), and
convert.py reads it back bit for bit.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modelfile as mf  # noqa: E402


class Bad(Exception):
    """A problem with one input file; main prints it as `convert.py: FILE: PROBLEM`."""

    def __init__(self, path, msg):
        super().__init__(msg)
        self.path, self.msg = path, msg


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


# ---- llama2.c ----

def llama_cfg(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len, tied, eps=1e-5):
    """llama2.c's architecture: RMSNorm pre-norm, interleaved RoPE over the whole head, SwiGLU."""
    return dict(dim=dim, hidden_dim=hidden, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv,
                head_dim=dim // n_heads, vocab_size=vocab, seq_len=seq_len, norm_eps=eps,
                tied_classifier=int(tied))


def check_llama2c_dims(path, dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len):
    for name, v in (("dim", dim), ("hidden_dim", hidden), ("n_layers", n_layers), ("n_heads", n_heads),
                    ("n_kv_heads", n_kv), ("vocab_size", vocab), ("seq_len", seq_len)):
        if not 0 < v <= 1 << 24:
            raise Bad(path, "header field %s = %d is not a plausible size" % (name, v))
    if dim % n_heads or n_heads % n_kv:
        raise Bad(path, "n_heads %d / n_kv_heads %d do not divide dim %d" % (n_heads, n_kv, dim))


def llama2c_tensors(L, get):
    """Model-file tensors from llama2.c names; get(name) -> array or None."""
    t = {"tok_embedding": get("tok_embeddings.weight"), "final_norm_w": get("norm.weight")}
    names = dict(attn_norm_w="attention_norm.weight", wq="attention.wq.weight",
                 wk="attention.wk.weight", wv="attention.wv.weight", wo="attention.wo.weight",
                 ffn_norm_w="ffn_norm.weight", w1="feed_forward.w1.weight",
                 w2="feed_forward.w2.weight", w3="feed_forward.w3.weight")
    for i in range(L):
        for ours, theirs in names.items():
            t["layers.%d.%s" % (i, ours)] = get("layers.%d.%s" % (i, theirs))
    return t


def read_llama2c_legacy(path, data):
    """Files with no magic land here: a header that makes no sense means an unknown format."""
    dim, hidden, L, H, KV, V, S = struct.unpack_from("<7i", data, 0)
    tied = V > 0
    V = abs(V)
    try:
        check_llama2c_dims(path, dim, hidden, L, H, KV, V, S)
    except Bad as e:
        raise Bad(path, "not a known checkpoint format (as a llama2.c legacy .bin: %s)" % e.msg)
    hs = dim // H
    kvd = KV * hs
    shapes = [("tok_embeddings.weight", (V, dim)), ("attention_norm.weight", (L, dim)),
              ("attention.wq.weight", (L, dim, dim)), ("attention.wk.weight", (L, kvd, dim)),
              ("attention.wv.weight", (L, kvd, dim)), ("attention.wo.weight", (L, dim, dim)),
              ("ffn_norm.weight", (L, dim)), ("feed_forward.w1.weight", (L, hidden, dim)),
              ("feed_forward.w2.weight", (L, dim, hidden)), ("feed_forward.w3.weight", (L, hidden, dim)),
              ("norm.weight", (dim,))]
    n = sum(int(np.prod(s)) for _, s in shapes)
    freq = S * hs  # freq_cis_real and _imag, [seq_len, head_size/2] each, which older exports keep
    cls = 0 if tied else V * dim
    floats = (len(data) - 28) // 4
    if (len(data) - 28) % 4 or floats not in (n + cls, n + freq + cls):
        raise Bad(path, "llama2.c legacy header (dim %d, hidden %d, %d layers, vocab %d, seq_len %d) implies "
                  "%d or %d bytes, file has %d" % (dim, hidden, L, V, S, 28 + 4 * (n + cls),
                                                   28 + 4 * (n + freq + cls), len(data)))
    flat = np.frombuffer(data, dtype="<f4", offset=28)
    arrays, off = {}, 0
    for name, s in shapes:
        k = int(np.prod(s))
        arrays[name] = flat[off:off + k].reshape(s)
        off += k

    def get(name):
        if name.startswith("layers."):
            _, i, rest = name.split(".", 2)
            return arrays[rest][int(i)]
        return arrays[name]
    t = llama2c_tensors(L, get)
    if not tied:
        t["classifier"] = flat[len(flat) - V * dim:].reshape(V, dim)
    return llama_cfg(dim, hidden, L, H, KV, V, S, tied), t, "llama2.c legacy .bin"


def read_llama2c_ak42(path, data):
    if len(data) < 256:
        raise Bad(path, "truncated: %d bytes, shorter than the 256-byte ak42 header" % len(data))
    version = struct.unpack_from("<i", data, 4)[0]
    dim, hidden, L, H, KV, V, S = struct.unpack_from("<7i", data, 8)
    check_llama2c_dims(path, dim, hidden, L, H, KV, V, S)
    tied = data[36]
    if version not in (1, 2):
        raise Bad(path, "llama2.c ak42 version %d is unknown (1 = fp32 and 2 = Q8_0 are supported)" % version)
    gs = struct.unpack_from("<i", data, 37)[0] if version == 2 else 0
    kvd = KV * (dim // H)
    norms = [("layers.%d.attention_norm.weight" % i, (dim,)) for i in range(L)]
    norms += [("layers.%d.ffn_norm.weight" % i, (dim,)) for i in range(L)] + [("norm.weight", (dim,))]
    mats = [("tok_embeddings.weight", (V, dim))]
    for name, s in (("attention.wq", (dim, dim)), ("attention.wk", (kvd, dim)), ("attention.wv", (kvd, dim)),
                    ("attention.wo", (dim, dim)), ("feed_forward.w1", (hidden, dim)),
                    ("feed_forward.w2", (dim, hidden)), ("feed_forward.w3", (hidden, dim))):
        mats += [("layers.%d.%s.weight" % (i, name), s) for i in range(L)]
    if not tied:
        mats.append(("output.weight", (V, dim)))
    if version == 2:
        if gs <= 0 or any(int(np.prod(s)) % gs for _, s in mats):
            raise Bad(path, "Q8_0 group size %d does not divide every weight matrix" % gs)
        need = 256 + 4 * sum(int(np.prod(s)) for _, s in norms) + sum(
            int(np.prod(s)) + 4 * (int(np.prod(s)) // gs) for _, s in mats)
    else:
        need = 256 + 4 * sum(int(np.prod(s)) for _, s in norms + mats)
    if len(data) != need:
        raise Bad(path, "llama2.c ak42 version %d header implies %d bytes, file has %d" % (version, need, len(data)))
    arrays, off = {}, 256
    for name, s in norms + (mats if version == 1 else []):
        k = int(np.prod(s))
        arrays[name] = np.frombuffer(data, dtype="<f4", count=k, offset=off).reshape(s)
        off += 4 * k
    if version == 2:
        # Q8_0: per tensor, int8 values then one float32 scale per group of gs values.
        for name, s in mats:
            k = int(np.prod(s))
            q = np.frombuffer(data, dtype=np.int8, count=k, offset=off).astype(np.float32)
            sc = np.frombuffer(data, dtype="<f4", count=k // gs, offset=off + k)
            arrays[name] = (q.reshape(-1, gs) * sc[:, None]).reshape(s)
            off += k + 4 * (k // gs)
    t = llama2c_tensors(L, arrays.get)
    if not tied:
        t["classifier"] = arrays["output.weight"]
    kind = "llama2.c ak42 version 1 .bin" if version == 1 else "llama2.c ak42 version 2 (Q8_0, dequantised) .bin"
    return llama_cfg(dim, hidden, L, H, KV, V, S, tied), t, kind


def read_llama2c_pt(path, ck):
    a = ck["model_args"]
    sd = strip_prefix(ck["model"], "_orig_mod.")
    try:
        dim, L, H, V, S = (int(a[k]) for k in ("dim", "n_layers", "n_heads", "vocab_size", "max_seq_len"))
    except KeyError as e:
        raise Bad(path, "model_args lacks %s" % e)
    KV = int(a.get("n_kv_heads") or H)
    w1 = sd.get("layers.0.feed_forward.w1.weight")
    if w1 is None:
        raise Bad(path, "state dict lacks layers.0.feed_forward.w1.weight")
    hidden = int(w1.shape[0])
    check_llama2c_dims(path, dim, hidden, L, H, KV, V, S)
    get = tensor_getter(path, sd)
    t = llama2c_tensors(L, get)
    out = sd.get("output.weight")
    tied = out is None or np.array_equal(np_(out), t["tok_embedding"])
    if not tied:
        t["classifier"] = np_(out)
    cfg = llama_cfg(dim, hidden, L, H, KV, V, S, tied, float(a.get("norm_eps", 1e-5)))
    return cfg, t, "llama2.c train.py checkpoint"


# ---- nanoGPT and this tool's own export ----

def read_nanogpt(path, ck):
    a = ck["model_args"]
    sd = strip_prefix(strip_prefix(ck["model"], "_orig_mod."), "transformer.")
    try:
        L, H, d, S, V = (int(a[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"))
    except KeyError as e:
        raise Bad(path, "model_args lacks %s" % e)
    if d % H:
        raise Bad(path, "n_head %d does not divide n_embd %d" % (H, d))
    bias = bool(a.get("bias", True))
    get = tensor_getter(path, sd)
    t = gpt2_tensors(L, get, d, transpose=False, bias=bias)
    cfg = gpt2_cfg(d, t["layers.0.w1"].shape[0], L, H, V, S, ffn_kind=mf.FFN_GELU_ERF, eps=1e-5, bias=bias)
    head = sd.get("lm_head.weight")
    if head is not None and not np.array_equal(np_(head), t["tok_embedding"]):
        cfg["tied_classifier"] = 0
        t["classifier"] = np_(head)
    return cfg, t, "nanoGPT checkpoint"


def read_attn(path):
    """An attn.c model file, float32 or Q8_0 (dequantised), as a source."""
    try:
        cfg, tok, t = mf.read_model(path)
    except (ValueError, OSError) as e:
        raise Bad(path, str(e))
    q8 = cfg["weight_type"] == mf.WEIGHTS_Q8_0
    return cfg, t, "attn.c model file" + (" (Q8_0, dequantised)" if q8 else ""), tok


def read_own_export(path, ck):
    cfg = dict(ck["attn_config"])
    t = {k: np_(v) for k, v in ck["model"].items()}
    tk = ck["tokenizer"]
    tok = (np_(tk["blob"]).astype(np.uint8).tobytes(), int(tk["kind"]), int(tk["flags"]),
           int(tk["bos_id"]), int(tk["eos_id"]))
    return cfg, t, "attn.c torch export", tok


def np_(t):
    return t.detach().cpu().float().numpy() if hasattr(t, "detach") else np.asarray(t)


def strip_prefix(sd, prefix):
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in sd.items()}


def tensor_getter(path, sd):
    def get(name):
        if name not in sd:
            raise Bad(path, "missing tensor %s" % name)
        return np_(sd[name])
    get.path = path
    return get


def read_torch(path):
    import torch
    import pickle
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as e:
        if "zip" in str(e).lower() or "truncat" in str(e).lower() or "EOF" in str(e):
            raise Bad(path, "cannot read the PyTorch file, truncated or corrupt (%s)" % str(e).splitlines()[0])
        # Checkpoints may pickle harmless non-tensor objects the safe loader rejects.
        try:
            ck = torch.load(path, map_location="cpu")
        except Exception as e2:
            raise Bad(path, "cannot read the PyTorch file: %s" % (str(e2).splitlines() or [type(e2).__name__])[0])
    except EOFError:
        raise Bad(path, "truncated PyTorch file")
    if not isinstance(ck, dict):
        raise Bad(path, "a PyTorch file holding %s, not a checkpoint dict" % type(ck).__name__)
    if "attn_config" in ck:
        return read_own_export(path, ck)
    if "model" not in ck or "model_args" not in ck:
        raise Bad(path, "unknown PyTorch checkpoint layout (keys %s; expected 'model' and 'model_args')"
                  % ", ".join(sorted(map(str, ck))[:8]))
    if "n_layer" in ck["model_args"]:
        return read_nanogpt(path, ck)
    if "dim" in ck["model_args"]:
        return read_llama2c_pt(path, ck)
    raise Bad(path, "unknown model_args %s (neither nanoGPT nor llama2.c)" % sorted(ck["model_args"]))


# ---- safetensors and Hugging Face directories ----

SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def read_safetensors(path):
    """name -> float32 array from a .safetensors file, parsed with numpy."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Bad(path, "truncated: %d bytes, no safetensors header" % size)
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            raise Bad(path, "truncated: the header claims %d bytes, the file has %d" % (n, size))
        try:
            meta = json.loads(f.read(n))
        except ValueError as e:
            raise Bad(path, "bad safetensors header JSON: %s" % e)
    if not isinstance(meta, dict):
        raise Bad(path, "bad safetensors header: not a JSON object")
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n) if size > 8 + n else np.zeros(0, np.uint8)
    out = {}
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            dt, shape, (b, e) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise Bad(path, "bad safetensors entry for %s" % name)
        if dt not in SAFETENSORS_DTYPES:
            raise Bad(path, "tensor %s has dtype %s (supported: F32, F16, BF16)" % (name, dt))
        item = np.dtype(SAFETENSORS_DTYPES[dt]).itemsize
        if not 0 <= b <= e or e - b != item * int(np.prod(shape)):
            raise Bad(path, "tensor %s: data_offsets %d..%d do not fit shape %s of %s" % (name, b, e, shape, dt))
        if e > len(raw):
            raise Bad(path, "truncated: tensor %s needs bytes up to %d, the data has %d" % (name, e, len(raw)))
        a = raw[b:e].view(SAFETENSORS_DTYPES[dt]).reshape(shape)
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float32) if dt == "F16" else a
    return out


def write_safetensors(path, tensors):
    """float32 tensors to a .safetensors file (used by make_random.py for fake HF directories)."""
    meta, off = {}, 0
    for k, v in tensors.items():
        nb = v.size * 4
        meta[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(meta).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for v in tensors.values():
            f.write(f32(v).tobytes())


def read_hf_weights(d):
    """All weights of a Hugging Face directory, whichever of the four layouts it uses."""
    st, st_index = os.path.join(d, "model.safetensors"), os.path.join(d, "model.safetensors.index.json")
    pt, pt_index = os.path.join(d, "pytorch_model.bin"), os.path.join(d, "pytorch_model.bin.index.json")
    if os.path.exists(st):
        return read_safetensors(st)
    for index, reader in ((st_index, read_safetensors), (pt_index, read_torch_state_dict)):
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
                out.update(reader(p))
            return out
    if os.path.exists(pt):
        return read_torch_state_dict(pt)
    raise Bad(d, "no model.safetensors, model.safetensors.index.json or pytorch_model.bin")


def read_torch_state_dict(path):
    import torch
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise Bad(path, "cannot read the PyTorch file: %s" % (str(e).splitlines() or [type(e).__name__])[0])
    return {k: np_(v) for k, v in sd.items()}


def gpt2_cfg(d, hidden, L, H, V, S, ffn_kind, eps, bias):
    return dict(dim=d, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=H, head_dim=d // H,
                vocab_size=V, seq_len=S, pos_kind=mf.POS_LEARNED, ffn_kind=ffn_kind,
                norm_kind=mf.NORM_LAYER, norm_eps=eps, final_norm=1,
                bias_flags=7 if bias else 0, tied_classifier=1)


def gpt2_tensors(L, get, d, transpose, bias):
    """GPT-2 naming (HF with its input-major Conv1D when transpose, nanoGPT's nn.Linear otherwise)."""
    def w(name):
        a = get(name)
        return a.T if transpose else a

    def b(name, n):
        return get(name) if bias else np.zeros(n, np.float32)
    t = {"tok_embedding": get("wte.weight"), "pos_embedding": get("wpe.weight"),
         "final_norm_w": get("ln_f.weight"), "final_norm_b": b("ln_f.bias", d)}
    for i in range(L):
        p, q = "h.%d." % i, "layers.%d." % i
        qkv = w(p + "attn.c_attn.weight")
        if qkv.shape != (3 * d, d):
            raise Bad(get.path, "%sattn.c_attn.weight has shape %s for n_embd %d" % (p, get(p + "attn.c_attn.weight").shape, d))
        t[q + "wq"], t[q + "wk"], t[q + "wv"] = qkv[:d], qkv[d:2 * d], qkv[2 * d:]
        if bias:
            bqkv = get(p + "attn.c_attn.bias")
            t[q + "bq"], t[q + "bk"], t[q + "bv"] = bqkv[:d], bqkv[d:2 * d], bqkv[2 * d:]
            t[q + "bo"] = get(p + "attn.c_proj.bias")
            t[q + "b1"] = get(p + "mlp.c_fc.bias")
            t[q + "b2"] = get(p + "mlp.c_proj.bias")
        t[q + "wo"] = w(p + "attn.c_proj.weight")
        t[q + "w1"] = w(p + "mlp.c_fc.weight")
        t[q + "w2"] = w(p + "mlp.c_proj.weight")
        t[q + "attn_norm_w"], t[q + "attn_norm_b"] = get(p + "ln_1.weight"), b(p + "ln_1.bias", d)
        t[q + "ffn_norm_w"], t[q + "ffn_norm_b"] = get(p + "ln_2.weight"), b(p + "ln_2.bias", d)
    return t


GPT2_ACTIVATIONS = {"gelu_new": mf.FFN_GELU_TANH, "gelu_pytorch_tanh": mf.FFN_GELU_TANH,
                    "gelu_fast": mf.FFN_GELU_TANH, "gelu": mf.FFN_GELU_ERF, "relu": mf.FFN_RELU}
LLAMA_TYPES = ("llama", "mistral", "qwen2")


def conf(path, c, key, default=None, required=True):
    if key in c and c[key] is not None:
        return c[key]
    if required and default is None:
        raise Bad(path, "config.json lacks %s" % key)
    return default


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
    mt = c.get("model_type")
    if mt == "gpt2":
        return read_hf_gpt2(d, cpath, c)
    if mt in LLAMA_TYPES:
        return read_hf_llama(d, cpath, c)
    raise Bad(cpath, "unknown architecture model_type=%r (supported: gpt2, %s)" % (mt, ", ".join(LLAMA_TYPES)))


def read_hf_gpt2(d, cpath, c):
    d_, L, H = (int(conf(cpath, c, k)) for k in ("n_embd", "n_layer", "n_head"))
    V = int(conf(cpath, c, "vocab_size"))
    S = int(c.get("n_positions") or conf(cpath, c, "n_ctx"))
    act = conf(cpath, c, "activation_function", "gelu_new")
    if act not in GPT2_ACTIVATIONS:
        raise Bad(cpath, "activation_function %r is not supported (%s)" % (act, ", ".join(GPT2_ACTIVATIONS)))
    for key, ok in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                    ("add_cross_attention", False)):
        if bool(c.get(key, ok)) != ok:
            raise Bad(cpath, "%s = %s is not supported" % (key, c[key]))
    if d_ % H:
        raise Bad(cpath, "n_head %d does not divide n_embd %d" % (H, d_))
    w = strip_prefix(read_hf_weights(d), "transformer.")
    get = tensor_getter(d, w)
    t = gpt2_tensors(L, get, d_, transpose=True, bias=True)
    cfg = gpt2_cfg(d_, t["layers.0.w1"].shape[0], L, H, V, S, GPT2_ACTIVATIONS[act],
                   float(c.get("layer_norm_epsilon", 1e-5)), bias=True)
    head = w.get("lm_head.weight")
    if head is not None and not np.array_equal(head, t["tok_embedding"]):
        cfg["tied_classifier"] = 0
        t["classifier"] = head
    return cfg, t, "Hugging Face GPT-2 directory"


def unpermute_rope(w, n_heads, head_dim, rope_dims):
    """HF rotates pairs (j, j + r/2) of each head; FORMAT.md rotates (2j, 2j+1): reorder rows."""
    half = rope_dims // 2
    idx = np.concatenate([np.stack([np.arange(half), np.arange(half) + half], 1).reshape(-1),
                          np.arange(rope_dims, head_dim)])
    rows = (np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)
    return w[rows]


def read_hf_llama(d, cpath, c):
    mt = c["model_type"]
    dim, hidden, L, H, V = (int(conf(cpath, c, k)) for k in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"))
    KV = int(conf(cpath, c, "num_key_value_heads", H))
    hd = int(conf(cpath, c, "head_dim", dim // H))
    S = int(conf(cpath, c, "max_position_embeddings"))
    act = conf(cpath, c, "hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise Bad(cpath, "hidden_act %r is not supported (only silu, for SwiGLU)" % act)
    rs = c.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
        raise Bad(cpath, "rope_scaling %s is not supported" % json.dumps(rs))
    if H % KV:
        raise Bad(cpath, "num_key_value_heads %d does not divide num_attention_heads %d" % (KV, H))
    window = c.get("sliding_window") if c.get("use_sliding_window", mt == "mistral") else None
    if window and window < S:
        S = int(window)  # beyond the window the model attends differently; stay inside it
    rope_dims = int(hd * float(c.get("partial_rotary_factor", 1.0)))
    rope_dims -= rope_dims % 2
    bias = 0
    if c.get("attention_bias") or mt == "qwen2":
        bias |= mf.BIAS_QKV
    if c.get("attention_bias"):
        bias |= mf.BIAS_O
    if c.get("mlp_bias"):
        bias |= mf.BIAS_FFN
    w = read_hf_weights(d)
    get = tensor_getter(d, w)
    t = {"tok_embedding": get("model.embed_tokens.weight"), "final_norm_w": get("model.norm.weight")}
    for i in range(L):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        names = dict(attn_norm_w="input_layernorm.weight", wq="self_attn.q_proj.weight",
                     wk="self_attn.k_proj.weight", wv="self_attn.v_proj.weight",
                     wo="self_attn.o_proj.weight", ffn_norm_w="post_attention_layernorm.weight",
                     w1="mlp.gate_proj.weight", w3="mlp.up_proj.weight", w2="mlp.down_proj.weight")
        if bias & mf.BIAS_QKV:
            names.update(bq="self_attn.q_proj.bias", bk="self_attn.k_proj.bias", bv="self_attn.v_proj.bias")
        if bias & mf.BIAS_O:
            names.update(bo="self_attn.o_proj.bias")
        if bias & mf.BIAS_FFN:
            names.update(b1="mlp.gate_proj.bias", b3="mlp.up_proj.bias", b2="mlp.down_proj.bias")
        for ours, theirs in names.items():
            t[q + ours] = get(p + theirs)
        for k, n in (("q", H), ("k", KV)):
            if t[q + "w" + k].shape[0] != n * hd:
                raise Bad(d, "%sself_attn.%s_proj.weight has %d rows, config says %d heads of %d"
                          % (p, k, t[q + "w" + k].shape[0], n, hd))
            t[q + "w" + k] = unpermute_rope(t[q + "w" + k], n, hd, rope_dims)
            if bias & mf.BIAS_QKV:
                t[q + "b" + k] = unpermute_rope(t[q + "b" + k], n, hd, rope_dims)
    tied = bool(c.get("tie_word_embeddings", False)) or "lm_head.weight" not in w
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=KV, head_dim=hd,
               vocab_size=V, seq_len=S, rope_theta=float(c.get("rope_theta", 10000.0)),
               rope_dims=rope_dims, norm_eps=float(c.get("rms_norm_eps", 1e-6)),
               bias_flags=bias, tied_classifier=int(tied))
    if not tied:
        t["classifier"] = w["lm_head.weight"]
    return cfg, t, "Hugging Face %s directory" % mt


# ---- tokenizers ----

def read_tokenizer(path, vocab_size):
    """(blob, kind, flags, bos, eos) from any tokenizer file the module docstring lists."""
    if os.path.isdir(path):
        for names in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"), ("tokenizer.json",),
                      ("tokenizer.bin",)):
            if all(os.path.exists(os.path.join(path, n)) for n in names):
                return read_tokenizer(os.path.join(path, names[0]), vocab_size)
        raise Bad(path, "directory has no tokenizer (vocab.json+merges.txt, encoder.json+vocab.bpe, "
                  "tokenizer.json or tokenizer.bin)")
    if not os.path.exists(path):
        raise Bad(path, "tokenizer file not found")
    base = os.path.basename(path)
    try:
        if base.endswith(".pkl"):
            tok = read_char_meta(path)
        elif base.endswith(".json") and base != "tokenizer.json":
            import tokenizer_blob
            other = os.path.join(os.path.dirname(path), "vocab.bpe" if base == "encoder.json" else "merges.txt")
            if not os.path.exists(other):
                raise Bad(path, "needs %s beside it" % os.path.basename(other))
            tok = tokenizer_blob.from_gpt2(path, other)
        elif base.endswith(".json"):
            import tokenizer_blob
            tok = tokenizer_blob.from_hf_json(path)
        else:
            tok = mf.read_llama2c_tokenizer(path, vocab_size)
        return (mf.resize_tokenizer(tok[0], vocab_size),) + tuple(tok[1:])
    except ImportError:
        raise Bad(path, "this tokenizer kind needs tools/tokenizer_blob.py, which is missing")
    except (ValueError, KeyError, OSError) as e:
        msg = str(e)
        raise Bad(path, msg[len(path) + 2:] if msg.startswith(path + ": ") else "bad tokenizer: %s" % msg)


def read_char_meta(path):
    """nanoGPT's character-level meta.pkl (stoi/itos): one piece per character, no merges."""
    import pickle
    meta = pickle.load(open(path, "rb"))
    itos = meta["itos"]
    pieces = [itos[i].encode("utf-8") for i in range(len(itos))]
    return mf.pack_tokenizer(pieces, [0.0] * len(pieces)), mf.TOK_SENTENCEPIECE, 0, -1, -1


def default_tokenizer(src):
    """The tokenizer a Hugging Face directory carries, if any."""
    if os.path.isdir(src):
        for n in ("vocab.json", "tokenizer.json", "tokenizer.bin"):
            if os.path.exists(os.path.join(src, n)):
                return os.path.join(src, n)
    return None


# ---- entry points ----

def read_source(src):
    """(cfg, tensors, description, tok or None) for whatever SRC is."""
    if os.path.isdir(src):
        return read_hf_dir(src) + (None,)
    if not os.path.exists(src):
        raise Bad(src, "no such file or directory")
    if not os.path.isfile(src):  # a FIFO or device would block in open() or never end
        raise Bad(src, "not a regular file")
    with open(src, "rb") as f:
        head = f.read(28)
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        r = read_torch(src)
        return r if len(r) == 4 else r + (None,)
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == 0x616B3432:
        return read_llama2c_ak42(src, open(src, "rb").read()) + (None,)
    if head[:4] == mf.MAGIC:
        return read_attn(src)
    if head[:4] == b"GGUF":
        raise Bad(src, "GGUF (llama.cpp) files are not supported; convert the original checkpoint")
    if len(head) < 28:  # the smallest header of any format here: llama2.c's 7 int32
        raise Bad(src, "file of %d bytes is too short for any known format" % len(head))
    if src.endswith(".safetensors"):
        raise Bad(src, "a bare .safetensors file has no config; pass its Hugging Face directory")
    return read_llama2c_legacy(src, np.memmap(src, dtype=np.uint8, mode="r")) + (None,)


def add_quantize_arguments(ap):
    """--quantize and --group-size, which make_random.py shares."""
    ap.add_argument("--quantize", choices=sorted(mf.QUANTIZE), help="store the matrices quantised: q8_0 = "
                    "int8 values and a float32 scale per group of weights in a row")
    ap.add_argument("--group-size", type=int, metavar="N", help="weights per scale with --quantize (default %d, "
                    "halved until it divides every quantised row)" % mf.DEFAULT_GROUP_SIZE)


def storage_config(cfg, quantize, group_size, prog):
    """cfg set to be stored as --quantize and --group-size say; ValueError if they do not fit it.
    A default group size that had to shrink is worth a note: it costs speed and file size."""
    c = mf.with_weight_type(cfg, quantize, group_size)
    if quantize and group_size is None and c["group_size"] != mf.DEFAULT_GROUP_SIZE:
        print("%s: note: group size %d, the largest power of two up to %d dividing dim %d, n_heads x head_dim %d "
              "and hidden_dim %d" % ((prog, c["group_size"], mf.DEFAULT_GROUP_SIZE) + mf.quantized_widths(c)),
              file=sys.stderr)
    return c


def convert(src, out, tokenizer=None, seq_len=None, quantize=None, group_size=None):
    cfg, tensors, desc, tok = read_source(src)
    if seq_len is not None:
        if seq_len < 1:
            raise Bad(src, "--seq-len %d: a context needs at least 1 position" % seq_len)
        if cfg.get("pos_kind") == mf.POS_LEARNED and seq_len > cfg["seq_len"]:
            raise Bad(src, "--seq-len %d exceeds the %d learned positions" % (seq_len, cfg["seq_len"]))
        if cfg.get("pos_kind") == mf.POS_LEARNED:
            tensors["pos_embedding"] = tensors["pos_embedding"][:seq_len]
        cfg["seq_len"] = seq_len
    if cfg.get("pos_kind") == mf.POS_LEARNED and tensors["pos_embedding"].shape[0] < cfg["seq_len"]:
        raise Bad(src, "pos_embedding has %d rows, fewer than seq_len %d"
                  % (tensors["pos_embedding"].shape[0], cfg["seq_len"]))
    tokpath = tokenizer or default_tokenizer(src)
    if tokpath:
        tok = read_tokenizer(tokpath, cfg["vocab_size"])
    elif tok is None:
        raise Bad(src, "%s carries no vocabulary: pass --tokenizer (e.g. a llama2.c tokenizer.bin)" % desc)
    try:
        cfg = storage_config(cfg, quantize, group_size, "convert.py")
        mf.write_model(out, cfg, tok, {k: f32(v) for k, v in tensors.items()})
    except ValueError as e:
        raise Bad(src, str(e))
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
    return cfg, desc


def export_torch(model, out):
    import torch
    cfg, tensors, _, tok = read_attn(model)
    blob, kind, flags, bos, eos = tok
    obj = {"model": {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()},
           "attn_config": cfg,
           "tokenizer": {"blob": torch.frombuffer(bytearray(blob), dtype=torch.uint8), "kind": kind,
                         "flags": flags, "bos_id": bos, "eos_id": eos}}
    tmp = out + ".tmp"
    try:
        torch.save(obj, tmp)
        os.replace(tmp, out)
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))


def main(argv):
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            sys.stderr.write("convert.py: %s (see --help)\n" % message)
            sys.exit(1)

    ap = Parser(description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="checkpoint file or Hugging Face directory (MODEL.bin with --export-torch)")
    ap.add_argument("out", help="attn.c model file to write (OUT.pt with --export-torch)")
    ap.add_argument("--tokenizer", help="tokenizer file or directory")
    ap.add_argument("--seq-len", type=int, help="the context length: shorter for a long-context checkpoint "
                    "(e.g. 128k); longer only for RoPE or sinusoidal positions")
    ap.add_argument("--export-torch", action="store_true", help="write MODEL.bin back as a PyTorch state dict")
    add_quantize_arguments(ap)
    a = ap.parse_args(argv)
    if a.export_torch and a.quantize:
        ap.error("--quantize does not apply to --export-torch, whose state dict is float32")
    # An output that is an input (or a file in an input directory) would be destroyed.
    for inp in (a.src, a.tokenizer):
        if not (inp and os.path.exists(a.out) and os.path.exists(inp)):
            continue
        out_dir = os.path.dirname(os.path.abspath(a.out))
        if os.path.samefile(a.out, inp) or (os.path.isdir(inp) and os.path.samefile(out_dir, inp)):
            sys.stderr.write("convert.py: %s: writing it would overwrite the input %s\n" % (a.out, inp))
            return 1
    try:
        if a.export_torch:
            export_torch(a.src, a.out)
            print("convert.py: wrote %s" % a.out, file=sys.stderr)
        else:
            cfg, desc = convert(a.src, a.out, a.tokenizer, a.seq_len, a.quantize, a.group_size)
            weights = "Q8_0, group size %d" % cfg["group_size"] if a.quantize else "float32"
            print("convert.py: %s -> %s: dim %d, %d layers, %d heads (%d kv), vocab %d, seq_len %d, %s"
                  % (desc, a.out, cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"],
                     cfg["vocab_size"], cfg["seq_len"], weights), file=sys.stderr)
    except Bad as e:
        sys.stderr.write("convert.py: %s: %s\n" % (e.path, e.msg))
        return 1
    except MemoryError:
        sys.stderr.write("convert.py: %s: out of memory\n" % a.src)
        return 1
    except Exception as e:  # a malformed file can break a reader in ways not foreseen
        msg = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write("convert.py: %s: cannot convert (%s%s)\n" % (a.src, type(e).__name__, ": " + msg if msg else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
