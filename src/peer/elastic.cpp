// peer/elastic.cpp: a peer's part in an elastic run (elastic.hpp): joining, hand-overs and the
// member timeline derived from the announcements.
#include "src/peer/elastic.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <thread>

#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/progress.hpp"

namespace gossip::peer_parts {

Elastic::Elastic(const RunConfig& config, Topology& topology, const PeerOptions& opt,
                 Events& events, Clock::time_point t0)
    : config_(config), topology_(topology), opt_(opt), events_(events), t0_(t0),
      window_(opt.join_contacts.empty()
                  ? member_window(topology, opt.rank)
                  : MemberWindow{std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::max(), 0}),
      neighbours_(opt.join_contacts.empty() ? all_neighbours(topology, opt.rank)
                                            : std::vector<int>{}),
      scheduled_(scheduled_changes(config.faults)) {}

void Elastic::forget_left(std::int64_t round, MonitoredExchange& exchange) const {
  const auto& epochs = topology_.epochs();
  if (epochs.empty()) return;
  const std::size_t e = topology_.epoch_index(round);
  if (e == 0 || epochs[e].from != round) return;
  std::vector<int> left;
  std::set_difference(epochs[e - 1].members.begin(), epochs[e - 1].members.end(),
                      epochs[e].members.begin(), epochs[e].members.end(),
                      std::back_inserter(left));
  exchange.forget(left);
}

/// An elastic run's joiner (join_model): its first parameters are the average of its donors'
/// (join_donors: its in-neighbours in its first epoch that were members before) after the
/// round two before it joins (sent a round ahead, so that its first round waits for nothing
/// more than any other round does), each donor's message carrying its optimizer steps (the
/// schedule's position) as the weight; momentum starts at zero. As the simulator does it, bit
/// for bit.
std::int64_t Elastic::receive_handover(Transport& transport, Trainer* trainer,
                                     std::vector<float>& host) {
  GOSSIP_CHECK_MSG(trainer, "a joiner of an elastic run trains gossip's own model");
  const std::int64_t r = window_.from;
  donors_ = join_donors(topology_, window_.first_epoch, opt_.rank);
  CollectOptions o;
  o.deadline = handover_timeout(config_.net, config_.monitor);
  transport.waiting_for(r - 2);  // the donors' frames of that round are not held for it
  const std::vector<Inbox> got = transport.collect(r - 2, donors_, o);
  transport.waiting_for(r);  // and now for its first round: its neighbours' frames of it flow
  // A donor's message is taken whole or not at all: every value finite, the steps a count.
  const auto usable = [&](const Inbox& m) {
    return m.params.size() == host.size() && std::isfinite(m.weight) && m.weight >= 0 &&
           (m.checked_finite || std::all_of(m.params.begin(), m.params.end(),
                                            [](float v) { return std::isfinite(v); }));
  };
  std::vector<int> came;
  for (const Inbox& m : got)
    if (usable(m)) came.push_back(m.peer);
  if (came.size() != donors_.size())
    log_line(cat("peer ", opt_.rank, ": WARNING: of its donors ", format_peers(donors_),
                 " only ", came.empty() ? std::string("none") : format_peers(came),
                 " handed over their parameters by the deadline"));
  if (came.empty()) {
    log_line(cat("peer ", opt_.rank, ": joins at round ", r,
                 " with its own initial parameters (no donor's came)"));
    donors_.clear();
    mixing_s_ = since(t0_);
    return r;
  }
  ModelAverage average(host.size());
  double steps = -1.0;
  for (const Inbox& m : got) {
    if (!usable(m)) continue;
    if (steps < 0) steps = m.weight;  // the first (lowest) donor's place in the schedule
    average.add(m.params);
  }
  Trainer::State s = trainer->state();
  average.write(s.params);
  std::fill(s.velocity.begin(), s.velocity.end(), 0.0f);
  s.steps = static_cast<std::int64_t>(steps);
  trainer->restore(s);
  trainer->download_params(host);
  donors_ = came;
  mixing_s_ = since(t0_);
  log_line(cat("peer ", opt_.rank, ": joined at round ", r, " (announced at round ",
               topology_.epochs()[window_.first_epoch].announced, ") from the average of peers ",
               format_peers(donors_), ", ", fixed(mixing_s_ - ready_s_, 3),
               " s after its data and model were ready"));
  return r;
}

/// gossip peer --join: asks its contacts to announce its join, and waits (net.connect_timeout_s)
/// until the announcements it receives make it a member; then dials its future neighbours.
void Elastic::await_join(Transport& transport) {
  const std::vector<Announcement> request{{opt_.rank, ChangeKind::kJoinRequest, 0}};
  transport.announce(request, opt_.join_contacts);
  const auto give_up = Clock::now() + seconds_to_ms(config_.net.connect_timeout_s);
  for (;;) {
    bool changed = false;
    for (const Announcement& a : transport.take_announcements())
      if (a.kind != ChangeKind::kJoinRequest) changed |= gossip::merge_announcement(known_, a);
    if (changed) {
      topology_.set_epochs(elastic_timeline(topology_, scheduled_, known_).epochs());
      try {
        window_ = member_window(topology_, opt_.rank);
        break;
      } catch (const InputError&) {
        // not (yet) a member: other changes came first
      }
    }
    if (Clock::now() > give_up)
      throw RuntimeError(cat("--join: no member announced the join of rank ", opt_.rank,
                             " within ", config_.net.connect_timeout_s,
                             " s (net.connect_timeout_s); its contacts ",
                             format_peers(opt_.join_contacts), " were connected"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  neighbours_ = all_neighbours(topology_, opt_.rank);
  transport.expect(neighbours_);
  const auto& e = topology_.epochs()[window_.first_epoch];
  log_line(cat("peer ", opt_.rank, ": the members announced its join at round ", e.announced,
               "; it joins at round ", window_.from, " (", e.members.size(), " members then)"));
}

/// After round `done` - 1: the joiners of an epoch starting at `done` + 1 whose donor this
/// peer is get its parameters (and its optimizer steps, as the weight), once their link is up,
/// tagged `done` - 1 (their round two before the change). A donor that heard of a join (one
/// announced while the run goes) only after that round hands over at once, the same tag.
void Elastic::hand_over(std::int64_t done, const Algorithm& algorithm, std::size_t num_params,
                        double steps) {
  const auto& epochs = topology_.epochs();
  if (epochs.empty()) return;
  for (std::int64_t from : {done + 1, done}) {
    const std::size_t e = topology_.epoch_index(from);
    if (e == 0 || epochs[e].from != from || from >= window_.until || handed_.count(from)) continue;
    handed_.insert(from);
    hand_over(e, from - 2, done, algorithm, num_params, steps);
  }
}

void Elastic::hand_over(std::size_t e, std::int64_t tag, std::int64_t round,
                        const Algorithm& algorithm, std::size_t num_params, double steps) {
  const auto& epochs = topology_.epochs();
  std::vector<int> to;
  for (int p : epochs[e].members)
    if (!std::binary_search(epochs[e - 1].members.begin(), epochs[e - 1].members.end(), p)) {
      const std::vector<int> d = join_donors(topology_, e, p);
      if (std::binary_search(d.begin(), d.end(), opt_.rank)) to.push_back(p);
    }
  if (to.empty()) return;
  Handover& h = handovers_.emplace_back();
  h.tag = tag;
  h.join = epochs[e].from;
  if (tag == round - 2 && previous_done_ == round - 1 && previous_.size() == num_params) {
    h.params = previous_;  // heard a round late: the parameters of the round the tag names
    h.steps = previous_steps_;
  } else {
    h.params.resize(num_params);
    algorithm.model_params(h.params);
    h.steps = steps;
  }
  h.waiting = std::move(to);
  h.last_sent = round;
  h.made = Clock::now();
}

void Elastic::remember(std::int64_t done, const Algorithm& algorithm, std::size_t num_params,
                       double steps) {
  const auto& epochs = topology_.epochs();
  if (epochs.empty() || epochs.back().from <= done) return;  // no join or leave to come
  previous_.resize(num_params);
  algorithm.model_params(previous_);
  previous_steps_ = steps;
  previous_done_ = done;
}

/// After every round: each handover goes to the joiners whose link is up now (a joiner that
/// is late to connect stalls its donors no earlier than its first round, where they wait for
/// it anyway), one not connected connect_timeout_s after the handover was taken gets none
/// from this peer; the buffers whose sends are surely done are let go.
void Elastic::send_handovers(std::int64_t round, Transport& transport, Exchange& exchange) {
  if (handovers_.empty()) return;
  for (Handover& h : handovers_) {
    if (h.waiting.empty()) continue;
    // The joiners' first round is next: this peer waits for them in it anyway (for their
    // messages, which come after their parameters), so it waits for their links here.
    if (round >= h.join) {
      const auto left = std::chrono::duration<double>(config_.net.connect_timeout_s) -
                        (Clock::now() - h.made);
      if (left.count() > 0)
        transport.await_peers(h.waiting,
                               std::chrono::duration_cast<std::chrono::milliseconds>(left));
    }
    std::vector<int> up = transport.connected_peers();
    std::sort(up.begin(), up.end());
    std::vector<int> now, still;
    for (int p : h.waiting)
      (std::binary_search(up.begin(), up.end(), p) ? now : still).push_back(p);
    if (!now.empty()) {
      exchange.publish(h.tag, h.params, h.steps, now);
      h.last_sent = round;
      log_line(cat("peer ", opt_.rank, ": handed its parameters (round ", h.tag, ") to joiner",
                   now.size() == 1 ? " " : "s ", format_peers(now), ", who join",
                   now.size() == 1 ? "s" : "", " at round ", h.join,
                   round > h.tag + 1 ? cat(" (connected ", round - h.tag - 1,
                                           round - h.tag - 1 == 1 ? " round" : " rounds",
                                           " late)")
                                     : std::string()));
    }
    if (!still.empty() && Clock::now() - h.made > std::chrono::duration<double>(
                                                      config_.net.connect_timeout_s)) {
      log_line(cat("peer ", opt_.rank, ": joiners ", format_peers(still), " not connected ",
                   config_.net.connect_timeout_s, " s after round ", h.tag,
                   "; they get no parameters from this peer"));
      still.clear();
    }
    h.waiting = std::move(still);
  }
  while (!handovers_.empty() && handovers_.front().waiting.empty() &&
         handovers_.front().last_sent < round - 2)
    handovers_.pop_front();
}

/// update's announcements that came: each merged into the known set (true when one changed
/// it); a new identity's join request becomes this peer's own announcement in `own`.
bool Elastic::take_heard(std::int64_t round, const std::vector<int>& members,
                         MembershipChannel& channel, std::vector<Announcement>& own) {
  bool changed = false;
  for (const Announcement& a : channel.take_announcements()) {
    if (a.kind != ChangeKind::kJoinRequest) {
      changed |= gossip::merge_announcement(known_, a);
      continue;
    }
    // A new identity asks to join: a member announces it at its round, unless it is or will
    // be a member already (another member announced it first).
    const auto& last = topology_.epochs().back().members;
    const bool known_join = std::any_of(known_.begin(), known_.end(), [&](const Announcement& k) {
      return k.rank == a.rank && k.kind == ChangeKind::kJoin;
    });
    if (round >= window_.from && round < window_.until && !known_join &&
        !std::binary_search(members.begin(), members.end(), a.rank) &&
        !std::binary_search(last.begin(), last.end(), a.rank))
      own.push_back(Announcement{a.rank, ChangeKind::kJoin, round});
  }
  return changed;
}

/// update's own announcements, onto `own`: the deaths its monitor confirmed, and its leave.
void Elastic::add_own(std::int64_t round, const std::vector<int>& members,
                      MonitoredExchange& exchange, std::vector<Announcement>& own) {
  for (int d : exchange.dead_peers())
    if (std::binary_search(members.begin(), members.end(), d) &&
        std::find(announced_dead_.begin(), announced_dead_.end(), d) == announced_dead_.end()) {
      announced_dead_.push_back(d);
      own.push_back(Announcement{
          d, ChangeKind::kDead,
          dead_announcement_round(round, exchange.last_message_round(d),
                                  config_.monitor.remove_dead_after_rounds)});
    }
  if (opt_.leave_at_round >= 0 && round >= opt_.leave_at_round) leave_requested_ = true;
  if (leave_requested_ && !leave_announced_) {
    leave_announced_ = true;
    own.push_back(Announcement{opt_.rank, ChangeKind::kLeave, round});
  }
}

/// Merges this peer's own announcements into the known set, each new one said as an event;
/// true when one changed it.
bool Elastic::merge_own(const std::vector<Announcement>& own) {
  bool changed = false;
  for (const Announcement& a : own) {
    if (!gossip::merge_announcement(known_, a)) continue;
    changed = true;
    // (A death's round is the one its removal counts from: dead_announcement_round.)
    events_.emit(MemberEvent{opt_.rank, a.round, since(t0_), announce_event(a.kind), a.rank, 0,
                            {}, {}, {}});
  }
  return changed;
}

/// The known set grew before round `round`: the graph derived again, what it changes for this
/// peer said, the neighbours it newly needs dialled, and the set passed on.
void Elastic::follow_change(std::int64_t round, Transport& transport,
                            MembershipChannel& channel) {
  const std::vector<int> before = neighbours_;
  const std::vector<int> last = topology_.members(std::max<std::int64_t>(0, round - 1));
  const Topology next = elastic_timeline(topology_, scheduled_, known_);
  topology_.set_epochs(next.epochs());
  // An announcement must arrive before the change it makes (membership_lead rounds after
  // it): members of a round already run that change mean it came too late.
  if (topology_.members(std::max<std::int64_t>(0, round - 1)) != last)
    log_line(cat("peer ", opt_.rank, ": WARNING: an announcement reached this peer after the "
                 "round it takes effect; its neighbours may disagree on the graph"));
  const MemberWindow w = window_;
  window_ = member_window(topology_, opt_.rank);
  if (window_.until != w.until && window_.until != std::numeric_limits<std::int64_t>::max())
    log_line(cat("peer ", opt_.rank, ": leaves the network at round ", window_.until,
                 " (announced at round ", round, ")"));
  if (leave_requested_ && window_.until == std::numeric_limits<std::int64_t>::max())
    log_line(cat("peer ", opt_.rank, ": cannot leave: it is the last member"));
  std::vector<int> added;
  neighbours_ = all_neighbours(topology_, opt_.rank);
  std::set_difference(neighbours_.begin(), neighbours_.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  if (!added.empty()) transport.expect(added);
  channel.announce(known_, transport.connected_peers());
}

/// An elastic run, before round `round`: the announcements that came, and this peer's own
/// (deaths its monitor confirmed, its leave); when the set grew, the graph is derived again
/// (elastic_timeline), the neighbours it newly needs are dialled, and the set is passed on.
void Elastic::update(std::int64_t round, Transport& transport, MonitoredExchange& exchange,
                     MembershipChannel& channel) {
  if (topology_.epochs().empty()) return;
  const std::vector<int> members = topology_.members(round);
  std::vector<Announcement> own;
  bool changed = take_heard(round, members, channel, own);
  add_own(round, members, exchange, own);
  if (merge_own(own)) changed = true;
  if (!changed) return;
  follow_change(round, transport, channel);
}


}  // namespace gossip::peer_parts
