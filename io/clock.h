// io/clock.h: the wall clock that ./run's timing lines and the benchmarks share.
#ifndef ATTN_IO_CLOCK_H
#define ATTN_IO_CLOCK_H

#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
