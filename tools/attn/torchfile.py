"""Everything that is a pickle: checkpoints (.pt), pytorch_model.bin state dicts and nanoGPT's
meta.pkl, each read by safe_pickle, which runs no code from them. read_torch hands a checkpoint
to the source module of its layout."""


from attn import modelfile as mf
from attn import safe_pickle
from attn.errors import Bad
from attn.sources.attn import read_own_export
from attn.sources.llama2c import read_llama2c_pt
from attn.sources.nanogpt import read_nanogpt
from attn.tensors import stored


def read_torch(path):
    import pickle
    try:
        ck = safe_pickle.torch_load(path)
    except safe_pickle.Refused as e:
        raise Bad(path, str(e))
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as e:
        if "zip" in str(e).lower() or "truncat" in str(e).lower() or "EOF" in str(e):
            raise Bad(path, "cannot read the PyTorch file, truncated or corrupt (%s)" % str(e).splitlines()[0])
        raise Bad(path, "cannot read the PyTorch file: %s" % (str(e).splitlines() or [type(e).__name__])[0])
    except EOFError:
        raise Bad(path, "truncated PyTorch file")
    if not isinstance(ck, dict):
        raise Bad(path, "a PyTorch file holding %s, not a checkpoint dict" % type(ck).__name__)
    if "attn_config" in ck:
        return read_own_export(path, ck)
    if "model" not in ck or "model_args" not in ck:
        raise Bad(path, "unknown PyTorch checkpoint layout (keys %s; expected 'model' and 'model_args')"
                  % ", ".join(sorted(map(str, ck))[:8]))
    if "n_layer" in ck["model_args"]:
        return read_nanogpt(path, ck)
    if "dim" in ck["model_args"]:
        return read_llama2c_pt(path, ck)
    raise Bad(path, "unknown model_args %s (neither nanoGPT nor llama2.c)" % sorted(ck["model_args"]))


def read_torch_state_dict(path):
    try:
        sd = safe_pickle.torch_load(path)
    except safe_pickle.Refused as e:
        raise Bad(path, str(e))
    except Exception as e:
        raise Bad(path, "cannot read the PyTorch file: %s" % (str(e).splitlines() or [type(e).__name__])[0])
    return {k: stored(v) for k, v in sd.items()}


def read_char_meta(path, vocab_size, model):
    """nanoGPT's character-level meta.pkl (stoi/itos): one piece per character, no merges. nanoGPT
    gives such a model exactly meta.pkl's characters as its vocabulary: any other vocab_size means
    another dataset's meta.pkl (or a model that has none)."""
    with open(path, "rb") as f:
        try:
            meta = safe_pickle.load(f)
        except safe_pickle.Refused as e:
            raise Bad(path, str(e))
        except Exception as e:  # unpickling fails in as many ways as the bytes allow
            raise Bad(path, "cannot read the pickle (%s)" % type(e).__name__)
    itos = meta.get("itos") if isinstance(meta, dict) else None
    if not isinstance(itos, dict):
        raise Bad(path, "has no itos table: not a nanoGPT character-level meta.pkl")
    if len(itos) != vocab_size:
        raise Bad(path, "has %d characters, but %s has vocab_size %d: nanoGPT gives a character-level model exactly "
                  "the characters of its dataset's meta.pkl, so this one belongs to another model"
                  % (len(itos), model, vocab_size))
    pieces = [itos[i].encode("utf-8") for i in range(len(itos))]
    return mf.pack_tokenizer(pieces, [0.0] * len(pieces)), mf.TOK_SENTENCEPIECE, 0, -1, -1
