// cli/peer.cpp: `gossip peer CONFIG [--rank R] --out DIR` — one peer process of a network.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {
namespace {

const char* kPeerHelp =
    "usage: gossip peer CONFIG [--rank R] [--out DIR] [--epochs N] [--algorithm NAME]\n"
    "                   [--topology FILE] [--period H]\n"
    "\n"
    "Runs one peer of the network CONFIG describes (its gossip.topology names the graph): trains\n"
    "on its shard, gossips with its neighbours over TCP, and writes DIR/metrics.csv and\n"
    "DIR/summary.json (default DIR: runs/peer-R). Start one per rank, on one or many machines.\n"
    "Every line it writes to stderr (its log) starts with the UTC time, ISO-8601 with\n"
    "milliseconds: 2025-01-31T12:00:00.123Z.\n"
    "\n"
    "The rank comes from --rank, else GOSSIP_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or\n"
    "PMI_RANK, else the trailing number of the host name (Kubernetes StatefulSet pod gossip-3 is\n"
    "rank 3). Addresses come from the topology's `peers:` list, else net.host:(net.base_port+R).\n"
    "Neighbours on the same host (same boot and namespaces) pass parameters through shared\n"
    "memory and use TCP for the rest; net.shared_memory: false sends everything over TCP.\n"
    "\n"
    "options:\n"
    "  --rank R           this peer's rank\n"
    "  --out DIR          where to write results\n"
    "%s"
    "                     (every peer of a network must be given the same overrides)\n"
    "  --events           print machine-readable '@gossip' event lines (used by gossip run)\n"
    "  --snapshots        write params-ROUND.bin at each evaluation (used by gossip run)\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, topology, data or rank\n";

}  // namespace

int run_peer(int argc, char** argv) {
  Args args(argc, argv, with_override_options({"rank", "out"}), {"events", "snapshots"});
  if (args.help()) {
    std::printf(kPeerHelp, kOverrideHelp);
    return kExitOk;
  }
  RunConfig config = load_config(args.config_path());
  apply_overrides(args, config);
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a peer needs a topology file"));
  const Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  std::optional<int> cli_rank;
  if (args.get("rank")) cli_rank = static_cast<int>(args.get_int("rank", 0));
  std::string source;
  const auto rank = resolve_rank(cli_rank, &source);
  if (!rank)
    throw InputError("no rank: pass --rank R or set GOSSIP_RANK (or run under Slurm, mpirun, "
                     "or as a StatefulSet pod named NAME-R)");
  PeerOptions opt;
  opt.rank = *rank;
  opt.out_dir = args.get_or("out", cat("runs/peer-", *rank));
  opt.events = args.has("events");
  opt.snapshots = args.has("snapshots");
  log_line(cat("gossip peer: rank ", *rank, " (from ", source, ")"));
  return gossip::run_peer(config, topology, opt);
}

}  // namespace gossip::cli
