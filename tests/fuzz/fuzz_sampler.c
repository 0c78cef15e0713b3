// Fuzz target: the sampler (model/sampler.h) under every option value the command line
// accepts, with any logits the model could produce (inf and NaN included) and any history. The
// token drawn must be an id; with finite logits it must have a non-zero probability and survive
// top-k and min-p; greedy must be the argmax.
#include "../../model.h"
#include "fuzz.h"

#define MAX_VOCAB 64

typedef struct {
    const uint8_t *p;
    size_t n;
} Bytes;

static uint32_t take_u32(Bytes *b) {
    uint32_t v = 0;
    size_t k = b->n < 4 ? b->n : 4;
    memcpy(&v, b->p, k);
    b->p += k;
    b->n -= k;
    return v;
}

static float take_f32(Bytes *b) {
    uint32_t u = take_u32(b);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// An option value inside [lo, hi], as parse_num would let it through: the raw float if it
// is in range, else one of the edges and values just inside them.
static float option(Bytes *b, float lo, float hi) {
    uint8_t sel = b->n ? (b->n--, *b->p++) : 0;
    float v = take_f32(b);
    if (isfinite(v) && v >= lo && v <= hi) return v;
    float picks[] = {lo, hi, nextafterf(lo, hi), nextafterf(hi, lo), 1e-30f, 1.0f, 0.5f};
    v = picks[sel % 7];
    return v < lo || v > hi ? lo : v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Bytes b = {data, size};
    uint32_t head = take_u32(&b);
    int n = 1 + (int)(head % MAX_VOCAB), n_history = (int)(head >> 8) % 40;
    ProbIndex scratch[MAX_VOCAB];
    Sampler s = {.vocab_size = n, .probindex = scratch};
    // every field is read whether used or not, so that the layout stays fixed
    float temperature = option(&b, 0, 100), topp = option(&b, 0, 1), minp = option(&b, 0, 1),
          penalty = option(&b, 0.01f, 100);
    s.temperature = (head >> 16) % 4 == 0 ? 0.0f : temperature;
    s.topp = topp;
    s.minp = (head >> 18) % 2 ? 0.0f : minp;
    s.repeat_penalty = (head >> 19) % 2 ? 1.0f : penalty;
    uint32_t k = take_u32(&b);
    s.topk = k % 3 == 0 ? 0 : (int)((k >> 2) % (k & 2 ? (1u << 24) + 1 : (uint32_t)n + 2));
    s.repeat_window = (int)(take_u32(&b) % ((1u << 20) + 1));
    uint64_t lo = take_u32(&b), hi = take_u32(&b);
    s.rng_state = hi << 32 | lo;
    int history[40];
    for (int i = 0; i < n_history; i++) history[i] = (int)(take_u32(&b) % (uint32_t)n);
    float logits[MAX_VOCAB], in[MAX_VOCAB];
    int finite = 1;
    for (int i = 0; i < n; i++) {
        in[i] = logits[i] = b.n ? take_f32(&b) : 0.0f;
        finite &= isfinite(in[i]);
    }
    int t = sample(&s, logits, history, n_history);
    FUZZ_ASSERT(t >= 0 && t < n, "the sampler returned a token outside the vocabulary");
    if (!finite) return 0;
    if (s.temperature == 0.0f) {
        // greedy: the first of the largest penalised logits
        for (int i = 0; i < n; i++)
            FUZZ_ASSERT(!(logits[i] > logits[t]) && !(i < t && logits[i] == logits[t]), "greedy is not the argmax");
        return 0;
    }
    // logits now hold the probabilities the draw was made from
    int all_finite = 1;
    float max = 0.0f;
    for (int i = 0; i < n; i++) {
        all_finite &= isfinite(logits[i]);
        if (logits[i] > max) max = logits[i];
    }
    if (!all_finite) return 0; // a temperature so small that logits / T overflowed
    FUZZ_ASSERT(logits[t] > 0.0f, "the sampler drew a token of probability zero");
    if (s.topk > 0) {
        int above = 0;
        for (int i = 0; i < n; i++) above += logits[i] > logits[t];
        FUZZ_ASSERT(above < s.topk, "the sampler drew a token outside the top k");
    }
    if (s.minp > 0.0f) FUZZ_ASSERT(logits[t] >= s.minp * max, "the sampler drew a token below min-p");
    return 0;
}

#ifdef MAKE_SEEDS
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    struct {
        uint32_t head;
        uint8_t s1;
        float t;
        uint8_t s2;
        float p;
        uint8_t s3;
        float minp;
        uint8_t s4;
        float r;
        uint32_t k, window, lo, hi;
        float logits[8];
    } __attribute__((packed)) seed = {.head = 7 | 1u << 16,
                                      .t = 0.8f,
                                      .p = 0.9f,
                                      .minp = 0.05f,
                                      .r = 1.3f,
                                      .k = 5 << 2 | 1,
                                      .window = 64,
                                      .lo = 42,
                                      .logits = {2, 1, 0.5f, 0, -1, -3, 4, 1}};
    fuzz_write_seed(argv[1], "mixed", &seed, sizeof seed);
    seed.head = 7 | 2u << 16 | 1u << 18 | 1u << 19;
    seed.t = 1.0f;
    seed.p = 1.0f;
    fuzz_write_seed(argv[1], "plain", &seed, sizeof seed);
    seed.logits[3] = -INFINITY;
    seed.logits[5] = -1e30f;
    seed.t = 1e-3f;
    fuzz_write_seed(argv[1], "extreme", &seed, sizeof seed);
    return 0;
}
#endif
