"""Writing the tools' output files without destroying anything.

An output path that exists and is not a regular file (a device, FIFO, socket or directory)
is refused: renaming a new file over it would destroy the node, and opening it could block
or write to hardware. A regular file is replaced whole or not at all: the new contents go to
a unique temporary file beside it, which is synced and then renamed over it.
"""
import contextlib
import errno
import os
import stat
import tempfile

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
    """Raise Refused if path exists and is not want, a kind() answer."""
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


@contextlib.contextmanager
def replacing(path, mode="wb", drop_cache=False):
    """A file object for path's new contents. When the block ends normally it is flushed, synced
    and renamed over path, and the directory synced; on an exception it is removed, path untouched.

    drop_cache: evict the written pages from the page cache once synced (modelfile.py says why)."""
    check(path)
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(path) + ".")
    except OSError as e:
        raise named(e, None, path)
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
    _fsync_dir(d)


def named(e, tmp, path):
    """e, an OSError about the temporary file (or, with tmp None, about any file), naming path
    instead: the temporary file's random name means nothing to a user."""
    if isinstance(e, OSError) and (tmp is None or e.filename == tmp):
        e.filename = path
    return e


def write(path, data):
    """Replace path with the bytes data, as replacing() does."""
    with replacing(path) as f:
        f.write(data)
