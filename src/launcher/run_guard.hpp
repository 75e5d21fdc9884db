// launcher/run_guard.hpp: what `gossip run` checks before it starts anything — that this machine
// can hold the peers it would start, and that a resumed run is the run that was started (its
// identity: topology, model, data, seed, plan). Private to the room.
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/run_guard.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/topology.hpp"

namespace gossip::launch_parts {

/// What one machine offers peers: its cores and the memory it has available.
struct MachineSize {
  int cores = 1;
  std::uint64_t available_bytes = 0;  // MemAvailable; 0 when unknown (then not checked)
};
/// This machine's (the cores this process may run on, /proc/meminfo's MemAvailable).
MachineSize this_machine();

/// Peer processes a core may carry before a run is refused (each is a process with its own
/// threads; past this the machine only switches between them).
inline constexpr int kProcessesPerCore = 32;
/// What a peer process needs beside its model's buffers (libraries, threads, the test set's
/// mapping), measured on the quickstart: about 64 MB a peer with a 0.9 MB model.
inline constexpr std::uint64_t kProcessBaseBytes = 48ull << 20;

/// The memory `peers` peers in `processes` processes need: each process's base, and per peer
/// its model's buffers (parameters, gradients, optimizer state, its message and one received
/// per in-neighbour, as float32) for a model of `params` values and `degree` in-neighbours.
std::uint64_t peers_memory_bytes(int peers, int processes, std::int64_t params, int degree);

/// Throws InputError (exit 2) naming the numbers and the ways out (gossip sim, several machines,
/// --peers-per-process, --force) when the peers of `topology` do not fit `machine`: more
/// processes than kProcessesPerCore a core, or more memory than it has available.
void check_machine_fits(const RunConfig& config, const Topology& topology, std::int64_t params,
                        const MachineSize& machine);

/// A run's identity: what a resumed run must find unchanged, as (config key, value) pairs.
std::vector<std::pair<std::string, std::string>> run_identity(const RunConfig& config,
                                                              const Topology& topology);
/// A fresh run writes its identity to DIR/run-identity; a resumed one compares its own with it
/// and throws InputError (exit 2) naming the first key that changed, both values and the way
/// out, before any peer starts. A folder without the file (an older run) is not checked here
/// (its peers still refuse checkpoints of another run).
void keep_run_identity(const RunConfig& config, const Topology& topology,
                       const std::string& out_dir, bool resume);

}  // namespace gossip::launch_parts
