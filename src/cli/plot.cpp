// cli/plot.cpp: `gossip plot DIR` — draws the plots of a run, sim, train or peer folder from its
// metrics.csv, or redraws a compare sweep's from compare.csv and curves.dat.
#include <cstdio>
#include <filesystem>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip::cli {
namespace {

const char* kPlotHelp =
    "usage: gossip plot DIR\n"
    "\n"
    "Draws PNG and SVG plots (with gnuplot) into DIR, from what a command wrote there:\n"
    "  - a run folder (gossip run, sim, train, peer: DIR/metrics.csv): accuracy_vs_round\n"
    "    (the average model, the lowest peer and every peer), loss_vs_round (the average\n"
    "    model's test loss, every peer's training loss) and, when there is an average model,\n"
    "    consensus_vs_round (log axis; an exact 0 is drawn at the bottom, a decade below the\n"
    "    smallest positive value). The data goes to DIR/plots.dat, the script to DIR/plots.gp.\n"
    "  - a compare sweep (DIR/compare.csv and DIR/curves.dat): the sweep's plots again.\n"
    "\n"
    "exit codes: 0 drawn, 1 gnuplot missing or failed (see DIR/plots.log), 2 DIR holds\n"
    "neither, or its files are malformed (the message names file and line)\n";

}  // namespace

int run_plot(int argc, char** argv) {
  Args args(argc, argv, {}, {});
  if (args.help()) {
    std::printf("%s", kPlotHelp);
    return kExitOk;
  }
  if (args.positional().size() != 1) throw InputError("expected one folder DIR (see --help)");
  const std::string dir = args.positional().front();
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(cat(dir, ": no such folder"));
  const bool sweep = fs::exists(fs::path(dir) / "compare.csv");
  if (sweep) {
    redraw_compare(dir);
  } else if (fs::exists(fs::path(dir) / "metrics.csv")) {
    plot_metrics(dir);
  } else {
    throw InputError(cat(dir, ": nothing to plot: no metrics.csv (a gossip run, sim, train or "
                              "peer folder) and no compare.csv with curves.dat (a gossip compare "
                              "folder)"));
  }
  std::printf("gossip plot: drew %s/*.png and *.svg (%s)\n", dir.c_str(),
              sweep ? "the sweep's plots" : "accuracy, loss and consensus vs round");
  return kExitOk;
}

}  // namespace gossip::cli
