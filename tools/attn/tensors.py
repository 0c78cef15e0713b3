"""What a source reader hands convert.py: Source, and the tensors in it (Stored: as the
checkpoint holds them; Weight: widened when the writer gets to it; Tensors: a checkpoint's
tensors by name, each taken exactly once)."""
import collections
import re

import numpy as np

from attn import modelfile as mf

from attn import storage
from attn.errors import Bad, listing


# What a reader found: the model file's config and tensors (Weight objects, or arrays), a
# description for the closing note, the tokenizer if the source carries one, the buffers it
# skipped, and what --tokenizer could be.
# weights, if given, makes the weight choice instead of weight_choice: (tensors, --weights,
# --group-size) -> (weights, why, group size), for a source whose types weight_choice does not know.
# context, if given, fits cfg to the context chosen: (cfg, seq_len) -> cfg, Bad in the source's
# terms for a setting the model file cannot hold at that length (with_context calls it).
# output, if given: a classifier the source holds as a tensor of its own although it equals the
# embedding (a GGUF's output.weight), which --quantize keeps apart as llama-quantize does.
Source = collections.namedtuple("Source", "cfg tensors desc tok skipped tok_hint weights chat context output",
                                defaults=(None, (), "e.g. a llama2.c tokenizer.bin", None, b"", None, None))

# A checkpoint's number types by their safetensors names, and what the tools call the same
# storage (--weights)
STORED_NAMES = {"F32": "f32", "BF16": "bf16", "F16": "f16"}
LONG_NAMES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


class Stored:
    """One tensor as its checkpoint holds it: float32, float16, or bfloat16 as its uint16 bits
    (numpy has no bfloat16). float32() widens it, exactly."""
    quantised = None  # the quantised type a checkpoint holds it in ("Q4_K"), which --quantize would quantise again

    def __init__(self, raw, dtype):
        self.raw, self.dtype, self.shape = raw, dtype, tuple(raw.shape)

    def float32(self):
        return storage.from_bf16(self.raw) if self.dtype == "BF16" else np.asarray(self.raw, dtype=np.float32)

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

    def __init__(self, st, name=None):
        # name: the tensor's name in its checkpoint, for a message about its values
        self.st, self.shape, self.stored, self.name = st, st.shape, st.dtype, name

    def __array__(self, dtype=None, copy=None):
        a = self.st.float32()
        return a if dtype is None else a.astype(dtype, copy=False)

    def view(self, f):
        """The tensor with f (a transpose, a slice, an order of rows) applied to its stored values."""
        return Weight(type(self.st)(f(self.st.raw), self.st.dtype), self.name)

    def q8_0(self, group):
        """Its exact (int8 values, float32 scales) at this group size if it is stored as integers
        times scales (a GGUF Q8_0, Q4_0 or Q6_K tensor), else None."""
        return self.st.q8_0(group) if hasattr(self.st, "q8_0") else None

    def blocks(self, type_name):
        """Its bytes as llama.cpp's block type type_name stores them, uint8 [rows, row bytes], if it
        is stored so (a GGUF tensor of that type), else None."""
        return self.st.blocks(type_name) if hasattr(self.st, "blocks") else None

    def quantised(self):
        """The quantised type its checkpoint holds it in (Stored.quantised), else None."""
        return self.st.quantised


class Stack:
    """Tensors of one type one after another along their rows (a layer's experts), read only when
    asked: np.asarray gives them whole, indexing picks from that."""

    def __init__(self, parts):
        self.parts = parts
        self.shape = (sum(p.shape[0] for p in parts),) + tuple(parts[0].shape[1:])

    def __array__(self, dtype=None, copy=None):
        a = np.concatenate([np.asarray(p) for p in self.parts])
        return a if dtype is None else a.astype(dtype, copy=False)

    def __getitem__(self, idx):
        return np.asarray(self)[idx]

    def joined(self, forms):
        """The parts' forms (each one's blocks or Q8_0 pair, None where a part has none) joined
        along the rows, or None unless every part has one."""
        if any(f is None for f in forms):
            return None
        if isinstance(forms[0], tuple):
            return tuple(np.concatenate(c) for c in zip(*forms))
        return np.concatenate(forms)

    def blocks(self, type_name):
        """The parts' block bytes one after another, if each is stored in type_name (a GGUF's
        experts: kept as the file holds them)."""
        return self.joined([p.blocks(type_name) if hasattr(p, "blocks") else None for p in self.parts])

    def q8_0(self, group):
        return self.joined([p.q8_0(group) if hasattr(p, "q8_0") else None for p in self.parts])


def vector(w):
    """A [1, d] Weight (a Linear to one output) as the [d] float32 vector a model file holds: its
    values taken whole, since a quantised GGUF tensor's lazy rows have no reshape."""
    return Weight(Stored(np.asarray(w, dtype=np.float32).reshape(-1), "F32"), w.name)


def stack(path, weights):
    """Weights of one stored type (each taken from checkpoint path) as one Weight, their rows one
    after another, named as the first one's checkpoint names it; stored as the parts are (a
    quantised GGUF's experts keep their blocks)."""
    kinds = {w.stored for w in weights}
    if len(kinds) > 1:
        raise Bad(path, "tensors %s and the rest of its stack are stored in different types (%s)"
                  % (weights[0].name, ", ".join(sorted(kinds))))
    st = weights[0].st
    return Weight(type(st)(Stack([w.st.raw for w in weights]), st.dtype), weights[0].name)


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
    checked at once against the layer numbers in the names.
    show: a name of sd -> the checkpoint's own name for it, for messages (GGUF's, whose tensors
    are read under Hugging Face's names)."""

    def __init__(self, path, sd, dims=None, layers=None, skip=(), show=None):
        self.path, self.sd, self.dims, self.skip = path, sd, dims or {}, skip
        self.show = show or (lambda name: name)
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
            raise Bad(self.path, "missing tensor %s" % self.show(name))
        return tuple(self.sd[name].shape)

    def take(self, name, shape=""):
        """The tensor as a Weight; shape (a letter of dims an axis) is checked if given."""
        self.shape(name)
        st = stored(self.sd[name])
        want = tuple(self.dims[k][0] for k in shape)
        if shape and st.shape != want:
            why = ", ".join(dict.fromkeys(self.dims[k][1] for k in shape))
            raise Bad(self.path, "%s has shape %s, expected %s from %s" % (self.show(name), st.shape, want, why))
        check_finite(self.path, self.show(name), st)
        self.taken.add(name)
        return Weight(st, self.show(name))

    def finish(self, biases=None):
        """The names of the skipped buffers; Bad naming the tensors nobody took, and when they
        include biases what the config says about those (biases, e.g. "bias False in model_args")."""
        left = [k for k in self.sd if k not in self.taken]
        skipped = [k for k in left if any(k == s or k.endswith("." + s) for s in self.skip)]
        unused = [k for k in left if k not in skipped]
        if unused:
            why = " (%s)" % biases if biases and any(k.endswith(".bias") for k in unused) else ""
            raise Bad(self.path, "%d tensor%s convert.py would not use%s: %s" % (
                len(unused), "s" if len(unused) > 1 else "", why, listing(map(self.show, unused))))
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


def known_args(path, args, known, whose):
    """Bad naming a key of a checkpoint's model_args that its model code does not take: llama2.c's
    ModelArgs and nanoGPT's GPTConfig are dataclasses built from model_args, which refuse any
    other key, so what it would do is unknown."""
    other = sorted(str(k) for k in args if k not in known)
    if other:
        raise Bad(path, "model_args %s: not among %s's (%s), so what %s would do is unknown"
                  % (listing(other), whose, ", ".join(known), "they" if len(other) > 1 else "it"))


def strip_prefix(sd, prefix):
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in sd.items()}


def with_context(source, seq_len, src):
    """(cfg, tensors) of source (read from src) at the context --seq-len chose (None: its own): learned
    positions cut to it (more than the source has are refused), and what the source's context
    hook makes of it."""
    cfg, tensors = source.cfg, source.tensors
    if seq_len is None and cfg["seq_len"] > mf.MAX_SEQ_LEN:
        raise Bad(src, "its context of %d positions exceeds this build's limit of %d: choose a "
                  "shorter one with --seq-len" % (cfg["seq_len"], mf.MAX_SEQ_LEN))
    if seq_len is not None:
        if not 1 <= seq_len <= mf.MAX_SEQ_LEN:
            raise Bad("--seq-len %d" % seq_len, "a context needs at least 1 position" if seq_len < 1 else
                      "exceeds this build's limit of %d positions" % mf.MAX_SEQ_LEN)
        if cfg.get("pos_kind") == mf.POS_LEARNED:
            if seq_len > cfg["seq_len"]:
                raise Bad("--seq-len %d" % seq_len, "exceeds the %d learned positions of the checkpoint"
                          % cfg["seq_len"])
            tensors["pos_embedding"] = np.asarray(tensors["pos_embedding"])[:seq_len]
        cfg = dict(cfg, seq_len=seq_len)
    return (source.context(cfg, cfg["seq_len"]) if source.context else cfg), tensors
