/// net/links: the I/O-thread half of NetExchange — the table of links to the neighbours, which
/// handshakes become the link to a neighbour (links.cpp), dialling with back-off and through the
/// relays (dialler.cpp, rendezvous.cpp), noticing lost links, and fanning a publish out to the
/// sessions (fanout.cpp). Exactly one TCP connection per neighbour pair: the lower rank dials,
/// unless the higher one cannot be dialled (it found itself unreachable, or net.reachable: no
/// says so), which then dials; when neither end can be dialled, both go to a relay. The parts
/// with one job each are their own classes: the port (acceptor.hpp), the I/O they share
/// (rendezvous_io.hpp), reachability (reachability.hpp), the relay service (relay_server.hpp),
/// the members' addresses (address_gossip.hpp) and the refusal log (refusal_log.hpp).
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/links.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include <asio.hpp>

#include "src/net/acceptor.hpp"
#include "src/net/address_gossip.hpp"
#include "src/net/reachability.hpp"
#include "src/net/refusal_log.hpp"
#include "src/net/relay_server.hpp"
#include "src/net/rendezvous_io.hpp"
#include "src/net/session.hpp"
#include "src/net/shm_path.hpp"
#include "src/net/stream_path.hpp"

namespace gossip::net {

class Links final : public Hub {
 public:
  using Clock = std::chrono::steady_clock;

  /// `endpoints[p]` is resolved for every neighbour p this rank dials (p > rank).
  Links(asio::io_context& io, asio::ip::tcp::acceptor& acceptor, const NetConfig& config,
        std::uint64_t max_frame_bytes, Mailboxes& mailboxes,
        std::vector<asio::ip::tcp::resolver::results_type> endpoints);

  // --- I/O thread ----------------------------------------------------------------------------
  /// Starts accepting and dials the higher-ranked neighbours until `give_up`.
  void start(Clock::time_point give_up);
  /// Dials the later neighbours (NetConfig::later) in `peers` that we dial, every 50 ms until
  /// they come.
  void expect(const std::vector<int>& peers);
  /// Sends one params frame (header + weight + `values`, the parameters in the link's wire
  /// format: the caller's floats, or their rounded copy that `keep` holds) to each of `to`,
  /// whose frame carries the send's token (`tokens`, one per target, in `to`'s order).
  void publish(std::int64_t round, std::span<const std::byte> values,
               std::shared_ptr<const void> keep, double weight, const std::vector<int>& to,
               std::vector<SendToken> tokens);
  /// Tells every neighbour linked over TCP that this peer now waits for `round` (a ready
  /// frame): it may send its parameters for that round (Session::send_params, the gate).
  void send_ready(std::int64_t round);
  /// Every held params frame ends its send (Session::detach_held).
  void detach_held();
  /// Sends one packet frame (header + the caller's bytes, always over TCP) to each of `to`.
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      const std::vector<int>& to, std::vector<SendToken> tokens);
  /// Sends a view frame (encoded once) to each of `to` whose link is up; `heartbeat` (the same
  /// view without probes) is what idle links get again later.
  /// Sends an announce frame to `to` and to every link established later.
  void send_announce(std::shared_ptr<const std::vector<std::byte>> frame,
                     const std::vector<int>& to);
  void send_view(std::shared_ptr<const std::vector<std::byte>> frame,
                 std::shared_ptr<const std::vector<std::byte>> heartbeat,
                 const std::vector<int>& to);
  /// Bye to every neighbour, stop accepting and dialling. run() returns once the byes are out.
  void shutdown();

  // --- any thread ----------------------------------------------------------------------------
  std::uint64_t bytes_sent() const { return bytes_sent_.load(); }
  std::uint64_t bytes_relayed() const { return relays_.bytes_relayed(); }
  /// Links this peer relays now (I/O thread).
  std::size_t relayed_links() const { return relays_.relayed_links(); }
  ReachabilityReport reachability() const { return reach_.report(); }
  /// The address rank `peer` is dialled at (AddressGossip::address_of).
  std::string address_of(int peer) const { return addresses_.address_of(peer); }
  /// Every member's address as this peer knows it now (NetExchange::addresses).
  std::vector<PeerAddress> addresses() const { return addresses_.addresses(); }
  /// Bytes sent to and received from each neighbour so far (NetExchange::link_traffic).
  std::vector<LinkTraffic> link_traffic() const;
  void log(const std::string& line) override;
  void log_refusal(const std::string& line) override;

  // --- Hub (I/O thread) ----------------------------------------------------------------------
  const wire::Hello& our_hello() const override { return hello_; }
  const NetConfig& config() const override { return config_; }
  std::uint64_t max_frame_bytes() const override { return max_frame_bytes_; }
  Mailboxes& mailboxes() override { return mail_; }
  asio::ssl::context* tls_context() override { return tls_.get(); }
  bool offers_side_path() const override { return !side_paths_.empty(); }
  std::optional<wire::Refusal> on_hello(Session& s, const wire::Hello& hello,
                                        std::uint32_t sender) override;
  void on_hello_ack(Session& s, const wire::Hello& hello) override;
  void on_established(Session& s) override;
  void on_address(Session& s, const wire::AddressRecord& record) override;
  void on_closed(Session& s, CloseKind kind, const std::string& why) override;
  void count_sent(int peer, std::size_t bytes) override;
  void count_received(int peer, std::size_t bytes) override;
  CryptoLog& crypto_log() override { return crypto_; }

 private:
  struct Link {
    explicit Link(asio::io_context& io) : dial_timer(io), gone_timer(io) {}
    std::shared_ptr<Session> session;  // the established connection, if any
    asio::ip::tcp::resolver::results_type endpoints;
    std::shared_ptr<asio::ip::tcp::socket> connecting;  // a dial in progress
    asio::steady_timer dial_timer;  // connect deadline, then back-off
    asio::steady_timer gone_timer;  // a lost link becomes gone after the reconnect window
    Clock::time_point give_up;
    std::chrono::milliseconds backoff{0};
    bool dialling = false;
    bool later = false;  // NetConfig::later: dialled every kRejoinRedial until it comes
    bool awaiting_address = false;  // to be dialled once its signed address record comes
    Clock::time_point last_sent{};  // when a frame was last queued on this link
    std::uint64_t conflicts = 0;    // second connections refused for this identity
    Clock::time_point last_conflict_alert{};
    // A link neither end can dial: asking relay candidate `relay_next` for it.
    bool relaying = false;
    std::size_t relay_next = 0;
    std::vector<std::string> relays_refused;  // relays (addresses) that altered its bytes
  };
  using Socket = RendezvousIo::Socket;

  /// Our shared segment, offered in hello_ when shared memory is on and can be had.
  void offer_shared_memory();
  /// A side path beside the stream: asked before it which links it carries, and asked at each
  /// handshake for the neighbour's reader.
  void add_side_path(std::unique_ptr<SidePath> path);
  /// The first side path's reader for `peer`'s side (nullptr: its publishes come by stream).
  std::unique_ptr<SidePathReader> side_reader_for(int peer, const wire::Hello& hello);
  AddressGossip::Hooks address_hooks();
  Acceptor::Hooks acceptor_hooks();
  /// Whether a neighbour we wait for has no address yet (and no link up).
  bool address_missing() const;
  /// Queues an address record's frame on every link that is up but the one to `except`.
  void pass_on(const FrameBytes& frame, int except);
  void start_session(asio::ip::tcp::socket socket);
  // --- rendezvous (src/net/rendezvous.cpp) ---
  /// Reads the rendezvous message a connection starts with and hands it to its service.
  void serve_rendezvous(Socket socket);
  /// Our reachability is kUnreachable: dial every neighbour not up, whatever its rank.
  void dial_all();
  /// Whether this peer dials `peer` (and redials it when the link is lost).
  bool we_dial(int peer) const;
  /// The relays this peer may ask, in order: (rank or -1, address).
  std::vector<std::pair<int, std::string>> relay_candidates(int peer) const;
  /// Asks the next relay candidate to carry the link to `peer` (neither end can dial the other).
  void relay_dial(int peer);
  /// The relay `address` (rank `relay`, or -1) answered the ask for `peer` on `socket` (nullopt:
  /// `why` not): the link starts through it, or the same relay is asked again, or `next`.
  void relay_answered(int peer, const Socket& socket, int relay, const std::string& address,
                      const std::function<void(const std::string&)>& next,
                      std::optional<wire::Rendezvous> m, const std::string& why);
  /// One direct dial of `peer` before the relays are asked again.
  void redial_between_relays(int peer);
  /// The relay answered ok: the link's session starts on `socket` (the lower rank's end dials).
  void start_relayed(int peer, std::shared_ptr<asio::ip::tcp::socket> socket, int relay,
                     const std::string& relay_address);

  void track(const std::shared_ptr<Session>& s);
  /// Accepted connections still in their handshake (TLS or hello).
  std::size_t unfinished_handshakes() const;
  void dial(int peer);
  /// A newer signed record of `peer` came (AddressGossip): dialled at its address from now.
  void learned(int peer);
  /// The socket options (set_socket_options); says once what became of net.congestion.
  void tune(asio::ip::tcp::socket& socket);
  void retry(int peer, const std::string& why);
  void adopt(int peer, Session& s, const wire::Hello& hello);
  /// Whether the lower rank of the pair dialled `s` (of two at once, that one is the link).
  bool dialled_by_lower(const Session& s) const;
  /// on_closed for a session that is not `p`'s live link `l`: a handshake that failed (or a
  /// replaced connection).
  void handshake_closed(Session& s, Link& l, int p, CloseKind kind, const std::string& why);
  void watch_gone(int peer);
  /// nullopt when a hello from `peer` on `s` may replace its link; else why not: the link it
  /// has is live (an identity_conflict alert, rate-limited, goes to the mailboxes).
  std::optional<wire::Refusal> identity_conflict(int peer, const Session& s);
  /// Closes links to neighbours silent past NetTimeouts::silent that have a write stuck.
  void abandon_stalled_writes();
  /// Every kHeartbeatCheck: our last membership view again on each link idle for kIdle (a
  /// peer waiting out a slow neighbour still tells the others what it believes).
  void heartbeat();
  /// Notes that a frame was queued to `peer` now.
  void sent_to(int peer) { links_[peer]->last_sent = Clock::now(); }

  asio::io_context& io_;
  const NetConfig& config_;
  const std::uint64_t max_frame_bytes_;
  Mailboxes& mail_;
  std::unique_ptr<asio::ssl::context> tls_;  // null when TLS is off
  // The parts (constructed in this order: each takes the ones before it).
  RefusalLog refusals_;
  RendezvousIo rv_;
  AddressGossip addresses_;
  ReachabilityCheck reach_;
  RelayServer relays_;
  Acceptor acceptor_;
  // How a publish travels (payload_path.hpp): asked in order, the first that carries a link
  // does; the stream, last, carries every link.
  std::vector<std::unique_ptr<SidePath>> side_paths_;  // ShmPath, when shared memory is on
  StreamPath stream_path_;
  std::vector<PayloadPath*> paths_;  // the side paths, then the stream
  wire::Hello hello_;
  std::vector<std::unique_ptr<Link>> links_;  // by rank; null for non-neighbours
  bool congestion_said_ = false;
  std::vector<std::weak_ptr<Session>> sessions_;
  asio::steady_timer heartbeat_;
  std::shared_ptr<const std::vector<std::byte>> last_view_;  // the view frame sent last
  std::shared_ptr<const std::vector<std::byte>> last_announce_;  // the announce frame sent last
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::size_t serving_ = 0;  // rendezvous connections being read
  // Per rank (zero for non-neighbours): read by any thread, added to by the I/O thread.
  std::vector<std::atomic<std::uint64_t>> sent_to_;
  std::vector<std::atomic<std::uint64_t>> received_from_;
  CryptoLog crypto_;
};

}  // namespace gossip::net
