"""./train and 16-bit weights: --init of a bfloat16 or float16 model starts from its matrices
widened to float32, exactly (the initial model it writes holds them bit for bit); a model with
a format-3 knob that training lacks is refused in one line naming the knob, and so is a Q8_0
model.

Run from the repository root after `make`: /usr/bin/python3 tests/test_train_half.py [-k SUBSTRING]
"""
import functools
import os
import subprocess
import sys

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
import pycase  # noqa: E402

TMP = os.path.join(ROOT, "tests", "tmp", "train_half.%d" % os.getpid())
TRAIN = os.path.join(ROOT, "train")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
OPTS = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "4",
        "--vocab-size", "300", "--seed", "3"]
cases = pycase.Cases()


def train(*args):
    return subprocess.run([TRAIN, "-d", corpus()] + list(args), capture_output=True, text=True)


@functools.lru_cache(None)
def corpus():
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, "corpus.txt")
    with open(CORPUS, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as g:
        g.write(f.read()[:20000])
    return path


@functools.lru_cache(None)
def base_model():
    """(cfg, tok, tensors) of a new Llama-style model from ./train, its weights redrawn so that
    the matrices fill float16's and bfloat16's ranges (not only the initial N(0, 0.02))."""
    out = os.path.join(TMP, "base.bin")
    r = train("-o", out, "--arch", "llama", "--max-iters", "0", *OPTS)
    assert r.returncode == 0, r.stderr
    cfg, tok, tensors = mf.read_model(out)
    rng = np.random.default_rng(5)
    for n, t in tensors.items():
        scale = np.exp2(rng.integers(-20, 8, size=t.shape)) if t.ndim == 2 else 1
        tensors[n] = (rng.standard_normal(t.shape) * scale).astype(np.float32)
    return cfg, tok, tensors


def init_widens(weights):
    def case():
        cfg, tok, tensors = base_model()
        src, out = os.path.join(TMP, "%s.bin" % weights), os.path.join(TMP, "%s_init.bin" % weights)
        mf.write_model(src, mf.with_weight_type(cfg, weights), tok, tensors)
        r = train("-o", out, "--init", src, "--max-iters", "0", "--batch-size", "4")
        assert r.returncode == 0, r.stderr
        c16, _, want = mf.read_model(src)  # the 16-bit matrices widened by numpy
        c32, tok32, got = mf.read_model(out)
        assert c16["weight_type"] == mf.WEIGHT_NAMES[weights] and c32["weight_type"] == storage.WEIGHTS_F32
        assert dict(c32, weight_type=0) == dict(c16, weight_type=0) and tok32 == tok
        assert set(got) == set(want)
        for n in want:
            a, b = np.asarray(got[n]), np.asarray(want[n])
            assert a.dtype == np.float32 and a.view(np.uint32).tolist() == b.view(np.uint32).tolist(), n
        # and the widening is the rounding's inverse: a matrix is within half a unit of its float32
        rel = 2.0 ** -8 if weights == "bf16" else 2.0 ** -11
        for n in ("layers.0.wq", "tok_embedding"):
            t, g = tensors[n], np.asarray(got[n])
            normal = np.abs(t) >= (2.0 ** -126 if weights == "bf16" else 2.0 ** -14)
            assert np.all(np.abs(g - t)[normal] <= rel * np.abs(t)[normal]), n
    cases.add("init_widens_%s" % weights, case)


for w in ("bf16", "f16"):
    init_widens(w)


def refuses(name, knobs, needle):
    def case():
        cfg, tok, tensors = base_model()
        c = mf.complete_config(dict(cfg, **knobs))
        t = {n: tensors[n] if np.shape(tensors.get(n)) == s else np.ones(s, np.float32) for n, s in mf.tensor_specs(c)}
        if knobs.get("weight_type") == storage.WEIGHTS_Q8_0:
            t = {n: v / np.float32(np.abs(v).max()) for n, v in t.items()}
        src = os.path.join(TMP, "%s.bin" % name)
        mf.write_model(src, c, tok, t)
        line = pycase.refused([TRAIN, "-d", corpus(), "-o", os.path.join(TMP, "out_%s.bin" % name), "--init", src,
                               "--max-iters", "0"], needle)
        assert line.startswith("train: %s: " % src), line
    cases.add("refuses_%s" % name, case)


NOT_TRAINABLE = "is not trainable in this build"
refuses("rope_linear", dict(rope_scaling=1, rope_factor=2.0), "rope_scaling linear " + NOT_TRAINABLE)
refuses("rope_llama3", dict(rope_scaling=2, rope_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                            rope_original_ctx=16), "rope_scaling llama3 (Llama 3.x) " + NOT_TRAINABLE)
refuses("qk_norm", dict(arch_flags=1), "arch_flags QK_NORM (Qwen3/Gemma 3) " + NOT_TRAINABLE)
refuses("norm_plus_one", dict(arch_flags=2), "arch_flags NORM_PLUS_ONE (Gemma) " + NOT_TRAINABLE)
refuses("out_norms", dict(arch_flags=4), "arch_flags OUT_NORMS (Gemma 3) " + NOT_TRAINABLE)
refuses("attn_scale", dict(attn_scale=0.125), "attn_scale (Gemma 3's query_pre_attn_scalar) " + NOT_TRAINABLE)
refuses("sliding_window", dict(sliding_window=8, global_every=2, rope_local_theta=10000.0),
        "sliding_window (Gemma 3's local layers) " + NOT_TRAINABLE)
refuses("geglu", dict(ffn_kind=4), "ffn_kind GeGLU (Gemma) " + NOT_TRAINABLE)
refuses("experts", dict(n_experts=4, n_experts_used=2), "n_experts (a mixture of experts: Qwen3-MoE) " + NOT_TRAINABLE)
refuses("q8_0", dict(weight_type=storage.WEIGHTS_Q8_0, group_size=16), "its weights are quantised (Q8_0)")

if __name__ == "__main__":
    sys.exit(cases.main(TMP))
