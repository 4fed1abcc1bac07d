#!/usr/bin/python3
"""Training benchmarks, PyTorch side: the same work as bench_nn.c, printed as "key value" lines.

  mlp  784-128-10 MLP (flatten, linear, relu, linear), AdamW lr 1e-3, batch 64, cross entropy
  cnn  the TF tutorial's convnet (examples/cnn.c), Adam lr 1e-3, batch 64, dropout 0.4 in training
  gpt  the char GPT step of examples/char_gpt.c: vocabulary 86, context 128, 4 layers, 4 heads,
       width 128, batch 16, AdamW lr 1e-3, gradient clipping at 1.0; attention is
       torch.nn.MultiheadAttention (batch first, need_weights=False) with a float causal mask

Synthetic data shaped like Fashion-MNIST batches, made before the clock starts. <s>_other_cpu is
the cores other processes kept busy during the timed loops (as bench_nn.c measures it). Each figure is
the median over the timed loops of the mean step time in a loop, after warm-up. Default thread
settings unless --threads N.
Usage: bench_nn_torch.py [--quick] [--threads N] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]
  cnn_bf16, gpt_bf16: the same under torch.autocast("cpu", dtype=torch.bfloat16)
"""
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NBATCH = 8
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


def machine_busy_s():
    """CPU seconds of the whole machine (every process, /proc/stat), as bench_nn.c counts them."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def out(key, value):
    print(key, value, flush=True)


class Trainer:
    def __init__(self, model, opt, xs, ys, clip=0.0, flat_logits=False, bf16=False):
        self.model, self.opt, self.xs, self.ys = model, opt, xs, ys
        self.clip, self.flat_logits, self.bf16 = clip, flat_logits, bf16
        self.step, self.last_loss = 0, 0.0

    def steps(self, n):
        for i in range(n):
            x, y = self.xs[self.step % len(self.xs)], self.ys[self.step % len(self.ys)]
            self.step += 1
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                logits = self.model(x)
                if self.flat_logits:
                    logits = logits.reshape(-1, logits.shape[-1])
                loss = F.cross_entropy(logits, y)
            self.opt.zero_grad(set_to_none=True)  # nabla's nb_optim_zero_grad drops the gradients
            loss.backward()
            if self.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
            self.opt.step()
            if i == n - 1:
                self.last_loss = loss.item()


def run(name, t, batch, warmup, loops, target_s):
    t.steps(warmup)
    t0 = time.perf_counter()
    t.steps(1)
    one = time.perf_counter() - t0
    per = max(1, int(target_s / max(one, 1e-9)))
    ts = []
    busy0, own0, wall0 = machine_busy_s(), own_cpu_s(), time.perf_counter()
    for _ in range(loops):
        t0 = time.perf_counter()
        t.steps(per)
        ts.append((time.perf_counter() - t0) / per)
    other = None
    if busy0 is not None:
        other = (machine_busy_s() - busy0 - (own_cpu_s() - own0)) / (time.perf_counter() - wall0)
    step = statistics.median(ts)
    out(f"{name}_step_ms", "%.4f" % (1e3 * step))
    out(f"{name}_samples_per_s", "%.2f" % (batch / step))
    out(f"{name}_steps_per_loop", per)
    out(f"{name}_loss", "%.4f" % t.last_loss)
    out(f"{name}_peak_rss_kib", vm_hwm_kib())
    if other is not None:
        out(f"{name}_other_cpu", "%.2f" % max(0.0, other))


def image_batches():
    """Fashion-MNIST-shaped batches: x [64, 1, 28, 28] in [0, 1), y [64] int64 in 0..9 (as bench_nn.c)."""
    xs = [torch.rand(64, 1, 28, 28) for _ in range(NBATCH)]
    ys = [torch.tensor([(b * 7 + i * 13) % 10 for i in range(64)], dtype=torch.int64) for b in range(NBATCH)]
    return xs, ys


def fashion_batches(n=200):
    """The first n batches of 64 real Fashion-MNIST training images scaled to [0, 1] (as bench_compile.c
    takes them): a loop over a few synthetic batches memorises them, and the optimizer's arithmetic on
    the denormal floats that follow then dominates the step."""
    import gzip
    import numpy as np
    root = "/usr/share/datasets/fashion-mnist"
    with gzip.open(f"{root}/train-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 64 * 784].reshape(n, 64, 1, 28, 28)
    with gzip.open(f"{root}/train-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[: n * 64].reshape(n, 64)
    xs = [torch.from_numpy(x[b].astype(np.float32) / 255.0) for b in range(n)]
    ys = [torch.from_numpy(y[b].astype(np.int64)) for b in range(n)]
    return xs, ys


def bench_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = fashion_batches() if os.environ.get("NABLA_BENCH_REAL_DATA") else image_batches()
    run("mlp", Trainer(model, opt, *data), 64, 20 if QUICK else 200, 3 if QUICK else 9,
        0.05 if QUICK else 0.2)


def bench_cnn(bf16=False):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    run("cnn_bf16" if bf16 else "cnn", Trainer(model, opt, *image_batches(), bf16=bf16), 64, 2 if QUICK else 4, 3 if QUICK else 5,
        0.15 if QUICK else 0.5)


VOCAB, CONTEXT, WIDTH, LAYERS, HEADS, GPT_BATCH = 86, 128, 128, 4, 4, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, idx):
        t = idx.shape[1]
        # the causal mask per step, as nabla builds it per forward
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln_f(x))


def bench_gpt(bf16=False):
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = [], []
    for _ in range(NBATCH):
        ids = torch.randint(0, VOCAB, (GPT_BATCH, CONTEXT + 1))
        xs.append(ids[:, :-1].contiguous())
        ys.append(ids[:, 1:].reshape(-1).contiguous())
    out("gpt_params", sum(p.numel() for p in model.parameters()))
    run("gpt_bf16" if bf16 else "gpt", Trainer(model, opt, xs, ys, clip=1.0, flat_logits=True, bf16=bf16), GPT_BATCH, 1 if QUICK else 3,
        3 if QUICK else 5, 0.2 if QUICK else 0.6)


def main():
    global QUICK
    sections = []
    args = sys.argv[1:]
    while args:
        arg = args.pop(0)
        if arg == "--quick":
            QUICK = True
        elif arg == "--threads" and args:
            torch.set_num_threads(int(args.pop(0)))
        elif arg in ("mlp", "cnn", "gpt", "cnn_bf16", "gpt_bf16"):
            sections.append(arg)
        else:
            sys.exit("usage: bench_nn_torch.py [--quick] [--threads N] [mlp] [cnn] [gpt] [cnn_bf16] [gpt_bf16]")
    sections = sections or ["mlp", "cnn", "gpt"]
    out("torch_version", torch.__version__)
    out("threads", torch.get_num_threads())
    out("interop_threads", torch.get_num_interop_threads())
    for s in ("mlp", "cnn", "gpt", "cnn_bf16", "gpt_bf16"):
        if s in sections:
            print("bench_nn_torch:", s, file=sys.stderr)
            if s.endswith("_bf16"):
                globals()["bench_" + s[:-5]](bf16=True)
            else:
                globals()["bench_" + s]()


if __name__ == "__main__":
    main()
