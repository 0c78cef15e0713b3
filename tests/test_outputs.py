"""Every tool that writes a file refuses an output that exists and is not a regular file (a
character device, a FIFO, a socket, a directory, or a symlink to one) with one line naming it
and exit status 1, and leaves it as it was; an output is replaced through a temporary file of
its own beside it that no failure leaves behind (tools/attn/outfile.py).

The nodes are made inside this test's own temporary directory; the character device has
/dev/null's numbers. Run from the repository root: /usr/bin/python3 tests/test_outputs.py [-k SUBSTRING]
"""
import os
import socket
import stat
import subprocess
import sys
import tempfile

from pycase import ROOT  # puts tools/ on the path too
from attn import random_models  # noqa: E402
from attn import modelfile as mf  # noqa: E402
from attn import outfile  # noqa: E402
import pycase  # noqa: E402

MODELS = os.path.join(ROOT, "..", "shared", "models")
TMP = tempfile.mkdtemp(prefix="attn-test-outputs-")
PY = "/usr/bin/python3"
case = pycase.Cases()


def tool(name):
    return os.path.join(ROOT, "tools", name)


def tmp(name):
    return os.path.join(TMP, name)


def specials(tag, suffix=""):
    """[(path, kind, is_kind)]: a fresh node of each kind (named with suffix) in a directory of
    their own, TMP/tag, and a symlink to the FIFO; is_kind(mode) tells the node is still one."""
    d = tmp(tag)
    os.makedirs(d)
    out = []
    dev = os.path.join(d, "chardev" + suffix)
    try:
        os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        out.append((dev, "a character device", stat.S_ISCHR))
    except PermissionError:
        print("      (not allowed to make a device node: the character device case skipped)")
    fifo = os.path.join(d, "fifo" + suffix)
    os.mkfifo(fifo)
    out.append((fifo, "a FIFO", stat.S_ISFIFO))
    sock = os.path.join(d, "socket" + suffix)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(sock)
    out.append((sock, "a socket", stat.S_ISSOCK))
    sub = os.path.join(d, "dir" + suffix)
    os.mkdir(sub)
    out.append((sub, "a directory", stat.S_ISDIR))
    link = os.path.join(d, "link" + suffix)
    os.symlink(fifo, link)
    out.append((link, "a FIFO", stat.S_ISFIFO))
    return out


def refuses_each(tag, command, suffix="", want="a regular file"):
    """command(path) for each of specials(tag): refused in one line naming the path and what it
    is, the node unchanged, nothing else left in the directory."""
    nodes = specials(tag, suffix)
    before = sorted(os.listdir(tmp(tag)))
    for path, kind, is_kind in nodes:
        pycase.refused(command(path), "%s: is %s, not %s: refusing to replace it" % (path, kind, want))
        assert is_kind(os.stat(path).st_mode), "%s is no longer %s" % (path, kind)
    assert sorted(os.listdir(tmp(tag))) == before, "left behind: %s" % sorted(set(os.listdir(tmp(tag))) - set(before))
    assert not os.listdir(os.path.join(tmp(tag), "dir" + suffix)), "something was written into the directory"


def model():
    """A small model file to read."""
    if not os.path.exists(tmp("model.bin")):
        random_models.make_model(tmp("model.bin"), random_models.PRESETS["llama_gqa"], seed=1)
    return tmp("model.bin")


@case
def convert_refuses_special_outputs():
    """convert.py SRC X with X a character device used to turn the node into a regular file."""
    src = os.path.join(MODELS, "stories260K.bin")
    refuses_each("convert", lambda out: [PY, tool("convert.py"), src, out, "--tokenizer",
                                         os.path.join(MODELS, "tok512.bin")])
    refuses_each("export", lambda out: [PY, tool("convert.py"), "--export-torch", model(), out])


@case
def make_random_refuses_special_outputs():
    refuses_each("make_random", lambda out: [PY, tool("make_random.py"), out, "--preset", "gpt2"])
    # a Hugging Face directory: anything but a directory is refused, and so is a folder holding a FIFO
    os.makedirs(tmp("hf_dirs"))
    for path, kind, is_kind in specials("hf_dirs/nodes"):
        if kind != "a directory":
            pycase.refused([PY, tool("make_random.py"), path, "--preset", "gpt2", "--hf-gpt2"],
                           "%s: is %s, not a directory" % (path, kind))
            assert is_kind(os.stat(path).st_mode)
    d = tmp("hf_dirs/hf")  # a folder with a FIFO in it: not one make_random.py wrote, so never replaced
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "config.json"))
    pycase.refused([PY, tool("make_random.py"), d, "--preset", "gpt2", "--hf-gpt2", "--force"],
                   "%s: exists and is not a folder that make_random.py wrote" % d)
    assert stat.S_ISFIFO(os.stat(os.path.join(d, "config.json")).st_mode)
    assert os.listdir(d) == ["config.json"], os.listdir(d)


@case
def plot_refuses_special_outputs():
    with open(tmp("log.csv"), "w") as f:
        f.write("step,train_loss,val_loss,lr,tokens_per_sec\n0,4.5,4.6,0.001,100.0\n1,4.4,,0.001,100.0\n")
    refuses_each("plot", lambda out: [PY, tool("plot.py"), tmp("log.csv"), "-o", out])


@case
def plot_attention_refuses_special_outputs():
    att = tmp("attention.bin")
    r = subprocess.run([os.path.join(ROOT, "run"), model(), "-m", "attention", "-i", "Once", "-o", att],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    refuses_each("plot_attention", lambda out: [PY, tool("plot_attention.py"), att, "-o", out])
    refuses_each("plot_attention_html", lambda out: [PY, tool("plot_attention.py"), att, "--html", out])


@case
def reference_refuses_special_outputs():
    """reference.py --logits X writes X.npy, as numpy names it: the nodes are named so."""
    refuses_each("reference", lambda out: [PY, tool("reference.py"), model(), "--tokens", "1,2", "--logits", out],
                 suffix=".npy")


@case
def gen_unicode_tables_refuses_special_outputs():
    refuses_each("gen_unicode_tables", lambda out: [PY, tool("gen_unicode_tables.py"), "--source", "python", out])


@case
def write_model_refuses_special_outputs():
    """modelfile.write_model, which convert.py, make_random.py and the tests write with."""
    c, tok, t = mf.read_model(model())
    for path, kind, is_kind in specials("write_model"):
        try:
            mf.write_model(path, c, tok, t)
            raise AssertionError("write_model replaced %s" % kind)
        except outfile.Refused as e:
            assert e.filename == path and str(e) == "is %s, not a regular file: refusing to replace it" % kind, e
        assert is_kind(os.stat(path).st_mode)


# A writer of OUT stopped inside outfile.replacing: by kill -9 ("kill"), or waiting for a line
# on its standard input before it finishes ("wait").
WRITER = """import os, signal, sys
sys.path.insert(0, %r)
from attn import outfile
with outfile.replacing(sys.argv[1]) as f:
    f.write(b"partial " * 100000)
    f.flush()
    print("writing", flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.readline()
""" % os.path.join(ROOT, "tools")


@case
def stale_temporaries_removed_by_the_next_writer():
    """A conversion killed with kill -9 while writing leaves its temporary file (OUT.tmp.XXXXXXXX);
    the next convert.py to OUT removes it, in a note naming it, while the temporary of a writer
    still at work (locked) is left to it, and that writer then finishes as it would."""
    d = tmp("stale")
    os.makedirs(d)
    out = os.path.join(d, "o.bin")
    live = subprocess.Popen([PY, "-c", WRITER, out, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert live.stdout.readline() == b"writing\n"
        working = os.listdir(d)
        killed = subprocess.run([PY, "-c", WRITER, out, "kill"], capture_output=True)
        assert killed.returncode == -9, killed
        stale = [n for n in os.listdir(d) if n not in working]
        assert len(working) == 1 and len(stale) == 1 and stale[0].startswith("o.bin."), (working, stale)
        r = subprocess.run([PY, tool("convert.py"), model(), out], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "convert.py: note: removed %s, a temporary file left by a writer that was stopped while writing" % (
            os.path.join(d, stale[0])) in r.stderr, r.stderr
        assert sorted(os.listdir(d)) == sorted(["o.bin"] + working), os.listdir(d)
    finally:
        live.communicate(b"\n")
    assert live.returncode == 0 and os.listdir(d) == ["o.bin"], os.listdir(d)
    assert open(out, "rb").read() == b"partial " * 100000


@case
def replaced_whole_through_own_temporary_files():
    """Two writers of one file at once each have their own temporary file, named after it; a
    failure leaves the file as it was and no temporary file; the mode is what open() would give;
    --export-torch no longer writes OUT.tmp (a FIFO there used to hang it)."""
    d = tmp("replace")
    os.makedirs(d)
    out = os.path.join(d, "out.bin")
    outfile.write(out, b"old")
    with outfile.replacing(out) as f, outfile.replacing(out) as g:
        temps = sorted(n for n in os.listdir(d) if n != "out.bin")
        assert len(temps) == 2 and all(n.startswith("out.bin.") for n in temps), temps
        f.write(b"first")
        g.write(b"second")
    assert open(out, "rb").read() == b"first" and os.listdir(d) == ["out.bin"], os.listdir(d)  # f closed last
    try:
        with outfile.replacing(out) as f:
            f.write(b"half")
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert open(out, "rb").read() == b"first" and os.listdir(d) == ["out.bin"], os.listdir(d)
    old = os.umask(0o027)
    try:
        outfile.write(out, b"x")
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o640, oct(os.stat(out).st_mode)
    finally:
        os.umask(old)
    pt = os.path.join(d, "m.pt")
    os.mkfifo(pt + ".tmp")
    r = subprocess.run([PY, tool("convert.py"), "--export-torch", model(), pt], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(pt + ".tmp").st_mode) and sorted(os.listdir(d)) == ["m.pt", "m.pt.tmp", "out.bin"]


if __name__ == "__main__":
    sys.exit(case.main(TMP))
