"""An attn.c model file as a Hugging Face directory (convert.py MODEL.bin --export-hf DIR).

DIR gets config.json, generation_config.json, model.safetensors, tokenizer.json and
tokenizer_config.json, which transformers loads as they are (AutoModelForCausalLM,
AutoTokenizer) and convert.py reads back into the same model, and attn_export.json, the mark
by which --force knows a folder it may replace. The folder is written beside DIR and renamed
into place (outfile.replacing_dir). Which Hugging Face architecture a file is follows from its
knobs alone:

  gpt2          learned positions, LayerNorm, GELU or ReLU, one head per kv head (missing
                biases are written as zeros, which is what they compute)
  llama         RoPE, RMSNorm, SwiGLU; attention_bias (q, k, v, o), mlp_bias; rope_scaling
  qwen2         the same with q, k and v biases only
  qwen3         llama's knobs with a norm on each head of q and k
  gemma3_text   (1 + w) norms, four per block, GeGLU, the embedding x sqrt(dim),
                query_pre_attn_scalar, sliding-window layers with their own RoPE base

Anything else (post-norm blocks, sinusoidal positions, partial rotary, ...) has no Hugging
Face equivalent and is refused, naming the knob. Matrices stay as stored, float32, bfloat16
or float16 (norms, biases and positions are float32, as in the model file); Q8_0 matrices are
dequantised to float32. The q and k rows go back from FORMAT.md's interleaved RoPE pairs to
Hugging Face's half-split order.

The chat section's template text goes back into tokenizer_config.json's chat_template, byte for
byte (tools/attn/chat_template.py's for_export: a family stored without its text writes none,
with a note).

The tokenizer becomes a tokenizer.json that encodes as the model file's does: byte-level BPE
with the family's split, or SentencePiece-style BPE with byte fallback. A blob without merges
(llama2.c's tokenizer.bin, what ./train learns) merges by piece score; Hugging Face's BPE
merges by rank, so every way of making a piece from two pieces becomes a merge, ranked by the
score of what it makes.
"""
import collections
import json
import os
import sys

import numpy as np

from attn import chat_template
from attn import generation
from attn import modelfile as mf
from attn import storage
from attn import outfile
from attn import safetensors
from attn.archs import FAMILIES
from attn.errors import Bad, listing
from attn.tokenizer_blob import bytes_to_unicode, SP_SPACE as SPACE, SPLIT_REGEXES, TOKA_SPECIAL, TOKA_STOP

# MARKER says a folder is an export, which --force may replace; a downloaded checkpoint with the same files is not.
MARKER = "attn_export.json"
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MARKER)
NO_MERGE_SCORE = -1e10  # kind-0 encoding merges only into pieces scoring above this (tokenizer/internal.h)

def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def regex_then_bytes(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}, byte_level(False)]}


# tok_flags bits 8..11: the pre-tokenizer of each byte-level split
PRE_TOKENIZERS = {
    mf.TOK_PRE_GPT2: byte_level(True),
    **{split: regex_then_bytes(regex) for regex, split in SPLIT_REGEXES.items()},
    mf.TOK_PRE_DIGITS_GPT2: {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, byte_level(True)]},
}
GPT2_ACTIVATIONS = {mf.FFN_GELU_TANH: "gelu_new", mf.FFN_GELU_ERF: "gelu", mf.FFN_RELU: "relu"}
FFN_NAMES = {mf.FFN_SWIGLU: "SwiGLU", mf.FFN_GELU_TANH: "GELU (tanh)", mf.FFN_GELU_ERF: "GELU (erf)",
             mf.FFN_RELU: "ReLU", mf.FFN_GEGLU_TANH: "GeGLU"}
TORCH_DTYPES = {storage.WEIGHTS_F32: "float32", storage.WEIGHTS_Q8_0: "float32", storage.WEIGHTS_BF16: "bfloat16",
                storage.WEIGHTS_F16: "float16", storage.WEIGHTS_PER_MATRIX: "float32"}


class NoEquivalent(Exception):
    """A knob no Hugging Face architecture this tool writes has."""


def f32(x):
    """A float32 header value as the shortest decimal that reads back as the same float32."""
    x = float(x)
    return next((float(s) for s in ("%.*g" % (d, x) for d in range(1, 10)) if np.float32(float(s)) == np.float32(x)), x)


# ---- which architecture ----

def family(c):
    """The Hugging Face model_type of a completed config; NoEquivalent naming what has none."""
    def no(why):
        raise NoEquivalent(why)
    hd = c["head_dim"]
    if c["n_experts"]:
        no("a mixture of experts (n_experts %d), which --export-hf does not write" % c["n_experts"])
    if c["post_norm"]:
        no("post-norm blocks (post_norm 1)")
    if c["pos_kind"] == mf.POS_SINUSOID:
        no("sinusoidal positions (pos_kind 2)")
    if not c["final_norm"]:
        no("no norm before the classifier (final_norm 0)")
    default_scale = c["attn_scale"] in (0, float(np.float32(hd ** -0.5)))
    gemma = c["ffn_kind"] == mf.FFN_GEGLU_TANH or c["arch_flags"] & (mf.ARCH_NORM_PLUS_ONE | mf.ARCH_OUT_NORMS)
    if not gemma:
        if c["embed_scale"] != 1:
            no("embed_scale %g outside Gemma 3" % c["embed_scale"])
        if not default_scale:
            no("attn_scale %g outside Gemma 3" % c["attn_scale"])
        if c["sliding_window"]:
            no("sliding-window attention (sliding_window %d) outside Gemma 3" % c["sliding_window"])
    if c["pos_kind"] == mf.POS_LEARNED:
        if c["norm_kind"] != mf.NORM_LAYER:
            no("learned positions with RMSNorm (GPT-2 has LayerNorm)")
        if c["ffn_kind"] not in GPT2_ACTIVATIONS:
            no("learned positions with a %s feed-forward (GPT-2's is not gated)" % FFN_NAMES[c["ffn_kind"]])
        if c["n_kv_heads"] != c["n_heads"]:
            no("grouped-query attention (%d kv heads for %d) in a GPT-2" % (c["n_kv_heads"], c["n_heads"]))
        if c["n_heads"] * hd != c["dim"]:
            no("n_heads %d x head_dim %d != dim %d in a GPT-2" % (c["n_heads"], hd, c["dim"]))
        if c["arch_flags"]:
            no("arch_flags %d in a GPT-2" % c["arch_flags"])
        return "gpt2"
    if c["norm_kind"] != mf.NORM_RMS:
        no("LayerNorm with RoPE")
    if c["rope_dims"] != hd:
        no("partial rotary (RoPE on %d of head_dim %d)" % (c["rope_dims"], hd))
    attn_bias = c["bias_flags"] & (mf.BIAS_QKV | mf.BIAS_O)
    if gemma:
        if c["arch_flags"] != mf.ARCH_QK_NORM | mf.ARCH_NORM_PLUS_ONE | mf.ARCH_OUT_NORMS:
            no("arch_flags %d (Gemma 3 has all of QK norm, (1 + w) norms and output norms)" % c["arch_flags"])
        if c["ffn_kind"] != mf.FFN_GEGLU_TANH:
            no("a %s feed-forward with Gemma 3's norms" % FFN_NAMES[c["ffn_kind"]])
        if c["embed_scale"] != np.float32(np.sqrt(np.float32(c["dim"]))):
            no("embed_scale %g in a Gemma 3 (it is sqrt(dim %d))" % (c["embed_scale"], c["dim"]))
        if attn_bias not in (0, mf.BIAS_QKV | mf.BIAS_O):
            no("bias_flags %d (Gemma 3's attention_bias covers q, k, v and o together)" % c["bias_flags"])
        return "gemma3_text"
    if c["ffn_kind"] != mf.FFN_SWIGLU:
        no("a %s feed-forward with RoPE (Llama-family models use SwiGLU)" % FFN_NAMES[c["ffn_kind"]])
    if c["arch_flags"] & mf.ARCH_QK_NORM_WHOLE:
        no("q and k norms over the whole projection (arch_flags %d: OLMoE's) without experts" % c["arch_flags"])
    if c["arch_flags"] & mf.ARCH_QK_NORM:
        if c["bias_flags"] not in (0, mf.BIAS_QKV | mf.BIAS_O):
            no("bias_flags %d with QK norm (Qwen3's attention_bias covers q, k, v and o, and it has no "
               "feed-forward biases)" % c["bias_flags"])
        return "qwen3"
    if c["bias_flags"] == mf.BIAS_QKV:
        return "qwen2"
    if attn_bias == mf.BIAS_O:
        no("an attention output bias without q, k, v biases (bias_flags %d)" % c["bias_flags"])
    if c["bias_flags"] == mf.BIAS_QKV | mf.BIAS_FFN:
        no("q, k, v and feed-forward biases without an output bias (bias_flags %d)" % c["bias_flags"])
    return "llama"


# ---- config.json ----

def rope_scaling(c):
    if c["rope_scaling"] == mf.ROPE_SCALING_LINEAR:
        return {"rope_type": "linear", "factor": f32(c["rope_factor"])}
    if c["rope_scaling"] == mf.ROPE_SCALING_LLAMA3:
        return {"rope_type": "llama3", "factor": f32(c["rope_factor"]),
                "low_freq_factor": f32(c["rope_low_freq_factor"]),
                "high_freq_factor": f32(c["rope_high_freq_factor"]),
                "original_max_position_embeddings": c["rope_original_ctx"]}
    return None


def query_pre_attn_scalar(c):
    """Gemma 3 scales scores by query_pre_attn_scalar^-0.5: the number whose scale is attn_scale,
    an integer when one fits (it is 256 or head_dim in every published config)."""
    if not c["attn_scale"]:
        return c["head_dim"]
    q = 1.0 / float(c["attn_scale"]) ** 2
    near = round(q)
    return near if near > 0 and np.float32(near ** -0.5) == np.float32(c["attn_scale"]) else q


def hf_config(c, mt, bos, eos_ids):
    """config.json for model_type mt."""
    common = dict(architectures=[FAMILIES[mt].hf_class], model_type=mt, vocab_size=c["vocab_size"],
                  bos_token_id=bos if bos >= 0 else None,
                  eos_token_id=eos_ids[0] if len(eos_ids) == 1 else (eos_ids or None),
                  tie_word_embeddings=bool(c["tied_classifier"]), torch_dtype=TORCH_DTYPES[c["weight_type"]],
                  initializer_range=0.02, use_cache=True)
    if mt == "gpt2":
        return dict(common, n_embd=c["dim"], n_layer=c["n_layers"], n_head=c["n_heads"], n_inner=c["hidden_dim"],
                    n_positions=c["seq_len"], n_ctx=c["seq_len"], activation_function=GPT2_ACTIVATIONS[c["ffn_kind"]],
                    layer_norm_epsilon=f32(c["norm_eps"]), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                    scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False)
    out = dict(common, hidden_size=c["dim"], intermediate_size=c["hidden_dim"], num_hidden_layers=c["n_layers"],
               num_attention_heads=c["n_heads"], num_key_value_heads=c["n_kv_heads"], head_dim=c["head_dim"],
               max_position_embeddings=c["seq_len"], rms_norm_eps=f32(c["norm_eps"]),
               rope_theta=f32(c["rope_theta"]), rope_scaling=rope_scaling(c), attention_dropout=0.0)
    attn_bias = bool(c["bias_flags"] & mf.BIAS_QKV)
    if mt == "llama":
        return dict(out, hidden_act="silu", attention_bias=attn_bias, mlp_bias=bool(c["bias_flags"] & mf.BIAS_FFN),
                    pretraining_tp=1)
    if mt in ("qwen2", "qwen3"):
        out = dict(out, hidden_act="silu", use_sliding_window=False, sliding_window=None,
                   max_window_layers=c["n_layers"])
        return dict(out, attention_bias=attn_bias) if mt == "qwen3" else out
    # gemma3_text: layer l is global when (l + 1) % global_every == 0, as sliding_window_pattern says
    every = c["global_every"] or 1
    return dict(out, hidden_activation="gelu_pytorch_tanh", attention_bias=attn_bias,
                query_pre_attn_scalar=query_pre_attn_scalar(c),
                sliding_window=c["sliding_window"] or c["seq_len"], sliding_window_pattern=every,
                layer_types=["full_attention" if (i + 1) % every == 0 else "sliding_attention"
                             for i in range(c["n_layers"])],
                rope_local_base_freq=f32(c["rope_local_theta"] if c["sliding_window"] else c["rope_theta"]),
                final_logit_softcapping=None, attn_logit_softcapping=None, cache_implementation="hybrid")


# ---- weights ----

def to_hf_rope(w, n_heads, head_dim):
    """Rows of q or k (or of a per-head norm) from FORMAT.md's interleaved RoPE pairs (2j, 2j + 1)
    back to Hugging Face's half-split pairs (j, j + head_dim / 2): the inverse of convert.py's
    reordering."""
    idx = np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])
    return w[(np.arange(n_heads)[:, None] * head_dim + idx[None, :]).reshape(-1)]


# A tensor of model.safetensors: its dtype (F32, BF16, F16), its shape, and how to make its array,
# called only when it is written, so that one tensor at a time is dequantised or reordered.
Out = collections.namedtuple("Out", "dtype shape make")


def stored(c, name, a):
    """The Out of a tensor read with dequantize=False: 16-bit matrices as they are, Q8_0 ones and
    a type-per-matrix file's dequantised exactly to float32, everything else float32."""
    t = storage.matrix_type(c, name)
    if t:
        block, block_bytes = mf.gguf_file.BLOCK_SIZES[mf.gguf_file.TYPE_IDS[t]]
        shape = (a.shape[0], a.shape[1] // block_bytes * block)
        return Out("F32", shape, lambda: storage.dequantize_matrix(t, a, shape))
    if isinstance(a, tuple):
        return Out("F32", a[0].shape, lambda: storage.dequantize_q8_0(*a))
    if storage.is_half(c, name):
        return Out("BF16" if c["weight_type"] == storage.WEIGHTS_BF16 else "F16", a.shape, lambda: a)
    return Out("F32", a.shape, lambda: a)


def transposed(t):
    return Out(t.dtype, t.shape[::-1], lambda: t.make().T)


GPT2_NAMES = dict(attn_norm_w="ln_1.weight", attn_norm_b="ln_1.bias", ffn_norm_w="ln_2.weight",
                  ffn_norm_b="ln_2.bias", wo="attn.c_proj.weight", bo="attn.c_proj.bias", w1="mlp.c_fc.weight",
                  b1="mlp.c_fc.bias", w2="mlp.c_proj.weight", b2="mlp.c_proj.bias")
LLAMA_NAMES = dict(attn_norm_w="input_layernorm.weight", wq="self_attn.q_proj.weight", bq="self_attn.q_proj.bias",
                   wk="self_attn.k_proj.weight", bk="self_attn.k_proj.bias", wv="self_attn.v_proj.weight",
                   bv="self_attn.v_proj.bias", q_norm_w="self_attn.q_norm.weight", k_norm_w="self_attn.k_norm.weight",
                   wo="self_attn.o_proj.weight", bo="self_attn.o_proj.bias",
                   ffn_norm_w="post_attention_layernorm.weight", w1="mlp.gate_proj.weight", b1="mlp.gate_proj.bias",
                   w3="mlp.up_proj.weight", b3="mlp.up_proj.bias", w2="mlp.down_proj.weight", b2="mlp.down_proj.bias")
# Gemma 3's four norms: after the attention, before and after the feed-forward
GEMMA3_NAMES = dict(LLAMA_NAMES, attn_out_norm_w="post_attention_layernorm.weight",
                    ffn_norm_w="pre_feedforward_layernorm.weight", ffn_out_norm_w="post_feedforward_layernorm.weight")


def gpt2_state(c, t):
    """GPT-2's names; its Conv1D matrices are stored input-major, q, k and v as one c_attn."""
    get = {n: stored(c, n, a) for n, a in t.items()}

    def bias(name, n):  # a bias the model file does not have computes what zeros do
        return get[name] if name in get else Out("F32", (n,), lambda: np.zeros(n, np.float32))
    sd = {"transformer.wte.weight": get["tok_embedding"], "transformer.wpe.weight": get["pos_embedding"],
          "transformer.ln_f.weight": get["final_norm_w"], "transformer.ln_f.bias": get["final_norm_b"]}
    for i in range(c["n_layers"]):
        p, q = "transformer.h.%d." % i, "layers.%d." % i
        qkv = [get[q + w] for w in ("wq", "wk", "wv")]
        sd[p + "attn.c_attn.weight"] = transposed(Out(qkv[0].dtype, (3 * c["dim"], c["dim"]),
                                                      lambda qkv=qkv: np.concatenate([w.make() for w in qkv])))
        b = [bias(q + n, c["dim"]) for n in ("bq", "bk", "bv")]
        sd[p + "attn.c_attn.bias"] = Out("F32", (3 * c["dim"],), lambda b=b: np.concatenate([x.make() for x in b]))
        for ours, theirs in GPT2_NAMES.items():
            if ours[0] == "w":
                sd[p + theirs] = transposed(get[q + ours])
            elif ours[0] == "b":
                sd[p + theirs] = bias(q + ours, c["hidden_dim"] if ours == "b1" else c["dim"])
            else:
                sd[p + theirs] = get[q + ours]
    if not c["tied_classifier"]:
        sd["lm_head.weight"] = get["classifier"]
    return sd


def llama_state(c, t, mt):
    """Llama, Qwen2, Qwen3 and Gemma 3 names, q and k (and their biases and norms) in half-split order."""
    names = GEMMA3_NAMES if mt == "gemma3_text" else LLAMA_NAMES
    heads = dict(wq=c["n_heads"], bq=c["n_heads"], wk=c["n_kv_heads"], bk=c["n_kv_heads"], q_norm_w=1, k_norm_w=1)
    sd = {"model.embed_tokens.weight": stored(c, "tok_embedding", t["tok_embedding"]),
          "model.norm.weight": stored(c, "final_norm_w", t["final_norm_w"])}
    for name, a in t.items():
        if not name.startswith("layers."):
            continue
        _, i, ours = name.split(".", 2)
        out = stored(c, name, a)
        if ours in heads:
            out = out._replace(make=lambda out=out, n=heads[ours]: to_hf_rope(out.make(), n, c["head_dim"]))
        sd["model.layers.%s.%s" % (i, names[ours])] = out
    if not c["tied_classifier"]:
        sd["lm_head.weight"] = stored(c, "classifier", t["classifier"])
    return sd


def write_safetensors(path, sd):
    """sd: name -> Out, as a .safetensors file with the {"format": "pt"} metadata transformers
    checks. The tensors follow one another without gaps, the 4-byte ones first so that every
    tensor starts at a multiple of its element size."""
    order = sorted(sd, key=lambda n: (sd[n].dtype != "F32", n))
    safetensors.write_stored(path, {n: (sd[n].dtype, sd[n].shape, sd[n].make) for n in order}, {"format": "pt"})


# ---- the tokenizer ----

def is_byte_piece(p):
    return len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">") and all(
        ch in b"0123456789ABCDEF" for ch in p[3:5])


def piece_strings(pieces, kind, added):
    """The tokenizer.json spelling of every piece: kind 0 pieces with their spaces as U+2581 (added
    tokens too, as tokenizer_blob.py reads them), kind 1 pieces in GPT-2's printable stand-ins for
    bytes but for added tokens, which are text."""
    b2u = bytes_to_unicode()
    out = []
    for i, p in enumerate(pieces):
        if kind == mf.TOK_BYTE_BPE and i not in added:
            out.append("".join(b2u[b] for b in p))
            continue
        try:
            s = p.decode("utf-8")
        except UnicodeDecodeError:
            raise NoEquivalent("piece %d %r is not UTF-8 text, which a tokenizer.json vocabulary holds" % (i, p))
        if kind == mf.TOK_SENTENCEPIECE:
            if SPACE in s:
                raise NoEquivalent("piece %d %r holds U+2581, which a SentencePiece-style tokenizer.json cannot "
                                   "tell from a space" % (i, p))
            s = s.replace(" ", SPACE)
        out.append(s)
    return out


def score_merges(pieces, scores):
    """Merges that make Hugging Face's rank-order BPE do what kind-0 encoding does by score: each
    split of a mergeable piece into two pieces (at character boundaries: symbols are whole
    characters), best score first. Byte pieces neither merge nor are made (bpe.c). Among equal
    scores (Llama 2's runs of spaces) the longer left part goes first, as kind 0's leftmost-first
    rule then grows a run from its left end."""
    ids = {p: i for i, p in reversed(list(enumerate(pieces)))}
    found = []
    for c, p in enumerate(pieces):
        if not scores[c] > NO_MERGE_SCORE or is_byte_piece(p):
            continue
        cut = 0
        for ch in p.decode("utf-8")[:-1]:
            cut += len(ch.encode("utf-8"))
            left, right = ids.get(p[:cut]), ids.get(p[cut:])
            if left is None or right is None or is_byte_piece(pieces[left]) or is_byte_piece(pieces[right]):
                continue
            found.append((-scores[c], -cut, c, left, right))
    found.sort()
    return [(left, right) for _, _, _, left, right in found]


def template(bos_string, bos):
    """The post-processor that puts BOS before the text (and before a pair's second text)."""
    tok = lambda type_id: {"SpecialToken": {"id": bos_string, "type_id": type_id}}  # noqa: E731
    seq = lambda name, type_id: {"Sequence": {"id": name, "type_id": type_id}}  # noqa: E731
    return {"type": "TemplateProcessing", "single": [tok(0), seq("A", 0)],
            "pair": [tok(0), seq("A", 0), tok(1), seq("B", 1)],
            "special_tokens": {bos_string: {"id": bos_string, "ids": [bos], "tokens": [bos_string]}}}


def sequence(kind, items):
    items = [x for x in items if x]
    return None if not items else items[0] if len(items) == 1 else {"type": "Sequence", kind: items}


def hf_tokenizer(tok):
    """(tokenizer.json, [(id, text, special)] added tokens, [ids that end generation]) from a model
    file's tokenizer; NoEquivalent for what a tokenizer.json cannot say."""
    blob, kind, flags, bos, eos = tok
    pieces, scores, merges, added = mf.parse_tokenizer(blob, with_added=True)
    attrs = dict(added)
    # Vocabularies padded to a round size end in empty pieces that nothing encodes to: Hugging
    # Face's config.json vocab_size covers them, the tokenizer's vocabulary stops before them.
    n = len(pieces)
    while n and not pieces[n - 1] and n - 1 not in attrs:
        n -= 1
    for i in range(n):
        if not pieces[i] and i not in attrs:
            raise NoEquivalent("piece %d is empty, which a tokenizer.json vocabulary cannot hold" % i)
    strings = piece_strings(pieces[:n], kind, attrs)
    # BOS and EOS are special tokens to Hugging Face, whether or not the blob lists them
    for i in (bos, eos):
        if i >= n:
            raise NoEquivalent("token %d (BOS or EOS) is an empty padding piece" % i)
        if i >= 0 and i not in attrs:
            attrs[i] = TOKA_SPECIAL
    seen = {}
    for i, s in enumerate(strings):
        if s in seen:
            raise NoEquivalent("pieces %d and %d are both %r in a tokenizer.json vocabulary" % (seen[s], i, s))
        seen[s] = i
    # a byte-level vocabulary holds pieces of bytes; its added tokens are text beside it
    vocab = {s: i for i, s in enumerate(strings) if kind == mf.TOK_SENTENCEPIECE or i not in dict(added)}
    if kind == mf.TOK_SENTENCEPIECE and not len(merges):
        merges = score_merges(pieces[:n], scores)
    pairs = [(strings[a], strings[b]) for a, b in merges]
    spaced = any(" " in a or " " in b for a, b in pairs)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": kind == mf.TOK_SENTENCEPIECE,
             "ignore_merges": bool(flags & mf.TOKF_IGNORE_MERGES), "vocab": vocab,
             "merges": [list(m) for m in pairs] if spaced else ["%s %s" % m for m in pairs]}
    if kind == mf.TOK_BYTE_BPE:
        split = flags >> mf.TOKF_PRE_SHIFT & 15
        if split not in PRE_TOKENIZERS:
            raise NoEquivalent("pre-tokenizer %d (tok_flags bits 8..11) is unknown" % split)
        normalizer, pre = {"type": "NFC"} if flags & mf.TOKF_NFC else None, PRE_TOKENIZERS[split]
        decoder = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    else:
        dummy = flags & mf.TOKF_DUMMY_PREFIX
        normalizer = sequence("normalizers", [dummy and {"type": "Prepend", "prepend": SPACE},
                                              {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}])
        pre, post = None, None
        decoder = sequence("decoders", [{"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
                                        {"type": "ByteFallback"}, {"type": "Fuse"},
                                        dummy and {"type": "Strip", "content": " ", "start": 1, "stop": 0}])
    if flags & mf.TOKF_ADD_BOS and bos >= 0:
        post = template(strings[bos], bos)
    added_list = [(i, strings[i], bool(a & TOKA_SPECIAL)) for i, a in sorted(attrs.items())]
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": sp} for i, s, sp in added_list],
          "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": decoder,
          "model": model}
    # what ends generation: EOS, the stop tokens, and BOS where it delimits (llama2.c's stories)
    ends = [eos] if eos >= 0 else []
    ends += [i for i, a in sorted(attrs.items()) if a & TOKA_STOP and i not in ends]
    if flags & mf.TOKF_BOS_STOPS and bos >= 0 and bos not in ends:
        ends.append(bos)
    return tj, added_list, ends


def tokenizer_config(tok, c, added, chat_text=None):
    """tokenizer_config.json: the generic fast tokenizer over tokenizer.json, with its BOS, EOS and
    added tokens (transformers' added_tokens_decoder), and the chat template's text if any."""
    _, _, flags, bos, eos = tok
    text = {i: s for i, s, _ in added}
    chat = {"chat_template": chat_text} if chat_text else {}
    return {**chat, "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": text[bos] if bos >= 0 else None, "eos_token": text[eos] if eos >= 0 else None,
            "add_bos_token": bool(flags & mf.TOKF_ADD_BOS and bos >= 0), "add_eos_token": False,
            "model_max_length": c["seq_len"], "clean_up_tokenization_spaces": False,
            "added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                              "single_word": False, "special": sp} for i, s, sp in added}}


# ---- the directory ----

def is_export(d):
    """Whether folder d is a former export: its marker, and no file an export does not write."""
    names = set(os.listdir(d))
    return MARKER in names and names <= set(FILES)


def claim_dir(d, force):
    """Refuse (outfile.Refused), before any work, an out_dir export() may not write: one that is not a folder, a
    former export without force, or any other folder but an empty one. Other files would mix two
    models (convert.py reads vocab.json before tokenizer.json, transformers shards before
    model.safetensors)."""
    def others(d):
        names = sorted(set(os.listdir(d)) - set(FILES))
        return "holds %s, which an export would not write; refusing to replace it" % listing(names) \
            if names else None
    outfile.claim_dir(d, force, is_export, "a folder that --export-hf wrote (it has no %s)" % MARKER, others)


def json_bytes(obj):
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def export(model, out_dir):
    """Write the model file model as the Hugging Face directory out_dir; returns its model_type.
    Bad for an unreadable model, one with no Hugging Face equivalent, or an unusable out_dir."""
    try:
        c, tok, tensors = mf.read_model(model, dequantize=False)
    except (ValueError, OSError) as e:
        raise Bad(model, str(e))
    try:
        mt = family(c)
        tj, added, ends = hf_tokenizer(tok)
    except NoEquivalent as e:
        raise Bad(model, "no Hugging Face equivalent: %s" % e)
    try:
        chat, note = chat_template.for_export(mf.read_chat_section(model), c["vocab_size"])
    except (ValueError, OSError) as e:
        raise Bad(model, str(e))
    if note:
        print("convert.py: note: %s: %s" % (model, note), file=sys.stderr)
    bos = tok[3]
    sd = gpt2_state(c, tensors) if mt == "gpt2" else llama_state(c, tensors, mt)
    gen_config = {"bos_token_id": bos if bos >= 0 else None,
                  "eos_token_id": ends[0] if len(ends) == 1 else (ends or None), **generation.generation_config(c)}
    try:
        with outfile.replacing_dir(out_dir) as d:
            outfile.write(os.path.join(d, "config.json"), json_bytes(hf_config(c, mt, bos, ends)))
            outfile.write(os.path.join(d, "generation_config.json"), json_bytes(gen_config))
            outfile.write(os.path.join(d, "tokenizer.json"), json_bytes(tj))
            outfile.write(os.path.join(d, "tokenizer_config.json"), json_bytes(tokenizer_config(tok, c, added, chat)))
            write_safetensors(os.path.join(d, "model.safetensors"), sd)
            outfile.write(os.path.join(d, MARKER), json_bytes({"written_by": "tools/convert.py --export-hf",
                                                               "source": os.path.basename(model)}))
    except OSError as e:  # named as the file in out_dir, not the temporary folder's
        name = os.path.basename(getattr(e, "filename", None) or "")
        raise Bad(os.path.join(out_dir, name) if name in FILES else out_dir, "cannot write: %s" % (e.strerror or e))
    return mt
