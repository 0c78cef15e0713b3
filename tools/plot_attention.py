"""Attention maps from the files `./run MODEL -m attention -i TEXT -o FILE` writes.

  tools/plot_attention.py FILE [-o grid.png]                  every layer x head as a small heatmap
  tools/plot_attention.py FILE --layer L --head H [-o h.png]  one head, the tokens along both axes
  tools/plot_attention.py FILE --html page.html               an interactive head view, one file

A heatmap's row t is query position t, its column j key position j, its colour the weight on a
square-root scale (so that a spread of small weights shows next to one large one); keys the mask
hides (future positions, keys outside a sliding window) are white. Layers and heads are numbered
as in the model, also in a file of a --layers/--heads selection. The page is self-contained (no
network, no external script): the tokens in a column on each side, lines whose opacity is the
weight, a layer selector and a head selector with a colour per head; hovering a token on the left
shows where it looks, on the right what looks at it. Past 200 tokens a heatmap of the head (blocks
of positions pooled) moves a window of 200 queries, which the head view draws. Its URL may say
what to show: #layer=L, #heads=H,H..., #start=S (the window's first query), #hover=T (a query)
or #key=T.

The file's layout is docs/ATTENTION.md's. A file that is truncated or damaged (a header that does
not match its size, weights that are not probabilities, labels cut short) is refused in one line.
FILE "-" is standard input, -o - or --html - standard output (not both); an existing picture or
page of this tool's is replaced only with --force, another file never (outfile.py).
"""
import argparse
import base64
import colorsys
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
    from attn import cli_main
    cli_main.guard()
import numpy as np  # noqa: E402

from attn import outfile  # noqa: E402

LABELS_MAGIC = b"LABL"
ROW_TOLERANCE = 1e-3  # float32 rows of thousands of weights sum to 1 within far less
LABEL_EVERY_TOKEN = 120  # a head's PNG names every token up to this many, then positions at round steps
MAX_LABELS = 60
PAGE_WINDOW = 200  # queries the page's head view shows at once: a longer text gets a heatmap to move them
HEATMAP_CELLS = 400  # the heatmap's cells a side at most: longer texts pool blocks of positions into a cell
PAGE_MAX_BYTES = 10_000_000  # a page's weights, in base64, at most: a browser draws it in a second or two


class Damaged(ValueError):
    """A file that is not a whole, sound -m attention file: str() says what is wrong."""


class Attention:
    """A -m attention file at path: ids [T], weights [layers, heads, T, T] (float32, read-only), and what its
    labels say (or defaults when it has none): layer0 and head0 (the model's numbers of the first
    layer and head held), group (query heads per key/value head, or None), windows (each layer's
    sliding window, 0 for none) and pieces (each token's bytes)."""

    def __init__(self, path):
        self.path = path
        self.name = "standard input" if path == outfile.STDIO else os.path.basename(path)  # for titles
        data = outfile.read(path)
        if len(data) < 12:
            raise Damaged("%d bytes, shorter than the 12-byte header (int32 T, layers, heads)" % len(data))
        if data[:4] == b"ATTN":
            raise Damaged("an attn.c model file; make its attention file with ./run MODEL -m attention -i TEXT -o FILE")
        T, L, H = struct.unpack_from("<3i", data)
        if T < 1 or L < 1 or H < 1:
            raise Damaged("the header says T %d, layers %d, heads %d: not a -m attention file" % (T, L, H))
        fixed = 12 + 4 * T + 4 * L * H * T * T
        if len(data) < fixed:
            raise Damaged("truncated: the header (T %d, layers %d, heads %d) implies %d bytes, the file has %d"
                          % (T, L, H, fixed, len(data)))
        self.T, self.n_layers, self.n_heads = T, L, H
        self.ids = np.frombuffer(data, "<i4", T, 12)
        self.weights = np.frombuffer(data, "<f4", L * H * T * T, 12 + 4 * T).reshape(L, H, T, T)
        self.layer0, self.head0, self.group, self.windows = 0, 0, None, [0] * L
        self.pieces = [b"#%d" % i for i in self.ids]
        if len(data) > fixed:
            self.read_labels(data, fixed)
        self.check()

    def read_labels(self, data, at):
        L, T = self.n_layers, self.T
        if data[at:at + 4] != LABELS_MAGIC:
            raise Damaged("%d bytes after the weights that are not labels (%r)" % (len(data) - at, data[at:at + 4]))
        try:
            self.layer0, self.head0, self.group = struct.unpack_from("<3i", data, at + 4)
            self.windows = list(struct.unpack_from("<%di" % L, data, at + 16))
            at += 16 + 4 * L
            pieces = []
            for t in range(T):
                n, = struct.unpack_from("<i", data, at)
                if n < 0 or at + 4 + n > len(data):
                    raise struct.error("token %d's text of %d bytes" % (t, n))
                pieces.append(data[at + 4:at + 4 + n])
                at += 4 + n
        except struct.error as e:
            raise Damaged("the labels are cut short or damaged: %s" % e)
        if at != len(data):
            raise Damaged("%d bytes after the labels" % (len(data) - at))
        if min(self.layer0, self.head0, *self.windows) < 0 or self.group < 1:
            raise Damaged("the labels say first layer %d, first head %d, group %d, windows %s"
                          % (self.layer0, self.head0, self.group, self.windows))
        self.pieces = pieces

    def masked(self, layer):
        """[T, T] bool, True where layer (an index into the file) hides key j from query t."""
        t = np.arange(self.T)
        hidden = t[None, :] > t[:, None]
        w = self.windows[layer]
        return hidden | (t[:, None] - t[None, :] >= w) if w else hidden

    def check(self):
        """Weights that are probabilities: finite, in [0, 1], each row summing to 1, masked keys 0."""
        w = self.weights
        for l in range(self.n_layers):
            bad = ~np.isfinite(w[l]) | (w[l] < 0) | (w[l] > 1)
            if bad.any():
                h, t, j = np.argwhere(bad)[0]
                raise Damaged("layer %d head %d: weight [%d, %d] is %r, not a probability"
                              % (self.layer0 + l, self.head0 + h, t, j, float(w[l, h, t, j])))
            sums = w[l].sum(-1, dtype=np.float64)
            if (np.abs(sums - 1) > ROW_TOLERANCE).any():
                h, t = np.argwhere(np.abs(sums - 1) > ROW_TOLERANCE)[0]
                raise Damaged("layer %d head %d: row %d sums to %.6g, not 1" % (self.layer0 + l, self.head0 + h, t,
                                                                                sums[h, t]))
            leak = (w[l][:, self.masked(l)] != 0).any(-1)
            if leak.any():
                raise Damaged("layer %d head %d: a masked key has weight" % (self.layer0 + l,
                                                                            self.head0 + int(np.argmax(leak))))

    def token_texts(self):
        """Each token as a label: its text, with newlines, tabs and other control characters spelled
        out, a run of spaces as open boxes, bytes that are not UTF-8 as \\xNN."""
        out = []
        for p in self.pieces:
            s = p.decode("utf-8", errors="backslashreplace")
            s = "".join({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, c if c.isprintable() or c == " "
                        else "\\x%02x" % ord(c) if ord(c) < 256 else "\\u%04x" % ord(c)) for c in s)
            out.append("\u2423" * len(s) if s and not s.strip(" ") else s)
        return out

    def layer_name(self, l):
        w = self.windows[l]
        return "layer %d" % (self.layer0 + l) + (" (window %d)" % w if w else "")

    def head_name(self, h):
        n = self.head0 + h
        return "head %d" % n + (" (kv %d)" % (n // self.group) if self.group and self.group > 1 else "")


def head_colors(n):
    """n distinct colours as #rrggbb: matplotlib's ten, then hues evenly spaced."""
    tab = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]
    if n <= len(tab):
        return tab[:n]
    return ["#%02x%02x%02x" % tuple(round(255 * c) for c in colorsys.hls_to_rgb(i / n, 0.45, 0.75)) for i in range(n)]


# ---- PNGs ----

def heatmap(ax, a, layer, head, plt):
    from matplotlib.colors import PowerNorm
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("white")
    w = np.ma.masked_array(a.weights[layer, head], a.masked(layer))
    return ax.imshow(w, cmap=cmap, norm=PowerNorm(0.5, vmin=0.0, vmax=1.0), interpolation="nearest")


def plot_grid(a, plt):
    L, H = a.n_layers, a.n_heads
    panel = max(0.9, min(2.6, 28.0 / max(L, H)))  # inches: 4 x 4 heads of 100 tokens readable, 16 x 32 a page
    fig, axes = plt.subplots(L, H, figsize=(panel * H + 1.6, panel * L + 1.0), squeeze=False, layout="constrained")
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            im = heatmap(ax, a, l, h, plt)
            # the first and the last position, on the outer panels: the grid's scale at any length
            ax.set_xticks([0, a.T - 1] if l == L - 1 else [])
            ax.set_yticks([0, a.T - 1] if h == 0 else [])
            ax.tick_params(labelsize=6)
            if l == 0:
                ax.set_title(a.head_name(h), fontsize=8)
            if h == 0:
                ax.set_ylabel(a.layer_name(l), fontsize=8)
    fig.suptitle("%s: %d tokens; row = query, column = key" % (a.name, a.T), fontsize=10)
    fig.colorbar(im, ax=axes, shrink=0.6, label="weight (square-root scale)")
    return fig


def position_labels(a):
    """(ticks, labels, font size) for one head's axes: up to LABEL_EVERY_TOKEN tokens each token's text;
    past that every step-th position, a round step giving at most MAX_LABELS, as "position text", so that
    the labels stay readable and say where they are at any length."""
    texts = a.token_texts()
    if a.T <= LABEL_EVERY_TOKEN:
        return list(range(a.T)), texts, max(6.0, min(10.0, 800.0 / a.T))
    step = next(m * 10 ** e for e in range(12) for m in (1, 2, 5) if a.T / (m * 10 ** e) <= MAX_LABELS)
    ticks = list(range(0, a.T, step))
    return ticks, ["%d %s" % (t, texts[t]) for t in ticks], 8.0


def plot_head(a, layer, head, plt):
    T = a.T
    size = min(28.0, max(6.0, 0.12 * T + 2.5))  # inches: some 12 pixels a token at 100 dpi
    fig, ax = plt.subplots(figsize=(size + 1.2, size), layout="constrained")
    im = heatmap(ax, a, layer, head, plt)
    ticks, labels, font = position_labels(a)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=90, fontsize=font)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=font)
    ax.xaxis.tick_top()
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title("%s, %s: %s" % (a.layer_name(layer), a.head_name(head), a.name), pad=12)
    fig.colorbar(im, ax=ax, shrink=0.6, label="weight (square-root scale)")
    return fig


# ---- the page ----

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>attention: %(title)s</title>
<style>
body { font-family: sans-serif; margin: 0; background: #fff; color: #222; }
#controls { padding: 8px 12px; min-height: 28px; display: flex; flex-wrap: wrap; align-items: center; gap: 10px;
  font-size: 14px; }
#heads span { display: inline-block; width: 18px; height: 18px; margin-right: 3px; cursor: pointer;
  vertical-align: middle; border: 2px solid #fff; }
#heads span.off { opacity: 0.15; }
#hint, #note { color: #777; font-size: 12px; }
#note { padding: 0 12px 6px; }
#map { margin: 0 12px; cursor: crosshair; }
canvas { display: block; }
</style></head>
<body>
<div id="controls">layer <select id="layer"></select> heads <span id="heads"></span>
<span id="hint">hover a token; click a head to show or hide it, double-click to show it alone</span></div>
<div id="long" hidden><div id="note"></div><canvas id="map"></canvas></div>
<canvas id="view"></canvas>
<script>
"use strict";
const DATA = %(data)s;
const T = DATA.tokens.length, H = DATA.heads.length, W = DATA.band, B = DATA.blocks;
function decode(s) {
  const text = atob(s), out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}
const band = decode(DATA.weights), overview = DATA.overview ? decode(DATA.overview) : null;
const SPAN = Math.min(W, T);  // the queries the head view shows: all of a short text, a window of a long one
const ROW = 20, TOP = 12, COL = 170, GAP = 260, LEFT = 10, MAP = 400;
const canvas = document.getElementById("view"), ctx = canvas.getContext("2d");
const state = {layer: 0, shown: DATA.heads.map(() => true), hover: null, start: 0};

// weight of query t on key j, kept for keys up to W - 1 positions back (all of them when W is T)
function weight(l, h, t, j) { return t - j < W ? band[((l * H + h) * T + t) * W + (t - j)] / 255 : 0; }
const y = t => TOP + (t - state.start) * ROW + ROW / 2, xl = LEFT + COL, xr = LEFT + COL + GAP;

function draw() {
  const dpr = window.devicePixelRatio || 1, w = xr + COL + LEFT, hgt = TOP * 2 + SPAN * ROW;
  const first = state.start, last = state.start + SPAN;
  canvas.width = w * dpr; canvas.height = hgt * dpr;
  canvas.style.width = w + "px"; canvas.style.height = hgt + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, hgt);
  const hv = state.hover;
  if (hv) {  // the hovered token's box
    ctx.fillStyle = "#e4e4e4";
    ctx.fillRect(hv.side === "query" ? LEFT : xr, y(hv.t) - ROW / 2, COL, ROW);
  }
  ctx.lineWidth = 2;
  for (let h = 0; h < H; h++) {
    if (!state.shown[h]) continue;
    ctx.strokeStyle = DATA.colors[h];
    for (let t = first; t < last; t++) {
      if (hv && hv.side === "query" && hv.t !== t) continue;
      for (let j = first; j <= t; j++) {
        if (hv && hv.side === "key" && hv.t !== j) continue;
        const a = weight(state.layer, h, t, j);
        if (a === 0) continue;
        ctx.globalAlpha = a;
        ctx.beginPath(); ctx.moveTo(xl + 6, y(t)); ctx.lineTo(xr - 6, y(j)); ctx.stroke();
      }
    }
  }
  ctx.globalAlpha = 1;
  ctx.font = "14px sans-serif"; ctx.textBaseline = "middle"; ctx.fillStyle = "#222";
  for (let t = first; t < last; t++) {
    const label = (SPAN < T ? t + " " : "") + DATA.tokens[t];
    ctx.textAlign = "right"; ctx.fillText(label, xl - 4, y(t), COL - 8);
    ctx.textAlign = "left"; ctx.fillText(label, xr + 4, y(t), COL - 8);
  }
  if (overview) drawMap();
}

// A long text: the first shown head's weights as a heatmap, each cell the largest weight of a
// block of DATA.cell x DATA.cell positions (square-root scale), the head view's window outlined.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function viridis(v) {
  const x = Math.sqrt(v) * 4, i = Math.min(3, Math.floor(x)), f = x - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [0, 1, 2].map(k => Math.round(a[k] + f * (b[k] - a[k])));
}
const map = document.getElementById("map"), mctx = map.getContext("2d");
function drawMap() {
  const h = Math.max(0, state.shown.indexOf(true)), img = mctx.createImageData(B, B), base = (state.layer * H + h) * B * B;
  for (let i = 0; i < B; i++)
    for (let j = 0; j < B; j++) {
      const at = (i * B + j) * 4, c = j > i ? [255, 255, 255] : viridis(overview[base + i * B + j] / 255);
      img.data[at] = c[0]; img.data[at + 1] = c[1]; img.data[at + 2] = c[2]; img.data[at + 3] = 255;
    }
  map.width = B; map.height = B; map.style.width = MAP + "px"; map.style.height = MAP + "px";
  mctx.putImageData(img, 0, 0);
  const a = state.start / DATA.cell, n = SPAN / DATA.cell;
  mctx.strokeStyle = "#e00"; mctx.lineWidth = Math.max(1, B / MAP * 2);
  mctx.strokeRect(a, a, n, n);
  document.getElementById("note").textContent = DATA.layers[state.layer] + ", " + DATA.heads[h] + ": " + T +
    " tokens; row = query, column = key; each cell the largest weight of " + DATA.cell + " x " + DATA.cell +
    " positions. Weights are shown in 8 bits (steps of 1/255). Click the map to move the window: below, queries " +
    state.start + "-" + (state.start + SPAN - 1) + " and their keys in the window.";
}
map.onclick = e => {
  const r = map.getBoundingClientRect(), row = (e.clientY - r.top) / MAP * T;
  state.start = Math.max(0, Math.min(T - SPAN, Math.round(row - SPAN / 2))); state.hover = null; draw();
};

const select = document.getElementById("layer");
DATA.layers.forEach((name, l) => select.add(new Option(name, l)));
select.onchange = () => { state.layer = +select.value; draw(); };
const swatches = DATA.heads.map((name, h) => {
  const s = document.createElement("span");
  s.style.background = DATA.colors[h]; s.title = name;
  s.onclick = () => { state.shown[h] = !state.shown[h]; paint(); };
  s.ondblclick = () => { state.shown = state.shown.map((_, i) => i === h); paint(); };
  document.getElementById("heads").appendChild(s);
  return s;
});
function paint() { swatches.forEach((s, h) => s.classList.toggle("off", !state.shown[h])); draw(); }

canvas.onmousemove = e => {
  const r = canvas.getBoundingClientRect(), x = e.clientX - r.left;
  const t = state.start + Math.floor((e.clientY - r.top - TOP) / ROW);
  const side = x < xl ? "query" : x > xr ? "key" : null;
  const hv = side && t >= state.start && t < state.start + SPAN ? {side, t} : null;
  if (JSON.stringify(hv) !== JSON.stringify(state.hover)) { state.hover = hv; draw(); }
};
canvas.onmouseleave = () => { state.hover = null; draw(); };

// #layer=L&heads=H,H&start=S&hover=T (or key=T): what to show, for links and for scripts
function fromHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  if (p.has("layer")) { const l = DATA.layers.findIndex((_, i) => DATA.layerNumbers[i] === +p.get("layer")); if (l >= 0) state.layer = l; }
  if (p.has("heads")) { const want = p.get("heads").split(",").map(Number); state.shown = DATA.headNumbers.map(n => want.includes(n)); }
  if (p.has("start")) state.start = Math.max(0, Math.min(T - SPAN, +p.get("start")));
  state.hover = p.has("hover") ? {side: "query", t: +p.get("hover")} : p.has("key") ? {side: "key", t: +p.get("key")} : null;
  select.value = state.layer; paint();
}
document.getElementById("long").hidden = !overview;
window.onhashchange = fromHash;
fromHash();
document.body.dataset.drawnMs = Math.round(performance.now());  // load and first draw, for tests/test_plot_attention.py
</script>
</body></html>
"""
PAGE_START = PAGE[:PAGE.index("%(title)s")].encode()  # how every page this tool writes begins


def pooled(w, cell):
    """[..., B, B] uint8: the largest weight of each cell x cell block of w [..., T, T], in steps of 1/255."""
    T = w.shape[-1]
    B = -(-T // cell)
    padded = np.zeros(w.shape[:-2] + (B * cell, B * cell), np.float32)
    padded[..., :T, :T] = w
    blocks = padded.reshape(w.shape[:-2] + (B, cell, B, cell)).max(axis=(-3, -1))
    return np.rint(blocks * 255).astype(np.uint8)


def banded(w, width):
    """[..., T, width] uint8: row t's weights on keys t, t - 1, ..., t - width + 1 (0 before the first),
    in steps of 1/255."""
    T = w.shape[-1]
    keys = np.arange(T)[:, None] - np.arange(width)[None, :]
    out = np.take_along_axis(w, np.broadcast_to(np.maximum(keys, 0), w.shape[:-2] + keys.shape), axis=-1)
    return np.rint(np.where(keys >= 0, out, 0) * 255).astype(np.uint8)


def page(a):
    """The page: for a text of up to PAGE_WINDOW tokens every weight; past that a heatmap of each head
    (blocks pooled to at most HEATMAP_CELLS a side) and the weights of the last PAGE_WINDOW keys of each
    query, for the head view of a window of PAGE_WINDOW queries the heatmap moves."""
    T = a.T
    width = min(T, PAGE_WINDOW)
    cell = max(1, -(-T // HEATMAP_CELLS)) if T > PAGE_WINDOW else 0
    per_head = (T * width + (-(-T // cell)) ** 2 if cell else T * width) * 4 / 3  # base64's bytes
    if a.n_layers * a.n_heads * per_head > PAGE_MAX_BYTES:
        raise ValueError("%d layers x %d heads at %d tokens make a page of %.0f MB, more than %d MB: at this length "
                         "%d layer-heads fit; select them with ./run's --layers A-B and --heads A-B"
                         % (a.n_layers, a.n_heads, T, a.n_layers * a.n_heads * per_head / 1e6,
                            PAGE_MAX_BYTES // 1000000, PAGE_MAX_BYTES // per_head))
    data = dict(tokens=a.token_texts(), layers=[a.layer_name(l) for l in range(a.n_layers)],
                heads=[a.head_name(h) for h in range(a.n_heads)], colors=head_colors(a.n_heads),
                layerNumbers=[a.layer0 + l for l in range(a.n_layers)],
                headNumbers=[a.head0 + h for h in range(a.n_heads)], band=width, cell=cell,
                blocks=-(-T // cell) if cell else 0,
                weights=base64.b64encode(banded(a.weights, width).tobytes()).decode("ascii"),
                overview=base64.b64encode(pooled(a.weights, cell).tobytes()).decode("ascii") if cell else None)
    text = json.dumps(data, ensure_ascii=True).replace("</", "<\\/")  # no token can end the script
    return PAGE % dict(title=a.name.replace("&", "&amp;").replace("<", "&lt;"), data=text)


def main(argv):
    ap = argparse.ArgumentParser(description="Plot the attention weights ./run -m attention writes.")
    ap.add_argument("file", help="a file of ./run MODEL -m attention -i TEXT -o FILE")
    ap.add_argument("-o", "--out", help="PNG to write (default attention.png, unless --html is given)")
    ap.add_argument("--layer", type=int, help="with --head: one head, large (the model's layer number)")
    ap.add_argument("--head", type=int, help="with --layer: the model's query head number")
    ap.add_argument("--html", help="write the interactive page here")
    ap.add_argument("--force", action="store_true", help="replace an existing picture or page of this tool's "
                    "(never another file)")
    a = ap.parse_args(argv)
    if (a.layer is None) != (a.head is None):
        sys.exit("plot_attention.py: --layer and --head go together: one head of one layer")
    png = a.out or (None if a.html else "attention.png")
    if png == a.html == outfile.STDIO:
        sys.exit("plot_attention.py: -: standard output cannot hold both the picture and the page")
    try:  # before any work, as ./train's claim_outputs: a device, a FIFO, another kind of file, or no --force
        if png:
            outfile.claim_picture(png, a.force)
        if a.html:
            outfile.claim(a.html, a.force, outfile.starts_with(PAGE_START), "a page plot_attention.py wrote")
    except OSError as e:
        sys.exit("plot_attention.py: %s: %s" % (e.filename, e))
    try:
        att = Attention(a.file)
    except (OSError, ValueError) as e:
        sys.exit("plot_attention.py: %s: %s" % (a.file, e.strerror if isinstance(e, OSError) else e))
    if a.layer is not None:
        for flag, n, first, count in (("--layer", a.layer, att.layer0, att.n_layers),
                                      ("--head", a.head, att.head0, att.n_heads)):
            if not first <= n < first + count:
                sys.exit("plot_attention.py: %s %d: %s holds %ss %d-%d" % (flag, n, a.file, flag[2:], first,
                                                                          first + count - 1))
    if a.html:
        try:
            text = page(att)
            with outfile.replacing(a.html, "w") as f:
                f.write(text)
        except (OSError, ValueError) as e:
            sys.exit("plot_attention.py: %s: %s" % (a.html if isinstance(e, OSError) else a.file,
                                                     e.strerror if isinstance(e, OSError) else e))
        print("wrote %s" % a.html, file=sys.stderr if a.html == outfile.STDIO else sys.stdout)  # not into the page
    if not png:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = (plot_head(att, a.layer - att.layer0, a.head - att.head0, plt) if a.layer is not None
           else plot_grid(att, plt))
    try:
        with outfile.replacing(png) as f:
            fig.savefig(f, format=outfile.picture_format(png), dpi=100, bbox_inches="tight")
    except (OSError, ValueError) as e:
        sys.exit("plot_attention.py: %s: cannot write: %s" % (png, e.strerror if isinstance(e, OSError) else e))
    print("wrote %s" % png, file=sys.stderr if png == outfile.STDIO else sys.stdout)  # not into the picture


if __name__ == "__main__":
    main(sys.argv[1:])
