"""The model families, one class per Hugging Face model_type (base.py says what a family holds).
Adding a family is a module here, imported below, and its tests."""
from attn.archs.base import FAMILIES, gguf_families  # noqa: F401
from attn.archs import gpt2, llama, qwen, gemma3, olmoe  # noqa: F401  (each registers its families)

# model_types refused with a reason rather than as unknown
REFUSED = {"gemma3": "model_type 'gemma3' (Gemma 3 4B and up, with their vision tower) is not supported by this "
                     "build; the text-only gemma3_text (Gemma 3 270M and 1B) is"}
