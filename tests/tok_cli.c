// Test helper: encodes each input line (hex of the text's bytes) with a tokenizer blob and prints
// the ids, a tab, and the hex of the concatenated decoded pieces. OPTS are tokenizer_encode's
// options (TOKE_*, default 0).
// usage: tok_cli BLOB KIND FLAGS BOS EOS [OPTS] < lines
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer.h"

static int hexval(int c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s BLOB KIND FLAGS BOS EOS [OPTS] < hex lines\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *blob = malloc((size_t)n + 1), err[256];
    if (!blob || fread(blob, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: read error\n", argv[1]);
        return 1;
    }
    fclose(f);
    Tokenizer t;
    if (tokenizer_init(&t, blob, (size_t)n, atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), err,
                       sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }
    free(blob);
    unsigned opts = argc == 7 ? (unsigned)atoi(argv[6]) : 0;
    size_t cap = 1 << 23;
    char *line = malloc(cap), *text = malloc(cap);
    int *ids = malloc(sizeof(int) * tokenizer_max_tokens(&t, cap));
    while (fgets(line, (int)cap, stdin)) {
        size_t len = 0;
        for (char *p = line; hexval(p[0]) >= 0 && hexval(p[1]) >= 0; p += 2)
            text[len++] = (char)(hexval(p[0]) * 16 + hexval(p[1]));
        int k = tokenizer_encode(&t, text, len, opts, ids, (int)tokenizer_max_tokens(&t, len), err, sizeof err);
        if (k < 0) {
            printf("error: %s\n", err);
            continue;
        }
        for (int i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        putchar('\t');
        for (int i = 0; i < k; i++) {
            size_t pl;
            const unsigned char *p = (const unsigned char *)tokenizer_decode(&t, i ? ids[i - 1] : -1, ids[i], &pl);
            for (size_t j = 0; j < pl; j++) printf("%02x", p[j]);
        }
        putchar('\n');
    }
    tokenizer_free(&t);
    free(line);
    free(text);
    free(ids);
    return 0;
}
