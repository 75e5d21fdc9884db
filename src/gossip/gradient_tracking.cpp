// gossip/gradient_tracking.cpp: D² (Tang, Lian, Yan, Zhang and Liu, "D²: Decentralized Training
// over Decentralized Data", ICML 2018), the gradient-tracking member of the D-PSGD family that
// sends one vector a round. D-PSGD on skewed shards settles where each peer's own gradient is
// balanced by its disagreement with the neighbours, a bias that grows with the heterogeneity;
// D² corrects each message by what the last mix did beyond the local step:
//
//   x^(t+1) = W (2 x^t - x^(t-1) - eta g^t + eta g^(t-1))
//           = W (h^t + c^t),   h^t = x^t + u^t (the local phase's result), c^t = x^t - h^(t-1),
//
// u^t the change the local phase made (eta g for plain SGD; here whatever the optimizer did, so
// momentum and any learner work unchanged). The corrections sum to zero over the peers when W is
// doubly stochastic, so the average moves as plain SGD's, and with a constant step every peer
// converges to the minimiser of the average loss instead of a point biased towards its own.
// Round 0 has no correction (D-PSGD's first step). Same bytes as D-PSGD: the message is the
// corrected model. Needs W symmetric, fixed, with every eigenvalue above -1/3 (checked by
// make_algorithm; `laziness: 0.5` in a topology file gives that).
#include "src/gossip/algorithms.hpp"
#include "gossip/core.hpp"

namespace gossip {

namespace {

class GradientTracking final : public Dpsgd {
 public:
  GradientTracking(const Learner& learner, Exchange& exchange, const Topology& topology,
                   const GossipConfig& config)
      : Dpsgd(learner, exchange, topology, config) {}
  AlgorithmKind kind() const override { return AlgorithmKind::kGradientTracking; }

  void local_phase(std::int64_t round) override {
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    const std::span<const float> h = buffer_.host_view();
    stepped_.assign(h.begin(), h.end());
    const int self = exchange_->rank();
    if (!correction_.empty())  // the message: h + c
      buffer_.mix(std::vector<mixing::Term>{{self, nullptr, 1.0}, {self, correction_.data(), 1.0}});
    exchange_->publish(round, buffer_.host_view(), 1.0,
                       mixing::ids(topology_->out_neighbours(self, round)));
  }

  void mix_phase(std::int64_t round) override {
    Dpsgd::mix_phase(round);  // x^(t+1) = sum_j W_ij (h_j + c_j)
    const std::span<const float> x = buffer_.host_view();
    correction_.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) correction_[i] = x[i] - stepped_[i];
  }

 protected:
  // The checkpoint carries the correction (empty before the first round).
  std::vector<float> buffers() const override { return correction_; }
  void restore_buffers(const std::vector<float>& b) override {
    if (b.empty()) return Algorithm::restore_buffers(b);
    if (b.size() != static_cast<std::size_t>(learner_.num_params))
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of gradient_tracking's "
                           "correction, expected ", learner_.num_params));
    correction_ = b;
  }

 private:
  std::vector<float> stepped_;     // h^t: this round's parameters after the local phase
  std::vector<float> correction_;  // c^(t+1) = x^(t+1) - h^t, added to the next message
};

}  // namespace

std::unique_ptr<Algorithm> make_gradient_tracking(const Learner& learner, Exchange& exchange,
                                                  const Topology& topology,
                                                  const GossipConfig& config,
                                                  std::uint64_t /*seed*/) {
  return std::make_unique<GradientTracking>(learner, exchange, topology, config);
}

}  // namespace gossip
