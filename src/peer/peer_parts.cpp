// peer/peer_parts.cpp: the pieces of a peer's lifecycle that are not the session (peer_parts.hpp).
#include "src/peer/peer_parts.hpp"

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

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void trace_crypto(NetExchange& transport, Timeline& timeline, Clock::time_point t0) {
  const auto seconds = [t0](Clock::time_point t) {
    return std::chrono::duration<double>(t - t0).count();
  };
  for (const auto& [start, end] : transport.take_crypto_spans())
    timeline.add(Phase::kEncrypt, seconds(start), seconds(end));
}

MemberWindow member_window(const Topology& topology, int rank) {
  MemberWindow w;
  const auto& epochs = topology.epochs();
  if (epochs.empty()) return w;
  const auto member = [rank](const Topology::Epoch& e) {
    return std::binary_search(e.members.begin(), e.members.end(), rank);
  };
  std::size_t e = 0;
  while (e < epochs.size() && !member(epochs[e])) ++e;
  if (e == epochs.size())
    throw InputError(cat("rank ", rank, " is never a member of this elastic run (its fault "
                         "schedule's joins name the ranks that join)"));
  w.from = epochs[e].from;
  w.first_epoch = e;
  for (std::size_t k = e + 1; k < epochs.size(); ++k)
    if (!member(epochs[k])) {
      w.until = epochs[k].from;
      break;
    }
  return w;
}

namespace {

/// The neighbours of `rank` in the graphs of epochs [first, last] (every round of each period).
std::set<int> epoch_neighbours(const Topology& topology, int rank, std::size_t first,
                               std::size_t last) {
  std::set<int> s;
  const auto& epochs = topology.epochs();
  for (std::size_t e = first; e <= last; ++e) {
    const std::int64_t from = epochs.empty() ? 0 : epochs[e].from;
    const std::int64_t period = epochs.empty() ? topology.period() : std::ssize(epochs[e].rounds);
    for (std::int64_t t = from; t < from + period; ++t) {
      for (const auto& nb : topology.in_neighbours(rank, t)) s.insert(nb.peer);
      for (const auto& nb : topology.out_neighbours(rank, t)) s.insert(nb.peer);
    }
  }
  s.erase(rank);
  return s;
}

/// The last epoch of `rank`'s member window.
std::size_t last_epoch(const Topology& topology, const MemberWindow& w) {
  const auto& epochs = topology.epochs();
  if (epochs.empty()) return 0;
  return w.until == std::numeric_limits<std::int64_t>::max() ? epochs.size() - 1
                                                             : topology.epoch_index(w.until) - 1;
}

}  // namespace

std::vector<int> all_neighbours(const Topology& topology, int rank) {
  const MemberWindow w = member_window(topology, rank);
  const std::set<int> s = epoch_neighbours(topology, rank, w.first_epoch, last_epoch(topology, w));
  return {s.begin(), s.end()};
}

std::vector<int> later_neighbours(const Topology& topology, int rank) {
  const MemberWindow w = member_window(topology, rank);
  const std::set<int> all =
      epoch_neighbours(topology, rank, w.first_epoch, last_epoch(topology, w));
  const std::set<int> first = epoch_neighbours(topology, rank, w.first_epoch, w.first_epoch);
  std::vector<int> out;
  std::set_difference(all.begin(), all.end(), first.begin(), first.end(),
                      std::back_inserter(out));
  return out;
}

GossipSettings gossip_settings(const GossipConfig& g) {
  GossipSettings s;
  s.algorithm = algorithm_name(g.algorithm);
  if (!traits(g.algorithm).compresses) return s;  // the rest is choco's: 0 and "" elsewhere
  const ChocoConfig& c = g.choco;
  s.compressor = compress_kind_name(c.compress.kind);
  if (c.compress.sparse()) s.fraction = c.compress.fraction;
  if (traits(c.compress.kind).parameter == CompressParameter::kBits)
    s.bits = static_cast<std::uint32_t>(c.compress.bits);
  s.consensus_step = consensus_step(c);
  s.gossip_steps = static_cast<std::uint32_t>(c.gossip_steps);
  return s;
}

NetConfig net_config(const RunConfig& config, const Topology& topology, const PeerOptions& opt,
                     const std::string& model, std::int64_t num_params) {
  const int rank = opt.rank;
  NetConfig net;
  net.tls = peer_tls(config, opt.tls_dir, rank);
  net.rank = rank;
  net.size = topology.n();
  net.addresses = peer_addresses(config, topology, opt.launch);
  if (!opt.join_contacts.empty()) {
    // A new identity (--join): every rank may become its neighbour; it dials its contacts.
    for (int p = 0; p < topology.n(); ++p) {
      if (p == rank) continue;
      net.neighbours.push_back(p);
      if (std::find(opt.join_contacts.begin(), opt.join_contacts.end(), p) ==
          opt.join_contacts.end())
        net.later.push_back(p);
    }
    net.contacts = opt.join_contacts;
  } else {
    net.neighbours = all_neighbours(topology, rank);
  }
  if (!topology.epochs().empty() && opt.join_contacts.empty()) {
    // An elastic run: any rank may become a neighbour as the members change (a death, a leave
    // or a join derives the graph again); those not in its first epoch's graph are later ones,
    // dialled once the graph needs them (PeerSession expects the schedule's at the start).
    const std::set<int> first(net.neighbours.begin(), net.neighbours.end());
    const std::vector<int> needed_later = later_neighbours(topology, rank);
    const std::set<int> scheduled_later(needed_later.begin(), needed_later.end());
    net.neighbours.clear();
    for (int p = 0; p < topology.n(); ++p) {
      if (p == rank) continue;
      net.neighbours.push_back(p);
      if (first.count(p) == 0 || scheduled_later.count(p) != 0) net.later.push_back(p);
    }
  }
  for (int p : extra_neighbours(config.gossip, rank, topology.n()))  // all-reduce's ring
    if (std::find(net.neighbours.begin(), net.neighbours.end(), p) == net.neighbours.end())
      net.neighbours.push_back(p);
  std::sort(net.neighbours.begin(), net.neighbours.end());
  net.handshake.run_id = config.net.run_id;
  net.shared_memory = config.net.shared_memory;
  net.congestion = config.net.congestion;
  // A sender may run this many rounds ahead of us (n - 1 on a directed ring): keep them all.
  net.max_queued_rounds = static_cast<std::size_t>(
      std::max<std::int64_t>(net.max_queued_rounds,
                             max_round_lead(topology) + 1 +
                                 extra_round_lead(config.gossip, topology.n())));
  net.handshake.model = model;
  net.handshake.param_count = static_cast<std::uint64_t>(num_params);
  net.handshake.topology_fingerprint = topology.fingerprint();
  net.handshake.wire = config.gossip.wire;  // params frames at this width; neighbours must agree
  net.handshake.gossip = gossip_settings(config.gossip);  // so must what the frames mean
  // CHOCO's packets: a sparse one (an index and a value per coordinate kept) of more than half
  // the coordinates is larger than the parameters themselves; the frame limit makes room.
  const CompressConfig& compress = config.gossip.choco.compress;
  if (traits(config.gossip.algorithm).compresses && compress.kind != CompressKind::kNone) {
    const Compressor compressor(compress, num_params, 0, 0, config.gossip.wire);
    const std::uint64_t frame = wire::kHeaderBytes + compressor.packet_bytes();
    net.max_frame_bytes = std::max<std::uint64_t>(
        default_max_frame_bytes(net.handshake.param_count), frame + wire::kMaxControlPayload);
  }
  net.timeouts.start = seconds_to_ms(config.net.connect_timeout_s);
  net.timeouts.io = io_timeout(config.net, config.monitor);
  net.timeouts.silent = seconds_to_ms(config.monitor.suspect_after_s);
  net.log = [rank](const std::string& line) { log_line(cat("peer ", rank, " net: ", line)); };
  return net;
}

Events::Events(const std::string& dir, int fd, bool append)
    : path_(dir + "/events.txt"), file_(path_, append ? std::ios::app : std::ios::trunc),
      fd_(fd) {
  if (!file_) throw InputError(cat(path_, ": cannot open for writing"));
}

void Events::write_line(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  std::lock_guard lock(mutex_);
  if (fd_ == STDOUT_FILENO) std::fflush(stdout);  // after what was printed before it
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher has gone: the files still have every event
    done += static_cast<std::size_t>(n);
  }
}

void Events::progress(const PeerEvent& event) { write_line(encode_event(event)); }

void Events::emit(const PeerEvent& event) {
  if (listener_) listener_(event);
  const std::string line = encode_event(event);
  file_ << line << '\n' << std::flush;
  if (!file_) throw RuntimeError(cat(path_, ": write failed"));
  write_line(line);
}

void write_params(const std::string& path, std::span<const float> params) {
  std::ofstream f(path + ".tmp", std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(params.data()),
          static_cast<std::streamsize>(params.size() * sizeof(float)));
  f.close();
  if (!f) throw RuntimeError(cat(path, ".tmp: write failed"));
  std::filesystem::rename(path + ".tmp", path);
}

Watch::Watch(const Topology& topology, int rank, MonitoredExchange& exchange, Events& events,
             Clock::time_point t0, ByzantinePolicy on_byzantine)
    : rank_(rank), exchange_(&exchange), events_(&events), t0_(t0), watch_(topology, rank) {
  watch_.set_on_byzantine(on_byzantine);
}

void Watch::operator()(std::int64_t round) {
  std::vector<std::string> lines;
  for (const PeerEvent& e : watch_(*exchange_, round, since(t0_), &lines)) events_->emit(e);
  for (const std::string& l : lines) log_line(cat("peer ", rank_, " round ", round, ": ", l));
}

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
