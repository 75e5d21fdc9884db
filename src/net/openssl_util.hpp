/// net/openssl_util: owning handles for OpenSSL objects and the text of its error queue. Internal
/// to src/net (the only room that includes OpenSSL).
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/openssl_util.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace gossip::net {

template <auto Free>
struct FreeWith {
  template <typename T>
  void operator()(T* p) const { Free(p); }
};

using PkeyPtr = std::unique_ptr<EVP_PKEY, FreeWith<EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, FreeWith<X509_free>>;
using BioPtr = std::unique_ptr<BIO, FreeWith<BIO_free_all>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, FreeWith<GENERAL_NAMES_free>>;

/// The oldest pending error of this thread's OpenSSL queue as text (and clears the queue);
/// "no details" when it is empty.
std::string openssl_error();

/// The identity a peer certificate names: which run and which rank.
struct CertIdentity {
  std::string run_id;
  int rank = -1;
};

/// Reads the gossip://RUN/rank/R URI from `cert`'s subjectAltName. On failure returns false and
/// says why in `why` (no such URI, a malformed one, or more than one).
bool cert_identity(X509* cert, CertIdentity* out, std::string* why);

}  // namespace gossip::net
