"""./train's checkpoints: kill -9 at random moments, resume, and get the uninterrupted run exactly.

A reference run goes to the end. A second run with the same options is killed with SIGKILL
at a random step (twice, the second time during the resumed run), each time the model file
must be a complete, loadable model, and --resume must carry on so that every logged loss
(train and validation) and the final model file are bit-identical to the reference. SIGTERM
must write a checkpoint and exit 0, and resuming from it must also reproduce the reference.
Dropout is on, so its masks must follow the step too. The case bf16 trains a Llama with
--precision bf16 and resumes it without the flag: the state must keep the precision, and the
bfloat16 products must be as deterministic as the float32 ones.

Run from the repository root after `make`: /usr/bin/python3 tests/test_train_resume.py [-k SUBSTRING]
The steps to interrupt at are drawn from TEST_SEED (default: the clock), each case's alone.
"""
import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from pycase import ROOT  # puts tools/ on the path too
from attn import modelfile as mf  # noqa: E402
import pycase  # noqa: E402

# its own directory: another suite may run this test at the same time; removed when it passes
TMP = os.path.join(ROOT, "tests", "tmp", "train_resume.%d" % os.getpid())
TRAIN = os.path.join(ROOT, "train")
STEPS = 240
OPTS = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32", "--batch-size", "4",
        "--max-iters", str(STEPS), "--eval-interval", "20", "--eval-iters", "2", "--warmup-iters", "20",
        "--seed", "7", "--dropout", "0.1"]
SEED = os.environ.get("TEST_SEED", repr(time.time()))


@functools.lru_cache(None)
def corpus_small():
    return pycase.shakespeare_prefix(TMP, 200000)


# The runs: name -> the flags of a fresh run; a resumed run gives --arch alone, so that what
# else the run was started with must come from its state.
RUNS = {"gpt": ["--arch", "gpt"], "llama": ["--arch", "llama"], "bf16": ["--arch", "llama", "--precision", "bf16"]}


def flags(name, resume):
    return RUNS[name][:2] if resume else RUNS[name]


def run(out, extra=(), arch="gpt"):
    resume = "--resume" in extra
    r = subprocess.run([TRAIN, "-d", corpus_small(), "-o", out] + flags(arch, resume) + OPTS + list(extra),
                       capture_output=True, text=True)
    return r


def interrupt(out, at_step, sig, resume, arch):
    """Start (or resume) a run and send sig once the log shows at_step steps."""
    cmd = [TRAIN, "-d", corpus_small(), "-o", out] + flags(arch, resume) + OPTS + (["--resume"] if resume else [])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while p.poll() is None and pycase.logged_steps(out) < at_step:
        time.sleep(0.002)
    if p.poll() is not None:
        return "ended before step %d" % at_step, p.stdout.read(), p.stderr.read()
    p.send_signal(sig)
    stdout, stderr = p.communicate()
    return p.returncode, stdout, stderr


def check(name, cond, msg, fails):
    print("  %s %s: %s" % ("ok  " if cond else "FAIL", name, msg))
    if not cond:
        fails.append(name)


@functools.lru_cache(None)
def reference(arch):
    """The uninterrupted run's logged rows and final model file."""
    ref = os.path.join(TMP, "ref_%s.bin" % arch)
    r = run(ref, arch=arch)
    assert r.returncode == 0, "reference run failed: " + r.stderr.strip()
    return pycase.csv_rows(ref), open(ref, "rb").read()


def fresh(out):
    for f in (out, out + ".state", out + ".csv"):
        if os.path.exists(f):
            os.remove(f)
    return out


def killed(arch):
    """SIGKILL twice at random steps, resuming in between, then resume to the end."""
    want, ref_bytes = reference(arch)
    rng = random.Random("%s kill %s" % (SEED, arch))
    out = fresh(os.path.join(TMP, "kill_%s.bin" % arch))
    fails = []
    k1 = rng.randrange(25, STEPS // 2)
    k2 = rng.randrange(STEPS // 2 + 5, STEPS - 5)
    rc, _, _ = interrupt(out, k1, signal.SIGKILL, False, arch)
    loadable = True
    try:
        mf.read_model(out)
    except (ValueError, OSError) as e:
        loadable = str(e)
    check("%s kill -9 at step %d" % (arch, k1), rc == -signal.SIGKILL and loadable is True,
          "exit %s, model file loadable: %s" % (rc, loadable), fails)
    rc, _, _ = interrupt(out, k2, signal.SIGKILL, True, arch)
    check("%s kill -9 at step %d after --resume" % (arch, k2), rc == -signal.SIGKILL, "exit %s" % rc, fails)
    r = run(out, ["--resume"], arch)
    got = pycase.csv_rows(out)
    diff = [s for s in sorted(set(want) | set(got)) if want.get(s) != got.get(s)]
    check("%s resumed losses" % arch, r.returncode == 0 and not diff,
          "exit %d, %d steps logged, %d differ from the uninterrupted run%s" % (
              r.returncode, len(got), len(diff),
              "" if not diff else " (first: step %d %s vs %s)" % (diff[0], got.get(diff[0]), want.get(diff[0]))),
          fails)
    check("%s final model" % arch, open(out, "rb").read() == ref_bytes,
          "bit-identical to the uninterrupted run's", fails)
    assert not fails, "failed: " + "; ".join(fails)


def terminated(arch):
    """SIGTERM: a clean stop with a checkpoint at that very step, then resume to the end."""
    want, ref_bytes = reference(arch)
    rng = random.Random("%s term %s" % (SEED, arch))
    out = fresh(os.path.join(TMP, "term_%s.bin" % arch))
    fails = []
    k = rng.randrange(5, STEPS - 5)
    rc, stdout, _ = interrupt(out, k, signal.SIGTERM, False, arch)
    check("%s SIGTERM near step %d" % (arch, k), rc == 0 and "checkpoint written" in stdout,
          "exit %d, %s" % (rc, stdout.strip().splitlines()[-1] if stdout.strip() else "no output"), fails)
    r = run(out, ["--resume"], arch)
    got = pycase.csv_rows(out)
    same = got == want and open(out, "rb").read() == ref_bytes
    check("%s resumed after SIGTERM" % arch, r.returncode == 0 and same,
          "exit %d, losses and final model %s" % (r.returncode, "identical" if same else "differ"), fails)
    assert not fails, "failed: " + "; ".join(fails)


case = pycase.Cases()
for arch in RUNS:
    case.add(arch + "_killed", functools.partial(killed, arch))
    case.add(arch + "_terminated", functools.partial(terminated, arch))


def main():
    if not os.path.exists(TRAIN):
        print("no ./train: build it first (make)")
        print("0 passed, 1 failed")
        return 1
    print("TEST_SEED=%s" % SEED)
    return case.run(sys.argv[1:])


if __name__ == "__main__":
    rc = main()
    if rc == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(rc)
