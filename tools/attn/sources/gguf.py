"""GGUF files (llama.cpp, Ollama, LM Studio) as convert.py sources: config, tokenizer and weights.

read_gguf(path) gives convert.py a Source. The metadata of general.architecture llama, qwen2,
qwen3, qwen2moe, qwen3moe, gemma3 or gpt2 (llama with expert_count: Mixtral) becomes the Hugging
Face config.json that family's converter in llama.cpp read it from, and the tensors get their
Hugging Face names and layout (a merged expert tensor, ffn_*_exps, each expert's matrix as a
tensor of its own bytes, which the family's reader stacks again, blocks as they are), so that
convert.py's own readers (read_hf_decoder, read_hf_gpt2) build the model file with every check
they make for a Hugging Face directory. What llama.cpp's converter changed is undone: Llama's
q/k rows it permuted into the interleaved RoPE order, GPT-2's Conv1D matrices it transposed.
Gemma 3's norms it stored as 1 + w: they are kept, and the model file computes x * w instead
of x * (1 + w), which is what llama.cpp computes. Llama 3's RoPE scaling, which it stored as
the rope_freqs tensor, is read back from it. An output.weight equal to token_embd.weight (or
none) is a tied classifier. The context is the file's context_length (--seq-len changes it).

Weight types (the closing note says which happened):
  F32, F16, BF16   kept: all matrices in one of them stay in it; a mix is kept matrix by matrix
  Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS
                   kept bit for bit, each matrix in its own type (format version 6, a type per
                   matrix): no widening, no re-quantising
--weights f32, bf16 or f16 stores the values dequantised exactly (rounded for bf16 and f16);
--weights q8_0 stores our Q8_0: Q8_0, Q4_0 and Q6_K map to it exactly (group 32, 16 with any
Q6_K), the other types are quantised from their exact values. Any other type is refused by name
(tools/attn/gguf_file.py). Tensors are read one at a time from the mapped file.
"""
import math
import re
import sys

import numpy as np

from attn.errors import Bad, Terms
from attn.archs import FAMILIES, gguf_families
from attn.sources.hf import READERS, rope_rows
from attn.tensors import Stored, Weight
from attn.weights import weight_choice
from attn import gguf_file as gguf
from attn import modelfile as mf
from attn import storage

FLOATS = ("F32", "F16", "BF16")
EXACT_Q8 = {"Q8_0": 32, "Q4_0": 32, "Q6_K": 16}  # types q8_blocks maps exactly, and their group
DEQUANTISED = ("Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "IQ4_NL", "IQ4_XS")

# the biases of a llama block by the bias_flags bit that stores them; llama.cpp loads each one
# that is there, and a missing one adds nothing, as a zero does
LLAMA_BIASES = {mf.BIAS_QKV: ("attn_q", "attn_k", "attn_v"), mf.BIAS_O: ("attn_output",),
                mf.BIAS_FFN: ("ffn_gate", "ffn_up", "ffn_down")}


class Rows:
    """Some rows of a GGUF tensor, read only when asked, so that no permuted copy is held before
    the writer gets to the tensor: indexing picks rows (as convert.py's views do); np.asarray
    gives their values as stored (float types: float32, float16, or bfloat16's bits) or
    dequantised to float32; q8_0(group) gives them as exact Q8_0."""

    def __init__(self, f, t, rows=None):
        self.f, self.t, self.rows = f, t, rows  # rows None: all, in order
        self.shape = (t.shape[0] if rows is None else len(rows),) + tuple(t.shape[1:])

    def __getitem__(self, idx):
        return Rows(self.f, self.t, np.arange(self.t.shape[0])[idx] if self.rows is None else self.rows[idx])

    def pick(self, a):
        return a if self.rows is None else a[self.rows]

    def __array__(self, dtype=None, copy=None):
        if self.t.type_name in FLOATS:
            a = self.pick(mapped(self.f, self.t))
        else:
            a = self.pick(self.f.dequantize(self.t))
        return a if dtype is None else a.astype(dtype, copy=False)

    def blocks(self, type_name):
        """The rows' bytes as the GGUF stores them, uint8 [rows, row bytes], if they are of that type."""
        if type_name != self.t.type_name or len(self.t.shape) != 2:
            return None
        return self.pick(self.f.raw(self.t).reshape(self.t.shape[0], -1))

    def q8_0(self, group):
        """(int8 values, float32 scales) equal to the dequantised values bit for bit, with a scale
        per group values; None when the type has no such form at that group size."""
        native = EXACT_Q8.get(self.t.type_name)
        if native is None or native % group or len(self.t.shape) != 2:
            return None
        q, s = gguf.q8_blocks(self.f, self.t, native)
        return self.pick(q), np.repeat(self.pick(s), native // group, axis=1)


class QuantStored(Stored):
    """A quantised tensor as convert.py's readers take tensors: float32() dequantises it."""

    @property
    def quantised(self):
        return self.dtype

    def float32(self):
        return np.asarray(self.raw, dtype=np.float32)

    def nonfinite(self):
        return ~np.isfinite(self.float32())

    def q8_0(self, group):
        return self.raw.q8_0(group)

    def blocks(self, type_name):
        return self.raw.blocks(type_name)


def mapped(f, t):
    """A float-type tensor's values as stored, a view of the mapped file (bfloat16 as its bits)."""
    return f.raw(t).view({"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[t.type_name]).reshape(t.shape)


def stored(f, t, rows=None):
    """A GGUF tensor (those rows of it, if given) as Stored, read from the mapping."""
    if t.type_name in FLOATS:
        return Stored(mapped(f, t) if rows is None else Rows(f, t, rows), t.type_name)
    if t.type_name in EXACT_Q8 or t.type_name in DEQUANTISED:
        return QuantStored(Rows(f, t, rows), t.type_name)
    raise Bad(f.path, "tensor %s has type %s, which this build does not convert (supported: %s)"
                 % (t.name, t.type_name, ", ".join(FLOATS + tuple(EXACT_Q8) + DEQUANTISED)))


# ---- metadata ----

# the format's limits (modelfile.check_config) on the sizes a config is built from, checked
# before anything is sized by them
LIMITS = {"embedding_length": 65536, "feed_forward_length": 262144, "block_count": 1024, "attention.head_count": 1024,
          "attention.head_count_kv": 1024, "attention.key_length": 4096, "attention.value_length": 4096,
          "rope.dimension_count": 4096, "attention.sliding_window_pattern": 1024, "expert_count": mf.MAX_EXPERTS,
          "expert_used_count": mf.MAX_EXPERTS, "expert_feed_forward_length": 262144,
          "expert_shared_feed_forward_length": 262144}


class Meta:
    """The metadata under an architecture's prefix; every missing or mistyped key is Bad naming it."""

    def __init__(self, f, arch):
        self.path, self.m, self.arch = f.path, f.metadata, arch

    def get(self, key, default=None, kind=int):
        full = key if key.startswith(("general.", "tokenizer.")) else "%s.%s" % (self.arch, key)
        if full not in self.m:
            if default is None:
                raise Bad(self.path, "metadata lacks %s" % full)
            return default
        v = self.m[full]
        ok = isinstance(v, str) if kind is str else (
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and (kind is float or v == int(v)))
        if not ok:
            raise Bad(self.path, "metadata %s is %r, not %s" % (full, v, {
                int: "a positive integer", float: "a positive number", str: "a string"}[kind]))
        if key in LIMITS and v > LIMITS[key]:
            raise Bad(self.path, "metadata %s %d exceeds this build's limit %d" % (full, v, LIMITS[key]))
        return kind(v)

    def has(self, key):
        return "%s.%s" % (self.arch, key) in self.m


def llama3_rope(path, meta, freqs, head_dim, theta):
    """The rope_scaling llama.cpp's converter turned into the rope_freqs tensor, the divisor of
    each pair's frequency: 1 for short wavelengths, factor (the largest) for long ones, and
    1 / ((1 - s) / factor + s) between, s = ctx / wavelength / (high - low) - low / (high - low).
    With the original context ctx from the metadata (Llama 3's 8192 if absent), the values
    between give low and high; every value is then checked against Llama 3's formula."""
    v = np.asarray(freqs, np.float64).reshape(-1)
    ctx = meta.get("rope.scaling.original_context_length", 8192)
    factor = float(v.max())
    wavelen = 2 * np.pi * theta ** (np.arange(0, head_dim, 2) / head_dim)
    low, high = 1.0, 4.0  # Llama 3's, when too few values lie between to say
    mid = (v > 1 + 1e-6) & (v < factor * (1 - 1e-6)) if v.shape == wavelen.shape else np.zeros(0, bool)
    if factor > 1 and mid.sum() >= 2:
        s = (1 / v[mid] - 1 / factor) / (1 - 1 / factor)
        A, B = np.polyfit(1 / wavelen[mid], s, 1)
        if A > 0:
            # to 5 digits: the fit's float32 noise off the config's values
            low, high = float("%.5g" % (-B * ctx / A)), float("%.5g" % ((1 - B) * ctx / A))
    want = np.where(wavelen < ctx / high, 1.0, np.where(wavelen > ctx / low, factor, 0.0)) if low > 0 else None
    if want is not None:
        s = (ctx / wavelen - low) / (high - low)
        want = np.where(want == 0, 1 / ((1 - s) / factor + s), want)
    if want is None or v.shape != want.shape or not np.allclose(v, want, rtol=1e-5):
        raise Bad(path, "rope_freqs.weight is not Llama 3's RoPE scaling with original context %d, the one this "
                     "build reads from it" % ctx)
    return dict(rope_type="llama3", factor=factor, low_freq_factor=low, high_freq_factor=high,
                original_max_position_embeddings=ctx)


def linear_factor_key(g):
    """The key of a file's linear RoPE scaling factor, llama.cpp's or its older one; None for neither."""
    return next((k for k in ("rope.scaling.factor", "rope.scale_linear") if g.has(k)), None)


def hf_config(f, arch, fam):
    """The config.json llama.cpp's converter read the metadata from, as family fam reads it."""
    g, T = Meta(f, arch), f.tensors
    if "token_embd.weight" not in T:
        raise Bad(f.path, "no tensor token_embd.weight (a vocabulary-only GGUF is a tokenizer: pass it as "
                     "--tokenizer)")
    V = T["token_embd.weight"].shape[0]
    tied = "output.weight" not in T or (
        T["output.weight"].type == T["token_embd.weight"].type
        and np.array_equal(f.raw(T["output.weight"]), f.raw(T["token_embd.weight"])))
    if f.metadata.get(arch + ".expert_count") and not fam.ref_experts:
        raise Bad(f.path, "%s.expert_count %s: mixture-of-experts models of general.architecture %s are not "
                  "supported by this build" % (arch, f.metadata[arch + ".expert_count"], arch))
    own = fam.gguf_own_config(g, V, tied)
    if own is not None:
        return own
    dim, H = g.get("embedding_length"), g.get("attention.head_count")
    hd = g.get("attention.key_length", max(dim // H, 1))  # a wrong one is refused by the shapes
    if g.get("attention.value_length", hd) != hd:
        raise Bad(f.path, "%s.attention.value_length %d differs from key_length %d, which this build does not "
                     "support" % (arch, g.get("attention.value_length"), hd))
    c = dict(model_type=fam.model_type, hidden_size=dim, intermediate_size=g.get("feed_forward_length"),
             num_hidden_layers=g.get("block_count"), num_attention_heads=H,
             num_key_value_heads=g.get("attention.head_count_kv", H), head_dim=hd, vocab_size=V,
             max_position_embeddings=g.get("context_length"),
             rms_norm_eps=g.get("attention.layer_norm_rms_epsilon", kind=float),
             rope_theta=g.get("rope.freq_base", 10000.0, float), tie_word_embeddings=tied)
    n_rot = g.get("rope.dimension_count", hd)
    if n_rot != hd:  # the factor whose int(head_dim x factor), as read_hf_decoder computes it, is n_rot
        c["partial_rotary_factor"] = n_rot / hd
        while int(hd * c["partial_rotary_factor"]) < n_rot:
            c["partial_rotary_factor"] = math.nextafter(c["partial_rotary_factor"], 2)
    # llama.cpp's reading: a file without rope.scaling.type scales linearly by rope.scaling.factor
    # (or the older rope.scale_linear), 1 if neither; "none" never scales
    kind = g.get("rope.scaling.type", "linear", str)
    factor = linear_factor_key(g)
    if kind not in ("linear", "none"):
        raise Bad(f.path, "%s.rope.scaling.type %r is not supported by this build (none, linear, and Llama 3's "
                  "rope_freqs)" % (arch, kind))
    if kind == "linear" and factor and g.get(factor, kind=float) != 1:
        c["rope_scaling"] = dict(rope_type="linear", factor=g.get(factor, kind=float))
    attn_factor = g.get("rope.scaling.attn_factor", 1.0, float)
    if attn_factor != 1:
        raise Bad(f.path, "%s.rope.scaling.attn_factor %g is not supported by this build (it scales RoPE's cosines "
                  "and sines)" % (arch, attn_factor))
    if "rope_freqs.weight" in T:
        if not fam.gguf_rope_freqs or "rope_scaling" in c:
            raise Bad(f.path, "rope_freqs.weight is read only as Llama 3's RoPE scaling of a llama model")
        c["rope_scaling"] = llama3_rope(f.path, g, f.dequantize(T["rope_freqs.weight"]), n_rot, c["rope_theta"])
    if fam.ref_experts:
        experts_config(f, g, fam, c)
    fam.gguf_config(f, g, c)
    return c


# llama.cpp's keys of a mixture of experts that experts_config reads
EXPERT_KEYS = ("expert_count", "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length")


def experts_config(f, g, fam, c):
    """Adds to c the keys of fam's experts (fam.ref_experts names them) as llama.cpp's loader reads
    the metadata: an expert's width from expert_feed_forward_length, else feed_forward_length
    divided by expert_used_count (Mixtral's, written as llama: feed_forward_length itself); the
    shared expert's from expert_shared_feed_forward_length, else feed_forward_length; the chosen
    experts' weights renormalised as the family's loader always does or never does. Another
    key of llama.cpp's mixtures of experts is refused by name unless it holds the value that
    computes what this reading does."""
    x, K = fam.ref_experts, g.get("expert_used_count")
    c[x["count"]], c[x["top_k"]] = g.get("expert_count"), K
    if x["width"] != "intermediate_size":
        c[x["width"]] = g.get("expert_feed_forward_length", max(c["intermediate_size"] // K, 1))
    if x.get("shared"):
        c[x["shared_width"]] = g.get("expert_shared_feed_forward_length", c["intermediate_size"])
    if x["norm"]:
        c[x["norm"]] = fam.gguf_norm_topk
    # the values of llama.cpp's other keys that change nothing here: no scaling, a softmax, the
    # family's own renormalising, its number of shared experts
    neutral = dict(expert_weights_scale=(0.0, 1.0), expert_gating_func=(1,),
                   expert_weights_norm=(fam.gguf_norm_topk if x["norm"] else True,),
                   expert_shared_count=(1 if x.get("shared") else 0,), leading_dense_block_count=(0,))
    for key in sorted(f.metadata):
        name = key[len(g.arch) + 1:]
        if key.startswith(g.arch + ".") and name not in EXPERT_KEYS and (
                "expert" in name or "moe" in name or name in neutral) and f.metadata[key] not in neutral.get(name, ()):
            raise Bad(f.path, "metadata %s %r is not supported by this build (a mixture of experts computed "
                      "otherwise than %s's)" % (key, f.metadata[key], fam.hf_class))


def gguf_expert_names(fam):
    """(llama.cpp's names of a block's router and shared expert -> Hugging Face's, its names of the
    merged experts -> Hugging Face's name of one expert's matrix, %d for the expert) of family
    fam, whose ref_experts names them; ({}, {}) for a family without experts."""
    x = fam.ref_experts
    if not x:
        return {}, {}
    names = {"ffn_gate_inp": x["router"][:-len(".weight")]}
    if x.get("shared"):
        names["ffn_gate_inp_shexp"] = x["shared_gate"][:-len(".weight")]
        names.update(("ffn_%s_shexp" % m, x["shared"] + x[m]) for m in ("gate", "up", "down"))
    return names, {"ffn_%s_exps" % m: x["expert"] + x[m] for m in ("gate", "up", "down")}


def split_experts(f, t, E, count_key):
    """A merged expert tensor (llama.cpp's ffn_*_exps, [experts, rows, cols]) as its E experts'
    matrices, each a tensor of its own bytes in the file: their blocks are kept as they are."""
    if len(t.shape) != 3 or t.shape[0] != E:
        raise Bad(f.path, "tensor %s has shape %s, expected %d experts of [rows, cols] from %s %d"
                  % (t.name, t.shape, E, count_key, E))
    size = t.nbytes // E
    return [gguf.Tensor(t.name, t.type, t.dims[:2], t.offset + e * size, size) for e in range(E)]


def gguf_terms(f, arch, fam):
    """How read_hf_decoder's and read_hf_gpt2's messages name what they read from this file: by
    the metadata keys (or the tensors) hf_config took each Hugging Face key from, and by the
    tensor names hf_tensors renamed."""
    a = arch + "."
    keys = dict(fam.gguf_keys)
    if a + keys.get("head_dim", "") not in f.metadata:
        keys.pop("head_dim", None)
    keys = {k: a + v for k, v in keys.items() if v}
    keys.setdefault("head_dim", "%sembedding_length / %sattention.head_count" % (a, a))
    keys["vocab_size"] = "token_embd.weight's rows"
    if "rope_freqs.weight" in f.tensors:  # Llama 3's scaling, read from the tensor
        keys.update(("rope_scaling " + k, "rope_freqs.weight's " + k) for k in (
            "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
    else:
        keys["rope_scaling factor"] = a + (linear_factor_key(Meta(f, arch)) or "rope.scaling.factor")
    names, merged = gguf_expert_names(fam)
    block, top = {v: k for k, v in dict(fam.gguf_names, **names).items()}, {v: k for k, v in fam.gguf_top.items()}
    experts = [(re.compile(re.escape(v).replace("%d", r"(\d+)") + "$"), k) for k, v in merged.items()]
    layer = re.compile(r"(?:model\.layers|h)\.(\d+)\.(.+)\.(weight|bias)$")

    def tensor(name):  # hf_tensors' renaming undone
        m = layer.match(name)
        if m and m.group(2) in block:
            return "blk.%s.%s.%s" % (m.group(1), block[m.group(2)], m.group(3))
        for pattern, ours in experts:
            e = m and pattern.match(m.group(2))
            if e:
                return "blk.%s.%s.%s's expert %s" % (m.group(1), ours, m.group(3), e.group(1))
        head, _, tail = name.rpartition(".")
        return top[head] + "." + tail if head in top else name
    return Terms(keys, tensor, where="")


def llama_biases(f, fam, c):
    """(bias_flags, zero biases to add under Hugging Face's names) of a llama file: a group of
    biases is stored when any block holds any of it, and each one missing from a stored group is
    zero, which adds what llama.cpp adds without it: nothing."""
    blocks = sorted({int(n.split(".")[1]) for n in f.tensors if re.match(r"blk\.\d+\.", n)})  # the ones it holds
    flags = 0
    for flag, names in LLAMA_BIASES.items():
        if any("blk.%d.%s.bias" % (i, n) in f.tensors for i in blocks for n in names):
            flags |= flag
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    size = dict(attn_q=q, attn_k=kv, attn_v=kv, attn_output=c["hidden_size"], ffn_gate=c["intermediate_size"],
                ffn_up=c["intermediate_size"], ffn_down=c["hidden_size"])
    zeros = {}
    for flag, names in LLAMA_BIASES.items():
        for i in blocks if flags & flag else ():
            for n in names:
                if "blk.%d.%s.bias" % (i, n) not in f.tensors:
                    zeros["model.layers.%d.%s.bias" % (i, fam.gguf_names[n])] = np.zeros(size[n], np.float32)
    return flags, zeros


# ---- tensors ----

def hf_tensors(f, fam, c):
    """The tensors under Hugging Face's names (nanoGPT's for GPT-2), as Stored, in Hugging Face's
    RoPE layout; rope_freqs is consumed by the config."""
    names, merged = gguf_expert_names(fam)
    block, top, layer = dict(fam.gguf_names, **names), fam.gguf_top, fam.hf_layer
    unrope = {}
    if fam.gguf_rope_permuted:  # llama.cpp permuted HF's q/k rows into interleaved pairs: the inverse of rope_rows
        hd = c["head_dim"]
        rd = int(hd * c.get("partial_rotary_factor", 1.0))
        rd -= rd % 2
        for w, n in (("attn_q", c["num_attention_heads"]), ("attn_k", c["num_key_value_heads"])):
            unrope[w] = np.argsort(rope_rows(n, hd, rd))
    sd = {}
    for name, t in f.tensors.items():
        if name == "rope_freqs.weight":
            continue
        parts = name.split(".")
        rows = unrope.get(parts[2]) if parts[0] == "blk" and len(parts) == 4 else None
        if parts[0] == "blk" and len(parts) == 4 and parts[2] in merged:
            x = fam.ref_experts
            for e, one in enumerate(split_experts(f, t, c[x["count"]], "%s.expert_count" % f.metadata[
                    "general.architecture"])):
                sd[layer % parts[1] + merged[parts[2]] % e + "." + parts[3]] = stored(f, one)
            continue
        if parts[2:3] == ["ffn_gate_inp_shexp"] and len(t.shape) == 1:  # llama.cpp's loader takes [d] as [1, d]
            t = gguf.Tensor(t.name, t.type, t.dims + (1,), t.offset, t.nbytes)
        st = stored(f, t, rows if rows is not None and t.shape[0] == len(rows) else None)  # else refused by shape
        if parts[0] == "blk" and len(parts) == 4 and parts[2] in block:
            sd[layer % parts[1] + block[parts[2]] + "." + parts[3]] = st
        elif len(parts) == 2 and parts[0] in top:
            sd[top[parts[0]] + "." + parts[1]] = st
        else:
            sd[name] = st  # refused by name as a tensor the converter would not use
    return sd


# ---- weight types ----

def weight_chooser(f):
    """convert.py's weight choice for this file: (tensors, --weights, --group-size) -> (weights,
    why, group size). A file of float matrices only is convert.py's usual choice; one holding
    any quantised matrix is Q8_0 unless --weights says otherwise, by default with the largest
    group that every exactly mapped type's group and every row length divide."""
    # a model file holds these in float32 whatever their type here: the learned positions, the
    # router and the shared expert's gate
    in_f32 = ("position_embd.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight")
    kinds = sorted({t.type_name for t in f.tensors.values() if len(t.shape) >= 2 and not t.name.endswith(in_f32)},
                   key=lambda k: (k not in FLOATS, k))
    quant = [k for k in kinds if k not in FLOATS]

    def choose(tensors, asked, group_size):
        if not quant and len(kinds) < 2 or asked in ("f32", "bf16", "f16") and not quant:
            return weight_choice(tensors, asked) + (group_size,)
        names = "the file's %s matrices" % ", ".join(kinds)
        if asked is None and group_size is None:
            types = {k: getattr(v, "stored", "F32") for k, v in tensors.items()
                     if k.split(".")[-1] in storage.QUANTIZED_MATRICES}
            return types, names + " kept bit for bit, each in its own type", None
        if asked not in (None, "q8_0"):
            rounded = {"f32": "", "bf16": ", rounded to bfloat16", "f16": ", rounded to float16"}[asked]
            return asked, "--weights %s: %s dequantised exactly%s" % (asked, names, rounded), group_size
        gs = group_size
        if gs is None:
            gs = min([EXACT_Q8[k] for k in quant if k in EXACT_Q8] or [32])
            rows = {np.shape(v)[1] for k, v in tensors.items() if k.split(".")[-1] in storage.QUANTIZED_MATRICES}
            while any(n % gs for n in rows):
                gs //= 2
        exact = [k for k in quant if k in EXACT_Q8 and EXACT_Q8[k] % gs == 0]
        redone = [k for k in kinds if k not in exact]
        why = names + " as Q8_0: " + "; ".join(
            (["%s mapped exactly" % ", ".join(exact)] if exact else []) +
            (["%s quantised from their exact values%s" % (", ".join(redone), " (--weights f32 or bf16 keeps those)"
                                                          if set(redone) - set(FLOATS) else "")] if redone else []))
        return "q8_0", ("--weights q8_0: " if asked else "") + why, gs
    return choose


# ---- entry points ----

def open_gguf(path):
    try:
        return gguf.GGUFFile(path)
    except gguf.GGUFError as e:
        raise Bad(e.path, e.msg)


def read_gguf(path):
    """convert.py's Source for a GGUF model file."""
    f = open_gguf(path)
    arch = f.metadata.get("general.architecture")
    archs = gguf_families()
    if arch not in archs:
        raise Bad(path, "general.architecture %r is not supported (supported: %s)" % (arch, ", ".join(archs)))
    # a family llama.cpp writes under another's architecture, told apart by its experts (Mixtral's llama)
    moe = {fam.gguf_moe_arch: fam for fam in FAMILIES.values() if fam.gguf_moe_arch}
    fam = moe[arch] if arch in moe and f.metadata.get(arch + ".expert_count") else archs[arch]
    c = hf_config(f, arch, fam)
    sd = hf_tensors(f, fam, c)
    terms = gguf_terms(f, arch, fam)
    if fam.kind == "gpt2":
        src = READERS[fam.kind](path, path, c, sd, terms)
    else:
        biases, zeros = llama_biases(f, fam, c) if fam.gguf_optional_biases else (fam.always_bias, {})
        src = READERS[fam.kind](path, path, c, dict(sd, **zeros), terms, biases)
    cfg = src.cfg
    if fam.gguf_cleared_flags:
        cfg["arch_flags"] &= ~fam.gguf_cleared_flags
    tok = None
    if "tokenizer.ggml.model" in f.metadata:  # else --tokenizer must give one
        from attn import tokenizer_gguf
        try:
            tok = tokenizer_gguf.from_gguf(path, cfg["vocab_size"], f)
        except ValueError as e:
            where, _, msg = str(e).partition(": ")
            raise Bad(where, msg or str(e))
        for n in tok.notes:
            print("convert.py: note: %s: %s" % (path, n), file=sys.stderr)
    # an output.weight equal to token_embd.weight is read as tied, and kept for --quantize
    output = Weight(stored(f, f.tensors["output.weight"]), "output.weight") \
        if cfg["tied_classifier"] and "output.weight" in f.tensors else None
    return src._replace(desc="GGUF %s file" % arch, tok=tok, weights=weight_chooser(f), output=output,
                        tok_hint="a GGUF file with tokenizer.ggml.*, or the model's tokenizer.json")


def chat_template(path):
    """tokenizer.chat_template of a GGUF file, or None."""
    f = open_gguf(path)
    try:
        v = f.metadata.get("tokenizer.chat_template")
        return v if isinstance(v, str) else None
    finally:
        f.close()
