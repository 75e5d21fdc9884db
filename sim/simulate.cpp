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

/// The peers, their exchanges and algorithms, and the loop that runs rounds over them. Each
/// peer's exchange keeps its membership view (MonitoredExchange, as in a real peer) and its
/// convergence monitor watches the live graph; the fault schedule kills, restarts and pauses
/// here, as `gossip run` does to processes, and cuts links and attacks through each peer's
/// FaultedExchange (under its MonitoredExchange, as in a real peer; the bare SimExchange when the
/// schedule cuts nothing and lets the peer attack in no round).
class Swarm {
 public:
  Swarm(const RunConfig& config, Topology& topology, std::vector<Learner> learners)
      : config_(config), topology_(&topology), learners_(std::move(learners)),
        network_(topology.n(), learners_.front().num_params, history(config.gossip),
                 config.sim, config.train.seed, config.gossip.wire),
        pool_(config.sim.workers) {
    for (int p = 0; p < n(); ++p) {
      SimExchange& ex = network_.exchange(p);
      faulted_.push_back(
          std::make_unique<FaultedExchange>(ex, config_.faults, config.train.seed));
      monitored_.push_back(std::make_unique<MonitoredExchange>(
          faulted_.back()->top(), config.monitor, [&ex] { return ex.now(); }));
      watches_.push_back(make_watch(p));
    }
    for (int p = 0; p < n(); ++p) {
      algorithms_.push_back(make_algorithm(network_.timed(p, learners_[p]), *monitored_[p],
                                           topology, config.gossip, config.train.seed,
                                           round_timeout(config.monitor)));
      const int tags = algorithms_.back()->relay_steps() + 1;
      monitored_[p]->set_tags_per_round(tags);
    }
    alive_.assign(n(), 1);
    if (!topology.epochs().empty()) {  // an elastic run: only the first members are there
      alive_.assign(n(), 0);
      for (int p : topology.members(0)) alive_[p] = 1;
      for (int p = 0; p < n(); ++p)
        if (!alive_[p]) network_.set_down(p, true);
    }
    paused_until_.assign(n(), -1.0);
    timelines_.resize(static_cast<std::size_t>(n()));
  }

  /// Sets a joining peer's state: its parameters (the average of its donors' models) and the
  /// learning-rate schedule's position `steps` (its first donor's), momentum zero; `steps_of`
  /// tells a donor's optimizer steps.
  using JoinState = std::function<void(int peer, std::span<const float> params, std::int64_t steps)>;
  using StepsOf = std::function<std::int64_t(int peer)>;
  void on_join(JoinState f, StepsOf steps_of) {
    join_state_ = std::move(f);
    steps_of_ = std::move(steps_of);
  }

  /// The spectral gap per round of the elastic graph of `members`.
  double members_gap(const std::vector<int>& members) const {
    return members_spectral_gap(*topology_->elastic(), members);
  }
  double initial_gap() const { return members_gap(topology_->members(0)); }

  /// Keeps the per-round timelines of `count` evenly spaced peers (on their simulated clocks).
  void trace(std::int64_t count) {
    count = std::min<std::int64_t>(count, n());
    for (std::int64_t i = 0; i < count; ++i) {
      const auto p = static_cast<int>(i * n() / count);
      SimExchange& ex = network_.exchange(p);
      ex.keep_collects(true);
      timelines_[p] = std::make_unique<Timeline>(p, [&ex] { return ex.now(); });
    }
  }
  /// The timelines kept (taken).
  std::vector<std::pair<int, Timeline>> take_timelines() {
    std::vector<std::pair<int, Timeline>> out;
    for (int p = 0; p < n(); ++p)
      if (timelines_[p]) out.emplace_back(p, std::move(*timelines_[p]));
    timelines_.clear();
    return out;
  }

  int n() const { return static_cast<int>(learners_.size()); }
  SimNetwork& network() { return network_; }
  WorkerPool& pool() { return pool_; }
  Algorithm& algorithm(int p) { return *algorithms_[p]; }
  /// Whether peer p's process is alive (not killed, or restarted since).
  bool alive(int p) const { return alive_[p] != 0; }

  /// Rounds each sender keeps: async reads older ones; a relay publishes its next hop while its
  /// successor reads the last.
  static int history(const GossipConfig& g) {
    if (traits(g.algorithm).stale_rounds) return g.max_staleness + 1;
    return traits(g.algorithm).ring || g.choco.gossip_steps > 1 ? 2 : 1;
  }

  void round(std::int64_t r, SimResult& result) {
    apply_membership(r, result);
    apply_faults(r, result);
    std::vector<int> active;
    for (int p = 0; p < n(); ++p)
      if (alive_[p] && !paused(p)) active.push_back(p);
    const auto t0 = Clock::now();
    pool_.run(static_cast<int>(active.size()), [&](int k) {
      const int p = active[k];
      Algorithm& a = *algorithms_[p];
      SimExchange& ex = network_.exchange(p);
      Timeline* tl = timelines_.empty() ? nullptr : timelines_[p].get();
      if (tl) tl->begin_round(r);
      const double compute = a.local_steps(r) * network_.step_seconds(p);
      auto steps = [&] {
        const double from = ex.now();
        ex.work(compute);
        if (tl) tl->add(Phase::kCompute, from, ex.now());
      };
      if (a.overlaps()) {  // the publish leaves before the steps, which run while it travels
        network_.run_phase(p, [&] { a.local_phase(r); });
        steps();
      } else {
        steps();
        network_.run_phase(p, [&] { a.local_phase(r); });
      }
      if (tl) tl->mixing();
    });
    const auto t1 = Clock::now();
    for (int s = 0; s < algorithms_.front()->relay_steps(); ++s)
      pool_.run(static_cast<int>(active.size()), [&](int k) {
        network_.run_phase(active[k], [&] { algorithms_[active[k]]->relay_phase(r, s); });
      });
    pool_.run(static_cast<int>(active.size()), [&](int k) {
      const int p = active[k];
      network_.run_phase(p, [&] { algorithms_[p]->mix_phase(r); });
      if (Timeline* tl = timelines_.empty() ? nullptr : timelines_[p].get()) {
        for (const auto& [from, to] : network_.exchange(p).take_collects())
          tl->add(Phase::kWait, from, to);
        tl->end_round();
      }
    });
    result.local_seconds += std::chrono::duration<double>(t1 - t0).count();
    result.mix_seconds += since(t1);
    for (int p : active) watch(p, r + 1, result);
    drop_the_dead(r + 1);
  }

  /// An elastic run: a member whose death a live member's monitor has confirmed leaves the
  /// member set (drop_member), so the graph is derived again without it: at the round the real
  /// peers' announcement would carry (dead_announcement_round), the earliest of its confirmers'
  /// while that change is still ahead.
  void drop_the_dead(std::int64_t done) {
    if (topology_->epochs().empty()) return;
    const std::int64_t after = config_.monitor.remove_dead_after_rounds;
    for (int p = 0; p < n(); ++p) {
      if (!alive_[p]) continue;
      for (int d : monitored_[p]->dead_peers()) {
        const std::int64_t at =
            dead_announcement_round(done, monitored_[p]->last_message_round(d), after);
        const auto it = dropped_.find(d);
        if (it != dropped_.end() && (it->second.first <= at || it->second.second <= done))
          continue;
        const std::int64_t from = drop_member(*topology_, d, at);
        dropped_[d] = {at, from < 0 ? done : from};
      }
    }
  }

  /// The models of the peers alive now (all of them when nothing was killed).
  std::vector<std::span<const float>> live(std::span<const std::span<const float>> x) const {
    std::vector<std::span<const float>> out;
    for (int p = 0; p < n(); ++p)
      if (alive_[p]) out.push_back(x[p]);
    return out;
  }

  /// Every peer's model, as host spans. Every algorithm's model is its learner's parameters
  /// (model_params downloads them): on a host backend they are read where they are, without a
  /// model-sized copy per peer; otherwise they are downloaded into host buffers.
  std::vector<std::span<const float>> gather() {
    const auto np = static_cast<std::size_t>(learners_.front().num_params);
    if (learners_.front().backend->host_memory()) {
      std::vector<std::span<const float>> out;
      out.reserve(learners_.size());
      for (const Learner& l : learners_) out.emplace_back(l.params, np);
      return out;
    }
    if (host_.empty()) host_.assign(n(), std::vector<float>(np));
    pool_.run(n(), [&](int p) { algorithms_[p]->model_params(host_[p]); });
    return {host_.begin(), host_.end()};
  }

  /// Fills the fields every evaluation shares (clock, bytes, consensus distance).
  void fill_common(EvalPoint& e, std::int64_t round, std::span<const std::span<const float>> x) {
    e.round = round;
    e.consensus_distance = consensus_distance(live(x));
    e.live = static_cast<int>(std::count(alive_.begin(), alive_.end(), 1));
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
      if (stop_) {  // the live graph split and monitor.on_partition is stop
        evaluate(r + 1);
        result.rounds = r + 1;
        result.stopped_by_partition = true;
        break;
      }
      if (due(r + 1)) {
        evaluate(r + 1);
        if (hooks.stop_after && hooks.stop_after(result.evals.back())) {
          result.rounds = r + 1;
          break;
        }
      }
      if (hooks.on_round) hooks.on_round(r + 1, result.rounds);
    }
    finish(result);
    result.wall_seconds = since(t0);
  }

 private:
  void finish(SimResult& result) {
    // The run is over: the messages in flight go before the final models are copied out, so
    // the copies take their place rather than add to the peak.
    network_.release();
    const auto x = gather();
    result.params.reserve(x.size());
    for (const auto& p : x) result.params.emplace_back(p.begin(), p.end());
    result.params_sha256.resize(x.size());  // hashed on the pool: a gigabyte at 1,024 peers
    pool_.run(n(), [&](int p) { result.params_sha256[p] = sha256_hex(result.params[p]); });
    host_.clear();
    result.alive_at_end.assign(alive_.begin(), alive_.end());
    for (int p = 0; p < n(); ++p)
      for (const auto& [from, count] : watches_[p].refused())
        result.refused.emplace_back(p, from, count);
    // Components of the live graph at the end, as peer 0's monitor... every live peer's monitor
    // agrees once the views have spread; take the view of the lowest live peer.
    for (int p = 0; p < n(); ++p)
      if (alive_[p]) {
        result.final_components =
            live_graph(*topology_, monitored_[p]->dead_peers(), result.rounds).components;
        break;
      }
    for (int p = 0; p < n(); ++p) {
      result.sim_seconds = std::max(result.sim_seconds, network_.exchange(p).now());
      result.bytes_sent += network_.exchange(p).bytes_sent();
    }
    result.workers = pool_.threads();
  }

  /// Before round r of an elastic run whose change takes effect at r + 1: each joiner's
  /// hand-over, the average of its donors' models after round r - 1 (join_donors: its
  /// in-neighbours in the new graph that were members already, alive) and its first donor's
  /// steps, as real donors send it a round ahead so that the joiner's first round waits for
  /// nothing more than any other round does.
  void take_handovers(std::int64_t r) {
    const auto& epochs = topology_->epochs();
    const std::size_t e = topology_->epoch_index(r + 1);
    if (e == 0 || epochs[e].from != r + 1) return;
    const auto np = static_cast<std::size_t>(learners_.front().num_params);
    for (int p : epochs[e].members) {
      if (std::binary_search(epochs[e - 1].members.begin(), epochs[e - 1].members.end(), p))
        continue;
      Handover h;
      h.donors = join_donors(*topology_, e, p);
      std::erase_if(h.donors, [&](int q) { return !alive_[q]; });
      ModelAverage average(np);
      h.model.resize(np);
      for (int q : h.donors) {
        algorithms_[q]->model_params(h.model);
        average.add(h.model);
      }
      if (!h.donors.empty()) {
        average.write(h.model);
        h.steps = steps_of_ ? steps_of_(h.donors.front()) : 0;
      }
      handovers_[p] = std::move(h);
    }
  }

  /// An elastic run's membership change taking effect at round r (Topology::epochs): the
  /// leavers' processes end (their last round, r - 1, was mixed as usual), and each joiner
  /// starts from its hand-over (take_handovers, a round before), momentum zero.
  void apply_membership(std::int64_t r, SimResult& result) {
    const auto& epochs = topology_->epochs();
    if (epochs.empty()) return;
    take_handovers(r);
    if (r == 0) return;
    const std::size_t e = topology_->epoch_index(r);
    if (epochs[e].from != r) return;
    const std::vector<int>& before = epochs[e - 1].members;
    const std::vector<int>& now = epochs[e].members;
    std::vector<int> joined, left;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                        std::back_inserter(joined));
    std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                        std::back_inserter(left));
    std::vector<int> dead, gone;  // out as confirmed dead, out as leavers
    for (int p : left) (alive_[p] ? gone : dead).push_back(p);
    for (int p : left) {
      alive_[p] = 0;
      network_.set_down(p, true);
    }
    MembershipRecord record{r, epochs[e].announced, now, joined, gone, {}, dead,
                            members_gap(now)};
    for (int p : joined) {
      const Handover h = std::move(handovers_[p]);
      handovers_.erase(p);
      alive_[p] = 1;
      network_.set_down(p, false);
      monitored_[p]->restart();
      watches_[p] = make_watch(p);
      if (!h.donors.empty() && join_state_) join_state_(p, h.model, h.steps);
      SimExchange& ex = network_.exchange(p);
      ex.compute(std::max(0.0, latest_clock() - ex.now()));
      record.donors.push_back(h.donors);
    }
    for (const auto& [action, peers] :
         {std::pair{"left", gone}, std::pair{"removed", dead}, std::pair{"joined", joined}})
      if (!peers.empty())
        result.faults.push_back(SimFault{r, action, peers, 0.0, latest_clock()});
    result.membership.push_back(std::move(record));
  }

  bool paused(int p) {
    if (paused_until_[p] < 0) return false;
    double now = 0.0;
    for (int q = 0; q < n(); ++q)
      if (q != p && alive_[q]) now = std::max(now, network_.exchange(q).now());
    return now < paused_until_[p];
  }

  /// The latest simulated time any live peer has reached.
  double latest_clock() {
    double now = 0.0;
    for (int q = 0; q < n(); ++q)
      if (alive_[q]) now = std::max(now, network_.exchange(q).now());
    return now;
  }

  /// A peer that comes back (restarted, or woken from a pause) takes the model of its
  /// lowest-numbered live in-neighbour, as a real peer catching up takes a neighbour's newest
  /// parameters, and its clock joins the others'.
  void catch_up(int p, std::int64_t round) {
    for (int q = 0; q < n(); ++q) {
      bool in = false;
      for (const Graph& g : topology_->epoch_rounds(round))  // the graphs of round's epoch
        for (const auto& nb : g.in_neighbours(p)) in = in || nb.peer == q;
      if (!in || !alive_[q] || paused(q)) continue;
      std::vector<float> model(static_cast<std::size_t>(learners_[q].num_params));
      algorithms_[q]->model_params(model);
      learners_[p].backend->upload(learners_[p].params, model.data(),
                                   model.size() * sizeof(float));
      Algorithm::State st = algorithms_[p]->state();
      st.weight = algorithms_[q]->weight();
      algorithms_[p]->restore(st);
      break;
    }
    SimExchange& ex = network_.exchange(p);
    ex.compute(std::max(0.0, latest_clock() - ex.now()));
  }

  void apply_faults(std::int64_t r, SimResult& result) {
    for (int p = 0; p < n(); ++p)  // a pause that is over
      if (paused_until_[p] >= 0 && alive_[p] && !paused(p)) {
        paused_until_[p] = -1.0;
        network_.set_silent_from(p, -1.0);
        catch_up(p, r);
      }
    for (const Fault& f : config_.faults) {
      if (f.action == FaultAction::kCut || f.action == FaultAction::kAttack || f.round != r) continue;
      for (int p : f.peers) {
        if (f.action == FaultAction::kKill) {
          alive_[p] = 0;
          network_.set_down(p, true);
        }
        if (f.action == FaultAction::kRestart && !alive_[p]) {
          alive_[p] = 1;
          network_.set_down(p, false);
          paused_until_[p] = -1.0;
          network_.set_silent_from(p, -1.0);
          monitored_[p]->restart();
          watches_[p] = make_watch(p);
          catch_up(p, r);
        }
        if (f.action == FaultAction::kPause && alive_[p]) {
          paused_until_[p] = latest_clock() + f.seconds;
          network_.set_silent_from(p, latest_clock());
        }
      }
      result.faults.push_back(
            SimFault{r, fault_action_name(f.action), f.peers, f.seconds, latest_clock()});
    }
    // Cuts and attacks act in the peers' FaultedExchange, round by round; here they are only
    // recorded.
    for (const Fault& f : config_.faults) {
      if (f.action == FaultAction::kCut && (f.round == r || f.to_round == r)) {
        std::vector<int> ends;
        for (const auto& [a, b] : f.links) ends.insert(ends.end(), {a, b});
        result.faults.push_back(SimFault{r, f.round == r ? "cut" : "uncut", ends, 0.0,
                                         latest_clock()});
      }
      if (f.action == FaultAction::kAttack && (f.round == r || (f.to_round > 0 && f.to_round == r)))
        result.faults.push_back(SimFault{
            r, f.round == r ? cat("attack ", describe_attack(f)) : std::string("attack over"),
            f.peers, 0.0, latest_clock()});
    }
  }

  /// Peer p's watch, as a real peer's; the simulated transport checks nothing on delivery, so
  /// the watch reports the messages left out for NaN or Inf itself.
  MembershipWatch make_watch(int p) const {
    MembershipWatch w(*topology_, p);
    w.set_on_byzantine(config_.gossip.on_byzantine);
    w.set_refusal_events(true);
    return w;
  }

  /// Peer p's membership changes and live-graph changes after `done` rounds, as events.
  void watch(int p, std::int64_t done, SimResult& result) {
    const double now = network_.exchange(p).now();
    const Algorithm::MixReport& mix = algorithms_[p]->last_mix();
    watches_[p].observe_mix(flagged(mix), mix.heard, mix.nonfinite);
    for (PeerEvent& e : watches_[p](*monitored_[p], done, now))
      if (auto* m = std::get_if<MemberEvent>(&e)) {
        if (m->event == MemberEventKind::kPartition && config_.monitor.on_partition == PartitionPolicy::kStop) stop_ = true;
        result.member_events.push_back(std::move(*m));
      }
    algorithms_[p]->set_cut(monitored_[p]->cut_peers());
  }

  RunConfig config_;
  Topology* topology_;  // an elastic run's epochs grow as deaths are confirmed
  std::vector<Learner> learners_;
  SimNetwork network_;
  WorkerPool pool_;
  // Each peer's fault decorators (CutLinks, Attack) under its monitor, as in a real peer.
  std::vector<std::unique_ptr<FaultedExchange>> faulted_;
  std::vector<std::unique_ptr<MonitoredExchange>> monitored_;
  std::vector<MembershipWatch> watches_;  // each peer's, as a real peer's
  std::vector<std::unique_ptr<Algorithm>> algorithms_;
  std::vector<std::vector<float>> host_;
  std::vector<std::unique_ptr<Timeline>> timelines_;  // of the traced peers (others: null)
  std::vector<char> alive_;
  std::vector<double> paused_until_;  // simulated time a paused peer wakes; < 0: not paused
  JoinState join_state_;
  StepsOf steps_of_;
  struct Handover {
    std::vector<int> donors;
    std::vector<float> model;
    std::int64_t steps = 0;
  };
  std::map<int, Handover> handovers_;  // joiner -> its hand-over, from the round before
  // The dead taken out of an elastic run's member set: the round announced, the round it took
  // effect.
  std::map<int, std::pair<std::int64_t, std::int64_t>> dropped_;
  bool stop_ = false;                 // a peer saw a partition and the config says stop
};

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

/// Median wall seconds of a few local steps of a throw-away trainer (when sim.step_ms is 0).
/// With sim.eval_peers, the last evaluation screens every peer's model on kScreenSamples test
/// samples and evaluates the kScreenLowest lowest of them in full too.
constexpr std::int64_t kScreenSamples = 1000;
constexpr std::size_t kScreenLowest = 8;

/// Evaluators for the peers' models: one Trainer sized for the evaluation batch per worker
/// thread (taken from a free list while a task runs), and one for the average model.
class Evaluators {
 public:
  Evaluators(Backend& backend, const RunConfig& config, const DataSets& data, int threads)
      : data_(&data), average_(backend, config, data.train, {0}, 0) {
    for (int i = 0; i < threads; ++i) {
      all_.push_back(std::make_unique<Trainer>(backend, config, data.train,
                                               std::vector<std::int64_t>{0}, 0));
      free_.push_back(static_cast<std::size_t>(i));
    }
    host_.resize(all_.size());
  }
  Trainer& average() { return average_; }
  /// `peer`'s model (its parameters as they are) on the test set's first `limit` samples
  /// (0: all), on a free evaluator: what peer.evaluate(test, limit) gives, bit for bit.
  Evaluation evaluate(const Trainer& peer, std::int64_t limit) {
    std::size_t slot = 0;
    {
      std::lock_guard lk(mu_);
      GOSSIP_CHECK_MSG(!free_.empty(), "sim: more evaluations at once than worker threads");
      slot = free_.back();
      free_.pop_back();
    }
    std::vector<float>& host = host_[slot];
    host.resize(static_cast<std::size_t>(peer.num_params()));
    peer.download_params(host);
    all_[slot]->upload_params(host);
    const Evaluation e = all_[slot]->evaluate(data_->test, limit);
    std::lock_guard lk(mu_);
    free_.push_back(slot);
    return e;
  }

 private:
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

}  // namespace

SimResult simulate(const RunConfig& config, const Topology& loaded, const DataSets& data,
                   const SimHooks& hooks) {
  // With joins and leaves in the schedule: the elastic graphs over every rank that may join.
  Topology topology = run_topology(config, loaded);
  check_peers(config, topology);
  const auto t0 = Clock::now();
  const int n = topology.n();
  auto backend = sim_backend(config);
  const auto shards = shard_for(config, data.train, n);
  // A virtual peer only trains: its model's buffers are sized for a training batch, and its
  // gradients, activations and batch are the worker thread's (shared scratch), so a peer holds
  // its parameters and optimizer state. The test set is evaluated by one evaluator per worker
  // thread (each takes a peer's parameters in turn).
  RunConfig train_only = config;
  train_only.train.eval_batch = config.train.batch;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<Learner> learners;
  // train.same_init: every peer starts from peer 0's draws, made once and copied (a 235k
  // parameter model's normal draws cost about 8 ms a peer, 8 s at 1,024 peers).
  std::vector<float> initial;
  for (int p = 0; p < n; ++p) {
    trainers.push_back(std::make_unique<Trainer>(*backend, train_only, data.train, shards[p], p,
                                                 balance_for(config, shards, p),
                                                 /*shared_scratch=*/true, initial));
    learners.push_back(learner_for(*trainers.back()));
    if (p == 0 && config.train.same_init) {
      initial.resize(static_cast<std::size_t>(trainers[0]->num_params()));
      trainers[0]->download_params(initial);
    }
  }
  // One GEMM for every virtual peer, chosen as a real peer chooses it (the same cache file), so
  // that gossip sim and gossip run of one config run the same kernel.
  const GemmChoice gemm =
      choose_gemm(*backend, gemm_request(config.train.gemm, 1, config.train.precision),
                  trainers.front()->model().gemm_shapes(config.train.batch));
  Swarm swarm(config, topology, std::move(learners));
  swarm.on_join(
      [&](int p, std::span<const float> params, std::int64_t steps) {
        Trainer::State s = trainers[p]->state();
        s.params.assign(params.begin(), params.end());
        std::fill(s.velocity.begin(), s.velocity.end(), 0.0f);
        s.steps = steps;
        trainers[p]->restore(s);
      },
      [&](int q) { return trainers[q]->steps(); });
  swarm.trace(config.sim.trace_peers);
  Evaluators evaluators(*backend, config, data, swarm.pool().threads() + 1);
  Trainer& evaluator = evaluators.average();  // holds the average model
  const double step_s = config.sim.step_ms > 0
                            ? config.sim.step_ms / 1000.0
                            : measure_step_seconds(*backend, config, data, shards[0]);
  swarm.network().set_step_seconds(step_s);

  SimResult result;
  result.gemm = gemm;
  if (!topology.epochs().empty()) {
    result.initial_members = topology.members(0);
    result.initial_spectral_gap = swarm.initial_gap();
  }
  for (const auto& shard : shards) result.samples_per_peer.push_back(std::ssize(shard));
  const RoundPlan plan = plan_rounds(config, data.train.n, n);
  result.rounds = plan.rounds;
  std::vector<float> average(trainers.front()->num_params());

  std::vector<char> stepped(static_cast<std::size_t>(n), 0);
  const bool sampled = config.sim.eval_peers > 0 && n > config.sim.eval_peers;
  auto measure = [&](EvalPoint& e, std::span<const std::span<const float>> x) {
    const std::int64_t round = e.round;
    average_params(swarm.live(x), average);
    evaluator.upload_params(average);
    e.epoch = plan.epoch_at(round);
    const bool last = round >= plan.rounds;
    // Which peers' models are evaluated: all of them, or sim.eval_peers evenly spaced ranks
    // and, at the last evaluation, the one a screening of every live model finds lowest.
    std::vector<char> chosen(static_cast<std::size_t>(n), 1);
    if (sampled) {
      std::fill(chosen.begin(), chosen.end(), 0);
      for (std::int64_t i = 0; i < config.sim.eval_peers; ++i)
        chosen[static_cast<std::size_t>(i * n / config.sim.eval_peers)] = 1;
      if (last) {
        std::vector<double> screen(static_cast<std::size_t>(n), 2.0);
        const std::int64_t samples =
            std::min<std::int64_t>(kScreenSamples, config.train.eval_limit > 0
                                                       ? config.train.eval_limit : data.test.n);
        swarm.pool().run(n, [&](int k) {
          if (swarm.alive(k)) screen[k] = evaluators.evaluate(*trainers[k], samples).accuracy;
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
      }
    }
    swarm.pool().run(n + 1, [&](int k) {
      if (k == n) {
        const Evaluation ev = evaluator.evaluate(data.test, config.train.eval_limit);
        e.average_accuracy = ev.accuracy;
        e.average_loss = ev.loss;
        return;
      }
      // The last evaluation takes every peer on the average model's samples, so the final
      // accuracies of the peers and of the average compare directly.
      const std::int64_t limit = config.train.peer_eval_samples(last);
      // An elastic run's ranks that are not members at this round are not evaluated.
      const bool member = topology.epochs().empty() || swarm.alive(k);
      e.peers[k].test_accuracy = chosen[k] && member
                                     ? evaluators.evaluate(*trainers[k], limit).accuracy
                                     : std::numeric_limits<double>::quiet_NaN();
      stepped[k] = swarm.algorithm(k).stepped();
      e.peers[k].train_loss = swarm.algorithm(k).take_train_loss();
    });
    double loss = 0.0;
    e.peer_accuracy_min = 1.0;
    e.peer_accuracy_max = 0.0;
    int live = 0, trained = 0;
    for (int p = 0; p < n; ++p) {
      const auto& pe = e.peers[p];
      if (!swarm.alive(p)) continue;  // a killed peer's frozen model is not the run's
      ++live;
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
  };
  swarm.run(result, hooks, t0, [&](std::int64_t done) { return plan.eval_due(done); }, measure);
  // Split at the end: the components train separate models; each one's average on its own.
  if (result.final_components.size() > 1)
    for (const auto& component : result.final_components) {
      std::vector<std::span<const float>> models;
      for (int p : component) models.emplace_back(result.params[p]);
      average_params(models, average);
      evaluator.upload_params(average);
      result.component_accuracy.push_back(
          evaluator.evaluate(data.test, config.train.eval_limit).accuracy);
    }
  result.step_seconds = step_s;
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
