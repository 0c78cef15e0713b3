// sgemm.c: OpenBLAS's own sgemm FLOP/s, the ceiling the batched prompt and training are
// measured against: 1024³ by default, or -s MxNxK for the shape of one prompt projection
// (out[M, N] = x[M, K] · w[N, K]ᵀ, as model.h's matmul calls it). Same library and threads
// as ./run (bench/run.sh links it the way the Makefile links ./run).
#include "bench.h"

int main(int argc, char **argv) {
    int threads = bench_threads(argc, argv), reps = atoi(bench_arg(argc, argv, "-r", "10"));
    int M = 1024, N = 1024, K = 1024;
    const char *shape = bench_arg(argc, argv, "-s", NULL);
    if (shape && (sscanf(shape, "%dx%dx%d", &M, &N, &K) != 3 || M < 1 || N < 1 || K < 1)) {
        fprintf(stderr, "sgemm: -s %s: expected MxNxK\n", shape);
        return 1;
    }
    float *a = malloc((size_t)M * K * sizeof(float)), *b = malloc((size_t)N * K * sizeof(float));
    float *c = malloc((size_t)M * N * sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "sgemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)((i * 11) % 17) / 17.0f - 0.5f;
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps; r++) { // r = -1 warms up
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        if (r >= 0) t[r] = now_s() - t0;
    }
    double flops = 2.0 * M * N * K, best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    double med = median(t, reps);
    printf("threads %d\n", threads);
    printf("shape %dx%dx%d\n", M, N, K);
    printf("sgemm_best_GFLOPs %.1f\n", flops / best * 1e-9);
    printf("sgemm_median_GFLOPs %.1f\n", flops / med * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
