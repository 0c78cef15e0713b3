// run.c: generate text with, or score text against, one attn.c model file.
//   ./run model.bin -i "Once upon a time"
// Data flows one way: load (model.h maps the file) → tokenize → forward → sample → print.
#include <ctype.h>
#include <signal.h>
#include <time.h>
#include <sys/uio.h>
#include "model.h"
#include "tokenizer.h"

static const char *prog = "run";
#include "io/cli.h"

// New tokens when -n is not given, as llama2.c's default length.
#define DEFAULT_NEW_TOKENS 256
// Rows a prompt runs through the model at once: enough for sgemm to run at speed.
#define PROMPT_BATCH 256
// Bytes of a decoded piece sanitized at a time (a piece may be a long added token).
#define PRINT_CHUNK 256

// ----------------------------------------------------------------------------
// Options

typedef struct {
    const char *model_path, *prompt, *mode, *text_path, *tokenizer_path, *out_path;
    float temperature, topp, minp, repeat_penalty;
    int topk, steps, threads, repeat_window, context;
    int special; // --special: the text's spelling of a special token becomes that token
    uint64_t seed;
    const char *sampling_flag; // the first sampling flag given, refused outside generate
} Options;

static void usage(FILE *f) {
    fprintf(f, "usage: run MODEL [options]\n"
               "  -i TEXT      prompt (default: empty: the model starts from BOS, else EOS, else a newline)\n"
               "  -n N         new tokens to generate (default 256); past a full context the window moves\n"
               "               on by half; 0 = until end-of-sequence or the context is full\n"
               "  -t T         temperature; 0 = greedy (default 1.0)\n"
               "  -p P         top-p (nucleus) in [0, 1]; 0 or 1 = off (default 0.9)\n"
               "  -k K         top-k; 0 = off (default 0)\n"
               "  --min-p P    drop tokens below P x the most likely one's probability; 0 = off (default 0)\n"
               "  -r R         repetition penalty, CTRL-style; 1 = off (default 1)\n"
               "  --repeat-window N  positions the penalty looks back over; 0 = all (default 64)\n"
               "  -s SEED      random seed; 0 = from the clock and process id (default 0)\n"
               "  -m MODE      generate | ppl | logits (default generate)\n"
               "  -f FILE      -m ppl: the text to score; otherwise the prompt, read from FILE as it is;\n"
               "               - reads standard input\n"
               "  -c N         context length: at most N positions instead of the model's full context\n"
               "  -o FILE      where -m logits writes the prompt's logits (int32 T, int32 vocab, int32 tokens[T],\n"
               "               float32 logits[T][vocab])\n"
               "  -z FILE      use this llama2.c tokenizer.bin instead of the model's own tokenizer\n"
               "  --special    special tokens spelled in the text (<|im_end|>, <end_of_turn>) become those tokens;\n"
               "               without it they are text, as any other characters\n"
               "  -j N         threads (default: OMP_NUM_THREADS, else every core)\n"
               "  -h, --help   this text\n"
               "-n -t -p -k --min-p -r --repeat-window and -s shape generation; -m ppl and -m logits refuse them.\n"
               "Text goes to stdout (exactly the prompt, then the continuation); timings go to stderr.\n");
}

// The value after a flag, or a one-line error when the flag came last.
static const char *value(const char *flag, const char *s) {
    if (!s) die("%s needs a value (see --help)", flag);
    return s;
}

static double parse_num(const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(value(flag, s), &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi)
        die("%s %s: expected a number in [%g, %g]", flag, s, lo, hi);
    return v;
}

static int parse_int(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(value(flag, s), &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) die("%s %s: expected a whole number in [%ld, %ld]", flag, s, lo, hi);
    return (int)v;
}

static uint64_t parse_seed(const char *flag, const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value(flag, s), &end, 10);
    if (!*s || *end || errno || *s == '-') die("%s %s: expected a whole number in [0, 2^64)", flag, s);
    return v;
}

// -s 0: a seed from the clock in nanoseconds and the process id, so that two runs started in
// the same second differ; never 0, which xorshift would keep at 0.
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid() << 40;
    return s ? s : 1;
}

static Options parse_options(int argc, char **argv) {
    Options o = {.mode = "generate",
                 .prompt = "",
                 .temperature = 1.0f,
                 .topp = 0.9f,
                 .repeat_penalty = 1.0f,
                 .steps = -1,
                 .repeat_window = 64}; // steps -1: the default, see generate
    int prompt_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (a[0] != '-' || !a[1]) {
            if (o.model_path) die("unexpected argument '%s' (the model is %s)", a, o.model_path);
            o.model_path = a;
            continue;
        }
        if (!strcmp(a, "--special")) {
            o.special = 1;
            continue;
        }
        // An unknown flag is named as such even when it comes last.
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!strcmp(a, "-i")) {
            o.prompt = value(a, v);
            prompt_given = 1;
        } else if (!strcmp(a, "-c")) o.context = parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "-n")) o.steps = parse_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "-t")) o.temperature = parse_num(a, v, 0, 100);
        else if (!strcmp(a, "-p")) o.topp = parse_num(a, v, 0, 1);
        else if (!strcmp(a, "-k")) o.topk = parse_int(a, v, 0, 1 << 24);
        else if (!strcmp(a, "--min-p")) o.minp = parse_num(a, v, 0, 1);
        else if (!strcmp(a, "-r")) o.repeat_penalty = parse_num(a, v, 0.01, 100);
        else if (!strcmp(a, "--repeat-window")) o.repeat_window = parse_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "-s")) o.seed = parse_seed(a, v);
        else if (!strcmp(a, "-m")) o.mode = value(a, v);
        else if (!strcmp(a, "-f")) o.text_path = value(a, v);
        else if (!strcmp(a, "-o")) o.out_path = value(a, v);
        else if (!strcmp(a, "-z")) o.tokenizer_path = value(a, v);
        else if (!strcmp(a, "-j")) o.threads = parse_int(a, v, 1, 1024);
        else die("unknown option %s (see --help)", a);
        const char *sampling[] = {"-n", "-t", "-p", "-k", "--min-p", "-r", "--repeat-window", "-s"};
        for (size_t k = 0; k < sizeof sampling / sizeof *sampling && !o.sampling_flag; k++)
            if (!strcmp(a, sampling[k])) o.sampling_flag = sampling[k];
    }
    if (!o.model_path) {
        usage(stderr);
        exit(1);
    }
    if (strcmp(o.mode, "generate") && strcmp(o.mode, "ppl") && strcmp(o.mode, "logits"))
        die("-m %s: the modes are generate, ppl and logits", o.mode);
    // A flag the mode would ignore is refused: the user meant something by it.
    int ppl = !strcmp(o.mode, "ppl"), logits = !strcmp(o.mode, "logits");
    if (ppl && !o.text_path) die("-m ppl needs the text to score: -f FILE");
    if (ppl && prompt_given) die("-m ppl scores the text of -f; -i has no use there");
    if (!ppl && prompt_given && o.text_path) die("give the prompt with -i or with -f, not both");
    if (logits && !o.out_path) die("-m logits needs an output file: -o FILE");
    if (!logits && o.out_path) die("-o is where -m logits writes; -m %s writes to stdout", o.mode);
    if ((ppl || logits) && o.sampling_flag)
        die("%s shapes generation; -m %s does not generate and would ignore it", o.sampling_flag, o.mode);
    return o;
}

// ----------------------------------------------------------------------------
// Load: the model (mapped), its tokenizer, and the state for running it.

// The model's own tokenizer, or a llama2.c tokenizer.bin standing in for it (-z), read the
// way llama2.c's run.c reads it.
static void load_tokenizer(Tokenizer *tok, const Model *m, const char *model_path, const char *override_path) {
    const Config *c = &m->config;
    char err[512];
    if (override_path) {
        size_t bytes;
        char *file = read_file(override_path, &bytes, NULL);
        if (bytes >= 4 && !memcmp(file, MODEL_MAGIC, 4))
            die("%s: is an attn.c model, not a tokenizer; -z takes a llama2.c tokenizer.bin", override_path);
        if (tokenizer_init_llama2c(tok, file, bytes, c->vocab_size, err, sizeof err)) die("%s: %s", override_path, err);
        free(file);
        return;
    }
    if (tokenizer_init(tok, m->tok_blob, m->tok_bytes, c->tok_kind, c->tok_flags, c->bos_id, c->eos_id, err,
                       sizeof err))
        die("%s: tokenizer: %s", model_path, err);
    if (tok->n_pieces != c->vocab_size)
        die("%s: the tokenizer has %d pieces but vocab_size is %d", model_path, tok->n_pieces, c->vocab_size);
}

// The weights are read where they lie in the mapping. If the file shrinks meanwhile (say,
// rewritten in place), touching a page past its new end raises SIGBUS: name the cause rather
// than die with "Bus error". Faults outside the mapping keep their default action.
static const char *mapped_path;
static const char *mapped_lo, *mapped_hi;

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const char *a = si->si_addr;
    if (a >= mapped_lo && a < mapped_hi) {
        static char head[] = "run: ", tail[] = ": the model file changed while in use\n";
        struct iovec msg[] = {{head, 5}, {(char *)mapped_path, strlen(mapped_path)}, {tail, sizeof tail - 1}};
        (void)writev(STDERR_FILENO, msg, 3); // async-signal-safe, unlike stdio
        _exit(1);
    }
    signal(sig, SIG_DFL); // the faulting access runs again and ends the process as before
}

static void guard_mapping(const Model *m, const char *path) {
    mapped_path = path;
    mapped_lo = m->map;
    mapped_hi = (const char *)m->map + m->map_bytes;
    struct sigaction sa = {0};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
}

// ----------------------------------------------------------------------------
// Forward over a run of tokens, in batches of the state's size. Logits for every row go to
// each_row (perplexity, logit dumps); otherwise only the last row's land in logits.

typedef void (*RowLogits)(void *ctx, int row, const float *logits);

static int all_finite(const float *x, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += x[i] * 0.0f; // NaN, and Inf times 0, turn the sum NaN
    return sum == 0.0f;
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

static void die_not_finite(int pos) {
    die("%s: the logits at position %d are not finite: the weights hold NaN or Inf, or overflow", mapped_path, pos);
}

// forward_tokens for the callers that stop at a non-finite logit.
static void forward_or_die(const Model *m, RunState *s, const int *tokens, int n, int pos0, float *logits,
                           RowLogits each_row, void *ctx) {
    int bad = forward_tokens(m, s, tokens, n, pos0, logits, each_row, ctx);
    if (bad >= 0) die_not_finite(bad);
}

// Encodes text into tokens (room for tokenizer_max_tokens of them); a model with no BOS still
// needs a first token.
static int encode_prompt(const Tokenizer *tok, const Config *c, const Options *o, const char *what, const char *text,
                         size_t len, int *tokens) {
    char err[256];
    unsigned opts = (c->tok_flags & TOKF_ADD_BOS ? TOKE_ADD_BOS : 0) | (o->special ? TOKE_SPECIAL : 0);
    int n = tokenizer_encode(tok, text, len, opts, tokens, (int)tokenizer_max_tokens(tok, len), err, sizeof err);
    if (n < 0) die("%s: %s", what, err);
    if (n == 0) { // the model still needs a first token: BOS, else EOS, else a newline as nanoGPT starts
        int start = c->bos_id >= 0 ? c->bos_id : c->eos_id;
        if (start < 0 && tokenizer_encode(tok, "\n", 1, 0, &start, 1, err, sizeof err) != 1)
            die("%s: empty, and the model has no BOS token or newline to start from", what);
        tokens[n++] = start;
    }
    return n;
}

// Streams decoded bytes to stdout whole characters at a time, with control bytes dropped
// and invalid UTF-8 shown as U+FFFD, so that no model output can drive the terminal.
static void print_piece(TokSanitizer *san, const char *piece, size_t len, int flush) {
    char buf[3 * PRINT_CHUNK + 12]; // each byte may become a 3-byte U+FFFD, plus a held-back character
    do {
        size_t n = len < PRINT_CHUNK ? len : PRINT_CHUNK;
        fwrite(buf, 1, tokenizer_sanitize(san, piece, n, buf, flush && n == len), stdout);
        piece += n;
        len -= n;
    } while (len);
    // a full disk or a closed pipe behind stdout must not pass for a finished run
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
}

// The prompt is the user's text: refuse what is not UTF-8 rather than guess at it.
static void check_utf8(const char *what, const char *s, size_t n) {
    char why[64];
    if (text_problem(s, n, why, sizeof why)) die("%s: %s", what, why);
}

// When the context is full and more tokens are asked for, the window moves on: its last half
// (after the BOS it started with, if any) runs again as a prompt at positions from 0, as
// nanoGPT's sample.py crops its input to the last block_size tokens. Running half a window
// again every half a context costs about one batched row per token, where cropping at every
// step would cost a whole window.
static int shift_window(const Model *m, RunState *s, const int *history, int n, int *window, float *logits) {
    const Config *c = &m->config;
    int keep = c->seq_len / 2 > 1 ? c->seq_len / 2 : 1, k = 0;
    if (keep > 1 && c->bos_id >= 0 && history[0] == c->bos_id) window[k++] = c->bos_id;
    memcpy(window + k, history + n - (keep - k), sizeof(int) * (keep - k));
    forward_or_die(m, s, window, keep, 0, logits, NULL, NULL);
    return keep;
}

static void generate(const Model *m, const Tokenizer *tok, RunState *s, Sampler *sampler, const Options *o) {
    const Config *c = &m->config;
    size_t plen = strlen(o->prompt);
    int *tokens = malloc(sizeof(int) * tokenizer_max_tokens(tok, plen)), *window = malloc(sizeof(int) * c->seq_len);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    if (!tokens || !window || !logits) die("out of memory");
    check_utf8("prompt", o->prompt, plen);
    int n_prompt = encode_prompt(tok, c, o, "prompt", o->prompt, plen, tokens);
    if (n_prompt > c->seq_len) die("prompt: %d tokens, longer than the model's context of %d", n_prompt, c->seq_len);
    // -n 0 stops where the context is full; any other count, 256 by default, runs on past it.
    // tokens then grows to hold the whole history, which the repetition penalty looks back on.
    int n_new = o->steps > 0 ? o->steps : o->steps < 0 ? DEFAULT_NEW_TOKENS : c->seq_len - n_prompt;
    int *history = realloc(tokens, sizeof(int) * ((size_t)n_prompt + n_new));
    if (!history) die("out of memory");
    tokens = history;
    TokSanitizer san = {0};
    print_piece(&san, o->prompt, plen, 0);

    double t0 = now_s();
    forward_or_die(m, s, tokens, n_prompt, 0, logits, NULL, NULL);
    double t1 = now_s();
    int n = n_prompt, pos = n_prompt, shifts = 0; // tokens so far; of them in the KV cache
    while (n < n_prompt + n_new) {
        int next = sample(sampler, logits, tokens, n);
        if (tokenizer_is_stop(tok, next)) break;
        size_t len;
        const char *piece = tokenizer_decode(tok, tokens[n - 1], next, &len);
        print_piece(&san, piece, len, 0);
        tokens[n++] = next;
        if (n == n_prompt + n_new) break;
        if (pos < c->seq_len) {
            forward_or_die(m, s, &next, 1, pos++, logits, NULL, NULL);
        } else {
            pos = shift_window(m, s, tokens, n, window, logits);
            shifts++;
        }
    }
    print_piece(&san, "", 0, 1);
    double t2 = now_s();
    int generated = n - n_prompt;
    fprintf(stderr, "\nprompt: %d token%s in %.3f s (%.1f tok/s); generated: %d token%s in %.3f s (%.1f tok/s)",
            n_prompt, plural(n_prompt), t1 - t0, n_prompt / (t1 - t0), generated, plural(generated), t2 - t1,
            generated > 0 ? generated / (t2 - t1) : 0.0);
    if (shifts) fprintf(stderr, "; the full context moved on by half %d time%s", shifts, plural(shifts));
    fprintf(stderr, "\n");
    free(tokens);
    free(window);
    free(logits);
}

// Perplexity over windows of the context's length that overlap by one token, so every token
// but the first is predicted exactly once, each window from a fresh cache.
typedef struct {
    const int *window;
    int len, vocab;
    double nll;
    long scored;
} PplAcc;

static void ppl_row(void *ctx, int row, const float *logits) {
    PplAcc *a = ctx;
    if (row + 1 >= a->len) return;
    double max = logits[0], sum = 0.0;
    for (int i = 1; i < a->vocab; i++) max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < a->vocab; i++) sum += exp(logits[i] - max);
    a->nll += max + log(sum) - logits[a->window[row + 1]];
    a->scored++;
}

static void perplexity(const Model *m, const Tokenizer *tok, RunState *s, const Options *o) {
    const Config *c = &m->config;
    if (c->seq_len < 2) die("%s: a context of %d token cannot predict anything", o->model_path, c->seq_len);
    size_t len;
    const char *name = input_name(o->text_path);
    char *text = read_input(o->text_path, &len, NULL, 1);
    if (tokenizer_max_tokens(tok, len) > (size_t)INT32_MAX) die("%s: too large to score (%zu bytes)", name, len);
    check_utf8(name, text, len);
    int *tokens = malloc(sizeof(int) * tokenizer_max_tokens(tok, len));
    float *logits = malloc(sizeof(float) * (size_t)s->max_batch * c->vocab_size);
    if (!tokens || !logits) die("out of memory");
    int n = encode_prompt(tok, c, o, name, text, len, tokens);
    free(text);
    if (n < 2) {
        free(tokens);
        free(logits);
        die("%s: %d token%s; perplexity needs at least 2", name, n, plural(n));
    }
    PplAcc acc = {.vocab = c->vocab_size};
    int windows = (n - 2) / (c->seq_len - 1) + 1;
    Progress progress = progress_start();
    for (int w = 0, start = 0; start < n - 1; w++, start += c->seq_len - 1) {
        acc.window = tokens + start;
        acc.len = n - start < c->seq_len ? n - start : c->seq_len;
        forward_or_die(m, s, acc.window, acc.len, 0, logits, ppl_row, &acc);
        progress_show(&progress, "scoring", w + 1, windows, "windows", start + acc.len, "tok");
    }
    double secs = progress_end(&progress);
    fprintf(stderr, "scored %ld tokens in %.2f s (%.1f tok/s)\n", acc.scored, secs, n / secs);
    printf("tokens: %d\nperplexity: %.9g\n", n, exp(acc.nll / acc.scored));
    free(tokens);
    free(logits);
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

static void dump_logits(const Model *m, const Tokenizer *tok, RunState *s, const Options *o) {
    const Config *c = &m->config;
    size_t plen = strlen(o->prompt);
    check_utf8("prompt", o->prompt, plen);
    int *tokens = malloc(sizeof(int) * tokenizer_max_tokens(tok, plen));
    float *logits = malloc(sizeof(float) * (size_t)s->max_batch * c->vocab_size);
    if (!tokens || !logits) die("out of memory");
    int n = encode_prompt(tok, c, o, "prompt", o->prompt, plen, tokens);
    if (n > c->seq_len) die("prompt: %d tokens, longer than the model's context of %d", n, c->seq_len);
    LogitsFile f = {.m = m, .s = s, .tokens = tokens, .n = n, .bad = -1, .logits = logits};
    char err[512] = "";
    int rc = write_atomic(o->out_path, write_logits, &f, err, sizeof err);
    // freed before any exit, so that these leave nothing for LeakSanitizer (make test-asan)
    free(tokens);
    free(logits);
    if (f.bad >= 0) die_not_finite(f.bad);
    if (rc) die("%s", err);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    prefer_passive_threads(argv);
    Options o = parse_options(argc, argv);
    if (same_file(o.out_path, o.model_path) || same_file(o.out_path, o.text_path) ||
        same_file(o.out_path, o.tokenizer_path))
        die("-o %s is also an input: writing it would destroy it", o.out_path);
    signal(SIGXFSZ, SIG_IGN); // past `ulimit -f` a write fails (and is reported) instead of killing run
    char err[512];
    if (o.out_path && check_output(o.out_path, err, sizeof err)) die("%s", err);
    choose_threads(o.threads);
    double t0 = now_s();
    Model m;
    if (model_open(&m, o.model_path, err, sizeof err)) die("%s", err);
    guard_mapping(&m, o.model_path);
    if (o.context > m.config.seq_len)
        die("-c %d: %s's context is %d positions; -c can only shorten it", o.context, o.model_path, m.config.seq_len);
    if (o.context) m.config.seq_len = o.context;
    const Config *c = &m.config;
    Tokenizer tok;
    load_tokenizer(&tok, &m, o.model_path, o.tokenizer_path);
    RunState s;
    int batch = c->seq_len < PROMPT_BATCH ? c->seq_len : PROMPT_BATCH;
    if (state_init(&s, c, batch))
        die("%s: out of memory for the run state: it needs %.0f MiB at a context of %d; a shorter one (-c N) needs "
            "less",
            o.model_path, s.bytes / 1048576.0, c->seq_len);
    Sampler sampler;
    if (sampler_init(&sampler, c->vocab_size, o.temperature, o.seed ? o.seed : clock_seed())) die("out of memory");
    sampler.topp = o.topp;
    sampler.topk = o.topk;
    sampler.minp = o.minp;
    sampler.repeat_penalty = o.repeat_penalty;
    sampler.repeat_window = o.repeat_window;
    double load_ms = (now_s() - t0) * 1e3;
    char *prompt_file = NULL; // -f outside -m ppl: the prompt, NUL refused so that it is a C string
    if (o.text_path && strcmp(o.mode, "ppl")) {
        size_t len;
        prompt_file = read_input(o.text_path, &len, NULL, 1);
        check_utf8(input_name(o.text_path), prompt_file, len);
        o.prompt = prompt_file;
    }

    if (!strcmp(o.mode, "ppl")) perplexity(&m, &tok, &s, &o);
    else if (!strcmp(o.mode, "logits")) dump_logits(&m, &tok, &s, &o);
    else generate(&m, &tok, &s, &sampler, &o);

    int threads = max_threads();
    static const char *const weight_names[WEIGHT_TYPES] = {"float32", "Q8_0", "bfloat16", "float16"};
    char weights[48];
    snprintf(weights, sizeof weights, "%s", weight_names[c->weight_type]);
    if (c->weight_type == WEIGHTS_Q8_0) snprintf(weights, sizeof weights, "Q8_0, groups of %d", c->group_size);
    fprintf(stderr, "%s: %d layer%s, dim %d, vocab %d, context %d, weights %s; loaded in %.0f ms; %d thread%s\n",
            o.model_path, c->n_layers, plural(c->n_layers), c->dim, c->vocab_size, c->seq_len, weights, load_ms,
            threads, plural(threads));
    free(prompt_file);
    sampler_free(&sampler);
    state_free(&s);
    tokenizer_free(&tok);
    model_close(&m);
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
    return 0;
}
