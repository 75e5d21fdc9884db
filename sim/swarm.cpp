// sim/swarm.cpp: what the simulator's virtual peers (Swarm, swarm.hpp) do each round: the
// rounds over the worker pool, the fault schedule (kills, restarts, pauses), an elastic run's
// membership changes and hand-overs, and each peer's monitor.
#include "sim/swarm.hpp"

namespace gossip::sim_parts {

void Swarm::for_peers(int count, const std::function<int(int)>& peer_of,
                      const std::function<void(int)>& fn) {
  if (lanes_ <= 1) {
    pool_.run(count, fn);
    return;
  }
  pool_.run(lanes_, [&](int worker) {
    for (int k = 0; k < count; ++k)
      if (lane(peer_of(k)) == worker) fn(k);
  });
}

void Swarm::check_lanes() const {
  if (lanes_ == 0) return;  // the host: any worker takes any peer
  for (int p = 0; p < n(); ++p) {
    const GossipKernels* own = learners_[p].backend;
    GOSSIP_CHECK_MSG(own == learners_[lane(p)].backend,
                     cat("sim: peer ", p, " is not on the backend of worker ", lane(p)));
    for (int q = 0; q < std::min(n(), lanes_); ++q)
      GOSSIP_CHECK_MSG(q == lane(p) || learners_[q].backend != own,
                       cat("sim: workers ", q, " and ", lane(p), " share a device backend"));
  }
}

void Swarm::round(std::int64_t r, SimResult& result) {
  const std::size_t acted = result.faults.size();
  apply_membership(r, result);
  apply_faults(r, result);
  if (result.faults.size() != acted) note_live_graph(r, result);
  std::vector<int> active;
  for (int p = 0; p < n(); ++p)
    if (alive_[p] && !paused(p)) active.push_back(p);
  const auto t0 = Clock::now();
  const auto on_active = [&](int k) { return active[k]; };
  for_peers(static_cast<int>(active.size()), on_active, [&](int k) {
    const int p = active[k];
    Algorithm& a = *algorithms_[p];
    SimExchange& ex = network_.exchange(p);
    Timeline* tl = timelines_.empty() ? nullptr : timelines_[p].get();
    if (tl) tl->begin_round(r);
    const double compute = a.local_steps(r) * network_.step_seconds(p);
    auto steps = [&] {
      const double from = ex.now();
      ex.work(compute);
      if (tl) tl->add(Phase::kCompute, from, ex.now());
    };
    if (a.overlaps()) {  // the publish leaves before the steps, which run while it travels
      network_.run_phase(p, [&] { a.local_phase(r); });
      steps();
    } else {
      steps();
      network_.run_phase(p, [&] { a.local_phase(r); });
    }
    if (tl) tl->mixing();
  });
  const auto t1 = Clock::now();
  for (int s = 0; s < algorithms_.front()->relay_steps(); ++s)
    for_peers(static_cast<int>(active.size()), on_active, [&](int k) {
      network_.run_phase(active[k], [&] { algorithms_[active[k]]->relay_phase(r, s); });
    });
  for_peers(static_cast<int>(active.size()), on_active, [&](int k) {
    const int p = active[k];
    network_.run_phase(p, [&] { algorithms_[p]->mix_phase(r); });
    if (Timeline* tl = timelines_.empty() ? nullptr : timelines_[p].get()) {
      for (const auto& [from, to] : network_.exchange(p).take_collects())
        tl->add(Phase::kWait, from, to);
      tl->end_round();
    }
  });
  result.local_seconds += std::chrono::duration<double>(t1 - t0).count();
  result.mix_seconds += since(t1);
  for (int p : active) watch(p, r + 1, result);
  drop_the_dead(r + 1);
}

/// An elastic run: a member whose death a live member's monitor has confirmed leaves the
/// member set (drop_member), so the graph is derived again without it: at the round the real
/// peers' announcement would carry (dead_announcement_round), the earliest of its confirmers'
/// while that change is still ahead.
void Swarm::drop_the_dead(std::int64_t done) {
  if (topology_->epochs().empty()) return;
  const std::int64_t after = config_.monitor.remove_dead_after_rounds;
  for (int p = 0; p < n(); ++p) {
    if (!alive_[p]) continue;
    for (int d : monitored_[p]->dead_peers()) {
      const std::int64_t at =
          dead_announcement_round(done, monitored_[p]->last_message_round(d), after);
      const auto it = dropped_.find(d);
      if (it != dropped_.end() && (it->second.first <= at || it->second.second <= done))
        continue;
      const std::int64_t from = drop_member(*topology_, d, at);
      dropped_[d] = {at, from < 0 ? done : from};
    }
  }
}

/// Every peer's model, as host spans. Every algorithm's model is its learner's parameters
/// (model_params downloads them): on a host backend they are read where they are, without a
/// model-sized copy per peer; otherwise they are downloaded into host buffers.
std::vector<std::span<const float>> Swarm::gather() {
  const auto np = static_cast<std::size_t>(learners_.front().num_params);
  if (learners_.front().backend->host_memory()) {
    std::vector<std::span<const float>> out;
    out.reserve(learners_.size());
    for (const Learner& l : learners_) out.emplace_back(l.params, np);
    return out;
  }
  if (host_.empty()) host_.assign(n(), std::vector<float>(np));
  for_peers(n(), [&](int p) { algorithms_[p]->model_params(host_[p]); });
  return {host_.begin(), host_.end()};
}

/// Fills the fields every evaluation shares (clock, bytes, consensus distance).
void Swarm::fill_common(EvalPoint& e, std::int64_t round, std::span<const std::span<const float>> x) {
  e.round = round;
  e.consensus_distance = consensus_distance(live(x));
  e.live = static_cast<int>(std::count(alive_.begin(), alive_.end(), 1));
  e.peers.resize(n());
  for (int p = 0; p < n(); ++p) {
    const auto& ex = network_.exchange(p);
    e.sim_seconds = std::max(e.sim_seconds, ex.now());
    e.peers[p].bytes_sent = ex.bytes_sent();
    e.bytes_sent += ex.bytes_sent();
  }
}

void Swarm::finish(SimResult& result) {
  // The run is over: the messages in flight go before the final models are copied out, so
  // the copies take their place rather than add to the peak.
  network_.release();
  const auto x = gather();
  result.params.reserve(x.size());
  for (const auto& p : x) result.params.emplace_back(p.begin(), p.end());
  result.params_sha256.resize(x.size());  // hashed on the pool: a gigabyte at 1,024 peers
  pool_.run(n(), [&](int p) { result.params_sha256[p] = sha256_hex(result.params[p]); });
  host_.clear();
  result.alive_at_end.assign(alive_.begin(), alive_.end());
  for (int p = 0; p < n(); ++p)
    for (const auto& [from, count] : watches_[p].refused())
      result.refused.emplace_back(p, from, count);
  // The live graph at the end, as it is (a monitor's view may still lag behind a late death):
  // the peers alive then, without the links the schedule still cuts. gossip run's record takes
  // the peers that finished likewise.
  const std::vector<std::pair<int, int>> cut_at_end =
      cut_links(config_.faults, n(), result.rounds - 1);
  std::vector<int> dead;
  for (int p = 0; p < n(); ++p)
    if (!alive_[p]) dead.push_back(p);
  LiveGraph g = live_graph(*topology_, dead, result.rounds, cut_at_end);
  result.final_components = std::move(g.components);
  result.final_one_way = std::move(g.one_way);
  result.final_connected = g.connected;
  for (int p = 0; p < n(); ++p) {
    result.sim_seconds = std::max(result.sim_seconds, network_.exchange(p).now());
    result.bytes_sent += network_.exchange(p).bytes_sent();
  }
  result.workers = pool_.threads();
}

/// Before round r of an elastic run whose change takes effect at r + 1: each joiner's
/// hand-over, the average of its donors' models after round r - 1 (join_donors: its
/// in-neighbours in the new graph that were members already, alive) and its first donor's
/// steps, as real donors send it a round ahead so that the joiner's first round waits for
/// nothing more than any other round does.
void Swarm::take_handovers(std::int64_t r) {
  const auto& epochs = topology_->epochs();
  const std::size_t e = topology_->epoch_index(r + 1);
  if (e == 0 || epochs[e].from != r + 1) return;
  const auto np = static_cast<std::size_t>(learners_.front().num_params);
  for (int p : epochs[e].members) {
    if (std::binary_search(epochs[e - 1].members.begin(), epochs[e - 1].members.end(), p))
      continue;
    Handover h;
    h.donors = join_donors(*topology_, e, p);
    std::erase_if(h.donors, [&](int q) { return !alive_[q]; });
    ModelAverage average(np);
    h.model.resize(np);
    for (int q : h.donors) {
      algorithms_[q]->model_params(h.model);
      average.add(h.model);
    }
    if (!h.donors.empty()) {
      average.write(h.model);
      h.steps = steps_of_ ? steps_of_(h.donors.front()) : 0;
    }
    handovers_[p] = std::move(h);
  }
}

/// An elastic run's membership change taking effect at round r (Topology::epochs): the
/// leavers' processes end (their last round, r - 1, was mixed as usual), and each joiner
/// starts from its hand-over (take_handovers, a round before), momentum zero.
void Swarm::apply_membership(std::int64_t r, SimResult& result) {
  const auto& epochs = topology_->epochs();
  if (epochs.empty()) return;
  take_handovers(r);
  if (r == 0) return;
  const std::size_t e = topology_->epoch_index(r);
  if (epochs[e].from != r) return;
  const std::vector<int>& before = epochs[e - 1].members;
  const std::vector<int>& now = epochs[e].members;
  std::vector<int> joined, left;
  std::set_difference(now.begin(), now.end(), before.begin(), before.end(),
                      std::back_inserter(joined));
  std::set_difference(before.begin(), before.end(), now.begin(), now.end(),
                      std::back_inserter(left));
  std::vector<int> dead, gone;  // out as confirmed dead, out as leavers
  for (int p : left) (alive_[p] ? gone : dead).push_back(p);
  for (int p : left) {
    alive_[p] = 0;
    network_.set_down(p, true);
  }
  MembershipRecord record{r, epochs[e].announced, now, joined, gone, {}, dead,
                          members_gap(now)};
  for (int p : joined) {
    const Handover h = std::move(handovers_[p]);
    handovers_.erase(p);
    alive_[p] = 1;
    network_.set_down(p, false);
    monitored_[p]->restart();
    watches_[p] = make_watch(p);
    if (!h.donors.empty() && join_state_) join_state_(p, h.model, h.steps);
    SimExchange& ex = network_.exchange(p);
    ex.compute(std::max(0.0, latest_clock() - ex.now()));
    record.donors.push_back(h.donors);
  }
  for (const auto& [action, peers] :
       {std::pair{"left", gone}, std::pair{"removed", dead}, std::pair{"joined", joined}})
    if (!peers.empty())
      result.faults.push_back(SimFault{r, action, peers, 0.0, latest_clock()});
  result.membership.push_back(std::move(record));
}

/// A peer that comes back (restarted, or woken from a pause) takes the model of its
/// lowest-numbered live in-neighbour, as a real peer catching up takes a neighbour's newest
/// parameters, and its clock joins the others'.
void Swarm::catch_up(int p, std::int64_t round) {
  for (int q = 0; q < n(); ++q) {
    bool in = false;
    for (const Graph& g : topology_->epoch_rounds(round))  // the graphs of round's epoch
      for (const auto& nb : g.in_neighbours(p)) in = in || nb.peer == q;
    if (!in || !alive_[q] || paused(q)) continue;
    std::vector<float> model(static_cast<std::size_t>(learners_[q].num_params));
    algorithms_[q]->model_params(model);
    learners_[p].backend->upload(learners_[p].params, model.data(),
                                 model.size() * sizeof(float));
    Algorithm::State st = algorithms_[p]->state();
    st.weight = algorithms_[q]->weight();
    algorithms_[p]->restore(st);
    break;
  }
  SimExchange& ex = network_.exchange(p);
  ex.compute(std::max(0.0, latest_clock() - ex.now()));
}

void Swarm::apply_faults(std::int64_t r, SimResult& result) {
  for (int p = 0; p < n(); ++p)  // a pause that is over
    if (paused_until_[p] >= 0 && alive_[p] && !paused(p)) {
      paused_until_[p] = -1.0;
      network_.set_silent_from(p, -1.0);
      catch_up(p, r);
    }
  for (const Fault& f : config_.faults) {
    if (f.action == FaultAction::kCut || f.action == FaultAction::kAttack || f.round != r) continue;
    for (int p : f.peers) {
      if (f.action == FaultAction::kKill) {
        alive_[p] = 0;
        network_.set_down(p, true);
      }
      if (f.action == FaultAction::kRestart && !alive_[p]) {
        alive_[p] = 1;
        network_.set_down(p, false);
        paused_until_[p] = -1.0;
        network_.set_silent_from(p, -1.0);
        monitored_[p]->restart();
        watches_[p] = make_watch(p);
        catch_up(p, r);
      }
      if (f.action == FaultAction::kPause && alive_[p]) {
        paused_until_[p] = latest_clock() + f.seconds;
        network_.set_silent_from(p, latest_clock());
      }
    }
    result.faults.push_back(
          SimFault{r, fault_action_name(f.action), f.peers, f.seconds, latest_clock()});
  }
  // Cuts and attacks act in the peers' FaultedExchange, round by round; here they are only
  // recorded.
  for (const Fault& f : config_.faults) {
    if (f.action == FaultAction::kCut && (f.round == r || f.to_round == r)) {
      std::vector<int> ends;
      for (const auto& [a, b] : f.links) ends.insert(ends.end(), {a, b});
      result.faults.push_back(SimFault{r, f.round == r ? "cut" : "uncut", ends, 0.0,
                                       latest_clock()});
    }
    if (f.action == FaultAction::kAttack && (f.round == r || (f.to_round > 0 && f.to_round == r)))
      result.faults.push_back(SimFault{
          r, f.round == r ? cat("attack ", describe_attack(f)) : std::string("attack over"),
          f.peers, 0.0, latest_clock()});
  }
}

void Swarm::note_live_graph(std::int64_t r, SimResult& result) {
  std::vector<int> dead;
  for (int p = 0; p < n(); ++p)
    if (!alive_[p]) dead.push_back(p);
  gossip::note_live_graph(
      result.live_graphs, initial_graph_,
      {r, latest_clock(), live_graph(*topology_, dead, r, cut_links(config_.faults, n(), r))});
}

/// Peer p's membership changes and live-graph changes after `done` rounds, as events.
void Swarm::watch(int p, std::int64_t done, SimResult& result) {
  const double now = network_.exchange(p).now();
  const Algorithm::MixReport& mix = algorithms_[p]->last_mix();
  watches_[p].observe_mix(flagged(mix), mix.heard, mix.nonfinite);
  for (PeerEvent& e : watches_[p](*monitored_[p], done, now))
    if (auto* m = std::get_if<MemberEvent>(&e)) {
      if (m->event == MemberEventKind::kPartition && config_.monitor.on_partition == PartitionPolicy::kStop) stop_ = true;
      result.member_events.push_back(std::move(*m));
    }
  algorithms_[p]->set_cut(monitored_[p]->cut_peers());
}

}  // namespace gossip::sim_parts
