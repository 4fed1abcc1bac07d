#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_nn_torch.c (layers, losses, optimizers, schedules,
attention, module backward hooks).

Usage: nn_ref.py OUTPUT_FILE

The file is a flat store of named records, one per line, that the C test looks up by name:

  T name dtype ndim d1..dn v1..v_numel   a tensor (values in decimals that round-trip exactly)
  S name n w1..wn                        a list of words (e.g. optimizer state names)

Names are dotted: "<section>.<case>.<what>", e.g. "layer.linear.x", "loss.ce_mean.grad",
"opt.adam_amsgrad.p0", "sched.onecycle_sgd.lr", "attn.sdpa_mask.gq" (self-attention modules and
the GPT block are layer cases: "layer.gpt_block.y"). Each case draws its values from a torch seed
made from its name, so adding a case changes no other. The C side mirrors each case's settings
by name; a name it asks for that is missing here is a failure.

The test fails (rather than skips) when this script cannot run: the generator is a CTest
fixture that the C test requires, and the C test fails when the file is missing.
"""
import math
import sys
import warnings
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

DT_NAME = {torch.float32: 'f32', torch.float64: 'f64', torch.int64: 'i64'}
OUT = []


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def put(name, t):
    t = torch.as_tensor(t).detach().contiguous()
    if t.dtype not in DT_NAME:
        t = t.to(torch.float32 if t.is_floating_point() else torch.int64)
    dt = DT_NAME[t.dtype]
    flat = t.reshape(-1).tolist()
    if dt == 'f32':
        vals = ['%.9g' % v for v in flat]
    elif dt == 'f64':
        vals = [repr(float(v)) for v in flat]
    else:
        vals = [str(int(v)) for v in flat]
    OUT.append(' '.join(['T', name, dt, str(t.dim())] + [str(d) for d in t.shape] + vals))


def put_words(name, words):
    OUT.append(' '.join(['S', name, str(len(words))] + list(words)))


def put_scalar(name, v):
    put(name, torch.tensor(float(v), dtype=torch.float64))


# ---------------------------------------------------------------- layers
def layer_case(name, module, x, x_grad=True):
    """Forward x through module and backward a random upstream gradient; writes the module's
    parameters (by their torch names), x, g, y, x's gradient and each parameter's gradient."""
    pre = 'layer.' + name
    x = x.clone().requires_grad_(x_grad and x.is_floating_point())
    put_words(f'{pre}.params', [pname for pname, _ in module.named_parameters()])
    if type(module).__module__.startswith('torch.nn.'):  # nabla's class names are torch's
        put_words(f'{pre}.class', [type(module).__name__])
    for pname, p in module.named_parameters():
        put(f'{pre}.param.{pname}', p)
    put(f'{pre}.x', x)
    y = module(x)
    g = torch.randn_like(y)
    grads = torch.autograd.grad((y * g).sum(), ([x] if x.requires_grad else []) + list(module.parameters()),
                                allow_unused=True)
    put(f'{pre}.g', g)
    put(f'{pre}.y', y)
    k = 0
    if x.requires_grad:
        put(f'{pre}.gx', grads[0])
        k = 1
    for (pname, _), gr in zip(module.named_parameters(), grads[k:]):
        put(f'{pre}.grad.{pname}', gr)


class RMSNormRef(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4; Debian's torch is 1.13) written out, as Llama's RMSNorm."""

    def __init__(self, dim, eps=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class RotaryRef(nn.Module):
    """Rotary position embeddings as transformers' Llama computes and applies them: inv_freq in
    f32, angles cat(freqs, freqs), x cos + rotate_half(x) sin; positions [T] or [B, T] (default
    arange(T)), divided by scale (linear rope scaling)."""

    def __init__(self, theta=10000.0, scale=1.0, positions=None):
        super().__init__()
        self.theta, self.scale, self.positions = theta, scale, positions

    def forward(self, x):
        T, D = x.shape[-2], x.shape[-1]
        inv = 1.0 / (self.theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        pos = (torch.arange(T) if self.positions is None else self.positions).float()
        if self.scale != 1.0:
            pos = pos / self.scale
        freqs = pos[..., None] * inv
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        if pos.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return x * cos + torch.cat((-x2, x1), -1) * sin


def away_from_zero(shape):
    x = torch.randn(shape)
    return torch.where(x.abs() < 0.05, torch.full_like(x, 0.3), x)


def layers():
    seed('linear')
    layer_case('linear', nn.Linear(6, 4), torch.randn(3, 6))
    seed('linear3d')
    layer_case('linear3d', nn.Linear(6, 4), torch.randn(2, 3, 6))
    seed('linear_no_bias')
    layer_case('linear_no_bias', nn.Linear(6, 4, bias=False), torch.randn(3, 6))
    for name, mod in [('relu', nn.ReLU()), ('gelu', nn.GELU()), ('silu', nn.SiLU()), ('tanh', nn.Tanh()),
                      ('sigmoid', nn.Sigmoid()), ('softmax', nn.Softmax(dim=1)),
                      ('log_softmax', nn.LogSoftmax(dim=-1))]:
        seed(name)
        layer_case(name, mod, away_from_zero((4, 5)))
    seed('flatten')
    layer_case('flatten', nn.Flatten(), torch.randn(2, 3, 4, 5))
    seed('dropout_eval')
    d = nn.Dropout(0.3)
    d.eval()
    layer_case('dropout_eval', d, torch.randn(4, 5))
    seed('embedding')
    emb = nn.Embedding(10, 4)
    layer_case('embedding', emb, torch.tensor([[1, 3, 3, 9], [0, 3, 7, 1]]))
    seed('embedding_padded')
    emb = nn.Embedding(10, 4, padding_idx=3)
    with torch.no_grad():  # a padding row that is not zero, to see it still gets no gradient
        emb.weight[3] = torch.randn(4)
    layer_case('embedding_padded', emb, torch.tensor([[1, 3, 3, 9], [0, 3, 7, 1]]))
    seed('layer_norm')
    ln = nn.LayerNorm(5)
    with torch.no_grad():  # not the trivial ones and zeros
        ln.weight.copy_(torch.randn(5))
        ln.bias.copy_(torch.randn(5))
    layer_case('layer_norm', ln, torch.randn(2, 3, 5) * 2 + 0.5)
    seed('rms_norm')
    layer_case('rms_norm', RMSNormRef(6, 1e-6), torch.randn(2, 3, 6) * 2 + 0.5)
    seed('rms_norm_default_eps')
    layer_case('rms_norm_default_eps', RMSNormRef(6), torch.randn(4, 6) * 1e-3)
    seed('rotary')
    layer_case('rotary', RotaryRef(), torch.randn(2, 3, 5, 8))
    seed('rotary_rows')  # positions per row, as generation with left padding gives them
    layer_case('rotary_rows', RotaryRef(positions=torch.tensor([[0, 1, 2, 3], [1, 1, 0, 1]]) + torch.tensor([[20], [0]])),
               torch.randn(2, 2, 4, 6))
    seed('rotary_scaled')
    layer_case('rotary_scaled', RotaryRef(theta=500000.0, scale=2.0, positions=torch.arange(5) + 37), torch.randn(3, 5, 4))
    for name, mod, shape in [('group_norm', nn.GroupNorm(3, 6), (2, 6, 4, 5)), ('group_norm_3d', nn.GroupNorm(2, 4), (3, 4, 7)),
                             ('group_norm_1group', nn.GroupNorm(1, 4), (2, 4, 3, 3)),
                             ('instance_norm2d', nn.InstanceNorm2d(3), (2, 3, 4, 5)),
                             ('instance_norm2d_affine', nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5)),
                             ('instance_norm1d_affine', nn.InstanceNorm1d(4, affine=True), (3, 4, 6)),
                             ('instance_norm2d_unbatched', nn.InstanceNorm2d(3, affine=True), (3, 4, 5))]:
        seed(name)
        with torch.no_grad():  # not the trivial ones and zeros
            for p in mod.parameters():
                p.copy_(torch.randn(p.shape))
        layer_case(name, mod, torch.randn(shape) * 2 + 0.5)
    for name, mod, shape in [('conv_transpose2d', nn.ConvTranspose2d(3, 4, 3), (2, 3, 5, 4)),
                             ('conv_transpose2d_s2', nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), (2, 4, 4, 5)),
                             ('conv_transpose2d_g2', nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2, bias=False), (1, 4, 3, 3)),
                             ('conv_transpose2d_dil', nn.ConvTranspose2d(2, 3, 3, dilation=2, padding=1), (2, 2, 4, 4)),
                             ('conv_transpose2d_unbatched', nn.ConvTranspose2d(3, 2, 3, stride=2), (3, 4, 4)),
                             ('conv_transpose1d', nn.ConvTranspose1d(3, 5, 4, stride=2, padding=1), (2, 3, 7)),
                             ('conv_transpose1d_op', nn.ConvTranspose1d(2, 2, 3, stride=3, output_padding=2), (3, 2, 5))]:
        seed(name)
        layer_case(name, mod, torch.randn(shape))
    for name, mod, shape in [('upsample_nearest2x', nn.Upsample(scale_factor=2), (2, 3, 3, 4)),
                             ('upsample_nearest_size', nn.Upsample(size=(5, 7)), (1, 2, 3, 4)),
                             ('upsample_nearest_down', nn.Upsample(size=(2, 3)), (1, 2, 5, 7)),
                             ('upsample_bilinear2x', nn.Upsample(scale_factor=2, mode='bilinear'), (2, 2, 3, 4)),
                             ('upsample_bilinear_size', nn.Upsample(size=(5, 7), mode='bilinear'), (1, 3, 3, 4)),
                             ('upsample_bilinear_ac', nn.Upsample(size=(5, 7), mode='bilinear', align_corners=True), (1, 2, 3, 4)),
                             ('upsample_bilinear_down', nn.Upsample(size=(2, 3), mode='bilinear'), (1, 2, 5, 7)),
                             ('upsample_bilinear_15', nn.Upsample(scale_factor=1.5, mode='bilinear'), (1, 2, 4, 6)),
                             ('upsample_linear', nn.Upsample(scale_factor=3, mode='linear'), (2, 3, 5)),
                             ('upsample_linear_ac', nn.Upsample(size=9, mode='linear', align_corners=True), (2, 3, 5)),
                             ('upsample_nearest1d', nn.Upsample(size=8), (2, 3, 5))]:
        seed(name)
        layer_case(name, mod, torch.randn(shape))
    seed('sequential')
    seq = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3),
                        nn.LogSoftmax(dim=1))
    layer_case('sequential', seq, torch.randn(5, 6))


KINKS = [0.0, -3.0, 3.0, 25.0, -25.0, 0.0]


def with_kinks(shape, kinks=KINKS, scale=3.0):
    """N(0, scale^2) values with the activations' kinks written in at fixed places: 0, -3 and 3
    (hardswish, hardsigmoid), 25 and -25 (past softplus's threshold and mish's exp range)."""
    x = torch.randn(shape) * scale
    x.view(-1)[:len(kinks)] = torch.tensor(kinks)
    return x


def activations():
    """The activation modules of issue 15 (kinks included, the gradients there as torch's), PReLU
    with its parameter, Identity and the containers' state-dict names."""
    cases = [('leaky_relu', nn.LeakyReLU(), (4, 6)), ('leaky_relu_02', nn.LeakyReLU(0.2), (4, 6)),
             ('elu', nn.ELU(), (4, 6)), ('elu_07', nn.ELU(alpha=0.7), (4, 6)),
             ('softplus', nn.Softplus(), (4, 6)), ('softplus_b2_t3', nn.Softplus(beta=2.0, threshold=3.0), (4, 6)),
             ('mish', nn.Mish(), (4, 6)), ('hardswish', nn.Hardswish(), (4, 6)),
             ('hardsigmoid', nn.Hardsigmoid(), (4, 6)), ('identity', nn.Identity(), (4, 6)),
             ('prelu', nn.PReLU(), (4, 6)), ('prelu_3', nn.PReLU(3, init=0.1), (2, 3, 4, 5)),
             ('prelu_3_2d', nn.PReLU(3), (5, 3))]
    # torch 1.13's CPU hardswish gradient at exactly 3 is 3/2 in its scalar loop (and on CUDA) but 1 in
    # its vectorised one, which runs on a tensor's first multiple of 16 elements; nabla's is 3/2, so
    # the large cases leave 3 out and the _kinks cases below (6 elements: all in the scalar loop) check it
    no3 = [k for k in KINKS if k != 3.0]
    for name, mod, shape in cases:
        seed(name)
        if isinstance(mod, nn.PReLU):
            with torch.no_grad():  # a slope per channel, not all the same
                mod.weight.copy_(torch.rand_like(mod.weight) * 0.5)
        layer_case(name, mod, with_kinks(shape, no3 if isinstance(mod, nn.Hardswish) else KINKS))
    # the same on a transposed (non-contiguous) input: nabla gets x as the transpose of a contiguous tensor
    for name, mod in [('hardswish_t', nn.Hardswish()), ('elu_t', nn.ELU(0.5)), ('softplus_t', nn.Softplus(2.0, 4.0))]:
        seed(name)
        layer_case(name, mod, with_kinks((6, 4), no3 if isinstance(mod, nn.Hardswish) else KINKS).t())
    # each kink alone, at fixed values (softplus's where beta x equals the threshold)
    for name, mod, pts in [('leaky_relu', nn.LeakyReLU(0.2), [0.0, -1.0, 1.0]), ('elu', nn.ELU(0.7), [0.0, -1.0, 1.0]),
                           ('prelu', nn.PReLU(init=0.3), [0.0, -1.0, 1.0]),
                           ('softplus', nn.Softplus(2.0, 3.0), [1.5, 1.5000001, 1.4999999, -40.0, 40.0]),
                           ('mish', nn.Mish(), [0.0, 25.0, -25.0, 100.0]),
                           ('hardswish', nn.Hardswish(), [-3.0, 3.0, 0.0, -3.0000002, 3.0000002]),
                           ('hardsigmoid', nn.Hardsigmoid(), [-3.0, 3.0, 0.0, -2.9999998, 2.9999998])]:
        seed(name + '_kinks')
        layer_case(name + '_kinks', mod, torch.tensor(pts))
    seed('sequential_act')
    seq = nn.Sequential(nn.Linear(5, 6), nn.PReLU(6), nn.Linear(6, 6), nn.Hardswish(), nn.Identity(), nn.Linear(6, 4),
                        nn.Mish(), nn.Linear(4, 3), nn.Softplus(), nn.ELU(), nn.LeakyReLU(0.05), nn.Hardsigmoid())
    layer_case('sequential_act', seq, torch.randn(7, 5))
    # containers without a forward: their state-dict names
    lst = nn.ModuleList([nn.Linear(3, 4), nn.ReLU(), nn.PReLU(4), nn.ModuleList([nn.Linear(4, 2)])])
    put_words('state.module_list', list(lst.state_dict()))
    d = nn.ModuleDict({'encoder': nn.Linear(3, 4), 'act': nn.PReLU(), 'blocks': nn.ModuleList([nn.Linear(4, 4)]),
                       'head': nn.Sequential(nn.Identity(), nn.Linear(4, 2))})
    put_words('state.module_dict', list(d.state_dict()))


# ---------------------------------------------------------------- losses
def loss_case(name, fn, x, target, extra=None):
    """fn(x, target) -> loss; writes x, target, extra tensors, the loss, a random upstream
    gradient of the loss's shape and x's gradient."""
    pre = 'loss.' + name
    x = x.clone().requires_grad_(True)
    put(f'{pre}.x', x)
    put(f'{pre}.target', target)
    for k, v in (extra or {}).items():
        put(f'{pre}.{k}', v)
    y = fn(x, target)
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad((y * g).sum(), [x])
    put(f'{pre}.g', g)
    put(f'{pre}.y', y)
    put(f'{pre}.gx', gx)


def losses():
    for red in ('mean', 'sum', 'none'):
        seed('ce_' + red)
        loss_case('ce_' + red, lambda x, t, r=red: F.cross_entropy(x, t, reduction=r), torch.randn(6, 5),
                  torch.randint(0, 5, (6,)))
    seed('ce_nd')
    loss_case('ce_nd', lambda x, t: F.cross_entropy(x, t), torch.randn(3, 4, 5), torch.randint(0, 4, (3, 5)))
    seed('ce_nd_none')
    loss_case('ce_nd_none', lambda x, t: F.cross_entropy(x, t, reduction='none'), torch.randn(2, 4, 3, 2),
              torch.randint(0, 4, (2, 3, 2)))
    seed('ce_smooth')
    loss_case('ce_smooth', lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2), torch.randn(6, 5),
              torch.randint(0, 5, (6,)))
    seed('ce_ignore')
    t = torch.randint(0, 5, (8,))
    t[1] = t[5] = 2
    loss_case('ce_ignore', lambda x, t: F.cross_entropy(x, t, ignore_index=2), torch.randn(8, 5), t)
    seed('ce_weight')
    w = torch.rand(5) + 0.5
    for red in ('mean', 'sum', 'none'):
        loss_case('ce_weight_' + red, lambda x, t, r=red: F.cross_entropy(x, t, weight=w, reduction=r),
                  torch.randn(7, 5), torch.randint(0, 5, (7,)), {'weight': w})
    seed('ce_all')
    w = torch.rand(5) + 0.5
    t = torch.randint(0, 5, (3, 4))
    t[0, 1] = t[2, 3] = 4
    for red in ('mean', 'sum', 'none'):
        loss_case('ce_all_' + red,
                  lambda x, t, r=red: F.cross_entropy(x, t, weight=w, ignore_index=4, label_smoothing=0.1,
                                                      reduction=r),
                  torch.randn(3, 5, 4), t, {'weight': w})
    seed('nll')
    w = torch.rand(5) + 0.5
    t = torch.randint(0, 5, (7,))
    t[3] = 1
    for red in ('mean', 'sum', 'none'):
        loss_case('nll_' + red, lambda x, t, r=red: F.nll_loss(x, t, reduction=r),
                  F.log_softmax(torch.randn(7, 5), 1), t)
        loss_case('nll_weight_ignore_' + red,
                  lambda x, t, r=red: F.nll_loss(x, t, weight=w, ignore_index=1, reduction=r),
                  F.log_softmax(torch.randn(7, 5), 1), t, {'weight': w})
    for red in ('mean', 'sum', 'none'):
        seed('reg_' + red)
        x, y = torch.randn(4, 6), torch.randn(4, 6)
        y[0, :3] = x[0, :3] + torch.tensor([0.3, -0.7, 0.2])  # some |x - y| below beta 0.5 and 1
        loss_case('mse_' + red, lambda a, b, r=red: F.mse_loss(a, b, reduction=r), x, y)
        loss_case('l1_' + red, lambda a, b, r=red: F.l1_loss(a, b, reduction=r), x, y)
        loss_case('smooth_l1_' + red, lambda a, b, r=red: F.smooth_l1_loss(a, b, reduction=r), x, y)
        loss_case('smooth_l1_b05_' + red, lambda a, b, r=red: F.smooth_l1_loss(a, b, reduction=r, beta=0.5), x, y)
        seed('bce_' + red)
        x, y = torch.randn(4, 6) * 3, torch.rand(4, 6)
        x[0, 0], x[0, 1] = 40.0, -40.0  # large logits: the stable form
        pw = torch.rand(6) * 3 + 0.2
        loss_case('bce_' + red, lambda a, b, r=red: F.binary_cross_entropy_with_logits(a, b, reduction=r), x, y)
        loss_case('bce_pw_' + red,
                  lambda a, b, r=red: F.binary_cross_entropy_with_logits(a, b, reduction=r, pos_weight=pw), x, y,
                  {'pos_weight': pw})
    # non-finite and zero logits against targets 0, 1 and 0.5: what torch's stable form gives
    # (NaN where it takes 0 * inf), and the gradient sigmoid(x) - y at x = 0
    inf, nan = float('inf'), float('nan')
    x = torch.tensor([[-inf, inf, nan, -inf, inf, nan], [-inf, inf, nan, 0.0, 0.0, 0.0]])
    y = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 1.0, 0.0, 0.5]])
    seed('bce_nonfinite')
    loss_case('bce_nonfinite', lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction='none'), x, y)
    pw = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25, 1.5])
    loss_case('bce_pw_nonfinite',
              lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction='none', pos_weight=pw), x, y,
              {'pos_weight': pw})
    seed('bce_zero')
    loss_case('bce_zero_mean', lambda a, b: F.binary_cross_entropy_with_logits(a, b), torch.zeros(2, 3),
              torch.tensor([[1.0, 0.0, 0.5], [0.25, 1.0, 0.0]]))


LOSS_FNS = {
    'bce': lambda x, target, weight=None, **kw: F.binary_cross_entropy(x, target, weight=weight, **kw),
    'kl': lambda x, target, **kw: F.kl_div(x, target, **kw),
    'huber': lambda x, target, **kw: F.huber_loss(x, target, **kw),
    'margin_ranking': lambda x1, x2, target, **kw: F.margin_ranking_loss(x1, x2, target, **kw),
    'triplet': lambda a, pos, neg, **kw: F.triplet_margin_loss(a, pos, neg, **kw),
    'cosine': lambda x1, x2, target, **kw: F.cosine_embedding_loss(x1, x2, target, **kw),
}


def loss_multi(name, fn, inputs, consts=None, **opts):
    """LOSS_FNS[fn](**inputs, **consts, **opts), with the gradient of every input (issue 15's
    losses, whose second and third inputs may be learned too): writes the function and its
    options (S .opts, words key=value), the input names (S .inputs), each input and constant,
    the loss, a random upstream gradient and each input's gradient (.g<name>)."""
    pre = 'loss.' + name
    ins = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    consts = consts or {}
    put_words(f'{pre}.opts', ['fn=' + fn] + [f'{k}={int(v) if isinstance(v, bool) else v}' for k, v in opts.items()])
    put_words(f'{pre}.inputs', list(ins))
    for k, v in list(ins.items()) + list(consts.items()):
        put(f'{pre}.{k}', v)
    y = LOSS_FNS[fn](**ins, **consts, **opts)
    g = torch.randn_like(y)
    grads = torch.autograd.grad((y * g).sum(), list(ins.values()))
    put(f'{pre}.g', g)
    put(f'{pre}.y', y)
    for k, gr in zip(ins, grads):
        put(f'{pre}.g{k}', gr)


def losses_more():
    """BCE on probabilities, KL divergence, Huber, margin ranking, triplet margin and cosine
    embedding at each reduction, their kinks, unbatched forms and non-contiguous inputs."""
    warnings.filterwarnings('ignore', message="reduction: 'mean' divides")  # kl_div's mean, as asked
    for red in ('mean', 'sum', 'none'):
        seed('bce_prob_' + red)
        p = torch.rand(4, 6) * 0.98 + 0.01
        p[0, :4] = torch.tensor([1e-4, 1 - 1e-4, 0.5, 0.999])  # near the ends, inside
        y = torch.rand(4, 6)
        y[1, :3] = torch.tensor([0.0, 1.0, 0.5])
        bce = {'x': p, 'target': y}
        loss_multi('bce_prob_' + red, 'bce', bce, reduction=red)
        loss_multi('bce_prob_w_' + red, 'bce', bce, {'weight': torch.rand(6) + 0.5}, reduction=red)
        loss_multi('bce_prob_wcol_' + red, 'bce', bce, {'weight': torch.rand(4, 1) + 0.5}, reduction=red)
    for red in ('mean', 'sum', 'none', 'batchmean'):
        seed('kl_' + red)
        x = F.log_softmax(torch.randn(4, 5), 1)
        t = F.softmax(torch.randn(4, 5), 1)
        loss_multi('kl_' + red, 'kl', {'x': x, 'target': t}, reduction=red)
        loss_multi('kl_log_' + red, 'kl', {'x': x, 'target': F.log_softmax(torch.randn(4, 5), 1)}, reduction=red,
                   log_target=True)
        # targets with zeros: 0 log 0 = 0 (torch's target gradient there is NaN: only the input's is compared)
        tz = t.clone()
        tz[0, 1] = tz[2, 3] = 0.0
        loss_multi('kl_zero_' + red, 'kl', {'x': x}, {'target': tz}, reduction=red)
        loss_multi('kl_3d_' + red, 'kl', {'x': F.log_softmax(torch.randn(2, 3, 4), -1),
                                          'target': F.softmax(torch.randn(2, 3, 4), -1)}, reduction=red)
    for red in ('mean', 'sum', 'none'):
        seed('huber_' + red)
        x, y = torch.randn(4, 6) * 2, torch.randn(4, 6)
        y[0, :3] = x[0, :3] + torch.tensor([0.3, -0.7, 0.2])
        loss_multi('huber_' + red, 'huber', {'x': x, 'target': y}, reduction=red)
        loss_multi('huber_d05_' + red, 'huber', {'x': x, 'target': y}, reduction=red, delta=0.5)
        seed('margin_ranking_' + red)
        x1, x2 = torch.randn(8), torch.randn(8)
        y = torch.where(torch.rand(8) < 0.5, -1.0, 1.0)
        x2[0] = x1[0]  # with margin 0: exactly at the kink, where torch's clamp_min passes the gradient
        x1[1], x2[1], y[1] = 0.5, 0.25, 1.0  # with margin 0.25: at the kink too
        mr = {'x1': x1, 'x2': x2}
        loss_multi('margin_ranking_' + red, 'margin_ranking', mr, {'target': y}, reduction=red)
        loss_multi('margin_ranking_m025_' + red, 'margin_ranking', mr, {'target': y}, reduction=red, margin=0.25)
        seed('triplet_' + red)
        trip = {'a': torch.randn(5, 8), 'pos': torch.randn(5, 8), 'neg': torch.randn(5, 8)}
        for tag, kw in (('', {}), ('_p1', {'p': 1.0}), ('_p3', {'p': 3.0}), ('_pinf', {'p': float('inf')}),
                        ('_swap', {'swap': True}), ('_m05', {'margin': 0.5, 'eps': 1e-3})):
            loss_multi('triplet' + tag + '_' + red, 'triplet', trip, reduction=red, **kw)
        seed('cosine_' + red)
        cos = {'x1': torch.randn(6, 5), 'x2': torch.randn(6, 5)}
        y = {'target': torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])}
        loss_multi('cosine_' + red, 'cosine', cos, y, reduction=red)
        loss_multi('cosine_m02_' + red, 'cosine', cos, y, reduction=red, margin=0.2)
    seed('triplet_1d')
    loss_multi('triplet_1d', 'triplet', {'a': torch.randn(8), 'pos': torch.randn(8), 'neg': torch.randn(8)}, swap=True)
    seed('cosine_1d')
    for tag, yv in (('pos', 1.0), ('neg', -1.0)):
        loss_multi('cosine_1d_' + tag, 'cosine', {'x1': torch.randn(5), 'x2': torch.randn(5)},
                   {'target': torch.tensor(yv)}, margin=-0.5)
    seed('cosine_int_target')  # i64 targets, and a 0 target (no loss)
    loss_multi('cosine_int_target', 'cosine', {'x1': torch.randn(5, 3), 'x2': torch.randn(5, 3)},
               {'target': torch.tensor([1, -1, -1, 0, 1])})
    # non-contiguous inputs: nabla gets each input as the transpose of a contiguous tensor
    seed('noncontig')
    loss_multi('bce_prob_t', 'bce', {'x': (torch.rand(6, 4) * 0.9 + 0.05).t(), 'target': torch.rand(6, 4).t()})
    loss_multi('kl_t', 'kl', {'x': F.log_softmax(torch.randn(5, 4), 0).t(), 'target': F.softmax(torch.randn(5, 4), 0).t()},
               reduction='batchmean')
    loss_multi('huber_t', 'huber', {'x': torch.randn(6, 4).t(), 'target': torch.randn(6, 4).t()}, delta=0.7)
    loss_multi('triplet_t', 'triplet', {'a': torch.randn(8, 5).t(), 'pos': torch.randn(8, 5).t(),
                                        'neg': torch.randn(8, 5).t()})
    loss_multi('cosine_t', 'cosine', {'x1': torch.randn(5, 6).t(), 'x2': torch.randn(5, 6).t()},
               {'target': torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])})


def ctc_case(name, labels, il, classes, steps=None, blank=0, reduction='mean', zero_infinity=False, concat=False,
             unbatched=False, from_logits=True, batch_first=False, int32=False, dtype=torch.float32):
    """F.ctc_loss over N = len(labels) sequences (labels: one list per sequence, il: their input
    lengths) of `steps` steps (max(il) when None), written as loss_multi writes a case: x is the
    logits, put through log_softmax on both sides (from_logits), or the log-probabilities
    themselves. There torch's gradient is not the loss's own: its kernel adds exp(log_probs) over
    each sequence's first il steps (what a log_softmax in front cancels, as every step's gradient
    sums to -1 per unit of loss); the reference .gx takes that term out, so it is d loss / d x."""
    pre = 'loss.' + name
    seed(name)
    n, t = len(labels), steps or max(il)
    s = max([len(lab) for lab in labels] + [1])
    tl = torch.tensor([len(lab) for lab in labels])
    if concat or unbatched:
        targets = torch.tensor([v for lab in labels for v in lab], dtype=torch.int64)
    else:  # padded with labels drawn at random (never read): only the first target_lengths count
        targets = torch.randint(0, classes, (n, s))
        for b, lab in enumerate(labels):
            targets[b, :len(lab)] = torch.tensor(lab, dtype=torch.int64)
    ilt = torch.tensor(il)
    logits = torch.randn(n, t, classes, dtype=dtype) * 2
    if unbatched:
        logits, ilt, tl = logits[0], ilt[0], tl[0]
    else:
        logits = logits.transpose(0, 1) if batch_first else logits.transpose(0, 1).contiguous()
    x = (logits if from_logits else F.log_softmax(logits, -1)).detach().requires_grad_(True)
    lp = F.log_softmax(x, -1) if from_logits else x
    nll = F.ctc_loss(lp, targets, ilt, tl, blank=blank, reduction='none', zero_infinity=zero_infinity)
    y = nll if reduction == 'none' else nll.sum() if reduction == 'sum' else (nll / tl.clamp_min(1).to(dtype)).mean()
    g = torch.randn_like(y)
    gnll, gx = torch.autograd.grad((y * g).sum(), [nll, x])
    if not from_logits:  # take out torch's exp(log_probs) * d loss / d nll over the steps each sequence has
        gb = gnll.reshape(-1)
        steps_in = torch.arange(x.shape[0])[:, None] < ilt.reshape(-1)[None, :]
        with torch.no_grad():  # zero_infinity's sequences have no gradient in torch either
            raw = F.ctc_loss(lp, targets, ilt, tl, blank=blank, reduction='none')
        counted = torch.isfinite(raw.reshape(-1)) | (not zero_infinity)
        w = (steps_in & counted[None, :]).to(dtype) * gb[None, :]
        gx = gx - torch.exp(x.detach()) * (w[:, :, None] if x.dim() == 3 else w[:, 0, None])
    put_words(f'{pre}.opts', ['fn=ctc', f'reduction={reduction}', f'blank={blank}', f'zero_infinity={int(zero_infinity)}',
                              f'from_logits={int(from_logits)}', f'batch_first={int(batch_first)}', f'int32={int(int32)}'])
    put_words(f'{pre}.inputs', ['x'])
    put(f'{pre}.x', x.transpose(0, 1) if batch_first else x)  # batch first: nabla transposes it back (a strided view)
    put(f'{pre}.target', targets)
    put(f'{pre}.input_lengths', ilt)
    put(f'{pre}.target_lengths', tl)
    put(f'{pre}.g', g)
    put(f'{pre}.y', y)
    put(f'{pre}.gx', gx.transpose(0, 1) if batch_first else gx)


def ctc_losses():
    """The CTC loss: padded and concatenated targets, unbatched, each reduction, impossible
    alignments with and without zero_infinity, repeated labels (a blank between them), a blank
    other than 0, f64, log-probabilities given directly, a batch-first (strided) input, long
    sequences."""
    padded = [[1, 1, 4, 2, 5], [3, 2, 1], [], [5, 4, 4, 1]]  # a repeat, an empty target
    for red in ('mean', 'sum', 'none'):
        ctc_case('ctc_padded_' + red, padded, [12, 10, 7, 11], 6, steps=12, reduction=red)
        ctc_case('ctc_concat_' + red, [[2, 3], [1, 1, 1], [4, 2, 3, 1]], [9, 7, 10], 5, concat=True, int32=True, reduction=red)
        ctc_case('ctc_unbatched_' + red, [[3, 1, 3]], [8], 5, unbatched=True, reduction=red)
        # the second sequence needs 5 steps for its 3 labels and the blanks between them, and has 4;
        # the third is too short for its target at all
        ctc_case('ctc_zero_inf_' + red, [[1, 2], [2, 2, 2], [1, 3, 4]], [6, 4, 2], 5, zero_infinity=True, reduction=red)
        ctc_case('ctc_f64_' + red, padded, [12, 10, 7, 11], 6, steps=13, reduction=red, dtype=torch.float64)
        ctc_case('ctc_leaf_' + red, padded, [12, 10, 7, 11], 6, steps=12, reduction=red, from_logits=False)
    # without zero_infinity an impossible sequence's loss is inf and its gradient NaN, as torch's
    ctc_case('ctc_inf_sum', [[1, 2], [2, 2, 2], [1, 3, 4]], [6, 4, 2], 5, reduction='sum')
    ctc_case('ctc_inf_none', [[1, 2], [2, 2, 2], [1, 3, 4]], [6, 4, 2], 5, reduction='none')
    ctc_case('ctc_repeats', [[1, 1, 1, 2, 2], [3, 3]], [8, 5], 4, reduction='sum')  # 8 = 5 labels + 3 blanks: one path
    ctc_case('ctc_blank3', [[0, 4, 4, 1], [2, 0], [1]], [9, 6, 3], 5, blank=3, concat=True)
    ctc_case('ctc_batch_first', padded, [12, 10, 7, 11], 6, steps=12, batch_first=True, reduction='sum')
    ctc_case('ctc_long', [[(7 * k) % 19 + 1 for k in range(15)], [(3 * k) % 19 + 1 for k in range(22)],
                          [(5 * k) % 19 + 1 for k in range(9)]], [50, 47, 31], 20, reduction='mean')
    ctc_case('ctc_leaf_f64', [[1, 2, 2], [3], [2, 3, 1, 1]], [7, 5, 7], 4, reduction='sum', from_logits=False,
             dtype=torch.float64)
    ctc_case('ctc_leaf_zero_inf', [[1, 2], [2, 2, 2], [1, 3, 4]], [6, 4, 2], 5, zero_infinity=True, reduction='sum',
             from_logits=False)


# ---------------------------------------------------------------- optimizers and schedules
STEPS = 100


def opt_data():
    seed('opt_data')
    p0, p1 = torch.randn(7, 5), torch.randn(5)
    grads = [(torch.randn(7, 5) * (1 + 0.5 * math.sin(k)), torch.randn(5) * 0.5) for k in range(STEPS)]
    put('opt.init.p0', p0)
    put('opt.init.p1', p1)
    for k, (g0, g1) in enumerate(grads):
        put(f'opt.grad.{k}.0', g0)
        put(f'opt.grad.{k}.1', g1)
    return p0, p1, grads


def put_state(name, opt):
    sd = opt.state_dict()['state']
    words = []
    for idx in sorted(sd):
        for key, v in sd[idx].items():
            if v is None:
                continue
            words.append(f'{idx}.{key}')
            put(f'{name}.state.{idx}.{key}', torch.as_tensor(v))
    put_words(f'{name}.state_names', words)


def run_opt(name, make_opt, data, make_sched=None, set_lr_at=None):
    """100 steps of make_opt over the shared parameters and gradients; writes the final
    parameters, the state and (with a schedule) the lr of group 0 after construction and after
    each step."""
    p0, p1, grads = data
    params = [p0.clone().requires_grad_(True), p1.clone().requires_grad_(True)]
    opt = make_opt(params)
    sched = make_sched(opt) if make_sched else None
    lrs = [opt.param_groups[0]['lr']]
    for k in range(STEPS):
        if set_lr_at is not None and k == set_lr_at[0]:
            for g in opt.param_groups:
                g['lr'] = set_lr_at[1]
        for p, g in zip(params, grads[k]):
            p.grad = g.clone()
        opt.step()
        if sched:
            sched.step()
        lrs.append(opt.param_groups[0]['lr'])
    put(f'{name}.p0', params[0])
    put(f'{name}.p1', params[1])
    put_state(name, opt)
    if sched:
        put(f'{name}.lr', torch.tensor(lrs, dtype=torch.float64))


OPTIMIZERS = {
    'sgd_plain': lambda p: torch.optim.SGD(p, lr=0.1),
    'sgd_momentum': lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    'sgd_dampening': lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.3),
    'sgd_nesterov': lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    'sgd_wd': lambda p: torch.optim.SGD(p, lr=0.05, weight_decay=0.1),
    'sgd_momentum_wd': lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5, weight_decay=0.01),
    'adam_default': lambda p: torch.optim.Adam(p),
    'adam_wd': lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1),
    'adam_amsgrad': lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True),
    'adam_betas': lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.5, 0.9), eps=1e-6),
    'adamw_default': lambda p: torch.optim.AdamW(p),
    'adamw_lr': lambda p: torch.optim.AdamW(p, lr=1e-2),
    'adamw_amsgrad': lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.05, amsgrad=True),
    'rmsprop_default': lambda p: torch.optim.RMSprop(p),
    'rmsprop_momentum': lambda p: torch.optim.RMSprop(p, lr=1e-3, momentum=0.9),
    'rmsprop_centered': lambda p: torch.optim.RMSprop(p, lr=1e-3, centered=True),
    'rmsprop_all': lambda p: torch.optim.RMSprop(p, lr=1e-3, alpha=0.9, momentum=0.5, centered=True,
                                                 weight_decay=0.1),
    'rmsprop_wd': lambda p: torch.optim.RMSprop(p, weight_decay=0.1),
    'adagrad_default': lambda p: torch.optim.Adagrad(p),
    'adagrad_lr_decay': lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
    'adagrad_wd': lambda p: torch.optim.Adagrad(p, lr=0.1, weight_decay=0.1),
    'adagrad_init_acc': lambda p: torch.optim.Adagrad(p, lr=0.1, initial_accumulator_value=0.5),
    # parameter groups: p0 and p1 with their own lr and weight decay
    'groups_sgd': lambda p: torch.optim.SGD([{'params': [p[0]]}, {'params': [p[1]], 'lr': 0.01, 'weight_decay': 0.05}],
                                            lr=0.05, momentum=0.9),
    'groups_adam': lambda p: torch.optim.Adam([{'params': [p[0]], 'weight_decay': 0.1}, {'params': [p[1]], 'lr': 0.05}],
                                              lr=1e-2),
}

SCHEDULES = {
    'step': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
             lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=30, gamma=0.5)),
    'multistep': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                  lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[20, 50, 80], gamma=0.3)),
    'exponential': (lambda p: torch.optim.Adam(p, lr=1e-2),
                    lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.97)),
    'cosine': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
               lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=100, eta_min=1e-3)),
    'cosine_restart': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                       lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=40)),
    'linear': (lambda p: torch.optim.AdamW(p, lr=1e-2),
               lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=20)),
    'linear_end': (lambda p: torch.optim.SGD(p, lr=0.1),
                   lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, end_factor=0.1, total_iters=60)),
    'onecycle_sgd': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                     lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=100)),
    'onecycle_adam': (lambda p: torch.optim.Adam(p, lr=1e-2),
                      lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=100)),
    'onecycle_linear': (lambda p: torch.optim.AdamW(p, lr=1e-2),
                        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=2e-2, total_steps=120, pct_start=0.25,
                                                                      div_factor=10, final_div_factor=100,
                                                                      anneal_strategy='linear', base_momentum=0.8,
                                                                      max_momentum=0.9)),
    'onecycle_no_momentum': (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                             lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=100,
                                                                           cycle_momentum=False)),
}


def optimizers():
    data = opt_data()
    for name, make in OPTIMIZERS.items():
        run_opt('opt.' + name, make, data)
    run_opt('opt.set_lr', lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), data, set_lr_at=(50, 0.01))
    for name, (make, make_sched) in SCHEDULES.items():
        run_opt('sched.' + name, make, data, make_sched)


def clipping():
    for name, max_norm in (('clip', 1.0), ('noclip', 100.0)):
        seed(name)
        a, b, c = torch.randn(4, 3), torch.randn(3), torch.randn(2)
        ga, gb = torch.randn(4, 3), torch.randn(3)
        put(f'clip.{name}.ga', ga)
        put(f'clip.{name}.gb', gb)
        params = [a.requires_grad_(True), b.requires_grad_(True), c.requires_grad_(True)]
        a.grad, b.grad = ga.clone(), gb.clone()  # c has no gradient: skipped
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        put_scalar(f'clip.{name}.max_norm', max_norm)
        put_scalar(f'clip.{name}.norm', norm)
        put(f'clip.{name}.ga_clipped', a.grad)
        put(f'clip.{name}.gb_clipped', b.grad)


# ---------------------------------------------------------------- attention
def causal_mask(tq, tk):
    """The additive causal mask [tq, tk] that nabla documents: key j is visible from query i when
    j <= i + (tk - tq) (aligned at the end, so the last query sees every key); -inf elsewhere."""
    i = torch.arange(tq)[:, None] + (tk - tq)
    j = torch.arange(tk)[None, :]
    return torch.zeros(tq, tk).masked_fill(j > i, float('-inf'))


def sdpa_ref(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v, written out (torch 1.13 has no F.scaled_dot_product_attention)."""
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s + causal_mask(q.shape[-2], k.shape[-2])
    if mask is not None:
        s = s + mask
    return torch.softmax(s, -1) @ v


def random_mask(shape, p_inf=0.2):
    """A float mask of N(0, 1) values with some -inf, never a whole row of them."""
    m = torch.randn(shape)
    m = m.masked_fill(torch.rand(shape) < p_inf, float('-inf'))
    m[..., 0] = torch.randn(m[..., 0].shape)  # the first key of every row stays visible
    return m


def sdpa_case(name, b, h, tq, tk, d, dv, causal=False, mask_shape=None, scale=None):
    """nb_scaled_dot_product_attention: q [b, h, tq, d], k [b, h, tk, d], v [b, h, tk, dv], an
    optional additive mask (its gradient too); writes the inputs, y, g and the gradients."""
    pre = 'attn.' + name
    seed(name)
    q = torch.randn(b, h, tq, d).requires_grad_()
    k = torch.randn(b, h, tk, d).requires_grad_()
    v = torch.randn(b, h, tk, dv).requires_grad_()
    ins = [q, k, v]
    mask = None
    if mask_shape is not None:
        mask = random_mask(mask_shape).requires_grad_()
        ins.append(mask)
    y = sdpa_ref(q, k, v, mask, causal, scale)
    g = torch.randn_like(y)
    grads = torch.autograd.grad((y * g).sum(), ins)
    for nm, t in zip(('q', 'k', 'v', 'mask'), ins):
        put(f'{pre}.{nm}', t)
    put(f'{pre}.y', y)
    put(f'{pre}.g', g)
    for nm, gr in zip(('q', 'k', 'v', 'mask'), grads):
        # the mask's gradient is 0 where the mask is -inf (the weight there is 0)
        put(f'{pre}.g{nm}', gr)


class SelfAttention(nn.MultiheadAttention):
    """torch.nn.MultiheadAttention (batch first) as a module of one input x, as nabla's
    nb_forward(mha, x): self-attention, causal or not, the same parameter names."""

    def __init__(self, embed, heads, causal=False, bias=True):
        super().__init__(embed, heads, bias=bias, batch_first=True)
        self.causal = causal

    def forward(self, x):
        t = x.shape[1]
        mask = causal_mask(t, t) if self.causal else None
        return super().forward(x, x, x, attn_mask=mask, need_weights=False)[0]


def randomize_(module, std=0.3):
    """Draws every parameter from N(0, std) (torch's MHA starts its biases at zero, layer norm at
    ones and zeros: too trivial to check gradients against)."""
    with torch.no_grad():
        for _, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * std)
    return module


class Block(nn.Module):
    """A pre-norm GPT block as examples/char_gpt.c's: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads, causal=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """examples/char_gpt.c's model at a small size: token and position embeddings, blocks, final
    layer norm, head; idx [B, T] -> logits [B, T, vocab]."""

    def __init__(self, vocab, context, width, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln_f(self.blocks(x)))


def mha_cross_case(name, embed, heads, b, tq, tk, bias=True, mask_shape=None, kv_same=False):
    """nb_mha_forward(m, q, k, v, mask) against MultiheadAttention(q, k, v, attn_mask): writes
    the parameters, q, k, v (v is k when kv_same), the mask as nabla takes it ([tq, tk] or
    [b, heads, tq, tk]; torch takes the latter as [b * heads, tq, tk]), y, g and the gradients."""
    pre = 'attn.' + name
    seed(name)
    m = randomize_(nn.MultiheadAttention(embed, heads, bias=bias, batch_first=True))
    put_words(f'{pre}.params', [pname for pname, _ in m.named_parameters()])
    for pname, p in m.named_parameters():
        put(f'{pre}.param.{pname}', p)
    q = torch.randn(b, tq, embed).requires_grad_()
    k = torch.randn(b, tk, embed).requires_grad_()
    v = k if kv_same else torch.randn(b, tk, embed).requires_grad_()
    mask = random_mask(mask_shape) if mask_shape is not None else None
    tmask = mask.reshape(b * heads, tq, tk) if mask is not None and len(mask_shape) == 4 else mask
    y = m(q, k, v, attn_mask=tmask, need_weights=False)[0]
    g = torch.randn_like(y)
    ins = [q, k] + ([] if kv_same else [v])
    grads = torch.autograd.grad((y * g).sum(), ins + list(m.parameters()))
    put(f'{pre}.q', q)
    put(f'{pre}.k', k)
    put(f'{pre}.v', v)
    if mask is not None:
        put(f'{pre}.mask', mask)
    put(f'{pre}.y', y)
    put(f'{pre}.g', g)
    for nm, gr in zip(('q', 'k', 'v'), grads[:len(ins)]):
        put(f'{pre}.g{nm}', gr)
    for (pname, _), gr in zip(m.named_parameters(), grads[len(ins):]):
        put(f'{pre}.grad.{pname}', gr)


def attention():
    # functional: q/k/v [B, H, T, d]
    sdpa_case('sdpa_plain', 2, 3, 5, 5, 4, 4)
    sdpa_case('sdpa_causal', 2, 3, 5, 5, 4, 4, causal=True)
    sdpa_case('sdpa_mask', 2, 3, 5, 5, 4, 4, mask_shape=(5, 5))                    # broadcast [Tq, Tk]
    sdpa_case('sdpa_mask_full', 2, 3, 4, 6, 4, 3, mask_shape=(2, 3, 4, 6))         # per batch and head
    sdpa_case('sdpa_mask_head', 2, 3, 4, 6, 4, 3, mask_shape=(2, 1, 4, 6))         # per batch, broadcast heads
    sdpa_case('sdpa_cross', 2, 2, 3, 7, 4, 5)                                      # Tq != Tk, dv != d
    sdpa_case('sdpa_cross_causal', 2, 2, 3, 7, 4, 5, causal=True)                  # aligned at the end
    sdpa_case('sdpa_causal_mask', 1, 2, 6, 6, 8, 8, causal=True, mask_shape=(6, 6))
    sdpa_case('sdpa_scale', 2, 2, 4, 5, 4, 4, scale=0.7)
    sdpa_case('sdpa_3d', 3, 1, 4, 6, 5, 2, mask_shape=(4, 6))                      # also run as [B, T, d]
    # modules: self-attention through nb_forward (a layer case), cross-attention through nb_mha_forward
    for name, e, h, causal, bias in (('mha_self', 8, 2, False, True), ('mha_self_causal', 12, 3, True, True),
                                     ('mha_self_no_bias', 8, 4, False, False),
                                     ('mha_self_causal_no_bias', 12, 3, True, False),
                                     ('mha_self_one_head', 6, 1, True, True)):
        seed(name)
        layer_case(name, randomize_(SelfAttention(e, h, causal=causal, bias=bias)), torch.randn(2, 5, e))
    mha_cross_case('mha_cross', 8, 2, 2, 3, 6)
    mha_cross_case('mha_cross_mask', 12, 3, 2, 4, 5, mask_shape=(4, 5))
    mha_cross_case('mha_cross_mask_full', 8, 2, 2, 4, 5, mask_shape=(2, 2, 4, 5))
    mha_cross_case('mha_cross_kv_same', 8, 2, 2, 3, 6, kv_same=True)
    mha_cross_case('mha_cross_no_bias', 8, 4, 3, 2, 5, bias=False, mask_shape=(2, 5))
    mha_cross_case('mha_cross_same_len', 8, 2, 2, 5, 5, mask_shape=(5, 5))
    # a GPT block (layer norms, causal attention, MLP with gelu, residuals) and a tiny GPT
    seed('gpt_block')
    layer_case('gpt_block', randomize_(Block(16, 4), std=0.2), torch.randn(2, 7, 16))
    seed('gpt_tiny')
    layer_case('gpt_tiny', randomize_(TinyGPT(11, 8, 16, 4, 2), std=0.2), torch.randint(0, 11, (2, 8)))


# ---------------------------------------------------------------- transformer layers
# (name, kind, d_model, nhead, dim_feedforward, layers, norm_first, gelu, final_norm, self mask
# (0 none, 1 float, 2 bool), causal, key padding, memory mask (0, 1, 2), memory key padding);
# test_nn_torch.c's TRANSFORMERS holds the same list
TRANSFORMERS = [
    ('enc_layer', 'enc_layer', 8, 2, 16, 1, False, False, False, 0, False, False, 0, False),
    ('enc_layer_norm_first_gelu', 'enc_layer', 12, 3, 20, 1, True, True, False, 1, False, True, 0, False),
    ('enc_layer_causal_bool', 'enc_layer', 8, 4, 12, 1, False, False, False, 2, True, False, 0, False),
    ('dec_layer', 'dec_layer', 8, 2, 16, 1, False, False, False, 0, False, False, 0, False),
    ('dec_layer_masks', 'dec_layer', 12, 3, 24, 1, False, True, False, 1, True, True, 2, True),
    ('dec_layer_norm_first', 'dec_layer', 8, 2, 10, 1, True, False, False, 0, True, False, 1, False),
    ('encoder_stack', 'enc', 8, 2, 16, 3, False, False, True, 0, True, True, 0, False),
    ('decoder_stack_norm_first', 'dec', 8, 4, 12, 2, True, True, True, 2, False, True, 0, True),
]


def transformer_case(name, kind, d, h, ff, layers, norm_first, gelu, final_norm, mask, causal, kpm, mem_mask, mem_kpm):
    """A transformer layer or stack (batch first, no dropout, train mode: torch's slow path) on x
    [2, 5, d] (and memory [2, 6, d]): its parameter names and values, the inputs and masks as
    nabla takes them (bool masks as 0/1 i64; causal as a flag, torch given the float mask), the
    output, g and every gradient."""
    pre = 'tf.' + name
    seed(name)
    kw = dict(dim_feedforward=ff, dropout=0.0, activation='gelu' if gelu else 'relu', batch_first=True,
              norm_first=norm_first)
    dec = kind in ('dec_layer', 'dec')
    layer = nn.TransformerDecoderLayer(d, h, **kw) if dec else nn.TransformerEncoderLayer(d, h, **kw)
    norm = nn.LayerNorm(d) if final_norm else None
    if kind == 'enc':
        m = nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)
    elif kind == 'dec':
        m = nn.TransformerDecoder(layer, layers, norm=norm)
    else:
        m = layer
    randomize_(m, std=0.2)
    put_words(f'{pre}.params', [pname for pname, _ in m.named_parameters()])
    for pname, p in m.named_parameters():
        put(f'{pre}.param.{pname}', p)
    b, t, sl = 2, 5, 6
    x = torch.randn(b, t, d).requires_grad_()
    mem = torch.randn(b, sl, d).requires_grad_() if dec else None

    def make_mask(kind_, tq, tk, tag):
        if kind_ == 1:
            mk = random_mask((tq, tk))
        elif kind_ == 2:
            mk = torch.rand(tq, tk) < 0.3
            mk[:, 0] = False  # every query sees a key
        else:
            return None
        put(f'{pre}.{tag}', mk)
        return mk

    def padding(n, tag):
        pm = torch.zeros(b, n, dtype=torch.bool)
        pm[0, -2:] = True  # the first sample's last two keys are padding
        put(f'{pre}.{tag}', pm)
        return pm

    sm = make_mask(mask, t, t, 'mask')
    if causal:
        cm = torch.triu(torch.full((t, t), float('-inf')), 1)
        sm = cm if sm is None else (sm.float().masked_fill(sm, float('-inf')) if sm.dtype == torch.bool else sm) + cm
    kp = padding(t, 'kpm') if kpm else None
    mm = make_mask(mem_mask, t, sl, 'mem_mask') if dec else None
    mk = padding(sl, 'mem_kpm') if dec and mem_kpm else None
    if dec and kind == 'dec_layer':
        y = m(x, mem, tgt_mask=sm, memory_mask=mm, tgt_key_padding_mask=kp, memory_key_padding_mask=mk)
    elif dec:
        y = m(x, mem, tgt_mask=sm, memory_mask=mm, tgt_key_padding_mask=kp, memory_key_padding_mask=mk)
    elif kind == 'enc':
        y = m(x, mask=sm, src_key_padding_mask=kp)
    else:
        y = m(x, src_mask=sm, src_key_padding_mask=kp)
    g = torch.randn_like(y)
    ins = [x] + ([mem] if dec else [])
    grads = torch.autograd.grad((y * g).sum(), ins + list(m.parameters()))
    put(f'{pre}.x', x)
    if dec:
        put(f'{pre}.memory', mem)
    put(f'{pre}.y', y)
    put(f'{pre}.g', g)
    put(f'{pre}.gx', grads[0])
    if dec:
        put(f'{pre}.gmemory', grads[1])
    for (pname, _), gr in zip(m.named_parameters(), grads[len(ins):]):
        put(f'{pre}.grad.{pname}', gr)


def transformers():
    for c in TRANSFORMERS:
        transformer_case(*c)


# ---------------------------------------------------------------- module backward hooks
HOOK_CASES = ('record', 'scale', 'pre', 'nograd')


def hook_case(name):
    """A small MLP with full backward hooks on its first and middle Linear: the grad_input and
    grad_output each hook sees ('hook.<case>.gin.<k>', '.gout.<k>'; no gin when torch passes
    None), x's and the parameters' gradients. 'scale': the middle Linear's hook returns 2.5 *
    grad_input, which reaches the first Linear's parameters and x. 'pre': a backward pre-hook
    triples the middle Linear's grad_output. 'nograd': x needs no gradient."""
    pre = 'hook.' + name
    seed(pre)
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 3))
    x = torch.randn(4, 5).requires_grad_(name != 'nograd')
    put_words(f'{pre}.params', [pname for pname, _ in m.named_parameters()])
    for pname, p in m.named_parameters():
        put(f'{pre}.param.{pname}', p)
    put(f'{pre}.x', x)
    seen = {}

    def recorder(k):
        def hook(module, grad_input, grad_output):
            seen[k] = (grad_input[0], grad_output[0])
            if name == 'scale' and k == 2:
                return (grad_input[0] * 2.5,)
            return None
        return hook

    for k in (0, 2):
        m[k].register_full_backward_hook(recorder(k))
    if name == 'pre':
        # torch 1.13 has no register_full_backward_pre_hook: a hook on the Linear's output
        # changes the gradient its backward gets the same way; torch 2's pre-hook also hands
        # the full backward hook the replaced grad_output, so that is what is written below
        def triple_output_grad(module, inp, out):
            out.register_hook(lambda gr: gr * 3)

        m[2].register_forward_hook(triple_output_grad)
    y = m(x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    put(f'{pre}.g', g)
    put(f'{pre}.y', y)
    if x.requires_grad:
        put(f'{pre}.gx', x.grad)
    for pname, p in m.named_parameters():
        put(f'{pre}.grad.{pname}', p.grad)
    for k, (gin, gout) in seen.items():
        if gin is not None:
            put(f'{pre}.gin.{k}', gin)
        put(f'{pre}.gout.{k}', gout * 3 if name == 'pre' and k == 2 else gout)


def hooks():
    for c in HOOK_CASES:
        hook_case(c)


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: nn_ref.py OUTPUT_FILE')
    torch.set_num_threads(1)
    layers()
    activations()
    losses()
    losses_more()
    ctc_losses()
    optimizers()
    clipping()
    attention()
    transformers()
    hooks()
    with open(sys.argv[1], 'w') as f:
        f.write('\n'.join(OUT) + '\n')
    print(f'nn_ref.py: wrote {len(OUT)} records to {sys.argv[1]}')


if __name__ == '__main__':
    main()
