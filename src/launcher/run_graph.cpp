// launcher/run_graph.cpp: the run's graph at the end, merged from every peer's own record of its
// links ("link" events), of the neighbours it holds dead and of those it cut for lying. A link
// that either end reports never formed, or lost and not back, is not in it: if only one side had
// a link, it was not one. Connectivity and components are computed on that graph, never copied
// from one peer's view; the peers whose monitor believed otherwise are named.
#include <algorithm>
#include <map>
#include <set>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"
#include "src/launcher/network_record.hpp"

namespace gossip::launcher {

namespace {

/// The topology's links (unordered pairs, a < b) over the period of `round`'s epoch.
std::set<std::pair<int, int>> topology_links(const Topology& topology, std::int64_t round) {
  std::set<std::pair<int, int>> links;
  for (const Graph& g : topology.epoch_rounds(round))
    for (int i = 0; i < topology.n(); ++i)
      for (const auto& nb : g.in_neighbours(i))
        if (nb.peer != i) links.emplace(std::min(i, nb.peer), std::max(i, nb.peer));
  return links;
}

JsonArray components_json(const std::vector<std::vector<int>>& components) {
  JsonArray a;
  for (const auto& c : components) a.add(JsonArray::of(c));
  return a;
}

/// Why a link is not in the run's graph (summary.json missing_links' `state`), one row each, in
/// order of gravity: where both ends say something, the gravest row names the link.
#define GOSSIP_MISSING_LINKS(X)                                                        \
  X(kNeverFormed, "never_formed", "an end's link never formed")                       \
  X(kLost, "lost", "an end's link was lost and did not come back")                    \
  X(kHeldDead, "held_dead", "an end's monitor holds the other dead")                  \
  X(kCut, "cut", "an end cut the other for lying")

GOSSIP_NAMED_CHOICE(MissingState, GOSSIP_MISSING_LINKS, missing_state_table, missing_state_name)

/// The missing-link state of a link event that leaves it absent.
MissingState missing_state(LinkChange change) {
  return change == LinkChange::kNeverFormed ? MissingState::kNeverFormed : MissingState::kLost;
}

/// Why a link is missing, as one end (or both) recorded it: its state and what each end said.
struct Missing {
  MissingState state = MissingState::kNeverFormed;
  std::int64_t round = 0;
  std::map<int, std::string> why;  // end -> what it recorded
};

using LinkSet = std::set<std::pair<int, int>>;
using MissingLinks = std::map<std::pair<int, int>, Missing>;  // (a < b) -> why

bool is_link(const LinkSet& links, int a, int b) {
  return links.count({std::min(a, b), std::max(a, b)}) > 0;
}

/// Whether peer r is alive at the end (not among the sorted `gone`).
bool alive(const std::vector<int>& gone, int r) {
  return !std::binary_search(gone.begin(), gone.end(), r);
}

/// End `end` of the link a-b said it is missing (`state`, from round `from`, `why`). A link both
/// ends say something of is named by the gravest state (the table's order), from the earliest
/// round either gave.
void note_missing(MissingLinks& missing, int a, int b, int end, MissingState state,
                  std::int64_t from, const std::string& why) {
  auto [it, fresh] = missing.try_emplace({std::min(a, b), std::max(a, b)});
  Missing& m = it->second;
  if (fresh || state < m.state) m.state = state;
  m.round = fresh ? from : std::min(m.round, from);
  m.why.try_emplace(end, why);  // an end's own link record first (noted first), then its view
}

/// The missing links of the topology between peers alive at the end into g (summary.json's
/// missing_links, the final table's lines); returns them.
std::vector<std::pair<int, int>> add_missing_links(RunGraph& g, const MissingLinks& missing,
                                                   const LinkSet& links,
                                                   const std::vector<int>& gone) {
  std::vector<std::pair<int, int>> absent;
  for (const auto& [pair, m] : missing) {
    if (!is_link(links, pair.first, pair.second) || !alive(gone, pair.first) ||
        !alive(gone, pair.second))
      continue;
    absent.push_back(pair);
    JsonObject why;
    std::string line = cat(pair.first, "-", pair.second, " ", missing_state_name(m.state), ":");
    for (const auto& [end, text] : m.why) {
      why.add(cat(end), text);
      line += cat(" peer ", end, ": ", text.empty() ? std::string("(no reason recorded)") : text,
                  ";");
    }
    line.pop_back();
    g.missing_links.add(JsonObject()
                            .add("peers", JsonArray::of(std::vector<int>{pair.first, pair.second}))
                            .add("state", missing_state_name(m.state))
                            .add("round", m.round)
                            .add("why", why));
    g.missing_lines.push_back(line);
  }
  return absent;
}

}  // namespace

std::vector<int> NetworkRecord::gone_at_end(const Topology& topology) const {
  const int n = std::min(n_, topology.n());
  // Alive at the end: finished (a peer that ended without finishing has no say, nor a place).
  std::vector<int> gone;
  for (int r = 0; r < topology.n(); ++r)
    if (r >= n || !done_[r] || std::find(dead_.begin(), dead_.end(), r) != dead_.end())
      gone.push_back(r);
  return gone;
}

void NetworkRecord::add_disagreeing_views(RunGraph& g, int n, const std::vector<int>& gone) const {
  // Each live peer's last word on the graph: a split it saw, or (none, or healed) whole.
  for (int r = 0; r < n; ++r) {
    if (!alive(gone, r)) continue;
    const bool split = graph_[r] && graph_[r]->event == MemberEventKind::kPartition;
    const std::vector<std::vector<int>> believed = split ? graph_[r]->components
                                                         : std::vector<std::vector<int>>{};
    if (believed == g.components) continue;
    g.disagreeing_views.add(JsonObject()
                                .add("peer", r)
                                .add("connected", !split)
                                .add("components", components_json(believed)));
  }
}

RunGraph NetworkRecord::run_graph(const Topology& topology, std::int64_t round) const {
  const int n = std::min(n_, topology.n());
  const std::vector<int> gone = gone_at_end(topology);
  const LinkSet links = topology_links(topology, round);
  MissingLinks missing;
  for (const auto& [key, report] : link_reports_) {
    const auto [peer, neighbour] = key;
    if (link_absent(report.change))
      note_missing(missing, peer, neighbour, peer, missing_state(report.change), report.round,
                   report.reason);
  }
  for (int r = 0; r < n; ++r)
    for (int q : held_dead_[r])
      if (q >= 0 && q < n && alive(gone, q) && is_link(links, r, q))
        note_missing(missing, r, q, r, MissingState::kHeldDead, 0,
                     cat("peer ", r, " holds peer ", q, " dead"));
  for (const auto& [r, q] : cut_links_)
    if (is_link(links, r, q))
      note_missing(missing, r, q, r, MissingState::kCut, 0,
                   cat("peer ", r, " cut peer ", q, " for lying"));

  RunGraph g;
  const std::vector<std::pair<int, int>> absent = add_missing_links(g, missing, links, gone);
  const LiveGraph live = live_graph(topology, gone, round, absent);
  g.connected = live.connected;
  if (!live.connected) {
    g.components = live.components;
    g.one_way = live.one_way;
  }
  add_disagreeing_views(g, n, gone);
  return g;
}

RunGraph NetworkRecord::monitors_graph() const {
  const MemberEvent* last = nullptr;
  for (int r = 0; r < n_; ++r) {
    if (!graph_[r] || std::find(dead_.begin(), dead_.end(), r) != dead_.end()) continue;
    if (!last || graph_[r]->round > last->round) last = &*graph_[r];
  }
  RunGraph g;
  if (last && last->event == MemberEventKind::kPartition) {
    g.connected = false;
    g.components = last->components;
  }
  return g;
}

}  // namespace gossip::launcher
