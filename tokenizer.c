// tokenizer.c: the tokenizer's entry point (see tokenizer.h and docs/TOKENIZER.md). It owns the
// blob: checking and copying one into a Tokenizer with its piece and merge tables (the added
// tokens' table is tokenizer/added.c's), reading llama2.c's tokenizer.bin, packing learned
// vocabularies; and the public calls over a Tokenizer: encode (the split at added tokens and
// kind 0's symbols here, kind 1's in tokenizer/byte_level.c, the merging in tokenizer/bpe.c),
// decode, the stop test, the terminal sanitizer and the text check. It never learns a
// vocabulary (tokenizer/learn.c) and never looks at Unicode classes.
#include "tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

#define BLOB_HEADER_BYTES 16   // n_pieces, n_merges, max_piece_len, n_added: four uint32
#define PIECE_HEADER_BYTES 8   // a piece's float score and uint32 length
#define MERGE_BYTES 8          // a merge's uint32 left and right ids
#define LLAMA2C_HEADER_BYTES 4 // tokenizer.bin's int max_token_length, which we recompute
#define LLAMA2C_BOS 1          // llama2.c's BOS id, which also ends generation
#define LLAMA2C_EOS 2          // llama2.c's EOS id
#define KNOWN_FLAGS (TOKF_DUMMY_PREFIX | TOKF_ADD_BOS | TOKF_BOS_STOPS | BYTE_LEVEL_FLAGS)
#define BYTE_LEVEL_FLAGS (TOKF_NFC | TOKF_IGNORE_MERGES | TOKF_PRE_MASK) // what only kind 1 implements
#define KNOWN_OPTS (TOKE_ADD_BOS | TOKE_SPECIAL)

int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static float rdf32(const unsigned char *p) {
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---- the piece and merge tables ----

// The slot of the piece table that holds s[0..n), or the empty slot where it would go.
static uint32_t piece_slot(const Tokenizer *t, const char *s, size_t n) {
    uint32_t h = hash_bytes(s, n) & t->piece_mask;
    for (; t->piece_table[h]; h = (h + 1) & t->piece_mask) {
        uint32_t e = t->piece_table[h] - 1;
        if (t->len[e] == n && memcmp(t->bytes + t->offset[e], s, n) == 0) break;
    }
    return h;
}

int piece_lookup(const Tokenizer *t, const char *s, size_t n) { return (int)t->piece_table[piece_slot(t, s, n)] - 1; }

// The slot of the merge table that holds key, or the empty slot where it would go.
static uint32_t merge_slot(const Tokenizer *t, uint64_t key) {
    uint32_t h = hash_u64(key) & t->merge_mask;
    while (t->merge_key[h] && t->merge_key[h] != key) h = (h + 1) & t->merge_mask;
    return h;
}

int merge_lookup(const Tokenizer *t, uint32_t left, uint32_t right, uint32_t *rank) {
    if (!t->n_merges) return -1;
    uint32_t h = merge_slot(t, pair_key(left, right));
    if (!t->merge_key[h]) return -1;
    *rank = t->merge_rank[h];
    return (int)t->merge_result[h];
}

// The byte a piece spelled "<0xNN>" with upper-case hex stands for, or -1 for any other piece.
static int byte_piece_value(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    const size_t digits = sizeof hex - 1;
    if (n != BYTE_PIECE_LEN || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *hi = memchr(hex, s[3], digits);
    const char *lo = memchr(hex, s[4], digits);
    if (!hi || !lo) return -1;
    return (int)((size_t)(hi - hex) * digits + (size_t)(lo - hex));
}

void byte_piece_name(char out[BYTE_PIECE_LEN + 1], int b) { snprintf(out, BYTE_PIECE_LEN + 1, "<0x%02X>", b); }

void tokenizer_free(Tokenizer *t) {
    free(t->bytes);
    free(t->offset);
    free(t->len);
    free(t->score);
    free(t->byte_of);
    free(t->piece_table);
    free(t->merge_key);
    free(t->merge_rank);
    free(t->merge_result);
    free(t->attr);
    free(t->trie_token);
    free(t->trie_key);
    free(t->trie_child);
    memset(t, 0, sizeof *t);
}

// ---- reading a blob (docs/FORMAT.md) ----

// What the checks found out about a blob before anything is allocated.
typedef struct {
    uint32_t n, m, maxlen, a; // pieces, merges, the longest piece's bytes, added tokens
    size_t total;             // the bytes of all pieces
    size_t merges_at;         // where the merges list starts; the added tokens follow it
} BlobLayout;

// The arguments and the blob's header; 0, or -1 with a message.
static int check_header(const unsigned char *b, size_t blob_bytes, int kind, unsigned flags, int bos_id, int eos_id,
                        BlobLayout *lay, char *err, size_t errlen) {
    if (kind != TOK_SENTENCEPIECE && kind != TOK_BYTE_BPE)
        return fail(err, errlen, "tok_kind %d is not 0 (SentencePiece BPE) or 1 (byte-level BPE)", kind);
    if (flags & ~(unsigned)KNOWN_FLAGS) return fail(err, errlen, "tok_flags 0x%x has unknown bits", flags);
    if (kind == TOK_SENTENCEPIECE && (flags & BYTE_LEVEL_FLAGS))
        return fail(err, errlen, "tok_flags 0x%x: NFC, ignore_merges and the pre-tokeniser are tok_kind 1's", flags);
    unsigned pre = (flags & TOKF_PRE_MASK) >> TOKF_PRE_SHIFT;
    if (pre >= TOK_PRE_KINDS) return fail(err, errlen, "tok_flags 0x%x: pre-tokeniser %u is unknown", flags, pre);
    if (blob_bytes < BLOB_HEADER_BYTES)
        return fail(err, errlen, "tokenizer blob is %zu bytes, shorter than its 16-byte header", blob_bytes);
    uint32_t n = rd32(b), m = rd32(b + 4), a = rd32(b + 12);
    lay->n = n;
    lay->m = m;
    lay->maxlen = rd32(b + 8);
    lay->a = a;
    if (n < 1 || n > MAX_PIECES) return fail(err, errlen, "tokenizer n_pieces %u outside 1..%u", n, MAX_PIECES);
    if (m > MAX_PIECES) return fail(err, errlen, "tokenizer n_merges %u above %u", m, MAX_PIECES);
    if (a > n) return fail(err, errlen, "tokenizer n_added %u above n_pieces %u", a, n);
    if (bos_id < -1 || bos_id >= (int)n) return fail(err, errlen, "bos_id %d outside -1..%u", bos_id, n - 1);
    if (eos_id < -1 || eos_id >= (int)n) return fail(err, errlen, "eos_id %d outside -1..%u", eos_id, n - 1);
    return 0;
}

// Every piece's bounds and score, the longest piece and the merges list's size, so that every
// allocation after has a checked size; 0, or -1 with a message.
static int check_pieces(const unsigned char *b, size_t blob_bytes, BlobLayout *lay, char *err, size_t errlen) {
    size_t off = BLOB_HEADER_BYTES, total = 0;
    uint32_t longest = 0;
    for (uint32_t i = 0; i < lay->n; i++) {
        if (blob_bytes - off < PIECE_HEADER_BYTES)
            return fail(err, errlen, "tokenizer blob ends inside piece %u of %u", i, lay->n);
        float s = rdf32(b + off);
        uint32_t len = rd32(b + off + 4);
        off += PIECE_HEADER_BYTES;
        if (!isfinite(s)) return fail(err, errlen, "tokenizer piece %u has a non-finite score", i);
        if (len > blob_bytes - off)
            return fail(err, errlen, "tokenizer piece %u: length %u runs past the blob", i, len);
        off += len;
        total += len;
        if (len > longest) longest = len;
    }
    if (total > INT32_MAX) return fail(err, errlen, "tokenizer pieces hold %zu bytes, more than 2 GiB", total);
    if (longest != lay->maxlen)
        return fail(err, errlen, "tokenizer max_piece_len is %u but the longest piece has %u bytes", lay->maxlen,
                    longest);
    unsigned long long tail = (unsigned long long)MERGE_BYTES * lay->m + (unsigned long long)ADDED_BYTES * lay->a;
    if (blob_bytes - off != tail)
        return fail(err, errlen,
                    "tokenizer blob has %zu bytes after the pieces; %u merges and %u added tokens need %llu",
                    blob_bytes - off, lay->m, lay->a, tail);
    lay->total = total;
    lay->merges_at = off;
    return 0;
}

// Enters piece i in the piece table and, if it stands for one byte, in byte_piece.
static void index_piece(Tokenizer *t, uint32_t i) {
    const char *p = t->bytes + t->offset[i];
    uint32_t h = piece_slot(t, p, t->len[i]);
    if (!t->piece_table[h]) t->piece_table[h] = i + 1; // duplicates keep the lowest id, which lookups return
    int bv = t->kind == TOK_SENTENCEPIECE ? byte_piece_value(p, t->len[i]) : -1;
    t->byte_of[i] = (int16_t)bv;
    if (bv >= 0 && t->byte_piece[bv] < 0) t->byte_piece[bv] = (int)i;
    if (t->kind == TOK_BYTE_BPE && t->len[i] == 1 && t->byte_piece[(unsigned char)p[0]] < 0)
        t->byte_piece[(unsigned char)p[0]] = (int)i;
}

// Copies the checked pieces into t and indexes them; 0, or -1 if out of memory.
static int copy_pieces(Tokenizer *t, const unsigned char *b, size_t total) {
    uint32_t n = (uint32_t)t->n_pieces;
    t->piece_mask = table_size(n) - 1;
    t->bytes = malloc(total ? total : 1);
    t->offset = malloc(sizeof(uint32_t) * n);
    t->len = malloc(sizeof(uint32_t) * n);
    t->score = malloc(sizeof(float) * n);
    t->byte_of = malloc(sizeof(int16_t) * n);
    t->piece_table = calloc((size_t)t->piece_mask + 1, sizeof(uint32_t));
    t->attr = calloc(n, 1);
    if (!t->bytes || !t->offset || !t->len || !t->score || !t->byte_of || !t->piece_table || !t->attr) return -1;
    for (int i = 0; i < N_BYTES; i++) t->byte_piece[i] = -1;
    size_t off = BLOB_HEADER_BYTES;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        t->score[i] = rdf32(b + off);
        t->len[i] = rd32(b + off + 4);
        t->offset[i] = at;
        memcpy(t->bytes + at, b + off + PIECE_HEADER_BYTES, t->len[i]);
        off += PIECE_HEADER_BYTES + t->len[i];
        at += t->len[i];
        index_piece(t, i);
    }
    return 0;
}

// Allocates the merge table, and in *cat room for two pieces back to back; 0 or -1.
static int alloc_merges(Tokenizer *t, char **cat) {
    t->merge_mask = table_size((uint32_t)t->n_merges) - 1;
    size_t slots = (size_t)t->merge_mask + 1;
    t->merge_key = calloc(slots, sizeof(uint64_t));
    t->merge_rank = malloc(sizeof(uint32_t) * slots);
    t->merge_result = malloc(sizeof(uint32_t) * slots);
    *cat = malloc(2 * (size_t)t->max_piece_len + 1);
    return t->merge_key && t->merge_rank && t->merge_result && *cat ? 0 : -1;
}

// What is wrong with merge (l, r), or NULL with the piece it makes in *res.
static const char *merge_problem(const Tokenizer *t, uint32_t l, uint32_t r, char *cat, int *res) {
    if (l >= (uint32_t)t->n_pieces || r >= (uint32_t)t->n_pieces) return "refers to a token outside the vocabulary";
    if (!t->len[l] || !t->len[r]) return "joins an empty piece";
    size_t n = (size_t)t->len[l] + t->len[r];
    memcpy(cat, t->bytes + t->offset[l], t->len[l]);
    memcpy(cat + t->len[l], t->bytes + t->offset[r], t->len[r]);
    *res = n <= (size_t)t->max_piece_len ? piece_lookup(t, cat, n) : -1;
    return *res < 0 ? "makes a piece that is not in the vocabulary" : NULL;
}

// Checks the merges list at mb and enters it in the merge table; 0, or -1 with a message.
static int read_merges(Tokenizer *t, const unsigned char *mb, char *cat, char *err, size_t errlen) {
    for (uint32_t r = 0; r < (uint32_t)t->n_merges; r++, mb += MERGE_BYTES) {
        uint32_t l = rd32(mb), rt = rd32(mb + 4);
        int res;
        const char *why = merge_problem(t, l, rt, cat, &res);
        if (why) return fail(err, errlen, "tokenizer merge %u (%u, %u) %s", r, l, rt, why);
        uint64_t k = pair_key(l, rt);
        uint32_t h = merge_slot(t, k); // a repeated pair takes its last rank, as Hugging Face's map of merges does
        t->merge_key[h] = k;
        t->merge_rank[h] = r;
        t->merge_result[h] = (uint32_t)res;
    }
    return 0;
}

int tokenizer_init(Tokenizer *t, const void *blob, size_t blob_bytes, int kind, unsigned flags, int bos_id, int eos_id,
                   char *err, size_t errlen) {
    const unsigned char *b = blob;
    BlobLayout lay = {0};
    memset(t, 0, sizeof *t);
    for (int i = 0; i < N_BYTES; i++) t->trie_root[i] = -1;
    if (check_header(b, blob_bytes, kind, flags, bos_id, eos_id, &lay, err, errlen)) return -1;
    if (check_pieces(b, blob_bytes, &lay, err, errlen)) return -1;
    t->kind = kind;
    t->flags = flags;
    t->bos_id = bos_id;
    t->eos_id = eos_id;
    t->n_pieces = (int)lay.n;
    t->n_merges = (int)lay.m;
    t->max_piece_len = (int)lay.maxlen;
    char *cat = NULL;
    int rc = copy_pieces(t, b, lay.total);
    if (!rc && lay.m) rc = alloc_merges(t, &cat);
    if (rc) rc = fail(err, errlen, "out of memory for a %u-piece tokenizer", lay.n);
    else if (kind == TOK_SENTENCEPIECE && (flags & TOKF_DUMMY_PREFIX) && piece_lookup(t, " ", 1) < 0)
        rc = fail(err, errlen, "tokenizer has the dummy-prefix flag but no \" \" piece");
    else if (lay.m) rc = read_merges(t, b + lay.merges_at, cat, err, errlen);
    if (!rc) rc = added_read(t, b + lay.merges_at + (size_t)MERGE_BYTES * lay.m, lay.a, err, errlen);
    free(cat);
    if (rc) tokenizer_free(t);
    return rc;
}

// ---- building blobs ----

unsigned char *blob_pack(int n, const char *const *piece, const uint32_t *len, const float *score, size_t *bytes) {
    size_t total = BLOB_HEADER_BYTES;
    uint32_t maxlen = 0;
    for (int i = 0; i < n; i++) {
        total += PIECE_HEADER_BYTES + len[i];
        if (len[i] > maxlen) maxlen = len[i];
    }
    unsigned char *b = malloc(total), *p = b + BLOB_HEADER_BYTES;
    if (!b) return NULL;
    wr32(b, (uint32_t)n);
    wr32(b + 4, 0);
    wr32(b + 8, maxlen);
    wr32(b + 12, 0);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &score[i], sizeof u);
        wr32(p, u);
        wr32(p + 4, len[i]);
        memcpy(p + PIECE_HEADER_BYTES, piece[i], len[i]);
        p += PIECE_HEADER_BYTES + len[i];
    }
    *bytes = total;
    return b;
}

// Reads tokenizer.bin's vocab_size pieces into piece, len and score; 0, or -1 with a message.
static int read_llama2c(const unsigned char *f, size_t file_bytes, int vocab_size, const char **piece, uint32_t *len,
                        float *score, char *err, size_t errlen) {
    size_t off = LLAMA2C_HEADER_BYTES;
    for (int i = 0; i < vocab_size; i++) {
        if (file_bytes - off < PIECE_HEADER_BYTES)
            return fail(err, errlen, "ends at piece %d, but the model's vocab_size is %d", i, vocab_size);
        score[i] = rdf32(f + off);
        len[i] = rd32(f + off + 4);
        if ((int32_t)len[i] < 0 || len[i] > file_bytes - off - PIECE_HEADER_BYTES)
            return fail(err, errlen, "piece %d has length %d, past the end of the file", i, (int32_t)len[i]);
        piece[i] = (const char *)f + off + PIECE_HEADER_BYTES;
        off += PIECE_HEADER_BYTES + len[i];
    }
    if (off != file_bytes) return fail(err, errlen, "has more than the model's vocab_size of %d pieces", vocab_size);
    return 0;
}

// A kind-0 Tokenizer from pieces with llama2.c's conventions; 0, or -1 with a message.
static int init_llama2c_pieces(Tokenizer *t, int vocab_size, const char **piece, const uint32_t *len,
                               const float *score, char *err, size_t errlen) {
    size_t bytes;
    unsigned char *blob = blob_pack(vocab_size, piece, len, score, &bytes);
    if (!blob) return fail(err, errlen, "out of memory");
    int space = 0; // llama2.c looks the dummy prefix up as " "
    for (int i = 0; i < vocab_size && !space; i++) space = len[i] == 1 && piece[i][0] == ' ';
    unsigned flags = (space ? TOKF_DUMMY_PREFIX : 0) | TOKF_ADD_BOS | TOKF_BOS_STOPS;
    int bos = vocab_size > LLAMA2C_BOS ? LLAMA2C_BOS : -1;
    int eos = vocab_size > LLAMA2C_EOS ? LLAMA2C_EOS : -1;
    int rc = tokenizer_init(t, blob, bytes, TOK_SENTENCEPIECE, flags, bos, eos, err, errlen);
    free(blob);
    return rc;
}

int tokenizer_init_llama2c(Tokenizer *t, const void *file, size_t file_bytes, int vocab_size, char *err,
                           size_t errlen) {
    memset(t, 0, sizeof *t);
    if (vocab_size < 1 || (uint32_t)vocab_size > MAX_PIECES)
        return fail(err, errlen, "vocab_size %d out of range", vocab_size);
    if (file_bytes < LLAMA2C_HEADER_BYTES)
        return fail(err, errlen, "too short for a llama2.c tokenizer.bin (%zu bytes)", file_bytes);
    const char **piece = malloc(sizeof(char *) * (size_t)vocab_size);
    uint32_t *len = malloc(sizeof(uint32_t) * (size_t)vocab_size);
    float *score = malloc(sizeof(float) * (size_t)vocab_size);
    int rc = -1;
    if (!piece || !len || !score) fail(err, errlen, "out of memory");
    else if (!read_llama2c(file, file_bytes, vocab_size, piece, len, score, err, errlen))
        rc = init_llama2c_pieces(t, vocab_size, piece, len, score, err, errlen);
    free(piece);
    free(len);
    free(score);
    return rc;
}

// ---- encode and decode ----

size_t sp_group(const unsigned char *s, size_t i, size_t len) {
    size_t j = i + 1;
    while (j < len && j - i < UTF8_MAX && (s[j] & 0xC0) == 0x80) j++; // 10xxxxxx: a continuation byte
    return j - i;
}

// Kind 0's piece for the character s[i..i+g): its own, or with merges (Hugging Face's
// normaliser turned spaces into U+2581, so the two are one) a U+2581 is the space; -1 if none.
static int char_piece(const Tokenizer *t, const unsigned char *s, size_t i, size_t g) {
    int id = piece_lookup(t, (const char *)s + i, g);
    if (id < 0 && t->n_merges && g == SP_SPACE_BYTES && !memcmp(s + i, SP_SPACE, SP_SPACE_BYTES))
        id = piece_lookup(t, " ", 1);
    return id;
}

// Kind 0: the dummy-prefix space, then one piece per character, or the pieces of its bytes when
// the vocabulary has no piece for it; then merged.
static int encode_chars(Encoding *e, const unsigned char *s, size_t len) {
    const Tokenizer *t = e->t;
    int n = 0;
    if (t->flags & TOKF_DUMMY_PREFIX) e->id[n++] = piece_lookup(t, " ", 1);
    for (size_t i = 0; i < len;) {
        size_t g = sp_group(s, i, len);
        int id = char_piece(t, s, i, g);
        if (id >= 0) {
            e->id[n++] = id;
        } else {
            for (size_t k = i; k < i + g; k++) {
                if (t->byte_piece[s[k]] < 0)
                    return fail(e->err, e->errlen,
                                "byte 0x%02X at offset %zu is not in the vocabulary (no <0x%02X> piece)", s[k],
                                e->at + k, s[k]);
                e->id[n++] = t->byte_piece[s[k]];
            }
        }
        i += g;
    }
    return merge_and_emit(e, 0, n);
}

// The run s[0..len) between added tokens, at offset at of the text, through the kind's own path,
// in a run's Encoding appended to e's ids. Under TOKF_NFC the run is put in NFC first: Hugging
// Face normalises each run on its own, after the added tokens were found in the text as it is.
static int encode_run(Encoding *e, const unsigned char *s, size_t len, size_t at) {
    const Tokenizer *t = e->t;
    unsigned char *nfc = NULL;
    if (!len) return 0;
    if ((t->flags & TOKF_NFC) && nfc_normalize(s, len, &nfc, &len)) return fail(e->err, e->errlen, "out of memory");
    if (len > MAX_TEXT_BYTES) {
        free(nfc);
        return fail(e->err, e->errlen, "text of %zu bytes in NFC is too long to encode", len);
    }
    Encoding run;
    int rc = encoding_init(&run, t, len, e->out, e->n_out, e->max_out, e->err, e->errlen);
    if (!rc) {
        const unsigned char *p = nfc ? nfc : s;
        run.at = at;
        rc = t->kind == TOK_SENTENCEPIECE ? encode_chars(&run, p, len) : encode_byte_level(&run, p, len);
        e->n_out = run.n_out;
        encoding_free(&run);
    }
    free(nfc);
    return rc;
}

// The added tokens found in s, and the runs of text between them, appended to e's ids (e holds
// no buffers: each run has its own). A special token's spelling without TOKE_SPECIAL is text,
// and the search goes on after it, as Hugging Face's does.
static int encode_text(Encoding *e, const unsigned char *s, size_t len, unsigned opts) {
    const Tokenizer *t = e->t;
    size_t run = 0; // where the text not yet encoded starts
    for (size_t at = 0; at < len;) {
        size_t n;
        int id;
        size_t found = added_find(t, s, at, len, &n, &id);
        if (found == len) break;
        at = found + n;
        if ((t->attr[id] & TOKA_SPECIAL) && !(opts & TOKE_SPECIAL)) continue;
        if (encode_run(e, s + run, found - run, run) || emit_token(e, id)) return -1;
        run = at;
    }
    return encode_run(e, s + run, len - run, run);
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, unsigned opts, int *out, int max_out, char *err,
                     size_t errlen) {
    if (opts & ~(unsigned)KNOWN_OPTS) return fail(err, errlen, "encode options 0x%x have unknown bits", opts);
    if (len > MAX_TEXT_BYTES) return fail(err, errlen, "text of %zu bytes is too long to encode", len);
    Encoding e = {.t = t, .out = out, .max_out = max_out, .err = err, .errlen = errlen};
    if ((opts & TOKE_ADD_BOS) && t->bos_id < 0) return fail(err, errlen, "the tokenizer has no BOS token to prepend");
    if ((opts & TOKE_ADD_BOS) && emit_token(&e, t->bos_id)) return -1;
    return encode_text(&e, (const unsigned char *)text, len, opts) ? -1 : e.n_out;
}

size_t tokenizer_max_tokens(const Tokenizer *t, size_t len) {
    size_t per_byte = t->flags & TOKF_NFC ? NFC_MAX_GROWTH : 1;
    int prefix_per_run = t->kind == TOK_SENTENCEPIECE && (t->flags & TOKF_DUMMY_PREFIX) && t->n_added;
    return len * per_byte + (prefix_per_run ? len : 0) + 2;
}

size_t tokenizer_min_tokens(const Tokenizer *t, size_t len) {
    // NFC composes at most 3 bytes into 1 (a Hangul syllable from its three jamo)
    size_t per_token = (size_t)(t->max_piece_len > 0 ? t->max_piece_len : 1) * (t->flags & TOKF_NFC ? 3 : 1);
    return len / per_token;
}

// Every byte value as a char, so that a byte piece can decode to a pointer to its byte.
#define B4(i) (char)(i), (char)(i + 1), (char)(i + 2), (char)(i + 3)
#define B16(i) B4(i), B4(i + 4), B4(i + 8), B4(i + 12)
#define B64(i) B16(i), B16(i + 16), B16(i + 32), B16(i + 48)
static const char byte_chars[N_BYTES] = {B64(0), B64(64), B64(128), B64(192)};
#undef B64
#undef B16
#undef B4

const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token, size_t *len) {
    if (token < 0 || token >= t->n_pieces) return NULL;
    *len = 0;
    if (token == t->bos_id || token == t->eos_id || (t->attr[token] & TOKA_SPECIAL)) return "";
    if (t->byte_of[token] >= 0) {
        *len = 1;
        return &byte_chars[t->byte_of[token]];
    }
    const char *p = t->bytes + t->offset[token];
    *len = t->len[token];
    if ((t->flags & TOKF_DUMMY_PREFIX) && prev_token >= 0 && prev_token == t->bos_id && *len && p[0] == ' ') {
        p++;
        (*len)--;
    }
    return p;
}

int tokenizer_is_stop(const Tokenizer *t, int token) {
    if (token < 0 || token >= t->n_pieces) return 0;
    return token == t->eos_id || (t->attr[token] & TOKA_STOP) || (token == t->bos_id && (t->flags & TOKF_BOS_STOPS));
}

// ---- printable output ----

#define REPLACEMENT "\xEF\xBF\xBD" // U+FFFD in UTF-8
#define REPLACEMENT_BYTES 3
#define CONTINUATION_PAD 0xA0 // a continuation byte every lead accepts in the second place and after

static size_t put_replacement(char *out) {
    memcpy(out, REPLACEMENT, REPLACEMENT_BYTES);
    return REPLACEMENT_BYTES;
}

size_t tokenizer_sanitize(TokSanitizer *st, const char *in, size_t n, char *out, int flush) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)in[i];
        if (st->n) {
            // Only the second byte's range depends on the lead, and it is real here, so padding the
            // rest tells whether pending + c can still start a well-formed character.
            unsigned char full[UTF8_MAX];
            size_t need = st->pending[0] < 0xE0 ? 2 : st->pending[0] < 0xF0 ? 3 : 4;
            size_t have = (size_t)st->n + 1;
            uint32_t cp;
            memcpy(full, st->pending, (size_t)st->n);
            full[st->n] = (unsigned char)c;
            memset(full + have, CONTINUATION_PAD, need - have);
            if (utf8_char(full, 0, need, &cp) == need) {
                st->pending[st->n++] = (unsigned char)c;
                if (have == need) {
                    st->n = 0;
                    if (cp >= 0x80 && cp <= 0x9F) continue; // C1 controls
                    memcpy(out + o, st->pending, need);
                    o += need;
                }
                continue;
            }
            st->n = 0;
            o += put_replacement(out + o);
        }
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) continue; // C0 controls (\r too) and DEL
            out[o++] = (char)c;
        } else if (c >= 0xC2 && c <= 0xF4) { // a lead byte that can start a well-formed character
            st->pending[0] = (unsigned char)c;
            st->n = 1;
        } else {
            o += put_replacement(out + o);
        }
    }
    if (flush && st->n) {
        st->n = 0;
        o += put_replacement(out + o);
    }
    return o;
}

size_t tokenizer_first_non_text(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    uint32_t cp;
    for (size_t i = 0, k; i < n; i += k) {
        k = s[i] < 0x80 ? 1 : utf8_char(s, i, n, &cp); // ASCII without a call: corpora are mostly ASCII
        if (!k || !s[i]) return i;
    }
    return n;
}
