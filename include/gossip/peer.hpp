/// peer: one real peer process — its trainer, its NetExchange, the gossip algorithm (the same
/// objects the simulator runs) and its convergence monitor. `gossip peer` runs it directly (under
/// Slurm, mpirun, Kubernetes); `gossip run` starts one per rank and reads its events.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "gossip/peer.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <optional>
#include <string>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/topology.hpp"

namespace gossip {

struct PeerOptions {
  int rank = 0;
  std::string out_dir;      // DIR/peers/R style folder for this peer's files
  bool events = false;      // print "@gossip ..." event lines on stdout for the launcher
  bool snapshots = false;   // write params-ROUND.bin at each evaluation (the launcher reads them)
  std::int64_t resume_round = -1;  // >= 0: continue from DIR/checkpoint-ROUND.ckpt
  std::int64_t until_round = 0;    // > 0: stop after this round, with a checkpoint
};

/// Where this process's rank comes from, in order: `cli` (--rank), GOSSIP_RANK, SLURM_PROCID,
/// OMPI_COMM_WORLD_RANK, PMI_RANK, else the trailing number of the host name (a Kubernetes
/// StatefulSet pod "gossip-3" is rank 3). `source` says which one was used.
std::optional<int> resolve_rank(std::optional<int> cli, std::string* source = nullptr);

/// "host:port" of every rank: the topology's `peers:` addresses when it has them, else
/// net.host:(net.base_port + rank).
std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology);

/// Runs one peer to the end of training. Returns the process exit code; throws on bad input.
int run_peer(const RunConfig& config, const Topology& topology, const PeerOptions& options);

}  // namespace gossip
