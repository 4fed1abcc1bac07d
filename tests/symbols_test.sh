#!/bin/sh
# Every global symbol that libnabla.a defines and libnabla.so exports starts with nb_ (nb__ for
# internals, the CUDA backend's device code among them: nb__k_, src/backend/cuda/cuda_kernels.h),
# so a user's own cpu_add or infer_x cannot collide with ours when linking statically. The
# Release build compiles the CUDA backend where nvcc is found, so its symbols are checked there.
set -eu
static="$1"; shared="$2"
bad=0
check() {
    what="$1"; shift
    # nm prints "ADDRESS TYPE NAME" for defined symbols; archive member headers end with ':'
    # the sanitizers' own globals (__odr_asan.*, __asan_*, __sancov_*) come with an instrumented build
    others=$("$@" | awk 'NF >= 2 && $0 !~ /:$/ { print $NF }' | grep -Ev '^nb_' | grep -Ev '^(__odr_asan|__asan_|__sancov_)' | sort -u || true)
    count=$("$@" | awk 'NF >= 2 && $0 !~ /:$/' | wc -l)
    if [ "$count" -eq 0 ]; then echo "$what: no symbols read"; bad=1; return; fi
    if [ -n "$others" ]; then
        echo "$what: global symbols without the nb_ prefix:"; echo "$others"; bad=1
    else
        echo "$what: $count global symbols, all nb_-prefixed"
    fi
}
check "$static" nm -g --defined-only "$static"
check "$shared" nm -D --defined-only "$shared"
exit $bad
