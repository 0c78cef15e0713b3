"""PyTorch baseline for ./train: nanoGPT's GPT (LayerNorm with bias, learned positions, GELU
feed-forward 4x wide, biases, tied classifier, no dropout) on character-level text, AdamW and
gradient clipping as train.c does, random batches of the 90% training split. Times every
optimiser step and prints the median tokens/s after the first few (warm-up) steps.

  torch_train.py DATA --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12
                 [--steps 60] [--max-seconds 40] [--threads N] [--bf16-autocast]
Torch 1.13 has no fused attention, so this is nanoGPT's own fallback (masked softmax).
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, n_head, block):
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.ones(block, block, dtype=torch.bool).tril())

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, n_layer, n_head, d, block):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.h = nn.ModuleList(Block(d, n_head, block) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():  # nanoGPT's init
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") or "mlp_proj" in name else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5, help="steps not timed")
    ap.add_argument("--max-seconds", type=float, default=40.0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bf16-autocast", action="store_true",
                    help="the forward pass under torch.autocast('cpu', torch.bfloat16), as ./train --precision bf16")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    train = data[: int(0.9 * len(data))]
    model = GPT(len(chars), a.n_layer, a.n_head, a.n_embd, a.block_size)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    B, T = a.batch_size, a.block_size
    times, t_start = [], time.perf_counter()
    for step in range(a.steps):
        t0 = time.perf_counter()
        ix = torch.randint(len(train) - T - 1, (B,))
        x = torch.stack([train[i:i + T] for i in ix])
        y = torch.stack([train[i + 1:i + 1 + T] for i in ix])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16_autocast):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
        if time.perf_counter() - t_start > a.max_seconds and len(times) >= 3:
            break
    n_params = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    print("torch_threads %d" % torch.get_num_threads())
    print("params %d" % n_params)
    print("steps_timed %d" % len(times))
    print("tok_s %.1f %.1f" % (B * T / statistics.median(times), B * T / min(times)))
    print("final_loss %.4f" % loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
