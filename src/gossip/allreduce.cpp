// gossip/allreduce.cpp: the all-reduce baseline, ring all-reduce every round (what PyTorch DDP,
// gloo's allreduce_ring and NCCL do): every peer ends the round with the exact average of all
// peers' parameters. The buffer is cut into n chunks (chunk c is [c N / n, (c + 1) N / n)); over
// the ring 0 -> 1 -> ... -> n - 1 -> 0:
//
//   reduce-scatter, hops h = 0 .. n - 2: peer i sends chunk (i - h) mod n to i + 1 and adds the
//     chunk (i - h - 1) mod n it receives from i - 1 into its own; after the last hop peer i holds
//     the sum of chunk (i + 1) mod n (added in ring order starting at that chunk's number) and
//     divides it by n;
//   all-gather, hops h = n - 1 .. 2 n - 3: peer i sends chunk (i + 1 - h') mod n (h' = h - n + 1)
//     and copies the chunk (i - h') mod n it receives.
//
// Each peer sends 2 (n - 1) chunks of N / n floats a round, whatever n. Every hop needs the one
// before it from the predecessor, so the hops are relay phases (gossip/gossip.hpp): exchange
// round r * 2 (n - 1) + h. All-reduce needs every peer: a missing chunk is an error.
// With gossip.wire bf16 or fp16 every chunk travels rounded to 16 bits, and what is reduced is the
// change since the last round's common model c (identical on every peer): x - c, whose rounding
// errors are relative to one round's change, not to the parameters (rounding the parameters
// themselves each round would put the model on the 16-bit grid and erase every update smaller
// than half a step: the quickstart lost 2.4 points that way). The owner of a chunk keeps its
// average rounded as it sends it, and every peer ends with c + the average change, the same
// bits everywhere; c starts at 0 (the first round averages the whole models) and is kept in
// checkpoints.
#include <vector>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/packet.hpp"
#include "src/gossip/algorithms.hpp"

namespace gossip {

namespace {

class AllReduce final : public Algorithm {
 public:
  AllReduce(const Learner& learner, Exchange& exchange, const GossipConfig& config)
      : learner_(learner),
        exchange_(&exchange),
        config_(config),
        buffer_(learner),
        n_(exchange.size()),
        rank_(exchange.rank()),
        hops_(2 * (n_ - 1)),
        acc_(static_cast<std::size_t>(learner.num_params)) {}

  AlgorithmKind kind() const override { return AlgorithmKind::kAllreduce; }
  int local_steps(std::int64_t) const override { return learner_.step ? config_.period : 0; }
  void model_params(std::span<float> out) const override { buffer_.download(out); }
  int relay_steps() const override { return hops_ > 0 ? hops_ - 1 : 0; }

  void local_phase(std::int64_t round) override {
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    if (hops_ == 0) return;
    const auto x = buffer_.host_view();
    acc_.assign(x.begin(), x.end());
    if (half_width()) {  // the change since the last round's common model
      base_.resize(acc_.size(), 0.0f);
      for (std::size_t i = 0; i < acc_.size(); ++i) acc_[i] -= base_[i];
    }
    send(round, 0);
  }

  std::vector<float> buffers() const override { return base_; }
  void restore_buffers(const std::vector<float>& b) override {
    if (!half_width() || b.empty()) return Algorithm::restore_buffers(b);
    if (b.size() != acc_.size())
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of allreduce state, "
                           "expected ", acc_.size(), " (the common model of the last round, "
                           "gossip.wire ", wire_format_name(config_.wire), ")"));
    base_ = b;
  }

  void relay_phase(std::int64_t round, int step) override {
    receive(round, step);
    send(round, step + 1);
  }

  void mix_phase(std::int64_t round) override {
    if (hops_ == 0) return;
    receive(round, hops_ - 1);
    if (half_width()) {  // c' = c + the average change: the new common model
      for (std::size_t i = 0; i < acc_.size(); ++i) base_[i] += acc_[i];
      acc_.assign(base_.begin(), base_.end());
    }
    learner_.backend->upload(learner_.params, acc_.data(), acc_.size() * sizeof(float));
  }

 private:
  std::int64_t first(int chunk) const {
    return static_cast<std::int64_t>(acc_.size()) * chunk / n_;
  }
  std::span<float> chunk(int c) {
    return std::span<float>(acc_).subspan(static_cast<std::size_t>(first(c)),
                                          static_cast<std::size_t>(first(c + 1) - first(c)));
  }
  int mod(int v) const { return ((v % n_) + n_) % n_; }
  bool half_width() const { return config_.wire != WireFormat::kFp32; }
  std::int64_t tag(std::int64_t round, int hop) const { return round * hops_ + hop; }
  /// The chunk peer `peer` sends at hop h.
  int sent_chunk(int peer, int hop) const {
    return hop < n_ - 1 ? mod(peer - hop) : mod(peer + 1 - (hop - (n_ - 1)));
  }

  void send(std::int64_t round, int hop) {
    const int c = sent_chunk(rank_, hop);
    if (!encode_dense(chunk(c), first(c), packet_, config_.wire))
      throw RuntimeError(wire_overflow(chunk(c), config_.wire, round));
    const int next = mod(rank_ + 1);
    exchange_->publish_packet(tag(round, hop), packet_, std::span<const int>(&next, 1));
  }

  void receive(std::int64_t round, int hop) {
    const int prev = mod(rank_ - 1);
    CollectOptions o;
    o.deadline = round_deadline();
    const auto got = exchange_->collect(tag(round, hop), std::span<const int>(&prev, 1), o);
    if (got.empty())
      throw RuntimeError(cat("allreduce round ", round, " hop ", hop, ": nothing from peer ",
                             prev, " (all-reduce needs every peer)"));
    const auto packet = got.front().packet;
    const int c = sent_chunk(prev, hop);
    const auto target = chunk(c);
    const std::string why =
        check_chunk(packet, std::ssize(acc_), first(c), std::ssize(target), config_.wire);
    if (!why.empty())
      throw RuntimeError(cat("allreduce round ", round, " hop ", hop, ": bad packet from peer ",
                             prev, " for chunk ", c, ": ", why));
    if (hop < n_ - 1) {
      add_packet(packet, 1.0f, acc_);
      if (hop == n_ - 2) {  // this peer now holds the whole sum of chunk (rank + 1) mod n
        const auto mine = chunk(mod(rank_ + 1));
        for (float& v : mine) v /= static_cast<float>(n_);
        // What the others will get of it (the all-gather sends it rounded).
        if (!round_to_wire(mine, config_.wire))
          throw RuntimeError(wire_overflow(mine, config_.wire, round));
      }
    } else {
      copy_packet(packet, acc_);
    }
  }

  Learner learner_;
  Exchange* exchange_;
  GossipConfig config_;
  mixing::PeerBuffer buffer_;
  int n_;
  int rank_;
  int hops_;
  std::vector<float> acc_;  // the buffer being reduced, host memory
  std::vector<float> base_;  // half width: the last round's common model (empty before it)
  std::vector<std::byte> packet_;
};

}  // namespace

std::unique_ptr<Algorithm> make_allreduce(const Learner& learner, Exchange& exchange,
                                          const Topology& /*topology*/,
                                          const GossipConfig& config, std::uint64_t /*seed*/) {
  return std::make_unique<AllReduce>(learner, exchange, config);
}

}  // namespace gossip
