/// monitor: how far the peers are from agreeing, and whether the live graph still connects them.
/// Used by the simulator and by every real peer's convergence monitor. Depends on topology only;
/// pure functions, safe to call from any thread.
#pragma once
#if !defined(GOSSIP_ROOM_MONITOR)
#error "gossip/monitor.hpp belongs to room monitor, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
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

/// "1,4,7": peer ids for log lines.
std::string format_peers(std::span<const int> peers);
/// "{0,1} {2,3}": components for log lines and error messages.
std::string format_components(const std::vector<std::vector<int>>& components);

}  // namespace gossip
