// launcher/launcher.cpp: `gossip run`. Starts the peers, follows their "@gossip" event lines,
// hands them to the NetworkRecord (which merges evaluations into metrics.csv with the consensus
// distance and the accuracy of the average model), draws the progress bar, and ends the run:
// summary.json on success; every child stopped on Ctrl-C or on a peer's failure.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <variant>

#include "src/launcher/children.hpp"
#include "src/launcher/network_record.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/monitor.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"
#include "gossip/progress.hpp"

namespace gossip {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal = sig; }

class Network {
 public:
  Network(const RunConfig& config, const LaunchOptions& opt, const Topology& topology)
      : opt_(opt), n_(topology.n()),
        record_(config, opt.out_dir, n_, launcher::NetworkRecord::Clock::kLauncher, true) {}

  int run();

 private:
  void start();
  void merge_ready_rounds();
  int fail(const std::string& why);

  const LaunchOptions& opt_;
  int n_;
  launcher::NetworkRecord record_;
  std::vector<launcher::Child> children_;
  Progress progress_;
  Clock::time_point t0_ = Clock::now();
};

void Network::start() {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int r = 0; r < n_; ++r) {
    const std::string dir = cat(opt_.out_dir, "/peers/", r);
    make_output_dir(dir);
    children_.push_back(launcher::spawn_child(
        r, {self, "peer", opt_.config_path, "--rank", std::to_string(r), "--out", opt_.out_dir,
            "--events"},
        dir + "/peer.log"));
  }
}

void Network::merge_ready_rounds() {
  for (const EvaluationFigures& f : record_.merge_ready_rounds())
    progress_.update(f.round, record_.total_rounds(),
                     cat("acc ", fixed(f.test_accuracy, 4), "  peers ",
                         fixed(f.peer_accuracy_min, 3), "-", fixed(f.peer_accuracy_max, 3),
                         "  consensus ", sci(f.consensus_distance)));
}

int Network::fail(const std::string& why) {
  progress_.finish();
  std::fprintf(stderr, "gossip run: %s\n", why.c_str());
  launcher::stop_all(children_, 3000);
  std::fprintf(stderr, "gossip run: stopped all peers; logs in %s/peers/*/peer.log\n",
               opt_.out_dir.c_str());
  return kExitFailure;
}

int Network::run() {
  progress_.enable(opt_.progress);
  start();
  for (;;) {
    if (g_signal != 0) {
      progress_.finish();
      std::fprintf(stderr, "gossip run: interrupted; stopping %d peers\n", n_);
      launcher::stop_all(children_, 3000);
      return 130;
    }
    std::vector<pollfd> fds;
    for (auto& c : children_)
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
    if (!fds.empty()) poll(fds.data(), fds.size(), 200);
    bool all_exited = true;
    for (auto& c : children_) {
      std::vector<std::string> lines;
      launcher::read_lines(c, lines);
      for (const auto& l : lines) {
        const auto e = parse_event(l);
        if (!e) continue;
        if (const auto* a = std::get_if<AlertEvent>(&*e))
          progress_.note(cat("peer ", c.rank, ": ", a->message));
        record_.handle(c.rank, *e);
      }
      const bool was_running = c.running;
      if (launcher::reap(c) && was_running) {
        if (c.exit_code != 0 || !record_.has_finished(c.rank)) {
          const std::string why = cat("peer ", c.rank, " failed (exit code ", c.exit_code,
                                      "); last lines of its log:\n", launcher::tail_lines(c.log_path, 6));
          if (!opt_.keep_going) return fail(why);
          progress_.note(why);
          record_.peer_failed(c.rank, why);
        }
      }
      all_exited &= !c.running && c.out_fd < 0;
    }
    merge_ready_rounds();
    if (all_exited) break;
  }
  if (static_cast<int>(record_.dead().size()) == n_) return fail("every peer failed");
  progress_.finish();
  record_.finish(std::chrono::duration<double>(Clock::now() - t0_).count());
  return record_.dead().empty() ? kExitOk : kExitFailure;
}

}  // namespace

int launch(const RunConfig& config, const LaunchOptions& options) {
  if (config.gossip.topology.empty())
    throw InputError(cat(config.path, ": gossip.topology: `gossip run` needs a topology file"));
  const Topology topology = load_topology(config.gossip.topology);
  check_algorithm(config, topology);
  const TopologyReport report = analyze(topology);
  if (!report.connected) {
    std::fprintf(stderr,
                 "gossip run: refusing to start: %s is not connected; its components are %s\n",
                 config.gossip.topology.c_str(), format_components(report.components).c_str());
    return kExitDisconnected;
  }
  make_output_dir(options.out_dir);
  std::printf("gossip run: %d peers on %s (spectral gap per round %.4f), algorithm %s, period %d; "
              "peer logs in %s/peers/\n",
              topology.n(), config.gossip.topology.c_str(), 1.0 - report.rho_per_round,
              config.gossip.algorithm.c_str(), config.gossip.period, options.out_dir.c_str());
  std::fflush(stdout);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Network net(config, options, topology);
  return net.run();
}

}  // namespace gossip
