// net/doctor.cpp: diagnose(), the network checks of `gossip doctor`: from one peer's place, each
// neighbour's address resolved and dialled, its TLS identity, and a dial-back request (the same
// rendezvous message a running peer sends: src/net/rendezvous.cpp), whose probe is awaited on
// this peer's own address. One io_context, every step bounded by the request's timeout.
#include <asio.hpp>
#include <asio/ssl.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <set>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "src/net/link_failure.hpp"
#include "src/net/socket.hpp"
#include "src/net/tls.hpp"

namespace gossip {
namespace {

using Clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Runs `io` until `*done` or `timeout` passes; returns *done.
bool run_until(asio::io_context& io, const bool* done, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (!*done && Clock::now() < until) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return *done;
}


class Doctor {
 public:
  explicit Doctor(const DoctorRequest& q)
      : q_(q), acceptor_(io_),
        nonce_(std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1),
        tag_(wire::rendezvous_tag(q.run_id)) {}

  DoctorReport run() {
    DoctorReport report;
    report.listen_error = listen();
    if (q_.tls.enabled) tls_ = net::make_tls_context(q_.tls, q_.run_id, q_.rank);
    for (int p : q_.neighbours) report.neighbours.push_back(check(p));
    // Probes that came late (after their answers) still count.
    bool never = false;
    run_until(io_, &never, std::chrono::milliseconds(200));
    for (NeighbourCheck& c : report.neighbours)
      c.probe_came = probes_.count(c.peer) > 0;
    return report;
  }

 private:
  std::string listen() {
    std::error_code ec;
    tcp::resolver::results_type at;
    try {
      at = net::resolve(io_, q_.listen);
    } catch (const InputError& e) {
      return e.what();
    }
    acceptor_.open(at.begin()->endpoint().protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(at.begin()->endpoint(), ec);
    if (!ec) acceptor_.listen(16, ec);
    if (ec) return cat("cannot listen on ", q_.listen, " (", ec.message(), ")");
    accept();
    return "";
  }

  void accept() {
    acceptor_.async_accept([this](std::error_code ec, tcp::socket s) {
      if (ec) return;
      auto socket = std::make_shared<tcp::socket>(std::move(s));
      auto bytes = std::make_shared<std::array<std::byte, wire::kRendezvousBytes>>();
      asio::async_read(*socket, asio::buffer(*bytes),
                       [this, socket, bytes](std::error_code e, std::size_t) {
                         if (e) return;
                         const auto m = wire::decode_rendezvous(*bytes);
                         if (m && m.value->kind == wire::RendezvousKind::kDialBackProbe &&
                             m.value->nonce == nonce_)
                           probes_.insert(static_cast<int>(m.value->from));
                       });
      accept();
    });
  }

  /// A connection to `endpoints` within the timeout; `failure` says why not.
  std::shared_ptr<tcp::socket> connect(const tcp::resolver::results_type& endpoints,
                                       net::LinkFailure* failure, double* ms) {
    auto socket = std::make_shared<tcp::socket>(io_);
    bool done = false;
    std::error_code result;
    const auto start = Clock::now();
    asio::async_connect(*socket, endpoints,
                        [&](std::error_code ec, const tcp::endpoint&) {
                          result = ec;
                          done = true;
                        });
    if (!run_until(io_, &done, q_.timeout)) {
      std::error_code ignored;
      socket->close(ignored);
      bool closed = false;
      run_until(io_, &closed, std::chrono::milliseconds(50));
      *failure = net::connect_failure({}, true, q_.timeout);
      return nullptr;
    }
    if (result) {
      *failure = net::connect_failure(result, false, q_.timeout);
      return nullptr;
    }
    if (ms) *ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return socket;
  }

  NeighbourCheck check(int p) {
    NeighbourCheck c;
    c.peer = p;
    c.address = q_.addresses[p];
    if (c.address.empty()) {
      c.resolve_error = "not listed (the run learns it from the peer's signed record)";
      return c;
    }
    tcp::resolver::results_type endpoints;
    try {
      endpoints = net::resolve(io_, c.address);
    } catch (const InputError& e) {
      c.resolve_error = e.what();
      return c;
    }
    net::LinkFailure failure;
    auto socket = connect(endpoints, &failure, &c.connect_ms);
    c.dial_error = failure.why;
    c.dial_failure = failure.kind;
    if (!socket) return c;
    c.dialled = true;
    std::error_code ignored;
    socket->close(ignored);
    if (tls_) check_tls(endpoints, c);
    ask_dial_back(endpoints, c);
    return c;
  }

  void check_tls(const tcp::resolver::results_type& endpoints, NeighbourCheck& c) {
    net::LinkFailure failure;
    auto socket = connect(endpoints, &failure, nullptr);
    c.tls_error = failure.why;
    if (!socket) return;
    asio::ssl::stream<tcp::socket&> tls(*socket, *tls_);
    bool done = false;
    std::error_code result;
    tls.async_handshake(asio::ssl::stream_base::client, [&](std::error_code ec) {
      result = ec;
      done = true;
    });
    if (!run_until(io_, &done, q_.timeout)) {
      c.tls_error = cat("no TLS handshake within ", q_.timeout.count(), " ms");
    } else if (result) {
      c.tls_error = net::tls_failure(result, tls.native_handle());
    } else {
      const net::Identity id = net::remote_identity(tls.native_handle(), q_.run_id);
      c.tls_rank = id.rank;
      c.tls_error = id.refusal;
    }
    std::error_code ignored;
    socket->close(ignored);
    bool closed = false;
    run_until(io_, &closed, std::chrono::milliseconds(20));
  }

  void ask_dial_back(const tcp::resolver::results_type& endpoints, NeighbourCheck& c) {
    net::LinkFailure failure;
    double rtt_ms = 0;
    auto socket = connect(endpoints, &failure, &rtt_ms);
    if (!socket) return;
    wire::Rendezvous ask;
    ask.kind = wire::RendezvousKind::kDialBackAsk;
    ask.run_tag = tag_;
    ask.from = static_cast<std::uint32_t>(q_.rank);
    ask.to = static_cast<std::uint32_t>(c.peer);
    ask.nonce = nonce_;
    ask.time_ns = now_ns();
    const auto out = wire::encode_rendezvous(ask);
    std::array<std::byte, wire::kRendezvousBytes> in{};
    bool done = false;
    std::error_code result;
    asio::async_write(*socket, asio::buffer(out), [&](std::error_code ec, std::size_t) {
      if (ec) {
        result = ec;
        done = true;
        return;
      }
      asio::async_read(*socket, asio::buffer(in), [&](std::error_code e, std::size_t) {
        result = e;
        done = true;
      });
    });
    const bool answered = run_until(io_, &done, 2 * q_.timeout + std::chrono::milliseconds(500));
    const std::int64_t received = now_ns();
    std::error_code ignored;
    socket->close(ignored);
    bool closed = false;
    run_until(io_, &closed, std::chrono::milliseconds(20));
    if (!answered || result) return;  // a peer of an older version, or not a peer
    const auto m = wire::decode_rendezvous(in);
    if (!m || m.value->kind != wire::RendezvousKind::kDialBackAnswer) return;
    c.asked = true;
    c.dialled_back = m.value->status == wire::RendezvousStatus::kOk;
    c.dial_back = m.value->text;
    // Its clock when it answered, against ours then less half a round trip.
    c.clock_offset_ms = static_cast<double>(m.value->time_ns - received) / 1e6 + rtt_ms / 2.0;
  }

  const DoctorRequest& q_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::unique_ptr<asio::ssl::context> tls_;
  const std::uint64_t nonce_;
  const std::uint64_t tag_;
  std::set<int> probes_;
};

}  // namespace

DoctorReport diagnose(const DoctorRequest& request) { return Doctor(request).run(); }

std::vector<RelayCheck> probe_relays(const std::vector<std::pair<int, std::string>>& candidates,
                                     std::chrono::milliseconds timeout) {
  asio::io_context io;
  std::vector<RelayCheck> out;
  for (const auto& [rank, address] : candidates) {
    RelayCheck r;
    r.rank = rank;
    r.address = address;
    tcp::resolver::results_type endpoints;
    try {
      endpoints = net::resolve(io, address);
    } catch (const InputError& e) {
      r.error = e.what();
      out.push_back(r);
      continue;
    }
    tcp::socket socket(io);
    bool done = false;
    std::error_code result;
    const auto start = Clock::now();
    asio::async_connect(socket, endpoints, [&](std::error_code ec, const tcp::endpoint&) {
      result = ec;
      done = true;
    });
    if (!run_until(io, &done, timeout)) {
      std::error_code ignored;
      socket.close(ignored);
      run_until(io, &done, std::chrono::milliseconds(50));
      r.error = net::connect_failure({}, true, timeout).why;
    } else if (result) {
      r.error = net::connect_failure(result, false, timeout).why;
    } else {
      r.dialled = true;
      r.connect_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace gossip
