#!/usr/bin/python3
"""Core benchmarks, PyTorch side: the same work as bench_core.c, printed as "key value" lines.

  (a) eager overhead: y = sum(w * x); backward; drop the grad, on 1-element f32 tensors; and c = a + b
  (b) 784-128-10 MLP forward + backward + torch.optim.SGD step at batch 64, steps/s, and peak RSS
  (c) f32 square matmul, GFLOP/s

Every figure is the median over REPEATS timed loops, after warm-up. Default thread settings.
Usage: bench_core_torch.py [--quick] [a] [b] [c]
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

REPEATS = 15
QUICK = False


def vm_hwm_kib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def calibrate(fn, target_s):
    """Iterations so that one timed loop lasts about target_s (at least 1)."""
    iters = 1
    while True:
        t0 = time.perf_counter()
        fn(iters)
        dt = time.perf_counter() - t0
        if dt >= target_s / 4 or iters >= 1 << 30:
            return max(1, int(iters * target_s / max(dt, 1e-9)))
        iters *= 10 if dt < target_s / 100 else 2


def time_per_iter(fn, iters):
    ts = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn(iters)
        ts.append((time.perf_counter() - t0) / iters)
    return statistics.median(ts)


def out(key, value):
    print(key, value, flush=True)


# ---- (a) eager overhead ----

def bench_eager():
    w = torch.full((1,), 0.5, dtype=torch.float32, requires_grad=True)
    x = torch.full((1,), 2.0, dtype=torch.float32)
    a = torch.full((1,), 1.0, dtype=torch.float32)
    b = torch.full((1,), 2.0, dtype=torch.float32)

    def step(n):
        for _ in range(n):
            y = (w * x).sum()
            y.backward()
            w.grad = None  # nb_zero_grad drops the gradient, as set_to_none=True does

    def add(n):
        for _ in range(n):
            c = a + b  # noqa: F841  (freed when rebound, as nb_release)

    target = 0.005 if QUICK else 0.02
    step(500)
    out("eager_step_us", "%.4f" % (1e6 * time_per_iter(step, calibrate(step, target))))
    add(2000)
    out("eager_add_us", "%.4f" % (1e6 * time_per_iter(add, calibrate(add, target))))


# ---- (b) MLP training step ----

def bench_mlp():
    torch.manual_seed(0)
    n_in, n_hid, n_out, batch, nbatch = 784, 128, 10, 64, 10
    scale = [0.0357, 0.0357, 0.0884, 0.0884]
    shapes = [(n_hid, n_in), (n_hid,), (n_out, n_hid), (n_out,)]
    params = [(torch.randn(s) * k).requires_grad_() for s, k in zip(shapes, scale)]
    w1, b1, w2, b2 = params
    xs = [torch.randn(batch, n_in) for _ in range(nbatch)]
    ys = [torch.tensor([(b * 7 + i * 13) % n_out for i in range(batch)], dtype=torch.int64)[:, None]
          for b in range(nbatch)]
    opt = torch.optim.SGD(params, lr=0.01)
    state = {"step": 0, "loss": 0.0}

    def steps(n):
        k = state["step"]
        for i in range(n):
            x, y = xs[k % nbatch], ys[k % nbatch]
            k += 1
            h = F.relu(F.linear(x, w1, b1))
            logits = F.linear(h, w2, b2)
            loss = -F.log_softmax(logits, 1).gather(1, y).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        state["step"] = k
        state["loss"] = loss.item()

    steps(20 if QUICK else 100)
    t = time_per_iter(steps, calibrate(steps, 0.02 if QUICK else 0.05))
    out("mlp_step_ms", "%.4f" % (1e3 * t))
    out("mlp_steps_per_s", "%.2f" % (1.0 / t))
    out("mlp_loss", "%.4f" % state["loss"])
    out("mlp_peak_rss_kib", vm_hwm_kib())


# ---- (c) square f32 matmul ----

def bench_matmul():
    for n in (256, 512, 1024, 2048):
        a = torch.randn(n, n)
        b = torch.randn(n, n)

        def mm(iters):
            for _ in range(iters):
                c = torch.matmul(a, b)  # noqa: F841

        mm(2)
        target = 0.005 if QUICK else 0.01
        t = time_per_iter(mm, calibrate(mm, target))
        out("mm%d_torch_gflops" % n, "%.3f" % (2.0 * n * n * n / t * 1e-9))


def main():
    global QUICK
    sections = set()
    for arg in sys.argv[1:]:
        if arg == "--quick":
            QUICK = True
        elif arg in ("a", "b", "c"):
            sections.add(arg)
        else:
            sys.exit("usage: bench_core_torch.py [--quick] [a] [b] [c]")
    sections = sections or {"a", "b", "c"}
    out("torch_version", torch.__version__)
    out("threads", torch.get_num_threads())
    out("interop_threads", torch.get_num_interop_threads())
    # (b) before (c), so the peak RSS it reports is not the matmul's 2048^2 buffers.
    if "a" in sections:
        print("bench_core_torch: (a) eager overhead", file=sys.stderr)
        bench_eager()
    if "b" in sections:
        print("bench_core_torch: (b) MLP step", file=sys.stderr)
        bench_mlp()
    if "c" in sections:
        print("bench_core_torch: (c) matmul", file=sys.stderr)
        bench_matmul()


if __name__ == "__main__":
    main()
