"""OLMoE (OlmoeForCausalLM)."""
import json

from attn.errors import Bad
from attn.archs.base import B_ATTN, Experts, Family, register


@register
class Olmoe(Experts, Family):
    """A Llama-shaped decoder with every layer's feed-forward a mixture of experts
    (OlmoeSparseMoeBlock: a router, mlp.gate, whose softmax picks num_experts_per_tok of
    num_experts experts of intermediate_size, renormalised when norm_topk_prob; no shared
    expert), and q_norm and k_norm RMSNorms over the whole q and k projections (hidden_size and
    num_key_value_heads x head_dim wide), not over each head as Qwen3's; head_dim is always
    hidden_size / num_attention_heads. clip_qkv, which clamps q, k and v, is refused."""
    model_type, hf_class, gguf_arch = "olmoe", "OlmoeForCausalLM", "olmoe"
    gguf_norm_topk = False  # llama.cpp's olmoe never renormalises the chosen experts' weights
    defaults = dict(num_key_value_heads=None, head_dim=None, max_position_embeddings=4096, rms_norm_eps=1e-5,
                    num_experts=64, num_experts_per_tok=8, norm_topk_prob=False)
    biases = dict(attention_bias=B_ATTN)
    qk_norm = qk_norm_whole = True
    ref_defaults = dict(Family.ref_defaults, rms_norm_eps=1e-5, num_experts=64, num_experts_per_tok=8,
                        norm_topk_prob=False, intermediate_size=2048)
    ref_qk_norm = ref_qk_norm_whole = True
    ref_experts = dict(router="mlp.gate.weight", expert="mlp.experts.%d.", gate="gate_proj", up="up_proj",
                       down="down_proj", count="num_experts", top_k="num_experts_per_tok", width="intermediate_size",
                       norm="norm_topk_prob")

    def configure(self, cpath, c, cfg, terms, local_theta):
        k, dim, H = terms.key, cfg["dim"], cfg["n_heads"]
        if dim % H or cfg["head_dim"] != dim // H:  # OlmoeAttention never reads a head_dim key
            raise Bad(cpath, "%s %d with %s %d is not supported by this build (model_type olmoe's head_dim is "
                      "%s / %s, a whole number)" % (k("head_dim") if "head_dim" in c else k("hidden_size"),
                                                   cfg["head_dim"] if "head_dim" in c else dim,
                                                   k("num_attention_heads"), H, k("hidden_size"),
                                                   k("num_attention_heads")))
        if c.get("clip_qkv") is not None:
            raise Bad(cpath, "%s %s is not supported by this build (q, k and v clamped; only null)"
                      % (terms.key("clip_qkv"), json.dumps(c["clip_qkv"])))
        return super().configure(cpath, c, cfg, terms, local_theta)
