"""The figures of one `scripts/gpu-check.sh` run, read back from its folder: gpu-figures.json
(the card, the date, each figure under a named key) and gpu-check.md (the same as tables).

Usage: python3 scripts/gpu_figures.py OUT   (the folder gpu-check.sh wrote)

Keys: `{model}_b{batch}_{precision}_ratio` (our step time over PyTorch's on the same GPU at the
same precision, lower is better) with `_ours_us` and `_torch_us`, and `_graph_us` /
`_graph_over_eager` (the step replayed as a CUDA graph; `_graph_refusal` where it could not be),
`_trainer_us`, `_trainer_graph_us` and `_trainer_graph_over_eager` (a peer's whole training
step, eager and with train.graphs: step); `run_{tag}_seconds` and
`run_{tag}_accuracy` for each run (`run_{tag}_graphs` where train.graphs asked for a CUDA graph:
`step`, or `off (why)`); the quotients the engine issue asks for
(`quickstart_cuda_over_cpu`, `quickstart_cnn_cpu_over_cuda`, `quickstart_bf16_minus_fp32`),
what the graphs changed (`shared_*_graphs_over_eager`), what gossip.overlap changed for 8 peers
as the threads of one process (`shared_quickstart_threads_overlap_over_sync`), and gossip sim's wall time on 2 and 4
worker threads against 1 (`shared_sim_resnet20_16_w{2,4}_over_w1`, and `_local` for the wall
time of its local phases alone).
A figure that was not measured is absent, never made up.
"""
import datetime
import glob
import json
import os
import re
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def step_figures(out, figures, rows):
    for path in sorted(glob.glob(os.path.join(out, "step_*.json"))):
        m = re.match(r"step_(\w+?)_b(\d+)_(fp32|tf32|bf16)(_im2col)?\.json$", os.path.basename(path))
        d = load(path)
        if not m or not d:
            continue
        model, batch, precision, im2col = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        b = f"b{batch}_"
        ours, torch = d.get(b + "ours_us"), d.get(b + "torch_us")
        key = f"{model}_b{batch}_{precision}{im2col}"
        figures[key + "_ours_us"] = ours
        if torch:
            figures[key + "_torch_us"] = torch
            figures[key + "_ratio"] = ours / torch
        graph = d.get(b + "graph_us")  # the step captured once as a CUDA graph and replayed
        if graph:
            figures[key + "_graph_us"] = graph
            figures[key + "_graph_over_eager"] = graph / ours
        elif d.get("graph_refusal"):
            figures[key + "_graph_refusal"] = d["graph_refusal"]
        # A peer's whole training step (Trainer::step), eager and with train.graphs: step.
        trainer, trainer_graph = d.get(b + "trainer_us"), d.get(b + "trainer_graph_us")
        if trainer:
            figures[key + "_trainer_us"] = trainer
        if trainer and trainer_graph:
            figures[key + "_trainer_graph_us"] = trainer_graph
            figures[key + "_trainer_graph_over_eager"] = trainer_graph / trainer
        elif d.get("trainer_graphs") and d["trainer_graphs"] != "step":
            figures[key + "_trainer_graphs"] = d["trainer_graphs"]
        rows.append((model, batch, precision + (" (im2col)" if im2col else ""), d.get(b + "gemm"),
                     d.get("conv"), ours, torch, ours / torch if torch else None))


def run_figures(out, figures, rows):
    for path in sorted(glob.glob(os.path.join(out, "run-*/summary.json")) +
                       glob.glob(os.path.join(out, "train-*/summary.json"))):
        tag = os.path.basename(os.path.dirname(path))
        s = load(path)
        if not s:
            continue
        peer0 = load(os.path.join(os.path.dirname(path), "peers", "0", "summary.json")) or s
        key = tag.replace("-", "_")
        figures[key + "_seconds"] = s.get("wall_seconds")
        if s.get("local_seconds") is not None:  # gossip sim: wall time in the local phases
            figures[key + "_local_seconds"] = s["local_seconds"]
        figures[key + "_accuracy"] = s.get("test_accuracy")
        if peer0.get("graphs") not in (None, "off"):  # train.graphs: step, kept or not
            figures[key + "_graphs"] = peer0["graphs"]
        rows.append((tag, s.get("test_accuracy"), s.get("wall_seconds"), s.get("gemm"),
                     peer0.get("conv"), peer0.get("graphs")))


def quotients(figures):
    def q(name, a, b, op):
        if figures.get(a) is not None and figures.get(b) is not None and figures[b] != 0:
            figures[name] = op(figures[a], figures[b])
    q("quickstart_cuda_over_cpu", "run_quickstart_cuda_seconds", "run_quickstart_cpu_seconds",
      lambda a, b: a / b)
    q("quickstart_cnn_cpu_over_cuda", "run_quickstart_cnn_cpu_seconds",
      "run_quickstart_cnn_cuda_seconds", lambda a, b: a / b)
    q("quickstart_bf16_minus_fp32", "run_quickstart_cuda_bf16_accuracy",
      "run_quickstart_cuda_accuracy", lambda a, b: a - b)
    # The 16-peer sim against ResNet-20 trained alone (target: within 0.005 below it).
    q("sim_resnet20_16_minus_single", "run_sim_resnet20_16_cuda_accuracy",
      "train_resnet20_accuracy", lambda a, b: a - b)
    q("shared_quickstart_mps_over_cpu", "run_shared_quickstart_cuda_mps_seconds",
      "run_shared_quickstart_cpu_seconds", lambda a, b: a / b)
    q("shared_quickstart_nomps_over_cpu", "run_shared_quickstart_cuda_nomps_seconds",
      "run_shared_quickstart_cpu_seconds", lambda a, b: a / b)
    q("shared_quickstart_cnn_cpu_over_mps", "run_shared_quickstart_cnn_cpu_seconds",
      "run_shared_quickstart_cnn_cuda_mps_seconds", lambda a, b: a / b)
    # The 8 peers as threads of one process (train.peers_per_process: 8), one CUDA context.
    q("shared_quickstart_threads_over_cpu", "run_shared_quickstart_cuda_threads_seconds",
      "run_shared_quickstart_cpu_seconds", lambda a, b: a / b)
    q("shared_quickstart_cnn_cpu_over_threads", "run_shared_quickstart_cnn_cpu_seconds",
      "run_shared_quickstart_cnn_cuda_threads_seconds", lambda a, b: a / b)
    # The same with each peer's step replayed as a CUDA graph (train.graphs: step), and what
    # the graphs changed against the same run launching its steps call by call.
    for way in ("threads", "mps"):
        q(f"shared_quickstart_{way}_graphs_over_cpu",
          f"run_shared_quickstart_cuda_{way}_graphs_seconds", "run_shared_quickstart_cpu_seconds",
          lambda a, b: a / b)
        q(f"shared_quickstart_{way}_graphs_over_eager",
          f"run_shared_quickstart_cuda_{way}_graphs_seconds",
          f"run_shared_quickstart_cuda_{way}_seconds", lambda a, b: a / b)
    q("shared_quickstart_cnn_cpu_over_threads_graphs", "run_shared_quickstart_cnn_cpu_seconds",
      "run_shared_quickstart_cnn_cuda_threads_graphs_seconds", lambda a, b: a / b)
    q("shared_quickstart_cnn_threads_graphs_over_eager",
      "run_shared_quickstart_cnn_cuda_threads_graphs_seconds",
      "run_shared_quickstart_cnn_cuda_threads_seconds", lambda a, b: a / b)
    # gossip sim's virtual peers on 2 and 4 worker threads (a stream each) against 1.
    for workers in (2, 4):
        for what in ("seconds", "local_seconds"):  # the whole run; its local phases (the steps)
            q(f"shared_sim_resnet20_16_w{workers}_over_w1" + ("_local" if what != "seconds" else ""),
              f"run_shared_sim_resnet20_16_cuda_w{workers}_{what}",
              f"run_shared_sim_resnet20_16_cuda_w1_{what}", lambda a, b: a / b)
    q("shared_quickstart_threads_overlap_over_sync",
      "run_shared_quickstart_cuda_threads_overlap_seconds",
      "run_shared_quickstart_cuda_threads_seconds", lambda a, b: a / b)
    q("shared_resnet20_8_threads_graphs_over_eager",
      "run_shared_resnet20_8_cuda_threads_graphs_seconds",
      "run_shared_resnet20_8_cuda_threads_seconds", lambda a, b: a / b)


def fmt(v, digits=3):
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def main():
    out = sys.argv[1]
    figures = {}
    gpus = open(os.path.join(out, "gpus.txt")).read().strip() if os.path.exists(
        os.path.join(out, "gpus.txt")) else ""
    card = re.sub(r"^GPU \d+: (.*?) \(UUID.*$", r"\1", gpus.splitlines()[0]) if gpus else None
    meta = {"card": card, "date": datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%MZ")}
    if os.path.exists("gpu-bundle/commit"):
        meta["commit"] = open("gpu-bundle/commit").read().strip()
    if os.path.exists(os.path.join(out, "cpus.txt")):
        meta["cpu_cores"] = int(open(os.path.join(out, "cpus.txt")).read().strip())
    tests = os.path.join(out, "test_cuda.txt")
    if os.path.exists(tests):
        text = open(tests).read()
        last = [l for l in text.splitlines() if "assertions" in l or "All tests passed" in l]
        meta["test_cuda"] = last[-1].strip() if last else "no summary line"
        meta["test_cuda_passed"] = "All tests passed" in text
    step_rows, run_rows = [], []
    step_figures(out, figures, step_rows)
    run_figures(out, figures, run_rows)
    quotients(figures)
    with open(os.path.join(out, "gpu-figures.json"), "w") as f:
        json.dump({**meta, "figures": figures}, f, indent=1, sort_keys=True)
    lines = [f"# gpu-check on {card} ({meta['date']})", ""]
    if "test_cuda" in meta:
        lines += [f"test_cuda: {meta['test_cuda']}", ""]
    lines += ["| model | batch | precision | our GEMM | convolutions | ours us/step | PyTorch us/step | ratio |",
              "|---|---|---|---|---|---|---|---|"]
    for r in step_rows:
        lines.append("| " + " | ".join(fmt(v, 0) if i in (5, 6) else fmt(v) for i, v in enumerate(r)) + " |")
    lines += ["", "| run | accuracy | seconds | GEMM | convolutions | graphs |",
              "|---|---|---|---|---|---|"]
    for r in run_rows:
        lines.append("| " + " | ".join(fmt(v, 4) if i == 1 else fmt(v, 1) if i == 2 else fmt(v)
                                       for i, v in enumerate(r)) + " |")
    lines += [""] + [f"{k}: {fmt(v)}" for k, v in sorted(figures.items())
                     if k.startswith(("quickstart_", "shared_quickstart_", "sim_resnet20_",
                                     "shared_sim_"))]
    with open(os.path.join(out, "gpu-check.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
