// training/options.h: ./train's command line: the options, their defaults (nanoGPT's CPU
// "baby" Shakespeare run), their ranges, --help, and the checks a saved run's options pass
// again on --resume. It reads argv and nothing else.
#ifndef ATTN_TRAINING_OPTIONS_H
#define ATTN_TRAINING_OPTIONS_H

// Options. Names and defaults follow nanoGPT; the defaults are its CPU "baby" Shakespeare run.

enum { ARCH_GPT, ARCH_LLAMA };

typedef struct {
    int n_layer, n_head, n_kv_head, n_embd, block_size, batch_size, grad_accum, max_iters;
    int warmup_iters, lr_decay_iters, eval_interval, eval_iters, vocab_size, arch;
    float lr, min_lr, weight_decay, beta1, beta2, grad_clip, dropout;
    int32_t unused; // 0: the state file stores Opts whole, so it must have no padding bytes
    int64_t seed;
} Opts;
_Static_assert(offsetof(Opts, seed) == offsetof(Opts, unused) + sizeof(int32_t), "Opts has padding");

static const Opts default_opts = {
    .n_layer = 4, .n_head = 4, .n_kv_head = 0, .n_embd = 128, .block_size = 64, .batch_size = 12,
    .grad_accum = 1, .max_iters = 2000, .warmup_iters = 100, .lr_decay_iters = 0, .eval_interval = 250,
    .eval_iters = 20, .vocab_size = 0, .arch = ARCH_GPT, .lr = 1e-3f, .min_lr = 1e-4f, .weight_decay = 0.1f,
    .beta1 = 0.9f, .beta2 = 0.99f, .grad_clip = 1.0f, .dropout = 0.0f, .seed = 1337,
};

typedef struct {
    const char *name;
    char type; // i int, f float, l int64
    void *ptr;
    double lo, hi;
    const char *help;
} Flag;

static void usage(FILE *f, const Flag *flags, int n) {
    fprintf(f,
            "usage: train -d CORPUS -o MODEL [options]\n"
            "Trains a decoder-only transformer on a UTF-8 text file and writes MODEL (the format ./run\n"
            "reads) at every evaluation and on Ctrl-C, with its optimiser state in MODEL.state and a\n"
            "log in MODEL.csv.\n\n"
            "  -d, --data FILE        training text (90%% train, 10%% validation)\n"
            "  -o, --out FILE         model file to write\n"
            "  --arch gpt|llama       gpt: LayerNorm, learned positions, GELU, biases (default)\n"
            "                         llama: RMSNorm, RoPE, SwiGLU, grouped-query attention\n"
            "  --init MODEL           start from an existing model file (its config and tokenizer)\n"
            "  --resume               continue from MODEL and MODEL.state exactly where they stopped\n");
    for (int i = 0; i < n; i++) {
        char name[40];
        snprintf(name, sizeof name, "%s %s", flags[i].name, flags[i].type == 'f' ? "X" : "N");
        fprintf(f, "  --%-20s %s\n", name, flags[i].help);
    }
    fprintf(f, "  -h, --help             this text\n");
}

// Strict: the whole argument must be a number within the flag's range.
static void parse_number(const Flag *f, const char *s) {
    char *end;
    errno = 0;
    double v = f->type == 'f' ? strtod(s, &end) : (double)strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        die("--%s: '%s' is not %s", f->name, s, f->type == 'f' ? "a number" : "an integer");
    if (v < f->lo || v > f->hi) {
        if (f->type == 'f') die("--%s: %s is outside [%g, %g]", f->name, s, f->lo, f->hi);
        die("--%s: %s is outside [%.0f, %.0f]", f->name, s, f->lo, f->hi);
    }
    if (f->type == 'f') *(float *)f->ptr = (float)v;
    else if (f->type == 'l') *(int64_t *)f->ptr = strtoll(s, NULL, 10);
    else *(int *)f->ptr = (int)v;
}

typedef struct {
    Opts o;
    const char *data, *out, *init, *dump;
    int resume, block_given, max_iters_given, others_given, shape_given; // flags seen, for --init and --resume
} Args;

#define N_FLAGS 21

// The numeric options with their ranges, pointing into o.
static void flag_table(Opts *o, Flag flags[N_FLAGS]) {
    Flag t[N_FLAGS] = {
        {"n-layer", 'i', &o->n_layer, 1, 1024, "layers (4)"},
        {"n-head", 'i', &o->n_head, 1, 1024, "attention heads (4)"},
        {"n-kv-head", 'i', &o->n_kv_head, 0, 1024, "key/value heads, dividing n-head (0: n-head)"},
        {"n-embd", 'i', &o->n_embd, 1, 65536, "model width (128)"},
        {"block-size", 'i', &o->block_size, 1, 1 << 20, "context length (64)"},
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
        {"vocab-size", 'i', &o->vocab_size, 0, 1 << 20, "learn a BPE vocabulary of this size (0: characters)"},
    };
    memcpy(flags, t, sizeof t);
}

// Options read back from a state file pass the same range checks as the command line's.
static void check_saved_opts(Opts *o, const char *path) {
    Flag flags[N_FLAGS];
    flag_table(o, flags);
    for (int i = 0; i < N_FLAGS; i++) {
        const Flag *f = &flags[i];
        double v = f->type == 'f' ? *(float *)f->ptr : f->type == 'l' ? (double)*(int64_t *)f->ptr : *(int *)f->ptr;
        if (!(v >= f->lo && v <= f->hi))
            die("%s: saved option --%s is %g, outside [%g, %g] (damaged?)", path, f->name, v, f->lo, f->hi);
    }
    if ((o->arch != ARCH_GPT && o->arch != ARCH_LLAMA) || o->min_lr > o->lr || o->n_kv_head < 1)
        die("%s: saved options are inconsistent (damaged?)", path);
}

static void parse_args(Args *a, int argc, char **argv) {
    Opts *o = &a->o;
    *o = default_opts;
    Flag flags[N_FLAGS];
    flag_table(o, flags);
    int nflags = N_FLAGS;
    a->data = a->out = a->init = a->dump = NULL;
    a->resume = a->block_given = a->max_iters_given = a->others_given = a->shape_given = 0;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i], *val = NULL, name[64];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) { usage(stdout, flags, nflags); exit(0); }
        if (!strcmp(arg, "--resume")) { a->resume = 1; continue; }
        if (!strcmp(arg, "-d")) arg = "--data";
        else if (!strcmp(arg, "-o")) arg = "--out";
        if (strncmp(arg, "--", 2)) die("unexpected argument '%s' (see --help)", argv[i]);
        snprintf(name, sizeof name, "%s", arg + 2);
        char *eq = strchr(name, '=');
        if (eq) *eq = 0;
        const char *arch = NULL, **text = NULL;
        const struct { const char *name, **ptr; } texts[] = {
            {"data", &a->data}, {"out", &a->out}, {"init", &a->init}, {"arch", &arch},
            {"dump", &a->dump}, // test hook, see docs/TRAINING.md
        };
        for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++)
            if (!strcmp(texts[t].name, name)) text = texts[t].ptr;
        int k = 0; // the numeric flag's index, nflags for the others
        while (k < nflags && strcmp(flags[k].name, name)) k++;
        if (k == nflags && !text) die("unknown option '--%s' (see --help)", name);
        if (eq) val = strchr(arg, '=') + 1;
        else if (i + 1 < argc) val = argv[++i];
        else die("%s needs a value (see --help)", arg);
        if (text) *text = val;
        else {
            parse_number(&flags[k], val);
            if (!strcmp(name, "block-size")) a->block_given = 1;
            if (!strncmp(name, "n-", 2)) a->shape_given = 1;
            if (!strcmp(name, "max-iters")) a->max_iters_given = 1;
            else a->others_given = 1;
        }
        if (arch) {
            if (!strcmp(arch, "gpt")) o->arch = ARCH_GPT;
            else if (!strcmp(arch, "llama")) o->arch = ARCH_LLAMA;
            else die("--arch: '%s' is not gpt or llama", arch);
            a->others_given = a->shape_given = 1;
        }
    }
    if (!a->data) die("no corpus: give -d FILE (see --help)");
    if (!a->out) die("no output: give -o FILE (see --help)");
    if (a->resume && a->init) die("--resume and --init exclude each other");
    if (a->init && o->vocab_size) die("--vocab-size cannot be used with --init, which keeps its model's tokenizer");
    if (o->n_kv_head == 0) o->n_kv_head = o->n_head;
    if (o->lr_decay_iters == 0) o->lr_decay_iters = o->max_iters;
    if (o->min_lr > o->lr) die("--min-lr %g is above --lr %g", o->min_lr, o->lr);
}

#endif
