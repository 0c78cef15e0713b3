#!/usr/bin/env bash
# bench/run.sh: `make bench`. Every figure is a ratio against a baseline measured in this same
# run on this same machine: memory read bandwidth and OpenBLAS sgemm (bench/membw.c,
# bench/sgemm.c), PyTorch running the same model (bench/torch_infer.py) or training it
# (bench/train_bench.sh). The machine may be shared, so
#  - the bounds are measured again before every phase and the best over the run is used
#    (a busy moment can only lower a bound, never raise it),
#  - ours and PyTorch's runs alternate, round after round, and each side's median over the
#    rounds is compared, so both see the same mix of load,
#  - what the other processes used of the cores is printed beside every phase.
#   BENCH_THREADS (2)  threads for everything
#   BENCH_QUICK=1      fewer repetitions (a smoke test of the script, not a measurement)
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
J=${BENCH_THREADS:-2}
TMP=bench/tmp
BIN=bench/bin
mkdir -p "$TMP" "$BIN"
if [ "${BENCH_QUICK:-0}" = 1 ]; then ROUNDS=1 STORED_ROUNDS=1 STEPS=8 MB_REPS=3 LONG=1000; else ROUNDS=3 STORED_ROUNDS=6 STEPS=48 MB_REPS=5 LONG=8000; fi
T_START=$(date +%s)

die() { echo "bench: $*" >&2; exit 1; }
. bench/lib.sh # vals, med, mkvar
# The maximum and minimum of vals.
max() { vals "$@" | sort -g | tail -1; }
min() { vals "$@" | sort -g | head -1; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
ratio() { calc "%.2f" "$1 / $2"; }
# Each round's own ratio of field 1 of key in file a to that in file b (the files hold the
# rounds in the same order), and their median: a ratio taken within a round sees one state
# of the machine, which moves between rounds.
round_ratios() { paste -d' ' <(vals "$1" "$3") <(vals "$2" "$3") | awk '{ printf "%.2f\n", $1 / $2 }'; }
ratio_median() { round_ratios "$@" | sort -g | awk '{ v[n++] = $1 } END { if (n) printf "%.2f", (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }

# ---- load: what the other processes on the machine did while a phase ran ----
NCPU=$(nproc)
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# CPU time of this shell's finished children (every benchmark process), in ticks.
our_ticks() { awk '{ print $16 + $17 }' /proc/$$/stat; }
declare -A LOADNOTE
phase_start() {
    PHASE="$1"
    P_T0=$(date +%s.%N) P_BUSY=$(busy_ticks) P_OURS=$(our_ticks) P_LOAD=$(cut -d' ' -f1 /proc/loadavg)
    echo "== $PHASE (loadavg $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}
# Others' share of all cores during the phase: machine busy time minus our processes'.
phase_end() {
    local secs busy ours others warn=""
    secs=$(calc "%.3f" "$(date +%s.%N) - $P_T0")
    busy=$(( $(busy_ticks) - P_BUSY )) ours=$(( $(our_ticks) - P_OURS ))
    others=$(calc "%.0f" "100 * ($busy - $ours) / ($secs * $HZ * $NCPU)")
    [ "$others" -lt 0 ] && others=0
    LOADNOTE[$1]="others used ${others}% of the cores"
    [ "$others" -ge 10 ] && warn="  <- other processes busy: noisy" && LOADNOTE[$1]+=", NOISY"
    echo "   $PHASE: ${secs}s, others used ${others}% of $NCPU cores, loadavg $P_LOAD -> $(cut -d' ' -f1 /proc/loadavg)$warn" >&2
}

echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $NCPU cores, $J threads"
echo "bench: OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset} GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-unset (./run and bench_forward then spin 3000 times before sleeping)}"
echo "bench: loadavg before: $(cat /proc/loadavg)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- build with exactly the Makefile's compiler, flags and BLAS ----
CC=$(mkvar CC) CFLAGS=$(mkvar ALL_CFLAGS) LDLIBS=$(mkvar LDLIBS)
[ -n "$LDLIBS" ] || die "cannot read LDLIBS from the Makefile"
for p in membw sgemm matvec attention bench_forward bf16_gemm; do
    if [ ! -x $BIN/$p ] || [ bench/$p.c -nt $BIN/$p ] || [ -n "$(find model.h model io -newer $BIN/$p)" ] || [ bench/bench.h -nt $BIN/$p ]; then
        $CC $CFLAGS -I. -o $BIN/$p bench/$p.c $LDLIBS || die "cannot build bench/$p.c"
    fi
done
[ -x ./run ] || die "./run is not built (make run)"
# The kernels' level ./run was built for (make bench ARCH=x86-64-v3 measures the AVX2 path), from its closing line.
echo "bench: ./run built for $(mkvar ARCH_FLAGS): $(./run models/shakespeare.bin -n 1 2>&1 >/dev/null | sed -n 's/.*thread[s]*, \(.*\) kernels.*/\1/p') kernels"
echo "bench: BLAS $(ldd $BIN/sgemm | awk '/openblas/ { print $3; exit }'), as ./run: $(ldd ./run | awk '/openblas/ { print $3; exit }')"
# PyTorch loads the same OpenBLAS: it gets the kernels our programs end with, which they name
# where OpenBLAS falls back to old ones on a CPU it does not know (model/threads.h), or its
# figures would be the fallback's. A user's own OPENBLAS_CORETYPE stands.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$(OPENBLAS_VERBOSE=2 $BIN/sgemm -j 1 --shape 8x8x8 -r 1 2>&1 | sed -n 's/^Core: //p' | tail -n 1)
    [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
echo "bench: OpenBLAS's kernels ${OPENBLAS_CORETYPE:-as it chooses}, for ours and PyTorch's"

# ---- models: random weights, made once (bench/tmp is not committed) ----
LLAMA=$TMP/llama110m.bin GPT2=$TMP/gpt2_124m.bin LLAMA_Q8=$TMP/llama110m_q8.bin LLAMA_BF16=$TMP/llama110m_bf16.bin
LLAMA_Q4_0=$TMP/llama110m_q4_0.bin LLAMA_Q4_K_M=$TMP/llama110m_q4_k_m.bin
if [ ! -s $LLAMA ]; then
    $PYTHON tools/make_random.py $LLAMA --preset llama_110m --seed 1 || die "cannot make $LLAMA"
fi
if [ ! -s $LLAMA_Q8 ] || [ $LLAMA -nt $LLAMA_Q8 ]; then
    $PYTHON tools/convert.py $LLAMA $LLAMA_Q8 --weights q8_0 --force 2> /dev/null || die "cannot quantise $LLAMA"
fi
if [ ! -s $LLAMA_BF16 ] || [ $LLAMA -nt $LLAMA_BF16 ]; then
    $PYTHON tools/convert.py $LLAMA $LLAMA_BF16 --weights bf16 --force 2> /dev/null || die "cannot store $LLAMA in bfloat16"
fi
# llama.cpp's block types, as llama-quantize writes them (convert.py --quantize; docs/CONVERT.md)
for mix in q4_0 q4_k_m; do
    out=$TMP/llama110m_$mix.bin
    if [ ! -s $out ] || [ $LLAMA -nt $out ]; then
        $PYTHON tools/convert.py $LLAMA $out --quantize $mix --force 2> /dev/null || die "cannot store $LLAMA in $mix"
    fi
done
# the Q8_0 110M with a context of 8,192: the long-context line (issue 41)
LLAMA_8K=$TMP/llama110m_q8_8k.bin
if [ ! -s $LLAMA_8K ] || [ $LLAMA -nt $LLAMA_8K ]; then
    $PYTHON tools/convert.py $LLAMA $LLAMA_8K --weights q8_0 --seq-len 8192 --force 2> /dev/null ||
        die "cannot store $LLAMA in Q8_0 with a context of 8192"
fi
if [ ! -s $GPT2 ]; then
    rm -rf $TMP/gpt2_hf
    $PYTHON tools/make_random.py $TMP/gpt2_hf --preset gpt2_124m --hf-gpt2 --seed 1 || die "cannot make $TMP/gpt2_hf"
    $PYTHON tools/convert.py $TMP/gpt2_hf $GPT2 || die "cannot convert $TMP/gpt2_hf"
    rm -rf $TMP/gpt2_hf
fi
rm -f $TMP/*.txt

# ---- bounds: 1 GiB read (4 KiB and 2 MiB pages; a mapped file gets the former) and sgemm 1024^3 ----
bounds() { # reps
    local s
    $BIN/membw -j $J -r $1 --huge 0 >> $TMP/membw4k.txt 2> /dev/null || die "membw failed"
    $BIN/membw -j $J -r $1 --huge 1 >> $TMP/membw2m.txt 2> /dev/null || die "membw failed"
    $BIN/sgemm -j $J -r $(( 2 * $1 )) >> $TMP/sgemm.txt || die "sgemm failed"
    # The Llama prompt's own products (per layer 4 of 768x768, 2 of 2048x768, 1 of 768x2048).
    for s in 256x768x768 256x2048x768 256x768x2048; do
        $BIN/sgemm -j $J -r $(( 2 * $1 )) -s $s >> $TMP/sgemm_$s.txt || die "sgemm failed"
    done
}
phase_start "bounds: memory read bandwidth, sgemm"
bounds $MB_REPS
$BIN/sgemm -j 1 -r 3 > $TMP/sgemm1.txt || die "sgemm failed"
phase_end bounds

phase_start "matvec vs sgemv (110M shapes)"
$BIN/matvec -j $J -r 3 > $TMP/matvec.txt || die "matvec failed"
phase_end matvec

phase_start "bfloat16 products vs sgemm (training's shapes)"
$BIN/bf16_gemm -j $J -r $(( ROUNDS + 2 )) > $TMP/bf16_gemm.txt || die "bf16_gemm failed"
phase_end bf16_gemm

phase_start "attention products vs sgemm, 1 thread"
$BIN/attention -j 1 -r 7 > $TMP/attention.txt || die "attention failed"
phase_end attention

# ---- forward passes, ours and PyTorch's (its two thread settings), alternating ----
# ./run itself: peak RSS and its own timing line, with a prompt of exactly 256 tokens.
run_cli() { # name model
    local words=256 n=0 try prompt
    for try in 1 2 3; do
        prompt=$(yes the | head -n $words | paste -sd' ')
        /usr/bin/time -f "maxrss_kb %M" -o $TMP/rss_$1.txt ./run "$2" -j $J -s 42 -t 0 -n $STEPS -i "$prompt" \
            > /dev/null 2> $TMP/run_$1.txt || die "./run $2 failed: $(tail -1 $TMP/run_$1.txt)"
        n=$(sed -n 's/^prompt: \([0-9]*\) tokens in.*/\1/p' $TMP/run_$1.txt)
        [ "$n" = 256 ] && break
        words=$(( words + 256 - n )) # each further "the" is one token
    done
    echo "$n" > $TMP/run_$1_prompt.txt
}
TSTEPS=$(( STEPS / 3 )) # PyTorch's steps are slower; fewer of them keep the run short
for m in llama gpt2; do
    model=$LLAMA
    [ $m = gpt2 ] && model=$GPT2
    phase_start "forward pass, $m: ours and PyTorch, $ROUNDS rounds"
    # Into the page cache as ./run reads a model from disk: what was cached before (in folios
    # of whatever size, maybe small ones, which give 4 KiB pages) is dropped, and the first
    # mapping (model_open asks for huge pages) reads it back in 2 MiB folios; bench_forward
    # reports the share it got.
    $PYTHON -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' $model
    for round in $(seq $ROUNDS); do
        bounds 3
        # This round's bound, beside its generation: the read bandwidth of this machine moves
        # from minute to minute (30 to 57 GB/s seen here, as the host places the two cores).
        echo "round_bw_GBps $(vals $TMP/membw4k.txt membw_best_GBps | tail -1) $(vals $TMP/membw2m.txt membw_best_GBps | tail -1)" \
            >> $TMP/fwd_$m.txt
        $BIN/bench_forward $model -j $J -p 256 -n $STEPS -r 2 >> $TMP/fwd_$m.txt || die "bench_forward $model failed"
        OMP_WAIT_POLICY=PASSIVE $PYTHON bench/torch_infer.py $model --threads $J -p 256 -n $TSTEPS -r 2 \
            >> $TMP/torch_${m}_a.txt || die "torch_infer.py $model failed"
        OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=$J $PYTHON bench/torch_infer.py $model --threads 1 -p 256 \
            -n $TSTEPS -r 2 >> $TMP/torch_${m}_b.txt || die "torch_infer.py $model failed"
    done
    $BIN/bench_forward $model -j $J -p 256 -n $STEPS -r 2 --pos0 0 > $TMP/fwd0_$m.txt || die "bench_forward $model failed"
    run_cli $m $model
    phase_end $m
done

# ---- the Llama model in Q8_0, bfloat16, Q4_0 and Q4_K_M against float32, alternating in the same minutes ----
phase_start "forward pass, llama Q8_0, bfloat16, Q4_0 (float32 and float16 caches), Q4_K_M and float32, $STORED_ROUNDS rounds"
# into the page cache in 2 MiB folios, as in the forward phases
$PYTHON -c 'import os, sys
for p in sys.argv[1:]: fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' \
    $LLAMA_Q8 $LLAMA_BF16 $LLAMA_Q4_0 $LLAMA_Q4_K_M $LLAMA
for round in $(seq $STORED_ROUNDS); do
    bounds 3
    # every other round backwards, so that none always goes first
    # (cbf16: the float32 model with --compute bf16, its prompt's products on bfloat16 inputs;
    # q4_0kv: the Q4_0 model with --kv-cache f16)
    order="q8:$LLAMA_Q8 bf16:$LLAMA_BF16 cbf16:$LLAMA q4_0:$LLAMA_Q4_0 q4_0kv:$LLAMA_Q4_0 q4km:$LLAMA_Q4_K_M f32:$LLAMA"
    [ $((round % 2)) = 0 ] &&
        order="f32:$LLAMA q4km:$LLAMA_Q4_K_M q4_0kv:$LLAMA_Q4_0 q4_0:$LLAMA_Q4_0 cbf16:$LLAMA bf16:$LLAMA_BF16 q8:$LLAMA_Q8"
    for m in $order; do
        compute=f32 kv=f32
        [ ${m%%:*} = cbf16 ] && compute=bf16
        [ ${m%%:*} = q4_0kv ] && kv=f16
        $BIN/bench_forward ${m#*:} -j $J -p 256 -n $STEPS -r 2 --compute $compute --kv-cache $kv \
            >> $TMP/fwd_stored_${m%%:*}.txt ||
            die "bench_forward ${m#*:} failed"
    done
done
phase_end stored

# ---- long context (issue 41): a prompt of LONG tokens, then 128 generated after it ----
phase_start "long context: a $LONG-token prompt and 128 tokens after it, llama Q8_0, float16 and Q8_0 caches, $ROUNDS rounds"
yes the | head -n $((LONG - 1)) | paste -sd' ' > $TMP/prompt_long.txt # "the" is one token, after BOS
for round in $(seq $ROUNDS); do
    kvs="f16 q8_0"
    [ $((round % 2)) = 0 ] && kvs="q8_0 f16"
    for kv in $kvs; do
        ./run $LLAMA_8K -j $J -c 8192 -t 0 -n 128 -f $TMP/prompt_long.txt --kv-cache $kv > /dev/null 2> $TMP/long_run.txt ||
            die "./run $LLAMA_8K failed: $(tail -1 $TMP/long_run.txt)"
        sed -n 's/^prompt: \([0-9]*\) tokens in [0-9.]* s (\([0-9.]*\) tok\/s); generated: \([0-9]*\) tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/prompt_tokens \1\nprompt_tok_s \2\ngen_tokens \3\ngen_tok_s \4/p' \
            $TMP/long_run.txt >> $TMP/long_$kv.txt
    done
done
phase_end long

# ---- training (issue 4) ----
phase_start "training: ./train vs PyTorch"
bounds 3
BENCH_THREADS=$J BENCH_QUICK=${BENCH_QUICK:-0} PYTHON=$PYTHON SGEMM_GFLOPS=$(max $TMP/sgemm.txt sgemm_best_GFLOPs) \
    bash bench/train_bench.sh > $TMP/train.txt
BENCH_THREADS=$J BENCH_QUICK=${BENCH_QUICK:-0} PYTHON=$PYTHON SGEMM_GFLOPS=$(max $TMP/sgemm.txt sgemm_best_GFLOPs) bash bench/mpi_scaling.sh >> $TMP/train.txt
phase_end train

# ---- the table ----
BW4K=$(max $TMP/membw4k.txt membw_best_GBps) BW2M=$(max $TMP/membw2m.txt membw_best_GBps)
BW=$(calc "%.2f" "($BW4K > $BW2M) ? $BW4K : $BW2M")
SG=$(max $TMP/sgemm.txt sgemm_best_GFLOPs) SG1=$(max $TMP/sgemm1.txt sgemm_best_GFLOPs)
# The prompt's products as one figure: their FLOPs over the time they take.
SG_PROMPT=$(awk -v a=$(max $TMP/sgemm_256x768x768.txt sgemm_best_GFLOPs) \
    -v b=$(max $TMP/sgemm_256x2048x768.txt sgemm_best_GFLOPs) -v c=$(max $TMP/sgemm_256x768x2048.txt sgemm_best_GFLOPs) \
    'BEGIN { printf "%.1f", 12 / (4 / a + (16 / 3) / b + (8 / 3) / c) }')
N_BOUNDS=$(vals $TMP/sgemm.txt sgemm_best_GFLOPs | wc -l)
echo
echo "Bounds (this run, $J threads; the best of $N_BOUNDS measurements spread over the run, the range shows the load):"
printf "  memory read, 1 GiB:    %s GB/s (4 KiB pages %s, range %s-%s; 2 MiB pages %s, range %s-%s)\n" "$BW" "$BW4K" \
    "$(min $TMP/membw4k.txt membw_best_GBps)" "$BW4K" "$BW2M" "$(min $TMP/membw2m.txt membw_best_GBps)" "$BW2M"
printf "  OpenBLAS sgemm 1024^3: %s GFLOP/s (range %s-%s; 1 thread: %s)\n" "$SG" \
    "$(min $TMP/sgemm.txt sgemm_best_GFLOPs)" "$SG" "$SG1"
printf "  OpenBLAS sgemm on the Llama prompt's 256-row products: %s GFLOP/s (%s of 1024^3)   [%s]\n" "$SG_PROMPT" \
    "$(calc %.2f "$SG_PROMPT / $SG")" "${LOADNOTE[bounds]}"
echo
echo "One-token matrix-vector products, GB/s (median of 3 passes; ratio to the memory bound)   [${LOADNOTE[matvec]}]:"
printf "  %-12s %16s %16s %16s\n" shape "model.h matvec" "OpenBLAS sgemv" "model.h bfloat16"
for s in 768x768 2048x768 768x2048 32000x768 token; do
    a=$(med $TMP/matvec.txt matvec_${s}_GBps) b=$(med $TMP/matvec.txt sgemv_${s}_GBps)
    h=$(med $TMP/matvec.txt matvec_bf16_${s}_GBps)
    printf "  %-12s %8s (%s) %8s (%s) %8s (%s)\n" "$s" "$a" "$(ratio $a $BW)" "$b" "$(ratio $b $BW)" "$h" "$(ratio $h $BW)"
done
echo "  (token = one step's 85 products in order, 438 MB in float32, 219 MB in bfloat16)"
echo
echo "Attention's products per (sequence, head), microseconds, 1 thread (median of 7)   [${LOADNOTE[attention]}]:"
printf "  %-44s %14s %14s %8s\n" "" "OpenBLAS sgemm" "model.h causal" "speed-up"
for s in "baby:T 64, head 32 (baby)" "train_b:T 256, head 64 ((b), 110M prompt)" \
    "token_at_1000:1 token after 1000, head 64"; do
    for pass in forward backward; do
        key=${pass}_${s%%:*}_us
        a=$(vals $TMP/attention.txt $key 1) b=$(vals $TMP/attention.txt $key 2)
        [ -n "$a" ] && printf "  %-44s %14s %14s %8s\n" "$pass, ${s#*:}" "$a" "$b" "$(ratio $a $b)x"
    done
done

for m in llama gpt2; do
    f=$TMP/fwd_$m.txt f0=$TMP/fwd0_$m.txt ta=$TMP/torch_${m}_a.txt tb=$TMP/torch_${m}_b.txt
    name="Llama 110M (dim 768, 12 layers, 12 heads, hidden 2048, vocab 32000)"
    [ $m = gpt2 ] && name="GPT-2 124M (HF directory -> convert.py; dim 768, 12 layers, vocab 50257, LayerNorm, GELU, biases, tied)"
    wb=$(max $f step_weight_bytes) kvb=$(max $f step_kv_bytes) gen=$(med $f gen_tok_s) gen0=$(med $f0 gen_tok_s)
    pr=$(med $f prompt_tok_s) gf=$(med $f prompt_GFLOPs) fli=$(max $f prompt_flops_issue)
    file=$(max $f file_bytes) kv=$(max $f kv_cache_bytes) rss=$(( $(max $TMP/rss_$m.txt maxrss_kb) * 1024 ))
    bound=$(( file + kv + 32 * 1048576 ))
    echo
    echo "$name, $J threads, medians of $ROUNDS rounds   [${LOADNOTE[$m]}]"
    echo "  file mapped with 2 MiB pages: $(calc %.0f "100 * $(min $f file_2m_mapped_fraction)")% (the rest 4 KiB)"
    printf "  (a) generation after a 256-token prompt: %s tok/s x %.1f MB/token = %.2f GB/s -> %s of the memory bound (goal 0.95)\n" \
        "$gen" "$(calc %.1f "$wb / 1e6")" "$(calc %.2f "$gen * $wb / 1e9")" "$(calc %.3f "$gen * $wb / 1e9 / $BW")"
    # Each round's generation over the better of the two reads measured just before it.
    printf "      the same against each round's own bound (median of the rounds): %s\n" "$(awk '
        $1 == "round_bw_GBps" { bw = ($2 > $3) ? $2 : $3 }
        $1 == "gen_weight_GBps" { printf "%.3f\n", $2 / bw }' $f | sort -g |
        awk '{ v[n++] = $1 } END { if (n) print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }')"
    printf "      with the KV cache it also reads (%.1f MB/token): %s; from position 0: %s tok/s -> %s\n" \
        "$(calc %.1f "$kvb / 1e6")" "$(calc %.3f "$gen * ($wb + $kvb) / 1e9 / $BW")" "$gen0" \
        "$(calc %.3f "$gen0 * $wb / 1e9 / $BW")"
    printf "  (b) 256-token prompt: %s tok/s = %s GFLOP/s -> %s of sgemm (goal 0.7); with the issue's 2 x all params x tokens: %s\n" \
        "$pr" "$gf" "$(calc %.3f "$gf / $SG")" "$(calc %.3f "$pr * $fli / 256 / 1e9 / $SG")"
    [ $m = llama ] && printf "      of sgemm on the prompt's own shapes (%s GFLOP/s): %s\n" "$SG_PROMPT" "$(calc %.3f "$gf / $SG_PROMPT")"
    printf "  (c) ./run peak RSS %.1f MiB <= file %.1f + KV cache %.1f + 32 MiB = %.1f MiB: %s\n" \
        "$(calc %.1f "$rss / 1048576")" "$(calc %.1f "$file / 1048576")" "$(calc %.1f "$kv / 1048576")" \
        "$(calc %.1f "$bound / 1048576")" "$([ $rss -le $bound ] && echo yes || echo NO)"
    echo "      ./run, $(cat $TMP/run_${m}_prompt.txt)-token prompt: $(sed -n 's/^prompt: //p' $TMP/run_$m.txt)"
    # PyTorch's better thread setting, for each figure.
    for k in gen_tok_s prompt_tok_s; do
        a=$(med $ta $k) b=$(med $tb $k)
        if awk "BEGIN { exit !($a >= $b) }"; then eval "T_$k=$a H_$k='torch $J threads'"
        else eval "T_$k=$b H_$k='torch 1 thread, OpenBLAS $J'"; fi
    done
    printf "  vs PyTorch %s, best thread setting: generation %s tok/s (%s) -> ours %sx; prompt %s tok/s (%s) -> ours %sx\n" \
        "$($PYTHON -c 'import torch; print(torch.__version__)' 2> /dev/null)" "$T_gen_tok_s" "$H_gen_tok_s" \
        "$(ratio $gen $T_gen_tok_s)" "$T_prompt_tok_s" "$H_prompt_tok_s" "$(ratio $pr $T_prompt_tok_s)"
    # The two ran different numbers of steps: compare what both have.
    same=$(awk -v a="$(vals $f gen_ids | head -1)" -v b="$(vals $ta gen_ids | head -1)" 'BEGIN {
        n = split(a, x, ","); m = split(b, y, ","); if (m < n) n = m
        for (i = 1; i <= n; i++) if (x[i] != y[i]) { print "no, from step " i; exit }
        print "yes, the first " n }')
    echo "      same greedy tokens as PyTorch: $same"
done
ff=$TMP/fwd_stored_f32.txt
genf=$(med $ff gen_tok_s) prf=$(med $ff prompt_tok_s)
echo
echo "Llama 110M stored in Q8_0, bfloat16, Q4_0 and Q4_K_M, $J threads, $STORED_ROUNDS rounds, float32 alternating   [${LOADNOTE[stored]}]"
echo "  (tok/s: medians of the rounds; against float32: the median of each round's own ratio, the rounds' in brackets)"
echo "  float32: generation after a 256-token prompt $genf tok/s, 256-token prompt $prf tok/s"
for m in "q8:Q8_0 (convert.py --weights q8_0)" "bf16:bfloat16 (convert.py --weights bf16; goals: generation 1.8x, prompt 1x)" \
    "q4_0:Q4_0 (llama.cpp's blocks; convert.py --quantize)" "q4km:Q4_K_M (llama.cpp's mix of Q4_K and Q6_K, kept)"; do
    f=$TMP/fwd_stored_${m%%:*}.txt
    wb=$(max $f step_weight_bytes) gen=$(med $f gen_tok_s) pr=$(med $f prompt_tok_s)
    echo "  ${m#*:}, file mapped with 2 MiB pages: $(calc %.0f "100 * $(min $f file_2m_mapped_fraction)")%"
    printf "    generation: %s tok/s x %.1f MB/token = %.2f GB/s -> %s of the memory bound; float32's -> %sx (%s)\n" \
        "$gen" "$(calc %.1f "$wb / 1e6")" "$(calc %.2f "$gen * $wb / 1e9")" "$(calc %.3f "$gen * $wb / 1e9 / $BW")" \
        "$(ratio_median $f $ff gen_tok_s)" "$(round_ratios $f $ff gen_tok_s | tr '\n' ' ' | sed 's/ $//')"
    printf "    256-token prompt: %s tok/s; float32's -> %sx (%s)\n" "$pr" "$(ratio_median $f $ff prompt_tok_s)" \
        "$(round_ratios $f $ff prompt_tok_s | tr '\n' ' ' | sed 's/ $//')"
done
fk=$TMP/fwd_stored_q4_0kv.txt fq=$TMP/fwd_stored_q4_0.txt
printf "  Q4_0 with --kv-cache f16 (keys and values in float16, llama.cpp's default): generation %s tok/s; the float32\n" \
    "$(med $fk gen_tok_s)"
printf "    cache's -> %sx (%s)\n" "$(ratio_median $fk $fq gen_tok_s)" "$(round_ratios $fk $fq gen_tok_s | tr '\n' ' ' | sed 's/ $//')"
echo
wb=$(max $TMP/fwd_stored_q8.txt step_weight_bytes)
echo "Long context: Llama 110M Q8_0, -c 8192, a $(med $TMP/long_f16.txt prompt_tokens)-token prompt, then 128 tokens generated after it, $J threads, medians of $ROUNDS rounds   [${LOADNOTE[long]}]"
for kv in "f16:2" "q8_0:1.0625"; do # bytes a cached value takes
    f=$TMP/long_${kv%%:*}.txt
    # a token reads the weights and every layer's keys and values (12 layers x 768) up to its position
    read_bytes=$(calc %.0f "$wb + 2 * 12 * 768 * ${kv#*:} * ($(med $f prompt_tokens) + 64.5)")
    printf "  --kv-cache %-5s prompt %s tok/s; generation %s tok/s x %.1f MB/token (weights and cache) -> %s of the memory bound\n" \
        "${kv%%:*}" "$(med $f prompt_tok_s)" "$(med $f gen_tok_s)" "$(calc %.1f "$read_bytes / 1e6")" \
        "$(calc %.3f "$(med $f gen_tok_s) * $read_bytes / 1e9 / $BW")"
done
cb=$TMP/fwd_stored_cbf16.txt bg=$TMP/bf16_gemm.txt
echo
echo "bfloat16 products (model/bf16_gemm.h, $(vals $bg bf16_path) path): inputs rounded to bfloat16, float32 sums"
echo "  sgemm_bf16 against OpenBLAS sgemm on one training step's products, each of $J threads on its own"
echo "  matrices as ./train calls them, GFLOP/s, medians of $(vals $bg bf16_baby_GFLOPs | wc -l) alternating rounds   [${LOADNOTE[bf16_gemm]}]:"
for cfg in "baby:(a) baby Shakespeare, width 128, 384 rows a thread" "l6d384:(b) 6 layers x 384, 1024 rows a thread"; do
    k=${cfg%%:*}
    printf "    %-48s %7s vs sgemm %7s -> %sx (rounds %s; goal 1.5)\n" "${cfg#*:}" "$(med $bg bf16_${k}_GFLOPs)" \
        "$(med $bg sgemm_${k}_GFLOPs)" "$(vals $bg ratio_${k}_median)" "$(vals $bg ratio_$k | tr '\n' ' ' | sed 's/ $//')"
done
printf "  Llama 110M (float32 weights), 256-token prompt with --compute bf16: %s tok/s; float32's -> %sx (%s; goal 1.6)   [%s]\n" \
    "$(med $cb prompt_tok_s)" "$(ratio_median $cb $ff prompt_tok_s)" \
    "$(round_ratios $cb $ff prompt_tok_s | tr '\n' ' ' | sed 's/ $//')" "${LOADNOTE[stored]}"
echo "    its logits at all 256 positions within $(max $cb bf16_logits_rel_err) of the largest float32 logit (goal <= 2e-2)"
echo
cat $TMP/train.txt
echo "  [${LOADNOTE[train]}]"
echo
echo "bench: loadavg before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - T_START )) s in all"
echo "bench: throughputs are medians, bounds the best measurement of the run; NOISY marks phases in which other"
echo "bench: processes used 10% or more of the cores: their ratios can be off in either direction"
