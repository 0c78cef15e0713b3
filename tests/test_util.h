// tests/test_util.h: what the C tests share: one seeded random generator (xorshift64*, so
// every run draws the same numbers) and a float comparison that names the failing element.
// Include after cmocka.h.
#ifndef ATTN_TEST_UTIL_H
#define ATTN_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t test_rng = 0x9E3779B97F4A7C15ULL;

static inline uint64_t rnd64(void) {
    test_rng ^= test_rng >> 12;
    test_rng ^= test_rng << 25;
    test_rng ^= test_rng >> 27;
    return test_rng * 0x2545F4914F6CDD1DULL;
}
static inline uint32_t rnd(void) { return (uint32_t)(rnd64() >> 32); }
static inline float frand(void) {
    return (float)((rnd64() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
} // [-1, 1)
static inline float *rand_vec(size_t n, float scale) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = frand() * scale;
    return v;
}

// Each got[i] within tol * (1 + |want[i]|) of want[i]; a failure names the caller's line.
#define assert_close(g, w, n, t) assert_close_at(g, w, n, t, __LINE__)
static inline void assert_close_at(const float *got, const double *want, size_t n, double tol, int line) {
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]), lim = tol * (1.0 + fabs(want[i]));
        if (!(err <= lim))
            fail_msg("line %d, element %zu: got %.9g, want %.9g (|err| %.3g > %.3g)", line, i, got[i], want[i], err,
                     lim);
    }
}

#endif
