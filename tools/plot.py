"""Loss curves from ./train's CSV logs, drawn to a PNG.

  tools/plot.py model.bin.csv [other.csv ...] [-o loss.png] [--smooth 20] [--force]

Each log is one run: its training loss per step (smoothed over about --smooth steps without lag:
an exponential average run forwards, then backwards over the result, the ends padded as scipy's
filtfilt pads them, so that the smoothed curve stays centred on the raw one to its last step,
which is drawn faint behind it), and at each evaluation the
validation loss and the training loss measured the same way (eval_train_loss, markers: the two
comparable numbers), with the learning rate in a panel below. Logs from before eval_train_loss
was written are read too.

A log ./train is still writing plots as far as it goes (a last line without its newline is not
read yet), NaN and Inf values are left out of their curves (stderr says how many), and a file
that is not a ./train log is refused in one line. A log "-" is standard input, -o - standard
output; an existing picture is replaced only with --force, another file never (outfile.py).
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
    from attn import cli_main
    cli_main.guard()
from attn import outfile  # noqa: E402

COLUMNS = ["step", "train_loss", "val_loss", "eval_train_loss", "lr", "tokens_per_sec"]
COLUMNS_V1 = ["step", "train_loss", "val_loss", "lr", "tokens_per_sec"]  # before eval_train_loss


def read_log(path):
    """(train, val, eval_train, lr, dropped) from a log: each series a list of (step, value), without
    the NaN and Inf values, which dropped counts, and without empty fields (./train leaves the
    evaluation's columns empty between evaluations, the step's own at step 0, before training);
    ValueError if the file is not a ./train log.

    ./train may be writing the log: a last line without its newline is left for the next read."""
    text = outfile.read(path).decode("utf-8", errors="replace")
    if "\0" in text or "\ufffd" in text:  # ./train writes ASCII
        raise ValueError("a binary file, not a ./train CSV log")
    lines = text.split("\n")
    columns = lines[0].split(",")
    if columns not in (COLUMNS, COLUMNS_V1):
        raise ValueError("not a ./train log (its first line is not %s)" % ",".join(COLUMNS))
    series = {name: [] for name in COLUMNS[1:5]}
    dropped = 0
    for n, line in enumerate(lines[1:-1], 2):  # the last is "" after the final newline, or unfinished
        f = line.split(",")
        try:
            if len(f) != len(columns):
                raise ValueError
            s, values = int(f[0]), [float(v) if v else None for v in f[1:]]
        except ValueError:
            raise ValueError("line %d is not %s: %r" % (n, ",".join(columns), line))
        for name, v in zip(columns[1:], values):
            if name in series and v is not None and math.isfinite(v):
                series[name].append((s, v))
            elif name in series and v is not None:
                dropped += 1
    if not series["train_loss"]:
        raise ValueError("the log has no finite training loss yet" if dropped else "the log has no steps yet")
    return series["train_loss"], series["val_loss"], series["eval_train_loss"], series["lr"], dropped


def smooth(x, n):
    """x smoothed over about n values without lag: an exponential average (the weight of an
    n-value moving average, 2 / (n + 1)) run forwards, then backwards over the result. Each pass
    alone lags (or leads) by about n / 2 values; the two together cancel it, as a zero-phase
    filter (scipy's filtfilt) does. As filtfilt, x is first extended at each end by its odd
    reflection about the end value (2 x[0] - x[k]), here 3 n values long (filtfilt: 3 filter orders), and
    the extension cut off after: a trend runs on past the ends instead of being pulled back by
    the values before them, so the curve ends on the last losses, not n / 2 steps behind."""
    a = 2.0 / (n + 1)
    pad = min(3 * n, len(x) - 1)
    padded = [2 * x[0] - v for v in x[pad:0:-1]] + list(x) + [2 * x[-1] - v for v in x[-2:-pad - 2:-1]]

    def ema(values):
        out, acc = [], None
        for v in values:
            acc = v if acc is None else acc + a * (v - acc)
            out.append(acc)
        return out
    return ema(ema(padded)[::-1])[::-1][pad:pad + len(x)]


def main(argv):
    ap = argparse.ArgumentParser(description="Plot ./train loss curves to a PNG.")
    ap.add_argument("logs", nargs="+", help="CSV logs written by ./train (MODEL.csv)")
    ap.add_argument("-o", "--out", default="loss.png", help="PNG to write (default loss.png)")
    ap.add_argument("--smooth", type=int, default=20,
                    help="steps the training loss is smoothed over (centred, without lag; 1: raw)")
    ap.add_argument("--force", action="store_true", help="replace an existing picture (never another file)")
    a = ap.parse_args(argv)
    if a.smooth < 1:
        sys.exit("plot.py: --smooth must be at least 1")
    try:  # before any work, as ./train's claim_outputs: a device, a FIFO, another kind of file, or no --force
        outfile.claim_picture(a.out, a.force)
    except OSError as e:
        sys.exit("plot.py: %s: %s" % (a.out, e))
    runs = []
    for path in a.logs:
        try:
            runs.append((path, read_log(path)))
        except (OSError, ValueError) as e:
            sys.exit("plot.py: %s: %s" % (path, e.strerror if isinstance(e, OSError) else e))
        if runs[-1][1][4]:
            n = runs[-1][1][4]
            print("plot.py: %s: left out %d NaN or Inf value%s" % (path, n, "s" if n > 1 else ""), file=sys.stderr)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, axlr) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for i, (path, (train, val, eval_train, lr, _)) in enumerate(runs):
        color = "C%d" % (i % 10)
        name = "standard input" if path == outfile.STDIO else os.path.basename(path)
        steps, losses = zip(*train)
        ax.plot(steps, losses, color=color, alpha=0.2, linewidth=0.8)
        ax.plot(steps, smooth(losses, a.smooth), color=color, label="%s train" % name)
        if eval_train:
            ax.plot(*zip(*eval_train), "s:", color=color, markersize=4,
                    label="%s train, evaluated (last %.4f)" % (name, eval_train[-1][1]))
        if val:
            ax.plot(*zip(*val), "o--", color=color, markersize=4, label="%s val (last %.4f)" % (name, val[-1][1]))
        if lr:
            axlr.plot(*zip(*lr), color=color)
    ax.set_ylabel("cross-entropy loss")
    ax.grid(alpha=0.3)
    ax.legend()
    axlr.set_ylabel("learning rate")
    axlr.set_xlabel("step")
    axlr.grid(alpha=0.3)
    fig.tight_layout()
    try:
        # the format from the name's extension, as savefig would take it from a file name (PNG if none)
        with outfile.replacing(a.out) as f:
            fig.savefig(f, format=outfile.picture_format(a.out), dpi=110)
    except (OSError, ValueError) as e:
        sys.exit("plot.py: %s: cannot write: %s" % (a.out, e.strerror if isinstance(e, OSError) else e))
    print("wrote %s" % a.out, file=sys.stderr if a.out == outfile.STDIO else sys.stdout)  # not into the PNG


if __name__ == "__main__":
    main(sys.argv[1:])
