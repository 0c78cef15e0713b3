// chat/template.c: the chat formats of chat/chat.h, each written as its family's Jinja template
// renders it (the templates' text as published in the checkpoints' tokenizer_config.json), and
// the model file's chat section read and checked.
#include "chat.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// What a family's section holds: its ids' spellings (NULL: the tokenizer's bos_id, then eos_id,
// which llama2.c's tokenizer.bin spells "\n<s>\n") and which of them ends the assistant's turn.
typedef struct {
    const char *name;
    int n_ids;
    const char *spelling[4];
    int end_of_turn;
} Family;

enum { ID_START, ID_END };                                  // CHATML, QWEN3: <|im_start|>, <|im_end|>
enum { ID_L3_BOS, ID_L3_HEADER, ID_L3_HEADER_END, ID_EOT }; // LLAMA3
enum { ID_BOS, ID_EOS };                                    // LLAMA2, ZEPHYR, MISTRAL
enum { ID_G_BOS, ID_TURN, ID_TURN_END };                    // GEMMA

static const Family families[CHAT_KINDS] = {
    [CHAT_CHATML] = {"chatml", 2, {"<|im_start|>", "<|im_end|>"}, ID_END},
    [CHAT_QWEN3] = {"qwen3", 2, {"<|im_start|>", "<|im_end|>"}, ID_END},
    [CHAT_LLAMA3] = {"llama3",
                     4,
                     {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
                     ID_EOT},
    [CHAT_LLAMA2] = {"llama2", 2, {NULL, NULL}, ID_EOS},
    [CHAT_GEMMA] = {"gemma", 3, {"<bos>", "<start_of_turn>", "<end_of_turn>"}, ID_TURN_END},
    [CHAT_ZEPHYR] = {"zephyr", 2, {NULL, NULL}, ID_EOS},
    [CHAT_MISTRAL] = {"mistral", 2, {NULL, NULL}, ID_EOS},
};

int chat_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const char *chat_family_name(int family) {
    return family > CHAT_NONE && family < CHAT_KINDS ? families[family].name : NULL;
}

const char *chat_families(char *buf, size_t size) {
    buf[0] = 0;
    for (int k = CHAT_NONE + 1; k < CHAT_KINDS; k++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", k > CHAT_NONE + 1 ? ", " : "", chat_family_name(k));
    return buf;
}

void chat_template_free(ChatTemplate *ct) {
    free(ct->system);
    free(ct->jinja);
    memset(ct, 0, sizeof *ct);
}

static uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// A section's text or template: UTF-8 without NUL, copied NUL-terminated into *out.
static int take_text(char **out, size_t *out_len, const char *what, const unsigned char *b, size_t len, char *err,
                     size_t errlen) {
    size_t bad = tokenizer_first_non_text((const char *)b, len);
    if (bad < len)
        return chat_fail(err, errlen, "chat section: its %s is not UTF-8 (or holds NUL) at byte %zu", what, bad);
    *out = malloc(len + 1);
    if (!*out) return chat_fail(err, errlen, "out of memory");
    memcpy(*out, b, len);
    (*out)[len] = 0;
    *out_len = len;
    return 0;
}

int chat_template_init(ChatTemplate *ct, const void *section, size_t bytes, int version, const Tokenizer *tok,
                       char *err, size_t errlen) {
    memset(ct, 0, sizeof *ct);
    const unsigned char *b = section;
    if (bytes < 8) return chat_fail(err, errlen, "chat section: %zu bytes, shorter than its 8-byte start", bytes);
    uint32_t family = read_u32(b), n_ids = read_u32(b + 4);
    // family 0 (version 5): a template no family formats, kept as text only
    int none = family == CHAT_NONE && version >= 5;
    if ((family == CHAT_NONE && !none) || family >= CHAT_KINDS)
        return chat_fail(err, errlen, "chat section: family %u is unknown to this build", family);
    int want_ids = none ? 0 : families[family].n_ids;
    if (n_ids != (uint32_t)want_ids)
        return chat_fail(err, errlen, "chat section: n_ids is %u, but family %s has %d", n_ids,
                         none ? "0 (none)" : families[family].name, want_ids);
    size_t at = 8 + 4 * (size_t)n_ids;
    if (bytes < at + 4) return chat_fail(err, errlen, "chat section: truncated in its ids (%zu bytes)", bytes);
    ct->family = (int)family;
    ct->n_ids = (int)n_ids;
    for (uint32_t i = 0; i < n_ids; i++) {
        int32_t id = (int32_t)read_u32(b + 8 + 4 * i);
        if (id < 0 || id >= tok->n_pieces)
            return chat_fail(err, errlen, "chat section: id %u is %d, outside the vocabulary of %d", i, id,
                             tok->n_pieces);
        ct->ids[i] = id;
    }
    uint32_t system_len = read_u32(b + at);
    at += 4;
    // version 4: the text is exactly the bytes that remain; version 5: a template follows it
    size_t rest = bytes - at;
    if (version >= 5 ? rest < 4 || system_len > rest - 4 : system_len != rest)
        return chat_fail(err, errlen, "chat section: its text is %u bytes, but %zu remain%s", system_len, bytes - at,
                         version >= 5 ? " before the template's length" : "");
    if (system_len > CHAT_MAX_SYSTEM)
        return chat_fail(err, errlen, "chat section: its text is %u bytes, more than %d", system_len, CHAT_MAX_SYSTEM);
    if (none && system_len)
        return chat_fail(err, errlen, "chat section: family 0 (none) has a text of %u bytes", system_len);
    if (take_text(&ct->system, &ct->system_len, "text", b + at, system_len, err, errlen)) return -1;
    at += system_len;
    if (version < 5) return 0;
    uint32_t template_len = read_u32(b + at);
    at += 4;
    if (template_len != bytes - at) {
        chat_template_free(ct);
        return chat_fail(err, errlen, "chat section: its template is %u bytes, but %zu remain", template_len,
                         bytes - at);
    }
    if (take_text(&ct->jinja, &ct->jinja_len, "template", b + at, template_len, err, errlen)) {
        chat_template_free(ct);
        return -1;
    }
    return 0;
}

// The id of a special token spelled s: its spelling encodes to it alone when special tokens are
// parsed; -1 if the tokenizer has none.
static int special_id(const Tokenizer *tok, const char *s) {
    int ids[2];
    char err[128];
    size_t n = strlen(s);
    if (tokenizer_encode(tok, s, n, TOKE_SPECIAL, ids, 2, err, sizeof err) != 1) return -1;
    return tok->attr && (tok->attr[ids[0]] & TOKA_SPECIAL) ? ids[0] : -1;
}

int chat_template_by_name(ChatTemplate *ct, const char *name, const Tokenizer *tok, char *err, size_t errlen) {
    memset(ct, 0, sizeof *ct);
    int family = CHAT_NONE;
    for (int f = CHAT_NONE + 1; f < CHAT_KINDS; f++)
        if (!strcmp(name, families[f].name)) family = f;
    char known[128];
    if (family == CHAT_NONE)
        return chat_fail(err, errlen, "chat template %s is unknown (known: %s)", name,
                         chat_families(known, sizeof known));
    const Family *f = &families[family];
    for (int i = 0; i < f->n_ids; i++) {
        const char *s = f->spelling[i];
        int id = s ? special_id(tok, s) : i == 0 ? tok->bos_id : tok->eos_id;
        if (id < 0)
            return chat_fail(err, errlen, "chat template %s needs %s, which the tokenizer does not have", name,
                             s        ? s
                             : i == 0 ? "a BOS token"
                                      : "an EOS token");
        ct->ids[i] = id;
    }
    ct->family = family;
    ct->n_ids = f->n_ids;
    // the templates' own texts: Llama 3.2's date lines; the other families' defaults are the
    // checkpoints' own, which only a converted chat section knows
    const char *text = family == CHAT_LLAMA3 ? "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n" : "";
    return take_text(&ct->system, &ct->system_len, "text", (const unsigned char *)text, strlen(text), err, errlen);
}

int chat_is_end_of_turn(const ChatTemplate *ct, const Tokenizer *tok, int id) {
    if (ct->family > CHAT_NONE && ct->family < CHAT_KINDS && id == ct->ids[families[ct->family].end_of_turn]) return 1;
    return tokenizer_is_stop(tok, id);
}

// ----------------------------------------------------------------------------
// Rendering: template text gathers into a run until the next special token, then the run is
// encoded as one text, as Hugging Face's tokenizer splits the rendered string at its specials.

typedef struct {
    const Tokenizer *tok;
    int *out; // (max) the ids so far
    int n, max;
    char *run; // (cap) the text since the last special token
    size_t len, cap;
    char *err;
    size_t errlen;
    int failed;
} Render;

static void put_text(Render *r, const char *s, size_t n) {
    if (r->failed || !n) return;
    if (r->len + n > r->cap) {
        size_t cap = (r->len + n) * 2;
        char *run = realloc(r->run, cap);
        if (!run) {
            r->failed = chat_fail(r->err, r->errlen, "out of memory");
            return;
        }
        r->run = run;
        r->cap = cap;
    }
    memcpy(r->run + r->len, s, n);
    r->len += n;
}

static void put_str(Render *r, const char *s) { put_text(r, s, strlen(s)); }

static void flush_run(Render *r) {
    if (r->failed || !r->len) return;
    int k = tokenizer_encode(r->tok, r->run, r->len, 0, r->out + r->n, r->max - r->n, r->err, r->errlen);
    if (k < 0) r->failed = -1;
    else r->n += k;
    r->len = 0;
}

static void put_id(Render *r, int id) {
    flush_run(r);
    if (r->failed) return;
    if (r->n == r->max) {
        r->failed = chat_fail(r->err, r->errlen, "the conversation needs more than %d tokens", r->max);
        return;
    }
    r->out[r->n++] = id;
}

// Python's str.isspace() on a UTF-8 character at s (n bytes left): its length if it is white
// space, else 0. The templates' trim and strip are Python's.
static size_t space_len(const unsigned char *s, size_t n) {
    if (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r') || (s[0] >= 0x1c && s[0] <= 0x1f)) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3 || (s[0] & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
    uint32_t cp = (uint32_t)(s[0] & 15) << 12 | (uint32_t)(s[1] & 63) << 6 | (s[2] & 63);
    int space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                cp == 0x205f || cp == 0x3000;
    return space ? 3 : 0;
}

// The length of a UTF-8 whitespace character ending at s + n, or 0.
static size_t space_len_before(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if ((k == 1 || (s[n - k] & 0xc0) != 0x80) && space_len(s + n - k, k) == k) return k;
    return 0;
}

// Python's s.strip(): the text put without the white space at either end.
static void put_stripped(Render *r, const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t lo = 0, hi = n, k;
    while (lo < hi && (k = space_len(s + lo, hi - lo))) lo += k;
    while (hi > lo && (k = space_len_before(s + lo, hi - lo))) hi -= k;
    put_text(r, text + lo, hi - lo);
}

// Python's s.lstrip('\n') and s.rstrip('\n') on [*s, *s + *n).
static void lstrip_newlines(const char **s, size_t *n) {
    while (*n && **s == '\n') ++*s, --*n;
}

static void rstrip_newlines(const char *s, size_t *n) {
    while (*n && s[*n - 1] == '\n') --*n;
}

const char *chat_role_name(int role) {
    static const char *const names[] = {[CHAT_SYSTEM] = "system", [CHAT_USER] = "user", [CHAT_ASSISTANT] = "assistant"};
    return names[role];
}

// The first occurrence of needle in [s, s + n), or NULL.
static const char *find(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

static const char *find_last(const char *s, size_t n, const char *needle) {
    const char *last = NULL;
    for (const char *p = s; (p = find(p, n - (size_t)(p - s), needle)); p++) last = p;
    return last;
}

static void render_chatml(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    if (n && m[0].role != CHAT_SYSTEM && ct->system_len) {
        put_id(r, ct->ids[ID_START]);
        put_str(r, "system\n");
        put_text(r, ct->system, ct->system_len);
        put_id(r, ct->ids[ID_END]);
        put_str(r, "\n");
    }
    for (int i = 0; i < n; i++) {
        put_id(r, ct->ids[ID_START]);
        put_str(r, chat_role_name(m[i].role));
        put_str(r, "\n");
        put_text(r, m[i].text, m[i].len);
        put_id(r, ct->ids[ID_END]);
        put_str(r, "\n");
    }
}

// Qwen3's assistant turn: the text after its last </think>, and the thinking before it, which
// the template keeps only for the replies after the last user message.
static void render_qwen3_reply(Render *r, const ChatMessage *msg, int keep_thinking, int last) {
    const char *content = msg->text, *reasoning = "";
    size_t content_len = msg->len, reasoning_len = 0;
    const char *close = find(content, content_len, "</think>");
    if (close) {
        reasoning = content;
        reasoning_len = (size_t)(close - content);
        rstrip_newlines(reasoning, &reasoning_len);
        const char *open = find_last(reasoning, reasoning_len, "<think>");
        if (open) {
            reasoning_len -= (size_t)(open + 7 - reasoning);
            reasoning = open + 7;
        }
        lstrip_newlines(&reasoning, &reasoning_len);
        const char *after = find_last(content, content_len, "</think>") + 8;
        content_len -= (size_t)(after - content);
        content = after;
        lstrip_newlines(&content, &content_len);
    }
    put_str(r, "assistant\n");
    if (keep_thinking && (last || reasoning_len)) {
        put_str(r, "<think>\n");
        put_text(r, reasoning, reasoning_len);
        put_str(r, "\n</think>\n\n");
        lstrip_newlines(&content, &content_len);
    }
    put_text(r, content, content_len);
}

static int is_tool_response(const ChatMessage *m) {
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    return m->len >= sizeof open - 1 + sizeof close - 1 && !memcmp(m->text, open, sizeof open - 1) &&
           !memcmp(m->text + m->len - (sizeof close - 1), close, sizeof close - 1);
}

static void render_qwen3(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--)
        if (m[i].role == CHAT_USER && !is_tool_response(&m[i])) {
            last_query = i;
            break;
        }
    for (int i = 0; i < n; i++) {
        put_id(r, ct->ids[ID_START]);
        if (m[i].role == CHAT_ASSISTANT) {
            render_qwen3_reply(r, &m[i], i > last_query, i == n - 1);
        } else {
            put_str(r, chat_role_name(m[i].role));
            put_str(r, "\n");
            put_text(r, m[i].text, m[i].len);
        }
        put_id(r, ct->ids[ID_END]);
        put_str(r, "\n");
    }
}

// Llama 3's system turn preamble with "{date}" as today's date, as strftime_now("%d %b %Y") gives it.
static void put_preamble(Render *r, const char *s, size_t n) {
    const char *p;
    while ((p = find(s, n, "{date}"))) {
        put_text(r, s, (size_t)(p - s));
        char date[64];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        put_text(r, date, strftime(date, sizeof date, "%d %b %Y", &tm));
        n -= (size_t)(p + 6 - s);
        s = p + 6;
    }
    put_text(r, s, n);
}

static void render_llama3(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    put_id(r, ct->ids[ID_L3_BOS]);
    int first = 0;
    if (ct->system_len || (n && m[0].role == CHAT_SYSTEM)) {
        put_id(r, ct->ids[ID_L3_HEADER]);
        put_str(r, "system");
        put_id(r, ct->ids[ID_L3_HEADER_END]);
        put_str(r, "\n\n");
        put_preamble(r, ct->system, ct->system_len);
        if (n && m[0].role == CHAT_SYSTEM) put_stripped(r, m[0].text, m[0].len), first = 1;
        put_id(r, ct->ids[ID_EOT]);
    }
    for (int i = first; i < n; i++) {
        put_id(r, ct->ids[ID_L3_HEADER]);
        put_str(r, chat_role_name(m[i].role));
        put_id(r, ct->ids[ID_L3_HEADER_END]);
        put_str(r, "\n\n");
        put_stripped(r, m[i].text, m[i].len);
        put_id(r, ct->ids[ID_EOT]);
    }
}

// Llama 2 and Gemma raise an exception unless the turns after the system message go user,
// assistant, user, ...: the n-th of them is a user turn exactly when n is even.
static int alternates(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n, int first) {
    for (int i = first; i < n; i++)
        if ((m[i].role == CHAT_USER) != ((i - first) % 2 == 0))
            return r->failed = chat_fail(r->err, r->errlen,
                                         "the %s chat format needs the turns to alternate user, assistant, user, "
                                         "... (message %d is %s %s turn)",
                                         families[ct->family].name, i + 1, m[i].role == CHAT_ASSISTANT ? "an" : "a",
                                         chat_role_name(m[i].role));
    return 0;
}

static void render_llama2(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    int first = n && m[0].role == CHAT_SYSTEM;
    if (alternates(r, ct, m, n, first)) return;
    for (int i = first; i < n; i++) {
        const char *text = m[i].text;
        size_t len = m[i].len;
        if (m[i].role == CHAT_USER) {
            put_id(r, ct->ids[ID_BOS]);
            put_str(r, "[INST] ");
            if (i == first && first) {
                put_str(r, "<<SYS>>\n");
                put_text(r, m[0].text, m[0].len);
                put_str(r, "\n<</SYS>>\n\n");
                put_text(r, text, len);
                // strip() applies to the system block and the message together: only at its end
                for (size_t k; !r->failed && (k = space_len_before((const unsigned char *)r->run, r->len));)
                    r->len -= k;
            } else {
                put_stripped(r, text, len);
            }
            put_str(r, " [/INST]");
        } else if (m[i].role == CHAT_ASSISTANT) {
            put_str(r, " ");
            put_stripped(r, text, len);
            put_str(r, " ");
            put_id(r, ct->ids[ID_EOS]);
        }
    }
}

static void render_gemma(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    put_id(r, ct->ids[ID_G_BOS]);
    int first = n && m[0].role == CHAT_SYSTEM;
    if (alternates(r, ct, m, n, first)) return;
    for (int i = first; i < n; i++) {
        put_id(r, ct->ids[ID_TURN]);
        put_str(r, m[i].role == CHAT_ASSISTANT ? "model" : chat_role_name(m[i].role));
        put_str(r, "\n");
        if (i == first && first) {
            put_text(r, m[0].text, m[0].len);
            put_str(r, "\n\n");
        }
        put_stripped(r, m[i].text, m[i].len);
        put_id(r, ct->ids[ID_TURN_END]);
        put_str(r, "\n");
    }
}

static void render_zephyr(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    static const char *const tags[] = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"};
    put_id(r, ct->ids[ID_BOS]);
    for (int i = 0; i < n; i++) {
        put_str(r, tags[m[i].role]);
        put_text(r, m[i].text, m[i].len);
        put_id(r, ct->ids[ID_EOS]);
        put_str(r, "\n");
    }
}

// Mixtral-8x7B-Instruct's template (as its tokenizer_config.json has it since 2024): no strip, a
// space before each [INST] and each reply, and the system prompt inside the first [INST].
static void render_mistral(Render *r, const ChatTemplate *ct, const ChatMessage *m, int n) {
    int first = n && m[0].role == CHAT_SYSTEM;
    if (alternates(r, ct, m, n, first)) return;
    put_id(r, ct->ids[ID_BOS]);
    for (int i = first; i < n; i++) {
        if (m[i].role == CHAT_USER) {
            put_str(r, " [INST] ");
            if (i == first && first) {
                put_text(r, m[0].text, m[0].len);
                put_str(r, "\n\n");
            }
            put_text(r, m[i].text, m[i].len);
            put_str(r, " [/INST]");
        } else if (m[i].role == CHAT_ASSISTANT) {
            put_str(r, " ");
            put_text(r, m[i].text, m[i].len);
            put_id(r, ct->ids[ID_EOS]);
        } else {
            r->failed = chat_fail(r->err, r->errlen,
                                  "the mistral chat format has a system prompt only first (message %d is one)", i + 1);
            return;
        }
    }
}

int chat_render(const ChatTemplate *ct, const Tokenizer *tok, const ChatMessage *msgs, int n_msgs,
                int add_generation_prompt, int *out, int max_out, char *err, size_t errlen) {
    if (ct->family <= CHAT_NONE || ct->family >= CHAT_KINDS)
        return chat_fail(err, errlen, "no chat template (family %d)", ct->family);
    for (int i = 0; i < n_msgs; i++)
        if (msgs[i].role < CHAT_SYSTEM || msgs[i].role > CHAT_ASSISTANT)
            return chat_fail(err, errlen, "message %d has role %d, not system, user or assistant", i + 1, msgs[i].role);
    Render r = {.tok = tok, .out = out, .max = max_out, .err = err, .errlen = errlen};
    switch (ct->family) {
    case CHAT_CHATML: render_chatml(&r, ct, msgs, n_msgs); break;
    case CHAT_QWEN3: render_qwen3(&r, ct, msgs, n_msgs); break;
    case CHAT_LLAMA3: render_llama3(&r, ct, msgs, n_msgs); break;
    case CHAT_LLAMA2: render_llama2(&r, ct, msgs, n_msgs); break;
    case CHAT_GEMMA: render_gemma(&r, ct, msgs, n_msgs); break;
    case CHAT_ZEPHYR: render_zephyr(&r, ct, msgs, n_msgs); break;
    case CHAT_MISTRAL: render_mistral(&r, ct, msgs, n_msgs); break;
    }
    if (add_generation_prompt) {
        switch (ct->family) {
        case CHAT_CHATML:
        case CHAT_QWEN3:
            put_id(&r, ct->ids[ID_START]);
            put_str(&r, "assistant\n");
            if (ct->family == CHAT_QWEN3 && ct->no_thinking) put_str(&r, "<think>\n\n</think>\n\n");
            break;
        case CHAT_LLAMA3:
            put_id(&r, ct->ids[ID_L3_HEADER]);
            put_str(&r, "assistant");
            put_id(&r, ct->ids[ID_L3_HEADER_END]);
            put_str(&r, "\n\n");
            break;
        case CHAT_GEMMA:
            put_id(&r, ct->ids[ID_TURN]);
            put_str(&r, "model\n");
            break;
        case CHAT_ZEPHYR:
            if (n_msgs) put_str(&r, "<|assistant|>\n"); // the template writes it after the last message
            break;
        } // Llama 2's and Mistral's replies follow [/INST] directly
    }
    flush_run(&r);
    free(r.run);
    return r.failed ? -1 : r.n;
}

size_t chat_max_tokens(const ChatTemplate *ct, const Tokenizer *tok, const ChatMessage *msgs, int n_msgs) {
    // every format adds under 64 bytes and 4 special tokens per message, and each text run
    // costs at most 2 ids more than tokenizer_max_tokens' share of it
    size_t bytes = ct->system_len + 64, slack = 16;
    for (int i = 0; i < n_msgs; i++) bytes += msgs[i].len + 64, slack += 12;
    return tokenizer_max_tokens(tok, bytes) + slack;
}

size_t chat_min_tokens(const Tokenizer *tok, const ChatMessage *msgs, int n_msgs) {
    size_t least = 0;
    for (int i = 0; i < n_msgs; i++) {
        // without the white space at either end, which some formats strip
        const unsigned char *s = (const unsigned char *)msgs[i].text;
        size_t lo = 0, hi = msgs[i].len, k;
        while (lo < hi && (k = space_len(s + lo, hi - lo))) lo += k;
        while (hi > lo && (k = space_len_before(s + lo, hi - lo))) hi -= k;
        least += tokenizer_min_tokens(tok, hi - lo);
    }
    return least;
}
