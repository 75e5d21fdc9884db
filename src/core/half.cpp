// core/half.cpp: the CPU loops over gossip/half.hpp's conversions, one per format so that the
// format is decided once per buffer and the loop body is the inline function alone (branch-free
// enough for the compiler to vectorize; avx2 where the processor has it).
#include "gossip/half.hpp"

#include <algorithm>

#include "gossip/core.hpp"

namespace gossip {
namespace {

template <WireFormat W>
[[gnu::always_inline]] inline bool narrow_body(const float* in, std::uint16_t* out,
                                               std::size_t n) {
  constexpr std::uint32_t kInf = W == WireFormat::kFp16 ? 0x7c00u : 0x7f80u;
  std::uint32_t overflow = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = math::narrow(in[i], W);
    out[i] = h;
    // Infinity out of a finite float: the format could not hold it.
    overflow |= static_cast<std::uint32_t>((h & 0x7fffu) == kInf) &
                static_cast<std::uint32_t>((math::float_bits(in[i]) & 0x7f800000u) != 0x7f800000u);
  }
  return overflow == 0;
}

template <WireFormat W>
[[gnu::always_inline]] inline bool widen_body(const std::uint16_t* in, float* out,
                                              std::size_t n) {
  constexpr std::uint32_t kExp = W == WireFormat::kFp16 ? 0x7c00u : 0x7f80u;
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = math::widen(in[i], W);
    bad |= static_cast<std::uint32_t>((in[i] & kExp) == kExp);  // inf or NaN
  }
  return bad == 0;
}

template <WireFormat W>
[[gnu::always_inline]] inline bool round_body(const float* in, float* out, std::size_t n) {
  constexpr std::uint32_t kInf = W == WireFormat::kFp16 ? 0x7c00u : 0x7f80u;
  std::uint32_t overflow = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const std::uint16_t h = math::narrow(x, W);
    overflow |= static_cast<std::uint32_t>((h & 0x7fffu) == kInf) &
                static_cast<std::uint32_t>((math::float_bits(x) & 0x7f800000u) != 0x7f800000u);
    out[i] = math::widen(h, W);
  }
  return overflow == 0;
}

// One function per format and direction (multiversioned functions cannot be templates).
__attribute__((target_clones("avx2", "default"))) bool narrow_bf16(const float* in,
                                                                   std::uint16_t* out,
                                                                   std::size_t n) {
  return narrow_body<WireFormat::kBf16>(in, out, n);
}
__attribute__((target_clones("avx2", "default"))) bool narrow_fp16(const float* in,
                                                                   std::uint16_t* out,
                                                                   std::size_t n) {
  return narrow_body<WireFormat::kFp16>(in, out, n);
}
__attribute__((target_clones("avx2", "default"))) bool widen_bf16(const std::uint16_t* in,
                                                                  float* out, std::size_t n) {
  return widen_body<WireFormat::kBf16>(in, out, n);
}
__attribute__((target_clones("avx2", "default"))) bool widen_fp16(const std::uint16_t* in,
                                                                  float* out, std::size_t n) {
  return widen_body<WireFormat::kFp16>(in, out, n);
}
// in may be out (in place).
__attribute__((target_clones("avx2", "default"))) bool round_bf16(const float* in, float* out,
                                                                  std::size_t n) {
  return round_body<WireFormat::kBf16>(in, out, n);
}
__attribute__((target_clones("avx2", "default"))) bool round_fp16(const float* in, float* out,
                                                                  std::size_t n) {
  return round_body<WireFormat::kFp16>(in, out, n);
}

void check_half(WireFormat w, std::size_t in, std::size_t out) {
  GOSSIP_CHECK_MSG(w != WireFormat::kFp32, "a half-width conversion asked for fp32");
  GOSSIP_CHECK_EQ(in, out);
}

}  // namespace

bool narrow_to_wire(std::span<const float> in, WireFormat w, std::span<std::uint16_t> out) {
  check_half(w, in.size(), out.size());
  return w == WireFormat::kFp16 ? narrow_fp16(in.data(), out.data(), in.size())
                                : narrow_bf16(in.data(), out.data(), in.size());
}

bool widen_from_wire(std::span<const std::uint16_t> in, WireFormat w, std::span<float> out) {
  check_half(w, in.size(), out.size());
  return w == WireFormat::kFp16 ? widen_fp16(in.data(), out.data(), in.size())
                                : widen_bf16(in.data(), out.data(), in.size());
}

bool round_to_wire(std::span<float> x, WireFormat w) { return round_to_wire(x, w, x); }

bool round_to_wire(std::span<const float> in, WireFormat w, std::span<float> out) {
  GOSSIP_CHECK_EQ(in.size(), out.size());
  if (w == WireFormat::kFp32) {
    if (in.data() != out.data()) std::copy(in.begin(), in.end(), out.begin());
    return true;
  }
  return w == WireFormat::kFp16 ? round_fp16(in.data(), out.data(), in.size())
                                : round_bf16(in.data(), out.data(), in.size());
}

std::size_t first_overflow(std::span<const float> x, WireFormat w) {
  if (w == WireFormat::kFp32) return x.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint16_t h = math::narrow(x[i], w);
    const bool inf = (h & 0x7fffu) == (w == WireFormat::kFp16 ? 0x7c00u : 0x7f80u);
    if (inf && (math::float_bits(x[i]) & 0x7f800000u) != 0x7f800000u) return i;
  }
  return x.size();
}

std::string wire_overflow(std::span<const float> x, WireFormat w, std::int64_t round) {
  const std::size_t i = first_overflow(x, w);
  const bool fp16 = w == WireFormat::kFp16;
  return cat("gossip.wire ", wire_format_name(w), ": parameter ", i, " of round ", round, " is ",
             i < x.size() ? x[i] : 0.0f, ", beyond ", wire_format_name(w),
             "'s largest finite value ", fp16 ? "65504" : "3.3895e+38",
             " (it would travel as inf, which neighbours refuse)",
             fp16 ? "; use gossip.wire: bf16, which has float32's range" : "");
}

}  // namespace gossip
