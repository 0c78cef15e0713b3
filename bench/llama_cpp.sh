#!/usr/bin/env bash
# bench/llama_cpp.sh: ./run against llama.cpp's llama-bench on the same GGUF file, the way
# docs/BENCHMARKS.md's side-by-sides are measured. llama.cpp is not built here: build it
# outside the checkout from a fetched copy and give this script its llama-bench.
#
# usage: bench/llama_cpp.sh LLAMA_BENCH MODEL.gguf [ROUNDS (5)]
#
# A round measures the read bandwidth (bench/membw.c, 4 KiB and 2 MiB pages, the better), then
# runs the two programs SAMPLES times, alternating which goes first, and takes the median of
# each figure:
#   llama.cpp  llama-bench -t THREADS -p PP -n TG -r 1: its pp and tg tokens/s
#   ours       ./run MODEL.bin -j THREADS --kv-cache KV (f16, llama.cpp's default) -t 0: a prompt
#              of exactly PP tokens, then TG tokens generated from an empty cache, as
#              llama-bench's tg test runs
# With DEPTH set, the long-context pair instead (issue 41's "8k prompt, generation at depth 8k"):
#   llama.cpp  llama-batched-bench (beside LLAMA_BENCH) -npp DEPTH -ntg TG -npl 1, once with and
#              once without -fa as FA lists them: its S_PP and S_TG, the prompt's tokens/s and the
#              generation's after it; the better of the -fa settings for each figure (both in the raw
#              outputs). llama-bench's -pg gives only the whole, and its time less the prompt's alone
#              was noise: two 8,000-token prompts differ by more than 128 tokens take.
#   ours       ./run -c DEPTH+TG+1 -f (a DEPTH-token prompt) -n TG+1: its prompt and generation
# and the KV cache type KV on both sides (llama.cpp's -ctk/-ctv; q8_0 values need its -fa 1).
# It prints the round's ratios (ours ÷ llama.cpp), each program's generation as a fraction of
# the round's read bound (bandwidth ÷ the bytes a token reads: every tensor but the token
# embedding, of which a token reads one row, unless it is also the classifier; at DEPTH also the
# keys and values up to the generation's mean position, in KV's bytes), and the share
# of the cores other processes took. The last line holds the medians over the rounds.
# MODEL.bin is tools/convert.py's default conversion of the GGUF (every tensor in its own type),
# written to bench/tmp/ unless BIN names one. Raw outputs go to OUT (bench/tmp/llama_cpp/NAME-DATE).
#   environment: ARCH (native; x86-64-v3 builds ./run for AVX2), BIN, OUT, SAMPLES (1), THREADS (2), PP (256),
#   TG (128), DEPTH (0: off; e.g. 8000), KV (f16; or q8_0), FA (0,1; 1 with KV q8_0), PYTHON (/usr/bin/python3),
#   WORD (the: the prompt's word, repeated),
#   MEMBW (bench/bin/membw, built here: a program that prints "membw_best_GBps X" for --huge 0|1)
set -u
cd "$(dirname "$0")/.." || exit 1
die() { echo "bench/llama_cpp.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
LLAMA_BENCH=$1 GGUF=$2 ROUNDS=${3:-5}
SAMPLES=${SAMPLES:-1} THREADS=${THREADS:-2} PP=${PP:-256} TG=${TG:-128} PYTHON=${PYTHON:-/usr/bin/python3}
DEPTH=${DEPTH:-0} KV=${KV:-f16}
FA=${FA:-$([ "$KV" = f16 ] && echo 0,1 || echo 1)}
CTX=() # ours at depth: a context for the prompt and what follows it (the default is 4096)
if [ "$DEPTH" -gt 0 ]; then PP=$DEPTH CTX=(-c $((DEPTH + TG + 1))); fi
[ -x "$LLAMA_BENCH" ] || die "$LLAMA_BENCH: not an executable"
BATCHED_BENCH=$(dirname "$LLAMA_BENCH")/llama-batched-bench
[ "$DEPTH" = 0 ] || [ -x "$BATCHED_BENCH" ] || die "$BATCHED_BENCH: not an executable (DEPTH needs llama.cpp's llama-batched-bench)"
[ -f "$GGUF" ] || die "$GGUF: no such file"
name=$(basename "$GGUF" .gguf)
OUT=${OUT:-bench/tmp/llama_cpp/$name-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || die "cannot create $OUT"
. bench/lib.sh # mkvar
make -s run || die "make run failed"
MEMBW=${MEMBW:-bench/bin/membw}
mkdir -p bench/bin
if [ "$MEMBW" = bench/bin/membw ] && { [ ! -x bench/bin/membw ] || [ bench/membw.c -nt bench/bin/membw ]; }; then
    # shellcheck disable=SC2046 # the flags are words
    $(mkvar CC) $(mkvar ALL_CFLAGS) -I. -o bench/bin/membw bench/membw.c $(mkvar LDLIBS) || die "cannot build bench/membw.c"
fi
BIN=${BIN:-bench/tmp/$name.bin}
if [ ! -s "$BIN" ] || [ "$BIN" -ot "$GGUF" ]; then
    "$PYTHON" tools/convert.py "$GGUF" "$BIN" --force > "$OUT/convert.txt" 2>&1 || die "convert.py failed: $(tail -1 "$OUT/convert.txt")"
fi
# The bytes a generated token reads: the weights (of a mixture of experts' stacked experts, the
# share a token chooses), and at depth the KV cache's keys and values up to the mean position of
# the generation (every layer's K projection gives its key width).
READ=$(PYTHONPATH=tools "$PYTHON" -c '
import sys
from attn.gguf_file import GGUFFile
g = GGUFFile(sys.argv[1])
t, meta = g.tensors, g.metadata
arch = meta.get("general.architecture", "")
used = meta.get(arch + ".expert_used_count", 1) / meta.get(arch + ".expert_count", 1)
weights = sum(x.nbytes * (used if "_exps." in n else 1) for n, x in t.items()
              if n != "token_embd.weight" or "output.weight" not in t)
kvd = sum(x.dims[1] for n, x in t.items() if n.endswith("attn_k.weight"))
depth, tg = int(sys.argv[2]), int(sys.argv[3])
per_value = {"f16": 2, "q8_0": 34 / 32}.get(sys.argv[4], 4)
print(int(weights + (2 * kvd * (depth + (tg + 1) / 2) * per_value if depth else 0)))' "$GGUF" "$DEPTH" "$TG" "$KV") ||
    die "$GGUF: cannot read its tensors"

timing() { sed -n "s/.*$1: \([0-9]*\) tokens* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1 \2/p" "$2"; } # -> "tokens tok/s"

# A prompt of exactly PP tokens: WORD repeated, the count corrected by what ./run reports.
PROMPT=$OUT/prompt.txt words=$((PP - 1)) n=0
for _ in 1 2 3 4; do
    yes "${WORD:-the}" | head -n $words | paste -sd' ' | tr -d '\n' > "$PROMPT"
    ./run "$BIN" -j "$THREADS" "${CTX[@]}" -t 0 -n 1 -f "$PROMPT" > /dev/null 2> "$OUT/calibrate.txt" || die "./run failed: $(tail -1 "$OUT/calibrate.txt")"
    read -r n _ < <(timing prompt "$OUT/calibrate.txt")
    [ "$n" = "$PP" ] && break
    # scaled by the tokens a word takes (a vocabulary may split it), never below one word:
    # head -n with a negative count would copy yes's endless output
    [ "${n:-0}" -gt 1 ] || die "./run reported no prompt tokens ($OUT/calibrate.txt)"
    words=$((words * (PP - 1) / (n - 1)))
    [ "$words" -ge 1 ] || die "cannot make a prompt of $PP tokens: one word already makes $n"
done
[ "$n" = "$PP" ] || die "cannot make a prompt of $PP tokens (last: $n)"

bandwidth() { # GB/s, the better of 4 KiB and 2 MiB pages
    for huge in 0 1; do "$MEMBW" -j "$THREADS" -r 3 --huge $huge 2> /dev/null; done |
        awk '$1 == "membw_best_GBps" && $2 > b { b = $2 } END { print b }'
}
llama() { # sample -> "pp tg"
    if [ "$DEPTH" -gt 0 ]; then
        local fa
        for fa in ${FA//,/ }; do
            "$BATCHED_BENCH" -m "$GGUF" -t "$THREADS" -c $((PP + TG + 16)) -npp "$PP" -ntg "$TG" -npl 1 \
                $([ "$fa" = 1 ] && echo -fa) -ctk "$KV" -ctv "$KV" > "$OUT/llama_$1_fa$fa.txt" 2> "$OUT/llama_$1_fa$fa.err" ||
                die "llama-batched-bench failed: $(tail -1 "$OUT/llama_$1_fa$fa.err")"
        done
        # the table's row: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
        awk -F'|' -v pp="$PP" '$2 + 0 == pp && NF > 10 { if ($7 > p) p = $7; if ($9 > g) g = $9; n++ }
            END { if (n) print p + 0, g + 0; else exit 1 }' "$OUT"/llama_"$1"_fa*.txt ||
            die "$OUT/llama_$1_fa*.txt: no row for a $PP-token prompt"
        return
    fi
    local tests=(-p "$PP" -n "$TG")
    "$LLAMA_BENCH" -m "$GGUF" -t "$THREADS" "${tests[@]}" -ctk "$KV" -ctv "$KV" -r 1 -o jsonl > "$OUT/llama_$1.jsonl" \
        2> "$OUT/llama_$1.err" || die "llama-bench failed: $(tail -1 "$OUT/llama_$1.err")"
    "$PYTHON" -c '
import json, sys
pp, tg = int(sys.argv[2]), int(sys.argv[3])
rows = list(map(json.loads, filter(str.strip, open(sys.argv[1]))))
f = {(r["n_prompt"], r["n_gen"]): r["avg_ts"] for r in rows}
print(f[(pp, 0)], f[(0, tg)])
' "$OUT/llama_$1.jsonl" "$PP" "$TG" || die "$OUT/llama_$1.jsonl: no pp $PP and tg $TG"
}
ours() { # sample -> "pp tg"; of the TG + 1 tokens generated, the first comes from the prompt's logits
    # and the other TG from forward passes: tg is TG ÷ the time of all of them
    local p=$OUT/ours_$1_prompt.txt g=$OUT/ours_$1_gen.txt
    if [ "$DEPTH" -gt 0 ]; then # one run: the prompt, then the generation after it
        ./run "$BIN" -j "$THREADS" "${CTX[@]}" --kv-cache "$KV" -t 0 -n $((TG + 1)) -f "$PROMPT" > /dev/null 2> "$p" ||
            die "./run failed: $(tail -1 "$p")"
        cp "$p" "$g"
    else
        ./run "$BIN" -j "$THREADS" --kv-cache "$KV" -t 0 -n 1 -f "$PROMPT" > /dev/null 2> "$p" || die "./run failed: $(tail -1 "$p")"
        ./run "$BIN" -j "$THREADS" --kv-cache "$KV" -t 0 -n $((TG + 1)) > /dev/null 2> "$g" || die "./run failed: $(tail -1 "$g")"
    fi
    read -r pn prate < <(timing prompt "$p")
    read -r gn grate < <(timing generated "$g")
    [ "$pn" = "$PP" ] || die "./run's prompt was $pn tokens, not $PP ($p)"
    [ "$gn" = $((TG + 1)) ] || echo "bench/llama_cpp.sh: ./run stopped at end-of-sequence after $gn tokens ($g)" >&2
    awk -v prate="$prate" -v gn="$gn" -v grate="$grate" 'BEGIN { print prate, grate * (gn - 1) / gn }'
}
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
our_ticks() { awk '{ print $16 + $17 }' /proc/$$/stat; } # this shell's finished children
median() { sort -g | awk '{ v[n++] = $1 } END { print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }
# "round bw llama_pp llama_tg ours_pp ours_tg pp_ratio tg_ratio llama/bnd ours/bnd [others]" as a row
show() {
    awk '{ printf "%-5s %7.2f | %9.1f %8.2f | %9.1f %8.2f | %8.3f %8.3f | %9.3f %9.3f |%s\n",
        $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, (NF > 10 ? " " $11 "%" : "") }' <<< "$1"
}

echo "bench/llama_cpp.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, $THREADS threads, $SAMPLES sample(s) a round; ./run built for $(mkvar ARCH_FLAGS) ($(./run "$BIN" -n 1 2>&1 >/dev/null | sed -n 's/.*thread[s]*, \(.*\) kernels.*/\1/p') kernels; ARCH=x86-64-v3 for AVX2)"
echo "  $GGUF: $(stat -c %s "$GGUF") bytes, $READ read a token; $BIN: $(stat -c %s "$BIN") bytes"
if [ "$DEPTH" -gt 0 ]; then
    echo "  prompt $PP tokens, then generation of $TG tokens at depth $PP; KV cache $KV, llama.cpp -fa $FA (the better); raw outputs in $OUT"
else echo "  prompt $PP tokens, generation $TG tokens from an empty cache; KV cache $KV; raw outputs in $OUT"; fi
printf '%-5s %7s | %9s %8s | %9s %8s | %8s %8s | %9s %9s | %s\n' round GB/s llama_pp llama_tg ours_pp ours_tg \
    pp_ratio tg_ratio llama/bnd ours/bnd others%
for r in $(seq "$ROUNDS"); do
    t0=$(date +%s.%N) b0=$(busy_ticks) o0=$(our_ticks)
    : > "$OUT/round_$r.txt"
    for s in $(seq "$SAMPLES"); do
        bw=$(bandwidth)
        if [ $(((r + s) % 2)) = 0 ]; then l=$(llama "$r.$s") && a=$(ours "$r.$s"); else a=$(ours "$r.$s") && l=$(llama "$r.$s"); fi || exit 1
        echo "$bw $l $a" >> "$OUT/round_$r.txt"
    done
    others=$(awk -v b=$(($(busy_ticks) - b0)) -v o=$(($(our_ticks) - o0)) -v t0="$t0" -v t1="$(date +%s.%N)" \
        -v hz="$(getconf CLK_TCK)" -v nc="$(nproc)" 'BEGIN { x = 100 * (b - o) / ((t1 - t0) * hz * nc); printf "%.0f", x < 0 ? 0 : x }')
    meds=$(for k in 1 2 3 4 5; do cut -d' ' -f$k "$OUT/round_$r.txt" | median; done | paste -sd' ')
    row=$(awk -v read="$READ" '{ b = $2 * 1e9 / read; print $0, $5 / $3, $6 / $4, $4 / b, $6 / b }' <<< "$r $meds")
    echo "$row $others" >> "$OUT/rounds.txt"
    show "$row $others"
done
# the medians over the rounds of each figure, ratio and fraction
show "med $(for k in $(seq 2 10); do cut -d' ' -f"$k" "$OUT/rounds.txt" | median; done | paste -sd' ')"
