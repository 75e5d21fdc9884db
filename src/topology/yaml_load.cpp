// topology/yaml_load.cpp: reads a topology file. Either `generator:` with its parameters, or
// `edges:` (one graph), or `sequence:` (a list of edge lists, one per round of the period);
// `n`, `directed`, `weights`, `self_weights`, `laziness` and `peers` around them. Every problem is reported
// as "FILE:LINE: message" for the first one found; nothing invalid reaches Graph, and nothing
// larger than the size limits of internal.hpp is built or even parsed.
#include <algorithm>
#include <map>
#include <set>

#include "gossip/core.hpp"
#include "gossip/yaml.hpp"
#include "src/topology/internal.hpp"
#include "src/topology/peers.hpp"

namespace gossip {

namespace {

constexpr int kMaxPeers = 1 << 16;
const std::vector<std::string> kCommonKeys = {"n",    "weights",     "peers",
                                              "name", "description", "laziness"};

// One round parsed from an `edges:` list, with the line of every edge for later messages.
struct ParsedRound {
  topo::EdgeList list;
  std::vector<int> lines;
  std::vector<int> self_lines;
  bool weighted = false;
};

class Loader {
 public:
  explicit Loader(yaml::Document in) : in_(std::move(in)), root_(in_.root()) {}

  Topology load() {
    if (in_.empty()) in_.fail(1, "empty topology file");
    if (!root_.is_map())
      in_.fail(root_, "expected a map of keys (generator: ... or edges: ...)");
    const bool gen = root_["generator"].defined();
    const bool edges = root_["edges"].defined();
    const bool seq = root_["sequence"].defined();
    if (gen + edges + seq != 1)
      in_.fail(root_, gen + edges + seq == 0
                         ? "give a generator: or an edges: list (or a sequence: of edge lists)"
                         : "give only one of generator:, edges: and sequence:");
    Topology t = gen ? from_generator() : from_edges(seq);
    if (root_["laziness"].defined()) {
      const double a = in_.number(root_["laziness"], "laziness");
      if (!(a >= 0.0 && a < 1.0))
        in_.fail(root_["laziness"], cat("laziness: ", a, " is not in [0, 1) (the share of its own "
                                        "model each peer keeps before the weights apply)"));
      if (a > 0.0) t = make_lazy(t, a);
    }
    if (root_["peers"].defined() && t.elastic()) {
      // An elastic topology's peers: are its max_peers identities, the members' graphs take
      // theirs from them.
      ElasticSpec spec = *t.elastic();
      spec.addresses = topo::parse_peers(in_, root_["peers"], spec.max_peers);
      t.set_addresses({spec.addresses.begin(), spec.addresses.begin() + t.n()});
      t.set_elastic(std::move(spec));
    } else if (root_["peers"].defined()) {
      t.set_addresses(topo::parse_peers(in_, root_["peers"], t.n()));
    }
    return t;
  }

 private:
  int key_line(const std::string& key) const { return keys_.at(key).line(); }

  std::optional<WeightKind> weights_key() const {
    if (!root_["weights"].defined()) return std::nullopt;
    const std::string name = in_.text(root_["weights"], "weights");
    try {
      return parse_weight_kind(name);
    } catch (const InputError& e) {
      in_.fail(root_["weights"], e.what());
    }
  }

  int peers_from_list() const {
    const yaml::Node list = root_["peers"];
    if (!list.is_sequence()) in_.fail(root_, "missing key 'n' (number of peers)");
    if (list.size() > kMaxPeers)
      in_.fail(list, cat("peers: ", list.size(), " entries, more than ", kMaxPeers, " peers"));
    return static_cast<int>(list.size());
  }

  // A peer id or count: an integer in [lo, kMaxPeers].
  int peers(const yaml::Node& node, const std::string& what, int lo) const {
    return static_cast<int>(in_.integer(node, what, lo, kMaxPeers));
  }

  Topology from_generator() {
    GeneratorSpec spec;
    const std::string name = in_.text(root_["generator"], "generator");
    const GeneratorTraits* row = find_choice(generator_table(), name);
    if (!row) in_.fail(root_["generator"], unknown_generator(name));
    spec.kind = row->kind;
    std::vector<std::string> allowed = kCommonKeys;
    allowed.push_back("generator");
    allowed.push_back("elastic");
    allowed.push_back("max_peers");
    for (const GeneratorKeys* list : {&row->required, &row->optional})
      for (const char* key : list->keys)
        if (key) allowed.push_back(key);
    keys_ = in_.keys(root_, allowed, "");
    for (const char* key : row->required.keys)
      if (key && !keys_.count(key))
        in_.fail(root_["generator"], cat("generator ", row->name, " needs key '", key, "'"));
    read_parameters(spec);
    if (auto problem = topo::check_generator(spec))
      in_.fail(key_line(keys_.count(problem->key) ? problem->key : "generator"),
               problem->message);
    if (keys_.count("elastic") && in_.boolean(root_["elastic"], "elastic")) return elastic(spec);
    if (keys_.count("max_peers"))
      in_.fail(root_["max_peers"], "max_peers is for elastic topologies (elastic: true)");
    return make_topology(spec);
  }

  // `elastic: true`: the graph of the initial members 0..n-1 from the member-set function, with
  // the spec kept for the membership changes to derive the next graphs from.
  Topology elastic(const GeneratorSpec& spec) {
    if (!traits(spec.kind).elastic)
      in_.fail(root_["elastic"], cat("elastic: true is for ", elastic_generators(), " (their "
                                     "graph is a function of the member set), not ",
                                     generator_name(spec.kind)));
    if (spec.directed)
      in_.fail(root_["directed"], "an elastic topology is undirected (Metropolis-Hastings "
                                  "weights on every member set)");
    if (spec.weights && *spec.weights != WeightKind::kMetropolis)
      in_.fail(root_["weights"], "an elastic topology's weights are metropolis (symmetric and "
                                 "doubly stochastic on every member set)");
    if (root_["laziness"].defined())
      in_.fail(root_["laziness"], "laziness does not apply to an elastic topology");
    ElasticSpec es;
    es.generator = spec;
    es.max_peers = keys_.count("max_peers")
                       ? peers(root_["max_peers"], "max_peers", std::max(spec.n, 1))
                       : spec.n;
    ElasticSpec initial = es;  // the initial members' graph, over their ranks alone
    initial.max_peers = spec.n;
    std::vector<int> members(static_cast<std::size_t>(spec.n));
    for (int i = 0; i < spec.n; ++i) members[static_cast<std::size_t>(i)] = i;
    Topology t = elastic_topology(initial, members);
    t.set_elastic(es);
    return t;
  }

  // Every key present has been checked to belong to this generator; read them by type.
  void read_parameters(GeneratorSpec& spec) const {
    auto has = [&](const char* key) { return keys_.count(key) > 0; };
    auto count = [&](const char* key) { return peers(root_[key], key, 0); };
    if (has("n")) spec.n = peers(root_["n"], "n", 1);
    else if (!traits(spec.kind).lattice) spec.n = peers_from_list();
    if (has("rows")) spec.rows = count("rows");
    if (has("cols")) spec.cols = count("cols");
    if (has("degree")) spec.degree = count("degree");
    if (has("s")) spec.s = count("s");
    if (has("period")) spec.period = peers(root_["period"], "period", 1);
    spec.k = has("k") ? count("k") : 1;
    if (has("p")) spec.p = in_.number(root_["p"], "p");
    if (has("beta")) spec.beta = in_.number(root_["beta"], "beta");
    if (has("seed"))
      spec.seed = static_cast<std::uint64_t>(
          in_.integer(root_["seed"], "seed", 0, static_cast<std::int64_t>(kMaxTopologySeed)));
    if (has("directed")) {
      spec.directed = in_.boolean(root_["directed"], "directed");
      if (!spec.directed && traits(spec.kind).direction == GeneratorDirection::kDirected)
        in_.fail(root_["directed"], cat("generator ", generator_name(spec.kind), " is directed"));
    }
    spec.weights = weights_key();
  }

  // One edge: [from, to], [from, to, weight] or {from:, to:, weight:}.
  void parse_edge(const yaml::Node& e, int n, bool directed, ParsedRound& round,
                  std::map<std::pair<int, int>, int>& seen) const {
    yaml::Node from, to, weight;
    bool has_weight = false;
    if (e.is_sequence() && (e.size() == 2 || e.size() == 3)) {
      from = e[0], to = e[1];
      if ((has_weight = e.size() == 3)) weight = e[2];
    } else if (e.is_map()) {
      auto k = in_.keys(e, {"from", "to", "weight"}, "edge");
      if (!k.count("from") || !k.count("to")) in_.fail(e, "edge needs from: and to:");
      from = e["from"], to = e["to"];
      if ((has_weight = k.count("weight") > 0)) weight = e["weight"];
    } else {
      in_.fail(e, "edge must be [from, to], [from, to, weight] or {from:, to:, weight:}");
    }
    const int a = peers(from, "edge", 0);
    const int b = peers(to, "edge", 0);
    for (int id : {a, b})
      if (id >= n)
        in_.fail(e, cat("peer id ", id, " out of range (n: ", n, ", ids are 0..", n - 1, ")"));
    const char* sep = directed ? " -> " : " - ";
    if (a == b)
      in_.fail(e, cat("self-loop ", a, sep, b, " (self weights are what is left of the row, or "
                                                "self_weights:)"));
    auto key = directed ? std::pair{a, b} : std::pair{std::min(a, b), std::max(a, b)};
    if (auto it = seen.find(key); it != seen.end())
      in_.fail(e, cat("duplicate edge ", a, sep, b, " (first at line ", it->second, ")"));
    seen[key] = e.line();
    double w = 0.0;
    if (has_weight) {
      w = in_.number(weight, "weight");
      if (w < 0) in_.fail(e, cat("negative weight ", w, " on edge ", a, sep, b));
      if (w == 0)
        in_.fail(e, cat("weight 0 on edge ", a, sep, b, " (leave the edge out instead)"));
    }
    if (!round.lines.empty() && has_weight != round.weighted)
      in_.fail(e, "give every edge a weight, or none (this edge differs from the first)");
    round.weighted = has_weight;
    round.list.edges.push_back({key.first, key.second, w});
    round.lines.push_back(e.line());
  }

  ParsedRound parse_round(const yaml::Node& edges, const yaml::Node& self, int n,
                          bool directed) const {
    ParsedRound round;
    std::map<std::pair<int, int>, int> seen;
    for (const yaml::Node& e : edges) parse_edge(e, n, directed, round, seen);
    if (self.defined()) {
      in_.list(self, "self_weights");
      if (self.size() != static_cast<std::size_t>(n))
        in_.fail(self, cat("self_weights: ", self.size(), " values for n: ", n, " peers"));
      for (const yaml::Node& s : self) {
        double w = in_.number(s, "self_weights");
        if (w < 0) in_.fail(s, cat("negative self weight ", w));
        round.list.self_weights.push_back(w);
        round.self_lines.push_back(s.line());
      }
    }
    return round;
  }

  // Explicit weights: each row (column for directed graphs, which use push-sum) sums to 1.
  void check_sums(const ParsedRound& r, int n, bool directed) const {
    std::vector<double> sum(n, 0.0);
    std::vector<int> last_line(n, 0);
    for (std::size_t i = 0; i < r.list.edges.size(); ++i) {
      const Arc& e = r.list.edges[i];
      sum[e.from] += e.weight, last_line[e.from] = r.lines[i];
      if (!directed) sum[e.to] += e.weight, last_line[e.to] = r.lines[i];
    }
    const char* what = directed ? "column" : "row";
    const char* why = directed ? " (push-sum: the weights a peer sends and keeps sum to 1)" : "";
    for (int i = 0; i < n; ++i) {
      if (!r.list.self_weights.empty()) {
        const double total = sum[i] + r.list.self_weights[i];
        if (std::abs(total - 1.0) > topo::kSumTolerance)
          in_.fail(r.self_lines[i], cat(what, " ", i, " of W sums to ", total, " (self weight ",
                                        r.list.self_weights[i], " + edges ", sum[i],
                                        "); it must sum to 1", why));
      } else if (sum[i] > 1.0 + topo::kSumTolerance) {
        in_.fail(last_line[i], cat("edge weights in ", what, " ", i, " of W sum to ", sum[i],
                                   ", more than 1; it must sum to 1 with the self weight", why));
      }
    }
  }

  WeightKind choose_weights(bool weighted, bool directed) const {
    const auto given = weights_key();
    const int line = keys_.count("weights") ? key_line("weights") : 1;
    if (weighted) {
      if (given && *given != WeightKind::kExplicit)
        in_.fail(line, "the edges carry weights, so weights: must be explicit (or left out)");
      return WeightKind::kExplicit;
    }
    if (!given) return directed ? WeightKind::kPushSum : WeightKind::kMetropolis;
    if (*given == WeightKind::kExplicit)
      in_.fail(line, "weights: explicit needs a weight on every edge");
    if (*given == WeightKind::kGenerator)
      in_.fail(line, "weights: generator is only for generator: base");
    if (directed && (*given == WeightKind::kMetropolis || *given == WeightKind::kMaxDegree))
      in_.fail(line, cat("weights: ", weight_kind_name(*given),
                         " needs an undirected graph (directed graphs use push-sum or uniform)"));
    return *given;
  }

  // The (edges, self_weights) nodes of every round, after checking from the list sizes alone
  // that the topology stays within kMaxRounds and kMaxWeights: aliases let a short file repeat
  // a long edge list many times, so nothing is parsed before this.
  std::vector<std::pair<yaml::Node, yaml::Node>> round_nodes(bool sequence, int n,
                                                             bool directed) const {
    std::vector<std::pair<yaml::Node, yaml::Node>> out;
    if (!sequence) {
      out.emplace_back(root_["edges"], root_["self_weights"]);
    } else {
      const yaml::Node list = root_["sequence"];
      in_.list(list, "sequence");
      if (list.size() == 0) in_.fail(list, "sequence: is empty");
      if (list.size() > static_cast<std::size_t>(topo::kMaxRounds))
        in_.fail(list, cat("sequence: ", list.size(), " rounds, more than the limit of ",
                           topo::kMaxRounds));
      for (const yaml::Node& r : list) {
        auto k = in_.keys(r, {"edges", "self_weights"}, "sequence");
        if (!k.count("edges")) in_.fail(r, "sequence entry needs edges:");
        out.emplace_back(r["edges"], r["self_weights"]);
      }
    }
    std::int64_t weights = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const yaml::Node& edges = out[i].first;
      in_.list(edges, "edges");
      weights += n + static_cast<std::int64_t>(edges.size()) * (directed ? 1 : 2);
      if (weights > topo::kMaxWeights)
        in_.fail(edges, cat(sequence ? cat("sequence: rounds 0..", i, " have ") : "edges: ",
                            topo::size_problem(weights)));
    }
    return out;
  }

  Topology from_edges(bool sequence) {
    std::vector<std::string> allowed = kCommonKeys;
    allowed.insert(allowed.end(), {"directed", sequence ? "sequence" : "edges"});
    if (!sequence) allowed.push_back("self_weights");
    keys_ = in_.keys(root_, allowed, "");
    const int n = keys_.count("n") ? peers(root_["n"], "n", 1) : peers_from_list();
    const bool directed = keys_.count("directed") && in_.boolean(root_["directed"], "directed");
    std::vector<ParsedRound> rounds;
    for (const auto& [edges, self] : round_nodes(sequence, n, directed))
      rounds.push_back(parse_round(edges, self, n, directed));
    std::optional<bool> weighted;  // from the first round that has edges
    for (const auto& r : rounds) {
      if (r.lines.empty()) continue;
      if (weighted && *weighted != r.weighted)
        in_.fail(r.lines.front(), "give every edge of every round a weight, or none");
      weighted = r.weighted;
    }
    const WeightKind kind = choose_weights(weighted.value_or(false), directed);
    std::vector<Graph> graphs;
    for (const auto& r : rounds) {
      if (!r.list.self_weights.empty() && kind != WeightKind::kExplicit)
        in_.fail(r.self_lines.front(), "self_weights need explicit weights on the edges");
      if (kind == WeightKind::kExplicit) check_sums(r, n, directed);
      graphs.push_back(topo::weigh(n, directed, r.list, kind));
    }
    return Topology(std::move(graphs), sequence ? "sequence" : "edges", kind);
  }

  const yaml::Document in_;
  const yaml::Node root_;
  std::map<std::string, yaml::Node> keys_;
};

}  // namespace

Topology load_topology_from_string(const std::string& text, const std::string& name) {
  return Loader(yaml::Document::parse(text, name)).load();
}

Topology load_topology(const std::string& path) {
  return Loader(yaml::Document::load_file(path, "topology file")).load();
}

}  // namespace gossip
