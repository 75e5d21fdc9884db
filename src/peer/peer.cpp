// peer/peer.cpp: one real peer. Wires its trainer (own shard), NetExchange (its neighbours), the
// gossip algorithm the simulator also runs, and the convergence monitor; runs the rounds; writes
// its metrics, parameter snapshots, final parameters and summary into DIR/peers/R/; and records
// what happens as "@gossip" event lines in DIR/peers/R/events.txt (which `gossip collect` merges)
// and, under `gossip run`, on stdout for the launcher.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "gossip/backend.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/timeline.hpp"
#include "gossip/train.hpp"
#include "src/peer/peer_parts.hpp"

namespace gossip {

// The config refuses what the handshake could not carry, before any peer starts.
static_assert(NetworkConfig::kMaxRunIdBytes == wire::kMaxRunIdBytes);

namespace {

using namespace peer_parts;

std::string with_rank(std::string path, int rank) {
  const std::string token = "{rank}";
  for (auto at = path.find(token); at != std::string::npos; at = path.find(token, at))
    path.replace(at, token.size(), std::to_string(rank));
  return path;
}


}  // namespace

std::string peer_dir(const std::string& out_dir, int rank) {
  return cat(out_dir, "/peers/", rank);
}

TlsConfig peer_tls(const RunConfig& config, const std::string& tls_dir, int rank) {
  TlsConfig tls;
  tls.enabled = config.net.tls;
  if (!tls.enabled) return tls;
  if (!tls_dir.empty()) return tls_files_in(tls_dir, rank);
  if (config.net.tls_ca.empty())
    throw InputError(cat(
        config.where("net.tls"), ": this peer has no TLS credentials. Make the run's with "
        "`gossip keys init DIR --config ", config.path.empty() ? "CONFIG" : config.path,
        "` and name them: net.tls: {ca: DIR/ca.pem, cert: \"DIR/peer-{rank}.pem\", key: "
        "\"DIR/peer-{rank}.key\"} (or pass --tls-dir DIR); `gossip run` makes them by itself; "
        "net.tls: off runs without TLS"));
  tls.ca = with_rank(config.net.tls_ca, rank);
  tls.cert = with_rank(config.net.tls_cert, rank);
  tls.key = with_rank(config.net.tls_key, rank);
  return tls;
}

int run_peer(const RunConfig& config, const Topology& topology, const PeerOptions& opt) {
  const int n = topology.n();
  const int rank = opt.rank;
  if (rank < 0 || rank >= n)
    throw InputError(cat("rank ", rank, " is out of range: the topology has ", n, " peers"));
  peer_tls(config, opt.tls_dir, rank);  // missing credentials stop us before the data loads
  const auto t0 = Clock::now();
  const std::string dir = peer_dir(opt.out_dir, rank);
  make_output_dir(dir);
  const bool rejoin = opt.rejoin && std::filesystem::exists(dir + "/metrics.csv");
  Events events(dir, opt.events, opt.resume_round >= 0 || rejoin);

  // No "backend auto" line of its own (it would carry no timestamp): the line below names the
  // backend chosen.
  auto backend = make_backend(parse_backend_choice(config.train.backend), config.train.threads,
                              false);
  DataSets data = load_datasets(config);
  const std::int64_t train_samples = data.train.n;
  const auto shards = shard_for(config, data.train, n);
  // The peer keeps only its own shard (rows 0..k-1 of `own`, in the shard's order, so it draws
  // the same batches as the simulator's peer over the whole set) and frees the rest.
  const Dataset own = select_rows(data.train, shards[rank]);
  data.train = Dataset{};
  std::vector<std::int64_t> own_rows(static_cast<std::size_t>(own.n));
  std::iota(own_rows.begin(), own_rows.end(), 0);
  Trainer trainer(*backend, config, own, std::move(own_rows), rank,
                  balance_for(config, shards, rank));

  NetConfig net = net_config(config, topology, opt, model_fingerprint(config.model),
                              trainer.num_params());
  const std::string listen = listen_address(net.addresses[rank]);
  log_line(cat("peer ", rank, ": ", net.addresses[rank], " (listening on ", listen, "), ",
               net.neighbours.size(), " neighbours, shard of ", shards[rank].size(), " samples, ",
               backend->describe(), " (train.backend: ", config.train.backend, "), test set ",
               data.test.pixels.mapped_file().empty()
                   ? std::string("in this process's memory")
                   : cat("mapped from ", data.test.pixels.mapped_file(), " (shared)")));
  if (config.gossip.wire != WireFormat::kFp32)
    log_line(cat("peer ", rank, ": parameters travel as ", wire_format_name(config.gossip.wire),
                 " (gossip.wire): rounded to 16 bits as they leave, widened on receipt"));
  NetExchange transport(std::move(net), NetListener(listen));
  // The membership view rides on the transport; the algorithm sees the monitored exchange.
  MonitoredExchange exchange(transport, config.monitor.dead_after_rounds,
                             config.monitor.dead_after_s);
  exchange.set_faults(&config.faults);
  exchange.set_silence(config.monitor.suspect_after_s);
  exchange.set_adaptive_deadline(config.monitor.round_timeout_floor_s);
  events.emit(ReadyEvent{rank, since(t0), n, opt.config_path});

  // Where the time goes (DIR/trace.json): the algorithm's steps and exchange calls are timed.
  Timeline timeline(rank, [t0] { return since(t0); });
  TracedExchange traced(exchange, timeline);
  const Learner learner = traced_learner(learner_for(trainer), timeline);
  auto algorithm = make_algorithm(learner, traced, topology, config.gossip, config.train.seed,
                                  round_timeout(config.monitor));
  exchange.set_tags_per_round(algorithm->relay_steps() + 1);
  Watch watch(topology, rank, exchange, events, t0);
  watch(0);
  auto catch_up = [&](std::int64_t r) {
    return peer_parts::catch_up(r, topology, rank, exchange, *algorithm,
                                [&](std::span<const float> p) { trainer.upload_params(p); });
  };

  const RoundPlan plan = plan_rounds(config, train_samples, n);
  const std::int64_t rounds = plan.rounds;

  const std::uint64_t fingerprint =
      checkpoint_fingerprint(config, topology, trainer.num_params(), rounds);
  std::int64_t first_round = 0;
  std::uint64_t bytes_before = 0;  // sent before the checkpoint this run resumed from
  std::optional<RunRecord> resumed;
  if (opt.resume_round >= 0) {
    const std::string path = checkpoint_path(dir, opt.resume_round);
    const auto c = read_resume_checkpoint(dir, opt.resume_round, rank, fingerprint, rounds);
    trainer.restore(Trainer::State{c.params, c.velocity, c.steps,
                                   {c.sampler_epoch, c.sampler_pos, c.sampler_drawn}});
    restore_algorithm(*algorithm, c, path);
    first_round = c.round;
    bytes_before = c.bytes_sent;
    resumed.emplace(RunRecord::resume(dir, first_round));
    log_line(cat("peer ", rank, ": resumed from ", path, " (round ", first_round, " of ", rounds,
                 ")"));
  }
  if (rejoin)
    resumed.emplace(RunRecord::resume(dir, std::numeric_limits<std::int64_t>::max()));
  RunRecord record = resumed ? std::move(*resumed) : RunRecord(dir);
  auto save_checkpoint = [&](std::int64_t done) {
    const Trainer::State t = trainer.state();
    const Algorithm::State a = algorithm->state();
    Checkpoint c{.rank = rank, .round = done, .rounds = rounds, .run_fingerprint = fingerprint,
                 .params = t.params, .velocity = t.velocity, .steps = t.steps,
                 .sampler_epoch = t.sampler.epoch, .sampler_pos = t.sampler.pos,
                 .sampler_drawn = t.sampler.drawn, .weight = a.weight, .loss_sum = a.loss_sum,
                 .loss_count = a.loss_count, .missing = a.missing,
                 .bytes_sent = bytes_before + exchange.bytes_sent(),
                 .algorithm_state = a.buffers};
    write_checkpoint_file(checkpoint_path(dir, done), c);
    prune_checkpoints(dir, kCheckpointsKept);
  };
  std::vector<float> params(trainer.num_params());
  auto evaluate = [&](std::int64_t round) {
    const double eval_start = timeline.now();
    const Evaluation ev = trainer.evaluate(data.test, config.train.eval_limit);
    const double loss = round > 0 ? algorithm->take_train_loss() : NAN;
    if (round > 0 && !std::isfinite(loss))
      throw RuntimeError(cat("training diverged at round ", round, " (loss ", loss,
                             "): lower optimizer.lr"));
    MetricsRow row;
    row.round = round;
    row.epoch = plan.epoch_at(round);
    row.peer = rank;
    row.loss = round > 0 ? loss : 0.0;
    row.test_accuracy = ev.accuracy;
    row.bytes_sent = bytes_before + exchange.bytes_sent();
    row.seconds = since(t0);
    record.write(row);
    record.flush();
    // The parameters of every evaluation: the launcher (or `gossip collect`) evaluates the
    // average model and the consensus distance from them.
    algorithm->model_params(params);
    const std::string snapshot = cat(dir, "/params-", round, ".bin");
    write_params(snapshot, params);
    events.emit(EvalEvent{rank, round, rounds, row.epoch, row.loss, row.test_accuracy,
                          row.bytes_sent, row.seconds, snapshot});
    timeline.add(Phase::kEvaluate, eval_start, timeline.now());
  };

  timeline.add(Phase::kSetup, 0.0, timeline.now());
  if (first_round == 0 && !rejoin) evaluate(0);
  const std::int64_t every = config.train.checkpoint_every;
  // The launcher's progress line follows the rounds between evaluations: a round event at most
  // every kRoundEventEvery (a line on a pipe; nothing when not under gossip run).
  constexpr auto kRoundEventEvery = std::chrono::milliseconds(250);
  auto last_round_event = Clock::now();
  bool stopped_by_partition = false;
  std::int64_t completed = rounds;  // fewer when the peer stops at a partition
  for (std::int64_t r = first_round; r < rounds; ++r) {
    r = timeline.time(Phase::kMonitor, [&] { return catch_up(r); });
    if (r >= rounds) break;
    traced_round(*algorithm, timeline, r);
    trace_crypto(transport, timeline, t0);
    const std::int64_t done = r + 1;
    // After the last round a neighbour that has finished and said bye is no loss.
    if (done < rounds) timeline.time(Phase::kMonitor, [&] { watch(done); });
    if (watch.partitioned() && config.monitor.on_partition == "stop") {
      log_line(cat("peer ", rank, ": the live graph split at round ", done,
                   " and monitor.on_partition is stop: stopping with a checkpoint"));
      if (!plan.eval_due(done)) evaluate(done);
      save_checkpoint(done);
      stopped_by_partition = true;
      completed = done;
      break;
    }
    // The launcher carries out the fault schedule when every peer has done a fault's round:
    // tell it at once at those rounds.
    const bool fault_round = std::any_of(config.faults.begin(), config.faults.end(),
                                         [&](const Fault& f) { return f.round == done; });
    if (opt.events && (fault_round || Clock::now() - last_round_event >= kRoundEventEvery)) {
      timeline.time(Phase::kMonitor,
                    [&] { events.progress(RoundEvent{rank, done, rounds, since(t0)}); });
      last_round_event = Clock::now();
    }
    if (plan.eval_due(done)) evaluate(done);
    const bool stop = opt.until_round > 0 && done == opt.until_round && done < rounds;
    if ((every > 0 && done % every == 0 && done < rounds) || stop)
      timeline.time(Phase::kCheckpoint, [&] { save_checkpoint(done); });
    if (stop) {
      record.flush();
      trace_crypto(transport, timeline, t0);
      timeline.write(dir + "/trace.json");  // the timeline so far (a resumed run starts anew)
      log_line(cat("peer ", rank, ": stopped after round ", done, " as asked (checkpoint ",
                   checkpoint_path(dir, done), ")"));
      return kExitOk;
    }
  }

  const double finish_start = timeline.now();
  algorithm->model_params(params);
  write_params(dir + "/params.bin", params);
  // The peer's wall time ends with its timeline's last span; the file is written after.
  const double finish_end = timeline.now();
  timeline.add(Phase::kFinish, finish_start, finish_end);
  trace_crypto(transport, timeline, t0);
  timeline.write(dir + "/trace.json");
  RunEnd end{.rounds = completed, .bytes_sent = bytes_before + exchange.bytes_sent(),
             .wall_seconds = finish_end,
             .connected = watch.monitor().connected(), .params_sha256 = {sha256_hex(params)}, .extra = {}};
  end.extra.add("peer", rank).add("missing_messages", algorithm->missing_messages())
      .add("samples", std::ssize(shards[rank]))
      .add("incarnation", static_cast<std::int64_t>(exchange.membership().view()[rank].incarnation))
      .add("stopped_by_partition", stopped_by_partition)
      .add("phases_s", phase_json(timeline.seconds()))
      .add("trace", "trace.json");
  const Summary s = record.finish(std::move(end));
  events.emit(DoneEvent{rank, s.last.test_accuracy, s.end.params_sha256.front(),
                        s.end.bytes_sent, s.end.wall_seconds,
                        format_phase_seconds(timeline.seconds())});
  log_line(cat("peer ", rank, ": done, test accuracy ", fixed(s.last.test_accuracy, 4), ", ",
               s.end.bytes_sent, " bytes sent"));
  return kExitOk;
}

}  // namespace gossip
