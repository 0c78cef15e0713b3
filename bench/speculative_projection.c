// speculative_projection.c: what ./run --draft would gain on MODEL with a draft that agrees with
// it at a given rate, without such a draft: the stand-in drafter takes the model's own greedy
// continuation and corrupts each drafted token with probability 1 - a, where a is the per-token
// agreement that makes accepted / drafted come out at --accept (rounds stop at the first wrong
// draft). It drafts for free, so this is the verification's side of the gain; a real draft
// adds its own steps. Plain greedy rounds and speculative ones alternate; the speculative text
// is checked against the plain one, token for token.
//   speculative_projection MODEL --accept 0.8 [-j threads] [-p 64] [-n 128] [-r 5] [--draft-max 8]
#include <math.h>
#include "model.h"

static const char *prog = "speculative_projection";
// the headers hold the rest of run.c's front door too (file reading, the --draft model's loading)
#pragma GCC diagnostic ignored "-Wunused-function"
#include "io/cli.h"
#include "generate/forward_run.h"
#include "generate/speculative.h"
#include "bench/bench.h"

typedef struct {
    const int *greedy; // the plain run's tokens, prompt included
    double agree;      // probability that a drafted token is the greedy one
    int vocab_size;
    uint64_t rng;
} StandIn;

static int stand_in_draft(void *ctx, int *tokens, int n, int k) {
    StandIn *d = ctx;
    for (int i = 0; i < k; i++) {
        int right = d->greedy[n + i],
            wrong = (right + 1 + (int)(random_u32(&d->rng) % (d->vocab_size - 1))) % d->vocab_size;
        tokens[n + i] = random_f32(&d->rng) < d->agree ? right : wrong;
    }
    return k;
}

// accepted / drafted when each of k drafts agrees independently with probability a: a round
// keeps i drafts with probability a^i (1 - a), all k with a^k, so E[kept] = Σ_{i=1..k} a^i.
static double acceptance_of(double a, int k) {
    double kept = 0, ai = 1;
    for (int i = 1; i <= k; i++) kept += ai *= a;
    return kept / k;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-')
        die("usage: speculative_projection MODEL --accept RATE [-j threads] [-p 64] [-n 128] [-r 5] [--draft-max 8]");
    start_with_library_settings(argv); // as ./run does
    setvbuf(stdout, NULL, _IOLBF, 0);  // each round as it ends, in a log too
    choose_threads(atoi(bench_arg(argc, argv, "-j", "0")));
    int P = atoi(bench_arg(argc, argv, "-p", "64")), N = atoi(bench_arg(argc, argv, "-n", "128"));
    int R = atoi(bench_arg(argc, argv, "-r", "5")), K = atoi(bench_arg(argc, argv, "--draft-max", "8"));
    double accept = atof(bench_arg(argc, argv, "--accept", "-1"));
    if (accept <= 0 || accept > 1) die("--accept: a rate in (0, 1] is needed");
    if (R < 1 || R > 64 || K < 1 || K > 255) die("-r must be 1 to 64, --draft-max 1 to 255");
    Model m;
    char err[512];
    model_path = argv[1];
    if (model_open(&m, model_path, err, sizeof err)) die("%s", err);
    const Config *c = &m.config;
    if (P < 2 || N < 1 || P + N > c->seq_len) die("-p %d -n %d do not fit the context of %d", P, N, c->seq_len);
    RunState s;
    if (state_init(&s, c, P > K + 1 ? P : K + 1, WEIGHTS_F32)) die("out of memory");
    Sampler greedy_sampler;
    if (sampler_init(&greedy_sampler, c->vocab_size, 0.0f, 1)) die("out of memory");

    // The per-token agreement whose acceptance is --accept at K drafts, by bisection (it grows with a).
    double lo = 0, hi = 1;
    for (int i = 0; i < 60; i++) *(acceptance_of((lo + hi) / 2, K) < accept ? &lo : &hi) = (lo + hi) / 2;
    StandIn stand_in = {.agree = (lo + hi) / 2, .vocab_size = c->vocab_size, .rng = 42};

    int *greedy = malloc(sizeof(int) * (P + N)), *tokens = malloc(sizeof(int) * (P + N));
    float *logits = malloc(sizeof(float) * c->vocab_size);
    if (!greedy || !tokens || !logits) die("out of memory");
    uint64_t rng = 42;
    for (int i = 0; i < P; i++) greedy[i] = (int)(random_u32(&rng) % (uint32_t)c->vocab_size);
    stand_in.greedy = greedy;
    Speculator sp;
    speculator_init(&sp, &m, 0, K, forward_or_die);
    sp.propose = stand_in_draft, sp.propose_ctx = &stand_in;

    double plain[64], spec[64], rates[64];
    forward_or_die(&m, &s, greedy, P, 0, logits, NULL, NULL); // warm-up: maps the file, starts the pool
    for (int r = 0; r < R; r++) {
        forward_or_die(&m, &s, greedy, P, 0, logits, NULL, NULL);
        double t0 = now_s();
        for (int n = P; n < P + N; n++) {
            greedy[n] = sample(&greedy_sampler, logits, greedy, n);
            if (n + 1 < P + N) forward_or_die(&m, &s, greedy + n, 1, n, logits, NULL, NULL);
        }
        plain[r] = N / (now_s() - t0);

        memcpy(tokens, greedy, sizeof(int) * P);
        sp.drafted = sp.accepted = 0;
        forward_or_die(&m, &s, tokens, P - 1, 0, logits, NULL, NULL); // speculation verifies the last one
        t0 = now_s();
        for (int n = P; n < P + N;) n += speculate(&sp, &m, &s, &greedy_sampler, tokens, n, P + N - n);
        spec[r] = N / (now_s() - t0);
        rates[r] = sp.drafted ? (double)sp.accepted / sp.drafted : 0;
        for (int i = P; i < P + N; i++)
            if (tokens[i] != greedy[i]) die("round %d: the speculative text differs from the plain one at %d", r, i);
        printf("round %d plain %.2f speculative %.2f accepted %.4f\n", r + 1, plain[r], spec[r], rates[r]);
    }
    double plain_med = median(plain, R), spec_med = median(spec, R);
    printf("threads %d\ndraft_max %d\nagree_per_token %.4f\n", omp_get_max_threads(), K, stand_in.agree);
    printf("accepted_median %.4f\nplain_tok_s %.2f\nspeculative_tok_s %.2f\nspeedup %.3f\n", median(rates, R),
           plain_med, spec_med, spec_med / plain_med);
    speculator_free(&sp);
    sampler_free(&greedy_sampler);
    state_free(&s);
    model_close(&m);
    free(greedy);
    free(tokens);
    free(logits);
    return 0;
}
