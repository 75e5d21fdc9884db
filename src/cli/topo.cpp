// cli/topo.cpp: `gossip topo FILE` tells a user, before hours of training, whether the peer
// graph in a topology file can converge at all and how fast agreement spreads (report, JSON or
// Graphviz DOT); `gossip topo --generate KIND ...` writes such a file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip/json.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {

namespace {

constexpr int kMaxDraws = 100;  // seeds --resample tries

constexpr const char* kHelp = R"(usage: gossip topo FILE [--json | --dot]
       gossip topo --generate KIND [--n N] [--rows R --cols C] [--k K] [--degree D] [--p P]
                   [--beta B] [--seed S] [--resample | --allow-disconnected]
                   [--weights W] [--directed] [--edges] [-o FILE]

Checks a topology file (format: docs/topology.md) before launch: connected components
(strongly connected for directed graphs), diameter, degrees, whether W is row / column /
doubly stochastic, the second-largest eigenvalue modulus rho of W (of the product of one
period's matrices for time-varying graphs), the spectral gap 1 - rho, and the predicted
rounds to cut disagreement 1000x, ln(1000) / -ln(rho).

  --json            one JSON object (fields in docs/topology.md) instead of the report
  --dot             the graph in Graphviz DOT; edge labels are weights, per round if it varies

  --generate KIND   write a topology file instead. KIND and its parameters:
                      ring --n [--directed]          torus --rows --cols   grid --rows --cols
                      line --n   star --n   complete --n   hypercube --n (a power of two)
                      erdos-renyi --n --p --seed     random-regular --n --degree --seed
                      watts-strogatz --n --k --beta --seed
                      exponential --n   one-peer-exponential --n   base --n [--k, default 1]
  --resample        random generators: when seed S gives a disconnected graph, draw again
                    with S+1, S+2, ... (at most 100 seeds) and write the first connected
                    graph; the file names the seed that gives it
  --allow-disconnected
                    write a disconnected graph (it is refused otherwise, with exit code 3)
  --weights W       metropolis (undirected default), uniform, max-degree, push-sum (directed
                    default); base graphs set their own
  --edges           write the explicit edge list with every weight, not the generator form
  -o, --output FILE write there instead of standard output

exit codes: 0 connected (or file written), 2 bad input (the message names the file and
line), 3 valid but disconnected (the components are listed; --generate writes nothing)
)";

std::string hex64(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string id_list(const std::vector<int>& ids, std::size_t limit) {
  std::string s;
  for (std::size_t i = 0; i < ids.size() && i < limit; ++i) {
    if (i) s += ", ";
    s += std::to_string(ids[i]);
  }
  if (ids.size() > limit) s += cat(", ... (", ids.size(), " peers)");
  return s;
}

// "3 components: {0, 2, 5} {1} {3, 4, 6, 7}"
std::string components_text(const std::vector<std::vector<int>>& components) {
  std::string s = cat(components.size(), " components:");
  for (const auto& c : components) s += cat(" {", id_list(c, 16), "}");
  return s;
}

const char* yes(bool b) { return b ? "yes" : "no"; }

std::string plural(std::int64_t count, const char* noun) {
  return cat(count, " ", noun, count == 1 ? "" : "s");
}

void print_spectrum(const Topology& t, const TopologyReport& r) {
  if (!r.rho_known) {
    std::printf("  rho           not computed (more than 2048 peers)\n");
    return;
  }
  const char* of = t.time_varying() ? " (of the product over one period)" : "";
  std::printf("  rho           %.9g%s\n  spectral gap  %.9g\n", r.rho, of, r.spectral_gap);
  if (r.exact_averaging)
    std::printf("  averaging     exact after %s\n", plural(r.exact_after, "round").c_str());
  if (std::isfinite(r.rounds_to_1000x))
    std::printf("  rounds to cut disagreement 1000x: %.1f\n", r.rounds_to_1000x);
  else
    std::printf("  rounds to cut disagreement 1000x: never (%s)\n",
                r.connected ? "rho = 1" : "the graph is not connected");
}

void print_report(const std::string& file, const Topology& t, const TopologyReport& r) {
  std::printf("%s: %s, %s, %s, weights %s", file.c_str(), t.kind().c_str(),
              plural(r.n, "peer").c_str(), r.directed ? "directed" : "undirected",
              weight_kind_name(t.weights()));
  if (t.time_varying())
    std::printf(", time-varying with period %lld", static_cast<long long>(r.period));
  std::printf("\n  fingerprint   %s\n", hex64(t.fingerprint()).c_str());
  std::printf("  edges         %lld%s\n", static_cast<long long>(r.edges),
              t.time_varying() ? " (summed over one period)" : "");
  if (r.directed)
    std::printf("  degree        in %d..%d (mean %.2f), out %d..%d (mean %.2f)\n", r.in_degree_min,
                r.in_degree_max, r.in_degree_mean, r.out_degree_min, r.out_degree_max,
                r.out_degree_mean);
  else
    std::printf("  degree        %d..%d (mean %.2f)\n", r.in_degree_min, r.in_degree_max,
                r.in_degree_mean);
  std::printf("  connected     %s", yes(r.connected));
  if (r.diameter) std::printf(", diameter %d", *r.diameter);
  if (!r.connected) {
    std::printf(": %zu %scomponents\n", r.components.size(),
                r.directed ? "strongly connected " : "");
    for (const auto& c : r.components) std::printf("    {%s}\n", id_list(c, 16).c_str());
  } else {
    std::printf("\n");
  }
  std::printf("  W             row stochastic %s, column stochastic %s, symmetric %s\n",
              yes(r.row_stochastic), yes(r.column_stochastic), yes(r.symmetric));
  print_spectrum(t, r);
}

void print_json(const std::string& file, const Topology& t, const TopologyReport& r) {
  JsonArray components;
  for (const auto& c : r.components) components.add(JsonArray::of(c));
  auto degrees = [](int min, int max, double mean) {
    return JsonObject().add("min", min).add("max", max).add("mean", mean);
  };
  const std::string null = "null";
  JsonObject o;
  o.add("file", file).add("kind", t.kind()).add("n", r.n).add("directed", r.directed)
      .add("weights", weight_kind_name(t.weights())).add("period", r.period)
      .add("connected", r.connected).add("components", components)
      .raw("diameter", r.diameter ? json_integer(*r.diameter) : null).add("edges", r.edges)
      .add("in_degree", degrees(r.in_degree_min, r.in_degree_max, r.in_degree_mean))
      .add("out_degree", degrees(r.out_degree_min, r.out_degree_max, r.out_degree_mean))
      .add("row_stochastic", r.row_stochastic).add("column_stochastic", r.column_stochastic)
      .add("doubly_stochastic", r.doubly_stochastic).add("symmetric", r.symmetric)
      .add("rho", r.rho).add("spectral_gap", r.spectral_gap)
      .add("rho_per_round", r.rho_per_round).add("rounds_to_1000x", r.rounds_to_1000x)
      .add("exact_averaging", r.exact_averaging)
      .raw("exact_after", r.exact_averaging ? json_integer(r.exact_after) : null)
      .add("fingerprint", hex64(t.fingerprint())).add("addresses", t.has_addresses());
  std::printf("%s\n", o.str().c_str());
}

void print_dot(const Topology& t) {
  const bool d = t.directed();
  std::printf("%s topology {\n  node [shape=circle];\n", d ? "digraph" : "graph");
  for (int i = 0; i < t.n(); ++i) {
    auto a = t.address(i);
    std::printf("  %d%s;\n", i, a ? cat(" [tooltip=", json_string(*a), "]").c_str() : "");
  }
  for (std::int64_t r = 0; r < t.period(); ++r)
    for (const Arc& e : t.at(r).edges()) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%.4g", e.weight);
      std::string label = weight;
      if (t.time_varying()) label = cat("t", r, ": ", label);
      std::printf("  %d %s %d [label=\"%s\"];\n", e.from, d ? "->" : "--", e.to, label.c_str());
    }
  std::printf("}\n");
}

// Options that only some generators take are refused where they do not apply, as in files.
void check_options(const Args& args, const std::string& kind) {
  const GeneratorParameters params = generator_parameters(kind);
  auto takes = [&](const std::string& name) {
    bool found = false;
    for (const auto* list : {&params.required, &params.optional})
      for (const auto& key : *list) found = found || key == name;
    return found;
  };
  for (const char* name : {"rows", "cols", "k", "degree", "p", "beta", "seed", "directed"})
    if (args.has(name) && !takes(name))
      throw InputError(cat("option --", name, " does not apply to generator ", kind));
  if (args.has("resample") && !takes("seed"))
    throw InputError(cat("option --resample does not apply to generator ", kind,
                         " (it takes no seed)"));
  for (const auto& key : params.required)
    if (!args.has(key)) throw InputError(cat("generator ", kind, " needs --", key));
}

GeneratorSpec parse_spec(const Args& args) {
  GeneratorSpec spec;
  spec.kind = *args.get("generate");
  const auto& kinds = generator_kinds();
  if (std::find(kinds.begin(), kinds.end(), spec.kind) != kinds.end())
    check_options(args, spec.kind);  // an unknown kind is reported by make_topology
  auto to_int = [&](const char* name, long fallback) {
    long v = args.get_int(name, fallback);
    if (v < 0 || v > (1 << 16))
      throw InputError(cat("option --", name, ": ", v, " is out of range"));
    return static_cast<int>(v);
  };
  spec.n = to_int("n", 0);
  spec.rows = to_int("rows", 0);
  spec.cols = to_int("cols", 0);
  spec.k = to_int("k", spec.kind == "base" ? 1 : 0);
  spec.degree = to_int("degree", 0);
  spec.p = args.get_double("p", 0.0);
  spec.beta = args.get_double("beta", 0.0);
  const long seed = args.get_int("seed", 0);
  if (seed < 0 || static_cast<std::uint64_t>(seed) > kMaxTopologySeed)
    throw InputError(cat("option --seed must be between 0 and ", kMaxTopologySeed));
  spec.seed = static_cast<std::uint64_t>(seed);
  spec.directed = args.has("directed");
  if (auto w = args.get("weights")) spec.weights = parse_weight_kind(*w);
  return spec;
}

// Says why a disconnected draw is not written (true), or warns that it is written (false).
bool refuse_disconnected(const Draw& draw, bool resample, bool allow) {
  const std::string graph = cat(draw.spec.kind, " seed ", draw.spec.seed, " is not connected (",
                                components_text(draw.components), ")");
  if (allow) {
    std::fprintf(stderr, "gossip topo: warning: %s; written anyway (--allow-disconnected)\n",
                 graph.c_str());
    return false;
  }
  const auto first = static_cast<unsigned long long>(draw.first_seed);
  if (resample)
    std::fprintf(stderr, "gossip topo: none of seeds %llu..%llu (%d draws) gives a connected "
                 "graph; the last: %s. Nothing written: try a denser graph (larger --p, "
                 "--degree or --k) or --allow-disconnected\n",
                 first, static_cast<unsigned long long>(draw.spec.seed), draw.draws,
                 graph.c_str());
  else
    std::fprintf(stderr, "gossip topo: %s. Nothing written: --resample draws seeds %llu, "
                 "%llu, ... until one is connected; or give another --seed, or "
                 "--allow-disconnected to write it anyway\n",
                 graph.c_str(), first, first + 1);
  return true;
}

int generate(const Args& args) {
  const GeneratorSpec spec = parse_spec(args);
  const bool resample = args.has("resample"), allow = args.has("allow-disconnected");
  if (resample && allow) throw InputError("give --resample or --allow-disconnected, not both");
  const Draw draw = draw_connected(spec, resample ? kMaxDraws : 1);  // checks the parameters
  if (!draw.connected() && refuse_disconnected(draw, resample, allow)) return kExitDisconnected;
  const std::string note =
      draw.draws > 1 ? cat(", seed ", draw.spec.seed, " (the first connected one from seed ",
                           draw.first_seed, ")")
                     : std::string();
  const std::string text = to_yaml(draw, args.has("edges"));
  if (auto out = args.get("output")) {
    std::ofstream f(*out, std::ios::binary);
    if (!(f << text) || !f.flush()) throw InputError(cat(*out, ": cannot write"));
    std::printf("wrote %s: %s, %d peers%s\n", out->c_str(), spec.kind.c_str(),
                draw.topology.n(), note.c_str());
  } else {
    std::fputs(text.c_str(), stdout);
    if (!note.empty()) std::fprintf(stderr, "gossip topo: %s\n", note.c_str() + 2);
  }
  return kExitOk;
}

}  // namespace

int run_topo(int argc, char** argv) {
  Args args(argc, argv,
            {"generate", "n", "rows", "cols", "k", "degree", "p", "beta", "seed", "weights",
             "output"},
            {"json", "dot", "directed", "edges", "resample", "allow-disconnected"});
  if (args.help()) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (args.has("generate")) {
    if (!args.positional().empty()) throw InputError("--generate takes no FILE (use -o FILE)");
    return generate(args);
  }
  if (args.has("resample") || args.has("allow-disconnected"))
    throw InputError("--resample and --allow-disconnected go with --generate");
  if (args.positional().size() != 1)
    throw InputError("expected one topology FILE (see gossip topo --help)");
  if (args.has("json") && args.has("dot")) throw InputError("give --json or --dot, not both");
  const std::string& file = args.positional().front();
  const Topology topology = load_topology(file);
  const TopologyReport report = analyze(topology);
  if (args.has("json")) print_json(file, topology, report);
  else if (args.has("dot")) print_dot(topology);
  else print_report(file, topology, report);
  return report.connected ? kExitOk : kExitDisconnected;
}

}  // namespace gossip::cli
