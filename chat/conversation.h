// chat/conversation.h: the conversation of ./run -m chat. Turns come from a ChatInput (the line
// editor of chat/console.h on a terminal, else the lines of standard input); replies stream to
// stdout; a line that starts with / is a command (/help lists them), and what the commands and
// the status notes say goes to stderr. The KV cache is kept across turns: each
// turn renders the whole conversation (chat_render), finds the longest common prefix with the ids
// already in the cache and runs only the rest, so that what the model sees is always exactly the
// template's tokens. When the context fills, the oldest turns are dropped (the system prompt and
// the newest turn stay). Nothing here touches the model: a ChatRunner does.
#ifndef ATTN_CHAT_CONVERSATION_H
#define ATTN_CHAT_CONVERSATION_H

#include <stddef.h>
#include <stdio.h>
#include "chat.h"
#include "input.h"

// What the conversation needs from the program that holds the model.
typedef struct {
    void *ctx;
    // Runs ids[0..n) through the model at positions pos0.., keeping the last one's logits.
    void (*forward)(void *ctx, const int *ids, int n, int pos0);
    // The next token drawn from the kept logits; history holds the n ids before it.
    int (*sample)(void *ctx, const int *history, int n);
    // Runs ids[n - 1], drawn but not yet in the cache, and draws what follows into ids[n..): at
    // least 1 and at most room tokens (a speculative round keeps several), the cache then holding
    // all but the last of them; returns how many. ids has room for seq_len + 1.
    int (*step)(void *ctx, int *ids, int n, int room);
    // The tokens speculative decoding drafted and accepted so far: 0, or -1 when it is off.
    int (*drafts)(void *ctx, long *drafted, long *accepted);
    // Writes reply bytes to stdout, safe for a terminal; flush ends a reply.
    void (*print)(void *ctx, const char *piece, size_t len, int flush);
    // /set NAME VALUE for a name of chat_setting_names, checked as its flag is; 0, or -1 with err.
    int (*set)(void *ctx, const char *name, const char *value, char *err, size_t errlen);
    // A setting's current value as text, into buf (for /show and the banner).
    void (*get)(void *ctx, const char *name, char *buf, size_t size);
} ChatRunner;

// The settings /set changes, NULL-terminated: temperature, top_p, top_k, min_p, repeat_penalty,
// seed, max_tokens.
extern const char *const chat_setting_names[];

// The lines of a stream (standard input when it is not a terminal): a ChatInput with ctx
// pointing at a zeroed ChatLines, freed with chat_lines_free.
typedef struct {
    FILE *f;
    char *line;
    size_t cap;
} ChatLines;
long chat_lines_read(void *ctx, const char *prompt, const char *again, char **line);
void chat_lines_free(ChatLines *lines);

typedef struct {
    ChatTemplate *ct; // its no_thinking follows /think and /no_think
    const Tokenizer *tok;
    int seq_len;            // positions in the KV cache
    int rewind_limit;       // how far back from n_written the cache can be rewound (ring caches), or seq_len
    int max_new;            // tokens a reply may have; 0: until end-of-turn or the context is full
    int batch;              // prompt rows run at once: Ctrl-C is seen, and the progress drawn, between batches
    FILE *screen;           // the terminal the prompt is drawn on, for a long prompt's progress; NULL: none
    int interactive;        // a terminal: a prompt marker, Ctrl-C stops a reply, bad turns are refused and skipped
    int quiet;              // -q: no banner and no timings after each reply
    const char *model_name; // the model file, for the banner and /show
    ChatMessage *msgs;      // (n_msgs) the history; each text malloc'd, NUL-terminated
    int n_msgs, cap_msgs;
    int *cached; // (seq_len + 1) the ids whose keys and values are in the cache, at positions 0..n_cached-1
    int n_cached;
    int n_written; // the furthest positions written since the cache last ran from 0: /undo leaves rows past n_cached
    int *render;   // (cap_render) the conversation as chat_render writes it
    size_t cap_render;
    char *reply; // (cap_reply) the reply being written, as decoded bytes
    size_t n_reply, cap_reply;
} Conversation;

// Zeroes cv and allocates its cache of ids; 0, or -1 when out of memory.
int conversation_init(Conversation *cv, ChatTemplate *ct, const Tokenizer *tok, int seq_len);
// Appends a message (its text copied); 0, or -1 when out of memory.
int conversation_add(Conversation *cv, int role, const char *text, size_t len);
void conversation_free(Conversation *cv);

// Renders the conversation with the generation prompt into cv->render, leaving out the oldest
// turns until at most max_tokens ids remain (*dropped: how many messages, from the one after the
// system prompt, the render left out; the history still holds them). Returns the id count, or -1
// with one line in err (the newest turn alone is too long, or chat_render failed).
int conversation_render(Conversation *cv, int max_tokens, int *dropped, char *err, size_t errlen);

// Reads turns from in until its end or /bye, answering each; a history ending with a user
// message is answered first. Empty and blank lines are skipped; a line starting with """ opens
// a block of lines, up to one ending with """, sent as one message. Returns 0, or -1 with one
// line in err (a bad turn when not interactive).
int conversation_run(Conversation *cv, const ChatRunner *runner, const ChatInput *in, char *err, size_t errlen);

#endif
