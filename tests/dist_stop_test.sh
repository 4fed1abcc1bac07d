#!/bin/sh
# `nabla train` on 2 and 3 ranks with rank 1 stopped (SIGSTOP) after the first checkpoint: every
# other rank ends within NABLA_DIST_TIMEOUT + 5 s with a non-zero status, each naming rank 1, and
# the checkpoint is left as it was. The stopped rank and anything left of the job are killed at
# the end whatever happens (SIGCONT, then SIGKILL).
# Usage: dist_stop_test.sh NABLA_BINARY
set -eu
nabla="$1"
work="$(mktemp -d)"
stopped=""
cleanup() {
  for p in $stopped; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
  for p in $(pgrep -f "$work/" 2>/dev/null || true); do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
root=""; [ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
timeout=3
export NABLA_DIST_TIMEOUT=$timeout

# rank_pid LOGDIR R: the process of rank R of the job writing LOGDIR
rank_pid() {
  for p in $(pgrep -f "logdir $work/$1" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}

for n in 2 3; do
  run="stop$n"
  mpirun $root --oversubscribe --bind-to none -n "$n" "$nabla" train --epochs 50 --limit 30000 --batch-size 66 \
    --quiet --logdir "$work/$run" >"$run.txt" 2>&1 &
  job=$!
  i=0
  while [ ! -e "$run/checkpoint.safetensors" ]; do
    i=$((i + 1)); [ "$i" -lt 1200 ] || fail "$n ranks: no checkpoint after 60 s: $(cat "$run.txt")"; sleep 0.05
  done
  victim="$(rank_pid "$run" 1)"
  others=""
  r=0
  while [ "$r" -lt "$n" ]; do
    [ "$r" -eq 1 ] || others="$others $(rank_pid "$run" "$r")"
    r=$((r + 1))
  done
  [ -n "$victim" ] && [ "$(echo $others | wc -w)" -eq $((n - 1)) ] || fail "$n ranks: the ranks' processes not found"
  kill -STOP "$victim"
  stopped="$stopped $victim"
  start=$(date +%s.%N)
  sleep 1 # a save under way when rank 1 stopped has finished; no later one can start without it
  sum="$(sha256sum "$run/checkpoint.safetensors")"
  # every other rank gone within the timeout + 5 s
  limit=$(echo "$timeout + 5" | bc)
  while :; do
    alive=""
    for p in $others; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    took=$(echo "$(date +%s.%N) - $start" | bc)
    [ -n "$alive" ] || break
    [ "$(echo "$took > $limit" | bc)" -eq 0 ] || fail "$n ranks: ranks still running $took s after rank 1 stopped: $(cat "$run.txt")"
    sleep 0.1
  done
  set +e; wait "$job"; rc=$?; set -e
  [ "$rc" -ne 0 ] || fail "$n ranks: the job exited 0 with rank 1 stopped"
  r=0
  while [ "$r" -lt "$n" ]; do
    [ "$r" -eq 1 ] || grep -Eq "on rank $r[: ].*rank 1 did not (answer|arrive)" "$run.txt" \
      || fail "$n ranks: rank $r did not name rank 1: $(cat "$run.txt")"
    r=$((r + 1))
  done
  [ "$(sha256sum "$run/checkpoint.safetensors")" = "$sum" ] || fail "$n ranks: the checkpoint changed after the stop"
  kill -CONT "$victim" 2>/dev/null || true
  kill -KILL "$victim" 2>/dev/null || true
  printf 'rank 1 stopped on %d ranks: the others ended in %.1f s (timeout %d s), exit %d, naming it\n' "$n" "$took" "$timeout" "$rc"
done
echo "dist_stop_test: all passed"
