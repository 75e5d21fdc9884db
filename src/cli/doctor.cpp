// cli/doctor.cpp: `gossip doctor CONFIG [--rank R]` — before a run, from the machine a peer will
// run on: can its links form? (gossip/peer.hpp: doctor; the checks: net::diagnose.)
#include <cstdio>

#include "gossip/args.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/peer.hpp"
#include "gossip/peer_setup.hpp"
#include "gossip/topology.hpp"
#include "src/cli/commands.hpp"

namespace gossip::cli {
namespace {

const char* kDoctorHelp =
    "usage: gossip doctor CONFIG [--rank R] [--topology FILE] [--hosts FILE] [--tls-dir DIR]\n"
    "                     [--json]\n"
    "\n"
    "Checks, from the machine peer R will run on and before it runs, whether its links can\n"
    "form: for each neighbour, that its address resolves and can be dialled (and how long a\n"
    "connection takes), the TLS identity it answers with, its clock against this machine's, and\n"
    "whether it can dial this peer back at the address the run gives it (it is asked to, as a\n"
    "running peer asks at its start; the probe is awaited on this peer's own address, which\n"
    "must be free: run the doctor before the peer). The neighbours must be running (`gossip\n"
    "peer` waits net.connect_timeout_s for its neighbours) for anything but the address to be\n"
    "checked. Then it says what to change: start a peer, open or forward a port, fix an address\n"
    "in the topology's peers: list, set net.bind, or that a relay will carry a link.\n"
    "\n"
    "The rank comes from --rank, else as `gossip peer` finds it (GOSSIP_RANK, mpirun, srun, ...);\n"
    "the addresses as `gossip peer` has them (peers:, --hosts, net.host and net.base_port).\n"
    "\n"
    "options:\n"
    "  --rank R         the peer to check from\n"
    "  --topology FILE  the topology (default: the config's gossip.topology)\n"
    "  --hosts FILE     an MPI hostfile giving the ranks' hosts, as for gossip peer\n"
    "  --tls-dir DIR    TLS credentials in `gossip keys init` layout (overrides net.tls)\n"
    "  --json           one JSON object instead of the lines\n"
    "\n"
    "exit codes: 0 every link can form (one end dials the other), 1 some cannot as things\n"
    "are (a neighbour is not answering, or neither end can dial the other: a relay is needed),\n"
    "2 bad input (config, topology, rank).\n";

}  // namespace

int run_doctor(int argc, char** argv) {
  Args args(argc, argv, {"rank", "topology", "hosts", "tls-dir"}, {"json"});
  if (args.help()) {
    std::printf("%s", kDoctorHelp);
    return kExitOk;
  }
  if (args.positional().size() != 1)
    throw InputError("gossip doctor: give one CONFIG (gossip doctor --help)");
  PeerArguments a;
  a.config = args.positional().front();
  if (args.has("rank")) a.rank = static_cast<int>(args.get_int("rank", 0));
  if (args.has("hosts")) a.hosts = args.get_or("hosts", "");
  if (args.has("tls-dir")) a.tls_dir = args.get_or("tls-dir", "");
  if (args.has("topology")) a.overrides["topology"] = args.get_or("topology", "");
  const PeerSetup setup = peer_setup(a);
  log_line(cat("gossip doctor: checking the links of ", setup.origin));
  const DoctorOutcome out = doctor(setup.config, *setup.topology, setup.options);
  std::printf("%s\n", args.has("json") ? out.json.c_str() : out.text.c_str());
  return out.can_start ? kExitOk : 1;
}

}  // namespace gossip::cli
