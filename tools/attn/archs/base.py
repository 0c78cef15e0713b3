"""What a model family is: one class per Hugging Face model_type, registered with @register,
holding its config keys (the defaults its configuration_*.py gives the keys a config.json may
leave out, the biases its keys bring), its tensor names for Hugging Face and GGUF, the hooks
where it reads more than the shared decoder does, and the quirks the PyTorch reference
(reference/hf.py) computes it with. The readers (sources/hf.py, sources/gguf.py) and the
reference look a family up here instead of testing model_type; config.json's values are read
with number, setting and conf, which the families' hooks share with sources/hf.py."""
import json
import math

from attn.errors import Bad
from attn.tensors import stack, vector
from attn import modelfile as mf

FAMILIES = {}  # model_type -> the family's instance, in the order registered


def register(cls):
    """Class decorator: the family becomes the reader of its model_type (and GGUF architecture)."""
    FAMILIES[cls.model_type] = cls()
    return cls


def gguf_families():
    """general.architecture -> family, of the families llama.cpp writes under their own name."""
    return {f.gguf_arch: f for f in FAMILIES.values() if f.gguf_arch}


# ---- config.json's values ----

HF_DEFAULTS = dict(rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, hidden_act="silu")
MISSING = object()  # a key the config leaves out, where a value is needed


def conf(path, c, key, default=None, required=True):
    if key in c and c[key] is not None:
        return c[key]
    if required and default is None:
        raise Bad(path, "config.json lacks %s" % key if key not in c else "%s is null" % key)
    return default


def setting(c, fam, key):
    """What config.json says for key, or, when it leaves the key out, the family's default (null
    stays None: Hugging Face's None)."""
    return c[key] if key in c else fam.defaults.get(key, HF_DEFAULTS.get(key))


def number(cpath, key, v, integer=False, limit=None):
    """v, a config value, as an int or float; Bad naming key if it is missing (MISSING), not a
    positive one, or past limit (a size checked before anything is sized by it)."""
    if v is MISSING:
        raise Bad(cpath, "%s is missing" % key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    if not ok or (integer and v != int(v)):
        raise Bad(cpath, "%s is %s, not a positive %s" % (key, json.dumps(v), "whole number" if integer else "number"))
    if limit is not None and v > limit:
        raise Bad(cpath, "%s %s exceeds this build's limit %s" % (key, json.dumps(v), limit))
    return int(v) if integer else float(v)


# ---- tensor names ----

B_ATTN = mf.BIAS_QKV | mf.BIAS_O
# Hugging Face's names of a decoder layer's tensors (model.layers.N.), ours and their shapes in
# Tensors' dims; the q/k norms; then the biases by the bias_flags bit that brings them
HF_DECODER_LAYER = dict(attn_norm_w=("input_layernorm.weight", "d"), wq=("self_attn.q_proj.weight", "qd"),
                        wk=("self_attn.k_proj.weight", "kd"), wv=("self_attn.v_proj.weight", "kd"),
                        wo=("self_attn.o_proj.weight", "dq"), ffn_norm_w=("post_attention_layernorm.weight", "d"),
                        w1=("mlp.gate_proj.weight", "hd"), w3=("mlp.up_proj.weight", "hd"),
                        w2=("mlp.down_proj.weight", "dh"))
HF_QK_NORMS = dict(q_norm_w=("self_attn.q_norm.weight", "e"), k_norm_w=("self_attn.k_norm.weight", "e"))
HF_QK_NORMS_WHOLE = dict(q_norm_w=("self_attn.q_norm.weight", "q"), k_norm_w=("self_attn.k_norm.weight", "k"))
HF_DECODER_BIASES = {mf.BIAS_QKV: dict(bq=("self_attn.q_proj.bias", "q"), bk=("self_attn.k_proj.bias", "k"),
                                       bv=("self_attn.v_proj.bias", "k")),
                     mf.BIAS_O: dict(bo=("self_attn.o_proj.bias", "d")),
                     mf.BIAS_FFN: dict(b1=("mlp.gate_proj.bias", "h"), b3=("mlp.up_proj.bias", "h"),
                                       b2=("mlp.down_proj.bias", "d"))}
# llama.cpp's tensor names in a block (blk.N.) -> Hugging Face's (model.layers.N.), and outside the blocks
GGUF_DECODER_NAMES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                      "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
                      "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
                      "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                      "ffn_down": "mlp.down_proj"}
GGUF_DECODER_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# the Hugging Face key a GGUF decoder's metadata key (under its architecture's prefix) says
GGUF_DECODER_KEYS = dict(hidden_size="embedding_length", intermediate_size="feed_forward_length",
                         num_hidden_layers="block_count", num_attention_heads="attention.head_count",
                         num_key_value_heads="attention.head_count_kv", max_position_embeddings="context_length",
                         rms_norm_eps="attention.layer_norm_rms_epsilon", rope_theta="rope.freq_base",
                         rope_local_base_freq="rope.freq_base_swa", partial_rotary_factor="rope.dimension_count",
                         sliding_window="attention.sliding_window",
                         sliding_window_pattern="attention.sliding_window_pattern",
                         layer_types="attention.sliding_window_pattern",
                         final_logit_softcapping="final_logit_softcapping",
                         attn_logit_softcapping="attn_logit_softcapping", head_dim="attention.key_length",
                         num_experts="expert_count", num_local_experts="expert_count",
                         num_experts_per_tok="expert_used_count", moe_intermediate_size="expert_feed_forward_length",
                         shared_expert_intermediate_size="expert_shared_feed_forward_length")


class Family:
    """A Llama-shaped decoder (RMSNorm, RoPE, SwiGLU); a family overrides what differs."""
    model_type = hf_class = None
    gguf_arch = None  # general.architecture llama.cpp writes it under, if its own
    gguf_moe_arch = None  # the architecture llama.cpp writes it under with expert_count, if another family's
    gguf_norm_topk = None  # whether llama.cpp's loader renormalises the chosen experts' weights (norm_topk_prob)
    kind = "decoder"  # which reader of sources/hf.py reads it: "decoder" or "gpt2"
    defaults = {}  # its configuration_*.py's values for keys a config.json leaves out (None: derived)
    biases = {}  # config key -> the bias_flags it brings when true
    always_bias = 0  # biases the family has whatever the config says
    qk_norm = False
    qk_norm_whole = False  # its q/k norms span the whole projection (OLMoE's), not each head
    act_key, activations = "hidden_act", ("silu", "swish")
    extra_layer_names = {}  # Hugging Face tensors of a layer beyond HF_DECODER_LAYER, ours -> (theirs, dims)
    ffn_key = "intermediate_size"  # the key giving the feed-forward's width (an expert's, with experts)
    hf_layer = "model.layers.%s."
    gguf_names, gguf_top, gguf_keys = GGUF_DECODER_NAMES, GGUF_DECODER_TOP, GGUF_DECODER_KEYS
    gguf_rope_permuted = False  # llama.cpp's converter permuted q/k rows into interleaved pairs
    gguf_optional_biases = False  # a GGUF's biases are whichever the file holds (llama.cpp's llama)
    gguf_rope_freqs = False  # a rope_freqs tensor may hold its RoPE scaling (Llama 3's)
    gguf_cleared_flags = 0  # arch_flags a GGUF's values already hold
    # the reference's quirks, stated from Hugging Face's modeling_*.py on their own
    ref_defaults = dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu")
    ref_qk_norm = ref_qk_norm_whole = False
    # a mixture of experts in place of the MLP: its tensors' names and its config keys, as its
    # modeling_*.py holds them (router, expert: a layer's names; gate, up, down: an expert's
    # matrices; count, top_k, width: the keys; norm: the key of renormalising, None: always)
    ref_experts = None
    ref_gemma = False  # Gemma 3's sandwich norms, 1 + w, scaled embedding, query_pre_attn_scalar, layer_types

    def layer_names(self, bias):
        """ours -> (Hugging Face's name under model.layers.N., dims) of a layer with bias_flags bias."""
        qk_norms = (HF_QK_NORMS_WHOLE if self.qk_norm_whole else HF_QK_NORMS) if self.qk_norm else {}
        names = dict(HF_DECODER_LAYER, **self.extra_layer_names, **qk_norms)
        for flag, more in HF_DECODER_BIASES.items():
            if bias & flag:
                names.update(more)
        return names

    def take_experts(self, path, tn, prefix, n_experts):
        """ours -> Weight of a layer's experts (prefix: its Hugging Face names' start), stacked; {}
        for a family without them."""
        return {}

    def bias_flags(self, c):
        """The bias_flags a config.json's keys bring."""
        bias = self.always_bias
        for key, flags in self.biases.items():
            if c.get(key):
                bias |= flags
        return bias

    def configure(self, cpath, c, cfg, terms, local_theta):
        """Reads the family's own keys into cfg (the model file's config; local_theta: the local
        layers' RoPE base, if it has local layers), refusing by name what this build cannot
        compute; returns Source.context (None: the shared one)."""
        return None

    def gguf_own_config(self, g, V, tied):
        """The config.json of a GGUF whose metadata the family reads wholly itself (GPT-2's), or None."""
        return None

    def gguf_config(self, f, g, c):
        """Adds to c, the config.json read from a GGUF's metadata g, what the family's own keys say."""

    def ref_biases(self, c):
        """(q/k/v biases, o bias, MLP biases) as the family's modeling_*.py builds its layers."""
        return c.get("attention_bias", False), c.get("attention_bias", False), False

    def ref_expert_layers(self, c, L):
        """Which of the L layers have experts instead of the dense MLP."""
        return [bool(self.ref_experts)] * L

    def ref_window(self, conf):
        """The window every layer attends within (Mistral's), or None."""
        return None


class Experts(Family):
    """What a family whose every layer's feed-forward is a mixture of experts adds (mixed in before
    its dense family): the experts' keys read, the router and the experts' tensors taken, stacked
    expert after expert, as format version 8 holds them."""

    def configure(self, cpath, c, cfg, terms, local_theta):
        context = super().configure(cpath, c, cfg, terms, local_theta)
        k, x = terms.key, self.ref_experts
        E, K, width = (number(cpath, k(x[key]), setting(c, self, x[key]), integer=True, limit=lim)
                       for key, lim in (("count", mf.MAX_EXPERTS), ("top_k", mf.MAX_EXPERTS),
                                        ("width", mf.LIMITS["hidden_dim"])))
        if K > E:
            raise Bad(cpath, "%s %d exceeds %s %d" % (k(x["top_k"]), K, k(x["count"]), E))
        norm = setting(c, self, x["norm"]) if x["norm"] else True
        if not isinstance(norm, bool):
            raise Bad(cpath, "%s is %s, not true or false" % (k(x["norm"]), json.dumps(norm)))
        cfg.update(hidden_dim=width, n_experts=E, n_experts_used=K, moe_flags=mf.MOE_NORM_TOPK if norm else 0)
        if x.get("shared"):
            cfg["shared_dim"] = number(cpath, k(x["shared_width"]), setting(c, self, x["shared_width"]), integer=True,
                                       limit=mf.LIMITS["hidden_dim"])
        return context

    def layer_names(self, bias):
        names = super().layer_names(bias)
        for ours in ("w1", "w3", "w2"):
            del names[ours]
        return dict(names, router=(self.ref_experts["router"], "Ed"))

    def take_experts(self, path, tn, prefix, n_experts):
        x, matrices = self.ref_experts, (("w1", "gate", "hd"), ("w3", "up", "hd"), ("w2", "down", "dh"))
        out = {ours: stack(path, [tn.take(prefix + x["expert"] % e + x[theirs] + ".weight", dims)
                                  for e in range(n_experts)])
               for ours, theirs, dims in matrices}
        if x.get("shared"):  # the shared expert's matrices (S: its width) and its gate, a Linear to one output
            out.update(("shared_" + ours, tn.take(prefix + x["shared"] + x[theirs] + ".weight", dims.replace("h", "S")))
                       for ours, theirs, dims in matrices)
            out["shared_gate"] = vector(tn.take(prefix + x["shared_gate"], "od"))
        return out
