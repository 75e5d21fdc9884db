// report/dashboard.cpp: /state.json, the dashboard's view of a run, built from the peers' own
// event lines. A peer is dead when its process ended without finishing (the launcher saw it) or
// when a live peer's membership view holds it dead; suspect when a live view suspects it. The
// components are the live graph's: the topology without dead peers and without links cut for
// lying, the same rule the peers' convergence monitors apply.
#include "gossip/dashboard.hpp"

#include <algorithm>
#include <charconv>
#include <array>
#include <numeric>
#include <optional>
#include <span>

#include "gossip/core.hpp"
#include "gossip/json.hpp"

namespace gossip {
namespace {

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string ids(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += cat(out.empty() ? "" : " ", x);
  return out;
}

/// The text of a member event for the log.
std::string member_text(const MemberEvent& m) {
  const std::string who = cat("peer ", m.peer);
  std::string comps;
  for (const auto& c : m.components) comps += cat(comps.empty() ? "" : " | ", ids(c));
  switch (m.event) {
    case MemberEventKind::kPartition: return cat(who, ": live graph split (components ", comps, ")");
    case MemberEventKind::kHealed:
      return cat(who, ": live graph whole again (components ", comps, ")");
    case MemberEventKind::kSuspect: return cat(who, " suspects peer ", m.subject);
    case MemberEventKind::kDead: return cat(who, " holds peer ", m.subject, " dead");
    case MemberEventKind::kAlive: return cat(who, " hears peer ", m.subject, " again");
    case MemberEventKind::kRejoin: return cat(who, ": peer ", m.subject, " rejoined");
    case MemberEventKind::kByzantineSuspect:
      return cat(who, " suspects peer ", m.subject, " of lying");
    case MemberEventKind::kByzantineCleared:
      return cat(who, " no longer suspects peer ", m.subject, " of lying");
    case MemberEventKind::kByzantineCut: return cat(who, " no longer mixes with peer ", m.subject);
    case MemberEventKind::kRefusedParams:
      return cat(who, " left out NaN or Inf parameters of peer ", m.subject);
    default: break;  // the rest read well as "event peer N"
  }
  return cat(who, ": ", event_name(m.event),
             m.subject >= 0 ? cat(" peer ", m.subject) : std::string());
}

JsonObject phases_json(const std::string& text) {
  JsonObject o;
  std::size_t at = 0;
  while (at < text.size()) {
    auto end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    const auto colon = item.find(':');
    if (colon == std::string::npos) continue;
    double v = 0.0;
    const char* first = item.data() + colon + 1;
    if (std::from_chars(first, item.data() + item.size(), v).ec == std::errc())
      o.add(item.substr(0, colon), v);
  }
  return o;
}

}  // namespace

DashboardState::DashboardState(DashboardSetup setup)
    : setup_(std::move(setup)), peers_(static_cast<std::size_t>(setup_.n)) {}

void DashboardState::log(double seconds, std::int64_t round, int peer, const std::string& event,
                         int subject, std::string text) {
  events_.push_front(JsonObject()
                         .add("seconds", seconds)
                         .add("round", round)
                         .add("peer", peer)
                         .add("event", event)
                         .add("subject", subject)
                         .add("text", text)
                         .str());
  if (events_.size() > kMaxEvents) events_.pop_back();
}

void DashboardState::traffic(Peer& p, const std::string& text, double now) {
  std::map<int, std::uint64_t> sent;
  std::size_t at = 0;
  while (at < text.size()) {  // NEIGHBOUR:SENT:RECEIVED;...
    auto end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    int peer = -1;
    std::uint64_t bytes = 0;
    const auto c1 = item.find(':');
    if (c1 == std::string::npos) continue;
    const auto c2 = item.find(':', c1 + 1);
    if (std::from_chars(item.data(), item.data() + c1, peer).ec != std::errc() ||
        std::from_chars(item.data() + c1 + 1,
                        item.data() + (c2 == std::string::npos ? item.size() : c2), bytes)
                .ec != std::errc())
      continue;
    sent[peer] = bytes;
  }
  p.sent.emplace_back(now, std::move(sent));
  while (p.sent.size() > 2 && now - p.sent[1].first >= kRateWindowSeconds) p.sent.pop_front();
}

double DashboardState::rate(int from, int to) const {
  const Peer& p = peers_[static_cast<std::size_t>(from)];
  if (p.sent.size() < 2 || p.exited) return 0.0;
  const auto& [t0, first] = p.sent.front();
  const auto& [t1, last] = p.sent.back();
  if (t1 <= t0) return 0.0;
  const auto a = first.find(to), b = last.find(to);
  if (a == first.end() || b == last.end() || b->second < a->second) return 0.0;
  return static_cast<double>(b->second - a->second) / (t1 - t0);
}

void DashboardState::on_event(int rank, const PeerEvent& e, double now) {
  std::lock_guard lock(mutex_);
  if (rank < 0 || rank >= setup_.n) return;
  Peer& p = peers_[static_cast<std::size_t>(rank)];
  if (std::holds_alternative<ReadyEvent>(e)) {
    p.ready = true;
    p.exited = false;
    log(now, p.round, rank, "ready", -1, cat("peer ", rank, " is connected and trains"));
  } else if (const auto* ev = std::get_if<EvalEvent>(&e)) {
    p.ready = true;
    p.round = std::max(p.round, ev->round);
    p.rounds = std::max(p.rounds, ev->rounds);
    p.accuracy = ev->accuracy;
    p.loss = ev->round > 0 ? ev->loss : -1.0;  // round 0 has no training loss yet
    p.bytes_sent = ev->bytes_sent;
  } else if (const auto* ro = std::get_if<RoundEvent>(&e)) {
    p.ready = true;
    p.round = std::max(p.round, ro->round);
    p.rounds = std::max(p.rounds, ro->rounds);
    if (!ro->phases.empty()) p.phases = ro->phases;
    if (!ro->traffic.empty()) traffic(p, ro->traffic, now);
  } else if (const auto* a = std::get_if<AlertEvent>(&e)) {
    log(now, a->round, rank, "alert", -1, cat("peer ", rank, ": ", a->message));
  } else if (const auto* m = std::get_if<MemberEvent>(&e)) {
    const int s = m->subject;
    const bool subject_ok = s >= 0 && s < setup_.n;
    if (subject_ok && (m->event == MemberEventKind::kSuspect || m->event == MemberEventKind::kDead)) p.view[s] = m->event;
    if (subject_ok && (m->event == MemberEventKind::kAlive || m->event == MemberEventKind::kRejoin)) p.view.erase(s);
    if (subject_ok && m->event == MemberEventKind::kByzantineSuspect && !has(p.suspects, s))
      p.suspects.push_back(s);
    if (subject_ok && m->event == MemberEventKind::kByzantineCleared) std::erase(p.suspects, s);
    if (subject_ok && m->event == MemberEventKind::kByzantineCut && !has(p.cut, s)) p.cut.push_back(s);
    log(now, m->round, rank, event_name(m->event), s, member_text(*m));
  } else if (const auto* l = std::get_if<LinkEvent>(&e)) {
    const int q = l->neighbour;
    if (q < 0 || q >= setup_.n) return;
    if (l->change == LinkChange::kReachability) p.reachability = l->reason;
    if (l->change == LinkChange::kPath) p.paths[q] = l->reason;
    if (l->change == LinkChange::kReachability) {
      // About the peer itself, not a link.
    } else if (link_absent(l->change))
      p.links[q] = l->change;
    else
      p.links.erase(q);
    log(now, l->round, rank, cat("link_", link_change_name(l->change)), q,
        cat("peer ", rank, ": link to peer ", q, " ", link_change_name(l->change),
            l->reason.empty() ? std::string() : cat(" (", l->reason, ")")));
  } else if (const auto* d = std::get_if<DoneEvent>(&e)) {
    p.finished = true;
    p.accuracy = d->accuracy;
    p.bytes_sent = d->bytes_sent;
    if (!d->phases.empty()) p.phases = d->phases;
    log(now, p.round, rank, "done", -1, cat("peer ", rank, " finished"));
  }
}

void DashboardState::on_figures(const EvaluationFigures& f, double now) {
  std::lock_guard lock(mutex_);
  double loss = 0.0;
  int count = 0;
  for (const Peer& p : peers_)
    if (p.loss >= 0.0 && !p.exited) loss += p.loss, ++count;
  series_.push_back({f, now, count ? loss / count : -1.0});
}

void DashboardState::on_exit(int rank, const std::string& why, double now) {
  std::lock_guard lock(mutex_);
  if (rank < 0 || rank >= setup_.n) return;
  Peer& p = peers_[static_cast<std::size_t>(rank)];
  p.exited = true;
  log(now, p.round, -1, "exit", rank, cat("peer ", rank, "'s process ended: ", why));
}

void DashboardState::on_back(int rank, double now) {
  std::lock_guard lock(mutex_);
  if (rank < 0 || rank >= setup_.n) return;
  Peer& p = peers_[static_cast<std::size_t>(rank)];
  p.exited = false;
  p.ready = false;
  p.sent.clear();
  log(now, p.round, -1, "restart", rank, cat("peer ", rank, " started again"));
}

void DashboardState::on_note(const std::string& event, std::int64_t round,
                             const std::string& text, double now) {
  std::lock_guard lock(mutex_);
  log(now, round, -1, event, -1, text);
}

void DashboardState::set_finished(double now) {
  std::lock_guard lock(mutex_);
  finished_ = true;
  finished_at_ = now;
}

PeerState DashboardState::state_of(int r) const {
  const Peer& p = peers_[static_cast<std::size_t>(r)];
  if (p.finished) return PeerState::kFinished;
  if (p.exited) return PeerState::kDead;
  std::optional<PeerState> worst;
  for (int o = 0; o < setup_.n; ++o) {
    const Peer& q = peers_[static_cast<std::size_t>(o)];
    if (o == r || q.exited || q.finished) continue;
    const auto it = q.view.find(r);
    if (it == q.view.end()) continue;
    // An observer whose own link to it never formed says nothing of the peer: the link is
    // shown as never formed instead.
    if (const auto l = q.links.find(r); l != q.links.end() && l->second == LinkChange::kNeverFormed)
      continue;
    if (it->second == MemberEventKind::kDead) {  // cleared when that observer hears it again
      worst = PeerState::kDead;                    // (alive, rejoin)
      break;
    }
    worst = PeerState::kSuspect;
  }
  if (worst) return *worst;
  return p.ready ? PeerState::kAlive : PeerState::kStarting;
}

std::optional<LinkChange> DashboardState::link_fact(int a, int b) const {
  std::optional<LinkChange> fact;
  for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    const auto& links = peers_[static_cast<std::size_t>(from)].links;
    const auto it = links.find(to);
    if (it != links.end() && (!fact || it->second == LinkChange::kNeverFormed)) fact = it->second;
  }
  return fact;
}

std::string DashboardState::link_path(int a, int b) const {
  for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    const auto& paths = peers_[static_cast<std::size_t>(from)].paths;
    if (const auto it = paths.find(to); it != paths.end()) return it->second;
  }
  return "";
}

bool DashboardState::link_up(int a, int b, const std::vector<PeerState>& states) const {
  if (states[a] == PeerState::kDead || states[b] == PeerState::kDead) return false;
  return !link_fact(a, b) && !has(peers_[a].cut, b) && !has(peers_[b].cut, a);
}

std::vector<std::vector<int>> DashboardState::components(const std::vector<PeerState>& states,
                                                          std::vector<int>& component_of) const {
  const int n = setup_.n;
  std::vector<int> root(static_cast<std::size_t>(n));  // union-find over the links that are up
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](int x) {
    while (root[x] != x) x = root[x] = root[root[x]];
    return x;
  };
  for (const auto& e : setup_.edges)
    if (link_up(e.a, e.b, states)) root[find(e.a)] = find(e.b);
  std::vector<std::vector<int>> out;  // in order of their smallest peer
  std::vector<int> index_of_root(static_cast<std::size_t>(n), -1);
  component_of.assign(static_cast<std::size_t>(n), -1);
  for (int r = 0; r < n; ++r) {
    if (states[r] == PeerState::kDead) continue;
    int& index = index_of_root[find(r)];
    if (index < 0) {
      index = static_cast<int>(out.size());
      out.emplace_back();
    }
    out[index].push_back(r);
    component_of[r] = index;
  }
  return out;
}

JsonArray DashboardState::peers_json(const std::vector<PeerState>& states,
                                     const std::vector<int>& component_of) const {
  JsonArray peers;
  for (int r = 0; r < setup_.n; ++r) {
    const Peer& p = peers_[r];
    bool byzantine = false, cut = false;
    for (const Peer& q : peers_) {
      byzantine = byzantine || has(q.suspects, r);
      cut = cut || has(q.cut, r);
    }
    JsonObject po;
    po.add("id", r).add("state", peer_state_name(states[r]));
    if (component_of[r] >= 0) po.add("component", component_of[r]);
    else po.raw("component", "null");
    po.add("byzantine", byzantine).add("cut", cut).add("round", p.round);
    po.add("reachability", p.reachability);
    if (p.accuracy >= 0.0) po.add("accuracy", p.accuracy);
    else po.raw("accuracy", "null");
    if (p.loss >= 0.0) po.add("loss", p.loss);
    else po.raw("loss", "null");
    po.add("bytes_sent", p.bytes_sent).add("phases", phases_json(p.phases));
    peers.add(po);
  }
  return peers;
}

JsonArray DashboardState::series_json() const {
  JsonArray series;
  for (const Point& pt : series_) {
    JsonObject so;
    so.add("round", pt.f.round).add("seconds", pt.seconds).add("epoch", pt.f.epoch);
    if (pt.f.has_average) so.add("accuracy", pt.f.test_accuracy);
    else so.raw("accuracy", "null");
    so.add("accuracy_min", pt.f.peer_accuracy_min).add("accuracy_max", pt.f.peer_accuracy_max);
    if (pt.loss >= 0.0) so.add("loss", pt.loss);
    else so.raw("loss", "null");
    so.add("consensus_distance", pt.f.consensus_distance);
    series.add(so);
  }
  return series;
}

std::string DashboardState::json(double now) const {
  std::lock_guard lock(mutex_);
  const int n = setup_.n;
  std::vector<PeerState> states(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) states[r] = state_of(r);
  std::vector<int> component_of;
  const auto comps = components(states, component_of);
  std::int64_t round = -1, rounds = 0;  // the slowest live peer's round
  for (int r = 0; r < n; ++r) {
    rounds = std::max(rounds, peers_[r].rounds);
    if (states[r] != PeerState::kDead) round = round < 0 ? peers_[r].round : std::min(round, peers_[r].round);
  }
  round = std::max<std::int64_t>(round, 0);
  const double elapsed = finished_ ? finished_at_ : now;
  JsonObject o;
  o.add("source", setup_.source).add("out", setup_.out).add("topology", setup_.topology)
      .add("algorithm", setup_.algorithm).add("n", n).add("round", round).add("rounds", rounds)
      .add("elapsed_s", elapsed);
  if (round > 0 && rounds > round && !finished_)
    o.add("eta_s", elapsed / static_cast<double>(round) * static_cast<double>(rounds - round));
  else
    o.raw("eta_s", finished_ ? "0" : "null");
  JsonArray comps_json;
  for (const auto& c : comps) comps_json.add(JsonArray::of(c));
  o.add("finished", finished_).add("connected", comps.size() <= 1).add("components", comps_json);
  o.add("peers", peers_json(states, component_of));
  JsonArray links;
  for (const auto& e : setup_.edges) {
    const bool up = link_up(e.a, e.b, states);
    const std::optional<LinkChange> fact = link_fact(e.a, e.b);
    links.add(JsonObject()
                  .add("a", e.a)
                  .add("b", e.b)
                  .add("weight", e.weight)
                  .add("bytes_per_s", rate(e.a, e.b) + rate(e.b, e.a))
                  .add("up", up)
                  .add("state", fact ? link_change_name(*fact) : up ? "up" : "down")
                  .add("path", link_path(e.a, e.b)));
  }
  o.add("links", links).add("series", series_json());
  JsonArray events;
  for (const auto& ev : events_) events.raw(ev);
  o.add("events", events);
  return o.str();
}

}  // namespace gossip
