// tokenizer/bpe.c: the BPE merge loop both kinds share. The symbols of a run form a linked
// list, and every adjacent pair that can merge waits in a heap keyed by (priority, position),
// so that pairs merge one at a time, best first, leftmost on ties: by the merge's rank when the
// blob has merges (Hugging Face's BPE), else by the merged piece's score (llama2.c). It owns
// one encode call's buffers (Encoding) and appends ids to the caller's out. It never reads the
// text: the pre-tokenisers (tokenizer.c for kind 0, tokenizer/byte_level.c for kind 1) hand it
// piece ids. docs/TOKENIZER.md explains the stale entries and the heap's layout.
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HEAP_ARITY 4              // four 16-byte children fill one 64-byte cache line
#define HEAP_PAD (HEAP_ARITY - 1) // entries before heap[0], so that every node's children start a line
#define CACHE_LINE 64
#define HEAP_PER_SYMBOL 3 // a symbol's first pair, then at most two pairs per merge
#define SIGN_BIT 0x80000000u

struct Cand {
    uint64_t key;   // priority << 32 | left symbol: the smallest key merges first
    uint32_t ver;   // the left symbol's version when queued: stale once that changed
    int32_t result; // the piece the merge makes
};

int encoding_init(Encoding *e, const Tokenizer *t, size_t len, int *out, int n_out, int max_out, char *err,
                  size_t errlen) {
    size_t cap = len + 1; // kind 0: the dummy prefix, then at most one symbol per byte
    size_t heap_entries = HEAP_PER_SYMBOL * cap + HEAP_PAD;
    size_t heap_bytes = (sizeof(Cand) * heap_entries + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    int by_score = !t->n_merges;
    *e = (Encoding){.t = t, .out = out, .n_out = n_out, .max_out = max_out, .err = err, .errlen = errlen};
    e->id = malloc(sizeof(int) * 3 * cap); // id, prev and next in one block
    e->prev = e->id ? e->id + cap : NULL;
    e->next = e->id ? e->id + 2 * cap : NULL;
    e->ver = calloc(cap, sizeof(uint32_t));
    e->heap_mem = aligned_alloc(CACHE_LINE, heap_bytes);
    e->heap = e->heap_mem ? e->heap_mem + HEAP_PAD : NULL;
    if (by_score) e->cat = malloc((size_t)t->max_piece_len + 1);
    if (e->id && e->ver && e->heap && (!by_score || e->cat)) return 0;
    encoding_free(e);
    return fail(err, errlen, "out of memory");
}

void encoding_free(Encoding *e) {
    free(e->id);
    free(e->ver);
    free(e->heap_mem);
    free(e->cat);
}

static void heap_push(Encoding *e, Cand c) {
    size_t i = e->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / HEAP_ARITY;
        if (e->heap[p].key <= c.key) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = c;
}

static Cand heap_pop(Encoding *e) {
    Cand top = e->heap[0], last = e->heap[--e->nheap];
    size_t i = 0, n = e->nheap;
    for (;;) {
        size_t c = HEAP_ARITY * i + 1, best = c;
        if (c >= n) break;
        for (size_t k = c + 1; k < c + HEAP_ARITY && k < n; k++)
            if (e->heap[k].key < e->heap[best].key) best = k;
        if (last.key <= e->heap[best].key) break;
        e->heap[i] = e->heap[best];
        i = best;
    }
    if (n) e->heap[i] = last;
    return top;
}

// Merging by score: higher scores give smaller keys, and -0 ties with +0 as in float compares.
static uint32_t score_key(float s) {
    uint32_t u;
    if (s == 0.0f) s = 0.0f;
    memcpy(&u, &s, sizeof u);
    u = (u & SIGN_BIT) ? ~u : (u | SIGN_BIT);
    return ~u;
}

// Queues the pair that starts at symbol left, if it can merge.
static void push_pair(Encoding *e, int left) {
    const Tokenizer *t = e->t;
    if (left < 0 || e->next[left] < 0) return;
    int l = e->id[left], r = e->id[e->next[left]], res;
    uint32_t prio;
    if (t->n_merges) {
        res = merge_lookup(t, (uint32_t)l, (uint32_t)r, &prio);
        if (res < 0) return;
    } else {
        // A "<0xNN>" piece stands for one raw byte, not for its spelling: it neither merges by
        // that spelling nor is made by merging text that happens to spell it.
        size_t ll = t->len[l], rl = t->len[r];
        if (ll + rl > (size_t)t->max_piece_len || t->byte_of[l] >= 0 || t->byte_of[r] >= 0) return;
        memcpy(e->cat, t->bytes + t->offset[l], ll);
        memcpy(e->cat + ll, t->bytes + t->offset[r], rl);
        res = piece_lookup(t, e->cat, ll + rl);
        if (res < 0 || t->byte_of[res] >= 0 || !(t->score[res] > NO_MERGE_SCORE)) return;
        prio = score_key(t->score[res]);
    }
    heap_push(e, (Cand){(uint64_t)prio << 32 | (uint32_t)left, e->ver[left], res});
}

static int cand_left(const Cand *c) { return (int)(uint32_t)c->key; }

static int cand_valid(const Encoding *e, const Cand *c) {
    int left = cand_left(c);
    return e->id[left] >= 0 && e->ver[left] == c->ver;
}

// Merges c's pair: the left symbol becomes the result, the right one leaves the list, and the
// pairs on either side are queued anew.
static void apply(Encoding *e, const Cand *c) {
    int left = cand_left(c), right = e->next[left], nx = e->next[right], p = e->prev[left];
    e->id[left] = c->result;
    e->id[right] = -1;
    e->next[left] = nx;
    if (nx >= 0) e->prev[nx] = left;
    e->ver[left]++;
    if (p >= 0) e->ver[p]++;
    push_pair(e, p);
    push_pair(e, left);
}

// Merges the linked symbols first..first+n-1 until no adjacent pair can merge.
static void merge_all(Encoding *e, int first, int n) {
    e->nheap = 0;
    for (int i = first; i < first + n - 1; i++) push_pair(e, i);
    while (e->nheap) {
        Cand c = heap_pop(e);
        if (cand_valid(e, &c)) apply(e, &c);
    }
}

int emit_token(Encoding *e, int id) {
    if (e->n_out >= e->max_out) return fail(e->err, e->errlen, "more than %d tokens", e->max_out);
    e->out[e->n_out++] = id;
    return 0;
}

int merge_and_emit(Encoding *e, int first, int n) {
    for (int k = first; k < first + n; k++) {
        e->prev[k] = k > first ? k - 1 : -1;
        e->next[k] = k + 1 < first + n ? k + 1 : -1;
    }
    merge_all(e, first, n);
    for (int k = first; k >= 0; k = e->next[k])
        if (emit_token(e, e->id[k])) return -1;
    return 0;
}
