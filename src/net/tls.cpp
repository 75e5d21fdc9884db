// net/tls.cpp: the peer's TLS context and the identity checks. OpenSSL verifies the chain (the
// run's CA, validity dates, key usage); we then read the gossip://RUN/rank/R URI out of the
// certificate, so a certificate proves one rank of one run and nothing else.
#include "src/net/tls.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "src/net/openssl_util.hpp"
#include "src/net/records.hpp"

namespace gossip::net {
namespace {

constexpr const char* kScheme = "gossip://";
constexpr const char* kRankPart = "/rank/";
// Our certificates are about 700 bytes; a site's chain a few KiB. A remote cannot make us
// buffer more than this before it is authenticated.
constexpr long kMaxCertList = 32 * 1024;

/// Percent-decoding of a run id; false on a malformed escape.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, v, 16);
    if (ec != std::errc() || end != in.data() + i + 3) return false;
    *out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

/// Parses "gossip://RUN/rank/R"; false when `uri` is not of that form.
bool parse_identity(std::string_view uri, CertIdentity* out) {
  if (uri.substr(0, std::strlen(kScheme)) != kScheme) return false;
  uri.remove_prefix(std::strlen(kScheme));
  const auto at = uri.rfind(kRankPart);
  if (at == std::string_view::npos) return false;
  const std::string_view digits = uri.substr(at + std::strlen(kRankPart));
  int rank = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || rank < 0)
    return false;
  out->rank = rank;
  return percent_decode(uri.substr(0, at), &out->run_id);
}

std::string where_of(const TlsConfig& tls) {
  return cat("certificate ", tls.cert, " (key ", tls.key, ", CA ", tls.ca, ")");
}

}  // namespace

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no details";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

bool cert_identity(X509* cert, CertIdentity* out, std::string* why) {
  NamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  int found = 0;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type != GEN_URI) continue;
    const auto* data = ASN1_STRING_get0_data(n->d.uniformResourceIdentifier);
    const std::string_view uri(reinterpret_cast<const char*>(data),
                               static_cast<std::size_t>(ASN1_STRING_length(n->d.uniformResourceIdentifier)));
    if (uri.substr(0, std::strlen(kScheme)) != kScheme) continue;
    if (++found > 1) {
      *why = "its certificate names more than one gossip identity";
      return false;
    }
    if (!parse_identity(uri, out)) {
      *why = cat("its certificate's URI '", std::string(uri.substr(0, 300)),
                 "' is not gossip://RUN/rank/R");
      return false;
    }
  }
  if (found == 0)
    *why = "its certificate names no gossip rank (no URI gossip://RUN/rank/R in its "
           "subjectAltName)";
  return found == 1;
}

namespace {

/// Refuses a TLS config without its ca, cert or key file.
void check_files_given(const TlsConfig& tls) {
  for (const auto& [value, field] : {std::pair{&tls.ca, "ca"}, std::pair{&tls.cert, "cert"},
                                     std::pair{&tls.key, "key"}})
    if (value->empty())
      throw InputError(cat("net.tls.", field, ": no file given (TLS needs ca, cert and key; "
                           "`gossip keys init DIR` makes them, or set net.tls: off)"));
}

/// Loads the CA, the certificate chain and the key into `ctx`, and checks that the key is the
/// certificate's.
void load_credentials(asio::ssl::context& ctx, const TlsConfig& tls) {
  ERR_clear_error();
  std::error_code ec;
  auto load = [&](const char* what, const std::string& file, auto&& call) {
    std::error_code fe;
    if (!std::filesystem::is_regular_file(file, fe))
      throw InputError(cat("net.tls.", what, ": ", file, ": no such file"));
    call(ec);
    if (!ec) return;
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    throw InputError(cat("net.tls.", what, ": cannot use ", file, ": ",
                         reason ? reason : ec.message().c_str()));
  };
  load("ca", tls.ca, [&](std::error_code& e) { ctx.load_verify_file(tls.ca, e); });
  load("cert", tls.cert, [&](std::error_code& e) { ctx.use_certificate_chain_file(tls.cert, e); });
  load("key", tls.key, [&](std::error_code& e) {
    ctx.use_private_key_file(tls.key, asio::ssl::context::pem, e);
  });
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    throw InputError(cat("net.tls.key: ", tls.key, " is not the key of the certificate ",
                         tls.cert));
}

/// TLS 1.3 only, with its AEAD suites; peers verified both ways; no resumption.
void set_tls13_only(asio::ssl::context& ctx) {
  SSL_CTX* native = ctx.native_handle();
  if (!SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) ||
      !SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION) ||
      !SSL_CTX_set_ciphersuites(native, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                        "TLS_CHACHA20_POLY1305_SHA256"))
    throw RuntimeError(cat("OpenSSL refuses TLS 1.3 settings: ", openssl_error()));
  ctx.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  SSL_CTX_set_verify_depth(native, 4);
  SSL_CTX_set_max_cert_list(native, kMaxCertList);
  SSL_CTX_set_num_tickets(native, 0);  // no resumption: every connection proves its key
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
                                  SSL_OP_CIPHER_SERVER_PREFERENCE);
}

/// Our own certificate must pass the checks every neighbour will make: it verifies against the
/// CA, and names this rank of this run.
void check_own_certificate(SSL_CTX* native, const TlsConfig& tls, const std::string& run_id,
                           int rank) {
  X509* own = SSL_CTX_get0_certificate(native);
  X509_STORE_CTX* vctx = X509_STORE_CTX_new();
  if (!vctx || !X509_STORE_CTX_init(vctx, SSL_CTX_get_cert_store(native), own, nullptr)) {
    X509_STORE_CTX_free(vctx);
    throw RuntimeError(cat("cannot check our certificate: ", openssl_error()));
  }
  X509_STORE_CTX_set_purpose(vctx, X509_PURPOSE_SSL_CLIENT);
  const bool verified = X509_verify_cert(vctx) == 1;
  const int verify_error = X509_STORE_CTX_get_error(vctx);
  X509_STORE_CTX_free(vctx);
  ERR_clear_error();
  if (!verified)
    throw InputError(cat("net.tls: ", where_of(tls), " does not verify against the CA: ",
                         X509_verify_cert_error_string(verify_error)));
  CertIdentity id;
  std::string why;
  if (!cert_identity(own, &id, &why))
    throw InputError(cat("net.tls.cert: ", tls.cert, ": ", why.substr(why.find(' ') + 1)));
  if (id.rank != rank || id.run_id != run_id)
    throw InputError(cat("net.tls.cert: ", tls.cert, " is for rank ", id.rank, " of run '",
                         id.run_id, "', but this is rank ", rank, " of run '", run_id, "'"));
}

}  // namespace

std::unique_ptr<asio::ssl::context> make_tls_context(const TlsConfig& tls,
                                                     const std::string& run_id, int rank) {
  check_files_given(tls);
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls);
  SSL_CTX* native = ctx->native_handle();
  load_credentials(*ctx, tls);
  set_tls13_only(*ctx);
  check_own_certificate(native, tls, run_id, rank);
  return ctx;
}

Identity remote_identity(Stream::TlsStream& stream, const std::string& run_id) {
  return remote_identity(stream.native_handle(), run_id);
}

Identity remote_identity(SSL* ssl, const std::string& run_id) {
  Identity out;
  X509Ptr cert(SSL_get1_peer_certificate(ssl));
  if (!cert) {
    out.refusal = "it presented no certificate";
    return out;
  }
  CertIdentity id;
  if (!cert_identity(cert.get(), &id, &out.refusal)) return out;
  if (id.run_id != run_id) {
    out.refusal = cat("its certificate is for run '", id.run_id.substr(0, 300), "', not ours '",
                      run_id, "'");
    return out;
  }
  out.rank = id.rank;
  return out;
}

std::string tls_failure(const std::error_code& ec, Stream::TlsStream& stream) {
  return tls_failure(ec, stream.native_handle());
}

std::string tls_failure(const std::error_code& ec, SSL* ssl) {
  std::string out = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // OpenSSL's reason alone ("certificate verify failed"), without Asio's "(SSL routines)".
    if (const char* r = ERR_reason_error_string(static_cast<unsigned long>(ec.value()))) out = r;
    const long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) out += cat(" (", X509_verify_cert_error_string(v), ")");
    const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
        reason == SSL_R_PACKET_LENGTH_TOO_LONG)
      out += " (not TLS: is the remote running with net.tls: off?)";
  }
  if (is_eof(ec)) out = "connection closed during the TLS handshake";
  return out;
}

const std::error_category& record_category() {
  struct Category : std::error_category {
    const char* name() const noexcept override { return "gossip records"; }
    std::string message(int e) const override {
      if (e == static_cast<int>(RecordError::kBadHeader))
        return cat("bad record header: a length of 0 or over ", wire::kMaxRecordBytes,
                   " bytes (not our records: an older gossip, or bytes that are not ours)");
      return "a record failed authentication: changed, replayed or reordered on the way, or not "
             "sealed with this connection's key and AEAD (an end whose OpenSSL lacks AES-OCB "
             "seals with AES-GCM)";
    }
  };
  static const Category category;
  return category;
}

bool is_eof(const std::error_code& ec) {
  return ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
}

}  // namespace gossip::net

namespace gossip {

std::string preferred_record_aead() {
  return net::record_aead_name(net::record_aead(NID_aes_128_gcm));
}

double aead_bytes_per_second(std::string_view aead, std::size_t total_bytes,
                             std::size_t record_bytes, int reps) {
  GOSSIP_CHECK(total_bytes > 0 && record_bytes > 0 && record_bytes <= wire::kMaxRecordBytes &&
               reps > 0);
  std::unique_ptr<EVP_CIPHER, decltype(&EVP_CIPHER_free)> cipher(
      EVP_CIPHER_fetch(nullptr, std::string(aead).c_str(), nullptr), &EVP_CIPHER_free);
  if (cipher == nullptr)
    throw RuntimeError(cat("OpenSSL: no cipher ", aead, ": ", net::openssl_error()));
  // Sealed as our records are sealed (records.cpp): key schedule once, a nonce per record.
  net::RecordKey key;
  key.cipher = cipher.get();
  key.key.resize(static_cast<std::size_t>(EVP_CIPHER_get_key_length(cipher.get())));
  for (std::size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<unsigned char>(i + 1);
  net::RecordCipher sealer(key, true);
  const std::vector<std::byte> in(record_bytes, std::byte{0x5a});
  std::vector<std::byte> out(record_bytes);
  wire::RecordHeader header;
  const std::size_t records = std::max<std::size_t>(1, total_bytes / record_bytes);
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < records; ++i) sealer.seal(in, header.data(), out.data());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(records * record_bytes) / s);
  }
  return best;
}

}  // namespace gossip
