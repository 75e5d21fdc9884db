"""PyTorch reference for `gossip bench step`: the same MLP, batch and optimizer, one thread.

Prints one JSON object: {"seconds_per_step": ..., "torch": version}. Run by the benchmark with
Debian's python3 (python3-torch); not part of the build.
"""
import json
import sys
import time

import torch

layers = [int(v) for v in sys.argv[1].split("-")]
batch = int(sys.argv[2])
steps = int(sys.argv[3])
torch.set_num_threads(1)
torch.manual_seed(0)
mods = []
for i in range(1, len(layers)):
    mods.append(torch.nn.Linear(layers[i - 1], layers[i]))
    if i + 1 < len(layers):
        mods.append(torch.nn.ReLU())
model = torch.nn.Sequential(*mods)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(64, batch, layers[0])
y = torch.randint(0, layers[-1], (64, batch))


def step(i):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x[i % 64]), y[i % 64])
    loss.backward()
    opt.step()


for i in range(max(20, steps // 10)):
    step(i)
best = float("inf")
for rep in range(5):
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    best = min(best, (time.perf_counter() - t0) / steps)
print(json.dumps({"seconds_per_step": best, "torch": torch.__version__}))
