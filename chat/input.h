// chat/input.h: where the turns of ./run -m chat come from, as conversation.c reads them: the
// line editor (chat/console.h) on a terminal, else the lines of a stream (chat/conversation.h).
// Apart from chat.h, whose Tokenizer libedit's header would clash with.
#ifndef ATTN_CHAT_INPUT_H
#define ATTN_CHAT_INPUT_H

// What ChatInput.read_line returns besides a line's length.
enum { CHAT_END = -1, CHAT_READ_ERROR = -2, CHAT_INTERRUPTED = -3 };

// Where the turns come from.
typedef struct {
    void *ctx;
    // One line, without its line ending, NUL-terminated in *line (valid until the next call); a
    // pasted block may hold newlines. On a terminal prompt is shown first and again (NULL: none)
    // is put on the line to be edited. Returns its length, CHAT_END at the end of input,
    // CHAT_READ_ERROR (errno tells) or CHAT_INTERRUPTED (Ctrl-C while waiting).
    long (*read_line)(void *ctx, const char *prompt, const char *again, char **line);
    // A message or command that was taken, for the line editor's history; NULL: none is kept.
    void (*remember)(void *ctx, const char *text);
} ChatInput;

#endif
