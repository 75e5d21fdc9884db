// monitor/convergence_monitor.cpp: the watch every real peer keeps on its neighbours. It reports
// each change in the set of dead peers with the live graph's connectivity and a log message.
#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

std::optional<MonitorChange> ConvergenceMonitor::check(const std::vector<int>& dead) {
  if (dead == dead_) return std::nullopt;
  dead_ = dead;
  LiveGraph live = live_graph(*topology_, dead);
  MonitorChange change;
  change.dead = dead;
  change.connected = live.connected;
  change.components = std::move(live.components);
  change.message =
      dead.empty() ? "all neighbours are back"
                   : cat("neighbours lost: ", format_peers(dead), "; live graph ",
                         change.connected ? std::string("still connected")
                                          : cat("DISCONNECTED, components ",
                                                format_components(change.components)));
  connected_ = change.connected;
  return change;
}

}  // namespace gossip
