// io/map_guard.h: a file read in place from its mapping that shrinks meanwhile (say, rewritten
// in place) raises SIGBUS at the first touch of a page past its new end. The guard names the
// file and the cause on one line and exits 1, rather than die with "Bus error"; faults
// outside the mapping keep their default action.
#ifndef ATTN_IO_MAP_GUARD_H
#define ATTN_IO_MAP_GUARD_H

#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static struct {
    const char *lo, *hi;  // the guarded mapping
    struct iovec line[6]; // "PROG: PATH: WHAT\n", written whole from the handler
} map_guard;

static void on_map_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    const char *a = si->si_addr;
    if (a >= map_guard.lo && a < map_guard.hi) {
        (void)writev(STDERR_FILENO, map_guard.line, 6); // async-signal-safe, unlike stdio
        _exit(1);
    }
    signal(sig, SIG_DFL); // the faulting access runs again and ends the process as before
}

// Guards [map, map + bytes), the mapping of path, for the rest of the process: a fault inside
// it prints "prog: path: what" (the strings must outlive the process's use of the mapping).
static inline void guard_mapping(const void *map, size_t bytes, const char *prog, const char *path, const char *what) {
    static char sep[] = ": ", end[] = "\n";
    map_guard.lo = map;
    map_guard.hi = (const char *)map + bytes;
    const char *piece[6] = {prog, sep, path, sep, what, end};
    for (int i = 0; i < 6; i++) map_guard.line[i] = (struct iovec){(char *)piece[i], strlen(piece[i])};
    struct sigaction sa = {0};
    sa.sa_sigaction = on_map_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
}

#endif
