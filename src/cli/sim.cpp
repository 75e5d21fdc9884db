// cli/sim.cpp: `gossip sim CONFIG --out DIR` — many virtual peers in one process running the
// config's gossip algorithm over its topology, with a progress bar; metrics.csv and summary.json
// per DESIGN.md's contracts.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/progress.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {

namespace {

const char* kSimHelp =
    "usage: gossip sim CONFIG --out DIR [--epochs N] [--workers N] [--algorithm NAME]\n"
    "                  [--topology FILE] [--period H] [--consensus] [--quiet]\n"
    "\n"
    "Simulates topology.n virtual peers in one process: each trains on its own shard of the\n"
    "data (data.shard) with gossip.algorithm (dpsgd | local_sgd | push_sum | async) every\n"
    "gossip.period local steps over gossip.topology, on a simulated network (sim.latency_ms,\n"
    "sim.bandwidth_mbps, sim.step_ms, sim.stragglers, sim.message_loss). Local steps run on\n"
    "sim.workers threads; results do not depend on the thread count. See docs/sim.md.\n"
    "\n"
    "Writes DIR/metrics.csv (one row per peer per evaluation, peer -1 = the average model;\n"
    "seconds are simulated) and DIR/summary.json (test_accuracy is the average model's).\n"
    "\n"
    "options:\n"
    "  --out DIR          where to write results (required)\n"
    "  --epochs N         override train.epochs\n"
    "  --workers N        override sim.workers (0 = number of cores)\n"
    "  --algorithm NAME   override gossip.algorithm\n"
    "  --topology FILE    override gossip.topology\n"
    "  --period H         override gossip.period\n"
    "  --consensus        pure consensus: peers average random vectors (sim.consensus_dim,\n"
    "                     sim.consensus_rounds), no gradients; shows the mixing rate\n"
    "  --quiet            no progress bar\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure (e.g. training diverged), 2 bad config, topology,\n"
    "data file or option, 3 finished but the topology is not connected (no consensus possible)\n";

std::string eval_text(const EvalPoint& e, bool consensus) {
  if (consensus) return cat("consensus ", sci(e.consensus_distance));
  return cat("acc ", fixed(e.average_accuracy, 4), " (peers ", fixed(e.peer_accuracy_min, 3),
             "..", fixed(e.peer_accuracy_max, 3), ")  consensus ", sci(e.consensus_distance));
}

/// Measured per-round factor of ||x - xbar|| (the square root of the consensus distance), from
/// round 5 (the slowest mode dominates by then) to the last round above the float floor.
double contraction_per_round(const SimResult& r) {
  const auto& e = r.evals;
  const std::size_t from = std::min<std::size_t>(5, e.size() - 1);
  std::size_t to = e.size() - 1;
  while (to > from + 1 && e[to].consensus_distance < 1e-9 * e.front().consensus_distance) --to;
  if (to <= from || e[from].consensus_distance <= 0) return 0.0;
  return std::pow(e[to].consensus_distance / e[from].consensus_distance,
                  1.0 / (2.0 * static_cast<double>(to - from)));
}

}  // namespace

int run_sim(int argc, char** argv) {
  Args args(argc, argv, {"out", "epochs", "workers", "algorithm", "topology", "period"},
            {"consensus", "quiet"});
  if (args.help()) {
    std::printf("%s", kSimHelp);
    return kExitOk;
  }
  const std::string out = args.required("out", "DIR");

  RunConfig config = load_config(args.config_path());
  config.train.epochs = args.get_double("epochs", config.train.epochs);
  config.sim.workers = static_cast<int>(args.get_int("workers", config.sim.workers));
  config.gossip.algorithm = args.get_or("algorithm", config.gossip.algorithm);
  if (args.get("algorithm")) config.lines.erase("gossip.algorithm");  // not the file's value
  config.gossip.topology = args.get_or("topology", config.gossip.topology);
  config.gossip.period = static_cast<int>(args.get_int("period", config.gossip.period));
  if (args.has("consensus")) config.sim.consensus_only = true;
  if (config.train.epochs <= 0) throw InputError("--epochs must be positive");
  if (config.sim.workers < 0) throw InputError("--workers must be 0 or more");
  if (config.gossip.period < 1) throw InputError("--period must be at least 1");
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a topology file is required"));

  const Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  const TopologyReport analysis = analyze(topology);
  const bool consensus = config.sim.consensus_only;
  std::printf("gossip sim: %s, %d peers on %s (%s, spectral gap %.4g%s), %s every %d step%s%s\n",
              config.path.c_str(), topology.n(), config.gossip.topology.c_str(),
              topology.kind().c_str(), analysis.spectral_gap,
              analysis.connected ? "" : ", NOT connected", config.gossip.algorithm.c_str(),
              config.gossip.period, config.gossip.period == 1 ? "" : "s",
              consensus ? ", pure consensus" : "");
  std::fflush(stdout);

  Progress progress;
  progress.enable(!args.has("quiet"));
  std::string last_eval = "evaluating...";
  SimHooks hooks;
  hooks.on_eval = [&](const EvalPoint& e) { last_eval = eval_text(e, consensus); };
  hooks.on_round = [&](std::int64_t done, std::int64_t total) {
    progress.update(done, total, last_eval);
  };
  SimResult result;
  if (consensus) {
    result = simulate_consensus(config, topology, hooks);
  } else {
    const DataSets data = load_datasets(config);
    result = simulate(config, topology, data, hooks);
  }
  progress.finish();

  SimRunInfo info;
  info.config = config.path;
  info.topology = config.gossip.topology;
  info.algorithm = config.gossip.algorithm;
  info.connected = analysis.connected;
  info.spectral_gap = analysis.spectral_gap;
  info.consensus_only = consensus;
  write_sim_outputs(out, result, info);

  const EvalPoint& last = result.evals.back();
  if (consensus)
    std::printf("done: consensus distance %.3g after %lld rounds (%.3g at the start); "
                "disagreement shrinks %.4f per round (topology analysis: %.4f)",
                last.consensus_distance, static_cast<long long>(result.rounds),
                result.evals.front().consensus_distance, contraction_per_round(result),
                analysis.rho_per_round);
  else
    std::printf("done: test_accuracy %.4f (average model), peers %.4f..%.4f, consensus %.3g "
                "after %.2f epochs",
                last.average_accuracy, last.peer_accuracy_min, last.peer_accuracy_max,
                last.consensus_distance, result.epochs);
  std::printf("; %.1f simulated s, %.1f s wall (%.1f local, %.1f mixing, %d workers); wrote "
              "%s/summary.json\n",
              result.sim_seconds, result.wall_seconds, result.local_seconds, result.mix_seconds,
              result.workers, out.c_str());
  if (!analysis.connected) {
    std::fprintf(stderr, "gossip sim: warning: the topology is not connected (%zu components): "
                         "the peers cannot reach consensus\n",
                 analysis.components.size());
    return kExitDisconnected;
  }
  return kExitOk;
}

}  // namespace gossip::cli
