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
    plotted(part, "--layer", "3", "--head", "2", "-o", head, "--force")
    assert png(head).shape[0] > 600
    never = os.path.join(TMP, "never.png")
    pycase.refused(PLOT + [part, "--layer", "1", "--head", "1", "-o", never], "--layer 1: %s holds layers 2-3" % part)
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


def long_attention_file():
    """An attention file of 2,003 tokens: 2,880 characters of Tiny Shakespeare through a random model of 2 layers
    of 4 heads with a context of 2,048 (make_random.py's qk_norm preset, its scale 2 so that each query looks
    at a few keys, as a trained model's do, rather than evenly at all)."""
    model, text, path = (os.path.join(TMP, n) for n in ("long.bin", "long.txt", "long_att.bin"))
    if not os.path.exists(path):
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "make_random.py"), model, "--preset",
                            "qk_norm", "--set", "seq_len=2048", "--set", "attn_scale=2"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with open(os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"), "rb") as f:
            open(text, "wb").write(f.read(2880))
        r = subprocess.run([os.path.join(ROOT, "run"), model, "-m", "attention", "-f", text, "-o", path, "-q"],
                           capture_output=True, text=True, env=ENV)
        assert r.returncode == 0, r.stderr
    T, = struct.unpack_from("<i", open(path, "rb").read(4))
    assert T >= 2000, T
    return path, T


@case
def long_page_in_chromium():
    """The page of 2,003 tokens: under 10 MB, drawn by headless Chromium in under 3 s (the page's own
    measure, from navigation to its first draw); a heatmap of the head, the head view of the window
    #start=600 names (its lines in the heads' colours), moving the window changes the head view."""
    path, T = long_attention_file()
    html = os.path.join(TMP, "long.html")
    plotted(path, "--html", html)
    size = os.path.getsize(html)
    assert size < 10e6, "the page is %.1f MB" % (size / 1e6)
    data, outside = page_data(html)
    assert not outside and data["band"] == 200 and data["blocks"] <= 400, (outside, data["band"], data["blocks"])
    r = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + os.path.join(TMP, "chromium"), "--dump-dom",
                        "file://%s#layer=1&start=600" % html], capture_output=True, text=True, timeout=120)
    drawn = int(re.search(r'data-drawn-ms="(\d+)"', r.stdout).group(1))
    assert drawn < 3000, "the page took %d ms to load and draw" % drawn
    shot = screenshot(html, "layer=1&start=600", "long")
    heat = shot[90:480, 12:410]  # the heatmap, under the controls and the note
    colored = int((np.ptp(heat, axis=-1) > 0.2).sum())  # viridis is far from grey
    assert colored > 30000, "the heatmap shows %d coloured pixels" % colored
    view = shot[480:]
    lines = [line_pixels(np.concatenate([np.ones((CONTROLS, view.shape[1], 3)), view]), c) for c in data["colors"]]
    assert min(lines) > 200, "the head view's lines in the heads' colours: %s pixels" % lines
    moved = screenshot(html, "layer=1&start=1200", "long_moved")
    assert int((np.abs(moved[480:] - view).max(-1) > 0.1).sum()) > 2000, "moving the window changed nothing"
    print("    %d tokens: page %.1f MB, drawn in %d ms; head view line pixels %s" % (T, size / 1e6, drawn, lines))
    import plot_attention
    plot_attention.PAGE_MAX_BYTES = 3_000_000  # as if the model had 4 times the heads at this length
    try:
        plot_attention.page(plot_attention.Attention(path))
        raise AssertionError("a page over the limit was written")
    except ValueError as e:
        assert "make a page of 5 MB, more than 3 MB: at this length 4 layer-heads fit; select them with ./run's " \
            "--layers A-B and --heads A-B" in str(e), e


@case
def long_png_labels_positions():
    """One head's PNG at 2,003 tokens labels positions at round steps ("600 ..."), at most 60 of them, in
    8-point type; up to 120 tokens every token's text."""
    import plot_attention
    path, T = long_attention_file()
    ticks, labels, font = plot_attention.position_labels(plot_attention.Attention(path))
    assert ticks[:3] == [0, 50, 100] and len(ticks) <= 60 and font >= 7, (ticks[:3], len(ticks), font)
    assert labels[12].startswith("600 "), labels[12]
    ticks, labels, _ = plot_attention.position_labels(plot_attention.Attention(attention_file()))
    assert labels[:3] == ["R", "O", "M"] and len(ticks) == len(labels), labels[:3]
    head = os.path.join(TMP, "long_head.png")
    plotted(path, "--layer", "1", "--head", "2", "-o", head)
    assert png(head).shape[0] > 1000


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
