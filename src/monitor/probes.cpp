// monitor/probes.cpp: SWIM's indirect probes (ping-req and their acks), flooded a few hops along
// the membership views, so that a silent link is told apart from a dead peer.
#include <algorithm>
#include <limits>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();
constexpr std::size_t kOpenRequests = 64;  // our own requests whose acks are still accepted

}  // namespace

Prober::Prober(int peers, int self)
    : self_(self), peers_(static_cast<std::uint32_t>(peers)) {
  GOSSIP_CHECK_MSG(self >= 0 && self < peers, "prober: peer ", self, " is not in 0..", peers - 1);
}

bool Prober::first_time(const Probe& p) {
  const Key key{p.origin, p.target, p.nonce, static_cast<std::uint8_t>(p.kind)};
  if (!seen_.insert(key).second) return false;
  seen_order_.push_back(key);
  if (seen_order_.size() > kProbeMemory) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  return true;
}

void Prober::queue(const Probe& p) {
  if (outgoing_.size() >= kMaxProbesPerView) {
    ++dropped_;
    return;
  }
  outgoing_.push_back(p);
}

void Prober::ask(int target, double now, double interval) {
  if (target == self_ || target < 0 || target >= static_cast<int>(peers_)) return;
  const auto [at, fresh] = asked_at_.try_emplace(target, kNever);
  (void)fresh;
  if (now - at->second < interval) return;
  at->second = now;
  const Probe p{ProbeKind::kRequest, kProbeTtl, static_cast<std::uint32_t>(self_),
                static_cast<std::uint32_t>(target), next_nonce_++};
  first_time(p);  // our own request, coming back, is not passed on again
  mine_.emplace_back(p.nonce, target);
  if (mine_.size() > kOpenRequests) mine_.erase(mine_.begin());
  ++asked_;
  queue(p);
}

void Prober::receive(std::span<const Probe> probes, double now,
                     const std::function<bool(int)>& hears) {
  const std::uint32_t n = peers_;
  for (const Probe& p : probes) {
    if (p.origin >= n || p.target >= n || p.ttl == 0 || !first_time(p)) continue;
    const auto self = static_cast<std::uint32_t>(self_);
    if (p.kind == ProbeKind::kAck) {
      if (p.origin == self) {
        // Only an answer to a request of ours, about the peer it was about, counts.
        const bool ours = std::any_of(mine_.begin(), mine_.end(), [&](const auto& m) {
          return m.first == p.nonce && m.second == static_cast<int>(p.target);
        });
        if (ours) vouched_at_[static_cast<int>(p.target)] = now;
      } else if (p.ttl > 1) {
        Probe on = p;
        --on.ttl;
        queue(on);
      }
      continue;
    }
    if (p.origin == self) continue;
    // Asked about ourselves: the request reached us, so we are alive; say so.
    if (p.target == self || hears(static_cast<int>(p.target))) {
      ++answered_;
      queue(Probe{ProbeKind::kAck, kProbeTtl, p.origin, p.target, p.nonce});
    } else if (p.ttl > 1) {
      Probe on = p;
      --on.ttl;
      queue(on);
    }
  }
}

}  // namespace gossip
