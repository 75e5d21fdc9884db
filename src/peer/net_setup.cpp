// peer/net_setup.cpp: a peer's network settings: the handshake's gossip settings and its NetConfig
// (net_setup.hpp).
#include "src/peer/net_setup.hpp"


#include "gossip/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"

namespace gossip::peer_parts {

GossipSettings gossip_settings(const GossipConfig& g) {
  GossipSettings s;
  s.algorithm = algorithm_name(g.algorithm);
  // The compressor of packets sent instead of parameters (choco's, or local_sgd's outer one);
  // the rest is choco's: 0 and "" elsewhere.
  if (outer_packets(g) && g.outer.fragments > 1)
    s.fragments = static_cast<std::uint32_t>(g.outer.fragments);
  const CompressConfig* compress = packet_compressor(g);
  if (compress == nullptr) return s;
  s.compressor = compress_kind_name(compress->kind);
  if (compress->sparse()) s.fraction = compress->fraction;
  if (traits(compress->kind).parameter == CompressParameter::kBits)
    s.bits = static_cast<std::uint32_t>(compress->bits);
  if (!traits(g.algorithm).compresses) return s;
  const ChocoConfig& c = g.choco;
  s.consensus_step = consensus_step(c);
  s.gossip_steps = static_cast<std::uint32_t>(c.gossip_steps);
  return s;
}

namespace {

/// Every rank's address as the run lists it, this peer's as it announces it (net.advertise),
/// and whether the others were told it; refuses what cannot work (nobody listed, learned
/// addresses without TLS).
void set_addresses(NetConfig& net, const RunConfig& config, const Topology& topology,
                   const PeerOptions& opt) {
  const int rank = opt.rank;
  net.addresses = peer_addresses(config, topology, opt.launch);
  const std::string listed = net.addresses[rank];
  net.addresses[rank] = announced_address(config, topology, opt.launch, rank);
  net.listed = net.addresses[rank] == listed;
  // A peer nobody was told of must be able to reach someone it was told of.
  if (topology.n() > 1 && listed.empty() && opt.join_contacts.empty() &&
      std::all_of(net.addresses.begin(), net.addresses.end(),
                  [&](const std::string& a) { return a.empty() || a == net.addresses[rank]; }))
    throw InputError(cat(config.gossip.topology, ": no member's address is listed (every peers: "
                         "entry is learned): list at least one, which the others ask for the "
                         "members' signed addresses"));
  if (!net.tls.enabled)
    for (int p = 0; p < topology.n(); ++p)
      if (net.addresses[p].empty() || (p == rank && !net.listed))
        throw InputError(cat(p == rank && !config.net.advertise.empty()
                                 ? cat(config.where("net.advertise"), ": peer ", p,
                                       " announces ", net.addresses[p], ", not its listed ",
                                       listed.empty() ? std::string("(learned)") : listed)
                                 : cat(config.gossip.topology, ": peer ", p,
                                       "'s address is learned"),
                             ": members learn an address only from a record signed by the "
                             "peer's TLS certificate, and TLS is off (net.tls: off); ",
                             opt.launch.torchrun
                                 ? "under torchrun on several nodes the ranks other than 0 are "
                                   "learned: give every node the run's credentials (gossip keys "
                                   "init DIR, then GOSSIP_TLS_DIR=DIR), or list the addresses in "
                                   "the topology's peers:"
                                 : "list the address in peers: instead"));
}

}  // namespace

std::vector<std::pair<int, std::string>> named_relays(const RunConfig& config,
                                                      const std::vector<std::string>& addresses) {
  std::vector<std::pair<int, std::string>> out;
  for (const std::string& relay : config.net.relays) {
    if (relay.rfind("peer ", 0) != 0) {
      out.emplace_back(-1, relay);
      continue;
    }
    const int r = std::stoi(relay.substr(5));
    if (r >= static_cast<int>(addresses.size()))
      throw InputError(cat(config.where("net.relays"), ": rank ", r, " is not in this run of ",
                           addresses.size(), " peers"));
    out.emplace_back(r, addresses[r]);
  }
  return out;
}

/// The longest a peer started again waits for its links before it trains on without the missing.
constexpr std::chrono::milliseconds kRejoinWait{3'000};

namespace {

/// The ranks this peer links with: its graph's neighbours, or (a new identity, an elastic run)
/// every rank, those it does not dial at the start in `later`; all-reduce's ring on top.
void set_neighbours(NetConfig& net, const RunConfig& config, const Topology& topology,
                    const PeerOptions& opt) {
  const int rank = opt.rank;
  if (!opt.join_contacts.empty()) {
    // A new identity (--join): every rank may become its neighbour; it dials its contacts.
    for (int p = 0; p < topology.n(); ++p) {
      if (p == rank) continue;
      net.neighbours.push_back(p);
      if (std::find(opt.join_contacts.begin(), opt.join_contacts.end(), p) ==
          opt.join_contacts.end())
        net.later.push_back(p);
    }
    net.contacts = opt.join_contacts;
  } else {
    net.neighbours = all_neighbours(topology, rank);
  }
  if (!topology.epochs().empty() && opt.join_contacts.empty()) {
    // An elastic run: any rank may become a neighbour as the members change (a death, a leave
    // or a join derives the graph again); those not in its first epoch's graph are later ones,
    // dialled once the graph needs them (PeerSession expects the schedule's at the start).
    const std::set<int> first(net.neighbours.begin(), net.neighbours.end());
    const std::vector<int> needed_later = later_neighbours(topology, rank);
    const std::set<int> scheduled_later(needed_later.begin(), needed_later.end());
    net.neighbours.clear();
    for (int p = 0; p < topology.n(); ++p) {
      if (p == rank) continue;
      net.neighbours.push_back(p);
      if (first.count(p) == 0 || scheduled_later.count(p) != 0) net.later.push_back(p);
    }
  }
  for (int p : extra_neighbours(config.gossip, rank, topology.n()))  // all-reduce's ring
    if (std::find(net.neighbours.begin(), net.neighbours.end(), p) == net.neighbours.end())
      net.neighbours.push_back(p);
  std::sort(net.neighbours.begin(), net.neighbours.end());
}

/// What the handshake says, which neighbours must agree on, and the queue and frame limits
/// that follow from the run (with the links' shared-memory and congestion settings).
void set_handshake(NetConfig& net, const RunConfig& config, const Topology& topology,
                   const std::string& model, std::int64_t num_params) {
  net.handshake.run_id = config.net.run_id;
  net.shared_memory = config.net.shared_memory;
  net.congestion = config.net.congestion;
  // A sender may run this many rounds ahead of us (n - 1 on a directed ring): keep them all.
  net.max_queued_rounds = static_cast<std::size_t>(
      std::max<std::int64_t>(net.max_queued_rounds,
                             max_round_lead(topology) + 1 +
                                 extra_round_lead(config.gossip, topology.n())));
  net.handshake.model = model;
  net.handshake.param_count = static_cast<std::uint64_t>(num_params);
  net.handshake.topology_fingerprint = topology.fingerprint();
  net.handshake.wire = config.gossip.wire;  // params frames at this width; neighbours must agree
  net.handshake.gossip = gossip_settings(config.gossip);  // so must what the frames mean
  // Packets (choco's, the outer step's): a sparse one (an index and a value per coordinate
  // kept) of more than half the coordinates is larger than the parameters themselves; the frame
  // limit makes room.
  const CompressConfig* compress = packet_compressor(config.gossip);
  if (compress != nullptr && compress->kind != CompressKind::kNone) {
    const Compressor compressor(*compress, num_params, 0, 0, config.gossip.wire);
    const std::uint64_t frame = wire::kHeaderBytes + compressor.packet_bytes();
    net.max_frame_bytes = std::max<std::uint64_t>(
        default_max_frame_bytes(net.handshake.param_count), frame + wire::kMaxControlPayload);
  }
}

/// How long the links wait: at the start (shorter for a peer started again), for each
/// operation, and for a silent neighbour.
void set_timeouts(NetConfig& net, const RunConfig& config, const PeerOptions& opt) {
  net.timeouts.start = seconds_to_ms(config.net.connect_timeout_s);
  // A peer started again joins a network that runs: its live neighbours dial it again within
  // their retry (250 ms) and answer it at once, so it waits a few suspicion periods, not the
  // whole start; the dead ones are left out of its live graph, as at any start.
  if (opt.rejoin)
    net.timeouts.start = std::min(net.timeouts.start,
                                  std::max(kRejoinWait, 4 * seconds_to_ms(config.monitor.suspect_after_s)));
  net.timeouts.io = io_timeout(config.net, config.monitor);
  net.timeouts.silent = seconds_to_ms(config.monitor.suspect_after_s);
}

}  // namespace

NetConfig net_config(const RunConfig& config, const Topology& topology, const PeerOptions& opt,
                     const std::string& model, std::int64_t num_params) {
  const int rank = opt.rank;
  NetConfig net;
  net.tls = peer_tls(config, opt.tls_dir, rank);
  net.rank = rank;
  net.size = topology.n();
  set_addresses(net, config, topology, opt);
  set_neighbours(net, config, topology, opt);
  set_handshake(net, config, topology, model, num_params);
  net.reachable = config.net.reachable;
  net.relays_auto = config.net.relays_auto;
  net.relays = named_relays(config, net.addresses);
  set_timeouts(net, config, opt);
  net.log = [rank](const std::string& line) { log_line(cat("peer ", rank, " net: ", line)); };
  return net;
}

}  // namespace gossip::peer_parts
