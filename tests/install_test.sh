#!/usr/bin/env bash
# Installs nabla into a scratch prefix and builds a first program against it twice:
# with pkg-config and with CMake's find_package. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir="$(ls -d "$work"/prefix/lib*/pkgconfig | head -n1)"
libdir="${libdir%/pkgconfig}"
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
# pkg-config
PKG_CONFIG_PATH="$libdir/pkgconfig" cc ${CONSUMER_CFLAGS:-} "$work/first.c" -o "$work/first_pc" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs nabla) -Wl,-rpath,"$libdir"
out="$("$work/first_pc")"
echo "$out"
grep -q "tensor(\[2., 4., 6.\])" <<<"$out"
# CMake package
mkdir -p "$work/consumer"
cp "$work/first.c" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(first C)
find_package(nabla REQUIRED)
add_executable(first first.c)
target_link_libraries(first PRIVATE nabla::nabla)
CM
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_C_FLAGS="${CONSUMER_CFLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${CONSUMER_CFLAGS:-}" >/dev/null
cmake --build "$work/consumer/build" >/dev/null
"$work/consumer/build/first" | grep -q "tensor(\[2., 4., 6.\])"
# only nb_ symbols are exported from the shared library
bad="$(nm -D --defined-only "$libdir/libnabla.so" | awk '{print $3}' | grep -v '^nb_' | grep -v '^_' || true)"
if [ -n "$bad" ]; then echo "non-nb_ exported symbols: $bad"; exit 1; fi
echo "install test passed"
