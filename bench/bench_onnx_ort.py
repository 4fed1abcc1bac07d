#!/usr/bin/env python3
"""ONNX Runtime on the same model and measurements as bench_onnx (bench/run_onnx.sh runs both):
session creation time, latency of one sample (median), throughput at batch 64 (median), with
intra_op_num_threads set to nabla's thread count and one inter-op thread.
Usage: bench_onnx_ort.py MODEL.onnx C,H,W --threads N [--quick]"""
import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort


def timed(sess, name, x, reps):
    """The median of at least reps runs after a warm-up and a sizing run, more when the runs are short: as many
    as fill a quarter of a second (at most 2000), as bench_onnx counts them."""
    sess.run(None, {name: x})  # warm-up
    t0 = time.perf_counter()
    sess.run(None, {name: x})  # sizes reps
    second = time.perf_counter() - t0
    reps = max(reps, min(2000, int(0.25 / max(second, 1e-9))))
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, {name: x})
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("sample")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    sample = [int(v) for v in a.sample.split(",")]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    opts.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    print(f"ort_load_s {time.perf_counter() - t0:.6f}")
    name = sess.get_inputs()[0].name
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal([1] + sample).astype(np.float32)
    x64 = rng.standard_normal([64] + sample).astype(np.float32)
    print(f"ort_b1_ms {1e3 * timed(sess, name, x1, 5 if a.quick else 30):.4f}")
    print(f"ort_b64_img_s {64 / timed(sess, name, x64, 2 if a.quick else 7):.2f}")


if __name__ == "__main__":
    main()
