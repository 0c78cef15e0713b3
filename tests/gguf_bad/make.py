"""Rebuild the hand-made damaged GGUF files of tests/gguf_bad/ (the mutation harness adds its
finds there as mutant-*.gguf). Each is a small valid file from tools/attn/gguf_write.py with one field
cut, inflated or given a wrong type; tests/test_gguf.py's BAD table says what the reader must
answer for each, and tests/test_bad_inputs.sh feeds some to convert.py.
Every .gguf file here is generated, by this script or (mutant-*.gguf) by tests/gguf_mutate.py: they
are binary, so they cannot carry a BEGIN GENERATED comment; do not edit them, rerun the command.

  /usr/bin/python3 tests/gguf_bad/make.py
"""
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from attn import gguf_file as gguf  # noqa: E402
from attn import gguf_write  # noqa: E402

TMP = os.path.join(HERE, "base.tmp")


def build(extra=(), tensors=None, alignment=32):
    """A small valid file's bytes: an architecture, a token list, a count, a flag, two tensors."""
    w = gguf_write.GGUFWriter(TMP, alignment=alignment)
    w.add("general.architecture", "llama")
    w.add("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>", "a"])
    w.add("llama.block_count", 1, gguf.T_UINT32)
    w.add("tokenizer.ggml.add_bos_token", True)
    for key, value, vtype in extra:
        w.add(key, value, vtype)
    rng = np.random.default_rng(0)
    tensors = tensors or [("token_embd.weight", (4, 32), "F32"), ("blk.0.attn_q.weight", (2, 32), "Q8_0")]
    for name, shape, type_id in tensors:
        w.add_tensor(name, shape, type_id)
    for name, shape, type_id in tensors:
        if type_id in ("F32", "Q8_0"):
            w.write_tensor(name, rng.standard_normal(shape).astype(np.float32))
        else:
            block, block_bytes = gguf.BLOCK_SIZES[gguf.TYPE_IDS[type_id]]
            w.write_tensor(name, np.zeros(int(np.prod(shape)) // block * block_bytes, np.uint8))
    w.close()
    data = open(TMP, "rb").read()
    os.unlink(TMP)
    return bytearray(data)


def after(data, s):
    """The offset just past the first occurrence of bytes s (a key or a tensor name)."""
    i = bytes(data).index(s)
    return i + len(s)


def put(data, off, fmt, value):
    struct.pack_into(fmt if fmt[0] in "<>" else "<" + fmt, data, off, value)
    return data


def tensor_field(data, name, field):
    """Offset of a tensor info's field: 'n_dims', 'dim0', 'dim1', 'type' or 'offset'."""
    p = after(data, name)
    n_dims = struct.unpack_from("<I", data, p)[0]
    return {"n_dims": p, "dim0": p + 4, "dim1": p + 12, "type": p + 4 + 8 * n_dims,
            "offset": p + 8 + 8 * n_dims}[field]


def files():
    base = build()
    q = b"blk.0.attn_q.weight"
    tok = b"tokenizer.ggml.tokens"
    out = {
        "empty.gguf": b"",
        "truncated-header.gguf": base[:20],
        "truncated-metadata.gguf": base[:after(base, tok) + 30],
        "truncated-tensor-info.gguf": base[:after(base, q) + 10],
        "truncated-data.gguf": base[:-40],
        "inflated-tensor-count.gguf": put(build(), 8, "Q", 1 << 40),
        "inflated-metadata-count.gguf": put(build(), 16, "Q", 1 << 40),
        "inflated-array-length.gguf": put(build(), after(base, tok) + 8, "Q", 1 << 40),
        "inflated-string-length.gguf": put(build(), after(base, b"general.architecture") + 4, "Q", 1 << 62),
        "inflated-dims.gguf": put(build(), tensor_field(base, q, "dim1"), "Q", 1 << 40),
        "inflated-offset.gguf": put(build(), tensor_field(base, q, "offset"), "Q", 1 << 40),
        "wrong-value-type.gguf": put(build(), after(base, b"general.architecture"), "I", 13),
        "wrong-array-type.gguf": put(build(), after(base, tok) + 4, "I", 99),
        "wrong-tensor-type.gguf": put(build(), tensor_field(base, q, "type"), "I", 99),
        "nested-array.gguf": put(build(), after(base, tok) + 4, "I", gguf.T_ARRAY),
        "bool-not-0-or-1.gguf": put(build(), after(base, b"add_bos_token") + 4, "B", 2),
        "too-many-dims.gguf": put(build(), tensor_field(base, q, "n_dims"), "I", 5),
        "zero-dim.gguf": put(build(), tensor_field(base, q, "dim1"), "Q", 0),
        "partial-block.gguf": put(build(), tensor_field(base, q, "dim0"), "Q", 16),
        "misaligned-offset.gguf": put(build(), tensor_field(base, q, "offset"), "Q",
                                      struct.unpack_from("<Q", base, tensor_field(base, q, "offset"))[0] + 8),
        "overlapping-tensors.gguf": put(build(), tensor_field(base, q, "offset"), "Q", 0),
        "version-1.gguf": put(build(), 4, "I", 1),
        "big-endian.gguf": put(build(), 4, ">I", 3),
        "not-gguf.gguf": b"GGML" + base[4:],
        "duplicate-key.gguf": build(extra=[("llama.block_count", 2, gguf.T_UINT32)]),
        "duplicate-tensor.gguf": build(tensors=[("a.weight", (1, 32), "F32"), ("a.weight", (1, 32), "F32")]),
        "bad-utf8-key.gguf": build(extra=[(b"general.\xff", 1, gguf.T_UINT32)]),
        "alignment-wrong-type.gguf": build(extra=[("general.alignment", 32, gguf.T_UINT64)]),
        "alignment-not-power-of-two.gguf": build(alignment=48),
        "refused-type-iq2_xxs.gguf": build(tensors=[("blk.0.attn_q.weight", (1, 256), "IQ2_XXS")]),
    }
    return out


def main():
    for name, data in files().items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(bytes(data))
    print("%d files in %s" % (len(files()), HERE))


if __name__ == "__main__":
    main()
