/// net/link: one neighbour's link as the I/O thread holds it, and the table that owns them. A
/// link owns its state (link_state.hpp: one enum, a table row per state), changed only by
/// become(), which checks the row, logs as the row says and hands the Mailboxes their copy for
/// the training thread; the connection that is the link now; its traffic; its last failure as a
/// typed value (the Mailboxes report it). How links form is not here: the dialler, the relay
/// client and the acceptor each keep their own part of a link that is forming.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/link.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "src/net/link_failure.hpp"
#include "src/net/link_state.hpp"
#include "src/net/mailbox.hpp"
#include "src/net/session.hpp"

namespace gossip::net {

class Link {
 public:
  using Clock = std::chrono::steady_clock;
  using Log = std::function<void(const std::string&)>;

  Link(asio::io_context& io, int peer, Mailboxes& mail, const Log& log)
      : gone_timer(io), peer_(peer), mail_(mail), log_(log) {}
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int peer() const { return peer_; }
  LinkState state() const { return state_; }
  bool up() const { return state_ == LinkState::kUp; }
  /// The one place a link changes state: `next` must be a state this one may become (else
  /// std::logic_error: a bug of ours), and `line` is logged when the row says so (a row that
  /// always logs must be given one; one that never does, none).
  void become(LinkState next, const std::string& line = "");
  /// Why the link failed to form, or was lost, this time (the Mailboxes report it).
  void fail(LinkFailure failure);
  const LinkFailure& last_failure() const { return failure_; }

  /// The established connection that is the link, if any.
  std::shared_ptr<Session> session;
  /// Whether `session` is there, through its handshake and open.
  bool live() const { return session && session->established() && !session->closed(); }
  /// A lost link becomes gone after the reconnect window.
  asio::steady_timer gone_timer;
  Clock::time_point last_sent{};  // when a frame was last queued on this link
  std::uint64_t conflicts = 0;    // second connections refused for this identity
  Clock::time_point last_conflict_alert{};
  // Traffic: read by any thread, added to by the I/O thread.
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> received{0};

 private:
  LinkState state_ = LinkState::kConnecting;
  LinkFailure failure_;
  const int peer_;
  Mailboxes& mail_;
  const Log& log_;
};

/// The links to this peer's neighbours, by rank (built once: any thread may read the counters).
class LinkTable {
 public:
  LinkTable(asio::io_context& io, int size, const std::vector<int>& neighbours, Mailboxes& mail,
            Link::Log log);
  /// The link to `peer`; nullptr for a rank that is not a neighbour.
  Link* find(int peer) const;
  /// The link to neighbour `peer` (it must be one).
  Link& operator[](int peer) const { return *links_[peer]; }
  /// The neighbours, ascending.
  const std::vector<int>& neighbours() const { return neighbours_; }

 private:
  Link::Log log_;
  std::vector<int> neighbours_;
  std::vector<std::unique_ptr<Link>> links_;  // by rank; null for non-neighbours
};

}  // namespace gossip::net
