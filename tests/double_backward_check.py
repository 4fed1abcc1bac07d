#!/usr/bin/python3
"""Checks the WGAN-GP step of tests/test_double_backward.c against torch.

Usage: double_backward_check.py GRADS_FILE

The C test builds a small MLP and CNN with deterministic parameters (parameter k of a model:
0.4 * sin(0.37 i + 1.1 k) / sqrt(fan_in)) and input (sin(0.23 i + 0.5)), takes the critic's
gradient penalty through nb_autograd_grad with create_graph, backpropagates
mean(D(x)) + 10 mean((|dD/dx| - 1)^2) and writes the loss and every parameter's gradient. This
script does the same in torch (float32, as the C test) and compares, failing on any difference
above 2e-4 relative (second derivatives in float32).
"""
import math
import sys

import torch
import torch.nn as nn


def wave(shape, a, b, scale):
    n = math.prod(shape)
    return torch.tensor([scale * math.sin(a * i + b) for i in range(n)], dtype=torch.float64).reshape(shape)


def fill(model):
    with torch.no_grad():
        for k, (_, p) in enumerate(model.named_parameters()):
            fan_in = math.prod(p.shape[1:]) if p.dim() > 1 else 1
            p.copy_(wave(tuple(p.shape), 0.37, 1.1 * k, 0.4 / math.sqrt(fan_in)).to(p.dtype))


def step(model, shape):
    fill(model)
    x = wave(shape, 0.23, 0.5, 1).float().requires_grad_(True)
    out = model(x)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    norms = gx.reshape(shape[0], -1).norm(2, dim=1)
    loss = out.mean() + 10 * ((norms - 1) ** 2).mean()
    loss.backward()
    return loss.item(), {n: p.grad.reshape(-1).tolist() for n, p in model.named_parameters()}


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: double_backward_check.py GRADS_FILE')
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 5), nn.GELU(), nn.Linear(5, 1))
    cnn = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(3, 4, 3, padding=1),
                        nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 1))
    want = {'mlp': step(mlp, (4, 6)), 'cnn': step(cnn, (3, 2, 6, 6))}
    got = {}
    with open(sys.argv[1]) as f:
        for line in f:
            tag, name, *vals = line.split()
            got[(tag, name)] = [float(v) for v in vals]
    bad = 0
    for tag, (loss, grads) in want.items():
        checks = [('loss', [loss])] + list(grads.items())
        for name, ref in checks:
            mine = got.get((tag, name))
            if mine is None or len(mine) != len(ref):
                print(f'{tag} {name}: missing or of the wrong size in {sys.argv[1]}')
                bad += 1
                continue
            scale = max(1e-3, max(abs(v) for v in ref))
            err = max(abs(a - b) for a, b in zip(mine, ref)) / scale
            if err > 2e-4:
                print(f'{tag} {name}: differs from torch by {err:.3g} (relative to its largest {scale:.3g})')
                bad += 1
    if bad:
        sys.exit(1)
    print(f'double_backward_check: the WGAN-GP gradients of the MLP and the CNN match torch {torch.__version__}')


if __name__ == '__main__':
    main()
