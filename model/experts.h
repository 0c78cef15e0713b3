// model/experts.h: a mixture of experts in place of a layer's feed-forward (Qwen3-MoE's,
// Qwen2-MoE's shared expert, Mixtral's): the router, each row's chosen experts, the rows
// grouped by expert, and the sub-layer that runs them. forward.h includes it after RunState and
// the products (product_part), which the sub-layer is built of.
#ifndef ATTN_MODEL_EXPERTS_H
#define ATTN_MODEL_EXPERTS_H

// A mixture of experts in place of the feed-forward (Qwen3-MoE's, as Hugging Face's
// Qwen3MoeSparseMoeBlock computes it): the router's logits and their softmax in float32, each
// row's n_experts_used most probable experts, their probabilities divided by their sum with
// MOE_NORM_TOPK, and the row's output the sum of the chosen experts' outputs times those weights,
// in increasing expert order, added to the residual.

// Row x's experts into id[K] (increasing) and weight[K]; p [n_experts] is scratch. Among equal
// probabilities the lower expert comes first, as a stable sort would have it (torch.topk on a CPU
// breaks such a tie either way: tools/reference.py takes the lower too).
static inline void route_row(const Config *c, const float *router, const float *x, float *p, int *id, float *weight) {
    int E = c->n_experts, K = c->n_experts_used;
    for (int e = 0; e < E; e++) p[e] = dot(router + (size_t)e * c->dim, x, c->dim);
    softmax(p, E);
    float sum = 0.0f;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (p[e] != -1.0f && (best < 0 || p[e] > p[best])) best = e;
        id[k] = best, weight[k] = p[best], sum += p[best];
        p[best] = -1.0f; // taken
    }
    for (int k = 0; k < K && (c->moe_flags & MOE_NORM_TOPK); k++) weight[k] /= sum;
    for (int k = 1; k < K; k++) // increasing expert order: insertion sort of K pairs
        for (int j = k; j > 0 && id[j - 1] > id[j]; j--) {
            int i = id[j];
            float w = weight[j];
            id[j] = id[j - 1], weight[j] = weight[j - 1], id[j - 1] = i, weight[j - 1] = w;
        }
}

// The T rows' chosen (row, expert) pairs grouped by expert, into this thread's groups: first[e]
// .. first[e + 1] - 1 are expert e's places, row_of[place] the row there, and place_of[pair]
// (pair = row * K + k) where each pair went. Every thread builds the same grouping itself, which
// costs less than a meeting to share it.
static inline void expert_groups(const Config *c, const RunState *s, int id, int T, int **first, int **row_of,
                                 int **place_of) {
    int E = c->n_experts, K = c->n_experts_used, pairs = T * K;
    int *g = s->groups + (size_t)id * s->group_ints;
    *first = g, *row_of = g + E + 1, *place_of = g + E + 1 + (size_t)s->max_batch * K;
    memset(g, 0, (E + 1) * sizeof(int));
    for (int i = 0; i < pairs; i++) g[s->expert_id[i] + 1]++;
    for (int e = 0; e < E; e++) g[e + 1] += g[e];
    for (int i = 0; i < pairs; i++) { // g[e] runs through expert e's places, ending at expert e + 1's first
        int e = s->expert_id[i], at = g[e]++;
        (*row_of)[at] = i / K, (*place_of)[i] = at;
    }
    for (int e = E; e > 0; e--) g[e] = g[e - 1]; // back to each expert's first place
    g[0] = 0;
}

// A linear layer over one expert's rows of a layer's stacked matrix (w1 and w3: hidden_dim rows
// an expert, w2: dim), out [n, n_out] for n input rows.
static inline Linear expert_linear(const float *w, QMat qw, int e, int n_out, int n_in, float *out, float *wbuf,
                                   uint8_t *xq) {
    size_t r0 = (size_t)e * n_out;
    return (Linear){.out = out,
                    .w = w ? w + r0 * n_in : NULL,
                    .n_out = n_out,
                    .qw = qmat_rows_from(qw, r0, n_in),
                    .wbuf = wbuf,
                    .xq = xq};
}

// The experts' sub-layer for T rows of in (this thread's normalised copy of x), added into x.
// Each chosen expert's weights are read once for all the rows that chose it: its rows gathered,
// the existing products run over them, the outputs scattered back weighted. Threads split the
// rows for routing and gathering, and each product by output features. With a shared expert
// (Qwen2-MoE's) every row also passes it, its output scaled by sigmoid(shared_gate · row) and
// added after the routed experts' sum.
static inline void experts_sublayer(const Config *c, const LayerWeights *L, RunState *s, const float *in, int T, int id,
                                    int nt, size_t r0, size_t r1) {
    int d = c->dim, hid = c->hidden_dim, E = c->n_experts, K = c->n_experts_used;
    float *wbuf = thread_wbuf(s, id);
    uint8_t *xq = thread_xq(s, id);
    size_t lo, hi;
    for (size_t t = r0; t < r1; t++) {
        route_row(c, L->router, in + t * d, s->router_p + t * E, s->expert_id + t * K, s->expert_w + t * K);
        if (c->shared_dim) s->shared_g[t] = 1.0f / (1.0f + expf(-dot(L->shared_gate, in + t * d, d)));
    }
    barrier_wait(&s->barrier, nt);
    int *first, *row_of, *place_of;
    expert_groups(c, s, id, T, &first, &row_of, &place_of);
    share((size_t)T * K, id, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) memcpy(s->expert_in + i * d, in + (size_t)row_of[i] * d, d * sizeof(float));
    barrier_wait(&s->barrier, nt);
    share((size_t)hid, id, nt, &lo, &hi);
    for (int e = 0; e < E; e++) {
        int n = first[e + 1] - first[e];
        if (!n) continue;
        const float *xe = s->expert_in + (size_t)first[e] * d;
        float *h1 = s->hb + (size_t)first[e] * hid, *h3 = s->hb2 + (size_t)first[e] * hid;
        Linear up[] = {expert_linear(L->w1, L->qw1, e, hid, d, h1, wbuf, xq),
                       expert_linear(L->w3, L->qw3, e, hid, d, h3, wbuf, xq)};
        up[1].same_input = L->qw3.type == L->qw1.type;
        product_input(s, id, xe, n, d);
        product_part(s, id, &up[0], xe, n, d, lo, hi);
        if (ffn_is_gated(c->ffn_kind)) product_part(s, id, &up[1], xe, n, d, lo, hi);
        for (int t = 0; t < n && hi > lo; t++)
            activation_forward(c->ffn_kind, h1 + (size_t)t * hid + lo, h1 + (size_t)t * hid + lo,
                               h3 + (size_t)t * hid + lo, hi - lo);
    }
    if (c->shared_dim) {
        size_t S = c->shared_dim;
        share(S, id, nt, &lo, &hi);
        Linear up[] = {
            {.out = s->shared_h1, .w = L->shared_w1, .n_out = (int)S, .qw = L->qshared_w1, .wbuf = wbuf, .xq = xq},
            {.out = s->shared_h3, .w = L->shared_w3, .n_out = (int)S, .qw = L->qshared_w3, .wbuf = wbuf, .xq = xq}};
        up[1].same_input = L->qshared_w3.type == L->qshared_w1.type;
        product_input(s, id, in, T, d);
        product_part(s, id, &up[0], in, T, d, lo, hi);
        if (ffn_is_gated(c->ffn_kind)) product_part(s, id, &up[1], in, T, d, lo, hi);
        for (int t = 0; t < T && hi > lo; t++)
            activation_forward(c->ffn_kind, s->shared_h1 + t * S + lo, s->shared_h1 + t * S + lo,
                               s->shared_h3 + t * S + lo, hi - lo);
    }
    barrier_wait(&s->barrier, nt);
    share((size_t)d, id, nt, &lo, &hi);
    for (int e = 0; e < E; e++) {
        int n = first[e + 1] - first[e];
        if (!n) continue;
        const float *he = s->hb + (size_t)first[e] * hid;
        Linear down = expert_linear(L->w2, L->qw2, e, d, hid, s->expert_out + (size_t)first[e] * d, wbuf, xq);
        product_input(s, id, he, n, hid);
        product_part(s, id, &down, he, n, hid, lo, hi);
    }
    if (c->shared_dim) {
        Linear down = {
            .out = s->shared_out, .w = L->shared_w2, .n_out = d, .qw = L->qshared_w2, .wbuf = wbuf, .xq = xq};
        product_input(s, id, s->shared_h1, T, c->shared_dim);
        product_part(s, id, &down, s->shared_h1, T, c->shared_dim, lo, hi);
    }
    // each row's weighted sum over its experts in increasing order, then the residual add; every
    // thread its own features, so that no meeting is needed before
    for (int t = 0; t < T; t++)
        for (size_t i = lo; i < hi; i++) {
            float sum = 0.0f;
            for (int k = 0; k < K; k++)
                sum += s->expert_w[t * K + k] * s->expert_out[(size_t)place_of[t * K + k] * d + i];
            if (c->shared_dim) sum += s->shared_g[t] * s->shared_out[(size_t)t * d + i];
            s->x[(size_t)t * d + i] += sum;
        }
    barrier_wait(&s->barrier, nt);
}

#endif
