"""./train across processes (make MPI=1; the suite's build is tests/bin/train_mpi), on this machine.

mpirun -np 2 with --grad-accum 2 trains a small GPT and a small Llama for 50 steps (dropout on, so
its masks must follow the global micro-batch too); one process with --grad-accum 4 is the
reference. Every logged loss must agree within 1e-5 relative and the final weights within 1e-5,
with the same checkpoint file layout. kill -9 of one rank mid-run must end the job, and --resume on
two ranks must then reproduce the uninterrupted two-rank run bit for bit. A run on two ranks is
continued by one process (the micro-batch order allows it) and refused on three, by name. The MPI
build alone is today's ./train, bit for bit; the plain ./train under mpirun -np 2 is refused. The
Llama trained with --precision bf16 on two ranks must match its one process likewise.

Run from the repository root after `make tests/bin/train_mpi train`:
  /usr/bin/python3 tests/test_mpi.py [-k SUBSTRING]
As root it sets Open MPI's allow-run-as-root variables; every mpirun gets --oversubscribe, since
the machines are shared. In the sanitizer suite (make test-asan) Open MPI's own allocations, which
it never frees, are not counted as leaks, and the Llama cases are left to the plain suite.
"""
import functools
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np

from pycase import ROOT  # puts tools/ on the path too
from attn import modelfile as mf  # noqa: E402
import pycase  # noqa: E402

TMP = os.path.join(ROOT, "tests", "tmp", "mpi.%d" % os.getpid())
TRAIN = os.path.join(ROOT, "train")
TRAIN_MPI = os.path.join(ROOT, "tests", "bin", "train_mpi")
STEPS = 50
OPTS = ["--n-layer", "2", "--n-head", "4", "--n-embd", "32", "--block-size", "32", "--batch-size", "4",
        "--max-iters", str(STEPS), "--eval-interval", "10", "--eval-iters", "2", "--warmup-iters", "10",
        "--lr-decay-iters", str(STEPS), "--seed", "11", "--dropout", "0.1"]
ARCH_OPTS = {"gpt": ["--arch", "gpt"], "llama": ["--arch", "llama", "--n-kv-head", "2"],
             "bf16": ["--arch", "llama", "--n-kv-head", "2", "--precision", "bf16"]}
TOL = 1e-5
# --precision bf16's: the ranks add the gradients in another order than one process's threads,
# float32 roundings apart, and now and then that moves a product's operand across a bfloat16
# rounding boundary, a change of 2^-8 of it instead of 2^-24: over the 50 steps the losses part
# by up to 1e-5 and the weights by up to 2e-4, where float32's stay near 1e-6. That is as far
# as float32 products part from bfloat16 ones on this model; the first BF16_EARLY steps, before
# the first such crossing, tell them apart: the same to 1e-8, where float32 is 3e-6 to 1e-5 off.
TOL_BF16 = {"loss": 1e-4, "weight": 1e-3}
BF16_EARLY, TOL_BF16_EARLY = 5, 1e-6
SEED = os.environ.get("TEST_SEED", repr(time.time()))
ASAN = bool(os.environ.get("ATTN_ASAN_SUITE"))


def env(threads=None):
    """The environment of a run: Open MPI allowed as root, and OMP_NUM_THREADS as given (None: unset,
    so that each rank takes its share of the cores)."""
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    e.pop("OMP_NUM_THREADS", None)
    if threads:
        e["OMP_NUM_THREADS"] = str(threads)
    if ASAN:
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "").replace("detect_leaks=1", "detect_leaks=0")
    return e


def mpirun(np_, *args):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + list(args)


@functools.lru_cache(None)
def corpus():
    return pycase.shakespeare_prefix(TMP, 100000)


def train_cmd(exe, out, arch, extra):
    return [exe, "-d", corpus(), "-o", out] + OPTS + ARCH_OPTS[arch] + list(extra)


def run(cmd, threads=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(threads))
    assert r.returncode == 0, "%s failed (exit %d): %s" % (" ".join(cmd[:6]), r.returncode, r.stderr.strip()[-600:])
    return r


def rel(a, b):
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-30)


WORST = {}  # the largest differences seen, for the closing report


def compare_runs(got_out, want_out, tol=None):
    """Every logged loss and the final weights of two runs agree within TOL (or tol's); a list of
    what does not."""
    label = "bf16 " if tol else ""
    tol = tol or {"loss": TOL, "weight": TOL}
    got, want, bad = pycase.csv_rows(got_out), pycase.csv_rows(want_out), []
    if sorted(got) != sorted(want):
        return ["logged steps %s vs %s" % (sorted(got)[-3:], sorted(want)[-3:])]
    for step in sorted(want):
        for k, name in ((0, "train loss"), (1, "val loss")):
            if want[step][k] and got[step][k]:
                WORST[label + name] = max(WORST.get(label + name, 0.0), rel(got[step][k], want[step][k]))
            if want[step][k] and (not got[step][k] or rel(got[step][k], want[step][k]) > tol["loss"]):
                bad.append("step %d %s %s vs %s" % (step, name, got[step][k], want[step][k]))
        if got[step][2] != want[step][2]:
            bad.append("step %d lr %s vs %s" % (step, got[step][2], want[step][2]))
    _, _, tg = mf.read_model(got_out)
    _, _, tw = mf.read_model(want_out)
    for name in tw:
        d = float(np.max(np.abs(tg[name] - tw[name])))
        WORST[label + "weight"] = max(WORST.get(label + "weight", 0.0), d)
        if d > tol["weight"]:
            bad.append("%s differs by %.3g" % (name, d))
    return bad


@functools.lru_cache(None)
def single(arch):
    """One process with --grad-accum 4 (two threads, as the suite runs): the reference."""
    out = os.path.join(TMP, "single_%s.bin" % arch)
    run(train_cmd(TRAIN, out, arch, ["--grad-accum", "4"]), threads=2)
    return out


@functools.lru_cache(None)
def two_ranks(arch):
    """mpirun -np 2 with --grad-accum 2: the same global batch."""
    out = os.path.join(TMP, "two_%s.bin" % arch)
    r = run(mpirun(2, *train_cmd(TRAIN_MPI, out, arch, ["--grad-accum", "2"])))
    return out, r.stdout


def equals_single(arch):
    out, stdout = two_ranks(arch)
    assert "batch 4 x 32 x 4 accum; 2 ranks x 1 thread" in stdout, \
        "the summary does not show the global batch and 2 ranks x 1 thread: %r" % stdout[:400]
    bad = compare_runs(out, single(arch), TOL_BF16 if arch == "bf16" else None)
    if arch == "bf16":
        got, want = pycase.csv_rows(out), pycase.csv_rows(single(arch))
        bad += ["step %d train loss %s vs %s" % (step, got[step][0], want[step][0]) for step in range(1, BF16_EARLY + 1)
                if rel(got[step][0], want[step][0]) > TOL_BF16_EARLY]
    assert not bad, "%d differences from one process with --grad-accum 4, first: %s" % (len(bad), "; ".join(bad[:3]))
    with open(out + ".state", "rb") as f, open(single(arch) + ".state", "rb") as g:
        a, b = f.read(), g.read()
    assert len(a) == len(b), "the checkpoint is %d bytes, one process's %d" % (len(a), len(b))


def rank_pid(out, rank):
    """The pid of the train_mpi process of the given rank writing out, or None."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            environ = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if cmdline[0].endswith(b"train_mpi") and out.encode() in cmdline and \
                ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in environ:
            return int(pid)
    return None


def killed(arch):
    """kill -9 of rank 1 at a random step ends the job; --resume reproduces the uninterrupted run."""
    want, _ = two_ranks(arch)
    out = os.path.join(TMP, "kill_%s.bin" % arch)
    at = random.Random("%s %s" % (SEED, arch)).randrange(12, STEPS - 8)
    p = subprocess.Popen(mpirun(2, *train_cmd(TRAIN_MPI, out, arch, ["--grad-accum", "2"])),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env())
    while p.poll() is None and pycase.logged_steps(out) < at:
        time.sleep(0.002)
    pid = rank_pid(out, 1)
    assert p.poll() is None and pid, "the run ended before step %d: %s" % (at, p.stderr.read()[-300:])
    os.kill(pid, signal.SIGKILL)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("mpirun did not end the job within 60 s of rank 1's kill -9")
    assert p.returncode != 0, "mpirun exited 0 after rank 1 was killed"
    run(mpirun(2, *train_cmd(TRAIN_MPI, out, arch, ["--resume"])))
    got, ref = pycase.csv_rows(out), pycase.csv_rows(want)
    diff = [s for s in sorted(set(ref) | set(got)) if ref.get(s) != got.get(s)]
    assert not diff, "killed at step %d: %d logged steps differ from the uninterrupted run, first %d: %s vs %s" % (
        at, len(diff), diff[0], got.get(diff[0]), ref.get(diff[0]))
    assert open(out, "rb").read() == open(want, "rb").read(), \
        "killed at step %d: the final model differs from the uninterrupted run's" % at


def other_ranks():
    """Two ranks to step 20, then one process to the end: the single run's losses and weights."""
    out = os.path.join(TMP, "switch.bin")
    run(mpirun(2, *train_cmd(TRAIN_MPI, out, "gpt", ["--grad-accum", "2", "--max-iters", "20"])))
    r = subprocess.run(mpirun(3, *train_cmd(TRAIN_MPI, out, "gpt", ["--resume"])), capture_output=True, text=True,
                       env=env())
    assert r.returncode != 0 and "4 micro-batches per step, which 3 ranks cannot share evenly" in r.stderr, \
        "a resume on 3 ranks of a run of 4 micro-batches per step: exit %d, %r" % (r.returncode, r.stderr[-300:])
    run(train_cmd(TRAIN, out, "gpt", ["--resume"]), threads=2)
    bad = compare_runs(out, single("gpt"))
    assert not bad, "%d differences from one process throughout, first: %s" % (len(bad), "; ".join(bad[:3]))


def alone():
    """The MPI build without mpirun is ./train: the same model file, bit for bit."""
    out = os.path.join(TMP, "alone.bin")
    run(train_cmd(TRAIN_MPI, out, "gpt", ["--grad-accum", "4"]), threads=2)
    assert open(out, "rb").read() == open(single("gpt"), "rb").read(), "differs from ./train's model"
    assert open(out + ".state", "rb").read() == open(single("gpt") + ".state", "rb").read(), \
        "differs from ./train's resume state"


def plain_refused():
    """The plain ./train under mpirun -np 2 refuses, naming the build."""
    r = subprocess.run(mpirun(2, *train_cmd(TRAIN, os.path.join(TMP, "plain.bin"), "gpt", [])), capture_output=True,
                       text=True, env=env())
    assert r.returncode != 0 and "built without MPI" in r.stderr, "exit %d, %r" % (r.returncode, r.stderr[-300:])
    assert not os.path.exists(os.path.join(TMP, "plain.bin")), "it wrote a model"


def mismatched_ranks():
    """Ranks started with different options (mpirun's A : B form) are refused before training,
    by the checksum the ranks also compare their weights with at every checkpoint."""
    out = os.path.join(TMP, "mismatch.bin")
    cmd = ["mpirun", "--oversubscribe", "-np", "1"] + train_cmd(TRAIN_MPI, out, "gpt", []) + \
        [":", "-np", "1"] + train_cmd(TRAIN_MPI, out, "gpt", ["--seed", "12"])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=120)
    assert r.returncode != 0 and "rank 1's corpus, model or options differ from rank 0's" in r.stderr, \
        "exit %d, %r" % (r.returncode, r.stderr[-300:])
    assert not os.path.exists(out), "it wrote a model"


def threads():
    """Unless told, each rank runs this machine's cores over its ranks; -np 1 spreads past the core
    Open MPI binds it to by default, without a note, and an asked-for --bind-to core is kept."""
    cores = os.cpu_count()
    for np_, binding, want in ((1, [], "1 rank x %d thread" % cores),
                               (2, [], "2 ranks x %d thread" % max(1, cores // 2)),
                               (1, ["--bind-to", "core"], "1 rank x 1 thread")):
        out = os.path.join(TMP, "threads.bin")
        cmd = ["mpirun", "-np", str(np_)] + binding + train_cmd(TRAIN_MPI, out, "gpt", ["--max-iters", "1", "--force"])
        r = run(cmd)
        assert want in r.stdout and "note" not in r.stderr, "mpirun -np %d %s: %r, stderr %r" % (
            np_, " ".join(binding), r.stdout[:300], r.stderr[-300:])


case = pycase.Cases()
for arch in ("gpt",) if ASAN else ("gpt", "llama"):
    case.add(arch + "_two_ranks_equal_one", functools.partial(equals_single, arch))
    case.add(arch + "_killed_rank_resumed", functools.partial(killed, arch))
if not ASAN:
    case.add("bf16_two_ranks_equal_one", functools.partial(equals_single, "bf16"))
case.add("resume_on_other_ranks", other_ranks)
case.add("mpi_build_alone", alone)
case.add("plain_build_refused", plain_refused)
case.add("mismatched_ranks_refused", mismatched_ranks)
case.add("threads_per_rank", threads)


def main():
    for exe, how in ((TRAIN, "make train"), (TRAIN_MPI, "make tests/bin/train_mpi")):
        if not os.path.exists(exe):
            print("no %s: build it first (%s)" % (os.path.relpath(exe, ROOT), how))
            print("0 passed, 1 failed")
            return 1
    print("TEST_SEED=%s" % SEED)
    return case.main(TMP, lambda: WORST and print("largest differences from one process: %s" % ", ".join(
        "%s %.2g" % kv for kv in sorted(WORST.items()))))


if __name__ == "__main__":
    sys.exit(main())
