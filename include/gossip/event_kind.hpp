/// event_kind: every kind of membership event a peer records, one row each, the only place one is
/// named. The monitor makes them (MemberChange, MembershipWatch), the transport raises two as
/// alerts (TransportAlert), they cross to the launcher in the event codec by name and end in
/// events.jsonl and the dashboard under that name; everything between goes by the enum.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/event_kind.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string_view>

#include "gossip/choice.hpp"

namespace gossip {

// One row per kind: X(enum id, name, about the live graph (no subject), one line for docs)
#define GOSSIP_MEMBER_EVENTS(X)                                                                  \
  X(kSuspect, "suspect", false, "this peer suspects the subject of having died")                  \
  X(kDead, "dead", false, "this peer holds the subject dead (its own timer confirmed it)")         \
  X(kAlive, "alive", false, "a suspicion of the subject was refuted")                              \
  X(kRejoin, "rejoin", false, "the subject is back after having been held dead")                   \
  X(kPartition, "partition", true, "the live graph split, or split differently")                   \
  X(kHealed, "healed", true, "the live graph is whole again after a partition")                    \
  X(kByzantineSuspect, "byzantine_suspect", false, "the subject's messages look like lies")         \
  X(kByzantineCleared, "byzantine_cleared", false, "the subject is no longer suspected of lying")   \
  X(kByzantineCut, "byzantine_cut", false, "this peer no longer mixes with the subject")            \
  X(kRefusedParams, "refused_params", false, "a message of the subject held NaN or Inf, left out")  \
  X(kIdentityConflict, "identity_conflict", false,                                                 \
    "a second connection presented the subject's certificate; it was refused")                      \
  X(kAnnounceJoin, "announce_join", false, "the subject's join was announced (elastic runs)")       \
  X(kAnnounceLeave, "announce_leave", false, "the subject's leave was announced")                   \
  X(kAnnounceDead, "announce_dead", false, "the subject's death was announced to the members")    \
  X(kRelayAltered, "relay_altered", false,                                                         \
    "the relay of this peer's link to the subject altered what it forwarded; it is not used for "  \
    "that link again")                                                                             \
  X(kAddressRefused, "address_refused", false,                                                     \
    "a neighbour passed on an address record for the subject that its certificate does not sign; " \
    "it was not believed")

enum class MemberEventKind : std::uint8_t { GOSSIP_MEMBER_EVENTS(GOSSIP_CHOICE_ENUM) };

struct MemberEventRow {
  MemberEventKind kind;
  const char* name;
  bool about_graph;  // about the live graph: no subject
  const char* summary;
};

inline constexpr MemberEventRow kMemberEventTable[] = {
#define GOSSIP_MEMBER_EVENT_ROW(id, name, graph, summary) {MemberEventKind::id, name, graph, summary},
    GOSSIP_MEMBER_EVENTS(GOSSIP_MEMBER_EVENT_ROW)
#undef GOSSIP_MEMBER_EVENT_ROW
};

/// Every kind, in the table's order.
inline std::span<const MemberEventRow> member_event_table() { return kMemberEventTable; }

/// "suspect", "partition", ...: the name in event lines, events.jsonl and the dashboard.
inline const char* event_name(MemberEventKind kind) {
  return kMemberEventTable[static_cast<std::size_t>(kind)].name;
}

/// What a membership change does to the member set: adds or removes the rank from the round
/// it takes effect, drops it once its death is confirmed (drop_member), or nothing.
enum class ChangeEffect { kAdds, kRemoves, kDrops, kNone };

/// Every kind of membership change of an elastic run, one row each, the only place one is named:
/// X(id, name, effect, the member event recording its announcement, summary). The fault
/// schedule names a scheduled change by its name (its FaultAction row says which change it
/// is); announcements carry the row's index on the wire, so rows are only ever appended. A join
/// request is a new identity asking a member to announce its join: no change by itself.
#define GOSSIP_MEMBER_CHANGES(X)                                                                 \
  X(kJoin, "join", kAdds, kAnnounceJoin, "the rank joins the members")                           \
  X(kLeave, "leave", kRemoves, kAnnounceLeave, "the rank leaves the members on purpose")         \
  X(kDead, "dead", kDrops, kAnnounceDead, "the rank was found dead; dropped once confirmed")     \
  X(kJoinRequest, "join_request", kNone, kAnnounceJoin, "a new identity asks to be let in")

enum class ChangeKind : std::uint8_t { GOSSIP_MEMBER_CHANGES(GOSSIP_CHOICE_ENUM) };

struct ChangeRow {
  ChangeKind kind;
  const char* name;
  ChangeEffect effect;
  MemberEventKind event;  // records the change's announcement
  const char* summary;
};

inline constexpr ChangeRow kChangeTable[] = {
#define GOSSIP_MEMBER_CHANGE_ROW(id, name, effect, event, summary) \
  {ChangeKind::id, name, ChangeEffect::effect, MemberEventKind::event, summary},
    GOSSIP_MEMBER_CHANGES(GOSSIP_MEMBER_CHANGE_ROW)
#undef GOSSIP_MEMBER_CHANGE_ROW
};

/// Every change kind, in wire order.
inline std::span<const ChangeRow> change_table() { return kChangeTable; }
/// The row of `kind`.
inline const ChangeRow& change_row(ChangeKind kind) {
  return kChangeTable[static_cast<std::size_t>(kind)];
}

/// What became of a peer's link to one neighbour, one row each: X(id, name, summary). A peer
/// reports each change as a "link" event (gossip/events.hpp); the launcher builds the run's
/// graph from them (a link either end reports never formed, or lost, is not in it).
#define GOSSIP_LINK_CHANGES(X)                                                                  \
  X(kNeverFormed, "never_formed",                                                               \
    "the link did not form by the end of the start's wait (net.connect_timeout_s): absent "     \
    "from the live graph from round 0")                                                         \
  X(kFormed, "formed", "a link reported never formed formed after all")                        \
  X(kLost, "lost", "the link went down and did not come back (within the transport's "        \
    "reconnect window, or by the end of the run)")                                                                       \
  X(kBack, "back", "a link reported lost is up again")                                        \
  X(kPath, "path", "the link formed, or formed again another way: its path (direct and who "   \
    "dialled, or relayed and through whom) and round-trip time, in `reason`")                  \
  X(kReachability, "reachability", "this peer found out whether its neighbours can dial it "    \
    "(the neighbour is the peer itself): reachable, unreachable or unknown, and how, in "        \
    "`reason`")

GOSSIP_NAMED_CHOICE(LinkChange, GOSSIP_LINK_CHANGES, link_change_table, link_change_name)

/// How a peer's process began, one row each: X(id, name, summary) (the ready event's `start`,
/// summary.json's `start.as`; gossip collect says it of each torchrun restart).
#define GOSSIP_PEER_STARTS(X)                                                                   \
  X(kFresh, "fresh", "started over (no checkpoint)")                                           \
  X(kResumed, "resumed", "resumed from its checkpoint of round `from`")                        \
  X(kRejoined, "rejoined", "rejoined the running network from its neighbours")

GOSSIP_NAMED_CHOICE(PeerStart, GOSSIP_PEER_STARTS, peer_start_table, peer_start_name)

/// Whether the link is absent after `change` (it never formed, or was lost).
inline bool link_absent(LinkChange change) {
  return change == LinkChange::kNeverFormed || change == LinkChange::kLost;
}

/// Writes the kind's name (log lines, test messages).
inline std::ostream& operator<<(std::ostream& os, MemberEventKind kind) {
  return os << event_name(kind);
}

/// The kind named `name`; nullopt when none is (an event line from another version).
inline std::optional<MemberEventKind> find_member_event(std::string_view name) {
  for (const MemberEventRow& row : kMemberEventTable)
    if (name == row.name) return row.kind;
  return std::nullopt;
}

}  // namespace gossip
