#!/usr/bin/env bash
# Builds the formula evaluator (formulas_eval.inc) as C, as C++ and, where nvcc is found, as CUDA
# host code, links them with formulas_cxx_test.cc and runs it: formulas.h must give the same
# values in every language a backend reads it in. Exit 77 (skipped) without a C++ compiler.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
command -v g++ >/dev/null || { echo "no g++: skipped"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-O2 -fno-math-errno -fno-trapping-math -Wall -Wextra -Werror -I"$src/include")
gcc -std=c11 "${flags[@]}" -DFORMULAS_EVAL=eval_c -x c -c "$src/tests/formulas_eval.inc" -o "$work/c.o"
g++ -std=c++17 "${flags[@]}" -DFORMULAS_EVAL=eval_cxx -x c++ -c "$src/tests/formulas_eval.inc" -o "$work/cxx.o"
objs=("$work/c.o" "$work/cxx.o")
defs=()
link=()
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ -x "$nvcc" ]; then
  "$nvcc" -std=c++17 -O2 -I"$src/include" -DFORMULAS_EVAL=eval_nvcc -x cu -c "$src/tests/formulas_eval.inc" -o "$work/nvcc.o"
  objs+=("$work/nvcc.o")
  defs+=(-DWITH_NVCC)
  link+=(-L"$(dirname "$nvcc")/../lib64" -lcudart_static -ldl -lrt -lpthread)
  echo "nvcc: $nvcc"
else
  echo "nvcc not found: C and C++ only"
fi
g++ -std=c++17 "${flags[@]}" "${defs[@]}" "$src/tests/formulas_cxx_test.cc" "${objs[@]}" -o "$work/t" "${link[@]}"
"$work/t"
