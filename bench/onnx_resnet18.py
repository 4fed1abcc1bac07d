#!/usr/bin/env python3
"""Writes a ResNet-18 (torchvision's architecture, 3x224x224 in, 1000 classes) as ONNX at random
initialisation, the way torch.onnx.export writes the eval-mode model: batch norm folded into
each convolution's weight and bias, Conv/Relu/MaxPool/Add/GlobalAveragePool/Flatten/Gemm, a
dynamic batch axis, opset 17. PyTorch 2 is not needed (onnx.helper builds the graph), so the
benchmark runs in the environment of scripts/onnx_env.sh.
Usage: onnx_resnet18.py OUT.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits = [], []


def const(name, arr):
    inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
    return name


def conv(x, cin, cout, k, stride, pad, name, relu=True):
    # Kaiming-uniform weights like torch's default, with a bias standing for the folded batch norm
    bound = 1.0 / np.sqrt(cin * k * k)
    w = const(name + ".weight", rng.uniform(-bound, bound, (cout, cin, k, k)))
    b = const(name + ".bias", rng.uniform(-0.1, 0.1, (cout,)))
    y = name + ".out"
    nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride, stride],
                                  pads=[pad] * 4, dilations=[1, 1], group=1))
    if relu:
        nodes.append(helper.make_node("Relu", [y], [y + ".relu"]))
        return y + ".relu"
    return y


def block(x, cin, cout, stride, name):
    h = conv(x, cin, cout, 3, stride, 1, name + ".conv1")
    h = conv(h, cout, cout, 3, 1, 1, name + ".conv2", relu=False)
    short = conv(x, cin, cout, 1, stride, 0, name + ".downsample", relu=False) if stride != 1 or cin != cout else x
    nodes.append(helper.make_node("Add", [h, short], [name + ".add"]))
    nodes.append(helper.make_node("Relu", [name + ".add"], [name + ".out"]))
    return name + ".out"


def main(path):
    x = conv("input", 3, 64, 7, 2, 3, "conv1")
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "pool", 64
    for i, (cout, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)]):
        x = block(x, cin, cout, stride, f"layer{i + 1}.0")
        x = block(x, cout, cout, 1, f"layer{i + 1}.1")
        cin = cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], axis=1))
    bound = 1.0 / np.sqrt(512)
    w = const("fc.weight", rng.uniform(-bound, bound, (1000, 512)))
    b = const("fc.bias", rng.uniform(-bound, bound, (1000,)))
    nodes.append(helper.make_node("Gemm", ["flat", w, b], ["output"], alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(nodes, "resnet18", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="onnx_resnet18.py")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


if __name__ == "__main__":
    main(sys.argv[1])
