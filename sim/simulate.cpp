// sim/simulate.cpp: runs N virtual peers. Every round: all local phases on the worker pool
// (each peer's clock first advances by its compute time), a barrier, then all mix phases. At
// each evaluation: every peer's model and the average model on the test set, the consensus
// distance, bytes and the simulated clock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/rng.hpp"
#include "gossip/sim.hpp"
#include "sim/sim_network.hpp"
#include "sim/worker_pool.hpp"

namespace gossip {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Backend for virtual peers: the CPU, one BLAS thread per call (the pool gives parallelism).
std::unique_ptr<Backend> sim_backend(const RunConfig& config) {
  if (parse_backend_choice(config.train.backend) == BackendChoice::kCuda)
    throw InputError("train.backend: the simulator runs virtual peers on the CPU backend "
                     "(use auto or cpu)");
  return make_cpu_backend(1);
}

/// The peers, their exchanges and algorithms, and the loop that runs rounds over them.
class Swarm {
 public:
  Swarm(const RunConfig& config, const Topology& topology, std::vector<Learner> learners)
      : learners_(std::move(learners)),
        network_(topology.n(), learners_.front().num_params, history(config.gossip),
                 config.sim, config.train.seed),
        pool_(config.sim.workers) {
    for (int p = 0; p < n(); ++p)
      algorithms_.push_back(make_algorithm(learners_[p], network_.exchange(p), topology,
                                           config.gossip, config.train.seed));
    host_.assign(n(), std::vector<float>(learners_.front().num_params));
  }

  int n() const { return static_cast<int>(learners_.size()); }
  SimNetwork& network() { return network_; }
  WorkerPool& pool() { return pool_; }
  Algorithm& algorithm(int p) { return *algorithms_[p]; }

  /// Rounds each sender keeps: async reads older ones; a relay publishes its next hop while its
  /// successor reads the last.
  static int history(const GossipConfig& g) {
    if (g.algorithm == "async") return g.max_staleness + 1;
    return g.algorithm == "allreduce" ? 2 : 1;
  }

  void round(std::int64_t r, SimResult& result) {
    const auto t0 = Clock::now();
    pool_.run(n(), [&](int p) {
      Algorithm& a = *algorithms_[p];
      const double compute = a.local_steps(r) * network_.step_seconds(p);
      if (a.overlaps()) {  // the publish leaves before the steps, which run while it travels
        a.local_phase(r);
        network_.exchange(p).compute(compute);
      } else {
        network_.exchange(p).compute(compute);
        a.local_phase(r);
      }
    });
    const auto t1 = Clock::now();
    for (int s = 0; s < algorithms_.front()->relay_steps(); ++s)
      pool_.run(n(), [&](int p) { algorithms_[p]->relay_phase(r, s); });
    pool_.run(n(), [&](int p) { algorithms_[p]->mix_phase(r); });
    result.local_seconds += std::chrono::duration<double>(t1 - t0).count();
    result.mix_seconds += since(t1);
  }

  /// Every peer's model into host buffers; returns spans over them.
  std::vector<std::span<const float>> gather() {
    pool_.run(n(), [&](int p) { algorithms_[p]->model_params(host_[p]); });
    return {host_.begin(), host_.end()};
  }

  /// Fills the fields every evaluation shares (clock, bytes, consensus distance).
  void fill_common(EvalPoint& e, std::int64_t round, std::span<const std::span<const float>> x) {
    e.round = round;
    e.consensus_distance = consensus_distance(x);
    e.peers.resize(n());
    for (int p = 0; p < n(); ++p) {
      const auto& ex = network_.exchange(p);
      e.sim_seconds = std::max(e.sim_seconds, ex.now());
      e.peers[p].bytes_sent = ex.bytes_sent();
      e.bytes_sent += ex.bytes_sent();
    }
  }

  /// Runs result.rounds rounds with an evaluation at round 0 and after each round `due(done)`
  /// accepts: the shared fields, then `measure(e, models)`, then the hooks. Then the final
  /// parameters, clocks, bytes and wall time (since t0).
  template <typename Due, typename Measure>
  void run(SimResult& result, const SimHooks& hooks, Clock::time_point t0, Due due,
           Measure measure) {
    auto evaluate = [&](std::int64_t done) {
      EvalPoint e;
      const auto x = gather();
      fill_common(e, done, x);
      measure(e, x);
      e.wall_seconds = since(t0);
      result.evals.push_back(e);
      if (hooks.on_eval) hooks.on_eval(result.evals.back());
    };
    evaluate(0);
    for (std::int64_t r = 0; r < result.rounds; ++r) {
      round(r, result);
      if (due(r + 1)) evaluate(r + 1);
      if (hooks.on_round) hooks.on_round(r + 1, result.rounds);
    }
    finish(result);
    result.wall_seconds = since(t0);
  }

 private:
  void finish(SimResult& result) {
    const auto x = gather();
    result.params = host_;
    for (const auto& p : x) result.params_sha256.push_back(sha256_hex(p));
    for (int p = 0; p < n(); ++p) {
      result.sim_seconds = std::max(result.sim_seconds, network_.exchange(p).now());
      result.bytes_sent += network_.exchange(p).bytes_sent();
    }
    result.workers = pool_.threads();
  }

  std::vector<Learner> learners_;
  SimNetwork network_;
  WorkerPool pool_;
  std::vector<std::unique_ptr<Algorithm>> algorithms_;
  std::vector<std::vector<float>> host_;
};

void check_peers(const RunConfig& config, const Topology& topology) {
  if (topology.n() < 1) throw InputError("gossip.topology: the topology has no peers");
  for (int s : config.sim.stragglers)
    if (s < 0 || s >= topology.n())
      throw InputError(cat("sim.stragglers: peer ", s, " is not in 0..", topology.n() - 1));
}

/// Median wall seconds of a few local steps of a throw-away trainer (when sim.step_ms is 0).
double measure_step_seconds(Backend& backend, const RunConfig& config, const DataSets& data,
                            const std::vector<std::int64_t>& shard) {
  Trainer probe(backend, config, data.train, shard, 0);
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = Clock::now();
    probe.step();
    t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

SimResult simulate(const RunConfig& config, const Topology& topology, const DataSets& data,
                   const SimHooks& hooks) {
  check_peers(config, topology);
  const auto t0 = Clock::now();
  const int n = topology.n();
  auto backend = sim_backend(config);
  const auto shards = shard_for(config, data.train, n);
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<Learner> learners;
  for (int p = 0; p < n; ++p) {
    trainers.push_back(std::make_unique<Trainer>(*backend, config, data.train, shards[p], p,
                                                 balance_for(config, shards, p)));
    learners.push_back(learner_for(*trainers.back()));
  }
  Trainer evaluator(*backend, config, data.train, {0}, 0);  // holds the average model
  Swarm swarm(config, topology, std::move(learners));
  const double step_s = config.sim.step_ms > 0
                            ? config.sim.step_ms / 1000.0
                            : measure_step_seconds(*backend, config, data, shards[0]);
  swarm.network().set_step_seconds(step_s);

  SimResult result;
  for (const auto& shard : shards) result.samples_per_peer.push_back(std::ssize(shard));
  const RoundPlan plan = plan_rounds(config, data.train.n, n);
  result.rounds = plan.rounds;
  std::vector<float> average(trainers.front()->num_params());
  const std::int64_t peer_limit =
      config.sim.peer_eval_limit > 0 ? config.sim.peer_eval_limit : config.train.eval_limit;

  auto measure = [&](EvalPoint& e, std::span<const std::span<const float>> x) {
    const std::int64_t round = e.round;
    average_params(x, average);
    evaluator.upload_params(average);
    e.epoch = plan.epoch_at(round);
    swarm.pool().run(n + 1, [&](int k) {
      if (k == n) {
        const Evaluation ev = evaluator.evaluate(data.test, config.train.eval_limit);
        e.average_accuracy = ev.accuracy;
        e.average_loss = ev.loss;
        return;
      }
      e.peers[k].test_accuracy = trainers[k]->evaluate(data.test, peer_limit).accuracy;
      e.peers[k].train_loss = swarm.algorithm(k).take_train_loss();
    });
    double loss = 0.0;
    e.peer_accuracy_min = 1.0;
    e.peer_accuracy_max = 0.0;
    for (int p = 0; p < n; ++p) {
      const auto& pe = e.peers[p];
      if (round > 0 && !std::isfinite(pe.train_loss))
        throw RuntimeError(cat("training diverged at round ", round, " (peer ", p, " loss ",
                               pe.train_loss, "): lower optimizer.lr"));
      loss += round > 0 ? pe.train_loss : 0.0;
      e.peer_accuracy_min = std::min(e.peer_accuracy_min, pe.test_accuracy);
      e.peer_accuracy_max = std::max(e.peer_accuracy_max, pe.test_accuracy);
    }
    e.train_loss = loss / n;
  };
  swarm.run(result, hooks, t0, [&](std::int64_t done) { return plan.eval_due(done); }, measure);
  result.step_seconds = step_s;
  result.epochs = result.evals.back().epoch;
  return result;
}

SimResult simulate_consensus(const RunConfig& config, const Topology& topology,
                             const SimHooks& hooks) {
  check_peers(config, topology);
  const auto t0 = Clock::now();
  const int n = topology.n();
  auto backend = sim_backend(config);
  const std::int64_t dim = config.sim.consensus_dim;
  std::vector<DeviceArray<float>> vectors;
  std::vector<Learner> learners;
  for (int p = 0; p < n; ++p) {
    vectors.emplace_back(*backend, static_cast<std::size_t>(dim));
    auto rng = make_rng(config.train.seed, static_cast<std::uint64_t>(p), Stream::kSim);
    for (std::int64_t i = 0; i < dim; ++i) vectors.back().data()[i] =
        static_cast<float>(normal01(rng));
    learners.push_back(Learner{backend.get(), vectors.back().data(), dim, {}});
  }
  Swarm swarm(config, topology, std::move(learners));
  SimResult result;
  result.rounds = config.sim.consensus_rounds;
  swarm.run(result, hooks, t0, [](std::int64_t) { return true; },
            [](EvalPoint&, std::span<const std::span<const float>>) {});
  return result;
}

}  // namespace gossip
