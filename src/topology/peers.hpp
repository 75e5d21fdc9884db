/// topology/peers: the optional `peers:` list of a topology file (host:port per peer).
#pragma once
#if !defined(GOSSIP_ROOM_TOPOLOGY)
#error "src/topology/peers.hpp belongs to room topology, which this room does not use (see the room table in meson.build)"
#endif

#include <string>
#include <vector>

#include "gossip/yaml.hpp"

namespace gossip::topo {

/// `peers:` as a list of "host:port" strings (peer i is entry i) or of {id:, address:} maps.
/// Every peer must get exactly one address and no two peers the same one. Returns n strings.
std::vector<std::string> parse_peers(const yaml::Document& in, const yaml::Node& peers, int n);

}  // namespace gossip::topo
