// peer/peer_session.cpp: the one peer lifecycle (PeerSession, gossip/peer.hpp). It wires a
// peer's trainer (own shard), NetExchange (its neighbours), the gossip algorithm the simulator
// also runs and the convergence monitor, and writes its metrics, parameter snapshots,
// checkpoints, trace and summary into DIR/peers/R/, recording what happens as "@gossip" event
// lines (DIR/peers/R/events.txt, and stdout under `gossip run`). Its caller drives the rounds:
// `gossip peer` (run_peer, peer.cpp) in a loop, the Python module from the user's script; a
// caller's own state (a torch optimizer's) rides inside the checkpoints as bytes.
#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <deque>
#include <set>
#include <thread>

#include "gossip/backend.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/hash.hpp"
#include "gossip/monitor.hpp"
#include "gossip/net.hpp"
#include "gossip/peer.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/train.hpp"
#include "src/peer/elastic.hpp"
#include "src/peer/peer_metrics.hpp"
#include "src/peer/peer_parts.hpp"

namespace gossip {

using namespace peer_parts;

namespace {


/// The refusals a neighbour's handshake gave, collected from the I/O thread's log lines.
struct Refusals {
  std::mutex mutex;
  std::vector<std::string> lines;
};

}  // namespace

struct PeerSession::Impl {
  RunConfig config;
  Topology topology;
  PeerOptions opt;
  Clock::time_point t0 = Clock::now();
  std::string dir;
  bool rejoin = false;
  Events events;
  std::vector<std::vector<std::int64_t>> shards;
  double last_epoch = -1.0;  // the last report's epoch and round (epoch_at_end)
  std::int64_t last_epoch_round = 0;
  // Own model only: the data, the trainer and the plan.
  std::unique_ptr<Backend> backend;
  DataSets data;
  std::string train_file;  // the cache file the training images were mapped from ("": decoded)
  Dataset own;
  std::unique_ptr<Trainer> trainer;
  GemmChoice gemm{"none", "no model of its own"};  // what the trainer's GEMMs run
  RoundPlan plan;
  std::vector<float> host;  // the own model's parameters on the host
  // Once joined.
  std::span<float> params;
  std::int64_t rounds = 0;
  std::int64_t round = 0;
  std::unique_ptr<NetExchange> transport;
  // The fault schedule's cuts and this peer's attacks, between the monitor and the transport
  // (top() is the transport when the schedule has neither for this peer).
  std::unique_ptr<FaultedExchange> faulted;
  std::unique_ptr<MonitoredExchange> exchange;
  // Where the time goes (DIR/trace.json): the algorithm sees the exchange through `traced`.
  Timeline timeline{opt.rank, [this] { return since(t0); }};
  std::unique_ptr<TracedExchange> traced;
  double returned_at = -1.0;  // when average() last returned to the caller (join: its step)
  std::unique_ptr<Algorithm> algorithm;
  std::unique_ptr<Watch> watch;
  std::unique_ptr<RunRecord> record;
  Clock::time_point last_round_event = Clock::now();
  bool finished = false;
  // Checkpoints.
  std::uint64_t fingerprint = 0;
  std::uint64_t bytes_before = 0;  // sent before the checkpoint this run resumed from
  std::optional<std::vector<std::byte>> resumed_state;  // the caller's, from that checkpoint
  std::int64_t saved_round = -1;   // the round of the last checkpoint written
  std::unique_ptr<PeerMetrics> metrics;  // net.metrics_port: /metrics; null when off
  // An elastic run: the rounds this peer is a member for, joins, leaves and hand-overs.
  Elastic elastic{config, topology, opt, events, t0};

  Impl(RunConfig c, Topology t, PeerOptions o)
      : config(std::move(c)), topology(std::move(t)), opt(std::move(o)),
        dir(peer_dir(opt.out_dir, opt.rank)),
        rejoin(opt.rejoin && std::filesystem::exists(dir + "/metrics.csv")),
        events((make_output_dir(dir), dir), opt.events_fd, rejoin || opt.resume_round >= 0) {}

  void require_joined(const char* what) const {
    if (finished) throw InputError(cat(what, ": peer ", opt.rank, " has finished"));
    if (!exchange)
      throw InputError(cat(what, ": peer ", opt.rank, " has not joined the network yet (call "
                           "join with its parameter buffer first)"));
  }

  /// Connects with `learner`'s buffer; throws when a neighbour refused our model.
  void connect(const Learner& learner, const std::string& model) {
    NetConfig net = net_config(config, topology, opt, model, learner.num_params);
    const int rank = opt.rank;
    const std::string listen = listen_address(net.addresses[rank]);
    log_line(cat("peer ", rank, ": ", net.addresses[rank], " (listening on ", listen, "), ",
                 net.neighbours.size(), " neighbours, ", algorithm_name(config.gossip.algorithm),
                 ", ", describe_own(model, learner.num_params)));
    if (config.gossip.wire != WireFormat::kFp32)
      log_line(cat("peer ", rank, ": parameters travel as ", wire_format_name(config.gossip.wire),
                   " (gossip.wire): rounded to 16 bits as they leave, widened on receipt"));
    auto refusals = std::make_shared<Refusals>();
    net.log = [rank, refusals](const std::string& line) {
      log_line(cat("peer ", rank, " net: ", line));
      if (line.find("model fingerprint") == std::string::npos) return;
      std::lock_guard lock(refusals->mutex);
      refusals->lines.push_back(line);
    };
    const std::vector<int> linked = net.neighbours;
    transport = std::make_unique<NetExchange>(std::move(net), NetListener(listen));
    // An elastic run: the schedule's later neighbours are dialled until they come; a new
    // identity first waits for its join to be announced.
    if (!opt.join_contacts.empty()) elastic.await_join(*transport);
    else if (!topology.epochs().empty()) transport->expect(later_neighbours(topology, rank));
    const std::vector<int> up = transport->connected_peers();
    const bool all_up = std::includes(up.begin(), up.end(), linked.begin(), linked.end());
    {
      std::lock_guard lock(refusals->mutex);
      if (!all_up && !refusals->lines.empty()) {
        transport.reset();
        throw InputError(cat("peer ", rank, ": its neighbours refused its parameter buffer: ",
                             refusals->lines.front(), " (every peer of a run must join with a "
                             "buffer of the same model and size)"));
      }
    }
    faulted = std::make_unique<FaultedExchange>(*transport, config.faults, config.train.seed);
    exchange = std::make_unique<MonitoredExchange>(faulted->top(), config.monitor);
    events.emit(ReadyEvent{rank, since(t0), topology.n(), opt.config_path});
    traced = std::make_unique<TracedExchange>(*exchange, timeline);
    algorithm = make_algorithm(trainer ? traced_learner(learner, timeline) : learner, *traced,
                               topology, config.gossip, config.train.seed,
                               round_timeout(config.monitor));
    traced->set_tags_per_round(algorithm->relay_steps() + 1);
    watch = std::make_unique<Watch>(topology, rank, *exchange, events, t0,
                                    config.gossip.on_byzantine);
    start_metrics();
    if (elastic.window().joins()) round = elastic.receive_handover(*transport, trainer.get(), host);
    (*watch)(round);
    fingerprint = checkpoint_fingerprint(config, topology, learner.num_params, rounds);
    if (opt.resume_round >= 0) resume();
    record = rejoin ? std::make_unique<RunRecord>(RunRecord::resume(
                          dir, std::numeric_limits<std::int64_t>::max()))
             : opt.resume_round >= 0 ? std::make_unique<RunRecord>(RunRecord::resume(dir, round))
                                     : std::make_unique<RunRecord>(dir);
    timeline.add(Phase::kSetup, 0.0, timeline.now());
  }

  /// net.metrics_port: serves /metrics on metrics_host:metrics_port + rank. A port that cannot
  /// be had is said in the log, and the peer trains on without it.
  void start_metrics() {
    if (config.net.metrics_port <= 0) return;
    const std::string address =
        cat(config.net.metrics_host, ":", config.net.metrics_port + opt.rank);
    try {
      metrics = std::make_unique<PeerMetrics>(opt.rank, address);
      events.set_listener([m = metrics.get()](const PeerEvent& e) { m->on_event(e); });
      log_line(cat("peer ", opt.rank, ": Prometheus metrics at http://", metrics->address(),
                   "/metrics"));
    } catch (const RuntimeError& e) {
      log_line(cat("peer ", opt.rank, ": WARNING: ", e.what(), "; training on without /metrics"));
    }
  }

  /// The figures of the round just done, for the metrics.
  RoundFigures round_figures() const {
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
  std::string traffic_text() const {
    std::string out;
    for (const LinkTraffic& l : transport->link_traffic())
      out += cat(out.empty() ? "" : ";", l.peer, ":", l.sent, ":", l.received);
    return out;
  }

  /// What this peer trains, for its first log line: gossip's own model on its shard, or the
  /// caller's buffer.
  std::string describe_own(const std::string& model, std::int64_t num_params) const {
    if (!trainer)
      return cat("the caller's buffer ", model, " (", num_params, " parameters)");
    return cat("shard of ", shards[static_cast<std::size_t>(opt.rank)].size(), " samples, ",
               backend->describe(), " (train.backend: ", config.train.backend, "), ",
               gemm.line(), ", training images ",
               train_file.empty() ? std::string("decoded in this process")
                                  : cat("mapped from ", train_file, " (shared)"),
               ", test set ",
               data.test.pixels.mapped_file().empty()
                   ? std::string("in this process's memory")
                   : cat("mapped from ", data.test.pixels.mapped_file(), " (shared)"));
  }

  /// monitor.on_partition is stop and the live graph has split.
  bool partition_stop_due() const {
    return watch && watch->partitioned() && config.monitor.on_partition == PartitionPolicy::kStop;
  }

  /// --resume-round N: the parameters, the optimizer's and the algorithm's state and the round
  /// of checkpoint-N.ckpt, which must be this rank's, of this run (as run_peer checks it).
  void resume() {
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

  bool stop_due() const {
    return opt.until_round > 0 && round == opt.until_round && (rounds == 0 || round < rounds);
  }

  void upload(std::span<const float> p) {
    if (trainer) return trainer->upload_params(p);
    std::copy(p.begin(), p.end(), params.begin());
  }

  /// Epochs of the shard the rounds run took: the trainer's plan for gossip's own model; for a
  /// caller's model the last report's epoch carried to this round, else the shard's size with
  /// train.batch and gossip.period; NaN when none of these is known.
  double epoch_at_end() const {
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

  void record_eval(double loss, double accuracy, double epoch) {
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
};

PeerSession::PeerSession(RunConfig config, Topology topology, PeerOptions options) {
  const int n = topology.n();
  if (options.rank < 0 || options.rank >= n)
    throw InputError(cat("rank ", options.rank, " is out of range: the topology has ", n,
                         " peers"));
  if (options.join_contacts.empty()) {
    peer_parts::member_window(topology, options.rank);  // an elastic run's: it is a member once
  } else {
    if (topology.epochs().empty())
      throw InputError("--join: this run's peers are fixed; a new identity joins only an elastic "
                       "run (elastic: true in its topology, and a fault schedule that changes its "
                       "members: joins, leaves or kills)");
    bool scheduled = true;
    try {
      peer_parts::member_window(topology, options.rank);
    } catch (const InputError&) {
      scheduled = false;
    }
    if (scheduled)
      throw InputError(cat("--join: rank ", options.rank, " is a member of this run by its "
                           "schedule already; start it without --join"));
  }
  peer_tls(config, options.tls_dir, options.rank);  // missing credentials stop us at once
  impl_ = std::make_unique<Impl>(std::move(config), std::move(topology), std::move(options));
}

PeerSession::~PeerSession() = default;

int PeerSession::rank() const { return impl_->opt.rank; }
int PeerSession::size() const { return impl_->topology.n(); }
const RunConfig& PeerSession::config() const { return impl_->config; }
const Topology& PeerSession::topology() const { return impl_->topology; }
bool PeerSession::joined() const { return impl_->exchange != nullptr; }
bool PeerSession::finished() const { return impl_->finished; }
std::span<float> PeerSession::params() {
  Impl& m = *impl_;
  m.require_joined("params");
  if (m.trainer) m.trainer->download_params(m.host);  // the own model's, as they are now
  return m.params;
}
std::int64_t PeerSession::rounds_done() const { return impl_->round; }
std::int64_t PeerSession::planned_rounds() const { return impl_->rounds; }

std::vector<std::int64_t> PeerSession::shard() const {
  Impl& m = *impl_;
  if (m.shards.empty()) {
    const DataSets data = load_datasets(m.config);
    m.shards = shard_for(m.config, data.train, m.topology.n());
  }
  return m.shards[static_cast<std::size_t>(m.opt.rank)];
}

void PeerSession::join(std::span<float> params, const std::string& model, std::int64_t rounds) {
  Impl& m = *impl_;
  if (m.exchange) throw InputError(cat("join: peer ", m.opt.rank, " has joined already"));
  if (params.empty()) throw InputError("join: the parameter buffer is empty");
  if (rounds < 0) throw InputError(cat("join: rounds must be 0 or more, not ", rounds));
  m.backend = make_cpu_backend(m.config.train.threads);
  m.params = params;
  m.rounds = rounds;
  Learner learner;
  learner.backend = m.backend.get();
  learner.params = params.data();
  learner.num_params = static_cast<std::int64_t>(params.size());
  m.connect(learner, model);
}

void PeerSession::join_model() {
  Impl& m = *impl_;
  if (m.exchange) throw InputError(cat("join_model: peer ", m.opt.rank, " has joined already"));
  const int n = m.topology.n();
  m.backend = make_backend(parse_backend_choice(m.config.train.backend), m.config.train.threads,
                           false);
  m.data = load_datasets(m.config);
  m.shards = shard_for(m.config, m.data.train, n);
  const auto& mine = m.shards[static_cast<std::size_t>(m.opt.rank)];
  m.own = select_rows(m.data.train, mine);
  m.plan = plan_rounds(m.config, m.data.train.n, n);
  m.train_file = m.data.train.pixels.mapped_file();
  m.data.train = Dataset{};
  std::vector<std::int64_t> rows(static_cast<std::size_t>(m.own.n));
  std::iota(rows.begin(), rows.end(), 0);
  m.trainer = std::make_unique<Trainer>(*m.backend, m.config, m.own, std::move(rows), m.opt.rank,
                                        balance_for(m.config, m.shards, m.opt.rank));
  m.gemm = choose_gemm(*m.backend, gemm_request(m.config.train.gemm, m.config.train.threads,
                                                   m.config.train.precision),
                       m.trainer->model().gemm_shapes(m.config.train.batch));
  m.host.resize(static_cast<std::size_t>(m.trainer->num_params()));
  m.params = m.host;
  m.rounds = m.plan.rounds;
  if (m.elastic.window().joins()) {
    // A joiner's first step would be its slowest (kernels and caches cold) while the others
    // wait for it: one step now, undone (parameters, momentum, steps, sampler restored).
    const Trainer::State before = m.trainer->state();
    m.trainer->step();
    m.trainer->restore(before);
  }
  m.elastic.ready(since(m.t0));
  m.connect(learner_for(*m.trainer), model_fingerprint(m.config.model));
  if (!m.rejoin && m.opt.resume_round < 0 && !m.elastic.window().joins()) report(0.0, 0.0, -1.0);
}

std::int64_t PeerSession::average() {
  Impl& m = *impl_;
  m.require_joined("average");
  // With the caller's own model, what it did since the last round is its local step.
  if (!m.trainer && m.returned_at >= 0)
    m.timeline.add(Phase::kCompute, m.returned_at, m.timeline.now());
  m.elastic.update(m.round, *m.transport, *m.exchange);
  m.elastic.forget_left(m.round, *m.exchange);  // those who left are no longer watched
  const std::int64_t r = m.timeline.time(Phase::kMonitor, [&] {
    return catch_up(m.round, m.topology, m.opt.rank, m.elastic.neighbours(), *m.exchange,
                    *m.algorithm,
                    [&m](std::span<const float> p) { m.upload(p); });
  });
  traced_round(*m.algorithm, m.timeline, r);
  trace_crypto(*m.transport, m.timeline, m.t0);
  m.round = r + 1;
  m.elastic.after_round(m.round, *m.algorithm, m.params.size(),
                        m.trainer ? static_cast<double>(m.trainer->steps()) : 0.0,
                        *m.transport, *m.exchange);
  const double monitor_from = m.timeline.now();
  // After the last round a neighbour that has finished and said bye is no loss.
  m.watch->observe_mix(m.algorithm->last_mix());
  // (A peer that leaves an elastic run here is no longer a member to watch the graph of.)
  if ((m.rounds == 0 || m.round < m.rounds) && m.round < m.elastic.window().until) (*m.watch)(m.round);
  m.algorithm->set_cut(m.exchange->cut_peers());
  // The launcher carries out the fault schedule when every peer has done a fault's round: tell
  // it at once at those rounds, else at most every kRoundEventEvery (its progress line).
  const bool fault_round = std::any_of(m.config.faults.begin(), m.config.faults.end(),
                                       [&](const Fault& f) { return f.round == m.round; });
  if (m.opt.events_fd >= 0 &&
      (fault_round || Clock::now() - m.last_round_event >= kRoundEventEvery)) {
    m.events.progress(RoundEvent{m.opt.rank, m.round, m.rounds, since(m.t0), m.traffic_text(),
                                 format_phase_seconds(m.timeline.seconds())});
    m.last_round_event = Clock::now();
  }
  // A peer that gossip run's schedule kills at this round stops itself here (SIGSTOP), before
  // it sends anything of this round, and the launcher kills it when it reads this round event:
  // its last round is the one before, as in gossip sim (whatever the launcher's reaction time).
  if (m.opt.events_fd >= 0 &&
      std::any_of(m.config.faults.begin(), m.config.faults.end(), [&](const Fault& f) {
        return f.action == FaultAction::kKill && f.round == m.round &&
               std::find(f.peers.begin(), f.peers.end(), m.opt.rank) != f.peers.end();
      }))
    raise(SIGSTOP);
  m.timeline.add(Phase::kMonitor, monitor_from, m.timeline.now());
  if (m.metrics) {
    m.metrics->round_done(m.round);
    if (m.metrics->refresh_due()) m.metrics->refresh(m.round_figures());
  }
  m.returned_at = m.timeline.now();
  return m.round;
}

bool PeerSession::eval_due() const {
  return impl_->trainer && impl_->plan.eval_due(impl_->round);
}

void PeerSession::report(double loss, double accuracy, double epoch) {
  Impl& m = *impl_;
  m.require_joined("report");
  const double from = m.timeline.now();
  struct Span {
    Timeline& t;
    double from;
    ~Span() { t.add(Phase::kEvaluate, from, t.now()); }
  } span{m.timeline, from};
  if (m.trainer) {
    // Between the first and the last evaluation a subset of the test set (train.peer_eval_limit);
    // the last, at the plan's end or where a partition stops the run, on all of it.
    const bool last = m.round >= m.plan.rounds || m.partition_stop_due();
    const Evaluation ev = m.trainer->evaluate(m.data.test, m.config.train.peer_eval_samples(last));
    const double train_loss = m.round > 0 ? m.algorithm->take_train_loss() : NAN;
    return m.record_eval(train_loss, ev.accuracy, m.plan.epoch_at(m.round));
  }
  if (!std::isfinite(accuracy) || accuracy < 0.0 || accuracy > 1.0)
    throw InputError(cat("report: accuracy must be a fraction in [0, 1], not ", accuracy));
  m.record_eval(loss, accuracy, epoch < 0 ? 0.0 : epoch);
}

std::optional<std::vector<std::byte>> PeerSession::resumed_state() const {
  impl_->require_joined("resume_state");
  return impl_->resumed_state;
}

bool PeerSession::checkpoint_due(std::int64_t every) const {
  const Impl& m = *impl_;
  if (every < 0) every = m.config.train.checkpoint_every;
  if (m.round == 0 || m.round == m.saved_round) return false;
  return m.stop_due() ||
         (every > 0 && m.round % every == 0 && (m.rounds == 0 || m.round < m.rounds));
}

bool PeerSession::stop_due() const { return impl_->stop_due(); }

void PeerSession::request_leave() { impl_->elastic.request_leave(); }

bool PeerSession::leave_due() const {
  const Impl& m = *impl_;
  return m.round >= m.elastic.window().until && (m.rounds == 0 || m.round < m.rounds);
}

bool PeerSession::partition_stop_due() const { return impl_->partition_stop_due(); }

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

void PeerSession::stop() {
  Impl& m = *impl_;
  m.require_joined("stop");
  if (m.saved_round != m.round)
    throw InputError(cat("stop: peer ", m.opt.rank, " has no checkpoint of round ", m.round,
                         " to resume from (save_checkpoint first)"));
  m.record->flush();
  trace_crypto(*m.transport, m.timeline, m.t0);
  m.timeline.write(m.dir + "/trace.json");  // the timeline so far (a resumed run starts anew)
  log_line(cat("peer ", m.opt.rank, ": stopped after round ", m.round, " as asked (checkpoint ",
               checkpoint_path(m.dir, m.round), ")"));
  m.finished = true;
  m.algorithm.reset();
  m.traced.reset();
  m.exchange.reset();
  m.faulted.reset();
  m.transport.reset();
}

std::vector<int> PeerSession::dead_peers() const {
  impl_->require_joined("dead_peers");
  return impl_->exchange->dead_peers();
}

LiveGraph PeerSession::live_graph() const {
  const std::vector<int> dead = dead_peers();
  return gossip::live_graph(impl_->topology, dead);
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
  if (m.metrics) {  // the final figures, for a scrape after the process has gone
    m.metrics->refresh(m.round_figures());
    m.metrics->write(m.dir + "/metrics.prom");
  }
  RunEnd end{.rounds = m.round, .bytes_sent = m.bytes_before + m.exchange->bytes_sent(),
             .wall_seconds = finish_end, .connected = m.watch->monitor().connected(),
             .params_sha256 = {sha256_hex(final_params)}, .gemm = m.gemm.name,
             .epochs = NAN, .average_missing = {}, .extra = {}};
  end.extra.add("peer", m.opt.rank).add("missing_messages", m.algorithm->missing_messages());
  // The shard's size: known for the own model, and for a caller that asked for its shard; a
  // caller that trains on data of its own has none.
  if (m.shards.empty())
    end.extra.raw("samples", "null");
  else
    end.extra.add("samples", std::ssize(m.shards[static_cast<std::size_t>(m.opt.rank)]));
  end.extra
      .add("incarnation",
           static_cast<std::int64_t>(m.exchange->membership().view()[m.opt.rank].incarnation))
      .add("stopped_by_partition", m.partition_stop_due())
      .add("member_from", m.elastic.window().from)
      .add("left", m.round >= m.elastic.window().until && (m.rounds == 0 || m.round < m.rounds));
  if (m.elastic.window().joins())
    end.extra.add("join", JsonObject()
                              .add("round", m.elastic.window().from)
                              .add("donors", JsonArray::of(m.elastic.donors()))
                              .add("ready_s", m.elastic.ready_s())
                              .add("mixing_s", m.elastic.mixing_s())
                              .add("ready_to_mix_s", m.elastic.mixing_s() - m.elastic.ready_s()));
  end.extra
      .add("phases_s", phase_json(m.timeline.seconds()))
      .add("trace", "trace.json");
  // Who lied to it, as far as it can tell (docs/byzantine.md).
  JsonArray refused;
  std::vector<int> refused_pairs;
  for (const auto& [from, count] : m.watch->refused()) {
    refused.add(JsonObject().add("from", from).add("count", count));
    refused_pairs.insert(refused_pairs.end(), {from, static_cast<int>(count)});
  }
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
  m.finished = true;
  m.algorithm.reset();
  m.traced.reset();
  m.exchange.reset();
  m.faulted.reset();
  m.transport.reset();  // says bye to every neighbour
  return s;
}

}  // namespace gossip
