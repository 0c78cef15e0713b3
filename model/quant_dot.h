// model/quant_dot.h: products of a matrix in a llama.cpp block type (model/quant.h) with
// float32 inputs rounded to 16-bit integers, in integer multiply-adds: a one-token row
// (dot_quantized; Q4_0, Q4_K, Q6_K and Q8_0 in their own order in model/quant_order.h) and a
// prompt's panels (matmul_quantized_panels_of), from the one unpacking per type. The
// input rows are quantised once for the products that share them (quantize_input): a scale
// per 32 values (amax / 32767, rounded to nearest even), so each group of 16 weights meets
// integers of one scale, and its sum of products is exact in int32:
//   Σ_j w_j x_j ≈ Σ_g [ a_g · dx_g · Σ_{j in g} s_j q_j  +  b_g · dx_g · Σ_{j in g} q_j ].
// llama.cpp rounds the inputs to 8 bits; that moved the logits of ../shared's GGUFs by up to
// 1.9e-2 of the largest, 16 bits by about 1e-4 (docs/KERNELS.md, "Block types"). VPDPBUSD
// multiplies unsigned by signed bytes, so a 16-bit q is taken as its two bytes, q = 256 qh +
// ql: ql (unsigned) times s, and s biased to unsigned (s + 128) times qh (signed), the bias
// taken back out with -128 Σ qh.
#ifndef ATTN_MODEL_QUANT_DOT_H
#define ATTN_MODEL_QUANT_DOT_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "quant.h"

#define QUANT_GROUPS (UNPACKED_VALUES / UNPACK_GROUP) // groups in a chunk of 256 values
#define QUANT_MAX 32767.0f

// One input row of n values quantised, in chunks of 256 (the last padded with zeros):
//   ql    [n256]       uint8: each value's low byte
//   qh    [n256]       int8: its high byte (q = 256 qh + ql)
//   dx    [n256 / 16]  float: each group's scale (the same for the two groups of 32 values)
//   sx    [n256 / 16]  float: dx × Σ q over the group, for the weights' offsets b
//   neg   [n256 / 16]  int32: -32768 Σ qh over the group: the bias of s + 128 times qh, × 256
static inline size_t quantized_values(int n) {
    return ((size_t)n + UNPACKED_VALUES - 1) / UNPACKED_VALUES * UNPACKED_VALUES;
}
static inline size_t quantized_row_bytes(int n) {
    return 2 * quantized_values(n) + quantized_values(n) / UNPACK_GROUP * 12;
}

typedef struct {
    const uint8_t *ql;
    const int8_t *qh;
    const float *dx, *sx;
    const int32_t *neg;
} QuantizedRow;

static inline QuantizedRow quantized_row(const uint8_t *row, int n) {
    size_t v = quantized_values(n), g = v / UNPACK_GROUP;
    const float *dx = (const float *)(row + 2 * v);
    return (QuantizedRow){row, (const int8_t *)(row + v), dx, dx + g, (const int32_t *)(dx + 2 * g)};
}

// Values [i, i + 32) of x (m of them, the rest zeros) into the row's arrays: the portable
// path, and the vector one's tail.
static inline void quantize32(const float *x, int m, uint8_t *ql, int8_t *qh, float *d, int sum[2], int high[2]) {
    float amax = 0.0f;
    for (int j = 0; j < m; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    float id = amax > 0.0f ? QUANT_MAX / amax : 0.0f;
    *d = amax / QUANT_MAX;
    for (int j = 0; j < 32; j++) {
        // rounded to nearest even, as the vector conversion does; a NaN becomes 0
        float y = j < m ? x[j] * id : 0.0f;
        y = y > QUANT_MAX ? QUANT_MAX : y < -QUANT_MAX ? -QUANT_MAX : y;
        int q = y == y ? (int)rintf(y) : 0;
        ql[j] = (uint8_t)(q & 255), qh[j] = (int8_t)((q - (q & 255)) / 256);
        sum[j / 16] += q, high[j / 16] += qh[j];
    }
}

// x [n] into row (quantized_row_bytes(n) bytes).
static inline void quantize_input(uint8_t *row, const float *x, int n) {
    size_t v = quantized_values(n), groups = v / UNPACK_GROUP;
    uint8_t *ql = row;
    int8_t *qh = (int8_t *)(row + v);
    float *dx = (float *)(row + 2 * v), *sx = dx + groups;
    int32_t *neg = (int32_t *)(sx + groups);
    for (size_t i = 0; i < v; i += 32) {
        int m = (size_t)n > i ? ((size_t)n - i < 32 ? (int)(n - i) : 32) : 0, sum[2] = {0, 0}, high[2] = {0, 0};
        float d;
#if defined(__AVX512F__)
        if (m == 32) {
            __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
            __m512 id = _mm512_set1_ps(amax > 0.0f ? QUANT_MAX / amax : 0.0f), lim = _mm512_set1_ps(QUANT_MAX);
            d = amax / QUANT_MAX;
            for (int h = 0; h < 2; h++) {
                __m512 y = _mm512_mul_ps(h ? x1 : x0, id);
                y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y); // NaN -> 0
                __m512i q =
                    _mm512_cvtps_epi32(_mm512_max_ps(_mm512_min_ps(y, lim), _mm512_sub_ps(_mm512_setzero_ps(), lim)));
                __m512i qhigh = _mm512_srai_epi32(q, 8);
                _mm_storeu_si128((__m128i *)(ql + i + 16 * h), _mm512_cvtepi32_epi8(q));
                _mm_storeu_si128((__m128i *)(qh + i + 16 * h), _mm512_cvtepi32_epi8(qhigh));
                sum[h] = _mm512_reduce_add_epi32(q), high[h] = _mm512_reduce_add_epi32(qhigh);
            }
        } else
#endif
            quantize32(x + i, m, ql + i, qh + i, &d, sum, high);
        for (int h = 0; h < 2; h++) {
            size_t g = i / UNPACK_GROUP + h;
            dx[g] = d, sx[g] = d * (float)sum[h], neg[g] = -32768 * high[h];
        }
    }
}

// ----------------------------------------------------------------------------
// One row of weights times one quantised input: a chunk of 256 values at a time unpacked,
// its 16 groups' integer sums taken, then scaled into 16 float lanes, one per group, that
// live across the row: per group acc = fma((float)Σ s q, a·dx, acc), then acc = fma(b, sx,
// acc). With VNNI the lanes come back as a register and sum_rows16 adds 16 rows' lanes at once.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define QUANT_VNNI 1
// Σ s q of 64 values, 4 to a lane, less the bias that neg takes out: ql times s, and
// (s + 128) times qh, shifted up a byte.
static inline __m512i products64(__m512i s, const uint8_t *ql, const int8_t *qh) {
    __m512i low = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(ql), s);
    __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(s, _mm512_set1_epi8((char)0x80)),
                                       _mm512_loadu_si512(qh));
    return _mm512_add_epi32(low, _mm512_slli_epi32(high, 8));
}

// The 16 groups' Σ s q of a chunk. Four products of 64 values give each group's sum in 4
// lanes; two rounds of interleaving add those up, leaving group 4k + i in lane 4i + k, and a
// permutation puts it in lane 4k + i.
static inline __m512i chunk_sums(const __m512i s[4], QuantizedRow x, size_t i) {
    __m512i p[4];
    for (int k = 0; k < 4; k++) p[k] = products64(s[k], x.ql + i + 64 * k, x.qh + i + 64 * k);
    __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    __m512i w = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_add_epi32(_mm512_permutexvar_epi32(order, w), _mm512_loadu_si512(x.neg + i / UNPACK_GROUP));
}

// Lane r of the result: the sum of v[r]'s 16 lanes. Pairs of rows, then fours, are added
// within each 128-bit lane by interleaving, then the four 128-bit lanes across.
static inline __m512 sum_rows16(const __m512 v[16]) {
    __m512 t[8], u[4];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) // lane c: rows 4i .. 4i + 3's sums over lane c
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xee));
    __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

// out[r0 .. r0 + rows) = the rows' lanes summed (+ bias).
static inline void store_rows16(float *out, const float *bias, size_t r0, int rows, const __m512 v[16]) {
    __mmask16 mask = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
    __m512 sums = sum_rows16(v);
    if (bias) sums = _mm512_add_ps(sums, _mm512_maskz_loadu_ps(mask, bias + r0));
    _mm512_mask_storeu_ps(out + r0, mask, sums);
}
#endif

// Σ_j w_j x_j for the n values of a row of blocks (row) and a quantised input (x). Inlined
// with type a constant, so that each type's unpacking is inlined into its own loop.
#if defined(QUANT_VNNI)
#define DOT_LANES __m512
#else
#define DOT_LANES float
#endif
__attribute__((always_inline)) static inline DOT_LANES dot_quantized(int type, const uint8_t *restrict row,
                                                                     QuantizedRow x, int n) {
    size_t bytes = (size_t)matrix_types[type].block_bytes, block = (size_t)matrix_types[type].block;
    Unpacked u;
#if defined(QUANT_VNNI)
    __m512 acc = _mm512_setzero_ps();
#else
    float acc[QUANT_GROUPS] = {0};
#endif
    for (int i = 0; i < n; i += UNPACKED_VALUES) {
        int m = n - i < UNPACKED_VALUES ? n - i : UNPACKED_VALUES;
        size_t g = (size_t)i / UNPACK_GROUP;
        const uint8_t *blocks = row + (size_t)i / block * bytes;
#if defined(QUANT_VNNI)
        __m512i v[4];
#if defined(UNPACK_REGS)
        if (has_regs(type) && m == UNPACKED_VALUES) regs_values(type, blocks, v, &u);
        else
#endif
        {
            unpack_values(type, blocks, m, &u);
            for (int k = 0; k < 4; k++) v[k] = _mm512_load_si512(u.s + 64 * k);
        }
        __m512 sums = _mm512_cvtepi32_ps(chunk_sums(v, x, (size_t)i));
        acc = _mm512_fmadd_ps(sums, _mm512_mul_ps(_mm512_load_ps(u.a), _mm512_loadu_ps(x.dx + g)), acc);
        if (type_has_min(type)) acc = _mm512_fmadd_ps(_mm512_load_ps(u.b), _mm512_loadu_ps(x.sx + g), acc);
#else
        unpack_values(type, blocks, m, &u);
        int32_t sums[QUANT_GROUPS] = {0};
        for (int k = 0; k < QUANT_GROUPS; k++)
            for (int j = 0, at = i + UNPACK_GROUP * k; j < UNPACK_GROUP; j++)
                sums[k] += u.s[UNPACK_GROUP * k + j] * (256 * x.qh[at + j] + x.ql[at + j]);
        for (int k = 0; k < QUANT_GROUPS; k++) {
            acc[k] = fmaf((float)sums[k], u.a[k] * x.dx[g + k], acc[k]);
            if (type_has_min(type)) acc[k] = fmaf(u.b[k], x.sx[g + k], acc[k]);
        }
#endif
    }
#if defined(QUANT_VNNI)
    return acc;
#else
    float sum = 0.0f;
    for (int k = 0; k < QUANT_GROUPS; k++) sum += acc[k];
    return sum;
#endif
}

#if defined(QUANT_VNNI)
// ----------------------------------------------------------------------------
// Many input rows (a prompt) times a matrix in a block type: QPANEL_ROWS rows of weights
// unpacked once into a panel laid out for VPDPBUSD (each 64 bytes: 4 consecutive values of
// 16 rows), with their groups' scales and offsets by group, QPANEL_K values at a time (48 KiB,
// in L2); then tiles of up to QTILE_T tokens × 16 outputs: per group, a token's products into
// two int32 vectors (its low and high bytes), the first started at the input's neg, then
// joined and scaled into a float32 vector. Each output sums its groups in order (not the
// one-token rows' 16 lanes), so a prompt's logits and a step's differ by float rounding, as
// float32's do.
#define QPANEL_ROWS 16
#define QPANEL_K 2048
#define QTILE_T 6 // 8 ran 5% slower: its pointers and accumulators spill

// Rows [r0, r0 + rows) of the matrix (blocks, row_bytes apart), values [k0, k0 + kn) of n,
// into the panel: s [kn / 4][16][4] bytes, a and b [kn / 16][16]; rows past rows
// are zeros.
__attribute__((always_inline)) static inline void pack_quantized_panel(uint8_t *restrict ps, float *restrict pa,
                                                                       float *restrict pb, int type,
                                                                       const uint8_t *blocks, size_t row_bytes,
                                                                       int rows, int k0, int kn, int n) {
    size_t bytes = (size_t)matrix_types[type].block_bytes, block = (size_t)matrix_types[type].block;
    Unpacked u;
    for (int r = 0; r < QPANEL_ROWS; r++)
        for (int c = 0; c < kn; c += UNPACKED_VALUES) {
            int m = n - (k0 + c) < UNPACKED_VALUES ? n - (k0 + c) : UNPACKED_VALUES;
            if (r < rows) unpack_values(type, blocks + r * row_bytes + (size_t)(k0 + c) / block * bytes, m, &u);
            else memset(&u, 0, sizeof u);
            for (int k4 = 0; k4 < UNPACKED_VALUES / 4; k4++)
                memcpy(ps + ((size_t)(c / 4 + k4) * QPANEL_ROWS + r) * 4, u.s + 4 * k4, 4);
            for (int g = 0; g < QUANT_GROUPS; g++) {
                pa[(size_t)(c / UNPACK_GROUP + g) * QPANEL_ROWS + r] = u.a[g];
                if (type_has_min(type)) pb[(size_t)(c / UNPACK_GROUP + g) * QPANEL_ROWS + r] = u.b[g];
            }
        }
}

// out[t, 0..16) (mask: the valid outputs) for nt tokens (x: their quantised rows, ld_x
// bytes apart): the panel's values [k0, k0 + kn) summed onto 0 (first) or out's partial
// sums, then the bias (last; NULL for none). Inlined with nt a constant, so that the
// accumulators stay in registers.
__attribute__((always_inline)) static inline void quantized_tile(float *out, size_t ld_out, const uint8_t *x,
                                                                 size_t ld_x, int n, const uint8_t *ps, const float *pa,
                                                                 const float *pb, int min, int k0, int kn,
                                                                 const float *bias, __mmask16 mask, int first, int last,
                                                                 const int nt) {
    __m512 acc[QTILE_T];
    QuantizedRow xr[QTILE_T];
    for (int t = 0; t < nt; t++) {
        acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, out + t * ld_out);
        xr[t] = quantized_row(x + t * ld_x, n);
    }
    for (int g = 0; g < kn / UNPACK_GROUP; g++) {
        size_t gx = (size_t)k0 / UNPACK_GROUP + g;
        __m512i low[QTILE_T], high[QTILE_T];
        for (int t = 0; t < nt; t++) low[t] = _mm512_set1_epi32(xr[t].neg[gx]), high[t] = _mm512_setzero_si512();
        for (int k4 = 0; k4 < UNPACK_GROUP / 4; k4++) {
            __m512i w = _mm512_loadu_si512(ps + (size_t)(g * UNPACK_GROUP / 4 + k4) * QPANEL_ROWS * 4);
            __m512i biased = _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
            for (int t = 0; t < nt; t++) {
                int32_t l4, h4;
                memcpy(&l4, xr[t].ql + gx * UNPACK_GROUP + 4 * k4, 4);
                memcpy(&h4, xr[t].qh + gx * UNPACK_GROUP + 4 * k4, 4);
                low[t] = _mm512_dpbusd_epi32(low[t], _mm512_set1_epi32(l4), w);
                high[t] = _mm512_dpbusd_epi32(high[t], biased, _mm512_set1_epi32(h4));
            }
        }
        __m512 a = _mm512_loadu_ps(pa + (size_t)g * QPANEL_ROWS);
        for (int t = 0; t < nt; t++) {
            __m512i sums = _mm512_add_epi32(low[t], _mm512_slli_epi32(high[t], 8));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(a, _mm512_set1_ps(xr[t].dx[gx])), acc[t]);
            if (min)
                acc[t] = _mm512_fmadd_ps(_mm512_loadu_ps(pb + (size_t)g * QPANEL_ROWS), _mm512_set1_ps(xr[t].sx[gx]),
                                         acc[t]);
        }
    }
    if (last && bias) {
        __m512 bv = _mm512_maskz_loadu_ps(mask, bias);
        for (int t = 0; t < nt; t++) acc[t] = _mm512_add_ps(acc[t], bv);
    }
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(out + t * ld_out, mask, acc[t]);
}

// Output features [lo, hi) of out[T, n_out] = x · Wᵀ (+ bias), W in a block type (blocks,
// n values a row), x quantised (T rows of quantized_row_bytes(n)); panel: scratch of
// quantized_panel_bytes().
static inline size_t quantized_panel_bytes(void) {
    return (size_t)QPANEL_K * QPANEL_ROWS + QPANEL_K / UNPACK_GROUP * QPANEL_ROWS * 8;
}

__attribute__((always_inline)) static inline void matmul_quantized_panels_of(int type, float *out, int n_out,
                                                                             const float *bias, const uint8_t *x, int T,
                                                                             int n, const uint8_t *blocks,
                                                                             uint8_t *panel, size_t lo, size_t hi) {
    size_t rb = (size_t)n / matrix_types[type].block * matrix_types[type].block_bytes, ld_x = quantized_row_bytes(n);
    uint8_t *ps = panel;
    float *pa = (float *)(panel + (size_t)QPANEL_K * QPANEL_ROWS), *pb = pa + QPANEL_K / UNPACK_GROUP * QPANEL_ROWS;
    for (size_t r0 = lo; r0 < hi; r0 += QPANEL_ROWS) {
        int rows = hi - r0 < QPANEL_ROWS ? (int)(hi - r0) : QPANEL_ROWS;
        __mmask16 mask = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
        const float *b = bias ? bias + r0 : NULL;
        for (int k0 = 0; k0 < n; k0 += QPANEL_K) {
            int left = (int)quantized_values(n) - k0, kn = left < QPANEL_K ? left : QPANEL_K;
            pack_quantized_panel(ps, pa, pb, type, blocks + r0 * rb, rb, rows, k0, kn, n);
            for (int t = 0; t < T; t += QTILE_T) {
                float *o = out + (size_t)t * n_out + r0;
                const uint8_t *xt = x + (size_t)t * ld_x;
                int first = k0 == 0, last = k0 + kn >= n;
                switch (T - t < QTILE_T ? T - t : QTILE_T) { // one copy of the loop per count of tokens
#define QTILE(nt)                                                                                                      \
    case nt:                                                                                                           \
        quantized_tile(o, n_out, xt, ld_x, n, ps, pa, pb, type_has_min(type), k0, kn, b, mask, first, last, nt);       \
        break
                    QTILE(1);
                    QTILE(2);
                    QTILE(3);
                    QTILE(4);
                    QTILE(5);
                    QTILE(6);
#undef QTILE
                }
            }
        }
    }
}
#endif

#endif
