"""Qwen2 (Qwen2.5) and Qwen3."""
from attn.errors import Bad
from attn.archs.base import B_ATTN, Family, register
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

