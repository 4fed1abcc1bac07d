#!/usr/bin/env python3
"""Checks the files tests/onnx_export_models wrote into DIR: onnx.checker.check_model with
full_check on every exported model, the state dict's names on its initializers, and ONNX Runtime's outputs against nabla's at batch 1 and
at batch 5 (through the dynamic batch axis), at each opset. The error is relative to the
reference's largest magnitude, max|nabla - ort| / max|ort|; the floor is 1e-5 (f32).
Usage (the environment of scripts/onnx_env.sh): onnx_export_check.py DIR"""
import glob
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort

FLOOR = 1e-5


def main(d):
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
            if got.shape != want.shape:
                print(f"FAIL {name} opset {opset} batch {b}: shape {got.shape}, nabla {want.shape}")
                failed += 1
                continue
            err = float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(got)), 1e-30))
            ok = err <= FLOOR
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} opset {opset} batch {b}: {len(model.graph.node)} nodes, "
                  f"relative error {err:.2e} (floor {FLOOR:g})")
    print(f"onnx_export_check: {len(models)} models, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
