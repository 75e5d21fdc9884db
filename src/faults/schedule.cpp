// faults/schedule.cpp: what the fault schedule says about links (which peers a cut separates in
// a round) and its check against the topology before a run starts.
#include <algorithm>
#include <string>

#include "gossip/core.hpp"
#include "gossip/faults.hpp"

namespace gossip {

std::vector<int> cut_peers(std::span<const Fault> faults, int peer, std::int64_t round) {
  std::vector<int> out;
  for (const Fault& f : faults) {
    if (f.action != "cut" || round < f.round || round >= f.to_round) continue;
    for (const auto& [a, b] : f.links) {
      if (a == peer) out.push_back(b);
      if (b == peer) out.push_back(a);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool has_cuts(std::span<const Fault> faults) {
  return std::any_of(faults.begin(), faults.end(), [](const Fault& f) { return f.action == "cut"; });
}

void check_faults(const RunConfig& config, const Topology& topology) {
  const int n = topology.n();
  for (std::size_t i = 0; i < config.faults.size(); ++i) {
    const Fault& f = config.faults[i];
    const std::string where = config.where(cat("faults[", i, "].", f.action));
    for (int p : f.peers)
      if (p >= n)
        throw InputError(cat(where, ": peer ", p, " is not in the topology's 0..", n - 1));
    for (const auto& [a, b] : f.links) {
      if (a >= n || b >= n)
        throw InputError(cat(where, ": link [", a, ", ", b, "] names a peer outside the "
                             "topology's 0..", n - 1));
      bool edge = false;
      for (std::int64_t r = 0; r < topology.period() && !edge; ++r) {
        for (const auto& nb : topology.in_neighbours(a, r)) edge = edge || nb.peer == b;
        for (const auto& nb : topology.in_neighbours(b, r)) edge = edge || nb.peer == a;
      }
      if (!edge)
        throw InputError(cat(where, ": link [", a, ", ", b, "] is not an edge of the topology"));
    }
  }
}

}  // namespace gossip
