// monitor/convergence_monitor.cpp: the watch every peer keeps on the live graph. It reports each
// change in the set of dead peers with the live graph's connectivity, its components, and
// whether that change is a partition or the healing of one.
#include <algorithm>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

namespace {

/// The change in words: the members (an elastic run), the dead, the cut, the links that never
/// formed, the peers never heard from, and the live graph.
std::string describe(const MonitorChange& change, const std::vector<int>& unlinked,
                     const std::vector<int>& missing, const Topology& topology,
                     std::int64_t round, std::size_t epoch) {
  const std::vector<int>& dead = change.dead;
  const std::vector<int>& cut = change.cut;
  const std::string graph =
      change.connected ? std::string("live graph still connected")
                       : cat("live graph DISCONNECTED, components ",
                             format_components(change.components),
                             change.my_component.empty()
                                 ? std::string()
                                 : cat(" (this peer in {", format_peers(change.my_component),
                                       "}): the components train separate models"));
  const std::string cut_part =
      cat(cut.empty() ? std::string() : cat("peers cut for lying: ", format_peers(cut), "; "),
          unlinked.empty() ? std::string()
                           : cat("links never formed: to ", format_peers(unlinked), "; "),
          missing.empty() ? std::string()
                          : cat("never heard from by anyone (not started?): ",
                                format_peers(missing), "; "));
  const std::string members =
      topology.epochs().empty()
          ? std::string()
          : cat(topology.members(round).size(), " members from round ",
                topology.epochs()[epoch].from, "; ");
  if (dead.empty() && cut.empty() && unlinked.empty())
    return cat(members, change.connected ? "no peer dead; live graph connected" : graph);
  return cat(members, dead.empty() ? std::string() : cat("peers dead: ", format_peers(dead), "; "),
             cut_part, graph);
}

}  // namespace

std::optional<MonitorChange> ConvergenceMonitor::check(const std::vector<int>& dead,
                                                       const std::vector<int>& cut,
                                                       std::int64_t round,
                                                       const std::vector<int>& unlinked,
                                                       const std::vector<int>& unheard) {
  const std::size_t epoch = topology_->epoch_index(round);
  // Only the members of this epoch count as missing (an elastic run's later joiners are not).
  std::vector<int> missing;
  const std::vector<int> current =
      topology_->epochs().empty() ? std::vector<int>{} : topology_->members(round);
  for (int p : unheard)
    if (current.empty() || std::binary_search(current.begin(), current.end(), p))
      missing.push_back(p);
  if (dead == dead_ && cut == cut_ && unlinked == unlinked_ && missing == unheard_ &&
      epoch == epoch_)
    return std::nullopt;
  epoch_ = epoch;
  dead_ = dead;
  cut_ = cut;
  unlinked_ = unlinked;
  unheard_ = missing;
  std::vector<std::pair<int, int>> absent;
  for (int p : unlinked) absent.emplace_back(self_, p);
  std::vector<int> gone = dead;
  gone.insert(gone.end(), cut.begin(), cut.end());
  std::sort(gone.begin(), gone.end());
  gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
  LiveGraph live = live_graph(*topology_, gone, round, absent);
  MonitorChange change;
  change.dead = dead;
  change.cut = cut;
  change.connected = live.connected && missing.empty();
  change.components = std::move(live.components);
  for (int p : missing) change.components.push_back({p});  // unreachable from everyone
  for (const auto& c : change.components)
    if (std::find(c.begin(), c.end(), self_) != c.end()) change.my_component = c;
  const bool was_connected = connected_;
  if (!change.connected && (was_connected || change.components != components_))
    change.event = MemberEventKind::kPartition;
  else if (change.connected && !was_connected)
    change.event = MemberEventKind::kHealed;
  change.message = describe(change, unlinked, missing, *topology_, round, epoch);
  connected_ = change.connected;
  components_ = change.components;
  return change;
}

}  // namespace gossip
