/// gossip/algorithms: the concrete algorithm classes (not a public header; make_algorithm is the
/// way in). One file each: dpsgd.cpp, local_sgd.cpp, async_gossip.cpp, push_sum.cpp, choco.cpp,
/// allreduce.cpp, gradient_tracking.cpp.
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "src/gossip/algorithms.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <string>

#include "gossip/gossip.hpp"
#include "src/gossip/mixing.hpp"
#include "src/gossip/robust.hpp"

namespace gossip {

/// D-PSGD (Lian et al. 2017) in adapt-then-combine form: `period` local steps, publish, then
/// x_i <- W[i][i] x_i + sum_j W[i][j] x_j over in-neighbours. Needs a row-stochastic W.
/// With gossip.overlap, the original D-PSGD form: publish x_i first, take the local steps
/// (x_i -> x_i') while it travels, then x_i <- sum_j W[i][j] x_j + (x_i' - x_i), the sum over the
/// published buffers (this peer's own at its place) in ascending id, then + x_i' - x_i.
class Dpsgd : public Algorithm {
 public:
  Dpsgd(const Learner& learner, Exchange& exchange, const Topology& topology,
        const GossipConfig& config);

  AlgorithmKind kind() const override { return AlgorithmKind::kDpsgd; }
  int local_steps(std::int64_t round) const override;
  void local_phase(std::int64_t round) override;
  void mix_phase(std::int64_t round) override;
  void model_params(std::span<float> out) const override { buffer_.download(out); }

 protected:
  /// How mix_phase collects (synchronous here; the asynchronous variant overrides it).
  virtual CollectOptions collect_options() const;

  bool overlaps() const override { return config_.overlap; }

  Learner learner_;
  Exchange* exchange_;
  const Topology* topology_;
  GossipConfig config_;
  mixing::PeerBuffer buffer_;
  // The buffer published this round as the neighbours got it: with overlap, before the local
  // steps (on a device downloaded straight into its page-locked memory); at half width
  // (gossip.wire), rounded as it travelled. Empty otherwise.
  HostFloats sent_;
  std::vector<float> robust_;  // trimmed_mean, median: the robust average of this round

 private:
  /// r_i, this peer's message as its neighbours got it: with overlap the buffer published
  /// before the local steps, else x_i; rounded at half width (gossip.wire).
  std::span<const float> own_message();
  /// The mix of `terms` with this peer's own message r_i = `own` in its place: x_i + sum_j
  /// W_ij (m_j - r_i); `whole`: r_i is x_i, so the plain sum.
  void mix_against_own(std::vector<mixing::Term>& terms, std::span<const float> own,
                       bool whole);
};

// The make_ functions GOSSIP_ALGORITHMS names, one per algorithm's source file, all of one
// signature so make_algorithm can dispatch on the table (`seed` is train.seed).
#define GOSSIP_ALGORITHM_DECLARE_MAKE(id, name, make, ...)                                  \
  std::unique_ptr<Algorithm> make(const Learner& learner, Exchange& exchange,             \
                                  const Topology& topology, const GossipConfig& config,   \
                                  std::uint64_t seed);
GOSSIP_ALGORITHMS(GOSSIP_ALGORITHM_DECLARE_MAKE)
#undef GOSSIP_ALGORITHM_DECLARE_MAKE

}  // namespace gossip
