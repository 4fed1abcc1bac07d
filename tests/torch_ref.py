#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_ops_torch.c.

Usage: torch_ref.py OUTPUT_FILE

Each case names a nabla op, its inputs and its arguments. An input is stored as a contiguous
leaf tensor and then turned into the tensor the op sees by the same chain of views on both
sides: permute (a transposed/permuted layout), slice with a step (a strided layout), expand (a
broadcast layout with stride 0). So nabla sees a non-contiguous view holding exactly the values
torch sees, and the gradients are compared on the leaves, through the views' backward too.

For differentiable cases the file also holds a random upstream gradient g and
torch.autograd.grad((out * g).sum(), leaves). Each case draws its values from a torch seed
made from its name, so adding a case changes no other. The format is whitespace-separated tokens:

  NCASES n
  CASE name op expect(ok|error)
  IA k i1..ik        integer arguments (axes, keepdim, slice bounds, perm, ...)
  FA k f1..fk        float arguments (scalars, clamp bounds)
  SH ndim d1..dn     shape argument (ndim -1: none)
  DT dtype           dtype argument (cast) or '-'
  TOL factor         tolerance multiplier for this case
  NIN n
  IN grad perm(ndim p..|-1) slice(axis start end step|-1) expand(ndim d..|-1) TENSOR   (n times)
  OUT TENSOR | OUT -
  G TENSOR | G -
  GRAD TENSOR | GRAD -                                                               (n times)
  END
  TENSOR = dtype ndim d1..dn v1..v_numel   (values in decimals that round-trip exactly)

The test fails (rather than skips) when this script cannot run: the generator is a CTest
fixture that the C test requires, and the C test fails when the file is missing.
"""
import math
import os
import sys
import zlib

import torch
import torch.nn.functional as F

DT = {'f32': torch.float32, 'f64': torch.float64, 'i64': torch.int64, 'i32': torch.int32,
      'u8': torch.uint8, 'bool': torch.bool, 'i8': torch.int8}
DT_NAME = {v: k for k, v in DT.items()}
FLOATS = ('f32', 'f64')


class In:
    """One input: the shape the op sees, how its values are drawn, and its layout.

    perm: the stored tensor is permuted by perm to give the input (a transposed view);
    sl:   (axis, step): the input is x[..., 1:1+n*step:step, ...] of a larger tensor;
    exp:  the input is expanded from this smaller shape (stride-0 axes);
    kind: 'n' normal, 'pos' in [0.5, 2], 'away' |x| >= 0.2, 'exp' in [-2, 2],
          'distinct' distinct values, 'int' small integers, ('idx', hi) indices in [0, hi),
          'bool' random booleans, ('val', list) fixed values, ('same', k) the stored values of input k.
    """

    def __init__(self, shape, kind='n', dtype=None, perm=None, sl=None, exp=None, grad=True):
        self.shape, self.kind, self.dtype = tuple(shape), kind, dtype
        self.perm, self.sl, self.exp, self.grad = perm, sl, exp, grad

    def stored_shape(self):
        s = list(self.exp if self.exp is not None else self.shape)
        if self.sl is not None:
            axis, step = self.sl
            s[axis] = s[axis] * step + 1
        if self.perm is not None:
            stored = [0] * len(s)
            for i, p in enumerate(self.perm):
                stored[p] = s[i]
            s = stored
        return tuple(s)

    def slice_args(self):
        axis, step = self.sl
        n = (self.exp if self.exp is not None else self.shape)[axis]
        return axis, 1, 1 + n * step, step

    def view(self, leaf):
        v = leaf
        if self.perm is not None:
            v = v.permute(*self.perm)
        if self.sl is not None:
            axis, start, end, step = self.slice_args()
            idx = [slice(None)] * v.dim()
            idx[axis] = slice(start, end, step)
            v = v[tuple(idx)]
        if self.exp is not None:
            v = v.expand(*self.shape)
        assert tuple(v.shape) == self.shape, (v.shape, self.shape)
        return v


def T(shape, **kw):
    """An input transposed in its last two axes (non-contiguous)."""
    n = len(shape)
    perm = list(range(n))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return In(shape, perm=perm, **kw)


def S(shape, axis=-1, step=2, **kw):
    """An input sliced with a step along axis (non-contiguous)."""
    return In(shape, sl=(axis if axis >= 0 else len(shape) + axis, step), **kw)


def draw(kind, shape, dtype, stored):
    n = 1
    for d in shape:
        n *= d
    if isinstance(kind, tuple) and kind[0] == 'same':
        return stored[kind[1]].clone()
    if isinstance(kind, tuple) and kind[0] == 'idx':
        return torch.randint(0, kind[1], shape, dtype=dtype)
    if isinstance(kind, tuple) and kind[0] == 'val':
        return torch.tensor(kind[1], dtype=dtype).reshape(shape)
    if kind == 'bool':
        return torch.rand(shape) > 0.5
    if kind == 'int':
        return torch.randint(0 if dtype == torch.uint8 else -5, 6, shape, dtype=dtype)
    if kind == 'n':
        x = torch.randn(shape, dtype=torch.float64)
    elif kind == 'pos':
        x = 0.5 + 1.5 * torch.rand(shape, dtype=torch.float64)
    elif kind == 'away':
        r = torch.randn(shape, dtype=torch.float64)
        x = torch.sign(r) * (0.2 + r.abs())
        x[x == 0] = 0.7
    elif kind == 'exp':
        x = 4 * torch.rand(shape, dtype=torch.float64) - 2
    elif kind == 'distinct':
        if not dtype.is_floating_point:
            return (torch.randperm(n) - n // 2).reshape(shape).to(dtype)
        x = (torch.randperm(n, dtype=torch.float64) * 0.37 - 0.2 * n).reshape(shape)
    else:
        raise ValueError(kind)
    return x.to(dtype)


def sl_axis(x, axis, start, end, step):
    idx = [slice(None)] * x.dim()
    idx[axis] = slice(start, end, step)
    return x[tuple(idx)]


def long_indices(idx):
    """torch 1.13 indexes with i64 (and bool) tensors only; nabla takes i32 as well."""
    return tuple(i.long() if i.dtype == torch.int32 else i for i in idx)


# op name -> torch function of (inputs, int args, float args, shape arg, dtype arg)
def _bf16(t):
    """t rounded to the nearest bfloat16 (torch's rounding), kept in t's dtype."""
    return t.bfloat16().to(t.dtype)


class AutocastMatmul(torch.autograd.Function):
    """nb_matmul under nb_autocast(NB_BF16): both operands rounded to bf16, their products summed
    (exactly here, in f64; in f32 in nabla); the gradients are the same kind of product of the
    rounded gradient with the other rounded operand, as torch.autocast computes them (which
    then rounds its bf16 results once more; nabla keeps them f32)."""
    @staticmethod
    def forward(ctx, a, b):
        ra, rb = _bf16(a).double(), _bf16(b).double()
        ctx.save_for_backward(ra, rb)
        ctx.shapes = (a.shape, b.shape, a.dtype)
        return torch.matmul(ra, rb).to(a.dtype)

    @staticmethod
    def backward(ctx, g):
        ra, rb = ctx.saved_tensors
        sa, sb, dt = ctx.shapes
        rg = _bf16(g).double()
        ga = torch.matmul(rg, rb.transpose(-1, -2)).sum_to_size(sa)
        gb = torch.matmul(ra.transpose(-1, -2), rg).sum_to_size(sb)
        return ga.to(dt), gb.to(dt)


OPS = {
    'matmul_autocast': lambda x, ia, fa, sh, dt: AutocastMatmul.apply(x[0], x[1]),
    'add': lambda x, ia, fa, sh, dt: torch.add(x[0], x[1]),
    'sub': lambda x, ia, fa, sh, dt: torch.sub(x[0], x[1]),
    'mul': lambda x, ia, fa, sh, dt: torch.mul(x[0], x[1]),
    'div': lambda x, ia, fa, sh, dt: torch.div(x[0], x[1]),
    'pow': lambda x, ia, fa, sh, dt: torch.pow(x[0], x[1]),
    'maximum': lambda x, ia, fa, sh, dt: torch.maximum(x[0], x[1]),
    'minimum': lambda x, ia, fa, sh, dt: torch.minimum(x[0], x[1]),
    'eq': lambda x, ia, fa, sh, dt: torch.eq(x[0], x[1]),
    'lt': lambda x, ia, fa, sh, dt: torch.lt(x[0], x[1]),
    'gt': lambda x, ia, fa, sh, dt: torch.gt(x[0], x[1]),
    'where': lambda x, ia, fa, sh, dt: torch.where(x[0], x[1], x[2]),
    'add_scalar': lambda x, ia, fa, sh, dt: x[0] + fa[0],
    'mul_scalar': lambda x, ia, fa, sh, dt: x[0] * fa[0],
    'pow_scalar': lambda x, ia, fa, sh, dt: torch.pow(x[0], fa[0]),
    'neg': lambda x, ia, fa, sh, dt: torch.neg(x[0]),
    'exp': lambda x, ia, fa, sh, dt: torch.exp(x[0]),
    'log': lambda x, ia, fa, sh, dt: torch.log(x[0]),
    'sqrt': lambda x, ia, fa, sh, dt: torch.sqrt(x[0]),
    'abs': lambda x, ia, fa, sh, dt: torch.abs(x[0]),
    'tanh': lambda x, ia, fa, sh, dt: torch.tanh(x[0]),
    'sigmoid': lambda x, ia, fa, sh, dt: torch.sigmoid(x[0]),
    'relu': lambda x, ia, fa, sh, dt: torch.relu(x[0]),
    'gelu': lambda x, ia, fa, sh, dt: F.gelu(x[0]),
    'erf': lambda x, ia, fa, sh, dt: torch.erf(x[0]),
    'sin': lambda x, ia, fa, sh, dt: torch.sin(x[0]),
    'cos': lambda x, ia, fa, sh, dt: torch.cos(x[0]),
    'log1p': lambda x, ia, fa, sh, dt: torch.log1p(x[0]),
    'expm1': lambda x, ia, fa, sh, dt: torch.expm1(x[0]),
    'reciprocal': lambda x, ia, fa, sh, dt: torch.reciprocal(x[0]),
    'rsqrt': lambda x, ia, fa, sh, dt: torch.rsqrt(x[0]),
    'floor': lambda x, ia, fa, sh, dt: torch.floor(x[0]),
    'ceil': lambda x, ia, fa, sh, dt: torch.ceil(x[0]),
    'round': lambda x, ia, fa, sh, dt: torch.round(x[0]),
    'trunc': lambda x, ia, fa, sh, dt: torch.trunc(x[0]),
    'sign': lambda x, ia, fa, sh, dt: torch.sign(x[0]),
    'clamp': lambda x, ia, fa, sh, dt: torch.clamp(x[0], fa[0], fa[1]),
    'matmul': lambda x, ia, fa, sh, dt: torch.matmul(x[0], x[1]),
    'sum': lambda x, ia, fa, sh, dt: torch.sum(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'mean': lambda x, ia, fa, sh, dt: torch.mean(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'max': lambda x, ia, fa, sh, dt: torch.max(x[0], dim=ia[0], keepdim=bool(ia[1])).values,
    'min': lambda x, ia, fa, sh, dt: torch.min(x[0], dim=ia[0], keepdim=bool(ia[1])).values,
    'argmax': lambda x, ia, fa, sh, dt: torch.argmax(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'argmin': lambda x, ia, fa, sh, dt: torch.argmin(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'logsumexp': lambda x, ia, fa, sh, dt: torch.logsumexp(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'var': lambda x, ia, fa, sh, dt: torch.var(x[0], dim=ia[0], unbiased=True, keepdim=bool(ia[1])),
    'sum_all': lambda x, ia, fa, sh, dt: torch.sum(x[0]),
    'mean_all': lambda x, ia, fa, sh, dt: torch.mean(x[0]),
    'sum_to': lambda x, ia, fa, sh, dt: x[0].sum_to_size(sh),
    'softmax': lambda x, ia, fa, sh, dt: torch.softmax(x[0], dim=ia[0]),
    'log_softmax': lambda x, ia, fa, sh, dt: torch.log_softmax(x[0], dim=ia[0]),
    'reshape': lambda x, ia, fa, sh, dt: x[0].reshape(sh),
    'view': lambda x, ia, fa, sh, dt: x[0].view(sh),
    'transpose': lambda x, ia, fa, sh, dt: x[0].transpose(ia[0], ia[1]),
    'permute': lambda x, ia, fa, sh, dt: x[0].permute(*ia),
    'expand': lambda x, ia, fa, sh, dt: x[0].expand(*sh),
    'squeeze': lambda x, ia, fa, sh, dt: x[0].squeeze(ia[0]),
    'unsqueeze': lambda x, ia, fa, sh, dt: x[0].unsqueeze(ia[0]),
    'flatten': lambda x, ia, fa, sh, dt: torch.flatten(x[0], ia[0], ia[1]),
    'slice': lambda x, ia, fa, sh, dt: sl_axis(x[0], *ia),
    'cat': lambda x, ia, fa, sh, dt: torch.cat(x, dim=ia[0]),
    'stack': lambda x, ia, fa, sh, dt: torch.stack(x, dim=ia[0]),
    'index_select': lambda x, ia, fa, sh, dt: torch.index_select(x[0], ia[0], x[1]),
    'gather': lambda x, ia, fa, sh, dt: torch.gather(x[0], ia[0], x[1]),
    'embedding': lambda x, ia, fa, sh, dt: F.embedding(x[1], x[0]),
    'contiguous': lambda x, ia, fa, sh, dt: x[0].contiguous(),
    'clone': lambda x, ia, fa, sh, dt: x[0].clone(),
    'detach': lambda x, ia, fa, sh, dt: x[0].detach(),
    'cast': lambda x, ia, fa, sh, dt: x[0].to(DT[dt]),
    'linear': lambda x, ia, fa, sh, dt: F.linear(x[0], x[1], x[2] if len(x) > 2 else None),
    'ne': lambda x, ia, fa, sh, dt: torch.ne(x[0], x[1]),
    'le': lambda x, ia, fa, sh, dt: torch.le(x[0], x[1]),
    'ge': lambda x, ia, fa, sh, dt: torch.ge(x[0], x[1]),
    'logical_and': lambda x, ia, fa, sh, dt: torch.logical_and(x[0], x[1]),
    'logical_or': lambda x, ia, fa, sh, dt: torch.logical_or(x[0], x[1]),
    'logical_xor': lambda x, ia, fa, sh, dt: torch.logical_xor(x[0], x[1]),
    'logical_not': lambda x, ia, fa, sh, dt: torch.logical_not(x[0]),
    'isnan': lambda x, ia, fa, sh, dt: torch.isnan(x[0]),
    'isinf': lambda x, ia, fa, sh, dt: torch.isinf(x[0]),
    'isfinite': lambda x, ia, fa, sh, dt: torch.isfinite(x[0]),
    'nan_to_num': lambda x, ia, fa, sh, dt: torch.nan_to_num(
        x[0], nan=fa[0], posinf=None if math.isinf(fa[1]) else fa[1], neginf=None if math.isinf(fa[2]) else fa[2]),
    'masked_fill': lambda x, ia, fa, sh, dt: x[0].masked_fill(x[1], fa[0]),
    # through contiguous(): torch 1.13's masked_select backward writes a non-contiguous input's
    # gradient in memory order, not index order (x.t() selected at (0, 1) sends its gradient to x[0, 1])
    'masked_select': lambda x, ia, fa, sh, dt: torch.masked_select(x[0].contiguous(), x[1]),
    'any': lambda x, ia, fa, sh, dt: torch.any(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'all': lambda x, ia, fa, sh, dt: torch.all(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'prod': lambda x, ia, fa, sh, dt: torch.prod(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'cumsum': lambda x, ia, fa, sh, dt: torch.cumsum(x[0], dim=ia[0]),
    'cumprod': lambda x, ia, fa, sh, dt: torch.cumprod(x[0], dim=ia[0]),
    'amax': lambda x, ia, fa, sh, dt: torch.amax(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'amin': lambda x, ia, fa, sh, dt: torch.amin(x[0], dim=ia[0], keepdim=bool(ia[1])),
    'std': lambda x, ia, fa, sh, dt: torch.std(x[0], dim=ia[0], unbiased=True, keepdim=bool(ia[1])),
    'norm': lambda x, ia, fa, sh, dt: torch.linalg.vector_norm(x[0], ord=fa[0], dim=ia[0], keepdim=bool(ia[1])),
    'norm_all': lambda x, ia, fa, sh, dt: torch.linalg.vector_norm(x[0], ord=fa[0]),
    'argsort': lambda x, ia, fa, sh, dt: torch.sort(x[0], dim=ia[0], descending=bool(ia[1]), stable=True).indices,
    'sort': lambda x, ia, fa, sh, dt: torch.sort(x[0], dim=ia[0], descending=bool(ia[1]), stable=True).values,
    'sort_indices': lambda x, ia, fa, sh, dt: torch.sort(x[0], dim=ia[0], descending=bool(ia[1]), stable=True).indices,
    'topk': lambda x, ia, fa, sh, dt: torch.topk(x[0], ia[0], dim=ia[1], largest=bool(ia[2])).values,
    'topk_indices': lambda x, ia, fa, sh, dt: torch.topk(x[0], ia[0], dim=ia[1], largest=bool(ia[2])).indices,
    'flip': lambda x, ia, fa, sh, dt: torch.flip(x[0], list(ia)),
    'roll': lambda x, ia, fa, sh, dt: torch.roll(x[0], ia[0], ia[1]),
    'repeat': lambda x, ia, fa, sh, dt: x[0].repeat(*ia),
    'tile': lambda x, ia, fa, sh, dt: torch.tile(x[0], tuple(ia)),
    'split': lambda x, ia, fa, sh, dt: torch.split(x[0], ia[0], dim=ia[1])[ia[2]],
    'chunk': lambda x, ia, fa, sh, dt: torch.chunk(x[0], ia[0], dim=ia[1])[ia[2]],
    'pad': lambda x, ia, fa, sh, dt: F.pad(x[0], list(ia[1:]), mode=PAD_MODES[ia[0]], value=fa[0])
    if ia[0] == 0 else F.pad(x[0], list(ia[1:]), mode=PAD_MODES[ia[0]]),
    'tril': lambda x, ia, fa, sh, dt: torch.tril(x[0], ia[0]),
    'triu': lambda x, ia, fa, sh, dt: torch.triu(x[0], ia[0]),
    'diagonal': lambda x, ia, fa, sh, dt: torch.diagonal(x[0], ia[0], ia[1], ia[2]),
    'eye': lambda x, ia, fa, sh, dt: torch.eye(ia[0], ia[1], dtype=DT[dt]),
    'linspace': lambda x, ia, fa, sh, dt: torch.linspace(fa[0], fa[1], ia[0], dtype=DT[dt]),
    'one_hot': lambda x, ia, fa, sh, dt: F.one_hot(x[0], ia[0]),
    'index': lambda x, ia, fa, sh, dt: x[0][long_indices(x[1:])],
    'index_put': lambda x, ia, fa, sh, dt: torch.index_put(x[0], long_indices(x[2:]), x[1], accumulate=bool(ia[0])),
    'masked_scatter': lambda x, ia, fa, sh, dt: torch.masked_scatter(x[0], x[1], x[2]),
}
PAD_MODES = ('constant', 'reflect', 'replicate', 'circular')

# ops torch differentiates that nabla declares non-differentiable (none at present)
NONDIFF = set()

CASES = []


def case(name, op, inputs, ia=(), fa=(), sh=None, dt=None, tol=1.0, dtypes=FLOATS, error=False):
    """Adds the case once per dtype in dtypes; inputs without their own dtype take it."""
    assert op in OPS, op
    for d in dtypes:
        CASES.append(dict(name=f'{name}_{d}' if len(dtypes) > 1 or d != 'f32' else name, op=op,
                          inputs=inputs, ia=list(ia), fa=list(fa), sh=sh, dt=dt, tol=tol, dtype=d, error=error))


def fmt_tensor(t):
    t = t.detach().contiguous()
    name = DT_NAME[t.dtype]
    vals = t.reshape(-1).tolist()
    if name == 'f32':  # 9 significant digits round-trip every float32 exactly
        body = ' '.join('%.9g' % v for v in vals)
    elif name == 'f64':
        body = ' '.join(repr(float(v)) for v in vals)
    else:
        body = ' '.join(str(int(v)) for v in vals)
    return f'{name} {t.dim()} {" ".join(str(d) for d in t.shape)} {body}'.replace('  ', ' ')


def run_case(c, out):
    seed = zlib.crc32(c['name'].encode())
    torch.manual_seed(seed)
    leaves, views, stored = [], [], []
    for spec in c['inputs']:
        dtype = DT[spec.dtype or c['dtype']]
        x = draw(spec.kind, spec.stored_shape(), dtype, stored)
        stored.append(x)
        leaf = x.clone()
        if spec.grad and x.dtype.is_floating_point:
            leaf.requires_grad_(True)
        leaves.append(leaf)
        views.append(spec.view(leaf))
    fn = OPS[c['op']]
    w = out.append
    w(f'CASE {c["name"]} {c["op"]} {"error" if c["error"] else "ok"}')
    w(f'IA {len(c["ia"])} {" ".join(str(int(v)) for v in c["ia"])}')
    w(f'FA {len(c["fa"])} {" ".join(repr(float(v)) for v in c["fa"])}')
    sh = c['sh']
    w('SH -1' if sh is None else f'SH {len(sh)} {" ".join(str(int(v)) for v in sh)}')
    w(f'DT {c["dt"] or "-"}')
    w(f'TOL {float(c["tol"])!r}')
    w(f'NIN {len(leaves)}')
    for spec, leaf in zip(c['inputs'], leaves):
        perm = '-1' if spec.perm is None else f'{len(spec.perm)} ' + ' '.join(map(str, spec.perm))
        slc = '-1' if spec.sl is None else ' '.join(map(str, spec.slice_args()))
        exp = '-1' if spec.exp is None else f'{len(spec.shape)} ' + ' '.join(map(str, spec.shape))
        w(f'IN {int(leaf.requires_grad)} {perm} {slc} {exp} {fmt_tensor(leaf)}')
    if c['error']:
        try:
            fn(views, c['ia'], c['fa'], sh, c['dt'])
        except (RuntimeError, IndexError, ValueError):
            pass
        else:
            raise AssertionError(f'case {c["name"]}: torch accepted what the case expects to fail')
        w('OUT -')
        w('G -')
        for _ in leaves:
            w('GRAD -')
        w('END')
        return
    y = fn(views, c['ia'], c['fa'], sh, c['dt'])
    w(f'OUT {fmt_tensor(y)}')
    wants = [l for l in leaves if l.requires_grad]
    if y.requires_grad and wants and c['op'] not in NONDIFF:
        g = torch.randn(y.shape, dtype=torch.float64).to(y.dtype)
        grads = torch.autograd.grad((y * g).sum(), wants, allow_unused=True)
        w(f'G {fmt_tensor(g)}')
        it = iter(grads)
        for l in leaves:
            gr = next(it) if l.requires_grad else None
            w('GRAD -' if gr is None else f'GRAD {fmt_tensor(gr)}')
    else:
        w('G -')
        for _ in leaves:
            w('GRAD -')
    w('END')


# ---------------------------------------------------------------------------------------------
# The cases.

# Binary elementwise: broadcasting, 0-d operands, transposed, strided and expanded layouts.
BIN_SHAPES = [
    ('same', In((3, 4)), In((3, 4))),
    ('row', In((3, 4)), In((4,))),
    ('col3d', In((2, 1, 4)), In((3, 1))),
    ('scalar_r', In((2, 3)), In(())),
    ('scalar_l', In(()), In((2, 3))),
    ('scalars', In(()), In(())),
    ('lead1', In((1,)), In((3, 4))),
    ('t_a', T((3, 4)), In((3, 4))),
    ('t_b_bcast', In((2, 3, 4)), T((3, 4))),
    ('perm3d', In((2, 3, 4), perm=(2, 0, 1)), In((2, 3, 4), perm=(1, 2, 0))),
    ('strided', S((3, 4), axis=1), S((3, 4), axis=0, step=3)),
    ('expanded', In((3, 4), exp=(3, 1)), In((3, 4), exp=(1, 4))),
    ('mixed_views', T((4, 3, 5)), S((3, 1), axis=0)),
]
BIN_KIND = {'add': ('n', 'n'), 'sub': ('n', 'n'), 'mul': ('n', 'n'), 'div': ('n', 'away'),
            'pow': ('pos', 'exp'), 'maximum': ('n', 'n'), 'minimum': ('n', 'n')}


def with_kind(spec, kind, **kw):
    return In(spec.shape, kind=kind, dtype=kw.get('dtype', spec.dtype), perm=spec.perm, sl=spec.sl,
              exp=spec.exp, grad=kw.get('grad', spec.grad))


for op, (ka, kb) in BIN_KIND.items():
    for tag, a, b in BIN_SHAPES:
        case(f'{op}_{tag}', op, [with_kind(a, ka), with_kind(b, kb)], tol=4 if op == 'pow' else 1)
# one input without grad (only the other is differentiated)
case('mul_nograd_b', 'mul', [In((3, 4)), In((4,), grad=False)])
case('div_nograd_a', 'div', [In((3, 4), grad=False), In((3, 1), kind='away')])
# ties split the gradient in halves, as torch
case('maximum_tie', 'maximum', [In((3, 4)), In((3, 4), kind=('same', 0))])
case('minimum_tie', 'minimum', [T((3, 4)), T((3, 4), kind=('same', 0))])
case('pow_int_exp', 'pow', [In((3, 4), kind='away'), In((), kind=('val', 3.0), grad=False)])
# comparisons (-> bool), with some equal elements
for op in ('eq', 'lt', 'gt'):
    case(f'{op}_bcast', op, [In((3, 4), kind='int'), In((4,), kind='int')])
    case(f'{op}_views', op, [T((3, 4), kind='int'), S((3, 4), kind='int')])
    case(f'{op}_int', op, [In((2, 3), kind='int'), In((3,), kind='int')], dtypes=('i64',))
case('where_bcast', 'where', [In((3, 4), kind='bool'), In((3, 4)), In((4,))])
case('where_views', 'where', [T((3, 4), kind='bool'), S((2, 3, 4)), In((2, 1, 4), perm=(2, 0, 1))])
case('where_scalar', 'where', [In((2, 3), kind='bool'), In(()), In((2, 3))])

# Scalars.
case('add_scalar', 'add_scalar', [T((3, 4))], fa=[2.5])
case('mul_scalar', 'mul_scalar', [S((3, 4))], fa=[-1.5])
case('mul_scalar_0d', 'mul_scalar', [In(())], fa=[3.0])
case('pow_scalar_sq', 'pow_scalar', [T((3, 4))], fa=[2.0])
case('pow_scalar_frac', 'pow_scalar', [S((3, 4), kind='pos')], fa=[1.5])
case('pow_scalar_neg', 'pow_scalar', [In((2, 3), kind='pos')], fa=[-0.5])
case('pow_scalar_int', 'pow_scalar', [In((2, 3), kind='away')], fa=[3.0])

# Unary.
UNARY_KIND = {'neg': 'n', 'exp': 'n', 'log': 'pos', 'sqrt': 'pos', 'abs': 'away', 'tanh': 'n',
              'sigmoid': 'n', 'relu': 'away', 'gelu': 'n', 'erf': 'n', 'sign': 'away',
              'sin': 'n', 'cos': 'n', 'log1p': 'pos', 'expm1': 'n', 'reciprocal': 'away', 'rsqrt': 'pos',
              'floor': 'n', 'ceil': 'n', 'round': 'n', 'trunc': 'n'}
for op, k in UNARY_KIND.items():
    case(f'{op}_contig', op, [In((3, 5), kind=k)])
    case(f'{op}_t', op, [T((2, 3, 4), kind=k)])
    case(f'{op}_strided', op, [S((4, 3), axis=0, step=2, kind=k)])
    case(f'{op}_0d', op, [In((), kind=k)])
    case(f'{op}_big', op, [In((7, 130), kind=k, perm=(1, 0))])
case('sign_zeros', 'sign', [In((5,), kind=('val', [-2.0, 0.0, 3.0, -0.0, 1.0]))])
case('abs_int', 'abs', [In((2, 3), kind='int')], dtypes=('i64',))
case('neg_int', 'neg', [In((2, 3), kind='int')], dtypes=('i64',))
case('relu_int', 'relu', [In((2, 3), kind='int')], dtypes=('i64',))
# rounding: halves (to even for round), negative halves and signed zeros; integers unchanged;
# the float functions of an integer tensor compute in f32
HALVES = [2.5, -0.5, 0.5, 1.5, -2.5, -0.0, 3.7, -3.7]
for op in ('floor', 'ceil', 'round', 'trunc'):
    case(f'{op}_halves', op, [In((8,), kind=('val', HALVES))])
    case(f'{op}_int', op, [In((2, 3), kind='int')], dtypes=('i64',))
case('sin_int', 'sin', [In((2, 3), kind='int')], dtypes=('i64',))
case('reciprocal_int', 'reciprocal', [In((2, 3), kind='int')], dtypes=('i64',))
case('clamp', 'clamp', [In((3, 5))], fa=[-0.6, 0.7])
case('clamp_t', 'clamp', [T((4, 5))], fa=[-0.3, 1.2])
case('clamp_int', 'clamp', [In((3, 4), kind='int')], fa=[-2, 3], dtypes=('i64',))
# gradient at the bounds: torch passes it where lo <= x <= hi, both bounds included
case('clamp_at_bounds', 'clamp', [In((7,), kind=('val', [-0.5, -0.25, 0.0, 0.75, 1.0, 1.5, 0.5]))], fa=[-0.25, 1.0])
case('clamp_at_bounds_int_bounds', 'clamp', [In((5,), kind=('val', [-2.0, -1.0, 0.0, 1.0, 2.0]))], fa=[-1.0, 1.0])
case('clamp_point', 'clamp', [In((3,), kind=('val', [0.5, 1.0, 1.5]))], fa=[1.0, 1.0])

# Non-finite inputs: NaN, +-inf, signed zeros, pass through every elementwise op as in torch,
# forward and backward (a NaN is NaN, not 0).
NONFINITE = [float('nan'), float('inf'), -float('inf'), 0.0, -0.0, 2.0, -3.0, 1e-30]
for op in ('neg', 'exp', 'log', 'sqrt', 'abs', 'tanh', 'sigmoid', 'relu', 'gelu', 'erf', 'sign',
           'sin', 'cos', 'log1p', 'expm1', 'reciprocal', 'rsqrt', 'floor', 'ceil', 'round', 'trunc'):
    case(f'{op}_nonfinite', op, [In((8,), kind=('val', NONFINITE))])
case('relu_nonfinite_t', 'relu', [T((2, 4), kind=('val', [NONFINITE[:4], NONFINITE[4:]]))])
case('clamp_nonfinite', 'clamp', [In((8,), kind=('val', NONFINITE))], fa=[-1.0, 1.0])
# a NaN bound makes every element NaN (and the gradient zero), an integer input a float result
case('clamp_nan_lo', 'clamp', [In((2, 4))], fa=[float('nan'), 0.5])
case('clamp_nan_hi', 'clamp', [T((3, 2))], fa=[-0.5, float('nan')])
case('clamp_nan_int', 'clamp', [In((2, 3), kind='int')], fa=[float('nan'), 3.0], dtypes=('i64',))
for op in ('add', 'sub', 'mul', 'div', 'maximum', 'minimum'):
    case(f'{op}_nonfinite', op, [In((8,), kind=('val', NONFINITE)), In((8,), kind=('val', NONFINITE[::-1]))])
for op in ('max', 'min', 'sum', 'argmax', 'argmin', 'softmax', 'log_softmax', 'logsumexp'):
    ia = [0] if op in ('softmax', 'log_softmax') else [0, 0]
    case(f'{op}_nonfinite_nan', op, [In((8,), kind=('val', NONFINITE))], ia=ia)
    case(f'{op}_nonfinite_inf', op, [In((7,), kind=('val', NONFINITE[1:]))], ia=ia)
# an empty axis: torch's logsumexp is -inf there (its max over the axis is an error)
for tag, shape, ia in (('k0', (3, 0), [1, 0]), ('k1', (3, 0), [-1, 1]), ('rows', (0, 2), [0, 0])):
    case(f'logsumexp_empty_{tag}', 'logsumexp', [In(shape)], ia=ia)
case('logsumexp_empty_int', 'logsumexp', [In((0,), kind='int')], ia=[0, 0], dtypes=('i64',))

# Matmul: every rank combination of torch.matmul, broadcast batch dims, transposed operands.
MM = [
    ('1d_1d', In((5,)), In((5,))),
    ('1d_2d', In((4,)), In((4, 3))),
    ('2d_1d', In((3, 4)), In((4,))),
    ('2d_2d', In((3, 4)), In((4, 5))),
    ('2d_2d_ta', T((3, 4)), In((4, 5))),
    ('2d_2d_tb', In((3, 4)), T((4, 5))),
    ('2d_2d_tab', T((3, 4)), T((4, 5))),
    ('2d_2d_strided', S((3, 4), axis=1), S((4, 5), axis=0)),
    ('3d_2d', In((2, 3, 4)), In((4, 5))),
    ('2d_3d', In((3, 4)), In((2, 4, 5))),
    ('3d_3d', In((2, 3, 4)), In((2, 4, 5))),
    ('bcast_batch', In((2, 1, 3, 4)), In((3, 4, 5))),
    ('bcast_batch_t', In((2, 1, 3, 4), perm=(0, 1, 3, 2)), In((1, 3, 4, 5), perm=(1, 0, 2, 3))),
    ('batch_perm', In((2, 3, 4), perm=(1, 0, 2)), In((2, 4, 5), perm=(2, 1, 0))),
    ('1d_3d', In((4,)), In((2, 4, 5))),
    ('3d_1d', In((2, 3, 4)), In((4,))),
    ('1d_3d_t', S((4,), axis=0), T((2, 4, 5))),
    ('expanded_batch', In((3, 3, 4), exp=(1, 3, 4)), In((3, 4, 5))),
    ('big', In((33, 65)), In((65, 17), perm=(1, 0))),
]
for tag, a, b in MM:
    case(f'matmul_{tag}', 'matmul', [a, b], tol=5)
for tag, a, b in [('2d', In((7, 40)), In((40, 9))), ('ta', T((7, 40)), In((40, 9))), ('tb', In((7, 40)), T((40, 9))),
                  ('batch', In((2, 5, 40)), In((40, 9))), ('row', In((1, 40)), In((40, 9)))]:
    case(f'matmul_autocast_{tag}', 'matmul_autocast', [a, b], dtypes=('f32',), tol=5)
case('matmul_int', 'matmul', [In((2, 3), kind='int'), In((3, 4), kind='int')], dtypes=('i64',))
case('matmul_bad_inner', 'matmul', [In((3, 4)), In((5, 6))], error=True)
case('matmul_bad_batch', 'matmul', [In((2, 3, 4)), In((3, 4, 5))], error=True)

# Reductions over one axis, negative axes, keepdim on and off.
RED_KIND = {'sum': 'n', 'mean': 'n', 'max': 'distinct', 'min': 'distinct', 'argmax': 'distinct',
            'argmin': 'distinct', 'logsumexp': 'n', 'var': 'n'}
for op, k in RED_KIND.items():
    for axis in (0, 1, 2, -1, -3):
        for keep in (0, 1):
            case(f'{op}_ax{axis}_k{keep}', op, [In((3, 4, 5), kind=k)], ia=[axis, keep], tol=4)
    case(f'{op}_t', op, [T((4, 6), kind=k)], ia=[-1, 0], tol=4)
    case(f'{op}_perm', op, [In((3, 4, 5), kind=k, perm=(2, 0, 1))], ia=[1, 1], tol=4)
    case(f'{op}_strided', op, [S((5, 4), axis=0, kind=k)], ia=[0, 0], tol=4)
    case(f'{op}_1d', op, [In((7,), kind=k)], ia=[0, 0], tol=4)
    case(f'{op}_1d_k', op, [In((7,), kind=k)], ia=[-1, 1], tol=4)
    case(f'{op}_long', op, [In((5, 1000), kind=k)], ia=[1, 0], tol=20)
    case(f'{op}_long_t', op, [In((1000, 3), kind=k, perm=(1, 0))], ia=[-1, 1], tol=20)
    case(f'{op}_0d', op, [In((), kind=k)], ia=[0, 0])
case('argmax_int', 'argmax', [In((3, 4), kind='distinct')], ia=[1, 0], dtypes=('i64',))
case('sum_int', 'sum', [In((3, 4), kind='int')], ia=[0, 0], dtypes=('i64',))
case('sum_empty_axis', 'sum', [In((3, 0, 2))], ia=[1, 0])
case('sum_all', 'sum_all', [In((3, 4, 5))], tol=4)
case('sum_all_t', 'sum_all', [T((30, 40))], tol=10)
case('sum_all_strided', 'sum_all', [S((5, 6), axis=0)], tol=4)
case('sum_all_0d', 'sum_all', [In(())])
case('sum_all_int', 'sum_all', [In((3, 4), kind='int')], dtypes=('i64',))
case('mean_all', 'mean_all', [T((4, 5))], tol=4)
case('mean_all_big', 'mean_all', [In((100, 70), perm=(1, 0))], tol=20)
case('sum_to_row', 'sum_to', [In((3, 4))], sh=(1, 4))
case('sum_to_lead', 'sum_to', [T((2, 3, 4))], sh=(3, 1))
case('sum_to_same', 'sum_to', [In((2, 3))], sh=(2, 3))
case('sum_to_0d', 'sum_to', [In((2, 3))], sh=())
for op in ('softmax', 'log_softmax'):
    for axis in (0, 1, 2, -1):
        case(f'{op}_ax{axis}', op, [In((3, 4, 5))], ia=[axis], tol=4)
    case(f'{op}_t', op, [T((4, 6))], ia=[-1], tol=4)
    case(f'{op}_perm', op, [In((3, 4, 5), perm=(1, 2, 0))], ia=[1], tol=4)
    case(f'{op}_strided', op, [S((3, 5), axis=1, step=3)], ia=[-1], tol=4)
    case(f'{op}_large', op, [In((2, 5), kind=('val', [[1000.0, 1001.0, 999.0, 1002.0, 998.0],
                                                          [-50.0, -49.0, -51.0, -48.0, -47.0]]))], ia=[1], tol=4)
    case(f'{op}_long', op, [In((3, 700))], ia=[-1], tol=20)

# Shape ops.
case('reshape', 'reshape', [In((3, 4))], sh=(2, 6))
case('reshape_infer', 'reshape', [In((2, 3, 4))], sh=(4, -1))
case('reshape_t', 'reshape', [T((3, 4))], sh=(12,))
case('reshape_perm', 'reshape', [In((2, 3, 4), perm=(2, 0, 1))], sh=(3, -1, 2))
case('reshape_0d', 'reshape', [In((1, 1))], sh=())
case('reshape_from_0d', 'reshape', [In(())], sh=(1, 1, 1))
case('view', 'view', [In((3, 4))], sh=(4, 3))
case('view_infer', 'view', [In((2, 3, 4))], sh=(-1, 4))
case('view_split_t', 'view', [T((3, 4, 6))], sh=(3, 4, 2, 3))
case('view_strided', 'view', [S((3, 6), axis=0)], sh=(3, 2, 3))
case('view_bad', 'view', [T((3, 4))], sh=(12,), error=True)
case('transpose', 'transpose', [In((2, 3, 4))], ia=[0, 2])
case('transpose_neg', 'transpose', [T((2, 3, 4))], ia=[-1, -3])
case('transpose_same', 'transpose', [In((2, 3))], ia=[1, 1])
case('permute', 'permute', [In((2, 3, 4))], ia=[2, 0, 1])
case('permute_neg', 'permute', [In((2, 3, 4), perm=(1, 2, 0))], ia=[-1, 0, 1])
case('expand', 'expand', [In((3, 1))], sh=(3, 4))
case('expand_lead', 'expand', [In((1, 4))], sh=(2, 3, 4))
case('expand_keep', 'expand', [T((3, 1))], sh=(-1, 5))
case('expand_0d', 'expand', [In(())], sh=(2, 3))
case('expand_bad', 'expand', [In((3, 2))], sh=(3, 4), error=True)
case('squeeze', 'squeeze', [In((3, 1, 4))], ia=[1])
case('squeeze_neg', 'squeeze', [In((3, 1, 4), perm=(1, 0, 2))], ia=[-2])
case('squeeze_noop', 'squeeze', [In((3, 1, 4))], ia=[0])
case('unsqueeze', 'unsqueeze', [In((3, 4))], ia=[0])
case('unsqueeze_end', 'unsqueeze', [T((3, 4))], ia=[-1])
case('unsqueeze_mid', 'unsqueeze', [S((3, 4))], ia=[1])
case('unsqueeze_0d', 'unsqueeze', [In(())], ia=[0])
case('flatten', 'flatten', [In((2, 3, 4, 5))], ia=[1, -1])
case('flatten_all', 'flatten', [T((2, 3, 4))], ia=[0, -1])
case('flatten_mid', 'flatten', [In((2, 3, 4, 5), perm=(0, 2, 1, 3))], ia=[1, 2])
case('flatten_0d', 'flatten', [In(())], ia=[0, -1])
case('slice', 'slice', [In((5, 6))], ia=[1, 1, 5, 2])
case('slice_clamp', 'slice', [In((7, 3))], ia=[0, 0, 100, 3])
case('slice_neg', 'slice', [T((4, 6))], ia=[-1, -4, -1, 1])
case('slice_empty', 'slice', [In((4, 3))], ia=[0, 3, 1, 1])
case('slice_single', 'slice', [T((5, 3))], ia=[0, 2, 3, 1])
case('slice_of_strided', 'slice', [S((4, 7), axis=1)], ia=[1, 2, 7, 3])
case('cat', 'cat', [In((2, 3)), In((2, 1)), In((2, 4))], ia=[1])
case('cat_neg_views', 'cat', [T((3, 2, 4)), In((3, 1, 4)), S((3, 3, 4), axis=1)], ia=[-2])
case('cat_axis0', 'cat', [In((1, 3)), T((2, 3))], ia=[0])
case('cat_one', 'cat', [In((2, 3))], ia=[0])
case('cat_promote', 'cat', [In((2, 3), dtype='f32'), In((1, 3), dtype='f64')], ia=[0], dtypes=('f32',))
case('cat_bad', 'cat', [In((2, 3)), In((3, 2))], ia=[0], error=True)
case('stack', 'stack', [In((2, 3)), In((2, 3)), In((2, 3))], ia=[0])
case('stack_last', 'stack', [T((2, 3)), In((2, 3))], ia=[-1])
case('stack_mid', 'stack', [In((2, 3)), S((2, 3))], ia=[1])
case('stack_bad', 'stack', [In((2, 3)), In((3, 2))], ia=[0], error=True)

# Indexing (repeated indices, so the backward accumulates).
IDX = dict(dtype='i64', grad=False)
case('index_select', 'index_select', [In((5, 4)), In((6,), kind=('val', [4, 0, 4, 2, 1, 4]), **IDX)], ia=[0])
case('index_select_neg', 'index_select', [T((3, 5)), In((4,), kind=('val', [1, 1, 0, 4]), **IDX)], ia=[-1])
case('index_select_3d', 'index_select', [In((2, 5, 3), perm=(2, 0, 1)), In((7,), kind=('idx', 5), **IDX)], ia=[1])
case('index_select_oob', 'index_select', [In((5, 4)), In((2,), kind=('val', [1, 5]), **IDX)], ia=[0], error=True)
case('gather', 'gather', [In((3, 4)), In((3, 6), kind=('idx', 4), **IDX)], ia=[1])
case('gather_ax0', 'gather', [T((4, 3)), In((5, 3), kind=('idx', 4), **IDX)], ia=[0])
case('gather_3d', 'gather', [In((2, 3, 4), perm=(1, 2, 0)), In((2, 2, 3), kind=('idx', 3), **IDX)], ia=[-2])
case('gather_small', 'gather', [In((4, 5)), In((2, 3), kind=('idx', 4), **IDX)], ia=[0])
case('embedding', 'embedding', [In((10, 4)), In((2, 3), kind=('idx', 10), **IDX)])
case('embedding_1d', 'embedding', [In((6, 3)), In((8,), kind=('val', [0, 5, 5, 1, 0, 2, 5, 3]), **IDX)])
case('embedding_t', 'embedding', [T((7, 3)), In((2, 2, 2), kind=('idx', 7), **IDX)])
case('embedding_0d_idx', 'embedding', [In((5, 3)), In((), kind=('val', 2), **IDX)])

# Conversion.
case('contiguous_t', 'contiguous', [T((3, 4))])
case('contiguous_strided', 'contiguous', [S((3, 4), axis=0)])
case('contiguous_already', 'contiguous', [In((3, 4))])
case('contiguous_expanded', 'contiguous', [In((3, 4), exp=(1, 4))])
case('clone', 'clone', [In((3, 4))])
case('clone_t', 'clone', [T((2, 3, 4))])
case('detach', 'detach', [T((3, 4))])
case('cast_f32_f64', 'cast', [T((3, 4), dtype='f32')], dt='f64', dtypes=('f32',))
case('cast_f64_f32', 'cast', [S((3, 4), dtype='f64')], dt='f32', dtypes=('f32',), tol=1)
case('cast_same', 'cast', [In((3, 4))], dt='f32', dtypes=('f32',))
case('cast_f32_i64', 'cast', [In((3, 4), kind=('val', [[-2.7, -0.5, 0.5, 2.7]] * 3), dtype='f32', grad=False)],
     dt='i64', dtypes=('f32',))
case('cast_i64_f32', 'cast', [T((3, 4), kind='int', dtype='i64')], dt='f32', dtypes=('f32',))
case('cast_bool_f64', 'cast', [In((3, 4), kind='bool', dtype='bool')], dt='f64', dtypes=('f32',))
case('cast_f32_bool', 'cast', [In((5,), kind=('val', [0.0, 1.5, -0.0, -2.0, 0.25]), dtype='f32', grad=False)],
     dt='bool', dtypes=('f32',))

# nn functional.
case('linear', 'linear', [In((4, 3)), In((5, 3)), In((5,))], tol=4)
case('linear_nobias', 'linear', [In((4, 3)), In((5, 3))], tol=4)
case('linear_batched', 'linear', [In((2, 4, 3)), T((5, 3)), S((5,), axis=0)], tol=4)
case('linear_1d', 'linear', [In((3,)), In((5, 3)), In((5,))], tol=4)
case('linear_t_input', 'linear', [T((6, 8)), In((7, 8))], tol=4)

# Sizes above the kernels' parallel grain (32768 elements) and the reductions' chunked path
# (one long axis of at least 2 * 16384), so the OpenMP paths meet strided inputs too.
BIG = dict(dtypes=('f32',))
case('big_add_bcast_t', 'add', [T((190, 200)), In((200,))], tol=4, **BIG)
case('big_mul_strided', 'mul', [S((180, 200), axis=0), In((180, 1))], tol=4, **BIG)
case('big_exp_t', 'exp', [T((190, 200))], **BIG)
case('big_gelu_perm', 'gelu', [In((20, 40, 50), perm=(2, 0, 1))], **BIG)
case('big_sum_all_1d', 'sum_all', [In((40000,))], tol=100, **BIG)
case('big_sum_all_t', 'sum_all', [T((190, 200))], tol=100, **BIG)
case('big_sum_axis0_1d', 'sum', [In((40000,))], ia=[0, 0], tol=100, **BIG)
case('big_sum_rows', 'sum', [T((190, 200))], ia=[1, 1], tol=20, **BIG)
case('big_max_1d', 'max', [In((40000,), kind='distinct')], ia=[0, 0], **BIG)
case('big_argmin_1d', 'argmin', [In((40000,), kind='distinct')], ia=[-1, 1], **BIG)
case('big_argmax_strided', 'argmax', [S((35000,), axis=0, kind='distinct')], ia=[0, 0], **BIG)
case('big_mean_all', 'mean_all', [In((200, 190), perm=(1, 0))], tol=100, **BIG)
case('big_softmax_t', 'log_softmax', [T((190, 200))], ia=[0], tol=20, **BIG)

# Ties in long reductions (the chunked path combines chunk results): the first extreme wins,
# in argmax/argmin and in where max/min send the gradient.
def ties(n, at, v):
    x = [0.0] * n
    for i in at:
        x[i] = v
    return x
TIE_AT = (3, 30000)
for op, v in (('argmax', 1.0), ('argmin', -1.0), ('max', 1.0), ('min', -1.0)):
    case(f'tie_{op}_1d', op, [In((40000,), kind=('val', ties(40000, TIE_AT, v)))], ia=[0, 0], **BIG)
    case(f'tie_{op}_zeros', op, [In((40000,), kind=('val', [0.0] * 40000))], ia=[0, 0], **BIG)
    rows = [ties(40000, TIE_AT, v), ties(40000, (17, 39999), v)]
    case(f'tie_{op}_rows', op, [In((2, 40000), kind=('val', rows))], ia=[1, 0], **BIG)
    case(f'tie_{op}_cols', op, [In((40000, 2), kind=('val', rows), perm=(1, 0))], ia=[0, 1], **BIG)
case('tie_argmax_i64', 'argmax', [In((40000,), kind=('val', [int(v) for v in ties(40000, TIE_AT, 1.0)]))],
     ia=[0, 0], dtypes=('i64',))

# Empty tensors and expanded (stride-0) matrix axes.
case('add_empty', 'add', [In((0, 3)), In((3,))])
case('matmul_k0', 'matmul', [In((3, 0)), In((0, 4))])
case('matmul_expanded_inner', 'matmul', [In((3, 4), exp=(3, 1)), In((4, 5), exp=(1, 5))], tol=4)
case('cat_empty_piece', 'cat', [In((2, 0)), In((2, 3))], ia=[1])
case('sum_all_empty', 'sum_all', [In((0, 4))])

# Broadcasting errors.
case('add_bad_bcast', 'add', [In((3, 4)), In((5,))], error=True)
case('squeeze_bad_axis', 'squeeze', [In((3, 1))], ia=[2], error=True)

# Dtype promotion: the result dtype is checked against torch's, and the gradient of each
# float input comes back in that input's own dtype.
PROMO = [
    ('f32_f64', 'add', 'f32', 'f64', 'n', 'n'),
    ('f64_f32', 'mul', 'f64', 'f32', 'n', 'n'),
    ('i64_f32', 'mul', 'i64', 'f32', 'int', 'n'),
    ('f32_i64', 'sub', 'f32', 'i64', 'n', 'int'),
    ('i64_i64_div', 'div', 'i64', 'i64', 'int', ('val', [[1, 2, 3], [-4, 5, -7]])),
    ('i64_i64_add', 'add', 'i64', 'i64', 'int', 'int'),
    ('i32_i64', 'add', 'i32', 'i64', 'int', 'int'),
    ('u8_i64', 'mul', 'u8', 'i64', ('idx', 9), 'int'),
    ('i64_f64_max', 'maximum', 'i64', 'f64', 'int', 'n'),
    ('i64_f32_lt', 'lt', 'i64', 'f32', 'int', 'n'),
    ('bool_f32', 'mul', 'bool', 'f32', 'bool', 'n'),
    ('i64_f32_pow', 'pow', 'f32', 'i64', 'pos', ('idx', 3)),
]
for tag, op, da, db, ka, kb in PROMO:
    case(f'promote_{tag}', op, [In((2, 3), kind=ka, dtype=da), In((2, 3) if tag.endswith('div') else (3,), kind=kb,
                                                                  dtype=db)], dtypes=('f32',))
case('promote_where', 'where', [In((2, 3), kind='bool', dtype='bool'), In((2, 3), kind='int', dtype='i64'),
                                In((3,), dtype='f32')], dtypes=('f32',))
case('promote_add_scalar_i64', 'add_scalar', [In((2, 3), kind='int', dtype='i64')], fa=[2.5], dtypes=('f32',))
# a 0-d tensor of a higher dtype in the same category does not promote a dimensioned one (torch's rule)
case('promote_0d_f64', 'add', [In((3,), dtype='f32'), In((), dtype='f64')], dtypes=('f32',))
case('promote_0d_i64_f64', 'mul', [In((3,), kind='int', dtype='i64'), In((), dtype='f64')], dtypes=('f32',))
case('promote_0d_i32_i64', 'add', [In((3,), kind='int', dtype='i32'), In((), kind='int', dtype='i64')], dtypes=('f32',))
case('promote_0d_f64_f32', 'sub', [In((2, 3), dtype='f64'), In((), dtype='f32')], dtypes=('f32',))
case('promote_0d_where', 'where', [In((2, 3), kind='bool', dtype='bool'), In((2, 3), dtype='f32'), In((), dtype='f64')],
     dtypes=('f32',))
# bool with bool: add is a logical or, mul an and, and sub an error, as in torch
BOOLS = dict(dtype='bool', grad=False)
case('add_bool', 'add', [In((3, 4), kind='bool', **BOOLS), In((4,), kind='bool', **BOOLS)], dtypes=('f32',))
case('mul_bool', 'mul', [T((3, 4), kind='bool', **BOOLS), In((3, 4), kind='bool', **BOOLS)], dtypes=('f32',))
case('add_bool_0d', 'add', [In((), kind='bool', **BOOLS), In((2, 3), kind='bool', **BOOLS)], dtypes=('f32',))
case('sub_bool', 'sub', [In((3, 4), kind='bool', **BOOLS), In((3, 4), kind='bool', **BOOLS)], dtypes=('f32',),
     error=True)
case('add_bool_i64', 'add', [In((3, 4), kind='bool', **BOOLS), In((4,), kind='int', dtype='i64', grad=False)],
     dtypes=('f32',))
case('promote_0d_both', 'mul', [In((), dtype='f32'), In((), kind='int', dtype='i64')], dtypes=('f32',))


# ---- issue 15's ops ----
# comparisons and logic, with equal elements, broadcasting and views
for op in ('ne', 'le', 'ge'):
    case(f'{op}_bcast', op, [In((3, 4), kind='int'), In((4,), kind='int')])
    case(f'{op}_views', op, [T((3, 4), kind='int'), S((3, 4), kind='int')])
    case(f'{op}_int', op, [In((2, 3), kind='int'), In((3,), kind='int')], dtypes=('i64',))
    case(f'{op}_nonfinite', op, [In((8,), kind=('val', NONFINITE)), In((8,), kind=('val', NONFINITE[::-1]))])
case('ne_bool', 'ne', [In((3, 4), kind='bool', **BOOLS), In((4,), kind='bool', **BOOLS)], dtypes=('f32',))
for op in ('logical_and', 'logical_or', 'logical_xor'):
    case(f'{op}_int', op, [In((3, 4), kind='int'), T((3, 4), kind='int')], dtypes=('f32', 'i64'))
    case(f'{op}_bool', op, [In((3, 4), kind='bool', **BOOLS), In((4,), kind='bool', **BOOLS)], dtypes=('f32',))
    case(f'{op}_mixed', op, [In((2, 3), kind='int', dtype='i64'), In((2, 3), kind='bool', **BOOLS)], dtypes=('f32',))
case('logical_not', 'logical_not', [S((3, 4), kind='int')], dtypes=('f32', 'i64'))
case('logical_not_nonfinite', 'logical_not', [In((8,), kind=('val', NONFINITE))])
case('logical_not_bool', 'logical_not', [In((3, 4), kind='bool', **BOOLS)], dtypes=('f32',))
for op in ('isnan', 'isinf', 'isfinite'):
    case(f'{op}', op, [In((8,), kind=('val', NONFINITE))])
    case(f'{op}_t', op, [T((2, 4), kind=('val', [NONFINITE[:4], NONFINITE[4:]]))])
    case(f'{op}_int', op, [In((2, 3), kind='int')], dtypes=('i64',))
INF = float('inf')
case('nan_to_num', 'nan_to_num', [In((8,), kind=('val', NONFINITE))], fa=[0.0, INF, -INF])
case('nan_to_num_given', 'nan_to_num', [T((2, 4), kind=('val', [NONFINITE[:4], NONFINITE[4:]]))], fa=[1.5, 9.0, -7.0])
case('nan_to_num_int', 'nan_to_num', [In((2, 3), kind='int')], fa=[0.0, INF, -INF], dtypes=('i64',))
case('masked_fill', 'masked_fill', [T((3, 4)), In((4,), kind='bool', **BOOLS)], fa=[-2.5])
case('masked_fill_full', 'masked_fill', [S((3, 4)), In((3, 4), kind='bool', **BOOLS)], fa=[float('-inf')])
case('masked_fill_int', 'masked_fill', [In((3, 4), kind='int'), In((3, 1), kind='bool', **BOOLS)], fa=[7], dtypes=('i64',))
case('masked_fill_mask_bcast', 'masked_fill', [In((3,)), In((2, 3), kind='bool', **BOOLS)], fa=[0.0])
case('masked_fill_not_bool', 'masked_fill', [In((3,)), In((3,), kind='int', dtype='i64', grad=False)], fa=[0.0], error=True)
case('masked_select', 'masked_select', [T((3, 4)), In((3, 4), kind='bool', **BOOLS)])
case('masked_select_bcast', 'masked_select', [In((3, 4)), In((2, 1, 4), kind='bool', **BOOLS)])
case('masked_select_none', 'masked_select', [In((2, 3)), In((2, 3), kind=('val', [[False] * 3] * 2), **BOOLS)])
for op in ('any', 'all'):
    vals = [[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 0.5, -1.0], [0.0, 3.0, 0.0, 0.0]]
    case(f'{op}_rows', op, [In((3, 4), kind=('val', vals))], ia=[1, 0])
    case(f'{op}_cols_k', op, [T((4, 3), kind=('val', vals))], ia=[0, 1])
    case(f'{op}_nan', op, [In((8,), kind=('val', NONFINITE))], ia=[0, 0])
    case(f'{op}_bool', op, [In((3, 5), kind='bool', **BOOLS)], ia=[-1, 0], dtypes=('f32',))
    case(f'{op}_int', op, [In((3, 5), kind='int')], ia=[0, 0], dtypes=('i64',))
# reductions and scans
PROD_VALS = [[0.5, -2.0, 0.0, 1.5, 3.0], [1.2, 0.0, 0.0, -0.7, 2.0], [0.9, -1.1, 1.3, 0.8, -1.4]]
for op in ('prod', 'cumsum', 'cumprod'):
    ia = (lambda ax, k: [ax, k]) if op == 'prod' else (lambda ax, k: [ax])
    for axis in (0, 1, -1):
        case(f'{op}_ax{axis}', op, [In((3, 4, 5), kind='away')], ia=ia(axis, 0), tol=4)
    case(f'{op}_t_k', op, [T((4, 6), kind='away')], ia=ia(0, 1), tol=4)
    case(f'{op}_strided', op, [S((5, 4), axis=0, kind='away')], ia=ia(1, 0), tol=4)
    case(f'{op}_zeros', op, [In((3, 5), kind=('val', PROD_VALS))], ia=ia(1, 0), tol=4)
    case(f'{op}_zeros_t', op, [T((5, 3), kind=('val', [list(r) for r in zip(*PROD_VALS)]))], ia=ia(0, 0), tol=4)
    case(f'{op}_int', op, [In((3, 4), kind='int')], ia=ia(1, 0), dtypes=('i64',))
    case(f'{op}_0d', op, [In(())], ia=ia(0, 0))
    case(f'{op}_long', op, [In((3, 300), kind='pos')], ia=ia(1, 0), tol=50)
case('cumsum_bool', 'cumsum', [In((3, 4), kind='bool', **BOOLS)], ia=[1], dtypes=('f32',))
case('prod_empty', 'prod', [In((2, 0, 3))], ia=[1, 0])
case('cumsum_big', 'cumsum', [In((40, 1000), perm=(1, 0))], ia=[0], tol=50, **BIG)
for op in ('amax', 'amin'):
    for axis in (0, 1, -1):
        case(f'{op}_ax{axis}', op, [In((3, 4, 5), kind='distinct')], ia=[axis, 0])
    case(f'{op}_t_k', op, [T((4, 6), kind='distinct')], ia=[1, 1])
    case(f'{op}_ties', op, [In((2, 4), kind=('val', [[1.0, 3.0, 3.0, -2.0], [-1.0, -1.0, -1.0, 0.5]]))], ia=[1, 0])
    case(f'{op}_inf', op, [In((2, 3), kind=('val', [[INF, 1.0, INF], [-INF, -INF, -INF]]))], ia=[1, 0])
    case(f'{op}_int', op, [In((3, 4), kind='int')], ia=[0, 0], dtypes=('i64',))
for axis in (0, -1):
    case(f'std_ax{axis}', 'std', [In((4, 5))], ia=[axis, 0], tol=4)
case('std_t_k', 'std', [T((4, 6))], ia=[1, 1], tol=4)
for p, tag in ((2.0, '2'), (1.0, '1'), (INF, 'inf'), (-INF, 'ninf'), (3.0, '3'), (0.5, 'half'), (0.0, '0')):
    g = p != 0  # torch gives the count of nonzeros no gradient at all (None); nabla's is zero
    case(f'norm_p{tag}', 'norm', [In((3, 5), kind='away', grad=g)], fa=[p], ia=[1, 0], tol=4)
    case(f'norm_p{tag}_t_k', 'norm', [T((4, 3), kind='away', grad=g)], fa=[p], ia=[0, 1], tol=4)
    case(f'norm_all_p{tag}', 'norm_all', [In((2, 3, 4), kind='away', grad=g)], fa=[p], tol=4)
case('norm_zero_row', 'norm', [In((2, 3), kind=('val', [[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]]))], fa=[2.0], ia=[1, 0])
case('norm_zero_row_p3', 'norm', [In((2, 3), kind=('val', [[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]))], fa=[3.0], ia=[1, 0])
case('norm_all_zero', 'norm_all', [In((2, 2), kind=('val', [[0.0, 0.0], [0.0, 0.0]]))], fa=[2.0])
case('norm_int', 'norm', [In((2, 3), kind='int')], fa=[2.0], ia=[1, 0], dtypes=('i64',), error=True)
# sorting: stable over ties, NaN above every number, both directions
TIES = [[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.0, -1.0, 0.0, 0.0, 5.0, -1.0]]
for op in ('argsort', 'sort', 'sort_indices'):
    for desc in (0, 1):
        case(f'{op}_d{desc}', op, [In((3, 7), kind='distinct')], ia=[1, desc])
        case(f'{op}_ties_d{desc}', op, [In((2, 6), kind=('val', TIES))], ia=[1, desc])
        case(f'{op}_nan_d{desc}', op, [In((8,), kind=('val', NONFINITE))], ia=[0, desc])
        case(f'{op}_ax0_t_d{desc}', op, [T((5, 4), kind='distinct')], ia=[0, desc])
    case(f'{op}_int_ties', op, [In((4, 9), kind=('idx', 3), dtype='i64')], ia=[1, 0], dtypes=('i64',))
    case(f'{op}_long', op, [In((2, 1000), kind='distinct')], ia=[1, 1])
case('sort_strided_3d', 'sort', [In((3, 4, 5), kind='distinct', perm=(2, 0, 1))], ia=[1, 0])
for op in ('topk', 'topk_indices'):
    case(f'{op}_largest', op, [In((3, 8), kind='distinct')], ia=[3, 1, 1])
    case(f'{op}_smallest_ax0', op, [T((6, 4), kind='distinct')], ia=[2, 0, 0])
    case(f'{op}_all', op, [In((5,), kind='distinct')], ia=[5, 0, 1])
    case(f'{op}_zero', op, [In((2, 5), kind='distinct')], ia=[0, 1, 1])
case('topk_too_many', 'topk', [In((2, 5))], ia=[6, 1, 1], error=True)
# shapes
case('flip_one', 'flip', [In((3, 4))], ia=[1])
case('flip_two_t', 'flip', [T((3, 4, 2))], ia=[0, -1])
case('flip_int', 'flip', [In((2, 5), kind='int')], ia=[-1], dtypes=('i64',))
for shift in (1, -2, 7, 0):
    case(f'roll_{shift}'.replace('-', 'm'), 'roll', [In((3, 5))], ia=[shift, 1])
case('roll_t', 'roll', [T((4, 3))], ia=[3, 0])
case('repeat', 'repeat', [In((2, 3))], ia=[2, 3])
case('repeat_lead_t', 'repeat', [T((2, 3))], ia=[2, 1, 2])
case('repeat_0d', 'repeat', [In(())], ia=[3])
case('repeat_zero', 'repeat', [In((2, 3))], ia=[0, 2])
case('repeat_too_few', 'repeat', [In((2, 3))], ia=[2], error=True)
case('tile_short', 'tile', [In((2, 3))], ia=[2])
case('tile_long', 'tile', [S((2, 3))], ia=[2, 1, 2])
for which in (0, 1, 2):
    case(f'split_{which}', 'split', [In((7, 3))], ia=[3, 0, which])
    case(f'chunk_{which}', 'chunk', [T((4, 8))], ia=[3, 1, which])
case('split_last_t', 'split', [T((3, 5))], ia=[2, -1, 2])
case('chunk_more_than_size', 'chunk', [In((2, 3))], ia=[5, 1, 2])
PADS = [
    ('const_last', 0, In((2, 3, 5)), [1, 2]),
    ('const_two', 0, T((2, 3, 4)), [2, 0, 1, 1]),
    ('const_crop', 0, In((3, 6)), [-1, 2, 1, -2]),
    ('reflect_1d', 1, In((2, 3, 5)), [2, 3]),
    ('reflect_2d', 1, In((1, 2, 4, 5)), [1, 2, 3, 1]),
    ('replicate_1d', 2, T((2, 5, 3)), [3, 1]),
    ('replicate_2d', 2, In((1, 2, 3, 4)), [2, 2, 1, 3]),
    ('circular_1d', 3, In((2, 3, 5)), [2, 4]),
    ('circular_2d', 3, S((1, 2, 4, 5)), [1, 2, 3, 0]),
]
for tag, mode, x, pads in PADS:
    case(f'pad_{tag}', 'pad', [x], ia=[mode] + pads, fa=[0.75])
case('pad_const_int', 'pad', [In((2, 3), kind='int')], ia=[0, 1, 1], fa=[-3], dtypes=('i64',))
case('pad_reflect_too_big', 'pad', [In((2, 3, 4))], ia=[1, 4, 0], fa=[0.0], error=True)
for op in ('tril', 'triu'):
    for k in (0, 1, -1, 5):
        case(f'{op}_k{k}'.replace('-', 'm'), op, [In((4, 5))], ia=[k])
    case(f'{op}_batch_t', op, [T((2, 5, 3))], ia=[0])
    case(f'{op}_int', op, [In((3, 3), kind='int')], ia=[-1], dtypes=('i64',))
    case(f'{op}_1d', op, [In((4,))], ia=[0], error=True)
for off in (0, 1, -2, 9):
    case(f'diagonal_{off}'.replace('-', 'm'), 'diagonal', [In((4, 5))], ia=[off, 0, 1])
case('diagonal_3d', 'diagonal', [In((2, 3, 4))], ia=[1, 0, 2])
case('diagonal_3d_swapped_t', 'diagonal', [T((3, 2, 4))], ia=[-1, 2, 0])
# creation
for n, m in ((3, 3), (2, 4), (0, 2)):
    case(f'eye_{n}x{m}', 'eye', [], ia=[n, m], dt='f32', dtypes=('f32',))
case('eye_i64', 'eye', [], ia=[3, 2], dt='i64', dtypes=('f32',))
for start, end, steps in ((0.0, 1.0, 11), (-3.0, 7.5, 8), (1.0, -1.0, 5), (2.5, 2.5, 1), (0.0, 1.0, 0), (0.1, 0.9, 1001),
                         (0.0, 1.0, 1), (2.5, -7.0, 1)):
    # torch 1.13's integer linspace(-3, 7.5, 8) ends at 6, not at its end 7 (each half rounds its own
    # way); nabla's ends at 7, so that range is checked in the float dtypes only
    for d in ('f32', 'f64') if steps == 8 else ('f32', 'f64', 'i64'):
        case(f'linspace_{start}_{end}_{steps}_{d}'.replace('.', 'p').replace('-', 'm'), 'linspace', [], ia=[steps],
             fa=[start, end], dt=d, dtypes=('f32',))
# ends that no int64 holds are an error, as torch's
case('linspace_i64_overflow', 'linspace', [], ia=[3], fa=[0.0, 1e30], dt='i64', dtypes=('f32',), error=True)
case('one_hot', 'one_hot', [In((2, 3), kind=('idx', 4), dtype='i64', grad=False)], ia=[4], dtypes=('f32',))
case('one_hot_infer', 'one_hot', [In((5,), kind=('val', [0, 3, 1, 3, 2]), dtype='i64', grad=False)], ia=[-1],
     dtypes=('f32',))
case('one_hot_out_of_range', 'one_hot', [In((3,), kind=('val', [0, 4, 1]), dtype='i64', grad=False)], ia=[3],
     dtypes=('f32',), error=True)


# ---- advanced indexing: x[idx], index_put (x[idx] = v, accumulate), bool masks, masked_scatter ----
I32 = dict(dtype='i32', grad=False)
MASK = dict(dtype='bool', grad=False)
M34 = [[True, False, True, False], [False, False, False, True], [True, True, False, False]]
case('index_rows', 'index', [In((5, 4)), In((5,), kind=('val', [4, 0, -1, 2, 0]), **IDX)])
case('index_2d_bcast_t', 'index', [T((4, 5)), In((3, 1), kind=('val', [[0], [3], [-2]]), **IDX),
                                   In((2,), kind=('val', [4, -5]), **I32)])
case('index_3d_strided', 'index', [In((3, 4, 2), perm=(1, 2, 0)), In((2, 2), kind=('val', [[1, 0], [2, 2]]), **I32)])
case('index_expanded_idx', 'index', [S((3, 4)), In((2, 3), exp=(1, 3), kind=('val', [[1, 0, 2]]), **IDX),
                                     In((2, 3), exp=(2, 1), kind=('val', [[3], [-1]]), **IDX)])
case('index_0d_idx', 'index', [In((3, 4)), In((), kind=('val', 2), **IDX)])
case('index_empty_idx', 'index', [In((3, 4)), In((0,), kind=('val', []), **IDX)])
case('index_mask', 'index', [T((3, 4)), In((3, 4), kind=('val', M34), **MASK)])
case('index_mask_rows', 'index', [In((3, 4)), In((3,), kind=('val', [True, False, True]), **MASK)])
case('index_mask_then_int', 'index', [In((3, 4, 2)), In((3,), kind=('val', [True, False, True]), **MASK),
                                      In((2,), kind=('val', [1, 3]), **IDX)])
case('index_int', 'index', [In((4, 3), kind='int'), In((2, 2), kind=('val', [[3, 0], [1, 1]]), **IDX)], dtypes=('i64', 'i8'))
case('index_bool_data', 'index', [In((4, 3), kind='bool', **MASK), In((3,), kind=('val', [3, 0, 3]), **IDX)], dtypes=('f32',))
case('index_oob', 'index', [In((5, 4)), In((2,), kind=('val', [1, 5]), **IDX)], error=True)
case('index_oob_neg', 'index', [In((5, 4)), In((2,), kind=('val', [1, -6]), **IDX)], error=True)
case('index_bad_mask', 'index', [In((3, 4)), In((2,), kind=('val', [True, False]), **MASK)], error=True)
case('index_float_idx', 'index', [In((3, 4)), In((2,), kind=('val', [0.0, 1.0]), dtype='f32', grad=False)], error=True)
for acc in (0, 1):
    case(f'index_put_rows_a{acc}', 'index_put', [In((5, 4)), In((3, 4)), In((3,), kind=('val', [4, 0, -2]), **IDX)], ia=[acc])
    # a repeated index: the last write wins (torch's cpu), or the values add up; values get g at every index
    case(f'index_put_dup_a{acc}', 'index_put', [In((4, 3)), In((4, 3)), In((4,), kind=('val', [1, 3, 1, 1]), **IDX)], ia=[acc])
    case(f'index_put_bcast_t_a{acc}', 'index_put', [T((4, 5)), In((3,)), In((2, 1), kind=('val', [[0], [3]]), **IDX),
                                                    In((3,), kind=('val', [4, 0, 2]), **I32)], ia=[acc])
    case(f'index_put_3d_a{acc}', 'index_put', [In((2, 3, 4), perm=(2, 0, 1)), S((1, 4)),
                                               In((3,), kind=('val', [1, 0, 1]), **IDX), In((3,), kind=('val', [2, -1, 2]), **IDX)],
         ia=[acc])
    case(f'index_put_mask_0d_a{acc}', 'index_put', [In((3, 4)), In(()), In((3, 4), kind=('val', M34), **MASK)], ia=[acc])
    case(f'index_put_mask_rows_a{acc}', 'index_put', [S((3, 4)), In((4,)), In((3,), kind=('val', [True, False, True]), **MASK)],
         ia=[acc])
    case(f'index_put_mask_vals_a{acc}', 'index_put', [In((3, 4)), In((5,)), In((3, 4), kind=('val', M34), **MASK)], ia=[acc])
    case(f'index_put_int_a{acc}', 'index_put', [In((4, 3), kind='int'), In((3, 3), kind='int'),
                                                In((3,), kind=('val', [2, 0, 2]), **IDX)], ia=[acc], dtypes=('i64', 'i32', 'i8', 'u8'))
case('index_put_bool', 'index_put', [In((3, 4), kind='bool', **MASK), In((), kind=('val', True), **MASK),
                                     In((2,), kind=('val', [0, 2]), **IDX)], ia=[0], dtypes=('f32',))
case('index_put_expanded_x', 'index_put', [In((3, 4), exp=(1, 4)), In((2,)), In((2,), kind=('val', [2, 0]), **IDX),
                                           In((2,), kind=('val', [1, 3]), **IDX)], ia=[0])
case('index_put_empty_idx', 'index_put', [In((3, 4)), In(()), In((0,), kind=('val', []), **IDX)], ia=[1])
case('index_put_oob', 'index_put', [In((5, 4)), In(()), In((2,), kind=('val', [1, 5]), **IDX)], ia=[0], error=True)
case('index_put_oob_acc', 'index_put', [In((5, 4)), In(()), In((2,), kind=('val', [-6, 1]), **IDX)], ia=[1], error=True)
case('index_put_bad_values', 'index_put', [In((3, 4)), In((3,)), In((2,), kind=('val', [0, 1]), **IDX)], ia=[0], error=True)
case('index_put_too_many', 'index_put', [In((3,)), In(()), In((1,), kind=('val', [0]), **IDX),
                                         In((1,), kind=('val', [0]), **IDX)], ia=[0], error=True)
case('masked_scatter', 'masked_scatter', [T((3, 4)), In((3, 4), kind=('val', M34), **MASK), In((3, 5))])
case('masked_scatter_bcast', 'masked_scatter', [In((4,)), In((3, 4), kind=('val', M34), **MASK), S((7,))])
case('masked_scatter_mask_bcast', 'masked_scatter', [In((3, 4)), In((4,), kind=('val', [False, True, True, False]), **MASK),
                                                     In((2, 4))])
case('masked_scatter_int', 'masked_scatter', [In((3, 4), kind='int'), In((3, 4), kind=('val', M34), **MASK), In((9,), kind='int')],
     dtypes=('i64', 'i8'))
case('masked_scatter_short', 'masked_scatter', [In((3, 4)), In((3, 4), kind=('val', M34), **MASK), In((4,))], error=True)

# ---- i8: wrapping arithmetic, comparisons, reductions, casts both ways, promotion ----
WRAP_A = [[100, -100, 127, -128], [50, -1, 0, 7]]
WRAP_B = [[2, 3, -1, -1], [-128, 127, 5, -7]]
I8 = dict(dtype='i8', grad=False)
for op in ('add', 'sub', 'mul', 'maximum', 'minimum'):
    case(f'{op}_i8', op, [In((3, 4), kind='int'), T((3, 4), kind='int')], dtypes=('i8',))
    case(f'{op}_i8_wrap', op, [In((2, 4), kind=('val', WRAP_A)), In((2, 4), kind=('val', WRAP_B))], dtypes=('i8',))
    case(f'{op}_i8_bcast', op, [In((3, 4), kind='int'), In((4,), kind='int')], dtypes=('i8',))
for op in ('eq', 'lt', 'gt', 'ne', 'le', 'ge'):
    case(f'{op}_i8', op, [S((3, 4), kind='int'), In((4,), kind='int')], dtypes=('i8',))
for op in ('neg', 'abs', 'relu', 'sign', 'floor', 'round'):
    case(f'{op}_i8', op, [In((2, 4), kind=('val', WRAP_A))], dtypes=('i8',))
case('clamp_i8', 'clamp', [In((2, 4), kind=('val', WRAP_A))], fa=[-50, 60], dtypes=('i8',))
case('add_scalar_i8', 'add_scalar', [In((2, 4), kind=('val', WRAP_A))], fa=[300], dtypes=('i8',))
case('mul_scalar_i8', 'mul_scalar', [In((2, 4), kind=('val', WRAP_A))], fa=[3], dtypes=('i8',))
case('add_scalar_i8_frac', 'add_scalar', [In((2, 4), kind=('val', WRAP_A))], fa=[2.5], dtypes=('i8',))
case('where_i8', 'where', [In((2, 4), kind='bool', **MASK), In((2, 4), kind=('val', WRAP_A)), In((4,), kind='int')],
     dtypes=('i8',))
for op, ia in (('sum', [1, 0]), ('max', [0, 1]), ('min', [1, 0]), ('argmax', [1, 0]), ('argmin', [0, 0]), ('prod', [1, 0]),
               ('cumsum', [1]), ('amax', [0, 0]), ('any', [1, 0])):
    case(f'{op}_i8', op, [In((2, 4), kind=('val', WRAP_A))], ia=ia, dtypes=('i8',))
case('sum_all_i8', 'sum_all', [T((4, 2), kind=('val', [list(r) for r in zip(*WRAP_A)]))], dtypes=('i8',))
case('matmul_i8', 'matmul', [In((2, 4), kind=('val', WRAP_A)), In((4, 2), kind=('val', [list(r) for r in zip(*WRAP_B)]))],
     dtypes=('i8',))
for op in ('argsort', 'sort'):
    case(f'{op}_i8', op, [In((2, 4), kind=('val', WRAP_A))], ia=[1, 0], dtypes=('i8',))
case('flip_i8', 'flip', [In((2, 4), kind=('val', WRAP_A))], ia=[1], dtypes=('i8',))
case('cat_i8', 'cat', [In((2, 4), kind=('val', WRAP_A)), In((1, 4), kind='int')], ia=[0], dtypes=('i8',))
# casts: float to i8 truncates toward zero and wraps (torch's cpu, through int32: values beyond it and NaN give 0)
CAST_VALS = [-2.7, -0.5, 0.5, 2.7, 127.9, -128.9, 200.7, -200.7, 300.0, 1000.5, 1e10, -1e10, float('nan'),
             float('inf'), -float('inf'), 2147483648.0 + 256]
for src in ('f32', 'f64'):
    case(f'cast_{src}_i8', 'cast', [In((16,), kind=('val', CAST_VALS), dtype=src, grad=False)], dt='i8', dtypes=('f32',))
case('cast_i8_f32', 'cast', [T((2, 4), kind=('val', WRAP_A), **I8)], dt='f32', dtypes=('f32',))
case('cast_i8_u8', 'cast', [In((2, 4), kind=('val', WRAP_A), **I8)], dt='u8', dtypes=('f32',))
case('cast_u8_i8', 'cast', [In((4,), kind=('val', [0, 127, 128, 255]), dtype='u8', grad=False)], dt='i8', dtypes=('f32',))
case('cast_i64_i8', 'cast', [In((5,), kind=('val', [200, -200, 2**40 + 77, -2**40 - 77, 127]), **IDX)], dt='i8', dtypes=('f32',))
case('cast_i32_i8', 'cast', [In((3,), kind=('val', [70000, -129, 128]), **I32)], dt='i8', dtypes=('f32',))
case('cast_bool_i8', 'cast', [In((3,), kind=('val', [True, False, True]), **MASK)], dt='i8', dtypes=('f32',))
case('cast_i8_bool', 'cast', [In((3,), kind=('val', [0, -1, 5]), **I8)], dt='bool', dtypes=('f32',))
# promotion (i8 with u8 gives i16 in torch, which nabla lacks: test_core checks its i32)
for tag, op, da, db, ka, kb in (('i8_i64', 'add', 'i8', 'i64', 'int', 'int'), ('i8_i32', 'mul', 'i8', 'i32', 'int', 'int'),
                                ('i8_f32', 'mul', 'i8', 'f32', 'int', 'n'), ('f64_i8', 'sub', 'f64', 'i8', 'n', 'int'),
                                ('i8_bool', 'add', 'i8', 'bool', 'int', 'bool'), ('i8_i8_div', 'div', 'i8', 'i8', 'int',
                                                                                  ('val', [[1, 2, 3], [-4, 5, -7]]))):
    case(f'promote_{tag}', op, [In((2, 3), kind=ka, dtype=da, grad=da in FLOATS),
                                In((2, 3) if tag.endswith('div') else (3,), kind=kb, dtype=db, grad=db in FLOATS)], dtypes=('f32',))
case('promote_0d_i64_i8', 'add', [In((3,), kind='int', dtype='i8'), In((), kind='int', dtype='i64')], dtypes=('f32',))
case('promote_0d_f64_i8', 'mul', [In((3,), kind='int', dtype='i8'), In((), dtype='f64', grad=False)], dtypes=('f32',))


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: torch_ref.py OUTPUT_FILE')
    torch.set_num_threads(1)
    out = [f'NCASES {len(CASES)}']
    names = set()
    for c in CASES:
        assert c['name'] not in names, c['name']
        names.add(c['name'])
        run_case(c, out)
    tmp = sys.argv[1] + '.tmp'
    with open(tmp, 'w') as f:
        f.write('\n'.join(out) + '\n')
    os.replace(tmp, sys.argv[1])
    print(f'torch_ref.py: wrote {len(CASES)} cases to {sys.argv[1]} (torch {torch.__version__})')


if __name__ == '__main__':
    main()
