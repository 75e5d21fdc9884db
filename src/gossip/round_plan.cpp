// gossip/round_plan.cpp: how many rounds a training run has and after which ones it evaluates —
// one definition for the simulator and real peers, so their runs line up round for round.
#include <algorithm>
#include <cmath>

#include "gossip/config.hpp"
#include "gossip/gossip.hpp"

namespace gossip {

RoundPlan plan_rounds(const RunConfig& config, std::int64_t train_samples, int peers) {
  RoundPlan p;
  p.train_samples = train_samples;
  p.samples_per_round = static_cast<double>(peers) * config.train.batch * config.gossip.period;
  // In double first: a plan past kMaxLocalSteps is refused before it is made an integer.
  const double rounds = std::max(
      1.0, std::ceil(config.train.epochs * train_samples / p.samples_per_round - 1e-9));
  check_local_steps(config, rounds * config.gossip.period);
  p.rounds = static_cast<std::int64_t>(rounds);
  p.evals = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(std::ceil(config.train.epochs * config.train.evals_per_epoch -
                                          1e-9)),
      1, p.rounds);
  return p;
}

bool RoundPlan::eval_due(std::int64_t done) const {
  return done * evals / rounds != (done - 1) * evals / rounds;
}

double RoundPlan::epoch_at(std::int64_t done) const {
  return train_samples > 0 ? done * samples_per_round / train_samples : 0.0;
}

}  // namespace gossip
