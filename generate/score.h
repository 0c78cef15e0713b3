// generate/score.h: -m ppl's scoring of a text's tokens (overlapping windows, or llama-perplexity's
// chunks) and -m logits' file of the logits at every position, through the batched forward.
// Included by run.c after generate/forward_run.h and io/run_options.h.
#ifndef ATTN_GENERATE_SCORE_H
#define ATTN_GENERATE_SCORE_H

#include <math.h>
#include "../model.h"

// Perplexity over windows of the context's length that overlap by one token, so every token
// but the first is predicted exactly once, each window from a fresh cache.
typedef struct {
    const int *window;
    int len, vocab, first; // first: the first row scored (--chunks: half the context)
    double nll;
    long scored;
} PplAcc;

static void ppl_row(void *ctx, int row, const float *logits) {
    PplAcc *a = ctx;
    if (row + 1 >= a->len || row < a->first) return;
    double max = logits[0], sum = 0.0;
    for (int i = 1; i < a->vocab; i++) max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < a->vocab; i++) sum += exp(logits[i] - max);
    a->nll += max + log(sum) - logits[a->window[row + 1]];
    a->scored++;
}

// The perplexity of tokens [n], window after window, its products in bfloat16 or float32.
static double score_text(const Model *m, RunState *s, const int *tokens, int n, float *logits, int bf16, int quiet) {
    const Config *c = &m->config;
    if (state_compute_bf16(s, c, bf16)) die("out of memory");
    PplAcc acc = {.vocab = c->vocab_size};
    int windows = (n - 2) / (c->seq_len - 1) + 1;
    Progress progress = progress_start();
    for (int w = 0, start = 0; start < n - 1; w++, start += c->seq_len - 1) {
        acc.window = tokens + start;
        acc.len = n - start < c->seq_len ? n - start : c->seq_len;
        forward_or_die(m, s, acc.window, acc.len, 0, logits, ppl_row, &acc);
        progress_show(&progress, s->compute_bf16 ? "scoring (bf16)" : "scoring", w + 1, windows, "windows",
                      start + acc.len, "tok");
    }
    double secs = progress_end(&progress);
    if (!quiet)
        fprintf(stderr, "scored %ld token%s in %.2f s (%.1f tok/s)%s\n", acc.scored, plural(acc.scored), secs, n / secs,
                s->compute_bf16 ? ", products in bfloat16" : "");
    return exp(acc.nll / acc.scored);
}

// --chunks: llama-perplexity's perplexity. The tokens are cut into chunks of the context (what
// is left over after the last whole chunk is not scored), each evaluated from a fresh cache with
// its first token replaced by BOS when the tokenizer adds one, and only the second half of each
// is scored, every token with at least half a context before it: the numbers llama-perplexity
// prints for the same tokens and context ("Final estimate").
static double score_chunks(const Model *m, RunState *s, const int *tokens, int n, float *logits, int bf16,
                           const Options *o, int bos, int *chunks) {
    const Config *c = &m->config;
    int ctx = c->seq_len;
    *chunks = n / ctx;
    if (o->chunks > 0 && o->chunks < *chunks) *chunks = o->chunks;
    if (*chunks < 1) die("%s: %d tokens, fewer than a chunk of the context (%d)", input_name(o->text_path), n, ctx);
    if (state_compute_bf16(s, c, bf16)) die("out of memory");
    int *chunk = malloc(sizeof(int) * (size_t)ctx);
    if (!chunk) die("out of memory");
    PplAcc acc = {.window = chunk, .len = ctx, .vocab = c->vocab_size, .first = ctx / 2};
    Progress progress = progress_start();
    for (int k = 0; k < *chunks; k++) {
        memcpy(chunk, tokens + (size_t)k * ctx, sizeof(int) * (size_t)ctx);
        if (bos >= 0) chunk[0] = bos;
        forward_or_die(m, s, chunk, ctx, 0, logits, ppl_row, &acc);
        progress_show(&progress, bf16 ? "scoring (bf16)" : "scoring", k + 1, *chunks, "chunks", (k + 1) * ctx, "tok");
    }
    double secs = progress_end(&progress);
    free(chunk);
    if (!o->quiet)
        fprintf(stderr, "scored %ld token%s, the second half of %d chunk%s of %d, in %.2f s%s\n", acc.scored,
                plural(acc.scored), *chunks, plural(*chunks), ctx, secs, bf16 ? ", products in bfloat16" : "");
    return exp(acc.nll / acc.scored);
}

// Logits at every prompt position, through the batched path: the parity tests' view. The file
// is written whole or not at all: a failure leaves whatever was at -o as it was.
typedef struct {
    const Model *m;
    RunState *s;
    const int *tokens;
    int n, bad; // bad: the first non-finite position, or -1
    float *logits;
    Sink *sink;
} LogitsFile;

static void logits_row(void *ctx, int row, const float *logits) {
    (void)row;
    LogitsFile *f = ctx;
    sink_write(f->sink, logits, sizeof(float) * f->m->config.vocab_size);
}

static void write_logits(Sink *sink, const void *ctx) {
    LogitsFile *f = (LogitsFile *)ctx;
    int32_t head[2] = {f->n, f->m->config.vocab_size};
    f->sink = sink;
    sink_write(sink, head, sizeof head);
    sink_write(sink, f->tokens, sizeof(int) * f->n);
    f->bad = forward_tokens(f->m, f->s, f->tokens, f->n, 0, f->logits, logits_row, f);
    if (f->bad >= 0) sink->err = -1; // abandoned: write_atomic removes the temporary file
}

// tokens: n prompt ids, malloc'd; dump_logits owns them.
static void dump_logits(const Model *m, RunState *s, const Options *o, int *tokens, int n) {
    const Config *c = &m->config;
    float *logits = malloc(sizeof(float) * (size_t)s->max_batch * c->vocab_size);
    if (!logits) die("out of memory");
    LogitsFile f = {.m = m, .s = s, .tokens = tokens, .n = n, .bad = -1, .logits = logits};
    char err[512] = "";
    int rc = write_output(o->out_path, write_logits, &f, err, sizeof err);
    // freed before any exit, so that these leave nothing for LeakSanitizer (make test-asan)
    free(tokens);
    free(logits);
    if (f.bad >= 0) die_not_finite(f.bad);
    if (rc) die("%s", err);
}

#endif
