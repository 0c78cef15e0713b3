"""Quantise float32 rows into llama.cpp's block types, the bytes GGUF stores:

  quantize_rows(x, "Q4_K")      # float32 [rows, cols] -> uint8 [rows, cols / 256 * 144]

Each type follows ggml's reference quantiser, the one llama-quantize runs when it has no importance
matrix (ggml/src/ggml-quants.c, llama.cpp commit c392e5094deaf2d1a7c18683214f007fad3fe42b):
  Q4_0 Q5_0 Q8_0  a float16 scale per 32 from the value of largest magnitude (quantize_row_*_ref)
  Q4_1 Q5_1       a float16 scale and minimum per 32 from the smallest and largest values
  Q2_K Q4_K Q5_K  a scale and a minimum per sub-block (16 or 32 values) chosen by make_qkx2_quants's
                  search: 16 or 21 trial scales around the range's, each refitted by weighted least
                  squares, the best by weighted error (absolute error for Q2_K); the sub-block
                  scales then quantised to 4 or 6 bits against the block's largest
  Q3_K            make_q3_quants: a scale per 16, its integers improved coordinate by coordinate
                  (up to 5 sweeps) under weights x^2
  Q6_K            make_qx_quants: a scale per 16, the best of 19 trial scales under weights x^2
Every step is ggml's in float32, in its order (sums run sequentially, rounding half to even as
its nearest_int, or as C's casts and roundf where ggml uses them), vectorised over blocks, so the
bytes are llama.cpp's: tests/test_quantize.py reproduces llama-quantize's files in ../shared byte
for byte. IQ4_NL (the fallback of Q2_K and Q3_K) is quantize_iq4_nl's. Not implemented: the
importance-matrix variants (quantize_row_*_impl, make_qkx3_quants), which llama-quantize uses only
with --imatrix.

tensor_type says which type llama-quantize gives each matrix for a file type such as Q4_K_M
(src/llama-quant.cpp's llama_tensor_get_type at the same commit).
"""
import numpy as np

from attn import gguf_file

QK_K = 256
GROUP_MAX_EPS = np.float32(1e-15)
F32 = np.float32


# ---- ggml's scalar steps, elementwise over float32 arrays ----

def nearest(v):
    """ggml's nearest_int: round half to even (its 1.5 * 2^23 trick), as int32."""
    return np.rint(v).astype(np.int32)


def f16(v):
    """(the float16 bytes of v [n], v rounded to float16 and widened back) as ggml stores d."""
    h = np.asarray(v, np.float32).astype(np.float16)
    return h.reshape(-1, 1).view(np.uint8), h.astype(np.float32)


def inverse(d):
    """1/d where d != 0, else 0, as ggml's `d ? 1.0f/d : 0.0f`."""
    with np.errstate(divide="ignore"):
        return np.where(d == 0, F32(0), F32(1) / d).astype(np.float32)


def signed_max(x):
    """The value of largest magnitude per row (the first on ties; +0 for a row of zeros, as ggml's
    search from 0 finds it) and that magnitude."""
    m = first(x, np.abs(x).argmax(axis=-1))
    m = np.where(m != 0, m, F32(0))
    return m, np.abs(m)


def first(x, i):
    """x[row, i[row]] per row."""
    return np.take_along_axis(x, i[..., None], axis=-1)[..., 0]


def positive_max(v):
    """The largest of v's rows' values if above 0, else +0: ggml's running maximum from 0."""
    m = v.max(axis=-1)
    return np.where(m > 0, m, F32(0)).astype(np.float32)


def pack_nibbles(q):
    """[n, 32] values 0..15 -> [n, 16] bytes: value j in the low nibble of byte j, j+16 in the high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def fifth_bits(q):
    """[n, 32] 5-bit values -> [n, 4] bytes: bit j of the little-endian uint32 is value j's fifth bit."""
    bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    return bits.sum(axis=1, dtype=np.uint32).astype("<u4").reshape(-1, 1).view(np.uint8)


def pack_2bit(L):
    """[n, 256] values 0..3 -> [n, 64] bytes: byte 32h + l holds values 128h + l + 32k at bits 2k."""
    q = L.reshape(-1, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


# ---- the simple types: one scale (and minimum) per 32 ----

def _q4_0(x):
    big, _ = signed_max(x)
    d = big / F32(-8)
    q = np.minimum(15, np.trunc(x * inverse(d)[:, None] + F32(8.5))).astype(np.uint8)  # (int8_t) cast
    return np.concatenate([f16(d)[0], pack_nibbles(q)], axis=1)


def _q5_0(x):
    big, _ = signed_max(x)
    d = big / F32(-16)
    q = np.minimum(31, np.trunc(x * inverse(d)[:, None] + F32(16.5))).astype(np.uint8)
    return np.concatenate([f16(d)[0], fifth_bits(q), pack_nibbles(q & 15)], axis=1)


def _min_max(x, levels):
    lo, hi = first(x, x.argmin(axis=1)), first(x, x.argmax(axis=1))  # the first of equals, -0 or +0 as ggml's
    d = (hi - lo) / F32(levels)
    return lo, d, (x - lo[:, None]) * inverse(d)[:, None] + F32(0.5)


def _q4_1(x):
    lo, d, v = _min_max(x, 15)
    q = np.minimum(15, np.trunc(v)).astype(np.uint8)
    return np.concatenate([f16(d)[0], f16(lo)[0], pack_nibbles(q)], axis=1)


def _q5_1(x):
    lo, d, v = _min_max(x, 31)
    q = np.trunc(v).astype(np.uint8)  # ggml's (uint8_t) cast, no clamp
    return np.concatenate([f16(d)[0], f16(lo)[0], fifth_bits(q), pack_nibbles(q & 15)], axis=1)


def _q8_0(x):
    d = np.abs(x).max(axis=1) / F32(127)
    v = x * inverse(d)[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + F32(0.5))).astype(np.int8)  # roundf: half away from zero
    return np.concatenate([f16(d)[0], q.view(np.uint8)], axis=1)


# ---- the searches of the K types ----
# Each takes sub-blocks x [m, n] and works on them transposed, [n, m]: a sum over a sub-block is
# then numpy's reduction over axis 0, which adds row after row, ggml's order, at vector speed.

def colsum(a):
    """The sum over axis 0 in float32, first row to last, as ggml's loops add."""
    return np.add.reduce(a, axis=0, dtype=np.float32)


def make_qx_quants(x, nmax):
    """(scale [m], L [m, n] in 0..2 nmax - 1): make_qx_quants with rmse_type 1 (weights x^2)."""
    big, amax = signed_max(x)
    zero = amax < GROUP_MAX_EPS
    x = np.ascontiguousarray(x.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = x * x
        wx = w * x

        def trial(iscale):
            l = np.clip(nearest(iscale * x), -nmax, nmax - 1).astype(np.float32)
            return l, colsum(wx * l), colsum(w * l * l)
        l, sumlx, suml2 = trial(F32(-nmax) / big)
        scale = np.where(suml2 != 0, sumlx / suml2, F32(0)).astype(np.float32)
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            lt, slx, sl2 = trial(-(F32(nmax) + F32(0.1) * F32(step)) / big)
            better = (sl2 > 0) & (slx * slx > best * sl2)
            np.copyto(l, lt, where=better)
            scale = np.where(better, slx / sl2, scale).astype(np.float32)
            best = np.where(better, scale * slx, best).astype(np.float32)
    L = np.where(zero, 0, l.astype(np.int32) + nmax)
    return np.where(zero, F32(0), scale), np.ascontiguousarray(L.T)


def make_q3_quants(x, nmax):
    """(scale [m], L [m, n] in 0..2 nmax - 1): make_q3_quants with do_rmse, its sweeps one
    coordinate at a time as ggml's, every sub-block at once."""
    big, amax = signed_max(x)
    zero = amax < GROUP_MAX_EPS
    x = np.ascontiguousarray(x.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.clip(nearest((F32(-nmax) / big) * x), -nmax, nmax - 1).astype(np.float32)
        w = x * x
        wx = w * x
        sumlx, suml2 = colsum(wx * L), colsum(w * L * L)
        for _ in range(5):  # a sweep that changes nothing leaves the next one nothing to change
            for i in range(len(x)):
                xi, wi, wxi, li = x[i], w[i], wx[i], L[i]
                slx = sumlx - wxi * li
                sl2 = suml2 - wi * li * li
                new = np.clip(nearest(xi * sl2 / slx), -nmax, nmax - 1).astype(np.float32)
                slx2 = slx + wxi * new
                sl22 = sl2 + wi * new * new
                take = (slx > 0) & (new != li) & (sl22 > 0) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl22)
                L[i] = np.where(take, new, li)
                sumlx = np.where(take, slx2, sumlx)
                suml2 = np.where(take, sl22, suml2)
        scale = sumlx / suml2
    L = np.where(zero, 0, L.astype(np.int32) + nmax)
    return np.where(zero, F32(0), scale).astype(np.float32), np.ascontiguousarray(L.T)


def make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep, use_mad):
    """(scale [m], -min [m], L [m, n] in 0..nmax): make_qkx2_quants, an affine fit per sub-block
    searched over nstep + 1 trial scales, each refitted by weighted least squares."""
    lo = first(x, x.argmin(axis=1))
    lo = np.where(lo > 0, F32(0), lo)
    hi = first(x, x.argmax(axis=1))
    flat = hi == lo
    x, w = np.ascontiguousarray(x.T), np.ascontiguousarray(w.T)
    wx = w * x
    sum_w, sum_x = colsum(w), colsum(wx)
    with np.errstate(divide="ignore", invalid="ignore"):
        def levels(iscale, mn):
            return np.clip(nearest(iscale * (x - mn)), 0, nmax).astype(np.float32)

        def error(scale, mn, L):
            diff = scale * L + mn - x
            return colsum(w * (np.abs(diff) if use_mad else diff * diff))
        iscale = F32(nmax) / (hi - lo)
        scale = F32(1) / iscale
        L = levels(iscale, lo)
        best = error(scale, lo, L)
        mn = lo
        for step in range(nstep + 1):  # each trial from the best minimum so far, as ggml's loop
            Lt = levels((F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (hi - mn), mn)
            wl = w * Lt
            sum_l, sum_l2, sum_xl = colsum(wl), colsum(wl * Lt), colsum(wl * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            t_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            t_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            positive = t_min > 0
            t_min = np.where(positive, F32(0), t_min)
            t_scale = np.where(positive, sum_xl / sum_l2, t_scale)
            mad = error(t_scale, t_min, Lt)
            better = (D > 0) & (mad < best)
            np.copyto(L, Lt, where=better)
            best = np.where(better, mad, best)
            scale = np.where(better, t_scale, scale)
            mn = np.where(better, t_min, mn)
    scale = np.where(flat, F32(0), scale).astype(np.float32)
    L = np.where(flat, 0, L).astype(np.int32)
    return scale, (-mn).astype(np.float32), np.ascontiguousarray(L.T)


# ---- the K types: blocks x [n, 256] ----

def _requantize(x, d, dm, L, top):
    """ggml's second pass: each value again from the stored sub-block scale d [n, s] and minimum
    dm (None: symmetric, then L's offset is -top // 2), where d != 0; elsewhere L stays."""
    n, s = d.shape
    xs = x.reshape(n, s, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if dm is None:
            again = np.clip(nearest(xs / d[:, :, None]), -(top + 1) // 2, top // 2) + (top + 1) // 2
        else:
            again = np.clip(nearest((xs + dm[:, :, None]) / d[:, :, None]), 0, top)
    return np.where((d != 0)[:, :, None], again, L.reshape(n, s, -1)).reshape(n, QK_K)


def _k_scale_bytes(ls, lm):
    """Q4_K/Q5_K's 12 bytes of 6-bit sub-block scales and minimums [n, 8]."""
    ls, lm = ls.astype(np.uint8), lm.astype(np.uint8)
    out = np.zeros((len(ls), 12), np.uint8)
    out[:, 0:4] = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    out[:, 4:8] = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    out[:, 8:12] = (ls[:, 4:] & 15) | ((lm[:, 4:] & 15) << 4)
    return out


def _affine_k(x, nmax, rmin, nstep):
    """Q4_K and Q5_K's common part: (d, dmin bytes, scale bytes, L [n, 256] in 0..nmax)."""
    n = len(x)
    sub = x.reshape(n * 8, 32)
    av = np.sqrt(colsum(np.ascontiguousarray(sub.T) ** 2) / F32(32))
    scales, mins, L = make_qkx2_quants(sub, av[:, None] + np.abs(sub), nmax, rmin, 0.1, nstep, False)
    scales, mins = scales.reshape(n, 8), mins.reshape(n, 8)
    max_scale, max_min = positive_max(scales), positive_max(mins)
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0)).astype(np.float32)
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0)).astype(np.float32)
    ls = np.minimum(63, nearest(inv_scale[:, None] * scales).astype(np.uint8))
    lm = np.minimum(63, nearest(inv_min[:, None] * mins).astype(np.uint8))
    d_bytes, d = f16(max_scale / F32(63))
    m_bytes, dmin = f16(max_min / F32(63))
    L = _requantize(x, d[:, None] * ls, dmin[:, None] * lm, L, nmax)
    return d_bytes, m_bytes, _k_scale_bytes(ls, lm), L


def _low_high_nibbles(L):
    """[n, 256] -> [n, 128]: each 64 values as 32 bytes, the first 32 in the low nibbles."""
    q = (L & 15).astype(np.uint8).reshape(-1, 4, 2, 32)
    return (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128)


def _q4_k(x):
    d, dmin, sc, L = _affine_k(x, 15, -1.0, 20)
    return np.concatenate([d, dmin, sc, _low_high_nibbles(L)], axis=1)


def _q5_k(x):
    d, dmin, sc, L = _affine_k(x, 31, -0.5, 15)
    high = (L >> 4).astype(np.uint8).reshape(-1, 8, 32)  # sub-block i's fifth bits are bit i of qh
    qh = np.bitwise_or.reduce(high << np.arange(8, dtype=np.uint8)[None, :, None], axis=1)
    return np.concatenate([d, dmin, sc, qh, _low_high_nibbles(L)], axis=1)


def _q2_k(x):
    n = len(x)
    sub = x.reshape(n * 16, 16)
    scales, mins, L = make_qkx2_quants(sub, np.abs(sub), 3, -0.5, 0.1, 15, True)
    scales, mins = scales.reshape(n, 16), mins.reshape(n, 16)
    max_scale, max_min = positive_max(scales), positive_max(mins)
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.where((max_scale > 0)[:, None], nearest((F32(15) / max_scale)[:, None] * scales), 0)
        lm = np.where((max_min > 0)[:, None], nearest((F32(15) / max_min)[:, None] * mins), 0)
    sc = (ls.astype(np.uint8) | (lm.astype(np.uint8) << 4)).astype(np.uint8)
    d_bytes, d = f16(np.where(max_scale > 0, max_scale / F32(15), F32(0)))
    m_bytes, dmin = f16(np.where(max_min > 0, max_min / F32(15), F32(0)))
    L = _requantize(x, d[:, None] * (sc & 15), dmin[:, None] * (sc >> 4), L, 3)
    return np.concatenate([sc, pack_2bit(L), d_bytes, m_bytes], axis=1)


def _q3_k(x):
    n = len(x)
    scales, L = make_q3_quants(x.reshape(n * 16, 16), 4)
    scales = scales.reshape(n, 16)
    big, _ = signed_max(scales)
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = F32(-32) / big
        l = np.clip(nearest(iscale[:, None] * scales), -32, 31) + 32
    l = np.where((big != 0)[:, None], l, 0).astype(np.uint8)
    sc = np.zeros((n, 12), np.uint8)
    sc[:, :8] = (l[:, :8] & 15) | ((l[:, 8:] & 15) << 4)
    top = (l >> 4).reshape(n, 4, 4)  # scale j's top two bits: byte 8 + j % 4, bits 2 (j // 4)
    sc[:, 8:] = top[:, 0] | (top[:, 1] << 2) | (top[:, 2] << 4) | (top[:, 3] << 6)
    d_bytes, d = f16(np.where(big != 0, F32(1) / iscale, F32(0)))
    L = _requantize(x, d[:, None] * (l.astype(np.float32) - F32(32)), None, L, 7)
    high = (L > 3).astype(np.uint8).reshape(n, 8, 32)  # value j's third bit: bit j // 32 of byte j % 32
    hmask = np.bitwise_or.reduce(high << np.arange(8, dtype=np.uint8)[None, :, None], axis=1)
    return np.concatenate([hmask, pack_2bit(np.where(L > 3, L - 4, L)), sc, d_bytes], axis=1)


def _q6_k(x):
    n = len(x)
    scales, L = make_qx_quants(x.reshape(n * 16, 16), 32)
    scales = scales.reshape(n, 16)
    big, amax = signed_max(scales)
    empty = amax < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = F32(-128) / big
        sc = np.minimum(127, nearest(iscale[:, None] * scales)).astype(np.int8)
    d_bytes, d = f16(np.where(empty, F32(0), F32(1) / iscale))
    sc = np.where(empty[:, None], 0, sc).astype(np.int8)
    L = _requantize(x, d[:, None] * sc, None, L, 63)
    L = np.where(empty[:, None], 0, L).astype(np.uint8).reshape(n, 2, 4, 32)  # halves of 128, quarters of 32
    ql = np.concatenate([L[:, :, 0] & 15 | ((L[:, :, 2] & 15) << 4), L[:, :, 1] & 15 | ((L[:, :, 3] & 15) << 4)],
                        axis=2)
    hi = L >> 4
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)
    return np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8), d_bytes], axis=1)


def best_index(values, x):
    """best_index_int8: the index of the value in the sorted table nearest to x (the lower on ties)."""
    v = values.astype(np.float32)
    mu = np.clip(np.searchsorted(v, x, side="right"), 1, len(v) - 1)
    i = np.where(x - v[mu - 1] < v[mu] - x, mu - 1, mu)
    return np.where(x <= v[0], 0, np.where(x >= v[-1], len(v) - 1, i))


def _iq4_nl(x):
    """IQ4_NL as quantize_iq4_nl without an importance matrix: weights x^2, a scale per 32 from
    the best of 15 trials (ntry 7), each value the nearest entry of the non-linear table."""
    values = gguf_file.IQ4_NL_VALUES
    big, amax = signed_max(x)
    zero = amax < GROUP_MAX_EPS
    xt = np.ascontiguousarray(x.T)
    w = xt * xt
    with np.errstate(divide="ignore", invalid="ignore"):
        def sums(iscale):
            q = values[best_index(values, iscale * xt)]
            wq = w * q
            return colsum(wq * xt), colsum(wq * q)
        sumqx, sumq2 = sums(F32(1) / (-big / values[0]))
        d = sumqx / sumq2
        best = d * sumqx
        for t in range(-7, 8):
            sqx, sq2 = sums((F32(t) + values[0]) / big)
            better = (sq2 > 0) & (sqx * sqx > best * sq2)
            d = np.where(better, sqx / sq2, d).astype(np.float32)
            best = np.where(better, d * sqx, best).astype(np.float32)
    d = np.where(zero, F32(0), d).astype(np.float32)
    L = best_index(values, x * inverse(d)[:, None]).astype(np.uint8)
    return np.concatenate([f16(d)[0], pack_nibbles(L)], axis=1)


QUANTIZERS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0, "Q2_K": _q2_k,
              "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k, "IQ4_NL": _iq4_nl}
CHUNK_BLOCKS = 1 << 8  # blocks per step: keeps the temporaries in cache-sized pieces


def quantize_rows(x, type_name):
    """float32 [rows, cols] -> that type's bytes, uint8 [rows, cols / block * block bytes], as a
    GGUF stores a tensor of that shape. cols must be whole blocks (ValueError otherwise)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, cols = x.shape
    block, block_bytes = gguf_file.BLOCK_SIZES[gguf_file.TYPE_IDS[type_name]]
    if cols % block:
        raise ValueError("rows of %d values are not whole %s blocks of %d" % (cols, type_name, block))
    blocks = x.reshape(-1, block)
    out = np.empty((len(blocks), block_bytes), np.uint8)
    step = max(1, CHUNK_BLOCKS * QK_K // block)
    for i in range(0, len(blocks), step):
        out[i:i + step] = QUANTIZERS[type_name](blocks[i:i + step])
    return out.reshape(rows, cols // block * block_bytes)


# ---- llama-quantize's type per tensor ----

# What convert.py's --quantize asks for: a llama.cpp file type, and the type of most matrices.
FILE_TYPES = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1", "q8_0": "Q8_0", "q2_k": "Q2_K",
              "q3_k_s": "Q3_K", "q3_k_m": "Q3_K", "q3_k_l": "Q3_K", "q4_k_s": "Q4_K", "q4_k_m": "Q4_K",
              "q5_k_s": "Q5_K", "q5_k_m": "Q5_K", "q6_k": "Q6_K", "q3_k": "Q3_K", "q4_k": "Q4_K", "q5_k": "Q5_K"}
# The FILE_TYPES that llama-quantize offers under the same name, with its mix of types; q3_k,
# q4_k and q5_k are this tool's, that one type throughout (but the classifier's and fallbacks)
LLAMA_FILE_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m",
                    "q5_k_s", "q5_k_m", "q6_k")
# llama_tensor_get_type's fallback for a type whose block does not divide a row
FALLBACK = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
# q8_0's matrices whose rows are no whole blocks of 32, which llama-quantize refuses, are kept in
# float16 here (convert.py then asks before a file goes over 9 bits a weight)
Q8_0_FALLBACK = "F16"
# The mixes' raised types (llama_tensor_get_type, for a Llama-like model without experts): for
# attn_output (wo), for ffn_down (w2) and for GPT-2's fused attn_qkv, by file type
RAISED_WO = {"q2_k": "Q3_K", "q3_k_m": "Q4_K", "q3_k_l": "Q5_K"}
RAISED_QKV = {"q3_k_m": "Q4_K", "q3_k_l": "Q4_K", "q4_k_m": "Q5_K", "q5_k_m": "Q6_K"}


def use_more_bits(layer, n_layers):
    """llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between."""
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


def block_of(type_name):
    return gguf_file.BLOCK_SIZES[gguf_file.TYPE_IDS[type_name]][0]


def tensor_type(name, cols, n_layers, file_type, classifier, fused_qkv=False, n_gqa=1):
    """The GGML type llama-quantize gives a matrix (FORMAT.md's name, rows of cols values) of a
    model of n_layers (n_heads / n_kv_heads = n_gqa) quantised to file_type (a FILE_TYPES key), as
    llama_tensor_get_type decides it without an importance matrix, for the tensors a Llama or a
    GPT-2 has (no experts, no 70B rule):
      the classifier (the token embedding when the file has no output tensor: classifier true)
      Q6_K, or Q8_0 if the file type's block does not divide its rows or the file type is q8_0;
      wv: q2_k Q4_K with n_gqa >= 4, else Q3_K; q3_k_m Q5_K in layers 0-1, else Q4_K; q3_k_l
      Q5_K; q4_k_m and q5_k_m Q6_K in the layers use_more_bits names; q4_k_s Q5_K in layers 0-3;
      w2: q2_k Q3_K; q3_k_m Q5_K in the first 16th of the layers, else Q4_K; q3_k_l Q5_K; q4_k_m
      and q5_k_m Q6_K where use_more_bits; q4_k_s Q5_K in the first eighth;
      wo: q2_k Q3_K, q3_k_m Q4_K, q3_k_l Q5_K; with fused_qkv (GPT-2, whose GGUF holds q, k and
      v as one attn_qkv) wq, wk and wv: q3_k_m and q3_k_l Q4_K, q4_k_m Q5_K, q5_k_m Q6_K;
      every other matrix the file type's own (q3_k, q4_k, q5_k: always).
    A type whose block does not divide the row falls back as llama.cpp's does (Q4_K -> Q5_0,
    Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K and Q3_K -> IQ4_NL; then F16); q8_0's rows to F16
    (Q8_0_FALLBACK); for the other types llama.cpp refuses the tensor, and so does this (ValueError)."""
    base = FILE_TYPES[file_type]
    mix = file_type if file_type in LLAMA_FILE_TYPES else None
    part = name.split(".")[-1]
    layer = int(name.split(".")[1]) if name.startswith("layers.") else None
    t = base
    if classifier:
        t = "Q8_0" if cols % block_of(base) or base == "Q8_0" else "Q6_K"
    elif mix and fused_qkv and part in ("wq", "wk", "wv"):
        t = RAISED_QKV.get(mix, base)
    elif mix and part == "wv":
        more = use_more_bits(layer, n_layers)
        t = {"q2_k": "Q4_K" if n_gqa >= 4 else "Q3_K", "q3_k_m": "Q5_K" if layer < 2 else "Q4_K", "q3_k_l": "Q5_K",
             "q4_k_m": "Q6_K" if more else base, "q5_k_m": "Q6_K" if more else base,
             "q4_k_s": "Q5_K" if layer < 4 else base}.get(mix, base)
    elif mix and part == "w2":
        more = use_more_bits(layer, n_layers)
        t = {"q2_k": "Q3_K", "q3_k_m": "Q5_K" if layer < n_layers // 16 else "Q4_K", "q3_k_l": "Q5_K",
             "q4_k_m": "Q6_K" if more else base, "q5_k_m": "Q6_K" if more else base,
             "q4_k_s": "Q5_K" if layer < n_layers // 8 else base}.get(mix, base)
    elif mix and part == "wo":
        t = RAISED_WO.get(mix, base)
    if cols % block_of(t) and file_type == "q8_0":
        return Q8_0_FALLBACK
    if cols % block_of(t):
        if t not in FALLBACK:
            raise ValueError("tensor %s: rows of %d values are not whole %s blocks of %d (llama-quantize refuses "
                             "them too)" % (name, cols, t, block_of(t)))
        t = FALLBACK[t]
        if cols % block_of(t):
            t = "F16"
    return t
