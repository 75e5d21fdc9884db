// net/mailbox.cpp: the hand-over between the I/O thread and the training thread, and the
// collect() rules. Peers are visited in ascending id, never in arrival order (DESIGN idea 2).
#include "src/net/mailbox.hpp"

#include <algorithm>
#include <utility>

#include "gossip/core.hpp"

namespace gossip::net {

namespace {
// Probes held per neighbour until the training thread takes them (a view carries at most 64).
constexpr std::size_t kMaxProbesHeld = 256;
}  // namespace

Mailboxes::Mailboxes(int rank, int size, std::vector<int> neighbours, std::size_t param_count,
                     std::size_t max_queued_rounds, Log log, HostMemory* host_memory)
    : rank_(rank), param_count_(param_count), host_memory_(host_memory),
      max_queued_(std::max<std::size_t>(1, max_queued_rounds)),
      log_(std::move(log)), neighbours_(std::move(neighbours)), index_(size, -1) {
  std::sort(neighbours_.begin(), neighbours_.end());
  neighbours_.erase(std::unique(neighbours_.begin(), neighbours_.end()), neighbours_.end());
  for (std::size_t i = 0; i < neighbours_.size(); ++i) {
    const int p = neighbours_[i];
    if (p < 0 || p >= size || p == rank)
      throw InputError(cat("peer ", rank, ": neighbour ", p, " is not a rank in 0..", size - 1,
                           " other than itself"));
    index_[p] = static_cast<int>(i);
  }
  boxes_.resize(neighbours_.size());
}

bool Mailboxes::is_neighbour(int peer) const {
  return peer >= 0 && peer < static_cast<int>(index_.size()) && index_[peer] >= 0;
}

HostFloats Mailboxes::take_buffer(int peer) {
  HostFloats buf{HostAllocator<float>(host_memory_)};
  {
    std::lock_guard lk(mu_);
    auto& pool = box(peer).pool;
    if (!pool.empty()) {
      buf = std::move(pool.back());
      pool.pop_back();
    }
  }
  buf.resize(param_count_);
  return buf;
}

void Mailboxes::return_buffer(int peer, HostFloats buffer) {
  std::lock_guard lk(mu_);
  box(peer).pool.push_back(std::move(buffer));
}

void Mailboxes::recycle(Box& b, Message&& m) {
  if (!m.params.empty()) b.pool.push_back(std::move(m.params));
}

void Mailboxes::deliver(int peer, Message message) {
  std::string dropped;
  {
    std::lock_guard lk(mu_);
    Box& b = box(peer);
    // The same round twice: a frame whose write was under way when its connection was replaced
    // goes out again on the new one, and the old one is read to its end (Session::retire).
    for (const Message& queued : b.queue)
      if (queued.round == message.round) {
        recycle(b, std::move(message));
        return;
      }
    if (b.queue.size() >= max_queued_) {
      // Logged at the 1st, 10th, 100th, ... drop from a peer: a peer that was paused comes
      // back to thousands of queued rounds.
      const std::uint64_t k = ++b.dropped;
      bool power_of_ten = true;
      for (std::uint64_t x = k; x > 1 && power_of_ten; x /= 10) power_of_ten = x % 10 == 0;
      if (power_of_ten)
        dropped = cat("net[", rank_, "]: peer ", peer, " is ", max_queued_,
                      " rounds ahead; dropped its round ", b.queue.front().round,
                      k > 1 ? cat(" (", k, " rounds dropped from it so far)") : std::string());
      recycle(b, std::move(b.queue.front()));
      b.queue.pop_front();
    }
    b.queue.push_back(std::move(message));
  }
  cv_.notify_all();
  if (!dropped.empty()) log_(dropped);
}

void Mailboxes::deliver_view(int peer, PeerView view) {
  std::lock_guard lk(mu_);
  Box& b = box(peer);
  b.view = std::move(view.members);
  for (const Probe& p : view.probes)
    if (b.probes.size() < kMaxProbesHeld) b.probes.push_back(p);
}

void Mailboxes::deliver_announcements(std::vector<Announcement> changes) {
  std::lock_guard lk(mu_);
  for (const Announcement& a : changes)
    if (announcements_.size() < 4 * kMaxAnnouncements &&
        std::find(announcements_.begin(), announcements_.end(), a) == announcements_.end())
      announcements_.push_back(a);
}

std::vector<Announcement> Mailboxes::take_announcements() {
  std::lock_guard lk(mu_);
  return std::exchange(announcements_, {});
}

std::vector<PeerView> Mailboxes::take_views() {
  std::lock_guard lk(mu_);
  std::vector<PeerView> out;
  for (int p : neighbours_)
    if (auto& v = box(p).view) {
      out.push_back(PeerView{p, std::move(*v), std::exchange(box(p).probes, {})});
      v.reset();
    }
  return out;
}

std::vector<int> Mailboxes::excused_peers() const {
  std::lock_guard lk(mu_);
  return excused_;
}

std::optional<Inbox> Mailboxes::newest(std::span<const int> from) {
  std::lock_guard lk(mu_);
  const Message* best = nullptr;
  int best_peer = -1;
  for (int p : from) {
    if (!is_neighbour(p)) continue;
    for (const Message& m : box(p).queue)
      if (!best || m.round > best->round || (m.round == best->round && p < best_peer)) {
        best = &m;
        best_peer = p;
      }
  }
  if (!best) return std::nullopt;
  return Inbox{best_peer, best->round, best->params, best->weight, best->packet, best->finite};
}

void Mailboxes::alert(TransportAlert a) {
  std::lock_guard lk(mu_);
  alerts_.push_back(std::move(a));
}

void Mailboxes::refused(int peer, const std::string& why) {
  std::int64_t count = 0;
  {
    std::lock_guard lk(mu_);
    count = ++refused_[peer];
    if ((count & (count - 1)) != 0) return;  // not a power of two
    alerts_.push_back(TransportAlert{
        MemberEventKind::kRefusedParams, peer,
        cat("net[", rank_, "]: refused peer ", peer, "'s parameters: ", why, "; ", count,
            count == 1 ? " message" : " messages", " refused so far, left out of mixing, the "
            "link stays up")});
  }
}

std::vector<TransportAlert> Mailboxes::take_alerts() {
  std::lock_guard lk(mu_);
  return std::exchange(alerts_, {});
}

LinkState Mailboxes::state(int peer) const {
  std::lock_guard lk(mu_);
  return box(peer).state;
}

std::vector<SendToken> Mailboxes::start_sends(std::size_t count) {
  std::vector<SendToken> tokens;
  tokens.reserve(count);
  {
    std::lock_guard lk(mu_);
    pending_sends_ += count;
  }
  for (std::size_t i = 0; i < count; ++i) tokens.push_back(SendToken(this));
  return tokens;
}

void SendToken::release() {
  Mailboxes* m = std::exchange(mail_, nullptr);
  if (!m) return;
  {
    std::lock_guard lk(m->mu_);
    GOSSIP_CHECK_LE(std::size_t{1}, m->pending_sends_);
    --m->pending_sends_;
  }
  m->cv_.notify_all();
}

void Mailboxes::fail(const std::string& what) {
  {
    std::lock_guard lk(mu_);
    if (failure_.empty()) failure_ = what;
  }
  cv_.notify_all();
}

void Mailboxes::check_healthy() const {
  std::lock_guard lk(mu_);
  if (!failure_.empty()) throw RuntimeError(cat("net[", rank_, "]: I/O thread failed: ", failure_));
}

std::vector<int> Mailboxes::wait_connected(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, deadline, [&] {
    return !failure_.empty() || std::all_of(boxes_.begin(), boxes_.end(), [](const Box& b) {
             return b.later || b.state == LinkState::kUp || b.state == LinkState::kGone;
           });
  });
  std::vector<int> missing;
  for (int p : neighbours_)
    if (box(p).state != LinkState::kUp && !box(p).later) missing.push_back(p);
  return missing;
}

std::vector<int> Mailboxes::wait_up(std::span<const int> peers,
                                    std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, deadline, [&] {
    return !failure_.empty() || std::all_of(peers.begin(), peers.end(), [&](int p) {
             return box(p).state == LinkState::kUp;
           });
  });
  std::vector<int> missing;
  for (int p : peers)
    if (box(p).state != LinkState::kUp) missing.push_back(p);
  return missing;
}

void Mailboxes::set_later(std::span<const int> peers) {
  std::lock_guard lk(mu_);
  for (int p : peers) box(p).later = true;
}

bool Mailboxes::ahead(const Box& b, std::int64_t round) {
  return std::any_of(b.queue.begin(), b.queue.end(), [&](const Message& m) { return m.round > round; }) &&
         std::none_of(b.queue.begin(), b.queue.end(), [&](const Message& m) { return m.round == round; });
}

bool Mailboxes::ready(const Box& b, std::int64_t round, const CollectOptions& o) const {
  if (o.mode == CollectMode::kSync)
    return ahead(b, round) || std::any_of(b.queue.begin(), b.queue.end(),
                                          [&](const Message& m) { return m.round == round; });
  const std::int64_t oldest = round - o.max_staleness;
  if (b.held && b.held->round >= oldest) return true;
  return std::any_of(b.queue.begin(), b.queue.end(),
                     [&](const Message& m) { return m.round >= oldest; });
}

// Moves the message collect() returns into b.held (and recycles the ones it supersedes).
void Mailboxes::take(Box& b, std::int64_t round, const CollectOptions& o) {
  std::deque<Message> later;
  if (o.mode == CollectMode::kSync) {
    if (b.held) recycle(b, std::move(*b.held));
    b.held.reset();
    for (auto& m : b.queue) {
      if (m.round == round && !b.held) b.held = std::move(m);
      else if (m.round <= round) recycle(b, std::move(m));
      else later.push_back(std::move(m));  // a neighbour a round ahead: keep for next time
    }
    b.queue.swap(later);
    return;
  }
  // Async: the newest message wins (a held one counts); everything older goes back to the pool.
  for (auto& m : b.queue) {
    if (!b.held || m.round >= b.held->round) {
      if (b.held) recycle(b, std::move(*b.held));
      b.held = std::move(m);
    } else {
      recycle(b, std::move(m));
    }
  }
  b.queue.clear();
  if (b.held && b.held->round < round - o.max_staleness) {
    recycle(b, std::move(*b.held));
    b.held.reset();
  }
}

std::vector<int> Mailboxes::collect_order(std::span<const int> from) const {
  std::vector<int> peers(from.begin(), from.end());
  std::sort(peers.begin(), peers.end());
  GOSSIP_CHECK_MSG(std::adjacent_find(peers.begin(), peers.end()) == peers.end(),
                   "collect: a peer is listed twice");
  for (int p : peers)
    GOSSIP_CHECK_MSG(is_neighbour(p), "collect: peer ", p, " is not a neighbour of ", rank_);
  return peers;
}

// Not waited for: a peer the caller says not to (suspected or dead), a link that is down or
// gone, and (sync) a peer that has already sent a later round, so this one will not come.
// A peer silent for options.silent_after (no frame at all, heartbeats included) is not
// waited for: it is stopped, or cut off, not slow.
bool Mailboxes::waited(int p, const CollectOptions& options) const {
  return std::find(options.no_wait.begin(), options.no_wait.end(), p) == options.no_wait.end() &&
         !silent(box(p), options.silent_after);
}

void Mailboxes::wait_messages(std::unique_lock<std::mutex>& lk, const std::vector<int>& peers,
                              std::int64_t round, const CollectOptions& options,
                              std::chrono::steady_clock::time_point deadline) {
  auto all_ready = [&] {  // (a peer that left is gone: not waited for)
    return !failure_.empty() || std::all_of(peers.begin(), peers.end(), [&](int p) {
             const Box& b = box(p);
             // A link lost while this process was stopped is waited for during the grace
             // (it comes back), as at a start.
             return b.state == LinkState::kGone ||
                    (b.state == LinkState::kDown && !(io_stalled() || in_grace())) ||
                    !waited(p, options) || ready(b, round, options);
           });
  };
  if (options.silent_after.count() > 0) {
    // Silence grows without anything arriving to wake us: look again every slice.
    constexpr auto kSlice = std::chrono::milliseconds(50);
    while (!all_ready() && std::chrono::steady_clock::now() < deadline)
      cv_.wait_until(lk, std::min(deadline, std::chrono::steady_clock::now() + kSlice), all_ready);
  } else {
    cv_.wait_until(lk, deadline, all_ready);
  }
}

void Mailboxes::wait_sends(std::unique_lock<std::mutex>& lk) {
  // The caller may reuse its published buffer once we return: wait for those sends (each one
  // is bounded by the per-write deadline on the I/O thread), after letting go of the ones held
  // for a neighbour that is a round behind.
  // A frame may come under the gate after the hook ran (the neighbour's first ready frame
  // arriving while it was queued), so the hook runs again every slice while sends are pending.
  const auto sent = [&] { return pending_sends_ == 0 || !failure_.empty(); };
  if (!before_send_wait_) cv_.wait(lk, sent);
  while (!sent()) {
    lk.unlock();
    before_send_wait_();
    lk.lock();
    cv_.wait_for(lk, std::chrono::milliseconds(50), sent);
  }
}

std::vector<Inbox> Mailboxes::take_messages(const std::vector<int>& peers, std::int64_t round,
                                            const CollectOptions& options,
                                            std::vector<std::string>& missed) {
  std::vector<Inbox> out;
  excused_.clear();
  for (int p : peers) {
    Box& b = box(p);
    const bool is_ahead = options.mode == CollectMode::kSync && ahead(b, round);
    take(b, round, options);
    if (b.held) {
      out.push_back(Inbox{p, b.held->round, b.held->params, b.held->weight, b.held->packet,
                            b.held->finite});
    } else if (is_ahead || b.left) {
      excused_.push_back(p);
    } else if (b.state != LinkState::kGone && b.state != LinkState::kDown && waited(p, options)) {
      missed.push_back(cat("net[", rank_, "]: round ", round, ": nothing from peer ", p,
                           " by the deadline (", options.deadline.count(), " ms, link ",
                           link_state_name(b.state), ")"));
    }
  }
  return out;
}

std::vector<Inbox> Mailboxes::collect(std::int64_t round, std::span<const int> from,
                                      const CollectOptions& options) {
  const std::vector<int> peers = collect_order(from);

  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  std::unique_lock lk(mu_);
  wait_messages(lk, peers, round, options, deadline);
  wait_sends(lk);
  if (!failure_.empty()) {
    lk.unlock();
    check_healthy();
  }

  std::vector<std::string> missed;
  std::vector<Inbox> out = take_messages(peers, round, options, missed);
  lk.unlock();
  for (const auto& m : missed) log_(m);
  return out;
}

std::vector<int> Mailboxes::peers_in(LinkState state) const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (int p : neighbours_)
    if (box(p).state == state) out.push_back(p);
  return out;
}

void Mailboxes::set_shared_memory(int peer, bool yes) {
  std::lock_guard lk(mu_);
  box(peer).shared_memory = yes;
}

std::vector<int> Mailboxes::shared_memory_peers() const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (int p : neighbours_)
    if (box(p).state == LinkState::kUp && box(p).shared_memory) out.push_back(p);
  return out;
}

std::vector<int> Mailboxes::dead_peers() const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (int p : neighbours_)
    if (box(p).state == LinkState::kDown || box(p).state == LinkState::kGone) out.push_back(p);
  return out;
}

}  // namespace gossip::net
