// chat/conversation.c: the turn loop of chat/conversation.h.
#include "conversation.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include "../tokenizer.h"
#include "messages.h"

// Set by Ctrl-C while a terminal conversation runs: the reply being written stops there.
static volatile sig_atomic_t interrupted;
static pthread_t reader; // the thread that reads the lines

// Between turns the reader keeps SIGINT blocked until it waits for a key (console.c), so the
// kernel may hand a Ctrl-C to another thread that lets it in (OpenBLAS's own, in a build that
// has them): that one passes it on to the reader, whose wait it ends.
static void on_sigint(int sig) {
    interrupted = 1;
    if (!pthread_equal(pthread_self(), reader)) pthread_kill(reader, sig);
}

// Lets SIGINT in (1) or keeps it blocked, pending (0), the mask before in *before.
static void let_sigint_in(int in, sigset_t *before) {
    sigset_t sigint;
    sigemptyset(&sigint);
    sigaddset(&sigint, SIGINT);
    sigprocmask(in ? SIG_UNBLOCK : SIG_BLOCK, &sigint, before);
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int conversation_init(Conversation *cv, ChatTemplate *ct, const Tokenizer *tok, int seq_len) {
    *cv = (Conversation){.ct = ct, .tok = tok, .seq_len = seq_len, .rewind_limit = seq_len, .batch = seq_len};
    cv->cached = malloc(sizeof(int) * ((size_t)seq_len + 1)); // + the reply's token drawn last
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
    if (cv->n_msgs > from + n) // msgs is NULL before the first message: memmove wants pointers
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

// Renders msgs[0..n) with the generation prompt into cv->render.
static int render_view(Conversation *cv, const ChatMessage *msgs, int n, char *err, size_t errlen) {
    size_t need = chat_max_tokens(cv->ct, cv->tok, msgs, n);
    if (need > cv->cap_render) {
        int *bigger = realloc(cv->render, sizeof(int) * need);
        if (!bigger) return chat_fail(err, errlen, "out of memory rendering the conversation");
        cv->render = bigger;
        cv->cap_render = need;
    }
    return chat_render(cv->ct, cv->tok, msgs, n, 1, cv->render, (int)cv->cap_render, err, errlen);
}

int conversation_render(Conversation *cv, int max_tokens, int *dropped, char *err, size_t errlen) {
    *dropped = 0;
    // The turns are dropped from a view of the history: the history loses them only once the
    // turn has run (answer), so that a turn refused or stopped leaves the conversation as it was.
    ChatMessage *view = malloc(sizeof(ChatMessage) * (size_t)(cv->n_msgs ? cv->n_msgs : 1));
    if (!view) return chat_fail(err, errlen, "out of memory rendering the conversation");
    if (cv->n_msgs) memcpy(view, cv->msgs, sizeof(ChatMessage) * (size_t)cv->n_msgs); // msgs may be NULL
    int n_view = cv->n_msgs, first = n_view > 0 && view[0].role == CHAT_SYSTEM, n;
    for (;;) {
        n = render_view(cv, view, n_view, err, errlen);
        if (n <= max_tokens) break; // -1 included
        // The oldest turn after the system prompt goes: its user message and what follows up
        // to the next user message; never the newest message.
        int end = first + 1;
        while (end < n_view - 1 && view[end].role != CHAT_USER) end++;
        if (end >= n_view) {
            n = chat_fail(err, errlen,
                          "the newest turn is %d tokens as the template renders it%s, more than the %d the "
                          "context leaves for it (-c, -n)",
                          n, first ? " with the system prompt" : "", max_tokens);
            break;
        }
        memmove(view + first, view + end, sizeof(ChatMessage) * (size_t)(n_view - end));
        n_view -= end - first;
        *dropped += end - first;
    }
    free(view);
    if (n < 0) *dropped = 0;
    return n;
}

// The longest common prefix of the render and the cached ids, where running may start again:
// never the whole render (its last token's logits are needed) and never further back than the
// cache can be rewound.
static int reusable_prefix(const Conversation *cv, int n) {
    int k = 0;
    while (k < n - 1 && k < cv->n_cached && cv->render[k] == cv->cached[k]) k++;
    return cv->n_written - k > cv->rewind_limit ? 0 : k;
}

// Appends s[0..n) to the text in *buf (*len bytes of *cap), which stays NUL-terminated; 0, or -1
// when out of memory.
static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t bigger_cap = 2 * (*len + n + 1);
        char *bigger = realloc(*buf, bigger_cap);
        if (!bigger) return -1;
        *buf = bigger;
        *cap = bigger_cap;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

// Samples, prints and runs the reply's tokens until end-of-turn, -n, a full context or Ctrl-C;
// the reply's text is kept in cv->reply. The first token comes from the prompt's logits, the
// rest from the runner's steps, several at a time when it speculates; tokens drawn after the one
// that ends the reply are dropped. Returns the tokens written, or -1 when out of memory.
static int write_reply(Conversation *cv, const ChatRunner *r, const char **why_stopped) {
    // ids[n..end) are drawn and not yet written; once one is drawn the cache holds ids[0..end - 1)
    int written = 0, *ids = cv->cached, n = cv->n_cached, end = n;
    cv->n_reply = 0;
    *why_stopped = NULL;
    for (;;) {
        if (end > cv->n_cached && end - 1 == cv->seq_len) {
            *why_stopped = "context full";
            break;
        }
        if (interrupted) {
            *why_stopped = "Ctrl-C";
            break;
        }
        if (end == cv->n_cached) ids[end++] = r->sample(r->ctx, ids, n);
        else end += r->step(r->ctx, ids, end, cv->max_new > 0 ? cv->max_new - written : cv->seq_len + 1 - end);
        for (; n < end; n++) {
            if (chat_is_end_of_turn(cv->ct, cv->tok, ids[n])) goto done; // the tokenizer's own stops included
            size_t len;
            const char *piece = tokenizer_decode(cv->tok, ids[n - 1], ids[n], &len);
            r->print(r->ctx, piece, len, 0);
            if (append(&cv->reply, &cv->n_reply, &cv->cap_reply, piece, len)) return -1;
            if (++written == cv->max_new) {
                *why_stopped = "-n reached";
                n++;
                goto done;
            }
        }
    }
done:
    if (end > cv->n_cached) cv->n_cached = n < end - 1 ? n : end - 1;
    if (cv->n_cached > cv->n_written) cv->n_written = cv->n_cached;
    r->print(r->ctx, "", 0, 1);
    return written;
}

// A prompt whose run is expected to take longer than this shows its progress.
#define PROGRESS_AFTER_S 0.5

// n with a comma between each group of three digits ("4,211"), into buf; returns buf.
static const char *with_commas(long n, char *buf, size_t size) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%ld", n), at = 0;
    for (int i = 0; i < len && (size_t)at + 2 < size; i++) {
        if (i && (len - i) % 3 == 0) buf[at++] = ',';
        buf[at++] = digits[i];
    }
    buf[at] = 0;
    return buf;
}

// Draws "prompt DONE / TOTAL tokens" over the line's start (width: what was drawn before, to be
// covered); returns the width now drawn. Plain \r and spaces, which every terminal understands.
static int draw_progress(FILE *screen, int width, long done, long total) {
    char a[32], b[32];
    int now =
        fprintf(screen, "\rprompt %s / %s tokens", with_commas(done, a, sizeof a), with_commas(total, b, sizeof b));
    if (now < width) fprintf(screen, "%*s", width - now, "");
    fflush(screen);
    return now;
}

static void erase_progress(FILE *screen, int width) {
    if (!width) return;
    fprintf(screen, "\r%*s\r", width - 1, "");
    fflush(screen);
}

enum { ANSWERED = 0, ANSWER_FAILED = -1, ANSWER_STOPPED = 1 };
// What a terminal is told when Ctrl-C stopped a prompt before its reply (the "]" left to add to).
#define STOPPED_NOTE "[stopped by Ctrl-C while the prompt ran: the conversation is as it was"

// Runs render[keep..n) through the model a batch at a time, drawing its progress on the terminal
// when it takes long; stops between batches at a Ctrl-C. Returns how far it ran: n, or less when
// stopped. The cache then holds render[0..returned) whatever happens.
static int run_prompt(Conversation *cv, const ChatRunner *r, int keep, int n, double t0) {
    int done = keep, width = 0;
    while (done < n && !interrupted) {
        int rows = n - done < cv->batch ? n - done : cv->batch;
        r->forward(r->ctx, cv->render + done, rows, done);
        done += rows;
        double spent = seconds() - t0;
        if (cv->screen && done < n && spent / (done - keep) * (n - keep) > PROGRESS_AFTER_S)
            width = draw_progress(cv->screen, width, done - keep, n - keep);
    }
    if (cv->screen) erase_progress(cv->screen, width);
    memcpy(cv->cached, cv->render, sizeof(int) * (size_t)done);
    cv->n_cached = done;
    cv->n_written = keep == 0 || done > cv->n_written ? done : cv->n_written;
    return done;
}

// One assistant turn for the conversation as it stands (its last message the user's): render,
// run what the cache lacks, write the reply, keep it in the history. ANSWER_FAILED with err on
// failure, or ANSWER_STOPPED when Ctrl-C stopped the prompt: then the conversation is as it was,
// and the cache keeps what it held up to where the render differed, and the part of the prompt run.
static int answer(Conversation *cv, const ChatRunner *r, char *err, size_t errlen) {
    // the turn leaves room for a reply of -n tokens, at most half the context
    int reserve = cv->max_new > 0 && cv->max_new < cv->seq_len / 2 ? cv->max_new : cv->seq_len / 2, dropped;
    const ChatMessage *last = &cv->msgs[cv->n_msgs - 1];
    // a text whose bytes alone need more tokens than there is room for is refused untokenized
    size_t least = chat_min_tokens(cv->tok, last, 1);
    if (least > (size_t)(cv->seq_len - reserve))
        return chat_fail(err, errlen,
                         "the newest turn is %zu bytes, at least %zu tokens, more than the %d the context leaves "
                         "for it (-c, -n)",
                         last->len, least, cv->seq_len - reserve);
    int n = conversation_render(cv, cv->seq_len - reserve, &dropped, err, errlen);
    if (n < 0) return ANSWER_FAILED;
    int keep = reusable_prefix(cv, n);
    double t0 = seconds();
    interrupted = 0;
    // Ctrl-C is let in while the turn runs (between turns it waits for the console's read). It
    // must not cut a write to the terminal short: stdio drops what an interrupted write had left
    // and reports an error. So the handler restarts it there.
    struct sigaction restart = {.sa_handler = on_sigint, .sa_flags = SA_RESTART}, reading;
    sigset_t between_turns;
    if (cv->interactive) sigaction(SIGINT, &restart, &reading), let_sigint_in(1, &between_turns);
    int ran = run_prompt(cv, r, keep, n, t0);
    double t1 = seconds();
    if (ran == n && dropped) {
        drop_messages(cv, cv->msgs[0].role == CHAT_SYSTEM, dropped);
        fprintf(stderr, "[the context is full: the oldest %d message%s dropped]\n", dropped, dropped == 1 ? "" : "s");
    }
    const char *why_stopped;
    long drafted0, accepted0, drafted, accepted;
    int speculating = r->drafts(r->ctx, &drafted0, &accepted0) == 0;
    int written = ran < n ? 0 : write_reply(cv, r, &why_stopped);
    if (cv->interactive) sigprocmask(SIG_SETMASK, &between_turns, NULL), sigaction(SIGINT, &reading, NULL);
    if (ran < n) return ANSWER_STOPPED;
    if (written < 0 || conversation_add(cv, CHAT_ASSISTANT, cv->reply ? cv->reply : "", cv->n_reply))
        return chat_fail(err, errlen, "out of memory");
    double t2 = seconds();
    r->print(r->ctx, "\n\n", 2, 1);
    char drafts[96] = ""; // this reply's share of the speculation, as -m generate's closing line gives it
    if (speculating && !r->drafts(r->ctx, &drafted, &accepted))
        snprintf(drafts, sizeof drafts, "; drafted %ld, accepted %ld (%.1f%%)", drafted - drafted0,
                 accepted - accepted0,
                 drafted > drafted0 ? 100.0 * (accepted - accepted0) / (drafted - drafted0) : 0.0);
    if (!cv->quiet)
        fprintf(stderr, "[prompt: %d tok in %.2f s, %d reused; reply: %d tok, %.1f tok/s%s%s%s]\n", n - keep, t1 - t0,
                keep, written, written > 0 ? written / (t2 - t1) : 0.0, drafts, why_stopped ? "; " : "",
                why_stopped ? why_stopped : "");
    return ANSWERED;
}

long chat_lines_read(void *ctx, const char *prompt, const char *again, char **line) {
    (void)prompt;
    (void)again;
    ChatLines *in = ctx;
    errno = 0;
    ssize_t len = getline(&in->line, &in->cap, in->f ? in->f : stdin);
    if (len < 0) return ferror(in->f ? in->f : stdin) ? CHAT_READ_ERROR : CHAT_END;
    if (len > 0 && in->line[len - 1] == '\n') len--;
    if (len > 0 && in->line[len - 1] == '\r') len--;
    in->line[len] = 0;
    *line = in->line;
    return len;
}

void chat_lines_free(ChatLines *lines) {
    free(lines->line);
    *lines = (ChatLines){0};
}

// ----------------------------------------------------------------------------
// Reading messages: lines, blocks between """ and the commands.

typedef struct {
    const ChatInput *in;
    int interactive;
    long lines; // lines read so far, for the errors of piped input
    char *text; // (cap) the message being gathered
    size_t len, cap;
    char *back; // a block put back on the line by Ctrl-D
} Reader;

static int text_append(Reader *rd, const char *s, size_t n) { return append(&rd->text, &rd->len, &rd->cap, s, n); }

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

static int ends_with_quotes(const char *s, size_t n) { return n >= 3 && !memcmp(s + n - 3, "\"\"\"", 3); }

enum { READ_MESSAGE, READ_END, READ_FAILED };

static int out_of_memory(char *err, size_t errlen) {
    chat_fail(err, errlen, "out of memory");
    return READ_FAILED;
}

// The next message into rd->text: a line that is not blank, or the lines of a """ block joined by
// newlines. again is put back on the line first. READ_FAILED with err on a read error or a block
// left open at the end of input.
static int read_message(Reader *rd, const char *again, char *err, size_t errlen) {
    char *line;
    for (;;) {
        long len = rd->in->read_line(rd->in->ctx, "> ", again, &line);
        again = NULL;
        if (len == CHAT_INTERRUPTED) {
            fputs("[Ctrl-D or /bye ends the conversation]\n", stderr);
            continue;
        }
        if (len == CHAT_END) return READ_END;
        if (len == CHAT_READ_ERROR)
            return chat_fail(err, errlen, "standard input: read error: %s", strerror(errno)), READ_FAILED;
        rd->lines++;
        rd->len = 0;
        if (is_blank(line, (size_t)len)) continue;
        if (strncmp(line, "\"\"\"", 3))
            return text_append(rd, line, (size_t)len) ? out_of_memory(err, errlen) : READ_MESSAGE;
        // a block: the text after the opening quotes, then whole lines up to closing ones, joined
        // by newlines; the opening and closing lines count only for the text beside their quotes
        size_t n = (size_t)len - 3;
        int closed = n >= 3 && ends_with_quotes(line + 3, n), parts = n > 0;
        if (text_append(rd, line + 3, closed ? n - 3 : n)) return out_of_memory(err, errlen);
        while (!closed) {
            len = rd->in->read_line(rd->in->ctx, "... ", NULL, &line);
            if (len == CHAT_INTERRUPTED) break;
            if (len == CHAT_END && rd->interactive && rd->len) {
                // a terminal's Ctrl-D: the block comes back on the line, closed, to be sent or edited
                char *back = realloc(rd->back, rd->len + 7);
                if (!back) return out_of_memory(err, errlen);
                snprintf(back, rd->len + 7, "\"\"\"%s\"\"\"", rd->text);
                again = rd->back = back;
                fputs("[Ctrl-D in a block: the block is back on the line, closed; Enter sends it]\n", stderr);
                break;
            }
            if (len < 0) {
                if (len == CHAT_READ_ERROR)
                    return chat_fail(err, errlen, "standard input: read error: %s", strerror(errno)), READ_FAILED;
                return chat_fail(err, errlen, "standard input: line %ld: the block opened with \"\"\" is not closed",
                                 rd->lines),
                       READ_FAILED;
            }
            rd->lines++;
            closed = ends_with_quotes(line, (size_t)len);
            size_t keep = (size_t)len - (closed ? 3 : 0);
            if (closed && !keep) break;
            if ((parts++ && text_append(rd, "\n", 1)) || text_append(rd, line, keep)) return out_of_memory(err, errlen);
        }
        if (!closed && !again) fputs("[the block was abandoned]\n", stderr);
        if (!closed) continue;
        if (!is_blank(rd->text, rd->len)) return READ_MESSAGE;
    }
}

// ----------------------------------------------------------------------------
// Commands.

const char *const chat_setting_names[] = {"temperature",    "top_p", "top_k",      "min_p",
                                          "repeat_penalty", "seed",  "max_tokens", NULL};

static const char help_text[] =
    "/help, /?          this list\n"
    "/bye, /exit, /quit end the conversation (as Ctrl-D does)\n"
    "/clear             a new conversation; the system prompt stays\n"
    "/system TEXT       the system prompt is TEXT (also /set system TEXT); no TEXT: shows it\n"
    "/clear system      no system prompt (the chat format's default, if it has one)\n"
    "/set NAME VALUE    temperature, top_p, top_k, min_p, repeat_penalty, seed or max_tokens, as the\n"
    "                   flags -t -p -k --min-p -r -s -n take them\n"
    "/show              the model, chat format, context used and left, settings and seed\n"
    "/show system       the system prompt\n"
    "/save FILE         the conversation, in --chat's messages format\n"
    "/load FILE         a conversation saved by /save (or any --chat file) in place of this one\n"
    "/regen             the last reply sampled again\n"
    "/undo              the last exchange dropped\n"
    "/think, /no_think  Qwen3: think before replying, or not (--think, --no-think)\n"
    "//TEXT             sends /TEXT\n"
    "\"\"\" on a line opens a block of lines sent as one message, up to a line ending with \"\"\";\n"
    "a paste is one message as it is. Ctrl-C stops the prompt (the message back on the line) or the reply.\n";

enum { COMMAND_DONE, COMMAND_QUIT, COMMAND_ANSWER };

static void show(const Conversation *cv, const ChatRunner *r) {
    char value[64];
    fprintf(stderr, "model: %s\nchat format: %s%s\ncontext: %d tokens, %d used, %d left\n", cv->model_name,
            chat_family_name(cv->ct->family),
            cv->ct->family == CHAT_QWEN3 ? (cv->ct->no_thinking ? ", thinking off" : ", thinking on") : "", cv->seq_len,
            cv->n_cached, cv->seq_len - cv->n_cached);
    if (cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM)
        fprintf(stderr, "system prompt: %zu bytes (/show system prints it)\n", cv->msgs[0].len);
    else fputs("system prompt: none\n", stderr);
    for (int i = 0; chat_setting_names[i]; i++) {
        r->get(r->ctx, chat_setting_names[i], value, sizeof value);
        fprintf(stderr, "%s %s\n", chat_setting_names[i], value);
    }
}

// Replaces the history with the messages of path; the history stays when they cannot be read.
static int load(Conversation *cv, const char *path, char *err, size_t errlen) {
    ChatMessage *msgs;
    int n;
    if (chat_messages_load(path, NULL, &msgs, &n, err, errlen)) return -1;
    ChatMessage *old = cv->msgs;
    int old_n = cv->n_msgs, old_cap = cv->cap_msgs;
    cv->msgs = msgs;
    cv->n_msgs = cv->cap_msgs = n;
    // a conversation the template cannot render (Llama 2's turns must alternate) is refused now
    if (render_view(cv, cv->msgs, cv->n_msgs, err, errlen) < 0) {
        chat_messages_free(msgs, n);
        cv->msgs = old;
        cv->n_msgs = old_n;
        cv->cap_msgs = old_cap;
        return -1;
    }
    chat_messages_free(old, old_n);
    return 0;
}

static int set_system(Conversation *cv, const char *text, size_t len) {
    if (cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM) drop_messages(cv, 0, 1);
    if (!len) return 0;
    if (conversation_add(cv, CHAT_SYSTEM, text, len)) return -1;
    ChatMessage system = cv->msgs[cv->n_msgs - 1];
    memmove(cv->msgs + 1, cv->msgs, sizeof(ChatMessage) * (size_t)(cv->n_msgs - 1));
    cv->msgs[0] = system;
    return 0;
}

// The system prompt, whole, to stderr: the conversation's, else the default of the chat format's.
static void show_system(const Conversation *cv) {
    if (cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM) fprintf(stderr, "%s\n", cv->msgs[0].text);
    else if (cv->ct->family == CHAT_CHATML && cv->ct->system_len)
        fprintf(stderr, "[no system prompt of the conversation's: the chat format's default is used]\n%s\n",
                cv->ct->system);
    else fputs("[no system prompt; /system TEXT sets one]\n", stderr);
}

// /system TEXT and /set system TEXT set the system prompt; with no TEXT they show it.
static void system_command(Conversation *cv, const char *text) {
    if (!*text) show_system(cv);
    else if (tokenizer_first_non_text(text, strlen(text)) < strlen(text))
        fputs("[/system: the text is not UTF-8]\n", stderr);
    else if (set_system(cv, text, strlen(text))) fputs("[out of memory]\n", stderr);
    else fputs("[the system prompt is set]\n", stderr);
}

// A file name as a shell would take it: ~/ at its start is $HOME/ (the name itself when HOME is
// unset or the result too long, so that the error names what was typed).
static const char *expand_home(const char *name, char *buf, size_t size) {
    const char *home = getenv("HOME");
    if (strncmp(name, "~/", 2) || !home || !*home || (size_t)snprintf(buf, size, "%s%s", home, name + 1) >= size)
        return name;
    return buf;
}

// Runs the command in line (it starts with /, surrounding white space trimmed). COMMAND_ANSWER:
// the conversation now ends with a user message to answer (/regen, /load).
static int command(Conversation *cv, const ChatRunner *r, char *line) {
    char *arg = line + strcspn(line, " \t");
    size_t name_len = (size_t)(arg - line);
    arg += strspn(arg, " \t");
    char err[512];
#define IS(s) (name_len == sizeof s - 1 && !memcmp(line, s, name_len))
    // the commands that take no argument, and those whose argument may only be "system"
    int bare = IS("/bye") || IS("/exit") || IS("/quit") || IS("/help") || IS("/?") || IS("/regen") || IS("/undo") ||
               IS("/think") || IS("/no_think");
    if ((bare && *arg) || ((IS("/clear") || IS("/show")) && *arg && strcmp(arg, "system"))) {
        fprintf(stderr, "[%.*s takes no %s; nothing was done]\n", (int)name_len, line,
                bare ? "argument" : "argument but system");
        return COMMAND_DONE;
    }
    if (IS("/bye") || IS("/exit") || IS("/quit")) return COMMAND_QUIT;
    if (IS("/help") || IS("/?")) fputs(help_text, stderr);
    else if (IS("/clear") && !strcmp(arg, "system")) {
        int had = cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM;
        set_system(cv, "", 0);
        fputs(had ? "[the system prompt is removed]\n" : "[there was no system prompt]\n", stderr);
    } else if (IS("/clear")) {
        drop_messages(cv, cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM,
                      cv->n_msgs - (cv->n_msgs && cv->msgs[0].role == CHAT_SYSTEM));
        fputs("[a new conversation]\n", stderr);
    } else if (IS("/system")) {
        system_command(cv, arg);
    } else if (IS("/set")) {
        char *value = arg + strcspn(arg, " \t");
        if (*value) *value++ = 0;
        value += strspn(value, " \t");
        if (!strcmp(arg, "system")) { // Ollama's spelling
            system_command(cv, value);
            return COMMAND_DONE;
        }
        int known = 0;
        for (int i = 0; chat_setting_names[i]; i++) known |= !strcmp(arg, chat_setting_names[i]);
        if (!known)
            fputs("[/set NAME VALUE: NAME is temperature, top_p, top_k, min_p, repeat_penalty, seed, max_tokens or "
                  "system]\n",
                  stderr);
        else if (!*value) fprintf(stderr, "[/set %s needs a value]\n", arg);
        else if (r->set(r->ctx, arg, value, err, sizeof err)) fprintf(stderr, "[/set %s]\n", err);
        else {
            char now[64]; // as it is now: seed 0 is one from the clock
            r->get(r->ctx, arg, now, sizeof now);
            fprintf(stderr, "[%s is %s]\n", arg, now);
        }
    } else if (IS("/show") && !strcmp(arg, "system")) show_system(cv);
    else if (IS("/show")) show(cv, r);
    else if (IS("/save") || IS("/load")) {
        char home_path[4096];
        arg = (char *)expand_home(arg, home_path, sizeof home_path);
        if (!*arg) fprintf(stderr, "[%.5s needs a file name]\n", line);
        else if (IS("/save") ? chat_messages_save(arg, cv->msgs, cv->n_msgs, err, sizeof err)
                             : load(cv, arg, err, sizeof err))
            fprintf(stderr, "[%.5s: %s]\n", line, err);
        else if (IS("/save"))
            fprintf(stderr, "[%d message%s saved to %s]\n", cv->n_msgs, cv->n_msgs == 1 ? "" : "s", arg);
        else {
            fprintf(stderr, "[%d message%s loaded from %s]\n", cv->n_msgs, cv->n_msgs == 1 ? "" : "s", arg);
            if (cv->n_msgs && cv->msgs[cv->n_msgs - 1].role == CHAT_USER) return COMMAND_ANSWER;
        }
    } else if (IS("/regen")) {
        if (cv->n_msgs && cv->msgs[cv->n_msgs - 1].role == CHAT_ASSISTANT) return COMMAND_ANSWER;
        fputs("[no reply to sample again]\n", stderr);
    } else if (IS("/undo")) {
        int n = cv->n_msgs, from = n;
        if (from && cv->msgs[from - 1].role == CHAT_ASSISTANT) from--;
        if (from && cv->msgs[from - 1].role == CHAT_USER) from--;
        if (from == n) fputs("[nothing to undo]\n", stderr);
        else {
            drop_messages(cv, from, n - from);
            // the cache keeps only what the shorter conversation still starts with
            int k = 0, m = render_view(cv, cv->msgs, cv->n_msgs, err, sizeof err);
            while (k < m && k < cv->n_cached && cv->render[k] == cv->cached[k]) k++;
            cv->n_cached = k;
            fputs("[the last exchange is undone]\n", stderr);
        }
    } else if (IS("/think") || IS("/no_think")) {
        if (cv->ct->family != CHAT_QWEN3)
            fprintf(stderr, "[%s: only the qwen3 chat format thinks; this one is %s]\n", line,
                    chat_family_name(cv->ct->family));
        else {
            cv->ct->no_thinking = IS("/no_think");
            fputs(cv->ct->no_thinking ? "[thinking off]\n" : "[thinking on]\n", stderr);
        }
    } else fputs("[unknown command; /help lists them]\n", stderr);
#undef IS
    return COMMAND_DONE;
}

static void banner(const Conversation *cv, const ChatRunner *r) {
    char seed[32], sampling[256];
    r->get(r->ctx, "seed", seed, sizeof seed);
    r->get(r->ctx, "sampling", sampling, sizeof sampling);
    fprintf(stderr, "attn.c chat: %s, %s format%s, context %d, seed %s\n", cv->model_name,
            chat_family_name(cv->ct->family),
            cv->ct->family == CHAT_QWEN3 ? (cv->ct->no_thinking ? " (thinking off)" : " (thinking on)") : "",
            cv->seq_len, seed);
    // the settings a flag or the model file chose (the rest are ./run's defaults; /show lists all)
    if (*sampling) fprintf(stderr, "sampling: %s\n", sampling);
    fputs("/help for commands, Ctrl-D to quit\n", stderr);
}

int conversation_run(Conversation *cv, const ChatRunner *r, const ChatInput *in, char *err, size_t errlen) {
    // no SA_RESTART: Ctrl-C interrupts the read; blocked but there (console.c) and in turns (answer)
    struct sigaction on_int = {.sa_handler = on_sigint}, before;
    sigset_t mask_before;
    reader = pthread_self();
    if (cv->interactive) sigaction(SIGINT, &on_int, &before), let_sigint_in(0, &mask_before);
    if (cv->interactive && !cv->quiet) banner(cv, r);
    char why[512], *again = NULL;
    Reader rd = {.in = in, .interactive = cv->interactive};
    int rc = 0;
    if (cv->n_msgs && cv->msgs[cv->n_msgs - 1].role == CHAT_USER) {
        int answered = answer(cv, r, why, sizeof why);
        if (answered == ANSWER_FAILED) rc = chat_fail(err, errlen, "the history's last message: %s", why);
        if (answered == ANSWER_STOPPED) fputs(STOPPED_NOTE "]\n", stderr);
    }
    while (rc == 0) {
        int got = read_message(&rd, again, why, sizeof why);
        free(again);
        again = NULL;
        if (got == READ_END) break;
        if (got == READ_FAILED) {
            rc = chat_fail(err, errlen, "%s", why);
            break;
        }
        char *text = rd.text + strspn(rd.text, " \t");
        size_t len = rd.len - (size_t)(text - rd.text);
        if (text[0] == '/' && text[1] != '/') {
            if (in->remember) in->remember(in->ctx, rd.text);
            while (len && (text[len - 1] == ' ' || text[len - 1] == '\t')) text[--len] = 0;
            int what = command(cv, r, text);
            if (what == COMMAND_QUIT) break;
            if (what == COMMAND_DONE) continue;
            ChatMessage last = cv->msgs[cv->n_msgs - 1];
            int regen = last.role == CHAT_ASSISTANT;
            if (regen) cv->n_msgs--; // kept aside: put back if the turn cannot run
            int answered = answer(cv, r, why, sizeof why);
            if (answered != ANSWERED) {
                if (regen) cv->msgs[cv->n_msgs++] = last;
                if (answered == ANSWER_STOPPED) fputs(STOPPED_NOTE "]\n", stderr);
                else fprintf(stderr, "[%s]\n", why);
            } else if (regen) {
                free((char *)last.text);
            }
            continue;
        }
        if (text[0] == '/') text++, len--; // "//" sends one slash
        else text = rd.text, len = rd.len;
        size_t bad = tokenizer_first_non_text(text, len);
        int answered = ANSWER_FAILED;
        if (bad < len) snprintf(why, sizeof why, "%s at byte %zu", text[bad] ? "invalid UTF-8" : "a NUL byte", bad);
        else if (conversation_add(cv, CHAT_USER, text, len)) snprintf(why, sizeof why, "out of memory");
        else if ((answered = answer(cv, r, why, sizeof why)) != ANSWERED) drop_messages(cv, cv->n_msgs - 1, 1);
        else {
            if (in->remember) in->remember(in->ctx, rd.text);
            continue;
        }
        if (in->remember) in->remember(in->ctx, rd.text); // kept, though not sent: a Ctrl-C at the prompt loses it
        if (answered == ANSWER_STOPPED) fputs(STOPPED_NOTE "; the message is back on the line]\n", stderr);
        else if (!cv->interactive) rc = chat_fail(err, errlen, "standard input: line %ld: %s", rd.lines, why);
        else fprintf(stderr, "[that message was not sent: %s]\n", why);
        again = strdup(rd.text); // back on the line, to be edited
    }
    free(again);
    free(rd.text);
    free(rd.back);
    if (cv->screen && rc == 0) fputs("\n", cv->screen), fflush(cv->screen); // the shell's prompt on a line of its own
    if (cv->interactive) sigprocmask(SIG_SETMASK, &mask_before, NULL), sigaction(SIGINT, &before, NULL);
    return rc;
}
