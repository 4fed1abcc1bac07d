#!/usr/bin/python3
"""Distributed-training benchmark, PyTorch side: the work of bench_dist.c on torch.distributed (gloo).

Usage: bench_dist_torch.py [--quick] [--nproc N] mlp|cnn
       bench_dist_torch.py [--quick] [--nproc N] gpt ddp|zero1|full

With --nproc N > 1 this process starts N copies of itself on one machine (MASTER_ADDR 127.0.0.1,
a free MASTER_PORT, RANK, WORLD_SIZE), each with torch.set_num_threads(1), waits for them and
exits non-zero when one fails; rank 0 prints "key value" lines on stdout, as bench_dist.c does.

  mlp, cnn  bench_dist.c's models (784-128-10 MLP; bench_nn.c's convnet with dropout 0.4), SGD
            lr 0.01 momentum 0.9, cross entropy, synthetic data (random inputs in [0, 1), random
            labels; 256 batches per rank for the MLP, 16 for the CNN), global batch 64 split
            across the ranks. One rank: the plain model, no
            process group. Several: DistributedDataParallel on gloo (default buckets, 25 MiB and
            a 1 MiB first). Timed windows of a fixed number of steps between two barriers; the
            figure is the median window. With several ranks, the overlap: <m>_allreduce_alone_ms
            (DDP's buckets, as its logging data gives their sizes, allreduced one after another
            with dist.all_reduce after a barrier: the median over reps, averaged over ranks),
            <m>_exposed_ms = (backward under DDP) - (backward under ddp.no_sync(), which reduces
            nothing), averaged over ranks and over alternating windows of each, and
            <m>_hidden_share = 1 - exposed / alone clamped to [0, 1]. The exposed time also holds
            the reducer's own copying into its buckets, so the share is a lower bound.
  gpt       bench_dist.c's char GPT (vocabulary 65, context 64, width 512, 4 layers, 4 heads, 12.7M parameters;
            attention is nn.MultiheadAttention, batch first, with a float causal mask), AdamW
            lr 1e-3, batch 4 x 64 tokens per rank, a few steps, under DDP, DDP with
            ZeroRedundancyOptimizer (zero1) or FullyShardedDataParallel with each block a unit
            (full; where this torch has it on the CPU, else "gpt_unsupported <why>" and exit 0).
            Prints per rank the peak RSS (VmHWM), the RSS before the model, and the bytes of
            parameters, gradients and optimizer state the rank holds.
"""
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

QUICK = False
NBATCH = 256  # synthetic batches of the MLP per rank (bench_dist.c says why); 16 for the CNN
GLOBAL_BATCH = 64
VOCAB, CONTEXT, WIDTH, LAYERS, HEADS, GPT_BATCH = 65, 64, 512, 4, 4, 4


def status_kib(key):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def machine_busy_s():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def launch(nproc, args):
    """Starts nproc ranks of this script and waits for them; the exit status."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(nproc),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args, env=env,
                                      stdout=None if r == 0 else subprocess.DEVNULL))
    rc = 0
    deadline = time.time() + 600
    pending = list(procs)
    while pending:
        for p in list(pending):
            code = p.poll()
            if code is not None:
                pending.remove(p)
                if code != 0 and rc == 0:
                    rc = code
                    for q in pending:  # a failed rank: the others would wait for it
                        q.kill()
        if time.time() > deadline and pending:
            sys.stderr.write("bench_dist_torch.py: the ranks did not finish in 600 s\n")
            for q in pending:
                q.kill()
            return 1
        time.sleep(0.05)
    return rc


def main():
    global QUICK
    args = sys.argv[1:]
    nproc = 1
    rest = []
    i = 0
    while i < len(args):
        if args[i] == "--quick":
            QUICK = True
            rest.append(args[i])
        elif args[i] == "--nproc":
            nproc = int(args[i + 1])
            i += 1
        else:
            rest.append(args[i])
        i += 1
    what = [a for a in rest if a != "--quick"]
    ok = (len(what) == 1 and what[0] in ("mlp", "cnn")) or (
        len(what) == 2 and what[0] == "gpt" and what[1] in ("ddp", "zero1", "full"))
    if not ok:
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    if "RANK" not in os.environ and nproc > 1:
        return launch(nproc, rest)
    return worker(what)


def worker(what):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)

    def out(key, value):
        if rank == 0:
            print(key, value, flush=True)

    def barrier():
        if world > 1:
            dist.barrier()

    def reduce(v, op="sum"):
        if world == 1:
            return v
        t = torch.tensor([v], dtype=torch.float64)
        dist.all_reduce(t, dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return t.item()

    def gather(v):
        if world == 1:
            return [v]
        t = torch.tensor([v], dtype=torch.int64)
        outs = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(outs, t)
        return [int(o.item()) for o in outs]

    out("torch_version", torch.__version__)
    out("dist_backend", "gloo" if world > 1 else "none")
    out("world", world)
    out("threads", torch.get_num_threads())

    if what[0] == "gpt":
        bench_gpt(what[1], rank, world, out, barrier, gather, torch, dist, nn, F)
    else:
        bench_throughput(what[0], rank, world, out, barrier, reduce, gather, torch, dist, nn, F)
    if world > 1:
        dist.destroy_process_group()
    return 0


def bench_throughput(name, rank, world, out, barrier, reduce, gather, torch, dist, nn, F):
    is_mlp = name == "mlp"
    warmup = (10 if QUICK else 50) if is_mlp else (1 if QUICK else 3)
    windows = (3 if QUICK else 7) if is_mlp else (3 if QUICK else 5)
    target_s = (0.1 if QUICK else 0.3) if is_mlp else (0.3 if QUICK else 1.0)
    reps = (20 if QUICK else 100) if is_mlp else (5 if QUICK else 20)
    local = GLOBAL_BATCH // world

    torch.manual_seed(0)
    if is_mlp:
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
    nparams = sum(p.numel() for p in model.parameters())
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(100 + rank)
    nbatch = NBATCH if is_mlp else 16  # as bench_dist.c: the MLP must not memorise its batches
    xs = [torch.rand(local, 1, 28, 28) for _ in range(nbatch)]
    ys = [torch.randint(0, 10, (local,)) for _ in range(nbatch)]
    out(f"{name}_params", nparams)
    out(f"{name}_local_batch", local)
    state = {"step": 0, "loss": 0.0, "bwd": 0.0}

    def steps(n, timed_backward=False):
        for i in range(n):
            k = state["step"] % nbatch
            state["step"] += 1
            loss = F.cross_entropy(model(xs[k]), ys[k])
            opt.zero_grad(set_to_none=True)
            if timed_backward:
                t0 = time.perf_counter()
                loss.backward()
                state["bwd"] += time.perf_counter() - t0
            else:
                loss.backward()
            opt.step()
            if i == n - 1:
                state["loss"] = loss.item()

    steps(warmup)
    barrier()
    t0 = time.perf_counter()
    steps(2)
    one = reduce((time.perf_counter() - t0) / 2, "max")
    per = max(1, int(target_s / max(one, 1e-9)))
    ts = []
    barrier()
    busy0, own0, wall0 = machine_busy_s(), own_cpu_s(), time.perf_counter()
    for _ in range(windows):
        barrier()
        t0 = time.perf_counter()
        steps(per)
        barrier()
        ts.append((time.perf_counter() - t0) / per)
    wall = time.perf_counter() - wall0
    own = reduce(own_cpu_s() - own0)
    step = statistics.median(ts)
    out(f"{name}_step_ms", "%.4f" % (1e3 * step))
    out(f"{name}_samples_per_s", "%.2f" % (GLOBAL_BATCH / step))
    out(f"{name}_steps_per_window", per)
    out(f"{name}_windows", windows)
    out(f"{name}_loss", "%.4f" % state["loss"])
    if busy0 is not None:
        out(f"{name}_other_cpu", "%.2f" % max(0.0, (machine_busy_s() - busy0 - own) / wall))

    if world > 1:
        # backward under DDP against backward under no_sync, in alternating windows
        rounds = 2 if QUICK else 3
        sync_t = nosync_t = 0.0
        n_sync = n_nosync = 0
        for _ in range(rounds):
            barrier()
            state["bwd"] = 0.0
            steps(per, timed_backward=True)
            sync_t += state["bwd"]
            n_sync += per
            barrier()
            state["bwd"] = 0.0
            with model.no_sync():
                steps(per, timed_backward=True)
            nosync_t += state["bwd"]
            n_nosync += per
        barrier()
        exposed = reduce(sync_t / n_sync - nosync_t / n_nosync) / world
        try:
            sizes = [int(s) for s in str(model._get_ddp_logging_data().get("bucket_sizes", "")).split(",") if s.strip()]
        except Exception:  # an older or newer torch without it: one flat tensor of every gradient
            sizes = []
        if not sizes:
            sizes = [4 * nparams]
        bufs = [torch.rand(s // 4) for s in sizes]
        for _ in range(3):
            for b in bufs:
                dist.all_reduce(b)
        ar = []
        for _ in range(reps):
            barrier()
            t0 = time.perf_counter()
            for b in bufs:
                dist.all_reduce(b)
            ar.append(time.perf_counter() - t0)
        alone = reduce(statistics.median(ar)) / world
        hidden = min(1.0, max(0.0, 1 - exposed / alone)) if alone > 0 else 0.0
        out(f"{name}_buckets", len(sizes))
        out(f"{name}_grad_bytes", sum(sizes))
        out(f"{name}_allreduce_alone_ms", "%.4f" % (1e3 * alone))
        out(f"{name}_backward_sync_ms", "%.4f" % (1e3 * reduce(sync_t / n_sync) / world))
        out(f"{name}_backward_nosync_ms", "%.4f" % (1e3 * reduce(nosync_t / n_nosync) / world))
        out(f"{name}_exposed_ms", "%.4f" % (1e3 * exposed))
        out(f"{name}_hidden_share", "%.3f" % hidden)
    for r, v in enumerate(gather(status_kib("VmHWM"))):
        out(f"{name}_peak_rss_kib_r{r}", v)


def bench_gpt(mode, rank, world, out, barrier, gather, torch, dist, nn, F):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(WIDTH)
            self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
            self.ln2 = nn.LayerNorm(WIDTH)
            self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

        def forward(self, x):
            t = x.shape[1]
            mask = torch.full((t, t), float("-inf")).triu(1)
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, WIDTH)
            self.pos = nn.Embedding(CONTEXT, WIDTH)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.ln_f = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, VOCAB)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            return self.head(self.ln_f(self.blocks(x)))

    steps = 2 if QUICK else 3
    start_rss = status_kib("VmRSS")
    torch.manual_seed(0)
    model = GPT()
    nparams = sum(p.numel() for p in model.parameters())
    try:
        if mode == "full":
            import functools
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
            policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
            model = FSDP(model, auto_wrap_policy=policy, device_id=torch.device("cpu"), use_orig_params=False)
        else:
            model = nn.parallel.DistributedDataParallel(model)
        if mode == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        torch.manual_seed(200 + rank)
        ts, last = [], 0.0
        for _ in range(steps):
            ids = torch.randint(0, VOCAB, (GPT_BATCH, CONTEXT + 1))
            x, y = ids[:, :-1].contiguous(), ids[:, 1:].reshape(-1)
            barrier()
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            barrier()
            ts.append(time.perf_counter() - t0)
            last = loss.item()
    except Exception as e:  # noqa: BLE001 -- a torch without this mode on the CPU
        if mode != "full":
            raise
        out("gpt_mode", mode)
        out("gpt_unsupported", ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")[:300])
        return
    peak = status_kib("VmHWM")
    pbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    gbytes = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    inner = opt.optim if mode == "zero1" else opt
    obytes = 0
    for st in inner.state.values():
        for k, v in st.items():
            if torch.is_tensor(v) and k != "step":
                obytes += v.numel() * v.element_size()
    out("gpt_mode", mode)
    out("gpt_config", "vocab=%d context=%d width=%d layers=%d heads=%d batch_per_rank=%d steps=%d" %
        (VOCAB, CONTEXT, WIDTH, LAYERS, HEADS, GPT_BATCH, steps))
    out("gpt_params", nparams)
    out("gpt_step_ms", "%.2f" % (1e3 * statistics.median(ts[1:])))
    out("gpt_loss", "%.4f" % last)
    for key, v in (("peak_rss_kib", peak), ("start_rss_kib", start_rss), ("param_bytes", pbytes),
                   ("grad_bytes", gbytes), ("optim_bytes", obytes)):
        for r, x in enumerate(gather(v)):
            out(f"gpt_{key}_r{r}", x)


if __name__ == "__main__":
    sys.exit(main())
