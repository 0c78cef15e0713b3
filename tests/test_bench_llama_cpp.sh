#!/usr/bin/env bash
# bench/llama_cpp.sh against stand-ins for llama-bench and bench/membw.c whose figures are
# known (the real membw pages through 1 GiB a dozen times, and that load slows the tests that
# run beside this one): every printed figure must follow from the raw outputs (each round the
# median of its samples, the ratios ours ÷ llama.cpp, the fractions of the read bound), the two
# programs must take turns going first, and a llama-bench that fails or is missing must end the
# script with one line.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=tests/tmp/bench_llama_cpp
rm -rf "$tmp" && mkdir -p "$tmp"
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
gguf=../shared/models/gguf/rand256-Q4_0.gguf

# llama-bench's jsonl: a pp test and a tg test, at 100 and 40 tokens/s; each call is logged.
fake=$tmp/llama-bench
cat > "$fake" << EOF
#!/usr/bin/env bash
echo "\$*" >> $tmp/llama_calls.txt
pp=\$(echo "\$*" | sed 's/.* -p \([0-9]*\) .*/\1/')
echo "{\"n_prompt\": \$pp, \"n_gen\": 0, \"avg_ts\": 100.0}"
echo '{"n_prompt": 0, "n_gen": 8, "avg_ts": 40.0}'
EOF
chmod +x "$fake"
# membw: 30 GB/s in 4 KiB pages, 32 in 2 MiB pages (the bench takes the better).
printf '#!/usr/bin/env bash\ncase "$*" in *"--huge 1"*) echo membw_best_GBps 32.00 ;; *) echo membw_best_GBps 30.00 ;; esac\n' > "$tmp/membw"
chmod +x "$tmp/membw"
export MEMBW=$tmp/membw

PP=16 TG=8 SAMPLES=3 BIN=$tmp/rand256.bin OUT=$tmp/out bench/llama_cpp.sh "$fake" $gguf 2 > "$tmp/stdout.txt" 2> "$tmp/stderr.txt"
rc=$?
[ $rc = 0 ] && ok "ran (exit 0)" || bad "exit $rc: $(tail -3 "$tmp/stderr.txt")"
grep -q -- "-m $gguf -t 2 -p 16 -n 8 -ctk f16 -ctv f16 -r 1 -o jsonl" "$tmp/llama_calls.txt" && [ "$(wc -l < "$tmp/llama_calls.txt")" = 6 ] &&
    ok "llama-bench called 6 times with the model, threads, pp and tg, and ./run's cache type" || bad "llama-bench calls: $(head -2 "$tmp/llama_calls.txt")"

# Every figure recomputed from the raw outputs.
"$PYTHON" - "$tmp" << 'EOF' && ok "the printed figures follow from the raw outputs" || bad "the printed figures"
import re, statistics, sys
tmp = sys.argv[1]
sys.path.insert(0, "tools")
from attn.gguf_file import GGUFFile
t = GGUFFile("../shared/models/gguf/rand256-Q4_0.gguf").tensors
read = sum(x.nbytes for n, x in t.items() if n != "token_embd.weight" or "output.weight" not in t)
lines = open(tmp + "/stdout.txt").read().splitlines()
rounds = [l for l in lines if re.match(r"^[12] ", l)]
assert len(rounds) == 2 and lines[-1].startswith("med"), lines
assert "%d read a token" % read in lines[1], lines[1]
def rate(path, what): # tokens, tokens/s
    n, r = re.search(what + r": (\d+) tokens? in [0-9.]+ s \(([0-9.]+) tok/s\)", open(path).read()).groups()
    return int(n), float(r)
printed = []
for r, line in zip((1, 2), rounds):
    samples = [l.split() for l in open("%s/out/round_%d.txt" % (tmp, r))]
    assert len(samples) == 3, samples
    for s, row in enumerate(samples, 1):
        n, tps = rate("%s/out/ours_%d.%d_prompt.txt" % (tmp, r, s), "prompt")
        assert n == 16 and abs(float(row[3]) - tps) <= 1e-3 * tps, (row, n, tps)
        n, tps = rate("%s/out/ours_%d.%d_gen.txt" % (tmp, r, s), "generated")  # 8 passes of 9 tokens' time
        assert n == 9 and abs(float(row[4]) - tps * 8 / 9) <= 1e-3 * tps, (row, n, tps)
        assert row[:3] == ["32.00", "100.0", "40.0"], row
    med = [statistics.median(float(x[k]) for x in samples) for k in range(5)]
    f = [float(x) for x in line.replace("|", " ").replace("%", " ").split()]
    bound = med[0] * 1e9 / read
    want = [r, med[0], 100, 40, med[3], med[4], med[3] / 100, med[4] / 40, 40 / bound, med[4] / bound]
    for got, exp in zip(f, want):
        assert abs(got - exp) <= 0.006 * abs(exp) + 0.006, (line, want)
    printed.append(f)
m = [float(x) for x in lines[-1][3:].replace("|", " ").split()]
for k in range(1, 10):
    exp = statistics.median(p[k] for p in printed)
    assert abs(m[k - 1] - exp) <= 0.006 * abs(exp) + 0.006, (lines[-1], k, exp)
EOF

# Turns: in round r, sample s, llama.cpp goes first when r + s is even. The stand-in writes its
# output at once, ./run its timings as it ends: whichever file is older ran first.
turns=0
for r in 1 2; do
    for s in 1 2 3; do
        first=$(awk -v l="$(stat -c %.9Y "$tmp/out/llama_$r.$s.jsonl")" -v a="$(stat -c %.9Y "$tmp/out/ours_$r.${s}_gen.txt")" \
            'BEGIN { print (l < a) ? "llama" : "ours" }')
        [ "$first" = "$([ $(((r + s) % 2)) = 0 ] && echo llama || echo ours)" ] && turns=$((turns + 1))
    done
done
[ $turns = 6 ] && ok "the programs take turns going first" || bad "turns: $turns of 6 samples in the expected order"

# A word of several tokens (6 in this vocabulary): the prompt is scaled to PP tokens, where the
# count once went below zero and head copied yes's endless output to the disk (files capped
# here at 1 MiB).
(ulimit -f 1024 && WORD=zqxjv PP=19 TG=8 SAMPLES=1 BIN=$tmp/rand256.bin OUT=$tmp/out_word bench/llama_cpp.sh "$fake" $gguf 1 \
    > /dev/null 2> "$tmp/err_word.txt")
rc=$?
n=$(sed -n 's/.*prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/out_word/calibrate.txt" 2> /dev/null)
[ $rc = 0 ] && [ "$n" = 19 ] && ok "a word of several tokens makes a prompt of PP tokens" ||
    bad "a word of several tokens: exit $rc, prompt $n tokens: $(tail -1 "$tmp/err_word.txt")"

# DEPTH: llama-batched-bench from beside llama-bench, once per -fa setting, the better of each
# figure (S_PP from -fa 0's 150 against 120, S_TG from -fa 1's 35 against 30); ours from one
# run, its prompt and the generation after it.
cat > "$tmp/llama-batched-bench" << EOF
#!/usr/bin/env bash
echo "\$*" >> $tmp/batched_calls.txt
case "\$*" in *" -fa "*) s="120.00 |    1.000 |    35.00" ;; *) s="150.00 |    1.000 |    30.00" ;; esac
echo "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |"
echo "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|"
echo "|    24 |      8 |    1 |     32 |    0.200 |  \$s |    1.200 |    26.67 |"
EOF
chmod +x "$tmp/llama-batched-bench"
DEPTH=24 TG=8 SAMPLES=1 BIN=$tmp/rand256.bin OUT=$tmp/out_depth bench/llama_cpp.sh "$fake" $gguf 1 \
    > "$tmp/stdout_depth.txt" 2> "$tmp/err_depth.txt"
rc=$?
read -r _ _ lpp ltg opp _ < <(grep '^1 ' "$tmp/stdout_depth.txt" | tr -d '|')
want=$(sed -n 's/.*prompt: 24 tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' "$tmp/out_depth/ours_1.1_prompt.txt" 2> /dev/null)
calls=$(grep -c -- "-c 48 -npp 24 -ntg 8 -npl 1" "$tmp/batched_calls.txt" 2> /dev/null)
if [ $rc = 0 ] && [ "$lpp $ltg" = "150.0 35.00" ] && [ -n "$want" ] && [ "$opp" = "$(printf %.1f "$want")" ] &&
    [ "$calls" = 2 ] && [ "$(grep -c -- " -fa " "$tmp/batched_calls.txt")" = 1 ]; then
    ok "DEPTH: llama-batched-bench with and without -fa, the better of each figure"
else
    bad "DEPTH: exit $rc, llama $lpp $ltg, ours $opp (want $want), $calls calls: $(tail -1 "$tmp/err_depth.txt")"
fi

# A llama-bench that fails, or is not there: one line, exit 1.
printf '#!/usr/bin/env bash\necho "error: failed to load model" >&2\nexit 1\n' > "$tmp/broken"
chmod +x "$tmp/broken"
for case in "$tmp/broken:llama-bench failed: error: failed to load model" "$tmp/absent:$tmp/absent: not an executable"; do
    PP=16 TG=8 BIN=$tmp/rand256.bin OUT=$tmp/out_bad bench/llama_cpp.sh "${case%%:*}" $gguf 1 > /dev/null 2> "$tmp/err.txt"
    rc=$?
    if [ $rc = 1 ] && [ "$(cat "$tmp/err.txt")" = "bench/llama_cpp.sh: ${case#*:}" ]; then
        ok "${case%%:*}: one line, exit 1"
    else
        bad "${case%%:*}: exit $rc: $(head -3 "$tmp/err.txt")"
    fi
done

echo "$passed passed, $failed failed"
[ $failed = 0 ]
