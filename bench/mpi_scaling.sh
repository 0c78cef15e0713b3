#!/usr/bin/env bash
# bench/mpi_scaling.sh: data-parallel training with MPI (issue 20) on this machine, and what it
# projects to across many (docs/SCALING.md). Called by bench/run.sh, which passes SGEMM_GFLOPS;
# runs alone too.
#  - Step time of the baby config and the 6-layer/384 one at N = 1 (one process, J threads,
#    --grad-accum 2) and N = 2 (mpirun -np 2, J/2 threads each, --grad-accum 1): the same global
#    batch, so the same training. Split into communication, the time rank 0 spent in the step's
#    collectives (./train's closing line; waits for the other rank included), and compute, the
#    rest of the step. Beside it, what ZeRO-1's collectives alone take on the gradient's bytes
#    with the same two ranks (bench/allreduce.c's zero1, run in the same round).
#  - MPI_Allreduce's bandwidth between two ranks over shared memory, and over TCP between two
#    network namespaces (tests/netns_hosts.sh; as root).
#  - The projection's tables for N = 2..64 machines (bench/mpi_projection.py) from those figures.
# N = 1 and N = 2 alternate within each round and each figure is the median over the rounds.
set -u
cd "$(dirname "$0")/.."
. bench/lib.sh # vals, med, mkvar
PYTHON=${PYTHON:-/usr/bin/python3}
J=${BENCH_THREADS:-2}
TMP=bench/tmp
BIN=bench/bin
DATA=../shared/data/tinyshakespeare.txt
mkdir -p $TMP $BIN
if [ "${BENCH_QUICK:-0}" = 1 ]; then ROUNDS=1 SA=6 SB=3 AR_ROUNDS=3; else ROUNDS=3 SA=20 SB=4 AR_ROUNDS=9; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "Data-parallel training with MPI, $J threads in all, $ROUNDS rounds (loadavg $(cut -d' ' -f1-3 /proc/loadavg)):"
skip() {
    echo "  skipped: $1"
    exit 0
}
command -v mpicc > /dev/null && command -v mpirun > /dev/null || skip "Open MPI is not installed (make deps)"
[ -f $DATA ] || skip "$DATA not found"
make -s --no-print-directory train tests/bin/train_mpi > $TMP/mpi_build.txt 2>&1 ||
    skip "cannot build ./train and tests/bin/train_mpi: $(tail -n 1 $TMP/mpi_build.txt)"
# bench.h's helpers this program does not use are not warnings here.
mpicc $(mkvar ALL_CFLAGS) -Wno-unused-function -I. -o $BIN/allreduce bench/allreduce.c $(mkvar LDLIBS) ||
    skip "cannot build bench/allreduce.c"
. tests/netns_hosts.sh
trap 'netns_down' EXIT
trap 'exit 1' INT TERM HUP
NET=1
netns_up $TMP || NET=0
# A small corpus keeps ./train's closing evaluation over the validation split short.
head -c 60000 $DATA > $TMP/mpi_corpus.txt
rm -f $TMP/mpi_*.res

# Two ranks on this machine: a waiting rank yields its core (two ranks and the other
# processes share two cores), the OS places them (no binding).
mpirun_here() { mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2 "$@"; }
HALF=$((J / 2 > 0 ? J / 2 : 1))

# One run of S steps, its step times (the first step, which pays for starting, aside) appended
# to $TMP/mpi_NAME.res as "step_s X" lines. A step is TOKENS tokens either way: the CSV's
# tokens_per_sec column (rank 0's, for the whole step) gives its time.
train_steps() { # name np flags steps tokens
    local out=$TMP/mpi_$1.bin
    rm -f $out $out.csv $out.state
    if [ $2 = 1 ]; then
        OMP_NUM_THREADS=$J ./train -d $TMP/mpi_corpus.txt -o $out $3 --grad-accum 2 --max-iters $4 \
            --eval-interval 1000000 --eval-iters 1 > $TMP/mpi_$1.log 2>&1
    else
        mpirun_here -x OMP_NUM_THREADS=$HALF tests/bin/train_mpi -d $TMP/mpi_corpus.txt -o $out $3 --grad-accum 1 \
            --max-iters $4 --eval-interval 1000000 --eval-iters 1 > $TMP/mpi_$1.log 2>&1
    fi || { echo "  $1 failed: $(tail -n 1 $TMP/mpi_$1.log)" >&2; return; }
    awk -F, -v t=$5 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tokens_per_sec") c = i }
        NR > 1 && $1 > 1 && c && $c > 0 { print "step_s", t / $c }' $out.csv >> $TMP/mpi_$1.res
    # "done: S steps, ..." and "...: C s of the training in the ranks' collectives", wherever the
    # terminal-style status line (mpirun gives rank 0 a pseudo-terminal) left them
    awk 'match($0, /done: [0-9]+ steps/) { split(substr($0, RSTART, RLENGTH), f, " "); steps = f[2] }
         match($0, /[0-9.]+ s of the training in the ranks. collectives/) { split(substr($0, RSTART, RLENGTH), f, " "); c = f[1] }
         END { if (steps > 0 && c != "") print "comm_s", c / steps }' $TMP/mpi_$1.log >> $TMP/mpi_$1.res
    rm -f $out $out.csv $out.state
}

BABY="--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12"
WIDE="--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 8"
# float32 gradient bytes of each (bench/mpi_projection.py's count for this corpus's vocabulary)
VOCAB=$("$PYTHON" -c 'import sys; print(len(set(open(sys.argv[1], encoding="utf-8").read())))' $TMP/mpi_corpus.txt)
grad_bytes() { "$PYTHON" -c "import sys; sys.path.insert(0, 'bench'); import mpi_projection as m; print(4 * m.gpt_params($1, $2, $VOCAB, $3))"; }
BABY_BYTES=$(grad_bytes 4 128 64) WIDE_BYTES=$(grad_bytes 6 384 256)
SIZES=1048576,4194304,16777216,67108864
for round in $(seq $ROUNDS); do
    train_steps baby1 1 "$BABY" $SA $((12 * 64 * 2))
    train_steps baby2 2 "$BABY" $SA $((12 * 64 * 2))
    mpirun_here $BIN/allreduce -r $AR_ROUNDS -s $BABY_BYTES >> $TMP/mpi_comm.res
    train_steps wide1 1 "$WIDE" $SB $((8 * 256 * 2))
    train_steps wide2 2 "$WIDE" $SB $((8 * 256 * 2))
    mpirun_here $BIN/allreduce -r $AR_ROUNDS -s $WIDE_BYTES >> $TMP/mpi_comm.res
    mpirun_here $BIN/allreduce -r $AR_ROUNDS -s $SIZES >> $TMP/mpi_shm.res
    ((NET)) && netns_mpirun --mca mpi_yield_when_idle 1 $BIN/allreduce -r $AR_ROUNDS -s $SIZES >> $TMP/mpi_tcp.res
done

for c in "baby:baby (4 layers x 128, block 64, batch 12):$BABY_BYTES:$((12 * 64 * 2))" \
    "wide:6 layers x 384 (block 256, batch 8):$WIDE_BYTES:$((8 * 256 * 2))"; do
    IFS=: read -r key label bytes tokens <<< "$c"
    one=$(med $TMP/mpi_${key}1.res step_s) two=$(med $TMP/mpi_${key}2.res step_s)
    comm=$(med $TMP/mpi_${key}2.res comm_s)
    alone=$(awk -v u="$(med $TMP/mpi_comm.res zero1_${bytes}_us)" 'BEGIN { printf "%.3f", u / 1e6 }')
    printf "  %s, %s tokens a step, %.1f MB of gradients:\n" "$label" "$tokens" "$(awk "BEGIN { print $bytes / 1e6 }")"
    awk -v a="$one" -v b="$two" -v c="$comm" -v z="$alone" -v t="$tokens" -v j=$J -v h=$HALF 'BEGIN {
        if (a == "" || b == "" || c == "") { print "      (a run failed: no figures)"; exit }
        printf "      N = 1 (%d threads):           step %.3f s = compute %.3f s; %.0f tok/s\n", j, a, a, t / a
        printf "      N = 2 (2 ranks x %d thread%s): step %.3f s = compute %.3f s + communication %.3f s; %.0f tok/s (%.2fx N = 1)\n",
            h, (h > 1) ? "s" : "", b, b - c, c, t / b, a / b
        printf "      (reduce-scatter + all-gather of the gradient alone, 2 ranks: %.3f s)\n", z }'
    [ $key = wide ] && WIDE_ONE=$one WIDE_TOKENS=$tokens
done
echo "  MPI_Allreduce between 2 ranks, bus bandwidth GB/s (median of $AR_ROUNDS x $ROUNDS; ZeRO-1's reduce-scatter + all-gather in brackets):"
for f in shm:"shared memory, one machine" tcp:"TCP between two network namespaces (veth)"; do
    [ -s $TMP/mpi_${f%%:*}.res ] || { echo "    ${f#*:}: not measured (${NETNS_WHY:-no runs})"; continue; }
    line="    ${f#*:}:"
    for s in ${SIZES//,/ }; do
        line+=" $((s >> 20)) MiB $(med $TMP/mpi_${f%%:*}.res allreduce_${s}_busbw_GBps) ($(med $TMP/mpi_${f%%:*}.res zero1_${s}_busbw_GBps));"
    done
    echo "${line%;}"
done
BUSBW=$(med $TMP/mpi_tcp.res allreduce_67108864_busbw_GBps)
[ -n "$BUSBW" ] || BUSBW=$(med $TMP/mpi_shm.res allreduce_67108864_busbw_GBps)
if [ -z "${SGEMM_GFLOPS:-}" ]; then
    [ -x $BIN/sgemm ] || gcc $(mkvar ALL_CFLAGS) -I. -o $BIN/sgemm bench/sgemm.c $(mkvar LDLIBS)
    SGEMM_GFLOPS=$($BIN/sgemm -j $J -r 6 | awk '$1 == "sgemm_best_GFLOPs" { print $2 }')
fi
if [ -n "${WIDE_ONE:-}" ]; then
    echo "  Projection (docs/SCALING.md): bench/mpi_projection.py --sgemm-gflops $SGEMM_GFLOPS --step-s $WIDE_ONE" \
        "--step-tokens $WIDE_TOKENS --vocab $VOCAB --busbw-gbps $BUSBW"
    "$PYTHON" bench/mpi_projection.py --sgemm-gflops $SGEMM_GFLOPS --step-s $WIDE_ONE --step-tokens $WIDE_TOKENS \
        --vocab $VOCAB --busbw-gbps $BUSBW | sed 's/^/  /'
fi
echo "  (loadavg after: $(cut -d' ' -f1-3 /proc/loadavg))"
