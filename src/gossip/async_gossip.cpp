// gossip/async_gossip.cpp: asynchronous gossip. Like D-PSGD, but each peer mixes with the newest
// buffer it holds from each in-neighbour instead of waiting for the current round, accepting
// buffers down to round r - gossip.max_staleness (and waiting only for neighbours older than
// that). Neighbours with nothing acceptable by the deadline are left out (weight to self).
#include "src/gossip/algorithms.hpp"

namespace gossip {

namespace {

class AsyncGossip final : public Dpsgd {
 public:
  using Dpsgd::Dpsgd;
  AlgorithmKind kind() const override { return AlgorithmKind::kAsync; }

 protected:
  CollectOptions collect_options() const override {
    CollectOptions o = Dpsgd::collect_options();
    o.mode = CollectMode::kAsync;
    o.max_staleness = config_.max_staleness;
    return o;
  }
};

}  // namespace

std::unique_ptr<Algorithm> make_async_gossip(const Learner& learner, Exchange& exchange,
                                             const Topology& topology,
                                             const GossipConfig& config, std::uint64_t /*seed*/) {
  return std::make_unique<AsyncGossip>(learner, exchange, topology, config);
}

}  // namespace gossip
