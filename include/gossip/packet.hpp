/// packet: the payload of a packet frame — what an algorithm sends when it does not send a whole
/// parameter buffer (CHOCO-SGD's compressed difference, an all-reduce chunk). Its layout, the
/// header codec and the check a receiver makes before it reads anything a packet says; the
/// compressors that fill packets and the math that adds them are gossip/compress.hpp's. Pure
/// functions: tests and fuzz/fuzz_packet.cpp call them directly. docs/wire.md has the layout.
///
/// Packet layout (little-endian, as the wire): a 16-byte header — u8 kind, u8 bits, u16 zero,
/// u32 count, u64 first — then
///   dense     (kind 1): count f32, for coordinates first .. first + count - 1;
///   dense bf16 (kind 4), dense fp16 (kind 5): the same with count 16-bit values (bfloat16,
///                       IEEE binary16; gossip/half.hpp): all-reduce's chunks at gossip.wire
///                       bf16 or fp16;
///   sparse    (kind 2): count u32 indices (strictly ascending), then count f32 values; first
///                       holds the model's size;
///   quantized (kind 3): count = n coordinates, ceil(n / 512) f32 block scales (max |v| of each
///                       block of 512), then n codes of `bits` bits (8: int8; 4: code + 8 in a
///                       nibble, low nibble first);
///   sparse bf16 (kind 6), sparse fp16 (kind 7): CHOCO's top_k and random_k at gossip.wire bf16
///                       or fp16: the count indices as gaps, each an unsigned LEB128 varint of
///                       1 to 5 bytes (index = the one before + 1 + gap; the first's "one before"
///                       is -1), then count 16-bit values; first holds the model's size. The
///                       index area is what lies between the header and the values: about one
///                       byte an index at a 1 % density, so a kept coordinate costs 3 bytes
///                       instead of kind 2's 8.
#pragma once
#if !defined(GOSSIP_ROOM_WIRE)
#error "gossip/packet.hpp belongs to room wire, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "gossip/half.hpp"

namespace gossip {

enum class PacketKind : std::uint8_t {
  kDense = 1,
  kSparse = 2,
  kQuantized = 3,
  kDenseBf16 = 4,
  kDenseFp16 = 5,
  kSparseBf16 = 6,
  kSparseFp16 = 7,
};
inline constexpr std::size_t kPacketHeaderBytes = 16;
inline constexpr std::int64_t kQuantizeBlock = 512;

struct PacketHeader {
  PacketKind kind = PacketKind::kDense;
  std::uint8_t bits = 0;
  std::uint32_t count = 0;
  std::uint64_t first = 0;
};

/// Writes `h` (and the zero reserved bytes) into the first kPacketHeaderBytes of `out`.
void put_packet_header(const PacketHeader& h, std::byte* out);
/// The header of `packet`, which must hold at least kPacketHeaderBytes (check_packet makes sure).
PacketHeader packet_header(std::span<const std::byte> packet);

/// Block scales of a quantized packet for a vector of n floats: ceil(n / kQuantizeBlock).
std::int64_t quantize_blocks(std::int64_t n);
/// Bytes of a quantized packet for n floats at `bits` (4 or 8).
std::size_t quantized_packet_bytes(std::int64_t n, int bits);

/// The dense kind that carries values of wire format `w` (kDense for fp32).
PacketKind dense_kind(WireFormat w);
/// The wire format of a dense kind's values (kDense: fp32); kind must be one of the dense ones.
WireFormat dense_format(PacketKind kind);
/// Whether `kind` is one of the dense kinds (1, 4, 5).
bool is_dense(PacketKind kind);

/// The sparse kind that carries values of wire format `w` (kSparse for fp32).
PacketKind sparse_kind(WireFormat w);
/// Whether `kind` is one of the half-width sparse kinds (6, 7), and their values' format.
bool is_sparse_half(PacketKind kind);
WireFormat sparse_format(PacketKind kind);
/// The most bytes a sparse packet of k coordinates takes in format `w` (kind 2: exactly).
std::size_t sparse_packet_bytes(std::int64_t k, WireFormat w);

/// Writes v as an unsigned LEB128 varint at `out` (1 to 5 bytes); returns the bytes written.
inline std::size_t put_varint(std::uint32_t v, std::byte* out) {
  std::size_t i = 0;
  while (v >= 0x80) {
    out[i++] = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out[i++] = static_cast<std::byte>(v);
  return i;
}

/// Walks the indices of a kind 6 or 7 packet: its index area (what lies between the header and
/// the 2 x count bytes of values) read gap by gap. Reads nothing outside the packet; check_packet
/// uses it to check, and the adders to decode a packet that passed.
class GapReader {
 public:
  /// The packet must hold at least its header and 2 x its count bytes (check_packet's sizes).
  explicit GapReader(std::span<const std::byte> packet);
  /// The next index into `index`: false when the gap is not a varint of at most 32 bits within
  /// the index area (index then unchanged).
  bool next(std::int64_t& index);
  /// Bytes of the index area not read yet (0 once a well-formed packet's gaps are all read).
  std::size_t left() const { return area_.size() - at_; }
  /// The 16-bit values, right after the index area.
  const std::byte* values() const { return area_.data() + area_.size(); }

 private:
  std::span<const std::byte> area_;
  std::size_t at_ = 0;
  std::int64_t index_ = -1;
};

/// An f32 or u32 of a packet's body (packets need not be aligned for them).
inline float packet_f32(const std::byte* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint32_t packet_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint16_t packet_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

/// Code i of a quantized packet's code area: an int8 (8 bits), or a nibble minus 8 (4 bits).
int packet_code(const std::byte* codes, int bits, std::int64_t i);

/// "" when `packet` is a well-formed packet for a vector of n floats (the header's kind, bits and
/// sizes agree with its length; dense coordinates inside the vector; sparse indices in range and
/// strictly ascending; every value and scale finite; codes in -7..7 or -127..127); else what is
/// wrong. A peer checks every packet it receives with this before reading anything else in it;
/// it allocates nothing.
std::string check_packet(std::span<const std::byte> packet, std::int64_t n);

/// "" when `packet` is a well-formed dense packet for a vector of n floats (check_packet) of
/// values in format `wire` that carries exactly coordinates first .. first + count - 1 (an
/// all-reduce chunk); else what is wrong.
std::string check_chunk(std::span<const std::byte> packet, std::int64_t n, std::int64_t first,
                        std::int64_t count, WireFormat wire = WireFormat::kFp32);

/// A packet that passed check_packet, read: where each of its parts lies and what each value is
/// in float32. The one reader of packets: the gossip room's adders (add_packet, PacketAdder) and
/// all-reduce's copy read packets only through it, and so does fuzz/fuzz_packet.cpp; check_packet
/// finds the parts where it does. Pointers into the packet: nothing is copied or allocated, and
/// float32 values and u32 indices are handed over where they lie (a reader on host memory uses
/// them in place when they are aligned).
class PacketReader {
 public:
  /// `packet` must have passed check_packet for a vector of n floats (what is read is not checked
  /// again).
  PacketReader(std::span<const std::byte> packet, std::int64_t n);

  const PacketHeader& header() const { return h_; }
  PacketKind kind() const { return h_.kind; }
  /// Dense kinds (1, 4, 5): coordinates first() .. first() + count() - 1.
  bool dense() const { return is_dense(h_.kind); }
  /// Sparse kinds (2, 6, 7): count() coordinates, each named by an index.
  bool sparse() const { return !dense() && !quantized(); }
  /// Kind 3: every coordinate of the model, as a code times its block's scale.
  bool quantized() const { return h_.kind == PacketKind::kQuantized; }
  /// Values carried: dense and sparse, count values; quantized, n codes.
  std::int64_t count() const { return h_.count; }
  /// Dense: the first coordinate carried (0 for the others).
  std::int64_t first() const { return dense() ? static_cast<std::int64_t>(h_.first) : 0; }

  /// Dense and sparse: the format of the values (fp32 for kinds 1 and 2).
  WireFormat format() const { return format_; }
  /// Dense and sparse: value j (0 <= j < count()), widened to float32 (exactly).
  float value(std::int64_t j) const {
    return format_ == WireFormat::kFp32 ? packet_f32(values_ + j * 4)
                                        : math::widen(packet_u16(values_ + j * 2), format_);
  }
  /// Dense and sparse: where the count() values lie (f32 or 16-bit, as format() says; packets
  /// need not be aligned for them).
  const std::byte* values() const { return values_; }
  /// Kind 2: where its count() u32 indices lie; nullptr for the others (kinds 6 and 7 code
  /// theirs as gaps: for_each_index).
  const std::byte* indices() const { return indices_; }

  /// Sparse: f(j, index) for each entry j in order (ascending indices).
  template <typename F>
  void for_each_index(F&& f) const {
    if (indices_ != nullptr) {
      for (std::int64_t j = 0; j < count(); ++j) f(j, std::int64_t{packet_u32(indices_ + j * 4)});
      return;
    }
    GapReader gaps(packet_);
    for (std::int64_t j = 0; j < count(); ++j) {
      std::int64_t index = 0;
      if (!gaps.next(index)) unchecked();
      f(j, index);
    }
    if (gaps.left() != 0) unchecked();
  }
  /// Dense and sparse: f(coordinate, value) for each coordinate the packet carries, in order.
  template <typename F>
  void for_each(F&& f) const {
    // The format chosen once, outside the loops.
    if (format_ == WireFormat::kFp32)
      return visit(f, [this](std::int64_t j) { return packet_f32(values_ + j * 4); });
    visit(f, [this](std::int64_t j) { return math::widen(packet_u16(values_ + j * 2), format_); });
  }

  /// Quantized: bits a code (4 or 8), the number of blocks of kQuantizeBlock coordinates, block
  /// b's scale, where the scales (f32) and the code area lie, and code i (-levels..levels).
  int bits() const { return h_.bits; }
  std::int64_t blocks() const { return quantize_blocks(n_); }
  float scale(std::int64_t b) const { return packet_f32(scales_ + b * 4); }
  const std::byte* scales() const { return scales_; }
  const std::byte* codes() const { return codes_; }
  int code(std::int64_t i) const { return packet_code(codes_, h_.bits, i); }

 private:
  [[noreturn]] static void unchecked();
  template <typename F, typename V>
  void visit(F& f, V value) const {
    if (dense()) {
      const std::int64_t from = first();
      for (std::int64_t j = 0; j < count(); ++j) f(from + j, value(j));
      return;
    }
    for_each_index([&](std::int64_t j, std::int64_t index) { f(index, value(j)); });
  }

  std::span<const std::byte> packet_;
  std::int64_t n_;
  PacketHeader h_;
  WireFormat format_ = WireFormat::kFp32;
  const std::byte* values_ = nullptr;
  const std::byte* indices_ = nullptr;
  const std::byte* scales_ = nullptr;
  const std::byte* codes_ = nullptr;
};

/// The coordinates a dense packet (any dense kind, that passed check_packet) carries; first = -1
/// for the others.
struct PacketRange {
  std::int64_t first = -1;
  std::int64_t count = 0;
};
PacketRange dense_range(std::span<const std::byte> packet);

}  // namespace gossip
