"""How every tool ends when run as a command: Ctrl-C in one line, `TOOL: interrupted`, and exit
status 130 (128 + SIGINT, what a shell reports for it), not a traceback, at once: the temporary
files and folders being written are removed (outfile.remove_pending), the outputs left as they
were. (Raising KeyboardInterrupt instead would not do: torch turns it into a RuntimeError, and
the tools would report that as a damaged file.) A Python without numpy,
torch or matplotlib in one line naming the package and /usr/bin/python3, the interpreter the
tools are written for (Debian's, whose python3-numpy and python3-torch the Makefile installs).

guard() sets this up; a tool calls it before importing those packages, so that their absence
is caught too:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if __name__ == "__main__":  # one line for Ctrl-C or a missing package (tools/attn/cli_main.py)
        from attn import cli_main
        cli_main.guard()
    import numpy as np  # noqa: E402

Every other uncaught exception keeps its traceback: it is a bug to fix, not an input to refuse.
"""
import os
import signal
import sys

from attn import outfile

PYTHON = "/usr/bin/python3"
PACKAGES = {"numpy": "python3-numpy", "torch": "python3-torch", "matplotlib": "python3-matplotlib"}
INTERRUPTED = 130


def one_line(tool, exc):
    """(the line that ends tool for exc, its exit status), or None when exc keeps its traceback."""
    if isinstance(exc, KeyboardInterrupt):
        return "%s: interrupted" % tool, INTERRUPTED
    name = (getattr(exc, "name", None) or "").split(".")[0] if isinstance(exc, ModuleNotFoundError) else None
    if name in PACKAGES and sys.executable == PYTHON:
        return "%s: %s is missing from %s: install Debian's %s (apt-get install %s)" % (
            tool, name, PYTHON, PACKAGES[name], PACKAGES[name]), 1
    if name in PACKAGES:
        return "%s: %s is missing from this Python (%s): run the tools with %s, which has Debian's %s" % (
            tool, name, sys.executable or "python3", PYTHON, PACKAGES[name]), 1
    return None


def guard():
    """From here on, end this process as the module docstring says."""
    tool = os.path.basename(sys.argv[0])
    fallback = sys.excepthook

    def end(line, status):
        try:  # what was written so far goes out first; a closed stdout does not matter now
            sys.stdout.flush()
        except Exception:
            pass
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        os._exit(status)  # no second message from the interpreter's exit

    def hook(kind, exc, tb):
        if one_line(tool, exc) is None:
            return fallback(kind, exc, tb)
        end(*one_line(tool, exc))

    def interrupted(sig, frame):
        if outfile.HELD["depth"]:  # in a step that must not be split: at its end
            outfile.HELD["interrupted"] = True
            return
        outfile.remove_pending()
        end(*one_line(tool, KeyboardInterrupt()))

    sys.excepthook = hook
    signal.signal(signal.SIGINT, interrupted)
