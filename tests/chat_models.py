"""The small chat model of tests/test_chat.py and tests/test_chat_console.py: SmolLM2-135M-Instruct's
published config cut to 1 layer of width 64 with random weights, its tokenizer (tools/attn/families.py's) and
its tokenizer_config.json, whose ChatML template tools/convert.py stores."""
import json
import os
import subprocess

from pycase import ROOT  # puts tools/ on the path too
from attn import safetensors  # noqa: E402
from attn import families  # noqa: E402


def build_smol(d, out, width=64, sampling=None, head_dim=16):
    """The Hugging Face directory d, converted to the model file out; its layer width wide (head_dim per
    head, half as many key/value heads); sampling: generation_config.json's sampling settings to add to
    the published ones."""
    conf = families.family_config("smollm2_135m", 1)
    conf.update(hidden_size=width, intermediate_size=2 * width, num_attention_heads=width // head_dim,
                num_key_value_heads=max(1, width // head_dim // 2))
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f)
    safetensors.write_safetensors(os.path.join(d, "model.safetensors"), families.family_weights(conf, seed=3))
    families.write_family_tokenizer(d, "smollm2_135m")
    if sampling:
        gpath = os.path.join(d, "generation_config.json")
        gen = json.load(open(gpath))
        gen.update(sampling)
        with open(gpath, "w") as f:
            json.dump(gen, f)
    r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "convert.py"), d, out], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
