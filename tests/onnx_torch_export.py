"""Exports two models with torch.onnx.export, as a PyTorch user would, for onnx_torch_models:
torchvision's ResNet-18 at random initialisation (eval mode, its batch norms given random
statistics so that the folded ones are not the identity) and a 2-layer nn.TransformerEncoder
(batch first, d_model 32, 4 heads), each at opset 17 with a dynamic batch axis, and an input of
batch 2 for each (.npy beside the model). Runs on the Python with torch and torchvision (Debian's
python3-torch and python3-torchvision).

Usage: python3 tests/onnx_torch_export.py OUT
"""
import os
import sys

import numpy as np
import torch
import torchvision


def export(model, x, path):
    torch.onnx.export(model, x, path, opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(path[:-len(".onnx")] + ".x.npy", x.numpy())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():
        for mod in resnet.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    export(resnet, torch.randn(2, 3, 224, 224), os.path.join(out, "resnet18.onnx"))
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    export(encoder, torch.randn(2, 7, 32), os.path.join(out, "encoder.onnx"))
    print("onnx_torch_export.py: torch %s, torchvision %s: resnet18.onnx and encoder.onnx into %s"
          % (torch.__version__, torchvision.__version__, out))


if __name__ == "__main__":
    main()
