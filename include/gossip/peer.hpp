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
#include "gossip/net.hpp"
#include "gossip/topology.hpp"

namespace gossip {

struct PeerOptions {
  int rank = 0;
  std::string out_dir;      // DIR/peers/R style folder for this peer's files
  bool events = false;      // print "@gossip ..." event lines on stdout for the launcher
  bool snapshots = false;   // write params-ROUND.bin at each evaluation (the launcher reads them)
  std::string tls_dir;      // TLS credentials in `gossip keys init` layout; overrides net.tls
};

/// This peer's TLS settings: off when net.tls is off; else the files in `tls_dir` when given,
/// else net.tls's files with "{rank}" replaced by `rank`. Throws InputError, saying how to make
/// credentials, when TLS is on and neither names any.
TlsConfig peer_tls(const RunConfig& config, const std::string& tls_dir, int rank);

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
