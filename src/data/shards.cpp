// data/shards.cpp: splitting a data set among peers (iid, Dirichlet label skew, label shards).
//
// Every peer process computes the same split from (seed, Stream::kShard) and keeps its own list,
// so no coordination is needed. All three kinds are disjoint and covering by construction; each
// peer's list is sorted at the end so the split does not depend on the order it was built in.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/rng.hpp"

namespace gossip {
namespace {

using Shards = std::vector<std::vector<std::int64_t>>;

template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& g) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_below(g, i)]);
}

/// log of a Gamma(shape, 1) sample. Marsaglia & Tsang (2000) for shape >= 1; for shape < 1,
/// Gamma(a) = Gamma(a + 1) * U^(1/a), kept in logs so small alphas do not underflow to 0.
double log_gamma_sample(double shape, std::mt19937_64& g) {
  if (shape < 1.0) {
    const double u = 1.0 - uniform01(g);  // (0, 1]
    return log_gamma_sample(shape + 1.0, g) + std::log(u) / shape;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal01(g);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = 1.0 - uniform01(g);
    if (u < 1.0 - 0.0331 * x * x * x * x) return std::log(d * v);
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return std::log(d * v);
  }
}

/// A Dirichlet(alpha, ..., alpha) sample of length k: normalised Gamma(alpha) draws.
std::vector<double> dirichlet(int k, double alpha, std::mt19937_64& g) {
  std::vector<double> p(k);
  for (double& x : p) x = log_gamma_sample(alpha, g);
  const double top = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& x : p) sum += (x = std::exp(x - top));
  for (double& x : p) x /= sum;
  return p;
}

Shards split_iid(std::int64_t n, int n_peers, std::mt19937_64& g) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  shuffle(perm, g);
  Shards out(n_peers);
  for (int p = 0; p < n_peers; ++p) {
    out[p].assign(perm.begin() + n * p / n_peers, perm.begin() + n * (p + 1) / n_peers);
  }
  return out;
}

/// Moves one random sample from the largest peer to each empty one (n >= n_peers, so the largest
/// has at least two whenever some peer has none).
void fill_empty_peers(Shards& out, std::mt19937_64& g) {
  for (auto& empty : out) {
    if (!empty.empty()) continue;
    auto& donor = *std::max_element(
        out.begin(), out.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
    const std::size_t k = uniform_below(g, donor.size());
    std::swap(donor[k], donor.back());
    empty.push_back(donor.back());
    donor.pop_back();
  }
}

/// Per class, proportions across peers ~ Dirichlet(alpha); the class's shuffled samples are cut
/// at the cumulative proportions.
Shards split_dirichlet(const std::vector<std::int32_t>& labels, int classes, int n_peers,
                       double alpha, std::mt19937_64& g) {
  std::vector<std::vector<std::int64_t>> by_class(classes);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    by_class[labels[i]].push_back(static_cast<std::int64_t>(i));
  }
  Shards out(n_peers);
  for (auto& members : by_class) {
    shuffle(members, g);
    const std::vector<double> p = dirichlet(n_peers, alpha, g);
    const auto count = static_cast<std::int64_t>(members.size());
    double cum = 0.0;
    std::int64_t start = 0;
    for (int k = 0; k < n_peers; ++k) {
      cum += p[k];
      std::int64_t end = k + 1 == n_peers ? count : std::llround(cum * static_cast<double>(count));
      end = std::clamp(end, start, count);
      out[k].insert(out[k].end(), members.begin() + start, members.begin() + end);
      start = end;
    }
  }
  fill_empty_peers(out, g);
  return out;
}

/// Sorts by label, cuts into n_peers * per_peer contiguous shards, gives each peer per_peer
/// random ones: each peer sees only a few classes.
Shards split_label_shards(const std::vector<std::int32_t>& labels, int n_peers, int per_peer,
                          std::mt19937_64& g) {
  const auto n = static_cast<std::int64_t>(labels.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return labels[a] < labels[b]; });
  const std::int64_t total = std::int64_t{n_peers} * per_peer;
  std::vector<std::int64_t> shard_ids(static_cast<std::size_t>(total));
  std::iota(shard_ids.begin(), shard_ids.end(), std::int64_t{0});
  shuffle(shard_ids, g);
  Shards out(n_peers);
  for (std::int64_t j = 0; j < total; ++j) {
    const std::int64_t s = shard_ids[j];
    auto& dst = out[j / per_peer];
    dst.insert(dst.end(), order.begin() + n * s / total, order.begin() + n * (s + 1) / total);
  }
  return out;
}

void check_spec(const std::vector<std::int32_t>& labels, int classes, int n_peers,
                const ShardSpec& spec) {
  const auto n = static_cast<std::int64_t>(labels.size());
  if (n_peers < 1) throw InputError(cat("sharding: need at least one peer, got ", n_peers));
  if (classes < 1) throw InputError(cat("sharding: need at least one class, got ", classes));
  if (n < n_peers) {
    throw InputError(cat("sharding: cannot give each of ", n_peers, " peers a sample: only ", n,
                         " samples"));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw InputError(cat("sharding: label ", labels[i], " at index ", i,
                           " is outside 0..", classes - 1));
    }
  }
  if (spec.kind == ShardKind::kDirichlet && !(spec.alpha > 0.0 && std::isfinite(spec.alpha))) {
    throw InputError(cat("sharding: dirichlet alpha must be > 0, got ", spec.alpha));
  }
  if (spec.kind == ShardKind::kShards) {
    if (spec.shards_per_peer < 1) {
      throw InputError(cat("sharding: shards_per_peer must be >= 1, got ", spec.shards_per_peer));
    }
    if (n < std::int64_t{n_peers} * spec.shards_per_peer) {
      throw InputError(cat("sharding: ", n_peers, " peers x ", spec.shards_per_peer,
                           " shards need at least that many samples, have ", n));
    }
  }
}

}  // namespace

ShardKind parse_shard_kind(const std::string& name) {
  if (const auto* row = find_choice(shard_kind_table(), name)) return row->kind;
  throw InputError(cat("unknown shard kind '", name, "' (expected ",
                       choice_list(shard_kind_table()), ")"));
}

std::vector<std::vector<std::int64_t>> make_shards(const std::vector<std::int32_t>& labels,
                                                   int classes, int n_peers,
                                                   const ShardSpec& spec, std::uint64_t seed) {
  check_spec(labels, classes, n_peers, spec);
  auto g = make_rng(seed, 0, Stream::kShard);
  Shards out;
  switch (spec.kind) {
    case ShardKind::kIid:
      out = split_iid(static_cast<std::int64_t>(labels.size()), n_peers, g);
      break;
    case ShardKind::kDirichlet:
      out = split_dirichlet(labels, classes, n_peers, spec.alpha, g);
      break;
    case ShardKind::kShards:
      out = split_label_shards(labels, n_peers, spec.shards_per_peer, g);
      break;
  }
  for (auto& s : out) std::sort(s.begin(), s.end());
  return out;
}

}  // namespace gossip
