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
//
// gossip.outer.fragments = F > 1 is Streaming DiLoCo (Douillard et al. 2025): the buffer is F
// contiguous fragments (outer_fragment), and round r synchronises fragment r mod F alone, so
// each fragment takes its outer step every F rounds, the fragments staggered, and a round's
// message is a fragment. Without compression the fragment is mixed with the in-neighbours'
// (any graph, W's weights, a missing neighbour's weight staying with the peer) and its outer
// step taken from the mix; with it, as above, fragment by fragment. With gossip.overlap the
// fragment leaves before the round's local steps, which run while it travels, and the outer
// step's result keeps what those steps changed: x_f <- x_f' + (x_f now - x_f as sent).
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
      : Dpsgd(learner, exchange, topology, config),
        packets_(outer_packets(config)),
        compress_(packet_compressor(config) != nullptr),
        seed_(seed) {
    if (compress_) compressors_.resize(static_cast<std::size_t>(config.outer.fragments));
  }
  AlgorithmKind kind() const override { return AlgorithmKind::kLocalSgd; }

  void mix_phase(std::int64_t round) override {
    if (packets_) return fragment_mix(round);
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
    if (packets_) return fragment_local_phase(round);
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
    const std::size_t parts = compress_ ? 3 : 2;
    if (b.size() != parts * n)
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of local_sgd's outer state, "
                           "expected ", parts * n, " (the anchor and the velocity",
                           compress_ ? " and gossip.outer.compress's residual" : "", ")"));
    const auto part = [&](std::size_t i) { return b.begin() + static_cast<std::ptrdiff_t>(i * n); };
    anchor_.assign(part(0), part(1));
    velocity_.assign(part(1), part(2));
    if (compress_) residual_.assign(part(2), part(3));
  }

 private:
  /// The fragment round `round` synchronises.
  Fragment fragment(std::int64_t round) const {
    return outer_fragment(learner_.num_params, config_.outer.fragments,
                          static_cast<int>(round % config_.outer.fragments));
  }

  /// The local steps and the round's fragment sent: after them, or before with gossip.overlap.
  void fragment_local_phase(std::int64_t round) {
    const auto n = static_cast<std::size_t>(learner_.num_params);
    if (anchor_.empty()) {  // the first phase: it starts from the parameters as they are
      const std::span<const float> x = buffer_.host_view();
      anchor_.assign(x.begin(), x.end());
      velocity_.assign(n, 0.0f);
      if (compress_) residual_.assign(n, 0.0f);
    }
    if (config_.overlap) send_fragment(round);
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    if (!config_.overlap) send_fragment(round);
  }

  /// The fragment's packet: its values, or (compressed) the packet of its residual plus its
  /// pseudo-gradient, whose decoding leaves the residual.
  void send_fragment(std::int64_t round) {
    const Fragment f = fragment(round);
    const std::span<const float> x = buffer_.host_view().subspan(f.first, f.size);
    if (config_.overlap) sent_.assign(x.begin(), x.end());
    if (!compress_) {
      encode_dense(x, 0, packet_);
    } else {
      const std::span<float> e = std::span(residual_).subspan(f.first, f.size);
      for (std::int64_t i = 0; i < f.size; ++i) e[i] += anchor_[f.first + i] - x[i];
      compressor(f).encode(e, round, Scaling::kContractive, packet_);
      const std::vector<float> out = decoded(packet_, f.size);
      for (std::int64_t i = 0; i < f.size; ++i) e[i] -= out[i];
    }
    exchange_->publish_packet(round, packet_,
                              mixing::ids(topology_->out_neighbours(exchange_->rank(), round)));
  }

  /// The compressor of fragment f (made on first use: fragments differ in length by one).
  Compressor& compressor(const Fragment& f) {
    std::optional<Compressor>& c = compressors_[static_cast<std::size_t>(f.index)];
    if (!c) c.emplace(config_.outer.compress, f.size, seed_, exchange_->rank());
    return *c;
  }

  /// What a packet of `size` coordinates stands for in the parameters' domain (a checked one).
  std::vector<float> decoded(std::span<const std::byte> packet, std::int64_t size) const {
    std::vector<float> v = decode_packet(packet, size);
    if (config_.outer.compress.kind != CompressKind::kDctTopK) return v;
    std::vector<float> x(v.size());
    idct_chunks(v, x);
    return x;
  }

  /// The fragment's outer step: g (the mean decoded pseudo-gradient, or the anchor minus the
  /// mixed fragment), v <- mu v + g, x_f <- a_f - lr (g + mu v), the new anchor; with overlap
  /// plus what the round's steps changed since the fragment left.
  void fragment_mix(std::int64_t round) {
    const Fragment f = fragment(round);
    const std::vector<float> mean = average_packets(round, f);
    const float lr = static_cast<float>(config_.outer.lr);
    const float mu = static_cast<float>(config_.outer.momentum);
    const std::span<const float> x = buffer_.host_view();
    target_.assign(x.begin(), x.end());
    for (std::int64_t j = 0; j < f.size; ++j) {
      const std::size_t i = static_cast<std::size_t>(f.first + j);
      const float g = compress_ ? mean[j] : anchor_[i] - mean[j];
      velocity_[i] = mu * velocity_[i] + g;
      anchor_[i] -= lr * (g + mu * velocity_[i]);
      target_[i] = config_.overlap ? anchor_[i] + (x[i] - sent_[j]) : anchor_[i];
    }
    buffer_.mix(std::vector<mixing::Term>{{exchange_->rank(), target_.data(), 1.0}});
  }

  /// The W-weighted mean of the packets this peer holds for `round`'s fragment, its own at its
  /// place (ascending id). Compressed, a missing packet is left out and the others' weights
  /// renormalized (every peer that heard the same packets takes the same step); mixed values,
  /// its weight stays with this peer, as D-PSGD's.
  std::vector<float> average_packets(std::int64_t round, const Fragment& f) {
    const int self = exchange_->rank();
    const auto in = topology_->in_neighbours(self, round);
    const std::vector<Inbox> got = exchange_->collect(round, mixing::ids(in), collect_options());
    // The coefficients are summed where they are (the DCT domain for dct_top_k: it is linear)
    // and decoded once.
    std::vector<float> sum(static_cast<std::size_t>(f.size), 0.0f);
    double total = 0.0, lost = 0.0;
    std::int64_t missing = 0;
    last_mix_ = {};
    bool self_done = false;
    std::size_t g = 0;
    const auto add_self = [&] {
      add_packet(packet_, static_cast<float>(topology_->self_weight(self, round)), sum);
      total += topology_->self_weight(self, round);
      self_done = true;
    };
    for (const auto& nb : in) {
      if (!self_done && nb.peer > self) add_self();
      while (g < got.size() && got[g].peer < nb.peer) ++g;
      if (g < got.size() && got[g].peer == nb.peer && usable(got[g].packet, f.size)) {
        last_mix_.heard.push_back(nb.peer);
        add_packet(got[g].packet, static_cast<float>(nb.weight), sum);
        total += nb.weight;
      } else {
        ++missing;
        lost += nb.weight;
      }
    }
    if (!self_done) add_self();
    record_missing(missing);
    if (!compress_) {  // the missing weight stays with this peer
      if (lost > 0) add_packet(packet_, static_cast<float>(lost), sum);
      return sum;
    }
    const float scale = static_cast<float>(1.0 / total);
    if (total != 1.0)
      for (float& v : sum) v *= scale;
    if (config_.outer.compress.kind != CompressKind::kDctTopK) return sum;
    std::vector<float> mean(sum.size());
    idct_chunks(sum, mean);
    return mean;
  }

  /// A neighbour's packet that may be averaged: well formed for the fragment, of the kind this
  /// peer sends, and finite (a lying or broken peer's is left out and counted).
  bool usable(std::span<const std::byte> packet, std::int64_t size) {
    if (!check_packet(packet, size).empty() ||
        packet_header(packet).kind != packet_header(packet_).kind)
      return false;
    const std::vector<float> v = decode_packet(packet, size);
    for (float x : v)
      if (!std::isfinite(x)) {
        last_mix_.nonfinite.push_back(-1);
        return false;
      }
    return true;
  }

  bool packets_;   // outer_packets: the fragment rounds below
  bool compress_;  // gossip.outer.compress is not none
  std::uint64_t seed_;
  std::vector<float> start_;         // the parameters before the first local phase
  std::vector<float> anchor_;        // a: where the current local phase began
  std::vector<float> velocity_;      // v: the outer Nesterov momentum
  std::vector<float> old_velocity_;  // v before this round's update (a mix term)
  std::vector<std::optional<Compressor>> compressors_;  // one a fragment, when compressing
  std::vector<float> residual_;      // e: what the packets have not carried yet
  std::vector<std::byte> packet_;    // this round's packet
  std::vector<float> sent_;          // overlap: the fragment's values as they left
  std::vector<float> target_;        // the buffer after a fragment's outer step
};

}  // namespace

std::unique_ptr<Algorithm> make_local_sgd(const Learner& learner, Exchange& exchange,
                                          const Topology& topology, const GossipConfig& config,
                                          std::uint64_t seed) {
  return std::make_unique<LocalSgd>(learner, exchange, topology, config, seed);
}

Fragment outer_fragment(std::int64_t n, int fragments, int index) {
  GOSSIP_CHECK(fragments >= 1 && index >= 0 && index < fragments);
  const std::int64_t first = n * index / fragments;
  return {index, first, n * (index + 1) / fragments - first};
}

}  // namespace gossip
