"""./run against tools/reference.py (PyTorch): on random-weight models, one per knob combination,
on the real stories260K, on Q8_0, bfloat16 and float16 copies of some of them (convert.py
--weights, whose reference is reference.py on the weights read_model dequantises or widens), and
on Hugging Face directories of today's families (SmolLM2, Qwen2.5, Qwen3, Llama 3.2, Gemma 3,
TinyLlama) with their published configs cut to 2 layers, random weights and their real tokenizer
files, from float32 and from bfloat16 safetensors, converted by convert.py; their reference is
reference.py's Hugging Face mode on the directory itself, which shares no code with convert.py.

For each model: logits at every prompt position (./run -m logits, the batched path) agree to
max|delta| <= 1e-4 * max|logit| at each position; perplexity (./run -m ppl) agrees to 1e-5 relative
with a float64 computation; a greedy 64-token continuation (./run -t 0 -n 64) prints the same text.
The families' prompt tokens also equal the npm tokenizer oracle's (@lenml/tokenizers).

The oracle_* cases check reference.py's two modes against each other: a Hugging Face directory
and the model file of the same weights, mapped by hand (make_random.py), give the same logits and
greedy tokens, for every model_type and knob.

Run from the repository root after `make`: /usr/bin/python3 tests/test_parity.py [-k SUBSTRING]
(a case is a model; -k builds only the models it needs). Under ATTN_ASAN_SUITE=1 (make
test-asan) only ASAN_CASES run. Prints a table for the README with each case's seconds.
"""
import contextlib
import functools
import gc
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from pycase import ROOT  # puts tools/ on the path too
import convert  # noqa: E402
from attn import fake_hf  # noqa: E402
from attn import safetensors  # noqa: E402
from attn import families  # noqa: E402
from attn import random_models  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
import pycase  # noqa: E402
import reference as ref  # noqa: E402
from attn.reference import hf as ref_hf  # noqa: E402
from attn.reference import model as ref_model  # noqa: E402
from attn import tokenizer_blob  # noqa: E402

RUN = os.path.join(ROOT, "run")
SHARED = os.path.join(ROOT, "..", "shared")
NODE_MODULES = os.path.join(ROOT, "tests", "node", "node_modules")
TMP = tempfile.mkdtemp(prefix="attn-test-parity-")
PROMPT = "Once upon a time, there was a little girl named Lily."
# the families' prompt: digits, capitals, a contraction, punctuation, accents
HF_PROMPT = "Once upon a time in 1987, Lily's cat said: \"I don't like Mondays!\" Café au lait."
LOGIT_TOL, PPL_TOL, NEW_TOKENS = 1e-4, 1e-5, 64
# reference.py's greedy is the plain argmax: a model's own repetition penalty (Qwen2.5's
# generation_config.json has 1.05, which ./run now takes from the file) is turned off.
PLAIN_GREEDY = ("-t", "0", "-r", "1")
ENV = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
ASAN = bool(os.environ.get("ATTN_ASAN_SUITE"))
ASAN_CASES = {"llama_gqa", "gpt2", "sliding_window", "gemma_like", "oracle_gemma3", "hf_gemma3_knobs",
              "smollm2_135m_bf16"}

# (name, what it exercises, preset)
COMBOS = [
    ("gpt2", "GPT-2: learned positions, LayerNorm, GELU tanh, all biases, tied", "gpt2"),
    ("llama_gqa", "Llama: RoPE, RMSNorm, SwiGLU, 8 heads / 2 kv heads", "llama_gqa"),
    ("transformer_postnorm", "original decoder: post-norm, sinusoid, ReLU, embed x sqrt(dim), no final norm",
     "transformer_postnorm"),
    ("odd_head_dim", "head_dim 15, rope_dims 14, n_heads x head_dim != dim", "odd_head_dim"),
    ("head_dim_20", "head_dim 20 (4 x 20 = 80 != dim 64), GPT-2 style", "head_dim_20"),
    ("vocab_509", "vocab 509 (not a multiple of 8)", "vocab_509"),
    ("untied", "separate classifier, 6 heads / 3 kv heads", "untied"),
    ("qkv_bias_qwen2", "QKV-only biases (Qwen2), theta 1e6, eps 1e-6", "qkv_bias_qwen2"),
    ("mqa", "multi-query: 8 heads / 1 kv head", "mqa"),
    ("gelu_erf_nanogpt", "nanoGPT: GELU erf, no linear biases", "gelu_erf_nanogpt"),
    ("partial_rope", "RoPE on 8 of 16 head dims, theta 5e5", "partial_rope"),
    ("all_bias_swiglu", "SwiGLU with every bias (b1, b3, b2), untied", "all_bias_swiglu"),
    ("mixed", "post-norm LayerNorm + RoPE + ReLU + final norm, O/FFN biases, embed x 2.5, untied", "mixed"),
    ("rope_llama3", "Llama 3 RoPE scaling: factor 4, low 1, high 4, original context 64 (all three bands)",
     "rope_llama3"),
    ("rope_linear", "linear RoPE scaling, factor 4", "rope_linear"),
    ("qk_norm", "RMSNorm on each head of q and k before RoPE, head_dim 24", "qk_norm"),
    ("norm_plus_one", "every RMSNorm scaled by (1 + w)", "norm_plus_one"),
    ("out_norms", "a norm on the attention's and the feed-forward's outputs before the residual adds", "out_norms"),
    ("geglu", "GeGLU: w2(gelu_tanh(w1 x) * w3 x)", "geglu"),
    ("attn_scale", "scores scaled by 0.3 instead of 1/sqrt(head_dim)", "attn_scale"),
    ("sliding_window", "window 5 < the prompt on layers 0, 1 (base 1e4), layer 2 global (base 1e6)", "sliding_window"),
    ("gemma_like", "every Gemma 3 knob at once, llama3 scaling on the global layer, window 6", "gemma_like"),
    ("moe", "experts: the router's top 2 of 8 renormalised, qk-norm, untied", "moe"),
    ("moe_unnormed", "experts: top 3 of 6, weights the softmax's (moe_flags 0), 3 layers", "moe_unnormed"),
    ("moe_shared", "experts and a shared expert of 80 under its sigmoid gate (Qwen2-MoE), QKV biases", "moe_shared"),
    ("moe_whole_qk", "experts, top 2 of 8 unnormalised, q and k each normalised over the whole projection (OLMoE)",
     "moe_whole_qk"),
]

# (name, what it exercises, the float32 case it quantises, convert.py flags beyond --weights q8_0)
Q8_COMBOS = [
    ("llama_gqa_q8", "Q8_0 llama_gqa: GQA, tied, groups of 4 (hidden 172)", "llama_gqa", ["--group-size", "4"]),
    ("gpt2_q8", "Q8_0 gpt2: all biases, LayerNorm, learned positions, tied, groups of 16", "gpt2",
     ["--group-size", "16"]),
    ("untied_q8", "Q8_0 untied: separate classifier, groups of 16", "untied", ["--group-size", "16"]),
    ("mixed_q8", "Q8_0 mixed: post-norm, O/FFN biases, untied, a group size that is no power of two", "mixed",
     ["--group-size", "10"]),
    ("llama2xs_q8", "Q8_0 llama2xs (real checkpoint)", "llama2xs", []),
    ("moe_q8", "Q8_0 moe: each expert's rows in the stacked matrices, groups of 16", "moe", ["--group-size", "16"]),
    ("moe_shared_q8", "Q8_0 moe_shared: the shared expert's matrices too, groups of 16", "moe_shared",
     ["--group-size", "16"]),
    ("moe_whole_qk_q8", "Q8_0 moe_whole_qk: the q/k norms stay float32, groups of 16", "moe_whole_qk",
     ["--group-size", "16"]),
]

# (name, what it exercises, the float32 case it stores in 16 bits, convert.py's --weights)
HALF_COMBOS = [
    ("llama_gqa_bf16", "bfloat16 llama_gqa: GQA, tied", "llama_gqa", "bf16"),
    ("llama_gqa_f16", "float16 llama_gqa", "llama_gqa", "f16"),
    ("all_bias_swiglu_bf16", "bfloat16 all_bias_swiglu: biases stay float32, separate classifier", "all_bias_swiglu",
     "bf16"),
    ("gemma_like_bf16", "bfloat16 gemma_like: every knob", "gemma_like", "bf16"),
    ("moe_bf16", "bfloat16 moe: the experts in 16 bits, the router float32", "moe", "bf16"),
]

# (name, what it exercises, preset, model_type, safetensors dtype): small Hugging Face directories of
# every format-3 knob, converted; the reference reads the directory
HF_KNOBS = [
    ("hf_llama3_scaling", "HF llama: rope_scaling llama3, GQA, untied", "rope_llama3", "llama", "F32"),
    ("hf_linear_scaling", "HF llama: rope_scaling linear", "rope_linear", "llama", "F32"),
    ("hf_qwen3_knobs", "HF qwen3: q_norm / k_norm (permuted with the heads' rows), head_dim 24 != 64 / 4",
     "qk_norm", "qwen3", "F32"),
    ("hf_gemma3_knobs", "HF gemma3_text: every knob, layer_types, window 6, llama3 scaling on the global layer",
     "gemma_like", "gemma3_text", "F32"),
    ("hf_gemma3_knobs_bf16", "the same from bfloat16 safetensors", "gemma_like", "gemma3_text", "BF16"),
]


def ascii_text(n):
    """The first n characters of the TinyStories sample with anything outside printable ASCII blanked,
    so that every synthetic vocabulary covers it."""
    t = open(os.path.join(SHARED, "data", "tinystories_sample.txt"), encoding="utf-8").read()
    return "".join(c if 32 <= ord(c) < 127 or c == "\n" else " " for c in t)[:n]


# seconds spent in the current case on making its model (build), convert.py, and ./run
SPENT = dict(build=0.0, convert=0.0, run=0.0)


@contextlib.contextmanager
def spending(what):
    t0 = time.time()
    try:
        yield
    finally:
        SPENT[what] += time.time() - t0


def run(*args):
    with spending("run"):
        r = subprocess.run([RUN] + list(args), capture_output=True, env=ENV)
    if r.returncode:
        raise AssertionError("./run %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                        r.stderr.decode(errors="replace").strip()[-300:]))
    return r.stdout


def c_logits(model, prompt, flags=()):
    out = os.path.join(TMP, "logits.out")
    run(model, *flags, "-m", "logits", "-i", prompt, "-o", out)
    d = open(out, "rb").read()
    os.unlink(out)
    T, V = np.frombuffer(d, "<i4", 2)
    assert len(d) == 8 + 4 * T + 4 * T * V, "logits file size %d for T %d vocab %d" % (len(d), T, V)
    return np.frombuffer(d, "<i4", T, 8).tolist(), np.frombuffer(d, "<f4", T * V, 8 + 4 * T).reshape(T, V)


def c_ppl(model, text, flags=()):
    """(perplexity, the 'tokens: N' line) of ./run -m ppl on text."""
    path = os.path.join(TMP, "ppl.txt")
    open(path, "w", encoding="utf-8").write(text)
    out = run(model, *flags, "-m", "ppl", "-f", path).decode().strip().splitlines()
    assert out and out[-1].startswith("perplexity: "), "./run -m ppl printed %r" % out[-1:]
    return float(out[-1].split()[1]), out[:-1]


def sanitize(b):
    """What ./run promises to print for generated bytes: UTF-8 with invalid bytes as U+FFFD,
    control characters (C0, DEL, C1) other than newline and tab dropped: a carriage return
    could move the terminal's cursor."""
    s = b.decode("utf-8", errors="replace")
    return "".join(c for c in s if ord(c) >= 32 and not 127 <= ord(c) <= 159 or c in "\n\t").encode()


def compare_logits(lc, lr, res, fails):
    dl = np.abs(lc - lr).max(axis=1)
    scale = np.abs(lr).max(axis=1)
    worst = int(np.argmax(dl / scale))
    res["dmax"], res["rel"] = dl.max(), (dl / scale).max()
    if (dl > LOGIT_TOL * scale).any():
        fails.append("logits at position %d: max|d| %.3g > %.0e x %.3g" % (worst, dl[worst], LOGIT_TOL, scale[worst]))


def compare_greedy(got, want, res, fails):
    res["greedy"] = got == want
    if not res["greedy"]:
        i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        fails.append("greedy text differs at byte %d: ./run %r, reference %r" % (i, got[i:i + 30], want[i:i + 30]))


def stage(fails, f):
    try:
        f()
    except Exception as e:  # a crash of ./run or a malformed output: report, go on
        fails.append("%s: %s" % (type(e).__name__, e))


def check(model, ppl_text, kv_half=False):
    """One model file against reference.py's model-file mode: (results, failures). With kv_half,
    ./run keeps a float16 KV cache and the reference rounds its keys and values alike."""
    fails = []
    res = dict(dmax=float("nan"), rel=float("nan"), ppl=float("nan"), dppl=float("nan"), greedy=False)
    m64 = ref.load(model, torch.float64)
    m32 = ref.load(model, torch.float32)
    m64.kv_half = m32.kv_half = kv_half
    flags = ("--kv-cache", "f16") if kv_half else ()
    toks = []

    def logits():
        t, lc = c_logits(model, PROMPT, flags)
        toks.extend(t)
        if m64.tok[1] == mf.TOK_SENTENCEPIECE:
            mine = ref.encode(m64.tok, PROMPT)
            if mine != toks:
                fails.append("prompt tokens differ: ./run %s, reference %s" % (toks, mine))
        compare_logits(lc, ref.logits(m64, toks), res, fails)

    def perplexity():
        # Python encodes SentencePiece-style text itself (a long text, several windows); for
        # byte-level BPE the prompt's own tokens, as ./run -m logits reported them, are scored.
        text = ppl_text if ppl_text is not None else PROMPT
        ppl_c, counts = c_ppl(model, text, flags)
        ptoks = ref.encode(m64.tok, text) if ppl_text is not None else toks
        assert ("tokens: %d" % len(ptoks)) in counts, "./run counted %s, reference %d" % (counts, len(ptoks))
        res["ppl"] = ref.perplexity(m64, ptoks)
        res["dppl"] = abs(ppl_c - res["ppl"]) / res["ppl"]
        assert ppl_text is None or len(ptoks) > 2 * m64.cfg["seq_len"], "the text should span several windows"
        if res["dppl"] > PPL_TOL:
            fails.append("perplexity ./run %.9g vs torch %.9g" % (ppl_c, res["ppl"]))

    def greedy():
        # float32 like the C: a float64 argmax could split a float32 near-tie differently
        gen = ref.greedy(m32, toks, NEW_TOKENS)
        want = PROMPT.encode() + sanitize(ref.decode(m32.tok, gen, toks[-1]))
        compare_greedy(run(model, *flags, *PLAIN_GREEDY, "-n", str(NEW_TOKENS), "-i", PROMPT), want, res, fails)
    stage(fails, logits)
    stage(fails, perplexity)
    if toks:
        stage(fails, greedy)
    return res, fails


# ---- Hugging Face directories: the reference reads the directory ----

ORACLE_JS = r"""
const fs = require("fs");
const { TokenizerLoader } = require(process.argv[1] + "/@lenml/tokenizers");
const d = process.argv[2];
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(d + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(d + "/tokenizer_config.json", "utf8")),
});
process.stdout.write(JSON.stringify(tok.encode(fs.readFileSync(0, "utf8"))));
"""


def tokenizer_key(d):
    """What a directory's tokenizer files hold, to reuse what was computed from the same ones."""
    h = hashlib.sha1()
    for f in families.TOKENIZER_FILES:
        if os.path.exists(os.path.join(d, f)):
            h.update(f.encode() + open(os.path.join(d, f), "rb").read())
    return h.hexdigest()


def by_tokenizer(f):
    """f(d, ...) computed once per content of d's tokenizer files (an F32 and a BF16 directory share them)."""
    cache = {}

    def g(d, *args):
        key = (tokenizer_key(d),) + args
        if key not in cache:
            cache[key] = f(d, *args)
        return cache[key]
    return g


@by_tokenizer
def oracle_tokens(d, text):
    """The ids @lenml/tokenizers (transformers.js) gives text with d's tokenizer files, special
    tokens added as the post-processor says."""
    if not os.path.isdir(os.path.join(NODE_MODULES, "@lenml", "tokenizers")):
        raise AssertionError("no tokenizer oracle: npm install --prefix tests/node @lenml/tokenizers@%s"
                             % families.NPM_VERSION)
    r = subprocess.run(["node", "-e", ORACLE_JS, NODE_MODULES, d], input=text.encode(), capture_output=True)
    assert r.returncode == 0, "node: %s" % r.stderr.decode(errors="replace")[-300:]
    return json.loads(r.stdout)


class Pieces:
    """What ./run prints for each of a directory's V ids (special tokens nothing), and the draft for
    reference.py's greedy: a guess at the ids of a printed continuation."""

    def __init__(self, d, V):
        hf = ref_hf.hf_pieces(d)
        if hf is not None:
            self.piece = [hf[i][0] if i in hf and not hf[i][1] else b"" for i in range(V)]
        else:  # llama2.c's tokenizer.bin: BOS and EOS print nothing, <0xNN> is the byte
            blob, _, _, bos, eos = tokenizer_blob.read_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), V)
            self.piece = [b"" if i in (bos, eos) else bytes([int(p[3:5], 16)]) if len(p) == 6 and
                          p.startswith(b"<0x") and p.endswith(b">") else p
                          for i, p in enumerate(mf.parse_tokenizer(blob)[0])]
        self.by_text = {}
        for i, p in enumerate(self.piece):
            if p and sanitize(p) == p:  # prints as itself
                self.by_text.setdefault(p, []).append(i)
        self.longest = max(map(len, self.by_text))

    def decode(self, ids):
        return b"".join(self.piece[t] for t in ids)

    def draft(self, printed):
        """draft(new ids so far) -> a guess at the ids that follow, given what ./run printed after the
        prompt: the longest pieces that print as themselves, one after the other, while they match."""
        def guess(path):
            raw = self.decode(path)
            done = sanitize(raw)
            if printed_prefix(raw) != done or not printed.startswith(done):
                return []  # an incomplete character pending, or the ids so far have left the text
            out, at = [], len(done)
            while at < len(printed):
                rest = printed[at:at + self.longest]
                n = next((n for n in range(len(rest), 0, -1) if rest[:n] in self.by_text), 0)
                if not n:
                    break
                out.append(self.by_text[rest[:n]][0])
                at += n
            return out
        return guess


pieces_of = by_tokenizer(Pieces)


def printed_prefix(raw):
    """What ./run has surely printed of raw bytes: all of them but a trailing UTF-8 sequence that is
    incomplete yet valid so far, which the next bytes may complete."""
    for back in range(1, min(3, len(raw)) + 1):
        if raw[-back] >= 0xC0:  # the last lead byte: its sequence is cut short if some completion decodes
            need = 2 if raw[-back] < 0xE0 else 3 if raw[-back] < 0xF0 else 4
            tail = raw[-back:]
            if back < need and any(valid_utf8(tail + bytes([c] * (need - back))) for c in (0x80, 0xA0)):
                return sanitize(raw[:-back])
            break
        if raw[-back] < 0x80:
            break
    return sanitize(raw)


def valid_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def check_hf(model, d, prompt):
    """A converted model file against reference.py on the Hugging Face directory d: (results, failures)."""
    fails, res = [], dict(dmax=float("nan"), rel=float("nan"), ppl=float("nan"), dppl=float("nan"), greedy=False)
    hf = ref_hf.HFModel(d, torch.float32)
    toks = []

    def logits():
        t, lc = c_logits(model, prompt)
        toks.extend(t)
        if os.path.exists(os.path.join(d, "tokenizer.json")):
            want = oracle_tokens(d, prompt)
        else:
            want = ref.encode(tokenizer_blob.read_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), hf.V), prompt)
        if want != toks:
            fails.append("prompt tokens differ: ./run %s, oracle %s" % (toks, want))
        lr = hf.in_double().all_logits(toks)
        compare_logits(lc, lr.numpy(), res, fails)
        lp = torch.log_softmax(lr, -1)  # the prompt's perplexity, from the same float64 logits
        res["ppl"] = float(torch.exp(-lp[torch.arange(len(toks) - 1), torch.tensor(toks[1:])].mean()))

    def perplexity():
        ppl_c, counts = c_ppl(model, prompt)
        assert ("tokens: %d" % len(toks)) in counts, "./run -m ppl counted %s, -m logits %d" % (counts, len(toks))
        res["dppl"] = abs(ppl_c - res["ppl"]) / res["ppl"]
        if res["dppl"] > PPL_TOL:
            fails.append("perplexity ./run %.9g vs torch %.9g" % (ppl_c, res["ppl"]))

    def greedy():
        got = run(model, *PLAIN_GREEDY, "-n", str(NEW_TOKENS), "-i", prompt)
        pieces = pieces_of(d, hf.V)
        printed = got[len(prompt.encode()):] if got.startswith(prompt.encode()) else b""
        gen = ref.greedy(hf, toks, NEW_TOKENS, pieces.draft(printed))
        compare_greedy(got, prompt.encode() + sanitize(pieces.decode(gen)), res, fails)
    stage(fails, logits)
    if toks:
        stage(fails, perplexity)
        stage(fails, greedy)
    return res, fails


def converted(src, out, *extra):
    assert convert.main([src, out] + list(extra)) == 0, "convert.py %s failed" % src
    return out


def tinystories():
    return open(os.path.join(SHARED, "data", "tinystories_sample.txt"), encoding="utf-8").read()


def hf_gpt2_bpe():
    d = os.path.join(TMP, "hf_gpt2")
    fake_hf.write_hf_gpt2(d, dict(random_models.PRESETS["gpt2"], dim=32, hidden_dim=128, vocab_size=50257), seed=5)
    return converted(d, os.path.join(TMP, "gpt2_bpe.bin")), None


def hf_qwen2():
    d = os.path.join(TMP, "hf_qwen2")
    fake_hf.write_hf_llama(d, dict(random_models.PRESETS["qkv_bias_qwen2"], tied_classifier=0), seed=6, shards=2,
                           model_type="qwen2")
    return converted(d, os.path.join(TMP, "qwen2.bin")), ascii_text(1200)


def llama2c(src, name):
    return lambda: (converted(os.path.join(SHARED, "models", src), os.path.join(TMP, name + ".bin"), "--tokenizer",
                              os.path.join(SHARED, "models", "tok512.bin")), tinystories())


def random_model(i, name, preset):
    def make():
        path = os.path.join(TMP, name + ".bin")
        random_models.make_model(path, random_models.PRESETS[preset], seed=11 + i)
        return path, ascii_text(1200)
    return make


def quantised(name, source, extra):
    """A maker of a Q8_0 copy of what source() makes, or with extra ["--weights", W] one stored as W."""
    def make():
        path, text = source()
        flags = extra if "--weights" in extra else ["--weights", "q8_0"] + extra
        return converted(path, os.path.join(TMP, name + ".bin"), *flags), text
    return make


@functools.lru_cache(None)
def built(name):
    """(model file, perplexity text) of MODELS[name], made once; convert.py's notes are not shown."""
    with contextlib.redirect_stderr(io.StringIO()):
        return MODELS[name][1]()


# name -> (description, a function making the model: (model file, perplexity text or None)), in the order run
MODELS = {name: (what, random_model(i, name, preset)) for i, (name, what, preset) in enumerate(COMBOS)}
MODELS.update({
    "stories260K": ("real checkpoint (llama2.c legacy .bin), converted", llama2c("stories260K.bin", "stories260K")),
    "llama2xs": ("real checkpoint (llama2.c train.py .pt), converted", llama2c("llama2xs_ckpt.pt", "llama2xs")),
    "hf_gpt2_bpe": ("Hugging Face GPT-2 directory, converted; byte-level BPE, vocab 50257", hf_gpt2_bpe),
    "hf_qwen2": ("Hugging Face Qwen2 directory (2 safetensors shards, QKV biases, untied), converted", hf_qwen2)})
MODELS.update((name, (what, quantised(name, functools.partial(built, src), extra)))
              for name, what, src, extra in Q8_COMBOS)
MODELS.update((name, (what, quantised(name, functools.partial(built, src), ["--weights", weights])))
              for name, what, src, weights in HALF_COMBOS)
MODELS["stories260K_q8"] = ("llama2.c's Q8_0 export (groups of 32 across rows), kept as Q8_0",
                            llama2c("stories260K_q80.bin", "stories260K_q8"))


def gguf_kept(src):
    """llama.cpp's GGUF converted by default: each matrix kept in its own type (format 6)."""
    return lambda: (converted(os.path.join(SHARED, "models", "gguf", src + ".gguf"), os.path.join(TMP, src + ".bin"),
                              "--seq-len", "512"), tinystories())


MODELS.update({
    "gguf_stories260K_q4_k_m": ("llama.cpp's stories260K Q4_K_M (F16, Q5_0, Q8_0 blocks), kept as it is",
                                gguf_kept("stories260K-Q4_K_M")),
    "gguf_rand256_q4_k_m": ("llama.cpp's random Llama in Q4_K_M (Q4_K, Q6_K blocks), kept as it is",
                            gguf_kept("rand256-Q4_K_M")),
    "gguf_rand256_q4_1": ("llama.cpp's random Llama in Q4_1 (and a Q6_K classifier), kept as it is",
                          gguf_kept("rand256-Q4_1"))})


@functools.lru_cache(None)
def family_dirs(name):
    """{"F32": dir, "BF16": dir} of a family, the same draw rounded for BF16; written once."""
    dirs = {dt: os.path.join(TMP, "%s_%s" % (name, dt.lower())) for dt in ("F32", "BF16")}
    w = families.write_family(dirs["F32"], name, "F32", seed=17)
    families.write_family(dirs["BF16"], name, "BF16", weights=w, like=dirs["F32"])
    return dirs


def hf_knob_dir(name, preset, model_type, dtype, i):
    d = os.path.join(TMP, name)
    fake_hf.write_hf_llama(d, random_models.PRESETS[preset], seed=31 + i, model_type=model_type, dtype=dtype)
    return d


case = pycase.Cases()
ROWS = []  # the README table's rows, as the cases run: (name, what, results, seconds)


def add_case(name, what, f):
    if not ASAN or name in ASAN_CASES:
        case.add(name, lambda: timed(name, what, f))


def timed(name, what, f):
    SPENT.update(build=0.0, convert=0.0, run=0.0)
    t0 = time.time()
    res, fails = f()
    ROWS.append((name, what + res.get("note", ""), res, time.time() - t0, dict(SPENT)))
    assert not fails, "; ".join(fails)


def model_case(name, kv_half=False, source=None):
    """MODELS[source or name] against the reference; with kv_half, through a float16 KV cache."""
    def f():
        with spending("build"):
            path, text = built(source or name)
        res, fails = check(path, text, kv_half)
        res["note"] = weights_note(path)
        return res, fails
    add_case(name, MODELS[source or name][0] + ("; --kv-cache f16" if kv_half else ""), f)


def weights_note(path):
    """A Q8_0 model's group size or a 16-bit model's type, for the table; nothing for float32."""
    h = mf.read_header(open(path, "rb").read(mf.HEADER_SIZE))
    return {storage.WEIGHTS_Q8_0: "; groups of %d" % h["group_size"], storage.WEIGHTS_BF16: "; stored bf16",
            storage.WEIGHTS_F16: "; stored f16"}.get(h["weight_type"], "")


def hf_case(name, what, make_dir, prompt, done=None):
    """A Hugging Face directory, converted with convert.py's defaults, against reference.py on the
    directory; done() afterwards, if given."""
    def f():
        with spending("build"):
            d = make_dir()
        out = os.path.join(TMP, name + ".bin")
        notes = io.StringIO()
        with contextlib.redirect_stderr(notes), spending("convert"):
            if convert.main([d, out]) != 0:
                raise AssertionError("convert.py %s: %s" % (d, notes.getvalue().strip()[-300:]))
        try:
            res, fails = check_hf(out, d, prompt)
            res["note"] = weights_note(out)
            return res, fails
        finally:
            os.unlink(out)
            if done:
                done()
            gc.collect()
    add_case(name, what, f)


# Mistral: every layer attends to its last 5 positions (global_every past the last layer)
MISTRAL = dict(random_models.PRESETS["llama_gqa"], sliding_window=5, global_every=4, rope_local_theta=10000.0)


def hf_mistral_window():
    """A Mistral directory converted with --seq-len 320, above its sliding_window 5 and its
    max_position_embeddings 160, keeps the window on every layer: ./run's logits at every
    position of a prompt longer than the window equal reference.py's on the directory, which
    reads sliding_window itself; without the window the reference's differ."""
    d = os.path.join(TMP, "hf_mistral")
    with spending("build"):
        fake_hf.write_hf_llama(d, MISTRAL, seed=51, model_type="mistral")
    out = os.path.join(TMP, "hf_mistral.bin")
    with contextlib.redirect_stderr(io.StringIO()), spending("convert"):
        converted(d, out, "--seq-len", "320")
    h = mf.read_header(open(out, "rb").read(mf.HEADER_SIZE))
    assert (h["seq_len"], h["sliding_window"], h["global_every"], h["rope_local_theta"]) == (320, 5, 4, 1e4), h
    res, fails = check_hf(out, d, PROMPT)
    toks, _ = c_logits(out, PROMPT)
    assert len(toks) > 2 * MISTRAL["sliding_window"], "the prompt's %d tokens hardly pass the window" % len(toks)
    hf = ref_hf.HFModel(d, torch.float64)
    windowed = hf.all_logits(toks)
    assert hf.windows == [5] * MISTRAL["n_layers"], hf.windows
    hf.windows = [0] * MISTRAL["n_layers"]
    assert (hf.all_logits(toks) - windowed).abs().max() > 1e-2 * windowed.abs().max(), "the window changes nothing"
    return res, fails


for name in MODELS:
    model_case(name)
# ./run --kv-cache f16 (keys and values rounded to float16 as they enter the cache) against the
# reference rounding them alike: GQA, rings of local layers with every Gemma 3 knob (the keys
# normalised and rotated before they are rounded), one kv head. On these the rounding moves the
# logits by about 6e-4 of the largest, so the usual 1e-4 tells rounded from not. (stories260K
# is left out: there a key computed in float32 and one in float64 round to neighbouring float16
# values often enough to move its logits by 3e-4, reference against reference.)
for source in ("llama_gqa", "sliding_window", "gemma_like", "mqa"):
    model_case(source + "_kv_f16", kv_half=True, source=source)
add_case("hf_mistral_window", "HF mistral: sliding_window 5 on every layer, --seq-len 320 above it", hf_mistral_window)
for i, (name, what, preset, mt, dt) in enumerate(HF_KNOBS):
    hf_case(name, what, functools.partial(hf_knob_dir, name, preset, mt, dt, i), PROMPT)  # synthetic vocabularies
def family_done(name):
    """Remove a family's directories once its last case has run: gigabytes each."""
    for d in family_dirs(name).values():
        shutil.rmtree(d, ignore_errors=True)


for name, (conf_dir, tok_dir, _) in families.FAMILIES.items():
    for dt in ("F32", "BF16"):
        note = " (tokenizer_config / generation_config of %s)" % tok_dir if tok_dir != conf_dir else ""
        hf_case("%s_%s" % (name, dt.lower()), "%s, 2 layers, %s safetensors%s" % (conf_dir, dt, note),
                lambda name=name, dt=dt: family_dirs(name)[dt], HF_PROMPT,
                functools.partial(family_done, name) if dt == "BF16" else None)


# ---- mixtures of experts: Qwen3-30B-A3B's published config.json cut down ----

def moe_dir(name, seed, tie=False, published=families.QWEN3_30B_A3B, tokenizer="qwen3_0_6b", **more):
    """A published config (Qwen3-30B-A3B's unless given) cut to 2 layers of 8 experts
    (families.moe_config; more: its changes), random weights and the tokenizer files of family
    tokenizer (Qwen3's); with tie, experts 0 and 1 share their router row in every layer, so that
    their probabilities are equal for every token."""
    d = os.path.join(TMP, name)
    conf = families.moe_config(published, **more)
    w = families.family_weights(conf, seed)
    for l in range(conf["num_hidden_layers"] if tie else 0):
        r = w["model.layers.%d.mlp.gate.weight" % l]
        r[1] = r[0]
    families.write_family(d, tokenizer, weights=w, conf=conf)
    return d


def hf_moe_tie():
    """One expert a token, experts 0 and 1 tied in every router: where they are the most probable
    the choice is the lower one, in ./run as in reference.py (whose moe() is watched here to see
    that such ties happen), and expert 1's different weights would show in the logits otherwise."""
    name = "hf_qwen3_moe_tie"
    with spending("build"):
        d = moe_dir(name, 67, tie=True, top_k=1)
    out = os.path.join(TMP, name + ".bin")
    with contextlib.redirect_stderr(io.StringIO()), spending("convert"):
        converted(d, out)
    res, fails = check_hf(out, d, HF_PROMPT)
    toks, _ = c_logits(out, HF_PROMPT)
    hf = ref_hf.HFModel(d, torch.float32)
    routed, ties = hf.moe, []

    def watched(h, router, *experts):
        p = torch.nn.functional.softmax(torch.nn.functional.linear(h, router), dim=-1, dtype=torch.float)
        ties.append(int(((p[:, 0] == p[:, 1]) & (p[:, 0] == p.max(-1).values)).sum()))
        return routed(h, router, *experts)
    hf.moe = watched
    hf.all_logits(toks)
    if not sum(ties):
        fails.append("no token's most probable expert was a tie of experts 0 and 1")
    res["note"] = "; %d of %d routings a tie at the top" % (sum(ties), len(toks) * len(ties))
    shutil.rmtree(d, ignore_errors=True)
    os.unlink(out)
    return res, fails


hf_case("hf_qwen3_moe", "Qwen3-30B-A3B's config.json: 2 layers, top 2 of 8 experts (norm_topk_prob), dim 256",
        functools.partial(moe_dir, "hf_qwen3_moe", 61), HF_PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_qwen3_moe"), ignore_errors=True))
hf_case("hf_qwen3_moe_unnormed", "the same with norm_topk_prob false, top 3 of 8, 3 layers",
        functools.partial(moe_dir, "hf_qwen3_moe_unnormed", 65, top_k=3, layers=3, norm_topk_prob=False), HF_PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_qwen3_moe_unnormed"), ignore_errors=True))
add_case("hf_qwen3_moe_tie", "the same, top 1 of 8, experts 0 and 1 tied in the router", hf_moe_tie)
hf_case("hf_qwen2_moe", "Qwen1.5-MoE-A2.7B's config.json (qwen2_moe): 2 layers, top 4 of 8 experts, a shared "
        "expert of 192 with its sigmoid gate, q/k/v biases, dim 256", functools.partial(
            moe_dir, "hf_qwen2_moe", 75, published=families.QWEN1_5_MOE_A2_7B, top_k=4,
            shared_expert_intermediate_size=192), HF_PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_qwen2_moe"), ignore_errors=True))
MIXTRAL = dict(published=families.MIXTRAL_8X7B, tokenizer="tinyllama_1_1b")  # Llama 2's vocabulary, as Mixtral's size
hf_case("hf_mixtral", "Mixtral-8x7B's config.json: 2 layers, top 2 of 8 experts (always renormalised), dim 256",
        functools.partial(moe_dir, "hf_mixtral", 71, **MIXTRAL), PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_mixtral"), ignore_errors=True))
hf_case("hf_mixtral_window", "the same with sliding_window 6 on every layer (Mistral's), top 3 of 8",
        functools.partial(moe_dir, "hf_mixtral_window", 73, top_k=3, sliding_window=6, **MIXTRAL), PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_mixtral_window"), ignore_errors=True))
# OLMoE's vocabulary is 50304 ids; SmolLM2's GPT-2 byte-level BPE of 49152 fits in it
OLMOE = dict(published=families.OLMOE_1B_7B_0924, tokenizer="smollm2_135m")
hf_case("hf_olmoe", "OLMoE-1B-7B-0924's config.json: 2 layers, top 2 of 8 experts (norm_topk_prob false, as "
        "published), q/k norms over the whole projections, 4 heads / 2 kv heads, dim 256",
        functools.partial(moe_dir, "hf_olmoe", 77, **OLMOE), HF_PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_olmoe"), ignore_errors=True))
hf_case("hf_olmoe_normed", "the same with norm_topk_prob true, top 3 of 8, 3 layers, 4 kv heads (OLMoE's own MHA)",
        functools.partial(moe_dir, "hf_olmoe_normed", 79, top_k=3, layers=3, kv_heads=4, norm_topk_prob=True,
                          **OLMOE), HF_PROMPT,
        lambda: shutil.rmtree(os.path.join(TMP, "hf_olmoe_normed"), ignore_errors=True))


# ---- reference.py's two modes against each other ----

# (name, preset, model_type): a Hugging Face directory made from a model file's weights by
# make_random.py's hand mapping (RoPE rows and q/k norms permuted to the half-split layout)
ORACLE_CASES = [
    ("oracle_llama", "llama_gqa", "llama"), ("oracle_llama3_scaling", "rope_llama3", "llama"),
    ("oracle_linear_scaling", "rope_linear", "llama"), ("oracle_partial_rope", "partial_rope", "llama"),
    ("oracle_llama_biases", "all_bias_swiglu", "llama"), ("oracle_qwen2", "qkv_bias_qwen2", "qwen2"),
    ("oracle_qwen3", "qk_norm", "qwen3"), ("oracle_gemma3", "gemma_like", "gemma3_text"),
]


def oracle_pair(name, preset, model_type, dtype="F32"):
    d = os.path.join(TMP, name)
    if model_type == "gpt2":
        c, t = fake_hf.write_hf_gpt2(d, random_models.PRESETS[preset], seed=41)
    else:
        c, t = fake_hf.write_hf_llama(d, random_models.PRESETS[preset], seed=41, model_type=model_type, dtype=dtype)
    m = ref_model.Transformer(c)
    m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in t.items()})
    m.tok = random_models.default_vocab(c["vocab_size"])
    return m.double().eval(), ref_hf.HFModel(d, torch.float64), d


def oracle_check(name, preset, model_type, dtype="F32"):
    mine, hf, d = oracle_pair(name, preset, model_type, dtype)
    rng = np.random.default_rng(5)
    toks = rng.integers(0, mine.cfg["vocab_size"], 40).tolist()
    a, b = ref.logits(mine, toks), ref.logits(hf, toks)
    fails, res = [], dict(dmax=np.abs(a - b).max(), rel=(np.abs(a - b).max() / np.abs(a).max()), ppl=float("nan"),
                          dppl=float("nan"), greedy=False)
    if res["rel"] > 1e-10:
        fails.append("logits differ: max|d| %.3g of max|logit| %.3g" % (res["dmax"], np.abs(a).max()))
    res["ppl"] = ref.perplexity(hf, toks)
    res["dppl"] = abs(ref.perplexity(mine, toks) - res["ppl"]) / res["ppl"]
    if res["dppl"] > 1e-10:
        fails.append("perplexity differs by %.3g relative" % res["dppl"])
    mine.tok = (mine.tok[0], mine.tok[1], 0, -1, -1)  # no stop token: the HF directory has none either
    hf.stop_ids = set()
    g = ref.greedy(mine, toks[:10], 30)
    # the KV-cached steps, and guesses that are right, too long, wrong, or right then wrong
    for draft in (None, lambda out: g[len(out):], lambda out: g[len(out):] + [5] * 9, lambda out: [7, 8],
                  lambda out: g[len(out):12] + [3] * 20):
        h = ref.greedy(hf, toks[:10], 30, draft)
        if h != g:
            fails.append("greedy differs (draft %s): %s vs %s" % (draft is not None, g, h))
    res["greedy"] = not any(f.startswith("greedy") for f in fails)
    return res, fails


for name, preset, mt in ORACLE_CASES:
    add_case(name, "reference.py: HF %s directory = model file (%s)" % (mt, preset),
             functools.partial(oracle_check, name, preset, mt))
add_case("oracle_gemma3_bf16", "reference.py: HF gemma3_text BF16 safetensors = model file of the rounded weights",
         functools.partial(oracle_check, "oracle_gemma3_bf16", "gemma_like", "gemma3_text", "BF16"))
add_case("oracle_gpt2", "reference.py: HF gpt2 directory (Conv1D) = model file (gpt2)",
         functools.partial(oracle_check, "oracle_gpt2", "gpt2", "gpt2"))


def oracle_refusals():
    """reference.py refuses a Hugging Face directory it cannot compute exactly, in one line naming the file."""
    base = os.path.join(TMP, "refuse_base")
    fake_hf.write_hf_llama(base, dict(random_models.PRESETS["llama_gqa"], vocab_size=300), seed=1)
    conf = json.load(open(os.path.join(base, "config.json")))
    sd = ref_hf.read_safetensors(os.path.join(base, "model.safetensors"))
    rows = [("model_type", dict(conf, model_type="phi3"), sd, "model_type 'phi3'"),
            ("rope", dict(conf, rope_scaling={"rope_type": "yarn", "factor": 4.0}), sd, "rope_scaling type 'yarn'"),
            ("softcap", dict(conf, model_type="gemma3_text", final_logit_softcapping=30.0), sd,
             "final_logit_softcapping"),
            ("missing", conf, {k: v for k, v in sd.items() if "layers.1.mlp.up_proj" not in k},
             "missing tensor model.layers.1.mlp.up_proj.weight"),
            ("shape", conf, dict(sd, **{"model.norm.weight": np.ones(63, np.float32)}), "has shape (63,)"),
            ("extra", conf, dict(sd, **{"model.layers.0.mlp.extra.weight": np.ones(3, np.float32)}),
             "does not use: model.layers.0.mlp.extra.weight"),
            ("malformed", dict(conf, hidden_size="64"), sd, "malformed")]
    for name, c, tensors, needle in rows:
        d = os.path.join(TMP, "refuse_" + name)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "config.json"), "w").write(json.dumps(c))
        safetensors.write_safetensors(os.path.join(d, "model.safetensors"), tensors)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # in this process: torch loads once
            rc = ref.main([d, "--tokens", "1,2", "--logits", os.path.join(TMP, "refused.npy")])
        lines = err.getvalue().splitlines()
        assert rc == 1 and len(lines) == 1 and needle in lines[0], "%s: exit %d, %r" % (name, rc, err.getvalue())
    with open(os.path.join(base, "model.safetensors"), "r+b") as f:  # a data_offsets past the end; the command line
        f.truncate(os.path.getsize(f.name) - 4)
    pycase.refused([sys.executable, os.path.join(ROOT, "tools", "reference.py"), base, "--tokens", "1,2",
                    "--logits", os.path.join(TMP, "refused.npy")], "data_offsets")


if not ASAN:
    case.add("oracle_refusals", oracle_refusals)


def table(t0):
    print()
    print("| case | what it exercises | max abs dlogit | / max abs logit | perplexity (torch, f64) "
          "| rel dppl | greedy %d | s (make + convert + ./run + reference) |" % NEW_TOKENS)
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for name, what, r, secs, spent in ROWS:
        print("| %s | %s | %.2e | %.2e | %.6g | %.1e | %s | %.1f (%.1f + %.1f + %.1f + %.1f) |" % (
            name, what, r["dmax"], r["rel"], r["ppl"], r["dppl"], "identical" if r["greedy"] else "DIFFERS", secs,
            spent["build"], spent["convert"], spent["run"], secs - sum(spent.values())))
    print("\n(%.1f s; OMP_NUM_THREADS=%s)" % (time.time() - t0, ENV["OMP_NUM_THREADS"]))


def main():
    if not os.access(RUN, os.X_OK):
        print("test_parity: %s is not built (make run first)" % RUN)
        print("0 passed, 1 failed")
        return 1
    t0 = time.time()
    try:
        return case.main(TMP, report=lambda: table(t0))
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
