# The PyTorch side of bench/run_train.sh: what `nabla train` does for one epoch (the 784-128-10
# MLP, AdamW 1e-3, batch 64, a shuffled DataLoader with 2 workers, then the test accuracy), and
# the time from process start to the first training step. Prints "key value" lines.
import time
T0 = time.time()
import gzip, sys
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

def idx(path, images):
    with gzip.open(path) as f:
        data = f.read()
    a = np.frombuffer(data, np.uint8, offset=16 if images else 8)
    return torch.from_numpy(a.reshape(-1, 1, 28, 28).astype(np.float32) / 255) if images else torch.from_numpy(a.astype(np.int64))

root = sys.argv[1] if len(sys.argv) > 1 else '/usr/share/datasets/fashion-mnist'
xt, yt = idx(root + '/train-images-idx3-ubyte.gz', 1), idx(root + '/train-labels-idx1-ubyte.gz', 0)
xs, ys = idx(root + '/t10k-images-idx3-ubyte.gz', 1), idx(root + '/t10k-labels-idx1-ubyte.gz', 0)
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(xt, yt), batch_size=64, shuffle=True, num_workers=2)
first = None
t_epoch = time.time()
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if first is None:
        first = time.time() - T0
epoch = time.time() - t_epoch
with torch.no_grad():
    acc = (model(xs).argmax(1) == ys).float().mean().item()
print(f'torch_startup_to_first_step_s {first:.4f}')
print(f'torch_epoch_s {epoch:.4f}')
print(f'torch_test_accuracy {acc:.4f}')
