"""Reading and writing .safetensors files (an 8-byte header length, a JSON header, the data)."""
import json
import math
import os
import struct

import numpy as np

from attn import storage
from attn import outfile
from attn.errors import Bad
from attn.tensors import Stored


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
            dt, shape, (b, e) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise Bad(path, "bad safetensors entry for %s" % name)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in shape + [b, e]):
            raise Bad(path, "bad safetensors entry for %s: its shape and data_offsets are not whole numbers" % name)
        if not isinstance(dt, str) or dt not in SAFETENSORS_DTYPES:
            raise Bad(path, "tensor %s has dtype %s (supported: F32, F16, BF16)" % (name, json.dumps(dt)))
        need = np.dtype(SAFETENSORS_DTYPES[dt]).itemsize * math.prod(shape)  # Python's integers: no wrap
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


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Tensors (float32 values) to a .safetensors file, stored as dtype: F32, F16, or BF16
    (rounded to nearest even; exact for values that are bfloat16 already)."""
    to_stored = {"F32": lambda v: np.ascontiguousarray(v, dtype="<f4"),
                 "F16": lambda v: np.ascontiguousarray(v, dtype="<f2"),
                 "BF16": lambda v: storage.to_bf16(np.asarray(v, dtype=np.float32))}[dtype]
    write_stored(path, {k: (dtype, np.shape(v), lambda v=v: to_stored(v)) for k, v in tensors.items()}, metadata)


def write_stored(path, tensors, metadata=None):
    """tensors: name -> (dtype F32, F16 or BF16, shape, make), make() giving the tensor as stored
    (bfloat16 as its uint16 bits) when its bytes are written, so that one tensor at a time is in
    memory; metadata: the header's __metadata__, if any. In the order given, the data starting
    8-aligned after the header, as the safetensors library writes it."""
    meta, off = ({"__metadata__": metadata} if metadata else {}), 0
    for k, (dtype, shape, _) in tensors.items():
        nb = int(np.prod(shape)) * np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
        meta[k] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(meta, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with outfile.replacing(path) as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for dtype, _, make in tensors.values():
            f.write(memoryview(np.ascontiguousarray(make(), dtype=SAFETENSORS_DTYPES[dtype])).cast("B"))
