// Tests for net: the pure wire codec (CRC32C vectors, frames, handshake refusals), then real
// NetExchanges as threads over 127.0.0.1 with OS-chosen ports: a sync ring, a stranger sending
// garbage, a neighbour that leaves. Catch2 macros are used on the main thread only.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <filesystem>
#include <fstream>

#include "gossip/core.hpp"
#include "gossip/hash.hpp"
#include "gossip/net.hpp"
#include "src/net/address_book.hpp"
#include "src/net/mailbox.hpp"
#include "src/net/records.hpp"
#include "src/net/shm.hpp"
#include "src/net/socket.hpp"
#include "src/net/tls.hpp"
#include "gossip/checkpoint.hpp"
#include "gossip/monitor.hpp"
#include "gossip/wire.hpp"
#include "tests/tls_client.hpp"

using namespace gossip;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

/// The words of the refusal a peer saying `theirs` gets where we say `ours` ("" when none).
std::string refusal_text(const wire::Hello& ours, const wire::Hello& theirs) {
  const auto refusal = wire::refusal_of(ours, theirs);
  return refusal ? refusal->text : std::string();
}

/// The kind of that refusal (nullopt when none).
std::optional<wire::RefusalKind> refusal_kind(const wire::Hello& ours, const wire::Hello& theirs) {
  const auto refusal = wire::refusal_of(ours, theirs);
  return refusal ? std::optional(refusal->kind) : std::nullopt;
}

/// Collect options of a mode, staleness and deadline (no peer excused from waiting).
CollectOptions collect_options(CollectMode mode, std::int64_t staleness,
                               std::chrono::milliseconds deadline) {
  CollectOptions o;
  o.mode = mode;
  o.max_staleness = staleness;
  o.deadline = deadline;
  return o;
}

std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s)); }

/// The handshake of an MLP with these sizes (its fingerprint is "784-128-10").
HandshakeInfo model_info(std::vector<int> layers, std::uint64_t params) {
  std::string fingerprint;
  for (std::size_t i = 0; i < layers.size(); ++i) fingerprint += cat(i ? "-" : "", layers[i]);
  HandshakeInfo info;
  info.run_id = "test-run";
  info.model = fingerprint;
  info.param_count = params;
  info.topology_fingerprint = 0xC0FFEE;
  return info;
}

/// The run's TLS credentials for these tests: a CA of run "test-run" and a key and certificate
/// for ranks 0..7, made once per process in a temporary folder that is removed at exit. The CA
/// stays in memory so tests can issue more (expired, another run's).
struct TestKeys {
  std::filesystem::path dir;
  CertificateAuthority ca{"test-run", 1};
  TestKeys()
      : dir(std::filesystem::temp_directory_path() / cat("gossip-net-keys-", getpid())) {
    KeySetOptions o;
    o.run_id = "test-run";
    o.peers = 8;
    o.ca = &ca;
    o.overwrite = true;
    create_key_set(dir, o);
  }
  ~TestKeys() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TlsConfig rank(int r) const { return tls_files_in(dir, r); }
  test::ClientCredentials client(int r) const {
    const TlsConfig t = rank(r);
    return {t.ca, t.cert, t.key};
  }
};

TestKeys& keys() {
  static TestKeys k;
  return k;
}

/// Collects log lines from every thread; tests wait for the line they expect. Run with
/// GOSSIP_TEST_VERBOSE=1 to see them.
struct LogSink {
  std::mutex mu;
  std::vector<std::string> lines;
  const bool echo = std::getenv("GOSSIP_TEST_VERBOSE") != nullptr;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& l) {
      std::lock_guard lk(mu);
      lines.push_back(l);
      if (echo) std::fprintf(stderr, "%s\n", l.c_str());
    };
  }
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = 3s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard lk(mu);
        for (const auto& l : lines)
          if (l.find(needle) != std::string::npos) return true;
      }
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(10ms);
    }
  }
};

/// Deterministic, bit-pattern-rich parameters for (peer, round): signs, tiny and huge values.
std::vector<float> params_for(int peer, std::int64_t round, std::size_t n) {
  std::vector<float> v(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * (peer + 1) + 0x632BE59BD9B4E019ull * (round + 7);
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::uint32_t bits = static_cast<std::uint32_t>(x >> 32);
    if ((bits & 0x7F800000u) == 0x7F800000u) bits &= ~0x00800000u;  // no NaN/Inf
    std::memcpy(&f, &bits, sizeof f);
  }
  return v;
}

/// The bytes of float32 values, as a params frame and a shared slot carry them.
std::span<const std::byte> values_of(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

struct Cluster {
  std::vector<NetListener> listeners;
  std::vector<std::string> addresses;
  explicit Cluster(int n) {
    for (int i = 0; i < n; ++i) {
      listeners.emplace_back("127.0.0.1:0");
      addresses.push_back(listeners.back().address());
    }
  }
  NetConfig config(int rank, std::vector<int> neighbours, std::uint64_t params, LogSink& log) {
    NetConfig c;
    c.rank = rank;
    c.size = static_cast<int>(addresses.size());
    c.addresses = addresses;
    c.neighbours = std::move(neighbours);
    c.handshake = model_info({784, 128, 10}, params);
    c.timeouts.start = 10s;
    c.timeouts.reconnect = 2s;
    c.tls = keys().rank(rank);
    c.log = log.fn();
    return c;
  }
  /// Rank 1, whose only neighbour is rank 0, played by the test by hand: no wait for it.
  NetConfig by_hand(std::uint64_t params, LogSink& log) {
    NetConfig c = config(1, {0}, params, log);
    c.timeouts.start = 100ms;
    return c;
  }
};

/// A client by hand, to send the bytes a NetExchange would never send: over TLS with the given
/// credentials (by default rank 0's of the test run), or over plain TCP when `tls` is empty.
/// The TLS handshake runs at the first send or read, so a client may connect before the
/// exchange it talks to has started.
class RawClient {
 public:
  explicit RawClient(int port, std::optional<test::ClientCredentials> tls = keys().client(0))
      : fd_(::socket(AF_INET, SOCK_STREAM, 0)), creds_(std::move(tls)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{5, 0};  // every read and write below gives up after 5 s
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  ~RawClient() {
    tls_.reset();
    ::close(fd_);
  }
  bool connected() const { return connected_; }
  /// Runs the TLS handshake if it has not run yet; whether it completed (true for plain TCP).
  bool tls_ok() {
    if (!creds_) return true;
    if (!tls_) tls_ = std::make_unique<test::TlsClient>(fd_, *creds_);
    return tls_->ok();
  }
  std::string tls_error() const { return tls_ ? tls_->error() : ""; }
  void send(std::span<const std::byte> b) {
    if (creds_) {
      if (tls_ok()) tls_->write(b.data(), b.size());
      return;
    }
    while (!b.empty()) {  // bounded: each call either sends bytes or stops
      const auto n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the remote may already have closed on us
      b = b.subspan(static_cast<std::size_t>(n));
    }
  }
  /// Past the hello: `b` as one record with a bit flipped at `flip_at` (TlsClient).
  bool send_tampered(std::span<const std::byte> b, std::size_t flip_at) {
    return creds_ && tls_ok() && tls_->write_tampered(b.data(), b.size(), flip_at);
  }
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }
  bool read_exact(std::byte* p, std::size_t n) {
    while (n > 0) {
      const long got = creds_ ? (tls_ok() ? tls_->read(p, n) : 0) : ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  /// The next whole frame (of at most `max` bytes), or nothing if the connection closed or 5 s
  /// passed.
  std::optional<wire::Frame> read_frame(std::uint64_t max = 1 << 20) {
    std::vector<std::byte> head(wire::kHeaderBytes);
    if (!read_exact(head.data(), head.size())) return {};
    auto h = wire::decode_header(head, max);
    if (!h) return {};
    last_.assign(head.begin(), head.end());
    last_.resize(wire::kHeaderBytes + h.value->payload_bytes);
    if (!read_exact(last_.data() + wire::kHeaderBytes, h.value->payload_bytes)) return {};
    // Under TLS a params frame comes in our records, whose tag authenticated every byte: its
    // CRC field is 0 and not checked (docs/wire.md, "Records").
    if (creds_ && h.value->type == wire::FrameType::kParams)
      return wire::Frame{*h.value, std::span<const std::byte>(last_).subspan(wire::kHeaderBytes)};
    auto f = wire::decode_frame(last_, max);
    return f ? f.value : std::nullopt;
  }
  /// True if the remote closes the connection (EOF, reset, or a TLS alert) within 5 s.
  bool closed_by_remote() {
    std::byte buf[4096];
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < end) {
      if (creds_) {
        if (!tls_ok()) return true;
        if (tls_->read(buf, sizeof buf) == 0) return true;
        continue;
      }
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
  std::optional<test::ClientCredentials> creds_;
  std::unique_ptr<test::TlsClient> tls_;
  std::vector<std::byte> last_;
};

std::vector<std::byte> hello_frame(int rank, const HandshakeInfo& info,
                                   std::optional<wire::ShmOffer> shm = std::nullopt) {
  const auto payload = wire::encode_hello(wire::Hello{wire::kVersion, rank, info, shm});
  return wire::encode_frame(wire::FrameType::kHello, static_cast<std::uint32_t>(rank), 0, payload);
}

std::vector<std::byte> params_frame(int sender, std::int64_t round, std::span<const float> p) {
  std::vector<std::byte> payload(wire::kWeightBytes);
  const double w = 0.5;
  std::memcpy(payload.data(), &w, sizeof w);
  const auto body = std::as_bytes(p);
  payload.insert(payload.end(), body.begin(), body.end());
  return wire::encode_frame(wire::FrameType::kParams, static_cast<std::uint32_t>(sender), round,
                            payload);
}

/// A params frame in format `wire`: the values narrowed to 16 bits for bf16 and fp16.
std::vector<std::byte> params_frame_in(WireFormat wire, int sender, std::int64_t round,
                                       std::span<const float> p, double weight = 0.5) {
  return wire::encode_frame(wire::FrameType::kParams, static_cast<std::uint32_t>(sender), round,
                            wire::encode_params(p, weight, wire));
}

/// What a receiver holds of `p` sent in format `wire`.
std::vector<float> rounded(std::vector<float> p, WireFormat wire) {
  round_to_wire(std::span<float>(p), wire);
  return p;
}

/// Parameters every wire format can carry (|x| < 2: no fp16 overflow), with the bit patterns
/// of params_for otherwise: signs, float32 subnormals, values that round either way.
std::vector<float> small_params_for(int peer, std::int64_t round, std::size_t n) {
  auto v = params_for(peer, round, n);
  for (auto& f : v) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits &= ~0x40000000u;  // exponent below 128
    std::memcpy(&f, &bits, 4);
  }
  return v;
}

/// Connects to `port` as rank 0 and sends hello (with `offer`, if any); REQUIREs a hello-ack,
/// whose handshake lands in `theirs` when given.
std::unique_ptr<RawClient> join_as_rank0(int port, const HandshakeInfo& info,
                                         std::optional<wire::ShmOffer> offer,
                                         wire::Hello* theirs = nullptr) {
  auto raw = std::make_unique<RawClient>(port);
  raw->send(hello_frame(0, info, offer));
  const auto ack = raw->read_frame();
  REQUIRE(ack);
  REQUIRE(ack->header.type == wire::FrameType::kHelloAck);
  if (theirs) {
    auto hello = wire::decode_hello(ack->payload);
    REQUIRE(hello);
    *theirs = *hello.value;
  }
  return raw;
}

/// Rank 1 as a NetExchange with shared memory off (its parameters travel over TCP), and rank 0
/// played by hand: a RawClient that has done its handshake with it.
struct TcpByHand {
  Cluster cluster{2};
  LogSink log;
  std::unique_ptr<NetExchange> b;
  std::unique_ptr<RawClient> raw;
  int port = 0;  // rank 1's
  explicit TcpByHand(std::size_t params) {
    port = cluster.listeners[1].port();
    auto config = cluster.by_hand(params, log);
    config.shared_memory = false;
    b = std::make_unique<NetExchange>(std::move(config), std::move(cluster.listeners[1]));
    raw = join_as_rank0(port, model_info({784, 128, 10}, params), std::nullopt);
  }
};

/// Starts ranks 0 and 1 of `cluster` with configs that disagree (rank 0 on another thread:
/// each constructor waits for its neighbour, 1.5 s at most), and checks that each gave the
/// other up as refused.
/// Starts ranks 0 and 1, whose handshakes refuse each other; returns the kind of failure each
/// end's link reports (LinkStatus::failure), rank 0's first.
std::pair<LinkFailureKind, LinkFailureKind> start_refusing_pair(Cluster& cluster, NetConfig c0,
                                                                NetConfig c1) {
  c0.timeouts.start = c1.timeouts.start = 1500ms;
  auto a = std::async(std::launch::async, [&, l = std::move(cluster.listeners[0])]() mutable {
    return std::make_unique<NetExchange>(c0, std::move(l));
  });
  NetExchange ex1(c1, std::move(cluster.listeners[1]));
  auto ex0 = a.get();
  CHECK(ex0->dead_peers() == std::vector<int>{1});
  CHECK(ex1.dead_peers() == std::vector<int>{0});
  const auto l0 = ex0->links(), l1 = ex1.links();
  REQUIRE(l0.size() == 1);
  REQUIRE(l1.size() == 1);
  CHECK(!l0[0].why.empty());
  return {l0[0].failure, l1[0].failure};
}

}  // namespace

TEST_CASE("a run's credentials are kept only while they serve every rank: each reason named",
          "[net][tls]") {
  const auto dir = std::filesystem::temp_directory_path() / cat("gossip-keep-keys-", getpid());
  KeySetOptions o;
  o.run_id = "test-run";
  o.peers = 3;
  o.overwrite = true;
  create_key_set(dir, o);
  CHECK(key_set_problem(dir, "test-run", 3).empty());
  CHECK(key_set_problem(dir, "test-run", 2).empty());  // fewer ranks: still served
  CHECK_THAT(key_set_problem(dir, "test-run", 4),
             Catch::Contains("peer-3.pem: missing or not a PEM certificate"));
  CHECK_THAT(key_set_problem(dir, "other-run", 3),
             Catch::Contains("names gossip://test-run/rank/0, not gossip://other-run/rank/0"));
  // Rank 1's certificate from another CA (the shared test keys'): not issued by this ca.pem.
  std::filesystem::copy_file(keys().rank(1).cert, dir / "peer-1.pem",
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_THAT(key_set_problem(dir, "test-run", 3), Catch::Contains("peer-1.pem: not issued by"));
  create_key_set(dir, o);
  std::filesystem::copy_file(dir / "peer-0.key", dir / "peer-2.key",
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_THAT(key_set_problem(dir, "test-run", 3),
             Catch::Contains("peer-2.key: not the key of"));
  std::filesystem::resize_file(dir / "ca.pem", 40);
  CHECK_THAT(key_set_problem(dir, "test-run", 3),
             Catch::Contains("ca.pem: missing or not a PEM certificate"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("crc32c matches the known vectors and the bitwise reference", "[net]") {
  CHECK(wire::crc32c(bytes_of("123456789")) == 0xE3069283u);
  CHECK(wire::crc32c({}) == 0u);
  std::vector<std::byte> v(32, std::byte{0});  // RFC 3720 B.4 vectors
  CHECK(wire::crc32c(v) == 0x8A9136AAu);
  std::fill(v.begin(), v.end(), std::byte{0xFF});
  CHECK(wire::crc32c(v) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) v[i] = std::byte(i);
  CHECK(wire::crc32c(v) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) v[i] = std::byte(31 - i);
  CHECK(wire::crc32c(v) == 0x113FDB5Cu);

  const auto f = params_for(1, 2, 1001);
  const auto all = std::as_bytes(std::span(f));
  for (std::size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 4004}) {
    const auto part = all.first(n);
    CHECK(wire::crc32c(part) == wire::crc32c_reference(part));
    CHECK(wire::crc32c_portable(part) == wire::crc32c_reference(part));
    CHECK(wire::crc32c(all.subspan(n), wire::crc32c(part)) == wire::crc32c(all));
  }
  // Large buffers take the three-chain path; odd lengths leave a tail after the thirds.
  std::vector<std::byte> big((1 << 20) + 13);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::byte((i * 131 + 7) & 0xff);
  for (std::size_t n : {12288, 12289, 100003, (1 << 20) + 13}) {
    const auto part = std::span(big).first(n);
    CHECK(wire::crc32c(part) == wire::crc32c_reference(part));
    CHECK(wire::crc32c(part.subspan(5), wire::crc32c(part.first(5))) == wire::crc32c(part));
  }
}

TEST_CASE("frames round-trip through encode and decode", "[net]") {
  const std::string text = "a reason";
  const auto bytes = wire::encode_frame(wire::FrameType::kError, 7, -3, bytes_of(text));
  REQUIRE(bytes.size() == wire::kHeaderBytes + text.size());
  const auto f = wire::decode_frame(bytes, 1 << 20);
  REQUIRE(f);
  CHECK(f.value->header.type == wire::FrameType::kError);
  CHECK(f.value->header.sender == 7u);
  CHECK(f.value->header.round == -3);
  CHECK(std::string(reinterpret_cast<const char*>(f.value->payload.data()),
                    f.value->payload.size()) == text);
  const auto p = params_for(0, 0, 100);
  const auto pf = wire::decode_frame(params_frame(2, 1LL << 40, p), 1 << 20);
  REQUIRE(pf);
  CHECK(pf.value->header.round == 1LL << 40);
  CHECK(pf.value->header.payload_bytes == wire::kWeightBytes + 400);
}

TEST_CASE("the frame decoder refuses bad input and says why", "[net]") {
  const auto p = params_for(0, 0, 16);
  auto good = params_frame(1, 5, p);
  auto refused = [](std::span<const std::byte> b, std::uint64_t max = 1 << 20) {
    const auto f = wire::decode_frame(b, max);
    return f ? std::string("accepted") : f.error;
  };
  REQUIRE(refused(good) == "accepted");
  SECTION("wrong magic") {
    good[0] = std::byte{'X'};
    CHECK_THAT(refused(good), Contains("bad magic 0x") && Contains("expected 0x50495347"));
  }
  SECTION("wrong CRC") {
    good.back() ^= std::byte{1};
    CHECK_THAT(refused(good), Contains("bad CRC32C on params payload (round 5)"));
  }
  SECTION("oversize length, refused before any allocation") {
    wire::FrameHeader h{wire::FrameType::kParams, 1, 0, 1ull << 60, 0};
    const auto head = wire::encode_header(h);
    CHECK_THAT(refused(head), Contains("oversize frame: params payload of 1152921504606846976"));
    CHECK_THAT(refused(good, 64), Contains("exceeds the maximum frame of 64 bytes"));
    h = {wire::FrameType::kHello, 1, 0, 70'000, 0};
    CHECK_THAT(refused(wire::encode_header(h)), Contains("exceeds the control limit"));
  }
  SECTION("truncated input") {
    CHECK(refused(std::span(good).first(10)) == "truncated frame: 10 of 32 header bytes");
    CHECK(refused(std::span(good).first(good.size() - 3)) ==
          "truncated frame: 69 of 72 payload bytes");
  }
  SECTION("unknown type, other version, ragged params, trailing bytes") {
    auto t = good;
    t[6] = std::byte{wire::kLastFrameType + 1};
    CHECK(refused(t) == cat("unknown frame type ", wire::kLastFrameType + 1));
    t = good;
    t[4] = std::byte{wire::kVersion + 1};
    CHECK_THAT(refused(t), Contains(cat("unsupported frame version ", wire::kVersion + 1)));
    wire::FrameHeader h{wire::FrameType::kParams, 1, 0, 10, 0};
    CHECK_THAT(refused(wire::encode_header(h)), Contains("malformed params frame"));
    good.push_back(std::byte{0});
    CHECK(refused(good) == "1 trailing bytes after the frame");
  }
  SECTION("shm-ready carries nothing; shm-params exactly one note") {
    wire::FrameHeader h{wire::FrameType::kShmReady, 1, 0, 4, 0};
    CHECK(refused(wire::encode_header(h)) == "malformed shm-ready frame: payload of 4 bytes");
    h = {wire::FrameType::kShmParams, 1, 0, 31, 0};
    CHECK(refused(wire::encode_header(h)) ==
          "malformed shm-params frame: payload of 31 bytes, expected 32");
  }
  SECTION("ready carries nothing and names a round from 1 to 2^53") {
    CHECK(refused(wire::encode_frame(wire::FrameType::kReady, 1, 7, {})) == "accepted");
    wire::FrameHeader h{wire::FrameType::kReady, 1, 7, 4, 0};
    CHECK(refused(wire::encode_header(h)) == "malformed ready frame: payload of 4 bytes");
    for (const std::int64_t round : {std::int64_t{0}, std::int64_t{-3}, wire::kMaxReadyRound + 1}) {
      h = {wire::FrameType::kReady, 1, round, 0, 0};
      CHECK(refused(wire::encode_header(h)) ==
            cat("malformed ready frame: round ", round, " (expected 1 to ", wire::kMaxReadyRound,
                ")"));
    }
  }
}

TEST_CASE("membership views round-trip and malformed ones are refused", "[net][membership]") {
  using gossip::Member;
  using gossip::MemberState;
  const std::vector<Member> view{{0, MemberState::kAlive}, {7, MemberState::kSuspect},
                                 {4294967295u, MemberState::kDead}};
  const auto bytes = wire::encode_view(view);
  CHECK(bytes.size() == 4 + 5 * 3);
  const auto back = wire::decode_view(bytes, 3);
  REQUIRE(back);
  CHECK(back.value->members == view);
  CHECK(back.value->probes.empty());
  // More peers than the run has, a length that does not match the count, an unknown state.
  CHECK(wire::decode_view(bytes, 2).error == "view of 3 peers, but the run has 2");
  auto cut = bytes;
  cut.pop_back();
  CHECK(wire::decode_view(cut, 3).error ==
        "view of 3 peers must be 19 bytes (and its probes), not 18");
  CHECK(wire::decode_view(std::span(bytes).first(3), 3).error ==
        "view of 3 bytes is shorter than its count");
  auto bad = bytes;
  bad[4 + 5 * 1 + 4] = std::byte{9};
  CHECK(wire::decode_view(bad, 3).error == "view entry 1 has unknown state 9");
  // A view frame passes the frame decoder as a control frame.
  const auto frame = wire::encode_frame(wire::FrameType::kView, 2, 0, bytes);
  const auto f = wire::decode_frame(frame, 1 << 20);
  REQUIRE(f);
  CHECK(f.value->header.type == wire::FrameType::kView);

  // Probes ride after the entries: they round-trip, and malformed ones are refused by name.
  using gossip::Probe;
  using gossip::ProbeKind;
  const std::vector<Probe> probes{{ProbeKind::kRequest, 3, 0, 2, 17},
                                  {ProbeKind::kAck, 1, 2, 1, 4294967295u}};
  const auto with = wire::encode_view(view, probes);
  CHECK(with.size() == 4 + 5 * 3 + 2 + 14 * 2);
  const auto both = wire::decode_view(with, 3);
  REQUIRE(both);
  CHECK(both.value->members == view);
  CHECK(both.value->probes == probes);
  auto short_probes = with;
  short_probes.pop_back();
  CHECK(wire::decode_view(short_probes, 3).error ==
        "view of 3 peers with 2 probes must be 49 bytes, not 48");
  auto none = bytes;
  none.push_back(std::byte{0});
  none.push_back(std::byte{0});
  CHECK(wire::decode_view(none, 3).error == "view carries 0 probes (1 to 64 when present)");
  auto outside = with;
  outside[4 + 5 * 3 + 2 + 6] = std::byte{3};  // target 3 of a 3-peer run
  CHECK(wire::decode_view(outside, 3).error ==
        "view probe 0 is malformed (kind 0, ttl 3, origin 0, target 3, of 3 peers)");
  auto hops = with;
  hops[4 + 5 * 3 + 2 + 14 + 1] = std::byte{200};  // a ttl past kMaxProbeTtl
  CHECK(wire::decode_view(hops, 3).error ==
        "view probe 1 is malformed (kind 1, ttl 200, origin 2, target 1, of 3 peers)");
}

TEST_CASE("shm notes round-trip and malformed ones are refused", "[net][shm]") {
  const wire::ShmNote note{3, 42, 0.625};
  const auto bytes = wire::encode_shm_note(note);
  REQUIRE(bytes.size() == wire::kShmNoteBytes);
  const auto back = wire::decode_shm_note(bytes);
  REQUIRE(back);
  CHECK(back.value->slot == 3u);
  CHECK(back.value->seq == 42u);
  CHECK(back.value->weight == 0.625);
  CHECK(wire::decode_shm_note(std::span(bytes).first(31)).error ==
        "shm-params payload of 31 bytes, expected 32");
  auto odd = bytes;
  odd[8] = std::byte{43};
  CHECK(wire::decode_shm_note(odd).error ==
        "shm-params: sequence 43 is not that of a finished write");
  auto reserved = bytes;
  reserved[31] = std::byte{1};
  CHECK(wire::decode_shm_note(reserved).error == "shm-params: reserved bytes are not zero");
}

TEST_CASE("a shared segment hands over exact floats and catches torn and non-finite reads",
          "[net][shm]") {
  constexpr std::size_t kParams = 100'003;  // not a multiple of a page or a vector width
  std::string why;
  auto seg = net::ShmSegment::create(kParams, WireFormat::kFp32, 4, &why);
  REQUIRE(seg);
  CHECK(seg->offer().host_key == net::host_key());
  auto view = net::ShmView::open(seg->offer(), kParams, WireFormat::kFp32, &why);
  INFO(why);
  REQUIRE(view);
  std::vector<float> out(kParams);
  bool finite = false;

  const auto p0 = params_for(0, 0, kParams);
  const auto n0 = seg->write(0.5, values_of(p0));
  CHECK(n0.weight == 0.5);
  CHECK(n0.seq % 2 == 0);
  REQUIRE(view->read(n0, out, &finite) == net::ShmView::Read::kOk);
  CHECK(finite);
  CHECK(same_bits(out, p0));

  // Four more writes reuse slot 0: the old note now names a rewritten slot.
  std::vector<wire::ShmNote> notes;
  for (int r = 1; r <= 4; ++r)
    notes.push_back(seg->write(1.0, values_of(params_for(0, r, kParams))));
  CHECK(notes.back().slot == n0.slot);
  CHECK(view->read(n0, out, &finite) == net::ShmView::Read::kTorn);
  for (int r = 1; r <= 4; ++r) {  // the latest four are all still readable
    REQUIRE(view->read(notes[r - 1], out, &finite) == net::ShmView::Read::kOk);
    CHECK(same_bits(out, params_for(0, r, kParams)));
  }

  auto bad = params_for(0, 9, kParams);
  bad[kParams - 1] = std::nanf("");
  REQUIRE(view->read(seg->write(1.0, values_of(bad)), out, &finite) == net::ShmView::Read::kOk);
  CHECK_FALSE(finite);
  CHECK_THROWS_WITH(view->read(wire::ShmNote{7, 2, 1.0}, out, &finite),
                    Contains("names slot 7 of 4"));
}

TEST_CASE("a shared segment that is not what was offered is not mapped", "[net][shm]") {
  constexpr std::size_t kParams = 5000;
  std::string why;
  auto seg = net::ShmSegment::create(kParams, WireFormat::kFp32, 4, &why);
  REQUIRE(seg);
  const wire::ShmOffer good = seg->offer();
  auto refused = [&](const wire::ShmOffer& o, std::uint64_t params = 5000) {
    why.clear();
    return net::ShmView::open(o, params, WireFormat::kFp32, &why) == nullptr ? why
                                                                            : std::string("mapped");
  };
  REQUIRE(refused(good) == "mapped");
  auto o = good;
  o.token ^= 1;
  CHECK_THAT(refused(o), Contains("is not the segment offered"));
  CHECK_THAT(refused(good, kParams + 2048), Contains("it offers a segment of"));
  o = good;
  o.slots = 1000;
  CHECK_THAT(refused(o), Contains("it offers 1000 slots"));
  o = good;
  o.fd = 999'999;
  CHECK_THAT(refused(o), Contains("open /proc/"));
  // A plain file of the right size is not a sealed memfd: it could shrink under our reads.
  FILE* plain = std::tmpfile();
  REQUIRE(plain);
  REQUIRE(::ftruncate(fileno(plain), static_cast<off_t>(good.bytes)) == 0);
  o = good;
  o.fd = static_cast<std::uint32_t>(fileno(plain));
  CHECK_THAT(refused(o), Contains("is not a memfd sealed against shrinking"));
  std::fclose(plain);
  // A FIFO must neither hang the opener nor be mapped.
  const std::string fifo = cat("/tmp/gossip-test-fifo-", ::getpid());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int ffd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ::unlink(fifo.c_str());
  REQUIRE(ffd >= 0);
  o.fd = static_cast<std::uint32_t>(ffd);
  CHECK_THAT(refused(o), Contains("is not a regular file"));
  ::close(ffd);
}

TEST_CASE("crc32c_floats gives the CRC and spots any NaN or Inf in the same pass", "[net]") {
  for (std::size_t n : {10, 5000, 235146}) {
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<float>(i % 97) - 48.5f;
    bool finite = false;
    CHECK(wire::crc32c_floats(f, 7, &finite) == wire::crc32c(std::as_bytes(std::span(f)), 7));
    CHECK(finite);
    // One bad value at the start, in each third, and in the tail.
    for (std::size_t at : {std::size_t{0}, n / 3 + 1, 2 * n / 3 + 1, n - 1}) {
      auto g = f;
      g[at] = (at % 2) ? std::numeric_limits<float>::infinity() : std::nanf("");
      wire::crc32c_floats(g, 0, &finite);
      CHECK_FALSE(finite);
    }
  }
}

TEST_CASE("params with NaN, Inf or a bad push-sum weight are refused", "[net]") {
  std::vector<float> p(1000, 0.25f);
  CHECK(wire::check_param_values(p, 1.0, 4).empty());
  p[999] = std::numeric_limits<float>::infinity();
  CHECK_THAT(wire::check_param_values(p, 1.0, 4), Contains("parameter 999 of round 4 is inf"));
  p[999] = 0.0f;
  CHECK_THAT(wire::check_param_values(p, -0.5, 4), Contains("push-sum weight -0.5"));
  CHECK_THAT(wire::check_param_values(p, std::nan(""), 4), Contains("not a positive finite"));
}

TEST_CASE("params payloads at half width carry 2 bytes a value and are checked as float32's",
          "[net][wire]") {
  const auto p = small_params_for(0, 0, 1001);
  CHECK(wire::params_payload_bytes(1001, WireFormat::kFp32) == 8 + 4 * 1001);
  for (const WireFormat w : {WireFormat::kFp32, WireFormat::kBf16, WireFormat::kFp16}) {
    INFO(wire_format_name(w));
    const auto payload = wire::encode_params(p, 0.25, w);
    CHECK(payload.size() == wire::params_payload_bytes(1001, w));
    CHECK(payload.size() == 8 + wire_value_bytes(w) * 1001);
    std::vector<float> out(1001);
    const auto got = wire::decode_params(payload, w, out, 3);
    REQUIRE(got);
    CHECK(*got.value == 0.25);
    CHECK(same_bits(out, rounded(p, w)));  // exactly what the sender's rounding gives
    if (w != WireFormat::kFp32) CHECK_FALSE(same_bits(out, p));
    // The frame decoder takes a payload of whole values of the link's format only.
    const auto frame = params_frame_in(w, 1, 3, p);
    CHECK(wire::decode_frame(frame, 1 << 20, w));
    // Another length than the model's, a NaN, a bad weight: refused by name.
    std::vector<float> longer(1002);
    CHECK(wire::decode_params(payload, w, longer, 3).error ==
          cat("params payload of ", payload.size(), " bytes, expected ",
              wire::params_payload_bytes(1002, w), " (1002 ",
              w == WireFormat::kFp32 ? std::string("floats") : cat(wire_format_name(w), " values"),
              ")"));
    auto nan = p;
    nan[17] = std::nanf("");
    CHECK_THAT(wire::decode_params(wire::encode_params(nan, 1.0, w), w, out, 3).error,
               Contains("parameter 17 of round 3 is nan"));
    CHECK_THAT(wire::decode_params(wire::encode_params(p, -1.0, w), w, out, 3).error,
               Contains("push-sum weight -1 in round 3 is not a positive finite number"));
  }
  // A ragged half-width payload (an odd byte after the weight) is not a params frame.
  wire::FrameHeader h{wire::FrameType::kParams, 1, 0, 8 + 2 * 10 + 1, 0};
  CHECK(wire::decode_header(wire::encode_header(h), 1 << 20, WireFormat::kBf16).error ==
        "malformed params frame: payload of 29 bytes is not an f64 weight plus whole bf16 values");
  h.payload_bytes = 8 + 2 * 11;  // whole bf16s, not whole f32s
  CHECK(wire::decode_header(wire::encode_header(h), 1 << 20, WireFormat::kFp16));
  CHECK_THAT(wire::decode_header(wire::encode_header(h), 1 << 20).error,
             Contains("is not an f64 weight plus whole f32s"));
  // The receiver's chunk check: the CRC of the bytes as they came, and NaN or Inf spotted.
  const auto q = small_params_for(1, 0, 5000);
  std::vector<std::uint16_t> halves(q.size());
  REQUIRE(narrow_to_wire(q, WireFormat::kBf16, halves));
  std::vector<float> wide(5000);
  bool finite = false;
  CHECK(wire::crc32c_widen(halves, WireFormat::kBf16, wide, 7, &finite) ==
        wire::crc32c(std::as_bytes(std::span(halves)), 7));
  CHECK(finite);
  halves[4999] = 0x7f80;  // bf16 inf
  wire::crc32c_widen(halves, WireFormat::kBf16, wide, 7, &finite);
  CHECK_FALSE(finite);
}

/// Where a hello's gossip settings start: after protocol version, rank, run id, model
/// fingerprint, param count, topology fingerprint and wire format (docs/wire.md, "Handshake").
std::size_t settings_offset(const HandshakeInfo& info) {
  return 4 + 4 + 4 + info.run_id.size() + 4 + info.model.size() + 8 + 8 + 1;
}

/// choco's settings as a peer's handshake carries them (gossip_settings in src/peer).
GossipSettings choco_settings() {
  GossipSettings s;
  s.algorithm = "choco";
  s.compressor = "top_k";
  s.fraction = 0.01;
  s.consensus_step = 0.1;
  s.gossip_steps = 1;
  return s;
}

TEST_CASE("a hello round-trips with every field kept", "[net][wire]") {
  wire::Hello h{wire::kVersion, 3, model_info({784, 128, 10}, 101770), std::nullopt};
  h.info.wire = WireFormat::kFp16;
  h.info.gossip = choco_settings();
  h.info.gossip.compressor = "quantize";
  h.info.gossip.fraction = 0.25;  // not what a peer sends with quantize, but the codec keeps it
  h.info.gossip.bits = 4;
  h.info.gossip.consensus_step = 0.05;
  h.info.gossip.gossip_steps = 5;
  h.shm = wire::ShmOffer{0xABCDEF, 4242, 17, 0x1234, 1 << 20, 4};
  const auto back = wire::decode_hello(wire::encode_hello(h));
  REQUIRE(back);
  CHECK(back.value->protocol_version == wire::kVersion);
  CHECK(back.value->rank == 3);
  CHECK(back.value->info == h.info);
  CHECK(back.value->info.gossip.algorithm == "choco");
  CHECK(back.value->info.gossip.compressor == "quantize");
  CHECK(back.value->info.gossip.fraction == 0.25);
  CHECK(back.value->info.gossip.bits == 4u);
  CHECK(back.value->info.gossip.consensus_step == 0.05);
  CHECK(back.value->info.gossip.gossip_steps == 5u);
  CHECK(back.value->shm == h.shm);
  CHECK(refusal_text(h, *back.value).empty());
}

TEST_CASE("each compatibility field that differs is refused on both sides, naming it and both "
          "values",
          "[net][wire]") {
  wire::Hello ours{wire::kVersion, 1, model_info({784, 128, 10}, 101770), std::nullopt};
  ours.info.gossip = choco_settings();
  struct Case {
    std::function<void(HandshakeInfo&)> change;
    std::string field, theirs, ours;
  };
  const std::vector<Case> cases{
      {[](HandshakeInfo& i) { i.gossip = GossipSettings{"dpsgd", "", 0, 0, 0, 0, 0}; },
       "gossip.algorithm", "'dpsgd'", "'choco'"},
      {[](HandshakeInfo& i) { i.gossip.compressor = "random_k"; },
       "the compressor (gossip.choco.compress or gossip.outer.compress)",
       "'random_k'", "'top_k'"},
      {[](HandshakeInfo& i) { i.gossip.fraction = 0.05; }, "the compressor's fraction",
       "0.05", "0.01"},
      {[](HandshakeInfo& i) { i.gossip.bits = 8; }, "the compressor's bits", "8", "0"},
      {[](HandshakeInfo& i) { i.gossip.consensus_step = 0.05; }, "gossip.choco.consensus_step",
       "0.05", "0.1"},
      {[](HandshakeInfo& i) { i.gossip.consensus_step = std::nextafter(0.1, 1.0); },
       "gossip.choco.consensus_step", "0.10000000000000002", "0.1"},  // differ, so never print alike
      {[](HandshakeInfo& i) { i.gossip.gossip_steps = 5; }, "gossip.choco.gossip_steps", "5", "1"},
      {[](HandshakeInfo& i) { i.gossip.fragments = 4; }, "gossip.outer.fragments", "4", "0"},
  };
  for (const Case& c : cases) {
    auto theirs = ours;
    c.change(theirs.info);
    INFO(c.field);
    const std::string tail = " (must be the same on every peer of a run)";
    CHECK(refusal_text(ours, theirs) ==
          cat(c.field, " ", c.theirs, " != ours ", c.ours, tail));
    CHECK(refusal_text(theirs, ours) ==
          cat(c.field, " ", c.ours, " != ours ", c.theirs, tail));
    // ... and so it is after the bytes: the codec carries the field.
    CHECK(refusal_text(ours, *wire::decode_hello(wire::encode_hello(theirs)).value) ==
          refusal_text(ours, theirs));
  }
  auto theirs = ours;  // the model's size and the wire format, as before
  theirs.info.param_count = 101771;
  CHECK(refusal_text(ours, theirs) ==
        "model fingerprint 784-128-10 (101771 params) != ours 784-128-10 (101770 params)");
  CHECK(refusal_text(theirs, ours) ==
        "model fingerprint 784-128-10 (101770 params) != ours 784-128-10 (101771 params)");
  theirs = ours;
  theirs.info.wire = WireFormat::kFp16;
  CHECK_THAT(refusal_text(ours, theirs), Contains("wire format fp16 != ours fp32"));
  CHECK_THAT(refusal_text(theirs, ours), Contains("wire format fp32 != ours fp16"));
}

TEST_CASE("a refusal travels with its kind; an unknown kind or unprintable text is harmless",
          "[net][wire]") {
  const wire::Refusal sent{wire::RefusalKind::kTopology, "topology fingerprint 7 != ours 9"};
  const wire::Refusal back = wire::decode_refusal(wire::encode_refusal(sent));
  CHECK(back.kind == sent.kind);
  CHECK(back.text == sent.text);
  auto hostile = wire::encode_refusal({wire::RefusalKind::kModel, "a\nb\x01" "c"});
  hostile[0] = std::byte{200};  // no such kind
  const wire::Refusal odd = wire::decode_refusal(hostile);
  CHECK(odd.kind == wire::RefusalKind::kOther);
  CHECK(odd.text == "a?b?c");
  CHECK(wire::decode_refusal({}).kind == wire::RefusalKind::kOther);
  CHECK(wire::decode_refusal(wire::encode_refusal({wire::RefusalKind::kRunId,
                                                   std::string(1000, 'x')}))
            .text.size() == 300);
}

TEST_CASE("hostile gossip settings in a hello are refused, saying which field", "[net][wire]") {
  wire::Hello h{wire::kVersion, 1, model_info({784, 128, 10}, 101770), std::nullopt};
  h.info.gossip = choco_settings();
  const auto bytes = wire::encode_hello(h);
  const std::size_t at = settings_offset(h.info);  // the algorithm's u32 length
  const auto with_u32 = [&](std::size_t offset, std::uint32_t v) {
    auto b = bytes;
    std::memcpy(b.data() + offset, &v, 4);
    return wire::decode_hello(b).error;
  };
  CHECK(with_u32(at, 0xFFFFFFFF) ==
        cat("gossip.algorithm length of 4294967295 exceeds the limit of ", wire::kMaxNameBytes));
  CHECK(with_u32(at, wire::kMaxNameBytes + 1) ==
        cat("gossip.algorithm length of ", wire::kMaxNameBytes + 1, " exceeds the limit of ",
            wire::kMaxNameBytes));
  const std::size_t compressor = at + 4 + 5;  // after "choco"
  CHECK(with_u32(compressor, 0x7FFFFFFF) ==
        cat("gossip.choco.compress.kind length of 2147483647 exceeds the limit of ",
            wire::kMaxNameBytes));
  // Within the limit but past the end of the hello: refused before it is allocated.
  auto cut = bytes;
  cut.resize(compressor + 4 + 3);
  CHECK(wire::decode_hello(cut).error ==
        "truncated handshake: gossip.choco.compress.kind length of 5 needs 5 bytes, 3 left");
  auto odd = bytes;
  odd[at + 4 + 2] = std::byte{'\n'};  // "ch\nco": a name is a-z, 0-9 and _
  CHECK(wire::decode_hello(odd).error ==
        "gossip.algorithm has byte 10 at offset 2, outside a-z, 0-9 and _");
  const std::size_t gamma = compressor + 4 + 5 + 8 + 4;  // after "top_k", fraction and bits
  auto nan = bytes;
  const double not_a_number = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(nan.data() + gamma, &not_a_number, 8);
  CHECK(wire::decode_hello(nan).error == "gossip.choco.consensus_step nan is not a finite number");
  auto settings = h.info.gossip;  // our own are checked alike before they are sent
  settings.compressor = "top k";
  CHECK(wire::check_gossip_settings(settings) ==
        "gossip.choco.compress.kind has byte 32 at offset 3, outside a-z, 0-9 and _");
  for (std::size_t n = 0; n < bytes.size(); ++n)  // every truncation is refused, none crash
    CHECK_FALSE(wire::decode_hello(std::span(bytes).first(n)));
}

TEST_CASE("handshakes round-trip and a different model or topology is refused", "[net]") {
  const wire::Hello ours{wire::kVersion, 1, model_info({784, 128, 10}, 101770), std::nullopt};
  const auto bytes = wire::encode_hello(ours);
  const auto back = wire::decode_hello(bytes);
  REQUIRE(back);
  CHECK(back.value->rank == 1);
  CHECK(back.value->info.run_id == "test-run");
  CHECK(back.value->info.model == "784-128-10");
  CHECK(back.value->info.param_count == 101770u);
  CHECK(back.value->info.topology_fingerprint == 0xC0FFEEu);
  CHECK(refusal_text(ours, *back.value).empty());

  auto theirs = ours;
  theirs.info = model_info({784, 256, 128, 10}, 235146);
  CHECK(refusal_text(ours, theirs) ==
        "model fingerprint 784-256-128-10 (235146 params) != ours 784-128-10 (101770 params)");
  CHECK(refusal_kind(ours, theirs) == wire::RefusalKind::kModel);
  theirs = ours;
  theirs.info.topology_fingerprint = 7;
  CHECK_THAT(refusal_text(ours, theirs), Contains("topology fingerprint 7 != ours"));
  CHECK(refusal_kind(ours, theirs) == wire::RefusalKind::kTopology);
  theirs = ours;
  theirs.info.run_id = "other";
  CHECK(refusal_text(ours, theirs) == "run id 'other' != ours 'test-run'");
  CHECK(refusal_kind(ours, theirs) == wire::RefusalKind::kRunId);
  theirs = ours;
  theirs.info.wire = WireFormat::kBf16;  // gossip.wire differs: refused, saying both
  CHECK(refusal_text(ours, theirs) ==
        "wire format bf16 != ours fp32 (gossip.wire must be the same on every peer of a run)");
  CHECK(refusal_kind(ours, theirs) == wire::RefusalKind::kWire);
  const auto bf16 = wire::decode_hello(wire::encode_hello(theirs));
  REQUIRE(bf16);
  CHECK(bf16.value->info.wire == WireFormat::kBf16);
  auto unknown = wire::encode_hello(theirs);
  unknown[settings_offset(theirs.info) - 1] = std::byte{3};  // the wire format's byte
  CHECK(wire::decode_hello(unknown).error ==
        "wire format 3 is not 0 (fp32), 1 (bf16) or 2 (fp16)");
  theirs = ours;
  theirs.protocol_version = wire::kVersion + 1;
  CHECK(refusal_text(ours, theirs) ==
        cat("protocol version ", wire::kVersion + 1, " != ours ", wire::kVersion));

  auto offering = ours;  // a same-host offer travels with the handshake
  offering.shm = wire::ShmOffer{0xABCDEF, 4242, 17, 0x1234, 1 << 20, 4};
  const auto with_shm = wire::decode_hello(wire::encode_hello(offering));
  REQUIRE(with_shm);
  CHECK(with_shm.value->shm == offering.shm);
  CHECK_FALSE(back.value->shm);
  auto flag = bytes;
  flag.back() = std::byte{2};
  CHECK(wire::decode_hello(flag).error == "shared-memory flag 2 is not 0 or 1");

  for (std::size_t n = 0; n < bytes.size(); ++n)  // every truncation is refused, none crash
    CHECK_FALSE(wire::decode_hello(std::span(bytes).first(n)));
  auto long_id = bytes;
  long_id[8] = std::byte{0xFF};  // run id length 0xFF...: refused, not allocated
  long_id[11] = std::byte{0x7F};
  CHECK_THAT(wire::decode_hello(long_id).error, Contains("run id length of"));
  auto trailing = bytes;
  trailing.push_back(std::byte{0});
  CHECK(wire::decode_hello(trailing).error == "handshake has 1 trailing bytes");
}

TEST_CASE("a neighbour already past the round asked for is not waited for, and is excused",
          "[net][membership]") {
  gossip::net::Mailboxes mail(0, 3, {1, 2}, 2, 8, [](const std::string&) {});
  mail.set_state(1, gossip::net::LinkState::kUp);
  mail.set_state(2, gossip::net::LinkState::kUp);
  mail.deliver(1, gossip::net::Message{5, 1.0, {1.0f, 2.0f}, {}});
  mail.deliver(2, gossip::net::Message{7, 1.0, {3.0f, 4.0f}, {}});  // skipped round 5
  const int from[] = {1, 2};
  gossip::CollectOptions o;
  o.deadline = std::chrono::milliseconds(60'000);  // a wait for peer 2 would take a minute
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = mail.collect(5, from, o);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  REQUIRE(got.size() == 1);
  CHECK(got[0].peer == 1);
  CHECK(mail.excused_peers() == std::vector<int>{2});
  // The newest message waiting is peer 2's round 7: what a peer that fell behind catches up to.
  const auto newest = mail.newest(from);
  REQUIRE(newest);
  CHECK(newest->peer == 2);
  CHECK(newest->round == 7);
  CHECK(newest->params[1] == 4.0f);
  // A peer in no_wait is not waited for either, and not excused: it was simply not there.
  gossip::CollectOptions o2 = o;
  o2.no_wait = {1};
  CHECK(mail.collect(6, from, o2).empty());
  CHECK(mail.excused_peers() == std::vector<int>{2});
}

TEST_CASE("mailboxes keep rounds per neighbour and apply the sync and async rules", "[net]") {
  LogSink log;
  net::Mailboxes mail(0, 3, {2, 1}, 4, 3, log.fn());
  auto msg = [](std::int64_t round) { return net::Message{round, 1.0, HostFloats(4), {}}; };
  const std::vector<int> both{2, 1}, one{1}, two{2};
  auto rounds = [](const std::vector<Inbox>& in) {
    std::string s;
    for (const auto& m : in) s += cat(m.peer, "@", m.round, " ");
    return s;
  };
  const CollectOptions sync = collect_options(CollectMode::kSync, 0, 50ms);
  mail.deliver(1, msg(0));
  mail.deliver(1, msg(1));  // peer 1 is a round ahead
  mail.deliver(2, msg(0));
  CHECK(rounds(mail.collect(0, both, sync)) == "1@0 2@0 ");  // ascending, not arrival order
  CHECK(rounds(mail.collect(1, both, sync)) == "1@1 ");      // peer 2 left out at the deadline
  CHECK(log.wait_for("round 1: nothing from peer 2 by the deadline (50 ms, link connecting)"));
  for (int r = 2; r <= 5; ++r) mail.deliver(1, msg(r));    // 4 rounds, room for 3
  CHECK(log.wait_for("peer 1 is 3 rounds ahead; dropped its round 2"));
  CHECK(rounds(mail.collect(2, one, sync)).empty());
  const CollectOptions async = collect_options(CollectMode::kAsync, 1, 50ms);
  CHECK(rounds(mail.collect(5, one, async)) == "1@5 ");  // the newest
  CHECK(rounds(mail.collect(6, one, async)) == "1@5 ");  // still the newest, within staleness 1
  CHECK(rounds(mail.collect(7, one, async)).empty());    // too stale
  mail.set_state(2, net::LinkState::kGone);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(mail.collect(9, two, collect_options(CollectMode::kSync, 0, 5s)).empty());
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);  // a gone peer is not waited for
  mail.set_state(1, net::LinkState::kDown);
  CHECK(mail.dead_peers() == std::vector<int>{1, 2});
  CHECK_THROWS_WITH(mail.collect(0, std::vector<int>{0}, sync), Contains("not a neighbour"));
}

TEST_CASE("a membership view reaches a neighbour, and again as a heartbeat on an idle link",
          "[net][membership]") {
  Cluster cluster(2);
  LogSink log;
  std::unique_ptr<NetExchange> one;
  std::thread t([&] {
    one = std::make_unique<NetExchange>(cluster.config(1, {0}, 100, log),
                                        std::move(cluster.listeners[1]));
  });
  NetExchange zero(cluster.config(0, {1}, 100, log), std::move(cluster.listeners[0]));
  t.join();
  const std::vector<gossip::Member> view{{3, gossip::MemberState::kAlive},
                                         {0, gossip::MemberState::kSuspect}};
  const int to[] = {1};
  zero.send_view(0, view, to);
  // Wait (bounded) for what arrives: the view once, then again with nothing else sent.
  auto next_view = [&] {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      auto got = one->take_views();
      if (!got.empty()) return got;
      std::this_thread::sleep_for(20ms);
    }
    return std::vector<gossip::PeerView>{};
  };
  const auto first = next_view();
  REQUIRE(first.size() == 1);
  CHECK(first[0].peer == 0);
  CHECK(first[0].members == view);
  const auto again = next_view();  // the link stays idle: the heartbeat repeats the view
  REQUIRE(again.size() == 1);
  CHECK(again[0].members == view);
}

TEST_CASE("four exchanges on a ring deliver bit-exact buffers each sync round", "[net]") {
  constexpr int kPeers = 4, kRounds = 6;
  constexpr std::size_t kParams = 50'000;
  // One process is one host: by default parameters go through shared memory; off, over TLS
  // (or over plain TCP when TLS is off too). Variants 3 and 4 send at half width (gossip.wire),
  // through shared memory and over TLS: each neighbour gets the sender's values rounded.
  const int variant = GENERATE(0, 1, 2, 3, 4);
  const bool shared_memory = variant == 0 || variant == 3;
  const bool tls = variant != 2;
  const WireFormat format =
      variant == 3 ? WireFormat::kBf16 : variant == 4 ? WireFormat::kFp16 : WireFormat::kFp32;
  const auto values = [format](int peer, std::int64_t round) {
    return format == WireFormat::kFp32 ? params_for(peer, round, kParams)
                                       : small_params_for(peer, round, kParams);
  };
  INFO("shared_memory " << shared_memory << ", tls " << tls << ", " << wire_format_name(format));
  Cluster cluster(kPeers);
  LogSink log;
  std::vector<std::string> problems(kPeers);
  std::vector<std::uint64_t> sent(kPeers);
  std::vector<std::size_t> shm_links(kPeers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kPeers; ++r) {
    const std::vector<int> nbrs{(r + kPeers - 1) % kPeers, (r + 1) % kPeers};
    auto config = cluster.config(r, nbrs, kParams, log);
    config.shared_memory = shared_memory;
    config.tls.enabled = tls;
    config.handshake.wire = format;
    threads.emplace_back([&, r, nbrs, config = std::move(config),
                          listener = std::move(cluster.listeners[r])]() mutable {
      std::vector<float> mine;  // outlives the exchange: it may still be on the wire
      NetExchange ex(std::move(config), std::move(listener));
      shm_links[r] = ex.shared_memory_peers().size();
      const std::vector<int> sorted{std::min(nbrs[0], nbrs[1]), std::max(nbrs[0], nbrs[1])};
      for (int round = 0; round < kRounds; ++round) {
        mine = values(r, round);
        ex.publish(round, mine, 1.0, nbrs);
        const auto in = ex.collect(round, nbrs, collect_options(CollectMode::kSync, 0, 10s));
        std::string& bad = problems[r];
        if (in.size() != 2) bad += cat("round ", round, ": ", in.size(), " inboxes; ");
        for (std::size_t k = 0; k < in.size() && k < 2; ++k) {
          if (in[k].peer != sorted[k] || in[k].round != round)
            bad += cat("round ", round, ": got peer ", in[k].peer, " round ", in[k].round, "; ");
          else if (!same_bits(in[k].params, rounded(values(in[k].peer, round), format)))
            bad += cat("round ", round, ": peer ", in[k].peer, " params differ; ");
        }
      }
      sent[r] = ex.bytes_sent();
    });
  }
  for (auto& t : threads) t.join();
  const std::uint64_t frame =
      wire::kHeaderBytes + wire::params_payload_bytes(kParams, format);
  for (int r = 0; r < kPeers; ++r) {
    INFO("peer " << r);
    CHECK(problems[r] == "");
    CHECK(sent[r] >= 2 * kRounds * frame);
    // Beyond the parameters only the handshake and a few control frames: at half width
    // bytes_sent is half of what float32 sends.
    CHECK(sent[r] < 2 * kRounds * frame + 16 * 1024);
    CHECK(shm_links[r] == (shared_memory ? 2u : 0u));
    CHECK(log.wait_for(cat("net[", r, "]: WARNING: TLS is off"), 0ms) == !tls);
  }
}

TEST_CASE("garbage from a stranger closes only that connection", "[net]") {
  constexpr std::size_t kParams = 1000;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto a = std::async(std::launch::async, [&, c = cluster.config(0, {1}, kParams, log),
                                           l = std::move(cluster.listeners[0])]() mutable {
    return std::make_unique<NetExchange>(std::move(c), std::move(l));
  });
  NetExchange b(cluster.config(1, {0}, kParams, log), std::move(cluster.listeners[1]));
  auto ex0 = a.get();
  REQUIRE(b.connected_peers() == std::vector<int>{0});

  const auto hello = hello_frame(0, model_info({784, 128, 10}, kParams));
  auto bad_crc = hello;
  bad_crc[12] ^= std::byte{0xFF};
  wire::FrameHeader big{wire::FrameType::kParams, 0, 0, 1ull << 40, 0};
  const auto big_head = wire::encode_header(big);
  struct Case { std::string name; std::vector<std::byte> bytes; std::string expect; };
  const std::vector<Case> cases{
      {"wrong magic", std::vector<std::byte>(32, std::byte{'A'}), "bad magic 0x41414141"},
      {"wrong CRC", bad_crc, "bad CRC32C on hello payload"},
      {"oversize", {big_head.begin(), big_head.end()}, "oversize frame: params payload"},
      {"truncated", std::vector<std::byte>(hello.begin(), hello.begin() + 10),
       "truncated frame: connection closed after 10 of 32 header bytes"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    RawClient raw(port);
    REQUIRE(raw.connected());
    raw.send(c.bytes);
    raw.finish_sending();
    CHECK(raw.closed_by_remote());
    CHECK(log.wait_for(c.expect));
  }
  {
    // Rank 0's certificate while rank 0's link is live: the identity is taken, whatever the
    // hello says (the fingerprint refusals have tests of their own).
    INFO("a handshake with another model fingerprint, as the live rank 0");
    RawClient raw(port);
    raw.send(hello_frame(0, model_info({784, 256, 128, 10}, 235146)));
    const auto reply = raw.read_frame();
    REQUIRE(reply);
    CHECK(reply->header.type == wire::FrameType::kError);
    CHECK(raw.closed_by_remote());
    CHECK(log.wait_for("identity_conflict: "));
  }
  // The real link is untouched: one more sync round goes through both ways.
  const auto p0 = params_for(0, 0, kParams), p1 = params_for(1, 0, kParams);
  const std::vector<int> to0{0}, to1{1};
  ex0->publish(0, p0, 1.0, to1);
  b.publish(0, p1, 1.0, to0);
  const auto at1 = b.collect(0, to0, collect_options(CollectMode::kSync, 0, 5s));
  const auto at0 = ex0->collect(0, to1, collect_options(CollectMode::kSync, 0, 5s));
  REQUIRE(at1.size() == 1);
  REQUIRE(at0.size() == 1);
  CHECK(same_bits(at1[0].params, p0));
  CHECK(same_bits(at0[0].params, p1));
  CHECK(b.dead_peers().empty());
}

namespace {
/// Host memory that counts what it hands out and takes back (a GPU backend's is page-locked).
class CountingMemory final : public HostMemory {
 public:
  void* allocate(std::size_t bytes) override {
    std::lock_guard lk(mu_);
    ++allocations_;
    void* p = ::operator new(bytes);
    live_.insert(p);
    return p;
  }
  void release(void* p) noexcept override {
    std::lock_guard lk(mu_);
    if (live_.erase(p) == 1) ++releases_;
    else ++foreign_;  // not one of ours: a defect
    ::operator delete(p);
  }
  bool owns(const void* p) const {
    std::lock_guard lk(mu_);
    return live_.count(const_cast<void*>(p)) == 1;
  }
  int allocations() const { std::lock_guard lk(mu_); return allocations_; }
  int releases() const { std::lock_guard lk(mu_); return releases_; }
  int foreign() const { std::lock_guard lk(mu_); return foreign_; }

 private:
  mutable std::mutex mu_;
  std::set<void*> live_;
  int allocations_ = 0, releases_ = 0, foreign_ = 0;
};
}  // namespace

TEST_CASE("neighbours' parameters are received into the exchange's host memory, reused round "
          "after round, and all of it goes back", "[net]") {
  for (const bool shm : {true, false}) {
    INFO((shm ? "through shared memory" : "over TCP"));
    CountingMemory memory0, memory1;
    constexpr std::uint64_t kParams = 3000;
    {
      Cluster cluster(2);
      LogSink log;
      NetConfig c0 = cluster.config(0, {1}, kParams, log);
      NetConfig c1 = cluster.config(1, {0}, kParams, log);
      c0.shared_memory = c1.shared_memory = shm;
      c0.host_memory = &memory0;
      c1.host_memory = &memory1;
      std::unique_ptr<NetExchange> one;
      std::thread t(
          [&] { one = std::make_unique<NetExchange>(c1, std::move(cluster.listeners[1])); });
      NetExchange zero(c0, std::move(cluster.listeners[0]));
      t.join();
      const std::vector<int> to0{0}, to1{1};
      constexpr int kRounds = 12;
      for (int r = 0; r < kRounds; ++r) {
        const auto p0 = params_for(0, r, kParams), p1 = params_for(1, r, kParams);
        zero.publish(r, p0, 1.0, to1);
        one->publish(r, p1, 1.0, to0);
        const auto at1 = one->collect(r, to0, collect_options(CollectMode::kSync, 0, 5s));
        const auto at0 = zero.collect(r, to1, collect_options(CollectMode::kSync, 0, 5s));
        REQUIRE(at1.size() == 1);
        REQUIRE(at0.size() == 1);
        CHECK(same_bits(at1[0].params, p0));
        CHECK(same_bits(at0[0].params, p1));
        CHECK(memory0.owns(at0[0].params.data()));  // the message sits in the host memory
        CHECK(memory1.owns(at1[0].params.data()));
      }
      // The pool recycles: a few buffers for the whole run, not one a round.
      CHECK(memory0.allocations() >= 1);
      CHECK(memory0.allocations() <= 4);
      CHECK(memory1.allocations() <= 4);
      one.reset();
    }
    CHECK(memory0.releases() == memory0.allocations());  // every buffer came back
    CHECK(memory1.releases() == memory1.allocations());
    CHECK(memory0.foreign() + memory1.foreign() == 0);
  }
}

TEST_CASE("records are sealed with AES-OCB on the AES-GCM suites where OpenSSL has it",
          "[net][tls]") {
  EVP_CIPHER* ocb = EVP_CIPHER_fetch(nullptr, "AES-128-OCB", nullptr);
  const bool has_ocb = ocb != nullptr;
  EVP_CIPHER_free(ocb);
  CHECK(net::record_aead(NID_aes_128_gcm) == (has_ocb ? EVP_aes_128_ocb() : EVP_aes_128_gcm()));
  CHECK(net::record_aead(NID_aes_256_gcm) == (has_ocb ? EVP_aes_256_ocb() : EVP_aes_256_gcm()));
  CHECK(net::record_aead(NID_chacha20_poly1305) == EVP_chacha20_poly1305());
  CHECK(net::record_aead(NID_aes_128_cbc) == nullptr);
  CHECK(preferred_record_aead() == (has_ocb ? "AES-128-OCB" : "AES-128-GCM"));
  // The bench's rate: a positive figure for every AEAD the records may use, and a clear error
  // for a name OpenSSL does not know.
  for (const char* aead : {"AES-128-OCB", "AES-128-GCM", "ChaCha20-Poly1305"}) {
    INFO(aead);
    if (std::string_view(aead) == "AES-128-OCB" && !has_ocb) continue;
    CHECK(aead_bytes_per_second(aead, 1 << 20, 1 << 16, 1) > 0.0);
  }
  CHECK_THROWS_WITH(aead_bytes_per_second("AES-128-NOPE", 1 << 20, 1 << 16, 1),
                    Contains("no cipher AES-128-NOPE"));
}

TEST_CASE("records open only in order, unchanged, under their own key; bad lengths are named",
          "[net][tls]") {
  const EVP_CIPHER* ciphers[] = {EVP_aes_128_ocb(), EVP_aes_256_ocb(), EVP_aes_128_gcm(),
                                 EVP_aes_256_gcm(), EVP_chacha20_poly1305()};
  for (const EVP_CIPHER* cipher : ciphers) {
    INFO(net::record_aead_name(cipher));
    net::RecordKey key;
    key.cipher = cipher;
    key.key.resize(static_cast<std::size_t>(EVP_CIPHER_get_key_length(cipher)));
    for (std::size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<unsigned char>(3 * i);
    for (std::size_t i = 0; i < key.iv.size(); ++i) key.iv[i] = static_cast<unsigned char>(7 * i);
    std::vector<std::byte> plain(1000);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<std::byte>(i * 31);
    net::RecordCipher sealer(key, true);
    wire::RecordHeader h1, h2;
    std::vector<std::byte> c1(plain.size()), c2(plain.size());
    sealer.seal(plain, h1.data(), c1.data());
    sealer.seal(plain, h2.data(), c2.data());
    CHECK(c1 != plain);
    CHECK(c1 != c2);  // each record has a nonce of its own
    const auto length = wire::decode_record_length(h1);
    REQUIRE(length);
    CHECK(*length.value == plain.size());

    net::RecordCipher opener(key, false);
    auto b1 = c1, b2 = c2;
    CHECK(opener.open(h1, b1));
    CHECK(b1 == plain);
    auto replay = c1;
    CHECK_FALSE(opener.open(h1, replay));  // record 1 again where record 2 is due
    net::RecordCipher skipped(key, false);
    CHECK_FALSE(skipped.open(h2, b2));  // record 2 first: out of order
    for (const std::size_t at : {std::size_t{0}, std::size_t{4}, std::size_t{19}}) {
      net::RecordCipher fresh(key, false);
      auto h = h1;
      auto body = c1;
      h[at] ^= std::byte{1};  // the length (associated data) or the tag
      CHECK_FALSE(fresh.open(h, body));
    }
    net::RecordCipher fresh(key, false);
    auto changed = c1;
    changed[500] ^= std::byte{0x80};
    CHECK_FALSE(fresh.open(h1, changed));
    auto other_key = key;
    other_key.key[0] ^= 1;
    net::RecordCipher foreign(other_key, false);
    auto body = c1;
    CHECK_FALSE(foreign.open(h1, body));

    // Every length a record may have opens to itself, whole blocks or not (OCB and GCM both
    // end on a partial block).
    net::RecordCipher seal_any(key, true), open_any(key, false);
    for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16},
                                std::size_t{17}, std::size_t{131071},
                                std::size_t{wire::kMaxRecordBytes}}) {
      INFO(n);
      std::vector<std::byte> text(n), sealed(n);
      for (std::size_t i = 0; i < n; ++i) text[i] = static_cast<std::byte>(i * 7 + n);
      wire::RecordHeader h;
      seal_any.seal(text, h.data(), sealed.data());
      CHECK(open_any.open(h, sealed));
      CHECK(sealed == text);
    }
  }
  const auto zero = wire::encode_record_header(0);
  const auto over = wire::encode_record_header(wire::kMaxRecordBytes + 1);
  CHECK_THAT(wire::decode_record_length(zero).error, Contains("bad record: length 0"));
  CHECK_THAT(wire::decode_record_length(over).error,
             Contains(cat("bad record: length ", wire::kMaxRecordBytes + 1)));
  CHECK_THAT(wire::decode_record_length(std::span(zero).first(7)).error,
             Contains("truncated record: 7 of 20"));
  CHECK(wire::decode_record_length(wire::encode_record_header(wire::kMaxRecordBytes)));
}

TEST_CASE("a record changed on the way closes that connection, naming why; the peer goes on",
          "[net][tls]") {
  constexpr std::size_t kParams = 1000;
  TcpByHand t(kParams);
  const auto frame = wire::encode_frame(
      wire::FrameType::kParams, 0, 0, wire::encode_params(params_for(0, 0, kParams), 1.0,
                                                           WireFormat::kFp32));
  // One bit of the ciphertext, then one of the length: each is refused before it is used.
  struct Case { std::size_t flip_at; std::string expect; };
  for (const Case& c : {Case{wire::kRecordHeaderBytes + 100, "a record failed authentication"},
                        Case{3, "bad record header"}}) {
    INFO("bit flipped at byte " << c.flip_at);
    REQUIRE(t.raw->send_tampered(frame, c.flip_at));
    CHECK(t.raw->closed_by_remote());
    CHECK(t.log.wait_for(c.expect));
    t.raw.reset();
    // The peer goes on: rank 0 may join again, and its round now arrives.
    t.raw = join_as_rank0(t.port, model_info({784, 128, 10}, kParams), std::nullopt);
  }
  t.raw->send(frame);
  const std::vector<int> from0{0};
  const auto in = t.b->collect(0, from0, collect_options(CollectMode::kSync, 0, 5s));
  REQUIRE(in.size() == 1);
  CHECK(same_bits(in[0].params, params_for(0, 0, kParams)));
}

TEST_CASE("a params frame's CRC32C guards it over plain TCP; in our records, whose tag already "
          "authenticates every byte, it is 0 and not computed",
          "[net][tls][wire]") {
  constexpr std::size_t kParams = 3000;
  const std::vector<int> from0{0}, to0{0};
  const CollectOptions sync = collect_options(CollectMode::kSync, 0, 5s);
  const auto p = small_params_for(0, 0, kParams);
  // The next params frame the exchange sends the raw client, views skipped (bounded).
  const auto next_params = [](RawClient& raw) {
    std::optional<wire::Frame> f;
    for (int i = 0; i < 8 && (!f || f->header.type != wire::FrameType::kParams); ++i)
      f = raw.read_frame(1 << 22);
    return f;
  };
  for (const WireFormat format : {WireFormat::kFp32, WireFormat::kBf16}) {
    INFO(wire_format_name(format));
    auto info = model_info({784, 128, 10}, kParams);
    info.wire = format;
    // Rank 1 of `cluster` at this format, parameters over TCP (shared memory off).
    const auto tcp_config = [&](Cluster& cluster, LogSink& log, bool tls) {
      auto config = cluster.by_hand(kParams, log);
      config.handshake.wire = format;
      config.shared_memory = false;
      config.tls.enabled = tls;
      return config;
    };
    {
      INFO("plain TCP: a flipped bit is refused by the CRC, and only that connection closes");
      Cluster cluster(2);
      LogSink log;
      const int port = cluster.listeners[1].port();
      auto config = tcp_config(cluster, log, false);
      config.timeouts.reconnect = 60s;
      NetExchange b(std::move(config), std::move(cluster.listeners[1]));
      auto raw = std::make_unique<RawClient>(port, std::nullopt);
      raw->send(hello_frame(0, info));
      REQUIRE(raw->read_frame());  // hello-ack
      auto bad = params_frame_in(format, 0, 0, p);
      bad[wire::kHeaderBytes + 100] ^= std::byte{0x40};
      raw->send(bad);
      CHECK(raw->closed_by_remote());
      CHECK(log.wait_for("bad CRC32C on params payload (round 0)"));
      raw = std::make_unique<RawClient>(port, std::nullopt);
      raw->send(hello_frame(0, info));
      REQUIRE(raw->read_frame());
      raw->send(params_frame_in(format, 0, 0, p));
      REQUIRE(b.collect(0, from0, sync).size() == 1);
      b.publish(0, p, 1.0, to0);  // over plain TCP our frames carry the CRC of their payload
      const auto f = next_params(*raw);  // read_frame's decode_frame checked it too
      REQUIRE(f);
      CHECK(f->header.type == wire::FrameType::kParams);
      CHECK(f->header.payload_crc == wire::crc32c(f->payload));
    }
    {
      INFO("TLS: our frames carry CRC 0; a sender's CRC is not what decides");
      Cluster cluster(2);
      LogSink log;
      const int port = cluster.listeners[1].port();
      NetExchange b(tcp_config(cluster, log, true), std::move(cluster.listeners[1]));
      auto raw = join_as_rank0(port, info, std::nullopt);
      b.publish(0, p, 1.0, to0);
      const auto f = next_params(*raw);
      REQUIRE(f);
      CHECK(f->header.type == wire::FrameType::kParams);
      CHECK(f->header.payload_crc == 0);
      // The rest of the frame is as over plain TCP: the weight, then the values as rounded.
      std::vector<float> got(kParams);
      const auto decoded = wire::decode_params(f->payload, format, got, 0);
      REQUIRE(decoded);
      CHECK(*decoded.value == 1.0);
      CHECK(same_bits(got, rounded(p, format)));
      // A frame whose CRC field disagrees with its payload is what its authenticated sender sent.
      auto odd = params_frame_in(format, 0, 0, p);
      odd[12] ^= std::byte{0x01};
      raw->send(odd);
      const auto in = b.collect(0, from0, sync);
      REQUIRE(in.size() == 1);
      CHECK(same_bits(in[0].params, rounded(p, format)));
    }
  }
}

TEST_CASE("a neighbour a round behind gets our next round once it asks for it, and we go on "
          "without waiting", "[net]") {
  constexpr std::size_t kParams = 5000;
  TcpByHand t(kParams);
  NetExchange& b = *t.b;
  auto& raw = t.raw;
  const std::vector<int> to0{0};
  const CollectOptions sync = collect_options(CollectMode::kSync, 0, 5s);
  std::vector<std::byte> last;  // the payload of the last frame next() returned
  // The next params or ready frame from b, views (and its address record) skipped: "params 2",
  // "ready 3" or "none".
  auto next = [&] {
    for (int i = 0; i < 64; ++i) {  // bounded: each read gives up after 5 s
      const auto f = raw->read_frame(1 << 22);
      if (!f) break;
      if (f->header.type == wire::FrameType::kView || f->header.type == wire::FrameType::kAddress)
        continue;
      last.assign(f->payload.begin(), f->payload.end());
      return cat(wire::frame_type_name(static_cast<std::uint16_t>(f->header.type)), " ",
                 f->header.round);
    }
    return std::string("none");
  };
  auto ready = [&](std::int64_t round) {
    raw->send(wire::encode_frame(wire::FrameType::kReady, 0, round, {}));
  };
  auto params = [&](std::int64_t round) {
    raw->send(params_frame(0, round, params_for(0, round, kParams)));
  };
  std::vector<std::vector<float>> p;
  for (int r = 0; r < 5; ++r) p.push_back(params_for(1, r, kParams));

  // Rank 0 waits for round 1 (it said so before its rounds 0 and 1, which b reads after it).
  ready(1);
  params(0);
  params(1);
  for (std::int64_t r : {0, 1}) {
    b.publish(r, p[r], 1.0, to0);
    REQUIRE(b.collect(r, to0, sync).size() == 1);
  }
  // b's rounds went out, and after each collect b said which round it waits for next.
  CHECK(next() == "params 0");
  CHECK(next() == "ready 1");
  CHECK(next() == "params 1");
  CHECK(next() == "ready 2");

  // Round 2 is one ahead of what rank 0 waits for: held. b still collects round 2 at once and
  // may then overwrite its buffer (the held frame took a copy).
  const std::vector<float> sent2 = p[2];
  b.publish(2, p[2], 1.0, to0);
  params(2);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(b.collect(2, to0, sync).size() == 1);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  std::fill(p[2].begin(), p[2].end(), 0.0f);
  CHECK(next() == "ready 3");  // b's ready passed its held round 2
  ready(2);
  REQUIRE(next() == "params 2");
  CHECK(std::memcmp(last.data() + wire::kWeightBytes, sent2.data(), kParams * 4) == 0);

  // Two rounds ahead (rank 0 still waits for 2): the neighbour is far behind, nothing is held.
  b.publish(3, p[3], 1.0, to0);
  b.publish(4, p[4], 1.0, to0);
  CHECK(next() == "params 3");
  CHECK(next() == "params 4");
  params(3);
  REQUIRE(b.collect(3, to0, sync).size() == 1);
  CHECK(b.dead_peers().empty());
}

TEST_CASE("a peer that leaves sends the round its gate holds before its bye", "[net]") {
  constexpr std::size_t kParams = 1000;
  TcpByHand t(kParams);
  auto& b = t.b;
  auto& raw = t.raw;
  const std::vector<int> to0{0};
  raw->send(wire::encode_frame(wire::FrameType::kReady, 0, 1, {}));  // rank 0 waits for 1
  raw->send(params_frame(0, 0, params_for(0, 0, kParams)));
  const auto p0 = params_for(1, 0, kParams), p1 = params_for(1, 1, kParams);
  b->publish(0, p0, 1.0, to0);
  // b's collect of round 0 ends after it read rank 0's ready frame (sent before round 0).
  REQUIRE(b->collect(0, to0, collect_options(CollectMode::kSync, 0, 5s)).size() == 1);
  b->publish(1, p1, 1.0, to0);  // the round rank 0 waits for: sent
  b->publish(2, p1, 1.0, to0);  // round 2: held (rank 0 waits for 1)
  // The round 2 frame stops counting as soon as b's next collect has its messages.
  raw->send(params_frame(0, 1, params_for(0, 1, kParams)));
  REQUIRE(b->collect(1, to0, collect_options(CollectMode::kSync, 0, 5s)).size() == 1);
  b.reset();  // shutdown: bye to every neighbour
  std::vector<std::string> seen;
  for (int i = 0; i < 64; ++i) {  // bounded: each read gives up after 5 s
    const auto f = raw->read_frame(1 << 22);
    if (!f) break;
    if (f->header.type == wire::FrameType::kParams || f->header.type == wire::FrameType::kBye)
      seen.push_back(cat(wire::frame_type_name(static_cast<std::uint16_t>(f->header.type)), " ",
                         f->header.round));
    if (f->header.type == wire::FrameType::kBye) break;
  }
  CHECK(seen == std::vector<std::string>{"params 0", "params 1", "params 2", "bye 0"});
}

TEST_CASE("a same-host neighbour's shared memory is checked as its frames are", "[net][shm]") {
  constexpr std::size_t kParams = 3000;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.by_hand(kParams, log);
  config.timeouts.reconnect = 60s;  // each refusal below closes the link; rank 0 redials
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  std::string why;
  auto seg = net::ShmSegment::create(kParams, WireFormat::kFp32, 4, &why);
  REQUIRE(seg);
  const auto info = model_info({784, 128, 10}, kParams);
  const std::vector<int> from0{0};
  const CollectOptions sync = collect_options(CollectMode::kSync, 0, 5s);
  auto join = [&](const wire::ShmOffer& offer) { return join_as_rank0(port, info, offer); };
  auto announce = [](RawClient& raw, std::int64_t round, const wire::ShmNote& note) {
    raw.send(wire::encode_frame(wire::FrameType::kShmParams, 0, round,
                                wire::encode_shm_note(note)));
  };
  auto collect_one = [&](std::int64_t round) {  // the Inbox is valid until the next collect
    auto in = b.collect(round, from0, sync);
    REQUIRE(in.size() == 1);
    return in[0];
  };

  auto raw = join(seg->offer());
  auto ready = raw->read_frame();
  REQUIRE(ready);
  CHECK(ready->header.type == wire::FrameType::kShmReady);
  CHECK(log.wait_for("peer 0 is on this host: its parameters come through shared memory"));
  CHECK(b.shared_memory_peers() == from0);
  {
    INFO("a good round arrives bit-exact");
    const auto p = params_for(0, 0, kParams);
    announce(*raw, 0, seg->write(0.75, values_of(p)));
    const Inbox in = collect_one(0);
    CHECK(same_bits(in.params, p));
    CHECK(in.weight == 0.75);
  }
  {
    INFO("a slot rewritten before it was read: that round is dropped, the link stays");
    const auto stale = seg->write(1.0, values_of(params_for(0, 1, kParams)));
    wire::ShmNote latest;
    for (int k = 0; k < 4; ++k)
      latest = seg->write(1.0, values_of(params_for(0, 2, kParams)));
    announce(*raw, 1, stale);
    CHECK(log.wait_for("round 1: its shared slot 1 was rewritten before we had read it"));
    announce(*raw, 2, latest);
    CHECK(same_bits(collect_one(2).params, params_for(0, 2, kParams)));
  }
  {
    INFO("NaN in shared memory is named, as in a frame; the round has it at once (the "
         "algorithm leaves it out) and the link stays up");
    auto bad = params_for(0, 3, kParams);
    bad[7] = std::nanf("");
    announce(*raw, 3, seg->write(1.0, values_of(bad)));
    CHECK(std::isnan(collect_one(3).params[7]));
    const auto alerts = b.take_alerts();
    REQUIRE(alerts.size() == 1);
    CHECK((alerts[0].kind == gossip::MemberEventKind::kRefusedParams && alerts[0].peer == 0));
    CHECK_THAT(alerts[0].message, Contains("parameter 7 of round 3 is nan"));
    const auto p = params_for(0, 4, kParams);
    announce(*raw, 4, seg->write(1.0, values_of(p)));
    CHECK(same_bits(collect_one(4).params, p));
    raw.reset();  // the next cases dial again as rank 0
    CHECK(log.wait_for("link lost"));
  }
  {
    INFO("a slot that does not exist");
    raw = join(seg->offer());
    announce(*raw, 4, wire::ShmNote{9, 2, 1.0});
    CHECK(log.wait_for("shm-params names slot 9 of 4"));
    CHECK(raw->closed_by_remote());
  }
  {
    INFO("an offer that does not check out: TCP, and announcements are refused");
    auto wrong = seg->offer();
    wrong.token ^= 0xFF;
    raw = join(wrong);
    CHECK(log.wait_for("its shared memory cannot be used ("));
    CHECK(b.shared_memory_peers().empty());
    announce(*raw, 5, seg->write(1.0, values_of(params_for(0, 5, kParams))));
    CHECK(log.wait_for("shm-params frame, but we have not mapped this peer's shared memory"));
    CHECK(raw->closed_by_remote());
  }
  {
    INFO("after all that, the peer still takes a good neighbour");
    raw = join(seg->offer());
    REQUIRE(raw->read_frame());  // shm-ready
    const auto p = params_for(0, 6, kParams);
    announce(*raw, 6, seg->write(1.0, values_of(p)));
    CHECK(same_bits(collect_one(6).params, p));
  }
}

TEST_CASE("shm-ready to a peer that offered no shared memory closes the link", "[net][shm]") {
  constexpr std::size_t kParams = 100;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.by_hand(kParams, log);
  config.shared_memory = false;
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  wire::Hello theirs;
  auto raw = join_as_rank0(port, model_info({784, 128, 10}, kParams), std::nullopt, &theirs);
  CHECK_FALSE(theirs.shm);  // shared memory off: nothing offered
  raw->send(wire::encode_frame(wire::FrameType::kShmReady, 0, 0, {}));
  CHECK(log.wait_for("shm-ready frame, but we offered no shared memory"));
  CHECK(raw->closed_by_remote());
}

TEST_CASE("a shared segment of a half-width run hands over the rounded values", "[net][shm]") {
  constexpr std::size_t kParams = 100'003;
  for (const WireFormat w : {WireFormat::kBf16, WireFormat::kFp16}) {
    INFO(wire_format_name(w));
    std::string why;
    auto seg = net::ShmSegment::create(kParams, w, 4, &why);
    REQUIRE(seg);
    // Half the bytes a float32 slot takes (a page of header, each slot rounded up to pages).
    CHECK(seg->offer().bytes < net::ShmSegment::create(kParams, WireFormat::kFp32, 4, &why)
                                   ->offer().bytes * 6 / 10);
    // A reader of another format does not map it.
    CHECK(net::ShmView::open(seg->offer(), kParams, WireFormat::kFp32, &why) == nullptr);
    CHECK_THAT(why, Contains("it offers a segment of"));
    auto view = net::ShmView::open(seg->offer(), kParams, w, &why);
    INFO(why);
    REQUIRE(view);
    const auto p = small_params_for(0, 0, kParams);
    std::vector<std::uint16_t> halves(kParams);
    REQUIRE(narrow_to_wire(p, w, halves));
    std::vector<float> out(kParams);
    bool finite = false;
    REQUIRE(view->read(seg->write(0.5, std::as_bytes(std::span(halves))), out, &finite) ==
            net::ShmView::Read::kOk);
    CHECK(finite);
    CHECK(same_bits(out, rounded(p, w)));
    halves[kParams - 1] = w == WireFormat::kFp16 ? 0x7e00 : 0x7fc0;  // a NaN
    REQUIRE(view->read(seg->write(0.5, std::as_bytes(std::span(halves))), out, &finite) ==
            net::ShmView::Read::kOk);
    CHECK_FALSE(finite);
  }
}

TEST_CASE("a half-width link refuses malformed and truncated frames, closing only that "
          "connection, and names non-finite ones",
          "[net][wire]") {
  constexpr std::size_t kParams = 3000;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.by_hand(kParams, log);
  config.handshake.wire = WireFormat::kBf16;
  config.shared_memory = false;
  config.timeouts.reconnect = 60s;  // each refusal below closes the link; rank 0 comes back
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  auto info = model_info({784, 128, 10}, kParams);
  info.wire = WireFormat::kBf16;
  const std::vector<int> from0{0};
  const CollectOptions sync = collect_options(CollectMode::kSync, 0, 5s);
  const auto p = small_params_for(0, 0, kParams);
  auto join = [&] { return join_as_rank0(port, info, std::nullopt); };
  {
    INFO("a good bf16 frame arrives as the sender rounded it");
    auto raw = join();
    raw->send(params_frame_in(WireFormat::kBf16, 0, 0, p, 0.75));
    const auto in = b.collect(0, from0, sync);
    REQUIRE(in.size() == 1);
    CHECK(same_bits(in[0].params, rounded(p, WireFormat::kBf16)));
    CHECK(in[0].weight == 0.75);
  }
  struct Case {
    std::string name;
    std::vector<std::byte> bytes;
    std::string expect;
  };
  const auto good = params_frame_in(WireFormat::kBf16, 0, 1, p);
  auto nan = p;
  nan[7] = std::nanf("");
  wire::FrameHeader ragged{wire::FrameType::kParams, 0, 1, 8 + 2 * kParams + 1, 0};
  const auto ragged_head = wire::encode_header(ragged);
  const std::vector<Case> cases{
      {"a float32 frame on a bf16 link", params_frame_in(WireFormat::kFp32, 0, 1, p),
       cat("params payload of ", 8 + 4 * kParams, " bytes, expected ", 8 + 2 * kParams, " (",
           kParams, " bf16 values)")},
      {"a ragged payload", {ragged_head.begin(), ragged_head.end()},
       cat("malformed params frame: payload of ", 8 + 2 * kParams + 1,
           " bytes is not an f64 weight plus whole bf16 values")},
      {"cut short", std::vector<std::byte>(good.begin(), good.begin() + wire::kHeaderBytes + 1000),
       cat("truncated frame: connection closed after 1000 of ", 8 + 2 * kParams,
           " payload bytes")},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto raw = join();
    raw->send(c.bytes);
    raw->finish_sending();
    CHECK(raw->closed_by_remote());
    CHECK(log.wait_for(c.expect));
  }
  {
    INFO("NaN in bf16: named, delivered for its round (the algorithm leaves it out), the link "
         "stays up");
    auto raw = join();
    raw->send(params_frame_in(WireFormat::kBf16, 0, 1, nan));
    const auto in = b.collect(1, from0, sync);
    REQUIRE(in.size() == 1);
    CHECK(std::isnan(in[0].params[7]));
    const auto alerts = b.take_alerts();
    REQUIRE(alerts.size() == 1);
    CHECK_THAT(alerts[0].message, Contains("parameter 7 of round 1 is nan"));
  }
  {
    INFO("a float32 peer is refused at the handshake, saying why");
    RawClient raw(port);
    raw.send(hello_frame(0, model_info({784, 128, 10}, kParams)));
    const auto reply = raw.read_frame();
    REQUIRE(reply);
    CHECK(reply->header.type == wire::FrameType::kError);
    // The error frame carries the refusal's kind beside its words.
    const wire::Refusal refusal = wire::decode_refusal(reply->payload);
    CHECK(refusal.kind == wire::RefusalKind::kWire);
    CHECK_THAT(refusal.text, Contains("wire format fp32 != ours bf16"));
    CHECK(raw.closed_by_remote());
    CHECK(log.wait_for("refused: wire format fp32 != ours bf16"));
  }
  {
    INFO("after all that, a good neighbour's round still goes through");
    auto raw = join();
    const auto q = small_params_for(0, 2, kParams);
    raw->send(params_frame_in(WireFormat::kBf16, 0, 2, q));
    const auto in = b.collect(2, from0, sync);
    REQUIRE(in.size() == 1);
    CHECK(same_bits(in[0].params, rounded(q, WireFormat::kBf16)));
  }
}

TEST_CASE("a neighbour with another wire format is refused on both sides", "[net][wire]") {
  Cluster cluster(2);
  LogSink log;
  auto c0 = cluster.config(0, {1}, 1000, log);
  auto c1 = cluster.config(1, {0}, 1000, log);
  c1.handshake.wire = WireFormat::kBf16;
  start_refusing_pair(cluster, c0, c1);
  CHECK(log.wait_for("refused: wire format fp32 != ours bf16 (gossip.wire must be the same on "
                     "every peer of a run)"));
  CHECK(log.wait_for("net[0]: peer 1 (" + c0.addresses[1] + ") closed: refused us: refused by "
                     "peer 1: wire format fp32 != ours bf16"));
}

TEST_CASE("an fp16 peer refuses to send a parameter beyond fp16's range, naming it",
          "[net][wire]") {
  Cluster cluster(2);
  LogSink log;
  auto config = cluster.by_hand(100, log);
  config.handshake.wire = WireFormat::kFp16;
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  std::vector<float> p(100, 1.0f);
  p[42] = -7.0e4f;
  const std::vector<int> to0{0};
  CHECK_THROWS_WITH(b.publish(3, p, 1.0, to0),
                    Contains("gossip.wire fp16: parameter 42 of round 3 is -70000, beyond fp16's "
                             "largest finite value 65504") &&
                        Contains("use gossip.wire: bf16"));
  p[42] = 65504.0f;  // the largest finite half goes
  CHECK_NOTHROW(b.publish(4, p, 1.0, to0));
}

TEST_CASE("a neighbour with another model is refused on both sides", "[net]") {
  Cluster cluster(2);
  LogSink log;
  auto c0 = cluster.config(0, {1}, 1000, log);
  auto c1 = cluster.config(1, {0}, 1000, log);
  c1.handshake = model_info({784, 256, 128, 10}, 1000);
  // Both ends' links say so by kind, not only in words (a peer refuses to start on it).
  const auto failures = start_refusing_pair(cluster, c0, c1);
  CHECK(failures.first == LinkFailureKind::kModel);
  CHECK(failures.second == LinkFailureKind::kModel);
  CHECK(log.wait_for("net[1]: peer 0 (127.0.0.1:"));
  CHECK(log.wait_for("refused: model fingerprint 784-128-10 (1000 params) != ours "
                     "784-256-128-10 (1000 params)"));
  CHECK(log.wait_for("net[0]: peer 1 (" + c0.addresses[1] + ") closed: refused us: refused by "
                     "peer 1: model fingerprint"));
}

TEST_CASE("a neighbour with other gossip settings is refused on both sides, naming both",
          "[net]") {
  Cluster cluster(2);
  LogSink log;
  auto c0 = cluster.config(0, {1}, 1000, log);
  auto c1 = cluster.config(1, {0}, 1000, log);
  // As gossip_settings (src/peer) fills them in; test_peer checks that it does.
  c0.handshake.gossip = choco_settings();
  c1.handshake.gossip = choco_settings();
  c1.handshake.gossip.consensus_step = 0.05;
  // The dialler was refused; the acceptor, which waits to be dialled, saw no link form.
  const auto failures = start_refusing_pair(cluster, c0, c1);
  CHECK(failures.first == LinkFailureKind::kHandshakeRefused);
  CHECK(failures.second == LinkFailureKind::kNeverFormed);
  CHECK(log.wait_for("refused: gossip.choco.consensus_step 0.1 != ours 0.05 (must be the same on "
                     "every peer of a run)"));
  CHECK(log.wait_for("net[0]: peer 1 (" + c0.addresses[1] + ") closed: refused us: refused by "
                     "peer 1: gossip.choco.consensus_step 0.1 != ours 0.05"));
}

TEST_CASE("the fuzz seeds are frames and handshakes of this protocol version", "[net][wire]") {
  // So the fuzzers start from inputs the decoders take, not ones refused at the version.
  const char* root = std::getenv("GOSSIP_SOURCE_DIR");
  REQUIRE(root != nullptr);
  const auto read = [](const std::filesystem::path& f) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    std::memcpy(b.data(), c.data(), c.size());
    return b;
  };
  const std::filesystem::path corpus = std::filesystem::path(root) / "fuzz" / "corpus";
  int frames = 0, hellos = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "frame")) {
    INFO(entry.path().string());
    const auto bytes = read(entry.path());
    const std::string name = entry.path().filename().string();
    const WireFormat format = name.ends_with("_bf16")   ? WireFormat::kBf16
                              : name.ends_with("_fp16") ? WireFormat::kFp16
                                                        : WireFormat::kFp32;
    const auto f = wire::decode_frame(bytes, 1 << 22, format);
    REQUIRE(f);
    ++frames;
    if (f.value->header.type == wire::FrameType::kHello ||
        f.value->header.type == wire::FrameType::kHelloAck) {
      const auto h = wire::decode_hello(f.value->payload);
      REQUIRE(h);
      CHECK(h.value->protocol_version == wire::kVersion);
      ++hellos;
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "handshake")) {
    INFO(entry.path().string());
    const auto h = wire::decode_hello(read(entry.path()));
    REQUIRE(h);
    CHECK(h.value->protocol_version == wire::kVersion);
    ++hellos;
  }
  CHECK(frames >= 12);
  CHECK(hellos >= 5);
}

TEST_CASE("a broken or vanished link is left out after the deadline and reported", "[net]") {
  constexpr std::size_t kParams = 256;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.config(1, {0}, kParams, log);
  config.timeouts.start = 3s;
  const std::vector<int> from{0};
  const CollectOptions opts = collect_options(CollectMode::kSync, 0, 700ms);
  const auto hello = hello_frame(0, config.handshake);
  {
    // Rank 0 is played by a raw client: it connects before the exchange even starts (its TLS
    // handshake and hello complete once the exchange runs).
    RawClient raw(port);
    auto greeted = std::async(std::launch::async, [&] { raw.send(hello); });
    NetExchange ex(config, std::move(cluster.listeners[1]));
    greeted.get();
    REQUIRE(raw.read_frame());  // hello-ack
    const auto p = params_for(0, 0, kParams);
    raw.send(params_frame(0, 0, p));
    auto in = ex.collect(0, from, opts);
    REQUIRE(in.size() == 1);
    CHECK(same_bits(in[0].params, p));
    CHECK(in[0].weight == 0.5);

    REQUIRE(raw.send_tampered(params_frame(0, 1, p), wire::kRecordHeaderBytes + 100));
    CHECK(raw.closed_by_remote());
    CHECK(log.wait_for("a record failed authentication"));
    CHECK(ex.collect(1, from, opts).empty());
    CHECK(ex.dead_peers() == std::vector<int>{0});

    RawClient again(port);  // the "peer" comes back within the reconnect window
    again.send(hello);
    REQUIRE(again.read_frame());
    again.send(params_frame(0, 2, p));
    in = ex.collect(2, from, opts);
    REQUIRE(in.size() == 1);
    CHECK(in[0].round == 2);
    CHECK(ex.dead_peers().empty());

    // A frame with a valid CRC whose model is not numbers: named, and delivered for its round
    // so the round does not wait (every algorithm leaves it out); the peer is alive, lying, so
    // the link stays up and it is not reported dead. Counted: the 1st, 2nd, 4th ... refusal
    // is an alert.
    auto poisoned = p;
    poisoned[17] = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t r = 3; r < 6; ++r) {
      again.send(params_frame(0, r, poisoned));
      in = ex.collect(r, from, opts);
      REQUIRE(in.size() == 1);
      CHECK(std::isnan(in[0].params[17]));
      CHECK_FALSE(in[0].checked_finite);  // so the algorithm's own check looks at it
    }
    const auto alerts = ex.take_alerts();
    REQUIRE(alerts.size() == 2);
    CHECK_THAT(alerts[0].message, Contains("round 3 is nan (a peer must send finite values); 1 message "));
    CHECK_THAT(alerts[1].message, Contains("round 4 is nan (a peer must send finite values); 2 messages "));
    CHECK(ex.dead_peers().empty());
    again.send(params_frame(0, 6, p));
    in = ex.collect(6, from, opts);
    REQUIRE(in.size() == 1);
    CHECK(same_bits(in[0].params, p));
    CHECK(in[0].checked_finite);  // checked on receipt: the algorithm need not scan it again
  }
  CHECK(log.wait_for("link lost"));
}

TEST_CASE("a neighbour that leaves mid-run is left out and shows up in dead_peers", "[net]") {
  constexpr int kPeers = 3;
  constexpr std::size_t kParams = 4096;
  Cluster cluster(kPeers);
  LogSink log;
  std::vector<std::string> problems(kPeers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kPeers; ++r) {
    std::vector<int> others;
    for (int q = 0; q < kPeers; ++q)
      if (q != r) others.push_back(q);
    threads.emplace_back([&, r, others, c = cluster.config(r, others, kParams, log),
                          l = std::move(cluster.listeners[r])]() mutable {
      std::vector<float> mine;
      NetExchange ex(std::move(c), std::move(l));
      const int rounds = r == 2 ? 2 : 4;  // peer 2 leaves after round 1
      for (int round = 0; round < rounds; ++round) {
        mine = params_for(r, round, kParams);
        ex.publish(round, mine, 1.0, others);
        const auto t0 = std::chrono::steady_clock::now();
        const auto in = ex.collect(round, others, collect_options(CollectMode::kSync, 0, 3s));
        const auto took = std::chrono::steady_clock::now() - t0;
        const std::size_t want = (round < 2 || r == 2) ? 2 : 1;
        if (in.size() != want) problems[r] += cat("round ", round, ": ", in.size(), " inboxes; ");
        if (took > 4s) problems[r] += cat("round ", round, ": collect hung; ");
        for (const auto& m : in)
          if (!same_bits(m.params, params_for(m.peer, round, kParams)))
            problems[r] += cat("round ", round, ": peer ", m.peer, " params differ; ");
        // Checked here, while the other survivor still waits for our round 3.
        if (r != 2 && round == 2 && ex.dead_peers() != std::vector<int>{2})
          problems[r] += "2 not dead; ";
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kPeers; ++r) {
    INFO("peer " << r);
    CHECK(problems[r] == "");
  }
  CHECK(log.wait_for("peer 2 (127.0.0.1:"));
  CHECK(log.wait_for("left (bye)"));
}

TEST_CASE("a checkpoint decodes to what was encoded, and damage of any kind is named",
          "[net][checkpoint]") {
  Checkpoint c;
  c.rank = 3;
  c.round = 40;
  c.rounds = 100;
  c.run_fingerprint = 0x1234567890abcdefULL;
  c.params = {1.0f, -2.5f, 3.25f};
  c.velocity = {0.5f, 0.0f, -0.125f};
  c.steps = 41;
  c.sampler_epoch = 2;
  c.sampler_pos = 16;
  c.sampler_drawn = 33;
  c.weight = 0.75;
  c.loss_sum = 1.5;
  c.loss_count = 3;
  c.missing = 1;
  c.bytes_sent = 999;
  c.algorithm_state = {0.25f, -1.0f, 7.0f, 0.0f, 2.0f, -3.0f};
  for (int b : {0x80, 0x04, 0x00, 0xff, 0x2e}) c.caller_state.push_back(std::byte(b));
  const auto bytes = encode_checkpoint(c);
  std::string why;
  const auto back = decode_checkpoint(bytes, &why);
  REQUIRE(back);
  CHECK(back->rank == 3);
  CHECK(back->round == 40);
  CHECK(back->params == c.params);
  CHECK(back->velocity == c.velocity);
  CHECK(back->sampler_drawn == 33);
  CHECK(back->weight == 0.75);
  CHECK(back->bytes_sent == 999);
  CHECK(back->algorithm_state == c.algorithm_state);
  CHECK(back->caller_state == c.caller_state);

  auto refused = [](std::vector<std::byte> b) {
    std::string reason;
    CHECK_FALSE(decode_checkpoint(b, &reason));
    return reason;
  };
  CHECK_THAT(refused({bytes.begin(), bytes.begin() + 10}), Catch::Contains("truncated"));
  CHECK_THAT(refused({bytes.begin(), bytes.end() - 1}), Catch::Contains("truncated"));
  auto flipped = bytes;
  flipped[30] ^= std::byte{1};
  CHECK_THAT(refused(flipped), Catch::Contains("checksum mismatch"));
  auto magic = bytes;
  magic[0] = std::byte{'X'};
  CHECK_THAT(refused(magic), Catch::Contains("not a gossip checkpoint"));
  auto version = bytes;
  version[8] = std::byte{9};
  CHECK_THAT(refused(version), Catch::Contains("version 9"));
  // Edited bytes get a fresh SHA-256 over their payload, so that only the edit is wrong.
  auto reseal = [](std::vector<std::byte>& b) {
    const std::size_t header = 8 + 4 + 8, payload = b.size() - header - 32;
    const std::string hex = sha256_hex(b.data() + header, payload);
    for (std::size_t i = 0; i < 32; ++i)
      b[header + payload + i] = static_cast<std::byte>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  };
  // An algorithm state longer than what is left is refused before anything is allocated: the
  // last buffer's count (after the fields, a 4-byte rank and twelve 8-byte values, then params
  // and velocity, 8 + 12 bytes each) made huge, with the checksum redone so that only the length
  // is wrong.
  {
    auto huge = bytes;
    const std::size_t header = 8 + 4 + 8, fields_bytes = 4 + 8 * 12;
    const std::size_t at = header + fields_bytes + 2 * (8 + 12);
    const std::uint64_t lie = 1ull << 40;
    std::memcpy(huge.data() + at, &lie, 8);
    reseal(huge);
    CHECK_THAT(refused(huge), Catch::Contains("algorithm state of 1099511627776 floats is longer"));
  }
  // So is a caller state longer than what is left (its count follows the algorithm's 6 floats).
  {
    auto huge = bytes;
    const std::size_t header = 8 + 4 + 8, fields_bytes = 4 + 8 * 12;
    const std::size_t at = header + fields_bytes + 2 * (8 + 12) + (8 + 24);
    const std::uint64_t lie = 1ull << 40;
    std::memcpy(huge.data() + at, &lie, 8);
    reseal(huge);
    CHECK_THAT(refused(huge), Catch::Contains("caller state of 1099511627776 bytes is longer"));
  }
  // Older files still read: version 2 (no caller state) and version 1 (no algorithm state
  // either). With those empty, version 3 is the older version plus an empty count for each.
  auto older = [&](std::uint32_t version, Checkpoint old) {
    old.caller_state.clear();
    if (version == 1) old.algorithm_state.clear();
    auto b = encode_checkpoint(old);
    const std::size_t header = 8 + 4 + 8, drop = 8 * (3 - version);
    b.erase(b.end() - 32 - static_cast<std::ptrdiff_t>(drop), b.end() - 32);
    std::memcpy(b.data() + 8, &version, 4);
    const std::uint64_t length = b.size() - header - 32;
    std::memcpy(b.data() + 12, &length, 8);
    reseal(b);
    std::string reason;
    auto read = decode_checkpoint(b, &reason);
    INFO(reason);
    REQUIRE(read);
    return *read;
  };
  const Checkpoint v2 = older(2, c);
  CHECK(v2.params == c.params);
  CHECK(v2.algorithm_state == c.algorithm_state);
  CHECK(v2.caller_state.empty());
  const Checkpoint v1 = older(1, c);
  CHECK(v1.params == c.params);
  CHECK(v1.algorithm_state.empty());
  CHECK(v1.caller_state.empty());
}

TEST_CASE("TLS credentials that do not fit are refused before anything starts", "[net][tls]") {
  Cluster cluster(2);
  LogSink log;
  auto config = cluster.by_hand(100, log);
  auto expect = [&](TlsConfig tls, const std::string& why) {
    INFO(why);
    config.tls = std::move(tls);
    NetListener listener("127.0.0.1:0");
    try {
      NetExchange ex(config, std::move(listener));
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Contains(why));
    }
  };
  TlsConfig wrong_rank = keys().rank(1);
  wrong_rank.cert = keys().rank(0).cert;
  wrong_rank.key = keys().rank(0).key;
  expect(wrong_rank, "is for rank 0 of run 'test-run', but this is rank 1 of run 'test-run'");
  TlsConfig mismatched = keys().rank(1);
  mismatched.key = keys().rank(0).key;
  expect(mismatched, "net.tls.key: cannot use " + mismatched.key + ": key values mismatch");
  TlsConfig missing = keys().rank(1);
  missing.ca = (keys().dir / "nope.pem").string();
  expect(missing, "net.tls.ca: " + missing.ca + ": no such file");
  TlsConfig empty = keys().rank(1);
  empty.key.clear();
  expect(empty, "net.tls.key: no file given");
  const CertificateAuthority other("test-run", 1);
  const auto dir = keys().dir / "other";
  std::filesystem::create_directories(dir);
  other.write((dir / "ca.pem").string());
  TlsConfig foreign = keys().rank(1);
  foreign.ca = (dir / "ca.pem").string();
  expect(foreign, "does not verify against the CA: unable to get local issuer certificate");
}

TEST_CASE("intruders without the run's credentials are refused; the link and rounds go on",
          "[net][tls]") {
  constexpr std::size_t kParams = 2000;
  Cluster cluster(3);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto a = std::async(std::launch::async, [&, c = cluster.config(0, {1}, kParams, log),
                                           l = std::move(cluster.listeners[0])]() mutable {
    return std::make_unique<NetExchange>(std::move(c), std::move(l));
  });
  auto c1 = cluster.config(1, {0}, kParams, log);
  NetExchange b(c1, std::move(cluster.listeners[1]));
  auto ex0 = a.get();
  REQUIRE(b.connected_peers() == std::vector<int>{0});

  const auto dir = keys().dir / "intruders";
  std::filesystem::create_directories(dir);
  auto file = [&](const char* name) { return (dir / name).string(); };
  const CertificateAuthority other_ca("test-run", 1);
  other_ca.issue("test-run", 0, file("other.pem"), file("other.key"), -1h, 24h);
  keys().ca.issue("test-run", 0, file("old.pem"), file("old.key"), -48h, -24h);
  keys().ca.issue("another-run", 0, file("run.pem"), file("run.key"), -1h, 24h);
  const std::string ca = keys().rank(0).ca;
  struct Case {
    const char* what;
    std::optional<test::ClientCredentials> creds;
    const char* expect;
  };
  const std::vector<Case> cases{
      {"plain TCP", std::nullopt, "TLS handshake failed: "},
      {"no certificate", test::ClientCredentials{ca, "", ""},
       "refused: TLS handshake failed: peer did not return a certificate"},
      {"another CA", test::ClientCredentials{ca, file("other.pem"), file("other.key")},
       "refused: TLS handshake failed: certificate verify failed (unable to get local issuer "
       "certificate)"},
      {"expired", test::ClientCredentials{ca, file("old.pem"), file("old.key")},
       "refused: TLS handshake failed: certificate verify failed (certificate has expired)"},
      {"another run", test::ClientCredentials{ca, file("run.pem"), file("run.key")},
       "refused: its certificate is for run 'another-run', not ours 'test-run'"},
      {"rank 2 claiming rank 0", keys().client(2),
       "refused: hello claims rank 0, but its certificate is for rank 2"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    RawClient raw(port, c.creds);
    REQUIRE(raw.connected());
    raw.send(hello_frame(0, c1.handshake));
    const auto p = std::vector<float>(kParams, 0.5f);
    for (int round = 0; round < 3; ++round) raw.send(params_frame(0, round, p));
    const auto reply = raw.read_frame();
    CHECK((!reply || reply->header.type == wire::FrameType::kError));
    CHECK(raw.closed_by_remote());
    CHECK(log.wait_for(c.expect));
  }
  // The real link was never replaced, and its rounds arrive bit-exact: nothing of the
  // intruders' reached the mailbox.
  const std::vector<int> to0{0}, to1{1};
  for (std::int64_t round = 0; round < 3; ++round) {
    const auto p0 = params_for(0, round, kParams), p1 = params_for(1, round, kParams);
    ex0->publish(round, p0, 1.0, to1);
    b.publish(round, p1, 1.0, to0);
    const auto at1 = b.collect(round, to0, collect_options(CollectMode::kSync, 0, 5s));
    const auto at0 = ex0->collect(round, to1, collect_options(CollectMode::kSync, 0, 5s));
    REQUIRE(at1.size() == 1);
    REQUIRE(at0.size() == 1);
    CHECK(same_bits(at1[0].params, p0));
    CHECK(at1[0].weight == 1.0);
    CHECK(same_bits(at0[0].params, p1));
  }
  CHECK(b.dead_peers().empty());
  std::lock_guard lk(log.mu);
  for (const auto& l : log.lines) CHECK(l.find("replaced") == std::string::npos);
}

TEST_CASE("a second live connection with a connected identity is refused (identity_conflict)",
          "[net][tls]") {
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.by_hand(100, log);
  config.timeouts.silent = 5s;  // the first connection stays live for the whole test
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  const auto info = model_info({784, 128, 10}, 100);
  auto first = join_as_rank0(port, info, std::nullopt);
  REQUIRE(b.connected_peers() == std::vector<int>{0});
  // Someone else holding rank 0's certificate (or rank 0 started twice).
  auto second = std::make_unique<RawClient>(port);
  second->send(hello_frame(0, info, std::nullopt));
  const auto answer = second->read_frame();
  REQUIRE(answer);
  CHECK(answer->header.type == wire::FrameType::kError);
  CHECK_THAT(std::string(reinterpret_cast<const char*>(answer->payload.data()),
                         answer->payload.size()),
             Contains("identity_conflict"));
  CHECK(log.wait_for("identity_conflict"));
  // The first connection stays, and the alert names the identity.
  CHECK(b.connected_peers() == std::vector<int>{0});
  const auto alerts = b.take_alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].kind == gossip::MemberEventKind::kIdentityConflict);
  CHECK(alerts[0].peer == 0);
  CHECK_THAT(alerts[0].message, Contains("identity of peer 0"));
  // More attempts within the alert period are refused too, but not alerted again.
  for (int i = 0; i < 3; ++i) {
    RawClient again(port);
    again.send(hello_frame(0, info, std::nullopt));
    const auto refused = again.read_frame();
    REQUIRE(refused);
    CHECK(refused->header.type == wire::FrameType::kError);
  }
  CHECK(b.take_alerts().empty());
  CHECK(b.connected_peers() == std::vector<int>{0});
}

TEST_CASE("a connection proving the same rank replaces a silent link and gets the round in flight",
          "[net][tls]") {
  // Big enough that the write cannot finish into socket buffers while rank 0 does not read.
  constexpr std::size_t kParams = 8 << 20;
  Cluster cluster(2);
  LogSink log;
  const int port = cluster.listeners[1].port();
  auto config = cluster.by_hand(kParams, log);
  config.shared_memory = false;
  // The first connection sends nothing after its hello: silent after this, so a new one with
  // the same certificate is the peer back (a half-open link), not an identity conflict. (A
  // stuck write is abandoned after twice the bound: the round is still in flight then.)
  config.timeouts.silent = 1s;
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  const auto info = model_info({784, 128, 10}, kParams);
  auto first = join_as_rank0(port, info, std::nullopt);
  REQUIRE(b.connected_peers() == std::vector<int>{0});
  // Rank 0 says something (its view), so its silence from now on counts.
  first->send(wire::encode_frame(wire::FrameType::kView, 0, 0,
                                 wire::encode_view(std::vector<Member>(2))));
  const auto p = params_for(1, 0, kParams);
  const std::vector<int> to0{0};
  b.publish(0, p, 1.0, to0);  // stuck on the first connection: rank 0 reads nothing there
  CHECK_FALSE(log.wait_for("replaced", 300ms));
  std::this_thread::sleep_for(900ms);  // past the silence bound
  auto second = join_as_rank0(port, info, std::nullopt);
  CHECK(log.wait_for(": replaced by a new connection from the same peer (what it sent on the old one is still read)"));
  const auto frame = second->read_frame(wire::kHeaderBytes + wire::kWeightBytes + kParams * 4);
  REQUIRE(frame);
  CHECK(frame->header.type == wire::FrameType::kParams);
  CHECK(frame->header.round == 0);
  REQUIRE(frame->payload.size() == wire::kWeightBytes + kParams * 4);
  CHECK(std::memcmp(frame->payload.data() + wire::kWeightBytes, p.data(), kParams * 4) == 0);
  CHECK(b.connected_peers() == std::vector<int>{0});
}

TEST_CASE("openssl s_client: no client certificate fails, the run's CA and a rank's completes",
          "[net][tls]") {
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) {
    WARN("no openssl binary: the s_client test is skipped");
    return;
  }
  Cluster cluster(2);
  LogSink log;
  auto config = cluster.by_hand(100, log);
  config.timeouts.handshake = 1s;  // s_client never says hello: we close after this
  const int port = cluster.listeners[1].port();
  NetExchange b(std::move(config), std::move(cluster.listeners[1]));
  const TlsConfig k = keys().rank(0);
  auto s_client = [&](const std::string& extra) {
    const std::string cmd = cat("openssl s_client -connect 127.0.0.1:", port,
                                " -tls1_3 -verify_return_error -ign_eof -CAfile ", k.ca, " ",
                                extra, " < /dev/null 2>&1");
    std::string out;
    FILE* f = popen(cmd.c_str(), "r");
    REQUIRE(f);
    char buf[4096];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
    return out;
  };
  {
    INFO("no client certificate");
    const std::string out = s_client("");
    INFO(out);
    CHECK_THAT(out, Contains("alert certificate required"));
    CHECK(log.wait_for("refused: TLS handshake failed: peer did not return a certificate"));
  }
  {
    INFO("the run's CA and rank 0's certificate and key");
    const std::string out = s_client(cat("-cert ", k.cert, " -key ", k.key));
    INFO(out);
    CHECK_THAT(out, Contains("TLSv1.3"));
    CHECK_THAT(out, Contains("Verify return code: 0 (ok)"));
    CHECK_THAT(out, !Contains("alert"));
    // TLS completed; then the peer waited for a hello that never came.
    CHECK(log.wait_for("closed: timed out waiting for the handshake ("));
  }
}

/// Two connected loopback TCP sockets, for checking socket options.
struct SocketPair {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::ip::tcp::socket client{io}, server{io};
  SocketPair() {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
};

TEST_CASE("a connection keeps at most 64 KB of a frame unsent in the kernel", "[net]") {
  // So a write completes only when the frame is nearly on the wire, and a peer's next message
  // does not start on another connection while its last one still leaves (net/socket.cpp).
  SocketPair pair;
  asio::ip::tcp::socket& client = pair.client;
  const auto lowat = [](asio::ip::tcp::socket& s) {
    int v = -1;
    socklen_t len = sizeof v;
    REQUIRE(getsockopt(s.native_handle(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len) == 0);
    return v;
  };
  const int before = lowat(client);  // the system's default (unlimited: -1 or 0 as unsigned)
  CHECK(before != 64 * 1024);
  CHECK(net::set_socket_options(client, 1 << 20, "").empty());
  CHECK(lowat(client) == 64 * 1024);
}

TEST_CASE("net.congestion sets each connection's TCP congestion control, or says why not",
          "[net]") {
  SocketPair pair;
  asio::ip::tcp::socket &client = pair.client, &server = pair.server;
  const auto congestion = [](asio::ip::tcp::socket& s) {
    char name[32] = {};
    socklen_t len = sizeof name - 1;
    REQUIRE(getsockopt(s.native_handle(), IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0);
    return std::string(name);
  };
  const std::string system = congestion(client);
  CHECK_FALSE(system.empty());
  // reno is built into every Linux kernel and always allowed.
  CHECK(net::set_socket_options(client, 1 << 20, "reno").empty());
  CHECK(congestion(client) == "reno");
  CHECK(net::set_socket_options(server, 1 << 20, "").empty());  // "": the system's, untouched
  CHECK(congestion(server) == system);
  // A name the kernel does not have: refused, said, and the connection keeps what it had.
  const std::string why = net::set_socket_options(server, 1 << 20, "nosuchcc");
  CHECK_THAT(why, Contains("net.congestion nosuchcc: the kernel refused it (") &&
                      Contains(cat("connections use the system's ", system)));
  CHECK(congestion(server) == system);
  // Both ends still talk.
  const std::string hello = "hello";
  asio::write(client, asio::buffer(hello));
  std::string got(hello.size(), '\0');
  asio::read(server, asio::buffer(got));
  CHECK(got == hello);
}

TEST_CASE("a neighbour that heartbeats but stops sending rounds is left out after the measured "
          "deadline, suspected and not declared dead, and refutes when it goes on",
          "[net][membership]") {
  // A triangle over TLS, each peer's exchange monitored as in gossip peer: 1 s of silence
  // suspects, a suspicion held 3 rounds and 0.2 s is a death, the round deadline follows the
  // measured rounds with a 0.3 s floor. Peer 2 stops
  // running rounds for 4 s at round 30 (its I/O thread still heartbeats): a slow peer, not a
  // stopped one.
  constexpr int kPeers = 3, kRounds = 130, kStallAt = 30;
  constexpr std::size_t kParams = 1000;
  Cluster cluster(kPeers);
  LogSink log;
  struct Seen {
    double longest_wait = 0, after_stall = 0;  // seconds
    bool suspected_2 = false, dead_2 = false;
    std::uint64_t held = 0;
    std::uint32_t own_incarnation = 0;
    std::chrono::milliseconds deadline{0};
  };
  std::vector<Seen> seen(kPeers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kPeers; ++r) {
    std::vector<int> nbrs;
    for (int q = 0; q < kPeers; ++q)
      if (q != r) nbrs.push_back(q);
    threads.emplace_back([&, r, nbrs, config = cluster.config(r, nbrs, kParams, log),
                          listener = std::move(cluster.listeners[r])]() mutable {
      std::vector<float> mine(kParams, static_cast<float>(r));
      NetExchange net(std::move(config), std::move(listener));
      MonitoredExchange ex(net, net, {.round_timeout_floor_s = 0.3, .suspect_after_s = 1.0,
                                      .dead_after_rounds = 3, .dead_after_s = 0.2});
      Seen& s = seen[r];
      std::chrono::steady_clock::time_point stall_start{};
      for (int round = 0; round < kRounds; ++round) {
        if (r == 2 && round == kStallAt) std::this_thread::sleep_for(4s);
        if (round == kStallAt) stall_start = std::chrono::steady_clock::now();
        ex.publish(round, mine, 1.0, nbrs);
        const auto t0 = std::chrono::steady_clock::now();
        ex.collect(round, nbrs, collect_options(CollectMode::kSync, 0, 30s));
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (round >= kStallAt) s.longest_wait = std::max(s.longest_wait, waited);
        if (round == kStallAt) s.deadline = ex.last_deadline();
        for (const auto& c : ex.membership().take_changes()) {
          s.suspected_2 |= c.peer == 2 && c.event == gossip::MemberEventKind::kSuspect;
          s.dead_2 |= c.peer == 2 && c.event == gossip::MemberEventKind::kDead;
        }
        std::this_thread::sleep_for(5ms);
      }
      s.after_stall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stall_start).count();
      s.held = ex.membership().held_deaths();
      s.own_incarnation = ex.membership().view()[r].incarnation;
    });
  }
  for (auto& t : threads) t.join();
  for (int r : {0, 1}) {
    INFO("peer " << r);
    // The deadline came from the measured rounds (a few ms each): the 0.3 s floor, not 30 s.
    CHECK(seen[r].deadline == 300ms);
    CHECK(seen[r].longest_wait >= 0.25);
    CHECK(seen[r].longest_wait < 2.0);
    // The others went on: their last 100 rounds took less than peer 2's 4 s stall.
    CHECK(seen[r].after_stall < 3.5);
    CHECK(seen[r].suspected_2);
    CHECK_FALSE(seen[r].dead_2);  // it heartbeats: slow, not dead
    CHECK(seen[r].held > 0);
  }
  // Peer 2, back, found itself suspected in their views and refuted it.
  CHECK(seen[2].own_incarnation >= 1);
}

// --- the HTTP server behind the dashboard and /metrics -------------------------------------------

namespace {
/// Sends `request` on a fresh connection to 127.0.0.1:port and reads the answer to its end.
/// A TCP connection to 127.0.0.1:port.
int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

std::string http_exchange(int port, const std::string& request) {
  const int fd = connect_loopback(port);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (431) and close before reading it all
    sent += static_cast<std::size_t>(n);
  }
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  close(fd);
  return answer;
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }
}  // namespace

TEST_CASE("the HTTP server answers GET and refuses what is malformed, huge or not a read",
          "[net][http]") {
  std::atomic<int> calls{0};
  gossip::HttpServer server(
      "127.0.0.1:0",
      [&](const std::string& path) -> gossip::HttpResponse {
        ++calls;
        if (path == "/hello") return {200, "text/plain", "hi\n"};
        return {404, "text/plain", "no\n"};
      },
      "test server");
  const int port = port_of(server.address());
  // A client that connects and says nothing holds up no one.
  const int idle = connect_loopback(port);

  const std::string ok = http_exchange(port, "GET /hello?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(ok.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(ok.find("Content-Length: 3\r\n") != std::string::npos);
  CHECK(ok.substr(ok.size() - 3) == "hi\n");
  const std::string head = http_exchange(port, "HEAD /hello HTTP/1.0\r\n\r\n");
  CHECK(head.rfind("HTTP/1.1 200 OK", 0) == 0);
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n");  // no body
  CHECK(http_exchange(port, "GET /other HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0) == 0);
  const int before = calls.load();
  CHECK(http_exchange(port, "GARBAGE\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(http_exchange(port, "GET relative HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(http_exchange(port, "GET / SPDY/3\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(http_exchange(port, "GET /a\x01 HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  const std::string post = http_exchange(port, "POST /hello HTTP/1.1\r\n\r\n");
  CHECK(post.rfind("HTTP/1.1 405 ", 0) == 0);
  CHECK(post.find("Allow: GET, HEAD\r\n") != std::string::npos);
  const std::string huge = "GET /hello HTTP/1.1\r\nX-Fill: " + std::string(64 * 1024, 'a') +
                           "\r\n\r\n";
  CHECK(http_exchange(port, huge).rfind("HTTP/1.1 431 ", 0) == 0);
  CHECK(calls.load() == before);  // none of them reached the handler
  CHECK(gossip::http_get(server.address(), "/hello", std::chrono::milliseconds(2000)) == "hi\n");
  CHECK_FALSE(gossip::http_get(server.address(), "/other", std::chrono::milliseconds(2000)));
  close(idle);
}

TEST_CASE("an HTTP server on a port in use says so", "[net][http]") {
  gossip::HttpServer first("127.0.0.1:0", [](const std::string&) { return gossip::HttpResponse{}; },
                           "first");
  try {
    gossip::HttpServer second(first.address(),
                              [](const std::string&) { return gossip::HttpResponse{}; },
                              "--dashboard");
    FAIL("the second server listened on a port in use");
  } catch (const gossip::RuntimeError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith("--dashboard: cannot listen on " +
                                                      first.address()));
    CHECK_THAT(e.what(), Catch::Matchers::Contains("another program, or another run"));
  }
  // Nothing listens on port 1: the GET gives up.
  CHECK_FALSE(gossip::http_get("127.0.0.1:1", "/metrics", std::chrono::milliseconds(500)));
}

TEST_CASE("membership announcements round-trip and malformed ones are refused",
          "[net][membership][elastic]") {
  using gossip::Announcement;
  using gossip::ChangeKind;
  const std::vector<Announcement> changes{{0, ChangeKind::kJoin, 0},
                                          {11, ChangeKind::kLeave, 500},
                                          {5, ChangeKind::kDead, std::int64_t{1} << 53}};
  const auto bytes = wire::encode_announcements(changes);
  CHECK(bytes.size() == 2 + 13 * 3);
  const auto back = wire::decode_announcements(bytes, 12);
  REQUIRE(back);
  CHECK(*back.value == changes);
  // A rank past the run's, a length that does not match the count, no count, an unknown kind,
  // a negative round, none at all.
  CHECK(wire::decode_announcements(bytes, 11).error == "announcement 1 names rank 11 of a run of 11");
  auto cut = bytes;
  cut.pop_back();
  CHECK(wire::decode_announcements(cut, 12).error ==
        "announce frame of 3 announcements must be 41 bytes, not 40");
  CHECK(wire::decode_announcements(std::span(bytes).first(1), 12).error ==
        "announce frame of 1 bytes is shorter than its count");
  auto bad = bytes;
  bad[2 + 13 + 4] = std::byte{4};
  CHECK(wire::decode_announcements(bad, 12).error == "announcement 1 has unknown kind 4");
  bad = bytes;
  bad[2 + 13 * 2 + 12] = std::byte{0x80};  // the top byte of the i64 round
  CHECK_THAT(wire::decode_announcements(bad, 12).error,
             Catch::Contains("announcement 2 has round -"));
  std::vector<std::byte> none(2, std::byte{0});
  CHECK(wire::decode_announcements(none, 12).error ==
        "announce frame with 0 announcements (1 to 4096)");
}

// --- signed address records ----------------------------------------------------------------------

TEST_CASE("address records: a member's own signed record is believed whoever passes it on; one "
          "signed by another identity, altered after signing, or from another CA is refused, "
          "naming why", "[net][address]") {
  using net::AddressBook;
  using V = AddressBook::Verdict;
  auto ctx = [](int r) { return net::make_tls_context(keys().rank(r), "test-run", r); };
  const auto c0 = ctx(0), c2 = ctx(2), c3 = ctx(3);
  AddressBook book(c0->native_handle(), "test-run", 0, 8, "127.0.0.1:7000");
  REQUIRE(book.signing());
  CHECK(book.address(0) == "127.0.0.1:7000");
  REQUIRE(book.frames().size() == 1);  // ours

  // Peer 3's own record: believed, and held once (a copy is nothing new; an older one neither).
  const wire::AddressRecord r3 =
      AddressBook::sign(c3->native_handle(), "test-run", 3, 10, "10.0.0.3:29503");
  AddressBook::Taken t = book.take(r3);
  CHECK(t.verdict == V::kNew);
  REQUIRE(t.frame);
  CHECK(book.address(3) == "10.0.0.3:29503");
  CHECK(book.take(r3).verdict == V::kKnown);
  CHECK(book.take(AddressBook::sign(c3->native_handle(), "test-run", 3, 9, "10.9.9.9:1")).verdict ==
        V::kKnown);
  CHECK(book.address(3) == "10.0.0.3:29503");
  REQUIRE(book.frames().size() == 2);
  // The frame passes it on as it came: its payload decodes to the same record.
  const auto frame = wire::decode_frame(*t.frame, 1 << 20);
  REQUIRE(frame);
  CHECK(frame.value->header.type == wire::FrameType::kAddress);
  const auto back = wire::decode_address_record(frame.value->payload, 8);
  REQUIRE(back);
  CHECK(*back.value == r3);

  // Peer 2 announcing an address for peer 3 (signed with its own key and certificate).
  t = book.take(AddressBook::sign(c2->native_handle(), "test-run", 3, 11, "6.6.6.6:29503"));
  CHECK(t.verdict == V::kRefused);
  CHECK_THAT(t.why, Catch::Contains("announces an address for peer 3 but is signed by peer 2's "
                                    "certificate"));
  // Peer 3's record with its address changed on the way.
  wire::AddressRecord altered =
      AddressBook::sign(c3->native_handle(), "test-run", 3, 12, "10.0.0.3:29503");
  altered.address = "6.6.6.6:29503";
  t = book.take(altered);
  CHECK(t.verdict == V::kRefused);
  CHECK_THAT(t.why, Catch::Contains("its signature does not match peer 3's certificate"));
  // A certificate for rank 3 of this run, from a CA that is not the run's.
  const auto other = std::filesystem::temp_directory_path() / cat("gossip-other-ca-", getpid());
  KeySetOptions o;
  o.run_id = "test-run";
  o.peers = 4;
  o.overwrite = true;
  create_key_set(other, o);
  const auto stranger = net::make_tls_context(tls_files_in(other, 3), "test-run", 3);
  t = book.take(AddressBook::sign(stranger->native_handle(), "test-run", 3, 13, "6.6.6.6:1"));
  std::filesystem::remove_all(other);
  CHECK(t.verdict == V::kRefused);
  CHECK_THAT(t.why, Catch::Contains("does not verify against the run's CA"));
  // Bytes that are no certificate.
  wire::AddressRecord junk = r3;
  junk.sequence = 14;
  junk.certificate = {std::byte{1}, std::byte{2}, std::byte{3}};
  t = book.take(junk);
  CHECK(t.verdict == V::kRefused);
  CHECK_THAT(t.why, Catch::Contains("not one DER certificate"));
  CHECK(book.address(3) == "10.0.0.3:29503");  // nothing refused changed what it holds
  // A record of ours that we did not make (a copy of us elsewhere): ours stays.
  CHECK(book.take(AddressBook::sign(c0->native_handle(), "test-run", 0, 99, "6.6.6.6:7000"))
            .verdict == V::kKnown);
  CHECK(book.address(0) == "127.0.0.1:7000");
  // Without TLS nothing can be checked: nothing is believed.
  AddressBook plain(nullptr, "test-run", 1, 8, "127.0.0.1:7001");
  CHECK_FALSE(plain.signing());
  CHECK(plain.take(r3).verdict == V::kRefused);
  CHECK(plain.frames().empty());
}

TEST_CASE("address record codec: round trip, and truncated, oversized or foreign records refused "
          "with the reason", "[net][address][wire]") {
  wire::AddressRecord r;
  r.rank = 5;
  r.sequence = 1234567890123ull;
  r.address = "[::1]:29505";
  r.certificate.assign(300, std::byte{0x30});
  r.signature.assign(70, std::byte{0x02});
  const auto bytes = wire::encode_address_record(r);
  CHECK(bytes.size() == wire::kAddressFixedBytes + r.address.size() + 300 + 70);
  const auto back = wire::decode_address_record(bytes, 8);
  REQUIRE(back);
  CHECK(*back.value == r);
  const auto refused = [](std::span<const std::byte> b, std::size_t peers = 8) {
    const auto d = wire::decode_address_record(b, peers);
    CHECK_FALSE(d);
    return d.error;
  };
  CHECK_THAT(refused(std::span(bytes).first(bytes.size() - 1)),
             Catch::Contains("its lengths say"));
  CHECK_THAT(refused(std::span(bytes).first(10)), Catch::Contains("at least 24 bytes"));
  CHECK_THAT(refused(bytes, 5), Catch::Contains("rank 5, not in this run of 5 peers"));
  auto bad = bytes;
  bad[0] = std::byte{'X'};
  CHECK_THAT(refused(bad), Catch::Contains("bad magic"));
  bad = bytes;
  bad[wire::kAddressFixedBytes] = std::byte{' '};
  CHECK_THAT(refused(bad), Catch::Contains("not host:port"));
  bad = bytes;
  bad[20] = std::byte{0xff};  // certificate length 0x..ff: beyond the input
  bad[21] = std::byte{0x7f};
  CHECK_THAT(refused(bad), Catch::Contains("certificate of"));
  // The signed message binds run, rank, sequence and address.
  wire::AddressRecord other = r;
  other.address = "[::1]:29506";
  CHECK(wire::address_record_message("run", r) != wire::address_record_message("run", other));
  CHECK(wire::address_record_message("run", r) != wire::address_record_message("run2", r));
}

TEST_CASE("over a link: each end sends its signed address record; a neighbour that passes on a "
          "record for another identity is named (address_refused) and the link carries on; its "
          "own record is learned", "[net][address]") {
  TcpByHand t(64);  // rank 1, a NetExchange; rank 0 played by hand
  // Rank 1's own record comes once the handshake is done (among its views).
  std::optional<wire::AddressRecord> theirs;
  for (int i = 0; i < 50 && !theirs; ++i) {
    auto f = t.raw->read_frame();
    REQUIRE(f);
    if (f->header.type != wire::FrameType::kAddress) continue;
    auto r = wire::decode_address_record(f->payload, 2);
    REQUIRE(r);
    theirs = *r.value;
  }
  REQUIRE(theirs);
  CHECK(theirs->rank == 1);
  CHECK(theirs->address == t.cluster.addresses[1]);
  const auto c0 = net::make_tls_context(keys().rank(0), "test-run", 0);
  net::AddressBook ours(c0->native_handle(), "test-run", 0, 2, t.cluster.addresses[0]);
  CHECK(ours.take(*theirs).verdict == net::AddressBook::Verdict::kNew);  // its signature holds

  // Rank 0 announces an address for rank 1, then its own.
  const auto send_record = [&](const wire::AddressRecord& r) {
    t.raw->send(wire::encode_frame(wire::FrameType::kAddress, 0, 0, wire::encode_address_record(r)));
  };
  send_record(net::AddressBook::sign(c0->native_handle(), "test-run", 1, 5, "6.6.6.6:29501"));
  send_record(net::AddressBook::sign(c0->native_handle(), "test-run", 0, 7, "127.0.0.1:4242"));
  std::vector<TransportAlert> alerts;
  std::vector<PeerAddress> known;
  for (int i = 0; i < 300; ++i) {
    for (auto& a : t.b->take_alerts()) alerts.push_back(std::move(a));
    known = t.b->addresses();
    if (!alerts.empty() && known.at(0).source == AddressSource::kLearned) break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].kind == MemberEventKind::kAddressRefused);
  CHECK(alerts[0].peer == 1);
  CHECK_THAT(alerts[0].message,
             Catch::Contains("peer 0 passed on an address record for peer 1 (6.6.6.6:29501) that "
                             "is not believed: it announces an address for peer 1 but is signed "
                             "by peer 0's certificate"));
  REQUIRE(known.size() == 2);
  CHECK(known[0].address == "127.0.0.1:4242");
  CHECK(known[0].source == AddressSource::kLearned);
  CHECK(known[1].address == t.cluster.addresses[1]);
  CHECK(known[1].source == AddressSource::kOwn);
  CHECK(t.b->connected_peers() == std::vector<int>{0});  // the link carries on
}
