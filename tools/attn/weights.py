"""The weight type a model file stores (--weights, --group-size): the choice convert.py makes
when none is asked, and the flags convert.py and make_random.py share."""
import argparse
import sys


from attn import modelfile as mf
from attn.errors import Bad
from attn.tensors import LONG_NAMES, STORED_NAMES


class OneWeightType(argparse.Action):
    """--weights and its alias --quantize set one value: two different ones are an error."""

    def __call__(self, parser, namespace, value, option):
        if getattr(namespace, self.dest) not in (None, value):
            parser.error("%s %s contradicts the weight type given before (%s)"
                         % (option, value, getattr(namespace, self.dest)))
        setattr(namespace, self.dest, value)


def add_quantize_arguments(ap):
    """--weights (its alias --quantize) and --group-size, which make_random.py shares; the weight
    type lands in args.quantize."""
    ap.add_argument("--weights", dest="quantize", action=OneWeightType, choices=sorted(mf.WEIGHT_NAMES),
                    help="how to store the matrices: f32, bf16 or f16 (16 bits each), or q8_0 = int8 values and "
                    "a float32 scale per group of weights in a row (convert.py's default: as the checkpoint "
                    "stores them)")
    ap.add_argument("--quantize", dest="quantize", action=OneWeightType, choices=sorted(mf.QUANTIZE),
                    help="--weights q8_0")
    ap.add_argument("--group-size", type=int, metavar="N", help="weights per scale with q8_0 (default %d, "
                    "halved until it divides every quantised row)" % mf.DEFAULT_GROUP_SIZE)


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
            raise Bad(flag, "does not divide every quantised row of the model: dim %d, n_heads x head_dim %d, "
                      "hidden_dim %d" % widths)
    c = mf.with_weight_type(cfg, weights, group_size)
    if weights == "q8_0" and group_size is None and c["group_size"] != mf.DEFAULT_GROUP_SIZE:
        print("%s: note: group size %d, the largest power of two up to %d dividing dim %d, n_heads x head_dim %d "
              "and hidden_dim %d" % ((prog, c["group_size"], mf.DEFAULT_GROUP_SIZE) + mf.quantized_widths(c)),
              file=sys.stderr)
    return c


def weight_choice(tensors, asked):
    """(the weight type to store, why, for the closing note): asked, if given; else the type the
    checkpoint stores its matrices in, if they share one; else float32, which holds them all."""
    kinds = sorted({getattr(v, "stored", "F32") for k, v in tensors.items()
                    if k.split(".")[-1] in mf.QUANTIZED_MATRICES}, key=list(LONG_NAMES).index)
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
