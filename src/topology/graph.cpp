// topology/graph.cpp: the sparse mixing matrix of one round (CSR rows and columns), the
// round-indexed Topology around it, and its fingerprint.
#include <algorithm>
#include <bit>
#include <cmath>
#include <tuple>

#include "gossip/core.hpp"
#include "gossip/rng.hpp"
#include "src/topology/internal.hpp"

namespace gossip {

namespace {

struct WeightName {
  WeightKind kind;
  const char* name;
};
constexpr WeightName kWeightNames[] = {
    {WeightKind::kMetropolis, "metropolis"}, {WeightKind::kUniform, "uniform"},
    {WeightKind::kMaxDegree, "max-degree"},  {WeightKind::kPushSum, "push-sum"},
    {WeightKind::kExplicit, "explicit"},     {WeightKind::kGenerator, "generator"},
};

// Fills a CSR structure from arcs already sorted by (key, other).
template <typename Key, typename Other>
void fill_csr(int n, const std::vector<Arc>& sorted, Key key, Other other,
              std::vector<std::int64_t>& start, std::vector<Neighbour>& out) {
  start.assign(n + 1, 0);
  out.clear();
  out.reserve(sorted.size());
  for (const Arc& a : sorted) {
    ++start[key(a) + 1];
    out.push_back({other(a), a.weight});
  }
  for (int i = 0; i < n; ++i) start[i + 1] += start[i];
}

}  // namespace

const char* weight_kind_name(WeightKind kind) {
  for (const auto& w : kWeightNames)
    if (w.kind == kind) return w.name;
  return "?";
}

WeightKind parse_weight_kind(const std::string& name) {
  for (const auto& w : kWeightNames)
    if (name == w.name) return w.kind;
  throw InputError(cat("unknown weights '", name,
                       "' (expected metropolis, uniform, max-degree, push-sum or explicit)"));
}

Graph::Graph(int n, bool directed, std::vector<Arc> arcs, std::vector<double> self_weights)
    : n_(n), directed_(directed), self_(std::move(self_weights)) {
  GOSSIP_CHECK_GE(n, 1);
  GOSSIP_CHECK_EQ(self_.size(), static_cast<std::size_t>(n));
  for (const Arc& a : arcs) {
    GOSSIP_CHECK_MSG(a.from >= 0 && a.from < n && a.to >= 0 && a.to < n && a.from != a.to,
                     "bad arc ", a.from, " -> ", a.to, " for n = ", n);
    GOSSIP_CHECK_MSG(a.weight > 0.0 && std::isfinite(a.weight), "bad weight ", a.weight);
  }
  std::sort(arcs.begin(), arcs.end(), [](const Arc& a, const Arc& b) {
    return std::tie(a.to, a.from) < std::tie(b.to, b.from);
  });
  for (std::size_t i = 1; i < arcs.size(); ++i)
    GOSSIP_CHECK_MSG(arcs[i].to != arcs[i - 1].to || arcs[i].from != arcs[i - 1].from,
                     "duplicate arc ", arcs[i].from, " -> ", arcs[i].to);
  fill_csr(n, arcs, [](const Arc& a) { return a.to; }, [](const Arc& a) { return a.from; },
           in_start_, in_);
  std::stable_sort(arcs.begin(), arcs.end(),
                   [](const Arc& a, const Arc& b) { return a.from < b.from; });
  fill_csr(n, arcs, [](const Arc& a) { return a.from; }, [](const Arc& a) { return a.to; },
           out_start_, out_);

  row_stochastic_ = column_stochastic_ = symmetric_ = true;
  for (int i = 0; i < n; ++i) {
    double row = self_[i], col = self_[i];
    for (const Neighbour& nb : in_neighbours(i)) row += nb.weight;
    for (const Neighbour& nb : out_neighbours(i)) {
      col += nb.weight;
      if (std::abs(nb.weight - weight(i, nb.peer)) > 1e-12) symmetric_ = false;
    }
    if (std::abs(row - 1.0) > topo::kSumTolerance) row_stochastic_ = false;
    if (std::abs(col - 1.0) > topo::kSumTolerance) column_stochastic_ = false;
  }
  if (!directed_) GOSSIP_CHECK_MSG(in_.size() == out_.size(), "undirected arcs not symmetric");
}

std::span<const Neighbour> Graph::in_neighbours(int peer) const {
  GOSSIP_CHECK_MSG(peer >= 0 && peer < n_, "peer ", peer, " out of range (n = ", n_, ")");
  return {in_.data() + in_start_[peer], in_.data() + in_start_[peer + 1]};
}

std::span<const Neighbour> Graph::out_neighbours(int peer) const {
  GOSSIP_CHECK_MSG(peer >= 0 && peer < n_, "peer ", peer, " out of range (n = ", n_, ")");
  return {out_.data() + out_start_[peer], out_.data() + out_start_[peer + 1]};
}

double Graph::self_weight(int peer) const {
  GOSSIP_CHECK_MSG(peer >= 0 && peer < n_, "peer ", peer, " out of range (n = ", n_, ")");
  return self_[peer];
}

double Graph::weight(int to, int from) const {
  if (to == from) return self_weight(to);
  auto row = in_neighbours(to);
  auto it = std::lower_bound(row.begin(), row.end(), from,
                             [](const Neighbour& nb, int id) { return nb.peer < id; });
  return it != row.end() && it->peer == from ? it->weight : 0.0;
}

std::vector<Arc> Graph::edges() const {
  std::vector<Arc> result;
  for (int from = 0; from < n_; ++from)
    for (const Neighbour& nb : out_neighbours(from))
      if (directed_ || from < nb.peer) result.push_back({from, nb.peer, nb.weight});
  return result;
}

Topology::Topology(std::vector<Graph> rounds, std::string kind, WeightKind weights)
    : rounds_(std::move(rounds)), kind_(std::move(kind)), weights_(weights) {
  GOSSIP_CHECK(!rounds_.empty());
  for (const Graph& g : rounds_) {
    GOSSIP_CHECK_EQ(g.n(), rounds_.front().n());
    GOSSIP_CHECK_EQ(g.directed(), rounds_.front().directed());
  }
}

void Topology::set_epochs(std::vector<Epoch> epochs) {
  GOSSIP_CHECK(!epochs.empty() && epochs.front().from == 0);
  for (std::size_t e = 0; e < epochs.size(); ++e) {
    GOSSIP_CHECK(!epochs[e].rounds.empty());
    GOSSIP_CHECK(e == 0 || epochs[e].from > epochs[e - 1].from);
    for (const Graph& g : epochs[e].rounds) GOSSIP_CHECK_EQ(g.n(), n());
  }
  epochs_ = std::move(epochs);
}

std::size_t Topology::epoch_index(std::int64_t round) const {
  if (epochs_.empty()) return 0;
  const auto it = std::upper_bound(epochs_.begin(), epochs_.end(), round,
                                   [](std::int64_t r, const Epoch& e) { return r < e.from; });
  return static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, it - epochs_.begin() - 1));
}

std::vector<int> Topology::members(std::int64_t round) const {
  if (!epochs_.empty()) return epochs_[epoch_index(round)].members;
  std::vector<int> all(static_cast<std::size_t>(n()));
  for (int i = 0; i < n(); ++i) all[static_cast<std::size_t>(i)] = i;
  return all;
}

std::span<const Graph> Topology::epoch_rounds(std::int64_t round) const {
  if (epochs_.empty()) return rounds_;
  return epochs_[epoch_index(round)].rounds;
}

const Graph& Topology::at(std::int64_t round) const {
  GOSSIP_CHECK_GE(round, 0);
  if (!epochs_.empty()) {
    const auto& rounds = epochs_[epoch_index(round)].rounds;
    return rounds[static_cast<std::size_t>(round % static_cast<std::int64_t>(rounds.size()))];
  }
  GOSSIP_CHECK(!rounds_.empty());
  return rounds_[static_cast<std::size_t>(round % period())];
}

std::optional<std::string> Topology::address(int peer) const {
  GOSSIP_CHECK_MSG(peer >= 0 && peer < n(), "peer ", peer, " out of range (n = ", n(), ")");
  if (addresses_.empty() || addresses_[peer].empty()) return std::nullopt;
  return addresses_[peer];
}

void Topology::set_addresses(std::vector<std::string> addresses) {
  GOSSIP_CHECK(addresses.empty() || addresses.size() == static_cast<std::size_t>(n()));
  addresses_ = std::move(addresses);
}

std::uint64_t Topology::fingerprint() const {
  std::uint64_t h = mix64(0x746f706f6c6f6779ULL);  // "topology"
  auto add = [&h](std::uint64_t v) { h = mix64(h ^ v); };
  add(static_cast<std::uint64_t>(n()));
  add(directed() ? 1 : 0);
  add(static_cast<std::uint64_t>(period()));
  for (const Graph& g : rounds_) {
    for (int i = 0; i < g.n(); ++i) {
      add(std::bit_cast<std::uint64_t>(g.self_weight(i)));
      add(g.in_neighbours(i).size());
      for (const Neighbour& nb : g.in_neighbours(i)) {
        add(static_cast<std::uint64_t>(nb.peer));
        add(std::bit_cast<std::uint64_t>(nb.weight));
      }
    }
  }
  return h;
}

Topology make_lazy(const Topology& topology, double laziness) {
  GOSSIP_CHECK_MSG(laziness >= 0.0 && laziness < 1.0, "laziness ", laziness, " not in [0, 1)");
  std::vector<Graph> rounds;
  for (std::int64_t r = 0; r < topology.period(); ++r) {
    const Graph& g = topology.at(r);
    std::vector<Arc> arcs;
    for (int to = 0; to < g.n(); ++to)
      for (const Neighbour& nb : g.in_neighbours(to))
        arcs.push_back({nb.peer, to, (1.0 - laziness) * nb.weight});
    std::vector<double> self(static_cast<std::size_t>(g.n()));
    for (int i = 0; i < g.n(); ++i) self[static_cast<std::size_t>(i)] =
        laziness + (1.0 - laziness) * g.self_weight(i);
    rounds.emplace_back(g.n(), g.directed(), std::move(arcs), std::move(self));
  }
  Topology lazy(std::move(rounds), topology.kind(), WeightKind::kExplicit);
  if (topology.has_addresses()) {
    std::vector<std::string> addresses;
    for (int i = 0; i < topology.n(); ++i) addresses.push_back(topology.address(i).value_or(""));
    lazy.set_addresses(std::move(addresses));
  }
  return lazy;
}

}  // namespace gossip
