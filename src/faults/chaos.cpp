// faults/chaos.cpp: seeded random fault schedules (chaos_schedule), written as a --faults file,
// and what a schedule does to the peers computed from it alone (schedule_outcome), the truth
// the chaos tests hold a run's record to.
#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "gossip/core.hpp"
#include "gossip/faults.hpp"
#include "gossip/rng.hpp"

namespace gossip {
namespace {

enum class Pick { kKill, kRestart, kPause, kCut };

/// The graph's links (a < b), over the rounds of one period.
std::vector<std::pair<int, int>> links_of(const Topology& t) {
  std::set<std::pair<int, int>> links;
  for (std::int64_t r = 0; r < t.period(); ++r)
    for (int i = 0; i < t.n(); ++i)
      for (const auto& nb : t.in_neighbours(i, r))
        if (nb.peer != i) links.emplace(std::min(i, nb.peer), std::max(i, nb.peer));
  return {links.begin(), links.end()};
}

/// `count` distinct rounds of 1..last, ascending.
std::vector<std::int64_t> fault_rounds(std::mt19937_64& g, int count, std::int64_t last) {
  std::set<std::int64_t> rounds;
  while (static_cast<int>(rounds.size()) < count)
    rounds.insert(1 + static_cast<std::int64_t>(uniform_below(g, static_cast<std::uint64_t>(last))));
  return {rounds.begin(), rounds.end()};
}

/// One of the peers `from` where `keep` holds, uniformly; -1 when none does.
template <typename Keep>
int any_peer(std::mt19937_64& g, int n, Keep keep) {
  std::vector<int> ok;
  for (int p = 0; p < n; ++p)
    if (keep(p)) ok.push_back(p);
  return ok.empty() ? -1 : ok[uniform_below(g, ok.size())];
}

/// One of `weights`' picks, each as often as its weight says.
Pick draw_weighted(std::mt19937_64& g, const std::vector<std::pair<Pick, int>>& weights) {
  int total = 0;
  for (const auto& w : weights) total += w.second;
  int draw = static_cast<int>(uniform_below(g, static_cast<std::uint64_t>(total)));
  Pick pick = weights.front().first;
  for (const auto& [what, weight] : weights) {
    if (draw < weight) {
      pick = what;
      break;
    }
    draw -= weight;
  }
  return pick;
}

/// The peers alive just after round `round` of `base` (all alive at first).
std::vector<char> alive_after(std::span<const Fault> base, int n, std::int64_t round) {
  std::vector<char> alive(static_cast<std::size_t>(n), 1);
  for (const Fault& f : base) {
    if (f.round > round) break;
    for (int p : f.peers) {
      if (f.action == FaultAction::kKill) alive[p] = 0;
      if (f.action == FaultAction::kRestart) alive[p] = 1;
    }
  }
  return alive;
}

/// `count` attacks on `base` (in round order), each by one peer alive at its round and not
/// attacking then, of a kind of kChaosAttacks at its default parameter, for 3 to rounds/20 + 2
/// rounds ending before the last round; drawn from a stream of their own, so that the other
/// faults are the same with attacks or without.
std::vector<Fault> draw_attacks(std::span<const Fault> base, int n, const ChaosOptions& o) {
  std::mt19937_64 g = make_rng(o.seed, 1, Stream::kChaos);
  const std::int64_t last = std::min(o.rounds * 9 / 10, o.rounds - 5);
  std::vector<Fault> out;
  if (last < 1) return out;
  std::vector<std::int64_t> attacking_until(static_cast<std::size_t>(n), 0);  // one at a time
  for (const std::int64_t round : fault_rounds(g, std::min<int>(o.attacks, static_cast<int>(last)), last)) {
    const std::vector<char> alive = alive_after(base, n, round);
    const int p = any_peer(g, n, [&](int q) { return alive[q] != 0 && attacking_until[q] <= round; });
    if (p < 0) continue;
    Fault f;
    f.round = round;
    f.action = FaultAction::kAttack;
    f.peers = {p};
    f.attack = kChaosAttacks[uniform_below(g, std::size(kChaosAttacks))];
    f.parameter = attack_traits(f.attack).default_value;
    const std::int64_t longest = std::max<std::int64_t>(4, o.rounds / 20 + 2);
    f.to_round = std::min<std::int64_t>(
        o.rounds - 1, round + 3 + static_cast<std::int64_t>(uniform_below(g, longest - 2)));
    attacking_until[p] = f.to_round;
    out.push_back(std::move(f));
  }
  return out;
}

/// `count` joins and leaves of one rank each on an elastic topology, at rounds spaced so that each
/// takes effect (its announcement plus the membership lead of the members' graph then, plus one
/// round of slack) before the next is announced; at least half the initial members (at least 2)
/// stay members, and a rank that left does not join again (a peer process of gossip run is a
/// member for one stretch of rounds). Throws InputError when the run is too short for that spacing.
std::vector<Fault> draw_membership(const Topology& topology, const ChaosOptions& o) {
  const ElasticSpec& spec = *topology.elastic();
  std::mt19937_64 g = make_rng(o.seed, 2, Stream::kChaos);
  std::vector<int> members(static_cast<std::size_t>(spec.generator.n));
  for (int r = 0; r < spec.generator.n; ++r) members[static_cast<std::size_t>(r)] = r;
  const int fewest = std::max(2, spec.generator.n / 2);
  std::vector<int> gone;  // ranks that left
  const std::int64_t last = o.rounds * 9 / 10;
  const std::int64_t gap = last / (o.count + 1);
  std::vector<Fault> out;
  for (int k = 1; k <= o.count; ++k) {
    const std::int64_t round = gap * k;
    std::vector<int> outside;  // ranks never members: one that left does not come back
    for (int r = 0; r < spec.max_peers; ++r)
      if (!std::binary_search(members.begin(), members.end(), r) &&
          std::find(gone.begin(), gone.end(), r) == gone.end())
        outside.push_back(r);
    const bool can_join = !outside.empty();
    const bool can_leave = static_cast<int>(members.size()) > fewest;
    const bool join = can_join && (!can_leave || uniform_below(g, 2) == 0);
    Fault f;
    f.round = round;
    f.action = join ? FaultAction::kJoin : FaultAction::kLeave;
    const std::vector<int>& from = join ? outside : members;
    f.peers = {from[uniform_below(g, from.size())]};
    if (join) members.insert(std::upper_bound(members.begin(), members.end(), f.peers[0]), f.peers[0]);
    else {
      members.erase(std::find(members.begin(), members.end(), f.peers[0]));
      gone.push_back(f.peers[0]);
    }
    const std::int64_t lead = membership_lead(elastic_topology(spec, members));
    if (gap < lead + 2)
      throw InputError(cat(o.count, " joins and leaves ", gap, " rounds apart in a run of ",
                           o.rounds, " rounds: each needs ", lead + 2, " rounds to take effect "
                           "before the next (fewer, or a longer run)"));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<Fault> chaos_schedule(const Topology& topology, const ChaosOptions& o) {
  if (topology.elastic()) {  // the members change; nothing else is drawn on such a graph
    if (o.count < 1) throw InputError(cat("--faults must be at least 1, not ", o.count));
    return draw_membership(topology, o);
  }
  const int n = topology.n();
  const std::int64_t last = o.rounds * 9 / 10;
  if (o.count < 1) throw InputError(cat("--faults must be at least 1, not ", o.count));
  if (last < o.count)
    throw InputError(cat(o.count, " faults at distinct rounds need a run of at least ",
                         (o.count * 10 + 8) / 9, " rounds; this one has ", o.rounds));
  const int min_alive = o.min_alive > 0 ? o.min_alive : std::max(2, n / 3);
  if (n <= min_alive)
    throw InputError(cat(n, " peers leave none to kill (a third, at least 2, stay alive)"));
  std::mt19937_64 g = make_rng(o.seed, 0, Stream::kChaos);
  const auto links = links_of(topology);
  std::vector<char> alive(static_cast<std::size_t>(n), 1);
  int live = n;
  std::vector<Fault> out;
  for (const std::int64_t round : fault_rounds(g, o.count, last)) {
    std::vector<std::pair<Pick, int>> weights;  // what the state allows, and how often
    if (live > min_alive) weights.emplace_back(Pick::kKill, 3);
    if (live < n) weights.emplace_back(Pick::kRestart, 3);
    if (o.pauses) weights.emplace_back(Pick::kPause, 2);
    if (o.cuts && !links.empty() && round + 5 < o.rounds - 1) weights.emplace_back(Pick::kCut, 2);
    const Pick pick = draw_weighted(g, weights);
    Fault f;
    f.round = round;
    if (pick == Pick::kKill) {
      f.action = FaultAction::kKill;
      const int victims = live - 1 > min_alive && uniform_below(g, 4) == 0 ? 2 : 1;
      for (int k = 0; k < victims; ++k) {
        const int p = any_peer(g, n, [&](int q) { return alive[q] != 0; });
        alive[p] = 0;
        --live;
        f.peers.push_back(p);
      }
      std::sort(f.peers.begin(), f.peers.end());
    } else if (pick == Pick::kRestart) {
      f.action = FaultAction::kRestart;
      const int p = any_peer(g, n, [&](int q) { return alive[q] == 0; });
      alive[p] = 1;
      ++live;
      f.peers = {p};
    } else if (pick == Pick::kPause) {
      f.action = FaultAction::kPause;
      f.peers = {any_peer(g, n, [&](int q) { return alive[q] != 0; })};
      const auto tenths = 1 + uniform_below(g, static_cast<std::uint64_t>(
                                                   std::max(1.0, o.max_pause_s * 10.0)));
      f.seconds = static_cast<double>(tenths) / 10.0;
    } else {
      f.action = FaultAction::kCut;
      f.links = {links[uniform_below(g, links.size())]};
      const std::int64_t longest = std::max<std::int64_t>(6, o.rounds / 10);
      f.to_round = std::min<std::int64_t>(
          o.rounds - 1, round + 5 + static_cast<std::int64_t>(uniform_below(g, longest - 4)));
    }
    out.push_back(std::move(f));
  }
  if (o.attacks > 0) {  // layered on, each after the faults of its round
    std::vector<Fault> attacks = draw_attacks(out, n, o);
    std::vector<Fault> both;
    std::merge(out.begin(), out.end(), attacks.begin(), attacks.end(), std::back_inserter(both),
               [](const Fault& a, const Fault& b) { return a.round < b.round; });
    out = std::move(both);
  }
  return out;
}

std::string faults_yaml(std::span<const Fault> faults) {
  std::ostringstream os;
  os << "faults:\n";
  const auto peers = [](const std::vector<int>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += cat(i ? ", " : "", v[i]);
    return s + "]";
  };
  for (const Fault& f : faults) {
    const char* name = fault_action_name(f.action);
    if (f.action == FaultAction::kCut) {
      os << "  - {from_round: " << f.round << ", to_round: " << f.to_round << ", cut: [";
      for (std::size_t i = 0; i < f.links.size(); ++i)
        os << (i ? ", " : "") << "[" << f.links[i].first << ", " << f.links[i].second << "]";
      os << "]}\n";
      continue;
    }
    os << "  - {round: " << f.round << ", ";
    if (f.action == FaultAction::kAttack && f.to_round > 0) os << "to_round: " << f.to_round << ", ";
    os << name << ": " << peers(f.peers);
    if (f.action == FaultAction::kPause) os << ", seconds: " << f.seconds;
    if (f.action == FaultAction::kAttack) {
      const AttackTraits& t = attack_traits(f.attack);
      os << ", kind: " << t.name;
      if (t.parameter && *t.parameter) os << ", " << t.parameter << ": " << f.parameter;
    }
    os << "}\n";
  }
  return os.str();
}

ScheduleOutcome schedule_outcome(std::span<const Fault> faults) {
  std::vector<const Fault*> order;
  for (const Fault& f : faults) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const Fault* a, const Fault* b) { return a->round < b->round; });
  std::set<int> dead;
  ScheduleOutcome out;
  for (const Fault* f : order)
    for (int p : f->peers) {
      if (f->action == FaultAction::kKill && dead.insert(p).second) ++out.kills;
      if (f->action == FaultAction::kRestart && dead.erase(p) > 0) ++out.restarts;
    }
  out.dead_at_end.assign(dead.begin(), dead.end());
  return out;
}

std::vector<LiveGraphChange> schedule_live_graphs(const Topology& topology,
                                                  std::span<const Fault> faults,
                                                  std::int64_t rounds) {
  std::vector<const Fault*> order;  // the kills and restarts, as schedule_outcome takes them
  std::set<std::int64_t> at;        // the rounds where the graph may change
  for (const Fault& f : faults) {
    if (f.action == FaultAction::kKill || f.action == FaultAction::kRestart) {
      order.push_back(&f);
      at.insert(f.round);
    }
    if (f.action == FaultAction::kCut) at.insert({f.round, f.to_round});
  }
  for (const auto& e : topology.epochs()) at.insert(e.from);
  std::stable_sort(order.begin(), order.end(),
                   [](const Fault* a, const Fault* b) { return a->round < b->round; });
  const LiveGraph initial = live_graph(topology, {}, 0);
  std::vector<LiveGraphChange> timeline;
  std::set<int> dead;
  std::size_t next = 0;
  for (const std::int64_t r : at) {
    if (r >= rounds) break;
    for (; next < order.size() && order[next]->round <= r; ++next)
      for (int p : order[next]->peers) {
        if (order[next]->action == FaultAction::kKill) dead.insert(p);
        else dead.erase(p);
      }
    const std::vector<int> gone(dead.begin(), dead.end());
    note_live_graph(timeline, initial,
                    {r, 0.0, live_graph(topology, gone, r, cut_links(faults, topology.n(), r))});
  }
  return timeline;
}

}  // namespace gossip
