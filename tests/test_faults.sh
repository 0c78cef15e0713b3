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

# ---- SIGINT, then SIGTERM on the resumed run. A script's background job starts with SIGINT
# ignored (POSIX shells without job control do so), which ./train keeps, as it keeps nohup's
# SIGHUP: env gives it SIGINT's default action back, as a terminal's foreground job has.
env --default-signal=INT ./train -d $tmp/corpus.txt -o $tmp/sig.bin "${tiny[@]}" --max-iters 1000000 --eval-interval 100000 >$tmp/sig.out 2>$tmp/sig.err &
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
# --resume rewrites the log without the rows after the checkpoint: when that cannot be written
# (here a log of more than 1 KiB under ulimit -f 1), the run stops and the old log is whole.
./train -d $tmp/corpus.txt -o $tmp/log.bin "${tiny[@]}" --max-iters 40 --eval-interval 1 --force >/dev/null 2>&1 ||
  bad "a log of 40 rows could not be written"
cp $tmp/log.bin.csv $tmp/log_before.csv
(ulimit -f 1 && ./train -d $tmp/corpus.txt -o $tmp/log.bin --resume --max-iters 41) >/dev/null 2>$tmp/log.err
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <$tmp/log.err)" -eq 1 ] && grep -q "log.bin.csv: cannot write: File too large" $tmp/log.err &&
   [ "$(stat -c %s $tmp/log_before.csv)" -gt 1024 ] && cmp -s $tmp/log.bin.csv $tmp/log_before.csv; then
  ok "--resume whose log cannot be rewritten: '$(cat $tmp/log.err)'; the log unchanged"
else
  bad "--resume whose log cannot be rewritten: exit $rc, stderr: $(head -c 300 $tmp/log.err); log unchanged: $(cmp -s $tmp/log.bin.csv $tmp/log_before.csv && echo yes || echo no)"
fi
mkdir -p $tmp/disk
trap 'umount $tmp/disk 2>/dev/null; [ "${failed:-1}" = 0 ] && rm -rf $tmp' EXIT
if mount -t tmpfs -o size=160k tmpfs $tmp/disk 2>/dev/null; then
  disk_full "a 160 KiB tmpfs" $tmp/disk env
  umount $tmp/disk
else
  echo "skipped: the tmpfs full-disk case (mounting needs root); ulimit -f covers the write failure"
fi

# ---- a loss that overflows: learning rate 10 and weight decay 100 multiply the weights by
# -999 a step; training must stop before writing anything over the good checkpoint, which is
# the run's own of step 0 (the --init weights, so the model file's bytes are the same).
./train -d $tmp/corpus.txt -o $tmp/nan.bin "${tiny[@]}" --max-iters 3 --eval-interval 3 >/dev/null 2>&1
cp $tmp/nan.bin $tmp/nan_before.bin
./train -d $tmp/corpus.txt --init $tmp/nan.bin -o $tmp/nan.bin --force "${tiny[@]}" --lr 10 --min-lr 10 --weight-decay 100 \
  --warmup-iters 0 --max-iters 1000 --eval-interval 500 >$tmp/nan.out 2>$tmp/nan.err
rc=$?
if [ $rc -eq 1 ] && grep -qE "loss is (inf|-inf|nan|-nan) at step [0-9]+: training diverged; stopping without overwriting" $tmp/nan.err &&
   cmp -s $tmp/nan.bin $tmp/nan_before.bin && ./run --verify $tmp/nan.bin.state | grep -q "resume state, step 0)$"; then
  ok "diverging loss: '$(cat $tmp/nan.err)'; checkpoint unchanged"
else
  bad "diverging loss: exit $rc, stderr: $(head -c 300 $tmp/nan.err)"
fi

# ---- what a new user broke in one afternoon (docs/ROBUSTNESS.md has the list)
# An existing model is refused without --resume or --force, byte for byte unchanged; --force replaces it.
./train -d $tmp/corpus.txt -o $tmp/keep.bin "${tiny[@]}" --max-iters 4 --eval-interval 4 >/dev/null 2>&1
cp $tmp/keep.bin $tmp/keep_before.bin
./train -d $tmp/corpus.txt -o $tmp/keep.bin "${tiny[@]}" --max-iters 4 >/dev/null 2>$tmp/keep.err
rc=$?
if [ $rc -eq 1 ] && grep -q "keep.bin exists: 4 steps of training; use --resume" $tmp/keep.err && cmp -s $tmp/keep.bin $tmp/keep_before.bin &&
   ./train -d $tmp/corpus.txt -o $tmp/keep.bin "${tiny[@]}" --max-iters 2 --eval-interval 2 --force >/dev/null 2>&1 &&
   ! cmp -s $tmp/keep.bin $tmp/keep_before.bin && loads $tmp/keep.bin; then
  ok "an existing model: refused and unchanged without --force ('$(cat $tmp/keep.err)'); replaced with --force"
else bad "an existing model: exit $rc, $(head -c 300 $tmp/keep.err)"; fi

# Outputs that are not regular files stay what they were: a character device made with mknod in
# this test's own directory, for ./train and tools/convert.py.
if mknod $tmp/dev c 1 3 2>/dev/null; then
  ./train -d $tmp/corpus.txt -o $tmp/dev "${tiny[@]}" --max-iters 2 >/dev/null 2>$tmp/dev.err; rc1=$?
  "${PYTHON:-/usr/bin/python3}" tools/convert.py $tmp/keep.bin $tmp/dev >/dev/null 2>$tmp/dev2.err; rc2=$?
  if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && [ -c $tmp/dev ] && grep -q "is a character device" $tmp/dev.err &&
     ! compgen -G "$tmp/dev*.tmp*" >/dev/null && ! compgen -G "$tmp/.tmp*" >/dev/null; then
    ok "-o a character device: train and convert.py refuse, the node is still a device ('$(cat $tmp/dev.err)')"
  else bad "-o a character device: exits $rc1 $rc2, $(ls -l $tmp/dev): $(cat $tmp/dev.err $tmp/dev2.err | head -c 300)"; fi
fi

# Two trainers on one output: the second refuses, naming the first's pid; the first is unharmed.
env --default-signal=INT ./train -d $tmp/corpus.txt -o $tmp/two.bin "${tiny[@]}" --max-iters 1000000 --eval-interval 50 >$tmp/two1.out 2>&1 &
pid=$!
if wait_for $tmp/two1.out '^iter 10/' $pid; then
  ./train -d $tmp/corpus.txt -o $tmp/two.bin "${tiny[@]}" --force >/dev/null 2>$tmp/two2.err; rc=$?
  kill -INT $pid; wait $pid; rc1=$?
  if [ $rc -eq 1 ] && grep -q "two.bin is being written by another ./train (pid $pid)" $tmp/two2.err && [ $rc1 -eq 0 ] &&
     grep -q '^stopped by signal 2' $tmp/two1.out && loads $tmp/two.bin && [ ! -e $tmp/two.bin.lock ]; then
    ok "two trainers on one -o: '$(cat $tmp/two2.err)'; the first ran on and stopped cleanly"
  else bad "two trainers: second exit $rc, first exit $rc1: $(head -c 300 $tmp/two2.err)"; fi
else kill -9 $pid 2>/dev/null; bad "two trainers: the first did not start"; fi

# SIGHUP (a closed terminal) checkpoints like SIGINT; a closed stdout (| head) checkpoints, says
# so on stderr and exits non-zero.
./train -d $tmp/corpus.txt -o $tmp/hup.bin "${tiny[@]}" --max-iters 1000000 --eval-interval 100000 >$tmp/hup.out 2>&1 &
pid=$!
if wait_for $tmp/hup.out '^iter 20/' $pid; then
  kill -HUP $pid; wait $pid; rc=$?
  if [ $rc -eq 0 ] && grep -q '^stopped by signal 1 at step' $tmp/hup.out && loads $tmp/hup.bin; then
    ok "SIGHUP: $(grep '^stopped' $tmp/hup.out)"
  else bad "SIGHUP: exit $rc: $(tail -c 300 $tmp/hup.out)"; fi
else kill -9 $pid 2>/dev/null; bad "SIGHUP: training did not start"; fi
./train -d $tmp/corpus.txt -o $tmp/pipe.bin "${tiny[@]}" --max-iters 1000000 --eval-interval 100000 2>$tmp/pipe.err | head -n 3 >/dev/null
rc=${PIPESTATUS[0]}
if [ $rc -eq 1 ] && [ "$(wc -l <$tmp/pipe.err)" -eq 1 ] &&
   grep -qE "stdout: cannot write: Broken pipe; checkpoint of step [0-9]+ written to .*pipe.bin" $tmp/pipe.err && loads $tmp/pipe.bin; then
  ok "train | head: '$(cat $tmp/pipe.err)'"
else bad "train | head: exit $rc: $(head -c 300 $tmp/pipe.err)"; fi

# A full disk at the very first checkpoint does not claim a previous one.
(ulimit -f 4 && ./train -d $tmp/corpus.txt -o $tmp/first.bin "${tiny[@]}" --n-embd 64 --max-iters 2 --eval-interval 1 >/dev/null 2>$tmp/first.err)
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot write: File too large; no checkpoint has been written yet" $tmp/first.err && [ ! -e $tmp/first.bin ]; then
  ok "a full disk at the first checkpoint: '$(cat $tmp/first.err)'"
else bad "a full disk at the first checkpoint: exit $rc: $(head -c 300 $tmp/first.err)"; fi

# A failed -m logits leaves the previous -o file as it was: a prompt longer than the context,
# and a byte the vocabulary lacks.
./run $tmp/keep.bin -m logits -i "To be" -o $tmp/logits.bin 2>/dev/null
cp $tmp/logits.bin $tmp/logits_before.bin
long=$(head -c 600 $tmp/corpus.txt)
./run $tmp/keep.bin -m logits -i "$long" -o $tmp/logits.bin 2>$tmp/l1.err; rc1=$?
./run $tmp/keep.bin -m logits -i "naïve ☃" -o $tmp/logits.bin 2>$tmp/l2.err; rc2=$?
if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && grep -q "longer than the model's context" $tmp/l1.err && cmp -s $tmp/logits.bin $tmp/logits_before.bin &&
   ! compgen -G "$tmp/logits.bin.tmp*" >/dev/null; then
  ok "a failed -m logits keeps the old -o ('$(cat $tmp/l1.err)'; '$(cat $tmp/l2.err)')"
else bad "a failed -m logits: exits $rc1 $rc2, $(cat $tmp/l1.err $tmp/l2.err | head -c 300)"; fi

# Standard input: -f - scores the same text as the file; -d - trains exactly as the file does.
./run $tmp/keep.bin -m ppl -f $tmp/corpus.txt >$tmp/ppl_file.out 2>/dev/null
./run $tmp/keep.bin -m ppl -f - <$tmp/corpus.txt >$tmp/ppl_stdin.out 2>/dev/null
./train -d $tmp/corpus.txt -o $tmp/in_file.bin "${tiny[@]}" --max-iters 3 --eval-interval 3 >/dev/null 2>&1
./train -d - -o $tmp/in_stdin.bin "${tiny[@]}" --max-iters 3 --eval-interval 3 <$tmp/corpus.txt >$tmp/in_stdin.out 2>&1
if cmp -s $tmp/ppl_file.out $tmp/ppl_stdin.out && grep -q perplexity $tmp/ppl_stdin.out && cmp -s $tmp/in_file.bin $tmp/in_stdin.bin &&
   grep -q '^data: standard input' $tmp/in_stdin.out; then
  ok "standard input: -m ppl -f - and ./train -d - equal their file runs ($(grep perplexity $tmp/ppl_stdin.out))"
else bad "standard input: $(head -c 300 $tmp/in_stdin.out)"; fi

# Threads beyond the cores are capped with a note.
cores=$(nproc)
./train -d $tmp/corpus.txt -o $tmp/j.bin "${tiny[@]}" --max-iters 2 -j 1024 >$tmp/j.out 2>$tmp/j.err
./run $tmp/j.bin -n 2 -j 1024 >/dev/null 2>$tmp/j2.err
if grep -q "note: 1024 threads asked for (-j) but this machine has $cores cores\?; using $cores" $tmp/j.err &&
   grep -q "batch 2 x 16 x 1 accum; $cores thread" $tmp/j.out && grep -q "note: 1024 threads asked for (-j)" $tmp/j2.err; then
  ok "-j 1024: '$(cat $tmp/j.err)'"
else bad "-j 1024: $(cat $tmp/j.err $tmp/j2.err | head -c 300)"; fi

# Long work shows progress: -m ppl on a terminal (script gives it one) writes its status at once;
# training's plain status line has the total and the ETA.
if command -v script >/dev/null; then
  script -qec "./run $tmp/keep.bin -m ppl -f $tmp/corpus.txt -c 16" /dev/null >$tmp/tty.out 2>&1
  if grep -qE "scoring: [0-9]+ of [0-9]+ windows, [0-9]+ tok/s, ETA [0-9]+:[0-9]{2}" $tmp/tty.out; then
    ok "-m ppl on a terminal shows progress: $(grep -oE 'scoring: [^E]*ETA [0-9:]+' $tmp/tty.out | tail -1)"
  else bad "-m ppl progress: $(tr '\r' '\n' <$tmp/tty.out | head -c 300)"; fi
  script -qec "./train -d $tmp/corpus.txt -o $tmp/bpe.bin ${tiny[*]} --vocab-size 400 --max-iters 1" /dev/null >$tmp/tty2.out 2>&1
  if grep -qaE "learning the vocabulary: [0-9]+ of 400 pieces, [0-9]+ pieces/s, ETA [0-9]+:[0-9]{2}" $tmp/tty2.out; then
    ok "vocabulary learning on a terminal shows progress: $(grep -aoE 'learning the vocabulary: [^E]*ETA [0-9:]+' $tmp/tty2.out | tail -1)"
  else bad "vocabulary learning progress: $(tr '\r' '\n' <$tmp/tty2.out | head -c 300)"; fi
fi
if grep -qE '^iter 10/3: |^iter 3/3: loss [0-9.]+, lr [0-9.e+-]+, [0-9]+ tok/s, ETA 0:00$' $tmp/in_stdin.out; then
  ok "training's plain status line: $(grep -m1 '^iter' $tmp/in_stdin.out)"
else bad "training's plain status line: $(grep -m1 '^iter' $tmp/in_stdin.out)"; fi

# A character vocabulary with no newline and no BOS: train says that ./run needs a prompt.
printf 'abcdefghij%.0s' $(seq 400) >$tmp/no_newline.txt
./train -d $tmp/no_newline.txt -o $tmp/nonl.bin "${tiny[@]}" --max-iters 1 >$tmp/nonl.out 2>&1
./run $tmp/nonl.bin -n 2 >/dev/null 2>$tmp/nonl.err; rc=$?
if grep -q "note: the vocabulary has no newline and no BOS token to start from: ./run needs a prompt (-i)" $tmp/nonl.out &&
   [ $rc -eq 1 ] && ./run $tmp/nonl.bin -i abc -n 2 >/dev/null 2>&1; then
  ok "no newline, no BOS: train's note, and ./run: '$(cat $tmp/nonl.err)'"
else bad "no newline, no BOS: $(cat $tmp/nonl.out | head -c 300)"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
