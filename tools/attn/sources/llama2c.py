"""llama2.c checkpoints: the legacy .bin (7-int header), `ak42` versions 1 and 2 (Q8_0, kept as
its integers and scales: weights.Q8Stored), and train.py's .pt (read_llama2c_pt, given the
loaded checkpoint by torchfile.read_torch)."""
import struct

import numpy as np

from attn.errors import Bad
from attn.tensors import Source, Tensors, classifier, known_args, strip_prefix
from attn.weights import Q8Stored, q8_0_choice

# llama2.c model.py's ModelArgs (dropout acts only in training)
LLAMA2C_ARGS = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "hidden_dim", "multiple_of", "norm_eps",
                "max_seq_len", "dropout")


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
        # Q8_0: per tensor, int8 values then one float32 scale per group of gs values of the
        # flattened tensor; kept as such, so that OUT stores the same integers and scales
        for name, s in mats:
            k = int(np.prod(s))
            q = np.frombuffer(data, dtype=np.int8, count=k, offset=off).reshape(s)
            sc = np.frombuffer(data, dtype="<f4", count=k // gs, offset=off + k)
            arrays[name] = Q8Stored.of(q, sc, gs)
            off += k + 4 * (k // gs)
    kind = "llama2.c ak42 version %d%s .bin" % (version, " (Q8_0)" if version == 2 else "")
    src = llama2c_source(path, arrays, header, 1e-5, kind, "hidden_dim %d" % hidden)
    return src._replace(weights=q8_0_choice(gs, "llama2.c's Q8_0 matrices")) if version == 2 else src


def read_llama2c_pt(path, ck):
    a = ck["model_args"]
    known_args(path, a, LLAMA2C_ARGS, "llama2.c's ModelArgs")
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
