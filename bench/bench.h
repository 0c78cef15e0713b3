// bench.h: what every benchmark program shares: a clock, medians, and the -j option.
// Results go to stdout as "key value" lines that bench/run.sh collects.
#ifndef ATTN_BENCH_H
#define ATTN_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include <cblas.h>
#include "io/clock.h"
#include "model/threads.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Sorts v in place.
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "-j N" sets both pools, as ./run does, after the libraries' settings that ./run starts with
// (model/threads.h; it may start the program again); the rest of argv is left to the caller.
static int bench_threads(int argc, char **argv) {
    start_with_library_settings(argv);
    int threads = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-j")) threads = atoi(argv[i + 1]);
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    }
    return omp_get_max_threads();
}

static const char *bench_arg(int argc, char **argv, const char *flag, const char *fallback) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], flag)) return argv[i + 1];
    return fallback;
}

#endif
