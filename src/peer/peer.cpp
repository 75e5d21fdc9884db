// peer/peer.cpp: one real peer. Wires its trainer (own shard), NetExchange (its neighbours), the
// gossip algorithm the simulator also runs, and the convergence monitor; runs the rounds; writes
// its metrics and final summary; and, under `gossip run`, tells the launcher what happens through
// "@gossip" event lines on stdout.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"

namespace gossip {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Every peer this one talks to in any round of the period (in- and out-neighbours).
std::vector<int> all_neighbours(const Topology& topology, int rank) {
  std::set<int> s;
  for (std::int64_t t = 0; t < topology.period(); ++t) {
    for (const auto& nb : topology.in_neighbours(rank, t)) s.insert(nb.peer);
    for (const auto& nb : topology.out_neighbours(rank, t)) s.insert(nb.peer);
  }
  s.erase(rank);
  return {s.begin(), s.end()};
}

class Events {
 public:
  explicit Events(bool on) : on_(on) {}
  template <typename... Parts>
  void emit(const Parts&... parts) {
    if (!on_) return;
    std::string line = cat("@gossip ", parts...);
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  bool on_;
};

/// Logs and reports changes in the set of dead neighbours, and whether the live graph still
/// connects the peers this one can see.
class Monitor {
 public:
  Monitor(const Topology& topology, int rank, Events& events)
      : topology_(&topology), rank_(rank), events_(&events) {}

  void check(const std::vector<int>& dead, std::int64_t round) {
    if (dead == dead_) return;
    dead_ = dead;
    const LiveGraph live = live_graph(*topology_, dead);
    const std::string list = format_peers(dead);
    const std::string msg =
        dead.empty() ? "all neighbours are back"
                     : cat("neighbours lost: ", list, "; live graph ",
                           live.connected ? std::string("still connected")
                                          : cat("DISCONNECTED, components ",
                                                format_components(live.components)));
    std::fprintf(stderr, "peer %d round %lld: %s\n", rank_, static_cast<long long>(round),
                 msg.c_str());
    events_->emit("alert peer=", rank_, " round=", round, " connected=", live.connected ? 1 : 0,
                  " dead=", list.empty() ? "-" : list, " message=", msg);
    connected_ = live.connected;
  }
  bool connected() const { return connected_; }

 private:
  const Topology* topology_;
  int rank_;
  Events* events_;
  std::vector<int> dead_;
  bool connected_ = true;
};

}  // namespace

int run_peer(const RunConfig& config, const Topology& topology, const PeerOptions& opt) {
  const int n = topology.n();
  const int rank = opt.rank;
  if (rank < 0 || rank >= n)
    throw InputError(cat("rank ", rank, " is out of range: the topology has ", n, " peers"));
  const auto t0 = Clock::now();
  Events events(opt.events);
  make_output_dir(opt.out_dir);

  auto backend = make_backend(parse_backend_choice(config.train.backend), config.train.threads,
                              rank == 0);
  const DataSets data = load_datasets(config);
  const auto shards = shard_for(config, data.train, n);
  Trainer trainer(*backend, config, data.train, shards[rank], rank);

  gossip::NetConfig net;
  net.rank = rank;
  net.size = n;
  net.addresses = peer_addresses(config, topology);
  net.neighbours = all_neighbours(topology, rank);
  net.handshake.run_id = config.net.run_id;
  net.shared_memory = config.net.shared_memory;
  for (int s : config.model.layers) net.handshake.layer_sizes.push_back(s);
  net.handshake.param_count = static_cast<std::uint64_t>(trainer.num_params());
  net.handshake.topology_fingerprint = topology.fingerprint();
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long>(s * 1000)); };
  net.timeouts.start = ms(config.net.connect_timeout_s);
  net.timeouts.io = ms(config.gossip.round_timeout_s);
  net.log = [rank](const std::string& line) {
    std::fprintf(stderr, "peer %d net: %s\n", rank, line.c_str());
  };
  std::fprintf(stderr, "peer %d: %s, %zu neighbours, shard of %lld samples, %s\n", rank,
               net.addresses[rank].c_str(), net.neighbours.size(),
               static_cast<long long>(shards[rank].size()), backend->describe().c_str());
  NetExchange exchange(std::move(net));
  events.emit("ready peer=", rank, " seconds=", since(t0));

  auto algorithm = make_algorithm(trainer, exchange, topology, config.gossip);
  Monitor monitor(topology, rank, events);
  monitor.check(exchange.dead_peers(), 0);

  const RoundPlan plan = plan_rounds(config, data.train.n, n);
  const std::int64_t rounds = plan.rounds;

  MetricsWriter metrics(opt.out_dir);
  std::vector<float> params(trainer.num_params());
  Evaluation last;
  auto evaluate = [&](std::int64_t round) {
    last = trainer.evaluate(data.test, config.train.eval_limit);
    const double loss = round > 0 ? algorithm->take_train_loss() : NAN;
    if (round > 0 && !std::isfinite(loss))
      throw RuntimeError(cat("training diverged at round ", round, " (loss ", loss,
                             "): lower optimizer.lr"));
    MetricsRow row;
    row.round = round;
    row.epoch = plan.epoch_at(round);
    row.peer = rank;
    row.loss = round > 0 ? loss : 0.0;
    row.test_accuracy = last.accuracy;
    row.bytes_sent = exchange.bytes_sent();
    row.seconds = since(t0);
    metrics.write(row);
    metrics.flush();
    std::string snapshot = "-";
    if (opt.snapshots) {
      algorithm->model_params(params);
      snapshot = cat(opt.out_dir, "/params-", round, ".bin");
      std::ofstream f(snapshot + ".tmp", std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(params.data()),
              static_cast<std::streamsize>(params.size() * sizeof(float)));
      f.close();
      std::filesystem::rename(snapshot + ".tmp", snapshot);
    }
    events.emit("eval peer=", rank, " round=", round, " rounds=", rounds, " epoch=", row.epoch,
                " loss=", row.loss, " acc=", row.test_accuracy, " bytes=", row.bytes_sent,
                " seconds=", row.seconds, " params=", snapshot);
  };

  evaluate(0);
  for (std::int64_t r = 0; r < rounds; ++r) {
    algorithm->local_phase(r);
    algorithm->mix_phase(r);
    monitor.check(exchange.dead_peers(), r + 1);
    const std::int64_t done = r + 1;
    if (plan.eval_due(done)) evaluate(done);
  }

  algorithm->model_params(params);
  Summary s;
  s.test_accuracy = last.accuracy;
  s.peer_accuracy_min = last.accuracy;
  s.peer_accuracy_max = last.accuracy;
  s.rounds = rounds;
  s.epochs = plan.epoch_at(rounds);
  s.bytes_sent = exchange.bytes_sent();
  s.wall_seconds = since(t0);
  s.connected = monitor.connected();
  s.params_sha256 = {sha256_hex(params)};
  s.extra["peer"] = std::to_string(rank);
  s.extra["missing_messages"] = std::to_string(algorithm->missing_messages());
  write_summary(opt.out_dir, s);
  events.emit("done peer=", rank, " acc=", last.accuracy, " sha256=", s.params_sha256.front(),
              " bytes=", s.bytes_sent, " seconds=", s.wall_seconds);
  std::fprintf(stderr, "peer %d: done, test accuracy %.4f, %llu bytes sent\n", rank,
               last.accuracy, static_cast<unsigned long long>(s.bytes_sent));
  return kExitOk;
}

}  // namespace gossip
