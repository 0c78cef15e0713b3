// model/attention.h: masked scaled dot-product attention over heads, forward and backward,
// and the causal products they are made of. It owns the (sequence, head) loops and their
// scratch layout; the queries, keys and values come in already projected and rotated
// (matmul.h, layers.h), so nothing here knows a layer, a weight or a file.
#ifndef ATTN_MODEL_ATTENTION_H
#define ATTN_MODEL_ATTENTION_H

#include <math.h>
#include <string.h>
#include "layers.h"
#include "matmul.h"
#include "threads.h"

// The attention's products, for training shapes small (a head's [T, head_dim] against its
// [P + T, head_dim] keys) and half masked: sgemm computes the masked half as well and packs
// its operands on every call. These skip whole masked blocks and keep a tile of the result in
// registers. GCC's and clang's vector types, so one source serves AVX-512, AVX2 and others.
typedef float vec16 __attribute__((vector_size(64)));
typedef float vec16u __attribute__((vector_size(64), aligned(4), may_alias)); // unaligned
typedef int32_t vec16i __attribute__((vector_size(64)));
#define VEC 16
// The tile's own arithmetic runs on vectors of the machine's width, VEC / VREG of them to a
// vec16: GCC lowers a vector wider than the registers through the stack, which made the
// tile the half of an x86-64-v3 training step (docs/KERNELS.md).
#if defined(__AVX512F__)
#define VREG 16
#elif defined(__AVX__)
#define VREG 8
#else
#define VREG 4
#endif
#define PARTS (VEC / VREG)
typedef float vreg __attribute__((vector_size(VREG * 4)));
typedef float vregu __attribute__((vector_size(VREG * 4), aligned(4), may_alias)); // unaligned
#ifdef __clang__
#define SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (vec16i){__VA_ARGS__})
#endif

enum { CAUSAL_NONE, CAUSAL_BELOW, CAUSAL_ABOVE };

// Keys and values come as float32 or, from a KV cache of ./run --kv-cache f16 or q8_0, as
// float16 or llama.cpp's Q8_0 blocks: type is WEIGHTS_F32, WEIGHTS_F16 or BLOCK_Q8_0, and they
// are widened as they are loaded (widen1, widen8, widen16), so that the arithmetic is float32's
// either way. A Q8_0 block holds 32 values of one row: head_dim is a multiple of 32 there, so
// that every head, and every run of 16 or 8 values the loads take, lies in whole blocks.
// The bytes of n such values (n a multiple of 32 for Q8_0): every offset into the cache.
static inline size_t kv_span(int type, size_t n) { return row_bytes(type, n); }

// Elements i .. i + 15 of such a row as float32 (for Q8_0, p at a block's start and i a
// multiple of 16), into *v (not returned: a 64-byte vector
// returned by value has another ABI with AVX-512 than without).
static inline __attribute__((always_inline)) void widen_vec16(vec16 *v, const void *p, size_t i, int type) {
    if (type == WEIGHTS_F32) *v = *(const vec16u *)((const float *)p + i);
#if defined(__AVX512F__)
    else *v = (vec16)widen16(p, i, type);
#elif defined(__AVX2__) && defined(__FMA__)
    else {
        __m256 h[2] = {widen8(p, i, type), widen8(p, i + 8, type)};
        memcpy(v, h, sizeof h);
    }
#else
    else
        for (int k = 0; k < VEC; k++) (*v)[k] = widen1(p, i + k, type);
#endif
}

// Elements i .. i + VREG - 1 of such a row as float32, into *v.
static inline __attribute__((always_inline)) void widen_vreg(vreg *v, const void *p, size_t i, int type) {
    if (type == WEIGHTS_F32) *v = *(const vregu *)((const float *)p + i);
#if defined(__AVX512F__)
    else *v = (vreg)widen16(p, i, type);
#elif defined(__AVX2__) && defined(__FMA__)
    else *v = (vreg)widen8(p, i, type);
#else
    else {
        float x[VREG]; // whole, then copied: GCC does not see lane-by-lane stores set every lane
        for (int k = 0; k < VREG; k++) x[k] = widen1(p, i + k, type);
        memcpy(v, x, sizeof x);
    }
#endif
}

// The widest tile, in vec16s, and its rows: 4 rows × 4 of them are 16 of AVX-512's 32
// registers; with 16 registers (AVX2, SSE) 6 rows × 1 leave room for the row of B and a
// broadcast, and give AVX2's two FMA pipes of latency 4 the 12 sums in flight that 4 rows'
// 8 left without slack.
#define TILE_NV (VREG == 16 ? 4 : 1)
#define TILE_ROWS (VREG == 16 ? 4 : 6)

// C[i, :16 NV] = alpha Σ_{k0 ≤ k < k1} A[i ai + k ak] B[k ldb + col, :16 NV] for R rows i,
// added to C with accumulate; B's elements of b_type. R, NV and b_type are constants where it
// is called, so acc lives in registers.
static inline __attribute__((always_inline)) void product_tile(float *C, size_t ldc, const float *A, size_t ai,
                                                               size_t ak, const void *B, int b_type, size_t ldb,
                                                               size_t col, int k0, int k1, int R, int NV, float alpha,
                                                               int accumulate) {
    vreg acc[TILE_ROWS][4 * PARTS];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 16
        for (int v = 0; v < NV * PARTS; v++) acc[r][v] = (vreg){0};
    for (int k = k0; k < k1; k++) {
        vreg b[4 * PARTS];
#pragma GCC unroll 16
        for (int v = 0; v < NV * PARTS; v++) {
            widen_vreg(&b[v], B, k * ldb + col + v * VREG, b_type);
#if defined(__AVX512F__)
            // in a register: GCC folds the load into every row's FMA, a load an FMA, which
            // the load ports do not keep up with (a 4,000-token prompt 10 % faster, docs/KERNELS.md)
            __asm__("" : "+v"(b[v]));
#endif
        }
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            vreg a = A[r * ai + k * ak] - (vreg){0}; // a broadcast load: x − 0 is x, where 0 + x is not for x = −0
#pragma GCC unroll 16
            for (int v = 0; v < NV * PARTS; v++) acc[r][v] += a * b[v];
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 16
        for (int v = 0; v < NV * PARTS; v++) {
            vregu *c = (vregu *)(C + r * ldc + v * VREG);
            vreg prior = accumulate ? (vreg)*c : (vreg){0};
            *c = prior + acc[r][v] * alpha;
        }
}

// C[i, :N] = alpha Σ_k A(i, k) B[k ldb, :N] (added to C with accumulate) for rows i < M, k < K
// cut by the mask: CAUSAL_BELOW takes k ≤ P + i, CAUSAL_ABOVE k ≥ i − P. A(i, k) is
// A[i lda + k], or A[k lda + i] with a_trans; B's elements are of b_type (WEIGHTS_F32,
// WEIGHTS_F16 or BLOCK_Q8_0). A tile of rows takes the union of its rows' ranges, so A must be 0 outside
// each row's own.
// The k range [k0, k1) that rows i .. i + R − 1 take together under mask (causal_product).
static inline void causal_range(int mask, int P, int K, int i, int R, int *k0, int *k1) {
    *k0 = mask == CAUSAL_ABOVE && i - P > 0 ? i - P : 0;
    *k1 = mask == CAUSAL_BELOW && P + i + R < K ? P + i + R : K;
}

static void causal_product(float *C, size_t ldc, const float *A, size_t lda, int a_trans, const void *B, int b_type,
                           size_t ldb, int M, int N, int K, int mask, int P, float alpha, int accumulate) {
    int c = 0;
    for (int nv = TILE_NV; nv >= 1; nv /= 2)
        for (; c + nv * VEC <= N; c += nv * VEC)
            for (int i = 0, R; i < M; i += R) {
                R = M - i >= TILE_ROWS ? TILE_ROWS : M - i >= 4 ? 4 : 1;
                int k0, k1;
                causal_range(mask, P, K, i, R, &k0, &k1);
                float *Ct = C + i * ldc + c;
                const float *At = a_trans ? A + i : A + i * lda;
                // A's strides and B's type as constants in each inlined tile
#define TILE_OF(R, NV, type)                                                                                           \
    (a_trans ? product_tile(Ct, ldc, At, 1, lda, B, type, ldb, c, k0, k1, R, NV, alpha, accumulate)                    \
             : product_tile(Ct, ldc, At, lda, 1, B, type, ldb, c, k0, k1, R, NV, alpha, accumulate))
#define TILE(R, NV)                                                                                                    \
    (b_type == WEIGHTS_F16  ? TILE_OF(R, NV, WEIGHTS_F16)                                                              \
     : b_type == BLOCK_Q8_0 ? TILE_OF(R, NV, BLOCK_Q8_0)                                                               \
                            : TILE_OF(R, NV, WEIGHTS_F32))
                // (where TILE_ROWS is 4, the first line takes every tile of 4 rows)
                if (R == TILE_ROWS) nv == 4 ? TILE(TILE_ROWS, 4) : nv == 2 ? TILE(TILE_ROWS, 2) : TILE(TILE_ROWS, 1);
                else if (R == 4) nv == 4 ? TILE(4, 4) : nv == 2 ? TILE(4, 2) : TILE(4, 1);
                else nv == 4 ? TILE(1, 4) : nv == 2 ? TILE(1, 2) : TILE(1, 1);
#undef TILE
#undef TILE_OF
            }
    for (int i = 0; i < M && c < N; i++) { // columns past the last 16 (head_dim not a multiple of 16)
        int k0, k1;
        causal_range(mask, P, K, i, 1, &k0, &k1);
        for (int j = c; j < N; j++) {
            float sum = 0.0f;
            for (int k = k0; k < k1; k++)
                sum += (a_trans ? A[k * lda + i] : A[i * lda + k]) * widen1(B, k * ldb + j, b_type);
            C[i * ldc + j] = accumulate ? C[i * ldc + j] + alpha * sum : alpha * sum;
        }
    }
}

#define VEC_KEYS 32
// Lane j of the half h (0 or 1) of a stage that swaps blocks of w lanes between registers
// i and i + w: lanes of a from even blocks, of b (16 + ...) from odd ones.
#define SWAP_LANE(j, w, h) ((j) / (2 * (w)) * 2 * (w) + ((j) / (w) % 2 ? VEC : 0) + (j) % (w) + (h) * (w))
#define SWAP_LANES(w, h)                                                                                               \
    SWAP_LANE(0, w, h), SWAP_LANE(1, w, h), SWAP_LANE(2, w, h), SWAP_LANE(3, w, h), SWAP_LANE(4, w, h),                \
        SWAP_LANE(5, w, h), SWAP_LANE(6, w, h), SWAP_LANE(7, w, h), SWAP_LANE(8, w, h), SWAP_LANE(9, w, h),            \
        SWAP_LANE(10, w, h), SWAP_LANE(11, w, h), SWAP_LANE(12, w, h), SWAP_LANE(13, w, h), SWAP_LANE(14, w, h),       \
        SWAP_LANE(15, w, h)
#define TRANSPOSE_STAGE(dst, src, w)                                                                                   \
    for (int i = 0; i < VEC; i++)                                                                                      \
        if (!(i & (w))) {                                                                                              \
            dst[i] = SHUFFLE16(src[i], src[i + (w)], SWAP_LANES(w, 0));                                                \
            dst[i + (w)] = SHUFFLE16(src[i], src[i + (w)], SWAP_LANES(w, 1));                                          \
        }

// dst[d, i] = src[i, d] for the first n of 16 rows i (0 for the others), d < D, src's elements of
// type; dst's rows are ldd floats apart. 16 × 16 blocks go through registers: swapping the
// off-diagonal blocks of sizes 8, 4, 2 and 1 in turn transposes them.
static inline void transpose_keys(float *dst, size_t ldd, const void *src, int type, size_t lds, int n, int D) {
    int d = 0;
    for (; d + VEC <= D; d += VEC) {
        vec16 r[VEC], t[VEC];
        for (int i = 0; i < VEC; i++) {
            r[i] = (vec16){0};
            if (i < n) widen_vec16(&r[i], src, i * lds + d, type);
        }
        TRANSPOSE_STAGE(t, r, 8);
        TRANSPOSE_STAGE(r, t, 4);
        TRANSPOSE_STAGE(t, r, 2);
        TRANSPOSE_STAGE(r, t, 1);
        for (int i = 0; i < VEC; i++) *(vec16u *)(dst + (d + i) * ldd) = r[i];
    }
    for (; d < D; d++)
        for (int i = 0; i < VEC; i++) dst[d * ldd + i] = i < n ? widen1(src, i * lds + d, type) : 0.0f;
}

// Row t of a causal score block holds P + t + 1 scores; causal_scores writes it to this
// width, a multiple of 16 within L, so that the loops over it need no scalar tail: the rows
// are short, and the tail cost more than the rest.
static inline int causal_width(int n, int L) {
    int m = (n + VEC - 1) / VEC * VEC;
    return m < L ? m : L;
}

// S[t, j] = alpha q_t · k_j for T query rows (lq apart) and P + T keys (lk apart, elements of
// k_type), into rows of P + T, for j < causal_width(P + t + 1, P + T): the entries past P + t
// are unmasked scores for the caller to mask. A block of VEC_KEYS keys is transposed once for all the rows that
// see it; one or two rows (a one-token step) do not pay for transposing and take dot products.
#define KT_DIMS 128
static void causal_scores(float *S, const float *q, size_t lq, const void *k, int k_type, size_t lk, int T, int P,
                          int hd, float alpha) {
    size_t L = (size_t)P + T, kb = kv_span(k_type, hd), lkb = kv_span(k_type, lk);
    const char *kc = k;
    if (T < 3) {
        for (int t = 0; t < T; t++)
            for (int j = 0, m = causal_width(P + t + 1, (int)L); j < m; j++) {
                // keys lie a row of the cache apart, too far for the hardware to guess
                for (size_t x = 0; x < kb && j + 6 < m; x += 64) __builtin_prefetch(kc + (j + 6) * lkb + x);
                S[t * L + j] = alpha * dot_w(kc + j * lkb, k_type, q + t * lq, hd);
            }
        return;
    }
    float kt[KT_DIMS * VEC_KEYS];
    for (int j0 = 0; j0 < (int)L; j0 += VEC_KEYS) {
        int nb = (int)L - j0 < VEC_KEYS ? (int)L - j0 : VEC_KEYS, t0 = j0 - P > 0 ? j0 - P : 0;
        for (int d0 = 0; d0 < hd; d0 += KT_DIMS) {
            int dn = hd - d0 < KT_DIMS ? hd - d0 : KT_DIMS;
            for (int h = 0; h < VEC_KEYS; h += VEC)
                transpose_keys(kt + h, VEC_KEYS, kc + kv_span(k_type, (h < nb ? j0 + h : 0) * lk + d0), k_type, lk,
                               nb - h, dn);
            causal_product(S + t0 * L + j0, L, q + t0 * lq + d0, lq, 0, kt, WEIGHTS_F32, VEC_KEYS, T - t0, nb, dn,
                           CAUSAL_NONE, 0, alpha, d0 > 0);
        }
    }
}

// Row t of a causal_scores block (L entries) into probabilities over its entries [lo, n), n =
// P + t + 1, and 0 elsewhere. The softmax runs from lo rounded down to a multiple of 16 to
// causal_width(n), over scores padded with -inf (exp of -inf gives the padding 0).
static inline void causal_softmax_row(float *row, int lo, int n, int L) {
    int a = lo / VEC * VEC, m = causal_width(n, L);
    for (int j = a; j < lo; j++) row[j] = -INFINITY;
    for (int j = n; j < m; j++) row[j] = -INFINITY;
    softmax(row + a, m - a);
    memset(row, 0, (size_t)a * sizeof(float));
    memset(row + m, 0, (size_t)(L - m) * sizeof(float));
}

// ----------------------------------------------------------------------------
// Attention

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
