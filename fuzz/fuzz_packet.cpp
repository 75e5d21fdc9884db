// fuzz/fuzz_packet.cpp: libFuzzer target for the packet decoder (src/wire/packet.cpp), every kind
// (dense at float32, bf16 and fp16, sparse with u32 indices or varint gaps, quantized): any
// bytes against a model of the size the packet claims and against a fixed one. No crash, no
// allocation from a size the packet gives (scripts/fuzz.sh caps malloc), every refusal says why,
// and a packet that is accepted can be read whole — every coordinate it names inside the model,
// every value, scale and code what check_packet promised — as the algorithms read it.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "gossip/packet.hpp"

namespace {

using namespace gossip;

constexpr std::int64_t kModel = 1300;           // a fixed model: over two quantization blocks
constexpr std::int64_t kLargestModel = 1 << 16;  // bounds the target vector this allocates

/// The model size the packet's header implies (1 when it implies none we would allocate for).
std::int64_t claimed_model(std::span<const std::byte> p) {
  if (p.size() < kPacketHeaderBytes) return 1;
  const PacketHeader h = packet_header(p);
  std::uint64_t n = 1;
  if (h.kind == PacketKind::kSparse || is_sparse_half(h.kind)) n = h.first;
  if (h.kind == PacketKind::kQuantized) n = h.count;
  if (is_dense(h.kind)) n = h.first + h.count;
  return n >= 1 && n <= kLargestModel ? static_cast<std::int64_t>(n) : 1;
}

void require(bool ok) {
  if (!ok) std::abort();
}

/// Reads an accepted packet for n floats whole, adding it to a vector of n as add_packet does.
void read_all(std::span<const std::byte> p, std::int64_t n) {
  const PacketHeader h = packet_header(p);
  const std::byte* body = p.data() + kPacketHeaderBytes;
  std::vector<float> target(static_cast<std::size_t>(n), 0.0f);
  switch (h.kind) {
    case PacketKind::kDense:
      require(h.first + h.count <= static_cast<std::uint64_t>(n));
      for (std::uint32_t j = 0; j < h.count; ++j) target.at(h.first + j) += packet_f32(body + j * 4);
      require(dense_range(p).count == h.count);
      break;
    case PacketKind::kDenseBf16:
    case PacketKind::kDenseFp16:
      require(h.first + h.count <= static_cast<std::uint64_t>(n));
      for (std::uint32_t j = 0; j < h.count; ++j)
        target.at(h.first + j) += math::widen(packet_u16(body + j * 2), dense_format(h.kind));
      require(dense_range(p).count == h.count);
      break;
    case PacketKind::kSparse:
      for (std::uint32_t j = 0; j < h.count; ++j)
        target.at(packet_u32(body + j * 4)) += packet_f32(body + (h.count + j) * 4);
      break;
    case PacketKind::kSparseBf16:
    case PacketKind::kSparseFp16: {  // the gaps fill the index area exactly, then the values
      GapReader gaps(p);
      for (std::uint32_t j = 0; j < h.count; ++j) {
        std::int64_t index = 0;
        require(gaps.next(index));
        target.at(static_cast<std::size_t>(index)) +=
            math::widen(packet_u16(gaps.values() + j * 2), sparse_format(h.kind));
      }
      require(gaps.left() == 0);
      break;
    }
    case PacketKind::kQuantized: {
      const int least = h.bits == 4 ? -7 : -127;
      const std::byte* codes = body + quantize_blocks(n) * 4;
      for (std::int64_t i = 0; i < n; ++i) {
        const int code = packet_code(codes, h.bits, i);
        require(code >= least && code <= -least);
        target.at(i) += static_cast<float>(code) * packet_f32(body + (i / kQuantizeBlock) * 4);
      }
      break;
    }
    default:
      std::abort();  // check_packet accepted an unknown kind
  }
  // Dense and sparse values are finite, each coordinate named once; a code times its scale may
  // still overflow a float (add_weighted's business, as for any sum).
  if (h.kind != PacketKind::kQuantized)
    for (float x : target) require(std::isfinite(x));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  for (const std::int64_t n : {kModel, claimed_model(bytes)}) {
    const std::string why = check_packet(bytes, n);
    if (!why.empty()) continue;
    read_all(bytes, n);
    // As an all-reduce chunk: accepted for the coordinates it carries, only when it is dense,
    // and only in its own wire format.
    const PacketRange r = dense_range(bytes);
    const auto wire = r.first >= 0 ? dense_format(packet_header(bytes).kind) : WireFormat::kFp32;
    require(check_chunk(bytes, n, r.first, r.count, wire).empty() == (r.first >= 0));
    require(!check_chunk(bytes, n, r.first + 1, r.count, wire).empty());
    const auto other = wire == WireFormat::kBf16 ? WireFormat::kFp16 : WireFormat::kBf16;
    require(!check_chunk(bytes, n, r.first, r.count, other).empty());
  }
  if (size < kPacketHeaderBytes) require(!check_packet(bytes, kModel).empty());
  return 0;
}
