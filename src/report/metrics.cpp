// report/metrics.cpp: metrics.csv and summary.json, the contract between commands and users. The
// one RunRecord writes both, so every summary field is computed here and nowhere else.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

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

RunRecord::RunRecord(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/metrics.csv") {
  make_output_dir(dir_);
  out_.open(path_, std::ios::trunc);
  if (!out_) throw InputError(cat(path_, ": cannot open for writing"));
  out_ << kMetricsHeader << '\n';
}

void RunRecord::write(const MetricsRow& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%lld,%.4f,%d,%.6g,%.6g,%.6g,%llu,%.3f\n",
                static_cast<long long>(r.round), r.epoch, r.peer, r.loss, r.test_accuracy,
                r.consensus_distance, static_cast<unsigned long long>(r.bytes_sent), r.seconds);
  out_ << line;
  if (!out_) throw RuntimeError(cat(path_, ": write failed"));

  if (!any_row_ || r.round != last_.round) {
    last_ = EvaluationFigures{};
    last_.round = r.round;
  }
  any_row_ = true;
  last_.epoch = r.epoch;
  last_.consensus_distance = r.consensus_distance;
  peak_consensus_ = std::max(peak_consensus_, r.consensus_distance);
  if (r.peer < 0) {
    last_.test_accuracy = r.test_accuracy;
    last_.test_loss = r.loss;
    last_.has_average = any_average_ = true;
    return;
  }
  if (last_.peer_rows++ == 0) {
    last_.peer_accuracy_min = last_.peer_accuracy_max = r.test_accuracy;
    if (!last_.has_average) last_.test_accuracy = r.test_accuracy;
  }
  last_.peer_accuracy_min = std::min(last_.peer_accuracy_min, r.test_accuracy);
  last_.peer_accuracy_max = std::max(last_.peer_accuracy_max, r.test_accuracy);
}

void RunRecord::flush() { out_.flush(); }

Summary RunRecord::finish(RunEnd end) {
  flush();
  JsonObject o;
  o.add("test_accuracy", last_.test_accuracy);
  if (any_average_) o.add("test_loss", last_.test_loss);
  o.add("peer_accuracy_min", last_.peer_accuracy_min)
      .add("peer_accuracy_max", last_.peer_accuracy_max)
      .add("consensus_distance", last_.consensus_distance);
  if (any_average_) o.add("peak_consensus_distance", peak_consensus_);
  o.add("rounds", end.rounds)
      .add("epochs", last_.epoch)
      .add("bytes_sent", end.bytes_sent)
      .add("wall_seconds", end.wall_seconds)
      .add("connected", end.connected);
  const std::map<std::string, std::string> extra(end.extra.fields().begin(),
                                                 end.extra.fields().end());
  for (const auto& [key, value] : extra) o.raw(key, value);
  o.add("params_sha256", JsonArray::of(end.params_sha256));

  const std::string path = dir_ + "/summary.json";
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw InputError(cat(path, ": cannot open for writing"));
  out << o.pretty() << '\n';
  if (!out) throw RuntimeError(cat(path, ": write failed"));
  return Summary{last_, std::move(end)};
}

}  // namespace gossip
