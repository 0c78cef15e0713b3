// membw.c: the memory read bandwidth a one-token step can hope for. Every thread sums its
// share of a 1 GiB buffer (far larger than any cache) with wide loads; the best of several
// passes is the bound that matrix-vector products are measured against.
#include <immintrin.h>
#include <sys/mman.h>
#include "bench.h"

static float sum_chunk(const float *restrict p, size_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
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
