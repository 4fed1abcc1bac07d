#!/usr/bin/env bash
# nabla train beside PyTorch and TensorFlow.js in one run: one epoch of the 784-128-10 MLP on
# Fashion-MNIST (time per epoch, test accuracy) and process start to first training step.
# TensorFlow.js comes from npm into bench/.tfjs (tfjs-node when its native build installs, else
# the pure-JS package). Usage: bench/run_train.sh [BUILD_DIR] [ROUNDS (3)]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
rounds="${2:-3}"
nabla="$build/nabla"
[ -x "$nabla" ] || { echo "run_train.sh: $nabla not found; build first" >&2; exit 2; }
tfjs_dir="$here/.tfjs"
if [ ! -d "$tfjs_dir/node_modules/@tensorflow" ]; then
  mkdir -p "$tfjs_dir"
  (cd "$tfjs_dir" && { npm install --silent --no-audit --no-fund @tensorflow/tfjs-node >/dev/null 2>&1 ||
                       npm install --silent --no-audit --no-fund @tensorflow/tfjs >/dev/null; })
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for r in $(seq "$rounds"); do
  s=$(date +%s.%N)
  "$nabla" train --epochs 1 --logdir "$work/run$r" --quiet
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l >> "$work/nabla_total"
  # start-up to first step: a run of one batch
  s=$(date +%s.%N)
  "$nabla" train --epochs 1 --limit 64 --logdir "$work/one$r" --quiet
  e=$(date +%s.%N)
  echo "$e - $s" | bc -l >> "$work/nabla_first"
  /usr/bin/python3 "$here/train_torch.py" > "$work/torch$r"
  (cd "$tfjs_dir" && NODE_PATH="$tfjs_dir/node_modules" node "$here/train_tfjs.js") > "$work/tfjs$r" 2>/dev/null || true
done
get() { cat "$work"/$1* | awk -v k="$2" '$1 == k { print $2 }' | median; }
# nabla's epoch: a whole one-epoch run less a one-batch run (both start, load the data and test)
paste "$work/nabla_total" "$work/nabla_first" | awk '{ print $1 - $2 }' > "$work/nabla_epoch"
printf '%-44s %10s %10s %10s\n' "figure" "nabla" "PyTorch" "TF.js"
printf '%-44s %10.3f %10.3f %10s\n' "one training epoch (s)" "$(median < "$work/nabla_epoch")" \
  "$(get torch torch_epoch_s)" "$(get tfjs tfjs_epoch_s)"
printf '%-44s %10.3f %10.3f %10s\n' "start-up to first step (s)" "$(median < "$work/nabla_first")" \
  "$(get torch torch_startup_to_first_step_s)" "$(get tfjs tfjs_startup_to_first_step_s)"
printf '%-44s %10s %10.4f %10s\n' "test accuracy after one epoch" "-" "$(get torch torch_test_accuracy)" "$(get tfjs tfjs_test_accuracy)"
echo "TF.js backend: $(cat "$work"/tfjs1 | awk '$1 == "tfjs_backend" { print $2 }')"
echo "nabla's start-up figure is a whole one-batch run (start, read the gzip files, one step, test, write"
echo "files), so it over-states the time to its first step; its epoch is a one-epoch run less that run."
