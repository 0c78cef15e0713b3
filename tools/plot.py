"""Loss curves from ./train's CSV logs, drawn to a PNG.

  tools/plot.py model.bin.csv [other.csv ...] [-o loss.png] [--smooth 20]

Each log is one run: its training loss per step (a moving average over --smooth steps, the raw
values faint behind it) and its validation loss at each evaluation (markers), with the
learning rate in a panel below.
"""
import argparse
import os
import sys


def read_log(path):
    """(steps, train, val_steps, val, lr, tokens_per_sec) from a log; ValueError if malformed."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split(",")[:5] != ["step", "train_loss", "val_loss", "lr", "tokens_per_sec"]:
        raise ValueError("not a ./train log (its first line is not step,train_loss,val_loss,lr,tokens_per_sec)")
    steps, train, vsteps, val, lr, tps = [], [], [], [], [], []
    for n, line in enumerate(lines[1:], 2):
        f = line.split(",")
        try:
            s = int(f[0])
            steps.append(s)
            train.append(float(f[1]))
            if f[2]:
                vsteps.append(s)
                val.append(float(f[2]))
            lr.append(float(f[3]))
            tps.append(float(f[4]))
        except (ValueError, IndexError):
            raise ValueError("line %d is not step,train_loss,val_loss,lr,tokens_per_sec: %r" % (n, line))
    if not steps:
        raise ValueError("the log has no steps yet")
    return steps, train, vsteps, val, lr, tps


def moving_average(x, n):
    out, acc = [], 0.0
    for i, v in enumerate(x):
        acc += v
        if i >= n:
            acc -= x[i - n]
        out.append(acc / min(i + 1, n))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description="Plot ./train loss curves to a PNG.")
    ap.add_argument("logs", nargs="+", help="CSV logs written by ./train (MODEL.csv)")
    ap.add_argument("-o", "--out", default="loss.png", help="PNG to write (default loss.png)")
    ap.add_argument("--smooth", type=int, default=20, help="moving average window for the training loss")
    a = ap.parse_args(argv)
    if a.smooth < 1:
        sys.exit("plot.py: --smooth must be at least 1")
    runs = []
    for path in a.logs:
        try:
            runs.append((path, read_log(path)))
        except (OSError, ValueError) as e:
            sys.exit("plot.py: %s: %s" % (path, e.strerror if isinstance(e, OSError) else e))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, axlr) = plt.subplots(2, 1, figsize=(9, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for i, (path, (steps, train, vsteps, val, lr, _)) in enumerate(runs):
        color = "C%d" % (i % 10)
        name = os.path.basename(path)
        ax.plot(steps, train, color=color, alpha=0.2, linewidth=0.8)
        ax.plot(steps, moving_average(train, a.smooth), color=color, label="%s train" % name)
        if val:
            ax.plot(vsteps, val, "o--", color=color, markersize=4, label="%s val (last %.4f)" % (name, val[-1]))
        axlr.plot(steps, lr, color=color)
    ax.set_ylabel("cross-entropy loss")
    ax.grid(alpha=0.3)
    ax.legend()
    axlr.set_ylabel("learning rate")
    axlr.set_xlabel("step")
    axlr.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(a.out, dpi=110)
    except OSError as e:
        sys.exit("plot.py: %s: cannot write: %s" % (a.out, e.strerror))
    print("wrote %s" % a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
