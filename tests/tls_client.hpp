// tests/tls_client.hpp: a blocking TLS 1.3 client over a connected socket, written with
// OpenSSL's own API (no Asio), for tests that play a peer by hand or an intruder: with the
// run's credentials, with none, or with the wrong ones. Past its first frame (the hello) it
// writes, and past a hello-ack it reads, the peers' own records (src/net/records.hpp), as a
// peer does.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "gossip/wire.hpp"
#include "src/net/records.hpp"

namespace gossip::test {

/// What the client presents: `ca` to check the server with (empty: do not check it), `cert` and
/// `key` (empty: present no certificate).
struct ClientCredentials {
  std::string ca;
  std::string cert;
  std::string key;
};

class TlsClient {
 public:
  /// Runs the TLS 1.3 handshake on `fd` (which the caller keeps owning). ok() says whether it
  /// completed; error() why not. In TLS 1.3 the client is done before the server has checked
  /// the client's certificate: a refusal of it shows up at the first read.
  TlsClient(int fd, const ClientCredentials& c) : ctx_(SSL_CTX_new(TLS_client_method())) {
    // OpenSSL writes to the socket with write(2): a server that closed on us must not kill the
    // test with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_3_VERSION);
    if (!c.ca.empty()) {
      SSL_CTX_load_verify_locations(ctx_.get(), c.ca.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    }
    if (!c.cert.empty() && (SSL_CTX_use_certificate_chain_file(ctx_.get(), c.cert.c_str()) != 1 ||
                            SSL_CTX_use_PrivateKey_file(ctx_.get(), c.key.c_str(),
                                                        SSL_FILETYPE_PEM) != 1)) {
      error_ = "cannot load the client certificate " + c.cert;
      return;
    }
    ssl_.reset(SSL_new(ctx_.get()));
    SSL_set_fd(ssl_.get(), fd);
    if (SSL_connect(ssl_.get()) == 1) {
      ok_ = true;
      std::string why;
      if (const auto keys = net::export_record_keys(ssl_.get(), &why))
        records_ = std::make_unique<net::RecordLayer>(*keys, true);
    } else {
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
      error_ = buf;
    }
    ERR_clear_error();
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  /// Writes all `n` bytes; false when the connection failed. The first frame goes over TLS,
  /// everything after it as records.
  bool write(const void* p, std::size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (ok_ && n > 0) {  // bounded: each call writes bytes or fails
      if (out_.records) {
        const std::size_t take = std::min<std::size_t>(n, 128 * 1024);
        std::vector<std::byte> sealed(wire::kRecordHeaderBytes + take);
        records_->sealer.seal({reinterpret_cast<const std::byte*>(b), take}, sealed.data(),
                              sealed.data() + wire::kRecordHeaderBytes);
        if (!send_all(sealed.data(), sealed.size())) return fail();
        b += take;
        n -= take;
        continue;
      }
      const std::size_t take = std::min<std::size_t>(n, out_.tls_left(1 << 20));
      const int k = SSL_write(ssl_.get(), b, static_cast<int>(take));
      if (k <= 0) return fail();
      out_.passed(b, static_cast<std::size_t>(k));
      if (out_.first_frame_done() && records_) out_.records = true;
      b += k;
      n -= static_cast<std::size_t>(k);
    }
    return ok_;
  }

  /// Past the first frame: seals `n` bytes (at most 128 KiB) as the next record, flips one bit
  /// of the sealed bytes at `flip_at` (0-19: the header, then the ciphertext) and writes them:
  /// what a meddler on the path would send.
  bool write_tampered(const void* p, std::size_t n, std::size_t flip_at) {
    if (!ok_ || !out_.records) return false;
    std::vector<std::byte> sealed(wire::kRecordHeaderBytes + n);
    records_->sealer.seal({static_cast<const std::byte*>(p), n}, sealed.data(),
                          sealed.data() + wire::kRecordHeaderBytes);
    sealed.at(flip_at) ^= std::byte{0x01};
    return send_all(sealed.data(), sealed.size());
  }

  /// Reads up to `n` bytes: how many, 0 when the server closed or refused, -1 when the socket's
  /// receive timeout passed with nothing to read. Past a first frame that is a hello-ack,
  /// records.
  long read(void* p, std::size_t n) {
    if (!ok_) return 0;
    if (in_.records) return read_record(p, n);
    const int k = SSL_read(ssl_.get(), p, static_cast<int>(in_.tls_left(std::min<std::size_t>(n, 1 << 20))));
    if (k > 0) {
      in_.passed(p, static_cast<std::size_t>(k));
      if (in_.first_frame_done() && records_ && in_.first_type == wire::FrameType::kHelloAck)
        in_.records = true;
      return k;
    }
    const int e = SSL_get_error(ssl_.get(), k);
    if (e == SSL_ERROR_WANT_READ ||
        (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))) {
      ERR_clear_error();
      return -1;
    }
    fail();
    return 0;
  }

 private:
  /// Where one direction stands: TLS up to the end of the first frame, then (maybe) records.
  struct Direction {
    std::vector<std::byte> head;  // the first frame's header, as it passes
    std::size_t passed_bytes = 0;
    std::size_t first_end = 0;    // where the first frame ends, once its header is known
    wire::FrameType first_type{};
    bool records = false;
    /// How much of `want` may still go over TLS before the first frame's end.
    std::size_t tls_left(std::size_t want) const {
      if (first_end > 0)
        return passed_bytes < first_end ? std::min(want, first_end - passed_bytes) : want;
      return std::min(want, wire::kHeaderBytes - passed_bytes);
    }
    void passed(const void* p, std::size_t n) {
      const auto* b = static_cast<const std::byte*>(p);
      for (std::size_t i = 0; i < n && head.size() < wire::kHeaderBytes; ++i) head.push_back(b[i]);
      passed_bytes += n;
      if (first_end == 0 && head.size() == wire::kHeaderBytes) {
        std::uint64_t payload = 0;
        std::memcpy(&payload, head.data() + 24, sizeof payload);
        std::uint16_t type = 0;
        std::memcpy(&type, head.data() + 6, sizeof type);
        first_type = static_cast<wire::FrameType>(type);
        first_end = wire::kHeaderBytes + static_cast<std::size_t>(std::min<std::uint64_t>(payload, 1u << 30));
      }
    }
    bool first_frame_done() const { return first_end > 0 && passed_bytes == first_end; }
  };

  bool send_all(const std::byte* p, std::size_t n) {
    while (n > 0) {  // bounded: each call sends bytes or fails (or the 5 s send timeout)
      const auto k = ::send(SSL_get_fd(ssl_.get()), p, n, MSG_NOSIGNAL);
      if (k <= 0) return false;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
    return true;
  }

  /// One record's plaintext at a time, read whole and opened, then handed out.
  long read_record(void* p, std::size_t n) {
    while (opened_at_ == opened_.size()) {  // bounded: each pass reads bytes or returns
      if (raw_.size() >= wire::kRecordHeaderBytes) {
        const auto length = wire::decode_record_length(raw_);
        if (!length) return fail() ? 0 : 0;
        const std::size_t whole = wire::kRecordHeaderBytes + *length.value;
        if (raw_.size() >= whole) {
          opened_.assign(raw_.begin() + wire::kRecordHeaderBytes, raw_.begin() + whole);
          opened_at_ = 0;
          const bool ok = records_->opener.open(std::span(raw_).first(wire::kRecordHeaderBytes),
                                                opened_);
          raw_.erase(raw_.begin(), raw_.begin() + static_cast<std::ptrdiff_t>(whole));
          if (!ok) return fail() ? 0 : 0;
          break;
        }
      }
      std::byte buf[64 * 1024];
      const auto k = ::recv(SSL_get_fd(ssl_.get()), buf, sizeof buf, 0);
      if (k > 0) {
        raw_.insert(raw_.end(), buf, buf + k);
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
      fail();
      return 0;
    }
    const std::size_t take = std::min(n, opened_.size() - opened_at_);
    std::memcpy(p, opened_.data() + opened_at_, take);
    opened_at_ += take;
    return static_cast<long>(take);
  }

  bool fail() {
    ok_ = false;
    ERR_clear_error();
    return false;
  }

  struct FreeCtx {
    void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  };
  struct FreeSsl {
    void operator()(SSL* s) const { SSL_free(s); }
  };
  std::unique_ptr<SSL_CTX, FreeCtx> ctx_;
  std::unique_ptr<SSL, FreeSsl> ssl_;
  bool ok_ = false;
  std::string error_;
  std::unique_ptr<net::RecordLayer> records_;  // once the handshake is done
  Direction out_, in_;
  std::vector<std::byte> raw_;     // record bytes read, not yet opened
  std::vector<std::byte> opened_;  // the last record's plaintext
  std::size_t opened_at_ = 0;
};

}  // namespace gossip::test
