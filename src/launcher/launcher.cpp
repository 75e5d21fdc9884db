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

#include "children.hpp"
#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/launcher.hpp"
#include "gossip/monitor.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"
#include "gossip/train.hpp"
#include "gossip/progress.hpp"

namespace gossip {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal = sig; }

/// "@gossip eval peer=3 round=10 ..." -> type and fields; `message=` takes the rest of the line.
struct Event {
  std::string type;
  std::map<std::string, std::string> fields;
  double num(const std::string& k, double fallback = 0.0) const {
    auto it = fields.find(k);
    return it == fields.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
  }
  std::string str(const std::string& k) const {
    auto it = fields.find(k);
    return it == fields.end() ? "" : it->second;
  }
};

std::optional<Event> parse_event(const std::string& line) {
  const std::string prefix = "@gossip ";
  if (line.rfind(prefix, 0) != 0) return std::nullopt;
  Event e;
  std::size_t pos = prefix.size();
  auto sp = line.find(' ', pos);
  e.type = line.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
  while (sp != std::string::npos) {
    pos = sp + 1;
    auto eq = line.find('=', pos);
    if (eq == std::string::npos) break;
    const std::string key = line.substr(pos, eq - pos);
    if (key == "message") {
      e.fields[key] = line.substr(eq + 1);
      break;
    }
    sp = line.find(' ', eq);
    e.fields[key] = line.substr(eq + 1, sp == std::string::npos ? std::string::npos : sp - eq - 1);
  }
  return e;
}

std::vector<float> read_snapshot(const std::string& path, std::int64_t n) {
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (f.gcount() != static_cast<std::streamsize>(n * sizeof(float)))
    throw RuntimeError(cat(path, ": parameter snapshot is truncated"));
  return v;
}

/// Evaluations of one round, gathered until every live peer has reported it.
struct RoundEvals {
  std::map<int, Event> peers;
};

class Network {
 public:
  Network(const RunConfig& config, const LaunchOptions& opt, const Topology& topology)
      : config_(config), opt_(opt), n_(topology.n()), metrics_(opt.out_dir),
        backend_(make_cpu_backend(1)), data_(load_datasets(config)),
        evaluator_(*backend_, config, data_.train, {0}, 0) {}

  int run();

 private:
  void start();
  void handle(int rank, const Event& e);
  void merge_ready_rounds();
  void finish_summary();
  int fail(const std::string& why);

  const RunConfig& config_;
  const LaunchOptions& opt_;
  int n_;
  MetricsWriter metrics_;
  std::unique_ptr<Backend> backend_;
  DataSets data_;
  Trainer evaluator_;  // holds the average model
  std::vector<launcher::Child> children_;
  std::map<std::int64_t, RoundEvals> pending_;
  std::vector<int> dead_;
  std::vector<Event> done_;
  Progress progress_;
  std::int64_t total_rounds_ = 0;
  double last_avg_acc_ = 0.0, last_cd_ = 0.0, last_min_ = 0.0, last_max_ = 0.0;
  double last_epoch_ = 0.0;
  std::int64_t last_round_ = 0;
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

void Network::handle(int rank, const Event& e) {
  if (e.type == "eval") {
    total_rounds_ = static_cast<std::int64_t>(e.num("rounds"));
    pending_[static_cast<std::int64_t>(e.num("round"))].peers[rank] = e;
  } else if (e.type == "done") {
    done_[rank] = e;
  } else if (e.type == "alert") {
    live_connected_ = e.num("connected", 1) != 0;
    progress_.note(cat("peer ", rank, ": ", e.str("message")));
  }
}

void Network::merge_ready_rounds() {
  while (!pending_.empty()) {
    auto& [round, evals] = *pending_.begin();
    std::vector<int> expected;
    for (int r = 0; r < n_; ++r)
      if (std::find(dead_.begin(), dead_.end(), r) == dead_.end()) expected.push_back(r);
    for (int r : expected)
      if (!evals.peers.count(r)) return;  // wait for the slower peers
    std::vector<std::vector<float>> params;
    for (int r : expected)
      params.push_back(read_snapshot(evals.peers[r].str("params"), evaluator_.num_params()));
    std::vector<std::span<const float>> views(params.begin(), params.end());
    std::vector<float> avg(evaluator_.num_params());
    const double cd = consensus_distance(views);
    average_params(views, avg);
    evaluator_.upload_params(avg);
    const Evaluation ev = evaluator_.evaluate(data_.test, config_.train.eval_limit);
    double mn = 1.0, mx = 0.0, loss = 0.0;
    std::uint64_t bytes = 0;
    for (int r : expected) {
      const Event& e = evals.peers[r];
      MetricsRow row;
      row.round = round;
      row.epoch = e.num("epoch");
      row.peer = r;
      row.loss = e.num("loss");
      row.test_accuracy = e.num("acc");
      row.consensus_distance = cd;
      row.bytes_sent = static_cast<std::uint64_t>(e.num("bytes"));
      row.seconds = e.num("seconds");
      metrics_.write(row);
      mn = std::min(mn, row.test_accuracy);
      mx = std::max(mx, row.test_accuracy);
      loss += row.loss / expected.size();
      bytes += row.bytes_sent;
      std::error_code ec;
      std::filesystem::remove(e.str("params"), ec);
    }
    MetricsRow avg_row;
    avg_row.round = round;
    avg_row.epoch = evals.peers[expected.front()].num("epoch");
    avg_row.peer = -1;
    avg_row.loss = loss;
    avg_row.test_accuracy = ev.accuracy;
    avg_row.consensus_distance = cd;
    avg_row.bytes_sent = bytes;
    avg_row.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    metrics_.write(avg_row);
    metrics_.flush();
    last_avg_acc_ = ev.accuracy;
    last_cd_ = cd;
    last_min_ = mn;
    last_max_ = mx;
    last_epoch_ = avg_row.epoch;
    last_round_ = round;
    progress_.update(round, total_rounds_, cat("acc ", fixed(ev.accuracy, 4), "  peers ",
                                               fixed(mn, 3), "-", fixed(mx, 3), "  consensus ",
                                               sci(cd)));
    pending_.erase(pending_.begin());
  }
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
  Summary s;
  s.test_accuracy = last_avg_acc_;
  s.peer_accuracy_min = last_min_;
  s.peer_accuracy_max = last_max_;
  s.consensus_distance = last_cd_;
  s.rounds = last_round_;
  s.epochs = last_epoch_;
  s.wall_seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  s.connected = live_connected_;
  for (int r = 0; r < n_; ++r) {
    s.params_sha256.push_back(done_[r].type == "done" ? done_[r].str("sha256") : "");
    s.bytes_sent += static_cast<std::uint64_t>(done_[r].num("bytes"));
  }
  s.extra["dead_peers"] = cat("[", format_peers(dead_), "]");
  s.extra["peers"] = std::to_string(n_);
  write_summary(opt_.out_dir, s);
  progress_.finish();
  std::printf("\n%5s  %9s  %12s  %8s\n", "peer", "test_acc", "bytes_sent", "seconds");
  for (int r = 0; r < n_; ++r) {
    if (done_[r].type != "done") {
      std::printf("%5d  %9s  %12s  %8s\n", r, "dead", "-", "-");
      continue;
    }
    std::printf("%5d  %9.4f  %12.0f  %8.1f\n", r, done_[r].num("acc"), done_[r].num("bytes"),
                done_[r].num("seconds"));
  }
  std::printf("average model: test_accuracy %.4f, consensus distance %.3g, %lld rounds, %.2f "
              "epochs, %.1f s\nwrote %s/summary.json and %s/metrics.csv\n",
              s.test_accuracy, s.consensus_distance, static_cast<long long>(s.rounds), s.epochs,
              s.wall_seconds, opt_.out_dir.c_str(), opt_.out_dir.c_str());
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
        if (c.exit_code != 0 || done_[c.rank].type != "done") {
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
  std::printf("gossip run: %d peers on %s (spectral gap %.4f), algorithm %s, period %d; "
              "peer logs in %s/peers/\n",
              topology.n(), config.gossip.topology.c_str(), report.spectral_gap,
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
