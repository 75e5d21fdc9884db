// peer/peer_setup.cpp: what a peer makes of `gossip peer`'s arguments (the config and its
// overrides, the topology, the rank from the launcher, hosts, TLS folder, joins and leaves),
// shared by the `gossip peer` subcommand and the Python module, so that a Python peer started by
// `gossip run --exec`, mpirun, srun or Kubernetes finds everything exactly as `gossip peer` does.
#include "gossip/peer_setup.hpp"

#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

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

namespace {

/// gossip peer's own value options and flags (the overrides come on top).
const std::set<std::string> kPeerOptions = {"rank",         "out",         "hosts",
                                            "tls-dir",      "resume-round", "until-round",
                                            "events-fd",    "leave-at-round", "join",
                                            "advertise",    "ranks",       "rejoin-round"};
const std::set<std::string> kPeerFlags = {"events", "rejoin"};

/// An integer option's value: optional<T> from the text, InputError naming the option when it
/// is not a number.
template <typename T>
std::optional<T> int_option(const Args& args, const char* name) {
  if (!args.get(name)) return std::nullopt;
  return static_cast<T>(args.get_int(name, 0));
}

/// The overrides and --metrics-port: what the config is changed by.
std::set<std::string> override_names() { return with_override_options({"metrics-port"}); }

/// --ranks A-B (or a single rank A): the first and last rank, checked against the topology and
/// against what does not go with several peers in one process.
std::pair<int, int> rank_range(const std::string& text, const PeerArguments& a,
                               const Topology& topology) {
  const auto dash = text.find('-');
  auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6)
      throw InputError(cat("--ranks ", text, ": expected FIRST-LAST, two ranks (e.g. 0-3)"));
    return std::stoi(s);
  };
  const int first = number(text.substr(0, dash));
  const int last = dash == std::string::npos ? first : number(text.substr(dash + 1));
  if (last < first || last >= topology.n())
    throw InputError(cat("--ranks ", text, ": the topology's ranks are 0-", topology.n() - 1,
                         "; give FIRST-LAST with FIRST <= LAST"));
  const std::pair<const char*, bool> refused[] = {
      {"--rank", a.rank.has_value()}, {"--join", a.join.has_value()},
      {"--leave-at-round", a.leave_at_round.has_value()},
      {"--advertise", a.advertise.has_value()}, {"--events", a.events}};
  for (const auto& [o, given] : refused)
    if (given)
      throw InputError(cat("--ranks ", text, ": ", o, " names one peer; it does not go with "
                           "several in one process"));
  if (!topology.epochs().empty())
    throw InputError(cat("--ranks ", text, ": not for a run whose peers join and leave (each "
                         "joins and leaves as a process of its own)"));
  return {first, last};
}

/// --ranks: the options of each rank of `group`, made from the first's (`first`).
std::vector<PeerOptions> group_options(const PeerOptions& first, std::pair<int, int> group,
                                       const std::string& text) {
  std::vector<PeerOptions> out;
  for (int r = group.first; r <= group.second; ++r) {
    PeerOptions o = first;
    o.rank = r;
    o.launch.rank = r;
    o.events_fd = first.events_fd < 0 ? -1 : first.events_fd + (r - group.first);
    if (o.events_fd > first.events_fd && fcntl(o.events_fd, F_GETFD) < 0)
      throw InputError(cat("--ranks ", text, ": rank ", r, "'s events go to descriptor ",
                           o.events_fd, " (--events-fd + ", r - group.first,
                           "), which is not open in this process"));
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

namespace {

/// The typed arguments of a parsed command line (nullopt: --help).
std::optional<PeerArguments> peer_arguments(int argc, char** argv) {
  std::set<std::string> options = override_names();
  options.insert(kPeerOptions.begin(), kPeerOptions.end());
  const Args args(argc, argv, options, kPeerFlags);
  if (args.help()) return std::nullopt;
  PeerArguments a;
  a.config = args.config_path();
  for (const auto& [name, value] : args.values())
    if (!kPeerOptions.count(name)) a.overrides[name] = value;
  a.rank = int_option<int>(args, "rank");
  a.ranks = args.get("ranks");
  a.out = args.get_or("out", a.out);
  a.hosts = args.get("hosts");
  a.tls_dir = args.get("tls-dir");
  a.join = args.get("join");
  a.advertise = args.get("advertise");
  a.resume_round = int_option<std::int64_t>(args, "resume-round");
  a.until_round = int_option<std::int64_t>(args, "until-round");
  a.leave_at_round = int_option<std::int64_t>(args, "leave-at-round");
  a.events_fd = int_option<int>(args, "events-fd");
  a.events = args.has("events");
  a.rejoin = args.has("rejoin");
  a.rejoin_round = int_option<std::int64_t>(args, "rejoin-round");
  return a;
}

}  // namespace

std::optional<PeerArguments> parse_peer_arguments(const std::vector<std::string>& arguments) {
  std::vector<std::string> words{"peer"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return peer_arguments(static_cast<int>(words.size()), argv.data());
}

PeerSetup peer_setup(int argc, char** argv) {
  const std::optional<PeerArguments> a = peer_arguments(argc, argv);
  if (!a) {
    PeerSetup setup;
    setup.help = true;
    return setup;
  }
  return peer_setup(*a);
}

namespace {

/// The run's config: its file, the overrides and --metrics-port on top, and --advertise.
RunConfig peer_config(const PeerArguments& a) {
  const Args overrides(a.overrides, override_names());
  RunConfig config = load_config(a.config);
  apply_overrides(overrides, config);
  config.net.metrics_port = metrics_port_option(overrides, config.net.metrics_port);
  if (a.advertise) {
    if (auto why = address_problem(*a.advertise); !why.empty())
      throw InputError(cat("--advertise ", *a.advertise, ": ", why));
    config.net.advertise = *a.advertise;
  }
  return config;
}

/// The run's topology (an elastic run's member timeline in it), and the options that go only
/// with an elastic run or only without one, checked.
Topology peer_topology(const PeerArguments& a, const RunConfig& config) {
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: a peer needs a topology file"));
  Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  // An elastic run's joins and leaves: every peer derives the same member timeline (and its
  // graphs) from the schedule; a joiner starts into it, a leaver stops where it says.
  topology = run_topology(config, topology);
  const bool elastic = !topology.epochs().empty();
  if (a.leave_at_round && !elastic)
    throw InputError(cat("--leave-at-round: peers leave a running network only in an elastic run "
                         "(elastic: true in its topology, and a fault schedule that changes its "
                         "members: joins, leaves or kills)"));
  if (elastic) {
    const std::pair<const char*, bool> refused[] = {{"resume-round", a.resume_round.has_value()},
                                                    {"until-round", a.until_round.has_value()},
                                                    {"rejoin", a.rejoin}};
    for (const auto& [o, given] : refused)
      if (given)
        throw InputError(cat("--", o, ": not for a run whose peers join and leave (",
                             config.where("faults"), ")"));
  }
  return topology;
}

/// The peer's rank (a --ranks group's first) from the launcher or the options, and the hosts
/// from --hosts, checked against the topology.
Launch peer_launch(const PeerArguments& a, const std::optional<std::pair<int, int>>& group,
                   const Topology& topology, const RunConfig& config) {
  Launch launch = detect_launch(group ? std::optional<int>(group->first) : a.rank);
  if (group) launch.rank_source = cat("--ranks ", *a.ranks);
  if (!launch.rank)
    throw InputError("no rank: pass --rank R or set GOSSIP_RANK (or run under torchrun, mpirun, "
                     "srun, as a Kubernetes Indexed Job, or as a StatefulSet pod named NAME-R)");
  if (const auto& hosts = a.hosts) {
    if (topology.has_addresses())
      throw InputError(cat("--hosts ", *hosts, ": the topology ", config.gossip.topology,
                           " gives the addresses already (peers:)"));
    launch.hosts = hosts_by_slot(parse_hostfile(read_text(*hosts), *hosts), topology.n(),
                                 "--hosts " + *hosts);
    launch.hosts_source = "--hosts " + *hosts;
    launch.node.clear();
  }
  check_launch(launch, topology, config.gossip.topology);
  return launch;
}

/// --events and --events-fd: the descriptor the peer's events go to, checked open.
void take_events(const PeerArguments& a, PeerOptions& opt) {
  if (a.events) opt.events_fd = 1;
  if (a.events_fd) {
    opt.events_fd = *a.events_fd;
    if (opt.events_fd < 1 || fcntl(opt.events_fd, F_GETFD) < 0)
      throw InputError(cat("--events-fd ", *a.events_fd,
                           ": not an open descriptor of this process"));
  }
}

/// Where the rank, world size, ports and hosts came from, as the peer says it.
std::string launch_origin(const Launch& launch, int rank, const Topology& topology) {
  std::string how = cat("rank ", rank, " (from ", launch.rank_source, ")");
  if (launch.world_size) how += cat(", ", launch.world_size_source);
  if (launch.job_id) how += cat(", ports from ", launch.job_source);
  if (const auto& t = launch.torchrun; t && !topology.has_addresses())
    how += cat(", torchrun's MASTER_ADDR=", t->master_addr,
               t->one_node() ? " (one node)" : " (other nodes' ranks learned)");
  if (!launch.hosts.empty() && !topology.has_addresses()) how += cat(", hosts from ", launch.hosts_source);
  return how;
}

/// --resume-round, --until-round and --leave-at-round, checked.
void take_rounds(const PeerArguments& a, PeerOptions& opt) {
  opt.resume_round = a.resume_round.value_or(-1);
  opt.until_round = a.until_round.value_or(0);
  opt.leave_at_round = a.leave_at_round.value_or(-1);
  if (a.leave_at_round && opt.leave_at_round < 0)
    throw InputError("--leave-at-round must be 0 or more");
  if (a.resume_round && opt.resume_round < 0)
    throw InputError("--resume-round must be 0 or more");
  if (a.until_round && opt.until_round < 1)
    throw InputError("--until-round must be at least 1");
}

/// --rejoin and --rejoin-round, checked against each other and against --resume-round.
void take_rejoin(const PeerArguments& a, PeerOptions& opt) {
  opt.rejoin = a.rejoin;
  if (a.rejoin_round) {
    if (!a.rejoin || *a.rejoin_round < 0)
      throw InputError("--rejoin-round R goes with --rejoin, R 0 or more: the round the running "
                       "network was at when this peer was started again");
    opt.rejoin_round = *a.rejoin_round;
  }
  if (opt.rejoin && opt.resume_round >= 0)
    throw InputError("--rejoin and --resume-round do not go together: a rejoining peer takes the "
                     "running network's round");
}

}  // namespace

PeerSetup peer_setup(const PeerArguments& a) {
  PeerSetup setup;
  RunConfig config = peer_config(a);
  Topology topology = peer_topology(a, config);
  const bool elastic = !topology.epochs().empty();

  std::optional<std::pair<int, int>> group;
  if (a.ranks) group = rank_range(*a.ranks, a, topology);
  Launch launch = peer_launch(a, group, topology, config);

  PeerOptions opt;
  opt.rank = *launch.rank;
  opt.out_dir = a.out;
  take_events(a, opt);
  opt.config_path = std::filesystem::absolute(a.config).lexically_normal().string();
  setup.origin = launch_origin(launch, opt.rank, topology);
  opt.launch = std::move(launch);
  take_rounds(a, opt);
  opt.tls_dir = a.tls_dir.value_or("");
  if (a.join) opt.join_contacts = join_contacts(*a.join, config, topology, opt, elastic);
  take_rejoin(a, opt);
  if (group) {
    // The process's device, shared by its peers: gossip run's processes of
    // train.peers_per_process ranks each take one device in turn.
    opt.device = group->first / config.train.peers_per_process;
    setup.group = group_options(opt, *group, *a.ranks);
  }
  setup.config = std::move(config);
  setup.topology = std::move(topology);
  setup.options = std::move(opt);
  return setup;
}


}  // namespace gossip
