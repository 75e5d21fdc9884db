// peer/peer.cpp: one real peer. Wires its trainer (own shard), NetExchange (its neighbours), the
// gossip algorithm the simulator also runs, and the convergence monitor; runs the rounds; writes
// its metrics and final summary; and, under `gossip run`, tells the launcher what happens through
// "@gossip" event lines on stdout.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"

namespace gossip {

// The config refuses what the handshake could not carry, before any peer starts.
static_assert(NetworkConfig::kMaxRunIdBytes == wire::kMaxRunIdBytes);

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

/// This peer's network settings: addresses, neighbours, handshake, timeouts, log lines.
NetConfig net_config(const RunConfig& config, const Topology& topology, int rank,
                     std::int64_t num_params) {
  NetConfig net;
  net.rank = rank;
  net.size = topology.n();
  net.addresses = peer_addresses(config, topology);
  net.neighbours = all_neighbours(topology, rank);
  net.handshake.run_id = config.net.run_id;
  net.shared_memory = config.net.shared_memory;
  // A sender may run this many rounds ahead of us (n - 1 on a directed ring): keep them all.
  net.max_queued_rounds = static_cast<std::size_t>(
      std::max<std::int64_t>(net.max_queued_rounds, max_round_lead(topology) + 1));
  net.handshake.model = model_fingerprint(config.model);
  net.handshake.param_count = static_cast<std::uint64_t>(num_params);
  net.handshake.topology_fingerprint = topology.fingerprint();
  const auto ms = [](double s) { return std::chrono::milliseconds(static_cast<long>(s * 1000)); };
  net.timeouts.start = ms(config.net.connect_timeout_s);
  net.timeouts.io = ms(config.gossip.round_timeout_s);
  net.log = [rank](const std::string& line) {
    std::fprintf(stderr, "peer %d net: %s\n", rank, line.c_str());
  };
  return net;
}

/// Prints event lines for the launcher when asked to (`gossip peer --events`).
class Events {
 public:
  explicit Events(bool on) : on_(on) {}
  void emit(const PeerEvent& event) {
    if (!on_) return;
    std::fprintf(stdout, "%s\n", encode_event(event).c_str());
    std::fflush(stdout);
  }

 private:
  bool on_;
};

/// Writes the parameter buffer to DIR/params-ROUND.bin (through a rename, so a reader never
/// sees half a file); returns its path.
std::string write_snapshot(const std::string& dir, std::int64_t round,
                           const std::vector<float>& params) {
  const std::string path = cat(dir, "/params-", round, ".bin");
  std::ofstream f(path + ".tmp", std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(params.data()),
          static_cast<std::streamsize>(params.size() * sizeof(float)));
  f.close();
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

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
  DataSets data = load_datasets(config);
  const std::int64_t train_samples = data.train.n;
  const auto shards = shard_for(config, data.train, n);
  // The peer keeps only its own shard (rows 0..k-1 of `own`, in the shard's order, so it draws
  // the same batches as the simulator's peer over the whole set) and frees the rest.
  const Dataset own = select_rows(data.train, shards[rank]);
  data.train = Dataset{};
  std::vector<std::int64_t> own_rows(static_cast<std::size_t>(own.n));
  std::iota(own_rows.begin(), own_rows.end(), 0);
  Trainer trainer(*backend, config, own, std::move(own_rows), rank,
                  balance_for(config, shards, rank));

  NetConfig net = net_config(config, topology, rank, trainer.num_params());
  std::fprintf(stderr, "peer %d: %s, %zu neighbours, shard of %lld samples, %s\n", rank,
               net.addresses[rank].c_str(), net.neighbours.size(),
               static_cast<long long>(shards[rank].size()), backend->describe().c_str());
  NetExchange exchange(std::move(net));
  events.emit(ReadyEvent{rank, since(t0)});

  auto algorithm = make_algorithm(trainer, exchange, topology, config.gossip);
  ConvergenceMonitor monitor(topology);
  auto watch = [&](std::int64_t round) {
    const auto change = monitor.check(exchange.dead_peers());
    if (!change) return;
    std::fprintf(stderr, "peer %d round %lld: %s\n", rank, static_cast<long long>(round),
                 change->message.c_str());
    events.emit(AlertEvent{rank, round, change->connected, change->dead, change->message});
  };
  watch(0);

  const RoundPlan plan = plan_rounds(config, train_samples, n);
  const std::int64_t rounds = plan.rounds;

  RunRecord record(opt.out_dir);
  std::vector<float> params(trainer.num_params());
  auto evaluate = [&](std::int64_t round) {
    const Evaluation ev = trainer.evaluate(data.test, config.train.eval_limit);
    const double loss = round > 0 ? algorithm->take_train_loss() : NAN;
    if (round > 0 && !std::isfinite(loss))
      throw RuntimeError(cat("training diverged at round ", round, " (loss ", loss,
                             "): lower optimizer.lr"));
    MetricsRow row;
    row.round = round;
    row.epoch = plan.epoch_at(round);
    row.peer = rank;
    row.loss = round > 0 ? loss : 0.0;
    row.test_accuracy = ev.accuracy;
    row.bytes_sent = exchange.bytes_sent();
    row.seconds = since(t0);
    record.write(row);
    record.flush();
    std::string snapshot;
    if (opt.snapshots) {
      algorithm->model_params(params);
      snapshot = write_snapshot(opt.out_dir, round, params);
    }
    events.emit(EvalEvent{rank, round, rounds, row.epoch, row.loss, row.test_accuracy,
                          row.bytes_sent, row.seconds, snapshot});
  };

  evaluate(0);
  for (std::int64_t r = 0; r < rounds; ++r) {
    algorithm->local_phase(r);
    algorithm->mix_phase(r);
    watch(r + 1);
    const std::int64_t done = r + 1;
    if (plan.eval_due(done)) evaluate(done);
  }

  algorithm->model_params(params);
  RunEnd end{.rounds = rounds, .bytes_sent = exchange.bytes_sent(), .wall_seconds = since(t0),
             .connected = monitor.connected(), .params_sha256 = {sha256_hex(params)}, .extra = {}};
  end.extra.add("peer", rank).add("missing_messages", algorithm->missing_messages())
      .add("samples", std::ssize(shards[rank]));
  const Summary s = record.finish(std::move(end));
  events.emit(DoneEvent{rank, s.last.test_accuracy, s.end.params_sha256.front(),
                        s.end.bytes_sent, s.end.wall_seconds});
  std::fprintf(stderr, "peer %d: done, test accuracy %.4f, %llu bytes sent\n", rank,
               s.last.test_accuracy, static_cast<unsigned long long>(s.end.bytes_sent));
  return kExitOk;
}

}  // namespace gossip
