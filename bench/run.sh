#!/usr/bin/env bash
# bench/run.sh: `make bench`. Every figure is a ratio against a baseline measured in this same
# run on this same machine: memory read bandwidth and OpenBLAS sgemm (bench/membw.c,
# bench/sgemm.c), PyTorch running the same model (bench/torch_infer.py) or training it
# (bench/train_bench.sh). Throughputs are medians of several repetitions; bounds are the best
# of several. The machine may be shared, so the load is reported beside every phase.
#   BENCH_THREADS (2)  threads for everything
#   BENCH_QUICK=1      fewer repetitions (a smoke test of the script, not a measurement)
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
J=${BENCH_THREADS:-2}
TMP=bench/tmp
BIN=bench/bin
mkdir -p "$TMP" "$BIN"
if [ "${BENCH_QUICK:-0}" = 1 ]; then R=2 STEPS=8 MB_REPS=3; else R=5 STEPS=64 MB_REPS=10; fi
T_START=$(date +%s)

die() { echo "bench: $*" >&2; exit 1; }
# "key value..." lines: field n (1 = first value) of key in file.
get() { awk -v k="$2" -v n="${3:-1}" '$1 == k { print $(n + 1); exit }' "$1"; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# ---- load: what the other processes on the machine did while a phase ran ----
NCPU=$(nproc)
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# CPU time of this shell's finished children (every benchmark process), in ticks.
our_ticks() { awk '{ print $16 + $17 }' /proc/$$/stat; }
phase_start() {
    PHASE="$1"
    P_T0=$(date +%s.%N) P_BUSY=$(busy_ticks) P_OURS=$(our_ticks) P_LOAD=$(cut -d' ' -f1 /proc/loadavg)
    echo "== $PHASE (loadavg $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}
# Others' share of all cores during the phase: machine busy time minus our processes'.
phase_end() {
    local secs busy ours others
    secs=$(calc "%.3f" "$(date +%s.%N) - $P_T0")
    busy=$(( $(busy_ticks) - P_BUSY )) ours=$(( $(our_ticks) - P_OURS ))
    others=$(calc "%.0f" "100 * ($busy - $ours) / ($secs * $HZ * $NCPU)")
    [ "$others" -lt 0 ] && others=0
    LOADNOTE[$1]="${others}%"
    local warn=""
    [ "$others" -ge 10 ] && warn="  <- other processes busy: noisy"
    echo "   $PHASE: ${secs}s, others used ${others}% of $NCPU cores, loadavg $P_LOAD -> $(cut -d' ' -f1 /proc/loadavg)$warn" >&2
}
declare -A LOADNOTE

echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $NCPU cores, $J threads"
echo "bench: OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset (./run and bench_forward then wait passively)}"
echo "bench: loadavg before: $(cat /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- build with exactly the Makefile's compiler, flags and BLAS ----
mkvar() {
    make -s --no-print-directory -f Makefile -f - "print-$1" <<'EOF'
print-%: ; @echo '$($*)'
EOF
}
CC=$(mkvar CC) CFLAGS=$(mkvar CFLAGS) LDLIBS=$(mkvar LDLIBS)
[ -n "$LDLIBS" ] || die "cannot read LDLIBS from the Makefile"
for p in membw sgemm matvec bench_forward; do
    if [ ! -x $BIN/$p ] || [ bench/$p.c -nt $BIN/$p ] || [ model.h -nt $BIN/$p ] || [ bench/bench.h -nt $BIN/$p ]; then
        $CC $CFLAGS -I. -o $BIN/$p bench/$p.c $LDLIBS || die "cannot build bench/$p.c"
    fi
done
[ -x ./run ] || die "./run is not built (make run)"
echo "bench: BLAS $(ldd $BIN/sgemm | awk '/openblas/ { print $3; exit }'), as ./run: $(ldd ./run | awk '/openblas/ { print $3; exit }')"

# ---- models: random weights, made once (bench/tmp is not committed) ----
LLAMA=$TMP/llama110m.bin GPT2=$TMP/gpt2_124m.bin
if [ ! -s $LLAMA ]; then
    $PYTHON tools/make_random.py $LLAMA --preset llama_110m --seed 1 || die "cannot make $LLAMA"
fi
if [ ! -s $GPT2 ]; then
    rm -rf $TMP/gpt2_hf
    $PYTHON tools/make_random.py $TMP/gpt2_hf --preset gpt2_124m --hf-gpt2 --seed 1 || die "cannot make $TMP/gpt2_hf"
    $PYTHON tools/convert.py $TMP/gpt2_hf $GPT2 || die "cannot convert $TMP/gpt2_hf"
    rm -rf $TMP/gpt2_hf
fi

# ---- baselines ----
phase_start "memory read bandwidth (1 GiB, best of $MB_REPS)"
$BIN/membw -j $J -r $MB_REPS --huge 0 > $TMP/membw4k.txt 2>/dev/null || die "membw failed"
$BIN/membw -j $J -r $MB_REPS --huge 1 > $TMP/membw2m.txt 2>/dev/null || die "membw failed"
phase_end membw
BW4K=$(get $TMP/membw4k.txt membw_best_GBps) BW2M=$(get $TMP/membw2m.txt membw_best_GBps)
# The bound is the better of the two page sizes (a mapped file gets 4 KiB pages).
BW=$(calc "%.2f" "($BW4K > $BW2M) ? $BW4K : $BW2M")

phase_start "OpenBLAS sgemm 1024^3"
$BIN/sgemm -j $J -r $MB_REPS > $TMP/sgemm.txt || die "sgemm failed"
$BIN/sgemm -j 1 -r 3 > $TMP/sgemm1.txt || die "sgemm failed"
# The Llama prompt's own products (4 of 768x768, 2 of 2048x768, 1 of 768x2048 per layer), as
# one figure: their FLOPs over the time they take.
for s in 256x768x768 256x2048x768 256x768x2048; do
    $BIN/sgemm -j $J -r $MB_REPS -s $s > $TMP/sgemm_$s.txt || die "sgemm failed"
done
phase_end sgemm
SG=$(get $TMP/sgemm.txt sgemm_best_GFLOPs) SG_MED=$(get $TMP/sgemm.txt sgemm_median_GFLOPs)
SG1=$(get $TMP/sgemm1.txt sgemm_best_GFLOPs)
SG_PROMPT=$(awk -v a=$(get $TMP/sgemm_256x768x768.txt sgemm_best_GFLOPs) -v b=$(get $TMP/sgemm_256x2048x768.txt sgemm_best_GFLOPs) \
    -v c=$(get $TMP/sgemm_256x768x2048.txt sgemm_best_GFLOPs) 'BEGIN { printf "%.1f", 12 / (4 / a + (16 / 3) / b + (8 / 3) / c) }')

phase_start "matvec vs sgemv (110M shapes)"
$BIN/matvec -j $J -r $R > $TMP/matvec.txt || die "matvec failed"
phase_end matvec

# ---- our forward pass ----
fwd() { # name model
    cat "$2" > /dev/null # into the page cache, so that no run pays for the disk
    $BIN/bench_forward "$2" -j $J -p 256 -n $STEPS -r $R > $TMP/fwd_$1.txt || die "bench_forward $2 failed"
    $BIN/bench_forward "$2" -j $J -p 256 -n $STEPS -r $(( R > 3 ? 3 : R )) --pos0 0 > $TMP/fwd0_$1.txt ||
        die "bench_forward $2 failed"
}
# ./run itself: peak RSS and its own timing line, with a prompt of exactly 256 tokens.
run_cli() { # name model
    local words=256 n=0 try
    for try in 1 2 3; do
        local prompt
        prompt=$(yes the | head -n $words | paste -sd' ')
        /usr/bin/time -f "maxrss_kb %M" -o $TMP/rss_$1.txt ./run "$2" -j $J -s 42 -t 0 -n $STEPS -i "$prompt" \
            > /dev/null 2> $TMP/run_$1.txt || die "./run $2 failed: $(tail -1 $TMP/run_$1.txt)"
        n=$(sed -n 's/^prompt: \([0-9]*\) tokens in.*/\1/p' $TMP/run_$1.txt)
        [ "$n" = 256 ] && break
        words=$(( words + 256 - n )) # each further "the" is one token
    done
    echo "$n" > $TMP/run_$1_prompt.txt
}
for m in llama gpt2; do
    model=$LLAMA
    [ $m = gpt2 ] && model=$GPT2
    phase_start "forward pass, $m (bench_forward, ./run)"
    fwd $m $model
    run_cli $m $model
    phase_end $m
done

# ---- PyTorch on the same models: its best of two thread settings ----
torch_best() { # name model -> $TMP/torch_$1.txt with the best prompt and generation figures
    local f=$TMP/torch_$1
    cat "$2" > /dev/null
    OMP_WAIT_POLICY=PASSIVE $PYTHON bench/torch_infer.py "$2" --threads $J -p 256 -n $(( STEPS / 2 )) -r 3 > ${f}_a.txt ||
        die "torch_infer.py $2 failed"
    OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$J $PYTHON bench/torch_infer.py "$2" --threads 1 -p 256 \
        -n $(( STEPS / 2 )) -r 3 > ${f}_b.txt || die "torch_infer.py $2 failed"
    awk '$1 == "prompt_tok_s" || $1 == "gen_tok_s" { if ($2 > best[$1]) { best[$1] = $2; how[$1] = FILENAME } }
         END { for (k in best) print k, best[k], (how[k] ~ /_a.txt$/ ? "torch:'"$J"'threads" : "torch:1thread+OpenBLAS:'"$J"'") }' \
        ${f}_a.txt ${f}_b.txt > ${f}.txt
    get ${f}_a.txt gen_ids > ${f}_ids.txt
}
for m in llama gpt2; do
    model=$LLAMA
    [ $m = gpt2 ] && model=$GPT2
    phase_start "PyTorch inference, $m"
    torch_best $m $model
    phase_end torch_$m
done

# ---- training (issue 4) ----
phase_start "training: ./train vs PyTorch"
BENCH_THREADS=$J BENCH_QUICK=${BENCH_QUICK:-0} PYTHON=$PYTHON SGEMM_GFLOPS=$SG bash bench/train_bench.sh > $TMP/train.txt
phase_end train

# ---- the table ----
ratio() { calc "%.2f" "$1 / $2"; }
echo
echo "Baselines (this run, $J threads):"
printf "  memory read, 1 GiB, best of %s:   %s GB/s (4 KiB pages %s, 2 MiB pages %s)   [others: %s]\n" \
    "$MB_REPS" "$BW" "$BW4K" "$BW2M" "${LOADNOTE[membw]}"
printf "  OpenBLAS sgemm 1024^3:            %s GFLOP/s best, %s median (1 thread: %s)   [others: %s]\n" \
    "$SG" "$SG_MED" "$SG1" "${LOADNOTE[sgemm]}"
printf "  OpenBLAS sgemm on the Llama prompt's 256-row products: %s GFLOP/s (%s of 1024^3)\n" "$SG_PROMPT" \
    "$(calc %.2f "$SG_PROMPT / $SG")"
echo
echo "One-token matrix-vector products, GB/s (median over $R passes; ratio to the memory bound):   [others: ${LOADNOTE[matvec]}]"
printf "  %-12s %16s %16s\n" shape "model.h matvec" "OpenBLAS sgemv"
for s in 768x768 2048x768 768x2048 32000x768 token; do
    a=$(get $TMP/matvec.txt matvec_${s}_GBps) b=$(get $TMP/matvec.txt sgemv_${s}_GBps)
    printf "  %-12s %8s (%s) %8s (%s)\n" "$s" "$a" "$(ratio $a $BW)" "$b" "$(ratio $b $BW)"
done
echo "  (token = one step's 85 products in order, 438 MB)"

for m in llama gpt2; do
    f=$TMP/fwd_$m.txt f0=$TMP/fwd0_$m.txt t=$TMP/torch_$m.txt
    name="Llama 110M (dim 768, 12 layers, 12 heads, hidden 2048, vocab 32000)"
    [ $m = gpt2 ] && name="GPT-2 124M (HF directory -> convert.py; dim 768, 12 layers, vocab 50257, LayerNorm, GELU, biases, tied)"
    wb=$(get $f step_weight_bytes) kvb=$(get $f step_kv_bytes) gen=$(get $f gen_tok_s) gen0=$(get $f0 gen_tok_s)
    pr=$(get $f prompt_tok_s) gf=$(get $f prompt_GFLOPs) fl=$(get $f prompt_flops) fli=$(get $f prompt_flops_issue)
    file=$(get $f file_bytes) kv=$(get $f kv_cache_bytes) rss=$(( $(get $TMP/rss_$m.txt maxrss_kb) * 1024 ))
    bound=$(( file + kv + 32 * 1048576 ))
    runline=$(grep '^prompt:' $TMP/run_$m.txt)
    echo
    echo "$name, $J threads   [others: ${LOADNOTE[$m]}, torch phase ${LOADNOTE[torch_$m]}]"
    printf "  (a) generation after a 256-token prompt: %s tok/s x %.1f MB/token = %.2f GB/s -> %s of memory bound (goal 0.95)\n" \
        "$gen" "$(calc %.1f "$wb / 1e6")" "$(calc %.2f "$gen * $wb / 1e9")" "$(calc %.3f "$gen * $wb / 1e9 / $BW")"
    printf "      counting the KV cache it also reads (%.1f MB/token): %s; from position 0: %s tok/s -> %s\n" \
        "$(calc %.1f "$kvb / 1e6")" "$(calc %.3f "$gen * ($wb + $kvb) / 1e9 / $BW")" "$gen0" \
        "$(calc %.3f "$gen0 * $wb / 1e9 / $BW")"
    printf "  (b) 256-token prompt: %s tok/s = %s GFLOP/s -> %s of sgemm (goal 0.7); with the issue's 2 x all params x tokens: %s\n" \
        "$pr" "$gf" "$(calc %.3f "$gf / $SG")" "$(calc %.3f "$pr * $fli / 256 / 1e9 / $SG")"
    [ $m = llama ] && printf "      (of sgemm on the prompt's own shapes, %s GFLOP/s: %s)\n" "$SG_PROMPT" "$(calc %.3f "$gf / $SG_PROMPT")"
    printf "  (c) ./run peak RSS %.1f MiB <= file %.1f + KV cache %.1f + 32 MiB = %.1f MiB: %s\n" \
        "$(calc %.1f "$rss / 1048576")" "$(calc %.1f "$file / 1048576")" "$(calc %.1f "$kv / 1048576")" \
        "$(calc %.1f "$bound / 1048576")" "$([ $rss -le $bound ] && echo yes || echo NO)"
    echo "      ./run, $(cat $TMP/run_${m}_prompt.txt)-token prompt: ${runline#prompt: }"
    tg=$(get $t gen_tok_s) tp=$(get $t prompt_tok_s)
    printf "  vs PyTorch %s (best of 2 thread settings): generation %s tok/s -> ours %sx (%s); prompt %s tok/s -> ours %sx (%s)\n" \
        "$($PYTHON -c 'import torch; print(torch.__version__)' 2>/dev/null)" "$tg" "$(ratio $gen $tg)" "$(get $t gen_tok_s 2)" \
        "$tp" "$(ratio $pr $tp)" "$(get $t prompt_tok_s 2)"
    # The two ran different numbers of steps: compare what both have.
    same=$(awk -v a="$(get $f gen_ids)" -v b="$(cat $TMP/torch_${m}_ids.txt)" 'BEGIN {
        n = split(a, x, ","); m = split(b, y, ","); if (m < n) n = m
        for (i = 1; i <= n; i++) if (x[i] != y[i]) { print "no, from step " i; exit }
        print "yes, the first " n }')
    echo "      same greedy tokens as PyTorch: $same"
done
echo
cat $TMP/train.txt
echo
echo "bench: loadavg before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - T_START )) s in all"
echo "bench: throughputs are medians of $R repetitions, bounds the best of several; ratios divide by bounds measured above"
