#!/usr/bin/env bash
# Bad inputs as a new user tries them, for ./run, ./train and tools/convert.py. Each must end
# in exit status 1 and exactly one line on stderr that names the input and says what is wrong
# (the expected text in each row). Rows marked pending describe behaviour still missing (see
# docs/ROBUSTNESS.md); they are reported but do not fail. tests/test_run.sh and
# tests/test_loader.c hold further cases, not repeated here.
#   bash tests/test_bad_inputs.sh [--markdown]   (--markdown: print the table for the docs)
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
SHARED=../shared
# A directory of its own: other checkouts' suites may run this script at the same time.
tmp=tests/tmp/bad.$$
rm -rf "$tmp" && mkdir -p "$tmp"
trap '[ "${failed:-1}" = 0 ] && rm -rf "$tmp"' EXIT # kept when something failed
markdown=0
[ "${1:-}" = --markdown ] && markdown=1
passed=0 failed=0 pending=0 table=()

# row tool "input" "expected text" command...   (pend instead of row: not yet required)
# The expected text may be several pieces joined by && that must all appear.
# A program still running after LIMIT seconds (120) has hung: it fails the row.
check() {
  local required=$1 tool=$2 what=$3 want=$4; shift 4
  { timeout "${LIMIT:-120}" "$@" >$tmp/out.txt 2>$tmp/err.txt </dev/null; } 2>/dev/null # no shell notice of a crash
  local rc=$? lines msg
  lines=$(wc -l <$tmp/err.txt)
  msg=$(head -n 1 $tmp/err.txt)
  local all=1 part
  while IFS= read -r part; do grep -qF -- "$part" $tmp/err.txt || all=0; done <<<"${want//&&/$'\n'}"
  if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && ((all)); then
    passed=$((passed + 1))
    ((markdown)) || echo "ok: $tool: $what"
    table+=("| \`$tool\` | $what | \`${msg//|/\\|}\` |")
  elif ((required)); then
    failed=$((failed + 1))
    echo "FAIL: $tool: $what: exit $rc, $lines lines on stderr, expected '$want': $(head -c 300 $tmp/err.txt)"
  else
    pending=$((pending + 1))
    ((markdown)) || echo "pending: $tool: $what: exit $rc, wanted '$want'; stderr: $(head -c 200 $tmp/err.txt)"
    local now="exits $rc"
    [ $rc -gt 128 ] && now="crashes (signal $((rc - 128)))"
    [ $rc -eq 124 ] && now="hangs (stopped after ${LIMIT:-120} s)"
    table+=("| \`$tool\` | $what | pending: $now; wanted one line saying '$want' |")
  fi
}
row() { check 1 "$@"; }
pend() { check 0 "$@"; }

model=$tmp/stories260K.bin
"$PYTHON" tools/convert.py $SHARED/models/stories260K.bin $model --tokenizer $SHARED/models/tok512.bin 2>/dev/null ||
  { echo "FAIL: convert stories260K"; echo "0 passed, 1 failed"; exit 1; }
size=$(stat -c %s $model)
head -c 2000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus_seed.txt

# Files made from the good model: cut at an offset, or with header fields overwritten.
cut_at() { head -c "$2" $model >"$1"; }
# The checksum of a changed file made right again (version 5 on; zero before), so that a row
# meets the change it makes, not the checksum: sealed FILE.
sealed() {
  "$PYTHON" - "$1" <<'PY'
import struct, sys, zlib
d = bytearray(open(sys.argv[1], "rb").read())
d[200:204] = bytes(4)
if struct.unpack_from("<I", d, 4)[0] >= 5:
    struct.pack_into("<I", d, 200, zlib.crc32(d))
open(sys.argv[1], "wb").write(d)
PY
}
patched() { # out, then (struct format, offset, value) triples; the result sealed
  local out=$1; shift
  "$PYTHON" - "$model" "$out" "$@" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
a = sys.argv[3:]
for fmt, off, val in zip(a[0::3], a[1::3], a[2::3]):
    struct.pack_into(fmt, d, int(off), float(val) if fmt == "<f" else int(val))
open(sys.argv[2], "wb").write(d)
PY
  sealed "$out"
}

# ---- ./run: model files
"$PYTHON" -c "import random, sys; random.seed(5); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(4096)))" >$tmp/random.bin
row run "a file of random bytes" "not an attn.c model file" ./run $tmp/random.bin
cut_at $tmp/cut100.bin 100
row run "a model cut inside the header (100 bytes)" "shorter than the 256-byte header" ./run $tmp/cut100.bin
cut_at $tmp/cut1000.bin 1000
row run "a model cut inside the tokenizer" "truncated: tok_bytes" ./run $tmp/cut1000.bin
# every tensor boundary, and the middle of every tensor, from the Python writer's own layout
"$PYTHON" - "$model" >$tmp/boundaries.txt <<'PY'
import sys
sys.path.insert(0, "tools")
from attn import modelfile as mf
from attn import storage
d = open(sys.argv[1], "rb").read()
h = mf.read_header(d)
off = h["weights_offset"]
for name, shape in mf.tensor_specs(h):
    n = 4
    for s in shape:
        n *= s
    print(off, off + n // 2)
    off += storage.padded(n)
PY
n_cuts=0 bad_cuts=0
while read -r start middle; do
  for at in $start $middle; do
    cut_at $tmp/cut.bin $at
    ./run $tmp/cut.bin >/dev/null 2>$tmp/err.txt
    rc=$?
    n_cuts=$((n_cuts + 1))
    if [ $rc -ne 1 ] || [ "$(wc -l <$tmp/err.txt)" -ne 1 ] || ! grep -qF "truncated or padded" $tmp/err.txt; then
      bad_cuts=$((bad_cuts + 1)); echo "FAIL: run on the model cut at $at: exit $rc: $(head -c 200 $tmp/err.txt)"
    fi
  done
done <$tmp/boundaries.txt
if [ $n_cuts -gt 0 ] && [ $bad_cuts -eq 0 ]; then
  passed=$((passed + 1)); ((markdown)) || echo "ok: run: model cut at each of $n_cuts tensor starts and middles"
  table+=("| \`run\` | the model cut at each of its $((n_cuts / 2)) tensor boundaries and inside each tensor | \`$(head -n 1 $tmp/err.txt)\` |")
else
  failed=$((failed + 1)); echo "FAIL: run: model cut at tensor boundaries ($bad_cuts of $n_cuts wrong)"
fi
patched $tmp/dim_neg.bin "<i" 12 -1
row run "a header with dim -1" "dim is 4294967295, outside [1, 65536]" ./run $tmp/dim_neg.bin
patched $tmp/layers0.bin "<I" 20 0
row run "a header with n_layers 0" "n_layers is 0, outside [1, 1024]" ./run $tmp/layers0.bin
patched $tmp/vocab_huge.bin "<I" 36 $((1 << 30))
row run "a header with vocab_size 2^30" "vocab_size is 1073741824, outside [1, 16777216]" ./run $tmp/vocab_huge.bin
patched $tmp/overflow32.bin "<I" 12 65536 "<I" 36 65536 "<I" 32 4096 "<I" 84 4096
row run "dim 65536 x vocab 65536 (past 2^32 elements)" "but the config needs" ./run $tmp/overflow32.bin
patched $tmp/overflow.bin "<I" 12 65536 "<I" 16 262144 "<I" 20 1024 "<I" 24 1024 "<I" 28 1024 "<I" 32 4096 \
  "<I" 36 16777216 "<I" 40 1048576 "<I" 84 4096
row run "every dimension at its limit (a product near 2^52)" "weights_bytes is" ./run $tmp/overflow.bin
version=$(sed -n 's/^#define MODEL_VERSION \([0-9]*\).*/\1/p' model/header.h) # this build's, so the row follows it
patched $tmp/newer.bin "<I" 4 $((version + 1))
row run "a model file of the format version after this build's" \
  "format version $((version + 1)) is newer than this build reads ($version)" ./run $tmp/newer.bin
patched $tmp/wtype.bin "<I" 4 3 "<I" 136 7
row run "a version 3 header with weight_type 7" "weight_type is 7, outside [0, 4]" ./run $tmp/wtype.bin
# Version 6, a type per matrix: llama.cpp's stories260K-Q4_K_M kept as it is, its type table
# (at types_offset, header byte 208) or its length changed.
"$PYTHON" tools/convert.py $SHARED/models/gguf/stories260K-Q4_K_M.gguf $tmp/typed.bin 2>/dev/null
typed_table() { # out, then (matrix index, GGML type id) pairs; the result sealed
  "$PYTHON" - $tmp/typed.bin "$@" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
at = struct.unpack_from("<Q", d, 208)[0]
for k, t in zip(sys.argv[3::2], sys.argv[4::2]):
    d[at + int(k)] = int(t)
open(sys.argv[2], "wb").write(d)
PY
  sealed "$1"
}
typed_table $tmp/typed_unknown.bin 0 9
row run "a type table naming an unknown type (9, Q8_1)" \
  "tensor tok_embedding has type 9, which this build does not know" ./run $tmp/typed_unknown.bin
row convert.py "a model file whose type table names an unknown type (9, Q8_1)" \
  "tensor tok_embedding has type 9, which a model file does not hold" "$PYTHON" tools/convert.py $tmp/typed_unknown.bin $tmp/o.bin
typed_table $tmp/typed_rows.bin 7 2 # layers.0.w2 [64, 172] as Q4_0
row run "a block type whose blocks do not divide a row (Q4_0 on rows of 172)" \
  "tensor layers.0.w2 is Q4_0, whose rows of 172 values are not whole blocks of 32" ./run $tmp/typed_rows.bin
head -c $(($(stat -c %s $tmp/typed.bin) - 100)) $tmp/typed.bin >$tmp/typed_cut.bin
row run "a model of block types cut inside its last tensor" "(truncated or padded)" ./run $tmp/typed_cut.bin
patched $tmp/wtype_v2.bin "<I" 4 2 "<I" 136 2
row run "a version 2 header with bfloat16 weights (weight_type 2)" "a version 2 file uses a version 3 weight_type" ./run $tmp/wtype_v2.bin
patched $tmp/v1q8.bin "<I" 4 1 "<I" 136 1 "<I" 140 4
row run "a version 1 header with Q8_0 fields" "version 1 file has no weight_type" ./run $tmp/v1q8.bin
patched $tmp/group.bin "<I" 4 2 "<I" 136 1 "<I" 140 3
row run "a Q8_0 header whose group_size does not divide a row" "group_size 3 does not divide the rows of width 64" ./run $tmp/group.bin
patched $tmp/group0.bin "<I" 4 2 "<I" 136 1
row run "a Q8_0 header with group_size 0" "group_size is 0, outside [1, 65536]" ./run $tmp/group0.bin
patched $tmp/bos.bin "<i" 96 512
row run "bos_id equal to vocab_size" "bos_id is 512, outside [-1, 511]" ./run $tmp/bos.bin
patched $tmp/eps.bin "<f" 60 0
row run "norm_eps 0" "norm_eps 0 is not in (0, 1)" ./run $tmp/eps.bin
patched $tmp/maxlen.bin "<I" 264 3
row run "an embedded tokenizer with a wrong max_piece_len" "tokenizer max_piece_len is 3" ./run $tmp/maxlen.bin
{ cat $model; printf 'x'; } >$tmp/padded.bin
row run "a model with a byte appended" "truncated or padded" ./run $tmp/padded.bin
# ---- ./run: format version 5's checksum, read only by --verify (and ./train, convert.py)
"$PYTHON" -c "import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[-5] ^= 1; open(sys.argv[2], 'wb').write(d)" \
  $model $tmp/damaged.bin
row run "--verify on a model with one weight bit flipped" "$tmp/damaged.bin: checksum mismatch: the file is damaged" \
  ./run --verify $tmp/damaged.bin
"$PYTHON" -c "import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[4] = 4; open(sys.argv[2], 'wb').write(d)" \
  $model $tmp/v4sum.bin # its checksum kept
row run "a version 4 file with a checksum" "header bytes 200..203 (the checksum) are not zero in a version 4 file" \
  ./run $tmp/v4sum.bin
row run "--verify with another option" "--verify checks the model file and takes no other option" \
  ./run --verify $model -n 4
# ---- ./run: a checkpoint or folder tools/convert.py reads, given instead of a model file
mkdir -p $tmp/hf_dir && echo '{}' >$tmp/hf_dir/config.json # what a Hugging Face folder has
row run "a directory (a Hugging Face folder)" \
  "$tmp/hf_dir: a directory, not a model file; convert it with /usr/bin/python3 tools/convert.py $tmp/hf_dir model.bin" \
  ./run $tmp/hf_dir
row run "a GGUF file" "$SHARED/models/gguf/rand256-F32.gguf: a GGUF file, not an attn.c model file; convert it with /usr/bin/python3 tools/convert.py" \
  ./run $SHARED/models/gguf/rand256-F32.gguf
row run "a PyTorch .pt checkpoint (a zip archive)" "a PyTorch checkpoint (a zip archive), not an attn.c model file; convert it with" \
  ./run $SHARED/models/llama2xs_ckpt.pt
"$PYTHON" -c "import pickle, sys; open(sys.argv[1], 'wb').write(pickle.dumps({'vocab_size': 65, 'itos': {0: 'a'}}, protocol=2) + bytes(300))" \
  $tmp/meta.pkl
row run "a pickle (nanoGPT's meta.pkl)" "$tmp/meta.pkl: a pickle (an old PyTorch checkpoint), not an attn.c model file" ./run $tmp/meta.pkl
"$PYTHON" -c "import json, struct, sys; h = json.dumps({'w': {'dtype': 'F32', 'shape': [64], 'data_offsets': [0, 256]}}).encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(256))" $tmp/model.safetensors
row run "a safetensors file" "$tmp/model.safetensors: a safetensors file, not an attn.c model file" ./run $tmp/model.safetensors
# ---- ./run: "-" is standard input or output where a stream will do, else refused
row run "- as the model" "-: the model is a file, mapped where it lies; standard input cannot be one" ./run - -i hi
row run "-z - (the tokenizer from standard input)" "-z -: the tokenizer is read from a file; give its name" ./run $model -z -
row run "-m chat --chat - (turns and conversation both from standard input)" \
  "--chat -: -m chat reads its turns from standard input; give the conversation as a file" \
  ./run $model -m chat --chat - --chat-template llama2
row run "--chat - with -f -" "--chat - and -f -: standard input can be only one of them" \
  ./run $model --chat - -f - --chat-template llama2

# A model file that shrinks while run has it mapped: with the prompt from standard input (-f -),
# run blocks reading it after the model is mapped and before any weight is read, so the cut
# lands in between.
cp $model $tmp/shrink.bin
mkfifo $tmp/go
{ read -r _ <$tmp/go; printf 'Once upon a time'; } |
  ./run $tmp/shrink.bin -m logits -f - -o $tmp/shrink_logits.bin >/dev/null 2>$tmp/shrink_err.txt &
pid=$!
for _ in $(seq 200); do grep -q shrink.bin /proc/$pid/maps 2>/dev/null && break; sleep 0.05; done
truncate -s 4096 $tmp/shrink.bin
echo go >$tmp/go
wait $pid
rc=$?
if [ $rc -eq 1 ] && grep -qF "shrink.bin: the model file changed while in use" $tmp/shrink_err.txt && [ "$(wc -l <$tmp/shrink_err.txt)" -eq 1 ]; then
  passed=$((passed + 1)); ((markdown)) || echo "ok: run: model file cut while mapped"
  table+=("| \`run\` | the model file cut to 4096 bytes while run has it mapped | \`$(head -n 1 $tmp/shrink_err.txt)\` |")
else
  failed=$((failed + 1)); echo "FAIL: run: model file cut while mapped: exit $rc: $(head -c 300 $tmp/shrink_err.txt)"
fi
rm -f $tmp/fifo

# A FIFO that nobody writes: opening it for reading would wait forever.
mkfifo $tmp/fifo
row run "a FIFO as the model" "$tmp/fifo: not a regular file" ./run $tmp/fifo
row run "-m ppl -f a FIFO" "$tmp/fifo: not a regular file" ./run $model -m ppl -f $tmp/fifo
# ./train reads a FIFO as it reads standard input (tests/test_train_signals.py): to its end
(: >$tmp/fifo &)
LIMIT=5 row train "a FIFO as corpus whose writer sends nothing" "$tmp/fifo: the corpus is empty" ./train -d $tmp/fifo -o $tmp/m.bin
LIMIT=10 row convert.py "a FIFO as the checkpoint" "$tmp/fifo: not a regular file" "$PYTHON" tools/convert.py $tmp/fifo $tmp/o.bin
rm -f $tmp/fifo

# ---- ./run: flags and texts
row run "an unknown flag last, with no value" "unknown option --frob" ./run $model --frob
row run "-n -1" "-n -1: expected a whole number in [0, 1048576]" ./run $model -n -1
row run "-n abc" "-n abc: expected a whole number" ./run $model -n abc
row run "-n 99999999999999 (overflows int)" "-n 99999999999999: expected a whole number" ./run $model -n 99999999999999
row run "-k -1" "-k -1: expected a whole number" ./run $model -k -1
row run "-s -1" "-s -1: expected a whole number" ./run $model -s -1
row run "-j 0" "-j 0: expected a whole number in [1, 1024]" ./run $model -j 0
row run "-t 1e999 (infinite)" "-t 1e999: expected a number in [0, 100]" ./run $model -t 1e999
row run "-t nan" "-t nan: expected a number in [0, 100]" ./run $model -t nan
row run "--min-p 2" "--min-p 2: expected a number in [0, 1]" ./run $model --min-p 2
row run "-r 0" "-r 0: expected a number in [0.01, 100]" ./run $model -r 0
row run "-i with no value" "-i needs a value" ./run $model -i
row run "two model files" "unexpected argument" ./run $model $model
row run "-z a directory" "$tmp: not a regular file" ./run $model -z $tmp
row run "-z a file of random bytes" "$tmp/random.bin: piece 0 has" ./run $model -z $tmp/random.bin
printf 'Once upon\0 a time' >$tmp/nul.txt
row run "-m ppl on a text with a NUL byte (a prompt cannot hold one: argv ends at NUL)" "$tmp/nul.txt: &&NUL byte&&9" ./run $model -m ppl -f $tmp/nul.txt
printf 'Once upon \xc3\x28 a time' >$tmp/invalid.txt
row run "-m ppl on invalid UTF-8" "$tmp/invalid.txt: invalid UTF-8 at byte 10" ./run $model -m ppl -f $tmp/invalid.txt
: >$tmp/empty.txt
row run "-m ppl on an empty text" "$tmp/empty.txt: 1 token; perplexity needs at least 2" ./run $model -m ppl -f $tmp/empty.txt
row run "-m ppl -f a directory" "$tmp: not a regular file" ./run $model -m ppl -f $tmp
row run "a prompt file (-f) with a NUL byte" "$tmp/nul.txt: &&NUL byte&&9" ./run $model -f $tmp/nul.txt
row run "a prompt file (-f) that is missing" "$tmp/nope.txt: cannot open" ./run $model -f $tmp/nope.txt
row run "-i and -f both" "give the prompt with -i or with -f, not both" ./run $model -i hi -f $tmp/invalid.txt
row run "-i with -m ppl (it would be ignored)" "-m ppl scores the text of -f; -i has no use there" ./run $model -m ppl -f $tmp/invalid.txt -i hi
cp $model $tmp/self.bin
row run "-m logits -o the model itself" "-o $tmp/self.bin is also an input" ./run $tmp/self.bin -m logits -i hi -o $tmp/self.bin
row run "-o without -m logits (it would be ignored)" "-o is where -m logits writes" ./run $model -i hi -o $tmp/o.bin
row run "-m logits -o into a missing directory" "$tmp/no/dir: cannot create" ./run $model -m logits -i hi -o $tmp/no/dir

# Flags a mode would ignore, outputs that are not files, contexts, non-finite weights.
row run "-t with -m ppl (it would be ignored)" "-t shapes generation; -m ppl does not generate" ./run $model -m ppl -f $tmp/corpus_seed.txt -t 0.5
row run "-n with -m ppl" "-n shapes generation; -m ppl does not generate" ./run $model -m ppl -f $tmp/corpus_seed.txt -n 5
row run "-s with -m logits" "-s shapes generation; -m logits does not generate" ./run $model -m logits -i hi -o $tmp/l.bin -s 3
row run "-k with -m logits" "-k shapes generation; -m logits does not generate" ./run $model -m logits -i hi -o $tmp/l.bin -k 3
row run "-p with -m ppl" "-p shapes generation" ./run $model -m ppl -f $tmp/corpus_seed.txt -p 0.5
row run "-m logits without -o" "-m logits needs an output file: -o FILE" ./run $model -m logits -i hi
mkfifo $tmp/out_fifo
row run "-m logits -o a FIFO" "$tmp/out_fifo: is a FIFO, not a regular file" ./run $model -m logits -i hi -o $tmp/out_fifo
rm -f $tmp/out_fifo
row run "-m logits -o a directory" "$tmp: is a directory, not a regular file" ./run $model -m logits -i hi -o $tmp
row run "-z a model file instead of a tokenizer" "$model: is an attn.c model, not a tokenizer" ./run $model -z $model
row run "-c 0" "-c 0: expected a whole number in [1, 1048576]" ./run $model -c 0
row run "-c above the model's context" "-c 4096: $model's context is 512 positions; -c can only shorten it" ./run $model -c 4096
"$PYTHON" tools/make_random.py --set seq_len=1048576 --set n_layers=2 --set dim=2 --set n_heads=1 --set n_kv_heads=1 \
  --set head_dim=4096 --set rope_dims=2 --set hidden_dim=2 $tmp/huge_context.bin >/dev/null 2>&1
# (AddressSanitizer reserves terabytes of address space for itself, so ulimit -v cannot apply there.)
[ -z "${ATTN_ASAN_SUITE:-}" ] && row run "a context whose KV cache does not fit in memory (ulimit -v 4 GB)" \
  "$tmp/huge_context.bin: out of memory for the run state: it needs 4169 MiB at the context of 65536 set with -c; a shorter one (-c N), or --kv-cache f16 or q8_0, needs less" \
  bash -c 'ulimit -v 4000000 && exec "$@"' limited ./run $tmp/huge_context.bin -c 65536 -n 2
# 16 heads of 4096 on 2 layers: a KV cache of 1 TiB at the whole context, refused before the
# weights are read; the default context (4096) is 4 GiB less than that.
"$PYTHON" tools/make_random.py --set seq_len=1048576 --set n_layers=2 --set dim=2 --set n_heads=16 --set n_kv_heads=16 \
  --set head_dim=4096 --set rope_dims=2 --set hidden_dim=2 $tmp/huge_kv.bin >/dev/null 2>&1
row run "-c a context whose KV cache exceeds the memory available" \
  "-c 1048576: $tmp/huge_kv.bin needs&&(KV cache 1048576 MiB in f32&&MiB available; a shorter context (-c N) or --kv-cache f16 or q8_0 needs less" \
  ./run $tmp/huge_kv.bin -c 1048576 -n 2
"$PYTHON" - $model $tmp/nan_weights.bin <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
off = struct.unpack_from("<Q", d, 120)[0]  # weights_offset: tok_embedding[0][0] is the first float
for i in range(64 * 512):  # every token's embedding, so that any prompt meets a NaN
    struct.pack_into("<f", d, off + 4 * i, float("nan"))
open(sys.argv[2], "wb").write(d)
PY
# -s 1 in the generating rows: a seed from the clock would have its own line before the error
row run "a model with NaN weights, generating" "$tmp/nan_weights.bin: the logits at position 2 are not finite" ./run $tmp/nan_weights.bin -i "Once upon" -s 1
row run "a model with NaN weights, -m ppl" "$tmp/nan_weights.bin: the logits at position 0 are not finite" ./run $tmp/nan_weights.bin -m ppl -f $tmp/corpus_seed.txt
row run "a model with NaN weights, -m logits" "$tmp/nan_weights.bin: the logits at position 0 are not finite" ./run $tmp/nan_weights.bin -m logits -i hi -o $tmp/l.bin
row run "a model with NaN weights, -m attention" "$tmp/nan_weights.bin: the attention weights of layer 0, head 0 at position 0 are not finite" ./run $tmp/nan_weights.bin -m attention -i hi -o $tmp/l.bin

if [ -w /dev/full ]; then # writes to /dev/full fail with ENOSPC, as on a full disk
  row run "stdout on a full disk (/dev/full)" "run: stdout: cannot write: No space left on device" \
    sh -c './run "$1" -i "Once upon a time" -n 20 -s 1 >/dev/full' sh $model
fi
limited=(bash -c 'ulimit -f 8 && exec "$@"' limited) # files up to 8 KiB
row run "-m logits -o past ulimit -f" "$tmp/logits.bin: cannot write: File too large" "${limited[@]}" ./run $model -m logits -i "Once upon a time" -o $tmp/logits.bin

# ---- ./run -m attention and tools/plot_attention.py
row run "-m attention without -o" "-m attention needs an output file: -o FILE" ./run $model -m attention -i hi
row run "--layers out of range" "--layers 3-7: $model has 5 layers, 0-4" ./run $model -m attention -i hi -o $tmp/a.bin --layers 3-7
row run "--heads out of range" "--heads 8: $model has 8 query heads, 0-7" ./run $model -m attention -i hi -o $tmp/a.bin --heads 8
row run "--layers 2-1 (backwards)" "--layers 2-1: expected A-B, numbers from 0 with A <= B, or one number" ./run $model -m attention -i hi -o $tmp/a.bin --layers 2-1
row run "--heads without -m attention (it would be ignored)" "--heads selects what -m attention writes" ./run $model -i hi --heads 0
row run "--compute fp8 (not an arithmetic it has)" "--compute fp8: expected f32, bf16 or (-m ppl) bf16,f32" ./run $model -i hi --compute fp8
row run "--compute bf16,f32 outside -m ppl" "--compute bf16,f32: only -m ppl runs both, to compare them; -m generate takes f32 or bf16" ./run $model -i hi --compute bf16,f32
row run "--kv-cache q4_0 (not a cache type it has)" "--kv-cache q4_0: expected f32, f16 or q8_0" ./run $model -i hi --kv-cache q4_0
row run "--kv-cache q8_0 with head_dim 8 (a Q8_0 block is 32 values of one head)" \
  "--kv-cache q8_0: $model's head_dim is 8, not a multiple of 32" ./run $model -i hi --kv-cache q8_0
"$PYTHON" tools/make_random.py --set seq_len=4096 --set n_layers=4 --set dim=32 --set n_heads=8 --set n_kv_heads=8 \
  --set head_dim=4 --set rope_dims=4 --set hidden_dim=32 $tmp/wide.bin >/dev/null 2>&1
head -c 6000 $SHARED/data/tinyshakespeare.txt >$tmp/long_prompt.txt
row run "-m attention on a prompt whose weights pass 1 GiB (3669 tokens, 4 layers, 8 heads)" \
  "-m attention: 3669 tokens x 4 layers x 8 heads make a 1.60 GiB file, over the 1 GiB limit; select fewer with --layers A-B and --heads A-B" \
  ./run $tmp/wide.bin -m attention -f $tmp/long_prompt.txt -o $tmp/a.bin
./run $model -m attention -i "Once upon a time" -o $tmp/attention.bin 2>/dev/null
head -c 3000 $tmp/attention.bin >$tmp/attention_cut.bin
row plot_attention.py "an attention file cut short" "$tmp/attention_cut.bin: truncated: the header (T 5, layers 5, heads 8) implies 4032 bytes, the file has 3000" \
  "$PYTHON" tools/plot_attention.py $tmp/attention_cut.bin -o $tmp/a.png
"$PYTHON" - $tmp/attention.bin $tmp/attention_bad.bin <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<f", d, 12 + 4 * 5 + 4 * (5 * 3 + 1), 0.75)  # layer 0, head 0, row 3 of 5 tokens: a weight changed
open(sys.argv[2], "wb").write(d)
PY
row plot_attention.py "an attention file with a damaged weight" "$tmp/attention_bad.bin: layer 0 head 0: row 3 sums to" \
  "$PYTHON" tools/plot_attention.py $tmp/attention_bad.bin -o $tmp/a.png
row plot_attention.py "a model file instead of an attention file" "$model: an attn.c model file; make its attention file with ./run MODEL -m attention" \
  "$PYTHON" tools/plot_attention.py $model --html $tmp/a.html

# ---- ./train
head -c 3000 $SHARED/data/tinyshakespeare.txt >$tmp/corpus.txt
small=(--max-iters 2 --eval-interval 1 --eval-iters 1 --n-layer 1 --n-embd 16 --n-head 2 --batch-size 2 --block-size 16)
row train "a missing corpus" "$tmp/nope.txt: cannot open the corpus" ./train -d $tmp/nope.txt -o $tmp/m.bin
row train "a directory as corpus" "$tmp: the corpus is not a regular file" ./train -d $tmp -o $tmp/m.bin
row train "an empty corpus" "$tmp/empty.txt: the corpus is empty" ./train -d $tmp/empty.txt -o $tmp/m.bin
printf 'To be, or not to be' >$tmp/short.txt
row train "a corpus shorter than one block" "$tmp/short.txt: 19 tokens give 17 training and 2 validation tokens" \
  ./train -d $tmp/short.txt -o $tmp/m.bin "${small[@]}"
row train "a binary file as corpus" "$tmp/random.bin: not UTF-8 text" ./train -d $tmp/random.bin -o $tmp/m.bin "${small[@]}"
{ cat $tmp/corpus.txt; printf '\0'; } >$tmp/corpus_nul.txt
row train "a corpus with a NUL byte" "$tmp/corpus_nul.txt: not UTF-8 text: a NUL byte at byte 3000" ./train -d $tmp/corpus_nul.txt -o $tmp/m.bin "${small[@]}"
{ cat $tmp/corpus.txt; printf '\xff'; } >$tmp/corpus_bad.txt
row train "a corpus with invalid UTF-8" "$tmp/corpus_bad.txt: not UTF-8 text: invalid UTF-8 at byte 3000" ./train -d $tmp/corpus_bad.txt -o $tmp/m.bin "${small[@]}"
row train "--lr abc" "--lr: 'abc' is not a number" ./train -d $tmp/corpus.txt -o $tmp/m.bin --lr abc
row train "--lr -1" "--lr: -1 is outside [0, 10]" ./train -d $tmp/corpus.txt -o $tmp/m.bin --lr -1
row train "--n-layer 0" "--n-layer: 0 is outside [1, 1024]" ./train -d $tmp/corpus.txt -o $tmp/m.bin --n-layer 0
row train "--dropout 1" "--dropout: 1 is outside [0, 0.99]" ./train -d $tmp/corpus.txt -o $tmp/m.bin --dropout 1
row train "--max-iters 1e3" "--max-iters: '1e3' is not an integer" ./train -d $tmp/corpus.txt -o $tmp/m.bin --max-iters 1e3
row train "--n-head 3 with --n-embd 128" "--n-embd 128 is not a multiple of --n-head 3" ./train -d $tmp/corpus.txt -o $tmp/m.bin --n-head 3
row train "--n-embd 65536 --n-head 4" "head_dim is 16384, outside [1, 4096]" ./train -d $tmp/corpus.txt -o $tmp/m.bin --n-embd 65536
row train "--block-size 5000 on a 3000-byte corpus" "each needs more than the block size 5000" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --block-size 5000 --batch-size 1 --n-layer 1 --n-head 1
row train "--vocab-size 100" "--vocab-size 100: a BPE vocabulary needs 256 to 1048576 pieces" ./train -d $tmp/corpus.txt -o $tmp/m.bin --vocab-size 100
row train "no -o" "no output: give -o FILE" ./train -d $tmp/corpus.txt
row train "an unknown flag" "unknown option '--frobnicate'" ./train -d $tmp/corpus.txt -o $tmp/m.bin --frobnicate 1
row train "an unknown flag last, with no value" "unknown option '--frobnicate'" ./train -d $tmp/corpus.txt -o $tmp/m.bin --frobnicate
row train "-o into a missing directory" "$tmp/no/m.bin: cannot write there: No such file or directory" ./train -d $tmp/corpus.txt -o $tmp/no/m.bin "${small[@]}"
row train "-o the corpus itself" "$tmp/corpus.txt is the corpus (-d): writing it would destroy it" ./train -d $tmp/corpus.txt -o $tmp/corpus.txt
row train "--block-size 1 (./run cannot score or extend a 1-token context)" "--block-size: 1 is outside [2, 1048576]" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --block-size 1
row train "-j 0" "--threads: 0 is outside [1, 1048576]" ./train -d $tmp/corpus.txt -o $tmp/m.bin -j 0
: | LIMIT=10 row train "-d - with nothing on standard input" "standard input: the corpus is empty" ./train -d - -o $tmp/m.bin
echo "notes" >$tmp/notes.txt
row train "-o a file that is not a model, even with --force" "$tmp/notes.txt exists and is not an attn.c model; refusing to replace it" \
  ./train -d $tmp/corpus.txt -o $tmp/notes.txt --force "${small[@]}"
mknod $tmp/chardev c 1 3 2>/dev/null && row train "-o a character device (mknod in the test's directory)" \
  "$tmp/chardev: is a character device, not a regular file; refusing to replace it" ./train -d $tmp/corpus.txt -o $tmp/chardev "${small[@]}"
mkdir -p $tmp/outdir
row train "-o a directory" "$tmp/outdir: is a directory, not a regular file" ./train -d $tmp/corpus.txt -o $tmp/outdir "${small[@]}"
row train "--init a missing model" "$tmp/nope.bin: cannot open" ./train -d $tmp/corpus.txt -o $tmp/m.bin --init $tmp/nope.bin
row train "--tokenizer-from a missing model" "--tokenizer-from $tmp/nope.bin: cannot open" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --tokenizer-from $tmp/nope.bin
row train "--tokenizer-from with --init" "--tokenizer-from and --init exclude each other: --init keeps its model's tokenizer" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --tokenizer-from $model --init $model
row train "--tokenizer-from with --vocab-size" "--tokenizer-from and --vocab-size exclude each other" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --tokenizer-from $model --vocab-size 300
row train "--tokenizer-from with --resume" "--tokenizer-from and --resume exclude each other" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --tokenizer-from $model --resume
row train "--init a truncated model" "$tmp/cut1000.bin: truncated" ./train -d $tmp/corpus.txt -o $tmp/m.bin --init $tmp/cut1000.bin
"$PYTHON" tools/convert.py $model $tmp/q8.bin --weights q8_0 --group-size 4 2>/dev/null
row train "--init a Q8_0 model" "$tmp/q8.bin: its weights are quantised (Q8_0); training needs float32, bfloat16 or float16 weights" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --init $tmp/q8.bin
row train "--init a model of llama.cpp's block types" \
  "$tmp/typed.bin: its weights are quantised (tensor tok_embedding is Q5_0); training needs float32" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --init $tmp/typed.bin
"$PYTHON" tools/make_random.py $tmp/moe.bin --preset moe_whole_qk >/dev/null 2>&1
row train "--init a model with experts (OLMoE's block)" "$tmp/moe.bin: n_experts (a mixture of experts: Qwen3-MoE) is not trainable in this build" \
  ./train -d $tmp/corpus.txt -o $tmp/m.bin --init $tmp/moe.bin
./train -d $tmp/corpus.txt -o $tmp/done.bin "${small[@]}" >/dev/null 2>&1
row train "-o an existing model without --resume or --force" "$tmp/done.bin exists: 2 steps of training; use --resume to continue, or --force to start over" \
  ./train -d $tmp/corpus.txt -o $tmp/done.bin "${small[@]}"
row train "-o the --init model without --force" "$tmp/done.bin is also --init: training would write over it" \
  ./train -d $tmp/corpus.txt -o $tmp/done.bin --init $tmp/done.bin
row train "--resume with other model options" \
  "these options differ from it: --n-layer 2 (saved: 1), --lr 0.005 (saved: 0.001); only --max-iters, --eval-interval and --eval-iters may change" \
  ./train -d $tmp/corpus.txt -o $tmp/done.bin --resume --n-layer 2 --lr 5e-3 --max-iters 4
row train "--resume and --force" "--resume and --force exclude each other" ./train -d $tmp/corpus.txt -o $tmp/done.bin --resume --force
"$PYTHON" - $tmp/done.bin $tmp/nan_init.bin <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<f", d, struct.unpack_from("<Q", d, 120)[0] + 4 * 5, float("inf"))
open(sys.argv[2], "wb").write(d)
PY
sealed $tmp/nan_init.bin
cp $tmp/done.bin $tmp/damaged_init.bin && printf '\x7f' | dd of=$tmp/damaged_init.bin bs=1 seek=300 conv=notrunc 2>/dev/null
row train "--init a model with a damaged byte" "$tmp/damaged_init.bin: checksum mismatch: the file is damaged" \
  ./train -d $tmp/corpus.txt -o $tmp/m2.bin --init $tmp/damaged_init.bin --max-iters 2
row train "-o - (the model to standard output)" "-o -: the model is a file" ./train -d $tmp/corpus.txt -o -
row train "--init - (the model from standard input)" "--init -: the model to start from is a file" \
  ./train -d $tmp/corpus.txt -o $tmp/m2.bin --init -
row train "--init a model with an Inf weight" "$tmp/nan_init.bin: the initial weights are not finite: tok_embedding[5] is inf" \
  ./train -d $tmp/corpus.txt -o $tmp/m2.bin --init $tmp/nan_init.bin --max-iters 2
row train "--resume with no state file" "$tmp/fresh.bin&&cannot open" ./train -d $tmp/corpus.txt -o $tmp/fresh.bin --resume
./train -d $tmp/corpus.txt -o $tmp/m.bin "${small[@]}" >/dev/null 2>&1
head -c 1000 $tmp/m.bin.state >$tmp/cut.bin.state
cp $tmp/m.bin $tmp/cut.bin
row train "--resume from a truncated state" "$tmp/cut.bin.state: &&truncated" ./train -d $tmp/corpus.txt -o $tmp/cut.bin --resume
# The options stored in the state (after the 56-byte fixed part, up to the parameters) zeroed:
# a corrupt state must be refused, not divide by a zero --eval-interval.
cp $tmp/m.bin $tmp/zero.bin
"$PYTHON" - $tmp/m.bin.state $tmp/zero.bin.state <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
header = len(d) - 3 * struct.unpack_from("<Q", d, 48)[0]
d[56:header] = bytes(header - 56)
open(sys.argv[2], "wb").write(d)
PY
row train "--resume from a state whose stored options are zeroed" "$tmp/zero.bin.state" ./train -d $tmp/corpus.txt -o $tmp/zero.bin --resume
# A state from a build before dropout (format version 1): refused, not misread.
cp $tmp/m.bin $tmp/v1.bin
"$PYTHON" - $tmp/m.bin.state $tmp/v1.bin.state <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<I", d, 8, 1)
open(sys.argv[2], "wb").write(d)
PY
row train "--resume from a version-1 state" "$tmp/v1.bin.state: a resume state of version 1, this build reads versions 3 and 4" ./train -d $tmp/corpus.txt -o $tmp/v1.bin --resume
# One byte of the weights in the state flipped: the CRC-32 at its end names the damage.
cp $tmp/m.bin $tmp/flip.bin
"$PYTHON" - $tmp/m.bin.state $tmp/flip.bin.state <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[len(d) // 2] ^= 1
open(sys.argv[2], "wb").write(d)
PY
row train "--resume from a state with one byte flipped" "$tmp/flip.bin.state: checksum mismatch: the file is damaged" ./train -d $tmp/corpus.txt -o $tmp/flip.bin --resume
row train "--resume with --max-iters below the checkpoint's step" "--max-iters 1: $tmp/m.bin is already at step 2" ./train -d $tmp/corpus.txt -o $tmp/m.bin --resume --max-iters 1
row train "--resume on another corpus" "the run was trained on a different corpus" ./train -d $tmp/short.txt -o $tmp/m.bin --resume
# Issue 29: empty paths, the files beside -o, --config, --sample-prompt, --progress, memory.
row train "-o ''" "--out: the path is empty" ./train -d $tmp/corpus.txt -o ''
row train "-d ''" "--data: the path is empty" ./train -d '' -o $tmp/m3.bin
row train "--init ''" "--init: the path is empty" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --init=
for sib in state csv lock; do
  echo "my notes" >$tmp/sib_$sib.bin.$sib
  row train "a MODEL.$sib that attn.c did not write, even with --force" \
    "$tmp/sib_$sib.bin.$sib exists and is not an attn.c" ./train -d $tmp/corpus.txt -o $tmp/sib_$sib.bin --force "${small[@]}"
done
cp $tmp/m.bin.state $tmp/orphan.bin.state
row train "a MODEL.state of an earlier run without MODEL, without --force" \
  "$tmp/orphan.bin.state exists, left by an earlier run of -o $tmp/orphan.bin; use --force" ./train -d $tmp/corpus.txt -o $tmp/orphan.bin "${small[@]}"
ln -sf loop2.bin $tmp/loop1.bin && ln -sf loop1.bin $tmp/loop2.bin
row train "-o a symbolic link in a loop" "$tmp/loop1.bin: too many levels of symbolic links" ./train -d $tmp/corpus.txt -o $tmp/loop1.bin
row train "--n-layer 1024 --n-embd 8192: more memory than the machine has" "GiB, this machine has&&GiB available (MemAvailable)" \
  ./train -d $tmp/corpus.txt -o $tmp/huge.bin --n-layer 1024 --n-embd 8192 --n-head 64
row train "--progress fancy" "--progress: 'fancy' is not plain, tty or auto" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --progress fancy
row train "--precision fp16" "--precision: 'fp16' is not f32 or bf16" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --precision fp16
row train "--resume of a float32 run with --precision bf16 (the run keeps its precision)" \
  "these options differ from it: --precision bf16 (saved: f32)" ./train -d $tmp/corpus.txt -o $tmp/m.bin --resume --precision bf16
# The state's stored --precision (Opts' int after its 14 ints and 7 floats, at byte 56 + 84) set
# to 2, the checksum made right again: refused as damaged, not trained in a precision it lacks.
cp $tmp/m.bin $tmp/prec.bin
"$PYTHON" - $tmp/m.bin.state $tmp/prec.bin.state <<'PY'
import struct, sys, zlib
d = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<i", d, 56 + 84, 2)
struct.pack_into("<I", d, len(d) - 4, zlib.crc32(bytes(d[:-4])))
open(sys.argv[2], "wb").write(d)
PY
row train "--resume from a state whose stored --precision is 2" "$tmp/prec.bin.state: saved options are inconsistent (damaged?)" \
  ./train -d $tmp/corpus.txt -o $tmp/prec.bin --resume
row train "--sample-prompt ''" "--sample-prompt: the prompt is empty" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --sample-prompt ''
row train "--sample-prompt longer than the context" "--sample-prompt: 40 tokens, which leave no room in the model's context of 32" \
  ./train -d $tmp/corpus.txt -o $tmp/m3.bin "${small[@]}" --block-size 32 --sample-prompt "$(head -c 40 $tmp/corpus.txt)"
row train "--sample-prompt with a character the corpus lacks" "--sample-prompt: cannot encode it with the model's vocabulary" \
  ./train -d $tmp/corpus.txt -o $tmp/m3.bin "${small[@]}" --sample-prompt 'ζ'
row train "--config a missing file" "$tmp/nope.conf: cannot open the config file" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --config $tmp/nope.conf
row train "--config given twice" "--config is given twice" ./train --config $tmp/a.conf --config $tmp/b.conf
# conf_row NAME TEXT WHAT WANT: a --config file $tmp/NAME.conf holding TEXT (printf's format), refused
conf_row() {
  printf "$2" >$tmp/$1.conf
  row train "--config with $3" "$4" ./train -d $tmp/corpus.txt -o $tmp/m3.bin --config $tmp/$1.conf
}
conf_row unknown 'n_layer = 2\nfrobnicate = 3\n' "an unknown option" "$tmp/unknown.conf:2: unknown option 'frobnicate'"
conf_row noeq '# model\nn_layer 2\n' "a line that is not name = value" "$tmp/noeq.conf:2: 'n_layer 2' is not 'name = value'"
conf_row badnum 'lr = fast\n' "a value that is not a number" "$tmp/badnum.conf:1: --lr: 'fast' is not a number"
conf_row badbool 'keep_best = maybe\n' "keep_best = maybe" "$tmp/badbool.conf:1: keep-best = 'maybe': give true or false"
conf_row resume 'resume = true\n' "resume" "$tmp/resume.conf:1: --resume is given on the command line, not in a config file"
conf_row novalue 'lr =\n' "an empty value" "$tmp/novalue.conf:1: lr has no value"
./train -d $tmp/corpus.txt -o $tmp/conf.bin "${small[@]}" >/dev/null 2>&1
printf 'n_layer = 2\nlr = 5e-3\n' >$tmp/other.conf
row train "--resume with a --config whose options differ from the saved run's" \
  "--n-layer 2 (saved: 1), --lr 0.005 (saved: 0.001)" ./train -d $tmp/corpus.txt -o $tmp/conf.bin --resume --config $tmp/other.conf

# ---- tools/convert.py
convert=("$PYTHON" tools/convert.py)
row convert.py "a missing file" "$tmp/nope.bin: no such file" "${convert[@]}" $tmp/nope.bin $tmp/o.bin
cp $SHARED/models/stories260K.bin $tmp/l2c_self.bin && chmod u+w $tmp/l2c_self.bin
row convert.py "the output the checkpoint itself" "$tmp/l2c_self.bin: writing it would overwrite the input" \
  "${convert[@]}" $tmp/l2c_self.bin $tmp/l2c_self.bin --tokenizer $SHARED/models/tok512.bin
row convert.py "a directory that is not a Hugging Face model" "$tmp: a directory without config.json is not a Hugging Face model" \
  "${convert[@]}" $tmp $tmp/o.bin
head -c 20 $SHARED/models/stories260K.bin >$tmp/l2c_20.bin
row convert.py "a 20-byte file (shorter than a llama2.c header)" "$tmp/l2c_20.bin: file of 20 bytes is too short" \
  "${convert[@]}" $tmp/l2c_20.bin $tmp/o.bin
row convert.py "an empty file" "$tmp/empty.txt: file of 0 bytes is too short" "${convert[@]}" $tmp/empty.txt $tmp/o.bin
row convert.py "a file of random bytes" "$tmp/random.bin: not a known checkpoint format" "${convert[@]}" $tmp/random.bin $tmp/o.bin
head -c 100000 $SHARED/models/stories260K.bin >$tmp/l2c_cut.bin
row convert.py "a llama2.c .bin cut short" "implies 1040156 or 1056540 bytes, file has 100000" "${convert[@]}" $tmp/l2c_cut.bin $tmp/o.bin
"$PYTHON" -c "import struct, sys; d = bytearray(open(sys.argv[1], 'rb').read()); struct.pack_into('<i', d, 0, -64); open(sys.argv[2], 'wb').write(d)" \
  $SHARED/models/stories260K.bin $tmp/l2c_neg.bin
row convert.py "a llama2.c .bin with dim -64" "header field dim = -64 is not a plausible size" "${convert[@]}" $tmp/l2c_neg.bin $tmp/o.bin
head -c 1000 $SHARED/models/llama2xs_ckpt.pt >$tmp/cut.pt
row convert.py "a .pt checkpoint cut short" "$tmp/cut.pt: cannot read the PyTorch file, truncated or corrupt" "${convert[@]}" $tmp/cut.pt $tmp/o.bin
# Pickles that run a command when loaded (tests/test_safe_pickle.py has more): refused, the command not run
mkdir -p $tmp/hf_evil
"$PYTHON" - $tmp <<'PY'
import collections, json, os, pickle, sys, torch
t = sys.argv[1]
class Call:
    def __reduce__(self):
        return os.system, ("touch %s/ran" % t,)
ck = {"model": {}, "model_args": {"n_layer": 1}, "config": {"x": Call()}}
torch.save(ck, t + "/evil.pt")
torch.save(ck, t + "/evil_legacy.pt", _use_new_zipfile_serialization=False)
torch.save(collections.OrderedDict(w=Call()), t + "/hf_evil/pytorch_model.bin")
json.dump({"model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "vocab_size": 16}, open(t + "/hf_evil/config.json", "w"))
pickle.dump({"itos": {0: Call()}}, open(t + "/meta.pkl", "wb"))
PY
for f in evil.pt evil_legacy.pt hf_evil; do
  row convert.py "a pickle that calls os.system ($f)" "the pickle asks for posix.system; refusing to run code from a checkpoint" \
    "${convert[@]}" $tmp/$f $tmp/o.bin
done
row convert.py "a meta.pkl that calls os.system" "$tmp/meta.pkl: the pickle asks for posix.system; refusing to run code" \
  "${convert[@]}" $SHARED/models/llama2xs_ckpt.pt $tmp/o.bin --tokenizer $tmp/meta.pkl
[ -e $tmp/ran ] && { failed=$((failed + 1)); echo "FAIL: convert.py: a pickle ran os.system"; }
row convert.py "a tokenizer for another vocabulary" "has 32000 pieces, more than the model's vocab_size 512" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tokenizer.bin
row convert.py "a tokenizer file of random bytes" "$tmp/random.bin: piece 0 has length" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $tmp/random.bin
row convert.py "--seq-len -5" "--seq-len -5: a context needs at least 1 position" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin --seq-len -5
row convert.py "--seq-len 0" "--seq-len 0: a context needs at least 1 position" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin --seq-len 0
row convert.py "--seq-len beyond the format's limit" "convert.py: --seq-len 2000000: exceeds this build's limit of 1048576 positions" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin --seq-len 2000000
row convert.py "a truncated attn.c model file as the source" "$tmp/cut1000.bin: file is 1000 bytes, the header implies" \
  "${convert[@]}" $tmp/cut1000.bin $tmp/o.bin
row convert.py "--weights q8_0 --group-size 48 (dim 64, hidden_dim 172)" \
  "--group-size 48: does not divide every quantised row of the model: dim 64, n_heads x head_dim 64, hidden_dim 172" \
  "${convert[@]}" $model $tmp/o.bin --weights q8_0 --group-size 48
row convert.py "--weights q8_0 --group-size 0" "convert.py: --group-size 0: outside [1, 65536]" \
  "${convert[@]}" $model $tmp/o.bin --weights q8_0 --group-size 0
row convert.py "--group-size without --weights q8_0" \
  "convert.py: --group-size 8: a group size applies only to Q8_0 weights (--weights q8_0)" \
  "${convert[@]}" $model $tmp/o.bin --group-size 8
row make_random.py "an output in a missing directory (the error names it, not its temporary file)" \
  "$tmp/no/m.bin: [Errno 2] No such file or directory: '$tmp/no/m.bin'" \
  "$PYTHON" tools/make_random.py --preset llama_gqa $tmp/no/m.bin
row convert.py "--quantize q4_0 of rows of 172 values (hidden_dim 172)" \
  "$model: tensor layers.0.w2: rows of 172 values are not whole Q4_0 blocks of 32 (llama-quantize refuses them too)" \
  "${convert[@]}" $model $tmp/o.bin --quantize q4_0
row convert.py "--quantize q8_0 of rows of 172 values (F16 fallbacks, over 9 bits a weight)" \
  "convert.py: --quantize q8_0: the matrices would take 10.09 bits a weight, more than 9&&--allow-f16-fallback" \
  "${convert[@]}" $model $tmp/o.bin --quantize q8_0
row convert.py "--quantize q4_0 of llama.cpp's Q4_K_M (requantising)" \
  "convert.py: --quantize q4_0: 15 matrices the checkpoint holds quantised already&&--allow-requantize" \
  "${convert[@]}" $SHARED/models/gguf/rand256-Q4_K_M.gguf $tmp/o.bin --quantize q4_0
row convert.py "--quantize q4_k_m --group-size 32" \
  "convert.py: --group-size 32: a group size applies only to our Q8_0 (--weights q8_0); llama.cpp's blocks have a fixed size" \
  "${convert[@]}" $model $tmp/o.bin --quantize q4_k_m --group-size 32
row convert.py "--export-torch of a truncated model" "$tmp/cut1000.bin: file is 1000 bytes, the header implies" \
  "${convert[@]}" --export-torch $tmp/cut1000.bin $tmp/o.pt
row convert.py "--export-torch of random bytes" "$tmp/random.bin: bad magic" "${convert[@]}" --export-torch $tmp/random.bin $tmp/o.pt
row convert.py "an output past ulimit -f (a full disk)" "$tmp/o.bin: cannot write: File too large" \
  "${limited[@]}" "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin
row convert.py "--export-torch past ulimit -f (a full disk)" "$tmp/full.pt: cannot write: File too large" \
  "${limited[@]}" "${convert[@]}" --export-torch $model $tmp/full.pt
row convert.py "an output in a missing directory" "$tmp/no/o.bin: cannot write" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/no/o.bin --tokenizer $SHARED/models/tok512.bin
# ./train's output policy (tests/test_output_policy.py has more): replaced only with --force, and only the tool's own files
echo "my notes" >$tmp/notes.txt
row convert.py "OUT a file that is not a model, even with --force" \
  "$tmp/notes.txt: exists and is not an attn.c model file; refusing to replace it" \
  "${convert[@]}" $model $tmp/notes.txt --force
row convert.py "OUT an existing model without --force" "$model: exists; give --force to replace it" \
  "${convert[@]}" $SHARED/models/stories260K.bin $model --tokenizer $SHARED/models/tok512.bin
cp $SHARED/models/llama2xs_ckpt.pt $tmp/theirs.pt
row convert.py "--export-torch over a torch file it did not write, with --force" \
  "$tmp/theirs.pt: exists and is not a PyTorch file that --export-torch wrote; refusing to replace it" \
  "${convert[@]}" --export-torch $model $tmp/theirs.pt --force
"${convert[@]}" $model --export-hf $tmp/export 2>/dev/null
row convert.py "--export-hf over a former export without --force" "$tmp/export: exists; give --force to replace it" \
  "${convert[@]}" $model --export-hf $tmp/export
cp -r $tmp/export $tmp/downloaded && rm $tmp/downloaded/attn_export.json
row convert.py "--export-hf over a downloaded checkpoint (an export's files, no attn_export.json), with --force" \
  "$tmp/downloaded: exists and is not a folder that --export-hf wrote (it has no attn_export.json)" \
  "${convert[@]}" $model --export-hf $tmp/downloaded --force
row convert.py "--export-hf a model with experts" \
  "$tmp/moe.bin: no Hugging Face equivalent: a mixture of experts (n_experts 8), which --export-hf does not write" \
  "${convert[@]}" --export-hf $tmp/moe.bin $tmp/moe_hf
row convert.py "- as the checkpoint" "-: a checkpoint is not read from standard input; give its path" \
  "${convert[@]}" - $tmp/o.bin
row convert.py "--tokenizer -" "-: a tokenizer is not read from standard input; give its path" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer -
row convert.py "--export-hf -" "-: is standard output, which cannot be a directory" \
  "${convert[@]}" $model --export-hf -
row reference.py "--logits - with --greedy (two outputs on standard output)" \
  "--logits -: standard output would hold the --ppl-tokens or --greedy text too" \
  "$PYTHON" tools/reference.py $model --tokens 1 --logits - --greedy 2
row make_random.py "- as a Hugging Face folder" "-: is standard output, which cannot be a directory" \
  "$PYTHON" tools/make_random.py - --hf-gpt2
# the other tools' outputs, as convert.py's: an existing one only with --force, another kind never
printf 'step,train_loss,val_loss,lr,tokens_per_sec\n0,4.5,4.6,0.001,100.0\n' >$tmp/log.csv
"$PYTHON" tools/plot.py $tmp/log.csv -o $tmp/loss.png >/dev/null
row plot.py "-o an existing picture without --force" "$tmp/loss.png: exists; give --force to replace it" \
  "$PYTHON" tools/plot.py $tmp/log.csv -o $tmp/loss.png
row plot.py "-o a file that is no picture (the log itself), with --force" \
  "$tmp/log.csv: exists and is not a picture; refusing to replace it" \
  "$PYTHON" tools/plot.py $tmp/log.csv -o $tmp/log.csv --force
row plot.py "-o X.pdf over a PNG, with --force" "$tmp/loss.pdf: exists and is not a PDF picture; refusing to replace it" \
  sh -c 'cp "$1/loss.png" "$1/loss.pdf" && exec "$2" tools/plot.py "$1/log.csv" -o "$1/loss.pdf" --force' sh $tmp "$PYTHON"
row plot.py "- twice (standard input is read once)" "-: standard input is read once: give the other file by its path" \
  sh -c 'exec "$2" tools/plot.py - - -o "$1/twice.png" <"$1/log.csv"' sh $tmp "$PYTHON"
row plot_attention.py "-o - and --html - (two outputs on standard output)" \
  "-: standard output cannot hold both the picture and the page" \
  "$PYTHON" tools/plot_attention.py $tmp/attention.bin -o - --html -
row plot_attention.py "--html over a file it did not write, with --force" \
  "$tmp/notes.txt: exists and is not a page plot_attention.py wrote; refusing to replace it" \
  "$PYTHON" tools/plot_attention.py $tmp/attention.bin --html $tmp/notes.txt --force
"$PYTHON" tools/reference.py $model --tokens 1,2 --logits $tmp/logits.npy
row reference.py "--logits over an existing .npy without --force" "$tmp/logits.npy: exists; give --force to replace it" \
  "$PYTHON" tools/reference.py $model --tokens 1,2 --logits $tmp/logits.npy
row reference.py "--logits over a file that is not a .npy, with --force" \
  "$tmp/stories260K.bin.npy: exists and is not a .npy file; refusing to replace it" \
  sh -c 'cp "$1/notes.txt" "$1/stories260K.bin.npy" && exec "$2" tools/reference.py "$1/stories260K.bin" --tokens 1 --logits "$1/stories260K.bin" --force' sh $tmp "$PYTHON"
row reference.py "- as the model" "-: a model is not read from standard input; give its path" \
  "$PYTHON" tools/reference.py - --tokens 1
row reference.py "--greedy without --tokens" "--logits and --greedy need --tokens" \
  "$PYTHON" tools/reference.py $model --greedy 3
row make_random.py "OUT an existing model without --force" "$model: exists; give --force to replace it" \
  "$PYTHON" tools/make_random.py $model
row make_random.py "OUT a file that is not a model, with --force" \
  "$tmp/notes.txt: exists and is not an attn.c model file; refusing to replace it" \
  "$PYTHON" tools/make_random.py $tmp/notes.txt --force
row make_random.py "a folder it did not write (an export), with --force" \
  "$tmp/export: exists and is not a folder that make_random.py wrote (it has no attn_random.json)" \
  "$PYTHON" tools/make_random.py $tmp/export --hf-gpt2 --preset gpt2 --force
row make_random.py "--tokenizer -" "-: a tokenizer is not read from standard input; give its path" \
  "$PYTHON" tools/make_random.py $tmp/r.bin --tokenizer -
mkdir -p $tmp/py && ln -sf "$(command -v "$PYTHON")" $tmp/py/python3
row convert.py "a python3 without numpy (python3 -S: no dist-packages)" \
  "numpy is missing from this Python (&&/py/python3): run the tools with /usr/bin/python3" \
  $tmp/py/python3 -S tools/convert.py $model $tmp/o.bin
# Hugging Face directories (a small Llama, float32) with one thing wrong each
"$PYTHON" - $tmp <<'PY'
import json, os, shutil, struct, sys
sys.path.insert(0, "tools")
from attn import fake_hf, random_models
from attn import safetensors
t = sys.argv[1]
base = os.path.join(t, "hf")
fake_hf.write_hf_llama(base, dict(random_models.PRESETS["llama_gqa"], vocab_size=300, seq_len=32), seed=1)
def copy(name, edit_config=None):
    d = os.path.join(t, name)
    shutil.copytree(base, d)
    if edit_config:
        c = json.load(open(os.path.join(d, "config.json")))
        edit_config(c)
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    return d
copy("hf_yarn", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                 "original_max_position_embeddings": 32}))
def tokenizer_json(d, n, pre):
    enc, merges = fake_hf.synthetic_gpt2_vocab(n)
    j = {"model": {"type": "BPE", "vocab": json.loads(enc), "merges": merges.splitlines()[1:]},
         "pre_tokenizer": pre, "normalizer": None, "added_tokens": [], "decoder": {"type": "ByteLevel"}}
    os.remove(os.path.join(d, "tokenizer.bin"))
    json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"))
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
tokenizer_json(copy("hf_tok400"), 400, byte_level)
tokenizer_json(copy("hf_pre"), 300, {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\w+|[^\\w]+"}, "behavior": "Isolated", "invert": False},
    dict(byte_level, use_regex=False)]})
# byte-level without a piece for "A" (0x41), which UTF-8 text holds: its id goes to a new piece
d = copy("hf_no41")
tokenizer_json(d, 300, byte_level)
j = json.load(open(os.path.join(d, "tokenizer.json")))
j["model"]["vocab"]["\u0120" * 12] = j["model"]["vocab"].pop("A")
j["model"]["merges"] = [m for m in j["model"]["merges"] if "A" not in m.split(" ")]
json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"))
d = copy("hf_bf16")
sd = safetensors.read_safetensors(os.path.join(d, "model.safetensors"))
sd["model.layers.1.mlp.up_proj.weight"] = sd["model.layers.1.mlp.up_proj.weight"][:, :63]
safetensors.write_safetensors(os.path.join(d, "model.safetensors"), sd, "BF16")
st = os.path.join(d, "model.safetensors")  # the header says 64 columns, the bytes hold 63
data = open(st, "rb").read()
n = struct.unpack_from("<Q", data)[0]
head = data[8:8 + n].replace(b"[172,63]", b"[172,64]")
open(st, "wb").write(data[:8] + head + data[8 + n:])
PY
"$PYTHON" - $tmp $SHARED/models/llama2xs_ckpt.pt <<'PY'
import json, os, shutil, sys
sys.path.insert(0, "tools")
from attn import fake_hf, random_models, safetensors
t = sys.argv[1]
def edited(name, edit):
    d = os.path.join(t, name)
    shutil.copytree(os.path.join(t, "hf"), d)
    c = json.load(open(os.path.join(d, "config.json")))
    edit(c)
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
edited("hf_rope_dims", lambda c: c.update(partial_rotary_factor=0.01))
edited("hf_long", lambda c: c.update(max_position_embeddings=1 << 24))
edited("hf_awq", lambda c: c.update(quantization_config={"quant_method": "awq", "bits": 4}))
import torch
ck = torch.load(sys.argv[2], map_location="cpu")
ck["model_args"]["rope_theta"] = 5e5
torch.save(ck, os.path.join(t, "l2c_theta.pt"))
edited("hf_llama3_nolow", lambda c: c.update(rope_scaling={"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                                                           "original_max_position_embeddings": 16}))
# a Mistral whose every layer attends to its last 5 positions, with linear RoPE scaling
mistral = dict(random_models.PRESETS["llama_gqa"], vocab_size=300, seq_len=32, sliding_window=5, global_every=4,
               rope_local_theta=10000.0)
fake_hf.write_hf_llama(os.path.join(t, "hf_mistral_scaled"), mistral, seed=1, model_type="mistral")
c = json.load(open(os.path.join(t, "hf_mistral_scaled", "config.json")))
c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
json.dump(c, open(os.path.join(t, "hf_mistral_scaled", "config.json"), "w"))
d = os.path.join(t, "hf_f16_big")
shutil.copytree(os.path.join(t, "hf"), d)
sd = {k: v.copy() for k, v in safetensors.read_safetensors(os.path.join(d, "model.safetensors")).items()}
sd["model.layers.0.mlp.up_proj.weight"][2, 3] = 70000.0
safetensors.write_safetensors(os.path.join(d, "model.safetensors"), sd)
PY
row convert.py "a llama2.c train.py checkpoint whose model_args has a key ModelArgs lacks" \
  "$tmp/l2c_theta.pt: model_args rope_theta: not among llama2.c's ModelArgs's (dim, n_layers, n_heads, n_kv_heads, vocab_size, hidden_dim, multiple_of, norm_eps, max_seq_len, dropout), so what it would do is unknown" \
  "${convert[@]}" $tmp/l2c_theta.pt $tmp/o.bin --tokenizer $SHARED/models/tok512.bin
row convert.py "a Hugging Face directory of quantised weights (quantization_config)" \
  "$tmp/hf_awq/config.json: quantization_config (quant_method \"awq\"): quantised Hugging Face weights are not supported by this build" \
  "${convert[@]}" $tmp/hf_awq $tmp/o.bin
row convert.py "a Hugging Face partial_rotary_factor that leaves RoPE no pair" \
  "$tmp/hf_rope_dims/config.json: partial_rotary_factor gives RoPE 0 of a head's 8 dimensions; it needs an even number from 2 to 8" \
  "${convert[@]}" $tmp/hf_rope_dims $tmp/o.bin
row convert.py "a Hugging Face max_position_embeddings beyond the format's limit" \
  "$tmp/hf_long: its context of 16777216 positions exceeds this build's limit of 1048576: choose a shorter one with --seq-len" \
  "${convert[@]}" $tmp/hf_long $tmp/o.bin
row convert.py "a Hugging Face llama3 rope_scaling without low_freq_factor" \
  "$tmp/hf_llama3_nolow/config.json: rope_scaling low_freq_factor is missing" "${convert[@]}" $tmp/hf_llama3_nolow $tmp/o.bin
row convert.py "a Mistral with rope_scaling and a sliding_window below the context" \
  "$tmp/hf_mistral_scaled/config.json: rope_scaling with sliding_window 5 below the context 32&&--seq-len 5 or less" \
  "${convert[@]}" $tmp/hf_mistral_scaled $tmp/o.bin
row convert.py "--weights f16 with a weight float16 cannot hold" \
  "$tmp/hf_f16_big: tensor model.layers.0.mlp.up_proj.weight: a weight of magnitude 70000 does not fit float16" \
  "${convert[@]}" $tmp/hf_f16_big $tmp/o.bin --weights f16
row convert.py "a Hugging Face config.json with rope_scaling yarn" \
  "$tmp/hf_yarn/config.json: rope_scaling rope_type 'yarn' is not supported by this build" \
  "${convert[@]}" $tmp/hf_yarn $tmp/o.bin
row convert.py "a tokenizer.json with a pre-tokenizer this build lacks" "$tmp/hf_pre/tokenizer.json: pre_tokenizer" \
  "${convert[@]}" $tmp/hf_pre $tmp/o.bin
row convert.py "a tokenizer.json of 400 pieces for config.json's vocab_size 300" \
  "$tmp/hf_tok400/tokenizer.json: piece 'wa' (id 300) is past the model's vocab_size 300, and text would produce it" \
  "${convert[@]}" $tmp/hf_tok400 $tmp/o.bin
# a byte-level vocabulary without a piece for "A" converts, with a note; only a text needing it is refused
"${convert[@]}" $tmp/hf_no41 $tmp/no41.bin 2>/dev/null
row run "a prompt needing a byte the vocabulary has no piece for (a tokenizer.json without \"A\")" \
  "run: prompt: byte 0x41 at offset 1 has no piece in this vocabulary" ./run $tmp/no41.bin -i "xA" -n 2
row convert.py "a bfloat16 tensor whose bytes disagree with its shape" \
  "$tmp/hf_bf16/model.safetensors: tensor model.layers.1.mlp.up_proj.weight: BF16 of shape [172, 64] takes 22016 bytes, but its data_offsets" \
  "${convert[@]}" $tmp/hf_bf16 $tmp/o.bin

# ---- convert.py: damaged GGUF files (tests/gguf_bad/ holds more; tests/test_gguf.py reads them all)
head -c 600000 $SHARED/models/gguf/stories260K-F32.gguf >$tmp/cut.gguf
row convert.py "a GGUF model cut in the middle of its tensor data" \
  "$tmp/cut.gguf: tensor '" "${convert[@]}" $tmp/cut.gguf $tmp/o.bin
row convert.py "a GGUF file cut inside its tokenizer.ggml.tokens array" \
  "tests/gguf_bad/truncated-metadata.gguf: metadata 'tokenizer.ggml.tokens': array of 4 strings is more than the file could hold" \
  "${convert[@]}" tests/gguf_bad/truncated-metadata.gguf $tmp/o.bin
row convert.py "a GGUF header's tensor count inflated to 2^40" \
  "tests/gguf_bad/inflated-tensor-count.gguf: header: tensor count 1099511627776 is more than the file could hold" \
  "${convert[@]}" tests/gguf_bad/inflated-tensor-count.gguf $tmp/o.bin
row convert.py "a GGUF string array's length inflated to 2^40" \
  "tests/gguf_bad/inflated-array-length.gguf: metadata 'tokenizer.ggml.tokens': array of 1099511627776 strings" \
  "${convert[@]}" tests/gguf_bad/inflated-array-length.gguf $tmp/o.bin
row convert.py "a GGUF metadata value of unknown type 13" \
  "tests/gguf_bad/wrong-value-type.gguf: metadata 'general.architecture': unknown value type 13" \
  "${convert[@]}" tests/gguf_bad/wrong-value-type.gguf $tmp/o.bin
row convert.py "a GGUF tensor of unknown type 99" \
  "tests/gguf_bad/wrong-tensor-type.gguf: tensor 'blk.0.attn_q.weight': unknown type 99" \
  "${convert[@]}" tests/gguf_bad/wrong-tensor-type.gguf $tmp/o.bin
"$PYTHON" - $SHARED/models/gguf/rand256-Q4_K_M.gguf $tmp/iq3_s.gguf <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
at = d.index(b"blk.0.attn_q.weight") + len(b"blk.0.attn_q.weight")  # then n_dims, dims, type
struct.pack_into("<I", d, at + 4 + 8 * struct.unpack_from("<I", d, at)[0], 21)  # IQ3_S: fewer bytes, still inside
open(sys.argv[2], "wb").write(d)
PY
row convert.py "a GGUF model with a tensor of a type this build does not convert (IQ3_S)" \
  "$tmp/iq3_s.gguf: tensor blk.0.attn_q.weight has type IQ3_S" "${convert[@]}" $tmp/iq3_s.gguf $tmp/o.bin

# GGUF files for convert.py (tools/attn/sources/gguf.py): llama.cpp's rand256 with one thing changed
"$PYTHON" - $SHARED/models/gguf/rand256-F32.gguf "$tmp" <<'PY'
import sys
sys.path.insert(0, "tools")
from attn import gguf_file as gguf, gguf_write
src, d = sys.argv[1], sys.argv[2]
def variant(name, meta):
    with gguf.GGUFFile(src) as f, gguf_write.GGUFWriter("%s/%s" % (d, name)) as w:
        for k, v in dict(f.metadata, **meta).items():
            w.add(k, v, None if k in meta else f.metadata_types[k])
        for t in f.tensors.values():
            w.add_tensor(t.name, t.shape, t.type)
        for t in f.tensors.values():
            w.write_tensor(t.name, f.raw(t))
variant("arch.gguf", {"general.architecture": "mamba"})
variant("pre.gguf", {"tokenizer.ggml.pre": "deepseek-llm"})
PY
# and with a tensor changed, added or removed: messages name GGUF's keys and tensors
"$PYTHON" - $SHARED/models/gguf/rand256-F32.gguf "$tmp" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tools")
from attn import gguf_file as gguf, gguf_write
src, d = sys.argv[1], sys.argv[2]
def variant(name, meta=(), tensors=(), drop=()):
    meta, tensors = dict(meta), dict(tensors)
    with gguf.GGUFFile(src) as f:
        m = {k: (v, f.metadata_types[k]) for k, v in f.metadata.items()}
        t = {k: ("F32", f.dequantize(v)) for k, v in f.tensors.items() if k not in drop}
    m.update((k, (v, None)) for k, v in meta.items())
    t.update((k, ("F32", v)) for k, v in tensors.items())
    gguf_write.write_gguf("%s/%s" % (d, name), m, t)
variant("blocks.gguf", {"llama.block_count": 3})
variant("heads.gguf", {"llama.attention.head_count_kv": 3})
variant("embd.gguf", tensors={"token_embd.weight": np.zeros((512, 128), np.float32)})
variant("noup.gguf", drop=["blk.1.ffn_up.weight"])
variant("nan.gguf", tensors={"blk.0.ffn_up.weight": np.full((768, 256), np.nan, np.float32)})
variant("kbias.gguf", tensors={"blk.0.ffn_up.bias": np.zeros(700, np.float32)})
variant("attnf.gguf", {"llama.rope.scaling.attn_factor": 0.9})
variant("rot.gguf", {"llama.rope.dimension_count": 63})
PY
row convert.py "a GGUF file whose block_count the tensors contradict" \
  "$tmp/blocks.gguf: llama.block_count 3, but the weights hold layers 0, 1" "${convert[@]}" $tmp/blocks.gguf $tmp/o.bin
row convert.py "a GGUF file whose head_count_kv does not divide head_count" \
  "$tmp/heads.gguf: llama.attention.head_count_kv 3 does not divide llama.attention.head_count 4" \
  "${convert[@]}" $tmp/heads.gguf $tmp/o.bin
row convert.py "a GGUF token_embd.weight narrower than embedding_length" \
  "$tmp/embd.gguf: token_embd.weight has shape (512, 128), expected (512, 256) from token_embd.weight's rows 512, llama.embedding_length 256" \
  "${convert[@]}" $tmp/embd.gguf $tmp/o.bin
row convert.py "a GGUF file without blk.1.ffn_up.weight" "$tmp/noup.gguf: missing tensor blk.1.ffn_up.weight" \
  "${convert[@]}" $tmp/noup.gguf $tmp/o.bin
row convert.py "a GGUF tensor of NaNs" "$tmp/nan.gguf: tensor blk.0.ffn_up.weight has 196608 non-finite values" \
  "${convert[@]}" $tmp/nan.gguf $tmp/o.bin
row convert.py "a GGUF feed-forward bias of the wrong size" \
  "$tmp/kbias.gguf: blk.0.ffn_up.bias has shape (700,), expected (768,) from llama.feed_forward_length 768" \
  "${convert[@]}" $tmp/kbias.gguf $tmp/o.bin
row convert.py "a GGUF file with an odd rope.dimension_count" \
  "$tmp/rot.gguf: llama.rope.dimension_count gives RoPE 63 of a head's 64 dimensions; it needs an even number from 2 to 64" \
  "${convert[@]}" $tmp/rot.gguf $tmp/o.bin
row convert.py "a GGUF file with rope.scaling.attn_factor 0.9" \
  "$tmp/attnf.gguf: llama.rope.scaling.attn_factor 0.9 is not supported by this build" "${convert[@]}" $tmp/attnf.gguf $tmp/o.bin
# a Qwen3-MoE GGUF whose merged expert tensor holds 3 of its 4 experts, and one with an absurd expert_count
"$PYTHON" - "$tmp" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tools")
from attn import gguf_write
d = sys.argv[1]
for name, count, experts in (("moe_cut.gguf", 4, 3), ("moe_count.gguf", 4294967295, 4)):
    a = "qwen3moe."
    meta = {"general.architecture": "qwen3moe", a + "context_length": 64, a + "embedding_length": 64,
            a + "feed_forward_length": 128, a + "block_count": 1, a + "attention.head_count": 2,
            a + "attention.layer_norm_rms_epsilon": 1e-6, a + "expert_count": (count, 4), a + "expert_used_count": 2,
            a + "expert_feed_forward_length": 32}
    gguf_write.write_gguf("%s/%s" % (d, name), meta, {"token_embd.weight": ("F32", np.zeros((16, 64), np.float32)),
                          "blk.0.ffn_up_exps.weight": ("F32", np.zeros((experts, 32, 64), np.float32))})
PY
row convert.py "a GGUF mixture of experts whose merged expert tensor holds 3 of its 4 experts" \
  "$tmp/moe_cut.gguf: tensor blk.0.ffn_up_exps.weight has shape (3, 32, 64), expected 4 experts of [rows, cols] from qwen3moe.expert_count 4" \
  "${convert[@]}" $tmp/moe_cut.gguf $tmp/o.bin
row convert.py "a GGUF mixture of experts with expert_count 4294967295" \
  "$tmp/moe_count.gguf: metadata qwen3moe.expert_count 4294967295 exceeds this build's limit 1024" \
  "${convert[@]}" $tmp/moe_count.gguf $tmp/o.bin
row convert.py "a GGUF file of an architecture this build lacks" \
  "$tmp/arch.gguf: general.architecture 'mamba' is not supported" "${convert[@]}" $tmp/arch.gguf $tmp/o.bin
row convert.py "a GGUF file with an unknown tokenizer.ggml.pre" \
  "$tmp/pre.gguf: tokenizer.ggml.pre 'deepseek-llm' with model llama is not one this build reproduces" \
  "${convert[@]}" $tmp/pre.gguf $tmp/o.bin
# ---- ./run: chat (issue 19). Llama 2's format needs only BOS and EOS, so stories260K can chat in it.
printf '[{"role": "user", "content": "hi"}, ]' >$tmp/chat_comma.json
row run "a --chat file with a comma before ]" "$tmp/chat_comma.json: line 1, column 37: expected a message object" \
  ./run $model --chat $tmp/chat_comma.json
printf '[{"role": "user", "content": "hi"}] []' >$tmp/chat_trailing.json
row run "a --chat file with bytes after the array" "$tmp/chat_trailing.json: line 1, column 37: trailing bytes" \
  ./run $model --chat $tmp/chat_trailing.json
printf '[{"role": "user", "content": "\\ud800 alone"}]' >$tmp/chat_surrogate.json
row run "a --chat file with a lone surrogate escape" "$tmp/chat_surrogate.json: line 1, column 31: \\uD800 is a high surrogate" \
  ./run $model --chat $tmp/chat_surrogate.json
printf '[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]' >$tmp/chat_nested.json
row run "a --chat message whose content is a list" "$tmp/chat_nested.json: line 1, column 30: message 1: content must be a string, not an array" \
  ./run $model -m chat --chat $tmp/chat_nested.json
printf '[{"role": "user", "content": "\xff"}]' >$tmp/chat_utf8.json
row run "a --chat file that is not UTF-8" "$tmp/chat_utf8.json: line 1, column 31: invalid UTF-8" \
  ./run $model --chat $tmp/chat_utf8.json
printf '[{"role": "tool", "content": "42"}]' >$tmp/chat_role.json
row run "a --chat message with an unknown role" "message 1: unknown role \"tool\" (the roles are system, user and assistant)" \
  ./run $model -m logits -o $tmp/o.bin --chat $tmp/chat_role.json
printf '[{"role": "user"}]' >$tmp/chat_nocontent.json
row run "a --chat message without content" "$tmp/chat_nocontent.json: line 1, column 2: message 1: no \"content\"" \
  ./run $model --chat $tmp/chat_nocontent.json
row run "-m chat with a model file that has no chat template" "has no chat template; name its format with --chat-template NAME" \
  ./run $model -m chat
row run "an unknown --chat-template" "--chat-template vicuna: &&unknown" \
  ./run $model -m chat --chat-template vicuna
row run "--chat-template chatml with a tokenizer that lacks its tokens" "--chat-template chatml: &&<|im_start|>" \
  ./run $model -m chat --chat-template chatml
for i in $(seq 200); do printf 'word '; done >$tmp/chat_long.txt
echo >>$tmp/chat_long.txt
row run "a piped chat turn longer than the context (refused by its length, untokenized)" \
  "standard input: line 1: the newest turn is 1000 bytes, at least 142 tokens, more than the 16 the context leaves for it" \
  bash -c "./run $model -m chat --chat-template llama2 -c 32 <$tmp/chat_long.txt"
printf '[{"role": "user", "content": "%s"}]' "$(cat $tmp/chat_long.txt)" >$tmp/chat_long.json
row run "a --chat conversation longer than the context (refused by its length, untokenized)" \
  "$tmp/chat_long.json: at least 142 tokens by its length, longer than the context of 32 set with -c" \
  ./run $model --chat $tmp/chat_long.json --chat-template llama2 -c 32
printf '[{"role": "user", "content": "%s"}]' "$(for i in $(seq 40); do printf 'a b '; done)" >$tmp/chat_long2.json
row run "a --chat conversation longer than the context as tokenized" \
  "$tmp/chat_long2.json: 96 tokens, longer than the context of 32 set with -c" \
  ./run $model --chat $tmp/chat_long2.json --chat-template llama2 -c 32
head -c 200000 $SHARED/data/tinyshakespeare.txt >$tmp/prompt_big.txt
row run "a prompt file far longer than the context (refused by its length, untokenized)" \
  "$tmp/prompt_big.txt: at least 28571 tokens by its length, longer than the model's context of 512" \
  ./run $model -f $tmp/prompt_big.txt
printf 'hi\n"""\nan open block\n' >$tmp/chat_block.txt
row run "a piped chat whose \"\"\" block is never closed" "standard input: line 3: the block opened with \"\"\" is not closed" \
  bash -c "./run $model -m chat --chat-template llama2 -n 2 -s 1 -q <$tmp/chat_block.txt"
row run "--no-think on a model whose chat format is not Qwen3's" "--no-think: only the qwen3 chat format thinks; this one is llama2" \
  ./run $model -m chat --chat-template llama2 --no-think
row run "--think without -m chat or --chat" "--think: thinking is part of a chat format: -m chat or --chat" \
  ./run $model --think
row run "--no-history outside -m chat" "--no-history: only -m chat keeps a history" ./run $model -i hi --no-history
row run "--samples 0" "--samples 0: expected a whole number in [1, 1048576]" ./run $model -i hi --samples 0
row run "--samples in -m chat" "--samples: -m chat draws a reply again with /regen" ./run $model -m chat --samples 2
row run "--samples in -m ppl" "--samples shapes generation; -m ppl does not generate" \
  ./run $model -m ppl -f $tmp/chat_block.txt --samples 2
# ---- speculative decoding (issue 45): --lookup, --draft and its draft model
row run "--lookup 0" "--lookup 0: expected a whole number in [1, 1024]" ./run $model -i hi --lookup 0
row run "--draft-max 0" "--draft-max 0: expected a whole number in [1, 255]" ./run $model -i hi --lookup 2 --draft-max 0
row run "--draft-max without --lookup or --draft" "--draft-max bounds the drafts of --lookup or --draft" \
  ./run $model -i hi --draft-max 4
row run "--draft-p-min 1.5" "--draft-p-min 1.5: expected a number in [0, 1]" ./run $model -i hi --draft $model --draft-p-min 1.5
row run "--draft-p-min -0.1" "--draft-p-min -0.1: expected a number in [0, 1]" ./run $model -i hi --draft $model --draft-p-min -0.1
row run "--draft-p-min without --draft" "--draft-p-min is the --draft model's confidence; give --draft MODEL" \
  ./run $model -i hi --lookup 2 --draft-p-min 0.5
row run "--lookup in -m ppl" "--lookup: only -m generate and -m chat speculate" ./run $model -m ppl -f $tmp/chat_block.txt --lookup 2
row run "--draft: a file that is no model" "--draft $tmp/random.bin: &&not an attn.c model file" \
  ./run $model -i hi --draft $tmp/random.bin
"$PYTHON" tools/make_random.py --preset llama_gqa --set vocab_size=300 --set seq_len=512 $tmp/vocab300.bin >/dev/null
row run "--draft: a model of another vocabulary" "not the target's tokenizer: 300 tokens where the target has 512" \
  ./run $model -i hi --draft $tmp/vocab300.bin
"$PYTHON" tools/convert.py $SHARED/models/llama2xs_model.bin $tmp/context256.bin --tokenizer $SHARED/models/tok512.bin 2>/dev/null
row run "--draft: a model of another context length" "its context is 256 positions, the target's 512" \
  ./run $model -i hi --draft $tmp/context256.bin
# ---- chat templates (issue 19): convert.py's chat section, and the loader's checks of it
mkdir -p $tmp/hf_tpl && cp $tmp/hf/* $tmp/hf_tpl/
printf '%s' '{"chat_template": "{{ bos_token }}{% for message in messages %}{{ '"'"'[INST] '"'"' + message['"'"'content'"'"'] + '"'"' [/INST]'"'"' }}{% endfor %}"}' \
  >$tmp/hf_tpl/tokenizer_config.json
# a template of no known family is kept as text, with family 0: -m chat then asks for --chat-template
"${convert[@]}" $tmp/hf_tpl $tmp/tpl0.bin 2>/dev/null
row run "-m chat on a model whose chat template is of no known family" \
  "$tmp/tpl0.bin: the model's chat template is of no family this build formats; name its format with --chat-template NAME (chatml, qwen3, llama3, llama2, gemma, zephyr, mistral)" \
  ./run $tmp/tpl0.bin -m chat
row convert.py "--chat-template nosuch" "argument --chat-template: invalid choice: 'nosuch'" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin --chat-template nosuch
row convert.py "--chat-template chatml for a tokenizer without <|im_start|>" \
  "chat template chatml needs the special token <|im_start|>, which the tokenizer does not have" \
  "${convert[@]}" $SHARED/models/stories260K.bin $tmp/o.bin --tokenizer $SHARED/models/tok512.bin --chat-template chatml
"${convert[@]}" $SHARED/models/stories260K.bin $tmp/chat.bin --tokenizer $SHARED/models/tok512.bin --chat-template llama2 2>/dev/null
"$PYTHON" - $tmp/chat.bin $tmp/chat_bad.bin <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
at = struct.unpack_from("<Q", data, 184)[0]  # chat_offset: family, n_ids, then id 0 (BOS)
struct.pack_into("<i", data, at + 8, 99999)
open(sys.argv[2], "wb").write(data)
PY
sealed $tmp/chat_bad.bin
"$PYTHON" - $tmp/chat.bin $tmp/chat_tlen.bin <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
at, n = struct.unpack_from("<QQ", data, 184)  # the section ends in template_len (0: no template)
struct.pack_into("<I", data, at + n - 4, 5)
open(sys.argv[2], "wb").write(data)
PY
sealed $tmp/chat_tlen.bin
row run "-m chat on a chat section whose template_len runs past its end" \
  "$tmp/chat_tlen.bin: chat template: chat section: its template is 5 bytes, but 0 remain" ./run $tmp/chat_tlen.bin -m chat
row convert.py "a model file with one weight bit flipped" "$tmp/damaged.bin: checksum mismatch: the file is damaged" \
  "${convert[@]}" $tmp/damaged.bin $tmp/o.bin
row convert.py "a model file whose chat section has an id outside the vocabulary" \
  "$tmp/chat_bad.bin: chat section: id 0 is 99999, outside the vocabulary of 512" "${convert[@]}" $tmp/chat_bad.bin $tmp/o.bin
row run "-m chat on a model file whose chat section has an id outside the vocabulary" \
  "$tmp/chat_bad.bin: &&chat section: id 0 is 99999, outside the vocabulary of 512" ./run $tmp/chat_bad.bin -m chat
# --export-torch's "chat" entry (the section's fields), read back as a model file's section is
"${convert[@]}" --export-torch $tmp/chat.bin $tmp/chat.pt 2>/dev/null
"$PYTHON" - $tmp/chat.pt $tmp/chat_bad.pt <<'PY'
import sys, torch
ck = torch.load(sys.argv[1])
ck["chat"]["ids"][0] = 99999
torch.save(ck, sys.argv[2])
PY
row convert.py "an --export-torch file whose chat entry has an id outside the vocabulary" \
  "$tmp/chat_bad.pt: its chat entry is not a chat section (ValueError: chat section: id 0 is 99999, outside the vocabulary of 512)" \
  "${convert[@]}" $tmp/chat_bad.pt $tmp/o.bin
patched $tmp/chat_misplaced.bin "<I" 4 4 "<Q" 184 300 "<Q" 192 16
row run "a chat section that does not follow the tokenizer blob" "does not follow the tokenizer blob" \
  ./run $tmp/chat_misplaced.bin -i hi -n 1

# ---- MPI (issue 20): make MPI=1, the MPI build (tests/bin/train_mpi) and the single build under
# mpirun. mpirun -q leaves out its own notice that a rank failed: what remains is the ranks' lines.
# make's status for any failure is 2; the row counts it as the 1 of the others.
row make "make MPI=1 without Open MPI's mpicc (MPICC=/nonexistent/mpicc)" "/nonexistent/mpicc not found&&install Open MPI" \
  bash -c 'make -s --no-print-directory MPI=1 MPICC=/nonexistent/mpicc train || exit 1'
if command -v mpirun >/dev/null && make -s --no-print-directory tests/bin/train_mpi >/dev/null 2>&1; then
  mpirun=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -q --oversubscribe)
  row train "the single-process build run by mpirun -np 2" "mpirun started 2 copies of this ./train, which is built without MPI" \
    "${mpirun[@]}" -np 2 ./train -d $tmp/corpus.txt -o $tmp/mpi_single.bin "${small[@]}"
  "${mpirun[@]}" -np 2 tests/bin/train_mpi -d $tmp/corpus.txt -o $tmp/np2.bin "${small[@]}" >/dev/null 2>&1
  row train "-d <(cat corpus) under mpirun -np 2" "under mpirun every rank reads the corpus, and a pipe or FIFO gives it to one of them only" \
    bash -c '"$@" -d <(cat $0) -o $0.mpi_pipe.bin' $tmp/corpus.txt "${mpirun[@]}" -np 2 tests/bin/train_mpi
  row train "--resume on 3 ranks of a run of 2 ranks x --grad-accum 1" \
    "--resume on 3 ranks: the run saved in $tmp/np2.bin.state draws 2 micro-batches per step" \
    "${mpirun[@]}" -np 3 tests/bin/train_mpi -d $tmp/corpus.txt -o $tmp/np2.bin --resume --max-iters 4
else
  echo "skipped: the mpirun rows: no mpirun, or tests/bin/train_mpi does not build (Open MPI: make deps)"
fi

if ((markdown)); then  # the markers let docs/ROBUSTNESS.md's copy be found and replaced whole
  echo "<!-- BEGIN GENERATED by \`bash tests/test_bad_inputs.sh --markdown\` (do not edit: rerun it) -->"
  echo "| program | input | message (stderr, exit status 1) |"
  echo "|---|---|---|"
  printf '%s\n' "${table[@]}" | sed "s|$PWD/||g; s|$tmp|tests/tmp/bad|g"
  echo "<!-- END GENERATED by \`bash tests/test_bad_inputs.sh --markdown\` -->"
fi
echo "$passed passed, $failed failed ($pending pending)"
[ $failed -eq 0 ]
