// net/credentials.cpp: a run's TLS credentials through OpenSSL's API — a CA (fresh, or a site's
// own loaded from PEM), and per rank an ECDSA P-256 key with a certificate whose subjectAltName
// URI gossip://RUN/rank/R is what peers check (tls.cpp). What `gossip keys init` and `gossip
// run` write; every file is created 0600 in a 0700 folder.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "src/net/openssl_util.hpp"

namespace gossip {
namespace {

using net::BioPtr;
using net::PkeyPtr;
using net::X509Ptr;

[[noreturn]] void fail(const std::string& what) {
  throw RuntimeError(cat(what, ": ", net::openssl_error()));
}

PkeyPtr new_key() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) fail("cannot generate an EC P-256 key");
  return key;
}

void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) fail(cat("cannot make certificate extension ", OBJ_nid2sn(nid), "=", value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (!ok) fail("cannot add a certificate extension");
}

/// A certificate for `key` named `cn`, without extensions or signature yet.
X509Ptr new_cert(EVP_PKEY* key, const std::string& cn, std::chrono::seconds from,
                 std::chrono::seconds until) {
  X509Ptr cert(X509_new());
  if (!cert || !X509_set_version(cert.get(), 2)) fail("cannot make a certificate");
  // A random positive 127-bit serial: unique without any state to keep.
  BIGNUM* bn = BN_new();
  if (!bn || !BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
      !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()))) {
    BN_free(bn);
    fail("cannot make a serial number");
  }
  BN_free(bn);
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(from.count())) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(until.count())) ||
      !X509_set_pubkey(cert.get(), key))
    fail("cannot fill in a certificate");
  X509_NAME* name = X509_get_subject_name(cert.get());
  const auto* o = reinterpret_cast<const unsigned char*>("gossip");
  // A CN is at most 64 characters; the full run id is in the subjectAltName.
  const std::string short_cn = cn.substr(0, 64);
  if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, o, -1, -1, 0) ||
      !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                  reinterpret_cast<const unsigned char*>(short_cn.c_str()), -1,
                                  -1, 0))
    fail("cannot name a certificate");
  return cert;
}

std::string pem_of(int (*write)(BIO*, void*), void* object) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || !write(bio.get(), object)) fail("cannot write PEM");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string cert_pem(X509* cert) {
  return pem_of([](BIO* b, void* x) { return PEM_write_bio_X509(b, static_cast<X509*>(x)); },
                cert);
}

std::string key_pem(EVP_PKEY* key) {
  return pem_of(
      [](BIO* b, void* k) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0,
                                        nullptr, nullptr);
      },
      key);
}

/// Writes `text` to `path`, readable and writable by the owner only (also when it existed).
void write_private(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw RuntimeError(cat("cannot write ", path, ": ", std::strerror(errno)));
  bool ok = ::fchmod(fd, 0600) == 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) throw RuntimeError(cat("cannot write ", path, ": ", std::strerror(err)));
}

std::string read_text(const std::string& path, const char* what) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) throw InputError(cat(what, " ", path, ": cannot read: ", std::strerror(errno)));
  std::string out;
  char buf[4096];
  for (int n; (n = BIO_read(bio.get(), buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

}  // namespace

struct CertificateAuthority::Impl {
  PkeyPtr key;
  X509Ptr cert;
};

CertificateAuthority::CertificateAuthority(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CertificateAuthority::CertificateAuthority(const std::string& run_id, int days)
    : impl_(std::make_unique<Impl>()) {
  ERR_clear_error();
  impl_->key = new_key();
  impl_->cert = new_cert(impl_->key.get(), cat("gossip CA of run ", run_id),
                         std::chrono::hours(-1), std::chrono::hours(24) * days);
  X509* c = impl_->cert.get();
  if (!X509_set_issuer_name(c, X509_get_subject_name(c))) fail("cannot name the CA");
  add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_ext(c, c, NID_subject_key_identifier, "hash");
  if (!X509_sign(c, impl_->key.get(), EVP_sha256())) fail("cannot sign the CA certificate");
}

CertificateAuthority CertificateAuthority::load(const std::string& cert_file,
                                                const std::string& key_file) {
  ERR_clear_error();
  const std::string cert_text = read_text(cert_file, "CA certificate");
  const std::string key_text = read_text(key_file, "CA key");
  auto impl = std::make_unique<Impl>();
  BioPtr cb(BIO_new_mem_buf(cert_text.data(), static_cast<int>(cert_text.size())));
  impl->cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  if (!impl->cert)
    throw InputError(cat("CA certificate ", cert_file, ": not a PEM certificate (",
                         net::openssl_error(), ")"));
  BioPtr kb(BIO_new_mem_buf(key_text.data(), static_cast<int>(key_text.size())));
  impl->key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  if (!impl->key)
    throw InputError(cat("CA key ", key_file, ": not an unencrypted PEM private key (",
                         net::openssl_error(), ")"));
  if (X509_check_private_key(impl->cert.get(), impl->key.get()) != 1)
    throw InputError(cat("CA key ", key_file, " does not belong to the certificate ", cert_file));
  if (X509_check_ca(impl->cert.get()) == 0)
    throw InputError(cat("CA certificate ", cert_file, " is not a CA certificate (no "
                         "basicConstraints CA:TRUE)"));
  return CertificateAuthority(std::move(impl));
}

CertificateAuthority::~CertificateAuthority() = default;
CertificateAuthority::CertificateAuthority(CertificateAuthority&&) noexcept = default;
CertificateAuthority& CertificateAuthority::operator=(CertificateAuthority&&) noexcept = default;

void CertificateAuthority::write(const std::string& cert_file, const std::string& key_file) const {
  write_private(cert_file, cert_pem(impl_->cert.get()));
  if (!key_file.empty()) write_private(key_file, key_pem(impl_->key.get()));
}

void CertificateAuthority::issue(const std::string& run_id, int rank, const std::string& cert_file,
                                 const std::string& key_file, std::chrono::seconds valid_from,
                                 std::chrono::seconds valid_until) const {
  ERR_clear_error();
  GOSSIP_CHECK_GE(rank, 0);
  PkeyPtr key = new_key();
  X509Ptr cert = new_cert(key.get(), cat("gossip rank ", rank, " of run ", run_id), valid_from,
                          valid_until);
  X509* c = cert.get();
  X509* ca = impl_->cert.get();
  if (!X509_set_issuer_name(c, X509_get_subject_name(ca))) fail("cannot name the issuer");
  add_ext(c, ca, NID_basic_constraints, "critical,CA:FALSE");
  add_ext(c, ca, NID_key_usage, "critical,digitalSignature");
  add_ext(c, ca, NID_ext_key_usage, "serverAuth,clientAuth");
  add_ext(c, ca, NID_subject_alt_name, cat("URI:", tls_identity_uri(run_id, rank)));
  add_ext(c, ca, NID_subject_key_identifier, "hash");
  if (X509_get_ext_by_NID(ca, NID_subject_key_identifier, -1) >= 0)
    add_ext(c, ca, NID_authority_key_identifier, "keyid:always");
  if (!X509_sign(c, impl_->key.get(), EVP_sha256()))
    fail(cat("cannot sign the certificate of rank ", rank));
  write_private(key_file, key_pem(key.get()));
  write_private(cert_file, cert_pem(c));
}

std::string tls_identity_uri(const std::string& run_id, int rank) {
  static const char* kHex = "0123456789ABCDEF";
  std::string enc;
  for (unsigned char ch : run_id) {
    if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      enc += static_cast<char>(ch);
    } else {
      enc += '%';
      enc += kHex[ch >> 4];
      enc += kHex[ch & 15];
    }
  }
  return cat("gossip://", enc, "/rank/", rank);
}

TlsConfig tls_files_in(const std::filesystem::path& dir, int rank) {
  TlsConfig t;
  t.ca = (dir / "ca.pem").string();
  t.cert = (dir / cat("peer-", rank, ".pem")).string();
  t.key = (dir / cat("peer-", rank, ".key")).string();
  return t;
}

namespace {

/// The certificate or key in the PEM file `path`, or null when it cannot be read or holds none.
X509Ptr read_cert(const std::filesystem::path& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

PkeyPtr read_key(const std::filesystem::path& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  return PkeyPtr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

/// Whole days from now to the end of `cert`'s validity (negative once it has ended).
int days_left(X509* cert) {
  int days = 0, seconds = 0;
  if (ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(cert)) != 1) return -1;
  return days - (days == 0 && seconds < 0 ? 1 : 0);
}

}  // namespace

std::string key_set_problem(const std::filesystem::path& dir, const std::string& run_id,
                            int peers) {
  ERR_clear_error();
  const X509Ptr ca = read_cert(dir / "ca.pem");
  if (!ca) return cat((dir / "ca.pem").string(), ": missing or not a PEM certificate");
  if (days_left(ca.get()) < 1) return cat((dir / "ca.pem").string(), ": expired or expiring today");
  for (int r = 0; r < peers; ++r) {
    const TlsConfig f = tls_files_in(dir, r);
    const X509Ptr cert = read_cert(f.cert);
    if (!cert) return cat(f.cert, ": missing or not a PEM certificate");
    const PkeyPtr key = read_key(f.key);
    if (!key) return cat(f.key, ": missing or not a PEM private key");
    if (X509_verify(cert.get(), X509_get0_pubkey(ca.get())) != 1)
      return cat(f.cert, ": not issued by ", (dir / "ca.pem").string());
    if (X509_check_private_key(cert.get(), key.get()) != 1)
      return cat(f.key, ": not the key of ", f.cert);
    if (days_left(cert.get()) < 1) return cat(f.cert, ": expired or expiring today");
    net::CertIdentity id;
    std::string why;
    if (!net::cert_identity(cert.get(), &id, &why)) return cat(f.cert, ": ", why);
    if (id.run_id != run_id || id.rank != r)
      return cat(f.cert, ": names ", tls_identity_uri(id.run_id, id.rank), ", not ",
                 tls_identity_uri(run_id, r));
  }
  ERR_clear_error();
  return "";
}

void create_key_set(const std::filesystem::path& dir, const KeySetOptions& o) {
  if (o.peers < 1) throw InputError(cat("keys: need at least one peer, got ", o.peers));
  if (o.days < 1) throw InputError(cat("keys: --days must be at least 1, got ", o.days));
  std::error_code ec;
  if (std::filesystem::exists(dir / "ca.pem", ec) && !o.overwrite)
    throw InputError(cat((dir / "ca.pem").string(), " already exists (pass --force to replace "
                         "the keys in ", dir.string(), ")"));
  if (!std::filesystem::is_directory(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw RuntimeError(cat("cannot create ", dir.string(), ": ", ec.message()));
    ::chmod(dir.c_str(), 0700);
  }
  std::optional<CertificateAuthority> fresh;
  const CertificateAuthority* ca = o.ca;
  if (!ca) ca = &fresh.emplace(o.run_id, o.days);
  ca->write((dir / "ca.pem").string(),
            o.write_ca_key && !o.ca ? (dir / "ca.key").string() : "");
  const auto days = std::chrono::hours(24) * o.days;
  for (int r = 0; r < o.peers; ++r) {
    const TlsConfig f = tls_files_in(dir, r);
    ca->issue(o.run_id, r, f.cert, f.key, std::chrono::hours(-1), days);
  }
}

}  // namespace gossip
