// model/quant_order.h: the one-token products of the 32-value block types (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, IQ4_NL), Q4_K and Q6_K (AVX-512 VNNI and VBMI) in each type's own order, with
// the input rounded to 16 bits once per row and laid out to match (order_input), which also
// serve a few tokens, each in turn; the rest of the block-type products are model/quant_dot.h's.
#ifndef ATTN_MODEL_QUANT_ORDER_H
#define ATTN_MODEL_QUANT_ORDER_H

#include <stdint.h>
#include <string.h>
#include "quant.h"
#include "quant_dot.h"

#if defined(QUANT_VNNI) && defined(__AVX512VBMI__) // the byte permutes that gather each type's order
#define QUANT_ORDERED 1
#endif

// The tokens up to which a product takes the one-token rows in the type's own order for each
// token, a part of the rows at a time so that they are read from memory once for all the
// tokens: below it that costs less than panels (docs/KERNELS.md), and a few tokens' outputs
// (speculative decoding's verification, a short chat turn) stay bit for bit one token's.
#define ORDERED_TOKENS 12

// Whether a product takes the one-token rows in its own order, whose input is rounded with one
// scale per row rather than per 32 values.
static inline int ordered_product(int type, int T, int n_in) {
#if defined(QUANT_ORDERED)
    return T <= ORDERED_TOKENS && block_kernels[type].ordered && n_in % UNPACKED_VALUES == 0;
#else
    (void)type, (void)T, (void)n_in;
    return 0;
#endif
}

#if defined(QUANT_ORDERED)
// ----------------------------------------------------------------------------
// The one-token products of Q4_0, Q4_K, Q6_K and Q8_0, the types nearly every file is made
// of, and of Q4_1, Q5_0, Q5_1 and IQ4_NL, in their own order: the input is laid out to match
// the weights as byte permutes gather them from the blocks, so that each 32-bit lane's products
// keep to one group of one scale (16 values of a Q4_0 or IQ4_NL block, 8 of a Q4_K sub-block,
// a Q6_K group or a Q8_0, Q4_1, Q5_0 or Q5_1 block), and the scales apply per lane without
// summing groups first. The input is rounded to 16 bits with one scale for the whole row
// (amax / 32767), not one per 32 values, so that the scale multiplies a row's sum once rather
// than every block's (a sixth of Q4_0's instructions); a value small beside the row's largest
// keeps fewer bits (docs/KERNELS.md). Whole chunks only (rows of a multiple of 256 values).

// x [n] rounded to q [n], 16-bit integers of one scale, which is returned.
static inline float quantize_row16(int16_t *q, const float *x, int n) {
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    float top = _mm512_reduce_max_ps(amax);
    __m512 id = _mm512_set1_ps(top > 0.0f ? QUANT_MAX / top : 0.0f), lim = _mm512_set1_ps(QUANT_MAX);
    for (int i = 0; i < n; i += 16) {
        __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + i), id);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y); // NaN -> 0
        y = _mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim));
        _mm256_storeu_si256((__m256i *)(q + i), _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(y)));
    }
    return top / QUANT_MAX;
}

// The ordered input starts with a header of 64 bytes (the row's scale), then a chunk of 256
// values at a time: ql [4][64] and qh [4][64], the low (unsigned) and high (signed) bytes of
// the values that the four registers of weights meet, then a tail of 128 bytes that each type
// describes. In every type's order the values go in runs of 8: ordered_run gives the first
// value of run r of register k.
#define ORDERED_HEADER 64
#define ORDERED_CHUNK 640
// Rows a one-token kernel takes at once, sharing the loads of its input, one from each of as
// many streams: on an Intel Xeon 8 generated the 1.1B shape 20-30 % faster than 3, and more
// parts of 3 rows did not; on AMD's Zen 4, 8 streams ran 2-12 % slower than 4 (medians of 9
// alternating rounds, docs/KERNELS.md, "Eight rows at once" and "Four again on AMD").
#define ORDERED_ROWS_MOST 8
#define ORDERED_ROWS_AMD 4
static inline int ordered_rows_at_once(void) { return __builtin_cpu_is("amd") ? ORDERED_ROWS_AMD : ORDERED_ROWS_MOST; }
static inline int ordered_run(int type, int k, int r) {
    switch (type) {
    case BLOCK_Q4_0:
    case BLOCK_IQ4_NL: return 32 * r + (int[]){0, 16, 8, 24}[k];
    case BLOCK_Q4_K: return 64 * (r / 2) + 32 * (k / 2) + 16 * (k % 2) + 8 * (r % 2);
    case BLOCK_Q8_0:
    case BLOCK_Q4_1:
    case BLOCK_Q5_0:
    case BLOCK_Q5_1: return 128 * (k / 2) + 32 * (r / 2) + 16 * (k % 2) + 8 * (r % 2);
    default: return 128 * (k / 2) + 16 * r + 8 * (k % 2); // Q6_K
    }
}

// x [n] rounded to 16 bits (into q [n]) and laid out at dst for type's one-token product.
static inline void order_input(uint8_t *dst, const float *x, int16_t *q, int n, int type) {
    *(float *)dst = quantize_row16(q, x, n);
    dst += ORDERED_HEADER;
    for (int i = 0; i < n; i += UNPACKED_VALUES, dst += ORDERED_CHUNK) {
        const int16_t *c = q + i;
        uint8_t low[UNPACKED_VALUES], high[UNPACKED_VALUES];
        int fours[UNPACKED_VALUES / 4], high_fours[UNPACKED_VALUES / 4]; // Σ q and Σ qh of each run of 4
        for (int v = 0; v < UNPACKED_VALUES; v += 32) {
            __m512i w = _mm512_loadu_si512(c + v);
            _mm256_storeu_si256((__m256i *)(low + v), _mm512_cvtepi16_epi8(w));
            _mm256_storeu_si256((__m256i *)(high + v), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 8)));
        }
        for (int m = 0; m < UNPACKED_VALUES / 4; m++) {
            fours[m] = c[4 * m] + c[4 * m + 1] + c[4 * m + 2] + c[4 * m + 3];
            high_fours[m] =
                (int8_t)high[4 * m] + (int8_t)high[4 * m + 1] + (int8_t)high[4 * m + 2] + (int8_t)high[4 * m + 3];
        }
        for (int k = 0; k < 4; k++)
            for (int r = 0; r < 8; r++) {
                memcpy(dst + 64 * k + 8 * r, low + ordered_run(type, k, r), 8);
                memcpy(dst + 256 + 64 * k + 8 * r, high + ordered_run(type, k, r), 8);
            }
        int32_t *start = (int32_t *)(dst + 512);
        float *tail = (float *)(dst + 512);
        switch (type) {
        case BLOCK_Q4_0:
        case BLOCK_IQ4_NL: // lane 2b + c: runs 8b + c, 8b + c + 2, + 4 and + 6
            for (int l = 0; l < 16; l++) {
                const int *f = (type == BLOCK_Q4_0 ? fours : high_fours) + 8 * (l / 2) + l % 2;
                start[l] = (type == BLOCK_Q4_0 ? -8 : -32768) * (f[0] + f[2] + f[4] + f[6]);
            }
            break;
        case BLOCK_Q4_K: // sub-block sb: runs 8 sb .. 8 sb + 7
            for (int sb = 0; sb < 8; sb++) {
                const int *f = fours + 8 * sb;
                tail[sb] = 1.0f, tail[8 + sb] = (float)(f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7]);
            }
            break;
        case BLOCK_Q8_0:
        case BLOCK_Q5_0: // half h, lane 4b + c: runs 32h + 8b + c and 4 on
            for (int l = 0; l < 32; l++) {
                const int *f = (type == BLOCK_Q8_0 ? high_fours : fours) + 32 * (l / 16) + 8 * (l % 16 / 4) + l % 4;
                start[l] = (type == BLOCK_Q8_0 ? -32768 : -16) * (f[0] + f[4]);
            }
            break;
        case BLOCK_Q4_1:
        case BLOCK_Q5_1: // block b: runs 8b .. 8b + 7
            for (int b = 0; b < 8; b++) {
                const int *f = fours + 8 * b;
                tail[b] = (float)(f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7]);
            }
            break;
        default: // Q6_K, group g: runs 4g .. 4g + 3
            for (int g = 0; g < 16; g++) {
                const int *f = fours + 4 * g;
                tail[g] = -32.0f * (float)(f[0] + f[1] + f[2] + f[3]);
            }
        }
    }
}

// The high nibbles of 64 bytes: one GF2P8AFFINEQB (each byte's bits 4..7 moved to 0..3, a bit
// matrix) where the cores have GFNI, else a shift and a mask.
static inline __m512i high_nibbles(__m512i q) {
#if defined(__GFNI__)
    return _mm512_gf2p8affine_epi64_epi8(q, _mm512_set1_epi64(0x1020408000000000ll), 0);
#else
    return _mm512_and_si512(_mm512_srli_epi16(q, 4), _mm512_set1_epi8(15));
#endif
}

// Each byte's bits 0-1 moved to 4-5, the rest cleared (Q6_K's high bits).
static inline __m512i bits_to_45(__m512i q) {
#if defined(__GFNI__)
    return _mm512_gf2p8affine_epi64_epi8(q, _mm512_set1_epi64(0x01020000ll), 0);
#else
    return _mm512_and_si512(_mm512_slli_epi16(q, 4), _mm512_set1_epi8(0x30));
#endif
}

// The chunk's ordered input in registers: x[k] = ql of register k (unsigned), x[4 + k] = its
// qh (signed). Loaded once per chunk, they serve every row the kernel takes at once (Q4_0: a
// row's own work is 4 × 64 bytes of weights and 8 multiply-adds; the input's 9 loads are shared).
static inline void load_ordered(__m512i x[8], const uint8_t *in) {
    for (int k = 0; k < 8; k++) x[k] = _mm512_loadu_si512(in + 64 * k);
}

// 64 bytes of a row's blocks, as two loads of 32. The blocks start anywhere in a cache line, so
// a load of 64 always spans two lines; streamed from memory, on AMD's Zen 5 such loads ran the
// rows at two thirds of the speed of loads of 32 (1.1B Q4_0, native, 2 threads: 39-40 -> 48-60
// tok/s), though from L2 the loads of 32 cost Q8_0 a third more (docs/KERNELS.md, "Loads of 32
// on Zen 5").
static inline __m512i load_weights64(const uint8_t *p) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                              _mm256_loadu_si256((const __m256i *)(p + 32)), 1);
}

// Each lane's Σ q·v over the registers of weights [k0 .. k1) and the chunk's input x, added to
// a: ql (unsigned) times s, the weights as signed bytes, and u, the weights as unsigned bytes,
// times qh (signed), shifted up a byte. For weights of 0..127 s and u are the same registers;
// IQ4_NL's signed levels pass u = s + 128, whose bias the lane's start takes out.
static inline __m512i ordered_sums(__m512i a, const __m512i s[4], const __m512i u[4], const __m512i x[8], int k0,
                                   int k1) {
    __m512i b = _mm512_setzero_si512();
    for (int k = k0; k < k1; k++) {
        a = _mm512_dpbusd_epi32(a, x[k], s[k]);
        b = _mm512_dpbusd_epi32(b, u[k], x[4 + k]);
    }
    return _mm512_add_epi32(a, _mm512_slli_epi32(b, 8));
}

// Each kernel below takes rows rows at once (a constant where it is inlined), row[r] the first
// block of row r, and sets out[r] to lanes that sum to that row's product with the input.

// Q4_0, and IQ4_NL (Q4_0's bytes, each nibble an index into iq4_nl_levels): 8 blocks (144
// bytes) a chunk. Two permutes gather registers A, the first 8 bytes of each block's 16 of
// nibbles, and B the last 8, so lane 2b + c of both holds block b; their low and high nibbles
// are u[0..3] = A low, A high, B low, B high. Q4_0's nibbles stay unsigned (0..15) and the 8
// they are biased by comes off as -8 Σ q, the lane's start (the tail's first 16 int32).
// IQ4_NL's levels (-127..113) are looked up 16 at a time (VPSHUFB): signed against ql, biased
// to unsigned (level + 128) against qh, the bias taken out by the start, -32768 Σ qh.
static inline __attribute__((always_inline)) void dot_q4_0(int type, int rows, const uint8_t *const *row,
                                                           const uint8_t *in, int n, __m512 *out) {
    // byte 8b + r of A: byte r of block b's nibbles, at 18b + 2 + r in the chunk; of B, 8 on.
    // Blocks 0-3 come from a load at the chunk's start, 4-7 from one 72 bytes on.
    static const uint8_t pick[64] = {
#define P(b) (b < 4 ? 18 * b + 2 : 64 + 18 * b - 70)
#define R(b) P(b), P(b) + 1, P(b) + 2, P(b) + 3, P(b) + 4, P(b) + 5, P(b) + 6, P(b) + 7
        R(0), R(1), R(2), R(3), R(4),
        R(5), R(6), R(7)
#undef R
#undef P
    };
    // block b's float16 scale (word 9b of either load) in lanes 2b and 2b + 1
    static const uint16_t scale_words[32] = {0, 0, 9, 9, 18, 18, 27, 27, 32, 32, 41, 41, 50, 50, 59, 59};
    const __m512i nibble = _mm512_set1_epi8(15), picks = _mm512_loadu_si512(pick);
    const __m512i words = _mm512_loadu_si512(scale_words), bias = _mm512_set1_epi8((char)0x80);
    const __m512i levels = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)iq4_nl_levels));
    const float dx = *(const float *)in;
    __m512 acc[ORDERED_ROWS_MOST];
    for (int r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps();
    in += ORDERED_HEADER;
    for (int i = 0, c = 0; i < n; i += UNPACKED_VALUES, c += 8 * 18, in += ORDERED_CHUNK) {
        __m512i x[8], start = _mm512_loadu_si512(in + 512);
        load_ordered(x, in);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *w = row[r] + c;
            __m512i first = load_weights64(w), second = load_weights64(w + 72);
            __m512i A = _mm512_permutex2var_epi8(first, picks, second);
            __m512i B = _mm512_permutex2var_epi8(load_weights64(w + 8), picks, load_weights64(w + 80));
            __m512i u[4] = {_mm512_and_si512(A, nibble), high_nibbles(A), _mm512_and_si512(B, nibble), high_nibbles(B)};
            __m512i s[4];
            for (int k = 0; k < 4; k++)
                if (type == BLOCK_IQ4_NL) s[k] = _mm512_shuffle_epi8(levels, u[k]), u[k] = _mm512_xor_si512(s[k], bias);
                else s[k] = u[k];
            __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(first, words, second)));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ordered_sums(start, s, u, x, 0, 4)), d, acc[r]);
        }
    }
    for (int r = 0; r < rows; r++) out[r] = _mm512_mul_ps(acc[r], _mm512_set1_ps(dx));
}

// Q4_K: a block (256 values) a chunk. Its 128 bytes of nibbles are four groups of 32, group G
// holding sub-block 2G in its low nibbles and 2G + 1 in its high ones. Two permutes gather X,
// the first 16 bytes of each group, and Y the last 16, so lane 4G + c of both holds group G:
// u[0..3] = X low, Y low, X high, Y high; the low nibbles' lanes take sub-block 2G's scale
// d·sc, the high ones' 2G + 1's. The minimums' part, -dmin·m·Σ q per sub-block, is a second
// row of 8 lanes from the same register of scales: the tail starts with 8 ones, then the 8
// sub-blocks' Σ q as floats.
static inline __attribute__((always_inline)) void dot_q4_k(int rows, const uint8_t *const *row, const uint8_t *in,
                                                           int n, __m512 *out) {
    static const uint8_t pick[64] = {// byte 16G + r of X: byte 32G + r of the nibbles; of Y, 16 on
#define R(G)                                                                                                           \
    32 * G, 32 * G + 1, 32 * G + 2, 32 * G + 3, 32 * G + 4, 32 * G + 5, 32 * G + 6, 32 * G + 7, 32 * G + 8,            \
        32 * G + 9, 32 * G + 10, 32 * G + 11, 32 * G + 12, 32 * G + 13, 32 * G + 14, 32 * G + 15
                                     R(0), R(1), R(2), R(3)
#undef R
    };
    const __m512i nibble = _mm512_set1_epi8(15), picks = _mm512_loadu_si512(pick);
    const __m512i picks16 = _mm512_add_epi8(picks, _mm512_set1_epi8(16));
    const __m512i low_lanes = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i high_lanes = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    const float dx = *(const float *)in;
    __m512 acc[ORDERED_ROWS_MOST], mins[ORDERED_ROWS_MOST];
    for (int r = 0; r < rows; r++) acc[r] = mins[r] = _mm512_setzero_ps();
    in += ORDERED_HEADER;
    for (int i = 0, c = 0; i < n; i += UNPACKED_VALUES, c += 144, in += ORDERED_CHUNK) {
        __m512i x[8];
        __m512 sums_q = _mm512_loadu_ps((const float *)(in + 512));
        load_ordered(x, in);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *w = row[r] + c;
            __m512 scales = _mm512_mul_ps(k_scale_vector(w), sums_q);
            mins[r] = _mm512_add_ps(mins[r], scales); // lanes 8..15: -dmin·m·Σ q
            __m512i first = load_weights64(w + 16), second = load_weights64(w + 80);
            __m512i X = _mm512_permutex2var_epi8(first, picks, second);
            __m512i Y = _mm512_permutex2var_epi8(first, picks16, second);
            __m512i u[4] = {_mm512_and_si512(X, nibble), _mm512_and_si512(Y, nibble), high_nibbles(X), high_nibbles(Y)};
            __m512i low = ordered_sums(_mm512_setzero_si512(), u, u, x, 0, 2);
            __m512i high = ordered_sums(_mm512_setzero_si512(), u, u, x, 2, 4);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(low), _mm512_permutexvar_ps(low_lanes, scales), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(high), _mm512_permutexvar_ps(high_lanes, scales), acc[r]);
        }
    }
    for (int r = 0; r < rows; r++)
        out[r] = _mm512_mul_ps(_mm512_add_ps(acc[r], _mm512_maskz_mov_ps(0xff00, mins[r])), _mm512_set1_ps(dx));
}

// Q8_0: 8 blocks (272 bytes) a chunk, in two halves of 4. Two permutes gather A, the first 16
// of each block's 32 bytes, and B the last 16, so lane 4b + c of both holds block b. The
// values are signed: ql (unsigned) times them, and their bytes biased to unsigned (s + 128)
// times qh (signed), the bias taken back out by the lane's start, -32768 Σ qh (the tail: 16
// int32 for each half).
static inline __attribute__((always_inline)) void dot_q8_0(int rows, const uint8_t *const *row, const uint8_t *in,
                                                           int n, __m512 *out) {
    static const uint8_t pick[64] = {// byte 16b + r of A: byte 34b + 2 + r of the half; of B, 16 on
#define R(b)                                                                                                           \
    34 * b + 2, 34 * b + 3, 34 * b + 4, 34 * b + 5, 34 * b + 6, 34 * b + 7, 34 * b + 8, 34 * b + 9, 34 * b + 10,       \
        34 * b + 11, 34 * b + 12, 34 * b + 13, 34 * b + 14, 34 * b + 15, 34 * b + 16, 34 * b + 17
                                     R(0), R(1), R(2), R(3)
#undef R
    };
    // block b's float16 scale, word 17b of the half, in lanes 4b .. 4b + 3
    static const uint16_t scale_words[32] = {0, 0, 0, 0, 17, 17, 17, 17, 34, 34, 34, 34, 51, 51, 51, 51};
    const __m512i picks = _mm512_loadu_si512(pick), picks8 = _mm512_add_epi8(picks, _mm512_set1_epi8(8));
    const __m512i words = _mm512_loadu_si512(scale_words), bias = _mm512_set1_epi8((char)0x80);
    const float dx = *(const float *)in;
    __m512 acc[ORDERED_ROWS_MOST];
    for (int r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps();
    in += ORDERED_HEADER;
    for (int i = 0, c = 0; i < n; i += UNPACKED_VALUES, in += ORDERED_CHUNK) {
        __m512i x[8];
        load_ordered(x, in);
        for (int h = 0; h < 2; h++, c += 4 * 34) {
            __m512i start = _mm512_loadu_si512(in + 512 + 64 * h);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const uint8_t *w = row[r] + c;
                __m512i first = load_weights64(w), second = load_weights64(w + 64);
                __m512i A = _mm512_permutex2var_epi8(first, picks, second);
                // B's bytes lie 16 on, from loads 8 on (so the last ends at the half's end)
                __m512i B = _mm512_permutex2var_epi8(load_weights64(w + 8), picks8, load_weights64(w + 72));
                __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(first, words, second)));
                __m512i a = _mm512_dpbusd_epi32(start, x[2 * h], A);
                a = _mm512_dpbusd_epi32(a, x[2 * h + 1], B);
                __m512i b = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(A, bias), x[4 + 2 * h]);
                b = _mm512_dpbusd_epi32(b, _mm512_xor_si512(B, bias), x[5 + 2 * h]);
                __m512 sums = _mm512_cvtepi32_ps(_mm512_add_epi32(a, _mm512_slli_epi32(b, 8)));
                acc[r] = _mm512_fmadd_ps(sums, d, acc[r]);
            }
        }
    }
    for (int r = 0; r < rows; r++) out[r] = _mm512_mul_ps(acc[r], _mm512_set1_ps(dx));
}

// Q4_1, Q5_0 and Q5_1: 8 blocks (160, 176 or 192 bytes) a chunk, in two halves of 4, in Q8_0's
// order. A permute gathers a half's 64 bytes of nibbles into A, so lane 4b + c holds bytes
// 4c .. 4c + 3 of block b: u[2h] = A's low nibbles, u[2h + 1] its high ones, 8 values of one
// block a lane. (Q4_0's order, 8 blocks a register, would need a permute of 148 bytes or more.)
// A word permute of the same two loads gathers each lane's block's d, and the half's 4 m;
// m·Σ q is a 128-bit multiply-add a half, the tail holding each block's Σ q as a float (lanes
// of m and Σ q took 0.029 ns a weight against 0.027 for Q4_1). Q5's fifth bits: a word permute
// puts each block's 32 bits in the 64-bit lanes of its 16 bytes, and VPMULTISHIFTQB moves bit
// j (or 16 + j) of them to bit 4 of byte j, which is then or'ed into the nibble as 16; Q5_0's
// bias of 16 comes off as the lane's start, -16 Σ q (the tail as int32).
// Byte p of a half of 4 blocks of B bytes in its two loads: its first 64 bytes, then the 64
// that end it; its nibbles (16 bytes from B - 16 of block b), the word of its d (at 0), its
// fifth bits' two words twice in a 64-bit lane, and the 4 blocks' m.
#define HALF_AT(B, p) ((p) < 64 ? (p) : (p) + 128 - 4 * (B))
#define HALF_PICK4(B, p) HALF_AT(B, p), HALF_AT(B, (p) + 1), HALF_AT(B, (p) + 2), HALF_AT(B, (p) + 3)
#define HALF_PICK(B, b)                                                                                                \
    HALF_PICK4(B, (B) * ((b) + 1) - 16), HALF_PICK4(B, (B) * ((b) + 1) - 12), HALF_PICK4(B, (B) * ((b) + 1) - 8),      \
        HALF_PICK4(B, (B) * ((b) + 1) - 4)
#define HALF_WORD4(B, p) HALF_AT(B, p) / 2, HALF_AT(B, p) / 2, HALF_AT(B, p) / 2, HALF_AT(B, p) / 2
#define HALF_WORDS(B, at)                                                                                              \
    HALF_WORD4(B, at), HALF_WORD4(B, (B) + (at)), HALF_WORD4(B, 2 * (B) + (at)), HALF_WORD4(B, 3 * (B) + (at))
#define HALF_BITS2(B, p) HALF_AT(B, p) / 2, HALF_AT(B, (p) + 2) / 2, HALF_AT(B, p) / 2, HALF_AT(B, (p) + 2) / 2
#define HALF_MINS(B)                                                                                                   \
    HALF_AT(B, 2) / 2, HALF_AT(B, (B) + 2) / 2, HALF_AT(B, 2 * (B) + 2) / 2, HALF_AT(B, 3 * (B) + 2) / 2
#define HALF_BITS(B, b, at) HALF_BITS2(B, (B) * (b) + (at)), HALF_BITS2(B, (B) * (b) + (at))
static inline __attribute__((always_inline)) void dot_q4_1(int type, int rows, const uint8_t *const *row,
                                                           const uint8_t *in, int n, __m512 *out) {
    // byte 16b + j of A: byte j of block b's nibbles (for Q4_1, Q5_0, Q5_1)
    static const uint8_t pick[3][64] = {{HALF_PICK(20, 0), HALF_PICK(20, 1), HALF_PICK(20, 2), HALF_PICK(20, 3)},
                                        {HALF_PICK(22, 0), HALF_PICK(22, 1), HALF_PICK(22, 2), HALF_PICK(22, 3)},
                                        {HALF_PICK(24, 0), HALF_PICK(24, 1), HALF_PICK(24, 2), HALF_PICK(24, 3)}};
    // block b's d in lanes 4b .. 4b + 3, then the 4 blocks' m (unused for Q5_0)
    static const uint16_t scale_words[3][32] = {
        {HALF_WORDS(20, 0), HALF_MINS(20)}, {HALF_WORDS(22, 0), HALF_MINS(22)}, {HALF_WORDS(24, 0), HALF_MINS(24)}};
    // block b's fifth bits in 64-bit lanes 2b and 2b + 1 (Q5_0, Q5_1)
    static const uint16_t bit_words[2][32] = {
        {HALF_BITS(22, 0, 2), HALF_BITS(22, 1, 2), HALF_BITS(22, 2, 2), HALF_BITS(22, 3, 2)},
        {HALF_BITS(24, 0, 4), HALF_BITS(24, 1, 4), HALF_BITS(24, 2, 4), HALF_BITS(24, 3, 4)}};
    const int bytes = matrix_types[type].block_bytes, t = (bytes - 20) / 2, fifth = type != BLOCK_Q4_1;
    const __m512i nibble = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16), picks = _mm512_loadu_si512(pick[t]);
    const __m512i words = _mm512_loadu_si512(scale_words[t]), bits = _mm512_loadu_si512(bit_words[fifth ? t - 1 : 0]);
    // the shifts that bring a block's bit j, for byte j of its nibbles (low), or 16 + j (high), to bit 4
    const __m512i to_bit4[2] = {
        _mm512_set4_epi64(0x0b0a090807060504ll, 0x030201003f3e3d3cll, 0x0b0a090807060504ll, 0x030201003f3e3d3cll),
        _mm512_set4_epi64(0x1b1a191817161514ll, 0x131211100f0e0d0cll, 0x1b1a191817161514ll, 0x131211100f0e0d0cll)};
    const float dx = *(const float *)in;
    __m512 acc[ORDERED_ROWS_MOST];
    __m128 mins[ORDERED_ROWS_MOST];
    for (int r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps(), mins[r] = _mm_setzero_ps();
    in += ORDERED_HEADER;
    for (int i = 0, c = 0; i < n; i += UNPACKED_VALUES, in += ORDERED_CHUNK) {
        __m512i x[8];
        load_ordered(x, in);
#pragma GCC unroll 2 // (rolled, with Q5's bits, GCC kept u[] and x[] in memory)
        for (int h = 0; h < 2; h++, c += 4 * bytes) {
            __m512i start = _mm512_loadu_si512(in + 512 + 64 * h);
            __m128 sums_q = _mm_loadu_ps((const float *)(in + 512) + 4 * h);
#pragma GCC unroll 8
            for (int r = 0; r < rows; r++) {
                const uint8_t *w = row[r] + c;
                __m512i first = load_weights64(w), second = load_weights64(w + 4 * bytes - 64);
                __m512i A = _mm512_permutex2var_epi8(first, picks, second);
                __m512i u[4];
                u[2 * h] = _mm512_and_si512(A, nibble), u[2 * h + 1] = high_nibbles(A);
                if (fifth) {
                    __m512i q = _mm512_permutex2var_epi16(first, bits, second);
                    for (int k = 0; k < 2; k++) // u | (bit moved to 4 & 16)
                        u[2 * h + k] = _mm512_ternarylogic_epi32(
                            u[2 * h + k], _mm512_multishift_epi64_epi8(to_bit4[k], q), sixteen, 0xf8);
                }
                __m512i dm = _mm512_permutex2var_epi16(first, words, second);
                __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
                __m512i sums =
                    ordered_sums(type == BLOCK_Q5_0 ? start : _mm512_setzero_si512(), u, u, x, 2 * h, 2 * h + 2);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), d, acc[r]);
                if (type != BLOCK_Q5_0)
                    mins[r] = _mm_fmadd_ps(_mm_cvtph_ps(_mm512_extracti32x4_epi32(dm, 2)), sums_q, mins[r]);
            }
        }
    }
    for (int r = 0; r < rows; r++)
        out[r] = _mm512_mul_ps(_mm512_add_ps(acc[r], _mm512_zextps128_ps512(mins[r])), _mm512_set1_ps(dx));
}
#undef HALF_MINS
#undef HALF_BITS
#undef HALF_BITS2
#undef HALF_WORDS
#undef HALF_WORD4
#undef HALF_PICK
#undef HALF_PICK4
#undef HALF_AT

// Q6_K: a block a chunk, in two halves of 128 values: 64 bytes of low nibbles (values p and
// 64 + p of the half in their low and high nibbles) and 32 of high bits, two to a value, joined
// into L (the half's values 0..63, scale groups 0..3 of 16 values) and H
// (64..127, groups 4..7). Two permutes gather P, the first 8 bytes of each group, and Q the
// last 8, so lane 2g + c of both holds group g. The values stay unsigned (0..63); the 32 they
// are biased by comes off per group as d·sc·(-32 Σ q), the tail holding -32 Σ q for each of
// the 16 groups (floats).
static inline __attribute__((always_inline)) void dot_q6_k(int rows, const uint8_t *const *row, const uint8_t *in,
                                                           int n, __m512 *out) {
    static const uint8_t pick[64] = {// byte 8g + r of P: byte 16g + r of L and H, one after the other
#define R(g) 16 * g, 16 * g + 1, 16 * g + 2, 16 * g + 3, 16 * g + 4, 16 * g + 5, 16 * g + 6, 16 * g + 7
                                     R(0), R(1), R(2), R(3), R(4),
                                     R(5), R(6), R(7)
#undef R
    };
    const __m512i nibble = _mm512_set1_epi8(15), two_bits = _mm512_set1_epi8(0x30);
    const __m512i picks = _mm512_loadu_si512(pick), picks8 = _mm512_add_epi8(picks, _mm512_set1_epi8(8));
    const __m512i shift = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2); // the high bits of values 32..63 are 2 up
    const __m512i lanes[2] = {_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                              _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)};
    const float dx = *(const float *)in;
    __m512 acc[ORDERED_ROWS_MOST], offsets[ORDERED_ROWS_MOST];
    for (int r = 0; r < rows; r++) acc[r] = offsets[r] = _mm512_setzero_ps();
    in += ORDERED_HEADER;
    for (int i = 0, c = 0; i < n; i += UNPACKED_VALUES, c += 210, in += ORDERED_CHUNK) {
        __m512i x[8];
        __m512 tail = _mm512_loadu_ps((const float *)(in + 512));
        load_ordered(x, in);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const uint8_t *w = row[r] + c;
            __m512 scales =
                _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 192)))),
                              _mm512_set1_ps(f16_at(w + 208)));
            offsets[r] = _mm512_fmadd_ps(scales, tail, offsets[r]);
            __m512i u[4];
            for (int h = 0; h < 2; h++) {
                __m512i ql = load_weights64(w + 64 * h);
                __m512i qh = _mm512_srlv_epi64(
                    _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 128 + 32 * h))), shift);
                __m512i L = _mm512_ternarylogic_epi32(ql, nibble, bits_to_45(qh), 0xea); // (a & b) | c
                __m512i H = _mm512_ternarylogic_epi32(qh, two_bits, high_nibbles(ql), 0xea);
                u[2 * h] = _mm512_permutex2var_epi8(L, picks, H);
                u[2 * h + 1] = _mm512_permutex2var_epi8(L, picks8, H);
                __m512i sums = ordered_sums(_mm512_setzero_si512(), u, u, x, 2 * h, 2 * h + 2);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(lanes[h], scales), acc[r]);
            }
        }
    }
    for (int r = 0; r < rows; r++) out[r] = _mm512_mul_ps(_mm512_add_ps(acc[r], offsets[r]), _mm512_set1_ps(dx));
}

// out[lo, hi) (+ bias) = the rows [lo, hi) of a matrix of type in its own order (rows of rb
// bytes from blocks) times the input in (order_input). rows rows go at once, one from each of
// as many parts of [lo, hi), so that each part is read in order: the hardware's prefetcher
// then runs ahead of it, where adjacent rows taken at once are read back and forth and
// streamed 17% slower than one row at a time (docs/KERNELS.md). A part is whole blocks of 16
// rows, bar the last. Unlike the other one-token rows they do not prefetch_ahead: read in
// order, the hardware keeps up with them, and the prefetches cost 8-30 %. Each row's sums are
// made in the same order whatever rows is, so its outputs are the same bit for bit.
static inline __attribute__((always_inline)) void ordered_rows_of(int type, int rows, float *out, const float *bias,
                                                                  const uint8_t *blocks, size_t rb, const uint8_t *in,
                                                                  int n_in, size_t lo, size_t hi) {
    size_t part = (hi - lo + 16 * (size_t)rows - 1) / (16 * (size_t)rows) * 16;
    for (size_t i = 0; i < part; i += 16) {
        __m512 acc[ORDERED_ROWS_MOST][16];
        for (int j = 0; j < 16; j++) {
            const uint8_t *w[ORDERED_ROWS_MOST];
            __m512 sums[ORDERED_ROWS_MOST];
            for (int p = 0; p < rows; p++) { // past hi, row lo again: not stored
                size_t r = lo + p * part + i + j;
                w[p] = blocks + (r < hi ? r : lo) * rb;
            }
            if (type == BLOCK_Q4_0 || type == BLOCK_IQ4_NL) dot_q4_0(type, rows, w, in, n_in, sums);
            else if (type == BLOCK_Q4_1 || type == BLOCK_Q5_0 || type == BLOCK_Q5_1)
                dot_q4_1(type, rows, w, in, n_in, sums);
            else if (type == BLOCK_Q4_K) dot_q4_k(rows, w, in, n_in, sums);
            else if (type == BLOCK_Q8_0) dot_q8_0(rows, w, in, n_in, sums);
            else dot_q6_k(rows, w, in, n_in, sums);
            for (int p = 0; p < rows; p++) acc[p][j] = sums[p];
        }
        for (int p = 0; p < rows; p++) {
            size_t r0 = lo + p * part + i;
            if (r0 < hi) store_rows16(out, bias, r0, hi - r0 < 16 ? (int)(hi - r0) : 16, acc[p]);
        }
    }
}

// ordered_rows_of with the machine's rows at once, each count with its own inlined loops.
static inline __attribute__((always_inline)) void ordered_rows(int type, float *out, const float *bias,
                                                               const uint8_t *blocks, size_t rb, const uint8_t *in,
                                                               int n_in, size_t lo, size_t hi) {
    if (ordered_rows_at_once() == ORDERED_ROWS_AMD)
        ordered_rows_of(type, ORDERED_ROWS_AMD, out, bias, blocks, rb, in, n_in, lo, hi);
    else ordered_rows_of(type, ORDERED_ROWS_MOST, out, bias, blocks, rb, in, n_in, lo, hi);
}
#endif

#endif
