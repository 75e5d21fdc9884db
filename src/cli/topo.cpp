// cli/topo.cpp: `gossip topo FILE` tells a user, before hours of training, whether the peer
// graph in a topology file can converge at all and how fast agreement spreads (report, JSON or
// Graphviz DOT); `gossip topo --generate KIND ...` writes such a file.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {

namespace {

constexpr int kMaxDraws = 100;  // seeds --resample tries

constexpr const char* kHelp = R"(usage: gossip topo FILE [--json | --dot] [--gamma G]
       gossip topo --generate KIND [--n N] [--rows R --cols C] [--k K] [--degree D] [--p P]
                   [--beta B] [--s S] [--period T] [--seed S]
                   [--resample | --allow-disconnected]
                   [--weights W] [--directed] [--edges] [-o FILE]

Checks a topology file (format: docs/topology.md) before launch: connected components
(strongly connected for directed graphs), diameter, degrees, whether W is row / column /
doubly stochastic, the second-largest eigenvalue modulus rho of W (of the product of one
period's matrices for time-varying graphs), the spectral gap 1 - rho, and the predicted
rounds to cut disagreement 1000x, ln(1000) / -ln(rho); and the effective number of
neighbours (Vogels, Hendrikx and Jaggi, NeurIPS 2022): how many peers' noise a random walk
x <- W (sqrt(gamma) x + noise) averages, 1 alone and n on the complete graph, which ranks
topologies for learning where the spectral gap does not (docs/topology.md).

  --json            one JSON object (fields in docs/topology.md) instead of the report
  --dot             the graph in Graphviz DOT; edge labels are weights, per round if it varies
  --gamma G         the effective neighbours' decay, in [0, 1) (default 0.95; the paper fitted
                    0.951 to its CIFAR-10 runs): closer to 1, a longer memory

  --generate KIND   write a topology file instead. KIND, its options and its graph:
)";

constexpr const char* kHelpEnd = R"(                    random draws come from the seed (epidemic: the seed, the round and the
                    rank); epidemic draws --period rounds before the draws repeat (default up
                    to 1000); base takes --k 1 unless given
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

// The --generate list from the rows: "ring --n [--directed]", its summary on the next line.
std::string generator_help() {
  std::string out;
  for (const GeneratorTraits& row : generator_table()) {
    out += cat(std::string(22, ' '), row.name, row.lattice ? "" : " --n");
    for (const char* key : row.required.keys)
      if (key) out += cat(" --", key);
    for (const char* key : row.optional.keys)
      if (key) out += cat(" [--", key, "]");
    out += cat("\n", std::string(26, ' '), row.summary, "\n");
  }
  return out;
}

// Options that only some generators take are refused where they do not apply, as in files.
void check_options(const Args& args, const GeneratorTraits& row) {
  const char* kind = row.name;
  auto takes = [&](const char* name) { return row.required.has(name) || row.optional.has(name); };
  for (const char* name :
       {"rows", "cols", "k", "degree", "p", "beta", "s", "period", "seed", "directed"})
    if (args.has(name) && !takes(name))
      throw InputError(cat("option --", name, " does not apply to generator ", kind));
  if (args.has("resample") && !takes("seed"))
    throw InputError(cat("option --resample does not apply to generator ", kind,
                         " (it takes no seed)"));
  for (const char* key : row.required.keys)
    if (key && !args.has(key)) throw InputError(cat("generator ", kind, " needs --", key));
}

GeneratorSpec parse_spec(const Args& args) {
  GeneratorSpec spec;
  spec.kind = parse_generator(*args.get("generate"));
  check_options(args, traits(spec.kind));
  auto to_int = [&](const char* name, long fallback) {
    long v = args.get_int(name, fallback);
    if (v < 0 || v > (1 << 16))
      throw InputError(cat("option --", name, ": ", v, " is out of range"));
    return static_cast<int>(v);
  };
  spec.n = to_int("n", 0);
  spec.rows = to_int("rows", 0);
  spec.cols = to_int("cols", 0);
  spec.k = to_int("k", spec.kind == GeneratorKind::kBase ? 1 : 0);
  spec.degree = to_int("degree", 0);
  spec.s = to_int("s", 0);
  spec.period = to_int("period", 0);
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
  const std::string graph = cat(generator_name(draw.spec.kind), " seed ", draw.spec.seed, " is not connected (",
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
    std::printf("wrote %s: %s, %d peers%s\n", out->c_str(), generator_name(spec.kind),
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
            {"generate", "n", "rows", "cols", "k", "degree", "p", "beta", "s", "period", "seed",
             "weights", "output", "gamma"},
            {"json", "dot", "directed", "edges", "resample", "allow-disconnected"});
  if (args.help()) {
    std::fputs(kHelp, stdout);
    std::fputs(generator_help().c_str(), stdout);
    std::fputs(kHelpEnd, stdout);
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
  const auto format = args.has("json")  ? TopologyFormat::kJson
                     : args.has("dot") ? TopologyFormat::kDot
                                       : TopologyFormat::kText;
  const double gamma = args.get_double("gamma", kNeighboursGamma);
  if (!(gamma >= 0.0 && gamma < 1.0))
    throw InputError(cat("--gamma must be in [0, 1), got ", *args.get("gamma")));
  return report_topology_file(args.positional().front(), format, stdout, gamma);
}

}  // namespace gossip::cli
