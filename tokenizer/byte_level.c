// tokenizer/byte_level.c: kind 1's pre-tokenisation, and the UTF-8 decoding every file uses.
// The text is decoded into characters, each classed as letter, number, space or other by the
// generated tokenizer/unicode_tables.h, cut into chunks by the split the tokenizer's flags name
// (GPT-2's, Llama 3's, Qwen2's, or single digits then GPT-2's), and each chunk's bytes go to the
// merge loop as one-byte pieces, or as one piece when merges are ignored. Each split is a hand
// matcher that follows the regex's alternatives in order, as a backtracking engine tries them,
// with the classes and case folding of Hugging Face's Rust (Oniguruma regexes, char::is_numeric).
// It never merges (tokenizer/bpe.c), never normalises (tokenizer/normalize.c) and never reads
// a blob (tokenizer.c).
#include <stdlib.h>

#include "internal.h"
#include "unicode_tables.h"

#define NOT_A_CHAR 0xFFFFFFFFu // the code point of a byte that is not well-formed UTF-8
#define LLAMA3_MAX_DIGITS 3    // Llama 3's \p{N}{1,3}
#define QWEN2_MAX_DIGITS 1     // Qwen2's \p{N}

enum { CLS_OTHER = 0, CLS_L = 1, CLS_N = 2, CLS_S = 3 }; // the classes unicode_tables.h writes

size_t utf8_char(const unsigned char *s, size_t i, size_t len, uint32_t *cp) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xC2 || c > 0xF4) return 0; // a continuation byte, an overlong lead, or past U+10FFFF
    size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    unsigned lo = 0x80, hi = 0xBF; // the second byte's range
    if (c == 0xE0) lo = 0xA0;      // shorter forms are overlong
    if (c == 0xED) hi = 0x9F;      // higher ones are surrogates
    if (c == 0xF0) lo = 0x90;      // shorter forms are overlong
    if (c == 0xF4) hi = 0x8F;      // higher ones are past U+10FFFF
    *cp = c & (0x7Fu >> n);
    if (len - i < n) return 0;
    for (size_t k = 1; k < n; k++) {
        unsigned d = s[i + k];
        if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        *cp = *cp << 6 | (d & 0x3F);
    }
    return n;
}

static int uni_class(uint32_t cp) {
    int lo = 0, hi = (int)(sizeof uni_class_table / sizeof uni_class_table[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < uni_class_table[mid][0]) hi = mid - 1;
        else if (cp > uni_class_table[mid][1]) lo = mid + 1;
        else return (int)uni_class_table[mid][2];
    }
    return CLS_OTHER;
}

// The bytes character cp took in the text: a byte that is not well-formed UTF-8 is one.
static size_t char_bytes(uint32_t cp) {
    return cp < 0x80 || cp == NOT_A_CHAR ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// ---- the matchers: each returns the end of its match at character i, the piece ending at m ----
// u[] holds the characters, cls[] their classes; a byte that is not well-formed UTF-8 is a
// character of class "other".

static int is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// The ASCII letter cp case-folds to (lower case), or cp if it folds to none: Oniguruma's (?i)
// takes U+017F for s.
static uint32_t fold_to_ascii(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
    for (size_t k = 0; cp >= 0x80 && k < sizeof ascii_fold_table / sizeof ascii_fold_table[0]; k++)
        if (ascii_fold_table[k][0] == cp) return ascii_fold_table[k][1];
    return cp;
}

// The end of the run of class c from j.
static size_t run_of(const unsigned char *cls, size_t j, size_t m, int c) {
    while (j < m && cls[j] == c) j++;
    return j;
}

// 's|'t|'re|'ve|'m|'ll|'d, case-insensitive if fold (Llama 3's (?i:...): "'S", "'Ll", "'\u017F"
// too); the end of the match, or i if none.
static size_t contraction(const uint32_t *u, size_t i, size_t m, int fold) {
    if (u[i] != '\'' || i + 1 >= m) return i;
    uint32_t a = fold ? fold_to_ascii(u[i + 1]) : u[i + 1];
    uint32_t b = i + 2 >= m ? 0 : fold ? fold_to_ascii(u[i + 2]) : u[i + 2];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return i;
}

// \s+(?!\S)|\s+ at a space: the run of spaces, less its last one when a non-space follows a
// run of two or more, which that last space then leads.
static size_t spaces(const unsigned char *cls, size_t i, size_t m) {
    size_t e = run_of(cls, i, m, CLS_S);
    return e == m || e - i == 1 ? e : e - 1;
}

// GPT-2's 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ .
static size_t gpt2_match(const uint32_t *u, const unsigned char *cls, size_t i, size_t m) {
    size_t e = contraction(u, i, m, 0);
    if (e > i) return e;
    size_t j = u[i] == ' ' && i + 1 < m && cls[i + 1] != CLS_S ? i + 1 : i;
    if (cls[j] != CLS_S) return run_of(cls, j, m, cls[j]);
    return spaces(cls, i, m);
}

// Llama 3's (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ , with \p{N}{1,max_digits} (Qwen2: 1).
static size_t llama3_match(const uint32_t *u, const unsigned char *cls, size_t i, size_t m, size_t max_digits) {
    size_t e = contraction(u, i, m, 1);
    if (e > i) return e;
    if (cls[i] == CLS_L) return run_of(cls, i, m, CLS_L);
    if (cls[i] != CLS_N && !is_crlf(u[i]) && i + 1 < m && cls[i + 1] == CLS_L) return run_of(cls, i + 1, m, CLS_L);
    if (cls[i] == CLS_N) {
        for (e = i; e < m && e - i < max_digits && cls[e] == CLS_N;) e++;
        return e;
    }
    size_t j = u[i] == ' ' && i + 1 < m && cls[i + 1] == CLS_OTHER ? i + 1 : i;
    if (cls[j] == CLS_OTHER) {
        for (e = run_of(cls, j, m, CLS_OTHER); e < m && is_crlf(u[e]);) e++;
        return e;
    }
    // A space: \s*[\r\n]+ backtracks to the run's last CR or LF, if it has one.
    for (e = run_of(cls, i, m, CLS_S); e > i; e--)
        if (is_crlf(u[e - 1])) return e;
    return spaces(cls, i, m);
}

// The first digit at or after i, or m: where the text between digits ends. A digit of HF's
// Digits pre-tokenizer is a char::is_numeric character, \p{N} (Nd, Nl, No: "²", "½", "Ⅻ").
static size_t next_digit(const unsigned char *cls, size_t i, size_t m) {
    while (i < m && cls[i] != CLS_N) i++;
    return i;
}

// The characters u[0..m) with classes cls[] cut by split pre: each chunk's end to ends[] in
// bytes (as the characters took them in the text); returns the number of chunks.
static size_t split_chars(const uint32_t *u, const unsigned char *cls, size_t m, int pre, size_t *ends) {
    size_t n = 0, byte = 0, piece_end = 0;
    for (size_t i = 0, end; i < m; i = end) {
        switch (pre) {
        case TOK_PRE_LLAMA3: end = llama3_match(u, cls, i, m, LLAMA3_MAX_DIGITS); break;
        case TOK_PRE_QWEN2: end = llama3_match(u, cls, i, m, QWEN2_MAX_DIGITS); break;
        case TOK_PRE_DIGITS_GPT2: // each digit alone, and GPT-2's split on the text between digits
            if (cls[i] == CLS_N) {
                end = i + 1;
            } else {
                if (piece_end <= i) piece_end = next_digit(cls, i, m);
                end = gpt2_match(u, cls, i, piece_end);
            }
            break;
        default: end = gpt2_match(u, cls, i, m);
        }
        for (size_t k = i; k < end; k++) byte += char_bytes(u[k]);
        ends[n++] = byte;
    }
    return n;
}

int pretokenize(const unsigned char *s, size_t len, int pre, size_t *ends, size_t *n_chunks) {
    uint32_t *u = malloc(sizeof(uint32_t) * len); // per character: its code point
    unsigned char *cls = malloc(len);             // per character: its class
    int rc = -1;
    if (u && cls) {
        size_t m = 0;
        for (size_t i = 0; i < len; m++) {
            size_t k = utf8_char(s, i, len, &u[m]);
            if (!k) {
                k = 1;
                u[m] = NOT_A_CHAR;
            }
            cls[m] = (unsigned char)uni_class(u[m]);
            i += k;
        }
        *n_chunks = split_chars(u, cls, m, pre, ends);
        rc = 0;
    }
    free(u);
    free(cls);
    return rc;
}

// One chunk s[a..z): the piece it spells if merges are ignored and there is one, else its
// one-byte pieces merged; appended to out.
static int encode_chunk(Encoding *e, const unsigned char *s, size_t a, size_t z) {
    const Tokenizer *t = e->t;
    int whole = t->flags & TOKF_IGNORE_MERGES ? piece_lookup(t, (const char *)s + a, z - a) : -1;
    if (whole >= 0) {
        e->id[a] = whole;
        return merge_and_emit(e, (int)a, 1);
    }
    for (size_t k = a; k < z; k++) {
        int id = t->byte_piece[s[k]];
        // a vocabulary may lack the bytes UTF-8 never uses (0xC0, 0xC1, 0xF5..0xFF)
        if (id < 0)
            return fail(e->err, e->errlen, "byte 0x%02X at offset %zu has no piece in this vocabulary", s[k],
                        e->at + k);
        e->id[k] = id;
    }
    return merge_and_emit(e, (int)a, (int)(z - a));
}

int encode_byte_level(Encoding *e, const unsigned char *s, size_t len) {
    size_t *ends = malloc(sizeof(size_t) * len), n = 0; // per chunk: its end offset
    int rc = !ends || pretokenize(s, len, (int)((e->t->flags & TOKF_PRE_MASK) >> TOKF_PRE_SHIFT), ends, &n);
    if (rc) fail(e->err, e->errlen, "out of memory");
    for (size_t k = 0, a = 0; k < n && !rc; a = ends[k++]) rc = encode_chunk(e, s, a, ends[k]);
    free(ends);
    return rc ? -1 : 0;
}
