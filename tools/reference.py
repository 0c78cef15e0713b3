"""An independent PyTorch implementation of the attn.c model family, the tests' oracle.

Written from the papers and Hugging Face's semantics (FORMAT.md "The computation"), not
from the C. Parameters are named like the model file's tensors, so
`Transformer(cfg).load_state_dict(...)` takes convert.py's --export-torch output and the
module is differentiable for gradient tests.

  reference.py MODEL --tokens 1,2,3 --logits OUT.npy    logits at every position
  reference.py MODEL --ppl-tokens 1,2,3,...             perplexity (float64)
  reference.py MODEL --tokens 1,2,3 --greedy N          greedy continuation (ids and text)
Token lists may also be given as @FILE (ids separated by commas or whitespace).
"""
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modelfile as mf  # noqa: E402
import outfile  # noqa: E402


class Block(nn.Module):
    """One layer's parameters (attn_norm_w, wq, ...), registered by Transformer."""


class Transformer(nn.Module):
    # Dropout, for the training tests: None, or drop(site, x) -> x with a mask applied, at
    # nanoGPT's places, the sites numbered as docs/TRAINING.md does: the embeddings' sum 0;
    # in layer l the attention probabilities 3l + 1, the attention's output 3l + 2 and the
    # feed-forward's output 3l + 3, before their residual adds.
    drop = None

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

    def norm(self, x, w, b):
        c = self.cfg
        if c["norm_kind"] == mf.NORM_LAYER:
            return F.layer_norm(x, (x.shape[-1],), w, b, c["norm_eps"])
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["norm_eps"]) * w

    def rope(self, x):
        """Rotate interleaved pairs (2i, 2i+1) of the first rope_dims of each head (Meta's Llama)."""
        c = self.cfg
        r, T = c["rope_dims"], x.shape[1]
        inv = c["rope_theta"] ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
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
        q = F.linear(x, L.wq, getattr(L, "bq", None)).view(B, T, H, hd)
        k = F.linear(x, L.wk, getattr(L, "bk", None)).view(B, T, KV, hd)
        v = F.linear(x, L.wv, getattr(L, "bv", None)).view(B, T, KV, hd)
        if c["pos_kind"] == mf.POS_ROPE:
            q, k = self.rope(q), self.rope(k)
        # query head h reads kv head h // (H / KV)
        k = k.repeat_interleave(H // KV, dim=2)
        v = v.repeat_interleave(H // KV, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # B, H, T, hd
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        y = (self.dropout(3 * layer + 1, s.softmax(-1)) @ v).transpose(1, 2).reshape(B, T, H * hd)
        return F.linear(y, L.wo, getattr(L, "bo", None))

    def ffn(self, L, x):
        kind = self.cfg["ffn_kind"]
        h = F.linear(x, L.w1, getattr(L, "b1", None))
        if kind == mf.FFN_SWIGLU:
            h = F.silu(h) * F.linear(x, L.w3, getattr(L, "b3", None))
        elif kind == mf.FFN_GELU_TANH:
            h = F.gelu(h, approximate="tanh")
        elif kind == mf.FFN_GELU_ERF:
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return F.linear(h, L.w2, getattr(L, "b2", None))

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
        for l, L in enumerate(self.layers):
            na = lambda t: self.norm(t, L.attn_norm_w, getattr(L, "attn_norm_b", None))  # noqa: E731
            nf = lambda t: self.norm(t, L.ffn_norm_w, getattr(L, "ffn_norm_b", None))  # noqa: E731
            da = lambda t: self.dropout(3 * l + 2, t)  # noqa: E731
            df = lambda t: self.dropout(3 * l + 3, t)  # noqa: E731
            if c["post_norm"]:
                x = na(x + da(self.attention(L, x, l)))
                x = nf(x + df(self.ffn(L, x)))
            else:
                x = x + da(self.attention(L, na(x), l))
                x = x + df(self.ffn(L, nf(x)))
        if c["final_norm"]:
            x = self.norm(x, self.final_norm_w, getattr(self, "final_norm_b", None))
        return F.linear(x, self.tok_embedding if c["tied_classifier"] else self.classifier)


def load(path, dtype=torch.float32):
    """A Transformer with a model file's weights; .tok holds its tokenizer tuple."""
    cfg, tok, tensors = mf.read_model(path)
    m = Transformer(cfg)
    m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
    m.tok = tok
    return m.to(dtype).eval()


def logits(model, tokens):
    """[T, vocab] numpy logits for one token sequence."""
    with torch.no_grad():
        return model(torch.tensor([list(tokens)], dtype=torch.long))[0].numpy()


def perplexity(model, tokens):
    """exp(mean -log p(token[t] | earlier tokens)) in float64. Sequences longer than the context
    are scored in seq_len windows overlapping by one token, each predicting all but its first."""
    m = copy.deepcopy(model).double()
    S, n = m.cfg["seq_len"], len(tokens)
    nll, scored = 0.0, 0
    with torch.no_grad():
        for start in range(0, n - 1, S - 1):
            w = list(tokens[start:start + S])
            lp = torch.log_softmax(m(torch.tensor([w], dtype=torch.long))[0], -1)
            nll -= lp[torch.arange(len(w) - 1), torch.tensor(w[1:])].sum().item()
            scored += len(w) - 1
    return math.exp(nll / scored)


def stops(model, t):
    _, _, flags, bos, eos = model.tok
    return t == eos or (flags & mf.TOKF_BOS_STOPS and t == bos)


def greedy(model, tokens, n):
    """Up to n new tokens by argmax (first index on ties), stopping at end of sequence or context."""
    toks = list(tokens)
    out = []
    with torch.no_grad():
        while len(out) < n and len(toks) < model.cfg["seq_len"]:
            t = int(model(torch.tensor([toks], dtype=torch.long))[0, -1].argmax())
            if stops(model, t):
                break
            toks.append(t)
            out.append(t)
    return out


def decode(tok, ids, prev):
    """The bytes ids stand for, following token prev, as llama2.c decodes: control tokens are
    empty, a piece's leading space after BOS is dropped, <0xNN> is the byte. What a terminal
    should be shown of them is the caller's business."""
    blob, kind, flags, bos, eos = tok
    pieces = mf.parse_tokenizer(blob)[0]
    out = []
    for t in ids:
        p = pieces[t]
        if t in (bos, eos):
            p = b""
        if kind == mf.TOK_SENTENCEPIECE:
            if prev == bos and p.startswith(b" "):
                p = p[1:]
            if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
                p = bytes([int(p[3:5], 16)])
        out.append(p)
        prev = t
    return b"".join(out)


def encode(tok, text):
    """llama2.c's SentencePiece-style encoding (tok_kind 0): BOS, the dummy-prefix space, one
    piece per UTF-8 character, then repeatedly the adjacent merge with the best score (first on
    ties), <0xNN> pieces for characters without one."""
    blob, kind, flags, bos, _ = tok
    if kind != mf.TOK_SENTENCEPIECE:
        raise ValueError("encode() implements tok_kind 0 only")
    pieces, scores, _ = mf.parse_tokenizer(blob)
    ids = {}
    for i, p in enumerate(pieces):
        ids.setdefault(p, i)
    data = text.encode("utf-8")
    out = [bos] if flags & mf.TOKF_ADD_BOS and bos >= 0 else []
    seq = []
    if data and flags & mf.TOKF_DUMMY_PREFIX:
        seq.append(ids[b" "])
    for ch in text:
        b = ch.encode("utf-8")
        if b in ids:
            seq.append(ids[b])
            continue
        for byte in b:  # byte fallback, as llama2.c's <0xNN> pieces
            p = b"<0x%02X>" % byte
            if p not in ids:
                raise ValueError("character %r has no piece and no byte fallback" % ch)
            seq.append(ids[p])
    while True:
        best, at = None, -1
        for i in range(len(seq) - 1):
            j = ids.get(pieces[seq[i]] + pieces[seq[i + 1]])
            if j is not None and (best is None or scores[j] > scores[best]):
                best, at = j, i
        if best is None:
            return out + seq
        seq[at:at + 2] = [best]


def parse_ids(s):
    if s.startswith("@"):
        s = open(s[1:]).read()
    return [int(x) for x in s.replace(",", " ").split()]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="prompt token ids")
    ap.add_argument("--logits", help="write logits [T, vocab] at every prompt position to this .npy")
    ap.add_argument("--ppl-tokens", help="token ids to score")
    ap.add_argument("--greedy", type=int, help="new tokens to generate greedily after --tokens")
    ap.add_argument("--double", action="store_true", help="compute in float64")
    a = ap.parse_args(argv)
    npy = a.logits and (a.logits if a.logits.endswith(".npy") else a.logits + ".npy")  # as np.save names it
    try:
        if npy:
            outfile.check(npy)  # before any work
        m = load(a.model, torch.float64 if a.double else torch.float32)
        if npy:
            with outfile.replacing(npy) as f:
                np.save(f, logits(m, parse_ids(a.tokens)))
        if a.ppl_tokens:
            print("perplexity: %.9g" % perplexity(m, parse_ids(a.ppl_tokens)))
        if a.greedy:
            prompt = parse_ids(a.tokens)
            out = greedy(m, prompt, a.greedy)
            print(",".join(map(str, out)))
            sys.stdout.flush()
            sys.stdout.buffer.write(decode(m.tok, out, prompt[-1] if prompt else -1) + b"\n")
    except (ValueError, OSError) as e:
        where = e.filename if isinstance(e, outfile.Refused) else a.model
        sys.stderr.write("reference.py: %s: %s\n" % (where, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
