// peer/members.hpp: an elastic run's member windows and the neighbours a peer talks to over its
// window.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/members.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
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
#include "src/peer/trace.hpp"

namespace gossip::peer_parts {

/// The rounds `rank` is a member for: [from, until). Everyone's is [0, max) without epochs; in
/// an elastic run it starts where its first epoch starts and ends where the next epoch without
/// it starts (max when none does). `first_epoch` is the epoch of `from`.
struct MemberWindow {
  std::int64_t from = 0;
  std::int64_t until = std::numeric_limits<std::int64_t>::max();
  std::size_t first_epoch = 0;
  bool joins() const { return from > 0; }
};
/// Throws InputError when `rank` is never a member.
MemberWindow member_window(const Topology& topology, int rank);

/// Every peer this one talks to in any round of the period (in- and out-neighbours), and in an
/// elastic run in any epoch of its member window.
std::vector<int> all_neighbours(const Topology& topology, int rank);
/// Those of all_neighbours that are not neighbours in the first epoch of its window: they join
/// later, and the start does not wait for them (NetConfig::later).
std::vector<int> later_neighbours(const Topology& topology, int rank);

}  // namespace gossip::peer_parts
