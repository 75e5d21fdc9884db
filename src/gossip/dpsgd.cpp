// gossip/dpsgd.cpp: D-PSGD, adapt then combine. Each round: `period` local SGD steps on this
// peer's shard, publish the result, then replace it by the W-weighted sum of this peer's and its
// in-neighbours' buffers (ascending peer id; a missing neighbour's weight stays with this peer).
// At half width (gossip.wire: bf16, fp16) the neighbours' buffers arrive rounded, and a peer
// mixes them against its own message as they got it, r_i: x_i' = x_i + sum_j W_ij (m_j - r_i),
// so its full-precision x_i stays its base. (Mixing x_i itself with rounded neighbours,
// W_ii x_i + sum_j W_ij m_j, pulls every model towards the 16-bit grid each round, since
// neighbours near consensus round alike, and damps every update smaller than half a step: the
// quickstart lost 0.2 to 0.6 point of accuracy that way.)
#include <algorithm>

#include "src/gossip/algorithms.hpp"
#include "gossip/core.hpp"
#include "gossip/half.hpp"

namespace gossip {

Dpsgd::Dpsgd(const Learner& learner, Exchange& exchange, const Topology& topology,
             const GossipConfig& config)
    : learner_(learner),
      exchange_(&exchange),
      topology_(&topology),
      config_(config),
      buffer_(learner),
      sent_(HostAllocator<float>(learner.backend->pinned_memory())) {}

int Dpsgd::local_steps(std::int64_t) const { return learner_.step ? config_.period : 0; }

CollectOptions Dpsgd::collect_options() const {
  CollectOptions o;
  o.mode = CollectMode::kSync;
  o.deadline = round_deadline();
  return o;
}

void Dpsgd::local_phase(std::int64_t round) {
  const int self = exchange_->rank();
  const auto to = mixing::ids(topology_->out_neighbours(self, round));
  if (config_.overlap) {  // send this round's parameters, then compute while they travel
    sent_.resize(static_cast<std::size_t>(learner_.num_params));
    // A copy of the parameters, which the steps will change. On a device it runs beside the
    // first step's kernels, and the message goes out once it is done, still during that step.
    bool published = false;
    auto publish = [&] {
      buffer_.wait_download();
      exchange_->publish(round, sent_, 1.0, to);
      published = true;
    };
    const int steps = local_steps(round);
    if (buffer_.download_async(sent_) && steps > 0 && learner_.during_step)
      learner_.during_step(publish);
    else
      publish();
    for (int s = 0; s < steps; ++s) {
      record_loss(learner_.step());
      if (!published) publish();  // a step that did not run the task
    }
    return;
  }
  for (int s = 0; s < local_steps(round); ++s) record_loss(learner_.step());
  exchange_->publish(round, buffer_.host_view(), 1.0, to);
}

void Dpsgd::mix_phase(std::int64_t round) {
  const int self = exchange_->rank();
  const auto in = topology_->in_neighbours(self, round);
  const auto from = mixing::ids(in);
  const std::vector<Inbox> got = exchange_->collect(round, from, collect_options());
  std::int64_t missing = 0;
  auto terms = mixing::pull_terms(self, topology_->self_weight(self, round), in, got, &missing);
  record_missing(missing);
  last_mix_ = {};
  for (const Inbox& m : got) last_mix_.heard.push_back(m.peer);
  // Hygiene: clipped's distances check the messages as they are computed.
  if (config_.aggregate.kind != Aggregate::kClipped)
    last_mix_.nonfinite = mixing::drop_nonfinite(terms, self, learner_.num_params);
  const bool whole = !config_.overlap && config_.wire == WireFormat::kFp32;  // r_i is x_i
  if (whole && config_.aggregate.kind == Aggregate::kMean) return buffer_.mix(terms);
  const std::span<const float> own = own_message();
  switch (config_.aggregate.kind) {
    case Aggregate::kMean: break;
    case Aggregate::kClipped: {
      mixing::Clipping c =
          mixing::clip_terms(terms, self, own, without_cut(config_.aggregate, from), buffer_);
      last_mix_.nonfinite = std::move(c.nonfinite);
      last_mix_.clipped = std::move(c.clipped);
      last_mix_.tau = c.tau;
      break;
    }
    case Aggregate::kTrimmedMean:
    case Aggregate::kMedian: {  // y, the robust average; then x_i + (y - r_i)
      last_mix_.clipped =
          mixing::robust_average(terms, self, own, without_cut(config_.aggregate, from), robust_,
                                 buffer_);
      if (whole) return buffer_.mix(std::vector<mixing::Term>{{self, robust_.data(), 1.0}});
      return buffer_.mix(std::vector<mixing::Term>{
          {self, nullptr, 1.0}, {self, robust_.data(), 1.0}, {self, own.data(), -1.0}});
    }
  }
  mix_against_own(terms, own, whole);
}

std::span<const float> Dpsgd::own_message() {
  // r_i, this peer's message as the neighbours got it: with overlap the buffer published before
  // the local steps, at half width rounded, else x_i itself (downloaded on a device backend).
  if (config_.overlap) {
    round_to_wire(std::span<float>(sent_), config_.wire);  // fp32: as it is
    return sent_;
  }
  if (config_.wire == WireFormat::kFp32) return buffer_.host_view();
  const auto x = buffer_.host_view();
  sent_.resize(x.size());
  round_to_wire(x, config_.wire, std::span<float>(sent_));  // copied and rounded in one pass
  return sent_;
}

void Dpsgd::mix_against_own(std::vector<mixing::Term>& terms, std::span<const float> own,
                            bool whole) {
  const int self = exchange_->rank();
  if (whole) return buffer_.mix(terms);
  if (!config_.overlap) {
    // x_i + sum_j W[i][j] (m_j - r_i) as one sum: (W[i][i] - 1) r_i + sum_j W[i][j] m_j + x_i.
    for (auto& term : terms)
      if (term.peer == self) {
        term.host = own.data();
        term.weight -= 1.0;
      }
    terms.push_back({self, nullptr, 1.0});
    return buffer_.mix(terms);
  }
  // sum_j W[i][j] m_j over what was published (ours is sent_, as the neighbours got it, so
  // rounded at half width), then + x_i' - sent_.
  for (auto& term : terms)
    if (term.peer == self) term.host = sent_.data();
  terms.push_back({self, nullptr, 1.0});
  terms.push_back({self, sent_.data(), -1.0});
  buffer_.mix(terms);
}

std::unique_ptr<Algorithm> make_dpsgd(const Learner& learner, Exchange& exchange,
                                      const Topology& topology, const GossipConfig& config,
                                      std::uint64_t /*seed*/) {
  return std::make_unique<Dpsgd>(learner, exchange, topology, config);
}

}  // namespace gossip
