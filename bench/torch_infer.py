"""PyTorch baseline for bench/bench_forward.c: the same forward pass (pre-norm; RoPE or learned
positions; SwiGLU, GELU or ReLU; RMSNorm or LayerNorm; biases), written the way a PyTorch user
would write a fast one: F.linear, a preallocated KV cache, the prompt as one batch, then
greedy one-token steps. Prints the same "key value" lines as bench_forward.

  torch_infer.py MODEL [--threads N] [-p 256] [-n 64] [-r 5]
Thread settings (OMP_WAIT_POLICY, OPENBLAS_NUM_THREADS) come from the environment.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from attn import modelfile as mf  # noqa: E402


def bench_tokens(n, vocab):
    """bench_forward.c's prompt: a 64-bit LCG from 42, token = (state >> 33) % vocab."""
    out, s = [], 42
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((s >> 33) % vocab)
    return out


class Model:
    def __init__(self, path):
        cfg, _, t = mf.read_model(path)
        self.c = c = cfg
        if c["post_norm"] or c["pos_kind"] == mf.POS_SINUSOID:
            raise SystemExit("torch_infer.py: %s: only pre-norm RoPE / learned-position models" % path)
        self.t = {k: torch.from_numpy(np.array(v)) for k, v in t.items()}
        self.H, self.KV, self.hd = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        S, hd = c["seq_len"], self.hd
        self.kc = torch.zeros(c["n_layers"], S, self.KV, hd)
        self.vc = torch.zeros(c["n_layers"], S, self.KV, hd)
        r = c["rope_dims"]
        if c["pos_kind"] == mf.POS_ROPE:
            inv = c["rope_theta"] ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
            ang = torch.outer(torch.arange(S, dtype=torch.float64), inv)
            self.cos, self.sin = ang.cos().float(), ang.sin().float()

    def w(self, name):
        return self.t.get(name)

    def norm(self, x, p):
        c = self.c
        if c["norm_kind"] == mf.NORM_LAYER:
            return F.layer_norm(x, (c["dim"],), self.w(p + "_w"), self.w(p + "_b"), c["norm_eps"])
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["norm_eps"]) * self.w(p + "_w")

    def rope(self, x, pos0):
        r, T = self.c["rope_dims"], x.shape[0]
        cos, sin = self.cos[pos0:pos0 + T, None, :], self.sin[pos0:pos0 + T, None, :]
        pair = x[..., :r].unflatten(-1, (r // 2, 2))
        a, b = pair[..., 0], pair[..., 1]
        rot = torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)
        return torch.cat((rot, x[..., r:]), -1) if r < x.shape[-1] else rot

    @torch.inference_mode()
    def forward(self, tokens, pos0):
        """tokens: list of ids at positions pos0.. -> logits of the last one."""
        c, H, KV, hd = self.c, self.H, self.KV, self.hd
        T = len(tokens)
        x = self.t["tok_embedding"][torch.tensor(tokens)] * c["embed_scale"]
        if c["pos_kind"] == mf.POS_LEARNED:
            x = x + self.t["pos_embedding"][pos0:pos0 + T]
        L = pos0 + T
        mask = None
        if T > 1:
            mask = torch.full((T, L), float("-inf")).triu(pos0 + 1)
        for i in range(c["n_layers"]):
            p = "layers.%d." % i
            h = self.norm(x, p + "attn_norm")
            q = F.linear(h, self.w(p + "wq"), self.w(p + "bq")).view(T, H, hd)
            k = F.linear(h, self.w(p + "wk"), self.w(p + "bk")).view(T, KV, hd)
            v = F.linear(h, self.w(p + "wv"), self.w(p + "bv")).view(T, KV, hd)
            if c["pos_kind"] == mf.POS_ROPE:
                q, k = self.rope(q, pos0), self.rope(k, pos0)
            self.kc[i, pos0:L] = k
            self.vc[i, pos0:L] = v
            K = self.kc[i, :L].transpose(0, 1)  # KV, L, hd
            V = self.vc[i, :L].transpose(0, 1)
            if H != KV:
                K, V = K.repeat_interleave(H // KV, 0), V.repeat_interleave(H // KV, 0)
            s = torch.matmul(q.transpose(0, 1), K.transpose(1, 2)) / math.sqrt(hd)  # H, T, L
            if mask is not None:
                s = s + mask
            y = torch.matmul(s.softmax(-1), V).transpose(0, 1).reshape(T, H * hd)
            x = x + F.linear(y, self.w(p + "wo"), self.w(p + "bo"))
            h = self.norm(x, p + "ffn_norm")
            a = F.linear(h, self.w(p + "w1"), self.w(p + "b1"))
            kind = c["ffn_kind"]
            if kind == mf.FFN_SWIGLU:
                a = F.silu(a) * F.linear(h, self.w(p + "w3"), self.w(p + "b3"))
            elif kind == mf.FFN_GELU_TANH:
                a = F.gelu(a, approximate="tanh")
            elif kind == mf.FFN_GELU_ERF:
                a = F.gelu(a)
            else:
                a = F.relu(a)
            x = x + F.linear(a, self.w(p + "w2"), self.w(p + "b2"))
        last = x[-1:]
        if c["final_norm"]:
            last = self.norm(last, "final_norm")
        cls = self.t["tok_embedding"] if c["tied_classifier"] else self.t["classifier"]
        return F.linear(last, cls)[0]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave torch's default)")
    ap.add_argument("-p", type=int, default=256)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-r", type=int, default=5)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    m = Model(a.model)
    V = m.c["vocab_size"]
    prompt = bench_tokens(a.p, V)
    m.forward(prompt, 0)  # warm-up
    tp, tg, ids = [], [], []
    for _ in range(a.r):
        t0 = time.perf_counter()
        logits = m.forward(prompt, 0)
        tp.append(time.perf_counter() - t0)
    for r in range(a.r):
        tok = int(logits.argmax())
        t0 = time.perf_counter()
        for i in range(a.n):
            if r == 0:
                ids.append(tok)
            logits = m.forward([tok], a.p + i)
            tok = int(logits.argmax())
        tg.append(time.perf_counter() - t0)
    print("torch_threads %d" % torch.get_num_threads())
    print("prompt_tok_s %.2f %.2f" % (a.p / statistics.median(tp), a.p / min(tp)))
    print("gen_tok_s %.2f %.2f" % (a.n / statistics.median(tg), a.n / min(tg)))
    print("gen_ids %s" % ",".join(map(str, ids[:16])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
