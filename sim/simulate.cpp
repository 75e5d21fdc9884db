// sim/simulate.cpp: runs N virtual peers. Every round: all local phases on the worker pool
// (each peer's clock first advances by its compute time), a barrier, then all mix phases. At
// each evaluation: every peer's model and the average model on the test set, the consensus
// distance, bytes and the simulated clock.
#include <algorithm>
#include <map>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>

#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/rng.hpp"
#include "gossip/sim.hpp"
#include "gossip/timeline.hpp"
#include "sim/sim_network.hpp"
#include "sim/swarm.hpp"
#include "sim/worker_pool.hpp"

namespace gossip {

namespace {

using sim_parts::Clock;
using sim_parts::since;
using sim_parts::Swarm;

/// Backend for virtual peers: the CPU, one BLAS thread per call (the pool gives parallelism);
/// with train.backend: cuda the GPU (InputError where there is none), or what the hooks give.
/// `device_ok` false (the pure-averaging mode, which fills its vectors in place): the CPU.
std::unique_ptr<Backend> sim_backend(const RunConfig& config, const SimHooks& hooks,
                                     bool device_ok) {
  std::unique_ptr<Backend> backend;
  if (hooks.backend && device_ok) backend = hooks.backend();
  else if (config.train.backend == BackendChoice::kCuda && device_ok)
    backend = make_backend(BackendChoice::kCuda, 1, false);
  else if (config.train.backend == BackendChoice::kCuda)
    throw InputError(cat(config.where("train.backend"), ": cuda, but the pure-averaging mode "
                         "(sim.consensus_rounds) runs on the CPU (use auto or cpu)"));
  else backend = make_cpu_backend(1);
  use_conv(*backend, config.train.conv);
  return backend;
}

/// The backends the virtual peers run on: one on the host, where any worker thread steps any
/// peer; on a device (a GPU) one per worker thread (sim.workers, 0 there meaning 1), since a
/// backend's stream, handles and scratch serve one thread at a time: peer p runs on backend p
/// mod their count (no more of them than the `peers`). All on the first visible GPU: a
/// worker's tasks may run on any thread of the pool, and a CUDA backend sets its device only
/// on the thread that makes it.
std::vector<std::unique_ptr<Backend>> sim_backends(const RunConfig& config,
                                                   const SimHooks& hooks, int peers) {
  std::vector<std::unique_ptr<Backend>> all;
  all.push_back(sim_backend(config, hooks, true));
  if (all.front()->host_memory()) return all;
  for (int w = 1; w < std::min(config.sim.workers, peers); ++w)
    all.push_back(sim_backend(config, hooks, true));
  return all;
}

/// The config the virtual peers run under: on a device, as many worker threads as backends.
RunConfig swarm_config(const RunConfig& config,
                       const std::vector<std::unique_ptr<Backend>>& backends) {
  RunConfig c = config;
  if (!backends.front()->host_memory()) c.sim.workers = static_cast<int>(backends.size());
  return c;
}


void check_peers(const RunConfig& config, const Topology& topology) {
  if (topology.n() < 1) throw InputError("gossip.topology: the topology has no peers");
  check_faults(config, topology);
  // A simulated elastic run takes a dead member out of the member set (drop_member).
  for (std::size_t i = 0; i < config.faults.size() && !topology.epochs().empty(); ++i)
    if (config.faults[i].action == FaultAction::kRestart)
      throw InputError(cat(config.where(cat("faults[", i, "].restart")), ": an elastic run takes "
                           "a dead member out of the member set, so it cannot be restarted into "
                           "its place; let it join again with a join entry"));
  for (int s : config.sim.stragglers)
    if (s < 0 || s >= topology.n())
      throw InputError(cat("sim.stragglers: peer ", s, " is not in 0..", topology.n() - 1));
}

/// The virtual peers' Trainer::graphs(): the one answer, or each with its count of peers.
std::string graphs_of(const std::vector<std::unique_ptr<Trainer>>& trainers) {
  std::map<std::string, int> seen;
  for (const auto& t : trainers) ++seen[t->graphs()];
  if (seen.size() == 1) return seen.begin()->first;
  std::string all;
  for (const auto& [answer, peers] : seen)
    all += cat(all.empty() ? "" : "; ", answer, " (", peers, " peers)");
  return all;
}

/// Median wall seconds of a few local steps of a throw-away trainer (when sim.step_ms is 0).
/// With sim.eval_peers, the last evaluation screens every peer's model on kScreenSamples test
/// samples and evaluates the kScreenLowest lowest of them in full too.
constexpr std::int64_t kScreenSamples = 1000;
constexpr std::size_t kScreenLowest = 8;

/// Evaluators for the peers' models: one Trainer sized for the evaluation batch per worker
/// thread, and one for the average model. On the host a task takes a free one; on a device
/// worker w evaluates on its own (on its backend), and the average model is on worker 0's.
class Evaluators {
 public:
  Evaluators(const std::vector<std::unique_ptr<Backend>>& backends, const RunConfig& config,
             const DataSets& data, int threads)
      : data_(&data), average_(*backends.front(), config, data.train, {0}, 0) {
    const bool host = backends.front()->host_memory();
    const int count = host ? threads : static_cast<int>(backends.size());
    for (int i = 0; i < count; ++i) {
      all_.push_back(std::make_unique<Trainer>(*backends[host ? 0 : i], config, data.train,
                                               std::vector<std::int64_t>{0}, 0));
      free_.push_back(static_cast<std::size_t>(i));
    }
    host_.resize(all_.size());
  }
  Trainer& average() { return average_; }
  /// `peer`'s model (its parameters as they are) on the test set's first `limit` samples
  /// (0: all), on a free evaluator (`lane` < 0) or worker `lane`'s: what peer.evaluate(test,
  /// limit) gives, bit for bit.
  Evaluation evaluate(const Trainer& peer, std::int64_t limit, int lane) {
    if (lane >= 0) return evaluate_on(static_cast<std::size_t>(lane), peer, limit);
    std::size_t slot = 0;
    {
      std::lock_guard lk(mu_);
      GOSSIP_CHECK_MSG(!free_.empty(), "sim: more evaluations at once than worker threads");
      slot = free_.back();
      free_.pop_back();
    }
    const Evaluation e = evaluate_on(slot, peer, limit);
    std::lock_guard lk(mu_);
    free_.push_back(slot);
    return e;
  }

 private:
  Evaluation evaluate_on(std::size_t slot, const Trainer& peer, std::int64_t limit) {
    std::vector<float>& host = host_[slot];
    host.resize(static_cast<std::size_t>(peer.num_params()));
    peer.download_params(host);
    all_[slot]->upload_params(host);
    return all_[slot]->evaluate(data_->test, limit);
  }

  const DataSets* data_;
  Trainer average_;
  std::vector<std::unique_ptr<Trainer>> all_;
  std::vector<std::vector<float>> host_;  // each evaluator's staging copy of a peer's model
  std::vector<std::size_t> free_;
  std::mutex mu_;
};

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

/// An evaluation point of a simulated run (Swarm::run's `measure`): the average model's
/// accuracy and loss, each evaluated peer's, and the train loss over the peers that stepped.
struct Measure {
  const RunConfig& config;
  const DataSets& data;
  const SimHooks& hooks;
  const Topology& topology;
  Swarm& swarm;
  std::vector<std::unique_ptr<Trainer>>& trainers;
  Evaluators& evaluators;
  const RoundPlan& plan;
  std::vector<float>& average;
  std::vector<char> stepped;  // per peer: it stepped since the last evaluation

  void operator()(EvalPoint& e, std::span<const std::span<const float>> x) {
    const std::int64_t round = e.round;
    const int n = swarm.n();
    average_params(swarm.live(x), average);
    Trainer& evaluator = evaluators.average();
    evaluator.upload_params(average);
    e.epoch = plan.epoch_at(round);
    const bool last = round >= plan.rounds;
    const std::vector<char> chosen = chosen_peers(last);
    // Task n, the average model, is on worker 0's backend, beside its peers' evaluations.
    swarm.for_peers(n + 1, [n](int k) { return k == n ? 0 : k; }, [&](int k) {
      if (k == n) {
        const Evaluation ev = evaluator.evaluate(data.test, config.train.eval_limit);
        e.average_accuracy = ev.accuracy;
        e.average_loss = ev.loss;
        return;
      }
      // The last evaluation takes every peer on the average model's samples, so the final
      // accuracies of the peers and of the average compare directly.
      const std::int64_t limit = config.train.peer_eval_samples(last);
      // A peer that is dead now (killed, or an elastic run's rank that is not a member at this
      // round) is not evaluated: its frozen model is not the run's, nor its lowest peer.
      const bool member = swarm.alive(k);
      e.peers[k].test_accuracy = chosen[k] && member
                                     ? evaluators.evaluate(*trainers[k], limit,
                                                           swarm.lane(k)).accuracy
                                     : std::numeric_limits<double>::quiet_NaN();
      stepped[k] = swarm.algorithm(k).stepped();
      e.peers[k].train_loss = swarm.algorithm(k).take_train_loss();
    });
    summarize(e, round);
  }

  /// Which peers' models are evaluated: all of them, or sim.eval_peers evenly spaced ranks and,
  /// at the last evaluation, the ones a screening of every live model finds lowest.
  std::vector<char> chosen_peers(bool last) {
    const int n = swarm.n();
    std::vector<char> chosen(static_cast<std::size_t>(n), 1);
    if (config.sim.eval_peers <= 0 || n <= config.sim.eval_peers) return chosen;
    std::fill(chosen.begin(), chosen.end(), 0);
    for (std::int64_t i = 0; i < config.sim.eval_peers; ++i)
      chosen[static_cast<std::size_t>(i * n / config.sim.eval_peers)] = 1;
    if (!last) return chosen;
    std::vector<double> screen(static_cast<std::size_t>(n), 2.0);
    const std::int64_t samples = std::min<std::int64_t>(
        kScreenSamples, config.train.eval_limit > 0 ? config.train.eval_limit : data.test.n);
    swarm.for_peers(n, [&](int k) {
      if (swarm.alive(k))
        screen[k] = evaluators.evaluate(*trainers[k], samples, swarm.lane(k)).accuracy;
    });
    std::vector<int> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const auto lowest = std::min<std::size_t>(kScreenLowest, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(lowest),
                      order.end(), [&](int a, int b) {
                        return screen[a] < screen[b] || (screen[a] == screen[b] && a < b);
                      });
    for (std::size_t i = 0; i < lowest; ++i)
      if (screen[order[i]] <= 1.0) chosen[order[i]] = 1;
    return chosen;
  }

  /// The point's train loss (over the live peers that stepped) and the peers' accuracy range.
  void summarize(EvalPoint& e, std::int64_t round) const {
    double loss = 0.0;
    e.peer_accuracy_min = 1.0;
    e.peer_accuracy_max = 0.0;
    int trained = 0;
    for (int p = 0; p < swarm.n(); ++p) {
      const auto& pe = e.peers[p];
      if (!swarm.alive(p)) continue;  // a killed peer's frozen model is not the run's
      // A peer paused since the last evaluation took no step: it has no loss to average.
      if (round == 0 || stepped[p]) {
        ++trained;
        if (round > 0 && !std::isfinite(pe.train_loss) && !hooks.divergence_is_a_result)
          throw RuntimeError(cat("training diverged at round ", round, " (peer ", p, " loss ",
                                 pe.train_loss, "): lower optimizer.lr",
                                 config.gossip.outer.enabled ? " or gossip.outer.lr" : ""));
        loss += round > 0 ? pe.train_loss : 0.0;
      }
      if (std::isnan(pe.test_accuracy)) continue;  // not evaluated (sim.eval_peers)
      e.peer_accuracy_min = std::min(e.peer_accuracy_min, pe.test_accuracy);
      e.peer_accuracy_max = std::max(e.peer_accuracy_max, pe.test_accuracy);
    }
    e.train_loss = loss / std::max(1, trained);
  }
};

/// The virtual peers' trainers, peer p on backend p mod their count (Swarm::lane), and their
/// learners into `learners`.
std::vector<std::unique_ptr<Trainer>> make_trainers(
    const RunConfig& config, const std::vector<std::unique_ptr<Backend>>& backends,
    const DataSets& data, const std::vector<std::vector<std::int64_t>>& shards,
    std::vector<Learner>& learners) {
  const int n = static_cast<int>(shards.size());
  // A virtual peer only trains: its model's buffers are sized for a training batch, and its
  // gradients, activations and batch are the worker thread's (shared scratch), so a peer holds
  // its parameters and optimizer state. The test set is evaluated by one evaluator per worker
  // thread (each takes a peer's parameters in turn).
  RunConfig train_only = config;
  train_only.train.eval_batch = config.train.batch;
  std::vector<std::unique_ptr<Trainer>> trainers;
  // train.same_init: every peer starts from peer 0's draws, made once and copied (a 235k
  // parameter model's normal draws cost about 8 ms a peer, 8 s at 1,024 peers).
  std::vector<float> initial;
  for (int p = 0; p < n; ++p) {
    Backend& on = *backends[static_cast<std::size_t>(p) % backends.size()];  // Swarm::lane
    trainers.push_back(std::make_unique<Trainer>(on, train_only, data.train, shards[p], p,
                                                 balance_for(config, shards, p),
                                                 /*shared_scratch=*/true, initial));
    learners.push_back(learner_for(*trainers.back()));
    if (p == 0 && config.train.same_init) {
      initial.resize(static_cast<std::size_t>(trainers[0]->num_params()));
      trainers[0]->download_params(initial);
    }
  }
  return trainers;
}

/// One GEMM for every virtual peer, chosen as a real peer chooses it (the same cache file), so
/// that gossip sim and gossip run of one config run the same kernel.
GemmChoice choose_sim_gemm(const RunConfig& config,
                           const std::vector<std::unique_ptr<Backend>>& backends,
                           Trainer& trainer) {
  const GemmRequest request = gemm_request(config.train.gemm, 1, config.train.precision);
  const GemmChoice gemm =
      choose_gemm(*backends.front(), request, trainer.model().gemm_shapes(config.train.batch));
  for (std::size_t w = 1; w < backends.size(); ++w)  // a device's: its precision's GEMM
    choose_gemm(*backends[w], request, {});
  return gemm;
}

/// A joiner of an elastic run starts from the parameters it is handed, its momentum zero.
void restore_joiners(Swarm& swarm, std::vector<std::unique_ptr<Trainer>>& trainers) {
  swarm.on_join(
      [&](int p, std::span<const float> params, std::int64_t steps) {
        Trainer::State s = trainers[p]->state();
        s.params.assign(params.begin(), params.end());
        std::fill(s.velocity.begin(), s.velocity.end(), 0.0f);
        s.steps = steps;
        trainers[p]->restore(s);
      },
      [&](int q) { return trainers[q]->steps(); });
}

/// Split at the end: the components train separate models; each one's average on its own.
void evaluate_components(SimResult& result, std::vector<float>& average, Trainer& evaluator,
                         const RunConfig& config, const DataSets& data) {
  if (result.final_components.size() > 1)
    for (const auto& component : result.final_components) {
      std::vector<std::span<const float>> models;
      for (int p : component) models.emplace_back(result.params[p]);
      average_params(models, average);
      evaluator.upload_params(average);
      result.component_accuracy.push_back(
          evaluator.evaluate(data.test, config.train.eval_limit).accuracy);
    }
}

}  // namespace

SimResult simulate(const RunConfig& config, const Topology& loaded, const DataSets& data,
                   const SimHooks& hooks) {
  // With joins and leaves in the schedule: the elastic graphs over every rank that may join.
  Topology topology = run_topology(config, loaded);
  check_peers(config, topology);
  const auto t0 = Clock::now();
  const int n = topology.n();
  const auto backends = sim_backends(config, hooks, n);
  Backend& backend = *backends.front();
  const auto shards = shard_for(config, data.train, n);
  std::vector<Learner> learners;
  std::vector<std::unique_ptr<Trainer>> trainers =
      make_trainers(config, backends, data, shards, learners);
  const GemmChoice gemm = choose_sim_gemm(config, backends, *trainers.front());
  const RunConfig run_as = swarm_config(config, backends);
  Swarm swarm(run_as, topology, std::move(learners));
  restore_joiners(swarm, trainers);
  swarm.trace(config.sim.trace_peers);
  Evaluators evaluators(backends, config, data, swarm.workers() + 1);
  Trainer& evaluator = evaluators.average();  // holds the average model
  const double step_s = config.sim.step_ms > 0
                            ? config.sim.step_ms / 1000.0
                            : measure_step_seconds(backend, config, data, shards[0]);
  swarm.network().set_step_seconds(step_s);

  SimResult result;
  result.gemm = gemm;
  result.backend = backend.describe();
  if (!topology.epochs().empty()) {
    result.initial_members = topology.members(0);
    result.initial_spectral_gap = swarm.initial_gap();
  }
  for (const auto& shard : shards) result.samples_per_peer.push_back(std::ssize(shard));
  const RoundPlan plan = plan_rounds(config, data.train.n, n);
  result.rounds = plan.rounds;
  std::vector<float> average(trainers.front()->num_params());

  Measure measure{config, data, hooks, topology, swarm, trainers, evaluators, plan, average,
                  std::vector<char>(static_cast<std::size_t>(n), 0)};
  swarm.run(result, hooks, t0, [&](std::int64_t done) { return plan.eval_due(done); }, measure);
  evaluate_components(result, average, evaluator, config, data);
  result.step_seconds = step_s;
  result.graphs = graphs_of(trainers);
  result.timelines = swarm.take_timelines();
  result.epochs = result.evals.back().epoch;
  return result;
}

SimResult simulate_consensus(const RunConfig& config, const Topology& loaded,
                             const SimHooks& hooks) {
  Topology topology = run_topology(config, loaded);
  check_peers(config, topology);
  const auto t0 = Clock::now();
  const int n = topology.n();
  auto backend = sim_backend(config, hooks, false);
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
