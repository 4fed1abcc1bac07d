#!/usr/bin/env bash
# Compiles tests/header_std.c against the public headers as strict C11, C17, gnu11 and C++17
# (gcc, and clang when installed) with -Wall -Wextra -pedantic -Werror, and runs each program:
# the headers must mean the same in every standard they claim.
# Usage: header_std_test.sh SOURCE_DIR LIBRARY_DIR; CONSUMER_CFLAGS: a sanitizer build's flags
# (then gcc only: clang's sanitizer runtime is not gcc's).
set -euo pipefail
src="$1"
libdir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-Wall -Wextra -pedantic -Werror -I"$src/include" ${CONSUMER_CFLAGS:-})
link=(-L"$libdir" -lnabla -Wl,-rpath,"$libdir")
ran=0
for pair in "gcc g++" "clang clang++"; do
    set -- $pair
    cc="$1"; cxx="$2"
    if ! command -v "$cc" >/dev/null; then echo "($cc not installed: skipped)"; continue; fi
    if [ "$cc" = clang ] && [ -n "${CONSUMER_CFLAGS:-}" ]; then echo "(clang: skipped in a sanitizer build)"; continue; fi
    for std in c11 c17 gnu11; do
        "$cc" -std="$std" "${flags[@]}" "$src/tests/header_std.c" -o "$work/t" "${link[@]}"
        echo "$cc -std=$std: $("$work/t")"
        ran=$((ran + 1))
    done
    if command -v "$cxx" >/dev/null; then
        "$cxx" -x c++ -std=c++17 "${flags[@]}" "$src/tests/header_std.c" -o "$work/t" "${link[@]}"
        echo "$cxx -std=c++17: $("$work/t")"
        ran=$((ran + 1))
    fi
done
[ "$ran" -gt 0 ]
