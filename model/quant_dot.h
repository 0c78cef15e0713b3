// model/quant_dot.h: products of a matrix in a llama.cpp block type (model/quant.h) with
// float32 inputs rounded to 16-bit integers, in integer multiply-adds: the inputs' rounding
// and a one-token row (dot_quantized; the types marked ordered in block_kernels in their own
// order in model/quant_order.h); a prompt's panels are model/quant_panels.h's, from the same
// rounding and the one unpacking per type. The
// input rows are quantised once for the products that share them (quantize_input): a scale
// per 32 values (amax / 32767, rounded to nearest even), so each group of 16 weights meets
// integers of one scale, and its sum of products is exact in int32:
//   Σ_j w_j x_j ≈ Σ_g [ a_g · dx_g · Σ_{j in g} s_j q_j  +  b_g · dx_g · Σ_{j in g} q_j ].
// llama.cpp rounds the inputs to 8 bits; that moved the logits of ../shared's GGUFs by up to
// 1.9e-2 of the largest, 16 bits by about 1e-4 (docs/KERNELS.md, "Block types"). VPDPBUSD
// multiplies unsigned by signed bytes, so a 16-bit q is taken as its two bytes, q = 256 qh +
// ql: ql (unsigned) times s, and s biased to unsigned (s + 128) times qh (signed), the bias
// taken back out with -128 Σ qh.
#ifndef ATTN_MODEL_QUANT_DOT_H
#define ATTN_MODEL_QUANT_DOT_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "quant.h"

#define QUANT_GROUPS (UNPACKED_VALUES / UNPACK_GROUP) // groups in a chunk of 256 values
#define QUANT_MAX 32767.0f

// The instruction set the block-type products use, widest first: AVX-512 VNNI multiplies
// bytes (VPDPBUSD), so it takes a 16-bit input as its two bytes; AVX2 multiplies 16-bit pairs
// (VPMADDWD, or VPDPWSSD where the machine has AVX-VNNI), so it takes the 16-bit values whole,
// but for Q6_K's one-token rows, which take their bytes (VPMADDUBSW).
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define QUANT_VNNI 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) // x86-64-v3
#define QUANT_AVX2 1
#endif

// One input row of n values quantised, in chunks of 256 (the last padded with zeros):
//   q     [n256]       int16 (AVX-512 VNNI: its bytes apart, ql [n256] uint8 the low one and
//                      qh [n256] int8 the high one, q = 256 qh + ql)
//   dx    [n256 / 16]  float: each group's scale (the same for the two groups of 32 values)
//   sx    [n256 / 16]  float: dx × Σ q over the group, for the weights' offsets b
//   neg   [n256 / 16]  int32 (AVX-512 VNNI): -32768 Σ qh over the group: the bias of s + 128
//                      times qh, × 256
//         in its place (AVX2) dx32 [n256 / 32] and sx32 [n256 / 32]: the scale of each 32 values
//                      and its two groups' sx added, which the one-token products would
//                      otherwise gather from dx and sx for every row
//   ql, qh [n256]      (AVX2) q's bytes apart as well, as VNNI's: Q6_K's one-token rows multiply
//                      its bytes by q's without widening them (q6_k_sums)
static inline size_t quantized_values(int n) {
    return ((size_t)n + UNPACKED_VALUES - 1) / UNPACKED_VALUES * UNPACKED_VALUES;
}
static inline size_t quantized_row_bytes(int n) {
    size_t v = quantized_values(n), bytes = 2 * v + v / UNPACK_GROUP * 12;
#if defined(QUANT_AVX2)
    bytes += 2 * v;
#endif
    return bytes;
}

#if defined(QUANT_AVX2)
// Where the AVX2 row's byte planes (ql, then qh) begin: after q, dx, sx, dx32 and sx32.
static inline size_t byte_planes_at(size_t v) { return 2 * v + 12 * (v / UNPACK_GROUP); }
#endif

typedef struct {
#if defined(QUANT_VNNI) || defined(QUANT_AVX2)
    const uint8_t *ql;
    const int8_t *qh;
#endif
#if !defined(QUANT_VNNI)
    const int16_t *q;
#endif
    const float *dx, *sx;
    const int32_t *neg;
#if defined(QUANT_AVX2)
    const float *dx32, *sx32;
#endif
} QuantizedRow;

static inline QuantizedRow quantized_row(const uint8_t *row, int n) {
    size_t v = quantized_values(n), g = v / UNPACK_GROUP;
    const float *dx = (const float *)(row + 2 * v);
#if defined(QUANT_VNNI)
    return (QuantizedRow){row, (const int8_t *)(row + v), dx, dx + g, (const int32_t *)(dx + 2 * g)};
#else
#if defined(QUANT_AVX2)
    const uint8_t *ql = row + byte_planes_at(v);
    const int8_t *qh = (const int8_t *)(ql + v);
    return (QuantizedRow){ql, qh, (const int16_t *)row, dx, dx + g, NULL, dx + 2 * g, dx + 2 * g + g / 2};
#else
    return (QuantizedRow){(const int16_t *)row, dx, dx + g, (const int32_t *)(dx + 2 * g)};
#endif
#endif
}

// Value i of a quantised row, whichever its layout.
static inline int quantized_value(QuantizedRow x, size_t i) {
#if defined(QUANT_VNNI)
    return 256 * x.qh[i] + x.ql[i];
#else
    return x.q[i];
#endif
}

// Values [i, i + 32) of x (m of them, the rest zeros) rounded to q with one scale, which is
// returned: the portable path, and the vector one's tail.
static inline float quantize32(const float *x, int m, int32_t q[32]) {
    float amax = 0.0f;
    for (int j = 0; j < m; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    float id = amax > 0.0f ? QUANT_MAX / amax : 0.0f;
    for (int j = 0; j < 32; j++) {
        // rounded to nearest even, as the vector conversion does; a NaN becomes 0
        float y = j < m ? x[j] * id : 0.0f;
        y = y > QUANT_MAX ? QUANT_MAX : y < -QUANT_MAX ? -QUANT_MAX : y;
        q[j] = y == y ? (int)rintf(y) : 0;
    }
    return amax / QUANT_MAX;
}

#if defined(__AVX2__)
// quantize32 of 32 whole values, 8 at a time: the same roundings.
static inline float quantize32_avx2(const float *x, int32_t q[32]) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 top = _mm256_setzero_ps();
    for (int j = 0; j < 32; j += 8) top = _mm256_max_ps(top, _mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    __m256 id = _mm256_set1_ps(amax > 0.0f ? QUANT_MAX / amax : 0.0f), lim = _mm256_set1_ps(QUANT_MAX);
    for (int j = 0; j < 32; j += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + j), id);
        y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q)); // NaN -> 0
        y = _mm256_max_ps(_mm256_min_ps(y, lim), _mm256_sub_ps(_mm256_setzero_ps(), lim));
        _mm256_storeu_si256((__m256i *)(q + j), _mm256_cvtps_epi32(y));
    }
    return amax / QUANT_MAX;
}
#endif

// q [32] (|q| <= 32767) into the row's layout at values [i, i + 32): each half's Σ q into
// sum, and with VNNI each half's Σ of high bytes into high.
static inline void store_quantized32(uint8_t *row, size_t v, size_t i, const int32_t *q, int sum[2], int high[2]) {
#if defined(QUANT_VNNI)
    for (int h = 0; h < 2; h++) {
        __m512i w = _mm512_loadu_si512(q + 16 * h), top = _mm512_srai_epi32(w, 8);
        _mm_storeu_si128((__m128i *)(row + i + 16 * h), _mm512_cvtepi32_epi8(w));
        _mm_storeu_si128((__m128i *)(row + v + i + 16 * h), _mm512_cvtepi32_epi8(top));
        sum[h] = _mm512_reduce_add_epi32(w), high[h] = _mm512_reduce_add_epi32(top);
    }
#elif defined(__AVX2__)
    (void)v, (void)high;
    __m256i q16[2];
    for (int h = 0; h < 2; h++) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(q + 16 * h)),
                b = _mm256_loadu_si256((const __m256i *)(q + 16 * h + 8));
        q16[h] = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)((int16_t *)row + i + 16 * h), q16[h]);
        __m256i t = _mm256_add_epi32(a, b);
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        u = _mm_add_epi32(u, _mm_unpackhi_epi64(u, u));
        sum[h] = _mm_cvtsi128_si32(_mm_add_epi32(u, _mm_shuffle_epi32(u, 1)));
    }
#if defined(QUANT_AVX2)
    uint8_t *ql = row + byte_planes_at(v);
    const __m256i low = _mm256_set1_epi16(255);
    __m256i l = _mm256_packus_epi16(_mm256_and_si256(q16[0], low), _mm256_and_si256(q16[1], low));
    __m256i top = _mm256_packs_epi16(_mm256_srai_epi16(q16[0], 8), _mm256_srai_epi16(q16[1], 8));
    _mm256_storeu_si256((__m256i *)(ql + i), _mm256_permute4x64_epi64(l, 0xd8));
    _mm256_storeu_si256((__m256i *)(ql + v + i), _mm256_permute4x64_epi64(top, 0xd8));
#endif
#else
    (void)v, (void)high;
    for (int j = 0; j < 32; j++) ((int16_t *)row)[i + j] = (int16_t)q[j], sum[j / 16] += q[j];
#endif
}

// x [n] into row (quantized_row_bytes(n) bytes).
static inline void quantize_input(uint8_t *row, const float *x, int n) {
    size_t v = quantized_values(n), groups = v / UNPACK_GROUP;
    float *dx = (float *)(row + 2 * v), *sx = dx + groups;
    for (size_t i = 0; i < v; i += 32) {
        int m = (size_t)n > i ? ((size_t)n - i < 32 ? (int)(n - i) : 32) : 0, sum[2] = {0, 0}, high[2] = {0, 0};
        int32_t q[32];
#if defined(__AVX2__)
        float d = m == 32 ? quantize32_avx2(x + i, q) : quantize32(x + i, m, q);
#else
        float d = quantize32(x + i, m, q);
#endif
        store_quantized32(row, v, i, q, sum, high);
        for (int h = 0; h < 2; h++) {
            size_t g = i / UNPACK_GROUP + h;
            dx[g] = d, sx[g] = d * (float)sum[h];
#if defined(QUANT_VNNI)
            ((int32_t *)(sx + groups))[g] = -32768 * high[h];
#endif
        }
#if defined(QUANT_AVX2)
        size_t b = i / 32, g = i / UNPACK_GROUP;
        dx[2 * groups + b] = d, dx[2 * groups + groups / 2 + b] = sx[g] + sx[g + 1];
#endif
    }
}

// ----------------------------------------------------------------------------
// One row of weights times one quantised input: a chunk of 256 values at a time unpacked,
// its 16 groups' integer sums taken, then scaled into 16 float lanes, one per group, that
// live across the row: per group acc = fma((float)Σ s q, a·dx, acc), then acc = fma(b, sx,
// acc). With VNNI the lanes come back as a register and sum_rows16 adds 16 rows' lanes at once;
// with AVX2 they are two registers of 8 groups.
#if defined(QUANT_VNNI)
// Σ s q of 64 values, 4 to a lane, less the bias that neg takes out: ql times s, and
// (s + 128) times qh, shifted up a byte.
static inline __m512i products64(__m512i s, const uint8_t *ql, const int8_t *qh) {
    __m512i low = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(ql), s);
    __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(s, _mm512_set1_epi8((char)0x80)),
                                       _mm512_loadu_si512(qh));
    return _mm512_add_epi32(low, _mm512_slli_epi32(high, 8));
}

// The 16 groups' Σ s q of a chunk. Four products of 64 values give each group's sum in 4
// lanes; two rounds of interleaving add those up, leaving group 4k + i in lane 4i + k, and a
// permutation puts it in lane 4k + i.
static inline __m512i chunk_sums(const __m512i s[4], QuantizedRow x, size_t i) {
    __m512i p[4];
    for (int k = 0; k < 4; k++) p[k] = products64(s[k], x.ql + i + 64 * k, x.qh + i + 64 * k);
    __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    __m512i w = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_add_epi32(_mm512_permutexvar_epi32(order, w), _mm512_loadu_si512(x.neg + i / UNPACK_GROUP));
}

// Lane r of the result: the sum of v[r]'s 16 lanes. Pairs of rows, then fours, are added
// within each 128-bit lane by interleaving, then the four 128-bit lanes across.
static inline __m512 sum_rows16(const __m512 v[16]) {
    __m512 t[8], u[4];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) // lane c: rows 4i .. 4i + 3's sums over lane c
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
    __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

// out[r0 .. r0 + rows) = the rows' lanes summed (+ bias).
static inline void store_rows16(float *out, const float *bias, size_t r0, int rows, const __m512 v[16]) {
    __mmask16 mask = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
    __m512 sums = sum_rows16(v);
    if (bias) sums = _mm512_add_ps(sums, _mm512_maskz_loadu_ps(mask, bias + r0));
    _mm512_mask_storeu_ps(out + r0, mask, sums);
}
#elif defined(QUANT_AVX2)
// acc + the sums of each 32-bit lane's pair of 16-bit products, exact: one VPDPWSSD where the
// machine has AVX-VNNI (or AVX-512 VNNI on 256-bit registers), else VPMADDWD and an add.
static inline __m256i add_pair_products(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// Lane g of the result: the sum of p[g]'s 8 lanes. Two rounds of pairwise adds within the
// 128-bit lanes leave p[0..3]'s halves in h0 and p[4..7]'s in h1; the halves are then added.
// The tree's first round is the caller's (pairs[j]: p[2j] and p[2j + 1] added pairwise) where
// the sums are made one by one: with all 8 live, GCC spilled them to the stack (x86-64-v3,
// one token: Q4_0 0.037 -> 0.034 ns a weight).
static inline __m256i sum_pair_lanes(const __m256i pairs[4]) {
    __m256i h0 = _mm256_hadd_epi32(pairs[0], pairs[1]), h1 = _mm256_hadd_epi32(pairs[2], pairs[3]);
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}
static inline __m256i sum_lanes8(const __m256i p[8]) {
    __m256i pairs[4];
    for (int j = 0; j < 4; j++) pairs[j] = _mm256_hadd_epi32(p[2 * j], p[2 * j + 1]);
    return sum_pair_lanes(pairs);
}

static inline __m256i load16(const int16_t *q) { return _mm256_loadu_si256((const __m256i *)q); }

// Σ s q of 8 groups of 16 values (s: 128 int8, q: 128 int16), group g in lane g.
static inline __m256i group_sums8(const int8_t *s, const int16_t *q) {
    __m256i p[8];
    for (int g = 0; g < 8; g++)
        p[g] =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(s + 16 * g))), load16(q + 16 * g));
    return sum_lanes8(p);
}

// ----------------------------------------------------------------------------
// A whole chunk's one-token sums without the trip through Unpacked's bytes: each type's
// values come as byte registers of 32 (their row's values32), widened to 16-bit lanes in registers;
// Q4_0, Q8_0 and Q4_K, the types nearly every file is made of, go straight into 16-bit lanes.
// A type's scales come per 32 values (sums32: lane b is Σ s q over values [32b, 32b + 32),
// whose weights share a scale a32[b] and an offset b32[b]) or per 16 (sums16, the groups'
// scales from the type's own unpacking).

// Σ s q of the 16 values in each half of v (bytes) against q's, 8 lanes each.
static inline void widened_products(__m256i v, const int16_t *q, __m256i *lo, __m256i *hi) {
    *lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)), load16(q));
    *hi = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)), load16(q + 16));
}

// The bias that block32_products' unsigned values carry and sums32 takes back out as an offset
// b32 = -bias a32: Q4_0's 8, Q5_0's 16, and IQ4's 127, its levels (-127..113) looked up raised
// to 0..240.
static inline float value_bias32(int type) {
    return type == BLOCK_Q4_0 ? 8.0f
           : type == BLOCK_Q5_0 ? 16.0f
           : type == BLOCK_IQ4_NL || type == BLOCK_IQ4_XS ? 127.0f
                                                          : 0.0f;
}

// Whether sums32's offsets b32 are not all zero: the types with a minimum or a bias.
static inline int has_offset32(int type) { return type_has_min(type) || value_bias32(type) != 0.0f; }

// The fifth bits of a Q5_0 or Q5_1 block's values 16 h .. 16 h + 15 (qh: its 32 bits), as 16 in
// each 16-bit lane where the bit is set: the bits' half broadcast, then each lane's own bit tested.
static inline __m256i q5_fifth_bits16(uint32_t qh, int h) {
    const __m256i bit =
        _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, (short)32768);
    __m256i spread = _mm256_and_si256(_mm256_set1_epi16((short)(qh >> 16 * h)), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi16(spread, bit), _mm256_set1_epi16(16));
}

// Σ s q of block b's 32 values (sub-block b for Q4_K) against q's, 8 lanes of pair sums.
__attribute__((always_inline)) static inline __m256i block32_products(int type, const uint8_t *blk, const int16_t *q,
                                                                      int b) {
    int bytes = matrix_types[type].block_bytes;
    __m256i lo, hi;
    if (type == BLOCK_Q4_0 || type == BLOCK_Q4_1 || type == BLOCK_Q5_0 || type == BLOCK_Q5_1 || type == BLOCK_IQ4_NL ||
        type == BLOCK_IQ4_XS) {
        // zero-extended: the low nibbles are values 0..15, the high ones 16..31 (the last 16
        // bytes of the block, or IQ4_XS's sub-block), and Q5's fifth bits added as 16
        const uint8_t *at = blk + bytes * b;
        const uint8_t *nibbles = type == BLOCK_IQ4_XS ? blk + 8 + 16 * b : at + bytes - 16;
        __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)nibbles));
        lo = _mm256_and_si256(w, _mm256_set1_epi16(15)), hi = _mm256_srli_epi16(w, 4);
        if (type == BLOCK_IQ4_NL || type == BLOCK_IQ4_XS) {
            // IQ4's levels + 127 (0..240) looked up in 16-bit lanes, each lane's high byte
            // looking up entry 0, which is 0: widening the signed levels cost two shuffles
            // more (x86-64-v3 on Zen 4, one token, CPU time: 0.046 -> 0.038 ns a weight)
            __m256i up = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)iq4_nl_levels)),
                                         _mm256_set1_epi8(127));
            lo = _mm256_shuffle_epi8(up, lo), hi = _mm256_shuffle_epi8(up, hi);
        }
        if (type == BLOCK_Q5_0 || type == BLOCK_Q5_1) {
            uint32_t qh;
            memcpy(&qh, at + bytes - 20, 4);
            lo = _mm256_or_si256(lo, q5_fifth_bits16(qh, 0)), hi = _mm256_or_si256(hi, q5_fifth_bits16(qh, 1));
        }
    } else if (type == BLOCK_Q8_0) { // sign-extended
        lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + bytes * b + 2)));
        hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + bytes * b + 18)));
    } else if (type == BLOCK_Q4_K) { // sub-blocks 2c and 2c + 1: the low and high nibbles of bytes 32c .. 32c + 31
        const uint8_t *v = blk + 16 + 32 * (b / 2);
        __m256i v0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)v));
        __m256i v1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(v + 16)));
        if (b % 2) lo = _mm256_srli_epi16(v0, 4), hi = _mm256_srli_epi16(v1, 4);
        else lo = _mm256_and_si256(v0, _mm256_set1_epi16(15)), hi = _mm256_and_si256(v1, _mm256_set1_epi16(15));
    } else {
        widened_products(block_kernels[type].values32(blk, b), q + 32 * b, &lo, &hi);
        return _mm256_add_epi32(lo, hi);
    }
    return _mm256_add_epi32(_mm256_madd_epi16(lo, load16(q + 32 * b)), _mm256_madd_epi16(hi, load16(q + 32 * b + 16)));
}

__attribute__((always_inline)) static inline __m256i sums32(int type, const uint8_t *blk, const int16_t *q, __m256 *a32,
                                                            __m256 *b32) {
    int bytes = matrix_types[type].block_bytes;
    __m256i pairs[4];
    for (int j = 0; j < 4; j++)
        pairs[j] = _mm256_hadd_epi32(block32_products(type, blk, q, 2 * j), block32_products(type, blk, q, 2 * j + 1));
    if (type == BLOCK_Q4_K || type == BLOCK_Q5_K) { // 8 scales × d and 8 minimums × -dmin
        uint8_t six[16];
        k_scale_bytes(blk, six);
        __m128i v = _mm_loadu_si128((const __m128i *)six);
        *a32 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), _mm256_set1_ps(f16_at(blk)));
        *b32 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v))),
                             _mm256_set1_ps(-f16_at(blk + 2)));
    } else if (type == BLOCK_IQ4_XS) { // 8 six-bit scales less 32, × d, each lane shifting out its own bits
        uint32_t low;
        memcpy(&low, blk + 4, 4);
        __m256i l = _mm256_srlv_epi32(_mm256_set1_epi32((int)low), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
        __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32(u16_at(blk + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
        __m256i six = _mm256_or_si256(_mm256_and_si256(l, _mm256_set1_epi32(15)),
                                      _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(3)), 4));
        *a32 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(six, _mm256_set1_epi32(32))),
                             _mm256_set1_ps(f16_at(blk)));
    } else {
        *a32 = f16x8(blk, bytes);
        if (type_has_min(type)) *b32 = f16x8(blk + 2, bytes);
    }
    if (value_bias32(type) != 0.0f) *b32 = _mm256_mul_ps(*a32, _mm256_set1_ps(-value_bias32(type)));
    return sum_pair_lanes(pairs);
}

// Σ v q over each 4 values of 32 (8 lanes), v unsigned bytes below 64 and q taken as its bytes
// q = 256 qh + ql: ql (unsigned) times v and v times qh (signed) are exact in VPMADDUBSW's
// 16-bit pairs (255 · 63 · 2 < 2^15), so the values need no widening to 16-bit lanes.
static inline __m256i byte_products(__m256i v, const uint8_t *ql, const int8_t *qh) {
    __m256i l = _mm256_loadu_si256((const __m256i *)ql), h = _mm256_loadu_si256((const __m256i *)qh);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(l, v), _mm256_set1_epi16(1)),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(v, h), _mm256_set1_epi16(256)));
}

// Q6_K's 16 groups' Σ s q (groups 8 h .. 8 h + 7 in out[h]'s lanes) with its 6-bit values
// unbiased (0..63), built in bytes, 32 to a register, and multiplied by the input's bytes
// (byte_products), where widened to 16-bit lanes they took half as many vector µops again
// (x86-64-v3, one token, one thread in L2, Intel Xeon: medians 0.121-0.138 -> 0.117-0.120 ns
// a weight).
static inline void q6_k_sums(const uint8_t *blk, QuantizedRow x, size_t i, __m256i out[2]) {
    const __m256i low = _mm256_set1_epi8(15), high = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h)),
                l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32)),
                hb = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        __m256i v[4] = {_mm256_or_si256(_mm256_and_si256(l0, low), _mm256_and_si256(_mm256_slli_epi16(hb, 4), high)),
                        _mm256_or_si256(_mm256_and_si256(l1, low), _mm256_and_si256(_mm256_slli_epi16(hb, 2), high)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low), _mm256_and_si256(hb, high)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
                                        _mm256_and_si256(_mm256_srli_epi16(hb, 2), high))};
        __m256i p[4]; // values 128 h + 32 k ..: groups 8 h + 2 k in lanes 0-3, 8 h + 2 k + 1 in 4-7
        for (int k = 0; k < 4; k++) {
            size_t at = i + 128 * (size_t)h + 32 * (size_t)k;
            p[k] = byte_products(v[k], x.ql + at, x.qh + at);
        }
        // pairwise adds within the 128-bit lanes leave groups 0, 2, 4, 6 in the low half and
        // 1, 3, 5, 7 in the high one; a permutation puts group g in lane g
        __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        out[h] = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
}

// The 16 groups' Σ s q of a chunk of a type with a scale per 16 values, groups 0..7 in out[0]'s
// lanes and 8..15 in out[1]'s, and their scales (and offsets) into a and b (Q2_K and Q3_K; Q6_K
// has q6_k_sums).
__attribute__((always_inline)) static inline void sums16(int type, const uint8_t *blk, const int16_t *q, __m256i out[2],
                                                         float *a, float *b) {
    __m256i pairs[8];
    for (int j = 0; j < 8; j++) { // values 32 j .. 32 j + 31: groups 2 j and 2 j + 1
        __m256i lo, hi;
        widened_products(block_kernels[type].values32(blk, j), q + 32 * j, &lo, &hi);
        pairs[j] = _mm256_hadd_epi32(lo, hi);
    }
    out[0] = sum_pair_lanes(pairs), out[1] = sum_pair_lanes(pairs + 4);
    block_kernels[type].scales(blk, a, b);
}
#endif

// Σ_j w_j x_j for the n values of a row of blocks (row) and a quantised input (x). Inlined
// with type a constant, so that each type's unpacking is inlined into its own loop.
#if defined(QUANT_VNNI)
#define DOT_LANES __m512
#else
#define DOT_LANES float
#endif
__attribute__((always_inline)) static inline DOT_LANES dot_quantized(int type, const uint8_t *restrict row,
                                                                     QuantizedRow x, int n) {
    size_t bytes = (size_t)matrix_types[type].block_bytes, block = (size_t)matrix_types[type].block;
    Unpacked u;
#if defined(QUANT_VNNI)
    __m512 acc = _mm512_setzero_ps();
#elif defined(QUANT_AVX2)
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
#else
    float acc[QUANT_GROUPS] = {0};
#endif
    for (int i = 0; i < n; i += UNPACKED_VALUES) {
        int m = n - i < UNPACKED_VALUES ? n - i : UNPACKED_VALUES;
        size_t g = (size_t)i / UNPACK_GROUP;
        const uint8_t *blocks = row + (size_t)i / block * bytes;
#if defined(QUANT_VNNI)
        __m512i v[4];
        if (m == UNPACKED_VALUES) {
            for (int k = 0; k < 4; k++)
                v[k] = _mm512_inserti64x4(_mm512_castsi256_si512(block_kernels[type].values32(blocks, 2 * k)),
                                          block_kernels[type].values32(blocks, 2 * k + 1), 1);
            block_kernels[type].scales(blocks, u.a, u.b);
        } else {
            unpack_values(type, blocks, m, &u);
            for (int k = 0; k < 4; k++) v[k] = _mm512_load_si512(u.s + 64 * k);
        }
        __m512 sums = _mm512_cvtepi32_ps(chunk_sums(v, x, (size_t)i));
        acc = _mm512_fmadd_ps(sums, _mm512_mul_ps(_mm512_load_ps(u.a), _mm512_loadu_ps(x.dx + g)), acc);
        if (type_has_min(type)) acc = _mm512_fmadd_ps(_mm512_load_ps(u.b), _mm512_loadu_ps(x.sx + g), acc);
#elif defined(QUANT_AVX2)
        prefetch_ahead(blocks, (size_t)m / block * bytes);
        if (!block_kernels[type].per16 && m == UNPACKED_VALUES) {
            __m256 a32, b32 = _mm256_setzero_ps();
            __m256 sums = _mm256_cvtepi32_ps(sums32(type, blocks, x.q + i, &a32, &b32));
            acc[0] = _mm256_fmadd_ps(sums, _mm256_mul_ps(a32, _mm256_loadu_ps(x.dx32 + i / 32)), acc[0]);
            if (has_offset32(type)) acc[1] = _mm256_fmadd_ps(b32, _mm256_loadu_ps(x.sx32 + i / 32), acc[1]);
            continue;
        }
        __m256i group_sums[2];
        if (type == BLOCK_Q6_K && m == UNPACKED_VALUES) {
            // the 16 scales d s_g in registers, and the bias of 32 taken out before them:
            // acc += d s_g (dx_g Σ v q - 32 sx_g)
            q6_k_sums(blocks, x, (size_t)i, group_sums);
            __m256 d = _mm256_set1_ps(f16_at(blocks + 208));
            __m128i scales = _mm_loadu_si128((const __m128i *)(blocks + 192));
            for (int h = 0; h < 2; h++) {
                __m128i eight = h ? _mm_unpackhi_epi64(scales, scales) : scales;
                __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight)), d);
                __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_sums[h]), _mm256_loadu_ps(x.dx + g + 8 * h),
                                           _mm256_mul_ps(_mm256_loadu_ps(x.sx + g + 8 * h), _mm256_set1_ps(-32.0f)));
                acc[h] = _mm256_fmadd_ps(a, t, acc[h]);
            }
            continue;
        }
        if (m == UNPACKED_VALUES) {
            sums16(type, blocks, x.q + i, group_sums, u.a, u.b);
        } else {
            unpack_values(type, blocks, m, &u);
            for (int h = 0; h < 2; h++) group_sums[h] = group_sums8(u.s + 128 * h, x.q + i + 128 * h);
        }
        for (int h = 0; h < 2; h++) {
            __m256 sums = _mm256_cvtepi32_ps(group_sums[h]);
            __m256 scale = _mm256_mul_ps(_mm256_load_ps(u.a + 8 * h), _mm256_loadu_ps(x.dx + g + 8 * h));
            acc[h] = _mm256_fmadd_ps(sums, scale, acc[h]);
            if (type_has_min(type))
                acc[h] = _mm256_fmadd_ps(_mm256_load_ps(u.b + 8 * h), _mm256_loadu_ps(x.sx + g + 8 * h), acc[h]);
        }
#else
        unpack_values(type, blocks, m, &u);
        int32_t sums[QUANT_GROUPS] = {0};
        for (int k = 0; k < QUANT_GROUPS; k++)
            for (int j = 0, at = i + UNPACK_GROUP * k; j < UNPACK_GROUP; j++)
                sums[k] += u.s[UNPACK_GROUP * k + j] * x.q[at + j];
        for (int k = 0; k < QUANT_GROUPS; k++) {
            acc[k] = fmaf((float)sums[k], u.a[k] * x.dx[g + k], acc[k]);
            if (type_has_min(type)) acc[k] = fmaf(u.b[k], x.sx[g + k], acc[k]);
        }
#endif
    }
#if defined(QUANT_VNNI)
    return acc;
#elif defined(QUANT_AVX2)
    return hsum8(_mm256_add_ps(acc[0], acc[1]));
#else
    float sum = 0.0f;
    for (int k = 0; k < QUANT_GROUPS; k++) sum += acc[k];
    return sum;
#endif
}

#endif
