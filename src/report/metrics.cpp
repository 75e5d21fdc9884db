// report/metrics.cpp: metrics.csv and summary.json, the contract between commands and users.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {

const char* const kMetricsHeader =
    "round,epoch,peer,loss,test_accuracy,consensus_distance,bytes_sent,seconds";

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(cat("--out ", dir, ": cannot create the directory: ", ec.message()));
}

MetricsWriter::MetricsWriter(const std::string& dir) : path_(dir + "/metrics.csv") {
  make_output_dir(dir);
  out_.open(path_, std::ios::trunc);
  if (!out_) throw InputError(cat(path_, ": cannot open for writing"));
  out_ << kMetricsHeader << '\n';
}

void MetricsWriter::write(const MetricsRow& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%lld,%.4f,%d,%.6g,%.6g,%.6g,%llu,%.3f\n",
                static_cast<long long>(r.round), r.epoch, r.peer, r.loss, r.test_accuracy,
                r.consensus_distance, static_cast<unsigned long long>(r.bytes_sent), r.seconds);
  out_ << line;
  if (!out_) throw RuntimeError(cat(path_, ": write failed"));
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

void write_summary(const std::string& dir, const Summary& s) {
  make_output_dir(dir);
  const std::string path = dir + "/summary.json";
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw InputError(cat(path, ": cannot open for writing"));
  out << "{\n";
  out << "  \"test_accuracy\": " << json_number(s.test_accuracy) << ",\n";
  out << "  \"peer_accuracy_min\": " << json_number(s.peer_accuracy_min) << ",\n";
  out << "  \"peer_accuracy_max\": " << json_number(s.peer_accuracy_max) << ",\n";
  out << "  \"consensus_distance\": " << json_number(s.consensus_distance) << ",\n";
  out << "  \"rounds\": " << s.rounds << ",\n";
  out << "  \"epochs\": " << json_number(s.epochs) << ",\n";
  out << "  \"bytes_sent\": " << s.bytes_sent << ",\n";
  out << "  \"wall_seconds\": " << json_number(s.wall_seconds) << ",\n";
  out << "  \"connected\": " << (s.connected ? "true" : "false") << ",\n";
  for (const auto& [k, v] : s.extra) out << "  " << json_string(k) << ": " << v << ",\n";
  out << "  \"params_sha256\": [";
  for (std::size_t i = 0; i < s.params_sha256.size(); ++i)
    out << (i ? ", " : "") << json_string(s.params_sha256[i]);
  out << "]\n}\n";
  if (!out) throw RuntimeError(cat(path, ": write failed"));
}

}  // namespace gossip
