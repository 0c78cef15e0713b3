// model/threads.h: how the model's loops share the cores. It owns the split of work across
// OpenMP threads, the barrier that forward()'s threads meet at, and the settings of the
// libraries the programs start with (OpenMP's wait, OpenBLAS's kernels). It knows no layer
// and no file.
#ifndef ATTN_MODEL_THREADS_H
#define ATTN_MODEL_THREADS_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>
#include <cblas.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

// Below this many multiply-adds a second thread costs more to wake than it saves.
#define PARALLEL_MIN_WORK (1 << 16)

// This thread's number in its parallel region and the region's size (0 and 1 outside one,
// or without OpenMP).
static inline int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

// The most threads a parallel region started here would have.
static inline int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// This thread's share [*lo, *hi) of n items split evenly across nt threads.
static inline void share(size_t n, int id, int nt, size_t *lo, size_t *hi) {
    *lo = n * id / nt;
    *hi = n * (id + 1) / nt;
}

// OpenMP threads that spin while they wait collapse when another process holds a core (libgomp
// spins 300,000 times by default, OMP_WAIT_POLICY=ACTIVE for ever), while threads that sleep
// at once are woken each time a parallel region starts, a few percent of a small model's token
// (docs/KERNELS.md). So a program with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set spins
// THREAD_SPINS times before it sleeps. A user's own setting is left alone.
#define THREAD_SPINS "3000"

// OpenBLAS chooses its kernels by the CPU's model number when it loads, and gives a model
// newer than its table its oldest x86-64 kernels: Debian 12's 0.3.21 took Prescott's (SSE3)
// on an Intel Xeon of family 6 model 207, whose sgemm then ran at 57 GFLOP/s on 2 threads
// against SkylakeX's 210-295 (docs/KERNELS.md). Where it chose one of its cores older than
// AVX2 on a CPU that has AVX2 and FMA, the core the CPU's instructions call for; else NULL,
// and always NULL where the user set OPENBLAS_CORETYPE.
static inline const char *blas_core_wanted(void) {
#if defined(__x86_64__)
    if (getenv("OPENBLAS_CORETYPE")) return NULL;
    static const char *const older[] = {"Unknown", "Katmai",       "Coppermine", "Northwood",  "Prescott",    "Banias",
                                        "Atom",    "Core2",        "Penryn",     "Dunnington", "Nehalem",     "Athlon",
                                        "Opteron", "Opteron_SSE3", "Barcelona",  "Nano",       "Sandybridge", "Bobcat"};
    const char *chosen = openblas_get_corename();
    int fallback = 0;
    for (size_t i = 0; chosen && i < sizeof older / sizeof *older; i++) fallback |= !strcasecmp(chosen, older[i]);
    __builtin_cpu_init();
    if (!fallback || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
               ? "SkylakeX"
               : "Haswell";
#else
    return NULL;
#endif
}

// libgomp reads its spin settings and OpenBLAS its core only when they load, so the program
// sets what it wants and starts itself again.
static inline void start_with_library_settings(char **argv) {
    int changed = 0;
    const char *core = blas_core_wanted();
    if (core) changed |= !setenv("OPENBLAS_CORETYPE", core, 1);
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) changed |= !setenv("GOMP_SPINCOUNT", THREAD_SPINS, 1);
    if (changed) execv("/proc/self/exe", argv); // returns only on failure: then run on as we are
}

// The threads of forward's parallel region meet here between its steps. A waiting thread
// spins for a while and only then sleeps on a futex, since waking a sleeper costs tens of
// microseconds while long spins starve a busy machine (docs/KERNELS.md). So the spin adapts:
// it grows while waits end within it (an idle machine) and halves each time a wait has to
// sleep (a busy one).
#define BARRIER_SPIN_MIN 512
#define BARRIER_SPIN_MAX 16384
typedef struct {
    atomic_int arrived, phase, sleepers, spin_limit;
} Barrier;

static inline void barrier_wait(Barrier *b, int nt) {
    if (nt < 2) return;
    int phase = atomic_load(&b->phase);
    if (atomic_fetch_add(&b->arrived, 1) == nt - 1) {
        atomic_store(&b->arrived, 0);
        atomic_store(&b->phase, phase + 1);
#ifdef __linux__
        if (atomic_load(&b->sleepers)) syscall(SYS_futex, &b->phase, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
#endif
        return;
    }
    int limit = atomic_load_explicit(&b->spin_limit, memory_order_relaxed), slept = 0;
    if (limit < BARRIER_SPIN_MIN) limit = BARRIER_SPIN_MIN;
    for (int spins = 0; atomic_load(&b->phase) == phase; spins++) {
        if (spins < limit) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        slept = 1;
#ifdef __linux__
        // the futex sleeps only while the phase is still the old one, so a release between
        // the check above and here is never missed
        atomic_fetch_add(&b->sleepers, 1);
        syscall(SYS_futex, &b->phase, FUTEX_WAIT_PRIVATE, phase, NULL, NULL, 0);
        atomic_fetch_sub(&b->sleepers, 1);
#else
        sched_yield();
#endif
    }
    limit = slept ? limit / 2 : limit + limit / 8 + 1;
    limit = limit < BARRIER_SPIN_MIN ? BARRIER_SPIN_MIN : limit > BARRIER_SPIN_MAX ? BARRIER_SPIN_MAX : limit;
    atomic_store_explicit(&b->spin_limit, limit, memory_order_relaxed);
}

#endif
