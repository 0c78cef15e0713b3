#!/usr/bin/env bash
# Data-parallel training across a network: two hosts made as network namespaces joined by a veth
# pair (tests/netns_hosts.sh), mpirun entering each through an `ip netns exec` agent, and MPI
# over TCP between 10.77.0.1 and 10.77.0.2 only. `-np 2 --grad-accum 2`, one rank on each host,
# must train what one process trains with --grad-accum 4: the same loss at every step (1e-5
# relative) and the same final weights (1e-5), for tests/test_mpi.py's small GPT and Llama. The ranks'
# gradients must have crossed the veth, and the namespaces must have no route out.
# Needs root for `ip netns`; skipped, saying why, where that is not permitted.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
SHARED=../shared
skip() {
  failed=0 # nothing to keep
  echo "skipped: $1"
  echo "0 passed, 0 failed"
  exit 0
}
[ -n "${ATTN_ASAN_SUITE:-}" ] && skip "under make test-asan: the network is all this test adds to tests/test_mpi.py, which runs the sanitized MPI build"
tmp=tests/tmp/mpi_netns.$$ # its own directory: another suite may run this script at the same time
mkdir -p $tmp
. tests/netns_hosts.sh
trap 'netns_down; [ "${failed:-1}" = 0 ] && rm -rf $tmp' EXIT
trap 'exit 1' INT TERM HUP
netns_up $tmp || skip "$NETNS_WHY"
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }

# The MPI build of ./train (the Makefile's tests/bin/train_mpi), beside the single-process ./train.
TRAIN_MPI=tests/bin/train_mpi
if ! make -s --no-print-directory train $TRAIN_MPI >$tmp/build.txt 2>&1; then
  echo "FAIL: make train $TRAIN_MPI: $(tail -n 3 $tmp/build.txt)"
  echo "0 passed, 1 failed"
  exit 1
fi

# The training of tests/test_mpi.py (its options, and its comparison: every logged loss within
# 1e-5 relative, the final weights within 1e-5), there on one machine, here across the two hosts.
head -c 100000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus.txt
test_mpi() { # python lines, with test_mpi imported as t
  "$PYTHON" -c "import sys; sys.path.insert(0, 'tests'); import test_mpi as t; $1" "${@:2}"
}
compare() { # two-rank run, one-process run
  test_mpi 'bad = t.compare_runs(sys.argv[1], sys.argv[2])
print("; ".join(bad[:3]) if bad else ", ".join("%s within %.2g" % kv for kv in sorted(t.WORST.items())))
sys.exit(bool(bad))' "$@"
}

steps=$(test_mpi 'print(t.STEPS)')
for arch in gpt llama; do
  flags=$(test_mpi 'print(" ".join(t.OPTS + t.ARCH_OPTS[sys.argv[1]]))' $arch)
  OMP_NUM_THREADS=1 ./train -d $tmp/corpus.txt -o $tmp/one_$arch.bin $flags --grad-accum 4 >$tmp/one_$arch.log 2>&1 ||
    { fail "$arch: one process: $(tail -n 1 $tmp/one_$arch.log)"; continue; }
  tx0=$(netns_tx_bytes)
  # The model's path in the namespaces is the same: they share the file system.
  netns_mpirun -x OMP_NUM_THREADS=1 $TRAIN_MPI -d $tmp/corpus.txt -o $tmp/two_$arch.bin $flags --grad-accum 2 \
    >$tmp/two_$arch.log 2>&1 || { fail "$arch: mpirun -np 2 across the namespaces: $(tail -n 3 $tmp/two_$arch.log)"; continue; }
  sent=$(($(netns_tx_bytes) - tx0))
  if grep -q "2 ranks" $tmp/two_$arch.log && [ "$(grep -c 'done: [0-9]* steps' $tmp/two_$arch.log)" = 1 ]; then
    ok "$arch: rank 0 alone speaks, and its lines count 2 ranks"
  else
    fail "$arch: rank 0's output should say '2 ranks' and close with one 'done:' line: $(head -n 2 $tmp/two_$arch.log)"
  fi
  if r=$(compare $tmp/two_$arch.bin $tmp/one_$arch.bin 2>&1); then
    ok "$arch: -np 2 over TCP equals one process with twice the accumulation: $r"
  else
    fail "$arch: -np 2 over TCP against one process: $r"
  fi
  # Each step each rank sends half the gradients (reduce-scatter) and half the weights
  # (all-gather): 4 bytes per parameter per step from host a alone.
  params=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tools"); from attn import modelfile
print(sum(t.size for t in modelfile.read_model(sys.argv[1])[2].values()))' $tmp/one_$arch.bin)
  if [ "$sent" -ge $((steps * 4 * params)) ]; then
    ok "$arch: $sent bytes left host a over the veth ($steps steps x 4 x $params parameters at least)"
  else
    fail "$arch: only $sent bytes left host a over the veth, fewer than $steps steps x 4 x $params parameters"
  fi
done

# Nothing can leave the pair: each namespace routes only the veth's own subnet.
routes=$(ip -n $NETNS_A route show; ip -n $NETNS_B route show)
if [ "$(echo "$routes" | grep -vc "^$NETNS_NET ")" = 0 ]; then
  ok "the namespaces route only $NETNS_NET"
else
  fail "the namespaces have other routes: $routes"
fi
echo "$passed passed, $failed failed"
((failed == 0))
