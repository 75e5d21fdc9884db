// bench/bench_step.cpp: `gossip bench step` — time per training step of the MLP (forward,
// backward, SGD momentum update) on one CPU thread, against PyTorch doing the same in the same
// run (when Debian's python3-torch is installed), and achieved GFLOP/s against bare cblas_sgemm
// calls of the same shapes.
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "gossip/args.hpp"
#include "bench/bench.hpp"
#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/model.hpp"
#include "gossip/rng.hpp"
#include "gossip/train.hpp"

namespace gossip::bench {
namespace {

const char* kHelp =
    "usage: gossip bench step [--json] [--steps N] [--layers 784-256-128-10]\n"
    "\n"
    "Time per training step (forward, backward, SGD with momentum) of an MLP on one CPU thread\n"
    "at batch 32 and 256. Reference, measured in the same run: PyTorch (Debian's python3-torch,\n"
    "one thread) with the same model, batch and optimizer; ratio = ours / PyTorch (lower is\n"
    "better). Also the GFLOP/s achieved against bare cblas_sgemm calls of the same shapes.\n"
    "Prints the OpenBLAS kernel in use; benchmark with OPENBLAS_CORETYPE unset.\n";

struct StepFigures {
  int batch = 0;
  double ours = 0.0;      // seconds per step
  double bare_gemm = 0.0; // seconds for the step's GEMMs alone
  double flops = 0.0;     // GEMM flops per step
  double torch = 0.0;     // seconds per step, 0 when not measured
};

double gemm_flops(const std::vector<int>& layers, int batch) {
  double f = 0.0;
  for (std::size_t l = 1; l < layers.size(); ++l) {
    const double mnk = 2.0 * batch * layers[l - 1] * layers[l];
    f += mnk * (l == 1 ? 2 : 3);  // forward + dW (+ dX beyond the first layer)
  }
  return f;
}

StepFigures measure(const std::vector<int>& layers, int batch, int steps,
                    const std::optional<std::string>& python) {
  StepFigures r;
  r.batch = batch;
  r.flops = gemm_flops(layers, batch);
  auto cpu = make_cpu_backend(1);
  Model model(*cpu, layers, batch);
  model.init(1, 0);
  OptimizerConfig opt;
  opt.lr = 0.01;
  opt.momentum = 0.9;
  Sgd sgd(*cpu, model.num_params(), opt);
  auto rng = make_rng(1, 0, Stream::kSynthetic);
  const int kBatches = 16;
  std::vector<float> x(static_cast<std::size_t>(kBatches) * batch * layers.front());
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  std::vector<std::int32_t> y(static_cast<std::size_t>(kBatches) * batch);
  for (auto& v : y) v = static_cast<std::int32_t>(uniform_below(rng, layers.back()));
  int i = 0;
  r.ours = best_seconds_per_call(
      [&] {
        const int b = i++ % kBatches;
        model.forward_backward(x.data() + static_cast<std::size_t>(b) * batch * layers.front(),
                               y.data() + static_cast<std::size_t>(b) * batch, batch);
        sgd.step(model.params(), model.grads(), 0.01f);
      },
      steps, 5);

  // The same GEMM shapes as bare cblas_sgemm calls (row-major, as the model issues them).
  std::vector<std::vector<float>> acts, ws, dws;
  for (std::size_t l = 1; l < layers.size(); ++l) {
    acts.emplace_back(static_cast<std::size_t>(batch) * layers[l], 0.5f);
    ws.emplace_back(static_cast<std::size_t>(layers[l]) * layers[l - 1], 0.01f);
    dws.emplace_back(ws.back().size(), 0.0f);
  }
  std::vector<float> delta(static_cast<std::size_t>(batch) * 1024, 0.1f);
  r.bare_gemm = best_seconds_per_call(
      [&] {
        const float* in = x.data();
        for (std::size_t l = 1; l < layers.size(); ++l) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, layers[l], layers[l - 1],
                      1.0f, in, layers[l - 1], ws[l - 1].data(), layers[l - 1], 0.0f,
                      acts[l - 1].data(), layers[l]);
          in = acts[l - 1].data();
        }
        for (std::size_t l = layers.size() - 1; l >= 1; --l) {
          const float* a_prev = l == 1 ? x.data() : acts[l - 2].data();
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, layers[l], layers[l - 1], batch,
                      1.0f, acts[l - 1].data(), layers[l], a_prev, layers[l - 1], 0.0f,
                      dws[l - 1].data(), layers[l - 1]);
          if (l > 1)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, layers[l - 1],
                        layers[l], 1.0f, acts[l - 1].data(), layers[l], ws[l - 1].data(),
                        layers[l - 1], 0.0f, delta.data(), layers[l - 1]);
        }
      },
      steps, 5);

  if (python) {
    auto line = run_python(*python, "torch_step.py",
                           {layers_string(layers), std::to_string(batch), std::to_string(steps)});
    if (line) r.torch = json_field(*line, "seconds_per_step").value_or(0.0);
  }
  return r;
}

}  // namespace

int run_step(int argc, char** argv) {
  Args args(argc, argv, {"steps", "layers"}, {"json"});
  if (args.help()) {
    std::printf("%s", kHelp);
    return kExitOk;
  }
  const int steps = static_cast<int>(args.get_int("steps", 300));
  if (steps <= 0) throw InputError("--steps must be positive");
  std::vector<int> layers;
  {
    std::string spec = args.get_or("layers", "784-256-128-10");
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      auto dash = spec.find('-', pos);
      const std::string part = spec.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
      char* end = nullptr;
      long v = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v <= 0) throw InputError("--layers: expected sizes like 784-256-128-10");
      layers.push_back(static_cast<int>(v));
      if (dash == std::string::npos) break;
      pos = dash + 1;
    }
    if (layers.size() < 2) throw InputError("--layers: need at least two sizes");
  }
  const bool json = args.has("json");
  const auto python = torch_python();
  if (!json) {
    std::printf("gossip bench step: MLP %s, SGD momentum 0.9, one CPU thread\n%s\n",
                layers_string(layers).c_str(), blas_kernel_line().c_str());
    if (!python)
      std::printf("PyTorch reference: not available (install it with: apt-get install "
                  "python3-torch); reporting our figures alone\n");
  }
  std::vector<StepFigures> figs;
  for (int batch : {32, 256}) figs.push_back(measure(layers, batch, batch == 32 ? steps : std::max(20, steps / 6), python));

  const StepFigures& main = figs.front();
  const double ratio = main.torch > 0 ? main.ours / main.torch : 0.0;
  if (json) {
    JsonObject o;
    o.add("bench", "step").add("layers", layers_string(layers)).add("openblas_core",
                                                                    blas_core_name());
    for (const auto& f : figs)
      o.add(cat("b", f.batch, "_ours_us"), f.ours * 1e6)
          .add(cat("b", f.batch, "_torch_us"), f.torch * 1e6)
          .add(cat("b", f.batch, "_gflops"), f.flops / f.ours / 1e9)
          .add(cat("b", f.batch, "_bare_gemm_gflops"), f.flops / f.bare_gemm / 1e9);
    o.add("ratio", main.torch > 0 ? ratio : NAN);
    std::printf("%s\n", o.str().c_str());
    return kExitOk;
  }
  std::printf("\n%6s  %12s  %12s  %8s  %10s  %14s\n", "batch", "ours us/step", "torch us/step",
              "ratio", "GFLOP/s", "bare sgemm GF/s");
  for (const auto& f : figs) {
    const auto [torch, rat] = reference_cells(f.ours, f.torch, 1e6, 1);
    std::printf("%6d  %12.1f  %12s  %8s  %10.2f  %14.2f\n", f.batch, f.ours * 1e6, torch.c_str(),
                rat.c_str(),
                f.flops / f.ours / 1e9, f.flops / f.bare_gemm / 1e9);
  }
  if (main.torch > 0)
    std::printf("\nratio (batch 32, ours / PyTorch): %.3f  (target <= 0.8)\n", ratio);
  return kExitOk;
}

}  // namespace gossip::bench
