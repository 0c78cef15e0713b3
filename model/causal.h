// model/causal.h: the attention's products under a causal mask, the blocks model/attention.h
// is made of: a tile of C = A B kept in registers (causal_product), the keys transposed
// (transpose_keys), a block of scores (causal_scores) and a row's softmax. Keys and values may
// come from a float16 or Q8_0 cache and are widened as they are loaded.
#ifndef ATTN_MODEL_CAUSAL_H
#define ATTN_MODEL_CAUSAL_H

#include <math.h>
#include <string.h>
#include "layers.h"
#include "matmul.h"

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
        __m256 h[2];
        widen8x2(h, p, i, type);
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

// The count vregs from element i of such a row (i a multiple of 16) as float32, into b: on
// AVX2 (PARTS = 2, so count is even) a pair at a time through widen8x2, which widens a Q8_0
// block's scale once for the pair's 16 values.
static inline __attribute__((always_inline)) void widen_vregs(vreg *b, int count, const void *p, size_t i, int type) {
#if VREG == 8 && defined(__AVX2__) && defined(__FMA__)
    for (int v = 0; v < count; v += 2) {
        __m256 h[2];
        widen8x2(h, p, i + (size_t)v * VREG, type);
        b[v] = (vreg)h[0], b[v + 1] = (vreg)h[1];
    }
#else
#pragma GCC unroll 16
    for (int v = 0; v < count; v++) {
        widen_vreg(&b[v], p, i + (size_t)v * VREG, type);
#if defined(__AVX512F__)
        // in a register: GCC folds the load into every row's FMA, a load an FMA, which the
        // load ports do not keep up with (a 4,000-token prompt 10 % faster, docs/KERNELS.md)
        __asm__("" : "+v"(b[v]));
#endif
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
        widen_vregs(b, NV * PARTS, B, k * ldb + col, b_type);
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

#endif
