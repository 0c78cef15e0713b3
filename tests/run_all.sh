#!/usr/bin/env bash
# Runs every C test binary and Python test in tests/, with few threads (the machines are
# shared 2-core boxes), and closes on one 'N passed, N failed' line counting test programs.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p tests/tmp
passed=0 failed=0 failures=()
for t in tests/bin/test_* tests/test_*.py tests/test_*.sh; do
  [ -e "$t" ] || continue
  echo "=== $t"
  case "$t" in
    *.py) cmd=("$PYTHON" "$t") ;;
    *.sh) cmd=(bash "$t") ;;
    *) cmd=("$t") ;;
  esac
  start=$(date +%s)
  if "${cmd[@]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$t"); fi
  echo "--- $t: $(( $(date +%s) - start )) s"
done
((failed)) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
