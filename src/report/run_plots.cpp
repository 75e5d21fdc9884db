// report/run_plots.cpp: the plots of one run folder (gossip run, sim, train or peer) from its
// metrics.csv, for `gossip plot DIR`: the data regrouped for gnuplot into DIR/plots.dat, then
// draw_plots. Every peer's curve is one line of a single series, so any number of peers keeps a
// three-entry legend; a consensus distance of exactly 0 is drawn at the bottom of the log axis.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {

namespace {

constexpr const char* kDataFile = "plots.dat";

/// DIR/plots.dat: data blocks (gnuplot `index`) written one after another.
class DataFile {
 public:
  explicit DataFile(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
    if (!out_) throw InputError(cat(path, ": cannot open for writing"));
    out_ << "# Drawn by gossip plot from metrics.csv; one block per curve (gnuplot index)\n";
  }
  /// Starts a block; returns its index.
  int block(const std::string& title) {
    if (blocks_ > 0) out_ << "\n\n";
    out_ << "# " << title << "\n";
    return blocks_++;
  }
  void row(std::int64_t round, double y) {
    char line[96];
    std::snprintf(line, sizeof line, "%lld %.9g\n", static_cast<long long>(round), y);
    out_ << line;
  }
  /// A break in the line without leaving the block (the next peer's curve).
  void gap() { out_ << "\n"; }
  void close() {
    out_.close();
    if (!out_) throw RuntimeError(cat(path_, ": write failed"));
  }

 private:
  std::string path_;
  std::ofstream out_;
  int blocks_ = 0;
};

/// The power of ten a decade below the smallest positive value (1e-12 when there is none): where
/// a consensus distance of exactly 0 is drawn.
double log_floor(const std::vector<const MetricsRow*>& rows) {
  double smallest = std::numeric_limits<double>::infinity();
  for (const MetricsRow* r : rows)
    if (r->consensus_distance > 0) smallest = std::min(smallest, r->consensus_distance);
  if (!std::isfinite(smallest)) return 1e-12;
  return std::pow(10.0, std::floor(std::log10(smallest)) - 1.0);
}

using ByPeer = std::map<int, std::vector<const MetricsRow*>>;  // -1: the average model

/// Column y of block `index` of plots.dat, as a curve named `label`.
PlotSeries data_series(int index, int y, const std::string& label) {
  return PlotSeries{kDataFile, index, 1, y, 1.0, label};
}

/// The plots' title: the run folder's name and its number of peers.
std::string plot_title(const std::string& dir, int peers) {
  std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty() || name == ".") name = dir;
  std::string title;  // a backslash keeps "_" and "^" literal in gnuplot's enhanced text
  for (char ch : name) title += ch == '_' || ch == '^' ? cat('\\', ch) : std::string(1, ch);
  title += cat(": ", peers, peers == 1 ? " peer" : " peers");
  return title;
}

/// Every peer's accuracy and training loss, one line each of a single series.
void add_peer_curves(DataFile& data, const ByPeer& by_peer, int peers, Plot& accuracy,
                     Plot& loss) {
  const int acc = data.block("every peer's test accuracy, one line each");
  bool points = false;
  for (const auto& [peer, list] : by_peer) {
    if (peer < 0) continue;
    if (points) data.gap();
    for (const MetricsRow* r : list) data.row(r->round, r->test_accuracy);
    points = true;
  }
  accuracy.series.push_back(
      data_series(acc, 2, peers == 1 ? cat("peer ", by_peer.rbegin()->first) : "each peer"));
  const int l = data.block("every peer's training loss, one line each (none at round 0)");
  points = false;
  for (const auto& [peer, list] : by_peer) {
    if (peer < 0) continue;
    bool any = false;
    for (const MetricsRow* r : list) {
      if (r->round == 0) continue;
      if (points && !any) data.gap();
      data.row(r->round, r->loss);
      any = points = true;
    }
  }
  if (points) loss.series.push_back(data_series(l, 2, peers == 1 ? "training loss"
                                                                   : "each peer (training loss)"));
}

/// The average model's consensus distance on a log axis; exactly 0 (peers agree bit for bit)
/// at the bottom.
Plot consensus_plot(DataFile& data, const std::vector<const MetricsRow*>& average,
                    const std::string& title) {
  const double floor = log_floor(average);
  const int c = data.block(cat("consensus distance, 0 drawn as ", floor));
  for (const MetricsRow* r : average)
    data.row(r->round, r->consensus_distance > 0 ? r->consensus_distance : floor);
  char label[96];
  std::snprintf(label, sizeof label, "consensus distance (0 drawn at %.0e)", floor);
  return Plot{"consensus_vs_round", title, "round", label, true,
              {data_series(c, 2, "consensus distance")}};
}

}  // namespace

void plot_metrics(const std::string& dir) {
  const std::vector<MetricsRow> rows = read_metrics(dir + "/metrics.csv");
  if (rows.empty()) throw InputError(cat(dir, "/metrics.csv: has no rows to plot yet"));
  ByPeer by_peer;
  std::map<std::int64_t, double> lowest;  // round -> lowest peer accuracy
  for (const MetricsRow& r : rows) {
    by_peer[r.peer].push_back(&r);
    if (r.peer < 0) continue;
    auto [at, fresh] = lowest.emplace(r.round, r.test_accuracy);
    if (!fresh) at->second = std::min(at->second, r.test_accuracy);
  }
  const auto average = by_peer.find(-1);
  const bool has_average = average != by_peer.end();
  const int peers = static_cast<int>(by_peer.size()) - (has_average ? 1 : 0);

  DataFile data(dir + "/" + kDataFile);
  const std::string title = plot_title(dir, peers);
  Plot accuracy{"accuracy_vs_round", title, "round", "test accuracy", false, {}};
  Plot loss{"loss_vs_round", title, "round", "loss", false, {}};
  std::vector<Plot> plots;

  // Every peer first, the lowest peer and the average model drawn over them.
  if (peers > 0) add_peer_curves(data, by_peer, peers, accuracy, loss);
  if (peers > 1) {
    const int low = data.block("lowest peer accuracy");
    for (const auto& [round, a] : lowest) data.row(round, a);
    accuracy.series.push_back(data_series(low, 2, "lowest peer"));
  }
  if (has_average) {
    const int acc = data.block("average model: test accuracy");
    for (const MetricsRow* r : average->second) data.row(r->round, r->test_accuracy);
    accuracy.series.push_back(data_series(acc, 2, "average model"));
    const int l = data.block("average model: test loss");
    for (const MetricsRow* r : average->second) data.row(r->round, r->loss);
    loss.series.push_back(data_series(l, 2, "average model (test loss)"));
  }
  plots.push_back(std::move(accuracy));
  if (!loss.series.empty()) plots.push_back(std::move(loss));
  if (has_average) plots.push_back(consensus_plot(data, average->second, title));
  data.close();
  std::string why;
  if (!draw_plots(dir, plots, &why)) throw RuntimeError(why);
}

}  // namespace gossip
