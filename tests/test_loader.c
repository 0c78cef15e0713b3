// The model-file loader refuses every damaged or hostile file with a message naming the
// problem, and never reads outside the file: truncations at many offsets, flipped header
// fields, huge dimensions whose products would overflow, newer versions. Version 5's checksum
// and chat section (with the template's text, and family 0) are checked too.
#include "model.h"
#include "chat/chat.h"
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

static const char *dir = "tests/tmp";
static char good_path[256], good_q8_path[256], bad_path[256];
static unsigned char *good, *good_q8;
static size_t good_size, good_q8_size;

static Config small_config(void) {
    // packed by hand: a field per line would fill the screen
    // clang-format off
    return (Config){
        .dim = 16, .hidden_dim = 24, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 4,
        .vocab_size = 10, .seq_len = 8, .pos_kind = POS_LEARNED, .ffn_kind = FFN_GELU_TANH,
        .norm_kind = NORM_LAYER, .bias_flags = BIAS_ALL, .final_norm = 1, .tied_classifier = 0,
        .rope_theta = 10000.0f, .norm_eps = 1e-5f, .embed_scale = 1.0f, .bos_id = 0, .eos_id = 1,
    };
    // clang-format on
}

// Writes a model of config c (zero weights) to path and reads the file's bytes back.
static int save_model(const char *path, Config c, unsigned char **data, size_t *size) {
    size_t bytes = carve_weights(&c, NULL, NULL);
    float *w = calloc(1, bytes);
    const char blob[] = "not parsed by the loader";
    char err[256];
    if (model_save(path, &c, blob, sizeof blob, w, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    free(w);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    rewind(f);
    *data = malloc(*size);
    int rc = fread(*data, 1, *size, f) == *size ? 0 : -1;
    fclose(f);
    return rc;
}

static Config q8_config(void) {
    Config c = small_config();
    c.weight_type = WEIGHTS_Q8_0, c.group_size = 8; // dim 16, q 16, hidden 24
    c.tied_classifier = 1;
    return c;
}

static int setup(void **state) {
    (void)state;
    mkdir(dir, 0755);
    snprintf(good_path, sizeof good_path, "%s/loader_good.bin", dir);
    snprintf(good_q8_path, sizeof good_q8_path, "%s/loader_good_q8.bin", dir);
    snprintf(bad_path, sizeof bad_path, "%s/loader_bad.bin", dir);
    return save_model(good_path, small_config(), &good, &good_size) ||
           save_model(good_q8_path, q8_config(), &good_q8, &good_q8_size);
}

static int teardown(void **state) {
    (void)state;
    unlink(good_path);
    unlink(good_q8_path);
    unlink(bad_path);
    free(good);
    free(good_q8);
    return 0;
}

static void write_bad(const void *data, size_t n) {
    FILE *f = fopen(bad_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

// Opens bad_path expecting failure with a message that names the file and contains want.
static void expect_refused(const char *want) {
    Model m;
    char err[512];
    int rc = model_open(&m, bad_path, err, sizeof err);
    if (rc == 0) {
        model_close(&m);
        fail_msg("accepted a bad file (expected: %s)", want);
    }
    if (!strstr(err, bad_path) || !strstr(err, want)) fail_msg("message '%s' does not say '%s'", err, want);
    assert_null(strchr(err, '\n'));
}

static void test_good_file_opens(void **state) {
    (void)state;
    Model m;
    char err[512];
    assert_int_equal(model_open(&m, good_path, err, sizeof err), 0);
    Config c = small_config();
    assert_int_equal(m.config.dim, c.dim);
    assert_int_equal(m.config.vocab_size, c.vocab_size);
    assert_true((uintptr_t)m.weights.tok_embedding % MODEL_ALIGN == 0);
    assert_true((uintptr_t)m.weights.layers[1].w2 % MODEL_ALIGN == 0);
    assert_ptr_not_equal(m.weights.classifier, m.weights.tok_embedding);
    assert_true((char *)m.weights.classifier + (size_t)c.vocab_size * c.dim * 4 <= (char *)m.map + m.map_bytes);
    assert_null(m.weights.layers[0].qwq.q);
    model_close(&m);
}

// A Q8_0 file: its matrices as int8 values and scales, each piece 64-byte aligned
// (FORMAT.md), the norms and biases float32, the classifier tied to the embedding.
static void test_good_q8_file_opens(void **state) {
    (void)state;
    Model m;
    char err[512];
    assert_int_equal(model_open(&m, good_q8_path, err, sizeof err), 0);
    Config c = q8_config();
    assert_int_equal(((const FileHeader *)good_q8)->version, MODEL_VERSION);
    assert_int_equal(m.config.weight_type, WEIGHTS_Q8_0);
    assert_int_equal(m.config.group_size, 8);
    const LayerWeights *L = &m.weights.layers[1];
    assert_null(L->w2);
    assert_null(m.weights.tok_embedding);
    assert_non_null(L->b2);
    assert_int_equal(L->qw2.gs, 8);
    assert_true((uintptr_t)L->qw2.q % MODEL_ALIGN == 0 && (uintptr_t)L->qw2.s % MODEL_ALIGN == 0);
    // w2 [dim, hidden]: its values, then its scales, then b2
    assert_ptr_equal((const char *)L->qw2.s, (const char *)L->qw2.q + align_up((size_t)c.dim * c.hidden_dim));
    assert_ptr_equal((const char *)L->b2, (const char *)L->qw2.s + align_up((size_t)c.dim * c.hidden_dim / 8 * 4));
    assert_ptr_equal(m.weights.qclassifier.q, m.weights.qtok_embedding.q);
    assert_true(m.map_bytes == good_q8_size && good_q8_size < good_size);
    model_close(&m);
}

static void test_truncated_everywhere(void **state) {
    (void)state;
    for (size_t n = 0; n < good_size; n += (n < 300 ? 1 : 61)) {
        write_bad(good, n);
        expect_refused(n < MODEL_HEADER_SIZE ? "shorter than the" : "");
    }
    for (size_t n = MODEL_HEADER_SIZE; n < good_q8_size; n += 37) {
        write_bad(good_q8, n);
        expect_refused("");
    }
    unsigned char *longer = calloc(1, good_size + 64);
    memcpy(longer, good, good_size);
    write_bad(longer, good_size + 64);
    expect_refused("truncated or padded");
    free(longer);
}

static void set_u32(unsigned char *h, size_t off, uint32_t v) { memcpy(h + off, &v, 4); }

typedef struct {
    size_t off;
    uint32_t value;
    const char *want;
} Patch;

// Each patch on its own on a copy of file: refused, naming the field.
static void refuse_patched(const unsigned char *file, size_t size, const Patch *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char *bad = malloc(size);
        memcpy(bad, file, size);
        set_u32(bad, cases[i].off, cases[i].value);
        write_bad(bad, size);
        expect_refused(cases[i].want);
        free(bad);
    }
}

// A copy of file as a file of an older format version: without the checksum, which came in 5.
static unsigned char *as_version(const unsigned char *file, size_t size, uint32_t version) {
    unsigned char *old = malloc(size);
    memcpy(old, file, size);
    set_u32(old, offsetof(FileHeader, version), version);
    set_u32(old, offsetof(FileHeader, checksum), 0);
    return old;
}

// refuse_patched on file as a file of an older version.
static void refuse_patched_as_version(const unsigned char *file, size_t size, uint32_t version, const Patch *cases,
                                      size_t n) {
    unsigned char *old = as_version(file, size, version);
    refuse_patched(old, size, cases, n);
    free(old);
}

static void test_bad_fields(void **state) {
    (void)state;
    Patch cases[] = {
        {0, 0x4e4e4e4e, "bad magic"},
        {4, MODEL_VERSION + 1, "newer than this build"},
        {4, 0, "version 0 is unknown"},
        {8, 128, "header_size"},
        {12, 0, "dim is 0"},
        {12, 0xffffffffu, "dim is 4294967295"},
        {16, 1u << 31, "hidden_dim"},
        {20, 0, "n_layers is 0"},
        {24, 3, "not a multiple of n_kv_heads"},
        {28, 0, "n_kv_heads is 0"},
        {32, 100000, "head_dim"},
        {36, 1u << 30, "vocab_size"},
        {40, 0, "seq_len is 0"},
        {44, 7, "pos_kind"},
        {52, 9, "ffn_kind"},
        {56, 2, "norm_kind"},
        {60, 0x7fc00000, "norm_eps"}, // NaN
        {64, 2, "post_norm"},
        {72, 8, "bias_flags"},
        {88, 5, "tok_kind"},
        {96, 10, "bos_id"},
        {100, 0xfffffffe, "eos_id"}, // -2
        {104, 0, "tok_offset"},
        {112, 0xffffff00u, "tok_bytes"},
        {120, 70, "weights_offset"},
        {128, 64, "weights_bytes"},
        {252, 1, "shared_dim is 1, outside [0, 0]"},
        {244, 1, "n_experts_used is 1, outside [0, 0]"},
        {248, 1, "moe_flags is 1, outside [0, 0]"},
        {240, 1025, "n_experts is 1025, outside [0, 1024]"},
        {216, 64, "sampling_flags 0x40 has bits this build does not know"},
        {220, 0x3f000000, "the sampling default temperature is 0.5, but sampling_flags does not give it"},
        {204, 1, "a type table (n_matrix_types 1, types_offset 0) without weight_type 4"},
        {164, 16, "arch_flags is 16, outside [0, 15]"},
        {164, 8, "arch_flags 0x8: QK_NORM_WHOLE (8) came with version 8 and goes with QK_NORM (1)"},
        // plausible-looking dimensions, but the file does not have their bytes
        {16, 65536, "weights_bytes"},
        {20, 1000, "weights_bytes"},
    };
    refuse_patched(good, good_size, cases, sizeof cases / sizeof cases[0]);
    Patch v1_cases[] = {
        {136, 1, "version 1 file has no weight_type"},
        {140, 8, "version 1 file has no weight_type"},
        {200, 1, "header bytes 200..203 (the checksum) are not zero in a version 1 file"},
        {216, 1, "reserved header byte 216 is not zero in a version 1 file"},
    };
    refuse_patched_as_version(good, good_size, 1, v1_cases, sizeof v1_cases / sizeof v1_cases[0]);
    Patch v7_cases[] = {{240, 2, "header bytes 240..255 (the experts) are not zero in a version 7 file"},
                        {164, 9, "arch_flags 0x9: QK_NORM_WHOLE (8) came with version 8"}};
    refuse_patched_as_version(good, good_size, 7, v7_cases, sizeof v7_cases / sizeof v7_cases[0]);
    Patch q8_cases[] = {
        {140, 0, "group_size is 0"},
        {140, 65537, "group_size is 65537"},
        {140, 3, "group_size 3 does not divide the rows of width 16"},
        {140, 16, "group_size 16 does not divide the rows of width 24"},
        {140, 4, "weights_bytes"},                   // a valid group size, but another layout
        {136, 0, "group_size is 8, outside [0, 0]"}, // float32 with a group size
    };
    refuse_patched(good_q8, good_q8_size, q8_cases, sizeof q8_cases / sizeof q8_cases[0]);
    Patch q8_v2_cases[] = {
        {136, 2, "version 2 file uses a version 3 weight_type"},
        {4, 1, "version 1 file has no weight_type"},
        {184, 1, "header bytes 184..199 (the chat section) are not zero in a version 2 file"},
    };
    refuse_patched_as_version(good_q8, good_q8_size, 2, q8_v2_cases, sizeof q8_v2_cases / sizeof q8_v2_cases[0]);
}

// A version 6 file of a type per matrix: rows of 256 values everywhere but w2's 288, which take
// 32-value blocks; zero weights.
static const uint8_t typed_table[9] = {3, 6, 7, 8, 20, 10, 11, 2, 14}; // tok_embedding .. classifier
static Config typed_config(void) {
    Config c = small_config();
    c.dim = 256, c.hidden_dim = 288, c.n_layers = 1, c.head_dim = 64, c.pos_kind = POS_ROPE, c.rope_dims = 64;
    c.ffn_kind = FFN_SWIGLU, c.norm_kind = NORM_RMS, c.bias_flags = 0;
    c.weight_type = WEIGHTS_PER_MATRIX, c.type_table = typed_table;
    return c;
}

// Each matrix where the type table says, in its type's bytes, 64-byte aligned; a table that
// names an unknown type, a type whose blocks do not divide a row, the wrong count or place, or
// a version before 6, is refused by name; truncated anywhere, refused.
static void test_type_per_matrix(void **state) {
    (void)state;
    size_t size;
    unsigned char *good_typed;
    assert_int_equal(save_model(bad_path, typed_config(), &good_typed, &size), 0);
    Model m;
    char err[512];
    assert_int_equal(model_open(&m, bad_path, err, sizeof err), 0);
    assert_int_equal(model_verify_checksum(bad_path, err, sizeof err), 0);
    const LayerWeights *L = &m.weights.layers[0];
    assert_int_equal(m.weights.qtok_embedding.type, BLOCK_Q4_1);
    assert_int_equal(L->qwq.type, BLOCK_Q5_0);
    assert_int_equal(L->qw2.type, BLOCK_Q4_0);
    assert_int_equal(m.weights.qclassifier.type, BLOCK_Q6_K);
    assert_null(L->wq);
    assert_true((uintptr_t)L->qw1.blocks % MODEL_ALIGN == 0);
    // w1 [288, 256] in Q2_K (84 bytes a block), then w3 in Q3_K
    assert_ptr_equal(L->qw3.blocks, L->qw1.blocks + align_up(288 * 84));
    assert_ptr_equal((const char *)m.weights.qclassifier.blocks + align_up(10 * 210),
                     (const char *)m.map + m.map_bytes);
    model_close(&m);
    size_t table = MODEL_HEADER_SIZE + sizeof "not parsed by the loader";
    struct {
        size_t off;
        uint8_t value;
        const char *want;
    } bytes[] = {
        {table + 0, 9, "tensor tok_embedding has type 9, which this build does not know"},
        {table + 8, 1, "weights_bytes"}, // a known type, but another size
        {table + 7, 12, "tensor layers.0.w2 is Q4_K, whose rows of 288 values are not whole blocks of 256"},
        {table + 1, 0xff, "tensor layers.0.wq has type 255"},
        {offsetof(FileHeader, n_matrix_types), 8, "n_matrix_types is 8 but the config has 9 matrices"},
        {offsetof(FileHeader, types_offset), 0, "type table (9 bytes at 256) does not follow"},
        {offsetof(FileHeader, weight_type), 0,
         "a type table (n_matrix_types 9, types_offset 281) without weight_type 4"},
        {offsetof(FileHeader, version), 5, "header bytes 204..215 (the type table) are not zero in a version 5 file"},
    };
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        unsigned char *bad = malloc(size);
        memcpy(bad, good_typed, size);
        bad[bytes[i].off] = bytes[i].value;
        write_bad(bad, size);
        expect_refused(bytes[i].want);
        free(bad);
    }
    for (size_t n = MODEL_HEADER_SIZE; n < size; n += 97) {
        write_bad(good_typed, n);
        expect_refused("");
    }
    free(good_typed);
}

// zlib's CRC-32 (reflected polynomial 0xEDB88320), bit by bit: an implementation of the
// checksum independent of the zlib that model_save and model_verify_checksum use.
static uint32_t crc32_bitwise(const unsigned char *p, size_t n) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = crc >> 1 ^ (0xedb88320u & -(crc & 1));
    }
    return ~crc;
}

// Version 5's checksum: the CRC-32 of the whole file with its own bytes as zero; a damaged byte
// anywhere is found by model_verify_checksum (./run --verify) but not by model_open, which
// reads no more than it did; an older file, which has none, passes.
static void test_checksum(void **state) {
    (void)state;
    unsigned char *zeroed = as_version(good, good_size, MODEL_VERSION);
    assert_int_equal(((const FileHeader *)good)->checksum, crc32_bitwise(zeroed, good_size));
    free(zeroed);
    char err[512];
    assert_int_equal(model_verify_checksum(good_path, err, sizeof err), 0);
    size_t offsets[] = {0x10, 200, 300, good_size - 1};
    for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++) {
        unsigned char *bad = malloc(good_size);
        memcpy(bad, good, good_size);
        bad[offsets[i]] ^= 0x40;
        write_bad(bad, good_size);
        free(bad);
        Model m;
        if (offsets[i] >= 300) { // the weights: the layout is still sound
            assert_int_equal(model_open(&m, bad_path, err, sizeof err), 0);
            model_close(&m);
        }
        assert_int_equal(model_verify_checksum(bad_path, err, sizeof err), -1);
        assert_ptr_equal(strstr(err, bad_path), err);
        assert_non_null(strstr(err, ": checksum mismatch: the file is damaged"));
    }
    unsigned char *v4 = as_version(good, good_size, 4);
    write_bad(v4, good_size);
    free(v4);
    assert_int_equal(model_verify_checksum(bad_path, err, sizeof err), 0);
    Model m;
    assert_int_equal(model_open(&m, bad_path, err, sizeof err), 0);
    assert_int_equal(m.version, 4);
    model_close(&m);
}

// Every dimension at its limit: the sizes must be computed without overflow and refused
// because the file is far too small, not wrapped around into something that fits.
static void test_huge_dimensions(void **state) {
    (void)state;
    unsigned char *bad = malloc(good_size);
    memcpy(bad, good, good_size);
    uint32_t limits[][2] = {{12, 65536}, {16, 262144}, {20, 1024},     {24, 1024},
                            {28, 1024},  {32, 4096},   {36, 1u << 24}, {40, 1u << 20}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) set_u32(bad, limits[i][0], limits[i][1]);
    write_bad(bad, good_size);
    expect_refused("weights_bytes");
    free(bad);
}

// The chat section's bytes right after the tokenizer blob, exposed as they are; misplaced, it
// is refused.
static void test_chat_section(void **state) {
    (void)state;
    Config c = small_config();
    size_t bytes = carve_weights(&c, NULL, NULL);
    float *w = calloc(1, bytes);
    const char blob[] = "tokenizer", chat[] = "the chat section";
    char err[512];
    assert_int_equal(model_save_chat(bad_path, &c, blob, sizeof blob, chat, sizeof chat, w, err, sizeof err), 0);
    free(w);
    Model m;
    assert_int_equal(model_open(&m, bad_path, err, sizeof err), 0);
    const FileHeader *h = m.map;
    assert_int_equal(h->version, MODEL_VERSION);
    assert_int_equal(m.chat_bytes, sizeof chat);
    assert_memory_equal(m.chat_section, chat, sizeof chat);
    assert_ptr_equal(m.chat_section, (const char *)m.tok_blob + sizeof blob);
    size_t size = m.map_bytes;
    unsigned char *file = malloc(size);
    memcpy(file, m.map, size);
    model_close(&m);
    Patch cases[] = {
        {184, 256 + sizeof blob + 1, "does not follow the tokenizer blob"},
        {184, 0, "does not follow the tokenizer blob"},
        {192, 0xffffff00u, "does not follow the tokenizer blob"},
        {192, 64, "weights_offset"}, // inside the file, but over the weights
    };
    refuse_patched(file, size, cases, sizeof cases / sizeof cases[0]);
    unsigned char *v3 = as_version(file, size, 3);
    write_bad(v3, size);
    free(v3);
    expect_refused("header bytes 184..199 (the chat section) are not zero in a version 3 file");
    set_u32(file, 192, 0);
    write_bad(file, size);
    expect_refused("chat_offset is 266 but chat_bytes is 0");
    // a file without a section says so: no pointer, no bytes
    assert_int_equal(model_open(&m, good_path, err, sizeof err), 0);
    assert_null(m.chat_section);
    assert_int_equal(m.chat_bytes, 0);
    model_close(&m);
    free(file);
}

// A chat section as bytes: family, ids, the text and, from version 5, the template.
static size_t put_section(unsigned char *out, uint32_t family, const int32_t *ids, uint32_t n_ids, const char *text,
                          const char *jinja) {
    size_t at = 0, tl = strlen(text);
    uint32_t head[2] = {family, n_ids};
    memcpy(out, head, 8), at += 8;
    if (n_ids) memcpy(out + at, ids, 4 * n_ids), at += 4 * n_ids; // ids may be NULL: memcpy wants a pointer
    set_u32(out, at, (uint32_t)tl), at += 4;
    memcpy(out + at, text, tl), at += tl;
    if (!jinja) return at;
    size_t jl = strlen(jinja);
    set_u32(out, at, (uint32_t)jl), at += 4;
    memcpy(out + at, jinja, jl);
    return at + jl;
}

// Parses bytes of a section of this version expecting a refusal that contains want.
static void expect_section_refused(const unsigned char *b, size_t n, int version, const char *want) {
    Tokenizer tok = {.n_pieces = 10};
    ChatTemplate ct;
    char err[512];
    if (!chat_template_init(&ct, b, n, version, &tok, err, sizeof err)) {
        chat_template_free(&ct);
        fail_msg("accepted a bad section (expected: %s)", want);
    }
    if (!strstr(err, want)) fail_msg("message '%s' does not say '%s'", err, want);
}

// Version 5's section: the template's text after the family's; family 0 (none) holds only a
// template; template_len is exactly what remains. Version 4's, without a template, still reads.
static void test_chat_section_v5(void **state) {
    (void)state;
    Tokenizer tok = {.n_pieces = 10};
    ChatTemplate ct;
    char err[512];
    unsigned char b[256];
    const int32_t ids[] = {1, 2};
    const char *jinja = "{% for m in messages %}{{ m.content }}{% endfor %}";
    size_t n = put_section(b, CHAT_NONE, NULL, 0, "", jinja);
    assert_int_equal(chat_template_init(&ct, b, n, 5, &tok, err, sizeof err), 0);
    assert_int_equal(ct.family, CHAT_NONE);
    assert_string_equal(ct.jinja, jinja);
    assert_int_equal(ct.jinja_len, strlen(jinja));
    chat_template_free(&ct);
    n = put_section(b, CHAT_LLAMA2, ids, 2, "sys", jinja);
    assert_int_equal(chat_template_init(&ct, b, n, 5, &tok, err, sizeof err), 0);
    assert_int_equal(ct.family, CHAT_LLAMA2);
    assert_int_equal(ct.ids[1], 2);
    assert_string_equal(ct.system, "sys");
    assert_string_equal(ct.jinja, jinja);
    chat_template_free(&ct);
    expect_section_refused(b, n - 1, 5, "its template is 50 bytes, but 49 remain");
    b[n] = 'x';
    expect_section_refused(b, n + 1, 5, "its template is 50 bytes, but 51 remain");
    set_u32(b, 16, 1000); // text_len, after the two ids, past the end
    expect_section_refused(b, n, 5, "its text is 1000 bytes, but 57 remain before the template's length");
    n = put_section(b, CHAT_LLAMA2, ids, 2, "", "");
    expect_section_refused(b, n - 4, 5, "but 0 remain before the template's length");
    n = put_section(b, CHAT_LLAMA2, ids, 2, "", "\xff");
    expect_section_refused(b, n, 5, "its template is not UTF-8 (or holds NUL) at byte 0");
    n = put_section(b, CHAT_NONE, ids, 2, "", jinja);
    expect_section_refused(b, n, 5, "n_ids is 2, but family 0 (none) has 0");
    n = put_section(b, CHAT_NONE, NULL, 0, "sys", jinja);
    expect_section_refused(b, n, 5, "family 0 (none) has a text of 3 bytes");
    // version 4: the text is the end; family 0 did not exist
    n = put_section(b, CHAT_LLAMA2, ids, 2, "sys", NULL);
    assert_int_equal(chat_template_init(&ct, b, n, 4, &tok, err, sizeof err), 0);
    assert_string_equal(ct.system, "sys");
    assert_null(ct.jinja);
    chat_template_free(&ct);
    n = put_section(b, CHAT_NONE, NULL, 0, "", NULL);
    expect_section_refused(b, n, 4, "family 0 is unknown");
}

static void test_not_a_file(void **state) {
    (void)state;
    Model m;
    char err[512];
    assert_int_equal(model_open(&m, "tests/tmp/does-not-exist.bin", err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    // a folder with a config.json (a Hugging Face model's) is worth converting; another is not
    char hf[256], config[300];
    snprintf(hf, sizeof hf, "%s/loader_hf_dir", dir);
    snprintf(config, sizeof config, "%s/config.json", hf);
    mkdir(hf, 0755);
    FILE *f = fopen(config, "w");
    assert_non_null(f);
    fputs("{}\n", f);
    fclose(f);
    assert_int_equal(model_open(&m, hf, err, sizeof err), -1);
    assert_non_null(strstr(err, "a directory, not a model file; convert it with /usr/bin/python3 tools/convert.py"));
    remove(config);
    assert_int_equal(model_open(&m, hf, err, sizeof err), -1);
    assert_non_null(strstr(err, "a directory, not a model file"));
    assert_null(strstr(err, "convert"));
    rmdir(hf);
}

// Checkpoints tools/convert.py reads, given to the loader: named, with the command to convert them.
static void test_checkpoints_named(void **state) {
    (void)state;
    struct {
        const char *head;
        size_t len;
        const char *want;
    } cases[] = {
        {"GGUF\3\0\0\0", 8, "a GGUF file"},   {"PK\3\4", 4, "a PyTorch checkpoint (a zip archive)"},
        {"\x80\x02\x8a\x0a", 4, "a pickle"},  {"\x10\0\0\0\0\0\0\0{\"a\":{}}", 17, "a safetensors file"},
        {"ak42", 4, "a llama2.c checkpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char file[300] = {0};
        memcpy(file, cases[i].head, cases[i].len);
        write_bad(file, sizeof file);
        expect_refused(cases[i].want);
        expect_refused("not an attn.c model file; convert it with /usr/bin/python3 tools/convert.py");
    }
}

// Bytes of fd's file that a fresh mapping, asking for 2 MiB pages, gets in 2 MiB pages.
static size_t pmd_of_fresh_mapping(int fd, size_t size) {
    void *map = map_populated(fd, size, 1);
    assert_true(map != MAP_FAILED);
    size_t huge = pmd_mapped_bytes(map);
    munmap(map, size);
    return huge;
}

// A file written in small pieces (as cp or a download writes one) sits in the page cache in
// small folios, which map as 4 KiB pages; map_file drops and rereads it so that the mapping
// gets 2 MiB pages. Skipped where the kernel maps no file with 2 MiB pages (before Linux 6.x's
// large folios, or with transparent huge pages off).
static void test_map_file_2m_pages(void **state) {
    (void)state;
    size_t size = 5 * HUGE_PAGE + 12345;
    unsigned char *data = malloc(size);
    for (size_t i = 0; i < size; i++) data[i] = (unsigned char)(i * 2654435761u >> 13);
    write_bad(data, size);
    int fd = open(bad_path, O_RDONLY);
    assert_true(fd >= 0);
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    size_t capable = pmd_of_fresh_mapping(fd, size);
    close(fd);
    if (!capable) {
        free(data);
        skip();
    }
    FILE *f = fopen(bad_path, "wb");
    assert_non_null(f);
    setvbuf(f, NULL, _IONBF, 0);
    for (size_t at = 0; at < size; at += 4096) fwrite(data + at, 1, size - at < 4096 ? size - at : 4096, f);
    fclose(f);
    fd = open(bad_path, O_RDONLY);
    assert_true(pmd_of_fresh_mapping(fd, size) < 4 * HUGE_PAGE); // what map_file has to mend
    unsigned char *map = map_file(fd, size);
    close(fd);
    assert_true(map != MAP_FAILED);
    assert_true(pmd_mapped_bytes(map) >= 4 * HUGE_PAGE);
    assert_memory_equal(map, data, size);
    munmap(map, size);
    free(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file_opens),      cmocka_unit_test(test_good_q8_file_opens),
        cmocka_unit_test(test_truncated_everywhere), cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_huge_dimensions),      cmocka_unit_test(test_chat_section),
        cmocka_unit_test(test_not_a_file),           cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_chat_section_v5),      cmocka_unit_test(test_checkpoints_named),
        cmocka_unit_test(test_type_per_matrix),      cmocka_unit_test(test_map_file_2m_pages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
