/// compress: the compressors of compressed gossip (CHOCO-SGD) and the packets they fill — what
/// an algorithm sends when it does not send a whole parameter buffer (Exchange::publish_packet).
/// A packet says what it is and how long it is, so a receiver checks it against the model's size
/// before touching it (check_packet, with the packet layout in gossip/packet.hpp: the wire room
/// decodes what other peers send); its element math is gossip/compress_math.hpp.
///
/// Two ways to fill and use packets: on host vectors (Compressor::encode of a span, add_packet:
/// all-reduce, and the reference the tests hold the other to), and on vectors in a backend's
/// memory (Compressor::encode of a backend pointer, PacketAdder: CHOCO-SGD), where the element
/// math runs as the backend's gossip kernels (gossip/gossip_kernels.hpp) — loops on the CPU,
/// kernels on CUDA — and only packets cross between host and device. Both give the same packets
/// and sums, bit for bit. What stays on the
/// host: choosing top_k's and random_k's coordinates (a selection — nth_element, Floyd's draws —
/// not element math; the vector is downloaded for it on a device backend), packing 4-bit codes two
/// to a byte and unpacking them.
#pragma once
#if !defined(GOSSIP_ROOM_GOSSIP)
#error "gossip/compress.hpp belongs to room gossip, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gossip/backend_device.hpp"
#include "gossip/config.hpp"
#include "gossip/gossip_kernels.hpp"
#include "gossip/packet.hpp"

namespace gossip {

/// How random_k scales the coordinates it keeps: by n / k, so E[Q(v)] = v (kUnbiased), or not
/// at all, so ||Q(v) - v||^2 <= (1 - k/n) ||v||^2 in expectation (kContractive: what CHOCO-SGD's
/// analysis asks of a compressor). top_k and quantize are the same either way.
enum class Scaling { kUnbiased, kContractive };

/// One peer's compressor for vectors of n floats. Not thread-safe (it keeps scratch space).
class Compressor {
 public:
  /// Random streams (random_k's coordinates, quantization's rounding) come from (seed, peer,
  /// round), so the simulator and a real peer draw the same. `wire` (gossip.wire): top_k and
  /// random_k send their values in it, bf16 and fp16 in the varint-indexed sparse kinds 6 and 7
  /// (gossip/packet.hpp); quantize takes fp32 only.
  Compressor(const CompressConfig& config, std::int64_t n, std::uint64_t seed, int peer,
             WireFormat wire = WireFormat::kFp32);

  /// Coordinates a sparse compressor keeps: ceil(fraction * n), at least 1.
  std::int64_t kept() const { return k_; }
  /// Encodes Q(v) for `round` into `packet` (resized to fit). At fp16, a kept value past fp16's
  /// range throws RuntimeError (wire_overflow's message).
  void encode(std::span<const float> v, std::int64_t round, Scaling scaling,
              std::vector<std::byte>& packet);
  /// Encodes Q(v) for `round` where v, n floats, is in `backend`'s memory: the packet encode()
  /// fills from the same values, bit for bit. quantize runs GossipKernels::quantize and brings
  /// back only the block scales and codes (a host-memory backend writes them into the packet in
  /// place); top_k and random_k select on the host from v (downloaded first on a device
  /// backend); none downloads v into a dense packet.
  void encode(GossipKernels& backend, const float* v, std::int64_t round, Scaling scaling,
              std::vector<std::byte>& packet);
  /// Bytes every packet of this compressor takes (the most, for the varint-indexed kinds).
  std::size_t packet_bytes() const;

 private:
  void encode_quantized(GossipKernels& backend, const float* v, std::int64_t round,
                        std::vector<std::byte>& packet);
  void encode_top_k(std::span<const float> v, std::int64_t round, std::vector<std::byte>& packet);
  void fill_sparse(std::span<const float> v, float scale, std::int64_t round,
                   std::vector<std::byte>& packet);
  void encode_random_k(std::span<const float> v, std::int64_t round, Scaling scaling,
                       std::vector<std::byte>& packet);
  void encode_quantized(std::span<const float> v, std::int64_t round,
                        std::vector<std::byte>& packet);

  CompressConfig config_;
  WireFormat wire_;
  std::int64_t n_;
  std::int64_t k_;
  std::uint64_t key_;                 // derive_seed(seed, peer, kCompress)
  std::vector<std::uint32_t> index_;  // scratch: the coordinates kept
  std::vector<std::uint32_t> magnitude_;       // scratch: top_k's |v| as bits
  std::vector<std::uint32_t> select_scratch_;  // scratch: top_k's radix select
  std::vector<char> taken_;           // scratch: random_k's draws
  std::vector<float> host_v_;         // scratch: v downloaded from a device backend (selection)
  std::vector<float> dct_;            // scratch: dct_top_k's coefficients
  std::vector<std::int8_t> codes8_;   // scratch: 4-bit codes before packing
  std::vector<float> kept_;           // scratch: the values kept, before narrowing
  std::vector<std::uint16_t> halves_; // scratch: and narrowed
  GossipKernels* backend_ = nullptr;  // the backend of the arrays below (set on first use)
  DeviceArray<float> scales_;         // device backends: GossipKernels::quantize's block scales
  DeviceArray<std::int8_t> codes_;    // device backends: and its codes
};

/// DeMo's transform (Peng et al. 2024, arXiv 2411.19870): the orthonormal DCT-II of each chunk of
/// kDctChunk coordinates (the last chunk shorter where n is not a multiple), y = C x, so that
/// dct_top_k keeps the largest coefficients of the chunks' frequencies; idct_chunks is its
/// inverse, x = C^T y. Sums in double; the two spans have equal lengths and do not overlap.
inline constexpr std::int64_t kDctChunk = 64;
void dct_chunks(std::span<const float> x, std::span<float> y);
void idct_chunks(std::span<const float> y, std::span<float> x);

/// A dense packet of `values`, coordinates first .. first + values.size() - 1 (an all-reduce
/// chunk, or CHOCO without compression), the values in format `wire` (rounded to 16 bits for
/// bf16 and fp16: dense_kind(wire)). Returns false when a finite value became ±inf (an fp16
/// overflow; the caller says which: wire_overflow).
bool encode_dense(std::span<const float> values, std::int64_t first,
                  std::vector<std::byte>& packet, WireFormat wire = WireFormat::kFp32);

/// A dense packet of the n floats at `values` in `device`'s memory (first = 0): encode_dense of
/// them, downloaded straight into the packet.
void encode_dense(Device& device, const float* values, std::int64_t n,
                  std::vector<std::byte>& packet);

/// target[i] += weight * Q[i] for every coordinate the packet carries. The packet must have
/// passed check_packet for target.size().
void add_packet(std::span<const std::byte> packet, float weight, std::span<float> target);

/// add_packet for a target in a backend's memory (CHOCO's sum and public copy), bit-identical to
/// it: the element math runs as GossipKernels::add_weighted (dense), scatter_add (sparse) and
/// dequantize_add (quantized). Only the packet's payload goes to a device (values; indices and
/// values; scales and codes, 4-bit codes unpacked to a byte each on the host first); a
/// host-memory backend reads the packet where it lies (copying only what is not aligned for its
/// type). Not thread-safe (it keeps staging space).
class PacketAdder {
 public:
  PacketAdder(GossipKernels& backend, std::int64_t n);
  /// target[i] += weight * Q[i] for every coordinate the packet carries; `target` is n floats of
  /// the backend's memory. The packet must have passed check_packet for n.
  void add(std::span<const std::byte> packet, float weight, float* target);

 private:
  template <typename T>
  const T* on_backend(const std::byte* at, std::size_t count, DeviceArray<T>& staging);

  GossipKernels* backend_;
  std::int64_t n_;
  DeviceArray<float> values_;            // staging: dense or sparse values
  DeviceArray<std::uint32_t> index_;     // staging: sparse indices
  DeviceArray<float> scales_;            // staging: quantized block scales
  DeviceArray<std::int8_t> codes_;       // staging: quantized codes
  std::vector<std::int8_t> unpacked_;    // 4-bit codes, one per byte
  std::vector<float> widened_;           // 16-bit values, widened on the host
  std::vector<std::uint32_t> indices_;   // varint-coded sparse indices, decoded on the host
};

/// target[i] = Q[i] for the coordinates a dense packet (of any dense kind) carries (all-reduce's
/// all-gather).
void copy_packet(std::span<const std::byte> packet, std::span<float> target);
/// The vector of n floats a packet stands for (zero where it carries nothing).
std::vector<float> decode_packet(std::span<const std::byte> packet, std::int64_t n);

}  // namespace gossip
