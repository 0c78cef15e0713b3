// tokenizer/byte_level.c: kind 1's (GPT-2's) pre-tokenisation, and the UTF-8 decoding every
// file uses. The text is decoded into characters, each classed as letter, number, space or
// other by the generated tokenizer/unicode_tables.h, cut into chunks by GPT-2's split, and each
// chunk's bytes go to the merge loop as one-byte pieces. It never merges (tokenizer/bpe.c)
// and never reads a blob (tokenizer.c).
#include <stdlib.h>

#include "internal.h"
#include "unicode_tables.h"

#define NOT_A_CHAR 0xFFFFFFFFu // the code point of a byte that is not well-formed UTF-8

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

// GPT-2's split, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ ,
// on the characters u[0..m) with classes cls[]: returns the end of the match at i. A byte that
// is not well-formed UTF-8 is a character of class "other".
static size_t gpt2_match(const uint32_t *u, const unsigned char *cls, size_t i, size_t m) {
    if (u[i] == '\'' && i + 1 < m) {
        uint32_t a = u[i + 1], b = i + 2 < m ? u[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    size_t j = u[i] == ' ' && i + 1 < m && cls[i + 1] != CLS_S ? i + 1 : i;
    if (cls[j] != CLS_S) {
        int c = cls[j];
        while (j < m && cls[j] == c) j++;
        return j;
    }
    size_t e = i;
    while (e < m && cls[e] == CLS_S) e++;
    if (e == m || e - i == 1) return e;
    return e - 1;
}

// Decodes s[0..len) into characters u[], their classes cls[] and their byte offsets start[],
// with start[m] = len; returns the number of characters m.
static size_t decode_chars(const unsigned char *s, size_t len, uint32_t *u, unsigned char *cls, size_t *start) {
    size_t m = 0;
    for (size_t i = 0; i < len; m++) {
        size_t k = utf8_char(s, i, len, &u[m]);
        if (!k) {
            k = 1;
            u[m] = NOT_A_CHAR;
        }
        cls[m] = (unsigned char)uni_class(u[m]);
        start[m] = i;
        i += k;
    }
    start[m] = len;
    return m;
}

// One chunk: the one-byte pieces of s[a..z), merged and appended to out.
static int encode_chunk(Encoding *e, const unsigned char *s, size_t a, size_t z) {
    for (size_t k = a; k < z; k++) {
        int id = e->t->byte_piece[s[k]];
        if (id < 0) return fail(e->err, e->errlen, "byte 0x%02X at offset %zu has no one-byte piece", s[k], k);
        e->id[k] = id;
    }
    return merge_and_emit(e, (int)a, (int)(z - a));
}

int encode_byte_level(Encoding *e, const unsigned char *s, size_t len) {
    uint32_t *u = malloc(sizeof(uint32_t) * (len + 1));
    unsigned char *cls = malloc(len + 1);
    size_t *start = malloc(sizeof(size_t) * (len + 1));
    int rc = -1;
    if (!u || !cls || !start) {
        fail(e->err, e->errlen, "out of memory");
    } else {
        size_t m = decode_chars(s, len, u, cls, start);
        rc = 0;
        for (size_t i = 0, end; i < m && !rc; i = end) {
            end = gpt2_match(u, cls, i, m);
            rc = encode_chunk(e, s, start[i], start[end]);
        }
    }
    free(u);
    free(cls);
    free(start);
    return rc;
}
