// peer/peer_session.cpp: the one peer lifecycle (PeerSession, gossip/peer.hpp). It wires a
// peer's trainer (own shard), transport (its neighbours), the gossip algorithm the simulator
// also runs and the convergence monitor, and writes its metrics, parameter snapshots,
// checkpoints, trace and summary into DIR/peers/R/, recording what happens as "@gossip" event
// lines (DIR/peers/R/events.txt, and stdout under `gossip run`). Its caller drives the rounds:
// `gossip peer` (run_peer, peer.cpp) in a loop, the Python module from the user's script; a
// caller's own state (a torch optimizer's) rides inside the checkpoints as bytes.
#include "src/peer/session.hpp"

namespace gossip {

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
  m.backend = m.opt.backend ? m.opt.backend()
                            : make_backend(m.config.train.backend, m.config.train.threads, false,
                                           m.opt.device >= 0 ? m.opt.device : m.opt.rank);
  use_conv(*m.backend, m.config.train.conv);
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
  m.backend->pin_host(m.host.data(), m.host.size() * sizeof(float));
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
  m.elastic.update(m.round, *m.transport, *m.exchange, m.faulted->membership());
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
        // (a kill before this peer was started again is past: it was what stopped it)
        return f.action == FaultAction::kKill && f.round == m.round &&
               f.round > m.opt.rejoin_round &&
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

double PeerSession::trace_now() const { return impl_->timeline.now(); }

void PeerSession::trace_overlap(std::int64_t round, const std::string& part, double start,
                                double end) {
  impl_->require_joined("trace_overlap");
  impl_->timeline.add_overlap(parse_overlap_part(part), start, end, round);
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

}  // namespace gossip
