// launcher/peer_events.cpp: what `gossip run` does with its peers' event lines — from their
// pipes as they print them, from the events files of peers started again outside the launcher,
// and, on resume, the evaluations the last launcher had not merged — and the exec: run's hand-out
// of the average model once every peer has finished.
#include "src/launcher/network.hpp"

namespace gossip::launch_parts {
namespace {

/// What the launcher's terminal says of a peer's event about a neighbour that lies (nullptr:
/// not such an event); events.jsonl and summary.json have the details.
const char* byzantine_note(MemberEventKind event) {
  switch (event) {
    case MemberEventKind::kByzantineSuspect: return "byzantine_suspect: suspects of lying";
    case MemberEventKind::kByzantineCleared: return "byzantine_cleared: no longer suspects";
    case MemberEventKind::kByzantineCut: return "byzantine_cut: no longer mixes with";
    case MemberEventKind::kRefusedParams:
      return "refused_params: left out NaN or Inf parameters of";
    default: return nullptr;
  }
}

}  // namespace

void Network::peer_gone(int r, const std::string& why) {
  record_.peer_failed(r, why);
  if (dashboard_) dashboard_->on_exit(r, why, now_s());
}

/// On resume: the evaluations up to the resume round that the peers saved (events.txt) but this
/// launcher had not merged when it was stopped (Ctrl-C, a crash) are merged now, so that
/// DIR/metrics.csv has every evaluation; a round some peer's file lacks is named and left out.
void Network::recover_unmerged() {
  const std::int64_t merged = record_.merged_round();
  for (int r = 0; r < n_; ++r) {
    std::ifstream in(cat(opt_.out_dir, "/peers/", r, "/events.txt"));
    for (std::string line; std::getline(in, line);) {
      const auto e = parse_event(line);
      if (!e) continue;
      if (const auto* ev = std::get_if<EvalEvent>(&*e);
          ev && ev->round > merged && ev->round <= resume_round_)
        record_.handle(r, *e);
    }
  }
  merge_ready_rounds();
  for (std::int64_t round : record_.drop_pending_through(resume_round_))
    progress_.note(cat("round ", round, ": not every peer's evaluation or snapshot is left, so "
                       "that round is missing from metrics.csv (each peer's own file has it)"));
}

void Network::handle_event(int r, const PeerEvent& e) {
  if (const auto* a = std::get_if<AlertEvent>(&e)) progress_.note(cat("peer ", r, ": ", a->message));
  if (const auto* m = std::get_if<MemberEvent>(&e); m && m->event == MemberEventKind::kIdentityConflict)
    progress_.note(cat("peer ", r, ": identity_conflict: a second connection presented the "
                       "identity of peer ", m->subject, " while its link was live; refused"));
  if (const auto* m = std::get_if<MemberEvent>(&e))
    if (const char* what = byzantine_note(m->event))
      progress_.note(cat("peer ", r, " round ", m->round, ": ", what, " peer ", m->subject));
  if (const auto* l = std::get_if<LinkEvent>(&e)) {
    // Each link's path is in events.jsonl and summary.json, not on the terminal.
    if (l->change == LinkChange::kReachability) {
      progress_.note(cat("peer ", r, ": reachability ", l->reason));
    } else if (l->change != LinkChange::kPath) {
      progress_.note(cat("peer ", r, ": link to peer ", l->neighbour, " ",
                         link_change_name(l->change),
                         l->reason.empty() ? std::string() : cat(" (", l->reason, ")")));
    }
  }
  if (const auto* ev = std::get_if<EvalEvent>(&e))
    peer_round_[r] = std::max(peer_round_[r], ev->round);
  if (const auto* ro = std::get_if<RoundEvent>(&e))
    peer_round_[r] = std::max(peer_round_[r], ro->round);
  if (std::holds_alternative<RoundEvent>(e) || std::holds_alternative<EvalEvent>(e)) heard_[r] = 1;
  if (const auto* d = std::get_if<DoneEvent>(&e)) peer_round_[r] = std::max(peer_round_[r], d->rounds);
  // A new identity started by hand (gossip peer --join): its events come through its file.
  if (const auto* m = std::get_if<MemberEvent>(&e);
      m && m->event == MemberEventKind::kAnnounceJoin && m->subject >= 0 && m->subject < n_ &&
      !children_[m->subject].running && outside_offset_[m->subject] < 0) {
    outside_offset_[m->subject] = 0;
    outside_back_[m->subject] = false;
    progress_.note(cat("round ", m->round, ": peer ", m->subject, " asked to join (gossip peer "
                       "--join); following it through ", opt_.out_dir, "/peers/", m->subject,
                       "/events.txt"));
  }
  if (std::holds_alternative<ReadyEvent>(e) && !topology_.epochs().empty() && initial_member(r)) {
    startup_s_ = std::max(startup_s_, std::chrono::duration<double>(Clock::now() - spawned_[r])
                                          .count());
    // The rounds' pace counts from when the last of the first members was ready (round 0), so
    // it is known at the first round event rather than a round event later.
    if (++initial_ready_ == static_cast<int>(topology_.members(0).size()) && pace_.empty())
      pace_.emplace_back(Clock::now(), 0);
  }
  record_.handle(r, e);
  if (dashboard_) dashboard_->on_event(r, e, now_s());
}

void Network::hand_out_average() {
  if (average_handed_) return;
  std::vector<int> waiting;
  for (const auto& c : children_) {
    if (!c.running) continue;
    if (!record_.has_finished(c.rank)) return;  // still training
    if (record_.awaits_average(c.rank)) waiting.push_back(c.rank);
  }
  if (record_.finished() == 0) return;  // nobody finished: no final parameters to average
  average_handed_ = true;
  record_.hand_out_average(waiting);
}

void Network::watch_outside(int r) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(cat(opt_.out_dir, "/peers/", r, "/events.txt"), ec);
  outside_offset_[r] = ec ? 0 : static_cast<std::int64_t>(size);
  outside_back_[r] = false;
}

bool Network::follow_outside() {
  bool running = false;
  for (int r = 0; r < n_; ++r) {
    if (outside_offset_[r] < 0 || children_[r].running) continue;
    std::ifstream in(cat(opt_.out_dir, "/peers/", r, "/events.txt"), std::ios::binary);
    if (in.seekg(outside_offset_[r])) {
      std::string line;
      // Whole lines only: a line still being written is read on the next pass.
      while (std::getline(in, line) && !in.eof()) {
        outside_offset_[r] += static_cast<std::int64_t>(line.size()) + 1;
        outside_heard_[r] = Clock::now();
        const auto e = parse_event(line);
        if (!e) continue;
        if (std::holds_alternative<ReadyEvent>(*e) && !outside_back_[r]) {
          outside_back_[r] = true;
          std::erase(scheduled_deaths_, r);
          record_.peer_back(r);
          progress_.note(cat("peer ", r, " is back (started outside gossip run); following it "
                             "through ", opt_.out_dir, "/peers/", r, "/events.txt"));
        }
        if (outside_back_[r]) handle_event(r, *e);
      }
    }
    if (outside_back_[r] && !record_.has_finished(r) &&
        Clock::now() - outside_heard_[r] < kOutsideQuiet)
      running = true;
  }
  return running;
}

}  // namespace gossip::launch_parts
