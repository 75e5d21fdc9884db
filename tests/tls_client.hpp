// tests/tls_client.hpp: a blocking TLS 1.3 client over a connected socket, written with
// OpenSSL's own API (no Asio), for tests that play a peer by hand or an intruder: with the
// run's credentials, with none, or with the wrong ones.
#pragma once

#include <cerrno>
#include <csignal>
#include <memory>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>

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
    } else {
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
      error_ = buf;
    }
    ERR_clear_error();
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  /// Writes all `n` bytes; false when the connection failed.
  bool write(const void* p, std::size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (ok_ && n > 0) {  // bounded: each call writes bytes or fails
      const int k = SSL_write(ssl_.get(), b, static_cast<int>(std::min<std::size_t>(n, 1 << 20)));
      if (k <= 0) return fail();
      b += k;
      n -= static_cast<std::size_t>(k);
    }
    return ok_;
  }

  /// Reads up to `n` bytes: how many, 0 when the server closed or refused, -1 when the socket's
  /// receive timeout passed with nothing to read.
  long read(void* p, std::size_t n) {
    if (!ok_) return 0;
    const int k = SSL_read(ssl_.get(), p, static_cast<int>(std::min<std::size_t>(n, 1 << 20)));
    if (k > 0) return k;
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
};

}  // namespace gossip::test
