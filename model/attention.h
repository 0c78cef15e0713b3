// model/attention.h: masked scaled dot-product attention over heads, forward and backward,
// from the causal products of model/causal.h. It owns the (sequence, head) loops and their
// scratch layout; the queries, keys and values come in already projected and rotated
// (matmul.h, layers.h), so nothing here knows a layer, a weight or a file.
#ifndef ATTN_MODEL_ATTENTION_H
#define ATTN_MODEL_ATTENTION_H

#include <math.h>
#include <string.h>
#include "causal.h"
#include "layers.h"
#include "threads.h"

// Where attention probabilities are copied when someone asks to see them (./run -m attention):
// those of layers [layer0, layer0 + layers) and query heads [head0, head0 + heads) of a
// sequence of positions tokens, as [layers, heads, positions, positions]: query position t's
// probability for key position j at ((layer * heads + head) * positions + t) * positions + j,
// counted from layer0 and head0. The attention itself sees one layer: forward() hands it a copy
// whose p points at that layer's block, at the row of its first query and the column of its
// first key. Entries for masked keys are never written: the caller zeroes the buffer.
typedef struct {
    float *p;
    int layer0, layers, head0, heads, positions;
} AttentionKeep;

// Where head h's probabilities go, or NULL for a head not kept.
static inline float *attention_kept(const AttentionKeep *keep, int h) {
    if (h < keep->head0 || h >= keep->head0 + keep->heads) return NULL;
    return keep->p + (size_t)(h - keep->head0) * keep->positions * keep->positions;
}

// Masked scaled dot-product attention for B sequences of T new rows each, after P rows
// already in k/v. q, out: [B, T, n_heads * head_dim]; k, v: [B, P + T, n_kv_heads * head_dim],
// of kv_type (WEIGHTS_F32, or WEIGHTS_F16 or BLOCK_Q8_0 from such a cache).
// Scores are scaled by scale; with window > 0 row t attends only to its last window keys,
// P + t + 1 - window ≤ j ≤ P + t (a local layer's band, Hugging Face's sliding window), and
// without one to every key up to its own. att receives the probabilities [B, n_heads, T, P + T]
// (zero where masked) so that training can keep them for the backward pass; in a band it is
// only scratch. Parallel across (sequence, head): attention_pairs_masked does the (sequence,
// head) pairs [lo, hi) of B × n_heads, a thread's share.
// keep, when not NULL, receives a copy of the probabilities as they are computed (one sequence
// only, B = 1): the same numbers the values are weighted with, for ./run -m attention.
#define BAND_ROWS 32 // a band's rows go in blocks this tall, each over only the keys its rows see
static inline void attention_pairs_masked(float *out, float *att, const float *q, const void *k, const void *v,
                                          int kv_type, int T, int P, int n_heads, int n_kv_heads, int head_dim,
                                          float scale, int window, const AttentionKeep *keep, size_t lo, size_t hi) {
    int L = P + T, qd = n_heads * head_dim, kvd = n_kv_heads * head_dim, group = n_heads / n_kv_heads;
    int rows = window ? BAND_ROWS : T;
    for (size_t i = lo; i < hi; i++) {
        int b = (int)(i / n_heads), h = (int)(i % n_heads);
        size_t head = kv_span(kv_type, (size_t)b * L * kvd + (size_t)(h / group) * head_dim);
        const char *kb = (const char *)k + head, *vb = (const char *)v + head;
        const float *qb = q + (size_t)b * T * qd + (size_t)h * head_dim;
        float *a = att + i * T * L, *o = out + (size_t)b * T * qd + (size_t)h * head_dim;
        float *kept = keep ? attention_kept(keep, h) : NULL;
        // rows [t0, t0 + n) over keys [k0, P + t0 + n): p of them before the block's first row
        for (int t0 = 0; t0 < T;) {
            int n = T - t0 < rows ? T - t0 : rows;
            int k0 = window && P + t0 + 1 - window > 0 ? P + t0 + 1 - window : 0, p = P + t0 - k0, l = p + n;
            causal_scores(a, qb + (size_t)t0 * qd, qd, kb + kv_span(kv_type, (size_t)k0 * kvd), kv_type, kvd, n, p,
                          head_dim, scale);
            for (int t = 0; t < n; t++) {
                int first = window && p + t + 1 - window > 0 ? p + t + 1 - window : 0;
                causal_softmax_row(a + (size_t)t * l, first, p + t + 1, l);
            }
            for (int t = 0; t < n && kept; t++) // row t sees keys k0 .. k0 + p + t
                memcpy(kept + (size_t)(t0 + t) * keep->positions + k0, a + (size_t)t * l, (p + t + 1) * sizeof(float));
            causal_product(o + (size_t)t0 * qd, qd, a, l, 0, vb + kv_span(kv_type, (size_t)k0 * kvd), kv_type, kvd, n,
                           head_dim, l, CAUSAL_BELOW, p, 1.0f, 0);
            a += (size_t)n * l; // the blocks' scores [n, l] lie one after another
            t0 += n;
        }
    }
}

// ----------------------------------------------------------------------------
// Tiled attention for passes of many rows (prompts, -m ppl, -m logits, chat turns)

// A block of TILE_QUERIES query rows of one head against blocks of TILE_KEYS keys with an
// online softmax (flash attention): each block's scores and probabilities [keys, queries] live
// in a small tile, and every key and value block is widened to float32 once per query block.
// Fewer rows than TILED_MIN_ROWS, or heads wider than TILE_MAX_DIMS (the tiles live on the
// thread's stack, sized for that), take attention_pairs_masked's score blocks (docs/KERNELS.md).
#define TILE_QUERIES 128
#define TILE_KEYS 64
#define TILE_MAX_DIMS 256
#define TILED_MIN_ROWS 16

static inline int attention_tiles_fit(int T, int head_dim) { return T >= TILED_MIN_ROWS && head_dim <= TILE_MAX_DIMS; }

// Rows [k0, k1) of a key or value cache (rows ld elements apart, elements of type, whose first
// hd are the head's) as float32 into tile [k1 - k0, hd]: where a cache type's widening lives.
static inline void kv_tile_f32(float *tile, const void *cache, int type, size_t ld, int k0, int k1, int hd) {
    size_t row_span = kv_span(type, ld), span = kv_span(type, (size_t)hd);
    for (int j = k0; j < k1; j++) {
        const char *row = (const char *)cache + (size_t)j * row_span;
        float *dst = tile + (size_t)(j - k0) * hd;
        // the next block's row: rows lie a cache row apart, too far for the hardware to guess
        for (size_t x = 0; x < span; x += 64) __builtin_prefetch(row + (size_t)(k1 - k0) * row_span + x);
        if (type == WEIGHTS_F32) {
            memcpy(dst, row, (size_t)hd * sizeof(float));
            continue;
        }
        int d = 0;
        for (; d + VREG <= hd; d += VREG) {
            vreg x;
            widen_vreg(&x, row, d, type);
            *(vregu *)(dst + d) = x;
        }
        for (; d < hd; d++) dst[d] = widen1(row, d, type);
    }
}

// The query block's running max m, sum l and output o [n, hd] after one more block of scores
// s [nb, ld] (key-major, the queries' columns ld apart) and its values vt [nb, hd]: s becomes
// the block's probabilities, scaled to the new max, and o is rescaled to it before they are
// added. A column masked in every block so far keeps m = -inf, and its exponentials are 0.
// Query i sees no key past off + i (causal_product's CAUSAL_BELOW), which the product skips.
static inline void online_softmax_block(float *o, float *m, float *l, float *s, const float *vt, int nb, int n, int ld,
                                        int hd, int off) {
    float top[TILE_QUERIES], shift[TILE_QUERIES], rescale[TILE_QUERIES], sum[TILE_QUERIES];
    for (int i = 0; i < ld; i++) top[i] = m[i], sum[i] = 0.0f;
    for (int j = 0; j < nb; j++)
#pragma omp simd
        for (int i = 0; i < ld; i++) top[i] = s[j * ld + i] > top[i] ? s[j * ld + i] : top[i];
#pragma omp simd
    for (int i = 0; i < ld; i++) {
        shift[i] = top[i] == -INFINITY ? 0.0f : top[i];
        rescale[i] = exp_vec(m[i] - shift[i]);
        m[i] = top[i];
    }
    for (int j = 0; j < nb; j++)
#pragma omp simd
        for (int i = 0; i < ld; i++) {
            s[j * ld + i] = exp_vec(s[j * ld + i] - shift[i]);
            sum[i] += s[j * ld + i];
        }
    for (int i = 0; i < n; i++) {
        l[i] = l[i] * rescale[i] + sum[i];
        if (rescale[i] != 1.0f)
            for (int d = 0; d < hd; d++) o[i * hd + d] *= rescale[i];
    }
    causal_product(o, hd, s, ld, 1, vt, WEIGHTS_F32, hd, n, hd, nb, CAUSAL_BELOW, off, 1.0f, 1);
}

// attention_pairs_masked's attention (the same arguments, without probabilities to keep) in
// tiles, for the (sequence, head) pairs [lo, hi): per block of queries, the keys they see in
// blocks, skipping those every row masks and masking the others' entries. head_dim ≤
// TILE_MAX_DIMS. lse, when not NULL, receives each row's logsumexp of its scaled scores
// [B, n_heads, T]: all training's backward needs to compute the probabilities again.
static inline void attention_tiled(float *out, float *lse, const float *q, const void *k, const void *v, int kv_type,
                                   int T, int P, int n_heads, int n_kv_heads, int head_dim, float scale, int window,
                                   size_t lo, size_t hi) {
    int L = P + T, hd = head_dim, qd = n_heads * hd, kvd = n_kv_heads * hd, group = n_heads / n_kv_heads;
    float qt[TILE_MAX_DIMS * TILE_QUERIES] __attribute__((aligned(64)));
    float kt[TILE_KEYS * TILE_MAX_DIMS] __attribute__((aligned(64)));
    float vt[TILE_KEYS * TILE_MAX_DIMS] __attribute__((aligned(64)));
    float s[TILE_KEYS * TILE_QUERIES] __attribute__((aligned(64)));
    float o[TILE_QUERIES * TILE_MAX_DIMS] __attribute__((aligned(64)));
    float m[TILE_QUERIES], l[TILE_QUERIES];
    for (size_t pair = lo; pair < hi; pair++) {
        int b = (int)(pair / n_heads), h = (int)(pair % n_heads);
        size_t head = kv_span(kv_type, (size_t)b * L * kvd + (size_t)(h / group) * hd);
        const char *kb = (const char *)k + head, *vb = (const char *)v + head;
        const float *qb = q + (size_t)b * T * qd + (size_t)h * hd;
        float *ob = out + (size_t)b * T * qd + (size_t)h * hd;
        for (int t0 = 0; t0 < T; t0 += TILE_QUERIES) {
            // queries [t0, t0 + n), as columns [0, ld) of qt (those past n zero), see keys [first, end)
            int n = T - t0 < TILE_QUERIES ? T - t0 : TILE_QUERIES, ld = (n + VEC - 1) / VEC * VEC;
            int first = window && P + t0 + 1 - window > 0 ? P + t0 + 1 - window : 0, end = P + t0 + n;
            for (int i = 0; i < ld; i += VEC)
                transpose_keys(qt + i, ld, qb + (size_t)(t0 + i) * qd, WEIGHTS_F32, qd, n - i, hd);
            for (int i = 0; i < ld; i++) m[i] = -INFINITY, l[i] = 0.0f;
            memset(o, 0, (size_t)n * hd * sizeof(float));
            for (int j0 = first; j0 < end; j0 += TILE_KEYS) {
                int nb = end - j0 < TILE_KEYS ? end - j0 : TILE_KEYS;
                kv_tile_f32(kt, kb, kv_type, kvd, j0, j0 + nb, hd);
                kv_tile_f32(vt, vb, kv_type, kvd, j0, j0 + nb, hd);
                // key j0 + j is seen by the queries i with j ≤ off + i (< window later): a chunk of
                // 16 keys' scores start at the first column of 16 that any of them sees
                int off = P + t0 - j0;
                for (int c = 0; c < nb; c += VEC) {
                    int r = nb - c < VEC ? nb - c : VEC, i0 = c - off > 0 ? (c - off) / VEC * VEC : 0;
                    causal_product(s + c * ld + i0, ld, kt + c * hd, hd, 0, qt + i0, WEIGHTS_F32, ld, r, ld - i0, hd,
                                   CAUSAL_NONE, 0, scale, 0);
                }
                for (int j = 0; j < nb; j++) {
                    int from = j - off, to = window ? from + window : ld;
                    for (int i = 0; i < from && i < ld; i++) s[j * ld + i] = -INFINITY;
                    for (int i = to > 0 ? to : 0; i < ld; i++) s[j * ld + i] = -INFINITY;
                }
                online_softmax_block(o, m, l, s, vt, nb, n, ld, hd, off);
            }
            for (int i = 0; i < n; i++)
                for (int d = 0; d < hd; d++) ob[(size_t)(t0 + i) * qd + d] = o[i * hd + d] / l[i];
            for (int i = 0; i < n && lse; i++) lse[pair * T + t0 + i] = m[i] + logf(l[i]);
        }
    }
}

// Causal attention scaled by 1 / sqrt(head_dim), as ./train's models have it.
static inline void attention_pairs(float *out, float *att, const float *q, const float *k, const float *v, int T, int P,
                                   int n_heads, int n_kv_heads, int head_dim, size_t lo, size_t hi) {
    attention_pairs_masked(out, att, q, k, v, WEIGHTS_F32, T, P, n_heads, n_kv_heads, head_dim,
                           1.0f / sqrtf((float)head_dim), 0, NULL, lo, hi);
}

static inline void attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int B,
                                     int T, int P, int n_heads, int n_kv_heads, int head_dim) {
    size_t pairs = (size_t)B * n_heads;
#pragma omp parallel if (pairs * T * (P + T) * head_dim >= PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t lo, hi;
        share(pairs, id, nt, &lo, &hi);
        attention_pairs(out, att, q, k, v, T, P, n_heads, n_kv_heads, head_dim, lo, hi);
    }
}

// attention_forward's backward with P = 0, from the probabilities it left in att and the
// ones the values were weighted with, attd (att after dropout, or att itself), with the
// causal products per (sequence, head) on the strided head columns. Called outside a
// parallel region (model_step's shared sequences), the threads take (sequence, key/value
// head) pairs, each with its own [T, T] scratch ds + thread × T²; inside one, the calling
// thread does them all with ds.
static inline void attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                      const float *att, const float *attd, const float *q, const float *k,
                                      const float *v, int B, int T, int n_heads, int n_kv_heads, int head_dim) {
    int H = n_heads, KV = n_kv_heads, hd = head_dim, qd = H * hd, kvd = KV * hd, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int pair = 0; pair < B * KV; pair++) {
        int b = pair / KV, kh = pair % KV;
        float *ds = scratch + (size_t)thread_num() * T * T;
        size_t kvo = (size_t)b * T * kvd + (size_t)kh * hd;
        for (int h = kh * group; h < (kh + 1) * group; h++) {
            const float *p = att + ((size_t)b * H + h) * T * T, *pd = attd + ((size_t)b * H + h) * T * T;
            size_t qo = (size_t)b * T * qd + (size_t)h * hd;
            int add = h != kh * group; // the group's first head sets dK and dV, the others add
            // dV += Pdᵀ dO;  dPd = dO Vᵀ
            causal_product(dv + kvo, kvd, pd, T, 1, dout + qo, WEIGHTS_F32, qd, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, add);
            causal_scores(ds, dout + qo, qd, v + kvo, WEIGHTS_F32, kvd, T, 0, hd, 1.0f);
            // With Pd = P ∘ M (M the dropout mask and scale, or 1): dP = M ∘ dPd, and the
            // softmax's dS = P ∘ (dP − rowsum(P ∘ dP)) · scale, where P ∘ dP = Pd ∘ dPd.
            // Masked entries have P = Pd = 0, so dS is 0 there, as the products below need.
            for (int t = 0; t < T; t++) {
                const float *pt = p + (size_t)t * T, *pdt = pd + (size_t)t * T;
                float *st = ds + (size_t)t * T, sum = 0.0f;
                int m = causal_width(t + 1, T);
                for (int j = 0; j < m; j++) sum += pdt[j] * st[j];
                for (int j = 0; j < m; j++) st[j] = (pdt[j] * st[j] - pt[j] * sum) * scale;
                memset(st + m, 0, (size_t)(T - m) * sizeof(float));
            }
            // dQ = dS K;  dK += dSᵀ Q
            causal_product(dq + qo, qd, ds, T, 0, k + kvo, WEIGHTS_F32, kvd, T, hd, T, CAUSAL_BELOW, 0, 1.0f, 0);
            causal_product(dk + kvo, kvd, ds, T, 1, q + qo, WEIGHTS_F32, qd, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, add);
        }
    }
}

// ----------------------------------------------------------------------------
// Training's attention in tiles (flash attention): the forward keeps each row's logsumexp
// [B, n_heads, T] instead of its probabilities [B, n_heads, T, T], and the backward computes
// them again a tile at a time (FlashAttention-2's backward), so that nothing T × T is held.

// attention_forward (P = 0, causal, scaled by 1 / sqrt(head_dim)) through attention_tiled,
// which ./run's prompts take: out, and the rows' logsumexp in lse. attention_tiles_fit(T,
// head_dim) must hold.
static inline void attention_forward_tiled(float *out, float *lse, const float *q, const float *k, const float *v,
                                           int B, int T, int n_heads, int n_kv_heads, int head_dim) {
    size_t pairs = (size_t)B * n_heads;
#pragma omp parallel if (pairs * T * T * head_dim >= PARALLEL_MIN_WORK)
    {
        size_t lo, hi;
        share(pairs, thread_num(), team_size(), &lo, &hi);
        attention_tiled(out, lse, q, k, v, WEIGHTS_F32, T, 0, n_heads, n_kv_heads, head_dim,
                        1.0f / sqrtf((float)head_dim), 0, lo, hi);
    }
}

#define TILE_BACK_KEYS 64 // keys per block of the backward: the diagonal block is the query block

// attention_forward_tiled's backward: dq, dk, dv from dout, the forward's out and lse. Per
// block of TILE_QUERIES queries and block of keys they see: P = exp(S − lse) from the scores
// S again, dP = dO Vᵀ, and the softmax's dS = P ∘ (dP − D) · scale with D = rowsum(dO ∘ O)
// (= rowsum(P ∘ dP)); then dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K. The tiles are key-major
// ([keys, queries]) as attention_tiled's, so that the keys, values and queries are read in
// place. Parallel over (sequence, key/value head) as attention_backward, whose dK and dV the
// group's query heads add into; inside a parallel region the calling thread does them all.
static inline void attention_backward_tiled(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                            const float *lse, const float *q, const float *k, const float *v, int B,
                                            int T, int n_heads, int n_kv_heads, int head_dim) {
    int H = n_heads, KV = n_kv_heads, hd = head_dim, qd = H * hd, kvd = KV * hd, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int pair = 0; pair < B * KV; pair++) {
        float qt[TILE_MAX_DIMS * TILE_QUERIES] __attribute__((aligned(64)));
        float dot[TILE_MAX_DIMS * TILE_QUERIES] __attribute__((aligned(64)));
        float p[TILE_BACK_KEYS * TILE_QUERIES] __attribute__((aligned(64)));
        float ds[TILE_BACK_KEYS * TILE_QUERIES] __attribute__((aligned(64)));
        float row_lse[TILE_QUERIES], delta[TILE_QUERIES];
        int b = pair / KV, kh = pair % KV;
        size_t kvo = (size_t)b * T * kvd + (size_t)kh * hd;
        const float *kb = k + kvo, *vb = v + kvo;
        for (int t = 0; t < T; t++) {
            memset(dk + kvo + (size_t)t * kvd, 0, (size_t)hd * sizeof(float));
            memset(dv + kvo + (size_t)t * kvd, 0, (size_t)hd * sizeof(float));
        }
        for (int h = kh * group; h < (kh + 1) * group; h++) {
            size_t qo = (size_t)b * T * qd + (size_t)h * hd;
            const float *qb = q + qo, *dob = dout + qo, *ob = out + qo, *lb = lse + ((size_t)b * H + h) * T;
            for (int t0 = 0; t0 < T; t0 += TILE_QUERIES) {
                // queries [t0, t0 + n) as columns [0, ld) of qt and dot (those past n zero) see keys [0, t0 + n)
                int n = T - t0 < TILE_QUERIES ? T - t0 : TILE_QUERIES, ld = (n + VEC - 1) / VEC * VEC;
                for (int i = 0; i < ld; i += VEC) {
                    transpose_keys(qt + i, ld, qb + (size_t)(t0 + i) * qd, WEIGHTS_F32, qd, n - i, hd);
                    transpose_keys(dot + i, ld, dob + (size_t)(t0 + i) * qd, WEIGHTS_F32, qd, n - i, hd);
                }
                for (int i = 0; i < ld; i++) {
                    const float *dorow = dob + (size_t)(t0 + i) * qd, *orow = ob + (size_t)(t0 + i) * qd;
                    delta[i] = row_lse[i] = 0.0f;
                    for (int d = 0; d < hd && i < n; d++) delta[i] += dorow[d] * orow[d];
                    if (i < n) row_lse[i] = lb[t0 + i];
                }
                for (int j0 = 0; j0 < t0 + n; j0 += TILE_BACK_KEYS) {
                    // key j0 + j is seen by the queries i ≥ j − off (and < n: the padding); the
                    // products skip what every row of a tile masks, as causal_product does
                    int nb = t0 + n - j0 < TILE_BACK_KEYS ? t0 + n - j0 : TILE_BACK_KEYS, off = t0 - j0;
                    const float *kj = kb + (size_t)j0 * kvd, *vj = vb + (size_t)j0 * kvd;
                    for (int c = 0; c < nb; c += VEC) {
                        // Sᵀ = K Qᵀ · scale and dPᵀ = V dOᵀ for keys [c, c + r), from the first
                        // column of 16 any of them sees
                        int r = nb - c < VEC ? nb - c : VEC, i0 = c - off > 0 ? (c - off) / VEC * VEC : 0;
                        causal_product(p + c * ld + i0, ld, kj + (size_t)c * kvd, kvd, 0, qt + i0, WEIGHTS_F32, ld, r,
                                       ld - i0, hd, CAUSAL_NONE, 0, scale, 0);
                        causal_product(ds + c * ld + i0, ld, vj + (size_t)c * kvd, kvd, 0, dot + i0, WEIGHTS_F32, ld, r,
                                       ld - i0, hd, CAUSAL_NONE, 0, 1.0f, 0);
                        for (int j = c; j < c + r; j++) {
                            // the columns before i0 are masked too: 0, for a tile of rows that
                            // reaches into the next 16 keys' (and the dQ product's) to read
                            memset(p + j * ld, 0, (size_t)i0 * sizeof(float));
                            memset(ds + j * ld, 0, (size_t)i0 * sizeof(float));
#pragma omp simd
                            for (int i = i0; i < ld; i++) {
                                float pi = i >= j - off && i < n ? exp_vec(p[j * ld + i] - row_lse[i]) : 0.0f;
                                p[j * ld + i] = pi;
                                ds[j * ld + i] = pi * (ds[j * ld + i] - delta[i]) * scale;
                            }
                        }
                    }
                    causal_product(dv + kvo + (size_t)j0 * kvd, kvd, p, ld, 0, dob + (size_t)t0 * qd, WEIGHTS_F32, qd,
                                   nb, hd, n, CAUSAL_ABOVE, off, 1.0f, 1);
                    causal_product(dk + kvo + (size_t)j0 * kvd, kvd, ds, ld, 0, qb + (size_t)t0 * qd, WEIGHTS_F32, qd,
                                   nb, hd, n, CAUSAL_ABOVE, off, 1.0f, 1);
                    causal_product(dq + qo + (size_t)t0 * qd, qd, ds, ld, 1, kj, WEIGHTS_F32, kvd, n, hd, nb,
                                   CAUSAL_BELOW, off, 1.0f, j0 > 0);
                }
            }
        }
    }
}

#endif
