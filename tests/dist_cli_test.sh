#!/bin/sh
# `nabla train` data-parallel: --nproc and mpirun, rank 0 alone writing, a killed rank ending the
# job with the rank named, and a restart from the last checkpoint giving an uninterrupted run's
# files bit for bit.
# Usage: dist_cli_test.sh NABLA_BINARY
set -eu
nabla="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
root=""; [ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"

# the global batch must split evenly across the ranks
set +e; "$nabla" train --nproc 2 --batch-size 63 --limit 600 --epochs 1 --quiet >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "give a multiple of 2" err.txt || fail "--batch-size 63 on 2 ranks: exit $rc, $(cat err.txt)"
[ ! -e runs ] || fail "a refused run made a run folder"
echo "uneven global batch: refused"

# ... and --nproc refuses it before starting MPI: an mpirun first in PATH that only leaves a mark
mkdir fakebin
printf '#!/bin/sh\ntouch "%s/mpirun_started"\nexit 3\n' "$work" > fakebin/mpirun
chmod +x fakebin/mpirun
set +e; PATH="$work/fakebin:$PATH" "$nabla" train --nproc 2 --batch-size 63 --limit 600 --epochs 1 --quiet >out.txt 2>err.txt
rc=$?; set -e
[ ! -e mpirun_started ] || fail "--nproc 2 --batch-size 63 started mpirun before refusing"
[ "$rc" -eq 2 ] && grep -q "give a multiple of 2" err.txt || fail "--nproc 2 --batch-size 63 without MPI: exit $rc, $(cat err.txt)"
echo "uneven global batch: refused before mpirun"

# ranks started with different options: every rank refuses at once, naming the option and ranks
mpmd() { # mpmd "ARGS OF RANK 0" "ARGS OF RANK 1" ["ARGS OF RANK 2"]
  set -- "$@"
  cmd="mpirun $root --oversubscribe --bind-to none"
  sep=""
  for a in "$@"; do cmd="$cmd $sep -n 1 \"$nabla\" train --limit 600 --epochs 1 --quiet --logdir differ $a"; sep=":"; done
  start=$(date +%s)
  set +e; eval "$cmd" >differ.txt 2>&1; rc=$?; set -e
  took=$(( $(date +%s) - start ))
  [ "$rc" -ne 0 ] || fail "ranks with different options trained: $*"
  [ "$took" -lt 20 ] || fail "ranks with different options took $took s to fail (the collective timeout?)"
  [ ! -e differ ] || fail "ranks with different options made a run folder"
}
mpmd "--lr 0.01" "--lr 0.1"
for r in 0 1; do
  grep -q "rank $r: option --lr differs across ranks: 0.01 on rank 0, 0.1 on rank 1" differ.txt \
    || fail "rank $r did not name --lr and the ranks: $(cat differ.txt)"
done
mpmd "--seed 3 --optimizer sgd" "--seed 3 --optimizer adam" "--seed 4 --optimizer sgd --batch-size 66"
for r in 0 1 2; do
  grep -q "rank $r: option --seed differs across ranks: 3 on ranks 0, 1; 4 on rank 2" differ.txt \
    && grep -q "rank $r: option --optimizer differs across ranks: sgd on ranks 0, 2; adam on rank 1" differ.txt \
    && grep -q "rank $r: option --batch-size differs across ranks: 64 on ranks 0, 1; 66 on rank 2" differ.txt \
    || fail "rank $r did not name --seed, --optimizer and --batch-size: $(cat differ.txt)"
done
for opt in "--epochs 1" "--limit 600"; do
  other="$(echo "$opt" | sed 's/ 1$/ 2/; s/ 600$/ 900/')"
  mpmd "$opt" "$other"
  grep -q "option ${opt% *} differs across ranks" differ.txt || fail "$opt against $other: $(cat differ.txt)"
done
echo "ranks with different options: refused at the start, naming the option and the ranks"

# --nproc 2: one run folder, written by rank 0, and the progress printed once
"$nabla" train --nproc 2 --epochs 2 --limit 3000 --logdir a >a.txt 2>&1 || { cat a.txt; fail "--nproc 2 failed"; }
[ "$(grep -c '^nabla train:' a.txt)" -eq 1 ] || fail "the header was printed $(grep -c '^nabla train:' a.txt) times"
grep -q "batch 64 (32 on each of 2 ranks)" a.txt || fail "the header does not say how the batch is split: $(head -n 1 a.txt)"
awk '/^test accuracy/ { exit !($3 >= 0.6) }' a.txt || fail "2 ranks trained badly: $(grep '^test accuracy' a.txt)"
for f in model.safetensors checkpoint.safetensors curves.svg; do [ -s "a/$f" ] || fail "a/$f missing"; done
[ "$(ls a/events.out.tfevents.* | wc -l)" -eq 1 ] || fail "more than one events file"
[ ! -e runs ] || fail "a rank made a default run folder"
echo "--nproc 2: one run, rank 0's files"

# every figure printed and logged under --nproc is the whole job's, not rank 0's share: the test
# accuracy is nabla eval's of the saved model on the same samples, and the training loss and
# accuracy of an epoch whose weights hardly move (--lr 1e-12) are one process's on the same samples
acc() { sed -n 's/^test accuracy \([0-9.]*\) (\([0-9]*\) of \([0-9]*\).*/\1 \2 of \3/p' "$1"; }
"$nabla" eval a/model.safetensors --limit 3000 >eval.txt
[ -n "$(acc a.txt)" ] && [ "$(acc a.txt)" = "$(acc eval.txt)" ] || fail "--nproc 2 printed $(acc a.txt), nabla eval gives $(acc eval.txt)"
"$nabla" train --nproc 2 --epochs 1 --limit 1280 --val-split 0 --lr 1e-12 --log-every 5 --logdir w2 --quiet
"$nabla" train --epochs 1 --limit 1280 --val-split 0 --lr 1e-12 --log-every 5 --logdir w1 --quiet
# tolerances: summation order (loss), a prediction or two flipped by it (accuracy, 1280 samples)
for check in "epoch/loss 1e-4" "step/loss 1e-4" "epoch/accuracy 0.002"; do
  set -- $check
  x1="$("$nabla" plot w1 --text | awk -v t="$1" '$1 == t { print $4 }')"
  x2="$("$nabla" plot w2 --text | awk -v t="$1" '$1 == t { print $4 }')"
  awk -v a="$x1" -v b="$x2" -v tol="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= tol * (a > 1 ? a : 1)) }' \
    || fail "$1 of --nproc 2 is $x2, of one process $x1"
  echo "$1: one process $x1, --nproc 2 $x2"
done
echo "--nproc 2: the test accuracy and training figures are the whole job's"

# mpirun itself gives the same run bit for bit
OMPI_MCA_btl=self,vader mpirun $root --oversubscribe --bind-to none -n 2 "$nabla" train --epochs 2 --limit 3000 --logdir b --quiet
cmp a/model.safetensors b/model.safetensors || fail "mpirun and --nproc trained different models"
cmp a/checkpoint.safetensors b/checkpoint.safetensors || fail "mpirun and --nproc wrote different checkpoints"
echo "mpirun -n 2: the same files as --nproc 2"

# a rank killed mid-run: the job ends within 30 s naming it; a restart from the last checkpoint
# ends with the files of a run that was never interrupted
args="--epochs 4 --limit 30000 --quiet"
"$nabla" train --nproc 2 $args --logdir whole
"$nabla" train --nproc 2 $args --logdir cut >cut.txt 2>&1 &
job=$!
i=0
while [ ! -e cut/checkpoint.safetensors ]; do
  i=$((i + 1)); [ "$i" -lt 1200 ] || fail "no checkpoint after 60 s"; sleep 0.05
done
victim=""
for p in $(pgrep -f "logdir cut" || true); do
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim="$p"; fi
done
[ -n "$victim" ] || fail "rank 1 not found (did the run end before the kill?)"
kill -9 "$victim"
start=$(date +%s)
set +e; wait "$job"; rc=$?; set -e
took=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "the job exited 0 after rank 1 was killed"
[ "$took" -le 30 ] || fail "the job took $took s to end after rank 1 was killed"
grep -q "rank 1" cut.txt || fail "the lost rank is not named: $(cat cut.txt)"
echo "a killed rank: the job ended in ${took} s, exit $rc, naming rank 1"
"$nabla" train --nproc 2 $args --logdir cut --resume cut/checkpoint.safetensors
cmp whole/checkpoint.safetensors cut/checkpoint.safetensors || fail "the restarted run's checkpoint differs"
cmp whole/model.safetensors cut/model.safetensors || fail "the restarted run's model differs"
echo "restart from the last checkpoint: the uninterrupted run's files"
echo "dist_cli_test: all passed"
