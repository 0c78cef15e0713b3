// chat/console.h: the terminal side of ./run -m chat: a line editor (libedit: cursor keys, word
// motions, Ctrl-A/E/K/U/W, history with Up and Down) whose history is kept in a file across
// sessions, and bracketed paste, so that a pasted block, newlines included, is one line. It
// knows nothing of the conversation: conversation.c reads lines from it through a ChatInput.
#ifndef ATTN_CHAT_CONSOLE_H
#define ATTN_CHAT_CONSOLE_H

#include <stddef.h>
#include <stdio.h>

typedef struct Console Console;

// The history file: $XDG_STATE_HOME/attn.c/chat_history, else ~/.local/state/attn.c/chat_history
// (the XDG base directory specification's place for a history); 0, or -1 when neither
// variable is set.
int console_history_path(char *path, size_t size);

// The line editor on the terminal at standard input, drawn on standard output when that is a
// terminal, else on /dev/tty (stderr when there is none), so that a redirected standard output
// holds only the replies; its history read from
// history_path (NULL: no history file; an absent file is an empty history). NULL when out of
// memory or libedit cannot start, with err.
Console *console_open(const char *prog, const char *history_path, char *err, size_t errlen);
void console_close(Console *c);
// The terminal the line editor draws on, for what a conversation shows there and nowhere else.
FILE *console_screen(const Console *c);

// ChatInput's read_line and remember (chat/conversation.h), with ctx the Console. remember adds
// the text to the history and writes the history file whole (a temporary file renamed over it).
long console_read_line(void *ctx, const char *prompt, const char *again, char **line);
void console_remember(void *ctx, const char *text);

#endif
