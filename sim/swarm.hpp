// sim/swarm.hpp: the simulator's virtual peers (Swarm): their exchanges, algorithms and
// monitors, and the loop that runs rounds over them; simulate.cpp drives it, swarm.cpp holds
// what it does each round (faults, membership changes, hand-overs, the monitors' watch).
// Private to sim/.
#pragma once
#if !defined(GOSSIP_ROOM_SIM)
#error "sim/swarm.hpp belongs to room sim, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <vector>

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

namespace gossip::sim_parts {

using Clock = std::chrono::steady_clock;

/// Wall seconds since `t0`.
inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
                 simulated_relays(config.sim, config.net.emulate, topology), config.train.seed,
                 config.gossip.wire),
        pool_(config.sim.workers),
        lanes_(learners_.front().backend->host_memory() ? 0 : pool_.threads()) {
    check_lanes();
    for (int p = 0; p < n(); ++p) {
      SimExchange& ex = network_.exchange(p);
      faulted_.push_back(
          std::make_unique<FaultedExchange>(ex, ex, config_.faults, config.train.seed));
      monitored_.push_back(std::make_unique<MonitoredExchange>(
          faulted_.back()->top(), faulted_.back()->membership(), config.monitor,
          [&ex] { return ex.now(); }));
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
    initial_graph_ = live_graph(topology, {}, 0);
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
  int workers() const { return pool_.threads(); }
  /// On a backend whose memory is not the host's (a GPU): the worker thread peer p's work runs
  /// on, p mod the workers, each worker with a backend of its own (its stream, handles and
  /// scratch serve one thread at a time). -1 on the host, where any worker takes any peer.
  int lane(int p) const { return lanes_ > 0 ? p % lanes_ : -1; }

  /// Calls fn(k) for k in [0, count) on the worker pool, task k doing peer peer_of(k)'s work.
  /// On the host any worker takes any task; on a device, peer p's tasks run on worker lane(p),
  /// one after another. Tasks must be independent (each touches its peer's state only), so
  /// neither the worker count nor the order changes a result.
  void for_peers(int count, const std::function<int(int)>& peer_of,
                 const std::function<void(int)>& fn);
  /// The same with task p doing peer p's work.
  void for_peers(int count, const std::function<void(int)>& fn) {
    for_peers(count, [](int k) { return k; }, fn);
  }
  Algorithm& algorithm(int p) { return *algorithms_[p]; }
  /// Whether peer p's process is alive (not killed, or restarted since).
  bool alive(int p) const { return alive_[p] != 0; }

  /// Rounds each sender keeps: async reads older ones; a relay publishes its next hop while its
  /// successor reads the last.
  static int history(const GossipConfig& g) {
    if (traits(g.algorithm).stale_rounds) return g.max_staleness + 1;
    return traits(g.algorithm).ring || g.choco.gossip_steps > 1 ? 2 : 1;
  }

  void round(std::int64_t r, SimResult& result);

  /// An elastic run: a member whose death a live member's monitor has confirmed leaves the
  /// member set (drop_member), so the graph is derived again without it: at the round the real
  /// peers' announcement would carry (dead_announcement_round), the earliest of its confirmers'
  /// while that change is still ahead.
  void drop_the_dead(std::int64_t done);

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
  std::vector<std::span<const float>> gather();

  /// Fills the fields every evaluation shares (clock, bytes, consensus distance).
  void fill_common(EvalPoint& e, std::int64_t round, std::span<const std::span<const float>> x);

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
  void finish(SimResult& result);

  /// Before round r of an elastic run whose change takes effect at r + 1: each joiner's
  /// hand-over, the average of its donors' models after round r - 1 (join_donors: its
  /// in-neighbours in the new graph that were members already, alive) and its first donor's
  /// steps, as real donors send it a round ahead so that the joiner's first round waits for
  /// nothing more than any other round does.
  void take_handovers(std::int64_t r);

  /// An elastic run's membership change taking effect at round r (Topology::epochs): the
  /// leavers' processes end (their last round, r - 1, was mixed as usual), and each joiner
  /// starts from its hand-over (take_handovers, a round before), momentum zero.
  void apply_membership(std::int64_t r, SimResult& result);

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
  void catch_up(int p, std::int64_t round);

  void apply_faults(std::int64_t r, SimResult& result);
  /// The live graph after round r's faults and membership changes, as the swarm carried them
  /// out (the peers alive, the links cut), into result.live_graphs where it changed.
  void note_live_graph(std::int64_t r, SimResult& result);

  /// Peer p's watch, as a real peer's, without link reports (set_link_reports): the simulated
  /// links always form, so there are no link events to read, and there are no transport alerts
  /// either — one process holds every identity, so none can conflict, and the simulated
  /// transport checks nothing on delivery, so the watch reports the messages left out for NaN
  /// or Inf itself (set_refusal_events). Nothing is dropped: nothing is there.
  MembershipWatch make_watch(int p) const {
    MembershipWatch w(*topology_, p);
    w.set_on_byzantine(config_.gossip.on_byzantine);
    w.set_refusal_events(true);
    return w;
  }

  /// Peer p's membership changes and live-graph changes after `done` rounds, as events.
  void watch(int p, std::int64_t done, SimResult& result);

  /// On a device: peer p's backend is lane p mod the workers' own, and no two lanes share one.
  void check_lanes() const;

  RunConfig config_;
  Topology* topology_;  // an elastic run's epochs grow as deaths are confirmed
  std::vector<Learner> learners_;
  SimNetwork network_;
  WorkerPool pool_;
  int lanes_;  // 0 on the host; on a device the workers, each with its own backend
  // Each peer's fault decorators (CutLinks, Attack) under its monitor, as in a real peer.
  std::vector<std::unique_ptr<FaultedExchange>> faulted_;
  std::vector<std::unique_ptr<MonitoredExchange>> monitored_;
  std::vector<MembershipWatch> watches_;  // each peer's, as a real peer's
  std::vector<std::unique_ptr<Algorithm>> algorithms_;
  std::vector<std::vector<float>> host_;
  std::vector<std::unique_ptr<Timeline>> timelines_;  // of the traced peers (others: null)
  std::vector<char> alive_;
  LiveGraph initial_graph_;  // at round 0, every member alive and no link cut
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

}  // namespace gossip::sim_parts
