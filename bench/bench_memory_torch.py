#!/usr/bin/python3
"""Peak memory of training, PyTorch side: the same work as bench_memory.c, printed as "key value" lines.

The models, optimizers and synthetic batches are bench_nn_torch.py's (which mirrors bench_nn.c):
  mlp  784-128-10 MLP, AdamW lr 1e-3, batch 64          (default 200 steps)
  cnn  the TF tutorial's convnet, Adam lr 1e-3, batch 64 (default 20 steps)
  gpt  the char GPT step, AdamW lr 1e-3, batch 16, clipping at 1.0 (default 20 steps)
Each run trains one model for STEPS steps in its own process and prints peak_rss_kib (VmHWM at the
end), start_rss_kib (VmRSS before the model is made: the runtime's own), first_step_peak_kib (VmHWM after the first step), later_steps_peak_kib (the peak of steps
2..STEPS alone: VmHWM is reset through /proc/self/clear_refs after the first step; -1 where the
kernel refuses) and rss_kib. Eager PyTorch only: Debian's torch has no torch.compile.
Usage: bench_memory_torch.py mlp|cnn|gpt [STEPS]
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_nn_torch as b  # noqa: E402


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return -1


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def trainer(name):
    torch.manual_seed(0)
    if name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
        return b.Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), *b.image_batches())
    if name == "cnn":
        model = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
        return b.Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), *b.image_batches())
    model = b.GPT()
    xs, ys = [], []
    for _ in range(b.NBATCH):
        ids = torch.randint(0, b.VOCAB, (b.GPT_BATCH, b.CONTEXT + 1))
        xs.append(ids[:, :-1].contiguous())
        ys.append(ids[:, 1:].reshape(-1).contiguous())
    return b.Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), xs, ys, clip=1.0, flat_logits=True)


def main():
    args = sys.argv[1:]
    if not args or args[0] not in ("mlp", "cnn", "gpt") or len(args) > 2:
        sys.exit("usage: bench_memory_torch.py mlp|cnn|gpt [STEPS]")
    name = args[0]
    steps = int(args[1]) if len(args) > 1 else (200 if name == "mlp" else 20)
    if steps < 1:
        sys.exit("bench_memory_torch.py: STEPS must be at least 1")
    start = status_kib("VmRSS:")
    t = trainer(name)
    t.steps(1)
    first = status_kib("VmHWM:")
    reset = steps > 1 and reset_peak()
    t.steps(steps - 1)
    later = status_kib("VmHWM:") if reset else -1
    print("model", name)
    print("mode torch")
    print("steps", steps)
    print("torch_version", torch.__version__)
    print("start_rss_kib", start)
    print("peak_rss_kib", max(first, later) if reset else status_kib("VmHWM:"))
    print("first_step_peak_kib", first)
    print("later_steps_peak_kib", later)
    print("rss_kib", status_kib("VmRSS:"))
    print("loss %.4f" % t.last_loss)


if __name__ == "__main__":
    main()
