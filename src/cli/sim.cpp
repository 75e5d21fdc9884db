// cli/sim.cpp: `gossip sim CONFIG --out DIR` — many virtual peers in one process running the
// config's gossip algorithm over its topology, with a progress bar; metrics.csv and summary.json
// per DESIGN.md's contracts.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/sim.hpp"

namespace gossip::cli {

namespace {

const char* kSimHelp =
    "usage: gossip sim CONFIG --out DIR [--epochs N] [--workers N] [--algorithm NAME]\n"
    "                  [--topology FILE] [--period H] [--netem rate=RATE[,delay=TIME]]\n"
    "                  [--consensus] [--quiet] [--tensorboard]\n"
    "\n"
    "Simulates topology.n virtual peers in one process: each trains on its own shard of the\n"
    "data (data.shard) with gossip.algorithm (--algorithm lists them) every gossip.period\n"
    "local steps over gossip.topology, on a simulated network (sim.latency_ms,\n"
    "sim.bandwidth_mbps, sim.step_ms, sim.stragglers, sim.message_loss).\n"
    "Local steps run on sim.workers threads; results do not depend on the thread count.\n"
    "With train.backend: cuda each worker has its own stream, and peer p runs on worker\n"
    "p mod their count.\n"
    "See docs/sim.md.\n"
    "\n"
    "Writes DIR/metrics.csv (one row per peer per evaluation, peer -1 = the average model;\n"
    "seconds are simulated), DIR/summary.json (test_accuracy is the average model's) and the\n"
    "per-round timeline of sim.trace_peers peers on the simulated clock, DIR/peers/R/trace.json\n"
    "(Chrome trace events; the final table shows each phase's share).\n"
    "\n"
    "options:\n"
    "  --out DIR          where to write results (required)\n"
    "%s"
    "  --workers N        override sim.workers (0 = number of cores; on a GPU, 1)\n"
    "  --netem SPEC       model the links of `gossip run --netem SPEC` (net.emulate): rate=RATE\n"
    "                     sets sim.bandwidth_mbps, delay=TIME sets sim.latency_ms to twice it\n"
    "                     (both ends of a link delay); jitter and loss are not modelled.\n"
    "                     Precedence: --netem, then net.emulate, then sim.bandwidth_mbps and\n"
    "                     sim.latency_ms\n"
    "  --consensus        pure consensus: peers average random vectors (sim.consensus_dim,\n"
    "                     sim.consensus_rounds), no gradients; shows the mixing rate\n"
    "  --quiet            no progress bar\n"
    "  --tensorboard      also write the metrics as TensorBoard event files in DIR/tensorboard/\n"
    "                     (train.tensorboard)\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure (e.g. training diverged), 2 bad config, topology,\n"
    "data file or option, 3 finished but the topology is not connected (no consensus possible)\n";

}  // namespace

int run_sim(int argc, char** argv) {
  Args args(argc, argv, with_override_options({"out", "workers", "netem"}), {"consensus", "quiet", "tensorboard"});
  if (args.help()) {
    std::printf(kSimHelp, override_help().c_str());
    return kExitOk;
  }
  const std::string out = args.required("out", "DIR");

  RunConfig config = load_config(args.config_path());
  apply_overrides(args, config);
  if (args.has("tensorboard")) config.train.tensorboard = true;
  if (const auto netem = args.get("netem")) {
    config.net.emulate = parse_link_emulation(*netem, "--netem");
    simulate_links(config.sim, config.net.emulate);
  }
  config.sim.workers = workers_option(args, config.sim.workers);
  if (args.has("consensus")) config.sim.consensus_only = true;
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a topology file is required"));

  return run_simulation(config, out, !args.has("quiet"));
}

}  // namespace gossip::cli
