// io/cli.h: what the two front doors, run.c and train.c, share with the person at the
// terminal: one-line fatal errors, the clock (io/clock.h), reading a whole input file and
// checking that text is text. The including file defines `static const char *prog` (its
// name, which starts every error line) before it includes this. The model and the tokenizer
// never include it: they return errors, and only a front door decides to exit.
#ifndef ATTN_IO_CLI_H
#define ATTN_IO_CLI_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cblas.h>
#include "clock.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../tokenizer.h"

_Noreturn static void die(const char *fmt, ...) {
    fflush(stdout); // what was printed before comes before the error in a log of both (> log 2>&1)
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

// MemAvailable of /proc/meminfo in bytes (what can be allocated without swapping others out;
// MemTotal would admit runs that the programs already running leave no room for), or -1.
static double available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

// A stream (standard input, a pipe, a FIFO, a terminal) read to its end, NUL-terminated: the text
// of an input named "-", or of one like <(cmd). name: the input, for a read error. fd may be
// non-blocking (a FIFO opened without waiting for its writer): poll waits for the data then.
static char *read_stream(int fd, const char *name, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (ssize_t r; buf; n += (size_t)r) {
        if (n + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
            if (!buf) break;
        }
        // a FIFO no writer has opened yet reads as its end: poll waits for the writer's data
        poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, -1);
        r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) r = 0;
        else if (r < 0) die("%s: read error: %s", name, strerror(errno));
        else if (r == 0) break;
    }
    if (!buf) die("%s: out of memory after %zu bytes", name, n);
    buf[n] = 0;
    *len = n;
    return buf;
}

// A whole regular file, NUL-terminated, or a one-line death naming it and, if given, what it
// was for ("the corpus"); "-" (with allow_stdin) is standard input. With streams, a FIFO, a
// pipe (<(cmd), /dev/stdin) or a terminal is read to its end as standard input is (it waits
// for a FIFO's writer); otherwise such a file is refused as not a regular file, as is any other
// device. O_NONBLOCK: opening a FIFO must not wait for its writer.
static char *read_input_or_stream(const char *path, size_t *len, const char *what, int allow_stdin, int streams) {
    if (allow_stdin && !strcmp(path, "-")) return read_stream(STDIN_FILENO, "standard input", len);
    const char *w = what ? what : "";
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: cannot open%s%s: %s", path, what ? " " : "", w, strerror(errno));
    struct stat st;
    if (streams && !fstat(fd, &st) && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || isatty(fd))) {
        char *text = read_stream(fd, path, len);
        close(fd);
        return text;
    }
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

static char *read_input(const char *path, size_t *len, const char *what, int allow_stdin) {
    return read_input_or_stream(path, len, what, allow_stdin, 0);
}

static char *read_file(const char *path, size_t *len, const char *what) { return read_input(path, len, what, 0); }

// How an input is named in messages: "-" is standard input.
static inline const char *input_name(const char *path) { return strcmp(path, "-") ? path : "standard input"; }

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

// A status line on stderr for long work: what is done of the total, the rate and the time left.
// On a terminal it is rewritten in place at most twice a second; otherwise a line is added every
// PROGRESS_LINE_SECONDS, so that a short job prints none.
#define PROGRESS_LINE_SECONDS 10.0
typedef struct {
    double start, shown;
    int tty;
} Progress;

static inline Progress progress_start(void) {
    double t = now_s();
    int tty = isatty(STDERR_FILENO);
    return (Progress){.start = t, .shown = tty ? 0.0 : t, .tty = tty}; // a terminal sees the first update at once
}

// done of total units; work: a count, in work_unit, whose rate is shown ("tok").
static inline void progress_show(Progress *p, const char *what, double done, double total, const char *unit,
                                 double work, const char *work_unit) {
    double t = now_s();
    if (t - p->shown < (p->tty ? 0.5 : PROGRESS_LINE_SECONDS) || done <= 0) return;
    p->shown = t;
    int eta = (int)((t - p->start) * (total - done) / done + 0.5);
    fprintf(stderr, "%s%s: %.0f of %.0f %s, %.0f %s/s, ETA %d:%02d%s", p->tty ? "\r\033[K" : "", what, done, total,
            unit, work / (t - p->start), work_unit, eta / 60, eta % 60, p->tty ? "" : "\n");
}

// Clears a terminal's status line; returns the seconds since progress_start.
static inline double progress_end(Progress *p) {
    if (p->tty && p->shown > p->start) fputs("\r\033[K", stderr);
    return now_s() - p->start;
}

// Sets the thread count from -j (requested > 0), else leaves OMP_NUM_THREADS's or every
// core's; more threads than cores are capped with a note, since on a CPU they only take turns
// (and spinning ones halve the speed).
static void choose_threads(int requested) {
#ifdef _OPENMP
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = requested ? requested : omp_get_max_threads(), use = cores > 0 && want > cores ? (int)cores : want;
    if (use < want)
        fprintf(stderr, "%s: note: %d threads asked for (%s) but this machine has %d core%s; using %d\n", prog, want,
                requested ? "-j" : "OMP_NUM_THREADS", use, plural(use), use);
    if (use != omp_get_max_threads() || requested) {
        omp_set_num_threads(use);
        openblas_set_num_threads(use);
    }
#else
    (void)requested;
#endif
}

#endif
