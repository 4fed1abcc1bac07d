#!/usr/bin/env bash
# Runs an example and checks the accuracy it reports at the end against a floor.
# Usage: check_accuracy.sh FLOOR COMMAND [ARGS...]
set -euo pipefail
floor="$1"
shift
out="$("$@")"
echo "$out"
acc="$(grep -oE 'final test accuracy [0-9.]+' <<<"$out" | awk '{print $4}')"
if [ -z "$acc" ]; then echo "no final accuracy reported"; exit 1; fi
awk -v a="$acc" -v f="$floor" 'BEGIN { if (a + 0 < f + 0) { printf "accuracy %s is below the floor %s\n", a, f; exit 1 } }'
echo "accuracy $acc meets the floor $floor"
