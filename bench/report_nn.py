#!/usr/bin/python3
"""Prints the nabla vs PyTorch table of the training benchmarks from the "key value" outputs of
bench_nn and bench_nn_torch.py, with PASS/FAIL against the floors. Always exits 0 when the files
parse.

Usage: report_nn.py [--rounds N] [--load TEXT] [--note TEXT] NABLA_OUT... -- TORCH_OUT...
Several outputs per side (rounds, and one file per section): each time per step is the median
over the files that have it, samples/s is derived from it, peak RSS is the maximum.
"""
import statistics
import sys

# section, label, samples per step, floor on nabla/PyTorch samples/s
SECTIONS = (
    ("mlp", "MLP 784-128-10, AdamW, batch 64", 64, 2.0),
    ("cnn", "CNN (TF tutorial), Adam, batch 64", 64, 1.2),
    ("gpt", "char GPT 4x128, AdamW+clip, batch 16x128", 16, 1.0),
    # bf16 autocast beside torch.autocast: figures without a floor
    ("cnn_bf16", "CNN under bf16 autocast", 64, None),
    ("gpt_bf16", "char GPT under bf16 autocast", 16, None),
)


def load(path):
    d = {}
    with open(path) as f:
        for line in f:
            parts = line.split(None, 1)
            if len(parts) == 2:
                d[parts[0]] = parts[1].strip()
    return d


def merge(paths):
    """Numbers by median over the runs that have them (peak RSS by max), text from the first."""
    runs = [load(p) for p in paths]
    keys = []
    for r in runs:
        keys += [k for k in r if k not in keys]
    d = {}
    for key in keys:
        vals = [r[key] for r in runs if key in r]
        try:
            nums = [float(v) for v in vals]
        except ValueError:
            d[key] = vals[0]
            continue
        d[key] = max(nums) if key.endswith("_rss_kib") else statistics.median(nums)
        d[key + "#n"] = len(nums)
    return d


def main():
    args = sys.argv[1:]
    opts = {}
    while args[:1] in (["--rounds"], ["--load"], ["--note"]):
        opts[args[0]] = args[1]
        args = args[2:]
    rounds, load_text, note = opts.get("--rounds"), opts.get("--load"), opts.get("--note")
    k = args.index("--")
    nb, th = merge(args[:k]), merge(args[k + 1:])

    print("nabla %s, %d threads | PyTorch %s, %d threads (interop %d)%s" % (
        nb.get("nabla_version", "?"), int(nb.get("threads", 0)), th.get("torch_version", "?"),
        int(th.get("threads", 0)), int(th.get("interop_threads", 0)), " | " + note if note else ""))
    print("each figure: median over timed loops after warm-up (one process per section and side)%s" % (
        "" if not rounds else ", then the median over %s alternating nabla/PyTorch rounds" % rounds))
    if load_text:
        print("load: %s" % load_text)
    print()

    rows, fails = [], []
    for sec, label, batch, floor in SECTIONS:
        ta, tb = nb.get(sec + "_step_ms"), th.get(sec + "_step_ms")
        if ta is None and tb is None:
            continue
        a = batch * 1e3 / ta if ta else None
        b = batch * 1e3 / tb if tb else None
        r = a / b if a and b else None
        ok = None if r is None or floor is None else r >= floor
        if ok is False:
            fails.append(label)
        verdict = "n/a" if ok is None else "PASS" if ok else "FAIL"
        rstr = lambda x: "n/a" if x is None else "%.3fx" % x  # noqa: E731
        if sec == "gpt":  # judged by time per step: nabla/PyTorch at most 1
            rt = ta / tb if ta and tb else None
            rows.append((label + ", ms/step", "%.1f" % ta if ta else "n/a", "%.1f" % tb if tb else "n/a", rstr(rt),
                         "<= 1.000x", verdict))
            rows.append(("  samples/s (info)", "%.1f" % a if a else "n/a", "%.1f" % b if b else "n/a", rstr(r), "", ""))
        else:
            rows.append((label + ", samples/s", "%.0f" % a if a else "n/a", "%.0f" % b if b else "n/a", rstr(r),
                         ">= %.3fx" % floor if floor else "", verdict if floor else "info"))
            rt = ta / tb if ta and tb else None
            rows.append(("  ms/step (info)", "%.3f" % ta if ta else "n/a", "%.3f" % tb if tb else "n/a", rstr(rt), "",
                         ""))
        ma, mb = nb.get(sec + "_peak_rss_kib"), th.get(sec + "_peak_rss_kib")
        rows.append(("  peak RSS, VmHWM (info)", "%.1f MiB" % (ma / 1024) if ma else "n/a",
                     "%.1f MiB" % (mb / 1024) if mb else "n/a", rstr(ma / mb if ma and mb else None), "", ""))
        oa, ob = nb.get(sec + "_other_cpu"), th.get(sec + "_other_cpu")
        if oa is not None or ob is not None:
            rows.append(("  other processes' CPU, cores (info)", "%.2f" % oa if oa is not None else "n/a",
                         "%.2f" % ob if ob is not None else "n/a", "", "", ""))
        la, lb = nb.get(sec + "_loss"), th.get(sec + "_loss")
        rows.append(("  loss at the end (info)", "%.4f" % la if la is not None else "n/a",
                     "%.4f" % lb if lb is not None else "n/a", "", "", ""))

    head = ("benchmark", "nabla", "PyTorch", "nabla/PyTorch", "floor", "result")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = "  ".join("%-*s" % (w, h) for w, h in zip(widths, head))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(("%-*s" if i == 0 else "%*s") % (w, c) for i, (w, c) in enumerate(zip(widths, r))))
    for sec in ("cnn", "gpt"):  # autocast's speed-up on each side, where both runs are there
        sa, sb = [(d.get(sec + "_step_ms"), d.get(sec + "_bf16_step_ms")) for d in (nb, th)]
        if all(sa) or all(sb):
            up = lambda p: "%.2fx" % (p[0] / p[1]) if all(p) else "n/a"  # noqa: E731
            print("%s: bf16 autocast speed-up over f32: nabla %s, PyTorch %s" % (sec, up(sa), up(sb)))
    print()
    print("samples/s: higher is better; ms/step and memory: lower is better. Floors: MLP nabla >= 2x PyTorch's")
    print("samples/s, CNN >= 1.2x, char GPT no slower per step. Peak RSS includes each runtime's own libraries.")
    print("other processes' CPU: cores kept busy by the rest of the machine while that side was timed (median over")
    print("rounds); well above 0 means the figure was taken on a loaded machine.")
    if fails:
        print("FLOORS MISSED (%d): %s" % (len(fails), "; ".join(fails)))
    else:
        print("all floors met")


if __name__ == "__main__":
    main()
