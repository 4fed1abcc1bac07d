#!/usr/bin/env bash
# Builds and runs the README's first program, so the page stays true.
# Usage: readme_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
awk '/^## A first program/{f=1} f&&/^```c/{c=1;next} c&&/^```/{exit} c{print}' "$src/README.md" > "$work/first.c"
test -s "$work/first.c"
cc -std=c11 -Wall -Wextra -Werror ${CONSUMER_CFLAGS:-} "$work/first.c" -I"$src/include" -L"$build" -lnabla -Wl,-rpath,"$build" -o "$work/first"
out="$("$work/first")"
echo "$out"
grep -q "^tensor(\[\[" <<<"$out"
