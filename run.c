// run.c: generate text with, score text against, or chat with one attn.c model file.
//   ./run model.bin -i "Once upon a time"
//   ./run model.bin -m chat
// Data flows one way: load (model.h maps the file) → tokenize → forward → sample → print.
#include <ctype.h>
#include <signal.h>
#include <time.h>
#include <sys/uio.h>
#include "model.h"
#include "tokenizer.h"
#include "chat/chat.h"
#include "chat/messages.h"
#include "chat/conversation.h"

static const char *prog = "run";
#include "io/cli.h"
#include "io/run_options.h"

// Rows a prompt runs through the model at once: enough for sgemm to run at speed.
#define PROMPT_BATCH 256
// Bytes of a decoded piece sanitized at a time (a piece may be a long added token).
#define PRINT_CHUNK 256

// -s 0: a seed from the clock in nanoseconds and the process id, so that two runs started in
// the same second differ; never 0, which xorshift would keep at 0.
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid() << 40;
    return s ? s : 1;
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

// The prompt's ids (malloc'd, *n of them): -i or -f's text, or --chat's conversation as the template
// renders it, generation prompt included.
static int *prompt_ids(const Tokenizer *tok, const Config *c, const ChatTemplate *ct, const ChatMessage *msgs,
                       int n_msgs, const Options *o, int *n) {
    char err[512];
    size_t plen = strlen(o->prompt),
           cap = ct ? chat_max_tokens(ct, tok, msgs, n_msgs) : tokenizer_max_tokens(tok, plen);
    int *tokens = malloc(sizeof(int) * (cap ? cap : 1));
    if (!tokens) die("out of memory");
    if (ct && (*n = chat_render(ct, tok, msgs, n_msgs, 1, tokens, (int)cap, err, sizeof err)) < 0)
        die("%s: %s", input_name(o->chat_path), err);
    if (!ct) check_utf8("prompt", o->prompt, plen);
    if (!ct) *n = encode_prompt(tok, c, o, "prompt", o->prompt, plen, tokens);
    if (*n > c->seq_len)
        die("%s: %d tokens, longer than the model's context of %d", ct ? input_name(o->chat_path) : "prompt", *n,
            c->seq_len);
    return tokens;
}

// Writes the continuation of tokens (n_prompt of them, malloc'd: generate owns them), after the
// prompt's text when the prompt was text; a conversation's reply ends at the end of the turn.
static void generate(const Model *m, const Tokenizer *tok, const ChatTemplate *ct, RunState *s, Sampler *sampler,
                     const Options *o, int *tokens, int n_prompt) {
    const Config *c = &m->config;
    int *window = malloc(sizeof(int) * c->seq_len);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    if (!window || !logits) die("out of memory");
    // -n 0 stops where the context is full; any other count, 256 by default, runs on past it.
    // tokens then grows to hold the whole history, which the repetition penalty looks back on.
    int n_new = o->steps > 0 ? o->steps : o->steps < 0 ? DEFAULT_NEW_TOKENS : c->seq_len - n_prompt;
    int *history = realloc(tokens, sizeof(int) * ((size_t)n_prompt + n_new));
    if (!history) die("out of memory");
    tokens = history;
    TokSanitizer san = {0};
    if (!ct) print_piece(&san, o->prompt, strlen(o->prompt), 0);

    double t0 = now_s();
    forward_or_die(m, s, tokens, n_prompt, 0, logits, NULL, NULL);
    double t1 = now_s();
    int n = n_prompt, pos = n_prompt, shifts = 0; // tokens so far; of them in the KV cache
    while (n < n_prompt + n_new) {
        int next = sample(sampler, logits, tokens, n);
        if (ct ? chat_is_end_of_turn(ct, tok, next) : tokenizer_is_stop(tok, next)) break;
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

// The attention weights at every prompt position (-m attention), copied from the forward pass
// itself (model/forward.h's s->keep) and laid out as docs/ATTENTION.md says: int32 T, layers,
// heads; T int32 ids; float32 [layers][heads][T][T]; then the labels the plots use: "LABL",
// int32 first layer, first head, query heads per key/value head, each layer's window, each
// token's text (int32 length, bytes). Whole or not at all, as -m logits writes.
#define ATTENTION_MAX_BYTES (1ull << 30)
#define LABELS_MAGIC "LABL"

typedef struct {
    const Config *c;
    const Tokenizer *tok;
    const int *tokens;
    int n, range[2][2]; // layers and heads kept: [first, last]
    const float *weights;
} AttentionFile;

// A token as the plots write it: the text it decodes to after prev, or, for a token that decodes
// to nothing (BOS, EOS, special tokens), its own spelling.
static const char *token_label(const Tokenizer *tok, int prev, int id, size_t *len) {
    const char *text = tokenizer_decode(tok, prev, id, len);
    if (*len) return text;
    *len = tok->len[id];
    return tok->bytes + tok->offset[id];
}

static uint64_t labels_bytes(const AttentionFile *f) {
    uint64_t bytes = 4 + 3 * sizeof(int32_t) + sizeof(int32_t) * (f->range[0][1] - f->range[0][0] + 1);
    for (int t = 0; t < f->n; t++) {
        size_t len;
        token_label(f->tok, t ? f->tokens[t - 1] : -1, f->tokens[t], &len);
        bytes += sizeof(int32_t) + len;
    }
    return bytes;
}

static void write_attention(Sink *sink, const void *ctx) {
    const AttentionFile *f = ctx;
    const Config *c = f->c;
    int32_t head[3] = {f->n, f->range[0][1] - f->range[0][0] + 1, f->range[1][1] - f->range[1][0] + 1};
    sink_write(sink, head, sizeof head);
    sink_write(sink, f->tokens, sizeof(int32_t) * f->n);
    sink_write(sink, f->weights, sizeof(float) * head[1] * head[2] * (size_t)f->n * f->n);
    int32_t labels[3] = {f->range[0][0], f->range[1][0], c->n_heads / c->n_kv_heads};
    sink_write(sink, LABELS_MAGIC, 4);
    sink_write(sink, labels, sizeof labels);
    for (int l = f->range[0][0]; l <= f->range[0][1]; l++) {
        int32_t window = layer_is_local(c, l) ? c->sliding_window : 0;
        sink_write(sink, &window, sizeof window);
    }
    for (int t = 0; t < f->n; t++) {
        size_t len;
        const char *text = token_label(f->tok, t ? f->tokens[t - 1] : -1, f->tokens[t], &len);
        int32_t n = (int32_t)len;
        sink_write(sink, &n, sizeof n);
        sink_write(sink, text, len);
    }
}

// --layers or --heads against the model's count of them: range (all of them when not given).
static void select_range(int range[2], const int given[2], const char *flag, const char *what, int count,
                         const char *model_path) {
    range[0] = given[0] < 0 ? 0 : given[0];
    range[1] = given[0] < 0 ? count - 1 : given[1];
    char as_given[32];
    snprintf(as_given, sizeof as_given, given[0] == given[1] ? "%d" : "%d-%d", given[0], given[1]);
    if (range[1] >= count) die("%s %s: %s has %d %s, 0-%d", flag, as_given, model_path, count, what, count - 1);
}

// tokens: n prompt ids, malloc'd; dump_attention owns them.
static void dump_attention(const Model *m, const Tokenizer *tok, RunState *s, const Options *o, int *tokens, int n) {
    const Config *c = &m->config;
    AttentionFile f = {.c = c, .tok = tok, .tokens = tokens, .n = n};
    select_range(f.range[0], o->layers, "--layers", "layers", c->n_layers, o->model_path);
    select_range(f.range[1], o->heads, "--heads", "query heads", c->n_heads, o->model_path);
    int layers = f.range[0][1] - f.range[0][0] + 1, heads = f.range[1][1] - f.range[1][0] + 1;
    size_t floats = (size_t)layers * heads * n * n;
    uint64_t bytes = 3 * sizeof(int32_t) + sizeof(int32_t) * (uint64_t)n + sizeof(float) * floats + labels_bytes(&f);
    if (bytes > ATTENTION_MAX_BYTES)
        die("-m attention: %d tokens x %d layers x %d heads make a %.2f GiB file, over the 1 GiB limit; select fewer "
            "with --layers A-B and --heads A-B, or shorten the prompt",
            n, layers, heads, bytes / 1073741824.0);
    float *weights = calloc(floats, sizeof(float)); // masked entries stay 0: the forward never writes them
    if (!weights) die("-m attention: out of memory for %.0f MiB of attention weights", floats * 4 / 1048576.0);
    AttentionKeep keep = {weights, f.range[0][0], layers, f.range[1][0], heads, n};
    s->keep = &keep;
    for (int done = 0, T; done < n; done += T) {
        T = n - done < s->max_batch ? n - done : s->max_batch;
        forward(c, &m->weights, s, tokens + done, T, done, NULL, T);
    }
    s->keep = NULL;
    for (size_t i = 0; i < floats; i++)
        if (!isfinite(weights[i])) {
            size_t row = i / n;
            die("%s: the attention weights of layer %d, head %d at position %d are not finite: the weights hold NaN "
                "or Inf, or overflow",
                o->model_path, f.range[0][0] + (int)(row / n / heads), f.range[1][0] + (int)(row / n % heads),
                (int)(row % n));
        }
    f.weights = weights;
    char err[512] = "";
    int rc = write_output(o->out_path, write_attention, &f, err, sizeof err);
    free(tokens);
    free(weights);
    if (rc) die("%s", err);
}

// ----------------------------------------------------------------------------
// Chat: chat/conversation.h keeps the conversation and runs the model through these.

typedef struct {
    const Model *m;
    RunState *s;
    Sampler *sampler;
    float *logits; // (vocab_size) the last position's
    TokSanitizer san;
} ChatModel;

static void chat_forward(void *ctx, const int *ids, int n, int pos0) {
    ChatModel *cm = ctx;
    forward_or_die(cm->m, cm->s, ids, n, pos0, cm->logits, NULL, NULL);
}

static int chat_sample(void *ctx, const int *history, int n) {
    ChatModel *cm = ctx;
    return sample(cm->sampler, cm->logits, history, n);
}

static void chat_print(void *ctx, const char *piece, size_t len, int flush) {
    ChatModel *cm = ctx;
    print_piece(&cm->san, piece, len, flush);
}

// The chat format: --chat-template's family, else the model file's chat section.
static void load_template(ChatTemplate *ct, const Model *m, const Tokenizer *tok, const Options *o) {
    char err[512], families[128];
    if (o->template_name) {
        if (chat_template_by_name(ct, o->template_name, tok, err, sizeof err))
            die("--chat-template %s: %s", o->template_name, err);
    } else if (!m->chat_bytes) {
        die("%s: the model file has no chat template; name its format with --chat-template NAME (%s)", o->model_path,
            chat_families(families, sizeof families));
    } else if (chat_template_init(ct, m->chat_section, m->chat_bytes, m->version, tok, err, sizeof err)) {
        die("%s: chat template: %s", o->model_path, err);
    } else if (ct->family == CHAT_NONE) {
        chat_template_free(ct);
        die("%s: the model's chat template is of no family this build formats; name its format with "
            "--chat-template NAME (%s)",
            o->model_path, chat_families(families, sizeof families));
    }
}

static void chat(const Model *m, const Tokenizer *tok, const ChatTemplate *ct, RunState *s, Sampler *sampler,
                 const Options *o, const ChatMessage *msgs, int n_msgs) {
    const Config *c = &m->config;
    ChatModel cm = {.m = m, .s = s, .sampler = sampler, .logits = malloc(sizeof(float) * c->vocab_size)};
    Conversation cv;
    if (!cm.logits || conversation_init(&cv, ct, tok, c->seq_len)) die("out of memory");
    // A local layer's ring (model/forward.h) still holds what positions up to max_batch back need.
    cv.rewind_limit = s->ring ? s->max_batch : c->seq_len;
    cv.max_new = o->steps < 0 ? DEFAULT_NEW_TOKENS : o->steps;
    cv.interactive = isatty(STDIN_FILENO);
    for (int i = 0; i < n_msgs; i++)
        if (conversation_add(&cv, msgs[i].role, msgs[i].text, msgs[i].len)) die("out of memory");
    ChatRunner runner = {&cm, chat_forward, chat_sample, chat_print};
    char err[512];
    int rc = conversation_run(&cv, &runner, err, sizeof err);
    conversation_free(&cv);
    free(cm.logits);
    if (rc) die("%s", err);
}

// ----------------------------------------------------------------------------

// --verify: the layout checks, then the checksum over the whole file; one line, and the exit code.
_Noreturn static void verify(const char *path) {
    Model m;
    char err[512];
    if (model_open(&m, path, err, sizeof err)) die("%s", err);
    int version = m.version;
    model_close(&m);
    if (model_verify_checksum(path, err, sizeof err)) die("%s", err);
    if (version < 5)
        printf("%s: ok (format version %d, which has no checksum: only its layout was checked)\n", path, version);
    else printf("%s: ok\n", path);
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
    exit(0);
}

int main(int argc, char **argv) {
    prefer_passive_threads(argv);
    Options o = parse_options(argc, argv);
    if (o.verify) verify(o.model_path);
    const char *out_file = o.out_path && strcmp(o.out_path, "-") ? o.out_path : NULL; // -o -: stdout
    if (same_file(out_file, o.model_path) || same_file(out_file, o.text_path) ||
        same_file(out_file, o.tokenizer_path) || same_file(out_file, o.chat_path))
        die("-o %s is also an input: writing it would destroy it", out_file);
    signal(SIGXFSZ, SIG_IGN); // past `ulimit -f` a write fails (and is reported) instead of killing run
    char err[512];
    if (out_file && check_output(out_file, err, sizeof err)) die("%s", err);
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

    ChatTemplate ct;
    int templated = !strcmp(o.mode, "chat") || o.chat_path, n_msgs = 0;
    ChatMessage *msgs = NULL;
    if (templated && chat_messages_load(o.chat_path, o.system, &msgs, &n_msgs, err, sizeof err)) die("%s", err);
    if (templated) load_template(&ct, &m, &tok, &o);

    if (!strcmp(o.mode, "ppl")) perplexity(&m, &tok, &s, &o);
    else if (!strcmp(o.mode, "chat")) chat(&m, &tok, &ct, &s, &sampler, &o, msgs, n_msgs);
    else {
        int n, *tokens = prompt_ids(&tok, c, templated ? &ct : NULL, msgs, n_msgs, &o, &n);
        if (!strcmp(o.mode, "logits")) dump_logits(&m, &s, &o, tokens, n);
        else if (!strcmp(o.mode, "attention")) dump_attention(&m, &tok, &s, &o, tokens, n);
        else generate(&m, &tok, templated ? &ct : NULL, &s, &sampler, &o, tokens, n);
    }

    int threads = max_threads();
    static const char *const weight_names[WEIGHT_TYPES] = {"float32", "Q8_0", "bfloat16", "float16",
                                                           "of a type per matrix"};
    char weights[48];
    snprintf(weights, sizeof weights, "%s", weight_names[c->weight_type]);
    if (c->weight_type == WEIGHTS_Q8_0) snprintf(weights, sizeof weights, "Q8_0, groups of %d", c->group_size);
    fprintf(stderr, "%s: %d layer%s, dim %d, vocab %d, context %d, weights %s; loaded in %.0f ms; %d thread%s\n",
            o.model_path, c->n_layers, plural(c->n_layers), c->dim, c->vocab_size, c->seq_len, weights, load_ms,
            threads, plural(threads));
    free(prompt_file);
    chat_messages_free(msgs, n_msgs);
    if (templated) chat_template_free(&ct);
    sampler_free(&sampler);
    state_free(&s);
    tokenizer_free(&tok);
    model_close(&m);
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
    return 0;
}
