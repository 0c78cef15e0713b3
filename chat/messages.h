// chat/messages.h: a conversation in the messages format of Hugging Face's apply_chat_template,
//   [{"role": "system" | "user" | "assistant", "content": "..."}, ...]
// read by a small strict JSON reader: the file is one array of such objects and nothing else
// (no other keys, no nested content, no trailing bytes), UTF-8 throughout, with JSON's escapes
// (\uXXXX surrogate pairs included) and no NUL in any text.
#ifndef ATTN_CHAT_MESSAGES_H
#define ATTN_CHAT_MESSAGES_H

#include <stddef.h>
#include "chat.h"

// Parses len bytes of json, named name in errors. On success *msgs holds *n messages whose texts
// are malloc'd and NUL-terminated (free with chat_messages_free); otherwise -1 with one line in
// err naming name, the line and column or the message, and the problem.
int chat_messages_parse(const char *name, const char *json, size_t len, ChatMessage **msgs, int *n, char *err,
                        size_t errlen);
// Reads and parses the file at path (none when path is NULL); with system not NULL (-y), a system
// message of that text goes first, refused when the file has one.
int chat_messages_load(const char *path, const char *system, ChatMessage **msgs, int *n, char *err, size_t errlen);
void chat_messages_free(ChatMessage *msgs, int n);
// Writes the messages to path in the same format, one per line (what chat_messages_parse reads
// back to the same texts), whole or not at all; 0, or -1 with one line in err.
int chat_messages_save(const char *path, const ChatMessage *msgs, int n, char *err, size_t errlen);

#endif
