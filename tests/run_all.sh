#!/usr/bin/env bash
# Runs every C test binary and Python and shell test in tests/, TEST_JOBS (2) at a time, and
# closes on one 'N passed, N failed' line counting test programs. Each test's output is kept
# until it ends and then printed whole, closed by '--- TEST: N s (cpu N s)' (wall and user +
# system seconds). Tests run side by side, so each writes only to paths of its own; their
# OpenMP threads wait passively, so a busy second core does not stall them.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
PYTHON=${PYTHON:-/usr/bin/python3}
JOBS=${TEST_JOBS:-2}
# The tests' own make calls (tok_cli, the fuzz targets) run one job: a make -j above this
# script does not hand its job slots down to them (they would warn and fall back to one).
MAKEFLAGS=$(sed -E 's/(^| )-j[0-9]*( |$)/ /; s/ ?--jobserver-(auth|fds)=[^ ]*//' <<<"${MAKEFLAGS:-}")
# Under make test-asan (ATTN_ASAN_SUITE) what runs sanitized C code is run again; these test
# the Python tools, the Makefile or the docs alone (no ./run, ./train or tests/bin program),
# so they are skipped there.
NO_C_CODE="tests/test_convert.py tests/test_outputs.py tests/test_plot.py tests/test_gguf.py \
  tests/test_output_policy.py tests/test_safe_pickle.py tests/test_cli_endings.py tests/test_quantize.py \
  tests/test_tools_layout.py tests/test_doc_links.py tests/test_make_deps.sh"
mkdir -p tests/tmp
logs=$(mktemp -d tests/tmp/run_all.XXXXXX)
# The longest first (a few minutes against seconds; the plain suite's, then the sanitized one's),
# so that the rest fill the other core and none of them is left to run alone at the end.
tests=()
for t in tests/test_parity.py tests/test_fuzz_smoke.sh tests/test_bad_inputs.sh tests/test_chat_template.py \
  tests/test_train_signals.py tests/bin/test_kernels_isa_x86-64 tests/test_export_hf.py tests/test_convert.py \
  tests/test_attention.py tests/test_output_policy.py tests/test_valgrind.sh tests/bin/test_* tests/test_*.py \
  tests/test_*.sh; do
  [ -e "$t" ] && [[ " ${tests[*]} " != *" $t "* ]] && tests+=("$t")
done

# Each test in its own process group (set -m), so that an interrupted run can stop them all.
set -m
declare -A running=() # pid -> test
trap 'for p in "${!running[@]}"; do kill -TERM -- -"$p" 2>/dev/null; done; rm -rf "$logs"; exit 130' INT TERM
start() {
  local t=$1 log=$logs/${1//\//_}
  case "$t" in
    *.py) cmd=("$PYTHON" "$t") ;;
    *.sh) cmd=(bash "$t") ;;
    *) cmd=("$t") ;;
  esac
  (
    TIMEFORMAT='%R %U %S'
    { time "${cmd[@]}" >"$log.out" 2>&1 </dev/null; } 2>"$log.time"
  ) &
  running[$!]=$t
}

# finish PID STATUS: the test's output, its times, and its count.
passed=0 failed=0 failures=()
finish() {
  local t=${running[$1]}
  local log=$logs/${t//\//_}
  unset "running[$1]"
  echo "=== $t"
  cat "$log.out"
  awk -v t="$t" '{ printf "--- %s: %.0f s (cpu %.0f s)\n", t, $1, $2 + $3 }' "$log.time"
  if [ "$2" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$t"); fi
}

for t in "${tests[@]}"; do
  if [ -n "${ATTN_ASAN_SUITE:-}" ] && [[ " $NO_C_CODE " == *" $t "* ]]; then
    echo "=== $t: skipped under make test-asan: runs no C code"
    continue
  fi
  while ((${#running[@]} >= JOBS)); do
    wait -n -p pid "${!running[@]}"
    finish "$pid" $?
  done
  start "$t"
done
while ((${#running[@]})); do
  wait -n -p pid "${!running[@]}"
  finish "$pid" $?
done
rm -rf "$logs"
((failed)) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
