// model/attention_token.h: one-token attention, a generation step's one query row against the
// whole KV cache (attention.h has the many-row passes, causal.h the products both use).
#ifndef ATTN_MODEL_ATTENTION_TOKEN_H
#define ATTN_MODEL_ATTENTION_TOKEN_H

#include "attention.h"
#include "threads.h"

// A step is bound by reading the cache. Each thread takes a range of the keys for every head;
// it reads each key and value once for all the query heads of its group, a block of keys at a
// time, and leaves for each query head a partial softmax: its largest score m, the sum l of
// exp(score - m) and o = Σ exp(score - m) v. Partials of one head's key ranges merge exactly:
// each is weighted by exp(m - M), M the largest m.
#define TOKEN_BLOCK_BYTES 16384           // a head's keys (or values) of a block: a third of L1
#define TOKEN_PART(hd) ((size_t)(hd) + 2) // a partial's floats: m, l, o [hd]

// Key/value heads [0, heads) (k, v at the first one's first column, hd apart; rows ld elements
// apart, of type) and their query heads, group each, of q (hd apart) against keys and values
// [0, n), with the scores in sc (a row of n for each query head, ld_sc apart), into the
// partials at part (ld_part apart). A block of keys is scored for all the heads and its values
// added at once, with an online softmax (a head's partial rescaled when its largest score
// grows), and the next block's keys and values are asked for while this one is scored: the
// thread's heads lie side by side in a cache row, so it streams runs of heads × hd values,
// where a head at a time read short runs a row apart and the values after all the keys. type
// is a constant where it is inlined, so that dot_w's loads are the type's own.
__attribute__((always_inline)) static inline void token_keys(float *part, size_t ld_part, float *sc, size_t ld_sc,
                                                             const float *q, int heads, int group, const char *k,
                                                             const char *v, int type, size_t ld, int hd, int n,
                                                             float scale) {
    size_t row = kv_span(type, ld), span = kv_span(type, (size_t)hd);
    int block = span < TOKEN_BLOCK_BYTES / 16 ? (int)(TOKEN_BLOCK_BYTES / span) : 16;
    for (int h = 0; h < heads * group; h++) {
        float *p = part + h * ld_part;
        p[0] = -INFINITY, p[1] = 0.0f;
        memset(p + 2, 0, (size_t)hd * sizeof(float));
    }
    for (int j0 = 0; j0 < n; j0 += block) {
        int j1 = n - j0 < block ? n : j0 + block;
        for (int g = 0; g < heads; g++)
            for (int h = g * group; h < (g + 1) * group; h++)
                for (int j = j0; j < j1; j++) {
                    // the next block's rows into L2 (prefetcht1: into L1 a step was 25 % slower)
                    for (size_t x = 0; x < span && h == g * group && j + block < n; x += 64) {
                        __builtin_prefetch(k + (j + block) * row + g * span + x, 0, 2);
                        __builtin_prefetch(v + (j + block) * row + g * span + x, 0, 2);
                    }
                    sc[h * ld_sc + j] = scale * dot_w(k + j * row + g * span, type, q + h * hd, hd);
                }
        for (int h = 0; h < heads * group; h++) {
            float *p = part + h * ld_part, top = max_of(sc + h * ld_sc + j0, j1 - j0);
            if (top > p[0]) { // exp(-inf) is 0 for the first block
                float rescale = exp_vec(p[0] - top);
                p[1] *= rescale;
                for (int d = 0; d < hd; d++) p[2 + d] *= rescale;
                p[0] = top;
            }
            p[1] += exp_shifted(sc + h * ld_sc + j0, j1 - j0, p[0]);
        }
        for (int g = 0; g < heads; g++)
            causal_product(part + g * group * ld_part + 2, ld_part, sc + g * group * ld_sc + j0, ld_sc, 0,
                           v + j0 * row + g * span, type, ld, group, hd, j1 - j0, CAUSAL_NONE, 0, 1.0f, 1);
    }
}

// A query head's output out [hd] from its partials over chunks key ranges (TOKEN_PART apart):
// Σ exp(m - M) o / Σ exp(m - M) l.
static inline void token_merge(float *out, const float *part, int chunks, int hd) {
    float top = -INFINITY, l = 0.0f;
    for (int c = 0; c < chunks; c++) top = part[c * TOKEN_PART(hd)] > top ? part[c * TOKEN_PART(hd)] : top;
    for (int d = 0; d < hd; d++) out[d] = 0.0f;
    for (int c = 0; c < chunks; c++) {
        const float *p = part + c * TOKEN_PART(hd);
        float w = exp_vec(p[0] - top); // 0 for an empty range's m of -inf
        l += w * p[1];
        for (int d = 0; d < hd; d++) out[d] += w * p[2 + d];
    }
    for (int d = 0; d < hd; d++) out[d] /= l;
}

// Thread id of nt's share of one query row's attention, q [n_heads * head_dim] against keys and
// values [0, n) (k, v: rows of n_kv_heads * head_dim of kv_type), scaled by scale, into out
// [n_heads * head_dim]; every key is seen (a band's first key is the first of k). scores: a row
// of ld_scores ≥ n floats for each query head; parts: n_heads × nt partials (TOKEN_PART floats
// each). Each thread takes a range of the keys for every head, so that it streams whole cache
// rows (a thread's heads at a time read half rows: 26 against 53 tok/s, docs/KERNELS.md); all
// nt threads call it together and meet at barrier before merging the ranges.
static inline void attention_token(float *out, float *scores, size_t ld_scores, float *parts, const float *q,
                                   const void *k, const void *v, int kv_type, int n, int n_heads, int n_kv_heads,
                                   int head_dim, float scale, int id, int nt, Barrier *barrier) {
    int group = n_heads / n_kv_heads, hd = head_dim;
    size_t kvd = (size_t)n_kv_heads * hd, ld_part = nt * TOKEN_PART(hd), j0, j1, h0, h1;
    share((size_t)n, id, nt, &j0, &j1);
    size_t at = kv_span(kv_type, j0 * kvd);
    float *part = parts + id * TOKEN_PART(hd), *sc = scores + j0;
    const char *kr = (const char *)k + at, *vr = (const char *)v + at;
#define TOKEN_KEYS(type)                                                                                               \
    token_keys(part, ld_part, sc, ld_scores, q, n_kv_heads, group, kr, vr, type, kvd, hd, (int)(j1 - j0), scale)
    if (kv_type == WEIGHTS_F16) TOKEN_KEYS(WEIGHTS_F16);
    else if (kv_type == BLOCK_Q8_0) TOKEN_KEYS(BLOCK_Q8_0);
    else TOKEN_KEYS(WEIGHTS_F32);
#undef TOKEN_KEYS
    if (nt > 1) barrier_wait(barrier, nt);
    share((size_t)n_heads, id, nt, &h0, &h1);
    for (size_t i = h0; i < h1; i++) token_merge(out + i * hd, parts + i * ld_part, nt, hd);
}

#endif
