// wire/packet.cpp: the packet payload's header codec and check_packet (layout in
// gossip/packet.hpp). A packet comes from another peer: every size is checked against the
// model's and the packet's length, and every index, value, scale and code read once, before an
// algorithm touches it — this is what fuzz/fuzz_packet.cpp exercises. Nothing here allocates.
#include "gossip/packet.hpp"

#include <bit>
#include <cmath>

#include "gossip/core.hpp"

namespace gossip {

static_assert(std::endian::native == std::endian::little,
              "packets are little-endian; big-endian hosts are not supported");

void put_packet_header(const PacketHeader& h, std::byte* out) {
  out[0] = static_cast<std::byte>(h.kind);
  out[1] = static_cast<std::byte>(h.bits);
  out[2] = out[3] = std::byte{0};
  std::memcpy(out + 4, &h.count, 4);
  std::memcpy(out + 8, &h.first, 8);
}

PacketHeader packet_header(std::span<const std::byte> p) {
  PacketHeader h;
  h.kind = static_cast<PacketKind>(std::to_integer<std::uint8_t>(p[0]));
  h.bits = std::to_integer<std::uint8_t>(p[1]);
  std::memcpy(&h.count, p.data() + 4, 4);
  std::memcpy(&h.first, p.data() + 8, 8);
  return h;
}

PacketKind dense_kind(WireFormat w) {
  switch (w) {
    case WireFormat::kBf16: return PacketKind::kDenseBf16;
    case WireFormat::kFp16: return PacketKind::kDenseFp16;
    case WireFormat::kFp32: break;
  }
  return PacketKind::kDense;
}

WireFormat dense_format(PacketKind kind) {
  GOSSIP_CHECK_MSG(is_dense(kind), "dense_format: packet kind ", static_cast<int>(kind),
                   " is not a dense one");
  return kind == PacketKind::kDenseBf16   ? WireFormat::kBf16
         : kind == PacketKind::kDenseFp16 ? WireFormat::kFp16
                                          : WireFormat::kFp32;
}

bool is_dense(PacketKind kind) {
  return kind == PacketKind::kDense || kind == PacketKind::kDenseBf16 ||
         kind == PacketKind::kDenseFp16;
}

PacketKind sparse_kind(WireFormat w) {
  switch (w) {
    case WireFormat::kBf16: return PacketKind::kSparseBf16;
    case WireFormat::kFp16: return PacketKind::kSparseFp16;
    case WireFormat::kFp32: break;
  }
  return PacketKind::kSparse;
}

bool is_sparse_half(PacketKind kind) {
  return kind == PacketKind::kSparseBf16 || kind == PacketKind::kSparseFp16;
}

WireFormat sparse_format(PacketKind kind) {
  GOSSIP_CHECK_MSG(kind == PacketKind::kSparse || is_sparse_half(kind),
                   "sparse_format: packet kind ", static_cast<int>(kind), " is not a sparse one");
  return kind == PacketKind::kSparseBf16   ? WireFormat::kBf16
         : kind == PacketKind::kSparseFp16 ? WireFormat::kFp16
                                           : WireFormat::kFp32;
}

std::size_t sparse_packet_bytes(std::int64_t k, WireFormat w) {
  const auto count = static_cast<std::size_t>(k);
  return kPacketHeaderBytes + count * (w == WireFormat::kFp32 ? 8 : 5 + 2);
}

namespace {

/// Reads the varint at area[at], advancing `at`: false when it runs past the area, takes more
/// than 5 bytes or does not fit in 32 bits.
bool get_varint(std::span<const std::byte> area, std::size_t& at, std::uint32_t& v) {
  v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (at >= area.size()) return false;
    const auto b = std::to_integer<std::uint32_t>(area[at++]);
    if (shift == 28 && b > 0x0f) return false;
    v |= (b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

GapReader::GapReader(std::span<const std::byte> p)
    : area_(p.subspan(kPacketHeaderBytes,
                      p.size() - kPacketHeaderBytes - std::size_t{packet_header(p).count} * 2)) {}

bool GapReader::next(std::int64_t& index) {
  std::uint32_t gap = 0;
  if (!get_varint(area_, at_, gap)) return false;
  index_ += std::int64_t{gap} + 1;
  index = index_;
  return true;
}

PacketReader::PacketReader(std::span<const std::byte> p, std::int64_t n)
    : packet_(p), n_(n), h_(packet_header(p)) {
  const std::byte* body = p.data() + kPacketHeaderBytes;
  const std::size_t count = h_.count;
  switch (h_.kind) {
    case PacketKind::kDense:
    case PacketKind::kDenseBf16:
    case PacketKind::kDenseFp16:
      format_ = dense_format(h_.kind);
      values_ = body;
      return;
    case PacketKind::kSparse:
      indices_ = body;
      values_ = body + count * 4;
      return;
    case PacketKind::kSparseBf16:
    case PacketKind::kSparseFp16:  // the index area between header and values: GapReader's
      format_ = sparse_format(h_.kind);
      values_ = p.data() + p.size() - count * 2;
      return;
    case PacketKind::kQuantized:
      scales_ = body;
      codes_ = body + quantize_blocks(n) * 4;
      return;
  }
  unchecked();
}

void PacketReader::unchecked() {
  detail::throw_check(__FILE__, __LINE__,
                      "PacketReader: reading a packet that did not pass check_packet");
}

std::int64_t quantize_blocks(std::int64_t n) { return (n + kQuantizeBlock - 1) / kQuantizeBlock; }

std::size_t quantized_packet_bytes(std::int64_t n, int bits) {
  const auto codes = static_cast<std::size_t>(bits == 8 ? n : (n + 1) / 2);
  return kPacketHeaderBytes + static_cast<std::size_t>(quantize_blocks(n)) * 4 + codes;
}

int packet_code(const std::byte* codes, int bits, std::int64_t i) {
  if (bits == 8) return static_cast<std::int8_t>(std::to_integer<std::uint8_t>(codes[i]));
  const auto b = std::to_integer<std::uint8_t>(codes[i / 2]);
  return static_cast<int>((i % 2 == 0) ? (b & 0x0f) : (b >> 4)) - 8;
}

namespace {

bool finite_floats(const std::byte* at, std::uint64_t count) {
  for (std::uint64_t j = 0; j < count; ++j)
    if (!std::isfinite(packet_f32(at + j * 4))) return false;
  return true;
}

// Whether `count` 16-bit values of format w are all finite (no exponent of all ones).
bool finite_halves(const std::byte* at, std::uint64_t count, WireFormat w) {
  const std::uint16_t exp = w == WireFormat::kFp16 ? 0x7c00 : 0x7f80;
  for (std::uint64_t j = 0; j < count; ++j)
    if ((packet_u16(at + j * 2) & exp) == exp) return false;
  return true;
}

std::string check_dense(const PacketHeader& h, std::span<const std::byte> p, std::uint64_t n) {
  const std::uint64_t count = h.count;
  const WireFormat w = dense_format(h.kind);
  const std::uint64_t value_bytes = wire_value_bytes(w);
  const std::string what =
      w == WireFormat::kFp32 ? std::string("dense packet")
                             : cat("dense ", wire_format_name(w), " packet");
  if (h.bits != 0) return cat(what, " with a bit width");
  if (h.first > n || count > n - h.first)
    return cat(what, " for coordinates ", h.first, "..", h.first + count, " of a model of ", n);
  if (p.size() != kPacketHeaderBytes + count * value_bytes)
    return cat(what, " of ", count, " values is ", p.size(), " bytes, expected ",
               kPacketHeaderBytes + count * value_bytes);
  const PacketReader r(p, static_cast<std::int64_t>(n));
  if (w == WireFormat::kFp32 ? !finite_floats(r.values(), count)
                             : !finite_halves(r.values(), count, w))
    return cat(what, " holds NaN or Inf");
  return {};
}

std::string check_sparse(const PacketHeader& h, std::span<const std::byte> p, std::uint64_t n) {
  const std::uint64_t count = h.count;
  if (h.bits != 0) return "sparse packet with a bit width";
  if (h.first != n)
    return cat("sparse packet for a model of ", h.first, " parameters, ours has ", n);
  if (count > n)
    return cat("sparse packet of ", count, " coordinates, more than the model's ", n);
  if (p.size() != kPacketHeaderBytes + count * 8)
    return cat("sparse packet of ", count, " coordinates is ", p.size(), " bytes, expected ",
               kPacketHeaderBytes + count * 8);
  const PacketReader r(p, static_cast<std::int64_t>(n));
  std::string why;
  std::int64_t last = -1;
  r.for_each_index([&](std::int64_t j, std::int64_t i) {
    if (why.empty() && (i <= last || static_cast<std::uint64_t>(i) >= n))
      why = cat("sparse packet's index ", i, " (entry ", j, ") is out of range or order");
    last = i;
  });
  if (!why.empty()) return why;
  if (!finite_floats(r.values(), count)) return "sparse packet holds NaN or Inf";
  return {};
}

// Kinds 6 and 7: varint gaps, then 16-bit values. Every gap is decoded and the indices it
// gives checked against the model before anything is added.
std::string check_sparse_half(const PacketHeader& h, std::span<const std::byte> p,
                              std::uint64_t n) {
  const std::uint64_t count = h.count;
  const WireFormat w = sparse_format(h.kind);
  const std::string what = cat("sparse ", wire_format_name(w), " packet");
  if (h.bits != 0) return cat(what, " with a bit width");
  if (h.first != n) return cat(what, " for a model of ", h.first, " parameters, ours has ", n);
  if (count > n) return cat(what, " of ", count, " coordinates, more than the model's ", n);
  // At least a byte of gap and two of value per coordinate, at most 5 and 2.
  const std::uint64_t body = p.size() - kPacketHeaderBytes;
  if (body < count * 3 || body > count * 7)
    return cat(what, " of ", count, " coordinates is ", p.size(), " bytes, expected ",
               kPacketHeaderBytes + count * 3, " to ", kPacketHeaderBytes + count * 7);
  GapReader gaps(p);
  for (std::uint64_t j = 0; j < count; ++j) {
    std::int64_t index = 0;
    if (!gaps.next(index))
      return cat(what, "'s gap ", j, " is not a varint of at most 32 bits within its index area");
    if (static_cast<std::uint64_t>(index) >= n)
      return cat(what, "'s index ", index, " (entry ", j, ") is past the model's ", n);
  }
  if (gaps.left() != 0)
    return cat(what, "'s index area has ", gaps.left(), " bytes past its ", count, " gaps");
  if (!finite_halves(PacketReader(p, static_cast<std::int64_t>(n)).values(), count, w))
    return cat(what, " holds NaN or Inf");
  return {};
}

std::string check_quantized(const PacketHeader& h, std::span<const std::byte> p,
                            std::int64_t n) {
  if (h.bits != 4 && h.bits != 8) return cat("quantized packet of ", int{h.bits}, " bits");
  if (h.count != static_cast<std::uint64_t>(n) || h.first != 0)
    return cat("quantized packet of ", h.count, " coordinates, the model has ", n);
  if (p.size() != quantized_packet_bytes(n, h.bits))
    return cat("quantized packet is ", p.size(), " bytes, expected ",
               quantized_packet_bytes(n, h.bits));
  const PacketReader r(p, n);
  for (std::int64_t b = 0; b < r.blocks(); ++b) {
    const float s = r.scale(b);
    if (!std::isfinite(s) || s < 0) return cat("quantized packet's block scale ", s);
  }
  // The encoder's codes are -levels..levels: -7..7 (4 bits), -127..127 (8 bits).
  const int least = h.bits == 4 ? -7 : -127;
  for (std::int64_t i = 0; i < n; ++i)
    if (r.code(i) < least)
      return cat(int{h.bits}, "-bit code out of range at ", i);
  return {};
}

}  // namespace

std::string check_packet(std::span<const std::byte> p, std::int64_t n) {
  if (p.size() < kPacketHeaderBytes)
    return cat("packet of ", p.size(), " bytes is shorter than its ", kPacketHeaderBytes,
               "-byte header");
  if (std::to_integer<int>(p[2]) != 0 || std::to_integer<int>(p[3]) != 0)
    return "packet header's reserved bytes are not zero";
  const PacketHeader h = packet_header(p);
  const auto size = static_cast<std::uint64_t>(n);
  switch (h.kind) {
    case PacketKind::kDense:
    case PacketKind::kDenseBf16:
    case PacketKind::kDenseFp16: return check_dense(h, p, size);
    case PacketKind::kSparse: return check_sparse(h, p, size);
    case PacketKind::kQuantized: return check_quantized(h, p, n);
    case PacketKind::kSparseBf16:
    case PacketKind::kSparseFp16: return check_sparse_half(h, p, size);
  }
  return cat("unknown packet kind ", std::to_integer<int>(p[0]));
}

std::string check_chunk(std::span<const std::byte> packet, std::int64_t n, std::int64_t first,
                        std::int64_t count, WireFormat wire) {
  if (std::string why = check_packet(packet, n); !why.empty()) return why;
  const std::string chunk = cat("the chunk of ", count, " floats from ", first);
  const PacketRange r = dense_range(packet);
  if (r.first < 0) return cat("a packet that is not dense, expected ", chunk);
  if (const WireFormat got = dense_format(packet_header(packet).kind); got != wire)
    return cat("a dense packet of ", wire_format_name(got), " values, expected ",
               wire_format_name(wire), " ones (gossip.wire)");
  if (r.first == first && r.count == count) return {};
  return cat("coordinates ", r.first, "..", r.first + r.count, ", expected ", chunk);
}

PacketRange dense_range(std::span<const std::byte> packet) {
  const PacketHeader h = packet_header(packet);
  if (!is_dense(h.kind)) return {};
  return {static_cast<std::int64_t>(h.first), static_cast<std::int64_t>(h.count)};
}

}  // namespace gossip
