"""A progress line for work on many tensors, on a terminal only: once the work has taken a second
(ATTN_PROGRESS_AFTER seconds, which the tests set to 0), stderr shows

    convert.py: tensor 12 of 57, 85.3 MB/s, ETA 0:04

on one line, rewritten at most twice a second and erased when the work ends, so the tool's
closing note stands alone (./run's progress line, io/cli.h, looks and behaves the same). When
stderr is not a terminal (a log, a pipe) nothing is written.

    with Progress(len(names), total_bytes) as p:
        for name in names:
            ...
            p.done(nbytes)
"""
import os
import sys
import time


class Progress:
    def __init__(self, n, total_bytes, stream=None):
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self.n, self.total = n, max(total_bytes, 1)
        self.k = self.bytes = 0
        self.start = time.monotonic()
        self.after = float(os.environ.get("ATTN_PROGRESS_AFTER", "1"))
        self.shown = None  # when the line was last written
        self.tool = os.path.basename(sys.argv[0]) or "python3"

    def __enter__(self):
        return self

    def done(self, nbytes):
        """One more tensor of nbytes written."""
        self.k += 1
        self.bytes += nbytes
        now = time.monotonic()
        elapsed = now - self.start
        if not self.on or elapsed < self.after or elapsed <= 0 or self.shown and now - self.shown < 0.5:
            return
        rate = self.bytes / elapsed
        eta = round((self.total - self.bytes) / rate) if rate > 0 else 0
        self.stream.write("\r\x1b[K%s: tensor %d of %d, %.1f MB/s, ETA %d:%02d"
                          % (self.tool, self.k, self.n, rate / 1e6, eta // 60, eta % 60))
        self.stream.flush()
        self.shown = now

    def __exit__(self, *exc):
        if self.shown:  # erased, the cursor back at the line's start
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        return False
