"""Convert a checkpoint into an attn.c model file (docs/FORMAT.md), or export one back.

  convert.py SRC OUT [--tokenizer TOK] [--seq-len N] [--weights f32|bf16|f16|q8_0 [--group-size N]]
             [--quantize q4_0|q4_1|q5_0|q5_1|q8_0|q2_k|q3_k_s|q3_k_m|q3_k_l|q4_k_s|q4_k_m|q5_k_s|q5_k_m|q6_k
                         |q3_k|q4_k|q5_k]
             [--allow-requantize] [--allow-f16-fallback] [--chat-template NAME] [--force]
  convert.py MODEL.bin OUT.pt --export-torch     convert.py MODEL.bin DIR --export-hf

SRC is recognised by its content (llama2.c .bin and .pt, nanoGPT ckpt.pt, a Hugging Face
directory, a GGUF file, an attn.c model file or --export-torch's output) and read by the module
of tools/attn/sources/ for its format; this file only chooses the source, the tokenizer, the
chat section and the stored types, and writes OUT. docs/CONVERT.md is the reference: the
sources, the weight types and which keep values exactly, the tokenizers, the exports, the
output rule (--force, -), and what happens to every setting of every source.
"""
import argparse
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
    from attn import cli_main
    cli_main.guard()
import numpy as np  # noqa: E402

from attn import modelfile as mf  # noqa: E402
from attn import generation  # noqa: E402

from attn import storage  # noqa: E402
from attn import outfile  # noqa: E402
from attn import safe_pickle  # noqa: E402
from attn.errors import Bad, listing  # noqa: E402
from attn.exports.torch import export_torch  # noqa: E402
from attn.sources.attn import read_attn  # noqa: E402
from attn.sources.hf import read_hf_dir  # noqa: E402
from attn.sources.llama2c import read_llama2c_ak42, read_llama2c_legacy  # noqa: E402
from attn.sources.tokenizer import default_tokenizer, is_gguf, read_tokenizer  # noqa: E402
from attn.torchfile import read_torch  # noqa: E402
from attn.tensors import with_context  # noqa: E402
from attn.weights import add_quantize_arguments, block_types_for  # noqa: E402
from attn.weights import bits_per_weight, check_block_types, q8_0_types  # noqa: E402
from attn.weights import storage_config, weight_choice  # noqa: E402


# ---- entry points ----

def read_source(src):
    """The Source of whatever SRC is."""
    if os.path.isdir(src):
        return read_hf_dir(src)
    if not os.path.exists(src):
        raise Bad(src, "no such file or directory")
    if not os.path.isfile(src):  # a FIFO or device would block in open() or never end
        raise Bad(src, "not a regular file")
    with open(src, "rb") as f:
        head = f.read(28)
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        return read_torch(src)
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == 0x616B3432:
        return read_llama2c_ak42(src, open(src, "rb").read())
    if head[:4] == mf.MAGIC:
        return read_attn(src)
    if head[:4] == b"GGUF":
        from attn.sources import gguf as gguf_model
        return gguf_model.read_gguf(src)
    if len(head) < 28:  # the smallest header of any format here: llama2.c's 7 int32
        raise Bad(src, "file of %d bytes is too short for any known format" % len(head))
    if src.endswith(".safetensors"):
        raise Bad(src, "a bare .safetensors file has no config; pass its Hugging Face directory")
    return read_llama2c_legacy(src, np.memmap(src, dtype=np.uint8, mode="r"))


def chat_section(src, tokpath, tok, source, name):
    """(the chat section for OUT, b"" for none; its family for the closing note, None for none or
    family 0): from --chat-template NAME, else the template beside the tokenizer.json (or in SRC,
    or a GGUF's), else the source's own section when OUT keeps its tokenizer. The template's text
    is kept in it; a template of no known family is kept with family 0 and a note, never refused."""
    from attn import chat_template
    folder = tokpath if tokpath and os.path.isdir(tokpath) else \
        os.path.dirname(tokpath) if tokpath and os.path.basename(tokpath) == "tokenizer.json" else \
        src if os.path.isdir(src) else None
    try:
        template = chat_template.read_template(folder) if folder else None
    except (ValueError, OSError) as e:
        raise Bad(folder, str(e))
    where = os.path.join(folder, "tokenizer_config.json") if folder else src
    gguf = tokpath or src
    if folder is None and os.path.isfile(gguf) and is_gguf(gguf):  # a GGUF keeps tokenizer.chat_template
        from attn.sources import gguf as gguf_model
        template, where = gguf_model.chat_template(gguf), gguf
    if template is None and name is None:
        section, where = (source.chat if source.chat and not tokpath else b""), src
    else:
        try:
            section = chat_template.chat_section(template, tok, name)
        except ValueError as e:
            raise Bad(where, str(e))
    if not section:
        return b"", None
    try:
        family, _, _, text = chat_template.parse_section(section, len(mf.parse_tokenizer(tok[0])[0]))
    except ValueError as e:
        raise Bad(src, str(e))
    if family is None:  # kept, but -m chat cannot use it alone: one line, and the conversion goes on
        print("convert.py: note: %s: %s" % (where, chat_template.no_family_note(text)), file=sys.stderr)
    return section, family


def generation_defaults(src):
    """A Hugging Face directory's sampling defaults (generation_config.json) as config fields, kept in
    the file (format version 7) for ./run to use unless a flag overrides them; {} without the file."""
    path = os.path.join(src, "generation_config.json") if os.path.isdir(src) else None
    if not path or not os.path.exists(path):
        return {}
    try:
        gen = json.load(open(path))
        return generation.sampling_defaults(gen if isinstance(gen, dict) else {})
    except ValueError as e:
        raise Bad(path, str(e))


def convert(src, out, tokenizer=None, seq_len=None, weights=None, group_size=None, chat_template=None,
            allow_f16=False, allow_requantize=False, file_type=None):
    """Returns the config written, the Source read, a note on the weight type chosen and the chat
    template's family (None without one). weights: --weights; file_type: --quantize; allow_f16,
    allow_requantize: --allow-f16-fallback and --allow-requantize (weights.check_block_types)."""
    source = read_source(src)
    cfg, tensors = with_context(source, seq_len, src)
    cfg.update(generation_defaults(src))
    tokpath = tokenizer or default_tokenizer(src)
    if tokpath:
        model = os.path.join(src, "config.json") if os.path.isdir(src) else src  # where vocab_size comes from
        tok, notes = read_tokenizer(tokpath, cfg["vocab_size"], model)
        for n in notes:
            print("convert.py: note: %s: %s" % (tokpath, n), file=sys.stderr)
    elif source.tok is None:
        raise Bad(src, "%s carries no vocabulary: pass --tokenizer (%s)" % (source.desc, source.tok_hint))
    else:
        tok = source.tok
    chat, family = chat_section(src, tokpath, tok, source, chat_template)
    # Float matrices in Q8_0 groups too small for 9 bits a weight fall back per matrix; quantised
    # ones keep mapping onto our Q8_0, exactly where their blocks allow (Source.weights)
    q8_fallback = weights == "q8_0" and group_size is None and not any(
        getattr(tensors[n], "quantised", lambda: None)() for n, _ in mf.matrix_specs(mf.complete_config(cfg))) \
        and q8_0_types(cfg)
    if file_type or q8_fallback:
        if group_size is not None:
            raise Bad("--group-size %d" % group_size, "a group size applies only to our Q8_0 (--weights q8_0); "
                      "llama.cpp's blocks have a fixed size")
        if source.output is not None and file_type:  # llama-quantize types output and token_embd apart
            cfg, tensors = dict(cfg, tied_classifier=0), dict(tensors, classifier=source.output)
        try:
            weights, why = q8_fallback or block_types_for(cfg, file_type)
        except ValueError as e:
            raise Bad(src, str(e))
        check_block_types(cfg, tensors, "--quantize %s" % file_type if file_type else "--weights q8_0", weights,
                          allow_f16, allow_requantize)
    elif source.weights:
        weights, why, group_size = source.weights(tensors, weights, group_size)
    else:
        weights, why = weight_choice(tensors, weights)
    try:
        cfg = storage_config(cfg, weights, group_size, "convert.py")
        mf.write_model(out, cfg, tok, tensors, chat)
    except ValueError as e:
        raise Bad(src, str(e))
    except OSError as e:
        raise Bad(out, "cannot write: %s" % (e.strerror or e))
    return cfg, source, why, family


def main(argv):
    class Parser(argparse.ArgumentParser):
        def error(self, message):
            sys.stderr.write("convert.py: %s (see --help)\n" % message)
            sys.exit(1)

    ap = Parser(description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="checkpoint file or Hugging Face directory (MODEL.bin with --export-torch)")
    ap.add_argument("out", help="attn.c model file to write, - for standard output (OUT.pt with --export-torch)")
    ap.add_argument("--tokenizer", help="tokenizer file or directory")
    ap.add_argument("--seq-len", type=int, help="the context length: shorter for a long-context checkpoint "
                    "(e.g. 128k); longer only for RoPE or sinusoidal positions")
    ap.add_argument("--export-torch", action="store_true", help="write MODEL.bin back as a PyTorch state dict")
    ap.add_argument("--export-hf", action="store_true", help="write MODEL.bin as a Hugging Face directory OUT "
                    "(tools/attn/exports/hf.py)")
    ap.add_argument("--force", action="store_true", help="replace an existing OUT: an attn.c model file; with "
                    "--export-torch a file it wrote; with --export-hf a folder it wrote (never another file or folder)")
    add_quantize_arguments(ap, block_types=True)
    from attn.chat_template import FAMILIES
    ap.add_argument("--chat-template", metavar="NAME", choices=FAMILIES,
                    help="the chat format to store, instead of the one the checkpoint's chat template is "
                    "recognised as: %s or %s" % (", ".join(FAMILIES[:-1]), FAMILIES[-1]))
    a = ap.parse_args(argv)
    if a.quantize and a.file_type:
        ap.error("--quantize %s contradicts the weight type given before (%s): --weights q8_0 is our Q8_0, "
                 "--quantize a llama.cpp file type" % (a.file_type, a.quantize))
    if a.export_torch and (a.quantize or a.file_type):
        ap.error("--weights does not apply to --export-torch, whose state dict holds the weights as the model "
                 "file does")
    if a.export_hf and (a.quantize or a.file_type or a.tokenizer or a.group_size is not None or a.seq_len is not None):
        ap.error("--weights, --group-size, --tokenizer and --seq-len do not apply to --export-hf, which writes "
                 "the model file as it is")
    for inp, what in ((a.src, "a checkpoint"), (a.tokenizer, "a tokenizer")):
        if inp == outfile.STDIO:  # formats are told apart by name and by seeking, and may be folders
            sys.stderr.write("convert.py: -: %s is not read from standard input; give its path\n" % what)
            return 1
    try:  # a device or FIFO as OUT would be replaced by a regular file in the end
        outfile.check(a.out, "a directory" if a.export_hf else "a regular file")
    except OSError as e:
        sys.stderr.write("convert.py: %s: %s\n" % (a.out, e))
        return 1
    # An output that is an input (or a file in an input directory) would be destroyed.
    for inp in (a.src, a.tokenizer):
        if not (inp and a.out != outfile.STDIO and os.path.exists(a.out) and os.path.exists(inp)):
            continue
        out_dir = os.path.dirname(os.path.abspath(a.out))
        if os.path.samefile(a.out, inp) or (os.path.isdir(inp) and os.path.samefile(out_dir, inp)):
            sys.stderr.write("convert.py: %s: writing it would overwrite the input %s\n" % (a.out, inp))
            return 1
    try:  # before any work, as ./train's claim_outputs: a file of another kind, or one without --force
        if a.export_hf:
            from attn.exports import hf as export_hf
            export_hf.claim_dir(a.out, a.force)
        elif a.export_torch:
            outfile.claim(a.out, a.force, lambda p: "attn_config" in safe_pickle.torch_strings(p),
                          "a PyTorch file that --export-torch wrote")
        else:
            outfile.claim(a.out, a.force, mf.is_model_file, "an attn.c model file")
    except OSError as e:
        sys.stderr.write("convert.py: %s: %s\n" % (a.out, e))
        return 1
    try:
        if a.export_torch:
            export_torch(a.src, a.out)
            print("convert.py: wrote %s" % a.out, file=sys.stderr)
        elif a.export_hf:
            from attn.exports import hf as export_hf
            mt = export_hf.export(a.src, a.out)
            print("convert.py: %s -> %s: Hugging Face %s directory" % (a.src, a.out, mt), file=sys.stderr)
        else:
            cfg, source, why, family = convert(a.src, a.out, a.tokenizer, a.seq_len, a.quantize, a.group_size,
                                               a.chat_template, a.allow_f16_fallback, a.allow_requantize, a.file_type)
            weights = {storage.WEIGHTS_F32: "float32", storage.WEIGHTS_BF16: "bfloat16", storage.WEIGHTS_F16: "float16",
                       storage.WEIGHTS_Q8_0: "Q8_0, group size %d" % cfg["group_size"],
                       storage.WEIGHTS_PER_MATRIX: "per-matrix"}[cfg["weight_type"]]
            skipped = "; skipped %s, buffers a model file does not need" % listing(source.skipped) \
                if source.skipped else ""
            chat = "; chat template %s" % family if family else ""
            print("convert.py: %s -> %s: dim %d, %d layers, %d heads (%d kv), vocab %d, seq_len %d, %s weights (%s), "
                  "%.2f bits a weight%s%s"
                  % (source.desc, a.out, cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"],
                     cfg["vocab_size"], cfg["seq_len"], weights, why, bits_per_weight(cfg)[1], skipped, chat),
                  file=sys.stderr)
    except Bad as e:
        sys.stderr.write("convert.py: %s: %s\n" % (e.path, e.msg))
        return 1
    except MemoryError:
        sys.stderr.write("convert.py: %s: out of memory\n" % a.src)
        return 1
    except ModuleNotFoundError:  # torch, imported when needed: cli_main says what to install
        raise
    except Exception as e:  # a malformed file can break a reader in ways not foreseen
        msg = str(e).splitlines()[0] if str(e) else ""
        sys.stderr.write("convert.py: %s: cannot convert (%s%s)\n"
                         % (a.src, type(e).__name__, ": " + msg if msg else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
