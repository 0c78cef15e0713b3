"""Tokenizer blobs (docs/FORMAT.md) from the vocabulary files models come with.

Each reader returns (blob_bytes, tok_kind, tok_flags, bos_id, eos_id) and raises ValueError
naming the file and the problem:
  from_llama2c(path, vocab_size=None)   llama2.c tokenizer.bin
  from_gpt2(vocab_json, merges_txt)     GPT-2 vocab.json/encoder.json + merges.txt/vocab.bpe
  from_hf_json(path)                    Hugging Face tokenizer.json with a BPE model
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modelfile import (pack_tokenizer, TOK_SENTENCEPIECE, TOK_BYTE_BPE,  # noqa: E402
                       TOKF_DUMMY_PREFIX, TOKF_ADD_BOS, TOKF_BOS_STOPS)

NEVER_MERGED = -1e30  # score of pieces no merge makes: kind-0 encoding never forms them


def _fail(path, msg):
    raise ValueError("%s: %s" % (path, msg))


def _read(path, mode="rb"):
    try:
        with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            return f.read()
    except OSError as e:
        _fail(path, "cannot read (%s)" % (e.strerror or e))
    except UnicodeDecodeError as e:
        _fail(path, "not UTF-8 text (%s)" % e)


def _load_json(path):
    try:
        return json.loads(_read(path, "r"))
    except json.JSONDecodeError as e:
        _fail(path, "not valid JSON (%s)" % e)


def bytes_to_unicode():
    """GPT-2's table from bytes to the printable characters its vocabulary files spell them with."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _dense(path, vocab):
    """A {piece: id} map as a list indexed by id; the ids must be exactly 0..n-1."""
    n = len(vocab)
    pieces = [None] * n
    for p, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < n or pieces[i] is not None:
            _fail(path, "token ids are not exactly 0..%d (piece %r has id %r)" % (n - 1, p, i))
        pieces[i] = p
    return pieces


def from_llama2c(path, vocab_size=None):
    """llama2.c's tokenizer.bin: int max_token_length, then per piece float score, int length,
    bytes, to the end of the file. With vocab_size, more pieces than that is an error (fewer is
    left to the caller, which may pad)."""
    data = _read(path)
    if len(data) < 4:
        _fail(path, "%d bytes, too short for a llama2.c tokenizer.bin" % len(data))
    off, pieces, scores = 4, [], []
    while off < len(data):
        if len(data) - off < 8:
            _fail(path, "ends inside the header of piece %d" % len(pieces))
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        if n < 0 or n > len(data) - off:
            _fail(path, "piece %d has length %d, past the end of the file" % (len(pieces), n))
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    if not pieces:
        _fail(path, "has no pieces")
    if vocab_size is not None and len(pieces) > vocab_size:
        _fail(path, "has %d pieces, more than the model's vocab_size %d" % (len(pieces), vocab_size))
    # llama2.c looks the dummy prefix up as " "; a vocabulary without it cannot have one.
    flags = TOKF_ADD_BOS | TOKF_BOS_STOPS | (TOKF_DUMMY_PREFIX if b" " in pieces else 0)
    return (pack_tokenizer(pieces, scores), TOK_SENTENCEPIECE, flags, 1 if len(pieces) > 1 else -1,
            2 if len(pieces) > 2 else -1)


def _byte_level_pieces(path, pieces, special):
    dec = {c: b for b, c in bytes_to_unicode().items()}
    out = []
    for i, p in enumerate(pieces):
        if p in special:
            out.append(p.encode("utf-8"))
            continue
        try:
            out.append(bytes(dec[c] for c in p))
        except KeyError as e:
            _fail(path, "piece %d %r has the character %r, which is not in GPT-2's byte table" % (i, p, e.args[0]))
    return out


def _merge_ids(path, merges, ids):
    out = []
    for r, m in enumerate(merges):
        pair = m.split(" ") if isinstance(m, str) else m
        if len(pair) != 2:
            _fail(path, "merge %d %r is not two pieces" % (r, m))
        a, b = pair
        if a not in ids or b not in ids or a + b not in ids:
            _fail(path, "merge %d %r refers to a piece not in the vocabulary" % (r, m))
        out.append((ids[a], ids[b]))
    return out


def from_gpt2(vocab_path, merges_path):
    """GPT-2's vocab.json (encoder.json) and merges.txt (vocab.bpe): byte-level BPE, kind 1."""
    vocab = _load_json(vocab_path)
    if not isinstance(vocab, dict) or not vocab:
        _fail(vocab_path, "is not a JSON object of piece: id")
    pieces = _dense(vocab_path, vocab)
    lines = _read(merges_path, "r").split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    merges = [ln for ln in lines if ln.strip()]
    eot = vocab.get("<|endoftext|>", -1)
    special = {"<|endoftext|>"}
    return (pack_tokenizer(_byte_level_pieces(vocab_path, pieces, special), [0.0] * len(pieces),
                           _merge_ids(merges_path, merges, vocab)), TOK_BYTE_BPE, 0, eot, eot)


def _components(node):
    """Every component of a pre_tokenizer/normalizer/decoder, flattening Sequence."""
    if not node:
        return []
    if node.get("type") == "Sequence":
        out = []
        for key in ("pretokenizers", "normalizers", "decoders", "processors"):
            for n in node.get(key, []):
                out += _components(n)
        return out
    return [node]


def from_hf_json(path):
    """A Hugging Face tokenizer.json with a BPE model: byte-level (GPT-2 style) becomes kind 1;
    SentencePiece-style with byte fallback (Llama, Mistral) becomes kind 0 with each merged
    piece scored by the rank of the first merge that makes it (pieces no merge makes never
    merge). Kind 0 encodes the text as one sequence, as llama2.c does: an old-style Metaspace
    pre-tokenizer's split at spaces is not reproduced, which shows only on runs of spaces."""
    j = _load_json(path)
    try:
        return _from_hf(path, j)
    except (KeyError, TypeError, AttributeError) as e:
        _fail(path, "unexpected tokenizer.json structure (%s: %s)" % (type(e).__name__, e))


def _from_hf(path, j):
    model = j.get("model") if isinstance(j, dict) else None
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or "vocab" not in model:
        _fail(path, "model.type is %r; only BPE tokenizers are supported"
              % (model.get("type") if isinstance(model, dict) else None))
    vocab = dict(model["vocab"])
    added = j.get("added_tokens") or []
    for t in added:
        vocab.setdefault(t["content"], t["id"])
    pieces = _dense(path, vocab)
    merges = model.get("merges") or []
    special = {t["content"] for t in added if t.get("special")}
    pre = _components(j.get("pre_tokenizer"))
    norm = _components(j.get("normalizer"))
    dec = _components(j.get("decoder"))
    types = {c.get("type") for c in pre + norm + dec}

    def first(names):
        return next((vocab[n] for n in names if n in vocab), -1)

    if "ByteLevel" in types:
        for c in pre:
            if c.get("type") != "ByteLevel":
                _fail(path, "pre_tokenizer %s is not GPT-2's split; unsupported" % c.get("type"))
            if not c.get("use_regex", True):
                _fail(path, "ByteLevel pre_tokenizer without GPT-2's regex; unsupported")
            if c.get("add_prefix_space"):
                _fail(path, "ByteLevel add_prefix_space is true; unsupported")
        if norm:
            _fail(path, "a normalizer (%s) with byte-level BPE; unsupported" % norm[0].get("type"))
        blob = pack_tokenizer(_byte_level_pieces(path, pieces, special), [0.0] * len(pieces),
                              _merge_ids(path, merges, vocab))
        eos = first(["<|endoftext|>", "<|end_of_text|>", "</s>"])
        return blob, TOK_BYTE_BPE, 0, first(["<|endoftext|>", "<|begin_of_text|>", "<s>"]), eos

    metaspace = [c for c in pre if c.get("type") == "Metaspace"]
    prepend = any(c.get("type") == "Prepend" and c.get("prepend") == "\u2581" for c in norm) or any(
        c.get("add_prefix_space", c.get("prepend_scheme", "always") != "never") for c in metaspace)
    if not model.get("byte_fallback") and not metaspace and not prepend:
        _fail(path, "neither byte-level nor SentencePiece-style (byte_fallback / \u2581) BPE; unsupported")
    rank = {}
    for r, m in enumerate(merges):
        pair = m.split(" ") if isinstance(m, str) else m
        if len(pair) != 2 or pair[0] + pair[1] not in vocab:
            _fail(path, "merge %d %r makes a piece not in the vocabulary" % (r, m))
        rank.setdefault(pair[0] + pair[1], r)
    scores = [-float(rank[p]) if p in rank else NEVER_MERGED for p in pieces]
    raw = [p.encode("utf-8") if p in special else p.replace("\u2581", " ").encode("utf-8") for p in pieces]
    bos, eos = first(["<s>", "<|begin_of_text|>"]), first(["</s>", "<|end_of_text|>"])
    flags = TOKF_DUMMY_PREFIX if prepend else 0
    single = (j.get("post_processor") or {}).get("single") or []
    if bos >= 0 and single and "SpecialToken" in single[0] and single[0]["SpecialToken"].get("id") == pieces[bos]:
        flags |= TOKF_ADD_BOS
    if flags & TOKF_DUMMY_PREFIX and b" " not in raw:
        _fail(path, "prepends \u2581 but has no \u2581 piece")
    return pack_tokenizer(raw, scores), TOK_SENTENCEPIECE, flags, bos, eos
