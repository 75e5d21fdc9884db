/// report: what every training command writes (DESIGN "Contracts"): DIR/metrics.csv, one row per
/// peer per evaluation, and DIR/summary.json with the final figures. Column and field names are
/// documented in README.md; change them only together.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/report.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

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

/// Appends rows to DIR/metrics.csv (created with its header). Not thread-safe.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& dir);
  void write(const MetricsRow& row);
  void flush() { out_.flush(); }

 private:
  std::ofstream out_;
  std::string path_;
};

/// summary.json's fields (DESIGN "Contracts"); `extra` adds command-specific fields (numbers
/// or strings, already JSON-encoded).
struct Summary {
  double test_accuracy = 0.0;
  double peer_accuracy_min = 0.0;
  double peer_accuracy_max = 0.0;
  double consensus_distance = 0.0;
  std::int64_t rounds = 0;
  double epochs = 0.0;
  std::uint64_t bytes_sent = 0;
  double wall_seconds = 0.0;
  bool connected = true;
  std::vector<std::string> params_sha256;
  std::map<std::string, std::string> extra;
};

/// Writes DIR/summary.json (creating DIR).
void write_summary(const std::string& dir, const Summary& s);

/// Creates DIR (and parents); throws InputError when it cannot.
void make_output_dir(const std::string& dir);

/// JSON encodings used by the writers.
std::string json_string(const std::string& s);
std::string json_number(double v);

}  // namespace gossip
