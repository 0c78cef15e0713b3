// model/bf16_gemm.h: a matrix product with bfloat16 inputs and float32 sums, C = alpha ·
// round(op(A)) · round(op(B)) + beta · C, for training's products (sgemm_bf16, shaped as
// cblas_sgemm) and ./run's prompts in --compute bf16 (bf16_pack of the input, then
// bf16_weights_product with float32 or stored bfloat16 weights).
// It knows matrices only, never layers or a file.
//
// The arithmetic is exactly that of VDPBF16PS (AVX512_BF16), which the AVX2 and portable
// paths reproduce bit for bit:
//  - a float32 input becomes bfloat16 by rounding to nearest even; a NaN stays a NaN, and a
//    float32 denormal becomes a zero of its sign, as does a stored bfloat16 denormal (the
//    instruction treats denormal inputs as zero);
//  - inputs go in pairs (k = 2p, 2p + 1; an odd K gets a zero) and each output's sum starts
//    at 0 and takes, pair after pair, the product of element 2p + 1 and then that of element
//    2p, each added as one fused multiply-add rounded to nearest even (a bfloat16 product is
//    exact in float32, so only the additions round);
//  - a sum that is tiny (below 2^-126 after rounding to 24 bits with an unbounded exponent)
//    becomes a zero of its sign (the instruction flushes denormal outputs; this machine's Zen 4
//    was checked to detect tininess after rounding, as MXCSR.FTZ does for vfmadd).
// Then C = alpha · sum (+ beta · C, as fmaf(alpha, sum, beta · C)), in float32.
#ifndef ATTN_MODEL_BF16_GEMM_H
#define ATTN_MODEL_BF16_GEMM_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "threads.h"

// A register tile: BF16_TILE_ROWS rows of op(A) (tokens) × BF16_TILE_COLS columns of op(B)
// (outputs). Both matrices are packed into strips of that many rows or columns, of 32-bit
// words that each hold one row's elements 2p (low half) and 2p + 1 (high half), as VDPBF16PS
// takes them. B's strips lie by pair (the strip's words of pair p together, one vector load);
// A's by row when its rows are contiguous (packing is then only a conversion), else by pair.
#define BF16_TILE_ROWS 8
#define BF16_TILE_COLS 32

// Whether bfloat16 products are faster than float32's in this build: only with VDPBF16PS.
// Without it the exact emulation below ran at 0.8-1.0x OpenBLAS's float32 sgemm at x86-64-v3
// (docs/KERNELS.md), so ./train --precision bf16 and ./run --compute bf16 compute in float32
// instead, and say so once (BF16_NO_SPEED), decided when the program is built as every
// kernel's path is.
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#define BF16_FAST 1
#else
#define BF16_FAST 0
#endif
#define BF16_NO_SPEED                                                                                                  \
    "brings no speed here: this build has no AVX512_BF16 (VDPBF16PS), and its exact emulation is slower than "         \
    "float32, so the products run in float32: the numbers are float32's, not VDPBF16PS's"

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#define BF16_PATH "avx512bf16"
#elif defined(__AVX2__) && defined(__FMA__)
#define BF16_PATH "avx2"
#else
#define BF16_PATH "portable"
#endif

// float32's bits to bfloat16's, rounded to nearest even; NaN stays NaN (made quiet), a
// denormal becomes a zero of its sign. Without branches, so that packing loops vectorise.
static inline uint32_t bf16_round_bits(uint32_t u) {
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u, tiny = !(u & 0x7f800000u);
    return nan ? (u >> 16) | 0x40 : tiny ? (u >> 16) & 0x8000 : rounded;
}

static inline uint16_t bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)bf16_round_bits(u);
}

// A stored bfloat16 as the product takes it: a denormal becomes a zero of its sign.
static inline uint32_t bf16_flush(uint32_t h) { return (h & 0x7f80) ? h : h & 0x8000; }

// n values from row (float32, or bfloat16 as stored) as n / 2 rounded up pair words into w;
// an odd n's last word has a zero high half.
__attribute__((always_inline)) static inline void bf16_row_words(uint32_t *restrict w, const void *restrict row,
                                                                 int stored, int n) {
    const uint32_t *f = row;
    const uint16_t *h = row;
    int p = 0;
#if defined(__AVX512F__) && defined(__AVX512BF16__)
    // VCVTNE2PS2BF16 rounds as bf16_round_bits does (checked on this machine's Zen 4 for
    // NaNs, denormals, infinities and 10^8 random values)
    if (!stored)
        for (; p + 16 <= n / 2; p += 16) {
            const float *x = (const float *)row + 2 * p;
            _mm512_storeu_si512(w + p, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
        }
#endif
    for (; p < n / 2; p++)
        w[p] = stored ? bf16_flush(h[2 * p]) | bf16_flush(h[2 * p + 1]) << 16
                      : bf16_round_bits(f[2 * p]) | bf16_round_bits(f[2 * p + 1]) << 16;
    if (n % 2) w[p] = stored ? bf16_flush(h[n - 1]) : bf16_round_bits(f[n - 1]);
}

// w[i] = lo[i] and hi[i] (zero when hi is NULL) rounded, as the low and high halves of a word.
static inline void bf16_pair_words(uint32_t *restrict w, const float *restrict lo, const float *restrict hi, int n) {
    int i = 0;
#if defined(__AVX512F__) && defined(__AVX512BF16__)
    for (; i + 16 <= n; i += 16) {
        __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(lo + i)));
        __m512i h =
            hi ? _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(hi + i))) : _mm512_setzero_si512();
        _mm512_storeu_si512(w + i, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
    }
#endif
    const uint32_t *l = (const uint32_t *)lo, *h = (const uint32_t *)hi;
    for (; i < n; i++) w[i] = bf16_round_bits(l[i]) | (h ? bf16_round_bits(h[i]) << 16 : 0);
}

// Strips of width rows (BF16_TILE_ROWS or _COLS) from rows [r0, r1) of a matrix whose row r
// is src + r * ld (elem bytes a value: float32, or bfloat16 used as stored), into dst
// [strips][kp][width]; rows past r1 are zeros. A strip's rows go into words 64 pairs at a
// time in a buffer that stays in L1, then are laid out by pair, 8 words at a time.
#define BF16_CHUNK 64
#define BF16_LINE 256
__attribute__((always_inline)) static inline void bf16_pack_rows_of(uint32_t *restrict dst, int width, const void *src,
                                                                    size_t ld, int stored, size_t r0, size_t r1,
                                                                    int K) {
    uint32_t buf[BF16_TILE_COLS * BF16_CHUNK] __attribute__((aligned(64)));
    size_t elem = stored ? sizeof(uint16_t) : sizeof(float);
    int kp = (K + 1) / 2;
    for (size_t s0 = r0; s0 < r1; s0 += width) {
        uint32_t *d = dst + (s0 - r0) / width * (size_t)kp * width;
        int rows = r1 - s0 < (size_t)width ? (int)(r1 - s0) : width;
        for (int c0 = 0; c0 < kp; c0 += BF16_CHUNK) {
            int cn = kp - c0 < BF16_CHUNK ? kp - c0 : BF16_CHUNK, k0 = 2 * c0;
            int kn = K - k0 < 2 * BF16_CHUNK ? K - k0 : 2 * BF16_CHUNK;
            for (int i = 0; i < width; i++) {
                if (i < rows)
                    bf16_row_words(buf + i * BF16_CHUNK, (const char *)src + ((s0 + i) * ld + k0) * elem, stored, kn);
                else memset(buf + i * BF16_CHUNK, 0, sizeof(uint32_t) * cn);
            }
            int q = 0;
#if defined(__AVX2__)
            // pair q's words of 8 rows at a time, gathered down buf's column
            const __m256i down = _mm256_setr_epi32(0, BF16_CHUNK, 2 * BF16_CHUNK, 3 * BF16_CHUNK, 4 * BF16_CHUNK,
                                                   5 * BF16_CHUNK, 6 * BF16_CHUNK, 7 * BF16_CHUNK);
            for (; q < cn; q++)
                for (int i = 0; i < width; i += 8)
                    _mm256_storeu_si256((__m256i *)(d + (size_t)(c0 + q) * width + i),
                                        _mm256_i32gather_epi32((const int *)(buf + i * BF16_CHUNK + q), down, 4));
#endif
            for (; q < cn; q++)
                for (int i = 0; i < width; i++) d[(size_t)(c0 + q) * width + i] = buf[i * BF16_CHUNK + q];
        }
    }
}

// The same from a float32 matrix whose element (r, k) is src[r * ld + k] (k_contiguous) or
// src[k * ld + r]; the latter pairs two of its rows a word at a time.
static inline void bf16_pack(uint32_t *restrict dst, int width, const float *restrict src, size_t ld, int k_contiguous,
                             size_t r0, size_t r1, int K) {
    if (k_contiguous) {
        bf16_pack_rows_of(dst, width, src, ld, 0, r0, r1, K);
        return;
    }
    // a pair of src's rows becomes words over BF16_LINE rows of op(src) at a time, then
    // goes to their strips
    uint32_t line[BF16_LINE];
    int kp = (K + 1) / 2;
    for (size_t l0 = r0; l0 < r1; l0 += BF16_LINE) {
        size_t l1 = r1 - l0 < BF16_LINE ? r1 : l0 + BF16_LINE;
        for (int p = 0; p < kp; p++) {
            const float *lo = src + (size_t)2 * p * ld + l0;
            bf16_pair_words(line, lo, 2 * p + 1 < K ? lo + ld : NULL, (int)(l1 - l0));
            for (size_t s0 = l0; s0 < l1; s0 += width) {
                uint32_t *d = dst + ((s0 - r0) / width * (size_t)kp + p) * width;
                int rows = l1 - s0 < (size_t)width ? (int)(l1 - s0) : width;
                memcpy(d, line + (s0 - l0), sizeof(uint32_t) * rows);
                memset(d + rows, 0, sizeof(uint32_t) * (width - rows));
            }
        }
    }
}

// The same from a matrix stored in bfloat16, rows of K values, used as stored.
static inline void bf16_pack_stored(uint32_t *restrict dst, int width, const uint16_t *restrict src, size_t r0,
                                    size_t r1, int K) {
    bf16_pack_rows_of(dst, width, src, (size_t)K, 1, r0, r1, K);
}

// Rows [r0, r1) of a float32 matrix (row r at src + r * ld) as A's strips by row: each of a
// strip's BF16_TILE_ROWS rows its kp words in a run (rows past r1 zeros), which the tile reads
// as 8 streams of broadcasts; only a conversion, no transposition.
static inline void bf16_pack_rows(uint32_t *restrict dst, const float *restrict src, size_t ld, size_t r0, size_t r1,
                                  int K) {
    size_t kp = (size_t)(K + 1) / 2, strips = (r1 - r0 + BF16_TILE_ROWS - 1) / BF16_TILE_ROWS;
    for (size_t i = 0; i < strips * BF16_TILE_ROWS; i++) {
        if (r0 + i < r1) bf16_row_words(dst + i * kp, src + (r0 + i) * ld, 0, K);
        else memset(dst + i * kp, 0, kp * sizeof(uint32_t));
    }
}

// ----------------------------------------------------------------------------
// One tile's sums, sums[BF16_TILE_ROWS][BF16_TILE_COLS], from a strip of A and one of B, kp
// pairs each.

#if defined(__AVX512F__) && defined(__AVX512BF16__)
static inline void bf16_tile(float *restrict sums, const uint32_t *restrict a, size_t a_row, size_t a_pair,
                             const uint32_t *restrict b, int kp) {
    __m512 acc[BF16_TILE_ROWS][2];
    for (int i = 0; i < BF16_TILE_ROWS; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * BF16_TILE_COLS),
                 b1 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * BF16_TILE_COLS + 16);
        for (int i = 0; i < BF16_TILE_ROWS; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i * a_row + p * a_pair]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
    }
    for (int i = 0; i < BF16_TILE_ROWS; i++) {
        _mm512_storeu_ps(sums + i * BF16_TILE_COLS, acc[i][0]);
        _mm512_storeu_ps(sums + i * BF16_TILE_COLS + 16, acc[i][1]);
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
// Two fused multiply-adds per pair, the high halves first, with MXCSR's flush-to-zero on for
// the duration: vfmadd then flushes tiny sums as VDPBF16PS does. 4 rows × 16 columns at a
// time, 8 sums in flight as two FMA pipes of latency 4 need; each word of A broadcast once a
// pair and split into its halves in registers.
static inline void bf16_tile(float *restrict sums, const uint32_t *restrict a, size_t a_row, size_t a_pair,
                             const uint32_t *restrict b, int kp) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8000);
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    for (int i = 0; i < BF16_TILE_ROWS; i += 4)
        for (int c = 0; c < BF16_TILE_COLS; c += 16) {
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int p = 0; p < kp; p++) {
                const uint32_t *bp = b + (size_t)p * BF16_TILE_COLS + c;
                __m256i w0 = _mm256_loadu_si256((const __m256i *)bp),
                        w1 = _mm256_loadu_si256((const __m256i *)(bp + 8));
                __m256 bh0 = _mm256_castsi256_ps(_mm256_and_si256(w0, high)),
                       bh1 = _mm256_castsi256_ps(_mm256_and_si256(w1, high));
                __m256 bl0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)),
                       bl1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
                for (int r = 0; r < 4; r++) {
                    __m256i ar = _mm256_set1_epi32((int)a[(i + r) * a_row + p * a_pair]);
                    __m256 ah = _mm256_castsi256_ps(_mm256_and_si256(ar, high)),
                           al = _mm256_castsi256_ps(_mm256_slli_epi32(ar, 16));
                    acc[r][0] = _mm256_fmadd_ps(ah, bh0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(ah, bh1, acc[r][1]);
                    acc[r][0] = _mm256_fmadd_ps(al, bl0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(al, bl1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int h = 0; h < 2; h++) _mm256_storeu_ps(sums + (i + r) * BF16_TILE_COLS + c + 8 * h, acc[r][h]);
        }
    _mm_setcsr(csr);
}
#else
static inline float bf16_half(uint32_t word, int high) {
    uint32_t u = high ? word & 0xffff0000u : word << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// s + x · y as VDPBF16PS adds it: fused, then a tiny sum flushed. fmaf's result is rounded
// with denormals' fewer bits; it is FLT_MIN also for an exact sum a little below FLT_MIN that
// is tiny all the same (below FLT_MIN · (1 - 2^-25) it rounds to 24 bits under FLT_MIN), which
// the double sum decides (exact here unless the sum needs more than 53 bits).
static inline float bf16_fma(float x, float y, float s) {
    float r = fmaf(x, y, s);
    if (fabsf(r) < FLT_MIN || (fabsf(r) == FLT_MIN && fabs((double)x * y + s) < FLT_MIN * (1.0 - 0x1p-25)))
        return copysignf(0.0f, r);
    return r;
}

static inline void bf16_tile(float *restrict sums, const uint32_t *restrict a, size_t a_row, size_t a_pair,
                             const uint32_t *restrict b, int kp) {
    for (int i = 0; i < BF16_TILE_ROWS; i++)
        for (int j = 0; j < BF16_TILE_COLS; j++) {
            float s = 0.0f;
            for (int p = 0; p < kp; p++) {
                uint32_t x = a[i * a_row + p * a_pair], y = b[(size_t)p * BF16_TILE_COLS + j];
                s = bf16_fma(bf16_half(x, 1), bf16_half(y, 1), s);
                s = bf16_fma(bf16_half(x, 0), bf16_half(y, 0), s);
            }
            sums[i * BF16_TILE_COLS + j] = s;
        }
}
#endif

// C[M, cols] (ldc apart; cols ≤ BF16_TILE_COLS) = alpha · sums + beta · C (+ bias[j]), for
// every row of op(A) packed in ap (ceil(M / BF16_TILE_ROWS) strips, by row or by pair)
// against one strip of B: the strip stays in L1 or L2 while A's strips stream past it.
static inline void bf16_strip_product(float *C, size_t ldc, int M, int cols, const uint32_t *ap, int a_by_row,
                                      const uint32_t *bs, int kp, float alpha, float beta, const float *bias) {
    float sums[BF16_TILE_ROWS * BF16_TILE_COLS] __attribute__((aligned(64)));
    size_t a_row = a_by_row ? (size_t)kp : 1, a_pair = a_by_row ? 1 : BF16_TILE_ROWS;
    for (int m0 = 0; m0 < M; m0 += BF16_TILE_ROWS) {
        bf16_tile(sums, ap + (size_t)m0 * kp, a_row, a_pair, bs, kp);
        int rows = M - m0 < BF16_TILE_ROWS ? M - m0 : BF16_TILE_ROWS;
        for (int i = 0; i < rows; i++) {
            float *c = C + (size_t)(m0 + i) * ldc;
            const float *s = sums + i * BF16_TILE_COLS;
            if (beta == 0.0f)
                for (int j = 0; j < cols; j++) c[j] = alpha * s[j];
            else
                for (int j = 0; j < cols; j++) c[j] = fmaf(alpha, s[j], beta * c[j]);
            if (bias)
                for (int j = 0; j < cols; j++) c[j] += bias[j];
        }
    }
}

// C[M, r0 .. r1) (rows ldc apart; column r at C + r) = round(A) · W[r0 .. r1)ᵀ (+ bias[r]), the
// nn.Linear product of a prompt: A is M rows of input packed by bf16_pack_rows, W rows of K weights, float32 rounded (stored 0) or
// bfloat16 used as stored (stored 1), a strip of BF16_TILE_COLS rows at a time into
// strip (BF16_TILE_COLS · ceil(K / 2) words).
static inline void bf16_weights_product(float *C, size_t ldc, int M, const uint32_t *ap, const void *W, int stored,
                                        size_t r0, size_t r1, int K, const float *bias, uint32_t *strip) {
    for (size_t s0 = r0; s0 < r1; s0 += BF16_TILE_COLS) {
        size_t s1 = r1 - s0 < BF16_TILE_COLS ? r1 : s0 + BF16_TILE_COLS;
        if (stored) bf16_pack_stored(strip, BF16_TILE_COLS, W, s0, s1, K);
        else bf16_pack(strip, BF16_TILE_COLS, W, (size_t)K, 1, s0, s1, K);
        bf16_strip_product(C + s0, ldc, M, (int)(s1 - s0), ap, 1, strip, (K + 1) / 2, 1.0f, 0.0f,
                           bias ? bias + s0 : NULL);
    }
}

// Scratch that grows and is kept for the thread's next call (training calls the product
// thousands of times a second): slot 0 the packed A, slot 1 a strip of B per thread. NULL
// when out of memory.
static inline uint32_t *bf16_scratch(int slot, size_t words) {
    static _Thread_local uint32_t *buf[2];
    static _Thread_local size_t cap[2];
    if (words > cap[slot]) {
        free(buf[slot]);
        cap[slot] = 0;
        if (!(buf[slot] = aligned_alloc(64, (words * sizeof(uint32_t) + 63) / 64 * 64))) return NULL;
        cap[slot] = words;
    }
    return buf[slot];
}

// C = alpha · op(A) · op(B) + beta · C, row-major, as cblas_sgemm(CblasRowMajor, ...) with
// the inputs rounded to bfloat16 (above). Outside a parallel region the threads share it
// (A packed by all, then each takes its share of B's strips, or of A's when B has fewer
// strips than threads); inside one the calling thread does it all. Out of memory for the
// packing falls back to float32 sgemm.
static inline void sgemm_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                              int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    int kp = (K + 1) / 2, a_strips = (M + BF16_TILE_ROWS - 1) / BF16_TILE_ROWS;
    int b_strips = (N + BF16_TILE_COLS - 1) / BF16_TILE_COLS, threads = max_threads();
    size_t strip_words = (size_t)BF16_TILE_COLS * kp;
    uint32_t *bs_all = bf16_scratch(1, strip_words * threads);
    uint32_t *ap = bs_all ? bf16_scratch(0, (size_t)a_strips * BF16_TILE_ROWS * kp) : NULL;
    if (!ap) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(threads) if ((size_t)M * N * K >= PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t lo, hi, s_lo = 0, s_hi = b_strips, m_lo = 0, m_hi = a_strips;
        share((size_t)a_strips, id, nt, &lo, &hi);
        size_t r1 = hi * BF16_TILE_ROWS < (size_t)M ? hi * BF16_TILE_ROWS : (size_t)M;
        if (lo < hi && ta == CblasNoTrans)
            bf16_pack_rows(ap + lo * BF16_TILE_ROWS * kp, A, (size_t)lda, lo * BF16_TILE_ROWS, r1, K);
        else if (lo < hi)
            bf16_pack(ap + lo * BF16_TILE_ROWS * kp, BF16_TILE_ROWS, A, (size_t)lda, 0, lo * BF16_TILE_ROWS, r1, K);
#pragma omp barrier
        uint32_t *bs = bs_all + (size_t)id * strip_words;
        if (b_strips >= nt) share((size_t)b_strips, id, nt, &s_lo, &s_hi);
        else share((size_t)a_strips, id, nt, &m_lo, &m_hi);
        size_t m0 = m_lo * BF16_TILE_ROWS, m1 = m_hi * BF16_TILE_ROWS < (size_t)M ? m_hi * BF16_TILE_ROWS : (size_t)M;
        for (size_t s = s_lo; s < s_hi && m0 < m1; s++) {
            size_t n0 = s * BF16_TILE_COLS, n1 = n0 + BF16_TILE_COLS < (size_t)N ? n0 + BF16_TILE_COLS : (size_t)N;
            bf16_pack(bs, BF16_TILE_COLS, B, (size_t)ldb, tb == CblasTrans, n0, n1, K);
            bf16_strip_product(C + m0 * ldc + n0, (size_t)ldc, (int)(m1 - m0), (int)(n1 - n0), ap + m0 * kp,
                               ta == CblasNoTrans, bs, kp, alpha, beta, NULL);
        }
    }
}

#endif
