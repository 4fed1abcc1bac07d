#!/usr/bin/env bash
# Makes (or reuses) a Python virtual environment from a file of pinned PyPI requirements, wheels
# only; prints the environment's python on stdout (progress goes to stderr). Idempotent: an
# environment made from the same pins, whose CHECK still runs, is reused; changed pins rebuild it.
# scripts/torch2_env.sh and scripts/onnx_env.sh are its two callers.
#
# Usage: scripts/venv.sh REQUIREMENTS DIR CHECK
#   CHECK      Python code that must run in the environment (imports, a version line on stderr)
#   PYTHON=... (environment) the interpreter the environment is made from (default /usr/bin/python3,
#              Debian's, with python3-venv)
#   VENV_SYSTEM_SITE=1 (environment) the environment also sees the interpreter's own packages
#              (Debian's python3-torch, for references that run on it)
set -euo pipefail
reqs=$1 dir=$2 check=$3
name=$(basename "$reqs")
base=${PYTHON:-/usr/bin/python3}
[ -x "$base" ] || base=$(command -v python3)
stamp="$dir/.nabla-requirements"
py="$dir/bin/python"

if [ -x "$py" ] && [ -f "$stamp" ] && cmp -s "$stamp" "$reqs" && "$py" -c "$check" 2>/dev/null; then
    echo "venv.sh: reusing $dir" >&2
    echo "$py"
    exit 0
fi
if ! "$base" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "venv.sh: $base cannot make a virtual environment; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
fi
echo "venv.sh: making $dir from $base with $name" >&2
rm -rf "$dir"
if [ "${VENV_SYSTEM_SITE:-}" = 1 ]; then "$base" -m venv --system-site-packages "$dir"; else "$base" -m venv "$dir"; fi
"$py" -m pip install --disable-pip-version-check -q --upgrade pip==26.3 >&2
# --only-binary: wheels only, nothing built here; --no-deps is not used, so a pin missing from
# the file would show as an unpinned install in `pip freeze`, not as a broken environment
"$py" -m pip install --disable-pip-version-check -q --only-binary=:all: -r "$reqs" >&2
"$py" -c "$check" >&2
cp "$reqs" "$stamp"
echo "$py"
