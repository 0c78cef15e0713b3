// generate/forward_run.h: the model over a run of tokens, in batches of the state's size, for
// every mode of ./run; a non-finite logit stops the run at its position, naming the file.
// Included by run.c after io/cli.h (die).
#ifndef ATTN_GENERATE_FORWARD_RUN_H
#define ATTN_GENERATE_FORWARD_RUN_H

#include <stdint.h>
#include <string.h>
#include "../model.h"

// Logits for every row go to each_row (perplexity, logit dumps); otherwise only the last row's
// land in logits.
typedef void (*RowLogits)(void *ctx, int row, const float *logits);

// Inf and NaN are the floats whose exponent bits are all ones; an OR of integers vectorises,
// where a float sum carried one addition after another (26 µs a token over 32000 logits).
static int all_finite(const float *x, int n) {
    uint32_t bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, sizeof bits);
        bad |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

// Returns -1, or the position whose logits are not finite (the weights hold NaN or Inf, or
// overflow), where it stopped: no garbage is sampled, scored or written past it.
static int forward_tokens(const Model *m, RunState *s, const int *tokens, int n, int pos0, float *logits,
                          RowLogits each_row, void *ctx) {
    const Config *c = &m->config;
    for (int done = 0; done < n;) {
        int T = n - done < s->max_batch ? n - done : s->max_batch;
        int last_chunk = done + T == n;
        int from = each_row ? 0 : last_chunk ? T - 1 : T;
        forward(c, &m->weights, s, tokens + done, T, pos0 + done, logits, from);
        for (int t = from; t < T; t++) {
            const float *row = logits + (size_t)(t - from) * c->vocab_size;
            if (!all_finite(row, c->vocab_size)) return pos0 + done + t;
            if (each_row) each_row(ctx, done + t, row);
        }
        done += T;
    }
    return -1;
}

static const char *model_path; // the errors of a forward pass name the file

static void die_not_finite(int pos) {
    die("%s: the logits at position %d are not finite: the weights hold NaN or Inf, or overflow", model_path, pos);
}

// forward_tokens for the callers that stop at a non-finite logit.
static void forward_or_die(const Model *m, RunState *s, const int *tokens, int n, int pos0, float *logits,
                           RowLogits each_row, void *ctx) {
    int bad = forward_tokens(m, s, tokens, n, pos0, logits, each_row, ctx);
    if (bad >= 0) die_not_finite(bad);
}

#endif
