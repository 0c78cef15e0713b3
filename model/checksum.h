// model/checksum.h: the model file's checksum (version 5: zlib's CRC-32 of the whole file, its
// own four bytes taken as zero) and a resume state's, checked by reading the whole file, which
// mapping a model (file.h) does not.
#ifndef ATTN_MODEL_CHECKSUM_H
#define ATTN_MODEL_CHECKSUM_H

#include <stdint.h>
#include <zlib.h>
#include "../io/files.h"
#include "header.h"

// ./train's resume state (training/checkpoint.h) begins with STATE_MAGIC; its first four bytes
// are a model file's magic, so both ./run and --verify tell it apart by the eight.
#define STATE_MAGIC "ATTNSTAT"
#define STATE_STEP_OFFSET 16 // its step, a u64, after the magic, version and options' size

#define MODEL_CHECKSUM_CHUNK (1 << 20)

// crc continued over bytes [at, end) of fd (end -1: to its end), read through buf of
// MODEL_CHECKSUM_CHUNK bytes; 0, or the errno of a failed read.
static inline int crc32_of_range(int fd, off_t at, off_t end, unsigned char *buf, uLong *crc) {
    for (ssize_t r;; at += r) {
        size_t want = end < 0 || end - at > MODEL_CHECKSUM_CHUNK ? MODEL_CHECKSUM_CHUNK : (size_t)(end - at);
        r = want ? pread(fd, buf, want, at) : 0;
        if (r < 0 && errno == EINTR) r = 0;
        else if (r < 0) return errno;
        else if (r == 0) return 0;
        else *crc = crc32_z(*crc, buf, (size_t)r);
    }
}

// The step a resume state at path says its run reached; -1 when path is not one (or cannot be
// read), -2 when it is one cut too short to hold its step.
static inline long state_file_step(const char *path) {
    char head[STATE_STEP_OFFSET + sizeof(uint64_t)];
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    ssize_t got = fd < 0 ? -1 : pread(fd, head, sizeof head, 0);
    if (fd >= 0) close(fd);
    if (got < 8 || memcmp(head, STATE_MAGIC, 8)) return -1;
    if (got < (ssize_t)sizeof head) return -2;
    uint64_t step;
    memcpy(&step, head + STATE_STEP_OFFSET, sizeof step);
    return (long)step;
}

// A resume state's checksum: the CRC-32 of all its bytes but the last four, which hold it
// (little-endian); 0 with *step, or -1 with err.
static inline int state_verify_checksum(const char *path, uint64_t *step, char *err, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    uint32_t want = 0;
    off_t end = st.st_size - (off_t)sizeof want;
    unsigned char *buf = malloc(MODEL_CHECKSUM_CHUNK);
    uLong crc = crc32_z(0, Z_NULL, 0);
    int short_file = end < STATE_STEP_OFFSET + (off_t)sizeof *step;
    int read_errno = !buf || short_file ? 0 : crc32_of_range(fd, 0, end, buf, &crc);
    int ok = buf && !short_file && !read_errno && pread(fd, &want, sizeof want, end) == (ssize_t)sizeof want &&
             pread(fd, step, sizeof *step, STATE_STEP_OFFSET) == (ssize_t)sizeof *step;
    free(buf);
    close(fd);
    if (ok && crc == want) return 0;
    if (!buf) snprintf(err, n, "%s: out of memory", path);
    else if (short_file) snprintf(err, n, "%s: too short for a resume state", path);
    else if (read_errno || !ok) snprintf(err, n, "%s: read error: %s", path, strerror(read_errno ? read_errno : EIO));
    else snprintf(err, n, "%s: checksum mismatch: the file is damaged", path);
    return -1;
}

// The CRC-32 of the file at path (0 or -1 with err); a file of a version before 5 has none and
// passes. Reads the whole file: ./run --verify and ./train's --init and --resume call it, a
// plain ./run does not, so that mapping a model stays instant.
static inline int model_verify_checksum(const char *path, char *err, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    FileHeader h;
    // not a model, or one without a checksum: the layout checks (model_open) say the rest
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.magic, MODEL_MAGIC, 4) || h.version < 5) {
        close(fd);
        return 0;
    }
    unsigned char *buf = malloc(MODEL_CHECKSUM_CHUNK);
    if (!buf) {
        close(fd);
        snprintf(err, n, "%s: out of memory", path);
        return -1;
    }
    uint32_t want = h.checksum;
    h.checksum = 0;
    uLong crc = crc32_z(crc32_z(0, Z_NULL, 0), (const Bytef *)&h, sizeof h);
    int read_errno = crc32_of_range(fd, sizeof h, -1, buf, &crc);
    free(buf);
    close(fd);
    if (read_errno) {
        snprintf(err, n, "%s: read error: %s", path, strerror(read_errno));
        return -1;
    }
    if (crc != want) {
        snprintf(err, n, "%s: checksum mismatch: the file is damaged", path);
        return -1;
    }
    return 0;
}

#endif
