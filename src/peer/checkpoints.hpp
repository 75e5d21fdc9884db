// peer/checkpoints.hpp: resuming a peer: the checkpoint fingerprint and reader, the algorithm's
// state restored, and catching up with neighbours that are rounds ahead.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/checkpoints.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
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

/// What a checkpoint must agree with to be resumed: the graph, the buffer's size, the seed, the
/// algorithm and its period, and the rounds planned (as run_peer's checkpoints say).
std::uint64_t checkpoint_fingerprint(const RunConfig& config, const Topology& topology,
                                     std::int64_t num_params, std::int64_t rounds);

/// Checkpoints each peer keeps (the newest): a peer may be a checkpoint ahead of another.
inline constexpr std::size_t kCheckpointsKept = 3;

/// The checkpoint of `round` in `dir` for --resume-round: rank `rank`'s, of this run (its
/// fingerprint and length `rounds`). Throws InputError naming the file and what disagrees.
Checkpoint read_resume_checkpoint(const std::string& dir, std::int64_t round, int rank,
                                  std::uint64_t fingerprint, std::int64_t rounds);

/// Restores the gossip algorithm's state (push-sum weight, losses, CHOCO's copies) from `c`,
/// read from `path`; a state that does not fit the algorithm is an InputError naming the file.
void restore_algorithm(Algorithm& algorithm, const Checkpoint& c, const std::string& path);

/// A peer rounds behind its neighbours (restarted, or paused) catches up: it takes the newest
/// parameters a neighbour sent (into `params` via `upload`) and carries on from that round.
/// Returns the round to run next (`r` when there is nothing to catch up with). `neighbours`:
/// all_neighbours of its rank (kept by the caller, which knows when the graph changes).
std::int64_t catch_up(std::int64_t r, const Topology& topology, int rank,
                      std::span<const int> neighbours, MonitoredExchange& exchange,
                      Algorithm& algorithm,
                      const std::function<void(std::span<const float>)>& upload);

}  // namespace gossip::peer_parts
