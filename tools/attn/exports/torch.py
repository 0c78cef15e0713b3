"""An attn.c model file as a PyTorch state dict (convert.py --export-torch)."""

import numpy as np

from attn import outfile
from attn.errors import Bad
from attn.sources.attn import read_attn


def export_torch(model, out):
    import torch
    source = read_attn(model)
    blob, kind, flags, bos, eos = source.tok
    def as_stored(w):  # bfloat16 from its bits
        if w.stored == "BF16":
            return torch.from_numpy(np.array(w.st.raw).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.array(w.st.raw))
    obj = {"model": {k: as_stored(v) for k, v in source.tensors.items()},
           "attn_config": source.cfg,
           "tokenizer": {"blob": torch.frombuffer(bytearray(blob), dtype=torch.uint8), "kind": kind,
                         "flags": flags, "bos_id": bos, "eos_id": eos}}
    try:
        with outfile.replacing(out) as f:
            torch.save(obj, f)
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
