"""tools/attn/gguf_file.py and tools/attn/gguf_write.py: every tensor of ../shared/models/gguf/ dequantised to the
sha256 of gguf-py's values; every dequantiser against a naive one written from the block layouts
(element by element, float32 operations in gguf-py's order), on random blocks, for the types no
shared file holds; q8_blocks exact; the writer's round trip (its Q8_0 and Q4_0 byte for byte
llama-quantize's); a short seeded run of the mutation harness (tests/gguf_mutate.py); and every
damaged file of tests/gguf_bad/ refused with its expected message.

Run from the repository root: /usr/bin/python3 tests/test_gguf.py [-k SUBSTRING]
"""
import glob
import hashlib
import json
import os
import struct
import sys
import tempfile

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import gguf_file as gguf  # noqa: E402
from attn import gguf_write  # noqa: E402
from attn import storage  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
GGUF_DIR = os.path.join(SHARED, "models", "gguf")
BAD_DIR = os.path.join(ROOT, "tests", "gguf_bad")
TMP = tempfile.mkdtemp(prefix="test_gguf.")
case = pycase.Cases()
f32 = np.float32


def shared(name):
    return gguf.GGUFFile(os.path.join(GGUF_DIR, name))


@case
def dequantized_hashes_match_gguf_py():
    expected = json.load(open(os.path.join(SHARED, "expected", "gguf_dequantized_sha256.json")))
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(GGUF_DIR, "*.gguf")))
    assert sorted(expected) == [n for n in files if not n.startswith("ggml-vocab-")], files
    n, types = 0, set()
    for fname, want in expected.items():
        with shared(fname) as f:
            assert list(f.tensors) == list(want["tensors"]) or set(f.tensors) == set(want["tensors"]), fname
            for name, e in want["tensors"].items():
                t = f.tensors[name]
                assert t.type_name == e["type"] and list(t.dims) == e["shape"], (fname, name, t)
                v = f.dequantize(t)
                assert v.dtype == np.float32 and v.shape == t.shape
                got = hashlib.sha256(v.tobytes()).hexdigest()
                assert got == e["sha256_f32"], "%s %s (%s): sha256 %s, gguf-py's %s" % (
                    fname, name, t.type_name, got, e["sha256_f32"])
                n, types = n + 1, types | {t.type_name}
    assert n >= 400, n
    print("      %d tensors of %d files, types %s" % (n, len(expected), " ".join(sorted(types))))


@case
def vocabulary_files_read():
    for name, model, n_tokens in (("ggml-vocab-gpt-2.gguf", "gpt2", 50257),
                                  ("ggml-vocab-llama-spm.gguf", "llama", 32000)):
        with shared(name) as f:
            assert f.version == 3 and f.tensors == {} and f.metadata["tokenizer.ggml.model"] == model
            assert len(f.metadata["tokenizer.ggml.tokens"]) == n_tokens
            assert f.metadata_types["tokenizer.ggml.tokens"] == (gguf.T_ARRAY, gguf.T_STRING)
    with shared("ggml-vocab-llama-spm.gguf") as f:
        assert f.metadata["tokenizer.ggml.add_bos_token"] is True
        assert f.metadata["tokenizer.ggml.scores"].dtype == np.float32
        assert f.metadata["tokenizer.ggml.tokens"][:3] == ["<unk>", "<s>", "</s>"]


# ---- naive dequantisers: one block (bytes) -> list of float32, element by element ----

def h(b, i):
    return f32(np.frombuffer(bytes(b[i:i + 2]), "<f2")[0])


def naive(type_name, b):
    y = [None] * gguf.BLOCK_SIZES[gguf.TYPE_IDS[type_name]][0]
    if type_name == "F32":
        return [f32(np.frombuffer(bytes(b), "<f4")[0])]
    if type_name == "F16":
        return [h(b, 0)]
    if type_name == "BF16":
        return [f32(np.frombuffer(struct.pack("<I", (b[0] | b[1] << 8) << 16), "<f4")[0])]
    if type_name == "Q8_0":
        return [f32(struct.unpack_from("b", b, 2 + j)[0]) * h(b, 0) for j in range(32)]
    if type_name in ("Q4_0", "Q4_1", "IQ4_NL"):
        qs = b[4:] if type_name == "Q4_1" else b[2:]
        for j in range(16):
            for k, nib in ((j, qs[j] & 15), (j + 16, qs[j] >> 4)):
                if type_name == "Q4_0":
                    y[k] = h(b, 0) * f32(nib - 8)
                elif type_name == "Q4_1":
                    y[k] = h(b, 0) * f32(nib) + h(b, 2)
                else:
                    y[k] = h(b, 0) * f32(gguf.IQ4_NL_VALUES[nib])
        return y
    if type_name in ("Q5_0", "Q5_1"):
        qh_at = 2 if type_name == "Q5_0" else 4
        qh = struct.unpack_from("<I", b, qh_at)[0]
        qs = b[qh_at + 4:]
        for j in range(16):
            x0 = (qs[j] & 15) | (((qh >> j) << 4) & 0x10)
            x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)
            for k, x in ((j, x0), (j + 16, x1)):
                y[k] = h(b, 0) * f32(x - 16) if type_name == "Q5_0" else h(b, 0) * f32(x) + h(b, 2)
        return y
    if type_name == "Q2_K":
        sc, qs, d, dmin = b[0:16], b[16:80], h(b, 80), h(b, 82)
        k, i = 0, 0
        for half in (0, 32):
            for shift in (0, 2, 4, 6):
                for part in (0, 16):
                    dl, ml = d * f32(sc[i] & 15), dmin * f32(sc[i] >> 4)
                    i += 1
                    for l in range(16):
                        y[k] = dl * f32((qs[half + part + l] >> shift) & 3) - ml
                        k += 1
        return y
    if type_name == "Q3_K":
        hm, qs, d = b[0:32], b[32:96], h(b, 108)
        aux = list(struct.unpack_from("<3I", b, 96))
        tmp = aux[2]
        words = [(aux[0] & 0x0F0F0F0F) | (((tmp >> 0) & 0x03030303) << 4),
                 (aux[1] & 0x0F0F0F0F) | (((tmp >> 2) & 0x03030303) << 4),
                 ((aux[0] >> 4) & 0x0F0F0F0F) | (((tmp >> 4) & 0x03030303) << 4),
                 ((aux[1] >> 4) & 0x0F0F0F0F) | (((tmp >> 6) & 0x03030303) << 4)]
        scales = struct.unpack("<16b", struct.pack("<4I", *words))
        k, i, m = 0, 0, 1
        for half in (0, 32):
            for shift in (0, 2, 4, 6):
                for part in (0, 16):
                    dl = d * f32(scales[i] - 32)
                    i += 1
                    for l in range(16):
                        q = ((qs[half + part + l] >> shift) & 3) - (0 if hm[part + l] & m else 4)
                        y[k] = dl * f32(q)
                        k += 1
                m <<= 1
        return y
    if type_name in ("Q4_K", "Q5_K"):
        d, dmin, s = h(b, 0), h(b, 2), b[4:16]

        def scale_min(j):
            if j < 4:
                return s[j] & 63, s[j + 4] & 63
            return (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
        qh, ql = b[16:48], (b[16:] if type_name == "Q4_K" else b[48:])
        k = 0
        for j in range(4):
            for sub in (0, 1):
                sc, mn = scale_min(2 * j + sub)
                for l in range(32):
                    q = (ql[32 * j + l] >> (4 * sub)) & 15
                    if type_name == "Q5_K" and qh[l] & (1 << (2 * j + sub)):
                        q += 16
                    y[k] = (d * f32(sc)) * f32(q) - dmin * f32(mn)
                    k += 1
        return y
    if type_name == "Q6_K":
        ql, qh, sc, d = b[0:128], b[128:192], struct.unpack_from("16b", b, 192), h(b, 208)
        for n in (0, 1):
            for l in range(32):
                L, H, S = ql[64 * n:], qh[32 * n:], sc[8 * n:]
                i = l // 16
                qs = [((L[l] & 15) | ((H[l] & 3) << 4)) - 32, ((L[l + 32] & 15) | (((H[l] >> 2) & 3) << 4)) - 32,
                      ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32, ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32]
                for part, q in enumerate(qs):
                    y[128 * n + l + 32 * part] = (d * f32(S[i + 2 * part])) * f32(q)
        return y
    if type_name == "IQ4_XS":
        d, high = h(b, 0), struct.unpack_from("<H", b, 2)[0]
        for ib in range(8):
            ls = ((b[4 + ib // 2] >> 4 * (ib % 2)) & 15) | (((high >> 2 * ib) & 3) << 4)
            dl, qs = d * f32(ls - 32), b[8 + 16 * ib:]
            for j in range(16):
                y[32 * ib + j] = dl * f32(gguf.IQ4_NL_VALUES[qs[j] & 15])
                y[32 * ib + j + 16] = dl * f32(gguf.IQ4_NL_VALUES[qs[j] >> 4])
        return y
    raise AssertionError(type_name)


# where each type's float16 scales lie in a block
SCALE_AT = {"Q8_0": (0,), "Q4_0": (0,), "IQ4_NL": (0,), "IQ4_XS": (0,), "Q5_0": (0,), "Q4_1": (0, 2), "Q5_1": (0, 2),
            "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def random_blocks(name, n, rng):
    """n random blocks, their float16 scales finite but for one block in eight."""
    raw = rng.integers(0, 256, (n, gguf.BLOCK_SIZES[gguf.TYPE_IDS[name]][1]), dtype=np.uint8)
    for at in SCALE_AT.get(name, ()):
        raw[np.arange(n) % 8 != 7, at + 1] &= 0xBB
    return raw


@case
def every_dequantiser_matches_a_naive_one():
    rng = np.random.default_rng(18)
    for type_id in gguf.DEQUANTIZE:
        name = gguf.GGML_TYPES[type_id]
        block = gguf.BLOCK_SIZES[type_id][0]
        blocks = random_blocks(name, 64 if block > 1 else 4096, rng)
        path = os.path.join(TMP, "rand-%s.gguf" % name)
        with gguf_write.GGUFWriter(path) as w:
            w.add_tensor("t", (len(blocks), block), type_id)
            w.write_tensor("t", blocks.reshape(-1))
        with gguf.GGUFFile(path) as f:
            got = f.dequantize(f.tensors["t"])
        with np.errstate(all="ignore"):
            want = np.array([naive(name, bytes(b)) for b in blocks], np.float32)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))
        assert not len(bad[0]), "%s: %d values differ, first block %d value %d: %r vs naive %r" % (
            name, len(bad[0]), bad[0][0], bad[1][0], got[bad][0], want[bad][0])
        assert np.isfinite(got).mean() > 0.8, name


@case
def q8_blocks_exact():
    checked = {}
    for fname in ("rand256-Q8_0.gguf", "rand256-Q4_0.gguf", "rand256-Q6_K.gguf", "rand256-Q4_1.gguf",
                  "stories260K-Q6_K.gguf"):
        with shared(fname) as f:
            for t in f.tensors.values():
                for group in (16, 32):
                    r = gguf.q8_blocks(f, t, group)
                    exact = {"Q8_0": (16, 32), "Q4_0": (16, 32), "Q6_K": (16,)}.get(t.type_name, ())
                    assert (r is not None) == (group in exact), (fname, t.name, t.type_name, group)
                    if r is None:
                        continue
                    values, scales = r
                    rows, cols = t.shape
                    assert values.dtype == np.int8 and values.shape == (rows, cols)
                    assert scales.dtype == np.float32 and scales.shape == (rows, cols // group)
                    product = values.reshape(rows, -1, group).astype(np.float32) * scales[:, :, None]
                    same = np.array_equal(product.reshape(rows, cols).view(np.uint32), f.dequantize(t).view(np.uint32))
                    assert same, (fname, t.name, group)
                    if t.type_name == "Q4_0":
                        assert values.min() >= -8 and values.max() <= 7
                    checked[t.type_name, group] = checked.get((t.type_name, group), 0) + 1
    assert set(checked) == {("Q8_0", 16), ("Q8_0", 32), ("Q4_0", 16), ("Q4_0", 32), ("Q6_K", 16)}, checked


@case
def writer_round_trip():
    rng = np.random.default_rng(3)
    md = {"general.architecture": "llama", "s.unicode": "héllo ▁ 你好", "s.empty": ""}
    values = {gguf.T_UINT8: 255, gguf.T_INT8: -128, gguf.T_UINT16: 65535, gguf.T_INT16: -32768,
              gguf.T_UINT32: 2**32 - 1, gguf.T_INT32: -2**31, gguf.T_FLOAT32: 0.1, gguf.T_BOOL: True,
              gguf.T_UINT64: 2**64 - 1, gguf.T_INT64: -2**63, gguf.T_FLOAT64: 0.1}
    for vtype, v in values.items():
        name = gguf.VALUE_TYPES[vtype][0].lower()
        md["v." + name] = (v, vtype)
        md["a." + name] = ([v, 0, v], (gguf.T_ARRAY, vtype))
    md["a.string"] = ["<s>", "", "ü", "a b"]
    weights = {ty: rng.standard_normal((3, 512)).astype(np.float32)
               for ty in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q6_K")}
    weights["F32 1d"] = rng.standard_normal(7).astype(np.float32)
    tensors = {"t." + k: (k.split()[0], v) for k, v in weights.items()}
    for alignment in (32, 64):
        path = os.path.join(TMP, "w%d.gguf" % alignment)
        gguf_write.write_gguf(path, md, tensors, alignment=alignment)
        with gguf.GGUFFile(path) as f:
            assert f.version == 3 and f.alignment == alignment and list(f.tensors) == list(tensors)
            for key, v in md.items():
                if isinstance(v, tuple):
                    value, vtype = v
                else:
                    value, vtype = v, gguf.T_STRING if isinstance(v, str) else (gguf.T_ARRAY, gguf.T_STRING)
                assert f.metadata_types[key] == vtype, (key, f.metadata_types[key], vtype)
                got = f.metadata[key]
                if vtype == gguf.T_FLOAT32:
                    assert got == float(np.float32(value)), (key, got)
                elif isinstance(vtype, tuple) and vtype[1] == gguf.T_FLOAT32:
                    assert np.array_equal(got, np.array(value, np.float32)), (key, got)
                elif isinstance(vtype, tuple) and vtype[1] != gguf.T_STRING:
                    assert isinstance(got, np.ndarray) and got.tolist() == value, (key, got)
                else:
                    assert got == value and type(got) is type(value), (key, got, value)
            for name, (ty, x) in tensors.items():
                t = f.tensors[name]
                assert t.shape == x.shape and t.offset % alignment == 0
                v = f.dequantize(t)
                if ty == "F32":
                    assert np.array_equal(v, x)
                elif ty == "F16":
                    assert np.array_equal(v, x.astype(np.float16).astype(np.float32))
                elif ty == "BF16":
                    assert np.array_equal(v, storage.from_bf16(storage.to_bf16(x)))
                else:  # within half a step of the largest magnitude per block, and far from exact
                    err = np.abs(v - x).max() / np.abs(x).max()
                    assert 1e-4 < err < {"Q8_0": 0.005, "Q4_0": 0.1, "Q6_K": 0.02}[ty], (ty, err)
    # The writer's Q8_0 and Q4_0 are llama-quantize's, byte for byte, from the same float32 values.
    for src, quantized in (("rand256-F32.gguf", "rand256-Q8_0.gguf"), ("rand256-F32.gguf", "rand256-Q4_0.gguf")):
        with shared(src) as a, shared(quantized) as b:
            n = 0
            for name, t in b.tensors.items():
                if t.type_name in ("Q8_0", "Q4_0"):
                    mine = gguf_write.quantize(a.dequantize(a.tensors[name]).reshape(-1), t.type)
                    assert np.array_equal(mine.reshape(-1), b.raw(t)), (quantized, name)
                    n += 1
            assert n >= 10, (quantized, n)


@case
def writer_streams_and_version_2():
    """Tensors go to the file as written (the file grows with each), version 2 reads alike."""
    path = os.path.join(TMP, "stream.gguf")
    w = gguf_write.GGUFWriter(path, version=2)
    for i in range(3):
        w.add_tensor("t%d" % i, (64, 64), "Q8_0")
    sizes = []
    for i in range(3):
        w.write_tensor("t%d" % i, np.full((64, 64), i, np.float32))
        w.f.flush()
        sizes.append(os.path.getsize(path))
    w.close()
    assert sizes[0] < sizes[1] < sizes[2] == os.path.getsize(path)
    with gguf.GGUFFile(path) as f:
        assert f.version == 2
        assert np.allclose([f.dequantize(t).max() for t in f.tensors.values()], [0, 1, 2], atol=1e-3)


@case
def short_mutation_run():
    import gguf_mutate
    n, secs, outcomes, failures = gguf_mutate.run(2000, seed=18, use_shared=True, quiet=True)
    assert not failures, failures[:3]
    refused = sum(c for o, c in outcomes.items() if o.startswith("refused"))
    assert n == 2000 and outcomes["ok"] > 20 and refused > 1000, outcomes
    print("      %d damaged files in %.1f s: %d read, %d refused" % (n, secs, outcomes["ok"], n - outcomes["ok"]))


# Every file in tests/gguf_bad/ and the words its refusal must hold (tests/gguf_bad/make.py made them).
BAD = {
    "empty.gguf": "too short for a GGUF header",
    "truncated-header.gguf": "too short for a GGUF header",
    "truncated-metadata.gguf": "tokenizer.ggml.tokens': array of 4 strings is more than the file could hold",
    "truncated-tensor-info.gguf": "tensor 'blk.0.attn_q.weight' dims: needs 8 bytes",
    "truncated-data.gguf": "tensor 'blk.0.attn_q.weight': offset 864 and 68 bytes run past the end of the file",
    "inflated-tensor-count.gguf": "header: tensor count 1099511627776 is more than the file could hold",
    "inflated-metadata-count.gguf": "header: metadata count 1099511627776 is more than the file could hold",
    "inflated-array-length.gguf": "array of 1099511627776 strings is more than the file could hold",
    "inflated-string-length.gguf": "metadata 'general.architecture': length 4611686018427387904 runs past the end",
    "inflated-dims.gguf": "dims [32, 1099511627776] need",
    "inflated-offset.gguf": "offset 1099511628128 and 68 bytes run past the end of the file",
    "wrong-value-type.gguf": "metadata 'general.architecture': unknown value type 13",
    "wrong-array-type.gguf": "unknown array element type 99",
    "wrong-tensor-type.gguf": "tensor 'blk.0.attn_q.weight': unknown type 99",
    "nested-array.gguf": "arrays of arrays are not supported",
    "bool-not-0-or-1.gguf": "BOOL value 2 is neither 0 nor 1",
    "too-many-dims.gguf": "5 dimensions (1 to 4 allowed)",
    "zero-dim.gguf": "include a zero",
    "partial-block.gguf": "Q8_0 rows of 16 values are not whole blocks of 32",
    "misaligned-offset.gguf": "offset 520 is not a multiple of the alignment 32",
    "overlapping-tensors.gguf": "overlaps tensor",
    "version-1.gguf": "version 1 is not supported",
    "big-endian.gguf": "big-endian",
    "not-gguf.gguf": "not a GGUF file",
    "duplicate-key.gguf": "metadata 'llama.block_count': a second value for this key",
    "duplicate-tensor.gguf": "tensor 'a.weight': a second tensor of this name",
    "bad-utf8-key.gguf": "key: not valid UTF-8",
    "alignment-wrong-type.gguf": "general.alignment': type UINT64, expected UINT32",
    "alignment-not-power-of-two.gguf": "48 is not a power of two",
    "refused-type-iq2_xxs.gguf": "type IQ2_XXS cannot be dequantised",
}


@case
def bad_files_refused():
    import gguf_mutate
    present = sorted(os.path.basename(p) for p in glob.glob(os.path.join(BAD_DIR, "*.gguf")))
    assert set(BAD) <= set(present), sorted(set(BAD) - set(present))
    for name in present:
        path = os.path.join(BAD_DIR, name)
        gguf_mutate.read_fully(path)  # raises anything but a one-line GGUFError
        if name in BAD:
            try:
                with gguf.GGUFFile(path) as f:
                    for t in f.tensors.values():
                        f.dequantize(t)
                raise AssertionError("%s: no error" % name)
            except gguf.GGUFError as e:
                assert BAD[name] in str(e) and str(e).startswith(path + ": "), (name, str(e))


@case
def key_longer_than_the_specification_allows():
    path = os.path.join(TMP, "long-key.gguf")
    gguf_write.write_gguf(path, {"k" * 65535: 1}, {})
    assert gguf.GGUFFile(path).metadata["k" * 65535] == 1
    for key in ("k" * 65536, "é" * 32768):  # bytes, not characters
        gguf_write.write_gguf(path, {key: 1}, {})
        try:
            gguf.GGUFFile(path)
            raise AssertionError("a 65536-byte key read")
        except gguf.GGUFError as e:
            assert "metadata #0 key: 65536 bytes, more than 65535" in str(e), str(e)


@case
def bad_files_are_make_py_s():
    """The committed files are what tests/gguf_bad/make.py makes today."""
    sys.path.insert(0, BAD_DIR)
    import make
    made = make.files()
    assert set(made) == set(BAD), sorted(set(made) ^ set(BAD))
    for name, data in made.items():
        assert open(os.path.join(BAD_DIR, name), "rb").read() == bytes(data), name


if __name__ == "__main__":
    sys.exit(case.main(TMP))
