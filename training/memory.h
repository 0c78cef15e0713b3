// training/memory.h: the memory a run will hold, estimated from its model and options before
// the large allocations, and checked against what the machine has free, so that a run too
// large is refused in one line instead of failing on one allocation or being killed midway.
#ifndef ATTN_TRAINING_MEMORY_H
#define ATTN_TRAINING_MEMORY_H

#include "acts.h"
#include "options.h"

// What a process holds besides the run's own blocks: the program and its libraries, OpenBLAS's
// packing buffers and the C library's heap. Measured: the peak resident size of a 2-step run
// of a 1-layer, 16-wide model (whose own blocks are under 1 MiB) is 13.6-13.7 MiB.
#define BASE_BYTES (13.0 * (1 << 20))

// Bytes a corpus byte takes at the two moments before training that hold the most on a large
// corpus (measured, peak resident size of ./train on Tiny Shakespeare repeated to 1 MB and 50 MB):
// learning a BPE vocabulary, the text, each symbol's piece and neighbours (12 bytes) and the
// pair table's positions and counts: 36.2-39.0; encoding the corpus, the text, the ids (4 a
// byte at most) and the encoder's symbols and neighbours (12): 15.9-17.0 with a vocabulary of
// single characters of one byte, 30.1-30.8 with longer pieces, whose merges add the encoder's
// versions and heap of candidates.
#define LEARN_BYTES_PER_BYTE 38.0
#define ENCODE_BYTES_PER_BYTE 17.0
#define MERGING_BYTES_PER_BYTE 31.0

// The phases a run's peak may fall in, for the memory line.
enum { PEAK_TRAINING, PEAK_ENCODING, PEAK_LEARNING, PEAK_RESUMING };

typedef struct {
    double weights, grads, moments, acts, corpus, base;
    double peak; // the largest sum at any one time (see run_memory), in the phase named by when
    int when;    // PEAK_*
} RunMemory;

// Whether encoding with the vocabulary of tok_blob merges symbols: a piece longer than a byte
// (its header's max_piece_len, the third u32).
static int vocabulary_merges(const void *tok_blob) {
    uint32_t longest;
    memcpy(&longest, (const char *)tok_blob + 8, sizeof longest);
    return longest > 1;
}

// The run's memory, by part, in bytes; every block is written whole when it is allocated
// (xcalloc clears it), so each counts in full. Weights, gradients (one copy per thread, the
// first the sum), the two AdamW moments of this rank's shard (with another shard-sized block
// for the gradients' sum under MPI), the activations of one micro-batch, and the corpus as
// token ids (at most one a byte). Three moments before training hold more on a large corpus:
// learning a BPE vocabulary (learns), encoding the corpus (merges: with pieces longer than a
// byte), and reading a resume state, the whole file (three times the weights) beside the
// weights and both whole moments.
static RunMemory run_memory(const Config *c, const Opts *o, int ranks, size_t corpus_len, int resume, int learns,
                            int merges) {
    Acts scratch;
    double p = (double)carve_weights(c, NULL, NULL), shard = p / ranks;
    RunMemory m = {
        .weights = p,
        .grads = p * max_threads(),
        .moments = 2 * shard + (ranks > 1 ? shard : 0),
        .acts = 4.0 * carve_acts(c, o->batch_size, o->block_size, o->dropout > 0, &scratch, NULL) +
                8.0 * o->batch_size * o->block_size,
        .corpus = 4.0 * corpus_len,
        .base = BASE_BYTES,
    };
    double phases[] = {
        [PEAK_TRAINING] = m.weights + m.grads + m.moments + m.acts + m.corpus,
        [PEAK_ENCODING] = m.weights + (merges ? MERGING_BYTES_PER_BYTE : ENCODE_BYTES_PER_BYTE) * corpus_len,
        [PEAK_LEARNING] = learns ? LEARN_BYTES_PER_BYTE * corpus_len : 0,
        [PEAK_RESUMING] = resume ? 6 * p + corpus_len : 0,
    };
    for (int k = 0; k < 4; k++)
        if (phases[k] > phases[m.when]) m.when = k;
    m.peak = m.base + phases[m.when];
    return m;
}

#define GIB(x) ((x) / (1 << 30))
#define MIB(x) ((x) / (1 << 20))

// Says what the run needs (rank 0; under mpirun each rank's own) and refuses one that does not
// fit in the memory available; learns and merges as run_memory's.
static void check_memory(const Config *c, const Opts *o, int ranks, int speaks, size_t corpus_len, int resume,
                         int learns, int merges) {
    static const char *const when[] = {"training", "encoding the corpus", "learning the vocabulary",
                                       "reading the resume state"};
    RunMemory m = run_memory(c, o, ranks, corpus_len, resume, learns, merges);
    if (speaks)
        printf("memory: %.1f MiB%s at its peak, while %s; training holds weights %.1f, gradients %.1f, AdamW moments "
               "%.1f, activations %.1f, corpus %.1f, program %.1f\n",
               MIB(m.peak), ranks > 1 ? " per rank" : "", when[m.when], MIB(m.weights), MIB(m.grads), MIB(m.moments),
               MIB(m.acts), MIB(m.corpus), MIB(m.base));
    fflush(stdout); // before the minutes a large corpus's vocabulary takes
    double have = available_memory();
    if (have >= 0 && m.peak > have)
        die("the run needs %.1f GiB%s, this machine has %.1f GiB available (MemAvailable): use a smaller model "
            "(--n-layer, --n-embd), --batch-size or --block-size, or fewer threads (-j)",
            GIB(m.peak), ranks > 1 ? " per rank" : "", GIB(have));
}

#endif
