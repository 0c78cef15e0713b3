// training/random.h: the random numbers training draws, and dropout, which is made of them.
// Every stream is a pure function of (seed, purpose, index), so nothing about the data order
// or the masks needs saving: a resumed run draws the same batches. No file, no model.
#ifndef ATTN_TRAINING_RANDOM_H
#define ATTN_TRAINING_RANDOM_H

#include <math.h>
#include <stdint.h>

// order does not depend on anything saved: a resumed run draws the same batches.

// SplitMix64: the n-th output of the stream started at s is mix64(s + n * golden).
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }

static uint64_t rng_for(uint64_t seed, uint64_t purpose, uint64_t index) {
    uint64_t s = seed;
    uint64_t a = splitmix64(&s) ^ purpose * 0xD1B54A32D192ED03ull;
    uint64_t b = splitmix64(&a) ^ index;
    splitmix64(&b);
    return b;
}

static double uniform01(uint64_t *s) { return (splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

static float normal01(uint64_t *s) {
    double u1 = uniform01(s), u2 = uniform01(s);
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
}

enum { RNG_INIT = 1, RNG_BATCH, RNG_EVAL_TRAIN, RNG_EVAL_VAL, RNG_SAMPLE, RNG_DROPOUT };

// Dropout at nanoGPT's places, numbered as sites: the embeddings' sum (0); in layer l the
// attention probabilities (3l + 1), the attention's output projection (3l + 2) and the
// feed-forward's (3l + 3), each before its residual add. Element i of a site's tensor (row
// major over the micro-batch: [B, T, dim] or [B, heads, T, T]) is kept, scaled by 1 / (1 - p),
// when output i + 1 of the SplitMix64 stream started at the site's key, shifted right by 40,
// is at least p * 2^24. The key is rng_for(seed, RNG_DROPOUT, (step * grad_accum + micro) *
// sites + site). So masks take no memory, the backward pass draws them again, they do not
// depend on the thread count, and tests/test_train_grad.py draws the same ones for PyTorch.
typedef struct {
    uint64_t seed, draw; // draw: (step * grad_accum + micro) * sites, set before each micro-batch
    uint32_t threshold;  // 0: off
    float scale;
} Dropout;

static Dropout dropout_init(float p, uint64_t seed) {
    Dropout d = {.seed = seed, .threshold = (uint32_t)lround(p * 16777216.0), .scale = 1.0f / (1.0f - p)};
    return d;
}

// dst[i] = src[i] * (kept ? scale : 0) for elements first .. first + n - 1 of a site.
static void dropout_apply(const Dropout *d, int site, float *dst, const float *src, size_t first, size_t n) {
    uint64_t key = rng_for(d->seed, RNG_DROPOUT, d->draw + (uint64_t)site), thr = d->threshold;
    float scale = d->scale;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(key + (first + i + 1) * 0x9E3779B97F4A7C15ull);
        dst[i] = src[i] * ((h >> 40) >= thr ? scale : 0.0f);
    }
}

#endif
