"""The case runner of tests/test_*.py: every case of a file, or with -k SUBSTRING the cases whose
names contain it, each reported as 'ok    NAME (its seconds)' or 'FAIL  NAME: ...', then 'N passed, N failed'.

  /usr/bin/python3 tests/test_X.py [-k SUBSTRING]

A case that uses what another case wrote says so (needs=...): -k runs those first, and counts them.
VERBOSE=1 prints a failing case's traceback.
"""
import os
import shutil
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))  # the tools the tests import


class Cases:
    """A file's cases, in the order they were added: @cases, @cases(needs=[case, ...]) or add()."""

    def __init__(self):
        self.funcs, self.needs = {}, {}

    def __call__(self, f=None, needs=()):
        if f is None:
            return lambda g: self(g, needs)
        self.add(f.__name__, f, [n.__name__ for n in needs])
        return f

    def add(self, name, f, needs=()):
        assert name not in self.funcs, "two cases named %s" % name
        self.funcs[name], self.needs[name] = f, list(needs)

    def selected(self, substring):
        """The names to run, in file order: those containing substring and what they need."""
        want = set()

        def add(name):
            if name not in want:
                want.add(name)
                for n in self.needs[name]:
                    add(n)
        for name in self.funcs:
            if substring in name:
                add(name)
        return [n for n in self.funcs if n in want]

    def run(self, argv, report=None):
        """Run the cases argv selects; report(), if given, prints before the closing line. The exit status."""
        if argv and (len(argv) != 2 or argv[0] != "-k"):
            print("usage: %s [-k SUBSTRING]" % os.path.basename(sys.argv[0]), file=sys.stderr)
            return 2
        names = self.selected(argv[1] if argv else "")
        if not names:
            print("no case name contains %r (cases: %s)" % (argv[1], ", ".join(self.funcs)))
            return 1
        failed = set()
        for name in names:
            missing = [n for n in self.needs[name] if n in failed]
            try:
                if missing:
                    raise AssertionError("needs %s, which failed" % ", ".join(missing))
                t0 = time.monotonic()
                self.funcs[name]()
                print("ok    %s (%.1f s)" % (name, time.monotonic() - t0))
            except Exception as e:  # report the case and go on to the next
                failed.add(name)
                print("FAIL  %s: %s: %s" % (name, type(e).__name__, e))
                if os.environ.get("VERBOSE"):
                    traceback.print_exc()
        if report:
            report()
        print("%d passed, %d failed" % (len(names) - len(failed), len(failed)))
        return 1 if failed else 0

    def main(self, tmp, report=None):
        """run() on the command line's arguments, then remove tmp, the file's temporary directory."""
        rc = self.run(sys.argv[1:], report)
        shutil.rmtree(tmp, ignore_errors=True)
        return rc


def shakespeare_prefix(folder, n_chars):
    """A corpus file in folder holding the first n_chars characters of ../shared's Tiny Shakespeare."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "corpus.txt")
    with open(os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"), encoding="utf-8") as f, \
            open(path, "w", encoding="utf-8") as g:
        g.write(f.read()[:n_chars])
    return path


def csv_rows(out):
    """{step: (train_loss, val_loss, lr, eval_train_loss)} as ./train logged them in out's CSV (as text,
    "" where empty), everything but the timing."""
    lines = open(out + ".csv").read().splitlines()
    col = {name: i for i, name in enumerate(lines[0].split(","))}
    rows = {}
    for line in lines[1:]:
        f = line.split(",")
        rows[int(f[0])] = tuple(f[col[name]] for name in ("train_loss", "val_loss", "lr", "eval_train_loss"))
    return rows


def logged_steps(out):
    """The steps ./train has logged in out's CSV so far (0 before it exists)."""
    try:
        return max(0, len(open(out + ".csv").read().splitlines()) - 1)
    except OSError:
        return 0


def refused(cmd, needle, timeout=300):
    """Run cmd (a list), which must refuse as the tools do: exit status 1 and exactly one line on
    stderr, no traceback, holding needle, within timeout seconds. Returns that line."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    where = " ".join(os.path.basename(c) for c in cmd[1:])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, "%s: exit %d, stderr %r" % (where, r.returncode, r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, "%s: stderr %r" % (where, r.stderr)
    assert needle.lower() in lines[0].lower(), "%s: %r lacks %r" % (where, lines[0], needle)
    return lines[0]
