// wire/rendezvous.cpp: the fixed-size rendezvous messages (dial-back and relay requests, their
// answers) that a connection may send to a peer's listening port before anything else.
#include <bit>
#include <cstdlib>
#include <cstring>

#include "gossip/core.hpp"
#include "gossip/hash.hpp"
#include "gossip/wire.hpp"

namespace gossip::wire {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire is little-endian");

// Offsets of the fields (the layout is in gossip/wire.hpp).
constexpr std::size_t kVersionAt = 4, kKindAt = 5, kStatusAt = 6, kTextLenAt = 7, kTagAt = 8,
                      kFromAt = 16, kToAt = 20, kNonceAt = 24, kTimeAt = 32, kTextAt = 40;
static_assert(kTextAt + kMaxRendezvousText == kRendezvousBytes);

template <typename T>
void put(std::array<std::byte, kRendezvousBytes>& out, std::size_t at, T value) {
  std::memcpy(out.data() + at, &value, sizeof value);
}

template <typename T>
T get(std::span<const std::byte> in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  return value;
}

}  // namespace

std::uint64_t rendezvous_tag(const std::string& run_id) {
  const std::string hex = sha256_hex(run_id.data(), run_id.size());
  std::uint64_t tag = 0;
  for (int byte = 0; byte < 8; ++byte)
    tag |= std::strtoull(hex.substr(2 * byte, 2).c_str(), nullptr, 16) << (8 * byte);
  return tag;
}

std::array<std::byte, kRendezvousBytes> encode_rendezvous(const Rendezvous& m) {
  std::array<std::byte, kRendezvousBytes> out{};
  for (std::size_t i = 0; i < kRendezvousMagic.size(); ++i)
    out[i] = std::byte{kRendezvousMagic[i]};
  const std::size_t text = std::min(m.text.size(), kMaxRendezvousText);
  put<std::uint8_t>(out, kVersionAt, kRendezvousVersion);
  put<std::uint8_t>(out, kKindAt, static_cast<std::uint8_t>(m.kind));
  put<std::uint8_t>(out, kStatusAt, static_cast<std::uint8_t>(m.status));
  put<std::uint8_t>(out, kTextLenAt, static_cast<std::uint8_t>(text));
  put(out, kTagAt, m.run_tag);
  put(out, kFromAt, m.from);
  put(out, kToAt, m.to);
  put(out, kNonceAt, m.nonce);
  put(out, kTimeAt, m.time_ns);
  std::memcpy(out.data() + kTextAt, m.text.data(), text);
  return out;
}

Decoded<Rendezvous> decode_rendezvous(std::span<const std::byte> in) {
  Decoded<Rendezvous> d;
  if (in.size() != kRendezvousBytes) {
    d.error = cat("a rendezvous message is ", kRendezvousBytes, " bytes, got ", in.size());
    return d;
  }
  for (std::size_t i = 0; i < kRendezvousMagic.size(); ++i)
    if (std::to_integer<std::uint8_t>(in[i]) != kRendezvousMagic[i]) {
      d.error = "not a rendezvous message (bad magic)";
      return d;
    }
  if (const auto v = get<std::uint8_t>(in, kVersionAt); v != kRendezvousVersion) {
    d.error = cat("rendezvous version ", int(v), ", ours is ", int(kRendezvousVersion));
    return d;
  }
  const auto kind = get<std::uint8_t>(in, kKindAt);
  const auto status = get<std::uint8_t>(in, kStatusAt);
  const auto text = get<std::uint8_t>(in, kTextLenAt);
  if (kind == 0 || kind > kLastRendezvousKind) {
    d.error = cat("unknown rendezvous kind ", int(kind));
    return d;
  }
  if (status > kLastRendezvousStatus) {
    d.error = cat("unknown rendezvous status ", int(status));
    return d;
  }
  if (text > kMaxRendezvousText) {
    d.error = cat("rendezvous text of ", int(text), " bytes, at most ", kMaxRendezvousText);
    return d;
  }
  for (std::size_t i = kTextAt + text; i < kRendezvousBytes; ++i)
    if (in[i] != std::byte{0}) {
      d.error = "rendezvous padding is not zero";
      return d;
    }
  Rendezvous m;
  m.kind = static_cast<RendezvousKind>(kind);
  m.status = static_cast<RendezvousStatus>(status);
  m.run_tag = get<std::uint64_t>(in, kTagAt);
  m.from = get<std::uint32_t>(in, kFromAt);
  m.to = get<std::uint32_t>(in, kToAt);
  m.nonce = get<std::uint64_t>(in, kNonceAt);
  m.time_ns = get<std::int64_t>(in, kTimeAt);
  m.text.assign(reinterpret_cast<const char*>(in.data() + kTextAt), text);
  d.value = std::move(m);
  return d;
}

}  // namespace gossip::wire
