#!/usr/bin/env bash
# Valgrind memcheck on a short ./run (generation and perplexity) and a short ./train: no
# errors and no leaks (definitely or indirectly lost). Valgrind cannot execute AVX-512, so
# both are built here with AVX2 at most (the code paths are the same C); one thread, and
# OMP_WAIT_POLICY and (on an AVX2 machine) OpenBLAS's core set, so that the programs do not
# start themselves again out from under valgrind (model/threads.h).
set -u
cd "$(dirname "$0")/.."
if [ -n "${ATTN_ASAN_SUITE:-}" ]; then
  echo "skipped under make test-asan: sanitized binaries cannot run under valgrind"
  echo "0 passed, 0 failed"
  exit 0
fi
if ! command -v valgrind >/dev/null; then
  echo "skipped: valgrind is not installed (Debian package valgrind)"
  echo "0 passed, 0 failed"
  exit 0
fi
PYTHON=${PYTHON:-/usr/bin/python3}
SHARED=../shared
tmp=tests/tmp/valgrind.$$ # its own directory: another suite may run this script at the same time
mkdir -p $tmp
trap '[ "${failed:-1}" = 0 ] && rm -rf $tmp' EXIT # kept when something failed
passed=0 failed=0
CC=${CC:-gcc}
LDLIBS=$(make -s --no-print-directory print-LDLIBS)
TOKENIZER_SRC=$(make -s --no-print-directory print-TOKENIZER_SRC)
CHAT_SRC=$(make -s --no-print-directory print-CHAT_SRC)
CONSOLE=$(make -s --no-print-directory print-CONSOLE_SRC print-CONSOLE_LIBS) # run's line editor and its library
# AVX2 + FMA when the CPU has them (valgrind does too), else the compiler's baseline.
arch=""
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && arch="-mavx2 -mfma"
flags="-std=c11 -D_DEFAULT_SOURCE -O1 -g $arch -fopenmp"
for prog in run train; do
  src="$TOKENIZER_SRC"
  [ $prog = run ] && src+=" $CHAT_SRC $CONSOLE"
  $CC $flags -o $tmp/$prog $prog.c $src $LDLIBS || { echo "FAIL: build $prog"; echo "0 passed, 1 failed"; exit 1; }
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
if grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi

# memcheck name expected_exit command...: no memory errors, no definite or indirect leaks.
memcheck() {
  local name=$1 want=$2; shift 2
  valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --log-file=$tmp/$name.log "$@" >$tmp/$name.out 2>$tmp/$name.err
  local rc=$?
  if [ $rc -eq "$want" ] && [ ! -s $tmp/$name.log ]; then passed=$((passed + 1)); echo "ok: $name: no errors, no leaks"
  else failed=$((failed + 1)); echo "FAIL: $name: exit $rc (expected $want)"; head -n 40 $tmp/$name.log; head -c 300 $tmp/$name.err; fi
}

model=$tmp/stories260K.bin
"$PYTHON" tools/convert.py $SHARED/models/stories260K.bin $model --tokenizer $SHARED/models/tok512.bin 2>/dev/null ||
  { echo "FAIL: convert stories260K"; echo "0 passed, 1 failed"; exit 1; }
memcheck run_generate 0 $tmp/run $model -i "Once upon a time" -n 24 -t 0.8 -p 0.9 -k 40 --min-p 0.05 -r 1.1 -s 7
head -c 2000 $SHARED/data/tinyshakespeare.txt >$tmp/text.txt
memcheck run_ppl 0 $tmp/run $model -m ppl -f $tmp/text.txt
memcheck run_compute_bf16 0 $tmp/run $model -i "Once upon a time, in a land far away" -n 8 -s 7 --compute bf16
memcheck run_bad_prompt 1 $tmp/run $model -i $'bad \xff'
# llama.cpp's block types (Q4_K and Q6_K), as they lie: the prompt's panels and the one-token rows
blocks=$tmp/q4_k_m.bin
"$PYTHON" tools/convert.py $SHARED/models/gguf/rand256-Q4_K_M.gguf $blocks 2>/dev/null ||
  { echo "FAIL: convert rand256-Q4_K_M"; echo "0 passed, 1 failed"; exit 1; }
memcheck run_block_types 0 $tmp/run $blocks -i "Once upon a time, in a land far away" -n 8 -s 7
head -c 6000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus.txt
memcheck train 0 $tmp/train -d $tmp/corpus.txt -o $tmp/m.bin --n-layer 1 --n-embd 16 --n-head 2 --batch-size 2 \
  --block-size 16 --max-iters 3 --eval-interval 2 --eval-iters 1
memcheck train_bpe_llama 0 $tmp/train -d $tmp/corpus.txt -o $tmp/m2.bin --arch llama --vocab-size 300 --n-layer 1 \
  --n-embd 16 --n-head 2 --batch-size 2 --block-size 16 --max-iters 2 --eval-interval 2 --eval-iters 1
# block size 300: the tiled attention's forward and backward (training/acts.h's TRAIN_TILED_MIN_T), GQA, heads of 20
memcheck train_tiled 0 $tmp/train -d $tmp/corpus.txt -o $tmp/m3.bin --arch llama --n-kv-head 1 --n-layer 1 \
  --n-embd 40 --n-head 2 --batch-size 2 --block-size 300 --max-iters 2 --eval-interval 2 --eval-iters 1
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
