// sim/real_runs.cpp: what gossip compare --run needs of its real runs — the refusals of what a
// real run cannot do as the simulator would, and a run's metrics.csv read back into the
// evaluations that compare rows and curves are made of (seconds measured, not simulated).
#include <algorithm>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

void check_real_sweep(const RunConfig& base) {
  if (base.compare.averaging_rounds > 0)
    throw InputError(cat(base.where("compare.averaging_rounds"),
                         ": the pure-averaging pass is simulated; gossip compare --run runs only "
                         "the training settings (drop compare.averaging_rounds, or sweep without "
                         "--run)"));
  if (!base.sim.stragglers.empty())
    throw InputError(cat(base.where("sim.stragglers"),
                         ": stragglers are the simulator's model; real peers run at the speed "
                         "of this machine (drop sim.stragglers, or sweep without --run)"));
  if (!base.compare.attacks.empty())
    throw InputError(cat(base.where("compare.attacks"),
                         ": attack cells are swept in simulation; gossip compare --run runs the "
                         "config's own faults: (give the attack there, one sweep per attack, or "
                         "sweep without --run)"));
  if (!base.compare.memberships.empty())
    throw InputError(cat(base.where("compare.memberships"),
                         ": real peers cannot yet join or leave a running network; membership "
                         "schedules are swept in simulation (sweep without --run)"));
  if (!base.compare.outer.empty())
    throw InputError(cat(base.where("compare.outer"),
                         ": the peers of gossip compare --run read the config's own gossip.outer "
                         "(no option carries another); run each outer step as its own config "
                         "with gossip run, or sweep without --run"));
  if (base.sim.message_loss > 0)
    throw InputError(cat(base.where("sim.message_loss"),
                         ": message loss is the simulator's model; real peers talk TCP (use "
                         "--netem rate=...,loss=P% for lossy links, or sweep without --run)"));
}

SimResult read_real_run(const std::string& dir) {
  const std::string path = dir + "/metrics.csv";
  const std::vector<MetricsRow> rows = read_metrics(path);
  SimResult result;
  // One evaluation: the rows of one round, the peers' and then the average model's.
  EvalPoint e;
  bool open = false, average = false;
  auto close = [&] {
    if (!open) return;
    if (!average)
      throw InputError(cat(path, ": round ", e.round, " has no average-model row (peer -1); "
                                 "is it the metrics.csv of a gossip run?"));
    result.evals.push_back(e);
    e = EvalPoint{};
    open = average = false;
  };
  for (const MetricsRow& r : rows) {
    if (open && r.round != e.round) close();
    if (!open) {
      e.round = r.round;
      e.epoch = r.epoch;
      open = true;
    }
    if (r.peer == -1) {
      e.average_accuracy = r.test_accuracy;
      e.average_loss = r.loss;
      e.consensus_distance = r.consensus_distance;
      e.bytes_sent = r.bytes_sent;
      e.wall_seconds = r.seconds;
      average = true;
      continue;
    }
    PeerEval p;
    p.train_loss = r.loss;
    p.test_accuracy = r.test_accuracy;
    p.bytes_sent = r.bytes_sent;
    e.peer_accuracy_min = e.peers.empty() ? r.test_accuracy
                                          : std::min(e.peer_accuracy_min, r.test_accuracy);
    e.peer_accuracy_max = e.peers.empty() ? r.test_accuracy
                                          : std::max(e.peer_accuracy_max, r.test_accuracy);
    e.peers.push_back(p);
  }
  close();
  if (result.evals.empty()) throw InputError(cat(path, ": no evaluations"));
  for (EvalPoint& x : result.evals) {
    double loss = 0.0;
    for (const PeerEval& p : x.peers) loss += p.train_loss;
    x.train_loss = x.peers.empty() ? 0.0 : loss / static_cast<double>(x.peers.size());
  }
  const EvalPoint& last = result.evals.back();
  result.rounds = last.round;
  result.epochs = last.epoch;
  result.bytes_sent = last.bytes_sent;
  result.wall_seconds = last.wall_seconds;
  return result;
}

}  // namespace gossip
