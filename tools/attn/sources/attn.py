"""attn.c's own files as a source: a model file (docs/FORMAT.md), and convert.py
--export-torch's output (given loaded by torchfile.read_torch)."""

import struct

import numpy as np

from attn import chat_template
from attn import modelfile as mf
from attn import storage
from attn.errors import Bad
from attn.tensors import Source, Stored, Tensors, stored
from attn.weights import Q8Stored, q8_0_choice


def read_attn(path):
    """An attn.c model file as a source: float32, bfloat16 or float16 matrices as stored, Q8_0
    ones as their integers and scales (kept exactly unless --weights says otherwise); a
    type-per-matrix file's (format version 6) dequantised."""
    try:
        cfg, tok, t = mf.read_model(path, dequantize=False)
    except (ValueError, OSError) as e:
        raise Bad(path, str(e))
    bf16 = cfg["weight_type"] == storage.WEIGHTS_BF16
    types = cfg.pop("matrix_types", None) or {}
    t = {n: storage.dequantize_matrix(types[n], a, shape) if n in types else a
         for (n, shape), a in zip(mf.tensor_specs(cfg), t.values())}
    gs = cfg["group_size"]
    sd = {n: Q8Stored.of(a[0], a[1], gs) if isinstance(a, tuple) else
          Stored(a, "BF16") if bf16 and a.dtype == np.uint16 else stored(a) for n, a in t.items()}
    for n, type_name in types.items():
        if type_name not in ("F32", "F16", "BF16"):
            sd[n].quantised = type_name
    tn = Tensors(path, sd)
    t = {n: tn.take(n) for n in sd}
    q8 = cfg["weight_type"] == storage.WEIGHTS_Q8_0
    if types:  # dequantised exactly; a file is written in one type of weights again unless asked
        cfg["weight_type"] = storage.WEIGHTS_F32
    kind = " (Q8_0)" if q8 else " (a type per matrix, dequantised)" if types else ""
    return Source(cfg, t, "attn.c model file" + kind, tok, chat=mf.read_chat_section(path),
                  weights=q8_0_choice(gs, "the file's Q8_0 matrices") if q8 else None)


def read_own_export(path, ck):
    cfg = dict(ck["attn_config"])
    tn = Tensors(path, ck["model"])
    t = {n: tn.take(n) for n, _ in mf.tensor_specs(mf.complete_config(cfg))}
    tn.finish()
    tk = ck["tokenizer"]
    tok = (np.asarray(tk["blob"], dtype=np.uint8).tobytes(), int(tk["kind"]), int(tk["flags"]),
           int(tk["bos_id"]), int(tk["eos_id"]))
    return Source(cfg, t, "attn.c torch export", tok, chat=export_chat(path, ck.get("chat"), tok[0]))


def export_chat(path, chat, blob):
    """The chat section of --export-torch's "chat" entry (exports/torch.py; None or absent: none),
    checked as a model file's is."""
    if chat is None:
        return b""
    try:
        section = chat_template.pack_section(chat["family"], list(chat["ids"]), chat["text"], chat["template"])
        chat_template.parse_section(section, len(mf.parse_tokenizer(blob)[0]))
    except (ValueError, KeyError, TypeError, AttributeError, struct.error) as e:
        raise Bad(path, "its chat entry is not a chat section (%s: %s)" % (type(e).__name__, e))
    return section
