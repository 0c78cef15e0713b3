// model/file.h: the attn.c model file (docs/FORMAT.md). It owns the header and its checks, the
// Config read from it, the named weight tensors carved out of one block, mapping a file to
// read in place, and writing one whole. It computes nothing and knows no command line: every
// error comes back as a one-line reason for the caller to report.
#ifndef ATTN_MODEL_FILE_H
#define ATTN_MODEL_FILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include "../io/files.h"
#include "../tokenizer.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model file is little-endian and is mapped as is: build on a little-endian machine"
#endif

// ----------------------------------------------------------------------------
// The file header (docs/FORMAT.md)

#define MODEL_MAGIC "ATTN"
#define MODEL_VERSION                                                                                                  \
    4 // 1: float32 only; 2 adds weight_type and group_size; 3 the knobs of today's families; 4 a chat section
#define MODEL_HEADER_SIZE 256
#define MODEL_ALIGN 64

enum { POS_ROPE, POS_LEARNED, POS_SINUSOIDAL, POS_KINDS };
enum { FFN_SWIGLU, FFN_GELU_TANH, FFN_GELU_ERF, FFN_RELU, FFN_GEGLU_TANH, FFN_KINDS };
enum { NORM_RMS, NORM_LAYER, NORM_KINDS };
enum { BIAS_QKV = 1, BIAS_ATTN_OUT = 2, BIAS_FFN = 4, BIAS_ALL = 7 };
enum { WEIGHTS_F32, WEIGHTS_Q8_0, WEIGHTS_BF16, WEIGHTS_F16, WEIGHT_TYPES };
enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3, ROPE_SCALING_KINDS };
// arch_flags (version 3): QK_NORM, an RMSNorm over each head of q and k before RoPE (Qwen3,
// Gemma 3); NORM_PLUS_ONE, RMSNorm weights used as (1 + w) (Gemma); OUT_NORMS, a norm on the
// attention's and the feed-forward's outputs before each residual add (Gemma 3's four norms).
enum { ARCH_QK_NORM = 1, ARCH_NORM_PLUS_ONE = 2, ARCH_OUT_NORMS = 4, ARCH_ALL = 7 };
// tok_kind and tok_flags take tokenizer.h's TOK_* and TOKF_* values.
#define TOKF_ALL (TOKF_DUMMY_PREFIX | TOKF_ADD_BOS | TOKF_BOS_STOPS | TOKF_NFC | TOKF_IGNORE_MERGES | TOKF_PRE_MASK)

typedef struct {
    char magic[4];
    uint32_t version, header_size;
    uint32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len;
    uint32_t pos_kind;
    float rope_theta;
    uint32_t ffn_kind, norm_kind;
    float norm_eps;
    uint32_t post_norm, final_norm, bias_flags, tied_classifier;
    float embed_scale;
    uint32_t rope_dims, tok_kind, tok_flags;
    int32_t bos_id, eos_id;
    uint64_t tok_offset, tok_bytes, weights_offset, weights_bytes;
    uint32_t weight_type, group_size; // version 2
    // version 3: RoPE scaling of the global layers, the arch_flags, the attention's scale
    // (0: 1/sqrt(head_dim)), and sliding-window attention on the local layers: every layer
    // but each global_every-th is local, attends to the last sliding_window positions and uses
    // RoPE base rope_local_theta without scaling.
    uint32_t rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    uint32_t rope_original_ctx, arch_flags;
    float attn_scale;
    uint32_t sliding_window, global_every;
    float rope_local_theta;
    // version 4: the chat section (chat/chat.h reads it), right after the tokenizer blob; 0, 0: none
    uint64_t chat_offset, chat_bytes;
    uint8_t reserved[MODEL_HEADER_SIZE - 200];
} FileHeader;
_Static_assert(sizeof(FileHeader) == MODEL_HEADER_SIZE, "header is 256 bytes");
_Static_assert(offsetof(FileHeader, tok_offset) == 104, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, chat_offset) == 184, "header layout follows docs/FORMAT.md");

// The config is the header's numbers as ints, checked against the limits below first.
typedef struct {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len;
    int pos_kind, ffn_kind, norm_kind, post_norm, final_norm, bias_flags, tied_classifier;
    int rope_dims, tok_kind, tok_flags, bos_id, eos_id;
    int weight_type, group_size; // WEIGHTS_*; weights per Q8_0 scale (0 otherwise)
    float rope_theta, norm_eps, embed_scale;
    int rope_scaling, rope_original_ctx, arch_flags, sliding_window, global_every;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor, attn_scale, rope_local_theta;
} Config;

// Layer l attends to its last sliding_window positions only (a local layer).
static inline int layer_is_local(const Config *c, int l) {
    return c->sliding_window > 0 && (l + 1) % c->global_every != 0;
}

static inline size_t align_up(size_t n) { return (n + MODEL_ALIGN - 1) & ~(size_t)(MODEL_ALIGN - 1); }

// Limits keep every size product far below 2^63, so the arithmetic after validation
// cannot overflow; they are still generous for any model a CPU can run.
static inline int check_range(const char *name, int64_t v, int64_t lo, int64_t hi, char *err, size_t n) {
    if (v >= lo && v <= hi) return 0;
    snprintf(err, n, "%s is %lld, outside [%lld, %lld]", name, (long long)v, (long long)lo, (long long)hi);
    return -1;
}

// The fields' ranges, one by one.
static inline int check_field_ranges(const FileHeader *h, char *err, size_t n) {
    struct {
        const char *name;
        uint32_t v;
        int64_t lo, hi;
    } f[] = {
        {"dim", h->dim, 1, 65536},
        {"hidden_dim", h->hidden_dim, 1, 262144},
        {"n_layers", h->n_layers, 1, 1024},
        {"n_heads", h->n_heads, 1, 1024},
        {"n_kv_heads", h->n_kv_heads, 1, 1024},
        {"head_dim", h->head_dim, 1, 4096},
        {"vocab_size", h->vocab_size, 1, 1 << 24},
        {"seq_len", h->seq_len, 1, 1 << 20},
        {"pos_kind", h->pos_kind, 0, POS_KINDS - 1},
        {"ffn_kind", h->ffn_kind, 0, FFN_KINDS - 1},
        {"norm_kind", h->norm_kind, 0, NORM_KINDS - 1},
        {"post_norm", h->post_norm, 0, 1},
        {"final_norm", h->final_norm, 0, 1},
        {"bias_flags", h->bias_flags, 0, BIAS_ALL},
        {"tied_classifier", h->tied_classifier, 0, 1},
        {"rope_dims", h->rope_dims, 0, h->head_dim},
        {"tok_kind", h->tok_kind, 0, TOK_BYTE_BPE},
        {"tok_flags", h->tok_flags, 0, TOKF_ALL},
        {"rope_scaling", h->rope_scaling, 0, ROPE_SCALING_KINDS - 1},
        {"rope_original_ctx", h->rope_original_ctx, 0, 1 << 24},
        {"arch_flags", h->arch_flags, 0, ARCH_ALL},
        {"sliding_window", h->sliding_window, 0, 1 << 24},
        {"global_every", h->global_every, 0, 1024},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (check_range(f[i].name, f[i].v, f[i].lo, f[i].hi, err, n)) return -1;
    return 0;
}

// Version 3's fields and values: zero in older files, and consistent with each other.
static inline int check_v3_fields(const FileHeader *h, char *err, size_t n) {
    if (h->tok_flags & ~(uint32_t)TOKF_ALL) {
        snprintf(err, n, "tok_flags 0x%x has bits this build does not know", h->tok_flags);
        return -1;
    }
    if (((h->tok_flags & TOKF_PRE_MASK) >> TOKF_PRE_SHIFT) >= TOK_PRE_KINDS) {
        snprintf(err, n, "tok_flags names pre-tokenizer %u, which this build does not know",
                 (h->tok_flags & TOKF_PRE_MASK) >> TOKF_PRE_SHIFT);
        return -1;
    }
    if (h->version < 3) {
        const uint8_t *b = (const uint8_t *)h;
        for (size_t i = offsetof(FileHeader, rope_scaling); i < offsetof(FileHeader, chat_offset); i++)
            if (b[i]) {
                snprintf(err, n, "header byte %zu is not zero in a version %u file", i, h->version);
                return -1;
            }
        if (h->weight_type > WEIGHTS_Q8_0 || h->ffn_kind > FFN_RELU || h->tok_flags > 7) {
            snprintf(err, n, "a version %u file uses a version 3 weight_type, ffn_kind or tok_flags", h->version);
            return -1;
        }
    }
    if (h->rope_scaling != ROPE_SCALING_NONE && !(isfinite(h->rope_factor) && h->rope_factor >= 1)) {
        snprintf(err, n, "rope_factor %g is not a number >= 1", h->rope_factor);
        return -1;
    }
    if (h->rope_scaling == ROPE_SCALING_LLAMA3 &&
        !(isfinite(h->rope_low_freq_factor) && isfinite(h->rope_high_freq_factor) && h->rope_low_freq_factor > 0 &&
          h->rope_high_freq_factor > h->rope_low_freq_factor && h->rope_original_ctx > 0)) {
        snprintf(err, n,
                 "llama3 RoPE scaling needs 0 < rope_low_freq_factor < rope_high_freq_factor and "
                 "rope_original_ctx > 0");
        return -1;
    }
    if (!(isfinite(h->attn_scale) && h->attn_scale >= 0)) {
        snprintf(err, n, "attn_scale %g is not a number >= 0", h->attn_scale);
        return -1;
    }
    if ((h->sliding_window == 0) != (h->global_every == 0)) {
        snprintf(err, n, "sliding_window (%u) and global_every (%u) are set together or not at all", h->sliding_window,
                 h->global_every);
        return -1;
    }
    if (h->sliding_window && !(isfinite(h->rope_local_theta) && h->rope_local_theta > 0)) {
        snprintf(err, n, "rope_local_theta %g is not a positive number", h->rope_local_theta);
        return -1;
    }
    if ((h->arch_flags & (ARCH_QK_NORM | ARCH_NORM_PLUS_ONE | ARCH_OUT_NORMS)) && h->norm_kind != NORM_RMS) {
        snprintf(err, n, "arch_flags 0x%x need RMSNorm (norm_kind 0)", h->arch_flags);
        return -1;
    }
    if (h->ffn_kind == FFN_GEGLU_TANH && (h->bias_flags & BIAS_FFN)) {
        snprintf(err, n, "ffn_kind GeGLU has no feed-forward biases");
        return -1;
    }
    return 0;
}

// Checks every header field, alone and against the others; then c is the config it describes.
static inline int config_from_header(const FileHeader *h, Config *c, char *err, size_t n) {
    if (check_field_ranges(h, err, n)) return -1;
    if (h->n_heads % h->n_kv_heads) {
        snprintf(err, n, "n_heads (%u) is not a multiple of n_kv_heads (%u)", h->n_heads, h->n_kv_heads);
        return -1;
    }
    if (h->pos_kind == POS_ROPE && (h->rope_dims == 0 || h->rope_dims % 2)) {
        snprintf(err, n, "rope_dims is %u; RoPE needs an even number of dimensions >= 2", h->rope_dims);
        return -1;
    }
    if (h->pos_kind == POS_SINUSOIDAL && h->dim % 2) {
        snprintf(err, n, "dim is %u; sinusoidal positions need an even dim", h->dim);
        return -1;
    }
    if (!(h->norm_eps > 0 && h->norm_eps < 1)) {
        snprintf(err, n, "norm_eps %g is not in (0, 1)", h->norm_eps);
        return -1;
    }
    if (h->pos_kind == POS_ROPE && !(isfinite(h->rope_theta) && h->rope_theta > 0)) {
        snprintf(err, n, "rope_theta %g is not a positive number", h->rope_theta);
        return -1;
    }
    if (!isfinite(h->embed_scale)) {
        snprintf(err, n, "embed_scale is not finite");
        return -1;
    }
    if (check_v3_fields(h, err, n)) return -1;
    if (check_range("bos_id", h->bos_id, -1, (int64_t)h->vocab_size - 1, err, n)) return -1;
    if (check_range("eos_id", h->eos_id, -1, (int64_t)h->vocab_size - 1, err, n)) return -1;
    if (h->version < 2 && (h->weight_type || h->group_size)) {
        snprintf(err, n, "reserved header bytes 136..143 are not zero (a version 1 file has no weight_type)");
        return -1;
    }
    if (check_range("weight_type", h->weight_type, 0, WEIGHT_TYPES - 1, err, n)) return -1;
    int q8 = h->weight_type == WEIGHTS_Q8_0;
    if (check_range("group_size", h->group_size, q8, q8 ? 65536 : 0, err, n)) return -1;
    // a group never crosses a row, so it divides the width of every quantised matrix's rows
    uint32_t widths[] = {h->dim, h->n_heads * h->head_dim, h->hidden_dim};
    for (int i = 0; i < 3 && h->group_size; i++)
        if (widths[i] % h->group_size) {
            snprintf(err, n, "group_size %u does not divide the rows of width %u", h->group_size, widths[i]);
            return -1;
        }
    // packed by hand: a field per line would fill the screen
    // clang-format off
    *c = (Config){
        .dim = h->dim, .hidden_dim = h->hidden_dim, .n_layers = h->n_layers, .n_heads = h->n_heads,
        .n_kv_heads = h->n_kv_heads, .head_dim = h->head_dim, .vocab_size = h->vocab_size,
        .seq_len = h->seq_len, .pos_kind = h->pos_kind, .ffn_kind = h->ffn_kind, .norm_kind = h->norm_kind,
        .post_norm = h->post_norm, .final_norm = h->final_norm, .bias_flags = h->bias_flags,
        .tied_classifier = h->tied_classifier, .rope_dims = h->rope_dims, .tok_kind = h->tok_kind,
        .tok_flags = h->tok_flags, .bos_id = h->bos_id, .eos_id = h->eos_id, .weight_type = h->weight_type,
        .group_size = h->group_size, .rope_theta = h->rope_theta, .norm_eps = h->norm_eps,
        .embed_scale = h->embed_scale, .rope_scaling = h->rope_scaling, .rope_original_ctx = h->rope_original_ctx,
        .arch_flags = h->arch_flags, .sliding_window = h->sliding_window, .global_every = h->global_every,
        .rope_factor = h->rope_factor, .rope_low_freq_factor = h->rope_low_freq_factor,
        .rope_high_freq_factor = h->rope_high_freq_factor, .attn_scale = h->attn_scale,
        .rope_local_theta = h->rope_local_theta,
    };
    // clang-format on
    return 0;
}

// The header that describes c; the caller fills in the tokenizer's and weights' offsets.
static inline FileHeader header_from_config(const Config *c) {
    // the lowest version that describes c, so that older builds read what they can
    int v3 = c->weight_type > WEIGHTS_Q8_0 || c->ffn_kind > FFN_RELU || c->tok_flags > 7 || c->rope_scaling ||
             c->arch_flags || c->attn_scale != 0 || c->sliding_window;
    FileHeader h = {.version = v3                              ? 3
                               : c->weight_type == WEIGHTS_F32 ? 1
                                                               : 2,
                    .rope_scaling = c->rope_scaling,
                    .rope_factor = c->rope_factor,
                    .rope_low_freq_factor = c->rope_low_freq_factor,
                    .rope_high_freq_factor = c->rope_high_freq_factor,
                    .rope_original_ctx = c->rope_original_ctx,
                    .arch_flags = c->arch_flags,
                    .attn_scale = c->attn_scale,
                    .sliding_window = c->sliding_window,
                    .global_every = c->global_every,
                    .rope_local_theta = c->rope_local_theta,
                    .header_size = MODEL_HEADER_SIZE, // readable by older builds
                    .weight_type = c->weight_type,
                    .group_size = c->group_size,
                    .dim = c->dim,
                    .hidden_dim = c->hidden_dim,
                    .n_layers = c->n_layers,
                    .n_heads = c->n_heads,
                    .n_kv_heads = c->n_kv_heads,
                    .head_dim = c->head_dim,
                    .vocab_size = c->vocab_size,
                    .seq_len = c->seq_len,
                    .pos_kind = c->pos_kind,
                    .rope_theta = c->rope_theta,
                    .ffn_kind = c->ffn_kind,
                    .norm_kind = c->norm_kind,
                    .norm_eps = c->norm_eps,
                    .post_norm = c->post_norm,
                    .final_norm = c->final_norm,
                    .bias_flags = c->bias_flags,
                    .tied_classifier = c->tied_classifier,
                    .embed_scale = c->embed_scale,
                    .rope_dims = c->rope_dims,
                    .tok_kind = c->tok_kind,
                    .tok_flags = c->tok_flags,
                    .bos_id = c->bos_id,
                    .eos_id = c->eos_id};
    memcpy(h.magic, MODEL_MAGIC, 4);
    return h;
}

// ----------------------------------------------------------------------------
// Weights: named pointers into one block laid out as docs/FORMAT.md lists the tensors.
// Absent tensors stay NULL. The same carving serves the mapped file (run) and the
// parameter and gradient allocations (train).

// A matrix [rows, cols] not in float32. Q8_0: int8 values and a float32 scale per group of gs
// weights in a row, W[r, c] = q[r, c] * s[r, c / gs]. bfloat16 or float16 (type): the 16-bit
// values in half, each widened to float32 exactly. Every pointer is NULL for a float32 matrix.
typedef struct {
    const int8_t *q;
    const float *s;
    int gs;
    const uint16_t *half;
    int type; // WEIGHTS_*
} QMat;

// One layer's tensors; q = n_heads * head_dim, kv = n_kv_heads * head_dim, b* and *_b are
// biases, NULL where the config has none. In a Q8_0 file the matrices are in the QMat fields
// and their float pointers stay NULL.
typedef struct {
    float *attn_norm_w, *attn_norm_b; // (dim)
    float *wq, *bq;                   // (q, dim), (q)
    float *wk, *bk;                   // (kv, dim), (kv)
    float *wv, *bv;                   // (kv, dim), (kv)
    float *q_norm_w, *k_norm_w;       // (head_dim): ARCH_QK_NORM only
    float *wo, *bo;                   // (dim, q), (dim)
    float *attn_out_norm_w;           // (dim): ARCH_OUT_NORMS only
    float *ffn_norm_w, *ffn_norm_b;   // (dim)
    float *w1, *b1;                   // (hidden_dim, dim), (hidden_dim)
    float *w3, *b3;                   // (hidden_dim, dim), (hidden_dim): SwiGLU's and GeGLU's gate only
    float *w2, *b2;                   // (dim, hidden_dim), (dim)
    float *ffn_out_norm_w;            // (dim): ARCH_OUT_NORMS only
    QMat qwq, qwk, qwv, qwo, qw1, qw3, qw2;
} LayerWeights;

typedef struct {
    float *tok_embedding;               // (vocab_size, dim)
    float *pos_embedding;               // (seq_len, dim): learned positions only
    float *final_norm_w, *final_norm_b; // (dim)
    float *classifier;                  // (vocab_size, dim): tok_embedding when tied
    QMat qtok_embedding, qclassifier;
    LayerWeights *layers; // n_layers of them, owned by the Weights
} Weights;

// Walks the tensor list once: with base == NULL it only counts (and w may be NULL). Returns
// the block's size in bytes, every tensor padded to MODEL_ALIGN. Validated configs keep it
// below 2^50, so nothing here overflows.
static inline size_t carve_weights(const Config *c, float *base, Weights *w) {
    size_t off = 0;
    int q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    int ln = c->norm_kind == NORM_LAYER, swiglu = c->ffn_kind == FFN_SWIGLU || c->ffn_kind == FFN_GEGLU_TANH;
    int qk_norm = c->arch_flags & ARCH_QK_NORM, out_norms = c->arch_flags & ARCH_OUT_NORMS;
    Weights scratch;
    LayerWeights scratch_layer;
    Weights *W = w ? w : &scratch;
#define TENSOR(field, present, rows, cols)                                                                             \
    do {                                                                                                               \
        size_t bytes_ = (present) ? (size_t)(rows) * (size_t)(cols) * sizeof(float) : 0;                               \
        (field) = (present) && base ? (float *)((char *)base + off) : NULL;                                            \
        off += align_up(bytes_);                                                                                       \
    } while (0)
    // a matrix: float32; in a Q8_0 file its int8 values, then its scales; in a bfloat16 or
    // float16 file its 16-bit values
#define MATRIX(field, qfield, present, rows, cols)                                                                     \
    do {                                                                                                               \
        size_t n_ = (present) ? (size_t)(rows) * (size_t)(cols) : 0;                                                   \
        (qfield) = (QMat){.type = c->weight_type};                                                                     \
        if (c->weight_type == WEIGHTS_Q8_0) {                                                                          \
            (qfield).q = (present) && base ? (const int8_t *)((char *)base + off) : NULL;                              \
            off += align_up(n_);                                                                                       \
            (qfield).s = (present) && base ? (const float *)((char *)base + off) : NULL;                               \
            off += align_up(n_ / c->group_size * sizeof(float));                                                       \
            (qfield).gs = c->group_size;                                                                               \
            (field) = NULL;                                                                                            \
        } else if (c->weight_type != WEIGHTS_F32) {                                                                    \
            (qfield).half = (present) && base ? (const uint16_t *)((char *)base + off) : NULL;                         \
            off += align_up(n_ * sizeof(uint16_t));                                                                    \
            (field) = NULL;                                                                                            \
        } else {                                                                                                       \
            TENSOR(field, present, rows, cols);                                                                        \
        }                                                                                                              \
    } while (0)
    MATRIX(W->tok_embedding, W->qtok_embedding, 1, c->vocab_size, c->dim);
    TENSOR(W->pos_embedding, c->pos_kind == POS_LEARNED, c->seq_len, c->dim);
    for (int l = 0; l < c->n_layers; l++) {
        LayerWeights *L = w ? &w->layers[l] : &scratch_layer;
        TENSOR(L->attn_norm_w, 1, c->dim, 1);
        TENSOR(L->attn_norm_b, ln, c->dim, 1);
        MATRIX(L->wq, L->qwq, 1, q, c->dim);
        TENSOR(L->bq, c->bias_flags & BIAS_QKV, q, 1);
        MATRIX(L->wk, L->qwk, 1, kv, c->dim);
        TENSOR(L->bk, c->bias_flags & BIAS_QKV, kv, 1);
        MATRIX(L->wv, L->qwv, 1, kv, c->dim);
        TENSOR(L->bv, c->bias_flags & BIAS_QKV, kv, 1);
        TENSOR(L->q_norm_w, qk_norm, c->head_dim, 1);
        TENSOR(L->k_norm_w, qk_norm, c->head_dim, 1);
        MATRIX(L->wo, L->qwo, 1, c->dim, q);
        TENSOR(L->bo, c->bias_flags & BIAS_ATTN_OUT, c->dim, 1);
        TENSOR(L->attn_out_norm_w, out_norms, c->dim, 1);
        TENSOR(L->ffn_norm_w, 1, c->dim, 1);
        TENSOR(L->ffn_norm_b, ln, c->dim, 1);
        MATRIX(L->w1, L->qw1, 1, c->hidden_dim, c->dim);
        TENSOR(L->b1, c->bias_flags & BIAS_FFN, c->hidden_dim, 1);
        MATRIX(L->w3, L->qw3, swiglu, c->hidden_dim, c->dim);
        TENSOR(L->b3, swiglu && (c->bias_flags & BIAS_FFN), c->hidden_dim, 1);
        MATRIX(L->w2, L->qw2, 1, c->dim, c->hidden_dim);
        TENSOR(L->b2, c->bias_flags & BIAS_FFN, c->dim, 1);
        TENSOR(L->ffn_out_norm_w, out_norms, c->dim, 1);
    }
    TENSOR(W->final_norm_w, c->final_norm, c->dim, 1);
    TENSOR(W->final_norm_b, c->final_norm && ln, c->dim, 1);
    MATRIX(W->classifier, W->qclassifier, !c->tied_classifier, c->vocab_size, c->dim);
#undef MATRIX
#undef TENSOR
    if (c->tied_classifier) {
        W->classifier = W->tok_embedding;
        W->qclassifier = W->qtok_embedding;
    }
    return off;
}

static inline int weights_init(Weights *w, const Config *c, float *base) {
    memset(w, 0, sizeof *w);
    w->layers = calloc(c->n_layers, sizeof *w->layers);
    if (!w->layers) return -1;
    carve_weights(c, base, w);
    return 0;
}

static inline void weights_free(Weights *w) {
    free(w->layers);
    w->layers = NULL;
}

// ----------------------------------------------------------------------------
// Opening a model file: map it read-only, check everything, then point into it.

typedef struct {
    Config config;
    Weights weights;
    const void *tok_blob; // tokenizer bytes, inside the mapping
    size_t tok_bytes;
    const void *chat_section; // the chat section's bytes, inside the mapping; NULL, 0 without one
    size_t chat_bytes;
    void *map;
    size_t map_bytes;
} Model;

// Returns 0, or -1 with a one-line reason in err (without the file name; the caller adds it).
static inline int model_check_layout(const void *data, size_t size, Config *c, char *err, size_t n) {
    if (size < MODEL_HEADER_SIZE) {
        snprintf(err, n, "file is %zu bytes, shorter than the %d-byte header", size, MODEL_HEADER_SIZE);
        return -1;
    }
    FileHeader h;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, MODEL_MAGIC, 4)) {
        snprintf(err, n, "not an attn.c model file (bad magic); convert checkpoints with tools/convert.py");
        return -1;
    }
    if (h.version > MODEL_VERSION) {
        snprintf(err, n, "format version %u is newer than this build reads (%d)", h.version, MODEL_VERSION);
        return -1;
    }
    if (h.version < 1) {
        snprintf(err, n, "format version %u is unknown", h.version);
        return -1;
    }
    if (h.header_size != MODEL_HEADER_SIZE) {
        snprintf(err, n, "header_size is %u, expected %d", h.header_size, MODEL_HEADER_SIZE);
        return -1;
    }
    for (size_t i = 0; i < sizeof h.reserved; i++)
        if (h.reserved[i]) {
            snprintf(err, n, "reserved header byte %zu is not zero (a newer format?)",
                     offsetof(FileHeader, reserved) + i);
            return -1;
        }
    if (h.version < 4 && (h.chat_offset || h.chat_bytes)) {
        snprintf(err, n, "header bytes 184..199 (the chat section) are not zero in a version %u file", h.version);
        return -1;
    }
    if (config_from_header(&h, c, err, n)) return -1;
    if (h.tok_offset != MODEL_HEADER_SIZE) {
        snprintf(err, n, "tok_offset is %llu, expected %d", (unsigned long long)h.tok_offset, MODEL_HEADER_SIZE);
        return -1;
    }
    if (h.tok_bytes > size - MODEL_HEADER_SIZE) {
        snprintf(err, n, "truncated: tok_bytes (%llu) runs past the end of the %zu-byte file",
                 (unsigned long long)h.tok_bytes, size);
        return -1;
    }
    // the chat section, if any, lies right after the tokenizer blob
    uint64_t tok_end = h.tok_offset + h.tok_bytes;
    if (h.chat_bytes && (h.chat_offset != tok_end || h.chat_bytes > size - tok_end)) {
        snprintf(err, n, "chat section (%llu bytes at %llu) does not follow the tokenizer blob at %llu inside the file",
                 (unsigned long long)h.chat_bytes, (unsigned long long)h.chat_offset, (unsigned long long)tok_end);
        return -1;
    }
    if (!h.chat_bytes && h.chat_offset) {
        snprintf(err, n, "chat_offset is %llu but chat_bytes is 0", (unsigned long long)h.chat_offset);
        return -1;
    }
    if (h.weights_offset % MODEL_ALIGN || h.weights_offset < tok_end + h.chat_bytes || h.weights_offset > size) {
        snprintf(err, n,
                 "weights_offset %llu is not a multiple of %d after the tokenizer and chat section and inside the file "
                 "(truncated?)",
                 (unsigned long long)h.weights_offset, MODEL_ALIGN);
        return -1;
    }
    size_t want = carve_weights(c, NULL, NULL);
    if (h.weights_bytes != want) {
        snprintf(err, n, "weights_bytes is %llu but the config needs %zu", (unsigned long long)h.weights_bytes, want);
        return -1;
    }
    if (size - h.weights_offset != want) {
        snprintf(err, n, "file is %zu bytes but its header implies %llu (truncated or padded)", size,
                 (unsigned long long)(h.weights_offset + want));
        return -1;
    }
    return 0;
}

static inline int model_open(Model *m, const char *path, char *err, size_t n) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_NONBLOCK); // a FIFO with no writer must not hang the open
    if (fd < 0) {
        snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(err, n, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    char why[256];
    if (size < MODEL_HEADER_SIZE) {
        model_check_layout("", size, &m->config, why, sizeof why);
        snprintf(err, n, "%s: %s", path, why);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, n, "%s: cannot map: %s", path, strerror(errno));
        return -1;
    }
    // Asks for 2 MiB pages, and so fewer TLB misses in every step (docs/KERNELS.md); only a
    // hint, which a file already in the page cache ignores.
#ifdef MADV_HUGEPAGE
    madvise(map, size, MADV_HUGEPAGE);
#endif
    if (model_check_layout(map, size, &m->config, why, sizeof why)) {
        snprintf(err, n, "%s: %s", path, why);
        munmap(map, size);
        return -1;
    }
    const FileHeader *h = map;
    m->map = map;
    m->map_bytes = size;
    m->tok_blob = (const char *)map + h->tok_offset;
    m->tok_bytes = h->tok_bytes;
    m->chat_section = h->chat_bytes ? (const char *)map + h->chat_offset : NULL;
    m->chat_bytes = h->chat_bytes;
    if (weights_init(&m->weights, &m->config, (float *)((char *)map + h->weights_offset))) {
        snprintf(err, n, "%s: out of memory", path);
        munmap(map, size);
        return -1;
    }
    return 0;
}

static inline void model_close(Model *m) {
    weights_free(&m->weights);
    if (m->map) munmap(m->map, m->map_bytes);
    m->map = NULL;
}

// ----------------------------------------------------------------------------
// Saving: the same layout, written whole (io/files.h's write_atomic).

typedef struct {
    FileHeader h;
    const void *tok_blob, *chat;
    const float *weights;
} ModelFileParts;

static inline void write_model_parts(Sink *s, const void *ctx) {
    const ModelFileParts *p = ctx;
    static const char zeros[MODEL_ALIGN];
    sink_write(s, &p->h, sizeof p->h);
    sink_write(s, p->tok_blob, p->h.tok_bytes);
    sink_write(s, p->chat, p->h.chat_bytes);
    sink_write(s, zeros, p->h.weights_offset - MODEL_HEADER_SIZE - p->h.tok_bytes - p->h.chat_bytes);
    sink_write(s, p->weights, p->h.weights_bytes);
}

// Writes a whole model file, atomically: header, tokenizer blob, the chat section if chat_bytes
// (a version 4 file), then the weights block as carve_weights lays it out (padding included).
// Returns 0, or -1 with err.
static inline int model_save_chat(const char *path, const Config *c, const void *tok_blob, size_t tok_bytes,
                                  const void *chat, size_t chat_bytes, const float *weights, char *err, size_t n) {
    ModelFileParts p = {header_from_config(c), tok_blob, chat, weights};
    p.h.tok_offset = MODEL_HEADER_SIZE;
    p.h.tok_bytes = tok_bytes;
    if (chat_bytes) {
        p.h.version = 4;
        p.h.chat_offset = MODEL_HEADER_SIZE + tok_bytes;
        p.h.chat_bytes = chat_bytes;
    }
    p.h.weights_offset = align_up(MODEL_HEADER_SIZE + tok_bytes + chat_bytes);
    p.h.weights_bytes = carve_weights(c, NULL, NULL);
    return write_atomic(path, write_model_parts, &p, err, n);
}

static inline int model_save(const char *path, const Config *c, const void *tok_blob, size_t tok_bytes,
                             const float *weights, char *err, size_t n) {
    return model_save_chat(path, c, tok_blob, tok_bytes, NULL, 0, weights, err, n);
}

#endif
