// gossip/compress.cpp: top_k, random_k and quantize, and the packets they fill (layout and checks
// in gossip/packet.hpp, src/wire/packet.cpp). Per-element arithmetic is gossip/compress_math.hpp's:
// on host vectors in the loops here (the reference), on backend vectors through the backend's
// gossip kernels (CPU loops, CUDA kernels). What only this file does is selection
// (which coordinates) and packing.
#include "gossip/compress.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "gossip/compress_math.hpp"
#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "gossip/rng.hpp"

namespace gossip {

namespace {

/// The key of (peer stream, round): one counter-based stream per round.
std::uint64_t round_key(std::uint64_t key, std::int64_t round) {
  return mix64(key ^ mix64(static_cast<std::uint64_t>(round)));
}

}  // namespace

Compressor::Compressor(const CompressConfig& config, std::int64_t n, std::uint64_t seed, int peer,
                       WireFormat wire)
    : config_(config), wire_(wire), n_(n), k_(n),
      key_(derive_seed(seed, static_cast<std::uint64_t>(peer), Stream::kCompress)) {
  GOSSIP_CHECK_GT(n, 0);
  GOSSIP_CHECK_LE(n, static_cast<std::int64_t>(UINT32_MAX));
  if (config.sparse()) {
    if (!(config.fraction > 0.0 && config.fraction <= 1.0))
      throw InputError(
          cat("gossip.choco.compress.fraction: must be in (0, 1], got ", config.fraction));
    k_ = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::ceil(config.fraction * static_cast<double>(n) - 1e-9)), 1,
        n);
  } else if (config.kind == CompressKind::kQuantize) {
    if (config.bits != 4 && config.bits != 8)
      throw InputError(cat("gossip.choco.compress.bits: must be 4 or 8, got ", config.bits));
  }
  if (wire != WireFormat::kFp32 && !traits(config.kind).halves)
    throw InputError(cat("gossip.wire: ", wire_halves_refusal(wire, config.kind)));
}

std::size_t Compressor::packet_bytes() const {
  switch (config_.kind) {
    case CompressKind::kQuantize: return quantized_packet_bytes(n_, config_.bits);
    case CompressKind::kNone: return kPacketHeaderBytes + static_cast<std::size_t>(n_) * 4;
    case CompressKind::kTopK:
    case CompressKind::kRandomK:
    case CompressKind::kDctTopK: break;
  }
  return sparse_packet_bytes(k_, wire_);
}

void Compressor::encode(std::span<const float> v, std::int64_t round, Scaling scaling,
                        std::vector<std::byte>& packet) {
  GOSSIP_CHECK_EQ(static_cast<std::int64_t>(v.size()), n_);
  switch (config_.kind) {
    case CompressKind::kTopK: return encode_top_k(v, round, packet);
    case CompressKind::kRandomK: return encode_random_k(v, round, scaling, packet);
    case CompressKind::kQuantize: return encode_quantized(v, round, packet);
    case CompressKind::kDctTopK:  // top_k of the chunks' DCT coefficients
      dct_.resize(v.size());
      dct_chunks(v, dct_);
      return encode_top_k(dct_, round, packet);
    case CompressKind::kNone: break;
  }
  encode_dense(v, 0, packet);
}

// A sparse packet of the coordinates in index_ (ascending) with values v[index] * scale: kind 2
// (u32 indices, f32 values) at fp32; at bf16 and fp16 kind 6 or 7 (varint gaps, 16-bit values).
void Compressor::fill_sparse(std::span<const float> v, float scale, std::int64_t round,
                             std::vector<std::byte>& packet) {
  const std::size_t k = index_.size();
  packet.resize(sparse_packet_bytes(static_cast<std::int64_t>(k), wire_));
  put_packet_header({sparse_kind(wire_), 0, static_cast<std::uint32_t>(k),
                     static_cast<std::uint64_t>(v.size())},
                    packet.data());
  std::byte* body = packet.data() + kPacketHeaderBytes;
  const auto value = [&](std::size_t j) {
    return scale == 1.0f ? v[index_[j]] : v[index_[j]] * scale;
  };
  if (wire_ == WireFormat::kFp32) {
    std::memcpy(body, index_.data(), k * 4);
    for (std::size_t j = 0; j < k; ++j) {
      const float x = value(j);
      std::memcpy(body + k * 4 + j * 4, &x, 4);
    }
    return;
  }
  std::size_t at = 0;
  std::int64_t before = -1;
  for (std::size_t j = 0; j < k; ++j) {
    at += put_varint(static_cast<std::uint32_t>(index_[j] - before - 1), body + at);
    before = index_[j];
  }
  kept_.resize(k);
  halves_.resize(k);
  for (std::size_t j = 0; j < k; ++j) kept_[j] = value(j);
  if (!narrow_to_wire(kept_, wire_, halves_))
    throw RuntimeError(wire_overflow(kept_, wire_, round));
  std::memcpy(body + at, halves_.data(), k * 2);
  packet.resize(kPacketHeaderBytes + at + k * 2);
}

// The k largest |v_i|, ties to the lower index: a strict order, so the set does not depend on
// the selection algorithm. The k-th largest magnitude comes from a radix select on the bits of
// |v_i| (for floats that are not NaN, |a| < |b| exactly when bits(|a|) < bits(|b|) as unsigned
// integers): a histogram of the top 11 bits finds the bucket holding the k-th largest, the
// entries of that bucket go through the next 11 bits, and then the last 10. Three short passes
// where nth_element moved entries about (2.4 ms for the MLP's 235,146 entries against 0.3 ms).
// The select also gives how many entries equal the threshold are to be taken, so one ascending
// pass takes every coordinate above it and that many equal to it, lowest index first.
namespace {

struct Threshold {
  std::uint32_t bits = 0;  // of the k-th largest magnitude
  std::int64_t ties = 0;   // entries equal to it among the k largest
};

/// The k-th largest (1 <= k <= size) of `bits`, and how many of the k largest equal it.
Threshold kth_largest(std::span<const std::uint32_t> bits, std::int64_t k,
                      std::vector<std::uint32_t>& scratch) {
  constexpr int kShift[] = {21, 10, 0};
  constexpr std::uint32_t kMask[] = {0x7ff, 0x7ff, 0x3ff};
  std::span<const std::uint32_t> from = bits;
  std::uint32_t prefix = 0;  // the bits chosen so far, in place
  for (int level = 0; level < 3; ++level) {
    std::int64_t count[2048] = {};
    const int shift = kShift[level];
    const std::uint32_t mask = kMask[level];
    for (std::uint32_t b : from) ++count[(b >> shift) & mask];
    std::uint32_t bucket = mask;
    while (count[bucket] < k) k -= count[bucket--];  // k-th largest is in `bucket`
    prefix |= bucket << shift;
    if (level == 2) return Threshold{prefix, k};
    // Keep the entries of that bucket (they agree with `prefix` on every bit chosen so far).
    const std::uint32_t high = ~((1u << shift) - 1u);
    std::size_t kept = 0;
    if (level == 0) scratch.resize(from.size());
    for (std::uint32_t b : from)
      if ((b & high) == prefix) scratch[kept++] = b;
    from = std::span<const std::uint32_t>(scratch.data(), kept);
  }
  return {};  // not reached
}

}  // namespace

void Compressor::encode_top_k(std::span<const float> v, std::int64_t round,
                              std::vector<std::byte>& packet) {
  index_.clear();
  if (k_ >= n_) {
    for (std::int64_t i = 0; i < n_; ++i) index_.push_back(static_cast<std::uint32_t>(i));
  } else {
    magnitude_.resize(static_cast<std::size_t>(n_));
    for (std::int64_t i = 0; i < n_; ++i)
      magnitude_[i] = std::bit_cast<std::uint32_t>(std::fabs(v[i]));
    const Threshold t = kth_largest(magnitude_, k_, select_scratch_);
    std::int64_t ties = t.ties;
    for (std::int64_t i = 0; i < n_; ++i) {
      const std::uint32_t m = magnitude_[i];
      if (m > t.bits || (m == t.bits && ties-- > 0))
        index_.push_back(static_cast<std::uint32_t>(i));
    }
  }
  GOSSIP_CHECK_EQ(std::ssize(index_), k_);
  fill_sparse(v, 1.0f, round, packet);
}

// k distinct coordinates by Floyd's algorithm from (seed, peer, round), sorted.
void Compressor::encode_random_k(std::span<const float> v, std::int64_t round, Scaling scaling,
                                 std::vector<std::byte>& packet) {
  std::mt19937_64 rng(round_key(key_, round));
  taken_.assign(static_cast<std::size_t>(n_), 0);
  index_.clear();
  for (std::int64_t j = n_ - k_; j < n_; ++j) {
    auto t = static_cast<std::int64_t>(uniform_below(rng, static_cast<std::uint64_t>(j + 1)));
    if (taken_[t]) t = j;
    taken_[t] = 1;
    index_.push_back(static_cast<std::uint32_t>(t));
  }
  std::sort(index_.begin(), index_.end());
  const float scale = scaling == Scaling::kUnbiased
                          ? static_cast<float>(static_cast<double>(n_) / static_cast<double>(k_))
                          : 1.0f;
  fill_sparse(v, scale, round, packet);
}

void Compressor::encode_quantized(std::span<const float> v, std::int64_t round,
                                  std::vector<std::byte>& packet) {
  const int bits = config_.bits;
  const int levels = math::quantize_levels(bits);
  const std::int64_t blocks = quantize_blocks(n_);
  packet.assign(quantized_packet_bytes(n_, bits), std::byte{0});
  put_packet_header({PacketKind::kQuantized, static_cast<std::uint8_t>(bits),
              static_cast<std::uint32_t>(n_), 0},
             packet.data());
  std::byte* scales = packet.data() + kPacketHeaderBytes;
  std::byte* codes = scales + blocks * 4;
  const std::uint64_t key = round_key(key_, round);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t lo = b * kQuantizeBlock, hi = std::min(n_, lo + kQuantizeBlock);
    float scale = 0.0f;
    for (std::int64_t i = lo; i < hi; ++i) scale = math::max_magnitude(scale, v[i]);
    std::memcpy(scales + b * 4, &scale, 4);
    for (std::int64_t i = lo; i < hi; ++i) {
      const int c = math::quantize_code(v[i], scale, levels, math::uniform_at(key, i));
      if (bits == 8) {
        codes[i] = static_cast<std::byte>(static_cast<std::uint8_t>(static_cast<std::int8_t>(c)));
      } else {
        const auto nibble = static_cast<std::uint8_t>(c + 8);
        codes[i / 2] |= static_cast<std::byte>(i % 2 == 0 ? nibble : nibble << 4);
      }
    }
  }
}

// ---- on vectors in a backend's memory ------------------------------------------------------

namespace {

/// Packs n 4-bit codes (-7..7) as code + 8, two to a byte, low nibble first, into `out` (zeroed).
void pack_nibbles(const std::int8_t* codes, std::int64_t n, std::byte* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto nibble = static_cast<std::uint8_t>(codes[i] + 8);
    out[i / 2] |= static_cast<std::byte>(i % 2 == 0 ? nibble : nibble << 4);
  }
}

}  // namespace

void Compressor::encode(GossipKernels& backend, const float* v, std::int64_t round, Scaling scaling,
                        std::vector<std::byte>& packet) {
  if (config_.kind == CompressKind::kQuantize) return encode_quantized(backend, v, round, packet);
  if (config_.kind == CompressKind::kNone) return encode_dense(backend, v, n_, packet);
  // top_k, random_k and dct_top_k: selection (and dct_top_k's transform), on the host.
  const auto n = static_cast<std::size_t>(n_);
  if (backend.host_memory()) return encode(std::span<const float>(v, n), round, scaling, packet);
  host_v_.resize(n);
  backend.download(host_v_.data(), v, n * sizeof(float));
  encode(host_v_, round, scaling, packet);
}

void Compressor::encode_quantized(GossipKernels& backend, const float* v, std::int64_t round,
                                  std::vector<std::byte>& packet) {
  const int bits = config_.bits;
  const std::int64_t blocks = quantize_blocks(n_);
  const auto n = static_cast<std::size_t>(n_);
  packet.assign(quantized_packet_bytes(n_, bits), std::byte{0});
  put_packet_header({PacketKind::kQuantized, static_cast<std::uint8_t>(bits),
              static_cast<std::uint32_t>(n_), 0},
             packet.data());
  std::byte* scales = packet.data() + kPacketHeaderBytes;  // 4-aligned: the header is 16 bytes
  std::byte* codes = scales + blocks * 4;
  const std::uint64_t key = round_key(key_, round);
  if (bits == 4) codes8_.resize(n);
  if (backend.host_memory()) {
    // Straight into the packet: the scales, and 8-bit codes (int8, as the packet keeps them).
    backend.quantize(v, n_, bits, kQuantizeBlock, key, reinterpret_cast<float*>(scales),
                     bits == 8 ? reinterpret_cast<std::int8_t*>(codes) : codes8_.data());
  } else {
    if (backend_ == nullptr) {
      backend_ = &backend;
      scales_ = DeviceArray<float>(backend, static_cast<std::size_t>(blocks));
      codes_ = DeviceArray<std::int8_t>(backend, n);
    }
    GOSSIP_CHECK_MSG(backend_ == &backend, "Compressor::encode: another backend than before");
    backend.quantize(v, n_, bits, kQuantizeBlock, key, scales_.data(), codes_.data());
    backend.download(scales, scales_.data(), static_cast<std::size_t>(blocks) * sizeof(float));
    backend.download(bits == 8 ? static_cast<void*>(codes) : codes8_.data(), codes_.data(), n);
  }
  if (bits == 4) pack_nibbles(codes8_.data(), n_, codes);
}

void encode_dense(Device& device, const float* values, std::int64_t n,
                  std::vector<std::byte>& packet) {
  packet.resize(kPacketHeaderBytes + static_cast<std::size_t>(n) * sizeof(float));
  put_packet_header({PacketKind::kDense, 0, static_cast<std::uint32_t>(n), 0}, packet.data());
  if (n > 0)
    device.download(packet.data() + kPacketHeaderBytes, values,
                     static_cast<std::size_t>(n) * sizeof(float));
}

PacketAdder::PacketAdder(GossipKernels& backend, std::int64_t n) : backend_(&backend), n_(n) {}

template <typename T>
const T* PacketAdder::on_backend(const std::byte* at, std::size_t count,
                                 DeviceArray<T>& staging) {
  if (backend_->host_memory() && reinterpret_cast<std::uintptr_t>(at) % alignof(T) == 0)
    return reinterpret_cast<const T*>(at);
  if (staging.size() < count) staging = DeviceArray<T>(*backend_, count);
  backend_->upload(staging.data(), at, count * sizeof(T));
  return staging.data();
}

void PacketAdder::add(std::span<const std::byte> p, float weight, float* target) {
  const PacketReader r(p, n_);
  const auto count = static_cast<std::size_t>(r.count());
  if (count == 0) return;
  if (r.quantized()) {
    const float* scales = on_backend(r.scales(), static_cast<std::size_t>(r.blocks()), scales_);
    const std::byte* codes = r.codes();
    if (r.bits() == 4) {  // one code a byte for the backend
      unpacked_.resize(count);
      for (std::size_t i = 0; i < count; ++i) unpacked_[i] = static_cast<std::int8_t>(r.code(i));
      codes = reinterpret_cast<const std::byte*>(unpacked_.data());
    }
    backend_->dequantize_add(target, weight, scales, on_backend(codes, count, codes_), n_,
                             kQuantizeBlock, r.bits());
    return;
  }
  // The values as float32: where they lie (fp32), else widened on the host.
  const std::byte* values = r.values();
  if (r.format() != WireFormat::kFp32) {
    widened_.resize(count);
    for (std::size_t j = 0; j < count; ++j) widened_[j] = r.value(j);
    values = reinterpret_cast<const std::byte*>(widened_.data());
  }
  if (r.dense()) {
    backend_->add_weighted(target + r.first(), weight, on_backend(values, count, values_),
                           r.count());
    return;
  }
  // Sparse: u32 indices where they lie (kind 2), else the gaps decoded on the host.
  const std::byte* indices = r.indices();
  if (indices == nullptr) {
    indices_.resize(count);
    r.for_each_index([&](std::int64_t j, std::int64_t i) {
      indices_[j] = static_cast<std::uint32_t>(i);
    });
    indices = reinterpret_cast<const std::byte*>(indices_.data());
  }
  backend_->scatter_add(target, weight, on_backend(indices, count, index_),
                        on_backend(values, count, values_), r.count());
}

// ---- packets on the host --------------------------------------------------------------------

bool encode_dense(std::span<const float> values, std::int64_t first,
                  std::vector<std::byte>& packet, WireFormat wire) {
  packet.resize(kPacketHeaderBytes + values.size() * wire_value_bytes(wire));
  put_packet_header({dense_kind(wire), 0, static_cast<std::uint32_t>(values.size()),
                     static_cast<std::uint64_t>(first)},
                    packet.data());
  if (values.empty()) return true;
  if (wire == WireFormat::kFp32) {
    std::memcpy(packet.data() + kPacketHeaderBytes, values.data(), values.size_bytes());
    return true;
  }
  thread_local std::vector<std::uint16_t> halves;
  halves.resize(values.size());
  const bool ok = narrow_to_wire(values, wire, halves);
  std::memcpy(packet.data() + kPacketHeaderBytes, halves.data(), halves.size() * 2);
  return ok;
}

void add_packet(std::span<const std::byte> p, float weight, std::span<float> target) {
  const PacketReader r(p, static_cast<std::int64_t>(target.size()));
  if (!r.quantized()) {
    r.for_each([&](std::int64_t i, float q) {
      target[i] = math::add_weighted(target[i], weight, q);
    });
    return;
  }
  const auto n = static_cast<std::int64_t>(target.size());
  const int levels = math::quantize_levels(r.bits());
  for (std::int64_t b = 0; b < r.blocks(); ++b) {
    const float scale = r.scale(b);
    if (scale == 0.0f) continue;  // every code of the block is 0
    const std::int64_t lo = b * kQuantizeBlock, hi = std::min(n, lo + kQuantizeBlock);
    for (std::int64_t i = lo; i < hi; ++i)
      target[i] = math::add_weighted(target[i], weight, math::dequantize(r.code(i), scale, levels));
  }
}

void copy_packet(std::span<const std::byte> p, std::span<float> target) {
  const PacketReader r(p, static_cast<std::int64_t>(target.size()));
  GOSSIP_CHECK_MSG(r.dense(), "copy_packet: not a dense packet");
  if (r.format() == WireFormat::kFp32) {
    std::memcpy(target.data() + r.first(), r.values(), static_cast<std::size_t>(r.count()) * 4);
    return;
  }
  r.for_each([&](std::int64_t i, float q) { target[i] = q; });
}

std::vector<float> decode_packet(std::span<const std::byte> packet, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n), 0.0f);
  add_packet(packet, 1.0f, out);
  return out;
}

}  // namespace gossip
