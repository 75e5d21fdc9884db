// monitor/membership.cpp: the membership view each peer keeps (SWIM's merge rules, driven by
// rounds) and MonitoredExchange, which keeps it up to date around any transport.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

namespace {

int severity(MemberState s) { return static_cast<int>(s); }

/// Whether `theirs` supersedes `ours`: a higher incarnation, or the same one in a graver state.
bool supersedes(const Member& theirs, const Member& ours) {
  if (theirs.incarnation != ours.incarnation) return theirs.incarnation > ours.incarnation;
  return severity(theirs.state) > severity(ours.state);
}

bool valid_state(MemberState s) {
  return s == MemberState::kAlive || s == MemberState::kSuspect || s == MemberState::kDead;
}

}  // namespace

Membership::Membership(int peers, int self, std::int64_t dead_after_rounds, double dead_after_s)
    : self_(self), dead_after_(std::max<std::int64_t>(1, dead_after_rounds)),
      dead_after_s_(dead_after_s), view_(static_cast<std::size_t>(peers)) {
  GOSSIP_CHECK_MSG(self >= 0 && self < peers, "membership: peer ", self, " is not in 0..",
                   peers - 1);
}

void Membership::note(int peer, MemberEventKind event, std::uint32_t incarnation,
                      std::int64_t round, double now) {
  if (event == MemberEventKind::kSuspect || event == MemberEventKind::kAlive) {
    // A token bucket per peer: a flood of claims (or a flapping link) cannot grow the log
    // without bound. Deaths and rejoins pass: each one takes a suspicion timer.
    Tokens& t = event_tokens_[peer];
    t.tokens = std::min(kMemberEventBurst, t.tokens + std::max(0.0, now - t.refill));
    t.refill = now;
    if (t.tokens < 1) {
      ++suppressed_;
      return;
    }
    t.tokens -= 1;
  }
  changes_.push_back(MemberChange{peer, event, incarnation, round});
}

void Membership::set(int peer, Member m, std::int64_t round, double now) {
  const Member old = view_[peer];
  view_[peer] = m;
  ++version_;
  not_alive_ += (m.state != MemberState::kAlive) - (old.state != MemberState::kAlive);
  if (m.state == MemberState::kAlive && m.incarnation > 0) {
    std::uint32_t& a = announced_[peer];
    a = std::max(a, m.incarnation);
  }
  // A suspicion that only moves to a later incarnation keeps its clock.
  if (m.state != MemberState::kSuspect) suspicions_.erase(peer);
  else if (old.state != MemberState::kSuspect) suspicions_[peer] = Suspicion{round, now};
  if (old.state == MemberState::kDead && m.state != MemberState::kDead)
    note(peer, MemberEventKind::kRejoin, m.incarnation, round, now);
  if (old.state == MemberState::kSuspect && m.state == MemberState::kAlive)
    note(peer, MemberEventKind::kAlive, m.incarnation, round, now);
  if (m.state == MemberState::kSuspect && old.state != MemberState::kSuspect)
    note(peer, MemberEventKind::kSuspect, m.incarnation, round, now);
  if (m.state == MemberState::kDead && old.state != MemberState::kDead)
    note(peer, MemberEventKind::kDead, m.incarnation, round, now);
}

void Membership::missed(int peer, std::int64_t round, double now) {
  if (peer == self_ || peer < 0 || peer >= static_cast<int>(view_.size())) return;
  if (view_[peer].state != MemberState::kAlive) return;
  set(peer, Member{view_[peer].incarnation, MemberState::kSuspect}, round, now);
}

void Membership::merge_self(const Member& theirs, std::int64_t round, double now) {
  Member& me = view_[self_];
  // Nobody may hold us suspected or dead at our incarnation or above: refute past it. A claim
  // far above ours (more than a restart can explain) moves us only kMaxIncarnationStep, so that
  // no claim can push us to where we could never refute again.
  const std::uint64_t ceiling = std::uint64_t{me.incarnation} + kMaxIncarnationStep;
  const auto bounded = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(theirs.incarnation, ceiling));
  if (theirs.state != MemberState::kAlive && theirs.incarnation >= me.incarnation) {
    if (theirs.incarnation > ceiling) ++inflated_;
    if (bounded == std::numeric_limits<std::uint32_t>::max()) return;  // cannot go past it
    const MemberEventKind event =
        theirs.state == MemberState::kDead ? MemberEventKind::kRejoin : MemberEventKind::kAlive;
    me = Member{bounded + 1, MemberState::kAlive};
    ++version_;
    note(self_, event, me.incarnation, round, now);
  } else if (theirs.state == MemberState::kAlive && theirs.incarnation > me.incarnation) {
    if (theirs.incarnation > ceiling) ++inflated_;
    me.incarnation = bounded;  // our own earlier life's number (we restarted)
    ++version_;
  }
}

std::optional<std::vector<int>> Membership::differing_blocks(const PeerView& v) const {
  // Views mostly repeat what this peer believes: blocks whose bytes equal ours are skipped (a
  // byte-equal block holds equal, valid entries; one that differs only in padding is merely
  // compared entry by entry), which keeps merging 10,000-peer views cheap.
  const auto n = static_cast<int>(view_.size());
  std::vector<int> differ;  // first entry of each block that is not byte-equal to ours
  for (int b = 0; b < n; b += kMergeBlock) {
    const int len = std::min(kMergeBlock, n - b);
    if (std::memcmp(&v.members[b], &view_[b], sizeof(Member) * len) == 0) continue;
    differ.push_back(b);
    for (int q = b; q < b + len; ++q)
      if (!valid_state(v.members[q].state)) return std::nullopt;
  }
  return differ;
}

void Membership::merge(const PeerView& v, std::int64_t round, double now,
                       const std::vector<int>* direct) {
  if (v.members.size() != view_.size()) {
    ++ignored_;
    return;
  }
  const auto n = static_cast<int>(view_.size());
  const std::optional<std::vector<int>> differ = differing_blocks(v);
  if (!differ) {  // one bad entry: the whole view is ignored
    ++ignored_;
    return;
  }
  const bool adopt = std::exchange(adopt_next_, false);
  adopted_ += adopt;
  heard_view_ = true;
  for (int b : *differ) {
    for (int q = b; q < std::min(b + kMergeBlock, n); ++q) {
      Member theirs = v.members[q];
      if (q == self_) {
        merge_self(theirs, round, now);
        continue;
      }
      if (theirs == view_[q]) continue;  // the common case: nothing to learn (and nothing capped)
      // Only q raises q's incarnation: an entry may carry q's refutation one past what we know
      // (alive, or already suspected again there: without the latter, a peer that missed the
      // refutation would hold q at its old death, and q, which never hears of a suspicion at
      // its new incarnation from it, would never refute again); an alive claim further ahead is
      // lowered to that, anything else further ahead believed at most at the incarnation q is
      // known to have had.
      const auto a = announced_.find(q);
      const std::uint32_t known =
          std::max(a == announced_.end() ? 0u : a->second, view_[q].incarnation);
      const bool next = known < UINT32_MAX && theirs.incarnation == known + 1;
      const std::uint32_t cap =
          known < UINT32_MAX && (theirs.state == MemberState::kAlive || next) ? known + 1 : known;
      if (theirs.incarnation > cap && !adopt) {
        ++inflated_;
        theirs.incarnation = cap;
      }
      if (!supersedes(theirs, view_[q])) continue;
      if (theirs.state != MemberState::kAlive) {
        // Hearsay: a neighbour we hear ourselves right now is alive, whatever others say.
        if (direct && std::find(direct->begin(), direct->end(), q) != direct->end()) {
          ++vetoed_;
          continue;
        }
        // A death we did not see is a suspicion here, until our own timer confirms it.
        theirs.state = MemberState::kSuspect;
        if (view_[q].state == MemberState::kSuspect && theirs.incarnation == view_[q].incarnation)
          continue;
      }
      set(q, theirs, round, now);
    }
  }
}

void Membership::tick(std::int64_t round, double now, const std::vector<int>* hold) {
  std::vector<int> deaths;
  for (const auto& [q, since] : suspicions_) {  // ascending
    if (round - since.round < dead_after_ || now - since.since < dead_after_s_) continue;
    if (hold && std::find(hold->begin(), hold->end(), q) != hold->end() &&
        now - since.since < kMaxHeldSuspicion) {
      ++held_;
      continue;
    }
    deaths.push_back(q);
  }
  for (int q : deaths) set(q, Member{view_[q].incarnation, MemberState::kDead}, round, now);
}

std::vector<MemberChange> Membership::take_changes() { return std::exchange(changes_, {}); }

std::vector<int> Membership::dead() const {
  std::vector<int> out;
  if (not_alive_ == 0) return out;
  for (int q = 0; q < static_cast<int>(view_.size()); ++q)
    if (view_[q].state == MemberState::kDead) out.push_back(q);
  return out;
}

void Membership::appeared() {
  if (view_[self_].incarnation > 0) return;
  view_[self_].incarnation = 1;
  ++version_;
}

std::vector<int> Membership::unheard() const {
  std::vector<int> out;
  // Before any view came (a peer that hears nobody), incarnation 0 says only that this peer
  // knows nothing; a restarted view took its donor's word, which may be as fresh as its own.
  if (!heard_view_ || restarted_) return out;
  for (int q : dead())
    if (view_[q].incarnation == 0) out.push_back(q);
  return out;
}

std::vector<int> Membership::suspected() const {
  std::vector<int> out;
  for (const auto& [q, since] : suspicions_) out.push_back(q);  // every suspect, ascending
  return out;
}

MonitoredExchange::MonitoredExchange(Exchange& inner, MembershipChannel& channel,
                                     const MonitorConfig& config, std::function<double()> clock)
    : ForwardingExchange(inner), channel_(&channel),
      membership_(inner.size(), inner.rank(), config.dead_after_rounds, config.dead_after_s),
      clock_(std::move(clock)), dead_after_rounds_(config.dead_after_rounds),
      dead_after_s_(config.dead_after_s), silence_s_(config.suspect_after_s),
      prober_(inner.size(), inner.rank()), deadline_floor_s_(config.round_timeout_floor_s) {
  membership_.appeared();
  if (!clock_) {
    const auto t0 = std::chrono::steady_clock::now();
    clock_ = [t0] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
  }
}

void MonitoredExchange::restart() {
  membership_ = Membership(inner_->size(), inner_->rank(), dead_after_rounds_, dead_after_s_);
  membership_.adopt_next_view();
  membership_.appeared();
  last_sent_ = kNeverSent;
  talked_to_.clear();
  prober_ = Prober(inner_->size(), inner_->rank());
  heard_round_.clear();
  message_round_.clear();
  round_seconds_.clear();
  last_collect_ = -1.0;
  cut_.clear();
}

void MonitoredExchange::before_publish(std::int64_t tag, std::span<const int> to) {
  const std::int64_t round = tag / tags_per_round_;
  // The view goes out when it changed, and every kViewRefreshRounds rounds in any case (so a
  // peer that was away, or restarted, learns what the others believe of it).
  if (membership_.version() != last_sent_ ||
      (round % kViewRefreshRounds == 0 && tag % tags_per_round_ == 0) ||
      prober_.has_outgoing()) {
    channel_->send_view(tag, membership_.view(), to, prober_.take_outgoing());
    last_sent_ = membership_.version();
  }
}

std::optional<std::vector<int>> MonitoredExchange::heard_now() const {
  if (silence_s_ <= 0) return std::nullopt;
  return channel_->heard_within(silence_s_);
}

void MonitoredExchange::talked_to(std::span<const int> peers) {
  for (int p : peers)
    if (auto at = std::lower_bound(talked_to_.begin(), talked_to_.end(), p);
        at == talked_to_.end() || *at != p)
      talked_to_.insert(at, p);
}

void MonitoredExchange::publish(std::int64_t round, std::span<const float> params, double weight,
                                std::span<const int> to) {
  talked_to(to);
  before_publish(round, to);
  inner_->publish(round, params, weight, to);
}

void MonitoredExchange::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                                       std::span<const int> to) {
  talked_to(to);
  before_publish(round, to);
  inner_->publish_packet(round, packet, to);
}

bool MonitoredExchange::hears(int peer, const std::optional<std::vector<int>>& heard) const {
  if (heard && std::binary_search(heard->begin(), heard->end(), peer)) return true;
  // Its round or its view came in this round or the one before (all the simulator knows).
  const auto it = heard_round_.find(peer);
  return it != heard_round_.end() && it->second >= round_ - 1;
}

void MonitoredExchange::merge_views(std::int64_t round) { merge_views(round, heard_now()); }

void MonitoredExchange::merge_views(std::int64_t round,
                                    const std::optional<std::vector<int>>& direct) {
  const double now = clock_();
  std::vector<PeerView> views = channel_->take_views();
  for (const PeerView& v : views)
    if (v.peer >= 0 && v.peer < size()) heard_round_[v.peer] = round;
  for (const PeerView& v : views) {
    membership_.merge(v, round, now, direct ? &*direct : nullptr);
    prober_.receive(v.probes, now, [&](int q) {
      return std::binary_search(talked_to_.begin(), talked_to_.end(), q) &&
             hears(q, direct);
    });
  }
}

std::chrono::milliseconds MonitoredExchange::round_deadline(
    std::chrono::milliseconds ceiling) const {
  if (deadline_floor_s_ <= 0 || round_seconds_.size() < kDeadlineWarmup) return ceiling;
  std::vector<double> sorted(round_seconds_.begin(), round_seconds_.end());
  const std::size_t at = (sorted.size() * 95) / 100;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(at), sorted.end());
  const double seconds = std::max(deadline_floor_s_, kDeadlineFactor * sorted[at]);
  const auto ms = seconds_to_ms(seconds);
  return std::min(ceiling, ms);
}

CollectOptions MonitoredExchange::monitored_options(const CollectOptions& options) const {
  CollectOptions o = options;
  for (int q : membership_.suspected()) o.no_wait.push_back(q);
  for (int q : membership_.dead()) o.no_wait.push_back(q);
  if (silence_s_ > 0)
    o.silent_after = seconds_to_ms(silence_s_);
  // The deadline follows the measured round time only where heartbeats tell a slow neighbour
  // (alive, left out for now) from a stopped one.
  if (heartbeats()) o.deadline = round_deadline(options.deadline);
  return o;
}

void MonitoredExchange::suspect_silent(std::int64_t round,
                                       const std::optional<std::vector<int>>& direct,
                                       const std::vector<int>& ahead, double now) {
  // Silent neighbours (no heartbeat for silence_s_, or the link closed) are suspected at once,
  // in- or out-neighbours alike, without waiting out a round deadline.
  if (direct)
    for (int p : talked_to_)
      if (!std::binary_search(direct->begin(), direct->end(), p) &&
          std::find(ahead.begin(), ahead.end(), p) == ahead.end())
        membership_.missed(p, round, now);
}

void MonitoredExchange::suspect_missed(std::int64_t round, std::span<const int> from,
                                       const std::vector<Inbox>& got,
                                       const std::vector<int>& no_wait,
                                       const std::vector<int>& ahead, double now) {
  for (int p : from) {
    const bool heard =
        std::any_of(got.begin(), got.end(), [&](const Inbox& m) { return m.peer == p; });
    // Silent: waited for, and nothing came (neither this round nor a later one). A peer not
    // waited for (suspected or dead when the round began) is judged by its views, not this.
    const bool waited = std::find(no_wait.begin(), no_wait.end(), p) == no_wait.end();
    if (!heard && waited && std::find(ahead.begin(), ahead.end(), p) == ahead.end())
      membership_.missed(p, round, now);
  }
}

void MonitoredExchange::probe_and_tick(std::int64_t round, double now,
                                       const std::optional<std::vector<int>>& direct) {
  // A neighbour we suspect on our own evidence is probed through the others; the ones we hear
  // directly (heartbeats without rounds: slow, not dead) or that an ack vouched for lately are
  // not declared dead.
  const double vouch_window = std::max(1.0, 2 * dead_after_s_);
  std::vector<int> hold;
  for (int p : talked_to_) {
    const bool heard_directly = hears(p, direct);
    if (membership_.view()[p].state == MemberState::kSuspect && !heard_directly)
      prober_.ask(p, now, std::max(0.25, dead_after_s_ / 2));
    if (heard_directly) hold.push_back(p);
  }
  for (const auto& [p, at] : prober_.vouched())
    if (now - at <= vouch_window) hold.push_back(p);
  membership_.tick(round, now, &hold);
}

std::vector<Inbox> MonitoredExchange::collect(std::int64_t tag, std::span<const int> from,
                                              const CollectOptions& options) {
  const std::int64_t round = tag / tags_per_round_;
  talked_to(from);
  const CollectOptions o = monitored_options(options);
  last_deadline_ = o.deadline;
  round_ = round;
  const auto waited_from = std::chrono::steady_clock::now();
  std::vector<Inbox> got = inner_->collect(tag, from, o);
  // A collect that outlasted its deadline by far more than the transport's wait slices was
  // itself stopped (SIGSTOP, a frozen VM): what it missed meanwhile says nothing about the
  // neighbours (Lifeguard's local health), so nobody is suspected for this round.
  const bool own_stall =
      heartbeats() && std::chrono::steady_clock::now() - waited_from >
                          o.deadline + std::chrono::milliseconds(kOwnStallSlackMs);
  // Whom the transport hears now (once a round: every rule below reads the same answer).
  const auto direct = heard_now();
  for (const Inbox& m : got) {
    heard_round_[m.peer] = round;
    std::int64_t& latest = message_round_.try_emplace(m.peer, -1).first->second;
    latest = std::max(latest, m.round / tags_per_round_);
  }
  merge_views(round, direct);
  const std::vector<int> ahead = inner_->excused_peers();
  const double now = clock_();
  if (last_collect_ >= 0) {
    round_seconds_.push_back(now - last_collect_);
    if (round_seconds_.size() > kDeadlineWindow) round_seconds_.pop_front();
  }
  last_collect_ = now;
  suspect_silent(round, direct, ahead, now);
  if (!own_stall) suspect_missed(round, from, got, o.no_wait, ahead, now);
  probe_and_tick(round, now, direct);
  // A cut neighbour's message counted above as a sign of life; it is not mixed.
  std::erase_if(got, [&](const Inbox& m) {
    return std::binary_search(cut_.begin(), cut_.end(), m.peer);
  });
  return got;
}

std::optional<Inbox> MonitoredExchange::newest(std::span<const int> from) {
  if (cut_.empty()) return inner_->newest(from);
  std::vector<int> kept;
  for (int p : from)
    if (!std::binary_search(cut_.begin(), cut_.end(), p)) kept.push_back(p);
  return inner_->newest(kept);
}

std::int64_t MonitoredExchange::last_message_round(int peer) const {
  const auto it = message_round_.find(peer);
  return it == message_round_.end() ? -1 : it->second;
}

void MonitoredExchange::forget(std::span<const int> peers) {
  for (int p : peers) std::erase(talked_to_, p);
}

void MonitoredExchange::cut(int peer) {
  const auto at = std::lower_bound(cut_.begin(), cut_.end(), peer);
  if (at == cut_.end() || *at != peer) cut_.insert(at, peer);
}

}  // namespace gossip
