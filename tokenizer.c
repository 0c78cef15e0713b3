/* Tokenizer: see tokenizer.h. */
#include "tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIECES (1u << 24)   /* FORMAT.md's vocab_size limit */
#define NO_MERGE_SCORE (-1e10f) /* llama2.c merges only pieces scoring above its -1e10 start */
#define BASE_SCORE (-1e30f)     /* learned vocabularies: pieces that are never a merge result */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

static float rdf32(const unsigned char *p) {
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h ^ (h >> 15);
}

static uint32_t hash_u64(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
    return (uint32_t)k;
}

/* A power of two at least twice n, so open addressing stays short. */
static uint32_t table_size(uint32_t n) {
    uint32_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

static int piece_lookup(const Tokenizer *t, const char *s, size_t n) {
    for (uint32_t h = hash_bytes(s, n) & t->piece_mask;; h = (h + 1) & t->piece_mask) {
        uint32_t e = t->piece_table[h];
        if (!e) return -1;
        if (t->len[e - 1] == n && memcmp(t->bytes + t->offset[e - 1], s, n) == 0) return (int)e - 1;
    }
}

static int merge_lookup(const Tokenizer *t, uint32_t left, uint32_t right, uint32_t *rank) {
    uint64_t k = ((uint64_t)left << 32 | right) + 1;
    if (!t->n_merges) return -1;
    for (uint32_t h = hash_u64(k) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        if (!t->merge_key[h]) return -1;
        if (t->merge_key[h] == k) {
            *rank = t->merge_rank[h];
            return (int)t->merge_result[h];
        }
    }
}

/* "<0xNN>" with upper-case hex, as llama2.c's exporter and our learner spell byte pieces. */
static int byte_piece_value(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!hi || !lo) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

static void byte_piece_name(char out[7], int b) {
    snprintf(out, 7, "<0x%02X>", b);
}

void tokenizer_free(Tokenizer *t) {
    free(t->bytes); free(t->offset); free(t->len); free(t->score); free(t->byte_of);
    free(t->piece_table); free(t->merge_key); free(t->merge_rank); free(t->merge_result);
    memset(t, 0, sizeof *t);
}

int tokenizer_init(Tokenizer *t, const void *blob, size_t blob_bytes, int kind, unsigned flags,
                   int bos_id, int eos_id, char *err, size_t errlen) {
    const unsigned char *b = blob;
    memset(t, 0, sizeof *t);
    if (kind != TOK_SENTENCEPIECE && kind != TOK_BYTE_BPE)
        return fail(err, errlen, "tok_kind %d is not 0 (SentencePiece BPE) or 1 (byte-level BPE)", kind);
    if (flags & ~7u) return fail(err, errlen, "tok_flags 0x%x has unknown bits", flags);
    if (blob_bytes < 16) return fail(err, errlen, "tokenizer blob is %zu bytes, shorter than its 16-byte header", blob_bytes);
    uint32_t n = rd32(b), m = rd32(b + 4), maxlen = rd32(b + 8);
    if (rd32(b + 12)) return fail(err, errlen, "tokenizer blob reserved field is %u, not 0", rd32(b + 12));
    if (n < 1 || n > MAX_PIECES) return fail(err, errlen, "tokenizer n_pieces %u outside 1..%u", n, MAX_PIECES);
    if (kind == TOK_SENTENCEPIECE && m) return fail(err, errlen, "tokenizer has %u merges; tok_kind 0 has none", m);
    if (m > MAX_PIECES) return fail(err, errlen, "tokenizer n_merges %u above %u", m, MAX_PIECES);
    if (bos_id < -1 || bos_id >= (int)n) return fail(err, errlen, "bos_id %d outside -1..%u", bos_id, n - 1);
    if (eos_id < -1 || eos_id >= (int)n) return fail(err, errlen, "eos_id %d outside -1..%u", eos_id, n - 1);

    /* First pass: bounds, so that every allocation below has a validated size. */
    size_t off = 16, total = 0;
    uint32_t longest = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (blob_bytes - off < 8) return fail(err, errlen, "tokenizer blob ends inside piece %u of %u", i, n);
        float s = rdf32(b + off);
        uint32_t len = rd32(b + off + 4);
        off += 8;
        if (!isfinite(s)) return fail(err, errlen, "tokenizer piece %u has a non-finite score", i);
        if (len > blob_bytes - off) return fail(err, errlen, "tokenizer piece %u: length %u runs past the blob", i, len);
        off += len;
        total += len;
        if (len > longest) longest = len;
    }
    if (total > INT32_MAX) return fail(err, errlen, "tokenizer pieces hold %zu bytes, more than 2 GiB", total);
    if (longest != maxlen)
        return fail(err, errlen, "tokenizer max_piece_len is %u but the longest piece has %u bytes", maxlen, longest);
    if ((blob_bytes - off) / 8 != m || (blob_bytes - off) % 8)
        return fail(err, errlen, "tokenizer blob has %zu bytes after the pieces; %u merges need %llu", blob_bytes - off,
                    m, 8ULL * m);

    t->kind = kind; t->flags = flags; t->bos_id = bos_id; t->eos_id = eos_id;
    t->n_pieces = (int)n; t->n_merges = (int)m; t->max_piece_len = (int)maxlen;
    t->piece_mask = table_size(n) - 1;
    t->bytes = malloc(total ? total : 1);
    t->offset = malloc(sizeof(uint32_t) * n);
    t->len = malloc(sizeof(uint32_t) * n);
    t->score = malloc(sizeof(float) * n);
    t->byte_of = malloc(sizeof(int16_t) * n);
    t->piece_table = calloc((size_t)t->piece_mask + 1, sizeof(uint32_t));
    if (!t->bytes || !t->offset || !t->len || !t->score || !t->byte_of || !t->piece_table) goto oom;
    for (int i = 0; i < 256; i++) t->byte_piece[i] = -1;
    off = 16;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        t->score[i] = rdf32(b + off);
        t->len[i] = rd32(b + off + 4);
        t->offset[i] = at;
        memcpy(t->bytes + at, b + off + 8, t->len[i]);
        off += 8 + t->len[i];
        at += t->len[i];
        const char *p = t->bytes + t->offset[i];
        /* Duplicates keep the lowest id: it is the one lookups return. */
        uint32_t h = hash_bytes(p, t->len[i]) & t->piece_mask;
        int dup = 0;
        for (; t->piece_table[h]; h = (h + 1) & t->piece_mask) {
            uint32_t e = t->piece_table[h] - 1;
            if (t->len[e] == t->len[i] && memcmp(t->bytes + t->offset[e], p, t->len[i]) == 0) { dup = 1; break; }
        }
        if (!dup) t->piece_table[h] = i + 1;
        int bv = kind == TOK_SENTENCEPIECE ? byte_piece_value(p, t->len[i]) : -1;
        t->byte_of[i] = (int16_t)bv;
        if (bv >= 0 && t->byte_piece[bv] < 0) t->byte_piece[bv] = (int)i;
        if (kind == TOK_BYTE_BPE && t->len[i] == 1 && t->byte_piece[(unsigned char)p[0]] < 0)
            t->byte_piece[(unsigned char)p[0]] = (int)i;
    }
    if (kind == TOK_SENTENCEPIECE && (flags & TOKF_DUMMY_PREFIX) && piece_lookup(t, " ", 1) < 0) {
        tokenizer_free(t);
        return fail(err, errlen, "tokenizer has the dummy-prefix flag but no \" \" piece");
    }
    if (m) {
        t->merge_mask = table_size(m) - 1;
        t->merge_key = calloc((size_t)t->merge_mask + 1, sizeof(uint64_t));
        t->merge_rank = malloc(sizeof(uint32_t) * ((size_t)t->merge_mask + 1));
        t->merge_result = malloc(sizeof(uint32_t) * ((size_t)t->merge_mask + 1));
        char *cat = malloc(2 * (size_t)maxlen + 1);
        if (!t->merge_key || !t->merge_rank || !t->merge_result || !cat) { free(cat); goto oom; }
        for (uint32_t r = 0; r < m; r++, off += 8) {
            uint32_t l = rd32(b + off), rt = rd32(b + off + 4);
            const char *why = NULL;
            int res = -1;
            if (l >= n || rt >= n) why = "refers to a token outside the vocabulary";
            else if (!t->len[l] || !t->len[rt]) why = "joins an empty piece";
            else {
                memcpy(cat, t->bytes + t->offset[l], t->len[l]);
                memcpy(cat + t->len[l], t->bytes + t->offset[rt], t->len[rt]);
                res = t->len[l] + t->len[rt] <= maxlen ? piece_lookup(t, cat, t->len[l] + t->len[rt]) : -1;
                if (res < 0) why = "makes a piece that is not in the vocabulary";
            }
            if (why) {
                free(cat);
                tokenizer_free(t);
                return fail(err, errlen, "tokenizer merge %u (%u, %u) %s", r, l, rt, why);
            }
            uint64_t k = ((uint64_t)l << 32 | rt) + 1;
            uint32_t h = hash_u64(k) & t->merge_mask;
            while (t->merge_key[h] && t->merge_key[h] != k) h = (h + 1) & t->merge_mask;
            if (!t->merge_key[h]) { /* a repeated pair keeps its first (lowest) rank */
                t->merge_key[h] = k;
                t->merge_rank[h] = r;
                t->merge_result[h] = (uint32_t)res;
            }
        }
        free(cat);
    }
    return 0;
oom:
    tokenizer_free(t);
    return fail(err, errlen, "out of memory for a %u-piece tokenizer", n);
}

/* ---- building blobs ---- */

static unsigned char *blob_pack(int n, const char *const *piece, const uint32_t *len, const float *score,
                                size_t *bytes) {
    size_t total = 16;
    uint32_t maxlen = 0;
    for (int i = 0; i < n; i++) {
        total += 8 + len[i];
        if (len[i] > maxlen) maxlen = len[i];
    }
    unsigned char *b = malloc(total), *p = b + 16;
    if (!b) return NULL;
    wr32(b, (uint32_t)n); wr32(b + 4, 0); wr32(b + 8, maxlen); wr32(b + 12, 0);
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &score[i], 4);
        wr32(p, u);
        wr32(p + 4, len[i]);
        memcpy(p + 8, piece[i], len[i]);
        p += 8 + len[i];
    }
    *bytes = total;
    return b;
}

/* llama2.c's tokenizer.bin */
int tokenizer_init_llama2c(Tokenizer *t, const void *file, size_t file_bytes, int vocab_size,
                           char *err, size_t errlen) {
    const unsigned char *f = file;
    memset(t, 0, sizeof *t);
    if (vocab_size < 1 || (uint32_t)vocab_size > MAX_PIECES) return fail(err, errlen, "vocab_size %d out of range", vocab_size);
    if (file_bytes < 4) return fail(err, errlen, "too short for a llama2.c tokenizer.bin (%zu bytes)", file_bytes);
    const char **piece = malloc(sizeof(char *) * (size_t)vocab_size);
    uint32_t *len = malloc(sizeof(uint32_t) * (size_t)vocab_size);
    float *score = malloc(sizeof(float) * (size_t)vocab_size);
    int rc = -1;
    if (!piece || !len || !score) { fail(err, errlen, "out of memory"); goto done; }
    size_t off = 4;
    for (int i = 0; i < vocab_size; i++) {
        if (file_bytes - off < 8) {
            fail(err, errlen, "ends at piece %d, but the model's vocab_size is %d", i, vocab_size);
            goto done;
        }
        score[i] = rdf32(f + off);
        len[i] = rd32(f + off + 4);
        if ((int32_t)len[i] < 0 || len[i] > file_bytes - off - 8) {
            fail(err, errlen, "piece %d has length %d, past the end of the file", i, (int32_t)len[i]);
            goto done;
        }
        piece[i] = (const char *)f + off + 8;
        off += 8 + len[i];
    }
    if (off != file_bytes) {
        fail(err, errlen, "has more than the model's vocab_size of %d pieces", vocab_size);
        goto done;
    }
    size_t bytes;
    unsigned char *blob = blob_pack(vocab_size, piece, len, score, &bytes);
    if (!blob) { fail(err, errlen, "out of memory"); goto done; }
    int space = 0; /* llama2.c looks the dummy prefix up as " " */
    for (int i = 0; i < vocab_size && !space; i++) space = len[i] == 1 && piece[i][0] == ' ';
    rc = tokenizer_init(t, blob, bytes, TOK_SENTENCEPIECE, (space ? TOKF_DUMMY_PREFIX : 0) | TOKF_ADD_BOS | TOKF_BOS_STOPS,
                        vocab_size > 1 ? 1 : -1, vocab_size > 2 ? 2 : -1, err, errlen);
    free(blob);
done:
    free(piece); free(len); free(score);
    return rc;
}

/* ---- the merge loop ----
 * Symbols form a linked list; every adjacent pair that can merge sits in a min-heap keyed by
 * (priority, position of its left symbol), so the pop order is exactly the "best pair,
 * leftmost on ties" of the quadratic rescan. Entries go stale when a neighbour merges: a
 * symbol's version counts the changes to it and to its right neighbour, and an entry is live
 * while its left symbol exists with the version it was queued at.
 * The heap is 4-ary with 16-byte entries, offset so that each node's four children share one
 * 64-byte cache line: a long prompt's heap is far larger than the caches. */

typedef struct {
    uint64_t key;   /* priority << 32 | left symbol */
    uint32_t ver;
    int32_t result;
} Cand;

#define HEAP_PAD 3

typedef struct {
    int *id, *prev, *next;
    uint32_t *ver;
    Cand *heap_mem, *heap, *batch;
    size_t nheap;
    char *cat;
} Work;

static void heap_push(Work *w, Cand c) {
    size_t i = w->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (w->heap[p].key <= c.key) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static Cand heap_pop(Work *w) {
    Cand top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t c = 4 * i + 1, best = c;
        if (c >= n) break;
        for (size_t k = c + 1; k < c + 4 && k < n; k++)
            if (w->heap[k].key < w->heap[best].key) best = k;
        if (last.key <= w->heap[best].key) break;
        w->heap[i] = w->heap[best];
        i = best;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Scores sort descending as unsigned keys; -0 and +0 tie as they do for float compares. */
static uint32_t score_key(float s) {
    uint32_t u;
    if (s == 0.0f) s = 0.0f;
    memcpy(&u, &s, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
}

static void push_pair(const Tokenizer *t, Work *w, int left) {
    if (left < 0 || w->next[left] < 0) return;
    int l = w->id[left], r = w->id[w->next[left]], res;
    uint32_t prio;
    if (t->kind == TOK_BYTE_BPE) {
        res = merge_lookup(t, (uint32_t)l, (uint32_t)r, &prio);
        if (res < 0) return;
    } else {
        /* A "<0xNN>" piece stands for one raw byte, not for its spelling: it neither merges
         * by that spelling nor is made by merging text that happens to spell it. */
        size_t ll = t->len[l], rl = t->len[r];
        if (ll + rl > (size_t)t->max_piece_len || t->byte_of[l] >= 0 || t->byte_of[r] >= 0) return;
        memcpy(w->cat, t->bytes + t->offset[l], ll);
        memcpy(w->cat + ll, t->bytes + t->offset[r], rl);
        res = piece_lookup(t, w->cat, ll + rl);
        if (res < 0 || t->byte_of[res] >= 0 || !(t->score[res] > NO_MERGE_SCORE)) return;
        prio = score_key(t->score[res]);
    }
    heap_push(w, (Cand){(uint64_t)prio << 32 | (uint32_t)left, w->ver[left], res});
}

static int cand_valid(const Work *w, const Cand *c) {
    int left = (int)(uint32_t)c->key;
    return w->id[left] >= 0 && w->ver[left] == c->ver;
}

static void apply(const Tokenizer *t, Work *w, const Cand *c) {
    int left = (int)(uint32_t)c->key, right = w->next[left], nx = w->next[right], p = w->prev[left];
    w->id[left] = c->result;
    w->id[right] = -1;
    w->next[left] = nx;
    if (nx >= 0) w->prev[nx] = left;
    w->ver[left]++;
    if (p >= 0) w->ver[p]++;
    push_pair(t, w, p);
    push_pair(t, w, left);
}

/* Merges the symbols first..first+n-1 (already linked). GPT-2 merges every occurrence of the
 * best pair, left to right, before it looks for the next best pair (even if a merge just made
 * a pair of lower rank); a merge can never recreate the pair being merged, so applying all of
 * the rank's heap entries as one batch does exactly that. A left symbol has at most one live
 * entry, so a batch holds at most n. */
static void merge_all(const Tokenizer *t, Work *w, int first, int n) {
    w->nheap = 0;
    for (int i = first; i < first + n - 1; i++) push_pair(t, w, i);
    while (w->nheap) {
        Cand c = heap_pop(w);
        if (!cand_valid(w, &c)) continue;
        if (t->kind == TOK_SENTENCEPIECE) {
            apply(t, w, &c);
            continue;
        }
        size_t nb = 0;
        w->batch[nb++] = c;
        while (w->nheap && w->heap[0].key >> 32 == c.key >> 32) {
            Cand d = heap_pop(w);
            if (cand_valid(w, &d)) w->batch[nb++] = d;
        }
        for (size_t i = 0; i < nb; i++)
            if (cand_valid(w, &w->batch[i])) apply(t, w, &w->batch[i]);
    }
}

/* ---- pre-tokenisation ---- */

/* llama2.c's character grouping: a byte and the continuation bytes after it, at most 4. */
static size_t sp_group(const unsigned char *s, size_t i, size_t len) {
    size_t j = i + 1;
    while (j < len && j - i < 4 && (s[j] & 0xC0) == 0x80) j++;
    return j - i;
}

/* Length of the well-formed UTF-8 character at s[i..len) (Unicode table 3-7), or 0. */
static size_t utf8_char(const unsigned char *s, size_t i, size_t len, uint32_t *cp) {
    unsigned c = s[i];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) { *cp = c; return 1; }
    if (c < 0xC2 || c > 0xF4) return 0;
    if (c < 0xE0) n = 2, *cp = c & 0x1F;
    else if (c < 0xF0) n = 3, *cp = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else n = 4, *cp = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (len - i < n) return 0;
    for (size_t k = 1; k < n; k++) {
        unsigned d = s[i + k];
        if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        *cp = *cp << 6 | (d & 0x3F);
    }
    return n;
}

enum { CLS_OTHER = 0, CLS_L = 1, CLS_N = 2, CLS_S = 3 };

/* BEGIN GENERATED by tools/gen_unicode_tables.py from the Node v20.20.2 regex engine (Unicode 17.0) */
static const uint32_t uni_class_table[840][3] = {
    {0x9,0xD,3},{0x20,0x20,3},{0x30,0x39,2},{0x41,0x5A,1},
    {0x61,0x7A,1},{0xA0,0xA0,3},{0xAA,0xAA,1},{0xB2,0xB3,2},
    {0xB5,0xB5,1},{0xB9,0xB9,2},{0xBA,0xBA,1},{0xBC,0xBE,2},
    {0xC0,0xD6,1},{0xD8,0xF6,1},{0xF8,0x2C1,1},{0x2C6,0x2D1,1},
    {0x2E0,0x2E4,1},{0x2EC,0x2EC,1},{0x2EE,0x2EE,1},{0x370,0x374,1},
    {0x376,0x377,1},{0x37A,0x37D,1},{0x37F,0x37F,1},{0x386,0x386,1},
    {0x388,0x38A,1},{0x38C,0x38C,1},{0x38E,0x3A1,1},{0x3A3,0x3F5,1},
    {0x3F7,0x481,1},{0x48A,0x52F,1},{0x531,0x556,1},{0x559,0x559,1},
    {0x560,0x588,1},{0x5D0,0x5EA,1},{0x5EF,0x5F2,1},{0x620,0x64A,1},
    {0x660,0x669,2},{0x66E,0x66F,1},{0x671,0x6D3,1},{0x6D5,0x6D5,1},
    {0x6E5,0x6E6,1},{0x6EE,0x6EF,1},{0x6F0,0x6F9,2},{0x6FA,0x6FC,1},
    {0x6FF,0x6FF,1},{0x710,0x710,1},{0x712,0x72F,1},{0x74D,0x7A5,1},
    {0x7B1,0x7B1,1},{0x7C0,0x7C9,2},{0x7CA,0x7EA,1},{0x7F4,0x7F5,1},
    {0x7FA,0x7FA,1},{0x800,0x815,1},{0x81A,0x81A,1},{0x824,0x824,1},
    {0x828,0x828,1},{0x840,0x858,1},{0x860,0x86A,1},{0x870,0x887,1},
    {0x889,0x88F,1},{0x8A0,0x8C9,1},{0x904,0x939,1},{0x93D,0x93D,1},
    {0x950,0x950,1},{0x958,0x961,1},{0x966,0x96F,2},{0x971,0x980,1},
    {0x985,0x98C,1},{0x98F,0x990,1},{0x993,0x9A8,1},{0x9AA,0x9B0,1},
    {0x9B2,0x9B2,1},{0x9B6,0x9B9,1},{0x9BD,0x9BD,1},{0x9CE,0x9CE,1},
    {0x9DC,0x9DD,1},{0x9DF,0x9E1,1},{0x9E6,0x9EF,2},{0x9F0,0x9F1,1},
    {0x9F4,0x9F9,2},{0x9FC,0x9FC,1},{0xA05,0xA0A,1},{0xA0F,0xA10,1},
    {0xA13,0xA28,1},{0xA2A,0xA30,1},{0xA32,0xA33,1},{0xA35,0xA36,1},
    {0xA38,0xA39,1},{0xA59,0xA5C,1},{0xA5E,0xA5E,1},{0xA66,0xA6F,2},
    {0xA72,0xA74,1},{0xA85,0xA8D,1},{0xA8F,0xA91,1},{0xA93,0xAA8,1},
    {0xAAA,0xAB0,1},{0xAB2,0xAB3,1},{0xAB5,0xAB9,1},{0xABD,0xABD,1},
    {0xAD0,0xAD0,1},{0xAE0,0xAE1,1},{0xAE6,0xAEF,2},{0xAF9,0xAF9,1},
    {0xB05,0xB0C,1},{0xB0F,0xB10,1},{0xB13,0xB28,1},{0xB2A,0xB30,1},
    {0xB32,0xB33,1},{0xB35,0xB39,1},{0xB3D,0xB3D,1},{0xB5C,0xB5D,1},
    {0xB5F,0xB61,1},{0xB66,0xB6F,2},{0xB71,0xB71,1},{0xB72,0xB77,2},
    {0xB83,0xB83,1},{0xB85,0xB8A,1},{0xB8E,0xB90,1},{0xB92,0xB95,1},
    {0xB99,0xB9A,1},{0xB9C,0xB9C,1},{0xB9E,0xB9F,1},{0xBA3,0xBA4,1},
    {0xBA8,0xBAA,1},{0xBAE,0xBB9,1},{0xBD0,0xBD0,1},{0xBE6,0xBF2,2},
    {0xC05,0xC0C,1},{0xC0E,0xC10,1},{0xC12,0xC28,1},{0xC2A,0xC39,1},
    {0xC3D,0xC3D,1},{0xC58,0xC5A,1},{0xC5C,0xC5D,1},{0xC60,0xC61,1},
    {0xC66,0xC6F,2},{0xC78,0xC7E,2},{0xC80,0xC80,1},{0xC85,0xC8C,1},
    {0xC8E,0xC90,1},{0xC92,0xCA8,1},{0xCAA,0xCB3,1},{0xCB5,0xCB9,1},
    {0xCBD,0xCBD,1},{0xCDC,0xCDE,1},{0xCE0,0xCE1,1},{0xCE6,0xCEF,2},
    {0xCF1,0xCF2,1},{0xD04,0xD0C,1},{0xD0E,0xD10,1},{0xD12,0xD3A,1},
    {0xD3D,0xD3D,1},{0xD4E,0xD4E,1},{0xD54,0xD56,1},{0xD58,0xD5E,2},
    {0xD5F,0xD61,1},{0xD66,0xD78,2},{0xD7A,0xD7F,1},{0xD85,0xD96,1},
    {0xD9A,0xDB1,1},{0xDB3,0xDBB,1},{0xDBD,0xDBD,1},{0xDC0,0xDC6,1},
    {0xDE6,0xDEF,2},{0xE01,0xE30,1},{0xE32,0xE33,1},{0xE40,0xE46,1},
    {0xE50,0xE59,2},{0xE81,0xE82,1},{0xE84,0xE84,1},{0xE86,0xE8A,1},
    {0xE8C,0xEA3,1},{0xEA5,0xEA5,1},{0xEA7,0xEB0,1},{0xEB2,0xEB3,1},
    {0xEBD,0xEBD,1},{0xEC0,0xEC4,1},{0xEC6,0xEC6,1},{0xED0,0xED9,2},
    {0xEDC,0xEDF,1},{0xF00,0xF00,1},{0xF20,0xF33,2},{0xF40,0xF47,1},
    {0xF49,0xF6C,1},{0xF88,0xF8C,1},{0x1000,0x102A,1},{0x103F,0x103F,1},
    {0x1040,0x1049,2},{0x1050,0x1055,1},{0x105A,0x105D,1},{0x1061,0x1061,1},
    {0x1065,0x1066,1},{0x106E,0x1070,1},{0x1075,0x1081,1},{0x108E,0x108E,1},
    {0x1090,0x1099,2},{0x10A0,0x10C5,1},{0x10C7,0x10C7,1},{0x10CD,0x10CD,1},
    {0x10D0,0x10FA,1},{0x10FC,0x1248,1},{0x124A,0x124D,1},{0x1250,0x1256,1},
    {0x1258,0x1258,1},{0x125A,0x125D,1},{0x1260,0x1288,1},{0x128A,0x128D,1},
    {0x1290,0x12B0,1},{0x12B2,0x12B5,1},{0x12B8,0x12BE,1},{0x12C0,0x12C0,1},
    {0x12C2,0x12C5,1},{0x12C8,0x12D6,1},{0x12D8,0x1310,1},{0x1312,0x1315,1},
    {0x1318,0x135A,1},{0x1369,0x137C,2},{0x1380,0x138F,1},{0x13A0,0x13F5,1},
    {0x13F8,0x13FD,1},{0x1401,0x166C,1},{0x166F,0x167F,1},{0x1680,0x1680,3},
    {0x1681,0x169A,1},{0x16A0,0x16EA,1},{0x16EE,0x16F0,2},{0x16F1,0x16F8,1},
    {0x1700,0x1711,1},{0x171F,0x1731,1},{0x1740,0x1751,1},{0x1760,0x176C,1},
    {0x176E,0x1770,1},{0x1780,0x17B3,1},{0x17D7,0x17D7,1},{0x17DC,0x17DC,1},
    {0x17E0,0x17E9,2},{0x17F0,0x17F9,2},{0x1810,0x1819,2},{0x1820,0x1878,1},
    {0x1880,0x1884,1},{0x1887,0x18A8,1},{0x18AA,0x18AA,1},{0x18B0,0x18F5,1},
    {0x1900,0x191E,1},{0x1946,0x194F,2},{0x1950,0x196D,1},{0x1970,0x1974,1},
    {0x1980,0x19AB,1},{0x19B0,0x19C9,1},{0x19D0,0x19DA,2},{0x1A00,0x1A16,1},
    {0x1A20,0x1A54,1},{0x1A80,0x1A89,2},{0x1A90,0x1A99,2},{0x1AA7,0x1AA7,1},
    {0x1B05,0x1B33,1},{0x1B45,0x1B4C,1},{0x1B50,0x1B59,2},{0x1B83,0x1BA0,1},
    {0x1BAE,0x1BAF,1},{0x1BB0,0x1BB9,2},{0x1BBA,0x1BE5,1},{0x1C00,0x1C23,1},
    {0x1C40,0x1C49,2},{0x1C4D,0x1C4F,1},{0x1C50,0x1C59,2},{0x1C5A,0x1C7D,1},
    {0x1C80,0x1C8A,1},{0x1C90,0x1CBA,1},{0x1CBD,0x1CBF,1},{0x1CE9,0x1CEC,1},
    {0x1CEE,0x1CF3,1},{0x1CF5,0x1CF6,1},{0x1CFA,0x1CFA,1},{0x1D00,0x1DBF,1},
    {0x1E00,0x1F15,1},{0x1F18,0x1F1D,1},{0x1F20,0x1F45,1},{0x1F48,0x1F4D,1},
    {0x1F50,0x1F57,1},{0x1F59,0x1F59,1},{0x1F5B,0x1F5B,1},{0x1F5D,0x1F5D,1},
    {0x1F5F,0x1F7D,1},{0x1F80,0x1FB4,1},{0x1FB6,0x1FBC,1},{0x1FBE,0x1FBE,1},
    {0x1FC2,0x1FC4,1},{0x1FC6,0x1FCC,1},{0x1FD0,0x1FD3,1},{0x1FD6,0x1FDB,1},
    {0x1FE0,0x1FEC,1},{0x1FF2,0x1FF4,1},{0x1FF6,0x1FFC,1},{0x2000,0x200A,3},
    {0x2028,0x2029,3},{0x202F,0x202F,3},{0x205F,0x205F,3},{0x2070,0x2070,2},
    {0x2071,0x2071,1},{0x2074,0x2079,2},{0x207F,0x207F,1},{0x2080,0x2089,2},
    {0x2090,0x209C,1},{0x2102,0x2102,1},{0x2107,0x2107,1},{0x210A,0x2113,1},
    {0x2115,0x2115,1},{0x2119,0x211D,1},{0x2124,0x2124,1},{0x2126,0x2126,1},
    {0x2128,0x2128,1},{0x212A,0x212D,1},{0x212F,0x2139,1},{0x213C,0x213F,1},
    {0x2145,0x2149,1},{0x214E,0x214E,1},{0x2150,0x2182,2},{0x2183,0x2184,1},
    {0x2185,0x2189,2},{0x2460,0x249B,2},{0x24EA,0x24FF,2},{0x2776,0x2793,2},
    {0x2C00,0x2CE4,1},{0x2CEB,0x2CEE,1},{0x2CF2,0x2CF3,1},{0x2CFD,0x2CFD,2},
    {0x2D00,0x2D25,1},{0x2D27,0x2D27,1},{0x2D2D,0x2D2D,1},{0x2D30,0x2D67,1},
    {0x2D6F,0x2D6F,1},{0x2D80,0x2D96,1},{0x2DA0,0x2DA6,1},{0x2DA8,0x2DAE,1},
    {0x2DB0,0x2DB6,1},{0x2DB8,0x2DBE,1},{0x2DC0,0x2DC6,1},{0x2DC8,0x2DCE,1},
    {0x2DD0,0x2DD6,1},{0x2DD8,0x2DDE,1},{0x2E2F,0x2E2F,1},{0x3000,0x3000,3},
    {0x3005,0x3006,1},{0x3007,0x3007,2},{0x3021,0x3029,2},{0x3031,0x3035,1},
    {0x3038,0x303A,2},{0x303B,0x303C,1},{0x3041,0x3096,1},{0x309D,0x309F,1},
    {0x30A1,0x30FA,1},{0x30FC,0x30FF,1},{0x3105,0x312F,1},{0x3131,0x318E,1},
    {0x3192,0x3195,2},{0x31A0,0x31BF,1},{0x31F0,0x31FF,1},{0x3220,0x3229,2},
    {0x3248,0x324F,2},{0x3251,0x325F,2},{0x3280,0x3289,2},{0x32B1,0x32BF,2},
    {0x3400,0x4DBF,1},{0x4E00,0xA48C,1},{0xA4D0,0xA4FD,1},{0xA500,0xA60C,1},
    {0xA610,0xA61F,1},{0xA620,0xA629,2},{0xA62A,0xA62B,1},{0xA640,0xA66E,1},
    {0xA67F,0xA69D,1},{0xA6A0,0xA6E5,1},{0xA6E6,0xA6EF,2},{0xA717,0xA71F,1},
    {0xA722,0xA788,1},{0xA78B,0xA7DC,1},{0xA7F1,0xA801,1},{0xA803,0xA805,1},
    {0xA807,0xA80A,1},{0xA80C,0xA822,1},{0xA830,0xA835,2},{0xA840,0xA873,1},
    {0xA882,0xA8B3,1},{0xA8D0,0xA8D9,2},{0xA8F2,0xA8F7,1},{0xA8FB,0xA8FB,1},
    {0xA8FD,0xA8FE,1},{0xA900,0xA909,2},{0xA90A,0xA925,1},{0xA930,0xA946,1},
    {0xA960,0xA97C,1},{0xA984,0xA9B2,1},{0xA9CF,0xA9CF,1},{0xA9D0,0xA9D9,2},
    {0xA9E0,0xA9E4,1},{0xA9E6,0xA9EF,1},{0xA9F0,0xA9F9,2},{0xA9FA,0xA9FE,1},
    {0xAA00,0xAA28,1},{0xAA40,0xAA42,1},{0xAA44,0xAA4B,1},{0xAA50,0xAA59,2},
    {0xAA60,0xAA76,1},{0xAA7A,0xAA7A,1},{0xAA7E,0xAAAF,1},{0xAAB1,0xAAB1,1},
    {0xAAB5,0xAAB6,1},{0xAAB9,0xAABD,1},{0xAAC0,0xAAC0,1},{0xAAC2,0xAAC2,1},
    {0xAADB,0xAADD,1},{0xAAE0,0xAAEA,1},{0xAAF2,0xAAF4,1},{0xAB01,0xAB06,1},
    {0xAB09,0xAB0E,1},{0xAB11,0xAB16,1},{0xAB20,0xAB26,1},{0xAB28,0xAB2E,1},
    {0xAB30,0xAB5A,1},{0xAB5C,0xAB69,1},{0xAB70,0xABE2,1},{0xABF0,0xABF9,2},
    {0xAC00,0xD7A3,1},{0xD7B0,0xD7C6,1},{0xD7CB,0xD7FB,1},{0xF900,0xFA6D,1},
    {0xFA70,0xFAD9,1},{0xFB00,0xFB06,1},{0xFB13,0xFB17,1},{0xFB1D,0xFB1D,1},
    {0xFB1F,0xFB28,1},{0xFB2A,0xFB36,1},{0xFB38,0xFB3C,1},{0xFB3E,0xFB3E,1},
    {0xFB40,0xFB41,1},{0xFB43,0xFB44,1},{0xFB46,0xFBB1,1},{0xFBD3,0xFD3D,1},
    {0xFD50,0xFD8F,1},{0xFD92,0xFDC7,1},{0xFDF0,0xFDFB,1},{0xFE70,0xFE74,1},
    {0xFE76,0xFEFC,1},{0xFEFF,0xFEFF,3},{0xFF10,0xFF19,2},{0xFF21,0xFF3A,1},
    {0xFF41,0xFF5A,1},{0xFF66,0xFFBE,1},{0xFFC2,0xFFC7,1},{0xFFCA,0xFFCF,1},
    {0xFFD2,0xFFD7,1},{0xFFDA,0xFFDC,1},{0x10000,0x1000B,1},{0x1000D,0x10026,1},
    {0x10028,0x1003A,1},{0x1003C,0x1003D,1},{0x1003F,0x1004D,1},{0x10050,0x1005D,1},
    {0x10080,0x100FA,1},{0x10107,0x10133,2},{0x10140,0x10178,2},{0x1018A,0x1018B,2},
    {0x10280,0x1029C,1},{0x102A0,0x102D0,1},{0x102E1,0x102FB,2},{0x10300,0x1031F,1},
    {0x10320,0x10323,2},{0x1032D,0x10340,1},{0x10341,0x10341,2},{0x10342,0x10349,1},
    {0x1034A,0x1034A,2},{0x10350,0x10375,1},{0x10380,0x1039D,1},{0x103A0,0x103C3,1},
    {0x103C8,0x103CF,1},{0x103D1,0x103D5,2},{0x10400,0x1049D,1},{0x104A0,0x104A9,2},
    {0x104B0,0x104D3,1},{0x104D8,0x104FB,1},{0x10500,0x10527,1},{0x10530,0x10563,1},
    {0x10570,0x1057A,1},{0x1057C,0x1058A,1},{0x1058C,0x10592,1},{0x10594,0x10595,1},
    {0x10597,0x105A1,1},{0x105A3,0x105B1,1},{0x105B3,0x105B9,1},{0x105BB,0x105BC,1},
    {0x105C0,0x105F3,1},{0x10600,0x10736,1},{0x10740,0x10755,1},{0x10760,0x10767,1},
    {0x10780,0x10785,1},{0x10787,0x107B0,1},{0x107B2,0x107BA,1},{0x10800,0x10805,1},
    {0x10808,0x10808,1},{0x1080A,0x10835,1},{0x10837,0x10838,1},{0x1083C,0x1083C,1},
    {0x1083F,0x10855,1},{0x10858,0x1085F,2},{0x10860,0x10876,1},{0x10879,0x1087F,2},
    {0x10880,0x1089E,1},{0x108A7,0x108AF,2},{0x108E0,0x108F2,1},{0x108F4,0x108F5,1},
    {0x108FB,0x108FF,2},{0x10900,0x10915,1},{0x10916,0x1091B,2},{0x10920,0x10939,1},
    {0x10940,0x10959,1},{0x10980,0x109B7,1},{0x109BC,0x109BD,2},{0x109BE,0x109BF,1},
    {0x109C0,0x109CF,2},{0x109D2,0x109FF,2},{0x10A00,0x10A00,1},{0x10A10,0x10A13,1},
    {0x10A15,0x10A17,1},{0x10A19,0x10A35,1},{0x10A40,0x10A48,2},{0x10A60,0x10A7C,1},
    {0x10A7D,0x10A7E,2},{0x10A80,0x10A9C,1},{0x10A9D,0x10A9F,2},{0x10AC0,0x10AC7,1},
    {0x10AC9,0x10AE4,1},{0x10AEB,0x10AEF,2},{0x10B00,0x10B35,1},{0x10B40,0x10B55,1},
    {0x10B58,0x10B5F,2},{0x10B60,0x10B72,1},{0x10B78,0x10B7F,2},{0x10B80,0x10B91,1},
    {0x10BA9,0x10BAF,2},{0x10C00,0x10C48,1},{0x10C80,0x10CB2,1},{0x10CC0,0x10CF2,1},
    {0x10CFA,0x10CFF,2},{0x10D00,0x10D23,1},{0x10D30,0x10D39,2},{0x10D40,0x10D49,2},
    {0x10D4A,0x10D65,1},{0x10D6F,0x10D85,1},{0x10E60,0x10E7E,2},{0x10E80,0x10EA9,1},
    {0x10EB0,0x10EB1,1},{0x10EC2,0x10EC7,1},{0x10F00,0x10F1C,1},{0x10F1D,0x10F26,2},
    {0x10F27,0x10F27,1},{0x10F30,0x10F45,1},{0x10F51,0x10F54,2},{0x10F70,0x10F81,1},
    {0x10FB0,0x10FC4,1},{0x10FC5,0x10FCB,2},{0x10FE0,0x10FF6,1},{0x11003,0x11037,1},
    {0x11052,0x1106F,2},{0x11071,0x11072,1},{0x11075,0x11075,1},{0x11083,0x110AF,1},
    {0x110D0,0x110E8,1},{0x110F0,0x110F9,2},{0x11103,0x11126,1},{0x11136,0x1113F,2},
    {0x11144,0x11144,1},{0x11147,0x11147,1},{0x11150,0x11172,1},{0x11176,0x11176,1},
    {0x11183,0x111B2,1},{0x111C1,0x111C4,1},{0x111D0,0x111D9,2},{0x111DA,0x111DA,1},
    {0x111DC,0x111DC,1},{0x111E1,0x111F4,2},{0x11200,0x11211,1},{0x11213,0x1122B,1},
    {0x1123F,0x11240,1},{0x11280,0x11286,1},{0x11288,0x11288,1},{0x1128A,0x1128D,1},
    {0x1128F,0x1129D,1},{0x1129F,0x112A8,1},{0x112B0,0x112DE,1},{0x112F0,0x112F9,2},
    {0x11305,0x1130C,1},{0x1130F,0x11310,1},{0x11313,0x11328,1},{0x1132A,0x11330,1},
    {0x11332,0x11333,1},{0x11335,0x11339,1},{0x1133D,0x1133D,1},{0x11350,0x11350,1},
    {0x1135D,0x11361,1},{0x11380,0x11389,1},{0x1138B,0x1138B,1},{0x1138E,0x1138E,1},
    {0x11390,0x113B5,1},{0x113B7,0x113B7,1},{0x113D1,0x113D1,1},{0x113D3,0x113D3,1},
    {0x11400,0x11434,1},{0x11447,0x1144A,1},{0x11450,0x11459,2},{0x1145F,0x11461,1},
    {0x11480,0x114AF,1},{0x114C4,0x114C5,1},{0x114C7,0x114C7,1},{0x114D0,0x114D9,2},
    {0x11580,0x115AE,1},{0x115D8,0x115DB,1},{0x11600,0x1162F,1},{0x11644,0x11644,1},
    {0x11650,0x11659,2},{0x11680,0x116AA,1},{0x116B8,0x116B8,1},{0x116C0,0x116C9,2},
    {0x116D0,0x116E3,2},{0x11700,0x1171A,1},{0x11730,0x1173B,2},{0x11740,0x11746,1},
    {0x11800,0x1182B,1},{0x118A0,0x118DF,1},{0x118E0,0x118F2,2},{0x118FF,0x11906,1},
    {0x11909,0x11909,1},{0x1190C,0x11913,1},{0x11915,0x11916,1},{0x11918,0x1192F,1},
    {0x1193F,0x1193F,1},{0x11941,0x11941,1},{0x11950,0x11959,2},{0x119A0,0x119A7,1},
    {0x119AA,0x119D0,1},{0x119E1,0x119E1,1},{0x119E3,0x119E3,1},{0x11A00,0x11A00,1},
    {0x11A0B,0x11A32,1},{0x11A3A,0x11A3A,1},{0x11A50,0x11A50,1},{0x11A5C,0x11A89,1},
    {0x11A9D,0x11A9D,1},{0x11AB0,0x11AF8,1},{0x11BC0,0x11BE0,1},{0x11BF0,0x11BF9,2},
    {0x11C00,0x11C08,1},{0x11C0A,0x11C2E,1},{0x11C40,0x11C40,1},{0x11C50,0x11C6C,2},
    {0x11C72,0x11C8F,1},{0x11D00,0x11D06,1},{0x11D08,0x11D09,1},{0x11D0B,0x11D30,1},
    {0x11D46,0x11D46,1},{0x11D50,0x11D59,2},{0x11D60,0x11D65,1},{0x11D67,0x11D68,1},
    {0x11D6A,0x11D89,1},{0x11D98,0x11D98,1},{0x11DA0,0x11DA9,2},{0x11DB0,0x11DDB,1},
    {0x11DE0,0x11DE9,2},{0x11EE0,0x11EF2,1},{0x11F02,0x11F02,1},{0x11F04,0x11F10,1},
    {0x11F12,0x11F33,1},{0x11F50,0x11F59,2},{0x11FB0,0x11FB0,1},{0x11FC0,0x11FD4,2},
    {0x12000,0x12399,1},{0x12400,0x1246E,2},{0x12480,0x12543,1},{0x12F90,0x12FF0,1},
    {0x13000,0x1342F,1},{0x13441,0x13446,1},{0x13460,0x143FA,1},{0x14400,0x14646,1},
    {0x16100,0x1611D,1},{0x16130,0x16139,2},{0x16800,0x16A38,1},{0x16A40,0x16A5E,1},
    {0x16A60,0x16A69,2},{0x16A70,0x16ABE,1},{0x16AC0,0x16AC9,2},{0x16AD0,0x16AED,1},
    {0x16B00,0x16B2F,1},{0x16B40,0x16B43,1},{0x16B50,0x16B59,2},{0x16B5B,0x16B61,2},
    {0x16B63,0x16B77,1},{0x16B7D,0x16B8F,1},{0x16D40,0x16D6C,1},{0x16D70,0x16D79,2},
    {0x16E40,0x16E7F,1},{0x16E80,0x16E96,2},{0x16EA0,0x16EB8,1},{0x16EBB,0x16ED3,1},
    {0x16F00,0x16F4A,1},{0x16F50,0x16F50,1},{0x16F93,0x16F9F,1},{0x16FE0,0x16FE1,1},
    {0x16FE3,0x16FE3,1},{0x16FF2,0x16FF3,1},{0x16FF4,0x16FF6,2},{0x17000,0x18CD5,1},
    {0x18CFF,0x18D1E,1},{0x18D80,0x18DF2,1},{0x1AFF0,0x1AFF3,1},{0x1AFF5,0x1AFFB,1},
    {0x1AFFD,0x1AFFE,1},{0x1B000,0x1B122,1},{0x1B132,0x1B132,1},{0x1B150,0x1B152,1},
    {0x1B155,0x1B155,1},{0x1B164,0x1B167,1},{0x1B170,0x1B2FB,1},{0x1BC00,0x1BC6A,1},
    {0x1BC70,0x1BC7C,1},{0x1BC80,0x1BC88,1},{0x1BC90,0x1BC99,1},{0x1CCF0,0x1CCF9,2},
    {0x1D2C0,0x1D2D3,2},{0x1D2E0,0x1D2F3,2},{0x1D360,0x1D378,2},{0x1D400,0x1D454,1},
    {0x1D456,0x1D49C,1},{0x1D49E,0x1D49F,1},{0x1D4A2,0x1D4A2,1},{0x1D4A5,0x1D4A6,1},
    {0x1D4A9,0x1D4AC,1},{0x1D4AE,0x1D4B9,1},{0x1D4BB,0x1D4BB,1},{0x1D4BD,0x1D4C3,1},
    {0x1D4C5,0x1D505,1},{0x1D507,0x1D50A,1},{0x1D50D,0x1D514,1},{0x1D516,0x1D51C,1},
    {0x1D51E,0x1D539,1},{0x1D53B,0x1D53E,1},{0x1D540,0x1D544,1},{0x1D546,0x1D546,1},
    {0x1D54A,0x1D550,1},{0x1D552,0x1D6A5,1},{0x1D6A8,0x1D6C0,1},{0x1D6C2,0x1D6DA,1},
    {0x1D6DC,0x1D6FA,1},{0x1D6FC,0x1D714,1},{0x1D716,0x1D734,1},{0x1D736,0x1D74E,1},
    {0x1D750,0x1D76E,1},{0x1D770,0x1D788,1},{0x1D78A,0x1D7A8,1},{0x1D7AA,0x1D7C2,1},
    {0x1D7C4,0x1D7CB,1},{0x1D7CE,0x1D7FF,2},{0x1DF00,0x1DF1E,1},{0x1DF25,0x1DF2A,1},
    {0x1E030,0x1E06D,1},{0x1E100,0x1E12C,1},{0x1E137,0x1E13D,1},{0x1E140,0x1E149,2},
    {0x1E14E,0x1E14E,1},{0x1E290,0x1E2AD,1},{0x1E2C0,0x1E2EB,1},{0x1E2F0,0x1E2F9,2},
    {0x1E4D0,0x1E4EB,1},{0x1E4F0,0x1E4F9,2},{0x1E5D0,0x1E5ED,1},{0x1E5F0,0x1E5F0,1},
    {0x1E5F1,0x1E5FA,2},{0x1E6C0,0x1E6DE,1},{0x1E6E0,0x1E6E2,1},{0x1E6E4,0x1E6E5,1},
    {0x1E6E7,0x1E6ED,1},{0x1E6F0,0x1E6F4,1},{0x1E6FE,0x1E6FF,1},{0x1E7E0,0x1E7E6,1},
    {0x1E7E8,0x1E7EB,1},{0x1E7ED,0x1E7EE,1},{0x1E7F0,0x1E7FE,1},{0x1E800,0x1E8C4,1},
    {0x1E8C7,0x1E8CF,2},{0x1E900,0x1E943,1},{0x1E94B,0x1E94B,1},{0x1E950,0x1E959,2},
    {0x1EC71,0x1ECAB,2},{0x1ECAD,0x1ECAF,2},{0x1ECB1,0x1ECB4,2},{0x1ED01,0x1ED2D,2},
    {0x1ED2F,0x1ED3D,2},{0x1EE00,0x1EE03,1},{0x1EE05,0x1EE1F,1},{0x1EE21,0x1EE22,1},
    {0x1EE24,0x1EE24,1},{0x1EE27,0x1EE27,1},{0x1EE29,0x1EE32,1},{0x1EE34,0x1EE37,1},
    {0x1EE39,0x1EE39,1},{0x1EE3B,0x1EE3B,1},{0x1EE42,0x1EE42,1},{0x1EE47,0x1EE47,1},
    {0x1EE49,0x1EE49,1},{0x1EE4B,0x1EE4B,1},{0x1EE4D,0x1EE4F,1},{0x1EE51,0x1EE52,1},
    {0x1EE54,0x1EE54,1},{0x1EE57,0x1EE57,1},{0x1EE59,0x1EE59,1},{0x1EE5B,0x1EE5B,1},
    {0x1EE5D,0x1EE5D,1},{0x1EE5F,0x1EE5F,1},{0x1EE61,0x1EE62,1},{0x1EE64,0x1EE64,1},
    {0x1EE67,0x1EE6A,1},{0x1EE6C,0x1EE72,1},{0x1EE74,0x1EE77,1},{0x1EE79,0x1EE7C,1},
    {0x1EE7E,0x1EE7E,1},{0x1EE80,0x1EE89,1},{0x1EE8B,0x1EE9B,1},{0x1EEA1,0x1EEA3,1},
    {0x1EEA5,0x1EEA9,1},{0x1EEAB,0x1EEBB,1},{0x1F100,0x1F10C,2},{0x1FBF0,0x1FBF9,2},
    {0x20000,0x2A6DF,1},{0x2A700,0x2B81D,1},{0x2B820,0x2CEAD,1},{0x2CEB0,0x2EBE0,1},
    {0x2EBF0,0x2EE5D,1},{0x2F800,0x2FA1D,1},{0x30000,0x3134A,1},{0x31350,0x33479,1},
};
/* END GENERATED */

static int uni_class(uint32_t cp) {
    int lo = 0, hi = (int)(sizeof uni_class_table / sizeof uni_class_table[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < uni_class_table[mid][0]) hi = mid - 1;
        else if (cp > uni_class_table[mid][1]) lo = mid + 1;
        else return (int)uni_class_table[mid][2];
    }
    return CLS_OTHER;
}

/* GPT-2's split, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ ,
 * evaluated on characters u[0..m) with classes cls[]: returns the end of the match at i.
 * Invalid UTF-8 bytes are characters of class "other". */
static size_t gpt2_match(const uint32_t *u, const unsigned char *cls, size_t i, size_t m) {
    if (u[i] == '\'' && i + 1 < m) {
        uint32_t a = u[i + 1], b = i + 2 < m ? u[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    size_t j = u[i] == ' ' && i + 1 < m && cls[i + 1] != CLS_S ? i + 1 : i;
    if (cls[j] != CLS_S) {
        int c = cls[j];
        while (j < m && cls[j] == c) j++;
        return j;
    }
    size_t e = i;
    while (e < m && cls[e] == CLS_S) e++;
    if (e == m || e - i == 1) return e;
    return e - 1;
}

/* ---- encode ---- */

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int *out, int max_out,
                     char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)text;
    int n_out = 0;
    if (len > (size_t)1 << 30) return fail(err, errlen, "text of %zu bytes is too long to encode", len);
    if (add_bos) {
        if (t->bos_id < 0) return fail(err, errlen, "the tokenizer has no BOS token to prepend");
        if (max_out < 1) return fail(err, errlen, "more than %d tokens", max_out);
        out[n_out++] = t->bos_id;
    }
    if (!len) return n_out;
    size_t cap = len + 1;
    Work w = {0};
    w.id = malloc(sizeof(int) * cap);
    w.prev = malloc(sizeof(int) * cap);
    w.next = malloc(sizeof(int) * cap);
    w.ver = calloc(cap, sizeof(uint32_t));
    w.heap_mem = aligned_alloc(64, (sizeof(Cand) * (3 * cap + HEAP_PAD) + 63) / 64 * 64);
    w.heap = w.heap_mem ? w.heap_mem + HEAP_PAD : NULL;
    w.cat = malloc((size_t)t->max_piece_len + 1);
    uint32_t *u = NULL;
    unsigned char *cls = NULL;
    size_t *ustart = NULL;
    int rc = -1, n = 0;
    if (!w.id || !w.prev || !w.next || !w.ver || !w.heap || !w.cat) { fail(err, errlen, "out of memory"); goto done; }

    if (t->kind == TOK_SENTENCEPIECE) {
        if (t->flags & TOKF_DUMMY_PREFIX) w.id[n++] = piece_lookup(t, " ", 1);
        for (size_t i = 0; i < len;) {
            size_t g = sp_group(s, i, len);
            int id = piece_lookup(t, text + i, g);
            if (id >= 0) w.id[n++] = id;
            else
                for (size_t k = i; k < i + g; k++) {
                    if (t->byte_piece[s[k]] < 0) {
                        fail(err, errlen, "byte 0x%02X at offset %zu is not in the vocabulary (no <0x%02X> piece)", s[k], k, s[k]);
                        goto done;
                    }
                    w.id[n++] = t->byte_piece[s[k]];
                }
            i += g;
        }
        for (int i = 0; i < n; i++) w.prev[i] = i - 1, w.next[i] = i + 1 < n ? i + 1 : -1;
        merge_all(t, &w, 0, n);
        for (int i = 0; i >= 0; i = w.next[i]) {
            if (n_out >= max_out) { fail(err, errlen, "more than %d tokens", max_out); goto done; }
            out[n_out++] = w.id[i];
        }
    } else {
        u = malloc(sizeof(uint32_t) * cap);
        cls = malloc(cap);
        ustart = malloc(sizeof(size_t) * cap);
        w.batch = malloc(sizeof(Cand) * cap);
        if (!u || !cls || !ustart || !w.batch) { fail(err, errlen, "out of memory"); goto done; }
        size_t m = 0;
        for (size_t i = 0; i < len; m++) {
            size_t k = utf8_char(s, i, len, &u[m]);
            if (!k) k = 1, u[m] = 0xFFFFFFFFu;
            cls[m] = (unsigned char)uni_class(u[m]);
            ustart[m] = i;
            i += k;
        }
        ustart[m] = len;
        for (size_t i = 0; i < m;) {
            size_t e = gpt2_match(u, cls, i, m), a = ustart[i], z = ustart[e];
            for (size_t k = a; k < z; k++) {
                if (t->byte_piece[s[k]] < 0) {
                    fail(err, errlen, "byte 0x%02X at offset %zu has no one-byte piece", s[k], k);
                    goto done;
                }
                w.id[k] = t->byte_piece[s[k]];
                w.prev[k] = k > a ? (int)k - 1 : -1;
                w.next[k] = k + 1 < z ? (int)k + 1 : -1;
            }
            merge_all(t, &w, (int)a, (int)(z - a));
            for (int k = (int)a; k >= 0; k = w.next[k]) {
                if (n_out >= max_out) { fail(err, errlen, "more than %d tokens", max_out); goto done; }
                out[n_out++] = w.id[k];
            }
            i = e;
        }
    }
    rc = n_out;
done:
    free(w.id); free(w.prev); free(w.next); free(w.ver); free(w.heap_mem); free(w.batch); free(w.cat);
    free(u); free(cls); free(ustart);
    return rc;
}

/* ---- decode ---- */

static const char byte_chars[256] = {
#define R(i) (char)(i), (char)(i + 1), (char)(i + 2), (char)(i + 3), (char)(i + 4), (char)(i + 5), (char)(i + 6), (char)(i + 7)
    R(0), R(8), R(16), R(24), R(32), R(40), R(48), R(56), R(64), R(72), R(80), R(88), R(96), R(104), R(112), R(120),
    R(128), R(136), R(144), R(152), R(160), R(168), R(176), R(184), R(192), R(200), R(208), R(216), R(224), R(232),
    R(240), R(248)
#undef R
};

const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token, size_t *len) {
    if (token < 0 || token >= t->n_pieces) return NULL;
    *len = 0;
    if (token == t->bos_id || token == t->eos_id) return "";
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

/* ---- printable output ---- */

static size_t put_replacement(char *out) {
    memcpy(out, "\xEF\xBF\xBD", 3);
    return 3;
}

size_t tokenizer_sanitize(TokSanitizer *st, const char *in, size_t n, char *out, int flush) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)in[i];
        if (st->n) {
            /* Is pending + c still the start of a well-formed character? Only the second
             * byte's range depends on the lead, and it is real here; pad the rest with a
             * continuation byte and let utf8_char decide. */
            unsigned char full[4];
            size_t need = st->pending[0] < 0xE0 ? 2 : st->pending[0] < 0xF0 ? 3 : 4, have = (size_t)st->n + 1;
            uint32_t cp;
            memcpy(full, st->pending, (size_t)st->n);
            full[st->n] = (unsigned char)c;
            memset(full + have, 0xA0, need - have);
            if (utf8_char(full, 0, need, &cp) == need) {
                st->pending[st->n++] = (unsigned char)c;
                if (have == need) {
                    st->n = 0;
                    if (cp >= 0x80 && cp <= 0x9F) continue; /* C1 controls */
                    memcpy(out + o, st->pending, need);
                    o += need;
                }
                continue;
            }
            st->n = 0;
            o += put_replacement(out + o);
        }
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) continue;
            out[o++] = (char)c;
        } else if (c >= 0xC2 && c <= 0xF4) {
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

/* ---- vocabulary learning ---- */

/* A character of at most 4 bytes as a left-aligned big-endian integer: for well-formed UTF-8
 * these sort in code point order. */
static uint32_t char_key(const unsigned char *s, size_t n) {
    uint32_t k = 0;
    for (size_t i = 0; i < 4; i++) k = k << 8 | (i < n ? s[i] : 0);
    return k;
}

static size_t key_bytes(uint32_t k, char out[4]) {
    uint32_t cp;
    for (int i = 0; i < 4; i++) out[i] = (char)(k >> (24 - 8 * i));
    return utf8_char((const unsigned char *)out, 0, 4, &cp);
}

/* Distinct well-formed characters of the text (as llama2.c groups it) with their counts, and
 * which bytes occur in groups that are not one well-formed character. */
typedef struct { uint32_t key; uint64_t count; } CharCount;

static int cmp_char_key(const void *a, const void *b) {
    uint32_t x = ((const CharCount *)a)->key, y = ((const CharCount *)b)->key;
    return (x > y) - (x < y);
}

static int grow_chars(uint32_t **keys, uint64_t **counts, uint32_t *cap) {
    uint32_t ncap = *cap * 4, *nk = malloc(sizeof(uint32_t) * ncap);
    uint64_t *nc = calloc(ncap, sizeof(uint64_t));
    if (!nk || !nc) { free(nk); free(nc); return -1; }
    for (uint32_t j = 0; j < ncap; j++) nk[j] = 0xFFFFFFFFu;
    for (uint32_t j = 0; j < *cap; j++) {
        if ((*keys)[j] == 0xFFFFFFFFu) continue;
        uint32_t h = hash_u64((*keys)[j]) & (ncap - 1);
        while (nk[h] != 0xFFFFFFFFu) h = (h + 1) & (ncap - 1);
        nk[h] = (*keys)[j];
        nc[h] = (*counts)[j];
    }
    free(*keys); free(*counts);
    *keys = nk; *counts = nc; *cap = ncap;
    return 0;
}

static int collect_chars(const unsigned char *s, size_t len, CharCount **chars, int *nchars, int bad_bytes[256]) {
    uint32_t cap = 1024, n = 0; /* 0xFFFFFFFF is no character's key: it marks empty slots */
    uint32_t *keys = malloc(sizeof(uint32_t) * cap);
    uint64_t *counts = calloc(cap, sizeof(uint64_t));
    if (!keys || !counts) goto oom;
    for (uint32_t i = 0; i < cap; i++) keys[i] = 0xFFFFFFFFu;
    memset(bad_bytes, 0, 256 * sizeof(int));
    for (size_t i = 0; i < len;) {
        size_t g = sp_group(s, i, len);
        uint32_t cp;
        if (utf8_char(s, i, i + g, &cp) != g) {
            for (size_t k = i; k < i + g; k++) bad_bytes[s[k]] = 1;
        } else {
            uint32_t key = char_key(s + i, g), h = hash_u64(key) & (cap - 1);
            while (keys[h] != 0xFFFFFFFFu && keys[h] != key) h = (h + 1) & (cap - 1);
            if (keys[h] == 0xFFFFFFFFu) keys[h] = key, n++;
            counts[h]++;
            if (n * 2 > cap && grow_chars(&keys, &counts, &cap)) goto oom;
        }
        i += g;
    }
    *chars = malloc(sizeof(CharCount) * (n ? n : 1));
    if (!*chars) goto oom;
    *nchars = 0;
    for (uint32_t j = 0; j < cap; j++)
        if (keys[j] != 0xFFFFFFFFu) (*chars)[(*nchars)++] = (CharCount){keys[j], counts[j]};
    qsort(*chars, (size_t)*nchars, sizeof(CharCount), cmp_char_key);
    free(keys); free(counts);
    return 0;
oom:
    free(keys); free(counts);
    return -1;
}

int tokenizer_learn_chars(const char *text, size_t len, void **blob, size_t *blob_bytes, char *err, size_t errlen) {
    CharCount *chars;
    int nchars, bad[256], n = 0;
    if (collect_chars((const unsigned char *)text, len, &chars, &nchars, bad)) return fail(err, errlen, "out of memory");
    char *store = malloc(4 * (size_t)nchars + 7 * 256);
    const char **piece = malloc(sizeof(char *) * ((size_t)nchars + 256));
    uint32_t *plen = malloc(sizeof(uint32_t) * ((size_t)nchars + 256));
    float *score = calloc((size_t)nchars + 256, sizeof(float));
    int rc = -1;
    if (!store || !piece || !plen || !score) { fail(err, errlen, "out of memory"); goto done; }
    char *at = store;
    for (int i = 0; i < nchars; i++) {
        plen[n] = (uint32_t)key_bytes(chars[i].key, at);
        piece[n++] = at;
        at += 4;
    }
    for (int b = 0; b < 256; b++)
        if (bad[b]) {
            byte_piece_name(at, b);
            plen[n] = 6;
            piece[n++] = at;
            at += 7;
        }
    if (!n) { fail(err, errlen, "empty text: no characters to make a vocabulary of"); goto done; }
    *blob = blob_pack(n, piece, plen, score, blob_bytes);
    if (!*blob) { fail(err, errlen, "out of memory"); goto done; }
    rc = 0;
done:
    free(chars); free(store); free(piece); free(plen); free(score);
    return rc;
}

/* BPE learning works on the text as one sequence of symbols, like kind-0 encoding does (no
 * split into words). Every adjacent pair of non-byte symbols is counted; each pair keeps the
 * positions where it was seen (stale ones are skipped), and a lazy max-heap of counts picks
 * the next merge. A merge only changes the counts next to the merged occurrences, so the
 * whole run costs about the size of the text times log, not the text per merge. */

typedef struct {
    int a, b, count;
    int *pos;
    int npos, cap;
    int banned, queued_step;
} Pair;

typedef struct {
    Pair *pairs;
    int npairs, cap;
    uint64_t *key;   /* hash of (a, b) + 1 -> pair index in val */
    int *val;
    uint32_t mask;
    uint64_t *heap;  /* (~count << 32 | index) min-heap, i.e. max count, then lowest index */
    size_t nheap, heapcap;
    int *touched;
    int ntouched, touchedcap, step;
} PairTable;

static int pt_rehash(PairTable *pt) {
    uint32_t size = table_size((uint32_t)pt->cap);
    uint64_t *key = calloc(size, sizeof(uint64_t));
    int *val = malloc(sizeof(int) * size);
    if (!key || !val) { free(key); free(val); return -1; }
    for (int i = 0; i < pt->npairs; i++) {
        uint64_t k = ((uint64_t)(uint32_t)pt->pairs[i].a << 32 | (uint32_t)pt->pairs[i].b) + 1;
        uint32_t h = hash_u64(k) & (size - 1);
        while (key[h]) h = (h + 1) & (size - 1);
        key[h] = k;
        val[h] = i;
    }
    free(pt->key); free(pt->val);
    pt->key = key; pt->val = val; pt->mask = size - 1;
    return 0;
}

static int pt_get(PairTable *pt, int a, int b) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t h = hash_u64(k) & pt->mask;
    for (; pt->key[h]; h = (h + 1) & pt->mask)
        if (pt->key[h] == k) return pt->val[h];
    if (pt->npairs == pt->cap) {
        int ncap = pt->cap * 2;
        Pair *np = realloc(pt->pairs, sizeof(Pair) * (size_t)ncap);
        if (!np) return -1;
        pt->pairs = np;
        pt->cap = ncap;
        if (pt_rehash(pt)) return -1;
        h = hash_u64(k) & pt->mask;
        while (pt->key[h]) h = (h + 1) & pt->mask;
    }
    int i = pt->npairs++;
    pt->pairs[i] = (Pair){a, b, 0, NULL, 0, 0, 0, -1};
    pt->key[h] = k;
    pt->val[h] = i;
    return i;
}

static int pt_heap_push(PairTable *pt, int i) {
    if (pt->nheap == pt->heapcap) {
        size_t ncap = pt->heapcap ? pt->heapcap * 2 : 1024;
        uint64_t *nh = realloc(pt->heap, sizeof(uint64_t) * ncap);
        if (!nh) return -1;
        pt->heap = nh;
        pt->heapcap = ncap;
    }
    uint64_t v = (uint64_t)(0xFFFFFFFFu - (uint32_t)pt->pairs[i].count) << 32 | (uint32_t)i;
    size_t j = pt->nheap++;
    while (j > 0 && pt->heap[(j - 1) / 2] > v) {
        pt->heap[j] = pt->heap[(j - 1) / 2];
        j = (j - 1) / 2;
    }
    pt->heap[j] = v;
    return 0;
}

static uint64_t pt_heap_pop(PairTable *pt) {
    uint64_t top = pt->heap[0], last = pt->heap[--pt->nheap];
    size_t i = 0, n = pt->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pt->heap[c + 1] < pt->heap[c]) c++;
        if (last <= pt->heap[c]) break;
        pt->heap[i] = pt->heap[c];
        i = c;
    }
    if (n) pt->heap[i] = last;
    return top;
}

/* Counts one more (a, b) at position p; the pair is queued once its step is done. */
static int pt_add(PairTable *pt, int a, int b, int p) {
    int i = pt_get(pt, a, b);
    if (i < 0) return -1;
    Pair *q = &pt->pairs[i];
    if (q->npos == q->cap) {
        int ncap = q->cap ? q->cap * 2 : 4;
        int *np = realloc(q->pos, sizeof(int) * (size_t)ncap);
        if (!np) return -1;
        q->pos = np;
        q->cap = ncap;
    }
    q->pos[q->npos++] = p;
    q->count++;
    if (q->queued_step != pt->step) {
        q->queued_step = pt->step;
        if (pt->ntouched == pt->touchedcap) {
            int ncap = pt->touchedcap ? pt->touchedcap * 2 : 256;
            int *nt = realloc(pt->touched, sizeof(int) * (size_t)ncap);
            if (!nt) return -1;
            pt->touched = nt;
            pt->touchedcap = ncap;
        }
        pt->touched[pt->ntouched++] = i;
    }
    return 0;
}

static int pt_flush_touched(PairTable *pt) {
    for (int k = 0; k < pt->ntouched; k++)
        if (pt_heap_push(pt, pt->touched[k])) return -1;
    pt->ntouched = 0;
    pt->step++;
    return 0;
}

static void pt_dec(PairTable *pt, int a, int b) {
    pt->pairs[pt_get(pt, a, b)].count--; /* the pair exists: it was counted */
}

static void pt_free(PairTable *pt) {
    for (int i = 0; i < pt->npairs; i++) free(pt->pairs[i].pos);
    free(pt->pairs); free(pt->key); free(pt->val); free(pt->heap); free(pt->touched);
}

/* Pieces of a vocabulary being learned: strings in one growing buffer, and a hash from
 * string to id so that a merge result spelled like an existing piece reuses it. */
typedef struct {
    char *buf;
    size_t used, bufcap;
    size_t *off;
    uint32_t *len;
    float *score;
    int n, cap;
    uint32_t *table, mask;
} Vocab;

static int vocab_find(const Vocab *v, const char *s, size_t n) {
    for (uint32_t h = hash_bytes(s, n) & v->mask; v->table[h]; h = (h + 1) & v->mask) {
        int e = (int)v->table[h] - 1;
        if (v->len[e] == n && memcmp(v->buf + v->off[e], s, n) == 0) return e;
    }
    return -1;
}

/* Appends a piece the caller knows is new. */
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
    uint32_t h = hash_bytes(v->buf + v->off[v->n], n) & v->mask;
    while (v->table[h]) h = (h + 1) & v->mask;
    v->table[h] = (uint32_t)v->n + 1;
    return v->n++;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_count_desc(const void *a, const void *b) {
    const CharCount *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return (x->key > y->key) - (x->key < y->key);
}

int tokenizer_learn_bpe(const char *text, size_t len, int vocab_size, void **blob, size_t *blob_bytes, char *err,
                        size_t errlen) {
    const unsigned char *s = (const unsigned char *)text;
    if (vocab_size < 256 || (uint32_t)vocab_size > MAX_PIECES)
        return fail(err, errlen, "vocab_size %d: a byte-fallback BPE vocabulary needs 256..%u pieces", vocab_size, MAX_PIECES);
    if (len > (size_t)1 << 30) return fail(err, errlen, "text of %zu bytes is too long to learn from", len);
    CharCount *chars = NULL;
    int nchars = 0, bad[256], rc = -1;
    Vocab v = {0};
    PairTable pt = {0};
    int *sym = NULL, *prev = NULL, *next = NULL;
    const char **piece = NULL;
    if (collect_chars(s, len, &chars, &nchars, bad)) return fail(err, errlen, "out of memory");
    /* Keep the most frequent characters that fit, in code point order. */
    int keep = nchars < vocab_size - 256 ? nchars : vocab_size - 256;
    qsort(chars, (size_t)nchars, sizeof(CharCount), cmp_count_desc);
    qsort(chars, (size_t)keep, sizeof(CharCount), cmp_char_key);

    v.cap = vocab_size;
    v.bufcap = 4096;
    v.buf = malloc(v.bufcap);
    v.off = malloc(sizeof(size_t) * (size_t)v.cap);
    v.len = malloc(sizeof(uint32_t) * (size_t)v.cap);
    v.score = malloc(sizeof(float) * (size_t)v.cap);
    v.mask = table_size((uint32_t)v.cap) - 1;
    v.table = calloc((size_t)v.mask + 1, sizeof(uint32_t));
    sym = malloc(sizeof(int) * (len + 1));
    prev = malloc(sizeof(int) * (len + 1));
    next = malloc(sizeof(int) * (len + 1));
    pt.cap = 1024;
    pt.pairs = malloc(sizeof(Pair) * (size_t)pt.cap);
    if (!v.buf || !v.off || !v.len || !v.score || !v.table || !sym || !prev || !next || !pt.pairs || pt_rehash(&pt))
        goto oom;
    for (int b = 0; b < 256; b++) {
        char name[7];
        byte_piece_name(name, b);
        if (vocab_add(&v, name, 6, BASE_SCORE) < 0) goto oom;
    }
    for (int i = 0; i < keep; i++) {
        char c[4];
        if (vocab_add(&v, c, key_bytes(chars[i].key, c), BASE_SCORE) < 0) goto oom;
    }

    /* The text as symbols; ids below 256 are byte fallbacks, which never merge. */
    int n = 0;
    for (size_t i = 0; i < len;) {
        size_t g = sp_group(s, i, len);
        int id = vocab_find(&v, text + i, g);
        if (id >= 256) sym[n++] = id;
        else
            for (size_t k = i; k < i + g; k++) sym[n++] = s[k];
        i += g;
    }
    for (int i = 0; i < n; i++) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
        if (i + 1 < n && sym[i] >= 256 && sym[i + 1] >= 256 && pt_add(&pt, sym[i], sym[i + 1], i)) goto oom;
    }
    if (pt_flush_touched(&pt)) goto oom;

    char *cat = NULL;
    size_t catcap = 0;
    int learned = 0;
    while (v.n < vocab_size && pt.nheap) {
        uint64_t top = pt_heap_pop(&pt);
        int pi = (int)(uint32_t)top;
        Pair *q = &pt.pairs[pi];
        int queued = (int)(0xFFFFFFFFu - (uint32_t)(top >> 32));
        if (q->banned) continue;
        if (queued != q->count) { /* stale: counts only drop between queueings */
            if (q->count > 0 && pt_heap_push(&pt, pi)) goto oom;
            continue;
        }
        if (q->count < 2) break;
        int a = q->a, b = q->b;
        size_t la = v.len[a], lb = v.len[b];
        if (la + lb > catcap) {
            catcap = 2 * (la + lb);
            char *nc = realloc(cat, catcap);
            if (!nc) goto oom_cat;
            cat = nc;
        }
        memcpy(cat, v.buf + v.off[a], la);
        memcpy(cat + la, v.buf + v.off[b], lb);
        int m = vocab_find(&v, cat, la + lb);
        if (m >= 0 && m < 256 + keep) { /* spelled like a byte piece: decoding would misread it */
            q->banned = 1;
            continue;
        }
        if (m < 0 && (m = vocab_add(&v, cat, la + lb, -(float)learned++)) < 0) goto oom_cat;
        /* Merge every occurrence, leftmost first, as the encoder would. */
        int *pos = q->pos, npos = q->npos;
        q->pos = NULL; q->npos = q->cap = 0;
        qsort(pos, (size_t)npos, sizeof(int), cmp_int);
        for (int k = 0; k < npos; k++) {
            int L = pos[k], R = next[L];
            if (sym[L] != a || R < 0 || sym[R] != b) continue;
            int P = prev[L], N = next[R];
            if (P >= 0 && sym[P] >= 256) pt_dec(&pt, sym[P], a);
            if (N >= 0 && sym[N] >= 256) pt_dec(&pt, b, sym[N]);
            pt.pairs[pi].count--;
            sym[L] = m;
            sym[R] = -1;
            next[L] = N;
            if (N >= 0) prev[N] = L;
            if (P >= 0 && sym[P] >= 256 && pt_add(&pt, sym[P], m, P)) { free(pos); goto oom_cat; }
            if (N >= 0 && sym[N] >= 256 && pt_add(&pt, m, sym[N], L)) { free(pos); goto oom_cat; }
        }
        free(pos);
        if (pt_flush_touched(&pt)) goto oom_cat;
    }
    free(cat);
    piece = malloc(sizeof(char *) * (size_t)v.n);
    if (!piece) goto oom;
    for (int i = 0; i < v.n; i++) piece[i] = v.buf + v.off[i];
    *blob = blob_pack(v.n, piece, v.len, v.score, blob_bytes);
    if (!*blob) goto oom;
    rc = 0;
    goto done;
oom_cat:
    free(cat);
oom:
    fail(err, errlen, "out of memory learning a %d-piece vocabulary from %zu bytes", vocab_size, len);
done:
    free(chars); free(sym); free(prev); free(next); free(piece);
    free(v.buf); free(v.off); free(v.len); free(v.score); free(v.table);
    pt_free(&pt);
    return rc;
}

size_t tokenizer_first_non_text(const char *text, size_t n) {
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    for (size_t i = 0; i < n;) {
        unsigned char b = (unsigned char)text[i];
        size_t len = b < 0x80 ? 1 : b >> 5 == 6 ? 2 : b >> 4 == 14 ? 3 : b >> 3 == 30 ? 4 : 0;
        if (!len || len > n - i || !b) return i;
        uint32_t cp = len == 1 ? b : b & (0x7f >> len);
        for (size_t j = 1; j < len; j++) {
            unsigned char cb = (unsigned char)text[i + j];
            if (cb >> 6 != 2) return i;
            cp = cp << 6 | (cb & 0x3f);
        }
        if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return i;
        i += len;
    }
    return n;
}
