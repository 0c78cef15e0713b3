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

Nothing is lost and nothing guessed: every tensor of SRC is used exactly once, with the shape
its config implies, and finite. A tensor the converter does not use, a missing one, a shape
or layer count the config contradicts, or a NaN or Inf is refused, naming it. Only buffers
known to hold nothing a model file needs (GPT-2's causal masks attn.bias and
attn.masked_bias, Llama's rotary_emb.inv_freq, llama2.c's freq_cis tables) are skipped, and
the closing note names them. An OUT that exists and is not a regular file is refused.
"""
import collections
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modelfile as mf  # noqa: E402
import outfile  # noqa: E402


class Bad(Exception):
    """A problem with one input file; main prints it as `convert.py: FILE: PROBLEM`."""

    def __init__(self, path, msg):
        super().__init__(msg)
        self.path, self.msg = path, msg


# What a reader found: the model file's config and tensors, a description for the closing note,
# the tokenizer if the source carries one, the buffers it skipped, and what --tokenizer could be.
Source = collections.namedtuple("Source", "cfg tensors desc tok skipped tok_hint",
                                defaults=(None, (), "e.g. a llama2.c tokenizer.bin"))


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def np_(t):
    return t.detach().cpu().float().numpy() if hasattr(t, "detach") else np.asarray(t)


def listing(names, most=4):
    """The first few names for a one-line message, and how many more there are."""
    names = list(names)
    return ", ".join(map(str, names[:most])) + (" and %d more" % (len(names) - most) if len(names) > most else "")


def check_finite(path, name, a):
    """Bad naming tensor name if a holds NaN or Inf, and where the first one is."""
    bad = ~np.isfinite(a)
    if bad.any():
        first = np.unravel_index(np.argmax(bad), a.shape)
        raise Bad(path, "tensor %s has %d non-finite value%s (%s at [%s])" % (
            name, bad.sum(), "s" if bad.sum() > 1 else "", a[first], ", ".join(str(int(i)) for i in first)))


class Tensors:
    """A checkpoint's tensors by name, for a reader to take each exactly once.

    take() refuses a missing tensor, a shape other than the config's, and NaN or Inf; finish()
    refuses what nobody took, but for the buffers named in skip, which it returns for the note.
    dims: a letter of a shape -> (its size, what says so), e.g. "d": (768, "n_embd 768").
    layers: (layer i's name prefix, e.g. "h.%d.", the number of layers, the field that says so),
    checked at once against the layer numbers in the names."""

    def __init__(self, path, sd, dims=None, layers=None, skip=()):
        self.path, self.sd, self.dims, self.skip = path, sd, dims or {}, skip
        self.taken = set()
        if layers:
            prefix, n, field = layers
            pattern = re.compile(re.escape(prefix).replace("%d", r"(\d+)"))
            held = sorted({int(m.group(1)) for m in map(pattern.match, sd) if m})
            if held != list(range(n)):
                raise Bad(path, "%s, but the weights hold %s" % (field, "layers " + listing(held, 8) if held else
                                                                  "no layers"))

    def shape(self, name):
        """A tensor's shape, without taking it."""
        if name not in self.sd:
            raise Bad(self.path, "missing tensor %s" % name)
        return tuple(self.sd[name].shape)

    def take(self, name, shape=""):
        """The tensor as a float32 array; shape (a letter of dims an axis) is checked if given."""
        self.shape(name)
        a = np_(self.sd[name])
        want = tuple(self.dims[k][0] for k in shape)
        if shape and a.shape != want:
            why = ", ".join(dict.fromkeys(self.dims[k][1] for k in shape))
            raise Bad(self.path, "%s has shape %s, expected %s from %s" % (name, a.shape, want, why))
        check_finite(self.path, name, a)
        self.taken.add(name)
        return a

    def finish(self, biases=None):
        """The names of the skipped buffers; Bad naming the tensors nobody took, and when they
        include biases what the config says about those (biases, e.g. "bias False in model_args")."""
        left = [k for k in self.sd if k not in self.taken]
        skipped = [k for k in left if any(k == s or k.endswith("." + s) for s in self.skip)]
        unused = [k for k in left if k not in skipped]
        if unused:
            why = " (%s)" % biases if biases and any(k.endswith(".bias") for k in unused) else ""
            raise Bad(self.path, "%d tensor%s convert.py would not use%s: %s" % (
                len(unused), "s" if len(unused) > 1 else "", why, listing(unused)))
        return skipped


def classifier(tn, name, t, tie=None):
    """Whether the logits use the embedding; if not, t["classifier"] is tensor name. tie None:
    absent or equal to the embedding means tied, as llama2.c and nanoGPT save a tied classifier
    as a copy; True or False: config.json's tie_word_embeddings, which the weights must bear out."""
    head = tn.take(name, "Vd") if name in tn.sd else None
    if tie is None:
        tie = head is None or np.array_equal(head, t["tok_embedding"])
    elif tie and head is not None and not np.array_equal(head, t["tok_embedding"]):
        raise Bad(tn.path, "tie_word_embeddings is true, but %s differs from the token embedding" % name)
    elif not tie and head is None:
        raise Bad(tn.path, "tie_word_embeddings is false, but there is no %s" % name)
    if not tie:
        t["classifier"] = head
    return tie


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


# llama2.c's names of a layer's tensors, and their shapes in the letters of llama2c_dims
LLAMA2C_LAYER = dict(attn_norm_w=("attention_norm.weight", "d"), wq=("attention.wq.weight", "dd"),
                     wk=("attention.wk.weight", "kd"), wv=("attention.wv.weight", "kd"),
                     wo=("attention.wo.weight", "dd"), ffn_norm_w=("ffn_norm.weight", "d"),
                     w1=("feed_forward.w1.weight", "hd"), w2=("feed_forward.w2.weight", "dh"),
                     w3=("feed_forward.w3.weight", "hd"))


def llama2c_source(path, sd, header, eps, desc, hidden_why):
    """A Source from llama2.c's tensor names; header is (dim, hidden, n_layers, n_heads, n_kv_heads,
    vocab, seq_len). output.weight, if present and not the embedding itself, is the classifier."""
    dim, hidden, L, H, KV, V, S = header
    dims = {"d": (dim, "dim %d" % dim), "k": (KV * (dim // H), "n_kv_heads %d x head size %d" % (KV, dim // H)),
            "h": (hidden, hidden_why), "V": (V, "vocab_size %d" % V)}
    tn = Tensors(path, sd, dims, ("layers.%d.", L, "n_layers %d" % L), skip=("freq_cis_real", "freq_cis_imag"))
    t = {"tok_embedding": tn.take("tok_embeddings.weight", "Vd"), "final_norm_w": tn.take("norm.weight", "d")}
    for i in range(L):
        for ours, (theirs, shape) in LLAMA2C_LAYER.items():
            t["layers.%d.%s" % (i, ours)] = tn.take("layers.%d.%s" % (i, theirs), shape)
    tied = classifier(tn, "output.weight", t)
    return Source(llama_cfg(dim, hidden, L, H, KV, V, S, tied, eps), t, desc, skipped=tn.finish())


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
    # the per-layer tensors are stacked, a layer a row
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
    sd, off = {}, 0
    for name, s in shapes:
        k = int(np.prod(s))
        a = flat[off:off + k].reshape(s)
        off += k
        if name in ("tok_embeddings.weight", "norm.weight"):
            sd[name] = a
        else:
            sd.update(("layers.%d.%s" % (i, name), a[i]) for i in range(L))
    if floats == n + freq + cls:
        sd["freq_cis_real"], sd["freq_cis_imag"] = flat[off:off + freq // 2], flat[off + freq // 2:off + freq]
    if not tied:
        sd["output.weight"] = flat[len(flat) - V * dim:].reshape(V, dim)
    return llama2c_source(path, sd, (dim, hidden, L, H, KV, V, S), 1e-5, "llama2.c legacy .bin",
                          "hidden_dim %d" % hidden)


def read_llama2c_ak42(path, data):
    if len(data) < 256:
        raise Bad(path, "truncated: %d bytes, shorter than the 256-byte ak42 header" % len(data))
    version = struct.unpack_from("<i", data, 4)[0]
    header = struct.unpack_from("<7i", data, 8)
    dim, hidden, L, H, KV, V, S = header
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
    kind = "llama2.c ak42 version 1 .bin" if version == 1 else "llama2.c ak42 version 2 (Q8_0, dequantised) .bin"
    return llama2c_source(path, arrays, header, 1e-5, kind, "hidden_dim %d" % hidden)


def read_llama2c_pt(path, ck):
    a = ck["model_args"]
    sd = strip_prefix(ck["model"], "_orig_mod.")
    try:
        dim, L, H, V, S = (int(a[k]) for k in ("dim", "n_layers", "n_heads", "vocab_size", "max_seq_len"))
    except KeyError as e:
        raise Bad(path, "model_args lacks %s" % e)
    KV = int(a.get("n_kv_heads") or H)
    if a.get("hidden_dim"):
        hidden, why = int(a["hidden_dim"]), "hidden_dim %d" % a["hidden_dim"]
    elif a.get("multiple_of"):
        # llama2.c's FeedForward: 2/3 of 4 x dim, rounded up to a multiple of multiple_of
        m = int(a["multiple_of"])
        hidden, why = -(-int(2 * 4 * dim / 3) // m) * m, "dim %d and multiple_of %d" % (dim, m)
    else:
        w1 = "layers.0.feed_forward.w1.weight"
        if w1 not in sd:
            raise Bad(path, "state dict lacks %s" % w1)
        hidden, why = int(sd[w1].shape[0]), "the rows of %s" % w1
    check_llama2c_dims(path, dim, hidden, L, H, KV, V, S)
    return llama2c_source(path, sd, (dim, hidden, L, H, KV, V, S), float(a.get("norm_eps", 1e-5)),
                          "llama2.c train.py checkpoint", why)


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
    tn = Tensors(path, sd, layers=("h.%d.", L, "n_layer %d in model_args" % L), skip=GPT2_BUFFERS)
    hidden = tn.shape("h.0.mlp.c_fc.weight")[0]  # 4 x n_embd in nanoGPT's model.py, but forks vary it
    tn.dims = gpt2_dims(d, V, S, "block_size", hidden, "h.0.mlp.c_fc.weight's %d rows" % hidden)
    t = gpt2_tensors(L, tn, transpose=False, bias=bias)
    cfg = gpt2_cfg(d, hidden, L, H, V, S, ffn_kind=mf.FFN_GELU_ERF, eps=1e-5, bias=bias)
    cfg["tied_classifier"] = int(classifier(tn, "lm_head.weight", t))
    return Source(cfg, t, "nanoGPT checkpoint", skipped=tn.finish("bias %s in model_args" % bias),
                  tok_hint=nanogpt_tokenizer_hint(ck, V))


def nanogpt_tokenizer_hint(ck, V):
    """Where nanoGPT's sample.py finds the vocabulary: the dataset's meta.pkl (a character-level
    one), else GPT-2's, which has 50257 tokens (50304 in a checkpoint, padded for speed)."""
    config = ck.get("config")
    dataset = config.get("dataset") if isinstance(config, dict) else None
    meta = "data/%s/meta.pkl" % dataset if dataset else "data/DATASET/meta.pkl"
    if V in (50257, 50304):
        return "GPT-2's vocab.json with merges.txt beside it, or nanoGPT's %s if its dataset has one" % meta
    return "the meta.pkl of the dataset it was trained on, nanoGPT's %s" % meta


def read_attn(path):
    """An attn.c model file, float32 or Q8_0 (dequantised), as a source."""
    try:
        cfg, tok, t = mf.read_model(path)
    except (ValueError, OSError) as e:
        raise Bad(path, str(e))
    for name, a in t.items():
        check_finite(path, name, a)
    q8 = cfg["weight_type"] == mf.WEIGHTS_Q8_0
    return Source(cfg, t, "attn.c model file" + (" (Q8_0, dequantised)" if q8 else ""), tok)


def read_own_export(path, ck):
    cfg = dict(ck["attn_config"])
    tn = Tensors(path, ck["model"])
    t = {n: tn.take(n) for n, _ in mf.tensor_specs(mf.complete_config(cfg))}
    tn.finish()
    tk = ck["tokenizer"]
    tok = (np_(tk["blob"]).astype(np.uint8).tobytes(), int(tk["kind"]), int(tk["flags"]),
           int(tk["bos_id"]), int(tk["eos_id"]))
    return Source(cfg, t, "attn.c torch export", tok)


def strip_prefix(sd, prefix):
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in sd.items()}


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
    with outfile.replacing(path) as f:
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
                part = reader(p)
                twice = sorted(set(part) & set(out))
                if twice:  # one copy would be dropped, and they may differ
                    raise Bad(p, "holds %s, which another shard holds too" % listing(twice))
                out.update(part)
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


def gpt2_dims(d, V, S, S_field, hidden, hidden_why):
    """Tensors' dims for GPT-2 naming: d, T (q, k and v together), h, V and S."""
    return {"d": (d, "n_embd %d" % d), "T": (3 * d, "n_embd %d" % d), "h": (hidden, hidden_why),
            "V": (V, "vocab_size %d" % V), "S": (S, "%s %d" % (S_field, S))}


# GPT-2's causal-mask buffers, which older checkpoints save with the weights
GPT2_BUFFERS = ("attn.bias", "attn.masked_bias")


def gpt2_tensors(L, tn, transpose, bias):
    """GPT-2 naming (HF with its input-major Conv1D when transpose, nanoGPT's nn.Linear otherwise)."""
    d = tn.dims["d"][0]

    def w(name, shape):  # a matrix, shape as nn.Linear has it: (out, in)
        return tn.take(name, shape[::-1]).T if transpose else tn.take(name, shape)

    def b(name, shape):
        return tn.take(name, shape) if bias else np.zeros(tn.dims[shape][0], np.float32)
    t = {"tok_embedding": tn.take("wte.weight", "Vd"), "pos_embedding": tn.take("wpe.weight", "Sd"),
         "final_norm_w": tn.take("ln_f.weight", "d"), "final_norm_b": b("ln_f.bias", "d")}
    for i in range(L):
        p, q = "h.%d." % i, "layers.%d." % i
        qkv = w(p + "attn.c_attn.weight", "Td")
        t[q + "wq"], t[q + "wk"], t[q + "wv"] = qkv[:d], qkv[d:2 * d], qkv[2 * d:]
        if bias:
            bqkv = tn.take(p + "attn.c_attn.bias", "T")
            t[q + "bq"], t[q + "bk"], t[q + "bv"] = bqkv[:d], bqkv[d:2 * d], bqkv[2 * d:]
            t[q + "bo"] = tn.take(p + "attn.c_proj.bias", "d")
            t[q + "b1"] = tn.take(p + "mlp.c_fc.bias", "h")
            t[q + "b2"] = tn.take(p + "mlp.c_proj.bias", "d")
        t[q + "wo"] = w(p + "attn.c_proj.weight", "dd")
        t[q + "w1"] = w(p + "mlp.c_fc.weight", "hd")
        t[q + "w2"] = w(p + "mlp.c_proj.weight", "dh")
        t[q + "attn_norm_w"], t[q + "attn_norm_b"] = tn.take(p + "ln_1.weight", "d"), b(p + "ln_1.bias", "d")
        t[q + "ffn_norm_w"], t[q + "ffn_norm_b"] = tn.take(p + "ln_2.weight", "d"), b(p + "ln_2.bias", "d")
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
        raise Bad(cpath, "n_head %d does not divide n_embd %d" % (H, d_))
    # the feed-forward width: n_inner, or 4 x n_embd when it is null, as Hugging Face's GPT2MLP has it
    hidden = int(c.get("n_inner") or 4 * d_)
    why = "n_inner %d" % hidden if c.get("n_inner") else "4 x n_embd %d" % d_
    tn = Tensors(d, strip_prefix(read_hf_weights(d), "transformer."), gpt2_dims(d_, V, S, S_field, hidden, why),
                 ("h.%d.", L, "n_layer %d in config.json" % L), skip=GPT2_BUFFERS)
    t = gpt2_tensors(L, tn, transpose=True, bias=True)
    cfg = gpt2_cfg(d_, hidden, L, H, V, S, GPT2_ACTIVATIONS[act], float(c.get("layer_norm_epsilon", 1e-5)),
                   bias=True)
    cfg["tied_classifier"] = int(classifier(tn, "lm_head.weight", t, bool(c.get("tie_word_embeddings", True))))
    return Source(cfg, t, "Hugging Face GPT-2 directory", skipped=tn.finish(), tok_hint=HF_TOKENIZER_HINT)


def unpermute_rope(w, n_heads, head_dim, rope_dims):
    """HF rotates pairs (j, j + r/2) of each head; FORMAT.md rotates (2j, 2j+1): reorder rows."""
    half = rope_dims // 2
    idx = np.concatenate([np.stack([np.arange(half), np.arange(half) + half], 1).reshape(-1),
                          np.arange(rope_dims, head_dim)])
    rows = (np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)
    return w[rows]


# Hugging Face Llama's names of a layer's tensors, our names and their shapes in Tensors' dims;
# then the biases by the bias_flags bit that brings them
HF_LLAMA_LAYER = dict(attn_norm_w=("input_layernorm.weight", "d"), wq=("self_attn.q_proj.weight", "qd"),
                      wk=("self_attn.k_proj.weight", "kd"), wv=("self_attn.v_proj.weight", "kd"),
                      wo=("self_attn.o_proj.weight", "dq"), ffn_norm_w=("post_attention_layernorm.weight", "d"),
                      w1=("mlp.gate_proj.weight", "hd"), w3=("mlp.up_proj.weight", "hd"),
                      w2=("mlp.down_proj.weight", "dh"))
HF_LLAMA_BIASES = {mf.BIAS_QKV: dict(bq=("self_attn.q_proj.bias", "q"), bk=("self_attn.k_proj.bias", "k"),
                                     bv=("self_attn.v_proj.bias", "k")),
                   mf.BIAS_O: dict(bo=("self_attn.o_proj.bias", "d")),
                   mf.BIAS_FFN: dict(b1=("mlp.gate_proj.bias", "h"), b3=("mlp.up_proj.bias", "h"),
                                     b2=("mlp.down_proj.bias", "d"))}
HF_TOKENIZER_HINT = "the model's tokenizer.json, or vocab.json with merges.txt beside it"


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
    dims = {"d": (dim, "hidden_size %d" % dim), "h": (hidden, "intermediate_size %d" % hidden),
            "q": (H * hd, "num_attention_heads %d x head_dim %d" % (H, hd)),
            "k": (KV * hd, "num_key_value_heads %d x head_dim %d" % (KV, hd)), "V": (V, "vocab_size %d" % V)}
    tn = Tensors(d, read_hf_weights(d), dims, ("model.layers.%d.", L, "num_hidden_layers %d in config.json" % L),
                 skip=("rotary_emb.inv_freq",))
    names = dict(HF_LLAMA_LAYER)
    for flag, more in HF_LLAMA_BIASES.items():
        if bias & flag:
            names.update(more)
    t = {"tok_embedding": tn.take("model.embed_tokens.weight", "Vd"), "final_norm_w": tn.take("model.norm.weight", "d")}
    for i in range(L):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        for ours, (theirs, shape) in names.items():
            t[q + ours] = tn.take(p + theirs, shape)
        for k, n in (("q", H), ("k", KV)):
            t[q + "w" + k] = unpermute_rope(t[q + "w" + k], n, hd, rope_dims)
            if bias & mf.BIAS_QKV:
                t[q + "b" + k] = unpermute_rope(t[q + "b" + k], n, hd, rope_dims)
    # LlamaConfig, MistralConfig and Qwen2Config default tie_word_embeddings to false
    tied = classifier(tn, "lm_head.weight", t, bool(c.get("tie_word_embeddings", False)))
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=KV, head_dim=hd,
               vocab_size=V, seq_len=S, rope_theta=float(c.get("rope_theta", 10000.0)),
               rope_dims=rope_dims, norm_eps=float(c.get("rms_norm_eps", 1e-6)),
               bias_flags=bias, tied_classifier=int(tied))
    biases = "attention_bias %s, mlp_bias %s, model_type %s in config.json" % (
        json.dumps(bool(c.get("attention_bias"))), json.dumps(bool(c.get("mlp_bias"))), mt)
    return Source(cfg, t, "Hugging Face %s directory" % mt, skipped=tn.finish(biases), tok_hint=HF_TOKENIZER_HINT)


# ---- tokenizers ----

def read_tokenizer(path, vocab_size, model):
    """(blob, kind, flags, bos, eos) from any tokenizer file the module docstring lists, for the
    vocab_size of the checkpoint model (named in messages)."""
    if os.path.isdir(path):
        for names in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"), ("tokenizer.json",),
                      ("tokenizer.bin",)):
            if all(os.path.exists(os.path.join(path, n)) for n in names):
                return read_tokenizer(os.path.join(path, names[0]), vocab_size, model)
        raise Bad(path, "directory has no tokenizer (vocab.json+merges.txt, encoder.json+vocab.bpe, "
                  "tokenizer.json or tokenizer.bin)")
    if not os.path.exists(path):
        raise Bad(path, "tokenizer file not found")
    base = os.path.basename(path)
    try:
        if base.endswith(".pkl"):
            tok = read_char_meta(path, vocab_size, model)
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
        n = len(mf.parse_tokenizer(tok[0])[0])
        if n > vocab_size:
            raise Bad(path, "has %d pieces, more than the model's vocab_size %d (%s)" % (n, vocab_size, model))
        return (mf.resize_tokenizer(tok[0], vocab_size),) + tuple(tok[1:])
    except ImportError:
        raise Bad(path, "this tokenizer kind needs tools/tokenizer_blob.py, which is missing")
    except (ValueError, KeyError, OSError) as e:
        msg = str(e)
        raise Bad(path, msg[len(path) + 2:] if msg.startswith(path + ": ") else "bad tokenizer: %s" % msg)


def read_char_meta(path, vocab_size, model):
    """nanoGPT's character-level meta.pkl (stoi/itos): one piece per character, no merges. nanoGPT
    gives such a model exactly meta.pkl's characters as its vocabulary: any other vocab_size means
    another dataset's meta.pkl (or a model that has none)."""
    import pickle
    with open(path, "rb") as f:
        try:
            meta = pickle.load(f)
        except Exception as e:  # unpickling fails in as many ways as the bytes allow
            raise Bad(path, "cannot read the pickle (%s)" % type(e).__name__)
    itos = meta.get("itos") if isinstance(meta, dict) else None
    if not isinstance(itos, dict):
        raise Bad(path, "has no itos table: not a nanoGPT character-level meta.pkl")
    if len(itos) != vocab_size:
        raise Bad(path, "has %d characters, but %s has vocab_size %d: nanoGPT gives a character-level model exactly "
                  "the characters of its dataset's meta.pkl, so this one belongs to another model"
                  % (len(itos), model, vocab_size))
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
    """The Source of whatever SRC is."""
    if os.path.isdir(src):
        return read_hf_dir(src)
    if not os.path.exists(src):
        raise Bad(src, "no such file or directory")
    if not os.path.isfile(src):  # a FIFO or device would block in open() or never end
        raise Bad(src, "not a regular file")
    with open(src, "rb") as f:
        head = f.read(28)
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        return read_torch(src)
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == 0x616B3432:
        return read_llama2c_ak42(src, open(src, "rb").read())
    if head[:4] == mf.MAGIC:
        return read_attn(src)
    if head[:4] == b"GGUF":
        raise Bad(src, "GGUF (llama.cpp) files are not supported; convert the original checkpoint")
    if len(head) < 28:  # the smallest header of any format here: llama2.c's 7 int32
        raise Bad(src, "file of %d bytes is too short for any known format" % len(head))
    if src.endswith(".safetensors"):
        raise Bad(src, "a bare .safetensors file has no config; pass its Hugging Face directory")
    return read_llama2c_legacy(src, np.memmap(src, dtype=np.uint8, mode="r"))


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
    """Returns the config written and the Source read."""
    source = read_source(src)
    cfg, tensors = source.cfg, source.tensors
    if seq_len is not None:
        if seq_len < 1:
            raise Bad(src, "--seq-len %d: a context needs at least 1 position" % seq_len)
        if cfg.get("pos_kind") == mf.POS_LEARNED and seq_len > cfg["seq_len"]:
            raise Bad(src, "--seq-len %d exceeds the %d learned positions" % (seq_len, cfg["seq_len"]))
        if cfg.get("pos_kind") == mf.POS_LEARNED:
            tensors["pos_embedding"] = tensors["pos_embedding"][:seq_len]
        cfg["seq_len"] = seq_len
    tokpath = tokenizer or default_tokenizer(src)
    if tokpath:
        tok = read_tokenizer(tokpath, cfg["vocab_size"], src)
    elif source.tok is None:
        raise Bad(src, "%s carries no vocabulary: pass --tokenizer (%s)" % (source.desc, source.tok_hint))
    else:
        tok = source.tok
    try:
        cfg = storage_config(cfg, quantize, group_size, "convert.py")
        mf.write_model(out, cfg, tok, {k: f32(v) for k, v in tensors.items()})
    except ValueError as e:
        raise Bad(src, str(e))
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
    return cfg, source


def export_torch(model, out):
    import torch
    source = read_attn(model)
    blob, kind, flags, bos, eos = source.tok
    obj = {"model": {k: torch.from_numpy(np.array(v)) for k, v in source.tensors.items()},
           "attn_config": source.cfg,
           "tokenizer": {"blob": torch.frombuffer(bytearray(blob), dtype=torch.uint8), "kind": kind,
                         "flags": flags, "bos_id": bos, "eos_id": eos}}
    try:
        with outfile.replacing(out) as f:
            torch.save(obj, f)
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
    ap.add_argument("--export-hf", action="store_true", help="write MODEL.bin as a Hugging Face directory OUT "
                    "(tools/export_hf.py)")
    add_quantize_arguments(ap)
    a = ap.parse_args(argv)
    if a.export_torch and a.quantize:
        ap.error("--quantize does not apply to --export-torch, whose state dict is float32")
    if a.export_hf and a.quantize:
        ap.error("--quantize does not apply to --export-hf, which keeps the weights as stored")
    try:  # before any work: a device or FIFO as OUT would be replaced by a regular file in the end
        outfile.check(a.out, "a directory" if a.export_hf else "a regular file")
    except OSError as e:
        sys.stderr.write("convert.py: %s: %s\n" % (a.out, e))
        return 1
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
        elif a.export_hf:
            sys.modules.setdefault("convert", sys.modules[__name__])  # export_hf's Bad is this run's
            import export_hf
            mt = export_hf.export(a.src, a.out)
            print("convert.py: %s -> %s: Hugging Face %s directory" % (a.src, a.out, mt), file=sys.stderr)
        else:
            cfg, source = convert(a.src, a.out, a.tokenizer, a.seq_len, a.quantize, a.group_size)
            weights = "Q8_0, group size %d" % cfg["group_size"] if a.quantize else "float32"
            skipped = "; skipped %s, buffers a model file does not need" % listing(source.skipped) \
                if source.skipped else ""
            print("convert.py: %s -> %s: dim %d, %d layers, %d heads (%d kv), vocab %d, seq_len %d, %s%s"
                  % (source.desc, a.out, cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"],
                     cfg["vocab_size"], cfg["seq_len"], weights, skipped), file=sys.stderr)
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
