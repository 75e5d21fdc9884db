// sim/sim_report.cpp: metrics.csv and summary.json of one simulation (DESIGN "Contracts").
#include <algorithm>

#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

void write_sim_outputs(const std::string& dir, const SimResult& result, const SimRunInfo& info) {
  MetricsWriter metrics(dir);
  double peak = 0.0;
  for (const EvalPoint& e : result.evals) {
    peak = std::max(peak, e.consensus_distance);
    MetricsRow row;
    row.round = e.round;
    row.epoch = e.epoch;
    row.consensus_distance = e.consensus_distance;
    row.seconds = e.sim_seconds;
    if (!info.consensus_only) {
      for (std::size_t p = 0; p < e.peers.size(); ++p) {
        row.peer = static_cast<int>(p);
        row.loss = e.peers[p].train_loss;
        row.test_accuracy = e.peers[p].test_accuracy;
        row.bytes_sent = e.peers[p].bytes_sent;
        metrics.write(row);
      }
    }
    row.peer = -1;  // the average model: test loss, accuracy, all peers' bytes
    row.loss = e.average_loss;
    row.test_accuracy = e.average_accuracy;
    row.bytes_sent = e.bytes_sent;
    metrics.write(row);
  }
  metrics.flush();

  const EvalPoint& last = result.evals.back();
  const double peers = std::max<std::size_t>(1, last.peers.size());
  Summary s;
  s.test_accuracy = last.average_accuracy;
  s.peer_accuracy_min = last.peer_accuracy_min;
  s.peer_accuracy_max = last.peer_accuracy_max;
  s.consensus_distance = last.consensus_distance;
  s.rounds = result.rounds;
  s.epochs = result.epochs;
  s.bytes_sent = result.bytes_sent;
  s.wall_seconds = result.wall_seconds;
  s.connected = info.connected;
  s.params_sha256 = result.params_sha256;
  s.extra["mode"] = json_string(info.consensus_only ? "consensus" : "train");
  s.extra["config"] = json_string(info.config);
  s.extra["topology"] = json_string(info.topology);
  s.extra["algorithm"] = json_string(info.algorithm);
  s.extra["peers"] = std::to_string(last.peers.size());
  s.extra["spectral_gap"] = json_number(info.spectral_gap);
  s.extra["sim_seconds"] = json_number(result.sim_seconds);
  s.extra["bytes_per_peer"] = json_number(static_cast<double>(result.bytes_sent) / peers);
  s.extra["peak_consensus_distance"] = json_number(peak);
  s.extra["test_loss"] = json_number(last.average_loss);
  s.extra["step_ms"] = json_number(result.step_seconds * 1000.0);
  s.extra["workers"] = std::to_string(result.workers);
  s.extra["local_seconds"] = json_number(result.local_seconds);
  s.extra["mix_seconds"] = json_number(result.mix_seconds);
  write_summary(dir, s);
}

}  // namespace gossip
