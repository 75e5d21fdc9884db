// cli/peer.cpp: `gossip peer CONFIG [--rank R] --out DIR` — one peer process of a network.
#include <fcntl.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/args.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/peer_setup.hpp"
#include "src/cli/overrides.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/peer.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {
namespace {

const char* kPeerHelp =
    "usage: gossip peer CONFIG [--rank R] [--out DIR] [--hosts FILE] [--epochs N]\n"
    "                   [--algorithm NAME] [--topology FILE] [--period H] [--resume-round N]\n"
    "                   [--until-round N] [--metrics-port P] [--leave-at-round N]\n"
    "                   [--join HOST:PORT[,HOST:PORT...]]\n"
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
    "on its address when that is a numeric IP, else on all interfaces.\n"
    "Neighbours on the same host (same boot and namespaces) pass parameters through shared\n"
    "memory and use TCP for the rest; net.shared_memory: false sends everything over TCP.\n"
    "Every TCP link is mutual TLS 1.3: the peer needs the run's CA and its own certificate and\n"
    "key (`gossip keys init DIR`, then net.tls in the config, or --tls-dir DIR); net.tls: off\n"
    "turns TLS off (with a warning).\n"
    "\n"
    "options:\n"
    "  --rank R           this peer's rank\n"
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
    "\n"
    "exit codes: 0 done, 1 runtime failure, 2 bad config, topology, data, rank or world size\n";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError(cat("--hosts ", path, ": cannot open"));
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// --join HOST:PORT[,HOST:PORT...]: the ranks of the live members at those addresses in this
/// run (ascending, each once).
std::vector<int> join_contacts(const std::string& join, const RunConfig& config,
                               const Topology& topology, const PeerOptions& opt, bool elastic) {
  if (!elastic)
    throw InputError("--join: this run's peers are fixed; a new identity joins only an elastic "
                     "run (elastic: true in its topology, and a fault schedule that changes its "
                     "members: joins, leaves or kills)");
  const std::vector<std::string> addresses = peer_addresses(config, topology, opt.launch);
  std::vector<int> contacts;
  std::stringstream list(join);
  for (std::string a; std::getline(list, a, ',');) {
    const auto at = std::find(addresses.begin(), addresses.end(), a);
    if (at == addresses.end())
      throw InputError(cat("--join ", a, ": no rank of this run has that address (rank 0 is ",
                           addresses.front(), "; give a live member's host:port)"));
    const int r = static_cast<int>(at - addresses.begin());
    if (r == opt.rank) throw InputError(cat("--join ", a, ": that is this peer's own address"));
    contacts.push_back(r);
  }
  if (contacts.empty()) throw InputError("--join: give at least one HOST:PORT");
  std::sort(contacts.begin(), contacts.end());
  contacts.erase(std::unique(contacts.begin(), contacts.end()), contacts.end());
  return contacts;
}

}  // namespace

PeerSetup peer_setup(int argc, char** argv) {
  Args args(argc, argv,
            with_override_options({"rank", "out", "hosts", "tls-dir", "resume-round",
                                   "until-round", "metrics-port", "events-fd",
                                   "leave-at-round", "join"}),
            {"events", "rejoin"});
  PeerSetup setup;
  if (args.help()) {
    setup.help = true;
    return setup;
  }
  RunConfig config = load_config(args.config_path());
  apply_overrides(args, config);
  config.net.metrics_port = metrics_port_option(args, config.net.metrics_port);
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a peer needs a topology file"));
  Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  // An elastic run's joins and leaves: every peer derives the same member timeline (and its
  // graphs) from the schedule; a joiner starts into it, a leaver stops where it says.
  topology = run_topology(config, topology);
  const bool elastic = !topology.epochs().empty();
  if (args.get("leave-at-round") && !elastic)
    throw InputError(cat("--leave-at-round: peers leave a running network only in an elastic run "
                         "(elastic: true in its topology, and a fault schedule that changes its "
                         "members: joins, leaves or kills)"));
  if (elastic) {
    for (const char* o : {"resume-round", "until-round", "rejoin"})
      if (args.has(o))
        throw InputError(cat("--", o, ": not for a run whose peers join and leave (",
                             config.where("faults"), ")"));
  }

  std::optional<int> cli_rank;
  if (args.get("rank")) cli_rank = static_cast<int>(args.get_int("rank", 0));
  Launch launch = detect_launch(cli_rank);
  if (!launch.rank)
    throw InputError("no rank: pass --rank R or set GOSSIP_RANK (or run under mpirun, srun, "
                     "as a Kubernetes Indexed Job, or as a StatefulSet pod named NAME-R)");
  if (const auto hosts = args.get("hosts")) {
    if (topology.has_addresses())
      throw InputError(cat("--hosts ", *hosts, ": the topology ", config.gossip.topology,
                           " gives the addresses already (peers:)"));
    launch.hosts = hosts_by_slot(parse_hostfile(read_text(*hosts), *hosts), topology.n(),
                                 "--hosts " + *hosts);
    launch.hosts_source = "--hosts " + *hosts;
    launch.node.clear();
  }
  check_launch(launch, topology, config.gossip.topology);

  PeerOptions opt;
  opt.rank = *launch.rank;
  opt.out_dir = args.get_or("out", "runs/peer");
  if (args.has("events")) opt.events_fd = 1;
  if (args.get("events-fd")) {
    opt.events_fd = static_cast<int>(args.get_int("events-fd", -1));
    if (opt.events_fd < 1 || fcntl(opt.events_fd, F_GETFD) < 0)
      throw InputError(cat("--events-fd ", *args.get("events-fd"),
                           ": not an open descriptor of this process"));
  }
  opt.config_path = std::filesystem::absolute(args.config_path()).lexically_normal().string();
  std::string how = cat("rank ", opt.rank, " (from ", launch.rank_source, ")");
  if (launch.world_size) how += cat(", ", launch.world_size_source);
  if (launch.job_id) how += cat(", ports from ", launch.job_source);
  if (!launch.hosts.empty() && !topology.has_addresses()) how += cat(", hosts from ", launch.hosts_source);
  log_line(cat("gossip peer: ", how, "; files in ", peer_dir(opt.out_dir, opt.rank)));
  opt.launch = std::move(launch);
  opt.resume_round = args.get_int("resume-round", -1);
  opt.until_round = args.get_int("until-round", 0);
  opt.leave_at_round = args.get_int("leave-at-round", -1);
  if (args.get("leave-at-round") && opt.leave_at_round < 0)
    throw InputError("--leave-at-round must be 0 or more");
  if (args.get("resume-round") && opt.resume_round < 0)
    throw InputError("--resume-round must be 0 or more");
  if (args.get("until-round") && opt.until_round < 1)
    throw InputError("--until-round must be at least 1");
  opt.tls_dir = args.get_or("tls-dir", "");
  if (const auto join = args.get("join"))
    opt.join_contacts = join_contacts(*join, config, topology, opt, elastic);
  opt.rejoin = args.has("rejoin");
  if (opt.rejoin && opt.resume_round >= 0)
    throw InputError("--rejoin and --resume-round do not go together: a rejoining peer takes the "
                     "running network's round");
  setup.config = std::move(config);
  setup.topology = std::move(topology);
  setup.options = std::move(opt);
  return setup;
}

PeerSetup peer_setup(const std::vector<std::string>& arguments) {
  std::vector<std::string> words{"peer"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return peer_setup(static_cast<int>(words.size()), argv.data());
}

int run_peer(int argc, char** argv) {
  const PeerSetup setup = peer_setup(argc, argv);
  if (setup.help) {
    std::printf(kPeerHelp, override_help().c_str());
    return kExitOk;
  }
  return gossip::run_peer(setup.config, *setup.topology, setup.options);
}

}  // namespace gossip::cli
