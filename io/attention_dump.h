// io/attention_dump.h: ./run -m attention: the attention weights the forward pass computes,
// kept as it computes them and written in the layout docs/ATTENTION.md gives. run.c includes it
// after model.h, tokenizer.h, io/cli.h (die) and io/run_options.h (Options).
#ifndef ATTN_IO_ATTENTION_DUMP_H
#define ATTN_IO_ATTENTION_DUMP_H

// The attention weights at every prompt position (-m attention), copied from the forward pass
// itself (model/forward.h's s->keep) and laid out as docs/ATTENTION.md says: int32 T, layers,
// heads; T int32 ids; float32 [layers][heads][T][T]; then the labels the plots use: "LABL",
// int32 first layer, first head, query heads per key/value head, each layer's window, each
// token's text (int32 length, bytes). Whole or not at all, as -m logits writes.
#define ATTENTION_MAX_BYTES (1ull << 30)
#define LABELS_MAGIC "LABL"

typedef struct {
    const Config *c;
    const Tokenizer *tok;
    const int *tokens;
    int n, range[2][2]; // layers and heads kept: [first, last]
    const float *weights;
} AttentionFile;

// A token as the plots write it: the text it decodes to after prev, or, for a token that decodes
// to nothing (BOS, EOS, special tokens), its own spelling.
static const char *token_label(const Tokenizer *tok, int prev, int id, size_t *len) {
    const char *text = tokenizer_decode(tok, prev, id, len);
    if (*len) return text;
    *len = tok->len[id];
    return tok->bytes + tok->offset[id];
}

static uint64_t labels_bytes(const AttentionFile *f) {
    uint64_t bytes = 4 + 3 * sizeof(int32_t) + sizeof(int32_t) * (f->range[0][1] - f->range[0][0] + 1);
    for (int t = 0; t < f->n; t++) {
        size_t len;
        token_label(f->tok, t ? f->tokens[t - 1] : -1, f->tokens[t], &len);
        bytes += sizeof(int32_t) + len;
    }
    return bytes;
}

static void write_attention(Sink *sink, const void *ctx) {
    const AttentionFile *f = ctx;
    const Config *c = f->c;
    int32_t head[3] = {f->n, f->range[0][1] - f->range[0][0] + 1, f->range[1][1] - f->range[1][0] + 1};
    sink_write(sink, head, sizeof head);
    sink_write(sink, f->tokens, sizeof(int32_t) * f->n);
    sink_write(sink, f->weights, sizeof(float) * head[1] * head[2] * (size_t)f->n * f->n);
    int32_t labels[3] = {f->range[0][0], f->range[1][0], c->n_heads / c->n_kv_heads};
    sink_write(sink, LABELS_MAGIC, 4);
    sink_write(sink, labels, sizeof labels);
    for (int l = f->range[0][0]; l <= f->range[0][1]; l++) {
        int32_t window = layer_is_local(c, l) ? c->sliding_window : 0;
        sink_write(sink, &window, sizeof window);
    }
    for (int t = 0; t < f->n; t++) {
        size_t len;
        const char *text = token_label(f->tok, t ? f->tokens[t - 1] : -1, f->tokens[t], &len);
        int32_t n = (int32_t)len;
        sink_write(sink, &n, sizeof n);
        sink_write(sink, text, len);
    }
}

// --layers or --heads against the model's count of them: range (all of them when not given).
static void select_range(int range[2], const int given[2], const char *flag, const char *what, int count,
                         const char *model_path) {
    range[0] = given[0] < 0 ? 0 : given[0];
    range[1] = given[0] < 0 ? count - 1 : given[1];
    char as_given[32];
    snprintf(as_given, sizeof as_given, given[0] == given[1] ? "%d" : "%d-%d", given[0], given[1]);
    if (range[1] >= count) die("%s %s: %s has %d %s, 0-%d", flag, as_given, model_path, count, what, count - 1);
}

// tokens: n prompt ids, malloc'd; dump_attention owns them.
static void dump_attention(const Model *m, const Tokenizer *tok, RunState *s, const Options *o, int *tokens, int n) {
    const Config *c = &m->config;
    AttentionFile f = {.c = c, .tok = tok, .tokens = tokens, .n = n};
    select_range(f.range[0], o->layers, "--layers", "layers", c->n_layers, o->model_path);
    select_range(f.range[1], o->heads, "--heads", "query heads", c->n_heads, o->model_path);
    int layers = f.range[0][1] - f.range[0][0] + 1, heads = f.range[1][1] - f.range[1][0] + 1;
    size_t floats = (size_t)layers * heads * n * n;
    uint64_t bytes = 3 * sizeof(int32_t) + sizeof(int32_t) * (uint64_t)n + sizeof(float) * floats + labels_bytes(&f);
    if (bytes > ATTENTION_MAX_BYTES)
        die("-m attention: %d tokens x %d layers x %d heads make a %.2f GiB file, over the 1 GiB limit; select fewer "
            "with --layers A-B and --heads A-B, or shorten the prompt",
            n, layers, heads, bytes / 1073741824.0);
    float *weights = calloc(floats, sizeof(float)); // masked entries stay 0: the forward never writes them
    if (!weights) die("-m attention: out of memory for %.0f MiB of attention weights", floats * 4 / 1048576.0);
    AttentionKeep keep = {weights, f.range[0][0], layers, f.range[1][0], heads, n};
    s->keep = &keep;
    for (int done = 0, T; done < n; done += T) {
        T = n - done < s->max_batch ? n - done : s->max_batch;
        forward(c, &m->weights, s, tokens + done, T, done, NULL, T);
    }
    s->keep = NULL;
    for (size_t i = 0; i < floats; i++)
        if (!isfinite(weights[i])) {
            size_t row = i / n;
            die("%s: the attention weights of layer %d, head %d at position %d are not finite: the weights hold NaN "
                "or Inf, or overflow",
                o->model_path, f.range[0][0] + (int)(row / n / heads), f.range[1][0] + (int)(row / n % heads),
                (int)(row % n));
        }
    f.weights = weights;
    char err[512] = "";
    int rc = write_output(o->out_path, write_attention, &f, err, sizeof err);
    free(tokens);
    free(weights);
    if (rc) die("%s", err);
}

#endif
