#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_conv_torch.c: convolution, pooling and batch
norm, functional and as modules, forward and backward.

Usage: conv_ref.py OUTPUT_FILE

The file is whitespace-separated tokens, one record a line:

  C kind name                       a case: the C test runs `kind` on the tensors `name.*`
  T name dtype ndim d1..dn v1..vn   a tensor (values in decimals that round-trip exactly)

Each case's configuration is an i64 tensor `name.cfg`; its inputs, the upstream gradient
`name.g`, torch's output `name.y` and gradients `name.dx`, `name.dw`, ... follow. Values come
from a torch seed made from the case name, so adding a case changes no other.
"""
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

DT_NAME = {torch.float32: 'f32', torch.float64: 'f64', torch.int64: 'i64'}
out = []


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def put(name, t):
    t = t.detach().contiguous()
    dims = ' '.join(str(d) for d in t.shape)
    if t.dtype == torch.int64:
        vals = ' '.join(str(int(v)) for v in t.reshape(-1).tolist())
    elif t.dtype == torch.float32:  # 9 significant digits round-trip an f32 exactly
        vals = ' '.join('%.9g' % v for v in t.reshape(-1).tolist())
    else:
        vals = ' '.join(repr(float(v)) for v in t.reshape(-1).tolist())
    out.append(f'T {name} {DT_NAME[t.dtype]} {t.dim()} {dims} {vals}')


def cfg(name, values):
    put(name + '.cfg', torch.tensor(values, dtype=torch.int64))


def case(kind, name):
    out.append(f'C {kind} {name}')


def leaf(shape, dtype):
    return torch.randn(*shape, dtype=dtype).requires_grad_(True)


# ---- functional conv2d: cfg = stride(2) padding(2) dilation(2) groups has_bias ----
def conv(name, x_shape, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=True,
         dtype=torch.float32):
    seed(name)
    x = leaf(x_shape, dtype)
    w = leaf(w_shape, dtype)
    b = leaf((w_shape[0],), dtype) if bias else None
    y = F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    g = torch.randn_like(y)
    leaves = [x, w] + ([b] if bias else [])
    grads = torch.autograd.grad((y * g).sum(), leaves)
    case('conv', name)
    cfg(name, list(stride) + list(padding) + list(dilation) + [groups, int(bias)])
    put(name + '.x', x)
    put(name + '.w', w)
    if bias:
        put(name + '.b', b)
    put(name + '.g', g)
    put(name + '.y', y)
    put(name + '.dx', grads[0])
    put(name + '.dw', grads[1])
    if bias:
        put(name + '.db', grads[2])


# ---- functional conv3d: cfg = stride(3) padding(3) dilation(3) groups has_bias ----
def conv3d(name, x_shape, w_shape, stride=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, bias=True,
           dtype=torch.float32):
    seed(name)
    x = leaf(x_shape, dtype)
    w = leaf(w_shape, dtype)
    b = leaf((w_shape[0],), dtype) if bias else None
    y = F.conv3d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    g = torch.randn_like(y)
    leaves = [x, w] + ([b] if bias else [])
    grads = torch.autograd.grad((y * g).sum(), leaves)
    case('conv3d', name)
    cfg(name, list(stride) + list(padding) + list(dilation) + [groups, int(bias)])
    for k, t in (('x', x), ('w', w), ('g', g), ('y', y), ('dx', grads[0]), ('dw', grads[1])):
        put(f'{name}.{k}', t)
    if bias:
        put(name + '.b', b)
        put(name + '.db', grads[2])


conv3d('conv3d_basic', (2, 3, 5, 6, 7), (4, 3, 3, 3, 3))
conv3d('conv3d_stride_pad_dil', (2, 4, 9, 7, 8), (6, 4, 3, 2, 3), stride=(2, 1, 2), padding=(2, 1, 0), dilation=(2, 1, 1))
conv3d('conv3d_groups_f64', (1, 4, 6, 5, 5), (6, 2, 2, 3, 3), padding=(1, 1, 1), groups=2, bias=False, dtype=torch.float64)
conv3d('conv3d_unbatched', (3, 4, 5, 5), (2, 3, 1, 3, 3), stride=(1, 2, 2))


conv('conv_basic', (2, 3, 7, 9), (4, 3, 3, 3))
conv('conv_stride_pad_dil', (2, 4, 10, 7), (6, 4, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2))
conv('conv_stride_pad_dil_f64', (2, 4, 10, 7), (6, 4, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2),
     dtype=torch.float64)
conv('conv_groups', (3, 4, 8, 8), (6, 2, 3, 3), stride=(2, 2), padding=(1, 1), groups=2)
conv('conv_depthwise_nobias', (2, 3, 6, 5), (3, 1, 3, 3), padding=(1, 1), groups=3, bias=False)
conv('conv_1x1', (2, 5, 4, 6), (3, 5, 1, 1))
conv('conv_1x1_stride', (2, 5, 5, 6), (3, 5, 1, 1), stride=(2, 2))
conv('conv_kernel_eq_input', (2, 2, 3, 4), (3, 2, 3, 4))
conv('conv_parallel', (9, 16, 12, 11), (32, 16, 3, 3), padding=(1, 1))
conv('conv_parallel_f64', (9, 8, 10, 10), (16, 4, 5, 5), padding=(2, 2), stride=(2, 2), groups=2,
     dtype=torch.float64)
conv('conv_tf_cnn', (4, 32, 14, 14), (64, 32, 5, 5), padding=(2, 2))
# one sample of 4.6M multiply-adds: cut into pieces of output channels (32, 32, 16)
conv('conv_one_sample_channel_pieces', (1, 16, 12, 12), (80, 16, 5, 5), padding=(2, 2))


# ---- functional pooling: cfg = kernel (h, w), stride (h, w), padding (h, w), dilation (h, w),
# ceil_mode, exclude_padding (max/avg; from args k, s, p with s 0 meaning k, each an int or an
# (h, w) pair) or out_h out_w (adaptive) ----
def pair(v):
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def pool(kind, name, x_shape, args, dtype=torch.float32, ties=False, dilation=1, ceil_mode=False,
         count_include_pad=True, nans=False):
    seed(name)
    x = leaf(x_shape, dtype)
    if ties:  # few distinct values and some -inf: windows with several largest values
        x = torch.where(x < -1.5, torch.tensor(float('-inf'), dtype=dtype), (x * 1.5).round()).detach().requires_grad_(True)
    if nans:  # about one element in twelve NaN: a window with one gives NaN, and its gradient goes to the last
        x = torch.where(torch.rand(x_shape) < 1 / 12, torch.tensor(float('nan'), dtype=dtype), x).detach().requires_grad_(True)
    if kind in ('maxpool', 'avgpool'):
        k, s, p = args
        k, s, p = pair(k), pair(s or k), pair(p)
        if kind == 'maxpool':
            y = F.max_pool2d(x, k, stride=s, padding=p, dilation=dilation, ceil_mode=ceil_mode)
        else:
            y = F.avg_pool2d(x, k, stride=s, padding=p, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
        config = k + s + p + pair(dilation) + [int(ceil_mode), int(not count_include_pad)]
    else:
        y = F.adaptive_avg_pool2d(x, tuple(args))
        config = list(args)
    g = torch.randn_like(y)
    (dx,) = torch.autograd.grad((y * g).sum(), [x])
    case(kind, name)
    cfg(name, config)
    put(name + '.x', x)
    put(name + '.g', g)
    put(name + '.y', y)
    put(name + '.dx', dx)


pool('maxpool', 'maxpool_k3_s2_p1', (2, 3, 7, 9), (3, 2, 1))
pool('maxpool', 'maxpool_k2_default', (2, 2, 8, 7), (2, 0, 0))
pool('maxpool', 'maxpool_k3_s1_p1_f64', (2, 2, 5, 6), (3, 1, 1), dtype=torch.float64)
pool('maxpool', 'maxpool_parallel', (8, 16, 20, 20), (3, 2, 1))
pool('maxpool', 'maxpool_k2_parallel', (8, 16, 20, 21), (2, 0, 0))
pool('maxpool', 'maxpool_k2_f64', (2, 3, 6, 9), (2, 2, 0), dtype=torch.float64)
pool('maxpool', 'maxpool_k2_even_ties', (3, 4, 8, 10), (2, 0, 0), ties=True)
pool('maxpool', 'maxpool_k2_odd_ties_f64', (2, 3, 7, 9), (2, 0, 0), dtype=torch.float64, ties=True)
pool('maxpool', 'maxpool_ceil_k2_odd', (2, 3, 7, 9), (2, 0, 0), ceil_mode=True)
pool('maxpool', 'maxpool_ceil_k3_s2_p1', (2, 3, 8, 10), (3, 2, 1), ceil_mode=True)
pool('maxpool', 'maxpool_dilation2', (2, 3, 9, 11), (3, 1, 1), dilation=2)
pool('maxpool', 'maxpool_dilation_hw_ceil_f64', (2, 2, 10, 9), (3, 2, 1), dtype=torch.float64, dilation=(2, 3),
     ceil_mode=True)
pool('maxpool', 'maxpool_nonsquare', (2, 3, 9, 12), ((2, 3), (1, 2), (1, 0)))
pool('maxpool', 'maxpool_nonsquare_ties', (3, 2, 8, 9), ((3, 2), (2, 3), (1, 1)), ties=True)
# the generic window's rows (stride 1, 2 and other), NaN with ties and -inf among the values
pool('maxpool', 'maxpool_k3_s2_p1_nan_ties', (2, 3, 11, 13), (3, 2, 1), ties=True, nans=True)
pool('maxpool', 'maxpool_k3_s1_p1_nan', (2, 2, 7, 9), (3, 1, 1), nans=True)
pool('maxpool', 'maxpool_k3_s3_p1_nan_ties_f64', (2, 2, 10, 14), (3, 3, 1), dtype=torch.float64, ties=True, nans=True)
pool('maxpool', 'maxpool_dilation2_nan', (2, 2, 9, 12), (3, 2, 1), dilation=2, nans=True)
pool('avgpool', 'avgpool_exclude_pad', (2, 3, 7, 9), (3, 2, 1), count_include_pad=False)
pool('avgpool', 'avgpool_ceil', (2, 3, 7, 9), (2, 0, 0), ceil_mode=True)
pool('avgpool', 'avgpool_ceil_p1_exclude', (2, 3, 8, 10), (3, 2, 1), ceil_mode=True, count_include_pad=False)
pool('avgpool', 'avgpool_nonsquare_f64', (2, 2, 9, 12), ((3, 2), (2, 3), (1, 0)), dtype=torch.float64)
pool('avgpool', 'avgpool_k3_s2_p1', (2, 3, 7, 9), (3, 2, 1))
pool('avgpool', 'avgpool_k2_default', (2, 2, 8, 7), (2, 0, 0))
pool('avgpool', 'avgpool_k3_s1_p1_f64', (2, 2, 5, 6), (3, 1, 1), dtype=torch.float64)
pool('adaptive', 'adaptive_7x9_to_3x4', (2, 3, 7, 9), (3, 4))
pool('adaptive', 'adaptive_7x9_to_5x2', (2, 3, 7, 9), (5, 2))
pool('adaptive', 'adaptive_global', (2, 3, 7, 9), (1, 1))
pool('adaptive', 'adaptive_upsample_f64', (1, 2, 3, 4), (5, 7), dtype=torch.float64)


# ---- modules: conv2d (cfg = in out kernel stride padding dilation groups bias) ----
MODES = ['zeros', 'reflect', 'replicate', 'circular']


# cfg = dims in out kernel(h, w) stride(h, w) padding(h, w) dilation(h, w) groups bias padding_mode
# (a 1-D module's height values are 1, 1, 0, 1)
def conv_module(name, x_shape, in_ch, out_ch, k, stride=1, padding=0, dilation=1, groups=1, bias=True, dims=2,
                padding_mode='zeros'):
    seed(name)
    cls = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
    m = cls(in_ch, out_ch, k, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
            padding_mode=padding_mode)
    x = leaf(x_shape, torch.float32)
    y = m(x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    case('conv_module', name)
    hw = pair if dims != 1 else (lambda v: [1, v])  # a Conv3d's are square: its depth is the same
    cfg(name, [dims, in_ch, out_ch] + hw(k) + hw(stride) + (pair(padding) if dims != 1 else [0, padding]) + hw(dilation) +
        [groups, int(bias), MODES.index(padding_mode)])
    put(name + '.x', x)
    put(name + '.w', m.weight)
    if bias:
        put(name + '.b', m.bias)
    put(name + '.g', g)
    put(name + '.y', y)
    put(name + '.dx', x.grad)
    put(name + '.dw', m.weight.grad)
    if bias:
        put(name + '.db', m.bias.grad)


conv_module('conv_module_basic', (2, 3, 9, 8), 3, 8, 3, stride=2, padding=1)
conv_module('conv_module_groups_dil', (2, 4, 9, 9), 4, 6, 3, padding=2, dilation=2, groups=2, bias=False)
conv_module('conv_module_nonsquare', (2, 3, 9, 11), 3, 5, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1))
conv_module('conv_module_reflect', (2, 3, 8, 7), 3, 4, 3, padding=2, padding_mode='reflect')
conv_module('conv_module_replicate_nonsquare', (2, 3, 8, 7), 3, 4, (3, 2), stride=2, padding=(1, 2),
            padding_mode='replicate')
conv_module('conv_module_circular_groups', (2, 4, 6, 7), 4, 6, 3, padding=1, groups=2, padding_mode='circular')
conv_module('conv1d_module_basic', (3, 4, 11), 4, 6, 3, stride=2, padding=1, dims=1)
conv_module('conv1d_module_dil_groups', (2, 4, 13), 4, 8, 3, padding=2, dilation=2, groups=4, bias=False, dims=1)
conv_module('conv1d_module_reflect', (2, 3, 9), 3, 5, 4, padding=3, padding_mode='reflect', dims=1)
conv_module('conv3d_module_basic', (2, 3, 5, 6, 5), 3, 4, 3, stride=2, padding=1, dims=3)
conv_module('conv3d_module_groups_reflect', (1, 4, 5, 5, 6), 4, 2, 2, padding=1, dilation=2, groups=2, bias=False,
            padding_mode='reflect', dims=3)
conv_module('conv1d_module_circular', (2, 3, 9), 3, 2, 3, stride=3, padding=2, padding_mode='circular', dims=1)


# ---- modules: pooling (cfg = kind kernel stride padding, or kind out_h out_w) ----
def pool_module(name, x_shape, kind, args):
    seed(name)
    if kind == 0:
        m = nn.MaxPool2d(args[0], stride=args[1] or None, padding=args[2])
    elif kind == 1:
        m = nn.AvgPool2d(args[0], stride=args[1] or None, padding=args[2])
    else:
        m = nn.AdaptiveAvgPool2d(tuple(args))
    x = leaf(x_shape, torch.float32)
    y = m(x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    case('pool_module', name)
    cfg(name, [kind] + list(args))
    put(name + '.x', x)
    put(name + '.g', g)
    put(name + '.y', y)
    put(name + '.dx', x.grad)


pool_module('maxpool_module', (2, 3, 8, 8), 0, (2, 0, 0))
pool_module('avgpool_module', (2, 3, 9, 7), 1, (3, 2, 1))
pool_module('adaptive_module_unbatched', (3, 9, 7), 2, (2, 3))


# ---- batch norm modules: two training steps, then evaluation (cfg = dims features) ----
def bn_module(name, x_shape, dims):
    seed(name)
    c = x_shape[1]
    m = nn.BatchNorm1d(c) if dims == 1 else nn.BatchNorm2d(c)
    with torch.no_grad():
        m.weight.copy_(torch.rand(c) + 0.5)
        m.bias.copy_(torch.randn(c))
    case('bn_module', name)
    cfg(name, [dims, c])
    put(name + '.w', m.weight)
    put(name + '.b', m.bias)
    m.train()
    for step in (1, 2):
        x = leaf(x_shape, torch.float32)
        with torch.no_grad():
            x.mul_(2.0).add_(0.5)  # statistics far from the initial running ones
        y = m(x)
        g = torch.randn_like(y)
        m.weight.grad = None
        m.bias.grad = None
        (y * g).sum().backward()
        p = f'{name}.train{step}'
        put(p + '.x', x)
        put(p + '.g', g)
        put(p + '.y', y)
        put(p + '.dx', x.grad)
        put(p + '.dw', m.weight.grad)
        put(p + '.db', m.bias.grad)
        put(p + '.running_mean', m.running_mean)
        put(p + '.running_var', m.running_var)
        put(p + '.num_batches_tracked', m.num_batches_tracked)
    m.eval()
    x = leaf(x_shape, torch.float32)
    y = m(x)
    g = torch.randn_like(y)
    m.weight.grad = None
    m.bias.grad = None
    (y * g).sum().backward()
    p = f'{name}.eval'
    put(p + '.x', x)
    put(p + '.g', g)
    put(p + '.y', y)
    put(p + '.dx', x.grad)
    put(p + '.dw', m.weight.grad)
    put(p + '.db', m.bias.grad)


bn_module('bn2d', (4, 3, 5, 6), 2)
bn_module('bn1d_2d_input', (8, 5), 1)
bn_module('bn1d_3d_input', (4, 3, 7), 1)


# ---- functional batch norm in f64 with a momentum (cfg = training, momentum * 1000) ----
def bn_functional(name, x_shape, training, momentum):
    seed(name)
    c = x_shape[1]
    x = leaf(x_shape, torch.float64)
    w = leaf((c,), torch.float64)
    b = leaf((c,), torch.float64)
    rm = torch.randn(c, dtype=torch.float64)
    rv = torch.rand(c, dtype=torch.float64) + 0.5
    case('bn_functional', name)
    cfg(name, [int(training), int(momentum * 1000)])
    put(name + '.running_mean_before', rm)
    put(name + '.running_var_before', rv)
    y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=momentum, eps=1e-5)
    g = torch.randn_like(y)
    dx, dw, db = torch.autograd.grad((y * g).sum(), [x, w, b])
    for k, t in (('x', x), ('w', w), ('b', b), ('g', g), ('y', y), ('dx', dx), ('dw', dw), ('db', db),
                 ('running_mean', rm), ('running_var', rv)):
        put(f'{name}.{k}', t)


bn_functional('bn_functional_train_f64', (5, 4, 3, 2), True, 0.3)
bn_functional('bn_functional_eval_f64', (5, 4, 3, 2), False, 0.1)

with open(sys.argv[1], 'w') as f:
    f.write('\n'.join(out) + '\n')
