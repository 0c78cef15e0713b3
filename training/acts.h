// training/acts.h: the activations one training step keeps for its backward pass, for B
// sequences of T tokens, in one allocation carved into named tensors (llm.c's layout), and a
// per-layer view of them. It allocates; it computes nothing.
#ifndef ATTN_TRAINING_ACTS_H
#define ATTN_TRAINING_ACTS_H

#include "params.h"

// Training's attention takes the tiles (model/attention.h's attention_forward_tiled and
// attention_backward_tiled), which keep a logsumexp per row instead of the rows' probabilities,
// from this block size on, where they measured as fast and the probabilities' memory starts to
// count (docs/TRAINING.md); not with attention dropout, whose backward needs the dropped
// probabilities themselves.
#define TRAIN_TILED_MIN_T 256

static int attention_tiled_for(const Config *c, int T, int dropout) {
    return T >= TRAIN_TILED_MIN_T && !dropout && attention_tiles_fit(T, c->head_dim);
}

// Everything the backward pass needs, for up to B sequences of T tokens, N = B * T rows;
// q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim, L = n_layers. A LayerActs view
// resolves the aliases of the pre-norm block (its mid-block sum is res1, its output is the
// next layer's input). Tensors a configuration lacks stay NULL.
typedef struct {
    int B, T;
    int tiled;     // attention_tiled_for: lse is kept, att, attd and att_scratch are not
    float *resid;  // (L + 1, N, dim) each layer's input, and the last one's output
    float *ln1;    // (L, N, dim) pre-norm: the attention's normalised input
    float *q;      // (L, N, q_dim) queries, after RoPE
    float *k, *v;  // (L, N, kv_dim) keys (after RoPE) and values
    float *att;    // (L, B, n_heads, T, T) attention probabilities
    float *lse;    // (L, B, n_heads, T) tiled: each attention row's logsumexp of its scores
    float *attd;   // (L, B, n_heads, T, T) att after dropout, if on
    float *atty;   // (L, N, q_dim) attention's output, before wo
    float *res1;   // (L, N, dim) input + attention sub-layer
    float *mid;    // (L, N, dim) post-norm: res1 normalised
    float *ln2;    // (L, N, dim) pre-norm: the feed-forward's normalised input
    float *h1;     // (L, N, hidden_dim) w1's output
    float *h3;     // (L, N, hidden_dim) w3's output (SwiGLU)
    float *hact;   // (L, N, hidden_dim) the activation's output
    float *res2;   // (L, N, dim) post-norm: mid + feed-forward sub-layer
    float *lnf;    // (N, dim) the final norm's output
    float *logits; // (N, vocab_size) logits, then probabilities or their gradient
    float *losses; // (N)
    // backward scratch, shared by the layers
    float *dres, *g1, *g2;      // (N, dim)
    float *dh, *dh3;            // (N, hidden_dim)
    float *dq, *datty;          // (N, q_dim)
    float *dk, *dv;             // (N, kv_dim)
    float *att_scratch;         // (threads, T, T)
    float *rope_cos, *rope_sin; // (T, rope_dims / 2)
    float *rope_nsin;           // (T, rope_dims / 2) the sines negated, for RoPE's backward
    int *tokens, *targets;      // (N)
    float *mem;                 // the one allocation the float tensors are carved from
} Acts;

// Every tensor starts on a multiple of 16 floats (64 bytes), a cache line and a vector.
#define ACT_ALIGN 16

static size_t carve_acts(const Config *c, int B, int T, int dropout, Acts *a, float *base) {
    size_t N = (size_t)B * T, L = c->n_layers, d = c->dim, hid = c->hidden_dim, V = c->vocab_size;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t off = 0, half = c->pos_kind == POS_ROPE ? c->rope_dims / 2 : 0;
    int pre = !c->post_norm, swiglu = c->ffn_kind == FFN_SWIGLU, tiled = attention_tiled_for(c, T, dropout);
#define ACT(field, count)                                                                                              \
    do {                                                                                                               \
        (field) = base && (count) != 0 ? base + off : NULL;                                                            \
        off += ((count) + ACT_ALIGN - 1) & ~(size_t)(ACT_ALIGN - 1);                                                   \
    } while (0)
    ACT(a->resid, (L + 1) * N * d);
    ACT(a->ln1, pre ? L * N * d : 0);
    ACT(a->q, L * N * qd);
    ACT(a->k, L * N * kvd);
    ACT(a->v, L * N * kvd);
    ACT(a->att, tiled ? 0 : L * B * c->n_heads * (size_t)T * T);
    ACT(a->lse, tiled ? L * B * c->n_heads * (size_t)T : 0);
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
    ACT(a->att_scratch, tiled ? 0 : (size_t)max_threads() * T * T);
    ACT(a->rope_cos, (size_t)T * half);
    ACT(a->rope_sin, (size_t)T * half);
    ACT(a->rope_nsin, (size_t)T * half);
#undef ACT
    a->B = B;
    a->T = T;
    a->tiled = tiled;
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

static void acts_free(Acts *a) {
    free(a->mem);
    free(a->tokens);
    free(a->targets);
}

typedef struct {
    float *in, *ain, *q, *k, *v, *att, *attd, *lse, *atty, *res1, *mid, *fin, *h1, *h3, *hact, *res2, *out;
} LayerActs;

static LayerActs layer_acts(const Config *c, const Acts *a, int l) {
    size_t N = (size_t)a->B * a->T, d = c->dim, hid = c->hidden_dim;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t att = (size_t)a->B * c->n_heads * a->T * a->T; // a layer's probabilities
    float *attd = a->attd ? a->attd : a->att;
    LayerActs r = {
        .in = a->resid + l * N * d,
        .out = a->resid + (l + 1) * N * d,
        .q = a->q + l * N * qd,
        .k = a->k + l * N * kvd,
        .v = a->v + l * N * kvd,
        .att = a->att ? a->att + l * att : NULL,
        .attd = attd ? attd + l * att : NULL,
        .lse = a->lse ? a->lse + l * (size_t)a->B * c->n_heads * a->T : NULL,
        .atty = a->atty + l * N * qd,
        .res1 = a->res1 + l * N * d,
        .h1 = a->h1 + l * N * hid,
        .h3 = a->h3 ? a->h3 + l * N * hid : NULL,
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

#endif
