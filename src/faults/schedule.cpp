// faults/schedule.cpp: what the fault schedule says about links (which peers a cut separates in
// a round) and attackers (which entry a peer attacks under in a round), and its check against
// the topology and the algorithm before a run starts.
#include <algorithm>
#include <limits>
#include <string>

#include "gossip/choice.hpp"
#include "gossip/core.hpp"
#include "gossip/faults.hpp"

namespace gossip {

std::vector<int> cut_peers(std::span<const Fault> faults, int peer, std::int64_t round) {
  std::vector<int> out;
  for (const Fault& f : faults) {
    if (f.action != FaultAction::kCut || round < f.round || round >= f.to_round) continue;
    for (const auto& [a, b] : f.links) {
      if (a == peer) out.push_back(b);
      if (b == peer) out.push_back(a);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::pair<int, int>> cut_links(std::span<const Fault> faults, int n, std::int64_t round) {
  std::vector<std::pair<int, int>> out;
  for (int p = 0; p < n; ++p)
    for (int q : cut_peers(faults, p, round))
      if (p < q) out.emplace_back(p, q);
  return out;
}

bool has_cuts(std::span<const Fault> faults) {
  return std::any_of(faults.begin(), faults.end(), [](const Fault& f) { return f.action == FaultAction::kCut; });
}

namespace {

bool attacks_in(const Fault& f, int peer, std::int64_t round) {
  return f.action == FaultAction::kAttack && round >= f.round && (f.to_round == 0 || round < f.to_round) &&
         std::find(f.peers.begin(), f.peers.end(), peer) != f.peers.end();
}

/// Whether two attack entries both name one peer in some round.
bool overlap(const Fault& a, const Fault& b) {
  const auto end = [](const Fault& f) {
    return f.to_round == 0 ? std::numeric_limits<std::int64_t>::max() : f.to_round;
  };
  if (a.round >= end(b) || b.round >= end(a)) return false;
  return std::any_of(a.peers.begin(), a.peers.end(), [&](int p) {
    return std::find(b.peers.begin(), b.peers.end(), p) != b.peers.end();
  });
}

}  // namespace

const Fault* attack_of(std::span<const Fault> faults, int peer, std::int64_t round) {
  for (const Fault& f : faults)
    if (attacks_in(f, peer, round)) return &f;
  return nullptr;
}

bool attacks(std::span<const Fault> faults, int peer) {
  return std::any_of(faults.begin(), faults.end(), [&](const Fault& f) {
    return f.action == FaultAction::kAttack && std::find(f.peers.begin(), f.peers.end(), peer) != f.peers.end();
  });
}

bool changes_membership(std::span<const Fault> faults) {
  return std::any_of(faults.begin(), faults.end(),
                     [](const Fault& f) { return is_membership(f); });
}

std::vector<MembershipChange> scheduled_changes(std::span<const Fault> faults) {
  std::vector<MembershipChange> changes;
  for (const Fault& f : faults) {
    if (!is_membership(f)) continue;
    MembershipChange c;
    c.announced = f.round;
    if (!add_change(c, *traits(f.action).change, f.peers)) continue;
    changes.push_back(std::move(c));
  }
  return changes;
}

Topology run_topology(const RunConfig& config, const Topology& loaded) {
  // An elastic topology whose schedule kills a peer follows the members too: the dead leave
  // the member set once their death is confirmed (drop_member); and so does one with room for
  // more members (max_peers above n): identities may join or leave while it runs.
  const AlgorithmKind algorithm = config.gossip.algorithm;
  const bool follows = loaded.elastic() && traits(algorithm).elastic &&
                       (loaded.elastic()->max_peers > loaded.n() ||
                        std::any_of(config.faults.begin(), config.faults.end(),
                                    [](const Fault& f) { return f.action == FaultAction::kKill; }));
  if (!changes_membership(config.faults) && !follows) return loaded;
  std::vector<MembershipChange> changes = scheduled_changes(config.faults);
  std::string first = config.where("faults");  // the first join or leave entry, for messages
  for (std::size_t i = 0; i < config.faults.size(); ++i)
    if (is_membership(config.faults[i])) {
      first = config.where(cat("faults[", i, "].", fault_action_name(config.faults[i].action)));
      break;
    }
  if (!loaded.elastic())
    throw InputError(cat(first, ": peers join and leave only an elastic topology (elastic: true "
                         "in ", config.gossip.topology, "): this run's peers are fixed"));
  const AlgorithmKind a = config.gossip.algorithm;
  if (!traits(a).elastic)
    throw InputError(cat(first, ": peers join and leave runs of ",
                         choice_list_if(std::span(algorithm_table()),
                                        [](const AlgorithmTraits& t) { return t.elastic; }),
                         " (each member graph's weights are symmetric pulls), not ",
                         algorithm_name(a)));
  const ElasticSpec& spec = *loaded.elastic();
  std::vector<int> initial(static_cast<std::size_t>(spec.generator.n));
  for (int i = 0; i < spec.generator.n; ++i) initial[static_cast<std::size_t>(i)] = i;
  Topology t = elastic_topology(spec, initial);
  try {
    t.set_epochs(plan_membership(spec, std::move(changes)));
  } catch (const InputError& e) {
    throw InputError(cat(config.where("faults"), ": ", e.what()));
  }
  return t;
}

void check_faults(const RunConfig& config, const Topology& loaded) {
  // Joins and leaves: run_topology checks them (and refuses them where they cannot happen);
  // the other entries may then name any rank of the run, max_peers of an elastic one.
  const Topology topology = run_topology(config, loaded);
  const int n = changes_membership(config.faults) ? topology.n() : loaded.n();
  for (std::size_t i = 0; i < config.faults.size(); ++i) {
    const Fault& f = config.faults[i];
    if (is_membership(f)) continue;
    const std::string where = config.where(cat("faults[", i, "].", fault_action_name(f.action)));
    if (f.action == FaultAction::kAttack) {
      const AlgorithmTraits& alg = traits(config.gossip.algorithm);
      if (outer_packets(config.gossip))
        throw InputError(cat(where, ": an attack rewrites the parameter messages a peer sends, "
                             "and gossip.outer's compress or fragments send packets of "
                             "pseudo-gradients or fragments instead; attack a run without them"));
      if (alg.compresses || alg.ring)
        throw InputError(cat(where, ": an attack rewrites the parameter messages a peer sends, "
                             "and ", alg.name, " sends packets instead (",
                             alg.compresses ? "compressed differences" : "all-reduce chunks",
                             "); attack a run of dpsgd, local_sgd, push_sum or async"));
      for (std::size_t k = 0; k < i; ++k)
        if (overlap(config.faults[k], f) && config.faults[k].action == FaultAction::kAttack)
          throw InputError(cat(where, ": a peer it names already attacks in some of its rounds "
                               "under faults[", k, "] (one attack a peer a round)"));
    }
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
