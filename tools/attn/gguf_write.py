"""Write GGUF files (version 3, little-endian): metadata of every value type, and tensors in F32,
F16, BF16 or a block type tools/attn/quantize.py makes (Q4_0 ... Q8_0, Q2_K ... Q6_K, IQ4_NL) from
float32 values, or in any type from raw block bytes. The tests, the GGUF mutation harness and the
full-size conversion check build their files with it.

Tensors are declared first (the header lists them with their offsets), then written one at a time
in the order declared, straight to the file, so a large model is never held whole:

  with GGUFWriter("m.gguf") as w:
      w.add("general.architecture", "llama")
      w.add("llama.block_count", 12, gguf.T_UINT32)
      w.add_tensor("token_embd.weight", (32000, 768), "Q8_0")   # numpy order (rows, cols)
      w.write_tensor("token_embd.weight", values)               # float32 [32000, 768]

F16 and BF16 round to nearest; the block types are quantised as llama-quantize does (quantize.py).
"""
import struct

import numpy as np

from attn import gguf_file as gguf
from attn import storage
from attn import quantize as block_quantize
from attn.gguf_file import T_ARRAY, T_BOOL, T_FLOAT32, T_INT32, T_INT64, T_STRING, T_UINT64, VALUE_TYPES


class GGUFWriter:
    def __init__(self, path, alignment=gguf.DEFAULT_ALIGNMENT, version=3):
        self.path, self.alignment, self.version = path, alignment, version
        self.kv = []  # (key, value type, value)
        self.infos = []  # (name, dims in GGUF order, type id, relative offset, bytes)
        self.next_offset, self.written, self.f = 0, 0, None
        if alignment != gguf.DEFAULT_ALIGNMENT:
            self.add("general.alignment", alignment, gguf.T_UINT32)

    def add(self, key, value, vtype=None):
        """A metadata value; vtype a gguf.T_* id, or (gguf.T_ARRAY, element id) for an array; by
        default str -> STRING, bool -> BOOL, int -> INT32 (INT64 beyond), float -> FLOAT32, a list
        of str -> an array of STRING, other lists and numpy arrays by their values or dtype."""
        assert self.f is None, "metadata after the header was written"
        self.kv.append((key, _value_type(value) if vtype is None else vtype, value))

    def add_tensor(self, name, shape, type_id):
        """Declare a tensor: shape in numpy order, type a GGML type id or name ("Q8_0")."""
        assert self.f is None, "tensor declared after the header was written"
        type_id = gguf.TYPE_IDS[type_id] if isinstance(type_id, str) else type_id
        dims = tuple(int(d) for d in reversed(shape))
        block, block_bytes = gguf.BLOCK_SIZES[type_id]
        assert dims[0] % block == 0, "%s: rows of %d are not whole %s blocks" % (
            name, dims[0], gguf.GGML_TYPES[type_id])
        nbytes = int(np.prod(dims, dtype=np.int64)) // block * block_bytes
        self.infos.append((name, dims, type_id, self.next_offset, nbytes))
        self.next_offset += _padded(nbytes, self.alignment)

    def write_header(self):
        self.f = open(self.path, "wb")
        out = [gguf.MAGIC, struct.pack("<IQQ", self.version, len(self.infos), len(self.kv))]
        for key, vtype, value in self.kv:
            out.append(_string(key))
            out.append(_value(vtype, value))
        for name, dims, type_id, offset, _ in self.infos:
            out.append(_string(name) + struct.pack("<I%dQIQ" % len(dims), len(dims), *dims, type_id, offset))
        head = b"".join(out)
        self.f.write(head + bytes(_padded(len(head), self.alignment) - len(head)))

    def write_tensor(self, name, data):
        """The next declared tensor's data: float32-convertible values of its shape, quantised here
        (F32, F16, BF16, quantize.py's block types), or its raw bytes as a uint8 array (any type)."""
        if self.f is None:
            self.write_header()
        want, dims, type_id, _, nbytes = self.infos[self.written]
        assert name == want, "tensor %s written where %s was declared" % (name, want)
        data = np.asarray(data)
        if data.dtype == np.uint8:
            assert data.size == nbytes, "%s: %d raw bytes for %d" % (name, data.size, nbytes)
            self.f.write(data.tobytes())
        else:
            shape = tuple(reversed(dims))
            assert data.shape == shape, "%s: shape %s, declared %s" % (name, data.shape, shape)
            flat = data.reshape(-1)
            step = gguf.CHUNK_VALUES  # a multiple of every block size: the temporaries stay small
            for i in range(0, flat.size, step):
                self.f.write(quantize(np.ascontiguousarray(flat[i:i + step], np.float32), type_id).tobytes())
        self.f.write(bytes(_padded(nbytes, self.alignment) - nbytes))
        self.written += 1

    def close(self):
        if self.f is None:
            self.write_header()
        self.f.close()
        assert self.written == len(self.infos), "%d of %d tensors written" % (self.written, len(self.infos))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        elif self.f is not None:
            self.f.close()


def write_gguf(path, metadata, tensors, alignment=gguf.DEFAULT_ALIGNMENT):
    """A whole file at once: metadata {key: value or (value, vtype)}, tensors {name: (type, data)}."""
    with GGUFWriter(path, alignment) as w:
        for key, v in metadata.items():
            w.add(key, *v) if isinstance(v, tuple) else w.add(key, v)
        for name, (type_id, data) in tensors.items():
            data = np.asarray(data)
            if data.dtype == np.uint8:
                raise ValueError("write_gguf takes values; raw bytes go through GGUFWriter")
            w.add_tensor(name, data.shape, type_id)
        for name, (_, data) in tensors.items():
            w.write_tensor(name, data)


def _padded(n, alignment):
    return -(-n // alignment) * alignment


def _string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value_type(v):
    if isinstance(v, (str, bytes)):
        return T_STRING
    if isinstance(v, (bool, np.bool_)):
        return T_BOOL
    if isinstance(v, (int, np.integer)):
        return T_INT32 if -2**31 <= v < 2**31 else (T_INT64 if v < 2**63 else T_UINT64)
    if isinstance(v, (float, np.floating)):
        return T_FLOAT32
    if isinstance(v, np.ndarray):
        codes = {np.dtype(code): t for t, (_, code) in VALUE_TYPES.items() if code and t != T_BOOL}
        return (T_ARRAY, T_BOOL if v.dtype == bool else codes[v.dtype.newbyteorder("<")])
    v = list(v)
    if v and all(isinstance(x, str) for x in v):
        return (T_ARRAY, T_STRING)
    return (T_ARRAY, _value_type(np.asarray(v) if v else np.zeros(0, np.int32))[1])


def _value(vtype, v):
    """A value's bytes after its key: the type id(s), then the value."""
    if isinstance(vtype, tuple):
        _, etype = vtype
        head = struct.pack("<IIQ", T_ARRAY, etype, len(v))
        if etype == T_STRING:
            return head + b"".join(_string(s) for s in v)
        return head + np.array(v, dtype=VALUE_TYPES[etype][1]).tobytes()
    head = struct.pack("<I", vtype)
    if vtype == T_STRING:
        return head + _string(v)
    return head + struct.pack(VALUE_TYPES[vtype][1], v)


# ---- quantisers: float32 values (a multiple of the block) -> raw bytes ----

def quantize(x, type_id):
    name = gguf.GGML_TYPES[type_id]
    if name == "F32":
        return x.astype("<f4")
    if name == "F16":
        return x.astype("<f2")
    if name == "BF16":
        return storage.to_bf16(x)
    if name not in block_quantize.QUANTIZERS:
        raise ValueError("no quantiser for %s here: write its raw bytes" % name)
    return block_quantize.quantize_rows(x.reshape(-1, gguf.BLOCK_SIZES[type_id][0]), name).reshape(-1)
