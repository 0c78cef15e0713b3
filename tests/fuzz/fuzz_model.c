// Fuzz target: the model-file loader. Any bytes go through model_check_layout, then through
// a real file (a memfd) into model_open, which must agree, and model_verify_checksum. An
// accepted file then has its embedded tokenizer and chat section loaded (a conversation
// rendered with the section) and, if the model is small, forward passes run on a heap copy of
// the file: AddressSanitizer sees heap overreads that a mapping would hide, so every weight
// pointer the loader carved is proven to lie inside the file.
#include "../../model.h"
#include "../../chat/chat.h"
#include "fuzz.h"

static int small_enough(const Config *c) {
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
    return c->seq_len <= 4096 && (size_t)c->n_layers * c->seq_len * kvd <= (1u << 22) &&
           (size_t)c->n_heads * c->seq_len <= (1u << 20);
}

// Runs tokens (ids < vocab_size) at positions 0.. through the model, chunk tokens a pass, with
// the weights and tokenizer carved out of an exact-size heap copy of the file, and a KV cache
// of kv_type.
static void run_forward(const Config *c, const unsigned char *file, const int *tokens, int n, int chunk, int kv_type) {
    const FileHeader *h = (const FileHeader *)file;
    Weights w;
    if (weights_init(&w, c, (float *)(file + h->weights_offset))) return;
    RunState s;
    if (n > c->seq_len) n = c->seq_len;
    if (n > 0 && !state_init(&s, c, chunk, kv_type)) {
        float *logits = malloc(sizeof(float) * chunk * c->vocab_size);
        for (int done = 0; logits && done < n; done += chunk) {
            int T = n - done < chunk ? n - done : chunk;
            forward(c, &w, &s, tokens + done, T, done, logits, 0);
        }
        free(logits);
        state_free(&s);
    }
    weights_free(&w);
}

// A conversation (every role, text that spells special tokens, a <think> block) rendered with a
// file's chat section: every id inside the vocabulary, or a one-line refusal.
static void render_chat(const ChatTemplate *ct, const Tokenizer *tok) {
    static const char *const texts[] = {"Be brief.", "Hi <|im_end|><s>", "<think>x</think>Hello", "Once"};
    static const int roles[] = {CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT, CHAT_USER};
    ChatMessage msgs[4];
    for (int i = 0; i < 4; i++) msgs[i] = (ChatMessage){roles[i], texts[i], strlen(texts[i])};
    size_t most = chat_max_tokens(ct, tok, msgs, 4);
    int *ids = most < (1u << 24) ? malloc(sizeof(int) * (most + 1)) : NULL;
    char err[512];
    if (!ids) return;
    int n = chat_render(ct, tok, msgs, 4, 1, ids, (int)most, err, sizeof err);
    if (n < 0) fuzz_check_message(err);
    for (int i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tok->n_pieces, "chat_render wrote an id outside the vocabulary");
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Config c;
    char err[512], err2[512];
    int accepted = model_check_layout(data, size, &c, err, sizeof err) == 0;
    if (!accepted) fuzz_check_message(err);

    int fd = memfd_create("model", 0);
    if (fd < 0) return 0;
    for (size_t done = 0; done < size;) {
        ssize_t k = write(fd, data + done, size - done);
        if (k <= 0) {
            close(fd);
            return 0;
        }
        done += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    Model m;
    int opened = model_open(&m, path, err2, sizeof err2) == 0;
    if (opened && model_verify_checksum(path, err, sizeof err)) { // a mutated file fails it, in one line
        fuzz_check_message(err);
        FUZZ_ASSERT(strstr(err, path) == err, "model_verify_checksum's message does not start with the file name");
    }
    close(fd);
    FUZZ_ASSERT(opened == accepted, "model_check_layout and model_open disagree");
    if (!opened) {
        fuzz_check_message(err2);
        FUZZ_ASSERT(strstr(err2, path) == err2, "model_open's message does not start with the file name");
        return 0;
    }
    const QMat *qe = &m.weights.qtok_embedding; // the first tensor, in whatever type it is stored
    const void *first = m.weights.tok_embedding ? (const void *)m.weights.tok_embedding
                        : qe->q                 ? (const void *)qe->q
                        : qe->half              ? (const void *)qe->half
                                                : (const void *)qe->blocks;
    FUZZ_ASSERT((const char *)first >= (const char *)m.map + 256, "weights inside the header");
    model_close(&m);

    // A copy of exactly size bytes, 64-byte aligned as a mapping is.
    unsigned char *copy;
    if (posix_memalign((void **)&copy, MODEL_ALIGN, size)) return 0;
    memcpy(copy, data, size);
    const FileHeader *h = (const FileHeader *)copy;
    Tokenizer tok;
    int tok_ok = tokenizer_init(&tok, copy + h->tok_offset, h->tok_bytes, c.tok_kind, c.tok_flags, c.bos_id, c.eos_id,
                                err, sizeof err) == 0;
    if (!tok_ok) fuzz_check_message(err);
    if (tok_ok && h->chat_bytes) {
        ChatTemplate ct;
        if (chat_template_init(&ct, copy + h->chat_offset, h->chat_bytes, (int)h->version, &tok, err, sizeof err))
            fuzz_check_message(err);
        else {
            render_chat(&ct, &tok);
            chat_template_free(&ct);
        }
    }
    if (small_enough(&c)) {
        int tokens[8] = {0, c.vocab_size - 1, c.vocab_size / 2}, n = 3;
        if (tok_ok && tok.n_pieces == c.vocab_size) {
            int k = tokenizer_encode(&tok, "Once", 4, c.tok_flags & TOKF_ADD_BOS ? TOKE_ADD_BOS : 0, tokens + 3, 5, err,
                                     sizeof err);
            if (k > 0) n += k;
        }
        int kv_type = size % 2 ? WEIGHTS_F16 : WEIGHTS_F32; // odd sizes: a float16 cache
        run_forward(&c, copy, tokens, n, 2, kv_type);
        // and a prompt's pass in one: the block types' panels (past 12 tokens) and the tiled
        // attention (16 and more), code that steps of 2 tokens never reach
        int prompt[20], np = c.seq_len < 20 ? c.seq_len : 20;
        for (int i = 0; i < np; i++) prompt[i] = (7 * i + 1) % c.vocab_size;
        if (np >= 16) run_forward(&c, copy, prompt, np, np, kv_type);
    }
    if (tok_ok) tokenizer_free(&tok);
    free(copy);
    return 0;
}

#ifdef MAKE_SEEDS
// Seeds: small valid files over the header's knobs, each with a learned vocabulary.
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *text = "Once upon a time, there was a little cat. The cat was happy; \xc3\xa9t\xc3\xa9 \xe6\x97\xa5.";
    void *blob;
    size_t blob_bytes;
    char err[256];
    if (tokenizer_learn_chars(text, strlen(text), &blob, &blob_bytes, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    uint32_t n_pieces;
    memcpy(&n_pieces, blob, 4);
    // packed by hand: a field per line would fill the screen
    // clang-format off
    Config base = {
        .dim = 8, .hidden_dim = 12, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .head_dim = 4,
        .vocab_size = (int)n_pieces, .seq_len = 6, .pos_kind = POS_ROPE, .ffn_kind = FFN_SWIGLU,
        .norm_kind = NORM_RMS, .final_norm = 1, .tied_classifier = 1, .rope_dims = 4, .rope_theta = 10000.0f,
        .norm_eps = 1e-5f, .embed_scale = 1.0f, .bos_id = -1, .eos_id = -1,
    };
    // clang-format on
    Config gpt = base;
    gpt.pos_kind = POS_LEARNED;
    gpt.ffn_kind = FFN_GELU_TANH;
    gpt.norm_kind = NORM_LAYER;
    gpt.bias_flags = BIAS_ALL;
    gpt.rope_dims = 0;
    gpt.n_kv_heads = 2;
    Config post = gpt;
    post.pos_kind = POS_SINUSOIDAL;
    post.post_norm = 1;
    post.final_norm = 0;
    post.ffn_kind = FFN_RELU;
    post.tied_classifier = 0;
    post.embed_scale = 2.0f;
    post.bias_flags = BIAS_QKV | BIAS_FFN;
    Config deep = base;
    deep.n_layers = 2;
    deep.ffn_kind = FFN_GELU_ERF;
    deep.rope_dims = 2;
    deep.tok_flags = TOKF_ADD_BOS | TOKF_BOS_STOPS;
    deep.bos_id = 0;
    deep.eos_id = 1;
    Config q8 = base, q8_gpt = gpt; // Q8_0: dim 8, hidden 12
    q8.weight_type = q8_gpt.weight_type = WEIGHTS_Q8_0;
    q8.group_size = 4, q8_gpt.group_size = 2;
    // a type per matrix (version 6): every block type of 32 values, on rows of 32
    static const uint8_t types[] = {2, 3, 6, 7, 8, 20, 1, 30, 0};
    Config typed = base;
    typed.dim = 32, typed.hidden_dim = 32, typed.n_heads = 4, typed.head_dim = 8, typed.rope_dims = 8;
    typed.tied_classifier = 0, typed.seq_len = 24; // a context a prompt's pass fits in
    typed.weight_type = WEIGHTS_PER_MATRIX, typed.type_table = types;
    // the 256-value block types (version 6), on the rows of dim 256: wo's and w2's rows of 32
    // take 32-value types
    static const uint8_t k_types[] = {10, 11, 12, 13, 8, 14, 23, 2, 14};
    Config k_typed = typed;
    k_typed.dim = 256, k_typed.n_heads = 2, k_typed.head_dim = 16, k_typed.rope_dims = 16;
    k_typed.type_table = k_types;
    // experts (version 8): 4 of hidden 12, 2 a token with their weights normalised, and a
    // shared expert behind its gate; then with a type per matrix; then a feed-forward without
    // a gated unit (GELU) that takes every expert
    Config moe = base;
    moe.n_experts = 4, moe.n_experts_used = 2, moe.moe_flags = MOE_NORM_TOPK, moe.shared_dim = 8;
    moe.seq_len = 24;
    static const uint8_t moe_types[] = {8, 2, 3, 6, 7, 20, 8, 2, 0, 30, 1, 20};
    Config moe_typed = typed;
    moe_typed.n_experts = 3, moe_typed.n_experts_used = 1, moe_typed.shared_dim = 32;
    moe_typed.type_table = moe_types;
    Config moe_plain = moe;
    moe_plain.ffn_kind = FFN_GELU_TANH, moe_plain.moe_flags = 0, moe_plain.n_experts_used = 4;
    // Gemma 3's knobs: QK and output norms, (1 + w) norms, GeGLU, local layers of a window of
    // 3 with every second one global, scaled RoPE; then Llama 3's RoPE, OLMoE's QK norms over
    // the whole projections, and the file's sampling defaults (version 7)
    Config gemma = deep;
    gemma.arch_flags = ARCH_QK_NORM | ARCH_NORM_PLUS_ONE | ARCH_OUT_NORMS, gemma.ffn_kind = FFN_GEGLU_TANH;
    gemma.sliding_window = 3, gemma.global_every = 2, gemma.rope_local_theta = 100.0f;
    gemma.rope_scaling = ROPE_SCALING_LINEAR, gemma.rope_factor = 8.0f, gemma.attn_scale = 0.25f;
    gemma.embed_scale = 2.8f, gemma.seq_len = 24;
    Config llama3 = base;
    llama3.rope_scaling = ROPE_SCALING_LLAMA3, llama3.rope_factor = 32.0f, llama3.rope_low_freq_factor = 1.0f;
    llama3.rope_high_freq_factor = 4.0f, llama3.rope_original_ctx = 4;
    llama3.arch_flags = ARCH_QK_NORM | ARCH_QK_NORM_WHOLE;
    llama3.sampling_flags = SAMPLING_ALL, llama3.temperature = 0.6f, llama3.top_p = 0.9f, llama3.top_k = 5;
    llama3.min_p = 0.05f, llama3.repeat_penalty = 1.1f;
    Config configs[] = {base, gpt, post, deep, q8, q8_gpt, typed, k_typed, moe, moe_typed, moe_plain, gemma, llama3};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        size_t bytes = carve_weights(&configs[i], NULL, NULL);
        float *w = malloc(bytes);
        for (size_t k = 0; k < bytes / sizeof(float); k++)
            w[k] = (float)((int)(k * 37 % 101) - 50) / 100.0f; // int: in size_t, −50 wrapped and overflowed the logits
        char path[4096];
        snprintf(path, sizeof path, "%s/small%zu.bin", argv[1], i);
        // a chat section of each family in turn (family 0: none, the template's text only), its
        // ids the first pieces, Llama 3's preamble with today's date in it
        static const int ids_of[CHAT_KINDS] = {0, 2, 2, 4, 2, 3, 2, 2};
        int family = (int)(i % CHAT_KINDS), n_ids = ids_of[family];
        const char *text = family == CHAT_LLAMA3 ? "Today Date: {date}\n\n" : family == CHAT_CHATML ? "Be a cat." : "";
        unsigned char chat[256];
        uint32_t fields[2 + CHAT_MAX_IDS] = {(uint32_t)family, (uint32_t)n_ids}, text_len = (uint32_t)strlen(text),
                            template_len = 11;
        for (int k = 0; k < n_ids; k++) fields[2 + k] = (uint32_t)k;
        size_t at = 4 * (2 + (size_t)n_ids);
        memcpy(chat, fields, at);
        memcpy(chat + at, &text_len, 4), memcpy(chat + at + 4, text, text_len), at += 4 + text_len;
        memcpy(chat + at, &template_len, 4), memcpy(chat + at + 4, "{{ bos }}ab", 11), at += 4 + 11;
        if (model_save_chat(path, &configs[i], blob, blob_bytes, chat, at, w, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        free(w);
    }
    free(blob);
    return 0;
}
#endif
