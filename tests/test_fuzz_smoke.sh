#!/usr/bin/env bash
# The fuzz targets as a smoke test: every input in tests/fuzz/regressions/ (each one crashed
# a target once) replays cleanly, and each target runs a few seconds from its seeds without
# a finding. Long runs are `make fuzz FUZZ_SECONDS=N`; docs/ROBUSTNESS.md has the numbers.
set -u
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SMOKE_SECONDS:-3}
if [ -n "${ATTN_ASAN_SUITE:-}" ]; then
  echo "skipped under make test-asan: the fuzz targets are built with ASan and UBSan already"
  echo "0 passed, 0 failed"
  exit 0
fi
if ! command -v "${FUZZ_CC:-clang}" >/dev/null; then
  echo "skipped: no clang (libFuzzer); install Debian's clang to run the fuzz targets"
  echo "0 passed, 0 failed"
  exit 0
fi
mkdir -p tests/fuzz/tmp
make -s --no-print-directory fuzz-build >tests/fuzz/tmp/build.log 2>&1 || {
  cat tests/fuzz/tmp/build.log; echo "FAIL: make fuzz-build"; echo "0 passed, 1 failed"; exit 1; }
F=tests/fuzz/tmp
passed=0 failed=0
for t in model tokenizer sampler learn; do
  bin=$F/bin/fuzz_$t
  regressions=(tests/fuzz/regressions/$t/*)
  if [ -e "${regressions[0]}" ]; then
    if "$bin" "${regressions[@]}" >$F/smoke_$t.$$.log 2>&1; then
      passed=$((passed + 1)); echo "ok: fuzz_$t replays ${#regressions[@]} regression inputs"
    else
      failed=$((failed + 1)); echo "FAIL: fuzz_$t on a regression input:"; grep -E 'fuzz check|ERROR|SUMMARY|Running' $F/smoke_$t.$$.log | tail -5
    fi
  fi
  corpus=$F/smoke_corpus.$$ # its own: another suite may run this at the same time
  rm -rf $corpus && mkdir -p $corpus $F/smoke_crashes
  if "$bin" $corpus $F/seeds/$t -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=20 \
       -artifact_prefix=$F/smoke_crashes/$t- -print_final_stats=1 >$F/smoke_$t.$$.log 2>&1; then
    passed=$((passed + 1))
    echo "ok: fuzz_$t for ${SECONDS_EACH} s ($(sed -n 's/^stat::number_of_executed_units: *//p' $F/smoke_$t.$$.log) executions)"
  else
    failed=$((failed + 1))
    echo "FAIL: fuzz_$t found a crash:"; grep -E 'fuzz check|ERROR|SUMMARY|Test unit written' $F/smoke_$t.$$.log | tail -5
  fi
done
rm -rf $corpus
((failed)) || rm -f $F/smoke_*.$$.log
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
