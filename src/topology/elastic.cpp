// topology/elastic.cpp: elastic topologies, one deterministic function from the member set to
// the graph and its weights, the same in every peer and in the simulator (DESIGN: topology).
// The generator runs on the members' positions (the k-th smallest member is position k), its
// edges are made undirected and weighted Metropolis-Hastings, so W is symmetric and doubly
// stochastic whatever the member set; non-members stay alone. How fast a change spreads
// (membership_lead) comes from the members' graph too.
#include <algorithm>
#include <set>
#include <tuple>

#include "gossip/core.hpp"
#include "gossip/rng.hpp"
#include "src/topology/internal.hpp"

namespace gossip {

namespace {

/// Positions 0..m-1 of the generator's rounds, each undirected.
std::vector<topo::EdgeList> member_rounds(const GeneratorSpec& g, int m) {
  using enum GeneratorKind;
  const GeneratorKind k = g.kind;
  if (m < 2) return {topo::EdgeList{}};
  GeneratorSpec s = g;
  s.n = m;
  s.directed = false;
  if (k == kRing && m == 2) {
    topo::EdgeList one;
    one.edges.push_back({0, 1, 0.0});
    return {one};
  }
  if (k == kRandomRegular) {
    int d = g.degree;
    if (m <= d + 1 || (m * d % 2 != 0 && m <= d + 2)) {
      s.kind = kComplete;  // too few members for a simple d-regular graph
    } else {
      if (m * d % 2 != 0) ++d;
      s.degree = d;
    }
  }
  std::vector<topo::EdgeList> rounds = topo::generate_rounds(s);
  for (topo::EdgeList& r : rounds) {  // undirected, each pair once as {from < to}
    std::set<std::pair<int, int>> pairs;
    for (const Arc& a : r.edges)
      if (a.from != a.to) pairs.insert({std::min(a.from, a.to), std::max(a.from, a.to)});
    r.edges.clear();
    for (auto [a, b] : pairs) r.edges.push_back({a, b, 0.0});
    r.self_weights.clear();
  }
  return rounds;
}

}  // namespace

std::string elastic_generators() {
  return choice_list_if(generator_table(), [](const GeneratorTraits& t) { return t.elastic; },
                        "and");
}

Topology elastic_topology(const ElasticSpec& spec, std::span<const int> members) {
  if (!traits(spec.generator.kind).elastic)
    throw InputError(cat("elastic: true is for ", elastic_generators(), " (their graph is a "
                         "function of the member set), not ",
                         generator_name(spec.generator.kind)));
  std::vector<int> sorted(members.begin(), members.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) throw InputError("an elastic topology needs at least one member");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw InputError("an elastic topology's members must be distinct");
  if (sorted.front() < 0 || sorted.back() >= spec.max_peers)
    throw InputError(cat("member ", sorted.front() < 0 ? sorted.front() : sorted.back(),
                         " is not among the elastic topology's ranks 0..", spec.max_peers - 1,
                         " (max_peers: ", spec.max_peers, ")"));
  const int m = static_cast<int>(sorted.size());
  GeneratorSpec g = spec.generator;
  if (g.kind == GeneratorKind::kRandomRegular) {  // a new member set draws a new graph
    std::uint64_t h = mix64(g.seed ^ 0x656c6173746963ULL);  // "elastic"
    for (int r : sorted) h = mix64(h ^ static_cast<std::uint64_t>(r));
    g.seed = h;
  }
  std::vector<Graph> rounds;
  for (topo::EdgeList& r : member_rounds(g, m)) {
    for (Arc& a : r.edges) {
      a.from = sorted[static_cast<std::size_t>(a.from)];
      a.to = sorted[static_cast<std::size_t>(a.to)];
      if (a.from > a.to) std::swap(a.from, a.to);
    }
    rounds.push_back(topo::weigh(spec.max_peers, false, r, WeightKind::kMetropolis));
  }
  Topology t(std::move(rounds), generator_name(spec.generator.kind), WeightKind::kMetropolis);
  if (static_cast<int>(spec.addresses.size()) == spec.max_peers) t.set_addresses(spec.addresses);
  t.set_elastic(spec);
  return t;
}

Topology members_only(const Topology& topology, std::span<const int> members) {
  std::vector<int> sorted(members.begin(), members.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> position(static_cast<std::size_t>(topology.n()), -1);
  for (std::size_t k = 0; k < sorted.size(); ++k)
    position[static_cast<std::size_t>(sorted[k])] = static_cast<int>(k);
  std::vector<Graph> rounds;
  for (std::int64_t r = 0; r < topology.period(); ++r) {
    const Graph& g = topology.at(r);
    std::vector<Arc> arcs;
    std::vector<double> self;
    for (int to : sorted) {
      self.push_back(g.self_weight(to));
      for (const Neighbour& nb : g.in_neighbours(to)) {
        const int from = position[static_cast<std::size_t>(nb.peer)];
        GOSSIP_CHECK_MSG(from >= 0, "member ", to, " has neighbour ", nb.peer, " outside them");
        arcs.push_back({from, position[static_cast<std::size_t>(to)], nb.weight});
      }
    }
    rounds.emplace_back(static_cast<int>(sorted.size()), g.directed(), std::move(arcs),
                        std::move(self));
  }
  return Topology(std::move(rounds), topology.kind(), topology.weights());
}

std::int64_t membership_lead(const Topology& graph) {
  // Hops over the union of one period's graphs (undirected), among the ranks that have a
  // neighbour (the members; a lone member has none).
  const topo::Adjacency adj = topo::union_arcs(graph, false);
  int diameter = 0;
  for (int s = 0; s < graph.n(); ++s)
    if (!adj[static_cast<std::size_t>(s)].empty())
      for (int d : topo::bfs(adj, s)) diameter = std::max(diameter, d);
  return graph.period() * diameter + 2;
}

bool add_change(MembershipChange& change, ChangeKind kind, std::span<const int> ranks) {
  switch (change_row(kind).effect) {
    case ChangeEffect::kAdds:
      change.join.insert(change.join.end(), ranks.begin(), ranks.end());
      return true;
    case ChangeEffect::kRemoves:
      change.leave.insert(change.leave.end(), ranks.begin(), ranks.end());
      return true;
    case ChangeEffect::kDrops:
    case ChangeEffect::kNone: return false;
  }
  return false;
}

std::vector<Topology::Epoch> plan_membership(const ElasticSpec& spec,
                                             std::vector<MembershipChange> changes) {
  std::sort(changes.begin(), changes.end(),
            [](const MembershipChange& a, const MembershipChange& b) {
              return a.announced < b.announced;
            });
  std::vector<int> members(static_cast<std::size_t>(spec.generator.n));
  for (int i = 0; i < spec.generator.n; ++i) members[static_cast<std::size_t>(i)] = i;
  std::vector<Topology::Epoch> epochs;
  auto graph_of = [&](const std::vector<int>& m) { return elastic_topology(spec, m); };
  {
    const Topology t = graph_of(members);
    epochs.push_back({0, members, 0, {}});
    for (std::int64_t r = 0; r < t.period(); ++r) epochs.back().rounds.push_back(t.at(r));
  }
  for (std::size_t i = 0; i < changes.size();) {
    const std::int64_t announced = changes[i].announced;
    std::vector<int> join, leave;
    for (; i < changes.size() && changes[i].announced == announced; ++i) {
      join.insert(join.end(), changes[i].join.begin(), changes[i].join.end());
      leave.insert(leave.end(), changes[i].leave.begin(), changes[i].leave.end());
    }
    const std::string where = cat("the fault schedule's round ", announced);
    std::set<int> next(members.begin(), members.end());
    for (int r : join) {
      if (r < 0 || r >= spec.max_peers)
        throw InputError(cat(where, ": rank ", r, " cannot join: the topology's elastic ranks are "
                             "0..", spec.max_peers - 1, " (max_peers: ", spec.max_peers, ")"));
      if (!next.insert(r).second)
        throw InputError(cat(where, ": rank ", r, " cannot join: it is a member then"));
    }
    for (int r : leave)
      if (next.erase(r) == 0)
        throw InputError(cat(where, ": rank ", r, " cannot leave: it is not a member then"));
    if (next.empty())
      throw InputError(cat(where, ": the last member cannot leave (a run needs one peer)"));
    const Topology now = graph_of(members);  // the graph that carries the news
    const std::int64_t from =
        std::max(announced + membership_lead(now), epochs.back().from + 1);
    members.assign(next.begin(), next.end());
    const Topology t = graph_of(members);
    epochs.push_back({from, members, announced, {}});
    for (std::int64_t r = 0; r < t.period(); ++r) epochs.back().rounds.push_back(t.at(r));
  }
  return epochs;
}

std::int64_t drop_member(Topology& topology, int rank, std::int64_t announced) {
  GOSSIP_CHECK(topology.elastic().has_value() && !topology.epochs().empty());
  const ElasticSpec& spec = *topology.elastic();
  std::vector<Topology::Epoch> epochs = topology.epochs();
  const std::int64_t from =
      announced + membership_lead(elastic_topology(spec, topology.members(announced)));
  std::size_t e = topology.epoch_index(from);
  const auto& at = epochs[e].members;
  if (!std::binary_search(at.begin(), at.end(), rank) || at.size() == 1) return -1;
  if (epochs[e].from != from) {  // a new epoch: the members then, less the dead
    Topology::Epoch next{from, epochs[e].members, announced, {}};
    epochs.insert(epochs.begin() + static_cast<std::ptrdiff_t>(e) + 1, std::move(next));
    ++e;
  }
  for (std::size_t k = e; k < epochs.size(); ++k) {
    auto& m = epochs[k].members;
    const auto it = std::find(m.begin(), m.end(), rank);
    if (it == m.end() || m.size() == 1) continue;
    m.erase(it);
    const Topology t = elastic_topology(spec, m);
    epochs[k].rounds.clear();
    for (std::int64_t r = 0; r < t.period(); ++r) epochs[k].rounds.push_back(t.at(r));
  }
  // A later change that only took it out (its leave) changes nothing now.
  for (std::size_t k = epochs.size() - 1; k > e; --k)
    if (epochs[k].members == epochs[k - 1].members) epochs.erase(epochs.begin() + static_cast<std::ptrdiff_t>(k));
  topology.set_epochs(std::move(epochs));
  return from;
}

std::int64_t dead_announcement_round(std::int64_t confirmed, std::int64_t last_heard,
                                     std::int64_t after) {
  if (after <= 0) return confirmed;
  // A member that never heard it counts from its own confirmation, so a neighbour's earlier
  // (and the same everywhere) round wins the merge of announcements.
  return std::max(confirmed, (last_heard >= 0 ? last_heard : confirmed) + after);
}

std::vector<ElasticSize> elastic_sizes(const ElasticSpec& spec) {
  std::set<int> sizes{spec.generator.n, spec.max_peers};
  for (int m = 2; m < spec.max_peers; m *= 2) sizes.insert(m);
  std::vector<ElasticSize> out;
  for (int m : sizes) {
    if (m < 1 || m > 2048) continue;
    ElasticSpec s = spec;
    s.max_peers = m;
    std::vector<int> members(static_cast<std::size_t>(m));
    for (int i = 0; i < m; ++i) members[static_cast<std::size_t>(i)] = i;
    const Topology t = elastic_topology(s, members);
    const TopologyReport r = analyze(t);
    out.push_back({m, 1.0 - r.rho_per_round, membership_lead(t)});
  }
  return out;
}

}  // namespace gossip

namespace gossip {

std::vector<int> join_donors(const Topology& topology, std::size_t epoch, int joiner) {
  const auto& epochs = topology.epochs();
  GOSSIP_CHECK_MSG(epoch > 0 && epoch < epochs.size(), "join_donors: epoch ", epoch,
                   " is not a change");
  const Topology::Epoch& e = epochs[epoch];
  const std::vector<int>& before = epochs[epoch - 1].members;
  std::set<int> donors;
  for (std::int64_t t = e.from; t < e.from + std::ssize(e.rounds); ++t)
    for (const Neighbour& nb : topology.in_neighbours(joiner, t))
      if (std::binary_search(before.begin(), before.end(), nb.peer)) donors.insert(nb.peer);
  return {donors.begin(), donors.end()};
}

double members_spectral_gap(const ElasticSpec& spec, std::span<const int> members) {
  return 1.0 - analyze(members_only(elastic_topology(spec, members), members)).rho_per_round;
}

std::vector<MembershipRecord> planned_membership(const Topology& topology) {
  std::vector<MembershipRecord> out;
  const auto& epochs = topology.epochs();
  for (std::size_t e = 1; e < epochs.size(); ++e) {
    const std::vector<int>& before = epochs[e - 1].members;
    const std::vector<int>& now = epochs[e].members;
    MembershipRecord r;
    r.from = epochs[e].from;
    r.announced = epochs[e].announced;
    r.members = now;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                        std::back_inserter(r.joined));
    std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                        std::back_inserter(r.left));
    for (int p : r.joined) r.donors.push_back(join_donors(topology, e, p));
    r.spectral_gap = members_spectral_gap(*topology.elastic(), now);
    out.push_back(std::move(r));
  }
  return out;
}

MembershipTimeline membership_timeline(std::span<const int> initial, double initial_gap,
                                       std::span<const MembershipRecord> changes, int n,
                                       std::int64_t rounds) {
  // The first members from round 0, then each change; and each peer's rounds as a member
  // (from the round it joined, or 0, to the round it left, or the end).
  MembershipTimeline t;
  const auto size = static_cast<std::size_t>(n);
  std::vector<std::int64_t> since(size, -1);
  t.member_rounds.assign(size, 0);
  for (int p : initial) since[static_cast<std::size_t>(p)] = 0;
  t.entries.add(JsonObject()
                    .add("round", 0)
                    .add("members", JsonArray::of(std::vector<int>(initial.begin(), initial.end())))
                    .add("spectral_gap", initial_gap));
  for (const MembershipRecord& m : changes) {
    JsonArray donors;
    for (const auto& d : m.donors) donors.add(JsonArray::of(d));
    t.entries.add(JsonObject()
                      .add("round", m.from)
                      .add("announced", m.announced)
                      .add("members", JsonArray::of(m.members))
                      .add("joined", JsonArray::of(m.joined))
                      .add("left", JsonArray::of(m.left))
                      .add("dead", JsonArray::of(m.dead))
                      .add("donors", donors)
                      .add("spectral_gap", m.spectral_gap));
    for (const auto* out : {&m.left, &m.dead})
      for (int p : *out) {
        t.member_rounds[static_cast<std::size_t>(p)] += m.from - since[static_cast<std::size_t>(p)];
        since[static_cast<std::size_t>(p)] = -1;
      }
    for (int p : m.joined) since[static_cast<std::size_t>(p)] = m.from;
  }
  for (std::size_t p = 0; p < size; ++p)
    if (since[p] >= 0) t.member_rounds[p] += rounds - since[p];
  return t;
}

}  // namespace gossip

namespace gossip {

bool merge_announcement(std::vector<Announcement>& known, const Announcement& a) {
  const auto it = std::find_if(known.begin(), known.end(), [&](const Announcement& k) {
    return k.rank == a.rank && k.kind == a.kind;
  });
  if (it == known.end()) {
    known.push_back(a);
    return true;
  }
  if (a.round >= it->round) return false;
  it->round = a.round;
  return true;
}

Topology elastic_timeline(const Topology& initial, std::span<const MembershipChange> scheduled,
                          std::span<const Announcement> announced) {
  GOSSIP_CHECK(initial.elastic().has_value());
  const ElasticSpec& spec = *initial.elastic();
  // Joins and leaves by round, then rank, then kind: one order for every peer.
  std::vector<Announcement> sorted(announced.begin(), announced.end());
  std::sort(sorted.begin(), sorted.end(), [](const Announcement& a, const Announcement& b) {
    return std::tie(a.round, a.rank, a.kind) < std::tie(b.round, b.rank, b.kind);
  });
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<MembershipChange> changes(scheduled.begin(), scheduled.end());
  std::vector<Topology::Epoch> epochs = plan_membership(spec, changes);
  for (const Announcement& a : sorted) {
    MembershipChange c;
    c.announced = a.round;
    if (!add_change(c, a.kind, std::span<const int>(&a.rank, 1))) continue;
    changes.push_back(std::move(c));
    try {
      epochs = plan_membership(spec, changes);
    } catch (const InputError&) {
      changes.pop_back();  // the member set then cannot take it
    }
  }
  std::vector<int> members(static_cast<std::size_t>(spec.generator.n));
  for (int i = 0; i < spec.generator.n; ++i) members[static_cast<std::size_t>(i)] = i;
  Topology t = elastic_topology(spec, members);
  t.set_epochs(std::move(epochs));
  for (const Announcement& a : sorted)
    if (a.kind == ChangeKind::kDead) drop_member(t, a.rank, a.round);
  return t;
}

}  // namespace gossip
