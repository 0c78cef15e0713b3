// io/run_options.h: ./run's command line: the options, their defaults, --help and the checks
// that refuse a flag the mode would ignore. It reads argv and nothing else; run.c includes it
// after io/cli.h (die) and chat/chat.h (the families --help lists).
#ifndef ATTN_IO_RUN_OPTIONS_H
#define ATTN_IO_RUN_OPTIONS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// New tokens when -n is not given, as llama2.c's default length.
#define DEFAULT_NEW_TOKENS 256
// Speculative decoding's drafts a round: by default 8 (llama.cpp drafts 16 with a model, 5 in
// its older releases), since a rejection early in a long draft wastes the rows after it; at
// most one batch less the token verified with them (run.c's PROMPT_BATCH is 256).
#define DEFAULT_DRAFT_MAX 8
// --draft-p-min's default, llama.cpp's (common.h's speculative p_min): a draft model proposes
// nothing where its most likely token is below this probability.
#define DEFAULT_DRAFT_P_MIN 0.75f
#define MAX_DRAFT 255

// --compute: the arithmetic of the many-token products (a prompt, perplexity's windows).
#define COMPUTE_F32 1
#define COMPUTE_BF16 2

typedef struct {
    const char *model_path, *prompt, *mode, *text_path, *tokenizer_path, *out_path;
    const char *chat_path, *system, *template_name; // --chat, -y, --chat-template
    float temperature, topp, minp, repeat_penalty;
    int topk, steps, threads, repeat_window, context;
    int samples;            // --samples N: -m generate's continuations of the one prompt
    int special;            // --special: the text's spelling of a special token becomes that token
    int verify;             // --verify: check the file's checksum and exit
    int quiet;              // -q: no banner, timings or summary on stderr
    int no_history;         // --no-history: -m chat keeps no history file
    int thinking;           // --think 1, --no-think 0, else -1 (the template's default)
    int compute;            // --compute: COMPUTE_F32 and/or COMPUTE_BF16 (both only for -m ppl)
    int chunks;             // -m ppl --chunks: 0 without, -1 all, else at most that many (llama-perplexity's scoring)
    int kv_cache;           // --kv-cache: the KV cache's elements, WEIGHTS_F32, WEIGHTS_F16 or BLOCK_Q8_0
    int lookup;             // --lookup N: drafts from the context's earlier match of its last N tokens, or 0
    int draft_max;          // --draft-max K: tokens drafted a round at most
    const char *draft_path; // --draft MODEL: drafts from this smaller model with the same tokenizer
    float draft_p_min;      // --draft-p-min P: the draft model drafts no token it gives less than P
    int sampling_given;     // SAMPLING_* bits of the flags given (-t -p -k --min-p -r): they beat the model's
    // -m attention's --layers A-B and --heads A-B, inclusive; {-1, -1} when not given: all of them
    int layers[2], heads[2];
    uint64_t seed;
    const char *sampling_flag; // the first sampling flag given, refused outside generate
} Options;

static void usage(FILE *f) {
    char families[128];
    fprintf(
        f,
        "usage: run MODEL [options]\n"
        "  -i TEXT      prompt (default: empty: the model starts from BOS, else EOS, else a newline)\n"
        "  -n N         new tokens to generate (default 256); past a full context the window moves\n"
        "               on by half; 0 = until end-of-sequence or the context is full\n"
        "  -t T         temperature; 0 = greedy (default 1.0)\n"
        "               (-t -p -k --min-p -r: a model converted with its generation_config.json has\n"
        "               its own defaults, used unless the flag is given)\n"
        "  -p P         top-p (nucleus) in [0, 1]; 0 or 1 = off (default 0.9)\n"
        "  -k K         top-k; 0 = off (default 0)\n"
        "  --min-p P    drop tokens below P x the most likely one's probability; 0 = off (default 0)\n"
        "  -r R         repetition penalty, CTRL-style; 1 = off (default 1)\n"
        "  --repeat-window N  positions the penalty looks back over; 0 = all (default 64)\n"
        "  -s SEED      random seed; 0 = from the clock and process id (default 0)\n"
        "  --samples N  N continuations of the one prompt, each after a line of dashes from the second\n"
        "               on, the prompt's cache kept between them (default 1)\n"
        "  -m MODE      generate | ppl | logits | attention | chat (default generate)\n"
        "  -f FILE      -m ppl: the text to score; otherwise the prompt, read from FILE as it is;\n"
        "               - reads standard input\n"
        "  -c N         context length in positions, up to the model's (default: the model's, at most 4096);\n"
        "               the KV cache is allocated for it\n"
        "  -o FILE      where -m logits writes the prompt's logits (int32 T, int32 vocab, int32 tokens[T],\n"
        "               float32 logits[T][vocab]), and -m attention the attention weights at every prompt\n"
        "               position (int32 T, int32 layers, int32 heads, int32 tokens[T],\n"
        "               float32 weights[layers][heads][T][T], then labels: docs/ATTENTION.md);\n"
        "               - writes them to standard output\n"
        "  --layers A-B -m attention: only layers A to B (from 0; one number for one layer)\n"
        "  --heads A-B  -m attention: only query heads A to B; the file's layers and heads count these\n"
        "  -z FILE      use this llama2.c tokenizer.bin instead of the model's own tokenizer\n"
        "  --special    special tokens spelled in the text (<|im_end|>, <end_of_turn>) become those tokens;\n"
        "               without it they are text, as any other characters\n"
        "  --chat FILE  a conversation, [{\"role\": \"system\"|\"user\"|\"assistant\", \"content\": \"...\"}, ...]:\n"
        "               -m chat starts from it; -m generate writes the assistant's next reply; -m logits\n"
        "               scores the prompt the chat template renders from it (generation prompt included);\n"
        "               - reads standard input (not with -m chat, whose turns come from there)\n"
        "  -y TEXT      -m chat or --chat: the system prompt (default: the template's own, if any)\n"
        "  --chat-template NAME  the chat format, for a model file without one or to override it:\n"
        "               %s\n"
        "  --think, --no-think  Qwen3's chat format: think before replying, or not (enable_thinking true or\n"
        "               false in its template; default: think)\n"
        "  --no-history -m chat: keep no history of typed lines (default: $XDG_STATE_HOME/attn.c/chat_history,\n"
        "               else ~/.local/state/attn.c/chat_history)\n"
        "  -q           quiet: no banner, no timings and no summary on stderr (errors still)\n"
        "  -j N         threads (default: OMP_NUM_THREADS, else every core)\n"
        "  --compute C  the many-token products (prompt, -m ppl): f32 (default), or bf16: their inputs\n"
        "               rounded to bfloat16, float32 sums, about twice the speed on AVX512_BF16 (generation\n"
        "               stays exact); -m ppl takes bf16,f32 to score both and print the difference\n"
        "  --kv-cache T the KV cache's numbers: f32 (default, exact) or f16 (llama.cpp's default): half the\n"
        "               memory and half the bytes each token's attention reads; keys and values rounded;\n"
        "               or q8_0 (llama.cpp's -ctk q8_0 -ctv q8_0): about a quarter of f32's\n"
        "  --lookup N   speculative decoding from the text itself (prompt lookup): the tokens that followed\n"
        "               the earlier match of the last N tokens are drafted and checked in one batched pass;\n"
        "               the same text at -t 0, the same distribution with sampling; pays where the reply\n"
        "               repeats the prompt\n"
        "  --draft FILE speculative decoding with a small draft model of the same tokenizer and context;\n"
        "               with --lookup, the draft model drafts where the text has no earlier match\n"
        "  --draft-max K  tokens drafted a round at most (default %d, at most %d)\n"
        "  --draft-p-min P  --draft stops drafting where its most likely token's probability is below P,\n"
        "               in [0, 1] (default %.2f)\n"
        "  --chunks N   -m ppl as llama-perplexity scores: chunks of the context (-c) each from a fresh\n"
        "               cache, its first token BOS when the tokenizer adds one, the second half of each\n"
        "               scored; N chunks at most, or all (default: every token once, windows overlapping by one)\n"
        "  --verify     read the whole model file and check its checksum (files of format version 5 and\n"
        "               later; ./train's MODEL.state too): prints ok or that the file is damaged, and\n"
        "               exits 0 or 1\n"
        "  -h, --help   this text\n"
        "-n -t -p -k --min-p -r --repeat-window -s and --samples shape generation; -m ppl, logits and\n"
        "attention refuse them. -m attention refuses a file over 1 GiB: select fewer layers or heads, or\n"
        "shorten the prompt.\n"
        "Text goes to stdout (exactly the prompt, then the continuation; with --chat only the reply); timings go\n"
        "to stderr. The seed is printed to stderr when it comes from the clock.\n"
        "-m chat: type a message after the prompt marker; the reply streams; Ctrl-C stops a reply, Ctrl-D or\n"
        "/bye ends the conversation, /help lists the commands (docs/CHAT.md). When standard input is not a\n"
        "terminal each line is a turn (empty and blank lines skipped) and each reply is written followed by\n"
        "an empty line.\n",
        chat_families(families, sizeof families), DEFAULT_DRAFT_MAX, MAX_DRAFT, DEFAULT_DRAFT_P_MIN);
}

// The value after a flag, or a one-line error when the flag came last.
static const char *value(const char *flag, const char *s) {
    if (!s) die("%s needs a value (see --help)", flag);
    return s;
}

// The checks of a flag's value, shared with -m chat's /set: 0, or -1 with the problem in err
// (named by what, the flag or the setting).
static int check_num(const char *what, const char *s, double lo, double hi, double *v, char *err, size_t n) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(*v) || *v < lo || *v > hi)
        return snprintf(err, n, "%s %s: expected a number in [%g, %g]", what, s, lo, hi), -1;
    return 0;
}

static int check_int(const char *what, const char *s, long lo, long hi, int *v, char *err, size_t n) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi)
        return snprintf(err, n, "%s %s: expected a whole number in [%ld, %ld]", what, s, lo, hi), -1;
    *v = (int)x;
    return 0;
}

static int check_seed(const char *what, const char *s, uint64_t *v, char *err, size_t n) {
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-')
        return snprintf(err, n, "%s %s: expected a whole number in [0, 2^64)", what, s), -1;
    return 0;
}

static double parse_num(const char *flag, const char *s, double lo, double hi) {
    char err[160];
    double v;
    if (check_num(flag, value(flag, s), lo, hi, &v, err, sizeof err)) die("%s", err);
    return v;
}

static int parse_int(const char *flag, const char *s, long lo, long hi) {
    char err[160];
    int v;
    if (check_int(flag, value(flag, s), lo, hi, &v, err, sizeof err)) die("%s", err);
    return v;
}

// --compute: f32, bf16, or both as bf16,f32 (either order).
static int parse_compute(const char *flag, const char *s) {
    const char *v = value(flag, s);
    if (!strcmp(v, "f32")) return COMPUTE_F32;
    if (!strcmp(v, "bf16")) return COMPUTE_BF16;
    if (!strcmp(v, "bf16,f32") || !strcmp(v, "f32,bf16")) return COMPUTE_F32 | COMPUTE_BF16;
    die("%s %s: expected f32, bf16 or (-m ppl) bf16,f32", flag, v);
}

// --kv-cache: f32, f16 or q8_0.
static int parse_kv_cache(const char *flag, const char *s) {
    const char *v = value(flag, s);
    if (!strcmp(v, "f32")) return WEIGHTS_F32;
    if (!strcmp(v, "f16")) return WEIGHTS_F16;
    if (!strcmp(v, "q8_0")) return BLOCK_Q8_0;
    die("%s %s: expected f32, f16 or q8_0", flag, v);
}

// A --kv-cache type's name as the flag spells it.
static const char *kv_cache_name(int type) { return type == BLOCK_Q8_0 ? "q8_0" : type == WEIGHTS_F16 ? "f16" : "f32"; }

// --layers or --heads: "A-B" or "A", whole numbers from 0 with A <= B, into r[0] and r[1]
// (whether they exist in the model is run.c's to say).
static void parse_range(const char *flag, const char *s, int r[2]) {
    char *end;
    errno = 0;
    long a = strtol(value(flag, s), &end, 10), b = a;
    int digits = *s >= '0' && *s <= '9';
    if (digits && *end == '-') {
        digits = end[1] >= '0' && end[1] <= '9';
        b = strtol(end + 1, &end, 10);
    }
    if (!digits || *end || errno || b < a || b > 1 << 20)
        die("%s %s: expected A-B, numbers from 0 with A <= B, or one number", flag, s);
    r[0] = (int)a, r[1] = (int)b;
}

static uint64_t parse_seed(const char *flag, const char *s) {
    char err[160];
    uint64_t v;
    if (check_seed(flag, value(flag, s), &v, err, sizeof err)) die("%s", err);
    return v;
}

// The chat flags make sense together only in some ways: refuse the others, naming them.
static void check_chat_options(const Options *o, int prompt_given) {
    int chat = !strcmp(o->mode, "chat"), templated = chat || o->chat_path;
    if (chat && (prompt_given || o->text_path))
        die("-m chat takes its turns from the terminal or standard input; -i and -f have no use there");
    if (o->chat_path && !strcmp(o->mode, "ppl")) die("--chat: -m ppl scores the text of -f, not a conversation");
    if (o->chunks && strcmp(o->mode, "ppl")) die("--chunks: how -m ppl scores its text; -m %s scores nothing", o->mode);
    if (o->chat_path && !chat && (prompt_given || o->text_path))
        die("--chat: the prompt is the conversation the template renders; give -i or -f, or --chat, not both");
    if (!templated && o->system) die("-y is the system prompt of -m chat or --chat");
    if (!templated && o->template_name) die("--chat-template names the format of -m chat or --chat");
    if (templated && o->special) die("--special: in a conversation what the user writes is always text");
    if (!templated && o->thinking >= 0)
        die("%s: thinking is part of a chat format: -m chat or --chat", o->thinking ? "--think" : "--no-think");
    if (!chat && o->no_history) die("--no-history: only -m chat keeps a history");
}

// "-" is standard input or output where a stream will do; elsewhere it is refused, not taken
// for a file named "-".
static void check_stdio_options(const Options *o) {
    int chat_stdin = o->chat_path && !strcmp(o->chat_path, "-");
    if (o->tokenizer_path && !strcmp(o->tokenizer_path, "-"))
        die("-z -: the tokenizer is read from a file; give its name");
    if (chat_stdin && !strcmp(o->mode, "chat"))
        die("--chat -: -m chat reads its turns from standard input; give the conversation as a file");
    if (chat_stdin && o->text_path && !strcmp(o->text_path, "-"))
        die("--chat - and -f -: standard input can be only one of them");
}

static Options parse_options(int argc, char **argv) {
    Options o = {.mode = "generate",
                 .prompt = "",
                 .temperature = 1.0f,
                 .topp = 0.9f,
                 .repeat_penalty = 1.0f,
                 .steps = -1,
                 .samples = 1,
                 .repeat_window = 64,
                 .thinking = -1,
                 .compute = COMPUTE_F32,
                 .kv_cache = WEIGHTS_F32,
                 .draft_max = DEFAULT_DRAFT_MAX,
                 .draft_p_min = DEFAULT_DRAFT_P_MIN,
                 .layers = {-1, -1},
                 .heads = {-1, -1}}; // steps -1: the default, see generate
    int prompt_given = 0, draft_max_given = 0, draft_p_min_given = 0;
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
        if (!strcmp(a, "--special") || !strcmp(a, "--verify") || !strcmp(a, "-q") || !strcmp(a, "--no-history") ||
            !strcmp(a, "--think") || !strcmp(a, "--no-think")) { // the flags without a value
            if (!strcmp(a, "--special")) o.special = 1;
            else if (!strcmp(a, "--verify")) o.verify = 1;
            else if (!strcmp(a, "-q")) o.quiet = 1;
            else if (!strcmp(a, "--no-history")) o.no_history = 1;
            else o.thinking = !strcmp(a, "--think");
            continue;
        }
        // An unknown flag is named as such even when it comes last.
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!strcmp(a, "-i")) {
            o.prompt = value(a, v);
            prompt_given = 1;
        } else if (!strcmp(a, "-c")) o.context = parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--chunks")) o.chunks = v && !strcmp(v, "all") ? -1 : parse_int(a, v, 1, 1 << 30);
        else if (!strcmp(a, "-n")) o.steps = parse_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "-t")) o.temperature = parse_num(a, v, 0, 100), o.sampling_given |= SAMPLING_TEMPERATURE;
        else if (!strcmp(a, "-p")) o.topp = parse_num(a, v, 0, 1), o.sampling_given |= SAMPLING_TOP_P;
        else if (!strcmp(a, "-k")) o.topk = parse_int(a, v, 0, 1 << 24), o.sampling_given |= SAMPLING_TOP_K;
        else if (!strcmp(a, "--min-p")) o.minp = parse_num(a, v, 0, 1), o.sampling_given |= SAMPLING_MIN_P;
        else if (!strcmp(a, "-r"))
            o.repeat_penalty = parse_num(a, v, 0.01, 100), o.sampling_given |= SAMPLING_REPEAT_PENALTY;
        else if (!strcmp(a, "--repeat-window")) o.repeat_window = parse_int(a, v, 0, 1 << 20);
        else if (!strcmp(a, "-s")) o.seed = parse_seed(a, v);
        else if (!strcmp(a, "--samples")) o.samples = parse_int(a, v, 1, 1 << 20);
        else if (!strcmp(a, "-m")) o.mode = value(a, v);
        else if (!strcmp(a, "-f")) o.text_path = value(a, v);
        else if (!strcmp(a, "-o")) o.out_path = value(a, v);
        else if (!strcmp(a, "-z")) o.tokenizer_path = value(a, v);
        else if (!strcmp(a, "-j")) o.threads = parse_int(a, v, 1, 1024);
        else if (!strcmp(a, "--chat")) o.chat_path = value(a, v);
        else if (!strcmp(a, "-y")) o.system = value(a, v);
        else if (!strcmp(a, "--chat-template")) o.template_name = value(a, v);
        else if (!strcmp(a, "--layers")) parse_range(a, v, o.layers);
        else if (!strcmp(a, "--heads")) parse_range(a, v, o.heads);
        else if (!strcmp(a, "--compute")) o.compute = parse_compute(a, v);
        else if (!strcmp(a, "--kv-cache")) o.kv_cache = parse_kv_cache(a, v);
        else if (!strcmp(a, "--lookup")) o.lookup = parse_int(a, v, 1, 1 << 10);
        else if (!strcmp(a, "--draft-max")) o.draft_max = parse_int(a, v, 1, MAX_DRAFT), draft_max_given = 1;
        else if (!strcmp(a, "--draft")) o.draft_path = value(a, v);
        else if (!strcmp(a, "--draft-p-min")) o.draft_p_min = parse_num(a, v, 0, 1), draft_p_min_given = 1;
        else die("unknown option %s (see --help)", a);
        const char *sampling[] = {"-n", "-t", "-p", "-k", "--min-p", "-r", "--repeat-window", "-s", "--samples"};
        for (size_t k = 0; k < sizeof sampling / sizeof *sampling && !o.sampling_flag; k++)
            if (!strcmp(a, sampling[k])) o.sampling_flag = sampling[k];
    }
    if (!o.model_path) {
        usage(stderr);
        exit(1);
    }
    if (!strcmp(o.model_path, "-")) die("-: the model is a file, mapped where it lies; standard input cannot be one");
    if (o.verify && argc != 3) die("--verify checks the model file and takes no other option");
    check_stdio_options(&o);
    if (strcmp(o.mode, "generate") && strcmp(o.mode, "ppl") && strcmp(o.mode, "logits") &&
        strcmp(o.mode, "attention") && strcmp(o.mode, "chat"))
        die("-m %s: the modes are generate, ppl, logits, attention and chat", o.mode);
    check_chat_options(&o, prompt_given);
    // A flag the mode would ignore is refused: the user meant something by it.
    int ppl = !strcmp(o.mode, "ppl"), logits = !strcmp(o.mode, "logits"), attention = !strcmp(o.mode, "attention");
    if (ppl && !o.text_path) die("-m ppl needs the text to score: -f FILE");
    if (ppl && prompt_given) die("-m ppl scores the text of -f; -i has no use there");
    if (!ppl && prompt_given && o.text_path) die("give the prompt with -i or with -f, not both");
    if ((logits || attention) && !o.out_path) die("-m %s needs an output file: -o FILE", o.mode);
    if (!logits && !attention && o.out_path)
        die("-o is where -m logits writes (and -m attention); -m %s writes to stdout", o.mode);
    if (!attention && (o.layers[0] >= 0 || o.heads[0] >= 0))
        die("%s selects what -m attention writes; -m %s has no use for it", o.layers[0] >= 0 ? "--layers" : "--heads",
            o.mode);
    if (o.compute == (COMPUTE_F32 | COMPUTE_BF16) && !ppl)
        die("--compute bf16,f32: only -m ppl runs both, to compare them; -m %s takes f32 or bf16", o.mode);
    if ((ppl || logits || attention) && o.sampling_flag)
        die("%s shapes generation; -m %s does not generate and would ignore it", o.sampling_flag, o.mode);
    if (o.samples > 1 && !strcmp(o.mode, "chat")) die("--samples: -m chat draws a reply again with /regen");
    if (draft_max_given && !o.lookup && !o.draft_path) die("--draft-max bounds the drafts of --lookup or --draft");
    if (draft_p_min_given && !o.draft_path) die("--draft-p-min is the --draft model's confidence; give --draft MODEL");
    if ((o.lookup || o.draft_path) && strcmp(o.mode, "generate") && strcmp(o.mode, "chat"))
        die("%s: only -m generate and -m chat speculate; -m %s does not", o.lookup ? "--lookup" : "--draft", o.mode);
    return o;
}

#endif
