/// topology internals shared by the files of src/topology (not a public header): the edge list
/// of one round before weights are chosen, the weighting step, generator parameter checks and
/// the spectral part of the analysis (the only file that sees Eigen).
#pragma once
#if !defined(GOSSIP_ROOM_TOPOLOGY)
#error "src/topology/internal.hpp belongs to room topology, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gossip/topology.hpp"

namespace gossip::topo {

/// The edges of one round. Undirected: each pair once as {from < to}; directed: from -> to.
/// `Arc::weight` is read only for explicit and generator weights: W[to][from] (and W[from][to]
/// for undirected edges). `self_weights` is empty (self weight = what is left of the row, or
/// of the column for directed graphs) or has one entry per peer.
struct EdgeList {
  std::vector<Arc> edges;
  std::vector<double> self_weights;
};

/// Tolerance for "sums to 1" everywhere in this module.
inline constexpr double kSumTolerance = 1e-9;

/// Size limits of a topology, checked before anything is built (a few lines of YAML, with
/// anchors and aliases, can ask for gigabytes). A topology holds, over one period, at most
/// kMaxWeights nonzero mixing weights: n self weights per round plus one per arc (an undirected
/// edge is two arcs). 2^22 is the complete graph on 2048 peers, a few hundred MB once built.
inline constexpr std::int64_t kMaxWeights = std::int64_t{1} << 22;
/// At most this many rounds in a period.
inline constexpr std::int64_t kMaxRounds = std::int64_t{1} << 16;
/// "W mixing weights (...), more than the limit of 4194304 over one period (...)".
std::string size_problem(std::int64_t weights);

/// Turns one round's edges into its mixing matrix. The caller has checked that `kind` fits
/// (metropolis and max-degree need undirected graphs) and that explicit weights are valid.
Graph weigh(int n, bool directed, const EdgeList& round, WeightKind kind);

/// A problem with a generator's parameters: the YAML key it concerns and the message.
struct SpecProblem {
  std::string key;
  std::string message;
};

/// Checks a GeneratorSpec without building anything, its size included; nullopt when it is fine.
std::optional<SpecProblem> check_generator(const GeneratorSpec& spec);

/// Peers, directedness and rounds of a generator (spec already checked, n filled in).
bool generator_directed(const GeneratorSpec& spec);
int generator_peers(const GeneratorSpec& spec);
/// Nonzero mixing weights over one period (see kMaxWeights) of a checked spec, from its
/// parameters alone: an upper bound, except erdos-renyi, whose count is the expected one.
std::int64_t generator_weights(const GeneratorSpec& spec);
std::vector<EdgeList> generate_rounds(const GeneratorSpec& spec);

/// Base-(k+1) graph on n peers with max degree k (Takezawa et al., NeurIPS 2023): a sequence
/// of rounds, each with its own weights, whose product is exactly (1/n) 11^T.
std::vector<EdgeList> base_graph_rounds(int n, int k);

/// Second-largest eigenvalue modulus of the period product, and exact averaging. The rate per
/// round is rate_rho^(1 / rate_rounds): the period's product, or, where that product's rho is
/// below what doubles resolve (1e-9: a long period of fast-mixing rounds, as an epidemic
/// topology's 1,000), the longest prefix of 2^j rounds whose rho is still above it.
struct Spectrum {
  double rho = 1.0;
  bool exact = false;
  std::int64_t exact_after = 0;
  double rate_rho = 1.0;
  std::int64_t rate_rounds = 1;
};
Spectrum spectrum(const Topology& topology);
/// Each peer's neighbours as a list, for the searches of the analysis.
using Adjacency = std::vector<std::vector<int>>;
/// Union over the period of the arcs from -> to (`reverse`: to -> from), each list ascending.
Adjacency union_arcs(const Topology& t, bool reverse);
/// Hops from `source` to every peer along `adj`; -1 for the unreachable.
std::vector<int> bfs(const Adjacency& adj, int source);

/// TopologyReport::effective_neighbours: dense n x n iterations, for n <= kMaxSpectralPeers.
double effective_neighbours(const Topology& topology, double gamma);

}  // namespace gossip::topo
