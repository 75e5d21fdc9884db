/// net/mailbox: what the I/O thread hands the training thread — per neighbour a bounded queue of
/// received rounds, the link state, a pool of receive buffers — and the collect() rules of the
/// Exchange contract (sync: round r exactly; async: newest within the staleness). No Asio: the
/// I/O side only calls the methods marked "I/O thread". One mutex and one condition variable.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/mailbox.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gossip/exchange.hpp"
#include "gossip/host_memory.hpp"
#include "src/net/link_failure.hpp"
#include "src/net/link_state.hpp"

namespace gossip::net {

struct Message {
  std::int64_t round = -1;
  double weight = 1.0;
  HostFloats params;
  std::vector<std::byte> packet;  // a packet frame's payload instead of params
  bool finite = false;            // params all finite and weight positive (checked on receipt)
};

class Mailboxes;

/// One publish to one neighbour, in flight from publish() until its frame is written, dropped
/// (the link went down, the write failed, the session closed) or detached from the caller's
/// buffer (Session::detach_held): the token's end is the send's end, so nothing counts sends
/// by hand (as gloo ties completion to each buffer). Move-only; collect() waits for every
/// token of the last publish to end before the caller may reuse its buffer.
class SendToken {
 public:
  SendToken() = default;
  SendToken(SendToken&& other) noexcept : mail_(std::exchange(other.mail_, nullptr)) {}
  SendToken& operator=(SendToken&& other) noexcept {
    if (this != &other) {
      release();
      mail_ = std::exchange(other.mail_, nullptr);
    }
    return *this;
  }
  SendToken(const SendToken&) = delete;
  SendToken& operator=(const SendToken&) = delete;
  ~SendToken() { release(); }
  /// Ends the send now (idempotent).
  void release();
  /// The send has not ended yet.
  explicit operator bool() const { return mail_ != nullptr; }

 private:
  friend class Mailboxes;
  explicit SendToken(Mailboxes* mail) : mail_(mail) {}
  Mailboxes* mail_ = nullptr;
};

class Mailboxes {
 public:
  using Log = std::function<void(const std::string&)>;

  /// `host_memory` (may be null: plain memory) is where receive buffers come from; it must
  /// outlive the mailboxes.
  Mailboxes(int rank, int size, std::vector<int> neighbours, std::size_t param_count,
            std::size_t max_queued_rounds, Log log, HostMemory* host_memory = nullptr);

  bool is_neighbour(int peer) const;
  const std::vector<int>& neighbours() const { return neighbours_; }

  // --- I/O thread ----------------------------------------------------------------------------
  /// A buffer of param_count floats to receive into (recycled when possible).
  HostFloats take_buffer(int peer);
  /// Gives back a buffer that did not become a message (e.g. its CRC was wrong).
  void return_buffer(int peer, HostFloats buffer);
  /// Queues a received message; drops the oldest (with a log line) beyond max_queued_rounds.
  void deliver(int peer, Message message);
  /// The copy of the link's state the training thread reads (set by Link::become only).
  void set_state(int peer, LinkState state);
  /// The peer said bye (it finished or stopped on purpose): its silence is not a death.
  void set_left(int peer);
  /// Why the link to `peer` failed to form, or was lost, this time (a dial's error, a refused
  /// handshake): what links() says of a link that is not up.
  void note_failure(int peer, LinkFailure failure);
  /// Sets why a link that never formed did not, unless a failure was noted already.
  void note_never_formed(int peer, const LinkFailure& failure);
  /// How the link to `peer` formed this time (links() reports it): `path`, who dialled, the
  /// relay (rank, address) of a relayed link, TCP's round-trip time then.
  void note_path(int peer, LinkPath path, int dialler, int relay, std::string relay_address,
                 double rtt_ms);
  LinkState state(int peer) const;
  /// Keeps `peer`'s newest membership view (replacing an older one not yet taken) and adds the
  /// probes it carried to those not yet taken (at most wire::kMaxProbes per neighbour; more are
  /// dropped).
  void deliver_view(int peer, PeerView view);
  /// An announce frame's changes (kept until take_announcements, at most 4 * kMaxAnnouncements).
  void deliver_announcements(std::vector<Announcement> changes);
  std::vector<Announcement> take_announcements();
  /// The I/O thread hit an unexpected exception: every later call on the caller side throws.
  void fail(const std::string& what);
  /// Something arrived from `peer` (any frame, or part of one): it is not silent. `running`:
  /// a frame of a peer that runs its rounds (from then on its silence counts).
  void heard(int peer, bool running);
  /// This process itself was stopped or starved: the silence of every neighbour during that
  /// time is ours, not theirs, so it is forgiven; and for `grace` the links its neighbours
  /// closed on it meanwhile are waited for (they redial, or we do) instead of suspected, as at
  /// a start.
  void excuse_silence(std::chrono::milliseconds grace);
  /// Keeps an alert for take_alerts().
  void alert(TransportAlert alert);
  /// `peer` sent a parameter message that is not numbers (NaN or Inf, or a push-sum weight that
  /// is not a positive number): `why` says which. It is still delivered, so the round does not
  /// wait for it, and every algorithm leaves it out (hygiene: gossip/gossip.hpp's last_mix);
  /// the link stays up, since the peer is alive, and lying. Counted per sender; its 1st, 2nd,
  /// 4th, 8th, ... refusal becomes a "refused_params" alert (and a log line), so a peer that
  /// lies every round does not flood the record.
  void refused(int peer, const std::string& why);
  /// The I/O thread's heartbeat timer ran now. Until it runs again after this process was
  /// stopped, nobody's silence is judged (the caller may wake first and would see everyone
  /// silent).
  void io_tick();
  /// Seconds since anything came from `peer` (I/O thread or caller).
  double silent_for(int peer) const;
  /// The same, on the clock that this process's own stalls do not reset (excuse_silence): how
  /// long the link has really carried nothing (0 while the neighbour is still setting up).
  double frame_silence(int peer) const;
  /// This process was itself stopped or starved just now (its I/O thread is behind, or within
  /// the grace after it): what its links look like says little.
  bool recovering() const;

  // --- caller thread -------------------------------------------------------------------------
  /// The tokens of `count` sends that publish() hands to the I/O thread (SendToken).
  std::vector<SendToken> start_sends(std::size_t count);
  /// Waits until every neighbour is up (or gone) or `deadline` passes; returns those not up.
  std::vector<int> wait_connected(std::chrono::steady_clock::time_point deadline);
  /// The same for `peers` alone (neighbours), which are waited for until up, whatever their
  /// state: a link gone at the start may still come (NetConfig::later).
  std::vector<int> wait_up(std::span<const int> peers,
                           std::chrono::steady_clock::time_point deadline);
  /// Neighbours the start does not wait for (NetConfig::later).
  void set_later(std::span<const int> peers);
  /// See Exchange::collect. Also waits for the sends of the last publish to finish; before
  /// that wait, once the messages are in, it calls the hook set here (NetExchange: frames held
  /// for a neighbour a round behind stop counting, Session::detach_held).
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options);
  void on_sends_wait(std::function<void()> hook) { before_send_wait_ = std::move(hook); }
  std::vector<int> dead_peers() const;
  /// See MembershipChannel::take_views and heard_within, Exchange::excused_peers and newest,
  /// LinkReports::take_alerts.
  std::vector<PeerView> take_views();
  std::vector<int> excused_peers() const;
  std::vector<int> heard_within(double seconds) const;
  std::vector<TransportAlert> take_alerts();
  std::optional<Inbox> newest(std::span<const int> from);
  std::vector<int> peers_in(LinkState state) const;
  /// Each neighbour's link (see LinkReports::links), ascending.
  std::vector<LinkStatus> links() const;
  /// Whether `peer`'s parameters reach us through its shared memory (set at each handshake).
  void set_shared_memory(int peer, bool yes);
  /// Neighbours whose current link delivers through shared memory, ascending.
  std::vector<int> shared_memory_peers() const;
  /// Throws RuntimeError when fail() was called.
  void check_healthy() const;

 private:
  struct Box {
    LinkState state = LinkState::kConnecting;
    bool later = false;  // not expected at the start (NetConfig::later)
    bool shared_memory = false;
    std::deque<Message> queue;        // arrival order
    std::optional<Message> held;      // returned by the last collect; spans point into it
    std::vector<HostFloats> pool;
    std::optional<std::vector<Member>> view;  // the newest view not yet taken
    std::vector<Probe> probes;                // the probes that came with views, not yet taken
    std::uint64_t dropped = 0;                // rounds dropped for being too far ahead
    bool left = false;                        // said bye: finished, not dead
    std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_frame = std::chrono::steady_clock::now();
    // A frame of a peer running its rounds (a view, parameters) came over the current link:
    // until then the neighbour is setting up (loading its data, waiting for its other links,
    // building its model) and its silence means nothing.
    bool heard_since_up = false;
    std::optional<std::chrono::steady_clock::time_point> first_up;  // when it first formed
    std::chrono::steady_clock::time_point down_since{};  // when it last went down
    LinkFailure failure;  // the last reason it failed to form or was lost
    LinkStatus path;  // how it formed last: path, dialler, relay, relay_address, rtt_ms
  };
  bool silent(const Box& b, std::chrono::milliseconds after) const;
  /// This process's I/O thread has not ticked for a while: it (and so this peer) was stopped or
  /// starved, and nobody's silence can be judged until it has caught up.
  bool io_stalled() const;
  /// Within the grace after this process was stopped (excuse_silence).
  bool in_grace() const { return std::chrono::steady_clock::now() < grace_until_; }
  std::chrono::steady_clock::time_point grace_until_{};
  std::chrono::steady_clock::time_point io_tick_ = std::chrono::steady_clock::now();

  Box& box(int peer) { return boxes_[index_[peer]]; }
  const Box& box(int peer) const { return boxes_[index_[peer]]; }
  bool ready(const Box& b, std::int64_t round, const CollectOptions& options) const;
  /// Sync: whether `b` holds a message for a later round than `round` (so none for it will come).
  static bool ahead(const Box& b, std::int64_t round);
  void take(Box& b, std::int64_t round, const CollectOptions& options);
  /// collect's phases. The peers of `from` in ascending id, each checked a neighbour listed once.
  std::vector<int> collect_order(std::span<const int> from) const;
  /// Whether collect waits for peer `p` at all (mu_ held).
  bool waited(int p, const CollectOptions& options) const;
  /// Waits (on `lk`, of mu_) until each of `peers` has sent `round` or is not waited for, a
  /// failure, or `deadline`.
  void wait_messages(std::unique_lock<std::mutex>& lk, const std::vector<int>& peers,
                     std::int64_t round, const CollectOptions& options,
                     std::chrono::steady_clock::time_point deadline);
  /// Waits (on `lk`, of mu_) for the last publish's sends to end, or a failure.
  void wait_sends(std::unique_lock<std::mutex>& lk);
  /// The messages of `peers` for `round` (mu_ held); each waited-for peer without one adds its
  /// log line to `missed`.
  std::vector<Inbox> take_messages(const std::vector<int>& peers, std::int64_t round,
                                   const CollectOptions& options,
                                   std::vector<std::string>& missed);
  void recycle(Box& b, Message&& m);

  const int rank_;
  const std::size_t param_count_;
  HostMemory* const host_memory_;
  const std::size_t max_queued_;
  const Log log_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::vector<Announcement> announcements_;  // received, not yet taken
  std::vector<int> neighbours_;  // ascending
  std::vector<int> index_;       // rank -> box index, -1 for non-neighbours

  friend class SendToken;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Box> boxes_;
  std::size_t pending_sends_ = 0;
  std::function<void()> before_send_wait_;
  std::vector<int> excused_;  // left out of the last collect for being ahead, or gone by bye
  std::string failure_;
  std::vector<TransportAlert> alerts_;
  std::map<int, std::int64_t> refused_;  // parameter messages refused so far, per sender
};

}  // namespace gossip::net
