// peer/trace.hpp: the timeline's side of a peer: its exchange decorator (TracedExchange), traced
// learners and rounds, the TLS records' spans.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/trace.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <limits>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gossip/checkpoint.hpp"
#include "gossip/config.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/timeline.hpp"
#include "gossip/topology.hpp"

namespace gossip::peer_parts {

using Clock = std::chrono::steady_clock;

/// The exchange the algorithm sees: every call goes to `inner`, and the timeline records each
/// publish as send and each collect (or catch-up's newest) as wait (the monitor's bookkeeping in
/// it included).
class TracedExchange final : public ForwardingExchange {
 public:
  TracedExchange(Exchange& inner, Timeline& timeline)
      : ForwardingExchange(inner), timeline_(&timeline) {}
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override {
    timeline_->time(Phase::kSend, [&] { inner_->publish(round, params, weight, to); });
  }
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override {
    timeline_->time(Phase::kSend, [&] { inner_->publish_packet(round, packet, to); });
  }
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override {
    return timeline_->time(Phase::kWait, [&] { return inner_->collect(round, from, options); });
  }
  std::optional<Inbox> newest(std::span<const int> from) override {
    return timeline_->time(Phase::kWait, [&] { return inner_->newest(from); });
  }

 private:
  Timeline* timeline_;
};

/// A learner whose steps the timeline records as compute.
inline Learner traced_learner(Learner learner, Timeline& timeline) {
  if (learner.step)
    learner.step = [step = std::move(learner.step), t = &timeline] {
      return t->time(Phase::kCompute, step);
    };
  return learner;
}

/// A round as the timeline sees it: the local phase, the relay steps and the mix phase.
inline void traced_round(Algorithm& algorithm, Timeline& timeline, std::int64_t round) {
  timeline.begin_round(round);
  algorithm.local_phase(round);
  timeline.mixing();
  for (int s = 0; s < algorithm.relay_steps(); ++s) algorithm.relay_phase(round, s);
  algorithm.mix_phase(round);
  timeline.end_round();
}

/// Seconds since `t0`.
double since(Clock::time_point t0);

/// Puts the transport's sealing and opening of TLS records since the last call on the
/// timeline's encrypt track (its clock: seconds since `t0`).
void trace_crypto(Transport& transport, Timeline& timeline, Clock::time_point t0);

}  // namespace gossip::peer_parts
