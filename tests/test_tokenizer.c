// tokenizer.c against llama2.c's expected encodings, a naive llama2.c-style encoder, a naive
// GPT-2 merge loop, round trips, learned vocabularies and hostile blobs.
// Run from the repository root (shared data is at ../shared).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../tokenizer.h"

#define SHARED "../shared/"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (tests run from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

#include "test_util.h"

// ---- a vocabulary read independently of tokenizer.c, and blobs built from it ----

typedef struct {
    int n;
    char **str;
    uint32_t *len;
    float *score;
    int *sorted; // ids by (bytes, length), for bsearch as llama2.c does
} Vocab;

static const Vocab *cmp_vocab;
static int cmp_piece(const char *a, uint32_t la, const char *b, uint32_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}
static int cmp_sorted(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    int c = cmp_piece(cmp_vocab->str[a], cmp_vocab->len[a], cmp_vocab->str[b], cmp_vocab->len[b]);
    return c ? c : (a > b) - (a < b);
}

static void vocab_index(Vocab *v) {
    v->sorted = malloc(sizeof(int) * (size_t)v->n);
    for (int i = 0; i < v->n; i++) v->sorted[i] = i;
    cmp_vocab = v;
    qsort(v->sorted, (size_t)v->n, sizeof(int), cmp_sorted);
}

static int ref_lookup(const Vocab *v, const char *s, uint32_t n) {
    int lo = 0, hi = v->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, id = v->sorted[mid];
        int c = cmp_piece(s, n, v->str[id], v->len[id]);
        if (!c) return id;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static Vocab vocab_from_llama2c(const char *path) {
    size_t n;
    unsigned char *d = (unsigned char *)read_file(path, &n);
    Vocab v = {0};
    int cap = 1024;
    v.str = malloc(sizeof(char *) * (size_t)cap);
    v.len = malloc(sizeof(uint32_t) * (size_t)cap);
    v.score = malloc(sizeof(float) * (size_t)cap);
    for (size_t off = 4; off < n;) {
        if (v.n == cap) {
            cap *= 2;
            v.str = realloc(v.str, sizeof(char *) * (size_t)cap);
            v.len = realloc(v.len, sizeof(uint32_t) * (size_t)cap);
            v.score = realloc(v.score, sizeof(float) * (size_t)cap);
        }
        uint32_t u = get32(d + off);
        memcpy(&v.score[v.n], &u, 4);
        v.len[v.n] = get32(d + off + 4);
        v.str[v.n] = malloc(v.len[v.n] + 1);
        memcpy(v.str[v.n], d + off + 8, v.len[v.n]);
        off += 8 + v.len[v.n];
        v.n++;
    }
    free(d);
    vocab_index(&v);
    return v;
}

static Vocab vocab_from_blob(const unsigned char *b) {
    Vocab v = {0};
    v.n = (int)get32(b);
    v.str = malloc(sizeof(char *) * (size_t)v.n);
    v.len = malloc(sizeof(uint32_t) * (size_t)v.n);
    v.score = malloc(sizeof(float) * (size_t)v.n);
    size_t off = 16;
    for (int i = 0; i < v.n; i++) {
        uint32_t u = get32(b + off);
        memcpy(&v.score[i], &u, 4);
        v.len[i] = get32(b + off + 4);
        v.str[i] = malloc(v.len[i] + 1);
        memcpy(v.str[i], b + off + 8, v.len[i]);
        off += 8 + v.len[i];
    }
    vocab_index(&v);
    return v;
}

static void vocab_free(Vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->str[i]);
    free(v->str);
    free(v->len);
    free(v->score);
    free(v->sorted);
}

static void put32(unsigned char *p, uint32_t x) {
    p[0] = (unsigned char)x;
    p[1] = (unsigned char)(x >> 8);
    p[2] = (unsigned char)(x >> 16);
    p[3] = (unsigned char)(x >> 24);
}

// FORMAT.md blob from pieces, optional merges and optional added tokens {id, attributes}.
static unsigned char *make_blob(const Vocab *v, const uint32_t (*merges)[2], int n_merges, const uint32_t (*added)[2],
                                int n_added, size_t *bytes) {
    size_t total = 16 + 8 * (size_t)n_merges + 8 * (size_t)n_added;
    uint32_t maxlen = 0;
    for (int i = 0; i < v->n; i++) {
        total += 8 + v->len[i];
        if (v->len[i] > maxlen) maxlen = v->len[i];
    }
    unsigned char *b = malloc(total), *p = b + 16;
    put32(b, (uint32_t)v->n);
    put32(b + 4, (uint32_t)n_merges);
    put32(b + 8, maxlen);
    put32(b + 12, (uint32_t)n_added);
    for (int i = 0; i < v->n; i++) {
        uint32_t u;
        memcpy(&u, &v->score[i], 4);
        put32(p, u);
        put32(p + 4, v->len[i]);
        memcpy(p + 8, v->str[i], v->len[i]);
        p += 8 + v->len[i];
    }
    for (int i = 0; i < n_merges; i++, p += 8) put32(p, merges[i][0]), put32(p + 4, merges[i][1]);
    for (int i = 0; i < n_added; i++, p += 8) put32(p, added[i][0]), put32(p + 4, added[i][1]);
    *bytes = total;
    return b;
}

// ---- naive encoders: rescan every pair after each merge ----

// A merge of the naive encoders' index: the pair and its rank.
typedef struct {
    uint32_t l, r, rank;
} RankedMerge;

// What the naive encoders follow besides the vocabulary: the kind (kind 1's test texts are
// one chunk of GPT-2's split, so its runs are just bytes), the dummy prefix, merges in rank
// order (none: by score, as llama2.c) and added tokens {id, attributes}.
typedef struct {
    int kind, dummy;
    const uint32_t (*merges)[2];
    int nm;
    const uint32_t (*added)[2];
    int na;
    RankedMerge *sorted; // the merges by pair, for ref_rank (made by rules_index)
} Rules;

static int cmp_ranked(const void *x, const void *y) {
    const RankedMerge *a = x, *b = y;
    if (a->l != b->l) return a->l < b->l ? -1 : 1;
    if (a->r != b->r) return a->r < b->r ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static void rules_index(Rules *r) {
    r->sorted = malloc(sizeof(RankedMerge) * (size_t)(r->nm + 1));
    for (int i = 0; i < r->nm; i++) r->sorted[i] = (RankedMerge){r->merges[i][0], r->merges[i][1], (uint32_t)i};
    qsort(r->sorted, (size_t)r->nm, sizeof(RankedMerge), cmp_ranked);
}

// The rank of merge (a, b), the last one if it is listed twice; -1 if there is none.
static long ref_rank(const Rules *r, int a, int b) {
    long lo = 0, hi = r->nm - 1, found = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        const RankedMerge *m = &r->sorted[mid];
        int c = m->l != (uint32_t)a   ? (m->l < (uint32_t)a ? -1 : 1)
                : m->r != (uint32_t)b ? (m->r < (uint32_t)b ? -1 : 1)
                                      : 0;
        if (c < 0) lo = mid + 1;
        else if (c > 0) hi = mid - 1;
        else found = (long)m->rank, lo = mid + 1;
    }
    return found;
}

static int join(const Vocab *v, int a, int b) {
    char buf[8192];
    uint32_t la = v->len[a], lb = v->len[b];
    if (la + lb > sizeof buf) return -1;
    memcpy(buf, v->str[a], la);
    memcpy(buf + la, v->str[b], lb);
    return ref_lookup(v, buf, la + lb);
}

static int replace_pair(int *w, int n, int at, int id) {
    w[at] = id;
    memmove(w + at + 1, w + at + 2, sizeof(int) * (size_t)(n - at - 2));
    return n - 1;
}

// llama2.c: the pair whose join scores highest merges, the leftmost on ties.
static int ref_merge_score(const Vocab *v, int *w, int n) {
    for (;;) {
        float best = -1e10f;
        int best_i = -1, best_id = -1;
        for (int i = 0; i + 1 < n; i++) {
            int id = join(v, w[i], w[i + 1]);
            if (id >= 0 && v->score[id] > best) best = v->score[id], best_i = i, best_id = id;
        }
        if (best_i < 0) return n;
        n = replace_pair(w, n, best_i, best_id);
    }
}

// Hugging Face's BPE: the pair of lowest rank merges, the leftmost on ties, one at a time.
static int ref_merge_rank(const Vocab *v, const Rules *r, int *w, int n) {
    for (;;) {
        long best = -1;
        int at = -1;
        for (int i = 0; i + 1 < n; i++) {
            long k = ref_rank(r, w[i], w[i + 1]);
            if (k >= 0 && (best < 0 || k < best)) best = k, at = i;
        }
        if (at < 0) return n;
        n = replace_pair(w, n, at, join(v, w[at], w[at + 1]));
    }
}

// One run of text between added tokens, merged; the number of ids, or -1 for a byte with no piece.
static int ref_run(const Vocab *v, const Rules *r, const unsigned char *s, size_t len, int *out) {
    int n = 0;
    if (r->kind == TOK_BYTE_BPE) {
        for (size_t i = 0; i < len; i++) out[n++] = ref_lookup(v, (const char *)s + i, 1);
        return ref_merge_rank(v, r, out, n);
    }
    if (len && r->dummy) out[n++] = ref_lookup(v, " ", 1);
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        while (j < len && j - i < 4 && (s[j] & 0xC0) == 0x80) j++;
        int id = ref_lookup(v, (const char *)s + i, (uint32_t)(j - i));
        if (id < 0 && r->merges && j - i == 3 && !memcmp(s + i, "\xE2\x96\x81", 3)) id = ref_lookup(v, " ", 1);
        if (id >= 0) out[n++] = id;
        else
            for (size_t k = i; k < j; k++) {
                char name[8];
                snprintf(name, sizeof name, "<0x%02X>", s[k]);
                out[n++] = ref_lookup(v, name, 6);
                if (out[n - 1] < 0) return -1;
            }
        i = j;
    }
    return r->merges ? ref_merge_rank(v, r, out, n) : ref_merge_score(v, out, n);
}

// How added token k is spelled in text: kind 0 pieces store U+2581 as a space.
static size_t spelling(const Vocab *v, const Rules *r, int k, char *out) {
    size_t n = 0;
    const char *p = v->str[r->added[k][0]];
    for (uint32_t i = 0; i < v->len[r->added[k][0]]; i++) {
        if (r->kind == TOK_SENTENCEPIECE && p[i] == ' ') memcpy(out + n, "\xE2\x96\x81", 3), n += 3;
        else out[n++] = p[i];
    }
    return n;
}

// The whole text: added tokens found leftmost first, the longest there, special ones only with
// TOKE_SPECIAL (a special spelling without it is text, and the search goes on after it).
static int ref_encode(const Vocab *v, const Rules *r, const unsigned char *s, size_t len, unsigned opts, int bos,
                      int *out) {
    int n = 0;
    if (opts & TOKE_ADD_BOS) out[n++] = bos;
    size_t run = 0, at = 0;
    while (at < len) {
        int found = -1;
        size_t start = len, flen = 0;
        for (size_t j = at; j < len && found < 0; j++)
            for (int k = 0; k < r->na; k++) {
                char sp[256];
                size_t sl = spelling(v, r, k, sp);
                if (sl <= len - j && !memcmp(s + j, sp, sl) && (found < 0 || sl > flen))
                    found = k, start = j, flen = sl;
            }
        if (found < 0) break;
        at = start + flen;
        if ((r->added[found][1] & TOKA_SPECIAL) && !(opts & TOKE_SPECIAL)) continue;
        int m = ref_run(v, r, s + run, start - run, out + n);
        if (m < 0) return -1;
        n += m;
        out[n++] = (int)r->added[found][0];
        run = at;
    }
    int m = ref_run(v, r, s + run, len - run, out + n);
    return m < 0 ? -1 : n + m;
}

// tokenizer_encode against ref_encode on one text.
static void check_rules(const Tokenizer *t, const Vocab *v, const Rules *r, const unsigned char *s, size_t len,
                        unsigned opts, const char *what) {
    size_t cap = 2 * len + 3;
    int *a = malloc(sizeof(int) * cap), *b = malloc(sizeof(int) * cap);
    char err[256];
    int na = tokenizer_encode(t, (const char *)s, len, opts, a, (int)cap, err, sizeof err);
    int nb = ref_encode(v, r, s, len, opts, t->bos_id, b);
    if (na != nb || memcmp(a, b, sizeof(int) * (size_t)(na > 0 ? na : 0))) {
        print_error("%s: \"%.*s\" (%zu bytes), tokenizer.c gives %d ids (%s), naive gives %d\n", what,
                    (int)(len < 80 ? len : 80), (const char *)s, len, na, na < 0 ? err : "", nb);
        for (int i = 0; i < na && i < nb; i++)
            if (a[i] != b[i]) {
                print_error("  first difference at %d: %d vs %d\n", i, a[i], b[i]);
                break;
            }
        fail();
    }
    free(a);
    free(b);
}

// llama2.c's rules: no merges, no added tokens, BOS when the tokenizer has one.
static void check_same(const Tokenizer *t, const Vocab *v, const unsigned char *s, size_t len, const char *what) {
    Rules r = {TOK_SENTENCEPIECE, (t->flags & TOKF_DUMMY_PREFIX) != 0, NULL, 0, NULL, 0, NULL};
    check_rules(t, v, &r, s, len, t->bos_id >= 0 ? TOKE_ADD_BOS : 0, what);
}

// decode(encode(s)) == s: concatenating the decoded pieces gives the text back.
static void check_round_trip(const Tokenizer *t, const char *s, size_t len, const char *what) {
    int *ids = malloc(sizeof(int) * (len + 3));
    char err[256], *back = malloc(len + 64);
    int n = tokenizer_encode(t, s, len, t->bos_id >= 0 ? TOKE_ADD_BOS : 0, ids, (int)len + 3, err, sizeof err);
    if (n < 0) fail_msg("%s: %s", what, err);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t pl;
        const char *p = tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], &pl);
        assert_non_null(p);
        if (at + pl > len) fail_msg("%s: decoding gives more bytes than the text", what);
        memcpy(back + at, p, pl);
        at += pl;
    }
    if (at != len || memcmp(back, s, len))
        fail_msg("%s: decode(encode(text)) differs from the %zu-byte text", what, len);
    free(ids);
    free(back);
}

// ---- fixtures ----

static Vocab llama_vocab, tok512_vocab;
static Tokenizer llama_tok, tok512_tok;

static int setup(void **state) {
    (void)state;
    char err[256];
    size_t n;
    llama_vocab = vocab_from_llama2c(SHARED "models/tokenizer.bin");
    tok512_vocab = vocab_from_llama2c(SHARED "models/tok512.bin");
    unsigned char *b = make_blob(&llama_vocab, NULL, 0, NULL, 0, &n);
    if (tokenizer_init(&llama_tok, b, n, TOK_SENTENCEPIECE, TOKF_DUMMY_PREFIX | TOKF_ADD_BOS, 1, 2, err, sizeof err))
        fail_msg("tokenizer.bin blob: %s", err);
    free(b);
    char *f = read_file(SHARED "models/tok512.bin", &n);
    if (tokenizer_init_llama2c(&tok512_tok, f, n, 512, err, sizeof err)) fail_msg("tok512.bin: %s", err);
    free(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tokenizer_free(&llama_tok);
    tokenizer_free(&tok512_tok);
    vocab_free(&llama_vocab);
    vocab_free(&tok512_vocab);
    return 0;
}

// ---- llama2.c's own cases ----

// The prompts and ids of ../shared/expected/tokenizer_bin_encode_cases.json, read with just
// enough JSON for that file: strings with escapes, arrays of integers.
static const char *json_string(const char *p, char *out, size_t *len) {
    *len = 0;
    for (p++; *p != '"'; p++) {
        if (*p != '\\') {
            out[(*len)++] = *p;
            continue;
        }
        p++;
        unsigned cp = 0;
        switch (*p) {
        case 'n': out[(*len)++] = '\n'; break;
        case 't': out[(*len)++] = '\t'; break;
        case 'r': out[(*len)++] = '\r'; break;
        case 'u':
            sscanf(p + 1, "%4x", &cp);
            p += 4;
            if (cp < 0x80) out[(*len)++] = (char)cp;
            else if (cp < 0x800) out[(*len)++] = (char)(0xC0 | cp >> 6), out[(*len)++] = (char)(0x80 | (cp & 63));
            else {
                out[(*len)++] = (char)(0xE0 | cp >> 12);
                out[(*len)++] = (char)(0x80 | (cp >> 6 & 63));
                out[(*len)++] = (char)(0x80 | (cp & 63));
            }
            break;
        default: out[(*len)++] = *p;
        }
    }
    return p + 1;
}

static void test_llama2c_cases(void **state) {
    (void)state;
    size_t n;
    char *json = read_file(SHARED "expected/tokenizer_bin_encode_cases.json", &n), err[256];
    int cases = 0;
    for (const char *p = strstr(json, "\"prompt\""); p; p = strstr(p, "\"prompt\"")) {
        char prompt[4096];
        size_t plen;
        p = json_string(strchr(p + 8, '"'), prompt, &plen);
        const char *bos = strstr(p, "\"bos\"");
        assert_true(bos && !strncmp(bos, "\"bos\": true", 11)); // every case starts with BOS
        const char *a = strchr(strstr(p, "\"expected_tokens\""), '[') + 1;
        int want[1024], nw = 0, got[1024];
        while (*a != ']') {
            char *e;
            long x = strtol(a, &e, 10);
            if (e == a) {
                a++;
                continue;
            }
            want[nw++] = (int)x;
            a = e;
        }
        p = a;
        int ng = tokenizer_encode(&llama_tok, prompt, plen, TOKE_ADD_BOS, got, 1024, err, sizeof err);
        if (ng != nw || memcmp(got, want, sizeof(int) * (size_t)nw))
            fail_msg("case %d \"%.40s\": %d ids, llama2.c gives %d", cases, prompt, ng, nw);
        check_same(&llama_tok, &llama_vocab, (const unsigned char *)prompt, plen, "llama2.c case");
        cases++;
    }
    assert_int_equal(cases, 5);
    free(json);
}

// ---- tricky and random strings against the naive encoder ----

static const char *tricky[] = {
    "",
    " ",
    "  ",
    "   x",
    "x   ",
    "\n",
    "\n\n\n",
    "\t\t tabs \t",
    "Hello world",
    "hello, World!  ",
    "naïve café résumé Ångström façade jalapeño Straße",
    "e\xCC\x81 a\xCC\x88",
    "日本語のテキスト、中文文本，한국어",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🇫🇷❤️",
    "1234567890 3.14159 -42 1,000,000 0x1F",
    "        indented\n        code();",
    "<0x41> <s> </s> <unk>",
    "a\xff"
    "b\x80\x80\x80\x80\x80"
    "c\xC3",
    "\xC3\x28 \xE2\x82 \xF0\x9F\x98",
    "\xF4\x90\x80\x80 \xED\xA0\x80 \xC0\xAF",
    "A\x80",
    "\x80",
    "\xF0\x9F\x98\x80\x80",
    "Once upon a time, there was a little girl named Lily.",
    "I'm sure they'll say it's what we've done.",
};

static void test_tricky_strings(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof tricky / sizeof tricky[0]; i++) {
        size_t len = strlen(tricky[i]);
        check_same(&llama_tok, &llama_vocab, (const unsigned char *)tricky[i], len, tricky[i]);
        check_same(&tok512_tok, &tok512_vocab, (const unsigned char *)tricky[i], len, tricky[i]);
        check_round_trip(&llama_tok, tricky[i], len, tricky[i]);
        check_round_trip(&tok512_tok, tricky[i], len, tricky[i]);
    }
    // NUL bytes count when the length says so.
    const char nul[] = "a\0b\0\0 c";
    check_same(&llama_tok, &llama_vocab, (const unsigned char *)nul, sizeof nul - 1, "NUL bytes");
    check_round_trip(&llama_tok, nul, sizeof nul - 1, "NUL bytes");
}

// Random text from a pool: UTF-8 characters of several lengths, spaces, digits, bytes.
static size_t random_text(unsigned char *s, size_t max, int mode) {
    static const char *pool[] = {"a", "b", "e", "t", "h", " ",  " ",  "  ", "\n", "th", "he", "in", "1", "9", ".",
                                 ",", "'", "é", "ü", "ß", "日", "本", "😀",  "€",  "\t", "A",  "Z",  "x", "q"};
    size_t n = 0, want = rnd() % max;
    while (n < want) {
        if (mode == 1) {
            s[n++] = (unsigned char)rnd();
        } else if (mode == 2 && rnd() % 8 == 0) {
            s[n++] = (unsigned char)(0x80 + rnd() % 0x80);
        } else {
            const char *p = pool[rnd() % (sizeof pool / sizeof pool[0])];
            size_t l = strlen(p);
            if (n + l > max) break;
            memcpy(s + n, p, l);
            n += l;
        }
    }
    return n;
}

static void test_random_against_naive(void **state) {
    (void)state;
    unsigned char s[400];
    for (int k = 0; k < 300; k++) {
        size_t n = random_text(s, k < 100 ? 40 : sizeof s, k % 3);
        check_same(&tok512_tok, &tok512_vocab, s, n, "random text, tok512");
        check_round_trip(&tok512_tok, (const char *)s, n, "random text, tok512");
        if (k % 3 == 0) {
            check_same(&llama_tok, &llama_vocab, s, n, "random text, tokenizer.bin");
            check_round_trip(&llama_tok, (const char *)s, n, "random text, tokenizer.bin");
        }
    }
}

// A few KB of real text: long enough for the heap to matter, short enough for the naive loop.
static void test_long_text_against_naive(void **state) {
    (void)state;
    size_t n;
    char *text = read_file(SHARED "data/tinystories_sample.txt", &n);
    check_same(&llama_tok, &llama_vocab, (const unsigned char *)text, n, "tinystories_sample.txt");
    check_same(&tok512_tok, &tok512_vocab, (const unsigned char *)text, n, "tinystories_sample.txt");
    free(text);
    text = read_file(SHARED "data/tinyshakespeare.txt", &n);
    check_same(&llama_tok, &llama_vocab, (const unsigned char *)text + 10000, 3000, "tinyshakespeare.txt");
    free(text);
}

// Not a test of speed (nothing here depends on time): a 1 MB prompt must finish, and the
// time is printed for the record.
static void test_long_prompt(void **state) {
    (void)state;
    size_t n;
    char *text = read_file(SHARED "data/tinyshakespeare.txt", &n), err[256];
    int *ids = malloc(sizeof(int) * (n + 3));
    clock_t c0 = clock();
    int k = tokenizer_encode(&llama_tok, text, n, TOKE_ADD_BOS, ids, (int)n + 3, err, sizeof err);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    if (k < 0) fail_msg("%s", err);
    print_message("tokenizer.bin: %zu bytes -> %d tokens in %.3f s CPU\n", n, k, dt);
    check_round_trip(&llama_tok, text, n, "tinyshakespeare.txt");
    free(ids);
    free(text);
}

static void test_decode(void **state) {
    (void)state;
    size_t len;
    const char *p = tokenizer_decode(&llama_tok, 1, 13, &len); // <0x0A>
    assert_int_equal(len, 1);
    assert_int_equal(p[0], '\n');
    p = tokenizer_decode(&llama_tok, 1, 306, &len); // " I" after BOS loses its space
    assert_int_equal(len, 1);
    assert_memory_equal(p, "I", 1);
    p = tokenizer_decode(&llama_tok, 306, 306, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(p, " I", 2);
    tokenizer_decode(&llama_tok, 0, 1, &len);
    assert_int_equal(len, 0);
    tokenizer_decode(&llama_tok, 0, 2, &len);
    assert_int_equal(len, 0);
    assert_null(tokenizer_decode(&llama_tok, 0, 32000, &len));
    assert_null(tokenizer_decode(&llama_tok, 0, -1, &len));
    char err[256];
    int ids[4];
    assert_int_equal(tokenizer_encode(&llama_tok, "hello world", 11, TOKE_ADD_BOS, ids, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 2 tokens"));
}

// llama2.c compares scores as floats, so -0 and +0 tie and the leftmost pair wins.
static void test_signed_zero_scores(void **state) {
    (void)state;
    char *str[] = {"a", "b", "ab", "ba"};
    uint32_t len[] = {1, 1, 2, 2};
    float score[] = {-1e30f, -1e30f, -0.0f, 0.0f};
    Vocab v = {4, str, len, score, NULL};
    size_t n;
    unsigned char *blob = make_blob(&v, NULL, 0, NULL, 0, &n);
    Tokenizer t;
    char err[256];
    assert_int_equal(tokenizer_init(&t, blob, n, 0, 0, -1, -1, err, sizeof err), 0);
    int ids[4];
    assert_int_equal(tokenizer_encode(&t, "aba", 3, 0, ids, 4, err, sizeof err), 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 0);
    tokenizer_free(&t);
    free(blob);
}

// ---- safe printing ----

// Independent check: well-formed UTF-8 with no control characters but \t and \n (a \r would
// let a model overwrite the line it wrote).
static int printable_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        uint32_t cp;
        size_t k;
        if (c < 0x80) cp = c, k = 1;
        else if ((c & 0xE0) == 0xC0) cp = c & 0x1F, k = 2;
        else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, k = 3;
        else if ((c & 0xF8) == 0xF0) cp = c & 0x07, k = 4;
        else return 0;
        if (i + k > n) return 0;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        if ((cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp <= 0x9F)) return 0;
        i += k;
    }
    return 1;
}

static size_t sanitize_chunks(const unsigned char *s, size_t n, char *out, int random_splits) {
    TokSanitizer st = {0};
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = random_splits ? 1 + rnd() % 5 : n;
        if (k > n - i) k = n - i;
        o += tokenizer_sanitize(&st, (const char *)s + i, k, out + o, 0);
        i += k;
    }
    return o + tokenizer_sanitize(&st, NULL, 0, out + o, 1);
}

static void test_sanitize(void **state) {
    (void)state;
    unsigned char s[200];
    char a[3 * 200 + 12], b[3 * 200 + 12];
    for (int k = 0; k < 2000; k++) {
        size_t n = random_text(s, sizeof s, k % 3);
        size_t na = sanitize_chunks(s, n, a, 0), nb = sanitize_chunks(s, n, b, 1);
        assert_true(na <= 3 * n + 12);
        if (na != nb || memcmp(a, b, na)) fail_msg("sanitize output depends on how the bytes are split");
        if (!printable_utf8((unsigned char *)a, na)) fail_msg("sanitize output is not printable UTF-8");
        int clean = printable_utf8(s, n);
        if (clean && (na != n || memcmp(a, s, n))) fail_msg("sanitize changed printable UTF-8");
    }
    const char *in = "a\x1b[31mb\x07\r\xC2\x9B"
                     "c\xE2\x82\xAC\xFF\xE2\x82"
                     "d";
    size_t n = tokenizer_sanitize(&(TokSanitizer){0}, in, strlen(in), a, 1);
    const char *want = "a[31mbc\xE2\x82\xAC\xEF\xBF\xBD\xEF\xBF\xBD"
                       "d";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(a, want, n);
}

// ---- merging by rank, on made-up and real vocabularies ----

// Appends a piece of len bytes (score 0) to v, whose arrays have room; returns its id.
static int vocab_push(Vocab *v, const char *p, size_t len) {
    v->str[v->n] = malloc(len + 1);
    memcpy(v->str[v->n], p, len);
    v->len[v->n] = (uint32_t)len;
    v->score[v->n] = 0.0f;
    return v->n++;
}

static Vocab vocab_alloc(int cap) {
    Vocab v = {0};
    v.str = malloc(sizeof(char *) * (size_t)cap);
    v.len = malloc(sizeof(uint32_t) * (size_t)cap);
    v.score = malloc(sizeof(float) * (size_t)cap);
    return v;
}

// The id of the piece spelled s, added to v (and v reindexed) if it is not there.
static int vocab_find_or_push(Vocab *v, const char *s, size_t len) {
    int id = ref_lookup(v, s, (uint32_t)len);
    if (id >= 0) return id;
    id = vocab_push(v, s, len);
    free(v->sorted);
    vocab_index(v);
    return id;
}

// The 256 bytes as pieces 0..255, then nm random merges over "abc" at random ranks, so that
// ranks do not follow creation order (a merge may make a pair of lower rank than its own).
static Vocab random_merges(uint32_t (*merges)[2], int nm, int extra) {
    Vocab v = vocab_alloc(256 + nm + extra);
    for (int i = 0; i < 256; i++) vocab_push(&v, (char[]){(char)i}, 1);
    vocab_index(&v);
    for (int done = 0; done < nm;) {
        uint32_t a = rnd() % 3 ? (uint32_t) "abc"[rnd() % 3] : 256 + rnd() % (uint32_t)(v.n - 255) - 1;
        uint32_t b = rnd() % 3 ? (uint32_t) "abc"[rnd() % 3] : 256 + rnd() % (uint32_t)(v.n - 255) - 1;
        if (a >= (uint32_t)v.n || b >= (uint32_t)v.n || (a < 256 && !strchr("abc", (int)a)) ||
            (b < 256 && !strchr("abc", (int)b)) || v.len[a] + v.len[b] > 12)
            continue;
        int dup = 0;
        for (int r = 0; r < done; r++) dup |= merges[r][0] == a && merges[r][1] == b;
        if (dup) continue;
        char buf[32];
        memcpy(buf, v.str[a], v.len[a]);
        memcpy(buf + v.len[a], v.str[b], v.len[b]);
        vocab_find_or_push(&v, buf, v.len[a] + v.len[b]);
        int at = (int)(rnd() % (uint32_t)(done + 1));
        memmove(merges[at + 1], merges[at], sizeof merges[0] * (size_t)(done - at));
        merges[at][0] = a, merges[at][1] = b;
        done++;
    }
    return v;
}

// Both kinds merge by rank as Hugging Face's BPE does: one pair at a time, the lowest rank
// first, the leftmost on ties (GPT-2's own loop, all of a rank at once, differs for such ranks).
static void test_rank_merge_order(void **state) {
    (void)state;
    for (int trial = 0; trial < 20; trial++) {
        uint32_t merges[41][2];
        Vocab v = random_merges(merges, 40, 0);
        Rules r = {TOK_BYTE_BPE, 0, (const uint32_t(*)[2])merges, 40, NULL, 0, NULL};
        rules_index(&r);
        size_t bytes;
        unsigned char *blob = make_blob(&v, r.merges, 40, NULL, 0, &bytes);
        for (int kind = 0; kind < 2; kind++) {
            Tokenizer t;
            char err[256];
            if (tokenizer_init(&t, blob, bytes, kind, 0, -1, -1, err, sizeof err)) fail_msg("%s", err);
            r.kind = kind; // text of "abc" only: one chunk of GPT-2's split, one piece per character
            for (int k = 0; k < 200; k++) {
                unsigned char s[64];
                size_t n = 1 + rnd() % 40;
                for (size_t i = 0; i < n; i++) s[i] = (unsigned char)"abc"[rnd() % 3];
                check_rules(&t, &v, &r, s, n, 0, kind ? "random merges, kind 1" : "random merges, kind 0");
            }
            tokenizer_free(&t);
        }
        free(r.sorted);
        free(blob);
        vocab_free(&v);
    }
}

// tokenizer.bin's vocabulary as Hugging Face's converter turns a SentencePiece model into
// merges: every split of a piece into two pieces, the pieces in score order.
static int sp_merges(const Vocab *v, uint32_t (**merges)[2]) {
    int *order = malloc(sizeof(int) * (size_t)v->n), n = 0, cap = 1024;
    for (int i = 0; i < v->n; i++) order[i] = i;
    for (int i = 1; i < v->n; i++) // insertion sort by score, stable: ties keep id order
        for (int j = i; j > 0 && v->score[order[j]] > v->score[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1], order[j - 1] = x;
        }
    *merges = malloc(sizeof **merges * (size_t)cap);
    for (int k = 0; k < v->n; k++) {
        int id = order[k];
        if (v->len[id] < 2 || (v->len[id] == 6 && !memcmp(v->str[id], "<0x", 3))) continue;
        for (uint32_t cut = 1; cut < v->len[id]; cut++) {
            int a = ref_lookup(v, v->str[id], cut), b = ref_lookup(v, v->str[id] + cut, v->len[id] - cut);
            if (a < 0 || b < 0) continue;
            if (n == cap) *merges = realloc(*merges, sizeof **merges * (size_t)(cap *= 2));
            (*merges)[n][0] = (uint32_t)a, (*merges)[n][1] = (uint32_t)b;
            n++;
        }
    }
    free(order);
    return n;
}

// Kind 0 with merges on a real vocabulary: the dummy prefix, byte fallback, U+2581 as a space.
static void test_sp_merges_against_naive(void **state) {
    (void)state;
    uint32_t(*merges)[2];
    int nm = sp_merges(&tok512_vocab, &merges);
    size_t bytes;
    unsigned char *blob = make_blob(&tok512_vocab, (const uint32_t(*)[2])merges, nm, NULL, 0, &bytes);
    Tokenizer t;
    char err[256];
    if (tokenizer_init(&t, blob, bytes, TOK_SENTENCEPIECE, TOKF_DUMMY_PREFIX | TOKF_ADD_BOS, 1, 2, err, sizeof err))
        fail_msg("%s", err);
    Rules r = {TOK_SENTENCEPIECE, 1, (const uint32_t(*)[2])merges, nm, NULL, 0, NULL};
    rules_index(&r);
    unsigned char s[400];
    for (int k = 0; k < 300; k++) {
        size_t n = random_text(s, k < 100 ? 40 : sizeof s, k % 3);
        for (size_t i = 0; i + 3 <= n && k % 2; i += 1 + rnd() % 16) memcpy(s + i, "\xE2\x96\x81", 3);
        check_rules(&t, &tok512_vocab, &r, s, n, k % 4 ? TOKE_ADD_BOS : 0, "tok512 with merges");
    }
    size_t n;
    char *text = read_file(SHARED "data/tinystories_sample.txt", &n);
    check_rules(&t, &tok512_vocab, &r, (const unsigned char *)text, n, TOKE_ADD_BOS, "tinystories, merges");
    check_round_trip(&t, text, n, "tinystories, merges");
    // A U+2581 in the text is the space it stands for.
    int a[8], b[8];
    assert_int_equal(tokenizer_encode(&t,
                                      "a\xE2\x96\x81"
                                      "b",
                                      5, 0, a, 8, err, sizeof err),
                     tokenizer_encode(&t, "a b", 3, 0, b, 8, err, sizeof err));
    assert_memory_equal(a, b, sizeof(int) * 2);
    free(text);
    free(r.sorted);
    tokenizer_free(&t);
    free(blob);
    free(merges);
}

// ---- added tokens ----

enum { A_UNK, A_BOS, A_EOS, A_BYTES }; // the added-token vocabulary's first ids, then its byte pieces

// A kind-0 vocabulary with merges and added tokens shaped like Gemma's and ChatML's: special
// "<s>", "</s>" (stop) and "<|im_end|>" (stop); non-special "<|im", "<s" and "  " (U+2581
// twice in text, which merging two spaces also makes).
typedef struct {
    Vocab v;
    uint32_t merges[8][2], added[8][2];
    int nm, na, im_end, im, two_spaces;
} AddedVocab;

static AddedVocab added_vocab(void) {
    AddedVocab av = {.v = vocab_alloc(512)};
    Vocab *v = &av.v;
    vocab_push(v, "<unk>", 5), vocab_push(v, "<s>", 3), vocab_push(v, "</s>", 4);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        vocab_push(v, name, 6);
    }
    const char *chars[] = {" ", "a", "b", "c", "<", ">", "|", "_", "x", "i", "m", "e", "n", "d", "s"};
    for (size_t i = 0; i < sizeof chars / sizeof *chars; i++) vocab_push(v, chars[i], 1);
    vocab_index(v);
    const char *joins[][2] = {{" ", " "}, {" ", "a"}, {"a", "b"}, {" a", "b"}, {"b", "c"}, {"<", "|"}};
    for (size_t i = 0; i < sizeof joins / sizeof *joins; i++) {
        char buf[8];
        snprintf(buf, sizeof buf, "%s%s", joins[i][0], joins[i][1]);
        av.merges[av.nm][0] = (uint32_t)ref_lookup(v, joins[i][0], (uint32_t)strlen(joins[i][0]));
        av.merges[av.nm][1] = (uint32_t)ref_lookup(v, joins[i][1], (uint32_t)strlen(joins[i][1]));
        vocab_find_or_push(v, buf, strlen(buf));
        av.nm++;
    }
    av.im_end = vocab_find_or_push(v, "<|im_end|>", 10);
    av.im = vocab_find_or_push(v, "<|im", 4);
    av.two_spaces = ref_lookup(v, "  ", 2);
    int lt_s = vocab_find_or_push(v, "<s", 2);
    const uint32_t added[][2] = {{A_BOS, TOKA_SPECIAL},
                                 {A_EOS, TOKA_SPECIAL | TOKA_STOP},
                                 {(uint32_t)av.im_end, TOKA_SPECIAL | TOKA_STOP},
                                 {(uint32_t)av.im, 0},
                                 {(uint32_t)lt_s, 0},
                                 {(uint32_t)av.two_spaces, 0}};
    av.na = (int)(sizeof added / sizeof *added);
    memcpy(av.added, added, sizeof added);
    return av;
}

static int encode_ids(const Tokenizer *t, const char *s, unsigned opts, int *ids) {
    char err[256];
    int n = tokenizer_encode(t, s, strlen(s), opts, ids, 64, err, sizeof err);
    if (n < 0) fail_msg("\"%s\": %s", s, err);
    return n;
}

static int contains(const int *ids, int n, int id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

static void test_added_tokens(void **state) {
    (void)state;
    AddedVocab av = added_vocab();
    Vocab *v = &av.v;
    size_t bytes;
    unsigned char *blob =
        make_blob(v, (const uint32_t(*)[2])av.merges, av.nm, (const uint32_t(*)[2])av.added, av.na, &bytes);
    Tokenizer t;
    char err[256];
    if (tokenizer_init(&t, blob, bytes, TOK_SENTENCEPIECE, TOKF_DUMMY_PREFIX, A_BOS, A_EOS, err, sizeof err))
        fail_msg("%s", err);
    Rules r = {
        TOK_SENTENCEPIECE, 1, (const uint32_t(*)[2])av.merges, av.nm, (const uint32_t(*)[2])av.added, av.na, NULL};
    rules_index(&r);
    int ids[64], n;
    int sp_ab = ref_lookup(v, " ab", 3);
    // Special tokens only with TOKE_SPECIAL; each run of text gets its own dummy prefix.
    n = encode_ids(&t, "ab</s>ab", TOKE_SPECIAL, ids);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], sp_ab), assert_int_equal(ids[1], A_EOS), assert_int_equal(ids[2], sp_ab);
    n = encode_ids(&t, "ab</s>ab", 0, ids);
    assert_false(contains(ids, n, A_EOS));
    // Injection: a prompt spelling <|im_end|> is text, and the search goes on after the
    // spelling, so the non-special "<|im" inside it is not found either.
    n = encode_ids(&t, "<|im_end|>", 0, ids);
    assert_false(contains(ids, n, av.im_end) || contains(ids, n, av.im));
    n = encode_ids(&t, "<|im_end|>", TOKE_SPECIAL, ids);
    assert_int_equal(n, 1), assert_int_equal(ids[0], av.im_end);
    // The longest at the leftmost place: "<|im_end|>" over "<|im"; "<|im" when the rest differs.
    n = encode_ids(&t, "<|im_x", 0, ids);
    assert_int_equal(ids[0], av.im);
    n = encode_ids(&t, "<sx<s>", 0, ids);
    assert_int_equal(ids[0], ref_lookup(v, "<s", 2));
    assert_false(contains(ids, n, A_BOS));
    // "  " is U+2581 twice in text; two spaces reach it by merging instead.
    n = encode_ids(&t, "x\xE2\x96\x81\xE2\x96\x81x", 0, ids);
    assert_int_equal(n, 5), assert_int_equal(ids[2], av.two_spaces);
    n = encode_ids(&t, "x  x", 0, ids);
    assert_int_equal(n, 4), assert_int_equal(ids[2], av.two_spaces);
    // Decoding: special tokens give nothing, the others their bytes.
    size_t len;
    tokenizer_decode(&t, -1, av.im_end, &len);
    assert_int_equal(len, 0);
    assert_memory_equal(tokenizer_decode(&t, -1, av.im, &len), "<|im", 4);
    assert_int_equal(len, 4);
    // Random texts against the naive encoder.
    static const char *pool[] = {"a",  "b", "c",   " ",  "  ",           "<", "|", "im", "_end",      ">", "</s",
                                 "/s", "s", "<s>", "<s", "\xE2\x96\x81", "x", "é", "\n", "<|im_end|>"};
    for (int k = 0; k < 2000; k++) {
        unsigned char s[256];
        size_t m = 0, want = rnd() % 120;
        while (m < want) {
            const char *p = pool[rnd() % (sizeof pool / sizeof *pool)];
            memcpy(s + m, p, strlen(p));
            m += strlen(p);
        }
        check_rules(&t, v, &r, s, m, (unsigned)k % 4, "added tokens, kind 0");
    }
    tokenizer_free(&t);
    free(blob);
    free(r.sorted);
    vocab_free(v);
}

// Kind 1: added tokens spelled in "abc" with random merges, so that runs stay one chunk.
static void test_added_tokens_byte_level(void **state) {
    (void)state;
    for (int trial = 0; trial < 10; trial++) {
        uint32_t merges[31][2];
        Vocab v = random_merges(merges, 30, 3);
        uint32_t added[3][2] = {{(uint32_t)vocab_find_or_push(&v, "cab", 3), TOKA_SPECIAL | TOKA_STOP},
                                {(uint32_t)vocab_find_or_push(&v, "bb", 2), 0},
                                {(uint32_t)vocab_find_or_push(&v, "bbca", 4), 0}};
        Rules r = {TOK_BYTE_BPE, 0, (const uint32_t(*)[2])merges, 30, (const uint32_t(*)[2])added, 3, NULL};
        rules_index(&r);
        size_t bytes;
        unsigned char *blob = make_blob(&v, r.merges, 30, r.added, 3, &bytes);
        Tokenizer t;
        char err[256];
        if (tokenizer_init(&t, blob, bytes, TOK_BYTE_BPE, 0, -1, -1, err, sizeof err)) fail_msg("%s", err);
        for (int k = 0; k < 200; k++) {
            unsigned char s[64];
            size_t n = 1 + rnd() % 40;
            for (size_t i = 0; i < n; i++) s[i] = (unsigned char)"abc"[rnd() % 3];
            check_rules(&t, &v, &r, s, n, (unsigned)k % 2 ? TOKE_SPECIAL : 0, "added tokens, kind 1");
        }
        assert_true(tokenizer_is_stop(&t, (int)added[0][0]));
        assert_false(tokenizer_is_stop(&t, (int)added[1][0]));
        tokenizer_free(&t);
        free(r.sorted);
        free(blob);
        vocab_free(&v);
    }
}

static void test_is_stop(void **state) {
    (void)state;
    AddedVocab av = added_vocab();
    size_t bytes;
    unsigned char *blob =
        make_blob(&av.v, (const uint32_t(*)[2])av.merges, av.nm, (const uint32_t(*)[2])av.added, av.na, &bytes);
    for (int bos_stops = 0; bos_stops < 2; bos_stops++) {
        Tokenizer t;
        char err[256];
        unsigned flags = bos_stops ? TOKF_BOS_STOPS : 0;
        if (tokenizer_init(&t, blob, bytes, TOK_SENTENCEPIECE, flags, A_BOS, A_EOS, err, sizeof err))
            fail_msg("%s", err);
        assert_true(tokenizer_is_stop(&t, A_EOS));
        assert_true(tokenizer_is_stop(&t, av.im_end));      // TOKA_STOP
        assert_false(tokenizer_is_stop(&t, av.im));         // added, not a stop
        assert_false(tokenizer_is_stop(&t, A_BYTES + 'a')); // an ordinary piece
        assert_int_equal(tokenizer_is_stop(&t, A_BOS), bos_stops);
        assert_false(tokenizer_is_stop(&t, -1) || tokenizer_is_stop(&t, t.n_pieces));
        tokenizer_free(&t);
    }
    // Without an added table only eos (and bos under TOKF_BOS_STOPS) stop: llama2.c's rule.
    assert_true(tokenizer_is_stop(&tok512_tok, 2) && tokenizer_is_stop(&tok512_tok, 1));
    assert_false(tokenizer_is_stop(&tok512_tok, 3));
    free(blob);
    vocab_free(&av.v);
}

// ---- learned vocabularies ----

static void learned_round_trip(const void *blob, size_t bytes, const char *text, size_t n, const char *what,
                               int *ntok) {
    Tokenizer t;
    char err[256];
    if (tokenizer_init(&t, blob, bytes, TOK_SENTENCEPIECE, 0, -1, -1, err, sizeof err)) fail_msg("%s: %s", what, err);
    int *ids = malloc(sizeof(int) * (n + 3));
    *ntok = tokenizer_encode(&t, text, n, 0, ids, (int)n + 3, err, sizeof err);
    if (*ntok < 0) fail_msg("%s: %s", what, err);
    check_round_trip(&t, text, n, what);
    // The fast encoder and the naive one agree on the learned vocabulary too.
    Vocab v = vocab_from_blob(blob);
    check_same(&t, &v, (const unsigned char *)text, n < 1500 ? n : 1500, what);
    vocab_free(&v);
    free(ids);
    tokenizer_free(&t);
}

static void test_learn_chars(void **state) {
    (void)state;
    size_t n, bytes;
    char *text = read_file(SHARED "data/tinyshakespeare.txt", &n), err[256];
    void *blob;
    if (tokenizer_learn_chars(text, n, &blob, &bytes, err, sizeof err)) fail_msg("%s", err);
    Vocab v = vocab_from_blob(blob);
    assert_int_equal(v.n, 65); // as the README of ../shared says
    for (int i = 1; i < v.n; i++) assert_true((unsigned char)v.str[i - 1][0] < (unsigned char)v.str[i][0]);
    assert_int_equal(v.str[0][0], '\n');
    vocab_free(&v);
    int k;
    learned_round_trip(blob, bytes, text, n, "chars of tinyshakespeare", &k);
    assert_int_equal(k, (int)n);
    free(blob);
    // Multi-byte characters, invalid bytes and NULs all become pieces.
    unsigned char s[3000];
    for (int trial = 0; trial < 20; trial++) {
        size_t m = random_text(s, sizeof s, trial % 3);
        if (!m) continue;
        if (tokenizer_learn_chars((char *)s, m, &blob, &bytes, err, sizeof err)) fail_msg("%s", err);
        learned_round_trip(blob, bytes, (char *)s, m, "chars of random text", &k);
        free(blob);
    }
    free(text);
}

static void test_learn_bpe(void **state) {
    (void)state;
    size_t n, bytes;
    char *text = read_file(SHARED "data/tinyshakespeare.txt", &n), err[256];
    void *blob;
    clock_t c0 = clock();
    if (tokenizer_learn_bpe(text, n, 1024, NULL, &blob, &bytes, err, sizeof err)) fail_msg("%s", err);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    Vocab v = vocab_from_blob(blob);
    assert_int_equal(v.n, 1024);
    for (int i = 0; i < 256; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", i);
        assert_int_equal(v.len[i], 6);
        assert_memory_equal(v.str[i], name, 6);
    }
    for (int i = 0; i < v.n; i++)
        for (int j = 0; j < i; j++)
            if (v.len[i] == v.len[j] && !memcmp(v.str[i], v.str[j], v.len[i]))
                fail_msg("pieces %d and %d repeat", j, i);
    vocab_free(&v);
    int k;
    learned_round_trip(blob, bytes, text, n, "BPE of tinyshakespeare", &k);
    print_message("learn_bpe: tinyshakespeare -> 1024 pieces in %.2f s CPU; %zu bytes encode to %d tokens\n", dt, n, k);
    assert_true(k < (int)n / 2); // a learned vocabulary compresses its own text
    free(blob);
    // Random bytes (mostly invalid UTF-8), and text with many distinct characters: more
    // than fit, so the rarest fall back to bytes.
    unsigned char s[20000];
    for (int trial = 0; trial < 6; trial++) {
        size_t m = random_text(s, sizeof s, trial % 3);
        int vs = trial < 3 ? 300 : 256 + 8;
        if (tokenizer_learn_bpe((char *)s, m, vs, NULL, &blob, &bytes, err, sizeof err)) fail_msg("%s", err);
        learned_round_trip(blob, bytes, (char *)s, m, "BPE of random text", &k);
        assert_true(get32(blob) <= (uint32_t)vs);
        free(blob);
    }
    // Text spelling a byte piece must not learn a piece that decodes as a byte.
    const char *tricky_text = "<0x41><0x41><0x41><0x41> <0x41><0x41>";
    if (tokenizer_learn_bpe(tricky_text, strlen(tricky_text), 400, NULL, &blob, &bytes, err, sizeof err))
        fail_msg("%s", err);
    learned_round_trip(blob, bytes, tricky_text, strlen(tricky_text), "BPE of byte-piece names", &k);
    free(blob);
    assert_int_equal(tokenizer_learn_bpe(text, n, 100, NULL, &blob, &bytes, err, sizeof err), -1);
    free(text);
}

// ---- hostile blobs ----

static void expect_refused(const void *blob, size_t n, int kind, const char *want) {
    Tokenizer t;
    char err[256] = "";
    if (!tokenizer_init(&t, blob, n, kind, 0, -1, -1, err, sizeof err)) fail_msg("accepted a bad blob (%s)", want);
    if (want && !strstr(err, want)) fail_msg("error \"%s\" does not say \"%s\"", err, want);
    if (!err[0] || strchr(err, '\n')) fail_msg("error is not one line");
}

static void test_hostile_blobs(void **state) {
    (void)state;
    size_t n;
    unsigned char *blob = make_blob(&tok512_vocab, NULL, 0, NULL, 0, &n);
    Tokenizer t;
    char err[256];
    assert_int_equal(tokenizer_init(&t, blob, n, 0, 0, -1, -1, err, sizeof err), 0);
    tokenizer_free(&t);
    for (size_t cut = 0; cut < n; cut++) expect_refused(blob, cut, 0, NULL);
    unsigned char *big = malloc(n + 8);
    memcpy(big, blob, n);
    memset(big + n, 0, 8);
    expect_refused(big, n + 3, 0, "after the pieces");
    expect_refused(big, n + 8, 0, "merges");
    unsigned char *b = malloc(n);
#define MUTATE(off, val, kind, msg) memcpy(b, blob, n), put32(b + (off), (val)), expect_refused(b, n, kind, msg)
    MUTATE(0, 0, 0, "n_pieces");
    MUTATE(0, 0xFFFFFFFFu, 0, "n_pieces");
    MUTATE(0, 513, 0, "ends inside piece 512");
    MUTATE(4, 1, 0, "merges");
    MUTATE(4, 0xFFFFFFFFu, 1, "merges");
    MUTATE(8, 6, 0, "max_piece_len");
    MUTATE(8, 0xFFFFFFFFu, 0, "max_piece_len");
    MUTATE(12, 1, 0, "1 added tokens need 8");
    MUTATE(12, 513, 0, "n_added 513 above n_pieces 512");
    MUTATE(12, 0xFFFFFFFFu, 0, "n_added");
    MUTATE(16 + 4, 0xFFFFFFFFu, 0, "runs past");
    MUTATE(16 + 4, 0x7FFFFFFFu, 0, "runs past");
    MUTATE(16, 0x7FC00000u, 0, "non-finite");
    MUTATE(16, 0x7F800000u, 0, "non-finite");
    memcpy(b, blob, n);
    assert_int_equal(tokenizer_init(&t, b, n, 2, 0, -1, -1, err, sizeof err), -1);
    assert_int_equal(tokenizer_init(&t, b, n, 0, 32, -1, -1, err, sizeof err), -1);
    assert_int_equal(tokenizer_init(&t, b, n, 0, TOKF_NFC, -1, -1, err, sizeof err), -1); // kind 1's flags
    assert_int_equal(tokenizer_init(&t, b, n, 0, TOK_PRE_LLAMA3 << TOKF_PRE_SHIFT, -1, -1, err, sizeof err), -1);
    assert_int_equal(tokenizer_init(&t, b, n, 1, (unsigned)TOK_PRE_KINDS << TOKF_PRE_SHIFT, -1, -1, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "pre-tokeniser"));
    assert_int_equal(tokenizer_init(&t, b, n, 0, 0, 512, -1, err, sizeof err), -1);
    assert_int_equal(tokenizer_init(&t, b, n, 0, 0, -1, -2, err, sizeof err), -1);
    // Random corruption: refused or usable, never a crash (ASan/UBSan builds catch the rest).
    for (int k = 0; k < 3000; k++) {
        memcpy(b, blob, n);
        for (int j = 0; j < 1 + (int)(rnd() % 4); j++) b[rnd() % (uint32_t)(k % 2 ? 64 : n)] = (unsigned char)rnd();
        if (!tokenizer_init(&t, b, n, (int)(rnd() % 2), rnd() % 2, -1, -1, err, sizeof err)) {
            unsigned char s[64];
            int ids[80];
            size_t m = random_text(s, sizeof s, 1);
            tokenizer_encode(&t, (char *)s, m, 0, ids, 80, err, sizeof err);
            tokenizer_free(&t);
        }
    }
    free(b);
    free(big);
    free(blob);

    // The 32000-piece blob cut at random places.
    blob = make_blob(&llama_vocab, NULL, 0, NULL, 0, &n);
    for (int k = 0; k < 200; k++) expect_refused(blob, rnd() % n, 0, NULL);
    free(blob);

    // Merges must stay inside the vocabulary and make pieces that exist.
    Vocab v = {0};
    v.n = 257;
    v.str = malloc(sizeof(char *) * 257);
    v.len = malloc(sizeof(uint32_t) * 257);
    v.score = calloc(257, sizeof(float));
    for (int i = 0; i < 256; i++) v.str[i] = malloc(1), v.str[i][0] = (char)i, v.len[i] = 1;
    v.str[256] = malloc(2), memcpy(v.str[256], "ab", 2), v.len[256] = 2;
    const uint32_t good[1][2] = {{'a', 'b'}}, outside[1][2] = {{'a', 257}}, missing[1][2] = {{'b', 'a'}};
    blob = make_blob(&v, good, 1, NULL, 0, &n);
    assert_int_equal(tokenizer_init(&t, blob, n, 1, 0, -1, -1, err, sizeof err), 0);
    int ids[8];
    assert_int_equal(tokenizer_encode(&t, "xab", 3, 0, ids, 8, err, sizeof err), 2);
    assert_int_equal(ids[1], 256);
    tokenizer_free(&t);
    assert_int_equal(tokenizer_init(&t, blob, n, 0, 0, -1, -1, err, sizeof err), 0); // kind 0 merges by rank too
    assert_int_equal(tokenizer_encode(&t, "xab", 3, 0, ids, 8, err, sizeof err), 2);
    assert_int_equal(ids[1], 256);
    tokenizer_free(&t);
    free(blob);
    blob = make_blob(&v, outside, 1, NULL, 0, &n);
    expect_refused(blob, n, 1, "outside the vocabulary");
    free(blob);
    blob = make_blob(&v, missing, 1, NULL, 0, &n);
    expect_refused(blob, n, 1, "not in the vocabulary");
    free(blob);
    vocab_free(&v);

    // A llama2.c file shorter than the model's vocabulary.
    char *f = read_file(SHARED "models/tok512.bin", &n);
    for (size_t cut = 0; cut < n; cut += 7)
        assert_int_equal(tokenizer_init_llama2c(&t, f, cut, 512, err, sizeof err), -1);
    assert_int_equal(tokenizer_init_llama2c(&t, f, n, 513, err, sizeof err), -1);
    assert_int_equal(tokenizer_init_llama2c(&t, f, n, 511, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than"));
    free(f);
}

// The added-token table: every entry checked, one line naming it.
static void test_added_table_refused(void **state) {
    (void)state;
    AddedVocab av = added_vocab();
    int empty = vocab_push(&av.v, "", 0);
    const struct {
        uint32_t id, attr;
        const char *want;
    } bad[] = {{(uint32_t)av.v.n, 0, "outside the vocabulary"},
               {0xFFFFFFFFu, 0, "outside the vocabulary"},
               {A_EOS, 0, "id 2 is listed twice"},
               {A_UNK, 4, "attributes 0x4 have unknown bits"},
               {A_UNK, 0x80000000u, "unknown bits"},
               {(uint32_t)empty, 0, "empty piece"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memcpy(av.added[av.na], (uint32_t[]){bad[k].id, bad[k].attr}, sizeof av.added[0]);
        size_t n;
        unsigned char *blob =
            make_blob(&av.v, (const uint32_t(*)[2])av.merges, av.nm, (const uint32_t(*)[2])av.added, av.na + 1, &n);
        expect_refused(blob, n, 0, bad[k].want);
        expect_refused(blob, n - 8, 0, "added tokens need"); // the last entry cut off
        free(blob);
    }
    size_t n;
    unsigned char *blob =
        make_blob(&av.v, (const uint32_t(*)[2])av.merges, av.nm, (const uint32_t(*)[2])av.added, av.na, &n);
    Tokenizer t;
    char err[256];
    assert_int_equal(tokenizer_init(&t, blob, n, 0, 0, -1, -1, err, sizeof err), 0);
    assert_int_equal(t.n_added, av.na);
    tokenizer_free(&t);
    unsigned char *big = malloc(n + 8);
    memcpy(big, blob, n);
    memset(big + n, 0, 8);
    expect_refused(big, n + 8, 0, "6 added tokens need 96");
    for (size_t cut = n - 8 * (size_t)av.na; cut < n; cut++) expect_refused(blob, cut, 0, "added tokens need");
    free(big);
    free(blob);
    vocab_free(&av.v);
}

// Without a byte fallback piece, an unknown character is an error, not a crash.
static void test_missing_byte_piece(void **state) {
    (void)state;
    char err[256], *text = "ab\xC3\xA9";
    void *blob;
    size_t bytes;
    assert_int_equal(tokenizer_learn_chars("ab", 2, &blob, &bytes, err, sizeof err), 0);
    Tokenizer t;
    assert_int_equal(tokenizer_init(&t, blob, bytes, 0, 0, -1, -1, err, sizeof err), 0);
    int ids[8];
    assert_int_equal(tokenizer_encode(&t, text, 4, 0, ids, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "0xC3"));
    assert_int_equal(tokenizer_encode(&t, text, 4, TOKE_ADD_BOS, ids, 8, err, sizeof err), -1); // no BOS
    assert_int_equal(tokenizer_encode(&t, text, 2, 0, ids, 8, err, sizeof err), 2);
    tokenizer_free(&t);
    assert_int_equal(tokenizer_init(&t, blob, bytes, 0, TOKF_DUMMY_PREFIX, -1, -1, err, sizeof err), -1);
    free(blob);
}

// A byte-level vocabulary may lack the pieces of the bytes that never occur in UTF-8 (0xC0,
// 0xC1, 0xF5..0xFF), as some real ones do: it loads, encodes any UTF-8 text as the naive
// reference does, and refuses bytes that would need a missing piece, naming the byte.
static void test_byte_level_without_unused_bytes(void **state) {
    (void)state;
    Vocab v = vocab_alloc(256 + 8);
    for (int b = 0; b < 256; b++)
        if (b != 0xC0 && b != 0xC1 && b < 0xF5) vocab_push(&v, (char[]){(char)b}, 1);
    vocab_index(&v);
    assert_int_equal(v.n, 243);
    const char *pairs[][2] = {{"a", "b"},           {"ab", "c"},       {"\xC3", "\xA9"}, {"\xE6", "\x97"},
                              {"\xE6\x97", "\xA5"}, {"c", "\xC3\xA9"}, {"\xF0", "\x9F"}};
    uint32_t merges[7][2];
    for (int i = 0; i < 7; i++) {
        int l = ref_lookup(&v, pairs[i][0], (uint32_t)strlen(pairs[i][0]));
        int r = ref_lookup(&v, pairs[i][1], (uint32_t)strlen(pairs[i][1]));
        assert_true(l >= 0 && r >= 0);
        merges[i][0] = (uint32_t)l, merges[i][1] = (uint32_t)r;
        char joined[16];
        snprintf(joined, sizeof joined, "%s%s", pairs[i][0], pairs[i][1]);
        vocab_find_or_push(&v, joined, strlen(joined));
    }
    Rules r = {TOK_BYTE_BPE, 0, (const uint32_t(*)[2])merges, 7, NULL, 0, NULL};
    rules_index(&r);
    size_t bytes;
    unsigned char *blob = make_blob(&v, r.merges, 7, NULL, 0, &bytes);
    Tokenizer t;
    char err[256];
    if (tokenizer_init(&t, blob, bytes, TOK_BYTE_BPE, 0, -1, -1, err, sizeof err)) fail_msg("%s", err);
    // letters only, so that GPT-2's split leaves one chunk, as the reference takes it
    const char *chars[] = {"a", "b", "c", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80" /* U+1F600 */};
    for (int k = 0; k < 300; k++) {
        unsigned char s[128];
        size_t n = 0;
        for (int m = 1 + (int)(rnd() % 20); m > 0; m--) {
            const char *c = chars[rnd() % 6];
            memcpy(s + n, c, strlen(c));
            n += strlen(c);
        }
        check_rules(&t, &v, &r, s, n, 0, "a vocabulary without the unused bytes");
    }
    const char *bad[][2] = {{"ab\xFF", "byte 0xFF at offset 2 has no piece in this vocabulary"},
                            {"\xC0\x80", "byte 0xC0 at offset 0 has no piece in this vocabulary"},
                            {"x\xF5\x80\x80\x80", "byte 0xF5 at offset 1 has no piece in this vocabulary"}};
    for (int k = 0; k < 3; k++) {
        int ids[16];
        assert_int_equal(tokenizer_encode(&t, bad[k][0], strlen(bad[k][0]), 0, ids, 16, err, sizeof err), -1);
        if (!strstr(err, bad[k][1])) fail_msg("'%s' does not say '%s'", err, bad[k][1]);
    }
    tokenizer_free(&t);
    free(r.sorted);
    free(blob);
    vocab_free(&v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama2c_cases),
        cmocka_unit_test(test_tricky_strings),
        cmocka_unit_test(test_random_against_naive),
        cmocka_unit_test(test_long_text_against_naive),
        cmocka_unit_test(test_long_prompt),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_signed_zero_scores),
        cmocka_unit_test(test_sanitize),
        cmocka_unit_test(test_rank_merge_order),
        cmocka_unit_test(test_sp_merges_against_naive),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_added_tokens_byte_level),
        cmocka_unit_test(test_is_stop),
        cmocka_unit_test(test_added_table_refused),
        cmocka_unit_test(test_byte_level_without_unused_bytes),
        cmocka_unit_test(test_learn_chars),
        cmocka_unit_test(test_learn_bpe),
        cmocka_unit_test(test_hostile_blobs),
        cmocka_unit_test(test_missing_byte_piece),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
