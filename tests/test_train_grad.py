"""./train's hand-written backward pass and AdamW against PyTorch autograd on tools/reference.py.

For random small configurations of every knob the model file has (norm kind and placement,
positions, feed-forward kind, biases, tied or separate classifier, grouped-query attention,
head_dim independent of dim, partial RoPE, embed_scale), a random model file goes through one
training step of ./train --init, which dumps its batch and its gradients (--dump, see
docs/TRAINING.md). PyTorch computes the same loss in float64 and every parameter's gradient
must match: |g_c - g_torch| / |g_torch| <= 1e-4 per tensor. Then 20 AdamW steps with warm-up,
cosine decay, clipping, weight decay on matrices only and gradient accumulation must give
PyTorch's loss sequence within 1e-4 (torch.optim.AdamW, nanoGPT's parameter groups), and
the closing whole-validation-split loss must be PyTorch's over the same windows. With
--dropout, PyTorch applies the masks docs/TRAINING.md defines (drawn here in numpy from
train.c's documented hash), so the same checks prove ./train drops what it says, where
nanoGPT does, and differentiates through it.

--precision bf16 (the linear layers' products on operands rounded to bfloat16, accumulated in
float32) is checked against PyTorch's float64 model at BF16_GRAD_TOL and BF16_LOSS_TOL, the
error bfloat16 allows (see there); and, on the small models, against the float64 model whose
linear layers round their operands to bfloat16 as docs/TRAINING.md says ./train does
(bf16_linear, forward and both backward products) at BF16_ROUNDED_TOL, which fails if ./train
rounds an operand it should not, or misses one.

Run from the repository root after `make`: /usr/bin/python3 tests/test_train_grad.py [-k SUBSTRING]
Every case's configuration and weights are drawn from one generator in a fixed order, so a case
run alone (-k) checks the model it checks in a full run.
"""
import functools
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

from pycase import ROOT  # puts tools/ on the path too
from attn import modelfile as mf  # noqa: E402
import pycase  # noqa: E402
import reference  # noqa: E402

# its own directory: another suite may run this test at the same time; removed when it passes
TMP = os.path.join(ROOT, "tests", "tmp", "train_grad.%d" % os.getpid())
TRAIN = os.path.join(ROOT, "train")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")

GRAD_TOL = 1e-4
LOSS_TOL = 1e-4
# bfloat16 keeps 8 significant bits: rounding to nearest moves an operand by at most 2^-9 of
# itself (u), so each product's terms by at most 2u. A gradient here is the end of a chain of
# such products (the forward's through every layer, the backward's down to the tensor, some
# 10 to 20 rounded operands in these 1- and 2-layer models), whose errors add up, partly
# cancelling as they are independent: 16u = 2^-5 in norm per tensor bounds what this can do
# (the cases measure 0.006 to 0.018), while a wrong product (a transposed operand, a missing
# term) is off by its whole size. A loss takes one pass of the same errors: 4u.
BF16_U = 2.0 ** -9
BF16_GRAD_TOL = 16 * BF16_U
BF16_LOSS_TOL = 4 * BF16_U
# Against bf16_linear's model ./train measures 2e-7 on the small models: the same roundings,
# then float32 against float64 sums. Leaving one kind of product (wq, wo, w1, w2 or the
# classifier) unrounded measures 3e-3 to 7e-3. Between them, room for an operand that float32
# and float64 round to neighbouring bfloat16 values: rare (2^-16 of the operands, as often as
# float32's error reaches a bfloat16 halfway point), but an error of 2^-8 of it when it comes.
# A large model has enough operands to meet many (llama_b1_bf16: 5e-3), so it is checked
# against float64 alone.
BF16_ROUNDED_TOL = 1e-3
SEED = 1337  # ./train's default --seed

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
RNG_DROPOUT = 6


def mix64(z):
    """SplitMix64's finaliser, on a Python int or a numpy uint64 array."""
    if isinstance(z, int):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_for(seed, purpose, index):
    """train.c's rng_for: a stream's start as a function of (seed, purpose, index)."""
    s = (seed + GOLDEN) & M64
    a = (mix64(s) ^ (purpose * 0xD1B54A32D192ED03)) & M64
    a = (a + GOLDEN) & M64
    b = mix64(a) ^ index
    return (b + GOLDEN) & M64


def dropout_hook(p, draw, kept):
    """reference.Transformer.drop for one micro-batch: element i of a site is kept, times
    1 / (1 - p), when output i + 1 of the SplitMix64 stream at the site's key, >> 40, is at
    least p * 2^24. kept collects [kept, drawn] counts."""
    p32 = np.float32(p)
    thr = np.uint64(math.floor(float(p32) * 16777216.0 + 0.5))
    scale = float(np.float32(1) / (np.float32(1) - p32))

    def drop(site, x):
        key = np.uint64(rng_for(SEED, RNG_DROPOUT, draw + site))
        i = np.arange(1, x.numel() + 1, dtype=np.uint64)
        keep = (mix64(key + i * np.uint64(GOLDEN)) >> np.uint64(40)) >= thr
        kept[0] += int(keep.sum())
        kept[1] += keep.size
        return x * torch.from_numpy(keep.reshape(tuple(x.shape))).to(x.dtype) * scale
    return drop


def round_bf16(t):
    """float64 values through float32 (what ./train holds) to the nearest bfloat16."""
    return t.float().bfloat16().double()


class Bf16Linear(torch.autograd.Function):
    """x · wᵀ + b with x and w rounded to bfloat16, and the backward's two products likewise on
    the rounded output gradient, the bias's gradient from the unrounded one: ./train's
    --precision bf16 linear layer, in float64."""

    @staticmethod
    def forward(ctx, x, w, b):
        xr, wr = round_bf16(x), round_bf16(w)
        ctx.save_for_backward(xr, wr)
        ctx.has_bias = b is not None
        y = xr @ wr.t()
        return y + b if b is not None else y

    @staticmethod
    def backward(ctx, g):
        xr, wr = ctx.saved_tensors
        gr = round_bf16(g)
        gw = gr.reshape(-1, gr.shape[-1]).t() @ xr.reshape(-1, xr.shape[-1])
        gb = g.reshape(-1, g.shape[-1]).sum(0) if ctx.has_bias else None
        return gr @ wr, gw, gb


class bf16_linear:
    """Within it, tools/reference.py's linear layers (torch.nn.functional.linear) are Bf16Linear."""

    def __enter__(self):
        self.saved = torch.nn.functional.linear
        torch.nn.functional.linear = lambda x, w, b=None: Bf16Linear.apply(x, w, b)

    def __exit__(self, *exc):
        torch.nn.functional.linear = self.saved


def random_config(rng, kind):
    """kind 'gpt' / 'llama' are the two presets ./train builds; 'random' draws every knob."""
    n_heads = int(rng.choice([2, 3, 4]))
    n_kv = int(rng.choice([k for k in range(1, n_heads + 1) if n_heads % k == 0]))
    head_dim = int(rng.choice([4, 6, 8]))
    c = dict(dim=int(rng.choice([12, 16, 24])), hidden_dim=int(rng.choice([20, 32, 40])),
             n_layers=int(rng.choice([1, 2])), n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
             seq_len=int(rng.choice([12, 16])))
    if kind == "gpt":
        c.update(pos_kind=mf.POS_LEARNED, ffn_kind=mf.FFN_GELU_TANH, norm_kind=mf.NORM_LAYER, bias_flags=7,
                 n_kv_heads=n_heads, post_norm=0, final_norm=1, tied_classifier=1, rope_dims=0)
    elif kind == "llama":
        c.update(pos_kind=mf.POS_ROPE, ffn_kind=mf.FFN_SWIGLU, norm_kind=mf.NORM_RMS, bias_flags=0,
                 post_norm=0, final_norm=1, tied_classifier=1, rope_dims=head_dim)
    else:
        pos = int(rng.integers(0, 3))
        c.update(pos_kind=pos, ffn_kind=int(rng.integers(0, 4)), norm_kind=int(rng.integers(0, 2)),
                 post_norm=int(rng.integers(0, 2)), final_norm=int(rng.integers(0, 2)),
                 bias_flags=int(rng.integers(0, 8)), tied_classifier=int(rng.integers(0, 2)),
                 embed_scale=float(rng.choice([1.0, 2.5])),
                 rope_dims=int(rng.choice([2, head_dim])) if pos == mf.POS_ROPE else 0,
                 rope_theta=float(rng.choice([10000.0, 500.0])))
        if pos == mf.POS_SINUSOID and c["dim"] % 2:
            c["dim"] += 1
    return c


def random_tensors(rng, c, wstd=0.3):
    t = {}
    for name, shape in mf.tensor_specs(mf.complete_config(c)):
        leaf = name.split(".")[-1]
        if leaf.endswith("norm_w"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            a = 0.1 * rng.standard_normal(shape)
        else:
            a = wstd * rng.standard_normal(shape)
        t[name] = a.astype(np.float32)
    return t


def char_tokenizer(text):
    """A character vocabulary blob (kind 0, no flags): what ./train learns by default."""
    pieces = sorted(set(text.encode()))
    return mf.pack_tokenizer([bytes([b]) for b in pieces], [0.0] * len(pieces)), len(pieces)


def run_train(model, corpus, out, extra, threads=None):
    cmd = [TRAIN, "--init", model, "-d", corpus, "-o", out, "--dump", out, "--eval-interval", "1000000",
           "--eval-iters", "1"] + extra
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


# A build without AVX512_BF16 trains --precision bf16 in float32, and says so
# (model/bf16_gemm.h's BF16_FAST): its gradients are then float32's.
BF16_NO_SPEED = "note: --precision bf16 brings no speed here"


def effective_precision(precision, printed):
    return "f32" if precision == "bf16" and BF16_NO_SPEED in printed else precision


def read_grads(path):
    data = open(path, "rb").read()
    out, off = {}, 0
    while off < len(data):
        name = data[off:off + 40].split(b"\0")[0].decode()
        n = int(np.frombuffer(data, np.uint64, 1, off + 40)[0])
        out[name] = np.frombuffer(data, np.float32, n, off + 48).astype(np.float64)
        off += 48 + 4 * n
    return out


def read_batches(path, B, T):
    ids = np.fromfile(path, dtype=np.int32).reshape(-1, 2, B, T)
    return torch.from_numpy(ids[:, 0].astype(np.int64)), torch.from_numpy(ids[:, 1].astype(np.int64))


def read_losses(csv):
    rows = [line.split(",") for line in open(csv).read().splitlines()[1:]]
    return [float(r[1]) for r in rows if r[1]]  # the row of step 0 has its evaluation alone


def setup(name, c, t, text):
    """The model file (config c with text's character vocabulary, tensors t) and the corpus."""
    os.makedirs(TMP, exist_ok=True)
    corpus = os.path.join(TMP, name + ".txt")
    with open(corpus, "w") as f:
        f.write(text)
    model = os.path.join(TMP, name + ".bin")
    mf.write_model(model, c, (char_tokenizer(text)[0], mf.TOK_SENTENCEPIECE, 0, -1, -1), t)
    return model, corpus


def loss_of(m, x, y):
    logits = m(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def compare_gradients(label, ours, c_loss, model, x, y, dropout, tol, loss_tol, noise):
    """One step's loss and gradients against the float64 model: fails, worst (error, tensor),
    torch's loss, the dropout masks' [kept, drawn]. noise: the error, as a fraction of the
    whole gradient's norm, that a gradient zero in exact arithmetic may show."""
    m = reference.load(model, torch.float64)
    kept = [0, 0]
    if dropout:
        m.drop = dropout_hook(dropout, 0, kept)
    loss = loss_of(m, x, y)
    loss.backward()
    theirs = {n: p.grad.detach().numpy().ravel() for n, p in m.named_parameters()}
    if set(ours) != set(theirs):
        return ["%s: tensors differ: ours %s, torch %s" % (label, sorted(set(ours) - set(theirs)),
                                                           sorted(set(theirs) - set(ours)))], (0.0, ""), 0.0, kept
    fails, worst = [], (0.0, "")
    if abs(c_loss - loss.item()) > loss_tol:
        fails.append("%s: loss %.7f, torch %.7f" % (label, c_loss, loss.item()))
    total = math.sqrt(sum(np.sum(g * g) for g in theirs.values()))
    for n in theirs:
        ref = np.linalg.norm(theirs[n])
        err = np.linalg.norm(ours[n] - theirs[n])
        if ref <= 1e-9 * total:
            # Exactly zero in exact arithmetic (the key bias without RoPE shifts every score of
            # a row equally): ours must be rounding noise, far below the other gradients.
            if not err <= noise * total:
                fails.append("%s: %s gradient should vanish but has norm %.3g" % (label, n, err))
            continue
        rel = err / ref
        worst = max(worst, (rel, n))
        if not rel <= tol:
            fails.append("%s: %s gradient relative error %.3g" % (label, n, rel))
    return fails, worst, loss.item(), kept


def check_gradients(name, c, t, text, dropout=0.0, B=3, precision="f32", rounded=True):
    """B = 1 with 2 threads and a sequence of 1 GFLOP or more takes ./train's path where the
    threads share each product (model_step)."""
    model, corpus = setup(name, c, t, text)
    out = os.path.join(TMP, name + ".out.bin")
    T = c["seq_len"]
    printed = run_train(model, corpus, out, ["--max-iters", "1", "--batch-size", str(B), "--block-size", str(T),
                                             "--grad-clip", "0", "--dropout", str(dropout), "--precision", precision],
                        threads=2 if B == 1 else None)
    precision = effective_precision(precision, printed)
    x, y = read_batches(out + ".batches", B, T)
    ours = read_grads(out + ".grads")
    c_loss = read_losses(out + ".csv")[0]
    if precision == "bf16":
        fails, worst, loss, kept = compare_gradients(name + " vs float64", ours, c_loss, model, x[0], y[0], dropout,
                                                     BF16_GRAD_TOL, BF16_LOSS_TOL, BF16_U)
        if rounded:
            with bf16_linear():
                fails2, worst2, _, _ = compare_gradients(name + " vs rounded float64", ours, c_loss, model, x[0],
                                                         y[0], dropout, BF16_ROUNDED_TOL, 1e-5, 1e-6)
            fails += fails2
    else:
        fails, worst, loss, kept = compare_gradients(name, ours, c_loss, model, x[0], y[0], dropout, GRAD_TOL, 1e-5,
                                                     1e-6)
    if dropout:
        # the masks' keep rate, within 5 standard deviations of 1 - p
        rate, sd = kept[0] / kept[1], math.sqrt(dropout * (1 - dropout) / kept[1])
        if not abs(rate - (1 - dropout)) <= 5 * sd:
            fails.append("%s: dropout %.2f kept %.4f of %d elements" % (name, dropout, rate, kept[1]))
        name += " p=%.2f kept %.3f" % (dropout, rate)
    more = "; bfloat16-rounded float64: %.2g (%s)" % worst2 if precision == "bf16" and rounded else ""
    print("  %-8s %-70s loss %.5f, worst gradient error %.2g (%s)%s" % (
        name, knobs(c), loss, worst[0], worst[1], more))
    return fails


def get_lr(it, lr, min_lr, warmup, decay):
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


ADAMW = dict(B=2, accum=2, lr=3e-3, min_lr=3e-4, warmup=5, wd=0.1, b1=0.9, b2=0.95, clip=1.0)


def torch_adamw(model, c, x, y, steps, dropout):
    """The loss sequence of PyTorch's AdamW on the float64 model, as check_adamw's run."""
    accum, lr, min_lr, warmup, wd = ADAMW["accum"], ADAMW["lr"], ADAMW["min_lr"], ADAMW["warmup"], ADAMW["wd"]
    b1, b2, clip = ADAMW["b1"], ADAMW["b2"], ADAMW["clip"]
    m = reference.load(model, torch.float64).train()
    decay = [p for p in m.parameters() if p.dim() >= 2]
    no_decay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(b1, b2), eps=1e-8)
    losses = []
    for it in range(steps):
        for g in opt.param_groups:
            g["lr"] = get_lr(it, lr, min_lr, warmup, steps)
        total = 0.0
        for k in range(accum):
            if dropout:
                m.drop = dropout_hook(dropout, (it * accum + k) * (1 + 3 * c["n_layers"]), [0, 0])
            loss = loss_of(m, x[it * accum + k], y[it * accum + k]) / accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(m.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
    return losses


def check_adamw(name, c, t, text, steps=20, dropout=0.0, precision="f32"):
    """With bf16 at BF16_LOSS_TOL: 20 steps meet enough operands that float32 and float64 round
    apart (BF16_ROUNDED_TOL) to leave the model of bf16_linear no closer than float64's."""
    model, corpus = setup(name, c, t, text)
    out = os.path.join(TMP, name + ".out.bin")
    B, T, accum = ADAMW["B"], c["seq_len"], ADAMW["accum"]
    printed = run_train(model, corpus, out, [
        "--max-iters", str(steps), "--batch-size", str(B), "--block-size", str(T), "--grad-accum", str(accum),
        "--lr", str(ADAMW["lr"]), "--min-lr", str(ADAMW["min_lr"]), "--warmup-iters", str(ADAMW["warmup"]),
        "--weight-decay", str(ADAMW["wd"]), "--beta1", str(ADAMW["b1"]), "--beta2", str(ADAMW["b2"]),
        "--grad-clip", str(ADAMW["clip"]), "--dropout", str(dropout), "--precision", precision])
    precision = effective_precision(precision, printed)
    x, y = read_batches(out + ".batches", B, T)
    ours = read_losses(out + ".csv")
    losses = torch_adamw(model, c, x, y, steps, dropout)
    tol = BF16_LOSS_TOL if precision == "bf16" else LOSS_TOL
    diff = max(abs(a - b) for a, b in zip(ours, losses))
    if dropout:
        name += " p=%.2f" % dropout
    print("  %-8s %-70s losses %.4f -> %.4f, max difference %.2g" % (name, knobs(c), losses[0], losses[-1], diff))
    if len(ours) != steps or not diff <= tol:
        return ["%s: AdamW loss sequence differs by %.3g (ours %s, torch %s)" % (
            name, diff, ["%.5f" % v for v in ours], ["%.5f" % v for v in losses])]
    return []


def check_full_loss(name, c, t, text):
    """The closing 'val loss over the whole validation split': every window, the last batch
    partly filled (the window count is not a multiple of the batch), and the tail after the last
    whole window in a window of its own, against PyTorch."""
    model, corpus = setup(name, c, t, text)
    out = os.path.join(TMP, name + ".out.bin")
    pieces = sorted(set(text.encode()))
    ids = [pieces.index(b) for b in text.encode()]
    val = ids[int(len(ids) * 0.9):]
    T = c["seq_len"]
    windows = (len(val) - 1) // T
    B = next(b for b in (4, 5, 7) if windows % b)
    r = subprocess.run([TRAIN, "--init", model, "-d", corpus, "-o", out, "--max-iters", "0", "--batch-size", str(B),
                        "--block-size", str(T)], capture_output=True, text=True)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()
    try:
        ours = float(last.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return ["%s: no closing loss line: %s" % (name, last)]
    tail = len(val) - 1 - windows * T
    x = torch.tensor([val[i * T:(i + 1) * T] for i in range(windows)])
    y = torch.tensor([val[i * T + 1:(i + 1) * T + 1] for i in range(windows)])
    with torch.no_grad():
        m = reference.load(model, torch.float64)
        whole = loss_of(m, x, y).item() * windows * T
        tail_nll = loss_of(m, torch.tensor([val[windows * T:-1]]), torch.tensor([val[windows * T + 1:]])).item() * tail
        theirs = (whole + tail_nll) / (windows * T + tail)
    counted = "(%d tokens)" % (windows * T + tail)
    print("  %-8s %d windows in batches of %d and a tail of %d: loss %.4f, torch %.6f" % (name, windows, B, tail,
                                                                                         ours, theirs))
    if windows % B == 0 or tail == 0 or counted not in last or not abs(ours - theirs) <= 1e-4 + 5e-5:
        return ["%s: whole-split loss %.4f, torch %.6f (%d windows, a tail of %d): %s" % (name, ours, theirs, windows,
                                                                                        tail, last)]
    return []


def knobs(c):
    keys = ["n_layers", "dim", "n_heads", "n_kv_heads", "head_dim", "pos_kind", "ffn_kind", "norm_kind",
            "post_norm", "final_norm", "bias_flags", "tied_classifier", "rope_dims"]
    return " ".join("%s=%s" % (k.replace("_", "")[:6], c.get(k, "-")) for k in keys if k in c)


def b1_sized(c, kind):
    """One sequence large enough that 2 threads share each product."""
    c.update(dim=256, n_layers=2, n_heads=4, n_kv_heads=4 if kind == "gpt" else 2, head_dim=64, seq_len=128,
             hidden_dim=1024 if kind == "gpt" else 704, rope_dims=0 if kind == "gpt" else 64)


# (name, configuration kind, change to the drawn configuration, check, its arguments, corpus
# characters, weight scale), in the order their models are drawn
PLAN = [(name, kind, None, check_gradients, {}, 3000, 0.3)
        for name, kind in [("gpt", "gpt"), ("llama", "llama")] + [("rand%d" % i, "random") for i in range(8)]]
PLAN += [  # with dropout
    ("gpt_drop", "gpt", None, check_gradients, {"dropout": 0.1}, 3000, 0.3),
    ("llama_drop", "llama", None, check_gradients, {"dropout": 0.3}, 3000, 0.3),
    ("post_drop", "random", lambda c: c.update(post_norm=1), check_gradients, {"dropout": 0.2}, 3000, 0.3),
    # head_dim past 16: the attention's vector columns, its scalar ones, key blocks cut short
    ("gpt_hd20", "gpt", lambda c: c.update(head_dim=20, seq_len=37, rope_dims=0), check_gradients, {}, 3000, 0.3),
    ("llama_hd32", "llama", lambda c: c.update(head_dim=32, seq_len=50, rope_dims=32), check_gradients,
     {"dropout": 0.1}, 3000, 0.3)]
PLAN += [(name, kind, functools.partial(b1_sized, kind=kind), check_gradients, {"dropout": 0.1, "B": 1}, 3000,
          0.3 * math.sqrt(16 / 256)) for name, kind in [("gpt_b1", "gpt"), ("llama_b1", "llama")]]
PLAN += [(name + "_adam", kind, None, check_adamw, {"dropout": p}, 3000, 0.3)
         for name, kind, p in [("gpt", "gpt", 0.0), ("llama", "llama", 0.0), ("rand", "random", 0.0),
                               ("drop", "gpt", 0.2)]]
PLAN += [(name, kind, None, check_full_loss, {}, 2900, 0.3) for name, kind in [("gpt_full", "gpt"),
                                                                              ("llama_full", "llama")]]
PLAN += [  # --precision bf16
    ("gpt_bf16", "gpt", None, check_gradients, {"precision": "bf16"}, 3000, 0.3),
    ("llama_bf16", "llama", None, check_gradients, {"precision": "bf16", "dropout": 0.1}, 3000, 0.3),
    ("rand_bf16", "random", None, check_gradients, {"precision": "bf16"}, 3000, 0.3),
    ("llama_b1_bf16", "llama", functools.partial(b1_sized, kind="llama"), check_gradients,
     {"precision": "bf16", "B": 1, "rounded": False}, 3000, 0.3 * math.sqrt(16 / 256)),
    ("gpt_adam_bf16", "gpt", None, check_adamw, {"precision": "bf16"}, 3000, 0.3),
    ("llama_adam_bf16", "llama", None, check_adamw, {"precision": "bf16", "dropout": 0.2}, 3000, 0.3)]

PLAN += [  # block sizes from TRAIN_TILED_MIN_T (training/acts.h) on: the tiled attention's forward and backward,
    # with the last query block cut short (300), grouped queries, head_dim past 16, and B = 1's shared products
    ("gpt_t256", "gpt", lambda c: c.update(seq_len=256), check_gradients, {}, 3000, 0.3),
    ("llama_t300", "llama", lambda c: c.update(n_heads=4, n_kv_heads=2, head_dim=20, rope_dims=20, seq_len=300),
     check_gradients, {}, 4000, 0.3),
    ("rand_t256", "random", lambda c: c.update(seq_len=256), check_gradients, {}, 3000, 0.3),
    ("llama_b1_t256", "llama", lambda c: (b1_sized(c, "llama"), c.update(seq_len=256)), check_gradients, {"B": 1},
     3000, 0.3 * math.sqrt(16 / 256))]


@functools.lru_cache(None)
def corpus(n):
    return open(CORPUS, encoding="utf-8").read()[:n]


@functools.lru_cache(None)
def drawn():
    """name -> (configuration, tensors), every case's drawn in PLAN's order from one generator."""
    rng = np.random.default_rng(20261122)
    out = {}
    for name, kind, change, _, _, chars, wstd in PLAN:
        c = random_config(rng, kind)
        if change:
            change(c)
        c["vocab_size"] = char_tokenizer(corpus(chars))[1]
        out[name] = c, random_tensors(rng, c, wstd)
    return out


case = pycase.Cases()


def plan_case(name, check, kwargs, chars):
    def run():
        c, t = drawn()[name]
        fails = check(name, c, t, corpus(chars), **kwargs)
        assert not fails, "; ".join(fails)
    case.add(name, run)


for name, _, _, check, kwargs, chars, _ in PLAN:
    plan_case(name, check, kwargs, chars)


def main():
    if not os.path.exists(TRAIN):
        print("no ./train: build it first (make)")
        print("0 passed, 1 failed")
        return 1
    return case.run(sys.argv[1:])


if __name__ == "__main__":
    rc = main()
    if rc == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(rc)
