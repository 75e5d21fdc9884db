/// net/records: the record layer of a TLS connection past its hello. TLS 1.3 caps a record at
/// 16 KiB, and asio::ssl moves each one through two memory buffers on the way out and three on
/// the way in; a 1 MB params frame then costs several copies beside the encryption it needs.
/// So once the handshake has proved both ends, the peers seal their own records — up to
/// wire::kMaxRecordBytes each, with the AEAD record_aead() picks and keys the session exports for the purpose
/// (RFC 8446, section 7.5), a fresh nonce per record (the IV xor a sequence number, as TLS 1.3
/// does) and the record's length as associated data — straight from the frame's buffer into the
/// socket's, and open them in place in the buffer the frame is read into. Layout and switch
/// points: docs/wire.md, "Records". No Asio here: the test client (tests/tls_client.hpp) speaks
/// the same records.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/records.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <openssl/evp.h>
#include <openssl/ssl.h>

namespace gossip::net {

/// One direction's key material: the AEAD, its key, and the 12-byte IV the nonces come from.
struct RecordKey {
  const EVP_CIPHER* cipher = nullptr;
  std::vector<unsigned char> key;
  std::array<unsigned char, 12> iv{};
};

/// Both directions of a connection, from the TLS client's side of view.
struct RecordKeys {
  RecordKey client_to_server;
  RecordKey server_to_client;
};

/// The AEAD our records use on a TLS 1.3 session that negotiated the suite whose cipher is
/// `suite_nid`: for the AES-GCM suites, AES-OCB (RFC 7253) with the suite's key size, where
/// this OpenSSL provides it (else the suite's own AES-GCM); ChaCha20-Poly1305 for its suite;
/// nullptr for any other. Why OCB: it needs the same AES rounds as GCM and no GHASH; where
/// OpenSSL has no VAES path for GCM (as 3.0 on the AMD EPYC of README's figures) it seals at
/// about twice GCM's rate (`gossip bench gossip`: record_aead_bytes_per_s, aes_gcm_bytes_per_s).
const EVP_CIPHER* record_aead(int suite_nid);
/// Its name as docs and messages write it ("AES-128-OCB", ...).
const char* record_aead_name(const EVP_CIPHER* aead);

/// Exports both directions' keys from `ssl`, a completed TLS 1.3 session, for record_aead() of
/// the suite it negotiated, with that AEAD's name as the exporter's context. Nothing, with the
/// reason in `why`, when the session cannot export or negotiated another cipher.
std::optional<RecordKeys> export_record_keys(SSL* ssl, std::string* why);

/// Seals or opens the records of one direction, in order (each record's nonce is the next
/// sequence number). Not thread-safe: one per direction per connection.
class RecordCipher {
 public:
  RecordCipher(const RecordKey& key, bool seal);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  /// Seals `plain` (1 to wire::kMaxRecordBytes bytes) as the next record: its header (length
  /// and tag) into `header` (wire::kRecordHeaderBytes), the ciphertext into `out` (plain.size()
  /// bytes; may be plain.data() itself).
  void seal(std::span<const std::byte> plain, std::byte* header, std::byte* out);
  /// Opens the next record in place: `header` as read, `body` its ciphertext of the length the
  /// header announced. False (and `body` is garbage) when the tag does not match: the bytes were
  /// changed, reordered or replayed, or were not sealed with this connection's key.
  bool open(std::span<const std::byte> header, std::span<std::byte> body);

 private:
  /// The next record's nonce: the IV xor the sequence number (big-endian, in the last 8 bytes).
  std::array<unsigned char, 12> next_nonce();

  EVP_CIPHER_CTX* ctx_;
  std::array<unsigned char, 12> iv_;
  std::uint64_t sequence_ = 0;
  bool seal_;
};

/// When the I/O thread sealed and opened records: one span per batch sealed for a write and per
/// record opened, a span merged into the one before when it starts within kMergeGap of its end
/// (so a frame's back-to-back records make one span). A peer takes them each round for its
/// timeline's `encrypt` track (NetExchange::take_crypto_spans). Holds at most kMaxSpans between
/// takes and drops the rest (a user of NetExchange that never takes them). Thread-safe.
class CryptoLog {
 public:
  using Clock = std::chrono::steady_clock;
  using Span = std::pair<Clock::time_point, Clock::time_point>;
  static constexpr auto kMergeGap = std::chrono::microseconds(2);
  static constexpr std::size_t kMaxSpans = 1u << 16;

  void add(Clock::time_point start, Clock::time_point end);
  /// The spans since the last take, in the order they were added.
  std::vector<Span> take();

 private:
  std::mutex mu_;
  std::vector<Span> spans_;
};

/// The seals of both directions of one connection, once the TLS handshake is done.
struct RecordLayer {
  RecordLayer(const RecordKeys& keys, bool we_are_client)
      : sealer(we_are_client ? keys.client_to_server : keys.server_to_client, true),
        opener(we_are_client ? keys.server_to_client : keys.client_to_server, false) {}
  RecordCipher sealer;
  RecordCipher opener;
};

}  // namespace gossip::net
