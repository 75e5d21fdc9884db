// monitor/watch.cpp: MembershipWatch, one peer's membership and live-graph changes as events,
// shared by `gossip peer`, the Python module's peers and `gossip sim`'s virtual peers.
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
    say(cat("membership: peer ", c.peer, " ", c.event, " (incarnation ", c.incarnation, ")"));
    out.push_back(MemberEvent{self_, round, seconds, c.event, c.peer,
                              static_cast<std::int64_t>(c.incarnation), exchange.dead_peers(),
                              {}, {}});
  }
  for (const TransportAlert& a : exchange.take_alerts()) {
    say(a.message);
    out.push_back(MemberEvent{self_, round, seconds, a.kind, a.peer, 0, exchange.dead_peers(),
                              {}, {}});
  }
  const auto change = monitor_.check(exchange.dead_peers());
  if (!change) return out;
  say(change->message);
  out.push_back(AlertEvent{self_, round, change->connected, change->dead, change->message});
  if (!change->event.empty()) {
    partitioned_ = change->event == "partition";
    out.push_back(MemberEvent{self_, round, seconds, change->event, -1, 0, change->dead,
                              change->components, change->my_component});
  }
  return out;
}

}  // namespace gossip
