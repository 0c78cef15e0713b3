// model/quant_panels.h: many input rows (a prompt) times a matrix in a llama.cpp block type,
// where the machine has vector integer products (AVX-512 VNNI, with AMX tiles where it has
// them; AVX2): the weights unpacked once into panels laid out for the multiply-adds, and tiles
// of tokens against them. The inputs come rounded as model/quant_dot.h rounds them for one
// token.
#ifndef ATTN_MODEL_QUANT_PANELS_H
#define ATTN_MODEL_QUANT_PANELS_H

#include <stdint.h>
#include <string.h>
#include "quant.h"
#include "quant_dot.h"

// AMX (Intel's tile registers, Sapphire Rapids on) where the compiler may use it: the prompts'
// tiles of 16 tokens multiply in them, and the rest as without.
#if defined(QUANT_VNNI) && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define QUANT_AMX 1
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(QUANT_VNNI) || defined(QUANT_AVX2)
// Many input rows (a prompt) times a matrix in a block type: QPANEL_ROWS rows of weights
// unpacked once into a panel laid out for the machine's multiply-adds, with their groups'
// scales and offsets by group, QPANEL_K values at a time (in L2); then tiles of up to QTILE_T
// tokens × 16 outputs: per group, a token's integer products, then scaled into float32
// vectors. Each output sums its groups in order (not the one-token rows' lanes), so a
// prompt's logits and a step's differ by float rounding, as float32's do.
//   AVX-512 VNNI: each 64 bytes of the panel are 4 consecutive values of 16 rows (VPDPBUSD);
//     a token's products go into two int32 vectors (its low and high bytes), the first started
//     at the input's neg, then joined.
//   AVX2: each 64 bytes are 2 consecutive values of 16 rows as int16, two registers of 8 rows
//     (VPMADDWD, or VPDPWSSD); a token's 2 values are broadcast as one 32-bit lane.
#define QPANEL_ROWS 16
#define QPANEL_K 2048
#if defined(QUANT_VNNI)
#define QTILE_T 6         // 8 ran 5% slower: its pointers and accumulators spill
#define QPANEL_PER_LANE 4 // values of a row in one 32-bit lane of the panel
typedef int8_t PanelValue;
#else
#define QTILE_T 4 // 3: 7% slower; 6: 15% slower (x86-64-v3 on Zen 4)
#define QPANEL_PER_LANE 2
typedef int16_t PanelValue;
#endif

// Rows [r0, r0 + rows) of the matrix (blocks, row_bytes apart), values [k0, k0 + kn) of n,
// into the panel: s [kn / L][16][L] values (L = QPANEL_PER_LANE), a and b [kn / 16][16];
// rows past rows are zeros.
__attribute__((always_inline)) static inline void pack_quantized_panel(PanelValue *restrict ps, float *restrict pa,
                                                                       float *restrict pb, int type,
                                                                       const uint8_t *blocks, size_t row_bytes,
                                                                       int rows, int k0, int kn, int n) {
    size_t bytes = (size_t)matrix_types[type].block_bytes, block = (size_t)matrix_types[type].block;
    const int L = QPANEL_PER_LANE;
    Unpacked u;
    for (int r = 0; r < QPANEL_ROWS; r++)
        for (int c = 0; c < kn; c += UNPACKED_VALUES) {
            int m = n - (k0 + c) < UNPACKED_VALUES ? n - (k0 + c) : UNPACKED_VALUES;
            if (r < rows) unpack_values(type, blocks + r * row_bytes + (size_t)(k0 + c) / block * bytes, m, &u);
            else memset(&u, 0, sizeof u);
            for (int k = 0; k < UNPACKED_VALUES / L; k++)
                for (int j = 0; j < L; j++) ps[((size_t)(c / L + k) * QPANEL_ROWS + r) * L + j] = u.s[L * k + j];
            for (int g = 0; g < QUANT_GROUPS; g++) {
                pa[(size_t)(c / UNPACK_GROUP + g) * QPANEL_ROWS + r] = u.a[g];
                if (type_has_min(type)) pb[(size_t)(c / UNPACK_GROUP + g) * QPANEL_ROWS + r] = u.b[g];
            }
        }
}

#if defined(QUANT_VNNI)
// out[t, 0..rows) for nt tokens (x: their quantised rows, ld_x bytes apart): the panel's
// values [k0, k0 + kn) summed onto 0 (first) or out's partial sums, then the bias (last; NULL
// for none). Inlined with nt a constant, so that the accumulators stay in registers.
__attribute__((always_inline)) static inline void quantized_tile(float *out, size_t ld_out, const uint8_t *x,
                                                                 size_t ld_x, int n, const PanelValue *ps,
                                                                 const float *pa, const float *pb, int min, int k0,
                                                                 int kn, const float *bias, int rows, int first,
                                                                 int last, const int nt) {
    __mmask16 mask = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
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
#if defined(QUANT_AMX)
// Linux lends a thread the tile registers' 8 KiB of state only once the process has asked for
// it; where it refuses (an older kernel), the VNNI tiles serve.
static inline int amx_usable(void) {
    static int state; // 0: not asked yet, 1: granted, -1: refused; asking twice is harmless
    int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (!s) {
        const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
        s = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELAXED);
    }
    return s > 0;
}

// The tiles: 0 and 1 the 16 tokens' low and high bytes of a group of 32 values (16 rows of 32
// bytes), 2 the panel's group (8 rows of 64 bytes: 4 values of 16 weight rows, as VPDPBUSD
// takes them), 3 and 4 their int32 sums (16 tokens × 16 weight rows).
#define AMX_GROUP 32
static inline void amx_configure(void) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t bytes[16];
        uint8_t rows[16];
    } cfg = {.palette = 1};
    cfg.bytes[0] = cfg.bytes[1] = AMX_GROUP, cfg.rows[0] = cfg.rows[1] = 16;
    cfg.bytes[2] = 64, cfg.rows[2] = AMX_GROUP / 4;
    cfg.bytes[3] = cfg.bytes[4] = 64, cfg.rows[3] = cfg.rows[4] = 16;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg)); // GCC 12's _tile_loadconfig tells it only 8 bytes are read
}

// quantized_tile for 16 tokens in AMX tiles (amx_configure done), for a type whose scales come
// per 32 values: per 32 values, the low bytes (unsigned) and the high bytes (signed) times the
// panel's values (signed), TDPBUSD and TDPBSSD, which need no bias; then the two sums joined
// and scaled as the VNNI tiles do. The 32 values' two groups have the same a, and an input
// the same dx (one scale per 32 values), so their sums are scaled once.
__attribute__((always_inline)) static inline void quantized_tile_amx(float *out, size_t ld_out, const uint8_t *x,
                                                                     size_t ld_x, int n, const PanelValue *ps,
                                                                     const float *pa, const float *pb, int min, int k0,
                                                                     int kn, const float *bias, int rows, int first,
                                                                     int last) {
    __mmask16 mask = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
    QuantizedRow x0 = quantized_row(x, n); // token t's row is x0's, t ld_x bytes on
    __m512 acc[16];
    for (int t = 0; t < 16; t++) acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, out + t * ld_out);
    // two sets of sums, a group's and the next's. With offsets (min), whose float32 work is
    // the larger, group g's products start before group g - 1's float32 work and are stored
    // after it, so that the two overlap (loads that follow a tile's store wait for it): 1.3x
    // for Q4_K and Q4_1, where the other types ran 10% slower that way (docs/KERNELS.md).
    const int lag = min ? 1 : 0;
    int32_t sums[2][2][16 * 16] __attribute__((aligned(64)));
    __asm__ volatile("" ::: "memory"); // GCC 12's _tile_loadd does not say it reads memory: the panel is written first
    for (int g = 0, groups = kn / AMX_GROUP; g < groups + lag; g++) {
        if (g < groups) {
            size_t at = (size_t)k0 + (size_t)g * AMX_GROUP;
            _tile_zero(3);
            _tile_zero(4);
            _tile_loadd(0, x0.ql + at, ld_x);
            _tile_loadd(1, x0.qh + at, ld_x);
            _tile_loadd(2, ps + (size_t)g * AMX_GROUP * QPANEL_ROWS, 64);
            _tile_dpbusd(3, 0, 2);
            _tile_dpbssd(4, 1, 2);
            if (!lag) {
                _tile_stored(3, sums[g & 1][0], 64);
                _tile_stored(4, sums[g & 1][1], 64);
            }
        }
        if (g >= lag) {
            size_t at = (size_t)k0 + (size_t)(g - lag) * AMX_GROUP, gx = at / UNPACK_GROUP,
                   gp = (size_t)(g - lag) * AMX_GROUP / UNPACK_GROUP;
            const int32_t *low = sums[(g - lag) & 1][0], *high = sums[(g - lag) & 1][1];
            __m512 a = _mm512_loadu_ps(pa + gp * QPANEL_ROWS), b = min ? _mm512_loadu_ps(pb + gp * QPANEL_ROWS) : a;
            for (int t = 0; t < 16; t++) {
                const float *dx = (const float *)((const uint8_t *)x0.dx + t * ld_x),
                            *sx = (const float *)((const uint8_t *)x0.sx + t * ld_x);
                __m512i s = _mm512_add_epi32(_mm512_load_si512(low + 16 * t),
                                             _mm512_slli_epi32(_mm512_load_si512(high + 16 * t), 8));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(a, _mm512_set1_ps(dx[gx])), acc[t]);
                if (min) acc[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(sx[gx] + sx[gx + 1]), acc[t]);
            }
        }
        if (lag && g < groups) {
            _tile_stored(3, sums[g & 1][0], 64);
            _tile_stored(4, sums[g & 1][1], 64);
        }
    }
    if (last && bias) {
        __m512 bv = _mm512_maskz_loadu_ps(mask, bias);
        for (int t = 0; t < 16; t++) acc[t] = _mm512_add_ps(acc[t], bv);
    }
    for (int t = 0; t < 16; t++) _mm512_mask_storeu_ps(out + t * ld_out, mask, acc[t]);
}
#endif
#else
// The same for AVX2: 16 outputs as two registers of 8.
__attribute__((always_inline)) static inline void quantized_tile(float *out, size_t ld_out, const uint8_t *x,
                                                                 size_t ld_x, int n, const PanelValue *ps,
                                                                 const float *pa, const float *pb, int min, int k0,
                                                                 int kn, const float *bias, int rows, int first,
                                                                 int last, const int nt) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i mask[2] = {_mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane),
                       _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - 8), lane)};
    __m256 acc[QTILE_T][2];
    QuantizedRow xr[QTILE_T];
    for (int t = 0; t < nt; t++) {
        for (int h = 0; h < 2; h++)
            acc[t][h] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(out + t * ld_out + 8 * h, mask[h]);
        xr[t] = quantized_row(x + t * ld_x, n);
    }
    for (int g = 0; g < kn / UNPACK_GROUP; g++) {
        size_t gx = (size_t)k0 / UNPACK_GROUP + g;
        const PanelValue *w = ps + (size_t)g * UNPACK_GROUP * QPANEL_ROWS;
        // a token at a time: its two int32 sums, then the float32 ones (the panel's 512 bytes
        // of the group are read again from L1 for each token, which costs less than spilling)
        for (int t = 0; t < nt; t++) {
            __m256i sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int k2 = 0; k2 < UNPACK_GROUP / 2; k2++) {
                int32_t pair;
                memcpy(&pair, xr[t].q + gx * UNPACK_GROUP + 2 * k2, 4);
                __m256i xt = _mm256_set1_epi32(pair);
                for (int h = 0; h < 2; h++)
                    sums[h] = add_pair_products(
                        sums[h], _mm256_loadu_si256((const __m256i *)(w + (size_t)k2 * QPANEL_ROWS * 2 + 16 * h)), xt);
                // keeps the sums a chain: GCC made the group's 16 products first and added them
                // as a tree, which spilled them to the stack
                __asm__("" : "+x"(sums[0]), "+x"(sums[1]));
            }
            for (int h = 0; h < 2; h++) {
                __m256 scale =
                    _mm256_mul_ps(_mm256_loadu_ps(pa + (size_t)g * QPANEL_ROWS + 8 * h), _mm256_set1_ps(xr[t].dx[gx]));
                acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), scale, acc[t][h]);
                if (min)
                    acc[t][h] = _mm256_fmadd_ps(_mm256_loadu_ps(pb + (size_t)g * QPANEL_ROWS + 8 * h),
                                                _mm256_set1_ps(xr[t].sx[gx]), acc[t][h]);
            }
        }
    }
    for (int h = 0; h < 2; h++) {
        __m256 bv = last && bias ? _mm256_maskload_ps(bias + 8 * h, mask[h]) : _mm256_setzero_ps();
        for (int t = 0; t < nt; t++)
            _mm256_maskstore_ps(out + t * ld_out + 8 * h, mask[h],
                                last && bias ? _mm256_add_ps(acc[t][h], bv) : acc[t][h]);
    }
}
#endif

// quantized_tile for each count of tokens, a function of its own with min a constant in each
// branch: inlined into each type's block_product, GCC kept more of its sums and pointers on
// the stack, and x86-64-v3's Q4_0 prompts ran 4-5% slower (docs/BENCHMARKS.md).
#define QTILE_OF(nt)                                                                                                   \
    __attribute__((noinline)) static void quantized_tile_##nt(                                                         \
        float *out, size_t ld_out, const uint8_t *x, size_t ld_x, int n, const PanelValue *ps, const float *pa,        \
        const float *pb, int min, int k0, int kn, const float *bias, int rows, int first, int last) {                  \
        if (min) quantized_tile(out, ld_out, x, ld_x, n, ps, pa, pb, 1, k0, kn, bias, rows, first, last, nt);          \
        else quantized_tile(out, ld_out, x, ld_x, n, ps, pa, pb, 0, k0, kn, bias, rows, first, last, nt);              \
    }
QTILE_OF(1)
QTILE_OF(2)
QTILE_OF(3)
QTILE_OF(4)
#if QTILE_T > 4
QTILE_OF(5)
QTILE_OF(6)
#endif
#undef QTILE_OF

// Output features [lo, hi) of out[T, n_out] = x · Wᵀ (+ bias), W in a block type (blocks,
// n values a row), x quantised (T rows of quantized_row_bytes(n)); panel: scratch of
// quantized_panel_bytes().
static inline size_t quantized_panel_bytes(void) {
    return (size_t)QPANEL_K * QPANEL_ROWS * sizeof(PanelValue) + QPANEL_K / UNPACK_GROUP * QPANEL_ROWS * 8;
}

__attribute__((always_inline)) static inline void matmul_quantized_panels_of(int type, float *out, int n_out,
                                                                             const float *bias, const uint8_t *x, int T,
                                                                             int n, const uint8_t *blocks,
                                                                             uint8_t *panel, size_t lo, size_t hi) {
    size_t rb = (size_t)n / matrix_types[type].block * matrix_types[type].block_bytes, ld_x = quantized_row_bytes(n);
    PanelValue *ps = (PanelValue *)panel;
    float *pa = (float *)(ps + (size_t)QPANEL_K * QPANEL_ROWS), *pb = pa + QPANEL_K / UNPACK_GROUP * QPANEL_ROWS;
#if defined(QUANT_AMX)
    // only the types whose scales come per 32 values: per 16, the tiles' stores, two a group
    // of 16 tokens × 16 rows, cost more than the VNNI tiles' products (docs/KERNELS.md)
    int amx = !block_kernels[type].per16 && T >= 16 && amx_usable();
    if (amx) amx_configure();
#endif
    for (size_t r0 = lo; r0 < hi; r0 += QPANEL_ROWS) {
        int rows = hi - r0 < QPANEL_ROWS ? (int)(hi - r0) : QPANEL_ROWS;
        const float *b = bias ? bias + r0 : NULL;
        for (int k0 = 0; k0 < n; k0 += QPANEL_K) {
            int left = (int)quantized_values(n) - k0, kn = left < QPANEL_K ? left : QPANEL_K;
            pack_quantized_panel(ps, pa, pb, type, blocks + r0 * rb, rb, rows, k0, kn, n);
            int first = k0 == 0, last = k0 + kn >= n, t = 0;
#if defined(QUANT_AMX)
            for (; amx && T - t >= 16; t += 16)
                quantized_tile_amx(out + (size_t)t * n_out + r0, n_out, x + (size_t)t * ld_x, ld_x, n, ps, pa, pb,
                                   type_has_min(type), k0, kn, b, rows, first, last);
#endif
            for (; t < T; t += QTILE_T) {
                float *o = out + (size_t)t * n_out + r0;
                const uint8_t *xt = x + (size_t)t * ld_x;
                switch (T - t < QTILE_T ? T - t : QTILE_T) { // one copy of the loop per count of tokens
#define QTILE(nt)                                                                                                      \
    case nt:                                                                                                           \
        quantized_tile_##nt(o, n_out, xt, ld_x, n, ps, pa, pb, type_has_min(type), k0, kn, b, rows, first, last);      \
        break
                    QTILE(1);
                    QTILE(2);
                    QTILE(3);
                    QTILE(4);
#if QTILE_T > 4
                    QTILE(5);
                    QTILE(6);
#endif
#undef QTILE
                }
            }
        }
    }
#if defined(QUANT_AMX)
    if (amx) _tile_release(); // a thread holding tile state costs more to switch
#endif
}
#endif

#endif
