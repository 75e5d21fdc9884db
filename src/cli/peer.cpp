// cli/peer.cpp: `gossip peer CONFIG [--rank R] --out DIR` — one peer process of a network.
#include <cstdio>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {
namespace {

const char* kPeerHelp =
    "usage: gossip peer CONFIG [--rank R] [--out DIR] [--topology FILE]\n"
    "\n"
    "Runs one peer of the network CONFIG describes (its gossip.topology names the graph): trains\n"
    "on its shard, gossips with its neighbours over TCP, and writes DIR/metrics.csv and\n"
    "DIR/summary.json (default DIR: runs/peer-R). Start one per rank, on one or many machines.\n"
    "\n"
    "The rank comes from --rank, else GOSSIP_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or\n"
    "PMI_RANK, else the trailing number of the host name (Kubernetes StatefulSet pod gossip-3 is\n"
    "rank 3). Addresses come from the topology's `peers:` list, else net.host:(net.base_port+R).\n"
    "Neighbours on the same host (same boot and namespaces) pass parameters through shared\n"
    "memory and use TCP for the rest; net.shared_memory: false sends everything over TCP.\n"
    "Every TCP link is mutual TLS 1.3: the peer needs the run's CA and its own certificate and\n"
    "key (`gossip keys init DIR`, then net.tls in the config, or --tls-dir DIR); net.tls: off\n"
    "turns TLS off (with a warning).\n"
    "\n"
    "options:\n"
    "  --rank R      this peer's rank\n"
    "  --out DIR     where to write results\n"
    "  --topology F  use topology file F instead of the config's gossip.topology\n"
    "  --tls-dir D   TLS credentials from D (ca.pem, peer-R.pem, peer-R.key, as made by\n"
    "                `gossip keys init`) instead of the config's net.tls files\n"
    "  --events      print machine-readable '@gossip' event lines (used by gossip run)\n"
    "  --snapshots   write params-ROUND.bin at each evaluation (used by gossip run)\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, topology, data or rank\n";

}  // namespace

int run_peer(int argc, char** argv) {
  Args args(argc, argv, {"rank", "out", "topology", "tls-dir"}, {"events", "snapshots"});
  if (args.help()) {
    std::printf("%s", kPeerHelp);
    return kExitOk;
  }
  RunConfig config = load_config(args.config_path());
  config.gossip.topology = args.get_or("topology", config.gossip.topology);
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
  opt.tls_dir = args.get_or("tls-dir", "");
  std::fprintf(stderr, "gossip peer: rank %d (from %s)\n", *rank, source.c_str());
  return gossip::run_peer(config, topology, opt);
}

}  // namespace gossip::cli
