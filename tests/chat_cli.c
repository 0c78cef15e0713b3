// Test helper: renders conversations with chat/chat.h. TEMPLATE is a chat section file (version 5), or
// name:NAME for chat_template_by_name. The first line printed lists the ids that end a turn
// (chat_is_end_of_turn); then each input line, a conversation, gives one line of ids (or
// "error: ..."). An input line is G then messages, space-separated: G is 1 to add the generation
// prompt, 0 not; a message is its role letter (s, u, a), a colon, and its text in hex.
// usage: chat_cli BLOB KIND FLAGS BOS EOS TEMPLATE < lines
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../chat/chat.h"

// The section files the tests write are in format version 5's layout (tools/chat_template.py).
#define SECTION_VERSION 5

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc((size_t)size + 1);
    *n = data ? fread(data, 1, (size_t)size, f) : 0;
    fclose(f);
    return data;
}

static int hexval(int c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

// Parses one conversation line in place (the hex decoded over itself); returns the message count.
static int parse_line(char *line, int *gen, ChatMessage *msgs, int max_msgs) {
    int n = 0;
    char *save, *field = strtok_r(line, " \n", &save);
    *gen = field && field[0] == '1';
    while ((field = strtok_r(NULL, " \n", &save)) && n < max_msgs) {
        const char *roles = "sua";
        const char *r = strchr(roles, field[0]);
        char *hex = field + 2, *text = hex;
        size_t len = 0;
        for (; hexval(hex[0]) >= 0 && hexval(hex[1]) >= 0; hex += 2)
            text[len++] = (char)(hexval(hex[0]) * 16 + hexval(hex[1]));
        msgs[n++] = (ChatMessage){.role = r ? (int)(r - roles) : -1, .text = text, .len = len};
    }
    return n;
}

// The template named name:NAME, or the chat section in the file at arg; 0, or -1 said on stderr.
static int load_template(ChatTemplate *ct, const char *arg, const Tokenizer *t) {
    char err[512];
    if (!strncmp(arg, "name:", 5)) {
        if (!chat_template_by_name(ct, arg + 5, t, err, sizeof err)) return 0;
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    size_t n;
    char *section = read_file(arg, &n);
    if (!section) {
        perror(arg);
        return -1;
    }
    int rc = chat_template_init(ct, section, n, SECTION_VERSION, t, err, sizeof err);
    free(section);
    if (rc) fprintf(stderr, "%s: %s\n", arg, err);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s BLOB KIND FLAGS BOS EOS SECTION|name:NAME < lines\n", argv[0]);
        return 2;
    }
    size_t n;
    char *blob = read_file(argv[1], &n), err[512];
    if (!blob) {
        perror(argv[1]);
        return 1;
    }
    Tokenizer t;
    if (tokenizer_init(&t, blob, n, atoi(argv[2]), (unsigned)atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), err,
                       sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }
    free(blob);
    ChatTemplate ct;
    if (load_template(&ct, argv[6], &t)) {
        tokenizer_free(&t);
        return 1;
    }
    printf("end_of_turn:");
    for (int id = 0; id < t.n_pieces; id++)
        if (chat_is_end_of_turn(&ct, &t, id)) printf(" %d", id);
    putchar('\n');
    size_t cap = 1 << 22;
    char *line = malloc(cap);
    ChatMessage msgs[64];
    while (fgets(line, (int)cap, stdin)) {
        int gen, n_msgs = parse_line(line, &gen, msgs, 64);
        size_t max = chat_max_tokens(&ct, &t, msgs, n_msgs);
        int *ids = malloc(max * sizeof *ids);
        int k = chat_render(&ct, &t, msgs, n_msgs, gen, ids, (int)max, err, sizeof err);
        if (k < 0) printf("error: %s\n", err);
        for (int i = 0; i < k; i++) printf(i ? " %d" : "%d", ids[i]);
        if (k >= 0) putchar('\n');
        free(ids);
    }
    free(line);
    chat_template_free(&ct);
    tokenizer_free(&t);
    return 0;
}
