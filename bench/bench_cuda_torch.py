#!/usr/bin/env python3
"""PyTorch (eager, CUDA) beside bench/bench_cuda.c on the same GPU, run by scripts/gpu_check.sh:
the same measurements, one JSON object a line, medians of repeated timed runs synchronised
around each timing.
  matmul  4096 x 4096 x 4096: f32 (TF32 off), TF32, bf16 (GFLOP/s)
  mlp     the seed MLP 784-128-10, batch 64, AdamW lr 1e-3 (samples/s)
  gpt2    GPT-2 small (124M), batch 8 x 1024, AdamW lr 3e-4 (ms per step, peak memory);
          attention through F.scaled_dot_product_attention (causal), as nanoGPT's
Usage: bench_cuda_torch.py [matmul] [mlp] [gpt2]"""
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

dev = torch.device("cuda")


def emit(**kw):
    print(json.dumps(kw), flush=True)


def guarded(name, fn):
    try:
        fn()
    except Exception as e:  # a failure is a line of the report, not the end of the run
        emit(name=name, error=f"{type(e).__name__}: {e}")
        torch.cuda.empty_cache()


def bench_matmul(name, dtype, tf32, n=4096, per=20, reps=7):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.manual_seed(1)
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(per):
            a @ b
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / per)
    torch.backends.cuda.matmul.allow_tf32 = False
    emit(name=name, value=2.0 * n ** 3 / statistics.median(times) / 1e9, unit="GFLOP/s")


def time_steps(step, warm, per, reps):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(per):
            step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / per)
    return statistics.median(times)


def peak(name):
    emit(name=f"{name}_peak_memory", value=torch.cuda.max_memory_allocated() / 2 ** 20, unit="MiB")


def bench_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.rand(64, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    sec = time_steps(step, 20, 200, 5)
    emit(name="mlp_samples_per_s", value=64 / sec, unit="samples/s")
    peak("mlp")


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=50257, context=1024, width=768, layers=12, heads=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln_f(self.blocks(x)))


def bench_gpt2():
    torch.manual_seed(0)
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randint(0, 50257, (8, 1024), device=dev)
    y = torch.randint(0, 50257, (8, 1024), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).backward()
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    sec = time_steps(step, 2, 1, 7)
    emit(name="gpt2_step_ms", value=sec * 1e3, unit="ms")
    emit(name="gpt2_tokens_per_s", value=8 * 1024 / sec, unit="tokens/s")
    peak("gpt2")
    del model, opt
    torch.cuda.empty_cache()


def main():
    want = set(sys.argv[1:]) or {"matmul", "mlp", "gpt2"}
    if not torch.cuda.is_available():
        emit(name="device", error="torch.cuda.is_available() is False")
        return 77
    emit(name="torch", value=0, unit=f"{torch.__version__} on {torch.cuda.get_device_name(0)}")
    if "matmul" in want:
        guarded("matmul_f32", lambda: bench_matmul("matmul_f32", torch.float32, False))
        guarded("matmul_tf32", lambda: bench_matmul("matmul_tf32", torch.float32, True))
        guarded("matmul_bf16", lambda: bench_matmul("matmul_bf16", torch.bfloat16, False))
    if "mlp" in want:
        guarded("mlp", bench_mlp)
    if "gpt2" in want:
        guarded("gpt2", bench_gpt2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
