// cli/compare.cpp: `gossip compare CONFIG --out DIR` — a sweep of simulations over topologies
// (and optionally algorithms, periods, shards, seeds) on the same data, summarised as a table
// (compare.csv, report.md) and gnuplot plots. Each setting's own metrics.csv and summary.json go
// to DIR/runs/<n>-<label>/. With --run every setting runs for real through the launcher (as
// gossip run), its peers reading the config and the overrides that make it the setting.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/launcher.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip::cli {

namespace {

const char* kCompareHelp =
    "usage: gossip compare CONFIG [--out DIR] [--epochs N] [--workers N] [--quiet]\n"
    "                      [--netem rate=RATE[,delay=TIME]]\n"
    "       gossip compare CONFIG --run [--netem rate=RATE[,delay=TIME]] [--out DIR]\n"
    "                      [--epochs N] [--quiet]\n"
    "\n"
    "Runs `gossip sim` once per setting of the sweep in CONFIG's compare section: every\n"
    "compare.topologies file, times compare.algorithms (choco once per compare.compress\n"
    "entry), compare.periods, compare.shards, compare.aggregates (gossip.aggregate),\n"
    "compare.attacks (each none or a fault-schedule attack entry added to the setting's faults),\n"
    "compare.memberships (each none or {name, changes}: joins and leaves of an elastic\n"
    "topology) and compare.seeds when given (else the gossip/data/train values). All\n"
    "settings with the same shard and seed train on the same shards. With\n"
    "compare.averaging_rounds, first a pure-averaging pass on each topology against rho^2 per\n"
    "round (DIR/averaging.csv, averaging.png, a section of report.md). See docs/sim.md.\n"
    "\n"
    "Writes DIR/compare.csv and DIR/report.md (one row per setting: spectral gap, rounds, epochs\n"
    "and simulated seconds until every peer reaches compare.target_accuracy, rounds until the\n"
    "average model does, final accuracy of the average model,\n"
    "final lowest peer accuracy, final consensus distance, bytes per peer), DIR/curves.dat,\n"
    "plots drawn by gnuplot (accuracy vs round, bytes and simulated seconds; consensus distance\n"
    "vs round, log scale; PNG and SVG) and DIR/runs/<n>-<label>/{metrics.csv,summary.json}.\n"
    "When aggregates or attacks vary, compare.csv also gives the honest peers' (all but the\n"
    "attackers) lowest and mean final accuracy, report.md a table of them per attack and\n"
    "aggregate, and DIR/honest_accuracy.png plots them.\n"
    "\n"
    "With --run nothing is simulated: every setting runs for real, one after another, as\n"
    "`gossip run` runs it (one peer process per rank, TCP and TLS; the peers read CONFIG with\n"
    "the overrides --topology, --algorithm, --period, --compress, --shard, --seed and --epochs\n"
    "that make it the setting), into DIR/runs/<n>-<label>/ (what gossip run writes there). The\n"
    "table, curves and plots are the same, their seconds the measured wall-clock seconds of\n"
    "each run (metrics.csv's average-model rows) and their bytes what the peers sent;\n"
    "compare.csv's mode column says real. Over loopback, or with --netem (or the config's\n"
    "net.emulate) on emulated links, which needs root. Refused with --run (exit 2, before\n"
    "anything runs): compare.averaging_rounds, compare.attacks, compare.memberships,\n"
    "compare.outer, sim.stragglers, sim.message_loss, --workers.\n"
    "\n"
    "options:\n"
    "  --out DIR      where to write results (default: runs/ and the config's name)\n"
    "  --epochs N     override train.epochs for every setting\n"
    "  --workers N    override sim.workers (0 = number of cores; on a GPU, 1)\n"
    "  --netem SPEC   every setting on the links of `gossip run --netem SPEC` (as gossip sim\n"
    "                 --netem: over net.emulate, sim.bandwidth_mbps and sim.latency_ms); with\n"
    "                 --run, real emulated links (each peer in its own network namespace; root)\n"
    "  --run          run every setting for real with peer processes instead of simulating it\n"
    "  --quiet        no progress bar (with --run: gossip run's --no-progress)\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure (e.g. a setting diverged, or with --run a peer\n"
    "failed: the sweep stops there), 2 bad config, topology, data file or option, 3 (--run) a\n"
    "topology is disconnected, 130 (--run) interrupted\n";

/// "%.17g": a double that reads back as the same double.
std::string exact(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

/// What every peer of `setting`'s run is told besides the config file: every swept field,
/// whether or not it differs from the file's.
std::vector<std::string> setting_arguments(const CompareSetting& setting) {
  const RunConfig& c = setting.config;
  std::vector<std::string> out = {"--epochs",   exact(c.train.epochs),
                                  "--topology", c.gossip.topology,
                                  "--algorithm", algorithm_name(c.gossip.algorithm),
                                  "--period",   std::to_string(c.gossip.period),
                                  "--compress", compress_argument(c.gossip.choco.compress),
                                  "--shard",    c.data.shard,
                                  "--seed",     std::to_string(c.train.seed)};
  if (!c.compare.aggregates.empty()) {  // swept: the kind (check_peers_run refuses tau and b)
    out.push_back("--aggregate");
    out.push_back(aggregate_name(c.gossip.aggregate.kind));
  }
  return out;
}

/// The config a peer of `setting`'s run ends up with: the file, then the arguments, read as
/// gossip peer reads them. Throws InputError when it is not the setting the simulated sweep
/// would simulate (in a field that makes a run differ).
void check_peers_run(const std::string& config_path, const CompareSetting& setting,
                     const std::vector<std::string>& arguments) {
  std::vector<std::string> words = {"peer", config_path};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  const Args args(static_cast<int>(argv.size()), argv.data(), with_override_options({}), {});
  RunConfig peer = load_config(config_path);
  apply_overrides(args, peer);
  const RunConfig& want = setting.config;
  auto differs = [&](const char* field, const std::string& got, const std::string& expected) {
    if (got == expected) return;
    throw InputError(cat(want.where(field), ": gossip compare --run cannot run setting '",
                         setting.label, "' as the sweep would simulate it: its peers would have ",
                         field, " = ", got, ", not ", expected,
                         " (they take the config file and the overrides --epochs, --topology, "
                         "--algorithm, --period, --compress, --shard, --seed and, for "
                         "compare.aggregates, --aggregate NAME)"));
  };
  differs("train.epochs", exact(peer.train.epochs), exact(want.train.epochs));
  differs("gossip.topology", peer.gossip.topology, want.gossip.topology);
  differs("gossip.algorithm", algorithm_name(peer.gossip.algorithm),
          algorithm_name(want.gossip.algorithm));
  differs("gossip.period", std::to_string(peer.gossip.period), std::to_string(want.gossip.period));
  differs("gossip.choco.compress", compress_argument(peer.gossip.choco.compress),
          compress_argument(want.gossip.choco.compress));
  if (traits(want.gossip.algorithm).compresses) {
    differs("gossip.choco.consensus_step", exact(consensus_step(peer.gossip.choco)),
            exact(consensus_step(want.gossip.choco)));
    differs("gossip.choco.gossip_steps", std::to_string(peer.gossip.choco.gossip_steps),
            std::to_string(want.gossip.choco.gossip_steps));
  }
  differs("gossip.overlap", peer.gossip.overlap ? "true" : "false",
          want.gossip.overlap ? "true" : "false");
  differs("gossip.aggregate", describe(peer.gossip.aggregate), describe(want.gossip.aggregate));
  differs("data.shard", peer.data.shard, want.data.shard);
  differs("train.seed", std::to_string(peer.train.seed), std::to_string(want.train.seed));
}

}  // namespace

int run_compare(int argc, char** argv) {
  Args args(argc, argv, {"out", "epochs", "workers", "netem"}, {"quiet", "run"});
  if (args.help()) {
    std::printf("%s", kCompareHelp);
    return kExitOk;
  }
  const std::string out =
      args.get_or("out", "runs/" + std::filesystem::path(args.config_path()).stem().string());

  RunConfig base = load_config(args.config_path());
  base.train.epochs = epochs_option(args, base.train.epochs);
  base.sim.workers = workers_option(args, base.sim.workers);
  if (const auto netem = args.get("netem")) {
    base.net.emulate = parse_link_emulation(*netem, "--netem");
    simulate_links(base.sim, base.net.emulate);
  }
  if (base.sim.consensus_only)
    throw InputError(cat(base.path, ": sim.consensus_only: compare sweeps train (use gossip sim "
                                    "--consensus for mixing rates)"));
  const bool progress = !args.has("quiet");
  if (!args.has("run")) return run_sweep(base, out, progress);

  // gossip compare --run: every setting's peers get the arguments that make it the setting,
  // each checked before anything runs.
  if (args.get("workers"))
    throw InputError("--workers: the simulator's worker threads; with --run every peer is a "
                     "process of its own (leave --workers out)");
  check_real_sweep(base);
  for (const CompareSetting& s : compare_settings(base))
    check_peers_run(args.config_path(), s, setting_arguments(s));
  RealRuns real;
  real.links = base.net.emulate.enabled() ? base.net.emulate.text : "loopback";
  real.run = [&](const CompareSetting& s, const std::string& dir) {
    LaunchOptions opt;
    opt.config_path = args.config_path();
    opt.peer_arguments = setting_arguments(s);
    opt.out_dir = dir;
    opt.progress = progress;
    make_output_dir(dir);
    return launch(s.config, opt);
  };
  return run_sweep(base, out, progress, &real);
}

}  // namespace gossip::cli
