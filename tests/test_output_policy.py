"""tools/convert.py replaces an output as ./train does (tools/attn/outfile.py's claim and claim_dir):
an existing OUT only with --force, and one the tool did not write (a file that is not an attn.c
model, a torch file --export-torch did not write, a folder --export-hf did not write) never, its
bytes untouched. An --export-hf folder is written beside its place and renamed into it, so a
failed write and a SIGKILL midway leave the old folder as it was. `-` is standard output for
OUT (and for reference.py --logits, plot.py -o, make_random.py), refused as an input, as a
folder and as a second output on standard output; binary output to a terminal is refused.

Run from the repository root: /usr/bin/python3 tests/test_output_policy.py [-k SUBSTRING]
"""
import glob
import os
import pty
import resource
import shutil
import signal
import subprocess
import tempfile
import time

from pycase import ROOT  # puts tools/ on the path too
from attn import random_models as mr  # noqa: E402
import pycase  # noqa: E402

TMP = tempfile.mkdtemp(prefix="attn-test-output-policy-")
PY = "/usr/bin/python3"
CONVERT = [PY, os.path.join(ROOT, "tools", "convert.py")]
MODELS = os.path.join(ROOT, "..", "shared", "models")
S260 = [os.path.join(MODELS, "stories260K.bin"), "--tokenizer", os.path.join(MODELS, "tok512.bin")]
case = pycase.Cases()


def tmp(name):
    return os.path.join(TMP, name)


def model():
    if not os.path.exists(tmp("model.bin")):
        mr.make_model(tmp("model.bin"), mr.PRESETS["llama_gqa"], seed=1)
    return tmp("model.bin")


def ok(args, **kw):
    r = subprocess.run(CONVERT + args, capture_output=True, **kw)
    assert r.returncode == 0, "%s: exit %d: %s" % (args, r.returncode, r.stderr.decode()[-300:])
    return r


def unchanged(path, args, needle):
    """args refused with needle, path's bytes as they were."""
    before = open(path, "rb").read()
    pycase.refused(CONVERT + args, needle)
    assert open(path, "rb").read() == before, "%s changed" % path


def tree(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}


@case
def model_file_replaced_only_with_force():
    out = tmp("m.bin")
    ok([S260[0], out] + S260[1:])
    unchanged(out, [S260[0], out] + S260[1:], "%s: exists; give --force to replace it" % out)
    os.truncate(out, 1000)  # a model file all the same: --force replaces it whole
    ok([S260[0], out, "--force"] + S260[1:])
    assert os.path.getsize(out) > 1000
    notes = tmp("notes.txt")
    open(notes, "w").write("my notes\n")
    for force in ([], ["--force"]):
        unchanged(notes, [S260[0], notes] + S260[1:] + force,
                  "%s: exists and is not an attn.c model file; refusing to replace it" % notes)


@case
def torch_export_replaced_only_if_its_own():
    pt = tmp("m.pt")
    ok(["--export-torch", model(), pt])
    unchanged(pt, ["--export-torch", model(), pt], "%s: exists; give --force to replace it" % pt)
    ok(["--export-torch", model(), pt, "--force"])
    other = tmp("ckpt.pt")  # a real llama2.c checkpoint: a torch file, not this tool's
    shutil.copy(os.path.join(MODELS, "llama2xs_ckpt.pt"), other)
    for path in (other, tmp("notes.txt")):
        if not os.path.exists(path):
            open(path, "w").write("my notes\n")
        unchanged(path, ["--export-torch", model(), path, "--force"],
                  "%s: exists and is not a PyTorch file that --export-torch wrote; refusing to replace it" % path)


@case
def hf_folder_replaced_only_if_an_export():
    d = tmp("hf")
    ok([model(), "--export-hf", d])
    assert "attn_export.json" in os.listdir(d)
    before = tree(d)
    pycase.refused(CONVERT + [model(), "--export-hf", d], "%s: exists; give --force to replace it" % d)
    ok([model(), "--export-hf", d, "--force"])
    assert tree(d) == before and not glob.glob(d + ".*"), "leftovers: %s" % glob.glob(d + ".*")
    download = tmp("download")  # the files an export writes, without its marker: a downloaded checkpoint
    shutil.copytree(d, download)
    os.remove(os.path.join(download, "attn_export.json"))
    pycase.refused(CONVERT + [model(), "--export-hf", download, "--force"],
                   "%s: exists and is not a folder that --export-hf wrote (it has no attn_export.json)" % download)
    busy = tmp("busy")
    shutil.copytree(d, busy)
    open(os.path.join(busy, "notes.txt"), "w").write("mine\n")
    pycase.refused(CONVERT + [model(), "--export-hf", busy, "--force"], "%s: holds notes.txt" % busy)
    assert open(os.path.join(busy, "notes.txt")).read() == "mine\n"
    empty = tmp("empty")
    os.mkdir(empty)
    ok([model(), "--export-hf", empty])
    assert tree(empty) == before


@case
def hf_export_failing_write_leaves_the_old_folder():
    """model.safetensors past ulimit -f: the old export as it was, no temporary folder."""
    d = tmp("hf_full")
    ok([model(), "--export-hf", d])
    before = tree(d)
    big = tmp("big_full.bin")
    mr.make_model(big, dict(mr.PRESETS["llama_gqa"], dim=256, hidden_dim=512), seed=2)
    limit = os.path.getsize(model()) * 2  # the JSON files fit, the bigger weights do not

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
    r = subprocess.run(CONVERT + [big, "--export-hf", d, "--force"], capture_output=True, text=True,
                       preexec_fn=small_files)
    assert r.returncode == 1 and r.stderr == "convert.py: %s: cannot write: File too large\n" % os.path.join(
        d, "model.safetensors"), r.stderr
    assert tree(d) == before and not glob.glob(d + ".*"), glob.glob(d + ".*")


@case
def hf_export_killed_leaves_the_old_folder():
    """SIGKILL while model.safetensors is written (its temporary folder holds the JSON files by
    then): the old export as it was; the temporary folder beside it is all that is left."""
    d = tmp("hf_kill")
    ok([model(), "--export-hf", d])
    before = tree(d)
    big = tmp("big.bin")
    mr.make_model(big, dict(mr.PRESETS["llama_gqa"], dim=512, hidden_dim=1536, n_layers=6), seed=3)
    p = subprocess.Popen(CONVERT + [big, "--export-hf", d, "--force"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not glob.glob(d + ".tmp-*/tokenizer_config.json"):
        assert p.poll() is None and time.monotonic() < deadline, "the export ended before it could be killed"
        time.sleep(0.005)
    p.kill()
    p.wait()
    assert tree(d) == before, "the old export changed"
    assert [os.path.basename(x)[:len("hf_kill.tmp-")] for x in glob.glob(d + ".*")] == ["hf_kill.tmp-"]


@case
def dash_is_standard_output():
    out = tmp("s260.bin")
    ok([S260[0], out] + S260[1:])
    r = ok([S260[0], "-"] + S260[1:])
    assert r.stdout == open(out, "rb").read(), "stdout is not the model file alone"
    assert not os.path.exists("-") and not os.path.exists(os.path.join(TMP, "-"))
    pt = tmp("s260.pt")
    ok(["--export-torch", out, pt])
    assert ok(["--export-torch", out, "-"]).stdout == open(pt, "rb").read()
    pycase.refused(CONVERT + ["-", tmp("x.bin")], "convert.py: -: a checkpoint is not read from standard input")
    pycase.refused(CONVERT + [S260[0], tmp("x.bin"), "--tokenizer", "-"],
                   "convert.py: -: a tokenizer is not read from standard input")
    pycase.refused(CONVERT + [out, "--export-hf", "-"],
                   "convert.py: -: is standard output, which cannot be a directory")
    m, s = pty.openpty()  # a terminal as standard output
    r = subprocess.run(CONVERT + [S260[0], "-"] + S260[1:], stdout=s, stderr=subprocess.PIPE, text=True)
    os.close(s)
    os.close(m)
    assert r.returncode == 1 and r.stderr == "convert.py: -: standard output is a terminal: redirect it to a file\n", \
        r.stderr


@case
def dash_in_the_other_tools():
    """reference.py --logits -, plot.py -o - and make_random.py - write what they write to a file, and
    nothing else, to standard output; a folder or a second output there is refused."""
    def tool(name, *args):
        return [PY, os.path.join(ROOT, "tools", name)] + list(args)

    def same(cmd_file, cmd_dash, path):
        assert subprocess.run(cmd_file, capture_output=True).returncode == 0
        r = subprocess.run(cmd_dash, capture_output=True)
        assert r.returncode == 0 and r.stdout == open(path, "rb").read(), (cmd_dash, r.stderr[-300:])
    same(tool("reference.py", model(), "--tokens", "1,2,3", "--logits", tmp("l.npy")),
         tool("reference.py", model(), "--tokens", "1,2,3", "--logits", "-"), tmp("l.npy"))
    same(tool("make_random.py", tmp("r.bin")), tool("make_random.py", "-"), tmp("r.bin"))
    with open(tmp("log.csv"), "w") as f:
        f.write("step,train_loss,val_loss,lr,tokens_per_sec\n0,4.5,4.6,0.001,100.0\n1,4.4,,0.001,100.0\n")
    r = subprocess.run(tool("plot.py", tmp("log.csv"), "-o", "-"), capture_output=True)
    assert r.returncode == 0 and r.stdout.startswith(b"\x89PNG") and r.stdout.endswith(b"IEND\xaeB`\x82"), r.stderr
    pycase.refused(tool("reference.py", model(), "--tokens", "1", "--logits", "-", "--greedy", "2"),
                   "reference.py: --logits -: standard output would hold the --ppl-tokens or --greedy text too")
    pycase.refused(tool("make_random.py", "-", "--hf-gpt2"), "make_random.py: -: is standard output, which cannot be "
                   "a directory")
    assert not os.path.exists("-")


if __name__ == "__main__":
    raise SystemExit(case.main(TMP))
