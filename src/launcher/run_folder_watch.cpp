// launcher/run_folder_watch.cpp: `gossip watch DIR` — the dashboard of a run started elsewhere
// (another terminal, mpirun, srun), from its folder as it grows: each peer's events.txt (its
// membership events, evaluations, done) and the merged metrics.csv (`gossip run`'s or `gossip
// collect`'s).
// It only reads; a line still being written is taken on the next pass.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "src/launcher/observe.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/launcher.hpp"
#include "gossip/report.hpp"
#include "gossip/topology.hpp"

namespace gossip {
namespace {

std::atomic<int> g_stop{0};
void on_stop(int sig) { g_stop = sig; }

constexpr auto kPoll = std::chrono::milliseconds(250);

/// Whole lines appended to `path` since `offset` (which moves past them).
std::vector<std::string> new_lines(const std::string& path, std::int64_t& offset) {
  std::vector<std::string> out;
  std::ifstream in(path, std::ios::binary);
  if (!in || !in.seekg(offset)) return out;
  std::string line;
  while (std::getline(in, line) && !in.eof()) {
    offset += static_cast<std::int64_t>(line.size()) + 1;
    out.push_back(std::move(line));
  }
  return out;
}

/// The run's config: --config, else the first line of DIR/run-command (gossip run), else the
/// config a peer's ready event recorded.
std::string find_config(const WatchOptions& o) {
  if (!o.config_path.empty()) return o.config_path;
  std::ifstream cmd(o.dir + "/run-command");
  if (std::string line; cmd && std::getline(cmd, line) && !line.empty()) return line;
  for (const auto& entry : std::filesystem::directory_iterator(o.dir + "/peers")) {
    std::ifstream in(entry.path() / "events.txt");
    for (std::string line; std::getline(in, line);)
      if (const auto e = parse_event(line))
        if (const auto* ready = std::get_if<ReadyEvent>(&*e)) return ready->config;
  }
  throw InputError(cat(o.dir, ": no run-command file and no peer has recorded its config yet; "
                       "give it with --config CONFIG"));
}

}  // namespace

int watch(const WatchOptions& o) {
  if (!std::filesystem::is_directory(o.dir + "/peers"))
    throw InputError(cat(o.dir, ": not a run folder (it has no peers/ folder; give the --out "
                         "folder of gossip run or of the gossip peers)"));
  const RunConfig config = load_config(find_config(o));
  const Topology topology = load_topology(config.gossip.topology);
  const int n = topology.n();
  DashboardState state(launcher::dashboard_setup("gossip watch", o.dir, config, topology));
  launcher::DashboardServer server(o.address, state);
  std::printf("gossip watch: the dashboard of %s (%d peers) at http://%s/ (read-only); Ctrl-C "
              "stops it\n", o.dir.c_str(), n, server.address().c_str());
  std::fflush(stdout);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n), 0);
  std::int64_t metrics_offset = 0;
  bool header_seen = false, fresh = true;
  EvaluationFigures figures;
  bool finished = false;
  while (g_stop == 0) {
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < n; ++r)
      for (const auto& line : new_lines(cat(o.dir, "/peers/", r, "/events.txt"), offsets[r]))
        if (const auto e = parse_event(line)) state.on_event(r, *e, now);
    // metrics.csv: an evaluation is complete when a row of a later round follows it.
    for (const auto& line : new_lines(o.dir + "/metrics.csv", metrics_offset)) {
      if (!header_seen) {
        header_seen = true;
        continue;
      }
      MetricsRow row;
      try {
        row = parse_metrics_row(line, o.dir + "/metrics.csv");
      } catch (const InputError&) {
        continue;  // a malformed row: skipped here (gossip plot names it)
      }
      if (!fresh && row.round != figures.round) state.on_figures(figures, now);
      fold_metrics_row(figures, row, fresh);
      fresh = false;
    }
    if (!finished && std::filesystem::exists(o.dir + "/summary.json")) {
      if (!fresh) state.on_figures(figures, now);  // the last evaluation is complete too
      state.set_finished(now);
      finished = true;
      std::printf("gossip watch: the run has finished (summary.json); still serving its last "
                  "state until Ctrl-C\n");
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(kPoll);
  }
  return kExitOk;
}

}  // namespace gossip
