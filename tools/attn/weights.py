"""The weight type a model file stores (--weights, --group-size): the choice convert.py makes
when none is asked, and the flags convert.py and make_random.py share; Q8Stored and q8_0_choice
for a source whose matrices are Q8_0 already (llama2.c's version 2 files, attn.c's Q8_0 files)."""
import argparse
import collections
import math
import sys

import numpy as np

from attn import modelfile as mf

from attn import storage
from attn.errors import Bad, listing
from attn import quantize
from attn.tensors import LONG_NAMES, STORED_NAMES, Stored


class OneWeightType(argparse.Action):
    """--weights and its alias --quantize set one value: two different ones are an error."""

    def __call__(self, parser, namespace, value, option):
        if getattr(namespace, self.dest) not in (None, value):
            parser.error("%s %s contradicts the weight type given before (%s)"
                         % (option, value, getattr(namespace, self.dest)))
        setattr(namespace, self.dest, value)


def add_quantize_arguments(ap, block_types=False):
    """--weights, --quantize and --group-size, which make_random.py shares; the weight type lands in
    args.quantize. --quantize is --weights q8_0's alias, or with block_types (convert.py) names a
    llama.cpp file type whose block types each matrix takes (block_types_for), in args.file_type."""
    ap.add_argument("--weights", dest="quantize", action=OneWeightType, choices=sorted(mf.WEIGHT_NAMES),
                    help="how to store the matrices: f32, bf16 or f16 (16 bits each), or q8_0 = int8 values and "
                    "a float32 scale per group of weights in a row (convert.py's default: as the checkpoint "
                    "stores them)")
    if block_types:
        ap.add_argument("--quantize", dest="file_type", action=OneWeightType, metavar="TYPE",
                        choices=list(quantize.FILE_TYPES),
                        help="%s quantise each matrix into llama.cpp's block types as llama-quantize's file types "
                        "of those names do (q8_0: llama.cpp's Q8_0, a float16 scale per 32; --weights q8_0 is "
                        "ours); %s put every matrix but the classifier in that one type, not llama-quantize's "
                        "mixes (file format version 6)"
                        % ("|".join(quantize.LLAMA_FILE_TYPES),
                           "|".join(t for t in quantize.FILE_TYPES if t not in quantize.LLAMA_FILE_TYPES)))
    else:
        ap.add_argument("--quantize", dest="quantize", action=OneWeightType, choices=sorted(mf.QUANTIZE),
                        help="--weights q8_0")
    below = "; below 32, llama.cpp's Q8_0 blocks per matrix instead, as --quantize q8_0" if block_types else ""
    ap.add_argument("--group-size", type=int, metavar="N", help="weights per scale with q8_0 (default %d, "
                    "halved until it divides every quantised row%s)" % (mf.DEFAULT_GROUP_SIZE, below))
    if block_types:
        ap.add_argument("--allow-f16-fallback", action="store_true", help="write --quantize's file even when matrices "
                        "whose rows fit no block of their type stay F16 and take it over %d bits a weight" % MAX_BITS)
        ap.add_argument("--allow-requantize", action="store_true", help="let --quantize quantise again matrices the "
                        "checkpoint holds quantised already (llama-quantize's flag)")


def block_types_for(cfg, file_type):
    """(each matrix's GGML type, why, for the closing note) for --quantize FILE_TYPE: the types
    llama-quantize gives a Llama's tensors (tools/attn/quantize.py's tensor_type; a model of learned
    positions is taken as GPT-2, whose GGUF fuses q, k and v). ValueError naming a matrix whose
    rows fit no type llama.cpp would give it."""
    c = mf.complete_config(cfg)
    types = {}
    for name, shape in mf.matrix_specs(c):
        classifier = name == "classifier" or (name == "tok_embedding" and bool(c["tied_classifier"]))
        types[name] = quantize.tensor_type(name, shape[1], c["n_layers"], file_type, classifier,
                                           fused_qkv=c["pos_kind"] == mf.POS_LEARNED,
                                           n_gqa=c["n_heads"] // c["n_kv_heads"])
    counts = collections.Counter(types.values())
    how = "each matrix in the type llama-quantize's %s gives it" % file_type.upper() \
        if file_type in quantize.LLAMA_FILE_TYPES else \
        "%s throughout, not a llama-quantize mix (the classifier and rows no %s block divides as llama-quantize " \
        "types them)" % (quantize.FILE_TYPES[file_type], quantize.FILE_TYPES[file_type])
    listed = ", ".join("%s %d" % (t, counts[t]) for t in sorted(counts))
    return types, "--quantize %s: %s: %s" % (file_type, how, listed)


MAX_BITS = 9  # bits a matrix weight that --quantize gives only when asked (--allow-f16-fallback)
FLOAT_TYPES = ("F32", "F16", "BF16")


def bits_per_weight(c):
    """(the matrices' bits a weight, the file's: every tensor's values, padding left out) of a
    config as storage_config completes it."""
    def bits(specs):
        return 8 * sum(storage.stored_bytes(c, n, s, pad=False) for n, s in specs) / \
            sum(int(np.prod(s)) for _, s in specs)
    return bits(mf.matrix_specs(c)), bits(mf.tensor_specs(c))


def q8_0_types(cfg):
    """--weights q8_0 without --group-size: None when our Q8_0's default group (64, halved until
    it divides every row) is 32 or more, 9 bits a weight at most; else (a type per matrix, why)
    as --quantize q8_0 stores it: llama.cpp's blocks (a float16 scale per 32, 8.5 bits a weight)
    where the rows are whole blocks of 32, F16 where they are not (llama-quantize refuses those)."""
    c = mf.with_weight_type(cfg, "q8_0")
    if c["group_size"] >= 32:
        return None
    types = block_types_for(cfg, "q8_0")[0]
    rows = sorted({shape[1] for n, shape in mf.matrix_specs(c) if types[n] == "F16"})
    return types, ("--weights q8_0: llama.cpp's Q8_0 blocks (a float16 scale per 32; our Q8_0 would need groups "
                   "of %d) where the rows allow, F16 for the %d matrices of rows of %s"
                   % (c["group_size"], list(types.values()).count("F16"), " and ".join(map(str, rows))))


def check_block_types(cfg, tensors, flag, types, allow_f16, allow_requantize):
    """Bad naming flag (--quantize FILE_TYPE, or --weights q8_0 falling back) when its type per
    matrix (types) takes the matrices over MAX_BITS bits a weight (F16 fallbacks) without
    allow_f16, or would quantise a matrix the checkpoint holds quantised already without
    allow_requantize, as llama-quantize refuses it: the errors of the first quantisation stay
    and the second adds its own."""
    again = []
    for n, t in types.items():
        was = getattr(tensors[n], "quantised", lambda: None)()
        if t not in FLOAT_TYPES and was and not (was == t and tensors_blocks(tensors, n, t)):
            again.append((getattr(tensors[n], "name", None) or n, was, t))
    if again and not allow_requantize:
        raise Bad(flag, "%d matri%s the checkpoint holds quantised already (%s) would be quantised again, which "
                  "adds the second quantisation's errors to the first's; give --allow-requantize to do it, "
                  "or convert the float checkpoint" % (len(again), "ces" if len(again) > 1 else "x",
                                                        listing(("%s %s -> %s" % a for a in again), 2)))
    bits = bits_per_weight(mf.with_weight_type(cfg, types))[0]
    if bits > MAX_BITS and not allow_f16:
        f16 = [n for n, t in types.items() if t == "F16"]
        c = mf.with_weight_type(cfg, "q8_0")
        ours = ", or --weights q8_0 --group-size %d for our Q8_0 (%.2f bits a weight)" % (
            c["group_size"], bits_per_weight(c)[0]) if flag.endswith("q8_0") else ""
        raise Bad(flag, "the matrices would take %.2f bits a weight, more than %d: %d of them (%s) have rows that "
                  "fit no block of their type and would be F16; give --allow-f16-fallback to write them so%s"
                  % (bits, MAX_BITS, len(f16), listing(f16, 2), ours))


def tensors_blocks(tensors, name, type_name):
    """Whether the checkpoint holds tensor name as blocks of type_name, which are kept as they are."""
    blocks = getattr(tensors[name], "blocks", None)
    return blocks is not None and blocks(type_name) is not None


def storage_config(cfg, weights, group_size, prog):
    """cfg set to be stored as --weights and --group-size say; Bad naming --group-size if it does
    not fit them, ValueError if cfg is no model. A default group size that had to shrink is
    worth a note: it costs speed and file size."""
    if group_size is not None:
        flag = "--group-size %d" % group_size
        if weights != "q8_0":
            raise Bad(flag, "a group size applies only to Q8_0 weights (--weights q8_0)")
        if not 1 <= group_size <= mf.MAX_GROUP_SIZE:
            raise Bad(flag, "outside [1, %d]" % mf.MAX_GROUP_SIZE)
        widths = mf.quantized_widths(mf.complete_config(cfg))
        if any(w % group_size for w in widths):
            raise Bad(flag, "does not divide every quantised row of the model: %s"
                      % mf.quantized_widths_said(mf.complete_config(cfg)))
    c = mf.with_weight_type(cfg, weights, group_size)
    if weights == "q8_0" and group_size is None and c["group_size"] != mf.DEFAULT_GROUP_SIZE:
        print("%s: note: group size %d, the largest power of two up to %d dividing %s"
              % (prog, c["group_size"], mf.DEFAULT_GROUP_SIZE, mf.quantized_widths_said(c)), file=sys.stderr)
    return c


def weight_choice(tensors, asked):
    """(the weight type to store, why, for the closing note): asked, if given; else the type the
    checkpoint stores its matrices in, if they share one; else float32, which holds them all."""
    kinds = sorted({getattr(v, "stored", "F32") for k, v in tensors.items()
                    if k.split(".")[-1] in storage.QUANTIZED_MATRICES}, key=list(LONG_NAMES).index)
    theirs = "the checkpoint's %s matrices" % " and ".join(LONG_NAMES[k] for k in kinds)
    choice = asked or (STORED_NAMES[kinds[0]] if len(kinds) == 1 else "f32")
    if choice == "q8_0":
        how = "quantised"
    elif [STORED_NAMES[k] for k in kinds] == [choice]:
        how = "kept bit for bit"
    elif choice == "f32":
        how = "widened exactly"
    else:
        how = "rounded to nearest even" if choice == "bf16" else "rounded to nearest"
    return choice, ("--weights %s: " % asked if asked else "") + theirs + " " + how


class Q8Stored(Stored):
    """A matrix its checkpoint holds as int8 values times float32 scales, a scale per gs values
    of the flattened tensor: llama2.c's Q8_0 (export.py quantises each tensor flattened, so a
    group runs across a row's end when gs does not divide the row) or an attn.c Q8_0 file's (gs
    divides every row). Its raw values are the dequantised float32 ones, q x scale computed in
    float32 as ./run and storage.dequantize_q8_0 compute them."""

    quantised = "Q8_0"

    def __init__(self, raw, dtype="F32", q8=None):
        super().__init__(raw, dtype)
        self.q8 = q8  # (q, scales, gs), None for a view (Weight.view), which has no such form

    @classmethod
    def of(cls, q, scale, gs):
        q, scale = np.asarray(q, np.int8), np.asarray(scale, np.float32).reshape(-1)
        deq = (q.reshape(-1, gs).astype(np.float32) * scale[:, None]).reshape(q.shape)
        return cls(deq, "F32", (q, scale, gs))

    def q8_0(self, group):
        """(int8 values [rows, cols], float32 scales [rows, cols / group]): FORMAT.md's Q8_0 at
        this group size, the same integers and each group the scale of the one it lies in, when
        group divides gs and the row (then no group of ours straddles one of ours or a row's end);
        else None, and the writer quantises the dequantised values again."""
        if self.q8 is None or len(self.shape) != 2:
            return None
        q, scale, gs = self.q8
        rows, cols = self.shape
        if gs % group or cols % group:
            return None
        return q.reshape(rows, cols), np.repeat(scale, gs // group).reshape(rows, cols // group)


def q8_0_choice(gs, what):
    """Source.weights for a checkpoint whose matrices are all Q8Stored with gs values per scale
    (what: e.g. "llama2.c's Q8_0 matrices"). By default they stay Q8_0, exactly: the group size is
    the largest dividing gs and every row, gs itself unless llama2.c's groups cross rows (dim 64
    and hidden_dim 172 with gs 32 give 4: each group of 4 lies inside one of 32 and keeps its
    scale, so the integers and scales are the file's, at one more scale per 4 values). --weights
    f32 keeps the same values as float32; bf16 and f16 round them."""
    def choose(tensors, asked, group_size):
        rows = sorted({np.shape(v)[1] for k, v in tensors.items() if k.split(".")[-1] in storage.QUANTIZED_MATRICES})
        exact = math.gcd(gs, *rows)
        if asked not in (None, "q8_0"):
            how = "dequantised exactly" if asked == "f32" else "dequantised, then rounded to %s" % (
                "bfloat16" if asked == "bf16" else "float16")
            return asked, "--weights %s: %s %s" % (asked, what, how), group_size
        group = group_size or exact
        if exact % group:
            why = "%s quantised again from their values (--group-size %d does not divide %d)" % (what, group, exact)
        elif group == gs:
            why = "%s kept exactly" % what
        else:
            across = [n for n in rows if n % gs]
            why = "%s kept exactly, in groups of %d: the file's groups of %d %s" % (
                what, group, gs, "run across rows of %s" % " and ".join(map(str, across)) if across
                else "are split")
        return "q8_0", ("--weights q8_0: " if asked else "") + why, group
    return choose
