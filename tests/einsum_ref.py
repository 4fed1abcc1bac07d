#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_einsum_torch.c: torch.einsum's values, and the
gradients of every float input, for the equations in CASES.

Usage: einsum_ref.py OUTPUT_FILE

Each case is a block of lines:

  case NAME NOPS           a case and its operand count
  eq EQUATION              the rest of the line, spaces and all
  in K DTYPE T NDIM D1..DNDIM V1..VN
                           operand K's leaf as stored (contiguous); T = 1: the operand is the
                           leaf with its last two axes swapped (a non-contiguous view), and the
                           dimensions are the stored ones
  out DTYPE NDIM D1..DNDIM V1..VN
  up V1..VN                the gradient fed into the output (float outputs)
  grad K V1..VN            the gradient of leaf K (float leaves), in the leaf's stored layout
  end

Values are written so that they read back exactly. Torch's einsum refuses mixed dtypes, so
for a mixed case the reference runs on the operands promoted as nabla promotes them (torch's
result_type). The test fails (not skips) when this script cannot run.
"""
import sys
import zlib

import torch

F32, F64, I64 = 'f32', 'f64', 'i64'
DT = {F32: torch.float32, F64: torch.float64, I64: torch.int64}


def op(shape, dtype=F32, t=False):
    return (tuple(shape), dtype, t)


# (name, equation, operands); an operand is op(shape, dtype, transposed) with the shape the
# operand has (the leaf's last two axes are swapped from it when transposed)
CASES = [
    ('matmul', 'ij,jk->ik', [op([3, 4]), op([4, 5])]),
    ('matmul_f64', 'ij,jk->ik', [op([3, 4], F64), op([4, 5], F64)]),
    ('matmul_implicit', 'ij,jk', [op([3, 4]), op([4, 5])]),
    ('matvec', 'ij,j->i', [op([3, 4]), op([4])]),
    ('bmm', 'bij,bjk->bik', [op([2, 3, 4]), op([2, 4, 5])]),
    ('bmm_f64', 'bij,bjk->bik', [op([2, 3, 4], F64), op([2, 4, 5], F64)]),
    ('bilinear', 'bn,anm,bm->ba', [op([3, 4]), op([2, 4, 5]), op([3, 5])]),
    ('bilinear_f64', 'bn,anm,bm->ba', [op([3, 4], F64), op([2, 4, 5], F64), op([3, 5], F64)]),
    ('outer', 'i,j->ij', [op([3]), op([4])]),
    ('outer_implicit', 'i,j', [op([3]), op([4])]),
    ('outer_4d', 'ij,kl->ijkl', [op([2, 3]), op([4, 2])]),
    ('trace', 'ii', [op([4, 4])]),
    ('trace_explicit_f64', 'ii->', [op([4, 4], F64)]),
    ('diagonal', 'ii->i', [op([4, 4])]),
    ('diagonal_size1', 'ii->i', [op([1, 1])]),
    ('diagonal_3d', 'iij->ij', [op([3, 3, 4])]),
    ('diagonal_batched', 'bii->bi', [op([2, 3, 3])]),
    ('diagonal_then_contract', 'ii,ij->j', [op([3, 3]), op([3, 4])]),
    ('transpose', 'ij->ji', [op([3, 4])]),
    ('transpose_implicit', 'ji', [op([3, 4])]),
    ('permute_3d', 'ijk->kji', [op([2, 3, 4])]),
    ('identity', 'ij->ij', [op([3, 4])]),
    ('sum_all', 'ij->', [op([3, 4])]),
    ('sum_rows', 'ij->j', [op([3, 4])]),
    ('sum_cols_f64', 'ij->i', [op([3, 4], F64)]),
    ('sum_first', 'ijk,jl->l', [op([2, 3, 4]), op([3, 5])]),
    ('dot', 'i,i->', [op([5])]*2),
    ('dot_implicit_f64', 'i,i', [op([5], F64)]*2),
    ('frobenius', 'ij,ij->', [op([3, 4])]*2),
    ('hadamard', 'ij,ij->ij', [op([3, 4])]*2),
    ('hadamard_f64', 'ij,ij->ij', [op([3, 4], F64)]*2),
    ('broadcast_hadamard', 'ij,ij->ij', [op([3, 1]), op([1, 4])]),
    ('broadcast_contract', 'ij,jk->ik', [op([3, 1]), op([4, 5])]),
    ('size1_contract', 'ij,jk->ik', [op([3, 1]), op([1, 4])]),
    ('scalar_operand', 'i,->i', [op([3]), op([])]),
    ('ellipsis_matmul', '...ij,...jk->...ik', [op([2, 3, 4]), op([2, 4, 5])]),
    ('ellipsis_broadcast', '...ij,...jk->...ik', [op([2, 1, 3, 4]), op([5, 4, 6])]),
    ('ellipsis_broadcast_f64', '...ij,...jk->...ik', [op([2, 1, 3, 4], F64), op([5, 4, 6], F64)]),
    ('ellipsis_batch', 'b...,b...->b...', [op([2, 3, 4]), op([2, 3, 4])]),
    ('ellipsis_implicit', '...ij,...jk', [op([2, 3, 4]), op([2, 4, 5])]),
    ('ellipsis_summed', '...ij->ij', [op([2, 3, 4])]),
    ('ellipsis_middle', 'i...j,j...->i...', [op([2, 3, 4]), op([4, 3])]),
    ('ellipsis_dot_broadcast', '...i,...i->...', [op([3, 1, 4]), op([2, 4])]),
    ('ellipsis_empty', '...ij,...jk->...ik', [op([3, 4]), op([4, 5])]),
    ('attention_scores', 'bhqd,bhkd->bhqk', [op([2, 2, 3, 4]), op([2, 2, 5, 4])]),
    ('attention_values', 'bhqk,bhkd->bhqd', [op([2, 2, 3, 5]), op([2, 2, 5, 4])]),
    ('chain3', 'ij,jk,kl->il', [op([5, 6]), op([6, 7]), op([7, 8])]),
    ('chain3_tiny', 'ij,jk,kl->il', [op([30, 2]), op([2, 30]), op([30, 3])]),
    ('chain3_tiny_f64', 'ij,jk,kl->il', [op([30, 2], F64), op([2, 30], F64), op([30, 3], F64)]),
    ('chain4', 'ij,jk,kl,lm->im', [op([4, 5]), op([5, 2]), op([2, 6]), op([6, 3])]),
    ('chain4_tiny', 'ab,bc,cd,de->ae', [op([20, 30]), op([30, 2]), op([2, 30]), op([30, 20])]),
    ('chain4_f64', 'ab,bc,cd,de->ae', [op([6, 7], F64), op([7, 2], F64), op([2, 7], F64), op([7, 5], F64)]),
    ('three_hadamard', 'ij,ij,ij->ij', [op([3, 4])]*3),
    ('three_elementwise', 'i,i,i->i', [op([5])]*3),
    ('three_shared_row', 'ij,ik,il->i', [op([3, 4]), op([3, 5]), op([3, 2])]),
    ('three_shared_all', 'bi,bj,bk->', [op([3, 2]), op([3, 4]), op([3, 5])]),
    ('three_repeat', 'ijk,ijk,ijk->', [op([2, 3, 4])]*3),
    ('three_kept', 'ij,jk,ki->ijk', [op([2, 3]), op([3, 4]), op([4, 2])]),
    ('noncontig_matmul', 'ij,jk->ik', [op([3, 4], F32, True), op([4, 5])]),
    ('noncontig_bmm', 'bij,bjk->bik', [op([2, 3, 4], F32, True), op([2, 4, 5], F32, True)]),
    ('noncontig_bmm_f64', 'bij,bjk->bik', [op([2, 3, 4], F64, True), op([2, 4, 5], F64, True)]),
    ('noncontig_diagonal', 'ii->i', [op([4, 4], F32, True)]),
    ('noncontig_identity', 'ij->ij', [op([3, 4], F32, True)]),
    ('noncontig_chain3', 'ij,jk,kl->il', [op([5, 6], F32, True), op([6, 2]), op([2, 8], F32, True)]),
    ('spaces', ' ij , jk -> ik ', [op([3, 4]), op([4, 5])]),
    ('upper_case', 'Ab,bC->AC', [op([3, 4]), op([4, 5])]),
    ('mixed_case_implicit', 'aB,ac', [op([3, 4]), op([3, 5])]),
    ('i64_matmul', 'ij,jk->ik', [op([3, 4], I64), op([4, 5], I64)]),
    ('i64_trace', 'ii', [op([4, 4], I64)]),
    ('i64_bilinear', 'bn,anm,bm->ba', [op([3, 4], I64), op([2, 4, 5], I64), op([3, 5], I64)]),
    ('i64_hadamard', 'ij,ij->ij', [op([3, 4], I64)]*2),
    ('i64_f32_matmul', 'ij,jk->ik', [op([3, 4], I64), op([4, 5])]),
    ('f32_f64_matmul', 'ij,jk->ik', [op([3, 4]), op([4, 5], F64)]),
]


def fmt(t):
    flat = t.detach().reshape(-1)
    if t.dtype == torch.int64:
        return ' '.join(str(int(v)) for v in flat.tolist())
    return ' '.join(repr(float(v)) for v in flat.to(torch.float64).tolist())


def dtype_name(d):
    return {v: k for k, v in DT.items()}[d]


def case(name, eq, spec, out):
    torch.manual_seed(zlib.crc32(name.encode()))
    leaves, operands = [], []
    out.append(f'case {name} {len(spec)}')
    out.append(f'eq {eq}')
    for k, (shape, dtype, tr) in enumerate(spec):
        stored = list(shape)
        if tr:
            stored[-1], stored[-2] = stored[-2], stored[-1]
        if dtype == I64:
            leaf = torch.randint(-3, 4, stored, dtype=torch.int64)
        else:
            leaf = torch.randn(stored, dtype=DT[dtype]).requires_grad_(True)
        leaves.append(leaf)
        operands.append(leaf.transpose(-1, -2) if tr else leaf)
        dims = ' '.join(str(d) for d in stored)
        out.append(f'in {k} {dtype} {int(tr)} {len(stored)} {dims} {fmt(leaf)}'.replace('  ', ' '))
    promoted = operands[0].dtype
    for o in operands[1:]:
        promoted = torch.promote_types(promoted, o.dtype)
    y = torch.einsum(eq, [o.to(promoted) for o in operands])
    dims = ' '.join(str(d) for d in y.shape)
    out.append(f'out {dtype_name(y.dtype)} {y.dim()} {dims} {fmt(y)}'.replace('  ', ' '))
    floats = [k for k, leaf in enumerate(leaves) if leaf.dtype != torch.int64]
    if y.dtype != torch.int64:
        up = torch.randn(y.shape, dtype=y.dtype)
        out.append(f'up {fmt(up)}')
        grads = torch.autograd.grad(y, [leaves[k] for k in floats], up)
        for k, g in zip(floats, grads):
            out.append(f'grad {k} {fmt(g)}')
    out.append('end')


def main():
    out = []
    for name, eq, spec in CASES:
        case(name, eq, spec, out)
    with open(sys.argv[1], 'w') as f:
        f.write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
