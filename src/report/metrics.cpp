// report/metrics.cpp: metrics.csv and summary.json, the contract between commands and users. The
// one RunRecord writes both, so every summary field is computed here and nowhere else.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <map>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/report.hpp"

namespace gossip {

const char* const kMetricsHeader =
    "round,epoch,peer,loss,test_accuracy,consensus_distance,bytes_sent,seconds";

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(cat("--out ", dir, ": cannot create the directory: ", ec.message()));
  // Made (or there already), it must also take files: a probe is written and removed.
  const std::string probe = cat(dir, "/.gossip-write-check-", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw InputError(cat("--out ", dir, ": cannot write files there: ", std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

RunRecord::RunRecord(std::string dir) : dir_(std::move(dir)), path_(dir_ + "/metrics.csv") {
  make_output_dir(dir_);
  out_.open(path_, std::ios::trunc);
  if (!out_) throw InputError(cat(path_, ": cannot open for writing"));
  out_ << kMetricsHeader << '\n';
}

RunRecord::RunRecord(std::string dir, Resume) : dir_(std::move(dir)), path_(dir_ + "/metrics.csv") {}

RunRecord RunRecord::resume(std::string dir, std::int64_t round) {
  RunRecord record(std::move(dir), Resume{});
  std::ifstream in(record.path_);
  if (!in) throw InputError(cat(record.path_, ": cannot resume: no metrics file"));
  std::string header;
  std::getline(in, header);
  // A stop before the first evaluation can leave the file empty or its header cut short (it was
  // not flushed yet): no rows, taken as it is.
  const bool cut_short = !in.good() && std::string_view(kMetricsHeader).starts_with(header);
  if (header != kMetricsHeader && !cut_short)
    throw InputError(cat(record.path_, ": cannot resume: the header is not metrics.csv's (",
                         kMetricsHeader, ")"));
  std::vector<std::string> kept;
  std::string line;
  while (std::getline(in, line)) {
    MetricsRow r;
    long long rr = 0, bytes = 0;
    if (std::sscanf(line.c_str(), "%lld,%lf,%d,%lf,%lf,%lf,%lld,%lf", &rr, &r.epoch, &r.peer,
                    &r.loss, &r.test_accuracy, &r.consensus_distance, &bytes, &r.seconds) != 8)
      break;  // a row cut short by the stop: nothing after it is whole
    if (rr > round) break;
    r.round = rr;
    r.bytes_sent = static_cast<std::uint64_t>(bytes);
    record.count(r);
    kept.push_back(line);
  }
  in.close();
  record.out_.open(record.path_, std::ios::trunc);
  if (!record.out_) throw InputError(cat(record.path_, ": cannot open for writing"));
  record.out_ << kMetricsHeader << '\n';
  for (const auto& k : kept) record.out_ << k << '\n';
  record.out_.flush();
  return record;
}

void RunRecord::write(const MetricsRow& r) {
  char line[512];
  std::snprintf(line, sizeof line, "%lld,%.4f,%d,%.6g,%.6g,%.6g,%llu,%.3f\n",
                static_cast<long long>(r.round), r.epoch, r.peer, r.loss, r.test_accuracy,
                r.consensus_distance, static_cast<unsigned long long>(r.bytes_sent), r.seconds);
  out_ << line;
  if (!out_) throw RuntimeError(cat(path_, ": write failed"));
  if (tensorboard_) tensorboard_->write(r);
  count(r);
}

void fold_metrics_row(EvaluationFigures& f, const MetricsRow& r, bool fresh) {
  if (fresh || r.round != f.round) {
    f = EvaluationFigures{};
    f.round = r.round;
  }
  f.epoch = r.epoch;
  f.consensus_distance = r.consensus_distance;
  if (r.peer < 0) {
    // An evaluation of the average model alone (an exec: script's, after the peers' last
    // reports): no peer figures of that round, so none are given (null in summary.json).
    if (f.peer_rows == 0) f.peer_accuracy_min = f.peer_accuracy_max = NAN;
    f.test_accuracy = r.test_accuracy;
    f.test_loss = r.loss;
    f.has_average = true;
    return;
  }
  if (std::isnan(r.test_accuracy)) return;  // a peer the simulator did not evaluate
  if (f.peer_rows++ == 0) {
    f.peer_accuracy_min = f.peer_accuracy_max = r.test_accuracy;
    if (!f.has_average) f.test_accuracy = r.test_accuracy;
  }
  f.peer_accuracy_min = std::min(f.peer_accuracy_min, r.test_accuracy);
  f.peer_accuracy_max = std::max(f.peer_accuracy_max, r.test_accuracy);
}

void RunRecord::count(const MetricsRow& r) {
  fold_metrics_row(last_, r, !any_row_);
  any_row_ = true;
  any_average_ = any_average_ || r.peer < 0;
  peak_consensus_ = std::max(peak_consensus_, r.consensus_distance);
}

void RunRecord::flush() {
  out_.flush();
  if (tensorboard_) tensorboard_->flush();
}

Summary RunRecord::finish(RunEnd end) {
  flush();
  JsonObject o;
  // A run that evaluated nothing has no figure: null, not an accuracy of 0.
  if (!any_row_) last_.test_accuracy = last_.peer_accuracy_min = last_.peer_accuracy_max = NAN;
  o.add("test_accuracy", end.average_missing.empty() ? last_.test_accuracy : NAN);
  if (!end.average_missing.empty()) o.add("average_model_missing", end.average_missing);
  if (any_average_) o.add("test_loss", last_.test_loss);
  o.add("peer_accuracy_min", last_.peer_accuracy_min)
      .add("peer_accuracy_max", last_.peer_accuracy_max)
      .add("consensus_distance", last_.consensus_distance);
  if (any_average_) o.add("peak_consensus_distance", peak_consensus_);
  o.add("rounds", end.rounds)
      .add("epochs", std::isnan(end.epochs) ? last_.epoch : end.epochs)
      .add("bytes_sent", end.bytes_sent)
      .add("wall_seconds", end.wall_seconds)
      .add("connected", end.connected)
      .add("gemm", end.gemm);
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

namespace gossip {

void note_byzantine(JsonArray& byzantine, const MemberEvent& e) {
  if (e.event != MemberEventKind::kByzantineSuspect &&
      e.event != MemberEventKind::kByzantineCleared && e.event != MemberEventKind::kByzantineCut)
    return;
  byzantine.add(JsonObject()
                      .add("event", event_name(e.event))
                      .add("peer", e.peer)
                      .add("subject", e.subject)
                      .add("round", e.round));
}

void add_network_summary(JsonObject& extra, const NetworkSummary& s) {
  JsonArray components, alive;
  for (const auto& c : s.components) components.add(JsonArray::of(c));
  for (bool a : s.alive_at_end) alive.add(a);
  extra.add("peers", s.peers)
      .add("config", s.config)
      .add("topology", s.topology)
      .add("algorithm", s.algorithm)
      .add("spectral_gap", s.spectral_gap)
      .add("bytes_per_peer", static_cast<double>(s.bytes_sent) / std::max(1, s.peers))
      .add("samples_per_peer", JsonArray::of(s.samples_per_peer))
      .add("partitioned", s.components.size() > 1)
      .add("components", components)
      .add("component_accuracy", JsonArray::of(s.component_accuracy))
      .add("deaths", s.deaths)
      .add("rejoins", s.rejoins)
      .add("alive_at_end", alive)
      .add("byzantine", s.byzantine)
      .add("refused_params", s.refused_params)
      .add("membership_timeline", s.membership)
      .add("member_rounds", JsonArray::of(s.member_rounds));
  if (!s.one_way.empty()) {  // which components cannot reach which (a directed live graph)
    JsonArray one_way;
    for (const auto& [a, b] : s.one_way)
      one_way.add(JsonObject()
                      .add("from", JsonArray::of(s.components[static_cast<std::size_t>(a)]))
                      .add("to", JsonArray::of(s.components[static_cast<std::size_t>(b)])));
    extra.add("one_way", one_way);
  }
  if (s.phases)
    extra.add("phases_s", phase_json(*s.phases))
        .add("phase_shares", phase_share_json(*s.phases))
        .add("phases_per_peer_s", s.phases_per_peer);
}

}  // namespace gossip
