"""GPT-2: learned positions, LayerNorm, GELU, every bias, Conv1D matrices (sources/hf.py's
read_hf_gpt2 reads its directory, nanoGPT's names after "transformer.")."""
from attn.archs.base import Family, register


@register
class GPT2(Family):
    model_type, hf_class, gguf_arch, kind = "gpt2", "GPT2LMHeadModel", "gpt2", "gpt2"
    hf_layer = "h.%s."
    gguf_names = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
                  "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    gguf_top = {"token_embd": "wte", "position_embd": "wpe", "output_norm": "ln_f", "output": "lm_head"}
    gguf_keys = dict(n_embd="embedding_length", n_layer="block_count", n_head="attention.head_count",
                     n_positions="context_length", n_inner="feed_forward_length")
    ref_defaults = dict(layer_norm_epsilon=1e-5, activation_function="gelu_new", tie_word_embeddings=True,
                        n_inner=None, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, n_positions=1024)

    def gguf_own_config(self, g, V, tied):
        return dict(model_type="gpt2", n_embd=g.get("embedding_length"), n_layer=g.get("block_count"),
                    n_head=g.get("attention.head_count"), vocab_size=V, n_positions=g.get("context_length"),
                    n_inner=g.get("feed_forward_length"), activation_function="gelu_new",
                    layer_norm_epsilon=g.get("attention.layer_norm_epsilon", kind=float), tie_word_embeddings=tied)
