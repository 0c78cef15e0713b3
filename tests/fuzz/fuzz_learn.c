// Fuzz target: what ./train does with a corpus before training — learn a vocabulary from
// the text (characters, or byte-fallback BPE of a small size), load it as the model file
// will carry it, and encode the corpus with it. Any bytes, NUL and invalid UTF-8 included,
// must give a vocabulary that encodes the corpus and decodes back to exactly its bytes.
#include "../../tokenizer.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    // vocabulary sizes around the smallest BPE one (256 byte pieces), a few below it
    int bpe = data[0] & 1, vocab_size = 250 + data[1] % 120;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    void *blob = NULL;
    size_t blob_bytes = 0;
    char err[256];
    int rc = bpe ? tokenizer_learn_bpe(text, len, vocab_size, NULL, &blob, &blob_bytes, err, sizeof err)
                 : tokenizer_learn_chars(text, len, &blob, &blob_bytes, err, sizeof err);
    if (rc) {
        fuzz_check_message(err);
        FUZZ_ASSERT(len == 0 || (bpe && vocab_size < 256),
                    "learning failed on a valid request"); // train refuses an empty corpus first
        return 0;
    }
    uint32_t n_pieces;
    memcpy(&n_pieces, blob, 4);
    FUZZ_ASSERT(!bpe || (n_pieces >= 256 && n_pieces <= (uint32_t)vocab_size), "BPE vocabulary of the wrong size");
    Tokenizer t;
    FUZZ_ASSERT(!tokenizer_init(&t, blob, blob_bytes, TOK_SENTENCEPIECE, 0, -1, -1, err, sizeof err),
                "a learned vocabulary does not load");
    int *ids = malloc(sizeof(int) * (len + 2));
    int n = tokenizer_encode(&t, text, len, 0, ids, (int)len + 2, err, sizeof err);
    FUZZ_ASSERT(n >= 0, "a learned vocabulary cannot encode its own corpus");
    FUZZ_ASSERT((size_t)n <= len, "more tokens than bytes");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t k;
        const char *p = tokenizer_decode(&t, i ? ids[i - 1] : -1, ids[i], &k);
        FUZZ_ASSERT(p && at + k <= len && !memcmp(text + at, p, k), "decoding the corpus does not give it back");
        at += k;
    }
    FUZZ_ASSERT(at == len, "decoding the corpus does not give all of it back");
    free(ids);
    tokenizer_free(&t);
    free(blob);
    return 0;
}

#ifdef MAKE_SEEDS
// clang-format off
#define TEXT(s) {s, sizeof s - 1}
// clang-format on
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    static const struct {
        const char *s;
        size_t n;
    } texts[] = {
        TEXT("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n"),
        TEXT("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        TEXT("abababababababab abab abab"),
        TEXT("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\xf0\x9f\x98\x80"),
        TEXT("bin\xff\xfe\x00\x01\x80\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80"),
        TEXT("x"),
    };
#undef TEXT
    char name[64], buf[256];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int bpe = 0; bpe < 2; bpe++) {
            buf[0] = (char)bpe;
            buf[1] = (char)(6 + 40 * i); // vocabularies of 256 pieces and more
            memcpy(buf + 2, texts[i].s, texts[i].n);
            snprintf(name, sizeof name, "corpus%d_%zu", bpe, i);
            fuzz_write_seed(argv[1], name, buf, texts[i].n + 2);
        }
    return 0;
}
#endif
