#!/usr/bin/env bash
# Installs nabla into a scratch prefix, runs the installed command from there (no
# LD_LIBRARY_PATH: its RPATH finds the library) and builds a first program against it four
# ways: with pkg-config shared (the README's line, with the rpath it says a non-system prefix
# needs) and static (nabla-static.pc), and with CMake's find_package, shared and static.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir="$(ls -d "$work"/prefix/lib*/pkgconfig | head -n1)"
libdir="${libdir%/pkgconfig}"
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# the installed command finds libnabla.so.0 beside it
"$work/prefix/bin/nabla" version
{ "$work/prefix/bin/nabla-info" 2>&1 || true; } | grep -q "^usage"
"$work/prefix/bin/nabla-plot" --help >/dev/null
# the manual page and the shell completions beside it
grep -q '^\.TH NABLA 1' "$work/prefix/share/man/man1/nabla.1"
grep -q 'complete .*-F _nabla nabla' "$work/prefix/share/bash-completion/completions/nabla"
grep -q '^#compdef nabla' "$work/prefix/share/zsh/site-functions/_nabla"
if command -v man >/dev/null; then MANPATH="$work/prefix/share/man" man nabla 2>/dev/null | grep -q "nabla train"; fi
cat > "$work/first.c" <<'C'
#include <nabla.h>
#include <stdio.h>
int main(void) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *x = nb_set_requires_grad(nb_arange(1, 4, 1, NB_F32), true);
    nb_tensor *y = nb_sum_all(nb_mul(x, x));
    nb_backward(y);
    nb_print(nb_grad_of(x));
    nb_scope_end(s);
    printf("nabla %s\n", nb_version());
    return nb_error() != NULL;
}
C
# pkg-config, shared: the README's line, with the rpath of a prefix outside the loader's path
cc ${CONSUMER_CFLAGS:-} "$work/first.c" -o "$work/first_pc" $(pkg-config --cflags --libs nabla) \
  -Wl,-rpath,"$(pkg-config --variable=libdir nabla)"
out="$("$work/first_pc")"
echo "$out"
grep -q "tensor(\[2., 4., 6.\])" <<<"$out"
# pkg-config, static: libnabla.a and what it needs, nothing of libnabla.so
cc ${CONSUMER_CFLAGS:-} "$work/first.c" -o "$work/first_static" $(pkg-config --static --cflags --libs nabla-static)
if readelf -d "$work/first_static" | grep -q 'libnabla\.so'; then echo "first_static needs libnabla.so"; exit 1; fi
"$work/first_static" | grep -q "tensor(\[2., 4., 6.\])"
# CMake package
mkdir -p "$work/consumer"
cp "$work/first.c" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(first C)
find_package(nabla REQUIRED)
add_executable(first first.c)
target_link_libraries(first PRIVATE nabla::nabla)
add_executable(first_static first.c)
target_link_libraries(first_static PRIVATE nabla::nabla_static)
CM
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_C_FLAGS="${CONSUMER_CFLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${CONSUMER_CFLAGS:-}" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
"$work/consumer/build/first" | grep -q "tensor(\[2., 4., 6.\])"
"$work/consumer/build/first_static" | grep -q "tensor(\[2., 4., 6.\])"
# only nb_ symbols are exported from the shared library
bad="$(nm -D --defined-only "$libdir/libnabla.so" | awk '{print $3}' | grep -v '^nb_' | grep -v '^_' || true)"
if [ -n "$bad" ]; then echo "non-nb_ exported symbols: $bad"; exit 1; fi
echo "install test passed"
