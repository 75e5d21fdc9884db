// peer/net_setup.hpp: a peer's network settings: the handshake's gossip settings and its NetConfig.
#pragma once
#if !defined(GOSSIP_ROOM_PEER)
#error "src/peer/net_setup.hpp belongs to room peer, which this room does not use (see the room table in meson.build)"
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
#include "src/peer/members.hpp"

namespace gossip::peer_parts {

/// The gossip settings the handshake compares between peers (gossip.algorithm, and for an
/// algorithm that compresses its compressor, consensus step and gossip steps; fields that do not
/// apply stay 0 or "").
GossipSettings gossip_settings(const GossipConfig& g);

/// This peer's network settings: addresses, neighbours, handshake (with `model` as the model
/// fingerprint and `num_params` floats), TLS, timeouts, log lines.
/// net.relays as {rank, address} ({-1, "host:port"} for a relay named by address; a rank's
/// address from `addresses`); InputError for a rank outside the run.
std::vector<std::pair<int, std::string>> named_relays(const RunConfig& config,
                                                      const std::vector<std::string>& addresses);

NetConfig net_config(const RunConfig& config, const Topology& topology, const PeerOptions& opt,
                     const std::string& model, std::int64_t num_params);

}  // namespace gossip::peer_parts
