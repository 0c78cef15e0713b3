"""convert.py on GGUF files (tools/attn/sources/gguf.py, tokenizer_gguf.from_gguf): llama.cpp's own files
in ../shared/models/gguf, and files this test writes with tools/attn/gguf_write.py the way llama.cpp's
converter lays a family out (Llama's q/k rows interleaved, Gemma's norms as 1 + w, GPT-2's
fused qkv), each converted back and compared with the model it was written from.

Run from the repository root: /usr/bin/python3 tests/test_gguf_convert.py [-k SUBSTRING]
"""
import contextlib
import io
import json
import math
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import torch

from pycase import ROOT  # puts tools/ on the path too
import convert  # noqa: E402
from attn.sources import tokenizer as tokenizer_files  # noqa: E402
from attn import gguf_file as gguf  # noqa: E402
from attn.sources import gguf as gguf_model  # noqa: E402
from attn import gguf_write  # noqa: E402
from attn import chat_template  # noqa: E402
from attn import fake_hf  # noqa: E402
from attn import families  # noqa: E402
from attn import random_models  # noqa: E402
from attn.exports import hf as export_hf  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
import pycase  # noqa: E402
import reference as ref  # noqa: E402
from attn.reference import model as ref_model  # noqa: E402
from attn import tokenizer_blob  # noqa: E402
from attn import tokenizer_gguf  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
GGUF_DIR = os.path.join(SHARED, "models", "gguf")
EXPECTED = os.path.join(SHARED, "expected")
TMP = tempfile.mkdtemp(prefix="attn-test-gguf-convert-")
RUN, TOK_CLI = os.path.join(ROOT, "run"), os.path.join(ROOT, "tests", "bin", "tok_cli")

case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


def shared(name):
    return os.path.join(GGUF_DIR, name + ".gguf")


def conv(args):
    """convert.py in-process: (exit status, what it printed on stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = convert.main(args)
    return rc, err.getvalue()


def converted(src, out, *extra):
    rc, err = conv([src, tmp(out)] + list(extra))
    assert rc == 0, "convert.py %s: %s" % (src, err.strip())
    return mf.read_model(tmp(out)), err


def refused(args, *words):
    rc, err = conv(args)
    lines = err.strip().split("\n")
    assert rc == 1 and len(lines) == 1, "expected one line and exit 1, got %d: %s" % (rc, err)
    for w in words:
        assert w in err, "%r not in %r" % (w, err)


def build(*targets):
    subprocess.run(["make", "-s", "-C", ROOT] + list(targets), check=True)


# ---- llama.cpp's files ----

def run_text(model, *args):
    return subprocess.run([RUN, model] + list(args), capture_output=True, check=True).stdout


@case
def stories260K_f32_runs_like_llama2c():
    """llama.cpp's llama2c converter wrote context_length 128 where llama2.c's checkpoint has 512;
    --seq-len 512 gives llama2.c's context, and its three outputs byte for byte."""
    build("run")
    (cfg, tok, t), _ = converted(shared("stories260K-F32"), "s260.bin", "--seq-len", "512")
    (cfg0, _, t0), _ = converted(os.path.join(SHARED, "models", "stories260K.bin"), "s260_legacy.bin", "--tokenizer",
                                 os.path.join(SHARED, "models", "tok512.bin"))
    assert cfg == cfg0, (cfg, cfg0)
    for k in t0:  # q/k rows in the same (interleaved) order as llama2.c's: nothing permuted twice
        assert np.array_equal(t[k], t0[k]), k
    assert tok[1:] == (mf.TOK_SENTENCEPIECE, mf.TOKF_DUMMY_PREFIX | mf.TOKF_ADD_BOS, 1, 2), tok[1:]
    m = tmp("s260.bin")
    for name, args in (("stories260K_t0_n200.txt", ["-t", "0", "-n", "200"]),
                       ("stories260K_t1_p1_s42_n200.txt", ["-t", "1", "-p", "1", "-s", "42", "-n", "200"]),
                       # llama2.c's -n 64 counts the 5 prompt tokens: 60 new ones
                       ("stories260K_i_Once_upon_a_time_t0_n64.txt",
                        ["-i", "Once upon a time", "-t", "0", "-n", "60"])):
        want = open(os.path.join(EXPECTED, name), "rb").read()
        got = run_text(m, *args)
        assert got == want, "%s differs at byte %d" % (name, next(
            (i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))))


@case(needs=[stories260K_f32_runs_like_llama2c])
def ppl_chunks_score_as_llama_perplexity():
    """-m ppl --chunks scores as llama-perplexity does: the tokens cut into chunks of the context
    (-c 128), each from a fresh cache with its first token BOS, only the second half of each
    scored; --chunks N takes the first N. Computed here from the float64 reference, chunk by
    chunk, for 3000 characters of TinyStories (1499 tokens: 11 chunks, the rest unscored)."""
    build("run")
    text = open(os.path.join(SHARED, "data", "tinystories_sample.txt"), encoding="utf-8").read()[:3000]
    path, model, ctx = tmp("ppl.txt"), tmp("s260.bin"), 128
    open(path, "w", encoding="utf-8").write(text)
    m = ref.load(model, torch.float64)
    toks, bos = ref.encode(m.tok, text), m.tok[3]
    for asked, k in (("all", len(toks) // ctx), ("3", 3)):
        r = subprocess.run([RUN, model, "-m", "ppl", "-f", path, "-c", str(ctx), "--chunks", asked, "-q"],
                           capture_output=True, text=True, check=True)
        nll, scored = 0.0, 0
        with torch.no_grad():
            for i in range(k):
                chunk = [bos] + toks[i * ctx + 1:(i + 1) * ctx]
                lp = torch.log_softmax(m.all_logits(chunk), -1)
                rows = torch.arange(ctx // 2, ctx - 1)
                nll -= lp[rows, torch.tensor(chunk)[rows + 1]].sum().item()
                scored += len(rows)
        want = math.exp(nll / scored)
        assert r.stdout.startswith("tokens: %d\nchunks: %d of %d tokens, the second half of each scored\n"
                                   % (len(toks), k, ctx)), r.stdout
        got = float(r.stdout.split("perplexity: ")[1].split()[0])
        assert abs(got - want) <= 1e-5 * want, (asked, got, want)


@case(needs=[stories260K_f32_runs_like_llama2c])
def gguf_as_tokenizer_of_a_llama2c_checkpoint():
    """--tokenizer FILE.gguf: stories260K.bin with its tokenizer from the GGUF runs as llama2.c."""
    converted(os.path.join(SHARED, "models", "stories260K.bin"), "s260_gguftok.bin", "--tokenizer",
              shared("stories260K-F32"))
    got = run_text(tmp("s260_gguftok.bin"), "-t", "0", "-n", "200")
    assert got == open(os.path.join(EXPECTED, "stories260K_t0_n200.txt"), "rb").read()


def vocab_cases(name):
    """llama.cpp's tokenizer test: texts separated by lines __ggml_vocab_test__, one line of ids each."""
    texts = open(os.path.join(EXPECTED, name + ".gguf.inp"), encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    ids = open(os.path.join(EXPECTED, name + ".gguf.out")).read().split("\n")
    texts = texts[:-1] if texts[-1] == "" else texts
    return texts, [[int(x) for x in line.split()] for line in ids[:len(texts)]]


def tok_cli_ids(tok, texts):
    build("tests/bin/tok_cli")
    path = tmp("blob")
    with open(path, "wb") as f:
        f.write(tok[0])
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts).encode()
    out = subprocess.run([TOK_CLI, path] + [str(x) for x in tok[1:]], input=lines, capture_output=True,
                         check=True).stdout.decode().split("\n")
    return [[int(x) for x in o.partition("\t")[0].split()] for o in out[:len(texts)]]


def vocab_only(name, kind):
    texts, want = vocab_cases(name)
    assert len(texts) > 30
    with gguf.GGUFFile(shared(name)) as f:
        n = len(f.metadata["tokenizer.ggml.tokens"])
    # what --tokenizer does
    tok, notes = tokenizer_files.read_tokenizer(shared(name), n, "a model of vocab_size %d" % n)
    assert tok[1] == kind, tok[1:]
    got = tok_cli_ids(tok, texts)
    for t, g, w in zip(texts, got, want):
        assert g == w, "%r: %s, expected %s" % (t, g, w)


@case
def vocab_only_gpt2_tokenises_like_hf():
    vocab_only("ggml-vocab-gpt-2", mf.TOK_BYTE_BPE)


@case
def vocab_only_llama_spm_tokenises_like_hf():
    vocab_only("ggml-vocab-llama-spm", mf.TOK_SENTENCEPIECE)


@case
def vocab_only_file_as_model_is_refused():
    refused([shared("ggml-vocab-gpt-2"), tmp("x.bin")], "token_embd.weight", "--tokenizer")


def matrices(t):
    return [k for k in t if k.split(".")[-1] in storage.QUANTIZED_MATRICES]


def gguf_name(k):
    """Our tensor name -> llama.cpp's, for the llama files here."""
    names = dict(attn_norm_w="attn_norm", wq="attn_q", wk="attn_k", wv="attn_v", wo="attn_output",
                 ffn_norm_w="ffn_norm", w1="ffn_gate", w3="ffn_up", w2="ffn_down")
    if k.startswith("layers."):
        _, i, n = k.split(".")
        return "blk.%s.%s.weight" % (i, names[n])
    return dict(tok_embedding="token_embd", final_norm_w="output_norm", classifier="output")[k] + ".weight"


def our_name(gguf_tensor):
    """llama.cpp's tensor name -> ours, for the llama files here (gguf_name's inverse)."""
    names = dict(attn_norm="attn_norm_w", attn_q="wq", attn_k="wk", attn_v="wv", attn_output="wo",
                 ffn_norm="ffn_norm_w", ffn_gate="w1", ffn_up="w3", ffn_down="w2")
    parts = gguf_tensor.split(".")
    if parts[0] == "blk":
        return "layers.%s.%s" % (parts[1], names[parts[2]])
    return dict(token_embd="tok_embedding", output_norm="final_norm_w", output="classifier")[parts[0]]


@case
def every_shared_gguf_kept_as_it_is():
    """Every tensor of every shared GGUF, converted by default (each matrix in its own type) and
    read back from the model file, hashes as gguf-py's dequantised values do
    (expected/gguf_dequantized_sha256.json); the file is at most 1.05 times the GGUF's bytes."""
    import hashlib
    expected = json.load(open(os.path.join(EXPECTED, "gguf_dequantized_sha256.json")))
    assert len(expected) == 15, sorted(expected)
    for name, want in sorted(expected.items()):
        stem = name[:-len(".gguf")]
        (cfg, _, t), note = converted(os.path.join(GGUF_DIR, name), "kept_%s.bin" % stem)
        kinds = {v["type"] for k, v in want["tensors"].items() if len(v["shape"]) == 2}
        if kinds - {"F32", "F16", "BF16"} or len(kinds) > 1:
            assert cfg["weight_type"] == storage.WEIGHTS_PER_MATRIX and "kept bit for bit" in note, (name, note)
            for k, v in want["tensors"].items():
                if len(v["shape"]) == 2 and our_name(k) in t:
                    assert cfg["matrix_types"][our_name(k)] == v["type"], (name, k)
        for k, v in want["tensors"].items():
            ours = our_name(k)
            if ours == "classifier" and cfg["tied_classifier"]:
                ours = "tok_embedding"  # llama.cpp wrote the tied head again
            a = np.ascontiguousarray(t[ours], "<f4")
            assert list(a.shape) == v["shape"][::-1], (name, k, a.shape)
            assert hashlib.sha256(a.tobytes()).hexdigest() == v["sha256_f32"], "%s %s (%s)" % (name, k, v["type"])
        ratio = os.path.getsize(tmp("kept_%s.bin" % stem)) / os.path.getsize(os.path.join(GGUF_DIR, name))
        assert ratio <= 1.05, (name, ratio)


# The float16 scales of each block type (byte offsets in a block): random blocks get sane ones.
BLOCK_SCALES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
                "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,),
                "IQ4_XS": (0,)}


def random_blocks(ty, shape, rng):
    """A matrix of random blocks of type ty, uint8 [rows, row bytes], each scale a float16 of a
    size that keeps a model's activations tame."""
    block, block_bytes = gguf.BLOCK_SIZES[gguf.TYPE_IDS[ty]]
    b = rng.integers(0, 256, (shape[0] * shape[1] // block, block_bytes), dtype=np.uint8)
    for at in BLOCK_SCALES[ty]:
        b[:, at:at + 2] = (rng.uniform(0.2, 1.0, (len(b), 1)) / shape[1] ** 0.5 / 8).astype("<f2").view(np.uint8)
    return b.reshape(shape[0], -1)


def blocks_gguf(path, ty, seed):
    """WIDE as a llama GGUF whose matrices are random blocks of type ty (its norms float32)."""
    c = mf.complete_config(WIDE)
    write_family_gguf(path + ".f32", "llama", c, random_models.random_tensors(c, seed=seed))
    rng = np.random.default_rng(seed)
    with gguf.GGUFFile(path + ".f32") as f, gguf_write.GGUFWriter(path) as w:
        for k, v in f.metadata.items():
            w.add(k, v, f.metadata_types[k])
        data = {k: random_blocks(ty, t.shape, rng) if len(t.shape) == 2 else f.dequantize(t)
                for k, t in f.tensors.items()}
        for k, t in f.tensors.items():
            w.add_tensor(k, t.shape, ty if len(t.shape) == 2 else "F32")
        for k in f.tensors:
            w.write_tensor(k, data[k])


# Every block type the model file holds, in a shared file or one written here.
SHARED_BLOCK_FILES = ["rand256-%s" % ty for ty in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q6_K")] + \
    ["stories260K-Q4_K_M", "stories260K-Q6_K"]
WRITTEN_BLOCK_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "IQ4_NL", "Q4_1", "Q5_1", "IQ4_XS")
LOGITS_TOLERANCE = 1e-3  # relative to the largest logit: inputs rounded to 16 bits (model/quant_dot.h; measured: at most 2.9e-4)


@case
def block_types_compute_as_float32():
    """Each block type, converted by default, runs as the same GGUF converted with --weights f32
    (the values gguf-py dequantises): ./run's prompt logits (the many-token product, its inputs
    rounded to 16 bits) within LOGITS_TOLERANCE at every position, and the same greedy text
    (the one-token product)."""
    build("run")
    files = [(n, shared(n)) for n in SHARED_BLOCK_FILES]
    for i, ty in enumerate(WRITTEN_BLOCK_TYPES):
        blocks_gguf(tmp("blocks_%s.gguf" % ty), ty, seed=20 + i)
        files.append(("written-" + ty, tmp("blocks_%s.gguf" % ty)))
    prompt = "Once upon a time, there was a little girl who liked to play in the park with her dog"
    worst = []
    for name, src in files:
        converted(src, "b_%s.bin" % name)
        converted(src, "b_%s_f32.bin" % name, "--weights", "f32")
        _, a = c_logits(tmp("b_%s.bin" % name), prompt)
        _, b = c_logits(tmp("b_%s_f32.bin" % name), prompt)
        rel = float(np.abs(a - b).max() / np.abs(b).max())
        worst.append("%s %.1e" % (name, rel))
        assert rel < LOGITS_TOLERANCE, (name, rel)
        args = ["-i", "Once upon a time", "-t", "0", "-n", "60"]
        assert run_text(tmp("b_%s.bin" % name), *args) == run_text(tmp("b_%s_f32.bin" % name), *args), name
    print("worst logit difference / largest logit: " + ", ".join(worst))


@case(needs=[block_types_compute_as_float32])
def kept_types_export_and_reconvert_exactly():
    """--export-hf of a file of block types writes what the --weights f32 file's export writes,
    byte for byte (but for the marker naming the source), and convert.py on the file itself gives the --weights f32 file."""
    for name in ("rand256-Q4_K_M", "stories260K-Q6_K"):
        for f in ("", "_f32"):
            out = tmp("hf_%s%s" % (name, f))
            shutil.rmtree(out, ignore_errors=True)
            rc, err = conv([tmp("b_%s%s.bin" % (name, f)), out, "--export-hf"])
            assert rc == 0, err
        for f in sorted(set(os.listdir(tmp("hf_%s_f32" % name))) - {export_hf.MARKER}):  # the marker names the source
            a = open(os.path.join(tmp("hf_%s" % name), f), "rb").read()
            assert a == open(os.path.join(tmp("hf_%s_f32" % name), f), "rb").read(), (name, f)
        converted(tmp("b_%s.bin" % name), "again_%s.bin" % name)
        assert open(tmp("again_%s.bin" % name), "rb").read() == open(tmp("b_%s_f32.bin" % name), "rb").read(), name


def c_logits(model, prompt):
    """(token ids, logits [T, vocab]) of ./run -m logits on prompt."""
    out = tmp("logits.out")
    subprocess.run([RUN, model, "-m", "logits", "-i", prompt, "-o", out], capture_output=True, check=True)
    d = open(out, "rb").read()
    T, V = np.frombuffer(d, "<i4", 2)
    return np.frombuffer(d, "<i4", T, 8).tolist(), np.frombuffer(d, "<f4", T * V, 8 + 4 * T).reshape(T, V)


@case
def quantised_mixes_convert_on_request():
    """--weights still converts a GGUF of block types: q8_0 maps Q8_0, Q4_0 and Q6_K exactly (the
    rest quantised from their exact values), bf16 and f32 dequantise exactly."""
    for ty in ("Q4_K_M", "Q6_K"):
        (cfg, _, _), note = converted(shared("stories260K-" + ty), "s_%s.bin" % ty, "--weights", "q8_0")
        assert cfg["weight_type"] == storage.WEIGHTS_Q8_0 and "as Q8_0" in note, note
        (cfg, _, _), note = converted(shared("stories260K-" + ty), "s_%s_bf16.bin" % ty, "--weights", "bf16")
        assert cfg["weight_type"] == storage.WEIGHTS_BF16 and "dequantised exactly" in note, note
    (_, _, t), _ = converted(shared("rand256-Q4_0"), "r_q4_0_q8.bin", "--weights", "q8_0")
    with gguf.GGUFFile(shared("rand256-Q4_0")) as f:
        for k in t:
            assert np.array_equal(t[k], f.dequantize(f.tensors[gguf_name(k)])), k


@case
def quantize_writes_llama_quantize_bytes():
    """--quantize on llama.cpp's own F32 GGUF writes every matrix in the type and with the bytes
    llama-quantize's file of that name in ../shared has: its output.weight, equal to
    token_embd.weight, is kept apart as llama-quantize keeps it (token_embd in the file type's
    own type, output Q6_K), not folded into one tied Q6_K matrix."""
    for kind in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q6_K", "Q4_K_M"):
        (cfg, _, raw), _ = converted(shared("rand256-F32"), "lq_%s.bin" % kind, "--quantize", kind.lower())
        assert not cfg["tied_classifier"], kind
        raw = mf.read_model(tmp("lq_%s.bin" % kind), dequantize=False)[2]
        with gguf.GGUFFile(shared("rand256-" + kind)) as f:
            for name, t in f.tensors.items():
                if len(t.shape) == 2:
                    ours = our_name(name)
                    assert cfg["matrix_types"][ours] == t.type_name, (kind, name, cfg["matrix_types"][ours])
                    assert np.array_equal(np.asarray(raw[ours]).view(np.uint8).reshape(-1),
                                          np.asarray(f.raw(t)).view(np.uint8).reshape(-1)), (kind, name)


@case
def requantising_refused_unless_asked():
    """--quantize on a GGUF whose matrices are quantised already refuses, as llama-quantize does,
    naming the tensors and their types and --allow-requantize; with it the file is written, each
    matrix in the type asked; a matrix already in its target type keeps its blocks without it."""
    refused([shared("rand256-Q4_K_M"), tmp("rq.bin"), "--quantize", "q4_0"],
            "--quantize q4_0: 15 matrices the checkpoint holds quantised already (token_embd.weight Q4_K -> Q4_0",
            "--allow-requantize")
    refused([shared("rand256-Q4_0"), tmp("rq.bin"), "--quantize", "q2_k"], "blk.0.attn_q.weight Q4_0 -> Q2_K",
            "--allow-requantize")
    (cfg, _, _), note = converted(shared("rand256-Q4_0"), "rq.bin", "--quantize", "q3_k", "--allow-requantize")
    assert set(cfg["matrix_types"].values()) == {"Q3_K", "Q6_K"} and "bits a weight" in note, cfg["matrix_types"]
    assert "--quantize q3_k: Q3_K throughout, not a llama-quantize mix (the classifier and rows no Q3_K block " \
        "divides as llama-quantize types them): Q3_K 15, Q6_K 1)" in note, note
    (cfg, _, _), note = converted(shared("rand256-F32"), "r_q4_k_m.bin", "--quantize", "q4_k_m")
    assert "--quantize q4_k_m: each matrix in the type llama-quantize's Q4_K_M gives it: Q4_K" in note, note
    with gguf.GGUFFile(shared("rand256-Q4_0")) as f:
        kept = {our_name(k): t.type_name for k, t in f.tensors.items() if len(t.shape) == 2}
    (cfg, _, _), _ = converted(shared("rand256-Q4_0"), "rq_same.bin", "--quantize", "q4_0")
    assert cfg["matrix_types"] == kept, (cfg["matrix_types"], kept)


# ---- files written here the way llama.cpp's converter writes each family ----

def spm_tokenizer(V):
    """A SentencePiece-style vocabulary of V tokens in tokenizer.ggml.* form."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581"]
    tokens += ["\u2581t%d" % i for i in range(V - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": np.arange(V, dtype=np.float32) * -1,
            "tokenizer.ggml.token_type": np.array(types, np.int32), "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2}


def bpe_tokenizer(V, pre="gpt-2"):
    """A byte-level vocabulary: the 256 bytes, letter pairs made by merges, then <|endoftext|>."""
    chars = [c for _, c in sorted(tokenizer_blob.bytes_to_unicode().items())]
    pairs = [(a, b) for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijklmnopqrstuvwxyz"][:V - 257]
    tokens = chars + [a + b for a, b in pairs] + ["<|endoftext|>"]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": np.array([1] * (V - 1) + [3], np.int32),
            "tokenizer.ggml.merges": ["%s %s" % p for p in pairs], "tokenizer.ggml.bos_token_id": V - 1,
            "tokenizer.ggml.eos_token_id": V - 1}


LAYER_GGUF = dict(attn_norm_w="attn_norm.weight", wq="attn_q.weight", wk="attn_k.weight", wv="attn_v.weight",
                  wo="attn_output.weight", ffn_norm_w="ffn_norm.weight", w1="ffn_gate.weight", w3="ffn_up.weight",
                  w2="ffn_down.weight", bq="attn_q.bias", bk="attn_k.bias", bv="attn_v.bias",
                  q_norm_w="attn_q_norm.weight", k_norm_w="attn_k_norm.weight")
GEMMA_GGUF = dict(LAYER_GGUF, attn_out_norm_w="post_attention_norm.weight", ffn_out_norm_w="post_ffw_norm.weight")
GPT2_GGUF = dict(attn_norm_w="attn_norm.weight", attn_norm_b="attn_norm.bias", wo="attn_output.weight",
                 bo="attn_output.bias", ffn_norm_w="ffn_norm.weight", ffn_norm_b="ffn_norm.bias",
                 w1="ffn_up.weight", b1="ffn_up.bias", w2="ffn_down.weight", b2="ffn_down.bias")


def llamacpp_rope_freqs(c):
    """What llama.cpp's converter stores for Llama 3's scaling (rope_freqs)."""
    inv = 1 / (c["rope_theta"] ** (np.arange(0, c["head_dim"], 2, dtype=np.float32) / c["head_dim"]))
    out = []
    ctx, lo, hi, f = c["rope_original_ctx"], c["rope_low_freq_factor"], c["rope_high_freq_factor"], c["rope_factor"]
    for w in 2 * np.pi / inv:
        s = (ctx / w - lo) / (hi - lo)
        out.append(1 if w < ctx / hi else f if w > ctx / lo else 1 / ((1 - s) / f + s))
    return np.array(out, np.float32)


def write_family_gguf(path, arch, cfg, t, wtype="F32"):
    """Our model (cfg, tensors) as llama.cpp's converter would have written its Hugging Face form."""
    c = mf.complete_config(cfg)
    hd, H, KV, d = c["head_dim"], c["n_heads"], c["n_kv_heads"], c["dim"]
    meta = {"general.architecture": arch, arch + ".context_length": c["seq_len"], arch + ".embedding_length": d,
            arch + ".feed_forward_length": c["hidden_dim"], arch + ".block_count": c["n_layers"],
            arch + ".attention.head_count": H}
    out = {}
    if arch == "gpt2":
        meta.update({arch + ".attention.layer_norm_epsilon": c["norm_eps"]}, **bpe_tokenizer(c["vocab_size"]))
        out["token_embd.weight"] = t["tok_embedding"]
        out["position_embd.weight"] = t["pos_embedding"]
        for i in range(c["n_layers"]):
            p = "layers.%d." % i
            out["blk.%d.attn_qkv.weight" % i] = np.concatenate([t[p + "wq"], t[p + "wk"], t[p + "wv"]])
            out["blk.%d.attn_qkv.bias" % i] = np.concatenate([t[p + "bq"], t[p + "bk"], t[p + "bv"]])
            for ours, theirs in GPT2_GGUF.items():
                out["blk.%d.%s" % (i, theirs)] = t[p + ours]
        out["output_norm.weight"], out["output_norm.bias"] = t["final_norm_w"], t["final_norm_b"]
        out["output.weight"] = t["tok_embedding"]  # llama.cpp's GPT-2 converter writes the tied head again
    else:
        meta.update({arch + ".attention.head_count_kv": KV, arch + ".attention.key_length": hd,
                     arch + ".attention.value_length": hd, arch + ".rope.freq_base": c["rope_theta"],
                     arch + ".attention.layer_norm_rms_epsilon": c["norm_eps"],
                     arch + ".rope.dimension_count": c["rope_dims"]}, **spm_tokenizer(c["vocab_size"]))
        gemma = arch == "gemma3"
        if gemma:  # llama.cpp's Gemma 3: no dummy prefix; its loader assumes a global layer every 6
            meta.update({"tokenizer.ggml.add_space_prefix": False, arch + ".attention.sliding_window": c["sliding_window"],
                         arch + ".attention.sliding_window_pattern": c["global_every"]})
        if c["rope_scaling"] == mf.ROPE_SCALING_LINEAR:
            meta.update({arch + ".rope.scaling.type": "linear", arch + ".rope.scaling.factor": c["rope_factor"]})
        if c["rope_scaling"] == mf.ROPE_SCALING_LLAMA3:
            meta[arch + ".rope.scaling.original_context_length"] = c["rope_original_ctx"]
            out["rope_freqs.weight"] = llamacpp_rope_freqs(c)
        out["token_embd.weight"] = t["tok_embedding"]
        for i in range(c["n_layers"]):
            p = "layers.%d." % i
            for k in sorted(k for k in t if k.startswith(p)):
                ours = k[len(p):]
                v = t[k]
                if arch != "llama" and ours in ("wq", "bq", "wk", "bk", "q_norm_w", "k_norm_w"):
                    # Qwen and Gemma keep Hugging Face's half-split RoPE rows; llama.cpp's Llama
                    # converter permutes them back to the interleaved order the model file has
                    n = {"wq": H, "bq": H, "wk": KV, "bk": KV}.get(ours, 1)
                    v = fake_hf.permute_rope_hf(v, n, hd, c["rope_dims"])
                if gemma and ours.endswith("norm_w"):
                    v = v + np.float32(1)
                out["blk.%d.%s" % (i, (GEMMA_GGUF if gemma else LAYER_GGUF)[ours])] = v
        out["output_norm.weight"] = t["final_norm_w"] + np.float32(1) if gemma else t["final_norm_w"]
        if not c["tied_classifier"]:
            out["output.weight"] = t["classifier"]
    tensors = {k: (wtype if v.ndim == 2 and k != "position_embd.weight" else "F32", v) for k, v in out.items()}
    gguf_write.write_gguf(path, meta, tensors)


P = random_models.PRESETS
WIDE = dict(P["llama_gqa"], dim=256, hidden_dim=512, n_layers=1, n_heads=4, n_kv_heads=2)  # rows of whole K blocks
GEMMA = dict(P["gemma_like"], rope_scaling=0, rope_factor=0, rope_low_freq_factor=0, rope_high_freq_factor=0,
             rope_original_ctx=0, attn_scale=float(np.float32(32 ** -0.5)))
FAMILIES = [("llama_gqa", "llama", P["llama_gqa"]), ("llama_untied", "llama", P["untied"]),
            ("llama_rope_llama3", "llama", P["rope_llama3"]), ("llama_rope_linear", "llama", P["rope_linear"]),
            # RoPE on 30 of 44 dimensions: 44 x (30 / 44) is 29.999... in floating point
            ("llama_partial_rope_44", "llama", dict(P["llama_gqa"], dim=176, n_heads=4, n_kv_heads=2, rope_dims=30)),
            ("qwen2", "qwen2", P["qkv_bias_qwen2"]), ("qwen3", "qwen3", P["qk_norm"]), ("gemma3", "gemma3", GEMMA),
            ("gpt2", "gpt2", P["gpt2"])]


def family_case(name, arch, cfg):
    def f():
        c = mf.complete_config(cfg)
        t = random_models.random_tensors(c, seed=5)
        write_family_gguf(tmp(name + ".gguf"), arch, c, t)
        (got, _, t2), _ = converted(tmp(name + ".gguf"), name + ".bin")
        want = dict(c)
        if arch == "gemma3":  # llama.cpp's 1 + w norms, read by a model computing x * w
            want["arch_flags"] &= ~mf.ARCH_NORM_PLUS_ONE
            t = {k: v + np.float32(1) if k.endswith("norm_w") else v for k, v in t.items()}
        for k in mf.CONFIG_FIELDS:
            assert np.float32(got[k]) == np.float32(want[k]), "%s: %s %s, expected %s" % (name, k, got[k], want[k])
        assert set(t2) == set(t)
        for k in t:
            assert np.array_equal(t2[k], t[k]), "%s: %s" % (name, k)
    case.add("family_" + name, f)


@case
def gemma3_layer_flags():
    """A per-layer sliding-window flag array in place of the pattern number gives the same model;
    flags with no period are refused; without either, a global layer every 6 (llama.cpp's loader
    sets that for gemma3, whose converter writes no pattern)."""
    c = mf.complete_config(GEMMA)
    write_family_gguf(tmp("g.gguf"), "gemma3", c, random_models.random_tensors(c, seed=6))
    with gguf.GGUFFile(tmp("g.gguf")) as f:
        meta = {k: (v, f.metadata_types[k]) for k, v in f.metadata.items()}
        tensors = {k: ("F32", f.dequantize(t)) for k, t in f.tensors.items()}
    for flags, ok in (([True, True, False], True), ([False, True, True], False)):
        meta["gemma3.attention.sliding_window_pattern"] = np.array(flags)
        gguf_write.write_gguf(tmp("g2.gguf"), meta, tensors)
        if ok:
            assert converted(tmp("g2.gguf"), "g2.bin")[0][0]["global_every"] == 3
        else:
            refused([tmp("g2.gguf"), tmp("o.bin")], "gemma3.attention.sliding_window_pattern")
    del meta["gemma3.attention.sliding_window_pattern"]
    gguf_write.write_gguf(tmp("g3.gguf"), meta, tensors)
    assert converted(tmp("g3.gguf"), "g3.bin")[0][0]["global_every"] == 6


for _n, _a, _c in FAMILIES:
    family_case(_n, _a, _c)


@case
def written_q8_0_q4_0_q6_k_map_exactly():
    """Q8_0 and Q4_0 (group 32) and Q6_K (group 16) written by gguf_write convert without loss."""
    c = mf.complete_config(WIDE)
    t = random_models.random_tensors(c, seed=2)
    for ty, group in (("Q8_0", 32), ("Q4_0", 32), ("Q6_K", 16)):
        write_family_gguf(tmp("w_%s.gguf" % ty), "llama", c, t, ty)
        (cfg, _, t2), note = converted(tmp("w_%s.gguf" % ty), "w_%s.bin" % ty, "--weights", "q8_0")
        assert cfg["weight_type"] == storage.WEIGHTS_Q8_0 and cfg["group_size"] == group, cfg
        with gguf.GGUFFile(tmp("w_%s.gguf" % ty)) as f:
            for k in t2:
                assert np.array_equal(t2[k], f.dequantize(f.tensors[gguf_name(k)])), (ty, k)


@case
def llama3_rope_freqs_without_original_context():
    """llama.cpp's converter writes Llama 3's scaling only as rope_freqs (its original context
    from config.json's top level, 8192 if absent), no rope.scaling keys: read with 8192, the
    fitted factors give the file's frequencies."""
    c = mf.complete_config(P["rope_llama3"])
    write_family_gguf(tmp("l3.gguf"), "llama", c, random_models.random_tensors(c, seed=4))
    with gguf.GGUFFile(tmp("l3.gguf")) as f:
        meta = {k: (v, f.metadata_types[k]) for k, v in f.metadata.items()
                if k != "llama.rope.scaling.original_context_length"}
        tensors = {k: ("F32", f.dequantize(t)) for k, t in f.tensors.items()}
        freqs = f.dequantize(f.tensors["rope_freqs.weight"])
    gguf_write.write_gguf(tmp("l3b.gguf"), meta, tensors)
    got = converted(tmp("l3b.gguf"), "l3b.bin")[0][0]
    assert got["rope_scaling"] == mf.ROPE_SCALING_LLAMA3 and got["rope_original_ctx"] == 8192, got
    assert np.allclose(llamacpp_rope_freqs(got), freqs, rtol=1e-5), (llamacpp_rope_freqs(got), freqs)


def gemma3_gguf_meta(tok_json):
    """tokenizer.ggml.* as llama.cpp's converter writes Gemma 3's from its SentencePiece model:
    special added tokens control (<unk> unknown), ordinary ones user-defined with U+2581 written
    as spaces, <0xNN> byte pieces. tokenizer.json has no scores, so each piece scores minus the
    rank of the first merge making it (the assumption: the SentencePiece scores order merges so)."""
    with open(tok_json, encoding="utf-8") as f:
        j = json.load(f)
    tokens = [None] * len(j["model"]["vocab"])
    for piece, i in j["model"]["vocab"].items():
        tokens[i] = piece
    made = {}
    for r, m in enumerate(j["model"]["merges"]):
        made.setdefault("".join(m if isinstance(m, list) else m.split(" ")), r)
    scores = np.array([-float(made.get(p, len(made) + i)) for i, p in enumerate(tokens)], np.float32)
    added = {t["id"]: t["special"] for t in j["added_tokens"]}
    types = []
    for i, p in enumerate(tokens):
        if i in added:
            types.append((2 if p == "<unk>" else 3) if added[i] else 4)
            tokens[i] = p if added[i] else p.replace("\u2581", " ")
        else:
            types.append(6 if len(p) == 6 and p.startswith("<0x") and p.endswith(">") else 1)
    return {"general.architecture": "gemma3", "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": np.array(types, np.int32),
            "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
            "tokenizer.ggml.add_space_prefix": False, "tokenizer.ggml.add_bos_token": True}


@case
def gemma3_gguf_vocabulary_tokenises_like_its_tokenizer_json():
    """Gemma 3's real vocabulary as a GGUF (its 30 whitespace tokens user-defined, spelled with
    spaces) gives the ids its tokenizer.json gives (tests/test_tokenizer_hf.py checks those
    against Hugging Face's), whitespace runs and literal U+2581 included; the whitespace tokens
    are stored as the tokenizer.json path stores them."""
    import test_tokenizer_hf as hf
    why = hf.ensure_pkgs()
    assert why is None, why
    d = os.path.join(hf.LENML, "tokenizer-gemma3", "models")
    gguf_write.write_gguf(tmp("gemma3_vocab.gguf"), gemma3_gguf_meta(os.path.join(d, "tokenizer.json")), {})
    n = 262144
    want_tok, _ = tokenizer_files.read_tokenizer(os.path.join(d, "tokenizer.json"), n, "Gemma 3")
    got_tok, _ = tokenizer_files.read_tokenizer(tmp("gemma3_vocab.gguf"), n, "Gemma 3")
    assert got_tok[1:3] == want_tok[1:3], (got_tok[1:], want_tok[1:])
    want_p, _, _, want_added = mf.parse_tokenizer(want_tok[0], with_added=True)
    got_p, _, _, got_added = mf.parse_tokenizer(got_tok[0], with_added=True)
    assert got_p[138:168] == want_p[138:168] == [b" " * k for k in range(2, 32)], got_p[138:168]
    assert [a for a in got_added if 138 <= a[0] < 168] == [a for a in want_added if 138 <= a[0] < 168]
    special, ordinary = hf.family_tokens(d)
    texts = hf.fixed_texts() + hf.ggml_texts("llama-spm") + hf.random_texts(random.Random(3), 200, special + ordinary)
    texts += ["a  b", "   x", "\tx\t\ty", "a\n\nb\n", " " * 40 + "z", "\u2581", "a\u2581b", " \u2581 ",
              "\u2581\u2581 a", "  \t  \n  ", "<start_of_turn>user\n  hi  <end_of_turn>\n"]
    texts += ["x" + "\u2581" * k + "y" + " " * k for k in range(1, 40)]
    want, got = tok_cli_ids(want_tok, texts), tok_cli_ids(got_tok, texts)
    for t, g, w in zip(texts, got, want):
        assert g == w, "%r: %s, tokenizer.json gives %s" % (t, g, w)


@case
def normal_token_holding_a_space_refused():
    """A normal token holding a space is refused as ambiguous (a user-defined one is Gemma 3's)."""
    meta = dict(spm_tokenizer(300), **{"general.architecture": "gemma3", "tokenizer.ggml.add_space_prefix": False})
    meta["tokenizer.ggml.tokens"][299] = "  "
    gguf_write.write_gguf(tmp("gemma_tok.gguf"), meta, {})
    try:
        tokenizer_gguf.from_gguf(tmp("gemma_tok.gguf"))
        raise AssertionError("normal token 299 holding spaces was accepted")
    except ValueError as e:
        assert "token 299" in str(e) and "holds a space" in str(e), e


@case
def gpt2_pre_tokenizers_map():
    """Each tokenizer.ggml.pre in scope gives the split the families issue gave its tokenizer.json;
    without tokenizer.ggml.add_bos_token, BOS is added for llama-bpe only, as llama.cpp does."""
    want = {"gpt-2": mf.TOK_PRE_GPT2, "llama-bpe": mf.TOK_PRE_LLAMA3, "qwen2": mf.TOK_PRE_QWEN2,
            "smollm": mf.TOK_PRE_DIGITS_GPT2, "starcoder": mf.TOK_PRE_DIGITS_GPT2}
    for pre, split in want.items():
        gguf_write.write_gguf(tmp("pre.gguf"), dict(bpe_tokenizer(300, pre), **{"general.architecture": "gpt2"}), {})
        tok = tokenizer_gguf.from_gguf(tmp("pre.gguf"))
        assert tok.kind == mf.TOK_BYTE_BPE and tok.flags >> mf.TOKF_PRE_SHIFT == split, (pre, tok.flags)
        assert bool(tok.flags & mf.TOKF_NFC) == (pre == "qwen2") and \
            bool(tok.flags & mf.TOKF_IGNORE_MERGES) == (pre == "llama-bpe"), (pre, tok.flags)
        assert bool(tok.flags & mf.TOKF_ADD_BOS) == (pre == "llama-bpe"), (pre, tok.flags)


@case
def chat_template_and_tokenizer_from_elsewhere():
    """tokenizer.chat_template is kept for chat mode; a model file without tokenizer.ggml.* takes
    --tokenizer, and without it is refused naming what to pass."""
    c = mf.complete_config(P["llama_gqa"])
    write_family_gguf(tmp("chat.gguf"), "llama", c, random_models.random_tensors(c, seed=3))
    with gguf.GGUFFile(tmp("chat.gguf")) as f:
        meta = {k: (v, f.metadata_types[k]) for k, v in f.metadata.items() if not k.startswith("tokenizer.")}
        tensors = {k: ("F32", f.dequantize(t)) for k, t in f.tensors.items()}
    template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    gguf_write.write_gguf(tmp("chat2.gguf"), dict(meta, **{"tokenizer.chat_template": template}), tensors)
    assert gguf_model.chat_template(tmp("chat2.gguf")) == template
    assert gguf_model.chat_template(tmp("chat.gguf")) is None
    refused([tmp("chat2.gguf"), tmp("o.bin")], "carries no vocabulary", "--tokenizer")
    (_, own, _), _ = converted(tmp("chat.gguf"), "chat.bin")
    (_, tok, _), _ = converted(tmp("chat2.gguf"), "chat2.bin", "--tokenizer", tmp("chat.gguf"))
    assert tok == own, (tok[1:], own[1:])
    # a template of no known family never fails a conversion, --tokenizer X.gguf included: kept as
    # text with family 0 and one note
    with gguf.GGUFFile(tmp("chat.gguf")) as f:
        full = {k: (v, f.metadata_types[k]) for k, v in f.metadata.items()}
    gguf_write.write_gguf(tmp("chat3.gguf"), dict(full, **{"tokenizer.chat_template": template}), tensors)
    for args in (["chat3.gguf", "chat3.bin"], ["chat2.gguf", "chat4.bin", "--tokenizer", tmp("chat3.gguf")]):
        _, err = converted(tmp(args[0]), *args[1:])
        notes = [ln for ln in err.splitlines() if "chat template" in ln and "note" in ln]
        assert len(notes) == 1 and "is of no family this build formats" in notes[0] and \
            "--chat-template NAME" in notes[0], err
        assert chat_template.parse_section(mf.read_chat_section(tmp(args[1])), c["vocab_size"]) == \
            (None, [], "", template), args


# ---- mixtures of experts, written as llama.cpp's converter writes their Hugging Face directories ----

# name -> (published config.json, general.architecture, changes to the cut-down config)
MOE_FAMILIES = {"qwen3moe": (families.QWEN3_30B_A3B, "qwen3moe", {}),
                "qwen2moe": (families.QWEN1_5_MOE_A2_7B, "qwen2moe", dict(shared_expert_intermediate_size=48)),
                "mixtral": (families.MIXTRAL_8X7B, "llama", {}),
                "olmoe": (families.OLMOE_1B_7B_0924, "olmoe", {})}
# Hugging Face's names in a layer (model.layers.N.) -> llama.cpp's (blk.N.), as gguf-py's tensor_mapping.py has them
MOE_GGUF_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                  "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
                  "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
                  "mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp",
                  "mlp.shared_expert_gate": "ffn_gate_inp_shexp", "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
                  "mlp.shared_expert.up_proj": "ffn_up_shexp", "mlp.shared_expert.down_proj": "ffn_down_shexp"}
# an expert's matrix (mlp.experts.E.gate_proj, block_sparse_moe.experts.E.w1) -> the merged tensor holding it
MOE_MERGED = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps",
              "w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}


def moe_hf_dir(name, seed, **more):
    """(directory, config.json, weights) of family name's published config cut to 2 layers of 4
    experts (top 2) of 32, dim 64, a vocabulary of 512 (a llama2.c tokenizer.bin); more: further
    changes."""
    published, _, changes = MOE_FAMILIES[name]
    conf = families.moe_config(published, **{**dict(experts=4, hidden_size=64, heads=2, kv_heads=1, width=32,
                                                    vocab_size=512, max_position_embeddings=256), **changes, **more})
    w = families.family_weights(conf, seed)
    d = tmp("moe_hf_" + name)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "config.json"), "w").write(json.dumps(conf))
    fake_hf.write_hf_weights(d, w)
    random_models.write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"), random_models.default_vocab(512)[0])
    return d, conf, w


def llamacpp_permute(w, n_heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: Hugging Face's half-split RoPE rows interleaved."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def moe_gguf(path, name, conf, w, wtype="F32", shexp_1d=False, gates="F32"):
    """The Hugging Face model (conf, w) as llama.cpp's converter writes it: each layer's experts
    merged into one [experts, rows, cols] tensor per matrix, Mixtral as llama with expert_count
    (q/k rows permuted), the keys its set_gguf_parameters writes; matrices in wtype, norms
    float32, routers and the shared expert's gate in gates (shexp_1d: that gate [d], as
    llama.cpp's loader declares it, rather than the converter's [1, d])."""
    _, arch, _ = MOE_FAMILIES[name]
    d, H, KV = conf["hidden_size"], conf["num_attention_heads"], conf["num_key_value_heads"]
    a = arch + "."
    meta = {"general.architecture": arch, a + "context_length": conf["max_position_embeddings"],
            a + "embedding_length": d, a + "feed_forward_length": conf["intermediate_size"],
            a + "block_count": conf["num_hidden_layers"], a + "attention.head_count": H,
            a + "attention.head_count_kv": KV, a + "rope.freq_base": float(conf["rope_theta"]),
            a + "attention.layer_norm_rms_epsilon": float(conf["rms_norm_eps"]),
            a + "expert_count": conf.get("num_experts", conf.get("num_local_experts")),
            a + "expert_used_count": conf["num_experts_per_tok"], **spm_tokenizer(512)}
    if "head_dim" in conf:
        meta[a + "attention.key_length"] = meta[a + "attention.value_length"] = conf["head_dim"]
    if "moe_intermediate_size" in conf:
        meta[a + "expert_feed_forward_length"] = conf["moe_intermediate_size"]
    if "shared_expert_intermediate_size" in conf:
        meta[a + "expert_shared_feed_forward_length"] = conf["shared_expert_intermediate_size"]
    out, experts = {}, {}
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    for k, v in w.items():
        if k in top:
            out[top[k]] = v
            continue
        _, _, i, rest = k.split(".", 3)
        stem, kind = rest.rsplit(".", 1)
        parts = stem.split(".")
        if "experts" in parts:
            experts.setdefault((i, MOE_MERGED[parts[-1]]), {})[int(parts[-2])] = v
            continue
        if arch == "llama" and stem in ("self_attn.q_proj", "self_attn.k_proj"):
            v = llamacpp_permute(v, H if stem == "self_attn.q_proj" else KV)
        if stem == "mlp.shared_expert_gate" and shexp_1d:
            v = v.reshape(-1)
        out["blk.%s.%s.%s" % (i, MOE_GGUF_NAMES[stem], kind)] = v
    for (i, merged), by_expert in experts.items():
        out["blk.%s.%s.weight" % (i, merged)] = np.stack([by_expert[e] for e in sorted(by_expert)])
    kept_f32, gate = ("token_embd.weight", "output.weight"), ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight")
    gguf_write.write_gguf(path, meta, {k: (gates if v.ndim >= 2 and k.endswith(gate) else
                                           wtype if v.ndim >= 2 and not k.endswith(kept_f32) else "F32", v)
                                       for k, v in out.items()})


def expert_blocks(path, name):
    """A tensor's bytes as our matrix holds them, uint8 [rows, row bytes]: a merged expert tensor's
    as the stacked matrix, experts x rows of them."""
    with gguf.GGUFFile(path) as f:
        t = f.tensors[name]
        return np.array(f.raw(t)).reshape(int(np.prod(t.shape[:-1])), -1)


@case
def moe_gguf_f32_converts_as_its_hf_directory():
    """Each family's GGUF (Qwen3-MoE, Qwen2-MoE with its shared expert, Mixtral as llama with
    expert_count), written in float32 from a Hugging Face directory as llama.cpp's converter
    writes it, converts to the model file that directory converts to: every config field and
    every tensor equal (the merged experts stacked as the directory's experts are, the router
    and the shared expert's gate as they are); ./run's logits the same; the shared expert's
    gate read alike as [1, d] or [d]."""
    build("run")
    prompt = "Once upon a time"
    for n, name in enumerate(MOE_FAMILIES):
        d, conf, w = moe_hf_dir(name, 90 + n)
        for shexp_1d in (False, True) if name == "qwen2moe" else (False,):
            moe_gguf(tmp("moe_%s.gguf" % name), name, conf, w, shexp_1d=shexp_1d)
            # the GGUF's vocabulary for both, so that ./run reads the same tokens
            (want, _, t0), _ = converted(d, "moe_hf_%s.bin" % name, "--tokenizer", tmp("moe_%s.gguf" % name),
                                         "--force")
            (got, _, t), _ = converted(tmp("moe_%s.gguf" % name), "moe_gguf_%s.bin" % name, "--force")
            assert got["n_experts"] == 4 and got["n_experts_used"] == 2, got
            for k in mf.CONFIG_FIELDS:
                assert got[k] == want[k], "%s: %s %s, from Hugging Face %s" % (name, k, got[k], want[k])
            assert set(t) == set(t0), (name, set(t) ^ set(t0))
            for k in t0:
                assert np.array_equal(t[k], t0[k]), (name, k)
            _, a = c_logits(tmp("moe_gguf_%s.bin" % name), prompt)
            _, b = c_logits(tmp("moe_hf_%s.bin" % name), prompt)
            assert np.array_equal(a, b), name
        shutil.rmtree(d)


@case
def moe_gguf_quantised_gates_convert_to_float32():
    """A Qwen2-MoE GGUF whose routers and [1, d] shared-expert gates are quantised (llama-quantize
    takes any 2-d tensor but the router) converts: both held as float32, equal to the GGUF's
    dequantised values, and the note names only the matrices' types. Found by a mutation run:
    the gate's reshape met a quantised tensor's lazy rows."""
    build("run")
    d, conf, w = moe_hf_dir("qwen2moe", 97)
    shutil.rmtree(d)
    for ty in ("Q8_0", "Q4_0"):
        src = tmp("moe_gates_%s.gguf" % ty)
        moe_gguf(src, "qwen2moe", conf, w, gates=ty)
        (cfg, _, t), note = converted(src, "moe_gates_%s.bin" % ty, "--force")
        assert cfg["weight_type"] == storage.WEIGHTS_F32 and "float32 weights" in note, note
        with gguf.GGUFFile(src) as f:
            for i in range(conf["num_hidden_layers"]):
                for ours, theirs in (("router", "ffn_gate_inp"), ("shared_gate", "ffn_gate_inp_shexp")):
                    want = np.asarray(f.dequantize(f.tensors["blk.%d.%s.weight" % (i, theirs)])).reshape(-1)
                    got = np.asarray(t["layers.%d.%s" % (i, ours)]).reshape(-1)
                    assert np.array_equal(got, want), (ty, i, ours)
        _, logits = c_logits(tmp("moe_gates_%s.bin" % ty), "Once upon a time")
        assert np.isfinite(logits).all(), ty


# block types our quantiser writes whose blocks rows of the cut-down shapes divide, and the dims that need
MOE_BLOCK_TYPES = [("Q8_0", {}), ("Q4_0", {}), ("Q4_K", dict(hidden_size=256, width=256))]


@case
def moe_gguf_blocks_kept_as_they_are():
    """A Qwen3-MoE GGUF whose matrices, merged experts included, are Q8_0, Q4_0 or Q4_K (quantised
    by tools/attn/quantize.py as llama-quantize does) converts keeping each matrix in its type,
    the experts' blocks byte for byte, one expert after another; ./run's logits are within
    LOGITS_TOLERANCE of --weights f32's at every position, and its greedy text the same;
    --weights q8_0 maps Q8_0 and Q4_0 experts exactly. A Qwen2-MoE one's shared expert keeps
    its blocks too."""
    build("run")
    prompt = "Once upon a time, there was a little girl"
    for name, ty, more in [("qwen3moe", ty, more) for ty, more in MOE_BLOCK_TYPES] + [
            ("qwen2moe", "Q8_0", dict(shared_expert_intermediate_size=64))]:
        d, conf, w = moe_hf_dir(name, 95, **more)
        shutil.rmtree(d)
        src = tmp("moe_%s_%s.gguf" % (name, ty))
        moe_gguf(src, name, conf, w, ty, shexp_1d=True)
        (cfg, _, _), note = converted(src, "moe_%s_%s.bin" % (name, ty))
        assert "kept bit for bit" in note, note
        raw = mf.read_model(tmp("moe_%s_%s.bin" % (name, ty)), dequantize=False)[2]
        for i in range(conf["num_hidden_layers"]):
            held = [("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps")]
            held += [("shared_w1", "ffn_gate_shexp"), ("shared_w3", "ffn_up_shexp"),
                     ("shared_w2", "ffn_down_shexp")] if name == "qwen2moe" else []
            for ours, theirs in held:
                k = "layers.%d.%s" % (i, ours)
                assert cfg["matrix_types"][k] == ty, (k, cfg["matrix_types"][k])
                want = expert_blocks(src, "blk.%d.%s.weight" % (i, theirs))
                assert np.array_equal(np.asarray(raw[k]).view(np.uint8).reshape(want.shape), want), (name, ty, k)
        (_, _, exact), _ = converted(src, "moe_%s_%s_f32.bin" % (name, ty), "--weights", "f32")
        if ty in gguf_model.EXACT_Q8:  # --weights q8_0 maps these experts' blocks exactly too
            (_, _, t), note = converted(src, "moe_%s_%s_q8.bin" % (name, ty), "--weights", "q8_0")
            assert "%s mapped exactly" % ty in note, note
            for k in (k for k in t if k.split(".")[-1] in ("w1", "w3", "w2")):
                assert np.array_equal(t[k], exact[k]), (name, ty, k)
        _, a = c_logits(tmp("moe_%s_%s.bin" % (name, ty)), prompt)
        _, b = c_logits(tmp("moe_%s_%s_f32.bin" % (name, ty)), prompt)
        rel = float(np.abs(a - b).max() / np.abs(b).max())
        assert rel < LOGITS_TOLERANCE, (name, ty, rel)
        args = ["-i", "Once upon a time", "-t", "0", "-n", "40"]
        assert run_text(tmp("moe_%s_%s.bin" % (name, ty)), *args) == \
            run_text(tmp("moe_%s_%s_f32.bin" % (name, ty)), *args), (name, ty)
        print("%s %s: logits within %.1e of --weights f32's" % (name, ty, rel))


@case
def moe_gguf_refusals_name_keys_and_tensors():
    """What a MoE GGUF holds that this build would compute otherwise is refused in one line naming
    the key or tensor: llama.cpp's keys of other mixtures (sigmoid gating, scaled weights,
    renormalising where the family's loader does not), a merged tensor of the wrong number of
    experts or shape, experts in a family without them, an expert count past the format's limit."""
    d, conf, w = moe_hf_dir("qwen3moe", 97)
    shutil.rmtree(d)
    moe_gguf(tmp("moe_ok.gguf"), "qwen3moe", conf, w)
    meta, tensors = gguf_parts(tmp("moe_ok.gguf"))
    exps = tensors["blk.1.ffn_up_exps.weight"][1]
    cases = [
        (dict(meta={"qwen3moe.expert_gating_func": 2}), "metadata qwen3moe.expert_gating_func 2 is not supported"),
        (dict(meta={"qwen3moe.expert_weights_scale": 2.5}), "metadata qwen3moe.expert_weights_scale 2.5"),
        (dict(meta={"qwen3moe.expert_weights_norm": False}), "metadata qwen3moe.expert_weights_norm False"),
        (dict(meta={"qwen3moe.expert_shared_count": 2}), "metadata qwen3moe.expert_shared_count 2"),
        (dict(tensors={"blk.1.ffn_up_exps.weight": exps[:3]}),
         "tensor blk.1.ffn_up_exps.weight has shape (3, 32, 64), expected 4 experts of [rows, cols] from "
         "qwen3moe.expert_count 4"),
        (dict(tensors={"blk.1.ffn_up_exps.weight": exps.reshape(4 * 32, 64)}),
         "tensor blk.1.ffn_up_exps.weight has shape (128, 64), expected 4 experts"),
        (dict(tensors={"blk.1.ffn_up_exps.weight": exps[:, :16]}),
         "blk.1.ffn_up_exps.weight's expert 0 has shape (16, 64), expected (32, 64) from "
         "qwen3moe.expert_feed_forward_length 32, qwen3moe.embedding_length 64"),
        (dict(meta={"qwen3moe.expert_count": 100000}), "metadata qwen3moe.expert_count 100000 exceeds this build's "
         "limit 1024"),
        (dict(meta={"qwen3moe.expert_used_count": 5}), "qwen3moe.expert_used_count 5 exceeds qwen3moe.expert_count 4"),
        (dict(drop=["qwen3moe.expert_count"]), "metadata lacks qwen3moe.expert_count"),
        (dict(meta={"general.architecture": "qwen3", **{"qwen3" + k[8:]: v[0] for k, v in meta.items()
                                                        if k.startswith("qwen3moe.")}}),
         "qwen3.expert_count 4: mixture-of-experts models of general.architecture qwen3 are not supported"),
        (dict(meta={"general.architecture": "dbrx"}), "general.architecture 'dbrx' is not supported"),
    ]
    for i, (change, msg) in enumerate(cases):
        m = {k: v for k, v in meta.items() if k not in change.get("drop", ())}
        m.update((k, (v, None)) for k, v in change.get("meta", {}).items())
        t = dict(tensors, **{k: ("F32", v) for k, v in change.get("tensors", {}).items()})
        gguf_write.write_gguf(tmp("moe_bad%d.gguf" % i), m, t)
        rc, err = conv([tmp("moe_bad%d.gguf" % i), tmp("o.bin")])
        assert rc == 1 and len(err.strip().split("\n")) == 1 and msg in err, "case %d: exit %d %r" % (i, rc, err)


# ---- refusals ----

@case
def bad_inputs_refused_by_name():
    c = mf.complete_config(WIDE)
    t = random_models.random_tensors(c, seed=1)
    good = tmp("good.gguf")
    write_family_gguf(good, "llama", c, t)
    with gguf.GGUFFile(good) as f:
        meta = dict(f.metadata)
        tensors = {k: ("F32", f.dequantize(v)) for k, v in f.tensors.items()}

    def variant(name, meta_change=None, drop=(), tensors_change=None):
        m = dict(meta, **(meta_change or {}))
        for k in drop:
            del m[k]
        gguf_write.write_gguf(tmp(name), m, dict(tensors, **(tensors_change or {})))
        return tmp(name)
    refused([variant("arch.gguf", {"general.architecture": "mamba"}), tmp("o.bin")], "general.architecture 'mamba'")
    refused([variant("nokey.gguf", drop=["llama.block_count"]), tmp("o.bin")], "llama.block_count")
    refused([variant("pre.gguf", {"tokenizer.ggml.pre": "deepseek-llm"}), tmp("o.bin")], "tokenizer.ggml.pre",
            "deepseek-llm")
    refused([variant("tokmodel.gguf", {"tokenizer.ggml.model": "bert"}), tmp("o.bin")], "tokenizer.ggml.model 'bert'")
    refused([variant("extra.gguf", tensors_change={"blk.0.ffn_gate_exps.weight": ("F32", np.zeros((4, 256)))}),
             tmp("o.bin")], "blk.0.ffn_gate_exps.weight")
    refused([variant("scaling.gguf", {"llama.rope.scaling.type": "yarn"}), tmp("o.bin")], "rope.scaling.type 'yarn'")
    # a type the reader knows but the converter does not map: an IQ2_XXS tensor (raw blocks)
    with gguf_write.GGUFWriter(tmp("iq.gguf")) as w:
        for k, v in meta.items():
            w.add(k, v)
        for k, (ty, v) in tensors.items():
            w.add_tensor(k, v.shape, "IQ2_XXS" if k == "blk.0.attn_q.weight" else ty)
        for k, (ty, v) in tensors.items():
            if k == "blk.0.attn_q.weight":
                block, nbytes = gguf.BLOCK_SIZES[gguf.TYPE_IDS["IQ2_XXS"]]
                v = np.zeros(v.size // block * nbytes, np.uint8)
            w.write_tensor(k, v)
    rc, err = conv([tmp("iq.gguf"), tmp("o.bin")])
    assert rc == 1 and "IQ2_XXS" in err and len(err.strip().split("\n")) == 1, err



def gguf_parts(path):
    """(metadata with types, tensors as (type, float32 values)) of a GGUF file, to write changed."""
    with gguf.GGUFFile(path) as f:
        return ({k: (v, f.metadata_types[k]) for k, v in f.metadata.items()},
                {k: ("F32", f.dequantize(v)) for k, v in f.tensors.items()})


@case
def messages_name_gguf_keys_and_tensors():
    """A GGUF's errors name its own metadata keys and tensors, never the Hugging Face ones its
    reader maps them onto: each message whole."""
    c = mf.complete_config(dict(WIDE, n_layers=2, bias_flags=mf.BIAS_QKV))
    write_family_gguf(tmp("names.gguf"), "llama", c, random_models.random_tensors(c, seed=2))
    meta, tensors = gguf_parts(tmp("names.gguf"))
    big = tensors["blk.1.ffn_up.weight"][1].copy()
    big[3, 4] = 1e5
    cases = [
        (dict(meta={"llama.block_count": 3}), "llama.block_count 3, but the weights hold layers 0, 1"),
        (dict(meta={"llama.attention.head_count_kv": 3}),
         "llama.attention.head_count_kv 3 does not divide llama.attention.head_count 4"),
        (dict(tensors={"token_embd.weight": np.zeros((512, 128), np.float32)}),
         "token_embd.weight has shape (512, 128), expected (512, 256) from token_embd.weight's rows 512, "
         "llama.embedding_length 256"),
        (dict(tensors={"blk.0.attn_q.bias": np.zeros(5, np.float32)}),
         "blk.0.attn_q.bias has shape (5,), expected (256,) from llama.attention.head_count 4 x "
         "llama.attention.key_length 64"),
        (dict(drop=["blk.1.ffn_up.weight"]), "missing tensor blk.1.ffn_up.weight"),
        (dict(tensors={"blk.0.attn_k.weight": np.full((128, 256), np.inf, np.float32)}),
         "tensor blk.0.attn_k.weight has 32768 non-finite values (inf at [0, 0])"),
        (dict(tensors={"blk.1.ffn_up.weight": big}, flags=["--weights", "f16"]),
         "tensor blk.1.ffn_up.weight: a weight of magnitude 100000 does not fit float16"),
        (dict(meta={"llama.rope.dimension_count": 63}),
         "llama.rope.dimension_count gives RoPE 63 of a head's 64 dimensions; it needs an even number from 2 to 64"),
        (dict(meta={"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 0.5}),
         "llama.rope.scaling.factor 0.5 is below 1, which this build does not support"),
        (dict(meta={"general.architecture": "qwen2", **{"qwen2" + k[5:]: v[0] for k, v in meta.items()
                                                         if k.startswith("llama.")}},
              tensors={"blk.0.attn_output.bias": np.zeros(256, np.float32)}),
         "1 tensor convert.py would not use: blk.0.attn_output.bias"),
    ]
    for i, (change, msg) in enumerate(cases):
        m = dict(meta, **{k: (v, None) for k, v in change.get("meta", {}).items()})
        t = {k: v for k, v in tensors.items() if k not in change.get("drop", ())}
        t.update((k, ("F32", v)) for k, v in change.get("tensors", {}).items())
        gguf_write.write_gguf(tmp("names%d.gguf" % i), m, t)
        rc, err = conv([tmp("names%d.gguf" % i), tmp("o.bin")] + change.get("flags", []))
        want = "convert.py: %s: %s\n" % (tmp("names%d.gguf" % i), msg)
        assert rc == 1 and err == want, "case %d: exit %d\n%r, expected\n%r" % (i, rc, err, want)


@case
def rope_scaling_as_llama_cpp_reads_it():
    """llama.cpp scales RoPE linearly by rope.scaling.factor, or the older rope.scale_linear, when
    rope.scaling.type is linear or absent, and never when it is none: so does the converter."""
    c = mf.complete_config(P["llama_gqa"])
    write_family_gguf(tmp("rope.gguf"), "llama", c, random_models.random_tensors(c, seed=3))
    meta, tensors = gguf_parts(tmp("rope.gguf"))
    cases = (({"llama.rope.scaling.factor": 4.0}, (mf.ROPE_SCALING_LINEAR, 4.0)),
             ({"llama.rope.scale_linear": 2.0}, (mf.ROPE_SCALING_LINEAR, 2.0)),
             ({"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 1.0}, (0, 0.0)),
             ({"llama.rope.scaling.type": "none", "llama.rope.scaling.factor": 4.0}, (0, 0.0)))
    for i, (change, want) in enumerate(cases):
        gguf_write.write_gguf(tmp("rope2.gguf"), dict(meta, **{k: (v, None) for k, v in change.items()}), tensors)
        (cfg, _, _), _ = converted(tmp("rope2.gguf"), "rope2_%d.bin" % i)
        assert (cfg["rope_scaling"], cfg["rope_factor"]) == want, (change, cfg["rope_scaling"], cfg["rope_factor"])
    gguf_write.write_gguf(tmp("rope3.gguf"), dict(meta, **{"llama.rope.scale_linear": (0.5, None)}), tensors)
    refused([tmp("rope3.gguf"), tmp("o.bin")], "llama.rope.scale_linear 0.5 is below 1")
    gguf_write.write_gguf(tmp("rope4.gguf"), dict(meta, **{"llama.rope.scaling.attn_factor": (0.9, None)}), tensors)
    refused([tmp("rope4.gguf"), tmp("o.bin")], "llama.rope.scaling.attn_factor 0.9 is not supported by this build")


@case
def llama_biases_are_optional():
    """llama.cpp loads each bias of a llama block that is there and adds nothing for one that is
    not. So q/k/v biases without an output bias convert (bias_flags 1), and so does any mix: a
    block without attn_k.bias, or only blk.0.attn_output.bias and blk.1.ffn_up.bias (bias_flags
    2 | 4); a bias that is missing where its group is stored is zero. ./run's logits on each equal
    reference.py's on the weights written, at every position."""
    build("run")
    c = mf.complete_config(dict(WIDE, n_layers=2, bias_flags=mf.BIAS_QKV))
    t = random_models.random_tensors(c, seed=9)
    write_family_gguf(tmp("bias.gguf"), "llama", c, t)
    meta, tensors = gguf_parts(tmp("bias.gguf"))
    rng = np.random.default_rng(4)
    bo, b3 = rng.standard_normal(256).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    no_k = dict(t, **{"layers.1.bk": np.zeros(128, np.float32)})
    o_ffn = {k: v for k, v in t.items() if k.split(".")[-1] not in ("bq", "bk", "bv")}
    o_ffn.update({"layers.%d.%s" % (i, k): np.zeros(n, np.float32) for i in range(2)
                  for k, n in (("bo", 256), ("b1", 512), ("b3", 512), ("b2", 256))})
    o_ffn.update({"layers.0.bo": bo, "layers.1.b3": b3})
    qkv = [k for k in tensors if k.endswith((".attn_q.bias", ".attn_k.bias", ".attn_v.bias"))]
    variants = [("qkv", mf.BIAS_QKV, t, (), {}), ("no_k", mf.BIAS_QKV, no_k, ["blk.1.attn_k.bias"], {}),
                ("o_ffn", mf.BIAS_O | mf.BIAS_FFN, o_ffn, qkv, {"blk.0.attn_output.bias": bo, "blk.1.ffn_up.bias": b3})]
    for name, flags, want, drop, add in variants:
        path = tmp("bias_%s.gguf" % name)
        parts = {k: v for k, v in tensors.items() if k not in drop}
        parts.update((k, ("F32", v)) for k, v in add.items())
        gguf_write.write_gguf(path, meta, parts)
        (cfg, _, got), _ = converted(path, "bias_%s.bin" % name)
        assert cfg["bias_flags"] == flags, (name, cfg["bias_flags"])
        assert set(got) == set(want), (name, sorted(set(got) ^ set(want)))
        for k in want:
            assert np.array_equal(got[k], want[k]), (name, k)
        m = ref_model.Transformer(dict(c, bias_flags=flags))
        m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in want.items()})
        toks, lc = c_logits(tmp("bias_%s.bin" % name), "Once upon a time, a bias")
        lr = ref.logits(m.double().eval(), toks)
        assert np.abs(lc - lr).max() <= 1e-4 * np.abs(lr).max(), (name, np.abs(lc - lr).max())


def convert_damaged(n, seed):
    """convert.py on n damaged copies (tests/gguf_mutate.py's mutations) of llama.cpp's files and
    of two mixtures of experts (a shared expert, quantised experts and gates): each must end in
    exit status 1 and one line, never in a message for an exception no reader foresaw ("cannot
    convert (...)"), or succeed. Returns the failures' messages."""
    import gguf_mutate
    rnd, bad = random.Random(seed), []
    seeds = [open(shared(n), "rb").read() for n in ("stories260K-Q4_K_M", "stories260K-F32", "stories260K-Q6_K")]
    for name, wtype, gates in (("qwen2moe", "F32", "Q8_0"), ("qwen3moe", "Q4_0", "F32")):
        d, conf, w = moe_hf_dir(name, 99)
        shutil.rmtree(d)
        moe_gguf(tmp("damaged_seed.gguf"), name, conf, w, wtype, gates=gates)
        seeds.append(open(tmp("damaged_seed.gguf"), "rb").read())
    fields = [gguf_mutate.structural_fields(d) for d in seeds]

    def hang(*_):
        raise TimeoutError("no answer within 20 s")
    signal.signal(signal.SIGALRM, hang)
    for i in range(n):
        k = rnd.randrange(len(seeds))
        with open(tmp("damaged.gguf"), "wb") as f:
            f.write(gguf_mutate.mutate(seeds[k], *fields[k], rnd))
        signal.alarm(20)
        try:
            rc, err = conv([tmp("damaged.gguf"), tmp("damaged.bin")])
        except BaseException as e:  # a hang, or what main let through
            rc, err = -1, repr(e)
        signal.alarm(0)
        lines = [ln for ln in err.strip().split("\n") if ": note: " not in ln]
        if rc not in (0, 1) or (rc == 1 and len(lines) != 1) or "cannot convert (" in err:
            bad.append("file %d: exit %s: %s" % (i, rc, err.strip()[:200]))
    return bad


@case
def damaged_files_end_in_one_line():
    """A short run (the reader's own harness, tests/gguf_mutate.py, runs the million); under an
    address-space limit, in a process of its own, so that a converter trusting a count fails
    here rather than taking the machine's memory."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))
    r = subprocess.run([sys.executable, __file__, "--damaged", "150", "7"], capture_output=True, text=True,
                       preexec_fn=limit, timeout=600)
    assert r.returncode == 0 and r.stdout.startswith("150 damaged files"), r.stdout[-2000:] + r.stderr[-2000:]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--damaged"]:
        failures = convert_damaged(int(sys.argv[2]), int(sys.argv[3]))
        shutil.rmtree(TMP, ignore_errors=True)
        print("%s damaged files, %d failures" % (sys.argv[2], len(failures)) + "".join("\n" + f for f in failures))
        raise SystemExit(1 if failures else 0)
    torch.set_num_threads(1)
    raise SystemExit(case.main(TMP))
