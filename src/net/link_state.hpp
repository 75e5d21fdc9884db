/// net/link_state: the states a link to a neighbour can be in, one table row each — its name,
/// the states it may become and whether entering it is logged. A link changes state only through
/// Link::become (src/net/link.hpp), which checks the row; the Mailboxes keep a copy for the
/// training thread.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/link_state.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
#include <cstddef>
#include <cstdint>

namespace gossip::net {

enum class LinkState : std::uint8_t {
  kConnecting,  // not up yet, before the start deadline
  kUp,
  kDown,  // lost; may come back within the reconnect window
  kGone,  // said bye, was refused, or did not come (back) in time
};

/// Whether entering a state writes a log line: never, when the caller gives a reason (giving up
/// on a link is told, a bye is not), or always (a link coming up or lost is always told).
enum class LinkLog : std::uint8_t { kNever, kWithReason, kAlways };

constexpr unsigned link_state_bit(LinkState s) { return 1u << static_cast<unsigned>(s); }

struct LinkStateRow {
  LinkState state;
  const char* name;
  unsigned may_become;  // link_state_bit of each state it may become
  LinkLog log;
};

inline constexpr std::array<LinkStateRow, 4> kLinkStateRows{{
    {.state = LinkState::kConnecting,
     .name = "connecting",
     .may_become = link_state_bit(LinkState::kUp) | link_state_bit(LinkState::kGone),
     .log = LinkLog::kNever},
    // Up again: a new connection of the same peer replaced the one that was the link.
    {.state = LinkState::kUp,
     .name = "up",
     .may_become = link_state_bit(LinkState::kUp) | link_state_bit(LinkState::kDown) |
                   link_state_bit(LinkState::kGone),
     .log = LinkLog::kAlways},
    {.state = LinkState::kDown,
     .name = "down",
     .may_become = link_state_bit(LinkState::kUp) | link_state_bit(LinkState::kGone),
     .log = LinkLog::kAlways},
    // Gone again: a quiet redial of a gone peer refused, or given up on once more.
    {.state = LinkState::kGone,
     .name = "gone",
     .may_become = link_state_bit(LinkState::kUp) | link_state_bit(LinkState::kGone),
     .log = LinkLog::kWithReason},
}};

constexpr bool link_rows_complete() {
  for (std::size_t i = 0; i < kLinkStateRows.size(); ++i)
    if (static_cast<std::size_t>(kLinkStateRows[i].state) != i) return false;
  return true;
}
static_assert(link_rows_complete(), "kLinkStateRows needs one row per LinkState, in its order");

constexpr const LinkStateRow& link_state_row(LinkState s) {
  return kLinkStateRows[static_cast<std::size_t>(s)];
}
constexpr const char* link_state_name(LinkState s) { return link_state_row(s).name; }
constexpr bool may_become(LinkState from, LinkState to) {
  return (link_state_row(from).may_become & link_state_bit(to)) != 0;
}

}  // namespace gossip::net
