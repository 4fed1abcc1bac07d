#!/usr/bin/env python3
"""torch.save / torch.load + load_state_dict of the ~100 MB network of bench/bench_io.c (six
2048x2048 linear layers). torch.save does not fsync; save_fsync_ms adds the fsync nabla's atomic
save does, for a like-for-like figure. Usage: bench_io_torch.py [DIR]. Medians of 5 runs."""
import os
import sys
import time

import torch

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
path = os.path.join(d, "torch_bench_io.%d.pt" % os.getpid())
torch.manual_seed(0)
a = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])
b = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)])
save, save_fsync, load = [], [], []
for _ in range(5):
    t0 = time.perf_counter()
    torch.save(a.state_dict(), path)
    t1 = time.perf_counter()
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    t2 = time.perf_counter()
    b.load_state_dict(torch.load(path))
    t3 = time.perf_counter()
    save.append((t1 - t0) * 1e3)
    save_fsync.append((t2 - t0) * 1e3)
    load.append((t3 - t2) * 1e3)
os.remove(path)
med = lambda v: sorted(v)[len(v) // 2]
print("save_ms %.2f" % med(save))
print("save_fsync_ms %.2f" % med(save_fsync))
print("load_ms %.2f" % med(load))
