// training/data.h: the corpus as token ids split 90/10, the random batches nanoGPT draws,
// and the losses an evaluation reports.
#ifndef ATTN_TRAINING_DATA_H
#define ATTN_TRAINING_DATA_H

#include "acts.h"
#include "random.h"
#include "step.h"

// Splits beyond this many tokens are scored on their start at the end of a run.
#define FULL_LOSS_MAX_TOKENS ((size_t)1 << 20)

// One split of the corpus: n token ids, not owned.
typedef struct {
    int *ids;
    size_t n;
} Split;

// The corpus, whole, refused unless it is non-empty UTF-8 text. A byte-order mark at its start
// is dropped with a note: it marks the encoding, it is not text to learn. (Freed before a
// refusal, so that it exits with nothing for LeakSanitizer to report.) Under mpirun (ranks > 1)
// every rank reads the file, which a pipe or FIFO would give to one of them only; mpirun does
// not pass its shell's descriptors on, so <(cmd) (a /dev/fd/N path) reaches no rank at all.
static char *read_corpus(const char *path, size_t *len, int ranks) {
    struct stat st;
    int descriptor = !strncmp(path, "/dev/fd/", 8) || !strcmp(path, "/dev/stdin");
    if (ranks > 1 && (descriptor || (!stat(path, &st) && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))))
        die("-d %s: under mpirun every rank reads the corpus, and a pipe or FIFO gives it to one of them only; give "
            "it as a file",
            path);
    char *corpus = read_input_or_stream(path, len, "the corpus", 1, 1), why[64];
    if (*len >= 3 && !memcmp(corpus, "\xEF\xBB\xBF", 3)) {
        fprintf(stderr, "%s: note: %s: skipped the UTF-8 byte-order mark at its start\n", prog, input_name(path));
        memmove(corpus, corpus + 3, *len - 2); // with the terminating NUL
        *len -= 3;
    }
    const char *problem = *len == 0 ? "the corpus is empty" : text_problem(corpus, *len, why, sizeof why);
    if (!problem) return corpus;
    free(corpus);
    if (*len == 0) die("%s: %s", input_name(path), problem);
    die("%s: not UTF-8 text: %s (train on text files)", input_name(path), problem);
}

// The corpus as tokens of the model's tokenizer (tok, initialised here), split 90/10 into
// train and val, each of which must hold more than one block.
static void encode_corpus(const Config *c, const void *tok_blob, size_t tok_bytes, const char *corpus,
                          size_t corpus_len, const char *path, int block_size, Tokenizer *tok, int **ids, int *n_ids,
                          Split *train, Split *val) {
    char err[512];
    if (tokenizer_init(tok, tok_blob, tok_bytes, c->tok_kind, c->tok_flags, c->bos_id, c->eos_id, err, sizeof err))
        die("tokenizer: %s", err);
    size_t cap = tokenizer_max_tokens(tok, corpus_len);
    if (cap > (size_t)INT32_MAX) die("%s: corpora above 2 GiB are not supported", path);
    *ids = xcalloc(cap, sizeof(int), "the encoded corpus");
    *n_ids = tokenizer_encode(tok, corpus, corpus_len, 0, *ids, (int)cap, err, sizeof err);
    if (*n_ids < 0) die("%s: cannot encode the corpus: %s", path, err);
    *train = (Split){*ids, (size_t)(*n_ids * 0.9)};
    *val = (Split){*ids + train->n, (size_t)*n_ids - train->n};
    if (train->n < (size_t)block_size + 1 || val->n < (size_t)block_size + 1)
        die("%s: %d tokens give %zu training and %zu validation tokens; each needs more than the block size %d "
            "(use a longer corpus or a smaller --block-size)",
            path, *n_ids, train->n, val->n, block_size);
}

// A batch of B random windows of the split, as nanoGPT draws them.
static void fill_batch(Acts *a, const Split *s, int B, uint64_t rng) {
    int T = a->T;
    for (int b = 0; b < B; b++) {
        size_t ix = splitmix64(&rng) % (s->n - T);
        for (int t = 0; t < T; t++) {
            a->tokens[(size_t)b * T + t] = s->ids[ix + t];
            a->targets[(size_t)b * T + t] = s->ids[ix + t + 1];
        }
    }
}

// Told after each batch of an evaluation how many of how many are done (a status for slow ones).
typedef struct {
    void (*fn)(void *ctx, int done, int total);
    void *ctx;
} EvalTick;

// The mean loss over iters random batches of the split; NaN if *stop became non-zero (a signal)
// before the last batch.
static double estimate_loss(const Config *c, const Weights *w, Acts *a, const Split *s, int iters, uint64_t seed,
                            int purpose, const volatile sig_atomic_t *stop, EvalTick tick) {
    double sum = 0.0;
    for (int i = 0; i < iters; i++) {
        if (*stop) return NAN;
        fill_batch(a, s, a->B, rng_for(seed, purpose, i));
        sum += model_step(c, w, NULL, a, a->B, 0.0f, NULL, 0);
        tick.fn(tick.ctx, i + 1, iters);
    }
    return sum / iters;
}

// A plain status shows a line at least this often, however slow the work.
#define PLAIN_LINE_SECONDS 30.0

// Every token of the split after the first is predicted once: consecutive windows of T
// targets, each with the context from its window's start, the tail shorter than T in a last
// window of its own (filled up with token 0, which the causal attention keeps from the tail's
// positions, whose losses alone count), as ./run -m ppl scores a text.
// Splits beyond FULL_LOSS_MAX_TOKENS are scored on their start. A status counts the windows
// (on a terminal a line rewritten in place, otherwise a line every PLAIN_LINE_SECONDS): for a
// large model this takes minutes. NaN if *stop became non-zero (a signal) before the end.
static double full_loss(const Config *c, const Weights *w, Acts *a, const Split *s, size_t *count, int tty,
                        const volatile sig_atomic_t *stop) {
    int T = a->T;
    size_t n = s->n < FULL_LOSS_MAX_TOKENS + 1 ? s->n : FULL_LOSS_MAX_TOKENS + 1;
    size_t windows = (n - 1) / T;
    double sum = 0.0, shown = now_s();
    for (size_t w0 = 0; w0 < windows; w0 += a->B) {
        if (*stop) return NAN;
        int B = windows - w0 < (size_t)a->B ? (int)(windows - w0) : a->B;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t ix = (w0 + b) * T + t;
                a->tokens[(size_t)b * T + t] = s->ids[ix];
                a->targets[(size_t)b * T + t] = s->ids[ix + 1];
            }
        sum += model_step(c, w, NULL, a, B, 0.0f, NULL, 0) * B * T;
        if (now_s() - shown > (tty ? 0.5 : PLAIN_LINE_SECONDS)) {
            printf("%sscoring the validation split: %zu of %zu windows%s", tty ? "\r\033[K" : "", w0 + B, windows,
                   tty ? "" : "\n");
            fflush(stdout);
            shown = now_s();
        }
    }
    size_t tail = n - 1 - windows * T;
    if (tail && !*stop) {
        for (int t = 0; t < T; t++) {
            a->tokens[t] = t < (int)tail ? s->ids[windows * T + t] : 0;
            a->targets[t] = t < (int)tail ? s->ids[windows * T + t + 1] : 0;
        }
        model_step(c, w, NULL, a, 1, 0.0f, NULL, 0);
        for (int t = 0; t < (int)tail; t++) sum += a->losses[t];
    }
    if (*stop) return NAN;
    if (tty) fputs("\r\033[K", stdout);
    *count = windows * T + tail;
    return sum / (double)*count;
}

#endif
