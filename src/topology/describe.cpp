// topology/describe.cpp: what `gossip topo FILE` shows of a topology and its analysis, as a
// report for people, one JSON object, or Graphviz DOT.
#include <cmath>
#include <cstdio>
#include <string>

#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/topology.hpp"

namespace gossip {

namespace {

std::string id_list(const std::vector<int>& ids, std::size_t limit) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < limit; ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  if (ids.size() > limit) s += cat(", ... (", ids.size(), " peers)");
  return s;
}

const char* yes(bool b) { return b ? "yes" : "no"; }

std::string plural(std::int64_t count, const char* noun) {
  return cat(count, " ", noun, count == 1 ? "" : "s");
}

void print_spectrum(std::FILE* out, const Topology& t, const TopologyReport& r) {
  if (!r.rho_known) {
    std::fprintf(out, "  rho           not computed (more than 2048 peers)\n");
    return;
  }
  const char* of = t.time_varying() ? " (of the product over one period)" : "";
  std::fprintf(out, "  rho           %.9g%s\n  spectral gap  %.9g%s\n", r.rho, of, r.spectral_gap,
               t.time_varying() ? " (of one period)" : "");
  if (t.time_varying() && r.rate_rounds < r.period)
    std::fprintf(out, "  per round     %.9g, spectral gap %.9g (from the first %lld rounds' product: "
                 "the period's is below what doubles resolve)\n", r.rho_per_round,
                 1.0 - r.rho_per_round, static_cast<long long>(r.rate_rounds));
  else if (t.time_varying())
    std::fprintf(out, "  per round     rho^(1/%lld) = %.9g, spectral gap %.9g\n",
                 static_cast<long long>(r.period), r.rho_per_round, 1.0 - r.rho_per_round);
  if (r.exact_averaging)
    std::fprintf(out, "  averaging     exact after %s\n", plural(r.exact_after, "round").c_str());
  if (std::isfinite(r.rounds_to_1000x))
    std::fprintf(out, "  rounds to cut disagreement 1000x: %.1f\n", r.rounds_to_1000x);
  else
    std::fprintf(out, "  rounds to cut disagreement 1000x: never (%s)\n",
                r.connected ? "rho = 1" : "the graph is not connected");
  if (std::isfinite(r.effective_neighbours))
    std::fprintf(out, "  effective neighbours  %.4g (a random walk with decay gamma = %g averages "
                 "its noise as much as that many peers; Vogels et al. 2022)\n",
                 r.effective_neighbours, r.neighbours_gamma);
}

void print_report(std::FILE* out, const std::string& file, const Topology& t, const TopologyReport& r) {
  std::fprintf(out, "%s: %s, %s, %s, weights %s", file.c_str(), t.kind().c_str(),
              plural(r.n, "peer").c_str(), r.directed ? "directed" : "undirected",
              weight_kind_name(t.weights()));
  if (t.time_varying())
    std::fprintf(out, ", time-varying with period %lld", static_cast<long long>(r.period));
  std::fprintf(out, "\n  fingerprint   %s\n", hex64(t.fingerprint()).c_str());
  std::fprintf(out, "  edges         %lld%s\n", static_cast<long long>(r.edges),
              t.time_varying() ? " (summed over one period)" : "");
  if (r.directed)
    std::fprintf(out, "  degree        in %d..%d (mean %.2f), out %d..%d (mean %.2f)\n", r.in_degree_min,
                r.in_degree_max, r.in_degree_mean, r.out_degree_min, r.out_degree_max,
                r.out_degree_mean);
  else
    std::fprintf(out, "  degree        %d..%d (mean %.2f)\n", r.in_degree_min, r.in_degree_max,
                r.in_degree_mean);
  std::fprintf(out, "  connected     %s", yes(r.connected));
  if (r.diameter) std::fprintf(out, ", diameter %d", *r.diameter);
  if (!r.connected) {
    std::fprintf(out, ": %zu %scomponents\n", r.components.size(),
                r.directed ? "strongly connected " : "");
    for (const auto& c : r.components) std::fprintf(out, "    {%s}\n", id_list(c, 16).c_str());
  } else {
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "  W             row stochastic %s, column stochastic %s, symmetric %s\n",
              yes(r.row_stochastic), yes(r.column_stochastic), yes(r.symmetric));
  print_spectrum(out, t, r);
  if (!t.elastic()) return;
  std::fprintf(out, "  elastic       up to %d peers (ranks 0..%d), the %s graph of whichever are "
               "members, Metropolis-Hastings weights; as the members grow:\n",
               t.elastic()->max_peers, t.elastic()->max_peers - 1, t.kind().c_str());
  std::fprintf(out, "    %8s  %22s  %s\n", "members", "spectral gap per round",
               "rounds from a change's announcement to its effect");
  for (const ElasticSize& s : elastic_sizes(*t.elastic()))
    std::fprintf(out, "    %8d  %22.6g  %lld\n", s.members, s.spectral_gap,
                 static_cast<long long>(s.lead));
}

void print_json(std::FILE* out, const std::string& file, const Topology& t, const TopologyReport& r) {
  const JsonObject o = topology_report_object<JsonObject, JsonArray>(file, t, r);
  std::fprintf(out, "%s\n", o.str().c_str());
}

void print_dot(std::FILE* out, const Topology& t) {
  const bool d = t.directed();
  std::fprintf(out, "%s topology {\n  node [shape=circle];\n", d ? "digraph" : "graph");
  for (int i = 0; i < t.n(); ++i) {
    auto a = t.address(i);
    std::fprintf(out, "  %d%s;\n", i, a ? cat(" [tooltip=", json_string(*a), "]").c_str() : "");
  }
  for (std::int64_t r = 0; r < t.period(); ++r)
    for (const Arc& e : t.at(r).edges()) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%.4g", e.weight);
      std::string label = weight;
      if (t.time_varying()) label = cat("t", r, ": ", label);
      std::fprintf(out, "  %d %s %d [label=\"%s\"];\n", e.from, d ? "->" : "--", e.to, label.c_str());
    }
  std::fprintf(out, "}\n");
}

}  // namespace

std::string hex64(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string components_text(const std::vector<std::vector<int>>& components) {
  std::string s = cat(components.size(), " components:");
  for (const auto& c : components) s += cat(" {", id_list(c, 16), "}");
  return s;
}


int report_topology_file(const std::string& file, TopologyFormat format, std::FILE* out,
                         double neighbours_gamma) {
  const Topology topology = load_topology(file);
  const TopologyReport report =
      analyze(topology, format == TopologyFormat::kDot ? std::nullopt
                                                        : std::optional<double>(neighbours_gamma));
  switch (format) {
    case TopologyFormat::kText: print_report(out, file, topology, report); break;
    case TopologyFormat::kJson: print_json(out, file, topology, report); break;
    case TopologyFormat::kDot: print_dot(out, topology); break;
  }
  return report.connected ? kExitOk : kExitDisconnected;
}

}  // namespace gossip
