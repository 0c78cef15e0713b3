// Shared by the fuzz targets: checks that abort (so libFuzzer records the input) and the
// seed writer. A target built with -DMAKE_SEEDS has a main that writes its seed corpus.
#ifndef FUZZ_H
#define FUZZ_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond, what)                                                                                        \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, __FILE__, __LINE__);                              \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

// Error messages are one non-empty line.
static inline void fuzz_check_message(const char *err) {
    FUZZ_ASSERT(err[0] && !strchr(err, '\n'), "an error message is empty or spans lines");
}

static inline void fuzz_write_seed(const char *dir, const char *name, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "%s: cannot write\n", path);
        exit(1);
    }
}
#endif
