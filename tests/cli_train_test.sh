#!/bin/sh
# nabla train's run folders, validation split and argument checks, as a user meets them.
# Usage: cli_train_test.sh NABLA_BINARY
set -eu
nabla="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
here="$(cd "$(dirname "$0")" && pwd)"
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

# numbers are checked whole and in range, never cast: each of these is refused with exit 2
for args in "--epochs 1e30" "--epochs 0" "--epochs 2.5" "--batch-size 99999999999999999999" "--seed -1" \
            "--lr nan" "--lr inf" "--val-split 1" "--val-split -0.1" "--workers 1000" "--threads 0" \
            "--log-every x" "--device cuda:99" "--device tpu" "--model resnet50" "--epochs" "--bogus" "--limit ''" \
            "--resume a --overwrite" "--autocast fp16" "--autocast"; do
  set +e; eval "\"$nabla\" train $args" >out.txt 2>err.txt; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "train $args: exit $rc, expected 2"
  [ -s err.txt ] || fail "train $args: no message"
  [ ! -e runs ] || fail "train $args: made a run folder"
done
echo "bad arguments: refused with a message"

# a mistyped option is named in one line with the nearest one, not followed by the whole help
set +e; "$nabla" train --epoch 3 >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -qx "nabla train: unknown option --epoch; did you mean --epochs?" err.txt \
  || fail "train --epoch: exit $rc, $(cat err.txt)"
set +e; "$nabla" eval model.safetensors --limt 3 >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "unknown option --limt; did you mean --limit?" err.txt \
  || fail "eval --limt: exit $rc, $(cat err.txt)"
# nabla plot without an output says which are missing
mkdir plotme
set +e; "$nabla" plot plotme >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && head -n 1 err.txt | grep -q "plotme: -o FILE.svg .* --csv FILE.csv .* --text" || fail "plot without an output: $(cat err.txt)"
echo "mistyped options: one line naming the nearest"

# --device cuda without a GPU (or in a build without CUDA): exit 2, saying why
set +e; "$nabla" train --device cuda --epochs 1 --limit 600 --quiet >out.txt 2>err.txt; rc=$?; set -e
if [ "$rc" -eq 2 ]; then
  grep -q "no CUDA device is available (" err.txt || fail "--device cuda without a GPU: $(cat err.txt)"
  [ ! -e runs ] || fail "--device cuda without a GPU made a run folder"
  echo "--device cuda: refused without a GPU ($(cat err.txt))"
else
  [ "$rc" -eq 0 ] || fail "--device cuda: exit $rc: $(cat err.txt)"
  rm -rf runs
  echo "--device cuda: trained on the GPU"
fi

# two runs with the default log folder get two folders, and runs/mlp/latest names the second
"$nabla" train --epochs 1 --limit 600 --quiet
"$nabla" train --epochs 1 --limit 600 --quiet
[ "$(ls -d runs/mlp/2* | wc -l)" -eq 2 ] || fail "two default runs did not get two folders: $(ls runs/mlp)"
[ "$(readlink runs/mlp/latest)" = "$(basename "$(ls -d runs/mlp/2* | tail -n 1)")" ] || fail "latest does not name the newest run"
for d in runs/mlp/2*; do
  [ "$(ls "$d"/events.out.tfevents.* | wc -l)" -eq 1 ] || fail "$d holds more than one run's events"
done
echo "default run folders: one per run"

# a --logdir that holds a run is refused, then replaced with --overwrite (one events file left)
"$nabla" train --epochs 1 --limit 600 --logdir mine --quiet
set +e; "$nabla" train --epochs 1 --limit 600 --logdir mine --quiet 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "mine holds an earlier run" err.txt || fail "a second run into --logdir mine was not refused"
"$nabla" train --epochs 1 --limit 600 --logdir mine --overwrite --quiet
[ "$(ls mine/events.out.tfevents.* | wc -l)" -eq 1 ] || fail "--overwrite left the old run's events"
echo "--logdir: refused when used, replaced with --overwrite"

# the accuracy printed is the saved model's: nabla eval of the file on the same test samples agrees
"$nabla" train --limit 2000 --epochs 4 --lr 0.3 --optimizer sgd --logdir sv --seed 3 >train.txt
"$nabla" eval sv/model.safetensors --limit 2000 >eval.txt
a="$(awk '/^test accuracy/ { print $3 }' train.txt)"; b="$(awk '/^test accuracy/ { print $3 }' eval.txt)"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "train printed $a, eval of the saved model gives $b"
grep -q "1800 training samples .* 200 held out for validation" train.txt || fail "no 10% validation split: $(head -n 1 train.txt)"
echo "printed accuracy $a is the saved model's"

# --val-split 0 keeps every sample for training; --log-every writes per-step losses
"$nabla" train --limit 640 --epochs 1 --val-split 0 --log-every 2 --logdir ls --threads 1 >ls.txt
grep -q "640 training samples .* 0 held out" ls.txt || fail "--val-split 0: $(head -n 1 ls.txt)"
"$nabla" plot ls --text | grep -q "step/loss  *step 10 " || fail "--log-every 2 logged no step/loss at step 10"
echo "--val-split 0 and --log-every: ok"

# --autocast bf16 trains (the banner says so) and learns: the CNN on 2000 samples beats chance well
"$nabla" train --model cnn --limit 2000 --epochs 1 --autocast bf16 --logdir ac --seed 1 >ac.txt
grep -q "bf16 autocast" ac.txt || fail "--autocast bf16: not in the banner: $(head -n 1 ac.txt)"
acc="$(awk '/^test accuracy/ { print $3 }' ac.txt)"
awk -v a="$acc" 'BEGIN { exit !(a > 0.5) }' || fail "--autocast bf16: test accuracy $acc"
echo "--autocast bf16: test accuracy $acc"

# a run killed after its first epoch and resumed from its checkpoint logs the steps that an
# uninterrupted run logs, each once, as TensorBoard shows them (tests/tb_reader.py applies its
# restart rule: the resumed run's SessionLog START drops the killed run's points after the
# checkpoint); the global step continues instead of starting again at 1
# (every 4 steps: at every step the health signals of each logged step would slow the runs down)
args="--limit 60000 --epochs 5 --log-every 4 --quiet"
"$nabla" train $args --logdir whole
"$nabla" train $args --logdir cut >cut_run.txt 2>&1 &
job=$!
tb="$here/tb_reader.py"
# killed a moment after the first epoch's checkpoint appears, in the second epoch: the points it
# logged after the checkpoint are the ones a resumed run must not mix with its own. (Polling the
# event file for them parsed a file that grew faster than the reader, and under load the run
# ended first.)
i=0
while [ ! -e cut/checkpoint.safetensors ]; do
  i=$((i + 1)); [ "$i" -lt 1200 ] || fail "no checkpoint after 60 s"; sleep 0.05
done
sleep 0.5
kill -9 "$job" 2>/dev/null || fail "the run ended before it could be killed: $(cat cut_run.txt)"
wait "$job" || true
cut_points="$(/usr/bin/python3 "$tb" --scalars cut | grep -c '^step/loss')"
"$nabla" train $args --logdir cut --resume cut/checkpoint.safetensors
/usr/bin/python3 "$tb" --scalars whole | grep '^step/loss' >whole.txt
/usr/bin/python3 "$tb" --scalars cut | grep '^step/loss' >cut.txt
[ -s whole.txt ] && cmp -s whole.txt cut.txt || fail "the resumed run's step/loss differs from an uninterrupted run's: $(diff whole.txt cut.txt | head -n 5)"
"$nabla" plot cut --text | grep -q "step/loss  *step $((4 * $(wc -l <whole.txt))) " || fail "nabla plot: $("$nabla" plot cut --text | head -n 3)"
echo "resumed after a kill ($cut_points steps logged before it): the steps of an uninterrupted run, each once"

# a named data folder without the data is an error naming it
mkdir empty
set +e; "$nabla" train --data empty --quiet 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "empty" err.txt || fail "--data of an empty folder: exit $rc, $(cat err.txt)"
echo "cli_train_test: all passed"
