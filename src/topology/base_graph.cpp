// topology/base_graph.cpp: Base-(k+1) graphs (Takezawa, Sato, Bao, Niwa, Yamada: "Beyond
// Exponential Graph: Communication-Efficient Topologies for Decentralized Learning via
// Finite-time Convergence", NeurIPS 2023). A sequence of rounds in which every peer talks to at
// most k others and whose product is exactly (1/n) 11^T, for any n.
//
// Building blocks, written from the paper's construction:
//  - k-peer hyper-hypercube, for m whose prime factors are all <= k+1: write m = f_1...f_L with
//    each f_l in [2, k+1]; in round l the peers whose mixed-radix digits differ only in digit l
//    form a clique of f_l with weights 1/f_l. After L rounds every peer holds the average.
//  - simple Base-(k+1), any m: split m = a_1 b^p_1 + ... + a_L b^p_L in base b = k+1 into groups
//    V_l. (1) Each group averages itself (hyper-hypercube). (2) Step s = 0..L-2: every peer of
//    V_{>s} links to one peer in each of the a_s blocks (size b^p_s) of V_s with weight
//    alpha/a_s, alpha = |V_s| / |V_{>=s}|, which gives V_{>s} the average of V_{>=s}; the
//    unused peers of V_s form cliques (a no-op on the average, helps SGD). (3) Each block of
//    V_s then averages itself again, overlapping later steps, so all peers end equal.
//  - Base-(k+1): with n = n_smooth * n_rest (n_smooth the (k+1)-smooth part of n), either the
//    simple graph on all n, or simple graphs on n_smooth blocks of n_rest in parallel followed
//    by a hyper-hypercube across the blocks, whichever has fewer rounds.
#include <algorithm>

#include "gossip/core.hpp"
#include "src/topology/internal.hpp"

namespace gossip::topo {

namespace {

// Rounds under construction: edges with weights, self weights (1 for idle peers).
class Schedule {
 public:
  explicit Schedule(int n) : n_(n) {}

  std::size_t length() const { return rounds_.size(); }

  void clique(std::size_t round, const std::vector<int>& members) {
    const double w = 1.0 / static_cast<double>(members.size());
    EdgeList& r = at(round);
    for (std::size_t a = 0; a < members.size(); ++a) {
      r.self_weights[members[a]] = w;
      for (std::size_t b = a + 1; b < members.size(); ++b)
        r.edges.push_back({std::min(members[a], members[b]), std::max(members[a], members[b]),
                           w});
    }
  }

  void link(std::size_t round, int i, int j, double w) {
    at(round).edges.push_back({std::min(i, j), std::max(i, j), w});
  }

  void set_self(std::size_t round, int i, double w) { at(round).self_weights[i] = w; }

  std::vector<EdgeList> take() && { return std::move(rounds_); }

 private:
  EdgeList& at(std::size_t round) {
    while (rounds_.size() <= round) rounds_.push_back({{}, std::vector<double>(n_, 1.0)});
    return rounds_[round];
  }

  int n_;
  std::vector<EdgeList> rounds_;
};

// m = f_1 ... f_L with every f_l in [2, k+1], largest factors taken first; empty when m has a
// prime factor above k+1 (or m == 1).
std::vector<int> radix_factors(int m, int k) {
  std::vector<int> factors;
  for (int f = k + 1; f >= 2 && m > 1; --f)
    while (m % f == 0) {
      factors.push_back(f);
      m /= f;
    }
  if (m != 1) factors.clear();
  std::reverse(factors.begin(), factors.end());
  return factors;
}

bool smooth(int m, int k) { return m == 1 || !radix_factors(m, k).empty(); }

std::vector<int> slice(const std::vector<int>& v, std::size_t begin, std::size_t count) {
  return {v.begin() + begin, v.begin() + begin + count};
}

// k-peer hyper-hypercube on `nodes` (size with prime factors <= k+1) from round `start`.
void hyper_hypercube(Schedule& s, std::size_t start, const std::vector<int>& nodes, int k) {
  const int m = static_cast<int>(nodes.size());
  int stride = 1;
  for (int f : radix_factors(m, k)) {
    for (int x = 0; x < m; ++x) {
      if ((x / stride) % f != 0) continue;
      std::vector<int> members;
      for (int c = 0; c < f; ++c) members.push_back(nodes[x + c * stride]);
      s.clique(start, members);
    }
    stride *= f;
    ++start;
  }
}

// Step s of the simple Base-(k+1) graph in `round` (see the file comment).
void merge_step(Schedule& sched, std::size_t round, const std::vector<std::vector<int>>& groups,
                const std::vector<int>& digit, std::size_t s, int k) {
  std::size_t total = 0;
  for (std::size_t l = s; l < groups.size(); ++l) total += groups[l].size();
  const double alpha = static_cast<double>(groups[s].size()) / static_cast<double>(total);
  const int a = digit[s];
  const std::size_t block = groups[s].size() / a;
  std::vector<bool> used(groups[s].size(), false);
  std::size_t next = 0;  // same position in every block
  for (std::size_t l = s + 1; l < groups.size(); ++l)
    for (int i : groups[l]) {
      sched.set_self(round, i, 1.0 - alpha);
      for (int c = 0; c < a; ++c) {
        const std::size_t idx = c * block + next;
        sched.link(round, i, groups[s][idx], alpha / a);
        sched.set_self(round, groups[s][idx], 1.0 - alpha / a);
        used[idx] = true;
      }
      ++next;
    }
  std::vector<int> idle;
  for (std::size_t idx = 0; idx < used.size(); ++idx)
    if (!used[idx]) idle.push_back(groups[s][idx]);
  for (std::size_t i = 0; i + 1 < idle.size(); i += k + 1)
    sched.clique(round, slice(idle, i, std::min<std::size_t>(k + 1, idle.size() - i)));
}

// Simple Base-(k+1) graph on `nodes` from round `start`.
void simple_base(Schedule& sched, std::size_t start, const std::vector<int>& nodes, int k) {
  const int m = static_cast<int>(nodes.size());
  if (m == 1) return;
  if (smooth(m, k)) return hyper_hypercube(sched, start, nodes, k);
  const int b = k + 1;
  std::vector<std::vector<int>> groups;
  std::vector<int> digit, power;
  long long pw = 1;
  int p = 0;
  while (pw * b <= m) pw *= b, ++p;
  std::size_t offset = 0;
  for (int rest = m; pw >= 1; pw /= b, --p) {
    const int d = static_cast<int>(rest / pw);
    if (d == 0) continue;
    groups.push_back(slice(nodes, offset, d * pw));
    digit.push_back(d);
    power.push_back(p);
    offset += d * pw;
    rest -= static_cast<int>(d * pw);
  }
  const std::size_t h = radix_factors(static_cast<int>(groups[0].size()), k).size();
  for (const auto& g : groups) hyper_hypercube(sched, start, g, k);
  for (std::size_t s = 0; s + 1 < groups.size(); ++s) {
    const std::size_t round = start + h + s;
    merge_step(sched, round, groups, digit, s, k);
    const std::size_t block = groups[s].size() / digit[s];
    for (int c = 0; c < digit[s]; ++c)
      hyper_hypercube(sched, round + 1, slice(groups[s], c * block, block), k);
  }
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

std::vector<EdgeList> base_graph_rounds(int n, int k) {
  GOSSIP_CHECK_GE(n, 2);
  GOSSIP_CHECK_GE(k, 1);
  Schedule whole(n);
  simple_base(whole, 0, iota(n), k);

  int n_rest = n;  // n without its prime factors <= k+1
  for (int q = 2; q <= k + 1; ++q)
    while (n_rest % q == 0) n_rest /= q;
  const int n_smooth = n / n_rest;
  Schedule split(n);
  for (int blk = 0; blk < n_smooth; ++blk) {
    std::vector<int> nodes(n_rest);
    for (int j = 0; j < n_rest; ++j) nodes[j] = blk * n_rest + j;
    simple_base(split, 0, nodes, k);
  }
  const std::size_t first = split.length();
  for (int j = 0; j < n_rest; ++j) {
    std::vector<int> nodes(n_smooth);
    for (int blk = 0; blk < n_smooth; ++blk) nodes[blk] = blk * n_rest + j;
    hyper_hypercube(split, first, nodes, k);
  }
  return whole.length() < split.length() ? std::move(whole).take() : std::move(split).take();
}

}  // namespace gossip::topo
