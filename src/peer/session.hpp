// peer/session.hpp: the state of one peer's lifecycle (PeerSession::Impl) and the parts of it
// that peer_session.cpp (the lifecycle itself, round by round), session_setup.cpp (connecting:
// the transport, the decorator stack, the algorithm, the monitor) and session_record.cpp (what
// it records: evaluations, checkpoints, the summary) share. Private to the room.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/session.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <deque>
#include <set>
#include <thread>

#include "gossip/backend.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"
#include "src/peer/elastic.hpp"
#include "src/peer/peer_metrics.hpp"
#include "src/peer/checkpoints.hpp"
#include "src/peer/members.hpp"
#include "src/peer/net_setup.hpp"
#include "src/peer/records.hpp"
#include "src/peer/trace.hpp"

namespace gossip {

// The session's parts (Events, Watch, TracedExchange, Elastic, ...) are the room's own.
using namespace peer_parts;

struct PeerSession::Impl {
  RunConfig config;
  Topology topology;
  PeerOptions opt;
  Clock::time_point t0 = Clock::now();
  std::string dir;
  bool rejoin = false;
  Events events;
  std::vector<std::vector<std::int64_t>> shards;
  double last_epoch = -1.0;  // the last report's epoch and round (epoch_at_end)
  std::int64_t last_epoch_round = 0;
  // Own model only: the data, the trainer and the plan.
  std::unique_ptr<Backend> backend;
  DataSets data;
  std::string train_file;  // the cache file the training images were mapped from ("": decoded)
  Dataset own;
  std::unique_ptr<Trainer> trainer;
  GemmChoice gemm{"none", "no model of its own"};  // what the trainer's GEMMs run
  RoundPlan plan;
  std::vector<float> host;  // the own model's parameters on the host
  // Once joined.
  std::span<float> params;
  std::int64_t rounds = 0;
  std::int64_t round = 0;
  std::unique_ptr<Transport> transport;
  // The fault schedule's cuts and this peer's attacks, between the monitor and the transport
  // (top() is the transport when the schedule has neither for this peer): membership() is the
  // membership channel the monitor and the elastic unit use, the cuts' over the transport's.
  std::unique_ptr<FaultedExchange> faulted;
  std::unique_ptr<MonitoredExchange> exchange;
  // Where the time goes (DIR/trace.json): the algorithm sees the exchange through `traced`.
  Timeline timeline{opt.rank, [this] { return since(t0); }};
  std::unique_ptr<TracedExchange> traced;
  double returned_at = -1.0;  // when average() last returned to the caller (join: its step)
  std::unique_ptr<Algorithm> algorithm;
  std::unique_ptr<Watch> watch;
  std::unique_ptr<RunRecord> record;
  Clock::time_point last_round_event = Clock::now();
  bool finished = false;
  // Checkpoints.
  std::uint64_t fingerprint = 0;
  std::uint64_t bytes_before = 0;  // sent before the checkpoint this run resumed from
  std::optional<std::vector<std::byte>> resumed_state;  // the caller's, from that checkpoint
  std::int64_t saved_round = -1;   // the round of the last checkpoint written
  std::unique_ptr<PeerMetrics> metrics;  // net.metrics_port: /metrics; null when off
  // An elastic run: the rounds this peer is a member for, joins, leaves and hand-overs.
  Elastic elastic{config, topology, opt, events, t0};

  Impl(RunConfig c, Topology t, PeerOptions o)
      : config(std::move(c)), topology(std::move(t)), opt(std::move(o)),
        dir(peer_dir(opt.out_dir, opt.rank)),
        rejoin(opt.rejoin && std::filesystem::exists(dir + "/metrics.csv")),
        events((make_output_dir(dir), dir), opt.events_fd, rejoin || opt.resume_round >= 0) {}

  void require_joined(const char* what) const {
    if (finished) throw InputError(cat(what, ": peer ", opt.rank, " has finished"));
    if (!exchange)
      throw InputError(cat(what, ": peer ", opt.rank, " has not joined the network yet (call "
                           "join with its parameter buffer first)"));
  }

  /// Connects with `learner`'s buffer; throws when a neighbour refused our model.
  void connect(const Learner& learner, const std::string& model);
  /// connect's decorators over the transport: the fault schedule's, on both of its planes (the
  /// data plane and the membership channel), and the monitor over them.
  void monitor_transport();

  /// net.metrics_port: serves /metrics on metrics_host:metrics_port + rank. A port that cannot
  /// be had is said in the log, and the peer trains on without it.
  void start_metrics();

  /// The figures of the round just done, for the metrics.
  RoundFigures round_figures() const;

  /// "NEIGHBOUR:SENT:RECEIVED;..." for the round event (the dashboard's link rates).
  std::string traffic_text() const;

  /// What this peer trains, for its first log line: gossip's own model on its shard, or the
  /// caller's buffer.
  std::string describe_own(const std::string& model, std::int64_t num_params) const;

  /// monitor.on_partition is stop and the live graph has split.
  bool partition_stop_due() const {
    return watch && watch->partitioned() && config.monitor.on_partition == PartitionPolicy::kStop;
  }

  /// --resume-round N: the parameters, the optimizer's and the algorithm's state and the round
  /// of checkpoint-N.ckpt, which must be this rank's, of this run (as run_peer checks it).
  void resume();

  bool stop_due() const {
    return opt.until_round > 0 && round == opt.until_round && (rounds == 0 || round < rounds);
  }

  void upload(std::span<const float> p) {
    if (trainer) return trainer->upload_params(p);
    std::copy(p.begin(), p.end(), params.begin());
  }

  /// Epochs of the shard the rounds run took: the trainer's plan for gossip's own model; for a
  /// caller's model the last report's epoch carried to this round, else the shard's size with
  /// train.batch and gossip.period; NaN when none of these is known.
  double epoch_at_end() const;

  void record_eval(double loss, double accuracy, double epoch);

  /// finish's summary fields of the run (shard, membership, join, phases) and of the network
  /// (links, reachability, addresses).
  void add_run_fields(JsonObject& extra) const;
  void add_network_fields(JsonObject& extra) const;

  /// The end of finish: the session is finished, and its algorithm, exchange and transport
  /// are gone (the transport's going says bye to every neighbour).
  void close();
};

}  // namespace gossip
