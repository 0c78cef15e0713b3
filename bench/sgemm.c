// sgemm.c: OpenBLAS's own 1024³ sgemm FLOP/s, the ceiling the batched prompt and training
// are measured against. Same library and threads as ./run (bench/run.sh links it the way the
// Makefile links ./run).
#include "bench.h"

int main(int argc, char **argv) {
    int threads = bench_threads(argc, argv), reps = atoi(bench_arg(argc, argv, "-r", "10"));
    int n = atoi(bench_arg(argc, argv, "-n", "1024"));
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) { fprintf(stderr, "sgemm: out of memory\n"); return 1; }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        b[i] = (float)((i * 11) % 17) / 17.0f - 0.5f;
    }
    double t[64];
    if (reps > 64) reps = 64;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); // warm-up
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t[r] = now_s() - t0;
    }
    double flops = 2.0 * n * nn, best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    double med = median(t, reps);
    printf("threads %d\n", threads);
    printf("sgemm_best_GFLOPs %.1f\n", flops / best * 1e-9);
    printf("sgemm_median_GFLOPs %.1f\n", flops / med * 1e-9);
    free(a); free(b); free(c);
    return 0;
}
