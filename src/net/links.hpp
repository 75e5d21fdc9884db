/// net/links: the I/O-thread half of NetExchange — accepting, dialling with back-off, deciding
/// which handshakes become the link to a neighbour, noticing lost links, and fanning a publish
/// out to the sessions. Exactly one TCP connection per neighbour pair: the lower rank dials,
/// unless the higher one cannot be dialled (it found itself unreachable, or net.reachable: no
/// says so), which then dials; when neither end can be dialled, both go to a relay. The same
/// port answers rendezvous messages (gossip/wire.hpp): dial-back requests, and relay requests
/// that this peer serves while it is reachable (src/net/rendezvous.cpp).
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

#include "src/net/address_book.hpp"
#include "src/net/session.hpp"

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
  std::uint64_t bytes_relayed() const { return bytes_relayed_.load(); }
  /// Links this peer relays now (I/O thread).
  std::size_t relayed_links() const { return relayed_links_; }
  ReachabilityReport reachability() const;
  /// The address rank `peer` is dialled at: its signed record's, else the listed one ("" when
  /// neither is known yet).
  std::string address_of(int peer) const;
  /// Every member's address as this peer knows it now (NetExchange::addresses).
  std::vector<PeerAddress> addresses() const;
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
  /// A relay request waiting at this peer for the other end of its link.
  struct Waiting {
    std::shared_ptr<asio::ip::tcp::socket> socket;
    std::uint32_t from = 0;
    std::shared_ptr<asio::steady_timer> timer;
  };

  void accept();
  /// A new connection: a rendezvous message (first byte) or a session's handshake.
  void sniff(std::shared_ptr<asio::ip::tcp::socket> socket);
  void start_session(asio::ip::tcp::socket socket);
  // --- rendezvous (src/net/rendezvous.cpp) ---
  /// Reads the rendezvous message a connection starts with and serves it.
  void serve_rendezvous(std::shared_ptr<asio::ip::tcp::socket> socket);
  void serve_dial_back(std::shared_ptr<asio::ip::tcp::socket> asker, const wire::Rendezvous& ask);
  void serve_relay(std::shared_ptr<asio::ip::tcp::socket> asker, const wire::Rendezvous& ask);
  /// Passes bytes both ways between two connections until either closes; counts them.
  void splice(std::shared_ptr<asio::ip::tcp::socket> a, std::shared_ptr<asio::ip::tcp::socket> b,
              std::string what);
  /// Finds out whether the other members can dial us (net.reachable: auto).
  void check_reachability(Clock::time_point deadline);
  void ask_dial_back(int helper, Clock::time_point deadline);
  void dial_back_answered(int helper, bool ok, const std::string& text);
  /// Helper `helper` said it dialled us back: its probe must arrive by `until`.
  void wait_for_probe(int helper, const std::string& text, Clock::time_point until);
  /// Settles our reachability; an unreachable peer dials the neighbours that would dial it.
  void settle_reachability(Reachability state, std::string how);
  /// Our reachability is kUnreachable: dial every neighbour not up, whatever its rank.
  void dial_all();
  /// Whether this peer dials `peer` (and redials it when the link is lost).
  bool we_dial(int peer) const;
  /// The relays this peer may ask, in order: (rank or -1, address).
  std::vector<std::pair<int, std::string>> relay_candidates(int peer) const;
  /// Asks the next relay candidate to carry the link to `peer` (neither end can dial the other).
  void relay_dial(int peer);
  /// One direct dial of `peer` before the relays are asked again.
  void redial_between_relays(int peer);
  /// The relay answered ok: the link's session starts on `socket` (the lower rank's end dials).
  void start_relayed(int peer, std::shared_ptr<asio::ip::tcp::socket> socket, int relay,
                     const std::string& relay_address);
  /// Endpoints of `address` ("host:port"), resolved once; empty when it does not resolve.
  const asio::ip::tcp::resolver::results_type& endpoints_of(const std::string& address);
  /// Writes `m` to `socket`, then calls `then` (with the write's error).
  void send_rendezvous(std::shared_ptr<asio::ip::tcp::socket> socket, const wire::Rendezvous& m,
                       std::function<void(std::error_code)> then);
  /// Reads one rendezvous message from `socket` within `within`; `then` gets it or why not.
  void read_rendezvous(std::shared_ptr<asio::ip::tcp::socket> socket,
                       std::chrono::milliseconds within,
                       std::function<void(std::optional<wire::Rendezvous>, std::string)> then);
  wire::Rendezvous rendezvous(wire::RendezvousKind kind, std::uint32_t to) const;
  /// Timers and sockets of the rendezvous, cancelled and closed at shutdown (but the two ends
  /// of a link we relay: spliced_).
  std::shared_ptr<asio::steady_timer> new_timer(std::chrono::milliseconds after);
  std::shared_ptr<asio::steady_timer> new_timer(Clock::time_point at);
  std::shared_ptr<asio::ip::tcp::socket> new_socket();
  /// A registered timer that closes `socket` after `within`, and whether it did (`late`):
  /// the pending operation on the socket then fails, and its handler says it timed out.
  struct Deadline {
    std::shared_ptr<asio::steady_timer> timer;
    std::shared_ptr<bool> late;
  };
  Deadline close_after(std::shared_ptr<asio::ip::tcp::socket> socket,
                       std::chrono::milliseconds within);
  void watch(const std::shared_ptr<asio::ip::tcp::socket>& socket);
  bool spliced(const asio::ip::tcp::socket& socket) const;
  void track(const std::shared_ptr<Session>& s);
  /// Accepted connections still in their handshake (TLS or hello).
  std::size_t unfinished_handshakes() const;
  void dial(int peer);
  /// A newer signed record of `peer` at `address`, passed on by `from`: dialled there from now.
  void learned(int peer, const std::string& address, int from);
  // --- address records (src/net/address_exchange.cpp) ---
  /// A record `from` passed on (a link's frame, or a rendezvous): checked, held and passed on
  /// to the other neighbours when new, an address_refused alert when not believed.
  AddressBook::Verdict take_record(const wire::AddressRecord& record, int from);
  /// While a neighbour's address is unknown (and its link not up), asks the members whose
  /// addresses are known, one each kAskAddressesEvery in turn, for the records they hold.
  void ask_addresses(Clock::time_point until);
  void ask_addresses_of(int member);
  void serve_address_ask(std::shared_ptr<asio::ip::tcp::socket> asker, const wire::Rendezvous& ask);
  /// Reads `count` address frames from `socket` within `within`; `then` gets them, or why not.
  struct RecordRead;
  void read_records(std::shared_ptr<asio::ip::tcp::socket> socket, std::shared_ptr<RecordRead> read);
  void read_records(std::shared_ptr<asio::ip::tcp::socket> socket, std::size_t count,
                    std::chrono::milliseconds within,
                    std::function<void(std::vector<wire::AddressRecord>, std::string)> then);
  /// `m` then every record we hold, as one write.
  std::shared_ptr<std::vector<std::byte>> with_records(const wire::Rendezvous& m) const;
  /// The socket options (set_socket_options); says once what became of net.congestion.
  void tune(asio::ip::tcp::socket& socket);
  void retry(int peer, const std::string& why);
  /// The neighbour's shared segment mapped, when it offered one, it is on this host and shared
  /// memory is on; else nullptr (TCP carries its parameters).
  std::unique_ptr<ShmView> map_segment(int peer, const wire::Hello& hello);
  void adopt(int peer, Session& s, const wire::Hello& hello);
  /// Whether the lower rank of the pair dialled `s` (of two at once, that one is the link).
  bool dialled_by_lower(const Session& s) const;
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
  asio::ip::tcp::acceptor& acceptor_;
  const NetConfig& config_;
  const std::uint64_t max_frame_bytes_;
  Mailboxes& mail_;
  std::unique_ptr<asio::ssl::context> tls_;  // null when TLS is off
  std::unique_ptr<ShmSegment> shm_;  // ours, offered in hello_ when shared memory is on
  wire::Hello hello_;
  std::vector<std::unique_ptr<Link>> links_;  // by rank; null for non-neighbours
  bool congestion_said_ = false;
  std::vector<std::weak_ptr<Session>> sessions_;
  asio::steady_timer accept_retry_;
  asio::steady_timer heartbeat_;
  std::shared_ptr<const std::vector<std::byte>> last_view_;  // the view frame sent last
  std::shared_ptr<const std::vector<std::byte>> last_announce_;  // the announce frame sent last
  // Addresses: the listed ones, replaced by the members' signed records as they come (written
  // by the I/O thread under addr_mu_, read by any thread).
  mutable std::mutex addr_mu_;
  std::vector<std::string> addresses_;
  std::vector<bool> learned_;
  std::unique_ptr<AddressBook> book_;
  std::vector<std::pair<int, int>> refused_records_;  // (passed on by, rank): said once each
  std::size_t ask_next_ = 0;  // the member ask_addresses asks next (in rank order)
  bool stopping_ = false;
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::atomic<std::uint64_t> bytes_relayed_{0};
  // Reachability (the report read from any thread under reach_mu_).
  mutable std::mutex reach_mu_;
  ReachabilityReport reach_;
  std::uint64_t probe_nonce_ = 0;
  std::vector<int> probes_from_;    // helpers whose dial back reached us
  std::vector<int> helpers_;        // members asked to dial us back
  std::vector<int> helpers_ok_;     // ... that did
  std::size_t helpers_done_ = 0;    // ... that answered, or will not
  std::optional<Clock::time_point> first_ok_;  // when the first dialled us back
  Clock::time_point probe_deadline_{};
  std::size_t sniffing_ = 0;        // accepted connections whose first byte is awaited
  std::size_t serving_ = 0;         // rendezvous connections being served
  std::size_t relayed_links_ = 0;   // links this peer relays now
  std::map<std::pair<std::uint32_t, std::uint32_t>, Waiting> waiting_;  // relay asks, by link
  std::map<std::string, asio::ip::tcp::resolver::results_type> resolved_;
  std::vector<std::weak_ptr<asio::steady_timer>> rendezvous_timers_;
  std::vector<std::weak_ptr<asio::ip::tcp::socket>> rendezvous_sockets_;
  std::vector<std::weak_ptr<asio::ip::tcp::socket>> spliced_;
  // Per rank (zero for non-neighbours): read by any thread, added to by the I/O thread.
  std::vector<std::atomic<std::uint64_t>> sent_to_;
  std::vector<std::atomic<std::uint64_t>> received_from_;
  CryptoLog crypto_;
  // Refusal lines: a burst of kRefusalBurst, then one a second; the rest are counted.
  double refusal_tokens_;
  Clock::time_point refusal_refill_ = Clock::now();
  std::uint64_t refusals_unlogged_ = 0;
  const std::uint64_t run_tag_;  // rendezvous_tag(run id)
};

}  // namespace gossip::net
