// train.c: train an attn.c model on a text file, on the CPU, and write a model file ./run loads.
//   ./train -d corpus.txt -o model.bin
// The layout follows llm.c's train_gpt2.c: parameters, gradients, the two AdamW moments and
// the activations each live in one allocation carved into named tensors, and every layer kind
// has a *_backward beside the forward it reverses. The forward kernels are model.h's, the
// same code that serves ./run's prompt and one-token paths.
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>
#include "model.h"
#include "tokenizer.h"

static const char *prog = "train";
#include "cli.h"

// Blocks of 2 MiB and more (parameters, gradients, moments, activations) are 2 MiB aligned
// and asked for as transparent huge pages: sgemm's packing then misses the TLB far less
// (measured +7 % tokens/s on the baby configuration).
#define HUGE_PAGE ((size_t)2 << 20)
static void *xcalloc(size_t n, size_t size, const char *what) {
    size_t bytes;
    void *p = NULL;
    if (__builtin_mul_overflow(n ? n : 1, size, &bytes)) bytes = SIZE_MAX;
    if (bytes < HUGE_PAGE) {
        p = calloc(1, bytes);
    } else if (bytes <= SIZE_MAX - HUGE_PAGE) {
        size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if ((p = aligned_alloc(HUGE_PAGE, rounded))) {
            madvise(p, rounded, MADV_HUGEPAGE); // only a hint: without THP the pages stay small
            memset(p, 0, bytes);
        }
    }
    if (!p) die("out of memory allocating %s (%.1f MiB)", what, (double)n * size / (1 << 20));
    return p;
}

static int n_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Inside a parallel region: this thread's share [*lo, *hi) of n rows. Static and contiguous,
// so every reduction below adds in the same order on every run (--seed determinism).
static void my_rows(int n, int *lo, int *hi) {
    size_t l, h;
    share((size_t)n, thread_num(), team_size(), &l, &h);
    *lo = (int)l;
    *hi = (int)h;
}

// ----------------------------------------------------------------------------
// Random numbers. Every stream is a pure function of (seed, purpose, index), so the data
// order does not depend on anything saved: a resumed run draws the same batches.

// SplitMix64: the n-th output of the stream started at s is mix64(s + n * golden).
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }

static uint64_t rng_for(uint64_t seed, uint64_t purpose, uint64_t index) {
    uint64_t s = seed;
    uint64_t a = splitmix64(&s) ^ purpose * 0xD1B54A32D192ED03ull;
    uint64_t b = splitmix64(&a) ^ index;
    splitmix64(&b);
    return b;
}

static double uniform01(uint64_t *s) { return (splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

static float normal01(uint64_t *s) {
    double u1 = uniform01(s), u2 = uniform01(s);
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
}

enum { RNG_INIT = 1, RNG_BATCH, RNG_EVAL_TRAIN, RNG_EVAL_VAL, RNG_SAMPLE, RNG_DROPOUT };

// Dropout at nanoGPT's places, numbered as sites: the embeddings' sum (0); in layer l the
// attention probabilities (3l + 1), the attention's output projection (3l + 2) and the
// feed-forward's (3l + 3), each before its residual add. Element i of a site's tensor (row
// major over the micro-batch: [B, T, dim] or [B, heads, T, T]) is kept, scaled by 1 / (1 - p),
// when output i + 1 of the SplitMix64 stream started at the site's key, shifted right by 40,
// is at least p * 2^24. The key is rng_for(seed, RNG_DROPOUT, (step * grad_accum + micro) *
// sites + site). So masks take no memory, the backward pass draws them again, they do not
// depend on the thread count, and tests/test_train_grad.py draws the same ones for PyTorch.
typedef struct {
    uint64_t seed, draw;  // draw: (step * grad_accum + micro) * sites, set before each micro-batch
    uint32_t threshold;   // 0: off
    float scale;
} Dropout;

static Dropout dropout_init(float p, uint64_t seed) {
    Dropout d = {.seed = seed, .threshold = (uint32_t)lround(p * 16777216.0), .scale = 1.0f / (1.0f - p)};
    return d;
}

// dst[i] = src[i] * (kept ? scale : 0) for elements first .. first + n - 1 of a site.
static void dropout_apply(const Dropout *d, int site, float *dst, const float *src, size_t first, size_t n) {
    uint64_t key = rng_for(d->seed, RNG_DROPOUT, d->draw + (uint64_t)site), thr = d->threshold;
    float scale = d->scale;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix64(key + (first + i + 1) * 0x9E3779B97F4A7C15ull);
        dst[i] = src[i] * ((h >> 40) >= thr ? scale : 0.0f);
    }
}

// ----------------------------------------------------------------------------
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

// ----------------------------------------------------------------------------
// Parameter tensors by name (the names tools/reference.py gives them), for the optimiser's
// weight-decay groups and the test dumps. Offsets are in floats from the block's start.

typedef struct {
    char name[40];
    size_t off, n;
    int decay; // nanoGPT decays every tensor of two or more dimensions: matrices and embeddings
} ParamTensor;

static int list_params(const Config *c, const Weights *w, const float *base, ParamTensor *out) {
    int n = 0, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim, d = c->dim, h = c->hidden_dim;
#define P(ptr, count, dec, ...) do { \
        if (ptr) { \
            snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); \
            out[n].off = (size_t)((ptr) - base); out[n].n = (size_t)(count); out[n].decay = (dec); n++; \
        } \
    } while (0)
    P(w->tok_embedding, (size_t)c->vocab_size * d, 1, "tok_embedding");
    P(w->pos_embedding, (size_t)c->seq_len * d, 1, "pos_embedding");
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *L = &w->layers[l];
        P(L->attn_norm_w, d, 0, "layers.%d.attn_norm_w", l);
        P(L->attn_norm_b, d, 0, "layers.%d.attn_norm_b", l);
        P(L->wq, (size_t)q * d, 1, "layers.%d.wq", l);
        P(L->bq, q, 0, "layers.%d.bq", l);
        P(L->wk, (size_t)kv * d, 1, "layers.%d.wk", l);
        P(L->bk, kv, 0, "layers.%d.bk", l);
        P(L->wv, (size_t)kv * d, 1, "layers.%d.wv", l);
        P(L->bv, kv, 0, "layers.%d.bv", l);
        P(L->wo, (size_t)d * q, 1, "layers.%d.wo", l);
        P(L->bo, d, 0, "layers.%d.bo", l);
        P(L->ffn_norm_w, d, 0, "layers.%d.ffn_norm_w", l);
        P(L->ffn_norm_b, d, 0, "layers.%d.ffn_norm_b", l);
        P(L->w1, (size_t)h * d, 1, "layers.%d.w1", l);
        P(L->b1, h, 0, "layers.%d.b1", l);
        P(L->w3, (size_t)h * d, 1, "layers.%d.w3", l);
        P(L->b3, h, 0, "layers.%d.b3", l);
        P(L->w2, (size_t)d * h, 1, "layers.%d.w2", l);
        P(L->b2, d, 0, "layers.%d.b2", l);
    }
    P(w->final_norm_w, d, 0, "final_norm_w");
    P(w->final_norm_b, d, 0, "final_norm_b");
    if (!c->tied_classifier) P(w->classifier, (size_t)c->vocab_size * d, 1, "classifier");
#undef P
    return n;
}

static int max_params(const Config *c) { return 5 + 18 * c->n_layers; }

// GPT-2's initialisation, which nanoGPT and llm.c use: N(0, 0.02) for matrices and embeddings,
// with the projections into the residual stream scaled by 1/sqrt(2 n_layers); norms 1, biases 0.
static void init_params(const Config *c, float *base, const ParamTensor *pt, int n, uint64_t seed) {
    uint64_t rng = rng_for(seed, RNG_INIT, 0);
    for (int i = 0; i < n; i++) {
        float *p = base + pt[i].off;
        const char *dot_ = strrchr(pt[i].name, '.');
        const char *leaf = dot_ ? dot_ + 1 : pt[i].name;
        if (pt[i].decay) {
            float std = 0.02f;
            if (!strcmp(leaf, "wo") || !strcmp(leaf, "w2")) std /= sqrtf(2.0f * c->n_layers);
            for (size_t j = 0; j < pt[i].n; j++) p[j] = std * normal01(&rng);
        } else if (strstr(leaf, "norm_w")) {
            for (size_t j = 0; j < pt[i].n; j++) p[j] = 1.0f;
        } // biases stay 0
    }
}

// ----------------------------------------------------------------------------
// Activations: everything the backward pass needs, for up to B sequences of T tokens, in one
// allocation. Per-layer tensors are [n_layers][B*T rows]; a LayerActs view resolves the
// aliases of the pre-norm block (its mid-block sum is res1, its output is the next input).

typedef struct {
    int B, T;
    float *resid;                                              // [n_layers + 1][B*T, dim]
    float *ln1, *q, *k, *v, *att, *atty, *res1, *mid, *ln2;   // [n_layers][...]
    float *attd;                                               // att after dropout, if on
    float *h1, *h3, *hact, *res2;
    float *lnf, *logits, *losses;
    // backward scratch, shared by the layers
    float *dres, *g1, *g2, *dh, *dh3, *dq, *dk, *dv, *datty, *att_scratch;
    float *rope_cos, *rope_sin, *rope_nsin;
    int *tokens, *targets;
    float *mem;
} Acts;

static size_t carve_acts(const Config *c, int B, int T, int dropout, Acts *a, float *base) {
    size_t N = (size_t)B * T, L = c->n_layers, d = c->dim, hid = c->hidden_dim, V = c->vocab_size;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t off = 0, half = c->pos_kind == POS_ROPE ? c->rope_dims / 2 : 0;
    int pre = !c->post_norm, swiglu = c->ffn_kind == FFN_SWIGLU;
#define ACT(field, count) do { (field) = base && (count) != 0 ? base + off : NULL; off += ((count) + 15) & ~(size_t)15; } while (0)
    ACT(a->resid, (L + 1) * N * d);
    ACT(a->ln1, pre ? L * N * d : 0);
    ACT(a->q, L * N * qd);
    ACT(a->k, L * N * kvd);
    ACT(a->v, L * N * kvd);
    ACT(a->att, L * B * c->n_heads * (size_t)T * T);
    ACT(a->attd, dropout ? L * B * c->n_heads * (size_t)T * T : 0);
    ACT(a->atty, L * N * qd);
    ACT(a->res1, L * N * d);
    ACT(a->mid, pre ? 0 : L * N * d);
    ACT(a->ln2, pre ? L * N * d : 0);
    ACT(a->h1, L * N * hid);
    ACT(a->h3, swiglu ? L * N * hid : 0);
    ACT(a->hact, L * N * hid);
    ACT(a->res2, pre ? 0 : L * N * d);
    ACT(a->lnf, c->final_norm ? N * d : 0);
    ACT(a->logits, N * V);
    ACT(a->losses, N);
    ACT(a->dres, N * d);
    ACT(a->g1, N * d);
    ACT(a->g2, N * d);
    ACT(a->dh, N * hid);
    ACT(a->dh3, swiglu ? N * hid : 0);
    ACT(a->dq, N * qd);
    ACT(a->dk, N * kvd);
    ACT(a->dv, N * kvd);
    ACT(a->datty, N * qd);
    ACT(a->att_scratch, (size_t)n_threads() * T * T);
    ACT(a->rope_cos, (size_t)T * half);
    ACT(a->rope_sin, (size_t)T * half);
    ACT(a->rope_nsin, (size_t)T * half);
#undef ACT
    a->B = B;
    a->T = T;
    return off;
}

static void acts_init(Acts *a, const Config *c, int B, int T, int dropout) {
    size_t n = carve_acts(c, B, T, dropout, a, NULL);
    float *mem = xcalloc(n, sizeof(float), "activations");
    carve_acts(c, B, T, dropout, a, mem);
    a->mem = mem;
    a->tokens = xcalloc((size_t)B * T, sizeof(int), "batch");
    a->targets = xcalloc((size_t)B * T, sizeof(int), "batch");
    if (c->pos_kind == POS_ROPE) {
        size_t half = c->rope_dims / 2;
        rope_table(a->rope_cos, a->rope_sin, T, c->rope_dims, c->rope_theta);
        // The inverse rotation (rope backward) is the forward one with the sines negated.
        for (size_t i = 0; i < (size_t)T * half; i++) a->rope_nsin[i] = -a->rope_sin[i];
    }
}

typedef struct {
    float *in, *ain, *q, *k, *v, *att, *attd, *atty, *res1, *mid, *fin, *h1, *h3, *hact, *res2, *out;
} LayerActs;

static LayerActs layer_acts(const Config *c, const Acts *a, int l) {
    size_t N = (size_t)a->B * a->T, d = c->dim, hid = c->hidden_dim;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    LayerActs r = {
        .in = a->resid + l * N * d, .out = a->resid + (l + 1) * N * d,
        .q = a->q + l * N * qd, .k = a->k + l * N * kvd, .v = a->v + l * N * kvd,
        .att = a->att + l * (size_t)a->B * c->n_heads * a->T * a->T, .atty = a->atty + l * N * qd,
        .attd = (a->attd ? a->attd : a->att) + l * (size_t)a->B * c->n_heads * a->T * a->T,
        .res1 = a->res1 + l * N * d, .h1 = a->h1 + l * N * hid, .h3 = a->h3 ? a->h3 + l * N * hid : NULL,
        .hact = a->hact + l * N * hid,
    };
    if (c->post_norm) {
        r.ain = r.in;
        r.mid = a->mid + l * N * d;
        r.fin = r.mid;
        r.res2 = a->res2 + l * N * d;
    } else {
        r.ain = a->ln1 + l * N * d;
        r.mid = r.res1;
        r.fin = a->ln2 + l * N * d;
        r.res2 = r.out;
    }
    return r;
}

// ----------------------------------------------------------------------------
// Layers. Every function here runs on one thread, on the rows of its own sequences: a step
// forks the thread pool once and each thread takes its share of the batch through forward and
// backward (see model_step). Every linear layer's product is OpenBLAS sgemm (model.h's matmul
// forward), single-threaded inside the parallel region, so there is one pool; attention's
// are model.h's causal products, which skip the masked half (bench/attention.c). The forward
// pass strings model.h's kernels together with the model further down.

// din (=, or += with acc) dout · W; dW += doutᵀ · in; db += Σ rows of dout.
static void matmul_backward(float *din, int acc, float *dw, float *db, const float *dout, const float *in,
                            const float *w, int N, int n_in, int n_out) {
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, n_in, n_out, 1.0f, dout, n_out, w, n_in,
                    acc ? 1.0f : 0.0f, din, n_in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, N, 1.0f, dout, n_out, in, n_in, 1.0f, dw, n_in);
    if (db)
        for (int n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * n_out;
#pragma omp simd
            for (int o = 0; o < n_out; o++) db[o] += g[o];
        }
}

static void add_inplace(float *x, const float *y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

// dx (=, or += with acc) from dout through LayerNorm / RMSNorm of x; dw, db accumulate.
static void norm_backward(const Config *c, float *dx, int acc, float *dw, float *db, const float *dout, const float *x,
                          const float *w, int N) {
    int C = c->dim, ln = c->norm_kind == NORM_LAYER;
    float eps = c->norm_eps;
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
        float *dxn = dx + (size_t)n * C;
        // The simd reductions let the compiler vectorise the sums (in a fixed order).
        float mean = 0.0f, r, ss = 0.0f;
        if (ln) {
#pragma omp simd reduction(+ : mean)
            for (int i = 0; i < C; i++) mean += xn[i];
            mean /= C;
        }
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++) ss += (xn[i] - mean) * (xn[i] - mean);
        r = 1.0f / sqrtf(ss / C + eps);
        // xhat = (x - mean) r; dxhat = g w; dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int i = 0; i < C; i++) {
            float gw = gn[i] * w[i], xh = (xn[i] - mean) * r;
            sum_g += gw;
            sum_gx += gw * xh;
        }
        float mg = ln ? sum_g / C : 0.0f, mgx = sum_gx / C;
#pragma omp simd
        for (int i = 0; i < C; i++) {
            float xh = (xn[i] - mean) * r, v = r * (gn[i] * w[i] - mg - xh * mgx);
            dxn[i] = acc ? dxn[i] + v : v;
            dw[i] += gn[i] * xh;
            if (db) db[i] += gn[i];
        }
    }
}

// model.h's rope on rows [lo, hi) of the batch, each piece within one sequence at its
// positions; with the negated sines it is the inverse rotation, which is RoPE's backward.
static void rope_rows(const Config *c, float *x, int n_heads, const float *sin_t, const Acts *a, int lo, int hi) {
    int width = n_heads * c->head_dim;
    for (int r = lo; r < hi;) {
        int t = r % a->T, n = a->T - t < hi - r ? a->T - t : hi - r;
        rope(x + (size_t)r * width, (size_t)width, n, t, n_heads, c->head_dim, c->rope_dims, a->rope_cos, sin_t);
        r += n;
    }
}


// In place: dh holds d(activation output) on entry and d(h1) on exit; SwiGLU also gives dh3.
static void activation_backward(int kind, float *dh, float *dh3, const float *h1, const float *h3, size_t n) {
    switch (kind) {
    case FFN_SWIGLU:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x = h1[i], g = dh[i], s = 1.0f / (1.0f + exp_vec(-x));
            dh3[i] = g * x * s;
            dh[i] = g * h3[i] * s * (1.0f + x * (1.0f - s));
        }
        break;
    case FFN_GELU_TANH:
        // s = sigmoid(2u) = (1 + tanh u) / 2, so 1 - tanh² u = 4 s (1 - s)
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x = h1[i], u = GELU_K * (x + 0.044715f * x * x * x), s = 1.0f / (1.0f + exp_vec(-2.0f * u));
            dh[i] *= s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        }
        break;
    case FFN_GELU_ERF:
        for (size_t i = 0; i < n; i++) {
            float x = h1[i];
            dh[i] *= 0.5f * (1.0f + erff(x * 0.7071067811865476f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
        }
        break;
    default:
#pragma omp simd
        for (size_t i = 0; i < n; i++) dh[i] = h1[i] > 0.0f ? dh[i] : 0.0f;
        break;
    }
}

// Backward of model.h's attention with P = 0, from the probabilities it left in att and the
// ones the values were weighted with, attd (att after dropout, or att itself), with model.h's
// causal products per (sequence, head) on the strided head columns. Called outside a
// parallel region (model_step's shared sequences), the threads take (sequence, key/value
// head) pairs, each with its own [T, T] scratch ds + thread × T²; inside one, the calling
// thread does them all with ds.
static void attention_backward(const Config *c, float *dq, float *dk, float *dv, const float *dout, const float *att,
                               const float *attd, const float *q, const float *k, const float *v, float *scratch,
                               int B, int T) {
    int H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, qd = H * hd, kvd = KV * hd, group = H / KV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int pair = 0; pair < B * KV; pair++) {
        int b = pair / KV, kh = pair % KV;
        float *ds = scratch + (size_t)thread_num() * T * T;
        size_t kvo = (size_t)b * T * kvd + (size_t)kh * hd;
        for (int h = kh * group; h < (kh + 1) * group; h++) {
            const float *p = att + ((size_t)b * H + h) * T * T, *pd = attd + ((size_t)b * H + h) * T * T;
            size_t qo = (size_t)b * T * qd + (size_t)h * hd;
            int add = h != kh * group; // the group's first head sets dK and dV, the others add
            // dV += Pdᵀ dO;  dPd = dO Vᵀ
            causal_product(dv + kvo, kvd, pd, T, 1, dout + qo, qd, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, add);
            causal_scores(ds, dout + qo, qd, v + kvo, kvd, T, 0, hd, 1.0f);
            // With Pd = P ∘ M (M the dropout mask and scale, or 1): dP = M ∘ dPd, and the
            // softmax's dS = P ∘ (dP − rowsum(P ∘ dP)) · scale, where P ∘ dP = Pd ∘ dPd.
            // Masked entries have P = Pd = 0, so dS is 0 there, as the products below need.
            for (int t = 0; t < T; t++) {
                const float *pt = p + (size_t)t * T, *pdt = pd + (size_t)t * T;
                float *st = ds + (size_t)t * T, sum = 0.0f;
                int m = causal_width(t + 1, T);
                for (int j = 0; j < m; j++) sum += pdt[j] * st[j];
                for (int j = 0; j < m; j++) st[j] = (pdt[j] * st[j] - pt[j] * sum) * scale;
                memset(st + m, 0, (size_t)(T - m) * sizeof(float));
            }
            // dQ = dS K;  dK += dSᵀ Q
            causal_product(dq + qo, qd, ds, T, 0, k + kvo, kvd, T, hd, T, CAUSAL_BELOW, 0, 1.0f, 0);
            causal_product(dk + kvo, kvd, ds, T, 1, q + qo, qd, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, add);
        }
    }
}

// Rows [lo, hi) of the batch.
static void embed_backward(const Config *c, Weights *g, const float *dx, const int *tokens, int T, int lo, int hi) {
    int d = c->dim;
    for (int n = lo; n < hi; n++) {
        float *de = g->tok_embedding + (size_t)tokens[n] * d;
        const float *dn = dx + (size_t)n * d;
#pragma omp simd
        for (int i = 0; i < d; i++) de[i] += c->embed_scale * dn[i];
        if (g->pos_embedding) {
            float *dpos = g->pos_embedding + (size_t)(n % T) * d;
#pragma omp simd
            for (int i = 0; i < d; i++) dpos[i] += dn[i];
        }
    }
}

// Softmax and cross-entropy fused: logits become probabilities, losses[n] = -log p[target];
// with dscale != 0, logits become dloss/dlogits = (p - onehot) * dscale.
static void crossentropy_rows(float *logits, float *losses, const int *targets, int lo, int hi, int V, float dscale) {
    for (int n = lo; n < hi; n++) {
        float *row = logits + (size_t)n * V;
        softmax(row, V);
        losses[n] = -logf(row[targets[n]]);
        if (dscale != 0.0f) {
            row[targets[n]] -= 1.0f;
            for (int i = 0; i < V; i++) row[i] *= dscale;
        }
    }
}

// ----------------------------------------------------------------------------
// The model: forward keeps what backward needs; backward accumulates into the gradients.

static void embed_rows(const Config *c, const Weights *w, Acts *a, int lo, int hi) {
    for (int r = lo; r < hi;) {
        int t = r % a->T, n = a->T - t < hi - r ? a->T - t : hi - r;
        embed(c, w, a->resid + (size_t)r * c->dim, a->tokens + r, n, t);
        r += n;
    }
}

// Layer l up to its attention: norm, q, k, v, RoPE.
static void layer_head_rows(const Config *c, const Weights *w, Acts *a, int l, int lo, int hi) {
    const LayerWeights *L = &w->layers[l];
    LayerActs la = layer_acts(c, a, l);
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    int n = hi - lo;
    if (n <= 0) return;
    if (!c->post_norm) norm(c, la.ain + lo * d, la.in + lo * d, L->attn_norm_w, L->attn_norm_b, n);
    matmul(la.q + lo * qd, la.ain + lo * d, L->wq, L->bq, n, d, qd);
    matmul(la.k + lo * kvd, la.ain + lo * d, L->wk, L->bk, n, d, kvd);
    matmul(la.v + lo * kvd, la.ain + lo * d, L->wv, L->bv, n, d, kvd);
    if (c->pos_kind == POS_ROPE) {
        rope_rows(c, la.q, c->n_heads, a->rope_sin, a, lo, hi);
        rope_rows(c, la.k, c->n_kv_heads, a->rope_sin, a, lo, hi);
    }
}

// Dropout on layer l's attention probabilities: attd = att ∘ mask for sequences [b0, b1), and
// their outputs computed again from attd (model.h's attention, which ./run shares, knows no
// dropout). Only the causal entries are drawn; attd's others stay 0 from its allocation.
static void attention_dropout(const Config *c, const Dropout *drop, const LayerActs *la, int l, int b0, int b1,
                              int T) {
    int H = c->n_heads, hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    size_t qd = (size_t)H * hd, kvd = (size_t)c->n_kv_heads * hd;
    for (int b = b0; b < b1; b++)
        for (int h = 0; h < H; h++) {
            size_t o = ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++)
                dropout_apply(drop, 3 * l + 1, la->attd + o + (size_t)t * T, la->att + o + (size_t)t * T,
                              o + (size_t)t * T, (size_t)t + 1);
            causal_product(la->atty + (size_t)b * T * qd + (size_t)h * hd, qd, la->attd + o, T, 0,
                           la->v + (size_t)b * T * kvd + (size_t)(h / group) * hd, kvd, T, hd, T, CAUSAL_BELOW, 0,
                           1.0f, 0);
        }
}

// Layer l after its attention: output projection, residual, norms, feed-forward; drop (or
// NULL) applies dropout to both sublayers' outputs before their residual adds.
static void layer_tail_rows(const Config *c, const Weights *w, Acts *a, int l, int lo, int hi, const Dropout *drop) {
    const LayerWeights *L = &w->layers[l];
    LayerActs la = layer_acts(c, a, l);
    size_t d = c->dim, hid = c->hidden_dim, qd = (size_t)c->n_heads * c->head_dim;
    int n = hi - lo;
    if (n <= 0) return;
    matmul(la.res1 + lo * d, la.atty + lo * qd, L->wo, L->bo, n, qd, d);
    if (drop) dropout_apply(drop, 3 * l + 2, la.res1 + lo * d, la.res1 + lo * d, lo * d, n * d);
    for (size_t i = lo * d; i < hi * d; i++) la.res1[i] += la.in[i];
    if (c->post_norm) norm(c, la.mid + lo * d, la.res1 + lo * d, L->attn_norm_w, L->attn_norm_b, n);
    else norm(c, la.fin + lo * d, la.mid + lo * d, L->ffn_norm_w, L->ffn_norm_b, n);
    matmul(la.h1 + lo * hid, la.fin + lo * d, L->w1, L->b1, n, d, hid);
    if (la.h3) matmul(la.h3 + lo * hid, la.fin + lo * d, L->w3, L->b3, n, d, hid);
    ffn_activation(c->ffn_kind, la.hact + lo * hid, la.h1 + lo * hid, la.h3 ? la.h3 + lo * hid : NULL, n * hid);
    matmul(la.res2 + lo * d, la.hact + lo * hid, L->w2, L->b2, n, hid, d);
    if (drop) dropout_apply(drop, 3 * l + 3, la.res2 + lo * d, la.res2 + lo * d, lo * d, n * d);
    for (size_t i = lo * d; i < hi * d; i++) la.res2[i] += la.mid[i];
    if (c->post_norm) norm(c, la.out + lo * d, la.res2 + lo * d, L->ffn_norm_w, L->ffn_norm_b, n);
}

// Final norm, classifier, loss.
static void output_rows(const Config *c, const Weights *w, Acts *a, int lo, int hi, float dscale) {
    size_t d = c->dim, V = c->vocab_size;
    int n = hi - lo;
    if (n <= 0) return;
    const float *x = layer_acts(c, a, c->n_layers - 1).out + lo * d; // laid out for the full batch
    if (c->final_norm) {
        norm(c, a->lnf + lo * d, x, w->final_norm_w, w->final_norm_b, n);
        x = a->lnf + lo * d;
    }
    matmul(a->logits + lo * V, x, w->classifier, NULL, n, d, V);
    crossentropy_rows(a->logits, a->losses, a->targets, lo, hi, V, dscale);
}

// Sequences [b0, b1) of the batch through the model on the calling thread, with dropout if
// drop is not NULL; each row's loss goes to a->losses (with dscale != 0, a->logits holds
// dloss/dlogits).
static void forward_seqs(const Config *c, const Weights *w, Acts *a, int b0, int b1, float dscale,
                         const Dropout *drop) {
    int T = a->T, lo = b0 * T, hi = b1 * T;
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    if (hi <= lo) return;
    embed_rows(c, w, a, lo, hi);
    if (drop) dropout_apply(drop, 0, a->resid + lo * d, a->resid + lo * d, lo * d, (size_t)(hi - lo) * d);
    for (int l = 0; l < c->n_layers; l++) {
        LayerActs la = layer_acts(c, a, l);
        layer_head_rows(c, w, a, l, lo, hi);
        attention(la.atty + lo * qd, la.att + (size_t)b0 * c->n_heads * T * T, la.q + lo * qd, la.k + lo * kvd,
                  la.v + lo * kvd, b1 - b0, T, 0, c->n_heads, c->n_kv_heads, c->head_dim);
        if (drop) attention_dropout(c, drop, &la, l, b0, b1, T);
        layer_tail_rows(c, w, a, l, lo, hi, drop);
    }
    output_rows(c, w, a, lo, hi, dscale);
}

// After forward_seqs on the same sequences with the same drop: their gradients added into g.
// ds is this thread's [T, T] scratch ([threads, T, T] outside a parallel region, see
// attention_backward); the other backward buffers are used on these sequences' rows only.
static void backward_seqs(const Config *c, const Weights *w, Weights *g, Acts *a, int b0, int b1, float *ds,
                          const Dropout *drop) {
    int T = a->T, lo = b0 * T, hi = b1 * T, n = hi - lo, H = c->n_heads, KV = c->n_kv_heads;
    size_t d = c->dim, hid = c->hidden_dim, qd = (size_t)H * c->head_dim, kvd = (size_t)KV * c->head_dim;
    if (n <= 0) return;
#define ROWS(p, width) ((p) + (size_t)lo * (width))
    float *dres = ROWS(a->dres, d), *g1 = ROWS(a->g1, d), *g2 = ROWS(a->g2, d), *dh = ROWS(a->dh, hid);
    float *dh3 = a->dh3 ? ROWS(a->dh3, hid) : NULL, *datty = ROWS(a->datty, qd);
    float *dq = ROWS(a->dq, qd), *dk = ROWS(a->dk, kvd), *dv = ROWS(a->dv, kvd);
    const float *xL = ROWS(layer_acts(c, a, c->n_layers - 1).out, d), *dlogits = ROWS(a->logits, c->vocab_size);
    if (c->final_norm) {
        matmul_backward(g1, 0, g->classifier, NULL, dlogits, ROWS(a->lnf, d), w->classifier, n, d, c->vocab_size);
        norm_backward(c, dres, 0, g->final_norm_w, g->final_norm_b, g1, xL, w->final_norm_w, n);
    } else {
        matmul_backward(dres, 0, g->classifier, NULL, dlogits, xL, w->classifier, n, d, c->vocab_size);
    }
    // dres holds d(layer output) going down
    for (int l = c->n_layers - 1; l >= 0; l--) {
        const LayerWeights *L = &w->layers[l];
        LayerWeights *G = &g->layers[l];
        LayerActs la = layer_acts(c, a, l);
        float *dres2 = dres;
        if (c->post_norm) {
            norm_backward(c, g1, 0, G->ffn_norm_w, G->ffn_norm_b, dres, ROWS(la.res2, d), L->ffn_norm_w, n);
            dres2 = g1;
        }
        // g2 is free until w1's backward: it holds d(feed-forward output) through dropout
        const float *dffn = dres2;
        if (drop) {
            dropout_apply(drop, 3 * l + 3, g2, dres2, (size_t)lo * d, (size_t)n * d);
            dffn = g2;
        }
        matmul_backward(dh, 0, G->w2, G->b2, dffn, ROWS(la.hact, hid), L->w2, n, hid, d);
        activation_backward(c->ffn_kind, dh, dh3, ROWS(la.h1, hid), la.h3 ? ROWS(la.h3, hid) : NULL, (size_t)n * hid);
        matmul_backward(g2, 0, G->w1, G->b1, dh, ROWS(la.fin, d), L->w1, n, d, hid);
        if (la.h3) matmul_backward(g2, 1, G->w3, G->b3, dh3, ROWS(la.fin, d), L->w3, n, d, hid);
        // d(mid) = d(res2) through the residual + d(ffn input)
        float *dmid = dres2;
        if (c->post_norm) {
            add_inplace(dmid, g2, (size_t)n * d);
            norm_backward(c, dres, 0, G->attn_norm_w, G->attn_norm_b, dmid, ROWS(la.res1, d), L->attn_norm_w, n);
        } else {
            norm_backward(c, dmid, 1, G->ffn_norm_w, G->ffn_norm_b, g2, ROWS(la.mid, d), L->ffn_norm_w, n);
        }
        // dres = d(res1); g2 is free until wq's backward, as above
        const float *dproj = dres;
        if (drop) {
            dropout_apply(drop, 3 * l + 2, g2, dres, (size_t)lo * d, (size_t)n * d);
            dproj = g2;
        }
        matmul_backward(datty, 0, G->wo, G->bo, dproj, ROWS(la.atty, qd), L->wo, n, qd, d);
        attention_backward(c, dq, dk, dv, datty, la.att + (size_t)b0 * H * T * T, la.attd + (size_t)b0 * H * T * T,
                           ROWS(la.q, qd), ROWS(la.k, kvd), ROWS(la.v, kvd), ds, b1 - b0, T);
        if (c->pos_kind == POS_ROPE) {
            rope_rows(c, a->dq, H, a->rope_nsin, a, lo, hi);
            rope_rows(c, a->dk, KV, a->rope_nsin, a, lo, hi);
        }
        matmul_backward(g2, 0, G->wq, G->bq, dq, ROWS(la.ain, d), L->wq, n, d, qd);
        matmul_backward(g2, 1, G->wk, G->bk, dk, ROWS(la.ain, d), L->wk, n, d, kvd);
        matmul_backward(g2, 1, G->wv, G->bv, dv, ROWS(la.ain, d), L->wv, n, d, kvd);
        if (c->post_norm)
            add_inplace(dres, g2, (size_t)n * d);
        else
            norm_backward(c, dres, 1, G->attn_norm_w, G->attn_norm_b, g2, ROWS(la.in, d), L->attn_norm_w, n);
    }
#undef ROWS
    if (drop) dropout_apply(drop, 0, dres, dres, (size_t)lo * d, (size_t)n * d);
    embed_backward(c, g, a->dres, a->tokens, T, lo, hi);
}

// One fork of the thread pool per batch: each thread takes an equal number of whole sequences
// through forward and, with grads (one Weights per thread), backward into its own gradients,
// so no thread waits for another until the end (reduce_grads adds the copies). Measured on
// the baby configuration: +15 % over forking per kernel with passive waits. Returns the
// mean loss, added in row order whatever the thread count. drop: dropout, or NULL.
static double model_step(const Config *c, const Weights *w, Weights *grads, Acts *a, int B, float dscale,
                         const Dropout *drop) {
    // Sequences left over after an equal number per thread (all of them when there are fewer
    // than threads: nanoGPT fine-tunes with batch 1) go through with the threads sharing each
    // product instead, when a sequence is large enough to pay for a fork per kernel. Measured
    // with 2 threads and batch 1 (forward + backward per sequence): 0.3 GFLOP (the baby), 15 %
    // slower than one thread alone; 2.5 GFLOP, 20 % faster; 16, 50 %; 130 (85M, block 256), 60 %.
    double seq_flops = 6.0 * a->T * ((double)c->n_layers * layer_macs(c) + (double)c->vocab_size * c->dim);
    int even = seq_flops >= 1e9 ? B / n_threads() * n_threads() : B;
    if (even) {
#pragma omp parallel
        {
            int b0, b1, t = thread_num();
            my_rows(even, &b0, &b1);
            forward_seqs(c, w, a, b0, b1, dscale, drop);
            if (grads) backward_seqs(c, w, &grads[t], a, b0, b1, a->att_scratch + (size_t)t * a->T * a->T, drop);
        }
    }
    if (even < B) {
        // model.h's matmul and attention fork outside a parallel region; so does OpenBLAS in
        // the backward's sgemm.
        forward_seqs(c, w, a, even, B, dscale, drop);
        if (grads) backward_seqs(c, w, &grads[0], a, even, B, a->att_scratch, drop);
    }
    double sum = 0.0;
    for (int n = 0; n < B * a->T; n++) sum += a->losses[n];
    return sum / (B * a->T);
}

// The per-thread gradient copies of model_step, n floats each, summed into the first in
// thread order, the others zeroed for the next step; returns the sum of squares of the sum,
// for clipping, in the same pass. Both are deterministic for a thread count: the squares
// are summed in per-thread partials over static ranges, added in thread order (an OpenMP
// reduction clause may combine in any order).
static double reduce_grads(float *g, size_t n, int copies) {
    double part[256] = {0};
    int nt = n_threads() < 256 ? n_threads() : 256;
#pragma omp parallel num_threads(nt)
    {
        int lo, hi, t = thread_num();
        my_rows((int)((n + 1023) / 1024), &lo, &hi);
        for (size_t from = (size_t)lo * 1024; from < (size_t)hi * 1024 && from < n; from += 1024) {
            size_t end = from + 1024 < n ? from + 1024 : n;
            for (int k = 1; k < copies; k++) {
                float *gk = g + k * n;
#pragma omp simd
                for (size_t i = from; i < end; i++) {
                    g[i] += gk[i];
                    gk[i] = 0.0f;
                }
            }
            double s = 0.0;
#pragma omp simd reduction(+ : s)
            for (size_t i = from; i < end; i++) s += (double)g[i] * g[i];
            part[t] += s;
        }
    }
    double s = 0.0;
    for (int t = 0; t < nt; t++) s += part[t];
    return s;
}

// ----------------------------------------------------------------------------
// Optimiser: nanoGPT's schedule and PyTorch's AdamW.

static float get_lr(const Opts *o, int it) {
    if (it < o->warmup_iters) return o->lr * (it + 1) / (o->warmup_iters + 1);
    if (it > o->lr_decay_iters || o->lr_decay_iters <= o->warmup_iters) return o->min_lr;
    double ratio = (double)(it - o->warmup_iters) / (o->lr_decay_iters - o->warmup_iters);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(o->min_lr + coeff * (o->lr - o->min_lr));
}

// PyTorch's AdamW step on every tensor, in one parallel region; gscale is the clipping factor.
// The gradients are zeroed on the way, ready for the next step's accumulation.
static void adamw_step(float *p, float *g, float *m, float *v, const ParamTensor *pt, int npt, float lr,
                       float weight_decay, float b1, float b2, int t, float gscale) {
    float bc1 = 1.0f - powf(b1, (float)t), bc2_sqrt = sqrtf(1.0f - powf(b2, (float)t));
#pragma omp parallel
    for (int k = 0; k < npt; k++) {
        float decay = 1.0f - lr * (pt[k].decay ? weight_decay : 0.0f);
        size_t lo = pt[k].off, hi = pt[k].off + pt[k].n;
#pragma omp for simd schedule(static) nowait
        for (size_t i = lo; i < hi; i++) {
            float gi = g[i] * gscale;
            g[i] = 0.0f;
            m[i] += (1.0f - b1) * (gi - m[i]);
            v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
            p[i] = p[i] * decay - (lr / bc1) * m[i] / (sqrtf(v[i]) / bc2_sqrt + 1e-8f);
        }
    }
}

// ----------------------------------------------------------------------------
// Files: model.h's write_atomic writes both of a checkpoint's files.

typedef struct {
    Config c;
    void *tok_blob;
    size_t tok_bytes, param_bytes;
    float *params;
} ModelData;

// The resume state: a copy of the weights (so that it never depends on which of the two files
// a crash let through), both AdamW moments, the options and the step. The data order is a
// function of (seed, step), so the step is all the data position there is. Config and
// tokenizer come from the model file, which are the same at every checkpoint of a run; a
// fingerprint of both makes sure of it.
#define STATE_MAGIC "ATTNSTAT"
#define STATE_VERSION 2 // 2: Opts gained dropout

typedef struct {
    char magic[8];
    uint32_t version, opts_bytes;
    uint64_t step, corpus_bytes, corpus_hash, model_hash, param_bytes;
    Opts opts;
} StateHeader;

typedef struct {
    const ModelData *md;
    const float *m, *v;
    StateHeader h;
} StateData;

static void write_state_cb(Sink *s, const void *ctx) {
    const StateData *sd = ctx;
    sink_write(s, &sd->h, sizeof sd->h);
    sink_write(s, sd->md->params, sd->md->param_bytes);
    sink_write(s, sd->m, sd->md->param_bytes);
    sink_write(s, sd->v, sd->md->param_bytes);
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t model_hash(const ModelData *md) {
    FileHeader h = header_from_config(&md->c);
    return fnv1a(&h, sizeof h) ^ fnv1a(md->tok_blob, md->tok_bytes) * 31;
}

// A model file to train on: float32 weights only (a Q8_0 file's are rounded for ./run).
static void open_trainable(Model *m, const char *path, const char *need) {
    char err[512];
    if (model_open(m, path, err, sizeof err)) die("%s%s", err, need);
    if (m->config.weight_type != WEIGHTS_F32)
        die("%s: its weights are quantised (Q8_0); training needs float32 weights: convert the original checkpoint "
            "without --quantize",
            path);
}

// Everything --resume needs: config and tokenizer from the model file, the rest from
// MODEL.state, whose options replace the command line's.
static void load_state(const char *out, const char *path, const char *corpus_path, size_t corpus_len,
                       uint64_t corpus_hash, ModelData *md, float **m, float **v, Opts *o, int *step) {
    Model model;
    open_trainable(&model, out, " (needed with --resume)");
    md->c = model.config;
    md->tok_bytes = model.tok_bytes;
    md->tok_blob = xcalloc(md->tok_bytes, 1, "the tokenizer");
    memcpy(md->tok_blob, model.tok_blob, md->tok_bytes);
    md->param_bytes = carve_weights(&md->c, NULL, NULL);
    model_close(&model);
    size_t n;
    char *buf = read_file(path, &n, "the resume state");
    StateHeader sh;
    if (n < sizeof sh) die("%s: too short for a resume state", path);
    memcpy(&sh, buf, sizeof sh);
    if (memcmp(sh.magic, STATE_MAGIC, 8) || sh.version != STATE_VERSION || sh.opts_bytes != sizeof(Opts))
        die("%s: not a resume state of this build", path);
    if (sh.param_bytes != md->param_bytes || sh.model_hash != model_hash(md))
        die("%s: belongs to a different model than %s", path, out);
    if (n != sizeof sh + 3 * sh.param_bytes) die("%s: %zu bytes, its header implies %llu (truncated?)", path, n,
                                                 (unsigned long long)(sizeof sh + 3 * sh.param_bytes));
    if (sh.corpus_bytes != corpus_len || sh.corpus_hash != corpus_hash)
        die("%s: the run was trained on a different corpus than %s", path, corpus_path);
    const char *p = buf + sizeof sh;
    md->params = xcalloc(md->param_bytes, 1, "parameters");
    *m = xcalloc(md->param_bytes, 1, "AdamW moments");
    *v = xcalloc(md->param_bytes, 1, "AdamW moments");
    memcpy(md->params, p, md->param_bytes);
    memcpy(*m, p + md->param_bytes, md->param_bytes);
    memcpy(*v, p + 2 * md->param_bytes, md->param_bytes);
    *o = sh.opts;
    check_saved_opts(o, path);
    if (sh.step > (uint64_t)o->max_iters)
        die("%s: step %llu is past its run's end (damaged?)", path, (unsigned long long)sh.step);
    *step = (int)sh.step;
    free(buf);
}

// Both files of a checkpoint; the state first, as it holds its own copy of the weights.
static void save_checkpoint(const char *out, const char *state_path, StateData *sd, int step) {
    char err[512];
    const ModelData *md = sd->md;
    sd->h.step = (uint64_t)step;
    if (write_atomic(state_path, write_state_cb, sd, err, sizeof err) ||
        model_save(out, &md->c, md->tok_blob, md->tok_bytes, md->params, err, sizeof err))
        die("%s; the previous checkpoint is intact", err);
}

// The log: a new one, or on resume the old one without the rows after the checkpoint.
static FILE *open_log(const char *path, int resume, int start_step) {
    size_t n = 0;
    char *old = resume && access(path, F_OK) == 0 ? read_file(path, &n, "the log") : NULL;
    FILE *csv = fopen(path, "w");
    if (!csv) die("%s: cannot write the log: %s", path, strerror(errno));
    if (!old) fprintf(csv, "step,train_loss,val_loss,lr,tokens_per_sec\n");
    for (char *line = old, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        int step = 0;
        if (!strncmp(line, "step,", 5) || (sscanf(line, "%d,", &step) == 1 && step <= start_step))
            fwrite(line, 1, (size_t)(next - line), csv);
    }
    free(old);
    fflush(csv);
    return csv;
}

static void dump_grads(const char *prefix, const float *grads, const ParamTensor *pt, int npt) {
    char p[4096];
    snprintf(p, sizeof p, "%s.grads", prefix);
    FILE *f = fopen(p, "wb");
    if (!f) die("%s: cannot write the dump", p);
    for (int i = 0; i < npt; i++) {
        uint64_t n = pt[i].n;
        fwrite(pt[i].name, 1, sizeof pt[i].name, f);
        fwrite(&n, sizeof n, 1, f);
        fwrite(grads + pt[i].off, sizeof(float), n, f);
    }
    if (ferror(f) | fclose(f)) die("%s: cannot write the dump", p);
}

// ----------------------------------------------------------------------------
// Data: the corpus as token ids, split 90/10; batches are random windows as in nanoGPT.

typedef struct {
    int *ids;
    size_t n;
} Split;

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

static double estimate_loss(const Config *c, const Weights *w, Acts *a, const Split *s, int iters, uint64_t seed,
                            int purpose) {
    double sum = 0.0;
    for (int i = 0; i < iters; i++) {
        fill_batch(a, s, a->B, rng_for(seed, purpose, i));
        sum += model_step(c, w, NULL, a, a->B, 0.0f, NULL);
    }
    return sum / iters;
}

// Every token of the split after the first is predicted once: consecutive windows of T
// targets, each with the context from its window's start (the tail shorter than T is dropped).
// Splits beyond 2^20 tokens are scored on their first 2^20. On a terminal a status line
// counts the windows: for a large model this takes minutes.
static double full_loss(const Config *c, const Weights *w, Acts *a, const Split *s, size_t *count, int tty) {
    int T = a->T;
    size_t n = s->n < ((size_t)1 << 20) + 1 ? s->n : ((size_t)1 << 20) + 1;
    size_t windows = (n - 1) / T;
    double sum = 0.0, shown = now_s();
    for (size_t w0 = 0; w0 < windows; w0 += a->B) {
        int B = windows - w0 < (size_t)a->B ? (int)(windows - w0) : a->B;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t ix = (w0 + b) * T + t;
                a->tokens[(size_t)b * T + t] = s->ids[ix];
                a->targets[(size_t)b * T + t] = s->ids[ix + 1];
            }
        sum += model_step(c, w, NULL, a, B, 0.0f, NULL) * B * T;
        if (tty && now_s() - shown > 0.5) {
            printf("\r\033[Kscoring the validation split: %zu of %zu windows", w0 + B, windows);
            fflush(stdout);
            shown = now_s();
        }
    }
    if (tty) fputs("\r\033[K", stdout);
    *count = windows * T;
    return sum / (double)(windows * T);
}

// ----------------------------------------------------------------------------
// A short sample at each evaluation, through ./run's inference path (model.h's forward).

static void print_sample(const Config *c, const Weights *w, RunState *rs, float *logits, const Tokenizer *tok,
                         int first, int n, uint64_t rng) {
    char out[3 * 1024 + 64];
    TokSanitizer san = {0};
    int token = first, prev = -1;
    if (n > c->seq_len) n = c->seq_len;
    fputs("---\n", stdout);
    for (int pos = 0; pos < n; pos++) {
        size_t len;
        const char *piece = tokenizer_decode(tok, prev, token, &len);
        if (piece && len <= 1024) fwrite(out, 1, tokenizer_sanitize(&san, piece, len, out, 0), stdout);
        if (pos + 1 == n) break;
        forward(c, w, rs, &token, 1, pos, logits, 0);
        // temperature 0.8, as nanoGPT's sample.py
        for (int i = 0; i < c->vocab_size; i++) logits[i] /= 0.8f;
        softmax(logits, c->vocab_size);
        float r = (float)uniform01(&rng), cdf = 0.0f;
        int next = c->vocab_size - 1;
        for (int i = 0; i < c->vocab_size; i++) {
            cdf += logits[i];
            if (r < cdf) { next = i; break; }
        }
        prev = token;
        token = next;
    }
    fwrite(out, 1, tokenizer_sanitize(&san, "", 0, out, 1), stdout);
    fputs("\n---\n", stdout);
}

// ----------------------------------------------------------------------------

static volatile sig_atomic_t stop_signal = 0;
static void on_signal(int sig) { stop_signal = sig; }

static Config config_from_opts(const Opts *o, int vocab_size) {
    if (o->n_embd % o->n_head) die("--n-embd %d is not a multiple of --n-head %d", o->n_embd, o->n_head);
    if (o->n_head % o->n_kv_head) die("--n-head %d is not a multiple of --n-kv-head %d", o->n_head, o->n_kv_head);
    int hd = o->n_embd / o->n_head;
    Config c = {
        .dim = o->n_embd, .n_layers = o->n_layer, .n_heads = o->n_head, .n_kv_heads = o->n_kv_head, .head_dim = hd,
        .vocab_size = vocab_size, .seq_len = o->block_size, .final_norm = 1, .tied_classifier = 1,
        .embed_scale = 1.0f, .norm_eps = 1e-5f, .tok_kind = TOK_SENTENCEPIECE, .bos_id = -1, .eos_id = -1,
        .rope_theta = 10000.0f, // FORMAT.md wants a valid theta even where it is ignored
    };
    if (o->arch == ARCH_GPT) {
        c.hidden_dim = 4 * o->n_embd;
        c.pos_kind = POS_LEARNED;
        c.ffn_kind = FFN_GELU_TANH;
        c.norm_kind = NORM_LAYER;
        c.bias_flags = BIAS_ALL;
    } else {
        if (hd % 2) die("--arch llama: head size %d (n-embd / n-head) must be even for RoPE", hd);
        // Llama's SwiGLU width: two thirds of 4 * dim, rounded up to a multiple of 32
        c.hidden_dim = (2 * 4 * o->n_embd / 3 + 31) / 32 * 32;
        c.pos_kind = POS_ROPE;
        c.rope_dims = hd;
        c.ffn_kind = FFN_SWIGLU;
        c.norm_kind = NORM_RMS;
    }
    FileHeader h = header_from_config(&c);
    char err[256];
    if (config_from_header(&h, &c, err, sizeof err)) die("the model options give an invalid model: %s", err);
    return c;
}

static void write_dump(const char *path, const void *p, size_t n, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) die("%s: cannot write the dump", path);
}

int main(int argc, char **argv) {
    prefer_passive_threads(argv); // measured here: spinning threads made training 7x slower under load
    Args args;
    parse_args(&args, argc, argv);
    Opts o = args.o;
    char err[512];
    size_t out_len = strlen(args.out);
    char *state_path = xcalloc(out_len + 16, 1, "a file name"), *csv_path = xcalloc(out_len + 16, 1, "a file name");
    snprintf(state_path, out_len + 16, "%s.state", args.out);
    snprintf(csv_path, out_len + 16, "%s.csv", args.out);
    // (-o equal to --init is allowed: the model is read whole before the first checkpoint.)
    const char *outputs[] = {args.out, state_path, csv_path};
    for (int i = 0; i < 3; i++)
        if (same_file(outputs[i], args.data)) die("%s is the corpus (-d): writing it would destroy it", outputs[i]);
    // A full disk under `ulimit -f` must fail the write, not kill the process.
    signal(SIGXFSZ, SIG_IGN);

    size_t corpus_len;
    // corpus and md are static so that a die() on a bad input, which exits while they are
    // live, leaves them reachable: held only in a register, LeakSanitizer calls them leaks.
    static char *corpus;
    corpus = read_file(args.data, &corpus_len, "the corpus");
    if (corpus_len == 0) die("%s: the corpus is empty", args.data);
    size_t bad = tokenizer_first_non_text(corpus, corpus_len);
    if (bad < corpus_len)
        die("%s: not UTF-8 text: %s at byte %zu (train on text files)", args.data,
            corpus[bad] ? "invalid UTF-8" : "a NUL byte", bad);
    uint64_t corpus_hash = fnv1a(corpus, corpus_len);

    // Model: from the resume state, from --init, or new.
    static ModelData md;
    float *m_mem = NULL, *v_mem = NULL;
    int start_step = 0;
    if (args.resume) {
        load_state(args.out, state_path, args.data, corpus_len, corpus_hash, &md, &m_mem, &v_mem, &o, &start_step);
        // The run goes on with its own options; only its length may change (past the end of
        // the decay it trains on at --min-lr).
        if (args.max_iters_given) o.max_iters = args.o.max_iters;
        if (o.max_iters < start_step)
            die("--max-iters %d: %s is already at step %d; give a larger --max-iters to go on", o.max_iters,
                args.out, start_step);
        if (args.others_given)
            fprintf(stderr, "%s: note: --resume continues with the options saved in %s; only -d, -o and --max-iters "
                            "are taken from the command line\n", prog, state_path);
    } else if (args.init) {
        if (args.shape_given)
            fprintf(stderr, "%s: note: --init keeps the architecture of %s; --arch and --n-* are ignored\n", prog,
                    args.init);
        Model m;
        open_trainable(&m, args.init, "");
        md.c = m.config;
        md.tok_bytes = m.tok_bytes;
        md.tok_blob = xcalloc(md.tok_bytes, 1, "the tokenizer");
        memcpy(md.tok_blob, m.tok_blob, md.tok_bytes);
        md.param_bytes = carve_weights(&md.c, NULL, NULL);
        md.params = xcalloc(md.param_bytes, 1, "parameters");
        memcpy(md.params, (const char *)m.map + ((const FileHeader *)m.map)->weights_offset, md.param_bytes);
        model_close(&m);
        if (!args.block_given) o.block_size = md.c.seq_len;
        if (o.block_size > md.c.seq_len)
            die("--block-size %d exceeds %s's context length %d", o.block_size, args.init, md.c.seq_len);
    } else {
        int rc = o.vocab_size ? tokenizer_learn_bpe(corpus, corpus_len, o.vocab_size, &md.tok_blob, &md.tok_bytes, err,
                                                    sizeof err)
                              : tokenizer_learn_chars(corpus, corpus_len, &md.tok_blob, &md.tok_bytes, err, sizeof err);
        if (rc) die("%s: cannot learn a vocabulary: %s", args.data, err);
        uint32_t n_pieces;
        memcpy(&n_pieces, md.tok_blob, 4);
        md.c = config_from_opts(&o, (int)n_pieces);
        md.param_bytes = carve_weights(&md.c, NULL, NULL);
        md.params = xcalloc(md.param_bytes, 1, "parameters");
    }
    Config *c = &md.c;
    if (o.block_size > c->seq_len) die("block size %d exceeds the model's context length %d", o.block_size, c->seq_len);
    if (c->pos_kind == POS_ROPE && c->rope_dims == 0) die("model has RoPE with rope_dims 0");

    Tokenizer tok;
    if (tokenizer_init(&tok, md.tok_blob, md.tok_bytes, c->tok_kind, c->tok_flags, c->bos_id, c->eos_id, err,
                       sizeof err))
        die("tokenizer: %s", err);
    if (corpus_len > (size_t)INT32_MAX - 2) die("%s: corpora above 2 GiB are not supported", args.data);
    int *ids = xcalloc(corpus_len + 2, sizeof(int), "the encoded corpus");
    int n_ids = tokenizer_encode(&tok, corpus, corpus_len, 0, ids, (int)corpus_len + 2, err, sizeof err);
    if (n_ids < 0) die("%s: cannot encode the corpus: %s", args.data, err);
    free(corpus);
    Split train = {ids, (size_t)(n_ids * 0.9)};
    Split val = {ids + train.n, (size_t)n_ids - train.n};
    int T = o.block_size, B = o.batch_size;
    if (train.n < (size_t)T + 1 || val.n < (size_t)T + 1)
        die("%s: %d tokens give %zu training and %zu validation tokens; each needs more than the block size %d "
            "(use a longer corpus or a smaller --block-size)", args.data, n_ids, train.n, val.n, T);

    // Parameters, gradients and moments: one block each, carved the same way; the gradients'
    // block holds a copy per thread (model_step), the first of which the optimiser reads.
    // m and v share the parameters' tensor offsets (pt below).
    Weights w, *grads;
    int nt = n_threads();
    size_t nfloat = md.param_bytes / sizeof(float);
    float *grad_mem = xcalloc(nfloat * nt, sizeof(float), "gradients");
    if (!m_mem) m_mem = xcalloc(nfloat, sizeof(float), "AdamW moments");
    if (!v_mem) v_mem = xcalloc(nfloat, sizeof(float), "AdamW moments");
    grads = xcalloc(nt, sizeof *grads, "gradients");
    if (weights_init(&w, c, md.params)) die("out of memory");
    for (int t = 0; t < nt; t++)
        if (weights_init(&grads[t], c, grad_mem + t * nfloat)) die("out of memory");
    ParamTensor *pt = xcalloc(max_params(c), sizeof *pt, "the tensor list");
    int npt = list_params(c, &w, md.params, pt);
    if (!args.resume && !args.init) init_params(c, md.params, pt, npt, (uint64_t)o.seed);

    Acts acts;
    // A p below 2^-25 rounds to a threshold of 0: no dropout, and no buffer for it.
    Dropout drop = dropout_init(o.dropout, (uint64_t)o.seed);
    acts_init(&acts, c, B, T, drop.threshold != 0);
    int sites = 1 + 3 * c->n_layers;
    RunState rs;
    if (state_init(&rs, c, 1)) die("out of memory for the sampling state");
    float *sample_logits = xcalloc(c->vocab_size, sizeof(float), "logits");

    size_t nparams = 0;
    for (int i = 0; i < npt; i++) nparams += pt[i].n;
    printf("model: %s, %d layers, %d heads (%d kv), dim %d, hidden %d, vocab %d, context %d: %.2fM parameters\n",
           c->norm_kind == NORM_LAYER ? "LayerNorm" : "RMSNorm", c->n_layers, c->n_heads, c->n_kv_heads, c->dim,
           c->hidden_dim, c->vocab_size, c->seq_len, nparams / 1e6);
    printf("data: %s, %d tokens (%zu train, %zu val); batch %d x %d x %d accum; %d threads\n", args.data, n_ids, train.n,
           val.n, B, T, o.grad_accum, n_threads());
    if (start_step) printf("resuming at step %d of %d\n", start_step, o.max_iters);
    fflush(stdout);

    FILE *csv = open_log(csv_path, args.resume, start_step);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; // a second Ctrl-C stops at once; the last checkpoint is intact
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    StateData sd = {.md = &md, .m = m_mem, .v = v_mem};
    memcpy(sd.h.magic, STATE_MAGIC, 8);
    sd.h.version = STATE_VERSION;
    sd.h.opts_bytes = sizeof(Opts);
    sd.h.corpus_bytes = corpus_len;
    sd.h.corpus_hash = corpus_hash;
    sd.h.model_hash = model_hash(&md);
    sd.h.param_bytes = md.param_bytes;
    sd.h.opts = o;

    int tty = isatty(STDOUT_FILENO), step = start_step;
    size_t tokens_per_step = (size_t)B * T * o.grad_accum;
    double train_time = 0.0, t_start = now_s(), tps_avg = 0.0;
    float dscale = 1.0f / ((float)B * T * o.grad_accum);
    while (step < o.max_iters && !stop_signal) {
        double t0 = now_s();
        float lr = get_lr(&o, step);
        double loss = 0.0;
        for (int micro = 0; micro < o.grad_accum; micro++) {
            fill_batch(&acts, &train, B, rng_for((uint64_t)o.seed, RNG_BATCH, (uint64_t)step * o.grad_accum + micro));
            if (args.dump) {
                char p[4096];
                snprintf(p, sizeof p, "%s.batches", args.dump);
                const char *mode = step == start_step && micro == 0 ? "wb" : "ab";
                write_dump(p, acts.tokens, (size_t)B * T * sizeof(int), mode);
                write_dump(p, acts.targets, (size_t)B * T * sizeof(int), "ab");
            }
            drop.draw = ((uint64_t)step * o.grad_accum + micro) * sites;
            loss += model_step(c, &w, grads, &acts, B, dscale, drop.threshold ? &drop : NULL) / o.grad_accum;
        }
        double grad_sq = reduce_grads(grad_mem, nfloat, nt);
        if (!isfinite(loss)) {
            if (tty) putchar('\n');
            die("loss is %g at step %d: training diverged; stopping without overwriting %s (try a lower --lr)", loss,
                step + 1, args.out);
        }
        if (args.dump && step == start_step) dump_grads(args.dump, grad_mem, pt, npt);
        float gscale = 1.0f;
        if (o.grad_clip > 0.0f) {
            double norm = sqrt(grad_sq);
            if (norm > o.grad_clip) gscale = (float)(o.grad_clip / (norm + 1e-6));
        }
        adamw_step(md.params, grad_mem, m_mem, v_mem, pt, npt, lr, o.weight_decay, o.beta1, o.beta2, step + 1, gscale);
        step++;
        double dt = now_s() - t0;
        train_time += dt;
        double tps = tokens_per_step / dt;
        tps_avg = tps_avg == 0.0 ? tps : 0.9 * tps_avg + 0.1 * tps;

        int eval = step % o.eval_interval == 0 || step == o.max_iters;
        double vl = 0.0, tl = 0.0;
        if (eval) {
            tl = estimate_loss(c, &w, &acts, &train, o.eval_iters, (uint64_t)o.seed, RNG_EVAL_TRAIN);
            vl = estimate_loss(c, &w, &acts, &val, o.eval_iters, (uint64_t)o.seed, RNG_EVAL_VAL);
        }
        fprintf(csv, "%d,%.9g,", step, loss);
        if (eval) fprintf(csv, "%.9g", vl);
        fprintf(csv, ",%.9g,%.1f\n", lr, tps);
        fflush(csv);
        if (tty) {
            int eta = (int)((o.max_iters - step) * tokens_per_step / tps_avg);
            printf("\rstep %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %d:%02d   ", step, o.max_iters, loss, lr, tps_avg,
                   eta / 60, eta % 60);
        } else if (step % 10 == 0 || step == o.max_iters) {
            printf("iter %d: loss %.4f, lr %.2e, %.0f tok/s\n", step, loss, lr, tps);
        }
        if (eval) {
            printf("%sstep %d: train loss %.4f, val loss %.4f\n", tty ? "\r\033[K" : "", step, tl, vl);
            if (!isfinite(tl) || !isfinite(vl))
                die("evaluation loss is not finite at step %d; stopping without overwriting %s", step, args.out);
            print_sample(c, &w, &rs, sample_logits, &tok, val.ids[0], 200, rng_for((uint64_t)o.seed, RNG_SAMPLE, step));
        }
        fflush(stdout);
        if (eval || stop_signal) save_checkpoint(args.out, state_path, &sd, step);
    }
    if (tty) putchar('\n');
    if (stop_signal) {
        printf("stopped by signal %d at step %d; checkpoint written to %s (continue with --resume)\n", (int)stop_signal,
               step, args.out);
    } else {
        if (step == start_step) save_checkpoint(args.out, state_path, &sd, step); // --max-iters 0: the initial model
        size_t counted;
        double full = full_loss(c, &w, &acts, &val, &counted, tty);
        printf("done: %d steps, %.1f s training (%.0f tok/s), %.1f s total; val loss over %s validation split "
               "(%zu tokens): %.4f\n",
               step - start_step, train_time, (step - start_step) * tokens_per_step / (train_time > 0 ? train_time : 1),
               now_s() - t_start, val.n > ((size_t)1 << 20) + 1 ? "the start of the" : "the whole", counted, full);
    }
    fclose(csv);
    free(sample_logits);
    state_free(&rs);
    free(acts.mem);
    free(acts.tokens);
    free(acts.targets);
    free(pt);
    weights_free(&w);
    for (int t = 0; t < nt; t++) weights_free(&grads[t]);
    free(grads);
    free(grad_mem);
    free(m_mem);
    free(v_mem);
    free(md.params);
    free(md.tok_blob);
    free(ids);
    tokenizer_free(&tok);
    free(state_path);
    free(csv_path);
    return 0;
}
