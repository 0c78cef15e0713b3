"""An attn.c model file as a PyTorch state dict (convert.py --export-torch).

The file is {"model": state dict, "attn_config": the config, "tokenizer": {blob, kind, flags,
bos_id, eos_id}, "chat": the chat section or None}: "chat" is {"family": its name or None (no
family), "ids", "text", "template": the Jinja template's text}, plain strings and ints, so that
the template is there for a reader and convert.py reads the same section back."""

import io

import numpy as np

from attn import chat_template
from attn import modelfile as mf
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
    chat = None
    if source.chat:
        name, ids, text, template = chat_template.parse_section(source.chat, len(mf.parse_tokenizer(blob)[0]))
        chat = {"family": name, "ids": ids, "text": text, "template": template}
    obj = {"model": {k: as_stored(v) for k, v in source.tensors.items()},
           "attn_config": source.cfg,
           "tokenizer": {"blob": torch.frombuffer(bytearray(blob), dtype=torch.uint8), "kind": kind,
                         "flags": flags, "bos_id": bos, "eos_id": eos},
           "chat": chat}
    # Serialised in memory first: torch's zip writer aborts the process (std::terminate) when a
    # write fails under it, so a full disk must meet our own write instead.
    buf = io.BytesIO()
    torch.save(obj, buf)
    try:
        with outfile.replacing(out) as f:
            f.write(buf.getbuffer())
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
