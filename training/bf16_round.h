// training/bf16_round.h: the bfloat16 product --precision bf16 trains with, as a reference: the
// operands rounded to bfloat16 (round to nearest even), kept as float32 values in scratch
// copies, then OpenBLAS sgemm. A product of two bfloat16 values is exact in float32 (8 + 8
// significant bits), so this is a bfloat16 product accumulated in float32, the arithmetic of
// model/bf16_gemm.h's sgemm_bf16, which takes its place (training/step.h's bf16_gemm).
#ifndef ATTN_TRAINING_BF16_ROUND_H
#define ATTN_TRAINING_BF16_ROUND_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

// x rounded to the nearest bfloat16, ties to even, as a float32. A NaN stays a NaN (adding the
// rounding bias could carry its payload into the exponent and make it infinite).
static inline float round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

// The rows x cols matrix at m (ld floats a row) rounded to bfloat16, as a packed float32
// copy (cols a row) the caller frees.
static inline float *rounded_copy(const float *m, int rows, int cols, int ld) {
    size_t n = (size_t)rows * cols;
    float *r = malloc((n > 0 ? n : 1) * sizeof(float));
    if (!r) die("out of memory for a bfloat16 product's operands (%d x %d)", rows, cols);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) r[(size_t)i * cols + j] = round_bf16(m[(size_t)i * ld + j]);
    return r;
}

// cblas_sgemm's row-major product on operands rounded to bfloat16: C = alpha round(op(A))
// round(op(B)) + beta C, accumulated in float32. Called from any thread, inside a parallel
// region or outside. Inline, as rounded_copy, so that once bf16_gemm (training/step.h) is the
// kernel this header draws no unused-function warning.
static inline void sgemm_bf16_reference(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                                        const float *A, int lda, const float *B, int ldb, float beta, float *C,
                                        int ldc) {
    int a_rows = ta == CblasNoTrans ? M : K, a_cols = ta == CblasNoTrans ? K : M;
    int b_rows = tb == CblasNoTrans ? K : N, b_cols = tb == CblasNoTrans ? N : K;
    float *a = rounded_copy(A, a_rows, a_cols, lda), *b = rounded_copy(B, b_rows, b_cols, ldb);
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, a_cols > 0 ? a_cols : 1, b, b_cols > 0 ? b_cols : 1, beta, C,
                ldc);
    free(a);
    free(b);
}

#endif
