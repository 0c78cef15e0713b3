// allreduce.c: MPI_Allreduce's bandwidth (and ZeRO-1's pair of collectives') over float buffers of several sizes, the figure
// docs/SCALING.md's projection starts from. Each size runs R timed rounds (after one warm-up);
// a round's time is the slowest rank's, and the median round is reported. Bus bandwidth is
// nccl-tests' convention: bytes x 2(N-1)/N / time, what each link carried per second in a ring.
// "zero1" moves the same bytes as ZeRO-1 does: MPI_Reduce_scatter_block into a shard, then
// MPI_Allgather of the shards (in a ring the pair costs what one all-reduce does). Every result
// is checked: rank r contributes r + 1 everywhere, so each sum must be N(N+1)/2 exactly.
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
        float *buf = malloc(n * sizeof(float));               // [n]: this rank's contribution, then the sum
        float *shard = malloc(n / ranks * sizeof(float) + 1); // [n / ranks]: ZeRO-1's summed shard
        if (!buf || !shard) {
            fprintf(stderr, "allreduce: rank %d: out of memory for %ld bytes\n", rank, bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int zero1 = 0; zero1 < 2; zero1++) {
            size_t block = n / ranks; // ZeRO-1's shard, in floats
            double t[64];
            int wrong = 0;
            for (int r = -1; r < rounds; r++) { // r = -1 warms up (connections, buffers)
                for (size_t i = 0; i < n; i++) buf[i] = (float)(rank + 1);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = now_s();
                if (zero1) {
                    MPI_Reduce_scatter_block(buf, shard, (int)block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    MPI_Allgather(shard, (int)block, MPI_FLOAT, buf, (int)block, MPI_FLOAT, MPI_COMM_WORLD);
                } else {
                    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                }
                double mine = now_s() - t0, slowest;
                MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (r >= 0) t[r] = slowest;
                for (size_t i = 0; i < (zero1 ? block * ranks : n); i++)
                    wrong += buf[i] != (float)(ranks * (ranks + 1) / 2);
            }
            int wrong_any;
            MPI_Allreduce(&wrong, &wrong_any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            const char *name = zero1 ? "zero1" : "allreduce";
            if (wrong_any) {
                if (rank == 0) fprintf(stderr, "allreduce: %s of %ld bytes: %d wrong sums\n", name, bytes, wrong_any);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            double med = median(t, rounds), busbw = (double)n * sizeof(float) * 2.0 * (ranks - 1) / ranks / med;
            if (rank == 0)
                printf("%s_%ld_us %.1f\n%s_%ld_busbw_GBps %.3f\n", name, bytes, med * 1e6, name, bytes, busbw * 1e-9);
        }
        free(buf);
        free(shard);
    }
    MPI_Finalize();
    return 0;
}
