// peer/members.cpp: an elastic run's member windows and the neighbours a peer talks to over its
// window (members.hpp).
#include "src/peer/members.hpp"


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

MemberWindow member_window(const Topology& topology, int rank) {
  MemberWindow w;
  const auto& epochs = topology.epochs();
  if (epochs.empty()) return w;
  const auto member = [rank](const Topology::Epoch& e) {
    return std::binary_search(e.members.begin(), e.members.end(), rank);
  };
  std::size_t e = 0;
  while (e < epochs.size() && !member(epochs[e])) ++e;
  if (e == epochs.size())
    throw InputError(cat("rank ", rank, " is never a member of this elastic run (its fault "
                         "schedule's joins name the ranks that join)"));
  w.from = epochs[e].from;
  w.first_epoch = e;
  for (std::size_t k = e + 1; k < epochs.size(); ++k)
    if (!member(epochs[k])) {
      w.until = epochs[k].from;
      break;
    }
  return w;
}

namespace {

/// The neighbours of `rank` in the graphs of epochs [first, last] (every round of each period).
std::set<int> epoch_neighbours(const Topology& topology, int rank, std::size_t first,
                               std::size_t last) {
  std::set<int> s;
  const auto& epochs = topology.epochs();
  for (std::size_t e = first; e <= last; ++e) {
    const std::int64_t from = epochs.empty() ? 0 : epochs[e].from;
    const std::int64_t period = epochs.empty() ? topology.period() : std::ssize(epochs[e].rounds);
    for (std::int64_t t = from; t < from + period; ++t) {
      for (const auto& nb : topology.in_neighbours(rank, t)) s.insert(nb.peer);
      for (const auto& nb : topology.out_neighbours(rank, t)) s.insert(nb.peer);
    }
  }
  s.erase(rank);
  return s;
}

/// The last epoch of `rank`'s member window.
std::size_t last_epoch(const Topology& topology, const MemberWindow& w) {
  const auto& epochs = topology.epochs();
  if (epochs.empty()) return 0;
  return w.until == std::numeric_limits<std::int64_t>::max() ? epochs.size() - 1
                                                             : topology.epoch_index(w.until) - 1;
}

}  // namespace

std::vector<int> all_neighbours(const Topology& topology, int rank) {
  const MemberWindow w = member_window(topology, rank);
  const std::set<int> s = epoch_neighbours(topology, rank, w.first_epoch, last_epoch(topology, w));
  return {s.begin(), s.end()};
}

std::vector<int> later_neighbours(const Topology& topology, int rank) {
  const MemberWindow w = member_window(topology, rank);
  const std::set<int> all =
      epoch_neighbours(topology, rank, w.first_epoch, last_epoch(topology, w));
  const std::set<int> first = epoch_neighbours(topology, rank, w.first_epoch, w.first_epoch);
  std::vector<int> out;
  std::set_difference(all.begin(), all.end(), first.begin(), first.end(),
                      std::back_inserter(out));
  return out;
}

}  // namespace gossip::peer_parts
