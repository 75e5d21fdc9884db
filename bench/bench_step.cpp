// bench/bench_step.cpp: `gossip bench step` — time per training step (forward, backward, SGD
// momentum update) of an MLP or of any run config's model on one CPU thread, against PyTorch
// running the same layers in the same run (when Debian's python3-torch is installed), and the
// achieved GFLOP/s (for an MLP also against bare cblas_sgemm calls of the same shapes), each as
// a fraction of the physical limit measured in the same run: one core's FMA rate; and the bare
// rate of every CPU GEMM candidate (OpenBLAS, oneDNN, BLIS) at the model's step shapes.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <vector>

#include "gossip/args.hpp"
#include "bench/bench.hpp"
#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gemm.hpp"
#include "gossip/json.hpp"
#include "gossip/layer_spec.hpp"
#include "gossip/model.hpp"
#include "gossip/progress.hpp"
#include "gossip/rng.hpp"
#include "gossip/train.hpp"

namespace gossip::bench {
namespace {

const char* kHelp =
    "usage: gossip bench step [--json] [--steps N] [--layers 784-256-128-10 | --model FILE]\n"
    "                         [--backend cpu|cuda] [--gemm auto|openblas|onednn|blis]\n"
    "                         [--precision fp32|tf32|bf16] [--conv auto|cudnn|im2col]\n"
    "                         [--batch N]\n"
    "\n"
    "Time per training step (forward, backward, SGD with momentum) on one CPU thread at batch 32\n"
    "and 256, of the MLP given by --layers or of the model of a run config (--model FILE, any\n"
    "layer list). Reference, measured in the same run: PyTorch (Debian's python3-torch, one\n"
    "thread) with the same layers (bench/torch_step.py builds them from the same YAML), batch\n"
    "and optimizer; ratio = ours / PyTorch (lower is better). Also the GFLOP/s achieved, and for\n"
    "an MLP against bare cblas_sgemm calls of the same shapes. Prints the OpenBLAS kernel in\n"
    "use; benchmark with OPENBLAS_CORETYPE unset.\n"
    "\n"
    "The physical limit, measured in the same run: one core's fp32 FMA rate (a loop of\n"
    "independent FMAs in the widest vectors the CPU has: AVX-512, else AVX2). Every figure is\n"
    "also printed as a fraction of it: our step, PyTorch's, and the bare rate of every CPU GEMM\n"
    "candidate (OpenBLAS, oneDNN, BLIS) over the model's step shapes. --gemm: the GEMM our step\n"
    "runs (default auto: as a run chooses it, train.gemm in docs/config.md).\n"
    "\n"
    "--backend cuda: the same on the GPU (the CUDA backend, waiting for the device after each\n"
    "step); the GEMM reference is cuBLAS through the descriptor the layers use, and the PyTorch\n"
    "reference runs on the GPU when its torch has CUDA (else it is left out). Needs a device.\n"
    "There the step is also captured once as a CUDA graph and replayed (JSON bN_graph_us;\n"
    "graph_refusal says why where the capture fails): what launching it kernel by kernel costs.\n"
    "Every backend also times a peer's whole training step (the batch gathered and uploaded, the\n"
    "loss read back: JSON bN_trainer_us), and on a device the same with train.graphs: step\n"
    "(bN_trainer_graph_us; trainer_graphs says why not where it fell back): whether graphs pay\n"
    "in training.\n"
    "--precision (train.precision) and --conv (train.conv) set how ours runs; PyTorch's\n"
    "reference runs at the same precision: fp32 with TF32 off for convolutions and matrix\n"
    "products, tf32 with it on for both, bf16 under torch.autocast(dtype=bfloat16).\n"
    "--batch N: that batch alone instead of 32 and 256.\n";

struct StepFigures {
  int batch = 0;
  double ours = 0.0;      // seconds per step
  double bare_gemm = 0.0; // seconds for the step's GEMMs alone (MLP only; 0 otherwise)
  double flops = 0.0;     // GEMM flops per step
  double torch = 0.0;     // seconds per step, 0 when not measured
  int torch_threads = 0;       // the reference's torch.get_num_threads()
  int torch_blas_threads = 0;  // and its OpenBLAS's openblas_get_num_threads()
  GemmChoice gemm;                     // what our step ran
  std::string conv;                    // and what ran its convolutions
  double bf16 = 0.0;        // seconds per step with train.precision: bf16 (0: not run)
  std::string bf16_refusal;  // why not, on this CPU or backend
  double graph = 0.0;        // seconds per step replaying it as a CUDA graph (0: not run)
  std::string graph_refusal;  // why not
  // A training step as a peer takes it (Trainer::step: the batch gathered and uploaded, the
  // loss read back, the optimizer's step), launched call by call and with train.graphs: step.
  double trainer = 0.0;
  double trainer_graph = 0.0;      // 0: not run
  std::string trainer_graphs;      // Trainer::graphs() of that run ("step", or why not)
  std::vector<GemmTiming> candidates;  // every GEMM's bare rate at the step's shapes
};

/// What is benchmarked: a model config, its name, and how torch_step.py is told about it.
struct Subject {
  ModelConfig model;
  std::string name;             // the model fingerprint
  std::string torch_arg;        // "784-256-128-10" or the config file's path
  std::vector<int> mlp_sizes;   // set for an MLP (the bare-sgemm reference needs them)
};

/// GEMM flops of one training step: forward and weight gradient for every layer with weights,
/// and the input gradient for all but the first of them.
double gemm_flops(const Model& model, int batch) {
  double f = 0.0;
  bool first = true;
  for (const LayerInfo& l : model.layers()) {
    if (l.weights == 0 || l.fan_in == 0) continue;
    const double one = 2.0 * batch * l.fan_in * static_cast<double>(shape_size(l.out));
    f += one * (first ? 2 : 3);
    first = false;
  }
  return f;
}

/// The same GEMM shapes as an MLP's step, as bare cblas_sgemm calls (row-major).
double bare_mlp_gemm_seconds(const std::vector<int>& layers, int batch, const float* x,
                             int steps) {
  std::vector<std::vector<float>> acts, ws, dws;
  for (std::size_t l = 1; l < layers.size(); ++l) {
    acts.emplace_back(static_cast<std::size_t>(batch) * layers[l], 0.5f);
    ws.emplace_back(static_cast<std::size_t>(layers[l]) * layers[l - 1], 0.01f);
    dws.emplace_back(ws.back().size(), 0.0f);
  }
  int widest = 0;
  for (int s : layers) widest = std::max(widest, s);
  std::vector<float> delta(static_cast<std::size_t>(batch) * widest, 0.1f);
  return best_seconds_per_call(
      [&] {
        const float* in = x;
        for (std::size_t l = 1; l < layers.size(); ++l) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, layers[l], layers[l - 1],
                      1.0f, in, layers[l - 1], ws[l - 1].data(), layers[l - 1], 0.0f,
                      acts[l - 1].data(), layers[l]);
          in = acts[l - 1].data();
        }
        for (std::size_t l = layers.size() - 1; l >= 1; --l) {
          const float* a_prev = l == 1 ? x : acts[l - 2].data();
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
}

/// The same GEMM shapes as an MLP's step through `backend`'s gemm (on the CUDA backend, cuBLAS's
/// own rate: cublasSgemm through the descriptor every layer uses), waiting for the device.
double backend_mlp_gemm_seconds(Backend& backend, const std::vector<int>& layers, int batch,
                                const float* x, int steps) {
  std::vector<DeviceArray<float>> acts, ws, dws;
  for (std::size_t l = 1; l < layers.size(); ++l) {
    acts.emplace_back(backend, static_cast<std::size_t>(batch) * layers[l]);
    ws.emplace_back(backend, static_cast<std::size_t>(layers[l]) * layers[l - 1]);
    dws.emplace_back(backend, ws.back().size());
    backend.fill(acts.back().data(), 0.5f, static_cast<std::int64_t>(acts.back().size()));
    backend.fill(ws.back().data(), 0.01f, static_cast<std::int64_t>(ws.back().size()));
  }
  int widest = 0;
  for (int s : layers) widest = std::max(widest, s);
  DeviceArray<float> delta(backend, static_cast<std::size_t>(batch) * widest);
  const double seconds = best_seconds_per_call(
      [&] {
        const float* in = x;
        for (std::size_t l = 1; l < layers.size(); ++l) {
          backend.gemm(row_major_gemm(false, true, batch, layers[l], layers[l - 1]), in,
                       ws[l - 1].data(), acts[l - 1].data());
          in = acts[l - 1].data();
        }
        for (std::size_t l = layers.size() - 1; l >= 1; --l) {
          const float* a_prev = l == 1 ? x : acts[l - 2].data();
          backend.gemm(row_major_gemm(true, false, layers[l], layers[l - 1], batch),
                       acts[l - 1].data(), a_prev, dws[l - 1].data());
          if (l > 1)
            backend.gemm(row_major_gemm(false, false, batch, layers[l - 1], layers[l]),
                         acts[l - 1].data(), ws[l - 1].data(), delta.data());
        }
        backend.synchronize();
      },
      steps, 5);
  return seconds;
}

/// The step as a CUDA graph (Backend::capture_begin): captured once on the first batch (every
/// replay trains on it; the time is what is measured) and replayed, so what the graph saves is
/// the eager step's launches and host work. Where the capture fails, r.graph_refusal says why
/// (the call that broke it).
void time_graph(Backend& backend, Model& model, Sgd& sgd, const float* x, const std::int32_t* y,
                int batch, int steps, StepFigures& r) {
  std::string why;
  std::unique_ptr<StepGraph> graph;
  try {
    why = backend.capture_begin();
    if (why.empty()) {
      model.forward_backward(x, y, batch);
      sgd.step(model.params(), model.grads(), 0.01f);
      graph = backend.capture_end(why);
    }
  } catch (const std::exception& e) {
    why = e.what();
    std::string ended;
    backend.capture_end(ended);  // closes the broken capture
  }
  if (!graph) {
    r.graph_refusal = why;
    return;
  }
  try {  // a replay that fails costs this figure, not the others
    r.graph = best_seconds_per_call(
        [&] {
          const std::string failed = graph->replay();
          if (!failed.empty()) throw RuntimeError(failed);
          backend.synchronize();
        },
        steps, 5);
  } catch (const std::exception& e) {
    r.graph_refusal = cat("replaying the graph: ", e.what());
  }
}

/// Trainer::step on `model`'s layers over synthetic data (16 batches' worth, so the sampler
/// shuffles a real shard): what a peer pays a step, eagerly and, on a device, with its step
/// replayed as a CUDA graph (train.graphs: step), the figure that says whether graphs pay in
/// training.
void time_trainer(Backend& backend, const Model& model, const ModelConfig& layers, int batch,
                  int steps, StepFigures& r) {
  RunConfig c;
  c.model = layers;
  c.data.synthetic = true;
  c.data.synthetic_dim = model.input_size();
  c.data.classes = model.classes();
  c.data.synthetic_train = 16 * static_cast<std::int64_t>(batch);
  c.data.synthetic_test = batch;
  c.optimizer.lr = 0.01;
  c.optimizer.momentum = 0.9;
  c.train.batch = batch;
  c.train.eval_batch = batch;
  const DataSets data = load_datasets(c);
  std::vector<std::int64_t> all(static_cast<std::size_t>(data.train.n));
  std::iota(all.begin(), all.end(), 0);
  {
    Trainer eager(backend, c, data.train, all, 0);
    r.trainer = best_seconds_per_call([&] { eager.step(); }, steps, 5);
  }
  if (backend.host_memory()) return;
  c.train.graphs = GraphMode::kStep;
  Trainer graphed(backend, c, data.train, all, 0);
  graphed.step();  // eager (the warm-up), then captured and replayed from the next one on
  graphed.step();
  r.trainer_graphs = graphed.graphs();
  if (graphed.replays_graph())
    r.trainer_graph = best_seconds_per_call([&] { graphed.step(); }, steps, 5);
}

/// How our step runs (--precision, --conv); the reference runs at the same precision.
struct StepMode {
  Precision precision = Precision::kFp32;
  ConvEngine conv = ConvEngine::kAuto;
};

StepFigures measure(const Subject& subject, int batch, int steps,
                    const std::optional<std::string>& python, BackendChoice choice,
                    const std::string& gemm, const StepMode& mode) {
  StepFigures r;
  r.batch = batch;
  const bool cuda = choice == BackendChoice::kCuda;
  auto backend = cuda ? make_backend(choice, 1, false) : make_cpu_backend(1);
  use_conv(*backend, mode.conv);
  r.conv = conv_name(*backend);
  Model model(*backend, subject.model, batch);
  model.init(1, 0);
  r.flops = gemm_flops(model, batch);
  const std::vector<RowMajorGemm> shapes = model.gemm_shapes(batch);
  GemmRequest request = gemm_request(gemm, 1, mode.precision);
  request.requested_by = "--gemm";
  r.gemm = choose_gemm(*backend, request, shapes);
  // Every candidate's bare rate: best of many passes over the step's products.
  r.candidates = time_gemms(*backend, shapes, std::max(5, steps / 4));
  OptimizerConfig opt;
  opt.lr = 0.01;
  opt.momentum = 0.9;
  Sgd sgd(*backend, model.num_params(), opt);
  auto rng = make_rng(1, 0, Stream::kSynthetic);
  const int kBatches = 16;
  const std::size_t in = static_cast<std::size_t>(model.input_size());
  std::vector<float> x(static_cast<std::size_t>(kBatches) * batch * in);
  for (auto& v : x) v = static_cast<float>(normal01(rng));
  std::vector<std::int32_t> y(static_cast<std::size_t>(kBatches) * batch);
  for (auto& v : y) v = static_cast<std::int32_t>(uniform_below(rng, model.classes()));
  // The batches where the backend computes (device memory on CUDA).
  DeviceArray<float> dx(*backend, x.size());
  DeviceArray<std::int32_t> dy(*backend, y.size());
  dx.upload(x.data(), x.size());
  dy.upload(y.data(), y.size());
  int i = 0;
  const auto step = [&] {
    const int b = i++ % kBatches;
    model.forward_backward(dx.data() + static_cast<std::size_t>(b) * batch * in,
                           dy.data() + static_cast<std::size_t>(b) * batch, batch);
    sgd.step(model.params(), model.grads(), 0.01f);
    if (cuda) backend->synchronize();
  };
  r.ours = best_seconds_per_call(step, steps, 5);
  if (cuda) time_graph(*backend, model, sgd, dx.data(), dy.data(), batch, steps, r);
  else r.graph_refusal = backend->capture_begin();  // says why not; starts nothing
  time_trainer(*backend, model, subject.model, batch, steps, r);
  // The same step with train.precision: bf16, where this CPU has bf16 instructions.
  GemmRequest bf16 = request;
  bf16.precision = Precision::kBf16;
  bf16.requested = "auto";
  try {
    if (mode.precision != Precision::kFp32)
      throw InputError("--precision given: the step above ran at it");
    choose_gemm(*backend, bf16, shapes);
    r.bf16 = best_seconds_per_call(step, steps, 5);
    backend->use_gemm(r.gemm.name);
  } catch (const InputError& e) {
    r.bf16_refusal = e.what();
  }
  if (!subject.mlp_sizes.empty())
    r.bare_gemm = cuda ? backend_mlp_gemm_seconds(*backend, subject.mlp_sizes, batch, dx.data(),
                                                  steps)
                       : bare_mlp_gemm_seconds(subject.mlp_sizes, batch, x.data(), steps);

  if (python) {
    std::vector<std::string> a{subject.torch_arg, std::to_string(batch), std::to_string(steps)};
    a.push_back(cuda ? "cuda" : "cpu");
    a.push_back(precision_name(mode.precision));
    auto line = run_python(*python, "torch_step.py", a);
    if (line) {
      r.torch = json_field(*line, "seconds_per_step").value_or(0.0);
      r.torch_threads = static_cast<int>(json_field(*line, "threads").value_or(0.0));
      r.torch_blas_threads = static_cast<int>(json_field(*line, "blas_threads").value_or(0.0));
    }
  }
  return r;
}

std::vector<int> parse_sizes(const std::string& spec) {
  std::vector<int> layers;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    auto dash = spec.find('-', pos);
    const std::string part =
        spec.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
    char* end = nullptr;
    long v = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v <= 0)
      throw InputError("--layers: expected sizes like 784-256-128-10");
    layers.push_back(static_cast<int>(v));
    if (dash == std::string::npos) break;
    pos = dash + 1;
  }
  if (layers.size() < 2) throw InputError("--layers: need at least two sizes");
  return layers;
}

/// The MLP sizes of a model in the shorthand's form (linear/relu alternating), else empty.
std::vector<int> mlp_form(const ModelConfig& m) {
  const std::string fp = model_fingerprint(m);
  if (fp.find_first_not_of("0123456789-") != std::string::npos) return {};
  return parse_sizes(fp);
}

/// The simulator's evaluations, asked of issue 41 as one GEMM across peers: the first layer of
/// kEvalPeers MLPs on the same kEvalRows test images (train.peer_eval_limit's default), one
/// peer's product at a time against all peers' weights side by side in one wide GEMM (their
/// (out x in) matrices are contiguous, so the wide B is the peers' weights as they lie). The
/// layers after the first have a different input a peer, so only the first could be shared.
struct EvalBatching {
  double per_peer = 0.0;  // seconds for kEvalPeers products of kEvalRows x in x out
  double wide = 0.0;      // seconds for one kEvalRows x in x (out * kEvalPeers) product
};
constexpr int kEvalPeers = 16;
constexpr int kEvalRows = 2000;

EvalBatching measure_eval_batching(Backend& backend, const std::vector<int>& layers) {
  const int in = layers[0], out = layers[1];
  std::vector<float> x(static_cast<std::size_t>(kEvalRows) * in, 0.5f);
  std::vector<float> w(static_cast<std::size_t>(kEvalPeers) * out * in, 0.01f);
  std::vector<float> y(static_cast<std::size_t>(kEvalPeers) * kEvalRows * out);
  EvalBatching r;
  r.per_peer = best_seconds_per_call(
      [&] {
        for (int p = 0; p < kEvalPeers; ++p)
          backend.gemm(row_major_gemm(false, true, kEvalRows, out, in), x.data(),
                       w.data() + static_cast<std::size_t>(p) * out * in,
                       y.data() + static_cast<std::size_t>(p) * kEvalRows * out);
      },
      2, 5);
  r.wide = best_seconds_per_call(
      [&] {
        backend.gemm(row_major_gemm(false, true, kEvalRows, out * kEvalPeers, in), x.data(),
                     w.data(), y.data());
      },
      2, 5);
  return r;
}

/// --json: one object with every figure, each GFLOP/s also as a fraction of the FMA peak.
void print_json(const Subject& subject, const std::vector<StepFigures>& figs, const FmaPeak& peak,
                bool cuda,
                const EvalBatching& eval) {
  const StepFigures& main = figs.front();
  const double ratio = main.torch > 0 ? main.ours / main.torch : 0.0;
  JsonObject o;
  o.add("bench", "step").add("model", subject.name).add("backend", cuda ? "cuda" : "cpu")
      .add("conv", main.conv)
      .add("openblas_core", blas_core_name())
      .add("peak_gflops", peak.gflops)
      .add("peak_isa", peak.isa);
  for (const auto& f : figs) {
    const std::string b = cat("b", f.batch, "_");
    const double ours = f.flops / f.ours / 1e9;
    const double torch = f.torch > 0 ? f.flops / f.torch / 1e9 : NAN;
    const double bare = f.bare_gemm > 0 ? f.flops / f.bare_gemm / 1e9 : NAN;
    o.add(b + "bf16_us", f.bf16 > 0 ? f.bf16 * 1e6 : NAN);
    o.add(b + "graph_us", f.graph > 0 ? f.graph * 1e6 : NAN);
    o.add(b + "trainer_us", f.trainer * 1e6)
        .add(b + "trainer_graph_us", f.trainer_graph > 0 ? f.trainer_graph * 1e6 : NAN);
    o.add(b + "gemm", f.gemm.name)
        .add(b + "gemm_source", f.gemm.source)
        .add(b + "ours_us", f.ours * 1e6)
        .add(b + "torch_us", f.torch * 1e6)
        .add(b + "gflops", ours)
        .add(b + "of_peak", ours / peak.gflops)
        .add(b + "torch_gflops", torch)
        .add(b + "torch_of_peak", torch / peak.gflops)
        .add(b + "bare_gemm_gflops", bare)
        .add(b + "bare_gemm_of_peak", bare / peak.gflops);
    for (const GemmTiming& t : f.candidates)
      o.add(cat(b, "gemm_", t.name, "_gflops"), t.flops / t.seconds / 1e9)
          .add(cat(b, "gemm_", t.name, "_of_peak"), t.flops / t.seconds / 1e9 / peak.gflops);
  }
  o.add("graph_refusal", main.graph_refusal);
  if (!main.trainer_graphs.empty()) o.add("trainer_graphs", main.trainer_graphs);
  o.add("eval_peers_per_peer_s", eval.wide > 0 ? eval.per_peer : NAN)
      .add("eval_peers_wide_s", eval.wide > 0 ? eval.wide : NAN);
  o.add("ratio", main.torch > 0 ? ratio : NAN)
      .add("torch_threads", main.torch_threads)
      .add("torch_blas_threads", main.torch_blas_threads);
  std::printf("%s\n", o.str().c_str());
}

/// The figures for people: each batch's step against PyTorch's and the FMA peak, the bare GEMM
/// candidates, bf16, the evaluation batching, the reference's threads and the ratio.
void print_table(const Subject& subject, const std::vector<StepFigures>& figs,
                 const FmaPeak& peak, bool cuda, const EvalBatching& eval) {
  const auto of_peak = [&](double flops, double seconds) {
    const double gf = seconds > 0 ? flops / seconds / 1e9 : 0.0;
    return gf > 0 ? cat(fixed(gf, 1), " (", fixed(gf / peak.gflops, 2), ")") : std::string("-");
  };
  std::printf("\nphysical limit: one core's fp32 FMA rate (%s), %.1f GFLOP/s (the higher of two "
              "measurements, before and after)\n", peak.isa.c_str(), peak.gflops);
  std::printf("\n%6s  %-9s %12s  %12s  %7s  %16s  %16s  %16s\n", "batch", "GEMM", "ours us/step",
              "torch us/step", "ratio", "ours GF/s (peak)", "torch GF/s (pk)",
              cuda ? "cuBLAS GF/s (pk)" : "bare sgemm (pk)");
  for (const auto& f : figs) {
    const auto [torch, rat] = reference_cells(f.ours, f.torch, 1e6, 1);
    std::printf("%6d  %-9s %12.1f  %12s  %7s  %16s  %16s  %16s\n", f.batch, f.gemm.name.c_str(),
                f.ours * 1e6, torch.c_str(), rat.c_str(), of_peak(f.flops, f.ours).c_str(),
                of_peak(f.flops, f.torch).c_str(), of_peak(f.flops, f.bare_gemm).c_str());
  }
  std::printf("\nbare GEMM rate of every candidate over the step's products, GFLOP/s (fraction "
              "of the FMA peak):\n%6s", "batch");
  for (const GemmTiming& t : figs.front().candidates) std::printf("  %16s", t.name.c_str());
  std::printf("\n");
  for (const auto& f : figs) {
    std::printf("%6d", f.batch);
    for (const GemmTiming& t : f.candidates)
      std::printf("  %16s", of_peak(t.flops, t.seconds).c_str());
    std::printf("   (ours: %s)\n", f.gemm.line().c_str());
  }
  std::printf("\ntrain.precision: bf16 (oneDNN matmul, bf16 products, fp32 accumulation):");
  if (figs.front().bf16 > 0) {
    std::printf("\n");
    for (const auto& f : figs)
      std::printf("%6d  %9.1f us/step  (fp32 %.1f us/step: %.2fx)\n", f.batch, f.bf16 * 1e6,
                  f.ours * 1e6, f.bf16 / f.ours);
  } else {
    std::printf(" not run: %s\n", figs.front().bf16_refusal.c_str());
  }
  std::printf("\nthe step as a CUDA graph (captured once, replayed):");
  if (figs.front().graph > 0) {
    std::printf("\n");
    for (const auto& f : figs)
      std::printf("%6d  %9.1f us/step  (eager %.1f us/step: graph / eager %.2f)\n", f.batch,
                  f.graph * 1e6, f.ours * 1e6, f.graph / f.ours);
  } else {
    std::printf(" not run: %s\n", figs.front().graph_refusal.c_str());
  }
  std::printf("\na peer's training step (Trainer::step: batch gathered and uploaded, loss read "
              "back, optimizer step):\n");
  for (const auto& f : figs) {
    std::printf("%6d  %9.1f us/step", f.batch, f.trainer * 1e6);
    if (f.trainer_graph > 0)
      std::printf("  train.graphs: step %.1f us/step (%.2fx)", f.trainer_graph * 1e6,
                  f.trainer_graph / f.trainer);
    else if (!f.trainer_graphs.empty())
      std::printf("  train.graphs: %s", f.trainer_graphs.c_str());
    std::printf("\n");
  }
  if (eval.wide > 0) {
    const double flops = 2.0 * kEvalRows * subject.mlp_sizes[0] * subject.mlp_sizes[1] * kEvalPeers;
    std::printf("\nevaluation across peers (%s): the first layer of %d peers on %d test images, "
                "one peer at a time %s GF/s (peak), all in one wide GEMM %s: wide / per peer "
                "%.2f\n", figs.front().gemm.name.c_str(), kEvalPeers, kEvalRows,
                of_peak(flops, eval.per_peer).c_str(), of_peak(flops, eval.wide).c_str(),
                eval.wide / eval.per_peer);
  }
  const StepFigures& main = figs.front();
  if (main.torch > 0) {
    const double ratio = main.ours / main.torch;
    std::printf("\nPyTorch reference: %d thread(s), its OpenBLAS %d thread(s)\n",
                main.torch_threads, main.torch_blas_threads);
    std::printf("ratio (batch 32, ours / PyTorch): %.3f  (target <= 0.8)\n", ratio);
  }
}

}  // namespace

int run_step(int argc, char** argv) {
  Args args(argc, argv, {"steps", "layers", "model", "backend", "gemm", "precision", "conv", "batch"},
            {"json"});
  if (args.help()) {
    std::printf("%s", kHelp);
    return kExitOk;
  }
  const int steps = static_cast<int>(args.get_int("steps", 300));
  if (steps <= 0) throw InputError("--steps must be positive");
  if (args.has("layers") && args.has("model"))
    throw InputError("give either --layers or --model, not both");
  Subject subject;
  if (args.has("model")) {
    const std::string file = args.get_or("model", "");
    subject.model = load_config(file).model;
    subject.torch_arg = std::filesystem::absolute(file).string();
  } else {
    subject.model = ModelConfig::mlp(parse_sizes(args.get_or("layers", "784-256-128-10")));
  }
  subject.name = model_fingerprint(subject.model);
  subject.mlp_sizes = mlp_form(subject.model);
  if (!subject.mlp_sizes.empty()) subject.torch_arg = layers_string(subject.mlp_sizes);
  const bool json = args.has("json");
  const BackendChoice choice = parse_backend_choice(args.get_or("backend", "cpu"));
  if (choice == BackendChoice::kAuto)
    throw InputError("--backend: give cpu or cuda (a benchmark does not pick for you)");
  const bool cuda = choice == BackendChoice::kCuda;
  if (cuda && cuda_device_count() == 0)
    throw InputError(cat("--backend cuda: no CUDA device is usable here (", cuda_plugin_check(),
                         ")"));
  const std::string gemm = args.get_or("gemm", "auto");
  const auto python = torch_python();
  FmaPeak peak = measure_fma_peak();  // again at the end: the higher of the two
  if (!json) {
    std::printf("gossip bench step: model %s (%lld params), SGD momentum 0.9, %s\n%s\n",
                subject.name.c_str(), static_cast<long long>(flat_size(subject.model)),
                cuda ? "on the CUDA backend (GEMM reference: cuBLAS through the same descriptor)"
                     : "one CPU thread",
                blas_kernel_line().c_str());
    if (!python)
      std::printf("PyTorch reference: not available (install it with: apt-get install "
                  "python3-torch); reporting our figures alone\n");
  }
  StepMode mode;
  mode.precision = parse_choice(precision_table(), args.get_or("precision", "fp32"), "--precision");
  mode.conv = parse_choice(conv_engine_table(), args.get_or("conv", "auto"), "--conv");
  std::vector<int> batches{32, 256};
  if (args.has("batch")) {
    const std::int64_t b = args.get_int("batch", 32);
    if (b <= 0 || b > 65536) throw InputError("--batch: give a batch size from 1 to 65536");
    batches = {static_cast<int>(b)};
  }
  std::vector<StepFigures> figs;
  for (int batch : batches)
    figs.push_back(measure(subject, batch, batch <= 32 ? steps : std::max(20, steps / 6),
                           python, choice, gemm, mode));

  EvalBatching eval;
  if (!cuda && !subject.mlp_sizes.empty()) {
    auto backend = make_cpu_backend(1);
    backend->use_gemm(figs.front().gemm.name);
    eval = measure_eval_batching(*backend, subject.mlp_sizes);
  }
  if (const FmaPeak again = measure_fma_peak(); again.gflops > peak.gflops) peak = again;
  if (json) {
    print_json(subject, figs, peak, cuda, eval);
    return kExitOk;
  }
  print_table(subject, figs, peak, cuda, eval);
  return kExitOk;
}

}  // namespace gossip::bench
