// training/checkpoint.h: what a run leaves on disk and picks up again: the model file, the
// resume state (MODEL.state) and the log (MODEL.csv). It builds the model a run starts from,
// new, --init or --resume, and writes every file whole (io/files.h).
#ifndef ATTN_TRAINING_CHECKPOINT_H
#define ATTN_TRAINING_CHECKPOINT_H

#include "dist.h"
#include "memory.h"
#include "options.h"
#include "params.h"

// The model being trained: what its file holds.
typedef struct {
    Config c;
    void *tok_blob; // (tok_bytes) the tokenizer, as stored in the model file
    void *chat;     // (chat_bytes) the chat section of the model file trained on, kept; NULL for none
    size_t tok_bytes, chat_bytes, param_bytes;
    float *params; // (param_bytes / 4) the weights block, laid out as model/file.h carves it
} ModelData;

// The resume state: a copy of the weights (so that it never depends on which of the two files
// a crash let through, and so that --keep-best's model file may hold other weights), both AdamW
// moments, the options and the step, then a CRC-32 of all that (zlib's, as the model file's).
// The data order is a function of (seed, step), so the step is all the data position there
// is: a run stopped inside a step checkpoints the step before it and does it again on resume.
// Config and tokenizer come from the model file, which are the same at every checkpoint of a
// run; a fingerprint of both makes sure of it.
// STATE_MAGIC is model/checksum.h's, which ./run --verify reads too
// 2: Opts gained dropout; 3: the checksum, the best loss, a pending evaluation; 4: the threads
// (a version 3 state, which lacks them, still resumes)
#define STATE_VERSION 4
#define STATE_V3_HEADER_BYTES 192

typedef struct {
    char magic[8];
    uint32_t version, opts_bytes;
    uint64_t step, corpus_bytes, corpus_hash, model_hash, param_bytes;
    Opts opts;
    double best_val; // the lowest validation loss so far (at best_step), +inf before the first
    // eval_pending: a signal stopped the evaluation after this step, whose log row (its loss,
    // learning rate and tokens/s) is written when --resume has evaluated it
    double pending_loss, pending_lr, pending_tps;
    uint32_t best_step, eval_pending;
    // threads: rank 0's (0 from a version 3 state): another count sums the gradients' per-thread
    // copies in other groups, so a resumed run is close to, not bit-identical with, the whole one
    uint32_t threads, reserved;
} StateHeader;
_Static_assert(sizeof(StateHeader) == STATE_V3_HEADER_BYTES + 8, "StateHeader has padding");
_Static_assert(offsetof(StateHeader, step) == STATE_STEP_OFFSET, "./run --verify reads the step there");

typedef struct {
    const ModelData *md;
    const Dist *dist;
    const float *m, *v; // this rank's shards of the moments (dist.h), the whole of them alone
    StateHeader h;
    int ours;  // a whole checkpoint of this run is on disk (resumed from, or written)
    int prior; // a model and state were there before the run (another run's, with --force)
} StateData;

// On rank 0: the moments whole, its own shard and then the other ranks' as they send them, so
// that the file is the one a single process writes.
static void write_state_cb(Sink *s, const void *ctx) {
    const StateData *sd = ctx;
    const Dist *d = sd->dist;
    float *piece = d->ranks > 1 ? xcalloc(MOMENT_CHUNK, sizeof(float), "a moment's piece") : NULL;
    sink_write(s, &sd->h, sizeof sd->h);
    sink_write(s, sd->md->params, sd->md->param_bytes);
    const float *moments[] = {sd->m, sd->v};
    for (int k = 0; k < 2; k++) {
        sink_write(s, moments[k], (d->hi - d->lo) * sizeof(float));
        for (int r = 1; r < d->ranks; r++) dist_write_shard(d, s, r, piece);
    }
    uint32_t crc = s->crc;
    sink_write(s, &crc, sizeof crc);
    free(piece);
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t model_hash(const ModelData *md) {
    FileHeader h = header_from_config(&md->c);
    return fnv1a(&h, sizeof h) ^ fnv1a(md->tok_blob, md->tok_bytes) * 31;
}

// The first knob of c that training's forward and backward lack, by name, or NULL: the
// format-3 knobs of today's families, which ./run computes and ./train does not.
static const char *untrainable_knob(const Config *c) {
    struct {
        int has;
        const char *name;
    } knobs[] = {
        {c->n_experts != 0, "n_experts (a mixture of experts: Qwen3-MoE)"},
        {c->rope_scaling == ROPE_SCALING_LINEAR, "rope_scaling linear"},
        {c->rope_scaling == ROPE_SCALING_LLAMA3, "rope_scaling llama3 (Llama 3.x)"},
        {c->arch_flags & ARCH_QK_NORM, "arch_flags QK_NORM (Qwen3/Gemma 3)"},
        {c->arch_flags & ARCH_NORM_PLUS_ONE, "arch_flags NORM_PLUS_ONE (Gemma)"},
        {c->arch_flags & ARCH_OUT_NORMS, "arch_flags OUT_NORMS (Gemma 3)"},
        {c->attn_scale != 0, "attn_scale (Gemma 3's query_pre_attn_scalar)"},
        {c->sliding_window != 0, "sliding_window (Gemma 3's local layers)"},
        {c->ffn_kind == FFN_GEGLU_TANH, "ffn_kind GeGLU (Gemma)"},
    };
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        if (knobs[i].has) return knobs[i].name;
    return NULL;
}

// Config and tokenizer of a model file to train on, and with its_params its weights, into md.
// A bfloat16 or float16 file's matrices are widened to float32, exactly; a Q8_0 file's were
// rounded for ./run, and are refused. need: what the file is for.
// The tokenizer blob and chat section of an open model file into md, for a model written back
// as version 5 or later, where a chat section ends in the template's length: an older section
// gains a zero one (an empty template), the bytes xcalloc leaves after it.
static void copy_tokenizer(ModelData *md, const Model *m) {
    md->tok_bytes = m->tok_bytes;
    md->tok_blob = xcalloc(md->tok_bytes, 1, "the tokenizer");
    memcpy(md->tok_blob, m->tok_blob, md->tok_bytes);
    md->chat_bytes = m->chat_bytes && m->version < 5 ? m->chat_bytes + 4 : m->chat_bytes;
    md->chat = m->chat_bytes ? xcalloc(md->chat_bytes, 1, "the chat section") : NULL;
    if (m->chat_bytes) memcpy(md->chat, m->chat_section, m->chat_bytes);
}

static void read_model(ModelData *md, const char *path, int its_params, const char *need) {
    Model m;
    char err[512];
    if (model_open(&m, path, err, sizeof err)) die("%s%s", err, need);
    // read whole anyway to train on: a damaged file is refused here, not trained on
    if (model_verify_checksum(path, err, sizeof err)) die("%s%s", err, need);
    if (m.config.weight_type == WEIGHTS_Q8_0)
        die("%s: its weights are quantised (Q8_0); training needs float32, bfloat16 or float16 weights: convert "
            "the original checkpoint without --quantize",
            path);
    for (int k = 0; m.config.type_table && k < matrix_count(&m.config); k++)
        if (is_block_type(matrix_type_of_ggml(m.config.type_table[k]))) {
            char name[48];
            matrix_slot(&m.config, k, name, sizeof name);
            die("%s: its weights are quantised (tensor %s is %s); training needs float32, bfloat16 or float16 "
                "weights: convert the original checkpoint with --weights f32",
                path, name, matrix_types[matrix_type_of_ggml(m.config.type_table[k])].name);
        }
    const char *knob = untrainable_knob(&m.config);
    if (knob) die("%s: %s is not trainable in this build", path, knob);
    md->c = m.config;
    md->c.weight_type = WEIGHTS_F32;
    md->c.type_table = NULL;
    copy_tokenizer(md, &m);
    md->param_bytes = carve_weights(&md->c, NULL, NULL);
    md->params = xcalloc(md->param_bytes, 1, "parameters");
    const char *block = (const char *)m.map + ((const FileHeader *)m.map)->weights_offset;
    if (its_params && m.config.weight_type == WEIGHTS_F32) memcpy(md->params, block, md->param_bytes);
    else if (its_params) dequantize_weights(&m.config, &m.weights, block, md->params);
    model_close(&m);
}

// --tokenizer-from: the tokenizer of the model file at path into md (its pieces and chat
// section) and tok (its vocabulary's size, kind and flags, BOS and EOS), for a new model of the
// options' shape. Its weights, whatever their type, are not read.
static void read_tokenizer(ModelData *md, const char *path, Config *tok) {
    Model m;
    char err[512];
    if (model_open(&m, path, err, sizeof err)) die("--tokenizer-from %s", err);
    copy_tokenizer(md, &m);
    *tok = m.config;
    model_close(&m);
}

// A resume state's header, checked to be one of this build's, into sh (the file is read whole
// later, once the memory it needs has been checked).
static void read_state_header(const char *path, StateHeader *sh) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: cannot open the resume state: %s", path, strerror(errno));
    ssize_t n = read(fd, sh, sizeof *sh);
    close(fd);
    if (n != (ssize_t)sizeof *sh) die("%s: too short for a resume state", path);
    if (memcmp(sh->magic, STATE_MAGIC, 8) || sh->opts_bytes != sizeof(Opts))
        die("%s: not a resume state of this build", path);
    if (sh->version != STATE_VERSION && sh->version != 3)
        die("%s: a resume state of version %u, this build reads versions 3 and %d (resume it with the ./train that "
            "wrote it)",
            path, sh->version, STATE_VERSION);
    if (sh->version == 3) sh->threads = sh->reserved = 0; // those bytes are its weights'
}

// The bytes of a resume state's header: a version 3 state's is shorter.
static size_t state_header_bytes(const StateHeader *sh) {
    return sh->version == 3 ? STATE_V3_HEADER_BYTES : sizeof *sh;
}

// What --resume continues: config and tokenizer from the model file, weights, moments, options,
// step and the rest of the header (into sh) from MODEL.state, whose options replace the
// command line's. The memory the run needs is checked before the state is read.
static void load_state(const char *out, const char *path, const char *corpus_path, size_t corpus_len,
                       uint64_t corpus_hash, ModelData *md, float **m, float **v, Opts *o, StateHeader *saved, int rank,
                       int ranks) {
    read_model(md, out, 0, " (needed with --resume)");
    StateHeader sh;
    read_state_header(path, &sh);
    if (sh.param_bytes != md->param_bytes || sh.model_hash != model_hash(md))
        die("%s: belongs to a different model than %s", path, out);
    check_saved_opts(&sh.opts, path);
    check_memory(&md->c, &sh.opts, ranks, rank == 0, corpus_len, 1, 0, vocabulary_merges(md->tok_blob));
    size_t n, want = state_header_bytes(&sh) + 3 * sh.param_bytes + sizeof(uint32_t);
    char *buf = read_file(path, &n, "the resume state");
    if (n != want) die("%s: %zu bytes, its header implies %zu (truncated?)", path, n, want);
    uint32_t crc;
    memcpy(&crc, buf + n - sizeof crc, sizeof crc);
    if (crc != (uint32_t)crc32_z(0, (const unsigned char *)buf, n - sizeof crc))
        die("%s: checksum mismatch: the file is damaged", path);
    if (sh.corpus_bytes != corpus_len || sh.corpus_hash != corpus_hash)
        die("%s: the run was trained on a different corpus than %s", path, corpus_path);
    int threads = max_threads();
    if (rank == 0 && sh.threads && sh.threads != (uint32_t)threads)
        fprintf(stderr,
                "%s: note: --resume on %d thread%s, the run saved in %s ran on %u: the gradients' per-thread sums "
                "round differently, so the run goes on close to the uninterrupted one, not bit-identical (-j %u is)\n",
                prog, threads, plural(threads), path, sh.threads, sh.threads);
    const char *p = buf + state_header_bytes(&sh);
    *m = xcalloc(md->param_bytes, 1, "AdamW moments");
    *v = xcalloc(md->param_bytes, 1, "AdamW moments");
    memcpy(md->params, p, md->param_bytes);
    memcpy(*m, p + md->param_bytes, md->param_bytes);
    memcpy(*v, p + 2 * md->param_bytes, md->param_bytes);
    *o = sh.opts;
    if (sh.step > (uint64_t)o->max_iters)
        die("%s: step %llu is past its run's end (damaged?)", path, (unsigned long long)sh.step);
    *saved = sh;
    free(buf);
}

// Both files of a checkpoint (with_model 0: the state alone, --keep-best's model file holding
// better weights); the state first, as it holds its own copy of the weights.
// A failure says what is left on disk: the previous checkpoint, or none yet. (When the state
// is written and the model is not, the state holds the weights, and --resume goes on from it.)
// Every rank takes part: the weights must agree on all of them, and rank 0, which writes, has
// the other ranks' shards of the moments sent to it.
static void save_checkpoint(const char *out, const char *state_path, StateData *sd, int step, int with_model) {
    char err[512];
    const ModelData *md = sd->md;
    const char *none = "no checkpoint has been written yet";
    char what[64];
    snprintf(what, sizeof what, "weights after step %d", step);
    dist_check_same(sd->dist, md->params, md->param_bytes, what, "stopping without writing the checkpoint");
    if (sd->dist->rank) {
        dist_send_shard(sd->dist, sd->m);
        dist_send_shard(sd->dist, sd->v);
        sd->ours = 1;
        return;
    }
    sd->h.step = (uint64_t)step;
    if (write_atomic(state_path, write_state_cb, sd, err, sizeof err))
        die("%s; %s", err, sd->ours || sd->prior ? "the previous checkpoint is intact" : none);
    if (with_model && model_save_chat(out, &md->c, md->tok_blob, md->tok_bytes, md->chat, md->chat_bytes, md->params,
                                      err, sizeof err)) {
        if (sd->ours) die("%s; %s holds step %d, and --resume goes on from there", err, state_path, step);
        die("%s; %s", err, sd->prior ? "the previous model file is intact" : none);
    }
    sd->ours = 1;
}

// The log's first line; a log begins with LOG_COLUMNS_V1 (before eval_train_loss) or with this.
#define LOG_COLUMNS "step,train_loss,val_loss,eval_train_loss,lr,tokens_per_sec"
#define LOG_COLUMNS_V1 "step,train_loss,val_loss,lr,tokens_per_sec"

// The first rows of the log a run appends to: a new log's header, or on resume the old log
// (old) without its rows after the checkpoint's step.
typedef struct {
    const char *old;
    int start_step;
} LogStart;

static void write_log_start(Sink *s, const void *ctx) {
    const LogStart *ls = ctx;
    if (!ls->old) sink_write(s, LOG_COLUMNS "\n", strlen(LOG_COLUMNS) + 1);
    for (const char *line = ls->old, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        int step = 0;
        if (!strncmp(line, "step,", 5) || (sscanf(line, "%d,", &step) == 1 && step <= ls->start_step))
            sink_write(s, line, (size_t)(next - line));
    }
}

// The log, opened to append the run's rows after its first rows (write_log_start; a log of the
// columns before eval_train_loss is begun again, as its rows would not fit the header). Those
// are written whole and renamed over the old log: a kill at any moment leaves the old log or
// the new one, never an empty file that the next run would not know as its own.
static FILE *open_log(const char *path, int resume, int start_step) {
    size_t n = 0;
    char *old = resume && access(path, F_OK) == 0 ? read_file(path, &n, "the log") : NULL;
    if (old && strncmp(old, LOG_COLUMNS "\n", strlen(LOG_COLUMNS) + 1)) {
        free(old);
        old = NULL;
    }
    LogStart start = {old, start_step};
    char err[512];
    if (write_atomic(path, write_log_start, &start, err, sizeof err)) die("%s", err);
    free(old);
    FILE *csv = fopen(path, "a");
    if (!csv) die("%s: cannot write the log: %s", path, strerror(errno));
    return csv;
}

static void dump_grads(const char *prefix, const float *grads, const ParamTensor *pt, int npt) {
    char p[4096];
    snprintf(p, sizeof p, "%s.grads", prefix);
    FILE *f = fopen(p, "wb");
    if (!f) die("%s: cannot write the dump", p);
    for (int i = 0; i < npt; i++) {
        uint64_t n = pt[i].n;
        fwrite(pt[i].name, 1, sizeof pt[i].name, f);
        fwrite(&n, sizeof n, 1, f);
        fwrite(grads + pt[i].off, sizeof(float), n, f);
    }
    if (ferror(f) | fclose(f)) die("%s: cannot write the dump", p);
}

static Config config_from_opts(const Opts *o, int vocab_size) {
    if (o->n_embd % o->n_head) die("--n-embd %d is not a multiple of --n-head %d", o->n_embd, o->n_head);
    if (o->n_head % o->n_kv_head) die("--n-head %d is not a multiple of --n-kv-head %d", o->n_head, o->n_kv_head);
    int hd = o->n_embd / o->n_head;
    Config c = {
        .dim = o->n_embd,
        .n_layers = o->n_layer,
        .n_heads = o->n_head,
        .n_kv_heads = o->n_kv_head,
        .head_dim = hd,
        .vocab_size = vocab_size,
        .seq_len = o->block_size,
        .final_norm = 1,
        .tied_classifier = 1,
        .embed_scale = 1.0f,
        .norm_eps = 1e-5f,
        .tok_kind = TOK_SENTENCEPIECE,
        .bos_id = -1,
        .eos_id = -1,
        .rope_theta = 10000.0f, // FORMAT.md wants a valid theta even where it is ignored
    };
    if (o->arch == ARCH_GPT) {
        c.hidden_dim = 4 * o->n_embd;
        c.pos_kind = POS_LEARNED;
        c.ffn_kind = FFN_GELU_TANH;
        c.norm_kind = NORM_LAYER;
        c.bias_flags = BIAS_ALL;
    } else {
        if (hd % 2) die("--arch llama: head size %d (n-embd / n-head) must be even for RoPE", hd);
        // Llama's SwiGLU width: two thirds of 4 * dim, rounded up to a multiple of 32
        c.hidden_dim = (2 * 4 * o->n_embd / 3 + 31) / 32 * 32;
        c.pos_kind = POS_ROPE;
        c.rope_dims = hd;
        c.ffn_kind = FFN_SWIGLU;
        c.norm_kind = NORM_RMS;
    }
    FileHeader h = header_from_config(&c);
    char err[256];
    if (config_from_header(&h, &c, err, sizeof err)) die("the model options give an invalid model: %s", err);
    return c;
}

static void show_learning(void *ctx, int pieces, int vocab_size) {
    progress_show(ctx, "learning the vocabulary", pieces, vocab_size, "pieces", pieces, "pieces");
}

// The model a run starts from, into md: from the resume state (with its moments, options and
// step), from --init's model file, or new from the options, with a vocabulary learned from
// the corpus and parameters the caller initialises.
// The memory the run needs is checked before its big allocations (check_memory). saved: on
// --resume, the state's header; otherwise a new run's (step 0, no best loss yet).
static void build_model(const Args *args, Opts *o, const char *corpus, size_t corpus_len, uint64_t corpus_hash,
                        const char *state_path, ModelData *md, float **m, float **v, StateHeader *saved) {
    char err[512];
    *saved = (StateHeader){.best_val = INFINITY};
    if (args->resume) {
        load_state(args->out, state_path, args->data, corpus_len, corpus_hash, md, m, v, o, saved, args->rank,
                   args->ranks);
        check_resume_ranks(args, o, state_path);
        // The run goes on with its own options; past the end of a longer run's decay it trains
        // on at --min-lr.
        take_resume_flags(args, o, state_path);
        if ((uint64_t)o->max_iters < saved->step)
            die("--max-iters %d: %s is already at step %llu; give a larger --max-iters to go on", o->max_iters,
                args->out, (unsigned long long)saved->step);
    } else if (args->init) {
        int shape_given = args->arch_given || flag_given(args, "n-layer") || flag_given(args, "n-head") ||
                          flag_given(args, "n-kv-head") || flag_given(args, "n-embd");
        if (shape_given)
            fprintf(stderr, "%s: note: --init keeps the architecture of %s; --arch and --n-* are ignored\n", prog,
                    args->init);
        read_model(md, args->init, 1, "");
        if (!flag_given(args, "block-size")) o->block_size = md->c.seq_len;
        if (o->block_size > md->c.seq_len)
            die("--block-size %d exceeds %s's context length %d", o->block_size, args->init, md->c.seq_len);
        check_memory(&md->c, o, args->ranks, args->rank == 0, corpus_len, 0, 0, vocabulary_merges(md->tok_blob));
    } else if (args->tokenizer_from) {
        Config tok;
        read_tokenizer(md, args->tokenizer_from, &tok);
        md->c = config_from_opts(o, tok.vocab_size);
        md->c.tok_kind = tok.tok_kind, md->c.tok_flags = tok.tok_flags;
        md->c.bos_id = tok.bos_id, md->c.eos_id = tok.eos_id;
        check_memory(&md->c, o, args->ranks, args->rank == 0, corpus_len, 0, 0, vocabulary_merges(md->tok_blob));
        md->param_bytes = carve_weights(&md->c, NULL, NULL);
        md->params = xcalloc(md->param_bytes, 1, "parameters");
    } else {
        if (o->vocab_size) { // before the learning, which holds the most, with the vocabulary it may reach
            Config most = config_from_opts(o, o->vocab_size);
            check_memory(&most, o, args->ranks, args->rank == 0, corpus_len, 0, 1, 1);
        }
        Progress progress = progress_start();
        TokProgress report = {show_learning, &progress};
        int rc = o->vocab_size
                     ? tokenizer_learn_bpe(corpus, corpus_len, o->vocab_size, &report, &md->tok_blob, &md->tok_bytes,
                                           err, sizeof err)
                     : tokenizer_learn_chars(corpus, corpus_len, &md->tok_blob, &md->tok_bytes, err, sizeof err);
        progress_end(&progress);
        if (rc) die("%s: cannot learn a vocabulary: %s", args->data, err);
        uint32_t n_pieces;
        memcpy(&n_pieces, md->tok_blob, 4);
        if (o->vocab_size && (int)n_pieces < o->vocab_size)
            fprintf(stderr,
                    "%s: note: --vocab-size %d: the corpus gives %u pieces, as no pair of adjacent pieces occurs "
                    "twice after the last merge; the model's vocabulary is %u (a larger corpus gives more)\n",
                    prog, o->vocab_size, n_pieces, n_pieces);
        md->c = config_from_opts(o, (int)n_pieces);
        if (!o->vocab_size)
            check_memory(&md->c, o, args->ranks, args->rank == 0, corpus_len, 0, 0, vocabulary_merges(md->tok_blob));
        md->param_bytes = carve_weights(&md->c, NULL, NULL);
        md->params = xcalloc(md->param_bytes, 1, "parameters");
    }
    if (o->block_size > md->c.seq_len)
        die("block size %d exceeds the model's context length %d", o->block_size, md->c.seq_len);
}

// What save_checkpoint writes into MODEL.state, set up once for the run.
static StateData state_data(const ModelData *md, const Dist *dist, const float *m, const float *v, const Opts *o,
                            size_t corpus_len, uint64_t corpus_hash) {
    StateData sd = {.md = md, .dist = dist, .m = m, .v = v};
    memcpy(sd.h.magic, STATE_MAGIC, 8);
    sd.h.version = STATE_VERSION;
    sd.h.opts_bytes = sizeof(Opts);
    sd.h.corpus_bytes = corpus_len;
    sd.h.corpus_hash = corpus_hash;
    sd.h.model_hash = model_hash(md);
    sd.h.param_bytes = md->param_bytes;
    sd.h.opts = *o;
    sd.h.threads = (uint32_t)max_threads();
    return sd;
}

// Test hook (--dump PREFIX, docs/TRAINING.md): each micro-batch's tokens and targets appended
// to PREFIX.batches, the file started anew with the run's first.
static void dump_batch(const char *prefix, const Acts *a, int first) {
    char path[4096];
    size_t n = (size_t)a->B * a->T * sizeof(int);
    snprintf(path, sizeof path, "%s.batches", prefix);
    FILE *f = fopen(path, first ? "wb" : "ab");
    if (!f || fwrite(a->tokens, 1, n, f) != n || fwrite(a->targets, 1, n, f) != n || fclose(f))
        die("%s: cannot write the dump", path);
}

#endif
