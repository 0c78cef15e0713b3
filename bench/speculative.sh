#!/usr/bin/env bash
# bench/speculative.sh: issue 45's real pair. Trains a target (6 layers x 384, Llama, a BPE
# vocabulary of 1024) and a draft (2 x 128, --tokenizer-from the target) on Debian's licence
# texts (/usr/share/common-licenses), then times ./run at -t 0, plain, --draft (at several
# --draft-p-min), --lookup 3 and both together, in interleaved rounds, on a continuation prompt and on a summarise-this-paragraph prompt, and
# prints each round and the medians. With PROJECT=MODEL (an attn.c file of the TinyLlama-1.1B
# shape in Q4_0, say) it also runs bench/speculative_projection.c on it at the pair's measured
# acceptance. Not part of make test or make bench: make bench-speculative runs it.
#   DIR=/somewhere ROUNDS=5 THREADS=2 PROJECT=1.1B-Q4_0.bin bash bench/speculative.sh
# The models are trained once and kept in DIR (bench/tmp/speculative unless given); delete them
# to train again. Training takes about 16 minutes on 2 quiet cores (the target 15, the draft 1).
set -u
cd "$(dirname "$0")/.."
DIR=${DIR:-bench/tmp/speculative}
ROUNDS=${ROUNDS:-5}
J=${THREADS:-2}
LICENCES=/usr/share/common-licenses
die() {
    echo "bench/speculative.sh: $*" >&2
    exit 1
}
mkdir -p "$DIR" || die "cannot create $DIR"
[ -d $LICENCES ] || die "$LICENCES not found (Debian's base-files)"
make -s run train || die "cannot build ./run and ./train"
mkdir -p bench/bin
$(make -s print-CC) $(make -s print-ALL_CFLAGS) -I. -o bench/bin/speculative_projection \
    bench/speculative_projection.c $(make -s print-LDLIBS) || die "cannot build bench/speculative_projection.c"

CORPUS=$DIR/licences.txt TARGET=$DIR/target.bin DRAFT=$DIR/draft.bin
# the licences themselves, not the symbolic links to them (GPL -> GPL-3), in a fixed order
find $LICENCES -maxdepth 1 -type f | LC_ALL=C sort | xargs cat > $CORPUS
COMMON="-d $CORPUS --arch llama --block-size 256 --batch-size 8 -j $J --progress plain"
# 800 steps, 23 passes over the text: the target learns the licences by heart, as a model
# trained on a corpus this small does (train loss 0.08, validation 4.6)
[ -f $TARGET ] || ./train $COMMON -o $TARGET --n-layer 6 --n-head 6 --n-embd 384 --vocab-size 1024 \
    --max-iters 800 --warmup-iters 30 --eval-interval 100 --eval-iters 5 ||
    die "training the target failed"
[ -f $DRAFT ] || ./train $COMMON -o $DRAFT --tokenizer-from $TARGET --n-layer 2 --n-head 4 --n-embd 128 \
    --max-iters 1000 --warmup-iters 50 --eval-interval 250 --eval-iters 5 || die "training the draft failed"

CONTINUE="The GNU General Public License is a free, copyleft license for"
PARAGRAPH=$(awk -v RS= 'NR == 5' $LICENCES/GPL-3 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
SUMMARISE="Summarise this paragraph of the GPL:

$PARAGRAPH

Summary:"

echo "speculative: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, $J threads"
echo "speculative: loadavg before: $(cat /proc/loadavg)"
OUT=$DIR/rounds.txt
: > $OUT
# --draft-p-min 0 drafts every round, as before the flag; 0.75 is its default, 0.5 this pair's best
MODES=("plain" "--draft $DRAFT --draft-max 2 --draft-p-min 0" "--draft $DRAFT --draft-max 4 --draft-p-min 0" "--draft $DRAFT --draft-max 8 --draft-p-min 0"
    "--draft $DRAFT --draft-max 4" "--draft $DRAFT --draft-max 8" "--draft $DRAFT --draft-max 2 --draft-p-min 0.5"
    "--draft $DRAFT --draft-max 4 --draft-p-min 0.5" "--lookup 3 --draft-max 4" "--lookup 3 --draft-max 16"
    "--lookup 3 --draft $DRAFT --draft-max 4" "--lookup 3 --draft $DRAFT --draft-max 4 --draft-p-min 0.5")
for prompt in continue summarise; do
    # the summarise prompt is 175 tokens of the context's 256: its reply stops before the window moves
    [ $prompt = continue ] && text=$CONTINUE N=192 || text=$SUMMARISE N=64
    for r in $(seq $ROUNDS); do
        for i in "${!MODES[@]}"; do
            flags=${MODES[$i]}
            [ "$flags" = plain ] && flags=
            ./run $TARGET -t 0 -n $N -j $J -i "$text" $flags > $DIR/text_${prompt}_$i.txt 2> $DIR/err.txt ||
                die "./run $flags failed: $(tail -1 $DIR/err.txt)"
            cmp -s $DIR/text_${prompt}_0.txt $DIR/text_${prompt}_$i.txt ||
                die "$prompt, ${MODES[$i]}: the text differs from the plain run's"
            tps=$(sed -n 's/.*generated: [0-9]* tokens* in [0-9.]* s (\([0-9.]*\) tok\/s).*/\1/p' $DIR/err.txt)
            acc=$(sed -n 's/.*accepted [0-9]* (\([0-9.]*\)%).*/\1/p' $DIR/err.txt)
            echo "$prompt|${MODES[$i]//"$DRAFT "/}|$r|$tps|${acc:--}" | tee -a $OUT
        done
    done
done
echo "speculative: loadavg after: $(cat /proc/loadavg)"
median() { sort -g | awk '{ v[n++] = $1 } END { if (n) print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'; }
echo "prompt | flags | median tok/s | x plain | median accepted %"
for prompt in continue summarise; do
    plain=$(awk -F'|' -v p=$prompt '$1 == p && $2 == "plain" { print $4 }' $OUT | median)
    for i in "${!MODES[@]}"; do
        mode=${MODES[$i]//"$DRAFT "/}
        tps=$(awk -F'|' -v p=$prompt -v m="$mode" '$1 == p && $2 == m { print $4 }' $OUT | median)
        acc=$(awk -F'|' -v p=$prompt -v m="$mode" '$1 == p && $2 == m && $5 != "-" { print $5 }' $OUT | median)
        echo "$prompt | $mode | $tps | $(awk -v a=$tps -v b=$plain 'BEGIN { printf "%.2f", a / b }') | ${acc:--}"
    done
done

if [ -n "${PROJECT:-}" ]; then
    for k in 2 4 8; do # at the draft's median acceptance on the continuation prompt, drafting every round
        rate=$(awk -F'|' -v m="--draft --draft-max $k --draft-p-min 0" '$1 == "continue" && $2 == m { print $5 }' $OUT | median)
        echo "projection: $PROJECT, --draft-max $k, acceptance $rate%:"
        bench/bin/speculative_projection "$PROJECT" --accept $(awk -v r=$rate 'BEGIN { print r / 100 }') \
            --draft-max $k -j $J -p 64 -n 128 -r $ROUNDS || die "speculative_projection failed"
    done
fi
