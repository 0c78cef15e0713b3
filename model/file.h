// model/file.h: the attn.c model file (docs/FORMAT.md) on model/header.h's header and Config:
// the named weight tensors carved out of one block, mapping a file to read in place, and
// writing one whole. It computes nothing and knows no command line: every error comes back as
// a one-line reason for the caller to report.
#ifndef ATTN_MODEL_FILE_H
#define ATTN_MODEL_FILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <zlib.h>
#include "../io/files.h"
#include "../tokenizer.h"
#include "checksum.h"
#include "header.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model file is little-endian and is mapped as is: build on a little-endian machine"
#endif

// ----------------------------------------------------------------------------
// Weights: named pointers into one block laid out as docs/FORMAT.md lists the tensors.
// Absent tensors stay NULL. The same carving serves the mapped file (run) and the
// parameter and gradient allocations (train).

// A matrix [rows, cols] not in float32. Q8_0: int8 values and a float32 scale per group of gs
// weights in a row, W[r, c] = q[r, c] * s[r, c / gs]. bfloat16 or float16 (type): the 16-bit
// values in half, each widened to float32 exactly. A block type (BLOCK_*): each row cols /
// block blocks as GGUF stores them, the rows one after another in blocks. Every pointer is NULL
// for a float32 matrix.
typedef struct {
    const int8_t *q;
    const float *s;
    int gs;
    const uint16_t *half;
    const uint8_t *blocks;
    int type; // a matrix type: WEIGHTS_F32, _Q8_0, _BF16, _F16 or BLOCK_*
} QMat;

// The bytes of one row of cols values of a matrix in a block type (or float32, 16 bits).
static inline size_t row_bytes(int type, size_t cols) {
    return cols / matrix_types[type].block * matrix_types[type].block_bytes;
}

// Rows [r0, ...) of matrix m, whose rows hold n_in values: one expert's part of a layer's w1, w3 or w2.
static inline QMat qmat_rows_from(QMat m, size_t r0, int n_in) {
    if (m.q) m.q += r0 * n_in, m.s += r0 * (n_in / m.gs);
    if (m.half) m.half += r0 * n_in;
    if (m.blocks) m.blocks += r0 * row_bytes(m.type, n_in);
    return m;
}

// One layer's tensors; q = n_heads * head_dim, kv = n_kv_heads * head_dim, b* and *_b are
// biases, NULL where the config has none. In a Q8_0 file the matrices are in the QMat fields
// and their float pointers stay NULL.
typedef struct {
    float *attn_norm_w, *attn_norm_b; // (dim)
    float *wq, *bq;                   // (q, dim), (q)
    float *wk, *bk;                   // (kv, dim), (kv)
    float *wv, *bv;                   // (kv, dim), (kv)
    float *q_norm_w, *k_norm_w;       // (head_dim): ARCH_QK_NORM only; (q_dim), (kv_dim): QK_NORM_WHOLE
    float *wo, *bo;                   // (dim, q), (dim)
    float *attn_out_norm_w;           // (dim): ARCH_OUT_NORMS only
    float *ffn_norm_w, *ffn_norm_b;   // (dim)
    float *router;                    // (n_experts, dim): experts only
    float *shared_gate;               // (dim): the shared expert's gate, shared_dim only
    float *w1, *b1;                   // (hidden_dim, dim), (hidden_dim); experts: (n_experts * hidden_dim, dim)
    float *w3, *b3;                   // (hidden_dim, dim), (hidden_dim): SwiGLU's and GeGLU's gate only; as w1
    float *w2, *b2;                   // (dim, hidden_dim), (dim); experts: (n_experts * dim, hidden_dim)
    float *ffn_out_norm_w;            // (dim): ARCH_OUT_NORMS only
    float *shared_w1, *shared_w3;     // (shared_dim, dim): the shared expert, shared_dim only (w3 with a gate)
    float *shared_w2;                 // (dim, shared_dim)
    QMat qwq, qwk, qwv, qwo, qw1, qw3, qw2, qshared_w1, qshared_w3, qshared_w2;
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
    int ln = c->norm_kind == NORM_LAYER, swiglu = ffn_is_gated(c->ffn_kind);
    int qk_norm = c->arch_flags & ARCH_QK_NORM, out_norms = c->arch_flags & ARCH_OUT_NORMS;
    int whole = c->arch_flags & ARCH_QK_NORM_WHOLE;
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
    // float16 file its 16-bit values; in a file of a type per matrix, as the next entry of the
    // type table says
    int typed = 0; // the type table's entries taken so far
#define MATRIX(field, qfield, present, rows, cols)                                                                     \
    do {                                                                                                               \
        size_t n_ = (present) ? (size_t)(rows) * (size_t)(cols) : 0;                                                   \
        int type_ = c->weight_type;                                                                                    \
        if (type_ == WEIGHTS_PER_MATRIX)                                                                               \
            type_ = (present) ? matrix_type_of_ggml(c->type_table[typed++]) : WEIGHTS_F32;                             \
        (qfield) = (QMat){.type = type_};                                                                              \
        if (is_block_type(type_)) {                                                                                    \
            (qfield).blocks = (present) && base ? (const uint8_t *)((char *)base + off) : NULL;                        \
            off += align_up((size_t)(rows)*row_bytes(type_, (size_t)(cols)));                                          \
            (field) = NULL;                                                                                            \
        } else if (type_ == WEIGHTS_Q8_0) {                                                                            \
            (qfield).q = (present) && base ? (const int8_t *)((char *)base + off) : NULL;                              \
            off += align_up(n_);                                                                                       \
            (qfield).s = (present) && base ? (const float *)((char *)base + off) : NULL;                               \
            off += align_up(n_ / c->group_size * sizeof(float));                                                       \
            (qfield).gs = c->group_size;                                                                               \
            (field) = NULL;                                                                                            \
        } else if (type_ != WEIGHTS_F32) {                                                                             \
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
        TENSOR(L->q_norm_w, qk_norm, whole ? q : c->head_dim, 1);
        TENSOR(L->k_norm_w, qk_norm, whole ? kv : c->head_dim, 1);
        MATRIX(L->wo, L->qwo, 1, c->dim, q);
        TENSOR(L->bo, c->bias_flags & BIAS_ATTN_OUT, c->dim, 1);
        TENSOR(L->attn_out_norm_w, out_norms, c->dim, 1);
        TENSOR(L->ffn_norm_w, 1, c->dim, 1);
        TENSOR(L->ffn_norm_b, ln, c->dim, 1);
        TENSOR(L->router, c->n_experts, c->n_experts, c->dim);
        TENSOR(L->shared_gate, c->shared_dim, c->dim, 1);
        MATRIX(L->w1, L->qw1, 1, ffn_rows(c), c->dim);
        TENSOR(L->b1, c->bias_flags & BIAS_FFN, c->hidden_dim, 1);
        MATRIX(L->w3, L->qw3, swiglu, ffn_rows(c), c->dim);
        TENSOR(L->b3, swiglu && (c->bias_flags & BIAS_FFN), c->hidden_dim, 1);
        MATRIX(L->w2, L->qw2, 1, ffn_rows(c) / c->hidden_dim * c->dim, c->hidden_dim);
        TENSOR(L->b2, c->bias_flags & BIAS_FFN, c->dim, 1);
        TENSOR(L->ffn_out_norm_w, out_norms, c->dim, 1);
        MATRIX(L->shared_w1, L->qshared_w1, c->shared_dim, c->shared_dim, c->dim);
        MATRIX(L->shared_w3, L->qshared_w3, c->shared_dim && swiglu, c->shared_dim, c->dim);
        MATRIX(L->shared_w2, L->qshared_w2, c->shared_dim, c->dim, c->shared_dim);
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
    int version; // the file's format version: a chat section's layout depends on it
    void *map;
    size_t map_bytes;
} Model;

// The matrices a type table lists, in FORMAT.md's order: tok_embedding, each layer's wq, wk,
// wv, wo, w1, w3 (with a gate), w2 and with a shared expert its shared_w1, shared_w3 (with a
// gate), shared_w2, then the classifier unless tied.
static inline int matrix_layer_count(const Config *c) {
    int gated = ffn_is_gated(c->ffn_kind);
    return 6 + gated + (c->shared_dim ? 2 + gated : 0);
}
static inline int matrix_count(const Config *c) {
    return 1 + c->n_layers * matrix_layer_count(c) + !c->tied_classifier;
}

// Matrix k of that list: its name into name, and its row length (columns) returned.
static inline int matrix_slot(const Config *c, int k, char *name, size_t n) {
    int gated = ffn_is_gated(c->ffn_kind), per_layer = matrix_layer_count(c);
    if (k == 0 || k > c->n_layers * per_layer) {
        snprintf(name, n, "%s", k ? "classifier" : "tok_embedding");
        return c->dim;
    }
    static const char *const gated_names[] = {"wq", "wk", "wv",        "wo",        "w1",
                                              "w3", "w2", "shared_w1", "shared_w3", "shared_w2"};
    static const char *const plain_names[] = {"wq", "wk", "wv", "wo", "w1", "w2", "shared_w1", "shared_w2"};
    int l = (k - 1) / per_layer, j = (k - 1) % per_layer;
    const char *which = gated ? gated_names[j] : plain_names[j];
    snprintf(name, n, "layers.%d.%s", l, which);
    if (!strcmp(which, "wo")) return c->n_heads * c->head_dim;
    if (!strcmp(which, "shared_w2")) return c->shared_dim;
    return strcmp(which, "w2") ? c->dim : c->hidden_dim;
}

// A version 6 file's type table (weight_type WEIGHTS_PER_MATRIX): where the header says, one
// known type per matrix, each row whole blocks; then c->type_table points at it.
static inline int check_type_table(const FileHeader *h, Config *c, const void *data, size_t size, char *err, size_t n) {
    uint64_t at = h->tok_offset + h->tok_bytes + h->chat_bytes;
    int want = matrix_count(c);
    if (h->n_matrix_types != (uint32_t)want) {
        snprintf(err, n, "n_matrix_types is %u but the config has %d matrices", h->n_matrix_types, want);
        return -1;
    }
    if (h->types_offset != at || h->n_matrix_types > size - at) {
        snprintf(err, n,
                 "type table (%u bytes at %llu) does not follow the tokenizer and chat section at %llu inside "
                 "the file (truncated?)",
                 h->n_matrix_types, (unsigned long long)h->types_offset, (unsigned long long)at);
        return -1;
    }
    const uint8_t *table = (const uint8_t *)data + at;
    for (int k = 0; k < want; k++) {
        char name[48];
        int cols = matrix_slot(c, k, name, sizeof name), type = matrix_type_of_ggml(table[k]);
        if (type < 0) {
            char known[256] = "";
            for (int t = 0, used = 0; t < MATRIX_TYPES; t++)
                if (matrix_types[t].block && used < (int)sizeof known)
                    used += snprintf(known + used, sizeof known - used, "%s%s %d", used ? ", " : "",
                                     matrix_types[t].name, matrix_types[t].ggml_id);
            snprintf(err, n, "tensor %s has type %u, which this build does not know (%s)", name, table[k], known);
            return -1;
        }
        if (cols % matrix_types[type].block) {
            snprintf(err, n, "tensor %s is %s, whose rows of %d values are not whole blocks of %d", name,
                     matrix_types[type].name, cols, matrix_types[type].block);
            return -1;
        }
    }
    c->type_table = table;
    return 0;
}

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
    if (h.version < 5 && h.checksum) {
        snprintf(err, n, "header bytes 200..203 (the checksum) are not zero in a version %u file", h.version);
        return -1;
    }
    if (h.version < 6 && (h.n_matrix_types || h.types_offset)) {
        snprintf(err, n, "header bytes 204..215 (the type table) are not zero in a version %u file", h.version);
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
    uint64_t sections_end = tok_end + h.chat_bytes;
    if (h.weight_type == WEIGHTS_PER_MATRIX) {
        if (check_type_table(&h, c, data, size, err, n)) return -1;
        sections_end += h.n_matrix_types;
    } else if (h.n_matrix_types || h.types_offset) {
        snprintf(err, n, "a type table (n_matrix_types %u, types_offset %llu) without weight_type 4", h.n_matrix_types,
                 (unsigned long long)h.types_offset);
        return -1;
    }
    if (h.weights_offset % MODEL_ALIGN || h.weights_offset < sections_end || h.weights_offset > size) {
        snprintf(err, n,
                 "weights_offset %llu is not a multiple of %d after the tokenizer, chat section and type table and "
                 "inside the file (truncated?)",
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

// What a checkpoint that tools/convert.py reads looks like from its first bytes (head, got of
// them, of a file of size bytes), or NULL: a user who gives one to ./run is told to convert it.
static inline const char *checkpoint_kind(const unsigned char *head, size_t got, size_t size) {
    if (got >= 4 && !memcmp(head, "GGUF", 4)) return "a GGUF file";
    if (got >= 4 && !memcmp(head, "PK\3\4", 4)) return "a PyTorch checkpoint (a zip archive)";
    if (got >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return "a pickle (an old PyTorch checkpoint)";
    if (got >= 4 && !memcmp(head, "ak42", 4)) return "a llama2.c checkpoint";
    // safetensors: a u64 length, then that many bytes of a JSON object
    uint64_t json = 0;
    for (int i = 7; got >= 9 && i >= 0; i--) json = json << 8 | head[i];
    if (got >= 9 && head[8] == '{' && json >= 2 && json <= size - 8) return "a safetensors file";
    return NULL;
}

static inline int model_open(Model *m, const char *path, char *err, size_t n) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_NONBLOCK); // a FIFO with no writer must not hang the open
    if (fd < 0) {
        snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int stat_ok = !fstat(fd, &st);
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        char config[4200];
        snprintf(config, sizeof config, "%s/config.json", path);
        if (stat_ok && S_ISDIR(st.st_mode) && access(config, F_OK) == 0) // a Hugging Face folder
            snprintf(
                err, n,
                "%s: a directory, not a model file; convert it with /usr/bin/python3 tools/convert.py %s model.bin",
                path, path);
        else if (stat_ok && S_ISDIR(st.st_mode)) snprintf(err, n, "%s: a directory, not a model file", path);
        else snprintf(err, n, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    unsigned char head[16];
    ssize_t got = pread(fd, head, sizeof head, 0);
    const char *kind = got >= 4 && memcmp(head, MODEL_MAGIC, 4) ? checkpoint_kind(head, (size_t)got, size) : NULL;
    if (got >= 8 && !memcmp(head, STATE_MAGIC, 8)) {
        snprintf(err, n, "%s: ./train's resume state, not a model file: the model is the file it is named after", path);
        close(fd);
        return -1;
    }
    if (kind) {
        snprintf(err, n,
                 "%s: %s, not an attn.c model file; convert it with /usr/bin/python3 tools/convert.py %s model.bin",
                 path, kind, path);
        close(fd);
        return -1;
    }
    char why[256];
    if (size < MODEL_HEADER_SIZE) {
        model_check_layout("", size, &m->config, why, sizeof why);
        snprintf(err, n, "%s: %s", path, why);
        close(fd);
        return -1;
    }
    void *map = map_file(fd, size);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, n, "%s: cannot map: %s", path, strerror(map_errno));
        return -1;
    }
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
    m->version = (int)h->version;
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
    const void *tok_blob, *chat, *type_table;
    const float *weights;
} ModelFileParts;

static const char model_zeros[MODEL_ALIGN];

static inline size_t model_padding(const FileHeader *h) {
    return h->weights_offset - MODEL_HEADER_SIZE - h->tok_bytes - h->chat_bytes - h->n_matrix_types;
}

static inline void write_model_parts(Sink *s, const void *ctx) {
    const ModelFileParts *p = ctx;
    sink_write(s, &p->h, sizeof p->h);
    sink_write(s, p->tok_blob, p->h.tok_bytes);
    sink_write(s, p->chat, p->h.chat_bytes);
    sink_write(s, p->type_table, p->h.n_matrix_types);
    sink_write(s, model_zeros, model_padding(&p->h));
    sink_write(s, p->weights, p->h.weights_bytes);
}

// The checksum of the parts as write_model_parts lays them out, p->h.checksum being zero.
static inline uint32_t model_parts_checksum(const ModelFileParts *p) {
    uLong crc = crc32_z(0, Z_NULL, 0);
    crc = crc32_z(crc, (const Bytef *)&p->h, sizeof p->h);
    crc = crc32_z(crc, p->tok_blob, p->h.tok_bytes);
    if (p->h.chat_bytes) crc = crc32_z(crc, p->chat, p->h.chat_bytes);
    if (p->h.n_matrix_types) crc = crc32_z(crc, p->type_table, p->h.n_matrix_types);
    crc = crc32_z(crc, (const Bytef *)model_zeros, model_padding(&p->h));
    return (uint32_t)crc32_z(crc, (const Bytef *)p->weights, p->h.weights_bytes);
}

// Writes a whole model file of the newest version, atomically: header (with its checksum),
// tokenizer blob, the chat section if chat_bytes (in version 5's layout, chat/chat.h), c's type
// table if it has one (WEIGHTS_PER_MATRIX), then the weights block as carve_weights lays it out
// (padding included). Returns 0, or -1 with err.
static inline int model_save_chat(const char *path, const Config *c, const void *tok_blob, size_t tok_bytes,
                                  const void *chat, size_t chat_bytes, const float *weights, char *err, size_t n) {
    ModelFileParts p = {header_from_config(c), tok_blob, chat, c->type_table, weights};
    p.h.tok_offset = MODEL_HEADER_SIZE;
    p.h.tok_bytes = tok_bytes;
    p.h.chat_offset = chat_bytes ? MODEL_HEADER_SIZE + tok_bytes : 0;
    p.h.chat_bytes = chat_bytes;
    p.h.n_matrix_types = c->weight_type == WEIGHTS_PER_MATRIX ? (uint32_t)matrix_count(c) : 0;
    p.h.types_offset = p.h.n_matrix_types ? MODEL_HEADER_SIZE + tok_bytes + chat_bytes : 0;
    p.h.weights_offset = align_up(MODEL_HEADER_SIZE + tok_bytes + chat_bytes + p.h.n_matrix_types);
    p.h.weights_bytes = carve_weights(c, NULL, NULL);
    p.h.checksum = model_parts_checksum(&p);
    return write_atomic(path, write_model_parts, &p, err, n);
}

static inline int model_save(const char *path, const Config *c, const void *tok_blob, size_t tok_bytes,
                             const float *weights, char *err, size_t n) {
    return model_save_chat(path, c, tok_blob, tok_bytes, NULL, 0, weights, err, n);
}

#endif
