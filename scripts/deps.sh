#!/usr/bin/env bash
# Installs the Debian packages nabla builds and tests with, skipping what is already there.
set -euo pipefail
packages=(build-essential cmake pkg-config clang libomp-dev libopenblas-openmp-dev libdnnl-dev libcmocka-dev zlib1g-dev
          libpng-dev libjansson-dev libxml2-utils librsvg2-bin python3-pil
          python3-torch python3-numpy dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
