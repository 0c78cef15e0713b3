// training/step.h: one training step's forward and backward over a batch: the model's
// kernels (model/) strung together as the forward pass that keeps what backward needs, the
// backward pass in reverse, and the threads' split of the batch with their gradient copies.
#ifndef ATTN_TRAINING_STEP_H
#define ATTN_TRAINING_STEP_H

#include "acts.h"
#include "random.h"

// Every function here runs on one thread, on the rows of its own sequences: a step forks the
// thread pool once and each thread takes its share of the batch through forward and backward
// (model_step). Every linear layer's product is OpenBLAS sgemm (model/matmul.h), single-threaded
// inside the parallel region, so there is one pool; attention's are model/causal.h's
// products, which skip the masked half.
//
// With bf16 (./train --precision bf16, a training step's; evaluations pass 0) the linear layers'
// products, forward and both backward ones, take their operands rounded to bfloat16 and add in
// float32, through bf16_gemm; the rest stays float32, as under PyTorch's autocast, and so do
// attention's QKᵀ and AV products, unlike autocast's bmm: they are the causal kernels, not a
// GEMM that bfloat16 speeds up, and about a tenth of a step's arithmetic (docs/TRAINING.md).

// --precision bf16's GEMM: model/bf16_gemm.h's, VDPBF16PS where the cores have it.
static const GemmFn bf16_gemm = sgemm_bf16;

// The backward's GEMM for bf16 or float32.
static GemmFn step_gemm(int bf16) { return bf16 ? bf16_gemm : sgemm_f32; }

// out = x · Wᵀ + b for T rows: model/matmul.h's float32 product, or with bf16 bf16_gemm's, the
// bias (float32) going in first as beta = 1's addend, as matmul_part does.
static void linear_forward(int bf16, float *out, const float *x, const float *w, const float *b, int T, int n_in,
                           int n_out) {
    if (!bf16) {
        matmul_forward(out, x, w, b, T, n_in, n_out);
        return;
    }
    for (int t = 0; b && t < T; t++) memcpy(out + (size_t)t * n_out, b, (size_t)n_out * sizeof(float));
    bf16_gemm(CblasNoTrans, CblasTrans, T, n_out, n_in, 1.0f, x, n_in, w, n_in, b ? 1.0f : 0.0f, out, n_out);
}

// Inside a parallel region: this thread's share [*lo, *hi) of n rows. Static and contiguous,
// so every reduction below adds in the same order on every run (--seed determinism).
static void my_rows(int n, int *lo, int *hi) {
    size_t l, h;
    share((size_t)n, thread_num(), team_size(), &l, &h);
    *lo = (int)l;
    *hi = (int)h;
}

static void add_inplace(float *x, const float *y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

// Rows [r, hi) of a batch of T-token sequences, cut where a sequence ends: the first piece's
// length, with *t its first row's position in its sequence.
static int sequence_piece(int r, int hi, int T, int *t) {
    *t = r % T;
    return T - *t < hi - r ? T - *t : hi - r;
}

static void embed_rows(const Config *c, const Weights *w, Acts *a, int lo, int hi) {
    for (int r = lo, t, n; r < hi; r += n) {
        n = sequence_piece(r, hi, a->T, &t);
        embed_forward(c, w, a->resid + (size_t)r * c->dim, a->tokens + r, n, t);
    }
}

static void embed_backward_rows(const Config *c, Weights *g, const Acts *a, int lo, int hi) {
    for (int r = lo, t, n; r < hi; r += n) {
        n = sequence_piece(r, hi, a->T, &t);
        embed_backward(c, g, a->dres + (size_t)r * c->dim, a->tokens + r, n, t);
    }
}

// RoPE (or its backward) on rows [lo, hi) of x, each piece within one sequence at its positions.
static void rope_rows(const Config *c, float *x, int n_heads, int backward, const Acts *a, int lo, int hi) {
    int width = n_heads * c->head_dim;
    for (int r = lo, t, n; r < hi; r += n) {
        n = sequence_piece(r, hi, a->T, &t);
        float *xr = x + (size_t)r * width;
        if (backward)
            rope_backward(xr, (size_t)width, n, t, n_heads, c->head_dim, c->rope_dims, a->rope_cos, a->rope_nsin);
        else rope_forward(xr, (size_t)width, n, t, n_heads, c->head_dim, c->rope_dims, a->rope_cos, a->rope_sin);
    }
}

// Layer l up to its attention: norm, q, k, v, RoPE.
static void layer_head_rows(const Config *c, const Weights *w, Acts *a, int l, int lo, int hi, int bf16) {
    const LayerWeights *L = &w->layers[l];
    LayerActs la = layer_acts(c, a, l);
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    int n = hi - lo;
    if (n <= 0) return;
    if (!c->post_norm) norm_forward(c, la.ain + lo * d, la.in + lo * d, L->attn_norm_w, L->attn_norm_b, n);
    linear_forward(bf16, la.q + lo * qd, la.ain + lo * d, L->wq, L->bq, n, d, qd);
    linear_forward(bf16, la.k + lo * kvd, la.ain + lo * d, L->wk, L->bk, n, d, kvd);
    linear_forward(bf16, la.v + lo * kvd, la.ain + lo * d, L->wv, L->bv, n, d, kvd);
    if (c->pos_kind == POS_ROPE) {
        rope_rows(c, la.q, c->n_heads, 0, a, lo, hi);
        rope_rows(c, la.k, c->n_kv_heads, 0, a, lo, hi);
    }
}

// Dropout on layer l's attention probabilities: attd = att ∘ mask for sequences [b0, b1), and
// their outputs computed again from attd (attention_forward, which ./run shares, knows no
// dropout). Only the causal entries are drawn; attd's others stay 0 from its allocation.
static void attention_dropout(const Config *c, const Dropout *drop, const LayerActs *la, int l, int b0, int b1, int T) {
    int H = c->n_heads, hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    size_t qd = (size_t)H * hd, kvd = (size_t)c->n_kv_heads * hd;
    for (int b = b0; b < b1; b++)
        for (int h = 0; h < H; h++) {
            size_t o = ((size_t)b * H + h) * T * T;
            for (int t = 0; t < T; t++)
                dropout_apply(drop, 3 * l + 1, la->attd + o + (size_t)t * T, la->att + o + (size_t)t * T,
                              o + (size_t)t * T, (size_t)t + 1);
            causal_product(la->atty + (size_t)b * T * qd + (size_t)h * hd, qd, la->attd + o, T, 0,
                           la->v + (size_t)b * T * kvd + (size_t)(h / group) * hd, WEIGHTS_F32, kvd, T, hd, T,
                           CAUSAL_BELOW, 0, 1.0f, 0);
        }
}

// Layer l after its attention: output projection, residual, norms, feed-forward; drop (or
// NULL) applies dropout to both sublayers' outputs before their residual adds.
static void layer_tail_rows(const Config *c, const Weights *w, Acts *a, int l, int lo, int hi, const Dropout *drop,
                            int bf16) {
    const LayerWeights *L = &w->layers[l];
    LayerActs la = layer_acts(c, a, l);
    size_t d = c->dim, hid = c->hidden_dim, qd = (size_t)c->n_heads * c->head_dim;
    int n = hi - lo;
    if (n <= 0) return;
    linear_forward(bf16, la.res1 + lo * d, la.atty + lo * qd, L->wo, L->bo, n, qd, d);
    if (drop) dropout_apply(drop, 3 * l + 2, la.res1 + lo * d, la.res1 + lo * d, lo * d, n * d);
    for (size_t i = lo * d; i < hi * d; i++) la.res1[i] += la.in[i];
    if (c->post_norm) norm_forward(c, la.mid + lo * d, la.res1 + lo * d, L->attn_norm_w, L->attn_norm_b, n);
    else norm_forward(c, la.fin + lo * d, la.mid + lo * d, L->ffn_norm_w, L->ffn_norm_b, n);
    linear_forward(bf16, la.h1 + lo * hid, la.fin + lo * d, L->w1, L->b1, n, d, hid);
    if (la.h3) linear_forward(bf16, la.h3 + lo * hid, la.fin + lo * d, L->w3, L->b3, n, d, hid);
    activation_forward(c->ffn_kind, la.hact + lo * hid, la.h1 + lo * hid, la.h3 ? la.h3 + lo * hid : NULL, n * hid);
    linear_forward(bf16, la.res2 + lo * d, la.hact + lo * hid, L->w2, L->b2, n, hid, d);
    if (drop) dropout_apply(drop, 3 * l + 3, la.res2 + lo * d, la.res2 + lo * d, lo * d, n * d);
    for (size_t i = lo * d; i < hi * d; i++) la.res2[i] += la.mid[i];
    if (c->post_norm) norm_forward(c, la.out + lo * d, la.res2 + lo * d, L->ffn_norm_w, L->ffn_norm_b, n);
}

// Final norm, classifier, loss.
static void output_rows(const Config *c, const Weights *w, Acts *a, int lo, int hi, float dscale, int bf16) {
    size_t d = c->dim, V = c->vocab_size;
    int n = hi - lo;
    if (n <= 0) return;
    const float *x = layer_acts(c, a, c->n_layers - 1).out + lo * d; // laid out for the full batch
    if (c->final_norm) {
        norm_forward(c, a->lnf + lo * d, x, w->final_norm_w, w->final_norm_b, n);
        x = a->lnf + lo * d;
    }
    linear_forward(bf16, a->logits + lo * V, x, w->classifier, NULL, n, d, V);
    crossentropy_forward(a->logits + lo * V, a->losses + lo, a->targets + lo, n, V, dscale);
}

// Sequences [b0, b1) of the batch through the model on the calling thread, with dropout if
// drop is not NULL; each row's loss goes to a->losses (with dscale != 0, a->logits holds
// dloss/dlogits).
static void forward_seqs(const Config *c, const Weights *w, Acts *a, int b0, int b1, float dscale, const Dropout *drop,
                         int bf16) {
    int T = a->T, lo = b0 * T, hi = b1 * T;
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    if (hi <= lo) return;
    embed_rows(c, w, a, lo, hi);
    if (drop) dropout_apply(drop, 0, a->resid + lo * d, a->resid + lo * d, lo * d, (size_t)(hi - lo) * d);
    for (int l = 0; l < c->n_layers; l++) {
        LayerActs la = layer_acts(c, a, l);
        layer_head_rows(c, w, a, l, lo, hi, bf16);
        if (a->tiled)
            attention_forward_tiled(la.atty + lo * qd, la.lse + (size_t)b0 * c->n_heads * T, la.q + lo * qd,
                                    la.k + lo * kvd, la.v + lo * kvd, b1 - b0, T, c->n_heads, c->n_kv_heads,
                                    c->head_dim);
        else
            attention_forward(la.atty + lo * qd, la.att + (size_t)b0 * c->n_heads * T * T, la.q + lo * qd,
                              la.k + lo * kvd, la.v + lo * kvd, b1 - b0, T, 0, c->n_heads, c->n_kv_heads, c->head_dim);
        if (drop) attention_dropout(c, drop, &la, l, b0, b1, T);
        layer_tail_rows(c, w, a, l, lo, hi, drop, bf16);
    }
    output_rows(c, w, a, lo, hi, dscale, bf16);
}

// After forward_seqs on the same sequences with the same drop: their gradients added into g.
// ds is this thread's [T, T] scratch ([threads, T, T] outside a parallel region, see
// attention_backward; NULL with tiled attention, which needs none); the other backward
// buffers are used on these sequences' rows only.
static void backward_seqs(const Config *c, const Weights *w, Weights *g, Acts *a, int b0, int b1, float *ds,
                          const Dropout *drop, int bf16) {
    int T = a->T, lo = b0 * T, hi = b1 * T, n = hi - lo, H = c->n_heads, KV = c->n_kv_heads;
    size_t d = c->dim, hid = c->hidden_dim, qd = (size_t)H * c->head_dim, kvd = (size_t)KV * c->head_dim;
    GemmFn gemm = step_gemm(bf16);
    if (n <= 0) return;
#define ROWS(p, width) ((p) + (size_t)lo * (width))
    float *dres = ROWS(a->dres, d), *g1 = ROWS(a->g1, d), *g2 = ROWS(a->g2, d), *dh = ROWS(a->dh, hid);
    float *dh3 = a->dh3 ? ROWS(a->dh3, hid) : NULL, *datty = ROWS(a->datty, qd);
    float *dq = ROWS(a->dq, qd), *dk = ROWS(a->dk, kvd), *dv = ROWS(a->dv, kvd);
    const float *xL = ROWS(layer_acts(c, a, c->n_layers - 1).out, d), *dlogits = ROWS(a->logits, c->vocab_size);
    if (c->final_norm) {
        matmul_backward(g1, 0, g->classifier, NULL, dlogits, ROWS(a->lnf, d), w->classifier, n, d, c->vocab_size, gemm);
        norm_backward(c, dres, 0, g->final_norm_w, g->final_norm_b, g1, xL, w->final_norm_w, n);
    } else {
        matmul_backward(dres, 0, g->classifier, NULL, dlogits, xL, w->classifier, n, d, c->vocab_size, gemm);
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
        matmul_backward(dh, 0, G->w2, G->b2, dffn, ROWS(la.hact, hid), L->w2, n, hid, d, gemm);
        activation_backward(c->ffn_kind, dh, dh3, ROWS(la.h1, hid), la.h3 ? ROWS(la.h3, hid) : NULL, (size_t)n * hid);
        matmul_backward(g2, 0, G->w1, G->b1, dh, ROWS(la.fin, d), L->w1, n, d, hid, gemm);
        if (la.h3) matmul_backward(g2, 1, G->w3, G->b3, dh3, ROWS(la.fin, d), L->w3, n, d, hid, gemm);
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
        matmul_backward(datty, 0, G->wo, G->bo, dproj, ROWS(la.atty, qd), L->wo, n, qd, d, gemm);
        if (a->tiled)
            attention_backward_tiled(dq, dk, dv, datty, ROWS(la.atty, qd), la.lse + (size_t)b0 * H * T, ROWS(la.q, qd),
                                     ROWS(la.k, kvd), ROWS(la.v, kvd), b1 - b0, T, H, KV, c->head_dim);
        else
            attention_backward(dq, dk, dv, ds, datty, la.att + (size_t)b0 * H * T * T, la.attd + (size_t)b0 * H * T * T,
                               ROWS(la.q, qd), ROWS(la.k, kvd), ROWS(la.v, kvd), b1 - b0, T, H, KV, c->head_dim);
        if (c->pos_kind == POS_ROPE) {
            rope_rows(c, a->dq, H, 1, a, lo, hi);
            rope_rows(c, a->dk, KV, 1, a, lo, hi);
        }
        matmul_backward(g2, 0, G->wq, G->bq, dq, ROWS(la.ain, d), L->wq, n, d, qd, gemm);
        matmul_backward(g2, 1, G->wk, G->bk, dk, ROWS(la.ain, d), L->wk, n, d, kvd, gemm);
        matmul_backward(g2, 1, G->wv, G->bv, dv, ROWS(la.ain, d), L->wv, n, d, kvd, gemm);
        if (c->post_norm) add_inplace(dres, g2, (size_t)n * d);
        else norm_backward(c, dres, 1, G->attn_norm_w, G->attn_norm_b, g2, ROWS(la.in, d), L->attn_norm_w, n);
    }
#undef ROWS
    if (drop) dropout_apply(drop, 0, dres, dres, (size_t)lo * d, (size_t)n * d);
    embed_backward_rows(c, g, a, lo, hi);
}

// One fork of the thread pool per batch: each thread takes an equal number of whole sequences
// through forward and, with grads (one Weights per thread), backward into its own gradients,
// so no thread waits for another until the end (reduce_grads adds the copies). Returns the
// mean loss, added in row order whatever the thread count. drop: dropout, or NULL.
static double model_step(const Config *c, const Weights *w, Weights *grads, Acts *a, int B, float dscale,
                         const Dropout *drop, int bf16) {
    // Sequences left over after an equal number per thread (all of them when there are fewer
    // than threads: nanoGPT fine-tunes with batch 1) go through with the threads sharing each
    // product instead, when a sequence is large enough to pay for a fork per kernel
    // (docs/KERNELS.md has the measurements).
    double seq_flops = 6.0 * a->T * ((double)c->n_layers * layer_macs(c) + (double)c->vocab_size * c->dim);
    int even = seq_flops >= 1e9 ? B / max_threads() * max_threads() : B;
    if (even) {
#pragma omp parallel
        {
            int b0, b1, t = thread_num();
            my_rows(even, &b0, &b1);
            forward_seqs(c, w, a, b0, b1, dscale, drop, bf16);
            float *ds = a->att_scratch ? a->att_scratch + (size_t)t * a->T * a->T : NULL; // NULL when tiled
            if (grads) backward_seqs(c, w, &grads[t], a, b0, b1, ds, drop, bf16);
        }
    }
    if (even < B) {
        // matmul_forward and attention_forward fork outside a parallel region; so does OpenBLAS in
        // the backward's sgemm.
        forward_seqs(c, w, a, even, B, dscale, drop, bf16);
        if (grads) backward_seqs(c, w, &grads[0], a, even, B, a->att_scratch, drop, bf16);
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
    int nt = max_threads() < 256 ? max_threads() : 256;
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

#endif
