/// net/tls: the byte stream under a session — TLS 1.3 over TCP (asio::ssl), or plain TCP when
/// TLS is off — and the checks around the TLS handshake: the peer's context (our certificate,
/// the run's CA, mutual authentication), the identity a remote's certificate proves, and why a
/// handshake failed. Internal to src/net; everything here runs on the I/O thread.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/tls.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "gossip/net.hpp"

namespace gossip::net {

/// One connection's bytes: TLS over the socket when a context is given, else the socket itself.
/// Meets Asio's AsyncReadStream and AsyncWriteStream, so asio::async_read / async_write take it.
class Stream {
 public:
  using executor_type = asio::ip::tcp::socket::executor_type;
  using TlsStream = asio::ssl::stream<asio::ip::tcp::socket>;

  Stream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if (tls) tls_.emplace(std::move(socket), *tls);
    else plain_.emplace(std::move(socket));
  }

  executor_type get_executor() { return socket().get_executor(); }
  /// The TCP socket underneath (options, addresses, shutdown and close).
  asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }
  const asio::ip::tcp::socket& socket() const { return tls_ ? tls_->next_layer() : *plain_; }
  /// The TLS stream, or nullptr when TLS is off.
  TlsStream* tls() { return tls_ ? &*tls_ : nullptr; }

  template <typename MutableBuffers, typename Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) tls_->async_read_some(buffers, std::forward<Handler>(handler));
    else plain_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <typename ConstBuffers, typename Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) tls_->async_write_some(buffers, std::forward<Handler>(handler));
    else plain_->async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  std::optional<asio::ip::tcp::socket> plain_;
  std::optional<TlsStream> tls_;
};

/// The TLS context of peer `rank` of run `run_id`: TLS 1.3 only, AES-GCM first, the peer must
/// present a certificate chaining to `tls.ca`; ours is `tls.cert` with `tls.key`. Checks at
/// once that our own certificate verifies against the CA and names this run and rank, so a
/// wrong file is an InputError naming it before any connection.
std::unique_ptr<asio::ssl::context> make_tls_context(const TlsConfig& tls,
                                                     const std::string& run_id, int rank);

/// After a completed TLS handshake: the rank the remote's certificate names, or why it may not
/// join (no gossip identity, or one for another run). The chain itself was verified by OpenSSL.
struct Identity {
  int rank = -1;
  std::string refusal;  // empty when rank is valid
};
Identity remote_identity(Stream::TlsStream& stream, const std::string& run_id);

/// Why a TLS handshake (or a read right after it) failed, for a log line: OpenSSL's reason,
/// the certificate verification result when there is one, and a hint for plain TCP.
std::string tls_failure(const std::error_code& ec, Stream::TlsStream& stream);

/// Whether `ec` says the remote closed the connection (EOF, or a TLS stream cut short).
bool is_eof(const std::error_code& ec);

}  // namespace gossip::net
