// launcher/fault_schedule.cpp: what `gossip run` does at a fault's round (kill, restart, pause;
// cuts and attacks are the peers' own) and at an elastic run's membership changes (starting the
// joiners, noting the announcements).
#include "src/launcher/network.hpp"

namespace gossip::launch_parts {

void Network::start_joiners() {
  const auto& epochs = topology_.epochs();
  if (epochs.empty()) return;
  const auto now = Clock::now();
  const std::int64_t round = slowest_round();
  // The rounds' pace over about the last two seconds (evaluations included, as they will be
  // ahead): the first rounds, slower (links coming up, the first evaluation), soon drop out.
  if (round >= 1 && (pace_.empty() || pace_.back().second != round)) {
    pace_.emplace_back(now, round);
    while (pace_.size() > 2 && now - pace_[1].first > std::chrono::seconds(2)) pace_.pop_front();
  }
  for (std::size_t e = 1; e < epochs.size(); ++e) {
    if (epoch_started_[e]) continue;
    const std::int64_t total = record_.total_rounds();
    if (total > 0 && epochs[e].from >= total) {  // after the last round: nobody joins
      epoch_started_[e] = true;
      continue;
    }
    // Seconds to the change at the rounds' pace so far; started then, or at its announcement
    // at the latest.
    double span = 0.0, rounds = 0.0;
    if (pace_.size() >= 2) {
      span = std::chrono::duration<double>(pace_.back().first - pace_.front().first).count();
      rounds = static_cast<double>(pace_.back().second - pace_.front().second);
    }
    const double left = rounds > 0 && span > 0.25
                            ? static_cast<double>(epochs[e].from - round) * span / rounds
                            : std::numeric_limits<double>::infinity();
    // Twice the first peers' start, and half a second: a joiner starts while the others train,
    // on the same cores, and is slower to start than they were (1.2-1.6x measured on 2 cores
    // with 8 training), and it should be connected before its donors' hand-over.
    const double lead = 2.0 * std::max(startup_s_, 0.5) + 0.5;
    if (round < epochs[e].announced && left > lead) continue;
    epoch_started_[e] = true;
    std::vector<int> joiners;
    std::set_difference(epochs[e].members.begin(), epochs[e].members.end(),
                        epochs[e - 1].members.begin(), epochs[e - 1].members.end(),
                        std::back_inserter(joiners));
    for (int r : joiners) {
      const std::string dir = cat(opt_.out_dir, "/peers/", r);
      make_output_dir(dir);
      spawned_[r] = now;
      children_[r] = launcher::spawn_child(r, peer_argv(r, false), dir + "/peer.log");
    }
    if (!joiners.empty())
      progress_.note(cat("round ", round, ": starting peer", joiners.size() == 1 ? " " : "s ",
                         format_peers(joiners), ", which join", joiners.size() == 1 ? "s" : "",
                         " at round ", epochs[e].from, " (announced at round ",
                         epochs[e].announced, "; ",
                         std::isfinite(left) ? cat("about ", fixed(left, 1), " s ahead, ") : "",
                         "the first peers took ", fixed(startup_s_, 1), " s to start)"));
  }
}

void Network::note_membership(std::int64_t round) {
  const auto& epochs = topology_.epochs();
  for (std::size_t e = 1; e < epochs.size(); ++e) {
    if (epoch_done_[e] || round < epochs[e].announced) continue;
    const bool announced = !epoch_noted_[e];  // else: it takes effect now
    if (!announced && round < epochs[e].from) continue;
    (announced ? epoch_noted_ : epoch_done_)[e] = true;
    std::vector<int> joined, left;
    const auto& before = epochs[e - 1].members;
    const auto& now = epochs[e].members;
    std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                        std::back_inserter(joined));
    std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                        std::back_inserter(left));
    for (const auto& [action, taken, peers] :
         {std::tuple{"join", "joined", joined}, std::tuple{"leave", "left", left}}) {
      if (peers.empty()) continue;
      if (!announced) {  // as gossip sim says it: "joined", "left" at the round it took effect
        record_.log_fault(epochs[e].from, taken, peers, 0.0);
        note_live_graph(epochs[e].from);
        continue;
      }
      record_.log_fault(epochs[e].announced, action, peers, 0.0);
      progress_.note(cat("membership at round ", epochs[e].announced, ": peer",
                         peers.size() == 1 ? " " : "s ", format_peers(peers), " ", action,
                         peers.size() == 1 ? "s" : "", " from round ", epochs[e].from, " (",
                         now.size(), " members then)"));
    }
  }
}

/// Starts rank r's peer again (it died): it rejoins the running network (gossip peer --rejoin).
void Network::restart(int r) {
  const std::string dir = cat(opt_.out_dir, "/peers/", r);
  std::erase(scheduled_deaths_, r);
  record_.peer_back(r);
  if (dashboard_) dashboard_->on_back(r, now_s());
  outside_offset_[r] = -1;  // its events come through its pipe again
  const std::vector<std::string> argv = peer_argv(r, true);  // with the network's round
  peer_round_[r] = live_round(r);  // where it starts, not where it died
  heard_[r] = 0;                    // until its new process says where it is
  launcher::Child c = launcher::spawn_child(r, argv, dir + "/peer.log", true);
  c.max_rss_kb = std::max(c.max_rss_kb, children_[r].max_rss_kb);
  children_[r] = std::move(c);
}

/// The fault schedule: each fault acts once the network (its slowest live peer, as its round
/// events say) has completed the fault's round, a kill once its peers have (they stop
/// themselves there); paused peers are woken when their time is up.
void Network::carry_out_faults() {
  const auto now = Clock::now();
  for (const int r : scheduled_deaths_)  // a kill that has not taken yet is sent again
    if (children_[r].running && children_[r].leader < 0) kill(children_[r].pid, SIGKILL);
  wake_paused(now);
  const std::int64_t round = fault_round();
  std::int64_t waiting = std::numeric_limits<std::int64_t>::max();  // the next fault's round
  for (std::size_t i = 0; i < faults_->size(); ++i) {
    if (fault_done_[i]) continue;
    const Fault& f = (*faults_)[i];
    if (!fault_due(f, round)) {  // the later ones wait for it
      waiting = f.round;
      break;
    }
    fault_done_[i] = true;
    note_cut_ends(f.round);  // those due before it
    if (is_membership(f)) continue;  // start_joiners, note_membership
    if (f.action == FaultAction::kAttack) {  // carried out by the attackers' own Attack, round by round
      note_attack(f);
      continue;
    }
    std::vector<int> acted_on = act_on_peers(f, now);
    if (f.action == FaultAction::kCut) {  // carried out by the peers' own CutLinks, round by round
      for (const auto& [a, b] : f.links) acted_on.insert(acted_on.end(), {a, b});
      record_.log_fault(f.round, cat("cut until round ", f.to_round), acted_on, 0.0);
      progress_.note(cat("fault schedule at round ", f.round, ": links cut until round ",
                         f.to_round, " (the peers drop them)"));
      note_live_graph(f.round);
      continue;
    }
    note_fault(f);
    if (f.action != FaultAction::kPause) note_live_graph(f.round);
  }
  // The cuts that end before the next fault's round, once the network is there.
  note_cut_ends(std::min(round, waiting - 1));
}

void Network::note_cut_ends(std::int64_t through) {
  const std::int64_t total = record_.total_rounds();
  std::vector<std::pair<std::int64_t, std::size_t>> ending;  // (its end, the entry), in order
  for (std::size_t i = 0; i < faults_->size(); ++i) {
    const Fault& f = (*faults_)[i];
    if (f.action != FaultAction::kCut || !fault_done_[i] || cut_over_[i] || f.to_round > through ||
        (total > 0 && f.to_round >= total))
      continue;
    ending.emplace_back(f.to_round, i);
  }
  std::sort(ending.begin(), ending.end());
  for (const auto& [round, i] : ending) {
    cut_over_[i] = true;
    note_live_graph(round);
  }
}

void Network::note_live_graph(std::int64_t round) {
  std::vector<int> dead;
  for (int r = 0; r < n_; ++r)
    if (static_cast<std::size_t>(r) >= children_.size() || killed_by_schedule(r) ||
        (!children_[r].running && !record_.has_finished(r)))
      dead.push_back(r);
  record_.note_live_graph(
      live_graph(topology_, {}, 0),
      {round, 0.0, live_graph(topology_, dead, round, cut_links(*faults_, n_, round))});
}

void Network::wake_paused(Clock::time_point now) {
  for (auto it = paused_.begin(); it != paused_.end();) {
    if (now < it->first) {
      ++it;
      continue;
    }
    if (children_[it->second].running) kill(-children_[it->second].pid, SIGCONT);
    progress_.note(cat("fault schedule: peer ", it->second, " resumed (SIGCONT)"));
    it = paused_.erase(it);
  }
}

std::int64_t Network::fault_round() const {
  // The network's round: its first live peer's (the one furthest on). A fault acts once the
  // network has reached its round and every fault written before it has acted, so the schedule
  // fires in its written order however the graph splits; a restart then finds its neighbours
  // still running (they are at that round, or behind it), as in gossip sim, where every peer
  // is at the same round.
  std::int64_t round = -1;
  bool any_running = false;
  for (int r = 0; r < n_; ++r)
    if (children_[r].running && !killed_by_schedule(r)) {
      round = std::max(round, peer_round_[r]);
      any_running = true;
    }
  if (!any_running) round = std::numeric_limits<std::int64_t>::max();
  return round;
}

bool Network::fault_due(const Fault& f, std::int64_t round) const {
  // A kill's peers stop themselves at its round, before sending anything of it (their last
  // round is the one before, as in gossip sim); the kernel then closes their links as a
  // crash's. One that is behind (another component's, or paused) is killed where it is once
  // the network is kKillGrace rounds past.
  // (A peer started again is there only once its new process has said where it is.)
  const auto at_round = [&](int p) {
    return !children_[p].running || (heard_[p] && peer_round_[p] >= f.round);
  };
  const bool due = f.action == FaultAction::kKill
                       ? std::all_of(f.peers.begin(), f.peers.end(), at_round) ||
                             round >= f.round + kKillGrace
                       : round >= f.round;
  // A restart of a peer whose kill was just sent waits until its process has been reaped.
  const bool dying = f.action == FaultAction::kRestart &&
                     std::any_of(f.peers.begin(), f.peers.end(), [&](int p) {
                       return children_[p].running && killed_by_schedule(p);
                     });
  return due && !dying;
}

void Network::note_attack(const Fault& f) {
  const std::string until = f.to_round > 0 ? cat(" until round ", f.to_round) : "";
  record_.log_fault(f.round, cat("attack ", describe_attack(f), until), f.peers, 0.0);
  progress_.note(cat("fault schedule at round ", f.round, ": peer",
                     f.peers.size() == 1 ? " " : "s ", format_peers(f.peers), " attack",
                     f.peers.size() == 1 ? "s" : "", " with ", describe_attack(f), until,
                     f.peers.size() == 1 ? " (its exchange rewrites what it sends)"
                                         : " (their exchanges rewrite what they send)"));
}

std::vector<int> Network::act_on_peers(const Fault& f, Clock::time_point now) {
  std::vector<int> acted_on;
  for (int p : f.peers) {
    if (f.action == FaultAction::kRestart) {
      if (children_[p].running) {
        progress_.note(cat("fault schedule at round ", f.round, ": peer ", p,
                           " is running; nothing to restart"));
        continue;
      }
      restart(p);
    } else if (!children_[p].running) {
      continue;
    } else if (f.action == FaultAction::kKill) {
      scheduled_deaths_.push_back(p);
      // The process group (an exec: shell and its Python); the process itself when it has
      // just been started and has no group of its own yet.
      if (kill(-children_[p].pid, SIGKILL) != 0) kill(children_[p].pid, SIGKILL);
    } else {
      kill(-children_[p].pid, SIGSTOP);
      paused_.emplace_back(now + seconds_to_ms(f.seconds),
                           p);
    }
    acted_on.push_back(p);
  }
  return acted_on;
}

void Network::note_fault(const Fault& f) {
  record_.log_fault(f.round, fault_action_name(f.action), f.peers, f.seconds);
  const char* action = fault_action_name(f.action);
  if (dashboard_)
    dashboard_->on_note("fault", f.round,
                        cat("fault schedule: ", action, " peer", f.peers.size() == 1 ? " " : "s ",
                            format_peers(f.peers)),
                        now_s());
  progress_.note(cat("fault schedule at round ", f.round, ": ", action, " peer",
                     f.peers.size() == 1 ? " " : "s ", format_peers(f.peers),
                     f.action == FaultAction::kPause ? cat(" for ", f.seconds, " s")
                                                     : std::string()));
}

}  // namespace gossip::launch_parts
