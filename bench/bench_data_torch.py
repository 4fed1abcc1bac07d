"""Input-pipeline benchmarks, PyTorch's side (bench/bench_data.c is nabla's): (a) load all 70,000
Fashion-MNIST images from the gzip files with gzip + NumPy into torch tensors and iterate them as
f32 batches of 1000 with torch's DataLoader; (b) a DataLoader with 2 workers whose per-batch
transform costs about one training step: the time the loop waits, as a fraction of step time.
Prints "name value" lines. Usage: bench_data_torch.py [--quick]"""
import gzip
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

ROOT = os.environ.get("NABLA_DATA", "/usr/share/datasets/fashion-mnist")
quick = "--quick" in sys.argv


def read_idx(path, images):
    with gzip.open(path, "rb") as f:
        data = f.read()
    if images:
        n = int.from_bytes(data[4:8], "big")
        return torch.from_numpy(np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, 28, 28).copy())
    return torch.from_numpy(np.frombuffer(data, np.uint8, offset=8).astype(np.int64))


def load_all():
    t0 = time.perf_counter()
    parts = []
    for split in ("train", "t10k"):
        x = read_idx(f"{ROOT}/{split}-images-idx3-ubyte.gz", True)
        y = read_idx(f"{ROOT}/{split}-labels-idx1-ubyte.gz", False)
        parts.append((x, y))
    load = time.perf_counter() - t0
    n = 0
    for x, y in parts:
        # as torchvision gives them: f32 in [0, 1]
        for bx, by in DataLoader(TensorDataset(x.float().div_(255), y), batch_size=1000):
            n += bx.shape[0]
    assert n == 70000
    return load, time.perf_counter() - t0


class Busy(Dataset):
    """`passes` passes of a smooth function over the image, and one more for a fraction `extra`
    of the samples (drawn from the index), so that a batch's cost can be set to a step's
    closely, not to the nearest whole pass."""

    def __init__(self, x, y, passes, extra=0.0):
        self.x, self.y, self.passes, self.extra = x, y, passes, extra

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        p = self.x[i].clone()
        u = (i * 0x9E3779B97F4A7C15 % 2**64) / 2**64  # a uniform draw per sample
        for _ in range(self.passes + (u < self.extra)):
            p = 0.5 * p + 0.5 * torch.tanh(p)
        return p, self.y[i]


def main():
    rounds = 1 if quick else 5
    res = [load_all() for _ in range(rounds)]
    print(f"a_load_s {statistics.median(r[0] for r in res):.4f}")
    print(f"a_load_iterate_s {statistics.median(r[1] for r in res):.4f}")

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = read_idx(f"{ROOT}/train-images-idx3-ubyte.gz", True).float().div_(255)
    y = read_idx(f"{ROOT}/train-labels-idx1-ubyte.gz", False)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(bx, by):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(bx.flatten(1)), by)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    bs = 64
    step_s = statistics.median(step(x[:bs], y[:bs]) for _ in range(30))
    # Calibrate the transform to one step per batch, as it is applied to each sample: a batch's
    # time with no pass (the copy and the calls) and with 10, each the median of several
    # timings like the step's, so one slow moment of a shared machine does not set it.
    def probe_batch(passes):
        probe = Busy(x, y, passes)
        t0 = time.perf_counter()
        for i in range(bs):
            probe[i]
        return time.perf_counter() - t0

    fixed = statistics.median(probe_batch(0) for _ in range(15))
    per_pass = (statistics.median(probe_batch(10) for _ in range(15)) - fixed) / 10
    want = max(1.0, (step_s - fixed) / per_pass)
    steps = 60 if quick else 300
    ds = Busy(x[: steps * bs], y[: steps * bs], int(want), want - int(want))
    for w in (0, 2):
        loader = DataLoader(ds, batch_size=bs, shuffle=True, num_workers=w,
                            generator=torch.Generator().manual_seed(7))
        wait = steps_s = 0.0
        k = 0
        t1 = time.perf_counter()
        it = iter(loader)
        while True:
            t0 = time.perf_counter()
            try:
                bx, by = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - t0
            steps_s += step(bx, by)
            k += 1
        wall = time.perf_counter() - t1
        print(f"b_workers{w}_step_ms {1e3 * steps_s / k:.3f}")
        print(f"b_workers{w}_transform_ms_per_batch {1e3 * (fixed + per_pass * want):.3f}")
        print(f"b_workers{w}_wait_ms_per_step {1e3 * wait / k:.3f}")
        print(f"b_workers{w}_wait_fraction {wait / steps_s:.4f}")
        print(f"b_workers{w}_wall_s {wall:.3f}")


if __name__ == "__main__":
    main()
