// Tokenizer: text <-> token ids, given the tokenizer blob of docs/FORMAT.md.
//
// Encoding first finds the blob's added tokens in the text, leftmost first and the longest
// there, as Hugging Face's AddedVocabulary does; special ones only when asked (TOKE_SPECIAL),
// so that a user's text cannot become a control token by spelling one.
// Each run of text between them goes through the kind's own path:
// kind 0 (TOK_SENTENCEPIECE): SentencePiece-style BPE with byte fallback. An optional
//   dummy-prefix space (one per run), then one piece per UTF-8 character, or "<0xNN>" pieces
//   for a character not in the vocabulary; no pre-tokenisation. Without merges (llama2.c's
//   tokenizer.bin, ./train's vocabularies) as llama2.c does: repeatedly the adjacent pair whose
//   concatenation is the highest-scoring piece (leftmost on ties) is merged. With merges (a
//   tokenizer.json's: Llama 2, Mistral and TinyLlama with the dummy prefix, Gemma 3 without)
//   as Hugging Face's BPE does: the pair of lowest rank merges first (leftmost on ties). Pieces
//   store SentencePiece's U+2581 as a space, so with merges a U+2581 in the text is a space.
// kind 1 (TOK_BYTE_BPE): byte-level BPE (GPT-2, Llama 3, Qwen2/2.5/3, SmolLM2). The run is put
//   in NFC if the flags say (Qwen) and cut by the pre-tokenisation split they name (GPT-2's
//   regex, Llama 3's, Qwen2's, or each digit alone then GPT-2's); each chunk starts as one
//   piece per byte, or is one piece whole under TOKF_IGNORE_MERGES (Llama 3), and merges apply
//   by rank as in Hugging Face's BPE, which on GPT-2's merges equals GPT-2's own loop.
//   \p{L} and \p{N} are the general categories, \s is White_Space and (?i) folds U+017F to s,
//   as in Hugging Face's Rust (Unicode 17 tables from tools/gen_unicode_tables.py), so that
//   encodings equal Hugging Face tokenizers'; a byte that is not well-formed UTF-8 is a
//   character of its own, neither letter, number nor space.
//
// Nothing here knows about models; errors come back as -1 with one line in err. The code is
// tokenizer.c, the entry point, and tokenizer/; docs/TOKENIZER.md says which file does what.
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

enum { TOK_SENTENCEPIECE = 0, TOK_BYTE_BPE = 1 };
// tok_flags. NFC: each run of text between added tokens is put in Unicode Normalization Form C
// first (Qwen). IGNORE_MERGES: a pre-tokenised chunk that is itself a piece is taken whole
// (Llama 3). Bits 8..11 name kind 1's pre-tokenisation split, TOK_PRE_*.
enum { TOKF_DUMMY_PREFIX = 1, TOKF_ADD_BOS = 2, TOKF_BOS_STOPS = 4, TOKF_NFC = 8, TOKF_IGNORE_MERGES = 16 };
#define TOKF_PRE_SHIFT 8
#define TOKF_PRE_MASK (15u << TOKF_PRE_SHIFT)
// GPT-2's regex; Llama 3's; Qwen2's (Llama 3's with single digits); each digit alone, then
// GPT-2's regex (SmolLM2, StarCoder).
enum { TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_DIGITS_GPT2, TOK_PRE_KINDS };
// An added token's attributes in the blob's added-token table (FORMAT.md). SPECIAL: matched in
// text only when the caller asks (TOKE_SPECIAL), and decodes to nothing; without it the
// token is matched in any text, as Hugging Face does. STOP: ends generation (end of turn).
enum { TOKA_SPECIAL = 1, TOKA_STOP = 2 };
// tokenizer_encode's options: prepend bos_id; let the text's spelling of special tokens
// become them.
enum { TOKE_ADD_BOS = 1, TOKE_SPECIAL = 2 };

typedef struct {
    int kind;
    unsigned flags;
    int bos_id, eos_id; // -1: none
    int n_pieces, n_merges, max_piece_len;
    char *bytes;            // every piece's bytes back to back (one allocation)
    uint32_t *offset, *len; // piece i is bytes + offset[i], len[i] bytes
    float *score;
    int16_t *byte_of;      // kind 0: the byte a "<0xNN>" piece decodes to, else -1
    int byte_piece[256];   // kind 0: id of "<0xNN>"; kind 1: id of the 1-byte piece; -1
    uint32_t *piece_table; // open addressing on piece bytes: id + 1, 0 = empty
    uint32_t piece_mask;
    uint64_t *merge_key; // with merges: (left << 32 | right) + 1, 0 = empty
    uint32_t *merge_rank, *merge_result;
    uint32_t merge_mask;
    int n_added;
    uint8_t *attr;        // per piece: its TOKA_* attributes if it is an added token, else 0
    int trie_root[256];   // the added tokens' spellings as a byte trie: the root's child per byte, -1
    int32_t *trie_token;  // per trie node: the added token spelled by the path to it, -1 for none
    uint64_t *trie_key;   // open addressing: pair_key(node, byte) of an edge, 0 = empty
    uint32_t *trie_child; // the node the edge leads to
    uint32_t trie_mask;
} Tokenizer;

// Validates the blob completely and copies what it needs (the blob may be unmapped after).
// Returns 0, or -1 with a message in err. An added token is matched in text as its piece's
// bytes, except that in kind 0 a space stands for U+2581 as in every kind-0 piece.
int tokenizer_init(Tokenizer *t, const void *blob, size_t blob_bytes, int kind, unsigned flags, int bos_id, int eos_id,
                   char *err, size_t errlen);
// The same from a llama2.c tokenizer.bin (int max_token_length, then per piece: float score,
// int len, bytes) of exactly vocab_size pieces, with llama2.c's conventions: BOS = 1 prepended
// and ending generation, EOS = 2, the dummy prefix if there is a " " piece.
int tokenizer_init_llama2c(Tokenizer *t, const void *file, size_t file_bytes, int vocab_size, char *err, size_t errlen);
void tokenizer_free(Tokenizer *t);

// Encodes len bytes (any bytes: NUL and invalid UTF-8 included); opts are TOKE_* bits:
// TOKE_ADD_BOS prepends bos_id, TOKE_SPECIAL lets the text's spelling of a special token become
// it (without it such a spelling is text, as Hugging Face's encode_special_tokens makes it).
// Returns the number of ids written to out, at most tokenizer_max_tokens(t, len), or -1 (more
// than max_out ids, a byte with no piece to fall back to, out of memory).
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, unsigned opts, int *out, int max_out, char *err,
                     size_t errlen);

// The most ids len bytes can encode to, BOS included: len + 2, or 2 * len + 2 when the runs
// of text between added tokens each get a dummy prefix, or 3 * len + 2 under TOKF_NFC (NFC
// lengthens a few characters).
size_t tokenizer_max_tokens(const Tokenizer *t, size_t len);
// The fewest ids len bytes can encode to (no piece is longer than max_piece_len): a text too
// long for a context is refused by its length alone, before it is tokenized.
size_t tokenizer_min_tokens(const Tokenizer *t, size_t len);

// The bytes token stands for when it follows prev_token (-1 at the start): "<0xNN>" pieces
// give their byte, bos, eos and special tokens give nothing, and with the dummy prefix on, the
// space that starts the token after bos is dropped (llama2.c). The result points into t; NULL
// if token is not an id. The bytes are raw: pass them through tokenizer_sanitize before a
// terminal.
const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token, size_t *len);

// Whether generating token ends the text: eos_id, an added token with TOKA_STOP (end of turn),
// or bos_id under TOKF_BOS_STOPS.
int tokenizer_is_stop(const Tokenizer *t, int token);

// Streaming filter that makes decoded bytes safe to print. A UTF-8 character split across
// tokens is held back until complete; invalid UTF-8 becomes U+FFFD (one per maximal invalid
// subpart, as the Unicode standard recommends); control characters (C0 other than \t and \n, so
// \r too; DEL, C1) are dropped so that a model cannot drive the terminal or overwrite a line. Needs out to hold
// 3 * n + 12 bytes; returns the bytes written. flush = 1 ends the stream (pending bytes of an
// unfinished character become U+FFFD). Zero-initialise the state.
typedef struct {
    unsigned char pending[4];
    int n;
} TokSanitizer;
size_t tokenizer_sanitize(TokSanitizer *s, const char *in, size_t n, char *out, int flush);

// The offset of the first byte of text that is not well-formed UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF included) or is NUL; n if there is none. Prompts
// and corpora are refused at that offset rather than guessed at.
size_t tokenizer_first_non_text(const char *text, size_t n);

// Vocabulary learning for ./train. Both return a malloc'd kind-0 blob (FORMAT.md layout, no
// merges list) in *blob / *blob_bytes, meant for tok_flags without the dummy prefix; 0 or -1.
// learn_chars: one piece per distinct UTF-8 character of the text, in code point order (so ids
//   match nanoGPT's sorted(set(text)) for valid UTF-8), plus "<0xNN>" pieces for the bytes of
//   invalid UTF-8, so that the text itself always encodes.
// learn_bpe: the 256 "<0xNN>" pieces (ids 0..255, so any bytes encode), then the text's
//   distinct characters (the most frequent ones if they do not all fit), then pieces learned
//   by merging the most frequent adjacent pair, scored so that kind-0 encoding applies them in
//   the order learned. Stops early (fewer than vocab_size pieces) when no pair occurs twice.
int tokenizer_learn_chars(const char *text, size_t len, void **blob, size_t *blob_bytes, char *err, size_t errlen);
// Learning a large vocabulary takes minutes: with progress not NULL, learn_bpe reports each
// piece it adds as progress->fn(progress->ctx, pieces so far, vocab_size).
typedef struct {
    void (*fn)(void *ctx, int pieces, int vocab_size);
    void *ctx;
} TokProgress;
int tokenizer_learn_bpe(const char *text, size_t len, int vocab_size, const TokProgress *progress, void **blob,
                        size_t *blob_bytes, char *err, size_t errlen);

#endif
