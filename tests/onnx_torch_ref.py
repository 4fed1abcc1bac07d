"""ONNX Runtime's outputs for the models tests/onnx_torch_export.py wrote, at batch 2 and at
batch 1 through the dynamic axis, in the folder format of tests/onnx_node_data.py, so that
onnx_conformance checks nabla against them (onnx_torch_models, within 1e-4). Each model passes
onnx.checker first.

Usage: python tests/onnx_torch_ref.py MODELS OUT
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_node_data import write_manifest, write_model_case  # noqa: E402


def main():
    models, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    lines = []
    for name in ("resnet18", "encoder"):
        path = os.path.join(models, name + ".onnx")
        onnx.checker.check_model(onnx.load(path), full_check=True)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x2 = np.load(os.path.join(models, name + ".x.npy"))
        for batch, x in ((2, x2), (1, x2[1:2])):
            lines.append(write_model_case(out, "%s_batch%d" % (name, batch), name, path, [x], sess.run(None, {"x": x})))
    write_manifest(out, lines)
    print("onnx_torch_ref.py: %d cases into %s" % (len(lines), out))


if __name__ == "__main__":
    main()
