// cli/peer.cpp: `gossip peer CONFIG [--rank R] --out DIR` — one peer process of a network (or,
// with --ranks A-B, a process of several, one thread each).
#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "gossip/peer_setup.hpp"
#include "gossip/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {
namespace {

const char* kPeerHelp =
    "usage: gossip peer CONFIG [--rank R | --ranks A-B] [--out DIR] [--hosts FILE]\n"
    "                   [--epochs N] [--algorithm NAME] [--topology FILE] [--period H]\n"
    "                   [--resume-round N] [--until-round N] [--metrics-port P]\n"
    "                   [--leave-at-round N]\n"
    "                   [--join HOST:PORT[,HOST:PORT...]] [--advertise HOST:PORT]\n"
    "\n"
    "Runs one peer of the network CONFIG describes (its gossip.topology names the graph): trains\n"
    "on its shard, gossips with its neighbours over TCP, and writes its files into DIR/peers/R/:\n"
    "metrics.csv, summary.json, events.txt (its event lines), params-ROUND.bin at each evaluation\n"
    "and params.bin at the end (float32 parameters). `gossip collect DIR` then merges the ranks\n"
    "into DIR/metrics.csv, DIR/summary.json and DIR/events.jsonl. Default DIR: runs/peer.\n"
    "Start one per rank, on one or many machines. Every line it writes to stderr (its log) starts\n"
    "with the UTC time, ISO-8601 with milliseconds: 2025-01-31T12:00:00.123Z.\n"
    "\n"
    "The rank comes from --rank, else GOSSIP_RANK, OMPI_COMM_WORLD_RANK (mpirun), SLURM_PROCID\n"
    "(an srun task), PMI_RANK, JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), else the trailing\n"
    "number of the host name (StatefulSet pod gossip-3 is rank 3). Under mpirun or srun the\n"
    "number of ranks started (OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE) must equal the\n"
    "topology's peer count, or every rank stops with exit code 2.\n"
    "\n"
    "Addresses come from the topology's `peers:` list; else each rank's host is the one srun\n"
    "placed it on (SLURM_STEP_NODELIST, block distribution), or the one --hosts gives it, or\n"
    "net.host; and its port is net.base_port + R, moved by a block chosen from the job id\n"
    "(SLURM_JOB_ID, Open MPI's job id) so that two jobs on one host do not collide. A peer listens\n"
    "on its address when that is a numeric IP, else on all interfaces. A peers: entry may be\n"
    "`learned`: that peer announces its address (--advertise) in a record signed by its TLS\n"
    "certificate, which the members pass on; nobody else can announce one for it.\n"
    "Neighbours on the same host (same boot and namespaces) pass parameters through shared\n"
    "memory and use TCP for the rest; net.shared_memory: false sends everything over TCP.\n"
    "Every TCP link is mutual TLS 1.3: the peer needs the run's CA and its own certificate and\n"
    "key (`gossip keys init DIR`, then net.tls in the config, or --tls-dir DIR); net.tls: off\n"
    "turns TLS off (with a warning).\n"
    "\n"
    "options:\n"
    "  --rank R           this peer's rank\n"
    "  --ranks A-B        ranks A to B in this one process, one thread each (gossip run's\n"
    "                     train.peers_per_process: peers sharing a GPU then share one CUDA\n"
    "                     context); rank A+i writes its events to --events-fd + i. A peer that\n"
    "                     fails ends the process, and with it the others\n"
    "  --out DIR          the run's folder; this peer writes into DIR/peers/R/\n"
    "  --hosts FILE       an MPI hostfile ('host slots=N' a line, as given to mpirun --hostfile):\n"
    "                     ranks fill each host's slots in order, as mpirun places them\n"
    "%s"
    "                     (every peer of a network must be given the same overrides)\n"
    "  --tls-dir D        TLS credentials from D (ca.pem, peer-R.pem, peer-R.key, as made by\n"
    "                     `gossip keys init`) instead of the config's net.tls files\n"
    "  --events           print machine-readable '@gossip' event lines on stdout\n"
    "  --events-fd N      write them to the open descriptor N instead (gossip run passes 3:\n"
    "                     what the peer or its script prints then stays out of the events)\n"
    "  --resume-round N   continue from DIR/peers/R/checkpoint-N.ckpt (every peer of the run\n"
    "                     from the same N; gossip run --resume picks it); metrics.csv keeps its\n"
    "                     rows to N\n"
    "  --join HOST:PORT[,...]  an elastic run: this rank is a new identity (its certificate from\n"
    "                     `gossip keys add`); it asks the live members at these addresses to\n"
    "                     announce its join, starts from its new neighbours' average and mixes\n"
    "                     from the round the member timeline then gives it\n"
    "  --advertise HOST:PORT  the address this peer announces, when it is not the one the\n"
    "                     topology lists (peers: gives `learned`, or a NAT forwards a port):\n"
    "                     net.advertise. The members learn it from a record signed by this\n"
    "                     peer's TLS certificate (docs/network.md); an unlisted peer dials\n"
    "                     the neighbours that have not dialled it within 1 s\n"
    "  --leave-at-round N an elastic run: announce this peer's leave at round N; it leaves\n"
    "                     membership_lead rounds later (`gossip topo` lists the lead), and exits\n"
    "                     0. SIGTERM does the same at the round it comes (a second one ends it)\n"
    "  --until-round N    stop after round N with a checkpoint (train.checkpoint_every sets\n"
    "                     regular ones), to be resumed later\n"
    "  --metrics-port P   serve Prometheus metrics at http://127.0.0.1:(P+R)/metrics\n"
    "                     (net.metrics_port; net.metrics_host for another address) and write\n"
    "                     DIR/peers/R/metrics.prom at the end (docs/observe.md)\n"
    "  --rejoin           this peer died and is started again while the others train on: keep\n"
    "                     its earlier files (events.txt, metrics.csv, peer.log grow), skip the\n"
    "                     round-0 evaluation. Without it a restarted peer rejoins just the same\n"
    "                     (it takes a neighbour's parameters and round), but starts its files anew\n"
    "  --rejoin-round R   with --rejoin: the round the network was at when this peer was started\n"
    "                     again (gossip run passes it). With no live neighbour the peer trains\n"
    "                     alone from there, saying so, and is mixed in when one comes back\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, topology, data, rank or world size\n";

/// --ranks: each rank's peer on a thread of its own; the process's exit code is the largest of
/// theirs. A peer that fails ends the process at once, as a peer process of its own would end:
/// its neighbours, in here or elsewhere, see it die.
int run_group(const PeerSetup& setup) {
  std::vector<std::thread> threads;
  std::vector<int> codes(setup.group.size(), kExitOk);
  for (std::size_t i = 0; i < setup.group.size(); ++i)
    threads.emplace_back([&setup, &codes, i] {
      const PeerOptions& opt = setup.group[i];
      int code = kExitFailure;
      try {
        codes[i] = gossip::run_peer(setup.config, *setup.topology, opt);
        return;
      } catch (const InputError& e) {
        code = kExitBadInput;
        log_line(cat("gossip peer: rank ", opt.rank, ": error: ", e.what()));
      } catch (const std::exception& e) {
        log_line(cat("gossip peer: rank ", opt.rank, ": error: ", e.what()));
      }
      log_line(cat("gossip peer: rank ", opt.rank, " failed; ending its process and so the "
                   "other ", setup.group.size() - 1, " peer(s) in it"));
      std::fflush(nullptr);
      std::_Exit(code);
    });
  for (auto& t : threads) t.join();
  return *std::max_element(codes.begin(), codes.end());
}

}  // namespace

int run_peer(int argc, char** argv) {
  const PeerSetup setup = peer_setup(argc, argv);
  if (setup.help) {
    std::printf(kPeerHelp, override_help().c_str());
    return kExitOk;
  }
  log_line(cat("gossip peer: ", setup.origin, "; files in ",
               peer_dir(setup.options.out_dir, setup.options.rank)));
  if (!setup.group.empty()) return run_group(setup);
  return gossip::run_peer(setup.config, *setup.topology, setup.options);
}

}  // namespace gossip::cli
