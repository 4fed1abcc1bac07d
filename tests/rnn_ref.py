#!/usr/bin/python3
"""Writes the PyTorch reference for tests/test_rnn_torch.c: torch.nn.RNN, LSTM and GRU forward
and backward.

Usage: rnn_ref.py OUTPUT_FILE

Same store as tests/nn_ref.py (T and S records, read by tests/ref_store.h). The case list is
"rnn.cases"; each case "rnn.<case>" has
  config   kind (RNN, LSTM, GRU), nonlinearity, input_size, hidden_size, num_layers, bias,
           batch_first, bidirectional, dropout, initial states given (0/1), unbatched (0/1)
  params   torch's parameter names in state_dict order; param.<name> the values
  x, h0, c0 (with initial states), y, h_n, c_n (LSTM), and upstream gradients gy, gh, gc
  grad.x, grad.h0, grad.c0, grad.<param>: the gradients of
  sum(y * gy) + sum(h_n * gh) (+ sum(c_n * gc))
Values are f32 numbers, the arithmetic f64 (the module runs in double on the f32 values), so the
reference carries no f32 rounding of its own. Dropout cases run in evaluation mode.
"""
import sys
import zlib

import torch

sys.path.insert(0, __file__.rsplit('/', 1)[0])
from nn_ref import OUT, put, put_words  # noqa: E402  (the one writer of the format)

T, N, IN, H = 5, 3, 4, 6

# name: kind, nonlinearity, layers, bias, batch_first, bidirectional, dropout, h0, unbatched
CASES = {
    'rnn_tanh': ('RNN', 'tanh', 1, 1, 0, 0, 0.0, 0, 0),
    'rnn_relu_h0': ('RNN', 'relu', 1, 1, 0, 0, 0.0, 1, 0),
    'rnn_relu_2l_bi_bf_h0': ('RNN', 'relu', 2, 1, 1, 1, 0.0, 1, 0),
    'rnn_tanh_2l_nobias_h0': ('RNN', 'tanh', 2, 0, 0, 0, 0.0, 1, 0),
    'rnn_tanh_unbatched_bi': ('RNN', 'tanh', 1, 1, 0, 1, 0.0, 0, 1),
    'lstm': ('LSTM', 'tanh', 1, 1, 0, 0, 0.0, 0, 0),
    'lstm_h0': ('LSTM', 'tanh', 1, 1, 0, 0, 0.0, 1, 0),
    'lstm_2l_h0': ('LSTM', 'tanh', 2, 1, 0, 0, 0.0, 1, 0),
    'lstm_bi_bf': ('LSTM', 'tanh', 1, 1, 1, 1, 0.0, 0, 0),
    'lstm_2l_bi_bf_h0': ('LSTM', 'tanh', 2, 1, 1, 1, 0.0, 1, 0),
    'lstm_2l_bi_nobias': ('LSTM', 'tanh', 2, 0, 0, 1, 0.0, 0, 0),
    'lstm_unbatched': ('LSTM', 'tanh', 1, 1, 0, 0, 0.0, 0, 1),
    'lstm_unbatched_2l_bi_h0': ('LSTM', 'tanh', 2, 1, 0, 1, 0.0, 1, 1),
    'lstm_2l_dropout_eval': ('LSTM', 'tanh', 2, 1, 0, 0, 0.5, 1, 0),
    'gru': ('GRU', 'tanh', 1, 1, 0, 0, 0.0, 0, 0),
    'gru_h0_bf': ('GRU', 'tanh', 1, 1, 1, 0, 0.0, 1, 0),
    'gru_2l_bi_h0': ('GRU', 'tanh', 2, 1, 0, 1, 0.0, 1, 0),
    'gru_2l_nobias_bf': ('GRU', 'tanh', 2, 0, 1, 0, 0.0, 0, 0),
    'gru_unbatched_bi_h0': ('GRU', 'tanh', 1, 1, 0, 1, 0.0, 1, 1),
    'gru_2l_bi_dropout_eval': ('GRU', 'tanh', 2, 1, 1, 1, 0.3, 0, 0),
}


def f32(shape):
    """Standard normal values rounded to f32, held in f64."""
    return torch.randn(shape).double()


def case(name, kind, nonlin, layers, bias, batch_first, bidir, dropout, init, unbatched):
    pre = 'rnn.' + name
    torch.manual_seed(zlib.crc32(pre.encode()))
    put_words(pre + '.config', [kind, nonlin] + [str(v) for v in (IN, H, layers, bias, batch_first, bidir)]
              + [repr(dropout), str(init), str(unbatched)])
    extra = {'nonlinearity': nonlin} if kind == 'RNN' else {}
    m = getattr(torch.nn, kind)(IN, H, num_layers=layers, bias=bool(bias), batch_first=bool(batch_first),
                                bidirectional=bool(bidir), dropout=dropout, **extra).double()
    m.eval()  # no effect without dropout; the dropout cases check evaluation mode
    put_words(pre + '.params', list(m.state_dict().keys()))
    for pname, p in m.named_parameters():
        put(f'{pre}.param.{pname}', p.float())
    d = 2 if bidir else 1
    xs = (T, IN) if unbatched else (N, T, IN) if batch_first else (T, N, IN)
    hs = (d * layers, H) if unbatched else (d * layers, N, H)
    x = f32(xs).requires_grad_()
    inputs = [x]
    put(pre + '.x', x.float())
    lstm = kind == 'LSTM'
    hx = None
    if init:
        h0 = f32(hs).requires_grad_()
        put(pre + '.h0', h0.float())
        inputs.append(h0)
        hx = h0
        if lstm:
            c0 = f32(hs).requires_grad_()
            put(pre + '.c0', c0.float())
            inputs.append(c0)
            hx = (h0, c0)
    y, hn = m(x, hx)
    outs = [y] + (list(hn) if lstm else [hn])
    ups = [f32(o.shape) for o in outs]
    loss = sum((o * g).sum() for o, g in zip(outs, ups))
    grads = torch.autograd.grad(loss, inputs + list(m.parameters()))
    for what, t in zip(['y', 'h_n', 'c_n'], outs):
        put(f'{pre}.{what}', t.float())
    for what, g in zip(['gy', 'gh', 'gc'], ups):
        put(f'{pre}.{what}', g.float())
    names = ['x', 'h0', 'c0'][:len(inputs)] + [pname for pname, _ in m.named_parameters()]
    for what, g in zip(names, grads):
        put(f'{pre}.grad.{what}', g.float())


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: rnn_ref.py OUTPUT_FILE')
    put_words('rnn.cases', list(CASES))
    for name, cfg in CASES.items():
        case(name, *cfg)
    with open(sys.argv[1], 'w') as f:
        f.write('\n'.join(OUT) + '\n')


if __name__ == '__main__':
    main()
