// model/forward.h: one forward pass of the whole model over T tokens, and the state it runs
// in (activations and the KV cache). It is ./run's prompt and one-token step alike, and the
// sampler of ./train's evaluations; training's own forward, which keeps every activation for
// the backward pass, is training/step.h, built of the same kernels.
#ifndef ATTN_MODEL_FORWARD_H
#define ATTN_MODEL_FORWARD_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attention.h"
#include "attention_token.h"
#include "file.h"
#include "layers.h"
#include "bf16_gemm.h"
#include "matmul.h"
#include "threads.h"

// The buffers of a forward pass: activations for up to max_batch rows at once, and the KV
// cache. q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim. A global layer's cache
// holds the whole context; a local layer attends only to its last sliding_window positions,
// so when a ring of them is shorter its cache is that ring (layer_cache).
typedef struct {
    int max_batch, threads; // threads: how many copies of xn there are; forward never runs more
    int ring;               // positions in a local layer's ring, or 0: local layers keep every position
    float *x;               // (max_batch, dim) the residual stream
    float *xn;              // (threads, max_batch, dim) each thread's normalised copy of x
    float *q;               // (max_batch, q_dim) queries
    float *attn_out;        // (max_batch, q_dim) attention's output, before wo
    float *xb;              // (max_batch, dim) a sub-layer's output projection
    float *hb, *hb2;        // (max_batch, hidden_dim) the feed-forward's w1 and w3 outputs; experts: (max_batch *
                            // n_experts_used, hidden_dim), a row per token and chosen expert
    // experts (n_experts > 0): each row's router probabilities (max_batch, n_experts), its chosen
    // experts (max_batch, n_experts_used) in increasing order and their weights; the chosen pairs
    // grouped by expert, each thread's own copy of the grouping (expert_groups); the pairs'
    // inputs gathered in that order and their outputs (max_batch * n_experts_used, dim)
    float *router_p, *expert_w;
    int *expert_id, *groups;
    size_t group_ints;
    float *expert_in, *expert_out;
    // the shared expert (shared_dim > 0): each row's sigmoid gate (max_batch), its w1 and w3
    // outputs (max_batch, shared_dim) and its output (max_batch, dim)
    float *shared_g, *shared_h1, *shared_h3, *shared_out;
    float *head_ss;        // (max_batch, n_heads + n_kv_heads) each head's sum of squares (ARCH_QK_NORM_WHOLE)
    float *att;            // (max_batch, n_heads, seq_len) attention probabilities
    float *token_parts;    // (n_heads, threads, head_dim + 2) a one-token step's partial softmaxes
    float *rope_cos;       // (seq_len, rope_dims / 2) the global layers' RoPE, scaled
    float *rope_sin;       // (seq_len, rope_dims / 2)
    float *rope_local_cos; // (seq_len, rope_dims / 2) the local layers' (sliding_window only)
    float *rope_local_sin; // (seq_len, rope_dims / 2)
    int kv_type;           // the cache's elements: WEIGHTS_F32, WEIGHTS_F16 or BLOCK_Q8_0 (./run --kv-cache)
    void *key_cache;       // (the layers' cache rows, kv_dim) of kv_type, layer after layer (layer_cache)
    void *value_cache;     // (the same)
    float *kv_new;         // (2, max_batch, kv_dim) a float16 or Q8_0 cache's new keys, then values, before rounding
    float *wbuf;           // (threads, wbuf_floats) a quantised or 16-bit model's widened rows
    size_t wbuf_floats;
    uint8_t *xq; // (threads, max_batch + 2, xq_row_bytes) inputs quantised for block-type matrices
    size_t xq_row_bytes;
    // --compute bf16 (state_compute_bf16): many rows' products with bfloat16 inputs
    // (model/bf16_gemm.h), in each thread's own buffers: its packed copy of a product's input,
    // a strip of packed weights, and (not float32 or bfloat16) those weights' rows dequantised.
    int compute_bf16;
    uint32_t *bf16_x, *bf16_strip;
    float *bf16_rows;
    size_t bf16_x_words, bf16_strip_words, bf16_rows_floats;
    float *mem;         // the one allocation the buffers above are carved from
    size_t bytes;       // its size
    size_t cache_bytes; // the KV cache's part of it, keys and values
    int kv_ready;       // positions [0, kv_ready) have their cache rows in memory (kv_cache_ready)
    Barrier barrier;
    const AttentionKeep *keep; // NULL (state_init's), or where forward copies attention probabilities
} RunState;

#define STATE_ALIGN 16 // floats: every buffer starts on a 64-byte line

static inline size_t state_align(size_t floats) { return (floats + STATE_ALIGN - 1) & ~(size_t)(STATE_ALIGN - 1); }

static inline void state_free(RunState *s) {
    if (s->mem) munmap(s->mem, s->bytes);
    free(s->bf16_x);
    *s = (RunState){0};
}

// Where layer l keeps its keys and values, rows kv_dim apart: position p at row p % rows and,
// in a ring (mirrored), again at row p % rows + rows, so that any run of up to rows
// consecutive positions lies in one piece from row (its first) % rows.
typedef struct {
    void *k, *v; // of the state's kv_type
    int rows, mirrored;
} LayerCache;

// The cache rows of a local layer: a ring of sliding_window - 1 + max_batch positions (a batch's
// first row sees sliding_window - 1 before it) twice over, when that is less than the context.
static inline int local_cache_rows(const Config *c, int ring) { return ring ? 2 * ring : c->seq_len; }

static inline LayerCache layer_cache(const Config *c, const RunState *s, int l) {
    int global_before = c->sliding_window ? l / c->global_every : l, local = layer_is_local(c, l);
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t row = (size_t)global_before * c->seq_len + (size_t)(l - global_before) * local_cache_rows(c, s->ring);
    size_t at = kv_span(s->kv_type, row * kvd);
    LayerCache lc = {(char *)s->key_cache + at, (char *)s->value_cache + at, c->seq_len, 0};
    if (local && s->ring) lc.rows = s->ring, lc.mirrored = 1;
    return lc;
}

// The ring's second copy of rows [r, r + T), columns [c0, c1), just written; elements of kv_type.
static inline void mirror_rows(void *cache, int kv_type, int rows, int r, int T, size_t kvd, size_t c0, size_t c1) {
    char *p = cache;
    for (int i = r; i < r + T; i++)
        memcpy(p + kv_span(kv_type, (i < rows ? i + rows : i - rows) * kvd + c0), p + kv_span(kv_type, i * kvd + c0),
               kv_span(kv_type, c1 - c0));
}

// Rows [r, r + T) of a float16 or Q8_0 cache (kv_type), columns [c0, c1), rounded or quantised
// from the new keys or values src [T, kvd].
static inline void store_kv_rows(void *cache, int kv_type, int r, const float *src, int T, size_t kvd, size_t c0,
                                 size_t c1) {
    for (int t = 0; t < T; t++) {
        void *to = (char *)cache + kv_span(kv_type, (r + t) * kvd + c0);
        const float *from = src + (size_t)t * kvd + c0;
        if (kv_type == BLOCK_Q8_0) quantize_q8_0_blocks(to, from, c1 - c0);
        else floats_to_f16(to, from, c1 - c0);
    }
}

#define KV_READY_AHEAD 64 // positions beyond a pass's last whose cache rows kv_cache_ready brings in too

// Brings every layer's cache rows for positions up to end (and KV_READY_AHEAD beyond) into
// memory, a call per layer and half, before a pass writes them. Each 4 KiB page would
// otherwise fault on its first write: a 256-token prompt's first pass wrote some 7,600 of
// them, a third of its time on a VM, where a fault costs about 10 us (docs/KERNELS.md).
static inline void kv_cache_ready(const Config *c, RunState *s, int end) {
#ifdef MADV_POPULATE_WRITE
    if (end <= s->kv_ready) return;
    int from = s->kv_ready, to = end + KV_READY_AHEAD < c->seq_len ? end + KV_READY_AHEAD : c->seq_len;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, page = (size_t)sysconf(_SC_PAGESIZE);
    for (int l = 0; l < c->n_layers; l++) {
        LayerCache lc = layer_cache(c, s, l);
        // a ring's rows (twice over) all at once, the first time
        int r0 = lc.mirrored ? (from ? 2 * lc.rows : 0) : from, r1 = lc.mirrored ? 2 * lc.rows : to;
        for (int half = 0; half < 2 && r1 > r0; half++) {
            uintptr_t a = (uintptr_t)(half ? lc.v : lc.k) + kv_span(s->kv_type, (size_t)r0 * kvd);
            uintptr_t b = (uintptr_t)(half ? lc.v : lc.k) + kv_span(s->kv_type, (size_t)r1 * kvd);
            a &= ~(uintptr_t)(page - 1);
            madvise((void *)a, b - a, MADV_POPULATE_WRITE);
        }
    }
    s->kv_ready = to;
#else
    (void)c, (void)s, (void)end;
#endif
}

// Where a layer's new keys and values [T, kv_dim] are computed: a float32 cache takes them in
// place, at rows [row, row + T); a float16 or Q8_0 one from kv_new, once normalised and rotated
// (keep_new_kv).
static inline void new_kv_rows(const RunState *s, const LayerCache *lc, int row, size_t kvd, float **k, float **v) {
    int narrow = s->kv_type != WEIGHTS_F32;
    *k = narrow ? s->kv_new : (float *)lc->k + (size_t)row * kvd;
    *v = narrow ? s->kv_new + (size_t)s->max_batch * kvd : (float *)lc->v + (size_t)row * kvd;
}

// Columns [c0, c1) of the new rows [row, row + T) made whole in the cache: rounded or quantised
// in from knew and vnew (new_kv_rows) in a float16 or Q8_0 one, and copied to the ring's second
// rows in a mirrored layer.
static inline void keep_new_kv(const RunState *s, const LayerCache *lc, int row, const float *knew, const float *vnew,
                               int T, size_t kvd, size_t c0, size_t c1) {
    if (s->kv_type != WEIGHTS_F32) {
        store_kv_rows(lc->k, s->kv_type, row, knew, T, kvd, c0, c1);
        store_kv_rows(lc->v, s->kv_type, row, vnew, T, kvd, c0, c1);
    }
    if (lc->mirrored) {
        mirror_rows(lc->k, s->kv_type, lc->rows, row, T, kvd, c0, c1);
        mirror_rows(lc->v, s->kv_type, lc->rows, row, T, kvd, c0, c1);
    }
}

// The state's buffers for up to max_batch rows at once and a KV cache of kv_type (WEIGHTS_F32,
// WEIGHTS_F16, or BLOCK_Q8_0 when head_dim is a multiple of 32), carved from mem (wbuf only for a
// Q8_0, bfloat16 or float16 model); with mem NULL only counted. Returns the bytes they take.
static inline size_t state_carve(RunState *s, const Config *c, int max_batch, int kv_type, float *mem) {
    memset(s, 0, sizeof *s);
    s->max_batch = max_batch;
    s->kv_type = kv_type;
    s->threads = max_threads();
    size_t B = max_batch, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    int ring = c->sliding_window - 1 + max_batch;
    s->ring = c->sliding_window && 2 * (int64_t)ring < c->seq_len ? ring : 0;
    size_t half = c->rope_dims / 2, local_half = c->sliding_window ? half : 0;
    size_t global = c->sliding_window ? c->n_layers / c->global_every : c->n_layers;
    size_t cache = kvd * (global * c->seq_len + (c->n_layers - global) * local_cache_rows(c, s->ring));
    size_t cache_floats = (kv_span(kv_type, cache) + sizeof(float) - 1) / sizeof(float);
    s->cache_bytes = 2 * kv_span(kv_type, cache);
    float *key_cache, *value_cache;
    size_t widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
    widest = qd > widest ? qd : widest;
    widest = (size_t)c->shared_dim > widest ? (size_t)c->shared_dim : widest;
    size_t E = c->n_experts, pairs = B * (E ? c->n_experts_used : 1);
    s->group_ints = E ? state_align(E + 1 + 2 * pairs) : 0;
    float *expert_id, *groups;
    s->wbuf_floats = c->weight_type != WEIGHTS_F32 ? qchunk_floats((int)widest) : 0;
    s->xq_row_bytes = c->weight_type == WEIGHTS_PER_MATRIX ? quantized_row_bytes((int)widest) : 0;
    float *xq_floats;
    struct {
        float **buf;
        size_t floats;
    } t[] = {
        {&s->x, B * c->dim},
        {&s->xn, s->threads * B * c->dim},
        {&s->q, B * qd},
        {&s->attn_out, B * qd},
        {&s->xb, B * c->dim},
        {&s->hb, pairs * c->hidden_dim},
        {&s->hb2, pairs * c->hidden_dim},
        {&s->router_p, B * E},
        {&s->expert_w, E ? pairs : 0},
        {&expert_id, E ? pairs : 0},
        {&groups, s->threads * s->group_ints},
        {&s->expert_in, E ? pairs * c->dim : 0},
        {&s->expert_out, E ? pairs * c->dim : 0},
        {&s->shared_g, c->shared_dim ? B : 0},
        {&s->shared_h1, B * c->shared_dim},
        {&s->shared_h3, B * c->shared_dim},
        {&s->shared_out, c->shared_dim ? B * c->dim : 0},
        {&s->head_ss, c->arch_flags & ARCH_QK_NORM_WHOLE ? B * (c->n_heads + c->n_kv_heads) : 0},
        {&s->token_parts, c->n_heads * s->threads * TOKEN_PART(c->head_dim)},
        {&s->kv_new, kv_type != WEIGHTS_F32 ? 2 * B * kvd : 0},
        {&s->wbuf, s->threads * s->wbuf_floats},
        {&xq_floats, s->threads * (B + 2) * s->xq_row_bytes / sizeof(float)},
        // the buffers above are what every pass writes (state_init), those below grow with the context
        {&s->att, B * c->n_heads * (size_t)c->seq_len},
        {&s->rope_cos, c->seq_len * half},
        {&s->rope_sin, c->seq_len * half},
        {&s->rope_local_cos, c->seq_len * local_half},
        {&s->rope_local_sin, c->seq_len * local_half},
        {&key_cache, cache_floats},
        {&value_cache, cache_floats},
    };
    size_t n = sizeof t / sizeof t[0], total = 0;
    for (size_t i = 0; i < n; i++) total += state_align(t[i].floats);
    s->bytes = total <= SIZE_MAX / sizeof(float) ? total * sizeof(float) : SIZE_MAX;
    s->mem = mem;
    for (size_t i = 0; i < n && mem; i++) {
        *t[i].buf = t[i].floats ? mem : NULL;
        mem += state_align(t[i].floats);
    }
    s->xq = mem ? (uint8_t *)xq_floats : NULL;
    s->key_cache = mem ? key_cache : NULL, s->value_cache = mem ? value_cache : NULL;
    s->expert_id = mem ? (int *)expert_id : NULL, s->groups = mem ? (int *)groups : NULL;
    return s->bytes;
}

// Allocates the state (state_carve) in one block. Returns 0, or -1 when out of memory, with
// s->bytes saying how much it needed.
static inline int state_init(RunState *s, const Config *c, int max_batch, int kv_type) {
    size_t bytes = state_carve(s, c, max_batch, kv_type, NULL);
    // An anonymous mapping starts on a page and is zeroed as it is first touched, like calloc,
    // whose large blocks start 16 bytes into a page: every 64-byte vector of every buffer then
    // straddled two lines (the 110M Q4_0 generated 7-26 % slower; docs/KERNELS.md).
    void *mem =
        bytes < SIZE_MAX ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (mem == MAP_FAILED) return -1;
    state_carve(s, c, max_batch, kv_type, mem);
#ifdef MADV_POPULATE_WRITE
    // The buffers every pass writes brought into memory in one call, not a page fault at a
    // time inside the first pass (kv_cache_ready says why); an older kernel refuses, harmlessly.
    madvise(mem, (size_t)((char *)s->att - (char *)mem), MADV_POPULATE_WRITE);
#endif
    if (c->pos_kind == POS_ROPE) {
        size_t half = c->rope_dims / 2;
        // zeroed for GCC alone: at -march=x86-64 it cannot see that the table reads only the
        // pairs rope_frequencies writes (-Wmaybe-uninitialized)
        double freq[ROPE_MAX_PAIRS] = {0};
        rope_frequencies(freq, c, 0);
        rope_table_of(s->rope_cos, s->rope_sin, c->seq_len, (int)half, freq);
        if (c->sliding_window) {
            rope_frequencies(freq, c, 1);
            rope_table_of(s->rope_local_cos, s->rope_local_sin, c->seq_len, (int)half, freq);
        }
    }
    return 0;
}

// Turns --compute bf16 on (allocating its buffers the first time) or off; a build without
// VDPBF16PS keeps float32's products, as fast (BF16_FAST). Returns 0, or -1 when out of memory.
static inline int state_compute_bf16(RunState *s, const Config *c, int on) {
    s->compute_bf16 = on && BF16_FAST;
    if (!s->compute_bf16 || s->bf16_x) return 0;
    size_t qd = (size_t)c->n_heads * c->head_dim, widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
    widest = qd > widest ? qd : widest;
    size_t kp = (widest + 1) / 2, rows = (size_t)(s->max_batch + BF16_TILE_ROWS - 1) / BF16_TILE_ROWS;
    s->bf16_x_words = state_align(rows * BF16_TILE_ROWS * kp);
    s->bf16_strip_words = state_align(BF16_TILE_COLS * kp);
    s->bf16_rows_floats = c->weight_type == WEIGHTS_F32 ? 0 : state_align(BF16_TILE_COLS * widest);
    size_t per_thread = s->bf16_x_words + s->bf16_strip_words + s->bf16_rows_floats;
    if (!(s->bf16_x = aligned_alloc(64, s->threads * per_thread * sizeof(uint32_t)))) {
        s->compute_bf16 = 0;
        return -1;
    }
    s->bf16_strip = s->bf16_x + s->threads * s->bf16_x_words;
    s->bf16_rows = (float *)(s->bf16_strip + s->threads * s->bf16_strip_words);
    return 0;
}

// A linear layer's output features [lo, hi) for T rows of input x: this thread's share, as
// matmul_part; in --compute bf16 with more than one row, from x packed into this thread's
// bf16_x by product_input, and each strip of the weights rounded (float32, float16, Q8_0, a
// block type: its widened or dequantised values) or taken as stored (bfloat16) into bf16_strip.
static inline void product_part(const RunState *s, int id, const Linear *l, const float *x, int T, int n_in, size_t lo,
                                size_t hi) {
    if (!s->compute_bf16 || T < 2) {
        matmul_part(l, x, T, n_in, lo, hi);
        return;
    }
    uint32_t *strip = s->bf16_strip + (size_t)id * s->bf16_strip_words;
    const uint32_t *xp = s->bf16_x + (size_t)id * s->bf16_x_words;
    size_t n_out = l->n_out;
    if (l->w || l->qw.type == WEIGHTS_BF16)
        bf16_weights_product(l->out, n_out, T, xp, l->w ? (const void *)l->w : l->qw.half, !l->w, lo, hi, n_in, l->b,
                             strip);
    else { // a strip's rows dequantised as a float32 run would, then rounded
        float *rows = s->bf16_rows + (size_t)id * s->bf16_rows_floats;
        for (size_t r0 = lo; r0 < hi; r0 += BF16_TILE_COLS) {
            size_t r1 = hi - r0 < BF16_TILE_COLS ? hi : r0 + BF16_TILE_COLS;
            dequantize_rows(rows, &l->qw, n_in, r0, r1);
            bf16_weights_product(l->out + r0, n_out, T, xp, rows, 0, 0, r1 - r0, n_in, l->b ? l->b + r0 : NULL, strip);
        }
    }
    if (l->residual)
        for (int t = 0; t < T; t++)
            for (size_t i = lo; i < hi; i++) l->residual[(size_t)t * n_out + i] += l->out[(size_t)t * n_out + i];
}

// x [T, n_in] rounded and packed into this thread's bf16_x, for the products that follow with
// it as their input (product_part), when they will take that path.
static inline void product_input(const RunState *s, int id, const float *x, int T, int n_in) {
    if (s->compute_bf16 && T > 1)
        bf16_pack_rows(s->bf16_x + (size_t)id * s->bf16_x_words, x, (size_t)n_in, 0, (size_t)T, n_in);
}

// Thread id's share of wbuf and of xq (NULL when the model needs none).
static inline float *thread_wbuf(const RunState *s, int id) {
    return s->wbuf ? s->wbuf + (size_t)id * s->wbuf_floats : NULL;
}
static inline uint8_t *thread_xq(const RunState *s, int id) {
    return s->xq ? s->xq + (size_t)id * (s->max_batch + 2) * s->xq_row_bytes : NULL;
}

// Multiply-adds of one layer's products for one token (its chosen experts' and the router's).
static inline size_t layer_macs(const Config *c) {
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t ffn = (ffn_is_gated(c->ffn_kind) ? 3 : 2) * d * c->hidden_dim;
    size_t shared = (ffn_is_gated(c->ffn_kind) ? 3 : 2) * d * c->shared_dim + (c->shared_dim ? d : 0);
    return d * (qd + 2 * kvd) + qd * d + (c->n_experts ? c->n_experts_used * ffn + c->n_experts * d + shared : ffn);
}

// This thread's copy of the sub-layer's input: the norm of every row of x in a pre-norm model
// (each thread normalises all rows itself, which costs less than waiting for the others),
// x itself in a post-norm one.
static inline const float *sublayer_input(const Config *c, const float *x, float *xn, const float *norm_w,
                                          const float *norm_b, int T) {
    if (c->post_norm) return x;
    norm_forward(c, xn, x, norm_w, norm_b, T);
    return xn;
}

// A sub-layer's output projection of in [T, n_in] into xb, split across the region's threads
// by features, each adding its features into x (the residual). With an output norm (out_norm_w,
// Gemma 3's) the whole rows must be there first: each thread then normalises its rows [r0, r1)
// of xb and adds them into x. Then, in a post-norm model, "Add & Norm"'s norm of the same rows.
// On return x is whole for every thread.
static inline void add_sublayer(const Config *c, RunState *s, const float *in, const float *w, QMat qw, const float *b,
                                const float *out_norm_w, const float *norm_w, const float *norm_b, int T, int n_in,
                                int id, int nt, size_t r0, size_t r1) {
    size_t d = c->dim, lo, hi;
    Linear o = {.out = s->xb,
                .w = w,
                .b = b,
                .n_out = c->dim,
                .residual = out_norm_w ? NULL : s->x,
                .qw = qw,
                .wbuf = thread_wbuf(s, id),
                .xq = thread_xq(s, id)};
    share(d, id, nt, &lo, &hi);
    product_input(s, id, in, T, n_in);
    product_part(s, id, &o, in, T, n_in, lo, hi);
    barrier_wait(&s->barrier, nt);
    if (!out_norm_w && !c->post_norm) return;
    if (out_norm_w && r1 > r0) {
        float *xb = s->xb + r0 * d, *x = s->x + r0 * d;
        norm_forward(c, xb, xb, out_norm_w, NULL, (int)(r1 - r0));
        for (size_t i = 0; i < (r1 - r0) * d; i++) x[i] += xb[i];
    }
    if (c->post_norm && r1 > r0) norm_forward(c, s->x + r0 * d, s->x + r0 * d, norm_w, norm_b, (int)(r1 - r0));
    barrier_wait(&s->barrier, nt);
}

// The part of s->keep that layer l's attention fills, for queries from pos0 and keys from first,
// in *part; NULL when the layer's probabilities are not kept.
static inline const AttentionKeep *layer_keep(const AttentionKeep *keep, int l, int pos0, int first,
                                              AttentionKeep *part) {
    if (!keep || l < keep->layer0 || l >= keep->layer0 + keep->layers) return NULL;
    *part = *keep;
    size_t n = (size_t)keep->positions;
    part->p += ((size_t)(l - keep->layer0) * keep->heads * n + (size_t)pos0) * n + (size_t)first;
    return part;
}

#include "experts.h" // after RunState and product_part, which the experts' sub-layer uses

// Logits [n, vocab_size] of n rows of the residual stream x: thread id's share of the
// vocabulary, after the final norm (each thread normalises the rows itself, into its xn).
static inline void logits_part(const Config *c, const Weights *w, const RunState *s, int id, int nt, const float *x,
                               float *xn, int n, float *logits) {
    if (c->final_norm) {
        norm_forward(c, xn, x, w->final_norm_w, w->final_norm_b, n);
        x = xn;
    }
    Linear cls = {.out = logits,
                  .w = w->classifier,
                  .n_out = c->vocab_size,
                  .qw = w->qclassifier,
                  .wbuf = thread_wbuf(s, id),
                  .xq = thread_xq(s, id)};
    size_t lo, hi;
    share((size_t)c->vocab_size, id, nt, &lo, &hi);
    product_input(s, id, x, n, c->dim);
    product_part(s, id, &cls, x, n, c->dim, lo, hi);
}

// ARCH_QK_NORM_WHOLE's RMSNorms of each row of q over all its q_dim features and of k over all
// kv_dim (OLMoE's), while thread id holds only heads [h0, h1) of q and [g0, g1) of k: it sums the
// squares of its own heads into head_ss, and after a meeting adds every head's sum in head order
// (the same sums for any number of threads) and scales its own heads.
static inline void whole_qk_norm(const Config *c, RunState *s, const LayerWeights *L, float *k, int T, int nt,
                                 size_t h0, size_t h1, size_t g0, size_t g1) {
    int hd = c->head_dim, H = c->n_heads, n = H + c->n_kv_heads;
    size_t qd = (size_t)H * hd, kvd = (size_t)c->n_kv_heads * hd;
    float one = c->arch_flags & ARCH_NORM_PLUS_ONE ? 1.0f : 0.0f;
    for (int t = 0; t < T; t++) {
        float *ss = s->head_ss + (size_t)t * n;
        for (size_t h = h0; h < h1; h++) ss[h] = dot(s->q + t * qd + h * hd, s->q + t * qd + h * hd, hd);
        for (size_t g = g0; g < g1; g++) ss[H + g] = dot(k + t * kvd + g * hd, k + t * kvd + g * hd, hd);
    }
    barrier_wait(&s->barrier, nt);
    for (int t = 0; t < T; t++) {
        const float *ss = s->head_ss + (size_t)t * n;
        float sq = 0.0f, sk = 0.0f;
        for (int h = 0; h < H; h++) sq += ss[h];
        for (int g = H; g < n; g++) sk += ss[g];
        float rq = 1.0f / sqrtf(sq / qd + c->norm_eps), rk = 1.0f / sqrtf(sk / kvd + c->norm_eps);
        float *qt = s->q + t * qd, *kt = k + t * kvd;
        for (size_t i = h0 * hd; i < h1 * hd; i++) qt[i] = qt[i] * rq * (L->q_norm_w[i] + one);
        for (size_t i = g0 * hd; i < g1 * hd; i++) kt[i] = kt[i] * rk * (L->k_norm_w[i] + one);
    }
}

// The threads a forward pass runs on: as many as there are, at most the state's copies of xn.
static inline int forward_team(const RunState *s) { return max_threads() < s->threads ? max_threads() : s->threads; }

// Runs T tokens at positions pos0 .. pos0+T-1 (T ≤ max_batch, pos0 + T ≤ seq_len) through
// the model, appending their keys and values to the cache: it must hold the positions before
// pos0 that the layers see (a local layer's ring keeps its last sliding_window - 1 + max_batch;
// every caller goes on from where the last call ended, or starts again at 0). Logits are
// computed only for rows logits_from .. T-1, into logits [T - logits_from, vocab_size]; the
// prompt asks for its last row alone, perplexity for all. With s->keep set, the attention
// probabilities of the layers and heads it names are copied there as they are computed.
static inline void forward(const Config *c, const Weights *w, RunState *s, const int *tokens, int T, int pos0,
                           float *logits, int logits_from) {
    int d = c->dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, hid = c->hidden_dim;
    int gated = ffn_is_gated(c->ffn_kind), n_logits = logits && logits_from < T ? T - logits_from : 0;
    float scale = c->attn_scale > 0 ? c->attn_scale : 1.0f / sqrtf((float)hd);
    float *x = s->x;
    kv_cache_ready(c, s, pos0 + T);
    // One parallel region for the whole pass: each product is split across the threads by
    // output features, attention by head, embedding and post-norms by rows. A one-token step
    // is a few milliseconds, and each meeting at s->barrier costs the earlier thread a wait
    // of several microseconds, so the steps are arranged for few meetings: every thread
    // normalises x itself, computes the queries, keys and values of its own heads, rotates
    // and attends with them, and adds its features of the output projections into x.
#pragma omp parallel num_threads(forward_team(s)) if ((size_t)T * layer_macs(c) >= 4 * PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t r0, r1, lo, hi, h0, h1, g0, g1;
        share((size_t)T, id, nt, &r0, &r1);
        share((size_t)c->n_heads, id, nt, &h0, &h1);
        share((size_t)c->n_kv_heads, id, nt, &g0, &g1);
        // with whole groups of query heads per thread, a pass's queries need only its own keys
        // and values; otherwise, and in a one-token step (every thread takes a range of every
        // head's keys), every thread's must be there before attention
        int token_step = T == 1 && !s->keep, own_kv = c->n_kv_heads % nt == 0 && !token_step;
        float *xn = s->xn + (size_t)id * s->max_batch * d;
        float *wbuf = thread_wbuf(s, id);
        uint8_t *xq = thread_xq(s, id);
        if (r1 > r0) embed_forward(c, w, x + r0 * d, tokens + r0, (int)(r1 - r0), pos0 + (int)r0);
        barrier_wait(&s->barrier, nt);
        for (int l = 0; l < c->n_layers; l++) {
            const LayerWeights *L = &w->layers[l];
            int local = layer_is_local(c, l);
            LayerCache lc = layer_cache(c, s, l);
            int row = pos0 % lc.rows; // the new positions' rows: in a ring, rows [row, row + T) < 2 rows
            float *knew, *vnew;
            new_kv_rows(s, &lc, row, kvd, &knew, &vnew);
            // attention
            const float *in = sublayer_input(c, x, xn, L->attn_norm_w, L->attn_norm_b, T);
            Linear q = {.out = s->q, .w = L->wq, .b = L->bq, .n_out = qd, .qw = L->qwq, .wbuf = wbuf, .xq = xq};
            Linear k = {.out = knew, .w = L->wk, .b = L->bk, .n_out = kvd, .qw = L->qwk, .wbuf = wbuf, .xq = xq};
            Linear v = {.out = vnew, .w = L->wv, .b = L->bv, .n_out = kvd, .qw = L->qwv, .wbuf = wbuf, .xq = xq};
            k.same_input = L->qwk.type == L->qwq.type, v.same_input = L->qwv.type == L->qwk.type;
            product_input(s, id, in, T, d);
            product_part(s, id, &q, in, T, d, h0 * hd, h1 * hd);
            product_part(s, id, &k, in, T, d, g0 * hd, g1 * hd);
            product_part(s, id, &v, in, T, d, g0 * hd, g1 * hd);
            if (c->arch_flags & ARCH_QK_NORM_WHOLE) whole_qk_norm(c, s, L, knew, T, nt, h0, h1, g0, g1);
            else if (c->arch_flags & ARCH_QK_NORM) {
                head_norm_forward(c, s->q + h0 * hd, qd, T, (int)(h1 - h0), L->q_norm_w);
                head_norm_forward(c, knew + g0 * hd, kvd, T, (int)(g1 - g0), L->k_norm_w);
            }
            if (c->pos_kind == POS_ROPE) {
                const float *rc = local ? s->rope_local_cos : s->rope_cos,
                            *rs = local ? s->rope_local_sin : s->rope_sin;
                rope_forward(s->q + h0 * hd, qd, T, pos0, (int)(h1 - h0), hd, c->rope_dims, rc, rs);
                rope_forward(knew + g0 * hd, kvd, T, pos0, (int)(g1 - g0), hd, c->rope_dims, rc, rs);
            }
            keep_new_kv(s, &lc, row, knew, vnew, T, kvd, g0 * hd, g1 * hd);
            if (!own_kv) barrier_wait(&s->barrier, nt);
            // a local layer's queries see positions from first on, in one piece of its cache
            int first = local && pos0 - c->sliding_window + 1 > 0 ? pos0 - c->sliding_window + 1 : 0;
            size_t from = kv_span(s->kv_type, (size_t)(first % lc.rows) * kvd);
            const char *kl = (const char *)lc.k + from, *vl = (const char *)lc.v + from;
            AttentionKeep part;
            int band = local ? c->sliding_window : 0;
            // a generation step: the cache read once, by every thread (attention_token); many rows in
            // tiles; a few rows, and a pass that keeps probabilities (every layer, so that a
            // selection's layers see what they see in the whole), in score blocks
            if (token_step)
                attention_token(s->attn_out, s->att, (size_t)c->seq_len, s->token_parts, s->q, kl, vl, s->kv_type,
                                pos0 - first + 1, c->n_heads, c->n_kv_heads, hd, scale, id, nt, &s->barrier);
            else if (!s->keep && attention_tiles_fit(T, hd))
                attention_tiled(s->attn_out, NULL, s->q, kl, vl, s->kv_type, T, pos0 - first, c->n_heads, c->n_kv_heads,
                                hd, scale, band, h0, h1);
            else
                attention_pairs_masked(s->attn_out, s->att, s->q, kl, vl, s->kv_type, T, pos0 - first, c->n_heads,
                                       c->n_kv_heads, hd, scale, band, layer_keep(s->keep, l, pos0, first, &part), h0,
                                       h1);
            barrier_wait(&s->barrier, nt);
            add_sublayer(c, s, s->attn_out, L->wo, L->qwo, L->bo, L->attn_out_norm_w, L->attn_norm_w, L->attn_norm_b, T,
                         qd, id, nt, r0, r1);
            // feed-forward: w1 and w3 split alike, so that each thread's activations need only
            // its own outputs
            in = sublayer_input(c, x, xn, L->ffn_norm_w, L->ffn_norm_b, T);
            if (c->n_experts) {
                experts_sublayer(c, L, s, in, T, id, nt, r0, r1);
                continue;
            }
            Linear up[] = {{.out = s->hb, .w = L->w1, .b = L->b1, .n_out = hid, .qw = L->qw1, .wbuf = wbuf, .xq = xq},
                           {.out = s->hb2, .w = L->w3, .b = L->b3, .n_out = hid, .qw = L->qw3, .wbuf = wbuf, .xq = xq}};
            up[1].same_input = L->qw3.type == L->qw1.type;
            share((size_t)hid, id, nt, &lo, &hi);
            product_input(s, id, in, T, d);
            product_part(s, id, &up[0], in, T, d, lo, hi);
            if (gated) product_part(s, id, &up[1], in, T, d, lo, hi);
            for (int t = 0; t < T && hi > lo; t++)
                activation_forward(c->ffn_kind, s->hb + (size_t)t * hid + lo, s->hb + (size_t)t * hid + lo,
                                   s->hb2 + (size_t)t * hid + lo, hi - lo);
            barrier_wait(&s->barrier, nt);
            add_sublayer(c, s, s->hb, L->w2, L->qw2, L->b2, L->ffn_out_norm_w, L->ffn_norm_w, L->ffn_norm_b, T, hid, id,
                         nt, r0, r1);
        }
        if (n_logits) logits_part(c, w, s, id, nt, x + (size_t)logits_from * d, xn, n_logits, logits);
    }
}

#endif
