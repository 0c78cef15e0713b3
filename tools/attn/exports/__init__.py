"""The formats convert.py writes an attn.c model file back out as."""
