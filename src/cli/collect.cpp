// cli/collect.cpp: `gossip collect DIR [DIR...]` — merges the peers of a run that mpirun, srun or
// Kubernetes started into the outputs `gossip run` writes.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip/launcher.hpp"

namespace gossip::cli {
namespace {

const char* kCollectHelp =
    "usage: gossip collect DIR [DIR...] [--config CONFIG]\n"
    "\n"
    "Merges the results of a network whose peers were started one by one (`gossip peer CONFIG\n"
    "--out DIR` under mpirun, srun, Kubernetes or by hand): each rank wrote its metrics, event\n"
    "lines and parameter snapshots into DIR/peers/R/. Writes DIR/metrics.csv (every peer's rows\n"
    "and the average model's), DIR/events.jsonl and DIR/summary.json, evaluating the average\n"
    "model and the consensus distance exactly as `gossip run` does, and prints the same final\n"
    "table. Without a shared filesystem, copy each machine's run folder over and give them all:\n"
    "the outputs go into the first DIR.\n"
    "\n"
    "options:\n"
    "  --config CONFIG  the run config (default: the path each peer recorded; give it when the\n"
    "                   run folder moved to another machine)\n"
    "\n"
    "exit codes: 0 every peer finished, 1 some peer did not (merged up to where it got), 2 a rank\n"
    "missing or found twice, a malformed events.txt, or a missing config\n";

}  // namespace

int run_collect(int argc, char** argv) {
  Args args(argc, argv, {"config"}, {});
  if (args.help()) {
    std::printf("%s", kCollectHelp);
    return kExitOk;
  }
  CollectRunOptions opt;
  opt.dirs = args.positional();
  opt.config_path = args.get_or("config", "");
  return collect(opt);
}

}  // namespace gossip::cli
