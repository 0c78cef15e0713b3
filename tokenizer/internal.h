// tokenizer/internal.h: what the tokenizer's own files share and nothing else includes: the
// limits, the hash helpers behind every table, the one-line error helper, the blob's byte
// order, one encode call's state, the pair table of vocabulary learning, and each file's
// functions for the others.
// The public API is tokenizer.h; this header adds no behaviour of its own.
#ifndef ATTN_TOKENIZER_INTERNAL_H
#define ATTN_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../tokenizer.h"

#define MAX_PIECES (1u << 24)            // FORMAT.md's vocab_size limit
#define MAX_TEXT_BYTES ((size_t)1 << 30) // longer texts are refused, so positions and id counts fit in an int
#define N_BYTES 256                      // byte values, each with its own fallback piece
#define BYTE_PIECE_LEN 6                 // the length of a byte piece's name, "<0xNN>"
#define UTF8_MAX 4                       // the bytes of the longest UTF-8 character
#define NO_MERGE_SCORE (-1e10f)          // llama2.c merges only pieces scoring above its -1e10 start
#define FNV_OFFSET 2166136261u           // FNV-1a's 32-bit offset basis
#define FNV_PRIME 16777619u              // FNV-1a's 32-bit prime
#define MIN_TABLE_SIZE 16                // the smallest open-addressing table
#define ADDED_BYTES 8                    // an added token's uint32 id and uint32 attributes in the blob
#define SP_SPACE "\xE2\x96\x81"          // U+2581, SentencePiece's space, which kind-0 pieces store as " "
#define SP_SPACE_BYTES 3

// ---- tokenizer.c: errors, the blob, the piece and merge tables ----

// Writes a printf-style message to err (when there is room for one) and returns -1.
int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// The id of the piece spelled s[0..n), the lowest one if several are; -1 if none is.
int piece_lookup(const Tokenizer *t, const char *s, size_t n);

// The piece that the merge of left and right makes, with the merge's rank; -1 if none does.
int merge_lookup(const Tokenizer *t, uint32_t left, uint32_t right, uint32_t *rank);

// Writes "<0xNN>" for byte b, as llama2.c's exporter spells byte pieces.
void byte_piece_name(char out[BYTE_PIECE_LEN + 1], int b);

// A kind-0 blob (FORMAT.md layout, no merges) of n pieces, malloc'd; NULL if out of memory.
unsigned char *blob_pack(int n, const char *const *piece, const uint32_t *len, const float *score, size_t *bytes);

// llama2.c's character grouping: the byte at s[i] and the continuation bytes after it, at most
// UTF8_MAX; returns the group's length.
size_t sp_group(const unsigned char *s, size_t i, size_t len);

// The blob's little-endian uint32 at p.
static inline uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// ---- the hash helpers every table uses (open addressing, linear probing) ----

static inline uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = FNV_OFFSET;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h ^ (h >> 15);
}

// MurmurHash3's 64-bit finaliser, cut to 32 bits.
static inline uint32_t hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

// A power of two at least twice n, so that probe sequences stay short.
static inline uint32_t table_size(uint32_t n) {
    uint32_t s = MIN_TABLE_SIZE;
    while (s < 2 * n) s *= 2;
    return s;
}

// The key of the ordered pair (a, b) in the merge and pair tables; 0 marks an empty slot.
static inline uint64_t pair_key(uint32_t a, uint32_t b) { return ((uint64_t)a << 32 | b) + 1; }

// ---- tokenizer/bpe.c: one encode call's symbols and the merge loop ----

typedef struct Cand Cand;

// One encode call. The pre-tokenisers write piece ids into id[] and hand runs of them to
// merge_and_emit, which links, merges and appends them to out.
typedef struct {
    const Tokenizer *t;
    int *id;               // per symbol: its piece, -1 once merged into its left neighbour
    int *prev, *next;      // per symbol: its neighbours in the list, -1 for none
    uint32_t *ver;         // per symbol: changes to it and its right neighbour, to spot stale pairs
    Cand *heap_mem, *heap; // the candidate pairs
    size_t nheap;
    char *cat; // merging by score: two pieces' bytes back to back, to look their join up
    size_t at; // where the run being encoded starts in the text, for messages
    int *out;
    int n_out, max_out;
    char *err;
    size_t errlen;
} Encoding;

// Allocates the buffers for len bytes of text (len >= 1); 0, or -1 with "out of memory".
int encoding_init(Encoding *e, const Tokenizer *t, size_t len, int *out, int n_out, int max_out, char *err,
                  size_t errlen);
void encoding_free(Encoding *e);

// Merges symbols first..first+n-1 (n >= 1, ids set) and appends the result to out; 0, or -1
// with a message when out is full.
int merge_and_emit(Encoding *e, int first, int n);

// Appends id to out; 0, or -1 with a message when out is full.
int emit_token(Encoding *e, int id);

// ---- tokenizer/added.c: the added tokens ----

// Checks the blob's table of n_added {id, attributes} at b (FORMAT.md) against t's pieces, and
// fills t->attr and the trie of their spellings; 0, or -1 with a message.
int added_read(Tokenizer *t, const unsigned char *b, uint32_t n_added, char *err, size_t errlen);

// The leftmost added token spelled in s[from..len), the longest one there: returns where it
// starts (len if there is none), with its length in *n and its id in *id.
size_t added_find(const Tokenizer *t, const unsigned char *s, size_t from, size_t len, size_t *n, int *id);

// ---- tokenizer/byte_level.c: UTF-8 and kind 1's pre-tokenisation ----

// The length of the well-formed UTF-8 character at s[i..len) (Unicode table 3-7) with its code
// point in *cp, or 0 if the bytes there are not one.
size_t utf8_char(const unsigned char *s, size_t i, size_t len, uint32_t *cp);

// Kind 1's pre-tokenisation: cuts s[0..len) by the split pre (TOK_PRE_*) and writes each
// chunk's end offset to ends[] (room for len); 0 with the count in *n_chunks, or -1 if out of
// memory. A byte that is not well-formed UTF-8 is a character of its own, neither letter,
// number nor space.
int pretokenize(const unsigned char *s, size_t len, int pre, size_t *ends, size_t *n_chunks);

// Kind 1: splits len >= 1 bytes by the tokenizer's TOKF_PRE_* split and encodes each chunk; 0,
// or -1 with a message.
int encode_byte_level(Encoding *e, const unsigned char *s, size_t len);

// ---- tokenizer/normalize.c: Unicode Normalization Form C ----

#define NFC_MAX_GROWTH 3 // NFC makes a text at most this many times longer (composition exclusions)

// s[0..len) in NFC, as JavaScript's normalize("NFC") gives it, in a malloc'd *out of *out_len
// bytes (at most NFC_MAX_GROWTH * len); *out is NULL when s is NFC as it is. A byte that is not well-formed
// UTF-8 passes unchanged and nothing composes or reorders across it (as across U+FFFD).
// 0, or -1 if out of memory.
int nfc_normalize(const unsigned char *s, size_t len, unsigned char **out, size_t *out_len);

// ---- tokenizer/pair_table.c: adjacent pairs of symbols, for vocabulary learning ----

typedef struct {
    int a, b, count;
    int *pos; // the left positions where the pair was counted, stale ones included
    int npos, cap;
    int banned;      // its join is spelled like a "<0xNN>" byte piece, so it never merges
    int queued_step; // the last step that queued it
} Pair;

typedef struct {
    Pair *pairs;
    int npairs, cap;
    uint64_t *key; // pair_key(a, b) -> the pair's index in val
    int *val;
    uint32_t mask;
    uint64_t *heap; // a min-heap of (~count << 32 | index) as queued: the highest count first
    size_t nheap, heapcap;
    int *touched; // pairs counted during this step, queued when it ends
    int ntouched, touchedcap, step;
} PairTable;

int pt_init(PairTable *pt);
void pt_free(PairTable *pt);
// Counts one more (a, b) at left position p; 0, or -1 if out of memory.
int pt_add(PairTable *pt, int a, int b, int p);
// Counts one (a, b) less; the pair must have been counted.
void pt_dec(PairTable *pt, int a, int b);
// Queues every pair counted since the last call, with its current count; 0 or -1.
int pt_flush_touched(PairTable *pt);
// Queues pair i with its current count; 0, or -1 if out of memory.
int pt_heap_push(PairTable *pt, int i);
// Takes the top entry off the heap: the pair's index, and its count when it was queued.
int pt_heap_pop(PairTable *pt, int *queued_count);

#endif
