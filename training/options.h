// training/options.h: ./train's command line: the options, their defaults (nanoGPT's CPU
// "baby" Shakespeare run), their ranges, --help, and the checks a saved run's options pass
// again on --resume. It reads argv and nothing else.
#ifndef ATTN_TRAINING_OPTIONS_H
#define ATTN_TRAINING_OPTIONS_H

// Options. Names and defaults follow nanoGPT; the defaults are its CPU "baby" Shakespeare run.

enum { ARCH_GPT, ARCH_LLAMA };
// --precision: float32 products, or bfloat16 ones (training/step.h)
enum { PRECISION_F32, PRECISION_BF16 };

typedef struct {
    int n_layer, n_head, n_kv_head, n_embd, block_size, batch_size, grad_accum, max_iters;
    int warmup_iters, lr_decay_iters, eval_interval, eval_iters, vocab_size, arch;
    float lr, min_lr, weight_decay, beta1, beta2, grad_clip, dropout;
    // PRECISION_*; the state file stores Opts whole, so this int fills what would be padding,
    // and a state written before --precision, 0 here, resumes in float32
    int32_t precision;
    int64_t seed;
} Opts;
_Static_assert(offsetof(Opts, seed) == offsetof(Opts, precision) + sizeof(int32_t), "Opts has padding");

// packed by hand: a field per line would fill the screen
// clang-format off
static const Opts default_opts = {
    .n_layer = 4, .n_head = 4, .n_kv_head = 0, .n_embd = 128, .block_size = 64, .batch_size = 12,
    .grad_accum = 1, .max_iters = 2000, .warmup_iters = 100, .lr_decay_iters = 0, .eval_interval = 250,
    .eval_iters = 20, .vocab_size = 0, .arch = ARCH_GPT, .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f,
    .beta1 = 0.9f, .beta2 = 0.99f, .grad_clip = 1.0f, .dropout = 0.0f, .seed = 1337,
};
// clang-format on

typedef struct {
    const char *name;
    char type; // i int, f float, l int64
    void *ptr;
    double lo, hi;
    const char *help;
} Flag;

static void usage(FILE *f, const Flag *flags, int n) {
    fprintf(f, "usage: train -d CORPUS -o MODEL [options]\n"
               "Trains a decoder-only transformer on a UTF-8 text file and writes MODEL (the format ./run\n"
               "reads) at every evaluation and on Ctrl-C, SIGTERM or SIGHUP, with its optimiser state in\n"
               "MODEL.state and a log in MODEL.csv.\n\n"
               "  -d, --data FILE        training text (90%% train, 10%% validation); - reads standard input,\n"
               "                         and a pipe or FIFO is read the same way (-d <(zcat corpus.gz))\n"
               "  -o, --out FILE         model file to write\n"
               "  --arch gpt|llama       gpt: LayerNorm, learned positions, GELU, biases (default)\n"
               "                         llama: RMSNorm, RoPE, SwiGLU, grouped-query attention\n"
               "  --precision f32|bf16   the linear layers' products in float32 (default) or on bfloat16\n"
               "                         operands, as PyTorch's autocast; weights, optimiser and the rest\n"
               "                         stay float32\n"
               "  --init MODEL           start from an existing model file (its config and tokenizer)\n"
               "  --tokenizer-from MODEL a new model on MODEL's tokenizer (pieces, special tokens, chat\n"
               "                         template) instead of a vocabulary learned from the corpus: a draft\n"
               "                         model for ./run --draft, or a new corpus in the same vocabulary\n"
               "  --resume               continue from MODEL and MODEL.state exactly where they stopped; of\n"
               "                         the options below only --max-iters, --eval-interval and --eval-iters\n"
               "                         may differ from the saved run's\n"
               "  --force                replace an existing MODEL (and its .state and .csv) instead of refusing\n"
               "  --keep-best            MODEL keeps the weights of the best validation loss so far;\n"
               "                         MODEL.state still resumes the latest step\n"
               "  --no-final-eval        skip the closing loss over the whole validation split (minutes on\n"
               "                         a large corpus)\n"
               "  --config FILE          options as 'name = value' lines (the flags' names without --);\n"
               "                         flags on the command line override them\n"
               "  --sample-prompt TEXT   start the samples printed at each evaluation from TEXT\n"
               "  --progress MODE        plain (a line every 10 steps, and at least every 30 s), tty (one\n"
               "                         line rewritten in place) or auto (tty on a terminal; plain under\n"
               "                         mpirun unless mpirun's own output is a terminal) (auto)\n"
               "  -j, --threads N        threads (default: OMP_NUM_THREADS, else every core)\n");
    for (int i = 0; i < n; i++) {
        char name[40];
        snprintf(name, sizeof name, "%s %s", flags[i].name, flags[i].type == 'f' ? "X" : "N");
        fprintf(f, "  --%-20s %s\n", name, flags[i].help);
    }
    fprintf(f, "  -h, --help             this text\n");
}

// Where the option being set comes from, starting its error lines: "" for the command line,
// "FILE:LINE: " while a --config file is read.
static char option_source[4200] = "";

// Strict: the whole argument must be a number within the flag's range.
static void parse_number(const Flag *f, const char *s) {
    char *end;
    errno = 0;
    double v = f->type == 'f' ? strtod(s, &end) : (double)strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        die("%s--%s: '%s' is not %s", option_source, f->name, s, f->type == 'f' ? "a number" : "an integer");
    if (v < f->lo || v > f->hi) {
        if (f->type == 'f') die("%s--%s: %s is outside [%g, %g]", option_source, f->name, s, f->lo, f->hi);
        die("%s--%s: %s is outside [%.0f, %.0f]", option_source, f->name, s, f->lo, f->hi);
    }
    if (f->type == 'f') *(float *)f->ptr = (float)v;
    else if (f->type == 'l') *(int64_t *)f->ptr = strtoll(s, NULL, 10);
    else *(int *)f->ptr = (int)v;
}

#define N_FLAGS 21

// The command line: the options, and which numeric flags it gave (for --init and --resume).
// o.grad_accum counts the micro-batches of a step over all ranks: --grad-accum times the ranks.
// --progress: how the status is shown (PROGRESS_AUTO decides from stdout, training/progress.h).
enum { PROGRESS_AUTO, PROGRESS_PLAIN, PROGRESS_TTY };

typedef struct {
    Opts o;
    const char *data, *out, *init, *tokenizer_from, *dump, *config, *sample_prompt;
    int resume, force, keep_best, no_final_eval, threads, arch_given, precision_given, progress;
    char *config_text; // the --config file, which the options' text values point into
    int rank, ranks;   // this process's place among the MPI ranks training together (training/dist.h)
    char given[N_FLAGS];
} Args;

// The numeric flags a resumed run may change: they change when it stops and what it reports,
// not what it computes.
static int changes_on_resume(const char *name) {
    return !strcmp(name, "max-iters") || !strcmp(name, "eval-interval") || !strcmp(name, "eval-iters");
}

static double flag_value(const Flag *f) {
    return f->type == 'f' ? *(float *)f->ptr : f->type == 'l' ? (double)*(int64_t *)f->ptr : *(int *)f->ptr;
}

// The numeric options with their ranges, pointing into o.
static void flag_table(Opts *o, Flag flags[N_FLAGS]) {
    Flag t[N_FLAGS] = {
        {"n-layer", 'i', &o->n_layer, 1, 1024, "layers (4)"},
        {"n-head", 'i', &o->n_head, 1, 1024, "attention heads (4)"},
        {"n-kv-head", 'i', &o->n_kv_head, 0, 1024, "key/value heads, dividing n-head (0: n-head)"},
        {"n-embd", 'i', &o->n_embd, 1, 65536, "model width (128)"},
        {"block-size", 'i', &o->block_size, 2, 1 << 20, "context length, at least 2 (64)"},
        {"batch-size", 'i', &o->batch_size, 1, 1 << 20, "sequences per micro-batch (12)"},
        {"grad-accum", 'i', &o->grad_accum, 1, 1 << 20, "micro-batches per step (1)"},
        {"max-iters", 'i', &o->max_iters, 0, 1e9, "optimiser steps (2000)"},
        {"lr", 'f', &o->lr, 0, 10, "peak learning rate (1e-3)"},
        {"min-lr", 'f', &o->min_lr, 0, 10, "learning rate after the cosine decay (1e-4)"},
        {"warmup-iters", 'i', &o->warmup_iters, 0, 1e9, "linear warm-up steps (100)"},
        {"lr-decay-iters", 'i', &o->lr_decay_iters, 0, 1e9, "end of the cosine decay (0: max-iters)"},
        {"weight-decay", 'f', &o->weight_decay, 0, 100, "AdamW decoupled weight decay on matrices (0.1)"},
        {"beta1", 'f', &o->beta1, 0, 0.999999, "AdamW beta1 (0.9)"},
        {"beta2", 'f', &o->beta2, 0, 0.999999, "AdamW beta2 (0.99)"},
        {"grad-clip", 'f', &o->grad_clip, 0, 1e9, "clip the global gradient norm to this (1.0; 0: off)"},
        {"dropout", 'f', &o->dropout, 0, 0.99, "dropout probability while training, where nanoGPT has it (0)"},
        {"eval-interval", 'i', &o->eval_interval, 1, 1e9, "steps between evaluations and checkpoints (250)"},
        {"eval-iters", 'i', &o->eval_iters, 1, 1e9, "batches per split in an evaluation (20)"},
        {"seed", 'l', &o->seed, 0, 9.2e18, "seed for initialisation, data order and samples (1337)"},
        {"vocab-size", 'i', &o->vocab_size, 0, 1 << 20,
         "learn a BPE vocabulary of 256 to 1048576 pieces (0: characters)"},
    };
    memcpy(flags, t, sizeof t);
}

// Options read back from a state file pass the same range checks as the command line's.
static void check_saved_opts(Opts *o, const char *path) {
    Flag flags[N_FLAGS];
    flag_table(o, flags);
    for (int i = 0; i < N_FLAGS; i++) {
        const Flag *f = &flags[i];
        double v = flag_value(f);
        if (!(v >= f->lo && v <= f->hi))
            die("%s: saved option --%s is %g, outside [%g, %g] (damaged?)", path, f->name, v, f->lo, f->hi);
    }
    if ((o->arch != ARCH_GPT && o->arch != ARCH_LLAMA) ||
        (o->precision != PRECISION_F32 && o->precision != PRECISION_BF16) || o->min_lr > o->lr || o->n_kv_head < 1)
        die("%s: saved options are inconsistent (damaged?)", path);
}

// The flags that take a text value (-d, -o, -j are spelled --data, --out, --threads).
static const char *const text_flags[] = {
    "data",          "out",    "init", "arch",      "threads",       "progress",
    "sample-prompt", "config", "dump", "precision", "tokenizer-from"}; // dump: a test hook
// Of those, the ones naming a file: an empty one is refused.
static const char *const path_flags[] = {"data", "out", "init", "config", "dump", "tokenizer-from"};
// --progress's values, in PROGRESS_* order.
static const char *const progress_names[] = {"auto", "plain", "tty"};

#define N_TEXT_FLAGS (int)(sizeof text_flags / sizeof *text_flags)

// --arch's values, in ARCH_* order.
static const char *const arch_names[] = {"gpt", "llama"};
// --precision's values, in PRECISION_* order.
static const char *const precision_names[] = {"f32", "bf16"};

// The index of name among n names, or -1.
static int name_index(const char *const *names, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(names[k], name)) return k;
    return -1;
}

// The index of the numeric flag called name, or -1.
static int numeric_flag(const Flag flags[N_FLAGS], const char *name) {
    for (int k = 0; k < N_FLAGS; k++)
        if (!strcmp(flags[k].name, name)) return k;
    return -1;
}

static int text_flag(const char *name) { return name_index(text_flags, N_TEXT_FLAGS, name); }

// Sets the flag called name (without its dashes) to val: a numeric one, or a text one.
static void set_flag(Args *a, Flag flags[N_FLAGS], const char *name, const char *val) {
    const char *arch = NULL, *threads = NULL, *progress = NULL, *config = NULL, *precision = NULL;
    const char **texts[N_TEXT_FLAGS] = {
        &a->data,          &a->out, &a->init, &arch,      &threads,          &progress,
        &a->sample_prompt, &config, &a->dump, &precision, &a->tokenizer_from}; // text_flags' order
    int k = numeric_flag(flags, name), t = text_flag(name);
    if (name_index(path_flags, sizeof path_flags / sizeof *path_flags, name) >= 0 && !*val)
        die("%s--%s: the path is empty", option_source, name);
    if (!strcmp(name, "sample-prompt") && !*val) die("%s--sample-prompt: the prompt is empty", option_source);
    if (t >= 0) *texts[t] = val;
    if (k >= 0) {
        parse_number(&flags[k], val);
        a->given[k] = 1;
    }
    if (threads) {
        Flag j = {"threads", 'i', &a->threads, 1, 1 << 20, ""};
        parse_number(&j, threads);
    }
    if (arch) {
        a->o.arch = name_index(arch_names, 2, arch);
        if (a->o.arch < 0) die("%s--arch: '%s' is not gpt or llama", option_source, arch);
        a->arch_given = 1;
    }
    if (precision) {
        a->o.precision = name_index(precision_names, 2, precision);
        if (a->o.precision < 0) die("%s--precision: '%s' is not f32 or bf16", option_source, precision);
        a->precision_given = 1;
    }
    if (progress) {
        a->progress = name_index(progress_names, 3, progress);
        if (a->progress < 0) die("%s--progress: '%s' is not plain, tty or auto", option_source, progress);
    }
}

// A switch (a flag without a value) by name; from a --config file (value true or false) only
// --keep-best and --no-final-eval, since --resume and --force are about one invocation.
static int set_switch(Args *a, const char *name, const char *value, const char *where) {
    if (!value && (!strcmp(name, "resume") || !strcmp(name, "force"))) {
        *(name[0] == 'r' ? &a->resume : &a->force) = 1;
        return 1;
    }
    int *flag = !strcmp(name, "keep-best") ? &a->keep_best : !strcmp(name, "no-final-eval") ? &a->no_final_eval : NULL;
    if (!flag) return 0;
    int on = !value || !strcmp(value, "true") || !strcmp(value, "1");
    if (value && !on && strcmp(value, "false") && strcmp(value, "0"))
        die("%s: %s = '%s': give true or false", where, name, value);
    *flag = on;
    return 1;
}

// nanoGPT's train.py globals, which its config files set, under ./train's names for them
// (docs/TRAINING.md's table): renamed, or changing nothing here (ignored, named in one note),
// or meaning something here only at one value (nanoGPT's default in its train.py).
static const char *const nanogpt_renamed[][2] = {{"learning-rate", "lr"},
                                                 {"gradient-accumulation-steps", "grad-accum"}};
static const char *const nanogpt_ignored[] = {"out-dir", "log-interval", "wandb-log", "wandb-project", "wandb-run-name",
                                              "dataset", "device",       "compile",   "backend",       "dtype"};
static const char *const nanogpt_fixed[][3] = {
    {"init-from", "scratch", "--init MODEL starts from a model file, --resume goes on with a run"},
    {"eval-only", "false", "--max-iters 0 evaluates and writes the model it starts from"},
    {"decay-lr", "true", "./train always decays the learning rate (--min-lr = --lr keeps it constant)"},
};

// A config value as Python writes it in nanoGPT's files, made plain in place: a '#' comment after
// it removed, quotes removed, True and False lower-cased, a product of whole numbers ("5 * 8")
// computed. Returns the value.
static char *plain_value(char *value) {
    for (char *c = value, quote = 0; *c; c++) {
        if (quote) quote = *c == quote ? 0 : quote;
        else if (*c == '"' || *c == '\'') quote = *c;
        else if (*c == '#') *c = 0;
        if (!*c) break;
    }
    char *end = value + strlen(value);
    while (end > value && (end[-1] == ' ' || end[-1] == '\t')) *--end = 0;
    size_t vlen = strlen(value);
    if (vlen >= 2 && (value[0] == '"' || value[0] == '\'') && value[vlen - 1] == value[0]) {
        value[vlen - 1] = 0;
        return value + 1;
    }
    if (!strcmp(value, "True") || !strcmp(value, "False")) *value = *value == 'T' ? 't' : 'f';
    if (strchr(value, '*') && value[strspn(value, "0123456789* ")] == 0) {
        long long product = 1;
        for (char *f = value; *f;) {
            char *next;
            long long factor = strtoll(f, &next, 10);
            if (next == f || product > LLONG_MAX / (factor ? factor : 1)) return value; // refused as a number
            product *= factor;
            f = next + strspn(next, " ");
            if (*f == '*') f += 1 + strspn(f + 1, " ");
            else if (*f) return value;
        }
        snprintf(value, vlen + 1, "%lld", product); // never longer than its factors and the '*'
    }
    return value;
}

// A nanoGPT key with no flag of its own: 1 when it is taken (renamed into *key, kept in
// ignored for the note, or at its one value), else 0; dies naming a value ./train cannot follow.
static int nanogpt_key(Args *a, const char **key, const char *value, const char *where, char *ignored, size_t size) {
    for (size_t i = 0; i < sizeof nanogpt_renamed / sizeof *nanogpt_renamed; i++)
        if (!strcmp(*key, nanogpt_renamed[i][0])) *key = nanogpt_renamed[i][1];
    if (!strcmp(*key, "always-save-checkpoint")) { // nanoGPT saves only an improving val loss unless it is set
        if (strcmp(value, "true") && strcmp(value, "false"))
            die("%s: %s = '%s': give True or False", where, *key, value);
        a->keep_best = !strcmp(value, "false");
        return 1;
    }
    for (size_t i = 0; i < sizeof nanogpt_fixed / sizeof *nanogpt_fixed; i++)
        if (!strcmp(*key, nanogpt_fixed[i][0])) {
            if (strcmp(value, nanogpt_fixed[i][1]))
                die("%s: %s = '%s' has no equivalent: %s", where, *key, value, nanogpt_fixed[i][2]);
            return 1;
        }
    for (size_t i = 0; i < sizeof nanogpt_ignored / sizeof *nanogpt_ignored; i++)
        if (!strcmp(*key, nanogpt_ignored[i])) {
            size_t len = strlen(ignored);
            snprintf(ignored + len, size - len, "%s%s", len ? ", " : "", *key);
            for (char *c = ignored + len; *c; c++) // named as nanoGPT's files spell them
                if (*c == '-') *c = '_';
            return 1;
        }
    return 0;
}

// --config FILE: 'name = value' lines with the flags' long names (an underscore may stand for a
// dash), '#' starting a comment, a value possibly quoted: ./train's own, and nanoGPT's config
// files as they are (nanogpt_key, plain_value).
static void read_config(Args *a, Flag flags[N_FLAGS], const char *path) {
    size_t n;
    a->config_text = read_file(path, &n, "the config file");
    char why[64];
    if (text_problem(a->config_text, n, why, sizeof why)) die("%s: not a text file: %s", path, why);
    int line_no = 0;
    char ignored[512] = "";
    for (char *line = a->config_text, *next; line && *line; line = next) {
        line_no++;
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char where[4200];
        snprintf(where, sizeof where, "%s:%d", path, line_no);
        while (*line == ' ' || *line == '\t') line++;
        char *end = line + strlen(line);
        while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = 0;
        if (!*line || *line == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) die("%s: '%s' is not 'name = value'", where, line);
        char *key_end = eq;
        while (key_end > line && (key_end[-1] == ' ' || key_end[-1] == '\t')) key_end--;
        *key_end = 0;
        char *value = eq + 1;
        while (*value == ' ' || *value == '\t') value++;
        value = plain_value(value);
        for (char *c = line; *c; c++)
            if (*c == '_') *c = '-';
        const char *key = line;
        if (!strcmp(key, "config")) die("%s: a config file cannot name another (--config)", where);
        if (!strcmp(key, "resume") || !strcmp(key, "force"))
            die("%s: --%s is given on the command line, not in a config file", where, key);
        if (set_switch(a, key, value, where)) continue;
        if (nanogpt_key(a, &key, value, where, ignored, sizeof ignored)) continue;
        if (numeric_flag(flags, key) < 0 && text_flag(key) < 0)
            die("%s: unknown option '%s' (see --help)", where, line);
        if (!*value) die("%s: %s has no value", where, line);
        snprintf(option_source, sizeof option_source, "%s: ", where);
        set_flag(a, flags, key, value);
        *option_source = 0;
    }
    if (*ignored && a->rank == 0)
        fprintf(stderr, "%s: note: %s: ignored, as nothing here depends on them: %s (docs/TRAINING.md)\n", prog, path,
                ignored);
}

static void parse_args(Args *a, int argc, char **argv, int rank, int ranks) {
    *a = (Args){.o = default_opts, .rank = rank, .ranks = ranks};
    Opts *o = &a->o;
    Flag flags[N_FLAGS];
    flag_table(o, flags);
    // the config file first, so that the command line's flags override it
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, flags, N_FLAGS);
            exit(0);
        }
        const char *path = !strncmp(argv[i], "--config=", 9)              ? argv[i] + 9
                           : !strcmp(argv[i], "--config") && i + 1 < argc ? argv[i + 1]
                                                                          : NULL;
        if (path && !*path) die("--config: the path is empty");
        if (path && a->config) die("--config is given twice");
        if (path) a->config = path;
    }
    if (a->config) read_config(a, flags, a->config);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char name[64];
        if (!strncmp(arg, "--", 2) && set_switch(a, arg + 2, NULL, arg)) continue;
        const char *shorts[][2] = {{"-d", "--data"}, {"-o", "--out"}, {"-j", "--threads"}};
        for (int k = 0; k < 3; k++)
            if (!strcmp(arg, shorts[k][0])) arg = shorts[k][1];
        if (strncmp(arg, "--", 2)) die("unexpected argument '%s' (see --help)", argv[i]);
        snprintf(name, sizeof name, "%s", arg + 2);
        char *eq = strchr(name, '=');
        if (eq) *eq = 0;
        if (numeric_flag(flags, name) < 0 && text_flag(name) < 0) die("unknown option '--%s' (see --help)", name);
        if (eq) set_flag(a, flags, name, strchr(arg, '=') + 1);
        else if (i + 1 < argc) set_flag(a, flags, name, argv[++i]);
        else die("%s needs a value (see --help)", arg);
    }
    if (!a->data) die("no corpus: give -d FILE (see --help)");
    if (!a->out) die("no output: give -o FILE (see --help)");
    // a model is written whole and renamed into place, its .state and .csv beside it: a file
    if (!strcmp(a->out, "-"))
        die("-o -: the model is a file, written whole with its .state and .csv beside it; give a file name");
    if (a->init && !strcmp(a->init, "-"))
        die("--init -: the model to start from is a file, mapped, not read from standard input");
    if (a->dump && !strcmp(a->dump, "-")) die("--dump -: the dump is a file; give a file name");
    if (a->resume && a->init) die("--resume and --init exclude each other");
    if (a->resume && a->force) die("--resume and --force exclude each other: --force starts over");
    if (a->init && o->vocab_size) die("--vocab-size cannot be used with --init, which keeps its model's tokenizer");
    if (a->tokenizer_from && a->init)
        die("--tokenizer-from and --init exclude each other: --init keeps its model's tokenizer");
    if (a->tokenizer_from && a->resume)
        die("--tokenizer-from and --resume exclude each other: a resumed run keeps its own tokenizer");
    if (a->tokenizer_from && o->vocab_size)
        die("--tokenizer-from and --vocab-size exclude each other: --vocab-size learns a vocabulary from the corpus");
    if (a->tokenizer_from && !strcmp(a->tokenizer_from, "-"))
        die("--tokenizer-from -: the model to take the tokenizer from is a file, mapped, not read from standard "
            "input");
    if (o->vocab_size && o->vocab_size < 256)
        die("--vocab-size %d: a BPE vocabulary needs 256 to %d pieces (one for each byte, then merges); 0 learns "
            "characters",
            o->vocab_size, 1 << 20);
    if (o->n_kv_head == 0) o->n_kv_head = o->n_head;
    if (o->lr_decay_iters == 0) o->lr_decay_iters = o->max_iters;
    if (o->min_lr > o->lr) die("--min-lr %g is above --lr %g", o->min_lr, o->lr);
    if (ranks == 1) return;
    if (!strcmp(a->data, "-")) die("-d -: under mpirun only rank 0 reads standard input; give the corpus as a file");
    if (a->dump) die("--dump is a single-process test hook; run it without mpirun");
    if (o->grad_accum > (1 << 20) / ranks)
        die("--grad-accum %d on %d ranks: %lld micro-batches per step, above the %d a run may draw", o->grad_accum,
            ranks, (long long)o->grad_accum * ranks, 1 << 20);
    o->grad_accum *= ranks;
}

// Whether the command line gave the numeric flag called name.
static int flag_given(const Args *a, const char *name) {
    Opts scratch;
    Flag flags[N_FLAGS];
    flag_table(&scratch, flags);
    int k = numeric_flag(flags, name);
    return k >= 0 && a->given[k];
}

// A run's data order is that of its micro-batches over all ranks (Args' o.grad_accum), so a
// resume on another number of ranks goes on when they share them evenly, and is refused by name
// otherwise.
static void check_resume_ranks(const Args *a, const Opts *saved, const char *state_path) {
    if (saved->grad_accum % a->ranks)
        die("--resume on %d ranks: the run saved in %s draws %d micro-batches per step, which %d ranks cannot share "
            "evenly; resume it on a number of ranks that divides %d",
            a->ranks, state_path, saved->grad_accum, a->ranks, saved->grad_accum);
    if (a->ranks > 1 && flag_given(a, "grad-accum") && a->o.grad_accum != saved->grad_accum)
        die("--resume: --grad-accum %d on %d ranks draws %d micro-batches per step, the run saved in %s draws %d; "
            "give --grad-accum %d, or leave it out",
            a->o.grad_accum / a->ranks, a->ranks, a->o.grad_accum, state_path, saved->grad_accum,
            saved->grad_accum / a->ranks);
}

// Appends ", --name now (saved: then)" to the list of differing options in diff.
static void add_difference(char *diff, size_t size, const char *name, const char *now, const char *then) {
    size_t len = strlen(diff);
    snprintf(diff + len, size - len, "%s--%s %s (saved: %s)", len ? ", " : "", name, now, then);
}

// --resume goes on with the saved run's options: the command line's values of the flags that
// may change are taken into saved; any other flag given with another value is refused, naming each.
static void take_resume_flags(const Args *a, Opts *saved, const char *state_path) {
    Opts given = a->o;
    Flag now[N_FLAGS], then[N_FLAGS];
    flag_table(&given, now);
    flag_table(saved, then);
    char diff[2048] = "", v_now[32], v_then[32];
    for (int k = 0; k < N_FLAGS; k++) {
        if (!a->given[k] || flag_value(&now[k]) == flag_value(&then[k])) continue;
        if (changes_on_resume(now[k].name)) {
            *(int *)then[k].ptr = *(int *)now[k].ptr;
            continue;
        }
        snprintf(v_now, sizeof v_now, "%g", flag_value(&now[k]));
        snprintf(v_then, sizeof v_then, "%g", flag_value(&then[k]));
        add_difference(diff, sizeof diff, now[k].name, v_now, v_then);
    }
    if (a->arch_given && given.arch != saved->arch)
        add_difference(diff, sizeof diff, "arch", arch_names[given.arch], arch_names[saved->arch]);
    if (a->precision_given && given.precision != saved->precision)
        add_difference(diff, sizeof diff, "precision", precision_names[given.precision],
                       precision_names[saved->precision]);
    if (*diff)
        die("--resume continues the run saved in %s, and these options differ from it: %s; only --max-iters, "
            "--eval-interval and --eval-iters may change (start over with --force)",
            state_path, diff);
}

#endif
