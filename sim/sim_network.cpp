// sim/sim_network.cpp: the simulated network and each virtual peer's Exchange. Every peer has
// one sending and one receiving link of sim.bandwidth_mbps; a message occupies a link for
// w = 8 * bytes / bandwidth. A sender's messages of a round leave one after another, in id order
// starting after its own (j+1, j+2, ... mod n, so the peers of a dense graph do not all send to
// peer 0 first); the m-th has left at t + m * w and reaches its receiver L = latency later. A
// receiver takes its accepted messages of a round one after another in order of arrival (equal
// arrivals by ascending sender id), each done at max(previous done + w, its arrival), and
// collect() moves the receiver's clock to the last done. Each link starts a round's messages
// only after it has finished the previous round's. docs/sim.md has the closed forms.
// Message loss is drawn per (link, round) from (seed, sender, Stream::kSim), so it does not
// depend on call order or threads.
#include <algorithm>
#include <cstring>
#include <set>
#include <ctime>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/rng.hpp"
#include "sim/sim_network.hpp"

namespace gossip {

SimConfig simulated_relays(SimConfig sim, const LinkEmulation& e, const Topology& topology) {
  const int n = topology.n();
  std::vector<int> nat(static_cast<std::size_t>(n), -1);
  std::vector<char> unreachable(static_cast<std::size_t>(n), 0);
  for (std::size_t g = 0; g < e.nats.size(); ++g)
    for (int r : e.nats[g])
      if (r < n) nat[r] = static_cast<int>(g), unreachable[r] = 1;
  for (int r : e.firewalled)
    if (r < n) unreachable[r] = 1;
  std::set<std::pair<int, int>> cut;  // unreachable pairs: neither end reaches the other
  for (const auto& [a, b] : e.unreachable)
    if (b < n) {
      cut.insert({a, b});
      unreachable[a] = unreachable[b] = 1;  // their dial-back checks fail too
    }
  int relay = -1;
  for (int r = 0; r < n && relay < 0; ++r)
    if (!unreachable[r]) relay = r;
  if (relay < 0) return sim;
  std::set<std::pair<int, int>> links;
  for (int a = 0; a < n; ++a)
    for (const auto& side : {topology.in_neighbours(a, 0), topology.out_neighbours(a, 0)})
      for (const Neighbour& nb : side)
        if (nb.peer != a) links.insert(std::minmax(a, nb.peer));
  for (const auto& [a, b] : links) {
    if (relay == a || relay == b) continue;
    const bool same_nat = nat[a] >= 0 && nat[a] == nat[b];
    const bool neither = (unreachable[a] && unreachable[b] && !same_nat) || cut.count({a, b});
    if (neither) sim.relayed.push_back({a, b, relay});
  }
  return sim;
}

SimNetwork::SimNetwork(int peers, std::int64_t num_params, int history, const SimConfig& config,
                       std::uint64_t seed, WireFormat wire)
    : config_(config),
      seed_(seed),
      num_params_(num_params),
      history_(std::max(1, history)),
      wire_(wire),
      step_seconds_(config.step_ms / 1000.0),
      cpu_share_(config.cores > 0 ? std::max(1.0, static_cast<double>(peers) / config.cores)
                                  : 1.0),
      step_cpu_(peers, 0.0),
      straggler_(peers, 0),
      down_(peers, 0), silent_from_(peers, -1.0),
      store_(peers) {
  GOSSIP_CHECK_GT(peers, 0);
  for (int s : config.stragglers) {
    if (s < 0 || s >= peers)
      throw InputError(cat("sim.stragglers: peer ", s, " is not in 0..", peers - 1));
    straggler_[s] = 1;
  }
  for (auto& ring : store_) ring.resize(history_);
  forwards_.resize(static_cast<std::size_t>(peers));
  for (const auto& [a, b, r] : config.relayed) {
    if (std::min({a, b, r}) < 0 || std::max({a, b, r}) >= peers || a == b || r == a || r == b)
      throw InputError(cat("sim.relayed: link ", a, "-", b, " through ", r, " is not three "
                           "distinct peers of 0..", peers - 1));
    relay_of_[std::minmax(a, b)] = r;
    forwards_[r].emplace_back(a, b);
    forwards_[r].emplace_back(b, a);
  }
  exchanges_.reserve(peers);
  for (int p = 0; p < peers; ++p) exchanges_.push_back(std::make_unique<SimExchange>(*this, p));
}

double SimNetwork::step_seconds(int peer) const {
  return step_seconds_ * (straggler_[peer] ? config_.straggler_factor : 1.0);
}

double SimNetwork::thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

Learner SimNetwork::timed(int peer, Learner learner) {
  if (!config_.exchange_cpu || !learner.step) return learner;
  learner.step = [step = std::move(learner.step), used = &step_cpu_.at(peer)] {
    const double t0 = thread_cpu_seconds();
    const double loss = step();
    *used += thread_cpu_seconds() - t0;
    return loss;
  };
  return learner;
}

std::uint64_t SimNetwork::message_bytes() const {
  return static_cast<std::uint64_t>(num_params_) * wire_value_bytes(wire_) +
         kMessageOverheadBytes;
}

double SimNetwork::wire_seconds() const { return wire_seconds(message_bytes()); }

double SimNetwork::wire_seconds(std::uint64_t bytes) const {
  return static_cast<double>(bytes) * 8.0 / (config_.bandwidth_mbps * 1e6);
}

int SimNetwork::relay_of(int sender, int receiver) const {
  if (relay_of_.empty()) return -1;
  const auto it = relay_of_.find(std::minmax(sender, receiver));
  return it == relay_of_.end() ? -1 : it->second;
}

double SimNetwork::arrival(const Message& message, int sender, int receiver) const {
  const auto& to = message.to;
  const auto it = std::find(to.begin(), to.end(), receiver);
  // A message collected without being addressed (never done by our algorithms) goes last.
  const auto place = static_cast<double>(it == to.end() ? to.size() + 1 : it - to.begin() + 1);
  const double latency = config_.latency_ms / 1000.0;
  const double at = message.sent_at + place * message.wire + latency;
  const int relay = relay_of(sender, receiver);
  if (relay < 0) return at;
  // Through the relay: it reached the relay at `at`; the relay's link sends the messages it
  // forwards after its own of the round, in a fixed order (its publish made the link busy for
  // them), each as soon as it is there and the link is free.
  const auto& carried = forwards_[relay];
  const auto k = static_cast<double>(
      std::find(carried.begin(), carried.end(), std::pair{sender, receiver}) - carried.begin());
  const Message* own = find(relay, message.round);
  const double free =
      own ? own->sent_at + static_cast<double>(own->to.size()) * own->wire : at;
  return std::max(at, free + k * message.wire) + message.wire + latency;
}

bool SimNetwork::lost(int from, int to, std::int64_t round) const {
  if (config_.message_loss <= 0.0) return false;
  const std::uint64_t h =
      mix64(derive_seed(seed_, static_cast<std::uint64_t>(from), Stream::kSim) ^
            mix64(static_cast<std::uint64_t>(to) * 0x100000001b3ULL +
                  static_cast<std::uint64_t>(round)));
  return static_cast<double>(h >> 11) * 0x1.0p-53 < config_.message_loss;
}

const SimNetwork::Message* SimNetwork::find(int sender, std::int64_t round) const {
  if (round < 0) return nullptr;
  const Message& m = store_[sender][round % history_];
  return m.round == round ? &m : nullptr;
}

SimNetwork::Message& SimNetwork::slot(int sender, std::int64_t round) {
  return store_[sender][round % history_];
}

int SimExchange::size() const { return network_->size(); }

void SimExchange::work(double cpu_seconds) {
  now_ += cpu_seconds * network_->cpu_share();
  cpu_since_ += cpu_seconds;
}

void SimExchange::publish(std::int64_t round, std::span<const float> params, double weight,
                          std::span<const int> to) {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(params.size()), network_->num_params_);
  GOSSIP_CHECK_GE(round, 0);
  auto& m = network_->slot(rank_, round);
  if (m.round == round && !m.params.empty() &&
      std::none_of(to.begin(), to.end(), [&](int p) {
        return std::find(m.to.begin(), m.to.end(), p) != m.to.end();
      }))
    return publish_again(round, params, to);
  m.round = round;
  m.weight = weight;
  m.others.clear();
  m.sent_at = std::max(now_, sent_until_);  // after this link's earlier rounds have gone
  // Send order: j+1, j+2, ... mod n from this peer j.
  const int n = size();
  m.to.assign(to.begin(), to.end());
  std::sort(m.to.begin(), m.to.end(), [&](int a, int b) {
    return (a - rank_ + n) % n < (b - rank_ + n) % n;
  });
  m.wire = network_->wire_seconds();
  // A relay's link also carries what it forwards of the round (messages of the same size).
  sent_until_ = m.sent_at + static_cast<double>(to.size() + network_->forwards_[rank_].size()) *
                                m.wire;
  m.params.resize(params.size());
  std::memcpy(m.params.data(), params.data(), params.size_bytes());
  // What a receiver gets: rounded to the wire format as it leaves, widened back on receipt.
  if (!round_to_wire(std::span<float>(m.params), network_->wire_))
    throw RuntimeError(wire_overflow(params, network_->wire_, round));
  m.packet.clear();
  count_sent(m.to.size(), network_->message_bytes(), m.view, m.probes);
  charge_forwards(network_->message_bytes());
}

void SimExchange::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                                 std::span<const int> to) {
  GOSSIP_CHECK_GE(round, 0);
  auto& m = network_->slot(rank_, round);
  m.round = round;
  m.weight = 1.0;
  m.sent_at = std::max(now_, sent_until_);
  const int n = size();
  m.to.assign(to.begin(), to.end());
  std::sort(m.to.begin(), m.to.end(), [&](int a, int b) {
    return (a - rank_ + n) % n < (b - rank_ + n) % n;
  });
  const std::uint64_t bytes = packet.size() + kPacketOverheadBytes;
  m.wire = network_->wire_seconds(bytes);
  sent_until_ = m.sent_at + static_cast<double>(to.size() + network_->forwards_[rank_].size()) *
                                m.wire;
  m.params.clear();
  m.others.clear();
  m.packet.assign(packet.begin(), packet.end());
  count_sent(m.to.size(), bytes, m.view, m.probes);
  charge_forwards(bytes);
}

void SimExchange::charge_forwards(std::uint64_t bytes) {
  const auto forwarded = static_cast<std::uint64_t>(network_->forwards_[rank_].size());
  cpu_since_ += network_->transfer_cpu_seconds(0, 2 * forwarded * bytes);
}

void SimExchange::publish_again(std::int64_t round, std::span<const float> params,
                                std::span<const int> to) {
  auto& m = network_->slot(rank_, round);
  std::vector<float> copy(params.begin(), params.end());
  if (!round_to_wire(std::span<float>(copy), network_->wire_))
    throw RuntimeError(wire_overflow(params, network_->wire_, round));
  m.others.emplace_back(std::vector<int>(to.begin(), to.end()), std::move(copy));
  m.to.insert(m.to.end(), to.begin(), to.end());  // sent after the round's earlier copies
  sent_until_ += static_cast<double>(to.size()) * m.wire;
  charge(to.size(), network_->message_bytes(), m.view, m.probes);
}

void SimExchange::count_sent(std::size_t copies, std::uint64_t bytes,
                             std::optional<std::vector<Member>>& view, std::vector<Probe>& probes) {
  view = std::exchange(pending_view_, std::nullopt);
  probes = std::exchange(pending_probes_, {});
  charge(copies, bytes, view, probes);
}

void SimExchange::charge(std::size_t copies, std::uint64_t bytes,
                         const std::optional<std::vector<Member>>& view,
                         const std::vector<Probe>& probes) {
  // A probe costs what it does on the wire: 14 bytes, after a 2-byte count.
  const std::uint64_t view_bytes =
      view ? view_message_bytes(size()) + (probes.empty() ? 0 : 2 + 14 * probes.size()) : 0;
  const std::uint64_t sent = (bytes + view_bytes) * copies;
  bytes_sent_ += sent;
  cpu_since_ += network_->transfer_cpu_seconds(0, sent);  // its wake-ups: see collect()
}

void SimExchange::send_view(std::int64_t, std::span<const Member> view, std::span<const int>,
                            std::span<const Probe> probes) {
  pending_view_.emplace(view.begin(), view.end());
  pending_probes_.assign(probes.begin(), probes.end());
}

std::vector<PeerView> SimExchange::take_views() {
  std::vector<PeerView> out;
  for (const auto& [sender, round] : taken_)
    if (const auto* m = network_->find(sender, round); m && m->view)
      out.push_back(PeerView{sender, *m->view, m->probes});
  taken_.clear();
  return out;
}

std::optional<Inbox> SimExchange::newest(std::span<const int>) {
  throw RuntimeError(cat("SimExchange (peer ", rank_, ") does not support newest(): the "
                         "simulator catches a returning peer up itself (Swarm::catch_up)"));
}

void SimExchange::announce(std::span<const Announcement>, std::span<const int>) {
  throw RuntimeError(cat("SimExchange (peer ", rank_, ") does not carry announcements: the "
                         "simulator derives the member timeline itself"));
}

std::vector<Announcement> SimExchange::take_announcements() {
  throw RuntimeError(cat("SimExchange (peer ", rank_, ") does not carry announcements: the "
                         "simulator derives the member timeline itself"));
}
// A view travels as its own small frame, ahead of the parameters: it reaches the receiver even
// when the receiver does not wait for (or take) the parameters that follow it.

namespace {

/// A message collect() takes, as its receiving link sees it: when it arrives, from whom, and the
/// seconds it occupies the link.
struct Arrival {
  double at;
  int sender;
  double wire;
  bool operator<(const Arrival& o) const {
    return at < o.at || (at == o.at && sender < o.sender);
  }
};

}  // namespace

struct SimExchange::Pick {
  const SimNetwork::Message* message = nullptr;  // the one taken; nullptr: none is
  double arrival = 0.0;
  bool waited = false;   // the collect waits for this peer (not down, not in no_wait)
  double give_up = 0.0;  // without a message: when the collect stops waiting for one
};

SimExchange::Pick SimExchange::pick_message(int p, std::int64_t round, double start,
                                            double deadline, const CollectOptions& options) {
  const std::int64_t oldest =
      options.mode == CollectMode::kAsync ? round - options.max_staleness : round;
  // Candidates: rounds oldest..round that were sent and not lost, newest first.
  Pick pick;
  const SimNetwork::Message* first = nullptr;  // the candidate that arrives earliest
  double first_arrival = 0.0;
  if (const auto* m = network_->find(p, round); m && !network_->lost(p, rank_, round))
    taken_.emplace_back(p, round);  // its view, if it sent one
  for (std::int64_t r = round; r >= oldest && r >= 0; --r) {
    const auto* m = network_->find(p, r);
    if (m == nullptr || network_->lost(p, rank_, r)) continue;
    const double arrival = network_->arrival(*m, p, rank_);
    if (pick.message == nullptr && arrival <= start) {
      pick.message = m;
      pick.arrival = arrival;
    }
    if (first == nullptr || arrival < first_arrival) {
      first = m;
      first_arrival = arrival;
    }
  }
  pick.waited = !network_->down(p) &&
                std::find(options.no_wait.begin(), options.no_wait.end(), p) ==
                    options.no_wait.end();
  if (pick.message == nullptr && first != nullptr && first_arrival <= deadline && pick.waited) {
    pick.message = first;  // nothing has arrived yet: wait for the earliest acceptable message
    pick.arrival = first_arrival;
  }
  if (pick.message == nullptr) {
    // Lost, never sent or too late: wait out the deadline, leave it out; or, for a stopped
    // peer, until its silence has lasted options.silent_after.
    pick.give_up = deadline;
    if (const double silent = network_->silent_from(p);
        silent >= 0 && options.silent_after.count() > 0)
      pick.give_up = std::min(deadline, std::max(start, silent + std::chrono::duration<double>(
                                                                  options.silent_after).count()));
  }
  return pick;
}

void SimExchange::apply_cpu_bound(std::uint64_t received, bool got_any) {
  // The CPU bound: this peer's work since the last collect, its received bytes' included. A
  // message's own cost (sim.message_cpu_us, fitted from a ring pass whose every round waits)
  // is mostly the scheduler's: putting the peer to sleep and waking it. So it is paid, twice (a
  // message out and one in, as in that ring pass), by a collect that has to wait, its last
  // message arriving after its CPU work is done; a relayed hop whose chunk is there by the time
  // the peer is ready for it does not sleep and pays its bytes alone.
  cpu_since_ += network_->transfer_cpu_seconds(0, received);
  const double cpu_ready = cpu_mark_ + cpu_since_ * network_->cpu_share();
  if (got_any && now_ > cpu_ready) cpu_since_ += network_->transfer_cpu_seconds(2, 0);
  now_ = std::max(now_, cpu_mark_ + cpu_since_ * network_->cpu_share());
  cpu_mark_ = now_;
  cpu_since_ = 0.0;
}

std::vector<Inbox> SimExchange::collect(std::int64_t round, std::span<const int> from,
                                        const CollectOptions& options) {
  const double start = now_;
  const double deadline = start + std::chrono::duration<double>(options.deadline).count();
  std::vector<int> sorted;  // `from` is normally ascending already (topology order)
  std::span<const int> peers = from;
  if (!std::is_sorted(from.begin(), from.end())) {
    sorted.assign(from.begin(), from.end());
    std::sort(sorted.begin(), sorted.end());
    peers = sorted;
  }
  std::vector<Inbox> got;
  got.reserve(peers.size());
  taken_.clear();
  std::vector<Arrival> arrivals;  // of what is taken
  arrivals.reserve(peers.size());
  double until = start;
  std::uint64_t received = 0;  // bytes taken
  for (int p : peers) {
    GOSSIP_CHECK_MSG(p >= 0 && p < network_->size() && p != rank_, "collect from peer ", p);
    const Pick pick = pick_message(p, round, start, deadline, options);
    if (pick.message == nullptr) {
      if (pick.waited) until = std::max(until, pick.give_up);
      continue;
    }
    const SimNetwork::Message& m = *pick.message;
    arrivals.push_back({pick.arrival, p, m.wire});
    received += m.params.empty() ? m.packet.size() + kPacketOverheadBytes
                                 : network_->message_bytes();
    got.push_back(Inbox{p, m.round, m.params_for(rank_), m.weight,
                        std::span<const std::byte>(m.packet)});
  }
  // The receiving link, once done with earlier rounds, takes them one after another, earliest
  // first (ties: ascending sender), each done at max(previous done + w, its arrival).
  std::sort(arrivals.begin(), arrivals.end());
  double done = received_until_;
  for (const auto& a : arrivals) done = std::max(done + a.wire, a.at);
  received_until_ = done;
  now_ = std::max(until, done);
  apply_cpu_bound(received, !got.empty());
  if (keep_collects_) collects_.emplace_back(start, now_);
  return got;
}

}  // namespace gossip
