// net/address_book.cpp: signing and checking address records (address_book.hpp).
#include "src/net/address_book.hpp"

#include <chrono>

#include <openssl/err.h>

#include "gossip/core.hpp"
#include "src/net/openssl_util.hpp"

namespace gossip::net {
namespace {

using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, FreeWith<EVP_MD_CTX_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, FreeWith<X509_STORE_CTX_free>>;

std::vector<std::byte> der_of(X509* cert) {
  const int n = i2d_X509(cert, nullptr);
  if (n <= 0) throw RuntimeError(cat("cannot encode our certificate: ", openssl_error()));
  std::vector<std::byte> out(static_cast<std::size_t>(n));
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  i2d_X509(cert, &p);
  return out;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace

AddressBook::AddressBook(SSL_CTX* tls, std::string run_id, int rank, int size,
                         const std::string& own_address)
    : tls_(tls), run_id_(std::move(run_id)), rank_(rank), held_(static_cast<std::size_t>(size)) {
  if (!tls_ || own_address.empty()) return;
  wire::AddressRecord own = sign(tls_, run_id_, rank_, now_ns(), own_address);
  FrameBytes frame = frame_of(own);
  held_[rank_] = Held{std::move(own), std::move(frame)};
}

wire::AddressRecord AddressBook::sign(SSL_CTX* tls, const std::string& run_id, int rank,
                                      std::uint64_t sequence, const std::string& address) {
  wire::AddressRecord r;
  r.rank = static_cast<std::uint32_t>(rank);
  r.sequence = sequence;
  r.address = address;
  X509* cert = SSL_CTX_get0_certificate(tls);
  EVP_PKEY* key = SSL_CTX_get0_privatekey(tls);
  if (!cert || !key) throw RuntimeError("address record: the TLS context has no certificate or key");
  r.certificate = der_of(cert);
  const std::vector<std::byte> message = wire::address_record_message(run_id, r);
  MdCtxPtr md(EVP_MD_CTX_new());
  std::size_t n = 0;
  const auto* m = reinterpret_cast<const unsigned char*>(message.data());
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &n, m, message.size()) != 1)
    throw RuntimeError(cat("cannot sign our address record: ", openssl_error()));
  r.signature.resize(n);
  if (EVP_DigestSign(md.get(), reinterpret_cast<unsigned char*>(r.signature.data()), &n, m,
                     message.size()) != 1)
    throw RuntimeError(cat("cannot sign our address record: ", openssl_error()));
  r.signature.resize(n);
  if (r.signature.size() > wire::kMaxAddressSignatureBytes ||
      r.certificate.size() > wire::kMaxAddressCertBytes)
    throw InputError(cat("net.tls: a certificate of ", r.certificate.size(), " bytes or a ",
                         "signature of ", r.signature.size(), " bytes is beyond what an address ",
                         "record carries (", wire::kMaxAddressCertBytes, ", ",
                         wire::kMaxAddressSignatureBytes, ")"));
  return r;
}

std::string AddressBook::check(const wire::AddressRecord& r) const {
  const auto* p = reinterpret_cast<const unsigned char*>(r.certificate.data());
  X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(r.certificate.size())));
  if (!cert || p != reinterpret_cast<const unsigned char*>(r.certificate.data()) +
                        r.certificate.size()) {
    ERR_clear_error();
    return "its certificate is not one DER certificate";
  }
  StoreCtxPtr store(X509_STORE_CTX_new());
  if (!store || !X509_STORE_CTX_init(store.get(), SSL_CTX_get_cert_store(tls_), cert.get(),
                                     nullptr)) {
    ERR_clear_error();
    return "its certificate could not be checked";
  }
  X509_STORE_CTX_set_purpose(store.get(), X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(store.get()) != 1) {
    const int e = X509_STORE_CTX_get_error(store.get());
    ERR_clear_error();
    return cat("its certificate does not verify against the run's CA (",
               X509_verify_cert_error_string(e), ")");
  }
  CertIdentity id;
  std::string why;
  if (!cert_identity(cert.get(), &id, &why)) return why;
  if (id.run_id != run_id_)
    return cat("its certificate is for run '", id.run_id.substr(0, 100), "'");
  if (id.rank != static_cast<int>(r.rank))
    return cat("it announces an address for peer ", r.rank, " but is signed by peer ", id.rank,
               "'s certificate");
  const std::vector<std::byte> message = wire::address_record_message(run_id_, r);
  MdCtxPtr md(EVP_MD_CTX_new());
  const bool ok =
      md &&
      EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr,
                           X509_get0_pubkey(cert.get())) == 1 &&
      EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(r.signature.data()),
                       r.signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  ERR_clear_error();
  if (!ok) return cat("its signature does not match peer ", r.rank, "'s certificate");
  return {};
}

AddressBook::Taken AddressBook::take(const wire::AddressRecord& r) {
  Taken out;
  if (!tls_) {
    out.verdict = Verdict::kRefused;
    out.why = "TLS is off here: an address record cannot be checked";
    return out;
  }
  auto& slot = held_.at(r.rank);
  const bool ours = static_cast<int>(r.rank) == rank_;
  // Nothing newer than what we hold is news (dropped before the signature is checked: a
  // forged record is no cheaper to send than a real one is to drop).
  if (slot && (ours ? slot->record == r : slot->record.sequence >= r.sequence)) return out;
  if (auto why = check(r); !why.empty()) {
    out.verdict = Verdict::kRefused;
    out.why = why;
    return out;
  }
  // A record of ours that we did not make now: an earlier run of this identity (a restart), or
  // a copy of it elsewhere. Ours stays.
  if (ours) return out;
  out.verdict = Verdict::kNew;
  out.frame = frame_of(r);
  slot = Held{r, out.frame};
  return out;
}

FrameBytes AddressBook::frame_of(const wire::AddressRecord& r) const {
  return std::make_shared<const std::vector<std::byte>>(wire::encode_frame(
      wire::FrameType::kAddress, static_cast<std::uint32_t>(rank_), 0,
      wire::encode_address_record(r)));
}

std::vector<FrameBytes> AddressBook::frames() const {
  std::vector<FrameBytes> out;
  if (held_[rank_]) out.push_back(held_[rank_]->frame);
  for (std::size_t r = 0; r < held_.size(); ++r)
    if (held_[r] && static_cast<int>(r) != rank_) out.push_back(held_[r]->frame);
  return out;
}

std::optional<std::string> AddressBook::address(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(held_.size()) || !held_[rank]) return std::nullopt;
  return held_[rank]->record.address;
}

}  // namespace gossip::net
