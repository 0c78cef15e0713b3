// The forward pass of format 3's knobs against naive double-precision versions written here
// from Hugging Face's definitions: RoPE scaling (linear, llama3) and the local layers' base,
// per-head q/k RMSNorm, (1 + w) norms, output norms, GeGLU, the attention scale, and
// sliding-window attention over a local layer's ring cache; then a whole forward() of small
// random models with the knobs on against a plain forward over the whole sequence.
#include "model.h"
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "test_util.h"

// A small Gemma-3-like config with every knob on; the tests change what they need.
static Config knob_config(void) {
    // packed by hand: a field per line would fill the screen
    // clang-format off
    Config c = {
        .dim = 32, .hidden_dim = 48, .n_layers = 4, .n_heads = 3, .n_kv_heads = 1, .head_dim = 12,
        .vocab_size = 41, .seq_len = 40, .pos_kind = POS_ROPE, .ffn_kind = FFN_GEGLU_TANH, .norm_kind = NORM_RMS,
        .final_norm = 1, .tied_classifier = 1, .rope_dims = 12, .bos_id = -1, .eos_id = -1,
        .rope_theta = 10000.0f, .norm_eps = 1e-6f, .embed_scale = sqrtf(32.0f),
        .rope_scaling = ROPE_SCALING_LLAMA3, .rope_factor = 8.0f, .rope_low_freq_factor = 1.0f,
        .rope_high_freq_factor = 4.0f, .rope_original_ctx = 64,
        .arch_flags = ARCH_QK_NORM | ARCH_NORM_PLUS_ONE | ARCH_OUT_NORMS, .attn_scale = 0.3f,
        .sliding_window = 5, .global_every = 3, .rope_local_theta = 500.0f,
    };
    // clang-format on
    return c;
}

// ----------------------------------------------------------------------------
// RoPE tables

// RoPE's inverse frequencies as Hugging Face's modeling_rope_utils.py computes them
// (_compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters), in double; a local layer's are the default ones of its base.
static void hf_inv_freq(const Config *c, int local, double *inv) {
    int dim = c->rope_dims;
    double base = local ? c->rope_local_theta : c->rope_theta;
    for (int i = 0; i < dim / 2; i++) inv[i] = 1.0 / pow(base, (double)(2 * i) / dim);
    if (local || c->rope_scaling == ROPE_SCALING_NONE) return;
    double factor = c->rope_factor;
    for (int i = 0; i < dim / 2; i++) {
        if (c->rope_scaling == ROPE_SCALING_LINEAR) {
            inv[i] /= factor;
            continue;
        }
        double old_ctx = c->rope_original_ctx, low = c->rope_low_freq_factor, high = c->rope_high_freq_factor;
        double low_freq_wavelen = old_ctx / low, high_freq_wavelen = old_ctx / high;
        double wavelen = 2 * 3.141592653589793 / inv[i];
        double inv_llama = wavelen > low_freq_wavelen ? inv[i] / factor : inv[i];
        double smooth = (old_ctx / wavelen - low) / (high - low);
        double smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama;
        int medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        inv[i] = medium ? smoothed : inv_llama;
    }
}

// How many of a config's pairs fall in each of llama3's regimes: kept, interpolated, divided.
static void llama3_regimes(const Config *c, int count[3]) {
    count[0] = count[1] = count[2] = 0;
    for (int i = 0; i < c->rope_dims / 2; i++) {
        double wavelen = 2 * 3.141592653589793 * pow(c->rope_theta, (double)(2 * i) / c->rope_dims);
        count[wavelen < c->rope_original_ctx / c->rope_high_freq_factor  ? 0
              : wavelen > c->rope_original_ctx / c->rope_low_freq_factor ? 2
                                                                         : 1]++;
    }
}

// The tables state_init makes, global and local, against cos and sin of p · inv[i].
static void check_tables(const Config *c) {
    RunState s;
    assert_int_equal(state_init(&s, c, 2, WEIGHTS_F32), 0);
    int half = c->rope_dims / 2;
    double inv[ROPE_MAX_PAIRS];
    for (int local = 0; local <= (c->sliding_window > 0); local++) {
        hf_inv_freq(c, local, inv);
        const float *ct = local ? s.rope_local_cos : s.rope_cos, *st = local ? s.rope_local_sin : s.rope_sin;
        for (int p = 0; p < c->seq_len; p++)
            for (int i = 0; i < half; i++) {
                double a = p * inv[i];
                if (fabs(ct[p * half + i] - cos(a)) > 2e-7 || fabs(st[p * half + i] - sin(a)) > 2e-7)
                    fail_msg("%s table, position %d, pair %d: got (%.9g, %.9g), want (%.9g, %.9g)",
                             local ? "local" : "global", p, i, ct[p * half + i], st[p * half + i], cos(a), sin(a));
            }
    }
    state_free(&s);
}

static void test_rope_tables(void **state) {
    (void)state;
    // Llama 3.2's: theta 500000, 64 dims, factor 32, low 1, high 4, original 8192, at positions
    // to 9000 (past the original context)
    Config c = knob_config();
    c.sliding_window = c.global_every = 0, c.arch_flags = 0, c.n_layers = 1;
    c.head_dim = c.rope_dims = 64, c.rope_theta = 500000.0f, c.rope_factor = 32.0f, c.rope_original_ctx = 8192;
    c.seq_len = 9000;
    int regimes[3];
    llama3_regimes(&c, regimes);
    assert_true(regimes[0] > 0 && regimes[1] > 0 && regimes[2] > 0); // each branch of the formula
    check_tables(&c);
    // the small model's: 6 pairs over all three regimes, and the local layers' base unscaled
    c = knob_config();
    llama3_regimes(&c, regimes);
    assert_true(regimes[0] > 0 && regimes[1] > 0 && regimes[2] > 0);
    check_tables(&c);
    // linear (Gemma 3 4B's factor 8 on its global layers), partial RoPE
    c.rope_scaling = ROPE_SCALING_LINEAR, c.rope_theta = 1e6f, c.rope_dims = 8, c.seq_len = 3000;
    check_tables(&c);
    // no scaling: what ./train's rope_table makes, exactly
    c.rope_scaling = ROPE_SCALING_NONE, c.sliding_window = c.global_every = 0;
    check_tables(&c);
    RunState s;
    assert_int_equal(state_init(&s, &c, 1, WEIGHTS_F32), 0);
    float *ct = malloc(sizeof(float) * c.seq_len * 4), *st = malloc(sizeof(float) * c.seq_len * 4);
    rope_table(ct, st, c.seq_len, c.rope_dims, c.rope_theta);
    assert_memory_equal(ct, s.rope_cos, sizeof(float) * c.seq_len * 4);
    assert_memory_equal(st, s.rope_sin, sizeof(float) * c.seq_len * 4);
    assert_null(s.rope_local_cos);
    state_free(&s);
    free(ct);
    free(st);
}

// ----------------------------------------------------------------------------
// Norms and GeGLU

// x / sqrt(mean(x²) + eps) * (w + one) over n values, in double.
static void naive_rms(double *out, const double *x, const float *w, double one, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * (w[i] + one);
}

// Per-head q/k norms of heads [h0, h1) of each row, the others untouched, with and without (1 + w).
static void test_head_norm(void **state) {
    (void)state;
    Config c = knob_config();
    int T = 5, H = 7, hd = c.head_dim = 20, stride = H * hd;
    float *x = rand_vec((size_t)T * stride, 4.0f), *w = rand_vec(hd, 1.0f), *got = malloc(sizeof(float) * T * stride);
    double *want = malloc(sizeof(double) * T * stride), head[64];
    for (int plus_one = 0; plus_one < 2; plus_one++)
        for (int h0 = 0; h0 < H; h0 += 3) {
            int h1 = h0 + 3 < H ? h0 + 3 : H;
            c.arch_flags = plus_one ? ARCH_QK_NORM | ARCH_NORM_PLUS_ONE : ARCH_QK_NORM;
            memcpy(got, x, sizeof(float) * T * stride);
            head_norm_forward(&c, got + h0 * hd, stride, T, h1 - h0, w);
            for (int i = 0; i < T * stride; i++) want[i] = x[i];
            for (int t = 0; t < T; t++)
                for (int h = h0; h < h1; h++) {
                    for (int i = 0; i < hd; i++) head[i] = x[t * stride + h * hd + i];
                    naive_rms(want + t * stride + h * hd, head, w, plus_one, hd, c.norm_eps);
                }
            assert_close(got, want, (size_t)T * stride, 1e-6);
        }
    free(x);
    free(w);
    free(got);
    free(want);
}

// norm_forward with (1 + w), and without it exactly the weights as they are.
static void test_norm_plus_one(void **state) {
    (void)state;
    Config c = knob_config();
    int T = 4, d = c.dim = 67;
    float *x = rand_vec((size_t)T * d, 3.0f), *w = rand_vec(d, 1.0f), *got = malloc(sizeof(float) * T * d);
    double *want = malloc(sizeof(double) * T * d), *row = malloc(sizeof(double) * d);
    for (int plus_one = 0; plus_one < 2; plus_one++) {
        c.arch_flags = plus_one ? ARCH_NORM_PLUS_ONE : 0;
        norm_forward(&c, got, x, w, NULL, T);
        for (int t = 0; t < T; t++) {
            for (int i = 0; i < d; i++) row[i] = x[t * d + i];
            naive_rms(want + t * d, row, w, plus_one, d, c.norm_eps);
        }
        assert_close(got, want, (size_t)T * d, 1e-6);
    }
    free(x);
    free(w);
    free(got);
    free(want);
    free(row);
}

// add_sublayer with an output norm: x + Norm(W in + b), and then post-norm's Norm of that,
// on one thread and on three that meet at the barrier.
static void test_out_norms(void **state) {
    (void)state;
    Config c = knob_config();
    int T = 7, d = c.dim, n_in = 45;
    float *in = rand_vec((size_t)T * n_in, 1.0f), *W = rand_vec((size_t)d * n_in, 0.5f), *b = rand_vec(d, 1.0f);
    float *out_w = rand_vec(d, 1.0f), *norm_w = rand_vec(d, 1.0f), *x0 = rand_vec((size_t)T * d, 2.0f);
    double *want = malloc(sizeof(double) * T * d), *y = malloc(sizeof(double) * d), *r = malloc(sizeof(double) * d);
    for (int post_norm = 0; post_norm < 2; post_norm++)
        for (int threads = 1; threads <= 3; threads += 2) {
            c.post_norm = post_norm;
            for (int t = 0; t < T; t++) {
                for (int o = 0; o < d; o++) {
                    y[o] = b[o];
                    for (int i = 0; i < n_in; i++) y[o] += (double)W[o * n_in + i] * in[t * n_in + i];
                }
                naive_rms(y, y, out_w, 1, d, c.norm_eps);
                for (int o = 0; o < d; o++) r[o] = x0[t * d + o] + y[o];
                if (post_norm) naive_rms(r, r, norm_w, 1, d, c.norm_eps);
                memcpy(want + t * d, r, sizeof(double) * d);
            }
            RunState s;
            assert_int_equal(state_init(&s, &c, T, WEIGHTS_F32), 0);
            memcpy(s.x, x0, sizeof(float) * T * d);
#pragma omp parallel num_threads(threads)
            {
                int id = thread_num(), nt = team_size();
                size_t r0, r1;
                share((size_t)T, id, nt, &r0, &r1);
                add_sublayer(&c, &s, in, W, (QMat){0}, b, out_w, norm_w, NULL, T, n_in, id, nt, r0, r1);
            }
            assert_close(s.x, want, (size_t)T * d, 1e-5);
            state_free(&s);
        }
    free(in);
    free(W);
    free(b);
    free(out_w);
    free(norm_w);
    free(x0);
    free(want);
    free(y);
    free(r);
}

// GeGLU, gelu_tanh(h) * g, over the range where tanh saturates and beyond, in place and not.
static void test_geglu(void **state) {
    (void)state;
    int n = 1001;
    float *h = malloc(sizeof(float) * n), *g = rand_vec(n, 2.0f), *out = malloc(sizeof(float) * n);
    double *want = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        h[i] = -12.0f + 24.0f * i / (n - 1);
        double a = h[i];
        want[i] = 0.5 * a * (1 + tanh(sqrt(2 / 3.141592653589793) * (a + 0.044715 * a * a * a))) * g[i];
    }
    activation_forward(FFN_GEGLU_TANH, out, h, g, n);
    assert_close(out, want, n, 2e-6);
    activation_forward(FFN_GEGLU_TANH, h, h, g, n);
    assert_memory_equal(h, out, sizeof(float) * n);
    free(h);
    free(g);
    free(out);
    free(want);
}

// ----------------------------------------------------------------------------
// Sliding-window attention over the ring

// Attention at every position t of a sequence over keys [t - window + 1, t] (window 0: [0, t]),
// in double, with GQA and the given scale; its probabilities in probs [H, N, N], 0 where masked.
static void naive_attention(double *out, double *probs, const float *q, const float *k, const float *v, int N, int H,
                            int KV, int hd, double scale, int window) {
    int qd = H * hd, kvd = KV * hd;
    double *s = malloc(sizeof(double) * N);
    for (int t = 0; t < N; t++)
        for (int h = 0; h < H; h++) {
            int kh = h / (H / KV), j0 = window && t - window + 1 > 0 ? t - window + 1 : 0;
            double max = -INFINITY, sum = 0;
            for (int j = j0; j <= t; j++) {
                s[j] = 0;
                for (int i = 0; i < hd; i++) s[j] += (double)q[t * qd + h * hd + i] * k[j * kvd + kh * hd + i];
                s[j] *= scale;
                max = fmax(max, s[j]);
            }
            for (int j = j0; j <= t; j++) sum += exp(s[j] - max);
            for (int j = 0; j < N; j++)
                probs[((size_t)h * N + t) * N + j] = j >= j0 && j <= t ? exp(s[j] - max) / sum : 0;
            for (int i = 0; i < hd; i++) out[t * qd + h * hd + i] = 0;
            for (int j = j0; j <= t; j++)
                for (int i = 0; i < hd; i++)
                    out[t * qd + h * hd + i] += exp(s[j] - max) / sum * v[j * kvd + kh * hd + i];
        }
    free(s);
}

// The KV cache's element types (./run --kv-cache f32, f16 and q8_0).
static const int kv_types[] = {WEIGHTS_F32, WEIGHTS_F16, BLOCK_Q8_0};
#define KV_TYPES 3

// A local layer (0) and a global one (1) fed a sequence's keys and values as forward feeds
// them: each chunk's rows written at their ring rows and mirrored, then attended to from the
// first position the chunk's rows see. Chunks take sizes from splits in turn (cut to max_batch).
// The probabilities of heads 1 .. H - 1 are kept as ./run -m attention keeps them (layer_keep):
// each row where its position says, exactly 0 where masked, whatever chunk and ring row it came from.
// A cache of float16 or Q8_0 (kv_type) holds the keys and values rounded or quantised, and the
// attention must be the naive one of the values it holds.
static void check_ring(int N, int seq_len, int window, int max_batch, const int *splits, int n_splits, int H, int KV,
                       int hd, int want_ring, int kv_type) {
    Config c = knob_config();
    c.n_layers = 2, c.global_every = 2, c.sliding_window = window, c.seq_len = seq_len;
    c.n_heads = H, c.n_kv_heads = KV, c.head_dim = c.rope_dims = hd;
    int qd = H * hd, kvd = KV * hd;
    RunState s;
    assert_int_equal(state_init(&s, &c, max_batch, kv_type), 0);
    if (want_ring) assert_true(s.ring > 0 && N > 2 * s.ring); // the ring goes round more than once
    else assert_int_equal(s.ring, 0);
    float *q = rand_vec((size_t)N * qd, 1.0f), *k = rand_vec((size_t)N * kvd, 1.0f),
          *v = rand_vec((size_t)N * kvd, 1.0f);
    if (kv_type == WEIGHTS_F16)
        for (size_t i = 0; i < (size_t)N * kvd; i++)
            k[i] = f16_to_float(float_to_f16(k[i])), v[i] = f16_to_float(float_to_f16(v[i]));
    uint8_t *blocks = malloc(kv_span(BLOCK_Q8_0, (size_t)N * kvd));
    for (int i = 0; i < 2 && kv_type == BLOCK_Q8_0; i++) {
        float *x = i ? v : k;
        quantize_q8_0_blocks(blocks, x, (size_t)N * kvd);
        dequantize_blocks(BLOCK_Q8_0, blocks, (size_t)N * kvd / 32, x);
    }
    free(blocks);
    float *out = malloc(sizeof(float) * N * qd), *kept = calloc((size_t)2 * (H - 1) * N * N, sizeof(float));
    double *want = malloc(sizeof(double) * N * qd), *probs = malloc(sizeof(double) * H * N * N);
    AttentionKeep keep = {.p = kept, .layer0 = 0, .layers = 2, .head0 = 1, .heads = H - 1, .positions = N};
    for (int l = 0; l < 2; l++) {
        int local = layer_is_local(&c, l);
        assert_int_equal(local, l == 0);
        LayerCache lc = layer_cache(&c, &s, l);
        assert_int_equal(lc.mirrored, local && want_ring);
        for (int pos0 = 0, n = 0, T; pos0 < N; pos0 += T, n++) {
            T = splits[n % n_splits] < max_batch ? splits[n % n_splits] : max_batch;
            T = T < N - pos0 ? T : N - pos0;
            int row = pos0 % lc.rows;
            // the new rows where forward computes them, then kept in two threads' shares of the
            // columns, as forward's threads keep them
            float *knew, *vnew;
            new_kv_rows(&s, &lc, row, kvd, &knew, &vnew);
            memcpy(knew, k + (size_t)pos0 * kvd, sizeof(float) * T * kvd);
            memcpy(vnew, v + (size_t)pos0 * kvd, sizeof(float) * T * kvd);
            keep_new_kv(&s, &lc, row, knew, vnew, T, kvd, 0, hd);
            keep_new_kv(&s, &lc, row, knew, vnew, T, kvd, hd, kvd);
            int first = local && pos0 - window + 1 > 0 ? pos0 - window + 1 : 0;
            size_t from = kv_span(kv_type, (size_t)(first % lc.rows) * kvd);
            AttentionKeep part;
            attention_pairs_masked(out + (size_t)pos0 * qd, s.att, q + (size_t)pos0 * qd, (char *)lc.k + from,
                                   (char *)lc.v + from, kv_type, T, pos0 - first, H, KV, hd, c.attn_scale,
                                   local ? window : 0, layer_keep(&keep, l, pos0, first, &part), 0, H);
        }
        naive_attention(want, probs, q, k, v, N, H, KV, hd, c.attn_scale, local ? window : 0);
        assert_close(out, want, (size_t)N * qd, 1e-5);
        const float *layer = kept + (size_t)l * (H - 1) * N * N;
        assert_close(layer, probs + (size_t)N * N, (size_t)(H - 1) * N * N, 1e-5);
        for (size_t i = 0; i < (size_t)(H - 1) * N * N; i++)
            if (probs[N * N + i] == 0) assert_true(layer[i] == 0.0f);
    }
    state_free(&s);
    free(q);
    free(k);
    free(v);
    free(out);
    free(want);
    free(kept);
    free(probs);
}

// Prompts in chunks, one token at a time, and both mixed; short head dimensions (dot products)
// and long ones, not multiples of 16; a band taller than BAND_ROWS; a window wider than the
// context's share (no ring, the band alone).
static void test_ring_attention(void **state) {
    (void)state;
    int prompt[] = {5}, decode[] = {1}, mixed[] = {3, 1, 1, 5, 2, 1, 4}, tall[] = {70, 1, 1, 33, 70, 2};
    for (int i = 0; i < 2; i++) {
        int kv = kv_types[i];
        check_ring(60, 64, 7, 5, prompt, 1, 4, 2, 20, 1, kv);
        check_ring(60, 64, 7, 1, decode, 1, 4, 2, 20, 1, kv);
        check_ring(61, 64, 7, 5, mixed, 7, 2, 2, 36, 1, kv);
        check_ring(60, 64, 1, 4, mixed, 7, 3, 1, 8, 1, kv); // a window of one: each row sees itself alone
        check_ring(300, 300, 40, 70, tall, 6, 4, 2, 24, 1, kv);
        check_ring(300, 300, 40, 70, tall, 6, 2, 1, 72, 1, kv);
        check_ring(20, 20, 7, 5, mixed, 7, 4, 2, 20, 0, kv);
        check_ring(30, 30, 50, 8, mixed, 7, 4, 2, 16, 0, kv); // a window longer than the context
    }
    // Q8_0's blocks of 32 lie within a head
    check_ring(60, 64, 7, 5, mixed, 7, 4, 2, 32, 1, BLOCK_Q8_0);
    check_ring(300, 300, 40, 70, tall, 6, 2, 1, 64, 1, BLOCK_Q8_0);
    check_ring(30, 30, 50, 8, mixed, 7, 4, 2, 32, 0, BLOCK_Q8_0);
}

// A local layer's cache is its ring, twice over: the whole cache is the global layers' context
// and the local layers' rings, and the last layer's ends where the keys end; in float32, float16
// and Q8_0 (34 bytes for 32 values), whose size the state reports (cache_bytes).
static void test_cache_carve(void **state) {
    (void)state;
    Config c = knob_config(); // layers 0, 1 and 3 local, 2 global
    c.n_kv_heads = 2, c.seq_len = 100, c.head_dim = c.rope_dims = 32;
    size_t kvd = (size_t)c.n_kv_heads * c.head_dim;
    for (int max_batch = 1; max_batch <= 64; max_batch *= 4)
        for (int i = 0; i < KV_TYPES; i++) {
            RunState s;
            int type = kv_types[i];
            assert_int_equal(state_init(&s, &c, max_batch, type), 0);
            int ring = c.sliding_window - 1 + max_batch, rows = 2 * ring < c.seq_len ? 2 * ring : c.seq_len;
            assert_int_equal(s.ring, 2 * ring < c.seq_len ? ring : 0);
            size_t values = kvd * ((size_t)c.seq_len + 3 * (size_t)rows);
            size_t want = type == BLOCK_Q8_0 ? values / 32 * 34 : values * (type == WEIGHTS_F32 ? 4 : 2); // bytes
            const char *keys = s.key_cache;
            assert_true((size_t)((const char *)s.value_cache - keys) ==
                        state_align((want + sizeof(float) - 1) / sizeof(float)) * sizeof(float));
            assert_true(s.cache_bytes == 2 * want);
            LayerCache last = layer_cache(&c, &s, 3);
            assert_true((const char *)last.k + kv_span(type, (size_t)rows * kvd) == keys + want);
            assert_true((const char *)layer_cache(&c, &s, 2).k == keys + 2 * kv_span(type, (size_t)rows * kvd));
            state_free(&s);
        }
}

// Every buffer of the state starts on a 64-byte line, as the kernels' vector loads assume for
// speed: calloc's large blocks start 16 bytes into a page, which once put them all across two.
static void test_state_aligned(void **state) {
    (void)state;
    Config c = knob_config();
    c.weight_type = WEIGHTS_PER_MATRIX; // the one-token products' ordered inputs (xq) too
    c.seq_len = 1 << 18;                // a block beyond malloc's largest threshold (32 MiB), which it maps on its own
    c.head_dim = c.rope_dims = 32;      // Q8_0's blocks within a head
    for (int i = 0; i < KV_TYPES; i++) {
        RunState s;
        assert_int_equal(state_init(&s, &c, 3, kv_types[i]), 0);
        const void *bufs[] = {s.x, s.xn, s.q, s.attn_out, s.xb, s.hb, s.hb2, s.att, s.key_cache, s.value_cache};
        for (size_t b = 0; b < sizeof bufs / sizeof *bufs; b++)
            if ((uintptr_t)bufs[b] % 64)
                fail_msg("buffer %zu of the state is %zu bytes past a line", b, (size_t)((uintptr_t)bufs[b] % 64));
        for (int id = 0; id < s.threads; id++) assert_int_equal((uintptr_t)thread_xq(&s, id) % 64, 0);
        assert_non_null(thread_xq(&s, 0));
        if (kv_types[i] != WEIGHTS_F32) assert_int_equal((uintptr_t)s.kv_new % 64, 0);
        state_free(&s);
    }
}

// Whether every page that holds a byte of [p, p + bytes) is in memory (all = 1), or none that
// lies wholly inside it is (all = 0).
static int pages_resident(const void *p, size_t bytes, int all) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p, b = a + bytes;
    a = all ? a & ~(uintptr_t)(page - 1) : (a + page - 1) & ~(uintptr_t)(page - 1);
    b = all ? (b + page - 1) & ~(uintptr_t)(page - 1) : b & ~(uintptr_t)(page - 1);
    if (b <= a) return 1;
    unsigned char vec[4096];
    size_t n = (b - a) / page;
    assert_true(n <= sizeof vec);
    assert_int_equal(mincore((void *)a, b - a, vec), 0);
    for (size_t i = 0; i < n; i++)
        if ((vec[i] & 1) != all) return 0;
    return 1;
}

// kv_cache_ready brings a global layer's rows up to the pass's end and KV_READY_AHEAD beyond into
// memory, and no further; a local layer's ring whole, the first time; in each cache type.
static void test_kv_cache_ready(void **state) {
    (void)state;
#ifdef MADV_POPULATE_WRITE
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int supported = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0; // Linux 5.14 and later
    munmap(probe, 4096);
    if (!supported) skip();
    Config c = knob_config(); // layers 0, 1 and 3 local, 2 global
    c.n_kv_heads = 2, c.head_dim = c.rope_dims = 32, c.seq_len = 4096;
    size_t kvd = (size_t)c.n_kv_heads * c.head_dim;
    for (int i = 0; i < KV_TYPES; i++) {
        RunState s;
        int type = kv_types[i];
        assert_int_equal(state_init(&s, &c, 8, type), 0);
        assert_true(s.ring > 0);
        LayerCache global = layer_cache(&c, &s, 2), local = layer_cache(&c, &s, 0);
        for (int half = 0; half < 2; half++)
            assert_true(pages_resident(half ? global.v : global.k, kv_span(type, c.seq_len * kvd), 0));
        int ends[] = {100, 101, 1000};
        for (int e = 0; e < 3; e++) {
            kv_cache_ready(&c, &s, ends[e]);
            size_t ready = kv_span(type, (ends[e] == 101 ? 100 + KV_READY_AHEAD : ends[e] + KV_READY_AHEAD) * kvd);
            assert_int_equal(s.kv_ready, (ends[e] == 101 ? 100 : ends[e]) + KV_READY_AHEAD);
            for (int half = 0; half < 2; half++) {
                const char *g = half ? global.v : global.k, *r = half ? local.v : local.k;
                assert_true(pages_resident(g, ready, 1));
                assert_true(pages_resident(g + ready, kv_span(type, c.seq_len * kvd) - ready, 0));
                assert_true(pages_resident(r, kv_span(type, 2 * (size_t)local.rows * kvd), 1));
            }
        }
        state_free(&s);
    }
#else
    skip();
#endif
}

// ----------------------------------------------------------------------------
// The whole forward pass

typedef struct {
    Config c;
    float *block;
    Weights w;
} TestModel;

static TestModel random_model(Config c) {
    TestModel m = {.c = c};
    size_t bytes = carve_weights(&c, NULL, NULL);
    m.block = aligned_alloc(MODEL_ALIGN, bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++) m.block[i] = frand() * 0.3f;
    weights_init(&m.w, &m.c, m.block);
    return m;
}

// out[t] = W x[t] (+ b) for n rows, W [n_out, n_in].
static void naive_linear(double *out, const double *x, const float *W, const float *b, int n, int n_in, int n_out) {
    for (int t = 0; t < n; t++)
        for (int o = 0; o < n_out; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < n_in; i++) s += (double)W[(size_t)o * n_in + i] * x[(size_t)t * n_in + i];
            out[(size_t)t * n_out + o] = s;
        }
}

// RMSNorm of each of n rows of width C (weights as (1 + w) with NORM_PLUS_ONE), in place.
static void naive_rms_rows(const Config *c, double *x, const float *w, int n, int C) {
    for (int t = 0; t < n; t++)
        naive_rms(x + (size_t)t * C, x + (size_t)t * C, w, (c->arch_flags & ARCH_NORM_PLUS_ONE) != 0, C, c->norm_eps);
}

// A pre-norm RMSNorm RoPE model over the whole sequence at once, in double, as Hugging Face's
// Llama, Qwen3 and Gemma 3 define it (RoPE on interleaved pairs, as the converter lays it out).
static void naive_forward(const TestModel *m, const int *tokens, int N, double *logits) {
    const Config *c = &m->c;
    const Weights *w = &m->w;
    int d = c->dim, H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, qd = H * hd, kvd = KV * hd;
    int hid = c->hidden_dim, V = c->vocab_size;
    double *x = malloc(sizeof(double) * N * d), *xn = malloc(sizeof(double) * N * d);
    double *q = malloc(sizeof(double) * N * qd), *k = malloc(sizeof(double) * N * kvd);
    double *v = malloc(sizeof(double) * N * kvd), *att = malloc(sizeof(double) * N * qd);
    double *y = malloc(sizeof(double) * N * d), *h1 = malloc(sizeof(double) * N * hid);
    double *h3 = malloc(sizeof(double) * N * hid), *s = malloc(sizeof(double) * N), inv[ROPE_MAX_PAIRS];
    for (int t = 0; t < N; t++)
        for (int i = 0; i < d; i++) x[t * d + i] = c->embed_scale * w->tok_embedding[(size_t)tokens[t] * d + i];
    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *L = &w->layers[l];
        int local = c->sliding_window && (l + 1) % c->global_every != 0;
        memcpy(xn, x, sizeof(double) * N * d);
        naive_rms_rows(c, xn, L->attn_norm_w, N, d);
        naive_linear(q, xn, L->wq, L->bq, N, d, qd);
        naive_linear(k, xn, L->wk, L->bk, N, d, kvd);
        naive_linear(v, xn, L->wv, L->bv, N, d, kvd);
        if (c->arch_flags & ARCH_QK_NORM) {
            naive_rms_rows(c, q, L->q_norm_w, N * H, hd);
            naive_rms_rows(c, k, L->k_norm_w, N * KV, hd);
        }
        hf_inv_freq(c, local, inv);
        for (int t = 0; t < N; t++)
            for (int i = 0; i < c->rope_dims / 2; i++) {
                double cs = cos(t * inv[i]), sn = sin(t * inv[i]);
                for (int h = 0; h < H + KV; h++) {
                    double *p = h < H ? q + t * qd + h * hd : k + t * kvd + (h - H) * hd, a = p[2 * i],
                           b = p[2 * i + 1];
                    p[2 * i] = a * cs - b * sn;
                    p[2 * i + 1] = a * sn + b * cs;
                }
            }
        // attention in double (naive_attention takes the kernels' float inputs)
        double scale = c->attn_scale > 0 ? c->attn_scale : 1 / sqrt(hd);
        for (int t = 0; t < N; t++)
            for (int h = 0; h < H; h++) {
                int kh = h / (H / KV), j0 = local && t - c->sliding_window + 1 > 0 ? t - c->sliding_window + 1 : 0;
                double max = -INFINITY, sum = 0;
                for (int j = j0; j <= t; j++) {
                    s[j] = 0;
                    for (int i = 0; i < hd; i++) s[j] += q[t * qd + h * hd + i] * k[j * kvd + kh * hd + i];
                    s[j] *= scale;
                    max = fmax(max, s[j]);
                }
                for (int j = j0; j <= t; j++) sum += exp(s[j] - max);
                for (int i = 0; i < hd; i++) {
                    double o = 0;
                    for (int j = j0; j <= t; j++) o += exp(s[j] - max) / sum * v[j * kvd + kh * hd + i];
                    att[t * qd + h * hd + i] = o;
                }
            }
        naive_linear(y, att, L->wo, L->bo, N, qd, d);
        if (c->arch_flags & ARCH_OUT_NORMS) naive_rms_rows(c, y, L->attn_out_norm_w, N, d);
        for (int i = 0; i < N * d; i++) x[i] += y[i];
        memcpy(xn, x, sizeof(double) * N * d);
        naive_rms_rows(c, xn, L->ffn_norm_w, N, d);
        naive_linear(h1, xn, L->w1, L->b1, N, d, hid);
        naive_linear(h3, xn, L->w3, L->b3, N, d, hid);
        for (int i = 0; i < N * hid; i++) {
            double a = h1[i];
            h1[i] = c->ffn_kind == FFN_SWIGLU
                        ? a / (1 + exp(-a)) * h3[i]
                        : 0.5 * a * (1 + tanh(sqrt(2 / 3.141592653589793) * (a + 0.044715 * a * a * a))) * h3[i];
        }
        naive_linear(y, h1, L->w2, L->b2, N, hid, d);
        if (c->arch_flags & ARCH_OUT_NORMS) naive_rms_rows(c, y, L->ffn_out_norm_w, N, d);
        for (int i = 0; i < N * d; i++) x[i] += y[i];
    }
    naive_rms_rows(c, x, w->final_norm_w, N, d);
    naive_linear(logits, x, w->classifier, NULL, N, d, V);
    free(x), free(xn), free(q), free(k), free(v), free(att), free(y), free(h1), free(h3), free(s);
}

// forward() over the sequence in chunks (sizes from splits in turn, cut to max_batch), every
// row's logits kept.
static void run_chunks(const TestModel *m, const int *tokens, int N, int max_batch, const int *splits, int n_splits,
                       float *logits) {
    RunState s;
    assert_int_equal(state_init(&s, &m->c, max_batch, WEIGHTS_F32), 0);
    for (int pos0 = 0, n = 0, T; pos0 < N; pos0 += T, n++) {
        T = splits[n % n_splits] < max_batch ? splits[n % n_splits] : max_batch;
        T = T < N - pos0 ? T : N - pos0;
        forward(&m->c, &m->w, &s, tokens + pos0, T, pos0, logits + (size_t)pos0 * m->c.vocab_size, 0);
    }
    state_free(&s);
}

// Variants: every knob (Gemma 3's, with llama3 scaling on the global layer and biases that
// Gemma lacks), partial RoPE with linear scaling; Llama 3's (scaling alone, SwiGLU); Qwen3's
// (q/k norms, plain weights); and a wide model that forward runs on 1, 2 and 3 threads (with
// and without whole key/value heads per thread). Each runs as one batch, in chunks through
// the ring, one token at a time, and mixed.
static void test_forward_all_knobs(void **state) {
    (void)state;
    int N = 34, whole[] = {64}, chunks[] = {4}, one[] = {1}, mixed[] = {6, 1, 1, 3, 1, 2};
    int threads = omp_get_max_threads();
    for (int variant = 0; variant < 5; variant++) {
        Config c = knob_config();
        c.seq_len = 48;
        if (variant == 0) c.bias_flags = BIAS_QKV | BIAS_ATTN_OUT;
        if (variant == 1) c.rope_dims = 8, c.rope_scaling = ROPE_SCALING_LINEAR, c.n_kv_heads = 3, c.attn_scale = 0;
        if (variant == 2) {
            c.arch_flags = 0, c.sliding_window = c.global_every = 0, c.ffn_kind = FFN_SWIGLU, c.attn_scale = 0;
            c.embed_scale = 1.0f, c.tied_classifier = 0;
        }
        if (variant == 3) {
            c.arch_flags = ARCH_QK_NORM, c.sliding_window = c.global_every = 0, c.ffn_kind = FFN_SWIGLU;
            c.rope_scaling = ROPE_SCALING_NONE, c.attn_scale = 0, c.embed_scale = 1.0f;
        }
        if (variant == 4) // wide enough for forward's parallel region
            c.dim = 128, c.hidden_dim = 192, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = c.rope_dims = 40,
            c.embed_scale = sqrtf(128.0f), c.sliding_window = 7, c.global_every = 2;
        TestModel m = random_model(c);
        int V = c.vocab_size, *tokens = malloc(sizeof(int) * N);
        for (int t = 0; t < N; t++) tokens[t] = (t * 7 + 3) % V;
        double *want = malloc(sizeof(double) * N * V);
        float *got = malloc(sizeof(float) * N * V);
        naive_forward(&m, tokens, N, want);
        for (int nt = 1; nt <= (variant == 4 ? 3 : 1); nt++) {
            if (variant == 4) omp_set_num_threads(nt);
            run_chunks(&m, tokens, N, N, whole, 1, got);
            assert_close(got, want, (size_t)N * V, 1e-4);
            run_chunks(&m, tokens, N, 4, chunks, 1, got);
            assert_close(got, want, (size_t)N * V, 1e-4);
            run_chunks(&m, tokens, N, 1, one, 1, got);
            assert_close(got, want, (size_t)N * V, 1e-4);
            run_chunks(&m, tokens, N, 6, mixed, 6, got);
            assert_close(got, want, (size_t)N * V, 1e-4);
        }
        omp_set_num_threads(threads);
        if (c.sliding_window) { // the chunked runs went through a ring
            RunState s;
            assert_int_equal(state_init(&s, &c, 4, WEIGHTS_F32), 0);
            assert_true(s.ring > 0 && N > s.ring);
            state_free(&s);
        }
        free(tokens);
        free(want);
        free(got);
        free(m.block);
        weights_free(&m.w);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_tables),    cmocka_unit_test(test_head_norm),
        cmocka_unit_test(test_norm_plus_one),  cmocka_unit_test(test_out_norms),
        cmocka_unit_test(test_geglu),          cmocka_unit_test(test_ring_attention),
        cmocka_unit_test(test_cache_carve),    cmocka_unit_test(test_state_aligned),
        cmocka_unit_test(test_kv_cache_ready), cmocka_unit_test(test_forward_all_knobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
