#!/usr/bin/env bash
# The TF-tutorial CNN's 3-epoch test accuracy judged as PyTorch parity: examples/cnn.c and its
# PyTorch twin (bench/cnn_accuracy_torch.py) over the same seeds, run alternately, one thread
# each; passes when nabla's mean is at least PyTorch's mean minus 0.002.
# Usage: bench/cnn_parity.sh [build dir (build)] [seeds (0 1 2 3 4)] [epochs (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
seeds="${2:-0 1 2 3 4}"
epochs="${3:-3}"
[ -x "$build/examples/cnn" ] || { echo "no $build/examples/cnn: build first"; exit 1; }
nab=(); tor=()
for s in $seeds; do
  a=$(NABLA_NUM_THREADS=1 "$build/examples/cnn" "$epochs" "" 0 "$s" | awk '/^final test accuracy/ { print $4 }')
  b=$(OMP_NUM_THREADS=1 /usr/bin/python3 bench/cnn_accuracy_torch.py "$epochs" "$s" | awk '/^final test accuracy/ { print $4 }')
  [ -n "$a" ] && [ -n "$b" ] || { echo "seed $s: a run printed no final accuracy"; exit 1; }
  echo "seed $s: nabla $a  pytorch $b"
  nab+=("$a"); tor+=("$b")
done
printf '%s\n' "${nab[@]}" > /tmp/cnn_parity_nabla.$$
printf '%s\n' "${tor[@]}" > /tmp/cnn_parity_torch.$$
paste /tmp/cnn_parity_nabla.$$ /tmp/cnn_parity_torch.$$ | awk '{ n += $1; t += $2; k++ }
  END { mn = n / k; mt = t / k; printf "mean over %d seeds: nabla %.4f  pytorch %.4f  difference %+.4f\n", k, mn, mt, mn - mt
        if (mn >= mt - 0.002) print "PASS: nabla >= pytorch - 0.002"; else { print "FAIL: nabla < pytorch - 0.002"; exit 1 } }'
rc=$?
rm -f /tmp/cnn_parity_nabla.$$ /tmp/cnn_parity_torch.$$
exit $rc
