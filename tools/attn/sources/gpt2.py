"""GPT-2's tensor naming and config, which nanoGPT checkpoints and Hugging Face gpt2
directories share."""

import numpy as np

from attn import modelfile as mf


def gpt2_cfg(d, hidden, L, H, V, S, ffn_kind, eps, bias):
    return dict(dim=d, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=H, head_dim=d // H,
                vocab_size=V, seq_len=S, pos_kind=mf.POS_LEARNED, ffn_kind=ffn_kind,
                norm_kind=mf.NORM_LAYER, norm_eps=eps, final_norm=1,
                bias_flags=7 if bias else 0, tied_classifier=1)


def gpt2_dims(d, V, S, S_field, hidden, hidden_why, names=str):
    """Tensors' dims for GPT-2 naming: d, T (q, k and v together), h, V and S; names(key) is how
    messages name a config key."""
    return {"d": (d, "%s %d" % (names("n_embd"), d)), "T": (3 * d, "%s %d" % (names("n_embd"), d)),
            "h": (hidden, hidden_why), "V": (V, "%s %d" % (names("vocab_size"), V)), "S": (S, "%s %d" % (S_field, S))}


# GPT-2's causal-mask buffers, which older checkpoints save with the weights
GPT2_BUFFERS = ("attn.bias", "attn.masked_bias")


def gpt2_tensors(L, tn, transpose, bias):
    """GPT-2 naming (HF with its input-major Conv1D when transpose, nanoGPT's nn.Linear otherwise)."""
    d = tn.dims["d"][0]

    def w(name, shape):  # a matrix, shape as nn.Linear has it: (out, in)
        return tn.take(name, shape[::-1]).view(np.transpose) if transpose else tn.take(name, shape)

    def thirds(a):  # q, k and v of GPT-2's c_attn, the rows of a
        return (a.view(lambda x, k=k: x[k * d:(k + 1) * d]) for k in range(3))

    def b(name, shape):
        return tn.take(name, shape) if bias else np.zeros(tn.dims[shape][0], np.float32)
    t = {"tok_embedding": tn.take("wte.weight", "Vd"), "pos_embedding": tn.take("wpe.weight", "Sd"),
         "final_norm_w": tn.take("ln_f.weight", "d"), "final_norm_b": b("ln_f.bias", "d")}
    for i in range(L):
        p, q = "h.%d." % i, "layers.%d." % i
        t[q + "wq"], t[q + "wk"], t[q + "wv"] = thirds(w(p + "attn.c_attn.weight", "Td"))
        if bias:
            t[q + "bq"], t[q + "bk"], t[q + "bv"] = thirds(tn.take(p + "attn.c_attn.bias", "T"))
            t[q + "bo"] = tn.take(p + "attn.c_proj.bias", "d")
            t[q + "b1"] = tn.take(p + "mlp.c_fc.bias", "h")
            t[q + "b2"] = tn.take(p + "mlp.c_proj.bias", "d")
        t[q + "wo"] = w(p + "attn.c_proj.weight", "dd")
        t[q + "w1"] = w(p + "mlp.c_fc.weight", "hd")
        t[q + "w2"] = w(p + "mlp.c_proj.weight", "dh")
        t[q + "attn_norm_w"], t[q + "attn_norm_b"] = tn.take(p + "ln_1.weight", "d"), b(p + "ln_1.bias", "d")
        t[q + "ffn_norm_w"], t[q + "ffn_norm_b"] = tn.take(p + "ln_2.weight", "d"), b(p + "ln_2.bias", "d")
    return t


GPT2_ACTIVATIONS = {"gelu_new": mf.FFN_GELU_TANH, "gelu_pytorch_tanh": mf.FFN_GELU_TANH,
                    "gelu_fast": mf.FFN_GELU_TANH, "gelu": mf.FFN_GELU_ERF, "relu": mf.FFN_RELU}
GELU_TANH_NAMES = tuple(k for k, v in GPT2_ACTIVATIONS.items() if v == mf.FFN_GELU_TANH)
