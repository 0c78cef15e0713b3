"""./run -m attention against tools/reference.py's attention probabilities (PyTorch), for every kind
of attention a model file holds: causal multi-head (GPT-2, the original decoder with post-norm),
grouped- and multi-query, qk-norm, sliding windows (through the ring cache and prompts longer than
a batch), a llama2.c file, Q8_0 and bfloat16 files, and the Hugging Face families of
tests/test_parity.py (SmolLM2, Qwen2.5, Qwen3, Llama 3.2, Gemma 3, TinyLlama; 2 layers, random
weights, real tokenizers), whose reference reads the directory itself.

For each: every weight within 1e-5 of reference.py's (float64), every row summing to 1 within 1e-5,
every masked entry (future keys, keys outside a window) exactly 0, the header's counts right; then
--layers/--heads select exactly a slice of the whole, and the labels after the weights name the
tokens, the first layer and head, the heads' groups and the windows.

Run from the repository root after `make run`: /usr/bin/python3 tests/test_attention.py [-k SUBSTRING]
"""
import contextlib
import io
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

from pycase import ROOT  # puts tools/ on the path too
from attn import families  # noqa: E402
from attn import modelfile as mf  # noqa: E402
import pycase  # noqa: E402
import reference as ref  # noqa: E402
from attn.reference.model import window_mask  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_parity as tp  # noqa: E402  (its model builders; its TMP is where they write)

TMP = tp.TMP
TOL = 1e-5
# under make test-asan (ATTN_ASAN_SUITE=1): the cases that take each path of the C code (windows
# through the ring, prompts of several batches, Q8_0, selection), not every family
ASAN_CASES = {"gpt2", "llama_gqa", "gemma_like", "stories260K", "llama_gqa_q8", "gemma3_270m", "selection"}


class Cases(pycase.Cases):
    def add(self, name, f, needs=()):
        if not tp.ASAN or name in ASAN_CASES:
            super().add(name, f, needs)


case = Cases()


def read_attention(path):
    """(ids, weights [layers, heads, T, T], labels dict or None) of a -m attention file."""
    d = open(path, "rb").read()
    T, L, H = struct.unpack_from("<3i", d)
    fixed = 12 + 4 * T + 4 * L * H * T * T
    assert len(d) >= fixed, "%s: %d bytes, the header implies at least %d" % (path, len(d), fixed)
    ids = np.frombuffer(d, "<i4", T, 12).tolist()
    w = np.frombuffer(d, "<f4", L * H * T * T, 12 + 4 * T).reshape(L, H, T, T)
    if len(d) == fixed:
        return ids, w, None
    assert d[fixed:fixed + 4] == b"LABL", "%s: no labels after the weights" % path
    layer0, head0, group = struct.unpack_from("<3i", d, fixed + 4)
    windows = list(struct.unpack_from("<%di" % L, d, fixed + 16))
    at, pieces = fixed + 16 + 4 * L, []
    for _ in range(T):
        n, = struct.unpack_from("<i", d, at)
        pieces.append(d[at + 4:at + 4 + n])
        at += 4 + n
    assert at == len(d), "%s: %d bytes after the labels" % (path, len(d) - at)
    return ids, w, dict(layer0=layer0, head0=head0, group=group, windows=windows, pieces=pieces)


def c_attention(model, prompt, *flags):
    out = os.path.join(TMP, "attention.out")
    tp.run(model, "-m", "attention", "-i", prompt, "-o", out, *flags)
    try:
        return read_attention(out)
    finally:
        os.unlink(out)


def compare(w, want, windows, what):
    """w [layers, heads, T, T] from ./run against reference.py's per-layer [heads, T, T] and each
    layer's window (0: causal only)."""
    assert len(want) == w.shape[0], "%s: %d layers in the file, the reference has %d" % (what, w.shape[0], len(want))
    T = w.shape[2]
    pos = torch.arange(T)
    for l, (got, r) in enumerate(zip(w, want)):
        assert got.shape == r.shape, "%s layer %d: shape %s, the reference's %s" % (what, l, got.shape, r.shape)
        d = np.abs(got - r).max()
        assert d <= TOL, "%s layer %d: max|d| %.3g > %g" % (what, l, d, TOL)
        rows = np.abs(got.astype(np.float64).sum(-1) - 1).max()
        assert rows <= TOL, "%s layer %d: a row sums to 1 +- %.3g" % (what, l, rows)
        masked = ~window_mask(pos, pos, windows[l]).numpy()
        assert (r[:, masked] == 0).all(), "%s layer %d: the reference's mask differs from the window's" % (what, l)
        nonzero = int((got[:, masked] != 0).sum())
        assert nonzero == 0, "%s layer %d: %d masked entries are not 0" % (what, l, nonzero)


def model_file_case(name, prompt, tokens_like_logits=False):
    """A model file test_parity builds, against reference.py's model-file mode."""
    def f():
        with contextlib.redirect_stderr(io.StringIO()):
            path, _ = tp.built(name)
        ids, w, labels = c_attention(path, prompt)
        m = ref.load(path, torch.float64)
        c = m.cfg
        assert w.shape[:2] == (c["n_layers"], c["n_heads"]), "header %s, model %s" % (
            w.shape[:2], (c["n_layers"], c["n_heads"]))
        windows = [c["sliding_window"] if m.is_local(l) else 0 for l in range(c["n_layers"])]
        compare(w, ref.attention_probabilities(m, ids), windows, name)
        assert labels["windows"] == windows and labels["group"] == c["n_heads"] // c["n_kv_heads"], labels
        if tokens_like_logits:  # the same prompt ids, BOS rules included, as -m logits
            assert ids == tp.c_logits(path, prompt)[0], "-m attention and -m logits tokenize differently"
    case.add(name, f)


def family_case(name, prompt):
    """A Hugging Face family directory (make_random's builder, as test_parity's), converted; the
    reference reads the directory."""
    def f():
        d = os.path.join(TMP, name)
        out = d + ".bin"
        try:
            families.write_family(d, name, "F32", seed=17)
            with contextlib.redirect_stderr(io.StringIO()):  # convert.py's notes
                tp.converted(d, out)
            ids, w, labels = c_attention(out, prompt)
            hf = ref.HFModel(d, torch.float64)
            assert w.shape[:2] == (len(hf.layers), hf.H), "header %s, model %s" % (w.shape[:2], (len(hf.layers), hf.H))
            compare(w, ref.attention_probabilities(hf, ids), hf.windows, name)
            assert labels["windows"] == hf.windows and labels["group"] == hf.H // hf.KV, labels
            assert len(ids) > max(hf.windows), "%d tokens do not pass the window %d" % (len(ids), max(hf.windows))
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(out):
                os.unlink(out)
    case.add(name, f)


# (name, what it holds): model files of make_random's presets and real checkpoints, as test_parity builds them
model_file_case("gpt2", tp.PROMPT, tokens_like_logits=True)  # causal MHA, learned positions
model_file_case("transformer_postnorm", tp.PROMPT)  # the original decoder: post-norm, sinusoids
model_file_case("llama_gqa", tp.PROMPT)  # 8 query heads on 2 key/value heads
model_file_case("mqa", tp.PROMPT)  # 8 query heads on 1
model_file_case("qk_norm", tp.PROMPT)
model_file_case("attn_scale", tp.PROMPT)  # scores scaled by 0.3
model_file_case("sliding_window", tp.PROMPT)  # window 5 on two of three layers
model_file_case("gemma_like", tp.PROMPT)  # every Gemma 3 knob, window 6
# llama2.c's checkpoint, BOS added, with a prompt of more than one batch (256 rows)
model_file_case("stories260K", tp.tinystories()[:900], tokens_like_logits=True)
model_file_case("llama_gqa_q8", tp.PROMPT)
model_file_case("gemma_like_bf16", tp.PROMPT)

# Gemma 3 270M's first two layers are local with a window of 512: a prompt of some 600 tokens
# goes past it, through the ring cache, in three batches.
for name in families.FAMILIES:
    family_case(name, tp.ascii_text(2600) if name.startswith("gemma3") else tp.HF_PROMPT)


@case
def selection():
    """--layers and --heads write exactly that slice of the whole, counted in the header, with the
    first layer and head in the labels; the tokens' pieces spell the prompt."""
    with contextlib.redirect_stderr(io.StringIO()):
        path, _ = tp.built("llama_gqa")
    ids, whole, labels = c_attention(path, tp.PROMPT)
    assert labels["layer0"] == 0 and labels["head0"] == 0 and labels["group"] == 4, labels
    for (l0, l1), (h0, h1), flags in (((1, 2), (2, 5), ["--layers", "1-2", "--heads", "2-5"]),
                                      ((2, 2), (7, 7), ["--layers", "2", "--heads", "7"]),
                                      ((0, 2), (0, 0), ["--heads", "0"])):
        _, part, lab = c_attention(path, tp.PROMPT, *flags)
        assert part.shape[:2] == (l1 - l0 + 1, h1 - h0 + 1), "%s: header %s" % (flags, part.shape[:2])
        assert np.array_equal(part, whole[l0:l1 + 1, h0:h1 + 1]), "%s: not the slice of the whole" % flags
        assert (lab["layer0"], lab["head0"], len(lab["windows"])) == (l0, h0, l1 - l0 + 1), lab
    blob, _, _, bos, _ = mf.read_model(path)[1]
    assert ids[0] == bos and labels["pieces"][0] == mf.parse_tokenizer(blob)[0][bos], "BOS labelled by its piece"
    assert b"".join(labels["pieces"][1:]) == tp.PROMPT.encode(), labels["pieces"]


@case
def shakespeare_model():
    """The shipped model: a character per token, every piece the character itself, newline included."""
    prompt = "ROMEO:\nBut soft, what light"
    ids, w, labels = c_attention(os.path.join(ROOT, "models", "shakespeare.bin"), prompt)
    assert labels["pieces"] == [ch.encode() for ch in prompt] and len(ids) == len(prompt), labels["pieces"]
    m = ref.load(os.path.join(ROOT, "models", "shakespeare.bin"), torch.float64)
    compare(w, ref.attention_probabilities(m, ids), [0] * 4, "shakespeare")


def main():
    if not os.access(tp.RUN, os.X_OK):
        print("test_attention: %s is not built (make run first)" % tp.RUN)
        print("0 passed, 1 failed")
        return 1
    return case.main(TMP)


if __name__ == "__main__":
    sys.exit(main())
