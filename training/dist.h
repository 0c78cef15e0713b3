// training/dist.h: data-parallel training across processes and machines with MPI (make MPI=1,
// started by mpirun): the ranks, their shares of each step's micro-batches and of the optimiser
// (ZeRO-1: each rank keeps the AdamW moments of one slice of the parameters), and the
// collectives a step needs. Built without MPI, or run without mpirun, every function is the
// single process's no-op and ./train runs as it always has.
#ifndef ATTN_TRAINING_DIST_H
#define ATTN_TRAINING_DIST_H

#include <limits.h>
#include <sched.h>
#ifdef ATTN_MPI
#include <mpi.h>
#endif
#include "params.h"
#include "random.h"

typedef struct {
    int rank, ranks;      // this process and how many train together: 0 and 1 alone
    int node_ranks;       // ranks on this machine, which share its cores
    int mpi;              // started by mpirun: MPI is initialised
    size_t lo, hi;        // this rank's shard [lo, hi) of the parameter block, whose moments it keeps
    int *counts, *starts; // (ranks) every rank's shard size and start, in floats, for the collectives
    float *grad_shard;    // (hi - lo) the shard's gradients summed over the ranks; NULL alone
    double comm_s;        // seconds spent in the steps' collectives (waiting for other ranks included)
    double agree_s;       // of which in agreeing, after each micro-batch, whether to stop (dist_any)
} Dist;

// Shards start on multiples of this many floats, so that AdamW's vector loops stay aligned.
#define SHARD_ALIGN 16
// Moments travel to rank 0's checkpoint in pieces of this many floats (4 MiB).
#define MOMENT_CHUNK ((size_t)1 << 20)

#ifdef ATTN_MPI

// A failing exit before dist_finish (a die() on one rank, which the others are waiting on
// inside a collective) ends every rank of the job rather than leaving them blocked; a
// successful one (--help, on every rank) just closes MPI. Ranks other than 0 wait a second
// first and only then let out their held-back error line: a failure every rank meets (a bad
// option) is then ended by rank 0's abort alone, said once, as two aborts at once make Open
// MPI report errors of its own; a failure of that rank alone is still said, a second late.
static void exit_mpi(int status, void *unused) {
    int fin = 0, rank = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (status) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank) {
            sleep(1);
            fflush(stderr);
        }
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    MPI_Finalize();
}

// MPI when mpirun started this process (Open MPI's launcher sets OMPI_COMM_WORLD_SIZE, MPICH's
// PMI_SIZE); otherwise none at all, so that the MPI build alone is today's ./train. Ranks other
// than 0 write nothing to stdout: rank 0 speaks for the run.
static Dist dist_init(int *argc, char ***argv) {
    Dist d = {.ranks = 1, .node_ranks = 1};
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE")) return d;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) die("MPI_Init failed");
    on_exit(exit_mpi, NULL);
    d.mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.ranks);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d.rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &d.node_ranks);
    MPI_Comm_free(&node);
    if (d.rank) {
        static char rank_prog[32]; // "train[rank 1]": the prefix of this rank's error lines
        snprintf(rank_prog, sizeof rank_prog, "%s[rank %d]", prog, d.rank);
        prog = rank_prog;
        if (!freopen("/dev/null", "w", stdout)) die("cannot silence stdout: %s", strerror(errno));
        setvbuf(stderr, NULL, _IOFBF, 1 << 16); // held back until exit_mpi (above)
    }
    return d;
}

// vals[i] becomes its maximum over the ranks.
static void dist_max(const Dist *d, int *vals, int n) {
    if (d->mpi) MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

// Whether flag is set on any rank: after each micro-batch every rank asks, so that a signal to
// one (or to all, each at its own moment) stops them all after the same micro-batch.
static int dist_any(Dist *d, int flag) {
    if (d->ranks == 1) return flag;
    double t0 = now_s();
    MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    d->agree_s += now_s() - t0;
    d->comm_s += now_s() - t0;
    return flag;
}

// A step's sums over the ranks. The gradients g (n floats, this rank's micro-batches summed):
// the shard this rank updates (the whole of g alone) is returned, with g zeroed for the next
// step's. grad_sq comes in as g's sum of squares and leaves as the sum's. losses (n_losses, one
// per micro-batch, this rank's set and the others 0) leave with every rank's. The losses and
// the shards' sums of squares travel in one all-reduce, each slot set by one rank and 0 on the
// others, so the sums are exact whatever order MPI adds in; the squares are then added in rank
// order on every rank.
static float *dist_sum_step(Dist *d, float *g, size_t n, double *grad_sq, double *losses, int n_losses) {
    if (d->ranks == 1) return g;
    double t0 = now_s(), mine = 0.0;
    MPI_Reduce_scatter(g, d->grad_shard, d->counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    memset(g, 0, n * sizeof *g);
    for (size_t i = 0; i < d->hi - d->lo; i++) mine += (double)d->grad_shard[i] * d->grad_shard[i];
    double *sums = xcalloc((size_t)n_losses + d->ranks, sizeof *sums, "the step's sums"); // losses, then squares
    memcpy(sums, losses, (size_t)n_losses * sizeof *sums);
    sums[n_losses + d->rank] = mine;
    MPI_Allreduce(MPI_IN_PLACE, sums, n_losses + d->ranks, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    memcpy(losses, sums, (size_t)n_losses * sizeof *sums);
    *grad_sq = 0.0;
    for (int r = 0; r < d->ranks; r++) *grad_sq += sums[n_losses + r];
    free(sums);
    d->comm_s += now_s() - t0;
    return d->grad_shard;
}

// Every rank's updated shard of the parameters p to every rank.
static void dist_gather_params(Dist *d, float *p) {
    double t0 = now_s();
    if (d->ranks > 1)
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, d->counts, d->starts, MPI_FLOAT, MPI_COMM_WORLD);
    d->comm_s += now_s() - t0;
}

// Refuses to go on unless every rank holds the same bytes at p (what they are: what), by a
// checksum of them; then says why it matters.
static void dist_check_same(const Dist *d, const void *p, size_t bytes, const char *what, const char *why) {
    if (d->ranks == 1) return;
    uint64_t h = 0x9E3779B97F4A7C15ull, *all = xcalloc((size_t)d->ranks, sizeof *all, "the checksums");
    const unsigned char *b = p;
    for (size_t i = 0; i < bytes; i += 4) {
        uint32_t word = 0;
        memcpy(&word, b + i, bytes - i < 4 ? bytes - i : 4);
        h = mix64(h ^ word);
    }
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 1; r < d->ranks; r++)
        if (all[r] != all[0])
            die("rank %d's %s differ from rank 0's (checksum %016llx, rank 0's %016llx): %s", r, what,
                (unsigned long long)all[r], (unsigned long long)all[0], why);
    free(all);
}

// Rank 0 (inside the checkpoint's writer) receives rank r's shard of a moment in pieces, which
// rank r sends with dist_send_shard; each piece goes to s as it arrives.
static void dist_write_shard(const Dist *d, Sink *s, int r, float *buf) {
    for (size_t at = 0, n = (size_t)d->counts[r]; at < n; at += MOMENT_CHUNK) {
        int len = (int)(n - at < MOMENT_CHUNK ? n - at : MOMENT_CHUNK);
        MPI_Recv(buf, len, MPI_FLOAT, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sink_write(s, buf, (size_t)len * sizeof *buf);
    }
}

static void dist_send_shard(const Dist *d, const float *moment) {
    for (size_t at = 0, n = d->hi - d->lo; at < n; at += MOMENT_CHUNK) {
        int len = (int)(n - at < MOMENT_CHUNK ? n - at : MOMENT_CHUNK);
        MPI_Send(moment + at, len, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
    }
}

#else

// Without MPI there is one process. mpirun starting several copies of it would have each train
// alone and write the same files, so that is refused.
static Dist dist_init(int *argc, char ***argv) {
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (!size) size = getenv("PMI_SIZE");
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    if (size && atoi(size) > 1 && rank && atoi(rank) > 0) exit(1); // every copy meets this: the first says so
    if (size && atoi(size) > 1)
        die("mpirun started %s copies of this ./train, which is built without MPI: each would train alone and "
            "write the same files; build ./train with make MPI=1",
            size);
    return (Dist){.ranks = 1, .node_ranks = 1};
}

static void dist_max(const Dist *d, int *vals, int n) {}
static int dist_any(Dist *d, int flag) { return flag; }
static float *dist_sum_step(Dist *d, float *g, size_t n, double *grad_sq, double *losses, int n_losses) { return g; }
static void dist_gather_params(Dist *d, float *p) {}
static void dist_check_same(const Dist *d, const void *p, size_t bytes, const char *what, const char *why) {}
static void dist_write_shard(const Dist *d, Sink *s, int r, float *buf) {}
static void dist_send_shard(const Dist *d, const float *moment) {}

#endif

// The threads of each rank: -j or OMP_NUM_THREADS when given, else under mpirun this machine's
// cores shared among its ranks, so that ranks and threads never take turns on a core. 0: the
// default (every core). Open MPI binds each rank to one core by default when it starts two or
// fewer, which would stack a rank's threads on it: a rank bound so lets itself out onto every
// core. A binding asked for (--bind-to, which mpirun passes on as
// OMPI_MCA_hwloc_base_binding_policy) is kept, and then the share is at most its cores.
static int dist_threads(const Dist *d, int requested) {
    if (!d->mpi) return requested;
    int given = requested || getenv("OMP_NUM_THREADS");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int share = cores / d->node_ranks > 1 ? (int)(cores / d->node_ranks) : 1;
    int want = requested ? requested : given ? max_threads() : share;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) || CPU_COUNT(&set) >= want) return given ? requested : share;
    if (getenv("OMPI_MCA_hwloc_base_binding_policy")) return given ? requested : CPU_COUNT(&set);
    CPU_ZERO(&set);
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_CONF) && c < CPU_SETSIZE; c++) CPU_SET((int)c, &set);
    sched_setaffinity(0, sizeof set, &set);
    return given ? requested : share;
}

// A rank whose threads outnumber the cores it may run on (a --bind-to asked for) says so once.
static void dist_check_binding(const Dist *d, int threads) {
    cpu_set_t set;
    if (!d->mpi || sched_getaffinity(0, sizeof set, &set) || CPU_COUNT(&set) >= threads) return;
    fprintf(stderr,
            "%s: note: %d threads on %d core%s (mpirun's --bind-to): they take turns; start mpirun with --bind-to "
            "none, or --map-by slot:PE=%d\n",
            prog, threads, CPU_COUNT(&set), plural(CPU_COUNT(&set)), threads);
}

// "2 ranks x 1 thread" under mpirun, "2 threads" alone: how the run is spread, for its lines.
static void dist_describe(const Dist *d, int threads, char *buf, size_t size) {
    if (d->mpi) snprintf(buf, size, "%d rank%s x %d thread%s", d->ranks, plural(d->ranks), threads, plural(threads));
    else snprintf(buf, size, "%d thread%s", threads, plural(threads));
}

// This rank's shard of an n-float parameter block, and every rank's, in SHARD_ALIGN units.
static void dist_shard(Dist *d, size_t n) {
    size_t units = (n + SHARD_ALIGN - 1) / SHARD_ALIGN;
    d->counts = xcalloc((size_t)d->ranks, sizeof *d->counts, "the shards");
    d->starts = xcalloc((size_t)d->ranks, sizeof *d->starts, "the shards");
    if (n > (size_t)INT_MAX) die("%zu parameters: MPI counts them in int, which this many overflow", n);
    for (int r = 0; r < d->ranks; r++) {
        size_t lo = units * r / d->ranks * SHARD_ALIGN, hi = units * (r + 1) / d->ranks * SHARD_ALIGN;
        lo = lo < n ? lo : n;
        hi = hi < n ? hi : n;
        d->starts[r] = (int)lo;
        d->counts[r] = (int)(hi - lo);
    }
    d->lo = (size_t)d->starts[d->rank];
    d->hi = d->lo + (size_t)d->counts[d->rank];
    if (d->ranks > 1) d->grad_shard = xcalloc(d->hi - d->lo, sizeof(float), "the gradient shard");
}

static void dist_finish(Dist *d) {
    free(d->counts);
    free(d->starts);
    free(d->grad_shard);
#ifdef ATTN_MPI
    if (d->mpi) MPI_Finalize();
#endif
}

// A moment of this rank's shard: zeros, or from the whole one a resume state held (freed;
// alone, the shard is the whole one, kept as it is).
static float *dist_moment_shard(const Dist *d, float *whole) {
    if (whole && d->ranks == 1) return whole;
    float *shard = xcalloc(d->hi - d->lo, sizeof(float), "AdamW moments");
    if (whole) memcpy(shard, whole + d->lo, (d->hi - d->lo) * sizeof(float));
    free(whole);
    return shard;
}

#endif
