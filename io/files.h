// io/files.h: files written whole or not at all, the checks every output gets first, and
// files mapped to read in place. It owns the bytes on disk: atomic replacement through a
// unique temporary file, refusing an output that is not a regular file, telling whether two
// paths are one file, and mapping a file in 2 MiB pages. It never decides what the bytes mean
// (model/file.h, training/checkpoint.h) and never exits.
#ifndef ATTN_IO_FILES_H
#define ATTN_IO_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

// Whether two paths name one existing file (a hard link or another spelling included): an
// output that is also an input would be destroyed before or while it is read.
static inline int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// 0 when path is absent or a regular file (a link is followed), else -1 with a one-line reason:
// replacing a device, FIFO, socket or directory by renaming a new file over it destroys it.
static inline int check_output(const char *path, char *err, size_t n) {
    struct stat st;
    if (stat(path, &st)) return 0;
    if (S_ISREG(st.st_mode)) return 0;
    const char *kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    snprintf(err, n, "%s: is %s, not a regular file; refusing to replace it", path, kind);
    return -1;
}

// A file being written: the first write error sticks; crc is zlib's CRC-32 of the bytes written
// so far (a writer that wants a checksum ends its file with it).
typedef struct {
    int fd, err;
    uint32_t crc;
} Sink;

static inline void sink_write(Sink *s, const void *p, size_t n) {
    const char *b = p;
    s->crc = (uint32_t)crc32_z(s->crc, p, n);
    while (n && !s->err) {
        ssize_t w = write(s->fd, b, n);
        if (w < 0) {
            if (errno != EINTR) s->err = errno;
            continue;
        }
        b += w;
        n -= (size_t)w;
    }
}

typedef void (*SinkWriter)(Sink *s, const void *ctx);

// The directory part of path ("." for a bare name), in dir of size n.
static inline void dir_of(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

// Writes path whole or not at all: fn writes into a temporary file unique to this writer
// (mkstemp beside path), which is flushed to disk and renamed over path, and the directory is
// synced so that the rename itself is durable. A crash, a kill -9 or a full disk at any moment
// leaves the previous file or the new one. Returns 0, or -1 with a one-line reason in err; on
// failure path is untouched and the temporary file removed.
static inline int write_atomic(const char *path, SinkWriter fn, const void *ctx, char *err, size_t n) {
    if (check_output(path, err, n)) return -1;
    size_t len = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(len), *dir = malloc(len);
    if (!tmp || !dir) {
        snprintf(err, n, "%s: out of memory", path);
        free(tmp);
        free(dir);
        return -1;
    }
    snprintf(tmp, len, "%s.tmp.XXXXXX", path);
    Sink s = {mkstemp(tmp), 0, 0};
    if (s.fd < 0) {
        snprintf(err, n, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp);
        free(dir);
        return -1;
    }
    mode_t mask = umask(0); // mkstemp makes the file 0600; a model file is as readable as any other
    umask(mask);
    if (fchmod(s.fd, 0666 & ~mask)) s.err = errno;
    fn(&s, ctx);
    if (!s.err && fsync(s.fd)) s.err = errno;
        // Written pages sit in the page cache in small folios, and ./run would map the model with
        // 4 KiB pages for as long as they stay; dropped once on disk, the file is read back by
        // ./run's mapping in 2 MiB ones (model_open).
#ifdef POSIX_FADV_DONTNEED
    if (!s.err) posix_fadvise(s.fd, 0, 0, POSIX_FADV_DONTNEED);
#endif
    if (close(s.fd) && !s.err) s.err = errno;
    // checked again just before the rename: the output may have been swapped meanwhile
    if (!s.err && check_output(path, err, n)) s.err = -1;
    if (!s.err && rename(tmp, path)) s.err = errno;
    if (s.err) {
        if (s.err > 0) snprintf(err, n, "%s: cannot write: %s", path, strerror(s.err));
        unlink(tmp);
    } else {
        dir_of(path, dir, len);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    free(tmp);
    free(dir);
    return s.err ? -1 : 0;
}

// write_atomic, or for the path "-" a stream to standard output written as computed (nothing
// else may go to stdout then).
static inline int write_output(const char *path, SinkWriter fn, const void *ctx, char *err, size_t n) {
    if (strcmp(path, "-")) return write_atomic(path, fn, ctx, err, n);
    Sink out = {STDOUT_FILENO, 0, 0};
    fn(&out, ctx);
    if (out.err > 0) snprintf(err, n, "stdout: cannot write: %s", strerror(out.err));
    return out.err ? -1 : 0;
}

// ----------------------------------------------------------------------------
// Mapping a file to read in place. A one-token step reads every weight once, and over 4 KiB
// pages it ran 4-15 % slower than over 2 MiB ones (TLB misses; docs/KERNELS.md).

#define HUGE_PAGE ((size_t)2 << 20)

// Bytes of the mapping that starts at addr which the kernel maps with 2 MiB pages (smaps'
// FilePmdMapped); 0 where there is no /proc.
static inline size_t pmd_mapped_bytes(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    size_t kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) in = lo == (unsigned long)addr;
        else if (in && sscanf(line, "FilePmdMapped: %zu kB", &kb) == 1) break;
    }
    fclose(f);
    return kb * 1024;
}

// fd's size bytes mapped read-only, asking for 2 MiB pages, and if populate every page read
// in; or MAP_FAILED.
static inline void *map_populated(int fd, size_t size, int populate) {
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
#ifdef MADV_HUGEPAGE
    if (map != MAP_FAILED) madvise(map, size, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_READ
    if (map != MAP_FAILED && populate) madvise(map, size, MADV_POPULATE_READ);
#endif
    return map;
}

// fd's size bytes mapped read-only for reading in place, or MAP_FAILED. The page cache holds
// a file read from disk through such a mapping in 2 MiB folios (Linux 6.x, ext4 and XFS), but
// one just written, copied or read in small pieces in small folios, which map as 4 KiB pages
// whatever the mapping asks. So when more than one 2 MiB page's worth of the mapping came out
// in small pages, and the kernel can map this file in large ones (some of it is, or a 2 MiB
// piece dropped from the cache comes back as one), the file's cached pages are written out if
// they are not yet, dropped, and mapped again, read back from disk once. Pages another process
// maps stay as they are. A file larger than half the memory is left to be read as it is used.
static inline void *map_file(int fd, size_t size) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int fits = pages > 0 && page > 0 && size <= (size_t)pages * (size_t)page / 2;
    void *map = map_populated(fd, size, fits);
#if defined(MADV_POPULATE_READ) && defined(POSIX_FADV_DONTNEED)
    size_t whole = size / HUGE_PAGE * HUGE_PAGE; // the kernel places a large mapping 2 MiB aligned
    if (map == MAP_FAILED || !fits || (uintptr_t)map % HUGE_PAGE || whole < 2 * HUGE_PAGE) return map;
    size_t huge = pmd_mapped_bytes(map);
    if (huge + HUGE_PAGE >= whole) return map;
    fdatasync(fd); // pages not yet on disk cannot be dropped
    if (!huge) {   // a probe: the last whole 2 MiB, dropped and read again
        munmap(map, size);
        posix_fadvise(fd, (off_t)(whole - HUGE_PAGE), (off_t)HUGE_PAGE, POSIX_FADV_DONTNEED);
        map = map_populated(fd, size, 1);
        if (map == MAP_FAILED || !pmd_mapped_bytes(map)) return map;
    }
    munmap(map, size);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    map = map_populated(fd, size, 1);
#endif
    return map;
}

#endif
