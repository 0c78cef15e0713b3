"""The tokenizer files --tokenizer names (module docstring of convert.py), as the model
file's tokenizer section."""
import os


from attn import modelfile as mf
from attn.errors import Bad
from attn.torchfile import read_char_meta


# ---- tokenizers ----

def read_tokenizer(path, vocab_size, model):
    """((blob, kind, flags, bos, eos), notes) from any tokenizer file the module docstring lists,
    for the vocab_size of the checkpoint model (named in messages); notes are lines on what the
    reader left out. A Hugging Face tokenizer.json comes with the tokenizer_config.json,
    generation_config.json and config.json beside it."""
    if os.path.isdir(path):
        for names in (("tokenizer.json",), ("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"),
                      ("tokenizer.bin",)):
            if all(os.path.exists(os.path.join(path, n)) for n in names):
                return read_tokenizer(os.path.join(path, names[0]), vocab_size, model)
        raise Bad(path, "directory has no tokenizer (tokenizer.json, vocab.json+merges.txt, encoder.json+vocab.bpe "
                  "or tokenizer.bin)")
    if not os.path.exists(path):
        raise Bad(path, "tokenizer file not found")
    base, notes = os.path.basename(path), []
    try:
        if base.endswith(".pkl"):
            tok = read_char_meta(path, vocab_size, model)
        elif is_gguf(path):
            from attn import tokenizer_gguf
            tok = tokenizer_gguf.from_gguf(path, vocab_size)
            notes = tok.notes
        elif base.endswith(".json") and base != "tokenizer.json":
            from attn import tokenizer_blob
            other = os.path.join(os.path.dirname(path), "vocab.bpe" if base == "encoder.json" else "merges.txt")
            if not os.path.exists(other):
                raise Bad(path, "needs %s beside it" % os.path.basename(other))
            tok = tokenizer_blob.from_gpt2(path, other)
            notes = tok.notes
        elif base.endswith(".json"):
            from attn import tokenizer_blob
            tok = tokenizer_blob.from_hf_dir(path, vocab_size)
            notes = tok.notes
        else:
            from attn import tokenizer_blob
            tok = tokenizer_blob.read_llama2c_tokenizer(path, vocab_size)
        n = len(mf.parse_tokenizer(tok[0])[0])
        if n > vocab_size:
            raise Bad(path, "has %d pieces, more than the model's vocab_size %d (%s)" % (n, vocab_size, model))
        return (mf.resize_tokenizer(tok[0], vocab_size),) + tuple(tok[1:]), notes
    except ImportError:
        raise Bad(path, "this tokenizer kind needs tools/attn/tokenizer_blob.py, which is missing")
    except (ValueError, KeyError, OSError) as e:
        # the readers' messages start with the file at fault, which may be one beside path
        where, _, msg = str(e).partition(": ")
        raise Bad(where, msg) if msg and os.path.exists(where) else Bad(path, "bad tokenizer: %s" % e)


def is_gguf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def default_tokenizer(src):
    """The tokenizer a Hugging Face directory carries, if any: tokenizer.json first, which
    transformers' fast tokenizers read."""
    if os.path.isdir(src):
        for n in ("tokenizer.json", "vocab.json", "tokenizer.bin"):
            if os.path.exists(os.path.join(src, n)):
                return os.path.join(src, n)
    return None
