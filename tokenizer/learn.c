// tokenizer/learn.c: vocabulary learning for ./train (tokenizer_learn_chars and
// tokenizer_learn_bpe in tokenizer.h). It counts the text's characters, and for BPE turns the
// text into one sequence of symbols, as kind-0 encoding does, and merges the most frequent
// adjacent pair until the vocabulary is full; the pair counts are tokenizer/pair_table.c's.
// The result is a kind-0 blob packed by tokenizer.c; it never encodes or reads a blob.
// docs/TOKENIZER.md explains why a run costs about the text's size times a log.
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define BASE_SCORE (-1e30f)   // the score of pieces that are never a merge result
#define NO_KEY 0xFFFFFFFFu    // no character's key: it marks the character table's empty slots
#define FIRST_CHAR_SLOTS 1024 // character table slots before the first growth
#define CHAR_GROWTH 4         // the character table grows fourfold
#define FIRST_VOCAB_BYTES 4096

enum { MERGE_NEXT = 0, MERGE_NONE_LEFT = 1 }; // learn_next_merge's results besides -1
enum { JOIN_BANNED = -2 };                    // join_pieces' result for a join no merge may make

// ---- the text's characters ----

// A character of at most UTF8_MAX bytes as a left-aligned big-endian integer: for well-formed
// UTF-8 these sort in code point order.
static uint32_t char_key(const unsigned char *s, size_t n) {
    uint32_t k = 0;
    for (size_t i = 0; i < UTF8_MAX; i++) k = k << 8 | (i < n ? s[i] : 0);
    return k;
}

// Writes the character of key k to out; returns its length.
static size_t key_bytes(uint32_t k, char out[UTF8_MAX]) {
    uint32_t cp;
    for (int i = 0; i < UTF8_MAX; i++) out[i] = (char)(k >> (24 - 8 * i));
    return utf8_char((const unsigned char *)out, 0, UTF8_MAX, &cp);
}

typedef struct {
    uint32_t key;
    uint64_t count;
} CharCount;

static int cmp_char_key(const void *a, const void *b) {
    uint32_t x = ((const CharCount *)a)->key, y = ((const CharCount *)b)->key;
    return (x > y) - (x < y);
}

static int cmp_count_desc(const void *a, const void *b) {
    const CharCount *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return (x->key > y->key) - (x->key < y->key);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

// Grows the character table (keys and counts, *cap slots) fourfold; 0, or -1 if out of memory.
static int grow_chars(uint32_t **keys, uint64_t **counts, uint32_t *cap) {
    uint32_t ncap = *cap * CHAR_GROWTH, *nk = malloc(sizeof(uint32_t) * ncap);
    uint64_t *nc = calloc(ncap, sizeof(uint64_t));
    if (!nk || !nc) {
        free(nk);
        free(nc);
        return -1;
    }
    for (uint32_t j = 0; j < ncap; j++) nk[j] = NO_KEY;
    for (uint32_t j = 0; j < *cap; j++) {
        if ((*keys)[j] == NO_KEY) continue;
        uint32_t h = hash_u64((*keys)[j]) & (ncap - 1);
        while (nk[h] != NO_KEY) h = (h + 1) & (ncap - 1);
        nk[h] = (*keys)[j];
        nc[h] = (*counts)[j];
    }
    free(*keys);
    free(*counts);
    *keys = nk;
    *counts = nc;
    *cap = ncap;
    return 0;
}

// The distinct well-formed characters of the text (grouped as llama2.c groups it) with their
// counts, in key order, and in bad_bytes the bytes of groups that are not one well-formed
// character; 0, or -1 if out of memory.
static int collect_chars(const unsigned char *s, size_t len, CharCount **chars, int *nchars, int bad_bytes[N_BYTES]) {
    uint32_t cap = FIRST_CHAR_SLOTS, n = 0;
    uint32_t *keys = malloc(sizeof(uint32_t) * cap);
    uint64_t *counts = calloc(cap, sizeof(uint64_t));
    if (!keys || !counts) goto oom;
    for (uint32_t i = 0; i < cap; i++) keys[i] = NO_KEY;
    memset(bad_bytes, 0, N_BYTES * sizeof(int));
    for (size_t i = 0, g; i < len; i += g) {
        g = sp_group(s, i, len);
        uint32_t cp;
        if (utf8_char(s, i, i + g, &cp) != g) {
            for (size_t k = i; k < i + g; k++) bad_bytes[s[k]] = 1;
            continue;
        }
        uint32_t key = char_key(s + i, g), h = hash_u64(key) & (cap - 1);
        while (keys[h] != NO_KEY && keys[h] != key) h = (h + 1) & (cap - 1);
        if (keys[h] == NO_KEY) {
            keys[h] = key;
            n++;
        }
        counts[h]++;
        if (n * 2 > cap && grow_chars(&keys, &counts, &cap)) goto oom;
    }
    *chars = malloc(sizeof(CharCount) * (n ? n : 1));
    if (!*chars) goto oom;
    *nchars = 0;
    for (uint32_t j = 0; j < cap; j++)
        if (keys[j] != NO_KEY) (*chars)[(*nchars)++] = (CharCount){keys[j], counts[j]};
    qsort(*chars, (size_t)*nchars, sizeof(CharCount), cmp_char_key);
    free(keys);
    free(counts);
    return 0;
oom:
    free(keys);
    free(counts);
    return -1;
}

int tokenizer_learn_chars(const char *text, size_t len, void **blob, size_t *blob_bytes, char *err, size_t errlen) {
    CharCount *chars;
    int nchars, bad[N_BYTES], n = 0;
    if (collect_chars((const unsigned char *)text, len, &chars, &nchars, bad))
        return fail(err, errlen, "out of memory");
    size_t most = (size_t)nchars + N_BYTES;
    char *store = malloc(UTF8_MAX * (size_t)nchars + (BYTE_PIECE_LEN + 1) * N_BYTES);
    const char **piece = malloc(sizeof(char *) * most);
    uint32_t *plen = malloc(sizeof(uint32_t) * most);
    float *score = calloc(most, sizeof(float));
    int rc = -1;
    if (!store || !piece || !plen || !score) {
        fail(err, errlen, "out of memory");
        goto done;
    }
    char *at = store;
    for (int i = 0; i < nchars; i++, at += UTF8_MAX) {
        plen[n] = (uint32_t)key_bytes(chars[i].key, at);
        piece[n++] = at;
    }
    for (int b = 0; b < N_BYTES; b++) {
        if (!bad[b]) continue;
        byte_piece_name(at, b);
        plen[n] = BYTE_PIECE_LEN;
        piece[n++] = at;
        at += BYTE_PIECE_LEN + 1;
    }
    if (!n) {
        fail(err, errlen, "empty text: no characters to make a vocabulary of");
        goto done;
    }
    *blob = blob_pack(n, piece, plen, score, blob_bytes);
    if (!*blob) {
        fail(err, errlen, "out of memory");
        goto done;
    }
    rc = 0;
done:
    free(chars);
    free(store);
    free(piece);
    free(plen);
    free(score);
    return rc;
}

// ---- the vocabulary being learned ----

// Pieces in one growing buffer, and a hash from bytes to id so that a merge result spelled like
// an existing piece reuses it.
typedef struct {
    char *buf;
    size_t used, bufcap;
    size_t *off;
    uint32_t *len;
    float *score;
    int n, cap;
    uint32_t *table, mask;
} Vocab;

static int vocab_init(Vocab *v, int cap) {
    v->cap = cap;
    v->bufcap = FIRST_VOCAB_BYTES;
    v->buf = malloc(v->bufcap);
    v->off = malloc(sizeof(size_t) * (size_t)cap);
    v->len = malloc(sizeof(uint32_t) * (size_t)cap);
    v->score = malloc(sizeof(float) * (size_t)cap);
    v->mask = table_size((uint32_t)cap) - 1;
    v->table = calloc((size_t)v->mask + 1, sizeof(uint32_t));
    return v->buf && v->off && v->len && v->score && v->table ? 0 : -1;
}

static void vocab_free(Vocab *v) {
    free(v->buf);
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->table);
}

// The slot of the table that holds s[0..n), or the empty slot where it would go.
static uint32_t vocab_slot(const Vocab *v, const char *s, size_t n) {
    uint32_t h = hash_bytes(s, n) & v->mask;
    for (; v->table[h]; h = (h + 1) & v->mask) {
        int e = (int)v->table[h] - 1;
        if (v->len[e] == n && memcmp(v->buf + v->off[e], s, n) == 0) break;
    }
    return h;
}

static int vocab_find(const Vocab *v, const char *s, size_t n) { return (int)v->table[vocab_slot(v, s, n)] - 1; }

// Appends a piece the caller knows is new; returns its id, or -1 if out of memory.
static int vocab_add(Vocab *v, const char *s, size_t n, float score) {
    if (v->used + n > v->bufcap) {
        size_t ncap = (v->used + n) * 2;
        char *nb = realloc(v->buf, ncap);
        if (!nb) return -1;
        v->buf = nb;
        v->bufcap = ncap;
    }
    memcpy(v->buf + v->used, s, n);
    v->off[v->n] = v->used;
    v->len[v->n] = (uint32_t)n;
    v->score[v->n] = score;
    v->used += n;
    v->table[vocab_slot(v, v->buf + v->off[v->n], n)] = (uint32_t)v->n + 1;
    return v->n++;
}

static int vocab_pack(const Vocab *v, void **blob, size_t *blob_bytes) {
    const char **piece = malloc(sizeof(char *) * (size_t)v->n);
    if (!piece) return -1;
    for (int i = 0; i < v->n; i++) piece[i] = v->buf + v->off[i];
    *blob = blob_pack(v->n, piece, v->len, v->score, blob_bytes);
    free(piece);
    return *blob ? 0 : -1;
}

// ---- BPE learning ----

typedef struct {
    Vocab v;
    PairTable pt;
    int *sym;         // the text as piece ids; ids below N_BYTES are byte fallbacks, which never merge
    int *prev, *next; // the symbols' neighbours, -1 for none
    int n_base;       // the byte and character pieces, which no merge may make
    int learned;      // merges learned so far
    char *cat;        // two pieces back to back
    size_t catcap;
} Learner;

static int learner_init(Learner *L, int vocab_size, size_t len) {
    *L = (Learner){0};
    L->sym = malloc(sizeof(int) * 3 * (len + 1)); // sym, prev and next in one block
    if (vocab_init(&L->v, vocab_size) || !L->sym) return -1;
    L->prev = L->sym + len + 1;
    L->next = L->sym + 2 * (len + 1);
    return pt_init(&L->pt);
}

static void learner_free(Learner *L) {
    vocab_free(&L->v);
    pt_free(&L->pt);
    free(L->sym);
    free(L->cat);
}

// The 256 byte pieces, then the kept characters; 0, or -1 if out of memory.
static int add_base_pieces(Learner *L, const CharCount *chars, int keep) {
    for (int b = 0; b < N_BYTES; b++) {
        char name[BYTE_PIECE_LEN + 1];
        byte_piece_name(name, b);
        if (vocab_add(&L->v, name, BYTE_PIECE_LEN, BASE_SCORE) < 0) return -1;
    }
    for (int i = 0; i < keep; i++) {
        char c[UTF8_MAX];
        if (vocab_add(&L->v, c, key_bytes(chars[i].key, c), BASE_SCORE) < 0) return -1;
    }
    L->n_base = N_BYTES + keep;
    return 0;
}

// The text as symbols, each character's piece or its bytes' fallbacks, and the counts of every
// adjacent pair of non-byte symbols; 0, or -1 if out of memory.
static int text_to_symbols(Learner *L, const unsigned char *s, size_t len) {
    int n = 0;
    for (size_t i = 0, g; i < len; i += g) {
        g = sp_group(s, i, len);
        int id = vocab_find(&L->v, (const char *)s + i, g);
        if (id >= N_BYTES) {
            L->sym[n++] = id;
            continue;
        }
        for (size_t k = i; k < i + g; k++) L->sym[n++] = s[k];
    }
    for (int i = 0; i < n; i++) {
        L->prev[i] = i - 1;
        L->next[i] = i + 1 < n ? i + 1 : -1;
        if (i + 1 < n && L->sym[i] >= N_BYTES && L->sym[i + 1] >= N_BYTES &&
            pt_add(&L->pt, L->sym[i], L->sym[i + 1], i))
            return -1;
    }
    return pt_flush_touched(&L->pt);
}

// The id of the piece a and b make, added if new; JOIN_BANNED, or -1 if out of memory.
static int join_pieces(Learner *L, int a, int b) {
    size_t la = L->v.len[a], lb = L->v.len[b];
    if (la + lb > L->catcap) {
        L->catcap = 2 * (la + lb);
        char *nc = realloc(L->cat, L->catcap);
        if (!nc) return -1;
        L->cat = nc;
    }
    memcpy(L->cat, L->v.buf + L->v.off[a], la);
    memcpy(L->cat + la, L->v.buf + L->v.off[b], lb);
    int m = vocab_find(&L->v, L->cat, la + lb);
    if (m >= 0 && m < L->n_base) return JOIN_BANNED; // spelled like a byte piece: decoding would misread it
    if (m >= 0) return m;
    return vocab_add(&L->v, L->cat, la + lb, -(float)L->learned++);
}

// Replaces the occurrence of pair pi = (a, b) at left position p, if it is still there, by
// piece m, and recounts its neighbours' pairs; 0, or -1 if out of memory.
static int merge_at(Learner *L, int pi, int p, int m) {
    PairTable *pt = &L->pt;
    int *sym = L->sym, *prev = L->prev, *next = L->next;
    int a = pt->pairs[pi].a, b = pt->pairs[pi].b, r = next[p];
    if (sym[p] != a || r < 0 || sym[r] != b) return 0;
    int before = prev[p], after = next[r];
    if (before >= 0 && sym[before] >= N_BYTES) pt_dec(pt, sym[before], a);
    if (after >= 0 && sym[after] >= N_BYTES) pt_dec(pt, b, sym[after]);
    pt->pairs[pi].count--;
    sym[p] = m;
    sym[r] = -1;
    next[p] = after;
    if (after >= 0) prev[after] = p;
    if (before >= 0 && sym[before] >= N_BYTES && pt_add(pt, sym[before], m, before)) return -1;
    if (after >= 0 && sym[after] >= N_BYTES && pt_add(pt, m, sym[after], p)) return -1;
    return 0;
}

// Merges every occurrence of pair pi into piece m, leftmost first as the encoder would; 0 or -1.
static int merge_everywhere(Learner *L, int pi, int m) {
    Pair *q = &L->pt.pairs[pi];
    int *pos = q->pos, npos = q->npos, rc = 0;
    q->pos = NULL;
    q->npos = 0;
    q->cap = 0;
    qsort(pos, (size_t)npos, sizeof(int), cmp_int);
    for (int k = 0; k < npos && !rc; k++) rc = merge_at(L, pi, pos[k], m);
    free(pos);
    return rc ? rc : pt_flush_touched(&L->pt);
}

// Takes the most frequent pair off the heap and merges it; MERGE_NEXT, MERGE_NONE_LEFT when no
// pair occurs twice, or -1 if out of memory.
static int learn_next_merge(Learner *L) {
    int queued;
    int pi = pt_heap_pop(&L->pt, &queued);
    Pair *q = &L->pt.pairs[pi];
    if (q->banned) return MERGE_NEXT;
    if (queued != q->count) // stale: counts only drop between queueings
        return q->count > 0 && pt_heap_push(&L->pt, pi) ? -1 : MERGE_NEXT;
    if (q->count < 2) return MERGE_NONE_LEFT;
    int m = join_pieces(L, q->a, q->b);
    if (m == JOIN_BANNED) {
        q->banned = 1;
        return MERGE_NEXT;
    }
    return m < 0 ? -1 : merge_everywhere(L, pi, m);
}

int tokenizer_learn_bpe(const char *text, size_t len, int vocab_size, const TokProgress *progress, void **blob,
                        size_t *blob_bytes, char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)text;
    if (vocab_size < N_BYTES || (uint32_t)vocab_size > MAX_PIECES)
        return fail(err, errlen, "vocab_size %d: a byte-fallback BPE vocabulary needs 256..%u pieces", vocab_size,
                    MAX_PIECES);
    if (len > MAX_TEXT_BYTES) return fail(err, errlen, "text of %zu bytes is too long to learn from", len);
    CharCount *chars = NULL;
    int nchars = 0, bad[N_BYTES];
    if (collect_chars(s, len, &chars, &nchars, bad)) return fail(err, errlen, "out of memory");
    // Keep the most frequent characters that fit, in code point order.
    int keep = nchars < vocab_size - N_BYTES ? nchars : vocab_size - N_BYTES;
    qsort(chars, (size_t)nchars, sizeof(CharCount), cmp_count_desc);
    qsort(chars, (size_t)keep, sizeof(CharCount), cmp_char_key);
    Learner L;
    int rc = learner_init(&L, vocab_size, len);
    if (!rc) rc = add_base_pieces(&L, chars, keep);
    if (!rc) rc = text_to_symbols(&L, s, len);
    while (rc == MERGE_NEXT && L.v.n < vocab_size && L.pt.nheap) {
        rc = learn_next_merge(&L);
        if (progress) progress->fn(progress->ctx, L.v.n, vocab_size);
    }
    if (rc == MERGE_NONE_LEFT) rc = 0;
    if (!rc) rc = vocab_pack(&L.v, blob, blob_bytes);
    if (rc) fail(err, errlen, "out of memory learning a %d-piece vocabulary from %zu bytes", vocab_size, len);
    learner_free(&L);
    free(chars);
    return rc;
}
