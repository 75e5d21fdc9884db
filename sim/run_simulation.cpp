// sim/run_simulation.cpp: `gossip sim`'s run: loads and checks the topology, simulates with a
// progress bar (training, or pure consensus), writes metrics.csv and summary.json and prints the
// result, with the measured contraction beside the analysis' prediction for pure consensus.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/monitor.hpp"
#include "gossip/progress.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"

namespace gossip {

namespace {

std::string eval_text(const EvalPoint& e, bool consensus, bool elastic) {
  if (consensus) return cat("consensus ", sci(e.consensus_distance));
  return cat(elastic ? cat("live ", e.live, "  ") : std::string(), "acc ",
             fixed(e.average_accuracy, 4), " (peers ", fixed(e.peer_accuracy_min, 3),
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

/// Where the simulated time went, a row each traced peer and one for them all.
void print_time_table(const SimResult& result, const std::string& out) {
  std::vector<std::pair<std::string, PhaseSeconds>> rows;
  PhaseSeconds all{};
  for (const auto& [p, t] : result.timelines) {
    rows.emplace_back(cat(p), t.seconds());
    for (std::size_t i = 0; i < kPhaseCount; ++i) all[i] += t.seconds()[i];
  }
  rows.emplace_back("all", all);
  std::printf("where the simulated time went (%% of each traced peer's time; timelines in "
              "%s/peers/R/trace.json):\n%s",
              out.c_str(), phase_table(rows).c_str());
}

/// The faults carried out, the membership events and the peers dead at the end.
void print_fault_count(const SimResult& result, const std::string& out) {
  // Dead: peers not alive at the end, but for an elastic run's ranks that never joined or
  // left gracefully.
  std::vector<char> counted(result.alive_at_end.size(), result.membership.empty() ? 1 : 0);
  for (int p : result.initial_members) counted[static_cast<std::size_t>(p)] = 1;
  for (const MembershipRecord& m : result.membership) {
    for (int p : m.joined) counted[static_cast<std::size_t>(p)] = 1;
    for (int p : m.left) counted[static_cast<std::size_t>(p)] = 0;
  }
  std::int64_t dead = 0;
  for (std::size_t p = 0; p < result.alive_at_end.size(); ++p)
    if (!result.alive_at_end[p] && counted[p]) ++dead;
  std::printf("faults: %zu carried out, %zu membership events (%s/events.jsonl); %lld peer%s "
              "dead at the end\n",
              result.faults.size(), result.member_events.size(), out.c_str(),
              static_cast<long long>(dead), dead == 1 ? "" : "s");
}

/// What the end of `gossip sim`'s output adds when there is something to say: where the
/// simulated time went, the faults, a partition, unequal shards.
void print_run_notes(const SimResult& result, const RunConfig& config, const std::string& out) {
  if (result.gemm.name != "none")
    std::printf("virtual peers' matrix products: %s\n", result.gemm.line().c_str());
  if (config.train.backend == BackendChoice::kCuda)
    std::printf("virtual peers ran on %s: %d worker thread%s (sim.workers), each with its own "
                "stream, handles and scratch; peer p on worker p mod %d, one after another\n",
                result.backend.c_str(), result.workers, result.workers == 1 ? "" : "s",
                result.workers);
  if (config.train.graphs != GraphMode::kOff)
    std::printf("virtual peers' steps: graphs: %s\n", result.graphs.c_str());
  if (!result.timelines.empty()) print_time_table(result, out);
  if (!result.faults.empty() || !result.member_events.empty()) print_fault_count(result, out);
  if (result.stopped_by_partition)
    std::printf("stopped after round %lld: the live graph split and monitor.on_partition is "
                "stop\n", static_cast<long long>(result.rounds));
  if (result.final_components.size() > 1) {
    std::printf("PARTITIONED: the live graph ended split into %s; the components trained "
                "separate models, so the average above is not one model. Per component:",
                format_components(result.final_components).c_str());
    for (std::size_t i = 0; i < result.final_components.size(); ++i)
      std::printf(" {%s} %.4f", format_peers(result.final_components[i]).c_str(),
                  result.component_accuracy[i]);
    std::printf("\n");
  }
  if (!result.samples_per_peer.empty()) {
    const auto [lo, hi] = std::minmax_element(result.samples_per_peer.begin(),
                                              result.samples_per_peer.end());
    if (*lo != *hi)
      std::printf("shards are unequal: %lld to %lld training samples per peer (summary.json "
                  "samples_per_peer); data.balance %s\n",
                  static_cast<long long>(*lo), static_cast<long long>(*hi),
                  balance_name(config.data.balance));
  }
}

/// The first line: the config, the peers, the graph and its spectral gap, the algorithm.
void print_sim_start(const RunConfig& config, const Topology& topology,
                     const TopologyReport& analysis, bool consensus, bool elastic) {
  std::printf("gossip sim: %s, %s on %s (%s, spectral gap per round %.4g%s%s), %s%s every "
              "%d step%s%s\n",
              config.path.c_str(),
              elastic ? cat(topology.n(), " peers at the start, elastic up to ",
                            topology.elastic()->max_peers).c_str()
                      : cat(topology.n(), " peers").c_str(),
              config.gossip.topology.c_str(),
              topology.kind().c_str(), 1.0 - analysis.rho_per_round,
              analysis.period > 1 ? cat(", per period of ", analysis.period, " rounds ",
                                        fixed(analysis.spectral_gap, 4)).c_str() : "",
              analysis.connected ? "" : ", NOT connected", algorithm_name(config.gossip.algorithm),
              traits(config.gossip.algorithm).compresses
                  ? cat(" (", describe_choco(config.gossip.choco), ")").c_str()
              : config.gossip.aggregate.kind != Aggregate::kMean
                  ? cat(" (", describe(config.gossip.aggregate), ")").c_str()
                  : "",
              config.gossip.period, config.gossip.period == 1 ? "" : "s",
              consensus ? ", pure consensus" : "");
  std::fflush(stdout);
}

/// The simulation (training, or pure consensus) under a progress bar with the last evaluation.
SimResult simulate_with_progress(const RunConfig& config, const Topology& topology,
                                 bool consensus, bool elastic, bool progress_bar) {
  Progress progress;
  progress.enable(progress_bar);
  std::string last_eval = "evaluating...";
  SimHooks hooks;
  hooks.on_eval = [&](const EvalPoint& e) { last_eval = eval_text(e, consensus, elastic); };
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
  return result;
}

/// The result line: the final figures, the simulated and wall seconds.
void print_sim_done(const SimResult& result, const TopologyReport& analysis, bool consensus,
                    const std::string& out) {
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
}

}  // namespace

int run_simulation(const RunConfig& config, const std::string& out, bool progress_bar) {
  const Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  make_output_dir(out);  // a folder that cannot be written is said before the work, not after
  const TopologyReport analysis = analyze(topology);
  const bool consensus = config.sim.consensus_only;
  const bool elastic = changes_membership(config.faults) && topology.elastic();
  print_sim_start(config, topology, analysis, consensus, elastic);

  const SimResult result =
      simulate_with_progress(config, topology, consensus, elastic, progress_bar);

  SimRunInfo info;
  info.config = config.path;
  info.topology = config.gossip.topology;
  info.algorithm = algorithm_name(config.gossip.algorithm);
  info.connected = analysis.connected;
  info.spectral_gap = 1.0 - analysis.rho_per_round;
  info.period_spectral_gap = analysis.spectral_gap;
  info.consensus_only = consensus;
  info.tensorboard = config.train.tensorboard;
  write_sim_outputs(out, result, info);

  print_sim_done(result, analysis, consensus, out);
  print_run_notes(result, config, out);
  if (!analysis.connected) {
    std::fprintf(stderr, "gossip sim: warning: the topology is not connected (%zu components): "
                         "the peers cannot reach consensus\n",
                 analysis.components.size());
    return kExitDisconnected;
  }
  return kExitOk;
}

}  // namespace gossip
