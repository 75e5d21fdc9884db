// gossip/local_sgd.cpp: decentralized local SGD (Koloskova et al. 2020): H = gossip.period local
// steps between gossip averages with W. The round is D-PSGD's with a longer local phase; it is
// its own algorithm name so sweeps and reports say which schedule was meant (D-PSGD is the H = 1
// member of the family, local SGD is usually run with H > 1).
//
// gossip.outer adds DiLoCo's outer step (Douillard et al. 2023) to each averaging: with a the
// peer's parameters when its local phase began and m what the mixing made of its local phase,
// the pseudo-gradient is g = a - m, the Nesterov momentum v <- mu v + g, and the peer continues
// from a - lr (g + mu v). lr = 1 and mu = 0 give plain local SGD.
#include "src/gossip/algorithms.hpp"
#include "gossip/core.hpp"

namespace gossip {

namespace {

class LocalSgd final : public Dpsgd {
 public:
  LocalSgd(const Learner& learner, Exchange& exchange, const Topology& topology,
           const GossipConfig& config)
      : Dpsgd(learner, exchange, topology, config) {}
  AlgorithmKind kind() const override { return AlgorithmKind::kLocalSgd; }

  void mix_phase(std::int64_t round) override {
    if (!config_.outer.enabled) return Dpsgd::mix_phase(round);
    const auto n = static_cast<std::size_t>(learner_.num_params);
    if (anchor_.empty()) {  // the first round's anchor: the parameters it started from
      anchor_ = start_;
      velocity_.assign(n, 0.0f);
    }
    Dpsgd::mix_phase(round);  // the buffer is now m
    // x = a - lr (1 + mu) (a - m) - lr mu^2 v: one mix over the buffer (m), a and the old v.
    const double lr = config_.outer.lr, mu = config_.outer.momentum;
    const std::span<const float> m = buffer_.host_view();
    old_velocity_ = velocity_;
    for (std::size_t i = 0; i < n; ++i)
      velocity_[i] = static_cast<float>(mu * velocity_[i] + (anchor_[i] - m[i]));
    buffer_.mix(std::vector<mixing::Term>{{exchange_->rank(), nullptr, lr * (1.0 + mu)},
                                          {exchange_->rank(), anchor_.data(), 1.0 - lr * (1.0 + mu)},
                                          {exchange_->rank(), old_velocity_.data(), -lr * mu * mu}});
    const std::span<const float> x = buffer_.host_view();
    anchor_.assign(x.begin(), x.end());
  }

  void local_phase(std::int64_t round) override {
    if (config_.outer.enabled && anchor_.empty()) {
      const std::span<const float> x = buffer_.host_view();
      start_.assign(x.begin(), x.end());
    }
    Dpsgd::local_phase(round);
  }

 protected:
  // The checkpoint carries the anchor and the velocity (empty before the first round).
  std::vector<float> buffers() const override {
    std::vector<float> b = anchor_;
    b.insert(b.end(), velocity_.begin(), velocity_.end());
    return b;
  }
  void restore_buffers(const std::vector<float>& b) override {
    if (!config_.outer.enabled || b.empty()) return Algorithm::restore_buffers(b);
    const auto n = static_cast<std::size_t>(learner_.num_params);
    if (b.size() != 2 * n)
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of local_sgd's outer state, "
                           "expected ", 2 * n, " (the anchor and the velocity)"));
    anchor_.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    velocity_.assign(b.begin() + static_cast<std::ptrdiff_t>(n), b.end());
  }

 private:
  std::vector<float> start_;         // the parameters before the first local phase
  std::vector<float> anchor_;        // a: where the current local phase began
  std::vector<float> velocity_;      // v: the outer Nesterov momentum
  std::vector<float> old_velocity_;  // v before this round's update (a mix term)
};

}  // namespace

std::unique_ptr<Algorithm> make_local_sgd(const Learner& learner, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t /*seed*/) {
  return std::make_unique<LocalSgd>(learner, exchange, topology, config);
}

}  // namespace gossip
