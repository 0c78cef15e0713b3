"""tools/tokenizer_blob.py: blobs from llama2.c, GPT-2 and Hugging Face vocabulary files, checked
by reading the files independently and by encoding with tokenizer.c (through tests/bin/tok_cli).

Run from the repository root: /usr/bin/python3 tests/test_tokenizer_blob.py [-k SUBSTRING]
"""
import json
import os
import random
import struct
import subprocess
import sys

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
import tokenizer_blob as tb  # noqa: E402
from test_tokenizer_gpt2 import ensure_cli, ensure_pkg, CLI, PKG, TMP  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
case = pycase.Cases()


def parse_blob(blob):
    n, m, maxlen, res = struct.unpack_from("<IIII", blob, 0)
    off, pieces, scores = 16, [], []
    for _ in range(n):
        s, ln = struct.unpack_from("<fI", blob, off)
        pieces.append(blob[off + 8:off + 8 + ln])
        scores.append(s)
        off += 8 + ln
    merges = [struct.unpack_from("<II", blob, off + 8 * i) for i in range(m)]
    assert off + 8 * m == len(blob) and res == 0 and maxlen == max(map(len, pieces))
    return pieces, scores, merges


def read_llama2c(path):
    data = open(path, "rb").read()
    off, out = 4, []
    while off < len(data):
        s, ln = struct.unpack_from("<fi", data, off)
        out.append((data[off + 8:off + 8 + ln], s))
        off += 8 + ln
    return out


def encode(tok, texts):
    blob, kind, flags, bos, eos = tok
    path = os.path.join(TMP, "blob_test.blob")
    with open(path, "wb") as f:
        f.write(blob)
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    out = subprocess.run([CLI, path, str(kind), str(flags), str(bos), str(eos)], input=lines.encode(),
                         check=True, capture_output=True).stdout.decode().split("\n")[:-1]
    return [[int(x) for x in ln.split("\t")[0].split()] for ln in out]


def expect_error(f, *words):
    try:
        f()
    except ValueError as e:
        msg = str(e)
        assert "\n" not in msg and all(w in msg for w in words), "error %r lacks %r" % (msg, words)
        return
    raise AssertionError("no ValueError (wanted %r)" % (words,))


def llama_cases():
    with open(os.path.join(SHARED, "expected", "tokenizer_bin_encode_cases.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


@case
def llama2c_tokenizer_bin():
    for name, V in (("tokenizer.bin", 32000), ("tok512.bin", 512)):
        path = os.path.join(SHARED, "models", name)
        blob, kind, flags, bos, eos = tb.from_llama2c(path, V)
        pieces, scores, merges = parse_blob(blob)
        assert list(zip(pieces, scores)) == read_llama2c(path) and not merges
        assert (kind, flags, bos, eos) == (0, 7, 1, 2)
    tok = tb.from_llama2c(os.path.join(SHARED, "models", "tokenizer.bin"))
    cases = llama_cases()
    got = encode(tok, [c["prompt"] for c in cases])
    for c, g in zip(cases, got):
        assert [1] + g == c["expected_tokens"], c["prompt"]
    expect_error(lambda: tb.from_llama2c(os.path.join(SHARED, "models", "tokenizer.bin"), 512),
                 "tokenizer.bin", "32000", "512")
    data = open(os.path.join(SHARED, "models", "tok512.bin"), "rb").read()
    for cut in (2, 4, 10, 1000, len(data) - 1):
        p = os.path.join(TMP, "cut.bin")
        open(p, "wb").write(data[:cut])
        expect_error(lambda: tb.from_llama2c(p), "cut.bin")
    expect_error(lambda: tb.from_llama2c(os.path.join(TMP, "no such file")), "no such file", "cannot read")


@case
def gpt2_files():
    tok = tb.from_gpt2(os.path.join(PKG, "encoder.json"), os.path.join(PKG, "vocab.bpe"))
    pieces, _, merges = parse_blob(tok[0])
    assert tok[1:] == (1, 0, 50256, 50256)
    assert len(pieces) == 50257 and len(merges) == 50000
    assert pieces[220] == b" " and pieces[198] == b"\n" and pieces[50256] == b"<|endoftext|>"
    assert sorted(pieces[:256]) == [bytes([b]) for b in range(256)]
    assert pieces[merges[0][0]] + pieces[merges[0][1]] == b" t"  # vocab.bpe's first merge: "Ġ t"
    # Any bytes, invalid UTF-8 included, encode and decode back.
    rng = random.Random(7)
    texts = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(50)]
    path = os.path.join(TMP, "gpt2_blob_test.blob")
    open(path, "wb").write(tok[0])
    out = subprocess.run([CLI, path, "1", "0", "50256", "50256"], input="".join(t.hex() + "\n" for t in texts).encode(),
                         check=True, capture_output=True).stdout.decode().split("\n")[:-1]
    assert len(out) == len(texts)
    for t, ln in zip(texts, out):
        ids, dec = ln.split("\t")
        assert bytes.fromhex(dec) == t and all(0 <= int(x) < 50257 for x in ids.split()), ln[:80]
    bad = os.path.join(TMP, "bad_merges.txt")
    open(bad, "w").write("#version: 0.2\nĠ t\nzzzq xxxyq\n")
    expect_error(lambda: tb.from_gpt2(os.path.join(PKG, "encoder.json"), bad), "bad_merges.txt", "merge 1")
    badj = os.path.join(TMP, "bad_vocab.json")
    open(badj, "w").write('{"a": 0, "b": 5}')
    expect_error(lambda: tb.from_gpt2(badj, bad), "bad_vocab.json", "0..1")
    open(badj, "w").write('{"a": 0, ')
    expect_error(lambda: tb.from_gpt2(badj, bad), "bad_vocab.json", "JSON")


def write_json(name, obj):
    p = os.path.join(TMP, name)
    with open(p, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return p


@case
def hf_byte_level_equals_gpt2_files():
    enc = json.load(open(os.path.join(PKG, "encoder.json"), encoding="utf-8"))
    merges = [ln for ln in open(os.path.join(PKG, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if ln]
    j = {"added_tokens": [{"id": 50256, "content": "<|endoftext|>", "special": True}], "normalizer": None,
         "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
         "decoder": {"type": "ByteLevel"},
         "model": {"type": "BPE", "vocab": enc, "merges": merges}}
    p = write_json("gpt2_tokenizer.json", j)
    assert tb.from_hf_json(p) == tb.from_gpt2(os.path.join(PKG, "encoder.json"), os.path.join(PKG, "vocab.bpe"))
    j["model"]["merges"] = [m.split(" ") for m in merges]  # newer files store pairs as lists
    assert tb.from_hf_json(write_json("gpt2_tokenizer2.json", j))[0] == tb.from_hf_json(p)[0]
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "x"}, "behavior": "Isolated"},
        {"type": "ByteLevel", "use_regex": False}]}
    expect_error(lambda: tb.from_hf_json(write_json("split.json", j)), "split.json", "Split")
    expect_error(lambda: tb.from_hf_json(write_json("wp.json", {"model": {"type": "WordPiece", "vocab": {}}})),
                 "wp.json", "WordPiece")


@case
def hf_sentencepiece_style_equals_llama2c():
    """A Llama-style tokenizer.json made from tokenizer.bin: vocabulary with U+2581 for spaces,
    merges ordered by the merged piece's score, Prepend normalizer, <s> template."""
    entries = read_llama2c(os.path.join(SHARED, "models", "tokenizer.bin"))
    sp = [p.decode("utf-8").replace(" ", "\u2581") for p, _ in entries]
    sp[0:3] = ["<unk>", "<s>", "</s>"]
    vocab = {p: i for i, p in enumerate(sp)}
    merges = []
    for i in sorted(range(3, len(sp)), key=lambda i: -entries[i][1]):
        p = sp[i]
        if p.startswith("<0x") or len(p) < 2:
            continue
        merges += [p[:k] + " " + p[k:] for k in range(1, len(p)) if p[:k] in vocab and p[k:] in vocab]
    j = {"added_tokens": [{"id": i, "content": sp[i], "special": True} for i in range(3)],
         "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                            {"type": "Replace", "pattern": {"String": " "},
                                                             "content": "\u2581"}]},
         "pre_tokenizer": None,
         "post_processor": {"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}}]},
         "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
         "model": {"type": "BPE", "byte_fallback": True, "vocab": vocab, "merges": merges}}
    tok = tb.from_hf_json(write_json("llama_tokenizer.json", j))
    assert tok[1:] == (0, 3, 1, 2), tok[1:]
    cases = llama_cases()
    extra = ["naïve café 日本語 😀 x\n\n  y", "   ", "1234567890 -3.14"]
    got = encode(tok, [c["prompt"] for c in cases] + extra)
    for c, g in zip(cases, got):
        assert [1] + g == c["expected_tokens"], c["prompt"]
    ref = encode(tb.from_llama2c(os.path.join(SHARED, "models", "tokenizer.bin")), extra)
    assert got[len(cases):] == ref


def main():
    ensure_pkg()
    ensure_cli()
    os.makedirs(TMP, exist_ok=True)
    return case.run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
