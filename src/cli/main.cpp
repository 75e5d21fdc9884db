// cli/main.cpp: the `gossip` binary. Dispatches to one subcommand per file and maps error kinds
// to exit codes (the only place that decides how the process ends).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "gossip/args.hpp"
#include "gossip/backend.hpp"
#include "src/cli/commands.hpp"
#include "gossip/core.hpp"
#include "gossip_config.h"

namespace {

// Add a subcommand here and in src/cli/<name>.cpp.
const gossip::Subcommand kCommands[] = {
    {"train", "train one peer on its own (no gossip)", gossip::cli::run_train},
    {"topo", "check a topology file (connectivity, spectral gap) or generate one", gossip::cli::run_topo},
    {"sim", "simulate many virtual peers in one process (simulated network clock)",
     gossip::cli::run_sim},
    {"compare", "sweep topologies (and algorithms, periods, shards, seeds) in the simulator",
     gossip::cli::run_compare},
    {"peer", "run one peer of a network (under Slurm, mpirun, Kubernetes or gossip run)",
     gossip::cli::run_peer},
    {"run", "run a whole peer network on this machine from a config", gossip::cli::run_run},
    {"watch", "serve the live dashboard of a run folder as it grows", gossip::cli::run_watch},
    {"collect", "merge the peers' results of a network started by mpirun, srun or Kubernetes",
     gossip::cli::run_collect},
    {"plot", "draw the plots of a run, sim, train, peer or compare folder", gossip::cli::run_plot},
    {"keys", "make a run's TLS credentials: a CA and a key and certificate per rank",
     gossip::cli::run_keys},
    {"doctor", "before a run: can this peer's links form (addresses, ports, TLS, NAT)?",
     gossip::cli::run_doctor},
    {"chaos", "write a seeded random fault schedule (kills, restarts, pauses, cuts) for a run",
     gossip::cli::run_chaos},
    {"bench", "benchmarks that print a ratio against a reference measured in the same run",
     gossip::cli::run_bench},
};

void print_usage() {
  std::printf(
      "gossip %s: decentralized gossip SGD over a peer network\n\n"
      "usage: gossip COMMAND [ARGS] (gossip COMMAND --help for each)\n\ncommands:\n",
      GOSSIP_VERSION);
  gossip::print_subcommands(kCommands, 9);
  std::printf(
      "\nexit codes: 0 success, 1 runtime failure, 2 bad input (the message names the file,\n"
      "line or field), 3 topology valid but disconnected, 130 interrupted\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (gossip::wants_usage(argc, argv) || !std::strcmp(argv[1], "help")) {
    print_usage();
    return argc < 2 ? gossip::kExitBadInput : gossip::kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("gossip %s\n%s\n", GOSSIP_VERSION, gossip::cuda_plugin_check().c_str());
    return 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    // A peer's log is timestamped line by line (docs/outputs.md), its last line too.
    const bool peer = !std::strcmp(c.name, "peer");
    auto stamp = [peer] { return peer ? gossip::utc_timestamp() + " " : std::string(); };
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const gossip::InputError& e) {
      std::fprintf(stderr, "%sgossip %s: error: %s\n", stamp().c_str(), c.name, e.what());
      return gossip::kExitBadInput;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%sgossip %s: error: %s\n", stamp().c_str(), c.name, e.what());
      return gossip::kExitFailure;
    }
  }
  std::fprintf(stderr, "gossip: unknown command '%s' (see gossip --help)\n", argv[1]);
  return gossip::kExitBadInput;
}
