// peer/checkpoints.cpp: resuming a peer: the checkpoint fingerprint and reader, the algorithm's
// state restored, and catching up with neighbours that are rounds ahead (checkpoints.hpp).
#include "src/peer/checkpoints.hpp"


#include "gossip/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"

namespace gossip::peer_parts {

std::uint64_t checkpoint_fingerprint(const RunConfig& config, const Topology& topology,
                                     std::int64_t num_params, std::int64_t rounds) {
  const std::string key = cat(topology.fingerprint(), "/", num_params, "/", config.train.seed, "/",
                              algorithm_name(config.gossip.algorithm), "/", config.gossip.period, "/", rounds);
  return std::stoull(sha256_hex(key.data(), key.size()).substr(0, 16), nullptr, 16);
}

Checkpoint read_resume_checkpoint(const std::string& dir, std::int64_t round, int rank,
                                  std::uint64_t fingerprint, std::int64_t rounds) {
  const std::string path = checkpoint_path(dir, round);
  std::string why;
  auto c = read_checkpoint_file(path, &why);
  if (!c) throw InputError(cat(path, ": cannot resume from it: ", why));
  if (c->rank != rank || c->round != round || c->run_fingerprint != fingerprint ||
      c->rounds != rounds)
    throw InputError(cat(path, ": cannot resume from it: it is rank ", c->rank, " round ",
                         c->round, " of a run of ", c->rounds, " rounds",
                         c->run_fingerprint != fingerprint
                             ? " with another topology, model, seed or algorithm" : "",
                         "; this is rank ", rank, " of ", rounds, " rounds"));
  return std::move(*c);
}

void restore_algorithm(Algorithm& algorithm, const Checkpoint& c, const std::string& path) {
  try {
    algorithm.restore(Algorithm::State{c.weight, c.loss_sum, c.loss_count, c.missing,
                                       c.algorithm_state});
  } catch (const InputError& e) {
    throw InputError(cat(path, ": cannot resume from it: ", e.what()));
  }
}

std::int64_t catch_up(std::int64_t r, const Topology& topology, int rank,
                      std::span<const int> neighbours, MonitoredExchange& exchange,
                      Algorithm& algorithm,
                      const std::function<void(std::span<const float>)>& upload) {
  const std::int64_t behind = max_round_lead(topology) + 1;
  const auto m = exchange.newest(neighbours);
  // Only parameters can be taken over: choco's and all-reduce's packets are not a model (and
  // all-reduce numbers its hops, not its rounds).
  if (!m || !m->packet.empty() || m->params.empty() || m->round <= r + behind) return r;
  exchange.merge_views(r);  // learn what the others believe of us first
  upload(m->params);
  Algorithm::State st = algorithm.state();
  st.weight = m->weight;
  algorithm.restore(st);
  log_line(cat("peer ", rank, ": at round ", r, ", ", m->round - r,
               " rounds behind its neighbours: took peer ", m->peer, "'s parameters of round ",
               m->round, " and carries on from there"));
  return m->round;
}

}  // namespace gossip::peer_parts
