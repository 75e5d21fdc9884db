// topology/weights.cpp: mixing weights for one round's edges. Metropolis-Hastings and
// max-degree give symmetric doubly stochastic W on undirected graphs, uniform gives a row
// stochastic W, push-sum a column stochastic W for directed graphs; explicit and generator
// weights are taken from the edge list. Self weights are whatever is left of the row (column
// for push-sum), summed in ascending peer id so the result is the same on every machine.
#include <algorithm>
#include <tuple>

#include "gossip/core.hpp"
#include "src/topology/internal.hpp"

namespace gossip::topo {

namespace {

// Both arcs of every undirected edge, or the arcs of a directed graph, with weight w(from, to).
template <typename WeightFn>
std::vector<Arc> make_arcs(bool directed, const std::vector<Arc>& edges, WeightFn w) {
  std::vector<Arc> arcs;
  arcs.reserve(edges.size() * (directed ? 1 : 2));
  for (const Arc& e : edges) {
    arcs.push_back({e.from, e.to, w(e.from, e.to, e.weight)});
    if (!directed) arcs.push_back({e.to, e.from, w(e.to, e.from, e.weight)});
  }
  return arcs;
}

// Self weights 1 - (sum of row i), or 1 - (sum of column i) when `by_column`.
std::vector<double> leftover(int n, std::vector<Arc> arcs, bool by_column) {
  auto key = [by_column](const Arc& a) {
    return by_column ? std::tie(a.from, a.to) : std::tie(a.to, a.from);
  };
  std::sort(arcs.begin(), arcs.end(), [&](const Arc& a, const Arc& b) { return key(a) < key(b); });
  std::vector<double> sum(n, 0.0);
  for (const Arc& a : arcs) sum[by_column ? a.from : a.to] += a.weight;
  std::vector<double> self(n);
  for (int i = 0; i < n; ++i) self[i] = std::max(0.0, 1.0 - sum[i]);
  return self;
}

}  // namespace

Graph weigh(int n, bool directed, const EdgeList& round, WeightKind kind) {
  std::vector<int> in_deg(n, 0), out_deg(n, 0);
  for (const Arc& e : round.edges) {
    ++out_deg[e.from];
    ++in_deg[e.to];
    if (!directed) ++out_deg[e.to], ++in_deg[e.from];
  }
  const int max_deg = n > 0 ? *std::max_element(in_deg.begin(), in_deg.end()) : 0;
  std::vector<Arc> arcs;
  std::vector<double> self;
  switch (kind) {
    case WeightKind::kMetropolis:
      GOSSIP_CHECK(!directed);
      arcs = make_arcs(directed, round.edges, [&](int a, int b, double) {
        return 1.0 / (1.0 + std::max(in_deg[a], in_deg[b]));
      });
      self = leftover(n, arcs, false);
      break;
    case WeightKind::kMaxDegree:
      GOSSIP_CHECK(!directed);
      arcs = make_arcs(directed, round.edges,
                       [&](int, int, double) { return 1.0 / (1.0 + max_deg); });
      self = leftover(n, arcs, false);
      break;
    case WeightKind::kUniform:  // row i: 1 / (in-degree of i + 1), self included
      arcs = make_arcs(directed, round.edges,
                       [&](int, int to, double) { return 1.0 / (1.0 + in_deg[to]); });
      for (int i = 0; i < n; ++i) self.push_back(1.0 / (1.0 + in_deg[i]));
      break;
    case WeightKind::kPushSum:  // column i: 1 / (out-degree of i + 1), self included
      arcs = make_arcs(directed, round.edges,
                       [&](int from, int, double) { return 1.0 / (1.0 + out_deg[from]); });
      for (int i = 0; i < n; ++i) self.push_back(1.0 / (1.0 + out_deg[i]));
      break;
    case WeightKind::kExplicit:
    case WeightKind::kGenerator:
      arcs = make_arcs(directed, round.edges, [](int, int, double w) { return w; });
      self = round.self_weights.empty() ? leftover(n, arcs, directed) : round.self_weights;
      break;
  }
  return Graph(n, directed, std::move(arcs), std::move(self));
}

}  // namespace gossip::topo
