// topology/yaml_write.cpp: writes topology files, in the generator form (short, what
// `gossip topo --generate` writes) or the explicit edge form (every weight exact, so loading
// it gives the same fingerprint). Plain text; the files are simple enough not to need an
// emitter, and the layout stays the one people see in topologies/.
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "gossip/core.hpp"
#include "src/topology/internal.hpp"

namespace gossip {

namespace {

// Shortest text that reads back as exactly the same double.
std::string exact(double v) {
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void write_edges(std::ostringstream& os, const Graph& g, bool weighted, const char* indent) {
  const auto edges = g.edges();
  if (edges.empty()) {
    os << indent << "edges: []\n";
    return;
  }
  os << indent << "edges:\n";
  for (const Arc& e : edges) {
    os << indent << "  - [" << e.from << ", " << e.to;
    if (weighted) os << ", " << exact(g.weight(e.to, e.from));
    os << "]\n";
  }
  if (!weighted) return;
  os << indent << "self_weights: [";
  for (int i = 0; i < g.n(); ++i) os << (i ? ", " : "") << exact(g.self_weight(i));
  os << "]\n";
}

}  // namespace

std::string to_yaml(const GeneratorSpec& spec) {
  if (auto problem = topo::check_generator(spec)) throw InputError(problem->message);
  std::ostringstream os;
  os << "# gossip topology (gossip topo FILE to check it; docs/topology.md for the format)\n";
  const GeneratorTraits& row = traits(spec.kind);
  os << "generator: " << row.name << "\n";
  if (row.lattice) {
    os << "rows: " << spec.rows << "\ncols: " << spec.cols << "\n";
  } else {
    os << "n: " << spec.n << "\n";
  }
  if (spec.directed && row.direction == GeneratorDirection::kEither) os << "directed: true\n";
  switch (spec.kind) {
    using enum GeneratorKind;
    case kErdosRenyi: os << "p: " << exact(spec.p) << "\n"; break;
    case kRandomRegular: os << "degree: " << spec.degree << "\n"; break;
    case kWattsStrogatz: os << "k: " << spec.k << "\nbeta: " << exact(spec.beta) << "\n"; break;
    case kBase:
    case kEquiStatic: os << "k: " << spec.k << "\n"; break;
    case kEpidemic:
      os << "s: " << spec.s << "\n";
      if (spec.period > 0) os << "period: " << spec.period << "\n";
      break;
    case kRandomMatching:
      if (spec.period > 0) os << "period: " << spec.period << "\n";
      break;
    default: break;  // no keys besides n (or rows and cols) and directed
  }
  if (row.seeded()) os << "seed: " << spec.seed << "\n";
  if (spec.weights && *spec.weights != WeightKind::kGenerator)
    os << "weights: " << weight_kind_name(*spec.weights) << "\n";
  return os.str();
}

std::string to_yaml(const Topology& t) {
  // Weights that are a function of the edges are written by name; the others edge by edge.
  const bool weighted =
      t.weights() == WeightKind::kExplicit || t.weights() == WeightKind::kGenerator;
  std::ostringstream os;
  os << "# gossip topology: " << t.kind() << ", " << t.n() << " peers"
     << (t.time_varying() ? cat(", period ", t.period()) : std::string()) << "\n";
  os << "n: " << t.n() << "\n";
  os << "directed: " << (t.directed() ? "true" : "false") << "\n";
  os << "weights: " << (weighted ? "explicit" : weight_kind_name(t.weights())) << "\n";
  if (!t.time_varying()) {
    write_edges(os, t.at(0), weighted, "");
  } else {
    os << "sequence:\n";
    for (std::int64_t r = 0; r < t.period(); ++r) {
      os << "  # round " << r << " (mod " << t.period() << ")\n";
      std::ostringstream round;
      write_edges(round, t.at(r), weighted, "    ");
      std::string text = round.str();
      text[2] = '-';  // "    edges:" -> "  - edges:"
      os << text;
    }
  }
  if (t.has_addresses()) {
    os << "peers:\n";
    for (int i = 0; i < t.n(); ++i) os << "  - \"" << t.address(i).value_or("") << "\"\n";
  }
  return os.str();
}

std::string to_yaml(const Draw& d, bool edges) {
  std::string text = edges ? to_yaml(d.topology) : to_yaml(d.spec);
  if (d.spec.seed == d.first_seed) return text;
  // The generator form has the seed as a key as well; the edge form has it only here.
  return cat("# ", generator_name(d.spec.kind), " seed ", d.spec.seed, ": ",
             d.connected() ? "the first connected graph" : "not connected, the last", " of seeds ",
             d.first_seed, "..", d.spec.seed, " (gossip topo --resample)\n", text);
}

}  // namespace gossip
