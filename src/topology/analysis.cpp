// topology/analysis.cpp: what `gossip topo` tells a user before launch: connected components
// (strongly connected for directed graphs), diameter, degrees, stochasticity of W, and the
// spectral figures from spectral.cpp. Time-varying topologies are judged on the union of one
// period's graphs (connectivity) and on the product of its matrices (rho).
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "gossip/core.hpp"
#include "src/topology/internal.hpp"

namespace gossip::topo {

namespace {

constexpr int kMaxDiameterPeers = 8192;  // all-pairs BFS beyond this is not worth the wait
constexpr int kMaxSpectralPeers = 2048;  // dense n x n eigenvalues beyond this take minutes


// Strongly connected components (for an undirected graph the arc set is symmetric, so these
// are the connected components): u and v share a component when each reaches the other.
// Kosaraju's two passes with explicit stacks.
std::vector<std::vector<int>> components(const Adjacency& fwd, const Adjacency& rev) {
  const int n = static_cast<int>(fwd.size());
  std::vector<int> order;
  std::vector<bool> seen(n, false);
  for (int root = 0; root < n; ++root) {
    if (seen[root]) continue;
    std::vector<std::pair<int, std::size_t>> stack{{root, 0}};
    seen[root] = true;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      if (next < fwd[u].size()) {
        int v = fwd[u][next++];
        if (!seen[v]) seen[v] = true, stack.push_back({v, 0});
      } else {
        order.push_back(u);
        stack.pop_back();
      }
    }
  }
  std::vector<int> label(n, -1);
  std::vector<std::vector<int>> result;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (label[*it] >= 0) continue;
    result.emplace_back();
    std::vector<int> stack{*it};
    label[*it] = static_cast<int>(result.size()) - 1;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      result.back().push_back(u);
      for (int v : rev[u])
        if (label[v] < 0) label[v] = label[u], stack.push_back(v);
    }
  }
  for (auto& c : result) std::sort(c.begin(), c.end());
  std::sort(result.begin(), result.end());
  return result;
}

void degrees(const Topology& t, TopologyReport& r) {
  r.in_degree_min = r.out_degree_min = std::numeric_limits<int>::max();
  double in_sum = 0, out_sum = 0;
  for (std::int64_t k = 0; k < t.period(); ++k)
    for (int i = 0; i < t.n(); ++i) {
      const int in = static_cast<int>(t.at(k).in_neighbours(i).size());
      const int out = static_cast<int>(t.at(k).out_neighbours(i).size());
      r.in_degree_min = std::min(r.in_degree_min, in);
      r.in_degree_max = std::max(r.in_degree_max, in);
      r.out_degree_min = std::min(r.out_degree_min, out);
      r.out_degree_max = std::max(r.out_degree_max, out);
      in_sum += in;
      out_sum += out;
    }
  const double count = static_cast<double>(t.n()) * static_cast<double>(t.period());
  r.in_degree_mean = in_sum / count;
  r.out_degree_mean = out_sum / count;
}

void stochasticity(const Topology& t, TopologyReport& r) {
  r.row_stochastic = r.column_stochastic = r.symmetric = true;
  r.edges = 0;
  for (std::int64_t k = 0; k < t.period(); ++k) {
    const Graph& g = t.at(k);
    r.row_stochastic = r.row_stochastic && g.row_stochastic();
    r.column_stochastic = r.column_stochastic && g.column_stochastic();
    r.symmetric = r.symmetric && g.symmetric();
    r.edges += g.directed() ? g.arc_count() : g.arc_count() / 2;
  }
  r.doubly_stochastic = r.row_stochastic && r.column_stochastic;
}

}  // namespace

// Union over the period of the arcs from -> to (information flows from `from` to `to`).
Adjacency union_arcs(const Topology& t, bool reverse) {
  Adjacency adj(t.n());
  for (std::int64_t r = 0; r < t.period(); ++r)
    for (int i = 0; i < t.n(); ++i)
      for (const Neighbour& nb : t.at(r).out_neighbours(i))
        reverse ? adj[nb.peer].push_back(i) : adj[i].push_back(nb.peer);
  for (auto& list : adj) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return adj;
}

// Peers reachable from `source`, in BFS distance; -1 for unreachable.
std::vector<int> bfs(const Adjacency& adj, int source) {
  std::vector<int> dist(adj.size(), -1);
  std::queue<int> q;
  dist[source] = 0;
  q.push(source);
  while (!q.empty()) {
    int u = q.front();
    q.pop();
    for (int v : adj[u])
      if (dist[v] < 0) {
        dist[v] = dist[u] + 1;
        q.push(v);
      }
  }
  return dist;
}

}  // namespace gossip::topo

namespace gossip {

std::int64_t max_round_lead(const Topology& t) {
  const int n = t.n();
  if (!t.directed() || n > topo::kMaxDiameterPeers) return t.directed() ? n * t.period() : t.period();
  const topo::Adjacency fwd = topo::union_arcs(t, false);
  std::int64_t lead = 1;
  for (int j = 0; j < n; ++j) {
    const std::vector<int> back = topo::bfs(fwd, j);  // hops from j to every peer
    for (int i = 0; i < n; ++i)
      if (std::binary_search(fwd[i].begin(), fwd[i].end(), j))
        lead = std::max<std::int64_t>(lead, back[i] < 0 ? n : back[i]);
  }
  return lead * t.period();
}

std::vector<std::vector<int>> connected_components(const Topology& t) {
  return topo::components(topo::union_arcs(t, false), topo::union_arcs(t, true));
}

namespace {

/// Rounds to cut disagreement 1000x, from r's spectrum: NaN when it is not known, the rounds to
/// the exact average, never, or ln(1000) / -ln(rho) per period (`rate_rounds` shorter than the
/// period: the rate of that prefix of it).
double rounds_to_1000x(const TopologyReport& r, double rate_rounds) {
  const double ln1000 = std::log(1000.0);
  const double period = static_cast<double>(r.period);
  if (!r.rho_known) return r.rho;
  if (r.exact_averaging) return static_cast<double>(r.exact_after);
  if (r.rho >= 1.0 - 1e-12) return std::numeric_limits<double>::infinity();
  // A long period whose product is below what doubles resolve: the rate of a prefix of it.
  if (rate_rounds < period) return std::max(1.0, ln1000 / -std::log(r.rho_per_round));
  return period * std::max(1.0, ln1000 / -std::log(r.rho));
}

}  // namespace

TopologyReport analyze(const Topology& t, std::optional<double> neighbours_gamma) {
  GOSSIP_CHECK_GE(t.n(), 1);
  TopologyReport r;
  r.n = t.n();
  r.directed = t.directed();
  r.period = t.period();
  const auto fwd = topo::union_arcs(t, false);
  r.components = topo::components(fwd, topo::union_arcs(t, true));
  r.connected = r.components.size() == 1;
  if (r.connected && r.n <= topo::kMaxDiameterPeers) {
    int diameter = 0;
    for (int s = 0; s < r.n; ++s)
      for (int d : topo::bfs(fwd, s)) diameter = std::max(diameter, d);
    r.diameter = diameter;
  }
  topo::degrees(t, r);
  topo::stochasticity(t, r);

  double rate_rho = 1.0, rate_rounds = static_cast<double>(r.period);
  if (!r.connected) {
    r.rho = 1.0;
  } else if (r.n > topo::kMaxSpectralPeers) {
    r.rho_known = false;
    r.rho = std::numeric_limits<double>::quiet_NaN();
  } else {
    const topo::Spectrum s = topo::spectrum(t);
    r.rho = s.rho;
    r.exact_averaging = s.exact;
    r.exact_after = s.exact_after;
    rate_rho = s.rate_rho;
    rate_rounds = static_cast<double>(s.rate_rounds);
  }
  r.spectral_gap = 1.0 - r.rho;
  r.rho_per_round = std::pow(rate_rho, 1.0 / rate_rounds);
  r.rate_rounds = static_cast<std::int64_t>(rate_rounds);
  r.rounds_to_1000x = rounds_to_1000x(r, rate_rounds);
  // A time-varying graph's takes dense iterations over its period: up to 256 peers (a second);
  // a static one's an eigendecomposition (a second at 1,024).
  const int neighbours_max = t.time_varying() ? 256 : topo::kMaxSpectralPeers;
  if (neighbours_gamma && r.n <= neighbours_max) {
    if (!(*neighbours_gamma >= 0.0 && *neighbours_gamma < 1.0))
      throw InputError(cat("the effective neighbours' decay gamma must be in [0, 1), not ",
                           *neighbours_gamma));
    r.neighbours_gamma = *neighbours_gamma;
    r.effective_neighbours = topo::effective_neighbours(t, *neighbours_gamma);
  }
  return r;
}

}  // namespace gossip
