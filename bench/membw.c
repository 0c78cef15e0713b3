// membw.c: the memory read bandwidth a one-token step can hope for. Every thread sums its
// share of a 1 GiB buffer (far larger than any cache) with wide loads; the best of several
// passes is the bound that matrix-vector products are measured against.
#include <immintrin.h>
#include <sys/mman.h>
#include "bench.h"

// 256 bytes a step in four accumulators of the widest registers the build's level has (two
// 512-bit loads' worth of 256-bit ones at x86-64-v3: a memory-bound loop reads as fast).
#if defined(__AVX512F__)
typedef __m512 Acc;
#define ACC_FLOATS 16
#define acc_add(a, p) _mm512_add_ps(a, _mm512_load_ps(p))
#define acc_zero() _mm512_setzero_ps()
static float acc_sum(Acc a) { return _mm512_reduce_add_ps(a); }
#else
typedef __m256 Acc;
#define ACC_FLOATS 8
#define acc_add(a, p) _mm256_add_ps(a, _mm256_load_ps(p))
#define acc_zero() _mm256_setzero_ps()
static float acc_sum(Acc a) {
    float v[8];
    _mm256_storeu_ps(v, a);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

static float sum_chunk(const float *restrict p, size_t n) {
    enum { K = 64 / ACC_FLOATS }; // accumulators a step
    Acc a[K];
    for (int k = 0; k < K; k++) a[k] = acc_zero();
    for (size_t i = 0; i < n; i += 64)
        for (int k = 0; k < K; k++) a[k] = acc_add(a[k], p + i + ACC_FLOATS * k);
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += acc_sum(a[k]);
    return s;
}

int main(int argc, char **argv) {
    int threads = bench_threads(argc, argv), reps = atoi(bench_arg(argc, argv, "-r", "10"));
    int huge = atoi(bench_arg(argc, argv, "--huge", "1"));
    size_t bytes = (size_t)1 << 30, n = bytes / sizeof(float);
    float *buf = aligned_alloc(2 << 20, bytes);
    if (!buf) {
        fprintf(stderr, "membw: cannot allocate 1 GiB\n");
        return 1;
    }
    // Mapped files get 4 KiB pages; huge pages would flatter the bound, so they are opt-in.
    madvise(buf, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 1023);
    double t[64], sink = 0;
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s(), s = 0;
#pragma omp parallel reduction(+ : s)
        {
            size_t nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t per = n / nt / 64 * 64, from = id * per, to = id + 1 == nt ? n : from + per;
            s += sum_chunk(buf + from, to - from);
        }
        t[r] = now_s() - t0;
        sink += s;
    }
    double best = t[0];
    for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
    double med = median(t, reps);
    printf("threads %d\n", threads);
    printf("membw_best_GBps %.2f\n", bytes / best * 1e-9);
    printf("membw_median_GBps %.2f\n", bytes / med * 1e-9);
    fprintf(stderr, "(checksum %g)\n", sink);
    free(buf);
    return 0;
}
