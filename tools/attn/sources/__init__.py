"""Where convert.py finds each source format (one module per format)."""
