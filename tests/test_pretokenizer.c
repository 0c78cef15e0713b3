// Kind 1's pre-tokenisation splits (tokenizer/byte_level.c), the NFC normaliser
// (tokenizer/normalize.c) and ignore_merges: hand-picked strings with their answers written
// out, then the oracle, @lenml/tokenizers in node running the pre-tokenizers and normalizer
// that the families' tokenizer.json files name, made to follow Hugging Face's Rust where the
// JavaScript differs (tests/pretokenizer_oracle.js), on thousands of random strings and on every
// code point. The oracle's cases skip, saying why, without node.
// Run from the repository root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Before cmocka.h, whose fail() macro would take internal.h's fail() declaration.
#include "../tokenizer/internal.h"
#include "../tokenizer/unicode_tables.h"

#include <cmocka.h>

#define ORACLE_PKG "tests/node/node_modules/@lenml/tokenizers"
#define ORACLE_VERSION "3.7.2"
#define MODE_NFC TOK_PRE_KINDS // the oracle's mode after the splits
#define MAX_CHUNKS 16
#define STAND_IN 0xE000u // the oracle's spelling of byte B that is not UTF-8: U+E000 + B
#define RANDOM_SPLIT_TEXTS 3000
#define RANDOM_NFC_TEXTS 6000
#define RANDOM_BYTE_TEXTS 1000
#define CPS_PER_LINE 4096

#include "test_util.h"

// ---- a growable byte string ----

typedef struct {
    unsigned char *b;
    size_t n, cap;
} Str;

static void str_add(Str *s, const void *p, size_t n) {
    if (s->n + n > s->cap) {
        s->cap = 2 * (s->n + n) + 64;
        s->b = realloc(s->b, s->cap);
        assert_non_null(s->b);
    }
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

static void str_cp(Str *s, uint32_t cp) {
    unsigned char u[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n == 1) u[0] = (unsigned char)cp;
    else u[0] = (unsigned char)((0xF00u >> n & 0xF0) | cp >> (6 * (n - 1)));
    for (size_t k = 1; k < n; k++) u[k] = (unsigned char)(0x80 | (cp >> (6 * (n - 1 - k)) & 0x3F));
    str_add(s, u, n);
}

// ---- the splits and NFC on hand-picked strings ----

static const char *pre_name[] = {"GPT-2", "Llama 3", "Qwen2", "digits then GPT-2"};

// The chunks of text under split pre: their ends to ends[], their count returned.
static size_t chunks_of(int pre, const char *text, size_t len, size_t ends[]) {
    size_t n;
    assert_int_equal(pretokenize((const unsigned char *)text, len, pre, ends, &n), 0);
    return n;
}

typedef struct {
    int pre;
    const char *text;
    const char *chunk[MAX_CHUNKS]; // NULL after the last
} SplitCase;

static const SplitCase split_cases[] = {
    {TOK_PRE_GPT2, "I'M don't 'll", {"I", "'", "M", " don", "'t", " '", "ll"}},
    {TOK_PRE_GPT2, "  hello\n\n x  ", {" ", " hello", "\n\n", " x", "  "}},
    {TOK_PRE_GPT2, "12345 \xff\xfe!", {"12345", " \xff\xfe!"}},
    // \s is White_Space, as Oniguruma has it: U+0085 is a space, U+FEFF is not (JavaScript's \s
    // has it the other way round).
    {TOK_PRE_GPT2, "x\xC2\x85!\xEF\xBB\xBFy", {"x", "\xC2\x85", "!\xEF\xBB\xBF", "y"}},
    {TOK_PRE_LLAMA3,
     "a \xEF\xBB\xBF"
     "b\xC2\x85\xC2\x85\nc",
     {"a", " \xEF\xBB\xBF", "b", "\xC2\x85\xC2\x85\n", "c"}},
    {TOK_PRE_LLAMA3, "I'M DON'T 'LL've", {"I", "'M", " DON", "'T", " '", "LL", "'ve"}},
    {TOK_PRE_LLAMA3, "'sup 'Re'VE", {"'s", "up", " '", "Re", "'VE"}},
    {TOK_PRE_LLAMA3, "'Sup x'LLama", {"'S", "up", " x", "'LL", "ama"}},
    {TOK_PRE_LLAMA3, "12345 1", {"123", "45", " ", "1"}},
    {TOK_PRE_LLAMA3, "  hello\n\n  x", {" ", " hello", "\n\n", " ", " x"}},
    {TOK_PRE_LLAMA3, "x \n \n  \ty", {"x", " \n \n", "  ", "\ty"}},
    {TOK_PRE_LLAMA3, "!!\n\nabc ...\r\n", {"!!\n\n", "abc", " ...\r\n"}},
    {TOK_PRE_LLAMA3, "(hello) \"x\"", {"(hello", ")", " \"", "x", "\""}},
    // Oniguruma's (?i) folds U+017F to s, so "'\u017F" is a contraction; U+212A folds to k,
    // which none has. GPT-2's contractions are case-sensitive.
    {TOK_PRE_LLAMA3, "'\xC5\xBFt'\xE2\x84\xAA '\xC5\xBF", {"'\xC5\xBF", "t", "'\xE2\x84\xAA", " '", "\xC5\xBF"}},
    {TOK_PRE_LLAMA3, "DON'\xC5\xBFT it'\xC5\xBF", {"DON", "'\xC5\xBF", "T", " it", "'\xC5\xBF"}},
    {TOK_PRE_GPT2, "it'\xC5\xBF", {"it", "'", "\xC5\xBF"}},
    {TOK_PRE_LLAMA3, "a\xCC\x81 \xCC\x81x", {"a", "\xCC\x81", " \xCC\x81", "x"}},
    {TOK_PRE_LLAMA3,
     "\xff"
     "abc\xff\xfe",
     {"\xff"
      "abc",
      "\xff\xfe"}},
    {TOK_PRE_LLAMA3, "\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4\xc2\xb2", {"\xd9\xa1\xd9\xa2\xd9\xa3", "\xd9\xa4\xc2\xb2"}},
    {TOK_PRE_QWEN2, "12345 'S", {"1", "2", "3", "4", "5", " '", "S"}},
    {TOK_PRE_QWEN2, "x'S1", {"x", "'S", "1"}},
    // Every char::is_numeric (\p{N}) character stands alone: U+0661 U+0662, superscript two,
    // one half, Roman numeral twelve.
    {TOK_PRE_DIGITS_GPT2, "abc 123 x\xd9\xa1\xd9\xa2", {"abc", " ", "1", "2", "3", " x", "\xd9\xa1", "\xd9\xa2"}},
    {TOK_PRE_DIGITS_GPT2, "x\xC2\xB2\xC2\xBD \xE2\x85\xAB", {"x", "\xC2\xB2", "\xC2\xBD", " ", "\xE2\x85\xAB"}},
    {TOK_PRE_DIGITS_GPT2, "a  1b's", {"a", "  ", "1", "b", "'s"}},
};

static void test_split_cases(void **state) {
    for (size_t c = 0; c < sizeof split_cases / sizeof split_cases[0]; c++) {
        const SplitCase *sc = &split_cases[c];
        size_t len = strlen(sc->text), ends[64], n = chunks_of(sc->pre, sc->text, len, ends);
        size_t want = 0, at = 0;
        while (want < MAX_CHUNKS && sc->chunk[want]) want++;
        int same = n == want;
        for (size_t k = 0; k < n && same; k++) {
            size_t l = strlen(sc->chunk[k]);
            same = ends[k] - at == l && memcmp(sc->text + at, sc->chunk[k], l) == 0;
            at = ends[k];
        }
        if (!same) {
            print_error("%s split of \"%s\": %zu chunks, want %zu:", pre_name[sc->pre], sc->text, n, want);
            for (size_t k = 0, a = 0; k < n; a = ends[k++]) print_error(" [%.*s]", (int)(ends[k] - a), sc->text + a);
            fail_msg("split case %zu differs", c);
        }
    }
}

// NFC of s[0..len) in a malloc'd string.
static unsigned char *nfc(const char *s, size_t len, size_t *out_len) {
    unsigned char *out;
    assert_int_equal(nfc_normalize((const unsigned char *)s, len, &out, out_len), 0);
    if (!out) {
        out = malloc(len + 1);
        assert_non_null(out);
        memcpy(out, s, len);
    }
    return out;
}

static void test_nfc_cases(void **state) {
    static const char *const cases[][2] = {
        {"plain ASCII", "plain ASCII"},
        {"e\xCC\x81", "\xC3\xA9"},                                // e + U+0301 -> U+00E9
        {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"}, // Hangul L V T -> U+AC01
        {"\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81"},             // LV + T
        {"\xE1\xB8\x8B\xCC\xA3", "\xE1\xB8\x8D\xCC\x87"},         // U+1E0B U+0323 -> U+1E0D U+0307
        {"\xE2\x84\xAB", "\xC3\x85"},                             // U+212B -> U+00C5
        {"\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"},             // U+0958 is excluded
        {"\xCD\x84", "\xCC\x88\xCC\x81"},                         // U+0344 -> U+0308 U+0301
        {"a\xCC\x81\xCC\xA3", "\xE1\xBA\xA1\xCC\x81"},            // reordered, then U+1EA1 + U+0301
        {"\xE0\xAF\x86\xE0\xAE\xBE", "\xE0\xAF\x8A"},             // two starters: U+0BC6 U+0BBE -> U+0BCA
        {"e\xff\xCC\x81", "e\xff\xCC\x81"},                       // nothing composes across a bad byte
        {"\xCC\x81\xCC\xA3x", "\xCC\xA3\xCC\x81x"},               // marks without a starter still reorder
        {"\xC3\xA9\xCC\xA3", "\xE1\xBA\xB9\xCC\x81"},             // U+00E9 U+0323 -> U+1EB9 U+0301
        {"\xF0\x9D\x85\x9E", "\xF0\x9D\x85\x97\xF0\x9D\x85\xA5"}, // U+1D15E, excluded, decomposes
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n, want = strlen(cases[c][1]);
        unsigned char *out = nfc(cases[c][0], strlen(cases[c][0]), &n);
        if (n != want || memcmp(out, cases[c][1], n)) fail_msg("NFC case %zu differs", c);
        free(out);
    }
}

// A starter and 2 x 50000 marks of two classes, the higher class first: canonical order sorts
// them (in linear time) and only the first of each class composes.
static void test_nfc_long_mark_run(void **state) {
    enum { PAIRS = 50000 };
    Str in = {0}, want = {0};
    str_cp(&in, 'a');
    for (int k = 0; k < PAIRS; k++) {
        str_cp(&in, 0x302); // ccc 230
        str_cp(&in, 0x323); // ccc 220
    }
    str_cp(&want, 0x1EAD); // a + U+0323 -> U+1EA1, + U+0302 -> U+1EAD
    for (int k = 1; k < PAIRS; k++) str_cp(&want, 0x323);
    for (int k = 1; k < PAIRS; k++) str_cp(&want, 0x302);
    size_t n;
    unsigned char *out = nfc((const char *)in.b, in.n, &n);
    assert_int_equal(n, want.n);
    assert_memory_equal(out, want.b, n);
    free(out);
    free(in.b);
    free(want.b);
}

// Random bytes, mostly UTF-8 lead and continuation bytes so that characters form.
static void random_bytes(Str *s, int max_len) {
    static const unsigned char lead[] = {0x20, 0x41, 0x61, 0x31, 0x27, 0x0A, 0xC3, 0xCC, 0xE1, 0xE3, 0xEA, 0xED, 0xF0};
    for (int n = 1 + (int)(rnd() % (uint32_t)max_len), k = 0; k < n; k++) {
        uint32_t r = rnd();
        unsigned char b = (unsigned char)(r % 3 == 0   ? 0x80 + (r >> 8) % 64
                                          : r % 3 == 1 ? lead[(r >> 8) % 13]
                                                       : r >> 8);
        str_add(s, &b, 1);
    }
}

// On random bytes, without the oracle: every split cuts the text into non-empty chunks that
// cover it, and NFC is idempotent and keeps the bytes that are not UTF-8, in order.
static void test_invariants_on_random_bytes(void **state) {
    for (int k = 0; k < 20000; k++) {
        Str s = {0};
        random_bytes(&s, 40);
        size_t ends[64], n;
        for (int pre = 0; pre < TOK_PRE_KINDS; pre++) {
            assert_int_equal(pretokenize(s.b, s.n, pre, ends, &n), 0);
            assert_true(n >= 1 && ends[n - 1] == s.n);
            for (size_t c = 0; c < n; c++) assert_true(ends[c] > (c ? ends[c - 1] : 0));
        }
        size_t n1, n2;
        unsigned char *once = nfc((const char *)s.b, s.n, &n1), *twice = nfc((const char *)once, n1, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(once, twice, n1);
        Str bad_in = {0}, bad_out = {0};
        for (int pass = 0; pass < 2; pass++) {
            const unsigned char *b = pass ? once : s.b;
            size_t len = pass ? n1 : s.n;
            uint32_t cp;
            for (size_t i = 0, c; i < len; i += c ? c : 1)
                if (!(c = utf8_char(b, i, len, &cp))) str_add(pass ? &bad_out : &bad_in, b + i, 1);
        }
        assert_int_equal(bad_in.n, bad_out.n);
        assert_memory_equal(bad_in.b, bad_out.b, bad_in.n);
        free(bad_in.b);
        free(bad_out.b);
        free(once);
        free(twice);
        free(s.b);
    }
}

// ---- the flags through tokenizer_encode ----

// A kind-1 blob of the NUL-terminated pieces and the merges (ids), in FORMAT.md's layout.
static unsigned char *blob_of(const char *const *piece, uint32_t n, const uint32_t (*merge)[2], uint32_t m,
                              size_t *bytes) {
    Str b = {0};
    uint32_t longest = 0, zero = 0;
    for (uint32_t i = 0; i < n; i++)
        if (strlen(piece[i]) > longest) longest = (uint32_t)strlen(piece[i]);
    uint32_t head[4] = {n, m, longest, 0};
    str_add(&b, head, sizeof head);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(piece[i]);
        str_add(&b, &zero, sizeof zero); // score 0.0f
        str_add(&b, &len, sizeof len);
        str_add(&b, piece[i], len);
    }
    str_add(&b, merge, sizeof(uint32_t) * 2 * m);
    *bytes = b.n;
    return b.b;
}

static int encode(const Tokenizer *t, const char *text, int *ids) {
    char err[128];
    int n = tokenizer_encode(t, text, strlen(text), 0, ids, 64, err, sizeof err);
    if (n < 0) fail_msg("encode \"%s\": %s", text, err);
    return n;
}

// ignore_merges takes a chunk that is a piece whole (the oracle, like HF's BPE, looks the
// chunk up before merging: "abc" is 5 with the flag and a + bc without); the split flag picks
// Llama 3's split ("'LL" one chunk, so one piece); NFC composes e + U+0301 first.
static void test_flags_through_encode(void **state) {
    static const char *const pieces[] = {"a", "b",   "c", "ab",   "bc",   "abc",  " ",   "'",
                                         "L", "'LL", "e", "\xC3", "\xA9", "\xCC", "\x81"};
    static const uint32_t merges[][2] = {{1, 2}, {0, 1}};
    size_t bytes;
    unsigned char *blob = blob_of(pieces, sizeof pieces / sizeof pieces[0], merges, 2, &bytes);
    Tokenizer t;
    char err[128];
    if (tokenizer_init(&t, blob, bytes, TOK_BYTE_BPE, 0, -1, -1, err, sizeof err)) fail_msg("%s", err);
    free(blob);
    int ids[64], n;
    n = encode(&t, "abc abcabc ab", ids);
    assert_int_equal(n, 9); // a bc | ' ' a bc a bc | ' ' ab
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 4);
    t.flags = TOKF_IGNORE_MERGES; // tokenizer.c's checks are h-tokcore's: set the bits directly
    n = encode(&t, "abc abcabc ab", ids);
    assert_int_equal(n, 8); // abc | ' ' a bc a bc | ' ' ab, as @lenml/tokenizers gives
    assert_int_equal(ids[0], 5);
    assert_int_equal(ids[1], 6);
    n = encode(&t, "'LL", ids); // GPT-2's split: ' | LL
    assert_int_equal(n, 3);
    t.flags = TOKF_IGNORE_MERGES | TOK_PRE_LLAMA3 << TOKF_PRE_SHIFT;
    n = encode(&t, "'LL", ids);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 9);
    n = encode(&t, "e\xCC\x81", ids); // e U+0301, a letter and a mark: e | 0xCC 0x81
    assert_int_equal(n, 3);
    t.flags |= TOKF_NFC;
    n = encode(&t, "e\xCC\x81", ids); // U+00E9
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 11);
    assert_int_equal(ids[1], 12);
    tokenizer_free(&t);
}

// ---- against the oracle ----

// One oracle case: the mode (a split or MODE_NFC) and the text's bytes.
typedef struct {
    int mode;
    Str text;
} Case;

typedef struct {
    Case *c;
    size_t n, cap;
} Cases;

static Str *add_case(Cases *cs, int mode) {
    if (cs->n == cs->cap) {
        cs->cap = 2 * cs->cap + 1024;
        cs->c = realloc(cs->c, sizeof(Case) * cs->cap);
        assert_non_null(cs->c);
    }
    cs->c[cs->n] = (Case){mode, {0}};
    return &cs->c[cs->n++].text;
}

static void add_text(Cases *cs, int mode, const void *text, size_t n) { str_add(add_case(cs, mode), text, n); }

// Whether the oracle can run: node, and @lenml/tokenizers under tests/node (installed here
// from npm if missing); if not, says why.
static int oracle_ready(void) {
    if (system("node --version >/dev/null 2>&1")) {
        print_message("skipping: node is not installed, and the oracle comparisons need it\n");
        return 0;
    }
    if (access(ORACLE_PKG "/package.json", R_OK) &&
        system("npm install --silent --no-audit --no-fund --prefix tests/node @lenml/tokenizers@" ORACLE_VERSION))
        print_message("skipping: npm could not install @lenml/tokenizers@" ORACLE_VERSION "\n");
    return access(ORACLE_PKG "/package.json", R_OK) == 0;
}

static void put_hex(FILE *f, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", b[i]);
}

// The case's text as the oracle reads it: each byte that is not UTF-8 spelled U+E000 + byte.
static void put_oracle_text(FILE *f, const Str *s) {
    for (size_t i = 0; i < s->n;) {
        uint32_t cp;
        size_t k = utf8_char(s->b, i, s->n, &cp);
        if (k) {
            put_hex(f, s->b + i, k);
            i += k;
        } else {
            Str one = {0};
            str_cp(&one, STAND_IN + s->b[i++]);
            put_hex(f, one.b, one.n);
            free(one.b);
        }
    }
}

// What tokenizer.c gives for the case, in the oracle's output format.
static void ours(const Case *c, Str *out) {
    char num[32];
    if (c->mode == MODE_NFC) {
        unsigned char *o;
        size_t n;
        assert_int_equal(nfc_normalize(c->text.b, c->text.n, &o, &n), 0);
        for (size_t i = 0; i < n; i++) {
            snprintf(num, sizeof num, "%02x", (o ? o : c->text.b)[i]);
            str_add(out, num, 2);
        }
        free(o);
        return;
    }
    size_t *ends = malloc(sizeof(size_t) * c->text.n), n;
    assert_non_null(ends);
    assert_int_equal(pretokenize(c->text.b, c->text.n, c->mode, ends, &n), 0);
    for (size_t k = 0; k < n; k++) str_add(out, num, (size_t)snprintf(num, sizeof num, k ? " %zu" : "%zu", ends[k]));
    free(ends);
}

// Runs the oracle on every case and compares; fails naming the first few that differ.
static void compare_with_oracle(Cases *cs, const char *what) {
    char in[64], out[64], cmd[256];
    mkdir("tests/tmp", 0777); // run_all.sh makes it too; an error here shows at fopen
    snprintf(in, sizeof in, "tests/tmp/pretok_%d.in", (int)getpid());
    snprintf(out, sizeof out, "tests/tmp/pretok_%d.out", (int)getpid());
    FILE *f = fopen(in, "w");
    if (!f) fail_msg("cannot write %s (tests run from the repository root)", in);
    for (size_t i = 0; i < cs->n; i++) {
        fprintf(f, "%d ", cs->c[i].mode);
        put_oracle_text(f, &cs->c[i].text);
        fputc('\n', f);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "node tests/pretokenizer_oracle.js ./%s %s %s", ORACLE_PKG, in, out);
    if (system(cmd)) fail_msg("the oracle failed: %s", cmd);
    f = fopen(out, "r");
    assert_non_null(f);
    Str line = {0}, mine = {0};
    size_t failed = 0;
    for (size_t i = 0; i < cs->n; i++) {
        line.n = mine.n = 0;
        for (int ch; (ch = fgetc(f)) != EOF && ch != '\n';) str_add(&line, &(char){(char)ch}, 1);
        ours(&cs->c[i], &mine);
        if (line.n == mine.n && !memcmp(line.b, mine.b, line.n)) continue;
        if (++failed <= 5) {
            int mode = cs->c[i].mode;
            print_error("%s: ", mode == MODE_NFC ? "NFC" : pre_name[mode]);
            for (size_t k = 0; k < cs->c[i].text.n && k < 80; k++) print_error("%02x", cs->c[i].text.b[k]);
            print_error("\n  oracle      %.*s\n  tokenizer.c %.*s\n", (int)(line.n < 300 ? line.n : 300),
                        (const char *)line.b, (int)(mine.n < 300 ? mine.n : 300), (const char *)mine.b);
        }
    }
    fclose(f);
    remove(in);
    remove(out);
    print_message("%s: %zu cases against @lenml/tokenizers, %zu differ\n", what, cs->n, failed);
    free(line.b);
    free(mine.b);
    for (size_t i = 0; i < cs->n; i++) free(cs->c[i].text.b);
    free(cs->c);
    if (failed) fail_msg("%zu of %zu cases differ from the oracle", failed, cs->n);
}

// Pieces that random split texts are made of: every class, contractions in either case,
// runs of digits, spaces of every kind with CR and LF, and bytes that are not UTF-8.
static const char *const split_pool[] = {
    "a",
    "b",
    "Z",
    "s",
    "S",
    "t",
    "T",
    "re",
    "RE",
    "Ve",
    "m",
    "M",
    "ll",
    "lL",
    "d",
    "D",
    "'",
    "'",
    "'",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "\x0b",
    "\x0c",
    "\xC2\xA0",
    "\xE3\x80\x80",
    "\xE2\x80\xA8",
    "\xEF\xBB\xBF",
    "\xC2\x85",
    "0",
    "1",
    "7",
    "123",
    "4567",
    "\xD9\xA3",
    "\xC2\xB2",
    "\xC2\xBD",
    "\xE2\x85\xAB",
    "\xE3\x80\x87",
    "\xE0\xA5\xA7",
    "\xEF\xBC\x91",
    ".",
    ",",
    "!",
    "?",
    "-",
    "_",
    "(",
    ")",
    "\"",
    "#",
    "\xE6\x97\xA5",
    "\xE6\x9C\xAC",
    "\xED\x95\x9C",
    "\xEA\xB5\xAD",
    "\xF0\x9F\x98\x80",
    "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
    "\xE2\x80\x8D",
    "\xC3\xA9",
    "e\xCC\x81",
    "\xCC\x81",
    "\xCC\x88",
    "\xC5\xBF",
    "\xE2\x84\xAA",
    "\xC4\xB0",
    "\xC3\x9F",
    "\xCE\xA9",
    "\xD8\xA7",
    "\xD8\xA8",
    "\xE0\xA4\x95",
    "\xE0\xA4\xBF",
    "\xff",
    "\x80",
    "\xC0",
    "\xED\xA0\x80",
    "\xF4\x90\x80\x80",
    "\xE2\x82",
    "\x00",
    "\x1F",
};

static void random_split_text(Str *s) {
    int n = 1 + (int)(rnd() % 24);
    size_t np = sizeof split_pool / sizeof split_pool[0];
    for (int k = 0; k < n; k++) {
        const char *p = split_pool[rnd() % np];
        str_add(s, p, p[0] ? strlen(p) : 1);
    }
}

static void test_splits_against_oracle(void **state) {
    if (!oracle_ready()) skip();
    Cases cs = {0};
    for (size_t c = 0; c < sizeof split_cases / sizeof split_cases[0]; c++)
        for (int pre = 0; pre < TOK_PRE_KINDS; pre++)
            add_text(&cs, pre, split_cases[c].text, strlen(split_cases[c].text));
    for (int k = 0; k < RANDOM_SPLIT_TEXTS; k++) {
        Str s = {0};
        random_split_text(&s);
        for (int pre = 0; pre < TOK_PRE_KINDS; pre++) add_text(&cs, pre, s.b, s.n);
        free(s.b);
    }
    for (int k = 0; k < RANDOM_BYTE_TEXTS; k++) {
        Str s = {0};
        random_bytes(&s, 40);
        for (int pre = 0; pre < TOK_PRE_KINDS; pre++) add_text(&cs, pre, s.b, s.n);
        free(s.b);
    }
    compare_with_oracle(&cs, "splits");
}

// A random code point that NFC may act on: one with NFC properties (a range of
// nfc_prop_table, then a code point in it), a Hangul jamo, or a plain starter.
static uint32_t random_nfc_cp(void) {
    size_t nr = sizeof nfc_prop_table / sizeof nfc_prop_table[0];
    static const uint32_t plain[] = {'a',    'e',    'A',    'o',    'u',    ' ',   0x1100,
                                     0x1112, 0x1161, 0x1175, 0x11A8, 0x11C2, 0x4E00};
    if (rnd() % 4 == 0) return plain[rnd() % (sizeof plain / sizeof plain[0])];
    const uint32_t *r = nfc_prop_table[rnd() % nr];
    return r[0] + rnd() % (r[1] - r[0] + 1);
}

static void test_nfc_against_oracle(void **state) {
    if (!oracle_ready()) skip();
    Cases cs = {0};
    // Every code point, CPS_PER_LINE to a case between spaces (a space neither composes nor
    // is composed with), but for the stand-ins of bytes.
    Str *s = NULL;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= STAND_IN + 0x80 && cp <= STAND_IN + 0xFF)) continue;
        if (!s || s->n > CPS_PER_LINE * 5) s = add_case(&cs, MODE_NFC);
        str_cp(s, cp);
        str_add(s, " ", 1);
    }
    // Every canonical decomposition, then again with its marks reversed.
    for (int rev = 0; rev < 2; rev++) {
        s = NULL;
        for (size_t i = 0; i < sizeof nfc_decomp_table / sizeof nfc_decomp_table[0]; i++) {
            uint32_t at = nfc_decomp_table[i][1] >> 3, n = nfc_decomp_table[i][1] & 7;
            if (!s || s->n > CPS_PER_LINE * 5) s = add_case(&cs, MODE_NFC);
            str_cp(s, nfc_decomp_cps[at]);
            for (uint32_t k = 1; k < n; k++) str_cp(s, nfc_decomp_cps[rev ? at + n - k : at + k]);
            str_add(s, " ", 1);
        }
    }
    for (int k = 0; k < RANDOM_NFC_TEXTS; k++) {
        s = add_case(&cs, MODE_NFC);
        for (int n = 1 + (int)(rnd() % 8), j = 0; j < n; j++) {
            if (rnd() % 16 == 0) str_add(s, "\xff", 1);
            else str_cp(s, random_nfc_cp());
        }
    }
    for (int k = 0; k < RANDOM_BYTE_TEXTS; k++) random_bytes(add_case(&cs, MODE_NFC), 40);
    compare_with_oracle(&cs, "NFC");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_cases),          cmocka_unit_test(test_nfc_cases),
        cmocka_unit_test(test_nfc_long_mark_run),    cmocka_unit_test(test_invariants_on_random_bytes),
        cmocka_unit_test(test_flags_through_encode), cmocka_unit_test(test_splits_against_oracle),
        cmocka_unit_test(test_nfc_against_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
