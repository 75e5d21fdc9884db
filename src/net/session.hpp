/// net/session: one TCP connection, in the asio chat/timeouts pattern — shared-from-this; read a
/// header, then its body; one write in flight plus a queue; a deadline timer per operation.
/// A session runs the TLS handshake (unless TLS is off), then the hello handshake inside it, then
/// carries params frames both ways. Anything wrong with what the remote sends closes this
/// session only, with one log line naming the remote and why (rate-limited while the remote is
/// not authenticated). Everything here runs on the I/O thread. Its definitions are split by
/// phase: session.cpp (lifecycle, deadlines, bye, retire, close), session_handshake.cpp (TLS,
/// hello, hello-ack, refusals), session_read.cpp (reading and dispatching frames) and
/// session_send.cpp (the write queue and the round gate).
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/session.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "gossip/net.hpp"
#include "src/net/link_failure.hpp"
#include "src/net/mailbox.hpp"
#include "src/net/payload_path.hpp"
#include "src/net/tls.hpp"
#include "gossip/wire.hpp"

namespace gossip::net {

class Session;

enum class CloseKind {
  kError,     // I/O or protocol error, timeout: the link may come back
  kRefused,   // handshake refused either way: it will not come back
  kBye,       // the remote left on purpose
  kShutdown,  // we are shutting down
};

/// What a session needs from the exchange that owns it (implemented by Links).
class Hub {
 public:
  virtual ~Hub() = default;
  virtual const wire::Hello& our_hello() const = 0;
  virtual const NetConfig& config() const = 0;
  virtual std::uint64_t max_frame_bytes() const = 0;
  virtual Mailboxes& mailboxes() = 0;
  /// Whether we offer a side path (PayloadPath: shared memory) that a neighbour may read.
  virtual bool offers_side_path() const = 0;
  /// The TLS context every connection uses, or nullptr when TLS is off.
  virtual asio::ssl::context* tls_context() = 0;
  /// Acceptor side: nullopt when `hello` may become the link to its rank, else why not.
  virtual std::optional<wire::Refusal> on_hello(Session& s, const wire::Hello& hello,
                                                std::uint32_t sender) = 0;
  /// Dialler side: the handshake is done; the session becomes the link to its peer.
  virtual void on_hello_ack(Session& s, const wire::Hello& hello) = 0;
  /// Either side: the handshake is done and frames may be queued on `s`.
  virtual void on_established(Session& s) = 0;
  /// A signed address record `s`'s peer passed on (not yet checked).
  virtual void on_address(Session& s, const wire::AddressRecord& record) = 0;
  virtual void on_closed(Session& s, CloseKind kind, const std::string& why) = 0;
  /// Bytes written to, or read from, neighbour `peer` (frames on TCP plus parameters passed
  /// through shared memory); `peer` < 0 before the handshake has named it.
  virtual void count_sent(int peer, std::size_t bytes) = 0;
  virtual void count_received(int peer, std::size_t bytes) = 0;
  /// Where sessions time their sealing and opening of records (thread-safe).
  virtual CryptoLog& crypto_log() = 0;
  virtual void log(const std::string& line) = 0;
  /// A line about a connection that has not authenticated: logged at a bounded rate.
  virtual void log_refusal(const std::string& line) = 0;
};

class Session : public std::enable_shared_from_this<Session> {
  struct OutFrame;

 public:
  enum class Role { kAccepted, kDialled };
  using Frames = std::deque<OutFrame>;

  /// `target` is the peer dialled (kDialled), -1 for accepted connections.
  Session(asio::ip::tcp::socket socket, Hub& hub, Role role, int target);

  /// Arms the handshake deadline, runs the TLS handshake (when on); then dialled: sends hello;
  /// both: start reading.
  void start();
  /// Queues a publish's frame: `head` is header + weight (shared by every target), `body` the
  /// values (the caller's floats, or their rounded copy, which `keep` holds until the frame is
  /// written), written without copying. The frame holds `token` until it is written or dropped
  /// (or detached, below): its end is the send's. `round` >= 0 puts a whole-parameter frame
  /// under the receiver's gate; -1 (packets) never waits.
  ///
  /// The gate (a rendezvous, as MPI's for large messages): once the neighbour has said which
  /// round it waits for (ready frames), our frame for the round after that one is held until
  /// it asks for it, so a peer that runs a round ahead does not share the neighbour's link
  /// with the message the neighbour still waits for. A frame two or more rounds ahead is not
  /// held (the neighbour is far behind: holding would only pile frames up), and neither is
  /// anything before the neighbour's first ready frame.
  void send_params(std::shared_ptr<const std::vector<std::byte>> head,
                   std::span<const std::byte> body, std::shared_ptr<const void> keep,
                   std::int64_t round, SendToken token);
  /// Queues a ready frame: this peer has collected round - 1 and now waits for `round`.
  void send_ready(std::int64_t round);
  /// The params frames the gate holds end their sends (their tokens), their
  /// values copied when they are the caller's buffer: the caller may reuse its buffer while
  /// the frames wait for the neighbour. Returns how many were detached.
  std::size_t detach_held();
  /// Queues a side path's note frame (the publish went by that path: ShmPath); `param_bytes` is
  /// what the neighbour will read by that path, counted in bytes_sent once the frame is written.
  void send_side_note(std::shared_ptr<const std::vector<std::byte>> frame,
                      std::uint64_t param_bytes, SendToken token);
  /// Queues a view frame (this peer's membership view), when the handshake is done.
  void send_view(std::shared_ptr<const std::vector<std::byte>> frame);
  /// Queues bye and closes once it is written (or the write deadline passes).
  void say_bye();
  /// Closes now (idempotent); logs `why` unless it is empty; tells the hub.
  void close(const std::string& why, CloseKind kind);
  /// Replaced by another connection from the same peer (which took its publishes): writes
  /// nothing more and shuts its sending side once the write under way ends, but reads on, and
  /// delivers, what the remote sent until it shuts its side too (or `within` passes), so that
  /// nothing in flight on it is lost. Then closes quietly.
  void retire(std::chrono::milliseconds within);

  /// The publishes this session has not finished writing, taken over by the connection that
  /// replaces it, with their tokens: params frames only, not shared-memory notes.
  Frames take_publishes();
  /// Frames to write once this session has answered its handshake (from the one it replaces).
  void inherit(Frames frames);

  Role role() const { return role_; }
  /// The rank the remote's certificate proves (after the TLS handshake); -1 without TLS.
  int cert_rank() const { return cert_rank_; }
  /// The peer this session talks to (dial target, or the rank a hello claimed); -1 if unknown.
  int peer() const { return peer_; }
  bool established() const { return established_; }
  /// A write is in flight (it may be stuck on a peer that reads nothing).
  bool writing() const { return writing_; }
  bool closed() const { return closed_; }
  /// Called by the hub as the session becomes the link: the neighbour's segment, mapped (it is
  /// on this host), or nullptr. Once the handshake is answered the session says shm-ready.
  void attach_side_path(std::unique_ptr<SidePathReader> reader);
  /// The neighbour said shm-ready: it reads our publishes from our side path (ShmPath::carries).
  bool peer_reads_side_path() const { return peer_reads_side_; }
  const std::string& remote() const { return remote_; }
  /// A connection through a relay (set before start): the relay's rank (-1 for one named by
  /// address) and address.
  void set_relay(int rank, std::string address) {
    relayed_ = true;
    relay_ = rank;
    relay_address_ = std::move(address);
  }
  bool relayed() const { return relayed_; }
  int relay() const { return relay_; }
  const std::string& relay_address() const { return relay_address_; }
  /// What the remote sent failed authentication (a forged record, a bad TLS record MAC): whoever
  /// carried the bytes altered them.
  bool altered() const { return altered_; }
  /// What kind of failure ended the handshake, refused either way or broken off (kHandshake
  /// until it says more; kNone once established).
  LinkFailureKind failure() const { return established_ ? LinkFailureKind::kNone : failure_; }
  /// The words of the refusal this session sent or received ("" when none).
  const std::string& refusal_text() const { return refusal_text_; }
  /// TCP's round-trip time to the next hop (the remote, or the relay), ms; -1 when unknown.
  double rtt_ms();
  /// "peer 3 (127.0.0.1:41234)" or "connection from 127.0.0.1:41234".
  std::string who() const;

 private:
  struct OutFrame {
    std::shared_ptr<const std::vector<std::byte>> head;
    std::span<const std::byte> body;
    std::shared_ptr<const void> keep;  // owns `body` when it is not the caller's buffer
    bool publish = false;         // a publish's frame (params, packet or shared-memory note)
    bool close_after = false;
    std::uint64_t side_bytes = 0;  // parameter bytes this frame hands over by a side path
    std::int64_t round = -1;      // a params frame's round, for the gate; -1: never held
    bool records_after = false;   // hello, hello-ack: our records follow it (under TLS)
    SendToken token;              // a publish's send, until written, dropped or detached
  };

  /// Whether the gate holds out_[k] (see send_params).
  bool held(std::size_t k) const;

  void queue_frame(OutFrame frame);
  void queue_control(wire::FrameType type, std::span<const std::byte> payload, bool close_after);
  void write_next();
  void on_written(std::error_code ec, std::size_t bytes);
  /// A write failed: stop writing, but read what the remote sent before (session_send.cpp).
  void write_failed(std::error_code ec);
  void read_header();
  void on_header(std::error_code ec, std::size_t bytes);
  void read_control(const wire::FrameHeader& h);
  void on_control(const wire::FrameHeader& h);
  void read_params(const wire::FrameHeader& h);
  void read_params_chunk(const wire::FrameHeader& h);
  void on_params(const wire::FrameHeader& h);
  void on_side_note(const wire::FrameHeader& h);
  /// A packet frame: read its payload whole, check its CRC, deliver it (its contents are the
  /// algorithm's to check: gossip/compress.hpp).
  void read_packet(const wire::FrameHeader& h);
  /// rx_ holds a neighbour's round: check the values, deliver it, read on.
  void deliver_rx(std::int64_t round, double weight, bool all_finite);
  void on_hello(const wire::FrameHeader& h, const wire::Hello& hello);
  void on_hello_ack(const wire::Hello& hello);
  void on_tls_handshake(std::error_code ec);
  /// Sends hello (dialled) and starts reading frames.
  void begin_hello();
  /// Queues the frames inherited from a replaced connection.
  void send_inherited();
  /// Tells the remote why its handshake is refused (an error frame that carries the kind), and
  /// closes once that is written.
  void refuse(const wire::Refusal& refusal);
  /// Closes without telling the remote (no channel to tell it on), logging "<who> refused: why".
  void drop(const std::string& why, CloseKind kind);
  /// A line about this session: rate-limited while the remote is not authenticated.
  void note(const std::string& line);
  void arm(asio::steady_timer& timer, std::chrono::milliseconds after, const char* what);
  void read_failed(std::error_code ec, std::size_t got, std::size_t wanted, const char* part);

  Hub& hub_;
  Stream stream_;
  const Role role_;
  int peer_;
  std::string remote_;
  int cert_rank_ = -1;
  bool tls_done_ = false;
  bool relayed_ = false;
  int relay_ = -1;
  std::string relay_address_;
  bool altered_ = false;
  LinkFailureKind failure_ = LinkFailureKind::kHandshake;
  std::string refusal_text_;
  bool retired_ = false;  // retire(): nothing more is written; read to the end
  std::chrono::milliseconds retire_within_{0};
  void shut_sending();
  /// Notes whether `ec` says the remote's bytes failed authentication (altered_).
  void check_altered(const std::error_code& ec);
  bool established_ = false;
  bool closed_ = false;
  bool closing_ = false;  // a final frame (error, bye) is queued; read nothing more
  CloseKind final_kind_ = CloseKind::kShutdown;  // how the close after that frame counts
  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;

  wire::HeaderBytes header_{};
  std::vector<std::byte> control_;        // body of a control frame (<= 64 KiB)
  std::array<std::byte, wire::kWeightBytes> weight_{};
  HostFloats rx_;                         // params being received (from the mailbox pool)
  std::vector<std::uint16_t> rx_half_;    // a chunk of them as they came (bf16, fp16 links)
  std::vector<std::byte> rx_packet_;      // a packet frame's payload being received
  std::size_t rx_done_ = 0;               // values of rx_ received and checked so far
  std::uint32_t rx_crc_ = 0;              // CRC32C of the payload received so far
  bool rx_finite_ = true;                 // no NaN/Inf among them

  std::unique_ptr<SidePathReader> side_reader_;  // the neighbour's side path (same host), if any
  bool peer_reads_side_ = false;

  std::deque<OutFrame> out_;
  bool writing_ = false;
  std::int64_t peer_waits_for_ = -1;  // the round the neighbour's last ready frame named
  std::string write_error_;           // why a write failed; nothing is written after it
  Frames inherited_;
};

}  // namespace gossip::net
