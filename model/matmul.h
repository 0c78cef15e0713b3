// model/matmul.h: the linear layers' products, out = x · Wᵀ + b, the nn.Linear convention,
// for float32, bfloat16, float16, Q8_0 and llama.cpp's block types (model/quant.h), and their
// backward. One kernel serves a
// prompt (many rows: sgemm), a one-token step (one row: a dot product per output, streaming
// the weights) and training. It knows the weights only as matrices, never as layers or a file.
#ifndef ATTN_MODEL_MATMUL_H
#define ATTN_MODEL_MATMUL_H

#include <stdint.h>
#include <string.h>
#include <cblas.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "file.h"
#include "quant.h"
#include "quant_dot.h"
#include "quant_order.h"
#include "quant_panels.h"
#include "threads.h"
#include "widen.h"

// The scalar end of a row's dot product, from element i on, onto s: fused the same way for
// every type (left to itself, GCC vectorises float32's products unfused and fuses the others',
// and a bfloat16 row would not sum as float32's).
__attribute__((always_inline)) static inline float dot_tail(const void *restrict w, int type, const float *restrict x,
                                                            int i, int n, float s) {
#ifdef FP_FAST_FMAF
    for (; i < n; i++) s = fmaf(widen1(w, i, type), x[i], s);
#else
    for (; i < n; i++) s += widen1(w, i, type) * x[i];
#endif
    return s;
}

// ----------------------------------------------------------------------------
// One row of W times x, for a one-token step: it is bound by reading W once from memory, and
// this loop, split across threads by rows, streams it faster than OpenBLAS's sgemv here
// (bench/matvec.c measures both). A bfloat16 or float16 row is widened in registers, and the
// sums run in float32's order, so the result is bit for bit float32's on the widened row. It
// is inlined with type a constant (always_inline), so each type gets its own loop without a
// branch in it.
__attribute__((always_inline)) static inline float dot_w(const void *restrict w, int type, const float *restrict x,
                                                         int n) {
    int i = 0;
    float s = 0.0f;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(widen16(w, i, type), _mm512_loadu_ps(x + i), acc0);
        acc1 = _mm512_fmadd_ps(widen16(w, i + 16, type), _mm512_loadu_ps(x + i + 16), acc1);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m256 v[2];
        widen8x2(v, w, i, type);
        acc0 = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + i + 8), acc1);
    }
    s = hsum8(_mm256_add_ps(acc0, acc1));
#endif
    return dot_tail(w, type, x, i, n, s);
}

static inline float dot(const float *restrict a, const float *restrict b, int n) { return dot_w(a, WEIGHTS_F32, b, n); }

// dot_w of one row with each of nt inputs (x, ld_x apart) into sums, the row's values widened
// once for all of them: a few tokens' product reads the row once, as one token's does, where
// sgemm took 3-4 one-token steps for 5 (the verification pass of speculative decoding). Each
// input's sums run in dot_w's order, so a token's result is bit for bit its one-token step's.
#define FEW_TOKENS 8
__attribute__((always_inline)) static inline void
dot_w_tokens(const void *restrict w, int type, const float *restrict x, size_t ld_x, int n, float *sums, const int nt) {
    int i = 0;
#if defined(__AVX512F__)
    __m512 acc[FEW_TOKENS][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        __m512 w0 = widen16(w, i, type), w1 = widen16(w, i + 16, type);
        for (int t = 0; t < nt; t++) {
            acc[t][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * ld_x + i), acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + t * ld_x + i + 16), acc[t][1]);
        }
    }
    for (int t = 0; t < nt; t++) sums[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[FEW_TOKENS][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        __m256 v[2];
        widen8x2(v, w, i, type);
        for (int t = 0; t < nt; t++) {
            acc[t][0] = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(x + t * ld_x + i), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(x + t * ld_x + i + 8), acc[t][1]);
        }
    }
    for (int t = 0; t < nt; t++) sums[t] = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
#else
    for (int t = 0; t < nt; t++) sums[t] = 0.0f;
#endif
    for (int t = 0; t < nt; t++) sums[t] = dot_tail(w, type, x + t * ld_x, i, n, sums[t]);
}

// Rows [lo, hi) of a float32 or float16 matrix times T <= FEW_TOKENS inputs (+ b) into out
// [T, n_out], a row at a time; inlined with type and T constants.
__attribute__((always_inline)) static inline void dot_rows_tokens(float *out, size_t n_out, const void *w, int type,
                                                                  const float *b, const float *x, int n_in, size_t lo,
                                                                  size_t hi, const int nt) {
    size_t rb = row_bytes(type, (size_t)n_in);
    for (size_t r = lo; r < hi; r++) {
        float sums[FEW_TOKENS];
        dot_w_tokens((const char *)w + r * rb, type, x, (size_t)n_in, n_in, sums, nt);
        for (int t = 0; t < nt; t++) out[t * n_out + r] = sums[t] + (b ? b[r] : 0.0f);
    }
}

// Whether float rows ask for their bytes ahead (prefetch_ahead). A float row costs the core
// little beside its reading, so the hardware's prefetcher alone keeps up where it can: on AMD's
// Zen 4 the prefetches cost 8-25 % of a float32 token at both levels, where the Emerald
// Rapids Xeon gained 15-30 % from them (docs/KERNELS.md). The block types' rows, busier per
// byte, keep them everywhere.
static inline int prefetch_float_rows(void) {
#if defined(__x86_64__) || defined(__i386__)
    return !__builtin_cpu_is("amd");
#else
    return 0;
#endif
}

// out[r] = row r of the matrix · x (+ b[r]) for r in [lo, hi); inlined with type a constant
// (always_inline), so that each type's rows run their own dot_w loop.
__attribute__((always_inline)) static inline void dot_rows(float *out, const void *w, int type, const float *b,
                                                           const float *x, int n_in, size_t lo, size_t hi) {
    size_t rb = row_bytes(type, (size_t)n_in);
    int ahead = prefetch_float_rows();
    for (size_t r = lo; r < hi; r++) {
        if (ahead) prefetch_ahead((const char *)w + r * rb, rb);
        out[r] = dot_w((const char *)w + r * rb, type, x, n_in) + (b ? b[r] : 0.0f);
    }
}

#if defined(__AVX512F__)
// x [n] as bf16_dot wants it, into xp [n]: each whole 32 values' even ones, then their odd ones.
static inline void pair_order(float *restrict xp, const float *restrict x, int n) {
    for (int i = 0; i + 32 <= n; i += 32)
        for (int k = 0; k < 16; k++) xp[i + k] = x[i + 2 * k], xp[i + 16 + k] = x[i + 2 * k + 1];
}

// dot_w of a bfloat16 row, bit for bit, in fewer instructions per byte: one 64-byte load holds
// 32 weights, two to a 32-bit lane, the even one made a float32 by a shift and the odd one by
// a mask; x comes from xp (pair_order). Each lane sums the same products in the same order as
// one of dot_w's, and permuting the two accumulators gives back dot_w's lanes.
static inline float bf16_dot(const uint16_t *restrict w, const float *restrict x, const float *restrict xp, int n) {
    const __m512i odd = _mm512_set1_epi32((int)0xffff0000);
    __m512 even_acc = _mm512_setzero_ps(), odd_acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i v = _mm512_loadu_si512(w + i);
        even_acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_loadu_ps(xp + i), even_acc);
        odd_acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, odd)), _mm512_loadu_ps(xp + i + 16), odd_acc);
    }
    // dot_w's lane j sums weights j and j + 16 of every 32: here lanes j / 2 and 8 + j / 2 of
    // even_acc (j even) or odd_acc (j odd)
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512 lanes = _mm512_add_ps(_mm512_permutex2var_ps(even_acc, first, odd_acc),
                                 _mm512_permutex2var_ps(even_acc, second, odd_acc));
    return dot_tail(w, WEIGHTS_BF16, x, i, n, _mm512_reduce_add_ps(lanes));
}
#endif

// Rows [lo, hi) of a bfloat16 matrix times x (+ b) into out; xp: n_in floats of scratch.
static inline void bf16_rows(float *out, const uint16_t *w, const float *b, const float *x, float *xp, int n_in,
                             size_t lo, size_t hi) {
#if defined(__AVX512F__)
    pair_order(xp, x, n_in);
    for (size_t r = lo; r < hi; r++) out[r] = bf16_dot(w + r * n_in, x, xp, n_in) + (b ? b[r] : 0.0f);
#else
    dot_rows(out, w, WEIGHTS_BF16, b, x, n_in, lo, hi);
#endif
}

// A row of a Q8_0 matrix times x: each group's products summed, then scaled. The int8
// weights become floats in registers, so a step reads a quarter of float32's bytes, and x
// stays float32, so the product is the dequantised weights' to float rounding (integer
// multiply-adds were tried and dropped: docs/KERNELS.md).
static inline float dot_q8(const int8_t *restrict q, const float *restrict scale, const float *restrict x, int n,
                           int gs) {
    float s = 0.0f;
    int g = 0;
#if defined(__AVX512F__)
    if (gs % 16 == 0) {
        __m512 acc = _mm512_setzero_ps();
        for (; g < n; g += gs) {
            __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
            int i = g;
            // This loop converts more than it loads and keeps fewer reads in flight than the
            // float one, so it asks for the weights 2 KiB ahead (docs/KERNELS.md).
            _mm_prefetch((const char *)(q + g + 2048), _MM_HINT_T0);
            for (; i + 32 <= g + gs; i += 32) {
                p0 = _mm512_fmadd_ps(int8x16_to_float(q + i), _mm512_loadu_ps(x + i), p0);
                p1 = _mm512_fmadd_ps(int8x16_to_float(q + i + 16), _mm512_loadu_ps(x + i + 16), p1);
            }
            if (i < g + gs) p0 = _mm512_fmadd_ps(int8x16_to_float(q + i), _mm512_loadu_ps(x + i), p0);
            acc = _mm512_fmadd_ps(_mm512_add_ps(p0, p1), _mm512_set1_ps(scale[g / gs]), acc);
        }
        s = _mm512_reduce_add_ps(acc);
    }
#elif defined(__AVX2__) && defined(__FMA__)
    if (gs % 8 == 0) {
        __m256 acc = _mm256_setzero_ps();
        for (; g < n; g += gs) {
            __m256 p = _mm256_setzero_ps();
            for (int i = g; i < g + gs; i += 8)
                p = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)))),
                                    _mm256_loadu_ps(x + i), p);
            acc = _mm256_fmadd_ps(p, _mm256_set1_ps(scale[g / gs]), acc);
        }
        s = hsum8(acc);
    }
#endif
    for (; g < n; g += gs) { // other group sizes, and the portable build
        float p = 0.0f;
        for (int i = g; i < g + gs; i++) p += (float)q[i] * x[i];
        s += p * scale[g / gs];
    }
    return s;
}

// wbuf's size: a panel (PANEL_ROWS × PANEL_K floats) fits; without AVX-512 it is the chunk of
// a matrix not in float32 that a prompt's product widens at once for sgemm, at most
// QCHUNK_FLOATS (or one row) per thread, few enough to stay in cache, enough rows for sgemm to
// run at speed.
#define QCHUNK_FLOATS ((size_t)1 << 18)
static inline size_t qchunk_floats(int n_in) { return (size_t)n_in > QCHUNK_FLOATS ? (size_t)n_in : QCHUNK_FLOATS; }

// One linear layer's product, out[T, n_out] = x[T, n_in] · w[n_out, n_in]ᵀ (+ b).
// A sub-layer's output projection also adds out into residual (laid out as out), each thread
// on its own features, so that no meeting of the threads comes between; it adds after the
// whole product, as the reference rounds x + (W·in + b), not as sgemm's beta = 1 would.
// A matrix not in float32 (qw.type, w NULL) meets many rows a panel at a time, widened or
// dequantised into wbuf (without AVX-512, a chunk at a time for sgemm); a bfloat16 one meets
// one row with x reordered there.
typedef struct {
    float *out;     // (T, n_out)
    const float *w; // (n_out, n_in), or NULL for a matrix not in float32
    const float *b; // (n_out) or NULL
    int n_out;
    float *residual; // (T, n_out) or NULL
    QMat qw;
    float *wbuf;    // (qchunk_floats(n_in)) for a matrix not in float32
    uint8_t *xq;    // (T + 2, quantized_row_bytes(n_in)) x quantised, for a matrix in a block type
    int same_input; // x and the weights' type are this thread's previous product's: xq is ready
} Linear;

#if defined(__AVX512F__)
// ----------------------------------------------------------------------------
// Many rows of x times a matrix not in float32, without sgemm. Widening a chunk into float32
// and handing it to sgemm costs sgemm's own packing of that chunk and of all of x again, each
// chunk; here the widening is the packing. PANEL_ROWS weights' rows are widened and laid out
// by input (panel[k][r]), PANEL_K inputs at a time (256 KiB, so a panel stays in L2), and a
// tile of up to TILE_T tokens × PANEL_ROWS outputs sums in 16 registers, the weights two
// vectors a step and each token's x[t][k] broadcast (docs/KERNELS.md has the measurements).
// Every output is summed as a float32 loop over the inputs in order would with fmaf, then
// the bias added: a panel's partial sums go to out and come back for the next PANEL_K.
#define PANEL_ROWS 32
#define PANEL_K 2048
#define TILE_T 8
_Static_assert(PANEL_K <= QCHUNK_FLOATS / PANEL_ROWS, "a panel fits wbuf");

// Weights [k, k + 16) of row r as float32, the values dequantize_rows gives (Q8_0: a group
// size that is a multiple of 16, so that the 16 share one scale).
static inline __m512 weights16(const QMat *m, int n_in, size_t r, int k) {
    if (m->type != WEIGHTS_Q8_0) return widen16(m->half + r * n_in, k, m->type);
    return _mm512_mul_ps(int8x16_to_float(m->q + r * n_in + k), _mm512_set1_ps(m->s[r * (n_in / m->gs) + k / m->gs]));
}

static inline float weight1(const QMat *m, int n_in, size_t r, int k) {
    if (m->type != WEIGHTS_Q8_0) return widen1(m->half + r * n_in, k, m->type);
    return (float)m->q[r * n_in + k] * m->s[r * (n_in / m->gs) + k / m->gs];
}

// v[i] lane j <- v[j] lane i: three rounds of shuffles, pairs of lanes, then of 4 and 8.
static inline void transpose16(__m512 v[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2)
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]), t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44), v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44), v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88), t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88), v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        v[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        v[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

// panel [kn, PANEL_ROWS] <- rows [r0, r0 + rows) of m, inputs [k0, k0 + kn), widened; the
// rows past the matrix's are zeros. 16 rows × 16 inputs at a time, transposed in registers.
static inline void pack_panel(float *restrict panel, const QMat *m, int n_in, size_t r0, int rows, int k0, int kn) {
    int k = 0;
    if (m->type != WEIGHTS_Q8_0 || m->gs % 16 == 0)
        for (; k + 16 <= kn; k += 16)
            for (int half = 0; half < PANEL_ROWS; half += 16) {
                __m512 v[16];
                for (int i = 0; i < 16; i++)
                    v[i] = half + i < rows ? weights16(m, n_in, r0 + half + i, k0 + k) : _mm512_setzero_ps();
                transpose16(v);
                for (int i = 0; i < 16; i++) _mm512_storeu_ps(panel + (size_t)(k + i) * PANEL_ROWS + half, v[i]);
            }
    for (; k < kn; k++)
        for (int r = 0; r < PANEL_ROWS; r++)
            panel[(size_t)k * PANEL_ROWS + r] = r < rows ? weight1(m, n_in, r0 + r, k0 + k) : 0.0f;
}

// out[t, r] for tokens [0, nt) and the panel's rows (mask0, mask1: the two vectors' valid
// lanes): the panel's kn inputs summed onto 0 (first) or onto out's partial sums, then the
// bias added (last; b NULL for none). Inlined with nt a constant, so that the accumulators
// stay in registers.
__attribute__((always_inline)) static inline void panel_tile(float *out, size_t ld_out, const float *x, size_t ld_x,
                                                             const float *panel, int kn, const float *b,
                                                             __mmask16 mask0, __mmask16 mask1, int first, int last,
                                                             const int nt) {
    __m512 acc0[TILE_T], acc1[TILE_T];
    for (int t = 0; t < nt; t++) {
        acc0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask0, out + t * ld_out);
        acc1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask1, out + t * ld_out + 16);
    }
    for (int k = 0; k < kn; k++) {
        __m512 w0 = _mm512_loadu_ps(panel + (size_t)k * PANEL_ROWS),
               w1 = _mm512_loadu_ps(panel + (size_t)k * PANEL_ROWS + 16);
        for (int t = 0; t < nt; t++) {
            __m512 xt = _mm512_set1_ps(x[t * ld_x + k]);
            acc0[t] = _mm512_fmadd_ps(w0, xt, acc0[t]);
            acc1[t] = _mm512_fmadd_ps(w1, xt, acc1[t]);
        }
    }
    if (last && b) {
        __m512 b0 = _mm512_maskz_loadu_ps(mask0, b), b1 = _mm512_maskz_loadu_ps(mask1, b + 16);
        for (int t = 0; t < nt; t++) acc0[t] = _mm512_add_ps(acc0[t], b0), acc1[t] = _mm512_add_ps(acc1[t], b1);
    }
    for (int t = 0; t < nt; t++) {
        _mm512_mask_storeu_ps(out + t * ld_out, mask0, acc0[t]);
        _mm512_mask_storeu_ps(out + t * ld_out + 16, mask1, acc1[t]);
    }
}

// Output features [lo, hi) of out[T, n_out] = x[T, n_in] · Wᵀ (+ b), W = l->qw, the panel in
// l->wbuf.
static inline void matmul_panels(const Linear *l, const float *x, int T, int n_in, size_t lo, size_t hi) {
    for (size_t r0 = lo; r0 < hi; r0 += PANEL_ROWS) {
        int rows = hi - r0 < PANEL_ROWS ? (int)(hi - r0) : PANEL_ROWS;
        __mmask16 mask0 = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
        __mmask16 mask1 = rows >= 32 ? 0xffff : rows > 16 ? (__mmask16)((1u << (rows - 16)) - 1) : 0;
        const float *b = l->b ? l->b + r0 : NULL;
        for (int k0 = 0; k0 < n_in; k0 += PANEL_K) {
            int kn = n_in - k0 < PANEL_K ? n_in - k0 : PANEL_K, first = k0 == 0, last = k0 + kn == n_in;
            pack_panel(l->wbuf, &l->qw, n_in, r0, rows, k0, kn);
            for (int t = 0; t < T; t += TILE_T) {
                float *o = l->out + (size_t)t * l->n_out + r0;
                const float *xt = x + (size_t)t * n_in + k0;
                switch (T - t < TILE_T ? T - t : TILE_T) { // one copy of the loop per count of tokens
#define PANEL_TILE(nt)                                                                                                 \
    case nt: panel_tile(o, l->n_out, xt, n_in, l->wbuf, kn, b, mask0, mask1, first, last, nt); break
                    PANEL_TILE(1);
                    PANEL_TILE(2);
                    PANEL_TILE(3);
                    PANEL_TILE(4);
                    PANEL_TILE(5);
                    PANEL_TILE(6);
                    PANEL_TILE(7);
                    PANEL_TILE(8);
#undef PANEL_TILE
                }
            }
        }
    }
}
#endif

// x [T, n_in] into l->xq as the product with a matrix in a block type takes it: rounded to 16
// bits for each row (quantize_input), or for each row in the matrix's own order (order_input).
// Each thread has its own xq, and fills it itself (it normalised x itself); a product with the
// previous one's input and type (same_input) finds it filled.
static inline void block_input(const Linear *l, const float *x, int T, int n_in) {
    size_t ld = quantized_row_bytes(n_in);
    if (l->same_input) return;
#if defined(QUANT_ORDERED)
    if (ordered_product(l->qw.type, T, n_in)) { // 16-bit scratch in place 0 of xq, token t's order in t + 1
        for (int t = 0; t < T; t++)
            order_input(l->xq + (t + 1) * ld, x + (size_t)t * n_in, (int16_t *)l->xq, n_in, l->qw.type);
        return;
    }
#endif
    for (int t = 0; t < T; t++) quantize_input(l->xq + t * ld, x + (size_t)t * n_in, n_in);
}

// The tokens up to which a product with a block type not in its own order (ORDERED_TOKENS for
// those) is a one-token product for each token, not panels: a token's share of a panel's
// repacking costs more below, as measured (CPU time, Zen 4, a token's ns a weight: at
// x86-64-v3 panels 0.185 for 2 tokens, 0.056 for 8, 0.035 for 16, against 0.031-0.035 one
// token at a time; with VNNI 0.112, 0.050, 0.036 for 2, 5 and 8 against 0.046, 0.046, 0.045,
// its one-token rows not in their own order).
#if defined(QUANT_VNNI)
#define FEW_BLOCK_TOKENS 6
#else
#define FEW_BLOCK_TOKENS 12
#endif

// Output features [lo, hi) of the product with a matrix of a block type, from x in l->xq:
// panels for many tokens where the machine has vector integer products, else a dot product
// per row and token (with VNNI, 16 rows' lanes summed at once). Inlined with type a constant.
__attribute__((always_inline)) static inline void block_product(int type, const Linear *l, int T, int n_in, size_t lo,
                                                                size_t hi) {
    size_t rb = row_bytes(type, n_in);
#if defined(QUANT_ORDERED)
    if (ordered_product(type, T, n_in)) { // token t's x is in place t + 1 of l->xq, in the type's order
        // for several tokens, rows of about 256 KiB at a time (in L2) for each token in turn
        size_t ld = quantized_row_bytes(n_in), part = 16 * ORDERED_ROWS_MOST;
        size_t step = T == 1 ? hi - lo : ((256 << 10) / rb / part + 1) * part;
        for (size_t r0 = lo; r0 < hi; r0 += step)
            for (int t = 0; t < T; t++)
                ordered_rows(type, l->out + (size_t)t * l->n_out, l->b, l->qw.blocks, rb, l->xq + (t + 1) * ld, n_in,
                             r0, hi - r0 < step ? hi : r0 + step);
        return;
    }
#endif
#if defined(QUANT_VNNI) || defined(QUANT_AVX2)
    // Panels repack their rows for every call, which only many tokens repay: up to
    // FEW_BLOCK_TOKENS (a short chat turn, speculative decoding's verification) the one-token
    // products run for each token instead (docs/KERNELS.md).
    if (T > FEW_BLOCK_TOKENS) {
        matmul_quantized_panels_of(type, l->out, l->n_out, l->b, l->xq, T, n_in, l->qw.blocks, (uint8_t *)l->wbuf, lo,
                                   hi);
        return;
    }
#endif
    // a token's products a row (16 rows with VNNI) at a time, the rows read from memory once
    // for all the tokens
    size_t ld = quantized_row_bytes(n_in);
#if defined(QUANT_VNNI)
    for (size_t r0 = lo; r0 < hi; r0 += 16)
        for (int t = 0; t < T; t++) {
            __m512 acc[16];
            int rows = hi - r0 < 16 ? (int)(hi - r0) : 16;
            for (int j = 0; j < 16; j++)
                acc[j] = j < rows ? dot_quantized(type, l->qw.blocks + (r0 + j) * rb,
                                                  quantized_row(l->xq + t * ld, n_in), n_in)
                                  : _mm512_setzero_ps();
            store_rows16(l->out + (size_t)t * l->n_out, l->b, r0, rows, acc);
        }
#else
    for (size_t r = lo; r < hi; r++)
        for (int t = 0; t < T; t++)
            l->out[(size_t)t * l->n_out + r] =
                dot_quantized(type, l->qw.blocks + r * rb, quantized_row(l->xq + t * ld, n_in), n_in) +
                (l->b ? l->b[r] : 0.0f);
#endif
}

// block_product for each type, its row's functions inlined with the type a constant: a function
// of its own, not inlined into matmul_blocks, where all of them made one function that took clang
// 244 s of fuzz_model's 312 s to compile (and gcc most of run.c's 47 s).
#define BLOCK_PRODUCT(name, ggml_id, block, bytes)                                                                     \
    __attribute__((noinline)) static void block_product_##name(const Linear *l, int T, int n_in, size_t lo,            \
                                                               size_t hi) {                                            \
        block_product(BLOCK_##name, l, T, n_in, lo, hi);                                                               \
    }
BLOCK_TYPE_ROWS(BLOCK_PRODUCT)
#undef BLOCK_PRODUCT

// Output features [lo, hi) of out[T, n_out] = x · Wᵀ (+ b), W in a block type, from x in
// l->xq (block_input): a dot product per row and token, or panels for many tokens where the
// machine has VNNI.
static inline void matmul_blocks(const Linear *l, int T, int n_in, size_t lo, size_t hi) {
    switch (l->qw.type) {
#define BLOCK_PRODUCT(name, ggml_id, block, bytes)                                                                     \
    case BLOCK_##name: block_product_##name(l, T, n_in, lo, hi); break;
        BLOCK_TYPE_ROWS(BLOCK_PRODUCT)
#undef BLOCK_PRODUCT
    }
}

// Output features [lo, hi) of the product: one thread's share when the caller splits the
// features across threads, each thread streaming its own rows of the weights.
static inline void matmul_part(const Linear *l, const float *x, int T, int n_in, size_t lo, size_t hi) {
    size_t n_out = l->n_out;
    float *out = l->out;
    const float *w = l->w, *b = l->b;
    const QMat *qw = &l->qw;
    if (is_block_type(qw->type)) block_input(l, x, T, n_in); // even for no rows: the next product may reuse it
    if (lo >= hi) return;
    if (is_block_type(qw->type)) {
        matmul_blocks(l, T, n_in, lo, hi);
    } else if (T > 1 && T <= FEW_TOKENS && (w || qw->type == WEIGHTS_F16)) {
        switch (T) { // each count of tokens its own loop, its accumulators in registers
#define FEW(nt)                                                                                                        \
    case nt:                                                                                                           \
        if (w) dot_rows_tokens(out, n_out, w, WEIGHTS_F32, b, x, n_in, lo, hi, nt);                                    \
        else dot_rows_tokens(out, n_out, qw->half, WEIGHTS_F16, b, x, n_in, lo, hi, nt);                               \
        break
            FEW(2);
            FEW(3);
            FEW(4);
            FEW(5);
            FEW(6);
            FEW(7);
            FEW(8);
#undef FEW
        }
    } else if (T == 1) {
        if (w) dot_rows(out, w, WEIGHTS_F32, b, x, n_in, lo, hi);
        else if (qw->type == WEIGHTS_BF16) bf16_rows(out, qw->half, b, x, l->wbuf, n_in, lo, hi);
        else if (qw->type == WEIGHTS_F16) dot_rows(out, qw->half, WEIGHTS_F16, b, x, n_in, lo, hi);
        else
            for (size_t r = lo; r < hi; r++)
                out[r] = dot_q8(qw->q + r * n_in, qw->s + r * (n_in / qw->gs), x, n_in, qw->gs) + (b ? b[r] : 0.0f);
#if defined(__AVX512F__)
    } else if (!w) {
        matmul_panels(l, x, T, n_in, lo, hi);
#endif
    } else {
        // a matrix not in float32 (without AVX-512) in the fewest chunks that fit wbuf, of
        // equal size, as each sgemm call packs all of x again and a short last chunk would
        // run slowly
        size_t chunk = hi - lo;
        if (!w) {
            size_t most = qchunk_floats(n_in) / n_in, chunks = (hi - lo + most - 1) / most;
            chunk = (hi - lo + chunks - 1) / chunks;
        }
        for (size_t r0 = lo; r0 < hi; r0 += chunk) {
            size_t r1 = hi - r0 < chunk ? hi : r0 + chunk;
            const float *wr = w ? w + r0 * n_in : l->wbuf;
            if (!w) dequantize_rows(l->wbuf, qw, n_in, r0, r1);
            // The bias goes in first, as beta = 1's addend: that replaces the zeroing sgemm
            // does for beta = 0, and saves a pass over the output.
            if (b)
                for (int t = 0; t < T; t++) memcpy(out + (size_t)t * n_out + r0, b + r0, (r1 - r0) * sizeof(float));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, (int)(r1 - r0), n_in, 1.0f, x, n_in, wr, n_in,
                        b ? 1.0f : 0.0f, out + r0, (int)n_out);
        }
    }
    if (l->residual)
        for (int t = 0; t < T; t++)
            for (size_t i = lo; i < hi; i++) l->residual[(size_t)t * n_out + i] += out[(size_t)t * n_out + i];
}

// The whole float32 product, split across threads when it pays (called outside a parallel
// region; inside one, as in ./train, the calling thread does it all).
static inline void matmul_forward(float *out, const float *x, const float *w, const float *b, int T, int n_in,
                                  int n_out) {
    Linear l = {.out = out, .w = w, .b = b, .n_out = n_out};
#pragma omp parallel if ((size_t)T * n_out * n_in >= PARALLEL_MIN_WORK)
    {
        size_t lo, hi;
        share((size_t)n_out, thread_num(), team_size(), &lo, &hi);
        matmul_part(&l, x, T, n_in, lo, hi);
    }
}

// C = alpha op(A) op(B) + beta C, row-major: cblas_sgemm's arguments without the order, the
// shape of a GEMM that may round its operands (./train --precision bf16's).
typedef void (*GemmFn)(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);

// The float32 GemmFn: cblas_sgemm as it is.
static inline void sgemm_f32(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                             int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// din (=, or += with acc) dout · W; dW += doutᵀ · in; db += Σ rows of dout; the two products
// by gemm (sgemm_f32, or a bfloat16 one).
static inline void matmul_backward(float *din, int acc, float *dw, float *db, const float *dout, const float *in,
                                   const float *w, int T, int n_in, int n_out, GemmFn gemm) {
    if (din) gemm(CblasNoTrans, CblasNoTrans, T, n_in, n_out, 1.0f, dout, n_out, w, n_in, acc ? 1.0f : 0.0f, din, n_in);
    gemm(CblasTrans, CblasNoTrans, n_out, n_in, T, 1.0f, dout, n_out, in, n_in, 1.0f, dw, n_in);
    if (db)
        for (int t = 0; t < T; t++) {
            const float *g = dout + (size_t)t * n_out;
#pragma omp simd
            for (int o = 0; o < n_out; o++) db[o] += g[o];
        }
}

#endif
