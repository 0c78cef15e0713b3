"""tools/plot_attention.py on the files ./run -m attention writes: the grid and one-head PNGs, the
page in a real browser (headless Chromium loads it from a file and takes screenshots: the lines are
there in the heads' colours, a hover driven by the page's URL changes them, the head selector hides
heads), and files that are truncated or damaged refused in one line.

Run from the repository root after `make run`: /usr/bin/python3 tests/test_plot_attention.py [-k SUBSTRING]
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
import pycase  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-plot-attention-")
PLOT = ["/usr/bin/python3", os.path.join(ROOT, "tools", "plot_attention.py")]
ENV = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
MODEL = os.path.join(ROOT, "models", "shakespeare.bin")  # 4 layers of 4 heads, a character per token
PROMPT = "ROMEO:\nBut soft, what light\nthrough yonder window?"
CONTROLS = 50  # pixels: the page's layer and head selectors, above the tokens and their lines
case = pycase.Cases()


def attention_file(name="a.bin", *flags):
    path = os.path.join(TMP, name)
    r = subprocess.run([os.path.join(ROOT, "run"), MODEL, "-m", "attention", "-i", PROMPT, "-o", path] + list(flags),
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, "./run -m attention: %s" % r.stderr
    return path


def plotted(*args):
    r = subprocess.run(PLOT + list(args), capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0 and not r.stderr, "plot_attention.py %s: exit %d: %s" % (args, r.returncode, r.stderr)


def png(path):
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "%s: not a PNG" % path
    import matplotlib.image
    return matplotlib.image.imread(path)[..., :3]


@case
def pngs():
    """The grid, one head large, and one head of a --layers/--heads file, numbered as in the model."""
    whole, part = attention_file(), attention_file("part.bin", "--layers", "2-3", "--heads", "1-2")
    grid = os.path.join(TMP, "grid.png")
    plotted(whole, "-o", grid)
    g = png(grid)
    assert g.shape[0] > 800 and g.shape[1] > 800, "grid of 4 x 4 heads only %s pixels" % (g.shape[:2],)
    head = os.path.join(TMP, "head.png")
    plotted(whole, "--layer", "1", "--head", "1", "-o", head)
    assert png(head).shape[0] > 600
    plotted(part, "--layer", "3", "--head", "2", "-o", head)
    pycase.refused(PLOT + [part, "--layer", "1", "--head", "1", "-o", head], "--layer 1: %s holds layers 2-3" % part)
    pycase.refused(PLOT + [whole, "--layer", "1"], "--layer and --head go together")


def page_data(html):
    """The page's DATA object, and whether the page asks for anything from outside."""
    text = open(html, encoding="utf-8").read()
    data = json.loads(re.search(r"const DATA = (\{.*?\});\n", text).group(1))
    outside = re.search(r"<script[^>]+src|<link|url\(|https?:|fetch\(|XMLHttpRequest|import ", text)
    return data, outside and outside.group(0)


def screenshot(html, fragment, name):
    """[height, width, 3] pixels of the page in headless Chromium, opened from the file with #fragment."""
    chromium = shutil.which("chromium")
    assert chromium, "no chromium (Debian's chromium: make deps installs it)"
    out = os.path.join(TMP, name + ".png")
    # --no-sandbox: Chromium's sandbox refuses to run as root
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--user-data-dir=" + os.path.join(TMP, "chromium"), "--window-size=700,1300",
                        "--screenshot=" + out, "file://%s#%s" % (html, fragment)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and os.path.exists(out), "chromium: exit %d: %s" % (r.returncode, r.stderr[-300:])
    return png(out)


def line_pixels(img, color):
    """How many pixels below the controls are color drawn over white at some opacity (a line of a head)."""
    c = np.array([int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    p = img[CONTROLS:].reshape(-1, 3)
    a = ((1 - p) @ (1 - c)) / ((1 - c) @ (1 - c))  # the opacity that best explains each pixel
    fits = np.abs(p - (1 - a[:, None] * (1 - c))).max(1) < 0.03
    return int((fits & (a > 0.15) & (a < 1.05)).sum())


@case
def page_in_chromium():
    path = attention_file()
    html = os.path.join(TMP, "page.html")
    plotted(path, "--html", html)
    data, outside = page_data(html)
    assert not outside, "the page reaches outside itself: %r" % outside
    assert data["tokens"][:7] == list("ROMEO:") + ["\\n"] and len(data["colors"]) == 4, data["tokens"][:7]
    every = screenshot(html, "layer=1", "every")
    drawn = [line_pixels(every, c) for c in data["colors"]]
    assert min(drawn) > 200, "lines in the heads' colours: %s pixels" % drawn
    hover = screenshot(html, "layer=1&hover=20", "hover")
    changed = int((np.abs(hover - every).max(-1) > 0.1).sum())
    assert changed > 2000, "hovering token 20 changed only %d pixels" % changed
    hovered = [line_pixels(hover, c) for c in data["colors"]]
    assert 0 < sum(hovered) < sum(drawn) / 3, "one query's lines %s, every query's %s" % (hovered, drawn)
    one = screenshot(html, "layer=1&heads=2", "one_head")
    alone = [line_pixels(one, c) for c in data["colors"]]
    assert alone[2] > 200 and max(alone[:2] + alone[3:]) < 20, "head 2 alone: %s" % alone
    print("    line pixels per head: every query %s, query 20 %s, head 2 alone %s" % (drawn, hovered, alone))
    other = screenshot(html, "layer=3", "layer3")
    assert int((np.abs(other - every).max(-1) > 0.1).sum()) > 2000, "layer 3 looks like layer 1"


def damaged(name, data):
    path = os.path.join(TMP, name)
    open(path, "wb").write(data)
    return PLOT + [path, "-o", os.path.join(TMP, "never.png")]


@case
def damaged_files_refused():
    """Cut anywhere, a header that does not fit the size, weights that are not probabilities, labels
    damaged: one line, exit 1, no PNG."""
    good = open(attention_file(), "rb").read()
    T, L, H = struct.unpack_from("<3i", good)
    fixed = 12 + 4 * T + 4 * L * H * T * T
    pycase.refused(damaged("short.bin", good[:8]), "shorter than the 12-byte header")
    pycase.refused(damaged("cut.bin", good[:fixed // 2]), "truncated: the header (T %d, layers 4, heads 4)" % T)
    pycase.refused(damaged("labels_cut.bin", good[:fixed + 30]), "the labels are cut short")
    pycase.refused(damaged("junk.bin", good[:fixed] + b"junk"), "4 bytes after the weights that are not labels")
    pycase.refused(damaged("tail.bin", good + b"\0"), "1 bytes after the labels")
    pycase.refused(damaged("header.bin", struct.pack("<3i", T, L + 1, H) + good[12:]), "truncated")
    pycase.refused(damaged("negative.bin", struct.pack("<3i", -T, L, H) + good[12:]), "not a -m attention file")
    w = bytearray(good)
    struct.pack_into("<f", w, 12 + 4 * T + 4 * (5 * T + 2), 0.5)  # row 5 of layer 0 head 0: an extra 0.5
    pycase.refused(damaged("rowsum.bin", bytes(w)), "layer 0 head 0: row 5 sums to")
    struct.pack_into("<f", w, 12 + 4 * T + 4 * (5 * T + 2), float("nan"))
    pycase.refused(damaged("nan.bin", bytes(w)), "weight [5, 2] is nan, not a probability")
    pycase.refused(damaged("random.bin", bytes(np.random.default_rng(3).integers(0, 256, 4096, np.uint8))),
                   "random.bin: ")
    assert not os.path.exists(os.path.join(TMP, "never.png"))


if __name__ == "__main__":
    sys.exit(case.main(TMP))
