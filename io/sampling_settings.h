// io/sampling_settings.h: where ./run's sampling settings come from (a flag, the model file's
// defaults of format version 7, chat's /set, or ./run's defaults), for the banner and /show,
// and the seed a run draws with. Included by run.c after io/run_options.h (SAMPLING_* bits).
#ifndef ATTN_IO_SAMPLING_SETTINGS_H
#define ATTN_IO_SAMPLING_SETTINGS_H

#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "../model.h"

static uint64_t seed_from_clock; // -s 0's seed until it is told

// The sampling settings that have defaults in a model file (format version 7), in SAMPLING_* bit
// order, and where each value in use came from: a flag, the model file, /set, or ./run's default.
static const char *const sampling_names[] = {"temperature", "top_p", "top_k", "min_p", "repeat_penalty"};
static int sampling_given, sampling_from_model, sampling_from_set, model_has_sampling;

// The model file's sampling defaults where no flag was given.
static void use_model_sampling(const Config *c, Sampler *sp) {
    int use = c->sampling_flags & ~sampling_given;
    if (use & SAMPLING_TEMPERATURE) sp->temperature = c->temperature;
    if (use & SAMPLING_TOP_P) sp->topp = c->top_p;
    if (use & SAMPLING_TOP_K) sp->topk = c->top_k;
    if (use & SAMPLING_MIN_P) sp->minp = c->min_p;
    if (use & SAMPLING_REPEAT_PENALTY) sp->repeat_penalty = c->repeat_penalty;
    sampling_from_model = use;
    model_has_sampling = c->sampling_flags != 0;
}

static const char *sampling_source(int bit) {
    return sampling_from_set & bit     ? "/set"
           : sampling_given & bit      ? "flag"
           : sampling_from_model & bit ? "model"
                                       : "default";
}

static void sampling_value(const Sampler *sp, int i, char *buf, size_t size) {
    if (i == 2) snprintf(buf, size, "%d", sp->topk);
    else
        snprintf(buf, size, "%g",
                 i == 0   ? sp->temperature
                 : i == 1 ? sp->topp
                 : i == 3 ? sp->minp
                          : sp->repeat_penalty);
}

// "temperature 0.6 (model), top_k 20 (model)": the settings not at ./run's defaults because a
// flag or the model file says so; empty for a model file without defaults, whose flags need no
// telling apart.
static const char *sampling_summary(const Sampler *sp, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < 5 && model_has_sampling; i++) {
        int bit = 1 << i;
        if (!((sampling_given | sampling_from_model) & bit) || at >= size) continue;
        char value[32];
        sampling_value(sp, i, value, sizeof value);
        at += (size_t)snprintf(buf + at, size - at, "%s%s %s (%s)", at ? ", " : "", sampling_names[i], value,
                               sampling_source(bit));
    }
    return buf;
}

// A good reply can be had again only with its seed: when it came from the clock, it goes to
// stderr once, before the first token drawn at random (a terminal's chat banner shows it instead).
static void tell_seed(float temperature) {
    if (seed_from_clock && temperature > 0)
        fprintf(stderr, "seed %llu, from the clock (-s %llu samples the same again)\n",
                (unsigned long long)seed_from_clock, (unsigned long long)seed_from_clock);
    if (temperature > 0) seed_from_clock = 0;
}

// -s 0: a seed from the clock in nanoseconds and the process id, so that two runs started in
// the same second differ; never 0, which xorshift would keep at 0.
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid() << 40;
    return s ? s : 1;
}

#endif
