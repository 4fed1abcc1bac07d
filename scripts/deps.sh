#!/usr/bin/env bash
# Installs the Debian packages nabla builds and tests with, skipping what is already there.
# --cross also installs what the aarch64 build and its emulated tests need (Debian's cross
# compiler, qemu-user, and the arm64 multiarch libraries the tests link); scripts/test.sh asks.
set -euo pipefail
packages=(build-essential cmake pkg-config clang libomp-dev libopenblas-openmp-dev libdnnl-dev libcmocka-dev zlib1g-dev
          libpng-dev libjansson-dev libxml2-utils librsvg2-bin python3-pil
          python3-torch python3-numpy dataset-fashion-mnist)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ "${1:-}" = --cross ]; then
  packages+=(gcc-aarch64-linux-gnu qemu-user libcmocka-dev:arm64 libjansson-dev:arm64)
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
