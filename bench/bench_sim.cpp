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
    "usage: gossip bench sim [--json] [--peers N] [--rounds R] [--workers N] [--batch B]\n"
    "                        [--layers 32-64-10] [--topology ring|torus|exponential|complete]\n"
    "\n"
    "Simulates N virtual peers (default 1024) training an MLP (default 32-64-10, synthetic data,\n"
    "batch 32) with D-PSGD for R rounds (default 30) on a worker pool (default: all cores).\n"
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

int run_sim(int argc, char** argv) {
  Args args(argc, argv, {"peers", "rounds", "workers", "layers", "topology", "batch"},
                 {"json"});
  if (args.help()) {
    std::printf("%s", kSimHelp);
    return kExitOk;
  }
  const int peers = static_cast<int>(args.get_int("peers", 1024));
  const int rounds = static_cast<int>(args.get_int("rounds", 30));
  if (peers < 2 || rounds < 1) throw InputError("--peers must be >= 2 and --rounds >= 1");
  const bool json = args.has("json");

  RunConfig c;
  const std::vector<int> layers = parse_layers(args.get_or("layers", "32-64-10"));
  c.model = ModelConfig::mlp(layers);
  c.data.synthetic = true;
  c.data.synthetic_dim = layers.front();
  c.data.classes = layers.back();
  c.data.synthetic_train = static_cast<std::int64_t>(peers) * 64;
  c.data.synthetic_test = 256;
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
  // Exactly `rounds` rounds, one evaluation at the end (evaluations are not part of a round).
  c.train.epochs = static_cast<double>(rounds) * peers * c.train.batch / c.data.synthetic_train;
  c.train.evals_per_epoch = 1;

  GeneratorSpec spec;
  spec.kind = args.get_or("topology", "ring");
  spec.n = peers;
  if (spec.kind == "torus") {
    spec.rows = 32;
    spec.cols = peers / 32;
    spec.n = 0;
  }
  const Topology topology = make_topology(spec);
  const DataSets data = load_datasets(c);
  if (!json)
    std::printf("gossip bench sim: %d peers, MLP %s (%lld params), %s, %d rounds\n%s\n", peers,
                layers_string(layers).c_str(),
                static_cast<long long>(mlp_param_count(layers)), spec.kind.c_str(),
                rounds, blas_kernel_line().c_str());

  // Memory: what the simulation adds to the process (the data are loaded already), at its
  // peak, per peer, in model sizes.
  const double rss_before = rss_now_bytes();
  const SimResult r = simulate(c, topology, data);
  const double rss_peak = rss_peak_bytes();
  const double model_bytes = static_cast<double>(mlp_param_count(layers)) * sizeof(float);
  const double per_peer_models = (rss_peak - rss_before) / peers / model_bytes;

  // Reference: per peer, y += w x over its terms (self + in-neighbours), bare cblas_saxpy.
  const std::int64_t n = mlp_param_count(layers);
  std::vector<std::vector<float>> x(peers, std::vector<float>(n, 0.5f));
  std::vector<std::vector<float>> y(peers, std::vector<float>(n, 0.0f));
  WorkerPool pool(c.sim.workers);
  const auto saxpy_round = [&] {
    pool.run(peers, [&](int p) {
      const auto in = topology.in_neighbours(p, 0);
      cblas_saxpy(static_cast<int>(n), 0.5f, x[p].data(), 1, y[p].data(), 1);
      for (const auto& nb : in)
        cblas_saxpy(static_cast<int>(n), static_cast<float>(nb.weight), x[nb.peer].data(), 1,
                    y[p].data(), 1);
    });
  };
  const double saxpy = best_seconds_per_call(saxpy_round, rounds, 3);

  const double local = r.local_seconds / rounds;
  const double mix = r.mix_seconds / rounds;
  const double round = local + mix;
  const double ratio = mix / saxpy;
  if (json) {
    const JsonObject o = JsonObject()
                             .add("bench", "sim").add("peers", peers).add("params", n)
                             .add("rounds", rounds).add("workers", r.workers)
                             .add("round_ms", round * 1e3).add("local_ms", local * 1e3)
                             .add("mix_ms", mix * 1e3).add("mix_share", mix / round)
                             .add("saxpy_ms", saxpy * 1e3).add("ratio", ratio)
                             .add("wall_s", r.wall_seconds)
                             .add("peak_rss_mb", rss_peak / 1048576.0)
                             .add("memory_per_peer_models", per_peer_models);
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
  std::printf("simulation: %.1f s wall (evaluations included); peak RSS %.0f MB, %.2f model "
              "sizes a peer above the loaded data\n",
              r.wall_seconds, rss_peak / 1048576.0, per_peer_models);
  return kExitOk;
}

}  // namespace gossip::bench
