"""The PyTorch reference of an attn.c model file (Transformer), written from the format's
specification (docs/FORMAT.md), not from run.c; and the RoPE frequencies and sliding-window mask
the Hugging Face mode shares."""
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from attn import modelfile as mf


# ---- RoPE frequencies (Hugging Face's modeling_rope_utils semantics), shared by both modes ----

def inv_frequencies(theta, dims, scaling=None):
    """float64 [dims / 2]: theta^(-2i / dims), then scaled. scaling is None or (kind, factor,
    low_freq_factor, high_freq_factor, original_context): "linear" divides every frequency by factor
    (positions / factor); "llama3" divides only those whose wavelength exceeds original / low, keeps
    those whose wavelength is below original / high, and blends the band between linearly in
    original / wavelength."""
    inv = 1.0 / theta ** (np.arange(0, dims, 2, dtype=np.float64) / dims)
    if scaling is None:
        return inv
    kind, factor, low, high, original = scaling
    if kind == "linear":
        return inv / factor
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def window_mask(qpos, kpos, window):
    """[Tq, Tk] bool, True where a query at qpos may read a key at kpos: causal, and with a window
    only the last `window` positions, its own included."""
    ok = kpos[None, :] <= qpos[:, None]
    if window:
        ok &= qpos[:, None] - kpos[None, :] < window
    return ok


# ---- attn.c model files ----

class Block(nn.Module):
    """One layer's parameters (attn_norm_w, wq, ...), registered by Transformer."""


class Transformer(nn.Module):
    # Dropout, for the training tests: None, or drop(site, x) -> x with a mask applied, at
    # nanoGPT's places, the sites numbered as docs/TRAINING.md does: the embeddings' sum 0;
    # in layer l the attention probabilities 3l + 1, the attention's output 3l + 2 and the
    # feed-forward's output 3l + 3, before their residual adds.
    drop = None
    # True: keys and values rounded to float16 once computed, as ./run --kv-cache f16 keeps them.
    kv_half = False

    def __init__(self, cfg):
        super().__init__()
        self.cfg = c = mf.complete_config(cfg)
        self.layers = nn.ModuleList(Block() for _ in range(c["n_layers"]))
        for name, shape in mf.tensor_specs(c):
            owner = self
            if name.startswith("layers."):
                _, i, name = name.split(".", 2)
                owner = self.layers[int(i)]
            owner.register_parameter(name, nn.Parameter(torch.zeros(shape)))

    def is_local(self, layer):
        c = self.cfg
        return bool(c["sliding_window"]) and (layer + 1) % c["global_every"] != 0

    def norm(self, x, w, b):
        c = self.cfg
        if c["norm_kind"] == mf.NORM_LAYER:
            return F.layer_norm(x, (x.shape[-1],), w, b, c["norm_eps"])
        if c["arch_flags"] & mf.ARCH_NORM_PLUS_ONE:
            w = (1 + w.float()).to(x.dtype)  # Gemma forms 1 + w in float32
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["norm_eps"]) * w

    def frequencies(self, layer):
        """The RoPE inverse frequencies of a layer: a local one's base unscaled, a global one's scaled."""
        c = self.cfg
        if self.is_local(layer):
            return inv_frequencies(c["rope_local_theta"], c["rope_dims"])
        kind = {mf.ROPE_SCALING_NONE: None, mf.ROPE_SCALING_LINEAR: "linear",
                mf.ROPE_SCALING_LLAMA3: "llama3"}[c["rope_scaling"]]
        return inv_frequencies(c["rope_theta"], c["rope_dims"], kind and (
            kind, c["rope_factor"], c["rope_low_freq_factor"], c["rope_high_freq_factor"], c["rope_original_ctx"]))

    def rope(self, x, layer):
        """Rotate interleaved pairs (2i, 2i+1) of the first rope_dims of each head (Meta's Llama)."""
        r, T = self.cfg["rope_dims"], x.shape[1]
        inv = torch.from_numpy(self.frequencies(layer))
        ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        rot = torch.polar(torch.ones_like(ang), ang).to(torch.complex128 if x.dtype == torch.float64
                                                         else torch.complex64)
        z = torch.view_as_complex(x[..., :r].reshape(*x.shape[:-1], r // 2, 2).contiguous())
        z = torch.view_as_real(z * rot[None, :, None, :]).reshape(*x.shape[:-1], r)
        return torch.cat([z, x[..., r:]], -1)

    def dropout(self, site, x):
        return x if self.drop is None else self.drop(site, x)

    def attention(self, L, x, layer):
        c = self.cfg
        B, T, _ = x.shape
        H, KV, hd = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        q = F.linear(x, L.wq, getattr(L, "bq", None))
        k = F.linear(x, L.wk, getattr(L, "bk", None))
        v = F.linear(x, L.wv, getattr(L, "bv", None)).view(B, T, KV, hd)
        if c["arch_flags"] & mf.ARCH_QK_NORM_WHOLE:  # over the whole projection, before it is cut into heads
            q, k = self.norm(q, L.q_norm_w, None), self.norm(k, L.k_norm_w, None)
        q, k = q.view(B, T, H, hd), k.view(B, T, KV, hd)
        if c["arch_flags"] & mf.ARCH_QK_NORM and not c["arch_flags"] & mf.ARCH_QK_NORM_WHOLE:
            q, k = self.norm(q, L.q_norm_w, None), self.norm(k, L.k_norm_w, None)
        if c["pos_kind"] == mf.POS_ROPE:
            q, k = self.rope(q, layer), self.rope(k, layer)
        if self.kv_half:
            k, v = k.float().half().to(k.dtype), v.float().half().to(v.dtype)
        # query head h reads kv head h // (H / KV)
        k = k.repeat_interleave(H // KV, dim=2)
        v = v.repeat_interleave(H // KV, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # B, H, T, hd
        s = q @ k.transpose(-1, -2) * (c["attn_scale"] or 1 / math.sqrt(hd))
        pos = torch.arange(T)
        s = s.masked_fill(~window_mask(pos, pos, c["sliding_window"] if self.is_local(layer) else 0), float("-inf"))
        y = (self.dropout(3 * layer + 1, s.softmax(-1)) @ v).transpose(1, 2).reshape(B, T, H * hd)
        return F.linear(y, L.wo, getattr(L, "bo", None))

    def ffn(self, L, x):
        if self.cfg["n_experts"]:
            return self.experts(L, x)
        return self.expert(L.w1, getattr(L, "w3", None), L.w2, x, L)

    def experts(self, L, x):
        """FORMAT.md's experts: the router's softmax in float32, each row's n_experts_used most
        probable experts (the lower of equal ones first), their probabilities divided by their sum
        with moe_flags 1, and the sum of the chosen experts' feed-forwards times those weights;
        plus, with shared_dim, the shared expert's times sigmoid(shared_gate · x)."""
        c = self.cfg
        E, K, h, d = c["n_experts"], c["n_experts_used"], c["hidden_dim"], c["dim"]
        p = F.linear(x, L.router).float().softmax(-1)
        chosen = torch.sort(p, dim=-1, descending=True, stable=True).indices[..., :K]
        w = p.gather(-1, chosen)
        if c["moe_flags"] & mf.MOE_NORM_TOPK:
            w = w / w.sum(-1, keepdim=True)
        w = w.to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(E):
            rows = (chosen == e)
            if rows.any():
                y = self.expert(L.w1[e * h:(e + 1) * h], L.w3[e * h:(e + 1) * h] if hasattr(L, "w3") else None,
                                L.w2[e * d:(e + 1) * d], x)
                out = out + y * (w * rows).sum(-1, keepdim=True)
        if c["shared_dim"]:  # the shared expert, every row through it, scaled by its sigmoid gate
            g = torch.sigmoid(F.linear(x, L.shared_gate[None, :]))
            out = out + g * self.expert(L.shared_w1, getattr(L, "shared_w3", None), L.shared_w2, x)
        return out

    def expert(self, w1, w3, w2, x, L=None):
        """A feed-forward of these matrices (with L's biases, if it has them)."""
        kind = self.cfg["ffn_kind"]
        h = F.linear(x, w1, getattr(L, "b1", None))
        if kind == mf.FFN_SWIGLU:
            h = F.silu(h) * F.linear(x, w3, getattr(L, "b3", None))
        elif kind == mf.FFN_GEGLU_TANH:
            h = F.gelu(h, approximate="tanh") * F.linear(x, w3, getattr(L, "b3", None))
        elif kind == mf.FFN_GELU_TANH:
            h = F.gelu(h, approximate="tanh")
        elif kind == mf.FFN_GELU_ERF:
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return F.linear(h, w2, getattr(L, "b2", None))

    def sinusoid(self, T, dtype):
        d = self.cfg["dim"]
        j = torch.arange(d, dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] / 10000.0 ** ((j - j % 2) / d)[None, :]
        return torch.where(j % 2 == 0, torch.sin(ang), torch.cos(ang)).to(dtype)

    def forward(self, tokens):
        """tokens [B, T] (int64) -> logits [B, T, vocab]."""
        c = self.cfg
        T = tokens.shape[1]
        if T > c["seq_len"]:
            raise ValueError("%d tokens exceed seq_len %d" % (T, c["seq_len"]))
        x = self.tok_embedding[tokens] * c["embed_scale"]
        if c["pos_kind"] == mf.POS_LEARNED:
            x = x + self.pos_embedding[:T]
        elif c["pos_kind"] == mf.POS_SINUSOID:
            x = x + self.sinusoid(T, x.dtype)
        x = self.dropout(0, x)
        out_norms = c["arch_flags"] & mf.ARCH_OUT_NORMS
        for l, L in enumerate(self.layers):
            na = lambda t: self.norm(t, L.attn_norm_w, getattr(L, "attn_norm_b", None))  # noqa: E731
            nf = lambda t: self.norm(t, L.ffn_norm_w, getattr(L, "ffn_norm_b", None))  # noqa: E731
            # Gemma 3 normalises each sublayer's output before its residual add
            oa = lambda t: self.norm(t, L.attn_out_norm_w, None) if out_norms else t  # noqa: E731
            of = lambda t: self.norm(t, L.ffn_out_norm_w, None) if out_norms else t  # noqa: E731
            da = lambda t: self.dropout(3 * l + 2, t)  # noqa: E731
            df = lambda t: self.dropout(3 * l + 3, t)  # noqa: E731
            if c["post_norm"]:
                x = na(x + da(oa(self.attention(L, x, l))))
                x = nf(x + df(of(self.ffn(L, x))))
            else:
                x = x + da(oa(self.attention(L, na(x), l)))
                x = x + df(of(self.ffn(L, nf(x))))
        if c["final_norm"]:
            x = self.norm(x, self.final_norm_w, getattr(self, "final_norm_b", None))
        return F.linear(x, self.tok_embedding if c["tied_classifier"] else self.classifier)

    # the interface logits(), perplexity() and greedy() use, shared with HFModel
    def all_logits(self, tokens):
        with torch.no_grad():
            return self(torch.tensor([list(tokens)], dtype=torch.long))[0]

    def in_double(self):
        """This model computing in float64, for perplexity."""
        return copy.deepcopy(self).double()

    def context(self):
        return self.cfg["seq_len"]

    def stops(self, t):
        _, _, flags, bos, eos = self.tok
        return t == eos or (flags & mf.TOKF_BOS_STOPS and t == bos)

    def generate(self, tokens, n):
        toks, out = list(tokens), []
        while len(out) < n and len(toks) < self.context():
            t = int(self.all_logits(toks)[-1].argmax())
            if self.stops(t):
                break
            toks.append(t)
            out.append(t)
        return out
