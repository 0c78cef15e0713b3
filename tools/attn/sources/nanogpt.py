"""nanoGPT's ckpt.pt (given loaded by torchfile.read_torch)."""


from attn import modelfile as mf
from attn.errors import Bad
from attn.sources.gpt2 import GPT2_BUFFERS, gpt2_cfg, gpt2_dims, gpt2_tensors
from attn.tensors import Source, Tensors, classifier, known_args, strip_prefix

# nanoGPT model.py's GPTConfig (dropout acts only in training)
NANOGPT_ARGS = ("block_size", "vocab_size", "n_layer", "n_head", "n_embd", "dropout", "bias")


# ---- nanoGPT and this tool's own export ----

def read_nanogpt(path, ck):
    a = ck["model_args"]
    known_args(path, a, NANOGPT_ARGS, "nanoGPT's GPTConfig")
    sd = strip_prefix(strip_prefix(ck["model"], "_orig_mod."), "transformer.")
    try:
        L, H, d, S, V = (int(a[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"))
    except KeyError as e:
        raise Bad(path, "model_args lacks %s" % e)
    if d % H:
        raise Bad(path, "n_head %d does not divide n_embd %d" % (H, d))
    bias = bool(a.get("bias", True))
    tn = Tensors(path, sd, layers=("h.%d.", L, "n_layer %d in model_args" % L), skip=GPT2_BUFFERS)
    hidden = tn.shape("h.0.mlp.c_fc.weight")[0]  # 4 x n_embd in nanoGPT's model.py, but forks vary it
    tn.dims = gpt2_dims(d, V, S, "block_size", hidden, "h.0.mlp.c_fc.weight's %d rows" % hidden)
    t = gpt2_tensors(L, tn, transpose=False, bias=bias)
    cfg = gpt2_cfg(d, hidden, L, H, V, S, ffn_kind=mf.FFN_GELU_ERF, eps=1e-5, bias=bias)
    cfg["tied_classifier"] = int(classifier(tn, "lm_head.weight", t))
    return Source(cfg, t, "nanoGPT checkpoint", skipped=tn.finish("bias %s in model_args" % bias),
                  tok_hint=nanogpt_tokenizer_hint(ck, V))


def nanogpt_tokenizer_hint(ck, V):
    """Where nanoGPT's sample.py finds the vocabulary: the dataset's meta.pkl (a character-level
    one), else GPT-2's, which has 50257 tokens (50304 in a checkpoint, padded for speed)."""
    config = ck.get("config")
    dataset = config.get("dataset") if isinstance(config, dict) else None
    meta = "data/%s/meta.pkl" % dataset if dataset else "data/DATASET/meta.pkl"
    if V in (50257, 50304):
        return "GPT-2's vocab.json with merges.txt beside it, or nanoGPT's %s if its dataset has one" % meta
    return "the meta.pkl of the dataset it was trained on, nanoGPT's %s" % meta
