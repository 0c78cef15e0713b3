// model.h: the attn.c model file, its config and mapped weights, and the forward kernels.
// Header-only: every function is static, so run.c, train.c and the tests each compile the
// same code. It knows no command line and no training; docs/FORMAT.md is the format's spec.
#ifndef ATTN_MODEL_H
#define ATTN_MODEL_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <cblas.h>
#include "tokenizer.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the model file is little-endian and is mapped as is: build on a little-endian machine"
#endif

// ----------------------------------------------------------------------------
// The file header (docs/FORMAT.md)

#define MODEL_MAGIC "ATTN"
#define MODEL_VERSION 2 // 1: float32 only; 2 adds weight_type and group_size
#define MODEL_HEADER_SIZE 256
#define MODEL_ALIGN 64

enum { POS_ROPE, POS_LEARNED, POS_SINUSOIDAL, POS_KINDS };
enum { FFN_SWIGLU, FFN_GELU_TANH, FFN_GELU_ERF, FFN_RELU, FFN_KINDS };
enum { NORM_RMS, NORM_LAYER, NORM_KINDS };
enum { BIAS_QKV = 1, BIAS_ATTN_OUT = 2, BIAS_FFN = 4, BIAS_ALL = 7 };
enum { WEIGHTS_F32, WEIGHTS_Q8_0, WEIGHT_TYPES };
// tok_kind and tok_flags take tokenizer.h's TOK_* and TOKF_* values.
#define TOKF_ALL (TOKF_DUMMY_PREFIX | TOKF_ADD_BOS | TOKF_BOS_STOPS)

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
    uint8_t reserved[MODEL_HEADER_SIZE - 144];
} FileHeader;
_Static_assert(sizeof(FileHeader) == MODEL_HEADER_SIZE, "header is 256 bytes");
_Static_assert(offsetof(FileHeader, tok_offset) == 104, "header layout follows docs/FORMAT.md");

// The config is the header's numbers as ints, checked against the limits below first.
typedef struct {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, seq_len;
    int pos_kind, ffn_kind, norm_kind, post_norm, final_norm, bias_flags, tied_classifier;
    int rope_dims, tok_kind, tok_flags, bos_id, eos_id;
    int weight_type, group_size; // WEIGHTS_*; weights per Q8_0 scale (0 for float32)
    float rope_theta, norm_eps, embed_scale;
} Config;

static inline size_t align_up(size_t n) { return (n + MODEL_ALIGN - 1) & ~(size_t)(MODEL_ALIGN - 1); }

// Limits keep every size product far below 2^63, so the arithmetic after validation
// cannot overflow; they are still generous for any model a CPU can run.
static inline int check_range(const char *name, int64_t v, int64_t lo, int64_t hi, char *err, size_t n) {
    if (v >= lo && v <= hi) return 0;
    snprintf(err, n, "%s is %lld, outside [%lld, %lld]", name, (long long)v, (long long)lo, (long long)hi);
    return -1;
}

static inline int config_from_header(const FileHeader *h, Config *c, char *err, size_t n) {
    struct { const char *name; uint32_t v; int64_t lo, hi; } f[] = {
        {"dim", h->dim, 1, 65536},           {"hidden_dim", h->hidden_dim, 1, 262144},
        {"n_layers", h->n_layers, 1, 1024},  {"n_heads", h->n_heads, 1, 1024},
        {"n_kv_heads", h->n_kv_heads, 1, 1024}, {"head_dim", h->head_dim, 1, 4096},
        {"vocab_size", h->vocab_size, 1, 1 << 24}, {"seq_len", h->seq_len, 1, 1 << 20},
        {"pos_kind", h->pos_kind, 0, POS_KINDS - 1}, {"ffn_kind", h->ffn_kind, 0, FFN_KINDS - 1},
        {"norm_kind", h->norm_kind, 0, NORM_KINDS - 1}, {"post_norm", h->post_norm, 0, 1},
        {"final_norm", h->final_norm, 0, 1}, {"bias_flags", h->bias_flags, 0, BIAS_ALL},
        {"tied_classifier", h->tied_classifier, 0, 1}, {"rope_dims", h->rope_dims, 0, h->head_dim},
        {"tok_kind", h->tok_kind, 0, TOK_BYTE_BPE}, {"tok_flags", h->tok_flags, 0, TOKF_ALL},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (check_range(f[i].name, f[i].v, f[i].lo, f[i].hi, err, n)) return -1;
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
    if (!(h->norm_eps > 0 && h->norm_eps < 1)) { snprintf(err, n, "norm_eps %g is not in (0, 1)", h->norm_eps); return -1; }
    if (h->pos_kind == POS_ROPE && !(isfinite(h->rope_theta) && h->rope_theta > 0)) {
        snprintf(err, n, "rope_theta %g is not a positive number", h->rope_theta);
        return -1;
    }
    if (!isfinite(h->embed_scale)) { snprintf(err, n, "embed_scale is not finite"); return -1; }
    if (check_range("bos_id", h->bos_id, -1, (int64_t)h->vocab_size - 1, err, n)) return -1;
    if (check_range("eos_id", h->eos_id, -1, (int64_t)h->vocab_size - 1, err, n)) return -1;
    if (h->version < 2 && (h->weight_type || h->group_size)) {
        snprintf(err, n, "reserved header bytes 136..143 are not zero (a version 1 file has no weight_type)");
        return -1;
    }
    if (check_range("weight_type", h->weight_type, 0, WEIGHT_TYPES - 1, err, n)) return -1;
    if (check_range("group_size", h->group_size, h->weight_type != WEIGHTS_F32, h->weight_type == WEIGHTS_F32 ? 0 : 65536,
                    err, n))
        return -1;
    // a group never crosses a row, so it divides the width of every quantised matrix's rows
    uint32_t widths[] = {h->dim, h->n_heads * h->head_dim, h->hidden_dim};
    for (int i = 0; i < 3 && h->group_size; i++)
        if (widths[i] % h->group_size) {
            snprintf(err, n, "group_size %u does not divide the rows of width %u", h->group_size, widths[i]);
            return -1;
        }
    *c = (Config){
        .dim = h->dim, .hidden_dim = h->hidden_dim, .n_layers = h->n_layers, .n_heads = h->n_heads,
        .n_kv_heads = h->n_kv_heads, .head_dim = h->head_dim, .vocab_size = h->vocab_size,
        .seq_len = h->seq_len, .pos_kind = h->pos_kind, .ffn_kind = h->ffn_kind,
        .norm_kind = h->norm_kind, .post_norm = h->post_norm, .final_norm = h->final_norm,
        .bias_flags = h->bias_flags, .tied_classifier = h->tied_classifier, .rope_dims = h->rope_dims,
        .tok_kind = h->tok_kind, .tok_flags = h->tok_flags, .bos_id = h->bos_id, .eos_id = h->eos_id,
        .weight_type = h->weight_type, .group_size = h->group_size,
        .rope_theta = h->rope_theta, .norm_eps = h->norm_eps, .embed_scale = h->embed_scale,
    };
    return 0;
}

static inline FileHeader header_from_config(const Config *c) {
    FileHeader h = {
        .version = c->weight_type == WEIGHTS_F32 ? 1 : 2, .header_size = MODEL_HEADER_SIZE, // readable by older builds
        .weight_type = c->weight_type, .group_size = c->group_size,
        .dim = c->dim, .hidden_dim = c->hidden_dim, .n_layers = c->n_layers, .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .vocab_size = c->vocab_size,
        .seq_len = c->seq_len, .pos_kind = c->pos_kind, .rope_theta = c->rope_theta,
        .ffn_kind = c->ffn_kind, .norm_kind = c->norm_kind, .norm_eps = c->norm_eps,
        .post_norm = c->post_norm, .final_norm = c->final_norm, .bias_flags = c->bias_flags,
        .tied_classifier = c->tied_classifier, .embed_scale = c->embed_scale, .rope_dims = c->rope_dims,
        .tok_kind = c->tok_kind, .tok_flags = c->tok_flags, .bos_id = c->bos_id, .eos_id = c->eos_id,
    };
    memcpy(h.magic, MODEL_MAGIC, 4);
    return h;
}

// ----------------------------------------------------------------------------
// Weights: named pointers into one block laid out as docs/FORMAT.md lists the tensors.
// Absent tensors stay NULL. The same carving serves the mapped file (run) and the
// parameter and gradient allocations (train).

// A Q8_0 matrix [rows, cols]: int8 values and a float32 scale per group of gs weights in a
// row, W[r, c] = q[r, c] * s[r, c / gs]. q is NULL for a float32 matrix.
typedef struct {
    const int8_t *q;
    const float *s;
    int gs;
} QMat;

// In a Q8_0 file the matrices are in the QMat fields and their float pointers stay NULL.
typedef struct {
    float *attn_norm_w, *attn_norm_b, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    float *ffn_norm_w, *ffn_norm_b, *w1, *b1, *w3, *b3, *w2, *b2;
    QMat qwq, qwk, qwv, qwo, qw1, qw3, qw2;
} LayerWeights;

typedef struct {
    float *tok_embedding, *pos_embedding, *final_norm_w, *final_norm_b, *classifier;
    QMat qtok_embedding, qclassifier;
    LayerWeights *layers; // n_layers of them, owned by the Weights
} Weights;

// Walks the tensor list once: with base == NULL it only counts (and w may be NULL). Returns
// the block's size in bytes, every tensor padded to MODEL_ALIGN. Validated configs keep it
// below 2^50, so nothing here overflows.
static inline size_t carve_weights(const Config *c, float *base, Weights *w) {
    size_t off = 0;
    int q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    int ln = c->norm_kind == NORM_LAYER, swiglu = c->ffn_kind == FFN_SWIGLU;
    Weights scratch;
    LayerWeights scratch_layer;
    Weights *W = w ? w : &scratch;
#define TENSOR(field, present, rows, cols) do { \
        size_t bytes_ = (present) ? (size_t)(rows) * (size_t)(cols) * sizeof(float) : 0; \
        (field) = (present) && base ? (float *)((char *)base + off) : NULL; \
        off += align_up(bytes_); \
    } while (0)
    // a matrix: float32, or in a Q8_0 file its int8 values, then its scales
#define MATRIX(field, qfield, present, rows, cols) do { \
        if (c->weight_type == WEIGHTS_Q8_0) { \
            size_t n_ = (present) ? (size_t)(rows) * (size_t)(cols) : 0; \
            (qfield).q = (present) && base ? (const int8_t *)((char *)base + off) : NULL; \
            off += align_up(n_); \
            (qfield).s = (present) && base ? (const float *)((char *)base + off) : NULL; \
            off += align_up(n_ / c->group_size * sizeof(float)); \
            (qfield).gs = c->group_size; \
            (field) = NULL; \
        } else { \
            TENSOR(field, present, rows, cols); \
        } \
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
        MATRIX(L->wo, L->qwo, 1, c->dim, q);
        TENSOR(L->bo, c->bias_flags & BIAS_ATTN_OUT, c->dim, 1);
        TENSOR(L->ffn_norm_w, 1, c->dim, 1);
        TENSOR(L->ffn_norm_b, ln, c->dim, 1);
        MATRIX(L->w1, L->qw1, 1, c->hidden_dim, c->dim);
        TENSOR(L->b1, c->bias_flags & BIAS_FFN, c->hidden_dim, 1);
        MATRIX(L->w3, L->qw3, swiglu, c->hidden_dim, c->dim);
        TENSOR(L->b3, swiglu && (c->bias_flags & BIAS_FFN), c->hidden_dim, 1);
        MATRIX(L->w2, L->qw2, 1, c->dim, c->hidden_dim);
        TENSOR(L->b2, c->bias_flags & BIAS_FFN, c->dim, 1);
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

static inline void weights_free(Weights *w) { free(w->layers); w->layers = NULL; }

// ----------------------------------------------------------------------------
// Opening a model file: map it read-only, check everything, then point into it.

typedef struct {
    Config config;
    Weights weights;
    const void *tok_blob; // tokenizer bytes, inside the mapping
    size_t tok_bytes;
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
    if (h.version < 1) { snprintf(err, n, "format version %u is unknown", h.version); return -1; }
    if (h.header_size != MODEL_HEADER_SIZE) {
        snprintf(err, n, "header_size is %u, expected %d", h.header_size, MODEL_HEADER_SIZE);
        return -1;
    }
    for (size_t i = 0; i < sizeof h.reserved; i++)
        if (h.reserved[i]) {
            snprintf(err, n, "reserved header byte %zu is not zero (a newer format?)", offsetof(FileHeader, reserved) + i);
            return -1;
        }
    if (config_from_header(&h, c, err, n)) return -1;
    if (h.tok_offset != MODEL_HEADER_SIZE) {
        snprintf(err, n, "tok_offset is %llu, expected %d", (unsigned long long)h.tok_offset, MODEL_HEADER_SIZE);
        return -1;
    }
    if (h.tok_bytes > size - MODEL_HEADER_SIZE) {
        snprintf(err, n, "truncated: tok_bytes (%llu) runs past the end of the %zu-byte file", (unsigned long long)h.tok_bytes, size);
        return -1;
    }
    if (h.weights_offset % MODEL_ALIGN || h.weights_offset < h.tok_offset + h.tok_bytes || h.weights_offset > size) {
        snprintf(err, n, "weights_offset %llu is not a multiple of %d after the tokenizer and inside the file (truncated?)",
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
    if (fd < 0) { snprintf(err, n, "%s: cannot open: %s", path, strerror(errno)); return -1; }
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
    if (map == MAP_FAILED) { snprintf(err, n, "%s: cannot map: %s", path, strerror(errno)); return -1; }
    // A file the page cache does not hold yet is then read into 2 MiB folios, which the mapping
    // gets as 2 MiB pages: fewer TLB misses, one-token steps 4-15 % faster (README). Only a
    // hint; a file already cached stays in the folios it has.
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

// Files are written whole or not at all: to PATH.tmp in the same directory, flushed to disk,
// renamed over PATH, and the directory synced so that the rename itself is durable. A crash,
// a kill -9 or a full disk at any moment leaves the previous file or the new one.
typedef struct {
    int fd, err; // the first write error sticks
} Sink;

static inline void sink_write(Sink *s, const void *p, size_t n) {
    const char *b = p;
    while (n && !s->err) {
        ssize_t w = write(s->fd, b, n);
        if (w < 0) {
            if (errno != EINTR) s->err = errno;
            continue;
        }
        b += w;
        n -= (size_t)w;
    }
}

typedef void (*SinkWriter)(Sink *s, const void *ctx);

// Returns 0, or -1 with a one-line reason in err; the file at path is untouched on failure.
static inline int write_atomic(const char *path, SinkWriter fn, const void *ctx, char *err, size_t n) {
    size_t len = strlen(path) + 5;
    char *tmp = malloc(len), *dir = strdup(path);
    if (!tmp || !dir) {
        snprintf(err, n, "%s: out of memory", path);
        free(tmp);
        free(dir);
        return -1;
    }
    snprintf(tmp, len, "%s.tmp", path);
    Sink s = {open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644), 0};
    if (s.fd < 0) {
        snprintf(err, n, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        free(dir);
        return -1;
    }
    fn(&s, ctx);
    if (!s.err && fsync(s.fd)) s.err = errno;
    // Written pages sit in the page cache in small folios, and ./run would map the model with
    // 4 KiB pages for as long as they stay; dropped once on disk, the file is read back by
    // ./run's mapping in 2 MiB ones (model_open).
#ifdef POSIX_FADV_DONTNEED
    if (!s.err) posix_fadvise(s.fd, 0, 0, POSIX_FADV_DONTNEED);
#endif
    if (close(s.fd) && !s.err) s.err = errno;
    if (!s.err && rename(tmp, path)) s.err = errno;
    if (s.err) {
        snprintf(err, n, "%s: cannot write: %s", path, strerror(s.err));
        unlink(tmp);
    } else {
        char *slash = strrchr(dir, '/');
        if (slash) *(slash == dir ? slash + 1 : slash) = 0;
        int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    free(tmp);
    free(dir);
    return s.err ? -1 : 0;
}

typedef struct {
    FileHeader h;
    const void *tok_blob;
    const float *weights;
} ModelFileParts;

static inline void write_model_parts(Sink *s, const void *ctx) {
    const ModelFileParts *p = ctx;
    static const char zeros[MODEL_ALIGN];
    sink_write(s, &p->h, sizeof p->h);
    sink_write(s, p->tok_blob, p->h.tok_bytes);
    sink_write(s, zeros, p->h.weights_offset - MODEL_HEADER_SIZE - p->h.tok_bytes);
    sink_write(s, p->weights, p->h.weights_bytes);
}

// Writes a whole model file, atomically: header, tokenizer blob, then the weights block as
// carve_weights lays it out (padding included). Returns 0, or -1 with err.
static inline int model_save(const char *path, const Config *c, const void *tok_blob, size_t tok_bytes,
                             const float *weights, char *err, size_t n) {
    ModelFileParts p = {header_from_config(c), tok_blob, weights};
    p.h.tok_offset = MODEL_HEADER_SIZE;
    p.h.tok_bytes = tok_bytes;
    p.h.weights_offset = align_up(MODEL_HEADER_SIZE + tok_bytes);
    p.h.weights_bytes = carve_weights(c, NULL, NULL);
    return write_atomic(path, write_model_parts, &p, err, n);
}

// OpenMP threads that spin while they wait collapse when another process holds a core
// (generation fell from 44 to 15 tokens/s here with the second core busy), while sleeping
// waits cost a few percent on an idle machine. libgomp reads OMP_WAIT_POLICY only when it
// loads, so a program that wants passive waiting by default sets it and starts itself again.
// A user's own OMP_WAIT_POLICY is left alone.
static inline void prefer_passive_threads(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv); // returns only on failure: then run on as we are
}

// ----------------------------------------------------------------------------
// Kernels. Activations are row-major [T, C]; every kernel serves the batched prompt,
// the one-token step and training alike.

static inline void rmsnorm(float *out, const float *x, const float *w, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++) ss += xt[i] * xt[i];
        float r = 1.0f / sqrtf(ss / C + eps);
        for (int i = 0; i < C; i++) ot[i] = xt[i] * r * w[i];
    }
}

static inline void layernorm(float *out, const float *x, const float *w, const float *b, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        float mean = 0.0f, var = 0.0f;
#pragma omp simd reduction(+ : mean)
        for (int i = 0; i < C; i++) mean += xt[i];
        mean /= C;
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < C; i++) var += (xt[i] - mean) * (xt[i] - mean);
        float r = 1.0f / sqrtf(var / C + eps);
        for (int i = 0; i < C; i++) ot[i] = (xt[i] - mean) * r * w[i] + b[i];
    }
}

static inline float exp_vec(float x);
// Vectorised (exp_vec, SIMD reductions): attention runs it on every score row, and with
// libm's expf it was attention's largest cost in a training profile.
static inline void softmax(float *x, int n) {
    float max = x[0];
#pragma omp simd reduction(max : max)
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) { x[i] = exp_vec(x[i] - max); sum += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

// One row of W times x. The prompt path uses sgemm; a single token is bound by reading W
// once from memory, and this loop, split across threads by rows, streams it faster than
// OpenBLAS's sgemv here (bench/ measures both).
static inline float dot(const float *restrict a, const float *restrict b, int n) {
    int i = 0;
    float s = 0.0f;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    s = _mm_cvtss_f32(h);
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

// A row of a Q8_0 matrix times x: each group's products summed, then scaled. The int8
// weights become floats in registers, so a one-token step reads a quarter of the bytes of
// float32 weights, and x stays float32: the product is the dequantised weights' to float
// rounding. Tried instead, integer multiply-adds with AVX-512 VNNI (110M Llama, 2 threads,
// interleaved): x rounded to 8 bits per group, as llama.cpp and llama2.c's runq do, 10-25 %
// faster, but an input that lands within float noise of a rounding tie rounds either way and
// moves the logits by 1e-3 and more, so paths and the reference can no longer be held to each
// other; x held to 16 bits, 0-5 % faster. The step also reads its float32 KV cache (15 MB at
// position 200, beside 116 MB of weights).
static inline float dot_q8(const int8_t *restrict q, const float *restrict scale, const float *restrict x, int n,
                           int gs) {
    float s = 0.0f;
    int g = 0;
#if defined(__AVX512F__)
    if (gs % 16 == 0) {
        __m512 acc = _mm512_setzero_ps();
        for (; g < n; g += gs) {
            __m512 p0 = _mm512_setzero_ps(), p1 = _mm512_setzero_ps();
            int i = g;
            // This loop converts more than it loads, and keeps fewer reads in flight than the
            // float one; asking 2 KiB ahead read 16 against 18 GB/s on one core here.
            _mm_prefetch((const char *)(q + g + 2048), _MM_HINT_T0);
            for (; i + 32 <= g + gs; i += 32) {
                p0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))),
                                     _mm512_loadu_ps(x + i), p0);
                p1 = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i + 16)))),
                    _mm512_loadu_ps(x + i + 16), p1);
            }
            if (i < g + gs)
                p0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))),
                                     _mm512_loadu_ps(x + i), p0);
            acc = _mm512_fmadd_ps(_mm512_add_ps(p0, p1), _mm512_set1_ps(scale[g / gs]), acc);
        }
        s = _mm512_reduce_add_ps(acc);
    }
#elif defined(__AVX2__) && defined(__FMA__)
    if (gs % 8 == 0) {
        __m256 acc = _mm256_setzero_ps();
        for (; g < n; g += gs) {
            __m256 p = _mm256_setzero_ps();
            for (int i = g; i < g + gs; i += 8)
                p = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)))),
                                    _mm256_loadu_ps(x + i), p);
            acc = _mm256_fmadd_ps(p, _mm256_set1_ps(scale[g / gs]), acc);
        }
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        s = _mm_cvtss_f32(h);
    }
#endif
    for (; g < n; g += gs) { // other group sizes, and the portable build
        float p = 0.0f;
        for (int i = g; i < g + gs; i++) p += (float)q[i] * x[i];
        s += p * scale[g / gs];
    }
    return s;
}

// Rows [r0, r1) of a Q8_0 matrix with n_in columns as float32, into out: exactly the float
// weights W = q * scale.
static inline void dequantize_rows(float *out, const QMat *m, int n_in, size_t r0, size_t r1) {
    size_t groups = (size_t)n_in / m->gs;
    for (size_t r = r0; r < r1; r++) {
        const int8_t *q = m->q + r * n_in;
        const float *sc = m->s + r * groups;
        float *o = out + (r - r0) * n_in;
        for (size_t g = 0; g < groups; g++) // a scale per group: the inner loop vectorises
            for (int i = 0; i < m->gs; i++) o[g * m->gs + i] = (float)q[g * m->gs + i] * sc[g];
    }
}

// The chunk of a Q8_0 matrix a prompt's product dequantises at once: at most QCHUNK_FLOATS (or
// one row) per thread, few enough to stay in cache, enough rows for sgemm to run at speed.
#define QCHUNK_FLOATS ((size_t)1 << 18)
static inline size_t qchunk_floats(int n_in) { return (size_t)n_in > QCHUNK_FLOATS ? (size_t)n_in : QCHUNK_FLOATS; }

// Below this many multiply-adds a second thread costs more to wake than it saves.
#define PARALLEL_MIN_WORK (1 << 16)

// Products of one input with several matrices (q, k and v; w1 and w3), the nn.Linear
// convention: out[T, n_out] = x[T, n_in] · w[n_out, n_in]ᵀ (+ b). A sub-layer's output
// projection also adds out into residual (x, laid out as out): by each thread on its own
// features, so that no meeting of the threads comes between; and after the whole product,
// x + (W·in + b) as the reference rounds it, not as sgemm's beta = 1, which adds into x block
// by block of the inner dimension.
// A Q8_0 matrix (qw.q set, w NULL) meets many rows a chunk of it at a time, dequantised into
// wbuf, each chunk an sgemm.
typedef struct {
    float *out;
    const float *w, *b;
    int n_out;
    float *residual;
    QMat qw;
    float *wbuf;
} Linear;

// This thread's number in its parallel region and the region's size (0 and 1 outside one,
// or without OpenMP).
static inline int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

// This thread's share [*lo, *hi) of n items split evenly across nt threads.
static inline void share(size_t n, int id, int nt, size_t *lo, size_t *hi) {
    *lo = n * id / nt;
    *hi = n * (id + 1) / nt;
}

// Output features [lo, hi) of the matrices' concatenation: one thread's share when the caller
// splits the features across threads, each thread streaming its own rows of the weights. A
// single row (a one-token step) is bound by reading each weight once from memory, and this
// dot loop streams faster than OpenBLAS's sgemv here (bench/ measures both); more rows are
// sgemm on the share's columns.
static inline void matmul_part(const Linear *ls, int n, const float *x, int T, int n_in, size_t lo, size_t hi) {
    size_t base = 0;
    for (int j = 0; j < n && base < hi; base += ls[j++].n_out) {
        size_t n_out = ls[j].n_out, from = lo > base ? lo - base : 0, to = hi - base < n_out ? hi - base : n_out;
        if (from >= to) continue;
        float *out = ls[j].out;
        const float *w = ls[j].w, *b = ls[j].b;
        const QMat *qw = &ls[j].qw;
        if (T == 1) {
            for (size_t r = from; r < to; r++)
                out[r] = (qw->q ? dot_q8(qw->q + r * n_in, qw->s + r * (n_in / qw->gs), x, n_in, qw->gs)
                                : dot(w + r * n_in, x, n_in)) +
                         (b ? b[r] : 0.0f);
        } else {
            size_t chunk = qw->q ? qchunk_floats(n_in) / n_in : to - from;
            for (size_t r0 = from; r0 < to; r0 += chunk) {
                size_t r1 = to - r0 < chunk ? to : r0 + chunk;
                const float *wr = qw->q ? ls[j].wbuf : w + r0 * n_in;
                if (qw->q) dequantize_rows(ls[j].wbuf, qw, n_in, r0, r1);
                // The bias goes in first, as beta = 1's addend: that replaces the zeroing sgemm
                // does for beta = 0, and saves a pass over the output.
                if (b)
                    for (int t = 0; t < T; t++) memcpy(out + (size_t)t * n_out + r0, b + r0, (r1 - r0) * sizeof(float));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, (int)(r1 - r0), n_in, 1.0f, x, n_in, wr, n_in,
                            b ? 1.0f : 0.0f, out + r0, (int)n_out);
            }
        }
        if (ls[j].residual)
            for (int t = 0; t < T; t++)
                for (size_t i = from; i < to; i++) ls[j].residual[(size_t)t * n_out + i] += out[(size_t)t * n_out + i];
    }
}

// The whole product, split across threads when it pays (a caller outside a parallel region;
// inside one, as in ./train, the calling thread does it all).
static inline void matmul(float *out, const float *x, const float *w, const float *b, int T, int n_in, int n_out) {
    Linear l = {out, w, b, n_out, NULL, {0}, NULL}; // float32 only: ./train's weights
#pragma omp parallel if ((size_t)T * n_out * n_in >= PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t lo, hi;
        share((size_t)n_out, id, nt, &lo, &hi);
        matmul_part(&l, 1, x, T, n_in, lo, hi);
    }
}

// Rotates interleaved pairs of the first rope_dims of n_heads heads in each of T rows, stride
// floats apart (a thread may own only some of a row's heads); row t is at position pos0 + t.
// cos/sin come from a table [seq_len, rope_dims / 2] made once (rope_table).
static inline void rope(float *x, size_t stride, int T, int pos0, int n_heads, int head_dim, int rope_dims,
                        const float *cos_t, const float *sin_t) {
    int half = rope_dims / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(pos0 + t) * half, *s = sin_t + (size_t)(pos0 + t) * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + t * stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c[i] - b * s[i];
                v[2 * i + 1] = a * s[i] + b * c[i];
            }
        }
    }
}

// Angles in double so that long contexts keep their precision; stored as float.
static inline void rope_table(float *cos_t, float *sin_t, int seq_len, int rope_dims, float theta) {
    int half = rope_dims / 2;
    for (int p = 0; p < seq_len; p++)
        for (int i = 0; i < half; i++) {
            double freq = pow((double)theta, -2.0 * i / rope_dims), a = p * freq;
            cos_t[(size_t)p * half + i] = (float)cos(a);
            sin_t[(size_t)p * half + i] = (float)sin(a);
        }
}

// The attention's products, for training shapes small (a head's [T, head_dim] against its
// [P + T, head_dim] keys) and half masked: sgemm computes the masked half as well and packs
// its operands on every call. These skip whole masked blocks and keep a tile of the result in
// registers. GCC's and clang's vector types, so one source serves AVX-512, AVX2 and others.
typedef float vec16 __attribute__((vector_size(64)));
typedef float vec16u __attribute__((vector_size(64), aligned(4), may_alias)); // unaligned
typedef int32_t vec16i __attribute__((vector_size(64)));
#define VEC 16
#ifdef __clang__
#define SHUFFLE16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE16(a, b, ...) __builtin_shuffle(a, b, (vec16i){__VA_ARGS__})
#endif

enum { CAUSAL_NONE, CAUSAL_BELOW, CAUSAL_ABOVE };

// C[i, :16 NV] = alpha Σ_{k0 ≤ k < k1} A[i ai + k ak] B[k ldb, :16 NV] for R rows i, added to
// C with accumulate. R and NV are constants where it is called, so acc lives in registers.
static inline __attribute__((always_inline)) void product_tile(float *C, size_t ldc, const float *A, size_t ai,
                                                               size_t ak, const float *B, size_t ldb, int k0, int k1,
                                                               int R, int NV, float alpha, int accumulate) {
    vec16 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[r][v] = (vec16){0};
    for (int k = k0; k < k1; k++) {
        vec16 b[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = *(const vec16u *)(B + k * ldb + v * VEC);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            vec16 a = (vec16){0} + A[r * ai + k * ak];
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] += a * b[v];
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            vec16u *c = (vec16u *)(C + r * ldc + v * VEC);
            vec16 prior = accumulate ? (vec16)*c : (vec16){0};
            *c = prior + acc[r][v] * alpha;
        }
}

// C[i, :N] = alpha Σ_k A(i, k) B[k ldb, :N] (added to C with accumulate) for rows i < M, k < K
// cut by the mask: CAUSAL_BELOW takes k ≤ P + i, CAUSAL_ABOVE k ≥ i − P. A(i, k) is
// A[i lda + k], or A[k lda + i] with a_trans. A tile of rows takes the union of its rows'
// ranges, so A must be 0 outside each row's own.
// The k range [k0, k1) that rows i .. i + R − 1 take together under mask (causal_product).
static inline void causal_range(int mask, int P, int K, int i, int R, int *k0, int *k1) {
    *k0 = mask == CAUSAL_ABOVE && i - P > 0 ? i - P : 0;
    *k1 = mask == CAUSAL_BELOW && P + i + R < K ? P + i + R : K;
}

static void causal_product(float *C, size_t ldc, const float *A, size_t lda, int a_trans, const float *B,
                           size_t ldb, int M, int N, int K, int mask, int P, float alpha, int accumulate) {
    int c = 0;
    for (int nv = 4; nv >= 1; nv /= 2)
        for (; c + nv * VEC <= N; c += nv * VEC)
            for (int i = 0, R; i < M; i += R) {
                R = M - i >= 4 ? 4 : 1;
                int k0, k1;
                causal_range(mask, P, K, i, R, &k0, &k1);
                float *Ct = C + i * ldc + c;
                const float *At = a_trans ? A + i : A + i * lda, *Bt = B + c;
                // A's strides as constants in each inlined tile
#define TILE(R, NV)                                                                                   \
    (a_trans ? product_tile(Ct, ldc, At, 1, lda, Bt, ldb, k0, k1, R, NV, alpha, accumulate)            \
             : product_tile(Ct, ldc, At, lda, 1, Bt, ldb, k0, k1, R, NV, alpha, accumulate))
                if (R == 4) nv == 4 ? TILE(4, 4) : nv == 2 ? TILE(4, 2) : TILE(4, 1);
                else nv == 4 ? TILE(1, 4) : nv == 2 ? TILE(1, 2) : TILE(1, 1);
#undef TILE
            }
    for (int i = 0; i < M && c < N; i++) { // columns past the last 16 (head_dim not a multiple of 16)
        int k0, k1;
        causal_range(mask, P, K, i, 1, &k0, &k1);
        for (int j = c; j < N; j++) {
            float sum = 0.0f;
            for (int k = k0; k < k1; k++) sum += (a_trans ? A[k * lda + i] : A[i * lda + k]) * B[k * ldb + j];
            C[i * ldc + j] = accumulate ? C[i * ldc + j] + alpha * sum : alpha * sum;
        }
    }
}

#define VEC_KEYS 32
// Lane j of the half h (0 or 1) of a stage that swaps blocks of w lanes between registers
// i and i + w: lanes of a from even blocks, of b (16 + ...) from odd ones.
#define SWAP_LANE(j, w, h) ((j) / (2 * (w)) * 2 * (w) + ((j) / (w) % 2 ? VEC : 0) + (j) % (w) + (h) * (w))
#define SWAP_LANES(w, h)                                                                                      \
    SWAP_LANE(0, w, h), SWAP_LANE(1, w, h), SWAP_LANE(2, w, h), SWAP_LANE(3, w, h), SWAP_LANE(4, w, h),       \
        SWAP_LANE(5, w, h), SWAP_LANE(6, w, h), SWAP_LANE(7, w, h), SWAP_LANE(8, w, h), SWAP_LANE(9, w, h),   \
        SWAP_LANE(10, w, h), SWAP_LANE(11, w, h), SWAP_LANE(12, w, h), SWAP_LANE(13, w, h),                   \
        SWAP_LANE(14, w, h), SWAP_LANE(15, w, h)
#define TRANSPOSE_STAGE(dst, src, w)                                                                          \
    for (int i = 0; i < VEC; i++)                                                                             \
        if (!(i & (w))) {                                                                                     \
            dst[i] = SHUFFLE16(src[i], src[i + (w)], SWAP_LANES(w, 0));                                       \
            dst[i + (w)] = SHUFFLE16(src[i], src[i + (w)], SWAP_LANES(w, 1));                                 \
        }

// dst[d, i] = src[i, d] for the first n of 16 rows i (0 for the others), d < D;
// dst's rows are VEC_KEYS floats apart. 16 × 16 blocks go through registers: swapping the
// off-diagonal blocks of sizes 8, 4, 2 and 1 in turn transposes them.
static inline void transpose_keys(float *dst, const float *src, size_t lds, int n, int D) {
    int d = 0;
    for (; d + VEC <= D; d += VEC) {
        vec16 r[VEC], t[VEC];
        for (int i = 0; i < VEC; i++) r[i] = i < n ? (vec16) * (const vec16u *)(src + i * lds + d) : (vec16){0};
        TRANSPOSE_STAGE(t, r, 8);
        TRANSPOSE_STAGE(r, t, 4);
        TRANSPOSE_STAGE(t, r, 2);
        TRANSPOSE_STAGE(r, t, 1);
        for (int i = 0; i < VEC; i++) *(vec16u *)(dst + (d + i) * VEC_KEYS) = r[i];
    }
    for (; d < D; d++)
        for (int i = 0; i < VEC; i++) dst[d * VEC_KEYS + i] = i < n ? src[i * lds + d] : 0.0f;
}

// Row t of a causal score block holds P + t + 1 scores; causal_scores writes it to this
// width, a multiple of 16 within L, so that the loops over it need no scalar tail: the rows
// are short, and the tail cost more than the rest.
static inline int causal_width(int n, int L) {
    int m = (n + VEC - 1) / VEC * VEC;
    return m < L ? m : L;
}

// S[t, j] = alpha q_t · k_j for T query rows (lq apart) and P + T keys (lk apart), into rows
// of P + T, for j < causal_width(P + t + 1, P + T): the entries past P + t are unmasked scores
// for the caller to mask. A block of VEC_KEYS keys is transposed once for all the rows that
// see it; one or two rows (a one-token step) do not pay for transposing and take dot products.
#define KT_DIMS 128
static void causal_scores(float *S, const float *q, size_t lq, const float *k, size_t lk, int T, int P, int hd,
                          float alpha) {
    size_t L = (size_t)P + T;
    if (T < 3) {
        for (int t = 0; t < T; t++)
            for (int j = 0, m = causal_width(P + t + 1, (int)L); j < m; j++) {
                // keys lie a row of the cache apart: asking ahead read them 15 % faster here
                for (int x = 0; x < hd && j + 6 < m; x += 16) __builtin_prefetch(k + (j + 6) * lk + x);
                S[t * L + j] = alpha * dot(q + t * lq, k + j * lk, hd);
            }
        return;
    }
    float kt[KT_DIMS * VEC_KEYS];
    for (int j0 = 0; j0 < (int)L; j0 += VEC_KEYS) {
        int nb = (int)L - j0 < VEC_KEYS ? (int)L - j0 : VEC_KEYS, t0 = j0 - P > 0 ? j0 - P : 0;
        for (int d0 = 0; d0 < hd; d0 += KT_DIMS) {
            int dn = hd - d0 < KT_DIMS ? hd - d0 : KT_DIMS;
            for (int h = 0; h < VEC_KEYS; h += VEC)
                transpose_keys(kt + h, k + (h < nb ? j0 + h : 0) * lk + d0, lk, nb - h, dn);
            causal_product(S + t0 * L + j0, L, q + t0 * lq + d0, lq, 0, kt, VEC_KEYS, T - t0, nb, dn, CAUSAL_NONE, 0,
                           alpha, d0 > 0);
        }
    }
}

// Row t of a causal_scores block into probabilities over its n = P + t + 1 entries, 0 after
// (exp of -inf gives the padding 0).
static inline void causal_softmax_row(float *row, int n, int L) {
    int m = causal_width(n, L);
    for (int j = n; j < m; j++) row[j] = -INFINITY;
    softmax(row, m);
    memset(row + m, 0, (size_t)(L - m) * sizeof(float));
}

// Masked scaled dot-product attention for B sequences of T new rows each, after P rows
// already in k/v. q, out: [B, T, n_heads * head_dim]; k, v: [B, P + T, n_kv_heads * head_dim].
// att receives the probabilities [B, n_heads, T, P + T] (zero where masked) so that training
// can keep them for the backward pass. Parallel across (sequence, head).
// attention_pairs does the (sequence, head) pairs [lo, hi) of B × n_heads, a thread's share.
static inline void attention_pairs(float *out, float *att, const float *q, const float *k, const float *v, int T,
                                   int P, int n_heads, int n_kv_heads, int head_dim, size_t lo, size_t hi) {
    int L = P + T, qd = n_heads * head_dim, kvd = n_kv_heads * head_dim, group = n_heads / n_kv_heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    for (size_t i = lo; i < hi; i++) {
        int b = (int)(i / n_heads), h = (int)(i % n_heads);
        const float *kb = k + (size_t)b * L * kvd + (size_t)(h / group) * head_dim;
        const float *vb = v + (size_t)b * L * kvd + (size_t)(h / group) * head_dim;
        const float *qb = q + (size_t)b * T * qd + (size_t)h * head_dim;
        float *a = att + i * T * L, *o = out + (size_t)b * T * qd + (size_t)h * head_dim;
        causal_scores(a, qb, qd, kb, kvd, T, P, head_dim, scale);
        for (int t = 0; t < T; t++) causal_softmax_row(a + (size_t)t * L, P + t + 1, L);
        causal_product(o, qd, a, L, 0, vb, kvd, T, head_dim, L, CAUSAL_BELOW, P, 1.0f, 0);
    }
}

static inline void attention(float *out, float *att, const float *q, const float *k, const float *v, int B, int T,
                             int P, int n_heads, int n_kv_heads, int head_dim) {
    size_t pairs = (size_t)B * n_heads;
#pragma omp parallel if (pairs * T * (P + T) * head_dim >= PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t lo, hi;
        share(pairs, id, nt, &lo, &hi);
        attention_pairs(out, att, q, k, v, T, P, n_heads, n_kv_heads, head_dim, lo, hi);
    }
}

// expf by range reduction and a degree-6 polynomial (max relative error 8e-8): unlike libm's
// expf and tanhf it vectorises, and the activations were the largest cost after the matrix
// products in a training profile (tanhf alone 38%).
static inline float exp_vec(float x) {
    float in = x;
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    // round to nearest by the 1.5 * 2^23 trick: floorf would keep GCC from vectorising
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // NaN must not reach the int conversion (undefined behaviour); p is NaN then and keeps it
    float nc = n == n ? n : 0.0f;
    union { int32_t i; float f; } scale = {.i = ((int32_t)nc + 127) << 23};
    // below the clamp the result is 0, as expf's (softmax must give masked scores exactly 0)
    return in < -87.0f ? 0.0f : p * scale.f;
}

#define GELU_K 0.7978845608028654f // sqrt(2 / pi)

// The feed-forward nonlinearity of h [n] into out, which may be h itself (./run works in
// place; training keeps h for the backward pass); SwiGLU also takes the gate's partner g.
// GELU's 0.5 (1 + tanh u) is written as the equal sigmoid(2u), so that it and SiLU need only
// exp_vec. One loop per kind, so that each vectorises; omp simd because out may alias h,
// which is safe element by element.
static inline void ffn_activation(int kind, float *out, const float *h, const float *g, size_t n) {
    switch (kind) {
    case FFN_SWIGLU:
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = h[i] / (1.0f + exp_vec(-h[i])) * g[i];
        break;
    case FFN_GELU_TANH:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x = h[i], u = GELU_K * (x + 0.044715f * x * x * x);
            out[i] = x / (1.0f + exp_vec(-2.0f * u));
        }
        break;
    case FFN_GELU_ERF:
        for (size_t i = 0; i < n; i++) out[i] = 0.5f * h[i] * (1.0f + erff(h[i] * 0.7071067811865476f));
        break;
    default:
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = h[i] > 0.0f ? h[i] : 0.0f;
        break;
    }
}

static inline void norm(const Config *c, float *out, const float *x, const float *w, const float *b, int T) {
    if (c->norm_kind == NORM_LAYER)
        layernorm(out, x, w, b, T, c->dim, c->norm_eps);
    else
        rmsnorm(out, x, w, T, c->dim, c->norm_eps);
}

// x[t] = embed_scale * E[token] + position(pos0 + t)
static inline void embed(const Config *c, const Weights *w, float *x, const int *tokens, int T, int pos0) {
    int d = c->dim;
    for (int t = 0; t < T; t++) {
        float *xt = x + (size_t)t * d;
        if (w->qtok_embedding.q) {
            dequantize_rows(xt, &w->qtok_embedding, d, tokens[t], tokens[t] + 1);
            for (int i = 0; i < d; i++) xt[i] *= c->embed_scale;
        } else {
            const float *e = w->tok_embedding + (size_t)tokens[t] * d;
            for (int i = 0; i < d; i++) xt[i] = c->embed_scale * e[i];
        }
        if (c->pos_kind == POS_LEARNED) {
            const float *p = w->pos_embedding + (size_t)(pos0 + t) * d;
            for (int i = 0; i < d; i++) xt[i] += p[i];
        } else if (c->pos_kind == POS_SINUSOIDAL) {
            for (int i = 0; i < d; i += 2) {
                double a = (pos0 + t) / pow(10000.0, (double)i / d);
                xt[i] += (float)sin(a);
                xt[i + 1] += (float)cos(a);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// Inference state: activations for up to max_batch rows at once, and the KV cache.

// The threads of forward's parallel region meet here between its steps, four times a
// layer. A waiting thread spins for a while and only then sleeps on a futex: waking a sleeping
// thread cost about 40 µs here, 13 % of a one-token step of the 110M model when every wait
// slept, while long spins starve the other thread when the machine is busy (a third slower
// with one other busy process). So the spin adapts: it grows while waits end within it (an
// idle machine) and halves each time a wait has to sleep (a busy one).
#define BARRIER_SPIN_MIN 512
#define BARRIER_SPIN_MAX 16384
typedef struct {
    atomic_int arrived, phase, sleepers, spin_limit;
} Barrier;

static inline void barrier_wait(Barrier *b, int nt) {
    if (nt < 2) return;
    int phase = atomic_load(&b->phase);
    if (atomic_fetch_add(&b->arrived, 1) == nt - 1) {
        atomic_store(&b->arrived, 0);
        atomic_store(&b->phase, phase + 1);
#ifdef __linux__
        if (atomic_load(&b->sleepers)) syscall(SYS_futex, &b->phase, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
#endif
        return;
    }
    int limit = atomic_load_explicit(&b->spin_limit, memory_order_relaxed), slept = 0;
    if (limit < BARRIER_SPIN_MIN) limit = BARRIER_SPIN_MIN;
    for (int spins = 0; atomic_load(&b->phase) == phase; spins++) {
        if (spins < limit) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        slept = 1;
#ifdef __linux__
        // the futex sleeps only while the phase is still the old one, so a release between
        // the check above and here is never missed
        atomic_fetch_add(&b->sleepers, 1);
        syscall(SYS_futex, &b->phase, FUTEX_WAIT_PRIVATE, phase, NULL, NULL, 0);
        atomic_fetch_sub(&b->sleepers, 1);
#else
        sched_yield();
#endif
    }
    limit = slept ? limit / 2 : limit + limit / 8 + 1;
    limit = limit < BARRIER_SPIN_MIN ? BARRIER_SPIN_MIN : limit > BARRIER_SPIN_MAX ? BARRIER_SPIN_MAX : limit;
    atomic_store_explicit(&b->spin_limit, limit, memory_order_relaxed);
}

typedef struct {
    int max_batch, threads; // threads: how many copies of xn there are; forward never runs more
    float *x, *xn, *q, *attn_out, *xb, *hb, *hb2, *att, *rope_cos, *rope_sin;
    float *key_cache, *value_cache; // [n_layers, seq_len, n_kv_heads * head_dim]
    float *wbuf;                    // a Q8_0 model's dequantised rows: wbuf_floats per thread
    size_t wbuf_floats;
    Barrier barrier;
} RunState;

static inline void state_free(RunState *s) {
    float **bufs[] = {&s->x, &s->xn, &s->q, &s->attn_out, &s->xb, &s->hb, &s->hb2, &s->att,
                      &s->rope_cos, &s->rope_sin, &s->key_cache, &s->value_cache, &s->wbuf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) { free(*bufs[i]); *bufs[i] = NULL; }
}

static inline int state_init(RunState *s, const Config *c, int max_batch) {
    memset(s, 0, sizeof *s);
    size_t B = max_batch, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t half = c->rope_dims / 2;
    s->max_batch = max_batch;
#ifdef _OPENMP
    s->threads = omp_get_max_threads();
#else
    s->threads = 1;
#endif
    s->x = calloc(B * c->dim, sizeof(float));
    s->xn = calloc((size_t)s->threads * B * c->dim, sizeof(float));
    s->q = calloc(B * qd, sizeof(float));
    s->attn_out = calloc(B * qd, sizeof(float));
    s->xb = calloc(B * c->dim, sizeof(float));
    s->hb = calloc(B * c->hidden_dim, sizeof(float));
    s->hb2 = calloc(B * c->hidden_dim, sizeof(float));
    s->att = calloc(B * c->n_heads * (size_t)c->seq_len, sizeof(float));
    s->rope_cos = calloc((size_t)c->seq_len * half + 1, sizeof(float));
    s->rope_sin = calloc((size_t)c->seq_len * half + 1, sizeof(float));
    s->key_cache = calloc((size_t)c->n_layers * c->seq_len * kvd, sizeof(float));
    s->value_cache = calloc((size_t)c->n_layers * c->seq_len * kvd, sizeof(float));
    if (c->weight_type == WEIGHTS_Q8_0 && max_batch > 1) {
        size_t widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
        widest = qd > widest ? qd : widest;
        s->wbuf_floats = qchunk_floats((int)widest);
        s->wbuf = malloc((size_t)s->threads * s->wbuf_floats * sizeof(float));
    }
    if (!s->x || !s->xn || !s->q || !s->attn_out || !s->xb || !s->hb || !s->hb2 || !s->att || !s->rope_cos ||
        !s->rope_sin || !s->key_cache || !s->value_cache || (s->wbuf_floats && !s->wbuf)) {
        state_free(s);
        return -1;
    }
    if (c->pos_kind == POS_ROPE) rope_table(s->rope_cos, s->rope_sin, c->seq_len, c->rope_dims, c->rope_theta);
    return 0;
}

// Multiply-adds of one layer's products for one token.
static inline size_t layer_macs(const Config *c) {
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    return d * (qd + 2 * kvd) + qd * d + (c->ffn_kind == FFN_SWIGLU ? 3 : 2) * d * c->hidden_dim;
}

// This thread's copy of the sub-layer's input: the norm of every row of x in a pre-norm model
// (each thread normalises all rows itself, which costs less than waiting for the others),
// x itself in a post-norm one.
static inline const float *sublayer_input(const Config *c, const float *x, float *xn, const float *norm_w,
                                          const float *norm_b, int T) {
    if (c->post_norm) return x;
    norm(c, xn, x, norm_w, norm_b, T);
    return xn;
}

// A sub-layer's output projection of in [T, n_in] into xb, split across the region's threads
// by features, each adding its features into x (the residual); then, in a post-norm model,
// "Add & Norm"'s norm of this thread's rows [r0, r1). On return x is whole for every thread.
static inline void add_sublayer(const Config *c, RunState *s, const float *in, const float *w, QMat qw,
                                const float *b, const float *norm_w, const float *norm_b, int T, int n_in, int id,
                                int nt, size_t r0, size_t r1) {
    size_t d = c->dim, lo, hi;
    Linear o = {s->xb, w, b, c->dim, s->x, qw, s->wbuf ? s->wbuf + (size_t)id * s->wbuf_floats : NULL};
    share(d, id, nt, &lo, &hi);
    matmul_part(&o, 1, in, T, n_in, lo, hi);
    barrier_wait(&s->barrier, nt);
    if (!c->post_norm) return;
    if (r1 > r0) norm(c, s->x + r0 * d, s->x + r0 * d, norm_w, norm_b, (int)(r1 - r0));
    barrier_wait(&s->barrier, nt);
}

// Runs T tokens at positions pos0 .. pos0+T-1 (T ≤ max_batch, pos0 + T ≤ seq_len) through
// the model, appending their keys and values to the cache. Logits are computed only for rows
// logits_from .. T-1, into logits [T - logits_from, vocab_size]; the prompt asks for its last
// row alone, perplexity for all.
static inline void forward(const Config *c, const Weights *w, RunState *s, const int *tokens, int T, int pos0,
                    float *logits, int logits_from) {
    int d = c->dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, hid = c->hidden_dim;
    int swiglu = c->ffn_kind == FFN_SWIGLU, n_logits = logits && logits_from < T ? T - logits_from : 0;
    int team = s->threads;
#ifdef _OPENMP
    team = omp_get_max_threads() < team ? omp_get_max_threads() : team;
#endif
    float *x = s->x;
    // One parallel region for the whole pass: each product is split across the threads by
    // output features, attention by head, embedding and post-norms by rows. A one-token step
    // is a few milliseconds, and each meeting at s->barrier costs the earlier thread a wait
    // of several microseconds, so the steps are arranged for few meetings: every thread
    // normalises x itself, computes the queries, keys and values of its own heads, rotates
    // and attends with them, and adds its features of the output projections into x.
#pragma omp parallel num_threads(team) if ((size_t)T * layer_macs(c) >= 4 * PARALLEL_MIN_WORK)
    {
        int id = thread_num(), nt = team_size();
        size_t r0, r1, lo, hi, h0, h1, g0, g1;
        share((size_t)T, id, nt, &r0, &r1);
        share((size_t)c->n_heads, id, nt, &h0, &h1);
        share((size_t)c->n_kv_heads, id, nt, &g0, &g1);
        // with whole groups of query heads per thread, its queries need only its own keys
        // and values; otherwise every thread's must be there before attention
        int own_kv = c->n_kv_heads % nt == 0;
        float *xn = s->xn + (size_t)id * s->max_batch * d;
        float *wbuf = s->wbuf ? s->wbuf + (size_t)id * s->wbuf_floats : NULL;
        if (r1 > r0) embed(c, w, x + r0 * d, tokens + r0, (int)(r1 - r0), pos0 + (int)r0);
        barrier_wait(&s->barrier, nt);
        for (int l = 0; l < c->n_layers; l++) {
            const LayerWeights *L = &w->layers[l];
            float *kc = s->key_cache + ((size_t)l * c->seq_len) * kvd, *vc = s->value_cache + ((size_t)l * c->seq_len) * kvd;
            float *knew = kc + (size_t)pos0 * kvd;
            // attention
            const float *in = sublayer_input(c, x, xn, L->attn_norm_w, L->attn_norm_b, T);
            Linear q = {s->q, L->wq, L->bq, qd, NULL, L->qwq, wbuf}, k = {knew, L->wk, L->bk, kvd, NULL, L->qwk, wbuf},
                   v = {vc + (size_t)pos0 * kvd, L->wv, L->bv, kvd, NULL, L->qwv, wbuf};
            matmul_part(&q, 1, in, T, d, h0 * hd, h1 * hd);
            matmul_part(&k, 1, in, T, d, g0 * hd, g1 * hd);
            matmul_part(&v, 1, in, T, d, g0 * hd, g1 * hd);
            if (c->pos_kind == POS_ROPE) {
                rope(s->q + h0 * hd, qd, T, pos0, (int)(h1 - h0), hd, c->rope_dims, s->rope_cos, s->rope_sin);
                rope(knew + g0 * hd, kvd, T, pos0, (int)(g1 - g0), hd, c->rope_dims, s->rope_cos, s->rope_sin);
            }
            if (!own_kv) barrier_wait(&s->barrier, nt);
            attention_pairs(s->attn_out, s->att, s->q, kc, vc, T, pos0, c->n_heads, c->n_kv_heads, hd, h0, h1);
            barrier_wait(&s->barrier, nt);
            add_sublayer(c, s, s->attn_out, L->wo, L->qwo, L->bo, L->attn_norm_w, L->attn_norm_b, T, qd, id, nt, r0, r1);
            // feed-forward: w1 and w3 split alike, so that each thread's activations need only
            // its own outputs
            in = sublayer_input(c, x, xn, L->ffn_norm_w, L->ffn_norm_b, T);
            Linear up[] = {{s->hb, L->w1, L->b1, hid, NULL, L->qw1, wbuf}, {s->hb2, L->w3, L->b3, hid, NULL, L->qw3, wbuf}};
            share((size_t)hid, id, nt, &lo, &hi);
            matmul_part(&up[0], 1, in, T, d, lo, hi);
            if (swiglu) matmul_part(&up[1], 1, in, T, d, lo, hi);
            for (int t = 0; t < T && hi > lo; t++)
                ffn_activation(c->ffn_kind, s->hb + (size_t)t * hid + lo, s->hb + (size_t)t * hid + lo,
                               s->hb2 + (size_t)t * hid + lo, hi - lo);
            barrier_wait(&s->barrier, nt);
            add_sublayer(c, s, s->hb, L->w2, L->qw2, L->b2, L->ffn_norm_w, L->ffn_norm_b, T, hid, id, nt, r0, r1);
        }
        if (n_logits) {
            const float *last = x + (size_t)logits_from * d;
            if (c->final_norm) {
                norm(c, xn, last, w->final_norm_w, w->final_norm_b, n_logits);
                last = xn;
            }
            Linear cls = {logits, w->classifier, NULL, c->vocab_size, NULL, w->qclassifier, wbuf};
            share((size_t)c->vocab_size, id, nt, &lo, &hi);
            matmul_part(&cls, 1, last, n_logits, d, lo, hi);
        }
    }
}

#endif
