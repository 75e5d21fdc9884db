"""PyTorch reference for `gossip bench step`: the same layers, batch and optimizer, one thread.

Usage: torch_step.py MODEL BATCH STEPS [DEVICE [PRECISION]], where MODEL is MLP sizes
("784-256-128-10") or a run config (YAML) whose `model:` section is built layer by layer exactly
as gossip builds it (same types, fields and defaults; see docs/config.md), DEVICE is cpu (the
default) or cuda, and PRECISION (CUDA) is fp32 (TF32 off for cuDNN and matrix products: the
default), tf32 (on for both) or bf16 (torch.autocast with bfloat16).
Prints one JSON object: {"seconds_per_step": ..., "torch": version, "params": n, ...}, or
{"unavailable": why} when DEVICE is cuda and this PyTorch sees no CUDA device. Run by the benchmark with Debian's
python3 (python3-torch, python3-yaml); not part of the build.

One thread means one for everything: torch.set_num_threads(1) covers PyTorch's own (OpenMP)
kernels, but Debian's torch does its matrix products in the system BLAS (OpenBLAS), whose thread
pool it does not size, so OpenBLAS would run them on every core. The variables below, set before
torch (and with it OpenBLAS) loads, keep it to one.
"""
import json
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402  (after the thread variables)


def out_size(n, k, stride, pad):
    return (n + 2 * pad - k) // stride + 1


def mlp(sizes):
    mods = []
    for i in range(1, len(sizes)):
        mods.append(torch.nn.Linear(sizes[i - 1], sizes[i]))
        if i + 1 < len(sizes):
            mods.append(torch.nn.ReLU())
    return mods, [sizes[0]], sizes[-1]


class BasicBlock(torch.nn.Module):
    """gossip's residual layer: conv3x3(stride)-bn-relu-conv3x3-bn plus the input (through
    conv1x1(stride)-bn where the shape changes), then relu; convolutions with biases, as ours."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.shortcut = torch.nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, 0),
                                                torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def from_config(path):
    import yaml

    with open(path) as f:
        model = (yaml.safe_load(f) or {}).get("model", {"layers": [784, 256, 128, 10]})
    layers = model["layers"]
    if all(isinstance(v, int) for v in layers):
        return mlp(layers)
    shape = list(model["input"])
    mods = []
    for item in layers:
        kind, f = (item, {}) if isinstance(item, str) else next(iter(item.items()))
        f = f or {}
        if kind == "linear":
            mods.append(torch.nn.Linear(shape[0], f["out"]))
            shape = [f["out"]]
        elif kind == "conv2d":
            k, s, p = f["kernel"], f.get("stride", 1), f.get("padding", 0)
            mods.append(torch.nn.Conv2d(shape[0], f["out_channels"], k, s, p))
            shape = [f["out_channels"], out_size(shape[1], k, s, p), out_size(shape[2], k, s, p)]
        elif kind in ("maxpool2d", "avgpool2d"):
            k, s = f["kernel"], f.get("stride", f["kernel"])
            pool = torch.nn.MaxPool2d if kind == "maxpool2d" else torch.nn.AvgPool2d
            mods.append(pool(k, s))
            shape = [shape[0], out_size(shape[1], k, s, 0), out_size(shape[2], k, s, 0)]
        elif kind == "relu":
            mods.append(torch.nn.ReLU())
        elif kind == "flatten":
            mods.append(torch.nn.Flatten())
            n = 1
            for d in shape:
                n *= d
            shape = [n]
        elif kind == "dropout":
            mods.append(torch.nn.Dropout(f["p"]))
        elif kind == "groupnorm":
            mods.append(torch.nn.GroupNorm(f["groups"], shape[0]))
        elif kind == "batchnorm":
            mods.append((torch.nn.BatchNorm2d if len(shape) == 3 else torch.nn.BatchNorm1d)(shape[0]))
        elif kind == "residual":
            out, s = f["out_channels"], f.get("stride", 1)
            mods.append(BasicBlock(shape[0], out, s))
            shape = [out, out_size(shape[1], 3, s, 1), out_size(shape[2], 3, s, 1)]
        elif kind == "globalavgpool":
            mods.append(torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()))
            shape = [shape[0]]
        else:
            raise SystemExit(f"torch_step.py: unknown layer type {kind}")
    return mods, list(model["input"]), shape[0]


spec = sys.argv[1]
batch = int(sys.argv[2])
steps = int(sys.argv[3])
device = sys.argv[4] if len(sys.argv) > 4 else "cpu"  # "cuda": the GPU reference
precision = sys.argv[5] if len(sys.argv) > 5 else "fp32"
if precision not in ("fp32", "tf32", "bf16"):
    raise SystemExit(f"torch_step.py: unknown precision {precision} (fp32, tf32 or bf16)")
if device != "cuda" and precision != "fp32":
    print(json.dumps({"unavailable": f"precision {precision} is measured on cuda only"}))
    sys.exit(0)
if device == "cuda" and not torch.cuda.is_available():
    print(json.dumps({"unavailable": "this PyTorch has no CUDA device (torch.cuda.is_available() "
                                     "is False)"}))
    sys.exit(0)
torch.set_num_threads(1)
torch.manual_seed(0)
if device == "cuda":
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
if spec.endswith((".yaml", ".yml")):
    mods, input_shape, classes = from_config(spec)
else:
    mods, input_shape, classes = mlp([int(v) for v in spec.split("-")])
model = torch.nn.Sequential(*mods).to(device)
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(16, batch, *input_shape).to(device)
y = torch.randint(0, classes, (16, batch)).to(device)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def step(i):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = loss_fn(model(x[i % 16]), y[i % 16])
    loss.backward()
    opt.step()


for i in range(max(20, steps // 10)):
    step(i)
sync()
best = float("inf")
for rep in range(5):
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    sync()
    best = min(best, (time.perf_counter() - t0) / steps)
params = sum(p.numel() for p in model.parameters())


def blas_threads():
    """openblas_get_num_threads() of the OpenBLAS this process loaded (0 when none is)."""
    import ctypes
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "openblas" in line and ".so" in line}
    for lib in sorted(libs):
        try:
            return ctypes.CDLL(lib).openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return 0


print(json.dumps({"seconds_per_step": best, "torch": torch.__version__, "params": params,
                  "device": device, "precision": precision,
                  "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
                  "threads": torch.get_num_threads(), "blas_threads": blas_threads()}))
