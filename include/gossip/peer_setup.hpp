/// peer_setup: what `gossip peer` makes of its arguments (config, overrides, topology, rank
/// from the launcher, hosts, TLS folder), shared with the Python module so that a Python peer
/// started by `gossip run --exec`, mpirun, srun or Kubernetes finds everything exactly as
/// `gossip peer` does.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "gossip/peer_setup.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gossip/args.hpp"
#include "gossip/config.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip {

/// What a peer is started with: `gossip peer`'s options as typed values. The CLI parses its
/// arguments into one (peer_arguments); Python's gossip.Peer fills one in directly.
struct PeerArguments {
  std::string config;  // the run config (CONFIG)
  /// The run config's overrides, by option name without dashes ("epochs", "algorithm",
  /// "metrics-port", ...: gossip/overrides.hpp), each value as it would be written after it.
  std::map<std::string, std::string> overrides;
  std::optional<int> rank;  // else from the launcher (GOSSIP_RANK, mpirun, srun, Kubernetes)
  /// --ranks A-B: several consecutive ranks in this one process, one thread each (gossip run's
  /// train.peers_per_process); `gossip peer` alone takes it, not a Python peer.
  std::optional<std::string> ranks;
  std::string out = "runs/peer";
  std::optional<std::string> hosts;    // a hostfile (when the topology has no addresses)
  std::optional<std::string> tls_dir;  // the run's credentials folder
  std::optional<std::string> join;     // HOST:PORT[,HOST:PORT...] of live members (elastic)
  std::optional<std::string> advertise;  // HOST:PORT this peer announces (net.advertise)
  std::optional<std::int64_t> resume_round, until_round, leave_at_round;
  std::optional<int> events_fd;        // event lines to this descriptor
  bool events = false;                 // event lines on stdout
  bool rejoin = false;                 // take the running network's round (a restarted peer)
  std::optional<std::int64_t> rejoin_round;  // with rejoin: the network's round at the restart
};

/// `gossip peer`'s arguments after the subcommand name (as `gossip run --exec` passes them in
/// GOSSIP_PEER_ARGS) as typed values; nullopt when they ask for --help. Throws InputError
/// naming an unknown option or a value that is not a number where one is needed.
std::optional<PeerArguments> parse_peer_arguments(const std::vector<std::string>& arguments);

struct PeerSetup {
  bool help = false;  // --help was asked for: nothing else is filled in
  RunConfig config;
  std::optional<Topology> topology;
  PeerOptions options;
  /// Where the rank and the addresses came from ("rank 0 (from --rank), ports from ..."), for
  /// the caller's first line: a peer's names its files, the doctor's what it checks from.
  std::string origin;
  /// --ranks A-B: the options of each of those ranks, A first (options is A's); rank A + i
  /// writes its event lines to --events-fd + i. Empty without --ranks.
  std::vector<PeerOptions> group;
};

/// Loads and checks the config (with its overrides) and topology and finds the rank: what
/// `gossip peer` and gossip.Peer make of their arguments. Throws InputError naming what is
/// wrong.
PeerSetup peer_setup(const PeerArguments& arguments);
/// The same from `gossip peer`'s argv (argv[0] is the subcommand name); `help` set alone when
/// it asks for --help.
PeerSetup peer_setup(int argc, char** argv);

}  // namespace gossip
