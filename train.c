// train.c: train an attn.c model on a text file, on the CPU, and write a model file ./run loads.
//   ./train -d corpus.txt -o model.bin
// The layout follows llm.c's train_gpt2.c: parameters, gradients, the two AdamW moments and the
// activations each live in one allocation carved into named tensors; every layer's _forward
// and _backward stand side by side in model/, the same kernels ./run uses. This file is the
// loop: build the model, then train_step, evaluate and checkpoint until done. Under mpirun
// (make MPI=1) every rank runs it on its share of the micro-batches (training/dist.h).
#define _GNU_SOURCE
#include <signal.h>
#include "model.h"
#include "tokenizer.h"

static const char *prog = "train";
#include "io/cli.h"
#include "training/options.h"
#include "training/random.h"
#include "training/params.h"
#include "training/acts.h"
#include "training/step.h"
#include "training/optim.h"
#include "training/checkpoint.h"
#include "training/data.h"
#include "training/dist.h"

// The temperature of the samples printed at each evaluation, as nanoGPT's sample.py.
#define SAMPLE_TEMPERATURE 0.8f
// How many tokens each of those samples has.
#define SAMPLE_TOKENS 200

// Everything a run holds while it trains.
typedef struct {
    Opts o;
    ModelData md;       // config, tokenizer and parameters (md.params)
    Weights w;          // views into md.params
    Weights *grads;     // (threads) views into grad_mem, one copy per thread
    float *grad_mem;    // (threads, n_floats) gradients; the first copy is the sum
    float *m, *v;       // (dist.hi - dist.lo) AdamW moments of this rank's shard
    Dist dist;          // the ranks training together; one alone
    double *micro_loss; // (o.grad_accum) the losses of a step's micro-batches, over all ranks
    size_t n_floats;    // floats in the parameter block, padding included
    ParamTensor *pt;    // (npt) named parameter tensors
    int npt, threads;
    Acts acts; // activations for batch_size sequences of block_size tokens
    Dropout drop;
    Tokenizer tok;
    int *ids; // (n_ids) the corpus as tokens; train and val point into it
    int n_ids;
    Split train, val;
    RunState rs;          // ./run's forward state, for the samples
    Sampler sampler;      // the samples' sampler
    float *sample_logits; // (vocab_size)
} Trainer;

static volatile sig_atomic_t stop_signal = 0;
static void on_signal(int sig) { stop_signal = sig; }

// Ctrl-C, kill and a closed terminal (an ssh drop) end the run at the next step boundary with a
// checkpoint; a second one stops at once. A closed stdout (`./train | head`) is not a signal
// but a failed write, seen at the end of each step.
static void catch_stop_signals(void) {
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND};
    int signals[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

// Refuses to start from parameters that are not finite, naming the first such tensor.
static void check_finite_params(const Trainer *t, const char *source) {
    for (int i = 0; i < t->npt; i++) {
        const float *p = t->md.params + t->pt[i].off;
        for (size_t j = 0; j < t->pt[i].n; j++)
            if (!isfinite(p[j]))
                die("%s: the initial weights are not finite: %s[%zu] is %g; training cannot start from them", source,
                    t->pt[i].name, j, p[j]);
    }
}

// Parameters, gradients and moments: one block each, carved the same way; the gradients' block
// holds a copy per thread (model_step), the first of which the optimiser reads. m and v share
// the parameters' tensor offsets.
static void trainer_init(Trainer *t, const Args *args, int fresh, const char *state_path) {
    Config *c = &t->md.c;
    t->threads = max_threads();
    t->n_floats = t->md.param_bytes / sizeof(float);
    t->grad_mem = xcalloc(t->n_floats * t->threads, sizeof(float), "gradients");
    dist_shard(&t->dist, t->n_floats);
    t->m = dist_moment_shard(&t->dist, t->m);
    t->v = dist_moment_shard(&t->dist, t->v);
    t->micro_loss = xcalloc((size_t)t->o.grad_accum, sizeof(double), "the losses");
    t->grads = xcalloc(t->threads, sizeof *t->grads, "gradients");
    if (weights_init(&t->w, c, t->md.params)) die("out of memory");
    for (int i = 0; i < t->threads; i++)
        if (weights_init(&t->grads[i], c, t->grad_mem + i * t->n_floats)) die("out of memory");
    t->pt = xcalloc(max_params(c), sizeof *t->pt, "the tensor list");
    t->npt = list_params(c, &t->w, t->md.params, t->pt);
    if (fresh) init_params(c, t->md.params, t->pt, t->npt, (uint64_t)t->o.seed);
    else check_finite_params(t, args->resume ? state_path : args->init);
    // A p below 2^-25 rounds to a threshold of 0: no dropout, and no buffer for it.
    t->drop = dropout_init(t->o.dropout, (uint64_t)t->o.seed);
    acts_init(&t->acts, c, t->o.batch_size, t->o.block_size, t->drop.threshold != 0);
    if (state_init(&t->rs, c, 1)) die("out of memory for the sampling state");
    if (sampler_init(&t->sampler, c->vocab_size, SAMPLE_TEMPERATURE, 1)) die("out of memory");
    t->sample_logits = xcalloc(c->vocab_size, sizeof(float), "logits");
}

static void trainer_free(Trainer *t) {
    free(t->sample_logits);
    sampler_free(&t->sampler);
    state_free(&t->rs);
    acts_free(&t->acts);
    free(t->pt);
    weights_free(&t->w);
    for (int i = 0; i < t->threads; i++) weights_free(&t->grads[i]);
    free(t->grads);
    free(t->grad_mem);
    free(t->micro_loss);
    free(t->m);
    free(t->v);
    free(t->md.params);
    free(t->md.tok_blob);
    free(t->md.chat);
    free(t->ids);
    tokenizer_free(&t->tok);
}

// One optimiser step: grad_accum micro-batches forward and backward (rank r of N takes
// micro-batches r, r + N, ...), the gradients summed over them and the ranks and clipped, then
// AdamW on this rank's shard, which every rank then receives. Returns the mean loss; dies,
// leaving the checkpoint as it was, when training has diverged.
static double train_step(Trainer *t, int step, const Args *args, int start_step, int tty) {
    const Opts *o = &t->o;
    Dist *d = &t->dist;
    int B = o->batch_size, T = o->block_size, sites = 1 + 3 * t->md.c.n_layers;
    float dscale = 1.0f / ((float)B * T * o->grad_accum);
    memset(t->micro_loss, 0, (size_t)o->grad_accum * sizeof *t->micro_loss);
    for (int micro = d->rank; micro < o->grad_accum; micro += d->ranks) {
        uint64_t draw = (uint64_t)step * o->grad_accum + micro;
        fill_batch(&t->acts, &t->train, B, rng_for((uint64_t)o->seed, RNG_BATCH, draw));
        if (args->dump) dump_batch(args->dump, &t->acts, step == start_step && micro == 0);
        t->drop.draw = draw * sites;
        t->micro_loss[micro] =
            model_step(&t->md.c, &t->w, t->grads, &t->acts, B, dscale, t->drop.threshold ? &t->drop : NULL);
    }
    double grad_sq = reduce_grads(t->grad_mem, t->n_floats, t->threads);
    float *grads = dist_sum_step(d, t->grad_mem, t->n_floats, &grad_sq, t->micro_loss, o->grad_accum);
    double loss = 0.0; // added in draw order, as one process would
    for (int micro = 0; micro < o->grad_accum; micro++) loss += t->micro_loss[micro] / o->grad_accum;
    if (!isfinite(loss)) {
        if (tty) putchar('\n');
        die("loss is %g at step %d: training diverged; stopping without overwriting %s (try a lower --lr)", loss,
            step + 1, args->out);
    }
    if (args->dump && step == start_step) dump_grads(args->dump, t->grad_mem, t->pt, t->npt);
    adamw_step(t->md.params, grads, t->m, t->v, d->lo, d->hi, t->pt, t->npt, get_lr(o, step), o->weight_decay, o->beta1,
               o->beta2, step + 1, clip_scale(grad_sq, o->grad_clip));
    dist_gather_params(d, t->md.params);
    return loss;
}

// A short sample through ./run's inference path (forward, the sampler), from the first token
// of the validation split.
static void print_sample(Trainer *t, uint64_t rng) {
    const Config *c = &t->md.c;
    char out[3 * 1024 + 64];
    TokSanitizer san = {0};
    int token = t->val.ids[0], prev = -1, n = SAMPLE_TOKENS < c->seq_len ? SAMPLE_TOKENS : c->seq_len;
    fputs("---\n", stdout);
    for (int pos = 0; pos < n; pos++) {
        size_t len;
        const char *piece = tokenizer_decode(&t->tok, prev, token, &len);
        if (piece && len <= 1024) fwrite(out, 1, tokenizer_sanitize(&san, piece, len, out, 0), stdout);
        if (pos + 1 == n) break;
        forward(c, &t->w, &t->rs, &token, 1, pos, t->sample_logits, 0);
        prev = token;
        token = sample_coin(&t->sampler, t->sample_logits, NULL, 0, (float)uniform01(&rng));
    }
    fwrite(out, 1, tokenizer_sanitize(&san, "", 0, out, 1), stdout);
    fputs("\n---\n", stdout);
}

// Both splits' losses, on eval_iters batches each.
static void evaluate(Trainer *t, double *train_loss, double *val_loss) {
    const Opts *o = &t->o;
    *train_loss = estimate_loss(&t->md.c, &t->w, &t->acts, &t->train, o->eval_iters, (uint64_t)o->seed, RNG_EVAL_TRAIN);
    *val_loss = estimate_loss(&t->md.c, &t->w, &t->acts, &t->val, o->eval_iters, (uint64_t)o->seed, RNG_EVAL_VAL);
}

// An evaluation's line and a sample; a loss that is not finite stops the run before it is saved.
static void report_evaluation(Trainer *t, int step, int tty, double train_loss, double val_loss, const char *out) {
    printf("%sstep %d: train loss %.4f, val loss %.4f\n", tty ? "\r\033[K" : "", step, train_loss, val_loss);
    if (!isfinite(train_loss) || !isfinite(val_loss))
        die("evaluation loss is not finite at step %d; stopping without overwriting %s", step, out);
    print_sample(t, rng_for((uint64_t)t->o.seed, RNG_SAMPLE, step));
}

// The step's row in the CSV log (val_loss empty between evaluations; rank 0's alone, the
// others have no csv) and its status: on a terminal a line rewritten in place with an ETA,
// otherwise a line every 10 steps; under mpirun both end with the ranks and threads (spread).
static void log_step(FILE *csv, const Opts *o, int step, double loss, float lr, double tps, double tps_avg,
                     size_t tokens_per_step, int tty, int eval, double val_loss, const char *spread) {
    if (!csv) return;
    fprintf(csv, "%d,%.9g,", step, loss);
    if (eval) fprintf(csv, "%.9g", val_loss);
    fprintf(csv, ",%.9g,%.1f\n", lr, tps);
    fflush(csv);
    if (tty) {
        int eta = (int)((o->max_iters - step) * tokens_per_step / tps_avg);
        printf("\rstep %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %d:%02d%s%s   ", step, o->max_iters, loss, lr,
               tps_avg, eta / 60, eta % 60, *spread ? "  " : "", spread);
    } else if (step % 10 == 0 || step == o->max_iters) {
        int eta = (int)((o->max_iters - step) * tokens_per_step / tps_avg);
        printf("iter %d/%d: loss %.4f, lr %.2e, %.0f tok/s, ETA %d:%02d%s%s\n", step, o->max_iters, loss, lr, tps,
               eta / 60, eta % 60, *spread ? ", " : "", spread);
    }
}

// Under mpirun, "2 ranks x 1 thread"; alone, "".
static void spread_of(const Trainer *t, char *buf, size_t size) {
    if (t->dist.mpi) dist_describe(&t->dist, t->threads, buf, size);
    else *buf = 0;
}

static void print_summary(const Trainer *t, const char *corpus_path) {
    const Config *c = &t->md.c;
    size_t nparams = 0;
    for (int i = 0; i < t->npt; i++) nparams += t->pt[i].n;
    printf("model: %s, %d layer%s, %d head%s (%d kv), dim %d, hidden %d, vocab %d, context %d: %.2fM parameters\n",
           c->norm_kind == NORM_LAYER ? "LayerNorm" : "RMSNorm", c->n_layers, plural(c->n_layers), c->n_heads,
           plural(c->n_heads), c->n_kv_heads, c->dim, c->hidden_dim, c->vocab_size, c->seq_len, nparams / 1e6);
    char spread[64];
    dist_describe(&t->dist, t->threads, spread, sizeof spread);
    printf("data: %s, %d tokens (%zu train, %zu val); batch %d x %d x %d accum; %s\n", input_name(corpus_path),
           t->n_ids, t->train.n, t->val.n, t->o.batch_size, t->o.block_size, t->o.grad_accum, spread);
    char err[64];
    int newline;
    if (c->bos_id < 0 && c->eos_id < 0 && tokenizer_encode(&t->tok, "\n", 1, 0, &newline, 1, err, sizeof err) != 1)
        printf("note: the vocabulary has no newline and no BOS token to start from: ./run needs a prompt (-i)\n");
}

int main(int argc, char **argv) {
    prefer_passive_threads(argv);
    // t is static so that a die() on a bad input, which exits while it is live, leaves what it
    // holds reachable: held only in a register, LeakSanitizer calls it a leak (so is corpus).
    static Trainer t;
    t.dist = dist_init(&argc, &argv);
    Args args;
    parse_args(&args, argc, argv, t.dist.rank, t.dist.ranks);
    choose_threads(dist_threads(&t.dist, args.threads));
    RunFiles files = claim_outputs(&args);
    signal(SIGXFSZ, SIG_IGN); // a full disk under `ulimit -f` must fail the write, not kill the process

    static char *corpus;
    size_t corpus_len;
    corpus = read_corpus(args.data, &corpus_len);
    uint64_t corpus_hash = fnv1a(corpus, corpus_len);
    int start_step;
    t.o = args.o;
    build_model(&args, &t.o, corpus, corpus_len, corpus_hash, files.state, &t.md, &t.m, &t.v, &start_step);
    encode_corpus(&t.md.c, t.md.tok_blob, t.md.tok_bytes, corpus, corpus_len, input_name(args.data), t.o.block_size,
                  &t.tok, &t.ids, &t.n_ids, &t.train, &t.val);
    free(corpus);
    trainer_init(&t, &args, !args.resume && !args.init, files.state);
    dist_check_binding(&t.dist, t.threads);
    print_summary(&t, args.data);
    if (start_step) printf("resuming at step %d of %d\n", start_step, t.o.max_iters);
    fflush(stdout);

    FILE *csv = t.dist.rank ? NULL : open_log(files.csv, args.resume, start_step);
    catch_stop_signals();
    StateData sd = state_data(&t.md, &t.dist, t.m, t.v, &t.o, corpus_len, corpus_hash);
    dist_check_same(&t.dist, &sd.h, sizeof sd.h, "corpus, model or options",
                    "every rank must run the same command on the same corpus (and, resuming, the same checkpoint)");
    sd.ours = args.resume;
    sd.prior = access(args.out, F_OK) == 0 && access(files.state, F_OK) == 0;

    int tty = isatty(STDOUT_FILENO), step = start_step, signal_seen = 0, stdout_error = 0;
    size_t tokens_per_step = (size_t)t.o.batch_size * t.o.block_size * t.o.grad_accum;
    double train_time = 0.0, t_start = now_s(), tps_avg = 0.0;
    char spread[64];
    spread_of(&t, spread, sizeof spread);
    while (step < t.o.max_iters && !signal_seen && !stdout_error) {
        double t0 = now_s(), train_loss = 0.0, val_loss = 0.0;
        float lr = get_lr(&t.o, step);
        double loss = train_step(&t, step, &args, start_step, tty);
        double dt = now_s() - t0, tps = tokens_per_step / dt;
        step++;
        train_time += dt;
        tps_avg = tps_avg == 0.0 ? tps : 0.9 * tps_avg + 0.1 * tps;
        int eval = step % t.o.eval_interval == 0 || step == t.o.max_iters, speaks = t.dist.rank == 0;
        if (eval && speaks) evaluate(&t, &train_loss, &val_loss);
        log_step(csv, &t.o, step, loss, lr, tps, tps_avg, tokens_per_step, tty, eval, val_loss, spread);
        if (eval && speaks) report_evaluation(&t, step, tty, train_loss, val_loss, args.out);
        if (fflush(stdout) || ferror(stdout)) stdout_error = errno ? errno : EIO;
        int halt[2] = {(int)stop_signal, stdout_error};
        dist_max(&t.dist, halt, 2); // every rank stops at the same step
        signal_seen = halt[0];
        stdout_error = halt[1];
        if (eval || signal_seen || stdout_error) save_checkpoint(args.out, files.state, &sd, step);
    }
    if (stdout_error) {
        fprintf(stderr, "%s: stdout: cannot write: %s; checkpoint of step %d written to %s (continue with --resume)\n",
                prog, strerror(stdout_error), step, args.out);
    } else if (signal_seen) {
        printf("%sstopped by signal %d at step %d; checkpoint written to %s (continue with --resume)\n",
               tty ? "\n" : "", signal_seen, step, args.out);
    } else {
        if (tty) putchar('\n');
        if (step == start_step) save_checkpoint(args.out, files.state, &sd, step); // --max-iters 0: the initial model
        size_t counted = 0;
        double full = t.dist.rank ? 0.0 : full_loss(&t.md.c, &t.w, &t.acts, &t.val, &counted, tty);
        printf("done: %d steps, %.1f s training (%.0f tok/s), %.1f s total; val loss over %s validation split "
               "(%zu tokens): %.4f\n",
               step - start_step, train_time, (step - start_step) * tokens_per_step / (train_time > 0 ? train_time : 1),
               now_s() - t_start, t.val.n > FULL_LOSS_MAX_TOKENS + 1 ? "the start of the" : "the whole", counted, full);
        if (t.dist.mpi)
            printf("%s: %.3f s of the training in the ranks' collectives (rank 0's, waits for the others included)\n",
                   spread, t.dist.comm_s);
    }
    if (csv) fclose(csv);
    trainer_free(&t);
    release_outputs(&files);
    dist_finish(&t.dist);
    return stdout_error ? 1 : 0;
}
