/// sim: many virtual peers in one process. An in-memory Exchange over a network model (per-link
/// latency and bandwidth, per-peer compute speed with stragglers, message loss; private to sim/,
/// sim/sim_network.hpp) gives each peer a simulated clock; simulate() runs the very same gossip
/// algorithms as real peers (DESIGN idea 2), local phases on a worker pool, then mix phases, so
/// results never depend on the number of threads. Sweeps over settings (gossip compare) build on
/// simulate(). Depends on gossip, monitor, train, topology, report.
#pragma once
#if !defined(GOSSIP_ROOM_SIM)
#error "gossip/sim.hpp belongs to room sim, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"

namespace gossip {

/// One peer at one evaluation.
struct PeerEval {
  double train_loss = 0.0;     // mean over its local steps since the last evaluation
  double test_accuracy = 0.0;  // of its own (de-biased) model
  std::uint64_t bytes_sent = 0;
};

/// All peers and the average model at one evaluation.
struct EvalPoint {
  std::int64_t round = 0;        // rounds completed
  double epoch = 0.0;            // epochs of the whole training set consumed by all peers
  double sim_seconds = 0.0;      // the slowest peer's simulated clock
  double wall_seconds = 0.0;
  std::vector<PeerEval> peers;
  double average_accuracy = 0.0; // of xbar, the average of all peers' models
  double average_loss = 0.0;     // test loss of xbar
  double peer_accuracy_min = 0.0, peer_accuracy_max = 0.0;
  double train_loss = 0.0;       // mean over peers
  double consensus_distance = 0.0;
  std::uint64_t bytes_sent = 0;  // all peers together
};

struct SimResult {
  std::vector<EvalPoint> evals;
  std::int64_t rounds = 0;
  double epochs = 0.0;
  double sim_seconds = 0.0;
  double wall_seconds = 0.0;
  double local_seconds = 0.0;  // wall time in local phases (steps + publish)
  double mix_seconds = 0.0;    // wall time in mix phases (collect + mix)
  double step_seconds = 0.0;   // simulated seconds per local step (measured or sim.step_ms)
  std::uint64_t bytes_sent = 0;
  int workers = 0;
  std::vector<std::vector<float>> params;  // final model of each peer (de-biased)
  std::vector<std::string> params_sha256;
};

/// Progress callbacks; both optional. on_round is called after every round on the caller's
/// thread, on_eval after every evaluation.
struct SimHooks {
  std::function<void(std::int64_t round, std::int64_t total)> on_round;
  std::function<void(const EvalPoint&)> on_eval;
};

/// Simulates config.train.epochs of gossip training of topology.n() peers with config.gossip's
/// algorithm on `data`'s shards (shard_for). Evaluates train.evals_per_epoch times per epoch (and
/// at round 0 and the end) on the first train.eval_limit test samples. sim.workers threads.
SimResult simulate(const RunConfig& config, const Topology& topology, const DataSets& data,
                   const SimHooks& hooks = {});

/// The pure-consensus mode: each peer starts from a random normal vector of sim.consensus_dim
/// entries (seed, peer, Stream::kSim), no gradients, sim.consensus_rounds rounds; evaluates the
/// consensus distance every round (accuracies are 0).
SimResult simulate_consensus(const RunConfig& config, const Topology& topology,
                             const SimHooks& hooks = {});

}  // namespace gossip

namespace gossip {

/// What the outputs of one simulation say about its setting besides the result.
struct SimRunInfo {
  std::string config;     // the config file
  std::string topology;   // the topology file
  std::string algorithm;
  bool connected = true;  // from analyze(topology)
  double spectral_gap = 0.0;
  bool consensus_only = false;
};

/// Writes DIR/metrics.csv (one row per peer per evaluation and a peer = -1 row for the average
/// model; `seconds` is simulated time) and DIR/summary.json (DESIGN "Contracts", plus
/// sim_seconds, bytes_per_peer, spectral_gap, peak_consensus_distance, algorithm, topology).
void write_sim_outputs(const std::string& dir, const SimResult& result, const SimRunInfo& info);

}  // namespace gossip

namespace gossip {

/// One setting of a sweep: a label and the base config with the setting applied.
struct CompareSetting {
  std::string label;  // topology file stem, plus algorithm/period/shard/seed when those vary
  RunConfig config;
};

/// The settings of a sweep (compare.topologies x algorithms x periods x shards x seeds, in that
/// nesting, topologies outermost). Throws InputError when compare.topologies is empty.
std::vector<CompareSetting> compare_settings(const RunConfig& base);

/// One row of compare.csv / report.md.
struct CompareRow {
  std::string label, topology, algorithm, shard;
  int period = 1;
  std::uint64_t seed = 0;
  int peers = 0;
  bool connected = true;
  double spectral_gap = 0.0;
  // First evaluation at which every peer's own model reaches the target (-1 = never): the
  // lowest peer accuracy, which is what slow mixing holds back.
  std::int64_t rounds_to_target = -1;
  double epochs_to_target = -1.0;
  double sim_seconds_to_target = -1.0;
  std::int64_t average_rounds_to_target = -1;  // the same for the average model
  double final_accuracy = 0.0;           // of the average model
  double final_min_peer_accuracy = 0.0;
  double final_consensus_distance = 0.0;
  double bytes_per_peer = 0.0;
  double sim_seconds = 0.0;
  double wall_seconds = 0.0;
};

CompareRow compare_row(const CompareSetting& setting, const TopologyReport& analysis,
                       const SimResult& result, double target_accuracy);

/// Writes DIR/compare.csv (one row per setting), DIR/curves.dat (every evaluation of every
/// setting, one gnuplot data block each) and DIR/report.md (the table and the plots).
void write_compare(const std::string& dir, const std::vector<CompareRow>& rows,
                   const std::vector<SimResult>& results, double target_accuracy);

/// Runs one simulation of `config` (gossip sim): loads its topology and checks it suits the
/// algorithm, simulates (pure consensus when sim.consensus_only) with a progress bar when
/// `progress_bar`, writes OUT/metrics.csv and OUT/summary.json and prints the result. Returns the
/// exit code (kExitDisconnected when the topology is not connected).
int run_simulation(const RunConfig& config, const std::string& out, bool progress_bar);

/// Runs the whole sweep of `base` (gossip compare): checks every topology and algorithm first,
/// then simulates each setting with a progress bar (when `progress_bar`), writes each one's
/// metrics.csv and summary.json to OUT/runs/<n>-<label>/, the table and curves to OUT after
/// every setting, and the plots at the end; prints a final table. Returns the exit code.
int run_sweep(const RunConfig& base, const std::string& out, bool progress_bar);

/// Draws DIR/{accuracy_vs_round,accuracy_vs_bytes,accuracy_vs_seconds,consensus_vs_round}.{png,
/// svg} from DIR/curves.dat with gnuplot (script kept as DIR/plots.gp). Returns false, with
/// `why` set, when gnuplot is missing or fails.
bool draw_compare_plots(const std::string& dir, const std::vector<CompareRow>& rows,
                        std::string* why);

/// gossip plot for a sweep folder: redraws DIR's plots (draw_compare_plots) from the settings
/// named in DIR/compare.csv and DIR/curves.dat. Throws InputError when either is missing or
/// malformed, RuntimeError when gnuplot is missing or fails.
void redraw_compare(const std::string& dir);

}  // namespace gossip
