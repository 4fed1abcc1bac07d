#!/usr/bin/env bash
# Installs the Debian packages nabla builds and tests with, skipping what is already there.
# --cross also installs what the aarch64 build and its emulated tests need (Debian's cross
# compiler and its C library, which apt only recommends and --no-install-recommends leaves out,
# qemu-user, and the arm64 multiarch libraries the tests link); scripts/test.sh asks.
set -euo pipefail
packages=(build-essential cmake pkg-config clang libomp-dev libopenblas-openmp-dev libdnnl-dev libcmocka-dev zlib1g-dev
          libpng-dev libjpeg62-turbo-dev libjansson-dev libmicrohttpd-dev libopenmpi-dev openmpi-bin libxml2-utils librsvg2-bin protobuf-c-compiler libprotobuf-c-dev libonnx-dev python3-pil
          python3-torch python3-torchvision python3-numpy python3-venv dataset-fashion-mnist)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
native="$(dpkg --print-architecture)"
# installed: a name with :arch as given; a plain name in the native architecture (or arch all),
# since `dpkg -s NAME` fails once a second architecture's copy is installed too
installed() {
  case "$1" in
  *:*) dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "ok installed" ;;
  *) dpkg-query -W -f='${Status} ${Architecture}\n' "$1" 2>/dev/null | grep -Eq "ok installed ($native|all)$" ;;
  esac
}
cross=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcmocka-dev:arm64)
if [ "${1:-}" = --cross ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
# installs those of the named packages that are missing; returns apt's status
install_missing() {
  local missing=() p
  for p in "$@"; do
    installed "$p" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
install_missing "${packages[@]}"
# the cross packages after the native ones: an archive without arm64 packages leaves the native
# build intact, and scripts/test_configs.sh reports the aarch64 build as skipped, naming them
if [ "${1:-}" = --cross ]; then
  install_missing "${cross[@]}" ||
    echo "deps.sh: could not install the aarch64 packages (${cross[*]}); the aarch64 build will be skipped" >&2
fi
