// launcher/network_record.hpp: a peer network's outputs, merged from its peers' events — the one
// place where the average model's accuracy and the consensus distance are computed from the peers'
// parameter snapshots. `gossip run` feeds it events as its children print them; `gossip collect`
// feeds it the events the peers of an mpirun, srun or Kubernetes run saved in DIR/peers/R/.
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/network_record.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gossip/backend.hpp"
#include "gossip/config.hpp"
#include "gossip/topology.hpp"
#include "gossip/events.hpp"
#include "gossip/json.hpp"
#include "gossip/monitor.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"

namespace gossip::launcher {

/// The run's graph at the end, built from every peer's own record of its links and of the
/// neighbours it stopped mixing with (never one peer's view): the topology's links between the
/// peers alive at the end, without each link either end reported never formed or lost (and not
/// back), held dead, or cut for lying.
struct RunGraph {
  bool connected = true;
  std::vector<std::vector<int>> components;  // strongly connected ones; empty when connected
  std::vector<std::pair<int, int>> one_way;  // LiveGraph::one_way between them
  /// Each link of the topology between live peers that is not in it: {peers, state, round,
  /// why: {PEER: what that end recorded}}.
  JsonArray missing_links;
  /// The peers whose monitor ended believing something else: {peer, connected, components}.
  JsonArray disagreeing_views;
  std::vector<std::string> missing_lines;  // one per missing link, for the final table
};

/// Writes DIR/metrics.csv (every peer's rows and the average model's, round by round),
/// DIR/events.jsonl (the peers' ready, alert and done events and the launcher's failures, one JSON
/// object a line) and, at the end, DIR/summary.json and the final table on stdout. Not
/// thread-safe.
class NetworkRecord {
 public:
  /// How the average model's rows get their `seconds`.
  enum class Clock {
    kLauncher,  // seconds since this record was made (gossip run: the launcher's clock)
    kPeers,     // the slowest peer's seconds at that evaluation (gossip collect)
  };

  /// `peers` is the network's size; snapshots are deleted once merged when `remove_snapshots`.
  /// With `resume_round` >= 0 the record continues DIR's: metrics.csv keeps its rows up to that
  /// round and events.jsonl is appended to.
  NetworkRecord(const RunConfig& config, const std::string& out_dir, int peers, Clock clock,
                bool remove_snapshots, std::int64_t resume_round = -1);

  /// One event of peer `rank` (eval, done and alert change what is merged; every one but eval
  /// goes into events.jsonl).
  void handle(int rank, const PeerEvent& event);
  /// Peer `rank` ended without finishing (`why`): later rounds are merged without it.
  void peer_failed(int rank, const std::string& why);
  /// The fault schedule acted (events.jsonl: event "fault").
  void log_fault(std::int64_t round, const std::string& action, const std::vector<int>& peers,
                 double seconds);

  /// The live graph after round `change.round`'s faults, as the launcher carried them out
  /// (events.jsonl: event "live_graph", where it changed; a round's faults count together, so
  /// each is written once a later round's comes, or at finish). `initial` is the graph it
  /// started as.
  void note_live_graph(const LiveGraph& initial, LiveGraphChange change);

  /// Merges, in order, every pending round that each live peer has reported; returns the figures
  /// of the rounds merged (for a progress line).
  std::vector<EvaluationFigures> merge_ready_rounds();

  /// Writes summary.json and prints the final table; `wall_seconds` is the run's duration. With
  /// `peer_rss_mb` (gossip run: each peer process's peak resident memory) the table has a
  /// max_rss_mb column and the summary peer_max_rss_mb.
  Summary finish(double wall_seconds, const std::vector<double>& peer_rss_mb = {});

  std::int64_t total_rounds() const { return total_rounds_; }
  /// The GEMM chosen for the peers (train.gemm, GOSSIP_GEMM, or measured here once on the
  /// model's step shapes), which the average model's evaluation runs too; summary.json's `gemm`.
  const GemmChoice& gemm() const { return gemm_; }
  /// The round of the last evaluation merged (or kept, on resume).
  std::int64_t merged_round() const { return record_.last().round; }
  /// Forgets the pending (not yet mergeable) evaluations of rounds up to `round`; returns those
  /// rounds.
  std::vector<std::int64_t> drop_pending_through(std::int64_t round);
  const std::vector<int>& dead() const { return dead_; }
  /// Deaths and rejoins the peers reported so far (summary.json's deaths, rejoins).
  std::int64_t deaths() const { return std::ssize(deaths_); }
  std::int64_t rejoins() const { return std::ssize(rejoins_); }
  /// Peer `rank` was started again (restarted): later rounds expect it again.
  void peer_back(int rank);
  /// An elastic run (`topology` has epochs): an evaluation of round r is merged from the
  /// members of round r - 1 (those that ran it), the final average from the last members, and
  /// summary.json gets the membership timeline.
  void follow_members(const Topology& topology) { members_ = topology; }
  /// exec: runs, once every peer has finished or ended: the average of the finished peers'
  /// final parameters (peers/R/params.bin) goes to DIR/average.bin and DIR/average-request.json
  /// names the process in `waiting` (those whose done event awaits it) that evaluates it with
  /// the script's own evaluate, writing DIR/average-eval.json; the others return from finish().
  /// With nobody waiting, finish() says why there is no average model.
  void hand_out_average(const std::vector<int>& waiting);
  /// Whether peer `rank`'s done event said its process waits for the average model.
  bool awaits_average(int rank) const { return has_finished(rank) && done_[rank]->awaits_average; }
  /// The run's graph after `round` (RunGraph); `topology` is the run's.
  RunGraph run_graph(const Topology& topology, std::int64_t round) const;
  /// Without the topology: the newest word on the live graph of any peer alive at the end.
  RunGraph monitors_graph() const;
  /// Whether peer `rank` sent its done event.
  bool has_finished(int rank) const { return rank >= 0 && rank < n_ && done_[rank].has_value(); }
  /// The peers that sent a done event.
  int finished() const;
  /// The slowest peer's seconds in its done event (0 when none finished).
  double slowest_done_seconds() const;

 private:
  /// The run's end from the peers' done events: the rounds and epochs they ran, their bytes and
  /// their final parameters' digests.
  RunEnd run_end(double wall_seconds) const;
  /// The summary's fields gossip sim's also has, as far as the done events tell them.
  NetworkSummary network_summary(const RunEnd& end) const;
  /// The run's graph after `rounds` (and net's spectral gap), or, when the topology file cannot
  /// be read any more, the monitors' graph.
  RunGraph final_graph(NetworkSummary& net, std::int64_t rounds) const;
  /// Each of net's components' average model on the test set (net's component_accuracy); returns
  /// their consensus distances.
  std::vector<double> evaluate_components(NetworkSummary& net);
  /// exec: runs: the final consensus distance and the script's evaluation of the average model,
  /// or why there is none, into `end`.
  void evaluate_exec_average(RunEnd& end);
  /// summary.json "failures".
  JsonArray failures_json() const;
  /// Where the time went, from the finished peers' done events: fills net's phases and
  /// phases_per_peer; returns the final table's rows (each peer's, then "all").
  std::vector<std::pair<std::string, PhaseSeconds>> add_phases(NetworkSummary& net) const;
  /// The ranks of `topology` not alive at the end (not finished, or held dead), ascending.
  std::vector<int> gone_at_end(const Topology& topology) const;
  /// The live peers among the first `n` whose monitor ended believing other than g's components.
  void add_disagreeing_views(RunGraph& g, int n, const std::vector<int>& gone) const;
  /// An elastic run's member timeline (planned and announced changes up to `rounds`) into `net`.
  void add_membership(NetworkSummary& net, std::int64_t rounds) const;
  /// The final table: each peer's accuracy, bytes, seconds (and peak memory), where the time
  /// went, the links missing from the run's graph, the components of a split, the average model.
  void print_final_table(const Summary& s, const NetworkSummary& net,
                         const std::vector<double>& peer_rss_mb,
                         const std::vector<std::pair<std::string, PhaseSeconds>>& phase_rows,
                         const std::vector<std::string>& missing_links) const;
  void merge_round(std::int64_t round, std::map<int, EvalEvent>& evals,
                   const std::vector<int>& expected);
  void log_event(const std::string& json_line);
  /// The average of the parameter files `paths` on the test set (and, when asked, their
  /// consensus distance).
  Evaluation evaluate_average(const std::vector<std::string>& paths, double* consensus = nullptr);
  /// exec: runs at the end: the script's evaluation of the average model (an average row in
  /// metrics.csv at `end`'s rounds, epochs and bytes), or why there is none (average_missing_).
  void record_external_average(double consensus, const RunEnd& end);
  /// The final parameter files (peers/R/params.bin) of the finished peers among `ranks`, or of
  /// all of them.
  std::vector<std::string> final_params(const std::vector<int>& ranks) const;
  std::vector<std::string> final_params() const;

  const RunConfig& config_;
  std::string out_dir_;
  int n_;
  Clock clock_;
  bool remove_snapshots_;
  RunRecord record_;
  std::ofstream events_;
  std::unique_ptr<Backend> backend_;
  DataSets data_;
  Trainer evaluator_;  // holds the average model
  GemmChoice gemm_;
  std::map<std::int64_t, std::map<int, EvalEvent>> pending_;  // round -> peer -> its evaluation
  std::vector<int> dead_;
  std::vector<std::optional<DoneEvent>> done_;
  std::int64_t total_rounds_ = 0;
  std::string average_missing_;  // exec: runs: why no average model was evaluated ("": it was)
  int average_evaluator_ = -1;   // the process asked to evaluate it
  std::int64_t merged_through_ = -1;      // the last round merged (or resumed from)
  std::vector<std::int64_t> latest_eval_; // per peer: the newest round it evaluated
  // Membership: each peer's last word on the live graph (partition or healed), and the deaths
  // and rejoins seen, once per (peer, incarnation).
  std::vector<std::optional<MemberEvent>> graph_;
  // Each peer's own word on its links, and on whom it stopped mixing with: the run's graph.
  struct LinkReport {
    LinkChange change = LinkChange::kFormed;
    std::int64_t round = 0;
    std::string reason;
  };
  std::map<std::pair<int, int>, LinkReport> link_reports_;  // (peer, neighbour) -> its last
  std::vector<std::vector<int>> held_dead_;                  // per peer: its view's dead
  std::vector<std::pair<int, int>> cut_links_;               // (peer, neighbour it cut)
  std::vector<std::pair<int, std::int64_t>> deaths_, rejoins_;
  JsonArray byzantine_;  // the peers' byzantine_* events (NetworkSummary::byzantine)
  /// Each confirmed death and rejoin, as first reported: who, at which incarnation, when (the
  /// launcher's clock), at which round and by whom (summary.json "membership").
  JsonArray membership_;
  /// Each peer process that ended without finishing, when, why, and when it came back (null if
  /// it did not): summary.json "failures".
  struct Failure {
    int peer = -1;
    double time_s = 0.0;
    std::string why;
    double back_s = -1.0;
  };
  std::vector<Failure> failures_;
  double now_s() const;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::optional<Topology> members_;  // follow_members
  std::optional<LiveGraph> initial_graph_;      // note_live_graph's first
  std::vector<LiveGraphChange> live_graphs_;    // its changes
  std::size_t live_graphs_written_ = 0;         // of them, in events.jsonl
  void write_live_graphs(std::size_t through);
  std::vector<Announcement> announced_;  // an elastic run's changes its peers announced
};

}  // namespace gossip::launcher
