/// events: what a peer tells `gossip run` while it trains, one "@gossip TYPE key=value ..." line
/// on stdout per event. These structs are the only form the rest of the code sees; the line
/// format (strings percent-escaped, numbers exact) lives in one encoder and one parser.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/events.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gossip/event_kind.hpp"

namespace gossip {

/// The peer is connected to its neighbours and starts training.
struct ReadyEvent {
  int peer = 0;
  double seconds = 0.0;  // since the peer started
  int peers = 0;         // the network's size (the topology's peer count)
  std::string config;    // the run config's path, absolute (what `gossip collect` evaluates with)
  PeerStart start = PeerStart::kFresh;  // resumed: from its checkpoint of round `from`
  std::int64_t from = 0;        // the round it started at: the checkpoint's when resumed
  int restarts = 0;             // torchrun's TORCHELASTIC_RESTART_COUNT (0: none, or no torchrun)
};

/// The peer evaluated its model after `round` of `rounds`.
struct EvalEvent {
  int peer = 0;
  std::int64_t round = 0;
  std::int64_t rounds = 0;
  double epoch = 0.0;
  double loss = 0.0;
  double accuracy = 0.0;
  std::uint64_t bytes_sent = 0;
  double seconds = 0.0;
  std::string params;  // the parameter snapshot file; empty when none was written
};

/// The peer has completed `round` of `rounds` (sent every so often between evaluations, so the
/// launcher's progress moves).
struct RoundEvent {
  int peer = 0;
  std::int64_t round = 0;
  std::int64_t rounds = 0;
  double seconds = 0.0;  // since the peer started
  // For the dashboard: bytes over each link so far, "NEIGHBOUR:SENT:RECEIVED;..." (ascending
  // neighbour), and seconds per phase of its timeline so far (format_phase_seconds).
  std::string traffic;
  std::string phases;
};

/// The convergence monitor saw the set of dead neighbours change.
struct AlertEvent {
  int peer = 0;
  std::int64_t round = 0;
  bool connected = true;
  std::vector<int> dead;
  std::string message;
};

/// The live graph's components: each ascending, in order of their smallest peer.
using Components = std::vector<std::vector<int>>;

/// A membership event: the peer's view of `subject` changed ("suspect", "dead", "alive",
/// "rejoin"; subject = -1 for "partition" and "healed", which are about the live graph).
struct MemberEvent {
  int peer = 0;
  std::int64_t round = 0;
  double seconds = 0.0;        // since the peer started
  MemberEventKind event = MemberEventKind::kSuspect;
  int subject = -1;
  std::int64_t incarnation = 0;
  std::vector<int> dead;       // the peers this view holds dead, after the change
  Components components;       // of the live graph (partition and healed)
  std::vector<int> my_component;
};

/// What became of the peer's link to `neighbour` (kNeverFormed, kFormed, kLost, kBack): a fact
/// of its own transport, not a suspicion. `round`: from which round it holds (0 for a link that
/// never formed: absent from the start).
struct LinkEvent {
  int peer = 0;
  std::int64_t round = 0;
  double seconds = 0.0;    // since the peer started
  LinkChange change = LinkChange::kNeverFormed;
  int neighbour = -1;
  double formed_s = -1.0;  // when the link first formed (seconds since the peer started; -1: never)
  std::string reason;      // why it did not form, or was lost ("" for kFormed and kBack)
};

/// The peer finished training.
struct DoneEvent {
  int peer = 0;
  double accuracy = 0.0;
  std::string params_sha256;
  std::uint64_t bytes_sent = 0;
  double seconds = 0.0;
  std::string phases;  // seconds per phase of its timeline (format_phase_seconds)
  // Messages it left out for NaN or Inf, per sender: sender, count, sender, count, ...
  std::vector<int> refused;
  std::int64_t rounds = 0;  // the gossip rounds it ran
  double epoch = 0.0;       // epochs of its shard those rounds took (NaN: not known)
  // An exec: script's process that waits in finish() for the launcher's average of the final
  // parameters, to evaluate it with the script's own evaluate (docs/python.md).
  bool awaits_average = false;
};

using PeerEvent =
    std::variant<ReadyEvent, EvalEvent, RoundEvent, AlertEvent, MemberEvent, DoneEvent, LinkEvent>;

/// The event as one line (no newline), "@gossip eval peer=3 round=10 ...".
std::string encode_event(const PeerEvent& event);

/// The event as one JSON object on one line (a line of events.jsonl): {"event": TYPE, then the
/// fields under the names the event line uses}.
std::string event_json(const PeerEvent& event);

/// The event of a line written by encode_event; nullopt for any other line (another prefix, an
/// unknown type, a missing, repeated, unknown or malformed field). Never throws on bad input.
std::optional<PeerEvent> parse_event(std::string_view line);

}  // namespace gossip
