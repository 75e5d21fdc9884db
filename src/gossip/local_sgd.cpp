// gossip/local_sgd.cpp: decentralized local SGD (Koloskova et al. 2020): H = gossip.period local
// steps between gossip averages with W. The round is D-PSGD's with a longer local phase; it is
// its own algorithm name so sweeps and reports say which schedule was meant (D-PSGD is the H = 1
// member of the family, local SGD is usually run with H > 1).
//
// gossip.outer adds DiLoCo's outer step (Douillard et al. 2023) to each averaging: with a the
// peer's parameters when its local phase began and m what the mixing made of its local phase,
// the pseudo-gradient is g = a - m, the Nesterov momentum v <- mu v + g, and the peer continues
// from a - lr (g + mu v). lr = 1 and mu = 0 give plain local SGD.
//
// gossip.outer.compress sends the pseudo-gradient instead of the parameters, compressed with
// error feedback (DeMo, Peng et al. 2024; INTELLECT-1's int8 pseudo-gradients with quantize 8):
// the residual e <- e + g, the packet Q(e) (dct_top_k: the largest DCT coefficients of e's chunks),
// e <- e - D(Q(e)) with D the decoding, so what a packet leaves out is sent in a later round and
// the packets plus the residual add up to the pseudo-gradients. Each peer averages the packets
// it holds (its own at its place, ascending id; a missing one left out and the others' weights
// renormalized) into g', and steps its anchor with g' as above. Peers average pseudo-gradients,
// never parameters, so the anchors stay equal only on the complete graph with uniform weights,
// the only graph check_outer_compress lets it run on: there every peer that heard the same
// packets makes the same step, bit for bit.
#include <cmath>
#include <optional>

#include "src/gossip/algorithms.hpp"
#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/packet.hpp"

namespace gossip {

namespace {

class LocalSgd final : public Dpsgd {
 public:
  LocalSgd(const Learner& learner, Exchange& exchange, const Topology& topology,
           const GossipConfig& config, std::uint64_t seed)
      : Dpsgd(learner, exchange, topology, config) {
    if (packet_compressor(config) != nullptr)
      compressor_.emplace(config.outer.compress, learner.num_params, seed, exchange.rank());
  }
  AlgorithmKind kind() const override { return AlgorithmKind::kLocalSgd; }

  void mix_phase(std::int64_t round) override {
    if (compressor_) return outer_step(round, average_packets(round));
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
    if (compressor_) return compressed_local_phase(round);
    if (config_.outer.enabled && anchor_.empty()) {
      const std::span<const float> x = buffer_.host_view();
      start_.assign(x.begin(), x.end());
    }
    Dpsgd::local_phase(round);
  }

 protected:
  // The checkpoint carries the anchor and the velocity (empty before the first round), and with
  // gossip.outer.compress the residual.
  std::vector<float> buffers() const override {
    std::vector<float> b = anchor_;
    b.insert(b.end(), velocity_.begin(), velocity_.end());
    b.insert(b.end(), residual_.begin(), residual_.end());
    return b;
  }
  void restore_buffers(const std::vector<float>& b) override {
    if (!config_.outer.enabled || b.empty()) return Algorithm::restore_buffers(b);
    const auto n = static_cast<std::size_t>(learner_.num_params);
    const std::size_t parts = compressor_ ? 3 : 2;
    if (b.size() != parts * n)
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of local_sgd's outer state, "
                           "expected ", parts * n, " (the anchor and the velocity",
                           compressor_ ? " and gossip.outer.compress's residual" : "", ")"));
    const auto part = [&](std::size_t i) { return b.begin() + static_cast<std::ptrdiff_t>(i * n); };
    anchor_.assign(part(0), part(1));
    velocity_.assign(part(1), part(2));
    if (compressor_) residual_.assign(part(2), part(3));
  }

 private:
  /// The local steps, then the packet of the residual plus this phase's pseudo-gradient, sent.
  void compressed_local_phase(std::int64_t round) {
    const auto n = static_cast<std::size_t>(learner_.num_params);
    if (anchor_.empty()) {  // the first phase: it starts from the parameters as they are
      const std::span<const float> x = buffer_.host_view();
      anchor_.assign(x.begin(), x.end());
      velocity_.assign(n, 0.0f);
      residual_.assign(n, 0.0f);
    }
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    const std::span<const float> x = buffer_.host_view();
    for (std::size_t i = 0; i < n; ++i) residual_[i] += anchor_[i] - x[i];
    compressor_->encode(residual_, round, Scaling::kContractive, packet_);
    const std::vector<float> sent = decoded(packet_);
    for (std::size_t i = 0; i < n; ++i) residual_[i] -= sent[i];
    exchange_->publish_packet(round, packet_,
                              mixing::ids(topology_->out_neighbours(exchange_->rank(), round)));
  }

  /// What a packet stands for in the parameters' domain (a checked packet).
  std::vector<float> decoded(std::span<const std::byte> packet) const {
    std::vector<float> v = decode_packet(packet, learner_.num_params);
    if (config_.outer.compress.kind != CompressKind::kDctTopK) return v;
    std::vector<float> x(v.size());
    idct_chunks(v, x);
    return x;
  }

  /// g', the mean of the decoded packets this peer holds for `round` (its own among them).
  std::vector<float> average_packets(std::int64_t round) {
    const int self = exchange_->rank();
    const auto in = topology_->in_neighbours(self, round);
    const std::vector<Inbox> got = exchange_->collect(round, mixing::ids(in), collect_options());
    const auto n = static_cast<std::size_t>(learner_.num_params);
    // The coefficients are summed where they are (the DCT domain for dct_top_k: it is linear)
    // and decoded once.
    std::vector<float> sum(n, 0.0f);
    double total = 0.0;
    std::int64_t missing = 0;
    last_mix_ = {};
    const auto add = [&](std::span<const std::byte> packet, double weight) {
      add_packet(packet, static_cast<float>(weight), sum);
      total += weight;
    };
    bool self_done = false;
    std::size_t g = 0;
    for (const auto& nb : in) {
      if (!self_done && nb.peer > self) {
        add(packet_, topology_->self_weight(self, round));
        self_done = true;
      }
      while (g < got.size() && got[g].peer < nb.peer) ++g;
      if (g < got.size() && got[g].peer == nb.peer && usable(got[g].packet)) {
        last_mix_.heard.push_back(nb.peer);
        add(got[g].packet, nb.weight);
      } else {
        ++missing;
      }
    }
    if (!self_done) add(packet_, topology_->self_weight(self, round));
    record_missing(missing);
    const float scale = static_cast<float>(1.0 / total);
    if (total != 1.0)
      for (float& v : sum) v *= scale;
    if (config_.outer.compress.kind != CompressKind::kDctTopK) return sum;
    std::vector<float> g_mean(n);
    idct_chunks(sum, g_mean);
    return g_mean;
  }

  /// A neighbour's packet that may be averaged: well formed for the model, of the kind this
  /// run's compressor sends, and finite (a lying or broken peer's is left out and counted).
  bool usable(std::span<const std::byte> packet) {
    if (!check_packet(packet, learner_.num_params).empty() ||
        packet_header(packet).kind != packet_header(packet_).kind)
      return false;
    const std::vector<float> v = decode_packet(packet, learner_.num_params);
    for (float x : v)
      if (!std::isfinite(x)) {
        last_mix_.nonfinite.push_back(-1);
        return false;
      }
    return true;
  }

  /// The outer Nesterov step with the averaged pseudo-gradient g: v <- mu v + g, x = a - lr (g +
  /// mu v), the new anchor.
  void outer_step(std::int64_t /*round*/, const std::vector<float>& g) {
    const float lr = static_cast<float>(config_.outer.lr);
    const float mu = static_cast<float>(config_.outer.momentum);
    for (std::size_t i = 0; i < anchor_.size(); ++i) {
      velocity_[i] = mu * velocity_[i] + g[i];
      anchor_[i] -= lr * (g[i] + mu * velocity_[i]);
    }
    buffer_.mix(std::vector<mixing::Term>{{exchange_->rank(), anchor_.data(), 1.0}});
  }

  std::optional<Compressor> compressor_;  // gossip.outer.compress, when it is not none
  std::vector<float> residual_;           // e: what the packets have not carried yet
  std::vector<std::byte> packet_;         // this round's packet
  std::vector<float> start_;         // the parameters before the first local phase
  std::vector<float> anchor_;        // a: where the current local phase began
  std::vector<float> velocity_;      // v: the outer Nesterov momentum
  std::vector<float> old_velocity_;  // v before this round's update (a mix term)
};

}  // namespace

std::unique_ptr<Algorithm> make_local_sgd(const Learner& learner, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t seed) {
  return std::make_unique<LocalSgd>(learner, exchange, topology, config, seed);
}

}  // namespace gossip
