// peer/session_setup.cpp: a peer joins the network (PeerSession::Impl::connect): its transport,
// the decorator stack (fault schedule, monitor, timeline), the algorithm, the membership watch
// and the metrics page.
#include "src/peer/session.hpp"

namespace gossip {
namespace {

/// The ready event: the network, the config, and how this process began (torchrun's restarts).
ReadyEvent ready_event(const PeerOptions& opt, int rank, double seconds, int peers) {
  ReadyEvent ready{rank, seconds, peers, opt.config_path};
  ready.start = peer_start(opt);
  ready.from = std::max<std::int64_t>(0, opt.resume_round);
  if (opt.launch.torchrun) ready.restarts = opt.launch.torchrun->restart_count;
  return ready;
}

}  // namespace

/// Connects with `learner`'s buffer; throws when a neighbour refused our model.
void PeerSession::Impl::connect(const Learner& learner, const std::string& model) {
  NetConfig net = net_config(config, topology, opt, model, learner.num_params);
  const int rank = opt.rank;
  const std::string listen = listen_address(net.addresses[rank], config.net.bind);
  log_line(cat("peer ", rank, ": ", net.addresses[rank], " (listening on ", listen,
               config.net.bind.empty() ? "" : ", net.bind",
               net.listed ? "" : "; announced in its signed record, not listed", "), ",
               net.neighbours.size(), " neighbours, ", algorithm_name(config.gossip.algorithm),
               ", ", describe_own(model, learner.num_params)));
  if (config.gossip.wire != WireFormat::kFp32)
    log_line(cat("peer ", rank, ": parameters travel as ", wire_format_name(config.gossip.wire),
                 " (gossip.wire): rounded to 16 bits as they leave, widened on receipt"));
  net.log = [rank](const std::string& line) { log_line(cat("peer ", rank, " net: ", line)); };
  // On a GPU the neighbours' messages arrive in page-locked memory: their uploads go by DMA.
  if (learner.backend != nullptr) net.host_memory = learner.backend->pinned_memory();
  const std::vector<int> linked = net.neighbours;
  transport = std::make_unique<NetExchange>(std::move(net), NetListener(listen));
  // An elastic run: the schedule's later neighbours are dialled until they come; a new
  // identity first waits for its join to be announced.
  if (!opt.join_contacts.empty()) elastic.await_join(*transport);
  else if (!topology.epochs().empty()) transport->expect(later_neighbours(topology, rank));
  const std::vector<int> up = transport->connected_peers();
  const bool all_up = std::includes(up.begin(), up.end(), linked.begin(), linked.end());
  for (const LinkStatus& link : all_up ? std::vector<LinkStatus>{} : transport->links())
    if (link.failure == LinkFailureKind::kModel) {
      const std::string why = link.why;
      transport.reset();
      throw InputError(cat("peer ", rank, ": its neighbours refused its parameter buffer: peer ",
                           link.peer, ": ", why, " (every peer of a run must join with a "
                           "buffer of the same model and size)"));
    }
  monitor_transport();
  events.emit(ready_event(opt, rank, since(t0), topology.n()));
  traced = std::make_unique<TracedExchange>(*exchange, timeline);
  algorithm = make_algorithm(trainer ? traced_learner(learner, timeline) : learner, *traced,
                             topology, config.gossip, config.train.seed,
                             round_timeout(config.monitor));
  traced->set_tags_per_round(algorithm->relay_steps() + 1);
  watch = std::make_unique<Watch>(topology, rank, *exchange, *transport, events, t0,
                                  config.gossip.on_byzantine);
  start_metrics();
  if (elastic.window().joins()) round = elastic.receive_handover(*transport, trainer.get(), host);
  // Started again into a running network with no live neighbour to take its round from: it
  // trains alone from the network's round at its restart (the schedule's earlier kills are past)
  // and is mixed in again when a neighbour comes back.
  if (opt.rejoin && opt.rejoin_round > round && transport->connected_peers().empty()) {
    round = opt.rejoin_round;
    log_line(cat("peer ", rank, ": started again with no live neighbour: it trains alone from "
                 "round ", round, " (the network's round at its restart) until one comes back"));
  }
  (*watch)(round);
  fingerprint = checkpoint_fingerprint(config, topology, learner.num_params, rounds);
  if (opt.resume_round >= 0) resume();
  record = rejoin ? std::make_unique<RunRecord>(RunRecord::resume(
                        dir, std::numeric_limits<std::int64_t>::max()))
           : opt.resume_round >= 0 ? std::make_unique<RunRecord>(RunRecord::resume(dir, round))
                                   : std::make_unique<RunRecord>(dir);
  timeline.add(Phase::kSetup, 0.0, timeline.now());
}

void PeerSession::Impl::monitor_transport() {
  faulted = std::make_unique<FaultedExchange>(*transport, *transport, config.faults,
                                              config.train.seed);
  exchange = std::make_unique<MonitoredExchange>(faulted->top(), faulted->membership(),
                                                 config.monitor);
  // Started again into a running network: its first neighbour's view says where everybody
  // stands (Membership::adopt_next_view).
  if (opt.rejoin) exchange->membership().adopt_next_view();
}

/// net.metrics_port: serves /metrics on metrics_host:metrics_port + rank. A port that cannot
/// be had is said in the log, and the peer trains on without it.
void PeerSession::Impl::start_metrics() {
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

/// What this peer trains, for its first log line: gossip's own model on its shard, or the
/// caller's buffer.
std::string PeerSession::Impl::describe_own(const std::string& model, std::int64_t num_params) const {
  if (!trainer)
    return cat("the caller's buffer ", model, " (", num_params, " parameters)");
  return cat("shard of ", shards[static_cast<std::size_t>(opt.rank)].size(), " samples, ",
             backend->describe(), " (train.backend: ", backend_choice_name(config.train.backend), "), ",
             gemm.line(),
             config.train.graphs == GraphMode::kOff ? "" : cat(", graphs: ", trainer->graphs()),
             ", training images ",
             train_file.empty() ? std::string("decoded in this process")
                                : cat("mapped from ", train_file, " (shared)"),
             ", test set ",
             data.test.pixels.mapped_file().empty()
                 ? std::string("in this process's memory")
                 : cat("mapped from ", data.test.pixels.mapped_file(), " (shared)"));
}

}  // namespace gossip
