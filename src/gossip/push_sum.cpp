// gossip/push_sum.cpp: push-sum / Stochastic Gradient Push (Assran et al. 2019) for directed
// graphs. Each peer holds a numerator x and a weight w; the model is z = x / w. We keep z itself
// in the learner (so local steps and evaluation see the de-biased model) and send (z, w):
//
//   w_i' = sum_j W[i][j] w_j                 (j over in-neighbours and i itself)
//   z_i' = x_i' / w_i' = sum_j (W[i][j] w_j / w_i') z_j
//
// which is push-sum's x_i' = sum_j W[i][j] x_j with x_j = w_j z_j, done as one Backend::mix over
// the z buffers in ascending peer id. W must be column stochastic (each sender's shares sum to
// 1). A missing message is counted as if it carried this peer's own (z, w): its weight W[i][j]
// goes to the self term, which keeps z a convex combination (the sender's mass is lost, as in
// any push-sum run with message loss). At half width (gossip.wire) the z_j arrive rounded and a
// peer mixes them against its own z as they got it, r_i, as D-PSGD does (gossip/dpsgd.cpp):
// z_i' = z_i + sum_j t_j (m_j - r_i), t_j the weights above.
#include <cmath>
#include <vector>

#include "src/gossip/algorithms.hpp"
#include "gossip/core.hpp"
#include "gossip/half.hpp"

namespace gossip {

namespace {

class PushSum final : public Algorithm {
 public:
  PushSum(const Learner& learner, Exchange& exchange, const Topology& topology,
          const GossipConfig& config)
      : learner_(learner),
        exchange_(&exchange),
        topology_(&topology),
        config_(config),
        buffer_(learner) {}

  AlgorithmKind kind() const override { return AlgorithmKind::kPushSum; }
  int local_steps(std::int64_t) const override { return learner_.step ? config_.period : 0; }
  double weight() const override { return weight_; }
  void model_params(std::span<float> out) const override { buffer_.download(out); }

 protected:
  void set_weight(double w) override { weight_ = w; }

 public:

  void local_phase(std::int64_t round) override {
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    const int self = exchange_->rank();
    const auto to = mixing::ids(topology_->out_neighbours(self, round));
    exchange_->publish(round, buffer_.host_view(), weight_, to);
  }

  void mix_phase(std::int64_t round) override {
    const int self = exchange_->rank();
    const auto in = topology_->in_neighbours(self, round);
    const auto from = mixing::ids(in);
    CollectOptions options;
    options.deadline = round_deadline();
    std::vector<Inbox> got = exchange_->collect(round, from, options);
    // Hygiene: a message with NaN or Inf, or a weight that is not a positive number, is left
    // out (as a missing one: its share stays with this peer).
    last_mix_ = {};
    for (const Inbox& m : got) last_mix_.heard.push_back(m.peer);
    std::erase_if(got, [&](const Inbox& m) {
      const bool bad = !m.checked_finite && (!(std::isfinite(m.weight) && m.weight > 0.0) ||
                                             !mixing::finite(m.params));
      if (bad) last_mix_.nonfinite.push_back(m.peer);
      return bad;
    });
    std::int64_t missing = 0;
    // Pull terms with raw W weights (missing ones folded into self), then scale by w_j / w'.
    auto terms = mixing::pull_terms(self, topology_->self_weight(self, round), in, got, &missing);
    record_missing(missing);
    double w_next = 0.0;
    std::size_t g = 0;
    for (auto& t : terms) {
      double wj = weight_;
      if (t.host != nullptr) {
        while (got[g].peer != t.peer) ++g;
        wj = got[g].weight;
      }
      t.weight *= wj;
      w_next += t.weight;
    }
    GOSSIP_CHECK_MSG(w_next > 0.0, "push-sum weight of peer ", self, " fell to ", w_next);
    for (auto& t : terms) t.weight /= w_next;
    weight_ = w_next;
    if (config_.wire == WireFormat::kFp32) return buffer_.mix(terms);
    const auto z = buffer_.host_view();
    sent_.resize(z.size());
    round_to_wire(z, config_.wire, std::span<float>(sent_));  // copied and rounded in one pass
    for (auto& t : terms)
      if (t.peer == self) {  // z_i + sum_j t_j (m_j - r_i) as one sum
        t.host = sent_.data();
        t.weight -= 1.0;
      }
    terms.push_back({self, nullptr, 1.0});
    buffer_.mix(terms);
  }

 private:
  Learner learner_;
  Exchange* exchange_;
  const Topology* topology_;
  GossipConfig config_;
  mixing::PeerBuffer buffer_;
  double weight_ = 1.0;
  std::vector<float> sent_;  // at half width: z as published, rounded as it travelled
};

}  // namespace

std::unique_ptr<Algorithm> make_push_sum(const Learner& learner, Exchange& exchange,
                                         const Topology& topology, const GossipConfig& config,
                                         std::uint64_t /*seed*/) {
  return std::make_unique<PushSum>(learner, exchange, topology, config);
}

}  // namespace gossip
