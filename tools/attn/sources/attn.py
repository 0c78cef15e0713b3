"""attn.c's own files as a source: a model file (docs/FORMAT.md), and convert.py
--export-torch's output (given loaded by torchfile.read_torch)."""

import numpy as np

from attn import modelfile as mf
from attn.errors import Bad
from attn.tensors import Source, Stored, Tensors, stored


def read_attn(path):
    """An attn.c model file as a source: float32, bfloat16 or float16 matrices as stored, Q8_0
    ones and a type-per-matrix file's (format version 6) dequantised."""
    try:
        cfg, tok, t = mf.read_model(path, dequantize=False)
    except (ValueError, OSError) as e:
        raise Bad(path, str(e))
    bf16 = cfg["weight_type"] == mf.WEIGHTS_BF16
    types = cfg.pop("matrix_types", None) or {}
    t = {n: mf.dequantize_matrix(types[n], a, shape) if n in types else a
         for (n, shape), a in zip(mf.tensor_specs(cfg), t.values())}
    sd = {n: Stored(mf.dequantize_q8_0(*a), "F32") if isinstance(a, tuple) else
          Stored(a, "BF16") if bf16 and a.dtype == np.uint16 else stored(a) for n, a in t.items()}
    tn = Tensors(path, sd)
    t = {n: tn.take(n) for n in sd}
    q8 = cfg["weight_type"] == mf.WEIGHTS_Q8_0
    if types:  # dequantised exactly; a file is written in one type of weights again unless asked
        cfg["weight_type"] = mf.WEIGHTS_F32
    kind = " (Q8_0, dequantised)" if q8 else " (a type per matrix, dequantised)" if types else ""
    return Source(cfg, t, "attn.c model file" + kind, tok,
                  chat=mf.read_chat_section(path))


def read_own_export(path, ck):
    cfg = dict(ck["attn_config"])
    tn = Tensors(path, ck["model"])
    t = {n: tn.take(n) for n, _ in mf.tensor_specs(mf.complete_config(cfg))}
    tn.finish()
    tk = ck["tokenizer"]
    tok = (np.asarray(tk["blob"], dtype=np.uint8).tobytes(), int(tk["kind"]), int(tk["flags"]),
           int(tk["bos_id"]), int(tk["eos_id"]))
    return Source(cfg, t, "attn.c torch export", tok)
