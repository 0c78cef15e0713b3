// model/quant.h: llama.cpp's block types (docs/FORMAT.md, version 6), read one block at a time
// into small signed integers and a scale and offset per group of 16 values: value j of a block
// is a[j / 16] * s[j] + b[j / 16]. That one unpacking per type serves every use: the weights
// as float32 (the embedding lookup, dequantize_rows), and the integer products of
// model/quant_dot.h (one token) and model/quant_panels.h (a prompt). The layouts are GGUF's,
// bit for bit; the float32 values are gguf-py's (tools/attn/gguf_file.py), computed in the
// same order, up to the build's fused multiply-adds (-ffp-contract=fast may fuse a scale and
// an offset into one rounding, as llama.cpp's own C does).
#ifndef ATTN_MODEL_QUANT_H
#define ATTN_MODEL_QUANT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "header.h"

// A one-token product streams each thread's rows from memory once. The hardware's prefetcher
// alone kept too few reads in flight for one core to overlap them with the integer products
// (Intel Xeon, x86-64-v3, one thread: Q4_0 rows at 6 GB/s where the core reads 11-13 and
// computes 7.6 in cache), so the kernels ask for the bytes PREFETCH_AHEAD on as they go:
// 4 KiB, about a microsecond of reading (docs/KERNELS.md). Always inlined: GCC takes a
// function of prefetches alone for one without effects, and drops the calls it does not inline.
#define PREFETCH_AHEAD 4096
__attribute__((always_inline)) static inline void prefetch_ahead(const void *p, size_t bytes) {
#if defined(__AVX2__) || defined(__AVX512F__)
    for (size_t c = 0; c < bytes; c += 64) _mm_prefetch((const char *)p + PREFETCH_AHEAD + c, _MM_HINT_T0);
#else
    (void)p, (void)bytes;
#endif
}

#if defined(__AVX2__)
// The sum of a vector's 8 lanes.
static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
#endif

// bfloat16 is float32's upper half.
static inline float bf16_to_float(uint16_t h) {
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)h << 16};
    return v.f;
}

// IEEE binary16: 5 exponent bits (bias 15) and 10 mantissa bits; the portable path and the
// tails of the vector ones (which use F16C's vcvtph2ps).
static inline float f16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023;
    union {
        uint32_t u;
        float f;
    } v;
    if (e == 31) v.u = sign | 0x7f800000u | m << 13 | (m ? 0x400000u : 0); // infinities; NaNs made quiet
    else if (e) v.u = sign | (e + 112) << 23 | m << 13;                    // normal: rebias 15 -> 127
    else v.f = (float)m * 0x1p-24f, v.u |= sign;                           // zero and subnormal: m * 2^-24
    return v.f;
}

// x rounded to the nearest float16, ties to even, as F16C's vcvtps2ph rounds it: half a step or
// more past float16's largest (65504) an infinity, a NaN a quiet NaN with its payload's top bits.
static inline uint16_t float_to_f16(float x) {
    union {
        float f;
        uint32_t u;
    } v = {.f = x};
    uint32_t sign = v.u >> 16 & 0x8000, a = v.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | (a >> 13 & 0x3ff));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000u) { // below 2^-14, a multiple of 2^-24: adding 0.5 rounds to that step
        v.u = a;
        v.f += 0.5f;
        return (uint16_t)(sign | (v.u - 0x3f000000u));
    }
    a -= 0x38000000u;           // exponent rebiased 127 -> 15
    a += 0xfff + (a >> 13 & 1); // the 13 dropped bits rounded, ties to even (a carry moves the exponent)
    return (uint16_t)(sign | a >> 13);
}

// x [n] rounded to float16 into h [n] (float_to_f16; vcvtps2ph where the machine has F16C).
static inline void floats_to_f16(uint16_t *h, const float *x, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; n - i >= 16; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
    for (; n - i >= 8; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; i++) h[i] = float_to_f16(x[i]);
}

// x [n] (n a multiple of 32) into n / 32 Q8_0 blocks at b, as llama.cpp's quantize_row_q8_0_ref
// makes them (its -ctk q8_0 cache): a block's scale d = max |x| / 127 stored as float16, and
// each value round(x / d) (halves away from zero) with the float32 d.
static inline void quantize_q8_0_blocks(uint8_t *b, const float *x, size_t n) {
    for (size_t i = 0; i < n; i += 32, b += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(x[i + j]) > amax ? fabsf(x[i + j]) : amax;
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = float_to_f16(d);
        b[0] = (uint8_t)h, b[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < 32; j++) { // a NaN (of a NaN or infinite input) must not reach the conversion
            float q = roundf(x[i + j] * id);
            b[2 + j] = (uint8_t)(int8_t)(q == q ? q : 0.0f);
        }
    }
}

// The float16 at b, which need not be aligned (F16C's conversion where the machine has it: the
// same value, a NaN made quiet alike).
static inline float f16_at(const uint8_t *b) {
#if defined(__F16C__)
    return _cvtsh_ss((uint16_t)(b[0] | b[1] << 8));
#else
    return f16_to_float((uint16_t)(b[0] | b[1] << 8));
#endif
}

// Up to 256 values of a row, unpacked: s (signed, |s| <= 128), and per group of 16 values a
// scale a and, for the types with a minimum (has_min in their row), an offset b: value j =
// a[j / 16] * s[j] + b[j / 16]. The other types leave b unwritten.
#define UNPACKED_VALUES 256
#define UNPACK_GROUP 16
typedef struct {
    int8_t s[UNPACKED_VALUES] __attribute__((aligned(64)));
    float a[UNPACKED_VALUES / UNPACK_GROUP] __attribute__((aligned(64)));
    float b[UNPACKED_VALUES / UNPACK_GROUP] __attribute__((aligned(64)));
} Unpacked;

// Each unpack_* reads one block at blk into s (the block's values), a and b (its groups'). The
// byte loops are plain so that the compiler vectorises them for the machine.

// The 32-value types: a float16 scale d (and a minimum m for _1), then the values. Value j of
// 16 bytes of nibbles is byte j's low nibble for j < 16, byte j - 16's high nibble after.
#if defined(__AVX2__)
// Bits [shift, shift + width) of each of 32 bytes.
static inline __m256i bits32(__m256i v, int shift, int width) {
    return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8((char)((1 << width) - 1)));
}
static inline __m256i load32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void store32(int8_t *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

// The 32 values of 16 bytes of nibbles, less bias, in one register.
static inline __m256i nibbles32_reg(const uint8_t *qs, int bias) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_sub_epi8(bits32(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), 0, 4), _mm256_set1_epi8((char)bias));
}
#endif

static inline void nibbles32(const uint8_t *qs, int8_t *s, int bias) {
#if defined(__AVX2__)
    store32(s, nibbles32_reg(qs, bias));
#else
    for (int j = 0; j < 16; j++) s[j] = (int8_t)((qs[j] & 15) - bias), s[j + 16] = (int8_t)((qs[j] >> 4) - bias);
#endif
}

// The 32-value types' values; their scales (and minimums) are read by scales32.
static inline void values_q4_0(const uint8_t *blk, int8_t *s) { nibbles32(blk + 2, s, 8); }
static inline void values_q4_1(const uint8_t *blk, int8_t *s) { nibbles32(blk + 4, s, 0); }

// Q5_0 and Q5_1 add a fifth bit to value j: bit j of a 32-bit word before the nibbles.
static inline uint32_t q5_bits(const uint8_t *blk, int one) {
    const uint8_t *high = blk + (one ? 4 : 2);
    return (uint32_t)high[0] | (uint32_t)high[1] << 8 | (uint32_t)high[2] << 16 | (uint32_t)high[3] << 24;
}
#if defined(__AVX2__) // bit j of the word, as 16 in byte j: each byte of the word spread over 8 bytes, then tested
static inline __m256i q5_values32(const uint8_t *blk, int one) {
    __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)q5_bits(blk, one)),
                            _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
    __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i sixteen = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
    return _mm256_add_epi8(nibbles32_reg(blk + (one ? 8 : 6), one ? 0 : 16), sixteen);
}
#endif

static inline void values_q5(const uint8_t *blk, int8_t *s, int one) {
#if defined(__AVX2__)
    store32(s, q5_values32(blk, one));
#else
    uint32_t bits = q5_bits(blk, one);
    nibbles32(blk + (one ? 8 : 6), s, one ? 0 : 16);
    for (int j = 0; j < 32; j++) s[j] = (int8_t)(s[j] + (int)((bits >> j & 1) << 4));
#endif
}

static inline void values_q5_0(const uint8_t *blk, int8_t *s) { values_q5(blk, s, 0); }
static inline void values_q5_1(const uint8_t *blk, int8_t *s) { values_q5(blk, s, 1); }
static inline void values_q8_0(const uint8_t *blk, int8_t *s) { memcpy(s, blk + 2, 32); }

// IQ4_NL: Q4_0's layout, each nibble an index into a fixed table of non-uniform levels.
static const int8_t iq4_nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
#if defined(__AVX2__) // the table in a register, looked up 32 nibbles at a time
static inline __m256i iq4_levels32(const uint8_t *qs) {
    __m128i table = _mm_loadu_si128((const __m128i *)iq4_nl_levels);
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles32_reg(qs, 0));
}
#endif

// The 32 levels of 16 bytes of nibbles (IQ4_NL's and IQ4_XS's sub-blocks).
static inline void iq4_levels(const uint8_t *qs, int8_t *s) {
#if defined(__AVX2__)
    store32(s, iq4_levels32(qs));
#else
    for (int j = 0; j < 16; j++) s[j] = iq4_nl_levels[qs[j] & 15], s[j + 16] = iq4_nl_levels[qs[j] >> 4];
#endif
}

static inline void values_iq4_nl(const uint8_t *blk, int8_t *s) { iq4_levels(blk + 2, s); }

// out[2i] = out[2i + 1] = the float16 at byte at of block i, for nb blocks bytes apart: a
// 32-value type's scales (at 0) or minimums (at 2) as its two groups' a or b. Eight at once
// in a vector where the machine has AVX-512.
static inline uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
#if defined(__AVX2__) && defined(__F16C__)
// The 8 float16 at p, p + bytes, ... as float32: the one at p + bytes k is word k of the 16
// bytes at p + (bytes - 2) k, so eight loads and a tree of blends gather them, where eight
// 16-bit inserts each took a shuffle.
static inline __m256 f16x8(const uint8_t *p, int bytes) {
    __m128i v[8];
    for (int k = 0; k < 8; k++) v[k] = _mm_loadu_si128((const __m128i *)(p + (size_t)(bytes - 2) * k));
    __m128i low = _mm_blend_epi32(_mm_blend_epi16(v[0], v[1], 0x02), _mm_blend_epi16(v[2], v[3], 0x08), 0x2);
    __m128i high = _mm_blend_epi32(_mm_blend_epi16(v[4], v[5], 0x20), _mm_blend_epi16(v[6], v[7], 0x80), 0x8);
    return _mm256_cvtph_ps(_mm_blend_epi32(low, high, 0xc));
}
#endif
static inline void scales32(const uint8_t *blk, int bytes, int nb, int at, float *out) {
#if defined(__AVX512F__)
    if (nb == 8) {
        __m512 d = _mm512_castps256_ps512(f16x8(blk + at, bytes));
        _mm512_storeu_ps(out,
                         _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), d));
        return;
    }
#elif defined(__AVX2__) && defined(__F16C__)
    if (nb == 8) {
        __m256 d = f16x8(blk + at, bytes);
        _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(d, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)));
        _mm256_storeu_ps(out + 8, _mm256_permutevar8x32_ps(d, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)));
        return;
    }
#endif
    for (int i = 0; i < nb; i++) out[2 * i] = out[2 * i + 1] = f16_at(blk + (size_t)i * bytes + at);
}

// out[g] = d × v[g / per] for the 16 groups of a block: v, unsigned bytes (signed for Q6_K),
// one per group (per 1) or per two groups (per 2, sub-blocks of 32).
static inline void group_scales_of(const uint8_t *v, int per, int is_signed, float d, float *out) {
#if defined(__AVX512F__)
    __m128i bytes = per == 2 ? _mm_loadl_epi64((const __m128i *)v) : _mm_loadu_si128((const __m128i *)v);
    if (per == 2) bytes = _mm_unpacklo_epi8(bytes, bytes);
    __m512i ints = is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(ints)));
#elif defined(__AVX2__)
    __m128i bytes = per == 2 ? _mm_loadl_epi64((const __m128i *)v) : _mm_loadu_si128((const __m128i *)v);
    if (per == 2) bytes = _mm_unpacklo_epi8(bytes, bytes);
    for (int h = 0; h < 2; h++) {
        __m128i eight = h ? _mm_unpackhi_epi64(bytes, bytes) : bytes;
        __m256i ints = is_signed ? _mm256_cvtepi8_epi32(eight) : _mm256_cvtepu8_epi32(eight);
        _mm256_storeu_ps(out + 8 * h, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(ints)));
    }
#else
    for (int g = 0; g < 16; g++) out[g] = d * (float)(is_signed ? (int8_t)v[g / per] : v[g / per]);
#endif
}

// The K types: 256 values in sub-blocks of 16 or 32, each with its own scale (and minimum).
// Q2_K: 16 scale bytes (low nibble scale, high nibble minimum, per 16 values), 64 bytes of
// 2-bit values, d and dmin. Value 128 h + 32 k + l is bits 2k of byte 32 h + l.
#if defined(__AVX2__)
static inline __m256i q2_k_values32(const uint8_t *blk, int h, int k) {
    return bits32(load32(blk + 16 + 32 * h), 2 * k, 2);
}
#endif

static inline void q2_k_scales(const uint8_t *blk, float *a, float *b) {
    float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
    uint8_t scale[16], min[16];
#if defined(__AVX2__)
    __m128i v = _mm_loadu_si128((const __m128i *)blk), nibble = _mm_set1_epi8(15);
    _mm_storeu_si128((__m128i *)scale, _mm_and_si128(v, nibble));
    _mm_storeu_si128((__m128i *)min, _mm_and_si128(_mm_srli_epi16(v, 4), nibble));
#else
    for (int g = 0; g < 16; g++) scale[g] = blk[g] & 15, min[g] = blk[g] >> 4;
#endif
    group_scales_of(scale, 1, 0, d, a);
    group_scales_of(min, 1, 0, -dmin, b);
}

static inline void unpack_q2_k(const uint8_t *blk, int8_t *s, float *a, float *b) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
#if defined(__AVX2__)
            store32(s + 128 * h + 32 * k, q2_k_values32(blk, h, k));
#else
            for (int l = 0; l < 32; l++) s[128 * h + 32 * k + l] = (int8_t)(blk[16 + 32 * h + l] >> 2 * k & 3);
#endif
    q2_k_scales(blk, a, b);
}

// Q3_K: 32 bytes of high bits (value 32 k + l: bit k of byte l; a clear bit subtracts 4), 64
// bytes of 2-bit values (as Q2_K's), 12 bytes of sixteen 6-bit scales biased by 32, then d.
#if defined(__AVX2__) // (low | high << 2) - 4
static inline __m256i q3_k_values32(const uint8_t *blk, int h, int k) {
    return _mm256_sub_epi8(_mm256_or_si256(bits32(load32(blk + 32 + 32 * h), 2 * k, 2),
                                           _mm256_slli_epi16(bits32(load32(blk), 4 * h + k, 1), 2)),
                           _mm256_set1_epi8(4));
}
#endif

static inline void q3_k_scales(const uint8_t *blk, float *a) {
    float d = f16_at(blk + 108);
    uint8_t scale[16]; // signed bytes: 6 bits less 32
#if defined(__AVX2__)  // the low nibbles of 8 bytes then their high ones; 2 bits of word 104 shifted per 4 groups
    __m128i v = _mm_loadl_epi64((const __m128i *)(blk + 96)), nibble = _mm_set1_epi8(15);
    __m128i low = _mm_unpacklo_epi64(_mm_and_si128(v, nibble), _mm_and_si128(_mm_srli_epi16(v, 4), nibble));
    uint32_t w;
    memcpy(&w, blk + 104, 4);
    __m128i high = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)w), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    _mm_storeu_si128((__m128i *)scale, _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32)));
#else
    for (int g = 0; g < 16; g++)
        scale[g] = (uint8_t)(((blk[96 + g % 8] >> 4 * (g / 8) & 15) | (blk[104 + g % 4] >> 2 * (g / 4) & 3) << 4) - 32);
#endif
    group_scales_of(scale, 1, 1, d, a);
}

static inline void unpack_q3_k(const uint8_t *blk, int8_t *s, float *a, float *b) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
#if defined(__AVX2__)
            store32(s + 128 * h + 32 * k, q3_k_values32(blk, h, k));
#else
            for (int l = 0; l < 32; l++)
                s[128 * h + 32 * k + l] =
                    (int8_t)((blk[32 + 32 * h + l] >> 2 * k & 3) - ((blk[l] >> (4 * h + k) & 1) ^ 1) * 4);
#endif
    q3_k_scales(blk, a);
    (void)b;
}

// Q4_K's and Q5_K's scales and minimums as their groups' a and b: d and dmin, then 12 bytes
// of 8 six-bit scales and 8 six-bit minimums, one of each per 32 values, taken 4 at a time
// from the three words the 12 bytes make.
#if defined(__AVX512F__)
// The 8 scales times d and the 8 minimums times -dmin, as 16 floats in one register: the 12
// bytes' words [w0, w2, w1, w2] give the low bits (w2's high nibbles shifted down in the last
// lane), [w0, w0, w1, w1] shifted by 2 the two high bits of the second four.
static inline __m512 k_scale_vector(const uint8_t *blk) {
    __m128i v = _mm_loadu_si128((const __m128i *)(blk + 4)); // the 12 bytes and 4 of the values, unused
    __m128i low = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0x98), _mm_setr_epi32(0, 0, 0, 4)),
                                _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i high =
        _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, 0x50), 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_or_si128(low, high)));
    return _mm512_mul_ps(f, _mm512_insertf32x8(_mm512_set1_ps(f16_at(blk)), _mm256_set1_ps(-f16_at(blk + 2)), 1));
}
#endif

// The 8 six-bit scales, then the 8 six-bit minimums, as bytes.
static inline void k_scale_bytes(const uint8_t *blk, uint8_t bytes[16]) {
    uint32_t w[3], six[4];
    memcpy(w, blk + 4, 12);
    six[0] = w[0] & 0x3f3f3f3fu, six[2] = w[1] & 0x3f3f3f3fu;
    six[1] = (w[2] & 0x0f0f0f0fu) | (w[0] >> 6 & 0x03030303u) << 4;
    six[3] = (w[2] >> 4 & 0x0f0f0f0fu) | (w[1] >> 6 & 0x03030303u) << 4;
    memcpy(bytes, six, 16);
}

static inline void k_scales(const uint8_t *blk, float *a, float *b) {
#if defined(__AVX512F__) // each of the 8 twice, for the two groups of its 32 values
    __m512 f = k_scale_vector(blk);
    _mm512_storeu_ps(a, _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), f));
    _mm512_storeu_ps(
        b, _mm512_permutexvar_ps(_mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15), f));
#else
    uint8_t bytes[16];
    k_scale_bytes(blk, bytes);
    group_scales_of(bytes, 2, 0, f16_at(blk), a);
    group_scales_of(bytes + 8, 2, 0, -f16_at(blk + 2), b);
#endif
}

// Q4_K: d, dmin, 12 bytes of 8 six-bit scales and 8 six-bit minimums (one per 32 values),
// then 128 bytes: sub-block 2c is the low nibbles of bytes 32c .. 32c + 31, sub-block 2c + 1
// their high nibbles. Q5_K (fifth = 1): 32 bytes of fifth bits before the nibbles, sub-block
// i taking bit i.
#if defined(__AVX2__)
// Sub-block i's 32 values (the low nibbles of bytes 32 (i / 2) .. for even i, high for odd).
static inline __m256i k4_values32(const uint8_t *blk, int i, int fifth) {
    const uint8_t *qh = blk + 16, *qs = blk + (fifth ? 48 : 16);
    __m256i v = bits32(load32(qs + 32 * (i / 2)), 4 * (i % 2), 4);
    return fifth ? _mm256_or_si256(v, _mm256_slli_epi16(bits32(load32(qh), i, 1), 4)) : v;
}
#endif

static inline void unpack_k4(const uint8_t *blk, int8_t *s, float *a, float *b, int fifth) {
    k_scales(blk, a, b);
    for (int c = 0; c < 4; c++) {
#if defined(__AVX2__)
        store32(s + 64 * c, k4_values32(blk, 2 * c, fifth)),
            store32(s + 64 * c + 32, k4_values32(blk, 2 * c + 1, fifth));
#else
        const uint8_t *qh = blk + 16, *qs = blk + (fifth ? 48 : 16);
        for (int l = 0; l < 32; l++) {
            int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
            if (fifth) lo |= (qh[l] >> 2 * c & 1) << 4, hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
            s[64 * c + l] = (int8_t)lo, s[64 * c + 32 + l] = (int8_t)hi;
        }
#endif
    }
}

static inline void unpack_q4_k(const uint8_t *blk, int8_t *s, float *a, float *b) { unpack_k4(blk, s, a, b, 0); }
static inline void unpack_q5_k(const uint8_t *blk, int8_t *s, float *a, float *b) { unpack_k4(blk, s, a, b, 1); }

// Q6_K: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales (per 16 values), then d.
// Value 128 h + 32 k + l: low bits from byte 64 h + 32 (k % 2) + l (its high nibble for
// k >= 2), high bits from byte 128 + 32 h + l, bits 2k; biased by 32.
#if defined(__AVX2__)
// Values 128 h + 32 k .. + 31 of a Q6_K block.
static inline __m256i q6_k_values32(const uint8_t *blk, int h, int k) {
    return _mm256_sub_epi8(_mm256_or_si256(bits32(load32(blk + 64 * h + 32 * (k % 2)), 4 * (k / 2), 4),
                                           _mm256_slli_epi16(bits32(load32(blk + 128 + 32 * h), 2 * k, 2), 4)),
                           _mm256_set1_epi8(32));
}
#endif

static inline void unpack_q6_k(const uint8_t *blk, int8_t *s, float *a, float *b) {
    float d = f16_at(blk + 208);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
#if defined(__AVX2__)
            store32(s + 128 * h + 32 * k, q6_k_values32(blk, h, k));
#else
            for (int l = 0; l < 32; l++) {
                int low = blk[64 * h + 32 * (k % 2) + l] >> 4 * (k / 2) & 15, high = blk[128 + 32 * h + l] >> 2 * k & 3;
                s[128 * h + 32 * k + l] = (int8_t)((low | high << 4) - 32);
            }
#endif
    group_scales_of(blk + 192, 1, 1, d, a);
    (void)b;
}

// IQ4_XS: IQ4_NL's levels in blocks of 256: d, a 16-bit word of the 8 sub-blocks' high scale
// bits (2 each), 4 bytes of their low nibbles (sub-block 2i the low one of byte i), then the 8
// sub-blocks of 32 as IQ4_NL's 16 bytes of nibbles. Sub-block i's values are d (ls_i - 32) times
// its levels, ls_i its six scale bits.
static inline void iq4_xs_scale_bytes(const uint8_t *blk, int8_t six[8]) {
    unsigned high = u16_at(blk + 2);
    for (int i = 0; i < 8; i++)
        six[i] = (int8_t)(((blk[4 + i / 2] >> 4 * (i % 2) & 15) | (high >> 2 * i & 3) << 4) - 32);
}

static inline void iq4_xs_scales(const uint8_t *blk, float *a, float *b) {
    int8_t six[8];
    iq4_xs_scale_bytes(blk, six);
    group_scales_of((const uint8_t *)six, 2, 1, f16_at(blk), a);
    (void)b;
}

static inline void unpack_iq4_xs(const uint8_t *blk, int8_t *s, float *a, float *b) {
    for (int i = 0; i < 8; i++) iq4_levels(blk + 8 + 16 * i, s + 32 * i);
    iq4_xs_scales(blk, a, b);
}

// ----------------------------------------------------------------------------
// The rows of the block types' table: for each type, its values 32 at a time as a register of
// signed bytes (AVX2: a whole chunk without the trip through Unpacked's bytes), and its chunk's
// 16 groups' scales and offsets as unpack_values writes them.
#if defined(__AVX2__)
static inline __m256i values32_q4_0(const uint8_t *blk, int j) { return nibbles32_reg(blk + 18 * j + 2, 8); }
static inline __m256i values32_q4_1(const uint8_t *blk, int j) { return nibbles32_reg(blk + 20 * j + 4, 0); }
static inline __m256i values32_q5_0(const uint8_t *blk, int j) { return q5_values32(blk + 22 * j, 0); }
static inline __m256i values32_q5_1(const uint8_t *blk, int j) { return q5_values32(blk + 24 * j, 1); }
static inline __m256i values32_q8_0(const uint8_t *blk, int j) { return load32(blk + 34 * j + 2); }
static inline __m256i values32_iq4_nl(const uint8_t *blk, int j) { return iq4_levels32(blk + 18 * j + 2); }
static inline __m256i values32_iq4_xs(const uint8_t *blk, int j) { return iq4_levels32(blk + 8 + 16 * j); }
static inline __m256i values32_q2_k(const uint8_t *blk, int j) { return q2_k_values32(blk, j / 4, j % 4); }
static inline __m256i values32_q3_k(const uint8_t *blk, int j) { return q3_k_values32(blk, j / 4, j % 4); }
static inline __m256i values32_q4_k(const uint8_t *blk, int j) { return k4_values32(blk, j, 0); }
static inline __m256i values32_q5_k(const uint8_t *blk, int j) { return k4_values32(blk, j, 1); }
static inline __m256i values32_q6_k(const uint8_t *blk, int j) { return q6_k_values32(blk, j / 4, j % 4); }
#endif

// A chunk of 8 blocks of 32 values: its scales (at 0) and minimums (at 2, for _1).
#define SCALES32(name, bytes, min)                                                                                     \
    static inline void scales_##name(const uint8_t *blk, float *a, float *b) {                                         \
        scales32(blk, bytes, 8, 0, a);                                                                                 \
        if (min) scales32(blk, bytes, 8, 2, b);                                                                        \
    }
SCALES32(q4_0, 18, 0)
SCALES32(q4_1, 20, 1)
SCALES32(q5_0, 22, 0)
SCALES32(q5_1, 24, 1)
SCALES32(q8_0, 34, 0)
SCALES32(iq4_nl, 18, 0)
#undef SCALES32
static inline void scales_q3_k(const uint8_t *blk, float *a, float *b) { q3_k_scales(blk, a), (void)b; }
static inline void scales_q6_k(const uint8_t *blk, float *a, float *b) {
    group_scales_of(blk + 192, 1, 1, f16_at(blk + 208), a), (void)b;
}

// ----------------------------------------------------------------------------
// The block types' table: one row per type, with what every product needs of it (its name and
// geometry are model/header.h's BLOCK_TYPE_ROWS). The table is a static constant, so where a
// kernel is inlined for a constant type GCC calls the row's functions directly and inlines
// them: a row costs nothing at run time. Adding a type is its row here, its functions above,
// and its row in BLOCK_TYPE_ROWS.
//   values   a 32-value block's values into s (its scales are scales32's); NULL for the 256-value
//            types (the K types and IQ4_XS)
//   unpack   a 256-value block's values, and its 16 groups' scale a and offset b
//   scales   a whole chunk's 16 groups' a and b
//   values32 (AVX2) values 32 j .. 32 j + 31 of a chunk, as signed bytes
//   has_min  value = a s + b; the other types' b is zero and never added, so that a zero weight
//            keeps the sign gguf-py gives it
//   per16    whether the scales come per 16 values (the others' per 32)
//   ordered  whether its one-token product has its own order where the machine has AVX-512
//            VNNI and VBMI (model/quant_order.h: the input laid out to match the blocks)
typedef struct {
    void (*values)(const uint8_t *blk, int8_t *s);
    void (*unpack)(const uint8_t *blk, int8_t *s, float *a, float *b);
    void (*scales)(const uint8_t *blk, float *a, float *b);
#if defined(__AVX2__)
    __m256i (*values32)(const uint8_t *blk, int j);
#define VALUES32(f) f,
#else
#define VALUES32(f)
#endif
    int has_min, per16, ordered;
} BlockKernels;

static const BlockKernels block_kernels[MATRIX_TYPES] = {
    [BLOCK_Q4_0] = {values_q4_0, NULL, scales_q4_0, VALUES32(values32_q4_0) 0, 0, 1},
    [BLOCK_Q4_1] = {values_q4_1, NULL, scales_q4_1, VALUES32(values32_q4_1) 1, 0, 1},
    [BLOCK_Q5_0] = {values_q5_0, NULL, scales_q5_0, VALUES32(values32_q5_0) 0, 0, 1},
    [BLOCK_Q5_1] = {values_q5_1, NULL, scales_q5_1, VALUES32(values32_q5_1) 1, 0, 1},
    [BLOCK_Q8_0] = {values_q8_0, NULL, scales_q8_0, VALUES32(values32_q8_0) 0, 0, 1},
    [BLOCK_Q2_K] = {NULL, unpack_q2_k, q2_k_scales, VALUES32(values32_q2_k) 1, 1, 0},
    [BLOCK_Q3_K] = {NULL, unpack_q3_k, scales_q3_k, VALUES32(values32_q3_k) 0, 1, 0},
    [BLOCK_Q4_K] = {NULL, unpack_q4_k, k_scales, VALUES32(values32_q4_k) 1, 0, 1},
    [BLOCK_Q5_K] = {NULL, unpack_q5_k, k_scales, VALUES32(values32_q5_k) 1, 0, 0},
    [BLOCK_Q6_K] = {NULL, unpack_q6_k, scales_q6_k, VALUES32(values32_q6_k) 0, 1, 1},
    [BLOCK_IQ4_NL] = {values_iq4_nl, NULL, scales_iq4_nl, VALUES32(values32_iq4_nl) 0, 0, 1},
    [BLOCK_IQ4_XS] = {NULL, unpack_iq4_xs, iq4_xs_scales, VALUES32(values32_iq4_xs) 0, 0, 0},
};
#undef VALUES32

static inline int type_has_min(int type) { return block_kernels[type].has_min; }

// The blocks holding values [0, n) of a run of blocks (n a multiple of the type's block, at
// most UNPACKED_VALUES) into u; the groups past n are zeros.
__attribute__((always_inline)) static inline void unpack_values(int type, const uint8_t *blk, int n, Unpacked *u) {
    const BlockKernels *k = &block_kernels[type];
    int block = matrix_types[type].block, bytes = matrix_types[type].block_bytes;
    if (k->unpack)
        for (int i = 0; i < n / block; i++)
            k->unpack(blk + (size_t)i * bytes, u->s + i * block, u->a + i * block / UNPACK_GROUP,
                      u->b + i * block / UNPACK_GROUP);
    else {
        for (int i = 0; i < n / 32; i++) k->values(blk + (size_t)i * bytes, u->s + 32 * i);
        scales32(blk, bytes, n / 32, 0, u->a);
        if (k->has_min) scales32(blk, bytes, n / 32, 2, u->b);
    }
    if (n < UNPACKED_VALUES) {
        memset(u->s + n, 0, (size_t)(UNPACKED_VALUES - n));
        for (int g = n / UNPACK_GROUP; g < UNPACKED_VALUES / UNPACK_GROUP; g++) u->a[g] = u->b[g] = 0.0f;
    }
}

// n blocks of a block type from blk into out (n × the type's block values) as float32.
static inline void dequantize_blocks(int type, const uint8_t *blk, size_t n, float *out) {
    size_t values = n * (size_t)matrix_types[type].block;
    int min = type_has_min(type);
    Unpacked u;
    for (size_t i = 0; i < values; i += UNPACKED_VALUES) {
        int m = values - i < UNPACKED_VALUES ? (int)(values - i) : UNPACKED_VALUES;
        unpack_values(type, blk + i / (size_t)matrix_types[type].block * (size_t)matrix_types[type].block_bytes, m, &u);
        for (int j = 0; j < m; j++)
            out[i + j] = min ? u.a[j / UNPACK_GROUP] * (float)u.s[j] + u.b[j / UNPACK_GROUP]
                             : u.a[j / UNPACK_GROUP] * (float)u.s[j];
    }
}

#endif
