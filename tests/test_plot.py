"""tools/plot.py on the logs ./train writes (MODEL.csv), also while it is writing them: a
last line cut short is left for later, NaN and Inf values are left out of their curves alone,
and a file that is not a log is refused in one line; logs with eval_train_loss and without;
the smoothing does not lag. The PNGs come from matplotlib's Agg backend.

Run from the repository root: /usr/bin/python3 tests/test_plot.py [-k SUBSTRING]
"""
import math
import os
import subprocess
import sys
import tempfile

from pycase import ROOT  # puts tools/ on the path too
import plot  # noqa: E402
import pycase  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-plot-")
PLOT = ["/usr/bin/python3", os.path.join(ROOT, "tools", "plot.py")]
ENV = dict(os.environ, MPLBACKEND="Agg")
HEADER = "step,train_loss,val_loss,lr,tokens_per_sec\n"
case = pycase.Cases()


def log(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w" if isinstance(text, str) else "wb") as f:
        f.write(text)
    return path


def rows(n, every=5):
    """n steps of a falling loss, as ./train prints them, a validation loss every few steps."""
    out = []
    for s in range(n):
        val = "%.9g" % (4.2 - 0.01 * s) if s % every == 0 else ""
        out.append("%d,%.9g,%s,%.9g,%.1f\n" % (s, 4.5 - 0.01 * s, val, 1e-3, 1000.0))
    return out


def plotted(*logs):
    """plot.py on logs: exit 0 and a PNG; returns stderr."""
    png = os.path.join(TMP, "out.png")
    if os.path.exists(png):
        os.remove(png)
    r = subprocess.run(PLOT + list(logs) + ["-o", png], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, "plot.py exit %d: %s" % (r.returncode, r.stderr)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "no PNG written"
    return r.stderr


@case
def live_log_with_a_partial_last_line():
    """./train flushes whole lines, but a reader can see one half written: it is not read yet."""
    path = log("live.csv", HEADER + "".join(rows(20)) + "20,4.3")
    assert plotted(path) == ""
    train, val, _, lr, dropped = plot.read_log(path)
    assert [s for s, _ in train] == list(range(20)) and len(val) == 4 and len(lr) == 20 and dropped == 0
    # the header alone, or with only a partial first row: nothing to plot yet
    for text in (HEADER, HEADER + "0,4.5,4.2,0.001"):
        pycase.refused(PLOT + [log("empty.csv", text)], "empty.csv: the log has no steps yet")


@case
def nan_and_inf_values_left_out():
    """One NaN training loss used to blank the smoothed curve from there on (the moving average
    carries it); now it and an Inf are left out, the rest of every curve kept."""
    lines = rows(30)
    lines[7] = "7,nan,,0.001,1000.0\n"
    lines[10] = "10,4.4,-nan,0.001,1000.0\n"  # glibc prints a negative NaN so
    lines[12] = "12,inf,,0.001,1000.0\n"
    lines[20] = "20,4.3,4.0,nan,1000.0\n"
    path = log("nan.csv", HEADER + "".join(lines))
    assert "plot.py: %s: left out 4 NaN or Inf values" % path in plotted(path)
    train, val, _, lr, dropped = plot.read_log(path)
    assert [s for s, _ in train] == [s for s in range(30) if s not in (7, 12)]
    assert [s for s, _ in val] == [0, 5, 15, 20, 25] and len(lr) == 29 and dropped == 4
    assert all(math.isfinite(v) for v in plot.smooth([v for _, v in train], 20))
    # every training loss NaN: nothing to draw, said so
    pycase.refused(PLOT + [log("allnan.csv", HEADER + "0,nan,,0.001,1.0\n1,nan,,0.001,1.0\n")],
                   "the log has no finite training loss yet")


@case
def binary_files_refused():
    """A model file or random bytes given by mistake: one line, exit 1, no traceback."""
    pycase.refused(PLOT + [log("model.bin", b"ATTN\x01\x00\x00\x00" + bytes(range(256)) * 4)],
                   "model.bin: a binary file, not a ./train CSV log")
    pycase.refused(PLOT + [log("nul.csv", HEADER.encode() + b"0,4.5,,0.001,1.0\n\x00\x00\x00\n")],
                   "nul.csv: a binary file")
    pycase.refused(PLOT + [log("text.txt", "just some text\n")], "text.txt: not a ./train log")
    pycase.refused(PLOT + [log("bad_row.csv", HEADER + "0,4.5,,0.001,1.0\nhello\n1,4.4,,0.001,1.0\n")],
                   "bad_row.csv: line 3 is not step,train_loss,val_loss,lr,tokens_per_sec: 'hello'")


@case
def evaluated_train_loss_read():
    """Today's log: a row at step 0 with the evaluation alone, and eval_train_loss beside val_loss."""
    text = "step,train_loss,val_loss,eval_train_loss,lr,tokens_per_sec\n0,,4.2,4.1,,\n1,4.5,,,0.001,1000.0\n" + \
        "2,4.4,4.0,3.9,0.001,1000.0\n"
    path = log("today.csv", text)
    plotted(path)
    train, val, eval_train, lr, dropped = plot.read_log(path)
    assert train == [(1, 4.5), (2, 4.4)] and val == [(0, 4.2), (2, 4.0)] and eval_train == [(0, 4.1), (2, 3.9)]
    assert lr == [(1, 0.001), (2, 0.001)] and dropped == 0


@case
def smoothing_without_lag():
    """A linear ramp smoothed stays on the ramp away from its ends (a trailing 20-step average
    lags it by 9.5 steps), and a step is smoothed symmetrically about its edge."""
    ramp = [float(i) for i in range(200)]
    got = plot.smooth(ramp, 20)
    assert max(abs(got[i] - ramp[i]) for i in range(80, 120)) < 0.01, "the smoothed ramp lags"
    edge = plot.smooth([0.0] * 100 + [1.0] * 100, 20)
    assert abs(edge[99] + edge[100] - 1.0) < 0.05 and edge[60] < 0.01 and edge[140] > 0.99, (edge[99], edge[100])


@case
def smoothing_reaches_the_ends():
    """The ends are padded as filtfilt pads them (odd reflection): a falling loss of 60 steps
    smoothed over 20 ends on the last raw losses, not on the mean of the last 10 or so (the
    unpadded curve ended at 3.30 on a log whose last losses were 3.18, 3.15, 3.13), a ramp is
    kept to both ends, a constant stays constant, and a single value is itself."""
    loss = [3.2 + 2.0 * math.exp(-i / 15.0) + 0.03 * math.sin(i * 2.3) for i in range(60)]
    got = plot.smooth(loss, 20)
    assert abs(got[-1] - sum(loss[-3:]) / 3) < 0.03 and abs(got[0] - loss[0]) < 0.1, (got[0], got[-1], loss[-3:])
    ramp = [3.0 - 0.01 * i for i in range(60)]
    assert max(abs(g - r) for g, r in zip(plot.smooth(ramp, 20), ramp)) < 1e-3, "the ramp's ends are pulled back"
    assert plot.smooth([2.5] * 30, 20) == [2.5] * 30
    assert plot.smooth([4.0], 20) == [4.0] and len(plot.smooth([4.0, 3.0], 20)) == 2


@case
def several_logs_in_one_plot():
    plotted(log("a.csv", HEADER + "".join(rows(40))), log("b.csv", HEADER + "".join(rows(25, every=3))))


if __name__ == "__main__":
    sys.exit(case.main(TMP))
