// chat/chat.h: an instruct model's chat format, as its Jinja chat template renders a
// conversation, by one C formatter per family (there is no Jinja engine here, as in llama.cpp).
//
// The model file's chat section (docs/FORMAT.md) names the family, the special token ids the
// family writes, and a text whose meaning is the family's (below). Special tokens go in by id;
// every other byte, the template's own text and the messages alike, is encoded without
// TOKE_SPECIAL, so that what a user types never becomes a control token. Text between two
// special tokens is encoded as one run, as Hugging Face tokenizes the rendered string.
#ifndef ATTN_CHAT_H
#define ATTN_CHAT_H

#include <stddef.h>
#include "../tokenizer.h"

// The families, and the ids each one's section holds, in order:
// CHATML (SmolLM2, Qwen2.5): <|im_start|>, <|im_end|>; text: the system prompt used when the
//   conversation has none (may be empty: then no system turn).
// QWEN3: <|im_start|>, <|im_end|>; ChatML without a default system prompt, and the assistant's
//   history with its <think> block dropped as Qwen3's template does; text empty.
// LLAMA3: <|begin_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|>; text: the
//   preamble of the system turn (Llama 3.1/3.2's knowledge and date lines, "{date}" standing for
//   today's date as strftime "%d %b %Y"); with one, a system turn is always written.
// LLAMA2: <s>, </s>: Meta's [INST] and <<SYS>> format, BOS and EOS around each exchange; text empty.
// GEMMA: <bos>, <start_of_turn>, <end_of_turn>; the system folded into the first user turn and
//   the assistant named "model"; text empty.
// ZEPHYR (TinyLlama): <s>, </s>: <|user|> / <|system|> / <|assistant|> as text, each turn ended
//   by </s>, BOS first as the tokenizer adds it; text empty.
// MISTRAL (Mixtral-8x7B-Instruct, Mistral-7B-Instruct v0.1/v0.2): <s>, </s>: " [INST] " and
//   " [/INST]" as text, the system prompt before the first user message, each reply ended by </s>;
//   text empty.
// CHAT_NONE (version 5): no family; the section keeps the template's source only.
enum {
    CHAT_NONE,
    CHAT_CHATML,
    CHAT_QWEN3,
    CHAT_LLAMA3,
    CHAT_LLAMA2,
    CHAT_GEMMA,
    CHAT_ZEPHYR,
    CHAT_MISTRAL,
    CHAT_KINDS
};
enum { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT };
#define CHAT_MAX_IDS 16
#define CHAT_MAX_SYSTEM (1 << 20) // bytes of a section's text

typedef struct {
    int role; // CHAT_SYSTEM, CHAT_USER or CHAT_ASSISTANT
    const char *text;
    size_t len;
} ChatMessage;

typedef struct {
    int family;
    int n_ids;
    int ids[CHAT_MAX_IDS];
    char *system; // the section's text, NUL-terminated (owned)
    size_t system_len;
    char *jinja; // version 5: the Jinja template's source, NUL-terminated (owned); NULL before
    size_t jinja_len;
    // QWEN3: the generation prompt closes an empty <think> block, as the template does with
    // enable_thinking false (--no-think, /no_think); 0 renders as enable_thinking true or unset.
    int no_thinking;
} ChatTemplate;

// Validates the section of a file of format version (4: no template; 5: the template's text
// after the family's, and family CHAT_NONE, a template no family formats, allowed): family,
// ids < t->n_pieces, lengths, UTF-8. 0 or -1 with one line in err.
int chat_template_init(ChatTemplate *ct, const void *section, size_t bytes, int version, const Tokenizer *tok,
                       char *err, size_t errlen);
// For `./run --chat-template NAME` on a file without (or overriding) a section: finds the ids the
// family needs by their spelling among the tokenizer's special tokens; -1 naming what is missing.
int chat_template_by_name(ChatTemplate *ct, const char *name, const Tokenizer *tok, char *err, size_t errlen);
void chat_template_free(ChatTemplate *ct);
// "chatml", "qwen3", "llama3", "llama2", "gemma", "zephyr", "mistral"; NULL for another number.
const char *chat_family_name(int family);
// Every family's name, "chatml, qwen3, ...", into buf; returns buf.
const char *chat_families(char *buf, size_t size);
// "system", "user", "assistant" for CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT.
const char *chat_role_name(int role);
// The chat files' errors: one line, printf-style, into err; returns -1.
int chat_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Renders the conversation as the family's Jinja template does (HF apply_chat_template with
// add_generation_prompt), BOS included where the template writes it; special tokens by id, message
// text encoded WITHOUT TOKE_SPECIAL (a user's "<|im_end|>" stays text). Returns the id count, or -1
// with err (too many ids for max_out, roles the family cannot render, ...).
int chat_render(const ChatTemplate *ct, const Tokenizer *tok, const ChatMessage *msgs, int n_msgs,
                int add_generation_prompt, int *out, int max_out, char *err, size_t errlen);
// The most ids chat_render can write for these messages (for sizing out).
size_t chat_max_tokens(const ChatTemplate *ct, const Tokenizer *tok, const ChatMessage *msgs, int n_msgs);
// The fewest ids the messages' texts can take in any format, by their lengths alone: a
// conversation too long for a context is refused before it is tokenized.
size_t chat_min_tokens(const Tokenizer *tok, const ChatMessage *msgs, int n_msgs);
// Whether id ends the assistant's turn in this family (<|im_end|>, <|eot_id|>, <end_of_turn>,
// </s>), or ends generation for the tokenizer (eos, a stop token).
int chat_is_end_of_turn(const ChatTemplate *ct, const Tokenizer *tok, int id);

#endif
