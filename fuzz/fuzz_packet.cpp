// fuzz/fuzz_packet.cpp: libFuzzer target for the packet decoder (src/wire/packet.cpp), every kind
// (dense at float32, bf16 and fp16, sparse with u32 indices or varint gaps, quantized): any
// bytes against a model of the size the packet claims and against a fixed one. No crash, no
// allocation from a size the packet gives (scripts/fuzz.sh caps malloc), every refusal says why,
// and a packet that is accepted can be read whole through PacketReader, the one reader the
// algorithms use — every coordinate it names inside the model, every value, scale and code what
// check_packet promised (a gap the reader cannot decode throws, which the fuzzer reports).
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

/// Reads an accepted packet for n floats whole through PacketReader, as the algorithms read it:
/// every coordinate it names inside the model and ascending, so named once (dense and sparse),
/// every value finite, every code within its levels.
void read_all(std::span<const std::byte> p, std::int64_t n) {
  const PacketReader r(p, n);
  std::vector<float> target(static_cast<std::size_t>(n), 0.0f);
  if (r.quantized()) {
    require(r.count() == n && (r.bits() == 4 || r.bits() == 8));
    const int levels = r.bits() == 4 ? 7 : 127;
    for (std::int64_t i = 0; i < n; ++i) {
      const int code = r.code(i);
      require(code >= -levels && code <= levels);
      const float scale = r.scale(i / kQuantizeBlock);
      require(std::isfinite(scale) && scale >= 0);
      target.at(static_cast<std::size_t>(i)) += static_cast<float>(code) * scale;
    }
    return;  // a code times its scale may overflow a float: add_weighted's business, as any sum
  }
  require(r.dense() != r.sparse());
  std::int64_t seen = 0, last = -1;
  r.for_each([&](std::int64_t i, float q) {
    require(i > last);  // ascending, so each coordinate once
    last = i;
    require(std::isfinite(q));
    target.at(static_cast<std::size_t>(i)) += q;
    ++seen;
  });
  require(seen == r.count());
  if (r.dense()) require(dense_range(p).first == r.first() && dense_range(p).count == r.count());
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
