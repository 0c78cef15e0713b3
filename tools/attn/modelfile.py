"""Read and write attn.c model files (docs/FORMAT.md, format versions 1 to 7).

cfg is a dict of the header's model fields (dim ... rope_dims, and format 3's knobs) and how
the weights are stored (weight_type, group_size: 0, 0 for float32); the tokenizer travels as
tok = (blob_bytes, tok_kind, tok_flags, bos_id, eos_id); tensors is a dict of float32
numpy arrays named as in FORMAT.md (layers.{i}.wq and so on), whatever the file stores:
write_model quantises or rounds them as cfg says, read_model widens them back. A chat section
(tools/attn/chat_template.py makes one) travels as its bytes in version 5's layout: write_model(chat=...),
read_chat_section. Every file is written in version 7, with its CRC-32 checksum, which read_model verifies.

Version 6's weight_type WEIGHTS_PER_MATRIX stores each matrix in its own type, GGML's (F32, F16,
BF16, or one of llama.cpp's block types as GGUF stores them): cfg["matrix_types"] maps each
matrix's name to its GGML type name ("Q4_K"). A block-type matrix is written from its blocks
(a uint8 array [rows, row bytes], or an object whose blocks() gives them: a GGUF tensor of that
type), else quantised from its float values as llama-quantize does; read_model dequantises it
with gguf-py's values, bit for bit. How each tensor is stored, the weight types and the
conversions, is tools/attn/storage.py's.
"""
import math
import os
import struct
import zlib

import numpy as np

from attn import gguf_file, outfile, progress, storage
# the tokenizer blob's format, which every reader of a model file reaches through this module
from attn.tokenizer_pack import pack_tokenizer, parse_tokenizer, resize_tokenizer  # noqa: F401

MAGIC = b"ATTN"
VERSION = 8  # the newest this reads, and the one every file is written in
HEADER_SIZE = 256

POS_ROPE, POS_LEARNED, POS_SINUSOID = 0, 1, 2
FFN_SWIGLU, FFN_GELU_TANH, FFN_GELU_ERF, FFN_RELU, FFN_GEGLU_TANH = 0, 1, 2, 3, 4
NORM_RMS, NORM_LAYER = 0, 1
BIAS_QKV, BIAS_O, BIAS_FFN = 1, 2, 4
TOK_SENTENCEPIECE, TOK_BYTE_BPE = 0, 1
TOKF_DUMMY_PREFIX, TOKF_ADD_BOS, TOKF_BOS_STOPS, TOKF_NFC, TOKF_IGNORE_MERGES = 1, 2, 4, 8, 16
TOKF_PRE_SHIFT = 8  # bits 8..11 of tok_flags: tok_kind 1's split
TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_DIGITS_GPT2 = 0, 1, 2, 3
TOKF_ALL = 31 | (15 << TOKF_PRE_SHIFT)
# The GGML types a version 6 file's type table may give a matrix.
MATRIX_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                "Q6_K", "IQ4_NL", "IQ4_XS")
WEIGHT_NAMES = {"f32": storage.WEIGHTS_F32, "q8_0": storage.WEIGHTS_Q8_0, "bf16": storage.WEIGHTS_BF16,
                "f16": storage.WEIGHTS_F16}
QUANTIZE = {"q8_0": storage.WEIGHTS_Q8_0}  # the tools' --quantize names
ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3 = 0, 1, 2
ARCH_QK_NORM, ARCH_NORM_PLUS_ONE, ARCH_OUT_NORMS = 1, 2, 4
ARCH_QK_NORM_WHOLE = 8  # with QK_NORM (version 8): the norms span the whole q and k projections (OLMoE's)
MOE_NORM_TOPK = 1  # moe_flags (version 8): the chosen experts' weights divided by their sum
MAX_EXPERTS = 1024
MAX_GROUP_SIZE, DEFAULT_GROUP_SIZE = 65536, 64

# (name, struct code) in header order; the offsets follow from packing them back to back.
HEADER_FIELDS = [
    ("magic", "4s"), ("version", "I"), ("header_size", "I"),
    ("dim", "I"), ("hidden_dim", "I"), ("n_layers", "I"), ("n_heads", "I"),
    ("n_kv_heads", "I"), ("head_dim", "I"), ("vocab_size", "I"), ("seq_len", "I"),
    ("pos_kind", "I"), ("rope_theta", "f"), ("ffn_kind", "I"), ("norm_kind", "I"),
    ("norm_eps", "f"), ("post_norm", "I"), ("final_norm", "I"), ("bias_flags", "I"),
    ("tied_classifier", "I"), ("embed_scale", "f"), ("rope_dims", "I"),
    ("tok_kind", "I"), ("tok_flags", "I"), ("bos_id", "i"), ("eos_id", "i"),
    ("tok_offset", "Q"), ("tok_bytes", "Q"), ("weights_offset", "Q"), ("weights_bytes", "Q"),
    ("weight_type", "I"), ("group_size", "I"),
    ("rope_scaling", "I"), ("rope_factor", "f"), ("rope_low_freq_factor", "f"), ("rope_high_freq_factor", "f"),
    ("rope_original_ctx", "I"), ("arch_flags", "I"), ("attn_scale", "f"), ("sliding_window", "I"),
    ("global_every", "I"), ("rope_local_theta", "f"),
    ("chat_offset", "Q"), ("chat_bytes", "Q"), ("checksum", "I"),
    ("n_matrix_types", "I"), ("types_offset", "Q"),
    ("sampling_flags", "I"), ("temperature", "f"), ("top_p", "f"), ("top_k", "I"), ("min_p", "f"),
    ("repeat_penalty", "f"), ("n_experts", "I"), ("n_experts_used", "I"), ("moe_flags", "I"),
    ("shared_dim", "I"),
]
HEADER_STRUCT = struct.Struct("<" + "".join(code for _, code in HEADER_FIELDS))
assert HEADER_STRUCT.size == 256
# where each version's fields end: the bytes from there to 256 are reserved and zero
HEADER_END = {1: 136, 2: 144, 3: 184, 4: 200, 5: 204, 6: 216, 7: 240, 8: 256}
# Version 7's sampling defaults: (field, its bit in sampling_flags, low, high), the ranges of ./run's flags.
SAMPLING = (("temperature", 1, 0, 100), ("top_p", 2, 0, 1), ("top_k", 4, 0, 1 << 24), ("min_p", 8, 0, 1),
            ("repeat_penalty", 16, 0.01, 100))
CHECKSUM_OFFSET = 200  # the checksum's four bytes, taken as zero when it is computed
CHECKSUM_CHUNK = 1 << 24

CONFIG_FIELDS = ["dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                 "vocab_size", "seq_len", "pos_kind", "rope_theta", "ffn_kind", "norm_kind",
                 "norm_eps", "post_norm", "final_norm", "bias_flags", "tied_classifier",
                 "embed_scale", "rope_dims", "weight_type", "group_size",
                 "rope_scaling", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                 "rope_original_ctx", "arch_flags", "attn_scale", "sliding_window", "global_every",
                 "rope_local_theta", "sampling_flags", "temperature", "top_p", "top_k", "min_p", "repeat_penalty",
                 "n_experts", "n_experts_used", "moe_flags", "shared_dim"]
FLOAT_FIELDS = ("rope_theta", "norm_eps", "embed_scale", "rope_factor", "rope_low_freq_factor",
                "rope_high_freq_factor", "attn_scale", "rope_local_theta", "temperature", "top_p", "min_p",
                "repeat_penalty")
# Format 3's fields; zero means the knob is off, and a file without them is version 1 or 2.
V3_FIELDS = ("rope_scaling", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
             "rope_original_ctx", "arch_flags", "attn_scale", "sliding_window", "global_every",
             "rope_local_theta")

# Knobs a caller may leave out: a Llama-style block.
CONFIG_DEFAULTS = dict(pos_kind=POS_ROPE, rope_theta=10000.0, ffn_kind=FFN_SWIGLU,
                       norm_kind=NORM_RMS, norm_eps=1e-5, post_norm=0, final_norm=1,
                       bias_flags=0, tied_classifier=1, embed_scale=1.0, weight_type=storage.WEIGHTS_F32,
                       group_size=0, **{k: 0 for k in V3_FIELDS}, sampling_flags=0,
                       **{k: 0 for k, _, _, _ in SAMPLING}, n_experts=0, n_experts_used=0, moe_flags=0,
                       shared_dim=0)

ENUM_LIMITS = dict(pos_kind=2, ffn_kind=4, norm_kind=1, post_norm=1, final_norm=1,
                   bias_flags=7, tied_classifier=1, tok_kind=1, tok_flags=TOKF_ALL, weight_type=4,
                   rope_scaling=2, arch_flags=15, rope_original_ctx=1 << 24, sliding_window=1 << 24,
                   global_every=1025)  # n_layers' limit + 1: a model whose every layer is local


def complete_config(cfg):
    """Fill the defaulted knobs and the derived head_dim / n_kv_heads / rope_dims."""
    c = dict(CONFIG_DEFAULTS)
    c.update(cfg)
    c.setdefault("n_kv_heads", c["n_heads"])
    c.setdefault("head_dim", c["dim"] // c["n_heads"])
    if "rope_dims" not in c:
        c["rope_dims"] = c["head_dim"] - c["head_dim"] % 2 if c["pos_kind"] == POS_ROPE else 0
    unknown = set(c) - set(CONFIG_FIELDS) - {"matrix_types"}
    if unknown:
        raise ValueError("unknown config field(s): %s" % ", ".join(sorted(unknown)))
    for k in FLOAT_FIELDS:
        if math.isfinite(c[k]) and abs(c[k]) > np.finfo(np.float32).max:
            raise ValueError("%s = %r is past float32's range" % (k, c[k]))
        c[k] = float(np.float32(c[k]))  # what the file will hold
    for k in CONFIG_FIELDS:
        if k not in FLOAT_FIELDS:
            c[k] = int(c[k])
    return c


MAX_SEQ_LEN = 1 << 20  # the longest context a loader accepts
# the largest sizes a loader accepts (docs/FORMAT.md)
LIMITS = dict(dim=65536, hidden_dim=262144, head_dim=4096, n_layers=1024, n_heads=1024, n_kv_heads=1024,
              vocab_size=1 << 24, seq_len=MAX_SEQ_LEN)


def check_config(c):
    """Enforce FORMAT.md's loader limits; raise ValueError naming the field."""
    for k in ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
              "vocab_size", "seq_len"):
        if c[k] < 1:
            raise ValueError("%s = %d must be >= 1" % (k, c[k]))
    for k, lim in LIMITS.items():
        if c[k] > lim:
            raise ValueError("%s = %d exceeds the limit %d" % (k, c[k], lim))
    for k, lim in ENUM_LIMITS.items():
        if k in c and not 0 <= c[k] <= lim:
            raise ValueError("%s = %d is out of range 0..%d" % (k, c[k], lim))
    if c["n_heads"] % c["n_kv_heads"]:
        raise ValueError("n_kv_heads = %d does not divide n_heads = %d" % (c["n_kv_heads"], c["n_heads"]))
    if not (math.isfinite(c["norm_eps"]) and 0 < c["norm_eps"] < 1):
        raise ValueError("norm_eps = %r must be finite and in (0, 1)" % c["norm_eps"])
    if not (math.isfinite(c["rope_theta"]) and c["rope_theta"] > 0):
        raise ValueError("rope_theta = %r must be finite and > 0" % c["rope_theta"])
    if not math.isfinite(c["embed_scale"]):
        raise ValueError("embed_scale = %r must be finite" % c["embed_scale"])
    if c["sampling_flags"] & ~31:
        raise ValueError("sampling_flags = %#x has unknown bits" % c["sampling_flags"])
    for k, bit, lo, hi in SAMPLING:
        if (not lo <= c[k] <= hi) if c["sampling_flags"] & bit else c[k] != 0:
            raise ValueError("sampling default %s = %r is out of [%g, %g] or not flagged" % (k, c[k], lo, hi))
    if c["rope_dims"] % 2 or c["rope_dims"] > c["head_dim"]:
        raise ValueError("rope_dims = %d must be even and <= head_dim = %d" % (c["rope_dims"], c["head_dim"]))
    if c["pos_kind"] == POS_ROPE and c["rope_dims"] < 2:
        raise ValueError("rope_dims = %d: RoPE needs at least 2" % c["rope_dims"])
    check_v3_fields(c)
    check_experts(c)
    check_matrix_types(c)
    gs = c["group_size"]
    if c["weight_type"] != storage.WEIGHTS_Q8_0:
        if gs:
            kind = {storage.WEIGHTS_F32: "float32", storage.WEIGHTS_BF16: "bfloat16", storage.WEIGHTS_F16: "float16",
                    storage.WEIGHTS_PER_MATRIX: "per-matrix"}[c["weight_type"]]
            raise ValueError("group_size = %d with %s weights, where it must be 0" % (gs, kind))
    elif not 1 <= gs <= MAX_GROUP_SIZE:
        raise ValueError("group_size = %d is outside [1, %d]" % (gs, MAX_GROUP_SIZE))
    elif any(w % gs for w in quantized_widths(c)):
        raise ValueError("group_size %d does not divide every quantised row: %s" % (gs, quantized_widths_said(c)))


def check_v3_fields(c):
    """Format 3's knobs, as model/file.h's config_from_header checks them."""
    if c["rope_scaling"] and not (math.isfinite(c["rope_factor"]) and c["rope_factor"] >= 1):
        raise ValueError("rope_factor = %r must be >= 1 with rope scaling" % c["rope_factor"])
    if c["rope_scaling"] == ROPE_SCALING_LLAMA3 and not (
            0 < c["rope_low_freq_factor"] < c["rope_high_freq_factor"] < math.inf and c["rope_original_ctx"] > 0):
        raise ValueError("llama3 RoPE scaling needs 0 < rope_low_freq_factor < rope_high_freq_factor and "
                         "rope_original_ctx > 0")
    if not (math.isfinite(c["attn_scale"]) and c["attn_scale"] >= 0):
        raise ValueError("attn_scale = %r must be finite and >= 0" % c["attn_scale"])
    if (c["sliding_window"] == 0) != (c["global_every"] == 0):
        raise ValueError("sliding_window (%d) and global_every (%d) are set together or not at all"
                         % (c["sliding_window"], c["global_every"]))
    if c["sliding_window"] and not (math.isfinite(c["rope_local_theta"]) and c["rope_local_theta"] > 0):
        raise ValueError("rope_local_theta = %r must be finite and > 0" % c["rope_local_theta"])
    if c["arch_flags"] and c["norm_kind"] != NORM_RMS:
        raise ValueError("arch_flags %d need RMSNorm (norm_kind 0)" % c["arch_flags"])
    if c["arch_flags"] & ARCH_QK_NORM_WHOLE and not c["arch_flags"] & ARCH_QK_NORM:
        raise ValueError("arch_flags %d: QK_NORM_WHOLE (8) goes with QK_NORM (1)" % c["arch_flags"])
    if c["ffn_kind"] == FFN_GEGLU_TANH and c["bias_flags"] & BIAS_FFN:
        raise ValueError("ffn_kind GeGLU has no feed-forward biases")


def check_experts(c):
    """Version 8's experts, as model/header.h's check_experts checks them."""
    E = c["n_experts"]
    if not 0 <= E <= MAX_EXPERTS:
        raise ValueError("n_experts = %d is out of range 0..%d" % (E, MAX_EXPERTS))
    if not (1 if E else 0) <= c["n_experts_used"] <= E:
        raise ValueError("n_experts_used = %d is out of range %d..%d" % (c["n_experts_used"], 1 if E else 0, E))
    for k, most in (("moe_flags", MOE_NORM_TOPK), ("shared_dim", 262144)):
        if not 0 <= c[k] <= (most if E else 0):
            raise ValueError("%s = %d is out of range for n_experts %d" % (k, c[k], E))
    if E and (c["bias_flags"] & BIAS_FFN or c["post_norm"] or c["arch_flags"] & ARCH_OUT_NORMS):
        raise ValueError("n_experts %d with feed-forward biases, post_norm or ARCH_OUT_NORMS, which no family with "
                         "experts has" % E)


def matrix_specs(c):
    """[(name, shape)] of the matrices a type table lists, in its order (FORMAT.md's)."""
    return [(n, s) for n, s in tensor_specs(c) if n.split(".")[-1] in storage.QUANTIZED_MATRICES]


def check_matrix_types(c):
    """A type per matrix (cfg["matrix_types"]) exactly with weight_type 4: every matrix named, each
    type one the table may hold, each row whole blocks of it."""
    types = c.get("matrix_types")
    if c["weight_type"] != storage.WEIGHTS_PER_MATRIX:
        if types:
            raise ValueError("matrix_types given with weight_type %d; they need weight_type 4" % c["weight_type"])
        return
    specs = matrix_specs(c)
    if types is None or set(types) != {n for n, _ in specs}:
        raise ValueError("weight_type 4 needs a type for exactly the matrices %s" % ", ".join(n for n, _ in specs))
    for n, shape in specs:
        t = types[n]
        if t not in MATRIX_TYPES:
            raise ValueError("tensor %s: type %s is not one a model file holds (%s)" % (n, t, ", ".join(MATRIX_TYPES)))
        block = gguf_file.BLOCK_SIZES[gguf_file.TYPE_IDS[t]][0]
        if shape[1] % block:
            raise ValueError("tensor %s is %s, whose rows of %d values are not whole blocks of %d"
                             % (n, t, shape[1], block))


def quantized_widths(c):
    """The row lengths of the quantised matrices, which a group size must divide."""
    return (c["dim"], c["n_heads"] * c["head_dim"], c["hidden_dim"]) + ((c["shared_dim"],) if c["shared_dim"] else ())


def quantized_widths_said(c):
    """quantized_widths for a message: "dim 64, n_heads x head_dim 64, hidden_dim 172"."""
    return ", ".join("%s %d" % kv for kv in zip(("dim", "n_heads x head_dim", "hidden_dim", "shared_dim"),
                                                 quantized_widths(c)))


def with_weight_type(cfg, quantize=None, group_size=None):
    """cfg completed and set to be stored as quantize says: None or "f32" float32, "bf16" or
    "f16" the matrices in 16 bits, "q8_0" Q8_0 with group_size weights per scale, by default
    the largest of 64, 32, ..., 1 that divides every quantised row. ValueError (naming the
    widths) if an explicit group_size does not."""
    c = complete_config(cfg)
    if isinstance(quantize, dict):  # a type per matrix, as the checkpoint holds them
        if group_size is not None:
            raise ValueError("a group size (%d) needs Q8_0 weights (--weights q8_0)" % group_size)
        c = dict(c, weight_type=storage.WEIGHTS_PER_MATRIX, group_size=0, matrix_types=dict(quantize))
        check_config(c)
        return c
    if quantize not in (None, "q8_0") and quantize in WEIGHT_NAMES:
        if group_size is not None:
            raise ValueError("a group size (%d) needs Q8_0 weights (--weights q8_0)" % group_size)
        return dict(c, weight_type=WEIGHT_NAMES[quantize], group_size=0)
    if quantize is None:
        if group_size is not None:
            raise ValueError("a group size (%d) needs Q8_0 weights (--weights q8_0)" % group_size)
        return dict(c, weight_type=storage.WEIGHTS_F32, group_size=0)
    if quantize not in QUANTIZE:
        raise ValueError("unknown weight type %r (known: %s)" % (quantize, ", ".join(sorted(WEIGHT_NAMES))))
    gs = group_size
    if gs is None:
        gs = DEFAULT_GROUP_SIZE
        while any(w % gs for w in quantized_widths(c)):
            gs //= 2
    c = dict(c, weight_type=QUANTIZE[quantize], group_size=gs)
    check_config(c)
    return c


def tensor_specs(c):
    """[(name, shape)] in file order."""
    d, h, V = c["dim"], c["hidden_dim"], c["vocab_size"]
    q, kv = c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    ln, b = c["norm_kind"] == NORM_LAYER, c["bias_flags"]
    specs = [("tok_embedding", (V, d))]
    if c["pos_kind"] == POS_LEARNED:
        specs.append(("pos_embedding", (c["seq_len"], d)))
    for i in range(c["n_layers"]):
        p = "layers.%d." % i
        L = [("attn_norm_w", (d,))]
        if ln:
            L.append(("attn_norm_b", (d,)))
        for w, n in (("q", q), ("k", kv), ("v", kv)):
            L.append(("w" + w, (n, d)))
            if b & BIAS_QKV:
                L.append(("b" + w, (n,)))
        if c["arch_flags"] & ARCH_QK_NORM:
            whole = c["arch_flags"] & ARCH_QK_NORM_WHOLE
            L += [("q_norm_w", (q if whole else c["head_dim"],)), ("k_norm_w", (kv if whole else c["head_dim"],))]
        L.append(("wo", (d, q)))
        if b & BIAS_O:
            L.append(("bo", (d,)))
        if c["arch_flags"] & ARCH_OUT_NORMS:
            L.append(("attn_out_norm_w", (d,)))
        L.append(("ffn_norm_w", (d,)))
        if ln:
            L.append(("ffn_norm_b", (d,)))
        E = c["n_experts"]
        if E:  # the router, then each of w1, w3 and w2 every expert's one after another
            L.append(("router", (E, d)))
        experts = max(E, 1)
        ffn = [("1", (experts * h, d), h)]
        if c["ffn_kind"] in (FFN_SWIGLU, FFN_GEGLU_TANH):
            ffn.append(("3", (experts * h, d), h))
        ffn.append(("2", (experts * d, h), d))
        S = c["shared_dim"]  # the shared expert: its gate, then its matrices after the experts'
        if S:
            L.append(("shared_gate", (d,)))
        for k, shape, n in ffn:
            L.append(("w" + k, shape))
            if b & BIAS_FFN:
                L.append(("b" + k, (n,)))
        if c["arch_flags"] & ARCH_OUT_NORMS:
            L.append(("ffn_out_norm_w", (d,)))
        if S:
            L += [("shared_w1", (S, d))] + ([("shared_w3", (S, d))] if len(ffn) == 3 else []) + [("shared_w2", (d, S))]
        specs += [(p + n, s) for n, s in L]
    if c["final_norm"]:
        specs.append(("final_norm_w", (d,)))
        if ln:
            specs.append(("final_norm_b", (d,)))
    if not c["tied_classifier"]:
        specs.append(("classifier", (V, d)))
    return specs


# ---- whole files ----

def is_model_file(path):
    """Whether the regular file path starts as a model file does (./train's check before replacing one)."""
    with open(path, "rb") as f:
        return f.read(4) == MAGIC


def write_model(path, cfg, tok, tensors, chat=b""):
    """Write a version 5 model file atomically (outfile.replacing); an existing path that is not
    a regular file is refused (outfile.Refused, an OSError). chat: the chat section's bytes in
    version 5's layout (chat_template.pack_section), or empty. The checksum is computed as the
    bytes are written, and patched into the header at the end (path "-", standard output: computed
by a first pass, which writes nothing, and written with the header)."""
    c = complete_config(cfg)
    check_config(c)
    blob, kind, flags, bos, eos = tok
    blob = bytes(blob)
    pieces, _, _ = parse_tokenizer(blob)
    if len(pieces) != c["vocab_size"]:
        raise ValueError("tokenizer has %d pieces but vocab_size is %d" % (len(pieces), c["vocab_size"]))
    for k, v in (("bos_id", bos), ("eos_id", eos)):
        if not -1 <= v < c["vocab_size"]:
            raise ValueError("%s = %d is outside the vocabulary" % (k, v))
    specs = tensor_specs(c)
    names = {n for n, _ in specs}
    extra = set(tensors) - names
    if extra:
        raise ValueError("tensor(s) not in this config: %s" % ", ".join(sorted(extra)))
    for n, shape in specs:
        if n not in tensors:
            raise ValueError("missing tensor %s" % n)
        if tuple(np.shape(tensors[n])) != shape:
            raise ValueError("tensor %s has shape %s, expected %s" % (n, tuple(np.shape(tensors[n])), shape))
    chat = bytes(chat)
    table = bytes(gguf_file.TYPE_IDS[c["matrix_types"][n]] for n, _ in matrix_specs(c)) \
        if c["weight_type"] == storage.WEIGHTS_PER_MATRIX else b""
    weights_offset = storage.padded(HEADER_SIZE + len(blob) + len(chat) + len(table))
    weights_bytes = sum(storage.stored_bytes(c, n, s) for n, s in specs)
    h = dict(c, magic=MAGIC, version=VERSION, header_size=HEADER_SIZE, tok_kind=int(kind),
             tok_flags=int(flags), bos_id=int(bos), eos_id=int(eos), tok_offset=HEADER_SIZE,
             tok_bytes=len(blob), weights_offset=weights_offset, weights_bytes=weights_bytes,
             chat_offset=HEADER_SIZE + len(blob) if chat else 0, chat_bytes=len(chat), checksum=0,
             n_matrix_types=len(table), types_offset=HEADER_SIZE + len(blob) + len(chat) if table else 0)
    check_config(h)
    header = HEADER_STRUCT.pack(*[h[n] for n, _ in HEADER_FIELDS])
    header += bytes(HEADER_SIZE - len(header))
    crc = zlib.crc32(header)  # its checksum field is zero here

    def body(write, shown=None):
        """Everything after the header, to write(bytes)."""
        write(blob)
        write(chat)
        write(table)
        write(bytes(weights_offset - HEADER_SIZE - len(blob) - len(chat) - len(table)))
        for n, shape in specs:
            for a in storage.stored_pieces(c, n, tensors[n]):
                write(memoryview(a).cast("B"))
                write(bytes(storage.padded(a.nbytes) - a.nbytes))
            if shown:
                shown.done(storage.stored_bytes(c, n, shape))

    def add(data):
        nonlocal crc
        crc = zlib.crc32(data, crc)
    # drop_cache: out of the page cache, so that ./run reads it back into 2 MiB folios (model.h's
    # write_atomic says why)
    with outfile.replacing(path, drop_cache=True) as f, progress.Progress(len(specs), weights_bytes) as shown:
        def put(data):
            add(data)
            f.write(data)
        if path != outfile.STDIO:
            f.write(header)
            body(put, shown)
            f.seek(CHECKSUM_OFFSET)
            f.write(struct.pack("<I", crc))
        else:  # no seeking back on standard output: a first pass that writes nothing gives the checksum
            body(add)
            f.write(header[:CHECKSUM_OFFSET] + struct.pack("<I", crc) + header[CHECKSUM_OFFSET + 4:])
            body(f.write, shown)


def read_header(data):
    """Header dict from the first 256 bytes, validated; data is bytes-like."""
    if len(data) < HEADER_SIZE:
        raise ValueError("file is %d bytes, shorter than the %d-byte header" % (len(data), HEADER_SIZE))
    h = dict(zip([n for n, _ in HEADER_FIELDS], HEADER_STRUCT.unpack_from(data, 0)))
    if h["magic"] != MAGIC:
        raise ValueError("bad magic %r, not an attn.c model file" % h["magic"])
    if h["version"] > VERSION:
        raise ValueError("format version %d is newer than this build (%d)" % (h["version"], VERSION))
    if h["version"] < 1:
        raise ValueError("format version %d is not supported" % h["version"])
    if h["header_size"] != HEADER_SIZE:
        raise ValueError("header_size = %d, expected %d" % (h["header_size"], HEADER_SIZE))
    reserved = HEADER_END[h["version"]]
    if any(bytes(data[reserved:HEADER_SIZE])):
        raise ValueError("reserved header bytes %d..%d of a version %d file are not zero"
                         % (reserved, HEADER_SIZE - 1, h["version"]))
    if h["version"] < 3 and (h["weight_type"] > storage.WEIGHTS_Q8_0 or h["ffn_kind"] > FFN_RELU or h["tok_flags"] > 7):
        raise ValueError("a version %d file uses a version 3 weight_type, ffn_kind or tok_flags" % h["version"])
    if h["version"] < 6 and h["weight_type"] == storage.WEIGHTS_PER_MATRIX:
        raise ValueError("weight_type 4 (a type per matrix) in a version %d file; it came with version 6"
                         % h["version"])
    if h["weight_type"] != storage.WEIGHTS_PER_MATRIX and (h["n_matrix_types"] or h["types_offset"]):
        raise ValueError("a type table (n_matrix_types %d) without weight_type 4" % h["n_matrix_types"])
    # the types are checked once read_model has read the table; every other field here
    check_config(dict(h, weight_type=storage.WEIGHTS_F32) if h["weight_type"] == storage.WEIGHTS_PER_MATRIX else h)
    return h


def read_model(path, dequantize=True):
    """(cfg, tok, tensors) from a model file, every field and size checked.

    The tensors are float32, a Q8_0 file's matrices dequantised and a bfloat16 or float16
    file's widened; with dequantize=False those come as they are stored instead, a (q int8
    [rows, cols], scale float32 [rows, cols / group_size]) pair each, or a uint16 array of
    bfloat16 bits, or a float16 array; in a file of a type per matrix (cfg["matrix_types"]),
    each matrix's bytes, uint8 [rows, row bytes] (storage.dequantize_matrix gives its values)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
    h = read_header(head)
    c = {k: h[k] for k in CONFIG_FIELDS}
    if h["tok_offset"] != HEADER_SIZE:
        raise ValueError("tok_offset = %d, expected %d" % (h["tok_offset"], HEADER_SIZE))
    tok_end = HEADER_SIZE + h["tok_bytes"]
    if h["chat_bytes"] and h["chat_offset"] != tok_end:
        raise ValueError("chat_offset = %d, expected the tokenizer's end %d" % (h["chat_offset"], tok_end))
    if not h["chat_bytes"] and h["chat_offset"]:
        raise ValueError("chat_offset = %d but chat_bytes is 0" % h["chat_offset"])
    tok_end += h["chat_bytes"]
    if h["weight_type"] == storage.WEIGHTS_PER_MATRIX:
        c["matrix_types"] = read_type_table(path, h, c, tok_end, size)
        check_config(c)
        tok_end += h["n_matrix_types"]
    if h["weights_offset"] % storage.ALIGN or h["weights_offset"] < tok_end:
        raise ValueError("weights_offset = %d is not a multiple of 64 at or after the tokenizer's (and chat "
                         "section's and type table's) end %d" % (h["weights_offset"], tok_end))
    specs = tensor_specs(c)
    need = sum(storage.stored_bytes(c, n, s) for n, s in specs)
    if need >= 1 << 48:
        raise ValueError("tensors would need %d bytes, beyond 2^48" % need)
    if h["weights_bytes"] != need:
        raise ValueError("weights_bytes = %d but the config needs %d" % (h["weights_bytes"], need))
    if size != h["weights_offset"] + need:
        raise ValueError("file is %d bytes, the header implies %d" % (size, h["weights_offset"] + need))
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    if h["version"] >= 5 and file_checksum(mm) != h["checksum"]:
        raise ValueError("checksum mismatch: the file is damaged")
    blob = bytes(mm[HEADER_SIZE:HEADER_SIZE + h["tok_bytes"]])
    pieces, _, _ = parse_tokenizer(blob)
    if len(pieces) != c["vocab_size"]:
        raise ValueError("tokenizer has %d pieces but vocab_size is %d" % (len(pieces), c["vocab_size"]))
    for k in ("bos_id", "eos_id"):
        if not -1 <= h[k] < c["vocab_size"]:
            raise ValueError("%s = %d is outside the vocabulary" % (k, h[k]))
    if mm[tok_end:h["weights_offset"]].any():
        raise ValueError("padding before the tensors is not zero")
    tensors, off = {}, h["weights_offset"]

    def piece(what, dtype, shape):
        nonlocal off
        nb = np.dtype(dtype).itemsize * int(np.prod(shape))
        a = mm[off:off + nb].view(dtype).reshape(shape)
        if mm[off + nb:off + storage.padded(nb)].any():
            raise ValueError("padding after %s is not zero" % what)
        off += storage.padded(nb)
        return a
    for n, shape in specs:
        t = storage.matrix_type(c, n)
        if t:
            raw = piece("tensor %s" % n, np.uint8, (shape[0], storage.block_layout(t, shape)[2]))
            if not dequantize:
                tensors[n] = raw
                continue
            tensors[n] = storage.dequantize_matrix(t, raw, shape)
        elif storage.is_quantized(c, n):
            q = piece("tensor %s's int8 values" % n, np.int8, shape)
            scale = piece("tensor %s's scales" % n, "<f4", (shape[0], shape[1] // c["group_size"]))
            tensors[n] = storage.dequantize_q8_0(q, scale) if dequantize else (q, scale)
        elif storage.is_half(c, n):
            bf16 = c["weight_type"] == storage.WEIGHTS_BF16
            h16 = piece("tensor %s" % n, "<u2" if bf16 else "<f2", shape)
            tensors[n] = (storage.from_bf16(h16) if bf16 else h16.astype(np.float32)) if dequantize else h16
        else:
            tensors[n] = piece("tensor %s" % n, "<f4", shape)
    tok = (blob, h["tok_kind"], h["tok_flags"], h["bos_id"], h["eos_id"])
    return c, tok, tensors


def read_type_table(path, h, c, at, size):
    """A version 6 file's type table as {matrix name: GGML type name}, where the header says."""
    specs = matrix_specs(c)
    if h["n_matrix_types"] != len(specs):
        raise ValueError("n_matrix_types = %d but the config has %d matrices" % (h["n_matrix_types"], len(specs)))
    if h["types_offset"] != at or at + len(specs) > size:
        raise ValueError("type table (%d bytes at %d) does not follow the tokenizer and chat section at %d inside "
                         "the file" % (len(specs), h["types_offset"], at))
    with open(path, "rb") as f:
        f.seek(at)
        table = f.read(len(specs))
    types = {}
    for (n, _), t in zip(specs, table):
        name = gguf_file.GGML_TYPES.get(t)
        if name not in MATRIX_TYPES:
            raise ValueError("tensor %s has type %d, which a model file does not hold (%s)"
                             % (n, t, ", ".join(MATRIX_TYPES)))
        types[n] = name
    return types


def file_checksum(data):
    """Version 5's checksum of a whole model file's bytes (bytes-like or a memmap): zlib's CRC-32
    with the checksum's own four bytes taken as zero."""
    view = memoryview(data).cast("B")
    crc = zlib.crc32(view[:CHECKSUM_OFFSET])
    crc = zlib.crc32(bytes(4), crc)
    for at in range(CHECKSUM_OFFSET + 4, len(view), CHECKSUM_CHUNK):
        crc = zlib.crc32(view[at:at + CHECKSUM_CHUNK], crc)
    return crc


def read_chat_section(path):
    """The chat section's bytes of a model file read_model accepts (empty without one), in
    version 5's layout: a version 4 section, which ends at its text, gains a zero template_len
    (an empty template)."""
    with open(path, "rb") as f:
        h = read_header(f.read(HEADER_SIZE))
        f.seek(h["chat_offset"])
        data = f.read(h["chat_bytes"]) if h["chat_bytes"] else b""
    return data + bytes(4) if data and h["version"] < 5 else data
