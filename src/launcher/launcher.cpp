// launcher/launcher.cpp: `gossip run`. Starts the peers, follows their "@gossip" event lines,
// merges evaluations into metrics.csv (with the consensus distance and the accuracy of the
// average model, computed here from the peers' parameter snapshots), draws the progress bar, and
// ends the run: summary.json on success; every child stopped on Ctrl-C or on a peer's failure.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <variant>

#include "src/launcher/children.hpp"
#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/monitor.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"
#include "gossip/progress.hpp"
#include "gossip/train.hpp"

namespace gossip {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal = sig; }

std::vector<float> read_snapshot(const std::string& path, std::int64_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (f.gcount() != static_cast<std::streamsize>(n * sizeof(float)))
    throw RuntimeError(cat(path, ": parameter snapshot is truncated"));
  return v;
}

/// Evaluations of one round by peer, gathered until every live peer has reported it.
using RoundEvals = std::map<int, EvalEvent>;

class Network {
 public:
  Network(const RunConfig& config, const LaunchOptions& opt, const Topology& topology)
      : config_(config), opt_(opt), n_(topology.n()), record_(opt.out_dir),
        backend_(make_cpu_backend(1)), data_(load_datasets(config)),
        evaluator_(*backend_, config, data_.train, {0}, 0) {}

  int run();

 private:
  void start();
  void handle(int rank, const PeerEvent& e);
  void merge_ready_rounds();
  void merge_round(std::int64_t round, RoundEvals& evals, const std::vector<int>& expected);
  void finish_summary();
  int fail(const std::string& why);

  const RunConfig& config_;
  const LaunchOptions& opt_;
  int n_;
  RunRecord record_;
  std::unique_ptr<Backend> backend_;
  DataSets data_;
  Trainer evaluator_;  // holds the average model
  std::vector<launcher::Child> children_;
  std::map<std::int64_t, RoundEvals> pending_;
  std::vector<int> dead_;
  std::vector<std::optional<DoneEvent>> done_;
  Progress progress_;
  std::int64_t total_rounds_ = 0;
  bool live_connected_ = true;
  Clock::time_point t0_ = Clock::now();
};

void Network::start() {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int r = 0; r < n_; ++r) {
    const std::string dir = cat(opt_.out_dir, "/peers/", r);
    make_output_dir(dir);
    children_.push_back(launcher::spawn_child(
        r,
        {self, "peer", opt_.config_path, "--rank", std::to_string(r), "--out", dir, "--events",
         "--snapshots"},
        dir + "/peer.log"));
  }
  done_.resize(n_);
}

void Network::handle(int rank, const PeerEvent& event) {
  if (const auto* e = std::get_if<EvalEvent>(&event)) {
    total_rounds_ = e->rounds;
    pending_[e->round][rank] = *e;
  } else if (const auto* e = std::get_if<DoneEvent>(&event)) {
    done_[rank] = *e;
  } else if (const auto* e = std::get_if<AlertEvent>(&event)) {
    live_connected_ = e->connected;
    progress_.note(cat("peer ", rank, ": ", e->message));
  }
}

void Network::merge_ready_rounds() {
  std::vector<int> expected;
  for (int r = 0; r < n_; ++r)
    if (std::find(dead_.begin(), dead_.end(), r) == dead_.end()) expected.push_back(r);
  while (!pending_.empty()) {
    auto& [round, evals] = *pending_.begin();
    for (int r : expected)
      if (!evals.count(r)) return;  // wait for the slower peers
    merge_round(round, evals, expected);
    pending_.erase(pending_.begin());
  }
}

/// Rows for every peer and for the average model, whose accuracy and the consensus distance
/// come from the peers' parameter snapshots.
void Network::merge_round(std::int64_t round, RoundEvals& evals,
                          const std::vector<int>& expected) {
  std::vector<std::vector<float>> params;
  for (int r : expected) params.push_back(read_snapshot(evals[r].params, evaluator_.num_params()));
  std::vector<std::span<const float>> views(params.begin(), params.end());
  std::vector<float> avg(evaluator_.num_params());
  const double cd = consensus_distance(views);
  average_params(views, avg);
  evaluator_.upload_params(avg);
  const Evaluation ev = evaluator_.evaluate(data_.test, config_.train.eval_limit);
  MetricsRow avg_row{round, evals[expected.front()].epoch, -1, 0.0, ev.accuracy, cd, 0,
                     std::chrono::duration<double>(Clock::now() - t0_).count()};
  for (int r : expected) {
    const EvalEvent& e = evals[r];
    record_.write(MetricsRow{round, e.epoch, r, e.loss, e.accuracy, cd, e.bytes_sent, e.seconds});
    avg_row.loss += e.loss / expected.size();
    avg_row.bytes_sent += e.bytes_sent;
    std::error_code ec;
    std::filesystem::remove(e.params, ec);
  }
  record_.write(avg_row);
  record_.flush();
  const EvaluationFigures& f = record_.last();
  progress_.update(round, total_rounds_,
                   cat("acc ", fixed(ev.accuracy, 4), "  peers ", fixed(f.peer_accuracy_min, 3),
                       "-", fixed(f.peer_accuracy_max, 3), "  consensus ", sci(cd)));
}

int Network::fail(const std::string& why) {
  progress_.finish();
  std::fprintf(stderr, "gossip run: %s\n", why.c_str());
  launcher::stop_all(children_, 3000);
  std::fprintf(stderr, "gossip run: stopped all peers; logs in %s/peers/*/peer.log\n",
               opt_.out_dir.c_str());
  return kExitFailure;
}

void Network::finish_summary() {
  RunEnd end{.rounds = record_.last().round, .bytes_sent = 0,
             .wall_seconds = std::chrono::duration<double>(Clock::now() - t0_).count(),
             .connected = live_connected_, .params_sha256 = {}, .extra = {}};
  for (int r = 0; r < n_; ++r) {
    end.params_sha256.push_back(done_[r] ? done_[r]->params_sha256 : "");
    end.bytes_sent += done_[r] ? done_[r]->bytes_sent : 0;
  }
  end.extra.add("dead_peers", JsonArray::of(dead_)).add("peers", n_);
  std::vector<std::int64_t> samples;
  for (const auto& shard : shard_for(config_, data_.train, n_)) samples.push_back(std::ssize(shard));
  end.extra.add("samples_per_peer", JsonArray::of(samples));
  // Peak resident memory of each rank's peer process (the largest if it was restarted).
  std::vector<double> rss_mb(n_, 0.0);
  for (const auto& c : children_)
    rss_mb[c.rank] = std::max(rss_mb[c.rank], static_cast<double>(c.max_rss_kb) / 1024.0);
  const double peer_max_rss_mb = *std::max_element(rss_mb.begin(), rss_mb.end());
  end.extra.add("peer_max_rss_mb", peer_max_rss_mb);
  const Summary s = record_.finish(std::move(end));
  progress_.finish();
  std::printf("\n%5s  %9s  %12s  %8s  %11s\n", "peer", "test_acc", "bytes_sent", "seconds",
              "max_rss_mb");
  for (int r = 0; r < n_; ++r) {
    if (!done_[r]) {
      std::printf("%5d  %9s  %12s  %8s  %11.1f\n", r, "dead", "-", "-", rss_mb[r]);
      continue;
    }
    std::printf("%5d  %9.4f  %12llu  %8.1f  %11.1f\n", r, done_[r]->accuracy,
                static_cast<unsigned long long>(done_[r]->bytes_sent), done_[r]->seconds,
                rss_mb[r]);
  }
  std::printf("average model: test_accuracy %.4f, consensus distance %.3g, %lld rounds, %.2f "
              "epochs, %.1f s; peak RSS per peer %.1f MB\nwrote %s/summary.json and "
              "%s/metrics.csv\n",
              s.last.test_accuracy, s.last.consensus_distance,
              static_cast<long long>(s.end.rounds), s.last.epoch, s.end.wall_seconds,
              peer_max_rss_mb, opt_.out_dir.c_str(), opt_.out_dir.c_str());
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
      for (const auto& l : lines)
        if (auto e = parse_event(l)) handle(c.rank, *e);
      const bool was_running = c.running;
      if (launcher::reap(c) && was_running) {
        if (c.exit_code != 0 || !done_[c.rank]) {
          const std::string why = cat("peer ", c.rank, " failed (exit code ", c.exit_code,
                                      "); last lines of its log:\n", launcher::tail_lines(c.log_path, 6));
          if (!opt_.keep_going) return fail(why);
          progress_.note(why);
          dead_.push_back(c.rank);
        }
      }
      all_exited &= !c.running && c.out_fd < 0;
    }
    merge_ready_rounds();
    if (all_exited) break;
  }
  if (static_cast<int>(dead_.size()) == n_) return fail("every peer failed");
  finish_summary();
  return dead_.empty() ? kExitOk : kExitFailure;
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
