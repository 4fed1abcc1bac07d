#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_optim_torch.c: NAdam, RAdam, Adamax and Adadelta
over 100 steps, LBFGS on the Rosenbrock function, and the learning rates of LambdaLR,
CosineAnnealingWarmRestarts, CyclicLR, SequentialLR and ReduceLROnPlateau.

Usage: optim_ref.py OUTPUT_FILE

The file holds one record a line, which the C test looks up by name:

  V name n v1..vn    n values (doubles written so that they read back exactly)
  W name n w1..wn    n words (optimizer state names)

Names: "data.p0", "data.grad.<k>.<i>" (the parameters and the gradients of step k, from tests/nn_ref.py's
opt_data), "opt.<case>.p0" / ".p1" (the parameters after 100
steps), "opt.<case>.state.<name>" and "opt.<case>.state_names" (torch's state_dict()['state']),
"opt.<case>.lr" (a schedule's lr after each step), "sched.<case>.lr.<group>" and
"sched.<case>.momentum" (61 values: after construction and after each of 60 steps),
"sched.<case>.metrics" (what a plateau schedule is fed), "lbfgs.<case>.x.<step>" (the point
after each step), ".loss" (each step's first loss) and ".evals" (closure calls in each step),
"clip.ga" / ".gb" and "clip.ga_clipped" / ".gb_clipped" (clip_grad_value_ at 1.5).
A name the C test asks for that is missing here is a failure; the test fails (not skips) when
this script cannot run.
"""
import os
import sys
import warnings
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn_ref  # noqa: E402  (the optimizers' data, the same as tests/test_nn_torch.c's)

OUT = []
STEPS = 100
EPOCHS = 60


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def put(name, values):
    t = values if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=torch.float64)
    flat = t.detach().reshape(-1).to(torch.float64).tolist()
    OUT.append(' '.join(['V', name, str(len(flat))] + [repr(float(v)) for v in flat]))


def put_words(name, words):
    OUT.append(' '.join(['W', name, str(len(words))] + list(words)))


# ---------------------------------------------------------------- optimizers
def opt_data():
    """nn_ref.py's opt_data (two parameters [7, 5] and [5], 100 pairs of gradients), written here too."""
    p0, p1, grads = nn_ref.opt_data()
    put('data.p0', p0)
    put('data.p1', p1)
    for k, (g0, g1) in enumerate(grads):
        put(f'data.grad.{k}.0', g0)
        put(f'data.grad.{k}.1', g1)
    return p0, p1, grads


def run_opt(name, make_opt, data, make_sched=None):
    p0, p1, grads = data
    params = [p0.clone().requires_grad_(True), p1.clone().requires_grad_(True)]
    opt = make_opt(params)
    sched = make_sched(opt) if make_sched else None
    lrs = [opt.param_groups[0]['lr']]
    for k in range(STEPS):
        for p, g in zip(params, grads[k]):
            p.grad = g.clone()
        opt.step()
        if sched:
            sched.step()
        lrs.append(opt.param_groups[0]['lr'])
    pre = 'opt.' + name
    put(pre + '.p0', params[0])
    put(pre + '.p1', params[1])
    if sched:
        put(pre + '.lr', lrs)
    words = []
    sd = opt.state_dict()['state']
    for idx in sorted(sd):
        for key, v in sd[idx].items():
            words.append(f'{idx}.{key}')
            put(f'{pre}.state.{idx}.{key}', torch.as_tensor(v))
    put_words(pre + '.state_names', words)


def groups(cls, **kw):
    """Two parameter groups: p0 with the optimizer's settings, p1 with its own lr and weight decay."""
    return lambda p: cls([{'params': [p[0]]}, {'params': [p[1]], 'lr': 0.01, 'weight_decay': 0.05}], **kw)


O = torch.optim
OPTIMIZERS = {
    'nadam_default': lambda p: O.NAdam(p),
    'nadam_wd': lambda p: O.NAdam(p, lr=1e-2, weight_decay=0.1),
    'nadam_all': lambda p: O.NAdam(p, lr=5e-3, betas=(0.8, 0.99), eps=1e-6, momentum_decay=0.01),
    'radam_default': lambda p: O.RAdam(p),
    'radam_wd': lambda p: O.RAdam(p, lr=1e-2, weight_decay=0.05),
    'radam_betas': lambda p: O.RAdam(p, lr=1e-2, betas=(0.5, 0.9), eps=1e-6),
    'adamax_default': lambda p: O.Adamax(p),
    'adamax_all': lambda p: O.Adamax(p, lr=1e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    'adadelta_default': lambda p: O.Adadelta(p),
    'adadelta_all': lambda p: O.Adadelta(p, lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1),
    'adadelta_rho0': lambda p: O.Adadelta(p, lr=0.1, rho=0.0),
    'groups_nadam': groups(O.NAdam, lr=2e-3),
    'groups_radam': groups(O.RAdam, lr=1e-2),
    'groups_adamax': groups(O.Adamax, lr=2e-3),
    'groups_adadelta': groups(O.Adadelta, lr=0.5, weight_decay=0.01),
}

# optimizers driven by a schedule: the rate (and one-cycle's beta1) read at every step
OPT_SCHEDULES = {
    'nadam_onecycle': (lambda p: O.NAdam(p), lambda o: O.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=100)),
    'radam_cyclic': (lambda p: O.RAdam(p), lambda o: O.lr_scheduler.CyclicLR(o, 1e-3, 1e-2, step_size_up=10,
                                                                               cycle_momentum=False)),
    'adadelta_plateau_free': (lambda p: O.Adadelta(p), lambda o: O.lr_scheduler.LambdaLR(o, lambda e: 1 / (1 + 0.1 * e))),
}


# ---------------------------------------------------------------- schedules
def lambda_fn(e):
    """The C test's lambda_fn: a decay, then a reciprocal."""
    return 0.95 ** e if e < 30 else 0.5 / (1 + e)


def plateau_metrics(name):
    """Falls, then wanders: plateaus to detect (a fixed list the C test reads from the file)."""
    seed(name)
    noise = torch.rand(EPOCHS, dtype=torch.float64).tolist()
    return [1.0 / (1 + k) if k < 12 else 0.08 + 0.01 * noise[k] - (0.02 if k in (30, 31, 45) else 0) for k in range(EPOCHS)]


S = O.lr_scheduler
SCHEDULES = {
    'lambda': lambda o: S.LambdaLR(o, lambda_fn),
    'warm_restarts': lambda o: S.CosineAnnealingWarmRestarts(o, T_0=10, eta_min=1e-3),
    'warm_restarts_mult': lambda o: S.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2),
    'warm_restarts_mult3': lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=3, eta_min=0.005),
    'cyclic_triangular': lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=7),
    'cyclic_triangular2': lambda o: S.CyclicLR(o, 0.005, 0.05, step_size_up=5, step_size_down=10, mode='triangular2',
                                               cycle_momentum=False),
    'cyclic_exp_range': lambda o: S.CyclicLR(o, 0.01, 0.2, step_size_up=6, mode='exp_range', gamma=0.97,
                                             base_momentum=0.7, max_momentum=0.95),
    'sequential': lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=10),
                                               S.ExponentialLR(o, gamma=0.9)], milestones=[10]),
    'sequential3': lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.5, total_iters=5),
                                                S.CosineAnnealingWarmRestarts(o, T_0=8, eta_min=0.001),
                                                S.StepLR(o, step_size=7, gamma=0.5)], milestones=[5, 30]),
    'sequential_cosine': lambda o: S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.8),
                                                      S.CosineAnnealingLR(o, T_max=40, eta_min=0.001),
                                                      S.MultiStepLR(o, milestones=[5, 9], gamma=0.3)],
                                                  milestones=[8, 25]),
    'plateau': lambda o: S.ReduceLROnPlateau(o),
    'plateau_all': lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=3, threshold=0.01, threshold_mode='abs',
                                                 cooldown=2, min_lr=0.004),
    'plateau_max': lambda o: S.ReduceLROnPlateau(o, mode='max', factor=0.3, patience=2, cooldown=1, min_lr=0.005),
    'plateau_patience0': lambda o: S.ReduceLROnPlateau(o, patience=0, factor=0.8, eps=0.002),
}


def run_sched(name, make):
    p = [torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)]
    opt = torch.optim.SGD([{'params': [p[0]]}, {'params': [p[1]], 'lr': 0.02}], lr=0.1, momentum=0.9)
    s = make(opt)
    plateau = isinstance(s, S.ReduceLROnPlateau)
    metrics = plateau_metrics(name) if plateau else None
    lrs = [[g['lr'] for g in opt.param_groups]]
    moms = [opt.param_groups[0]['momentum']]
    for e in range(EPOCHS):
        opt.step()
        if plateau:
            s.step(metrics[e])
        else:
            s.step()
        lrs.append([g['lr'] for g in opt.param_groups])
        moms.append(opt.param_groups[0]['momentum'])
    pre = 'sched.' + name
    for g in range(2):
        put(f'{pre}.lr.{g}', [row[g] for row in lrs])
    put(pre + '.momentum', moms)
    if plateau:
        put(pre + '.metrics', metrics)


# ---------------------------------------------------------------- LBFGS on Rosenbrock
def rosenbrock(xs):
    x = torch.cat([t.reshape(-1) for t in xs])
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


LBFGS = {
    # name: (start point split into parameters, options, steps)
    'none': ([[-1.5, 2.0]], {}, 25),
    'none_lr': ([[-1.5, 2.0]], {'lr': 0.5, 'max_iter': 10, 'history_size': 5}, 25),
    'wolfe': ([[-1.5, 2.0]], {'line_search_fn': 'strong_wolfe'}, 12),
    'wolfe_short': ([[-1.2, 1.0]], {'line_search_fn': 'strong_wolfe', 'max_iter': 4, 'history_size': 3}, 25),
    'wolfe_4d': ([[-1.0, 0.5], [[1.5], [-0.5]]], {'line_search_fn': 'strong_wolfe', 'tolerance_change': 1e-12}, 10),
}


def run_lbfgs(name, start, kw, steps):
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in start]
    opt = torch.optim.LBFGS(xs, **kw)
    evals = [0]

    def closure():
        opt.zero_grad()
        loss = rosenbrock(xs)
        loss.backward()
        evals[0] += 1
        return loss

    losses, counts = [], []
    for k in range(steps):
        evals[0] = 0
        losses.append(float(opt.step(closure)))
        counts.append(evals[0])
        put(f'lbfgs.{name}.x.{k}', torch.cat([t.detach().reshape(-1) for t in xs]))
    put(f'lbfgs.{name}.loss', losses)
    put(f'lbfgs.{name}.evals', counts)


# ---------------------------------------------------------------- clipping by value
def clipping():
    seed('clip_value')
    ga, gb = torch.randn(4, 3) * 2, torch.randn(5) * 2
    pa, pb = torch.zeros(4, 3, requires_grad=True), torch.zeros(5, requires_grad=True)
    pa.grad, pb.grad = ga.clone(), gb.clone()
    torch.nn.utils.clip_grad_value_([pa, pb], 1.5)
    put('clip.ga', ga)
    put('clip.gb', gb)
    put('clip.ga_clipped', pa.grad)
    put('clip.gb_clipped', pb.grad)


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: optim_ref.py OUTPUT_FILE')
    torch.set_default_dtype(torch.float32)
    # SequentialLR steps a child with an epoch at its milestone, which torch 1.13 warns of
    warnings.filterwarnings('ignore', message='The epoch parameter', category=UserWarning)
    data = opt_data()
    for name, make in OPTIMIZERS.items():
        run_opt(name, make, data)
    for name, (make, make_sched) in OPT_SCHEDULES.items():
        run_opt(name, make, data, make_sched)
    for name, make in SCHEDULES.items():
        run_sched(name, make)
    for name, (start, kw, steps) in LBFGS.items():
        run_lbfgs(name, start, kw, steps)
    clipping()
    with open(sys.argv[1], 'w') as f:
        f.write('\n'.join(OUT) + '\n')


if __name__ == '__main__':
    main()
