/// report: a run's outputs, written once (DESIGN "Contracts"): DIR/metrics.csv, one row per peer
/// per evaluation, and DIR/summary.json with the final figures, both through one RunRecord that
/// every training command uses (gossip train, peer, run, sim); and the gnuplot plots of sweeps.
/// Columns and fields are documented in docs/outputs.md (names also in README.md); change them
/// only together.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/report.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <fstream>
#include <string>
#include <vector>

#include "gossip/events.hpp"
#include "gossip/json.hpp"
#include "gossip/tensorboard.hpp"
#include "gossip/timeline.hpp"

namespace gossip {

/// One row of metrics.csv.
struct MetricsRow {
  std::int64_t round = 0;
  double epoch = 0.0;
  int peer = 0;                      // -1 for the average model
  double loss = 0.0;                 // training loss (mean over the steps since the last row)
  double test_accuracy = 0.0;
  double consensus_distance = 0.0;   // (1/n) sum_i ||x_i - xbar||^2
  std::uint64_t bytes_sent = 0;
  double seconds = 0.0;              // wall or simulated seconds since the start
};

/// The header line of metrics.csv.
extern const char* const kMetricsHeader;

/// What summary.json says about the last evaluation, from its metrics rows.
struct EvaluationFigures {
  std::int64_t round = 0;
  double epoch = 0.0;
  double test_accuracy = 0.0;      // the average model's row, else the first peer row
  double test_loss = 0.0;          // the average model's row (its test loss); 0 without one
  double peer_accuracy_min = 0.0;  // over the peer rows; NaN for an average row alone
  double peer_accuracy_max = 0.0;
  double consensus_distance = 0.0;
  int peer_rows = 0;
  bool has_average = false;        // the evaluation has an average-model row (peer = -1)
};

/// Folds one metrics row into the figures of its evaluation; a row of another round than `f`'s
/// (or any row when `fresh`) starts them anew.
void fold_metrics_row(EvaluationFigures& f, const MetricsRow& row, bool fresh);

/// What only the command knows at the end of a run.
struct RunEnd {
  std::int64_t rounds = 0;
  std::uint64_t bytes_sent = 0;
  double wall_seconds = 0.0;
  bool connected = true;
  std::vector<std::string> params_sha256;  // one per peer
  std::string gemm = "none";               // the GEMM the training ran (train.gemm's choice)
  double epochs = NAN;                     // the epochs run, where the last row's is not them
  // A network whose average model was not evaluated, and why: test_accuracy is then null (no
  // peer's figure under the average model's name) and summary.json says why.
  std::string average_missing;
  JsonObject extra;                        // command-specific fields (written in key order)
};

/// What a run of many peers adds to summary.json, the same for `gossip run` and `gossip sim`
/// (docs/outputs.md): each fills it, add_network_summary alone writes it.
struct NetworkSummary {
  int peers = 0;
  std::string config, topology, algorithm;  // the files, gossip.algorithm (after overrides)
  double spectral_gap = 0.0;                // NaN (written null) when the topology is unread
  std::uint64_t bytes_sent = 0;             // all peers', for bytes_per_peer
  std::vector<std::int64_t> samples_per_peer;
  // The live graph's components at the end when it ended split (empty when whole), and each
  // component's own average model's accuracy, in that order.
  std::vector<std::vector<int>> components;
  /// (a, b): component a reaches component b one way only (LiveGraph::one_way); empty if none.
  std::vector<std::pair<int, int>> one_way;
  std::vector<double> component_accuracy;
  std::int64_t deaths = 0, rejoins = 0;     // each counted once per peer and incarnation
  std::vector<bool> alive_at_end;           // per peer
  // Where the time went: summed over the peers with a timeline (none: no phase fields), and
  // each one's (gossip run: per rank, null for a peer that did not finish; gossip sim: per
  // traced peer, {peer, phases_s}).
  std::optional<PhaseSeconds> phases;
  JsonArray phases_per_peer;
  // Who lied, as the peers saw it (docs/byzantine.md): each byzantine_suspect,
  // byzantine_cleared and byzantine_cut event as {event, peer, subject, round}, in order
  // (note_byzantine), and the messages each peer left out for NaN or Inf, per sender, as
  // {peer, from, count}.
  JsonArray byzantine;
  JsonArray refused_params;
  // An elastic run's membership timeline (membership_timeline in docs/outputs.md): the members
  // from round 0, then one
  // {round, announced, members, joined, left, donors} a change as it took effect; and the rounds
  // each peer was a member for. Empty for a run whose peers are fixed.
  JsonArray membership;
  std::vector<std::int64_t> member_rounds;
};

/// Adds `e` to `byzantine` (NetworkSummary::byzantine) when it is a byzantine_suspect,
/// _cleared or _cut event.
void note_byzantine(JsonArray& byzantine, const MemberEvent& e);

/// Adds `s`'s fields to `extra` (a RunEnd's): peers, config, topology, algorithm,
/// spectral_gap, bytes_per_peer, samples_per_peer, partitioned, components, component_accuracy,
/// deaths, rejoins, alive_at_end, byzantine, refused_params, and phases_s, phase_shares and
/// phases_per_peer_s.
void add_network_summary(JsonObject& extra, const NetworkSummary& s);

/// summary.json's figures as written.
struct Summary {
  EvaluationFigures last;
  RunEnd end;
};

/// One run's outputs in DIR: metrics.csv row by row, then summary.json once. Not thread-safe.
class RunRecord {
 public:
  /// Creates DIR and DIR/metrics.csv (with its header); throws InputError when it cannot.
  explicit RunRecord(std::string dir);
  /// Resumes a run's record after `round`: keeps the rows of DIR/metrics.csv up to that round
  /// (dropping any written after it) and appends from there. Throws InputError when the file is
  /// missing or is not a metrics file.
  static RunRecord resume(std::string dir, std::int64_t round);

  /// Appends a row. A row of another round than the row before starts a new evaluation.
  void write(const MetricsRow& row);
  /// Flushes metrics.csv, so that readers see every row written so far.
  void flush();
  /// From now on every row also goes to DIR/tensorboard/ (train.tensorboard, --tensorboard).
  void enable_tensorboard() { tensorboard_ = std::make_unique<TensorBoardWriter>(dir_); }
  /// The evaluation written last.
  const EvaluationFigures& last() const { return last_; }
  const std::string& dir() const { return dir_; }

  /// Writes DIR/summary.json from the last evaluation and `end`; returns what it wrote. When the
  /// record has average-model rows (a network: gossip run, sim) it adds `test_loss` (the average
  /// model's, from its last row) and `peak_consensus_distance` (the largest of any evaluation).
  Summary finish(RunEnd end);

 private:
  struct Resume {};
  RunRecord(std::string dir, Resume);
  void count(const MetricsRow& row);

  std::string dir_;
  std::string path_;
  std::ofstream out_;
  EvaluationFigures last_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // none unless enable_tensorboard()
  bool any_row_ = false;
  bool any_average_ = false;
  double peak_consensus_ = 0.0;
};

/// Creates DIR (and parents); throws InputError when it cannot.
void make_output_dir(const std::string& dir);

/// The rows of a metrics.csv that RunRecord wrote. Throws InputError naming the file and line of
/// the first problem (another header, a row without 8 values, a value that is not a number).
std::vector<MetricsRow> read_metrics(const std::string& path);

/// One row of metrics.csv (not its header); throws InputError naming `where` (FILE:LINE) and
/// the first problem.
MetricsRow parse_metrics_row(const std::string& line, const std::string& where);

/// The comma-separated fields of one line of the CSV files gossip writes (no quoting).
std::vector<std::string> split_csv_line(const std::string& line);

/// One curve of a plot: columns of a gnuplot data file (1-based), optionally one data block.
struct PlotSeries {
  std::string data_file;    // relative to the plot's directory
  int index = -1;           // gnuplot `index` (blocks separated by two blank lines); -1 = all
  int x_column = 1;
  int y_column = 2;
  double x_divisor = 1.0;   // e.g. 1e6 for bytes shown as MB
  std::string label;
  int spread_column = 0;    // > 0: a shaded band y +- this column (a standard deviation)
  int colour = -1;          // palette entry; -1 = the series' place in its panel
  bool dashed = false;      // a dashed line (e.g. a prediction beside its measurement)
  int x_tic_column = 0;     // > 0: the x axis's tics labelled with this (text) column
  bool points = false;      // a point at each value, on the line
};

/// One panel of a plot (several panels share one image, in a grid).
struct PlotPanel {
  std::string title;        // none when empty
  std::vector<PlotSeries> series;
};

/// One plot, drawn as NAME.png and NAME.svg. Series get distinct colours from a palette of
/// kPlotColours; more series than that in one panel repeat colours with another dash pattern.
struct Plot {
  std::string name;
  std::string title;        // none when empty; with panels, the title over all of them
  std::string x_label, y_label;
  bool log_y = false;       // values <= 0 are drawn at y_floor (when > 0), else left out
  std::vector<PlotSeries> series;  // a single panel; ignored when `panels` is not empty
  bool log_x = false;       // values <= 0 are left out
  double y_floor = 0.0;     // on a log y axis: the bottom of the axis, where zeros are drawn
  std::vector<PlotPanel> panels;
  int columns = 2;          // panels per row
  bool rotate_x_tics = false;  // x tic labels slanted (long category names)
};

inline constexpr int kPlotColours = 8;

/// Writes DIR/plots.gp for `plots` and runs gnuplot in DIR (its output in DIR/plots.log).
/// Returns false, with `why` set, when gnuplot is missing or fails; plots.gp is written anyway.
/// gnuplot's warnings (a canvas too small, say) are also printed on stderr, not only logged.
bool draw_plots(const std::string& dir, const std::vector<Plot>& plots, std::string* why);

/// gossip plot for a run folder: draws DIR/{accuracy,loss,consensus}_vs_round.{png,svg} from
/// DIR/metrics.csv (every peer, the lowest peer and the average model; the consensus distance on
/// a log axis with exact zeros at the bottom; no consensus plot without average-model rows),
/// through DIR/plots.dat and DIR/plots.gp. Throws InputError for a missing or malformed
/// metrics.csv, RuntimeError when gnuplot is missing or fails.
void plot_metrics(const std::string& dir);

}  // namespace gossip
