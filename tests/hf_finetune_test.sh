#!/bin/sh
# `nabla train --model DIR --data FILE.txt` against tests/hf_ref.py's torch run in REF: the
# dropout-free GPT-2 (gpt2_ft) fine-tuned on ft_text.txt with the arguments of ft_args.txt, in the
# order of the text (--no-shuffle) and nabla's seeded validation split, for 2 epochs (6 steps)
# and for --steps 4: the saved parameters within 1e-4 relative of torch's, the step and
# validation losses torch's, the loss falling; transformers' from_pretrained reads the saved
# folder and gives nabla's logits for it within 1e-5; `nabla generate` reads it; the input
# folder's files never change. The random Llama of hf_ref.py, fine-tuned on the same blocks, ends
# within 1e-4 of torch's parameters and losses, and transformers reads it. Bad input (no tokenizer, a text shorter than one block, -o or
# --logdir naming the input folder, a non-empty -o, an encoder, no --data, a classifier-only option) exits
# non-zero with a message saying what is wrong and writes nothing.
# Usage: hf_finetune_test.sh NABLA TEST_HF_FINETUNE REF PYTHON
set -eu
nabla=$1 test=$2 ref=$3 py=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=$(cat "$ref/ft_args.txt")
# transformers reads the fine-tuned FOLDER (no missing or unexpected key) and its logits for IDS
# are nabla's within 1e-5
hf_logits() { # FOLDER IDS
    "$py" - "$1" "$2" "$out/hf_logits.npy" <<'PY'
import sys
import numpy as np
import torch
from transformers import AutoModelForCausalLM
model, info = AutoModelForCausalLM.from_pretrained(sys.argv[1], output_loading_info=True)
assert not any(info.values()), info
with torch.no_grad():
    logits = model.eval()(input_ids=torch.from_numpy(np.load(sys.argv[2]))).logits
np.save(sys.argv[3], logits.numpy().astype(np.float32))
PY
    "$test" --logits "$1" "$2" "$out/hf_logits.npy"
}
sums() { sha256sum "$ref/gpt2_ft"/*; }
before=$(sums)
# shellcheck disable=SC2086 # $args is a list of options
"$nabla" train --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" $args --epochs 2 -o "$out/ft6" --logdir "$out/run6" \
    --log-every 1 > "$out/log6"
cat "$out/log6"
# shellcheck disable=SC2086
"$nabla" train --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" $args --steps 4 -o "$out/ft4" --logdir "$out/run4" \
    --quiet
[ "$(sums)" = "$before" ] || { echo "fine-tuning changed the input folder's files"; exit 1; }
for f in config.json model.safetensors tokenizer.json; do
    [ -f "$out/ft6/$f" ] || { echo "the fine-tuned folder has no $f"; exit 1; }
done
[ -f "$out/run6/curves.svg" ] || { echo "no curves.svg in the run folder"; exit 1; }

"$py" - "$ref" "$out" "$(dirname "$0")" <<'PY'
import glob, os, sys
import numpy as np
import torch
from safetensors.numpy import load_file
ref, out, tests = sys.argv[1:4]
sys.path.insert(0, tests)
import tb_reader

n_embd = 32
worst = 0.0
for step, folder in ((6, "ft6"), (4, "ft4")):
    got = load_file(os.path.join(out, folder, "model.safetensors"))
    want = load_file(os.path.join(ref, f"ft_step{step}.safetensors"))
    start = load_file(os.path.join(ref, "gpt2_ft", "model.safetensors"))
    assert list(got) == list(start), "the saved keys or their order differ from the input checkpoint's"
    assert sorted(got) == sorted(want)
    for k in want:
        a, b = got[k].astype(np.float64), want[k].astype(np.float64)
        assert a.shape == b.shape and got[k].dtype == start[k].dtype, k
        if k.endswith("attn.c_attn.bias"):
            # the key bias: its gradient is 0 in exact arithmetic (softmax ignores a constant added
            # to every key's score), so AdamW moves it by rounding noise divided by ~sqrt(v), on
            # both sides: it must stay that small; the query and value biases are held as the rest
            kb = slice(n_embd, 2 * n_embd)
            assert np.abs(a[kb]).max() < 1e-5 and np.abs(b[kb]).max() < 1e-5, (k, np.abs(a[kb]).max(), np.abs(b[kb]).max())
            a, b = np.delete(a, np.r_[kb]), np.delete(b, np.r_[kb])
        rel = np.abs(a - b).max() / np.abs(b).max()
        worst = max(worst, rel)
        assert rel <= 1e-4, (step, k, rel)
    moved = max(np.abs(want[k].astype(np.float64) - start[k]).max() for k in want)
    print(f"fine-tuning, {step} steps: parameters within {worst:.2e} relative of torch's (floor 1e-4); "
          f"the largest change of a parameter is {moved:.2e}")

def scalars(run):
    vals = {}
    for path in glob.glob(os.path.join(out, run, "events.out.tfevents.*")):
        for e in tb_reader.read_events(path):
            for v in e.get("values", []):
                if "simple_value" in v:
                    vals.setdefault(v["tag"], {})[e["step"]] = v["simple_value"]
    return vals
s = scalars("run6")
steps = [s["step/loss"][i] for i in range(1, 7)]
want_steps = np.load(os.path.join(ref, "ft_losses.npy"))
val = [s["epoch/val_loss"][e] for e in (1, 2)]
want_val = np.load(os.path.join(ref, "ft_val.npy"))
ds, dv = np.abs(np.array(steps) - want_steps).max(), np.abs(np.array(val) - want_val).max()
print("step losses", " ".join(f"{l:.5f}" for l in steps), f"(torch's within {ds:.1e});",
      "validation", " ".join(f"{l:.5f}" for l in val), f"(within {dv:.1e})")
assert ds <= 1e-4 and dv <= 1e-4
assert s["epoch/loss"][2] < s["epoch/loss"][1] and val[1] < val[0], "the loss did not fall"
assert abs(s["epoch/val_perplexity"][2] - np.exp(val[1])) <= 1e-3 * np.exp(val[1])
PY
hf_logits "$out/ft6" "$ref/gpt2_ids.npy"
"$nabla" generate "$out/ft6" --prompt "The licence" --max-new-tokens 5 > /dev/null

# the Llama decoder (random, tests/hf_ref.py's llama/) on the same blocks: torch's parameters and
# losses after 6 steps (its training runs RMSNorm, rotary embeddings and grouped-query attention
# backward), and transformers reads the saved folder
lsums() { sha256sum "$ref/llama"/*; }
lbefore=$(lsums)
# shellcheck disable=SC2086
"$nabla" train --model "$ref/llama" --data "$ref/ft_text.txt" $args --epochs 2 -o "$out/lft6" --logdir "$out/lrun6" \
    --log-every 1 --quiet
[ "$(lsums)" = "$lbefore" ] || { echo "fine-tuning changed the Llama input folder's files"; exit 1; }
"$py" - "$ref" "$out" "$(dirname "$0")" <<'PY'
import glob, os, sys
import numpy as np
import torch
from safetensors.numpy import load_file
ref, out, tests = sys.argv[1:4]
sys.path.insert(0, tests)
import tb_reader
got = load_file(os.path.join(out, "lft6", "model.safetensors"))
want = load_file(os.path.join(ref, "llama_ft_step6.safetensors"))
assert sorted(got) == sorted(want)
worst = max(np.abs(got[k].astype(np.float64) - want[k]).max() / np.abs(want[k]).max() for k in want)
steps = {}
for path in glob.glob(os.path.join(out, "lrun6", "events.out.tfevents.*")):
    for e in tb_reader.read_events(path):
        for v in e.get("values", []):
            if v.get("tag") == "step/loss":
                steps[e["step"]] = v["simple_value"]
ds = np.abs(np.array([steps[i] for i in range(1, 7)]) - np.load(os.path.join(ref, "llama_ft_losses.npy"))).max()
print(f"Llama fine-tuning, 6 steps: parameters within {worst:.2e} relative of torch's (floor 1e-4), step losses within {ds:.1e}")
assert worst <= 1e-4 and ds <= 1e-4
PY
hf_logits "$out/lft6" "$ref/llama_ids.npy"

# bad input: a message naming the problem, a non-zero status, and no run folder or model written
cp -r "$ref/gpt2_ft" "$out/notok"
rm "$out/notok/tokenizer.json"
printf 'The licence\n' > "$out/short.txt"
expect() { # status, then a text the output must hold, then the arguments of nabla train
    want=$1 text=$2; shift 2
    set +e; "$nabla" train "$@" --logdir "$out/bad_run" > "$out/o" 2>&1; got=$?; set -e
    [ "$got" = "$want" ] || { echo "'nabla train $*' exited $got, expected $want"; cat "$out/o"; exit 1; }
    grep -qF -- "$text" "$out/o" || { echo "'nabla train $*' did not say '$text':"; cat "$out/o"; exit 1; }
    [ ! -e "$out/bad_run" ] && [ ! -e "$out/bad_out" ] || { echo "'nabla train $*' wrote files"; exit 1; }
    [ "$(sums)" = "$before" ] || { echo "'nabla train $*' changed the input folder"; exit 1; }
}
expect 1 "tokenizer" --model "$out/notok" --data "$ref/ft_text.txt" -o "$out/bad_out"
expect 1 "fewer than one block of 16" --model "$ref/gpt2_ft" --data "$out/short.txt" --context 16 -o "$out/bad_out"
expect 2 "is the input model's folder" --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" -o "$ref/gpt2_ft"
expect 2 "is the input model's folder" --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" -o "$ref/gpt2_ft/../gpt2_ft/"
expect 1 "not a causal LM" --model "$ref/tiny" --data "$ref/ft_text.txt" -o "$out/bad_out"
expect 2 "needs a text to learn from: --data FILE.txt" --model "$ref/gpt2_ft" -o "$out/bad_out"
expect 2 "--augment does not apply" --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" --augment on -o "$out/bad_out"
expect 1 "--context 1000 is longer than the model's 80 positions" --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" \
    --context 1000 -o "$out/bad_out"
expect 2 "holds files already" --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" -o "$out/ft6"
expect 1 "cannot open --data" --model "$ref/gpt2_ft" --data "$out/none.txt" -o "$out/bad_out"
set +e; "$nabla" train --model "$ref/gpt2_ft" --data "$ref/ft_text.txt" --logdir "$ref/gpt2_ft" --overwrite > "$out/o" 2>&1
got=$?; set -e
[ "$got" = 2 ] && grep -qF "is the input model's folder" "$out/o" || { echo "--logdir INPUT was not refused"; cat "$out/o"; exit 1; }
[ "$(sums)" = "$before" ] || { echo "--logdir INPUT changed the input folder"; exit 1; }
echo "hf_finetune_test: ok"
