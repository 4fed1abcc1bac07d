#!/usr/bin/python3
"""Prints the nabla vs PyTorch table from the "key value" outputs of bench_core and
bench_core_torch.py, with PASS/FAIL against the floors. Always exits 0 when both files parse.

Usage: report_core.py [--rounds N] NABLA_OUT... -- TORCH_OUT...
Several outputs per side (rounds): each figure is the median over them (peak RSS: the maximum).
"""
import statistics
import sys


def load(path):
    d = {}
    with open(path) as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2:
                d[parts[0]] = parts[1].strip()
    return d


def merge(paths):
    """One dict from several runs' outputs: numbers by median (peak RSS by max), text from the first."""
    runs = [load(p) for p in paths]
    d = {}
    for key in runs[0]:
        vals = [r[key] for r in runs if key in r]
        try:
            nums = [float(v) for v in vals]
        except ValueError:
            d[key] = vals[0]
            continue
        v = max(nums) if key.endswith("_rss_kib") else statistics.median(nums)
        d[key] = str(int(v)) if v == int(v) and all(x == int(x) for x in nums) else repr(v)
    return d


def num(d, key):
    try:
        return float(d[key])
    except (KeyError, ValueError):
        return None


def fmt_time(us):
    if us is None:
        return "n/a"
    if us < 1000:
        return "%.3f us" % us
    return "%.3f ms" % (us / 1000)


def verdict(ok):
    if ok is None:
        return "n/a"
    return "PASS" if ok else "FAIL"


def main():
    args = sys.argv[1:]
    rounds = None
    if args[:1] == ["--rounds"]:
        rounds, args = args[1], args[2:]
    if "--" in args:
        k = args.index("--")
        nb_paths, th_paths = args[:k], args[k + 1:]
    else:
        nb_paths, th_paths = args[:1], args[1:2]
    nb, th = merge(nb_paths), merge(th_paths)
    rows, fails = [], []

    def row(name, a, b, ratio, floor, ok):
        rows.append((name, a, b, ratio, floor, verdict(ok)))
        if ok is False:
            fails.append(name)

    def ratio_of(a, b):
        return a / b if a is not None and b else None

    def rstr(r, suffix="x"):
        return "n/a" if r is None else "%.3f%s" % (r, suffix)

    print("nabla %s, %s threads (OpenBLAS %s build, %s threads) | PyTorch %s, %s threads (interop %s)" % (
        nb.get("nabla_version", "?"), nb.get("threads", "?"), nb.get("blas_build", "?"), nb.get("blas_threads", "?"),
        th.get("torch_version", "?"), th.get("threads", "?"), th.get("interop_threads", "?")))
    print("each figure: median of 15 timed loops (matmul: 21 interleaved pairs) after warm-up%s" % (
        "" if not rounds else ", then the median over %s alternating nabla/PyTorch rounds" % rounds))
    print()

    # (a) eager overhead: time per call; ratio = nabla / torch, floor <= 0.1
    for key, name in (("eager_step_us", "(a) tiny autograd step"), ("eager_add_us", "(a) tiny nb_add")):
        a, b = num(nb, key), num(th, key)
        r = ratio_of(a, b)
        row(name, fmt_time(a), fmt_time(b), rstr(r), "<= 0.100x", None if r is None else r <= 0.1)
    a = num(nb, "eager_add_scoped_us")
    if a is not None:
        b = num(th, "eager_add_us")
        rows.append(("(a) tiny nb_add in a scope (info)", fmt_time(a), fmt_time(b), rstr(ratio_of(a, b)), "", ""))

    # (b) MLP: steps/s; ratio = nabla / torch steps/s, floor >= 1.5
    a, b = num(nb, "mlp_steps_per_s"), num(th, "mlp_steps_per_s")
    r = ratio_of(a, b)
    row("(b) MLP step, steps/s", "%.1f" % a if a else "n/a", "%.1f" % b if b else "n/a", rstr(r), ">= 1.500x",
        None if r is None else r >= 1.5)
    a, b = num(nb, "mlp_step_ms"), num(th, "mlp_step_ms")
    rows.append(("(b) MLP step, time (info)", fmt_time(a and a * 1e3), fmt_time(b and b * 1e3),
                 rstr(ratio_of(a, b)), "", ""))
    a, b = num(nb, "mlp_peak_rss_kib"), num(th, "mlp_peak_rss_kib")
    rows.append(("(b) peak RSS, VmHWM (info)", "%.1f MiB" % (a / 1024) if a else "n/a",
                 "%.1f MiB" % (b / 1024) if b else "n/a", rstr(ratio_of(a, b)), "", ""))

    # (c) matmul: GFLOP/s; floor nabla >= 0.95 x OpenBLAS direct; nabla/torch for information
    for n in (256, 512, 1024, 2048):
        a, bl, t = num(nb, "mm%d_nabla_gflops" % n), num(nb, "mm%d_blas_gflops" % n), num(th, "mm%d_torch_gflops" % n)
        r = num(nb, "mm%d_nabla_over_blas" % n)  # median of interleaved per-pair ratios
        if r is None:
            r = ratio_of(a, bl)
        row("(c) matmul %d, GFLOP/s, vs OpenBLAS" % n, "%.1f" % a if a else "n/a", "%.1f (BLAS)" % bl if bl else "n/a",
            rstr(r), ">= 0.950x", None if r is None else r >= 0.95)
        rows.append(("(c) matmul %d, GFLOP/s, vs PyTorch" % n, "%.1f" % a if a else "n/a",
                     "%.1f" % t if t else "n/a", rstr(ratio_of(a, t)), "(info)", ""))

    head = ("benchmark", "nabla", "PyTorch / ref", "nabla/ref", "floor", "result")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = "  ".join("%-*s" % (w, h) for w, h in zip(widths, head))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(("%-*s" if i == 0 else "%*s") % (w, c) for i, (w, c) in enumerate(zip(widths, r))))
    print()
    print("ratios are nabla / PyTorch, except (c) 'vs OpenBLAS': nabla / cblas_sgemm called directly in the same")
    print("process, the median of the ratios of 21 interleaved nabla/BLAS loop pairs (so not exactly the GFLOP/s quotient)")
    print("(a) lower is better (floor: nabla at most 1/10 of PyTorch's time); (b), (c) higher is better")
    if fails:
        print("FLOORS MISSED (%d): %s" % (len(fails), "; ".join(fails)))
    else:
        print("all floors met")


if __name__ == "__main__":
    main()
