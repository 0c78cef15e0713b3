// chat/console.c: the line editor of chat/console.h, on libedit.
#include "console.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>
#include "../io/files.h"
#include "input.h"

// What a terminal sends around a paste once bracketed paste is on (xterm's protocol).
#define PASTE_ON "\033[?2004h"
#define PASTE_OFF "\033[?2004l"
#define PASTE_START "[200~" // after ESC
#define PASTE_END "[201~"
// The key the reader hands libedit when a paste has arrived; bound to insert it whole. Ctrl-^
// is bound to nothing else, and pressed alone it inserts an empty paste.
#define PASTE_KEY 036
// How long the rest of an escape sequence may take to arrive after its ESC.
#define ESCAPE_WAIT_MS 50
#define HISTORY_SIZE 1000

struct Console {
    EditLine *el;
    FILE *screen;      // where the editor draws: stdout on a terminal, else the terminal itself
    int screen_opened; // screen is /dev/tty, opened here
    int plain;         // TERM is dumb or unset: no escape codes of the console's own
    History *hist;
    char *history_path; // NULL: none kept
    int history_failed; // said once: the file could not be written
    const char *prompt;
    unsigned char in[4096]; // bytes read from the terminal, in[pos..len) not yet handed on
    size_t pos, len;
    char *paste; // (cap) the last paste, NUL-terminated, line endings as \n
    size_t paste_len, paste_cap;
    int paste_waiting; // paste holds text for the line before anything is read (a refused message)
    char *line;        // (line_cap) the last line read
    size_t line_cap;
};

// The terminal's settings before the console changed them, put back at exit however it comes.
static struct termios terminal_before;
static int terminal_saved;

// Set by the handlers of Ctrl-Z's stop and of a resized window: the line is to be drawn again.
static volatile sig_atomic_t continued, resized;
static volatile sig_atomic_t editing; // el_gets has the terminal: bracketed paste is on
static int screen_fd = -1;            // the console's screen, for the handlers' writes
static int plain_screen;              // the console's plain: no escape codes
static struct sigaction stop_before, winch_before;

static void write_screen(const char *s) {
    if (screen_fd >= 0 && write(screen_fd, s, strlen(s)) < 0) return; // nothing to do about it here
}

// Ctrl-Z: the terminal goes back to the shell's settings (which the shell does not restore), then
// the process stops; at fg the console's mode comes back and the line is drawn again.
static void on_stop(int sig) {
    int saved_errno = errno;
    struct termios now;
    int have = terminal_saved && !tcgetattr(STDIN_FILENO, &now);
    if (terminal_saved) tcsetattr(STDIN_FILENO, TCSADRAIN, &terminal_before);
    if (editing && !plain_screen) write_screen(PASTE_OFF);
    struct sigaction stop = {.sa_handler = SIG_DFL}, mine;
    sigaction(sig, &stop, &mine);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(sig); // stopped here until fg
    sigaction(sig, &mine, NULL);
    if (have) tcsetattr(STDIN_FILENO, TCSADRAIN, &now);
    if (editing && !plain_screen) write_screen(PASTE_ON);
    continued = 1;
    errno = saved_errno;
}

static void on_winch(int sig) {
    (void)sig;
    resized = 1;
}

static void restore_terminal(void) {
    if (terminal_saved) tcsetattr(STDIN_FILENO, TCSANOW, &terminal_before);
}

// Between lines (while a reply streams, and while libedit draws its prompt before it takes the
// terminal) keys typed ahead are kept as they are, not echoed into the reply nor edited by the
// terminal's own line discipline (which would take Ctrl-U, Ctrl-W and Ctrl-D itself); Ctrl-C still
// signals. libedit returns the terminal to terminal_before at the end of each line.
static void hold_keys(void) {
    struct termios t = terminal_before;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    if (terminal_saved) tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

int console_history_path(char *path, size_t size) {
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (state && *state) snprintf(path, size, "%s/attn.c/chat_history", state);
    else if (home && *home) snprintf(path, size, "%s/.local/state/attn.c/chat_history", home);
    else return -1;
    return 0;
}

// After fg the line is drawn again where the shell left the cursor; after a resize it is drawn
// again at the new width on a fresh row (the terminal has cut or rewrapped the old one, which
// libedit cannot know), the rows below cleared.
static void redraw(Console *c) {
    if (!continued && !resized) return;
    if (resized) {
        el_resize(c->el);
        fputs(c->plain ? "\r\n" : "\r\n\033[J", c->screen);
    } else {
        fputs("\r", c->screen);
    }
    fflush(c->screen);
    continued = resized = 0;
    el_set(c->el, EL_REFRESH);
}

// Reads more of the terminal's bytes into c->in: 1, or 0 at the end of input or when none came
// within timeout_ms (-1: wait), or -1 when a signal interrupted the wait (errno EINTR). SIGINT is
// let in only while it waits: a conversation keeps it blocked between replies, so that a Ctrl-C
// typed while the prompt is drawn waits here rather than landing before the wait and being missed
// (the terminal has already dropped the keys typed before it).
static int fill(Console *c, int timeout_ms) {
    if (c->pos) {
        memmove(c->in, c->in + c->pos, c->len - c->pos);
        c->len -= c->pos;
        c->pos = 0;
    }
    if (c->len == sizeof c->in) return 1;
    sigset_t waiting;
    sigprocmask(SIG_SETMASK, NULL, &waiting);
    sigdelset(&waiting, SIGINT);
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(STDIN_FILENO, &fds);
    struct timespec wait = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L};
    int ready = pselect(STDIN_FILENO + 1, &fds, NULL, NULL, timeout_ms < 0 ? NULL : &wait, &waiting);
    if (ready < 0) return errno == EINTR ? -1 : 0;
    if (ready == 0) return 0;
    ssize_t n = read(STDIN_FILENO, c->in + c->len, sizeof c->in - c->len);
    if (n < 0) return errno == EINTR ? -1 : 0;
    c->len += (size_t)n;
    return n > 0;
}

// The next byte from the terminal, waiting for it: 0..255, or what fill returned (0, -1) when
// there is none.
static int next_byte(Console *c) {
    while (c->pos == c->len) {
        redraw(c);
        int got = fill(c, -1);
        if (got < 0 && (continued || resized)) continue; // the wait was cut by Ctrl-Z or a resize
        if (got <= 0) return got == 0 ? -2 : -1;
    }
    return c->in[c->pos++];
}

// Whether the bytes still to come start with s, waiting briefly for the rest of a sequence; the
// bytes stay unread.
static int coming(Console *c, const char *s) {
    size_t k = strlen(s);
    for (;;) {
        size_t have = c->len - c->pos, m = have < k ? have : k;
        if (memcmp(c->in + c->pos, s, m)) return 0;
        if (have >= k) return 1;
        if (fill(c, ESCAPE_WAIT_MS) <= 0) return 0;
    }
}

static int paste_put(Console *c, char ch) {
    if (c->paste_len + 2 > c->paste_cap) {
        size_t cap = 2 * c->paste_len + 4096;
        char *bigger = realloc(c->paste, cap);
        if (!bigger) return -1;
        c->paste = bigger;
        c->paste_cap = cap;
    }
    c->paste[c->paste_len++] = ch;
    c->paste[c->paste_len] = 0;
    return 0;
}

// The paste's bytes up to ESC[201~, into c->paste; a terminal sends its line endings as \r, which
// become \n (\r\n one \n). NUL bytes, which no line can hold, are dropped. 0, or -1 when the
// input ended or failed first.
static int read_paste(Console *c) {
    c->paste_len = 0;
    int prev = 0;
    for (;;) {
        int b = next_byte(c);
        if (b < 0) return -1;
        if (b == 033 && coming(c, PASTE_END)) {
            c->pos += strlen(PASTE_END);
            return 0;
        }
        int skip = b == 0 || (b == '\n' && prev == '\r');
        if (!skip && paste_put(c, b == '\r' ? '\n' : (char)b)) return -1;
        prev = b;
    }
}

// The lead byte's sequence length in UTF-8 (1..4), 0 for a byte no character starts with.
static int utf8_length(unsigned b) {
    return b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b <= 0xF4 ? 4 : 0;
}

// The character at s[0..n) into *wc: the bytes it takes, 1 at least. An invalid or cut sequence
// becomes U+FFFD, for its valid part only, the rest left for the next character.
static size_t utf8_decode(const unsigned char *s, size_t n, wchar_t *wc) {
    int len = utf8_length(s[0]);
    unsigned cp = len == 1 ? s[0] : len == 2 ? s[0] & 31u : len == 3 ? s[0] & 15u : s[0] & 7u;
    *wc = 0xFFFD;
    if (!len) return 1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n || (s[i] & 0xC0) != 0x80) return (size_t)i;
        cp = cp << 6 | (s[i] & 63u);
    }
    *wc = (wchar_t)cp;
    return (size_t)len;
}

// The console's key bindings. An escape sequence (CSI or SS3) that is not among them is dropped
// whole, where libedit would insert its tail ("~" for Insert, "A" for Shift-Up).
static const char *const bindings[][2] = {
    {"\036", "attn-paste"},
    {"^D", "attn-delete-or-end"},
    {"^R", "em-inc-search-prev"},  // search the history, as in a shell
    {"^W", "ed-delete-prev-word"}, // as in a shell, not emacs's kill-region
    {"^U", "vi-kill-line-prev"},   // the line before the cursor, as in a shell
    {"\033[A", "ed-prev-history"}, // Up, Down, Right, Left
    {"\033[B", "ed-next-history"},
    {"\033[C", "ed-next-char"},
    {"\033[D", "ed-prev-char"},
    {"\033OA", "ed-prev-history"}, // the same in the terminal's application mode
    {"\033OB", "ed-next-history"},
    {"\033OC", "ed-next-char"},
    {"\033OD", "ed-prev-char"},
    {"\033[1;5D", "ed-prev-word"}, // Ctrl-Left
    {"\033[1;5C", "em-next-word"}, // Ctrl-Right
    {"\033[H", "ed-move-to-beg"},  // Home, in its three spellings
    {"\033OH", "ed-move-to-beg"},
    {"\033[1~", "ed-move-to-beg"},
    {"\033[F", "ed-move-to-end"}, // End
    {"\033OF", "ed-move-to-end"},
    {"\033[4~", "ed-move-to-end"},
    {"\033[3~", "ed-delete-next-char"}, // Delete
};

// How many bytes after an ESC just read make a CSI (ESC [ parameters final) or SS3 (ESC O x)
// sequence, waiting briefly for them; 0 when they make none (Alt-b is ESC b).
static size_t sequence_length(Console *c) {
    for (size_t k = 0; k < 32; k++) {
        while (c->len - c->pos <= k)
            if (fill(c, ESCAPE_WAIT_MS) <= 0) return 0;
        unsigned ch = c->in[c->pos + k];
        if (k == 0 && ch != '[' && ch != 'O') return 0;
        if (k > 0 && (c->in[c->pos] == 'O' || (ch >= 0x40 && ch <= 0x7E))) return k + 1;
        if (k > 0 && (ch < 0x20 || ch > 0x3F)) return 0;
    }
    return 0;
}

// Whether ESC followed by seq[0..n) is a key of bindings.
static int bound(const unsigned char *seq, size_t n) {
    for (size_t i = 0; i < sizeof bindings / sizeof *bindings; i++)
        if (bindings[i][0][0] == 033 && strlen(bindings[i][0]) == n + 1 && !memcmp(bindings[i][0] + 1, seq, n))
            return 1;
    return 0;
}

// libedit's read function (EL_GETCFN): the terminal's next character, UTF-8 decoded, with a
// bracketed paste gathered whole and handed on as PASTE_KEY. 1, 0 at the end of input, -1 on
// an error or a signal (errno says which).
static int read_char(EditLine *el, wchar_t *wc) {
    Console *c;
    el_get(el, EL_CLIENTDATA, &c);
    if (c->paste_waiting) {
        c->paste_waiting = 0;
        *wc = PASTE_KEY;
        return 1;
    }
    int b;
    for (;;) {
        b = next_byte(c);
        if (b < 0) return b == -1 ? -1 : 0;
        if (b == 033 && coming(c, PASTE_START)) {
            c->pos += strlen(PASTE_START);
            if (read_paste(c)) return errno == EINTR ? -1 : 0;
            *wc = PASTE_KEY;
            return 1;
        }
        size_t n = b == 033 ? sequence_length(c) : 0;
        if (!n || bound(c->in + c->pos, n)) break;
        c->pos += n; // a key the console does not know (Insert, F5, Shift-Up): ignored
    }
    if (b < 0x80) {
        *wc = b;
        return 1;
    }
    // the rest of a character typed in several bytes may take a moment to arrive (b is still in
    // c->in: only an ESC's look-ahead refills it)
    c->pos--;
    size_t want = (size_t)utf8_length((unsigned)b);
    while (c->len - c->pos < want && fill(c, ESCAPE_WAIT_MS) > 0) {}
    c->pos += utf8_decode(c->in + c->pos, c->len - c->pos, wc); // typed invalid bytes show as U+FFFD
    return 1;
}

// Bound to Ctrl-D: on an empty line the end of input, without the ^D libedit's own binding
// echoes; else the character under the cursor deleted (at the end of the line, a beep).
static unsigned char delete_or_end(EditLine *el, int ch) {
    (void)ch;
    const LineInfoW *line = el_wline(el);
    if (line->buffer == line->lastchar) return CC_EOF;
    if (line->cursor == line->lastchar) return CC_ERROR;
    el_cursor(el, 1);
    el_deletestr(el, 1);
    return CC_REFRESH;
}

// Bound to PASTE_KEY: the paste goes in at the cursor as it is, decoded as typed characters are
// (invalid UTF-8 as U+FFFD), so that a paste and the same bytes typed give the same line.
static unsigned char insert_paste(EditLine *el, int ch) {
    (void)ch;
    Console *c;
    el_get(el, EL_CLIENTDATA, &c);
    wchar_t *text = malloc(sizeof(wchar_t) * (c->paste_len + 1));
    size_t n = 0;
    for (size_t at = 0; text && at < c->paste_len; n++)
        at += utf8_decode((const unsigned char *)c->paste + at, c->paste_len - at, &text[n]);
    if (text) text[n] = 0;
    int failed = c->paste_len && (!text || el_winsertstr(el, text));
    if (failed) fprintf(stderr, "\n[the paste of %zu bytes could not go on the line: out of memory]\n", c->paste_len);
    free(text);
    c->paste_len = 0;
    return failed ? CC_REDISPLAY : CC_REFRESH;
}

static char *prompt_of(EditLine *el) {
    Console *c;
    el_get(el, EL_CLIENTDATA, &c);
    return (char *)c->prompt;
}

// The terminal to draw on: stdout when it is one; else (stdout a file or a pipe, which gets only
// the replies) the process's terminal, else stderr.
static FILE *open_screen(int *opened) {
    *opened = 0;
    if (isatty(STDOUT_FILENO)) return stdout;
    FILE *tty = fopen("/dev/tty", "w");
    if (tty) *opened = 1;
    return tty ? tty : stderr;
}

Console *console_open(const char *prog, const char *history_path, char *err, size_t errlen) {
    // libedit decodes and encodes the line in the locale's character set: UTF-8, as the model's
    // text is, even where the environment names none
    setlocale(LC_CTYPE, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8")) setlocale(LC_CTYPE, "C.UTF-8");
    Console *c = calloc(1, sizeof *c);
    if (c) c->screen = open_screen(&c->screen_opened);
    if (!c || !(c->hist = history_init()) || !(c->el = el_init(prog, stdin, c->screen, stderr))) {
        snprintf(err, errlen, "the line editor (libedit) cannot start");
        console_close(c);
        return NULL;
    }
    HistEvent ev;
    history(c->hist, &ev, H_SETSIZE, HISTORY_SIZE);
    history(c->hist, &ev, H_SETUNIQUE, 1);
    if (history_path) {
        c->history_path = strdup(history_path);
        history(c->hist, &ev, H_LOAD, history_path); // an absent or unreadable file: an empty history
    }
    EditLine *el = c->el;
    el_set(el, EL_CLIENTDATA, c);
    el_set(el, EL_EDITOR, "emacs");
    el_set(el, EL_PROMPT, prompt_of);
    el_set(el, EL_HIST, history, c->hist);
    el_set(el, EL_GETCFN, read_char);
    // the wide call: el_set's narrow EL_ADDFN copies the two strings and never frees them
    el_wset(el, EL_ADDFN, L"attn-paste", L"insert a bracketed paste", insert_paste);
    el_wset(el, EL_ADDFN, L"attn-delete-or-end", L"end the input on an empty line, else delete", delete_or_end);
    for (size_t i = 0; i < sizeof bindings / sizeof *bindings; i++)
        el_set(el, EL_BIND, bindings[i][0], bindings[i][1], NULL);
    el_source(el, NULL); // the user's ~/.editrc, as every libedit program reads it
    if (!terminal_saved && !tcgetattr(STDIN_FILENO, &terminal_before)) {
        terminal_saved = 1;
        atexit(restore_terminal);
    }
    hold_keys();
    c->plain = !getenv("TERM") || !*getenv("TERM") || !strcmp(getenv("TERM"), "dumb");
    screen_fd = fileno(c->screen);
    plain_screen = c->plain;
    // SA_RESTART: a reply's writes go on; the console's wait for a key is cut short all the same
    struct sigaction stop = {.sa_handler = on_stop, .sa_flags = SA_RESTART},
                     winch = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
    sigaction(SIGTSTP, &stop, &stop_before);
    sigaction(SIGWINCH, &winch, &winch_before);
    return c;
}

FILE *console_screen(const Console *c) { return c->screen; }

void console_close(Console *c) {
    if (!c) return;
    if (c->el) sigaction(SIGTSTP, &stop_before, NULL), sigaction(SIGWINCH, &winch_before, NULL);
    screen_fd = -1;
    restore_terminal();
    if (c->el) el_end(c->el);
    if (c->hist) history_end(c->hist);
    free(c->history_path);
    free(c->paste);
    free(c->line);
    if (c->screen_opened) fclose(c->screen);
    free(c);
}

long console_read_line(void *ctx, const char *prompt, const char *again, char **line) {
    Console *c = ctx;
    c->prompt = prompt;
    // the text goes in as a paste would, el_gets starting each line empty
    c->paste_len = 0;
    for (const char *p = again; p && *p; p++)
        if (paste_put(c, *p)) break;
    c->paste_waiting = c->paste_len > 0;
    if (!c->plain) fputs(PASTE_ON, c->screen);
    fflush(c->screen);
    int count;
    errno = 0;
    continued = resized = 0;
    editing = 1;
    const char *got = el_gets(c->el, &count);
    int e = errno;
    editing = 0;
    hold_keys();
    if (!c->plain) fputs(PASTE_OFF, c->screen);
    fflush(c->screen);
    if (!got && count < 0 && e == EINTR) {
        el_reset(c->el);
        fputs("\n", c->screen);
        return CHAT_INTERRUPTED;
    }
    if (!got || count <= 0) {
        errno = e;
        return count < 0 ? CHAT_READ_ERROR : CHAT_END;
    }
    size_t len = strlen(got);
    if (len + 1 > c->line_cap) {
        char *bigger = realloc(c->line, len + 1);
        if (!bigger) {
            errno = ENOMEM;
            return CHAT_READ_ERROR;
        }
        c->line = bigger;
        c->line_cap = len + 1;
    }
    memcpy(c->line, got, len + 1);
    if (len && c->line[len - 1] == '\n') c->line[--len] = 0;
    *line = c->line;
    return (long)len;
}

// The entries of a history file past which the next line written rewrites it with its newest
// HISTORY_SIZE entries, so that it does not grow for ever.
#define HISTORY_FILE_MAX (2 * HISTORY_SIZE)

static void write_history(Sink *s, const void *ctx) {
    History *h = (History *)ctx;
    int fd = dup(s->fd);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    HistEvent ev;
    if (!f || history(h, &ev, H_SAVE_FP, f) < 0 || fflush(f)) s->err = errno ? errno : EIO;
    if (f) fclose(f);
    else if (fd >= 0) close(fd);
}

// mkdir -p of the directories above path, private to the user as a history is.
static void make_parents(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(dir, 0700);
        *p = '/';
    }
}

// Appends text to the history file under an exclusive flock, as
// readline's append_history does, so that sessions running at once keep each other's lines in
// the order typed; past HISTORY_FILE_MAX entries the file is rewritten (renamed over, still
// under the lock) with its newest HISTORY_SIZE. 0, or -1 with err.
static int append_history(Console *c, const char *text, char *err, size_t errlen) {
    const char *path = c->history_path;
    for (;;) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0 || flock(fd, LOCK_EX)) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        struct stat held, named;
        // the file another session's rewrite renamed away while this one waited: open the new one
        if (fstat(fd, &held) || stat(path, &named) || held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
            close(fd);
            continue;
        }
        FILE *f = fdopen(fd, "a");
        HistEvent ev;
        // the entry alone, in libedit's encoding, through a history of one; libedit writes its
        // header when the stream is at 0, and an append stream starts there until it is moved
        History *one = history_init();
        int failed = !f || !one || history(one, &ev, H_SETSIZE, 1) < 0 || history(one, &ev, H_ENTER, text) < 0 ||
                     fseek(f, 0, SEEK_END) || history(one, &ev, H_SAVE_FP, f) < 0 || fflush(f);
        if (one) history_end(one);
        if (failed) snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
        History *all = failed ? NULL : history_init();
        if (all && history(all, &ev, H_LOAD, path) > HISTORY_FILE_MAX) {
            history(all, &ev, H_CLEAR);
            history(all, &ev, H_SETSIZE, HISTORY_SIZE);
            history(all, &ev, H_LOAD, path);
            failed = write_atomic(path, write_history, all, err, errlen);
        }
        if (all) history_end(all);
        if (f) fclose(f); // the lock goes with the descriptor
        else close(fd);
        return failed ? -1 : 0;
    }
}

void console_remember(void *ctx, const char *text) {
    Console *c = ctx;
    HistEvent ev;
    // a line the same as the last is not entered again (H_SETUNIQUE), nor written again
    int repeated = history(c->hist, &ev, H_FIRST) == 0 && !strcmp(ev.str, text);
    history(c->hist, &ev, H_ENTER, text);
    if (!c->history_path || c->history_failed || repeated) return;
    char err[512];
    make_parents(c->history_path);
    if (append_history(c, text, err, sizeof err)) {
        fprintf(stderr, "[the history is not kept: %s]\n", err);
        c->history_failed = 1;
    }
}
