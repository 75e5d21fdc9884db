// cli/compare.cpp: `gossip compare CONFIG --out DIR` — a sweep of simulations over topologies
// (and optionally algorithms, periods, shards, seeds) on the same data, summarised as a table
// (compare.csv, report.md) and gnuplot plots. Each setting's own metrics.csv and summary.json go
// to DIR/runs/<n>-<label>/.
#include <cstdio>
#include <filesystem>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/sim.hpp"

namespace gossip::cli {

namespace {

const char* kCompareHelp =
    "usage: gossip compare CONFIG [--out DIR] [--epochs N] [--workers N] [--quiet]\n"
    "                      [--netem rate=RATE[,delay=TIME]]\n"
    "\n"
    "Runs `gossip sim` once per setting of the sweep in CONFIG's compare section: every\n"
    "compare.topologies file, times compare.algorithms (choco once per compare.compress\n"
    "entry), compare.periods, compare.shards and compare.seeds when given (else the\n"
    "gossip/data/train values). All settings with the same shard and seed train on the same\n"
    "shards. With compare.averaging_rounds, first a pure-averaging pass on each topology against\n"
    "rho^2 per round (DIR/averaging.csv, averaging.png, a section of report.md). See docs/sim.md.\n"
    "\n"
    "Writes DIR/compare.csv and DIR/report.md (one row per setting: spectral gap, rounds, epochs\n"
    "and simulated seconds until every peer reaches compare.target_accuracy, rounds until the\n"
    "average model does, final accuracy of the average model,\n"
    "final lowest peer accuracy, final consensus distance, bytes per peer), DIR/curves.dat,\n"
    "plots drawn by gnuplot (accuracy vs round, bytes and simulated seconds; consensus distance\n"
    "vs round, log scale; PNG and SVG) and DIR/runs/<n>-<label>/{metrics.csv,summary.json}.\n"
    "\n"
    "options:\n"
    "  --out DIR      where to write results (default: runs/ and the config's name)\n"
    "  --epochs N     override train.epochs for every setting\n"
    "  --workers N    override sim.workers (0 = number of cores)\n"
    "  --netem SPEC   every setting on the links of `gossip run --netem SPEC` (as gossip sim\n"
    "                 --netem: over net.emulate, sim.bandwidth_mbps and sim.latency_ms)\n"
    "  --quiet        no progress bar\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure (e.g. a setting diverged), 2 bad config, topology,\n"
    "data file or option\n";

}  // namespace

int run_compare(int argc, char** argv) {
  Args args(argc, argv, {"out", "epochs", "workers", "netem"}, {"quiet"});
  if (args.help()) {
    std::printf("%s", kCompareHelp);
    return kExitOk;
  }
  const std::string out =
      args.get_or("out", "runs/" + std::filesystem::path(args.config_path()).stem().string());

  RunConfig base = load_config(args.config_path());
  base.train.epochs = args.get_double("epochs", base.train.epochs);
  base.sim.workers = static_cast<int>(args.get_int("workers", base.sim.workers));
  if (const auto netem = args.get("netem")) {
    base.net.emulate = parse_link_emulation(*netem, "--netem");
    simulate_links(base.sim, base.net.emulate);
  }
  if (base.train.epochs <= 0) throw InputError("--epochs must be positive");
  if (base.sim.consensus_only)
    throw InputError(cat(base.path, ": sim.consensus_only: compare sweeps train (use gossip sim "
                                    "--consensus for mixing rates)"));
  return run_sweep(base, out, !args.has("quiet"));
}

}  // namespace gossip::cli
