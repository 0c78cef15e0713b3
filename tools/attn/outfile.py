"""Writing the tools' output files without destroying anything.

An output path that exists and is not a regular file (a device, FIFO, socket or directory)
is refused: renaming a new file over it would destroy the node, and opening it could block
or write to hardware. A regular file is replaced whole or not at all: the new contents go to
a unique temporary file beside it (NAME.tmp.XXXXXXXX, locked while it is written), which is
synced and then renamed over it. A temporary of NAME that no process holds locked was left by a
writer killed (kill -9) while writing: the next writer of NAME removes it, as ./train removes
its own.

claim() and claim_dir() are ./train's policy for an output (training/checkpoint.h's
claim_outputs), checked before any work: an existing output is replaced only with --force, and
one the tool did not write (not an attn.c model, not an export) never. A folder is written as a
new folder beside it (replacing_dir), synced, then renamed into place, so a failure or a kill
leaves the old folder or none. What is a tool's own: starts_with() a format's magic, a picture
of the format a plot's name asks for (claim_picture), a folder a tool marked (mark_dir,
claim_marked_dir). "-" is standard output (replacing yields it); check() refuses it for a folder,
and when standard output is a terminal. As an input, "-" is standard input (read), or refused
(not_stdin).
"""
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile

STDIO = "-"
PENDING = set()  # the temporary files and folders being written, for remove_pending()
HELD = {"depth": 0, "interrupted": False}  # held(): how deep, and whether Ctrl-C came meanwhile
STDIN = {"read": False}  # read() reads standard input once: a second "-" would find it empty

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


class Refused(OSError):
    """An output path that exists and is not the kind of file wanted: str() says what it is,
    .filename is the path."""

    def __str__(self):
        return self.strerror


def kind(path):
    """What path is, followed if a symlink: "a character device" ..., "a regular file", or None if absent."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in KINDS if test(mode)), "a special file")


def check(path, want="a regular file"):
    """Raise Refused if path exists and is not want, a kind() answer; "-" (standard output) may be
    a regular file's contents only, and not to a terminal."""
    if path == STDIO:
        if want != "a regular file":
            raise Refused(errno.EINVAL, "is standard output, which cannot be %s" % want, path)
        if sys.stdout.isatty():
            raise Refused(errno.EINVAL, "standard output is a terminal: redirect it to a file", path)
        return
    k = kind(path)
    if k not in (None, want):
        raise Refused(errno.EEXIST, "is %s, not %s: refusing to replace it" % (k, want), path)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def claim(path, force, ours, what):
    """Raise Refused unless the tool may write path (a file): absent, "-" (standard output, not a
    terminal), or, with force, what ours(path) recognises as a file of its own: what, e.g. "an
    attn.c model file", names that in the message."""
    check(path)
    if path != STDIO and kind(path) is not None:
        _existing(path, force, ours(path), what)


def claim_dir(path, force, ours, what, refusal=None):
    """claim() for a folder: absent or empty, or with force what ours(path) recognises.
    refusal(path): a reason of the caller's own for refusing a folder that is not ours, or None."""
    check(path, "a directory")
    if kind(path) is not None and os.listdir(path):
        why = not ours(path) and refusal and refusal(path)
        if why:
            raise Refused(errno.EEXIST, why, path)
        _existing(path, force, ours(path), what)


def starts_with(magic):
    """An ours() for claim(): whether a file begins with the bytes magic, its format's."""
    def ours(path):
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    return ours


# The first bytes of the pictures matplotlib's savefig writes, by format; an SVG is told by its
# <svg element, which follows the XML declaration and doctype.
PICTURES = {"png": (b"\x89PNG\r\n\x1a\n",), "pdf": (b"%PDF-",), "ps": (b"%!PS",), "eps": (b"%!PS",),
            "jpg": (b"\xff\xd8\xff",), "jpeg": (b"\xff\xd8\xff",), "tif": (b"II*\0", b"MM\0*"),
            "tiff": (b"II*\0", b"MM\0*")}


def picture_format(path):
    """The format savefig writes path in, named by its extension (lower case); "png" without one, as for "-"."""
    return os.path.splitext(path)[1][1:].lower() or "png"


def claim_picture(path, force):
    """claim() for a plot: an existing file is the tool's own if it is a picture of the format path names."""
    fmt = picture_format(path)

    def ours(p):
        with open(p, "rb") as f:
            head = f.read(1024)
        return b"<svg" in head if fmt == "svg" else head.startswith(PICTURES.get(fmt, ()))
    if fmt in PICTURES or fmt == "svg":  # the format's letters are read by name: an SVG, a PNG
        what = "%s %s picture" % ("an" if fmt[0] in "aefhilmnorsx" else "a", fmt.upper())
    else:
        what = "a picture"
    claim(path, force, ours, what)


def mark_dir(d, marker, written_by):
    """Write the file marker into folder d, naming written_by and the files d holds: the mark
    claim_marked_dir() knows a folder of the tool's own by."""
    text = json.dumps({"written_by": written_by, "files": sorted(os.listdir(d))}, indent=2) + "\n"
    write(os.path.join(d, marker), text.encode())


def _unmarked(d, marker):
    """The files in folder d that its marker does not list, or None when it has no readable marker."""
    try:
        with open(os.path.join(d, marker), "rb") as f:
            listed = set(json.load(f)["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sorted(set(os.listdir(d)) - listed - {marker})


def claim_marked_dir(path, force, marker, who):
    """claim_dir() for a folder that mark_dir(path, marker, ...) marked as who's (a tool's name): it
    is who's own while it holds nothing else."""
    def others(d):
        extra = _unmarked(d, marker)
        return "holds %s, which %s did not write; refusing to replace it" % (", ".join(extra), who) if extra else None
    claim_dir(path, force, lambda d: _unmarked(d, marker) == [],
              "a folder that %s wrote (it has no %s)" % (who, marker), others)


def read(path):
    """The bytes of the file path. "-" is standard input: read once, and not from a terminal, which
    would wait for typing (Refused)."""
    if path != STDIO:
        with open(path, "rb") as f:
            return f.read()
    if STDIN["read"]:
        raise Refused(errno.EINVAL, "standard input is read once: give the other file by its path", path)
    if sys.stdin is None:
        raise Refused(errno.EBADF, "standard input is closed", path)
    if sys.stdin.isatty():
        raise Refused(errno.EINVAL, "standard input is a terminal: redirect a file to it", path)
    STDIN["read"] = True
    return sys.stdin.buffer.read()


def not_stdin(path, what):
    """Refused for path "-": what (e.g. "a tokenizer") is not read from standard input."""
    if path == STDIO:
        raise Refused(errno.EINVAL, "%s is not read from standard input; give its path" % what, path)


def _existing(path, force, ours, what):
    if not ours:
        raise Refused(errno.EEXIST, "exists and is not %s; refusing to replace it" % what, path)
    if not force:
        raise Refused(errno.EEXIST, "exists; give --force to replace it", path)


@contextlib.contextmanager
def replacing(path, mode="wb", drop_cache=False):
    """A file object for path's new contents. When the block ends normally it is flushed, synced
    and renamed over path, and the directory synced; on an exception it is removed, path untouched.
    path "-" is standard output, written as it goes.

    drop_cache: evict the written pages from the page cache once synced (modelfile.py says why)."""
    check(path)
    if path == STDIO:  # flushed at the end, never closed
        out = sys.stdout.buffer if "b" in mode else sys.stdout
        yield out
        out.flush()
        return
    d = os.path.dirname(os.path.abspath(path))
    with held():  # made and recorded for remove_pending as one step
        try:
            remove_stale(path)
            fd, tmp = locked_temporary(d, os.path.basename(path) + TMP_INFIX)
        except OSError as e:
            raise named(e, None, path)
        PENDING.add(tmp)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if drop_cache and hasattr(os, "posix_fadvise"):  # Linux has the call, not every system
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        os.chmod(tmp, 0o666 & ~_umask())  # what open() would have made; mkstemp makes 0600
        check(path)  # the work may have taken minutes, and path may be something else by now
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        raise named(e, tmp, path)
    finally:
        PENDING.discard(tmp)
    _fsync_dir(d)


TMP_INFIX = ".tmp."
TMP_NAME = re.compile(r"\.tmp\.[a-z0-9_]{8}")  # what follows NAME in mkstemp's names for it


def locked_temporary(d, prefix):
    """(fd, name) of a new file in folder d, locked (flock) so that remove_stale leaves it: a
    file removed between its making and its locking is made again."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=prefix)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)


def remove_stale(path):
    """Remove the temporaries of path that no writer holds locked, saying so: a writer killed
    while writing left them."""
    d, base = os.path.split(os.path.abspath(path))
    for name in os.listdir(d):
        if not (name.startswith(base) and TMP_NAME.fullmatch(name[len(base):])):
            continue
        p = os.path.join(d, name)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone already, or a link: not a temporary of ours
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a writer at work
            os.unlink(p)
            print("%s: note: removed %s, a temporary file left by a writer that was stopped while writing"
                  % (os.path.basename(sys.argv[0]), os.path.join(os.path.dirname(path), name)), file=sys.stderr)
        finally:
            os.close(fd)


def named(e, tmp, path):
    """e, an OSError about the temporary file tmp, or about no file (a failed write), or with tmp
    None about any file, naming path instead: the temporary file's random name means nothing to a
    user."""
    if isinstance(e, OSError) and (tmp is None or e.filename in (None, tmp)):
        e.filename = path
    return e


def write(path, data):
    """Replace path with the bytes data, as replacing() does."""
    with replacing(path) as f:
        f.write(data)


@contextlib.contextmanager
def replacing_dir(path):
    """The name of a new folder beside path (path.tmp-XXXXXX) to write path's new contents into.
    When the block ends normally the folder is synced and renamed into place, an old path first
    renamed away (path.old-XXXXXX) and removed after; on an exception it is removed, path untouched."""
    check(path, "a directory")
    parent, base = os.path.split(os.path.abspath(path))
    with held():
        tmp, old = tempfile.mkdtemp(dir=parent, prefix=base + ".tmp-"), None
        PENDING.add(tmp)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # what mkdir would have made; mkdtemp makes 0700
        _fsync_dir(tmp)
        check(path, "a directory")
        with held():  # between the two renames path is missing
            if os.path.isdir(path):
                old = tempfile.mkdtemp(dir=parent, prefix=base + ".old-")
                os.replace(path, old)  # over the empty folder mkdtemp made
            os.replace(tmp, path)
    except BaseException:
        if old and not os.path.exists(path):  # the new one could not take its place: the old one back
            os.replace(old, path)
        elif old:
            os.rmdir(old)  # made, but path could not move there
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        PENDING.discard(tmp)
    _fsync_dir(parent)
    if old:
        PENDING.add(old)
        shutil.rmtree(old)
        PENDING.discard(old)


@contextlib.contextmanager
def held():
    """A block that Ctrl-C does not split: cli_main's handler, finding HELD["depth"] above 0, sets
    HELD["interrupted"] and returns, and the signal is raised again when the outermost block ends."""
    HELD["depth"] += 1
    try:
        yield
    finally:
        HELD["depth"] -= 1
        if not HELD["depth"] and HELD["interrupted"]:
            HELD["interrupted"] = False
            signal.raise_signal(signal.SIGINT)


def remove_pending():
    """Remove the temporary files and folders being written, for a process about to end at once
    (cli_main on Ctrl-C), which runs no finally clause."""
    for p in list(PENDING):
        try:
            shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
        except OSError:
            pass  # renamed into place or removed already
