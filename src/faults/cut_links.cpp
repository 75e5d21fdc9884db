// faults/cut_links.cpp: CutLinks, the fault schedule's cuts as a decorator of both planes (the
// Exchange and the membership channel). It only narrows what passes between MonitoredExchange
// and the transport; the monitor above finds a cut link silent by the same evidence it would
// find a broken network link silent.
#include <algorithm>

#include "gossip/faults.hpp"

namespace gossip {

CutLinks::CutLinks(Exchange& inner, MembershipChannel& channel, std::span<const Fault> faults)
    : ForwardingExchange(inner), ForwardingMembership(channel) {
  for (const Fault& f : faults)
    if (f.action == FaultAction::kCut) cuts_.push_back(f);
}

void CutLinks::at(std::int64_t tag) {
  const std::int64_t round = tag / tags_per_round_;
  if (round == round_) return;
  round_ = round;
  cut_ = cut_peers(cuts_, inner_->rank(), round);
}

bool CutLinks::is_cut(int peer) const {
  return std::binary_search(cut_.begin(), cut_.end(), peer);
}

std::vector<int> CutLinks::linked(std::span<const int> peers) const {
  std::vector<int> out;
  out.reserve(peers.size());
  for (int p : peers)
    if (!is_cut(p)) out.push_back(p);
  return out;
}

void CutLinks::publish(std::int64_t round, std::span<const float> params, double weight,
                       std::span<const int> to) {
  at(round);
  inner_->publish(round, params, weight, linked(to));
}

void CutLinks::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                              std::span<const int> to) {
  at(round);
  inner_->publish_packet(round, packet, linked(to));
}

void CutLinks::send_view(std::int64_t round, std::span<const Member> view,
                         std::span<const int> to, std::span<const Probe> probes) {
  at(round);
  channel_->send_view(round, view, linked(to), probes);
}

std::vector<Inbox> CutLinks::collect(std::int64_t round, std::span<const int> from,
                                     const CollectOptions& options) {
  at(round);
  return inner_->collect(round, linked(from), options);
}

std::vector<PeerView> CutLinks::take_views() {
  std::vector<PeerView> views = channel_->take_views();
  std::erase_if(views, [&](const PeerView& v) { return is_cut(v.peer); });
  return views;
}

std::vector<int> CutLinks::excused_peers() const { return linked(inner_->excused_peers()); }

std::optional<Inbox> CutLinks::newest(std::span<const int> from) {
  return inner_->newest(linked(from));
}

std::optional<std::vector<int>> CutLinks::heard_within(double seconds) const {
  auto heard = channel_->heard_within(seconds);
  if (heard) *heard = linked(*heard);
  return heard;
}

}  // namespace gossip
