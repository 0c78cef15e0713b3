"""Tokenizer blobs (docs/FORMAT.md) from the vocabulary files models come with.

Each reader returns a TokenizerSpec: the (blob, kind, flags, bos_id, eos_id) tuple that
modelfile writes as a model's tokenizer, with .n_pieces and .notes (what was left out, one line
each, for the caller to show). Each raises ValueError naming the file and the problem:
  from_llama2c(path, vocab_size=None)   llama2.c tokenizer.bin
  from_gpt2(vocab_json, merges_txt)     GPT-2 vocab.json/encoder.json + merges.txt/vocab.bpe: GPT-2's
                                        own encoder, which knows no added tokens
  from_hf_dir(path, vocab_size=None)    a Hugging Face tokenizer.json, or the directory holding it,
                                        with tokenizer_config.json, generation_config.json and
                                        config.json read from beside it when they are there
  from_hf_json(path)                    the same, the older name
  from_gguf(path, vocab_size=None)      a GGUF file's tokenizer.ggml.* (model llama or gpt2; the
                                        gpt2 kind through the tokenizer.json reader, with the
                                        pre-tokenizer its tokenizer.ggml.pre names)

from_hf_dir reproduces exactly these, and refuses anything else by name:
  byte-level BPE (kind 1): pre_tokenizer ByteLevel with its regex (GPT-2); Split with Llama 3's
    regex (or Qwen2's), Isolated, then ByteLevel without its regex; Digits(individual_digits)
    then ByteLevel with its regex (SmolLM2). normalizer none or NFC; model.ignore_merges.
  SentencePiece-style BPE (kind 0, byte_fallback): normalizer Prepend U+2581 then Replace ' ' by
    U+2581 (Llama 2, Mistral, TinyLlama: the dummy prefix), or the Replace alone with no
    pre_tokenizer or a Split at ' ' (Gemma 3: none). The merges go into the blob in rank order.
  BOS and EOS: tokenizer_config.json's bos_token and eos_token looked up in added_tokens (else the
    post_processor's template, generation_config.json, config.json); every id of
    generation_config.json's eos_token_id (else config.json's) stops generation; BOS is
    prepended as tokenizer_config.json's add_bos_token or the template says. Added tokens keep
    their special flag. An added token past the model's vocab_size is dropped (a note says so)
    if it is special, refused if ordinary text would produce it.
"""
import collections
import json
import os
import struct

from attn.modelfile import (parse_tokenizer, pack_tokenizer, TOK_SENTENCEPIECE, TOK_BYTE_BPE, TOKF_DUMMY_PREFIX,
                       TOKF_ADD_BOS, TOKF_BOS_STOPS, TOKF_NFC, TOKF_IGNORE_MERGES, TOKF_PRE_SHIFT, TOK_PRE_GPT2,
                       TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_DIGITS_GPT2)


NEVER_MERGED = -1e30  # score of pieces no merge makes: kind-0 encoding never forms them
TOKA_SPECIAL, TOKA_STOP = 1, 2  # tokenizer.h's added-token attributes

SP_SPACE = "\u2581"  # SentencePiece's space, which kind-0 pieces store as " "
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
SPLIT_REGEXES = {LLAMA3_REGEX: TOK_PRE_LLAMA3, QWEN2_REGEX: TOK_PRE_QWEN2}


class TokenizerSpec(collections.namedtuple("TokenizerSpec", "blob kind flags bos_id eos_id")):
    """A model file's tokenizer: the blob and the header fields that go with it."""

    def __new__(cls, blob, kind, flags, bos_id, eos_id, notes=()):
        spec = super().__new__(cls, blob, kind, flags, bos_id, eos_id)
        spec.notes = list(notes)
        return spec

    @property
    def n_pieces(self):
        return struct.unpack_from("<I", self.blob, 0)[0]


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


BYTE_OF_CHAR = {c: b for b, c in bytes_to_unicode().items()}
# the bytes no well-formed UTF-8 text holds: overlong leads 0xC0 and 0xC1, and 0xF5..0xFF
NOT_IN_UTF8 = frozenset([0xC0, 0xC1] + list(range(0xF5, 0x100)))


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
    return TokenizerSpec(pack_tokenizer(pieces, scores), TOK_SENTENCEPIECE, flags, 1 if len(pieces) > 1 else -1,
                         2 if len(pieces) > 2 else -1)


def read_llama2c_tokenizer(path, vocab_size):
    """A llama2.c tokenizer.bin as (blob, kind, flags, bos, eos), exactly vocab_size pieces."""
    tok = from_llama2c(path, vocab_size)
    n = len(parse_tokenizer(tok[0])[0])
    if n != vocab_size:  # llama2.c reads exactly vocab_size pieces: this is another model's vocabulary
        raise ValueError("%s: has %d pieces but the model's vocab_size is %d" % (path, n, vocab_size))
    return tok


def _byte_level(path, i, piece):
    """The bytes a byte-level piece's printable characters stand for."""
    try:
        return bytes(BYTE_OF_CHAR[c] for c in piece)
    except KeyError as e:
        _fail(path, "piece %d %r has the character %r, which is not in GPT-2's byte table" % (i, piece, e.args[0]))


def _merges(path, merges, ids):
    """A tokenizer.json's or merges.txt's merges ("a b" or [a, b]) as (left, right) ids, and the
    id each one makes."""
    pairs, made = [], []
    for r, m in enumerate(merges):
        try:
            a, b = m.split(" ") if isinstance(m, str) else m
            pairs.append((ids[a], ids[b]))
            made.append(ids[a + b])
        except (ValueError, TypeError):
            _fail(path, "merge %d %r is not two pieces" % (r, m))
        except KeyError:
            _fail(path, "merge %d %r refers to a piece not in the vocabulary" % (r, m))
    return pairs, made


def from_gpt2(vocab_path, merges_path):
    """GPT-2's vocab.json (encoder.json) and merges.txt (vocab.bpe): byte-level BPE, kind 1."""
    vocab = _load_json(vocab_path)
    if not isinstance(vocab, dict) or not vocab:
        _fail(vocab_path, "is not a JSON object of piece: id")
    pieces = _dense(vocab_path, vocab)
    lines = _read(merges_path, "r").split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    merges, _ = _merges(merges_path, [ln for ln in lines if ln.strip()], vocab)
    eot = vocab.get("<|endoftext|>", -1)
    raw = [p.encode("utf-8") if i == eot else _byte_level(vocab_path, i, p) for i, p in enumerate(pieces)]
    return TokenizerSpec(pack_tokenizer(raw, [0.0] * len(pieces), merges), TOK_BYTE_BPE, 0, eot, eot,
                         _missing_bytes(raw, "the vocabulary"))


# ---- Hugging Face tokenizer.json ----

def _type(node):
    return node.get("type") if isinstance(node, dict) else None


def _parts(node, key):
    """A Sequence's parts under key, or the node itself as the only part; [] for none."""
    if node is None:
        return []
    if not isinstance(node, dict):
        return [node]
    if node.get("type") == "Sequence":
        return list(node.get(key) or [])
    return [node]


def _describe(node):
    """How a refusal names a component: its type and what tells it apart."""
    if node is None:
        return "null"
    t = _type(node) or repr(node)
    if t == "Sequence":
        key = next((k for k in ("normalizers", "pretokenizers", "decoders", "processors") if k in node), None)
        return "Sequence[%s]" % ", ".join(_describe(p) for p in node.get(key) or [])
    pat = node.get("pattern")
    if isinstance(pat, dict) and "Regex" in pat:
        t = "%s with regex '%s'" % (t, pat["Regex"])
    elif isinstance(pat, dict) and "String" in pat:
        t = "%s of '%s'" % (t, pat["String"])
    if node.get("type") == "Split" and (node.get("behavior") != "Isolated" or node.get("invert")):
        t += " (behavior %s%s)" % (node.get("behavior"), ", inverted" if node.get("invert") else "")
    if node.get("type") == "ByteLevel" and node.get("use_regex") is False:
        t += " without its regex"
    return t


def _refuse(path, what, node):
    _fail(path, "%s %s is not one this build reproduces" % (what, _describe(node)))


def _is_split(node, regex=None, string=None, behavior="Isolated"):
    pat = node.get("pattern") or {}
    return (_type(node) == "Split" and node.get("behavior") == behavior and not node.get("invert")
            and (pat == {"Regex": regex} if regex is not None else pat == {"String": string}))


def _is_space_replace(node):
    return _type(node) == "Replace" and node.get("pattern") == {"String": " "} and node.get("content") == SP_SPACE


def _byte_level_pre(path, pre):
    """The TOK_PRE_* split of a byte-level pre_tokenizer."""
    parts = _parts(pre, "pretokenizers")
    for p in parts:
        if _type(p) == "ByteLevel" and p.get("add_prefix_space"):
            _fail(path, "pre_tokenizer ByteLevel with add_prefix_space true is not one this build reproduces")
    kinds = [_type(p) for p in parts]
    if kinds == ["ByteLevel"] and parts[0].get("use_regex", True):
        return TOK_PRE_GPT2
    if kinds == ["Split", "ByteLevel"] and not parts[1].get("use_regex", True):
        regex = (parts[0].get("pattern") or {}).get("Regex")
        if regex in SPLIT_REGEXES and _is_split(parts[0], regex=regex):
            return SPLIT_REGEXES[regex]
        _refuse(path, "pre_tokenizer", parts[0])  # the Split names what differs
    if kinds == ["Digits", "ByteLevel"] and parts[0].get("individual_digits") and parts[1].get("use_regex", True):
        return TOK_PRE_DIGITS_GPT2
    _refuse(path, "pre_tokenizer", pre)


def _check_decoder(path, dec, allowed):
    for d in _parts(dec, "decoders"):
        if not allowed(d):
            _refuse(path, "decoder", d)


def _sp_decoder_part(d):
    t = _type(d)
    if t == "Replace":
        return d.get("pattern") == {"String": SP_SPACE} and d.get("content") == " "
    if t == "Strip":  # Llama 2's: the dummy prefix's space, which decoding after BOS drops too
        return d.get("content") == " " and d.get("start", 0) <= 1 and not d.get("stop")
    return t in ("ByteFallback", "Fuse")


def _template_bos(path, post, pieces_by_name):
    """The token a TemplateProcessing post_processor puts before the text (None if none)."""
    bos = None
    for p in _parts(post, "processors"):
        t = _type(p)
        if t == "ByteLevel":
            continue  # it moves offsets only
        if t != "TemplateProcessing":
            _refuse(path, "post_processor", p)
        single = p.get("single") or []
        seq = [i for i, s in enumerate(single) if "Sequence" in s]
        if len(seq) != 1 or seq[0] != len(single) - 1 or seq[0] > 1:
            _fail(path, "post_processor TemplateProcessing %s is not one this build reproduces (only a BOS "
                  "before the text)" % json.dumps(single))
        if seq[0] == 1:
            name = (single[0].get("SpecialToken") or {}).get("id")
            ids = ((p.get("special_tokens") or {}).get(name) or {}).get("ids")
            bos = ids[0] if isinstance(ids, list) and len(ids) == 1 else pieces_by_name.get(name)
            if not isinstance(bos, int):
                _fail(path, "post_processor's template puts %r before the text, which is no token" % (name,))
    return bos


def _side_json(tok_path, name):
    """tokenizer_config.json and friends from beside tokenizer.json, or {} if absent."""
    p = os.path.join(os.path.dirname(tok_path), name)
    if not os.path.exists(p):
        return p, {}
    j = _load_json(p)
    if not isinstance(j, dict):
        _fail(p, "is not a JSON object")
    return p, j


def _config_vocab_size(config):
    v = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
    return v if isinstance(v, int) and v > 0 else None


def _ids(value):
    """An int or a list of ints (generation_config's eos_token_id) as a list."""
    if value is None:
        return []
    vals = value if isinstance(value, list) else [value]
    return vals if all(isinstance(v, int) and not isinstance(v, bool) for v in vals) else None


HfFiles = collections.namedtuple("HfFiles", "path j tcfg_path tcfg gen_path gen cfg_path cfg")


def from_hf_dir(path, vocab_size=None):
    """A Hugging Face tokenizer directory (or its tokenizer.json) as a TokenizerSpec for a model of
    vocab_size rows (default: config.json's vocab_size beside it, else the tokenizer's size)."""
    tok_path = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    j = _load_json(tok_path)
    files = HfFiles(tok_path, j, *_side_json(tok_path, "tokenizer_config.json"),
                    *_side_json(tok_path, "generation_config.json"), *_side_json(tok_path, "config.json"))
    if vocab_size is None:
        vocab_size = _config_vocab_size(files.cfg)
    try:
        return _from_hf(files, vocab_size)
    except (KeyError, TypeError, AttributeError) as e:
        _fail(tok_path, "unexpected tokenizer.json structure (%s: %s)" % (type(e).__name__, e))


def from_hf_json(path):
    """from_hf_dir under its older name: (blob, kind, flags, bos, eos)."""
    return from_hf_dir(path)


def _check_model(path, model):
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or not isinstance(model.get("vocab"), dict):
        _fail(path, "model.type %r is not one this build reproduces (only BPE)"
              % (model.get("type") if isinstance(model, dict) else None))


def _check_model_options(path, model, kind):
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            _fail(path, "model.%s %r is not one this build reproduces" % (key, model[key]))
    if model.get("dropout"):
        _fail(path, "model.dropout %r is not one this build reproduces (encoding would be random)"
              % model["dropout"])
    if kind == TOK_SENTENCEPIECE and model.get("ignore_merges"):
        _fail(path, "model.ignore_merges with SentencePiece-style BPE is not one this build reproduces")
    if kind == TOK_BYTE_BPE and model.get("byte_fallback"):
        _fail(path, "model.byte_fallback with byte-level BPE is not one this build reproduces")


def _kind_and_flags(path, j, model):
    """tok_kind and the tok_flags the normalizer and pre_tokenizer make."""
    norm, pre = j.get("normalizer"), j.get("pre_tokenizer")
    if "ByteLevel" in [_type(p) for p in _parts(pre, "pretokenizers")]:
        flags = _byte_level_pre(path, pre) << TOKF_PRE_SHIFT
        if norm is not None and norm != {"type": "NFC"}:
            _refuse(path, "normalizer", norm)
        flags |= TOKF_NFC if norm else 0
        flags |= TOKF_IGNORE_MERGES if model.get("ignore_merges") else 0
        _check_decoder(path, j.get("decoder"), lambda d: _type(d) == "ByteLevel")
        return TOK_BYTE_BPE, flags
    if not model.get("byte_fallback"):
        if pre is not None:
            _refuse(path, "pre_tokenizer", pre)
        _fail(path, "model.byte_fallback is false and there is no ByteLevel pre_tokenizer: neither byte-level nor "
              "SentencePiece-style BPE")
    # SentencePiece-style: spaces become U+2581 (after one is prepended, for the dummy prefix);
    # a Split at ' ' after that finds none.
    norms = _parts(norm, "normalizers")
    prepend = len(norms) == 2 and _type(norms[0]) == "Prepend" and norms[0].get("prepend") == SP_SPACE
    if not norms or not _is_space_replace(norms[-1]) or len(norms) != 1 + prepend:
        _refuse(path, "normalizer", norm)
    if pre is not None and not _is_split(pre, string=" ", behavior="MergedWithPrevious"):
        _refuse(path, "pre_tokenizer", pre)
    _check_decoder(path, j.get("decoder"), _sp_decoder_part)
    return TOK_SENTENCEPIECE, TOKF_DUMMY_PREFIX if prepend else 0


def _added_tokens(path, j, kind, norm):
    """tokenizer.json's added_tokens, each checked: {id: (content, special)}."""
    out = {}
    for i, t in enumerate(j.get("added_tokens") or []):
        tid, content = t.get("id"), t.get("content")
        if not isinstance(tid, int) or tid < 0 or not isinstance(content, str):
            _fail(path, "added_tokens[%d] has no integer id and string content" % i)
        for key in ("lstrip", "rstrip", "single_word"):
            if t.get(key):
                _fail(path, "added token %r has %s true, which this build does not reproduce" % (content, key))
        if t.get("normalized") and norm is not None:
            _fail(path, "added token %r is matched after the normalizer (normalized true), which this build "
                  "does not reproduce" % content)
        if kind == TOK_SENTENCEPIECE and " " in content:
            _fail(path, "added token %r holds a space, which SentencePiece-style pieces cannot tell from %s"
                  % (content, SP_SPACE))
        if tid in out and out[tid][0] != content:
            _fail(path, "added tokens %r and %r share id %d" % (out[tid][0], content, tid))
        if content:  # Hugging Face ignores an empty added token
            out[tid] = (content, bool(t.get("special")))
    return out


def _pieces(path, model, added, kind):
    """Every id's piece as bytes: the model's vocabulary, then the added tokens not in it."""
    vocab = model["vocab"]
    by_id = {}
    for p, i in vocab.items():
        if not isinstance(i, int) or i < 0 or i in by_id:
            _fail(path, "model.vocab: piece %r has id %r, not a fresh id" % (p, i))
        by_id[i] = p
    raw = {}
    for i, p in by_id.items():
        if kind == TOK_BYTE_BPE:
            raw[i] = _byte_level(path, i, p)
        elif " " in p:
            _fail(path, "piece %d %r holds a space, which SentencePiece-style pieces cannot tell from %s"
                  % (i, p, SP_SPACE))
        else:
            raw[i] = p.replace(SP_SPACE, " ").encode("utf-8")
    for i, (content, _) in added.items():
        if content in vocab and vocab[content] != i:
            _fail(path, "added token %r has id %d but model.vocab gives it %d" % (content, i, vocab[content]))
        own = content.replace(SP_SPACE, " ").encode("utf-8") if kind == TOK_SENTENCEPIECE \
            else content.encode("utf-8")
        if i in by_id and raw[i] != own:
            _fail(path, "added token %r (id %d) is also model.vocab's piece %r, which stands for other bytes"
                  % (content, i, by_id[i]))
        raw[i] = own
    return raw


def _named_id(path, tcfg_path, tcfg, key, added):
    """tokenizer_config.json's bos_token or eos_token (a string or an AddedToken object) as the id
    of the added token of that content; None for null."""
    v = tcfg[key]
    if isinstance(v, dict):
        v = v.get("content")
    if v is None:
        return None
    if not isinstance(v, str):
        _fail(tcfg_path, "%s is %r, not a token" % (key, tcfg[key]))
    ids = [i for i, (c, _) in added.items() if c == v]
    if not ids:
        _fail(tcfg_path, "%s %r is not one of %s's added_tokens" % (key, v, os.path.basename(path)))
    return ids[0]


def _specials(f, added, template_bos):
    """(bos, eos, stop ids, add_bos) from the configuration files."""
    path = f.path
    if "bos_token" in f.tcfg:
        bos = _named_id(path, f.tcfg_path, f.tcfg, "bos_token", added)
    elif template_bos is not None:
        bos = template_bos
    else:
        bos = next((c.get("bos_token_id") for c in (f.gen, f.cfg) if isinstance(c.get("bos_token_id"), int)), None)
    stop_src = f.gen_path if "eos_token_id" in f.gen else f.cfg_path
    stops = _ids((f.gen if "eos_token_id" in f.gen else f.cfg).get("eos_token_id"))
    if stops is None:
        _fail(stop_src, "eos_token_id is neither an id nor a list of ids")
    eos = _named_id(path, f.tcfg_path, f.tcfg, "eos_token", added) if "eos_token" in f.tcfg else \
        (stops[0] if stops else None)
    add_bos = f.tcfg.get("add_bos_token")
    if add_bos is None:
        add_bos = template_bos is not None
    elif template_bos is not None and add_bos and template_bos != bos:
        _fail(path, "post_processor puts token %d before the text, but tokenizer_config.json's bos_token is %r"
              % (template_bos, bos))
    if add_bos and bos is None:
        _fail(path, "BOS is to be prepended (add_bos_token or the post_processor's template) but there is no "
              "bos_token")
    if f.tcfg.get("add_eos_token"):
        _fail(f.tcfg_path, "add_eos_token true is not one this build reproduces")
    return bos, eos, stops, bool(add_bos), stop_src


def _fit(path, raw, added, n, needed):
    """Leaves out of raw the ids from n on: special added tokens that are not needed (BOS, EOS
    or a stop); anything else there is refused. Returns the notes saying what was left out."""
    notes = []
    for i in sorted(k for k in raw if k >= n):
        what = "%s %r (id %d)" % ("added token" if i in added else "piece", raw[i].decode("utf-8", "replace"), i)
        if i not in added or not added[i][1]:
            _fail(path, "%s is past the model's vocab_size %d, and text would produce it" % (what, n))
        if i in needed:
            _fail(path, "%s is past the model's vocab_size %d, and it is BOS, EOS or a stop" % (what, n))
        notes.append("%s: left out: special and past the model's vocab_size %d" % (what, n))
        del raw[i]
    return notes


def _check_specials(path, stop_src, raw, added, bos, eos, stops, n):
    for name, i in (("bos", bos), ("eos", eos)):
        if i is not None and i not in raw:
            _fail(path, "the %s id %d is not a token" % (name, i))
    for i in stops:
        if i not in raw:
            _fail(stop_src, "eos_token_id %d is not a token of the model's %d" % (i, n))
        if i not in added and i != eos:
            _fail(stop_src, "eos_token_id %d (%r) is an ordinary piece, not an added token; this build stops only "
                  "at added tokens and EOS" % (i, raw[i].decode("utf-8", "replace")))


def _dense_pieces(path, raw, n):
    """raw's pieces by id, padded with empty pieces to n; the ids must be exactly 0..len(raw)-1."""
    gap = next((i for i in range(max(raw) + 1) if i not in raw), None)
    if gap is not None:
        _fail(path, "token ids are not exactly 0..%d: id %d has no piece" % (max(raw), gap))
    return [raw[i] for i in range(len(raw))] + [b""] * (n - len(raw))


def _missing_bytes(pieces, where):
    """[a note] naming the bytes UTF-8 text can hold that a byte-level vocabulary has no piece for,
    else []. Such a vocabulary converts (StarCoder's lacks 0xF1..0xF3, which lead only code points
    Unicode has not assigned): tokenizer.c refuses a text needing one, naming the byte. The bytes
    UTF-8 never holds (0xC0, 0xC1, 0xF5..0xFF), which many vocabularies lack, go without a note."""
    have = set(pieces)
    lacking = [b for b in range(256) if bytes([b]) not in have and b not in NOT_IN_UTF8]
    if not lacking:
        return []
    return ["%s has no piece for the byte%s %s, which UTF-8 text can hold: a text that needs one is refused "
            "when it is encoded" % (where, "s" if len(lacking) > 1 else "", ", ".join("0x%02X" % b for b in lacking))]


def _sp_scores(made, n):
    """Scores that order merges as their ranks do (the first merge making a piece gives its
    score), for encoders that merge by score (tools/reference.py)."""
    scores = [NEVER_MERGED] * n
    for r in reversed(range(len(made))):
        scores[made[r]] = -float(r)
    return scores


def _from_hf(f, vocab_size):
    path, j = f.path, f.j
    if not isinstance(j, dict):
        _fail(path, "is not a JSON object")
    model = j.get("model")
    _check_model(path, model)
    kind, flags = _kind_and_flags(path, j, model)
    _check_model_options(path, model, kind)
    added = _added_tokens(path, j, kind, j.get("normalizer"))
    raw = _pieces(path, model, added, kind)
    template_bos = _template_bos(path, j.get("post_processor"), {c: i for i, (c, _) in added.items()})
    bos, eos, stops, add_bos, stop_src = _specials(f, added, template_bos)
    n = vocab_size if vocab_size is not None else max(raw) + 1
    notes = _fit(path, raw, added, n, {bos, eos, *stops})
    _check_specials(path, stop_src, raw, added, bos, eos, stops, n)
    pieces = _dense_pieces(path, raw, n)
    merges, made = _merges(path, model.get("merges") or [], model["vocab"])
    if kind == TOK_BYTE_BPE:
        scores = [0.0] * len(pieces)
        notes += _missing_bytes(pieces, "model.vocab")
    else:
        scores = _sp_scores(made, n)
        if flags & TOKF_DUMMY_PREFIX and SP_SPACE not in model["vocab"]:
            _fail(path, "prepends %s but has no %s piece" % (SP_SPACE, SP_SPACE))
    table = [(i, (TOKA_SPECIAL if added[i][1] else 0) | (TOKA_STOP if i in stops else 0))
             for i in sorted(added) if i < n]
    flags |= TOKF_ADD_BOS if add_bos else 0
    blob = pack_tokenizer(pieces, scores, merges, table)
    return TokenizerSpec(blob, kind, flags, -1 if bos is None else bos, -1 if eos is None else eos, notes)


# ---- GGUF (llama.cpp) tokenizer.ggml.* ----

# tokenizer.ggml.token_type: llama.cpp's token attributes
GGUF_NORMAL, GGUF_UNKNOWN, GGUF_CONTROL, GGUF_USER_DEFINED, GGUF_UNUSED, GGUF_BYTE = 1, 2, 3, 4, 5, 6
