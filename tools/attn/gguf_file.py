"""Read GGUF files (llama.cpp's format), versions 2 and 3, little-endian, written from the
published GGUF specification.

A file is mapped read-only; the header, every metadata value and every tensor's description are
checked against the file's size before anything is allocated for them, so a damaged or hostile
file ends in one GGUFError line naming the file and the field, never in a traceback, a hang or a
huge allocation. Tensors are read one at a time from the mapping (raw, dequantize, q8_blocks):
a large model never sits whole in Python objects.

  with GGUFFile("m.gguf") as f:
      f.metadata["general.architecture"], f.tensors["blk.0.attn_q.weight"].shape
      w = f.dequantize(f.tensors["blk.0.attn_q.weight"])   # float32, numpy order (rows, cols)

dequantize gives the values llama.cpp's gguf-py gives (gguf.quants.dequantize), bit for bit: the
same float32 operations in the same order (no fused multiply-adds).
"""
import mmap
import os
import struct

import numpy as np


class GGUFError(Exception):
    """A problem with a GGUF file: str() is one line, 'FILE: FIELD: PROBLEM'."""

    def __init__(self, path, msg):
        super().__init__("%s: %s" % (path, msg))
        self.path, self.msg = path, msg


# Every GGML type id there has been, by name, so a refusal can name the type.
GGML_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_2", 5: "Q4_3", 6: "Q5_0", 7: "Q5_1",
    8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
    16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
    22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
    30: "BF16", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8", 34: "TQ1_0", 35: "TQ2_0",
    36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8", 39: "MXFP4",
}
TYPE_IDS = {name: i for i, name in GGML_TYPES.items()}
QK_K = 256
# (values per block, bytes per block) of the types whose storage is known; a tensor of any of
# them is checked against the file even if it cannot be dequantised here.
BLOCK_SIZES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (QK_K, 84), 11: (QK_K, 110), 12: (QK_K, 144), 13: (QK_K, 176),
    14: (QK_K, 210), 15: (QK_K, 292), 16: (QK_K, 66), 17: (QK_K, 74), 18: (QK_K, 98),
    19: (QK_K, 50), 20: (32, 18), 21: (QK_K, 110), 22: (QK_K, 82), 23: (QK_K, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (QK_K, 56), 30: (1, 2), 31: (32, 18),
    32: (32, 18), 33: (32, 18), 34: (QK_K, 54), 35: (QK_K, 66), 36: (32, 18), 37: (32, 18),
    38: (32, 18), 39: (32, 17),
}

# Metadata value types: (name, struct and numpy code of one value); STRING and ARRAY are read apart.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = 0, 1, 2, 3, 4, 5, 6, 7
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = 8, 9, 10, 11, 12
VALUE_TYPES = {
    T_UINT8: ("UINT8", "<B"), T_INT8: ("INT8", "<b"), T_UINT16: ("UINT16", "<H"),
    T_INT16: ("INT16", "<h"), T_UINT32: ("UINT32", "<I"), T_INT32: ("INT32", "<i"),
    T_FLOAT32: ("FLOAT32", "<f"), T_BOOL: ("BOOL", "<B"), T_STRING: ("STRING", None),
    T_ARRAY: ("ARRAY", None), T_UINT64: ("UINT64", "<Q"), T_INT64: ("INT64", "<q"),
    T_FLOAT64: ("FLOAT64", "<d"),
}
MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
MAX_KEY_BYTES = 65535  # the specification's limit on a key's length
# The values dequantised per step: bounds the temporaries whatever the tensor's size.
CHUNK_VALUES = 1 << 20

_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_SCALARS = {t: struct.Struct(code) for t, (_, code) in VALUE_TYPES.items() if code}


class Tensor:
    """One tensor's description: dims in GGUF order (ne[0], the contiguous one, first); shape in
    numpy order (dims reversed); offset the absolute byte offset of its data in the file."""

    __slots__ = ("name", "type", "type_name", "dims", "shape", "offset", "nbytes", "n_values")

    def __init__(self, name, type_id, dims, offset, nbytes):
        self.name, self.type, self.type_name = name, type_id, GGML_TYPES[type_id]
        self.dims, self.shape = tuple(dims), tuple(reversed(dims))
        self.offset, self.nbytes = offset, nbytes
        self.n_values = 1
        for d in dims:
            self.n_values *= d

    def __repr__(self):
        return "Tensor(%r, %s, shape=%s, offset=%d)" % (self.name, self.type_name, self.shape, self.offset)


class _Cursor:
    """Reads little-endian fields in order from the mapping; every read is bounds-checked and a
    failure names the field."""

    def __init__(self, f):
        self.f, self.buf, self.size, self.pos = f, f._mm, f.size, 0

    def need(self, n, field):
        if n > self.size - self.pos:
            raise self.f.error("%s: needs %d bytes at offset %d, past the end of the file (%d bytes)"
                               % (field, n, self.pos, self.size))

    def u32(self, field):
        self.need(4, field)
        v = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def u64(self, field):
        self.need(8, field)
        v = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def raw_string(self, field):
        n = self.u64(field + " length")
        if n > self.size - self.pos:
            raise self.f.error("%s: length %d runs past the end of the file" % (field, n))
        s = self.buf[self.pos:self.pos + n]
        self.pos += n
        return s

    def string(self, field):
        s = self.raw_string(field)
        try:
            return s.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.f.error("%s: not valid UTF-8 (byte %d)" % (field, e.start))

    def scalar(self, vtype, field):
        st = _SCALARS[vtype]
        self.need(st.size, field)
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        if vtype == T_BOOL:
            if v > 1:
                raise self.f.error("%s: BOOL value %d is neither 0 nor 1" % (field, v))
            return bool(v)
        return float(v) if vtype in (T_FLOAT32, T_FLOAT64) else int(v)


class GGUFFile:
    """A GGUF file mapped read-only and checked whole: header, metadata, tensor descriptions,
    alignment, and every tensor's bytes inside the file, none overlapping another.

    path, size, version, alignment, data_offset (where tensor offsets count from);
    metadata: key -> str, int, float, bool, a numpy array (numbers, BOOL as bool) or list[str];
    metadata_types: key -> its T_* id, or (T_ARRAY, element T_* id) for an array;
    tensors: name -> Tensor, in file order."""

    def __init__(self, path):
        self.path = path
        self._mm = self._array = None
        if not os.path.exists(path):
            raise self.error("no such file")
        if not os.path.isfile(path):  # a FIFO would block in open(), a device never end
            raise self.error("not a regular file")
        try:
            fd = open(path, "rb")
        except OSError as e:
            raise self.error("cannot open: %s" % (e.strerror or e))
        with fd:
            self.size = os.fstat(fd.fileno()).st_size
            if self.size < 24:  # magic, version and the two counts
                raise self.error("file of %d bytes is too short for a GGUF header (24)" % self.size)
            self._mm = mmap.mmap(fd.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except BaseException:
            self.close()
            raise

    def error(self, msg):
        return GGUFError(self.path, msg)

    def _parse(self):
        c = _Cursor(self)
        if self._mm[:4] != MAGIC:
            raise self.error("not a GGUF file (magic %r, expected b'GGUF')" % bytes(self._mm[:4]))
        c.pos = 4
        self.version = c.u32("header: version")
        if self.version not in (2, 3):
            if self.version >> 24 in (1, 2, 3) and self.version & 0xFFFFFF == 0:
                raise self.error("header: version: a big-endian file (version %d byte-swapped); only "
                                 "little-endian GGUF files are supported" % (self.version >> 24))
            raise self.error("header: version %d is not supported (2 and 3 are)" % self.version)
        n_tensors = c.u64("header: tensor count")
        n_kv = c.u64("header: metadata count")
        # The smallest possible entries bound the counts before anything is read.
        if n_kv > (self.size - c.pos) // 13:
            raise self.error("header: metadata count %d is more than the file could hold" % n_kv)
        self.metadata, self.metadata_types = {}, {}
        for i in range(n_kv):
            self._read_kv(c, i)
        if n_tensors > (self.size - c.pos) // 28:
            raise self.error("header: tensor count %d is more than the file could hold" % n_tensors)
        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.metadata["general.alignment"]
            if self.metadata_types["general.alignment"] != T_UINT32:
                raise self.error("metadata 'general.alignment': type %s, expected UINT32"
                                 % _type_text(self.metadata_types["general.alignment"]))
            if a == 0 or a & (a - 1):
                raise self.error("metadata 'general.alignment': %d is not a power of two" % a)
            self.alignment = a
        infos = [self._read_tensor_info(c, i) for i in range(n_tensors)]
        self.data_offset = -(-c.pos // self.alignment) * self.alignment
        if infos and self.data_offset > self.size:
            raise self.error("tensor data: starts at offset %d, past the end of the file (%d bytes)"
                             % (self.data_offset, self.size))
        self.tensors = {}
        for name, type_id, dims, rel in infos:
            if name in self.tensors:
                raise self.error("tensor %s: a second tensor of this name" % shown(name))
            self.tensors[name] = self._place(name, type_id, dims, rel)
        ends = sorted((t.offset, t.offset + t.nbytes, t.name) for t in self.tensors.values())
        for (_, end, before), (start, _, name) in zip(ends, ends[1:]):
            if start < end:
                raise self.error("tensor %s: its data overlaps tensor %s" % (shown(name), shown(before)))
        self._array = np.frombuffer(self._mm, dtype=np.uint8)

    def _read_kv(self, c, i):
        key = c.string("metadata #%d key" % i)
        field = "metadata " + shown(key)
        if not key:
            raise self.error("metadata #%d key: empty" % i)
        if len(key) > MAX_KEY_BYTES // 4 and len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise self.error("metadata #%d key: %d bytes, more than %d" % (i, len(key.encode("utf-8")), MAX_KEY_BYTES))
        if key in self.metadata:
            raise self.error("%s: a second value for this key" % field)
        vtype = c.u32(field + " type")
        if vtype not in VALUE_TYPES:
            raise self.error("%s: unknown value type %d" % (field, vtype))
        if vtype == T_STRING:
            self.metadata[key], self.metadata_types[key] = c.string(field), vtype
        elif vtype == T_ARRAY:
            etype = c.u32(field + " array element type")
            if etype not in VALUE_TYPES:
                raise self.error("%s: unknown array element type %d" % (field, etype))
            if etype == T_ARRAY:
                raise self.error("%s: arrays of arrays are not supported" % field)
            n = c.u64(field + " array length")
            self.metadata[key], self.metadata_types[key] = self._read_array(c, field, etype, n), (T_ARRAY, etype)
        else:
            self.metadata[key], self.metadata_types[key] = c.scalar(vtype, field), vtype

    def _read_array(self, c, field, etype, n):
        if etype == T_STRING:
            if n > (self.size - c.pos) // 8:
                raise self.error("%s: array of %d strings is more than the file could hold" % (field, n))
            return [c.string("%s element %d" % (field, j)) for j in range(n)]
        dtype = np.dtype(VALUE_TYPES[etype][1])
        if n > (self.size - c.pos) // dtype.itemsize:
            raise self.error("%s: array of %d %s values runs past the end of the file"
                             % (field, n, VALUE_TYPES[etype][0]))
        a = np.frombuffer(self._mm, dtype, n, c.pos).copy()  # a copy, so close() can unmap
        c.pos += n * dtype.itemsize
        if etype == T_BOOL:
            if n and a.max() > 1:
                raise self.error("%s: BOOL element %d is neither 0 nor 1" % (field, int(np.argmax(a > 1))))
            a = a.astype(bool)
        return a

    def _read_tensor_info(self, c, i):
        name = c.string("tensor #%d name" % i)
        field = "tensor " + shown(name)
        n_dims = c.u32(field + " dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise self.error("%s: %d dimensions (1 to %d allowed)" % (field, n_dims, MAX_DIMS))
        dims = [c.u64(field + " dims") for _ in range(n_dims)]
        type_id = c.u32(field + " type")
        offset = c.u64(field + " offset")
        return name, type_id, dims, offset

    def _place(self, name, type_id, dims, rel):
        """The Tensor, once its type, dims and offset are known to fit the file."""
        field = "tensor " + shown(name)
        if type_id not in GGML_TYPES:
            raise self.error("%s: unknown type %d" % (field, type_id))
        if type_id not in BLOCK_SIZES:
            raise self.error("%s: type %s is not supported" % (field, GGML_TYPES[type_id]))
        if 0 in dims:
            raise self.error("%s: dims %s include a zero" % (field, list(dims)))
        block, block_bytes = BLOCK_SIZES[type_id]
        if dims[0] % block:
            raise self.error("%s: %s rows of %d values are not whole blocks of %d"
                             % (field, GGML_TYPES[type_id], dims[0], block))
        n_values = 1
        for d in dims:
            n_values *= d
        nbytes = n_values // block * block_bytes
        if nbytes > self.size:
            raise self.error("%s: dims %s need %d bytes, more than the file's %d"
                             % (field, list(dims), nbytes, self.size))
        if rel % self.alignment:
            raise self.error("%s: offset %d is not a multiple of the alignment %d" % (field, rel, self.alignment))
        offset = self.data_offset + rel
        if offset > self.size or nbytes > self.size - offset:
            raise self.error("%s: offset %d and %d bytes run past the end of the file (%d bytes)"
                             % (field, offset, nbytes, self.size))
        return Tensor(name, type_id, dims, offset, nbytes)

    def raw(self, t):
        """The tensor's bytes: a uint8 view of the mapping, no copy."""
        return self._array[t.offset:t.offset + t.nbytes]

    def dequantize(self, t):
        """The tensor's values as float32, shape t.shape, as gguf-py dequantises them."""
        fn = DEQUANTIZE.get(t.type)
        if fn is None:
            raise self.error("tensor %s: type %s cannot be dequantised (supported: %s)"
                             % (shown(t.name), t.type_name, ", ".join(GGML_TYPES[i] for i in DEQUANTIZE)))
        block, block_bytes = BLOCK_SIZES[t.type]
        blocks = self.raw(t).reshape(-1, block_bytes)
        out = np.empty((len(blocks), block), np.float32)
        step = max(1, CHUNK_VALUES // block)
        with np.errstate(all="ignore"):  # damaged scales may be inf or NaN: values, not errors
            for i in range(0, len(blocks), step):
                out[i:i + step] = fn(blocks[i:i + step])
        return out.reshape(t.shape)

    def close(self):
        self._array = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds a view from raw(): the mapping goes with it
                pass
            self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def shown(s):
    """A key or tensor name for a one-line message: quoted, control characters escaped, long ones cut."""
    cut = s[:80]
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return "'%s'%s" % (text, "..." if len(s) > len(cut) else "")


def _type_text(vtype):
    if isinstance(vtype, tuple):
        return "ARRAY of %s" % VALUE_TYPES[vtype[1]][0]
    return VALUE_TYPES[vtype][0]


# ---- dequantisers: blocks uint8 [n, block bytes] -> float32 [n, values per block] ----
# Each follows ggml's block layout and gguf-py's float32 operations in gguf-py's order.

def _f16(blocks, start):
    """The float16 at byte start of every block, widened to float32, shape [n, 1]."""
    return blocks[:, start:start + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs):
    """[n, m] bytes -> [n, 2m]: the m low nibbles, then the m high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _bits(b, shifts, mask):
    """[n, m] bytes -> [n, len(shifts), m]: (b >> shift) & mask for each shift."""
    return (b[:, None, :] >> np.array(shifts, np.uint8)[None, :, None]) & np.uint8(mask)


def _deq_f32(b):
    return b.copy().view(np.float32)


def _deq_f16(b):
    return b.copy().view(np.float16).astype(np.float32)


def _deq_bf16(b):
    return (b.copy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def _deq_q8_0(b):
    return b[:, 2:].view(np.int8).astype(np.float32) * _f16(b, 0)


def _deq_q4_0(b):
    return _f16(b, 0) * (_nibbles(b[:, 2:]).astype(np.float32) - np.float32(8))


def _deq_q4_1(b):
    return _f16(b, 0) * _nibbles(b[:, 4:]).astype(np.float32) + _f16(b, 2)


def _q5_values(qh, qs):
    """Q5_0/Q5_1's 5-bit values [n, 32]: 4 bits from qs's nibbles, the fifth bit j from qh's bit j."""
    high = (qh.copy().view("<I") >> np.arange(32, dtype=np.uint32)) & 1
    return (_nibbles(qs) | (high.astype(np.uint8) << 4)).astype(np.float32)


def _deq_q5_0(b):
    return _f16(b, 0) * (_q5_values(b[:, 2:6], b[:, 6:]) - np.float32(16))


def _deq_q5_1(b):
    return _f16(b, 0) * _q5_values(b[:, 4:8], b[:, 8:]) + _f16(b, 2)


def _deq_q2_k(b):
    # 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit values, d, dmin
    n = len(b)
    sc = b[:, :16]
    dl = (_f16(b, 80) * (sc & 0x0F).astype(np.float32))[:, :, None]
    ml = (_f16(b, 82) * (sc >> 4).astype(np.float32))[:, :, None]
    # value j: byte 32*(j//128) + j%32, bits 2*((j%128)//32)
    q = _bits(b[:, 16:80].reshape(n, 2, 32).reshape(n * 2, 32), (0, 2, 4, 6), 3)
    q = q.reshape(n, 16, 16).astype(np.float32)
    return (dl * q - ml).reshape(n, QK_K)


def _deq_q3_k(b):
    # 32 bytes of high-bit masks, 64 bytes of 2-bit values, 12 bytes of 6-bit scales, d
    n = len(b)
    low = _bits(b[:, 96:104], (0, 4), 0x0F).reshape(n, 16)
    high = _bits(b[:, 104:108], (0, 2, 4, 6), 3).reshape(n, 16)
    scales = (low | (high << 4)).astype(np.float32) - np.float32(32)
    dl = (_f16(b, 108) * scales)[:, :, None]
    q = _bits(b[:, 32:96].reshape(n * 2, 32), (0, 2, 4, 6), 3).reshape(n, 256)
    hm = _bits(b[:, :32], range(8), 1).reshape(n, 256)
    # a clear mask bit subtracts 4
    q = (q.astype(np.int8) - ((hm ^ 1) << 2).astype(np.int8)).astype(np.float32)
    return (dl * q.reshape(n, 16, 16)).reshape(n, QK_K)


def _k_scales(s):
    """Q4_K/Q5_K's 12 scale bytes -> (scales, mins) [n, 8], 6 bits each."""
    a, m, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    scales = np.concatenate([a & 0x3F, (hi & 0x0F) | ((a >> 2) & 0x30)], axis=1)
    mins = np.concatenate([m & 0x3F, (hi >> 4) | ((m >> 2) & 0x30)], axis=1)
    return scales.astype(np.float32), mins.astype(np.float32)


def _k_affine(b, q):
    """d*scale*q - dmin*min over Q4_K/Q5_K's 8 sub-blocks of 32; q [n, 8, 32] float32."""
    n = len(b)
    scales, mins = _k_scales(b[:, 4:16])
    d = (_f16(b, 0) * scales)[:, :, None]
    dm = (_f16(b, 2) * mins)[:, :, None]
    return (d * q - dm).reshape(n, QK_K)


def _deq_q4_k(b):
    # d, dmin, 12 scale bytes, 128 bytes: sub-block 2i is the low nibbles of bytes 32i.., 2i+1 the high
    n = len(b)
    return _k_affine(b, _nibbles(b[:, 16:].reshape(n * 4, 32)).reshape(n, 8, 32).astype(np.float32))


def _deq_q5_k(b):
    # as Q4_K with 32 bytes of fifth bits (sub-block i takes bit i) before the nibbles
    n = len(b)
    low = _nibbles(b[:, 48:].reshape(n * 4, 32)).reshape(n, 8, 32)
    high = _bits(b[:, 16:48], range(8), 1)
    return _k_affine(b, (low | (high << 4)).astype(np.float32))


def _q6_k_values(b):
    """Q6_K's signed 6-bit values [n, 256] (int8, -32..31)."""
    n = len(b)
    # value j (h = j//128, r = j%128): low 4 bits from ql[64h + r%64] (high nibble when r >= 64),
    # top 2 bits from qh[32h + r%32], bits 2*(r//32)
    low = _nibbles(b[:, :128].reshape(n * 2, 64)).reshape(n, 2, 128)
    high = _bits(b[:, 128:192].reshape(n * 2, 32), (0, 2, 4, 6), 3).reshape(n, 2, 128)
    return ((low | (high << 4)).astype(np.int8) - np.int8(32)).reshape(n, QK_K)


def _q6_k_scales(b):
    """Q6_K's scale per 16 values [n, 16]: d * the int8 sub-block scale, exact in float32."""
    return _f16(b, 208) * b[:, 192:208].view(np.int8).astype(np.float32)


def _deq_q6_k(b):
    n = len(b)
    q = _q6_k_values(b).reshape(n, 16, 16).astype(np.float32)
    return (_q6_k_scales(b)[:, :, None] * q).reshape(n, QK_K)


IQ4_NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def _deq_iq4_nl(b):
    return _f16(b, 0) * IQ4_NL_VALUES[_nibbles(b[:, 2:])]


def _deq_iq4_xs(b):
    # d, a 16-bit word of the 8 sub-blocks' high scale bits (2 each), 4 bytes of their low
    # nibbles (sub-block 2i the low one of byte i), then 8 sub-blocks of 32 as IQ4_NL's nibbles
    n = len(b)
    low = _bits(b[:, 4:8], (0, 4), 0x0F).transpose(0, 2, 1).reshape(n, 8)
    high = (b[:, 2:4].copy().view("<u2") >> np.arange(0, 16, 2, dtype=np.uint16)).astype(np.uint8) & 3
    dl = _f16(b, 0) * ((low | (high << 4)).astype(np.float32) - np.float32(32))
    q = IQ4_NL_VALUES[_nibbles(b[:, 8:].reshape(n * 8, 16))].reshape(n, 8, 32)
    return (dl[:, :, None] * q).reshape(n, QK_K)


DEQUANTIZE = {
    0: _deq_f32, 1: _deq_f16, 30: _deq_bf16, 8: _deq_q8_0, 2: _deq_q4_0, 3: _deq_q4_1,
    6: _deq_q5_0, 7: _deq_q5_1, 10: _deq_q2_k, 11: _deq_q3_k, 12: _deq_q4_k, 13: _deq_q5_k,
    14: _deq_q6_k, 20: _deq_iq4_nl, 23: _deq_iq4_xs,
}


def q8_blocks(f, t, group):
    """t's values as int8 integers times float32 scales, one scale per `group` values of a row:
    (values [rows, cols] int8, scales [rows, cols // group] float32) with values * scales equal to
    f.dequantize(t) bit for bit (cols = dims[0], rows the other dims' product: t.shape for a
    matrix); None when t's type has no such exact form at that group size.
    Q8_0 and Q4_0 (values q - 8) have one scale per 32 (group 32, or 16 with each scale twice);
    Q6_K has d * scale per 16 (group 16), a product exact in float32."""
    if t.type not in (8, 2, 14) or group not in (16, 32) or (t.type == 14 and group != 16):
        return None
    rows = t.n_values // t.dims[0]
    block, block_bytes = BLOCK_SIZES[t.type]
    b = f.raw(t).reshape(-1, block_bytes)
    if t.type == 8:
        values, scales = b[:, 2:].view(np.int8).copy(), _f16(b, 0)
    elif t.type == 2:
        values, scales = _nibbles(b[:, 2:]).astype(np.int8) - np.int8(8), _f16(b, 0)
    else:
        values, scales = _q6_k_values(b), _q6_k_scales(b)
    if group * scales.shape[1] != block:
        scales = np.repeat(scales, block // group // scales.shape[1], axis=1)
    return values.reshape(rows, t.dims[0]), scales.reshape(rows, t.dims[0] // group)
