// gossip/local_sgd.cpp: decentralized local SGD (Koloskova et al. 2020): H = gossip.period local
// steps between gossip averages with W. The round is D-PSGD's with a longer local phase; it is
// its own algorithm name so sweeps and reports say which schedule was meant (D-PSGD is the H = 1
// member of the family, local SGD is usually run with H > 1).
#include "src/gossip/algorithms.hpp"

namespace gossip {

namespace {

class LocalSgd final : public Dpsgd {
 public:
  using Dpsgd::Dpsgd;
  AlgorithmKind kind() const override { return AlgorithmKind::kLocalSgd; }
};

}  // namespace

std::unique_ptr<Algorithm> make_local_sgd(const Learner& learner, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t /*seed*/) {
  return std::make_unique<LocalSgd>(learner, exchange, topology, config);
}

}  // namespace gossip
