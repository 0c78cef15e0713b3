"""generation_config.json's sampling defaults as the model file's version 7 fields
(docs/FORMAT.md), and back: what convert.py stores and --export-hf writes."""
import numpy as np

from attn.modelfile import SAMPLING

GENERATION_NAMES = dict(temperature="temperature", top_p="top_p", top_k="top_k", min_p="min_p",
                        repeat_penalty="repetition_penalty")  # version 7's fields as generation_config.json names them


def generation_config(c):
    """sampling_defaults undone: the generation_config.json keys of the sampling defaults a config holds
    ({} for none); temperature 0 is do_sample false."""
    # float32's shortest spelling: 0.6, not 0.6000000238418579
    out = {GENERATION_NAMES[k]: c[k] if k == "top_k" else float(str(np.float32(c[k])))
           for k, bit, _, _ in SAMPLING if c.get("sampling_flags", 0) & bit}
    if out:
        out["do_sample"] = out.get("temperature") != 0
        if not out["do_sample"]:
            del out["temperature"]
    return out


def sampling_defaults(gen):
    """The config fields of version 7 from a generation_config.json's dict: temperature, top_p, top_k,
    min_p and repetition_penalty where it gives them, and temperature 0 (greedy) where do_sample is
    false, as transformers' generate() then ignores the others."""
    c, flags = {}, 0
    for k, bit, lo, hi in SAMPLING:
        v = 0 if k == "temperature" and gen.get("do_sample") is False else gen.get(GENERATION_NAMES[k])
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ValueError("%s %r is not a number in [%g, %g]" % (GENERATION_NAMES[k], v, lo, hi))
        c[k], flags = v, flags | bit
    return dict(c, sampling_flags=flags) if flags else {}
