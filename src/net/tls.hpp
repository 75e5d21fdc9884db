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
#include "gossip/wire.hpp"
#include "src/net/records.hpp"

namespace gossip::net {

/// The first non-empty buffer of a sequence (an empty one if there is none).
template <typename MutableBuffers>
asio::mutable_buffer first_buffer(const MutableBuffers& buffers) {
  for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
       ++it)
    if (asio::mutable_buffer b(*it); b.size() > 0) return b;
  return {};
}

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

  /// What the TLS engine reads: never more than the rest of the TLS record it is in (a record
  /// is a 5-byte header, whose last two bytes are the length, and that many bytes). The engine
  /// then takes in no byte past the last TLS record a peer sends, and what follows it (our own
  /// records, records.hpp) stays here for read_direct(). Until stop_at_tls_records(false).
  template <typename MutableBuffers, typename Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    using Base = asio::buffered_read_stream<asio::ip::tcp::socket>;
    // The engine reads nothing at all to complete an operation "as if posted": at once.
    if (!whole_tls_records_ || asio::buffer_size(buffers) == 0)
      return Base::async_read_some(buffers, std::forward<Handler>(handler));
    if (in_avail() == 0 || (tls_left_ == 0 && in_avail() < 5))
      return async_fill([this, buffers, h = std::forward<Handler>(handler)](
                            std::error_code ec, std::size_t) mutable {
        if (ec) return h(ec, std::size_t{0});
        async_read_some(buffers, std::move(h));
      });
    std::error_code ec;
    if (tls_left_ == 0) {
      std::array<unsigned char, 5> head;
      peek(asio::buffer(head), ec);
      tls_left_ = 5 + (std::size_t{head[3]} << 8 | head[4]);
    }
    const asio::mutable_buffer first = first_buffer(buffers);
    const std::size_t n =
        Base::read_some(asio::buffer(first, std::min(first.size(), tls_left_)), ec);
    tls_left_ -= n;
    asio::post(get_executor(), [h = std::forward<Handler>(handler), ec, n]() mutable { h(ec, n); });
  }

  void stop_at_tls_records(bool on) { whole_tls_records_ = on; }

  /// Reads what this buffer still holds, else straight from the socket into `buffers` (no copy
  /// through this buffer: for records, which arrive whole and large).
  template <typename MutableBuffers, typename Handler>
  void async_read_direct(const MutableBuffers& buffers, Handler&& handler) {
    if (in_avail() == 0) return next_layer().async_read_some(buffers, std::forward<Handler>(handler));
    std::error_code ec;
    const std::size_t n =
        asio::buffered_read_stream<asio::ip::tcp::socket>::read_some(buffers, ec);
    asio::post(get_executor(), [h = std::forward<Handler>(handler), ec, n]() mutable { h(ec, n); });
  }

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
  bool whole_tls_records_ = true;
  std::size_t tls_left_ = 0;  // bytes of the current TLS record not yet handed to the engine
  bool batching_ = false;
  std::unique_ptr<unsigned char[]> batch_;  // allocated at the first batch (live links only)
  std::size_t batched_ = 0;
};

/// Why a connection's records were refused (records.hpp): error codes for read_failed().
enum class RecordError { kBadHeader = 1, kForged = 2 };
const std::error_category& record_category();
inline std::error_code make_error_code(RecordError e) {
  return {static_cast<int>(e), record_category()};
}

/// One connection's bytes: TLS over the socket when a context is given, else the socket itself;
/// under TLS, once the hello has passed (records_out / records_in), our own records
/// (records.hpp) instead of TLS's.
/// Meets Asio's AsyncReadStream and AsyncWriteStream, so asio::async_read / async_write take it.
class Stream {
 public:
  using executor_type = asio::ip::tcp::socket::executor_type;
  using TlsStream = asio::ssl::stream<GulpSocket>;
  /// Plaintext bytes per record we seal: a 128 KiB record is opened straight into the buffer a
  /// params frame is read into (the session reads 64 Ki values at a time).
  static constexpr std::size_t kRecordPlainBytes = 128 * 1024;
  /// Sealed bytes gathered for one write to the socket.
  static constexpr std::size_t kSealBytes = 4 * (kRecordPlainBytes + wire::kRecordHeaderBytes);

  Stream(asio::ip::tcp::socket socket, asio::ssl::context* tls) : direct_{this} {
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

  /// After the TLS handshake: the keys of our records. Returns why not when the session cannot
  /// give them (then the connection cannot go on).
  std::string prepare_records(bool we_are_client, CryptoLog* crypto) {
    crypto_ = crypto;
    std::string why;
    const auto keys = export_record_keys(tls_->native_handle(), &why);
    if (keys) records_ = std::make_unique<RecordLayer>(*keys, we_are_client);
    return why;
  }
  /// From the next write on, bytes leave as our records (no-op without TLS).
  void records_out() { out_records_ = records_ != nullptr; }
  /// From the next read on, bytes arrive as our records (no-op without TLS).
  void records_in() {
    if (!records_) return;
    in_records_ = true;
    tls_->next_layer().stop_at_tls_records(false);
  }

  /// Whether bytes arrive as our records, each authenticated by its AEAD tag: a frame's
  /// payload CRC is then left at 0 by its sender and not checked (docs/wire.md, "Records").
  bool reads_records() const { return in_records_; }

  /// Under TLS: gathers the records written from now on (GulpSocket); returns false (and does
  /// nothing) over plain TCP or our records, where a frame leaves in few writes anyway.
  bool batch() {
    if (!tls_ || out_records_) return false;
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
    if (in_records_) read_record(buffers, std::forward<Handler>(handler));
    else if (tls_) tls_->async_read_some(buffers, std::forward<Handler>(handler));
    else plain_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <typename ConstBuffers, typename Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (out_records_) write_records(buffers, std::forward<Handler>(handler));
    else if (tls_) tls_->async_write_some(buffers, std::forward<Handler>(handler));
    else plain_->async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  /// The socket as our records read it: what the gulp buffer holds, then the socket itself.
  struct Direct {
    using executor_type = Stream::executor_type;
    Stream* stream;
    executor_type get_executor() { return stream->get_executor(); }
    template <typename MutableBuffers, typename Handler>
    void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
      stream->tls_->next_layer().async_read_direct(buffers, std::forward<Handler>(handler));
    }
  };

  /// Seals as much of `buffers` as kSealBytes holds, in records of at most kRecordPlainBytes
  /// (each buffer its own records: a frame's header apart from its values), and writes them.
  template <typename ConstBuffers, typename Handler>
  void write_records(const ConstBuffers& buffers, Handler&& handler) {
    // As large as this write needs, at most kSealBytes: a link that carries only control
    // frames (parameters through shared memory) keeps a small one.
    std::size_t need = 0;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it)
      need += asio::buffer_size(*it) +
              wire::kRecordHeaderBytes * (asio::buffer_size(*it) / kRecordPlainBytes + 1);
    if (sealed_.size() < std::min(need, kSealBytes)) sealed_.resize(std::min(need, kSealBytes));
    std::size_t used = 0, taken = 0;
    const auto sealing_from = CryptoLog::Clock::now();
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it) {
      asio::const_buffer b(*it);
      while (b.size() > 0) {
        const std::size_t n = std::min(b.size(), kRecordPlainBytes);
        if (used + wire::kRecordHeaderBytes + n > sealed_.size()) break;
        std::byte* at = sealed_.data() + used;
        records_->sealer.seal({static_cast<const std::byte*>(b.data()), n}, at,
                              at + wire::kRecordHeaderBytes);
        used += wire::kRecordHeaderBytes + n;
        taken += n;
        b += n;
      }
      if (b.size() > 0) break;  // the batch is full
    }
    if (crypto_ != nullptr && used > 0) crypto_->add(sealing_from, CryptoLog::Clock::now());
    asio::async_write(socket(), asio::buffer(sealed_.data(), used),
                      [h = std::forward<Handler>(handler), taken](std::error_code ec,
                                                                  std::size_t) mutable {
                        h(ec, ec ? 0 : taken);
                      });
  }

  /// Hands out what is left of the last record opened, else reads the next record: straight
  /// into the caller's buffer when the record fits in it (opened in place there), else into
  /// our own and copied out.
  template <typename MutableBuffers, typename Handler>
  void read_record(const MutableBuffers& buffers, Handler&& handler) {
    if (left_ > 0 || asio::buffer_size(buffers) == 0) {  // (asio reads an empty payload too)
      const std::size_t n = asio::buffer_copy(buffers, asio::buffer(opened_.data() + at_, left_));
      at_ += n;
      left_ -= n;
      return asio::post(get_executor(), [h = std::forward<Handler>(handler), n]() mutable {
        h(std::error_code(), n);
      });
    }
    asio::async_read(direct_, asio::buffer(record_head_),
                     [this, buffers, h = std::forward<Handler>(handler)](std::error_code ec,
                                                                        std::size_t) mutable {
                       if (ec) return h(ec, std::size_t{0});
                       const auto length = wire::decode_record_length(record_head_);
                       if (!length) return h(make_error_code(RecordError::kBadHeader), std::size_t{0});
                       read_record_body(buffers, *length.value, std::move(h));
                     });
  }

  template <typename MutableBuffers, typename Handler>
  void read_record_body(const MutableBuffers& buffers, std::size_t length, Handler&& handler) {
    const asio::mutable_buffer first = first_buffer(buffers);
    const bool in_place = first.size() >= length;
    if (!in_place && opened_.size() < length) opened_.resize(length);
    std::byte* into = in_place ? static_cast<std::byte*>(first.data()) : opened_.data();
    asio::async_read(direct_, asio::buffer(into, length),
                     [this, buffers, in_place, into, length,
                      h = std::forward<Handler>(handler)](std::error_code ec, std::size_t) mutable {
                       if (ec) return h(ec, std::size_t{0});
                       const auto opening_from = CryptoLog::Clock::now();
                       if (!records_->opener.open(record_head_, {into, length}))
                         return h(make_error_code(RecordError::kForged), std::size_t{0});
                       if (crypto_ != nullptr)
                         crypto_->add(opening_from, CryptoLog::Clock::now());
                       if (in_place) return h(std::error_code(), length);
                       const std::size_t n = asio::buffer_copy(buffers, asio::buffer(into, length));
                       at_ = n;
                       left_ = length - n;
                       h(std::error_code(), n);
                     });
  }

  std::optional<asio::ip::tcp::socket> plain_;
  std::optional<TlsStream> tls_;
  std::unique_ptr<RecordLayer> records_;  // set by prepare_records()
  CryptoLog* crypto_ = nullptr;           // where sealing and opening are timed, if anywhere
  bool out_records_ = false;
  bool in_records_ = false;
  Direct direct_;
  std::vector<std::byte> sealed_;        // records being written (at most kSealBytes)
  wire::RecordHeader record_head_{};     // the header of the record being read
  std::vector<std::byte> opened_;        // a record smaller than the read that asked for it
  std::size_t at_ = 0, left_ = 0;        // what of opened_ is not handed out yet
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
Identity remote_identity(SSL* ssl, const std::string& run_id);

/// Why a TLS handshake (or a read right after it) failed, for a log line: OpenSSL's reason,
/// the certificate verification result when there is one, and a hint for plain TCP.
std::string tls_failure(const std::error_code& ec, Stream::TlsStream& stream);
std::string tls_failure(const std::error_code& ec, SSL* ssl);

/// Whether `ec` says the remote closed the connection (EOF, or a TLS stream cut short).
bool is_eof(const std::error_code& ec);

}  // namespace gossip::net
