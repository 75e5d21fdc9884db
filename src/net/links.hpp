/// net/links: the I/O-thread half of NetExchange — which handshakes become the link to a
/// neighbour (links.cpp), noticing lost links, the rendezvous messages that come to our port
/// (rendezvous.cpp), and fanning a publish out to the sessions (fanout.cpp); it wires the parts
/// together. Exactly one TCP connection per neighbour pair: the lower rank dials, unless the
/// higher one cannot be dialled (it found itself unreachable, or net.reachable: no says so),
/// which then dials; when neither end can be dialled, both go to a relay. The parts with one job
/// each are their own classes: the link table (link.hpp: each link's state, connection, traffic
/// and last failure), the port (acceptor.hpp), the dialler (dialler.hpp), the I/O they share
/// (rendezvous_io.hpp), reachability (reachability.hpp), the relay service (relay_client.hpp,
/// relay_server.hpp), the members' addresses (address_gossip.hpp), the refusal log
/// (refusal_log.hpp) and the payload paths (payload_path.hpp).
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
#include "src/net/dialler.hpp"
#include "src/net/link.hpp"
#include "src/net/reachability.hpp"
#include "src/net/refusal_log.hpp"
#include "src/net/relay_client.hpp"
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
  void expect(const std::vector<int>& peers) { dialler_.expect(peers); }
  /// The start's deadline passed and the link to `peer` never formed: gone, told by `line`
  /// (nothing happens to a link that formed meanwhile).
  void not_formed_by_start(int peer, const std::string& line);
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
  Dialler::Hooks dialler_hooks();
  RelayClient::Hooks relay_hooks();
  /// Whether a neighbour we wait for has no address yet (and no link up).
  bool address_missing() const;
  /// Queues an address record's frame on every link that is up but the one to `except`.
  void pass_on(const FrameBytes& frame, int except);
  void start_session(asio::ip::tcp::socket socket);
  /// Our dial of `peer` connected: its session starts on `socket`.
  void start_dialled(int peer, asio::ip::tcp::socket socket);
  /// Reads the rendezvous message a connection starts with and hands it to its service
  /// (src/net/rendezvous.cpp).
  void serve_rendezvous(Socket socket);
  /// The relay answered ok: the link's session starts on `socket` (the lower rank's end dials).
  void start_relayed(int peer, Socket socket, int relay, const std::string& relay_address);

  void track(const std::shared_ptr<Session>& s);
  /// Accepted connections still in their handshake (TLS or hello).
  std::size_t unfinished_handshakes() const;
  /// The socket options (set_socket_options); says once what became of net.congestion.
  void tune(asio::ip::tcp::socket& socket);
  void adopt(int peer, Session& s, const wire::Hello& hello);
  /// Whether the lower rank of the pair dialled `s` (of two at once, that one is the link).
  bool dialled_by_lower(const Session& s) const;
  /// on_closed for a session that is not `p`'s live link `l`: a handshake that failed (or a
  /// replaced connection).
  void handshake_closed(Session& s, Link& l, CloseKind kind, const std::string& why);
  /// The relay of `s` altered the bytes of the link to `peer` (`what`): not asked for it again.
  void relay_altered(const Session& s, int peer, const std::string& what, const std::string& why);
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
  void sent_to(int peer) { links_[peer].last_sent = Clock::now(); }

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
  LinkTable links_;
  RelayClient relay_client_;
  Dialler dialler_;
  // How a publish travels (payload_path.hpp): asked in order, the first that carries a link
  // does; the stream, last, carries every link.
  std::vector<std::unique_ptr<SidePath>> side_paths_;  // ShmPath, when shared memory is on
  StreamPath stream_path_;
  std::vector<PayloadPath*> paths_;  // the side paths, then the stream
  wire::Hello hello_;
  bool congestion_said_ = false;
  std::vector<std::weak_ptr<Session>> sessions_;
  asio::steady_timer heartbeat_;
  std::shared_ptr<const std::vector<std::byte>> last_view_;  // the view frame sent last
  std::shared_ptr<const std::vector<std::byte>> last_announce_;  // the announce frame sent last
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::size_t serving_ = 0;  // rendezvous connections being read
  CryptoLog crypto_;
};

}  // namespace gossip::net
