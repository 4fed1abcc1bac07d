#!/usr/bin/env python3
"""Two training jobs on one machine: the seed MLP's training step (bench_nn mlp and its PyTorch
twin, bench_nn_torch.py mlp), run alone, as two copies started together, and beside one
CPU-bound process of another program; nabla and PyTorch alternate round by round, each figure
is the median over the rounds, and the floors of the runtime issue are checked:

  - each of two concurrent nabla copies keeps at least 40% of the single-copy rate;
  - each concurrent nabla copy is faster than each concurrent PyTorch copy.

Usage: bench/run_concurrent.py [BUILD_DIR] [--rounds N] [--quick]
Default settings on both sides (thread counts as each framework chooses). Exits 0 even when a
floor is missed; non-zero only when a benchmark could not run."""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse(out):
    for line in out.splitlines():
        if line.startswith("mlp_step_ms "):
            return float(line.split()[1])
    raise RuntimeError("no mlp_step_ms in:\n" + out)


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish(p):
    out, _ = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(f"{p.args} exited {p.returncode}")
    return parse(out)


def alone(cmd):
    return finish(start(cmd))


def pair(cmd):
    a, b = start(cmd), start(cmd)
    return finish(a), finish(b)


def beside_hog(cmd):
    # one CPU-bound process of another program: a shell busy loop
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.2)
        return finish(start(cmd))
    finally:
        hog.kill()
        hog.wait()


def main():
    args = sys.argv[1:]
    build = os.path.join(ROOT, "build")
    rounds, quick = 3, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--rounds" and i + 1 < len(args):
            rounds = int(args[i + 1])
            i += 1
        elif a == "--quick":
            quick, rounds = True, 1
        elif not a.startswith("-"):
            build = a
        else:
            sys.exit(__doc__)
        i += 1
    q = ["--quick"] if quick else []
    nabla = [os.path.join(build, "bench", "bench_nn")] + q + ["mlp"]
    torch = [os.environ.get("PYTHON", "/usr/bin/python3"), os.path.join(HERE, "bench_nn_torch.py")] + q + ["mlp"]
    if not os.access(nabla[0], os.X_OK):
        sys.exit(f"run_concurrent.py: {nabla[0]} not built")
    keys = ("alone", "pair_slow", "pair_fast", "hog")
    res = {s + "_" + k: [] for s in "nt" for k in keys}
    for r in range(rounds):
        for side, cmd in (("n", nabla), ("t", torch)):
            res[side + "_alone"].append(alone(cmd))
            a, b = pair(cmd)
            res[side + "_pair_slow"].append(max(a, b))
            res[side + "_pair_fast"].append(min(a, b))
            res[side + "_hog"].append(beside_hog(cmd))
        print(f"round {r + 1}: " + " ".join(f"{k}={v[-1]:.3f}" for k, v in res.items()), file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    for k, v in med.items():
        print(f"{k}_step_ms {v:.4f}")
    kept = med["n_alone"] / med["n_pair_slow"]
    print(f"nabla_pair_kept {kept:.3f}  (the slower copy's rate over the single copy's)")
    print(f"torch_pair_kept {med['t_alone'] / med['t_pair_slow']:.3f}")
    print(f"nabla_beside_hog_kept {med['n_alone'] / med['n_hog']:.3f}")
    print(f"torch_beside_hog_kept {med['t_alone'] / med['t_hog']:.3f}")
    print(f"pair_speed_nabla_over_torch {med['t_pair_fast'] / med['n_pair_slow']:.3f}  (PyTorch's faster copy over nabla's slower)")
    print(("PASS" if kept >= 0.40 else "FAIL") + f" each of two concurrent nabla copies keeps >= 40% of the single rate ({kept:.1%})")
    print(("PASS" if med["n_pair_slow"] < med["t_pair_fast"] else "FAIL") +
          " each concurrent nabla copy is faster than each concurrent PyTorch copy")

if __name__ == "__main__":
    main()
