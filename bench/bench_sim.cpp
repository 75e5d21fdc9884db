// bench/bench_sim.cpp: `gossip bench sim` — the simulator at scale: 1024 virtual peers with a
// small MLP on a ring. Time per round and its split between local phases (steps + publish) and
// mix phases (collect + weighted sum), and, measured in the same run on the same worker pool,
// a bare cblas_saxpy loop over the same bytes as the mixing (every peer: y += w x for each of
// its terms). ratio = our mixing time / the bare saxpy time.
#include <cblas.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gossip/args.hpp"
#include "bench/bench.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/sim.hpp"
#include "sim/worker_pool.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"

namespace gossip::bench {
namespace {

const char* kSimHelp =
    "usage: gossip bench sim [--json] [--peers N] [--rounds R | --epochs E] [--workers N]\n"
    "                        [--batch B] [--layers 32-64-10] [--data synthetic|fashion-mnist]\n"
    "                        [--topology ring|torus|exponential|complete]\n"
    "\n"
    "Simulates N virtual peers (default 1024) training an MLP (default 32-64-10, batch 32) with\n"
    "D-PSGD for R rounds (default 30), or for E epochs of the training set, on a worker pool\n"
    "(default: all cores). Data: synthetic (64 samples a peer, the default) or Fashion-MNIST\n"
    "(Debian's dataset-fashion-mnist; 60,000 images shared out, so 10,000 peers hold 6 each).\n"
    "Prints the time per round and the share spent in local steps and in mixing. Reference,\n"
    "measured in the same run on the same pool: a bare cblas_saxpy loop over the same bytes as\n"
    "the mixing; ratio = mixing time / saxpy time. Target: mixing <= 20% of round time.\n"
    "Also the simulation's wall time, the process's peak RSS and what the simulation added to\n"
    "it per peer, in model sizes.\n";

std::vector<int> parse_layers(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t dash = text.find('-', pos);
    const std::string part = text.substr(pos, dash == std::string::npos ? std::string::npos
                                                                          : dash - pos);
    try {
      out.push_back(std::stoi(part));
    } catch (const std::exception&) {
      throw InputError(cat("--layers: expected sizes like 32-64-10, got '", text, "'"));
    }
    if (out.back() <= 0) throw InputError(cat("--layers: sizes must be positive"));
    if (dash == std::string::npos) break;
    pos = dash + 1;
  }
  if (out.size() < 2) throw InputError("--layers: need at least input and output sizes");
  return out;
}

/// This process's resident set now (VmRSS) and at its peak (ru_maxrss), in bytes.
double rss_now_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  double kb = 0;
  while (f >> key)
    if (key == "VmRSS:") {
      f >> kb;
      break;
    }
  return kb * 1024.0;
}
double rss_peak_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

}  // namespace

namespace {

/// The simulation's run config: the model, synthetic data sized to the peers or Fashion-MNIST,
/// SGD with momentum, the worker threads and 1 ms of simulated compute a step.
RunConfig bench_config(const Args& args, int peers, const std::vector<int>& layers,
                       const std::string& data_kind) {
  RunConfig c;
  c.model = ModelConfig::mlp(layers);
  if (data_kind == "synthetic") {
    c.data.synthetic = true;
    c.data.synthetic_dim = layers.front();
    c.data.classes = layers.back();
    c.data.synthetic_train = static_cast<std::int64_t>(peers) * 64;
    c.data.synthetic_test = 256;
  } else if (data_kind == "fashion-mnist") {
    c.data.normalize = true;  // the default paths are Debian's dataset-fashion-mnist
    if (layers.front() != 784 || layers.back() != 10)
      throw InputError(cat("--layers: Fashion-MNIST needs 784 inputs and 10 outputs, got ",
                           layers_string(layers)));
  } else {
    throw InputError(cat("--data: expected synthetic or fashion-mnist, got '", data_kind, "'"));
  }
  c.train.batch = static_cast<int>(args.get_int("batch", 32));  // the run config's default
  if (c.train.batch < 1) throw InputError("--batch must be positive");
  c.train.eval_batch = 256;
  c.train.eval_limit = 256;
  c.optimizer.lr = 0.05;
  c.optimizer.momentum = 0.9;
  const long workers = args.get_int("workers", 0);
  if (workers < 0 || workers > kMaxWorkers)
    throw InputError(cat("--workers must be in 0..", kMaxWorkers, ", got ", workers));
  c.sim.workers = static_cast<int>(workers);
  c.sim.step_ms = 1.0;
  c.train.evals_per_epoch = 1;
  return c;
}

/// The reference: per peer, y += w x over its terms (self + in-neighbours), bare cblas_saxpy on
/// the same pool of workers; seconds a round, the best of 3 runs of `calls` rounds.
double saxpy_round_seconds(const Topology& topology, std::int64_t n, int workers, int calls) {
  const int peers = topology.n();
  std::vector<std::vector<float>> x(peers, std::vector<float>(n, 0.5f));
  std::vector<std::vector<float>> y(peers, std::vector<float>(n, 0.0f));
  WorkerPool pool(workers);
  const auto saxpy_round = [&] {
    pool.run(peers, [&](int p) {
      const auto in = topology.in_neighbours(p, 0);
      cblas_saxpy(static_cast<int>(n), 0.5f, x[p].data(), 1, y[p].data(), 1);
      for (const auto& nb : in)
        cblas_saxpy(static_cast<int>(n), static_cast<float>(nb.weight), x[nb.peer].data(), 1,
                    y[p].data(), 1);
    });
  };
  return best_seconds_per_call(saxpy_round, calls, 3);
}

}  // namespace

int run_sim(int argc, char** argv) {
  Args args(argc, argv,
            {"peers", "rounds", "epochs", "workers", "layers", "topology", "batch", "data"},
            {"json"});
  if (args.help()) {
    std::printf("%s", kSimHelp);
    return kExitOk;
  }
  const int peers = static_cast<int>(args.get_int("peers", 1024));
  const int rounds = static_cast<int>(args.get_int("rounds", 30));
  if (peers < 2 || rounds < 1) throw InputError("--peers must be >= 2 and --rounds >= 1");
  const bool json = args.has("json");

  const std::vector<int> layers = parse_layers(args.get_or("layers", "32-64-10"));
  const std::string data_kind = args.get_or("data", "synthetic");
  RunConfig c = bench_config(args, peers, layers, data_kind);
  const bool by_epochs = args.has("epochs");
  if (by_epochs && args.has("rounds"))
    throw InputError("--rounds and --epochs: give one of them");
  GeneratorSpec spec;
  spec.kind = parse_generator(args.get_or("topology", "ring"));
  spec.n = peers;
  if (traits(spec.kind).lattice) {
    spec.rows = 32;
    spec.cols = peers / 32;
    spec.n = 0;
  }
  const Topology topology = make_topology(spec);
  const DataSets data = load_datasets(c);
  // Exactly `rounds` rounds, or the rounds E epochs take; one evaluation at the end
  // (evaluations are not part of a round).
  if (by_epochs) {
    c.train.epochs = args.get_double("epochs", 1.0);
    if (!(c.train.epochs > 0)) throw InputError("--epochs must be positive");
  } else {
    c.train.epochs = static_cast<double>(rounds) * peers * c.train.batch / data.train.n;
  }
  if (!json)
    std::printf("gossip bench sim: %d peers, MLP %s (%lld params), %s, %s data (%lld samples), "
                "%s\n%s\n",
                peers, layers_string(layers).c_str(),
                static_cast<long long>(mlp_param_count(layers)), generator_name(spec.kind),
                data_kind.c_str(), static_cast<long long>(data.train.n),
                by_epochs ? cat(c.train.epochs, " epochs").c_str() : cat(rounds, " rounds").c_str(),
                blas_kernel_line().c_str());

  // Memory: what the simulation adds to the process (the data are loaded already), at its
  // peak, per peer, in model sizes.
  const double rss_before = rss_now_bytes();
  const SimResult r = simulate(c, topology, data);
  const double rss_peak = rss_peak_bytes();
  const double model_bytes = static_cast<double>(mlp_param_count(layers)) * sizeof(float);
  const double per_peer_models = (rss_peak - rss_before) / peers / model_bytes;

  const std::int64_t n = mlp_param_count(layers);
  const int done = static_cast<int>(r.rounds);
  const double saxpy = saxpy_round_seconds(topology, n, c.sim.workers, std::max(done, 3));

  const double local = r.local_seconds / done;
  const double mix = r.mix_seconds / done;
  const double round = local + mix;
  const double ratio = mix / saxpy;
  if (json) {
    const JsonObject o = JsonObject()
                             .add("bench", "sim").add("peers", peers).add("params", n)
                             .add("data", data_kind).add("train_samples", data.train.n)
                             .add("rounds", done).add("epochs", c.train.epochs)
                             .add("workers", r.workers)
                             .add("round_ms", round * 1e3).add("local_ms", local * 1e3)
                             .add("mix_ms", mix * 1e3).add("mix_share", mix / round)
                             .add("saxpy_ms", saxpy * 1e3).add("ratio", ratio)
                             .add("wall_s", r.wall_seconds)
                             .add("peak_rss_mb", rss_peak / 1048576.0)
                             .add("memory_per_peer_models", per_peer_models)
                             .add("test_accuracy", r.evals.back().average_accuracy);
    std::printf("%s\n", o.str().c_str());
    return kExitOk;
  }
  std::printf("\n%8s  %10s  %10s  %10s  %10s  %12s  %8s\n", "workers", "round ms", "local ms",
              "mixing ms", "mix share", "saxpy ref ms", "ratio");
  std::printf("%8d  %10.3f  %10.3f  %10.3f  %9.1f%%  %12.3f  %8.2f\n", r.workers, round * 1e3,
              local * 1e3, mix * 1e3, 100.0 * mix / round, saxpy * 1e3, ratio);
  std::printf("\nmixing share of round time: %.1f%% (target <= 20%%); ratio = mixing / bare "
              "saxpy over the same bytes: %.2f\n",
              100.0 * mix / round, ratio);
  std::printf("simulation: %d rounds (%.3g epochs) in %.1f s wall (evaluations included); peak "
              "RSS %.0f MB, %.2f model sizes a peer above the loaded data; average model %.4f\n",
              done, c.train.epochs, r.wall_seconds, rss_peak / 1048576.0, per_peer_models,
              r.evals.back().average_accuracy);
  return kExitOk;
}

}  // namespace gossip::bench
