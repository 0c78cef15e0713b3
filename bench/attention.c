// attention.c: the attention's per-(sequence, head) products, model.h's causal kernels against
// OpenBLAS sgemm on the same strided head columns, one thread, microseconds per pair.
// Forward: scores, softmax, weighted values (model.h's attention_pairs; the sgemm side is the
// same three steps with the two products as sgemm). Backward: the four products of
// model/attention.h's attention_backward (dV, dP, dQ, dK; the softmax's backward between them is the
// same on both sides and left out). Shapes: the baby and (b) training configurations (the
// latter's pair is also a 256-token prompt's on the 110M models), one token after 1000.
#include "model.h"
#include "bench.h"

typedef struct {
    const char *name;
    int B, T, P, H, hd;
} Shape;

// Scores, softmax and weighted values, as sgemm or as model.h's attention_pairs.
static void attend(int sgemm, float *out, float *att, const float *q, const float *k, const float *v, int B, int T,
                   int P, int H, int hd) {
    if (!sgemm) {
        attention_pairs(out, att, q, k, v, T, P, H, H, hd, 0, (size_t)B * H);
        return;
    }
    int L = P + T, d = H * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *qb = q + (size_t)b * T * d + h * hd, *kb = k + (size_t)b * L * d + h * hd,
                        *vb = v + (size_t)b * L * d + h * hd;
            float *a = att + ((size_t)b * H + h) * T * L, *o = out + (size_t)b * T * d + h * hd;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, L, hd, scale, qb, d, kb, d, 0.0f, a, L);
            for (int t = 0; t < T; t++) {
                softmax(a + (size_t)t * L, P + t + 1);
                memset(a + (size_t)t * L + P + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, L, 1.0f, a, L, vb, d, 0.0f, o, d);
        }
}

// The products of the backward for P = 0, as sgemm or as model.h's causal products: p (= att)
// [T, T] per pair, ds a [T, T] scratch for dP. p also stands in for dS in dQ and dK: what
// matters to the kernels is its zeros above the diagonal.
static void attend_backward(int sgemm, float *dq, float *dk, float *dv, float *ds, const float *dout, const float *p,
                            const float *q, const float *k, const float *v, int B, int T, int H, int hd) {
    int d = H * hd;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t o = (size_t)b * T * d + h * hd;
            const float *pb = p + ((size_t)b * H + h) * T * T;
            if (sgemm) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, pb, T, dout + o, d, 0.0f, dv + o,
                            d);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, dout + o, d, v + o, d, 0.0f, ds,
                            T);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, pb, T, k + o, d, 0.0f, dq + o,
                            d);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, pb, T, q + o, d, 0.0f, dk + o, d);
            } else {
                causal_product(dv + o, d, pb, T, 1, dout + o, WEIGHTS_F32, d, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, 0);
                causal_scores(ds, dout + o, d, v + o, WEIGHTS_F32, d, T, 0, hd, 1.0f);
                causal_product(dq + o, d, pb, T, 0, k + o, WEIGHTS_F32, d, T, hd, T, CAUSAL_BELOW, 0, 1.0f, 0);
                causal_product(dk + o, d, pb, T, 1, q + o, WEIGHTS_F32, d, T, hd, T, CAUSAL_ABOVE, 0, 1.0f, 0);
            }
        }
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

int main(int argc, char **argv) {
    int reps = atoi(bench_arg(argc, argv, "-r", "7"));
    if (reps < 1 || reps > 64) reps = 7;
    printf("threads %d\n", bench_threads(argc, argv)); // run.sh asks for 1: the time of one pair
    double t[2][64];
    Shape shapes[] = {{"baby", 12, 64, 0, 4, 32}, {"train_b", 8, 256, 0, 6, 64}, {"token_at_1000", 1, 1, 1000, 12, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        Shape sh = shapes[s];
        int L = sh.P + sh.T, d = sh.H * sh.hd;
        size_t nq = (size_t)sh.B * sh.T * d, nk = (size_t)sh.B * L * d, na = (size_t)sh.B * sh.H * sh.T * L;
        float *buf = malloc((9 * nq + 2 * nk + 2 * na + (size_t)sh.T * sh.T) * sizeof(float));
        if (!buf) {
            fprintf(stderr, "attention: out of memory\n");
            return 1;
        }
        float *q = buf, *k = q + nq, *v = k + nk, *out[2] = {v + nk, v + nk + nq},
              *att[2] = {out[1] + nq, out[1] + nq + na};
        float *dq = att[1] + na, *dk = dq + nq, *dv = dk + nq, *ds = dv + nq, *grads = ds + (size_t)sh.T * sh.T;
        uint32_t r = 42;
        for (size_t i = 0; i < nq + 2 * nk; i++)
            q[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        // Side 0 is sgemm, 1 model.h; the sides must agree before they are timed. The backward
        // (not for a decoding step) takes q as dout: any values do.
        double pairs = (double)sh.B * sh.H;
        for (int pass = 0; pass < (sh.P ? 1 : 2); pass++) {
            float *res[2] = {out[0], out[1]};
            if (pass) res[0] = grads, res[1] = dq;
            for (int rep = -1; rep < reps; rep++)
                for (int side = 0; side < 2; side++) {
                    double t0 = now_s();
                    if (pass) attend_backward(!side, dq, dk, dv, ds, q, att[1], q, k, v, sh.B, sh.T, sh.H, sh.hd);
                    else attend(!side, out[side], att[side], q, k, v, sh.B, sh.T, sh.P, sh.H, sh.hd);
                    if (rep >= 0) t[side][rep] = (now_s() - t0) / pairs * 1e6;
                    else if (pass && !side) memcpy(grads, dq, 3 * nq * sizeof(float));
                }
            if (max_diff(res[0], res[1], pass ? 3 * nq : nq) > 1e-3) {
                fprintf(stderr, "attention: %s: sgemm and model.h differ\n", sh.name);
                return 1;
            }
            printf("%s_%s_us %.2f %.2f\n", pass ? "backward" : "forward", sh.name, median(t[0], reps),
                   median(t[1], reps));
        }
        free(buf);
    }
    return 0;
}
