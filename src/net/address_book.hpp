/// net/address_book: signed address records (gossip/wire.hpp) — this peer's own, signed with the
/// private key of its TLS certificate, and the other members' that reached it, each checked
/// against the run's CA and the identity its certificate names before it is believed, whoever
/// passed it on. So an address cannot be announced for an identity by anyone but its holder.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/address_book.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "gossip/wire.hpp"

namespace gossip::net {

using FrameBytes = std::shared_ptr<const std::vector<std::byte>>;

class AddressBook {
 public:
  /// `tls`: our TLS context (its key, certificate and CA store); null when TLS is off, and then
  /// the book holds and believes nothing. `own_address`: what this peer announces ("" = none).
  AddressBook(SSL_CTX* tls, std::string run_id, int rank, int size, const std::string& own_address);

  enum class Verdict { kNew, kKnown, kRefused };
  struct Taken {
    Verdict verdict = Verdict::kKnown;
    std::string why;   // kRefused: what is wrong with it
    FrameBytes frame;  // kNew: the record as an address frame from us, to pass on
  };
  /// A record that reached us (passed on by anyone): kNew when it is the newest of its rank and
  /// its signature, certificate and identity check out (then held), kKnown when we hold it or a
  /// newer one, kRefused (with why) otherwise.
  Taken take(const wire::AddressRecord& record);

  /// Every record held, ours first, as address frames from us.
  std::vector<FrameBytes> frames() const;
  /// The address rank `rank` announced in a record we hold (ours included).
  std::optional<std::string> address(int rank) const;
  bool signing() const { return tls_ != nullptr; }

  /// Signs a record of `address` for `rank` with `tls`'s key (for tests: a record someone else
  /// signs). Throws RuntimeError when OpenSSL cannot.
  static wire::AddressRecord sign(SSL_CTX* tls, const std::string& run_id, int rank,
                                  std::uint64_t sequence, const std::string& address);

 private:
  /// "" when `record` is signed by the key of a certificate that chains to our CA and names
  /// rank record.rank of our run; else why not.
  std::string check(const wire::AddressRecord& record) const;
  FrameBytes frame_of(const wire::AddressRecord& record) const;

  SSL_CTX* tls_;
  std::string run_id_;
  int rank_;
  struct Held {
    wire::AddressRecord record;
    FrameBytes frame;
  };
  std::vector<std::optional<Held>> held_;  // by rank
};

}  // namespace gossip::net
