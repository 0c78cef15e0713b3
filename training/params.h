// training/params.h: the trainable parameters as a list of named tensors in one block (the
// names tools/reference.py gives them), for the optimiser's weight-decay groups, the
// initialisation and the test dumps; and the allocator every large training buffer uses.
#ifndef ATTN_TRAINING_PARAMS_H
#define ATTN_TRAINING_PARAMS_H

// Blocks of 2 MiB and more (parameters, gradients, moments, activations) are 2 MiB aligned
// and asked for as transparent huge pages (HUGE_PAGE: io/files.h): sgemm's packing then misses
// the TLB far less (docs/KERNELS.md).
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

// Parameter tensors by name (the names tools/reference.py gives them), for the optimiser's
// weight-decay groups and the test dumps. Offsets are in floats from the block's start.

typedef struct {
    char name[40];
    size_t off, n;
    int decay; // nanoGPT decays every tensor of two or more dimensions: matrices and embeddings
} ParamTensor;

static int list_params(const Config *c, const Weights *w, const float *base, ParamTensor *out) {
    int n = 0, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim, d = c->dim, h = c->hidden_dim;
#define P(ptr, count, dec, ...)                                                                                        \
    do {                                                                                                               \
        if (ptr) {                                                                                                     \
            snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__);                                                    \
            out[n].off = (size_t)((ptr)-base);                                                                         \
            out[n].n = (size_t)(count);                                                                                \
            out[n].decay = (dec);                                                                                      \
            n++;                                                                                                       \
        }                                                                                                              \
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

#endif
