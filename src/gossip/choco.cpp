// gossip/choco.cpp: CHOCO-SGD (Koloskova, Stich and Jaggi 2019), compressed gossip. Every peer i
// keeps a public copy xhat_i of its parameters that its neighbours can rebuild, since it changes
// only by what i sends. Each round:
//
//   local steps:        x_i <- x_i - lr * grad            (`period` of them)
//   compress:           q_i = Q(x_i - xhat_i)             (gossip.compress; sent to neighbours)
//   update the copies:  xhat_j <- xhat_j + q_j            (for i and every in-neighbour j)
//   consensus step:     x_i <- x_i + gamma * sum_j W[i][j] (xhat_j - xhat_i)
//
// in the paper's memory-efficient form: instead of every neighbour's copy a peer keeps
// s_i = sum_j W[i][j] xhat_j (this peer at its place, ascending id), updated by
// s_i += W[i][j] q_j, and since the row sums to one the step is x_i += gamma (s_i - xhat_i).
// The copies start at zero and round 0 sends its difference uncompressed, so from then on every
// copy equals its peer's parameters of the round before, and the compressor spends its budget on
// what training changes rather than on the initial weights (one full-size message per link in
// the whole run). The sum over peers of x_i is unchanged by the consensus step when W's columns also sum to
// one. A missing or malformed packet is left out (and counted): the copies then drift apart, so
// choco is for reliable links (the config refuses sim.message_loss with it).
#include <vector>

#include "gossip/compress.hpp"
#include "gossip/compress_math.hpp"
#include "gossip/core.hpp"
#include "src/gossip/algorithms.hpp"

namespace gossip {

namespace {

class Choco final : public Algorithm {
 public:
  Choco(const Learner& learner, Exchange& exchange, const Topology& topology,
        const GossipConfig& config, std::uint64_t seed)
      : learner_(learner),
        exchange_(&exchange),
        topology_(&topology),
        config_(config),
        gamma_(static_cast<float>(gossip::consensus_step(config))),
        buffer_(learner),
        compressor_(config.compress, learner.num_params, seed, exchange.rank()),
        xhat_(static_cast<std::size_t>(learner.num_params), 0.0f),
        s_(xhat_.size(), 0.0f),
        diff_(xhat_.size()),
        x_(learner.backend->host_memory() ? 0 : xhat_.size()) {}

  std::string name() const override { return "choco"; }
  int local_steps(std::int64_t) const override { return learner_.step ? config_.period : 0; }
  void model_params(std::span<float> out) const override { buffer_.download(out); }

  void local_phase(std::int64_t round) override {
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    const auto x = buffer_.host_view();
    for (std::size_t i = 0; i < diff_.size(); ++i) diff_[i] = x[i] - xhat_[i];
    if (round == 0)  // the copies start at zero: send the first difference whole (see above)
      encode_dense(diff_, 0, packet_);
    else
      compressor_.encode(diff_, round, Scaling::kContractive, packet_);
    const int self = exchange_->rank();
    exchange_->publish_packet(round, packet_, mixing::ids(topology_->out_neighbours(self, round)));
  }

  void mix_phase(std::int64_t round) override {
    const int self = exchange_->rank();
    const auto in = topology_->in_neighbours(self, round);
    CollectOptions o;
    o.deadline = round_deadline(config_);
    const std::vector<Inbox> got = exchange_->collect(round, mixing::ids(in), o);
    const auto n = static_cast<std::int64_t>(s_.size());
    // s_i += sum_j W[i][j] q_j in ascending id, this peer's own q at its place.
    std::int64_t missing = 0;
    bool self_done = false;
    auto add_self = [&] {
      add_packet(packet_, static_cast<float>(topology_->self_weight(self, round)), s_);
      self_done = true;
    };
    std::size_t g = 0;
    for (const auto& nb : in) {
      if (!self_done && nb.peer > self) add_self();
      while (g < got.size() && got[g].peer < nb.peer) ++g;
      if (g < got.size() && got[g].peer == nb.peer && check_packet(got[g].packet, n).empty())
        add_packet(got[g].packet, static_cast<float>(nb.weight), s_);
      else
        ++missing;
    }
    if (!self_done) add_self();
    record_missing(missing);
    add_packet(packet_, 1.0f, xhat_);
    step_towards_copies();
  }

 private:
  // x_i <- x_i + gamma (s_i - xhat_i), element by element (math::choco_step).
  void step_towards_copies() {
    const std::size_t n = s_.size();
    Backend& b = *learner_.backend;
    float* x = learner_.params;
    if (!b.host_memory()) {
      b.download(x_.data(), learner_.params, n * sizeof(float));
      x = x_.data();
    }
    for (std::size_t i = 0; i < n; ++i) x[i] = math::choco_step(x[i], s_[i], xhat_[i], gamma_);
    if (!b.host_memory()) b.upload(learner_.params, x_.data(), n * sizeof(float));
  }

  Learner learner_;
  Exchange* exchange_;
  const Topology* topology_;
  GossipConfig config_;
  float gamma_;
  mixing::PeerBuffer buffer_;
  Compressor compressor_;
  std::vector<float> xhat_;  // this peer's public copy
  std::vector<float> s_;     // sum_j W[i][j] xhat_j
  std::vector<float> diff_;  // x_i - xhat_i, compressed
  std::vector<float> x_;     // device backends: the parameters, downloaded for the step
  std::vector<std::byte> packet_;
};

}  // namespace

std::unique_ptr<Algorithm> make_choco(const Learner& learner, Exchange& exchange,
                                      const Topology& topology, const GossipConfig& config,
                                      std::uint64_t seed) {
  return std::make_unique<Choco>(learner, exchange, topology, config, seed);
}

}  // namespace gossip
