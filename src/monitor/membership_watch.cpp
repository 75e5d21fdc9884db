// monitor/membership_watch.cpp: MembershipWatch, one peer's membership and live-graph changes as
// events, shared by `gossip peer`, the Python module's peers and `gossip sim`'s virtual peers.
#include <algorithm>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

std::vector<PeerEvent> MembershipWatch::operator()(MonitoredExchange& exchange,
                                                   std::int64_t round, double seconds,
                                                   std::vector<std::string>* messages) {
  std::vector<PeerEvent> out;
  auto say = [&](std::string line) {
    if (messages) messages->push_back(std::move(line));
  };
  for (const MemberChange& c : exchange.membership().take_changes()) {
    say(cat("membership: peer ", c.peer, " ", event_name(c.event), " (incarnation ", c.incarnation, ")"));
    out.push_back(MemberEvent{self_, round, seconds, c.event, c.peer,
                              static_cast<std::int64_t>(c.incarnation), exchange.dead_peers(),
                              {}, {}});
  }
  // The transport's alerts, read from the transport itself (none without it: set_link_reports).
  const std::vector<TransportAlert> alerts =
      reports_ ? reports_->take_alerts() : std::vector<TransportAlert>{};
  for (const TransportAlert& a : alerts) {
    say(a.message);
    out.push_back(MemberEvent{self_, round, seconds, a.kind, a.peer, 0, exchange.dead_peers(),
                              {}, {}});
  }
  for (const auto& [peer, event] : std::exchange(pending_, {})) {
    const Record& r = mixes_[peer];
    const auto count = std::count(r.flags.begin(), r.flags.end(), true);
    if (event == MemberEventKind::kRefusedParams)
      say(cat("refused peer ", peer, "'s parameters: NaN or Inf; ", r.refused,
              r.refused == 1 ? " message" : " messages", " refused so far, left out of mixing"));
    else
      say(cat(event == MemberEventKind::kByzantineSuspect ? "suspected of lying: peer "
                                                          : "no longer suspected of lying: peer ",
              peer, " (its messages clipped, trimmed away or refused in ",
              count, " of the last ", r.flags.size(), " rounds it was heard)"));
    out.push_back(MemberEvent{self_, round, seconds, event, peer, 0, exchange.dead_peers(),
                              {}, {}});
    if (event != MemberEventKind::kByzantineSuspect || !cut_liars_) continue;
    exchange.cut(peer);
    say(cat("cut peer ", peer, ": no longer mixed with, and the live graph is taken without it "
            "(gossip.on_byzantine: cut)"));
    out.push_back(MemberEvent{self_, round, seconds, MemberEventKind::kByzantineCut, peer, 0,
                              exchange.dead_peers(), {}, {}});
  }
  for (PeerEvent& e : link_events(round, seconds, false, messages))
    out.push_back(std::move(e));
  const auto change = monitor_.check(exchange.dead_peers(), exchange.cut_peers(), round,
                                     unlinked(), exchange.membership().unheard());
  if (!change) return out;
  say(change->message);
  out.push_back(AlertEvent{self_, round, change->connected, change->dead, change->message});
  if (change->event) {
    partitioned_ = change->event == MemberEventKind::kPartition;
    out.push_back(MemberEvent{self_, round, seconds, *change->event, -1, 0, change->dead,
                              change->components, change->my_component});
  }
  return out;
}

std::vector<PeerEvent> MembershipWatch::link_events(std::int64_t round, double seconds, bool end,
                                                    std::vector<std::string>* messages) {
  std::vector<PeerEvent> out;
  if (!reports_) return out;
  const std::vector<LinkStatus> links = reports_->links();
  for (const LinkStatus& l : links) {
    const auto it = links_.find(l.peer);
    const std::optional<LinkChange> last =
        it == links_.end() ? std::nullopt : std::optional<LinkChange>(it->second);
    const bool absent = last && link_absent(*last);
    std::optional<LinkChange> change;
    // (A link is given up on at the end of the start's wait at the latest, before round 1.)
    if (!l.formed && !absent && l.given_up)
      change = LinkChange::kNeverFormed;
    else if (l.up && last == LinkChange::kNeverFormed)
      change = LinkChange::kFormed;
    else if (l.up && last == LinkChange::kLost)
      change = LinkChange::kBack;
    else if (l.formed && !l.up && !l.left && !absent &&
             (l.given_up || (end && l.down_s >= kLostAtEndS)))
      change = LinkChange::kLost;
    if (!change) continue;
    links_[l.peer] = *change;
    const std::string why = link_absent(*change) ? (l.why.empty() ? std::string("no reason known") : l.why)
                                 : std::string();
    if (messages)
      messages->push_back(cat("link to peer ", l.peer, " ", link_change_name(*change),
                              why.empty() ? std::string() : cat(": ", why)));
    // A link that never formed is absent from the start.
    const std::int64_t from = *change == LinkChange::kNeverFormed ? 0 : round;
    out.push_back(LinkEvent{self_, from, seconds, *change, l.peer, l.formed_s, why});
  }
  for (const LinkStatus& l : links) {  // how each link formed, when that is new
    if (!l.up || l.path == LinkPath::kNone) continue;
    auto way = std::make_tuple(l.path, l.dialler, l.relay_address);
    if (const auto it = paths_.find(l.peer); it != paths_.end() && it->second == way) continue;
    paths_[l.peer] = std::move(way);
    const std::string path = describe_path(l);
    if (messages) messages->push_back(cat("link to peer ", l.peer, ": ", path));
    out.push_back(LinkEvent{self_, round, seconds, LinkChange::kPath, l.peer, l.formed_s, path});
  }
  if (const ReachabilityReport r = reports_->reachability(); r.settled && !reach_said_) {
    reach_said_ = true;
    const std::string what = cat(reachability_name(r.state), ": ", r.how);
    if (messages) messages->push_back(cat("reachability: ", what));
    out.push_back(LinkEvent{self_, round, seconds, LinkChange::kReachability, self_, -1, what});
  }
  return out;
}

std::vector<PeerEvent> MembershipWatch::end_links(std::int64_t round, double seconds,
                                                  std::vector<std::string>* messages) {
  return link_events(round, seconds, true, messages);
}

std::vector<int> MembershipWatch::unlinked() const {
  std::vector<int> out;
  for (const auto& [peer, change] : links_)
    if (change == LinkChange::kNeverFormed) out.push_back(peer);
  return out;
}

void MembershipWatch::observe_mix(std::span<const int> flagged, std::span<const int> heard,
                                  std::span<const int> nonfinite) {
  for (int peer : nonfinite) {
    const std::int64_t count = ++mixes_[peer].refused;
    if (refusal_events_ && (count & (count - 1)) == 0)  // 1st, 2nd, 4th, ...
      pending_.emplace_back(peer, MemberEventKind::kRefusedParams);
  }
  for (int peer : heard) {
    Record& r = mixes_[peer];
    r.flags.push_back(std::find(flagged.begin(), flagged.end(), peer) != flagged.end());
    if (r.flags.size() > static_cast<std::size_t>(kSuspectWindow)) r.flags.erase(r.flags.begin());
    const auto count = std::count(r.flags.begin(), r.flags.end(), true);
    if (!r.suspect && count >= kSuspectFlags) {
      r.suspect = true;
      pending_.emplace_back(peer, MemberEventKind::kByzantineSuspect);
    } else if (r.suspect && r.flags.size() == static_cast<std::size_t>(kSuspectWindow) &&
               4 * count <= kSuspectWindow) {
      r.suspect = false;
      pending_.emplace_back(peer, MemberEventKind::kByzantineCleared);
    }
  }
}

std::vector<std::pair<int, std::int64_t>> MembershipWatch::refused() const {
  std::vector<std::pair<int, std::int64_t>> out;
  for (const auto& [peer, r] : mixes_)
    if (r.refused > 0) out.emplace_back(peer, r.refused);
  return out;
}

std::vector<int> MembershipWatch::byzantine_suspects() const {
  std::vector<int> out;
  for (const auto& [peer, r] : mixes_)
    if (r.suspect) out.push_back(peer);
  return out;
}

}  // namespace gossip
