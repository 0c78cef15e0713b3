// chat/conversation.c: the turn loop of chat/conversation.h.
#include "conversation.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../tokenizer.h"

// Set by Ctrl-C while a terminal conversation runs: the reply being written stops there.
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int conversation_init(Conversation *cv, const ChatTemplate *ct, const Tokenizer *tok, int seq_len) {
    *cv = (Conversation){.ct = ct, .tok = tok, .seq_len = seq_len, .rewind_limit = seq_len};
    cv->cached = malloc(sizeof(int) * (size_t)seq_len);
    return cv->cached ? 0 : -1;
}

int conversation_add(Conversation *cv, int role, const char *text, size_t len) {
    if (cv->n_msgs == cv->cap_msgs) {
        int cap = cv->cap_msgs ? 2 * cv->cap_msgs : 16;
        ChatMessage *more = realloc(cv->msgs, sizeof(ChatMessage) * (size_t)cap);
        if (!more) return -1;
        cv->msgs = more;
        cv->cap_msgs = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, text, len);
    copy[len] = 0;
    cv->msgs[cv->n_msgs++] = (ChatMessage){role, copy, len};
    return 0;
}

// Removes messages [from, from + n) of the history.
static void drop_messages(Conversation *cv, int from, int n) {
    for (int i = from; i < from + n; i++) free((char *)cv->msgs[i].text);
    memmove(cv->msgs + from, cv->msgs + from + n, sizeof(ChatMessage) * (size_t)(cv->n_msgs - from - n));
    cv->n_msgs -= n;
}

void conversation_free(Conversation *cv) {
    drop_messages(cv, 0, cv->n_msgs);
    free(cv->msgs);
    free(cv->cached);
    free(cv->render);
    free(cv->reply);
    *cv = (Conversation){0};
}

static int render_all(Conversation *cv, char *err, size_t errlen) {
    size_t need = chat_max_tokens(cv->ct, cv->tok, cv->msgs, cv->n_msgs);
    if (need > cv->cap_render) {
        int *bigger = realloc(cv->render, sizeof(int) * need);
        if (!bigger) return chat_fail(err, errlen, "out of memory rendering the conversation");
        cv->render = bigger;
        cv->cap_render = need;
    }
    return chat_render(cv->ct, cv->tok, cv->msgs, cv->n_msgs, 1, cv->render, (int)cv->cap_render, err, errlen);
}

int conversation_render(Conversation *cv, int max_tokens, int *dropped, char *err, size_t errlen) {
    *dropped = 0;
    for (;;) {
        int n = render_all(cv, err, errlen);
        if (n <= max_tokens) return n; // -1 included
        // The oldest turn after the system prompt goes: its user message and what follows up
        // to the next user message; never the newest message.
        int first = cv->n_msgs > 0 && cv->msgs[0].role == CHAT_SYSTEM, end = first + 1;
        while (end < cv->n_msgs - 1 && cv->msgs[end].role != CHAT_USER) end++;
        if (end >= cv->n_msgs)
            return chat_fail(err, errlen,
                             "the newest turn is %d tokens as the template renders it%s, more than the %d the "
                             "context leaves for it (-c, -n)",
                             n, first ? " with the system prompt" : "", max_tokens);
        drop_messages(cv, first, end - first);
        *dropped += end - first;
    }
}

// The longest common prefix of the render and the cached ids, where running may start again:
// never the whole render (its last token's logits are needed) and never further back than the
// cache can be rewound.
static int reusable_prefix(const Conversation *cv, int n) {
    int k = 0;
    while (k < n - 1 && k < cv->n_cached && cv->render[k] == cv->cached[k]) k++;
    return cv->n_cached - k > cv->rewind_limit ? 0 : k;
}

static int reply_append(Conversation *cv, const char *piece, size_t len) {
    if (cv->n_reply + len + 1 > cv->cap_reply) {
        size_t cap = 2 * (cv->n_reply + len + 1);
        char *bigger = realloc(cv->reply, cap);
        if (!bigger) return -1;
        cv->reply = bigger;
        cv->cap_reply = cap;
    }
    memcpy(cv->reply + cv->n_reply, piece, len);
    cv->n_reply += len;
    return 0;
}

// Samples, prints and runs the reply's tokens until end-of-turn, -n, a full context or Ctrl-C;
// the reply's text is kept in cv->reply. Returns the tokens written, or -1 when out of memory.
static int write_reply(Conversation *cv, const ChatRunner *r, const char **why_stopped) {
    int written = 0;
    cv->n_reply = 0;
    *why_stopped = NULL;
    for (;;) {
        if (interrupted) {
            *why_stopped = "stopped by Ctrl-C";
            break;
        }
        int next = r->sample(r->ctx, cv->cached, cv->n_cached);
        if (chat_is_end_of_turn(cv->ct, cv->tok, next)) break; // the tokenizer's own stops included
        size_t len;
        const char *piece = tokenizer_decode(cv->tok, cv->cached[cv->n_cached - 1], next, &len);
        r->print(r->ctx, piece, len, 0);
        if (reply_append(cv, piece, len)) return -1;
        if (++written == cv->max_new) {
            *why_stopped = "-n tokens written";
            break;
        }
        if (cv->n_cached == cv->seq_len) {
            *why_stopped = "the context is full";
            break;
        }
        r->forward(r->ctx, &next, 1, cv->n_cached);
        cv->cached[cv->n_cached++] = next;
    }
    r->print(r->ctx, "", 0, 1);
    return written;
}

// One assistant turn for the conversation as it stands (its last message the user's): render,
// run what the cache lacks, write the reply, keep it in the history. -1 with err on failure.
static int answer(Conversation *cv, const ChatRunner *r, char *err, size_t errlen) {
    // the turn leaves room for a reply of -n tokens, at most half the context
    int reserve = cv->max_new > 0 && cv->max_new < cv->seq_len / 2 ? cv->max_new : cv->seq_len / 2, dropped;
    int n = conversation_render(cv, cv->seq_len - reserve, &dropped, err, errlen);
    if (n < 0) return -1;
    if (dropped)
        fprintf(stderr, "[the context is full: the oldest %d message%s dropped]\n", dropped, dropped == 1 ? "" : "s");
    int keep = reusable_prefix(cv, n);
    double t0 = seconds();
    interrupted = 0;
    r->forward(r->ctx, cv->render + keep, n - keep, keep);
    memcpy(cv->cached, cv->render, sizeof(int) * (size_t)n);
    cv->n_cached = n;
    double t1 = seconds();
    const char *why_stopped;
    int written = write_reply(cv, r, &why_stopped);
    if (written < 0 || conversation_add(cv, CHAT_ASSISTANT, cv->reply ? cv->reply : "", cv->n_reply))
        return chat_fail(err, errlen, "out of memory");
    double t2 = seconds();
    r->print(r->ctx, "\n\n", 2, 1);
    fprintf(stderr,
            "[prompt: %d token%s run in %.3f s, %d reused from the cache; reply: %d token%s in %.3f s "
            "(%.1f tok/s)%s%s]\n",
            n - keep, n - keep == 1 ? "" : "s", t1 - t0, keep, written, written == 1 ? "" : "s", t2 - t1,
            written > 0 ? written / (t2 - t1) : 0.0, why_stopped ? "; " : "", why_stopped ? why_stopped : "");
    return 0;
}

// The next line of standard input without its line ending, in *line (getline's buffer); -1 at
// the end of input or on a read error (ferror(stdin) tells). At a terminal, Ctrl-C while
// waiting gives a new prompt instead.
static ssize_t read_turn(const Conversation *cv, char **line, size_t *cap) {
    for (;;) {
        if (cv->interactive) fputs("> ", stdout), fflush(stdout);
        errno = 0;
        ssize_t len = getline(line, cap, stdin);
        if (len < 0 && cv->interactive && errno == EINTR) {
            clearerr(stdin);
            interrupted = 0;
            fputs("\n[Ctrl-D or /bye ends the conversation]\n", stderr);
            continue;
        }
        if (len < 0) return -1;
        if (len > 0 && (*line)[len - 1] == '\n') len--;
        if (len > 0 && (*line)[len - 1] == '\r') len--;
        (*line)[len] = 0;
        if (len == 0 && cv->interactive) continue;
        return len;
    }
}

int conversation_run(Conversation *cv, const ChatRunner *r, char *err, size_t errlen) {
    struct sigaction on_int = {.sa_handler = on_sigint}, before; // no SA_RESTART: Ctrl-C interrupts the read
    if (cv->interactive) sigaction(SIGINT, &on_int, &before);
    char *line = NULL, why[512];
    size_t cap = 0;
    int rc = 0;
    if (cv->n_msgs && cv->msgs[cv->n_msgs - 1].role == CHAT_USER && answer(cv, r, why, sizeof why))
        rc = chat_fail(err, errlen, "the history's last message: %s", why);
    for (int turn = 1; rc == 0; turn++) {
        ssize_t len = read_turn(cv, &line, &cap);
        if (len < 0 && ferror(stdin)) rc = chat_fail(err, errlen, "standard input: read error: %s", strerror(errno));
        if (len < 0 || !strcmp(line, "/bye")) break;
        size_t bad = tokenizer_first_non_text(line, (size_t)len);
        if (bad < (size_t)len)
            snprintf(why, sizeof why, "%s at byte %zu", line[bad] ? "invalid UTF-8" : "a NUL byte", bad);
        else if (conversation_add(cv, CHAT_USER, line, (size_t)len)) snprintf(why, sizeof why, "out of memory");
        else if (answer(cv, r, why, sizeof why)) drop_messages(cv, cv->n_msgs - 1, 1);
        else continue;
        if (!cv->interactive) rc = chat_fail(err, errlen, "standard input: line %d: %s", turn, why);
        else fprintf(stderr, "[that message was not sent: %s]\n", why);
    }
    if (cv->interactive && rc == 0) fputs("\n", stdout), fflush(stdout); // the shell's prompt on a line of its own
    if (cv->interactive) sigaction(SIGINT, &before, NULL);
    free(line);
    return rc;
}
