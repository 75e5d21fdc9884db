// cli/watch.cpp: `gossip watch DIR [--dashboard [ADDR:]PORT]` — the live dashboard of a run
// started elsewhere, from its folder.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip/launcher.hpp"

namespace gossip::cli {
namespace {

const char* kWatchHelp =
    "usage: gossip watch DIR [--dashboard [ADDR:]PORT] [--config CONFIG]\n"
    "\n"
    "Serves the live dashboard of the run in DIR (the --out folder of `gossip run`, or where\n"
    "`gossip peer`s started by mpirun, srun or by hand write) from its files as they grow: the\n"
    "graph with each peer's state and live-graph component, the accuracy, loss and consensus\n"
    "curves of the merged metrics.csv, the event log and where the time went. It only reads\n"
    "DIR; the page is read-only. Link traffic needs the peers' live event lines, so it shows\n"
    "under `gossip run --dashboard` only. Runs until Ctrl-C (docs/observe.md).\n"
    "\n"
    "options:\n"
    "  --dashboard [ADDR:]PORT  where to serve the page (default 127.0.0.1:8050; ADDR is\n"
    "                   127.0.0.1 unless given)\n"
    "  --config CONFIG  the run config (default: DIR/run-command's, else the one the peers\n"
    "                   recorded)\n"
    "\n"
    "exit codes: 0 stopped by Ctrl-C, 1 it cannot listen on the port, 2 DIR is not a run folder\n"
    "or its config cannot be read\n";

}  // namespace

int run_watch(int argc, char** argv) {
  Args args(argc, argv, {"dashboard", "config"}, {});
  if (args.help()) {
    std::printf("%s", kWatchHelp);
    return kExitOk;
  }
  if (args.positional().size() != 1)
    throw InputError("gossip watch: give one run folder (gossip watch DIR)");
  WatchOptions opt;
  opt.dir = args.positional().front();
  opt.address = dashboard_address(args.get_or("dashboard", "8050"), "--dashboard");
  opt.config_path = args.get_or("config", "");
  return watch(opt);
}

}  // namespace gossip::cli
