/// gossip: the decentralized algorithms (D-PSGD, local SGD, push-sum, asynchronous gossip,
/// CHOCO-SGD) and the all-reduce baseline, each a per-peer object written once against Exchange
/// (DESIGN idea 2), so the simulator and a real peer run the same code. A round has phases:
///
///   local_phase(r):    local_steps(r) steps of SGD on this peer's shard, then publish for round
///                      r (with gossip.overlap: publish first, then the steps);
///   relay_phase(r, s): s = 0 .. relay_steps() - 1: collect what the previous step brought and
///                      publish the next (all-reduce's ring hops; gossip has none);
///   mix_phase(r):      collect what the in-neighbours published and mix it into the parameters.
///
/// A real peer calls them in sequence (run_round). The simulator runs every peer's local phase on
/// a worker pool, waits for all, then every peer's relay phase s for each s, then every peer's mix
/// phase: no phase blocks on another peer's phase of the same kind, so any number of threads
/// works.
///
/// Mixing sums in ascending peer id with GossipKernels::mix, this peer at its place in the
/// order, so the result is bit-identical whatever the transport or arrival order. An
/// in-neighbour missing from collect() (dead, lost message, timed out) has its weight added to
/// this peer's own weight.
/// Depends on topology, train, backend and the Exchange interface; not on net or sim.
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "gossip/gossip.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/exchange.hpp"
#include "gossip/gossip_kernels.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"

namespace gossip {

/// What an algorithm trains: a flat parameter buffer on a backend and a local step. A Trainer
/// gives one (learner_for); the pure-consensus mode gives a random vector with no step.
struct Learner {
  /// The backend's part an algorithm uses: mixing, compression and the memory they move.
  GossipKernels* backend = nullptr;
  float* params = nullptr;        // device pointer, num_params floats, owned elsewhere
  std::int64_t num_params = 0;
  std::function<double()> step;   // one local step, returns its loss; empty = no local steps
  /// Hands the next step a task to run once its device work is queued, before the step waits
  /// for it (Trainer::during_next_step), so a wait the task makes (a side stream's copy)
  /// overlaps the step's kernels. Empty: the caller runs the task itself.
  std::function<void(std::function<void()>)> during_step = {};
};

/// The Learner view of a trainer (which must outlive it).
Learner learner_for(Trainer& trainer);

/// One peer's gossip algorithm. Not thread-safe: one thread drives a peer (different peers'
/// objects may run on different threads at once).
class Algorithm {
 public:
  virtual ~Algorithm() = default;

  /// This algorithm's row of the table (gossip/algorithm_table.hpp).
  virtual AlgorithmKind kind() const = 0;
  /// Its name in configs and reports: "dpsgd", "choco", ...
  std::string name() const { return algorithm_name(kind()); }
  /// Local steps taken in local_phase(round): `period` for every algorithm here, 0 for a
  /// learner without a step function.
  virtual int local_steps(std::int64_t round) const = 0;
  /// Local steps, then publish this peer's buffer for `round` to its out-neighbours.
  virtual void local_phase(std::int64_t round) = 0;
  /// Collect the in-neighbours' buffers for `round` and mix them into this peer's parameters.
  virtual void mix_phase(std::int64_t round) = 0;
  /// Exchange steps between the local and the mix phase, each needing the other peers' previous
  /// step (all-reduce: 2 (n - 1) - 1 ring hops); 0 for the gossip algorithms.
  virtual int relay_steps() const { return 0; }
  /// Relay step `step` of `round`: collect the previous hop, publish the next.
  virtual void relay_phase(std::int64_t /*round*/, int /*step*/) {}
  /// Whether local_phase publishes before its local steps (gossip.overlap), so the sending
  /// overlaps the computing: the simulator then charges the compute time after the publish.
  virtual bool overlaps() const { return false; }
  /// One whole round as a real peer runs it: local phase, relay phases, mix phase.
  void run_round(std::int64_t round) {
    local_phase(round);
    for (int s = 0; s < relay_steps(); ++s) relay_phase(round, s);
    mix_phase(round);
  }

  /// The parameters a user of the model should see (push-sum: already de-biased, x / w), into
  /// a host buffer of num_params floats.
  virtual void model_params(std::span<float> out) const = 0;
  /// Push-sum weight (1 for the other algorithms).
  virtual double weight() const { return 1.0; }
  /// How long each collect waits for a neighbour before leaving it out of the round
  /// (monitor.round_timeout_s; make_algorithm sets it).
  void set_round_timeout(std::chrono::milliseconds timeout) { round_timeout_ = timeout; }

  /// Mean training loss over the local steps since the last call (NaN if none), and resets it.
  double take_train_loss();
  /// In-neighbours left out of mixing so far (dead, lost or too stale), summed over rounds.
  std::int64_t missing_messages() const { return missing_; }
  /// What the last mix did with the neighbours' messages beyond mean's weighted sum
  /// (gossip.aggregate): the neighbours left out for holding NaN or Inf (every aggregate), and
  /// those a robust aggregate treated as outliers: clipped to less than half their distance
  /// (clipped), or dropped from more coordinates than an honest value is (trimmed_mean,
  /// median); each ascending. tau is the clipping radius used (clipped only, else 0).
  struct MixReport {
    std::vector<int> heard;  // every neighbour whose message came this round
    std::vector<int> nonfinite;
    std::vector<int> clipped;
    double tau = 0.0;
  };
  const MixReport& last_mix() const { return last_mix_; }
  /// The in-neighbours this peer has cut for lying (gossip.on_byzantine: cut): their messages
  /// no longer reach the mix. Each was one of the `aggregate.byzantine` liars a robust aggregate
  /// allows for, so it allows that many fewer among the rest (else a ring peer left with one
  /// neighbour would clip it to nothing, and cut it next).
  void set_cut(std::vector<int> cut) { cut_ = std::move(cut); }
  /// The neighbours a mix flagged: clipped or trimmed away, or left out for NaN or Inf
  /// (ascending, each once).
  friend std::vector<int> flagged(const MixReport& mix) {
    std::vector<int> out = mix.clipped;
    out.insert(out.end(), mix.nonfinite.begin(), mix.nonfinite.end());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  /// Whether a local step was taken since the last take_train_loss() (a peer stopped the whole
  /// time has no loss to report, which is not a divergence).
  bool stepped() const { return loss_count_ > 0; }

  /// What a checkpoint keeps of the algorithm besides the learner's parameters.
  struct State {
    double weight = 1.0;  // push-sum
    double loss_sum = 0.0;
    std::int64_t loss_count = 0;
    std::int64_t missing = 0;
    std::vector<float> buffers;  // choco: its public copy, then the weighted sum of the copies
  };
  State state() const { return {weight(), loss_sum_, loss_count_, missing_, buffers()}; }
  /// Restores a checkpoint's state; the learner's parameters are restored by its owner. Throws
  /// InputError when the checkpoint's buffers do not fit this algorithm (wrong length, or
  /// buffers for an algorithm that keeps none).
  void restore(const State& s) {
    restore_buffers(s.buffers);
    loss_sum_ = s.loss_sum;
    loss_count_ = s.loss_count;
    missing_ = s.missing;
    set_weight(s.weight);
  }

 protected:
  void record_loss(double loss) {
    loss_sum_ += loss;
    ++loss_count_;
  }
  void record_missing(std::int64_t count) { missing_ += count; }
  MixReport last_mix_;
  /// `a` with its byzantine count less the cut neighbours among `from` (at least 0).
  AggregateConfig without_cut(AggregateConfig a, std::span<const int> from) const {
    for (int p : from)
      if (std::find(cut_.begin(), cut_.end(), p) != cut_.end()) a.byzantine = std::max(0, a.byzantine - 1);
    return a;
  }
  std::vector<int> cut_;
  /// The deadline of this round's collects (set_round_timeout).
  std::chrono::milliseconds round_deadline() const { return round_timeout_; }
  /// Push-sum keeps a weight; the others have none to restore.
  virtual void set_weight(double) {}
  /// State beyond the parameters that a resumed run needs bit for bit (choco's copies); none by
  /// default.
  virtual std::vector<float> buffers() const { return {}; }
  virtual void restore_buffers(const std::vector<float>& b);

 private:
  double loss_sum_ = 0.0;
  std::int64_t loss_count_ = 0;
  std::int64_t missing_ = 0;
  std::chrono::milliseconds round_timeout_ = round_timeout(MonitorConfig{});
};

/// An elastic run's joiner's first parameters: the element-wise average of its donors' models,
/// summed in double in the order they are added and divided by their count. gossip run's joiner
/// (the hand-overs it received) and gossip sim both take it so, bit for bit.
class ModelAverage {
 public:
  explicit ModelAverage(std::size_t n) : sum_(n, 0.0) {}
  void add(std::span<const float> model);
  std::size_t count() const { return count_; }
  /// out[i] = the sum of the models' i-th values / count(); count() must be above 0.
  void write(std::span<float> out) const;

 private:
  std::vector<double> sum_;
  std::size_t count_ = 0;
};

/// The rounds of a training run and the rounds after which it evaluates: the same plan in the
/// simulator and in every real peer, so their runs line up round for round.
struct RoundPlan {
  std::int64_t rounds = 1;         // ceil(epochs * train samples / samples_per_round)
  std::int64_t evals = 1;          // ceil(epochs * evals_per_epoch), at most `rounds`
  double samples_per_round = 0.0;  // peers * batch * period
  std::int64_t train_samples = 0;
  /// Whether evaluation is due after `done` rounds: evaluation k of `evals` comes after round
  /// ceil(k * rounds / evals), so they are evenly spread and the last is at the last round.
  bool eval_due(std::int64_t done) const;
  /// Epochs of training data consumed after `done` rounds.
  double epoch_at(std::int64_t done) const;
};
RoundPlan plan_rounds(const RunConfig& config, std::int64_t train_samples, int peers);

/// Checks that the topology's weights suit config.gossip.algorithm: push-sum needs every
/// round's columns to sum to 1, the others its rows; choco also a graph that is the same every
/// round (its public copies follow fixed neighbours); allreduce uses only the number of peers. Throws InputError naming the config's file
/// and line ("c.yaml:9: gossip.algorithm: push_sum needs column-stochastic weights ...").
/// Commands call it as soon as the topology is loaded, before any peer starts.
void check_algorithm(const RunConfig& config, const Topology& topology);

/// Makes the algorithm `config.algorithm` for peer exchange.rank(). The learner, exchange and
/// topology must outlive it. Throws InputError for an unknown name, or for push-sum's opposite
/// (dpsgd/local_sgd/async) on a directed topology, whose rows need not sum to one. `seed`
/// (train.seed) seeds CHOCO's compressors with (seed, peer, round); `round_timeout` is how long
/// its collects wait for a neighbour (round_timeout(config.monitor); by default the lan preset's).
std::unique_ptr<Algorithm> make_algorithm(
    const Learner& learner, Exchange& exchange, const Topology& topology,
    const GossipConfig& config, std::uint64_t seed = 1,
    std::chrono::milliseconds round_timeout = gossip::round_timeout(MonitorConfig{}));
/// The same with the trainer's learner.
std::unique_ptr<Algorithm> make_algorithm(
    Trainer& trainer, Exchange& exchange, const Topology& topology, const GossipConfig& config,
    std::uint64_t seed = 1,
    std::chrono::milliseconds round_timeout = gossip::round_timeout(MonitorConfig{}));

/// The peers an algorithm talks to besides the topology's neighbours: all-reduce's ring
/// (rank - 1 and rank + 1 mod n); none for the others.
std::vector<int> extra_neighbours(const GossipConfig& config, int rank, int peers);
/// How many exchange rounds a neighbour may run ahead of this peer beyond the topology's own
/// lead: all-reduce's hops (2 (n - 1) a round) can be that many ahead; 0 for the others.
std::int64_t extra_round_lead(const GossipConfig& config, int peers);

/// One of Streaming DiLoCo's fragments (gossip.outer.fragments): coordinates first .. first +
/// size - 1 of the flat buffer. The F fragments of n coordinates are contiguous, in order, and
/// add up to the whole buffer; their sizes differ by at most one.
struct Fragment {
  int index = 0;
  std::int64_t first = 0;
  std::int64_t size = 0;
};
/// Fragment `index` of `fragments` over n coordinates.
Fragment outer_fragment(std::int64_t n, int fragments, int index);

}  // namespace gossip
