// matvec.c: one-token matrix-vector products on the 110M Llama's shapes, model.h's (its
// matmul with one row, the path a token step takes) against OpenBLAS's sgemv, in GB/s of
// weights streamed, and model.h's on the same shapes stored in bfloat16 (half the bytes,
// widened in registers). Each shape cycles through enough
// distinct copies (>= 512 MiB) that every product reads from memory, as a real token step
// does, never from the 32 MiB L3. "token" is one whole step's products in file order:
// 12 × (q, k, v, o, w1, w3, w2) and the 32000-row classifier.
#include "model.h"
#include "bench.h"

// w: n_out rows of n_in float32 weights, or of bfloat16 ones for matvec_bf16.
typedef void (*MatvecFn)(float *out, const float *x, const void *w, int n_in, int n_out);

static void matvec_model(float *out, const float *x, const void *w, int n_in, int n_out) {
    matmul_forward(out, x, w, NULL, 1, n_in, n_out);
}

static void matvec_sgemv(float *out, const float *x, const void *w, int n_in, int n_out) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n_out, n_in, 1.0f, w, n_in, x, 1, 0.0f, out, 1);
}

static void matvec_bf16(float *out, const float *x, const void *w, int n_in, int n_out) {
#pragma omp parallel
    {
        float wbuf[2048]; // each thread's scratch: n_in floats
        Linear l = {.out = out, .n_out = n_out, .qw = {.half = w, .type = WEIGHTS_BF16}, .wbuf = wbuf};
        size_t lo, hi;
        share((size_t)n_out, thread_num(), team_size(), &lo, &hi);
        matmul_part(&l, x, 1, n_in, lo, hi);
    }
}

typedef struct {
    int n_out, n_in;
} Shape;

// One pass over the products in list, each reading its own weights from w (elem bytes each); seconds.
static double pass(MatvecFn f, const Shape *list, int n, const void *w, size_t elem, const float *x, float *out) {
    double t0 = now_s();
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        f(out, x, (const char *)w + off * elem, list[i].n_in, list[i].n_out);
        off += (size_t)list[i].n_out * list[i].n_in;
    }
    return now_s() - t0;
}

int main(int argc, char **argv) {
    int threads = bench_threads(argc, argv), reps = atoi(bench_arg(argc, argv, "-r", "7"));
    struct {
        const char *name;
        MatvecFn f;
        size_t elem;
    } fns[] = {{"matvec", matvec_model, sizeof(float)},
               {"sgemv", matvec_sgemv, sizeof(float)},
               {"matvec_bf16", matvec_bf16, sizeof(uint16_t)}};
    Shape shapes[] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
    Shape token[12 * 7 + 1];
    int nt = 0;
    for (int l = 0; l < 12; l++) {
        Shape layer[] = {{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}};
        for (int i = 0; i < 7; i++) token[nt++] = layer[i];
    }
    token[nt++] = (Shape){32000, 768};
    size_t cap = (size_t)512 << 20, token_floats = 0;
    for (int i = 0; i < nt; i++) token_floats += (size_t)token[i].n_out * token[i].n_in;
    size_t n_floats = cap / sizeof(float) > token_floats ? cap / sizeof(float) : token_floats;
    float *w = malloc(n_floats * sizeof(float)), *x = malloc(2048 * sizeof(float)),
          *out = malloc(32000 * sizeof(float));
    uint16_t *w16 = malloc(n_floats * sizeof(uint16_t)); // the bfloat16 products' weights: as many
    if (!w || !w16 || !x || !out) {
        fprintf(stderr, "matvec: out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n_floats; i++) {
        w[i] = (float)((i * 2654435761u) >> 16 & 1023) / 1024.0f - 0.5f;
        w16[i] = (uint16_t)(0x3e80 | ((i * 2654435761u) >> 16 & 0x807f)); // ±[0.25, 0.5): normal numbers
    }
    for (int i = 0; i < 2048; i++) x[i] = (float)(i % 17) / 17.0f;
    printf("threads %d\n", threads);
    double t[64];
    if (reps > 64) reps = 64;
    for (int s = 0; s <= (int)(sizeof shapes / sizeof shapes[0]); s++) {
        int is_token = s == (int)(sizeof shapes / sizeof shapes[0]);
        Shape list[4096];
        int n = 0;
        size_t weights = 0; // per pass
        if (is_token) {
            memcpy(list, token, sizeof token);
            n = nt;
            weights = token_floats;
        } else {
            size_t one = (size_t)shapes[s].n_out * shapes[s].n_in;
            for (n = 0; (size_t)(n + 1) * one <= n_floats && n < 4096; n++) list[n] = shapes[s];
            weights = n * one;
        }
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
            const void *wk = fns[k].elem == sizeof(float) ? (const void *)w : (const void *)w16;
            size_t bytes = weights * fns[k].elem;
            pass(fns[k].f, list, n, wk, fns[k].elem, x, out); // warm-up: page faults, thread start
            for (int r = 0; r < reps; r++) t[r] = pass(fns[k].f, list, n, wk, fns[k].elem, x, out);
            double best = t[0];
            for (int r = 1; r < reps; r++) best = t[r] < best ? t[r] : best;
            double med = median(t, reps);
            if (is_token) printf("%s_token_GBps %.2f %.2f\n", fns[k].name, bytes / med * 1e-9, bytes / best * 1e-9);
            else
                printf("%s_%dx%d_GBps %.2f %.2f\n", fns[k].name, shapes[s].n_out, shapes[s].n_in, bytes / med * 1e-9,
                       bytes / best * 1e-9);
        }
    }
    free(w);
    free(w16);
    free(x);
    free(out);
    return 0;
}
