// cli.h: what the two front doors, run.c and train.c, share: one-line fatal errors, a clock,
// and reading a whole input file. The including file defines `static const char *prog` (its
// name, which starts every error line) before it includes this.
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Whether two paths name one existing file (a hard link or another spelling included): an
// output that is also an input would be destroyed before or while it is read.
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A whole regular file, NUL-terminated, or a one-line death naming it and, if given, what it
// was for ("the corpus"). O_NONBLOCK: a FIFO nobody writes to must not hang the open; it is
// then refused as not a regular file.
static char *read_file(const char *path, size_t *len, const char *what) {
    const char *w = what ? what : "";
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: cannot open%s%s: %s", path, what ? " " : "", w, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) die("%s: %s%snot a regular file", path, w, what ? " is " : "");
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    if (!buf) die("%s: out of memory reading %zu bytes", path, n);
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("%s: read error: %s", path, r < 0 ? strerror(errno) : "file shrank while reading");
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
}

#endif
