#!/bin/sh
# nabla train, eval, predict and summary on each kind of data (a CSV file, an NPY pair, a folder
# of PNG images in class sub-folders) and with models from JSON configs, as a user meets them.
# Usage: cli_data_test.sh NABLA_BINARY
set -eu
nabla="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
acc_at_least() { awk -v min="$2" '/^test accuracy/ { found = 1; if ($3 < min) exit 1 } END { exit !found }' "$1"; }

# Three classes that a small model separates: blobs in 4-D (CSV), bright quadrants in 8x8 images
# (NPY and PNG). Written with numpy and PIL (Debian's python3-numpy and python3-pil).
/usr/bin/python3 - <<'PY'
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(0)
def blobs(n):
    y = rng.integers(0, 3, n)
    x = rng.normal(0, 0.5, (n, 4)) + np.eye(3, 4)[y] * 3
    return x.astype(np.float32), y
x, y = blobs(600)
with open("train.csv", "w") as f:
    f.write("label,a,b,c,d\n")
    for xi, yi in zip(x, y): f.write("%d,%s\n" % (yi, ",".join("%.4f" % v for v in xi)))
x, y = blobs(200)
with open("test.csv", "w") as f:
    f.write("label,a,b,c,d\n")
    for xi, yi in zip(x, y): f.write("%d,%s\n" % (yi, ",".join("%.4f" % v for v in xi)))
def images(n):
    y = rng.integers(0, 3, n)
    x = rng.integers(0, 60, (n, 1, 8, 8)).astype(np.uint8)
    for i, c in enumerate(y):
        r, q = divmod(int(c), 2)
        x[i, 0, r * 4:r * 4 + 4, q * 4:q * 4 + 4] += 180
    return x, y
x, y = images(600)
np.save("x.npy", x.astype(np.float32) / 255); np.save("y.npy", y.astype(np.int64))
x, y = images(150)
np.save("tx.npy", x.astype(np.float32) / 255); np.save("ty.npy", y.astype(np.int64))
for split, n in (("train", 450), ("test", 150)):
    x, y = images(n)
    for i, (xi, c) in enumerate(zip(x, y)):
        d = "shapes/%s/%s" % (split, ["circle", "square", "star"][c])
        os.makedirs(d, exist_ok=True)
        Image.fromarray(xi[0], "L").save("%s/%d.png" % (d, i))
PY

# CSV: the label column by name, a test file, class names 0..2, the model rebuilt from the file
"$nabla" train --data train.csv --label label --test test.csv --epochs 8 --lr 0.01 --logdir csv >csv.txt
cat csv.txt
grep -q "3 classes" csv.txt || fail "CSV: not 3 classes"
acc_at_least csv.txt 0.9 || fail "CSV: test accuracy under 0.9"
"$nabla" eval csv/model.safetensors --data test.csv --label label >eval.txt
awk '/^test accuracy/ { print $3 }' csv.txt > a.txt; awk '/^test accuracy/ { print $3 }' eval.txt > b.txt
cmp -s a.txt b.txt || fail "CSV: eval gives $(cat b.txt), train printed $(cat a.txt)"
echo "csv: ok"

# training options, each checked by what it must do
# --early-stopping 2: stops once val_loss has not improved for 2 epochs, saying so
"$nabla" train --data train.csv --label label --epochs 40 --lr 0.05 --early-stopping 2 --logdir es >es.txt
e="$(sed -n 's/^early stopping: val_loss did not improve for 2 epochs; stopped after epoch \([0-9]*\)$/\1/p' es.txt)"
[ -n "$e" ] && [ "$e" -lt 40 ] && [ "$(grep -c '^Epoch ' es.txt)" -eq "$e" ] || fail "--early-stopping 2: $(tail -n 4 es.txt)"
# --clip-grad-norm 0.05: the gradient norm logged after the epoch's last step is at most 0.05
"$nabla" train --data train.csv --label label --epochs 2 --clip-grad-norm 0.05 --logdir clip --quiet
g="$("$nabla" plot clip --text | awk '$1 == "grad_norm/global" { print $4 }')"
awk -v g="$g" 'BEGIN { exit !(g != "" && g <= 0.05 * (1 + 1e-5)) }' || fail "--clip-grad-norm 0.05: grad norm $g"
# --label-smoothing 0.1 over 3 classes: the loss cannot go below the smoothed target's entropy,
# -(0.9333 ln 0.9333 + 2 * 0.0333 ln 0.0333) = 0.2911, which the unsmoothed loss passes
"$nabla" train --data train.csv --label label --epochs 15 --lr 0.01 --label-smoothing 0.1 --logdir ls1 --quiet
"$nabla" train --data train.csv --label label --epochs 15 --lr 0.01 --logdir ls0 --quiet
l1="$("$nabla" plot ls1 --text | awk '$1 == "epoch/val_loss" { print $4 }')"
l0="$("$nabla" plot ls0 --text | awk '$1 == "epoch/val_loss" { print $4 }')"
awk -v a="$l1" -v b="$l0" 'BEGIN { exit !(a >= 0.2910 && a < 0.5 && b < 0.2910) }' || fail "--label-smoothing 0.1: val_loss $l1 (without: $l0)"
# --weight-decay 10 (AdamW's decoupled decay, lr 0.01: weights times 0.9 a step) shrinks the first
# layer's weights to well under half of those trained with --weight-decay 0
"$nabla" train --data train.csv --label label --epochs 5 --lr 0.01 --weight-decay 10 --val-split 0 --logdir wd1 --quiet
"$nabla" train --data train.csv --label label --epochs 5 --lr 0.01 --weight-decay 0 --val-split 0 --logdir wd0 --quiet
norm() { /usr/bin/python3 -c '
import json, struct, sys, numpy as np
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); d = f.read()
a, b = h["1.weight"]["data_offsets"]; print(np.linalg.norm(np.frombuffer(d[a:b], dtype=np.float32)))' "$1"; }
n1="$(norm wd1/model.safetensors)"; n0="$(norm wd0/model.safetensors)"
awk -v a="$n1" -v b="$n0" 'BEGIN { exit !(a < 0.5 * b) }' || fail "--weight-decay 10: weight norm $n1, without $n0"
echo "--early-stopping (epoch $e), --clip-grad-norm ($g), --label-smoothing ($l1 vs $l0), --weight-decay ($n1 vs $n0): ok"

# nabla predict on a CSV (its label column left out by --label) writes every prediction with -o;
# as many agree with the file's labels as nabla eval counts right. eval of a model whose input is
# not Fashion-MNIST's, without --data, says to pass --data.
"$nabla" predict csv/model.safetensors test.csv --label label -o preds.csv >/dev/null
[ "$(head -n 1 preds.csv)" = "file,class,probability" ] && [ "$(wc -l <preds.csv)" -eq 201 ] || fail "predict -o: $(head -n 3 preds.csv)"
right="$(awk -F, '{ print $1 }' test.csv | paste -d, - preds.csv | awk -F, 'NR > 1 && $1 == $3' | wc -l)"
"$nabla" eval csv/model.safetensors --data test.csv --label label >eval.txt
grep -q "^test accuracy [0-9.]* ($right of 200)" eval.txt || fail "predict agrees with the labels $right times; eval: $(head -n 1 eval.txt)"
set +e; "$nabla" eval csv/model.safetensors >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "not Fashion-MNIST's .* --data" err.txt || fail "eval of a CSV model without --data: exit $rc, $(cat err.txt)"
echo "predict -o on a CSV: 200 predictions, $right right as eval counts"

# nabla info of an exported model counts each initializer once: the mlp's 4 weights and biases and
# as many elements as its parameters (the export's weight Transposes, folded at load, are no more)
if "$nabla" export csv/model.safetensors -o csv.onnx >/dev/null 2>err.txt; then
  params="$("$nabla" summary csv/model.safetensors | awk '/^Total params:/ { gsub(",", "", $3); print $3 }')"
  "$nabla" info csv.onnx >info.txt
  grep -q "^initializers: 4, $params elements" info.txt || fail "info of an ONNX file with 4 initializers, $params elements: $(grep initializers info.txt)"
  echo "info of an ONNX file: 4 initializers, $params elements"
else
  grep -q "built without ONNX" err.txt || fail "nabla export: $(cat err.txt)"
  echo "info of an ONNX file: skipped (built without ONNX)"
fi

# a nan in the data is an error naming the file, the line and the column, before any training;
# a loss that turns nan stops training at that step (never "loss: nan" epoch after epoch), and no
# message claims a model file that was never written
awk -F, 'NR == 6 { $3 = "nan" } 1' OFS=, train.csv > nan.csv
set +e; "$nabla" train --data nan.csv --label label --epochs 2 --logdir nan_run >out.txt 2>err.txt; rc=$?; set -e
cat err.txt
[ "$rc" -ne 0 ] && grep -q 'nan.csv: value "nan" at line 6, column 3 ("b")' err.txt || fail "a nan in a CSV: exit $rc, $(cat err.txt)"
[ ! -e nan_run ] || fail "a CSV with a nan made a run folder"
/usr/bin/python3 -c 'import numpy as np; x = np.load("x.npy"); x[7, 0, 2, 3] = np.inf; np.save("inf.npy", x)'
set +e; "$nabla" train --data inf.npy --labels y.npy --epochs 1 --logdir inf_run >out.txt 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "inf.npy: value inf of sample 7 (element 19 of the sample) is not finite" err.txt \
  || fail "an inf in an NPY: exit $rc, $(cat err.txt)"
set +e; "$nabla" train --data train.csv --label label --lr 1e6 --optimizer sgd --epochs 3 --logdir big_lr >out.txt 2>err.txt; rc=$?; set -e
cat out.txt err.txt
[ "$rc" -ne 0 ] && grep -q "the loss is nan at step [0-9]* (epoch 1, batch" err.txt && grep -q "Lower the learning rate" err.txt \
  || fail "a nan loss does not stop training at its step: exit $rc, $(cat err.txt)"
! grep -qi "loss: -*nan" out.txt || fail "epochs went on with a nan loss"
! grep -q "cannot read back\|No such file" err.txt || fail "a message claims a file that was never written"
echo "nan in the data, nan loss: stopped with the place named"

# NPY pair with a JSON config of a small convnet
cat > conv.json <<'J'
{"layers": [{"type": "conv2d", "out": 8, "kernel": 3, "padding": "same"}, {"type": "relu"},
            {"type": "max_pool2d", "kernel": 2}, {"type": "flatten"}, {"type": "linear", "out": 3}]}
J
"$nabla" train --data x.npy --labels y.npy --test tx.npy --test-labels ty.npy --model conv.json --epochs 6 --lr 0.01 --logdir npy >npy.txt
cat npy.txt
acc_at_least npy.txt 0.9 || fail "NPY + JSON: test accuracy under 0.9"
"$nabla" summary npy/model.safetensors >sum.txt
cat sum.txt
grep -q "conv2d\|Conv2d" sum.txt || fail "summary of the saved model lists no conv2d"
"$nabla" predict npy/model.safetensors tx.npy --top 2 | grep -q "^tx.npy\[0\]:" || fail "predict on an .npy"
echo "npy + json config: ok"

# a folder of PNG images with train/ and test/: class names come from the folders
"$nabla" train --data shapes --model conv.json --epochs 6 --lr 0.01 --logdir img >img.txt
cat img.txt
acc_at_least img.txt 0.9 || fail "images: test accuracy under 0.9"
"$nabla" eval img/model.safetensors --data shapes >eval.txt
grep -q "circle" eval.txt && grep -q "star" eval.txt || fail "eval does not name the classes from the folders"
"$nabla" predict img/model.safetensors shapes/test/star/"$(ls shapes/test/star | head -n 1)" | grep -q "star\|circle\|square" \
  || fail "predict on a PNG names no class"
echo "image folder: ok"

# a folder of mixed sizes and colours (RGB 12x10 and gray 8x8) batches once converted and resized
/usr/bin/python3 - <<'PY'
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(2)
for c, name in enumerate(["dark", "light"]):
    os.makedirs("mixed/" + name, exist_ok=True)
    for i in range(40):
        v = 40 + 170 * c
        if i % 2: Image.fromarray(rng.integers(v - 30, v + 30, (12, 10, 3)).astype(np.uint8), "RGB").save("mixed/%s/%d.png" % (name, i))
        else: Image.fromarray(rng.integers(v - 30, v + 30, (8, 8)).astype(np.uint8), "L").save("mixed/%s/%d.png" % (name, i))
PY
"$nabla" train --data mixed --image-size 6x6 --channels 1 --epochs 3 --lr 0.01 --logdir mixed_run --val-split 0.2 >mixed.txt
grep -q "training samples \[1, 6, 6\]" mixed.txt || fail "mixed images: $(head -n 1 mixed.txt)"
"$nabla" predict mixed_run/model.safetensors mixed/light/1.png | grep -q "light" || fail "predict on an RGB 12x10 PNG for a 1x6x6 model"
echo "mixed image sizes: ok"

# a folder of 40 JPEGs and 2 PNGs (PIL) trains on all 42, counted per class; a file that is not
# an image is an error naming it, never dropped in silence
/usr/bin/python3 - <<'PY'
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(4)
for c, name in enumerate(["dark", "light"]):
    os.makedirs("photos/" + name, exist_ok=True)
    for i in range(21):
        v = 40 + 170 * c
        img = Image.fromarray(rng.integers(v - 30, v + 30, (12, 12, 3)).astype(np.uint8), "RGB")
        if i == 0: img.save("photos/%s/%d.png" % (name, i))
        else: img.save("photos/%s/%d.jpg" % (name, i), quality=90)
PY
set +e; "$nabla" train --data photos --val-split 0 --epochs 3 --lr 0.01 --logdir photos_run >photos.txt 2>err.txt; rc=$?; set -e
if grep -q "built without libjpeg" err.txt; then
  echo "JPEG folder: skipped (built without libjpeg)"
else
  [ "$rc" -eq 0 ] || fail "a folder of JPEGs: $(cat err.txt)"
  grep -q "42 training samples \[3, 12, 12\]" photos.txt || fail "a folder of 40 JPEGs and 2 PNGs: $(head -n 1 photos.txt)"
  grep -q "images per class in photos: dark 21, light 21" photos.txt || fail "no count per class: $(head -n 2 photos.txt)"
  "$nabla" predict photos_run/model.safetensors photos/light/3.jpg | grep -q "light" || fail "predict on a JPEG"
  # several inputs, a folder among them: one row per image, as many right as eval counts
  "$nabla" predict photos_run/model.safetensors photos/light/3.jpg photos -o photo_preds.csv >/dev/null
  [ "$(wc -l <photo_preds.csv)" -eq 44 ] || fail "predict of an image and a folder of 42: $(wc -l <photo_preds.csv) lines"
  right="$(awk -F, 'NR > 2 { split($1, p, "/"); if (p[2] == $2) n++ } END { print n + 0 }' photo_preds.csv)"
  "$nabla" eval photos_run/model.safetensors --data photos >eval.txt
  grep -q "^test accuracy [0-9.]* ($right of 42)" eval.txt || fail "predict of the folder: $right right; eval: $(head -n 1 eval.txt)"
  echo "notes" > photos/dark/notes.txt
  set +e; "$nabla" train --data photos --epochs 1 --logdir photos_run2 >out.txt 2>err.txt; rc=$?; set -e
  [ "$rc" -ne 0 ] && grep -q "photos/dark/notes.txt is neither a PNG nor a JPEG" err.txt || fail "a text file in a class folder: $(cat err.txt)"
  echo "JPEG folder: 42 images trained on, a text file named"
fi

# wrong configs are errors that name the layer and the field; nothing is trained
printf '%s' '{"layers": [{"type": "conv2d", "out": 4, "kernal": 3}, {"type": "linear", "out": 3}]}' > typo.json
set +e; "$nabla" train --data x.npy --labels y.npy --model typo.json 2>err.txt; rc=$?; set -e
cat err.txt
[ "$rc" -ne 0 ] && grep -q "layer 0" err.txt && grep -q "kernal" err.txt || fail "a typo in a config is not named"
printf '%s' '{"layers": [{"type": "linear", "out": 5}]}' > five.json
set +e; "$nabla" train --data train.csv --model five.json 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "5 outputs" err.txt || fail "a config with 5 outputs for 3 classes: $(cat err.txt)"
printf '{"layers": [\n  {"type": "linear", "out": 3},\n]}' > broken.json
set +e; "$nabla" train --data train.csv --model broken.json 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "line 3, column" err.txt && ! grep -q -- "-1" err.txt || fail "invalid JSON: $(cat err.txt)"
set +e; "$nabla" train --data train.csv --model missing.json 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "missing.json" err.txt && ! grep -q -- "-1" err.txt || fail "a missing config: $(cat err.txt)"
[ ! -e runs ] || fail "a refused run left a run folder"
set +e; "$nabla" train --data x.npy 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q -- "--labels" err.txt || fail "an .npy without --labels: $(cat err.txt)"
echo "wrong configs and data: refused"

# a Keras-style config (Dense, units, activation) trains, its run folder named after the file;
# a Keras field nabla does not take is named
mkdir -p configs
printf '%s' '{"layers": [{"type": "Dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 3}]}' > configs/keras.json
"$nabla" train --data train.csv --label label --test test.csv --model configs/keras.json --epochs 8 --lr 0.01 >keras.txt
acc_at_least keras.txt 0.9 || fail "a Keras-style config: $(cat keras.txt)"
[ -d runs/keras ] || fail "the run folder of configs/keras.json is not runs/keras: $(ls -R runs | head)"
"$nabla" summary runs/keras/latest/model.safetensors | grep -q "ReLU" || fail "activation relu made no ReLU layer"
rm -rf runs
printf '%s' '{"layers": [{"type": "dense", "units": 3, "kernel_initializer": "he_normal"}]}' > keras_bad.json
set +e; "$nabla" train --data train.csv --model keras_bad.json 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q 'layer 0 (dense, as linear): unknown field "kernel_initializer"' err.txt || fail "an unknown Keras field: $(cat err.txt)"
echo "Keras-style config: trained; an unknown field named"

# a state dict saved without a config (as before configs were stored) loads as --model names it
/usr/bin/python3 - <<'PY'
import json, struct, numpy as np
rng = np.random.default_rng(1)
ts = {"1.weight": rng.normal(0, 0.05, (128, 784)), "1.bias": np.zeros(128), "3.weight": rng.normal(0, 0.05, (10, 128)),
      "3.bias": np.zeros(10)}
header, blobs, off = {}, [], 0
for k, v in ts.items():
    b = v.astype(np.float32).tobytes()
    header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header).encode()
with open("legacy.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h); f.write(b"".join(blobs))
PY
"$nabla" eval legacy.safetensors --limit 100 | grep -q "^test accuracy" || fail "a file without a config does not load as the mlp"
set +e; "$nabla" eval legacy.safetensors --model cnn 2>err.txt; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "name its architecture with --model" err.txt || fail "a file of another architecture: $(cat err.txt)"
echo "files without a config: ok"

# the built-ins summarised without a file
"$nabla" summary resnet >sum.txt && grep -qi "total" sum.txt || fail "nabla summary resnet"
echo "cli_data_test: all passed"
