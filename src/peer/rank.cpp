// peer/rank.cpp: where a peer's rank, the launcher's world size and job, and its neighbours'
// addresses come from.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "gossip/core.hpp"
#include "gossip/peer.hpp"

namespace gossip {
namespace {

std::optional<int> parse_rank(const std::string& text, const std::string& from) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 1'000'000)
    throw InputError(cat(from, ": expected a rank (a whole number >= 0), got '", text, "'"));
  return static_cast<int>(v);
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

/// The launcher's world size from `var`, when it is set.
void read_world_size(Launch& l, const char* var, const char* launcher) {
  if (const auto v = env(var)) {
    const auto size = parse_rank(*v, var);
    if (*size < 1) throw InputError(cat(var, ": the world size must be at least 1, got ", *v));
    l.world_size = size;
    l.world_size_source = cat(var, "=", *v);
    l.launcher = launcher;
  }
}

void read_job_id(Launch& l, const char* var) {
  const auto v = env(var);
  if (!v) return;
  char* end = nullptr;
  const unsigned long long id = std::strtoull(v->c_str(), &end, 10);
  if (*end != '\0') return;  // not a number: no port offset from it
  l.job_id = id;
  l.job_source = cat(var, "=", *v);
}

/// Slurm's node list and tasks per node for this step (else the job's), one host per rank.
void read_slurm_hosts(Launch& l) {
  const char* list_var = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const char* tasks_var =
      env("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const auto list = env(list_var);
  const auto tasks = env(tasks_var);
  if (!list || !tasks) return;
  const auto nodes = expand_slurm_hostlist(*list, list_var);
  const auto counts = expand_slurm_tasks_per_node(*tasks, tasks_var);
  if (counts.size() != nodes.size())
    throw InputError(cat(tasks_var, "=", *tasks, " gives ", counts.size(), " nodes but ",
                         list_var, "=", *list, " has ", nodes.size()));
  std::vector<HostSlots> slots;
  for (std::size_t i = 0; i < nodes.size(); ++i) slots.push_back({nodes[i], counts[i]});
  int total = 0;
  for (int c : counts) total += c;
  l.hosts = hosts_by_slot(slots, total, list_var);
  l.hosts_source = cat(list_var, " and ", tasks_var);
  if (const auto node = env("SLURMD_NODENAME")) l.node = *node;
}

/// An IPv6 literal in brackets, as HOST:PORT needs it; other hosts as they are.
std::string bracketed(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? cat("[", host, "]") : host;
}

/// The address this host reaches `host` from: the local end of a UDP socket connected there (no
/// packet is sent), else this host's name.
std::string own_address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string out;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0 && found) {
    const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
    sockaddr_storage local{};
    socklen_t size = sizeof local;
    char text[INET6_ADDRSTRLEN] = {};
    if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0) {
      const void* a = local.ss_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, a, text, sizeof text))
        out = local.ss_family == AF_INET6 ? cat("[", text, "]") : std::string(text);
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(found);
  }
  if (!out.empty()) return out;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

/// A torchrun worker: TORCHELASTIC_RUN_ID with RANK; the rest of what its agent sets is
/// required then, and named when missing or malformed.
bool read_torchrun(Launch& l) {
  const auto run_id = env("TORCHELASTIC_RUN_ID");
  const auto rank = env("RANK");
  if (!run_id || !rank) return false;
  auto need = [](const char* var) {
    const auto v = env(var);
    if (!v)
      throw InputError(cat("torchrun: ", var, " is not set (TORCHELASTIC_RUN_ID and RANK are): "
                           "start the script with torchrun, or unset TORCHELASTIC_RUN_ID"));
    return *v;
  };
  l.rank = parse_rank(*rank, "RANK");
  l.rank_source = "RANK, torchrun";
  read_world_size(l, "WORLD_SIZE", "torchrun");
  if (!l.world_size) need("WORLD_SIZE");
  TorchRun t;
  t.master_addr = need("MASTER_ADDR");
  t.master_port = *parse_rank(need("MASTER_PORT"), "MASTER_PORT");
  t.local_world_size = *parse_rank(need("LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE");
  if (const auto c = env("TORCHELASTIC_RESTART_COUNT"))
    t.restart_count = *parse_rank(*c, "TORCHELASTIC_RESTART_COUNT");
  t.run_id = *run_id;
  t.world_size = *l.world_size;
  // The ports: a block below the ephemeral ports chosen by this job and attempt (the run id and
  // MASTER_PORT, which torch draws anew at each restart), as an mpirun or srun job's: ports next
  // to MASTER_PORT would be ephemeral ones that any connection on the host may hold.
  std::uint64_t job = 1469598103934665603ull;  // FNV-1a of "RUN_ID:MASTER_PORT"
  for (const char c : cat(t.run_id, ":", t.master_port)) job = (job ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  l.job_id = job;
  l.job_source = cat("TORCHELASTIC_RUN_ID and MASTER_PORT=", t.master_port);
  // The ranks of the node that holds MASTER_ADDR (torchrun's group 0) are reached there too.
  const auto group = env("GROUP_RANK");
  const bool master_node = group && parse_rank(*group, "GROUP_RANK") == 0;
  if (!t.one_node())
    t.own_host = master_node ? bracketed(t.master_addr)
                             : own_address_toward(t.master_addr, t.master_port);
  l.torchrun = std::move(t);
  return true;
}

/// A task of an srun step (the batch script itself has SLURM_PROCID but no SLURM_STEP_ID). srun
/// --mpi=pmi2 sets PMI_RANK as well, to the same value; an MPI launcher of its own inside the
/// allocation sets a PMI_RANK or PMI_SIZE of its own.
bool read_srun(Launch& l) {
  const auto procid = env("SLURM_PROCID");
  const auto pmi_rank = env("PMI_RANK");
  const bool pmi_is_slurm =
      !pmi_rank || (pmi_rank == procid && env("PMI_SIZE") == env("SLURM_NTASKS"));
  if (!procid || !env("SLURM_STEP_ID") || !pmi_is_slurm) return false;
  l.rank = parse_rank(*procid, "SLURM_PROCID");
  l.rank_source = "SLURM_PROCID";
  read_world_size(l, "SLURM_NTASKS", "srun");
  read_job_id(l, "SLURM_JOB_ID");
  read_slurm_hosts(l);
  return true;
}

}  // namespace

bool TorchRun::one_node() const { return local_world_size == world_size; }

Launch detect_launch(std::optional<int> cli) {
  Launch l;
  if (cli) {
    l.rank = cli;
    l.rank_source = "--rank";
    return l;
  }
  if (read_torchrun(l)) return l;
  if (const auto v = env("GOSSIP_RANK")) {
    l.rank = parse_rank(*v, "GOSSIP_RANK");
    l.rank_source = "GOSSIP_RANK";
    return l;
  }
  // Open MPI's mpirun, also inside a Slurm allocation (whose SLURM_PROCID its ranks inherit).
  if (const auto v = env("OMPI_COMM_WORLD_RANK")) {
    l.rank = parse_rank(*v, "OMPI_COMM_WORLD_RANK");
    l.rank_source = "OMPI_COMM_WORLD_RANK";
    read_world_size(l, "OMPI_COMM_WORLD_SIZE", "mpirun");
    read_job_id(l, "OMPI_MCA_ess_base_jobid");
    return l;
  }
  if (read_srun(l)) return l;
  if (const auto pmi_rank = env("PMI_RANK")) {
    l.rank = parse_rank(*pmi_rank, "PMI_RANK");
    l.rank_source = "PMI_RANK";
    read_world_size(l, "PMI_SIZE", "the MPI launcher");
    return l;
  }
  if (const auto v = env("JOB_COMPLETION_INDEX")) {  // a pod of a Kubernetes Indexed Job
    l.rank = parse_rank(*v, "JOB_COMPLETION_INDEX");
    l.rank_source = "JOB_COMPLETION_INDEX";
    return l;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    std::string h = host;
    std::size_t end = h.size();
    std::size_t start = end;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(h[start - 1]))) --start;
    // Only "name-3" style names (StatefulSet pods), not hosts that merely end in a digit.
    if (start < end && start > 0 && h[start - 1] == '-') {
      l.rank = parse_rank(h.substr(start), "host name '" + h + "'");
      l.rank_source = "host name";
    }
  }
  return l;
}

void check_launch(const Launch& launch, const Topology& topology,
                  const std::string& topology_path) {
  const int n = topology.n();
  if (launch.world_size && *launch.world_size != n)
    throw InputError(cat(launch.launcher, " started ", *launch.world_size, " ranks (",
                         launch.world_size_source, ") but the topology ", topology_path,
                         " has ", n, " peers: start ", n, " ranks, or give a topology of ",
                         *launch.world_size, " peers (--topology FILE)"));
  if (!launch.rank || topology.has_addresses() || launch.hosts.empty()) return;
  const int rank = *launch.rank;
  if (static_cast<int>(launch.hosts.size()) != n)
    throw InputError(cat(launch.hosts_source, " place ", launch.hosts.size(), " ranks but the ",
                         "topology ", topology_path, " has ", n, " peers"));
  if (rank < n && !launch.node.empty() && launch.hosts[rank] != launch.node)
    throw InputError(cat("rank ", rank, " runs on node ", launch.node, " but ",
                         launch.hosts_source, " place it on ", launch.hosts[rank],
                         " (srun --distribution other than block?): give the addresses in the ",
                         "topology's peers: list"));
}

int job_base_port(int base_port, int peers, std::optional<std::uint64_t> job_id) {
  if (!job_id || peers < 1) return base_port;
  // Blocks of `peers` ports from base_port, below the kernel's ephemeral ports (32768 and up) when
  // they fit there, so that a job's ports are not taken by some connection's local end.
  const int limit = base_port + peers <= 32768 ? 32768 : 65536;
  const int blocks = std::max(1, (limit - base_port) / peers);
  return base_port + static_cast<int>(*job_id % static_cast<std::uint64_t>(blocks)) * peers;
}

std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology,
                                        const Launch& launch) {
  std::vector<std::string> out;
  const int base = job_base_port(config.net.base_port, topology.n(), launch.job_id);
  for (int r = 0; r < topology.n(); ++r) {
    if (auto a = topology.address(r)) {
      out.push_back(*a == kLearnedAddress ? std::string() : *a);  // learned: none listed
      continue;
    }
    if (const auto& t = launch.torchrun) {  // rank 0 at MASTER_ADDR; on one node all are
      const bool listed = r == 0 || t->one_node();
      out.push_back(listed ? cat(bracketed(t->master_addr), ":", base + r) : std::string());
      continue;
    }
    const int port = base + r;
    if (port > 65535)
      throw InputError(cat("net.base_port ", config.net.base_port, " + rank ", r,
                           (base != config.net.base_port ? cat(" + the job's offset ",
                                                               base - config.net.base_port)
                                                         : std::string()),
                           " is beyond port 65535"));
    const std::string host =
        launch.hosts.size() > static_cast<std::size_t>(r) ? launch.hosts[r] : config.net.host;
    out.push_back(cat(host, ":", port));
  }
  return out;
}

std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology) {
  return peer_addresses(config, topology, Launch{});
}

std::string announced_address(const RunConfig& config, const Topology& topology,
                              const Launch& launch, int rank) {
  if (!config.net.advertise.empty()) return config.net.advertise;
  if (auto a = peer_addresses(config, topology, launch)[rank]; !a.empty()) return a;
  if (const auto& t = launch.torchrun; t && !topology.address(rank))  // torchrun, another node
    return cat(t->own_host, ":",
               job_base_port(config.net.base_port, topology.n(), launch.job_id) + rank);
  // Listed as learned, and no net.advertise: the address a run without peers: gives it.
  Topology bare = topology;
  bare.set_addresses({});
  return peer_addresses(config, bare, launch)[rank];
}

std::string listen_address(const std::string& address, const std::string& bind) {
  if (!bind.empty()) {
    // HOST:PORT as given; a bare HOST (an IPv4 address or name, or [IPv6]) takes the port of
    // `address`.
    const bool has_port = bind.back() != ']' && bind.find(':') != std::string::npos &&
                          bind.find(':') == bind.rfind(':');
    const bool bracketed_port = bind.front() == '[' && bind.find("]:") != std::string::npos;
    if (has_port || bracketed_port) return bind;
    const auto colon = address.rfind(':');
    return colon == std::string::npos ? bind : bind + address.substr(colon);
  }
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return address;  // NetListener names what is wrong with it
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned char buf[16];
  const bool numeric = inet_pton(AF_INET, host.c_str(), buf) == 1 ||
                       inet_pton(AF_INET6, host.c_str(), buf) == 1;
  return numeric ? address : "0.0.0.0" + address.substr(colon);
}

}  // namespace gossip
