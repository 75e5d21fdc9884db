// monitor/live_graph.cpp: is the graph of the peers still alive connected? Its strongly connected
// components, by searches over the union of one period's rounds, forwards and backwards.
#include <sstream>
#include <algorithm>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

namespace {

using Adjacency = std::vector<std::vector<int>>;

/// Peers reachable from `start` along `adj` among the alive ones.
std::vector<char> reach(const Adjacency& adj, const std::vector<char>& alive, int start) {
  std::vector<char> seen(adj.size(), 0);
  std::vector<int> stack{start};
  seen[start] = 1;
  while (!stack.empty()) {
    const int p = stack.back();
    stack.pop_back();
    for (int q : adj[p])
      if (alive[q] && !seen[q]) {
        seen[q] = 1;
        stack.push_back(q);
      }
  }
  return seen;
}

}  // namespace

LiveGraph live_graph(const Topology& topology, std::span<const int> dead, std::int64_t round,
                     std::span<const std::pair<int, int>> absent) {
  const int n = topology.n();
  // Only the members at `round` (every rank unless the run's membership changes) take part.
  std::vector<char> alive(n, topology.epochs().empty() ? 1 : 0);
  for (int m : topology.members(round)) alive[m] = 1;
  for (int d : dead) {
    GOSSIP_CHECK_MSG(d >= 0 && d < n, "dead peer ", d, " is not in 0..", n - 1);
    alive[d] = 0;
  }
  // forward[j] = peers j sends to; backward[i] = peers i takes from (over the whole period).
  Adjacency forward(n), backward(n);
  const auto missing = [&](int a, int b) {
    return std::any_of(absent.begin(), absent.end(), [&](const std::pair<int, int>& l) {
      return (l.first == a && l.second == b) || (l.first == b && l.second == a);
    });
  };
  for (const Graph& g : topology.epoch_rounds(round))
    for (int i = 0; i < n; ++i)
      for (const auto& nb : g.in_neighbours(i)) {
        if (missing(i, nb.peer)) continue;
        forward[nb.peer].push_back(i);
        backward[i].push_back(nb.peer);
      }

  LiveGraph g;
  for (int i = 0; i < n; ++i)
    if (alive[i]) g.alive.push_back(i);
  // The strongly connected components: the peers i reaches and that reach i. (For an
  // undirected graph these are its connected parts.) Each ascending, by smallest id.
  std::vector<int> component_of(n, -1);
  std::vector<std::vector<char>> reaches;  // per component: the peers its messages reach
  for (int i : g.alive) {
    if (component_of[i] >= 0) continue;
    auto fwd = reach(forward, alive, i);
    const auto bwd = reach(backward, alive, i);
    std::vector<int> component;
    for (int p = 0; p < n; ++p)
      if (fwd[p] && bwd[p]) {
        component.push_back(p);
        component_of[p] = static_cast<int>(g.components.size());
      }
    g.components.push_back(std::move(component));
    reaches.push_back(std::move(fwd));
  }
  g.connected = g.components.size() == 1;
  // Where the parts of one weakly connected piece reach each other one way only.
  for (std::size_t a = 0; a < g.components.size(); ++a)
    for (std::size_t b = 0; b < g.components.size(); ++b)
      if (a != b && reaches[a][g.components[b].front()])
        g.one_way.emplace_back(static_cast<int>(a), static_cast<int>(b));
  return g;
}

bool same_live_graph(const LiveGraph& a, const LiveGraph& b) {
  return a.connected == b.connected && a.components == b.components && a.one_way == b.one_way;
}

std::size_t note_live_graph(std::vector<LiveGraphChange>& timeline, const LiveGraph& initial,
                            LiveGraphChange change) {
  if (!timeline.empty() && timeline.back().round == change.round) timeline.pop_back();
  const LiveGraph& before = timeline.empty() ? initial : timeline.back().graph;
  if (!same_live_graph(before, change.graph)) timeline.push_back(std::move(change));
  return timeline.empty() ? 0 : timeline.size() - 1;
}

std::string live_graph_json(const LiveGraphChange& change) {
  const LiveGraph& g = change.graph;
  JsonArray components, one_way;
  for (const auto& c : g.components) components.add(JsonArray::of(c));
  for (const auto& [a, b] : g.one_way)
    one_way.add(JsonObject()
                    .add("from", JsonArray::of(g.components[static_cast<std::size_t>(a)]))
                    .add("to", JsonArray::of(g.components[static_cast<std::size_t>(b)])));
  return JsonObject()
      .add("event", "live_graph")
      .add("time_s", change.time_s)
      .add("round", change.round)
      .add("connected", g.connected)
      .add("components", components)
      .add("one_way", one_way)
      .str();
}

std::string format_peers(std::span<const int> peers) {
  std::ostringstream os;
  for (std::size_t i = 0; i < peers.size(); ++i) os << (i ? "," : "") << peers[i];
  return os.str();
}

std::string format_components(const std::vector<std::vector<int>>& components) {
  std::ostringstream os;
  for (std::size_t i = 0; i < components.size(); ++i)
    os << (i ? " {" : "{") << format_peers(components[i]) << "}";
  return os.str();
}

}  // namespace gossip
