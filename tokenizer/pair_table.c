// tokenizer/pair_table.c: the pair counts of vocabulary learning. Every adjacent pair of
// symbols (a, b) gets one Pair, found through a hash table, with its count and the positions
// where it was counted; a lazy max-heap of (count, index) says which pair is the most frequent.
// Counts change during a merge step and the pairs that changed are queued when the step ends,
// so the heap may hold stale entries that the learner skips. It never looks at the text or the
// vocabulary: tokenizer/learn.c does.
#include <stdlib.h>

#include "internal.h"

#define FIRST_PAIRS 1024      // room for pairs before the first growth
#define FIRST_HEAP 1024       // heap entries before the first growth
#define FIRST_POSITIONS 4     // positions of one pair before the first growth
#define FIRST_TOUCHED 256     // pairs of one step before the first growth
#define COUNT_MAX 0xFFFFFFFFu // counts are stored as COUNT_MAX - count, so a min-heap puts the highest first

// Doubles the int array *a of *cap entries (or makes it first_cap long); 0, or -1 if out of memory.
static int grow_ints(int **a, int *cap, int first_cap) {
    int ncap = *cap ? *cap * 2 : first_cap;
    int *na = realloc(*a, sizeof(int) * (size_t)ncap);
    if (!na) return -1;
    *a = na;
    *cap = ncap;
    return 0;
}

// Rebuilds the hash table for pt->cap pairs; 0, or -1 if out of memory.
static int pt_rehash(PairTable *pt) {
    uint32_t size = table_size((uint32_t)pt->cap);
    uint64_t *key = calloc(size, sizeof(uint64_t));
    int *val = malloc(sizeof(int) * size);
    if (!key || !val) {
        free(key);
        free(val);
        return -1;
    }
    for (int i = 0; i < pt->npairs; i++) {
        uint64_t k = pair_key((uint32_t)pt->pairs[i].a, (uint32_t)pt->pairs[i].b);
        uint32_t h = hash_u64(k) & (size - 1);
        while (key[h]) h = (h + 1) & (size - 1);
        key[h] = k;
        val[h] = i;
    }
    free(pt->key);
    free(pt->val);
    pt->key = key;
    pt->val = val;
    pt->mask = size - 1;
    return 0;
}

int pt_init(PairTable *pt) {
    *pt = (PairTable){0};
    pt->cap = FIRST_PAIRS;
    pt->pairs = malloc(sizeof(Pair) * (size_t)pt->cap);
    return pt->pairs ? pt_rehash(pt) : -1;
}

void pt_free(PairTable *pt) {
    for (int i = 0; i < pt->npairs; i++) free(pt->pairs[i].pos);
    free(pt->pairs);
    free(pt->key);
    free(pt->val);
    free(pt->heap);
    free(pt->touched);
}

// The index of pair (a, b), made with a count of 0 if it is new; -1 if out of memory.
static int pt_get(PairTable *pt, int a, int b) {
    uint64_t k = pair_key((uint32_t)a, (uint32_t)b);
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

int pt_heap_push(PairTable *pt, int i) {
    if (pt->nheap == pt->heapcap) {
        size_t ncap = pt->heapcap ? pt->heapcap * 2 : FIRST_HEAP;
        uint64_t *nh = realloc(pt->heap, sizeof(uint64_t) * ncap);
        if (!nh) return -1;
        pt->heap = nh;
        pt->heapcap = ncap;
    }
    uint64_t v = (uint64_t)(COUNT_MAX - (uint32_t)pt->pairs[i].count) << 32 | (uint32_t)i;
    size_t j = pt->nheap++;
    while (j > 0 && pt->heap[(j - 1) / 2] > v) {
        pt->heap[j] = pt->heap[(j - 1) / 2];
        j = (j - 1) / 2;
    }
    pt->heap[j] = v;
    return 0;
}

int pt_heap_pop(PairTable *pt, int *queued_count) {
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
    *queued_count = (int)(COUNT_MAX - (uint32_t)(top >> 32));
    return (int)(uint32_t)top;
}

int pt_add(PairTable *pt, int a, int b, int p) {
    int i = pt_get(pt, a, b);
    if (i < 0) return -1;
    Pair *q = &pt->pairs[i];
    if (q->npos == q->cap && grow_ints(&q->pos, &q->cap, FIRST_POSITIONS)) return -1;
    q->pos[q->npos++] = p;
    q->count++;
    if (q->queued_step == pt->step) return 0;
    q->queued_step = pt->step;
    if (pt->ntouched == pt->touchedcap && grow_ints(&pt->touched, &pt->touchedcap, FIRST_TOUCHED)) return -1;
    pt->touched[pt->ntouched++] = i;
    return 0;
}

int pt_flush_touched(PairTable *pt) {
    for (int k = 0; k < pt->ntouched; k++)
        if (pt_heap_push(pt, pt->touched[k])) return -1;
    pt->ntouched = 0;
    pt->step++;
    return 0;
}

void pt_dec(PairTable *pt, int a, int b) { pt->pairs[pt_get(pt, a, b)].count--; }
