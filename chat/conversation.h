// chat/conversation.h: the conversation of ./run -m chat. Turns come from a terminal or, one per
// line, from standard input; replies stream to stdout. The KV cache is kept across turns: each
// turn renders the whole conversation (chat_render), finds the longest common prefix with the ids
// already in the cache and runs only the rest, so that what the model sees is always exactly the
// template's tokens. When the context fills, the oldest turns are dropped (the system prompt and
// the newest turn stay). Nothing here touches the model: a ChatRunner does.
#ifndef ATTN_CHAT_CONVERSATION_H
#define ATTN_CHAT_CONVERSATION_H

#include <stddef.h>
#include "chat.h"

// What the conversation needs from the program that holds the model.
typedef struct {
    void *ctx;
    // Runs ids[0..n) through the model at positions pos0.., keeping the last one's logits.
    void (*forward)(void *ctx, const int *ids, int n, int pos0);
    // The next token drawn from the kept logits; history holds the n ids before it.
    int (*sample)(void *ctx, const int *history, int n);
    // Writes reply bytes to stdout, safe for a terminal; flush ends a reply.
    void (*print)(void *ctx, const char *piece, size_t len, int flush);
} ChatRunner;

typedef struct {
    const ChatTemplate *ct;
    const Tokenizer *tok;
    int seq_len;       // positions in the KV cache
    int rewind_limit;  // how far back the cache can be rewound (ring caches), or seq_len
    int max_new;       // tokens a reply may have; 0: until end-of-turn or the context is full
    int interactive;   // a terminal: a prompt marker, Ctrl-C stops a reply, bad turns are refused and skipped
    ChatMessage *msgs; // (n_msgs) the history; each text malloc'd, NUL-terminated
    int n_msgs, cap_msgs;
    int *cached; // (seq_len) the ids whose keys and values are in the cache, at positions 0..n_cached-1
    int n_cached;
    int *render; // (cap_render) the conversation as chat_render writes it
    size_t cap_render;
    char *reply; // (cap_reply) the reply being written, as decoded bytes
    size_t n_reply, cap_reply;
} Conversation;

// Zeroes cv and allocates its cache of ids; 0, or -1 when out of memory.
int conversation_init(Conversation *cv, const ChatTemplate *ct, const Tokenizer *tok, int seq_len);
// Appends a message (its text copied); 0, or -1 when out of memory.
int conversation_add(Conversation *cv, int role, const char *text, size_t len);
void conversation_free(Conversation *cv);

// Renders the conversation with the generation prompt into cv->render, dropping the oldest
// turns until at most max_tokens ids remain (*dropped: how many messages went). Returns the
// id count, or -1 with one line in err (the newest turn alone is too long, or chat_render failed).
int conversation_render(Conversation *cv, int max_tokens, int *dropped, char *err, size_t errlen);

// Reads turns until end of input or /bye, answering each; a history ending with a user message
// is answered first. Returns 0, or -1 with one line in err (a bad turn when not interactive).
int conversation_run(Conversation *cv, const ChatRunner *runner, char *err, size_t errlen);

#endif
