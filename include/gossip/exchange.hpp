/// exchange: the one interface gossip algorithms talk through (DESIGN idea 2). NetExchange (Asio
/// TCP, src/net) and SimExchange (in memory, sim/) implement it; algorithms never see which.
///
/// Contract, for every implementation:
///  - publish(r, buf, w, to) sends `buf` (the whole flat parameter buffer) and the push-sum weight
///    `w` for round r to each peer in `to`. The caller keeps `buf` unchanged until the next
///    collect() returns (so a transport may send it without copying).
///  - publish_packet(r, bytes, to) sends an opaque packet instead (a compressed message or an
///    all-reduce chunk, gossip/packet.hpp): its length is its own, not the model's. The same
///    rules hold; the receiver finds it in Inbox::packet. An algorithm uses one of the two.
///  - collect(r, from, ...) returns what each peer in `from` published, in ascending peer id,
///    never in arrival order. In kSync mode it waits for round r exactly; in kAsync mode it takes
///    the newest message each neighbour has sent, waiting only for those older than
///    r - max_staleness. A neighbour that has nothing acceptable by the deadline is left out of
///    the result (the algorithm re-weights) and reported through dead_peers() when it is gone.
///  - Returned spans stay valid until the next collect() on the same Exchange.
///  - Calls come from one thread (the peer's training thread); implementations are free to run
///    I/O on their own threads.
///
/// Exchange is the data plane alone (DESIGN "Exchange by capability"). Membership traffic (views,
/// probes, announcements, heartbeats' evidence) is MembershipChannel, and what a transport knows
/// of its links (alerts included) is LinkReports, read by the peer from the transport itself.
/// Every virtual is pure: an implementation says what it does with each call, and what it cannot
/// do fails loudly.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/exchange.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossip/event_kind.hpp"

namespace gossip {

/// A peer's state in a membership view (SWIM): alive, suspected of having died, or declared dead.
enum class MemberState : std::uint8_t { kAlive = 0, kSuspect = 1, kDead = 2 };

/// One entry of a membership view: the state a peer is believed to be in and the incarnation that
/// belief is about. A peer raises its own incarnation to refute a suspicion (or to rejoin).
struct Member {
  std::uint32_t incarnation = 0;
  MemberState state = MemberState::kAlive;
  bool operator==(const Member&) const = default;
};

/// SWIM's indirect probe (ping-req), carried beside the membership views so that the simulator
/// and real peers run it alike. A peer that suspects its neighbour `target` asks the peers around
/// it (a request, flooded at most `ttl` hops); one that hears `target` directly answers with an
/// ack flooded back towards `origin`. An ack tells the origin that `target` is alive though its
/// own link to it is silent (a broken link, not a dead peer), so it holds off declaring a death.
enum class ProbeKind : std::uint8_t { kRequest = 0, kAck = 1 };
inline constexpr std::size_t kMaxProbesPerView = 64;  // probes one view may carry
inline constexpr std::uint8_t kMaxProbeTtl = 4;        // hops a probe may be given
struct Probe {
  ProbeKind kind = ProbeKind::kRequest;
  std::uint8_t ttl = 0;       // hops it may still travel
  std::uint32_t origin = 0;   // the peer that asked
  std::uint32_t target = 0;   // the peer asked about
  std::uint32_t nonce = 0;    // the origin's number for this request
  bool operator==(const Probe&) const = default;
};

/// A membership change of an elastic run that a peer announced (docs/membership.md): `rank`
/// joins, leaves on purpose, or was found dead (by the announcing peer's monitor), announced at
/// `round`. Announcements spread to every member (each peer passes on what it has not sent
/// yet); every peer derives the same member timeline from the same set. A join request is a new
/// identity asking the members it contacted to announce its join (`gossip peer --join`): it is
/// not passed on, and no part of the timeline.
struct Announcement {
  std::int32_t rank = 0;
  ChangeKind kind = ChangeKind::kJoin;
  std::int64_t round = 0;
  bool operator==(const Announcement&) const = default;
};
inline constexpr std::size_t kMaxAnnouncements = 4096;  // one message may carry

/// The event that records an announced membership change of `kind` (announce_join, ...): its
/// row's event (gossip/event_kind.hpp).
inline MemberEventKind announce_event(ChangeKind kind) { return change_row(kind).event; }

/// The change kind an announce_* event records (the first row with that event); nullopt for
/// any other event.
inline std::optional<ChangeKind> announced_change(MemberEventKind kind) {
  for (const ChangeRow& row : change_table())
    if (row.event == kind) return row.kind;
  return std::nullopt;
}


/// The view a neighbour sent: one Member per peer of the run, in rank order, and the probes it
/// passed on with it.
struct PeerView {
  int peer = -1;
  std::vector<Member> members;
  std::vector<Probe> probes = {};
};

/// One message taken from an in-neighbour.
struct Inbox {
  int peer = -1;                 // sender id
  std::int64_t round = -1;       // the round the sender published it for
  std::span<const float> params; // its parameter buffer (valid until the next collect)
  double weight = 1.0;           // push-sum weight (1 for algorithms that do not use it)
  std::span<const std::byte> packet;  // what publish_packet sent (params is then empty)
  // The transport already found every value finite and the weight a positive number as it
  // received them (NetExchange does, in the same pass as its copy or CRC): the algorithms'
  // NaN/Inf check then skips this message. False where nobody checked (the simulator).
  bool checked_finite = false;
};

enum class CollectMode { kSync, kAsync };

struct CollectOptions {
  CollectMode mode = CollectMode::kSync;
  std::int64_t max_staleness = 0;                  // async only: accept rounds >= r - staleness
  std::chrono::milliseconds deadline{60'000};      // how long to wait before leaving a peer out
  /// Peers not waited for at all (suspected or dead): taken when their message is already
  /// there, else left out at once.
  std::vector<int> no_wait;
  /// A peer the transport has heard nothing from (no frame, not even a heartbeat) for this long
  /// is not waited for either (0: no such rule). Only transports that hear heartbeats apply it.
  std::chrono::milliseconds silent_after{0};
};

/// Something the transport saw that is not a message and that the peer's record should say:
/// kIdentityConflict (a second live connection presented the certificate of `peer`, which
/// already has one; it was refused), kRefusedParams (messages of `peer` held NaN or Inf).
struct TransportAlert {
  MemberEventKind kind = MemberEventKind::kIdentityConflict;
  int peer = -1;
  std::string message;
};

/// What a peer found out about its own reachability, one row each: X(id, name, summary).
#define GOSSIP_REACHABILITIES(X)                                                                \
  X(kUnknown, "unknown", "no other member answered a dial-back request (yet)")                \
  X(kReachable, "reachable", "every member that answered dialled this peer back at its "       \
    "address")                                                                                  \
  X(kUnreachable, "unreachable", "a member could not dial this peer back at its address (or "  \
    "net.reachable: no says so)")

GOSSIP_NAMED_CHOICE(Reachability, GOSSIP_REACHABILITIES, reachability_table, reachability_name)

/// A peer's reachability as its transport found it (LinkReports::reachability).
struct ReachabilityReport {
  Reachability state = Reachability::kUnknown;
  bool settled = false;  // the check is over (or was not made: net.reachable yes or no)
  std::string how;       // e.g. "peers 3, 4 dialled 198.18.0.1:29500 back", or why not
};

/// Where a peer's knowledge of a member's address comes from, one row each: X(id, name, summary).
#define GOSSIP_ADDRESS_SOURCES(X)                                                               \
  X(kOwn, "own", "this peer's own: what it announces (net.advertise, else its listed address)") \
  X(kListed, "listed", "the run's configuration (peers:, or net.host and net.base_port)")       \
  X(kLearned, "learned", "the member's own signed record, passed on by the members it reached") \
  X(kUnknown, "unknown", "not listed, and no signed record of it has reached this peer")

GOSSIP_NAMED_CHOICE(AddressSource, GOSSIP_ADDRESS_SOURCES, address_source_table,
                    address_source_name)

/// A member's address as this peer knows it (LinkReports::addresses).
struct PeerAddress {
  int peer = -1;
  std::string address;  // "" when unknown
  AddressSource source = AddressSource::kUnknown;
};

/// How a link was made, one row each: X(id, name, summary).
#define GOSSIP_LINK_PATHS(X)                                                                    \
  X(kNone, "none", "not formed")                                                               \
  X(kDirect, "direct", "one TCP connection between the two peers, dialled by one of them")     \
  X(kRelayed, "relayed", "through a third member (or net.relays' relay), which forwards TLS "   \
    "records it can neither read nor alter undetected")

GOSSIP_NAMED_CHOICE(LinkPath, GOSSIP_LINK_PATHS, link_path_table, link_path_name)

/// Why a link failed to form, or was lost, one row each: X(id, name, summary). The words are
/// written here once: the run record, the monitor and `gossip doctor` read the kind, never the
/// text (LinkStatus::why is the detail: the address, the error, what the other end said).
#define GOSSIP_LINK_FAILURES(X)                                                                 \
  X(kNone, "none", "no failure")                                                               \
  X(kNoAddress, "no address", "not listed, and its signed record has not reached this peer")  \
  X(kRefused, "refused", "nothing listens at its address (the connection was refused)")        \
  X(kNoRoute, "no route", "the network cannot reach its address (a NAT or a firewall)")        \
  X(kTimedOut, "timed out", "its address did not answer within the handshake timeout")        \
  X(kConnectFailed, "failed", "the connect failed for another reason")                         \
  X(kHandshake, "handshake failed", "the connection broke off during the TLS or hello "        \
    "handshake")                                                                                \
  X(kHandshakeRefused, "handshake refused", "one end refused the other's hello (protocol, run " \
    "id, wire format, gossip settings)")                                                        \
  X(kIdentity, "identity", "a certificate or a claimed rank is not the one expected, or the "   \
    "identity is connected already")                                                            \
  X(kModel, "model fingerprint", "the two ends train models of another shape or size")         \
  X(kTopology, "topology fingerprint", "the two ends were given different topologies")         \
  X(kRelay, "relay", "no relay carried the link (none answered, or the other end did not come)") \
  X(kRelayAltered, "relay altered", "a relay altered the link's bytes; it is not used again")  \
  X(kLost, "link lost", "the link was up and broke (a write or read failed, or it fell silent)") \
  X(kNeverFormed, "never formed", "the other end was to dial, and did not within the start's "   \
    "wait")

GOSSIP_NAMED_CHOICE(LinkFailureKind, GOSSIP_LINK_FAILURES, link_failure_table, link_failure_name)

/// What a transport knows of its link to one neighbour (LinkReports::links).
struct LinkStatus {
  int peer = -1;
  bool formed = false;    // established at least once
  double formed_s = -1.0; // when it first was, in seconds since the transport started
  bool up = false;        // established now
  /// The transport no longer waits for it: it did not form by the end of the start's wait, or
  /// it was lost and did not come back within the reconnect window (nor by bye).
  bool given_up = false;
  bool left = false;      // the neighbour said bye (finished, or stopped on purpose)
  double down_s = 0.0;    // how long it has been down, having formed (0 while up)
  std::string why;        // the last reason it failed to form or was lost ("" when none)
  LinkFailureKind failure = LinkFailureKind::kNone;  // ... its kind (kNone with why "")
  // How it was made the last time it formed (path kNone until then): who dialled (a rank), and
  // for a relayed link the relay (its rank, -1 for a relay named by address) and address.
  LinkPath path = LinkPath::kNone;
  int dialler = -1;
  int relay = -1;
  std::string relay_address;
  double rtt_ms = -1.0;   // TCP's smoothed round-trip time to the next hop when it formed
};

/// "direct, dialled by 3, rtt 0.41 ms", "relayed through peer 2 (198.18.0.3:29502), dialled by
/// 4, rtt 0.52 ms to the relay", "none".
inline std::string describe_path(const LinkStatus& link) {
  if (link.path == LinkPath::kNone) return link_path_name(link.path);
  std::string out = link_path_name(link.path);
  if (link.path == LinkPath::kRelayed)
    out += link.relay >= 0 ? cat(" through peer ", link.relay, " (", link.relay_address, ")")
                           : cat(" through ", link.relay_address);
  if (link.dialler >= 0) out += cat(", dialled by ", link.dialler);
  if (link.rtt_ms >= 0) {
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.2f", link.rtt_ms);
    out += cat(", rtt ", rtt, " ms", link.path == LinkPath::kRelayed ? " to the relay" : "");
  }
  return out;
}

class Exchange {
 public:
  virtual ~Exchange() = default;

  /// This peer's id, 0..size()-1.
  virtual int rank() const = 0;
  /// Number of peers in the run.
  virtual int size() const = 0;

  /// Sends `params` and push-sum weight `weight` for `round` to every peer in `to`.
  virtual void publish(std::int64_t round, std::span<const float> params, double weight,
                       std::span<const int> to) = 0;

  /// Sends `packet` for `round` to every peer in `to` (the caller keeps it unchanged until the
  /// next collect() returns, as with publish).
  virtual void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                              std::span<const int> to) = 0;

  /// Takes what the peers in `from` published for `round` (see the contract above).
  virtual std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                                     const CollectOptions& options) = 0;

  /// Peers this exchange has found dead (connection lost and not back), ascending.
  virtual std::vector<int> dead_peers() const = 0;

  /// Total payload and header bytes this peer has sent.
  virtual std::uint64_t bytes_sent() const = 0;

  /// Peers the last collect() left out for a reason other than silence: what they had sent was
  /// for a later round than the one asked for (alive, and ahead of this peer: a synchronous run
  /// that fell behind), or they said goodbye (finished, or stopped on purpose), or this process was
  /// itself stopped or starved while it waited for them (their silence is its own).
  virtual std::vector<int> excused_peers() const = 0;
  /// The newest message any of `from` has sent that is waiting here (the lowest peer id among
  /// those of that round), without taking it; nullopt when none waits. A peer that finds itself
  /// rounds behind the others (restarted, or paused) uses it to catch up. The spans stay valid
  /// until the next collect() or newest().
  virtual std::optional<Inbox> newest(std::span<const int> from) = 0;

  /// The algorithm above exchanges `tags` times a round (relay phases: all-reduce's hops,
  /// choco's gossip steps), tagging them round * tags + step: the layers that go by rounds (the
  /// monitor, the fault schedule's) divide a tag by it. Told once, at the top of the stack,
  /// before the first exchange; a transport, which goes by tags alone, says so in its override.
  virtual void set_tags_per_round(int tags) = 0;
};

/// Membership traffic (DESIGN "Exchange by capability"): the monitor's views and probes, the
/// heartbeats' evidence of life, and an elastic run's announcements. A transport carries it
/// beside its Exchange (NetExchange all of it; SimExchange the views, its announcements throw:
/// the simulator derives the member timeline itself); the algorithms never see it. The monitor
/// (MonitoredExchange) and the elastic unit are given the channel they use, at construction or
/// as an argument: the fault schedule's cuts (CutLinks, a ForwardingMembership) over the
/// transport's own. Calls come from one thread, as for Exchange.
class MembershipChannel {
 public:
  virtual ~MembershipChannel() = default;
  /// Queues this peer's membership view, and the probes to pass on with it, for the peers in
  /// `to`, ahead of the messages of the publish for `round` (the same tag) that follows it.
  virtual void send_view(std::int64_t round, std::span<const Member> view,
                         std::span<const int> to, std::span<const Probe> probes = {}) = 0;
  /// The newest view each neighbour sent since the last call, ascending by peer.
  virtual std::vector<PeerView> take_views() = 0;
  /// Neighbours heard from within the last `seconds` (any frame, heartbeats included) over a
  /// link that is up, ascending: the direct evidence of life that outweighs what other peers
  /// claim. nullopt from a transport without heartbeats (it knows nothing of the kind), an
  /// answer the monitor reads as such (it then goes by rounds).
  virtual std::optional<std::vector<int>> heard_within(double seconds) const = 0;
  /// Sends the announcements this peer knows (every one, at most kMaxAnnouncements) to the
  /// peers in `to`; a channel with links also sends them to every link that comes up later.
  virtual void announce(std::span<const Announcement> known, std::span<const int> to) = 0;
  /// The announcements received since the last call (any order, repeats possible).
  virtual std::vector<Announcement> take_announcements() = 0;
};

/// What a transport with links of its own reports of them (NetExchange; the simulator's links
/// always form, and it has none of this): the links, reachability, relayed bytes, addresses and
/// the alerts. Read by the peer's record and its membership watch from the transport itself,
/// not through the Exchange decorators, which have nothing to add to it. Thread-safe.
class LinkReports {
 public:
  virtual ~LinkReports() = default;
  /// The alerts since the last call (a conflicting identity refused, parameters refused for
  /// NaN or Inf), in the order they were raised.
  virtual std::vector<TransportAlert> take_alerts() = 0;
  /// Each neighbour's link, ascending by peer.
  virtual std::vector<LinkStatus> links() const = 0;
  /// Whether this peer's neighbours can dial it, as far as the transport found out.
  virtual ReachabilityReport reachability() const = 0;
  /// Bytes this peer forwarded as a relay for other members' links.
  virtual std::uint64_t bytes_relayed() const = 0;
  /// Every member's address as this peer knows it, by rank.
  virtual std::vector<PeerAddress> addresses() const = 0;
};

/// What went over the link to one neighbour so far, in bytes (frames, and parameters passed
/// through a side path).
struct LinkTraffic {
  int peer = 0;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

/// A real peer's transport as the peer holds it (NetExchange, built in one place): the data
/// plane (Exchange), membership traffic (MembershipChannel), its links' reports (LinkReports),
/// and what only a transport with links of its own does — the start's waits, an elastic run's
/// later neighbours, traffic per link, and when its I/O thread sealed and opened TLS records.
class Transport : public Exchange, public MembershipChannel, public LinkReports {
 public:
  /// Neighbours whose link is up right now, ascending.
  virtual std::vector<int> connected_peers() const = 0;
  /// Tells the neighbours this peer now waits for `round` (a joiner before its first collect:
  /// their frames of that round are not held for it).
  virtual void waiting_for(std::int64_t round) = 0;
  /// Later neighbours (an elastic run's) that the graph now needs: dialled until they come.
  virtual void expect(std::span<const int> peers) = 0;
  /// Waits up to `timeout` for the links to `peers` to be up; returns those that are not.
  virtual std::vector<int> await_peers(std::span<const int> peers,
                                       std::chrono::milliseconds timeout) = 0;
  /// Bytes sent to and received from each neighbour so far, ascending (thread-safe).
  virtual std::vector<LinkTraffic> link_traffic() const = 0;
  /// When the I/O thread sealed and opened TLS records since the last call, as spans of the
  /// steady clock, in order (back-to-back records make one span; at most 65,536 are held
  /// between calls). Empty without TLS. A peer puts them on its timeline's `encrypt` track.
  using CryptoSpan =
      std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point>;
  virtual std::vector<CryptoSpan> take_crypto_spans() = 0;
};

/// The base of every Exchange decorator (the monitor, the fault schedule's cuts and attacks, the
/// peer's timeline): every virtual forwards to `inner` unchanged, so a decorator overrides only
/// what it changes and a virtual added to Exchange reaches the transport through every layer of
/// a stack (tests/test_peer.cpp walks one). A decorator takes its settings at construction.
/// `inner` must outlive the decorator; calls come from one thread, as for every Exchange.
class ForwardingExchange : public Exchange {
 public:
  explicit ForwardingExchange(Exchange& inner) : inner_(&inner) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override {
    inner_->publish(round, params, weight, to);
  }
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override {
    inner_->publish_packet(round, packet, to);
  }
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override {
    return inner_->collect(round, from, options);
  }
  std::vector<int> dead_peers() const override { return inner_->dead_peers(); }
  std::uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  std::vector<int> excused_peers() const override { return inner_->excused_peers(); }
  std::optional<Inbox> newest(std::span<const int> from) override { return inner_->newest(from); }
  void set_tags_per_round(int tags) override { inner_->set_tags_per_round(tags); }

 protected:
  Exchange* inner_;  // the layer below (never null)
};

/// The base of a MembershipChannel decorator (the fault schedule's cuts): every virtual forwards
/// to `channel` unchanged, as ForwardingExchange does for the data plane, so a decorator
/// overrides only what it changes. A decorator of both planes derives from both bases.
/// `channel` must outlive the decorator.
class ForwardingMembership : public MembershipChannel {
 public:
  explicit ForwardingMembership(MembershipChannel& channel) : channel_(&channel) {}

  void send_view(std::int64_t round, std::span<const Member> view, std::span<const int> to,
                 std::span<const Probe> probes = {}) override {
    channel_->send_view(round, view, to, probes);
  }
  std::vector<PeerView> take_views() override { return channel_->take_views(); }
  std::optional<std::vector<int>> heard_within(double seconds) const override {
    return channel_->heard_within(seconds);
  }
  void announce(std::span<const Announcement> known, std::span<const int> to) override {
    channel_->announce(known, to);
  }
  std::vector<Announcement> take_announcements() override {
    return channel_->take_announcements();
  }

 protected:
  MembershipChannel* channel_;  // the channel below (never null)
};

}  // namespace gossip
