// model/sampler.h: turning logits into the next token: greedy, temperature, top-k, top-p,
// min-p and a repetition penalty. One implementation serves ./run, ./train's samples and the
// tests. With top-k, min-p and the penalty off, temperature, top-p and the seed reproduce
// llama2.c's run.c draw for draw: the same xorshift64* generator, float draw, top-p
// pre-filter and cut-off. It sees only logits and token ids, never the model or the text.
#ifndef ATTN_MODEL_SAMPLER_H
#define ATTN_MODEL_SAMPLER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "layers.h"

typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature, topp, minp, repeat_penalty;
    int topk, repeat_window;
    uint64_t rng_state;   // xorshift64*, never 0
    ProbIndex *probindex; // (vocab_size) scratch
} Sampler;

static inline uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static inline float random_f32(uint64_t *state) { return (random_u32(state) >> 8) / 16777216.0f; }

// The first index of the largest of x [n] (NaN never the largest). Sixteen running maxima, which
// the compiler keeps in one vector, then a search for their maximum: a loop that carries the
// index cannot be vectorised, and took 25 µs a token over 32000 logits (1.2 % of a 110M step).
// Not inlined: where a caller's n is a constant below 16, GCC 12 warns of the lanes' loop,
// which then never runs, reading past x.
static __attribute__((noinline, unused)) int sample_argmax(const float *x, int n) {
    enum { LANES = 16 };
    float top[LANES];
    for (int j = 0; j < LANES; j++) top[j] = -INFINITY;
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) top[j] = x[i + j] > top[j] ? x[i + j] : top[j];
    for (; i < n; i++) top[0] = x[i] > top[0] ? x[i] : top[0];
    float largest = top[0];
    for (int j = 1; j < LANES; j++) largest = top[j] > largest ? top[j] : largest;
    for (i = 0; i < n; i++)
        if (x[i] == largest) return i;
    return 0; // nothing but NaN
}

// Inverse-CDF draw over the vocabulary in index order. Rounding can leave the float total a
// hair under coin (about once in 10^6 draws over 32000 tokens); the draw then belongs to the
// last token with any probability, not to the last id whatever its probability (llama2.c).
static inline int sample_mult(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    int last = 0;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
        if (probs[i] > 0.0f) last = i;
    }
    return last;
}

static inline int compare_prob_desc(const void *a, const void *b) {
    const ProbIndex *x = a, *y = b;
    return x->prob > y->prob ? -1 : x->prob < y->prob ? 1 : 0;
}

// The nucleus the filters keep of probs, most likely first, in s->probindex: top-k and min-p
// narrow the tokens, then the nucleus is taken of what they kept, renormalised. Without those
// two it is llama2.c's rule: tokens below (1 - topp) / (n - 1) cannot be in the nucleus and are
// dropped before the sort, and the cumulative mass is compared with topp itself. Returns how
// many tokens it holds, their mass in *mass; 0 when none passed (a flat distribution under a
// tiny topp: the argmax is then drawn).
static inline int sample_nucleus(const Sampler *s, const float *probs, float *mass) {
    int n = s->vocab_size, kept = 0, narrowed = s->topk > 0 || s->minp > 0.0f;
    float topp = s->topp > 0.0f && s->topp < 1.0f ? s->topp : 1.0f;
    float floor = narrowed ? s->minp * probs[sample_argmax(probs, n)] : (1.0f - topp) / (n - 1);
    for (int i = 0; i < n; i++)
        if (probs[i] >= floor) s->probindex[kept++] = (ProbIndex){probs[i], i};
    if (kept == 0) return 0;
    qsort(s->probindex, kept, sizeof(ProbIndex), compare_prob_desc);
    if (s->topk > 0 && s->topk < kept) kept = s->topk;
    float limit = topp;
    if (narrowed) {
        float all = 0.0f;
        for (int i = 0; i < kept; i++) all += s->probindex[i].prob;
        limit = topp * all;
    }
    float cum = 0.0f;
    int last = kept - 1;
    for (int i = 0; i < kept; i++) {
        cum += s->probindex[i].prob;
        if (cum > limit) {
            last = i;
            break;
        }
    }
    *mass = cum;
    return last + 1;
}

// Nucleus sampling (sample_nucleus) with the draw coin.
static inline int sample_filtered(const Sampler *s, const float *probs, float coin) {
    float cum;
    int held = sample_nucleus(s, probs, &cum);
    if (held == 0) return sample_argmax(probs, s->vocab_size);
    float r = coin * cum, cdf = 0.0f;
    for (int i = 0; i < held; i++) {
        cdf += s->probindex[i].prob;
        if (r < cdf) return s->probindex[i].index;
    }
    return s->probindex[held - 1].index;
}

// The CTRL repetition penalty on tokens seen in the last repeat_window positions.
static inline void apply_repeat_penalty(const Sampler *s, float *logits, const int *history, int n_history) {
    int from = s->repeat_window > 0 && n_history > s->repeat_window ? n_history - s->repeat_window : 0;
    for (int i = from; i < n_history; i++) {
        int seen_before = 0; // a token repeated in the window is still penalised once
        for (int j = from; j < i; j++) seen_before |= history[j] == history[i];
        float *l = &logits[history[i]];
        if (!seen_before) *l = *l > 0.0f ? *l / s->repeat_penalty : *l * s->repeat_penalty;
    }
}

// The next token from logits (vocab_size), which are overwritten. coin, uniform in [0, 1), is
// the draw; greedy decoding (temperature 0) ignores it.
static inline int sample_coin(const Sampler *s, float *logits, const int *history, int n_history, float coin) {
    if (s->repeat_penalty != 1.0f) apply_repeat_penalty(s, logits, history, n_history);
    if (s->temperature == 0.0f) return sample_argmax(logits, s->vocab_size);
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= s->temperature;
    softmax(logits, s->vocab_size);
    int filtered = (s->topp > 0.0f && s->topp < 1.0f) || s->topk > 0 || s->minp > 0.0f;
    return filtered ? sample_filtered(s, logits, coin) : sample_mult(logits, s->vocab_size, coin);
}

// The distribution sample_coin draws from at a temperature above 0, into probs (vocab_size):
// speculative decoding's p and q. logits are overwritten.
static inline void sample_distribution(const Sampler *s, float *logits, const int *history, int n_history,
                                       float *probs) {
    int n = s->vocab_size;
    if (s->repeat_penalty != 1.0f) apply_repeat_penalty(s, logits, history, n_history);
    for (int i = 0; i < n; i++) logits[i] /= s->temperature;
    softmax(logits, n);
    if (!((s->topp > 0.0f && s->topp < 1.0f) || s->topk > 0 || s->minp > 0.0f)) {
        memcpy(probs, logits, sizeof(float) * n);
        return;
    }
    float mass;
    int held = sample_nucleus(s, logits, &mass);
    memset(probs, 0, sizeof(float) * n);
    if (held == 0) probs[sample_argmax(logits, n)] = 1.0f;
    for (int i = 0; i < held; i++) probs[s->probindex[i].index] = s->probindex[i].prob / mass;
}

// The same, with the coin from the sampler's own generator (drawn only when it is used).
static inline int sample(Sampler *s, float *logits, const int *history, int n_history) {
    float coin = s->temperature == 0.0f ? 0.0f : random_f32(&s->rng_state);
    return sample_coin(s, logits, history, n_history, coin);
}

// A sampler over vocab_size tokens with no filter, no penalty and the given temperature and
// seed; the caller sets the other knobs. Returns -1 when out of memory.
static inline int sampler_init(Sampler *s, int vocab_size, float temperature, uint64_t seed) {
    *s = (Sampler){.vocab_size = vocab_size,
                   .temperature = temperature,
                   .repeat_penalty = 1.0f,
                   .rng_state = seed ? seed : 1,
                   .probindex = malloc(sizeof(ProbIndex) * vocab_size)};
    return s->probindex ? 0 : -1;
}

static inline void sampler_free(Sampler *s) {
    free(s->probindex);
    s->probindex = NULL;
}

#endif
