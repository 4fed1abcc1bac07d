#!/usr/bin/env python3
"""Graph-mode benchmarks, PyTorch 2 side: the work of bench_compile.c, eager against
torch.compile (the Inductor backend on the CPU, default mode: torch.compile(fn) with no options),
printed as "key value" lines with bench_compile.c's keys (bench/run_compile.sh reads both).
Needs PyTorch 2 (scripts/torch2_env.sh makes the environment); the models are bench_nn_torch.py's.

  mlp        the seed MLP's training step (flatten, 784-128-10, AdamW lr 1e-3, batch 64, cross
             entropy), on the first 200 batches of real Fashion-MNIST training images, cycled
  cnn        the TF tutorial's convnet (examples/cnn.c) training step, Adam lr 1e-3, batch 64,
             dropout 0.4, on the same 200 real batches
  gpt_train  the char GPT's training step (examples/char_gpt.c: vocabulary 86, context 128, 4
             layers, 4 heads, width 128), batch 16, AdamW lr 1e-3, gradient clipping at 1.0, on 8
             batches of random characters
  gpt        the same GPT's forward at batch 1 x 128 in eval mode, under torch.no_grad()

The compiled function is the whole step as nabla compiles it: forward, loss, zero_grad, backward,
clipping and the optimizer's step, wrapped in torch.compile (Dynamo breaks the graph at
backward(); AOTAutograd compiles the backward beside the forward and the optimizer step is a
graph of its own). For the forward it is the model. Step times: short eager and compiled loops
alternate in one process after a warm-up (compiled: until it stops recompiling), and each figure
is the median over the loops of the mean time of a call in a loop.

The first call of each workload's compiled function (Dynamo's trace, AOTAutograd, Inductor's code
generation, the C++ compiler, loading, and the run) is W_first_call_s. It is a first call in a
fresh process only for the first workload run: bench/run_compile.sh runs one workload a process
(--only W), the first time with TORCHINDUCTOR_CACHE_DIR pointing at an empty directory (a cold
cache; W_cache says which it found) and later with the one that run filled (warm). torch._dynamo
and torch._inductor are imported before the clock starts (W_import_s: how long that took).
W_second_call_s is the next call (a recompile shows there), W_graphs the graphs Dynamo compiled
by the end of the warm-up; W_other_cpu the cores other processes kept busy during the timed loops.

Threads: PyTorch's defaults (torch.get_num_threads(): 2 on the 2-core machine, as nabla), unless
--threads N.
Usage: bench_compile_torch.py [--quick] [--threads N] [--only W]
"""
import importlib.util
import os
import statistics
import sys
import time

# bench_nn_torch.py is loaded by its file name
HERE = os.path.dirname(os.path.abspath(__file__))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_nn_torch", os.path.join(HERE, "bench_nn_torch.py"))
nnb = importlib.util.module_from_spec(_spec)  # the models (GPT) and the Fashion-MNIST batches
_spec.loader.exec_module(nnb)

WORKLOADS = ("mlp", "cnn", "gpt_train", "gpt")


def out(key, value):
    print(key, value, flush=True)


def mlp_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))


def make_step(model, opt, clip=0.0, flat_logits=False):
    """The training step of bench_compile.c's train_step / char_train_step."""
    def step(x, y):
        logits = model(x)
        if flat_logits:
            logits = logits.reshape(-1, logits.shape[-1])
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)  # nabla's nb_optim_zero_grad drops the gradients
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return step


def gpt_batches():
    xs, ys = [], []
    for _ in range(nnb.NBATCH):
        ids = torch.randint(0, nnb.VOCAB, (nnb.GPT_BATCH, nnb.CONTEXT + 1))
        xs.append(ids[:, :-1].contiguous())
        ys.append(ids[:, 1:].reshape(-1).contiguous())
    return xs, ys


def setup(w):
    """(eager function, its argument batches, whether it is a forward under no_grad) for workload w."""
    torch.manual_seed(0)
    if w in ("mlp", "cnn"):
        model = mlp_model() if w == "mlp" else cnn_model()
        opt = (torch.optim.AdamW if w == "mlp" else torch.optim.Adam)(model.parameters(), lr=1e-3)
        xs, ys = nnb.fashion_batches()
        return make_step(model, opt), list(zip(xs, ys)), False
    model = nnb.GPT()
    if w == "gpt_train":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        xs, ys = gpt_batches()
        return make_step(model, opt, clip=1.0, flat_logits=True), list(zip(xs, ys)), False
    model.eval()
    return model, [(torch.randint(0, nnb.VOCAB, (1, nnb.CONTEXT)),)], True


class Runner:
    """Calls fn on the batches in turn (one cursor for eager and compiled, as bench_compile.c)."""

    def __init__(self, batches, no_grad):
        self.batches, self.no_grad, self.cursor = batches, no_grad, 0

    def loop(self, fn, n):
        t0 = time.perf_counter()
        with torch.no_grad() if self.no_grad else torch.enable_grad():
            for _ in range(n):
                b = self.batches[self.cursor % len(self.batches)]
                self.cursor += 1
                fn(*b)
        return (time.perf_counter() - t0) / n


def graphs():
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def cache_state():
    """cold when Inductor's cache directory is missing or empty, warm otherwise."""
    d = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not d:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        d = default_cache_dir()
    return "warm" if os.path.isdir(d) and os.listdir(d) else "cold"


def bench(w, quick):
    fn, batches, no_grad = setup(w)
    r = Runner(batches, no_grad)
    state = cache_state()
    t0 = time.perf_counter()
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    out(f"{w}_import_s", "%.4f" % (time.perf_counter() - t0))
    # the first call: trace, compile, run
    t0 = time.perf_counter()
    compiled = torch.compile(fn)
    r.loop(compiled, 1)
    out(f"{w}_first_call_s", "%.4f" % (time.perf_counter() - t0))
    out(f"{w}_cache", state)
    out(f"{w}_second_call_s", "%.4f" % r.loop(compiled, 1))
    # warm-up: compiled until three calls in a row compile nothing new, and eager alike
    stable, n = 0, 0
    while stable < 3 and n < 50:
        g = graphs()
        r.loop(compiled, 1)
        stable = stable + 1 if graphs() == g else 0
        n += 1
    out(f"{w}_graphs", graphs())
    r.loop(fn, 3)
    one = min(r.loop(fn, 1), r.loop(compiled, 1))
    per = max(1, int((0.02 if quick else 0.05) / max(one, 1e-9)))
    loops = {"mlp": 100, "cnn": 15, "gpt_train": 8, "gpt": 30}[w]
    if quick:
        loops = max(3, loops // 5)
    e, k = [], []
    busy0, own0, wall0 = nnb.machine_busy_s(), nnb.own_cpu_s(), time.perf_counter()
    for _ in range(loops):
        e.append(r.loop(fn, per))
        k.append(r.loop(compiled, per))
    if busy0 is not None:
        other = (nnb.machine_busy_s() - busy0 - (nnb.own_cpu_s() - own0)) / (time.perf_counter() - wall0)
        out(f"{w}_other_cpu", "%.2f" % max(0.0, other))
    me, mk = statistics.median(e), statistics.median(k)
    out(f"{w}_eager_ms", "%.4f" % (1e3 * me))
    out(f"{w}_compiled_ms", "%.4f" % (1e3 * mk))
    out(f"{w}_speedup", "%.3f" % (me / mk))
    out(f"{w}_calls_per_loop", per)
    out(f"{w}_graphs_total", graphs())


def main():
    args, quick, only = sys.argv[1:], False, None
    usage = "usage: bench_compile_torch.py [--quick] [--threads N] [--only W]  (W: %s)" % "|".join(WORKLOADS)
    while args:
        a = args.pop(0)
        if a == "--quick":
            quick = True
        elif a == "--threads" and args:
            torch.set_num_threads(int(args.pop(0)))
        elif a == "--only" and args and args[0] in WORKLOADS:
            only = args.pop(0)
        else:
            sys.exit(usage)
    if int(torch.__version__.split(".")[0]) < 2:
        sys.exit(f"bench_compile_torch.py: needs PyTorch 2 for torch.compile, found {torch.__version__} "
                 "(make the environment with scripts/torch2_env.sh)")
    out("torch_version", torch.__version__)
    out("threads", torch.get_num_threads())
    for w in WORKLOADS:
        if only in (None, w):
            print("bench_compile_torch:", w, file=sys.stderr)
            bench(w, quick)


if __name__ == "__main__":
    main()
