#!/bin/sh
# `nabla generate` (GPT-2, Llama, Mistral) and `nabla embed` against the references of tests/hf_ref.py in REF: the
# text transformers' greedy tokens make, sentence-transformers' embeddings (cosine distance at
# most 1e-5 each), and wrong arguments (exit 2) and a folder that is not a checkpoint (exit 1,
# the error naming it).
# Usage: hf_cli_test.sh NABLA REF PYTHON
set -eu
nabla=$1 ref=$2 py=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nabla" generate "$ref/gpt2" --prompt "The licence" --max-new-tokens 30 > "$out/gen.txt"
cmp "$out/gen.txt" "$ref/gpt2_cli.txt" || { echo "nabla generate: the text differs from transformers'"; exit 1; }
for lm in llama mistral; do
    "$nabla" generate "$ref/$lm" --prompt "The licence" --max-new-tokens 30 > "$out/gen.txt"
    cmp "$out/gen.txt" "$ref/${lm}_cli.txt" || { echo "nabla generate ($lm): the text differs from transformers'"; exit 1; }
done
minilm=$(cat "$ref/minilm.txt")
"$nabla" embed "$minilm" --file "$ref/sentences.txt" -o "$out/emb.npy"
"$py" - "$out/emb.npy" "$ref/minilm_emb.npy" <<'PY'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape, (a.shape, b.shape)
d = 1 - (a * b).sum(1) / np.linalg.norm(b, axis=1)
print(f"nabla embed: {len(a)} sentences, largest cosine distance {d.max():.2e} (floor 1e-5)")
sys.exit(0 if d.max() <= 1e-5 else 1)
PY
"$nabla" embed "$minilm" --text "Hello world!" | awk 'NF != 384 { exit 1 }'
expect() { # status, then a text the output must hold, then the command
    want=$1 text=$2; shift 2
    set +e; "$@" > "$out/o" 2>&1; got=$?; set -e
    [ "$got" = "$want" ] || { echo "'$*' exited $got, expected $want"; cat "$out/o"; exit 1; }
    grep -qF -- "$text" "$out/o" || { echo "'$*' did not say '$text':"; cat "$out/o"; exit 1; }
}
expect 2 "no --prompt given" "$nabla" generate "$ref/gpt2"
expect 2 "--top-p got \"2\"" "$nabla" generate "$ref/gpt2" --prompt x --top-p 2
expect 2 "give one of --text and --file" "$nabla" embed "$minilm"
expect 1 "$out/none/config.json" "$nabla" generate "$out/none" --prompt x
expect 1 "not an encoder" "$nabla" embed "$ref/gpt2" --text x
# a model name in the Hugging Face cache: a fake cache whose snapshot links the reference gpt2's
# files, as huggingface_hub links its blobs; and a name that is not there
refabs=$(cd "$ref" && pwd)
repo="$out/hf/hub/models--tiny-org--gpt2"
mkdir -p "$repo/refs" "$repo/snapshots/0123abcd"
printf 0123abcd > "$repo/refs/main"
for f in "$refabs/gpt2"/*; do ln -s "$f" "$repo/snapshots/0123abcd/"; done
HF_HOME="$out/hf" "$nabla" generate tiny-org/gpt2 --prompt "The licence" --max-new-tokens 30 > "$out/gen.txt"
cmp "$out/gen.txt" "$ref/gpt2_cli.txt" || { echo "nabla generate (cached name): the text differs from transformers'"; exit 1; }
expect 1 "$out/hf/hub/models--nobody--gpt9/snapshots" env HF_HOME="$out/hf" "$nabla" generate nobody/gpt9 --prompt x
expect 1 "does not download" env HF_HOME="$out/hf" "$nabla" generate nobody/gpt9 --prompt x
echo "hf_cli_test: ok"
