// bench_forward.c: model.h's forward pass timed directly, without tokenizer or sampler:
// a prompt of P tokens as one batch, then N one-token steps (greedy, so the token fed back
// is the one the model picked), each repeated R times; medians and bests go to stdout.
//   bench_forward MODEL [-j threads] [-p 256] [-n 64] [-r 5] [--pos0 0] [--compute bf16]
// The steps follow the prompt; --pos0 0 starts them at position 0 instead, since a step
// reads the KV cache up to its position besides the weights, and --pos0 D beyond the prompt at
// depth D, the cache's rows past the prompt filled with a constant instead of computed (a step's
// time does not depend on what the keys are; an 8k prompt would take minutes). --compute bf16 runs the prompt
// as ./run --compute bf16 does, and first prints how far its logits at every prompt position
// are from float32's, relative to the largest float32 logit. --kv-cache f16 or q8_0 keeps the
// keys and values in float16 or Q8_0 blocks, as ./run --kv-cache does.
#include <sys/resource.h>
#include "model.h"
#include "bench.h"

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_forward MODEL [-j threads] [-p prompt] [-n steps] [-r reps] [--pos0 P] "
                        "[--compute f32|bf16] [--kv-cache f32|f16|q8_0]\n");
        return 1;
    }
    int threads = bench_threads(argc, argv);
    int P = atoi(bench_arg(argc, argv, "-p", "256")), N = atoi(bench_arg(argc, argv, "-n", "64"));
    int R = atoi(bench_arg(argc, argv, "-r", "5")), pos0 = atoi(bench_arg(argc, argv, "--pos0", "-1"));
    if (pos0 < 0) pos0 = P;
    if (R < 1 || R > 64) R = 5;
    Model m;
    char err[512];
    if (model_open(&m, argv[1], err, sizeof err)) {
        fprintf(stderr, "bench_forward: %s\n", err);
        return 1;
    }
    const Config *c = &m.config;
    if (P < 1 || P > c->seq_len || (pos0 != 0 && pos0 < P) || pos0 + N > c->seq_len || N < 1) {
        fprintf(stderr, "bench_forward: -p %d / --pos0 %d -n %d do not fit the context of %d\n", P, pos0, N,
                c->seq_len);
        return 1;
    }
    const char *kv = bench_arg(argc, argv, "--kv-cache", "f32");
    int kv_type = !strcmp(kv, "f32") ? WEIGHTS_F32 : !strcmp(kv, "f16") ? WEIGHTS_F16 : BLOCK_Q8_0;
    if (kv_type == BLOCK_Q8_0 && (strcmp(kv, "q8_0") || c->head_dim % 32)) {
        fprintf(stderr, "bench_forward: --kv-cache %s: expected f32, f16 or (head_dim a multiple of 32) q8_0\n", kv);
        return 1;
    }
    RunState s;
    if (state_init(&s, c, P, kv_type)) {
        fprintf(stderr, "bench_forward: out of memory\n");
        return 1;
    }
    const char *compute = bench_arg(argc, argv, "--compute", "f32");
    if (strcmp(compute, "f32") && strcmp(compute, "bf16")) {
        fprintf(stderr, "bench_forward: --compute %s: expected f32 or bf16\n", compute);
        return 1;
    }
    int *tokens = malloc(sizeof(int) * (size_t)P);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    uint64_t rng = 42;
    for (int i = 0; i < P; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int)((rng >> 33) % (uint64_t)c->vocab_size);
    }

    // What the measurements are divided by.
    size_t d = c->dim, hd = c->head_dim, qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd;
    size_t layer_params = d * qd + 2 * d * kvd + qd * d + d * c->hidden_dim * (c->ffn_kind == FFN_SWIGLU ? 3 : 2);
    size_t matmul_params = (size_t)c->n_layers * layer_params, classifier = (size_t)c->vocab_size * d;
    Config f32 = *c;
    f32.weight_type = WEIGHTS_F32, f32.group_size = 0;
    size_t all_params = carve_weights(&f32, NULL, NULL) / sizeof(float); // with padding, which is negligible
    // A step streams every tensor except the embedding tables, of which it reads one row each;
    // a tied classifier is the token embedding read in full. A Q8_0 row is d bytes and its scales,
    // a bfloat16 or float16 one 2 d bytes, one of a block type its blocks.
    size_t step_bytes = carve_weights(c, NULL, NULL);
    size_t embed_row = c->weight_type == WEIGHTS_Q8_0         ? d + d / c->group_size * sizeof(float)
                       : c->weight_type == WEIGHTS_F32        ? d * sizeof(float)
                       : c->weight_type == WEIGHTS_PER_MATRIX ? row_bytes(m.weights.qtok_embedding.type, d)
                                                              : d * sizeof(uint16_t);
    if (c->pos_kind == POS_LEARNED) step_bytes -= ((size_t)c->seq_len - 1) * d * sizeof(float);
    if (!c->tied_classifier) step_bytes -= ((size_t)c->vocab_size - 1) * embed_row;
    // Causal attention over P rows: QKᵀ and AV each 2·head_dim FLOPs per (head, row, visible key).
    double attn_flops = 4.0 * c->n_layers * c->n_heads * hd * (double)P * (P + 1) / 2;
    double prompt_flops = 2.0 * matmul_params * P + 2.0 * classifier + attn_flops;

    double bf16_err = -1;
    if (!strcmp(compute, "bf16")) {
        float *f32 = malloc(sizeof(float) * P * c->vocab_size), *bf16 = malloc(sizeof(float) * P * c->vocab_size);
        if (!f32 || !bf16 || state_compute_bf16(&s, c, 1)) {
            fprintf(stderr, "bench_forward: out of memory\n");
            return 1;
        }
        state_compute_bf16(&s, c, 0);
        forward(c, &m.weights, &s, tokens, P, 0, f32, 0);
        state_compute_bf16(&s, c, 1);
        forward(c, &m.weights, &s, tokens, P, 0, bf16, 0);
        double largest = 0, worst = 0;
        for (size_t i = 0; i < (size_t)P * c->vocab_size; i++) {
            largest = fabs(f32[i]) > largest ? fabs(f32[i]) : largest;
            worst = fabs(bf16[i] - f32[i]) > worst ? fabs(bf16[i] - f32[i]) : worst;
        }
        bf16_err = worst / largest;
        free(f32);
        free(bf16);
    }
    if (pos0 > P) { // every page of the cache written, as a prompt would have
        memset(s.key_cache, 1, s.cache_bytes / 2);
        memset(s.value_cache, 1, s.cache_bytes / 2);
    }
    // Warm-up: maps every page of the file and starts the thread pool.
    forward(c, &m.weights, &s, tokens, P, 0, logits, P - 1);
    double tp[64], tg[64];
    for (int r = 0; r < R; r++) {
        double t0 = now_s();
        forward(c, &m.weights, &s, tokens, P, 0, logits, P - 1);
        tp[r] = now_s() - t0;
    }
    int ids[16], n_ids = 0;
    for (int r = 0; r < R; r++) {
        int tok = pos0 ? sample_argmax(logits, c->vocab_size) : tokens[0];
        double t0 = now_s();
        for (int i = 0; i < N; i++) {
            if (r == 0 && n_ids < 16) ids[n_ids++] = tok;
            forward(c, &m.weights, &s, &tok, 1, pos0 + i, logits, 0);
            tok = sample_argmax(logits, c->vocab_size);
        }
        tg[r] = now_s() - t0;
    }
    double step_kv = 2.0 * c->n_layers * kv_span(s.kv_type, kvd) * (pos0 + (N + 1) / 2.0); // mean over the steps
    double tp_best = tp[0], tg_best = tg[0];
    for (int r = 1; r < R; r++) {
        tp_best = tp[r] < tp_best ? tp[r] : tp_best;
        tg_best = tg[r] < tg_best ? tg[r] : tg_best;
    }
    double tp_med = median(tp, R), tg_med = median(tg, R);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("threads %d\n", threads);
    printf("compute %s\n", compute);
    if (bf16_err >= 0) printf("bf16_logits_rel_err %.3g\n", bf16_err);
    printf("wait_policy %s\n", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "default");
    printf("spin_count %s\n", getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "default");
    printf("params %zu\n", all_params);
    printf("matmul_params %zu\n", matmul_params);
    printf("file_bytes %zu\n", m.map_bytes);
    printf("kv_cache %s\n", kv);
    printf("kv_cache_bytes %zu\n", s.cache_bytes);
    printf("step_weight_bytes %zu\n", step_bytes);
    printf("step_kv_bytes %.0f\n", step_kv);
    printf("prompt_tokens %d\n", P);
    printf("prompt_flops %.6g\n", prompt_flops);
    printf("prompt_flops_issue %.6g\n", 2.0 * all_params * P + attn_flops); // the 2 × parameters × tokens
    printf("prompt_tok_s %.2f %.2f\n", P / tp_med, P / tp_best);
    printf("prompt_GFLOPs %.2f %.2f\n", prompt_flops / tp_med * 1e-9, prompt_flops / tp_best * 1e-9);
    printf("gen_pos0 %d\n", pos0);
    printf("gen_tok_s %.2f %.2f\n", N / tg_med, N / tg_best);
    printf("gen_weight_GBps %.2f %.2f\n", step_bytes * N / tg_med * 1e-9, step_bytes * N / tg_best * 1e-9);
    printf("gen_ids");
    for (int i = 0; i < n_ids; i++) printf("%c%d", i ? ',' : ' ', ids[i]);
    printf("\n");
    printf("maxrss_bytes %ld\n", ru.ru_maxrss * 1024L);
    printf("file_2m_mapped_fraction %.3f\n", (double)pmd_mapped_bytes(m.map) / m.map_bytes);
    free(tokens);
    free(logits);
    state_free(&s);
    model_close(&m);
    return 0;
}
