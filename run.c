// run.c: generate text with, score text against, or chat with one attn.c model file.
//   ./run model.bin -i "Once upon a time"
//   ./run model.bin -m chat
// Data flows one way: load (model.h maps the file) → tokenize → forward → sample → print.
#include <ctype.h>
#include <signal.h>
#include <time.h>
#include "model.h"
#include "tokenizer.h"
#include "chat/chat.h"
#include "chat/messages.h"
#include "chat/conversation.h"
#include "chat/console.h"

static const char *prog = "run";
#include "io/cli.h"
#include "io/run_options.h"
#include "io/attention_dump.h"
#include "io/map_guard.h"
#include "io/sampling_settings.h"
#include "generate/forward_run.h"
#include "generate/score.h"
#include "generate/speculative.h"

// Rows a prompt runs through the model at once: enough for sgemm to run at speed.
#define PROMPT_BATCH 256
// Bytes of a decoded piece sanitized at a time (a piece may be a long added token).
#define PRINT_CHUNK 256

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

// A run's context unless -c says otherwise: the model's, up to this many positions, as llama.cpp's
// default -c 4096. Its KV cache is allocated for the context, and a model's 128k would take gigabytes.
#define DEFAULT_CONTEXT 4096
static int model_context; // the model's own context, which -c or the default may shorten

// The context a run keeps: -c's (at most the model's), else the model's up to DEFAULT_CONTEXT.
static int run_context(const Options *o, const char *path, int model_seq_len) {
    if (o->context > model_seq_len)
        die("-c %d: %s's context is %d positions; -c can only shorten it", o->context, path, model_seq_len);
    return o->context ? o->context : model_seq_len < DEFAULT_CONTEXT ? model_seq_len : DEFAULT_CONTEXT;
}

// How a message names the context: the model's, the shorter one -c asked for, or the default's.
static const char *context_phrase(const Options *o, int seq_len, char *buf, size_t size) {
    if (o->context) snprintf(buf, size, "the context of %d set with -c", seq_len);
    else if (seq_len < model_context)
        snprintf(buf, size, "the default context of %d (-c N: up to the model's %d)", seq_len, model_context);
    else snprintf(buf, size, "the model's context of %d", seq_len);
    return buf;
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

// The last byte print_piece wrote (0: none yet), so that a terminal's output can end its line.
static char last_printed;

// Streams decoded bytes to stdout whole characters at a time, with control bytes dropped
// and invalid UTF-8 shown as U+FFFD, so that no model output can drive the terminal.
static void print_piece(TokSanitizer *san, const char *piece, size_t len, int flush) {
    char buf[3 * PRINT_CHUNK + 12]; // each byte may become a 3-byte U+FFFD, plus a held-back character
    do {
        size_t n = len < PRINT_CHUNK ? len : PRINT_CHUNK,
               out = tokenizer_sanitize(san, piece, n, buf, flush && n == len);
        fwrite(buf, 1, out, stdout);
        if (out) last_printed = buf[out - 1];
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
    char err[512], context[64];
    size_t plen = strlen(o->prompt), least = ct ? chat_min_tokens(tok, msgs, n_msgs) : tokenizer_min_tokens(tok, plen);
    const char *name = ct ? input_name(o->chat_path) : o->text_path ? input_name(o->text_path) : "prompt";
    // refused by its length alone: tokenizing a text of many megabytes takes seconds and gigabytes
    if (least > (size_t)c->seq_len)
        die("%s: at least %zu tokens by its length, longer than %s", name, least,
            context_phrase(o, c->seq_len, context, sizeof context));
    size_t cap = ct ? chat_max_tokens(ct, tok, msgs, n_msgs) : tokenizer_max_tokens(tok, plen);
    int *tokens = malloc(sizeof(int) * (cap ? cap : 1));
    if (!tokens) die("out of memory");
    if (ct && (*n = chat_render(ct, tok, msgs, n_msgs, 1, tokens, (int)cap, err, sizeof err)) < 0)
        die("%s: %s", input_name(o->chat_path), err);
    if (!ct) check_utf8("prompt", o->prompt, plen);
    if (!ct) *n = encode_prompt(tok, c, o, "prompt", o->prompt, plen, tokens);
    if (*n > c->seq_len)
        die("%s: %d tokens, longer than %s", name, *n, context_phrase(o, c->seq_len, context, sizeof context));
    return tokens;
}

// Appends next to the text (its bytes to stdout) unless it ends it: 0 then, else 1.
static int emit(const Tokenizer *tok, const ChatTemplate *ct, TokSanitizer *san, int *tokens, int *n, int next) {
    if (ct ? chat_is_end_of_turn(ct, tok, next) : tokenizer_is_stop(tok, next)) return 0;
    size_t len;
    const char *piece = tokenizer_decode(tok, tokens[*n - 1], next, &len);
    print_piece(san, piece, len, 0);
    tokens[(*n)++] = next;
    return 1;
}

// Appends one continuation to tokens [n_prompt] (room for n_new more), printing it; the cache
// holds the prompt (all but its last token with sp, which verifies that one with its drafts)
// and, without sp, logits follow it. Returns the tokens appended; *shifts counts the times the
// full context moved on.
static int continue_prompt(const Model *m, const Tokenizer *tok, const ChatTemplate *ct, RunState *s, Sampler *sampler,
                           Speculator *sp, TokSanitizer *san, int *tokens, int n_prompt, int n_new, int *window,
                           float *logits, int *shifts) {
    const Config *c = &m->config;
    int n = n_prompt, limit = n_prompt + n_new, ended = 0;
    while (sp && !ended && n < limit && n <= c->seq_len) {
        int from = n, got = speculate(sp, m, s, sampler, tokens, n, limit - n);
        for (int i = 0; i < got && !ended; i++) ended = !emit(tok, ct, san, tokens, &n, tokens[from + i]);
    }
    // pos: where tokens[n - 1] goes in the cache; ready: logits already follow it (the prompt's)
    int pos = sp ? n - 1 : n_prompt, ready = !sp;
    while (!ended && n < limit) {
        if (!ready && pos < c->seq_len) {
            forward_or_die(m, s, &tokens[n - 1], 1, pos++, logits, NULL, NULL);
        } else if (!ready) {
            pos = shift_window(m, s, tokens, n, window, logits);
            (*shifts)++;
        }
        ready = 0;
        ended = !emit(tok, ct, san, tokens, &n, sample(sampler, logits, tokens, n));
    }
    return n - n_prompt;
}

// What comes between two of --samples' texts: a line of nanoGPT's sample.py's dashes.
#define SAMPLE_SEPARATOR "\n---------------\n"

// Writes --samples continuations of tokens (n_prompt of them, malloc'd: generate owns them),
// each after the prompt's text when the prompt was text, and from the second on each after
// SAMPLE_SEPARATOR (nanoGPT's sample.py's num_samples); a conversation's reply ends at the end of
// the turn. With sp (--lookup, --draft) it speculates while the context has room, then goes on plainly.
static void generate(const Model *m, const Tokenizer *tok, const ChatTemplate *ct, RunState *s, Sampler *sampler,
                     const Options *o, Speculator *sp, int *tokens, int n_prompt) {
    const Config *c = &m->config;
    int *window = malloc(sizeof(int) * c->seq_len);
    float *logits = malloc(sizeof(float) * c->vocab_size), *prompt_logits = malloc(sizeof(float) * c->vocab_size);
    if (!window || !logits || !prompt_logits) die("out of memory");
    // -n 0 stops where the context is full; any other count, 256 by default, runs on past it.
    // tokens then grows to hold the whole history, which the repetition penalty looks back on.
    int n_new = o->steps > 0 ? o->steps : o->steps < 0 ? DEFAULT_NEW_TOKENS : c->seq_len - n_prompt;
    int *history = realloc(tokens, sizeof(int) * ((size_t)n_prompt + n_new));
    if (!history) die("out of memory");
    tokens = history;
    TokSanitizer san = {0};
    tell_seed(o->temperature); // on a line of its own, before the text that it reproduces
    int terminal = isatty(STDOUT_FILENO), shifts = 0, generated = 0;
    double prompt_s = 0, generate_s = 0;
    for (int k = 0, cached = 0; k < o->samples; k++) {
        if (k) print_piece(&san, SAMPLE_SEPARATOR, strlen(SAMPLE_SEPARATOR), 1);
        if (!ct) print_piece(&san, o->prompt, strlen(o->prompt), 0);
        double t0 = now_s();
        // speculation keeps the last token out of the cache: each round verifies it with the drafts
        if (!cached) forward_or_die(m, s, tokens, sp ? n_prompt - 1 : n_prompt, 0, prompt_logits, NULL, NULL);
        memcpy(logits, prompt_logits, sizeof(float) * c->vocab_size);
        // the draft's cache keeps the prompt too, unless its rows went round a ring
        if (sp && sp->draft_state.ring) sp->draft_pos = 0;
        if (sp && sp->draft_pos > n_prompt - 1) sp->draft_pos = n_prompt - 1;
        double t1 = now_s();
        int shifted = shifts;
        generated +=
            continue_prompt(m, tok, ct, s, sampler, sp, &san, tokens, n_prompt, n_new, window, logits, &shifts);
        print_piece(&san, "", 0, 1);
        prompt_s += t1 - t0, generate_s += now_s() - t1;
        // the next sample starts from the prompt's cache rows, unless a later position took them:
        // a moved window, or a local layer's ring gone round
        cached = shifts == shifted && !s->ring;
    }
    // on a terminal the text ends its line, so that the shell's prompt starts a new one
    if (terminal && last_printed && last_printed != '\n') print_piece(&san, "\n", 1, 1);
    if (!o->quiet)
        fprintf(stderr, "%sprompt: %d token%s in %.3f s (%.1f tok/s); generated: %d token%s in %.3f s (%.1f tok/s)",
                terminal ? "" : "\n", n_prompt, plural(n_prompt), prompt_s, n_prompt / prompt_s, generated,
                plural(generated), generate_s, generated > 0 ? generated / generate_s : 0.0);
    if (o->samples > 1 && !o->quiet) fprintf(stderr, "; %d samples", o->samples);
    if (sp && !o->quiet)
        fprintf(stderr, "; drafted %ld, accepted %ld (%.1f%%)", sp->drafted, sp->accepted,
                sp->drafted ? 100.0 * sp->accepted / sp->drafted : 0.0);
    if (shifts && !o->quiet) fprintf(stderr, "; the full context moved on by half %d time%s", shifts, plural(shifts));
    if (!o->quiet) fprintf(stderr, "\n");
    free(tokens);
    free(window);
    free(logits);
    free(prompt_logits);
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
    // --compute bf16,f32 scores the whole text twice, bfloat16 first
    int chunks = 0, bos = c->tok_flags & TOKF_ADD_BOS ? c->bos_id : -1;
    double bf16 = 0.0, f32 = 0.0;
    if (o->compute & COMPUTE_BF16)
        bf16 = o->chunks ? score_chunks(m, s, tokens, n, logits, 1, o, bos, &chunks)
                         : score_text(m, s, tokens, n, logits, 1, o->quiet);
    if (o->compute & COMPUTE_F32)
        f32 = o->chunks ? score_chunks(m, s, tokens, n, logits, 0, o, bos, &chunks)
                        : score_text(m, s, tokens, n, logits, 0, o->quiet);
    printf("tokens: %d\n", n);
    if (o->chunks) printf("chunks: %d of %d tokens, the second half of each scored\n", chunks, c->seq_len);
    printf("perplexity: %.9g\n", o->compute & COMPUTE_F32 ? f32 : bf16);
    if (o->compute == (COMPUTE_F32 | COMPUTE_BF16))
        printf("perplexity bf16: %.9g\nbf16 - f32: %+.6g (%+.4f%%)\n", bf16, bf16 - f32, 100.0 * (bf16 - f32) / f32);
    free(tokens);
    free(logits);
}

// ----------------------------------------------------------------------------
// Chat: chat/conversation.h keeps the conversation and runs the model through these.

typedef struct {
    const Model *m;
    RunState *s;
    Sampler *sampler;
    Speculator *sp; // --lookup, --draft: the reply's steps speculate; NULL: one token a step
    float *logits;  // (vocab_size) the last position's
    TokSanitizer san;
    int *max_new;  // the conversation's -n, which /set max_tokens changes
    uint64_t seed; // the sampler's seed, as /set seed last made it
} ChatModel;

static void chat_forward(void *ctx, const int *ids, int n, int pos0) {
    ChatModel *cm = ctx;
    // the conversation rewinds the cache to pos0 (a turn edited, undone or dropped): the draft's
    // cache keeps only what comes before, and catches up with the rest when it drafts next
    if (cm->sp && cm->sp->draft_pos > pos0) cm->sp->draft_pos = pos0;
    forward_or_die(cm->m, cm->s, ids, n, pos0, cm->logits, NULL, NULL);
}

// A reply's next tokens: one round of generate/speculative.h's speculate, as -m generate's, or
// one token.
static int chat_step(void *ctx, int *ids, int n, int room) {
    ChatModel *cm = ctx;
    if (cm->sp) return speculate(cm->sp, cm->m, cm->s, cm->sampler, ids, n, room);
    forward_or_die(cm->m, cm->s, ids + n - 1, 1, n - 1, cm->logits, NULL, NULL);
    ids[n] = sample(cm->sampler, cm->logits, ids, n);
    return 1;
}

static int chat_drafts(void *ctx, long *drafted, long *accepted) {
    const ChatModel *cm = ctx;
    if (!cm->sp) return -1;
    *drafted = cm->sp->drafted;
    *accepted = cm->sp->accepted;
    return 0;
}

static int chat_sample(void *ctx, const int *history, int n) {
    ChatModel *cm = ctx;
    tell_seed(cm->sampler->temperature);
    return sample(cm->sampler, cm->logits, history, n);
}

static void chat_print(void *ctx, const char *piece, size_t len, int flush) {
    ChatModel *cm = ctx;
    print_piece(&cm->san, piece, len, flush);
}

// /set NAME VALUE, checked as the flag of the same meaning is (io/run_options.h).
static int chat_set(void *ctx, const char *name, const char *value, char *err, size_t errlen) {
    ChatModel *cm = ctx;
    Sampler *sp = cm->sampler;
    double x;
    int k;
    uint64_t seed;
    if (!strcmp(name, "temperature") && !check_num(name, value, 0, 100, &x, err, errlen)) sp->temperature = (float)x;
    else if (!strcmp(name, "top_p") && !check_num(name, value, 0, 1, &x, err, errlen)) sp->topp = (float)x;
    else if (!strcmp(name, "min_p") && !check_num(name, value, 0, 1, &x, err, errlen)) sp->minp = (float)x;
    else if (!strcmp(name, "repeat_penalty") && !check_num(name, value, 0.01, 100, &x, err, errlen))
        sp->repeat_penalty = (float)x;
    else if (!strcmp(name, "top_k") && !check_int(name, value, 0, 1 << 24, &k, err, errlen)) sp->topk = k;
    else if (!strcmp(name, "max_tokens") && !check_int(name, value, 0, 1 << 20, &k, err, errlen)) *cm->max_new = k;
    else if (!strcmp(name, "seed") && !check_seed(name, value, &seed, err, errlen))
        sp->rng_state = cm->seed = seed ? seed : clock_seed(); // as -s, 0 from the clock
    else return -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, sampling_names[i])) sampling_from_set |= 1 << i;
    return 0;
}

// A setting's value; a sampling setting's with where it came from ("0.6 (model)"); "sampling":
// sampling_summary.
static void chat_get(void *ctx, const char *name, char *buf, size_t size) {
    const ChatModel *cm = ctx;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, sampling_names[i])) {
            char value[32];
            sampling_value(cm->sampler, i, value, sizeof value);
            snprintf(buf, size, "%s (%s)", value, sampling_source(1 << i));
            return;
        }
    if (!strcmp(name, "sampling")) sampling_summary(cm->sampler, buf, size);
    else if (!strcmp(name, "max_tokens")) snprintf(buf, size, "%d", *cm->max_new);
    else snprintf(buf, size, "%llu", (unsigned long long)cm->seed);
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

// On a terminal the turns come from the line editor (chat/console.h), else from stdin's lines.
static void chat(const Model *m, const Tokenizer *tok, ChatTemplate *ct, RunState *s, Sampler *sampler, Speculator *sp,
                 uint64_t seed, const Options *o, const ChatMessage *msgs, int n_msgs) {
    const Config *c = &m->config;
    Conversation cv;
    ChatModel cm = {.m = m,
                    .s = s,
                    .sampler = sampler,
                    .sp = sp,
                    .logits = malloc(sizeof(float) * c->vocab_size),
                    .max_new = &cv.max_new,
                    .seed = seed};
    if (!cm.logits || conversation_init(&cv, ct, tok, c->seq_len)) die("out of memory");
    // A local layer's ring (model/forward.h) still holds what positions up to max_batch back need;
    // a speculative round may have written up to draft_max positions past the cached ones.
    int ring = s->ring || (sp && sp->draft.map && sp->draft_state.ring);
    cv.rewind_limit = ring ? s->max_batch - (sp ? sp->draft_max : 0) : c->seq_len;
    cv.batch = s->max_batch;
    cv.max_new = o->steps < 0 ? DEFAULT_NEW_TOKENS : o->steps;
    cv.interactive = isatty(STDIN_FILENO);
    cv.quiet = o->quiet;
    cv.model_name = o->model_path;
    for (int i = 0; i < n_msgs; i++)
        if (conversation_add(&cv, msgs[i].role, msgs[i].text, msgs[i].len)) die("out of memory");
    ChatRunner runner = {&cm, chat_forward, chat_sample, chat_step, chat_drafts, chat_print, chat_set, chat_get};
    char err[512], history[4096];
    ChatLines lines = {0};
    ChatInput in = {&lines, chat_lines_read, NULL};
    Console *console = NULL;
    if (cv.interactive && !o->quiet) seed_from_clock = 0;     // the banner shows it
    else if (cv.interactive) tell_seed(sampler->temperature); // before the first prompt, not inside a reply
    if (cv.interactive) {
        int keep = !o->no_history && !console_history_path(history, sizeof history);
        if (!(console = console_open(prog, keep ? history : NULL, err, sizeof err))) die("%s", err);
        in = (ChatInput){console, console_read_line, console_remember};
        cv.screen = console_screen(console);
    }
    int rc = conversation_run(&cv, &runner, &in, err, sizeof err);
    console_close(console);
    chat_lines_free(&lines);
    conversation_free(&cv);
    free(cm.logits);
    if (rc) die("%s", err);
}

// ----------------------------------------------------------------------------

// The banner's weights: a type for the file, or a type per matrix counted as llama.cpp's loader
// counts them ("Q4_K 10, Q6_K 6, F16 1"), the most common first.
static void weights_banner(const Config *c, char *buf, size_t size) {
    static const char *const weight_names[WEIGHTS_PER_MATRIX] = {"float32", "Q8_0", "bfloat16", "float16"};
    if (c->weight_type == WEIGHTS_Q8_0) snprintf(buf, size, "Q8_0, groups of %d", c->group_size);
    else if (c->weight_type != WEIGHTS_PER_MATRIX) snprintf(buf, size, "%s", weight_names[c->weight_type]);
    if (c->weight_type != WEIGHTS_PER_MATRIX) return;
    int count[MATRIX_TYPES] = {0}, n = matrix_count(c);
    for (int k = 0; k < n; k++) count[matrix_type_of_ggml(((const uint8_t *)c->type_table)[k])]++;
    size_t len = (size_t)snprintf(buf, size, "per matrix: ");
    for (int most = n; most > 0; most--)
        for (int t = 0; t < MATRIX_TYPES; t++)
            if (count[t] == most && len < size)
                len += (size_t)snprintf(buf + len, size - len, "%s%s %d", buf[len - 1] == ' ' ? "" : ", ",
                                        matrix_types[t].name, most);
}

// --verify of ./train's MODEL.state: its CRC-32 (the last four bytes, of all before them).
_Noreturn static void verify_state(const char *path) {
    char err[512];
    uint64_t step;
    if (state_verify_checksum(path, &step, err, sizeof err)) die("%s", err);
    printf("%s: ok (./train's resume state, step %llu)\n", path, (unsigned long long)step);
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
    exit(0);
}

// The model line on stderr (-q: none), with the sampling settings a flag or the model file chose
// unless a chat's banner, which follows, gives them.
static void tell_model(const Config *c, const Options *o, const RunState *s, const Sampler *sp, double load_ms,
                       int with_banner) {
    char weights[256], of_model[48] = "";
    weights_banner(c, weights, sizeof weights);
    if (c->seq_len < model_context) snprintf(of_model, sizeof of_model, " of the model's %d", model_context);
    int threads = max_threads();
    if (!o->quiet)
        fprintf(stderr,
                "%s: %d layer%s, dim %d, vocab %d, context %d%s, weights %s; loaded in %.0f ms; %d thread%s, %s "
                "kernels%s; KV cache %.1f MiB %s\n",
                o->model_path, c->n_layers, plural(c->n_layers), c->dim, c->vocab_size, c->seq_len, of_model, weights,
                load_ms, threads, plural(threads), kernel_level(),
                o->compute & COMPUTE_BF16 && BF16_FAST ? "; prompt products in bfloat16" : "",
                s->cache_bytes / 1048576.0, kv_cache_name(o->kv_cache));
    char sampling[256];
    if (!o->quiet && !with_banner && *sampling_summary(sp, sampling, sizeof sampling))
        fprintf(stderr, "sampling: %s\n", sampling);
}

// The rows a prompt runs at once: the state's batch.
static int prompt_batch(const Config *c) { return c->seq_len < PROMPT_BATCH ? c->seq_len : PROMPT_BATCH; }

// The model's config from its header alone, no weights read, and its file's size; -1 when the
// header is not a good one or does not describe the file's size (model_open then says why).
static int peek_config(const char *path, Config *c, size_t *size) {
    FileHeader h;
    char err[256];
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return -1; // opening a FIFO would wait for a writer
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t got = pread(fd, &h, sizeof h, 0);
    close(fd);
    if (got != (ssize_t)sizeof h || memcmp(h.magic, MODEL_MAGIC, 4) || h.version > MODEL_VERSION ||
        config_from_header(&h, c, err, sizeof err))
        return -1;
    *size = (size_t)st.st_size;
    return h.weights_offset > *size || h.weights_bytes != *size - h.weights_offset ||
                   (c->weight_type != WEIGHTS_PER_MATRIX && carve_weights(c, NULL, NULL) != h.weights_bytes)
               ? -1
               : 0;
}

// Refuses, before the weights are read, a context whose run state (the KV cache above all) and
// weights together do not fit in the memory available (MemAvailable: what others leave).
static void check_fits(const Options *o) {
    Config c;
    size_t file;
    if (peek_config(o->model_path, &c, &file)) return;
    c.seq_len = run_context(o, o->model_path, c.seq_len);
    RunState s;
    double state = (double)state_carve(&s, &c, prompt_batch(&c), o->kv_cache, NULL), have = available_memory();
    if (have >= 0 && state + (double)file > have)
        die("-c %d: %s needs %.0f MiB at this context (KV cache %.0f MiB in %s, other buffers %.0f, weights %.0f), "
            "more than the %.0f MiB available; a shorter context (-c N) or --kv-cache f16 or q8_0 needs less",
            c.seq_len, o->model_path, (state + (double)file) / 1048576.0, s.cache_bytes / 1048576.0,
            kv_cache_name(o->kv_cache), (state - (double)s.cache_bytes) / 1048576.0, file / 1048576.0,
            have / 1048576.0);
}

// --verify: the layout checks, then the checksum over the whole file; one line, and the exit code.
_Noreturn static void verify(const char *path) {
    Model m;
    char err[512];
    if (state_file_step(path) != -1) verify_state(path);
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
    start_with_library_settings(argv);
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
    check_fits(&o);
    Model m;
    if (model_open(&m, o.model_path, err, sizeof err)) die("%s", err);
    model_path = o.model_path;
    guard_mapping(m.map, m.map_bytes, prog, o.model_path, "the model file changed while in use");
    model_context = m.config.seq_len;
    m.config.seq_len = run_context(&o, o.model_path, model_context);
    const Config *c = &m.config;
    if (o.kv_cache == BLOCK_Q8_0 && c->head_dim % 32)
        die("--kv-cache q8_0: %s's head_dim is %d, not a multiple of 32 (a Q8_0 block holds 32 values of one head); "
            "f16 or f32 fits it",
            o.model_path, c->head_dim);
    Tokenizer tok;
    load_tokenizer(&tok, &m, o.model_path, o.tokenizer_path);
    RunState s;
    char context[96];
    if (state_init(&s, c, prompt_batch(c), o.kv_cache))
        die("%s: out of memory for the run state: it needs %.0f MiB at %s; a shorter one (-c N), or --kv-cache f16 or "
            "q8_0, needs less",
            o.model_path, s.bytes / 1048576.0, context_phrase(&o, c->seq_len, context, sizeof context));
    if (o.compute == COMPUTE_BF16 && state_compute_bf16(&s, c, 1)) die("out of memory");
    Speculator spec, *sp = o.lookup || o.draft_path ? &spec : NULL;
    if (sp) speculator_init(sp, &m, o.lookup, o.draft_max, forward_or_die);
    if (o.draft_path) speculator_open_draft(sp, o.draft_path, &m, &tok, model_context, prompt_batch(c), o.kv_cache);
    if (sp) sp->draft_p_min = o.draft_p_min;
    if (o.compute & COMPUTE_BF16 && !BF16_FAST) fprintf(stderr, "%s: note: --compute bf16 %s\n", prog, BF16_NO_SPEED);
    Sampler sampler;
    uint64_t seed = o.seed ? o.seed : clock_seed();
    if (sampler_init(&sampler, c->vocab_size, o.temperature, seed)) die("out of memory");
    if (!o.seed) seed_from_clock = seed;
    sampler.topp = o.topp;
    sampler.topk = o.topk;
    sampler.minp = o.minp;
    sampler.repeat_penalty = o.repeat_penalty;
    sampler.repeat_window = o.repeat_window;
    sampling_given = o.sampling_given;
    use_model_sampling(c, &sampler);
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
    if (templated && o.thinking >= 0 && ct.family != CHAT_QWEN3)
        die("%s: only the qwen3 chat format thinks; this one is %s", o.thinking ? "--think" : "--no-think",
            chat_family_name(ct.family));
    if (templated) ct.no_thinking = o.thinking == 0;

    // a chat on a terminal may last hours: its model line comes first, with its banner
    int model_first = !strcmp(o.mode, "chat") && isatty(STDIN_FILENO);
    if (model_first) tell_model(c, &o, &s, &sampler, load_ms, 1);
    if (!strcmp(o.mode, "ppl")) perplexity(&m, &tok, &s, &o);
    else if (!strcmp(o.mode, "chat")) chat(&m, &tok, &ct, &s, &sampler, sp, seed, &o, msgs, n_msgs);
    else {
        int n, *tokens = prompt_ids(&tok, c, templated ? &ct : NULL, msgs, n_msgs, &o, &n);
        if (!strcmp(o.mode, "logits")) dump_logits(&m, &s, &o, tokens, n);
        else if (!strcmp(o.mode, "attention")) dump_attention(&m, &tok, &s, &o, tokens, n);
        else generate(&m, &tok, templated ? &ct : NULL, &s, &sampler, &o, sp, tokens, n);
    }

    if (!model_first) tell_model(c, &o, &s, &sampler, load_ms, 0);
    free(prompt_file);
    chat_messages_free(msgs, n_msgs);
    if (templated) chat_template_free(&ct);
    sampler_free(&sampler);
    if (sp) speculator_free(sp);
    state_free(&s);
    tokenizer_free(&tok);
    model_close(&m);
    if (fflush(stdout) || ferror(stdout)) die("stdout: cannot write: %s", strerror(errno));
    return 0;
}
