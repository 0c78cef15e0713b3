// tokenizer/normalize.c: Unicode Normalization Form C, Qwen's normalizer (TOKF_NFC), as
// JavaScript's String.prototype.normalize("NFC") computes it. The text is read once, left to
// right, a segment at a time: a starter (a character of canonical combining class 0) and the
// non-starters after it, fully decomposed. When the next starter arrives, the segment's
// non-starters are put in canonical order, composed into the starter where not blocked, and
// the segment is written out, unless the starter itself composes with the new one. The
// Unicode data is tokenizer/unicode_tables.h's; Hangul syllables are computed. It knows
// nothing of tokens: tokenizer.c calls it before any pre-tokeniser.
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "unicode_tables.h"

#define N_CCC 256 // ccc ranks fit in NFC_CCC_MASK's 8 bits

// Hangul syllables, by the Unicode standard's algorithm (section 3.12).
#define HANGUL_S 0xAC00u // the first syllable
#define HANGUL_L 0x1100u // the first leading consonant
#define HANGUL_V 0x1161u // the first vowel
#define HANGUL_T 0x11A7u // one before the first trailing consonant
#define HANGUL_LN 19u    // leading consonants
#define HANGUL_VN 21u    // vowels
#define HANGUL_TN 28u    // trailing consonants, with "none"
#define HANGUL_SN 11172u // syllables: HANGUL_LN * HANGUL_VN * HANGUL_TN

typedef struct {
    uint32_t cp, props; // props: nfc_prop_table's
} NfcChar;

typedef struct {
    unsigned char *out; // the normalised text so far: n bytes of cap
    size_t n, cap;
    NfcChar *seg, *tmp; // the segment (a starter, unless the text began without one, then
                        // non-starters) and the canonical ordering's scratch: nseg of segcap each
    size_t nseg, segcap;
} Nfc;

static uint32_t nfc_props(uint32_t cp) {
    if (cp < NFC_FIRST_PROP) return 0;
    int lo = 0, hi = (int)(sizeof nfc_prop_table / sizeof nfc_prop_table[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < nfc_prop_table[mid][0]) hi = mid - 1;
        else if (cp > nfc_prop_table[mid][1]) lo = mid + 1;
        else return nfc_prop_table[mid][2];
    }
    return 0;
}

static unsigned ccc(uint32_t props) { return props & NFC_CCC_MASK; }

// The full canonical decomposition of cp (props its nfc_props) to d[]; returns its length.
static size_t decompose(uint32_t cp, uint32_t props, uint32_t d[NFC_DECOMP_MAX]) {
    d[0] = cp;
    if (!(props & NFC_DECOMP)) return 1;
    if (cp - HANGUL_S < HANGUL_SN) {
        uint32_t i = cp - HANGUL_S, t = i % HANGUL_TN;
        d[0] = HANGUL_L + i / (HANGUL_VN * HANGUL_TN);
        d[1] = HANGUL_V + i / HANGUL_TN % HANGUL_VN;
        d[2] = HANGUL_T + t;
        return t ? 3 : 2;
    }
    int lo = 0, hi = (int)(sizeof nfc_decomp_table / sizeof nfc_decomp_table[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < nfc_decomp_table[mid][0]) {
            hi = mid - 1;
        } else if (cp > nfc_decomp_table[mid][0]) {
            lo = mid + 1;
        } else {
            uint32_t at = nfc_decomp_table[mid][1] >> 3, n = nfc_decomp_table[mid][1] & 7;
            memcpy(d, nfc_decomp_cps + at, sizeof(uint32_t) * n);
            return n;
        }
    }
    return 1;
}

// The primary composite of the starter a and b, or 0 if they do not compose.
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a - HANGUL_L < HANGUL_LN && b - HANGUL_V < HANGUL_VN)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VN + (b - HANGUL_V)) * HANGUL_TN;
    if (a - HANGUL_S < HANGUL_SN && (a - HANGUL_S) % HANGUL_TN == 0 && b - HANGUL_T - 1 < HANGUL_TN - 1)
        return a + (b - HANGUL_T);
    int lo = 0, hi = (int)(sizeof nfc_compose_table / sizeof nfc_compose_table[0]) - 1;
    uint64_t key = (uint64_t)a << 32 | b;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint64_t k = (uint64_t)nfc_compose_table[mid][0] << 32 | nfc_compose_table[mid][1];
        if (key < k) hi = mid - 1;
        else if (key > k) lo = mid + 1;
        else return nfc_compose_table[mid][2];
    }
    return 0;
}

// Room for extra more bytes of output; 0, or -1 if out of memory.
static int reserve_out(Nfc *z, size_t extra) {
    if (z->cap - z->n >= extra) return 0;
    size_t cap = 2 * z->cap > z->n + extra ? 2 * z->cap : z->n + extra;
    unsigned char *p = realloc(z->out, cap);
    if (!p) return -1;
    z->out = p;
    z->cap = cap;
    return 0;
}

static int seg_push(Nfc *z, uint32_t cp, uint32_t props) {
    if (z->nseg == z->segcap) {
        size_t cap = 2 * z->segcap;
        NfcChar *seg = realloc(z->seg, sizeof(NfcChar) * cap);
        if (seg) z->seg = seg;
        NfcChar *tmp = seg ? realloc(z->tmp, sizeof(NfcChar) * cap) : NULL;
        if (!tmp) return -1;
        z->tmp = tmp;
        z->segcap = cap;
    }
    z->seg[z->nseg++] = (NfcChar){cp, props};
    return 0;
}

// Puts the non-starters seg[from..nseg) in canonical order: a stable sort by ccc, counting
// sort when needed, so that a long run of marks costs linear time.
static void canonical_order(Nfc *z, size_t from) {
    size_t k = from + 1;
    while (k < z->nseg && ccc(z->seg[k - 1].props) <= ccc(z->seg[k].props)) k++;
    if (k >= z->nseg) return;
    size_t start[N_CCC + 1] = {0}; // per ccc: where its characters go in tmp
    for (k = from; k < z->nseg; k++) start[ccc(z->seg[k].props) + 1]++;
    for (int c = 1; c <= N_CCC; c++) start[c] += start[c - 1];
    for (k = from; k < z->nseg; k++) z->tmp[start[ccc(z->seg[k].props)]++] = z->seg[k];
    memcpy(z->seg + from, z->tmp, sizeof(NfcChar) * (z->nseg - from));
}

// Orders the segment's non-starters and composes each into the starter unless blocked: a
// character stays blocked by any kept one between them of the same or a higher class.
static void compose_segment(Nfc *z) {
    int starter = ccc(z->seg[0].props) == 0;
    canonical_order(z, starter ? 1 : 0);
    if (!starter) return;
    size_t kept = 1;
    for (size_t r = 1; r < z->nseg; r++) {
        NfcChar c = z->seg[r];
        uint32_t p = 0;
        int unblocked = kept == 1 || ccc(z->seg[kept - 1].props) < ccc(c.props);
        if (unblocked && (c.props & NFC_SECOND)) p = compose(z->seg[0].cp, c.cp);
        if (p) z->seg[0].cp = p;
        else z->seg[kept++] = c;
    }
    z->nseg = kept;
}

// Writes the composed segment out and empties it; 0, or -1 if out of memory.
static int write_segment(Nfc *z) {
    if (reserve_out(z, UTF8_MAX * z->nseg)) return -1;
    for (size_t k = 0; k < z->nseg; k++) {
        uint32_t cp = z->seg[k].cp;
        unsigned char *o = z->out + z->n;
        if (cp < 0x80) {
            o[0] = (unsigned char)cp;
            z->n += 1;
        } else if (cp < 0x800) {
            o[0] = (unsigned char)(0xC0 | cp >> 6);
            o[1] = (unsigned char)(0x80 | (cp & 0x3F));
            z->n += 2;
        } else if (cp < 0x10000) {
            o[0] = (unsigned char)(0xE0 | cp >> 12);
            o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            o[2] = (unsigned char)(0x80 | (cp & 0x3F));
            z->n += 3;
        } else {
            o[0] = (unsigned char)(0xF0 | cp >> 18);
            o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
            o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            o[3] = (unsigned char)(0x80 | (cp & 0x3F));
            z->n += 4;
        }
    }
    z->nseg = 0;
    return 0;
}

// Composes the segment, once (a mark kept may not be tried again), and writes it out.
static int end_segment(Nfc *z) {
    if (!z->nseg) return 0;
    compose_segment(z);
    return write_segment(z);
}

// A starter ends the segment before it, unless it is the second of a composition with that
// segment's starter, left alone after its own compositions.
static int add_starter(Nfc *z, uint32_t cp, uint32_t props) {
    if (z->nseg) {
        compose_segment(z);
        uint32_t p = z->nseg == 1 && ccc(z->seg[0].props) == 0 && (props & NFC_SECOND) ? compose(z->seg[0].cp, cp) : 0;
        if (p) {
            z->seg[0].cp = p;
            return 0;
        }
        if (write_segment(z)) return -1;
    }
    return seg_push(z, cp, props);
}

static int add_char(Nfc *z, uint32_t cp) {
    uint32_t d[NFC_DECOMP_MAX];
    size_t n = decompose(cp, nfc_props(cp), d);
    for (size_t k = 0; k < n; k++) {
        uint32_t props = nfc_props(d[k]);
        if (ccc(props) ? seg_push(z, d[k], props) : add_starter(z, d[k], props)) return -1;
    }
    return 0;
}

// Whether no character of s[0..len) has NFC properties, so that s is NFC as it is.
static int plainly_nfc(const unsigned char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = s[i] < 0x80 ? 1 : utf8_char(s, i, len, &cp);
        if (k > 1 && nfc_props(cp)) return 0;
        i += k ? k : 1;
    }
    return 1;
}

int nfc_normalize(const unsigned char *s, size_t len, unsigned char **out, size_t *out_len) {
    *out = NULL;
    *out_len = len;
    if (plainly_nfc(s, len)) return 0;
    Nfc z = {.cap = len + 16, .segcap = 16};
    z.out = malloc(z.cap);
    z.seg = malloc(sizeof(NfcChar) * z.segcap);
    z.tmp = malloc(sizeof(NfcChar) * z.segcap);
    int rc = z.out && z.seg && z.tmp ? 0 : -1;
    for (size_t i = 0; i < len && !rc;) {
        uint32_t cp;
        size_t k = utf8_char(s, i, len, &cp);
        if (k) {
            rc = add_char(&z, cp);
            i += k;
        } else { // a byte that is not UTF-8 passes unchanged, and nothing composes across it
            rc = end_segment(&z) || reserve_out(&z, 1) ? -1 : 0;
            if (!rc) z.out[z.n++] = s[i++];
        }
    }
    if (!rc) rc = end_segment(&z);
    free(z.seg);
    free(z.tmp);
    if (rc) {
        free(z.out);
        return -1;
    }
    *out = z.out;
    *out_len = z.n;
    return 0;
}
