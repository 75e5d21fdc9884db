/// monitor: how far the peers are from agreeing, and whether the live graph still connects them.
/// Used by the simulator and by every real peer's convergence monitor. Depends on topology only;
/// pure functions, safe to call from any thread.
#pragma once
#if !defined(GOSSIP_ROOM_MONITOR)
#error "gossip/monitor.hpp belongs to room monitor, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossip/topology.hpp"

namespace gossip {

/// Consensus distance (1/n) sum_i ||x_i - xbar||^2 over n equally long buffers, accumulated in
/// double in a fixed order (the same result whatever calls it). 0 for n < 2.
double consensus_distance(std::span<const std::span<const float>> buffers);

/// xbar = (1/n) sum_i x_i, accumulated in double (peer order ascending), rounded to float.
void average_params(std::span<const std::span<const float>> buffers, std::span<float> out);

/// The live graph: the topology's arcs over one whole period among peers that are not dead.
struct LiveGraph {
  bool connected = false;                    // strongly, for directed graphs; false if < 1 alive
  std::vector<std::vector<int>> components;  // of the alive peers (weakly connected parts for
                                             // directed graphs), each ascending, by smallest id
  std::vector<int> alive;                    // ascending
};

/// Connectivity of the topology (union of the rounds of one period) without the `dead` peers.
/// A directed graph counts as connected only when every alive peer reaches every other.
LiveGraph live_graph(const Topology& topology, std::span<const int> dead = {});

/// A change in the set of dead neighbours, as the convergence monitor reports it.
struct MonitorChange {
  std::vector<int> dead;                     // ascending
  bool connected = true;                     // of the live graph without the dead peers
  std::vector<std::vector<int>> components;  // of the live graph
  std::string message;  // "neighbours lost: 2; live graph still connected", for logs
};

/// A peer's convergence monitor: given the dead peers after each round, it reports when that
/// set changes and whether the live graph still connects the others. Not thread-safe.
class ConvergenceMonitor {
 public:
  /// `topology` must outlive the monitor.
  explicit ConvergenceMonitor(const Topology& topology) : topology_(&topology) {}

  /// The change since the last call (at first, since "nobody dead"); nullopt when none.
  std::optional<MonitorChange> check(const std::vector<int>& dead);
  /// Whether the live graph was connected at the last change (true until one).
  bool connected() const { return connected_; }

 private:
  const Topology* topology_;
  std::vector<int> dead_;
  bool connected_ = true;
};

/// "1,4,7": peer ids for log lines.
std::string format_peers(std::span<const int> peers);
/// "{0,1} {2,3}": components for log lines and error messages.
std::string format_components(const std::vector<std::vector<int>>& components);

}  // namespace gossip
