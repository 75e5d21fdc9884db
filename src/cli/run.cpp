// cli/run.cpp: `gossip run CONFIG --out DIR` — the whole peer network on this machine.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/launcher.hpp"

namespace gossip::cli {
namespace {

const char* kRunHelp =
    "usage: gossip run CONFIG --out DIR [--epochs N] [--algorithm NAME] [--topology FILE]\n"
    "                  [--period H] [--keep-going] [--no-progress]\n"
    "\n"
    "Starts one `gossip peer` process per rank of CONFIG's topology on this machine, shows one\n"
    "progress line for the whole network: the round every peer has completed (redrawn every\n"
    "second on a terminal, every 5 s in a log), an ETA from the measured round rate, and the\n"
    "last evaluation's accuracy of the average model, lowest and highest peer accuracy and\n"
    "consensus distance. Writes DIR/metrics.csv and DIR/summary.json (the same columns and\n"
    "fields, with the same meaning, as gossip sim; docs/outputs.md) plus each peer's files and\n"
    "log (every line starting with its UTC time) in DIR/peers/R/. A disconnected topology is\n"
    "refused before anything starts. `gossip plot DIR` draws the curves.\n"
    "\n"
    "options:\n"
    "  --out DIR          where to write results (required)\n"
    "%s"
    "                     (the overrides are passed on to every peer)\n"
    "  --keep-going       when a peer dies, report it and let the others train on without it\n"
    "                     (default: stop every peer and exit 1 saying which one failed and why)\n"
    "  --no-progress      no progress line\n"
    "\n"
    "exit codes: 0 done, 1 a peer failed, 2 bad config, topology or option, 3 topology\n"
    "disconnected, 130 interrupted (Ctrl-C stops every peer)\n";

}  // namespace

int run_run(int argc, char** argv) {
  Args args(argc, argv, with_override_options({"out"}), {"keep-going", "no-progress"});
  if (args.help()) {
    std::printf(kRunHelp, kOverrideHelp);
    return kExitOk;
  }
  const std::string out = args.required("out", "DIR");
  RunConfig config = load_config(args.config_path());
  apply_overrides(args, config);
  LaunchOptions opt;
  opt.config_path = args.config_path();
  opt.peer_arguments = override_arguments(args);
  opt.out_dir = out;
  opt.keep_going = args.has("keep-going");
  opt.progress = !args.has("no-progress");
  return launch(config, opt);
}

}  // namespace gossip::cli
