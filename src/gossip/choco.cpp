// gossip/choco.cpp: CHOCO-SGD (Koloskova, Stich and Jaggi 2019), compressed gossip. Every peer i
// keeps a public copy xhat_i of its parameters that its neighbours can rebuild, since it changes
// only by what i sends. Each round:
//
//   local steps:        x_i <- x_i - lr * grad            (`period` of them)
//   compress:           q_i = Q(x_i - xhat_i)             (gossip.choco.compress; sent out)
//   update the copies:  xhat_j <- xhat_j + q_j            (for i and every in-neighbour j)
//   consensus step:     x_i <- x_i + gamma * sum_j W[i][j] (xhat_j - xhat_i)
//
// in the paper's memory-efficient form: instead of every neighbour's copy a peer keeps
// s_i = sum_j W[i][j] xhat_j (this peer at its place, ascending id), updated by
// s_i += W[i][j] q_j, and since the row sums to one the step is x_i += gamma (s_i - xhat_i).
// With gossip.choco.gossip_steps = S the compress-send-update-step sequence runs S times a round
// (the first S - 1 in relay phases), each exchange tagged round * S + step: S messages of the
// compressor's size a round per link, S consensus steps between two rounds of local steps.
// The copies start at zero and round 0 sends its difference uncompressed, so from then on every
// copy equals its peer's parameters of the round before, and the compressor spends its budget on
// what training changes rather than on the initial weights (one full-size message per link in
// the whole run). The sum over peers of x_i is unchanged by the consensus step when W's columns also sum to
// one. A missing or malformed packet is left out (and counted): the copies then drift apart, so
// choco is for reliable links (the config refuses sim.message_loss with it).
//
// Where the work runs: x_i, xhat_i, s_i and the difference all live in the backend's memory
// (device memory on CUDA), and every element-wise pass — the difference, quantization, adding a
// packet to s_i and xhat_i, the consensus step — is one of the backend's gossip kernels over
// gossip/compress_math.hpp (CPU loops or CUDA kernels). Only packets cross to the host: the one
// this peer sends (scales and codes, or the difference for top_k/random_k, whose choice of
// coordinates is a selection done on the host) and the ones it receives, checked on the host and
// then uploaded. With the CPU backend nothing is copied that the host path did not copy, and the
// results are bit-identical to it.
#include <vector>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/packet.hpp"
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
        gamma_(static_cast<float>(gossip::consensus_step(config.choco))),
        n_(learner.num_params),
        compressor_(config.choco.compress, learner.num_params, seed, exchange.rank(), config.wire),
        adder_(*learner.backend, learner.num_params),
        xhat_(*learner.backend, static_cast<std::size_t>(n_)),
        s_(*learner.backend, static_cast<std::size_t>(n_)),
        diff_(*learner.backend, static_cast<std::size_t>(n_)) {
    GOSSIP_CHECK(learner.backend != nullptr && learner.params != nullptr);
    learner.backend->fill(xhat_.data(), 0.0f, n_);
    learner.backend->fill(s_.data(), 0.0f, n_);
  }

  AlgorithmKind kind() const override { return AlgorithmKind::kChoco; }
  int local_steps(std::int64_t) const override { return learner_.step ? config_.period : 0; }
  void model_params(std::span<float> out) const override {
    GOSSIP_CHECK_EQ(static_cast<std::int64_t>(out.size()), n_);
    learner_.backend->download(out.data(), learner_.params, out.size_bytes());
  }

  void local_phase(std::int64_t round) override {
    for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
    send(round, 0);
  }

  // A checkpoint keeps the public copy and the weighted sum (2n floats): with them a resumed run
  // goes on bit for bit.
  std::vector<float> buffers() const override {
    std::vector<float> out(static_cast<std::size_t>(2 * n_));
    const std::size_t bytes = static_cast<std::size_t>(n_) * sizeof(float);
    learner_.backend->download(out.data(), xhat_.data(), bytes);
    learner_.backend->download(out.data() + n_, s_.data(), bytes);
    return out;
  }
  void restore_buffers(const std::vector<float>& b) override {
    if (static_cast<std::int64_t>(b.size()) != 2 * n_)
      throw InputError(cat("the checkpoint holds ", b.size(), " floats of choco state, expected ",
                           2 * n_, " (the public copy and the sum of the copies, ", n_,
                           " each)"));
    const std::size_t bytes = static_cast<std::size_t>(n_) * sizeof(float);
    learner_.backend->upload(xhat_.data(), b.data(), bytes);
    learner_.backend->upload(s_.data(), b.data() + n_, bytes);
  }

  // Exchanges 0 .. gossip_steps - 2 of the round end in relay phases that send the next one.
  int relay_steps() const override { return config_.choco.gossip_steps - 1; }
  void relay_phase(std::int64_t round, int step) override {
    consensus(round, step);
    send(round, step + 1);
  }
  void mix_phase(std::int64_t round) override { consensus(round, config_.choco.gossip_steps - 1); }

 private:
  /// The exchange's tag for step `step` of `round` (the round itself with one step a round).
  std::int64_t tag(std::int64_t round, int step) const {
    return round * config_.choco.gossip_steps + step;
  }

  /// Compresses x_i - xhat_i and sends it, as step `step` of `round`.
  void send(std::int64_t round, int step) {
    GossipKernels& b = *learner_.backend;
    b.choco_difference(learner_.params, xhat_.data(), diff_.data(), n_);
    if (round == 0 && step == 0)  // the copies start at zero: the first difference goes whole
      encode_dense(b, diff_.data(), n_, packet_);
    else
      compressor_.encode(b, diff_.data(), tag(round, step), Scaling::kContractive, packet_);
    const int self = exchange_->rank();
    exchange_->publish_packet(tag(round, step), packet_,
                              mixing::ids(topology_->out_neighbours(self, round)));
  }

  /// Takes step `step`'s packets into s_i and xhat_i, then the consensus step.
  void consensus(std::int64_t round, int step) {
    const int self = exchange_->rank();
    const auto in = topology_->in_neighbours(self, round);
    CollectOptions o;
    o.deadline = round_deadline();
    const std::vector<Inbox> got = exchange_->collect(tag(round, step), mixing::ids(in), o);
    // s_i += sum_j W[i][j] q_j in ascending id, this peer's own q at its place. A packet is
    // checked on the host before any of it reaches the backend.
    std::int64_t missing = 0;
    bool self_done = false;
    auto add_self = [&] {
      adder_.add(packet_, static_cast<float>(topology_->self_weight(self, round)), s_.data());
      self_done = true;
    };
    std::size_t g = 0;
    for (const auto& nb : in) {
      if (!self_done && nb.peer > self) add_self();
      while (g < got.size() && got[g].peer < nb.peer) ++g;
      if (g < got.size() && got[g].peer == nb.peer && check_packet(got[g].packet, n_).empty())
        adder_.add(got[g].packet, static_cast<float>(nb.weight), s_.data());
      else
        ++missing;
    }
    if (!self_done) add_self();
    record_missing(missing);
    adder_.add(packet_, 1.0f, xhat_.data());
    // x_i <- x_i + gamma (s_i - xhat_i), element by element (math::choco_step).
    learner_.backend->choco_step(learner_.params, s_.data(), xhat_.data(), gamma_, n_);
  }

  Learner learner_;
  Exchange* exchange_;
  const Topology* topology_;
  GossipConfig config_;
  float gamma_;
  std::int64_t n_;
  Compressor compressor_;
  PacketAdder adder_;        // packets into s_ and xhat_
  DeviceArray<float> xhat_;  // this peer's public copy
  DeviceArray<float> s_;     // sum_j W[i][j] xhat_j
  DeviceArray<float> diff_;  // x_i - xhat_i, compressed
  std::vector<std::byte> packet_;
};

}  // namespace

std::unique_ptr<Algorithm> make_choco(const Learner& learner, Exchange& exchange,
                                      const Topology& topology, const GossipConfig& config,
                                      std::uint64_t seed) {
  return std::make_unique<Choco>(learner, exchange, topology, config, seed);
}

}  // namespace gossip
