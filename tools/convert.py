"""Convert a checkpoint into an attn.c model file (docs/FORMAT.md), or export one back.

  convert.py SRC OUT [--tokenizer TOK] [--seq-len N] [--weights f32|bf16|f16|q8_0 [--group-size N]]
             [--chat-template NAME]
  convert.py --export-torch MODEL.bin OUT.pt

SRC is recognised by its content:
  llama2.c legacy .bin (7-int header), llama2.c `ak42` version 1 (fp32) and version 2
  (Q8_0, dequantised) .bin, llama2.c train.py checkpoints (.pt with model_args.dim),
  nanoGPT ckpt.pt (model_args.n_layer), a Hugging Face directory of model_type gpt2, llama
  (Llama 2 and 3.x, TinyLlama, SmolLM2), mistral, qwen2 (Qwen2.5), qwen3 or gemma3_text
  (Gemma 3 270M and 1B), this tool's own --export-torch output, and attn.c model files (a
  Q8_0 one dequantised), e.g. to quantise a model ./train wrote, and GGUF files of
  general.architecture llama, qwen2, qwen3, gemma3 or gpt2 (tools/gguf_model.py, which says
  how each GGUF weight type is stored).
A Hugging Face config.json is read as transformers reads it, family by family; a setting it
would act on that this build cannot reproduce (a RoPE scaling other than linear and llama3,
an activation, softcapping, sliding windows outside Gemma 3, ...) is refused by name.
OUT stores the matrices as SRC does (float32, bfloat16 or float16; a checkpoint mixing them,
or holding Q8_0, gives float32), or as --weights says: f32, bf16, f16 (rounded to nearest
even), or q8_0, int8 with a float32 scale per group of --group-size weights in a row
(docs/FORMAT.md); --quantize q8_0 is --weights q8_0. bfloat16 and float16 are read bit for
bit and widen to float32 exactly. The closing note says which type was chosen and why.
TOK: llama2.c tokenizer.bin; GPT-2 vocab.json (+ merges.txt beside it) or encoder.json
(+ vocab.bpe) or a directory holding them; Hugging Face tokenizer.json; nanoGPT meta.pkl; a
GGUF file's tokenizer.ggml.* (vocabulary-only files too).
A tokenizer with more pieces than the model's vocab_size is refused; one with fewer is
padded with empty pieces that nothing produces.

--export-torch writes {'model': state_dict, 'attn_config': cfg, 'tokenizer': {...}} with
torch.save; the state dict holds float32 tensors (a Q8_0 file's dequantised; a bfloat16 or
float16 file's matrices as torch.bfloat16 or float16) under the model file's tensor names, the
parameter names of tools/reference.py's module (load_state_dict works on it), and
convert.py reads it back bit for bit.

Nothing is lost and nothing guessed: every tensor of SRC is used exactly once, with the shape
its config implies, and finite. A tensor the converter does not use, a missing one, a shape
or layer count the config contradicts, or a NaN or Inf is refused, naming it. Only buffers
known to hold nothing a model file needs (GPT-2's causal masks attn.bias and
attn.masked_bias, Llama's rotary_emb.inv_freq, llama2.c's freq_cis tables) are skipped, and
the closing note names them.

OUT is replaced as ./train replaces its -o: only with --force, and only if it is an attn.c model
file (with --export-torch, a file --export-torch wrote: a torch zip whose pickle holds the key
attn_config; with --export-hf, a folder holding only an export's files and its attn_export.json).
A device, FIFO, socket or directory as OUT is refused. OUT - writes to standard output (the
--export-hf folder cannot); SRC and --tokenizer are read by name, never from standard input.

An instruct checkpoint's chat template (chat_template.jinja or tokenizer_config.json's
chat_template, beside the tokenizer.json or in SRC) goes into OUT as a chat section, its family
recognised by tools/chat_template.py (chatml, qwen3, llama3, llama2, gemma, zephyr); a template it
does not recognise is refused by name. --chat-template NAME chooses the family instead, also for a
checkpoint without a template (a llama2.c-format Llama-2-chat: llama2). An attn.c model file
keeps its chat section.
"""
import argparse
import collections
import json
import math
import os
import re
import struct
import sys

if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/cli_main.py)
    import cli_main
    cli_main.guard()
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modelfile as mf  # noqa: E402
import outfile  # noqa: E402
import safe_pickle  # noqa: E402


class Bad(Exception):
    """A problem with one input file; main prints it as `convert.py: FILE: PROBLEM`."""

    def __init__(self, path, msg):
        super().__init__(msg)
        self.path, self.msg = path, msg


# What a reader found: the model file's config and tensors (Weight objects, or arrays), a
# description for the closing note, the tokenizer if the source carries one, the buffers it
# skipped, and what --tokenizer could be.
# weights, if given, makes the weight choice instead of weight_choice: (tensors, --weights,
# --group-size) -> (weights, why, group size), for a source whose types weight_choice does not know.
Source = collections.namedtuple("Source", "cfg tensors desc tok skipped tok_hint weights chat",
                                defaults=(None, (), "e.g. a llama2.c tokenizer.bin", None, b""))

# A checkpoint's number types by their safetensors names, and what the tools call the same
# storage (--weights)
STORED_NAMES = {"F32": "f32", "BF16": "bf16", "F16": "f16"}
LONG_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


class Stored:
    """One tensor as its checkpoint holds it: float32, float16, or bfloat16 as its uint16 bits
    (numpy has no bfloat16). float32() widens it, exactly."""

    def __init__(self, raw, dtype):
        self.raw, self.dtype, self.shape = raw, dtype, tuple(raw.shape)

    def float32(self):
        return mf.from_bf16(self.raw) if self.dtype == "BF16" else np.asarray(self.raw, dtype=np.float32)

    def nonfinite(self):
        """A bool array marking NaN and Inf, computed on the stored bits."""
        if self.dtype == "BF16":
            return (np.asarray(self.raw) & 0x7F80) == 0x7F80  # exponent all ones
        return ~np.isfinite(self.raw)


def stored(v):
    """v (a numpy array, a torch tensor, or Stored already) as Stored, keeping its number type."""
    if isinstance(v, Stored):
        return v
    if hasattr(v, "detach"):
        import torch
        t = v.detach().cpu()
        if t.dtype == torch.bfloat16:
            return Stored(t.contiguous().view(torch.int16).numpy().view("<u2"), "BF16")
        if t.dtype == torch.float16:
            return Stored(t.numpy(), "F16")
        return Stored(t.float().numpy(), "F32")
    a = np.asarray(v)
    return Stored(a, "F16" if a.dtype == np.float16 else "F32")


class Weight:
    """A tensor a reader took: its shape and stored type at once, its float32 values (np.asarray)
    when the writer gets to it, so that a conversion widens one tensor at a time."""

    def __init__(self, st):
        self.st, self.shape, self.stored = st, st.shape, st.dtype

    def __array__(self, dtype=None, copy=None):
        a = self.st.float32()
        return a if dtype is None else a.astype(dtype, copy=False)

    def view(self, f):
        """The tensor with f (a transpose, a slice, an order of rows) applied to its stored values."""
        return Weight(type(self.st)(f(self.st.raw), self.st.dtype))

    def q8_0(self, group):
        """Its exact (int8 values, float32 scales) at this group size if it is stored as integers
        times scales (a GGUF Q8_0, Q4_0 or Q6_K tensor), else None."""
        return self.st.q8_0(group) if hasattr(self.st, "q8_0") else None


def listing(names, most=4):
    """The first few names for a one-line message, and how many more there are."""
    names = list(names)
    return ", ".join(map(str, names[:most])) + (" and %d more" % (len(names) - most) if len(names) > most else "")


def check_finite(path, name, st):
    """Bad naming tensor name if st (Stored) holds NaN or Inf, and where the first one is."""
    bad = st.nonfinite()
    if bad.any():
        n = int(bad.sum())
        first = np.unravel_index(np.argmax(bad), st.shape)
        value = Stored(np.asarray(st.raw)[first].reshape(1), st.dtype).float32()[0]
        raise Bad(path, "tensor %s has %d non-finite value%s (%s at [%s])" % (
            name, n, "s" if n > 1 else "", value, ", ".join(str(int(i)) for i in first)))


class Tensors:
    """A checkpoint's tensors by name, for a reader to take each exactly once.

    take() refuses a missing tensor, a shape other than the config's, and NaN or Inf; finish()
    refuses what nobody took, but for the buffers named in skip, which it returns for the note.
    sd: name -> numpy array, torch tensor or Stored.
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
        """The tensor as a Weight; shape (a letter of dims an axis) is checked if given."""
        self.shape(name)
        st = stored(self.sd[name])
        want = tuple(self.dims[k][0] for k in shape)
        if shape and st.shape != want:
            why = ", ".join(dict.fromkeys(self.dims[k][1] for k in shape))
            raise Bad(self.path, "%s has shape %s, expected %s from %s" % (name, st.shape, want, why))
        check_finite(self.path, name, st)
        self.taken.add(name)
        return Weight(st)

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
    """An attn.c model file as a source: float32, bfloat16 or float16 matrices as stored, Q8_0
    ones dequantised."""
    try:
        cfg, tok, t = mf.read_model(path, dequantize=False)
    except (ValueError, OSError) as e:
        raise Bad(path, str(e))
    bf16 = cfg["weight_type"] == mf.WEIGHTS_BF16
    sd = {n: Stored(mf.dequantize_q8_0(*a), "F32") if isinstance(a, tuple) else
          Stored(a, "BF16") if bf16 and a.dtype == np.uint16 else stored(a) for n, a in t.items()}
    tn = Tensors(path, sd)
    t = {n: tn.take(n) for n in sd}
    q8 = cfg["weight_type"] == mf.WEIGHTS_Q8_0
    return Source(cfg, t, "attn.c model file" + (" (Q8_0, dequantised)" if q8 else ""), tok,
                  chat=mf.read_chat_section(path))


def read_own_export(path, ck):
    cfg = dict(ck["attn_config"])
    tn = Tensors(path, ck["model"])
    t = {n: tn.take(n) for n, _ in mf.tensor_specs(mf.complete_config(cfg))}
    tn.finish()
    tk = ck["tokenizer"]
    tok = (np.asarray(tk["blob"], dtype=np.uint8).tobytes(), int(tk["kind"]), int(tk["flags"]),
           int(tk["bos_id"]), int(tk["eos_id"]))
    return Source(cfg, t, "attn.c torch export", tok)


def strip_prefix(sd, prefix):
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in sd.items()}


def read_torch(path):
    import pickle
    try:
        ck = safe_pickle.torch_load(path)
    except safe_pickle.Refused as e:
        raise Bad(path, str(e))
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as e:
        if "zip" in str(e).lower() or "truncat" in str(e).lower() or "EOF" in str(e):
            raise Bad(path, "cannot read the PyTorch file, truncated or corrupt (%s)" % str(e).splitlines()[0])
        raise Bad(path, "cannot read the PyTorch file: %s" % (str(e).splitlines() or [type(e).__name__])[0])
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

SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}  # bfloat16 as its bits


def read_safetensors_stored(path):
    """name -> Stored from a .safetensors file, parsed with numpy and mapped, not read: each
    tensor as its file holds it (F32, F16, BF16)."""
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
            dt, shape = info["dtype"], [int(s) for s in info["shape"]]
            b, e = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise Bad(path, "bad safetensors entry for %s" % name)
        if dt not in SAFETENSORS_DTYPES:
            raise Bad(path, "tensor %s has dtype %s (supported: F32, F16, BF16)" % (name, dt))
        need = np.dtype(SAFETENSORS_DTYPES[dt]).itemsize * int(np.prod(shape))
        if min(shape, default=0) < 0 or not 0 <= b <= e or e - b != need:
            raise Bad(path, "tensor %s: %s of shape %s takes %d bytes, but its data_offsets %d..%d hold %d"
                      % (name, dt, shape, need, b, e, e - b))
        if e > len(raw):
            raise Bad(path, "truncated: tensor %s needs bytes up to %d, the data has %d" % (name, e, len(raw)))
        out[name] = Stored(raw[b:e].view(SAFETENSORS_DTYPES[dt]).reshape(shape), dt)
    return out


def read_safetensors(path):
    """name -> float32 array from a .safetensors file, F16 and BF16 widened exactly."""
    return {k: v.float32() for k, v in read_safetensors_stored(path).items()}


def write_safetensors(path, tensors, dtype="F32"):
    """Tensors (float32 values) to a .safetensors file, stored as dtype: F32, F16, or BF16
    (rounded to nearest even; exact for values that are bfloat16 already)."""
    to_stored = {"F32": lambda v: np.ascontiguousarray(v, dtype="<f4"),
                 "F16": lambda v: np.ascontiguousarray(v, dtype="<f2"),
                 "BF16": lambda v: mf.to_bf16(np.asarray(v, dtype=np.float32))}[dtype]
    item = np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
    meta, off = {}, 0
    for k, v in tensors.items():
        nb = int(np.prod(np.shape(v))) * item
        meta[k] = {"dtype": dtype, "shape": list(np.shape(v)), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(meta).encode()
    h += b" " * (-len(h) % 8)
    with outfile.replacing(path) as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for v in tensors.values():
            f.write(to_stored(v).tobytes())


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


def read_torch_state_dict(path):
    try:
        sd = safe_pickle.torch_load(path)
    except safe_pickle.Refused as e:
        raise Bad(path, str(e))
    except Exception as e:
        raise Bad(path, "cannot read the PyTorch file: %s" % (str(e).splitlines() or [type(e).__name__])[0])
    return {k: stored(v) for k, v in sd.items()}


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
        return tn.take(name, shape[::-1]).view(np.transpose) if transpose else tn.take(name, shape)

    def thirds(a):  # q, k and v of GPT-2's c_attn, the rows of a
        return (a.view(lambda x, k=k: x[k * d:(k + 1) * d]) for k in range(3))

    def b(name, shape):
        return tn.take(name, shape) if bias else np.zeros(tn.dims[shape][0], np.float32)
    t = {"tok_embedding": tn.take("wte.weight", "Vd"), "pos_embedding": tn.take("wpe.weight", "Sd"),
         "final_norm_w": tn.take("ln_f.weight", "d"), "final_norm_b": b("ln_f.bias", "d")}
    for i in range(L):
        p, q = "h.%d." % i, "layers.%d." % i
        t[q + "wq"], t[q + "wk"], t[q + "wv"] = thirds(w(p + "attn.c_attn.weight", "Td"))
        if bias:
            t[q + "bq"], t[q + "bk"], t[q + "bv"] = thirds(tn.take(p + "attn.c_attn.bias", "T"))
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
GELU_TANH_NAMES = tuple(k for k, v in GPT2_ACTIVATIONS.items() if v == mf.FFN_GELU_TANH)
B_ATTN = mf.BIAS_QKV | mf.BIAS_O

# The Hugging Face decoder families read here: the causal-LM class config.json's architectures
# names, the biases that attention_bias and mlp_bias bring (always: biases the family has
# whatever the config says), and the defaults each family's configuration_*.py gives the keys a
# config.json may leave out (None: derived, as num_key_value_heads = num_attention_heads).
HF_DECODERS = {
    "llama": dict(cls="LlamaForCausalLM", attention_bias=B_ATTN, mlp_bias=mf.BIAS_FFN,
                  num_key_value_heads=None, head_dim=None, max_position_embeddings=2048),
    "mistral": dict(cls="MistralForCausalLM", num_key_value_heads=8, head_dim=None,
                    max_position_embeddings=4096 * 32, sliding_window=4096),
    "qwen2": dict(cls="Qwen2ForCausalLM", always=mf.BIAS_QKV, num_key_value_heads=32, head_dim=None,
                  max_position_embeddings=32768),
    "qwen3": dict(cls="Qwen3ForCausalLM", attention_bias=B_ATTN, qk_norm=True, num_key_value_heads=32,
                  head_dim=128, max_position_embeddings=32768),
    "gemma3_text": dict(cls="Gemma3ForCausalLM", attention_bias=B_ATTN, qk_norm=True, num_key_value_heads=4,
                        head_dim=256, max_position_embeddings=131072, rope_theta=1e6, tie_word_embeddings=True,
                        sliding_window=4096, rope_local_base_freq=10000.0, query_pre_attn_scalar=256,
                        hidden_activation="gelu_pytorch_tanh"),
}
HF_DEFAULTS = dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, hidden_act="silu")

# What each RoPE scaling the format holds reads from a config's rope_scaling (or transformers
# 5's rope_parameters), as modeling_rope_utils.py does
ROPE_SCALINGS = {"linear": (mf.ROPE_SCALING_LINEAR, ("factor",)),
                 "llama3": (mf.ROPE_SCALING_LLAMA3, ("factor", "low_freq_factor", "high_freq_factor",
                                                     "original_max_position_embeddings"))}


def conf(path, c, key, default=None, required=True):
    if key in c and c[key] is not None:
        return c[key]
    if required and default is None:
        raise Bad(path, "config.json lacks %s" % key)
    return default


def setting(c, fam, key):
    """What config.json says for key, or, when it leaves the key out, the family's default (null
    stays None: Hugging Face's None)."""
    return c[key] if key in c else fam.get(key, HF_DEFAULTS.get(key))


def number(cpath, key, v, integer=False):
    """v, a config value, as an int or float; Bad naming key if it is not a positive one."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    if not ok or (integer and v != int(v)):
        raise Bad(cpath, "%s is %s, not a positive %s" % (key, json.dumps(v), "whole number" if integer else "number"))
    return int(v) if integer else float(v)


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
    if mt == "gpt2":
        return read_hf_gpt2(d, cpath, c)
    if mt in HF_DECODERS:
        return read_hf_decoder(d, cpath, c)
    if mt == "gemma3":
        raise Bad(cpath, "model_type 'gemma3' (Gemma 3 4B and up, with their vision tower) is not supported by "
                  "this build; the text-only gemma3_text (Gemma 3 270M and 1B) is")
    raise Bad(cpath, "unknown architecture model_type=%r (supported: gpt2, %s)" % (mt, ", ".join(HF_DECODERS)))


def read_hf_gpt2(d, cpath, c, sd=None):
    """sd: the weights, if not d's, under nanoGPT's names in nn.Linear's layout (GGUF)."""
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
    conv1d = sd is None  # Hugging Face's Conv1D matrices are (in, out), GGUF's (out, in)
    sd = strip_prefix(read_hf_weights(d), "transformer.") if conv1d else sd
    tn = Tensors(d, sd, gpt2_dims(d_, V, S, S_field, hidden, why),
                 ("h.%d.", L, "n_layer %d in config.json" % L), skip=GPT2_BUFFERS)
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


def rope_scaling_fields(cpath, rs, where):
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
    v = {k: number(cpath, "%s %s" % (where, k), rs.get(k), integer=k.startswith("original")) for k in keys}
    if v["factor"] < 1:
        raise Bad(cpath, "%s factor %s is below 1, which this build does not support" % (where, rs["factor"]))
    f = dict(rope_scaling=code, rope_factor=v["factor"])
    if kind == "llama3":
        if not v["low_freq_factor"] < v["high_freq_factor"]:
            raise Bad(cpath, "%s low_freq_factor %s is not below high_freq_factor %s, which this build needs"
                      % (where, rs["low_freq_factor"], rs["high_freq_factor"]))
        f.update(rope_low_freq_factor=v["low_freq_factor"], rope_high_freq_factor=v["high_freq_factor"],
                 rope_original_ctx=v["original_max_position_embeddings"])
    return f


def hf_rope(cpath, c, fam):
    """(rope_theta, the scaling fields, the local layers' RoPE base) as Hugging Face reads them:
    rope_theta, rope_scaling and Gemma 3's rope_local_base_freq, or transformers 5's
    rope_parameters (for Gemma 3, one object per kind of layer). The local base is None for a
    family without local layers."""
    rp, rs = c.get("rope_parameters"), c.get("rope_scaling")
    local = "rope_local_base_freq" in fam
    base = setting(c, fam, "rope_theta")
    local_base = setting(c, fam, "rope_local_base_freq") if local else None
    if rp is None:
        glob, scaling = base, rope_scaling_fields(cpath, rs, "rope_scaling")
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
    return (number(cpath, "rope_theta", glob), scaling,
            None if local_base is None else number(cpath, "rope_local_base_freq", local_base))


def gemma_layer_pattern(cpath, c, L):
    """P such that layer l is global when (l + 1) % P == 0 and local otherwise, from Gemma 3's
    layer_types, or when it has none from sliding_window_pattern (6 if absent), as
    Gemma3TextConfig does; 0 when every layer is global. A layer_types list that is no such
    pattern, and a pattern key that contradicts what Hugging Face uses, are refused."""
    def kinds(p):
        return ["full_attention" if p and (i + 1) % p == 0 else "sliding_attention" for i in range(L)]
    keys = {k: number(cpath, k, c[k], integer=True) for k in ("sliding_window_pattern", "_sliding_window_pattern")
            if c.get(k) is not None}
    types = c.get("layer_types")
    if types is None:
        p = keys.get("sliding_window_pattern", 6)
        if kinds(keys.get("_sliding_window_pattern", p)) != kinds(p):
            raise Bad(cpath, "_sliding_window_pattern %d, but without layer_types Hugging Face uses "
                      "sliding_window_pattern %d" % (keys["_sliding_window_pattern"], p))
        types = kinds(p)
    else:
        if not isinstance(types, list) or len(types) != L or not set(types) <= {"full_attention", "sliding_attention"}:
            raise Bad(cpath, "layer_types must list full_attention or sliding_attention for each of the %d layers" % L)
        first = types.index("full_attention") + 1 if "full_attention" in types else None
        p = first or min(keys.values(), default=L + 1)
        if types != kinds(p):
            raise Bad(cpath, "layer_types %s is not a global layer every P layers, the only pattern this build "
                      "supports" % listing(types, 8))
        for k, v in keys.items():
            if kinds(v) != types:
                raise Bad(cpath, "layer_types and %s %d describe different layers" % (k, v))
    return 0 if "sliding_attention" not in types else p


# Hugging Face's names of a decoder layer's tensors (model.layers.N.), ours and their shapes in
# Tensors' dims; the norms after the attention and the feed-forward in a Gemma 3 layer; the
# q/k norms; then the biases by the bias_flags bit that brings them
HF_DECODER_LAYER = dict(attn_norm_w=("input_layernorm.weight", "d"), wq=("self_attn.q_proj.weight", "qd"),
                        wk=("self_attn.k_proj.weight", "kd"), wv=("self_attn.v_proj.weight", "kd"),
                        wo=("self_attn.o_proj.weight", "dq"), ffn_norm_w=("post_attention_layernorm.weight", "d"),
                        w1=("mlp.gate_proj.weight", "hd"), w3=("mlp.up_proj.weight", "hd"),
                        w2=("mlp.down_proj.weight", "dh"))
HF_GEMMA3_NORMS = dict(attn_out_norm_w=("post_attention_layernorm.weight", "d"),
                       ffn_norm_w=("pre_feedforward_layernorm.weight", "d"),
                       ffn_out_norm_w=("post_feedforward_layernorm.weight", "d"))
HF_QK_NORMS = dict(q_norm_w=("self_attn.q_norm.weight", "e"), k_norm_w=("self_attn.k_norm.weight", "e"))
HF_DECODER_BIASES = {mf.BIAS_QKV: dict(bq=("self_attn.q_proj.bias", "q"), bk=("self_attn.k_proj.bias", "k"),
                                       bv=("self_attn.v_proj.bias", "k")),
                     mf.BIAS_O: dict(bo=("self_attn.o_proj.bias", "d")),
                     mf.BIAS_FFN: dict(b1=("mlp.gate_proj.bias", "h"), b3=("mlp.up_proj.bias", "h"),
                                       b2=("mlp.down_proj.bias", "d"))}
HF_TOKENIZER_HINT = "the model's tokenizer.json, or vocab.json with merges.txt beside it"


def read_hf_decoder(d, cpath, c, sd=None):
    """A Hugging Face Llama, Mistral, Qwen2, Qwen3 or Gemma 3 (text) directory. Each key is read
    as the family's configuration_*.py and modeling_*.py read it; a value they would act on
    that this build cannot reproduce is refused by name. sd: the weights, if not d's (GGUF)."""
    mt = c["model_type"]
    fam, gemma = HF_DECODERS[mt], mt == "gemma3_text"
    archs = c.get("architectures")
    if archs is not None and archs != [fam["cls"]]:
        raise Bad(cpath, "architectures %s is not supported by this build (model_type %s: %s)"
                  % (json.dumps(archs), mt, fam["cls"]))
    for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        conf(cpath, c, k)
    dim, hidden, L, H, V = (number(cpath, k, c[k], integer=True) for k in (
        "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"))
    kv, hd = setting(c, fam, "num_key_value_heads"), setting(c, fam, "head_dim")
    KV = H if kv is None else number(cpath, "num_key_value_heads", kv, integer=True)
    hd = dim // H if hd is None else number(cpath, "head_dim", hd, integer=True)
    S = number(cpath, "max_position_embeddings", setting(c, fam, "max_position_embeddings"), integer=True)
    eps = number(cpath, "rms_norm_eps", setting(c, fam, "rms_norm_eps"))
    if H % KV:
        raise Bad(cpath, "num_key_value_heads %d does not divide num_attention_heads %d" % (KV, H))
    act_key = "hidden_activation" if gemma else "hidden_act"
    act = setting(c, fam, act_key)
    acts = GELU_TANH_NAMES if gemma else ("silu", "swish")
    if act not in acts:
        raise Bad(cpath, "%s %s is not supported by this build (model_type %s: %s)"
                  % (act_key, json.dumps(act), mt, " or ".join(acts)))
    theta, scaling, local_theta = hf_rope(cpath, c, fam)
    cfg = dict(scaling, dim=dim, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=KV, head_dim=hd,
               vocab_size=V, seq_len=S, rope_theta=theta, norm_eps=eps)
    if mt in ("qwen2", "qwen3"):
        types = c.get("layer_types") or []
        if c.get("use_sliding_window") or "sliding_attention" in types:
            raise Bad(cpath, "%s is not supported by this build (sliding-window attention on model_type %s)"
                      % ("use_sliding_window true" if c.get("use_sliding_window") else "layer_types with "
                         "sliding_attention", mt))
    desc = "Hugging Face %s directory" % mt
    if mt == "mistral":
        window = setting(c, fam, "sliding_window")
        if window is not None and number(cpath, "sliding_window", window, integer=True) < S:
            # every layer attends to the window: within it, to everything, as the file's layers do
            cfg["seq_len"] = int(window)
            desc += " (context cut to its sliding_window %d)" % window
    if gemma:
        for k in ("final_logit_softcapping", "attn_logit_softcapping"):
            if c.get(k) is not None:
                raise Bad(cpath, "%s %s is not supported by this build" % (k, json.dumps(c[k])))
        if c.get("use_bidirectional_attention"):
            raise Bad(cpath, "use_bidirectional_attention true is not supported by this build (causal attention only)")
        every = gemma_layer_pattern(cpath, c, L)
        if every:
            window = setting(c, fam, "sliding_window")
            if window is None:
                raise Bad(cpath, "sliding_window is null, but some layers are sliding_attention")
            cfg.update(sliding_window=number(cpath, "sliding_window", window, integer=True), global_every=every,
                       rope_local_theta=local_theta)
        scalar = number(cpath, "query_pre_attn_scalar", setting(c, fam, "query_pre_attn_scalar"))
        # Gemma3TextScaledWordEmbedding multiplies by hidden_size ** 0.5 held in float32, as the file does
        cfg.update(ffn_kind=mf.FFN_GEGLU_TANH, embed_scale=dim ** 0.5, attn_scale=scalar ** -0.5,
                   arch_flags=mf.ARCH_NORM_PLUS_ONE | mf.ARCH_OUT_NORMS)
    if fam.get("qk_norm"):
        cfg["arch_flags"] = cfg.get("arch_flags", 0) | mf.ARCH_QK_NORM
    rope_dims = int(hd * number(cpath, "partial_rotary_factor", c.get("partial_rotary_factor", 1.0)))
    cfg["rope_dims"] = rope_dims = rope_dims - rope_dims % 2
    bias = fam.get("always", 0)
    for k in ("attention_bias", "mlp_bias"):
        if c.get(k):
            bias |= fam.get(k, 0)
    cfg["bias_flags"] = bias
    dims = {"d": (dim, "hidden_size %d" % dim), "h": (hidden, "intermediate_size %d" % hidden),
            "q": (H * hd, "num_attention_heads %d x head_dim %d" % (H, hd)),
            "k": (KV * hd, "num_key_value_heads %d x head_dim %d" % (KV, hd)), "V": (V, "vocab_size %d" % V),
            "e": (hd, "head_dim %d" % hd)}
    sd = read_hf_weights(d) if sd is None else sd
    tn = Tensors(d, sd, dims, ("model.layers.%d.", L, "num_hidden_layers %d in config.json" % L),
                 skip=("rotary_emb.inv_freq",))
    names = dict(HF_DECODER_LAYER, **(HF_GEMMA3_NORMS if gemma else {}), **(HF_QK_NORMS if fam.get("qk_norm") else {}))
    for flag, more in HF_DECODER_BIASES.items():
        if bias & flag:
            names.update(more)
    # HF's q and k rows, and the q/k norms over a head, are in HF's RoPE layout
    rows = {"wq": rope_rows(H, hd, rope_dims), "bq": rope_rows(H, hd, rope_dims), "wk": rope_rows(KV, hd, rope_dims),
            "bk": rope_rows(KV, hd, rope_dims), "q_norm_w": rope_rows(1, hd, rope_dims),
            "k_norm_w": rope_rows(1, hd, rope_dims)}
    t = {"tok_embedding": tn.take("model.embed_tokens.weight", "Vd"), "final_norm_w": tn.take("model.norm.weight", "d")}
    for i in range(L):
        p, q = "model.layers.%d." % i, "layers.%d." % i
        for ours, (theirs, shape) in names.items():
            w = tn.take(p + theirs, shape)
            t[q + ours] = w.view(lambda a, r=rows[ours]: a[r]) if ours in rows else w
    tied = classifier(tn, "lm_head.weight", t, bool(setting(c, fam, "tie_word_embeddings")))
    cfg["tied_classifier"] = int(tied)
    biases = "attention_bias %s, mlp_bias %s, model_type %s in config.json" % (
        json.dumps(bool(c.get("attention_bias"))), json.dumps(bool(c.get("mlp_bias"))), mt)
    return Source(cfg, t, desc, skipped=tn.finish(biases), tok_hint=HF_TOKENIZER_HINT)


# ---- tokenizers ----

def read_tokenizer(path, vocab_size, model):
    """((blob, kind, flags, bos, eos), notes) from any tokenizer file the module docstring lists,
    for the vocab_size of the checkpoint model (named in messages); notes are lines on what the
    reader left out. A Hugging Face tokenizer.json comes with the tokenizer_config.json,
    generation_config.json and config.json beside it."""
    if os.path.isdir(path):
        for names in (("tokenizer.json",), ("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"),
                      ("tokenizer.bin",)):
            if all(os.path.exists(os.path.join(path, n)) for n in names):
                return read_tokenizer(os.path.join(path, names[0]), vocab_size, model)
        raise Bad(path, "directory has no tokenizer (tokenizer.json, vocab.json+merges.txt, encoder.json+vocab.bpe "
                  "or tokenizer.bin)")
    if not os.path.exists(path):
        raise Bad(path, "tokenizer file not found")
    base, notes = os.path.basename(path), []
    try:
        if base.endswith(".pkl"):
            tok = read_char_meta(path, vocab_size, model)
        elif is_gguf(path):
            import tokenizer_blob
            tok = tokenizer_blob.from_gguf(path, vocab_size)
            notes = tok.notes
        elif base.endswith(".json") and base != "tokenizer.json":
            import tokenizer_blob
            other = os.path.join(os.path.dirname(path), "vocab.bpe" if base == "encoder.json" else "merges.txt")
            if not os.path.exists(other):
                raise Bad(path, "needs %s beside it" % os.path.basename(other))
            tok = tokenizer_blob.from_gpt2(path, other)
        elif base.endswith(".json"):
            import tokenizer_blob
            tok = tokenizer_blob.from_hf_dir(path, vocab_size)
            notes = tok.notes
        else:
            tok = mf.read_llama2c_tokenizer(path, vocab_size)
        n = len(mf.parse_tokenizer(tok[0])[0])
        if n > vocab_size:
            raise Bad(path, "has %d pieces, more than the model's vocab_size %d (%s)" % (n, vocab_size, model))
        return (mf.resize_tokenizer(tok[0], vocab_size),) + tuple(tok[1:]), notes
    except ImportError:
        raise Bad(path, "this tokenizer kind needs tools/tokenizer_blob.py, which is missing")
    except (ValueError, KeyError, OSError) as e:
        # the readers' messages start with the file at fault, which may be one beside path
        where, _, msg = str(e).partition(": ")
        raise Bad(where, msg) if msg and os.path.exists(where) else Bad(path, "bad tokenizer: %s" % e)


def is_gguf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def read_char_meta(path, vocab_size, model):
    """nanoGPT's character-level meta.pkl (stoi/itos): one piece per character, no merges. nanoGPT
    gives such a model exactly meta.pkl's characters as its vocabulary: any other vocab_size means
    another dataset's meta.pkl (or a model that has none)."""
    with open(path, "rb") as f:
        try:
            meta = safe_pickle.load(f)
        except safe_pickle.Refused as e:
            raise Bad(path, str(e))
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
    """The tokenizer a Hugging Face directory carries, if any: tokenizer.json first, which
    transformers' fast tokenizers read."""
    if os.path.isdir(src):
        for n in ("tokenizer.json", "vocab.json", "tokenizer.bin"):
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
        sys.modules.setdefault("convert", sys.modules[__name__])  # gguf_model's Bad is this run's
        import gguf_model
        return gguf_model.read_gguf(src)
    if len(head) < 28:  # the smallest header of any format here: llama2.c's 7 int32
        raise Bad(src, "file of %d bytes is too short for any known format" % len(head))
    if src.endswith(".safetensors"):
        raise Bad(src, "a bare .safetensors file has no config; pass its Hugging Face directory")
    return read_llama2c_legacy(src, np.memmap(src, dtype=np.uint8, mode="r"))


class OneWeightType(argparse.Action):
    """--weights and its alias --quantize set one value: two different ones are an error."""

    def __call__(self, parser, namespace, value, option):
        if getattr(namespace, self.dest) not in (None, value):
            parser.error("%s %s contradicts the weight type given before (%s)"
                         % (option, value, getattr(namespace, self.dest)))
        setattr(namespace, self.dest, value)


def add_quantize_arguments(ap):
    """--weights (its alias --quantize) and --group-size, which make_random.py shares; the weight
    type lands in args.quantize."""
    ap.add_argument("--weights", dest="quantize", action=OneWeightType, choices=sorted(mf.WEIGHT_NAMES),
                    help="how to store the matrices: f32, bf16 or f16 (16 bits each), or q8_0 = int8 values and "
                    "a float32 scale per group of weights in a row (convert.py's default: as the checkpoint "
                    "stores them)")
    ap.add_argument("--quantize", dest="quantize", action=OneWeightType, choices=sorted(mf.QUANTIZE),
                    help="--weights q8_0")
    ap.add_argument("--group-size", type=int, metavar="N", help="weights per scale with q8_0 (default %d, "
                    "halved until it divides every quantised row)" % mf.DEFAULT_GROUP_SIZE)


def storage_config(cfg, weights, group_size, prog):
    """cfg set to be stored as --weights and --group-size say; ValueError if they do not fit it.
    A default group size that had to shrink is worth a note: it costs speed and file size."""
    c = mf.with_weight_type(cfg, weights, group_size)
    if weights == "q8_0" and group_size is None and c["group_size"] != mf.DEFAULT_GROUP_SIZE:
        print("%s: note: group size %d, the largest power of two up to %d dividing dim %d, n_heads x head_dim %d "
              "and hidden_dim %d" % ((prog, c["group_size"], mf.DEFAULT_GROUP_SIZE) + mf.quantized_widths(c)),
              file=sys.stderr)
    return c


def weight_choice(tensors, asked):
    """(the weight type to store, why, for the closing note): asked, if given; else the type the
    checkpoint stores its matrices in, if they share one; else float32, which holds them all."""
    kinds = sorted({getattr(v, "stored", "F32") for k, v in tensors.items()
                    if k.split(".")[-1] in mf.QUANTIZED_MATRICES}, key=list(LONG_NAMES).index)
    theirs = "the checkpoint's %s matrices" % " and ".join(LONG_NAMES[k] for k in kinds)
    choice = asked or (STORED_NAMES[kinds[0]] if len(kinds) == 1 else "f32")
    if choice == "q8_0":
        how = "quantised"
    elif [STORED_NAMES[k] for k in kinds] == [choice]:
        how = "kept bit for bit"
    elif choice == "f32":
        how = "widened exactly"
    else:
        how = "rounded to nearest even" if choice == "bf16" else "rounded to nearest"
    return choice, ("--weights %s: " % asked if asked else "") + theirs + " " + how


def chat_section(src, tokpath, tok, source, name):
    """(the chat section for OUT, b"" for none; its family for the closing note): from --chat-template
    NAME, else the template beside the tokenizer.json (or in SRC), else the source's own section
    when OUT keeps its tokenizer."""
    import chat_template
    folder = tokpath if tokpath and os.path.isdir(tokpath) else \
        os.path.dirname(tokpath) if tokpath and os.path.basename(tokpath) == "tokenizer.json" else \
        src if os.path.isdir(src) else None
    try:
        template = chat_template.read_template(folder) if folder else None
    except (ValueError, OSError) as e:
        raise Bad(folder, str(e))
    where = os.path.join(folder, "tokenizer_config.json") if folder else src
    gguf = tokpath or src
    if folder is None and os.path.isfile(gguf) and is_gguf(gguf):  # a GGUF keeps tokenizer.chat_template
        sys.modules.setdefault("convert", sys.modules[__name__])
        import gguf_model
        template, where = gguf_model.chat_template(gguf), gguf
    if template is None and name is None:
        section = source.chat if source.chat and not tokpath else b""
    else:
        try:
            section = chat_template.chat_section(template, tok, name)
        except ValueError as e:
            raise Bad(where, str(e))
    if not section:
        return b"", None
    try:
        return section, chat_template.parse_section(section, len(mf.parse_tokenizer(tok[0])[0]))[0]
    except ValueError as e:
        raise Bad(src, str(e))


def convert(src, out, tokenizer=None, seq_len=None, weights=None, group_size=None, chat_template=None):
    """Returns the config written, the Source read, a note on the weight type chosen and the chat
    template's family (None without one)."""
    source = read_source(src)
    cfg, tensors = source.cfg, source.tensors
    if seq_len is not None:
        if seq_len < 1:
            raise Bad(src, "--seq-len %d: a context needs at least 1 position" % seq_len)
        if cfg.get("pos_kind") == mf.POS_LEARNED and seq_len > cfg["seq_len"]:
            raise Bad(src, "--seq-len %d exceeds the %d learned positions" % (seq_len, cfg["seq_len"]))
        if cfg.get("pos_kind") == mf.POS_LEARNED:
            tensors["pos_embedding"] = np.asarray(tensors["pos_embedding"])[:seq_len]
        cfg["seq_len"] = seq_len
    tokpath = tokenizer or default_tokenizer(src)
    if tokpath:
        model = os.path.join(src, "config.json") if os.path.isdir(src) else src  # where vocab_size comes from
        tok, notes = read_tokenizer(tokpath, cfg["vocab_size"], model)
        for n in notes:
            print("convert.py: note: %s: %s" % (tokpath, n), file=sys.stderr)
    elif source.tok is None:
        raise Bad(src, "%s carries no vocabulary: pass --tokenizer (%s)" % (source.desc, source.tok_hint))
    else:
        tok = source.tok
    chat, family = chat_section(src, tokpath, tok, source, chat_template)
    if source.weights:
        weights, why, group_size = source.weights(tensors, weights, group_size)
    else:
        weights, why = weight_choice(tensors, weights)
    try:
        cfg = storage_config(cfg, weights, group_size, "convert.py")
        mf.write_model(out, cfg, tok, tensors, chat)
    except ValueError as e:
        raise Bad(src, str(e))
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
    return cfg, source, why, family


def export_torch(model, out):
    import torch
    source = read_attn(model)
    blob, kind, flags, bos, eos = source.tok
    def as_stored(w):  # bfloat16 from its bits
        if w.stored == "BF16":
            return torch.from_numpy(np.array(w.st.raw).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.array(w.st.raw))
    obj = {"model": {k: as_stored(v) for k, v in source.tensors.items()},
           "attn_config": source.cfg,
           "tokenizer": {"blob": torch.frombuffer(bytearray(blob), dtype=torch.uint8), "kind": kind,
                         "flags": flags, "bos_id": bos, "eos_id": eos}}
    try:
        with outfile.replacing(out) as f:
            torch.save(obj, f)
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))


def main(argv):
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            sys.stderr.write("convert.py: %s (see --help)\n" % message)
            sys.exit(1)

    ap = Parser(description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="checkpoint file or Hugging Face directory (MODEL.bin with --export-torch)")
    ap.add_argument("out", help="attn.c model file to write, - for standard output (OUT.pt with --export-torch)")
    ap.add_argument("--tokenizer", help="tokenizer file or directory")
    ap.add_argument("--seq-len", type=int, help="the context length: shorter for a long-context checkpoint "
                    "(e.g. 128k); longer only for RoPE or sinusoidal positions")
    ap.add_argument("--export-torch", action="store_true", help="write MODEL.bin back as a PyTorch state dict")
    ap.add_argument("--export-hf", action="store_true", help="write MODEL.bin as a Hugging Face directory OUT "
                    "(tools/export_hf.py)")
    ap.add_argument("--force", action="store_true", help="replace an existing OUT: an attn.c model file; with "
                    "--export-torch a file it wrote; with --export-hf a folder it wrote (never another file or folder)")
    add_quantize_arguments(ap)
    from chat_template import FAMILIES
    ap.add_argument("--chat-template", metavar="NAME", choices=FAMILIES,
                    help="the chat format to store, instead of the one the checkpoint's chat template is "
                    "recognised as: %s or %s" % (", ".join(FAMILIES[:-1]), FAMILIES[-1]))
    a = ap.parse_args(argv)
    if a.export_torch and a.quantize:
        ap.error("--weights does not apply to --export-torch, whose state dict holds the weights as the model "
                 "file does")
    if a.export_hf and (a.quantize or a.tokenizer or a.group_size is not None or a.seq_len is not None):
        ap.error("--weights, --group-size, --tokenizer and --seq-len do not apply to --export-hf, which writes "
                 "the model file as it is")
    for inp, what in ((a.src, "a checkpoint"), (a.tokenizer, "a tokenizer")):
        if inp == outfile.STDIO:  # formats are told apart by name and by seeking, and may be folders
            sys.stderr.write("convert.py: -: %s is not read from standard input; give its path\n" % what)
            return 1
    try:  # a device or FIFO as OUT would be replaced by a regular file in the end
        outfile.check(a.out, "a directory" if a.export_hf else "a regular file")
    except OSError as e:
        sys.stderr.write("convert.py: %s: %s\n" % (a.out, e))
        return 1
    # An output that is an input (or a file in an input directory) would be destroyed.
    for inp in (a.src, a.tokenizer):
        if not (inp and a.out != outfile.STDIO and os.path.exists(a.out) and os.path.exists(inp)):
            continue
        out_dir = os.path.dirname(os.path.abspath(a.out))
        if os.path.samefile(a.out, inp) or (os.path.isdir(inp) and os.path.samefile(out_dir, inp)):
            sys.stderr.write("convert.py: %s: writing it would overwrite the input %s\n" % (a.out, inp))
            return 1
    try:  # before any work, as ./train's claim_outputs: a device or FIFO, a file of another kind, or one without --force
        if a.export_hf:
            sys.modules.setdefault("convert", sys.modules[__name__])  # export_hf's Bad is this run's
            import export_hf
            export_hf.claim_dir(a.out, a.force)
        elif a.export_torch:
            outfile.claim(a.out, a.force, lambda p: "attn_config" in safe_pickle.torch_strings(p),
                          "a PyTorch file that --export-torch wrote")
        else:
            outfile.claim(a.out, a.force, mf.is_model_file, "an attn.c model file")
    except OSError as e:
        sys.stderr.write("convert.py: %s: %s\n" % (a.out, e))
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
            cfg, source, why, family = convert(a.src, a.out, a.tokenizer, a.seq_len, a.quantize, a.group_size,
                                               a.chat_template)
            weights = {mf.WEIGHTS_F32: "float32", mf.WEIGHTS_BF16: "bfloat16", mf.WEIGHTS_F16: "float16",
                       mf.WEIGHTS_Q8_0: "Q8_0, group size %d" % cfg["group_size"]}[cfg["weight_type"]]
            skipped = "; skipped %s, buffers a model file does not need" % listing(source.skipped) \
                if source.skipped else ""
            chat = "; chat template %s" % family if family else ""
            print("convert.py: %s -> %s: dim %d, %d layers, %d heads (%d kv), vocab %d, seq_len %d, %s weights (%s)%s%s"
                  % (source.desc, a.out, cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"],
                     cfg["vocab_size"], cfg["seq_len"], weights, why, skipped, chat), file=sys.stderr)
    except Bad as e:
        sys.stderr.write("convert.py: %s: %s\n" % (e.path, e.msg))
        return 1
    except MemoryError:
        sys.stderr.write("convert.py: %s: out of memory\n" % a.src)
        return 1
    except ModuleNotFoundError:  # torch, imported when needed: cli_main says what to install
        raise
    except Exception as e:  # a malformed file can break a reader in ways not foreseen
        msg = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write("convert.py: %s: cannot convert (%s%s)\n"
                         % (a.src, type(e).__name__, ": " + msg if msg else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
