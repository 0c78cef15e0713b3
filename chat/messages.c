// chat/messages.c: the strict JSON reader of chat/messages.h.
#include "messages.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../io/files.h"
#include "../tokenizer.h"

typedef struct {
    const char *name;
    const char *start, *p, *end; // the text, the reading position, its end
    char *err;
    size_t errlen;
} Reader;

// One line of err: the name, where the reader stands (line and column, both from 1), the problem.
static int fail(Reader *r, const char *at, const char *fmt, ...) {
    int line = 1, col = 1;
    for (const char *q = r->start; q < at; q++) {
        if (*q == '\n') line++, col = 1;
        else if (((unsigned char)*q & 0xC0) != 0x80) col++; // columns count characters
    }
    int used = snprintf(r->err, r->errlen, "%s: line %d, column %d: ", r->name, line, col);
    va_list ap;
    va_start(ap, fmt);
    if (used >= 0 && (size_t)used < r->errlen) vsnprintf(r->err + used, r->errlen - used, fmt, ap);
    va_end(ap);
    return -1;
}

static void skip_space(Reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

// What the next value is, for an error that expected something else.
static const char *describe(const Reader *r) {
    if (r->p >= r->end) return "the end of the file";
    switch (*r->p) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    case ']': return "']'";
    case '}': return "'}'";
    case ',': return "','";
    default: return *r->p == '-' || (*r->p >= '0' && *r->p <= '9') ? "a number" : "a character that starts no value";
    }
}

static int expect(Reader *r, char c, const char *what) {
    skip_space(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 0;
    }
    return fail(r, r->p, "expected %s, found %s", what, describe(r));
}

static int hex4(const char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 63)), out[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 63));
    out[2] = (char)(0x80 | (cp >> 6 & 63)), out[3] = (char)(0x80 | (cp & 63));
    return 4;
}

// The code point of the \uXXXX escape at r->p (after its backslash and u), a surrogate pair
// read whole; -1 when the escape is malformed, a lone surrogate or NUL.
static int unicode_escape(Reader *r, const char *esc, unsigned *cp) {
    if (r->end - r->p < 4 || hex4(r->p, cp)) return fail(r, esc, "\\u needs four hex digits");
    r->p += 4;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF)
        return fail(r, esc, "\\u%04X is a low surrogate with no high one before it", *cp);
    if (*cp >= 0xD800 && *cp <= 0xDBFF) {
        unsigned lo;
        if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return fail(r, esc, "\\u%04X is a high surrogate not followed by a low one (\\uDC00..\\uDFFF)", *cp);
        r->p += 6;
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (*cp == 0) return fail(r, esc, "\\u0000: a NUL character cannot be in a message");
    return 0;
}

// The string at r->p (its opening quote) decoded into a malloc'd NUL-terminated *out of *len
// bytes. Decoded text is never longer than its JSON spelling.
static int read_string(Reader *r, char **out, size_t *len) {
    if (expect(r, '"', "a string")) return -1;
    const char *close = r->p;
    while (close < r->end && *close != '"') close += *close == '\\' && close + 1 < r->end ? 2 : 1;
    if (close >= r->end) return fail(r, r->p - 1, "a string that never ends");
    char *s = malloc((size_t)(close - r->p) + 1);
    if (!s) return fail(r, r->p, "out of memory");
    size_t n = 0;
    while (*r->p != '"') {
        const char *at = r->p;
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20) {
            free(s);
            return fail(r, at, "a raw control character (byte 0x%02X) in a string: write it as an escape", c);
        }
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        char e = *r->p++;
        const char *plain = strchr("\"\\/bfnrt", e), *as = "\"\\/\b\f\n\r\t";
        unsigned cp = 0;
        if (e && plain) s[n++] = as[plain - "\"\\/bfnrt"];
        else if (e == 'u' && !unicode_escape(r, at, &cp)) n += put_utf8(s + n, cp);
        else {
            if (e != 'u') fail(r, at, "\\%c is not a JSON escape", e);
            free(s);
            return -1;
        }
    }
    r->p++;
    s[n] = 0;
    *out = s;
    *len = n;
    return 0;
}

// chat_role_name's names: CHAT_SYSTEM ..., or -1.
static int role_from_name(const char *s, size_t len) {
    for (int i = CHAT_SYSTEM; i <= CHAT_ASSISTANT; i++)
        if (strlen(chat_role_name(i)) == len && !memcmp(chat_role_name(i), s, len)) return i;
    return -1;
}

// One {"role": ..., "content": ...} object, message number k (from 1) in errors.
static int read_message(Reader *r, int k, ChatMessage *m) {
    const char *open = (skip_space(r), r->p);
    if (expect(r, '{', "a message object {\"role\": ..., \"content\": ...}")) return -1;
    char *role = NULL, *content = NULL;
    size_t role_len = 0, content_len = 0;
    int role_id = -1;
    skip_space(r);
    for (int first = 1; r->p < r->end && *r->p != '}'; first = 0) {
        if (!first && expect(r, ',', "',' or '}'")) goto bad;
        skip_space(r);
        const char *key_at = r->p;
        char *key;
        size_t key_len;
        if (read_string(r, &key, &key_len)) goto bad;
        int is_role = !strcmp(key, "role"), known = is_role || !strcmp(key, "content");
        char **into = is_role ? &role : &content;
        size_t *into_len = is_role ? &role_len : &content_len;
        if (!known) fail(r, key_at, "message %d: unknown key \"%s\" (a message has role and content)", k, key);
        else if (*into) fail(r, key_at, "message %d: \"%s\" given twice", k, key);
        free(key);
        if (!known || *into) goto bad;
        if (expect(r, ':', "':'")) goto bad;
        skip_space(r);
        if (r->p >= r->end || *r->p != '"') {
            fail(r, r->p, "message %d: %s must be a string, not %s", k, is_role ? "role" : "content", describe(r));
            goto bad;
        }
        if (read_string(r, into, into_len)) goto bad;
        if (is_role && (role_id = role_from_name(role, role_len)) < 0) {
            fail(r, key_at, "message %d: unknown role \"%s\" (the roles are system, user and assistant)", k, role);
            goto bad;
        }
        skip_space(r);
    }
    if (expect(r, '}', "'}'")) goto bad;
    if (!role || !content) {
        fail(r, open, "message %d: no \"%s\"", k, role ? "content" : "role");
        goto bad;
    }
    *m = (ChatMessage){role_id, content, content_len};
    free(role);
    return 0;
bad:
    free(role);
    free(content);
    return -1;
}

int chat_messages_parse(const char *name, const char *json, size_t len, ChatMessage **msgs, int *n, char *err,
                        size_t errlen) {
    Reader r = {name, json, json, json + len, err, errlen};
    *msgs = NULL;
    *n = 0;
    size_t bad = tokenizer_first_non_text(json, len);
    if (bad < len) return fail(&r, json + bad, "%s", json[bad] ? "invalid UTF-8" : "a NUL byte");
    if (expect(&r, '[', "the array of messages '['")) return -1;
    skip_space(&r);
    int cap = 0;
    for (int first = 1; r.p < r.end && *r.p != ']'; first = 0) {
        if (!first && expect(&r, ',', "',' or ']'")) goto bad;
        if (*n == cap) {
            ChatMessage *more = realloc(*msgs, sizeof(ChatMessage) * (size_t)(cap = cap ? 2 * cap : 8));
            if (!more) {
                fail(&r, r.p, "out of memory");
                goto bad;
            }
            *msgs = more;
        }
        if (read_message(&r, *n + 1, &(*msgs)[*n])) goto bad;
        (*n)++;
        skip_space(&r);
    }
    if (expect(&r, ']', "']'")) goto bad;
    skip_space(&r);
    if (r.p < r.end) {
        fail(&r, r.p, "trailing bytes after the array of messages");
        goto bad;
    }
    return 0;
bad:
    chat_messages_free(*msgs, *n);
    *msgs = NULL;
    *n = 0;
    return -1;
}

void chat_messages_free(ChatMessage *msgs, int n) {
    for (int i = 0; i < n; i++) free((char *)msgs[i].text);
    free(msgs);
}

// The whole of path ("-": standard input), NUL-terminated, in *text; -1 with err.
static int slurp(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    size_t cap = 4096, n = 0;
    char *buf = f ? malloc(cap) : NULL;
    for (size_t got = 1; buf && got; n += got) {
        if (n + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
            if (!buf) break;
        }
        got = fread(buf + n, 1, cap - 1 - n, f);
    }
    int e = errno, bad = !f || !buf || ferror(f);
    if (f && !is_stdin) fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read: %s", path, f && !buf ? "out of memory" : strerror(e));
        return -1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

int chat_messages_load(const char *path, const char *system, ChatMessage **msgs, int *n, char *err, size_t errlen) {
    char *json;
    size_t len;
    *msgs = NULL;
    *n = 0;
    if (path && slurp(path, &json, &len, err, errlen)) return -1;
    if (path && !strcmp(path, "-")) path = "standard input";
    int rc = path ? chat_messages_parse(path, json, len, msgs, n, err, errlen) : 0;
    if (path) free(json);
    if (rc || !system) return rc;
    size_t system_len = strlen(system), bad = tokenizer_first_non_text(system, system_len);
    ChatMessage *more = NULL;
    char *copy = NULL;
    if (*n && (*msgs)[0].role == CHAT_SYSTEM) snprintf(err, errlen, "-y: %s already has a system message", path);
    else if (bad < system_len) snprintf(err, errlen, "-y: invalid UTF-8 at byte %zu", bad);
    else if (!(more = realloc(*msgs, sizeof(ChatMessage) * (size_t)(*n + 1))) || !(copy = strdup(system)))
        snprintf(err, errlen, "out of memory");
    if (more) *msgs = more;
    if (!copy) {
        chat_messages_free(*msgs, *n);
        *msgs = NULL;
        *n = 0;
        return -1;
    }
    memmove(more + 1, more, sizeof(ChatMessage) * (size_t)*n);
    more[0] = (ChatMessage){CHAT_SYSTEM, copy, system_len};
    ++*n;
    return 0;
}

// A JSON string of text: the escapes JSON requires (quote, backslash, control characters), the
// rest as it is. A reply may end inside a character or hold bytes that are not UTF-8 (it is the
// model's bytes): each such byte, and a NUL, is written as U+FFFD, as Hugging Face decodes them.
static void write_string(Sink *s, const char *text, size_t len) {
    sink_write(s, "\"", 1);
    for (size_t i = 0; i < len;) {
        size_t ok = i + tokenizer_first_non_text(text + i, len - i);
        for (; i < ok; i++) {
            unsigned char c = (unsigned char)text[i];
            char esc[8];
            const char *short_esc = c == '"'    ? "\\\""
                                    : c == '\\' ? "\\\\"
                                    : c == '\n' ? "\\n"
                                    : c == '\t' ? "\\t"
                                                : NULL;
            if (short_esc) sink_write(s, short_esc, 2);
            else if (c < 0x20) sink_write(s, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
            else sink_write(s, text + i, 1);
        }
        if (i < len) sink_write(s, "\xEF\xBF\xBD", 3), i++;
    }
    sink_write(s, "\"", 1);
}

typedef struct {
    const ChatMessage *msgs;
    int n;
} MessageList;

static void write_messages(Sink *s, const void *ctx) {
    const MessageList *list = ctx;
    if (fchmod(s->fd, 0600)) s->err = errno; // a conversation is as private as the chat's history
    sink_write(s, "[", 1);
    for (int i = 0; i < list->n; i++) {
        const char *role = chat_role_name(list->msgs[i].role);
        sink_write(s, i ? ",\n {\"role\": \"" : "{\"role\": \"", i ? 13 : 10);
        sink_write(s, role, strlen(role));
        sink_write(s, "\", \"content\": ", 14);
        write_string(s, list->msgs[i].text, list->msgs[i].len);
        sink_write(s, "}", 1);
    }
    sink_write(s, "]\n", 2);
}

int chat_messages_save(const char *path, const ChatMessage *msgs, int n, char *err, size_t errlen) {
    MessageList list = {msgs, n};
    return write_atomic(path, write_messages, &list, err, errlen);
}
