// peer/session_record.cpp: what a peer records: its evaluations (metrics rows, parameter
// snapshots), its checkpoints and the summary it ends with.
#include "src/peer/session.hpp"

namespace gossip {

/// The figures of the round just done, for the metrics.
RoundFigures PeerSession::Impl::round_figures() const {
  RoundFigures f;
  f.round = round;
  f.rounds = rounds;
  f.bytes_sent = bytes_before + exchange->bytes_sent();
  f.links = transport->link_traffic();
  f.view = exchange->membership().view();
  f.cut = exchange->cut_peers();
  f.byzantine_suspects = watch->byzantine_suspects();
  f.refused = watch->refused();
  f.missing = algorithm->missing_messages();
  f.connected = watch->monitor().connected();
  f.phases = &timeline.seconds();
  return f;
}

/// "NEIGHBOUR:SENT:RECEIVED;..." for the round event (the dashboard's link rates).
std::string PeerSession::Impl::traffic_text() const {
  std::string out;
  for (const LinkTraffic& l : transport->link_traffic())
    out += cat(out.empty() ? "" : ";", l.peer, ":", l.sent, ":", l.received);
  return out;
}

/// --resume-round N: the parameters, the optimizer's and the algorithm's state and the round
/// of checkpoint-N.ckpt, which must be this rank's, of this run (as run_peer checks it).
void PeerSession::Impl::resume() {
  const std::string path = checkpoint_path(dir, opt.resume_round);
  auto c = read_resume_checkpoint(dir, opt.resume_round, opt.rank, fingerprint, rounds);
  if (trainer) {
    trainer->restore(Trainer::State{c.params, c.velocity, c.steps,
                                    {c.sampler_epoch, c.sampler_pos, c.sampler_drawn}});
    trainer->download_params(host);
  } else {
    std::copy(c.params.begin(), c.params.end(), params.begin());
  }
  restore_algorithm(*algorithm, c, path);
  round = c.round;
  saved_round = c.round;
  bytes_before = c.bytes_sent;
  resumed_state = std::move(c.caller_state);
  log_line(cat("peer ", opt.rank, ": resumed from ", path, " (round ", round, " of ", rounds,
               ")"));
}

/// Epochs of the shard the rounds run took: the trainer's plan for gossip's own model; for a
/// caller's model the last report's epoch carried to this round, else the shard's size with
/// train.batch and gossip.period; NaN when none of these is known.
double PeerSession::Impl::epoch_at_end() const {
  if (trainer) return plan.epoch_at(round);
  if (last_epoch > 0.0 && last_epoch_round > 0)
    return last_epoch * static_cast<double>(round) / static_cast<double>(last_epoch_round);
  if (!shards.empty()) {
    const auto size = shards[static_cast<std::size_t>(opt.rank)].size();
    if (size > 0)
      return static_cast<double>(round) * config.gossip.period * config.train.batch /
             static_cast<double>(size);
  }
  return NAN;
}

void PeerSession::Impl::record_eval(double loss, double accuracy, double epoch) {
  if (epoch > 0.0 && round > 0) {
    last_epoch = epoch;
    last_epoch_round = round;
  }
  if (!std::isfinite(loss) && round > 0)
    throw RuntimeError(cat("training diverged at round ", round, " (loss ", loss,
                           "): lower the learning rate (optimizer.lr",
                           config.gossip.outer.enabled ? ", or gossip.outer.lr" : "", ")"));
  MetricsRow row;
  row.round = round;
  row.epoch = epoch;
  row.peer = opt.rank;
  row.loss = round > 0 ? loss : 0.0;
  row.test_accuracy = accuracy;
  row.bytes_sent = bytes_before + exchange->bytes_sent();
  row.seconds = since(t0);
  record->write(row);
  record->flush();
  // The parameters of every evaluation: the launcher (or `gossip collect`) computes the
  // consensus distance (and, for gossip's own model, the average model's accuracy) from them.
  std::vector<float> snapshot_params(params.size());
  algorithm->model_params(snapshot_params);
  const std::string snapshot = cat(dir, "/params-", round, ".bin");
  write_params(snapshot, snapshot_params);
  events.emit(EvalEvent{opt.rank, round, rounds, row.epoch, row.loss, row.test_accuracy,
                        row.bytes_sent, row.seconds, snapshot});
  if (metrics) metrics->after_eval(row.loss, row.test_accuracy);
}

void PeerSession::save_checkpoint(std::span<const std::byte> caller_state) {
  Impl& m = *impl_;
  m.require_joined("save_checkpoint");
  Checkpoint c{.rank = m.opt.rank, .round = m.round, .rounds = m.rounds,
               .run_fingerprint = m.fingerprint, .params = {}, .velocity = {}, .steps = 0,
               .sampler_epoch = 0, .sampler_pos = 0, .sampler_drawn = 0, .weight = 1.0,
               .loss_sum = 0.0, .loss_count = 0, .missing = 0,
               .bytes_sent = m.bytes_before + m.exchange->bytes_sent(), .algorithm_state = {},
               .caller_state = {caller_state.begin(), caller_state.end()}};
  if (m.trainer) {
    Trainer::State t = m.trainer->state();
    c.params = std::move(t.params);
    c.velocity = std::move(t.velocity);
    c.steps = t.steps;
    c.sampler_epoch = t.sampler.epoch;
    c.sampler_pos = t.sampler.pos;
    c.sampler_drawn = t.sampler.drawn;
  } else {
    c.params.assign(m.params.begin(), m.params.end());
  }
  Algorithm::State a = m.algorithm->state();
  c.weight = a.weight;
  c.loss_sum = a.loss_sum;
  c.loss_count = a.loss_count;
  c.missing = a.missing;
  c.algorithm_state = std::move(a.buffers);
  m.timeline.time(Phase::kCheckpoint, [&] {
    write_checkpoint_file(checkpoint_path(m.dir, m.round), c);
    prune_checkpoints(m.dir, kCheckpointsKept);
  });
  m.saved_round = m.round;
}

namespace {

/// Each neighbour's link as this peer's transport saw it, and how it formed (docs/outputs.md).
JsonArray links_json(const LinkReports& reports) {
  JsonArray links;
  for (const LinkStatus& l : reports.links()) {
    JsonObject o;
    o.add("peer", l.peer).add("formed", l.formed);
    if (l.formed) o.add("formed_s", l.formed_s);
    else o.raw("formed_s", "null");
    // (An elastic run's neighbour that never joined is not waited for: "waiting".)
    o.add("state", l.up         ? "up"
                   : l.left     ? "left"
                   : l.formed   ? "down"
                   : l.given_up ? "never_formed"
                                : "waiting");
    if (!l.up && !l.left) o.add("why", l.why).add("failure", link_failure_name(l.failure));
    o.add("path", link_path_name(l.path));  // how it formed last (none: never)
    if (l.path != LinkPath::kNone) {
      if (l.dialler >= 0) o.add("dialled_by", l.dialler);
      if (l.path == LinkPath::kRelayed) {
        if (l.relay >= 0) o.add("relay", l.relay);
        else o.raw("relay", "null");
        o.add("relay_address", l.relay_address);
      }
      if (l.rtt_ms >= 0) o.add("rtt_ms", l.rtt_ms);
      o.add("how", describe_path(l));
    }
    links.add(o);
  }
  return links;
}

}  // namespace

/// The summary's fields of this peer's run: its shard, incarnation, membership window and
/// join, and where its time went.
void PeerSession::Impl::add_run_fields(JsonObject& extra) const {
  extra.add("peer", opt.rank).add("missing_messages", algorithm->missing_messages());
  if (backend) extra.add("conv", conv_name(*backend));
  if (trainer) extra.add("graphs", trainer->graphs());
  // The shard's size: known for the own model, and for a caller that asked for its shard; a
  // caller that trains on data of its own has none.
  if (shards.empty())
    extra.raw("samples", "null");
  else
    extra.add("samples", std::ssize(shards[static_cast<std::size_t>(opt.rank)]));
  extra
      .add("incarnation",
           static_cast<std::int64_t>(exchange->membership().view()[opt.rank].incarnation))
      .add("stopped_by_partition", partition_stop_due())
      .add("member_from", elastic.window().from)
      .add("left", round >= elastic.window().until && (rounds == 0 || round < rounds));
  // How this process began: from scratch, from a checkpoint or into the running network, and
  // under torchrun the agent's restart count (collect reports restarts from it).
  JsonObject start;
  start.add("as", peer_start_name(peer_start(opt)));
  if (opt.resume_round >= 0) start.add("round", opt.resume_round);
  if (const auto& t = opt.launch.torchrun)
    start.add("launcher", "torchrun").add("restart_count", t->restart_count).add("run_id", t->run_id);
  extra.add("start", std::move(start));
  if (elastic.window().joins())
    extra.add("join", JsonObject()
                          .add("round", elastic.window().from)
                          .add("donors", JsonArray::of(elastic.donors()))
                          .add("ready_s", elastic.ready_s())
                          .add("mixing_s", elastic.mixing_s())
                          .add("ready_to_mix_s", elastic.mixing_s() - elastic.ready_s()));
  extra
      .add("phases_s", phase_json(timeline.seconds()))
      .add("trace", "trace.json");
  if (timeline.overlap_rounds() > 0) {  // a caller that mixed beside its steps
    JsonObject overlap;
    overlap.add("rounds", timeline.overlap_rounds());
    for (std::size_t k = 0; k < kOverlapPartCount; ++k)
      overlap.add(overlap_part_name(k), timeline.overlap_seconds()[k]);
    extra.add("overlap_s", std::move(overlap));
  }
}

/// The summary's fields of this peer's network: its links, reachability, relayed bytes and
/// the addresses it would dial.
void PeerSession::Impl::add_network_fields(JsonObject& extra) const {
  // What the transport knows of its links, read from it (the decorators above add nothing).
  const LinkReports& reports = *transport;
  extra.add("links", links_json(reports));
  const ReachabilityReport reach = reports.reachability();
  extra.add("reachability", JsonObject()
                                .add("state", reachability_name(reach.state))
                                .add("settled", reach.settled)
                                .add("how", reach.how));
  extra.add("bytes_relayed", reports.bytes_relayed());
  JsonArray addresses;  // where this peer would dial each member, and how it knows
  for (const PeerAddress& a : reports.addresses())
    addresses.add(JsonObject()
                      .add("peer", a.peer)
                      .add("address", a.address)
                      .add("source", address_source_name(a.source)));
  extra.add("addresses", addresses);
}

/// Marks the session finished and lets go of the algorithm, the exchange and the transport.
void PeerSession::Impl::close() {
  finished = true;
  algorithm.reset();
  traced.reset();
  exchange.reset();
  faulted.reset();
  transport.reset();  // says bye to every neighbour
}

Summary PeerSession::finish(bool awaits_average) {
  Impl& m = *impl_;
  m.require_joined("finish");
  const double finish_start = m.timeline.now();
  std::vector<float> final_params(m.params.size());
  m.algorithm->model_params(final_params);
  write_params(m.dir + "/params.bin", final_params);
  const double finish_end = m.timeline.now();
  m.timeline.add(Phase::kFinish, finish_start, finish_end);
  trace_crypto(*m.transport, m.timeline, m.t0);
  m.timeline.write(m.dir + "/trace.json");
  // One reading of the counters for metrics.prom and summary.json alike (a heartbeat may go
  // out between the two).
  const RoundFigures last = m.round_figures();
  if (m.metrics) {  // the final figures, for a scrape after the process has gone
    m.metrics->refresh(last);
    m.metrics->write(m.dir + "/metrics.prom");
  }
  m.watch->end_links(m.round);
  RunEnd end{.rounds = m.round, .bytes_sent = last.bytes_sent,
             .wall_seconds = finish_end, .connected = m.watch->monitor().connected(),
             .params_sha256 = {sha256_hex(final_params)}, .gemm = m.gemm.name,
             .epochs = NAN, .average_missing = {}, .extra = {}};
  m.add_run_fields(end.extra);
  // Who lied to it, as far as it can tell (docs/byzantine.md).
  JsonArray refused;
  std::vector<int> refused_pairs;
  for (const auto& [from, count] : m.watch->refused()) {
    refused.add(JsonObject().add("from", from).add("count", count));
    refused_pairs.insert(refused_pairs.end(), {from, static_cast<int>(count)});
  }
  m.add_network_fields(end.extra);
  end.extra.add("refused_params", refused)
      .add("byzantine_suspects", JsonArray::of(m.watch->byzantine_suspects()))
      .add("cut", JsonArray::of(m.exchange->cut_peers()));
  const Summary s = m.record->finish(std::move(end));
  m.events.emit(DoneEvent{m.opt.rank, s.last.test_accuracy, s.end.params_sha256.front(),
                          s.end.bytes_sent, s.end.wall_seconds,
                          format_phase_seconds(m.timeline.seconds()), refused_pairs, m.round,
                          m.epoch_at_end(), awaits_average});
  log_line(cat("peer ", m.opt.rank, ": done after ", m.round, " rounds, test accuracy ",
               fixed(s.last.test_accuracy, 4), ", ", s.end.bytes_sent, " bytes sent"));
  m.close();
  return s;
}

}  // namespace gossip
