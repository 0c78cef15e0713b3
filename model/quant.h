// model/quant.h: llama.cpp's block types (docs/FORMAT.md, version 6) turned back into float32,
// one function per type, a block at a time: the one-token product, the many-token product's
// panels and the embedding lookup (model/matmul.h) all go through dequantize_blocks. The layouts
// are GGUF's, bit for bit; the values are gguf-py's (tools/attn/gguf_file.py), computed in
// float32 in the same order, up to the build's fused multiply-adds (-ffp-contract=fast may fuse
// a scale and an offset into one rounding, as llama.cpp's own C does).
#ifndef ATTN_MODEL_QUANT_H
#define ATTN_MODEL_QUANT_H

#include <stddef.h>
#include <stdint.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "header.h"

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

// The float16 at b, which need not be aligned (F16C's conversion where the machine has it: the
// same value, a NaN made quiet alike).
static inline float f16_at(const uint8_t *b) {
#if defined(__F16C__)
    return _cvtsh_ss((uint16_t)(b[0] | b[1] << 8));
#else
    return f16_to_float((uint16_t)(b[0] | b[1] << 8));
#endif
}

static inline uint32_t u32_at(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

#if defined(__AVX512F__) || defined(__AVX2__)
#define QUANT_VECTORS 1
// 16 bytes of values (signed or not) as floats, times dl, less ml: out[0..15] = dl * q - ml.
static inline void scale16(__m128i q, int is_signed, float dl, float ml, float *out) {
#if defined(__AVX512F__)
    __m512 v = _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(q) : _mm512_cvtepu8_epi32(q));
    _mm512_storeu_ps(out, _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dl), v), _mm512_set1_ps(ml)));
#else
    for (int k = 0; k < 2; k++, q = _mm_srli_si128(q, 8)) {
        __m256 v = _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(q) : _mm256_cvtepu8_epi32(q));
        _mm256_storeu_ps(out + 8 * k, _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(dl), v), _mm256_set1_ps(ml)));
    }
#endif
}

// Bits [shift, shift + width) of each of 16 bytes (width 1, 2 or 4).
static inline __m128i bits16(__m128i v, int shift, int width) {
    return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm_set1_epi8((char)((1 << width) - 1)));
}
#endif

// The 32-value types: a float16 scale d (and a minimum m for _1), then the values. Value j of
// 16 bytes of nibbles is byte j's low nibble for j < 16, byte j - 16's high nibble after;
// nibbles32 writes them as floats, 16 or 8 to a vector where the machine has them, and each
// type scales them in a loop the compiler vectorises.
static inline void nibbles32(const uint8_t *qs, float *out) {
#if defined(__AVX512F__)
    __m128i q = _mm_loadu_si128((const __m128i *)qs), low = _mm_set1_epi8(15);
    _mm512_storeu_ps(out, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, low))));
    _mm512_storeu_ps(out + 16, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), low))));
#elif defined(__AVX2__)
    __m128i q = _mm_loadu_si128((const __m128i *)qs), low = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(q, low), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low);
    _mm256_storeu_ps(out, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)));
    _mm256_storeu_ps(out + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))));
    _mm256_storeu_ps(out + 16, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)));
    _mm256_storeu_ps(out + 24, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))));
#else
    for (int j = 0; j < 16; j++) out[j] = (float)(qs[j] & 15), out[j + 16] = (float)(qs[j] >> 4);
#endif
}

static inline void dequantize_q4_0(const uint8_t *b, float *out) {
    float d = f16_at(b);
    nibbles32(b + 2, out);
    for (int j = 0; j < 32; j++) out[j] = d * (out[j] - 8.0f);
}

static inline void dequantize_q4_1(const uint8_t *b, float *out) {
    float d = f16_at(b), m = f16_at(b + 2);
    nibbles32(b + 4, out);
    for (int j = 0; j < 32; j++) out[j] = d * out[j] + m;
}

// Q5_0 and Q5_1 add a fifth bit to value j: bit j of a 32-bit word before the nibbles (adding
// 16 to the nibble's float is exact, as is the bias's subtraction). With vectors: bytes
// (value - 16 for Q5_0, a signed byte), then scaled.
static inline void dequantize_q5(const uint8_t *b, float *out, int one) {
    float d = f16_at(b), m = one ? f16_at(b + 2) : 0.0f;
    const uint8_t *high = b + (one ? 4 : 2), *qs = b + (one ? 8 : 6);
#if defined(QUANT_VECTORS)
    __m128i v = _mm_loadu_si128((const __m128i *)qs), bit = _mm_set1_epi64x((long long)0x8040201008040201ull);
    for (int half = 0; half < 2;
         half++) { // values 16 half .. 16 half + 15: their bits in high[2 half], high[2 half + 1]
        __m128i h = _mm_shuffle_epi8(_mm_cvtsi32_si128(high[2 * half] | high[2 * half + 1] << 8),
                                     _mm_set_epi64x(0x0101010101010101ll, 0));
        __m128i fifth = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(h, bit), bit), _mm_set1_epi8(16));
        __m128i q = _mm_or_si128(bits16(v, 4 * half, 4), fifth);
        if (one) scale16(q, 0, d, -m, out + 16 * half);
        else scale16(_mm_sub_epi8(q, _mm_set1_epi8(16)), 1, d, 0.0f, out + 16 * half);
    }
#else
    uint32_t bits = u32_at(high);
    nibbles32(qs, out);
    for (int j = 0; j < 32; j++) {
        float q = out[j] + (float)((bits >> j & 1) << 4);
        out[j] = one ? d * q + m : d * (q - 16.0f);
    }
#endif
}

static inline void dequantize_q5_0(const uint8_t *b, float *out) { dequantize_q5(b, out, 0); }
static inline void dequantize_q5_1(const uint8_t *b, float *out) { dequantize_q5(b, out, 1); }

static inline void dequantize_q8_0(const uint8_t *b, float *out) {
    float d = f16_at(b);
    for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)b[2 + j] * d;
}

// IQ4_NL: Q4_0's layout, each nibble an index into a fixed table of non-uniform levels.
static inline void dequantize_iq4_nl(const uint8_t *b, float *out) {
    static const int8_t levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    float d = f16_at(b);
#if defined(QUANT_VECTORS) // the table in a register, looked up 16 nibbles at a time
    __m128i table = _mm_loadu_si128((const __m128i *)levels), v = _mm_loadu_si128((const __m128i *)(b + 2));
    for (int half = 0; half < 2; half++)
        scale16(_mm_shuffle_epi8(table, bits16(v, 4 * half, 4)), 1, d, 0.0f, out + 16 * half);
#else
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)levels[b[2 + j] & 15];
        out[j + 16] = d * (float)levels[b[2 + j] >> 4];
    }
#endif
}

// The K types: 256 values in sub-blocks of 16 or 32, each with its own scale (and minimum).
// Each loops as ggml's reference dequantisers do, a sub-block's values in an inner loop of
// plain byte arithmetic that the compiler vectorises.
// Q2_K: 16 scale bytes (low nibble scale, high nibble minimum, per 16 values), 64 bytes of
// 2-bit values, d and dmin. Value 128 h + 32 s + l is bits 2s of byte 32 h + l.
static inline void dequantize_q2_k(const uint8_t *b, float *out) {
    float d = f16_at(b + 80), dmin = f16_at(b + 82);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int half = 0; half < 2; half++) {
                int sc = b[8 * h + 2 * s + half];
                float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
                const uint8_t *q = b + 16 + 32 * h + 16 * half;
                float *o = out + 128 * h + 32 * s + 16 * half;
                for (int l = 0; l < 16; l++) o[l] = dl * (float)(q[l] >> 2 * s & 3) - ml;
            }
}

// Q3_K: 32 bytes of high bits (value 32 k + l: bit k of byte l; a clear bit subtracts 4), 64
// bytes of 2-bit values (as Q2_K's), 12 bytes of sixteen 6-bit scales biased by 32, then d.
static inline void dequantize_q3_k(const uint8_t *b, float *out) {
    float d = f16_at(b + 108);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int half = 0; half < 2; half++) {
                int i = 8 * h + 2 * s + half, k = 4 * h + s; // the scale's index, the high bits' bit
                int low = b[96 + i % 8] >> 4 * (i / 8) & 15, high = b[104 + i % 4] >> 2 * (i / 4) & 3;
                float dl = d * ((float)(low | high << 4) - 32.0f);
                const uint8_t *q = b + 32 + 32 * h + 16 * half, *hm = b + 16 * half;
                float *o = out + 128 * h + 32 * s + 16 * half;
                for (int l = 0; l < 16; l++) o[l] = dl * (float)((q[l] >> 2 * s & 3) - ((hm[l] >> k & 1) ^ 1) * 4);
            }
}

// Q4_K's and Q5_K's 12 scale bytes: 8 six-bit scales and 8 six-bit minimums, one per 32 values.
static inline void k_scales(const uint8_t *s, float d, float dmin, float *dl, float *ml) {
    for (int i = 0; i < 8; i++) {
        int sc = i < 4 ? s[i] & 63 : (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
        int mn = i < 4 ? s[i + 4] & 63 : (s[i + 4] >> 4) | (s[i] >> 6) << 4;
        dl[i] = d * (float)sc, ml[i] = dmin * (float)mn;
    }
}

// Q4_K: d, dmin, the scales, then 128 bytes: sub-block 2c is the low nibbles of bytes 32c ..
// 32c + 31, sub-block 2c + 1 their high nibbles. Q5_K (fifth = 1): 32 bytes of fifth bits
// before the nibbles, sub-block i taking bit i.
static inline void dequantize_k4(const uint8_t *b, float *out, int fifth) {
    float dl[8], ml[8];
    k_scales(b + 4, f16_at(b), f16_at(b + 2), dl, ml);
    const uint8_t *qh = b + 16, *qs = b + (fifth ? 48 : 16);
#if defined(QUANT_VECTORS)
    for (int c = 0; c < 4; c++)
        for (int half = 0; half < 2; half++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(qs + 32 * c + 16 * half));
            __m128i lo = bits16(v, 0, 4), hi = bits16(v, 4, 4);
            if (fifth) {
                __m128i h = _mm_loadu_si128((const __m128i *)(qh + 16 * half));
                lo = _mm_or_si128(lo, _mm_slli_epi16(bits16(h, 2 * c, 1), 4));
                hi = _mm_or_si128(hi, _mm_slli_epi16(bits16(h, 2 * c + 1, 1), 4));
            }
            scale16(lo, 0, dl[2 * c], ml[2 * c], out + 64 * c + 16 * half);
            scale16(hi, 0, dl[2 * c + 1], ml[2 * c + 1], out + 64 * c + 32 + 16 * half);
        }
#else
    for (int c = 0; c < 4; c++) {
        const uint8_t *q = qs + 32 * c;
        float *o = out + 64 * c;
        for (int l = 0; l < 32; l++) {
            int lo = q[l] & 15, hi = q[l] >> 4;
            if (fifth) lo |= (qh[l] >> 2 * c & 1) << 4, hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
            o[l] = dl[2 * c] * (float)lo - ml[2 * c];
            o[l + 32] = dl[2 * c + 1] * (float)hi - ml[2 * c + 1];
        }
    }
#endif
}

static inline void dequantize_q4_k(const uint8_t *b, float *out) { dequantize_k4(b, out, 0); }
static inline void dequantize_q5_k(const uint8_t *b, float *out) { dequantize_k4(b, out, 1); }

// Q6_K: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales (per 16 values), then d.
// Value 128 h + 32 s + l: low bits from byte 64 h + 32 (s % 2) + l (its high nibble for s >= 2),
// high bits from byte 128 + 32 h + l, bits 2s; biased by 32.
static inline void dequantize_q6_k(const uint8_t *b, float *out) {
    float d = f16_at(b + 208);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int half = 0; half < 2; half++) {
                float dl = d * (float)(int8_t)b[192 + 8 * h + 2 * s + half];
                const uint8_t *ql = b + 64 * h + 32 * (s % 2) + 16 * half, *qh = b + 128 + 32 * h + 16 * half;
                float *o = out + 128 * h + 32 * s + 16 * half;
#if defined(QUANT_VECTORS)
                __m128i low = bits16(_mm_loadu_si128((const __m128i *)ql), 4 * (s / 2), 4);
                __m128i high = bits16(_mm_loadu_si128((const __m128i *)qh), 2 * s, 2);
                __m128i q = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
                scale16(q, 1, dl, 0.0f, o);
#else
                for (int l = 0; l < 16; l++)
                    o[l] = dl * (float)(((ql[l] >> 4 * (s / 2) & 15) | (qh[l] >> 2 * s & 3) << 4) - 32);
#endif
            }
}

// n blocks of a block type from b into out (n × the type's block values): a loop per type,
// so that each inlines its dequantiser.
__attribute__((always_inline)) static inline void dequantize_blocks(int type, const uint8_t *b, size_t n, float *out) {
    size_t bytes = (size_t)matrix_types[type].block_bytes, values = (size_t)matrix_types[type].block;
#define EACH_BLOCK(f)                                                                                                  \
    for (size_t i = 0; i < n; i++) f(b + i * bytes, out + i * values);                                                 \
    break
    switch (type) {
    case BLOCK_Q4_0: EACH_BLOCK(dequantize_q4_0);
    case BLOCK_Q4_1: EACH_BLOCK(dequantize_q4_1);
    case BLOCK_Q5_0: EACH_BLOCK(dequantize_q5_0);
    case BLOCK_Q5_1: EACH_BLOCK(dequantize_q5_1);
    case BLOCK_Q8_0: EACH_BLOCK(dequantize_q8_0);
    case BLOCK_Q2_K: EACH_BLOCK(dequantize_q2_k);
    case BLOCK_Q3_K: EACH_BLOCK(dequantize_q3_k);
    case BLOCK_Q4_K: EACH_BLOCK(dequantize_q4_k);
    case BLOCK_Q5_K: EACH_BLOCK(dequantize_q5_k);
    case BLOCK_Q6_K: EACH_BLOCK(dequantize_q6_k);
    case BLOCK_IQ4_NL: EACH_BLOCK(dequantize_iq4_nl);
    }
#undef EACH_BLOCK
}

#endif
