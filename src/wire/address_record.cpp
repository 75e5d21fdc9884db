// wire/address_record.cpp: a member's signed address record (gossip/wire.hpp), the payload of an
// address frame. Only the layout is here; the signature is checked where the CA is (src/net).
#include <bit>
#include <cstring>

#include "gossip/core.hpp"
#include "gossip/wire.hpp"

namespace gossip::wire {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire is little-endian");

constexpr std::size_t kVersionAt = 4, kAddressLenAt = 6, kRankAt = 8, kSequenceAt = 12,
                      kCertLenAt = 20, kSignatureLenAt = 22;
static_assert(kSignatureLenAt + 2 == kAddressFixedBytes);

template <typename T>
void put(std::vector<std::byte>& out, std::size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <typename T>
T get(std::span<const std::byte> in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  return value;
}

bool printable_address(const std::string& a) {
  if (a.empty() || a.find(':') == std::string::npos) return false;
  for (char c : a)
    if (c <= ' ' || c > '~') return false;
  return true;
}

/// Why `in` is not an address record as its fixed part tells ("" when it may be one): its
/// size, magic, version and reserved byte, and the lengths it gives against the limits and
/// against its size.
std::string header_problem(std::span<const std::byte> in) {
  if (in.size() < kAddressFixedBytes)
    return cat("an address record is at least ", kAddressFixedBytes, " bytes, got ", in.size());
  for (std::size_t i = 0; i < kAddressMagic.size(); ++i)
    if (std::to_integer<std::uint8_t>(in[i]) != kAddressMagic[i])
      return "not an address record (bad magic)";
  if (const auto v = get<std::uint8_t>(in, kVersionAt); v != kAddressVersion)
    return cat("address record version ", int(v), ", ours is ", int(kAddressVersion));
  if (get<std::uint8_t>(in, kVersionAt + 1) != 0)
    return "address record: reserved byte is not zero";
  const std::size_t address = get<std::uint16_t>(in, kAddressLenAt);
  const std::size_t cert = get<std::uint16_t>(in, kCertLenAt);
  const std::size_t signature = get<std::uint16_t>(in, kSignatureLenAt);
  if (address > kMaxAddressBytes || cert > kMaxAddressCertBytes ||
      signature > kMaxAddressSignatureBytes)
    return cat("address record: an address of ", address, " bytes (at most ",
               kMaxAddressBytes, "), a certificate of ", cert, " (at most ",
               kMaxAddressCertBytes, ") or a signature of ", signature, " (at most ",
               kMaxAddressSignatureBytes, ")");
  if (in.size() != kAddressFixedBytes + address + cert + signature)
    return cat("address record of ", in.size(), " bytes, its lengths say ",
               kAddressFixedBytes + address + cert + signature);
  return "";
}

}  // namespace

std::vector<std::byte> encode_address_record(const AddressRecord& r) {
  GOSSIP_CHECK_MSG(r.address.size() <= kMaxAddressBytes &&
                       r.certificate.size() <= kMaxAddressCertBytes &&
                       r.signature.size() <= kMaxAddressSignatureBytes,
                   "encode_address_record: a field beyond its limit");
  std::vector<std::byte> out(kAddressFixedBytes + r.address.size() + r.certificate.size() +
                             r.signature.size());
  for (std::size_t i = 0; i < kAddressMagic.size(); ++i) out[i] = std::byte{kAddressMagic[i]};
  put<std::uint8_t>(out, kVersionAt, kAddressVersion);
  put(out, kAddressLenAt, static_cast<std::uint16_t>(r.address.size()));
  put(out, kRankAt, r.rank);
  put(out, kSequenceAt, r.sequence);
  put(out, kCertLenAt, static_cast<std::uint16_t>(r.certificate.size()));
  put(out, kSignatureLenAt, static_cast<std::uint16_t>(r.signature.size()));
  std::byte* p = out.data() + kAddressFixedBytes;
  std::memcpy(p, r.address.data(), r.address.size());
  p += r.address.size();
  if (!r.certificate.empty()) std::memcpy(p, r.certificate.data(), r.certificate.size());
  p += r.certificate.size();
  if (!r.signature.empty()) std::memcpy(p, r.signature.data(), r.signature.size());
  return out;
}

Decoded<AddressRecord> decode_address_record(std::span<const std::byte> in,
                                             std::size_t max_peers) {
  Decoded<AddressRecord> d;
  if (std::string why = header_problem(in); !why.empty()) {
    d.error = std::move(why);
    return d;
  }
  const std::size_t address = get<std::uint16_t>(in, kAddressLenAt);
  const std::size_t cert = get<std::uint16_t>(in, kCertLenAt);
  const std::size_t signature = get<std::uint16_t>(in, kSignatureLenAt);
  AddressRecord r;
  r.rank = get<std::uint32_t>(in, kRankAt);
  r.sequence = get<std::uint64_t>(in, kSequenceAt);
  if (r.rank >= max_peers) {
    d.error = cat("address record for rank ", r.rank, ", not in this run of ", max_peers,
                  " peers");
    return d;
  }
  const std::byte* p = in.data() + kAddressFixedBytes;
  r.address.assign(reinterpret_cast<const char*>(p), address);
  if (!printable_address(r.address)) {
    d.error = "address record: the address is not host:port in printable ASCII";
    return d;
  }
  if (cert == 0 || signature == 0) {
    d.error = "address record without a certificate or a signature";
    return d;
  }
  p += address;
  r.certificate.assign(p, p + cert);
  p += cert;
  r.signature.assign(p, p + signature);
  d.value = std::move(r);
  return d;
}

std::vector<std::byte> address_record_message(const std::string& run_id,
                                              const AddressRecord& r) {
  const std::string text = cat("gossip address record v1\n", run_id.size(), ":", run_id, "\n",
                               r.rank, "\n", r.sequence, "\n", r.address);
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

}  // namespace gossip::wire
