// sim/sim_report.cpp: one simulation's run record (DESIGN "Contracts"): every peer's row and the
// average model's row at each evaluation, then the summary with the simulator's own fields. The
// columns mean what they mean under `gossip run` (docs/outputs.md); only `seconds` is simulated.
#include <algorithm>

#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

void write_sim_outputs(const std::string& dir, const SimResult& result, const SimRunInfo& info) {
  RunRecord record(dir);
  for (const EvalPoint& e : result.evals) {
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
        record.write(row);
      }
    }
    row.peer = -1;  // the average model: test loss, accuracy, all peers' bytes
    row.loss = e.average_loss;
    row.test_accuracy = e.average_accuracy;
    row.bytes_sent = e.bytes_sent;
    record.write(row);
  }

  const EvalPoint& last = result.evals.back();
  const double peers = std::max<std::size_t>(1, last.peers.size());
  RunEnd end{.rounds = result.rounds, .bytes_sent = result.bytes_sent,
             .wall_seconds = result.wall_seconds, .connected = info.connected,
             .params_sha256 = result.params_sha256, .extra = {}};
  end.extra.add("mode", info.consensus_only ? "consensus" : "train")
      .add("config", info.config)
      .add("topology", info.topology)
      .add("algorithm", info.algorithm)
      .add("peers", last.peers.size())
      .add("samples_per_peer", JsonArray::of(result.samples_per_peer))
      .add("spectral_gap", info.spectral_gap)
      .add("period_spectral_gap", info.period_spectral_gap)
      .add("sim_seconds", result.sim_seconds)
      .add("bytes_per_peer", static_cast<double>(result.bytes_sent) / peers)
      .add("step_ms", result.step_seconds * 1000.0)
      .add("workers", result.workers)
      .add("local_seconds", result.local_seconds)
      .add("mix_seconds", result.mix_seconds);
  record.finish(std::move(end));
}

}  // namespace gossip
