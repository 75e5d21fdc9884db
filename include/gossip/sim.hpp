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
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/events.hpp"
#include "gossip/json.hpp"
#include "gossip/monitor.hpp"
#include "gossip/timeline.hpp"
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
  int live = 0;                   // peers alive (and, in an elastic run, members) then
};

/// A fault the simulator carried out at the start of `round` ("cut" and "uncut": a cut began or
/// ended, `peers` then holding the links' ends in pairs; "attack KIND (PARAMETER = V)" and
/// "attack over": an attack began or ended, `peers` its attackers).
struct SimFault {
  std::int64_t round = 0;
  std::string action;
  std::vector<int> peers;
  double seconds = 0.0;
  double time_s = 0.0;  // the simulated clock when it was carried out (the latest peer's)
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
  GemmChoice gemm{"none", "no model"};  // the CPU GEMM the virtual peers ran (train.gemm)
  std::string backend;  // what the virtual peers ran on (Backend::describe())
  // How their steps ran (Trainer::graphs(): "off", "step", or "off (why)"); where the virtual
  // peers differ, each answer once, with how many peers gave it.
  std::string graphs = "off";
  std::vector<std::int64_t> samples_per_peer;  // training samples in each peer's shard
  // Faults and membership (the fault schedule, `faults:`): what was done when, what each peer's
  // membership view and convergence monitor saw (MemberEvent.seconds is simulated time), which
  // peers were alive at the end and the live graph's components then.
  std::vector<SimFault> faults;
  std::vector<MemberEvent> member_events;
  /// The live graph at each round the faults or membership changes left it another (the peers
  /// alive and the links cut then, as carried out; LiveGraphChange::time_s simulated).
  std::vector<LiveGraphChange> live_graphs;
  // Messages each peer left out for NaN or Inf, per sender: (peer, from, count), by peer.
  std::vector<std::tuple<int, int, std::int64_t>> refused;
  std::vector<char> alive_at_end;
  // An elastic run's membership changes, as they took effect (empty for a fixed membership).
  std::vector<MembershipRecord> membership;
  std::vector<int> initial_members;  // an elastic run's members at round 0
  double initial_spectral_gap = 0.0;  // per round, of their graph
  /// The live graph at the end, as the lowest live peer's monitor has it (dead peers out, the
  /// links the schedule still cuts absent): its strongly connected components and one-way
  /// reaches between them (LiveGraph), and whether it is strongly connected.
  std::vector<std::vector<int>> final_components;
  std::vector<std::pair<int, int>> final_one_way;
  bool final_connected = true;
  std::vector<double> component_accuracy;  // of each final component's average model, when split
  bool stopped_by_partition = false;       // monitor.on_partition: stop, and the graph split
  // The per-round timelines of sim.trace_peers peers, on the simulated clock (peer, timeline).
  std::vector<std::pair<int, Timeline>> timelines;
};

/// Progress callbacks; both optional. on_round is called after every round on the caller's
/// thread, on_eval after every evaluation.
struct SimHooks {
  std::function<void(std::int64_t round, std::int64_t total)> on_round;
  std::function<void(const EvalPoint&)> on_eval;
  /// Asked after each evaluation: true ends the run there (result.rounds says how far it got).
  std::function<bool(const EvalPoint&)> stop_after;
  /// What a non-finite training loss does: false ends the run with RuntimeError ("training
  /// diverged ...: lower optimizer.lr"); true lets it go on, the peers' accuracies then saying
  /// what became of their models (gossip compare's settings under attack, where an honest
  /// peer's divergence is what the attack achieved, not a learning rate too high).
  bool divergence_is_a_result = false;
  /// The virtual peers' backend instead of the one train.backend names (a test's host backend
  /// that keeps its tensors apart as a GPU's would); null: train.backend's.
  std::function<std::unique_ptr<Backend>()> backend;
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
  double spectral_gap = 0.0;         // per round: 1 - rho^(1/period)
  double period_spectral_gap = 0.0;  // of one period's product (the same for static graphs)
  bool consensus_only = false;
  bool tensorboard = false;  // train.tensorboard: the rows also as DIR/tensorboard/ event files
};

/// Writes DIR/metrics.csv (one row per peer per evaluation and a peer = -1 row for the average
/// model; `seconds` is simulated time) and DIR/summary.json (DESIGN "Contracts", plus
/// sim_seconds, bytes_per_peer, spectral_gap, peak_consensus_distance, algorithm, topology).
void write_sim_outputs(const std::string& dir, const SimResult& result, const SimRunInfo& info);

/// The fields summary.json shares with `gossip run` (NetworkSummary), from a simulation: deaths
/// and rejoins from the simulator's membership events (each counted once per peer and
/// incarnation), the live graph's components at the end, the traced peers' phases.
NetworkSummary network_summary(const SimResult& result, const SimRunInfo& info);

}  // namespace gossip

namespace gossip {

/// One setting of a sweep: a label and the base config with the setting applied.
struct CompareSetting {
  std::string label;  // topology file stem, plus algorithm/period/shard/aggregate/attack/seed
                      // when those vary
  std::string group;  // the label without the seed: the runs a table row summarises
  std::string scenario;   // the group without aggregate and attack: one table of the report's
                          // attack section
  std::string aggregate;  // gossip.aggregate, short: "clipped", "clipped tau=0.5",
                          // "trimmed_mean b=2"
  std::string attack;     // the attack entries of the setting's faults, short ("sign_flip s=1",
                          // "alie z=4"), or "none"
  RunConfig config;
};

/// The settings of a sweep (compare.topologies x algorithms (x compare.compress for choco) x
/// periods x shards x aggregates x attacks x seeds, in that nesting, topologies outermost; each
/// attack cell's entry is added to the config's faults). Throws InputError when
/// compare.topologies is empty, or when two aggregates or two attack cells would be the same.
std::vector<CompareSetting> compare_settings(const RunConfig& base);

/// When a run first reached the target, interpolated linearly between the evaluation below it
/// and the one at or above it (round, epoch and seconds alike); -1 when never. The seconds are
/// simulated, or the measured wall-clock seconds of a real run (gossip compare --run).
struct TargetCrossing {
  double round = -1.0, epoch = -1.0, seconds = -1.0;
};

/// The first crossing of `target` by `accuracy` (e.g. &EvalPoint::peer_accuracy_min) in `evals`,
/// its seconds read from `seconds` (&EvalPoint::wall_seconds for a real run).
TargetCrossing first_crossing(const std::vector<EvalPoint>& evals, double target,
                              double EvalPoint::*accuracy,
                              double EvalPoint::*seconds = &EvalPoint::sim_seconds);

/// gossip compare --run: every setting runs for real, as peer processes (the launcher, which
/// room sim does not use, so the caller hands it in).
struct RealRuns {
  std::string links;  // what the report says the links were: "loopback" or the --netem spec
  /// Runs `setting` with real peers into DIR (metrics.csv, summary.json, peers/ as gossip run
  /// writes them); returns gossip run's exit code.
  std::function<int(const CompareSetting& setting, const std::string& dir)> run;
};

/// What compare rows need of a real run, read back from DIR/metrics.csv: one EvalPoint per
/// evaluation (the average model's row: accuracy, loss, consensus distance, all peers' bytes and
/// the measured seconds, as wall_seconds; the peer rows: lowest and highest accuracy), rounds,
/// epochs, bytes_sent and wall_seconds of the last evaluation. Throws InputError when the file is
/// missing, malformed or has no average-model rows.
SimResult read_real_run(const std::string& dir);

/// Refuses (InputError) what a real sweep cannot run as the simulated sweep would: the
/// pure-averaging pass (compare.averaging_rounds) and the simulator's own network model
/// (sim.stragglers, sim.message_loss), before anything runs.
void check_real_sweep(const RunConfig& base);

/// One row of compare.csv: one run of a setting (one seed).
struct CompareRow {
  std::string label, group, topology, algorithm, shard;
  std::string scenario, aggregate, attack;  // as CompareSetting's
  std::vector<int> attackers;        // the peers of the setting's attack entries, ascending
  // An elastic run's membership (compare.memberships), one line: the members and the spectral
  // gap per round from round 0 and from each change on. Empty for a fixed membership.
  std::string membership;
  // The final evaluation's accuracies of the honest peers (every peer alive at the end but the
  // attackers; NaN when none was evaluated), and how many of them ended with a non-finite
  // training loss (an attack can make them diverge; a run without one stops instead).
  double honest_accuracy_min = 0.0, honest_accuracy_mean = 0.0;
  int honest_diverged = 0;
  std::string compress;              // choco: its compressor ("top_k 0.01"); else empty
  double consensus_step = 0.0;       // choco: gamma; else 0
  int period = 1;
  std::uint64_t seed = 0;
  int peers = 0;
  bool connected = true;
  double spectral_gap = 0.0;         // per round: 1 - rho^(1/period of the graph)
  std::int64_t graph_period = 1;     // rounds in one period of a time-varying graph
  double period_spectral_gap = 0.0;  // 1 - rho of one period's product (= spectral_gap when 1)
  double effective_neighbours = 0.0; // TopologyReport::effective_neighbours (gamma 0.95); NaN
                                     // above 2048 peers
  // Every peer's own model reaches the target (the lowest peer accuracy, which is what slow
  // mixing holds back), interpolated between evaluations.
  TargetCrossing to_target;
  TargetCrossing average_to_target;  // the same for the average model
  double final_accuracy = 0.0;       // of the average model
  double final_min_peer_accuracy = 0.0;
  double final_consensus_distance = 0.0;
  double bytes_per_peer = 0.0;
  double sim_seconds = 0.0;          // 0 for a real run
  double wall_seconds = 0.0;         // a real run: the last evaluation's measured seconds
  std::int64_t samples_min = 0, samples_max = 0;  // training samples of the smallest and
                                                  // largest shard
  bool measured = false;  // a real run (gossip compare --run): seconds are wall-clock
  std::string links;      // a real run: "loopback" or the --netem spec
};

/// The row of one run; `real` for a run of gossip compare --run (its seconds are the evals'
/// wall_seconds), null for a simulation.
CompareRow compare_row(const CompareSetting& setting, const TopologyReport& analysis,
                       const SimResult& result, double target_accuracy,
                       const RealRuns* real = nullptr);

/// Mean and sample standard deviation over the runs of a group that have a value (to-target
/// figures of runs that never reached the target are left out: n < of).
struct Spread {
  double mean = 0.0, std = 0.0;
  int n = 0, of = 0;
};
Spread spread_of(const std::vector<double>& values, bool skip_negative);

/// The runs of one setting over its seeds: one row of report.md and compare_summary.csv.
struct CompareGroup {
  std::string label;
  std::vector<std::size_t> rows;  // into the CompareRow list, in seed order
  Spread rounds_to_target, seconds_to_target, epochs_to_target, average_rounds_to_target;
  Spread final_accuracy, final_min_peer_accuracy, final_consensus_distance, bytes_per_peer,
      sim_seconds, wall_seconds;
  Spread honest_accuracy_min, honest_accuracy_mean;
  int honest_diverged = 0;  // runs in which an honest peer diverged
};

/// Groups the rows by CompareRow::group, in order of first appearance.
std::vector<CompareGroup> group_compare_rows(const std::vector<CompareRow>& rows);

/// What the plots' title says of a sweep: peers, data split, algorithm and seeds, where shared.
std::string compare_title(const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups);

/// Writes DIR/compare.csv (one row per run), DIR/compare_summary.csv and DIR/report.md (one row
/// per setting: mean and standard deviation over its seeds), and DIR/curves.dat (every
/// evaluation of every setting, mean and standard deviation over its seeds, one gnuplot data
/// block each, in group order).
void write_compare(const std::string& dir, const std::vector<CompareRow>& rows,
                   const std::vector<SimResult>& results, double target_accuracy);

/// The pure-averaging pass of one topology (compare.averaging_rounds): peers start from different
/// random vectors, learning rate 0, D-PSGD mixing (push-sum on a directed graph); the consensus
/// distance (a squared disagreement) should shrink by rho^2 per round, rho the second-largest
/// eigenvalue modulus of W per round.
struct AveragingCheck {
  std::string label;                 // the topology file's stem
  std::string topology;              // its path
  double rho = 1.0;                  // per round (TopologyReport::rho_per_round)
  double predicted = 1.0;            // rho^2
  double measured = 1.0;             // geometric mean of d(t+1) / d(t) over [first, last]
  std::int64_t first = 0, last = 0;  // the measured rounds
  std::int64_t exact_after = -1;     // where exact averaging is predicted: the first round
                                     // with d <= 1e-12 d(0) (-1 when never)
  bool exact_predicted = false;      // the analysis says W's product is the exact average
  std::vector<double> distance;      // d(0), d(1), ...
  /// Rounds to cut disagreement (the root of d) 1000x: predicted by the spectrum (gossip topo's
  /// rounds_to_1000x: a bound, reached when the whole start lies along the slowest mode), and
  /// measured, the first round with d <= 1e-6 d(0) (-1: not within the pass). Random starts
  /// spread over every mode, so they get there sooner; the ratio stays about constant as the
  /// graph grows, which is what makes the prediction useful at scale.
  double predicted_rounds_1000x = 0.0;
  std::int64_t measured_rounds_1000x = -1;
  /// measured within 10% of predicted; for exact averaging, reached when predicted.
  bool agrees() const;
};

/// Runs the pass for `rounds` rounds. The window is rounds 20..100 (of those run); when the
/// distance falls under 1e-9 of its start (float32's floor) sooner, it ends there and starts at
/// the lesser of 20 and half its end. A pass longer than 100 rounds (the slow graphs of
/// hundreds of peers, whose slowest mode takes over late) measures its second half instead.
AveragingCheck averaging_check(const RunConfig& base, const std::string& topology_path,
                               const Topology& topology, const TopologyReport& analysis,
                               std::int64_t rounds);

/// Writes DIR/averaging.csv and DIR/averaging.dat (per topology: round, d / d(0), prediction)
/// and appends its table to DIR/report.md; draws DIR/averaging.{png,svg} (the prediction
/// dashed). Returns false, with `why` set, when the plot could not be drawn.
bool write_averaging(const std::string& dir, const std::vector<AveragingCheck>& checks,
                     std::string* why);

/// Runs one simulation of `config` (gossip sim): loads its topology and checks it suits the
/// algorithm, simulates (pure consensus when sim.consensus_only) with a progress bar when
/// `progress_bar`, writes OUT/metrics.csv and OUT/summary.json and prints the result. Returns the
/// exit code (kExitDisconnected when the topology is not connected).
int run_simulation(const RunConfig& config, const std::string& out, bool progress_bar);

/// Runs the whole sweep of `base` (gossip compare): checks every topology and algorithm first,
/// then simulates each setting with a progress bar (when `progress_bar`), writes each one's
/// metrics.csv and summary.json to OUT/runs/<n>-<label>/, the table and curves to OUT after
/// every setting, and the plots at the end; prints a final table. Returns the exit code.
/// With `real` (gossip compare --run) each setting runs for real instead, one after another,
/// into OUT/runs/<n>-<label>/ (check_real_sweep first); a run that fails stops the sweep with
/// its exit code, the table of the runs before it written.
int run_sweep(const RunConfig& base, const std::string& out, bool progress_bar,
              const RealRuns* real = nullptr);

/// Draws DIR/{accuracy_vs_round,accuracy_vs_bytes,accuracy_vs_seconds,consensus_vs_round}.{png,
/// svg} from DIR/curves.dat with gnuplot (script kept as DIR/plots.gp): the average model beside
/// the lowest peer, shaded +- one standard deviation over seeds, at most kPlotColours settings
/// per panel (more are split into rows of panels). Returns false, with `why` set, when gnuplot
/// is missing or fails.
bool draw_compare_plots(const std::string& dir, const std::vector<CompareRow>& rows,
                        std::string* why);

/// gossip plot for a sweep folder: redraws DIR's plots (draw_compare_plots) from the settings
/// named in DIR/compare.csv and DIR/curves.dat. Throws InputError when either is missing or
/// malformed, RuntimeError when gnuplot is missing or fails.
void redraw_compare(const std::string& dir);

}  // namespace gossip
