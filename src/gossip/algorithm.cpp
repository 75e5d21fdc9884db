// gossip/algorithm.cpp: the Algorithm base (loss bookkeeping) and make_algorithm, which checks
// that the topology's weights suit the algorithm before any round runs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "src/gossip/algorithms.hpp"
#include "gossip/choice.hpp"
#include "gossip/core.hpp"

namespace gossip {

Learner learner_for(Trainer& trainer) {
  Learner l;
  l.backend = &trainer.backend();
  l.params = trainer.params();
  l.num_params = trainer.num_params();
  l.step = [&trainer] { return trainer.step(); };
  l.during_step = [&trainer](std::function<void()> task) {
    trainer.during_next_step(std::move(task));
  };
  return l;
}

double Algorithm::take_train_loss() {
  const double mean = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_)
                                      : std::numeric_limits<double>::quiet_NaN();
  loss_sum_ = 0.0;
  loss_count_ = 0;
  return mean;
}

namespace {

/// The smallest eigenvalue of a fixed symmetric W, computed once per topology (a simulator
/// makes one algorithm per peer over the same graph).
double smallest_eigenvalue_once(const Topology& topology) {
  static std::mutex mutex;
  static std::map<std::uint64_t, double> known;
  const std::uint64_t key = topology.fingerprint();
  std::lock_guard lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  // Above 2048 peers the dense solve is skipped: taken as passing (Gershgorin bounds it below by
  // 2 min_i w_ii - 1, which the message names when that is the problem).
  const double lambda = smallest_eigenvalue(topology.at(0)).value_or(0.0);
  return known[key] = lambda;
}

/// kFixedSymmetric: the same symmetric doubly stochastic W every round, every eigenvalue above
/// -1/3. D² (Tang et al. 2018) converges only then: its error modes grow as lambda nears -1/3.
void check_symmetric(const std::string& where, const AlgorithmTraits& row,
                     const Topology& topology) {
  if (topology.period() > 1)
    throw InputError(cat(where, ": ", row.name, " needs a graph that is the same every round "
                         "(its correction is the last round's mix of the same neighbours); this "
                         "topology changes over a period of ", topology.period(), " rounds"));
  const Graph& g = topology.at(0);
  if (topology.directed() || !g.symmetric() || !g.doubly_stochastic())
    throw InputError(cat(where, ": ", row.name, " needs symmetric, doubly stochastic weights "
                         "(an undirected graph with weights: metropolis or max-degree); this "
                         "topology's are not"));
  const double lambda = smallest_eigenvalue_once(topology);
  if (lambda > -1.0 / 3.0 + 1e-9) return;
  // a I + (1 - a) W has smallest eigenvalue a + (1 - a) lambda: above -1/3 for a above
  // (-1/3 - lambda) / (1 - lambda); suggest 0.1 more, in hundredths.
  const double a = std::ceil(((-1.0 / 3.0 - lambda) / (1.0 - lambda) + 0.1) * 100.0 - 1e-9) / 100.0;
  throw InputError(cat(where, ": ", row.name, " (D²) needs every eigenvalue of W above -1/3, or "
                       "its correction never settles; this topology's smallest is ", lambda,
                       " (a ring of even n with weights 1/3 has exactly -1/3); add `laziness: ", a,
                       "` to the topology file (W becomes ", a, " I + ", 1.0 - a, " W, smallest "
                       "eigenvalue ", a + (1.0 - a) * lambda, ")"));
}

/// Checks the topology's weights against the algorithm's row (WeightsNeed). `where` starts the
/// message: "gossip.algorithm", or with the config's file and line.
void check_weights(const std::string& where, AlgorithmKind algorithm, const Topology& topology) {
  const AlgorithmTraits& row = traits(algorithm);
  if (row.weights == WeightsNeed::kNone) return;  // e.g. the ring over all peers
  if (row.weights == WeightsNeed::kFixedRows && topology.period() > 1)
    throw InputError(cat(where, ": ", row.name, " needs a graph that is the same every round "
                         "(its public copies follow fixed neighbours); this topology changes "
                         "over a period of ", topology.period(), " rounds"));
  if (row.weights == WeightsNeed::kFixedSymmetric) return check_symmetric(where, row, topology);
  const bool columns = row.weights == WeightsNeed::kColumns;
  for (std::int64_t r = 0; r < topology.period(); ++r) {
    const Graph& g = topology.at(r);
    if (columns && !g.column_stochastic())
      throw InputError(cat(where, ": ", row.name, " needs column-stochastic weights (each "
                           "peer's out-weights and self weight summing to 1); round ",
                           r, " of the topology is not (use weights: push-sum)"));
    if (!columns && !g.row_stochastic())
      throw InputError(cat(where, ": ", row.name, " needs row-stochastic weights; round ",
                           r, " of the topology is not",
                           topology.directed() ? " (for a directed graph use push_sum)" : ""));
  }
}

}  // namespace

namespace {

/// gossip.outer: local_sgd only, and not beside gossip.overlap.
void check_outer(const GossipConfig& config) {
  if (!config.outer.enabled) return;
  if (!traits(config.algorithm).outer_step)
    throw InputError(cat("gossip.outer: the outer step is for ",
                         choice_list_if(std::span(algorithm_table()),
                                        [](const AlgorithmTraits& t) { return t.outer_step; }),
                         ", not ", algorithm_name(config.algorithm)));
  if (config.overlap && config.outer.fragments == 1)
    throw InputError("gossip.outer: the outer step needs what the mixing made of this round's "
                     "local phase, which gossip.overlap mixes a round late; leave one out (or "
                     "stream fragments: gossip.outer.fragments > 1 overlaps each fragment's "
                     "exchange with the next local steps)");
}

/// gossip.outer.compress: the peers average compressed pseudo-gradients and never their
/// parameters, so their anchors stay equal only where every peer averages the same packets with
/// the same weights: the complete graph with uniform weights, the same peers for the whole run.
void check_outer_compress(const GossipConfig& config, const Topology& topology) {
  if (!config.outer.enabled || config.outer.compress.kind == CompressKind::kNone) return;
  const int n = topology.n();
  const auto refuse = [&](const std::string& why) {
    throw InputError(cat("gossip.outer.compress: the peers average compressed pseudo-gradients, "
                         "never their parameters, so every peer must average all of them with "
                         "equal weights (a complete graph: topologies/complete-16.yaml); ",
                         why));
  };
  if (!topology.epochs().empty()) refuse("an elastic topology's joiners would start elsewhere");
  for (std::int64_t r = 0; r < topology.period(); ++r)
    for (int p = 0; p < n; ++p) {
      const auto in = topology.in_neighbours(p, r);
      bool uniform = std::abs(topology.self_weight(p, r) * n - 1.0) < 1e-9;
      for (const auto& nb : in) uniform = uniform && std::abs(nb.weight * n - 1.0) < 1e-9;
      if (std::ssize(in) != n - 1 || !uniform)
        refuse(cat("peer ", p, " averages ", in.size(), " of the other ", n - 1,
                   uniform ? "" : " with unequal weights", " in round ", r));
    }
}

}  // namespace

void check_algorithm(const RunConfig& config, const Topology& topology) {
  check_outer(config.gossip);
  check_outer_compress(config.gossip, topology);
  check_weights(config.where("gossip.algorithm"), config.gossip.algorithm, topology);
}

std::unique_ptr<Algorithm> make_algorithm(const Learner& learner, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t seed,
                                          std::chrono::milliseconds round_timeout) {
  if (topology.n() != exchange.size())
    throw InputError(cat("the topology has ", topology.n(), " peers but the run has ",
                         exchange.size()));
  if (config.period < 1) throw InputError(cat("gossip.period must be at least 1"));
  const AlgorithmTraits& row = traits(config.algorithm);
  if (config.overlap && !row.overlaps)
    throw InputError(cat("gossip.overlap: overlap is for dpsgd and local_sgd, not ", row.name));
  if (config.choco.compress.kind != CompressKind::kNone && !row.compresses)
    throw InputError(cat("gossip.choco.compress: compression is for choco, not ", row.name));
  if (config.choco.compress.kind == CompressKind::kDctTopK)
    throw InputError("gossip.choco.compress: dct_top_k is for gossip.outer.compress; choco's "
                     "public copies cannot take DCT coefficients");
  if (config.aggregate.kind != Aggregate::kMean && row.not_robust != nullptr)
    throw InputError(cat("gossip.aggregate: ", aggregate_name(config.aggregate.kind),
                         " is for dpsgd, local_sgd and async, not ", row.name, ": ",
                         row.not_robust));
  check_outer(config);
  check_outer_compress(config, topology);
  check_weights("gossip.algorithm", config.algorithm, topology);
  std::unique_ptr<Algorithm> made;
  switch (config.algorithm) {
#define GOSSIP_ALGORITHM_MAKE(id, name, make, ...) \
  case AlgorithmKind::id:                           \
    made = make(learner, exchange, topology, config, seed);  \
    break;
    GOSSIP_ALGORITHMS(GOSSIP_ALGORITHM_MAKE)
#undef GOSSIP_ALGORITHM_MAKE
  }
  if (!made)
    throw InputError(cat("gossip.algorithm: no algorithm numbered ",
                         static_cast<int>(config.algorithm)));
  made->set_round_timeout(round_timeout);
  return made;
}

std::unique_ptr<Algorithm> make_algorithm(Trainer& trainer, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t seed,
                                          std::chrono::milliseconds round_timeout) {
  return make_algorithm(learner_for(trainer), exchange, topology, config, seed, round_timeout);
}

std::vector<int> extra_neighbours(const GossipConfig& config, int rank, int peers) {
  if (!traits(config.algorithm).ring || peers < 2) return {};
  return {(rank + peers - 1) % peers, (rank + 1) % peers};
}

std::int64_t extra_round_lead(const GossipConfig& config, int peers) {
  return traits(config.algorithm).ring ? 2 * std::int64_t{peers} + 2 : 0;
}

void Algorithm::restore_buffers(const std::vector<float>& b) {
  if (!b.empty())
    throw InputError(cat("the checkpoint holds ", b.size(), " floats of algorithm state, which ",
                         name(), " does not keep"));
}

}  // namespace gossip
