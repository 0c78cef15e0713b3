// model/layers.h: the model's elementwise and per-row layers, each a _forward with its
// _backward beside it: normalisation, the feed-forward activations, RoPE, the embedding, and
// softmax with the cross-entropy that training ends in. Activations are row-major (T, C),
// and every kernel serves a prompt, a one-token step and training alike. The products live in
// matmul.h and attention.h; nothing here allocates, threads or reads a file.
#ifndef ATTN_MODEL_LAYERS_H
#define ATTN_MODEL_LAYERS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "file.h"
#include "matmul.h"

// ----------------------------------------------------------------------------
// exp and softmax

// expf by range reduction and a degree-6 polynomial (max relative error 8e-8): unlike libm's
// expf and tanhf it vectorises, and the activations cost most after the products
// (docs/KERNELS.md).
static inline float exp_vec(float x) {
    float in = x;
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    // round to nearest by the 1.5 * 2^23 trick: floorf would keep GCC from vectorising
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // NaN must not reach the int conversion (undefined behaviour); p is NaN then and keeps it
    float nc = n == n ? n : 0.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)nc + 127) << 23};
    // below the clamp the result is 0, as expf's (softmax must give masked scores exactly 0)
    return in < -87.0f ? 0.0f : p * scale.f;
}

// The largest of x [n], n > 0.
static inline float max_of(const float *x, int n) {
    float max = x[0];
#pragma omp simd reduction(max : max)
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    return max;
}

// x[i] = exp(x[i] - max) for i < n; returns their sum: a softmax before its division.
static inline float exp_shifted(float *x, int n, float max) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        x[i] = exp_vec(x[i] - max);
        sum += x[i];
    }
    return sum;
}

// Vectorised (exp_vec, SIMD reductions), since attention runs it on every score row.
static inline void softmax(float *x, int n) {
    float sum = exp_shifted(x, n, max_of(x, n));
    for (int i = 0; i < n; i++) x[i] /= sum;
}

// ----------------------------------------------------------------------------
// Normalisation: LayerNorm or RMSNorm over each row of dim features

// With plus_one the weights are used as (1 + w), as Gemma's norms do (in float32, as Hugging
// Face computes x_normed * (1.0 + w)); adding 0 instead leaves every other model's product as it was.
static inline void rmsnorm(float *out, const float *x, const float *w, int plus_one, int T, int C, float eps) {
    float one = plus_one ? 1.0f : 0.0f;
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++) ss += xt[i] * xt[i];
        float r = 1.0f / sqrtf(ss / C + eps);
        for (int i = 0; i < C; i++) ot[i] = xt[i] * r * (w[i] + one);
    }
}

static inline void layernorm(float *out, const float *x, const float *w, const float *b, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        float mean = 0.0f, var = 0.0f;
#pragma omp simd reduction(+ : mean)
        for (int i = 0; i < C; i++) mean += xt[i];
        mean /= C;
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < C; i++) var += (xt[i] - mean) * (xt[i] - mean);
        float r = 1.0f / sqrtf(var / C + eps);
        for (int i = 0; i < C; i++) ot[i] = (xt[i] - mean) * r * w[i] + b[i];
    }
}

static inline void norm_forward(const Config *c, float *out, const float *x, const float *w, const float *b, int T) {
    if (c->norm_kind == NORM_LAYER) layernorm(out, x, w, b, T, c->dim, c->norm_eps);
    else rmsnorm(out, x, w, (c->arch_flags & ARCH_NORM_PLUS_ONE) != 0, T, c->dim, c->norm_eps);
}

// ARCH_QK_NORM's RMSNorm over each of n_heads heads (head_dim wide, weights w) in T rows
// stride apart, in place: a thread normalises only the heads it owns.
static inline void head_norm_forward(const Config *c, float *x, size_t stride, int T, int n_heads, const float *w) {
    for (int t = 0; t < T; t++)
        rmsnorm(x + t * stride, x + t * stride, w, (c->arch_flags & ARCH_NORM_PLUS_ONE) != 0, n_heads, c->head_dim,
                c->norm_eps);
}

// dx (=, or += with acc) from dout through LayerNorm / RMSNorm of x; dw, db accumulate.
static inline void norm_backward(const Config *c, float *dx, int acc, float *dw, float *db, const float *dout,
                                 const float *x, const float *w, int T) {
    int C = c->dim, ln = c->norm_kind == NORM_LAYER;
    float eps = c->norm_eps;
    for (int t = 0; t < T; t++) {
        const float *xn = x + (size_t)t * C, *gn = dout + (size_t)t * C;
        float *dxn = dx + (size_t)t * C;
        // The simd reductions let the compiler vectorise the sums (in a fixed order).
        float mean = 0.0f, r, ss = 0.0f;
        if (ln) {
#pragma omp simd reduction(+ : mean)
            for (int i = 0; i < C; i++) mean += xn[i];
            mean /= C;
        }
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < C; i++) ss += (xn[i] - mean) * (xn[i] - mean);
        r = 1.0f / sqrtf(ss / C + eps);
        // xhat = (x - mean) r; dxhat = g w; dx = r (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int i = 0; i < C; i++) {
            float gw = gn[i] * w[i], xh = (xn[i] - mean) * r;
            sum_g += gw;
            sum_gx += gw * xh;
        }
        float mg = ln ? sum_g / C : 0.0f, mgx = sum_gx / C;
#pragma omp simd
        for (int i = 0; i < C; i++) {
            float xh = (xn[i] - mean) * r, v = r * (gn[i] * w[i] - mg - xh * mgx);
            dxn[i] = acc ? dxn[i] + v : v;
            dw[i] += gn[i] * xh;
            if (db) db[i] += gn[i];
        }
    }
}

// ----------------------------------------------------------------------------
// Feed-forward activations

#define GELU_K 0.7978845608028654f // sqrt(2 / pi)

// GELU's tanh approximation, 0.5 x (1 + tanh u), written as the equal x sigmoid(2u) so that
// it needs only exp_vec and vectorises.
static inline float gelu_tanh(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x);
    return x / (1.0f + exp_vec(-2.0f * u));
}

// The feed-forward nonlinearity of h [n] into out, which may be h itself (./run works in
// place; training keeps h for the backward pass); the gated kinds also take the gate's
// partner g. One loop per kind, so that each vectorises; omp simd because out may alias h,
// which is safe element by element.
static inline void activation_forward(int kind, float *out, const float *h, const float *g, size_t n) {
    switch (kind) {
    case FFN_SWIGLU:
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = h[i] / (1.0f + exp_vec(-h[i])) * g[i];
        break;
    case FFN_GELU_TANH:
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(h[i]);
        break;
    case FFN_GEGLU_TANH: // Gemma's w2(gelu_tanh(w1 x) * w3 x)
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(h[i]) * g[i];
        break;
    case FFN_GELU_ERF:
        for (size_t i = 0; i < n; i++) out[i] = 0.5f * h[i] * (1.0f + erff(h[i] * 0.7071067811865476f));
        break;
    default:
#pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = h[i] > 0.0f ? h[i] : 0.0f;
        break;
    }
}

// In place: dh holds d(activation output) on entry and d(h1) on exit; SwiGLU also gives dh3.
static inline void activation_backward(int kind, float *dh, float *dh3, const float *h1, const float *h3, size_t n) {
    switch (kind) {
    case FFN_SWIGLU:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x = h1[i], g = dh[i], s = 1.0f / (1.0f + exp_vec(-x));
            dh3[i] = g * x * s;
            dh[i] = g * h3[i] * s * (1.0f + x * (1.0f - s));
        }
        break;
    case FFN_GELU_TANH:
        // s = sigmoid(2u) = (1 + tanh u) / 2, so 1 - tanh² u = 4 s (1 - s)
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            float x = h1[i], u = GELU_K * (x + 0.044715f * x * x * x), s = 1.0f / (1.0f + exp_vec(-2.0f * u));
            dh[i] *= s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        }
        break;
    case FFN_GELU_ERF:
        for (size_t i = 0; i < n; i++) {
            float x = h1[i];
            dh[i] *= 0.5f * (1.0f + erff(x * 0.7071067811865476f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
        }
        break;
    default:
#pragma omp simd
        for (size_t i = 0; i < n; i++) dh[i] = h1[i] > 0.0f ? dh[i] : 0.0f;
        break;
    }
}

// ----------------------------------------------------------------------------
// RoPE: rotary position embedding on queries and keys

// Rotates interleaved pairs of the first rope_dims of n_heads heads in each of T rows, stride
// floats apart (a thread may own only some of a row's heads); row t is at position pos0 + t.
// cos/sin come from a table [seq_len, rope_dims / 2] made once (rope_table).
static inline void rope_forward(float *x, size_t stride, int T, int pos0, int n_heads, int head_dim, int rope_dims,
                                const float *cos_t, const float *sin_t) {
    int half = rope_dims / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cos_t + (size_t)(pos0 + t) * half, *s = sin_t + (size_t)(pos0 + t) * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + t * stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c[i] - b * s[i];
                v[2 * i + 1] = a * s[i] + b * c[i];
            }
        }
    }
}

#define ROPE_MAX_PAIRS 2048 // rope_dims / 2 for the widest head file.h allows

// The table of cos and sin of p freq[i] for positions p < seq_len and pairs i < half, [seq_len,
// half]. Angles in double so that long contexts keep their precision; stored as float.
static inline void rope_table_of(float *cos_t, float *sin_t, int seq_len, int half, const double *freq) {
    for (int p = 0; p < seq_len; p++)
        for (int i = 0; i < half; i++) {
            double a = p * freq[i];
            cos_t[(size_t)p * half + i] = (float)cos(a);
            sin_t[(size_t)p * half + i] = (float)sin(a);
        }
}

// Pair i's angle per position, theta^(-2i / rope_dims), for rope_dims / 2 pairs.
static inline void rope_base_frequencies(double *freq, int rope_dims, double theta) {
    for (int i = 0; i < rope_dims / 2; i++) freq[i] = pow(theta, -2.0 * i / rope_dims);
}

// A layer's frequencies: a local layer's from rope_local_theta as they are; a global layer's from
// rope_theta, scaled as Hugging Face's rope_type linear (every one divided by rope_factor) or
// llama3 (_compute_llama3_parameters: wavelengths longer than rope_original_ctx /
// rope_low_freq_factor divided by rope_factor, those shorter than rope_original_ctx /
// rope_high_freq_factor kept, and the ones between interpolated), here in double.
static inline void rope_frequencies(double *freq, const Config *c, int local) {
    rope_base_frequencies(freq, c->rope_dims, local ? c->rope_local_theta : c->rope_theta);
    if (local || c->rope_scaling == ROPE_SCALING_NONE) return;
    double factor = c->rope_factor, ctx = c->rope_original_ctx, lo = c->rope_low_freq_factor,
           hi = c->rope_high_freq_factor;
    for (int i = 0; i < c->rope_dims / 2; i++) {
        double wavelen = 2 * M_PI / freq[i];
        if (c->rope_scaling == ROPE_SCALING_LINEAR || wavelen > ctx / lo) freq[i] /= factor;
        else if (wavelen >= ctx / hi) {
            double smooth = (ctx / wavelen - lo) / (hi - lo);
            freq[i] = (1 - smooth) * freq[i] / factor + smooth * freq[i];
        }
    }
}

// The unscaled table of base theta, as ./train uses.
static inline void rope_table(float *cos_t, float *sin_t, int seq_len, int rope_dims, float theta) {
    double freq[ROPE_MAX_PAIRS];
    rope_base_frequencies(freq, rope_dims, theta);
    rope_table_of(cos_t, sin_t, seq_len, rope_dims / 2, freq);
}

// RoPE's backward is the inverse rotation: the forward with the sines negated (nsin_t).
static inline void rope_backward(float *dx, size_t stride, int T, int pos0, int n_heads, int head_dim, int rope_dims,
                                 const float *cos_t, const float *nsin_t) {
    rope_forward(dx, stride, T, pos0, n_heads, head_dim, rope_dims, cos_t, nsin_t);
}

// ----------------------------------------------------------------------------
// Embedding: token vectors plus learned or sinusoidal positions

// x[t] = embed_scale * E[token] + position(pos0 + t)
static inline void embed_forward(const Config *c, const Weights *w, float *x, const int *tokens, int T, int pos0) {
    int d = c->dim;
    for (int t = 0; t < T; t++) {
        float *xt = x + (size_t)t * d;
        if (!w->tok_embedding) {
            dequantize_rows(xt, &w->qtok_embedding, d, tokens[t], tokens[t] + 1);
            for (int i = 0; i < d; i++) xt[i] *= c->embed_scale;
        } else {
            const float *e = w->tok_embedding + (size_t)tokens[t] * d;
            for (int i = 0; i < d; i++) xt[i] = c->embed_scale * e[i];
        }
        if (c->pos_kind == POS_LEARNED) {
            const float *p = w->pos_embedding + (size_t)(pos0 + t) * d;
            for (int i = 0; i < d; i++) xt[i] += p[i];
        } else if (c->pos_kind == POS_SINUSOIDAL) {
            for (int i = 0; i < d; i += 2) {
                double a = (pos0 + t) / pow(10000.0, (double)i / d);
                xt[i] += (float)sin(a);
                xt[i + 1] += (float)cos(a);
            }
        }
    }
}

// The embedding's gradients from dx (T, dim) of tokens at positions pos0 .. pos0 + T - 1,
// added into g's token (and learned position) rows.
static inline void embed_backward(const Config *c, Weights *g, const float *dx, const int *tokens, int T, int pos0) {
    int d = c->dim;
    for (int t = 0; t < T; t++) {
        float *de = g->tok_embedding + (size_t)tokens[t] * d;
        const float *dt = dx + (size_t)t * d;
#pragma omp simd
        for (int i = 0; i < d; i++) de[i] += c->embed_scale * dt[i];
        if (g->pos_embedding) {
            float *dpos = g->pos_embedding + (size_t)(pos0 + t) * d;
#pragma omp simd
            for (int i = 0; i < d; i++) dpos[i] += dt[i];
        }
    }
}

// ----------------------------------------------------------------------------
// The loss

// Softmax and cross-entropy over T rows of logits (T, V), fused with their backward as llm.c
// does: logits become probabilities and losses[t] = -log p[targets[t]]; with dscale != 0,
// logits become dloss/dlogits = (p - onehot) * dscale.
static inline void crossentropy_forward(float *logits, float *losses, const int *targets, int T, int V, float dscale) {
    for (int t = 0; t < T; t++) {
        float *row = logits + (size_t)t * V;
        softmax(row, V);
        losses[t] = -logf(row[targets[t]]);
        if (dscale != 0.0f) {
            row[targets[t]] -= 1.0f;
            for (int i = 0; i < V; i++) row[i] *= dscale;
        }
    }
}

#endif
