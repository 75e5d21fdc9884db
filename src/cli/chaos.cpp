// cli/chaos.cpp: `gossip chaos CONFIG --faults N --seed S` — a seeded random fault schedule for
// CONFIG's run (gossip/faults.hpp: chaos_schedule), written as a --faults file for `gossip run`
// and `gossip sim` alike.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "gossip/args.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "src/cli/commands.hpp"

namespace gossip::cli {
namespace {

const char* kChaosHelp =
    "usage: gossip chaos CONFIG [--faults N] [--seed S] [--rounds R] [--max-pause SECONDS]\n"
    "                    [--no-pauses] [--no-cuts] [--attacks N] [--out FILE]\n"
    "\n"
    "Writes a seeded random fault schedule for CONFIG's run: N faults (default 30) at distinct\n"
    "rounds of the first nine tenths of the run, in round order, each a kill (one peer, now and\n"
    "then two), a restart of a dead peer, a pause of a live one (0.1 s to --max-pause, default\n"
    "1) or a cut of one link of the topology for 5 to rounds/10 rounds, as the schedule so far\n"
    "allows (a third of the peers, at least 2, always alive); with --attacks N, N attacks on top\n"
    "(one live peer each: sign_flip, noise or dissensus for 3 to rounds/20 + 2 rounds; the other\n"
    "faults unchanged). On an elastic topology the N faults are joins and leaves of one rank\n"
    "each instead, far enough apart that each takes effect before the next is announced. The\n"
    "same config, options and seed give the same schedule. Give the\n"
    "file to both:\n"
    "\n"
    "  gossip chaos configs/quickstart.yaml --faults 30 --seed 7 --out chaos.yaml\n"
    "  gossip run configs/quickstart.yaml --out runs/chaos --faults chaos.yaml --keep-going\n"
    "  gossip sim configs/quickstart.yaml --out runs/chaos-sim --faults chaos.yaml\n"
    "\n"
    "options:\n"
    "  --faults N         how many faults (default 30)\n"
    "  --seed S           the schedule's seed (default 1)\n"
    "  --rounds R         the run's rounds (default: what CONFIG's data, epochs and batch give)\n"
    "  --max-pause S      the longest pause in seconds (default 1)\n"
    "  --no-pauses, --no-cuts  leave those out\n"
    "  --attacks N        N attacks on top (docs/config.md, Attacks; default 0)\n"
    "  --out FILE         write the schedule there (default: standard output)\n"
    "\n"
    "exit codes: 0 written, 2 bad input (config, topology, a run too short for N faults).\n";

}  // namespace

int run_chaos(int argc, char** argv) {
  const Args args(argc, argv, {"faults", "seed", "rounds", "max-pause", "out", "attacks"},
                  {"no-pauses", "no-cuts"});
  if (args.help()) {
    std::printf("%s", kChaosHelp);
    return kExitOk;
  }
  const RunConfig config = load_config(args.config_path());
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a topology file is required"));
  const Topology loaded = load_topology(config.gossip.topology);
  ChaosOptions o;
  o.count = static_cast<int>(args.get_int("faults", o.count));
  o.seed = static_cast<std::uint64_t>(args.get_int("seed", 1));
  o.max_pause_s = args.get_double("max-pause", o.max_pause_s);
  if (!(o.max_pause_s >= 0.1)) throw InputError("--max-pause must be at least 0.1 (seconds)");
  o.pauses = !args.has("no-pauses");
  o.cuts = !args.has("no-cuts");
  o.attacks = static_cast<int>(args.get_int("attacks", 0));
  if (o.attacks < 0) throw InputError("--attacks must be 0 or more");
  o.rounds = args.get_int("rounds", 0);
  if (args.get("rounds") && o.rounds < 1) throw InputError("--rounds must be at least 1");
  if (o.rounds == 0)  // over the run's identities (an elastic graph's max_peers)
    o.rounds =
        plan_rounds(config, load_datasets(config).train.n, run_topology(config, loaded).n()).rounds;
  const std::vector<Fault> faults = chaos_schedule(loaded, o);
  const ScheduleOutcome outcome = schedule_outcome(faults);
  const std::string text =
      cat("# gossip chaos ", args.config_path(), " --faults ", o.count, " --seed ", o.seed,
          o.attacks > 0 ? cat(" --attacks ", o.attacks) : std::string(), ": ",
          faults.size(), " faults over ", o.rounds, " rounds of ", loaded.n(), " peers; ",
          loaded.elastic() ? cat(std::count_if(faults.begin(), faults.end(), [](const Fault& f) {
                                   return f.action == FaultAction::kJoin;
                                 }), " joins, ", std::count_if(faults.begin(), faults.end(), [](const Fault& f) {
                                   return f.action == FaultAction::kLeave;
                                 }), " leaves\n")
                           : cat(outcome.kills, " kills, ", outcome.restarts, " restarts, ",
                                 outcome.dead_at_end.size(), " dead at the end\n"),
          faults_yaml(faults));
  if (const auto out = args.get("out")) {
    std::ofstream f(*out, std::ios::trunc);
    f << text;
    if (!f) throw InputError(cat("--out ", *out, ": cannot write"));
    std::fprintf(stderr, "gossip chaos: wrote %zu faults to %s\n", faults.size(), out->c_str());
  } else {
    std::printf("%s", text.c_str());
  }
  return kExitOk;
}

}  // namespace gossip::cli
