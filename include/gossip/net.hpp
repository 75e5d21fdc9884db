/// net: NetExchange, the TCP implementation of Exchange (DESIGN idea 2), and the listener it runs
/// on. Asio stays inside src/net; this header uses the standard library and our own types only.
///
/// One TCP connection per neighbour pair, used both ways; the lower rank dials the higher. Each
/// connection starts with a handshake (protocol version, run id, model and topology
/// fingerprints, rank); a peer that disagrees is refused with a log line that says why. Frames
/// are little-endian with a CRC32C and a hard maximum size; docs/wire.md has the layout.
/// Neighbours on the same host read each other's parameters from shared memory (a sealed memfd
/// per peer) and use the TCP connection for everything else, unless shared_memory is off.
///
/// Every connection is mutual TLS 1.3 (OpenSSL, through asio::ssl) unless TLS is turned off:
/// both ends present a certificate signed by the run's CA whose subjectAltName URI
/// gossip://RUN/rank/R names the run and a rank, and the rank must be the one the hello claims.
/// The frames, the handshake and the shared-memory offer all travel inside that channel.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "gossip/net.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gossip/exchange.hpp"
#include "gossip/host_memory.hpp"
#include "gossip/wire.hpp"

namespace gossip {

struct NetTimeouts {
  std::chrono::milliseconds start{30'000};     // every link connected and handshaken by then
  std::chrono::milliseconds handshake{5'000};  // one hello / hello-ack exchange
  std::chrono::milliseconds io{30'000};        // writing one frame, or reading one frame's body
  std::chrono::milliseconds idle{0};           // waiting for the next frame header; 0 = forever
  std::chrono::milliseconds reconnect{10'000}; // how long a dialler retries a lost link
  std::chrono::milliseconds backoff_first{20}; // first retry delay, doubled up to backoff_max
  std::chrono::milliseconds backoff_max{1'000};
  /// A neighbour we have heard nothing from (no frame, not even a heartbeat: every link carries
  /// one at least every 250 ms) for this long is silent: a second connection may take over its
  /// identity, and a write stuck on it for twice this is abandoned (closing the link). 0 = never.
  std::chrono::milliseconds silent{0};
};

/// A peer's TLS credentials: PEM files. With `enabled`, all three must be given.
struct TlsConfig {
  bool enabled = true;  // false: plain TCP, anyone who reaches the port can join (a warning)
  std::string ca;       // CA certificate(s) that every peer's certificate must chain to
  std::string cert;     // this peer's certificate (and any intermediates after it)
  std::string key;      // its private key
};

/// Everything NetExchange needs. Thread-safety of `log`: it is called from the I/O thread and
/// the caller's thread, so it must be safe to call concurrently (the default one is).
struct NetConfig {
  int rank = 0;
  int size = 0;
  /// "host:port" per rank ("[::1]:port" for IPv6): the listed ones, and at `rank` what this
  /// peer announces; "" for a rank whose address is learned from its signed record (TLS on).
  std::vector<std::string> addresses;
  /// Whether the others' configuration lists addresses[rank] for this peer: when not, they
  /// learn it from its signed record, and this peer dials every neighbour itself.
  bool listed = true;
  std::vector<int> neighbours;         // undirected: in-neighbours ∪ out-neighbours
  /// Neighbours not expected at the start (an elastic run's ranks other than its first
  /// neighbours): neither dialled nor waited for by the constructor; expect() dials them (when
  /// we are the lower rank of the pair) every 50 ms until they come, and collect waits for
  /// them like any neighbour not yet up. Their own dial is accepted any time.
  std::vector<int> later;
  /// Neighbours this peer dials whatever their rank (a joiner's contacts, `gossip peer --join`),
  /// waited for by the constructor; a later neighbour takes such a dial from a higher rank.
  std::vector<int> contacts;
  HandshakeInfo handshake;
  std::uint64_t max_frame_bytes = 0;   // 0 = default_max_frame_bytes(handshake.param_count)
  std::size_t max_queued_rounds = 4;   // per neighbour; older rounds are dropped beyond this
  int socket_buffer_bytes = 4 << 20;   // SO_SNDBUF / SO_RCVBUF
  /// The TCP congestion control of every connection (TCP_CONGESTION: "cubic", "reno", "bbr",
  /// ...); empty = the system's. A name the kernel refuses is logged once and not used.
  std::string congestion;
  /// Neighbours on the same host (same boot and namespaces) read our parameters from shared
  /// memory instead of receiving them over TCP; the TCP link still carries everything else.
  bool shared_memory = true;
  TlsConfig tls;
  /// Accepted connections that have not finished the handshake (TLS and hello) yet; beyond
  /// this many, a new connection is closed at once (with a rate-limited log line).
  std::size_t max_pending_handshakes = 64;
  NetTimeouts timeouts;
  /// Whether neighbours can dial this peer: kAuto asks other members to dial it back at
  /// addresses[rank] (at most kMaxDialBackHelpers of them); an unreachable peer dials every
  /// neighbour itself (the lower rank of a pair dials otherwise).
  ReachableSetting reachable = ReachableSetting::kAuto;
  /// Relays for a link neither end can dial, tried in order: {rank, "host:port"} (rank -1 for a
  /// relay that is not a member). With relays_auto, every other member, lowest rank first
  /// (a member relays only once it has found itself reachable).
  std::vector<std::pair<int, std::string>> relays;
  bool relays_auto = true;
  std::function<void(const std::string&)> log;  // one line per event; empty = stderr
  /// Where neighbours' parameters are received (a GPU backend's page-locked memory, so their
  /// copies to the device go by DMA); null: plain memory. Must outlive the exchange.
  HostMemory* host_memory = nullptr;
};

/// What `gossip doctor` checks from one peer's place before a run (net::diagnose): each
/// neighbour's address, dialled as the peer would, and whether the neighbour can dial it back.
struct DoctorRequest {
  int rank = 0;
  std::vector<std::string> addresses;  // every rank's, as the run gives them ("host:port")
  std::vector<int> neighbours;
  std::string listen;                  // where this peer binds (it takes the dial backs there)
  std::string run_id;
  TlsConfig tls;
  std::chrono::milliseconds timeout{2'000};  // per connection, per answer
};

/// One neighbour, as diagnose() found it.
struct NeighbourCheck {
  int peer = -1;
  std::string address;
  std::string resolve_error;  // "" when the address resolves
  bool dialled = false;       // a TCP connection to it was made
  double connect_ms = -1.0;   // how long that took (about one round trip)
  std::string dial_error;     // why not: "refused (...)", "timed out ...", "no route (...)"
  LinkFailureKind dial_failure = LinkFailureKind::kNone;  // ... its kind
  int tls_rank = -1;          // the rank its certificate names (TLS on and the handshake done)
  std::string tls_error;      // why the TLS handshake failed or its identity is not ours
  bool asked = false;         // it answered the dial-back request
  bool dialled_back = false;  // it says it reached this peer's address
  bool probe_came = false;    // and its probe arrived where this peer listens
  std::string dial_back;      // the address it dialled, and why it could not
  std::optional<double> clock_offset_ms;  // its clock minus ours (from its answer)
};

struct DoctorReport {
  std::string listen_error;  // "" when diagnose() could listen at `listen` for the dial backs
  std::vector<NeighbourCheck> neighbours;
};

/// A relay candidate, as probe_relays() found it from this peer's place.
struct RelayCheck {
  int rank = -1;  // -1: a relay net.relays names by address
  std::string address;
  bool dialled = false;
  double connect_ms = -1.0;
  std::string error;  // why it was not dialled
};

/// Dials each of `candidates` ({rank or -1, "host:port"}) once, within `timeout` each.
std::vector<RelayCheck> probe_relays(const std::vector<std::pair<int, std::string>>& candidates,
                                     std::chrono::milliseconds timeout);

/// Checks each neighbour: the address resolves, a connection is made (its time), the TLS
/// identity it answers with (when TLS is on), and whether it can dial this peer back at its
/// address (a dial-back request; the probe is awaited at `listen`, when that can be bound:
/// not while this peer itself runs). Never throws for what the network does; bounded by
/// `timeout` per step.
DoctorReport diagnose(const DoctorRequest& request);

/// The URI a certificate carries in its subjectAltName to name `rank` of the run `run_id`:
/// "gossip://RUN/rank/R", with the run id percent-encoded (all but A-Z a-z 0-9 - . _ ~).
std::string tls_identity_uri(const std::string& run_id, int rank);

/// The file names `gossip keys init` and `gossip run` give a run's credentials in `dir`:
/// ca.pem, and peer-R.pem / peer-R.key for each rank (ca.key only from `gossip keys init`).
TlsConfig tls_files_in(const std::filesystem::path& dir, int rank);

/// A certificate authority that issues peer certificates (ECDSA P-256, SHA-256) through
/// OpenSSL: a fresh one per run, or a site's own loaded from PEM files. Every file written is
/// created readable by the owner only (0600).
class CertificateAuthority {
 public:
  /// A new self-signed CA for the run `run_id`, valid from an hour ago for `days` days.
  CertificateAuthority(const std::string& run_id, int days);
  /// An existing CA (e.g. a site's own): its certificate and unencrypted private key, PEM.
  /// Throws InputError naming the file when it cannot be read, the key does not match, or the
  /// certificate is not a CA.
  static CertificateAuthority load(const std::string& cert_file, const std::string& key_file);
  ~CertificateAuthority();
  CertificateAuthority(CertificateAuthority&&) noexcept;
  CertificateAuthority& operator=(CertificateAuthority&&) noexcept;

  /// Writes the CA certificate; and its private key when `key_file` is not empty.
  void write(const std::string& cert_file, const std::string& key_file = "") const;
  /// Issues a new key and a certificate naming `rank` of `run_id` (tls_identity_uri), for TLS
  /// client and server use, valid from `valid_from` to `valid_until` (offsets from now; the
  /// tests issue expired ones with negative offsets), and writes both.
  void issue(const std::string& run_id, int rank, const std::string& cert_file,
             const std::string& key_file, std::chrono::seconds valid_from,
             std::chrono::seconds valid_until) const;

 private:
  struct Impl;
  explicit CertificateAuthority(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// What `gossip keys init` and `gossip run` create in `dir` (made 0700 if new): a CA (or `ca`,
/// when given, issues) and a key and certificate for each of `peers` ranks of `run_id`, valid
/// for `days`; the CA's key is written (ca.key) only when `write_ca_key`. Refuses to overwrite
/// an existing ca.pem unless `overwrite`. Throws InputError / RuntimeError saying what failed.
struct KeySetOptions {
  std::string run_id = "gossip";
  int peers = 0;
  int days = 365;
  bool write_ca_key = true;
  bool overwrite = false;
  const CertificateAuthority* ca = nullptr;  // issue with this CA instead of a new one
};
void create_key_set(const std::filesystem::path& dir, const KeySetOptions& options);
/// Why the credentials create_key_set wrote in `dir` cannot serve `peers` ranks of `run_id` as
/// they are (a file missing or unreadable, a certificate its ca.pem did not issue, one for
/// another run or rank, a key that is not its certificate's, one expired or expiring within a
/// day); "" when they can. What `gossip run --resume` checks before it keeps a run's CA.
std::string key_set_problem(const std::filesystem::path& dir, const std::string& run_id,
                            int peers);

/// The largest frame a run with `param_count` floats needs: header, push-sum weight, the
/// parameters, and 64 KiB of slack for control frames.
std::uint64_t default_max_frame_bytes(std::uint64_t param_count);

/// The AEAD a TLS link's records use past the hello when TLS 1.3 negotiates its preferred suite,
/// TLS_AES_128_GCM_SHA256: "AES-128-OCB" where this OpenSSL provides it, else "AES-128-GCM"
/// (docs/wire.md, "Records").
std::string preferred_record_aead();

/// The rate OpenSSL seals records with the AEAD `aead` (an OpenSSL name: "AES-128-GCM",
/// "AES-128-OCB", "ChaCha20-Poly1305") on this machine, on one thread: bytes a second of sealing
/// `record_bytes`-long records (key schedule once, a fresh nonce, encrypt and tag per record),
/// best of `reps` passes over `total_bytes`. What a round's encryption must cost at the least
/// (`gossip bench gossip`, tls_over_aes_bound).
double aead_bytes_per_second(std::string_view aead, std::size_t total_bytes = 64u << 20,
                             std::size_t record_bytes = 128u << 10, int reps = 5);

/// A bound, listening TCP socket. Bind first (port 0 lets the OS choose), learn the port, then
/// hand it to NetExchange: that is how tests run N exchanges in one process.
class NetListener {
 public:
  /// Binds and listens on `address` ("host:port"). Throws InputError for a malformed address,
  /// RuntimeError when the port cannot be bound.
  explicit NetListener(const std::string& address);
  ~NetListener();
  NetListener(NetListener&&) noexcept;
  NetListener& operator=(NetListener&&) noexcept;

  /// The port actually bound (the OS's choice when asked for port 0).
  int port() const;
  /// "host:port" with the actual port, to put into NetConfig::addresses.
  std::string address() const;

 private:
  friend class NetExchange;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Exchange over TCP. The constructor starts the I/O thread, listens, dials the higher-ranked
/// neighbours (retrying with exponential back-off) and returns once every neighbour link is up
/// or the start deadline has passed; links still down then are reported by dead_peers().
/// publish() sends the caller's buffer without copying; collect() also waits until the previous
/// publish's sends have completed or failed, so the caller may then reuse the buffer.
/// All public calls come from one thread (the Exchange contract); the destructor says bye to
/// every neighbour, closes, and joins the I/O thread.
class NetExchange final : public Transport {
 public:
  /// Binds config.addresses[config.rank] itself.
  explicit NetExchange(NetConfig config);
  /// Uses an already bound listener (its port must match config.addresses[rank], or be the one
  /// the OS chose for it).
  NetExchange(NetConfig config, NetListener listener);
  ~NetExchange() override;
  NetExchange(const NetExchange&) = delete;
  NetExchange& operator=(const NetExchange&) = delete;

  int rank() const override;
  int size() const override;
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;
  std::vector<int> dead_peers() const override;
  std::uint64_t bytes_sent() const override;
  std::vector<int> excused_peers() const override;
  std::optional<Inbox> newest(std::span<const int> from) override;
  /// Ignored, on purpose: the transport takes every tag as it comes (round * tags + step) and
  /// divides none; its frames, mailboxes and ready gate all go by the tag.
  void set_tags_per_round(int) override {}

  void send_view(std::int64_t round, std::span<const Member> view, std::span<const int> to,
                 std::span<const Probe> probes = {}) override;
  std::vector<PeerView> take_views() override;
  std::optional<std::vector<int>> heard_within(double seconds) const override;
  void announce(std::span<const Announcement> known, std::span<const int> to) override;
  std::vector<Announcement> take_announcements() override;

  std::vector<TransportAlert> take_alerts() override;
  std::vector<LinkStatus> links() const override;
  ReachabilityReport reachability() const override;
  std::uint64_t bytes_relayed() const override;
  std::vector<PeerAddress> addresses() const override;

  std::vector<int> connected_peers() const override;
  void waiting_for(std::int64_t round) override;
  void expect(std::span<const int> peers) override;
  std::vector<int> await_peers(std::span<const int> peers,
                               std::chrono::milliseconds timeout) override;
  std::vector<LinkTraffic> link_traffic() const override;
  /// Those of them on this host whose parameters we read from their shared memory.
  std::vector<int> shared_memory_peers() const;
  std::vector<CryptoSpan> take_crypto_spans() override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// One response of HttpServer's handler.
struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// The small read-only HTTP/1.1 server behind the dashboard and /metrics. It answers GET and
/// HEAD, one request per connection, on its own I/O thread: `handler(path)` (the request target
/// without its query) runs there, so it must be thread-safe, and a slow or hostile client never
/// holds up the caller's rounds. A request head over kMaxRequestBytes gets 431, a malformed one
/// 400, another method 405, a client silent for kRequestTimeout is dropped, and past
/// kMaxConnections open connections a new one gets 503.
class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& path)>;
  static constexpr std::size_t kMaxRequestBytes = 8192;
  static constexpr std::chrono::seconds kRequestTimeout{5};
  static constexpr int kMaxConnections = 32;

  /// Listens on `address` ("host:port"; port 0: the OS chooses). Throws InputError for a
  /// malformed address, RuntimeError naming `what` and the address when it cannot listen
  /// there (the port is in use, the host is not this machine's).
  HttpServer(const std::string& address, Handler handler, const std::string& what);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// "host:port" with the port actually bound.
  std::string address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// GET http://ADDRESS/PATH: the body of a 200 answer, or nullopt (no answer within `timeout`,
/// another status, a malformed or oversized answer). For the launcher's scrape of its peers.
std::optional<std::string> http_get(const std::string& address, const std::string& path,
                                    std::chrono::milliseconds timeout);

}  // namespace gossip
