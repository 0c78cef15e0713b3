// model/header.h: the attn.c model file's 256-byte header (docs/FORMAT.md), its checks, and the
// Config read from it. model/file.h builds the rest of the file on it; nothing here touches a
// file or computes, and every error comes back as a one-line reason.
#ifndef ATTN_MODEL_HEADER_H
#define ATTN_MODEL_HEADER_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../tokenizer.h"

// ----------------------------------------------------------------------------
// The file header (docs/FORMAT.md)

#define MODEL_MAGIC "ATTN"
// 1: float32 only; 2 adds weight_type and group_size; 3 the knobs of today's families; 4 a chat
// section; 5 the checksum and the chat template's text; 6 a type per matrix (llama.cpp's block
// types among them); 7 the model's sampling defaults (generation_config.json's); 8 a mixture of
// experts in place of each layer's feed-forward, and arch_flags' QK_NORM_WHOLE (OLMoE's). Every
// file written is version 8.
#define MODEL_VERSION 8
#define MODEL_HEADER_SIZE 256
#define MODEL_ALIGN 64

enum { POS_ROPE, POS_LEARNED, POS_SINUSOIDAL, POS_KINDS };
enum { FFN_SWIGLU, FFN_GELU_TANH, FFN_GELU_ERF, FFN_RELU, FFN_GEGLU_TANH, FFN_KINDS };

// SwiGLU and GeGLU multiply the activation by a second projection (w3), the gate's partner.
static inline int ffn_is_gated(int kind) { return kind == FFN_SWIGLU || kind == FFN_GEGLU_TANH; }

enum { NORM_RMS, NORM_LAYER, NORM_KINDS };
enum { BIAS_QKV = 1, BIAS_ATTN_OUT = 2, BIAS_FFN = 4, BIAS_ALL = 7 };
// weight_type: the file's matrices all float32, our Q8_0 (int8 and a float32 scale per group),
// bfloat16 or float16; or (version 6) each matrix in the type the type table gives it.
enum { WEIGHTS_F32, WEIGHTS_Q8_0, WEIGHTS_BF16, WEIGHTS_F16, WEIGHTS_PER_MATRIX, WEIGHT_TYPES };
// A matrix's type (QMat.type) is WEIGHTS_F32, _Q8_0, _BF16, _F16 or one of llama.cpp's block
// types, stored as GGUF stores them: rows of blocks, each block `block` values in `block_bytes`.
// The block types, one row each: the name after BLOCK_, GGML's type id, values a block, bytes a
// block. The enum, matrix_types and matmul_blocks' kernels are made from it; what the products
// know of a type is its row in model/quant.h's block_kernels.
#define BLOCK_TYPE_ROWS(X)                                                                                             \
    X(Q4_0, 2, 32, 18)                                                                                                 \
    X(Q4_1, 3, 32, 20)                                                                                                 \
    X(Q5_0, 6, 32, 22)                                                                                                 \
    X(Q5_1, 7, 32, 24)                                                                                                 \
    X(Q8_0, 8, 32, 34)                                                                                                 \
    X(Q2_K, 10, 256, 84)                                                                                               \
    X(Q3_K, 11, 256, 110)                                                                                              \
    X(Q4_K, 12, 256, 144)                                                                                              \
    X(Q5_K, 13, 256, 176)                                                                                              \
    X(Q6_K, 14, 256, 210)                                                                                              \
    X(IQ4_NL, 20, 32, 18)                                                                                              \
    X(IQ4_XS, 23, 256, 136)
#define BLOCK_ENUM(name, ggml_id, block, bytes) BLOCK_##name,
enum { BLOCK_TYPES_BEFORE = WEIGHT_TYPES - 1, BLOCK_TYPE_ROWS(BLOCK_ENUM) MATRIX_TYPES };
#undef BLOCK_ENUM

// What the type table's bytes (GGML's type ids) name, and how each type is stored; float32,
// float16 and bfloat16 are blocks of one value.
typedef struct {
    int ggml_id, block, block_bytes;
    const char *name;
} MatrixType;
#define BLOCK_MATRIX_TYPE(name, ggml_id, block, bytes) [BLOCK_##name] = {ggml_id, block, bytes, #name},
static const MatrixType matrix_types[MATRIX_TYPES] = {[WEIGHTS_F32] = {0, 1, 4, "F32"},
                                                      [WEIGHTS_F16] = {1, 1, 2, "F16"},
                                                      [WEIGHTS_BF16] = {30, 1, 2, "BF16"},
                                                      BLOCK_TYPE_ROWS(BLOCK_MATRIX_TYPE)};
#undef BLOCK_MATRIX_TYPE

static inline int is_block_type(int type) { return type >= BLOCK_Q4_0 && type < MATRIX_TYPES; }

// The matrix type a type table's byte names, or -1 (our grouped Q8_0 has no GGML id).
static inline int matrix_type_of_ggml(int id) {
    for (int t = 0; t < MATRIX_TYPES; t++)
        if (matrix_types[t].block && matrix_types[t].ggml_id == id) return t;
    return -1;
}
enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3, ROPE_SCALING_KINDS };
// arch_flags (version 3): QK_NORM, an RMSNorm over each head of q and k before RoPE (Qwen3,
// Gemma 3); NORM_PLUS_ONE, RMSNorm weights used as (1 + w) (Gemma); OUT_NORMS, a norm on the
// attention's and the feed-forward's outputs before each residual add (Gemma 3's four norms);
// (version 8) QK_NORM_WHOLE, with QK_NORM: its norms span the whole q and k projections (OLMoE).
enum { ARCH_QK_NORM = 1, ARCH_NORM_PLUS_ONE = 2, ARCH_OUT_NORMS = 4, ARCH_QK_NORM_WHOLE = 8, ARCH_ALL = 15 };
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
    // version 5: CRC-32 (zlib's) of the whole file with these four bytes taken as zero
    uint32_t checksum;
    // version 6: the type table, one GGML type id per matrix (weight_type WEIGHTS_PER_MATRIX;
    // 0, 0 otherwise), right after the chat section (or the tokenizer blob)
    uint32_t n_matrix_types;
    uint64_t types_offset;
    // version 7: the sampling defaults the model's publisher gives (generation_config.json), each
    // present where its bit of sampling_flags is set (SAMPLING_*), zero otherwise
    uint32_t sampling_flags;
    float temperature, top_p;
    uint32_t top_k;
    float min_p, repeat_penalty;
    // version 8: a mixture of experts (Qwen3-MoE's, Mixtral's): each layer's feed-forward is
    // n_experts experts of hidden_dim, of which a float32 router picks n_experts_used a token,
    // and (Qwen2-MoE's) a shared expert of shared_dim every token passes, its output scaled by a
    // sigmoid gate; all 0: none
    uint32_t n_experts, n_experts_used, moe_flags, shared_dim;
} FileHeader;
// moe_flags: the chosen experts' weights divided by their sum (norm_topk_prob)
enum { MOE_NORM_TOPK = 1, MOE_ALL = 1 };
enum {
    SAMPLING_TEMPERATURE = 1,
    SAMPLING_TOP_P = 2,
    SAMPLING_TOP_K = 4,
    SAMPLING_MIN_P = 8,
    SAMPLING_REPEAT_PENALTY = 16,
    SAMPLING_ALL = 31
};
_Static_assert(sizeof(FileHeader) == MODEL_HEADER_SIZE, "header is 256 bytes");
_Static_assert(offsetof(FileHeader, tok_offset) == 104, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, chat_offset) == 184, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, checksum) == 200, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, types_offset) == 208, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, sampling_flags) == 216, "header layout follows docs/FORMAT.md");
_Static_assert(offsetof(FileHeader, n_experts) == 240, "header layout follows docs/FORMAT.md");

// The config is the header's numbers as ints, checked against the limits below first.
typedef struct {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len;
    int pos_kind, ffn_kind, norm_kind, post_norm, final_norm, bias_flags, tied_classifier;
    int rope_dims, tok_kind, tok_flags, bos_id, eos_id;
    int weight_type, group_size; // WEIGHTS_*; weights per Q8_0 scale (0 otherwise)
    float rope_theta, norm_eps, embed_scale;
    int rope_scaling, rope_original_ctx, arch_flags, sliding_window, global_every;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor, attn_scale, rope_local_theta;
    // WEIGHTS_PER_MATRIX: the type table, each matrix's GGML type id in FORMAT.md's order, where
    // model_check_layout found it (inside the mapping); NULL otherwise
    const uint8_t *type_table;
    int sampling_flags; // version 7: which of the sampling defaults below the file gives
    float temperature, top_p, min_p, repeat_penalty;
    int top_k;
    int n_experts, n_experts_used, moe_flags, shared_dim; // version 8: 0 without experts
} Config;

// The rows of a layer's w1 and w3 (and, times dim, w2): every expert's hidden_dim, one after another.
static inline size_t ffn_rows(const Config *c) { return (size_t)c->hidden_dim * (c->n_experts ? c->n_experts : 1); }

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
        {"global_every", h->global_every, 0, 1025}, // n_layers' limit + 1: every layer local
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
    if ((h->arch_flags & ARCH_QK_NORM_WHOLE) && (h->version < 8 || !(h->arch_flags & ARCH_QK_NORM))) {
        snprintf(err, n, "arch_flags 0x%x: QK_NORM_WHOLE (8) came with version 8 and goes with QK_NORM (1)",
                 h->arch_flags);
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

// Version 7's sampling defaults: each within its flag's range (io/run_options.h) where its bit
// is set, zero where not; all of them zero before version 7, as the bytes were reserved.
static inline int check_sampling(const FileHeader *h, char *err, size_t n) {
    const uint8_t *b = (const uint8_t *)h;
    if (h->version < 7)
        for (size_t i = offsetof(FileHeader, sampling_flags); i < offsetof(FileHeader, n_experts); i++)
            if (b[i]) {
                snprintf(err, n, "reserved header byte %zu is not zero in a version %u file", i, h->version);
                return -1;
            }
    if (h->sampling_flags & ~(uint32_t)SAMPLING_ALL) {
        snprintf(err, n, "sampling_flags 0x%x has bits this build does not know", h->sampling_flags);
        return -1;
    }
    struct {
        int bit;
        const char *name;
        double value, lo, hi;
    } fields[] = {{SAMPLING_TEMPERATURE, "temperature", h->temperature, 0, 100},
                  {SAMPLING_TOP_P, "top_p", h->top_p, 0, 1},
                  {SAMPLING_TOP_K, "top_k", h->top_k, 0, 1 << 24},
                  {SAMPLING_MIN_P, "min_p", h->min_p, 0, 1},
                  {SAMPLING_REPEAT_PENALTY, "repeat_penalty", h->repeat_penalty, 0.01, 100}};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        int set = h->sampling_flags & fields[i].bit;
        double v = fields[i].value;
        if (set ? !(v >= fields[i].lo && v <= fields[i].hi) : v != 0) {
            snprintf(err, n, "the sampling default %s is %g, %s", fields[i].name, v,
                     set ? "out of its range" : "but sampling_flags does not give it");
            return -1;
        }
    }
    return 0;
}

// Version 8's experts: none before it; a router choosing from 1 to n_experts of them, in a
// pre-norm layer without feed-forward biases or an output norm.
static inline int check_experts(const FileHeader *h, char *err, size_t n) {
    if (h->version < 8 && (h->n_experts || h->n_experts_used || h->moe_flags || h->shared_dim)) {
        snprintf(err, n, "header bytes 240..255 (the experts) are not zero in a version %u file", h->version);
        return -1;
    }
    if (check_range("n_experts", h->n_experts, 0, 1024, err, n)) return -1;
    if (check_range("n_experts_used", h->n_experts_used, h->n_experts ? 1 : 0, h->n_experts, err, n)) return -1;
    if (check_range("moe_flags", h->moe_flags, 0, h->n_experts ? MOE_ALL : 0, err, n)) return -1;
    if (check_range("shared_dim", h->shared_dim, 0, h->n_experts ? 262144 : 0, err, n)) return -1;
    if (h->n_experts && ((h->bias_flags & BIAS_FFN) || h->post_norm || (h->arch_flags & ARCH_OUT_NORMS))) {
        snprintf(err, n,
                 "n_experts %u with feed-forward biases, post_norm or ARCH_OUT_NORMS, which no family with "
                 "experts has",
                 h->n_experts);
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
    if (h->weight_type == WEIGHTS_PER_MATRIX && h->version < 6) {
        snprintf(err, n, "weight_type 4 (a type per matrix) in a version %u file; it came with version 6", h->version);
        return -1;
    }
    if (check_sampling(h, err, n)) return -1;
    if (check_experts(h, err, n)) return -1;
    int q8 = h->weight_type == WEIGHTS_Q8_0;
    if (check_range("group_size", h->group_size, q8, q8 ? 65536 : 0, err, n)) return -1;
    // a group never crosses a row, so it divides the width of every quantised matrix's rows
    uint32_t widths[] = {h->dim, h->n_heads * h->head_dim, h->hidden_dim, h->shared_dim ? h->shared_dim : h->dim};
    for (int i = 0; i < 4 && h->group_size; i++)
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
        .sampling_flags = (int)h->sampling_flags, .temperature = h->temperature, .top_p = h->top_p,
        .top_k = (int)h->top_k, .min_p = h->min_p, .repeat_penalty = h->repeat_penalty,
        .n_experts = (int)h->n_experts, .n_experts_used = (int)h->n_experts_used, .moe_flags = (int)h->moe_flags,
        .shared_dim = (int)h->shared_dim,
    };
    // clang-format on
    return 0;
}

// The header that describes c, in the newest version (the one every file is written in); the
// caller fills in the tokenizer's, chat section's and weights' offsets and the checksum.
static inline FileHeader header_from_config(const Config *c) {
    FileHeader h = {.version = MODEL_VERSION,
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
                    .sampling_flags = (uint32_t)c->sampling_flags,
                    .temperature = c->temperature,
                    .top_p = c->top_p,
                    .top_k = (uint32_t)c->top_k,
                    .min_p = c->min_p,
                    .repeat_penalty = c->repeat_penalty,
                    .n_experts = (uint32_t)c->n_experts,
                    .n_experts_used = (uint32_t)c->n_experts_used,
                    .moe_flags = (uint32_t)c->moe_flags,
                    .shared_dim = (uint32_t)c->shared_dim,
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

#endif
