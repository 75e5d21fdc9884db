/// compress: the compressors of compressed gossip (CHOCO-SGD) and the packets they fill — what
/// an algorithm sends when it does not send a whole parameter buffer (Exchange::publish_packet).
/// A packet says what it is and how long it is, so a receiver checks it against the model's size
/// before touching it (check_packet); its element math is gossip/compress_math.hpp.
///
/// Packet layout (little-endian, as the wire): a 16-byte header — u8 kind, u8 bits, u16 zero,
/// u32 count, u64 first — then
///   dense     (kind 1): count f32, for coordinates first .. first + count - 1;
///   sparse    (kind 2): count u32 indices (strictly ascending), then count f32 values;
///   quantized (kind 3): count = n coordinates, ceil(n / 512) f32 block scales (max |v| of each
///                       block of 512), then n codes of `bits` bits (8: int8; 4: code + 8 in a
///                       nibble, low nibble first).
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "gossip/compress.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gossip/config.hpp"

namespace gossip {

enum class PacketKind : std::uint8_t { kDense = 1, kSparse = 2, kQuantized = 3 };
inline constexpr std::size_t kPacketHeaderBytes = 16;
inline constexpr std::int64_t kQuantizeBlock = 512;

/// How random_k scales the coordinates it keeps: by n / k, so E[Q(v)] = v (kUnbiased), or not
/// at all, so ||Q(v) - v||^2 <= (1 - k/n) ||v||^2 in expectation (kContractive: what CHOCO-SGD's
/// analysis asks of a compressor). top_k and quantize are the same either way.
enum class Scaling { kUnbiased, kContractive };

/// One peer's compressor for vectors of n floats. Not thread-safe (it keeps scratch space).
class Compressor {
 public:
  /// Random streams (random_k's coordinates, quantization's rounding) come from (seed, peer,
  /// round), so the simulator and a real peer draw the same.
  Compressor(const CompressConfig& config, std::int64_t n, std::uint64_t seed, int peer);

  /// Coordinates a sparse compressor keeps: ceil(fraction * n), at least 1.
  std::int64_t kept() const { return k_; }
  /// Encodes Q(v) for `round` into `packet` (resized to fit).
  void encode(std::span<const float> v, std::int64_t round, Scaling scaling,
              std::vector<std::byte>& packet);
  /// Bytes every packet of this compressor takes.
  std::size_t packet_bytes() const;

 private:
  void encode_top_k(std::span<const float> v, std::vector<std::byte>& packet);
  void encode_random_k(std::span<const float> v, std::int64_t round, Scaling scaling,
                       std::vector<std::byte>& packet);
  void encode_quantized(std::span<const float> v, std::int64_t round,
                        std::vector<std::byte>& packet);

  CompressConfig config_;
  std::int64_t n_;
  std::int64_t k_;
  std::uint64_t key_;                 // derive_seed(seed, peer, kCompress)
  std::vector<std::uint32_t> index_;  // scratch: the coordinates kept
  std::vector<float> magnitude_;      // scratch: top_k's |v|
  std::vector<char> taken_;           // scratch: random_k's draws
};

/// A dense packet of `values`, coordinates first .. first + values.size() - 1 (an all-reduce
/// chunk, or CHOCO without compression).
void encode_dense(std::span<const float> values, std::int64_t first,
                  std::vector<std::byte>& packet);

/// "" when `packet` is a well-formed packet for a vector of n floats (the header's kind, bits and
/// sizes agree with its length; indices in range and strictly ascending; every value and scale
/// finite; 4-bit codes in -7..7); else what is wrong. A peer checks what it receives with this
/// before using it.
std::string check_packet(std::span<const std::byte> packet, std::int64_t n);
/// target[i] += weight * Q[i] for every coordinate the packet carries. The packet must have
/// passed check_packet for target.size().
void add_packet(std::span<const std::byte> packet, float weight, std::span<float> target);
/// target[i] = Q[i] for the coordinates a dense packet carries (all-reduce's all-gather).
void copy_packet(std::span<const std::byte> packet, std::span<float> target);
/// The coordinates a dense packet (that passed check_packet) carries; first = -1 for the others.
struct PacketRange {
  std::int64_t first = -1;
  std::int64_t count = 0;
};
PacketRange dense_range(std::span<const std::byte> packet);
/// The vector of n floats a packet stands for (zero where it carries nothing).
std::vector<float> decode_packet(std::span<const std::byte> packet, std::int64_t n);

}  // namespace gossip
