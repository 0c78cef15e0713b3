"""Qwen2 (Qwen2.5), Qwen3, Qwen2-MoE and Qwen3-MoE."""
import json

from attn.errors import Bad
from attn.archs.base import B_ATTN, Experts, Family, number, register, setting
from attn import modelfile as mf


class Qwen(Family):
    """What the Qwen families share: sliding-window attention is refused."""
    def configure(self, cpath, c, cfg, terms, local_theta):
        types = c.get("layer_types") or []
        if c.get("use_sliding_window") or "sliding_attention" in types:
            raise Bad(cpath, "%s is not supported by this build (sliding-window attention on model_type %s)"
                      % ("use_sliding_window true" if c.get("use_sliding_window") else "layer_types with "
                         "sliding_attention", self.model_type))
        return None


@register
class Qwen2(Qwen):
    model_type, hf_class, gguf_arch = "qwen2", "Qwen2ForCausalLM", "qwen2"
    defaults = dict(num_key_value_heads=32, head_dim=None, max_position_embeddings=32768)
    always_bias = mf.BIAS_QKV

    def ref_biases(self, c):
        return True, False, False


@register
class Qwen3(Qwen):
    model_type, hf_class, gguf_arch = "qwen3", "Qwen3ForCausalLM", "qwen3"
    defaults = dict(num_key_value_heads=32, head_dim=128, max_position_embeddings=32768)
    biases = dict(attention_bias=B_ATTN)
    qk_norm = ref_qk_norm = True
    ref_defaults = dict(Family.ref_defaults, head_dim=128)


class QwenExperts(Experts):
    """What Qwen2-MoE and Qwen3-MoE share: a layer off decoder_sparse_step or in mlp_only_layers
    has the dense MLP of intermediate_size, which this build does not hold: refused."""

    def configure(self, cpath, c, cfg, terms, local_theta):
        k = terms.key
        step = number(cpath, k("decoder_sparse_step"), setting(c, self, "decoder_sparse_step"), integer=True)
        if step != 1:
            raise Bad(cpath, "%s %d is not supported by this build (layers without experts; only 1, every layer "
                      "with them)" % (k("decoder_sparse_step"), step))
        if c.get("mlp_only_layers"):
            raise Bad(cpath, "mlp_only_layers %s is not supported by this build (layers without experts)"
                      % json.dumps(c["mlp_only_layers"]))
        return super().configure(cpath, c, cfg, terms, local_theta)

    def ref_expert_layers(self, c, L):
        # the decoder layer's MLP: the dense one in mlp_only_layers and off the step
        return [c[self.ref_experts["count"]] > 0 and i not in c["mlp_only_layers"]
                and (i + 1) % c["decoder_sparse_step"] == 0 for i in range(L)]


@register
class Qwen2Moe(QwenExperts, Qwen2):
    """Qwen2 (its q, k, v biases) with every layer's feed-forward a mixture of experts
    (Qwen2MoeSparseMoeBlock): Qwen3-MoE's router and experts, plus a shared expert every token
    passes, of shared_expert_intermediate_size, scaled by sigmoid(shared_expert_gate(x))."""
    model_type, hf_class, gguf_arch = "qwen2_moe", "Qwen2MoeForCausalLM", "qwen2moe"
    gguf_norm_topk = False  # llama.cpp's qwen2moe never renormalises (its converter drops norm_topk_prob)
    defaults = dict(num_key_value_heads=16, head_dim=None, max_position_embeddings=32768, num_experts=60,
                    num_experts_per_tok=4, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                    norm_topk_prob=False, decoder_sparse_step=1)
    ffn_key = "moe_intermediate_size"
    ref_defaults = dict(Family.ref_defaults, num_key_value_heads=16, num_experts=60, num_experts_per_tok=4,
                        moe_intermediate_size=1408, shared_expert_intermediate_size=5632, norm_topk_prob=False,
                        decoder_sparse_step=1, mlp_only_layers=[], intermediate_size=5632)
    ref_experts = dict(router="mlp.gate.weight", expert="mlp.experts.%d.", gate="gate_proj", up="up_proj",
                       down="down_proj", count="num_experts", top_k="num_experts_per_tok",
                       width="moe_intermediate_size", norm="norm_topk_prob", shared="mlp.shared_expert.",
                       shared_gate="mlp.shared_expert_gate.weight", shared_width="shared_expert_intermediate_size")


@register
class Qwen3Moe(QwenExperts, Qwen3):
    """Qwen3 with every layer's feed-forward a mixture of experts (Qwen3MoeSparseMoeBlock): a
    router (mlp.gate) whose softmax picks num_experts_per_tok of num_experts experts, their
    probabilities renormalised when norm_topk_prob; each expert a SwiGLU of moe_intermediate_size."""
    model_type, hf_class, gguf_arch = "qwen3_moe", "Qwen3MoeForCausalLM", "qwen3moe"
    gguf_norm_topk = True  # llama.cpp's qwen3moe always renormalises (its converter drops norm_topk_prob)
    defaults = dict(num_key_value_heads=4, head_dim=None, max_position_embeddings=32768, num_experts=128,
                    num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=False, decoder_sparse_step=1)
    ffn_key = "moe_intermediate_size"
    ref_defaults = dict(Family.ref_defaults, num_key_value_heads=4, num_experts=128, num_experts_per_tok=8,
                        moe_intermediate_size=768, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
                        intermediate_size=6144)
    ref_experts = dict(router="mlp.gate.weight", expert="mlp.experts.%d.", gate="gate_proj", up="up_proj",
                       down="down_proj", count="num_experts", top_k="num_experts_per_tok",
                       width="moe_intermediate_size", norm="norm_topk_prob")
