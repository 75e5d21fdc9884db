/// half: parameters at half width on the wire (gossip.wire: bf16 | fp16). The conversions
/// between float32 and bfloat16 or IEEE 754 binary16, written once for host and device (DESIGN
/// idea 3, like gossip/math.hpp): round to nearest, ties to even; NaN stays a (quiet) NaN of the
/// same sign; a finite float beyond binary16's range (|x| >= 65520, halfway past its largest
/// finite value 65504) becomes ±inf, as the IEEE conversion does (bfloat16 has float32's range,
/// so only values within half a bfloat16 step of FLT_MAX round up to ±inf). Widening is exact.
/// The CPU runs them in the span loops at the end (src/core/half.cpp); a device kernel would call
/// the same functions per element. The part above the loops must stay compilable by nvcc's
/// C++17 mode.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/half.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <span>
#include <cstring>

#if !defined(GOSSIP_HD)  // the same definition as gossip/math.hpp's
#if defined(__CUDACC__)
#define GOSSIP_HD __host__ __device__ __forceinline__
#else
#define GOSSIP_HD inline
#endif
#endif

namespace gossip {

/// gossip.wire: how a full parameter message travels, one row each:
///   X(enum id, its number in the handshake, name, one line for docs and --help)
#define GOSSIP_WIRE_FORMATS(X)                                                                  \
  X(kFp32, 0, "fp32", "every value as float32, bit for bit")                                    \
  X(kBf16, 1, "bf16", "bfloat16: float32's range, 8 bits of mantissa; half the bytes")          \
  X(kFp16, 2, "fp16", "IEEE half: 11 bits of mantissa, range to 65504; half the bytes")

enum class WireFormat : std::uint8_t {
#define GOSSIP_WIRE_FORMAT_ENUM(id, number, ...) id = number,
  GOSSIP_WIRE_FORMATS(GOSSIP_WIRE_FORMAT_ENUM)
#undef GOSSIP_WIRE_FORMAT_ENUM
};

struct WireFormatRow {
  WireFormat kind;
  const char* name;
  const char* summary;
};
inline constexpr WireFormatRow kWireFormatTable[] = {
#define GOSSIP_WIRE_FORMAT_ROW(id, number, name, summary) {WireFormat::id, name, summary},
    GOSSIP_WIRE_FORMATS(GOSSIP_WIRE_FORMAT_ROW)
#undef GOSSIP_WIRE_FORMAT_ROW
};

/// Every format, in the order messages and docs list them.
inline std::span<const WireFormatRow> wire_format_table() { return kWireFormatTable; }

/// "fp32", "bf16", "fp16": the name in configs, --wire, log lines and reports.
inline const char* wire_format_name(WireFormat w) {
  for (const WireFormatRow& row : kWireFormatTable)
    if (row.kind == w) return row.name;
  return "unknown";  // not reached: every format has its row
}

/// Bytes one parameter takes on the wire: 4, or 2 at half width.
constexpr std::size_t wire_value_bytes(WireFormat w) { return w == WireFormat::kFp32 ? 4 : 2; }

}  // namespace gossip

namespace gossip::math {

/// The bits of a float, and the float of some bits.
GOSSIP_HD std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
#endif
}
GOSSIP_HD float bits_float(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, 4);
  return f;
#endif
}

/// float32 -> bfloat16 (its top 16 bits), round to nearest even; NaN stays NaN.
GOSSIP_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t b = float_bits(f);
  const std::uint32_t nan = (b >> 16) | 0x0040u;  // quiet, so that no NaN becomes infinity
  const std::uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/// bfloat16 -> float32, exact.
GOSSIP_HD float bf16_to_float(std::uint16_t h) { return bits_float(std::uint32_t{h} << 16); }

/// float32 -> IEEE binary16, round to nearest even; NaN stays NaN; |f| >= 65520 gives ±inf;
/// below 2^-14 the result is subnormal (steps of 2^-24), and below 2^-25 it is ±0. Every case is
/// computed and one is selected, so a loop over it vectorizes.
GOSSIP_HD std::uint16_t float_to_fp16(float f) {
  const std::uint32_t b = float_bits(f);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const std::uint32_t a = b & 0x7fffffffu;
  const std::uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  // Subnormal or zero: adding 0.5 puts the float's last bit at 2^-24, binary16's subnormal
  // step, so the addition itself rounds to nearest even; the low bits are then the result.
  const std::uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits.
  const std::uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  const std::uint32_t r = a > 0x7f800000u    ? nan
                          : a >= 0x477ff000u ? 0x7c00u  // 65520 and up: inf
                          : a < 0x38800000u  ? subnormal
                                             : normal;
  return static_cast<std::uint16_t>(sign | r);
}

/// IEEE binary16 -> float32, exact.
GOSSIP_HD float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const std::uint32_t subnormal = float_bits(static_cast<float>(m) * 5.9604644775390625e-8f);
  const std::uint32_t special = 0x7f800000u | (m << 13);  // inf, NaN
  const std::uint32_t normal = ((e + 112u) << 23) | (m << 13);
  return bits_float(sign | (e == 0 ? subnormal : e == 0x1fu ? special : normal));
}

/// `f` narrowed to the wire format's 16 bits (w is kBf16 or kFp16).
GOSSIP_HD std::uint16_t narrow(float f, WireFormat w) {
  return w == WireFormat::kFp16 ? float_to_fp16(f) : float_to_bf16(f);
}

/// The float a 16-bit wire value stands for (w is kBf16 or kFp16).
GOSSIP_HD float widen(std::uint16_t h, WireFormat w) {
  return w == WireFormat::kFp16 ? fp16_to_float(h) : bf16_to_float(h);
}

/// What a receiver holds of `f` sent in format w: f itself for kFp32.
GOSSIP_HD float round_to_wire(float f, WireFormat w) {
  return w == WireFormat::kFp32 ? f : widen(narrow(f, w), w);
}

}  // namespace gossip::math

#if !defined(__CUDACC__)
#include <span>
#include <string>

namespace gossip {

/// out[i] = narrow(in[i]) for a half-width format (kBf16, kFp16); the spans have one size.
/// Returns false when a finite value became ±inf (an fp16 overflow), true otherwise.
bool narrow_to_wire(std::span<const float> in, WireFormat w, std::span<std::uint16_t> out);
/// out[i] = widen(in[i]) (kBf16, kFp16); the spans have one size. Returns whether every value is
/// finite (the check a receiver makes), in the same pass.
bool widen_from_wire(std::span<const std::uint16_t> in, WireFormat w, std::span<float> out);
/// x[i] = round_to_wire(x[i]) in place: what a receiver of `x` holds (the simulator's message).
/// Returns false when a finite value became ±inf.
bool round_to_wire(std::span<float> x, WireFormat w);
/// out[i] = round_to_wire(in[i]): the copy and the rounding in one pass (the spans have one size;
/// they may be the same). Returns false when a finite value became ±inf.
bool round_to_wire(std::span<const float> in, WireFormat w, std::span<float> out);
/// The index of the first finite value of `x` that format w cannot hold (an fp16 overflow), or
/// x.size() when there is none: for the message that names it.
std::size_t first_overflow(std::span<const float> x, WireFormat w);
/// Why `x` cannot be sent for `round` in format w (a finite value would become ±inf): "gossip.wire
/// fp16: parameter 12 of round 3 is 70000, beyond fp16's largest finite value 65504 (...)".
/// What both transports throw, so a peer and the simulator stop alike.
std::string wire_overflow(std::span<const float> x, WireFormat w, std::int64_t round);

}  // namespace gossip
#endif
