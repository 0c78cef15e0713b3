"""The PyTorch reference tools/reference.py runs: attn.c model files (model.py) and Hugging Face
directories (hf.py)."""
