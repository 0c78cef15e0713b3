// The forward kernels of model.h against naive double-precision versions written here from
// the definitions, and the batched prompt path against the one-token path.
#include "model.h"
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "test_util.h"

static void test_softmax(void **state) {
    (void)state;
    for (int n = 1; n < 300; n += 37) {
        float *x = rand_vec(n, 30.0f);
        double *want = malloc(n * sizeof(double)), max = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) max = fmax(max, x[i]);
        for (int i = 0; i < n; i++) sum += exp(x[i] - max);
        for (int i = 0; i < n; i++) want[i] = exp(x[i] - max) / sum;
        softmax(x, n);
        assert_close(x, want, n, 1e-6);
        free(x);
        free(want);
    }
    float big[3] = {1000.0f, 1000.0f, -1000.0f}; // no overflow to inf/nan
    softmax(big, 3);
    assert_true(fabsf(big[0] - 0.5f) < 1e-6f && big[2] == 0.0f);
}

static void test_norms(void **state) {
    (void)state;
    int T = 5, C = 67;
    float *x = rand_vec((size_t)T * C, 3.0f), *w = rand_vec(C, 1.0f), *b = rand_vec(C, 1.0f);
    float *out = malloc(sizeof(float) * T * C);
    double *want = malloc(sizeof(double) * T * C);
    for (int kind = 0; kind < 2; kind++) {
        for (int t = 0; t < T; t++) {
            const float *xt = x + t * C;
            double mean = 0, var = 0, ss = 0;
            for (int i = 0; i < C; i++) {
                mean += xt[i];
                ss += (double)xt[i] * xt[i];
            }
            mean /= C;
            for (int i = 0; i < C; i++) var += (xt[i] - mean) * (xt[i] - mean);
            var /= C;
            for (int i = 0; i < C; i++)
                want[t * C + i] =
                    kind == 0 ? xt[i] / sqrt(ss / C + 1e-5) * w[i] : (xt[i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
        }
        if (kind == 0) rmsnorm(out, x, w, 0, T, C, 1e-5f);
        else layernorm(out, x, w, b, T, C, 1e-5f);
        assert_close(out, want, (size_t)T * C, 1e-5);
        // in place, as post-norm uses it
        float *inplace = malloc(sizeof(float) * T * C);
        memcpy(inplace, x, sizeof(float) * T * C);
        if (kind == 0) rmsnorm(inplace, inplace, w, 0, T, C, 1e-5f);
        else layernorm(inplace, inplace, w, b, T, C, 1e-5f);
        assert_memory_equal(inplace, out, sizeof(float) * T * C);
        free(inplace);
    }
    free(x);
    free(w);
    free(b);
    free(out);
    free(want);
}

// want[T, n_out] = x[T, n_in] · w[n_out, n_in]ᵀ (+ b, if not NULL), in double precision.
static void naive_linear(double *want, const float *x, const float *w, const float *b, int T, int n_in, int n_out) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < n_out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < n_in; i++) s += (double)x[(size_t)t * n_in + i] * w[(size_t)o * n_in + i];
            want[(size_t)t * n_out + o] = s;
        }
}

#if defined(__AVX512F__)
// The many-row product of a matrix not in float32 with AVX-512 (matmul_panels): each output
// the float32 sum over the inputs in order, each step fused, then the bias added.
static void fused_linear(float *want, const float *x, const float *w, const float *b, int T, int n_in, int n_out) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < n_out; o++) {
            float s = 0.0f;
            for (int i = 0; i < n_in; i++) s = fmaf(w[(size_t)o * n_in + i], x[(size_t)t * n_in + i], s);
            want[(size_t)t * n_out + o] = s + (b ? b[o] : 0.0f);
        }
}
#endif

// out [T, n_out], a product over T <= FEW_TOKENS rows of l's matrix, against each row's
// one-token product: bit for bit (dot_w_tokens sums as dot_w does).
static void assert_as_one_token_steps(const float *out, Linear l, const float *x, int T, int n_in, int n_out) {
    float *one = malloc(sizeof(float) * n_out);
    l.out = one;
    for (int t = 0; t < T; t++) {
        matmul_part(&l, x + (size_t)t * n_in, 1, n_in, 0, n_out);
        assert_memory_equal(out + (size_t)t * n_out, one, sizeof(float) * n_out);
    }
    free(one);
}

// out, of a product of a matrix not in float32 over T > 1 rows, against fused_linear on its
// widened weights w: bit for bit where matmul_panels ran.
static void assert_fused(const float *out, const float *x, const float *w, const float *b, int T, int n_in, int n_out) {
#if defined(__AVX512F__)
    float *fused = malloc(sizeof(float) * T * n_out);
    fused_linear(fused, x, w, b, T, n_in, n_out);
    assert_memory_equal(out, fused, sizeof(float) * T * n_out);
    free(fused);
#endif
}

// matmul_part over each of sizes' (T, n_in, n_out) against the naive sums, with and without a
// bias; with one_token_steps also each token's outputs against its one-token product, bit for bit.
static void check_matmul(const int (*sizes)[3], size_t count, int one_token_steps) {
    for (size_t k = 0; k < count; k++) {
        int T = sizes[k][0], n_in = sizes[k][1], n_out = sizes[k][2];
        float *x = rand_vec((size_t)T * n_in, 1.0f), *w = rand_vec((size_t)n_out * n_in, 1.0f);
        float *b = rand_vec(n_out, 1.0f), *out = malloc(sizeof(float) * T * n_out);
        double *want = malloc(sizeof(double) * T * n_out);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            naive_linear(want, x, w, with_bias ? b : NULL, T, n_in, n_out);
            matmul_forward(out, x, w, with_bias ? b : NULL, T, n_in, n_out);
            assert_close(out, want, (size_t)T * n_out, 1e-4);
            if (one_token_steps) {
                Linear l = {.w = w, .b = with_bias ? b : NULL, .n_out = n_out};
                assert_as_one_token_steps(out, l, x, T, n_in, n_out);
            }
        }
        free(x);
        free(w);
        free(b);
        free(out);
        free(want);
    }
}

static void test_matmul(void **state) {
    (void)state;
    int sizes[][3] = {{1, 37, 13}, {1, 768, 64}, {7, 33, 17}, {64, 100, 3}};
    check_matmul(sizes, sizeof sizes / sizeof sizes[0], 0);
}

static void test_rope(void **state) {
    (void)state;
    int T = 6, pos0 = 9, n_heads = 3, head_dim = 10, seq_len = 32;
    for (int rope_dims = 2; rope_dims <= head_dim; rope_dims += 4) {
        int half = rope_dims / 2;
        float *cos_t = malloc(sizeof(float) * seq_len * half), *sin_t = malloc(sizeof(float) * seq_len * half);
        rope_table(cos_t, sin_t, seq_len, rope_dims, 10000.0f);
        float *x = rand_vec((size_t)T * n_heads * head_dim, 1.0f);
        double *want = malloc(sizeof(double) * T * n_heads * head_dim);
        for (int t = 0; t < T; t++)
            for (int h = 0; h < n_heads; h++)
                for (int i = 0; i < head_dim; i++) {
                    const float *v = x + (t * n_heads + h) * head_dim;
                    double *o = want + (t * n_heads + h) * head_dim;
                    if (i >= rope_dims) {
                        o[i] = v[i];
                        continue;
                    }
                    int p = i / 2;
                    double a = (pos0 + t) * pow(10000.0, -2.0 * p / rope_dims);
                    o[i] = i % 2 == 0 ? v[i] * cos(a) - v[i + 1] * sin(a) : v[i - 1] * sin(a) + v[i] * cos(a);
                }
        float *parts = malloc(sizeof(float) * T * n_heads * head_dim);
        memcpy(parts, x, sizeof(float) * T * n_heads * head_dim);
        rope_forward(x, (size_t)n_heads * head_dim, T, pos0, n_heads, head_dim, rope_dims, cos_t, sin_t);
        assert_close(x, want, (size_t)T * n_heads * head_dim, 1e-5);
        // head by head, as forward's threads rotate their own heads: the same numbers
        for (int h = 0; h < n_heads; h++)
            rope_forward(parts + h * head_dim, (size_t)n_heads * head_dim, T, pos0, 1, head_dim, rope_dims, cos_t,
                         sin_t);
        assert_memory_equal(parts, x, sizeof(float) * T * n_heads * head_dim);
        free(cos_t);
        free(sin_t);
        free(x);
        free(want);
        free(parts);
    }
}

// Causal attention of B sequences with GQA after P past rows, in shapes that take each path
// of causal_scores and causal_product: fewer rows than a tile (dot products), key blocks
// cut short, head_dim past 128 (transposed in two parts) and not a multiple of 16 (vector
// columns, then scalar ones). Then again with the keys and values in float16, as a float16 KV
// cache holds them: the same attention of their rounded values.
static void test_attention(void **state) {
    (void)state;
    // B, T, P, heads, key/value heads, head_dim; the last three one- and two-row steps
    int shapes[][6] = {{2, 5, 3, 6, 2, 7},    {2, 3, 37, 4, 2, 32}, {1, 70, 0, 2, 1, 48},
                       {1, 40, 29, 2, 2, 64}, {1, 9, 0, 1, 1, 136}, {2, 33, 0, 2, 1, 20},
                       {1, 1, 40, 4, 2, 64},  {2, 2, 47, 2, 1, 32}, {1, 1, 15, 2, 2, 16}};
    for (size_t n = 0; n < 2 * sizeof shapes / sizeof shapes[0]; n++) {
        int half = n >= sizeof shapes / sizeof shapes[0],
            *shape = shapes[half ? n - sizeof shapes / sizeof shapes[0] : n];
        int B = shape[0], T = shape[1], P = shape[2], n_heads = shape[3], n_kv = shape[4];
        int hd = shape[5], L = P + T, qd = n_heads * hd, kvd = n_kv * hd;
        float *q = rand_vec((size_t)B * T * qd, 1.0f), *k = rand_vec((size_t)B * L * kvd, 1.0f);
        float *v = rand_vec((size_t)B * L * kvd, 1.0f), *out = malloc(sizeof(float) * B * T * qd);
        uint16_t *kh = malloc(sizeof(uint16_t) * B * L * kvd), *vh = malloc(sizeof(uint16_t) * B * L * kvd);
        floats_to_f16(kh, k, (size_t)B * L * kvd);
        floats_to_f16(vh, v, (size_t)B * L * kvd);
        for (size_t i = 0; half && i < (size_t)B * L * kvd; i++) k[i] = f16_to_float(kh[i]), v[i] = f16_to_float(vh[i]);
        float *att = malloc(sizeof(float) * B * n_heads * T * L);
        double *want = calloc((size_t)B * T * qd, sizeof(double)),
               *want_att = calloc((size_t)B * n_heads * T * L, sizeof(double));
        double *s = malloc(sizeof(double) * L);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < n_heads; h++)
                for (int t = 0; t < T; t++) {
                    int kvh = h * n_kv / n_heads;
                    double max = -INFINITY, sum = 0;
                    for (int j = 0; j <= P + t; j++) {
                        double d = 0;
                        for (int i = 0; i < hd; i++)
                            d += (double)q[(b * T + t) * qd + h * hd + i] * k[(b * L + j) * kvd + kvh * hd + i];
                        s[j] = d / sqrt(hd);
                        max = fmax(max, s[j]);
                    }
                    for (int j = 0; j <= P + t; j++) sum += exp(s[j] - max);
                    for (int j = 0; j <= P + t; j++) {
                        double p = exp(s[j] - max) / sum;
                        want_att[((b * n_heads + h) * T + t) * L + j] = p;
                        for (int i = 0; i < hd; i++)
                            want[(b * T + t) * qd + h * hd + i] += p * v[(b * L + j) * kvd + kvh * hd + i];
                    }
                }
        if (half)
            attention_pairs_masked(out, att, q, kh, vh, WEIGHTS_F16, T, P, n_heads, n_kv, hd, 1.0f / sqrtf((float)hd),
                                   0, NULL, 0, (size_t)B * n_heads);
        else attention_forward(out, att, q, k, v, B, T, P, n_heads, n_kv, hd);
        assert_close(out, want, (size_t)B * T * qd, 1e-5);
        assert_close(att, want_att, (size_t)B * n_heads * T * L, 1e-6); // masked entries exactly 0
        free(q);
        free(k);
        free(v);
        free(out);
        free(att);
        free(want);
        free(want_att);
        free(s);
        free(kh);
        free(vh);
    }
}

// want [B, T, n_heads * hd] of the attention of q after P past rows of k and v (elements as
// float32), each row t seeing keys P + t + 1 - window ≤ j ≤ P + t (every key up to its own
// without a window), in double precision from the definition.
static void naive_attention(double *want, const float *q, const float *k, const float *v, int B, int T, int P,
                            int n_heads, int n_kv, int hd, int window) {
    int L = P + T, qd = n_heads * hd, kvd = n_kv * hd;
    double *s = malloc(sizeof(double) * L);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < n_heads; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / (n_heads / n_kv), j0 = window && P + t + 1 - window > 0 ? P + t + 1 - window : 0;
                double max = -INFINITY, sum = 0;
                for (int j = j0; j <= P + t; j++) {
                    double d = 0;
                    for (int i = 0; i < hd; i++)
                        d += (double)q[((size_t)b * T + t) * qd + h * hd + i] *
                             k[((size_t)b * L + j) * kvd + kvh * hd + i];
                    s[j] = d / sqrt(hd);
                    max = fmax(max, s[j]);
                }
                for (int j = j0; j <= P + t; j++) sum += exp(s[j] - max);
                double *w = want + ((size_t)b * T + t) * qd + h * hd;
                for (int i = 0; i < hd; i++) w[i] = 0;
                for (int j = j0; j <= P + t; j++)
                    for (int i = 0; i < hd; i++)
                        w[i] += exp(s[j] - max) / sum * v[((size_t)b * L + j) * kvd + kvh * hd + i];
            }
    free(s);
}

// attention_tiled against the naive attention: causal and in a window (shorter and longer than
// the prompt, and than the past rows), GQA, after P past rows, with T, P and the window not
// multiples of the tiles, head_dim of the models' sizes (64, 128, 256) and others (80, 60: the
// products' scalar columns; 6); keys and values in float32, in float16 and in Q8_0 blocks
// (--kv-cache q8_0, head_dim a multiple of 32: the attention of their rounded values), the
// (sequence, head) pairs split in two parts as two threads split them.
static void test_attention_tiled(void **state) {
    (void)state;
    // B, T, P, heads, key/value heads, head_dim, window
    int shapes[][7] = {{1, 100, 0, 4, 2, 64, 0},  {2, 77, 45, 2, 1, 128, 0},    {1, 130, 70, 3, 3, 80, 0},
                       {1, 90, 30, 2, 2, 60, 37}, {1, 200, 100, 2, 1, 256, 50}, {1, 16, 300, 4, 1, 96, 0},
                       {1, 65, 0, 2, 2, 6, 0},    {1, 70, 200, 2, 1, 64, 64},   {2, 150, 9, 2, 1, 64, 1000}};
    const int types[] = {WEIGHTS_F32, WEIGHTS_F16, BLOCK_Q8_0};
    size_t n_shapes = sizeof shapes / sizeof shapes[0];
    for (size_t n = 0; n < 3 * n_shapes; n++) {
        int type = types[n / n_shapes], *shape = shapes[n % n_shapes];
        int B = shape[0], T = shape[1], P = shape[2], n_heads = shape[3], n_kv = shape[4], hd = shape[5];
        int window = shape[6], L = P + T, qd = n_heads * hd, kvd = n_kv * hd;
        if (type == BLOCK_Q8_0 && hd % 32) continue;
        size_t kv_n = (size_t)B * L * kvd, pairs = (size_t)B * n_heads;
        float *q = rand_vec((size_t)B * T * qd, 1.0f), *k = rand_vec(kv_n, 1.0f), *v = rand_vec(kv_n, 1.0f);
        float *out = malloc(sizeof(float) * B * T * qd);
        // the cache's keys and values in its type, and k and v made the values they stand for
        uint8_t *kc = malloc(row_bytes(type, kv_n)), *vc = malloc(row_bytes(type, kv_n));
        if (type == WEIGHTS_F32) memcpy(kc, k, kv_n * sizeof(float)), memcpy(vc, v, kv_n * sizeof(float));
        else if (type == WEIGHTS_F16) floats_to_f16((uint16_t *)kc, k, kv_n), floats_to_f16((uint16_t *)vc, v, kv_n);
        else quantize_q8_0_blocks(kc, k, kv_n), quantize_q8_0_blocks(vc, v, kv_n);
        for (size_t i = 0; i < kv_n; i++) k[i] = widen1(kc, i, type), v[i] = widen1(vc, i, type);
        double *want = malloc(sizeof(double) * B * T * qd);
        naive_attention(want, q, k, v, B, T, P, n_heads, n_kv, hd, window);
        float scale = 1.0f / sqrtf((float)hd);
        attention_tiled(out, NULL, q, kc, vc, type, T, P, n_heads, n_kv, hd, scale, window, 0, pairs / 2);
        attention_tiled(out, NULL, q, kc, vc, type, T, P, n_heads, n_kv, hd, scale, window, pairs / 2, pairs);
        assert_close(out, want, (size_t)B * T * qd, 1e-5);
        free(q);
        free(k);
        free(v);
        free(out);
        free(kc);
        free(vc);
        free(want);
    }
}

// float_to_f16 against the machine's conversion (vcvtps2ph, when it has F16C) and by its
// definition: every float16 comes back as itself, and a float between two of them rounds to
// the nearer, ties to the one with an even last bit; past 65504 by half a step, an infinity.
// got against want within tol as assert_close, want in float32 (as doubles).
#define assert_close_f(g, w, n, t) assert_close_f_at(g, w, n, t, __LINE__)
static void assert_close_f_at(const float *got, const float *want, size_t n, double tol, int line) {
    double *wd = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) wd[i] = want[i];
    assert_close_at(got, wd, n, tol, line);
    free(wd);
}

// Training's tiled attention against attention_forward and attention_backward, which keep the
// probabilities: the outputs, each row's logsumexp against the double-precision one, and dQ,
// dK, dV; with T not a multiple of the tiles (the last query block and the diagonal key block
// cut short), GQA and MQA, head_dim of the products' vector and scalar columns (64, 128, 256,
// 20, 6), two sequences, and called both outside a parallel region and inside one, as
// training's threads call it on their own sequences.
static void test_attention_backward_tiled(void **state) {
    (void)state;
    // B, T, heads, key/value heads, head_dim
    int shapes[][5] = {{1, 300, 4, 2, 64}, {2, 64, 2, 2, 20}, {1, 130, 3, 1, 128},
                       {1, 16, 2, 1, 256}, {2, 200, 2, 2, 6}, {1, 257, 2, 1, 32}};
    for (size_t n = 0; n < 2 * sizeof shapes / sizeof shapes[0]; n++) {
        int *shape = shapes[n / 2], in_parallel = n % 2;
        int B = shape[0], T = shape[1], H = shape[2], KV = shape[3], hd = shape[4], qd = H * hd, kvd = KV * hd;
        size_t nq = (size_t)B * T * qd, nkv = (size_t)B * T * kvd, rows = (size_t)B * H * T;
        float *q = rand_vec(nq, 1.0f), *k = rand_vec(nkv, 1.0f), *v = rand_vec(nkv, 1.0f), *dout = rand_vec(nq, 1.0f);
        float *att = malloc(sizeof(float) * rows * T), *scratch = malloc(sizeof(float) * omp_get_max_threads() * T * T);
        float *out = malloc(sizeof(float) * nq), *dq = malloc(sizeof(float) * nq), *dk = malloc(sizeof(float) * nkv),
              *dv = malloc(sizeof(float) * nkv);
        float *out_t = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * rows),
              *dq_t = malloc(sizeof(float) * nq), *dk_t = rand_vec(nkv, 1.0f), *dv_t = rand_vec(nkv, 1.0f);
        for (size_t i = 0; i < nq; i++) dq_t[i] = NAN; // the backward sets, not adds to, its outputs
        attention_forward(out, att, q, k, v, B, T, 0, H, KV, hd);
        attention_backward(dq, dk, dv, scratch, dout, att, att, q, k, v, B, T, H, KV, hd);
        if (in_parallel) {
#pragma omp parallel num_threads(2)
            if (omp_get_thread_num() == 0) {
                attention_forward_tiled(out_t, lse, q, k, v, B, T, H, KV, hd);
                attention_backward_tiled(dq_t, dk_t, dv_t, dout, out_t, lse, q, k, v, B, T, H, KV, hd);
            }
        } else {
            attention_forward_tiled(out_t, lse, q, k, v, B, T, H, KV, hd);
            attention_backward_tiled(dq_t, dk_t, dv_t, dout, out_t, lse, q, k, v, B, T, H, KV, hd);
        }
        double *want_lse = malloc(sizeof(double) * rows);
        for (size_t r = 0; r < rows; r++) {
            int b = (int)(r / ((size_t)H * T)), h = (int)(r / T % H), t = (int)(r % T), g = h / (H / KV);
            double *s = malloc(sizeof(double) * (t + 1)), max = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                s[j] = 0;
                for (int d = 0; d < hd; d++)
                    s[j] +=
                        (double)q[((size_t)b * T + t) * qd + h * hd + d] * k[((size_t)b * T + j) * kvd + g * hd + d];
                s[j] /= sqrt(hd);
                max = fmax(max, s[j]);
            }
            for (int j = 0; j <= t; j++) sum += exp(s[j] - max);
            want_lse[r] = max + log(sum);
            free(s);
        }
        assert_close(lse, want_lse, rows, 1e-5);
        assert_close_f(out_t, out, nq, 1e-5);
        assert_close_f(dq_t, dq, nq, 1e-4);
        assert_close_f(dk_t, dk, nkv, 1e-4);
        assert_close_f(dv_t, dv, nkv, 1e-4);
        float *bufs[] = {q, k, v, dout, att, scratch, out, dq, dk, dv, out_t, lse, dq_t, dk_t, dv_t};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
        free(want_lse);
    }
}

static void test_float_to_f16(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_to_float((uint16_t)h);
        if (isnan(f)) assert_true(isnan(f16_to_float(float_to_f16(f))));
        else assert_int_equal(float_to_f16(f), h);
        if ((h & 0x7fff) >= 0x7c00 || (h & 0x7fff) == 0x7bff) continue;     // no larger finite neighbour
        float next = f16_to_float((uint16_t)(h + 1)), mid = (f + next) / 2; // exact: 24 bits hold it
        assert_int_equal(float_to_f16(mid), (h & 1) ? h + 1 : h);
        assert_int_equal(float_to_f16(nextafterf(mid, f)), h);
        assert_int_equal(float_to_f16(nextafterf(mid, next)), h + 1);
    }
    assert_int_equal(float_to_f16(65519.99f), 0x7bff);
    assert_int_equal(float_to_f16(65520.0f), 0x7c00);
    assert_int_equal(float_to_f16(-1e30f), 0xfc00);
    assert_int_equal(float_to_f16(1e-30f), 0);
    float x[1000];
    uint16_t fast[1000];
    for (int i = 0; i < 1000; i++) {
        const float special[] = {INFINITY, -INFINITY, NAN, -0.0f, 0x1p-25f, 0x1p-24f, 3e-8f, 6.1e-5f, 65504.0f, 7e4f};
        union {
            uint32_t u;
            float f;
        } r = {.u = rnd()}; // any bits: NaNs with payloads, subnormals, every exponent
        x[i] = i < 10 ? special[i] : r.f;
    }
    floats_to_f16(fast, x, 997); // the vector conversion where there is one, then the 5 left one by one
    for (int i = 0; i < 997; i++) assert_int_equal(fast[i], float_to_f16(x[i]));
}

static void test_activations(void **state) {
    (void)state;
    float h[4] = {-2.0f, -0.5f, 0.5f, 3.0f}, g[4] = {1.0f, 2.0f, -1.0f, 0.5f};
    for (int kind = 0; kind < FFN_KINDS; kind++) {
        float x[4], y[4];
        memcpy(x, h, sizeof x);
        activation_forward(kind, x, x, g, 4); // in place, as ./run calls it
        activation_forward(kind, y, h, g, 4); // into another buffer, as ./train does
        for (int i = 0; i < 4; i++) {
            assert_true(x[i] == y[i]);
            double a = h[i], gelu = 0.5 * a * (1 + tanh(sqrt(2 / 3.141592653589793) * (a + 0.044715 * a * a * a)));
            double want = kind == FFN_SWIGLU       ? a / (1 + exp(-a)) * g[i]
                          : kind == FFN_GELU_TANH  ? gelu
                          : kind == FFN_GEGLU_TANH ? gelu * g[i]
                          : kind == FFN_GELU_ERF   ? 0.5 * a * (1 + erf(a / sqrt(2)))
                                                   : fmax(a, 0);
            assert_true(fabs(x[i] - want) < 1e-6);
        }
    }
}

// Random int8 values and scales for a Q8_0 matrix [rows, n_in] (freed by the caller).
static QMat random_q8(size_t rows, int n_in, int gs) {
    int8_t *q = malloc(rows * n_in);
    float *sc = malloc(rows * (n_in / gs) * sizeof(float));
    for (size_t i = 0; i < rows * n_in; i++) q[i] = (int8_t)(frand() * 127.9f);
    for (size_t i = 0; i < rows * (n_in / gs); i++) sc[i] = frand() * 0.02f;
    return (QMat){.q = q, .s = sc, .gs = gs, .type = WEIGHTS_Q8_0};
}

// Q8_0 products, one row (dot_q8) and many (matmul_panels, or rows dequantised in chunks and
// then sgemm), against the dequantised weights in double precision, and many rows against
// assert_fused. The group sizes take the vector path (multiples of 16, with and without a
// 16-wide tail) and the scalar one; many tokens take whole tiles and a short one, many outputs
// whole panels and a short one, and over PANEL_K inputs two panels in turn; the widest inputs
// make the sgemm path work in several chunks, and in chunks of one row.
static void test_matmul_q8(void **state) {
    (void)state;
    int sizes[][4] = {{1, 768, 13, 64},   {1, 48, 7, 48},      {1, 40, 5, 4},
                      {1, 24, 3, 24},     {7, 64, 9, 16},      {5, 40, 11, 8},
                      {1, 96, 5, 96},     {2, 1 << 17, 5, 64}, {3, (1 << 18) + 64, 3, 32},
                      {19, 2112, 45, 32}, {9, 96, 33, 8}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int T = sizes[k][0], n_in = sizes[k][1], n_out = sizes[k][2], gs = sizes[k][3];
        QMat m = random_q8(n_out, n_in, gs);
        float *x = rand_vec((size_t)T * n_in, 1.0f), *b = rand_vec(n_out, 1.0f),
              *out = malloc(sizeof(float) * T * n_out);
        float *w = malloc(sizeof(float) * n_out * n_in);
        float *wbuf = malloc(sizeof(float) * qchunk_floats(n_in));
        double *want = malloc(sizeof(double) * T * n_out);
        dequantize_rows(w, &m, n_in, 0, n_out);
        for (size_t i = 0; i < (size_t)n_out * n_in; i++)
            if (w[i] != (float)m.q[i] * m.s[i / gs]) fail_msg("dequantised weight %zu", i);
        naive_linear(want, x, w, b, T, n_in, n_out);
        Linear l = {.out = out, .b = b, .n_out = n_out, .qw = m, .wbuf = wbuf};
        matmul_part(&l, x, T, n_in, 0, n_out);
        assert_close(out, want, (size_t)T * n_out, 1e-4);
        if (T > 1) assert_fused(out, x, w, b, T, n_in, n_out);
        free((void *)m.q);
        free((void *)m.s);
        free(x);
        free(b);
        free(out);
        free(w);
        free(wbuf);
        free(want);
    }
}

// bfloat16 and float16 by their definitions: sign, exponent and mantissa fields.
static float naive_bf16(uint16_t h) {
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return (float)(h & 0x8000 ? -v : v);
}
static float naive_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (float)(h & 0x8000 ? -v : v);
}

// got equals want bit for bit; a NaN stays a NaN, float16's made quiet (as vcvtph2ps does),
// bfloat16's with its bits kept.
static void assert_same_float(float got, float want, uint16_t h, int type) {
    uint32_t g, w;
    memcpy(&g, &got, 4), memcpy(&w, &want, 4);
    if (isnan(want)
            ? g != (type == WEIGHTS_BF16 ? (uint32_t)h << 16 : (h & 0x8000u) << 16 | 0x7fc00000u | (h & 1023u) << 13)
            : g != w)
        fail_msg("16-bit value 0x%04x: got %.9g (0x%08x), want %.9g (0x%08x)", h, got, g, want, w);
}

// Every bfloat16 and float16 value widened, by the scalar conversion and by dequantize_rows
// (vector blocks, then a scalar tail), from row 0 and from a later row.
static void test_widen(void **state) {
    (void)state;
    int cols = 21851, rows = 3; // an odd width: 3 rows hold all 65536 values and a few more
    uint16_t *h = malloc(sizeof(uint16_t) * rows * cols);
    float *out = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++) h[i] = (uint16_t)i;
    for (int type = WEIGHTS_BF16; type <= WEIGHTS_F16; type++) {
        QMat m = {.half = h, .type = type};
        for (int r0 = 0; r0 < 2; r0++) {
            dequantize_rows(out, &m, cols, r0, rows);
            for (int i = r0 * cols; i < rows * cols; i++) {
                float want = type == WEIGHTS_BF16 ? naive_bf16(h[i]) : naive_f16(h[i]);
                assert_same_float(out[i - r0 * cols], want, h[i], type);
                assert_same_float(type == WEIGHTS_BF16 ? bf16_to_float(h[i]) : f16_to_float(h[i]), want, h[i], type);
            }
        }
    }
    free(h);
    free(out);
}

// Random 16-bit weights of about the size of frand() * scale (scale >= 2^-8): any sign and
// mantissa, exponents from scale / 64 to scale; every 16th a subnormal, every 32nd a zero.
static uint16_t *random_half(size_t n, int type, float scale) {
    uint16_t *h = malloc(n * sizeof(uint16_t));
    int mant = type == WEIGHTS_BF16 ? 7 : 10, bias = type == WEIGHTS_BF16 ? 127 : 15;
    int top = bias + (int)floorf(log2f(scale));
    for (size_t i = 0; i < n; i++) {
        uint64_t r = (uint64_t)((frand() + 1.0f) * 1e9f);
        int e = i % 16 == 5 ? 0 : top - (int)(r % 7);
        h[i] = (uint16_t)((r & 0x10000) >> 1 | e << mant | (i % 32 == 5 ? 0 : (r >> 3) & ((1u << mant) - 1)));
    }
    return h;
}

// bfloat16 and float16 products: one row (dot_w on the 16-bit values) bit for bit equal to the
// float32 dot on the widened weights, and many rows (matmul_panels, assert_fused; or widened in
// chunks, then sgemm); both against the widened weights in double precision. Odd widths take
// the scalar tails; the sizes take whole and short tiles and panels, and two panels in turn
// over PANEL_K inputs; the widest inputs make the sgemm path work in several chunks, and in
// chunks of one row. The
// weights are scaled by 2 / sqrt(n_in), so that the sums, and float32's rounding of them, stay
// of the size of one.
static void test_matmul_half(void **state) {
    (void)state;
    int sizes[][3] = {{1, 768, 13},   {1, 1, 3},       {1, 31, 4},
                      {1, 47, 5},     {1, 65, 3},      {5, 33, 17},
                      {7, 64, 9},     {2, 1 << 17, 5}, {3, (1 << 18) + 48, 3},
                      {17, 2101, 70}, {8, 31, 32},     {11, 100, 33}};
    for (int type = WEIGHTS_BF16; type <= WEIGHTS_F16; type++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int T = sizes[k][0], n_in = sizes[k][1], n_out = sizes[k][2];
            QMat m = {.half = random_half((size_t)n_out * n_in, type, 2.0f / sqrtf(n_in)), .type = type};
            float *x = rand_vec((size_t)T * n_in, 1.0f), *b = rand_vec(n_out, 1.0f);
            float *out = malloc(sizeof(float) * T * n_out), *out32 = malloc(sizeof(float) * T * n_out);
            float *w = malloc(sizeof(float) * n_out * n_in), *wbuf = malloc(sizeof(float) * qchunk_floats(n_in));
            double *want = malloc(sizeof(double) * T * n_out);
            dequantize_rows(w, &m, n_in, 0, n_out);
            naive_linear(want, x, w, b, T, n_in, n_out);
            Linear l = {.out = out, .b = b, .n_out = n_out, .qw = m, .wbuf = wbuf};
            Linear l32 = {.out = out32, .w = w, .b = b, .n_out = n_out};
            matmul_part(&l, x, T, n_in, 0, n_out);
            matmul_part(&l32, x, T, n_in, 0, n_out);
            assert_close(out, want, (size_t)T * n_out, 1e-4);
            if (T == 1) assert_memory_equal(out, out32, sizeof(float) * n_out);
            else if (T <= FEW_TOKENS && type == WEIGHTS_F16) assert_as_one_token_steps(out, l, x, T, n_in, n_out);
            else assert_fused(out, x, w, b, T, n_in, n_out);
            free((void *)m.half);
            free(x);
            free(b);
            free(out);
            free(out32);
            free(w);
            free(wbuf);
            free(want);
        }
}

// llama.cpp's block types, value by value as ggml's reference dequantisers loop over a block:
// an implementation independent of model/quant.h's, in the same float32 operations.
static float naive_f16_at(const uint8_t *b) { return naive_f16((uint16_t)(b[0] | b[1] << 8)); }

static void naive_k_scale(const uint8_t *q, int j, int *sc, int *mn) {
    if (j < 4) *sc = q[j] & 63, *mn = q[j + 4] & 63;
    else *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}

static void naive_dequantize_block(int type, const uint8_t *x, float *y) {
    static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    if (type == BLOCK_Q4_0 || type == BLOCK_Q4_1 || type == BLOCK_IQ4_NL) {
        float d = naive_f16_at(x), m = type == BLOCK_Q4_1 ? naive_f16_at(x + 2) : 0.0f;
        const uint8_t *qs = x + (type == BLOCK_Q4_1 ? 4 : 2);
        for (int j = 0; j < 16; j++)
            for (int h = 0; h < 2; h++) {
                int q = h ? qs[j] >> 4 : qs[j] & 0xF;
                y[j + 16 * h] = type == BLOCK_Q4_0 ? (q - 8) * d : type == BLOCK_Q4_1 ? q * d + m : d * iq4nl[q];
            }
    } else if (type == BLOCK_Q5_0 || type == BLOCK_Q5_1) {
        int one = type == BLOCK_Q5_1;
        float d = naive_f16_at(x), m = one ? naive_f16_at(x + 2) : 0.0f;
        uint32_t qh;
        memcpy(&qh, x + (one ? 4 : 2), 4);
        const uint8_t *qs = x + (one ? 8 : 6);
        for (int j = 0; j < 16; j++) {
            int x0 = (qs[j] & 0xF) | (((qh >> j) << 4) & 0x10), x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
            y[j] = one ? x0 * d + m : (x0 - 16) * d;
            y[j + 16] = one ? x1 * d + m : (x1 - 16) * d;
        }
    } else if (type == BLOCK_Q8_0) {
        for (int j = 0; j < 32; j++) y[j] = (int8_t)x[2 + j] * naive_f16_at(x);
    } else if (type == BLOCK_Q2_K) {
        const uint8_t *sc = x, *q = x + 16;
        float d = naive_f16_at(x + 80), min = naive_f16_at(x + 82);
        int is = 0;
        for (int n = 0; n < 256; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++, is++)
                    for (int l = 0; l < 16; l++)
                        *y++ = d * (sc[is] & 0xF) * ((q[l + 16 * half] >> shift) & 3) - min * (sc[is] >> 4);
    } else if (type == BLOCK_Q3_K) {
        const uint8_t *hm = x, *q = x + 32, *s = x + 96;
        float d = naive_f16_at(x + 108);
        int scales[16];
        for (int i = 0; i < 16; i++)
            scales[i] = ((i < 8 ? s[i] & 0xF : s[i - 8] >> 4) | (((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4)) - 32;
        int is = 0, m = 1;
        for (int n = 0; n < 256; n += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int half = 0; half < 2; half++, is++)
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = d * scales[is] * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
    } else if (type == BLOCK_Q4_K || type == BLOCK_Q5_K) {
        int five = type == BLOCK_Q5_K;
        const uint8_t *q = x + (five ? 48 : 16), *qh = x + 16;
        float d = naive_f16_at(x), min = naive_f16_at(x + 2);
        int u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, q += 32, u1 <<= 2, u2 <<= 2) {
            int sc, mn, sc2, mn2;
            naive_k_scale(x + 4, is, &sc, &mn);
            naive_k_scale(x + 4, is + 1, &sc2, &mn2);
            for (int l = 0; l < 32; l++) *y++ = d * sc * ((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - min * mn;
            for (int l = 0; l < 32; l++) *y++ = d * sc2 * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - min * mn2;
        }
    } else if (type == BLOCK_IQ4_XS) {
        float d = naive_f16_at(x);
        int scales_h = x[2] | x[3] << 8;
        for (int ib = 0; ib < 8; ib++, y += 32) {
            int ls = ((x[4 + ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
            float dl = d * (ls - 32);
            const uint8_t *qs = x + 8 + 16 * ib;
            for (int j = 0; j < 16; j++) y[j] = dl * iq4nl[qs[j] & 0xF], y[j + 16] = dl * iq4nl[qs[j] >> 4];
        }
    } else { // Q6_K
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        float d = naive_f16_at(x + 208);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                y[l] = d * sc[is] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
    }
}

// A matrix [rows, n_in] of random blocks of type (freed by the caller), every float16 scale a
// positive normal value below 1/64 / sqrt(n_in), so that the products stay of the size of one.
static QMat random_blocks(int type, size_t rows, int n_in) {
    static const int scale_at[MATRIX_TYPES][2] = {
        [BLOCK_Q4_0] = {0, -1}, [BLOCK_Q4_1] = {0, 2},    [BLOCK_Q5_0] = {0, -1},   [BLOCK_Q5_1] = {0, 2},
        [BLOCK_Q8_0] = {0, -1}, [BLOCK_Q2_K] = {80, 82},  [BLOCK_Q3_K] = {108, -1}, [BLOCK_Q4_K] = {0, 2},
        [BLOCK_Q5_K] = {0, 2},  [BLOCK_Q6_K] = {208, -1}, [BLOCK_IQ4_NL] = {0, -1}, [BLOCK_IQ4_XS] = {0, -1}};
    size_t blocks = rows * n_in / matrix_types[type].block, bytes = matrix_types[type].block_bytes;
    uint8_t *b = malloc(blocks * bytes);
    int top = 14 - (int)(log2(n_in) / 2); // float16 exponent field: 2^(top - 15) at most
    for (size_t i = 0; i < blocks * bytes; i++) b[i] = (uint8_t)(rand() & 255);
    for (size_t i = 0; i < blocks; i++)
        for (int k = 0; k < 2; k++)
            if (scale_at[type][k] >= 0) {
                uint16_t h = (uint16_t)((top - rand() % 4) << 10 | (rand() & 1023));
                memcpy(b + i * bytes + scale_at[type][k], &h, 2);
            }
    return (QMat){.blocks = b, .type = type};
}

// A KV cache's rows, n values (a multiple of 32 for Q8_0) of type float16 (rounded) or Q8_0
// (quantize_q8_0_blocks); x becomes the values it holds, as float32.
static void *cache_rows(float *x, size_t n, int type) {
    void *row = malloc(kv_span(type, n));
    if (type == WEIGHTS_F16) floats_to_f16(row, x, n);
    else quantize_q8_0_blocks(row, x, n);
    for (size_t i = 0; i < n; i += type == BLOCK_Q8_0 ? 32 : 1)
        if (type == BLOCK_Q8_0) naive_dequantize_block(BLOCK_Q8_0, (const uint8_t *)row + i / 32 * 34, x + i);
        else x[i] = naive_f16(((const uint16_t *)row)[i]);
    return row;
}

// A Q8_0 cache block as llama.cpp's quantize_row_q8_0_ref makes it: the scale max |x| / 127,
// stored as float16; each value x / scale rounded to the nearest integer, halves away from zero.
static void naive_q8_0_block(const float *x, uint8_t *b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127, id = d ? 1 / d : 0;
    uint16_t h = float_to_f16(d); // test_float_to_f16 holds it to its definition
    b[0] = h & 0xFF, b[1] = h >> 8;
    for (int j = 0; j < 32; j++) {
        float v = x[j] * id, r = v >= 0 ? floorf(v + 0.5f) : -floorf(-v + 0.5f);
        b[2 + j] = (uint8_t)(int8_t)r;
    }
}

// --kv-cache q8_0's rows: quantised as llama.cpp quantises them, byte for byte (zeros, halves
// and a block's largest value among them), and read back by every load the attention uses
// (widen1, widen_vreg, widen_vec16, dot_w) as the blocks' q × d.
static void test_kv_q8_0(void **state) {
    (void)state;
    size_t n = 32 * 40;
    float *x = rand_vec(n, 3.0f), *back = malloc(n * sizeof(float)), *q = rand_vec(64, 1.0f);
    for (int j = 0; j < 32; j++) x[j] = 0.0f;                        // a block of zeros: scale 0
    for (int j = 0; j < 32; j++) x[32 + j] = (float)(j - 16) * 0.5f; // halves: 8 / 127 steps land on them
    x[64] = -7.0f, x[65] = 7.0f;                                     // a block's largest either sign
    uint8_t *row = malloc(kv_span(BLOCK_Q8_0, n)), want[34];
    quantize_q8_0_blocks(row, x, n);
    assert_int_equal(kv_span(BLOCK_Q8_0, n), n / 32 * 34);
    for (size_t b = 0; b < n / 32; b++) {
        naive_q8_0_block(x + b * 32, want);
        assert_memory_equal(row + b * 34, want, 34);
        float d = naive_f16_at(want), amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        naive_dequantize_block(BLOCK_Q8_0, want, back + b * 32);
        for (int j = 0; j < 32; j++) // half a step off, the step's float16 rounding aside
            assert_true(fabsf(back[b * 32 + j] - x[b * 32 + j]) <= 0.5f * d + amax * 1e-3f);
    }
    assert_int_equal((int8_t)row[2 * 34 + 2], -127);
    assert_int_equal((int8_t)row[2 * 34 + 3], 127);
    for (size_t i = 0; i < n; i++) assert_true(widen1(row, i, BLOCK_Q8_0) == back[i]);
    for (size_t i = 0; i < n; i += VEC) {
        vec16 v;
        widen_vec16(&v, row, i, BLOCK_Q8_0);
        for (int j = 0; j < VEC; j++) assert_true(v[j] == back[i + j]);
    }
    for (size_t i = 0; i < n; i += VREG) {
        vreg v;
        widen_vreg(&v, row, i, BLOCK_Q8_0);
        for (int j = 0; j < VREG; j++) assert_true(v[j] == back[i + j]);
    }
    for (size_t i = 0; i + 64 <= n; i += 64) {
        double want_dot = 0;
        for (int j = 0; j < 64; j++) want_dot += (double)back[i + j] * q[j];
        double got = dot_w(row + i / 32 * 34, BLOCK_Q8_0, q, 64);
        assert_true(fabs(got - want_dot) <= 1e-5 * (1 + fabs(want_dot)));
    }
    // a row of any whole blocks, its length known only at run time (a head's keys), sums in the
    // order of the widened row's: bit for bit its float32 dot product
    for (volatile int m = 32; m <= 320; m += 32)
        for (size_t i = 0; i + m <= n; i += 8 * (size_t)m)
            assert_true(dot_w(row + i / 32 * 34, BLOCK_Q8_0, x, m) == dot_w(back + i, WEIGHTS_F32, x, m));
    free(x);
    free(back);
    free(q);
    free(row);
}

// One-token attention (attention_token) over float32, float16 and Q8_0 caches against the naive
// attention of the values each cache holds, on 1, 2 and 3 threads: with fewer key/value heads
// than threads the keys are split, and the partial softmaxes' merge must give the unsplit
// result to float32's rounding. Ranges shorter than the threads (a chunk with no keys) too.
static void test_attention_token(void **state) {
    (void)state;
    // n_heads, n_kv_heads, head_dim, keys
    int shapes[][4] = {{4, 1, 64, 300},   {6, 3, 32, 1000}, {8, 2, 64, 37}, {2, 2, 96, 2},
                       {12, 12, 64, 129}, {3, 1, 32, 1},    {4, 4, 20, 50}};
    int types[] = {WEIGHTS_F32, WEIGHTS_F16, BLOCK_Q8_0};
    for (size_t n_shape = 0; n_shape < sizeof shapes / sizeof shapes[0]; n_shape++)
        for (int ti = 0; ti < 3; ti++) {
            int H = shapes[n_shape][0], KV = shapes[n_shape][1], hd = shapes[n_shape][2], n = shapes[n_shape][3];
            int type = types[ti], qd = H * hd, kvd = KV * hd;
            if (type == BLOCK_Q8_0 && hd % 32) continue;
            float scale = 1.0f / sqrtf((float)hd), *q = rand_vec(qd, 1.0f);
            float *k = rand_vec((size_t)n * kvd, 2.0f), *v = rand_vec((size_t)n * kvd, 1.0f);
            void *kc = type == WEIGHTS_F32 ? k : NULL, *vc = type == WEIGHTS_F32 ? v : NULL;
            if (type != WEIGHTS_F32) {
                kc = cache_rows(k, (size_t)n * kvd, type);
                vc = cache_rows(v, (size_t)n * kvd, type);
            }
            double *want = calloc(qd, sizeof(double)), *sc = malloc(sizeof(double) * n);
            for (int h = 0; h < H; h++) {
                int g = h / (H / KV);
                double max = -INFINITY, sum = 0;
                for (int j = 0; j < n; j++) {
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)q[h * hd + i] * k[(size_t)j * kvd + g * hd + i];
                    sc[j] = d * scale, max = fmax(max, sc[j]);
                }
                for (int j = 0; j < n; j++) sum += exp(sc[j] - max);
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < hd; i++)
                        want[h * hd + i] += exp(sc[j] - max) / sum * v[(size_t)j * kvd + g * hd + i];
            }
            float *out[3], *scores = malloc(sizeof(float) * H * n), *parts = malloc(sizeof(float) * H * 3 * (hd + 2));
            for (int nt = 1; nt <= 3; nt++) {
                out[nt - 1] = malloc(sizeof(float) * qd);
                Barrier barrier = {0};
#pragma omp parallel num_threads(nt)
                attention_token(out[nt - 1], scores, (size_t)n, parts, q, kc, vc, type, n, H, KV, hd, scale,
                                thread_num(), team_size(), &barrier);
                assert_close(out[nt - 1], want, qd, 1e-5);
            }
            for (int nt = 2; nt <= 3; nt++) { // the merge against one thread's single pass
                double one[4096];
                for (int i = 0; i < qd; i++) one[i] = out[0][i];
                assert_close(out[nt - 1], one, qd, 1e-6);
            }
            for (int i = 0; i < 3; i++) free(out[i]);
            if (type != WEIGHTS_F32) free(kc), free(vc);
            free(q), free(k), free(v), free(want), free(sc), free(scores), free(parts);
        }
}

// quantize_input against a plain reading of its definition: per 32 values a scale amax /
// 32767, each value x / scale rounded to nearest (ties to even), in the machine's layout (a
// 16-bit integer, or its two bytes apart); the tail past n zero. On the vector path the rows
// whose 32 values are whole go through AVX2, so n = 40 and 300 take both.
static void test_quantize_input(void **state) {
    (void)state;
    int sizes[] = {32, 40, 256, 300, 2048};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        float *x = rand_vec((size_t)n, 3.0f);
        x[n / 2] = 0.0f, x[n - 1] = -7.5f; // a zero, and a block's largest magnitude negative
        uint8_t *row = aligned_alloc(64, quantized_row_bytes(n));
        quantize_input(row, x, n);
        QuantizedRow q = quantized_row(row, n);
        for (size_t i = 0; i < quantized_values(n); i++) {
            size_t b0 = i / 32 * 32;
            double amax = 0.0;
            for (size_t j = b0; j < b0 + 32 && j < (size_t)n; j++) amax = fmax(amax, fabs(x[j]));
            double want = i < (size_t)n && amax > 0 ? nearbyint((double)(x[i] * (32767.0f / (float)amax))) : 0.0;
            int got = quantized_value(q, i);
            if (got != (int)want) fail_msg("n %d: value %zu is %d, not %g", n, i, got, want);
            if (q.dx[i / 16] != (float)amax / 32767.0f) fail_msg("n %d: scale of group %zu", n, i / 16);
        }
        free(x);
        free(row);
    }
}

// Every block type: dequantize_rows against the naive dequantiser on random blocks, and the
// products, one row (dot_quantized, whose whole chunks take the register unpacking where
// the machine has it) and many (panels), against the naive weights summed in double
// precision. The products round x to 16 bits a group of 32 at a time (the one-token rows in a
// type's own order the whole row at once: ordered_product), so each output may be off
// by at most Σ |w_i| · (half a step of x_i's group) plus float32 rounding, and is checked
// against that bound. The sizes take one block per row and many, whole and short chunks (rows
// of 288), tiles of 1 to 16 tokens (and where the machine has AMX, one or two tiles of 16 in
// it with the rest after), two panels in turn over QPANEL_K, one-token rows in
// parts of 16 and in a last part shorter than the others, and a few tokens' rows in their own
// order over more rows than one pass of the tokens takes, each token's outputs bit for bit its
// own one-token product's, and the same with either count of rows at once. The outputs are computed in two ranges, as two threads do.
static void test_matmul_blocks(void **state) {
    (void)state;
    int sizes[][3] = {{1, 256, 5},   {1, 2304, 13}, {1, 512, 300}, {1, 768, 97},   {3, 512, 33},  {9, 256, 40},
                      {17, 2304, 9}, {2, 4096, 17}, {5, 288, 7},   {3, 4096, 400}, {12, 512, 20}, {35, 512, 100}};
    for (int type = BLOCK_Q4_0; type < MATRIX_TYPES; type++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int T = sizes[k][0], n_in = sizes[k][1], n_out = sizes[k][2], block = matrix_types[type].block;
            if (n_in % block) continue;
            QMat m = random_blocks(type, n_out, n_in);
            float *x = rand_vec((size_t)T * n_in, 1.0f), *b = rand_vec(n_out, 1.0f);
            for (size_t i = 0; i < (size_t)T * n_in; i++) x[i] *= powf(0.1f, (float)(i / 32 % 3)); // groups of 3 sizes
            float *out = malloc(sizeof(float) * (T + 1) * n_out), *w = malloc(sizeof(float) * n_out * n_in);
            float *naive = malloc(sizeof(float) * n_out * n_in), *wbuf = malloc(sizeof(float) * qchunk_floats(n_in));
            uint8_t *xq = aligned_alloc(64, (T + 2) * quantized_row_bytes(n_in));
            double *want = malloc(sizeof(double) * T * n_out);
            for (size_t i = 0; i < (size_t)n_out * n_in / block; i++)
                naive_dequantize_block(type, m.blocks + i * matrix_types[type].block_bytes, naive + i * block);
            dequantize_rows(w, &m, n_in, 0, n_out);
            for (size_t i = 0; i < (size_t)n_out * n_in; i++) // one rounding apart at most: a fused multiply-add
                if (fabsf(w[i] - naive[i]) > 1e-6f * fabsf(naive[i]) + 1e-30f)
                    fail_msg("%s: dequantised weight %zu is %g, not %g", matrix_types[type].name, i, w[i], naive[i]);
            naive_linear(want, x, naive, b, T, n_in, n_out);
            Linear l = {.out = out, .b = b, .n_out = n_out, .qw = m, .wbuf = wbuf, .xq = xq};
            matmul_part(&l, x, T, n_in, 0, n_out / 3);
            matmul_part(&l, x, T, n_in, n_out / 3, n_out);
            int group = ordered_product(type, T, n_in) ? n_in : 32; // the values rounded with one scale
#if defined(QUANT_ORDERED)
            // every count of rows at once makes each row's sums alike: the count this machine
            // does not take is held to the one it does, bit for bit
            int counts[] = {ORDERED_ROWS_AMD, ORDERED_ROWS_MOST};
            for (int c = 0; group == n_in && c < 2; c++)
                for (int t = 0; t < T; t++) {
                    float *each = out + (size_t)T * n_out;
                    ordered_rows_of(type, counts[c], each, b, m.blocks, row_bytes(type, n_in),
                                    xq + (t + 1) * quantized_row_bytes(n_in), n_in, 0, n_out);
                    if (memcmp(each, out + (size_t)t * n_out, sizeof(float) * n_out))
                        fail_msg("%s, T %d, %d x %d: token %d's outputs with %d rows at once differ",
                                 matrix_types[type].name, T, n_out, n_in, t, counts[c]);
                }
#endif
            for (int t = 0; T > 1 && group == n_in && t < T; t++) { // bit for bit each token alone
                Linear one = l;
                one.out = out + (size_t)T * n_out;
                matmul_part(&one, x + (size_t)t * n_in, 1, n_in, 0, n_out);
                if (memcmp(one.out, out + (size_t)t * n_out, sizeof(float) * n_out))
                    fail_msg("%s, T %d, %d x %d: token %d's outputs are not its own product's", matrix_types[type].name,
                             T, n_out, n_in, t);
            }
            for (int t = 0; t < T; t++)
                for (int o = 0; o < n_out; o++) {
                    const float *xt = x + (size_t)t * n_in, *wo = naive + (size_t)o * n_in;
                    double bound = 0.0, size = fabs(b[o]);
                    for (int i = 0; i < n_in; i += group) {
                        double amax = 0.0;
                        for (int j = i; j < i + group; j++) amax = fmax(amax, fabs(xt[j]));
                        for (int j = i; j < i + group; j++)
                            bound += fabs(wo[j]) * amax / 65534.0, size += fabs(wo[j]) * fabs(xt[j]);
                    }
                    double got = out[(size_t)t * n_out + o], ref = want[(size_t)t * n_out + o];
                    if (fabs(got - ref) > 1.0001 * bound + 2e-6 * size)
                        fail_msg("%s, T %d, %d x %d: output [%d, %d] is %.9g, not %.9g (bound %.3g)",
                                 matrix_types[type].name, T, n_out, n_in, t, o, got, ref, bound + 2e-6 * size);
                }
            free((void *)m.blocks);
            free(x);
            free(b);
            free(out);
            free(w);
            free(naive);
            free(wbuf);
            free(xq);
            free(want);
        }
}

// A random model of the given knobs, in memory, as train would hold it.
typedef struct {
    Config c;
    float *block;
    Weights w;
} TestModel;

// The matrices of a model not in float32, in carve_weights' order, with their sizes in weights.
static int model_matrices(const TestModel *m, const QMat **q, size_t *n) {
    const Config *c = &m->c;
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t h = c->hidden_dim;
    int k = 0;
    q[k] = &m->w.qtok_embedding, n[k++] = c->vocab_size * d;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *L = &m->w.layers[l];
        q[k] = &L->qwq, n[k++] = qd * d;
        q[k] = &L->qwk, n[k++] = kv * d;
        q[k] = &L->qwv, n[k++] = kv * d;
        q[k] = &L->qwo, n[k++] = d * qd;
        q[k] = &L->qw1, n[k++] = h * d;
        if (L->qw3.q || L->qw3.half || L->qw3.blocks) q[k] = &L->qw3, n[k++] = h * d;
        q[k] = &L->qw2, n[k++] = d * h;
    }
    if (!c->tied_classifier) q[k] = &m->w.qclassifier, n[k++] = c->vocab_size * d;
    return k;
}

// Every tensor random, of about frand() * 0.3: a Q8_0 model's int8 values are the random
// floats' bytes, with scales to match; a bfloat16 or float16 model's matrices are random
// 16-bit values.
static TestModel random_model(Config c) {
    TestModel m = {.c = c};
    size_t bytes = carve_weights(&c, NULL, NULL);
    m.block = aligned_alloc(MODEL_ALIGN, bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++) m.block[i] = frand() * 0.3f;
    weights_init(&m.w, &m.c, m.block);
    const QMat *q[2 + 7 * 8];
    size_t n[2 + 7 * 8];
    assert_true(c.n_layers <= 8);
    for (int k = c.weight_type == WEIGHTS_F32 ? 0 : model_matrices(&m, q, n); k-- > 0;) {
        if (c.weight_type == WEIGHTS_Q8_0) {
            for (size_t i = 0; i < n[k] / c.group_size; i++) ((float *)q[k]->s)[i] = frand() * (0.3f / 127);
        } else {
            uint16_t *h = random_half(n[k], c.weight_type, 0.3f);
            memcpy((void *)q[k]->half, h, n[k] * sizeof(uint16_t));
            free(h);
        }
    }
    return m;
}

static Config knobs(int variant) {
    // packed by hand: a field per line would fill the screen
    // clang-format off
    Config c = {
        .dim = 24, .hidden_dim = 40, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 6,
        .vocab_size = 37, .seq_len = 20, .rope_dims = 6, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
        .embed_scale = 1.0f, .final_norm = 1, .tied_classifier = 1, .bos_id = -1, .eos_id = -1,
    };
    // clang-format on
    switch (variant) {
    case 1: // GPT-2
        c.pos_kind = POS_LEARNED;
        c.ffn_kind = FFN_GELU_TANH;
        c.norm_kind = NORM_LAYER;
        c.bias_flags = BIAS_ALL;
        c.n_kv_heads = 4;
        break;
    case 2: // the original decoder: post-norm, sinusoid, ReLU, scaled embedding, untied
        c.pos_kind = POS_SINUSOIDAL;
        c.ffn_kind = FFN_RELU;
        c.norm_kind = NORM_LAYER;
        c.post_norm = 1;
        c.final_norm = 0;
        c.tied_classifier = 0;
        c.embed_scale = sqrtf(24.0f);
        c.n_kv_heads = 1;
        c.head_dim = 5;
        c.rope_dims = 0;
        break;
    case 3: // partial RoPE, qkv biases only, GELU erf
        c.rope_dims = 4;
        c.bias_flags = BIAS_QKV;
        c.ffn_kind = FFN_GELU_ERF;
        break;
    }
    return c;
}

// The whole prompt in one batch, in chunks of 3, and one token at a time: the same logits.
// The wide variants are big enough for forward's parallel region (run_all.sh gives two
// threads), and their batch is also checked against one thread's and three threads', and
// their one-token steps on three threads (attention_token splitting each head's keys). The
// last three are Q8_0 models: two wide ones with group sizes for the vector path (32 and 128)
// and a narrow one for the scalar path (4).
static void test_batched_equals_one_token(void **state) {
    (void)state;
    for (int variant = 0; variant < 11; variant++) {
        Config c = knobs(variant < 8 ? variant % 4 : variant - 8);
        if (variant >= 8) c.weight_type = WEIGHTS_Q8_0, c.group_size = variant == 8 ? 32 : variant == 9 ? 128 : 4;
        if (variant >= 4 && variant != 10) {
            c.dim = 240, c.hidden_dim = 400, c.head_dim = 60;
            c.rope_dims = c.rope_dims ? (variant == 7 ? 40 : 60) : 0;
            if (c.post_norm) c.embed_scale = sqrtf(240.0f);
            if (variant >= 8) c.dim = 256, c.hidden_dim = 384, c.head_dim = 64, c.rope_dims = c.rope_dims ? 64 : 0;
        }
        TestModel m = random_model(c);
        int T = 11, V = m.c.vocab_size, tokens[11];
        for (int t = 0; t < T; t++) tokens[t] = (t * 7 + 3) % V;
        float *all = malloc(sizeof(float) * T * V), *one = malloc(sizeof(float) * T * V);
        RunState s;
        assert_int_equal(state_init(&s, &m.c, 16, WEIGHTS_F32), 0);
        forward(&m.c, &m.w, &s, tokens, T, 0, all, 0);
        if (variant >= 4 && variant != 10) {
            int threads = omp_get_max_threads();
            omp_set_num_threads(1);
            forward(&m.c, &m.w, &s, tokens, T, 0, one, 0);
            double *serial = malloc(sizeof(double) * T * V);
            for (int i = 0; i < T * V; i++) serial[i] = one[i];
            assert_close(all, serial, (size_t)T * V, 1e-4);
            // three threads: heads (and the key/value heads of GQA) that do not divide evenly
            RunState s3;
            omp_set_num_threads(3);
            assert_int_equal(state_init(&s3, &m.c, 16, WEIGHTS_F32), 0);
            forward(&m.c, &m.w, &s3, tokens, T, 0, one, 0);
            state_free(&s3);
            omp_set_num_threads(threads);
            assert_close(one, serial, (size_t)T * V, 1e-4);
            free(serial);
        }
        state_free(&s);
        assert_int_equal(state_init(&s, &m.c, 1, WEIGHTS_F32), 0);
        for (int t = 0; t < T; t++) forward(&m.c, &m.w, &s, tokens + t, 1, t, one + t * V, 0);
        state_free(&s);
        double *want = malloc(sizeof(double) * T * V);
        for (int i = 0; i < T * V; i++) want[i] = all[i];
        assert_close(one, want, (size_t)T * V, 1e-4);
        if (variant >= 4 && variant != 10) { // one-token steps on three threads: each head's keys split in three
            int threads = omp_get_max_threads();
            omp_set_num_threads(3);
            assert_int_equal(state_init(&s, &m.c, 1, WEIGHTS_F32), 0);
            for (int t = 0; t < T; t++) forward(&m.c, &m.w, &s, tokens + t, 1, t, one + t * V, 0);
            state_free(&s);
            omp_set_num_threads(threads);
            assert_close(one, want, (size_t)T * V, 1e-4);
        }
        assert_int_equal(state_init(&s, &m.c, 3, WEIGHTS_F32), 0);
        for (int t = 0; t < T; t += 3) {
            int n = T - t < 3 ? T - t : 3;
            forward(&m.c, &m.w, &s, tokens + t, n, t, one + t * V, 0);
        }
        assert_close(one, want, (size_t)T * V, 1e-4);
        // only the last row's logits, as a prompt asks
        float *last = malloc(sizeof(float) * V);
        forward(&m.c, &m.w, &s, tokens, 3, 0, last, 2);
        assert_close(last, want + 2 * V, V, 1e-4);
        state_free(&s);
        free(all);
        free(one);
        free(want);
        free(last);
        free(m.block);
        weights_free(&m.w);
    }
}

// The logits of positions from .. n - 1 of tokens[0 .. n), the prompt run in chunks of batch rows
// through a cache of kv_type; the caller frees them.
static float *chunked_logits(const TestModel *m, const int *tokens, int n, int from, int batch, int kv_type) {
    RunState s;
    assert_int_equal(state_init(&s, &m->c, batch, kv_type), 0);
    int V = m->c.vocab_size;
    float *logits = malloc(sizeof(float) * (size_t)(n - from) * V);
    for (int t = 0; t < n; t += batch) {
        int T = n - t < batch ? n - t : batch;
        // a chunk straddling from keeps all its rows' logits, of which the first rows are dropped
        float *out = t + T <= from ? NULL : malloc(sizeof(float) * (size_t)T * V);
        forward(&m->c, &m->w, &s, tokens + t, T, t, out, 0);
        for (int r = 0; out && r < T; r++)
            if (t + r >= from) memcpy(logits + (size_t)(t + r - from) * V, out + (size_t)r * V, sizeof(float) * V);
        free(out);
    }
    state_free(&s);
    return logits;
}

// Logits deep in a long context from prompts in chunks of 512 rows, which take the tiles
// (attention_tiled), and of 8, which take the score blocks (attention_pairs_masked): within 1e-4
// relative at positions 2,048 .. 2,099 with every layer global and with a local layer of a
// 300-position window, with float32 and float16 caches; at positions 8,000 .. 8,019 (issue 41's
// depth) with a float16 cache, and with a Q8_0 cache against the float32 cache's score blocks
// within the error test_run.sh states for --kv-cache q8_0: 1e-2 of the largest logit.
static void test_deep_logits_tiled(void **state) {
    (void)state;
    // positions, the first compared, sliding window, cache type
    int variants[][4] = {{2100, 2048, 0, WEIGHTS_F32},   {2100, 2048, 300, WEIGHTS_F32}, {2100, 2048, 0, WEIGHTS_F16},
                         {2100, 2048, 300, WEIGHTS_F16}, {8020, 8000, 0, WEIGHTS_F16},   {8020, 8000, 0, BLOCK_Q8_0}};
    // Under make test-asan the rows at 8,000 run at 2,100, the same paths: sanitized, the two
    // made this program 180 s at the portable level, 36 s without (the plain suite runs them whole).
    int sanitized = getenv("ATTN_ASAN_SUITE") != NULL;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        int N = variants[v][0], FROM = variants[v][1], window = variants[v][2], kv_type = variants[v][3];
        if (sanitized && N > 2100) N = 2100, FROM = 2048;
        Config c = knobs(0);
        c.dim = 128, c.hidden_dim = 96, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = c.rope_dims = 64;
        c.seq_len = N + 12;
        if (window) c.sliding_window = window, c.global_every = 2, c.rope_local_theta = 500.0f;
        assert_true(!attention_tiles_fit(8, c.head_dim) && attention_tiles_fit(512, c.head_dim));
        TestModel m = random_model(c);
        size_t n = (size_t)(N - FROM) * m.c.vocab_size;
        int *tokens = malloc(sizeof(int) * N);
        for (int t = 0; t < N; t++) tokens[t] = (t * 7 + t / 13) % m.c.vocab_size;
        float *tiled = chunked_logits(&m, tokens, N, FROM, 512, kv_type);
        float *blocks = chunked_logits(&m, tokens, N, FROM, 8, kv_type == BLOCK_Q8_0 ? WEIGHTS_F32 : kv_type);
        double *want = malloc(sizeof(double) * n), largest = 0, worst = 0;
        for (size_t i = 0; i < n; i++) want[i] = blocks[i];
        if (kv_type != BLOCK_Q8_0) assert_close(tiled, want, n, 1e-4);
        else {
            for (size_t i = 0; i < n; i++)
                largest = fmax(largest, fabs(want[i])), worst = fmax(worst, fabs(tiled[i] - want[i]));
            if (!(worst <= 1e-2 * largest)) fail_msg("q8_0 cache at 8,000: |d| %.3g > 1e-2 of %.3g", worst, largest);
            assert_true(worst > 0); // the rounded cache is not the float32 one
        }
        free(want);
        free(tiled);
        free(blocks);
        free(tokens);
        free(m.block);
        weights_free(&m.w);
    }
}

// The float32 model of m's dequantised (widened) weights, dequantize_weights's: its config in
// *c32 and weights in *w32; the block it returns is the caller's to free.
static float *float32_twin(const TestModel *m, Config *c32, Weights *w32) {
    *c32 = m->c;
    c32->weight_type = WEIGHTS_F32, c32->group_size = 0, c32->type_table = NULL;
    float *block32 = aligned_alloc(MODEL_ALIGN, carve_weights(c32, NULL, NULL));
    dequantize_weights(&m->c, &m->w, m->block, block32);
    weights_init(w32, c32, block32);
    return block32;
}

// Logits [T, vocab] of the tokens from a new state s (the caller frees it), one step at a time,
// or with batch all at once.
static void forward_tokens(const Config *c, const Weights *w, RunState *s, const int *tokens, int T, int batch,
                           float *logits) {
    assert_int_equal(state_init(s, c, batch ? T : 1, WEIGHTS_F32), 0);
    for (int t = 0; t < T; t += batch ? T : 1)
        forward(c, w, s, tokens + t, batch ? T : 1, t, logits + (size_t)t * c->vocab_size, 0);
}

// A model of llama.cpp block types, a type per matrix mixed as Q4_K_M files mix them and
// more (rows of 256 and 512, so that one token takes the products in their own order, which
// order a layer's input once for q, k and v, or w1 and w3, when their types agree, and again
// when not), one token at a time and as a batch, against the float32 model of its dequantised
// weights (dequantize_weights): logits within 1e-3 of the largest (the inputs rounded to 16 bits).
// The model is drawn from a seed of its own, so that tests added before this one do not change
// it: random weights amplify the inputs' rounding by the draw, and over 12 seeds the logits
// were 1e-4 to 1.3e-3 of the largest apart, one token at a time and as a batch alike.
static void test_forward_block_types(void **state) {
    (void)state;
    test_rng = 0x9E3779B97F4A7C15ULL;
    static const uint8_t table[16] = {
        12,                       // tok_embedding Q4_K
        12, 12, 14, 2,  8, 8, 12, // q, k Q4_K, v Q6_K, wo Q4_0, w1, w3 Q8_0, w2 Q4_K
        6,  20, 3,  14, 7, 7, 13, // q Q5_0, k IQ4_NL, v Q4_1, wo Q6_K, w1, w3 Q5_1, w2 Q5_K
        14};                      // classifier Q6_K
    Config c = knobs(0);
    c.dim = 256, c.hidden_dim = 512, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.rope_dims = 64;
    c.vocab_size = 80, c.tied_classifier = 0, c.weight_type = WEIGHTS_PER_MATRIX, c.type_table = table;
    TestModel m = {.c = c};
    m.block = aligned_alloc(MODEL_ALIGN, carve_weights(&c, NULL, NULL));
    for (size_t i = 0; i < carve_weights(&c, NULL, NULL) / sizeof(float); i++) m.block[i] = 1.0f + frand() * 0.1f;
    weights_init(&m.w, &m.c, m.block);
    const QMat *q[16];
    size_t n[16];
    assert_int_equal(model_matrices(&m, q, n), 16);
    for (int k = 0; k < 16; k++) {
        QMat r = random_blocks(q[k]->type, n[k] / 256, 256);
        memcpy((void *)q[k]->blocks, r.blocks, n[k] / matrix_types[r.type].block * matrix_types[r.type].block_bytes);
        free((void *)r.blocks);
    }
    Config c32;
    Weights w32;
    float *block32 = float32_twin(&m, &c32, &w32);
    int T = 11, V = c.vocab_size, tokens[11];
    for (int t = 0; t < T; t++) tokens[t] = (t * 7 + 3) % V;
    float *got = malloc(sizeof(float) * T * V), *want = malloc(sizeof(float) * T * V);
    for (int batch = 0; batch < 2; batch++) {
        RunState s, s32;
        forward_tokens(&c, &m.w, &s, tokens, T, batch, got);
        forward_tokens(&c32, &w32, &s32, tokens, T, batch, want);
        float top = 0.0f, diff = 0.0f;
        for (int i = 0; i < T * V; i++) top = fmaxf(top, fabsf(want[i])), diff = fmaxf(diff, fabsf(got[i] - want[i]));
        if (!(diff <= 1e-3f * top)) fail_msg("batch %d: logits %g apart, the largest %g", batch, diff, top);
        state_free(&s);
        state_free(&s32);
    }
    free(got);
    free(want);
    free(block32);
    weights_free(&w32);
    free(m.block);
    weights_free(&m.w);
}

// A model in bfloat16, float16 or Q8_0 against the float32 model of its widened (dequantised)
// weights (dequantize_weights): one token at a time the 16-bit models give the same logits bit
// for bit, as every product sums the same float32 values in the same order; a batch goes
// through sgemm a chunk of rows at a time, which is held to float rounding, and so is Q8_0,
// whose dot sums each group before scaling it. A batch in --compute bf16 is bit for bit. Narrow Llama, GPT-2 and post-norm untied
// models, and a wide one for forward's parallel region (run_all.sh gives two threads).
static void test_forward_equals_widened(void **state) {
    (void)state;
    for (int type = WEIGHTS_Q8_0; type <= WEIGHTS_F16; type++)
        for (int variant = 0; variant < 4; variant++) {
            Config c = knobs(variant);
            if (variant == 3) c.dim = 240, c.hidden_dim = 400, c.head_dim = 60, c.rope_dims = 60;
            c.weight_type = type, c.group_size = type == WEIGHTS_Q8_0 ? 4 : 0;
            TestModel m = random_model(c);
            Config c32;
            Weights w32;
            float *block32 = float32_twin(&m, &c32, &w32);
            int T = 11, V = c.vocab_size, tokens[11];
            for (int t = 0; t < T; t++) tokens[t] = (t * 5 + 1) % V;
            float *got = malloc(sizeof(float) * T * V), *want = malloc(sizeof(float) * T * V);
            double *wantd = malloc(sizeof(double) * T * V);
            for (int batch = 0; batch < 2; batch++) {
                RunState s, s32;
                forward_tokens(&c, &m.w, &s, tokens, T, batch, got);
                forward_tokens(&c32, &w32, &s32, tokens, T, batch, want);
                if (type != WEIGHTS_Q8_0 && !batch) assert_memory_equal(got, want, sizeof(float) * T * V);
                for (int i = 0; i < T * V; i++) wantd[i] = want[i];
                assert_close(got, wantd, (size_t)T * V, 1e-5);
                // --compute bf16: the stored matrix (used as stored, widened or dequantised,
                // then rounded) and its widened float32 copy (rounded) give the same inputs
                if (batch) {
                    assert_int_equal(state_compute_bf16(&s, &c, 1), 0);
                    assert_int_equal(state_compute_bf16(&s32, &c32, 1), 0);
                    forward(&c, &m.w, &s, tokens, T, 0, got, 0);
                    forward(&c32, &w32, &s32, tokens, T, 0, want, 0);
                    assert_memory_equal(got, want, sizeof(float) * T * V);
                }
                state_free(&s);
                state_free(&s32);
            }
            free(got);
            free(want);
            free(wantd);
            free(block32);
            weights_free(&w32);
            free(m.block);
            weights_free(&m.w);
        }
}

// ----------------------------------------------------------------------------
// sgemm_bf16 against a reference written from VDPBF16PS's definition: the inputs rounded to
// bfloat16 here by comparing the two neighbours (not by the kernel's bit trick), each sum
// taken pair by pair, the odd element's product first, as fmaf. Bit for bit, on whichever
// path this build has (the Makefile builds this file for AVX-512, AVX2 and neither).

// f rounded to the nearer of the two bfloat16 values around it, a tie to the even one; a
// denormal to a zero of its sign.
static float bf16_nearest(float f) {
    if (isnan(f) || isinf(f)) return f;
    if (fabsf(f) < FLT_MIN) return copysignf(0.0f, f);
    uint32_t u, t;
    memcpy(&u, &f, 4);
    t = u & 0xffff0000u;
    float lo, hi;
    memcpy(&lo, &t, 4);
    t += 0x10000u;
    memcpy(&hi, &t, 4);
    float dlo = fabsf(f - lo), dhi = fabsf(hi - f);
    if (dlo != dhi) return dlo < dhi ? lo : hi;
    return (u >> 16) & 1 ? hi : lo;
}

static void bf16_reference(float *C, int ldc, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0.0f;
            for (int p = 0; p < K; p += 2)
                for (int k = p + 1; k >= p; k--) {
                    if (k >= K) continue;
                    float a = bf16_nearest(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                    float b = bf16_nearest(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                    s = fmaf(a, b, s);
                }
            float *c = C + (size_t)i * ldc + j;
            *c = beta == 0.0f ? alpha * s : fmaf(alpha, s, beta * *c);
        }
}

static void test_sgemm_bf16(void **state) {
    (void)state;
    // shapes with every remainder (rows past a tile, columns past a strip, odd K, more than a
    // packing chunk of pairs or line of rows), and three
    // big enough for the threads to share (run_all.sh gives two); leading dimensions wider
    // than the rows, all four transpositions, beta 0 and not
    int shapes[][3] = {{1, 1, 1}, {3, 5, 2}, {13, 45, 37}, {8, 32, 64}, {70, 100, 64}, {9, 130, 81}, {300, 270, 150}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (int tr = 0; tr < 4; tr++) {
            int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], ta = tr & 1, tb = tr >> 1;
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
            float *A = rand_vec((size_t)(ta ? K : M) * lda, 2.0f), *B = rand_vec((size_t)(tb ? N : K) * ldb, 2.0f);
            float *C = rand_vec((size_t)M * ldc, 1.0f), *want = malloc(sizeof(float) * M * ldc);
            float alpha = sh % 2 ? 1.0f : 0.75f, beta = tr % 2 ? 0.0f : 1.5f;
            memcpy(want, C, sizeof(float) * M * ldc);
            bf16_reference(want, ldc, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta);
            sgemm_bf16(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb,
                       beta, C, ldc);
            for (int i = 0; i < M; i++)
                if (memcmp(C + (size_t)i * ldc, want + (size_t)i * ldc, sizeof(float) * N))
                    fail_msg("%s path, %dx%dx%d, trans %d%d: row %d differs from the reference", BF16_PATH, M, N, K, ta,
                             tb, i);
            free(A);
            free(B);
            free(C);
            free(want);
        }
}

// The cases in which VDPBF16PS's definition, not the reference's fmaf, decides (each checked
// on this machine's Zen 4): 1 × 1 products of K = 4 with these rows of A and B = 1.
static void test_sgemm_bf16_edges(void **state) {
    (void)state;
    const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    struct {
        float a[4], b[4], want;
        const char *what;
    } cases[] = {
        // k = 3's product before k = 2's: 2^30 - 2^30 + 1, where k = 2 first would lose the 1
        {{0x1p30f, 0.0f, 1.0f, -0x1p30f}, {1, 1, 1, 1}, 1.0f, "the odd element of a pair first"},
        // 2^-126 + 2^-149 - 3 · 2^-150 = 2^-126 - 2^-150: tiny before rounding to 2^-126
        {{0x1p-74f, 0x1p-63f, 0.0f, -0x1.8p-74f}, {0x1p-75f, 0x1p-63f, 0.0f, 0x1p-75f}, 0.0f, "a tiny sum flushed"},
        // a float32 denormal input is a zero: 1e-39 · 2^100 would be 1.3e-9
        {{1e-39f, 0.0f, 0.0f, 0.0f}, {0x1p100f, 0.0f, 0.0f, 0.0f}, 0.0f, "a denormal input"},
        // ties to the even neighbour: 1 + 2^-8 to 1, 1 + 3 · 2^-8 up to 1 + 2^-6
        {{1.00390625f, 1.01171875f, 0.0f, 0.0f}, {1, 1, 0, 0}, 1.0f + 1.015625f, "ties to even"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float c = -7.0f;
        sgemm_bf16(CblasNoTrans, CblasTrans, 1, 1, 4, 1.0f, cases[i].a, 4, cases[i].b, 4, 0.0f, &c, 1);
        if (memcmp(&c, &cases[i].want, sizeof c))
            fail_msg("%s path, %s: got %a, want %a", BF16_PATH, cases[i].what, c, cases[i].want);
    }
    float nan_row[4] = {NAN, 1.0f, 2.0f, 3.0f}, c = 0.0f;
    sgemm_bf16(CblasNoTrans, CblasTrans, 1, 1, 4, 1.0f, nan_row, 4, one, 4, 0.0f, &c, 1);
    assert_true(isnan(c));
}

// --compute bf16 against float32 on the same models: a prompt's logits within 2e-2 of the
// largest logit (bfloat16 keeps 8 bits of each input; the bound on the 110M Llama),
// yet not equal to float32's (the products did go through bfloat16), or equal to them in a
// build without VDPBF16PS, which keeps float32's products (BF16_FAST); the same bits on one
// thread and on two (each output's sum is one tile's, whoever computes it); and a one-token
// step untouched by the flag.
static void test_forward_bf16(void **state) {
    (void)state;
    for (int variant = 0; variant < 5; variant++) {
        Config c = knobs(variant % 4);
        if (variant == 4) c.dim = 240, c.hidden_dim = 400, c.head_dim = 60, c.rope_dims = 60;
        TestModel m = random_model(c);
        int T = 13, V = c.vocab_size, tokens[13];
        for (int t = 0; t < T; t++) tokens[t] = (t * 3 + 2) % V;
        float *f32 = malloc(sizeof(float) * T * V), *bf16 = malloc(sizeof(float) * T * V);
        float *other = malloc(sizeof(float) * T * V);
        RunState s;
        assert_int_equal(state_init(&s, &m.c, T, WEIGHTS_F32), 0);
        forward(&m.c, &m.w, &s, tokens, T, 0, f32, 0);
        assert_int_equal(state_compute_bf16(&s, &m.c, 1), 0);
        forward(&m.c, &m.w, &s, tokens, T, 0, bf16, 0);
        float largest = 0.0f, worst = 0.0f;
        for (int i = 0; i < T * V; i++) {
            largest = fmaxf(largest, fabsf(f32[i]));
            worst = fmaxf(worst, fabsf(bf16[i] - f32[i]));
        }
        // without VDPBF16PS the flag keeps float32's products, bit for bit (BF16_NO_SPEED)
        if (!BF16_FAST && worst != 0.0f)
            fail_msg("variant %d: a build without AVX512_BF16 gave bf16 logits %g from float32's", variant, worst);
        if (BF16_FAST && (!(worst <= 2e-2f * largest) || worst == 0.0f))
            fail_msg("variant %d: |bf16 - f32| up to %g against a largest logit of %g", variant, worst, largest);
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        RunState one;
        assert_int_equal(state_init(&one, &m.c, T, WEIGHTS_F32), 0);
        assert_int_equal(state_compute_bf16(&one, &m.c, 1), 0);
        forward(&m.c, &m.w, &one, tokens, T, 0, other, 0);
        omp_set_num_threads(threads);
        // the same bits on one thread and two: the bfloat16 kernel's promise, not OpenBLAS sgemm's
        if (BF16_FAST) assert_memory_equal(other, bf16, sizeof(float) * T * V);
        state_free(&one);
        // one token at a time, the flag on and off
        for (int on = 0; on < 2; on++) {
            assert_int_equal(state_compute_bf16(&s, &m.c, on), 0);
            for (int t = 0; t < T; t++) forward(&m.c, &m.w, &s, tokens + t, 1, t, (on ? other : bf16) + t * V, 0);
        }
        assert_memory_equal(other, bf16, sizeof(float) * T * V);
        state_free(&s);
        free(f32);
        free(bf16);
        free(other);
        free(m.block);
        weights_free(&m.w);
    }
}

// A few tokens' float32 product (the verification pass of speculative decoding) reads each
// row once for all of them: each token's outputs bit for bit its one-token step's, and close
// to the naive sums. Last in the list, so that the other tests' random inputs stay as they were.
static void test_matmul_few_tokens(void **state) {
    (void)state;
    int sizes[][3] = {{2, 768, 9}, {3, 37, 5}, {5, 100, 7}, {8, 1 << 12, 3}};
    check_matmul(sizes, sizeof sizes / sizeof sizes[0], 1);
}

int main(void) {
#if defined(__AVXVNNI__) && !defined(__AVX512F__)
    // the AVX-VNNI level's build is a compile check on a CPU without it, and its test elsewhere
    if (!__builtin_cpu_supports("avxvnni")) {
        printf("test_kernels: built for AVX-VNNI, which this CPU has not: compiled, not run\n");
        return 0;
    }
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_q8),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_tiled),
        cmocka_unit_test(test_attention_backward_tiled),
        cmocka_unit_test(test_kv_q8_0),
        cmocka_unit_test(test_attention_token),
        cmocka_unit_test(test_float_to_f16),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_batched_equals_one_token),
        cmocka_unit_test(test_deep_logits_tiled),
        cmocka_unit_test(test_widen),
        cmocka_unit_test(test_matmul_half),
        cmocka_unit_test(test_quantize_input),
        cmocka_unit_test(test_matmul_blocks),
        cmocka_unit_test(test_forward_equals_widened),
        cmocka_unit_test(test_forward_block_types),
        // model/bf16_gemm.h, and the forward pass with --compute bf16
        cmocka_unit_test(test_sgemm_bf16),
        cmocka_unit_test(test_sgemm_bf16_edges),
        cmocka_unit_test(test_forward_bf16),
        cmocka_unit_test(test_matmul_few_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
