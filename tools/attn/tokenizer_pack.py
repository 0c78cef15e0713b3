"""The model file's tokenizer blob (docs/FORMAT.md's Tokenizer blob) packed and parsed: pieces,
scores, merges and the added-token table."""
import struct

import numpy as np


def pack_tokenizer(pieces, scores, merges=(), added=()):
    """The blob of FORMAT.md from byte-string pieces, float scores, (left, right) merges in rank
    order and the added-token table's (id, attributes) pairs."""
    out = [struct.pack("<IIII", len(pieces), len(merges), max((len(p) for p in pieces), default=0), len(added))]
    for p, s in zip(pieces, scores):
        out.append(struct.pack("<fI", s, len(p)))
        out.append(bytes(p))
    if len(merges):
        out.append(np.asarray(merges, dtype="<u4").reshape(-1, 2).tobytes())
    if len(added):
        out.append(np.asarray(added, dtype="<u4").reshape(-1, 2).tobytes())
    return b"".join(out)


def parse_tokenizer(blob, with_added=False):
    """(pieces, scores, merges) from a blob, and its added-token table as a list of (id,
    attributes) after them if with_added; ValueError if it is malformed."""
    if len(blob) < 16:
        raise ValueError("tokenizer blob is %d bytes, shorter than its 16-byte header" % len(blob))
    n, m, maxlen, n_added = struct.unpack_from("<IIII", blob, 0)
    pieces, scores, off, longest = [], [], 16, 0
    for i in range(n):
        if off + 8 > len(blob):
            raise ValueError("tokenizer blob truncated in piece %d" % i)
        s, ln = struct.unpack_from("<fI", blob, off)
        off += 8
        if ln > len(blob) - off:
            raise ValueError("tokenizer piece %d length %d runs past the blob" % (i, ln))
        pieces.append(bytes(blob[off:off + ln]))
        scores.append(s)
        off += ln
        longest = max(longest, ln)
    if longest != maxlen:
        raise ValueError("tokenizer max_piece_len is %d but the longest piece has %d bytes" % (maxlen, longest))
    if len(blob) - off != 8 * (m + n_added):
        raise ValueError("tokenizer blob has %d bytes after the pieces, %d merges and %d added tokens need %d"
                         % (len(blob) - off, m, n_added, 8 * (m + n_added)))
    merges = np.frombuffer(blob, dtype="<u4", count=2 * m, offset=off).reshape(m, 2)
    if m and merges.max() >= n:
        raise ValueError("tokenizer merge refers to token %d of %d" % (merges.max(), n))
    table = np.frombuffer(blob, dtype="<u4", count=2 * n_added, offset=off + 8 * m).reshape(n_added, 2)
    added = [(int(i), int(a)) for i, a in table]
    ids = [i for i, _ in added]
    if any(i >= n for i in ids) or len(set(ids)) != len(ids):
        raise ValueError("tokenizer added-token ids are not distinct ids of the %d pieces" % n)
    return (pieces, scores, merges, added) if with_added else (pieces, scores, merges)


def resize_tokenizer(blob, vocab_size):
    """Pad a blob's pieces up to vocab_size with unused, unreachable empty pieces.

    Checkpoints often round the vocabulary up (nanoGPT: 50257 -> 50304); the format wants
    exactly one piece per row of the embedding."""
    pieces, scores, merges, added = parse_tokenizer(blob, with_added=True)
    if len(pieces) > vocab_size:
        raise ValueError("tokenizer has %d pieces, more than the model's vocab_size %d" % (len(pieces), vocab_size))
    extra = vocab_size - len(pieces)
    return pack_tokenizer(pieces + [b""] * extra, scores + [-1e30] * extra, merges, added)
