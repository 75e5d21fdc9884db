// gossip/dpsgd.cpp: D-PSGD, adapt then combine. Each round: `period` local SGD steps on this
// peer's shard, publish the result, then replace it by the W-weighted sum of this peer's and its
// in-neighbours' buffers (ascending peer id; a missing neighbour's weight stays with this peer).
#include "src/gossip/algorithms.hpp"
#include "gossip/core.hpp"

namespace gossip {

Dpsgd::Dpsgd(const Learner& learner, Exchange& exchange, const Topology& topology,
             const GossipConfig& config)
    : learner_(learner),
      exchange_(&exchange),
      topology_(&topology),
      config_(config),
      buffer_(learner) {}

int Dpsgd::local_steps(std::int64_t) const { return learner_.step ? config_.period : 0; }

CollectOptions Dpsgd::collect_options() const {
  CollectOptions o;
  o.mode = CollectMode::kSync;
  o.deadline = round_deadline(config_);
  return o;
}

void Dpsgd::local_phase(std::int64_t round) {
  for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
  const int self = exchange_->rank();
  const auto to = mixing::ids(topology_->out_neighbours(self, round));
  exchange_->publish(round, buffer_.host_view(), 1.0, to);
}

void Dpsgd::mix_phase(std::int64_t round) {
  const int self = exchange_->rank();
  const auto in = topology_->in_neighbours(self, round);
  const auto from = mixing::ids(in);
  const std::vector<Inbox> got = exchange_->collect(round, from, collect_options());
  std::int64_t missing = 0;
  const auto terms =
      mixing::pull_terms(self, topology_->self_weight(self, round), in, got, &missing);
  record_missing(missing);
  buffer_.mix(terms);
}

std::unique_ptr<Algorithm> make_dpsgd(const Learner& learner, Exchange& exchange,
                                      const Topology& topology, const GossipConfig& config) {
  return std::make_unique<Dpsgd>(learner, exchange, topology, config);
}

}  // namespace gossip
