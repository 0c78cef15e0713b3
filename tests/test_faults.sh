#!/usr/bin/env bash
# Faults during training: SIGINT and SIGTERM write a final checkpoint and exit 0; kill -9 at
# random moments never leaves a partial model file; a full disk (ulimit -f, and a small
# tmpfs where mounting is allowed) fails with one clear line and leaves the previous
# checkpoint byte for byte; a loss that turns inf/NaN stops training without overwriting.
set -u
cd "$(dirname "$0")/.."
SHARED=../shared
tmp=tests/tmp/faults.$$ # its own directory: another suite may run this script at the same time
mkdir -p $tmp
trap '[ "${failed:-1}" = 0 ] && rm -rf $tmp' EXIT # kept when something failed
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }

head -c 20000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus.txt
tiny=(--n-layer 1 --n-embd 16 --n-head 2 --batch-size 2 --block-size 16 --eval-iters 1)

# Waits (up to about a minute: only a hung or failed process takes that long) for a line
# matching pattern in file while process pid lives.
wait_for() { # file pattern pid
  for _ in $(seq 600); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# A model file is whole when ./run loads it and generates from it.
loads() { ./run "$1" -i "The " -n 2 -t 0 >/dev/null 2>&1; }

# ---- SIGINT, then SIGTERM on the resumed run
./train -d $tmp/corpus.txt -o $tmp/sig.bin "${tiny[@]}" --max-iters 1000000 --eval-interval 100000 >$tmp/sig.out 2>$tmp/sig.err &
pid=$!
if wait_for $tmp/sig.out '^iter 20/' $pid; then
  kill -INT $pid; wait $pid; rc=$?
  step=$(sed -n 's/^stopped by signal 2 at step \([0-9]*\); checkpoint written.*/\1/p' $tmp/sig.out)
  if [ $rc -eq 0 ] && [ -n "$step" ] && loads $tmp/sig.bin; then ok "SIGINT at step $step: exit 0, checkpoint written and loadable"
  else bad "SIGINT: exit $rc, step '$step', stderr: $(head -c 200 $tmp/sig.err)"; fi
  ./train -d $tmp/corpus.txt -o $tmp/sig.bin --resume >$tmp/sig2.out 2>$tmp/sig2.err &
  pid=$!
  if wait_for $tmp/sig2.out "^resuming at step $step of" $pid && wait_for $tmp/sig2.out '^iter [0-9]*0/' $pid; then
    kill -TERM $pid; wait $pid; rc=$?
    step2=$(sed -n 's/^stopped by signal 15 at step \([0-9]*\); checkpoint written.*/\1/p' $tmp/sig2.out)
    if [ $rc -eq 0 ] && [ -n "$step2" ] && [ "$step2" -gt "$step" ] && loads $tmp/sig.bin; then
      ok "SIGTERM on the resumed run at step $step2: exit 0, checkpoint written and loadable"
    else bad "SIGTERM: exit $rc, step '$step2' after $step, stderr: $(head -c 200 $tmp/sig2.err)"; fi
  else
    kill -9 $pid 2>/dev/null; bad "resume after SIGINT did not start at step $step: $(head -c 300 $tmp/sig2.err)"
  fi
else
  kill -9 $pid 2>/dev/null; bad "training did not start: $(head -c 300 $tmp/sig.err)"
fi

# ---- kill -9 at random moments, and at moments aimed inside a checkpoint write (a
# checkpoint every step; a model of 1.6 MB and a state of 5 MB so that writes take a while)
k9=("${tiny[@]}" --n-embd 128 --n-layer 2 --eval-interval 1)
./train -d $tmp/corpus.txt -o $tmp/k9.bin "${k9[@]}" --max-iters 1 >/dev/null 2>&1 || bad "the first checkpoint"
kills=12 whole=0 absent=0 mid_write=0
for i in $(seq $kills); do
  rm -f $tmp/k9.bin.tmp.* $tmp/k9.bin.state.tmp.*
  ./train -d $tmp/corpus.txt -o $tmp/k9.bin "${k9[@]}" --max-iters 1000000 --force >$tmp/k9.out 2>&1 &
  pid=$!
  if ((i % 2 == 0)); then # aimed: the moment a temporary file appears, i.e. inside a write
    target="$tmp/k9.bin.tmp.*"
    ((i % 4)) && target="$tmp/k9.bin.state.tmp.*"
    for _ in $(seq 100000); do compgen -G "$target" >/dev/null && break; kill -0 $pid 2>/dev/null || break; done
  else
    sleep "$((RANDOM % 2)).$(printf %03d $((RANDOM % 1000)))"
  fi
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  # a temporary file left behind: the kill came while a checkpoint was being written
  compgen -G "$tmp/k9.bin*.tmp.*" >/dev/null && mid_write=$((mid_write + 1))
  if [ ! -e $tmp/k9.bin ]; then absent=$((absent + 1))
  elif loads $tmp/k9.bin; then whole=$((whole + 1))
  else cp $tmp/k9.bin $tmp/k9_partial_$i.bin; fi
done
if [ $((whole + absent)) -eq $kills ]; then
  ok "kill -9 at $kills moments (every second aimed at a write), $mid_write of them during a checkpoint write: the model file was whole every time ($absent times not yet written)"
else
  bad "kill -9: $((kills - whole - absent)) of $kills kills left a model file ./run refuses (kept as $tmp/k9_partial_*.bin)"
fi
# the resume state written beside it is whole as well: --resume starts from it
./train -d $tmp/corpus.txt -o $tmp/k9.bin --resume >$tmp/k9r.out 2>$tmp/k9r.err &
pid=$!
if [ -e $tmp/k9.bin.state ]; then
  if wait_for $tmp/k9r.out '^resuming at step' $pid; then ok "--resume after the last kill -9: $(grep -m1 '^resuming' $tmp/k9r.out)"
  else bad "--resume after kill -9: $(head -c 300 $tmp/k9r.err)"; fi
fi
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null

# ---- a full disk: the previous checkpoint stays as it was
# first a checkpoint, then a run that must fail to write the next one
disk_full() { # what, directory, command prefix...
  local what=$1 dir=$2; shift 2
  ./train -d $tmp/corpus.txt -o $dir/full.bin "${tiny[@]}" --max-iters 2 --eval-interval 2 --force >/dev/null 2>&1 ||
    { bad "$what: the first checkpoint could not be written"; return; }
  cp $dir/full.bin $tmp/full_before.bin && cp $dir/full.bin.state $tmp/full_before.state
  "$@" ./train -d $tmp/corpus.txt -o $dir/full.bin "${tiny[@]}" --n-embd 32 --max-iters 4 --eval-interval 2 --seed 7 --force \
    >$tmp/full.out 2>$tmp/full.err
  local rc=$?
  if [ $rc -eq 1 ] && [ "$(wc -l <$tmp/full.err)" -eq 1 ] && grep -q "cannot write: .*the previous checkpoint is intact" $tmp/full.err &&
     cmp -s $dir/full.bin $tmp/full_before.bin && cmp -s $dir/full.bin.state $tmp/full_before.state && loads $dir/full.bin; then
    ok "$what: '$(cat $tmp/full.err)'; model and state unchanged"
  else
    bad "$what: exit $rc, stderr: $(head -c 300 $tmp/full.err); model unchanged: $(cmp -s $dir/full.bin $tmp/full_before.bin && echo yes || echo no)"
  fi
}
limit_files() { (ulimit -f 64 && "$@"); } # 64 KiB: the first run's files fit, the second's state does not
disk_full "ulimit -f 64" $tmp limit_files
mkdir -p $tmp/disk
trap 'umount $tmp/disk 2>/dev/null; [ "${failed:-1}" = 0 ] && rm -rf $tmp' EXIT
if mount -t tmpfs -o size=160k tmpfs $tmp/disk 2>/dev/null; then
  disk_full "a 160 KiB tmpfs" $tmp/disk env
  umount $tmp/disk
else
  echo "skipped: the tmpfs full-disk case (mounting needs root); ulimit -f covers the write failure"
fi

# ---- a loss that overflows: learning rate 10 and weight decay 100 multiply the weights by
# -999 a step; training must stop before writing anything over the good checkpoint.
./train -d $tmp/corpus.txt -o $tmp/nan.bin "${tiny[@]}" --max-iters 3 --eval-interval 3 >/dev/null 2>&1
cp $tmp/nan.bin $tmp/nan_before.bin && cp $tmp/nan.bin.state $tmp/nan_before.state
./train -d $tmp/corpus.txt --init $tmp/nan.bin -o $tmp/nan.bin --force "${tiny[@]}" --lr 10 --min-lr 10 --weight-decay 100 \
  --warmup-iters 0 --max-iters 1000 --eval-interval 500 >$tmp/nan.out 2>$tmp/nan.err
rc=$?
if [ $rc -eq 1 ] && grep -qE "loss is (inf|-inf|nan|-nan) at step [0-9]+: training diverged; stopping without overwriting" $tmp/nan.err &&
   cmp -s $tmp/nan.bin $tmp/nan_before.bin && cmp -s $tmp/nan.bin.state $tmp/nan_before.state; then
  ok "diverging loss: '$(cat $tmp/nan.err)'; checkpoint unchanged"
else
  bad "diverging loss: exit $rc, stderr: $(head -c 300 $tmp/nan.err)"
fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
