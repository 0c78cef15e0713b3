// tokenizer/added.c: the added tokens, FORMAT.md's table of {id, attributes} after the merges.
// It checks the table and keeps the tokens' spellings as a byte trie, so that encoding finds
// the leftmost, longest one in a text at the cost of the bytes it looks at, however many added
// tokens there are (Gemma 3 has 6,415). It never encodes the text between them: tokenizer.c
// does, and decides which matches count (special ones only when asked).
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define KNOWN_ATTRS (TOKA_SPECIAL | TOKA_STOP)

// The trie node that byte c leads to from node (0 is the root), or -1.
static int trie_child(const Tokenizer *t, int node, unsigned char c) {
    if (node == 0) return t->trie_root[c];
    uint64_t key = pair_key((uint32_t)node, c);
    for (uint32_t h = hash_u64(key) & t->trie_mask; t->trie_key[h]; h = (h + 1) & t->trie_mask)
        if (t->trie_key[h] == key) return (int)t->trie_child[h];
    return -1;
}

// The child of node for byte c, made (as node *nodes, which then counts one more) if missing.
static int trie_add(Tokenizer *t, int node, unsigned char c, int *nodes) {
    int next = trie_child(t, node, c);
    if (next >= 0) return next;
    next = (*nodes)++;
    t->trie_token[next] = -1;
    if (node == 0) {
        t->trie_root[c] = next;
        return next;
    }
    uint64_t key = pair_key((uint32_t)node, c);
    uint32_t h = hash_u64(key) & t->trie_mask;
    while (t->trie_key[h]) h = (h + 1) & t->trie_mask;
    t->trie_key[h] = key;
    t->trie_child[h] = (uint32_t)next;
    return next;
}

// The bytes piece id is matched as in text: kind 0 stores U+2581 as a space, like every piece.
static size_t spelled_len(const Tokenizer *t, uint32_t id) {
    if (t->kind != TOK_SENTENCEPIECE) return t->len[id];
    size_t n = 0;
    for (uint32_t k = 0; k < t->len[id]; k++) n += t->bytes[t->offset[id] + k] == ' ' ? SP_SPACE_BYTES : 1;
    return n;
}

// Enters piece id's spelling in the trie (the first token entered keeps a shared spelling).
static void trie_insert(Tokenizer *t, uint32_t id, int *nodes) {
    int node = 0;
    for (uint32_t k = 0; k < t->len[id]; k++) {
        char c = t->bytes[t->offset[id] + k];
        if (t->kind == TOK_SENTENCEPIECE && c == ' ')
            for (int b = 0; b < SP_SPACE_BYTES; b++) node = trie_add(t, node, (unsigned char)SP_SPACE[b], nodes);
        else node = trie_add(t, node, (unsigned char)c, nodes);
    }
    if (t->trie_token[node] < 0) t->trie_token[node] = (int32_t)id;
}

// Checks every entry of the table and sets t->attr; counts the trie's bytes in *spelled.
static int check_table(Tokenizer *t, const unsigned char *b, uint32_t n_added, size_t *spelled, char *err,
                       size_t errlen) {
    unsigned char *seen = calloc((size_t)t->n_pieces, 1);
    if (!seen) return fail(err, errlen, "out of memory for %u added tokens", n_added);
    int rc = 0;
    *spelled = 0;
    for (uint32_t i = 0; i < n_added && !rc; i++, b += ADDED_BYTES) {
        uint32_t id = rd32(b), attr = rd32(b + 4);
        if (id >= (uint32_t)t->n_pieces)
            rc = fail(err, errlen, "tokenizer added token %u: id %u outside the vocabulary of %d", i, id, t->n_pieces);
        else if (seen[id]) rc = fail(err, errlen, "tokenizer added token %u: id %u is listed twice", i, id);
        else if (attr & ~(uint32_t)KNOWN_ATTRS)
            rc = fail(err, errlen, "tokenizer added token %u (id %u): attributes 0x%x have unknown bits", i, id, attr);
        else if (!t->len[id]) rc = fail(err, errlen, "tokenizer added token %u (id %u) is an empty piece", i, id);
        else {
            seen[id] = 1;
            t->attr[id] = (uint8_t)attr;
            *spelled += spelled_len(t, id);
        }
    }
    free(seen);
    return rc;
}

int added_read(Tokenizer *t, const unsigned char *b, uint32_t n_added, char *err, size_t errlen) {
    size_t spelled = 0;
    if (check_table(t, b, n_added, &spelled, err, errlen)) return -1;
    t->n_added = (int)n_added;
    if (!n_added) return 0;
    if (spelled >= INT32_MAX) return fail(err, errlen, "tokenizer added tokens spell %zu bytes, too many", spelled);
    t->trie_mask = table_size((uint32_t)spelled) - 1;
    t->trie_token = malloc(sizeof(int32_t) * (spelled + 1)); // the root, then at most a node per byte
    t->trie_key = calloc((size_t)t->trie_mask + 1, sizeof(uint64_t));
    t->trie_child = malloc(sizeof(uint32_t) * ((size_t)t->trie_mask + 1));
    if (!t->trie_token || !t->trie_key || !t->trie_child)
        return fail(err, errlen, "out of memory for %u added tokens", n_added);
    int nodes = 1;
    t->trie_token[0] = -1;
    for (uint32_t i = 0; i < n_added; i++, b += ADDED_BYTES) trie_insert(t, rd32(b), &nodes);
    return 0;
}

size_t added_find(const Tokenizer *t, const unsigned char *s, size_t from, size_t len, size_t *n, int *id) {
    if (!t->n_added) return len;
    for (size_t i = from; i < len; i++) {
        *id = -1;
        size_t j = i;
        for (int node = t->trie_root[s[j++]]; node >= 0; node = j < len ? trie_child(t, node, s[j++]) : -1)
            if (t->trie_token[node] >= 0) {
                *id = t->trie_token[node];
                *n = j - i;
            }
        if (*id >= 0) return i;
    }
    return len;
}
