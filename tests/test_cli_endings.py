"""How the tools end and what they show on a terminal (tools/attn/cli_main.py, tools/attn/progress.py):
Ctrl-C (SIGINT) ends convert.py (converting and exporting), reference.py, make_random.py and
plot.py in one line, `TOOL: interrupted`, with exit status 130 and no temporary file left; a
python3 without numpy or torch ends in one line naming the package and /usr/bin/python3; a
conversion shows `tensor k of n, MB/s, ETA` on a terminal and nothing elsewhere.

A Python without numpy is /usr/bin/python3 -S (no site: no dist-packages), through a symlink
named otherwise; one without torch adds a folder holding only numpy to PYTHONPATH.

Run from the repository root: /usr/bin/python3 tests/test_cli_endings.py [-k SUBSTRING]
"""
import os
import pty
import re
import shutil
import signal
import subprocess
import tempfile
import time

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
from attn import modelfile as mf  # noqa: E402
from attn import random_models as mr  # noqa: E402
from attn.exports import hf as export_hf  # noqa: E402
import pycase  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-cli-endings-")
PY = "/usr/bin/python3"
MODELS = os.path.join(ROOT, "..", "shared", "models")
case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


def tool(name):
    return os.path.join(ROOT, "tools", name)


def model():
    if not os.path.exists(tmp("model.bin")):
        mr.make_model(tmp("model.bin"), mr.PRESETS["llama_gqa"], seed=1)
    return tmp("model.bin")


def interrupted(cmd, wait):
    """cmd given SIGINT after wait seconds, or (wait None) once it has begun writing into TMP/out: one
    line, exit 130, no temporary file left in TMP/out. On a busy machine the few tenths of a second
    a write takes can pass unseen, and a signal can come as the tool ends, after its closing line
    (then it says "interrupted" too, or Python's exit dies of it, silently): a run that finished
    its work first is tried again, up to 5 times, a wait halved each time (not below 0.06 s, by
    when the tool has set up its handler)."""
    want = "%s: interrupted\n" % os.path.basename(cmd[0])
    for attempt in range(5):
        p = subprocess.Popen([PY] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + (max(wait / 2 ** attempt, 0.06) if wait is not None else 120)
        while time.monotonic() < deadline and p.poll() is None and (wait is not None or not os.listdir(tmp("out"))):
            time.sleep(0.001)
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        err = p.stderr.read()
        p.wait()
        if (p.returncode, err) == (130, want):
            break
        finished = " -> " in err or "wrote" in err  # its closing line: the signal came after the work
        assert p.returncode == 0 or p.returncode in (-signal.SIGINT, 130) and finished, \
            "%s: exit %d, stderr %r" % (cmd[0], p.returncode, err[-300:])
        outputs_whole()  # it finished: its output goes, for the next try
    else:
        raise AssertionError("%s always ended before the signal: exit %d, %r" % (cmd, p.returncode, err[-200:]))
    outputs_whole()


def outputs_whole():
    """Nothing in TMP/out but whole outputs, which are removed. (A signal just after an output took
    its place, or during an export's two renames, which hold it off, leaves the new one whole.)"""
    for name in os.listdir(tmp("out")):
        path = tmp("out/" + name)
        if name == "hf":
            assert sorted(os.listdir(path)) == sorted(export_hf.FILES), "a partial export: %s" % os.listdir(path)
            shutil.rmtree(path)
        else:
            assert name in ("o.bin", "r.bin", "p.png"), "left behind: %s" % name
            if name != "p.png":
                mf.read_model(path)
            os.unlink(path)


@case
def ctrl_c_ends_each_tool_in_one_line():
    """Early (importing numpy or torch), reading a checkpoint (torch's own code turns a
    KeyboardInterrupt into a RuntimeError, which convert.py once reported as a damaged file), and
    writing (the temporary file or folder removed)."""
    os.makedirs(tmp("out"))
    with open(tmp("log.csv"), "w") as f:
        f.write("step,train_loss,val_loss,lr,tokens_per_sec\n0,4.5,4.6,0.001,100.0\n")
    big = tmp("big.bin")
    mr.make_model(big, dict(mr.PRESETS["llama_gqa"], dim=512, hidden_dim=1536, n_layers=6), seed=3)
    commands = [[tool("convert.py"), os.path.join(MODELS, "llama2xs_ckpt.pt"), tmp("out/o.bin"), "--tokenizer",
                 os.path.join(MODELS, "tok512.bin")],
                [tool("convert.py"), big, tmp("out/o.bin"), "--weights", "q8_0"],
                [tool("convert.py"), big, "--export-hf", tmp("out/hf")],
                [tool("reference.py"), model(), "--tokens", "1,2"],
                [tool("make_random.py"), tmp("out/r.bin"), "--preset", "llama_gqa", "--set", "dim=512",
                 "--set", "hidden_dim=2048", "--set", "n_layers=8"],
                [tool("plot.py"), tmp("log.csv"), "-o", tmp("out/p.png")]]
    for cmd in commands:
        interrupted(cmd, 0.25)
    for cmd in commands[0], commands[3]:  # inside torch's import, which turns the interrupt into a RuntimeError
        interrupted(cmd, 0.6)
    for cmd in commands[1:3] + commands[4:5]:
        interrupted(cmd, None)


def without(package):
    """A python3 command without package: the interpreter through a symlink of another name."""
    d = tmp("py_" + package)
    os.makedirs(d)
    os.symlink(PY, os.path.join(d, "python3"))
    if package == "numpy":
        return [os.path.join(d, "python3"), "-S"], os.path.join(d, "python3"), {}
    os.symlink(os.path.dirname(np.__file__), os.path.join(d, "numpy"))  # numpy alone on the path
    return [PY, "-S"], PY, {"PYTHONPATH": d}


@case
def a_missing_package_in_one_line():
    for package, cmd in (("numpy", [tool("convert.py"), model(), tmp("x.bin")]),
                         ("numpy", [tool("make_random.py"), tmp("x.bin")]),
                         ("torch", [tool("convert.py"), os.path.join(MODELS, "llama2xs_ckpt.pt"), tmp("x.bin")]),
                         ("torch", [tool("reference.py"), model(), "--tokens", "1"])):
        if not os.path.exists(tmp("py_" + package)):
            python, shown, env = without(package)
        r = subprocess.run(python + cmd, capture_output=True, text=True, env=dict(os.environ, **env))
        name = os.path.basename(cmd[0])
        if shown == PY:
            want = "%s: torch is missing from %s: install Debian's python3-torch (apt-get install python3-torch)\n" \
                % (name, PY)
        else:
            want = "%s: %s is missing from this Python (%s): run the tools with %s, which has Debian's python3-%s\n" \
                % (name, package, shown, PY, package)
        assert r.returncode == 1 and r.stderr == want, "%s: exit %d, stderr %r" % (cmd, r.returncode, r.stderr)
        assert not os.path.exists(tmp("x.bin"))


def on_a_terminal(cmd, env):
    """(exit status, what cmd wrote on stderr, a pseudo-terminal)."""
    m, s = pty.openpty()
    p = subprocess.Popen([PY] + cmd, stdout=subprocess.DEVNULL, stderr=s, env=dict(os.environ, **env))
    os.close(s)
    out = b""
    while True:
        try:
            chunk = os.read(m, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(m)
    return p.wait(), out.decode()


@case
def progress_on_a_terminal_only():
    """ATTN_PROGRESS_AFTER=0 shows the line from the first tensor (the default waits a second);
    the line is rewritten in place and erased before the closing note."""
    src = model()
    rc, err = on_a_terminal([tool("convert.py"), src, tmp("p.bin")], {"ATTN_PROGRESS_AFTER": "0"})
    assert rc == 0, err
    # llama_gqa's 29 tensors: 3 layers of 9, the embedding and the final norm
    assert re.search(r"\r\x1b\[Kconvert\.py: tensor 1 of 29, [0-9.]+ MB/s, ETA [0-9]+:[0-9]{2}\r\x1b\[K", err), err
    assert err.count("\n") == 1, err[-300:]
    assert err.split("\r\x1b[K")[-1].startswith("convert.py: attn.c model file -> "), err[-300:]
    rc, err = on_a_terminal([tool("convert.py"), src, tmp("p.bin"), "--force"], {})  # well under a second
    assert rc == 0 and "tensor" not in err, err
    r = subprocess.run([PY, tool("convert.py"), src, tmp("p.bin"), "--force"], capture_output=True, text=True,
                       env=dict(os.environ, ATTN_PROGRESS_AFTER="0"))
    assert r.returncode == 0 and "tensor" not in r.stderr and "\r" not in r.stderr, r.stderr


if __name__ == "__main__":
    raise SystemExit(case.main(TMP))
