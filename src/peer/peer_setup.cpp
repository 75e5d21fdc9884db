// peer/peer_setup.cpp: what a peer makes of `gossip peer`'s arguments (the config and its
// overrides, the topology, the rank from the launcher, hosts, TLS folder, joins and leaves),
// shared by the `gossip peer` subcommand and the Python module, so that a Python peer started by
// `gossip run --exec`, mpirun, srun or Kubernetes finds everything exactly as `gossip peer` does.
#include "gossip/peer_setup.hpp"

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/args.hpp"
#include "gossip/core.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/overrides.hpp"

namespace gossip {
namespace {

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


}  // namespace gossip
