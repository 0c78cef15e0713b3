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
#include "training/outputs.h"
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
    RunState rs;           // ./run's forward state, for the samples
    Sampler sampler;       // the samples' sampler
    float *sample_logits;  // (vocab_size)
    int *prompt, n_prompt; // --sample-prompt as tokens (n_prompt 0 without it)
    int tty;               // the status is a line rewritten in place (status_on_terminal)
    double last_line;      // when a plain status last printed a line
} Trainer;

static volatile sig_atomic_t stop_signal = 0;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
static int caught[3];         // which of stop_signals the handler has
static char stop_notice[128]; // what the first one prints at once (empty on ranks other than 0)
static size_t stop_notice_len;

// The first stop signal asks for a checkpoint after the micro-batch in progress; the handler
// then gives all three back their default action, so that the next one ends the process at once.
static void on_signal(int sig) {
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int i = 0; i < 3; i++)
        if (caught[i]) sigaction(stop_signals[i], &dfl, NULL);
    stop_signal = sig;
    if (stop_notice_len && write(STDERR_FILENO, stop_notice, stop_notice_len) < 0) stop_notice_len = 0;
}

// Ctrl-C, kill and a closed terminal (an ssh drop) end the run after the micro-batch (or the
// evaluation batch) in progress with a checkpoint; a second one stops at once. A signal this
// process was started ignoring (nohup, trap '' HUP) stays ignored. A closed stdout
// (`./train | head`) is not a signal but a failed write, seen at the end of each step.
static void catch_stop_signals(int speaks, int tty) {
    if (speaks)
        stop_notice_len = (size_t)snprintf(stop_notice, sizeof stop_notice,
                                           "%s%s: stopping: checkpoint after this micro-batch (again to quit now)\n",
                                           tty ? "\n" : "", prog);
    struct sigaction sa = {.sa_handler = on_signal}, old;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
    for (int i = 0; i < 3; i++) {
        if (sigaction(stop_signals[i], NULL, &old) || old.sa_handler == SIG_IGN) continue;
        caught[i] = 1;
        sigaction(stop_signals[i], &sa, NULL);
    }
    signal(SIGPIPE, SIG_IGN);
}

// --progress auto: a terminal is what stdout is, except under mpirun, which hands each rank a
// pseudo-terminal of its own whatever its own stdout is (a file, a pipe): there the status is
// a terminal's only when mpirun's stdout is one. Rank 0 runs as a child of mpirun (on
// mpirun's machine, as Open MPI and MPICH's hydra start it), whose stdout /proc shows.
static int status_on_terminal(int mode, int mpi) {
    if (mode != PROGRESS_AUTO) return mode == PROGRESS_TTY;
    if (!mpi) return isatty(STDOUT_FILENO);
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/%d/fd/1", (int)getppid());
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = 0;
    return !strncmp(target, "/dev/pts/", 9) || !strncmp(target, "/dev/tty", 8);
}

// A plain status prints a line when it has been quiet for PLAIN_LINE_SECONDS (rank 0): what
// is going on, so that a log shows the run alive however slow its steps are.
static void still_working(Trainer *t, const char *what, int done, int total) {
    if (t->tty || t->dist.rank || now_s() - t->last_line < PLAIN_LINE_SECONDS) return;
    printf("%s: %d of %d\n", what, done, total);
    fflush(stdout);
    t->last_line = now_s();
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
    if (state_init(&t->rs, c, 1, WEIGHTS_F32)) die("out of memory for the sampling state");
    if (sampler_init(&t->sampler, c->vocab_size, SAMPLE_TEMPERATURE, 1)) die("out of memory");
    t->sample_logits = xcalloc(c->vocab_size, sizeof(float), "logits");
    t->last_line = now_s();
}

// --sample-prompt as tokens, which must leave the samples room in the context.
static void encode_prompt(Trainer *t, const char *prompt) {
    char err[256], why[64];
    size_t len = strlen(prompt);
    if (text_problem(prompt, len, why, sizeof why)) die("--sample-prompt: not UTF-8 text: %s", why);
    size_t cap = tokenizer_max_tokens(&t->tok, len);
    t->prompt = xcalloc(cap, sizeof(int), "the prompt");
    t->n_prompt = tokenizer_encode(&t->tok, prompt, len, 0, t->prompt, (int)cap, err, sizeof err);
    if (t->n_prompt < 0) die("--sample-prompt: cannot encode it with the model's vocabulary: %s", err);
    if (t->n_prompt == 0) die("--sample-prompt: encodes to no tokens");
    if (t->n_prompt >= t->md.c.seq_len)
        die("--sample-prompt: %d tokens, which leave no room in the model's context of %d", t->n_prompt,
            t->md.c.seq_len);
}

static void trainer_free(Trainer *t) {
    free(t->sample_logits);
    free(t->prompt);
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
// AdamW on this rank's shard, which every rank then receives. The mean loss goes to *loss;
// returns 0. After each micro-batch the ranks agree whether a signal came; if one did, the step
// is given up before it changes the weights, returning the signal, and the run checkpoints the
// step before it: as the data order is a function of the step, --resume does this step again
// exactly. Dies, leaving the checkpoint as it was, when training has diverged.
static int train_step(Trainer *t, int step, const Args *args, int start_step, double *loss_out) {
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
            model_step(&t->md.c, &t->w, t->grads, &t->acts, B, dscale, t->drop.threshold ? &t->drop : NULL,
                       o->precision == PRECISION_BF16 && BF16_FAST);
        int sig = dist_any(d, (int)stop_signal);
        if (sig) return sig;
        char what[64];
        snprintf(what, sizeof what, "step %d/%d: micro-batches", step + 1, o->max_iters);
        still_working(t, what, micro + d->ranks, o->grad_accum);
    }
    double grad_sq = reduce_grads(t->grad_mem, t->n_floats, t->threads);
    float *grads = dist_sum_step(d, t->grad_mem, t->n_floats, &grad_sq, t->micro_loss, o->grad_accum);
    double loss = 0.0; // added in draw order, as one process would
    for (int micro = 0; micro < o->grad_accum; micro++) loss += t->micro_loss[micro] / o->grad_accum;
    if (!isfinite(loss)) {
        if (t->tty) putchar('\n');
        die("loss is %g at step %d: training diverged; stopping without overwriting %s (try a lower --lr)", loss,
            step + 1, args->out);
    }
    if (args->dump && step == start_step) dump_grads(args->dump, t->grad_mem, t->pt, t->npt);
    adamw_step(t->md.params, grads, t->m, t->v, d->lo, d->hi, t->pt, t->npt, get_lr(o, step), o->weight_decay, o->beta1,
               o->beta2, step + 1, clip_scale(grad_sq, o->grad_clip));
    dist_gather_params(d, t->md.params);
    *loss_out = loss;
    return 0;
}

// A short sample through ./run's inference path (forward, the sampler), from --sample-prompt
// (printed first) or else from the first token of the validation split.
static void print_sample(Trainer *t, uint64_t rng) {
    const Config *c = &t->md.c;
    char out[3 * 1024 + 64];
    TokSanitizer san = {0};
    int n = t->n_prompt + SAMPLE_TOKENS < c->seq_len ? t->n_prompt + SAMPLE_TOKENS : c->seq_len;
    int token = t->n_prompt ? t->prompt[0] : t->val.ids[0], prev = -1;
    fputs("---\n", stdout);
    for (int pos = 0; pos < n; pos++) {
        size_t len;
        const char *piece = tokenizer_decode(&t->tok, prev, token, &len);
        if (piece && len <= 1024) fwrite(out, 1, tokenizer_sanitize(&san, piece, len, out, 0), stdout);
        if (pos + 1 == n) break;
        forward(c, &t->w, &t->rs, &token, 1, pos, t->sample_logits, 0);
        prev = token;
        if (pos + 1 < t->n_prompt) token = t->prompt[pos + 1];
        else token = sample_coin(&t->sampler, t->sample_logits, NULL, 0, (float)uniform01(&rng));
    }
    fwrite(out, 1, tokenizer_sanitize(&san, "", 0, out, 1), stdout);
    fputs("\n---\n", stdout);
}

static void evaluation_tick(void *ctx, int done, int total) { still_working(ctx, "evaluating: batches", done, total); }

// Both splits' losses, on eval_iters batches each; 0 if a signal stopped it first.
static int evaluate(Trainer *t, double *train_loss, double *val_loss) {
    const Opts *o = &t->o;
    EvalTick tick = {evaluation_tick, t};
    *train_loss = estimate_loss(&t->md.c, &t->w, &t->acts, &t->train, o->eval_iters, (uint64_t)o->seed, RNG_EVAL_TRAIN,
                                &stop_signal, tick);
    *val_loss = estimate_loss(&t->md.c, &t->w, &t->acts, &t->val, o->eval_iters, (uint64_t)o->seed, RNG_EVAL_VAL,
                              &stop_signal, tick);
    return !stop_signal;
}

// A step as its log row has it: loss, learning rate and tokens/s (NaN at step 0, before any
// training), and when evaluated, the evaluation's losses.
typedef struct {
    double loss, lr, tps;
    int evaluated;
    double eval_train, val;
} StepRow;

// The step's row in the CSV log (rank 0's alone, the others have no csv); a NaN is left empty.
static void log_row(FILE *csv, int step, const StepRow *r) {
    if (!csv) return;
    double fields[] = {r->loss, r->evaluated ? r->val : NAN, r->evaluated ? r->eval_train : NAN, r->lr, r->tps};
    const char *formats[] = {"%.9g", "%.9g", "%.9g", "%.9g", "%.1f"};
    fprintf(csv, "%d", step);
    for (int i = 0; i < 5; i++) {
        fputc(',', csv);
        if (!isnan(fields[i])) fprintf(csv, formats[i], fields[i]);
    }
    fputc('\n', csv);
    fflush(csv);
}

// The step's status (rank 0): on a terminal a line rewritten in place with an ETA, otherwise a
// line every 10 steps and whenever PLAIN_LINE_SECONDS have passed without one; under mpirun
// both end with the ranks and threads (spread).
static void show_step(Trainer *t, int step, const StepRow *r, double tps_avg, size_t tokens_per_step,
                      const char *spread) {
    const Opts *o = &t->o;
    if (t->dist.rank || isnan(r->loss)) return;
    int eta = (int)((o->max_iters - step) * tokens_per_step / tps_avg);
    if (t->tty) {
        printf("\rstep %d/%d  loss %.4f  lr %.2e  %.0f tok/s  ETA %d:%02d%s%s   ", step, o->max_iters, r->loss, r->lr,
               tps_avg, eta / 60, eta % 60, *spread ? "  " : "", spread);
    } else if (step % 10 == 0 || step == o->max_iters || now_s() - t->last_line >= PLAIN_LINE_SECONDS) {
        printf("iter %d/%d: loss %.4f, lr %.2e, %.0f tok/s, ETA %d:%02d%s%s\n", step, o->max_iters, r->loss, r->lr,
               r->tps, eta / 60, eta % 60, *spread ? ", " : "", spread);
        t->last_line = now_s();
    }
}

// An evaluation's line and a sample; a loss that is not finite stops the run before it is saved,
// except a run of --max-iters 0, which trains nothing and so writes the model it was given.
static void report_evaluation(Trainer *t, int step, const StepRow *r, const char *out) {
    printf("%sstep %d: train loss %.4f, val loss %.4f\n", t->tty ? "\r\033[K" : "", step, r->eval_train, r->val);
    int finite = isfinite(r->eval_train) && isfinite(r->val);
    if (!finite && t->o.max_iters > 0)
        die("evaluation loss is not finite at step %d; stopping without overwriting %s", step, out);
    if (!finite) {
        fprintf(stderr, "%s: note: the evaluation loss is not finite: the model overflows float32 on this corpus\n",
                prog);
        return;
    }
    print_sample(t, rng_for((uint64_t)t->o.seed, RNG_SAMPLE, step));
    t->last_line = now_s();
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
    if (t->o.precision == PRECISION_BF16 && BF16_FAST)
        printf("precision: bf16: the linear layers' products on bfloat16 operands; weights, optimiser, norms, "
               "softmax, attention and loss in float32\n");
    else if (t->o.precision == PRECISION_BF16) printf("note: --precision bf16 %s\n", BF16_NO_SPEED);
    char err[64];
    int newline;
    if (!t->n_prompt && c->bos_id < 0 && c->eos_id < 0 &&
        tokenizer_encode(&t->tok, "\n", 1, 0, &newline, 1, err, sizeof err) != 1)
        printf("note: the vocabulary has no newline and no BOS token to start from: ./run needs a prompt (-i)\n");
}

// A run in progress: the trainer and what the loop keeps between steps.
typedef struct {
    Trainer *t;
    const Args *args;
    RunFiles *files;
    FILE *csv;
    StateData sd;
    char spread[64];
    size_t tokens_per_step;
    double tps_avg;
    int signal_seen, stdout_error;
} Run;

// After step (or before the first, or on --resume of a step whose evaluation a signal or a kill
// cut short): its evaluation when it is due, its log row and status, the ranks' agreement
// whether to stop, and a checkpoint at an evaluation (step 0's included) or a stop.
// --keep-best writes the model file only when the validation loss is the lowest yet.
static void close_step(Run *r, int step, StepRow row) {
    Trainer *t = r->t;
    StateHeader *h = &r->sd.h;
    int due = step % t->o.eval_interval == 0 || step == t->o.max_iters, speaks = t->dist.rank == 0, better = 0;
    h->eval_pending = 0;
    if (due && speaks) {
        row.evaluated = evaluate(t, &row.eval_train, &row.val);
        h->eval_pending = !row.evaluated;
        better = row.evaluated && row.val < h->best_val;
        if (better) {
            h->best_val = row.val;
            h->best_step = (uint32_t)step;
        }
    }
    // a pending row is kept for --resume; otherwise none is, and the state is the same bytes
    // however fast the run went
    h->pending_loss = h->eval_pending ? row.loss : 0;
    h->pending_lr = h->eval_pending ? row.lr : 0;
    h->pending_tps = h->eval_pending ? row.tps : 0;
    if (!h->eval_pending) log_row(r->csv, step, &row);
    show_step(t, step, &row, r->tps_avg, r->tokens_per_step, r->spread);
    if (row.evaluated) report_evaluation(t, step, &row, r->args->out);
    if (fflush(stdout) || ferror(stdout)) r->stdout_error = errno ? errno : EIO;
    int halt[2] = {(int)stop_signal, r->stdout_error};
    dist_max(&t->dist, halt, 2); // every rank stops at the same step
    r->signal_seen = halt[0];
    r->stdout_error = halt[1];
    if (due || r->signal_seen || r->stdout_error)
        save_checkpoint(r->args->out, r->files->state, &r->sd, step, !r->args->keep_best || better || !r->sd.ours);
}

// A path as a shell command line takes it: quoted unless it is plain.
static void print_shell_word(const char *s) {
    if (s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-+,:=@")]) {
        putchar('\'');
        for (; *s; s++) *s == '\'' ? fputs("'\\''", stdout) : putchar(*s);
        putchar('\'');
    } else {
        fputs(s, stdout);
    }
}

// With --keep-best the model file holds the best evaluation's weights, which the closing loss
// is computed on: read back into the trainer's weights, the training being over.
static void take_saved_weights(Trainer *t, const char *out) {
    ModelData saved = {0};
    read_model(&saved, out, 1, "");
    if (saved.param_bytes != t->md.param_bytes) die("%s: changed during the run", out);
    memcpy(t->md.params, saved.params, saved.param_bytes);
    free(saved.params);
    free(saved.tok_blob);
    free(saved.chat);
}

// The end of a run that was not stopped: the closing loss over the validation split (which a
// signal may still cut short: the last checkpoint is then written, and --resume does it;
// --no-final-eval skips it), and the line saying what was written and how to run it.
static void finish(Run *r, int start_step, int step, double train_time, double t_start) {
    Trainer *t = r->t;
    if (t->tty) putchar('\n');
    int closing = !r->args->no_final_eval;
    if (closing && r->args->keep_best && t->dist.rank == 0) take_saved_weights(t, r->args->out);
    size_t counted = 0;
    double full =
        t->dist.rank || !closing ? 0.0 : full_loss(&t->md.c, &t->w, &t->acts, &t->val, &counted, t->tty, &stop_signal);
    if (t->dist.rank == 0 && stop_signal) {
        printf("stopped by signal %d during the closing evaluation; checkpoint of step %d written to %s (--resume "
               "evaluates it)\n",
               (int)stop_signal, step, r->args->out);
        return;
    }
    printf("done: %d steps, %.1f s training (%.0f tok/s), %.1f s total; wrote %s", step - start_step, train_time,
           (step - start_step) * r->tokens_per_step / (train_time > 0 ? train_time : 1), now_s() - t_start,
           r->args->out);
    if (r->args->keep_best) printf(" (the weights of step %u, the lowest val loss)", r->sd.h.best_step);
    fputs(", run it: ./run ", stdout);
    print_shell_word(r->args->out);
    if (closing)
        printf("; val loss over %s validation split (%zu tokens): %.4f",
               t->val.n > FULL_LOSS_MAX_TOKENS + 1 ? "the start of the" : "the whole", counted, full);
    putchar('\n');
    if (t->dist.mpi)
        printf("%s: %.3f s of the training in the ranks' collectives (rank 0's, waits for the others included), "
               "%.3f s of them agreeing after each micro-batch whether to stop\n",
               r->spread, t->dist.comm_s, t->dist.agree_s);
}

int main(int argc, char **argv) {
    start_with_library_settings(argv);
    // t is static so that a die() on a bad input, which exits while it is live, leaves what it
    // holds reachable: held only in a register, LeakSanitizer calls it a leak (so is corpus).
    static Trainer t;
    t.dist = dist_init(&argc, &argv);
    Args args;
    parse_args(&args, argc, argv, t.dist.rank, t.dist.ranks);
    choose_threads(dist_threads(&t.dist, args.threads));
    static RunFiles files;
    files = claim_outputs(&args);
    args.out = files.model;   // the real path: every message and write goes by it
    signal(SIGXFSZ, SIG_IGN); // a full disk under `ulimit -f` must fail the write, not kill the process
    t.tty = status_on_terminal(args.progress, t.dist.mpi);

    static char *corpus;
    size_t corpus_len;
    corpus = read_corpus(args.data, &corpus_len, t.dist.ranks);
    uint64_t corpus_hash = fnv1a(corpus, corpus_len);
    StateHeader saved;
    t.o = args.o;
    build_model(&args, &t.o, corpus, corpus_len, corpus_hash, files.state, &t.md, &t.m, &t.v, &saved);
    int start_step = (int)saved.step;
    encode_corpus(&t.md.c, t.md.tok_blob, t.md.tok_bytes, corpus, corpus_len, input_name(args.data), t.o.block_size,
                  &t.tok, &t.ids, &t.n_ids, &t.train, &t.val);
    free(corpus);
    trainer_init(&t, &args, !args.resume && !args.init, files.state);
    if (args.sample_prompt) encode_prompt(&t, args.sample_prompt);
    dist_check_binding(&t.dist, t.threads);
    print_summary(&t, args.data);
    if (args.resume) printf("resuming at step %d of %d\n", start_step, t.o.max_iters);
    fflush(stdout);

    Run r = {.t = &t, .args = &args, .files = &files};
    // a row of a step whose evaluation is owed is written again when it is done
    r.csv = t.dist.rank ? NULL : open_log(files.csv, args.resume, start_step - (int)saved.eval_pending);
    catch_stop_signals(t.dist.rank == 0, t.tty);
    r.sd = state_data(&t.md, &t.dist, t.m, t.v, &t.o, corpus_len, corpus_hash);
    dist_check_same(&t.dist, &r.sd.h, sizeof r.sd.h, "corpus, model or options",
                    "every rank must run the same command on the same corpus (and, resuming, the same checkpoint)");
    r.sd.h.best_val = saved.best_val;
    r.sd.h.best_step = saved.best_step;
    r.sd.ours = args.resume;
    r.sd.prior = access(args.out, F_OK) == 0 && access(files.state, F_OK) == 0;
    r.tokens_per_step = (size_t)t.o.batch_size * t.o.block_size * t.o.grad_accum;
    spread_of(&t, r.spread, sizeof r.spread);

    int step = start_step;
    double train_time = 0.0, t_start = now_s();
    // An evaluation owed first: nanoGPT's at step 0, or the one a signal cut short. Step 0 is
    // checkpointed before it too, its evaluation owed, so that a run stopped any time after this
    // (kill -9 included) goes on with --resume.
    if (!args.resume) {
        r.sd.h.eval_pending = 1;
        r.sd.h.pending_loss = r.sd.h.pending_lr = r.sd.h.pending_tps = NAN;
        save_checkpoint(args.out, files.state, &r.sd, 0, 1);
        close_step(&r, 0, (StepRow){NAN, NAN, NAN, 0, 0, 0});
    } else if (saved.eval_pending)
        close_step(&r, step, (StepRow){saved.pending_loss, saved.pending_lr, saved.pending_tps, 0, 0, 0});
    while (step < t.o.max_iters && !r.signal_seen && !r.stdout_error) {
        double t0 = now_s(), loss;
        float lr = get_lr(&t.o, step);
        if ((r.signal_seen = train_step(&t, step, &args, start_step, &loss))) {
            save_checkpoint(args.out, files.state, &r.sd, step, !args.keep_best || !r.sd.ours);
            break;
        }
        double dt = now_s() - t0, tps = r.tokens_per_step / dt;
        step++;
        train_time += dt;
        r.tps_avg = r.tps_avg == 0.0 ? tps : 0.9 * r.tps_avg + 0.1 * tps;
        close_step(&r, step, (StepRow){loss, lr, tps, 0, 0, 0});
    }
    if (r.stdout_error) {
        fprintf(stderr, "%s: stdout: cannot write: %s; checkpoint of step %d written to %s (continue with --resume)\n",
                prog, strerror(r.stdout_error), step, args.out);
    } else if (r.signal_seen) {
        printf("%sstopped by signal %d at step %d%s; checkpoint written to %s (continue with --resume)\n",
               t.tty ? "\n" : "", r.signal_seen, step, r.sd.h.eval_pending ? ", in its evaluation" : "", args.out);
    } else {
        if (!r.sd.ours) save_checkpoint(args.out, files.state, &r.sd, step, 1); // --max-iters 0: the initial model
        finish(&r, start_step, step, train_time, t_start);
    }
    if (r.csv) fclose(r.csv);
    trainer_free(&t);
    free(args.config_text);
    release_outputs(&files);
    dist_finish(&t.dist);
    return r.stdout_error ? 1 : 0;
}
