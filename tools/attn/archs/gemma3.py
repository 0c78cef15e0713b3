"""Gemma 3 text (270M, 1B): GeGLU, norms around both sublayers applied as 1 + w, a scaled
embedding, query_pre_attn_scalar, and local layers with their own RoPE base between global ones."""
import json

import numpy as np

from attn.errors import HF_TERMS, Bad, listing
from attn.archs.base import B_ATTN, GGUF_DECODER_NAMES, Family, number, register, setting
from attn.sources.gpt2 import GELU_TANH_NAMES
from attn import modelfile as mf


@register
class Gemma3(Family):
    model_type, hf_class, gguf_arch = "gemma3_text", "Gemma3ForCausalLM", "gemma3"
    defaults = dict(num_key_value_heads=4, head_dim=256, max_position_embeddings=131072, rope_theta=1e6,
                    tie_word_embeddings=True, sliding_window=4096, rope_local_base_freq=10000.0,
                    query_pre_attn_scalar=256, hidden_activation="gelu_pytorch_tanh")
    biases = dict(attention_bias=B_ATTN)
    qk_norm = True
    act_key, activations = "hidden_activation", GELU_TANH_NAMES
    # the norms after the attention and around the feed-forward
    extra_layer_names = dict(attn_out_norm_w=("post_attention_layernorm.weight", "d"),
                             ffn_norm_w=("pre_feedforward_layernorm.weight", "d"),
                             ffn_out_norm_w=("post_feedforward_layernorm.weight", "d"))
    gguf_names = dict(GGUF_DECODER_NAMES, ffn_norm="pre_feedforward_layernorm",
                      post_attention_norm="post_attention_layernorm", post_ffw_norm="post_feedforward_layernorm")
    # llama.cpp stored Gemma's norms as 1 + w: a model computing x * w reads them
    gguf_cleared_flags = mf.ARCH_NORM_PLUS_ONE
    ref_defaults = dict(rms_norm_eps=1e-6, rope_theta=1e6, rope_local_base_freq=10000.0, tie_word_embeddings=True,
                        hidden_activation="gelu_pytorch_tanh", head_dim=256, query_pre_attn_scalar=256,
                        sliding_window=4096, sliding_window_pattern=6)
    ref_qk_norm = ref_gemma = True

    def configure(self, cpath, c, cfg, terms, local_theta):
        k = terms.key
        for key in ("final_logit_softcapping", "attn_logit_softcapping"):
            if c.get(key) is not None:
                raise Bad(cpath, "%s %s is not supported by this build" % (k(key), json.dumps(c[key])))
        if c.get("use_bidirectional_attention"):
            raise Bad(cpath, "use_bidirectional_attention true is not supported by this build (causal attention only)")
        every = gemma_layer_pattern(cpath, c, cfg["n_layers"], terms)
        if every:
            window = setting(c, self, "sliding_window")
            if window is None:
                raise Bad(cpath, "sliding_window is null, but some layers are sliding_attention")
            cfg.update(sliding_window=number(cpath, k("sliding_window"), window, integer=True), global_every=every,
                       rope_local_theta=local_theta)
        scalar = number(cpath, k("query_pre_attn_scalar"), setting(c, self, "query_pre_attn_scalar"))
        # Gemma3TextScaledWordEmbedding multiplies by hidden_size ** 0.5 held in float32, as the file does
        cfg.update(ffn_kind=mf.FFN_GEGLU_TANH, embed_scale=cfg["dim"] ** 0.5, attn_scale=scalar ** -0.5,
                   arch_flags=mf.ARCH_NORM_PLUS_ONE | mf.ARCH_OUT_NORMS)
        return None

    def gguf_config(self, f, g, c):
        # llama.cpp's Gemma 3: attention scaled by 1/sqrt(head_dim) (1/sqrt(dim / heads) for the
        # 62-layer 27B), a global layer every 6 and a local RoPE base of 10000 unless the file says
        dim, H, hd = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
        scalar = dim // H if c["num_hidden_layers"] == 62 else hd
        c.update(query_pre_attn_scalar=scalar, sliding_window=g.get("attention.sliding_window"),
                 rope_local_base_freq=g.get("rope.freq_base_swa", 10000.0, float))
        flags = f.metadata.get(g.arch + ".attention.sliding_window_pattern")
        if isinstance(flags, np.ndarray) and flags.dtype == bool:  # a flag per layer: true for sliding
            c["layer_types"] = ["sliding_attention" if x else "full_attention" for x in flags]
        else:
            c["sliding_window_pattern"] = g.get("attention.sliding_window_pattern", 6)
        for key in ("final_logit_softcapping", "attn_logit_softcapping"):
            if g.has(key):
                c[key] = g.get(key, kind=float)


def gemma_layer_pattern(cpath, c, L, terms=HF_TERMS):
    """P such that layer l is global when (l + 1) % P == 0 and local otherwise, from Gemma 3's
    layer_types, or when it has none from sliding_window_pattern (6 if absent), as
    Gemma3TextConfig does; 0 when every layer is global. A layer_types list that is no such
    pattern, and a pattern key that contradicts what Hugging Face uses, are refused."""
    def kinds(p):
        return ["full_attention" if p and (i + 1) % p == 0 else "sliding_attention" for i in range(L)]
    keys = {k: number(cpath, terms.key(k), c[k], integer=True) for k in ("sliding_window_pattern",
                                                                          "_sliding_window_pattern")
            if c.get(k) is not None}
    types = c.get("layer_types")
    if types is None:
        p = keys.get("sliding_window_pattern", 6)
        if kinds(keys.get("_sliding_window_pattern", p)) != kinds(p):
            raise Bad(cpath, "_sliding_window_pattern %d, but without layer_types Hugging Face uses "
                      "sliding_window_pattern %d" % (keys["_sliding_window_pattern"], p))
        types = kinds(p)
    else:
        if not isinstance(types, list) or len(types) != L or not set(types) <= {"full_attention", "sliding_attention"}:
            raise Bad(cpath, "%s must list full_attention or sliding_attention for each of the %d layers"
                      % (terms.key("layer_types"), L))
        first = types.index("full_attention") + 1 if "full_attention" in types else None
        p = first or min(keys.values(), default=L + 1)
        if types != kinds(p):
            raise Bad(cpath, "%s %s is not a global layer every P layers, the only pattern this build "
                      "supports" % (terms.key("layer_types"), listing(types, 8)))
        for k, v in keys.items():
            if kinds(v) != types:
                raise Bad(cpath, "layer_types and %s %d describe different layers" % (k, v))
    return 0 if "sliding_attention" not in types else p
