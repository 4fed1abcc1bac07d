# Cross build for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu; tests run under
# qemu-user (Debian's qemu-user) against the arm64 multiarch libraries (libcmocka-dev:arm64; the
# build has no optional dependency, jansson included). Used by scripts/test_aarch64.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# the arm64 loader and libraries live under / (multiarch): qemu finds them there
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_LIBRARY_PATH /usr/lib/aarch64-linux-gnu)
