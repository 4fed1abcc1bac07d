#!/bin/sh
# No subcommand writes over what it reads: an output path that names an input (the same name,
# another name, a hard or symbolic link, or a file inside an input folder) is refused with exit 2
# and a message naming both, and the input is left byte for byte (sha256) as it was; nabla plot
# also keeps an existing file it did not draw unless told --overwrite.
# Usage: cli_outputs_test.sh NABLA_BINARY [NABLA_PLOT_BINARY]
set -eu
nabla="$1"
plot_bin="${2:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
sum() { sha256sum "$1" | cut -d' ' -f1; }

# refused WHAT PATTERN FILE -- ARGS: the command exits 2, says PATTERN, and FILE is unchanged
refused() {
  what="$1"; pattern="$2"; file="$3"; shift 4
  before="$(sum "$file")"
  set +e; "$@" >out.txt 2>err.txt; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, expected 2 ($(cat err.txt))"
  grep -q -- "$pattern" err.txt || fail "$what: the message does not say \"$pattern\": $(cat err.txt)"
  [ "$(sum "$file")" = "$before" ] || fail "$what: $file was changed"
  echo "refused: $what"
}

/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "SKIPPED: no numpy"; exit 77; }
"$nabla" train --epochs 1 --limit 300 --logdir r --quiet
ev="$(ls r/events.out.tfevents.* | head -n 1)"
model=r/model.safetensors

# nabla train: --out naming --data or --resume; a --logdir whose checkpoint is the --data
/usr/bin/python3 -c "
import numpy as np
np.save('x.npy', np.random.default_rng(0).random((2, 1, 28, 28), dtype=np.float32))
np.save('lab.npy', np.zeros(2, dtype=np.int64))"
refused "train --out X --data X" "is the input --data x.npy" x.npy -- "$nabla" train --data x.npy --labels lab.npy --out x.npy
refused "train --out LABELS (hard link)" "is the input --labels lab.npy" lab.npy -- \
  sh -c "ln lab.npy lab_link.npy && \"$nabla\" train --data x.npy --labels lab.npy --out lab_link.npy"
cp r/checkpoint.safetensors ck.safetensors
refused "train --out CKPT --resume CKPT" "is the input --resume" ck.safetensors -- \
  "$nabla" train --resume ck.safetensors --out ck.safetensors --epochs 2 --limit 300
mkdir d && cp x.npy d/checkpoint.safetensors
refused "train --logdir D --data D/checkpoint" "is the input --data" d/checkpoint.safetensors -- \
  "$nabla" train --data d/checkpoint.safetensors --labels lab.npy --logdir d --overwrite

# nabla export: -o naming the model it reads
refused "export M -o M" "is the input MODEL" "$model" -- "$nabla" export "$model" -o "$model"
refused "export M -o M (by another path)" "is the input MODEL" "$model" -- "$nabla" export "$model" -o "r/../$model"
if "$nabla" export "$model" -o m.onnx --dynamic-batch >/dev/null 2>export.err; then
  # nabla run: -o naming an --input or the model, --outputs holding an input
  refused "run --input X -o X" "is the input --input x.npy" x.npy -- "$nabla" run m.onnx --input x.npy -o x.npy
  ln -s x.npy x_link.npy
  refused "run --input X -o LINK-TO-X" "is the input --input x.npy" x.npy -- "$nabla" run m.onnx --input x.npy -o x_link.npy
  refused "run M -o M" "is the input MODEL m.onnx" m.onnx -- "$nabla" run m.onnx --input x.npy -o m.onnx
  "$nabla" run m.onnx --input x.npy --outputs od >/dev/null
  produced="$(ls od/*.npy | head -n 1)"
  cp x.npy "$produced"
  refused "run --input OD/OUT.npy --outputs OD" "is the input --input" "$produced" -- \
    "$nabla" run m.onnx --input "$produced" --outputs od
  "$nabla" run m.onnx --input x.npy -o y.npy >/dev/null || fail "run -o a new file failed"
else
  grep -q "without" export.err || fail "export failed: $(cat export.err)"
  echo "nabla run: not checked (a build without ONNX)"
fi

# nabla embed: -o naming --file, or a file of the model folder (checked before the model loads)
mkdir hf && printf '{"model_type": "bert"}\n' > hf/config.json && printf 'weights' > hf/model.safetensors
printf 'one\ntwo\n' > t.txt
refused "embed --file T -o T" "is the input --file t.txt" t.txt -- "$nabla" embed hf --file t.txt -o t.txt
refused "embed DIR -o DIR/config.json" "file of the input folder DIR hf" hf/config.json -- \
  "$nabla" embed hf --text hello -o hf/config.json
refused "embed DIR -o DIR/model.safetensors" "file of the input folder DIR hf" hf/model.safetensors -- \
  "$nabla" embed hf --text hello -o hf/model.safetensors

# nabla plot (and nabla-plot): the run's own event file never, a file it did not draw only with
# --overwrite, its own SVG and CSV freely
for p in "$nabla plot" ${plot_bin:+"$plot_bin"}; do
  refused "$p -o EVENTS" "is a file of the input folder run r" "$ev" -- $p r -o "$ev"
  refused "$p -o EVENTS --overwrite" "is a file of the input folder run r" "$ev" -- $p r -o "$ev" --overwrite
  refused "$p EVENTS --csv EVENTS" "is the input run" "$ev" -- $p "$ev" --csv "$ev" --overwrite
  printf 'my notes\n' > notes.txt
  refused "$p -o NOTES" "not a file nabla plot wrote" notes.txt -- $p r -o notes.txt
  refused "$p --csv NOTES" "not a file nabla plot wrote" notes.txt -- $p r --csv notes.txt
  $p r -o notes.txt --overwrite || fail "$p -o notes.txt --overwrite failed"
  grep -q '<svg' notes.txt || fail "$p --overwrite did not write the SVG"
  $p r -o notes.txt || fail "$p did not replace an SVG it drew"
  $p r -o r/curves.svg || fail "$p did not replace the SVG nabla train drew"
  $p r --csv s.csv && $p r --csv s.csv || fail "$p did not replace a CSV it wrote"
  refused "$p -o F --csv F" "are the same file" s.csv -- $p r -o s.csv --csv s.csv --overwrite
done
[ -z "$(ls -a | grep '\.tmp\.')" ] || fail "temporary files left behind: $(ls -a)"
echo "cli_outputs_test: all passed"
