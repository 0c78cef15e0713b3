// model/widen.h: weights stored as float32, bfloat16, float16, Q8_0 or a llama.cpp block type
// read as the float32 values a float32 run would use: an element, 16 or 8 in registers (the
// products' loads), whole rows (a prompt's panels, --compute bf16), and a whole model
// (./train --init from a 16-bit file, the tests' float32 twins of a model). Widening the
// 16-bit types is exact, as every value of either is a float32 one.
#ifndef ATTN_MODEL_WIDEN_H
#define ATTN_MODEL_WIDEN_H

#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "file.h"
#include "quant.h"

// Element i of a row of float32, bfloat16, float16 (type: WEIGHTS_*) or of a run of Q8_0 blocks
// (BLOCK_Q8_0: the KV cache's --kv-cache q8_0, w at a block's start) as float32.
static inline float widen1(const void *w, size_t i, int type) {
    if (type == BLOCK_Q8_0) {
        const uint8_t *b = (const uint8_t *)w + i / 32 * 34;
        return (float)(int8_t)b[2 + i % 32] * f16_at(b);
    }
    if (type == WEIGHTS_BF16) return bf16_to_float(((const uint16_t *)w)[i]);
    if (type == WEIGHTS_F16) return f16_to_float(((const uint16_t *)w)[i]);
    return ((const float *)w)[i];
}

// Elements i .. i+15 (AVX-512) or i .. i+7 (AVX2) widened in registers: bfloat16 shifted into
// float32's upper half, float16 converted by vcvtph2ps, float32 loaded as it is, Q8_0's int8
// values times their block's scale (i a multiple of 16, or 8: the elements lie in one block).
#if defined(__AVX512F__)
// 16 int8 values from q as float32: Q8_0's weights before their group's scale.
static inline __m512 int8x16_to_float(const int8_t *q) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q)));
}

static inline __m512 widen16(const void *w, size_t i, int type) {
    if (type == WEIGHTS_F32) return _mm512_loadu_ps((const float *)w + i);
    if (type == BLOCK_Q8_0) {
        const uint8_t *b = (const uint8_t *)w + i / 32 * 34;
        return _mm512_mul_ps(int8x16_to_float((const int8_t *)b + 2 + i % 32), _mm512_set1_ps(f16_at(b)));
    }
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i));
    if (type == WEIGHTS_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#elif defined(__AVX2__) && defined(__FMA__)
// 8 int8 values from q as float32: Q8_0's weights before their block's scale.
static inline __m256 int8x8_to_float(const int8_t *q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

static inline __m256 widen8(const void *w, size_t i, int type) {
    if (type == WEIGHTS_F32) return _mm256_loadu_ps((const float *)w + i);
    if (type == BLOCK_Q8_0) {
        const uint8_t *b = (const uint8_t *)w + i / 32 * 34;
        return _mm256_mul_ps(int8x8_to_float((const int8_t *)b + 2 + i % 32), _mm256_set1_ps(f16_at(b)));
    }
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (type == WEIGHTS_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#if defined(__F16C__)
    return _mm256_cvtph_ps(h);
#else
    float f[8];
    for (int k = 0; k < 8; k++) f[k] = f16_to_float(((const uint16_t *)w)[i + k]);
    return _mm256_loadu_ps(f);
#endif
}

// Elements i .. i + 15 (i a multiple of 16) as two of widen8's registers: a Q8_0 block's
// float16 scale is widened once for the 16 values, which lie in one block (widen8 alone
// widened it for each 8: one-token steps at depth 8,000 with --kv-cache q8_0 ran 51 against
// 65 tok/s, docs/KERNELS.md).
static inline void widen8x2(__m256 out[2], const void *w, size_t i, int type) {
    if (type == BLOCK_Q8_0) {
        const uint8_t *b = (const uint8_t *)w + i / 32 * 34;
        __m256 d = _mm256_set1_ps(f16_at(b));
        out[0] = _mm256_mul_ps(int8x8_to_float((const int8_t *)b + 2 + i % 32), d);
        out[1] = _mm256_mul_ps(int8x8_to_float((const int8_t *)b + 10 + i % 32), d);
        return;
    }
    out[0] = widen8(w, i, type), out[1] = widen8(w, i + 8, type);
}
#endif

// Rows [r0, r1) of a matrix with n_in columns stored as m->type says, as float32, into out
// [r1 - r0, n_in]: exactly the weights a float32 run would use, W = q * scale for Q8_0, each
// 16-bit value widened for bfloat16 and float16, a block type's blocks dequantised.
static inline void dequantize_rows(float *out, const QMat *m, int n_in, size_t r0, size_t r1) {
    if (is_block_type(m->type)) { // the rows are contiguous: one run of blocks
        dequantize_blocks(m->type, m->blocks + r0 * row_bytes(m->type, n_in),
                          (r1 - r0) * n_in / matrix_types[m->type].block, out);
        return;
    }
    if (m->type == WEIGHTS_Q8_0) {
        size_t groups = (size_t)n_in / m->gs;
        for (size_t r = r0; r < r1; r++) {
            const int8_t *q = m->q + r * n_in;
            const float *sc = m->s + r * groups;
            float *o = out + (r - r0) * n_in;
            for (size_t g = 0; g < groups; g++) // a scale per group: the inner loop vectorises
                for (int i = 0; i < m->gs; i++) o[g * m->gs + i] = (float)q[g * m->gs + i] * sc[g];
        }
        return;
    }
    // the rows are contiguous: one run of (r1 - r0) * n_in values
    const uint16_t *h = m->half + r0 * n_in;
    size_t n = (r1 - r0) * n_in, i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, widen16(h, i, m->type));
#elif defined(__AVX2__) && defined(__FMA__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, widen8(h, i, m->type));
#endif
    for (; i < n; i++) out[i] = widen1(h, i, m->type);
}

// A whole model's weights as float32 into to, laid out as carve_weights lays out c with
// weight_type WEIGHTS_F32 (to: carve_weights of that config bytes; from_block: the weights
// block of from): the matrices widened or dequantised, every other tensor copied. The two
// layouts list the same tensors in the same order and differ only in the matrices, so what
// lies between two matrices is copied as one run of bytes.
typedef struct {
    const char *from;
    char *to;
} WidenCursor;

static inline void widen_matrix(WidenCursor *at, const QMat *m, size_t rows, int cols) {
    const char *start = m->type == WEIGHTS_Q8_0  ? (const char *)m->q
                        : is_block_type(m->type) ? (const char *)m->blocks
                                                 : (const char *)m->half;
    if (!start) return; // absent (w3 without a gate, the classifier when tied), or float32: copied as it lies
    size_t n = rows * cols, floats = align_up(n * sizeof(float));
    memcpy(at->to, at->from, (size_t)(start - at->from));
    at->to += start - at->from;
    dequantize_rows((float *)at->to, m, cols, 0, rows);
    memset(at->to + n * sizeof(float), 0, floats - n * sizeof(float));
    at->to += floats;
    at->from = start + (m->type == WEIGHTS_Q8_0 ? align_up(n) + align_up(n / m->gs * sizeof(float))
                                                : align_up(rows * row_bytes(m->type, cols)));
}

static inline void dequantize_weights(const Config *c, const Weights *from, const void *from_block, float *to) {
    size_t d = c->dim, q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t h = c->hidden_dim, rows = ffn_rows(c), experts = rows / h;
    WidenCursor at = {from_block, (char *)to};
    widen_matrix(&at, &from->qtok_embedding, c->vocab_size, c->dim);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *L = &from->layers[l];
        widen_matrix(&at, &L->qwq, q, d);
        widen_matrix(&at, &L->qwk, kv, d);
        widen_matrix(&at, &L->qwv, kv, d);
        widen_matrix(&at, &L->qwo, d, q);
        widen_matrix(&at, &L->qw1, rows, d);
        widen_matrix(&at, &L->qw3, rows, d);
        widen_matrix(&at, &L->qw2, experts * d, h);
        widen_matrix(&at, &L->qshared_w1, c->shared_dim, d);
        widen_matrix(&at, &L->qshared_w3, c->shared_dim, d);
        widen_matrix(&at, &L->qshared_w2, d, c->shared_dim);
    }
    if (!c->tied_classifier) widen_matrix(&at, &from->qclassifier, c->vocab_size, c->dim);
    memcpy(at.to, at.from, (size_t)((const char *)from_block + carve_weights(c, NULL, NULL) - at.from));
}

#endif
