// allreduce.c: MPI_Allreduce's bandwidth over float buffers of several sizes, the figure
// docs/SCALING.md's projection starts from. Each size runs R timed rounds (after one warm-up);
// a round's time is the slowest rank's, and the median round is reported. Bus bandwidth is
// nccl-tests' convention: bytes x 2(N-1)/N / time, what each link carried per second in a ring.
// Every result is checked: rank r contributes r + 1 everywhere, so each element must sum to
// N(N+1)/2 exactly (small integers are exact in float).
//   mpirun -np 2 bench/bin/allreduce [-r ROUNDS] [-s BYTES,BYTES,...]
#include <mpi.h>
#include "bench.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int rounds = atoi(bench_arg(argc, argv, "-r", "9"));
    const char *sizes = bench_arg(argc, argv, "-s", "65536,1048576,4194304,16777216,67108864");
    if (rounds < 1 || rounds > 64) {
        if (rank == 0) fprintf(stderr, "allreduce: -r %d: expected 1 to 64 rounds\n", rounds);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) printf("ranks %d\n", ranks);
    for (const char *s = sizes; *s;) {
        char *end;
        long bytes = strtol(s, &end, 10);
        if (bytes < 4 || (*end && *end != ',')) {
            if (rank == 0) fprintf(stderr, "allreduce: -s %s: expected byte counts separated by commas\n", sizes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        s = *end ? end + 1 : end;
        size_t n = (size_t)bytes / sizeof(float);
        float *buf = malloc(n * sizeof(float)); // [n]: this rank's contribution, then the sum
        if (!buf) {
            fprintf(stderr, "allreduce: rank %d: out of memory for %ld bytes\n", rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double t[64];
        int wrong = 0;
        for (int r = -1; r < rounds; r++) { // r = -1 warms up (connections, buffers)
            for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_s();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double mine = now_s() - t0, slowest;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r >= 0) t[r] = slowest;
            for (size_t i = 0; i < n; i++) wrong += buf[i] != (float)(ranks * (ranks + 1) / 2);
        }
        int wrong_any;
        MPI_Allreduce(&wrong, &wrong_any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (wrong_any) {
            if (rank == 0) fprintf(stderr, "allreduce: %ld bytes: %d wrong sums\n", bytes, wrong_any);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double med = median(t, rounds), busbw = (double)n * sizeof(float) * 2.0 * (ranks - 1) / ranks / med;
        if (rank == 0)
            printf("allreduce_%ld_us %.1f\nallreduce_%ld_busbw_GBps %.3f\n", bytes, med * 1e6, bytes, busbw * 1e-9);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
