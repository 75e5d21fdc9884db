// net/records.cpp: key export and the AEAD of the record layer (records.hpp), with OpenSSL's EVP.
#include "src/net/records.hpp"

#include <algorithm>
#include <cstring>

#include <openssl/err.h>

#include "gossip/core.hpp"
#include "gossip/wire.hpp"
#include "src/net/openssl_util.hpp"

namespace gossip::net {
namespace {

// The exporter label (RFC 8446, 7.5): keys for nothing but these records.
constexpr const char kLabel[] = "EXPORTER-gossip-records-v1";

bool openssl_has_ocb() {
  // The default provider has OCB; a FIPS-only configuration does not.
  static const bool has = [] {
    EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "AES-128-OCB", nullptr);
    const bool found = c != nullptr;
    EVP_CIPHER_free(c);
    ERR_clear_error();
    return found;
  }();
  return has;
}

}  // namespace

const char* record_aead_name(const EVP_CIPHER* aead) {
  if (aead == EVP_aes_128_ocb()) return "AES-128-OCB";
  if (aead == EVP_aes_256_ocb()) return "AES-256-OCB";
  if (aead == EVP_aes_128_gcm()) return "AES-128-GCM";
  if (aead == EVP_aes_256_gcm()) return "AES-256-GCM";
  if (aead == EVP_chacha20_poly1305()) return "ChaCha20-Poly1305";
  return "an AEAD our records do not use";
}

const EVP_CIPHER* record_aead(int suite_nid) {
  const bool ocb = openssl_has_ocb();
  switch (suite_nid) {
    case NID_aes_128_gcm: return ocb ? EVP_aes_128_ocb() : EVP_aes_128_gcm();
    case NID_aes_256_gcm: return ocb ? EVP_aes_256_ocb() : EVP_aes_256_gcm();
    case NID_chacha20_poly1305: return EVP_chacha20_poly1305();
    default: return nullptr;
  }
}

std::optional<RecordKeys> export_record_keys(SSL* ssl, std::string* why) {
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl);
  const EVP_CIPHER* cipher = record_aead(suite ? SSL_CIPHER_get_cipher_nid(suite) : NID_undef);
  if (cipher == nullptr) {
    *why = cat("the TLS session negotiated ", suite ? SSL_CIPHER_get_name(suite) : "no cipher",
               ", which our records do not use");
    return std::nullopt;
  }
  const auto key_bytes = static_cast<std::size_t>(EVP_CIPHER_get_key_length(cipher));
  std::vector<unsigned char> material(2 * key_bytes + 2 * 12);
  // The AEAD's name is the exporter's context: two ends that chose different AEADs (one of
  // them without OCB) get different keys, and their first record does not open.
  const std::string context = record_aead_name(cipher);
  if (SSL_export_keying_material(ssl, material.data(), material.size(), kLabel,
                                 sizeof kLabel - 1,
                                 reinterpret_cast<const unsigned char*>(context.data()),
                                 context.size(), 1) != 1) {
    *why = cat("cannot export record keys from the TLS session: ", openssl_error());
    return std::nullopt;
  }
  // client-to-server key | server-to-client key | client-to-server IV | server-to-client IV
  RecordKeys keys;
  for (RecordKey* k : {&keys.client_to_server, &keys.server_to_client}) k->cipher = cipher;
  const unsigned char* p = material.data();
  keys.client_to_server.key.assign(p, p + key_bytes);
  keys.server_to_client.key.assign(p + key_bytes, p + 2 * key_bytes);
  std::memcpy(keys.client_to_server.iv.data(), p + 2 * key_bytes, 12);
  std::memcpy(keys.server_to_client.iv.data(), p + 2 * key_bytes + 12, 12);
  OPENSSL_cleanse(material.data(), material.size());
  return keys;
}

RecordCipher::RecordCipher(const RecordKey& key, bool seal)
    : ctx_(EVP_CIPHER_CTX_new()), iv_(key.iv), seal_(seal) {
  // The key schedule is set up once; each record then only sets its nonce.
  if (ctx_ == nullptr ||
      EVP_CipherInit_ex(ctx_, key.cipher, nullptr, nullptr, nullptr, seal ? 1 : 0) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_IVLEN, 12, nullptr) != 1 ||
      EVP_CipherInit_ex(ctx_, nullptr, nullptr, key.key.data(), nullptr, seal ? 1 : 0) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    throw RuntimeError(cat("OpenSSL: cannot set up the record cipher: ", openssl_error()));
  }
}

RecordCipher::~RecordCipher() { EVP_CIPHER_CTX_free(ctx_); }

std::array<unsigned char, 12> RecordCipher::next_nonce() {
  std::array<unsigned char, 12> nonce = iv_;
  const std::uint64_t s = sequence_++;
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<unsigned char>(s >> (8 * i));
  return nonce;
}

void RecordCipher::seal(std::span<const std::byte> plain, std::byte* header, std::byte* out) {
  GOSSIP_CHECK(seal_ && !plain.empty() && plain.size() <= wire::kMaxRecordBytes);
  const wire::RecordHeader h = wire::encode_record_header(static_cast<std::uint32_t>(plain.size()));
  const auto nonce = next_nonce();
  auto* o = reinterpret_cast<unsigned char*>(out);
  int n = 0;
  if (EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx_, nullptr, &n, reinterpret_cast<const unsigned char*>(h.data()),
                        4) != 1 ||
      EVP_EncryptUpdate(ctx_, o, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx_, o + n, &n) != 1)
    throw RuntimeError(cat("OpenSSL: sealing a record failed: ", openssl_error()));
  std::memcpy(header, h.data(), 4);
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, wire::kRecordTagBytes, header + 4) != 1)
    throw RuntimeError(cat("OpenSSL: sealing a record failed: ", openssl_error()));
}

bool RecordCipher::open(std::span<const std::byte> header, std::span<std::byte> body) {
  GOSSIP_CHECK(!seal_ && header.size() >= wire::kRecordHeaderBytes);
  const auto nonce = next_nonce();
  auto* b = reinterpret_cast<unsigned char*>(body.data());
  std::array<unsigned char, wire::kRecordTagBytes> tag;
  std::memcpy(tag.data(), header.data() + 4, tag.size());
  int n = 0;
  const bool ok =
      EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
      EVP_DecryptUpdate(ctx_, nullptr, &n, reinterpret_cast<const unsigned char*>(header.data()),
                        4) == 1 &&
      EVP_DecryptUpdate(ctx_, b, &n, b, static_cast<int>(body.size())) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, tag.size(), tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx_, b + n, &n) == 1;
  if (!ok) openssl_error();  // clears the queue; the caller names the failure
  return ok;
}

void CryptoLog::add(Clock::time_point start, Clock::time_point end) {
  const std::lock_guard lock(mu_);
  if (!spans_.empty() && start - spans_.back().second <= kMergeGap) {
    spans_.back().second = std::max(spans_.back().second, end);
    return;
  }
  if (spans_.size() < kMaxSpans) spans_.emplace_back(start, end);
}

std::vector<CryptoLog::Span> CryptoLog::take() {
  const std::lock_guard lock(mu_);
  std::vector<Span> out;
  out.swap(spans_);
  return out;
}

}  // namespace gossip::net
