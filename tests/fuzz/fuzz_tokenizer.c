// Fuzz target: tokenizer.c on hostile input. The first byte picks a mode:
//   0  any blob through tokenizer_init (kind, flags, bos and eos from the next bytes); an
//      accepted blob then encodes a fixed text and decodes every id;
//   1  any bytes encoded with a real SentencePiece-style vocabulary (llama2.c's tok512.bin
//      when ../shared is there, and one learned from text), decoded back: the same bytes;
//   2  the same with a byte-level (GPT-2 style) vocabulary of single bytes and merges;
//   3  any bytes, cut into pieces, through the streaming sanitizer: the output is valid
//      UTF-8 without control characters, and valid control-free input comes out unchanged;
//      and tokenizer_first_non_text (run's and train's check of prompts and corpora) finds
//      the first byte that is not UTF-8 text where an independent decoder does;
//   4  any bytes as a llama2.c tokenizer.bin (run -z) for a vocabulary size from the input.
#include "../../tokenizer.h"
#include "fuzz.h"
#include <math.h>

#ifndef SHARED_DIR
#define SHARED_DIR "../shared"
#endif

static Tokenizer sp_vocabs[3], byte_vocab;
static int n_sp_vocabs;

static const char *sample_text =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak. "
    "The the then there in ing and and \xc3\xa9t\xc3\xa9 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 1234 \xf0\x9f\x98\x80!";

// A byte-level vocabulary: the 256 single bytes, then one merge per extra byte of each word,
// built left to right ("t"+"h", "th"+"e", ...).
static void *byte_level_blob(size_t *bytes) {
    static const char *words[] = {
        " the", "the",  " and", "ing",    " a",      "er",       "in",           " to",
        "ed",   "\n\n", "  ",   " speak", "Citizen", "\xc3\xa9", " caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
        "12"};
    char piece[512][16];
    uint32_t len[512], merge[512][2];
    int n = 0, m = 0;
    for (int i = 0; i < 256; i++) {
        piece[n][0] = (char)i;
        len[n++] = 1;
    }
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        const char *s = words[w];
        int cur = (unsigned char)s[0];
        for (size_t k = 1; s[k]; k++) {
            int found = -1;
            for (int i = 256; i < n; i++)
                if (len[i] == k + 1 && !memcmp(piece[i], s, k + 1)) found = i;
            if (found < 0) {
                memcpy(piece[n], s, k + 1);
                len[n] = (uint32_t)k + 1;
                merge[m][0] = (uint32_t)cur;
                merge[m++][1] = (unsigned char)s[k];
                found = n++;
            }
            cur = found;
        }
    }
    uint32_t maxlen = 0;
    size_t total = 16 + 8 * (size_t)m;
    for (int i = 0; i < n; i++) {
        total += 8 + len[i];
        if (len[i] > maxlen) maxlen = len[i];
    }
    unsigned char *b = malloc(total), *p = b + 16;
    uint32_t h[4] = {(uint32_t)n, (uint32_t)m, maxlen, 0};
    memcpy(b, h, 16);
    for (int i = 0; i < n; i++) {
        float score = 0.0f;
        memcpy(p, &score, 4);
        memcpy(p + 4, &len[i], 4);
        memcpy(p + 8, piece[i], len[i]);
        p += 8 + len[i];
    }
    memcpy(p, merge, 8 * (size_t)m);
    *bytes = total;
    return b;
}

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    void *p = malloc(size > 0 ? (size_t)size : 1);
    *n = fread(p, 1, (size_t)size, f);
    fclose(f);
    return p;
}

static void setup(void) {
    char err[256];
    size_t n;
    void *blob;
    // llama2.c's conventions as run -z uses them: dummy prefix, BOS 1 prepended, EOS 2
    void *file = read_all(SHARED_DIR "/models/tok512.bin", &n);
    if (file && !tokenizer_init_llama2c(&sp_vocabs[n_sp_vocabs], file, n, 512, err, sizeof err)) n_sp_vocabs++;
    free(file);
    if (tokenizer_learn_bpe(sample_text, strlen(sample_text), 300, NULL, &blob, &n, err, sizeof err) ||
        tokenizer_init(&sp_vocabs[n_sp_vocabs++], blob, n, TOK_SENTENCEPIECE, 0, -1, -1, err, sizeof err)) {
        fprintf(stderr, "learned vocabulary: %s\n", err);
        exit(1);
    }
    free(blob);
    if (tokenizer_learn_chars(sample_text, strlen(sample_text), &blob, &n, err, sizeof err) ||
        tokenizer_init(&sp_vocabs[n_sp_vocabs++], blob, n, TOK_SENTENCEPIECE, 0, -1, -1, err, sizeof err)) {
        fprintf(stderr, "character vocabulary: %s\n", err);
        exit(1);
    }
    free(blob);
    blob = byte_level_blob(&n);
    if (tokenizer_init(&byte_vocab, blob, n, TOK_BYTE_BPE, 0, -1, -1, err, sizeof err)) {
        fprintf(stderr, "byte-level vocabulary: %s\n", err);
        exit(1);
    }
    free(blob);
}

// Decodes ids back to bytes, as run prints them (before sanitizing).
static char *decode_all(const Tokenizer *t, const int *ids, int n, size_t *out_len) {
    size_t cap = 16, len = 0;
    for (int i = 0; i < n; i++) cap += t->len[ids[i]] + 1;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        size_t k;
        const char *p = tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i], &k);
        FUZZ_ASSERT(p, "an id from encode does not decode");
        FUZZ_ASSERT(len + k <= cap, "decode gave more bytes than the piece has");
        memcpy(out + len, p, k);
        len += k;
    }
    *out_len = len;
    return out;
}

// Encodes text and decodes it again: every id is in range, at most len + 2 of them, and the
// bytes come back (after a BOS the dummy-prefix space is dropped again; without one it stays).
static void roundtrip(const Tokenizer *t, const char *text, size_t len, int add_bos) {
    char err[256];
    int cap = (int)len + 2, *ids = malloc(sizeof(int) * (size_t)cap);
    int n = tokenizer_encode(t, text, len, add_bos ? TOKE_ADD_BOS : 0, ids, cap, err, sizeof err);
    int fallback = 1; // every byte of the text has a byte piece (the character vocabulary lacks most)
    for (size_t i = 0; i < len; i++) fallback &= t->byte_piece[(unsigned char)text[i]] >= 0;
    if (n < 0 && !fallback) {
        fuzz_check_message(err);
        free(ids);
        return;
    }
    FUZZ_ASSERT(n >= 0, "a vocabulary with byte fallback failed to encode");
    for (int i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < t->n_pieces, "encode produced an id outside the vocabulary");
    // with too little room it must refuse, not overflow
    if (n > 1)
        FUZZ_ASSERT(tokenizer_encode(t, text, len, add_bos ? TOKE_ADD_BOS : 0, ids, n - 1, err, sizeof err) == -1,
                    "encode overflowed max_out");
    size_t got;
    char *back = decode_all(t, ids, n, &got);
    int prefix = t->kind == TOK_SENTENCEPIECE && (t->flags & TOKF_DUMMY_PREFIX) && !add_bos && len;
    FUZZ_ASSERT(got == len + prefix && (!prefix || back[0] == ' ') && !memcmp(back + prefix, text, len),
                "decode(encode(text)) is not the text");
    free(back);
    free(ids);
}

// Offset of the first character that is not well-formed UTF-8 or that the caller refuses:
// NUL (controls = 0, tokenizer_first_non_text's rule) or any control character the sanitizer
// drops (controls = 1); n if none.
static size_t first_refused(const unsigned char *s, size_t n, int controls) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (!k || i + k > n) return i;
        uint32_t cp = k == 1 ? c : c & (0x7F >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        if (controls ? (cp < 0x20 && cp != '\t' && cp != '\n') || (cp >= 0x7F && cp <= 0x9F) : cp == 0) return i;
        i += k;
    }
    return n;
}

static int valid_utf8_no_controls(const unsigned char *s, size_t n) { return first_refused(s, n, 1) == n; }

static void sanitize_check(const uint8_t *data, size_t size) {
    if (!size) return;
    size_t cut = data[0]; // piece length pattern
    data++, size--;
    char *out = malloc(3 * size + 12 + 3 * 16);
    size_t o = 0;
    TokSanitizer st = {0};
    for (size_t i = 0; i < size;) {
        size_t k = 1 + (cut + i) % 7;
        if (k > size - i) k = size - i;
        size_t w = tokenizer_sanitize(&st, (const char *)data + i, k, out + o, 0);
        FUZZ_ASSERT(w <= 3 * k + 12, "sanitize wrote more than its bound");
        o += w;
        i += k;
    }
    o += tokenizer_sanitize(&st, "", 0, out + o, 1);
    FUZZ_ASSERT(valid_utf8_no_controls((unsigned char *)out, o), "sanitized output is not clean UTF-8");
    if (valid_utf8_no_controls(data, size))
        FUZZ_ASSERT(o == size && !memcmp(out, data, size), "sanitize changed clean text");
    FUZZ_ASSERT(tokenizer_first_non_text((const char *)data, size) == first_refused(data, size, 0),
                "tokenizer_first_non_text disagrees with the UTF-8 definition");
    free(out);
}

// An accepted tokenizer encodes a fixed text (or refuses with a message), decodes every id
// and refuses ids outside the vocabulary; then it is freed.
static void exercise(Tokenizer *t) {
    char err[256];
    int ids[64];
    unsigned opts = (t->flags & TOKF_ADD_BOS) && t->bos_id >= 0 ? TOKE_ADD_BOS : 0;
    int n = tokenizer_encode(t, sample_text, 60, opts, ids, 64, err, sizeof err);
    if (n < 0) fuzz_check_message(err);
    for (int i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < t->n_pieces, "encode produced an id outside the vocabulary");
    for (int i = 0; i < t->n_pieces && i < 4096; i++) {
        size_t k;
        const char *p = tokenizer_decode(t, i - 1, i, &k);
        FUZZ_ASSERT(p, "a valid id does not decode");
        char out[3 * 64 + 12];
        TokSanitizer st = {0};
        for (size_t j = 0; j < k; j += 64) tokenizer_sanitize(&st, p + j, k - j < 64 ? k - j : 64, out, 0);
    }
    size_t k;
    FUZZ_ASSERT(!tokenizer_decode(t, 0, t->n_pieces, &k) && !tokenizer_decode(t, 0, -1, &k), "an invalid id decodes");
    tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    if (size < 2) return 0;
    int mode = data[0] % 5;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    if (mode == 0) {
        if (size < 5) return 0;
        Tokenizer t;
        char err[256];
        int kind = data[1] & 1, bos = (int8_t)data[2], eos = (int8_t)data[3];
        unsigned flags = (data[1] >> 1) & 15; // bit 3 is no flag: it must be refused
        if (tokenizer_init(&t, data + 4, size - 4, kind, flags, bos, eos, err, sizeof err)) {
            fuzz_check_message(err);
            return 0;
        }
        exercise(&t);
    } else if (mode == 4) {
        Tokenizer t;
        char err[256];
        int vocab_size = 1 + (data[1] | (size > 2 ? data[2] : 0) << 8);
        if (size < 3 || tokenizer_init_llama2c(&t, data + 3, size - 3, vocab_size, err, sizeof err)) {
            if (size >= 3) fuzz_check_message(err);
            return 0;
        }
        FUZZ_ASSERT(t.n_pieces == vocab_size, "a llama2.c tokenizer with the wrong number of pieces");
        exercise(&t);
    } else if (mode == 1) {
        const Tokenizer *t = &sp_vocabs[data[1] % n_sp_vocabs];
        roundtrip(t, text, len, (data[1] & 0x80) && t->bos_id >= 0);
    } else if (mode == 2) {
        roundtrip(&byte_vocab, text, len, 0);
    } else {
        sanitize_check(data + 1, size - 1);
    }
    return 0;
}

#ifdef MAKE_SEEDS
int main(int argc, char **argv) {
    if (argc != 2) return 2;
#define TEXT(s)                                                                                                        \
    { s, sizeof s - 1 }
    static const struct {
        const char *s;
        size_t n;
    } texts[] = {
        TEXT("Once upon a time"),
        TEXT(""),
        TEXT(" "),
        TEXT("  leading and trailing  "),
        TEXT("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"),
        TEXT("bad \xff\xfe utf8 \xc0\xaf \xed\xa0\x80 end"),
        TEXT("nul\0byte"),
        TEXT("\x1b[31mred\x1b[0m\r\n\t"),
        TEXT("<0x41> literal"),
        TEXT("1234567890 it's don't 're"),
        TEXT("\xe2\x80\xa8\xc2\x85\xc2\x9f"),
    };
#undef TEXT
    char name[64], buf[256];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int mode = 1; mode <= 3; mode++) {
            buf[0] = (char)mode;
            buf[1] = (char)(i * 37);
            memcpy(buf + 2, texts[i].s, texts[i].n);
            snprintf(name, sizeof name, "text%d_%zu", mode, i);
            fuzz_write_seed(argv[1], name, buf, texts[i].n + 2);
        }
    // blobs: learned vocabularies and the byte-level one, as mode 0 inputs
    char err[256];
    void *blobs[3];
    size_t sizes[3];
    tokenizer_learn_chars(sample_text, strlen(sample_text), &blobs[0], &sizes[0], err, sizeof err);
    tokenizer_learn_bpe(sample_text, strlen(sample_text), 280, NULL, &blobs[1], &sizes[1], err, sizeof err);
    blobs[2] = byte_level_blob(&sizes[2]);
    for (int i = 0; i < 3; i++) {
        unsigned char *in = malloc(sizes[i] + 4);
        in[0] = 0;
        in[1] = (unsigned char)(i == 2 ? 1 : 0);
        in[2] = in[3] = 0xff;
        memcpy(in + 4, blobs[i], sizes[i]);
        snprintf(name, sizeof name, "blob%d", i);
        fuzz_write_seed(argv[1], name, in, sizes[i] + 4);
        free(in);
        free(blobs[i]);
    }
    size_t n;
    void *file = read_all(SHARED_DIR "/models/tok512.bin", &n);
    if (file) {
        unsigned char *in = malloc(n + 3);
        in[0] = 4;
        in[1] = (512 - 1) & 0xff;
        in[2] = (512 - 1) >> 8;
        memcpy(in + 3, file, n);
        fuzz_write_seed(argv[1], "llama2c_tok512", in, n + 3);
        free(in);
        free(file);
    }
    return 0;
}
#endif
