#!/usr/bin/env python3
"""Checks the files tests/onnx_export_models wrote into DIR: onnx.checker.check_model with
full_check on every exported model, the state dict's names on its initializers, and ONNX Runtime's outputs against nabla's at batch 1 and
at batch 5 (through the dynamic batch axis), at each opset. The error is relative to the
reference's largest magnitude, max|nabla - ort| / max|ort|; the floor is 1e-5 (f32). With
--nabla PATH, the same files also go back through nabla's own importer (`PATH run`), held to
nabla's outputs by the same floor.
Usage (the environment of scripts/onnx_env.sh): onnx_export_check.py DIR [--nabla PATH]"""
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

FLOOR = 1e-5


def rel_error(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(got)), 1e-30))


def judge(label, detail, got, want):
    """Prints one comparison with nabla's outputs (got: an array, or an error's text); 1 when it fails."""
    if isinstance(got, str) or got.shape != want.shape:
        print(f"FAIL {label}: {got if isinstance(got, str) else f'shape {got.shape}, nabla {want.shape}'}")
        return 1
    err = rel_error(got, want)
    ok = err <= FLOOR
    print(f"{'ok  ' if ok else 'FAIL'} {label}: {detail}relative error {err:.2e} (floor {FLOOR:g})")
    return 0 if ok else 1


def nabla_run(nabla, model, x_path):
    """The model's output on x through `nabla run` (nabla's importer), or the error text."""
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, "y.npy")
        p = subprocess.run([nabla, "run", model, "--input", x_path, "-o", out], capture_output=True, text=True)
        return np.load(out) if p.returncode == 0 else (p.stderr.strip() or "nabla run failed")


def main(d, nabla=None):
    models = sorted(glob.glob(os.path.join(d, "*_op*.onnx")))
    if not models:
        print(f"onnx_export_check: no models in {d}")
        return 1
    failed = 0
    for path in models:
        name, opset = re.match(r"(\w+)_op(\d+)\.onnx", os.path.basename(path)).groups()
        model = onnx.load(path)
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # the checker's own exception types vary by version
            print(f"FAIL {os.path.basename(path)}: checker: {e}")
            failed += 1
            continue
        names = set(open(os.path.join(d, f"{name}_names.txt")).read().split())
        inits = {t.name for t in model.graph.initializer}
        if not names <= inits:
            print(f"FAIL {os.path.basename(path)}: state-dict names missing from the initializers: "
                  f"{sorted(names - inits)[:5]}")
            failed += 1
        got_opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
        if got_opset != int(opset):
            print(f"FAIL {os.path.basename(path)}: opset {got_opset}, expected {opset}")
            failed += 1
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        for b in (1, 5):
            x = np.load(os.path.join(d, f"{name}_b{b}_in.npy"))
            want = np.load(os.path.join(d, f"{name}_b{b}_out.npy"))
            (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
            label = f"{name} opset {opset} batch {b}"
            failed += judge(label, f"{len(model.graph.node)} nodes, ", got, want)
            if nabla:
                back = nabla_run(nabla, path, os.path.join(d, f"{name}_b{b}_in.npy"))
                failed += judge(label + " through nabla's importer", "", back, want)
    print(f"onnx_export_check: {len(models)} models, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    nabla = None
    if "--nabla" in args:
        k = args.index("--nabla")
        nabla = args[k + 1]
        del args[k:k + 2]
    sys.exit(main(args[0], nabla))
