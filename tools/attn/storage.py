"""How a model file stores each tensor (docs/FORMAT.md): the weight types, each tensor's bytes
padded to 64, and the conversions between float32 values and what is stored: Q8_0's int8
values and scales, bfloat16 and float16, and version 6's GGML types per matrix (quantised as
llama-quantize does, tools/attn/quantize.py; dequantised with tools/attn/gguf_file.py's
dequantisers, the values gguf-py gives, bit for bit). tools/attn/modelfile.py lays the tensors
out in a whole file.
"""
import numpy as np

from attn import gguf_file
from attn import quantize

ALIGN = 64
WEIGHTS_F32, WEIGHTS_Q8_0, WEIGHTS_BF16, WEIGHTS_F16, WEIGHTS_PER_MATRIX = 0, 1, 2, 3, 4
FLOAT_MATRIX_TYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}
# The tensors a Q8_0 file stores as int8 values and scales, and a bfloat16 or float16 file in
# 16 bits (by the last part of their names).
QUANTIZED_MATRICES = {"tok_embedding", "wq", "wk", "wv", "wo", "w1", "w3", "w2", "shared_w1", "shared_w3", "shared_w2",
                      "classifier"}


def padded(nbytes):
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def is_quantized(c, name):
    return c["weight_type"] == WEIGHTS_Q8_0 and name.split(".")[-1] in QUANTIZED_MATRICES


def is_half(c, name):
    """A matrix a bfloat16 or float16 file stores in 16 bits."""
    return c["weight_type"] in (WEIGHTS_BF16, WEIGHTS_F16) and name.split(".")[-1] in QUANTIZED_MATRICES


def matrix_type(c, name):
    """The GGML type of a matrix in a file of a type per matrix, else None."""
    types = c.get("matrix_types") if c["weight_type"] == WEIGHTS_PER_MATRIX else None
    return types.get(name) if types else None


def block_layout(t, shape):
    """(values per block, bytes per block, bytes per row) of a matrix of GGML type t."""
    block, block_bytes = gguf_file.BLOCK_SIZES[gguf_file.TYPE_IDS[t]]
    return block, block_bytes, shape[1] // block * block_bytes


def stored_bytes(c, name, shape, pad=True):
    """What a tensor takes in the file, padding included (pad False: its values alone, for bits
    a weight): a Q8_0 matrix is two pieces."""
    size = padded if pad else int
    n = int(np.prod(shape))
    t = matrix_type(c, name)
    if t:
        return size(shape[0] * block_layout(t, shape)[2])
    if is_quantized(c, name):
        return size(n) + size(4 * (n // c["group_size"]))
    if is_half(c, name):
        return size(2 * n)
    return size(4 * n)


def to_bf16(w):
    """float32 -> bfloat16 bits (uint16), rounded to nearest even; exact for values that are
    bfloat16 already, as a bf16 checkpoint's weights are. A million values at a time, so that a
    262k-row embedding needs no 64-bit copy of itself."""
    f = np.ascontiguousarray(w, dtype="<f4")
    bits, out = f.reshape(-1).view("<u4"), np.empty(f.shape, "<u2")
    flat = out.reshape(-1)
    for i in range(0, bits.size, 1 << 20):
        u = bits[i:i + (1 << 20)].astype(np.uint64)
        flat[i:i + (1 << 20)] = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return out


def from_bf16(h):
    """bfloat16 bits (uint16) -> float32, exactly."""
    u = np.asarray(h, dtype="<u2").astype("<u4")
    u <<= 16
    return u.view("<f4")


def quantize_q8_0(w, group_size):
    """(q int8 [rows, cols], scale float32 [rows, cols / group_size]): FORMAT.md's Q8_0.

    Everything is float32, w / scale included, as in llama2.c's export: in float64 a few
    quotients would land on the other side of a .5 and round to another q."""
    w = np.asarray(w, dtype=np.float32)
    if not np.isfinite(w).all():
        raise ValueError("non-finite weights cannot be quantised")
    g = w.reshape(w.shape[0], -1, group_size)
    scale = np.abs(g).max(axis=2) / np.float32(127)
    # an all-zero group has scale 0 and q 0: divide it by 1 instead
    q = np.round(g / np.where(scale == 0, np.float32(1), scale)[..., None])
    return np.clip(q, -127, 127).astype(np.int8).reshape(w.shape), scale


def stored_pieces(c, name, w):
    """The little-endian arrays a tensor is written as: itself in float32 or 16 bits, or its
    Q8_0 pair. A float32 value beyond float16's range is refused rather than made infinite.
    Messages name the tensor as its checkpoint does when w knows that name (tensors.Weight)."""
    label = getattr(w, "name", None) or name
    t = matrix_type(c, name)
    if t in FLOAT_MATRIX_TYPES:  # a GGUF's float matrices hold their own type's values: exact both ways
        a = np.asarray(w, dtype=np.float32)
        if t == "F16" and np.abs(a).max(initial=0) > 65504:  # a float checkpoint's, where a fallback chose F16
            raise ValueError("tensor %s: a weight of magnitude %g does not fit float16" % (name, np.abs(a).max()))
        return (to_bf16(a) if t == "BF16" else np.ascontiguousarray(a, dtype=FLOAT_MATRIX_TYPES[t]),)
    if t:
        shape = tuple(np.shape(w))
        raw = isinstance(w, np.ndarray) and w.dtype == np.uint8
        blocks = w if raw else w.blocks(t) if hasattr(w, "blocks") else None
        if blocks is None:  # kept as the source stores it if it is of that type, else quantised as llama-quantize does
            blocks = quantize.quantize_rows(np.asarray(w, dtype=np.float32), t)
        if blocks.shape != (shape[0], block_layout(t, shape)[2]):
            raise ValueError("tensor %s: %d x %d bytes of %s blocks, where its shape needs %d x %d"
                             % ((label,) + blocks.shape + (t, shape[0], block_layout(t, shape)[2])))
        return (np.ascontiguousarray(blocks),)
    if is_half(c, name):
        w = np.asarray(w, dtype=np.float32)
        if not np.isfinite(w).all():
            raise ValueError("tensor %s: non-finite weights" % label)
        if c["weight_type"] == WEIGHTS_BF16:
            return (to_bf16(w),)
        if np.abs(w).max(initial=0) > 65504:
            raise ValueError("tensor %s: a weight of magnitude %g does not fit float16" % (label, np.abs(w).max()))
        return (np.ascontiguousarray(w, dtype="<f2"),)
    if not is_quantized(c, name):
        return (np.ascontiguousarray(w, dtype="<f4"),)
    exact = w.q8_0(c["group_size"]) if hasattr(w, "q8_0") else None  # already integers times scales
    if exact is not None:
        return exact[0], np.ascontiguousarray(exact[1], dtype="<f4")
    try:
        q, scale = quantize_q8_0(w, c["group_size"])
    except ValueError as e:
        raise ValueError("tensor %s: %s" % (label, e))
    return q, np.ascontiguousarray(scale, dtype="<f4")


def dequantize_q8_0(q, scale):
    """float32 W[r, c] = q[r, c] * scale[r, c / group_size], computed in float32."""
    rows, groups = scale.shape
    g = np.asarray(q).reshape(rows, groups, -1).astype(np.float32) * np.asarray(scale, np.float32)[..., None]
    return g.reshape(q.shape)


def dequantize_matrix(t, raw, shape):
    """A matrix of GGML type t from its bytes (uint8 [rows, row bytes]) as float32 [shape], the
    values gguf-py gives (tools/attn/gguf_file.py's dequantisers)."""
    block_bytes = block_layout(t, shape)[1]
    with np.errstate(all="ignore"):  # damaged scales may be inf or NaN: values, not errors
        return gguf_file.DEQUANTIZE[gguf_file.TYPE_IDS[t]](np.asarray(raw).reshape(-1, block_bytes)).reshape(shape)
