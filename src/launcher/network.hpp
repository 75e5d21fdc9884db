// launcher/network.hpp: `gossip run`'s running network (Network): its child processes, the
// event lines it follows, the fault schedule and the membership changes it carries out, and the
// record it keeps. launcher.cpp starts and ends it; peer_events.cpp holds what it does with its
// peers' event lines, fault_schedule.cpp what it does at a fault's or a membership change's
// round. Private to the room.
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/network.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <tuple>
#include <variant>

#include "src/launcher/children.hpp"
#include "src/launcher/emulated_network.hpp"
#include "src/launcher/network_record.hpp"
#include "src/launcher/observe.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"
#include "gossip/progress.hpp"

namespace gossip::launch_parts {

using Clock = std::chrono::steady_clock;

class Network {
 public:
  Network(const RunConfig& config, const LaunchOptions& opt, const Topology& topology,
          std::int64_t resume_round, std::string tls_dir,
          const launcher::EmulatedNetwork* links)
      : opt_(opt), n_(topology.n()), resume_round_(resume_round), tls_dir_(std::move(tls_dir)),
        links_(links), exec_(config.exec), per_process_(config.train.peers_per_process),
        record_(config, opt.out_dir, n_, launcher::NetworkRecord::Clock::kLauncher, true,
                resume_round),
        faults_(&config.faults), fault_done_(config.faults.size(), false),
        topology_(topology) {
    if (!topology.epochs().empty()) record_.follow_members(topology);
    start_observers(config, topology);
  }

  int run();
  const GemmChoice& gemm() const { return record_.gemm(); }

 private:
  void recover_unmerged();
  /// The command line of rank r's process; last > r: of ranks r to last (gossip peer --ranks).
  std::vector<std::string> peer_argv(int r, bool rejoin, int last = -1) const;
  /// gossip peer's arguments for rank r, or ranks r to last (after the subcommand name).
  std::vector<std::string> peer_args(int r, bool rejoin, int last = -1) const;
  void start();
  void restart(int r);
  /// An elastic run: whether rank r's process starts with the run (a member at round 0).
  bool initial_member(int r) const {
    const auto m = topology_.members(0);
    return std::binary_search(m.begin(), m.end(), r);
  }
  /// An elastic run's joiners: each change's are started ahead of the round it takes effect by
  /// the time the first peers took to start, at the pace the rounds go, so that they are ready
  /// when the graph changes (and the others need not wait for them).
  void start_joiners();
  /// Joins and leaves whose announcement round the network has reached: events.jsonl, notes.
  void note_membership(std::int64_t round);
  void show_progress();
  std::string stage(std::int64_t done, std::int64_t total) const;
  void carry_out_faults();
  /// Wakes (SIGCONT) the paused peers whose time is up at `now`.
  void wake_paused(Clock::time_point now);
  /// The network's round as the fault schedule reads it (max when no peer runs).
  std::int64_t fault_round() const;
  /// Whether fault `f` acts now, the network at `round`.
  bool fault_due(const Fault& f, std::int64_t round) const;
  /// An attack's start: events.jsonl and a note (the attackers carry it out).
  void note_attack(const Fault& f);
  /// A kill, restart or pause on f's peers (a cut lists links, not peers); returns those it
  /// acted on.
  std::vector<int> act_on_peers(const Fault& f, Clock::time_point now);
  /// A kill, restart or pause done: events.jsonl, the dashboard, a note.
  void note_fault(const Fault& f);
  /// The live graph after `round`'s faults as carried out (the peers whose processes run or
  /// finished, without those the schedule killed; the links the schedule cuts then) into the
  /// record.
  void note_live_graph(std::int64_t round);
  /// The cuts under way whose end round is `through` or before (and before the last round):
  /// their links are back, in the record's live graph.
  void note_cut_ends(std::int64_t through);
  bool killed_by_schedule(int rank) const {
    return std::find(scheduled_deaths_.begin(), scheduled_deaths_.end(), rank) !=
           scheduled_deaths_.end();
  }
  void merge_ready_rounds();
  int fail(const std::string& why);
  /// Reaps child c and handles the event lines it wrote; returns whether it has just exited.
  bool reap_and_read(launcher::Child& c);
  /// What a child's exit means for the run.
  struct ExitVerdict {
    bool restarted = false;            // started again (--restart on-failure)
    std::optional<std::string> fatal;  // the failure that ends the run (no --keep-going)
  };
  /// Child c has just exited: killed by the schedule, finished, or failed (started again, the
  /// run's end, or, under --keep-going, gone).
  ExitVerdict judge_exit(const launcher::Child& c);
  /// Every child has exited: the dashboard, metrics, summary.json; returns the run's exit code.
  int end_run();
  /// --dashboard and net.metrics_port: their servers, when asked for; one that cannot listen is
  /// said and left out.
  void start_observers(const RunConfig& config, const Topology& topology);
  double now_s() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void update_metrics() {
    int alive = 0;
    for (const auto& c : children_) alive += c.running || record_.has_finished(c.rank);
    metrics_->update(slowest_round(), alive, record_.deaths(), record_.rejoins());
  }
  /// The round every live peer has completed.
  std::int64_t slowest_round() const;
  /// The round of the slowest peer that runs (the furthest on: the network's round, as the
  /// fault schedule reads it), `except` left out; its own last round when no other runs.
  std::int64_t live_round(int except, bool furthest = false) const;
  /// Peer r's process ended without finishing: the record, the dashboard.
  void peer_gone(int r, const std::string& why);
  /// One event line of peer r (from its pipe, or from its events file): progress, terminal
  /// notes, the record.
  void handle_event(int r, const PeerEvent& e);
  /// Peer r's process ended without finishing: from now on, lines appended to its events file
  /// are a peer started again outside this launcher (by hand, `gossip peer --rejoin`).
  void watch_outside(int r);
  /// Reads what peers started outside the launcher appended to their events files; a peer that
  /// is back counts as alive again. Returns whether one is still running (it wrote within
  /// kOutsideQuiet and has not finished).
  bool follow_outside();
  /// exec: runs: once every peer has finished or ended, hands the average of their final
  /// parameters to a process that waits for it (NetworkRecord::hand_out_average), once.
  void hand_out_average();

  const LaunchOptions& opt_;
  int n_;
  std::int64_t resume_round_;  // -1: a fresh run
  std::string tls_dir_;        // the run's own credentials (--tls-dir of every peer), or ""
  const launcher::EmulatedNetwork* links_;  // --netem: each peer in its namespace, or null
  std::string exec_;           // the config's exec: command, or "" for gossip peer
  int per_process_ = 1;        // train.peers_per_process: consecutive ranks in one process
  bool average_handed_ = false;
  launcher::NetworkRecord record_;
  std::vector<launcher::Child> children_;
  std::vector<std::int64_t> peer_round_;  // rounds each peer has completed, from its events
  const std::vector<Fault>* faults_ = nullptr;
  std::vector<bool> fault_done_;
  std::vector<bool> cut_over_ = std::vector<bool>(faults_->size(), false);  // note_cut_ends
  std::vector<int> scheduled_deaths_;      // peers the schedule killed: not failures
  static constexpr int kMaxRestarts = 3;   // --restart on-failure, per rank
  static constexpr int kStartBatch = 16;   // peers started between two looks at signals
  static constexpr int kKillGrace = 4;     // rounds past a kill's before a peer behind is killed
  std::vector<char> heard_ = std::vector<char>(n_, 1);  // its process has said its round
  std::vector<int> restarts_ = std::vector<int>(n_, 0);
  std::vector<std::pair<Clock::time_point, int>> paused_;  // when to wake which peer
  // Peers restarted outside the launcher: the offset read up to in their events file (-1: not
  // watched), whether it came back, and when its file last grew.
  std::vector<std::int64_t> outside_offset_ = std::vector<std::int64_t>(n_, -1);
  std::vector<bool> outside_back_ = std::vector<bool>(n_, false);
  std::vector<Clock::time_point> outside_heard_ = std::vector<Clock::time_point>(n_);
  static constexpr auto kOutsideQuiet = std::chrono::seconds(60);
  std::string status_;  // the last evaluation merged, for the progress line; "" before one
  Clock::time_point last_progress_ = Clock::now();
  Progress progress_;
  Clock::time_point t0_ = Clock::now();
  std::unique_ptr<DashboardState> dashboard_;  // --dashboard: fed as events come; else null
  std::unique_ptr<launcher::DashboardServer> dashboard_server_;
  std::unique_ptr<launcher::RunMetrics> metrics_;  // net.metrics_port; else null
  // An elastic run (topology_ has epochs): when each rank's process was started, the longest
  // a first peer took from its start to its ready event, and the rounds' pace.
  Topology topology_;
  std::vector<Clock::time_point> spawned_ = std::vector<Clock::time_point>(n_);
  double startup_s_ = -1.0;
  std::vector<bool> epoch_started_;     // per epoch: its joiners' processes are started
  std::vector<bool> epoch_noted_;       // per epoch: its announcement is in events.jsonl
  std::vector<bool> epoch_done_;        // per epoch: its taking effect is
  std::deque<std::pair<Clock::time_point, std::int64_t>> pace_;  // (when, slowest round), recent
  int initial_ready_ = 0;  // the first members that said they were ready
};

}  // namespace gossip::launch_parts
