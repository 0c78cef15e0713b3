// model/matmul.h: the linear layers' products, out = x · Wᵀ + b, the nn.Linear convention,
// for float32 and Q8_0 weights, and their backward. One kernel serves a prompt (many rows:
// sgemm), a one-token step (one row: a dot product per output, streaming the weights) and
// training. It knows the weights only as matrices, never as layers or a file.
#ifndef ATTN_MODEL_MATMUL_H
#define ATTN_MODEL_MATMUL_H

#include <stdint.h>
#include <string.h>
#include <cblas.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#include "file.h"
#include "threads.h"

// One row of W times x, for a one-token step: it is bound by reading W once from memory, and
// this loop, split across threads by rows, streams it faster than OpenBLAS's sgemv here
// (bench/matvec.c measures both).
static inline float dot(const float *restrict a, const float *restrict b, int n) {
    int i = 0;
    float s = 0.0f;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    s = _mm_cvtss_f32(h);
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
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
                p0 =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))),
                                    _mm512_loadu_ps(x + i), p0);
                p1 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i + 16)))),
                    _mm512_loadu_ps(x + i + 16), p1);
            }
            if (i < g + gs)
                p0 =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))),
                                    _mm512_loadu_ps(x + i), p0);
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
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        s = _mm_cvtss_f32(h);
    }
#endif
    for (; g < n; g += gs) { // other group sizes, and the portable build
        float p = 0.0f;
        for (int i = g; i < g + gs; i++) p += (float)q[i] * x[i];
        s += p * scale[g / gs];
    }
    return s;
}

// Rows [r0, r1) of a Q8_0 matrix with n_in columns as float32, into out: exactly the float
// weights W = q * scale.
static inline void dequantize_rows(float *out, const QMat *m, int n_in, size_t r0, size_t r1) {
    size_t groups = (size_t)n_in / m->gs;
    for (size_t r = r0; r < r1; r++) {
        const int8_t *q = m->q + r * n_in;
        const float *sc = m->s + r * groups;
        float *o = out + (r - r0) * n_in;
        for (size_t g = 0; g < groups; g++) // a scale per group: the inner loop vectorises
            for (int i = 0; i < m->gs; i++) o[g * m->gs + i] = (float)q[g * m->gs + i] * sc[g];
    }
}

// The chunk of a Q8_0 matrix a prompt's product dequantises at once: at most QCHUNK_FLOATS (or
// one row) per thread, few enough to stay in cache, enough rows for sgemm to run at speed.
#define QCHUNK_FLOATS ((size_t)1 << 18)
static inline size_t qchunk_floats(int n_in) { return (size_t)n_in > QCHUNK_FLOATS ? (size_t)n_in : QCHUNK_FLOATS; }

// One linear layer's product, out[T, n_out] = x[T, n_in] · w[n_out, n_in]ᵀ (+ b).
// A sub-layer's output projection also adds out into residual (laid out as out), each thread
// on its own features, so that no meeting of the threads comes between; it adds after the
// whole product, as the reference rounds x + (W·in + b), not as sgemm's beta = 1 would.
// A Q8_0 matrix (qw.q set, w NULL) meets many rows a chunk at a time, dequantised into wbuf.
typedef struct {
    float *out;     // (T, n_out)
    const float *w; // (n_out, n_in), or NULL for a Q8_0 matrix
    const float *b; // (n_out) or NULL
    int n_out;
    float *residual; // (T, n_out) or NULL
    QMat qw;
    float *wbuf; // (qchunk_floats(n_in)) for a Q8_0 matrix and T > 1
} Linear;

// Output features [lo, hi) of the product: one thread's share when the caller splits the
// features across threads, each thread streaming its own rows of the weights.
static inline void matmul_part(const Linear *l, const float *x, int T, int n_in, size_t lo, size_t hi) {
    size_t n_out = l->n_out;
    float *out = l->out;
    const float *w = l->w, *b = l->b;
    const QMat *qw = &l->qw;
    if (lo >= hi) return;
    if (T == 1) {
        for (size_t r = lo; r < hi; r++)
            out[r] = (qw->q ? dot_q8(qw->q + r * n_in, qw->s + r * (n_in / qw->gs), x, n_in, qw->gs)
                            : dot(w + r * n_in, x, n_in)) +
                     (b ? b[r] : 0.0f);
    } else {
        size_t chunk = qw->q ? qchunk_floats(n_in) / n_in : hi - lo;
        for (size_t r0 = lo; r0 < hi; r0 += chunk) {
            size_t r1 = hi - r0 < chunk ? hi : r0 + chunk;
            const float *wr = qw->q ? l->wbuf : w + r0 * n_in;
            if (qw->q) dequantize_rows(l->wbuf, qw, n_in, r0, r1);
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

// din (=, or += with acc) dout · W; dW += doutᵀ · in; db += Σ rows of dout.
static inline void matmul_backward(float *din, int acc, float *dw, float *db, const float *dout, const float *in,
                                   const float *w, int T, int n_in, int n_out) {
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, n_in, n_out, 1.0f, dout, n_out, w, n_in,
                    acc ? 1.0f : 0.0f, din, n_in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, T, 1.0f, dout, n_out, in, n_in, 1.0f, dw, n_in);
    if (db)
        for (int t = 0; t < T; t++) {
            const float *g = dout + (size_t)t * n_out;
#pragma omp simd
            for (int o = 0; o < n_out; o++) db[o] += g[o];
        }
}

#endif
