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
#include <vector>

#include <asio.hpp>
#include <asio/ssl.hpp>

#include "gossip/net.hpp"

namespace gossip::net {

/// The TCP socket under TLS, read in gulps and, while a big frame is written, written in
/// batches. The TLS engine reads and writes at most one 17 KiB record at a time: straight on the
/// socket, a 1 MB frame would cost a system call per record on each side, and the receiver
/// would wake up for every one. Reads go through a kGulpBytes buffer (one receive call per
/// segment that has arrived); between batch() and async_flush() the records of a frame are
/// gathered and sent kBatchBytes at a time. Everything else passes straight through.
class GulpSocket : public asio::buffered_read_stream<asio::ip::tcp::socket> {
 public:
  static constexpr std::size_t kGulpBytes = 64 * 1024;
  static constexpr std::size_t kBatchBytes = 256 * 1024;

  explicit GulpSocket(asio::any_io_executor& executor)
      : asio::buffered_read_stream<asio::ip::tcp::socket>(executor, kGulpBytes) {}

  /// Gathers what is written from now on, until async_flush().
  void batch() {
    batching_ = true;
    if (!batch_) batch_ = std::make_unique_for_overwrite<unsigned char[]>(kBatchCapacity);
  }

  template <typename ConstBuffers, typename Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (!batching_) return next_layer().async_write_some(buffers, std::forward<Handler>(handler));
    // Takes what fits (the TLS engine writes one record, at most 17 KiB, at a time).
    const std::size_t n = asio::buffer_copy(
        asio::buffer(batch_.get() + batched_, kBatchCapacity - batched_), buffers);
    batched_ += n;
    if (batched_ < kBatchBytes)
      return asio::post(get_executor(), [h = std::forward<Handler>(handler), n]() mutable {
        h(std::error_code(), n);
      });
    send_batch([h = std::forward<Handler>(handler), n](std::error_code ec) mutable {
      h(ec, ec ? 0 : n);
    });
  }

  /// Sends what was gathered and stops gathering; `handler(error_code)` when it is out.
  template <typename Handler>
  void async_flush(Handler&& handler) {
    batching_ = false;
    if (batched_ == 0)
      return asio::post(get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        h(std::error_code());
      });
    send_batch(std::forward<Handler>(handler));
  }

 private:
  template <typename Handler>
  void send_batch(Handler&& handler) {
    asio::async_write(next_layer(), asio::buffer(batch_.get(), batched_),
                      [this, h = std::forward<Handler>(handler)](std::error_code ec,
                                                                 std::size_t) mutable {
                        batched_ = 0;
                        h(ec);
                      });
  }

  static constexpr std::size_t kBatchCapacity = kBatchBytes + 32 * 1024;
  bool batching_ = false;
  std::unique_ptr<unsigned char[]> batch_;  // allocated at the first batch (live links only)
  std::size_t batched_ = 0;
};

/// One connection's bytes: TLS over the socket when a context is given, else the socket itself.
/// Meets Asio's AsyncReadStream and AsyncWriteStream, so asio::async_read / async_write take it.
class Stream {
 public:
  using executor_type = asio::ip::tcp::socket::executor_type;
  using TlsStream = asio::ssl::stream<GulpSocket>;

  Stream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if (!tls) {
      plain_.emplace(std::move(socket));
      return;
    }
    asio::any_io_executor executor = socket.get_executor();
    tls_.emplace(executor, *tls);
    // Hand the connected descriptor over to the socket under the TLS stream.
    std::error_code ec;
    const auto protocol = socket.local_endpoint(ec).protocol();
    const auto fd = socket.release(ec);
    if (!ec) this->socket().assign(protocol, fd, ec);
  }

  executor_type get_executor() { return socket().get_executor(); }
  /// The TCP socket underneath (options, addresses, shutdown and close).
  asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer().next_layer() : *plain_; }
  /// The TLS stream, or nullptr when TLS is off.
  TlsStream* tls() { return tls_ ? &*tls_ : nullptr; }

  /// Under TLS: gathers the records written from now on (GulpSocket); returns false (and does
  /// nothing) over plain TCP, where a frame leaves in one write anyway.
  bool batch() {
    if (!tls_) return false;
    tls_->next_layer().batch();
    return true;
  }
  /// Sends what batch() gathered; `handler(error_code)`.
  template <typename Handler>
  void async_flush(Handler&& handler) {
    tls_->next_layer().async_flush(std::forward<Handler>(handler));
  }

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
