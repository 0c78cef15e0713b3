// io/cli.h: what the two front doors, run.c and train.c, share with the person at the
// terminal: one-line fatal errors, a clock, reading a whole input file and checking that
// text is text. The including file defines `static const char *prog` (its name, which starts
// every error line) before it includes this. The model and the tokenizer never include it:
// they return errors, and only a front door decides to exit.
#ifndef ATTN_IO_CLI_H
#define ATTN_IO_CLI_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../tokenizer.h"

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

// NULL when s[0, n) is UTF-8 text without NUL bytes; else what is wrong and where, in buf
// ("invalid UTF-8 at byte 3"). Prompts, texts to score and corpora all pass this one check.
static inline const char *text_problem(const char *s, size_t n, char *buf, size_t buf_len) {
    size_t bad = tokenizer_first_non_text(s, n);
    if (bad >= n) return NULL;
    snprintf(buf, buf_len, "%s at byte %zu", s[bad] ? "invalid UTF-8" : "a NUL byte", bad);
    return buf;
}

// "1 token", "2 tokens": counts in messages read as English.
static inline const char *plural(long n) { return n == 1 ? "" : "s"; }

#endif
