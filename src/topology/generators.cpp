// topology/generators.cpp: the named graph families. Each generator returns the edges of every
// round of its period; weights are chosen afterwards (weights.cpp) unless the generator sets
// them (Base-(k+1), base_graph.cpp). Random generators draw only from
// make_rng(seed, 0, Stream::kTopology), so a seed gives the same graph everywhere.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/rng.hpp"
#include "src/topology/internal.hpp"

namespace gossip::topo {

namespace {

constexpr int kMaxPeers = 1 << 16;

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

int ceil_log2(int n) {
  int t = 0;
  while ((1 << t) < n) ++t;
  return t;
}

// Collects edges without duplicates or self-loops; undirected pairs are stored as {min, max}.
class EdgeSet {
 public:
  explicit EdgeSet(bool directed) : directed_(directed) {}
  void add(int a, int b) {
    if (a == b) return;
    if (!directed_ && a > b) std::swap(a, b);
    set_.insert({a, b});
  }
  bool has(int a, int b) const {
    if (!directed_ && a > b) std::swap(a, b);
    return set_.count({a, b}) > 0;
  }
  void remove(int a, int b) {
    if (!directed_ && a > b) std::swap(a, b);
    set_.erase({a, b});
  }
  EdgeList take() const {
    EdgeList list;
    for (auto [a, b] : set_) list.edges.push_back({a, b, 0.0});
    return list;
  }

 private:
  bool directed_;
  std::set<std::pair<int, int>> set_;
};

EdgeList lattice(int rows, int cols, bool wrap) {
  EdgeSet s(false);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      int i = r * cols + c;
      if (c + 1 < cols || (wrap && cols > 1)) s.add(i, r * cols + (c + 1) % cols);
      if (r + 1 < rows || (wrap && rows > 1)) s.add(i, ((r + 1) % rows) * cols + c);
    }
  return s.take();
}

EdgeList erdos_renyi(int n, double p, std::uint64_t seed) {
  auto rng = make_rng(seed, 0, Stream::kTopology);
  EdgeSet s(false);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (uniform01(rng) < p) s.add(i, j);
  return s.take();
}

// Pairs the n*d "points" at random, keeping only pairs that make a simple graph, and starts
// over when no suitable pair is left (the pairing method with rejection of bad pairs).
EdgeList random_regular(int n, int d, std::uint64_t seed) {
  auto rng = make_rng(seed, 0, Stream::kTopology);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    EdgeSet s(false);
    std::vector<int> points;
    for (int v = 0; v < n; ++v) points.insert(points.end(), d, v);
    bool stuck = false;
    while (!points.empty() && !stuck) {
      for (std::size_t i = points.size(); i > 1; --i)
        std::swap(points[i - 1], points[uniform_below(rng, i)]);
      std::vector<int> rest;
      for (std::size_t i = 0; i + 1 < points.size(); i += 2) {
        int a = points[i], b = points[i + 1];
        if (a != b && !s.has(a, b)) {
          s.add(a, b);
        } else {
          rest.push_back(a);
          rest.push_back(b);
        }
      }
      if (rest.size() == points.size()) {  // no progress: is any suitable pair left at all?
        std::set<int> left(rest.begin(), rest.end());
        stuck = true;
        for (int a : left)
          for (int b : left)
            if (a < b && !s.has(a, b)) stuck = false;
      }
      points = std::move(rest);
    }
    if (!stuck) return s.take();
  }
  throw InputError(cat("random-regular: no simple ", d, "-regular graph found on ", n,
                       " peers after 1000 attempts"));
}

// Ring lattice with k/2 neighbours on each side, each edge (u, u + j) rewired with
// probability beta to (u, w) for a uniformly drawn w that keeps the graph simple.
EdgeList watts_strogatz(int n, int k, double beta, std::uint64_t seed) {
  auto rng = make_rng(seed, 0, Stream::kTopology);
  EdgeSet s(false);
  std::vector<int> degree(n, 0);
  for (int u = 0; u < n; ++u)
    for (int j = 1; j <= k / 2; ++j) s.add(u, (u + j) % n);
  degree.assign(n, k);
  for (int j = 1; j <= k / 2; ++j)
    for (int u = 0; u < n; ++u) {
      int v = (u + j) % n;
      if (uniform01(rng) >= beta || !s.has(u, v) || degree[u] >= n - 1) continue;
      int w = static_cast<int>(uniform_below(rng, n));
      while (w == u || s.has(u, w)) w = static_cast<int>(uniform_below(rng, n));
      s.remove(u, v);
      s.add(u, w);
      --degree[v];
      ++degree[w];
    }
  return s.take();
}

// ring, line, star, complete, hypercube.
EdgeList simple(GeneratorKind kind, int n) {
  using enum GeneratorKind;
  EdgeSet s(false);
  for (int i = 0; i < n; ++i) {
    if (kind == kRing) s.add(i, (i + 1) % n);
    if (kind == kLine && i + 1 < n) s.add(i, i + 1);
    if (kind == kStar && i > 0) s.add(0, i);
    if (kind == kComplete)
      for (int j = i + 1; j < n; ++j) s.add(i, j);
    if (kind == kHypercube)
      for (int b = 1; b < n; b <<= 1) s.add(i, i ^ b);
  }
  return s.take();
}

// i -> i + 2^t (mod n) for the given exponents t.
EdgeList shifts(int n, int t_begin, int t_end) {
  EdgeSet s(true);
  for (int i = 0; i < n; ++i)
    for (int t = t_begin; t < t_end; ++t) s.add(i, static_cast<int>((i + (1LL << t)) % n));
  return s.take();
}

std::optional<SpecProblem> need_peers(const GeneratorSpec& spec, int least) {
  if (spec.n >= least) return std::nullopt;
  return SpecProblem{"n", cat("generator ", generator_name(spec.kind), " needs at least ", least,
                              " peers (got n: ", spec.n, ")")};
}

std::optional<SpecProblem> check_grid(const GeneratorSpec& spec) {
  const int least = traits(spec.kind).fewest;
  if (spec.rows < least || spec.cols < least)
    return SpecProblem{spec.rows < least ? "rows" : "cols",
                       cat("generator ", generator_name(spec.kind), " needs rows and cols of at least ", least,
                           " (got rows: ", spec.rows, ", cols: ", spec.cols, ")")};
  if (static_cast<long long>(spec.rows) * spec.cols > kMaxPeers)
    return SpecProblem{"rows", cat("rows * cols is more than ", kMaxPeers, " peers")};
  if (spec.n != 0 && spec.n != spec.rows * spec.cols)
    return SpecProblem{"n", cat("n: ", spec.n, " is not rows * cols = ", spec.rows * spec.cols)};
  if (spec.rows * spec.cols < 2)
    return SpecProblem{"rows", cat("generator ", generator_name(spec.kind),
                                   " needs at least 2 peers")};
  return std::nullopt;
}

std::optional<SpecProblem> check_probability(const char* key, double v) {
  if (v >= 0.0 && v <= 1.0) return std::nullopt;
  return SpecProblem{key, cat(key, " must be between 0 and 1 (got ", v, ")")};
}

std::optional<SpecProblem> check_parameters(const GeneratorSpec& s) {
  using enum GeneratorKind;
  const GeneratorKind k = s.kind;
  if (traits(k).lattice) return check_grid(s);
  if (auto p = need_peers(s, traits(k).fewest)) return p;
  if (k == kHypercube && !is_power_of_two(s.n))
    return SpecProblem{"n", cat("generator hypercube needs n a power of two (got ", s.n, ")")};
  if (k == kErdosRenyi) return check_probability("p", s.p);
  if (k == kRandomRegular) {
    if (s.degree < 1 || s.degree >= s.n)
      return SpecProblem{"degree", cat("random-regular needs 1 <= degree < n (got degree: ",
                                       s.degree, ", n: ", s.n, ")")};
    if ((static_cast<long long>(s.n) * s.degree) % 2 != 0)
      return SpecProblem{"degree", cat("random-regular needs n * degree even (got ", s.n,
                                       " * ", s.degree, ")")};
  }
  if (k == kWattsStrogatz) {
    if (s.k < 2 || s.k % 2 != 0 || s.k >= s.n)
      return SpecProblem{"k", cat("watts-strogatz needs k even, 2 <= k < n (got k: ", s.k,
                                  ", n: ", s.n, ")")};
    return check_probability("beta", s.beta);
  }
  if (k == kBase && s.k < 1)
    return SpecProblem{"k", cat("generator base needs k (max degree) >= 1 (got k: ", s.k, ")")};
  if (k == kEquiStatic && (s.k < 1 || s.k > 64))
    return SpecProblem{"k", cat("equistatic needs 1 <= k <= 64 basis graphs (got k: ", s.k, ")")};
  if (k == kRandomMatching && (s.period < 0 || s.period > kMaxRounds))
    return SpecProblem{"period", cat("random-matching's period is 1 to ", kMaxRounds,
                                     " rounds (got ", s.period, ")")};
  if (k == kEpidemic) {
    if (s.s < 1 || s.s >= s.n)
      return SpecProblem{"s", cat("epidemic needs 1 <= s < n (each peer sends to s others a "
                                  "round; got s: ", s.s, ", n: ", s.n, ")")};
    if (s.period < 0 || s.period > kMaxRounds)
      return SpecProblem{"period", cat("epidemic's period is 1 to ", kMaxRounds,
                                       " rounds (got ", s.period, ")")};
  }
  return std::nullopt;
}

/// Round t of an epidemic topology: each peer i sends to s others drawn without replacement
/// from the stream (seed, t * n + i): the same draw wherever it is made (sim = real).
EdgeList epidemic_round(int n, int s, std::uint64_t seed, std::int64_t t) {
  EdgeSet d(true);
  std::vector<int> others(static_cast<std::size_t>(n - 1));
  for (int i = 0; i < n; ++i) {
    auto rng = make_rng(seed, static_cast<std::uint64_t>(t) * static_cast<std::uint64_t>(n) +
                                  static_cast<std::uint64_t>(i),
                        Stream::kTopology);
    for (int j = 0, m = 0; j < n; ++j)
      if (j != i) others[static_cast<std::size_t>(m++)] = j;
    for (int c = 0; c < s; ++c) {  // a partial Fisher-Yates shuffle: the first s are the draw
      const auto pick = c + uniform_below(rng, static_cast<std::uint64_t>(n - 1 - c));
      std::swap(others[static_cast<std::size_t>(c)], others[pick]);
      d.add(i, others[static_cast<std::size_t>(c)]);
    }
  }
  return d.take();
}

/// Round t of a random-matching topology: the peers in the order of a shuffle drawn from the
/// stream (seed, t), paired first with second, third with fourth, ... (n odd: the last alone).
/// Every peer and the simulator draw the same pairs, each end the same partner.
EdgeList matching_round(int n, std::uint64_t seed, std::int64_t t) {
  EdgeSet d(false);
  std::vector<int> order(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  auto rng = make_rng(seed, static_cast<std::uint64_t>(t), Stream::kTopology);
  for (int c = n - 1; c > 0; --c)  // Fisher-Yates
    std::swap(order[static_cast<std::size_t>(c)],
              order[uniform_below(rng, static_cast<std::uint64_t>(c + 1))]);
  for (int c = 0; c + 1 < n; c += 2)
    d.add(order[static_cast<std::size_t>(c)], order[static_cast<std::size_t>(c + 1)]);
  return d.take();
}

/// EquiTopo's shifts (Song et al., NeurIPS 2022): `count` draws, uniform over 1..n-1, from the
/// stream (seed, round).
std::vector<int> equi_shifts(int n, std::uint64_t seed, std::int64_t round, int count) {
  auto rng = make_rng(seed, static_cast<std::uint64_t>(round), Stream::kTopology);
  std::vector<int> out;
  for (int c = 0; c < count; ++c)
    out.push_back(1 + static_cast<int>(uniform_below(rng, static_cast<std::uint64_t>(n - 1))));
  return out;
}

/// The mean of the basis graphs of `shifts`: basis graph a keeps 1/n of each peer's model and
/// takes (n-1)/n of peer i + a's (D-, directed: i pulls from i + a); undirected (U-), the mean of
/// each basis graph and its transpose, so each pair {i, i + a} carries (n-1)/(2n) a shift.
EdgeList equi_mean(int n, const std::vector<int>& shifts, bool directed) {
  std::map<std::pair<int, int>, double> w;
  const double share = static_cast<double>(n - 1) / n / static_cast<double>(shifts.size());
  for (const int a : shifts)
    for (int i = 0; i < n; ++i) {
      const int j = (i + a) % n;
      if (directed) w[{j, i}] += share;  // from j to i: W[i][j]
      else w[{std::min(i, j), std::max(i, j)}] += share / 2;
    }
  EdgeList out;
  for (const auto& [ends, weight] : w) out.edges.push_back({ends.first, ends.second, weight});
  out.self_weights.assign(static_cast<std::size_t>(n), 1.0 / n);
  return out;
}

/// EquiDyn's round t: one shift a from (seed, t), the basis graph's weights halved towards the
/// identity (W = (1 - eta) I + eta W_a with eta = 1/2: each peer keeps (n+1)/(2n) and takes
/// (n-1)/(2n), for which the expected squared disagreement shrinks by about half a round
/// whatever n; eta = 1 would shrink it by only 2/n). Directed: i pulls from i + a. Undirected:
/// pairs {i, i + a} taken greedily from a start s (also drawn) while both ends are free, the
/// peers left out alone.
EdgeList equidyn_round(int n, std::uint64_t seed, std::int64_t t, bool directed) {
  auto rng = make_rng(seed, static_cast<std::uint64_t>(t), Stream::kTopology);
  const int a = 1 + static_cast<int>(uniform_below(rng, static_cast<std::uint64_t>(n - 1)));
  const double take = static_cast<double>(n - 1) / (2.0 * n), keep = 1.0 - take;
  EdgeList out;
  out.self_weights.assign(static_cast<std::size_t>(n), directed ? keep : 1.0);
  if (directed) {
    for (int i = 0; i < n; ++i) out.edges.push_back({(i + a) % n, i, take});
    return out;
  }
  const int start = static_cast<int>(uniform_below(rng, static_cast<std::uint64_t>(n)));
  std::vector<char> paired(static_cast<std::size_t>(n), 0);
  for (int c = 0; c < n; ++c) {
    const int i = (start + c) % n, j = (i + a) % n;
    if (paired[i] || paired[j]) continue;
    paired[i] = paired[j] = 1;
    out.edges.push_back({std::min(i, j), std::max(i, j), take});
    out.self_weights[i] = out.self_weights[j] = keep;
  }
  return out;
}

}  // namespace

bool generator_directed(const GeneratorSpec& spec) {
  const GeneratorDirection d = traits(spec.kind).direction;
  return d == GeneratorDirection::kDirected || (d == GeneratorDirection::kEither && spec.directed);
}

int generator_peers(const GeneratorSpec& spec) {
  if (traits(spec.kind).lattice && spec.n == 0) return spec.rows * spec.cols;
  return spec.n;
}

std::string size_problem(std::int64_t weights) {
  return cat(weights, " mixing weights (n self weights per round plus one per arc), more than "
             "the limit of ", kMaxWeights, " over one period (the complete graph on 2048 peers)");
}

std::int64_t generator_weights(const GeneratorSpec& s) {
  const std::int64_t n = generator_peers(s);
  const std::int64_t log_n = ceil_log2(static_cast<int>(n));
  std::int64_t rounds = 1, arcs = 0;
  switch (s.kind) {
    using enum GeneratorKind;
    case kRing: arcs = s.directed ? n : 2 * n; break;
    case kTorus:
    case kGrid: arcs = 4 * n; break;
    case kLine:
    case kStar: arcs = 2 * (n - 1); break;
    case kComplete: arcs = n * (n - 1); break;
    case kHypercube:
    case kExponential: arcs = n * log_n; break;
    case kErdosRenyi: arcs = static_cast<std::int64_t>(std::ceil(s.p * n * (n - 1))); break;
    case kRandomRegular: arcs = n * s.degree; break;
    case kWattsStrogatz: arcs = n * s.k; break;
    case kOnePeerExponential: rounds = log_n, arcs = n * log_n; break;
    case kEpidemic:
      rounds = s.period > 0 ? s.period : epidemic_default_period(static_cast<int>(n), s.s);
      arcs = rounds * n * s.s;
      break;
    case kRandomMatching:
      rounds = s.period > 0 ? s.period : epidemic_default_period(static_cast<int>(n), 1);
      arcs = rounds * n;
      break;
    case kEquiStatic: arcs = 2 * n * s.k; break;
    case kEquiDyn:
      rounds = epidemic_default_period(static_cast<int>(n), 1);
      arcs = rounds * n;
      break;
    case kBase: {
      // Degree at most k in every round; at most two rounds per base-(k+1) digit of n, plus two.
      const std::int64_t degree = std::min<std::int64_t>(s.k, n - 1);
      std::int64_t digits = 0;
      for (std::int64_t m = n; m > 0; m /= degree + 1) ++digits;
      rounds = 2 * digits + 2;
      arcs = rounds * n * degree;
      break;
    }
  }
  return rounds * n + arcs;
}

std::optional<SpecProblem> check_generator(const GeneratorSpec& spec) {
  const GeneratorTraits& row = traits(spec.kind);
  if (spec.n > kMaxPeers) return SpecProblem{"n", cat("n: at most ", kMaxPeers, " peers")};
  if (spec.directed && !generator_directed(spec))
    return SpecProblem{"directed", cat("generator ", row.name, " is undirected")};
  if (auto p = check_parameters(spec)) return p;
  if (const std::int64_t weights = generator_weights(spec); weights > kMaxWeights)
    return SpecProblem{row.lattice ? "rows" : "n",
                       cat("generator ", row.name, " on ", generator_peers(spec), " peers: ",
                           size_problem(weights))};
  if (spec.weights) {
    const WeightKind w = *spec.weights;
    const bool directed = generator_directed(spec);
    if (row.own_weights == WeightKind::kGenerator && w != WeightKind::kGenerator)
      return SpecProblem{"weights", cat("generator ", row.name, " sets its own weights (leave "
                                        "weights: out)")};
    if (w == WeightKind::kExplicit ||
        (w == WeightKind::kGenerator && row.own_weights != WeightKind::kGenerator))
      return SpecProblem{"weights", cat("weights: ", weight_kind_name(w),
                                        " needs an edges: list, not a generator")};
    if (directed && (w == WeightKind::kMetropolis || w == WeightKind::kMaxDegree))
      return SpecProblem{"weights", cat("weights: ", weight_kind_name(w),
                                        " needs an undirected graph (directed graphs use "
                                        "push-sum or uniform)")};
  }
  return std::nullopt;
}

std::vector<EdgeList> generate_rounds(const GeneratorSpec& s) {
  const int n = generator_peers(s);
  std::vector<EdgeList> rounds;
  switch (s.kind) {
    using enum GeneratorKind;
    case kTorus:
    case kGrid: return {lattice(s.rows, s.cols, s.kind == kTorus)};
    case kErdosRenyi: return {erdos_renyi(n, s.p, s.seed)};
    case kRandomRegular: return {random_regular(n, s.degree, s.seed)};
    case kWattsStrogatz: return {watts_strogatz(n, s.k, s.beta, s.seed)};
    case kExponential: return {shifts(n, 0, ceil_log2(n))};
    case kOnePeerExponential:
      for (int t = 0; t < ceil_log2(n); ++t) rounds.push_back(shifts(n, t, t + 1));
      return rounds;
    case kBase: return base_graph_rounds(n, s.k);
    case kEpidemic: {
      const int period = s.period > 0 ? s.period : epidemic_default_period(n, s.s);
      for (int t = 0; t < period; ++t) rounds.push_back(epidemic_round(n, s.s, s.seed, t));
      return rounds;
    }
    case kRandomMatching: {
      const int period = s.period > 0 ? s.period : epidemic_default_period(n, 1);
      for (int t = 0; t < period; ++t) rounds.push_back(matching_round(n, s.seed, t));
      return rounds;
    }
    case kEquiStatic: return {equi_mean(n, equi_shifts(n, s.seed, 0, s.k), s.directed)};
    case kEquiDyn: {
      const int period = epidemic_default_period(n, 1);
      for (int t = 0; t < period; ++t) rounds.push_back(equidyn_round(n, s.seed, t, s.directed));
      return rounds;
    }
    case kRing:
      if (s.directed) {
        EdgeSet d(true);
        for (int i = 0; i < n; ++i) d.add(i, (i + 1) % n);
        return {d.take()};
      }
      return {simple(s.kind, n)};
    case kLine:
    case kStar:
    case kComplete:
    case kHypercube: return {simple(s.kind, n)};
  }
  return {};  // not reached: every kind has its case
}

}  // namespace gossip::topo

namespace gossip {

int epidemic_default_period(int n, int s) {
  const std::int64_t per_round = static_cast<std::int64_t>(n) * (s + 1);
  return static_cast<int>(std::clamp<std::int64_t>(
      per_round > 0 ? topo::kMaxWeights / per_round : 1, 1, 1000));
}

std::span<const GeneratorTraits> generator_table() {
  using enum GeneratorDirection;
#define K(...) GeneratorKeys{{__VA_ARGS__}}
#define GOSSIP_GENERATOR_ROW(id, name, direction, lattice, fewest, elastic, weights, required, \
                             optional, summary)                                             \
  GeneratorTraits{GeneratorKind::id, name, direction, lattice, fewest, elastic, weights,    \
                  required, optional, summary},
  static const GeneratorTraits rows[] = {GOSSIP_GENERATORS(GOSSIP_GENERATOR_ROW)};
#undef GOSSIP_GENERATOR_ROW
#undef K
  return rows;
}

const GeneratorTraits& traits(GeneratorKind kind) {
  return generator_table()[static_cast<std::size_t>(kind)];
}

std::string unknown_generator(const std::string& name) {
  return cat("unknown generator '", name, "' (one of: ", choice_names(generator_table()), ")");
}

GeneratorKind parse_generator(const std::string& name) {
  if (const GeneratorTraits* row = find_choice(generator_table(), name)) return row->kind;
  throw InputError(unknown_generator(name));
}

Topology make_topology(const GeneratorSpec& spec) {
  if (auto problem = topo::check_generator(spec)) throw InputError(problem->message);
  const bool directed = topo::generator_directed(spec);
  const WeightKind kind =
      spec.weights.value_or(traits(spec.kind).own_weights.value_or(
          directed ? WeightKind::kPushSum : WeightKind::kMetropolis));
  const int n = topo::generator_peers(spec);
  std::vector<Graph> rounds;
  for (const topo::EdgeList& r : topo::generate_rounds(spec))
    rounds.push_back(topo::weigh(n, directed, r, kind));
  return Topology(std::move(rounds), generator_name(spec.kind), kind);
}

}  // namespace gossip
