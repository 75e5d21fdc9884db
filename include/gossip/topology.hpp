/// topology: who talks to whom, with what weight, in which round. A Topology is a sequence of
/// Graphs indexed by round (period 1 for a static graph); each Graph holds the mixing matrix W
/// of one round as sparse rows and columns. Generators (ring, torus, exponential, Base-(k+1),
/// ...), the YAML loader/writer and the analysis (connectivity, diameter, spectral gap) live in
/// src/topology. Depends on core and the YAML reader of config (gossip/yaml.hpp); Eigen stays
/// inside src/topology.
///
/// Weight convention (one matrix for every algorithm): x_next = W x, so W[i][j] is the fraction
/// of peer j's value that ends up at peer i.
///   - Pull mixing (D-PSGD, undirected graphs): peer i computes
///       x_i <- W[i][i] x_i + sum over in_neighbours(i) of W[i][j] x_j
///     which needs row i to sum to 1 (row stochastic; doubly stochastic keeps the average).
///   - Push-sum (directed graphs): peer i keeps W[i][i] of its (value, weight) pair and sends
///     W[k][i] of it to each out-neighbour k; out_neighbours(i) carries exactly those
///     fractions, so column i sums to 1 (column stochastic).
/// Neighbour lists are in ascending peer id and never contain the peer itself.
#pragma once
#if !defined(GOSSIP_ROOM_TOPOLOGY)
#error "gossip/topology.hpp belongs to room topology, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <limits>
#include <cstdio>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossip/choice.hpp"
#include "gossip/exchange.hpp"
#include "gossip/json.hpp"

namespace gossip {

/// How mixing weights were chosen.
enum class WeightKind {
  kMetropolis,  // W[i][j] = 1 / (1 + max(deg i, deg j)); symmetric, doubly stochastic
  kUniform,     // W[i][j] = 1 / (deg i + 1) for j in N(i) and j = i; row stochastic
  kMaxDegree,   // W[i][j] = 1 / (max degree + 1); symmetric, doubly stochastic
  kPushSum,     // W[k][i] = 1 / (out-degree i + 1); column stochastic (directed default)
  kExplicit,    // given per edge in the file
  kGenerator,   // set by the generator itself (Base-(k+1) graphs)
};

/// "metropolis" | "uniform" | "max-degree" | "push-sum" | "explicit" | "generator".
const char* weight_kind_name(WeightKind kind);
/// Inverse of weight_kind_name; throws InputError naming the accepted values.
WeightKind parse_weight_kind(const std::string& name);

/// One entry of a sparse row or column of W.
struct Neighbour {
  int peer = 0;
  double weight = 0.0;
};

/// One weighted arc: `to` takes `weight` of `from`'s value, i.e. W[to][from] = weight.
struct Arc {
  int from = 0;
  int to = 0;
  double weight = 0.0;
};

/// The mixing matrix of one round, stored as sparse rows (in-neighbours) and columns
/// (out-neighbours). Immutable after construction; safe to read from many threads.
class Graph {
 public:
  Graph() = default;
  /// Builds W from arcs (from != to, each (from, to) at most once, weight > 0) and one self
  /// weight per peer. `directed == false` promises the arc set is symmetric. Broken invariants
  /// throw RuntimeError (user input is validated by the loader before it gets here).
  Graph(int n, bool directed, std::vector<Arc> arcs, std::vector<double> self_weights);

  int n() const { return n_; }
  bool directed() const { return directed_; }
  /// Row i without the diagonal: (j, W[i][j]) for every j that i takes from, ascending j.
  std::span<const Neighbour> in_neighbours(int peer) const;
  /// Column i without the diagonal: (k, W[k][i]) for every k that takes from i, ascending k.
  std::span<const Neighbour> out_neighbours(int peer) const;
  /// W[i][i].
  double self_weight(int peer) const;
  /// W[to][from] (0 when there is no such arc; W[i][i] for to == from).
  double weight(int to, int from) const;
  /// Number of arcs (a -> b with a != b); an undirected edge counts as two arcs.
  std::int64_t arc_count() const { return static_cast<std::int64_t>(in_.size()); }
  /// Edges for people: undirected {a, b} with a < b, or directed (from, to); sorted.
  std::vector<Arc> edges() const;

  /// Row sums (column sums) all within 1e-9 of 1.
  bool row_stochastic() const { return row_stochastic_; }
  bool column_stochastic() const { return column_stochastic_; }
  bool doubly_stochastic() const { return row_stochastic_ && column_stochastic_; }
  /// W[i][j] == W[j][i] for all i, j (within 1e-12).
  bool symmetric() const { return symmetric_; }

 private:
  int n_ = 0;
  bool directed_ = false;
  std::vector<std::int64_t> in_start_, out_start_;  // n + 1 offsets (CSR)
  std::vector<Neighbour> in_, out_;
  std::vector<double> self_;
  bool row_stochastic_ = false;
  bool column_stochastic_ = false;
  bool symmetric_ = false;
};

/// Every graph generator, one row each (the `generator:` key of a topology file and `gossip topo
/// --generate`): X(id, name, direction, lattice, fewest peers, elastic, own weights, the keys
/// it needs, the keys it may take, summary). Lattice: sized by rows and cols, each at least
/// `fewest`. Elastic: its graph is a function of the member set (`elastic: true`). Own weights:
/// what it sets when `weights:` is left out (push-sum or metropolis otherwise, by direction).
/// Keys (K(...), up to two): those besides n, weights and peers.
#define GOSSIP_GENERATORS(X)                                                                     \
  X(kRing, "ring", kEither, false, 3, true, std::nullopt, K(), K("directed"),                    \
    "each peer linked to i - 1 and i + 1 (directed: i sends to i + 1)")                         \
  X(kTorus, "torus", kUndirected, true, 2, false, std::nullopt, K("rows", "cols"), K(),          \
    "a rows x cols grid whose edges wrap around")                                               \
  X(kGrid, "grid", kUndirected, true, 1, false, std::nullopt, K("rows", "cols"), K(),            \
    "a rows x cols grid")                                                                        \
  X(kLine, "line", kUndirected, false, 2, false, std::nullopt, K(), K(),                         \
    "a path 0 - 1 - ... - n-1")                                                                  \
  X(kStar, "star", kUndirected, false, 2, false, std::nullopt, K(), K(),                         \
    "peer 0 linked to every other")                                                             \
  X(kComplete, "complete", kUndirected, false, 2, false, std::nullopt, K(), K(),                 \
    "every pair linked")                                                                         \
  X(kHypercube, "hypercube", kUndirected, false, 2, false, std::nullopt, K(), K(),               \
    "i linked to i xor 2^t (n a power of two)")                                                 \
  X(kErdosRenyi, "erdos-renyi", kUndirected, false, 2, false, std::nullopt, K("p"), K("seed"),   \
    "each pair linked with probability p")                                                      \
  X(kRandomRegular, "random-regular", kUndirected, false, 2, true, std::nullopt, K("degree"),    \
    K("seed"), "a random graph where every peer has `degree` neighbours")                       \
  X(kWattsStrogatz, "watts-strogatz", kUndirected, false, 3, false, std::nullopt,              \
    K("k", "beta"), K("seed"), "a ring lattice of k neighbours, each edge rewired with p. beta") \
  X(kExponential, "exponential", kDirected, false, 2, true, std::nullopt, K(), K("directed"),    \
    "i sends to i + 2^t for every t < log2 n")                                                  \
  X(kOnePeerExponential, "one-peer-exponential", kDirected, false, 2, true, std::nullopt, K(),   \
    K("directed"), "round t: i sends to i + 2^t alone (a period of log2 n rounds)")             \
  X(kBase, "base", kUndirected, false, 2, false, WeightKind::kGenerator, K(), K("k"),           \
    "Base-(k+1) graphs: the exact average in finite rounds, degree at most k")           \
  X(kEpidemic, "epidemic", kDirected, false, 2, false, WeightKind::kUniform, K("s"),            \
    K("seed", "period"), "each round each peer sends to s others drawn at random")              \
  X(kRandomMatching, "random-matching", kUndirected, false, 2, false, std::nullopt, K(),         \
    K("seed", "period"), "each round the peers paired at random (NoLoCo; n odd: one alone)")          \
  X(kEquiStatic, "equistatic", kEither, false, 2, false, WeightKind::kGenerator, K("k"),        \
    K("directed", "seed"), "EquiTopo's EquiStatic: the mean of k random shift graphs")          \
  X(kEquiDyn, "equidyn", kEither, false, 2, false, WeightKind::kGenerator, K(),                 \
    K("directed", "seed"), "EquiTopo's EquiDyn: one random shift a round, one peer each")

/// A generator's graph: undirected, undirected unless `directed: true`, or directed.
enum class GeneratorDirection { kUndirected, kEither, kDirected };

enum class GeneratorKind { GOSSIP_GENERATORS(GOSSIP_CHOICE_ENUM) };

/// A generator's keys besides n, weights and peers (YAML keys, and the `gossip topo --generate`
/// options of the same names); null entries are unused.
struct GeneratorKeys {
  const char* keys[2] = {nullptr, nullptr};
  bool has(std::string_view key) const {
    for (const char* k : keys)
      if (k && key == k) return true;
    return false;
  }
};

struct GeneratorTraits {
  GeneratorKind kind;
  const char* name;
  GeneratorDirection direction;
  bool lattice;   // sized by rows and cols (n = rows * cols)
  int fewest;     // peers (a lattice: rows and cols each at least this)
  bool elastic;   // its graph is a function of the member set
  std::optional<WeightKind> own_weights;  // the weights it sets when weights: is left out
  GeneratorKeys required, optional;
  const char* summary;
  bool seeded() const { return optional.has("seed"); }
};

/// Every generator, in the order documented.
std::span<const GeneratorTraits> generator_table();
/// The row of `kind`.
const GeneratorTraits& traits(GeneratorKind kind);
/// "ring", "torus", ...
inline const char* generator_name(GeneratorKind kind) { return traits(kind).name; }
/// Writes the generator's name (test sections, log lines).
inline std::ostream& operator<<(std::ostream& os, GeneratorKind kind) {
  return os << generator_name(kind);
}
/// "unknown generator 'x' (one of: ring, torus, ...)".
std::string unknown_generator(const std::string& name);
/// The generator named `name`. Throws InputError unknown_generator(name).
GeneratorKind parse_generator(const std::string& name);

/// A generator and its parameters (the `generator:` form of the YAML file).
struct GeneratorSpec {
  GeneratorKind kind = GeneratorKind::kRing;
  int n = 0;                    // peers (torus/grid: rows * cols, may be left 0)
  int rows = 0, cols = 0;       // torus, grid
  int k = 0;                    // watts-strogatz: neighbours (even); base: max degree (>= 1)
  int degree = 0;               // random-regular: d
  double p = 0.0;               // erdos-renyi: edge probability
  double beta = 0.0;            // watts-strogatz: rewiring probability
  std::uint64_t seed = 0;       // random generators
  int s = 0;                    // epidemic: peers each peer sends to in a round
  int period = 0;               // epidemic: rounds drawn before the draws repeat (0: default)
  bool directed = false;        // ring may be directed; exponential kinds and epidemic are
  std::optional<WeightKind> weights;  // default: metropolis (undirected), push-sum (directed),
                                      // uniform (epidemic: the average of what a peer holds)
};

/// A `peers:` entry that gives no address: the members learn it from the peer's own record,
/// signed by its TLS certificate (net.advertise says what it announces).
inline constexpr const char* kLearnedAddress = "learned";

/// An elastic topology (`elastic: true` in a generator file): the generator applied to whichever
/// peers are members, so every peer that knows the member set derives the same graph.
/// generator.n is the number of initial members (ranks 0..n-1); ranks up to max_peers - 1 are
/// the identities that may ever be members.
struct ElasticSpec {
  GeneratorSpec generator;  // ring, exponential, one-peer-exponential or random-regular
  int max_peers = 0;
  /// The file's `peers:` list, one address for each of the max_peers identities (or none).
  std::vector<std::string> addresses;
};

/// A peer network: n peers, one Graph per round of a period (1 for static graphs), optional
/// addresses. Immutable after construction apart from set_addresses; reads are thread-safe.
class Topology {
 public:
  Topology() = default;
  /// `rounds` must be non-empty, all with the same n and directedness. `kind` names where the
  /// graph came from ("ring", "edges", "sequence", ...).
  Topology(std::vector<Graph> rounds, std::string kind, WeightKind weights);

  int n() const { return rounds_.empty() ? 0 : rounds_.front().n(); }
  bool directed() const { return !rounds_.empty() && rounds_.front().directed(); }
  /// Number of graphs before the sequence repeats; 1 for a static topology.
  std::int64_t period() const { return static_cast<std::int64_t>(rounds_.size()); }
  bool time_varying() const { return rounds_.size() > 1; }
  /// The graph used in round `round` (>= 0): rounds[round mod period].
  const Graph& at(std::int64_t round) const;

  std::span<const Neighbour> in_neighbours(int peer, std::int64_t round) const {
    return at(round).in_neighbours(peer);
  }
  std::span<const Neighbour> out_neighbours(int peer, std::int64_t round) const {
    return at(round).out_neighbours(peer);
  }
  double self_weight(int peer, std::int64_t round) const { return at(round).self_weight(peer); }

  const std::string& kind() const { return kind_; }
  WeightKind weights() const { return weights_; }

  /// host:port of a peer, when the file gave addresses: kLearnedAddress for one the file leaves
  /// to be learned from the peer's signed record (docs/network.md).
  std::optional<std::string> address(int peer) const;
  bool has_addresses() const { return !addresses_.empty(); }
  /// n strings ("" for none) or an empty vector.
  void set_addresses(std::vector<std::string> addresses);

  /// The elastic spec this topology was loaded from (`elastic: true`), else none. The topology
  /// itself is then the graph of the initial members, ranks 0..n-1.
  const std::optional<ElasticSpec>& elastic() const { return elastic_; }
  void set_elastic(ElasticSpec spec) { elastic_ = std::move(spec); }

  /// A run whose members change (plan_membership): from round `from` on, the graphs of
  /// `members`, each epoch over the same n ranks. The first epoch starts at round 0 and is this
  /// topology's own rounds; at() and members() follow the epochs.
  struct Epoch {
    std::int64_t from = 0;
    std::vector<int> members;   // ascending
    std::int64_t announced = 0;  // the round the change that made it was announced
    std::vector<Graph> rounds;  // its period's graphs, used at round mod their count
  };
  void set_epochs(std::vector<Epoch> epochs);
  const std::vector<Epoch>& epochs() const { return epochs_; }
  /// The epoch of `round` (0 without epochs).
  std::size_t epoch_index(std::int64_t round) const;
  /// The ranks that are members at `round`: every rank without epochs.
  std::vector<int> members(std::int64_t round) const;
  /// The graphs of `round`'s epoch (the topology's own period without epochs).
  std::span<const Graph> epoch_rounds(std::int64_t round) const;

  /// Stable 64-bit hash of n, directedness, period and every round's arcs and weights (exact
  /// bit patterns). Addresses, names and the weight kind are not part of it, so a generated
  /// ring and the same ring written out as an edge list agree. Used by the network handshake.
  std::uint64_t fingerprint() const;

 private:
  std::vector<Graph> rounds_;
  std::string kind_;
  WeightKind weights_ = WeightKind::kMetropolis;
  std::vector<std::string> addresses_;
  std::optional<ElasticSpec> elastic_;
  std::vector<Epoch> epochs_;
};

/// The topology a file's `laziness: a` asks for: every round's W replaced by a I + (1 - a) W
/// (each arc's weight times 1 - a, each self weight a + (1 - a) w_ii), so every eigenvalue
/// moves from lambda to a + (1 - a) lambda: at a = 0.5 none is below 0, which gradient_tracking
/// needs. Stochasticity and symmetry are kept; the weights become explicit. 0 <= a < 1.
Topology make_lazy(const Topology& topology, double laziness);

/// The smallest eigenvalue of a symmetric W (n <= 2048), else none.
std::optional<double> smallest_eigenvalue(const Graph& graph);



/// The generators an elastic topology may use ("ring, exponential, ... and random-regular").
std::string elastic_generators();

/// The graph of `members` (distinct ranks below spec.max_peers, any order, at least one): the
/// generator on m = members.size() positions, position k being the k-th smallest member, every
/// edge undirected (exponential: k -- k + 2^t mod m), with Metropolis-Hastings weights, so W is
/// symmetric and doubly stochastic for every member set. Ranks that are not members stay alone
/// (self weight 1). Over spec.max_peers ranks; the same members give the same graph, bit for
/// bit. one-peer-exponential: ceil(log2 m) rounds. random-regular: degree spec.generator.degree
/// (the complete graph when m <= degree; degree + 1 when m * degree is odd), drawn from the
/// seed mixed with the member set, so a new member set draws a new graph.
Topology elastic_topology(const ElasticSpec& spec, std::span<const int> members);

/// The graph of `members` alone: `topology`'s rounds restricted to them (none may have a
/// neighbour outside them), the k-th smallest member renumbered k. What analyze() needs to give
/// an elastic member set's spectral gap, which the other (lone) ranks would hide.
Topology members_only(const Topology& topology, std::span<const int> members);

/// Rounds between a membership change announced at round R and the round it takes effect,
/// R + membership_lead(graph): a view travels one hop a round (it goes to the neighbours ahead
/// of the parameters whenever it changes), so every member of `graph` (the members' graph when
/// the change is announced, over one period) hears of it within its diameter; one round more
/// for the announcing peer to put it in its view and one of slack for a view that misses its
/// round. 2 for a lone member.
std::int64_t membership_lead(const Topology& graph);

/// One membership change of a fault schedule: `join` or `leave` ranks, announced at a round.
struct MembershipChange {
  std::int64_t announced = 0;
  std::vector<int> join, leave;
};
/// Adds `ranks` to `change` as a change of `kind` does (its row's effect: join adds, leave
/// removes); false, leaving `change` as it was, for a kind that changes no member set by itself
/// (a death is dropped once confirmed, drop_member; a join request).
bool add_change(MembershipChange& change, ChangeKind kind, std::span<const int> ranks);
/// The membership timeline of an elastic topology under `changes` (any order; those announced
/// at the same round are one change): each change takes effect at its announcement plus
/// membership_lead of the members' graph then (the graph that has to carry the news), and never
/// before the previous change's round + 1. Returns the epochs over spec.max_peers ranks, the
/// first the initial members 0..n-1 from round 0. Throws InputError, naming the round, for a
/// join of a member or of a rank at or past max_peers, a leave of a non-member, or a leave of
/// every member.
std::vector<Topology::Epoch> plan_membership(const ElasticSpec& spec,
                                             std::vector<MembershipChange> changes);

/// A member of an elastic run that died (its death confirmed by a member at round `announced`)
/// leaves the member set at announced + membership_lead of the graph then: that epoch (a new
/// one, or the one starting there) and every later one lose it, their graphs derived again.
/// Returns the round it takes effect, or -1 when nothing changes (not a member from then on,
/// or the last member).
/// A later epoch that then changes nothing (the dead member's scheduled leave) is removed.
std::int64_t drop_member(Topology& topology, int rank, std::int64_t announced);

/// The round a death announcement carries (what drop_member counts the lead from): the round
/// `confirmed` at which a member's monitor confirmed it, or with monitor.remove_dead_after_rounds
/// (`after` > 0) the round `last_heard` + `after` when that is later (`last_heard`: the latest
/// round of a message this member received from the dead one, -1 for none: then `confirmed` +
/// `after`). Counted in rounds, not seconds, it is the same in gossip run and gossip sim as long
/// as the death is confirmed by then.
std::int64_t dead_announcement_round(std::int64_t confirmed, std::int64_t last_heard,
                                     std::int64_t after);

/// One membership change of an elastic run as it took effect: from round `from` the members
/// are `members`; `joined` each started from the average of its `donors`' models, `left` left
/// gracefully, `dead` were taken out after their death was confirmed.
struct MembershipRecord {
  std::int64_t from = 0;
  std::int64_t announced = 0;
  std::vector<int> members, joined, left;
  std::vector<std::vector<int>> donors;  // per joined peer
  std::vector<int> dead;  // members whose confirmed death took them out of the member set
  double spectral_gap = 0.0;  // per round, of the members' graph from then on
};

/// Adds `a` to `known` unless an announcement of the same rank and kind is there with as early
/// a round (else lowers that one's round to a's); returns whether `known` changed. Every peer,
/// and the launcher's record, keeps its announcements so: the earliest round of each (rank,
/// kind), whatever order they came in.
bool merge_announcement(std::vector<Announcement>& known, const Announcement& a);

/// An elastic run's member timeline with what its peers announced while it ran: the joins and
/// leaves of `scheduled` (the fault schedule's) and of `announced` planned together
/// (plan_membership), then each announced death taken out (drop_member) in the order of its
/// round (then rank). An announcement the member set cannot take (a join of a member, a leave
/// or a death of a non-member, a leave of the last member) is skipped. The same announcements,
/// in whatever order they arrived, give the same epochs: what lets every peer derive the graph
/// alone. `initial` is the elastic topology of the initial members (its spec, its ranks).
Topology elastic_timeline(const Topology& initial, std::span<const MembershipChange> scheduled,
                          std::span<const Announcement> announced);

/// The members that give a joiner of `epoch` (> 0) its first parameters: its in-neighbours in
/// that epoch's graphs (over their period) that were members in the epoch before, ascending.
std::vector<int> join_donors(const Topology& topology, std::size_t epoch, int joiner);

/// The spectral gap per round of the graph of `members` of an elastic topology.
double members_spectral_gap(const ElasticSpec& spec, std::span<const int> members);

/// The changes an elastic topology's epochs make (every epoch after the first), as they take
/// effect: members, joined (with their join_donors), left; `dead` empty (a real run's deaths
/// are not planned). What `gossip run` records of a scheduled membership.
std::vector<MembershipRecord> planned_membership(const Topology& topology);

/// An elastic run's membership timeline as summary.json has it (docs/outputs.md): the initial
/// members from round 0, then one {round, announced, members, joined, left, dead, donors,
/// spectral_gap} a change; and the rounds each of the n ranks was a member for, of `rounds`.
struct MembershipTimeline {
  JsonArray entries;
  std::vector<std::int64_t> member_rounds;
};
MembershipTimeline membership_timeline(std::span<const int> initial, double initial_gap,
                                       std::span<const MembershipRecord> changes, int n,
                                       std::int64_t rounds);

/// How an elastic topology's graph changes with its number of members m: the members 0..m-1.
struct ElasticSize {
  int members = 0;
  double spectral_gap = 0.0;   // per round (of the period's product for one-peer-exponential)
  std::int64_t lead = 0;       // membership_lead: rounds from a change's announcement to effect
};
/// For m = 2, 4, 8, ... up to spec.max_peers, with the initial n and max_peers themselves
/// (each at most 2048: the dense spectral analysis).
std::vector<ElasticSize> elastic_sizes(const ElasticSpec& spec);

/// The rounds an epidemic topology draws when its `period` is not given: at most 1,000, fewer
/// where 1,000 rounds of n * (s + 1) weights would pass the 2^22 a topology may hold.
int epidemic_default_period(int n, int s);


/// Builds a topology from a generator. Throws InputError (no file or line; the loader adds
/// them) when the parameters do not fit, e.g. too few peers, or more than the 2^22 mixing
/// weights load_topology allows.
Topology make_topology(const GeneratorSpec& spec);

/// The largest `seed:` a topology file takes (and `gossip topo --generate --seed`).
inline constexpr std::uint64_t kMaxTopologySeed = 2147483647;

/// A generator's graph together with the seed it was drawn with.
struct Draw {
  GeneratorSpec spec;           // as asked, but with the seed of `topology`
  std::uint64_t first_seed = 0; // the seed asked for
  int draws = 1;                // seeds tried: first_seed, ..., spec.seed
  Topology topology;
  std::vector<std::vector<int>> components;  // as TopologyReport::components
  bool connected() const { return components.size() == 1; }
};

/// Builds a generator's graph. When it is not connected and the generator takes a seed, draws
/// again with seed + 1, seed + 2, ... until a graph is connected, trying at most `max_draws`
/// seeds in all and none above kMaxTopologySeed. Returns the connected draw, or else the last
/// one tried. Throws InputError as make_topology does.
Draw draw_connected(const GeneratorSpec& spec, int max_draws);

/// Loads and validates a YAML topology file. Throws InputError "FILE:LINE: message" for the
/// first problem found (unknown or repeated key, id out of range, self-loop, duplicate edge,
/// bad or non-finite weight, rows that do not sum to 1, too few peers for the generator, ...).
/// A topology may hold at most 2^22 nonzero mixing weights over one period (n self weights per
/// round plus one per arc) and 65536 rounds; bigger ones are refused before anything is built.
Topology load_topology(const std::string& path);
/// Same, from text; `name` stands in for the file name in messages.
Topology load_topology_from_string(const std::string& text, const std::string& name);

/// The generator form of the YAML file (what `gossip topo --generate` writes).
std::string to_yaml(const GeneratorSpec& spec);
/// The explicit form: n, directed, edges (or a sequence of edge lists) with every weight and
/// self weight written exactly, plus peers when present. Loading it gives the same fingerprint.
std::string to_yaml(const Topology& topology);
/// What `gossip topo --generate` writes for a draw: the generator form, or with `edges` the
/// explicit form, after a comment naming the seed when it is not the one asked for.
std::string to_yaml(const Draw& draw, bool edges);

/// What `gossip topo` reports. For a time-varying topology, connectivity, components and
/// diameter are of the union of the graphs over one period; rho is of the product of the
/// period's matrices W(period-1) ... W(0).
/// The decay of the effective number of neighbours unless one is given: the paper's value
/// fitted to its CIFAR-10 runs was 0.951.
inline constexpr double kNeighboursGamma = 0.95;

struct TopologyReport {
  int n = 0;
  bool directed = false;
  std::int64_t period = 1;
  bool connected = false;  // strongly connected for directed graphs
  std::vector<std::vector<int>> components;  // each ascending; ordered by smallest id
  std::optional<int> diameter;               // none when not connected
  // Degrees over all peers and all rounds of the period (in = row, out = column, no self).
  int in_degree_min = 0, in_degree_max = 0;
  double in_degree_mean = 0.0;
  int out_degree_min = 0, out_degree_max = 0;
  double out_degree_mean = 0.0;
  std::int64_t edges = 0;  // undirected edges / directed arcs, summed over the period
  bool row_stochastic = false, column_stochastic = false, doubly_stochastic = false;
  bool symmetric = false;  // every round's W
  bool rho_known = true;        // false when n > 2048: the dense spectral analysis is skipped
                                // and rho, spectral_gap, rho_per_round, rounds_to_1000x are NaN
  double rho = 1.0;             // second-largest eigenvalue modulus (of the period product)
  double spectral_gap = 0.0;    // 1 - rho
  double rho_per_round = 1.0;   // rho^(1 / period), or of a prefix's product (rate_rounds)
  /// The rounds whose product gives rho_per_round: the period, or, where the period's product
  /// is below what doubles resolve (1e-9), the longest 2^j-round prefix still above it.
  std::int64_t rate_rounds = 1;
  /// Predicted rounds to cut disagreement 1000x: period * ln(1000) / -ln(rho), at least one
  /// period; exact_after when averaging is exact; +infinity when rho >= 1 or disconnected.
  double rounds_to_1000x = 0.0;
  bool exact_averaging = false;   // W(t-1)...W(0) == (1/n) 11^T for some t <= period
  std::int64_t exact_after = 0;   // that smallest t (0 when not exact)
  /// The effective number of neighbours (Vogels, Hendrikx and Jaggi, "Beyond spectral gap",
  /// NeurIPS 2022): how much a random walk with decay gamma, x <- W (sqrt(gamma) x + noise),
  /// averages its noise down, as a count of peers: 1 alone, n on the complete graph. With
  /// Sigma = W (gamma Sigma + I) W^T its stationary covariance (a period's W in turn),
  /// n_eff = 1 / ((1 - gamma) mean_i Sigma_ii). NaN when not asked for, above 2048 peers, or
  /// above 256 for a time-varying graph (dense iterations over its period).
  double effective_neighbours = std::numeric_limits<double>::quiet_NaN();
  double neighbours_gamma = kNeighboursGamma;  // the decay it was computed for
};

/// Connected components (strongly connected for directed graphs) of the union of one period's
/// graphs, each ascending, ordered by smallest id. Linear in peers and arcs.
std::vector<std::vector<int>> connected_components(const Topology& topology);

/// Analyses a topology. Dense spectral methods: about a second for n = 1024 when W is symmetric
/// or normal (circulant), several seconds for a general directed graph; skipped above 2048.
/// With `neighbours_gamma` also the effective number of neighbours for that decay (in [0, 1);
/// dense iterations, a few seconds at n = 1024); without it that field is NaN.
TopologyReport analyze(const Topology& topology,
                       std::optional<double> neighbours_gamma = std::nullopt);

/// How `gossip topo FILE` shows a topology.
enum class TopologyFormat { kText, kJson, kDot };

/// Loads and analyses the topology file `file` and writes the report (connectivity, degrees,
/// stochasticity, rho, spectral gap, rounds to cut disagreement 1000x, the effective number of
/// neighbours for decay `neighbours_gamma`), one JSON object, or Graphviz DOT to `out`. Returns
/// kExitOk when connected, kExitDisconnected otherwise; throws InputError for a bad file.
int report_topology_file(const std::string& file, TopologyFormat format, std::FILE* out,
                         double neighbours_gamma = kNeighboursGamma);

/// The fingerprint as 16 hex digits (the report's "fingerprint").
std::string hex64(std::uint64_t v);

/// The report of `file` (`t` loaded from it, `r` its analysis) as an object of the caller's
/// kind: `gossip topo --json`'s JsonObject, or the Python module's dict, the same fields built by
/// this one function (fields in docs/topology.md). Object has add(key, v) for numbers, bools,
/// strings, Object, Array and std::nullopt (null); Array has add(v) for numbers and Objects
/// and Arrays.
template <typename Object, typename Array>
Object topology_report_object(const std::string& file, const Topology& t,
                              const TopologyReport& r) {
  Array components;
  for (const auto& c : r.components) {
    Array ids;
    for (int id : c) ids.add(id);
    components.add(std::move(ids));
  }
  auto degrees = [](int min, int max, double mean) {
    Object d;
    d.add("min", min).add("max", max).add("mean", mean);
    return d;
  };
  Object o;
  o.add("file", file).add("kind", t.kind()).add("n", r.n).add("directed", r.directed);
  o.add("weights", weight_kind_name(t.weights())).add("period", r.period);
  o.add("connected", r.connected).add("components", std::move(components));
  if (r.diameter) o.add("diameter", *r.diameter);
  else o.add("diameter", std::nullopt);
  o.add("edges", r.edges);
  o.add("in_degree", degrees(r.in_degree_min, r.in_degree_max, r.in_degree_mean));
  o.add("out_degree", degrees(r.out_degree_min, r.out_degree_max, r.out_degree_mean));
  o.add("row_stochastic", r.row_stochastic).add("column_stochastic", r.column_stochastic);
  o.add("doubly_stochastic", r.doubly_stochastic).add("symmetric", r.symmetric);
  o.add("rho", r.rho).add("spectral_gap", r.spectral_gap);
  o.add("rho_per_round", r.rho_per_round).add("rate_rounds", r.rate_rounds);
  o.add("spectral_gap_per_round", 1.0 - r.rho_per_round);
  o.add("rounds_to_1000x", r.rounds_to_1000x).add("exact_averaging", r.exact_averaging);
  o.add("effective_neighbours", r.effective_neighbours);
  o.add("neighbours_gamma", r.neighbours_gamma);
  if (r.exact_averaging) o.add("exact_after", r.exact_after);
  else o.add("exact_after", std::nullopt);
  o.add("fingerprint", hex64(t.fingerprint())).add("addresses", t.has_addresses());
  if (t.elastic()) {
    Array sizes;
    for (const ElasticSize& s : elastic_sizes(*t.elastic())) {
      Object size;
      size.add("members", s.members).add("spectral_gap_per_round", s.spectral_gap);
      size.add("lead_rounds", s.lead);
      sizes.add(std::move(size));
    }
    Object elastic;
    elastic.add("max_peers", t.elastic()->max_peers).add("sizes", std::move(sizes));
    o.add("elastic", std::move(elastic));
  } else {
    o.add("elastic", std::nullopt);
  }
  return o;
}

/// "3 components: {0, 2, 5} {1} {3, 4, 6, 7}" (at most 16 ids a component).
std::string components_text(const std::vector<std::vector<int>>& components);

/// How many rounds a peer can get ahead of one of its out-neighbours in a synchronous run, so
/// how many of its rounds a receiver may have to hold: the most hops from an out-neighbour back
/// to the sender in the graph of one period (1 for undirected graphs, n - 1 for a directed ring),
/// times the period. Peers size their queues and shared-memory slots with it.
std::int64_t max_round_lead(const Topology& topology);

}  // namespace gossip
