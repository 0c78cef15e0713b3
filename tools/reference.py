"""An independent PyTorch implementation of the models attn.c runs, the tests' oracle, in two modes.

An attn.c model file (MODEL.bin): the module Transformer, written from FORMAT.md's computation and
Hugging Face's semantics (not from the C), with every format-3 knob. Its parameters are named like the
model file's tensors, so `Transformer(cfg).load_state_dict(...)` takes convert.py's --export-torch
output, and it is differentiable for the gradient tests.

A Hugging Face directory (config.json with model.safetensors or its shards): HFModel, written from
transformers' modeling_llama / qwen2 / qwen3 / gemma3 / gpt2 semantics: the checkpoint's own tensor
names and layout (half-split rotate_half RoPE, GPT-2's Conv1D matrices), config.json read as
transformers reads it (its defaults per model_type), float32 / bfloat16 / float16 tensors widened to
float32 by this file's own safetensors reader. It uses neither convert.py nor modelfile.py, so that
it checks them.

  reference.py MODEL|DIR --tokens 1,2,3 --logits OUT.npy    logits at every position
  reference.py MODEL|DIR --ppl-tokens 1,2,3,...             perplexity (float64)
  reference.py MODEL|DIR --tokens 1,2,3 --greedy N          greedy continuation (ids and text)
Token lists may also be given as @FILE (ids separated by commas or whitespace).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
    from attn import cli_main
    cli_main.guard()
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import outfile  # noqa: E402
from attn.reference.hf import Bad, HFModel, hf_decode  # noqa: E402
from attn.reference.model import Transformer  # noqa: E402


def load(path, dtype=torch.float32):
    """A Transformer with a model file's weights; .tok holds its tokenizer tuple. A directory is a
    Hugging Face one: an HFModel computing in dtype."""
    if os.path.isdir(path):
        return HFModel(path, dtype)
    cfg, tok, tensors = mf.read_model(path)
    m = Transformer(cfg)
    m.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
    m.tok = tok
    return m.to(dtype).eval()


def logits(model, tokens):
    """[T, vocab] numpy logits for one token sequence."""
    return model.all_logits(tokens).numpy()


def perplexity(model, tokens):
    """exp(mean -log p(token[t] | earlier tokens)) in float64. Sequences longer than the context
    are scored in windows of the context overlapping by one token, each predicting all but its first."""
    m = model.in_double()
    S, n = m.context(), len(tokens)
    nll, scored = 0.0, 0
    with torch.no_grad():
        for start in range(0, n - 1, S - 1):
            w = list(tokens[start:start + S])
            lp = torch.log_softmax(m.all_logits(w), -1)
            nll -= lp[torch.arange(len(w) - 1), torch.tensor(w[1:])].sum().item()
            scored += len(w) - 1
    return math.exp(nll / scored)


def greedy(model, tokens, n, draft=None):
    """Up to n new tokens by argmax (first index on ties), stopping at end of sequence or context;
    draft, a guess at the continuation that only an HFModel takes, makes it faster (HFModel.generate)."""
    return model.generate(tokens, n, draft) if draft else model.generate(tokens, n)


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


def attention_probabilities(model, tokens):
    """[n_layers] numpy arrays [heads, T, T]: the probabilities each layer's attention computes over
    tokens (query row, key column; 0 where masked) in model's own forward, a Transformer's or an
    HFModel's. Every softmax that forward calls is recorded as it is computed, the attention's being
    its only ones (the logits are not turned into probabilities here), so that nothing is computed
    a second way; a TorchFunctionMode sees each call without touching the modules."""
    from torch.overrides import TorchFunctionMode

    class Recorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.layers = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.Tensor.softmax, torch.softmax, F.softmax):
                self.layers.append(out.reshape(-1, *out.shape[-2:]).numpy())
            return out

    with torch.no_grad(), Recorder() as rec:
        if isinstance(model, HFModel):
            model.hidden(tokens, [])
        else:
            model(torch.tensor([list(tokens)], dtype=torch.long))
    return rec.layers


def parse_ids(s):
    if s.startswith("@"):
        s = open(s[1:]).read()
    return [int(x) for x in s.replace(",", " ").split()]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="an attn.c model file or a Hugging Face directory")
    ap.add_argument("--tokens", help="prompt token ids")
    ap.add_argument("--logits", help="write logits [T, vocab] at every prompt position to this .npy")
    ap.add_argument("--ppl-tokens", help="token ids to score")
    ap.add_argument("--greedy", type=int, help="new tokens to generate greedily after --tokens")
    ap.add_argument("--double", action="store_true", help="compute in float64")
    a = ap.parse_args(argv)
    npy = a.logits and (a.logits if a.logits.endswith(".npy") or a.logits == outfile.STDIO
                        else a.logits + ".npy")  # as np.save names it
    if npy == outfile.STDIO and (a.ppl_tokens or a.greedy):
        sys.stderr.write("reference.py: --logits -: standard output would hold the --ppl-tokens or --greedy text too\n")
        return 1
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
            text = (hf_decode(a.model, out) if isinstance(m, HFModel)
                    else decode(m.tok, out, prompt[-1] if prompt else -1))
            sys.stdout.buffer.write(text + b"\n")
    except (ValueError, OSError) as e:
        where = e.path if isinstance(e, Bad) else e.filename if isinstance(e, outfile.Refused) else a.model
        sys.stderr.write("reference.py: %s: %s\n" % (where, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
