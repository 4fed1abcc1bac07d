#!/usr/bin/env bash
# The two builds beside the default one (run by scripts/test.sh after scripts/deps.sh):
#   build-nodeps  no optional dependency at all (no OpenBLAS, oneDNN, zlib, libpng, jansson, JIT,
#                 MPI, ONNX or CUDA):
#                 nabla's own GEMM and convolutions, the interpreter, and test_build_config
#                 checking the "built without ..." errors;
#   build-arm     aarch64 with Debian's cross compiler, also without optional dependencies (CUDA too),
#                 its tests run under qemu-user: the core, ops, autograd, nn, conv, io,
#                 summary, data-free examples and graph-mode differential tests.
# Usage: scripts/test_configs.sh [nodeps] [arm]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
want="${*:-nodeps arm}"
no_deps=(-DNABLA_WITH_BLAS=OFF -DNABLA_WITH_DNNL=OFF -DNABLA_WITH_ZLIB=OFF -DNABLA_WITH_PNG=OFF -DNABLA_WITH_JPEG=OFF -DNABLA_WITH_JIT=OFF
         -DNABLA_WITH_MPI=OFF -DNABLA_WITH_ONNX=OFF -DNABLA_WITH_JSON=OFF -DNABLA_CUDA=OFF)
if [[ " $want " == *" nodeps "* ]]; then
  cmake -S . -B build-nodeps -DCMAKE_BUILD_TYPE=Release "${no_deps[@]}" >/dev/null
  cmake --build build-nodeps -j"$jobs"
  (cd build-nodeps && ctest --output-on-failure -j"$jobs")
fi
arm_missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || arm_missing+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || arm_missing+=(qemu-user)
[ -e /usr/lib/aarch64-linux-gnu/libcmocka.so ] || arm_missing+=(libcmocka-dev:arm64)
if [[ " $want " == *" arm "* ]] && [ ${#arm_missing[@]} -gt 0 ]; then
  echo "SKIPPED: the aarch64 build and its tests (missing: ${arm_missing[*]}; scripts/deps.sh --cross installs them)"
elif [[ " $want " == *" arm "* ]]; then
  cmake -S . -B build-arm -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    "${no_deps[@]}" -DNABLA_BUILD_BENCH=OFF >/dev/null
  cmake --build build-arm -j"$jobs"
  # Left out under emulation: test_compile (8 minutes in qemu; its random differential twin
  # test_compile_random runs), the tests that compile or link host programs against the arm64
  # library (install_and_link, readme_first_program), shell pipelines that run arm64 programs
  # outside ctest's emulator (ops_doc_current, example_char_gpt_compiled, summary_plot,
  # tokenizer_corpus, hf_cli, hf_finetune_cli), ThreadSanitizer (test_threadpool runs plain), and
  # the pretrained models against transformers (hf_ref_data, test_hf_models: a 22M-parameter
  # encoder over 271 sentences, minutes under emulation; test_hf_finetune, which reads the same
  # references; test_tokenizer's own cases run).
  (cd build-arm && ctest --output-on-failure -j"$jobs" --timeout 900 \
    -E '^(test_compile|install_and_link|readme_first_program|ops_doc_current|example_char_gpt_compiled|summary_plot|test_threadpool_tsan|tokenizer_corpus|hf_cli|hf_ref_data|test_hf_models|test_hf_finetune|hf_finetune_cli|doctor_suite|doctor_pytorch)$')
fi
