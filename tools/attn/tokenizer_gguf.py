"""A GGUF file's tokenizer.ggml.* as a tokenizer blob (from_gguf): llama.cpp's SentencePiece
(model llama) and byte-level BPE (model gpt2) vocabularies, the rest of tokenizer_blob.py's readers."""
from attn.modelfile import pack_tokenizer, TOK_SENTENCEPIECE, TOKF_DUMMY_PREFIX, TOKF_ADD_BOS
from attn.tokenizer_blob import (GGUF_CONTROL, GGUF_NORMAL, GGUF_UNKNOWN, GGUF_USER_DEFINED, HfFiles, LLAMA3_REGEX,
                                 NEVER_MERGED, QWEN2_REGEX, SP_SPACE, TOKA_SPECIAL, TOKA_STOP, TokenizerSpec, _fail,
                                 _from_hf)


# tokenizer.ggml.pre of a gpt2-model vocabulary -> the pre_tokenizer (and normalizer, and
# model.ignore_merges) of the tokenizer.json llama.cpp's converter recognised it by
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_GGUF_PRE = {
    "gpt-2": (_BYTE_LEVEL, None, False),
    "llama-bpe": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": False},
        dict(_BYTE_LEVEL, use_regex=False)]}, None, True),
    "qwen2": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
        dict(_BYTE_LEVEL, use_regex=False)]}, {"type": "NFC"}, False),
}
_GGUF_PRE["smollm"] = _GGUF_PRE["starcoder"] = ({"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]}, None, False)


def _gguf_id(path, m, key, n):
    """tokenizer.ggml.KEY as a token id, None if absent (or llama.cpp's -1 for none)."""
    v = m.get("tokenizer.ggml." + key)
    if v is None or v in (-1, 0xFFFFFFFF):
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < n:
        _fail(path, "tokenizer.ggml.%s %r is not a token id of the %d" % (key, v, n))
    return v


def _gguf_list(path, m, key, n=None):
    v = m.get("tokenizer.ggml." + key)
    if v is None:
        _fail(path, "metadata lacks tokenizer.ggml.%s" % key)
    v = list(v)
    if n is not None and len(v) != n:
        _fail(path, "tokenizer.ggml.%s has %d entries for %d tokens" % (key, len(v), n))
    return v


def from_gguf(path, vocab_size=None, f=None):
    """A GGUF file's tokenizer.ggml.*: model llama (SentencePiece with byte fallback: pieces and
    their scores, kind 0, merging by score written as merges) or gpt2 (byte-level BPE with its merges,
    kind 1, its tokenizer.ggml.pre one of gpt-2, llama-bpe, qwen2, smollm, starcoder). Control
    and unknown tokens become special added tokens, user-defined ones ordinary added tokens;
    EOS and EOT stop generation. f: the file already open (tools/attn/gguf_file.py's GGUFFile)."""
    from attn import gguf_file as gguf
    own = f is None
    try:
        f = gguf.GGUFFile(path) if own else f
    except gguf.GGUFError as e:
        _fail(e.path, e.msg)
    try:
        m = f.metadata
        model = m.get("tokenizer.ggml.model")
        if model is None:
            _fail(path, "metadata lacks tokenizer.ggml.model: the file carries no tokenizer")
        if model not in ("llama", "gpt2"):
            _fail(path, "tokenizer.ggml.model %r is not one this build reproduces (llama, gpt2)" % (model,))
        tokens = _gguf_list(path, m, "tokens")
        n = len(tokens)
        if not n:
            _fail(path, "tokenizer.ggml.tokens is empty")
        types = _gguf_list(path, m, "token_type", n) if "tokenizer.ggml.token_type" in m else [GGUF_NORMAL] * n
        pre = m.get("tokenizer.ggml.pre", "default")
        ids = {k: _gguf_id(path, m, k + "_token_id", n) for k in ("bos", "eos", "eot", "padding")}
        if m.get("tokenizer.ggml.add_eos_token"):
            _fail(path, "tokenizer.ggml.add_eos_token true is not one this build reproduces")
        if model == "llama":
            if pre != "default":
                _fail(path, "tokenizer.ggml.pre %r with model llama is not one this build reproduces (default)" % pre)
            spec = _gguf_sentencepiece(path, m, tokens, types, ids, vocab_size)
        else:
            if pre not in _GGUF_PRE:
                _fail(path, "tokenizer.ggml.pre %r is not one this build reproduces (%s)" % (pre, ", ".join(_GGUF_PRE)))
            spec = _gguf_byte_level(path, m, tokens, types, ids, vocab_size, pre)
    finally:
        if own:
            f.close()
    return spec


def _gguf_added(types, tokens):
    """{id: (content, special)}: control and unknown tokens special, user-defined ones not."""
    return {i: (tokens[i], int(t) in (GGUF_CONTROL, GGUF_UNKNOWN)) for i, t in enumerate(types)
            if int(t) in (GGUF_CONTROL, GGUF_UNKNOWN, GGUF_USER_DEFINED)}


def _gguf_stops(ids):
    return [i for i in (ids["eos"], ids["eot"]) if i is not None]


def _gguf_byte_level(path, m, tokens, types, ids, vocab_size, pre):
    """Through the tokenizer.json reader: the tokenizer.json llama.cpp's converter read."""
    node, norm, ignore_merges = _GGUF_PRE[pre]
    added = _gguf_added(types, tokens)
    vocab = {t: i for i, t in enumerate(tokens) if i not in added}
    j = {"model": {"type": "BPE", "vocab": vocab, "merges": _gguf_list(path, m, "merges"),
                   "ignore_merges": ignore_merges},
         "pre_tokenizer": node, "normalizer": norm, "decoder": {"type": "ByteLevel"},
         "added_tokens": [{"id": i, "content": c, "special": s} for i, (c, s) in sorted(added.items())]}
    gen = {"eos_token_id": _gguf_stops(ids)}
    if ids["bos"] is not None:
        gen["bos_token_id"] = ids["bos"]
    # without the key llama.cpp adds BOS for llama-bpe only (llama-vocab.cpp's pre-type defaults)
    add_bos = bool(m.get("tokenizer.ggml.add_bos_token", pre == "llama-bpe"))
    files = HfFiles(path, j, path, {"add_bos_token": add_bos},
                    path, gen, path, {})
    return _from_hf(files, vocab_size)


def _score_merges(pieces, scores):
    """Merging by score as merges in rank order: every split of a mergeable piece into two
    pieces, the highest-scoring piece's first, so that the blob has merges and a U+2581 in the
    text is a space as llama.cpp and Hugging Face take it (tokenizer.h)."""
    ids = {}
    for i, p in enumerate(pieces):
        ids.setdefault(p, i)
    out = []
    for i, p in enumerate(pieces):
        if scores[i] == NEVER_MERGED or ids[p] != i:
            continue
        text = p.decode("utf-8", "surrogateescape")
        for k in range(1, len(text)):
            a = ids.get(text[:k].encode("utf-8", "surrogateescape"))
            b = ids.get(text[k:].encode("utf-8", "surrogateescape"))
            if a is not None and b is not None:
                out.append((-scores[i], i, a, b))
    out.sort()
    return [(a, b) for _, _, a, b in out]


def _gguf_sentencepiece(path, m, tokens, types, ids, vocab_size):
    """Kind 0: pieces merge by score as llama.cpp's SentencePiece tokenizer does (as merges);
    control, unknown, user-defined, unused and byte pieces never result from a merge, except
    user-defined ones holding spaces (below)."""
    scores = _gguf_list(path, m, "scores", len(tokens))
    added = _gguf_added(types, tokens)
    pieces, out_scores = [], []
    for i, (p, t, s) in enumerate(zip(tokens, types, scores)):
        spaced = int(t) == GGUF_USER_DEFINED and " " in p
        if " " in p and not spaced:
            _fail(path, "token %d %r holds a space, which SentencePiece-style pieces cannot tell from %s"
                  % (i, p, SP_SPACE))
        pieces.append(p.replace(SP_SPACE, " ").encode("utf-8"))
        # llama.cpp's converter wrote a user-defined token's U+2581 as spaces (Gemma 3's runs of
        # U+2581): as in the tokenizer.json it came from, it matches U+2581 and merges make it too
        out_scores.append(float(s) if int(t) == GGUF_NORMAL or spaced else NEVER_MERGED)
    n = vocab_size if vocab_size is not None else len(pieces)
    if len(pieces) > n:
        _fail(path, "has %d tokens, more than the model's vocab_size %d" % (len(pieces), n))
    stops = _gguf_stops(ids)
    for name in ("bos", "eos", "eot"):
        if name == "eot" and ids[name] is not None and ids[name] not in added and ids[name] != ids["eos"]:
            _fail(path, "tokenizer.ggml.eot_token_id %d is an ordinary piece; this build stops only at added "
                  "tokens and EOS" % ids[name])
    dummy = m.get("tokenizer.ggml.add_space_prefix", True)
    if dummy and b" " not in pieces:
        _fail(path, "prepends %s but has no %s piece" % (SP_SPACE, SP_SPACE))
    flags = (TOKF_DUMMY_PREFIX if dummy else 0) | (TOKF_ADD_BOS if m.get("tokenizer.ggml.add_bos_token", True)
                                                   and ids["bos"] is not None else 0)
    table = [(i, (TOKA_SPECIAL if special else 0) | (TOKA_STOP if i in stops else 0))
             for i, (_, special) in sorted(added.items())]
    blob = pack_tokenizer(pieces + [b""] * (n - len(pieces)), out_scores + [NEVER_MERGED] * (n - len(pieces)),
                          _score_merges(pieces, out_scores), table)
    return TokenizerSpec(blob, TOK_SENTENCEPIECE, flags, -1 if ids["bos"] is None else ids["bos"],
                         -1 if ids["eos"] is None else ids["eos"])
