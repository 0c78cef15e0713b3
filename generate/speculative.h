// generate/speculative.h: speculative decoding for ./run (--lookup N, --draft MODEL). Up to
// draft_max tokens are proposed cheaply, by the context itself (prompt lookup, llama.cpp's
// llama-lookup) or by a small draft model (with both, by the context where it has a match); the
// target scores them all in one batched forward, which reads its weights once, and keeps the
// longest prefix the acceptance rule of Leviathan et al. 2023 and Chen et al. 2023 accepts, plus
// one token of its own. The text is distributed exactly as a plain run's: at -t 0 it is the same
// text (up to the rounding of a batched product against a one-row one), and with sampling each
// token is drawn from the target's filtered distribution p, with the draws from the run's seeded
// generator.
// Included by run.c after io/cli.h (die) and model.h.
#ifndef ATTN_GENERATE_SPECULATIVE_H
#define ATTN_GENERATE_SPECULATIVE_H

#include "../model.h"
#include "../tokenizer.h"

// The longest run of an earlier match of the last n-gram that lookup extends backwards: it
// only ranks matches, and a text of one repeated token would otherwise cost O(n^2) a round.
#define LOOKUP_MAX_MATCH 256

// run.c's forward pass over tokens [n] from pos0, stopping the run at a non-finite logit; with
// each_row set, the logits of every row land in logits [n, vocab_size] (n ≤ the state's batch).
typedef void (*SpecForward)(const Model *m, RunState *s, const int *tokens, int n, int pos0, float *logits,
                            void (*each_row)(void *ctx, int row, const float *logits), void *ctx);

typedef struct {
    int lookup;    // --lookup N: the n-gram matched against the context, or 0
    int draft_max; // --draft-max K: tokens proposed a round at most
    // --draft-p-min P: the draft model proposes no token where its most likely one has a
    // probability below P (llama.cpp's --draft-p-min)
    float draft_p_min;
    Model draft; // --draft's model (draft.map NULL without one), its tokenizer checked equal
    RunState draft_state;
    int draft_pos;  // positions of the context in the draft's cache
    float *rows;    // (draft_max + 1, vocab_size) the target's logits of a verification
    float *q;       // (draft_max, vocab_size) the draft's distributions of its drafts (sampling only)
    float *p;       // (vocab_size) the target's distribution at the position being decided
    float *dlogits; // (vocab_size) the draft's last logits
    long drafted, accepted;
    SpecForward forward;
    // a stand-in drafter that writes up to k tokens after tokens [n] and returns how many, as
    // lookup does (bench/speculative_projection.c's: drafts agreeing at a chosen rate); NULL in ./run
    int (*propose)(void *ctx, int *tokens, int n, int k);
    void *propose_ctx;
} Speculator;

// The first difference in what the ids mean between the target's tokenizer a and the draft's b
// (pieces, special and stop tokens, BOS and EOS), in why; 0 when there is none.
static int tokenizer_difference(const Tokenizer *a, const Tokenizer *b, char *why, size_t size) {
    if (a->n_pieces != b->n_pieces)
        return snprintf(why, size, "%d tokens where the target has %d", b->n_pieces, a->n_pieces), 1;
    if (a->bos_id != b->bos_id || a->eos_id != b->eos_id)
        return snprintf(why, size, "BOS %d and EOS %d where the target has %d and %d", b->bos_id, b->eos_id, a->bos_id,
                        a->eos_id),
               1;
    for (int i = 0; i < a->n_pieces; i++)
        if (a->len[i] != b->len[i] || memcmp(a->bytes + a->offset[i], b->bytes + b->offset[i], a->len[i]) ||
            a->attr[i] != b->attr[i])
            return snprintf(why, size, "token %d is not the target's token %d", i, i), 1;
    return 0;
}

// The draft model of --draft: mapped, its context and tokenizer the target's, its state of the
// target's batch and cache type. Refuses with one line what cannot serve as the draft.
static void speculator_open_draft(Speculator *sp, const char *path, const Model *target, const Tokenizer *tok,
                                  int file_seq_len, int batch, int kv_type) {
    char err[512], why[256];
    if (model_open(&sp->draft, path, err, sizeof err)) die("--draft %s", err);
    Config *dc = &sp->draft.config;
    if (dc->seq_len != file_seq_len)
        die("--draft %s: its context is %d positions, the target's %d: a draft must have the target's", path,
            dc->seq_len, file_seq_len);
    dc->seq_len = target->config.seq_len; // -c shortens both
    Tokenizer dtok;
    if (tokenizer_init(&dtok, sp->draft.tok_blob, sp->draft.tok_bytes, dc->tok_kind, dc->tok_flags, dc->bos_id,
                       dc->eos_id, err, sizeof err))
        die("--draft %s: tokenizer: %s", path, err);
    int differs = dtok.n_pieces != dc->vocab_size || tokenizer_difference(tok, &dtok, why, sizeof why);
    tokenizer_free(&dtok);
    if (differs) die("--draft %s: not the target's tokenizer: %s", path, why);
    if (dc->vocab_size != target->config.vocab_size)
        die("--draft %s: vocab_size %d where the target has %d", path, dc->vocab_size, target->config.vocab_size);
    if (state_init(&sp->draft_state, dc, batch, kv_type)) die("--draft %s: out of memory for its run state", path);
}

// A speculator of --lookup N (0 for a draft model, opened next) and --draft-max K, whose forward
// passes run through forward.
static void speculator_init(Speculator *sp, const Model *m, int lookup, int draft_max, SpecForward forward) {
    size_t v = (size_t)m->config.vocab_size;
    *sp = (Speculator){.lookup = lookup, .draft_max = draft_max, .forward = forward};
    sp->rows = malloc(sizeof(float) * v * (draft_max + 1));
    sp->q = malloc(sizeof(float) * v * draft_max);
    sp->p = malloc(sizeof(float) * v);
    sp->dlogits = malloc(sizeof(float) * v);
    if (!sp->rows || !sp->q || !sp->p || !sp->dlogits) die("out of memory");
}

static void speculator_free(Speculator *sp) {
    if (sp->draft.map) {
        state_free(&sp->draft_state);
        model_close(&sp->draft);
    }
    free(sp->rows);
    free(sp->q);
    free(sp->p);
    free(sp->dlogits);
}

// Up to k tokens after tokens [n], written there: those that followed the earlier occurrence of
// the last lookup tokens whose match runs furthest back (the latest among equals). A match that
// reaches the end goes on with its own drafts, as a repeating pattern does. Returns how many.
static int lookup_draft(const Speculator *sp, int *tokens, int n, int k) {
    int g = sp->lookup, best = -1, best_len = 0;
    if (n <= g) return 0;
    const int *tail = tokens + n - g;
    for (int at = n - 1; at >= g; at--) { // the n-gram ends just before at, which follows it
        if (memcmp(tokens + at - g, tail, sizeof(int) * g)) continue;
        int len = g;
        while (len < LOOKUP_MAX_MATCH && at - len - 1 >= 0 && tokens[at - len - 1] == tokens[n - len - 1]) len++;
        if (len > best_len) best = at, best_len = len;
    }
    if (best < 0) return 0;
    for (int i = 0; i < k; i++) tokens[n + i] = tokens[best + i]; // best + i may be a draft just written
    return k;
}

static void rows_stay(void *ctx, int row, const float *logits) { // forward wrote every row in place
    (void)ctx, (void)row, (void)logits;
}

// The probability softmax gives the largest of logits [v]: the draft's confidence in its next token.
static float top_probability(const float *logits, int v) {
    float top = logits[0], sum = 0.0f;
    for (int i = 1; i < v; i++) top = logits[i] > top ? logits[i] : top;
    for (int i = 0; i < v; i++) sum += expf(logits[i] - top);
    return 1.0f / sum;
}

// The draft model's tokens after tokens [n], at most k, into tokens [n..): drawn from its
// distributions under the target's sampler (kept in sp->q when sampling); its cache catches up
// first. Returns how many: it stops at the first position where its most likely token's
// probability (softmax of its raw logits) is below --draft-p-min, so that an unsure round costs
// no verification rows. The distribution stays exact: whether a position is drafted depends only
// on the tokens before it, never on the token drawn there or on the target, so a drafted token is
// still drawn from q, and a position left undrafted is the target's own draw from p. (A rule on
// the drawn token's own probability would skew it: the draws it lets through are not q's.)
static int model_draft(Speculator *sp, Sampler *smp, int *tokens, int n, int k) {
    size_t v = (size_t)smp->vocab_size;
    sp->forward(&sp->draft, &sp->draft_state, tokens + sp->draft_pos, n - sp->draft_pos, sp->draft_pos, sp->dlogits,
                NULL, NULL);
    int i = 0;
    for (; i < k && top_probability(sp->dlogits, (int)v) >= sp->draft_p_min; i++) {
        if (smp->temperature == 0.0f) tokens[n + i] = sample_coin(smp, sp->dlogits, tokens, n + i, 0.0f);
        else {
            float *q = sp->q + i * v;
            sample_distribution(smp, sp->dlogits, tokens, n + i, q);
            tokens[n + i] = sample_mult(q, (int)v, random_f32(&smp->rng_state));
        }
        if (i + 1 < k) sp->forward(&sp->draft, &sp->draft_state, tokens + n + i, 1, n + i, sp->dlogits, NULL, NULL);
    }
    sp->draft_pos = i < k ? n + i : n + k - 1; // the last draft of a full round is not in its cache
    return i;
}

// Whether the target keeps draft token x at this position, its logits row: -1 when it does,
// else the token it puts there instead. Greedy, that is its own choice; sampling, x (drawn
// from q: the draft's distribution, NULL for a point mass on x) is kept with probability
// min(1, p(x)/q(x)), where p is the target's filtered distribution, and the replacement is
// drawn from norm(max(0, p - q)).
static int judge_draft(Speculator *sp, Sampler *smp, float *row, const float *q, const int *tokens, int n, int x) {
    int v = smp->vocab_size;
    if (smp->temperature == 0.0f) {
        int best = sample_coin(smp, row, tokens, n, 0.0f);
        return best == x ? -1 : best;
    }
    float *p = sp->p;
    sample_distribution(smp, row, tokens, n, p);
    float px = p[x], qx = q ? q[x] : 1.0f;
    if (random_f32(&smp->rng_state) * qx < px) return -1;
    float mass = 0.0f;
    for (int i = 0; i < v; i++) {
        p[i] = q ? (p[i] > q[i] ? p[i] - q[i] : 0.0f) : i == x ? 0.0f : p[i];
        mass += p[i];
    }
    // p = q leaves no mass, but then every draft is kept: only rounding comes here
    return mass > 0.0f ? sample_mult(p, v, random_f32(&smp->rng_state) * mass) : x;
}

// One round. tokens [n] hold the context, the last of them not yet in the target's cache (at
// position n - 1 < seq_len); room ≥ 1 more fit. Drafts, verifies and appends the accepted
// drafts and one token of the target's to tokens; returns how many it appended.
static int speculate(Speculator *sp, const Model *m, RunState *s, Sampler *smp, int *tokens, int n, int room) {
    const Config *c = &m->config;
    size_t v = (size_t)c->vocab_size;
    int k = sp->draft_max;
    // the batch must fit the context and the state, and rewinding a local layer's ring then
    // loses nothing: its rows of the positions a later query sees are more than a batch back
    if (k > room - 1) k = room - 1;
    if (k > c->seq_len - n) k = c->seq_len - n;
    if (k > s->max_batch - 1) k = s->max_batch - 1;
    // with both --lookup and --draft, the context's match drafts where there is one and the model
    // elsewhere: the choice depends only on the tokens before, so either keeps the rule exact
    int from_model = 0;
    if (k > 0 && sp->propose) k = sp->propose(sp->propose_ctx, tokens, n, k);
    else if (k > 0) {
        int found = sp->lookup ? lookup_draft(sp, tokens, n, k) : 0;
        from_model = !found && sp->draft.map;
        k = from_model ? model_draft(sp, smp, tokens, n, k) : found;
    }
    // a verification is generation, whose products --compute bf16 leaves in float32
    int bf16 = s->compute_bf16;
    s->compute_bf16 = 0;
    sp->forward(m, s, tokens + n - 1, k + 1, n - 1, sp->rows, rows_stay, NULL);
    s->compute_bf16 = bf16;
    int kept = 0, next = -1;
    while (kept < k && (next = judge_draft(sp, smp, sp->rows + kept * v, from_model ? sp->q + kept * v : NULL, tokens,
                                           n + kept, tokens[n + kept])) < 0)
        kept++;
    if (next < 0) next = sample(smp, sp->rows + k * v, tokens, n + k);
    tokens[n + kept] = next;
    sp->drafted += k;
    sp->accepted += kept;
    if (from_model && sp->draft_pos > n + kept) sp->draft_pos = n + kept;
    return kept + 1;
}

#endif
