/// peer_setup: what `gossip peer` makes of its arguments (config, overrides, topology, rank
/// from the launcher, hosts, TLS folder), shared with the Python module so that a Python peer
/// started by `gossip run --exec`, mpirun, srun or Kubernetes finds everything exactly as
/// `gossip peer` does.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "gossip/peer_setup.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
#endif

#include <optional>
#include <string>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip {

struct PeerSetup {
  bool help = false;  // --help was asked for: nothing else is filled in
  RunConfig config;
  std::optional<Topology> topology;
  PeerOptions options;
};

/// Parses `gossip peer`'s arguments (argv[0] is the subcommand name), loads and checks the
/// config and topology and finds the rank. Throws InputError naming what is wrong.
PeerSetup peer_setup(int argc, char** argv);
/// The same from the arguments after the subcommand name.
PeerSetup peer_setup(const std::vector<std::string>& arguments);

}  // namespace gossip
