"""tools/attn/quantize.py: llama-quantize's own files reproduced byte for byte from their F32
sources (../shared/models/gguf: rand256 in Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K and the Q4_K_M mix;
stories260K's Q6_K and Q4_K_M, whose rows of 64 and 172 take the fallbacks Q8_0, Q5_0 and F16):
each tensor's type as tensor_type chooses it and its bytes as quantize_rows writes them. Every block
type's bytes, dequantised by tools/attn/gguf_file.py (gguf-py's layouts), lie within one
quantisation step of the input on random, heavy-tailed, one-signed, sparse and all-zero data; the K
types' searched scales beat plain-max scales on weighted squared error; tensor_type's mixes and
fallbacks as llama.cpp's llama_tensor_get_type.

Run from the repository root: /usr/bin/python3 tests/test_quantize.py [-k SUBSTRING]
"""
import os
import sys

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import gguf_file as gguf  # noqa: E402
from attn import quantize  # noqa: E402

GGUF_DIR = os.path.join(ROOT, "..", "shared", "models", "gguf")
case = pycase.Cases()
OURS = dict(attn_q="wq", attn_k="wk", attn_v="wv", attn_output="wo", ffn_gate="w1", ffn_up="w3", ffn_down="w2")
BITS = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q2_K": 2, "Q3_K": 3, "Q4_K": 4, "Q5_K": 5,
        "Q6_K": 6, "IQ4_NL": 4}


def our_name(gguf_name):
    """A GGUF Llama matrix's name in FORMAT.md's terms."""
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        return "layers.%s.%s" % (parts[1], OURS[parts[2]])
    return {"token_embd": "tok_embedding", "output": "classifier"}[parts[0]]


def dequantized(b, type_name, shape):
    tid = gguf.TYPE_IDS[type_name]
    return gguf.DEQUANTIZE[tid](b.reshape(-1, gguf.BLOCK_SIZES[tid][1])).reshape(shape)


@case
def llama_quantize_files_reproduced():
    checked = set()
    for base in ("rand256", "stories260K"):
        with gguf.GGUFFile(os.path.join(GGUF_DIR, base + "-F32.gguf")) as src:
            for kind in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K", "Q4_K_M"):
                path = os.path.join(GGUF_DIR, "%s-%s.gguf" % (base, kind))
                if not os.path.exists(path):
                    continue
                with gguf.GGUFFile(path) as f:
                    n_layers = int(f.metadata["llama.block_count"])
                    for name, t in f.tensors.items():
                        if len(t.shape) != 2:
                            continue
                        x = src.dequantize(src.tensors[name])
                        ours = our_name(name)
                        want = quantize.tensor_type(ours, x.shape[1], n_layers, kind.lower(), ours == "classifier")
                        assert want == t.type_name, (path, name, want, t.type_name)
                        b = x.astype("<f2").view(np.uint8) if want == "F16" else quantize.quantize_rows(x, want)
                        assert np.array_equal(b.reshape(-1), f.raw(t)), (path, name, t.type_name)
                        checked.add(t.type_name)
    assert checked == {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K", "F16"}, checked


def test_data(rng, cols=512):
    return {"normal": rng.standard_normal((16, cols)), "student-t 2": rng.standard_t(2, (16, cols)),
            "positive": rng.uniform(0.5, 1.0, (16, cols)), "small": rng.standard_normal((16, cols)) * 0.01,
            "sparse": rng.standard_normal((16, cols)) * (rng.uniform(size=(16, cols)) < 0.05),
            "zero": np.zeros((2, cols)), "constant": np.full((2, cols), -0.75)}


@case
def every_type_within_a_step():
    """max |error| in each block at most one step, 2 max|x| / (2^bits - 1), and rows of the
    type's size; a zero block dequantises to zeros."""
    rng = np.random.default_rng(7)
    for type_name in quantize.QUANTIZERS:
        block, block_bytes = gguf.BLOCK_SIZES[gguf.TYPE_IDS[type_name]]
        for what, x in test_data(rng).items():
            x = x.astype(np.float32)
            b = quantize.quantize_rows(x, type_name)
            assert b.shape == (len(x), x.shape[1] // block * block_bytes) and b.dtype == np.uint8
            y = dequantized(b, type_name, x.shape).reshape(-1, block)
            xb = x.reshape(-1, block)
            step = 2 * np.abs(xb).max(axis=1) / (2 ** BITS[type_name] - 1)
            worst = (np.abs(y - xb).max(axis=1) - step).max()
            assert worst <= 0, (type_name, what, worst)
    try:
        quantize.quantize_rows(np.zeros((2, 100), np.float32), "Q4_K")
        raise AssertionError("rows of 100 accepted as Q4_K")
    except ValueError as e:
        assert "rows of 100 values are not whole Q4_K blocks of 256" in str(e), e


def plain_symmetric(x, nmax):
    """A scale per sub-block from its value of largest magnitude alone: make_qx_quants and
    make_q3_quants without their search."""
    big = np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = np.float32(-nmax) / big
        L = np.clip(np.rint(iscale[:, None] * x), -nmax, nmax - 1).astype(np.int32) + nmax
        return np.where(big == 0, 0, 1 / iscale).astype(np.float32), np.where(big[:, None] == 0, 0, L)


def type_weights(type_name, x):
    """The weights ggml's search gives each value: |x| (Q2_K), x^2 (Q3_K, Q6_K), the sub-block's
    RMS + |x| (Q4_K, Q5_K)."""
    if type_name in ("Q4_K", "Q5_K"):
        xs = x.reshape(-1, 32)
        return (np.sqrt((xs * xs).mean(axis=1, keepdims=True)) + np.abs(xs)).reshape(x.shape)
    return np.abs(x) if type_name == "Q2_K" else x * x


@case
def search_beats_plain_max():
    """Each K type's weighted squared error with ggml's searched scales (and minimums) at least 3%
    below that with the same type's scales from the plain maximum (and minimum), on normal and on
    heavy-tailed (Student t, 2 degrees of freedom) data."""
    rng = np.random.default_rng(11)
    data = {"normal": rng.standard_normal((32, 2048)), "student-t 2": rng.standard_t(2, (32, 2048))}
    searched = (quantize.make_qkx2_quants, quantize.make_qx_quants, quantize.make_q3_quants)
    for type_name in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
        for what, x in data.items():
            x = x.astype(np.float32)
            err = []
            for plain in (False, True):
                if plain:  # nstep -1: make_qkx2_quants's fit from the range alone, no trials
                    quantize.make_qkx2_quants = lambda x, w, nmax, rmin, rdelta, nstep, mad: searched[0](
                        x, w, nmax, rmin, rdelta, -1, mad)
                    quantize.make_qx_quants = quantize.make_q3_quants = plain_symmetric
                try:
                    y = dequantized(quantize.quantize_rows(x, type_name), type_name, x.shape)
                finally:
                    quantize.make_qkx2_quants, quantize.make_qx_quants, quantize.make_q3_quants = searched
                err.append(float((type_weights(type_name, x) * (x - y) ** 2).sum()))
            assert err[0] < 0.97 * err[1], (type_name, what, err)


@case
def tensor_types_as_llama_cpp():
    """Q4_K_M and Q5_K_M of a 32-layer Llama: wv and w2 in Q6_K in layers 0-3, 6, 9, ..., 27 and
    28-31; the classifier Q6_K; rows that K blocks do not divide fall back as llama.cpp's do."""
    more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
    for file_type, rest in (("q4_k_m", "Q4_K"), ("q5_k_m", "Q5_K")):
        for i in range(32):
            for part in ("wq", "wk", "wv", "wo", "w1", "w2", "w3"):
                t = quantize.tensor_type("layers.%d.%s" % (i, part), 4096, 32, file_type, False)
                assert t == ("Q6_K" if part in ("wv", "w2") and i in more else rest), (file_type, i, part, t)
        assert quantize.tensor_type("tok_embedding", 4096, 32, file_type, False) == rest
        assert quantize.tensor_type("classifier", 4096, 32, file_type, True) == "Q6_K"
        # GPT-2's q, k and v are one attn_qkv in a GGUF, which the mixes raise a step
        assert quantize.tensor_type("layers.5.wk", 768, 12, file_type, False, fused_qkv=True) == \
            ("Q5_K" if file_type == "q4_k_m" else "Q6_K")
    # llama-quantize's other mixes on a 16-layer Llama with 8 heads and 2 kv heads (n_gqa 4): the
    # types llama_tensor_get_type gives wv, w2, wo and the rest, by layer
    mixes = {"q2_k": (lambda i: "Q4_K", lambda i: "Q3_K", "Q3_K", "Q2_K"),
             "q3_k_s": (lambda i: "Q3_K", lambda i: "Q3_K", "Q3_K", "Q3_K"),
             "q3_k_m": (lambda i: "Q5_K" if i < 2 else "Q4_K", lambda i: "Q5_K" if i < 1 else "Q4_K", "Q4_K", "Q3_K"),
             "q3_k_l": (lambda i: "Q5_K", lambda i: "Q5_K", "Q5_K", "Q3_K"),
             "q4_k_s": (lambda i: "Q5_K" if i < 4 else "Q4_K", lambda i: "Q5_K" if i < 2 else "Q4_K", "Q4_K", "Q4_K"),
             "q5_k_s": (lambda i: "Q5_K", lambda i: "Q5_K", "Q5_K", "Q5_K")}
    for file_type, (wv, w2, wo, rest) in mixes.items():
        for i in range(16):
            want = dict(wv=wv(i), w2=w2(i), wo=wo, wq=rest, wk=rest, w1=rest, w3=rest)
            for part, t in want.items():
                got = quantize.tensor_type("layers.%d.%s" % (i, part), 4096, 16, file_type, False, n_gqa=4)
                assert got == t, (file_type, i, part, got, t)
    assert quantize.tensor_type("layers.3.wv", 4096, 16, "q2_k", False, n_gqa=2) == "Q3_K"
    # (name, row length, file type, classifier or tied embedding, the type) in a 4-layer model,
    # whose wv and w2 in layers 2 and 3 the mixes raise to Q6_K
    cases = [("layers.1.w2", 172, "q4_k_m", False, "F16"), ("layers.1.w2", 704, "q4_k_m", False, "Q5_0"),
             ("layers.1.w2", 704, "q5_k_m", False, "Q5_1"), ("layers.2.w2", 704, "q4_k_m", False, "Q8_0"),
             ("layers.1.w1", 704, "q2_k", False, "IQ4_NL"), ("layers.1.w1", 704, "q3_k", False, "IQ4_NL"),
             ("layers.1.wv", 704, "q3_k", False, "IQ4_NL"), ("layers.1.wo", 704, "q4_k", False, "Q5_0"),
             ("classifier", 64, "q4_0", True, "Q8_0"), ("classifier", 512, "q8_0", True, "Q8_0"),
             ("tok_embedding", 512, "q4_0", True, "Q6_K"), ("tok_embedding", 512, "q4_0", False, "Q4_0"),
             ("layers.1.wq", 64, "q6_k", False, "Q8_0")]
    for name, cols, file_type, classifier, want in cases:
        got = quantize.tensor_type(name, cols, 4, file_type, classifier)
        assert got == want, (name, cols, file_type, got)
    try:
        quantize.tensor_type("layers.0.w2", 172, 4, "q4_0", False)
        raise AssertionError("Q4_0 rows of 172 accepted")
    except ValueError as e:
        assert "tensor layers.0.w2: rows of 172 values are not whole Q4_0 blocks of 32" in str(e), e


if __name__ == "__main__":
    sys.exit(case.run(sys.argv[1:]))
