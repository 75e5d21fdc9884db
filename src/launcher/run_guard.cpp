// launcher/run_guard.cpp: the checks `gossip run` makes before anything starts — the machine
// against the peers it would start, and a resumed run's identity against the one it started
// with (run_guard.hpp).
#include "src/launcher/run_guard.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/model.hpp"
#include "gossip/progress.hpp"

namespace gossip::launch_parts {
namespace {

std::string gigabytes(std::uint64_t bytes) {
  return cat(fixed(static_cast<double>(bytes) / 1e9, bytes < 10'000'000'000ull ? 2 : 1), " GB");
}

int max_in_degree(const Topology& t) {
  int d = 0;
  for (std::int64_t round = 0; round < std::min<std::int64_t>(t.period(), 64); ++round)
    for (int p = 0; p < t.n(); ++p)
      d = std::max(d, static_cast<int>(t.in_neighbours(p, round).size()));
  return d;
}

}  // namespace

MachineSize this_machine() {
  MachineSize m;
  cpu_set_t set;
  CPU_ZERO(&set);
  m.cores = sched_getaffinity(0, sizeof set, &set) == 0
                ? CPU_COUNT(&set)
                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemAvailable:") m.available_bytes = kb * 1024;
    meminfo.ignore(64, '\n');
  }
  return m;
}

std::uint64_t peers_memory_bytes(int peers, int processes, std::int64_t params, int degree) {
  const std::uint64_t model = static_cast<std::uint64_t>(std::max<std::int64_t>(params, 0)) * 4;
  // parameters, gradients, momentum, a snapshot, the message sent, one received per in-neighbour
  const std::uint64_t buffers = model * (5 + static_cast<std::uint64_t>(std::max(degree, 0)));
  return static_cast<std::uint64_t>(processes) * kProcessBaseBytes +
         static_cast<std::uint64_t>(peers) * buffers;
}

void check_machine_fits(const RunConfig& config, const Topology& topology, std::int64_t params,
                        const MachineSize& machine) {
  const int peers = topology.n();
  const int per_process = std::max(1, config.train.peers_per_process);
  const int processes = (peers + per_process - 1) / per_process;
  const int process_limit = kProcessesPerCore * std::max(1, machine.cores);
  const std::uint64_t need = peers_memory_bytes(peers, processes, params, max_in_degree(topology));
  std::vector<std::string> over;
  if (processes > process_limit)
    over.push_back(cat(processes, " peer processes on ", machine.cores, " cores (at most ",
                       process_limit, " here: ", kProcessesPerCore, " a core)"));
  if (machine.available_bytes > 0 && need > machine.available_bytes)
    over.push_back(cat("about ", gigabytes(need), " of memory (",
                       fixed(static_cast<double>(need / peers) / 1e6, 1), " MB a peer for a "
                       "model of ", params, " parameters) where ",
                       gigabytes(machine.available_bytes), " is available"));
  if (over.empty()) return;
  std::string what = over.front();
  if (over.size() > 1) what += cat(", and ", over[1]);
  throw InputError(cat(
      "refusing to start ", peers, " peers of ", config.gossip.topology,
      " on this machine: they would need ", what, ". Simulate them in one process with "
      "`gossip sim ", config.path, "` (the same algorithm code), run them on several machines "
      "(`gossip peer` on each, or mpirun, srun, Kubernetes: docs/clusters.md), host several ranks in each "
      "process (--peers-per-process N), or pass --force to start them anyway"));
}

std::vector<std::pair<std::string, std::string>> run_identity(const RunConfig& config,
                                                              const Topology& topology) {
  const DataConfig& d = config.data;
  const std::string data =
      d.synthetic ? cat("synthetic ", d.synthetic_train, "/", d.synthetic_test, " dim ",
                        d.synthetic_dim, " separation ", d.synthetic_separation)
                  : cat(d.train_images, " ", d.train_labels, " ", d.test_images, " ", d.test_labels);
  std::string model = "(the exec: script's)";
  if (config.exec.empty()) model = model_fingerprint(config.model);
  return {
      {"gossip.topology", cat(topology.n(), " peers, fingerprint ", hex64(topology.fingerprint()))},
      {"model.layers", model},
      {"gossip.algorithm", algorithm_name(config.gossip.algorithm)},
      {"gossip.period", cat(config.gossip.period)},
      {"train.seed", cat(config.train.seed)},
      {"train.epochs", cat(config.train.epochs)},
      {"train.batch", cat(config.train.batch)},
      {"data", cat(data, ", shard ", d.shard, ", limit_train ", d.limit_train)},
      {"exec", config.exec.empty() ? std::string("(gossip peer)") : config.exec},
  };
}

void keep_run_identity(const RunConfig& config, const Topology& topology,
                       const std::string& out_dir, bool resume) {
  const std::string path = cat(out_dir, "/run-identity");
  const auto now = run_identity(config, topology);
  if (!resume) {
    std::ofstream out(path, std::ios::trunc);
    for (const auto& [key, value] : now) out << key << '\t' << value << '\n';
    if (!out) throw InputError(cat(path, ": cannot write"));
    return;
  }
  std::ifstream in(path);
  if (!in) return;
  for (std::string line; std::getline(in, line);) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string key = line.substr(0, tab), was = line.substr(tab + 1);
    const auto it = std::find_if(now.begin(), now.end(), [&](const auto& kv) { return kv.first == key; });
    if (it == now.end() || it->second == was) continue;
    throw InputError(cat("gossip run --resume ", out_dir, ": ", key, " changed since the run "
                         "started (it was ", was, ", it is now ", it->second, " in ",
                         config.path, "); its checkpoints are of the run as it started: put ",
                         key, " back, or start a new run in another folder"));
  }
}

}  // namespace gossip::launch_parts
