// sim/sim_report.cpp: one simulation's run record (DESIGN "Contracts"): every peer's row and the
// average model's row at each evaluation, then the summary with the simulator's own fields. The
// columns mean what they mean under `gossip run` (docs/outputs.md); only `seconds` is simulated.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/json.hpp"

#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

namespace {

/// events.jsonl: the faults carried out, the live graph each round's faults left and every peer's
/// membership events, in round order, with the simulated time as time_s.
void write_sim_events(const std::string& dir, const SimResult& result) {
  const std::string path = dir + "/events.jsonl";
  std::ofstream f(path, std::ios::trunc);
  std::size_t m = 0;
  auto member_until = [&](std::int64_t round) {
    for (; m < result.member_events.size() && result.member_events[m].round <= round; ++m)
      f << event_json(result.member_events[m]) << '\n';
  };
  std::size_t g = 0;
  auto graphs_until = [&](std::int64_t round) {  // after the round's faults
    for (; g < result.live_graphs.size() && result.live_graphs[g].round <= round; ++g)
      f << live_graph_json(result.live_graphs[g]) << '\n';
  };
  for (const SimFault& fault : result.faults) {
    graphs_until(fault.round - 1);
    member_until(fault.round);
    JsonObject o;
    o.add("event", "fault").add("time_s", fault.time_s).add("round", fault.round)
        .add("action", fault.action)
        .add("peers", JsonArray::of(fault.peers));
    if (fault.seconds > 0) o.add("seconds", fault.seconds);  // a pause's length
    f << o.str() << '\n';
  }
  graphs_until(std::numeric_limits<std::int64_t>::max());
  member_until(std::numeric_limits<std::int64_t>::max());
  f.close();
  if (!f) throw RuntimeError(cat(path, ": write failed"));
}

}  // namespace

NetworkSummary network_summary(const SimResult& result, const SimRunInfo& info) {
  NetworkSummary net{.peers = static_cast<int>(result.evals.back().peers.size()),
                     .config = info.config, .topology = info.topology,
                     .algorithm = info.algorithm, .spectral_gap = info.spectral_gap,
                     .bytes_sent = result.bytes_sent,
                     .samples_per_peer = result.samples_per_peer, .components = {},
                     .component_accuracy = {}, .deaths = 0, .rejoins = 0, .alive_at_end = {},
                     .phases = std::nullopt, .phases_per_peer = {}, .byzantine = {},
                     .refused_params = {}, .membership = {}, .member_rounds = {}};
  for (const auto& [peer, from, count] : result.refused)
    net.refused_params.add(JsonObject().add("peer", peer).add("from", from).add("count", count));
  // A death or rejoin counts once, however many peers' views record it: (subject, incarnation).
  std::vector<std::pair<int, std::int64_t>> seen_dead, seen_rejoin;
  for (const MemberEvent& e : result.member_events) {
    auto count = [&](auto& seen, std::int64_t& n) {
      const std::pair<int, std::int64_t> key{e.subject, e.incarnation};
      if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
        ++n;
      }
    };
    if (e.event == MemberEventKind::kDead) count(seen_dead, net.deaths);
    if (e.event == MemberEventKind::kRejoin) count(seen_rejoin, net.rejoins);
    note_byzantine(net.byzantine, e);
  }
  for (char a : result.alive_at_end) net.alive_at_end.push_back(a != 0);
  if (!result.membership.empty()) {
    MembershipTimeline t = membership_timeline(result.initial_members,
                                               result.initial_spectral_gap, result.membership,
                                               net.peers, result.rounds);
    net.membership = std::move(t.entries);
    net.member_rounds = std::move(t.member_rounds);
  }
  if (result.final_components.size() > 1) {  // split at the end (whole: no components)
    net.components = result.final_components;
    net.one_way = result.final_one_way;
    net.component_accuracy = result.component_accuracy;
  }
  if (!result.timelines.empty()) {  // where the simulated time went, of the traced peers
    PhaseSeconds all{};
    for (const auto& [p, t] : result.timelines) {
      for (std::size_t i = 0; i < kPhaseCount; ++i) all[i] += t.seconds()[i];
      net.phases_per_peer.add(JsonObject().add("peer", p).add("phases_s", phase_json(t.seconds())));
    }
    net.phases = all;
  }
  return net;
}

void write_sim_outputs(const std::string& dir, const SimResult& result, const SimRunInfo& info) {
  RunRecord record(dir);
  if (info.tensorboard) record.enable_tensorboard();
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

  RunEnd end{.rounds = result.rounds, .bytes_sent = result.bytes_sent,
             .wall_seconds = result.wall_seconds,
             // the live graph at the end (a static analysis for the consensus-only mode)
             .connected = info.consensus_only ? info.connected : result.final_connected,
             .params_sha256 = result.params_sha256, .gemm = result.gemm.name,
             .epochs = NAN, .average_missing = {}, .extra = {}};
  const NetworkSummary net = network_summary(result, info);
  // An elastic run's ranks that were never members have no model ("", as under gossip run).
  for (std::size_t p = 0; p < net.member_rounds.size() && p < end.params_sha256.size(); ++p)
    if (net.member_rounds[p] == 0) end.params_sha256[p].clear();
  add_network_summary(end.extra, net);
  // The fields of gossip sim alone.
  end.extra.add("mode", info.consensus_only ? "consensus" : "train")
      .add("period_spectral_gap", info.period_spectral_gap)
      .add("sim_seconds", result.sim_seconds)
      .add("step_ms", result.step_seconds * 1000.0)
      .add("workers", result.workers)
      .add("graphs", result.graphs)
      .add("local_seconds", result.local_seconds)
      .add("mix_seconds", result.mix_seconds)
      .add("stopped_by_partition", result.stopped_by_partition);
  // The traced peers' timelines, each in DIR/peers/R/trace.json.
  for (const auto& [p, t] : result.timelines) {
    const std::string folder = cat(dir, "/peers/", p);
    std::filesystem::create_directories(folder);
    t.write(folder + "/trace.json");
  }
  record.finish(std::move(end));
  write_sim_events(dir, result);
}

}  // namespace gossip
