/// monitor: how far the peers are from agreeing, and whether the live graph still connects them.
/// Used by the simulator and by every real peer's convergence monitor. Depends on topology only;
/// pure functions, safe to call from any thread.
#pragma once
#if !defined(GOSSIP_ROOM_MONITOR)
#error "gossip/monitor.hpp belongs to room monitor, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/events.hpp"
#include "gossip/exchange.hpp"
#include "gossip/topology.hpp"

namespace gossip {

/// Consensus distance (1/n) sum_i ||x_i - xbar||^2 over n equally long buffers, accumulated in
/// double in a fixed order (the same result whatever calls it). 0 for n < 2.
double consensus_distance(std::span<const std::span<const float>> buffers);

/// xbar = (1/n) sum_i x_i, accumulated in double (peer order ascending), rounded to float.
void average_params(std::span<const std::span<const float>> buffers, std::span<float> out);

/// The live graph: the topology's arcs over one whole period among peers that are not dead.
struct LiveGraph {
  bool connected = false;                    // strongly, for directed graphs; false if < 1 alive
  /// The strongly connected components of the alive peers (for an undirected graph its
  /// connected parts), each ascending, by smallest id; connected when there is one.
  std::vector<std::vector<int>> components;
  /// (a, b): component a's messages reach component b, but b's never reach a (a directed
  /// graph, or one whose dead peers leave one-way paths); indices into components.
  std::vector<std::pair<int, int>> one_way;
  std::vector<int> alive;                    // ascending
};

/// Connectivity of the topology (union of the rounds of one period) without the `dead` peers.
/// A directed graph counts as connected only when every alive peer reaches every other. For a
/// run whose members change (Topology::epochs), the graph and the members of `round`'s epoch:
/// ranks that are not members then are neither alive nor dead.
/// `absent`: links (pairs of peers, either order) that are not in it although both ends are:
/// they never formed, or were lost, or one end no longer takes the other's messages.
LiveGraph live_graph(const Topology& topology, std::span<const int> dead = {},
                     std::int64_t round = 0,
                     std::span<const std::pair<int, int>> absent = {});

/// The live graph from a round on, after every change of that round taken together: a run's
/// record of it (gossip sim's and gossip run's events.jsonl `live_graph` events, from the peers
/// alive and the links cut as the run carried them out) and the truth a fault schedule gives
/// (schedule_live_graphs, gossip/faults.hpp).
struct LiveGraphChange {
  std::int64_t round = 0;
  double time_s = 0.0;  // when it was noted (simulated seconds, or the launcher's clock)
  LiveGraph graph;
};
/// Whether a and b have the same components, one-way reaches and connectedness.
bool same_live_graph(const LiveGraph& a, const LiveGraph& b);
/// Adds `change` to a timeline of changes that began as `initial`: a change at the round of the
/// last entry replaces that entry (a round's faults count together) and one that leaves the
/// graph as it was before is dropped. Returns how many entries at the front are final (a
/// later round's change has come after them).
std::size_t note_live_graph(std::vector<LiveGraphChange>& timeline, const LiveGraph& initial,
                            LiveGraphChange change);
/// events.jsonl's line for one: {"event": "live_graph", "time_s", "round", "connected",
/// "components", "one_way": [{"from": [...], "to": [...]}]}.
std::string live_graph_json(const LiveGraphChange& change);

/// A change in the live graph, as the convergence monitor reports it.
struct MonitorChange {
  std::vector<int> dead;                     // ascending
  std::vector<int> cut;                      // neighbours cut for lying (on_byzantine), ascending
  bool connected = true;                     // of the live graph without the dead and cut peers
  std::vector<std::vector<int>> components;  // of the live graph
  std::vector<int> my_component;             // the component this peer is in (empty if dead)
  /// kPartition (the live graph split, or split differently), kHealed (whole again after a
  /// partition), or none (dead peers changed, the graph still connected).
  std::optional<MemberEventKind> event;
  std::string message;  // "peers dead: 2; live graph still connected", for logs
};

/// A peer's convergence monitor: given the dead peers (of the whole run, from the membership
/// view) after each round, it reports when that set changes and whether the live graph still
/// connects the others. Not thread-safe.
class ConvergenceMonitor {
 public:
  /// `topology` must outlive the monitor; `self` is this peer (-1: an outside observer).
  explicit ConvergenceMonitor(const Topology& topology, int self = -1)
      : topology_(&topology), self_(self) {}

  /// The change since the last call (at first, since "nobody dead"); nullopt when none. `cut`:
  /// the neighbours this peer no longer mixes with because they lie (gossip.on_byzantine: cut),
  /// left out of the live graph as the dead are.
  /// `round`: the round it is checked after; a new membership epoch is a change too.
  /// `unlinked`: neighbours whose link to this peer never formed: the live graph is taken
  /// without those links (both peers stay in it).
  /// `unheard`: peers among `dead` that nobody ever heard from (declared dead at incarnation 0:
  /// never started, or never linked to anyone). They are not gone, as a dead member is: the
  /// network the topology describes is not connected while one of them is missing, and each is
  /// a component of its own.
  std::optional<MonitorChange> check(const std::vector<int>& dead,
                                     const std::vector<int>& cut = {}, std::int64_t round = 0,
                                     const std::vector<int>& unlinked = {},
                                     const std::vector<int>& unheard = {});
  /// Whether the live graph was connected at the last change (true until one).
  bool connected() const { return connected_; }
  /// The components at the last change (one, of every peer, until one).
  const std::vector<std::vector<int>>& components() const { return components_; }

 private:
  const Topology* topology_;
  int self_;
  std::vector<int> dead_;
  std::vector<int> cut_;
  std::vector<int> unlinked_;
  std::vector<int> unheard_;
  std::size_t epoch_ = 0;
  bool connected_ = true;
  std::vector<std::vector<int>> components_;
};

/// One change of one entry of a membership view.
struct MemberChange {
  int peer = -1;          // whose entry changed (this peer's own, for a refutation)
  MemberEventKind event = MemberEventKind::kSuspect;  // kSuspect, kDead, kAlive (a suspicion
                          // refuted), kRejoin (back after having been declared dead)
  std::uint32_t incarnation = 0;  // of the new entry
  std::int64_t round = 0;         // this peer's round when it changed
};

/// This peer's membership view, SWIM-style (Das et al. 2002) with Lifeguard's suspicion
/// (Dadgar et al. 2018), driven by rounds so that the simulator and real peers take the same
/// steps:
///  - a neighbour this peer finds silent (nothing for a round, a closed link, no heartbeat for
///    monitor.suspect_after_s) is suspected at once;
///  - a suspicion held for `dead_after_rounds` rounds of this peer and `dead_after_s` seconds of
///    its clock (simulated, in the simulator) without a refutation becomes a death: only this
///    peer's own timer confirms a death, so "dead" events count confirmed deaths;
///  - views from neighbours merge entry by entry (the higher incarnation wins, and at equal
///    incarnations the graver state), with what an insider could abuse bounded:
///      * only a peer raises its own incarnation: a claim about peer X is believed at most at
///        the incarnation X is known to have announced (an alive entry), one more for a relayed
///        refutation; a higher one is lowered to that (and counted in inflated_claims());
///      * what others say of X's death is hearsay: it makes X suspect here, and dead only when
///        this peer's own timer runs out without X refuting it;
///      * a neighbour this peer hears directly right now (`direct`) is not suspected on
///        anyone's word (counted in vetoed_claims());
///      * "suspect" and "alive" events about one peer are rate-limited (a burst of
///        kMemberEventBurst, then one per second); those left out are counted in
///        suppressed_events(). Deaths and rejoins are never left out (a death takes a timer);
///  - a view that suspects or buries this peer at its own incarnation or above is refuted by
///    raising the incarnation past it (that is how a paused peer comes back, and how a restarted
///    one rejoins), by at most kMaxIncarnationStep at a time.
/// Not thread-safe.
class Membership {
 public:
  Membership(int peers, int self, std::int64_t dead_after_rounds, double dead_after_s = 0.0);

  const std::vector<Member>& view() const { return view_; }
  /// Changes with every change of view(): whether a view was sent since it last changed.
  std::uint64_t version() const { return version_; }
  int self() const { return self_; }
  /// Nothing came from `peer` for `round` (at `now` seconds): suspect it, unless it is
  /// suspected or dead already.
  void missed(int peer, std::int64_t round, double now = 0.0);
  /// Merges a neighbour's view (throws nothing: a view of the wrong size or with an unknown
  /// state is ignored and counted in ignored_views()). `direct`: the peers this peer hears
  /// directly right now (nullptr: no such knowledge, as in the simulator).
  void merge(const PeerView& view, std::int64_t round, double now = 0.0,
             const std::vector<int>* direct = nullptr);
  /// This peer (re)joins a running network with a view that knows nothing of it: the first
  /// view merged after this is believed at the incarnations it gives (its deaths still only
  /// suspicions here), as a newcomer takes its first neighbour's word for where everybody
  /// stands; the caps apply again from the next. Without it, a rejoiner that knows a peer at
  /// incarnation 0 learns that peer's refutations one step a view, and the old deaths that
  /// other views still carry bury it again at each step (counted in adopted_views()).
  void adopt_next_view() { adopt_next_ = restarted_ = true; }
  /// This peer is up: its own incarnation becomes at least 1, so that the members hear it exists
  /// (a peer every view holds at incarnation 0 has never been heard from). MonitoredExchange
  /// calls it when made and at restart().
  void appeared();
  /// Peers this view holds dead at incarnation 0, ascending: never heard from by anyone. None
  /// before a neighbour's view was merged, and none in a view that began afresh mid-run
  /// (adopt_next_view(): a restarted or rejoining peer knows only what it was told).
  std::vector<int> unheard() const;
  std::uint64_t adopted_views() const { return adopted_; }
  /// Turns suspicions held long enough into deaths; call once a round, after merging. Peers in
  /// `hold` (heard directly right now, or vouched for by an indirect probe's ack) stay
  /// suspected instead, for at most kMaxHeldSuspicion seconds of suspicion (counted in
  /// held_deaths()): a silent link is not a dead peer, and a liar's vouching is bounded.
  void tick(std::int64_t round, double now = 0.0, const std::vector<int>* hold = nullptr);
  /// The changes since the last call, in the order they happened.
  std::vector<MemberChange> take_changes();
  /// Peers this view holds dead / suspected, ascending.
  std::vector<int> dead() const;
  std::vector<int> suspected() const;
  std::uint64_t ignored_views() const { return ignored_; }
  std::uint64_t inflated_claims() const { return inflated_; }
  std::uint64_t vetoed_claims() const { return vetoed_; }
  std::uint64_t suppressed_events() const { return suppressed_; }
  std::uint64_t held_deaths() const { return held_; }

  static constexpr std::uint32_t kMaxIncarnationStep = 1u << 16;
  static constexpr double kMaxHeldSuspicion = 20.0;
  static constexpr double kMemberEventBurst = 8;
  static constexpr int kMergeBlock = 64;  // entries compared at once when merging a view

 private:
  void set(int peer, Member m, std::int64_t round, double now);
  void note(int peer, MemberEventKind event, std::uint32_t incarnation, std::int64_t round,
            double now);
  void merge_self(const Member& theirs, std::int64_t round, double now);
  /// The first entry of each block of `v` that is not byte-equal to ours; nullopt when an
  /// entry of those has an unknown state.
  std::optional<std::vector<int>> differing_blocks(const PeerView& v) const;

  int self_;
  std::int64_t dead_after_;
  double dead_after_s_;
  // Dense: one entry per peer of the run (8 bytes each). Everything else is kept only for the
  // peers it concerns, so that 10,000 virtual peers do not hold 10,000 of each apiece.
  std::vector<Member> view_;
  std::unordered_map<int, std::uint32_t> announced_;  // highest incarnation seen alive (> 0)
  bool adopt_next_ = false;  // adopt_next_view(): the next view merged is taken uncapped
  bool heard_view_ = false;  // a neighbour's view was merged (of the right size)
  bool restarted_ = false;   // adopt_next_view() was called: this view began afresh mid-run
  std::uint64_t adopted_ = 0;
  struct Suspicion {
    std::int64_t round = 0;  // this peer's round when it began suspecting
    double since = 0.0;      // and at what time
  };
  std::map<int, Suspicion> suspicions_;  // the peers suspected now, ascending
  struct Tokens {
    double tokens = kMemberEventBurst;  // rate limit of suspect/alive events
    double refill = 0.0;                // when the tokens were last topped up
  };
  std::unordered_map<int, Tokens> event_tokens_;  // of the peers that had an event
  int not_alive_ = 0;                             // entries suspect or dead
  std::uint64_t version_ = 0;
  std::vector<MemberChange> changes_;
  std::uint64_t ignored_ = 0;
  std::uint64_t inflated_ = 0;
  std::uint64_t vetoed_ = 0;
  std::uint64_t suppressed_ = 0;
  std::uint64_t held_ = 0;
};

/// SWIM's indirect probing (ping-req) over the sparse graph gossip runs on: a peer that finds a
/// neighbour silent asks the peers around it, by a request flooded at most kProbeTtl hops along
/// the views (each peer passes a request on once); a peer that hears the target directly
/// answers with an ack flooded back the same way. The ack reaching the origin says the target
/// is alive and only the origin's own link to it is silent, so the origin keeps it suspected
/// (left out of rounds) instead of declaring it dead. Killed and stopped peers are heard by
/// nobody, so their deaths are confirmed as fast as without probes. Every list here is bounded:
/// at most kMaxProbesPerView passed on per view, kProbeMemory remembered. Not thread-safe.
class Prober {
 public:
  Prober(int peers, int self);
  /// Asks about `target` unless this peer asked about it less than `interval` seconds ago.
  void ask(int target, double now, double interval);
  /// The probes a view from a neighbour carried; `hears(q)` says whether this peer hears q
  /// directly right now.
  void receive(std::span<const Probe> probes, double now, const std::function<bool(int)>& hears);
  /// The probes to pass on with the next view (taken).
  std::vector<Probe> take_outgoing() { return std::exchange(outgoing_, {}); }
  bool has_outgoing() const { return !outgoing_.empty(); }
  /// When an ack about `target` last reached this peer (negative: never).
  double vouched_at(int target) const {
    const auto it = vouched_at_.find(target);
    return it == vouched_at_.end() ? -1e300 : it->second;
  }
  /// Every peer an ack was about, and when the last one came.
  const std::unordered_map<int, double>& vouched() const { return vouched_at_; }
  std::uint64_t asked() const { return asked_; }
  std::uint64_t answered() const { return answered_; }
  std::uint64_t dropped() const { return dropped_; }

  static constexpr std::uint8_t kProbeTtl = 3;
  static constexpr std::size_t kProbeMemory = 4096;

 private:
  void queue(const Probe& p);
  /// False when this probe (kind, origin, nonce) was seen before; remembers it.
  bool first_time(const Probe& p);

  int self_;
  std::uint32_t peers_;
  std::uint32_t next_nonce_ = 1;
  // Only about the peers this one asked about (its neighbours): a run of 10,000 peers must not
  // hold 10,000 entries per peer here.
  std::unordered_map<int, double> asked_at_;
  std::unordered_map<int, double> vouched_at_;
  std::vector<std::pair<std::uint32_t, int>> mine_;  // (nonce, target) of our open requests
  std::vector<Probe> outgoing_;
  using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint8_t>;
  std::set<Key> seen_;
  std::deque<Key> seen_order_;
  std::uint64_t asked_ = 0, answered_ = 0, dropped_ = 0;
};

/// An Exchange that keeps the membership view of the peer it serves (DESIGN: the same code in
/// the simulator and in real peers). It wraps the transport's data plane and sends and takes
/// the views over its membership channel: every publish first sends the view to the same
/// peers; every collect leaves suspected and dead peers unwaited-for, merges the views that
/// came in, suspects in-neighbours that sent nothing, and ages the suspicions. dead_peers() is
/// the view's dead peers (of the whole run, not only neighbours). Above it the algorithm sees
/// the data plane alone. It knows nothing of the fault schedule: a run that cuts links puts a
/// CutLinks (gossip/faults.hpp) between it and the transport, on both planes, and a cut link is
/// then silent here like a broken one.
class MonitoredExchange final : public ForwardingExchange {
 public:
  /// `inner` (the data plane) and `channel` (the same transport's membership traffic, through
  /// the same fault decorators) must outlive this object. From `config` (the monitor: section)
  /// it takes the membership timing (dead_after_rounds, dead_after_s), the silence that
  /// suspects a neighbour (suspect_after_s: a neighbour the transport has not heard for this
  /// long, or whose link is down, is suspected and not waited for; transports without
  /// heartbeats, as the simulator's, go by rounds with nothing from it alone) and the adaptive
  /// deadline's floor (round_timeout_floor_s; see round_deadline). `clock` gives this peer's
  /// time in seconds (the simulated clock in the simulator; by default the time since
  /// construction).
  MonitoredExchange(Exchange& inner, MembershipChannel& channel, const MonitorConfig& config,
                    std::function<double()> clock = {});

  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;
  std::vector<int> dead_peers() const override { return membership_.dead(); }
  std::optional<Inbox> newest(std::span<const int> from) override;

  /// Stops mixing with `peer` for good (gossip.on_byzantine: cut): its messages are still
  /// received, so it is not taken for dead, but collect() and newest() no longer hand them on.
  void cut(int peer);
  /// `peers` left the member set (an elastic run): no longer watched, so their silence from
  /// now on is not taken for a death.
  void forget(std::span<const int> peers);
  /// The neighbours cut, ascending.
  const std::vector<int>& cut_peers() const { return cut_; }
  /// The latest round of a message collect() handed on from `peer`, -1 for none: where a dead
  /// neighbour was last heard (dead_announcement_round).
  std::int64_t last_message_round(int peer) const;

  /// Merges the views waiting (e.g. before a peer that fell behind catches up), as collect does.
  void merge_views(std::int64_t round);
  /// The view and the suspicions go by the round, tag / tags (Exchange::set_tags_per_round);
  /// 1 (the default): the tag is the round.
  void set_tags_per_round(int tags) override {
    tags_per_round_ = std::max(1, tags);
    inner_->set_tags_per_round(tags);
  }
  /// A restarted peer: a fresh view (incarnation 0, everyone alive), as a new process has, that
  /// adopts the first view it merges (Membership::adopt_next_view).
  void restart();
  /// Round deadlines that follow the measured round time (real peers, whose transport hears
  /// heartbeats): after kDeadlineWarmup rounds, a neighbour that heartbeats but has not sent
  /// its round is waited for kDeadlineFactor times the 95th percentile of the last
  /// kDeadlineWindow rounds' durations, at least monitor.round_timeout_floor_s, at most the
  /// caller's deadline (monitor.round_timeout_s), then left out (suspected, not dead) while the
  /// others go on. A floor of 0: the caller's deadline, as in the simulator.
  /// The deadline the last collect() used.
  std::chrono::milliseconds last_deadline() const { return last_deadline_; }

  static constexpr double kDeadlineFactor = 8.0;
  static constexpr std::size_t kDeadlineWindow = 64;
  static constexpr std::size_t kDeadlineWarmup = 16;
  static constexpr std::int64_t kOwnStallSlackMs = 1000;
  Membership& membership() { return membership_; }
  const Membership& membership() const { return membership_; }

 private:
  MembershipChannel* channel_;  // where the views go and come from (never null)
  Membership membership_;
  std::function<double()> clock_;
  std::uint64_t last_sent_ = kNeverSent;  // version of the view last sent
  static constexpr std::uint64_t kNeverSent = ~std::uint64_t{0};
  /// Sends the peers of `to` our view when it changed (or is due again), ahead of the publish
  /// for `tag`: what publish and publish_packet share.
  void before_publish(std::int64_t tag, std::span<const int> to);
  std::int64_t dead_after_rounds_;
  double dead_after_s_;
  double silence_s_ = 0.0;
  std::vector<int> talked_to_;  // every neighbour published to or collected from, ascending
  std::vector<int> cut_;        // neighbours no longer mixed with (cut()), ascending
  Prober prober_;
  std::unordered_map<int, std::int64_t> heard_round_;  // round each neighbour was last heard
  std::unordered_map<int, std::int64_t> message_round_;  // its latest message's round
  std::int64_t round_ = 0;                 // the round of the last collect
  int tags_per_round_ = 1;                 // exchanges a round (set_tags_per_round)
  double deadline_floor_s_ = 0.0;          // monitor.round_timeout_floor_s
  std::deque<double> round_seconds_;       // durations of the last rounds (collect to collect)
  double last_collect_ = -1.0;
  std::chrono::milliseconds last_deadline_{0};
  /// The deadline for this round (see last_deadline).
  std::chrono::milliseconds round_deadline(std::chrono::milliseconds ceiling) const;
  /// Whether this peer hears `peer` directly now: its heartbeats, or its round or view lately.
  bool hears(int peer, const std::optional<std::vector<int>>& heard) const;
  /// The neighbours heard within silence_s_ (nullopt: no silence rule, or no heartbeats).
  std::optional<std::vector<int>> heard_now() const;
  /// Whether heard_now() has an answer: a silence rule over a transport that hears heartbeats
  /// (asked of the transport once; it does not change).
  bool heartbeats() const {
    if (!heartbeats_) heartbeats_ = heard_now().has_value();
    return *heartbeats_;
  }
  mutable std::optional<bool> heartbeats_;
  void merge_views(std::int64_t round, const std::optional<std::vector<int>>& direct);
  void talked_to(std::span<const int> peers);
  /// collect()'s options with the monitor's: suspected and dead peers not waited for, the
  /// silence rule, the measured round deadline.
  CollectOptions monitored_options(const CollectOptions& options) const;
  /// Suspects each neighbour the transport no longer hears (`direct`), but those `ahead`.
  void suspect_silent(std::int64_t round, const std::optional<std::vector<int>>& direct,
                      const std::vector<int>& ahead, double now);
  /// Suspects each peer of `from` that was waited for and sent nothing (`got`), but those ahead.
  void suspect_missed(std::int64_t round, std::span<const int> from,
                      const std::vector<Inbox>& got, const std::vector<int>& no_wait,
                      const std::vector<int>& ahead, double now);
  /// Probes the suspects not heard directly, then the membership's tick, holding those heard
  /// or vouched for.
  void probe_and_tick(std::int64_t round, double now,
                      const std::optional<std::vector<int>>& direct);
};

/// What a peer's monitor says after each of its rounds, the same for a real peer and a
/// simulated one: its membership changes ("suspect", "dead", "alive", "rejoin"), the transport's
/// alerts ("identity_conflict", subject = the identity), and the live graph's changes (an
/// AlertEvent, then a "partition" or "healed" MemberEvent). Not thread-safe.
class MembershipWatch {
 public:
  /// `topology` must outlive the watch; `self` is the peer watched.
  MembershipWatch(const Topology& topology, int self) : self_(self), monitor_(topology, self) {}
  /// The events since the last call, in order; `seconds` is the peer's clock (simulated in the
  /// simulator), `messages` (when not null) gets a log line for each.
  std::vector<PeerEvent> operator()(MonitoredExchange& exchange, std::int64_t round,
                                    double seconds, std::vector<std::string>* messages = nullptr);
  /// gossip.on_byzantine: "cut" cuts a neighbour (MonitoredExchange::cut) the moment it becomes
  /// a suspect, with a "byzantine_cut" MemberEvent; "report" (the default) only reports it.
  void set_on_byzantine(ByzantinePolicy policy) { cut_liars_ = policy == ByzantinePolicy::kCut; }
  /// A transport that does not report refused messages itself (the simulator's): each sender's
  /// 1st, 2nd, 4th, 8th ... message left out for NaN or Inf becomes a "refused_params"
  /// MemberEvent here, as a real peer's transport alerts.
  void set_refusal_events(bool on) { refusal_events_ = on; }
  /// The live graph was split at the last change.
  bool partitioned() const { return partitioned_; }
  /// The run is over: a link down now (lost, not back, for kLostAtEndS or more) that no event
  /// has reported yet becomes a "link" event (kLost) at `round`, so a run that ends within the
  /// reconnect window still records it. `messages` as for operator().
  std::vector<PeerEvent> end_links(std::int64_t round, double seconds,
                                   std::vector<std::string>* messages = nullptr);
  /// Where the links' events and the transport's alerts come from: the transport's reports,
  /// read from the transport itself (nullptr, the default: a transport without links of its
  /// own — the simulator's, whose links always form and which raises no alerts: one process
  /// holds every identity, so none can conflict, and the messages it leaves out for NaN or Inf
  /// are this watch's own events, set_refusal_events).
  void set_link_reports(LinkReports* reports) { reports_ = reports; }
  /// Neighbours whose link never formed (reported kNeverFormed, not formed since), ascending.
  std::vector<int> unlinked() const;
  /// At the end, a link down for less than this may be a neighbour finishing (its bye not read
  /// yet): only one down longer is reported lost.
  static constexpr double kLostAtEndS = 1.0;
  const ConvergenceMonitor& monitor() const { return monitor_; }

  /// What the peer's last mix did with its in-neighbours' messages (gossip.aggregate): `flagged`
  /// the neighbours whose message it clipped, trimmed away or refused for NaN or Inf, `heard`
  /// every neighbour whose message came (flagged or not). A neighbour flagged in kSuspectFlags
  /// of the last kSuspectWindow rounds it was heard in becomes a "byzantine_suspect"
  /// MemberEvent (subject = it) at the next operator(); one that is then flagged in at most a
  /// quarter of them is cleared ("byzantine_cleared"). Near consensus an honest neighbour is
  /// now and then an outlier for a few rounds; a liar is one round after round.
  /// `nonfinite`: those of them left out for NaN or Inf, counted per sender (refused()).
  void observe_mix(std::span<const int> flagged, std::span<const int> heard,
                   std::span<const int> nonfinite = {});
  /// The neighbours suspected of lying now, ascending.
  std::vector<int> byzantine_suspects() const;
  /// Messages left out for NaN or Inf so far, per sender (ascending), as (sender, count).
  std::vector<std::pair<int, std::int64_t>> refused() const;
  static constexpr int kSuspectWindow = 10;
  static constexpr int kSuspectFlags = 8;

 private:
  int self_;
  ConvergenceMonitor monitor_;
  bool partitioned_ = false;
  bool cut_liars_ = false;
  bool refusal_events_ = false;
  struct Record {
    std::vector<bool> flags;  // the last kSuspectWindow rounds it was heard in, oldest first
    bool suspect = false;
    std::int64_t refused = 0;  // messages left out for NaN or Inf
  };
  std::map<int, Record> mixes_;
  std::vector<std::pair<int, MemberEventKind>> pending_;  // (neighbour, event) for operator()
  /// The last link change reported per neighbour (none yet: formed at the start, or pending).
  std::map<int, LinkChange> links_;
  std::map<int, std::tuple<LinkPath, int, std::string>> paths_;  // each link's path, as said
  bool reach_said_ = false;  // the reachability event is out
  LinkReports* reports_ = nullptr;
  /// The link events the transport's links() call for now (end: the run is over).
  std::vector<PeerEvent> link_events(std::int64_t round, double seconds, bool end,
                                     std::vector<std::string>* messages);
};

/// A view is sent when it changed, and at least this often (rounds) anyway.
inline constexpr std::int64_t kViewRefreshRounds = 8;

/// "1,4,7": peer ids for log lines.
std::string format_peers(std::span<const int> peers);
/// "{0,1} {2,3}": components for log lines and error messages.
std::string format_components(const std::vector<std::vector<int>>& components);

}  // namespace gossip
