"""Llama (Llama 2, 3.x, SmolLM2, TinyLlama), Mistral and Mixtral."""
from attn.errors import Bad
from attn.archs.base import B_ATTN, Experts, Family, number, register, setting
from attn import modelfile as mf


@register
class Llama(Family):
    model_type, hf_class, gguf_arch = "llama", "LlamaForCausalLM", "llama"
    defaults = dict(num_key_value_heads=None, head_dim=None, max_position_embeddings=2048)
    biases = dict(attention_bias=B_ATTN, mlp_bias=mf.BIAS_FFN)
    gguf_rope_permuted = gguf_optional_biases = True
    gguf_rope_freqs = True  # llama.cpp stores Llama 3's rope_scaling as the rope_freqs tensor

    def ref_biases(self, c):
        return c.get("attention_bias", False), c.get("attention_bias", False), c.get("mlp_bias", False)


@register
class Mistral(Family):
    """Every layer attends to its last sliding_window positions (llama.cpp converts it as llama)."""
    model_type, hf_class = "mistral", "MistralForCausalLM"
    defaults = dict(num_key_value_heads=8, head_dim=None, max_position_embeddings=4096 * 32, sliding_window=4096)
    ref_defaults = dict(Family.ref_defaults, num_key_value_heads=8)

    def configure(self, cpath, c, cfg, terms, local_theta):
        window = setting(c, self, "sliding_window")
        if window is None:
            return None
        # every layer is local: global_every past the last layer
        window = number(cpath, "sliding_window", window, integer=True)
        cfg.update(sliding_window=window, global_every=cfg["n_layers"] + 1, rope_local_theta=cfg["rope_theta"])
        return mistral_context(cpath, window)

    def ref_biases(self, c):
        return False, False, False

    def ref_window(self, conf):
        return conf.get("sliding_window", 4096)  # MistralConfig's: 4096 when absent, none when null


def mistral_context(cpath, window):
    """Source.context for a Mistral, every layer of which attends to its last `window` positions:
    at a context no longer than the window, the window changes nothing and is not stored (the
    layers are then global, their RoPE scaled as rope_scaling says); at a longer one every layer
    is local, and a local layer's RoPE is never scaled, so rope_scaling is refused."""
    def fit(cfg, seq_len):
        if window >= seq_len:
            return dict(cfg, sliding_window=0, global_every=0, rope_local_theta=0.0)
        if cfg.get("rope_scaling"):
            raise Bad(cpath, "rope_scaling with sliding_window %d below the context %d: every layer is then local, "
                      "and this build scales only global layers' RoPE (--seq-len %d or less converts it without "
                      "the window)" % (window, seq_len, window))
        return cfg
    return fit


@register
class Mixtral(Experts, Mistral):
    """Mistral with every layer's feed-forward a mixture of experts (MixtralSparseMoeBlock): a router
    (block_sparse_moe.gate) whose softmax picks num_experts_per_tok of num_local_experts experts,
    their probabilities always renormalised; each expert w2(silu(w1 x) * w3 x) of intermediate_size.
    llama.cpp converts it as llama with expert_count, its q/k rows permuted as Llama's."""
    model_type, hf_class, gguf_moe_arch = "mixtral", "MixtralForCausalLM", "llama"
    gguf_rope_permuted = True
    defaults = dict(Mistral.defaults, num_local_experts=8, num_experts_per_tok=2, rope_theta=1e6, rms_norm_eps=1e-5,
                    sliding_window=None)
    ref_defaults = dict(Mistral.ref_defaults, rms_norm_eps=1e-5, rope_theta=1e6)
    ref_experts = dict(router="block_sparse_moe.gate.weight", expert="block_sparse_moe.experts.%d.", gate="w1",
                       up="w3", down="w2", count="num_local_experts", top_k="num_experts_per_tok",
                       width="intermediate_size", norm=None)

    def ref_window(self, conf):
        return conf.get("sliding_window")  # MixtralConfig's: none when absent
