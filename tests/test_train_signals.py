"""./train on long runs and around -o (issue 29), with real signals and real processes.

- nohup: a SIGHUP the run was started ignoring stays ignored, and the run ends normally; without
  nohup the same SIGHUP stops it with a checkpoint.
- SIGTERM in the middle of a step of --grad-accum 3000: the run stops within one micro-batch
  (--dump appends each micro-batch as it is drawn, so the file says how many were done when the
  signal was sent and when the run ended), checkpoints the step before, and --resume ends
  bit-identical to the uninterrupted run (every logged loss, the model file). The same with
  mpirun -np 2 (a signal to mpirun), and a SIGTERM during an evaluation.
- The MPI log redirected to a file has no carriage return and no escape sequence.
- A symbolic link to a running run's -o meets its lock; --resume through the link goes on.
- A damaged MODEL.state is named; --keep-best keeps the best evaluation's model file while
  MODEL.state resumes the latest step; -d <(cat corpus) and a FIFO train as the file does.
- Files beside -o that ./train did not write are refused even with --force; stale temporary
  files of a stopped run are removed under the lock.
- --config, a byte-order mark, a vocabulary that stops short, step 0's evaluation, --sample-prompt;
  a config file written as nanoGPT's are.
- The memory estimate is within 10 % of the peak resident size.

Run from the repository root after `make train tests/bin/train_mpi`:
  /usr/bin/python3 tests/test_train_signals.py [-k SUBSTRING]
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zlib

from pycase import ROOT
import pycase

TMP = os.path.join(ROOT, "tests", "tmp", "train_signals.%d" % os.getpid())
TRAIN = os.path.join(ROOT, "train")
TRAIN_MPI = os.path.join(ROOT, "tests", "bin", "train_mpi")
TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "2",
        "--eval-iters", "2", "--seed", "5", "--dropout", "0.1"]
# three steps of 3000 micro-batches; a signal lands inside the second
LONG = TINY + ["--max-iters", "3", "--eval-interval", "3", "--grad-accum", "3000"]
MICRO_BYTES = 2 * 16 * 4 * 2  # one micro-batch in --dump's file: tokens and targets, int32
os.environ["OMP_NUM_THREADS"] = "1"
case = pycase.Cases()


def corpus():
    if not os.path.exists(os.path.join(TMP, "corpus.txt")):
        pycase.shakespeare_prefix(TMP, 20000)
    return os.path.join(TMP, "corpus.txt")


def path(name):
    return os.path.join(TMP, name)


def fresh(name):
    out = path(name)
    for f in (out, out + ".state", out + ".csv", out + ".batches", out + ".grads"):
        if os.path.lexists(f):
            os.remove(f)
    return out


def train(out, opts, extra=(), exe=TRAIN, ok=True):
    r = subprocess.run([exe, "-d", corpus(), "-o", out] + opts + list(extra), capture_output=True, text=True)
    assert not ok or r.returncode == 0, "%s: exit %d: %s" % (os.path.basename(out), r.returncode, r.stderr[-500:])
    return r


def same_run(got, want):
    """got's logged losses and model file equal want's, bit for bit."""
    a, b = pycase.csv_rows(got), pycase.csv_rows(want)
    diff = [s for s in sorted(set(a) | set(b)) if a.get(s) != b.get(s)]
    assert not diff, "%d logged steps differ, first %d: %s vs %s" % (len(diff), diff[0], a.get(diff[0]), b.get(diff[0]))
    assert open(got, "rb").read() == open(want, "rb").read(), "the model files differ"


def wait_for_rows(p, out, rows, timeout=120):
    end = time.time() + timeout
    while p.poll() is None and pycase.logged_steps(out) < rows:
        assert time.time() < end, "no %d log rows within %d s" % (rows, timeout)
        time.sleep(0.005)
    assert p.poll() is None, "the run ended before its log had %d rows: %s" % (rows, p.communicate())


def size(f):
    return os.path.getsize(f) if os.path.exists(f) else 0


def reference():
    out = path("ref.bin")
    if not os.path.exists(out):
        train(fresh("ref.bin"), LONG)
    return out


@case
def nohup_survives_sighup():
    for nohup in (True, False):
        out = fresh("hup_%d.bin" % nohup)
        cmd = (["nohup"] if nohup else []) + [TRAIN, "-d", corpus(), "-o", out] + LONG
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_rows(p, out, 2)  # step 0's evaluation and step 1
        p.send_signal(signal.SIGHUP)
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, "exit %d: %s" % (p.returncode, stderr)
        if nohup:
            assert "done:" in stdout and "stopping" not in stderr, "nohup: %r %r" % (stdout[-300:], stderr)
            same_run(out, reference())
        else:
            assert "stopped by signal 1 at step 1" in stdout, stdout[-300:]


@case
def sigterm_within_a_micro_batch():
    out = fresh("term.bin")
    cmd = [TRAIN, "-d", corpus(), "-o", out, "--dump", out] + LONG
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    batches = out + ".batches"
    while p.poll() is None and size(batches) < 3500 * MICRO_BYTES:  # 500 micro-batches into step 2
        time.sleep(0.002)
    # held still while it is counted and signalled, so that the count is the one the signal meets
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.05)
    sent = size(batches) // MICRO_BYTES
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGCONT)
    stdout, stderr = p.communicate(timeout=120)
    done = size(batches) // MICRO_BYTES
    assert p.returncode == 0 and "stopped by signal 15 at step 1;" in stdout, "exit %d: %s" % (p.returncode, stdout)
    assert "stopping: checkpoint after this micro-batch (again to quit now)" in stderr, stderr
    # the micro-batch in progress when the signal came is finished, and no other is begun
    assert done - sent <= 1, "%d micro-batches drawn when SIGTERM was sent, %d when the run ended" % (sent, done)
    train(out, ["--resume"])
    same_run(out, reference())


@case
def sigterm_during_an_evaluation():
    opts = TINY + ["--max-iters", "4", "--eval-interval", "2", "--eval-iters", "3000"]
    ref = fresh("eval_ref.bin")
    train(ref, opts)
    out = fresh("eval.bin")
    p = subprocess.Popen([TRAIN, "-d", corpus(), "-o", out] + opts, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    wait_for_rows(p, out, 2)  # step 0's evaluation and step 1: step 2's evaluation is under way
    time.sleep(0.1)  # step 2 takes a millisecond, its evaluation of 6000 batches far longer
    p.send_signal(signal.SIGTERM)
    stdout, _ = p.communicate(timeout=120)
    assert p.returncode == 0 and "at step 2, in its evaluation" in stdout, stdout[-300:]
    train(out, ["--resume"])
    same_run(out, ref)


# make test-asan: Open MPI's own allocations, which it never frees, are not counted as leaks (as
# in tests/test_mpi.py), and ASan's shadow memory and redzones add to the resident size
ASAN = bool(os.environ.get("ATTN_ASAN_SUITE"))


def mpi_env():
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if ASAN:
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "").replace("detect_leaks=1", "detect_leaks=0")
    return e


def mpirun(out, extra):
    # 40 steps: on an idle machine a step of 800 micro-batches takes some 90 ms, and a SIGTERM that
    # mpirun forwards late must still land inside one (8000 a step took the case 156 s, 2026-12-02,
    # and under ASan most of the suite's longest test). Sanitized, the case took 138 s against
    # 21 s (CI, 2026-12-02): 120 micro-batches make a step about as long as the plain build's 800.
    accum = "120" if ASAN else "800"
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", TRAIN_MPI, "-d", corpus(), "-o", out] + \
        TINY + ["--max-iters", "40", "--eval-interval", "10", "--grad-accum", accum] + list(extra)


@case
def mpi_sigterm_and_plain_log():
    ref = fresh("mpi_ref.bin")
    with open(path("mpi_ref.log"), "w") as log:
        r = subprocess.run(mpirun(ref, []), stdout=log, stderr=subprocess.PIPE, text=True, env=mpi_env())
    assert r.returncode == 0, r.stderr[-500:]
    text = open(path("mpi_ref.log"), "rb").read()
    assert b"done:" in text and b"\r" not in text and b"\x1b" not in text, "the log: %r" % text[-300:]
    out = fresh("mpi.bin")
    p = subprocess.Popen(mpirun(out, []), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mpi_env())
    wait_for_rows(p, out, 2)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    # Open MPI's mpirun exits 1 after forwarding a SIGTERM; the ranks stopped inside a step after
    # the first (which one depends on how soon mpirun forwards the signal), before the last
    stop = re.search(r"stopped by signal 15 at step (\d+);", stdout)
    assert stop and 1 <= int(stop.group(1)) < 39, "exit %d: %s %s" % (p.returncode, stdout[-300:], stderr[-300:])
    r = subprocess.run(mpirun(out, ["--resume"]), capture_output=True, text=True, env=mpi_env())
    assert r.returncode == 0, r.stderr[-500:]
    same_run(out, ref)
    # --progress tty is the status rewritten in place: what the plain log above must not have
    tty = fresh("mpi_tty.bin")
    r = subprocess.run(mpirun(tty, ["--progress", "tty", "--max-iters", "1"]), capture_output=True, env=mpi_env())
    assert b"\r" in r.stdout and b"\x1b[K" in r.stdout, r.stdout[-300:]


@case
def symlink_meets_the_lock():
    """Two other spellings of a running run's -o are refused at its lock; after it stops, --resume
    through the link goes on from the state beside the link's target."""
    real = fresh("real.bin")
    os.makedirs(path("linked"), exist_ok=True)
    link = path("linked/link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../real.bin", link)
    dir_link = path("dirlink")
    if not os.path.lexists(dir_link):
        os.symlink(".", dir_link)
    endless = TINY + ["--max-iters", "1000000", "--eval-interval", "1000000"]
    p = subprocess.Popen([TRAIN, "-d", corpus(), "-o", real] + endless, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for_rows(p, real, 1)
        for spelling in (link, os.path.join(dir_link, "real.bin")):
            line = pycase.refused([TRAIN, "-d", corpus(), "-o", spelling] + endless + ["--force"],
                                  "is being written by another ./train (pid %d)" % p.pid)
            assert "real.bin" in line, line
    finally:
        p.send_signal(signal.SIGTERM)
        stdout, _ = p.communicate(timeout=120)
    step = int(re.search(r"stopped by signal 15 at step (\d+)", stdout).group(1))
    r = train(link, ["--resume", "--max-iters", str(step + 2)])  # the state beside the link's target
    assert "resuming at step %d of %d" % (step, step + 2) in r.stdout, r.stdout[:500]
    assert os.path.islink(link) and not os.path.exists(link + ".state"), "the link was replaced"
    assert pycase.csv_rows(real).keys() == set(range(step + 3)), "the log of the resumed run"


@case
def damaged_state_named():
    out = fresh("damaged.bin")
    train(out, TINY + ["--max-iters", "2", "--eval-interval", "2"])
    state = out + ".state"
    data = bytearray(open(state, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(state, "wb").write(bytes(data))
    pycase.refused([TRAIN, "-d", corpus(), "-o", out, "--resume", "--max-iters", "4"],
                   "%s: checksum mismatch: the file is damaged" % os.path.relpath(state))


@case
def keep_best():
    # a high lr on a short corpus: val is lowest at step 40, and higher at 60
    short = path("short.txt")
    open(short, "w").write(open(corpus()).read()[:3000])
    opts = ["--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "16", "--batch-size", "8",
            "--lr", "3e-2", "--warmup-iters", "5", "--lr-decay-iters", "60", "--eval-interval", "20",
            "--eval-iters", "4", "--seed", "1337"]

    def run(name, extra):
        out = fresh(name)
        r = subprocess.run([TRAIN, "-d", short, "-o", out] + opts + extra, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return out, r.stdout
    best, stdout = run("best.bin", ["--max-iters", "60", "--keep-best"])
    vals = {s: float(v[1]) for s, v in pycase.csv_rows(best).items() if v[1]}
    assert min(vals, key=vals.get) == 40 and vals[60] > vals[40], "val losses %s: not the case to test" % vals
    assert "(the weights of step 40, the lowest val loss)" in stdout, stdout[-300:]
    at40, _ = run("at40.bin", ["--max-iters", "40"])
    assert open(best, "rb").read() == open(at40, "rb").read(), "the model file is not step 40's weights"
    # MODEL.state goes on from step 60, as an uninterrupted 100-step --keep-best run does
    r = subprocess.run([TRAIN, "-d", short, "-o", best, "--resume", "--max-iters", "100", "--keep-best"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "resuming at step 60 of 100" in r.stdout, r.stdout[:600] + r.stderr
    whole, _ = run("whole.bin", ["--max-iters", "100", "--keep-best"])
    same_run(best, whole)


@case
def corpus_from_a_pipe():
    opts = TINY + ["--max-iters", "2", "--eval-interval", "2"]
    want = fresh("file.bin")
    train(want, opts)
    got = fresh("procsub.bin")
    r = subprocess.run(["bash", "-c", 'exec "$0" -d <(cat "$1") -o "$2" "${@:3}"', TRAIN, corpus(), got] + opts,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert open(got, "rb").read() == open(want, "rb").read(), "-d <(cat corpus) trained another model"
    fifo = path("fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    got = fresh("fifo.bin")
    p = subprocess.Popen([TRAIN, "-d", fifo, "-o", got] + opts, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.2)  # ./train waits for the FIFO's writer
    with open(fifo, "w") as f:
        f.write(open(corpus()).read())
    _, stderr = p.communicate(timeout=120)
    assert p.returncode == 0 and open(got, "rb").read() == open(want, "rb").read(), stderr


@case
def foreign_siblings_and_stale_temporaries():
    out = fresh("sib.bin")
    for suffix in (".state", ".csv", ".lock"):
        f = out + suffix
        open(f, "w").write("my notes\n")
        pycase.refused([TRAIN, "-d", corpus(), "-o", out, "--force"] + TINY,
                       "%s exists and is not an attn.c" % os.path.relpath(f))
        assert open(f).read() == "my notes\n", "%s was changed" % f
        os.remove(f)
    stale = [out + ".tmp.Ab3xYz", out + ".state.tmp.q1W2e3"]
    for f in stale:
        open(f, "w").write("half a checkpoint")
    kept = out + ".tmp.notours"
    open(kept, "w").write("not a temporary name of ours")
    r = train(out, TINY + ["--max-iters", "2", "--eval-interval", "2"])
    assert not any(os.path.exists(f) for f in stale) and os.path.exists(kept), os.listdir(TMP)
    assert r.stderr.count("a temporary file left by a run that was stopped while writing") == 2, r.stderr


@case
def nanogpt_habits():
    """--config (the command line overriding it) trains what the same flags do; a byte-order mark is
    skipped with a note; a vocabulary that stops short says so; step 0 is evaluated; the samples
    start from --sample-prompt."""
    opts = TINY + ["--max-iters", "2", "--eval-interval", "2"]
    want = fresh("flags.bin")
    r = train(want, opts + ["--sample-prompt", "First Citizen"])
    assert "step 0: train loss" in r.stdout and "---\nFirst Citizen" in r.stdout, r.stdout[:600]
    conf = path("run.conf")
    with open(conf, "w") as f:
        f.write("# the tiny model\n")
        for name, value in zip(opts[::2], opts[1::2]):
            f.write("%s = %s\n" % (name[2:].replace("-", "_"), value))
        f.write("max_iters = 7\nsample_prompt = \"First Citizen\"\n")
    got = fresh("config.bin")
    train(got, ["--config", conf, "--max-iters", "2"])
    same_run(got, want)
    bom = path("bom.txt")
    open(bom, "wb").write(b"\xef\xbb\xbf" + open(corpus(), "rb").read())
    got = fresh("bom.bin")
    r = subprocess.run([TRAIN, "-d", bom, "-o", got] + opts + ["--sample-prompt", "First Citizen"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "%s: skipped the UTF-8 byte-order mark" % bom in r.stderr, r.stderr
    same_run(got, want)
    r = train(fresh("vocab.bin"), opts + ["--vocab-size", "5000"])
    m = re.search(r"note: --vocab-size 5000: the corpus gives (\d+) pieces", r.stderr)
    assert m and 256 < int(m.group(1)) < 5000 and "vocab %s" % m.group(1) in r.stdout, r.stderr + r.stdout[:300]


@case
def killed_before_its_first_step_resumes():
    """A run killed with kill -9 after its step-0 evaluation began (here during step 1) goes on
    with --resume: step 0 is checkpointed before its evaluation, and again after it; the resumed
    run equals the uninterrupted one, its log one row per step."""
    opts = TINY + ["--max-iters", "2", "--eval-interval", "2", "--grad-accum", "300"]
    want = fresh("first_want.bin")
    train(want, opts)
    got = fresh("first_got.bin")
    p = subprocess.Popen([TRAIN, "-d", corpus(), "-o", got] + opts, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    for line in p.stdout:
        if line.startswith("step 0: train loss"):
            p.kill()
            break
    p.communicate()
    assert p.returncode == -9 and pycase.logged_steps(got) <= 1, (p.returncode, pycase.logged_steps(got))
    r = train(got, ["--resume"])
    assert "resuming at step 0 of 2" in r.stdout, r.stdout[:400]
    assert [row.split(",")[0] for row in open(got + ".csv").read().split("\n")[1:-1]] == ["0", "1", "2"]
    same_run(got, want)


@case
def closing_lines_threads_and_old_states():
    """stdout is flushed before an error, so a log of both ends with the error; --no-final-eval
    skips the closing loss, which otherwise scores every validation token, the tail after the
    last whole window included; --resume on another thread count says it is not bit-identical,
    on the same says nothing; a version 3 state (no thread count) still resumes, silently."""
    small = path("small.txt")
    open(small, "wb").write(open(corpus(), "rb").read()[:2100])  # 210 validation tokens: 3 windows of 64 + 17
    opts = ["-d", small, "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "64", "--batch-size",
            "2", "--eval-iters", "1", "--max-iters", "2", "--eval-interval", "2"]
    with open(path("both.log"), "w") as log:
        subprocess.run([TRAIN, "-o", fresh("refused.bin"), "--sample-prompt", "\u20ac"] + opts, stdout=log,
                       stderr=subprocess.STDOUT)
    lines = open(path("both.log")).read().splitlines()
    assert lines[0].startswith("memory: ") and lines[-1].startswith("train: --sample-prompt: cannot encode"), lines
    out = fresh("threads.bin")
    r = subprocess.run([TRAIN, "-o", out, "-j", "2"] + opts, capture_output=True, text=True)
    assert r.returncode == 0 and "val loss over the whole validation split (209 tokens)" in r.stdout, r.stdout[-300:]
    r = subprocess.run([TRAIN, "-d", small, "-o", out, "--resume", "--max-iters", "4", "-j", "1", "--no-final-eval"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "train: note: --resume on 1 thread, the run saved in " in r.stderr and \
        "threads.bin.state ran on 2: " in r.stderr and "not bit-identical (-j 2 is)" in r.stderr, r.stderr
    done = r.stdout.strip().splitlines()[-1]
    assert done.startswith("done: 2 steps") and done.endswith("threads.bin, run it: ./run %s" % os.path.relpath(out)), \
        done
    state = open(out + ".state", "rb").read()  # version 4: the 192 bytes of version 3, then threads and a spare
    v3 = bytearray(state[:192] + state[200:-4])
    v3[8:12] = (3).to_bytes(4, "little")
    open(out + ".state", "wb").write(bytes(v3) + zlib.crc32(bytes(v3)).to_bytes(4, "little"))
    r = subprocess.run([TRAIN, "-d", small, "-o", out, "--resume", "--max-iters", "6", "-j", "1"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "resuming at step 4 of 6" in r.stdout and "note" not in r.stderr, r.stderr


# A config file as nanoGPT's config/train_shakespeare_char.py is written (Python: inline comments,
# True and False, a product, its own names), for a run of TINY's model.
NANOGPT_CONFIG = """# train a miniature character-level shakespeare model
out_dir = 'out-shakespeare-char'
eval_interval = 2 # keep frequent because we'll overfit
eval_iters = 2
log_interval = 10 # don't print too too often

# we expect to overfit on this small dataset, so only save when val improves
always_save_checkpoint = False

wandb_log = False # override via command line if you like
wandb_project = 'shakespeare-char'
wandb_run_name = 'mini-gpt'

dataset = 'shakespeare_char'
gradient_accumulation_steps = 1 * 2
batch_size = 2
block_size = 16 # context of up to 16 previous characters

n_layer = 1
n_head = 2
n_embd = 16
dropout = 0.1

learning_rate = 2e-3 # with baby networks can afford to go a bit higher
max_iters = 2
lr_decay_iters = 2 # make equal to max_iters usually
min_lr = 1e-4 # learning_rate / 10 usually
beta2 = 0.95 # make a bit bigger because number of tokens per iter is small
decay_lr = True
init_from = 'scratch'
dtype = 'bfloat16'

warmup_iters = 1 # not super necessary potentially
device = 'cpu'  # run on cpu only
compile = False # do not torch compile the model
"""


@case
def nanogpt_config_files():
    """A config file written as nanoGPT's are loads as it is: its names (learning_rate,
    gradient_accumulation_steps), always_save_checkpoint False as --keep-best, True and False,
    inline comments, 1 * 2; out_dir, log_interval, wandb_*, dataset, device, compile and dtype
    are named in one note as ignored. It trains what the same flags do. A value ./train cannot
    follow (init_from = 'resume', decay_lr = False) is refused naming the file and line."""
    conf = path("train_tiny_char.py")
    open(conf, "w").write(NANOGPT_CONFIG)
    want = fresh("nanogpt_flags.bin")
    train(want, TINY + ["--max-iters", "2", "--eval-interval", "2", "--grad-accum", "2", "--lr", "2e-3", "--min-lr",
                        "1e-4", "--lr-decay-iters", "2", "--beta2", "0.95", "--warmup-iters", "1", "--keep-best"])
    got = fresh("nanogpt_config.bin")
    r = train(got, ["--config", conf, "--seed", "5"])
    note = "train: note: %s: ignored, as nothing here depends on them: out_dir, log_interval, wandb_log, " \
        "wandb_project, wandb_run_name, dataset, dtype, device, compile (docs/TRAINING.md)\n" % conf
    assert note in r.stderr, r.stderr
    same_run(got, want)
    for line, value, why in (("init_from = 'scratch'", "'resume'", "--resume goes on with a run"),
                             ("decay_lr = True", "False", "always decays the learning rate")):
        open(conf, "w").write(NANOGPT_CONFIG.replace(line, line.split(" = ")[0] + " = " + value))
        n = NANOGPT_CONFIG.split("\n").index(line) + 1
        r = train(fresh("nanogpt_refused.bin"), ["--config", conf], ok=False)
        assert r.returncode == 1 and r.stderr.startswith("train: %s:%d: " % (conf, n)) and why in r.stderr, r.stderr


@case
def memory_estimate_counts_learning_and_encoding():
    """On a corpus of 4 MB (Tiny Shakespeare repeated) and a tiny model, the peak is encoding the
    corpus (characters) or learning the vocabulary (BPE), which the estimate counts: within 15 %
    of the peak resident size, naming the phase; with --vocab-size the refusal of a run too
    large comes before the vocabulary is learned (no note on the pieces learned)."""
    big = path("corpus4m.txt")
    text = open(os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"), "rb").read()
    open(big, "wb").write((text * 4)[:4000000])
    tiny = ["-d", big, "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "64", "--batch-size", "2",
            "--eval-iters", "1", "--max-iters", "0", "--no-final-eval", "-j", "1"]
    for extra, phase in (([], "encoding the corpus"), (["--arch", "llama", "--vocab-size", "512"],
                                                       "learning the vocabulary")):
        p = subprocess.Popen([TRAIN, "-o", fresh("mem4m.bin")] + tiny + extra, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        stdout = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.wait()
        m = re.search(r"memory: ([\d.]+) MiB at its peak, while ([a-z ]+);", stdout)
        assert m and m.group(2) == phase, stdout[:300]
        estimate, peak = float(m.group(1)), usage.ru_maxrss / 1024
        # under ASan the shadow memory and redzones only add to the peak, as in memory_estimate
        close = estimate <= peak if ASAN else abs(estimate - peak) <= 0.15 * peak
        assert close, "%s: estimated %.1f MiB, peak resident size %.1f MiB" % (phase, estimate, peak)
    r = subprocess.run([TRAIN, "-o", fresh("huge.bin"), "-d", big, "--n-layer", "1024", "--n-embd", "8192",
                        "--vocab-size", "100000"], capture_output=True, text=True)
    assert r.returncode == 1 and "GiB, this machine has" in r.stderr and "the corpus gives" not in r.stderr, r.stderr


@case
def memory_estimate():
    out = fresh("mem.bin")
    p = subprocess.Popen([TRAIN, "-d", corpus(), "-o", out, "--n-layer", "4", "--n-head", "4", "--n-embd", "128",
                          "--max-iters", "2", "--eval-iters", "1"], stdout=subprocess.PIPE, text=True)
    stdout = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.wait()
    estimate = float(re.search(r"memory: ([\d.]+) MiB", stdout).group(1))
    peak = usage.ru_maxrss / 1024
    close = estimate <= peak if ASAN else abs(estimate - peak) <= 0.1 * peak
    assert close, "estimated %.1f MiB, peak resident size %.1f MiB" % (estimate, peak)


if __name__ == "__main__":
    if not os.path.exists(TRAIN) or not os.path.exists(TRAIN_MPI):
        print("no ./train or tests/bin/train_mpi: build them first (make train tests/bin/train_mpi)")
        print("0 passed, 1 failed")
        sys.exit(1)
    os.makedirs(TMP, exist_ok=True)
    sys.exit(case.main(TMP))
