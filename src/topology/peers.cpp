// topology/peers.cpp: peer addresses from a topology file.
#include "src/topology/peers.hpp"

#include <map>

#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/topology.hpp"

namespace gossip::topo {

std::vector<std::string> parse_peers(const yaml::Document& in, const yaml::Node& peers, int n) {
  in.list(peers, "peers");
  std::vector<std::string> addresses(n);
  std::map<std::string, int> owner;
  int index = 0;
  for (const yaml::Node& p : peers) {
    int id = index++;
    yaml::Node value = p;
    if (p.is_map()) {
      auto k = in.keys(p, {"id", "address"}, "peers");
      if (!k.count("id") || !k.count("address")) in.fail(p, "peer needs id: and address:");
      id = static_cast<int>(in.integer(p["id"], "id", 0, 1 << 16));
      value = p["address"];
    }
    const std::string address = in.text(value, "peer address");
    if (id >= n) in.fail(p, cat("peer id ", id, " out of range (n: ", n, ", ids are 0..", n - 1,
                                ")"));
    if (!addresses[id].empty()) in.fail(p, cat("peer ", id, " is listed twice"));
    if (address == kLearnedAddress) {  // the members learn it from the peer's signed record
      addresses[id] = address;
      continue;
    }
    if (auto problem = gossip::address_problem(address); !problem.empty())
      in.fail(value, cat("peer ", id, " address '", address, "': ", problem));
    if (auto it = owner.find(address); it != owner.end())
      in.fail(value, cat("peer ", id, " has the same address as peer ", it->second, " (",
                         address, ")"));
    owner[address] = id;
    addresses[id] = address;
  }
  for (int i = 0; i < n; ++i)
    if (addresses[i].empty())
      in.fail(peers, cat("peers: ", peers.size(), " entries for n: ", n, " peers (peer ", i,
                         " has no address)"));
  return addresses;
}

}  // namespace gossip::topo
