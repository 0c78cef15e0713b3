#!/usr/bin/env bash
# Data-parallel training across a network: two hosts made as network namespaces joined by a veth
# pair (tests/netns_hosts.sh), mpirun entering each through an `ip netns exec` agent, and MPI
# over TCP between 10.77.0.1 and 10.77.0.2 only. `-np 2 --grad-accum 1`, one rank on each host,
# must train what one process trains with --grad-accum 2: the same loss at every step (1e-5
# relative) and the same final weights (1e-5), for a small GPT and a small Llama. The ranks'
# gradients must have crossed the veth, and the namespaces must have no route out.
# Needs root for `ip netns`; skipped, saying why, where that is not permitted.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
SHARED=../shared
skip() {
  echo "skipped: $1"
  echo "0 passed, 0 failed"
  exit 0
}
[ -n "${ATTN_ASAN_SUITE:-}" ] && skip "under make test-asan: Open MPI's own allocations are not sanitizer-clean; tests/test_mpi.sh covers the MPI build"
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

head -c 30000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus.txt
small="--n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --batch-size 4 --max-iters 50 --eval-interval 25
  --eval-iters 2 --seed 7 --lr 3e-3 --warmup-iters 5"

# Losses at every step and every tensor: one line saying how far apart, status 1 beyond 1e-5.
compare() { # one two
  "$PYTHON" - "$1" "$2" <<'PY'
import csv, sys
import numpy as np
sys.path.insert(0, "tools")
import modelfile
a, b = sys.argv[1:]
la = [float(r["train_loss"]) for r in csv.DictReader(open(a + ".csv"))]
lb = [float(r["train_loss"]) for r in csv.DictReader(open(b + ".csv"))]
if len(la) != len(lb) or not la:
    sys.exit(f"{len(la)} steps logged against {len(lb)}")
loss_rel = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
_, _, ta = modelfile.read_model(a)[:3]
_, _, tb = modelfile.read_model(b)[:3]
if ta.keys() != tb.keys():
    sys.exit("different tensors")
# The key bias has no gradient in exact arithmetic (it shifts a query's scores by one constant,
# which softmax ignores): AdamW moves it by the rounding noise of a zero, which any change in
# summation order changes. Every other tensor must agree.
w = max(float(np.max(np.abs(ta[k] - tb[k]))) for k in ta if not k.endswith(".bk"))
print(f"{len(la)} steps, losses within {loss_rel:.2e} relative, weights within {w:.2e}")
sys.exit(loss_rel > 1e-5 or w > 1e-5)
PY
}

for arch in gpt llama; do
  flags="--arch $arch $small"
  [ $arch = llama ] && flags+=" --n-kv-head 1"
  OMP_NUM_THREADS=1 ./train -d $tmp/corpus.txt -o $tmp/one_$arch.bin $flags --grad-accum 2 >$tmp/one_$arch.log 2>&1 ||
    { fail "$arch: one process: $(tail -n 1 $tmp/one_$arch.log)"; continue; }
  tx0=$(netns_tx_bytes)
  # The model's path in the namespaces is the same: they share the file system.
  netns_mpirun -x OMP_NUM_THREADS=1 $TRAIN_MPI -d $tmp/corpus.txt -o $tmp/two_$arch.bin $flags --grad-accum 1 \
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
  params=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tools"); import modelfile
print(sum(t.size for t in modelfile.read_model(sys.argv[1])[2].values()))' $tmp/one_$arch.bin)
  if [ "$sent" -ge $((50 * 4 * params)) ]; then
    ok "$arch: $sent bytes left host a over the veth (50 steps x 4 x $params parameters at least)"
  else
    fail "$arch: only $sent bytes left host a over the veth, fewer than 50 steps x 4 x $params parameters"
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
