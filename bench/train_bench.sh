#!/usr/bin/env bash
# bench/train_bench.sh: ./train against the same GPT in PyTorch (bench/torch_train.py) on
# character-level Tiny Shakespeare, (a) nanoGPT's baby config and (b) 6 layers x 384 wide,
# block 256. Tokens/s is the median over timed optimiser steps (after a few warm-up steps);
# PyTorch gets the better of two thread settings. Called by bench/run.sh, which passes
# SGEMM_GFLOPS (OpenBLAS 1024^3 sgemm, same run) for the model-FLOP utilisation.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
J=${BENCH_THREADS:-2}
TMP=bench/tmp
DATA=../shared/data/tinyshakespeare.txt
mkdir -p $TMP

echo "Training, $J threads, character-level $(basename $DATA):"
if [ ! -x ./train ] || ! ./train --help > /dev/null 2>&1; then
    echo "  skipped: ./train not built"
    exit 0
fi
[ -f $DATA ] || { echo "  skipped: $DATA not found"; exit 0; }

# ./train for up to $3 steps or $4 seconds, whichever comes first; it is stopped once the log
# has the steps (its final whole-split evaluation is not what is measured). The first $WARM
# steps are not counted.
ours() { # name flags steps seconds -> median tok/s of the timed steps
    local out=$TMP/train_$1.bin pid t0 rows
    rm -f $out $out.csv $out.state
    ./train -d $DATA -o $out $2 --max-iters $(( $3 + 1 )) --eval-interval 1000000 --eval-iters 1 \
        > $TMP/train_$1.log 2>&1 &
    pid=$!
    t0=$(date +%s)
    while kill -0 $pid 2> /dev/null; do
        rows=$(( $( (wc -l < $out.csv) 2> /dev/null || echo 1) - 1 ))
        if [ "$rows" -ge "$3" ] || [ $(( $(date +%s) - t0 )) -ge "$4" ]; then
            kill $pid 2> /dev/null
            break
        fi
        sleep 0.5
    done
    wait $pid 2> /dev/null
    # A slow run that logged few steps still skips its first, which pays for starting up.
    rows=$(( $( (wc -l < $out.csv) 2> /dev/null || echo 1) - 1 ))
    # tokens/s by its column's name: the log gained columns before it
    awk -F, -v w=$(( rows > 2 * WARM ? WARM : 1 )) 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tokens_per_sec") c = i }
        NR > 1 && c && $1 > w && $c > 0 { print $c }' $out.csv 2> /dev/null | sort -g |
        awk '{ v[n++] = $1 } END { print n ? (n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0 }'
    rm -f $out $out.csv $out.state $out.tmp
}

theirs() { # name flags steps seconds [torch flags] -> best of the two settings, "tok_s setting params"
    local f=$TMP/torch_train_$1
    OMP_WAIT_POLICY=PASSIVE $PYTHON bench/torch_train.py $DATA $2 --threads $J --steps $3 --max-seconds $4 \
        --warmup $WARM ${5:-} > ${f}_a.txt || { echo "0 failed 0"; return; }
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$J $PYTHON bench/torch_train.py $DATA $2 --threads 1 --steps $3 \
        --max-seconds $4 --warmup $WARM ${5:-} > ${f}_b.txt || { echo "0 failed 0"; return; }
    awk '$1 == "tok_s" { if ($2 > best) { best = $2; how = FILENAME } } $1 == "params" { p = $2 }
         END { print best, (how ~ /_a.txt$/ ? "torch:'"$J"'threads,PASSIVE" : "torch:1thread+OpenBLAS:'"$J"'"), p }' \
        ${f}_a.txt ${f}_b.txt
}

# Two rounds, alternating, and each side's best: a process's speed here varies by up to 10 %
# from one start to the next, steady within the run, so one start per side decides too much.
run_config() { # label flags steps seconds goal n_layer n_embd block warm-up-steps
    local o o2 t t2 how how2 p round
    WARM=$9
    o=0 t=0
    for round in 1 2; do
        o2=$(ours "$1" "$2" $3 $4)
        read -r t2 how2 p <<< "$(theirs "$1" "$2" $3 $4)"
        awk -v a="$o2" -v b="$o" 'BEGIN { exit !(a > b) }' && o=$o2
        awk -v a="$t2" -v b="$t" 'BEGIN { exit !(a > b) }' && t=$t2 how=$how2
    done
    printf "  (%s) %s\n" "$1" "$2"
    printf "      ours %s tok/s; PyTorch %s tok/s (%s); ours / PyTorch = %s%s\n" "$o" "$t" "$how" \
        "$(awk -v a="$o" -v b="$t" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')" "${5:+ (goal >= $5)}"
    if [ -n "${SGEMM_GFLOPS:-}" ]; then
        # nanoGPT's estimate: 6 N per token, plus 12 x layers x width x block for attention.
        awk -v n="$p" -v L=$6 -v d=$7 -v T=$8 -v o="$o" -v t="$t" -v sg="$SGEMM_GFLOPS" 'BEGIN {
            f = 6 * n + 12 * L * d * T
            printf "      model FLOPs %.1f M/token (N = %.2fM); MFU vs sgemm %s GFLOP/s: ours %.3f, PyTorch %.3f\n",
                   f / 1e6, n / 1e6, sg, f * o / (sg * 1e9), f * t / (sg * 1e9) }'
    fi
}

# ./train --precision bf16 (bfloat16 products, model/bf16_gemm.h) against our float32 and
# PyTorch's float32 and bfloat16 autocast, two alternating rounds, each side's best.
run_bf16() { # label flags steps seconds goal-vs-torch-f32 goal-vs-autocast goal-vs-ours-f32 warm-up-steps
    local o=0 f=0 t=0 a=0 x round
    WARM=$8
    ./train --help 2>&1 | grep -q -- '--precision' || { echo "  ($1) bf16: skipped, ./train has no --precision"; return; }
    for round in 1 2; do
        x=$(ours "$1_bf16" "$2 --precision bf16" $3 $4); awk -v a="$x" -v b="$o" 'BEGIN { exit !(a > b) }' && o=$x
        x=$(ours "$1" "$2" $3 $4); awk -v a="$x" -v b="$f" 'BEGIN { exit !(a > b) }' && f=$x
        read -r x _ _ <<< "$(theirs "$1" "$2" $3 $4)"; awk -v a="$x" -v b="$t" 'BEGIN { exit !(a > b) }' && t=$x
        read -r x _ _ <<< "$(theirs "$1_ac" "$2" $3 $4 --bf16-autocast)"
        awk -v a="$x" -v b="$a" 'BEGIN { exit !(a > b) }' && a=$x
    done
    printf "  (%s) --precision bf16: ours %s tok/s; ours float32 %s; PyTorch float32 %s, bf16 autocast %s\n" "$1" "$o" "$f" "$t" "$a"
    awk -v o="$o" -v f="$f" -v t="$t" -v a="$a" -v g1="$5" -v g2="$6" -v g3="$7" 'function r(x, y) { return y > 0 ? x / y : 0 }
        BEGIN { printf "      ours bf16 / PyTorch float32 = %.2f%s; / PyTorch autocast = %.2f%s; / ours float32 = %.2f%s\n",
                r(o, t), g1 != "" ? " (goal >= " g1 ")" : "", r(o, a), g2 != "" ? " (goal >= " g2 ")" : "",
                r(o, f), g3 != "" ? " (goal >= " g3 ")" : "" }'
}

# Steps and a time cap per run: six runs per configuration keep the whole under 5 minutes.
# (c) is (b) with batch 1, as nanoGPT fine-tunes: fewer sequences than threads (no goal set).
if [ "${BENCH_QUICK:-0}" = 1 ]; then SA=12 SB=6 SC=8 CAP=15; else SA=60 SB=15 SC=40 CAP=30; fi
run_config a "--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12" $SA $CAP 2.0 4 128 64 5
run_config b "--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 8" $SB $CAP 1.25 6 384 256 2
run_config c "--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 1" $SC $CAP "" 6 384 256 3
run_bf16 a "--n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12" $SA $CAP 3 1.3 "" 5
run_bf16 b "--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 8" $SB $CAP "" "" 1.6 2
