// wire/frame.cpp: CRC32C and the frame header codec. Pure functions, no Asio, no allocation
// before a size has been checked — this is what fuzz/fuzz_frame.cpp exercises.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "gossip/core.hpp"
#include "gossip/wire.hpp"

namespace gossip::wire {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78;  // CRC32C, reflected

using Table = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Table make_tables() {
  Table t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}

constexpr Table kTables = make_tables();

template <typename T>
void put(std::byte* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* in) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(in[i])) << (8 * i);
  return static_cast<T>(v);
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

bool is_control(FrameType t) { return t != FrameType::kParams && t != FrameType::kPacket; }

}  // namespace

std::string frame_type_name(std::uint16_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello: return "hello";
    case FrameType::kHelloAck: return "hello-ack";
    case FrameType::kParams: return "params";
    case FrameType::kBye: return "bye";
    case FrameType::kError: return "error";
    case FrameType::kShmReady: return "shm-ready";
    case FrameType::kReady: return "ready";
    case FrameType::kShmParams: return "shm-params";
    case FrameType::kView: return "view";
    case FrameType::kPacket: return "packet";
    case FrameType::kAnnounce: return "announce";
    case FrameType::kAddress: return "address";
  }
  return cat("type ", type);
}

namespace {

// Whether `n` bytes of floats (a whole number of them) are all finite, one plain pass.
bool floats_finite(const std::byte* p, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i + 4 <= n; i += 4) {
    std::uint32_t bits;
    std::memcpy(&bits, p + i, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any == 0;
}

}  // namespace

bool all_finite(std::span<const float> floats) {
  const auto bytes = std::as_bytes(floats);
  return floats_finite(bytes.data(), bytes.size());
}

#if defined(__x86_64__)
namespace {

// The SSE4.2 crc32 instruction computes exactly CRC32C, 8 bytes per instruction: several times
// the table version's speed, which matters because every parameter frame (~1 MB) is checked on
// both ends.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42_raw(const std::byte* p,
                                                                 std::size_t n,
                                                                 std::uint32_t raw) {
  std::uint64_t c = raw;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, std::to_integer<std::uint8_t>(*p));
  return c32;
}

// a * b modulo the CRC polynomial, bit-reflected (as zlib's crc32_combine does it).
std::uint32_t multmodp(std::uint32_t a, std::uint32_t b) {
  std::uint32_t m = 1u << 31, prod = 0;
  for (;;) {
    if (a & m) {
      prod ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return prod;
}

// x^(8 * bytes) modulo the polynomial: what a CRC must be multiplied by to skip `bytes` bytes.
std::uint32_t shift_operator(std::uint64_t bytes) {
  std::uint32_t x2n = 1u << 30;  // x^1
  std::uint32_t p = 1u << 31;    // x^0
  std::uint64_t bits = bytes * 8;
  while (bits) {
    if (bits & 1) p = multmodp(x2n, p);
    bits >>= 1;
    x2n = multmodp(x2n, x2n);
  }
  return p;
}

// Non-zero when a 64-bit word holds a float whose exponent bits are all ones (Inf or NaN).
inline std::uint64_t nonfinite_pair(std::uint64_t w) {
  const std::uint64_t t = ~w & 0x7f8000007f800000ULL;
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(t) == 0) | ((t >> 32) == 0);
}

// Large buffers: three independent instruction chains over thirds of the buffer (the crc32
// instruction has a latency of three cycles but a throughput of one), joined by shifting the
// first two partial CRCs over the bytes that follow them. With kCheckFinite the same loop also
// notes Inf and NaN floats, so checking a received model costs no second pass over it.
template <bool kCheckFinite>
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(const std::byte* p, std::size_t n,
                                                             std::uint32_t crc,
                                                             bool* all_finite = nullptr) {
  std::uint32_t raw = ~crc;
  std::uint64_t bad = 0;
  constexpr std::size_t kMin = 3 * 4096;
  if (n >= kMin) {
    const std::size_t third = (n / 3) & ~std::size_t{7};
    std::uint64_t a = raw, b = 0, c = 0;
    const std::byte* pa = p;
    const std::byte* pb = p + third;
    const std::byte* pc = p + 2 * third;
    for (std::size_t i = 0; i < third; i += 8) {
      std::uint64_t wa, wb, wc;
      std::memcpy(&wa, pa + i, 8);
      std::memcpy(&wb, pb + i, 8);
      std::memcpy(&wc, pc + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
      if constexpr (kCheckFinite) bad |= nonfinite_pair(wa) | nonfinite_pair(wb) | nonfinite_pair(wc);
    }
    // Chunks of one size recur (every received chunk, every frame): remember the last operator.
    thread_local std::uint64_t op_bytes = 0;
    thread_local std::uint32_t op_value = 0;
    if (op_bytes != third) {
      op_value = shift_operator(third);
      op_bytes = third;
    }
    const std::uint32_t op = op_value;
    raw = multmodp(op, static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b);
    raw = multmodp(op, raw) ^ static_cast<std::uint32_t>(c);
    p += 3 * third;
    n -= 3 * third;
  }
  if constexpr (kCheckFinite) *all_finite = bad == 0 && floats_finite(p, n);
  return ~crc32c_sse42_raw(p, n, raw);
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}

}  // namespace
#endif

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) {
#if defined(__x86_64__)
  if (have_sse42()) return crc32c_sse42<false>(data.data(), data.size(), crc);
#endif
  return crc32c_portable(data, crc);
}

std::uint32_t crc32c_floats(std::span<const float> floats, std::uint32_t crc, bool* all_finite) {
  const auto bytes = std::as_bytes(floats);
#if defined(__x86_64__)
  if (have_sse42()) return crc32c_sse42<true>(bytes.data(), bytes.size(), crc, all_finite);
#endif
  *all_finite = floats_finite(bytes.data(), bytes.size());
  return crc32c_portable(bytes, crc);
}

std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc) {
  crc = ~crc;
  const std::byte* p = data.data();
  std::size_t n = data.size();
  while (n >= 8) {
    const std::uint32_t lo = get<std::uint32_t>(p) ^ crc;
    const std::uint32_t hi = get<std::uint32_t>(p + 4);
    crc = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
          kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  for (; n > 0; --n, ++p)
    crc = (crc >> 8) ^ kTables[0][(crc ^ std::to_integer<std::uint32_t>(*p)) & 0xff];
  return ~crc;
}

std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc) {
  crc = ~crc;
  for (std::byte b : data) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ kPoly : crc >> 1;
  }
  return ~crc;
}

// Layout (little-endian): magic u32 | version u16 | type u16 | sender u32 | payload crc u32 |
// round i64 | payload bytes u64.
HeaderBytes encode_header(const FrameHeader& h) {
  HeaderBytes out{};
  put<std::uint32_t>(&out[0], kMagic);
  put<std::uint16_t>(&out[4], kVersion);
  put<std::uint16_t>(&out[6], static_cast<std::uint16_t>(h.type));
  put<std::uint32_t>(&out[8], h.sender);
  put<std::uint32_t>(&out[12], h.payload_crc);
  put<std::uint64_t>(&out[16], static_cast<std::uint64_t>(h.round));
  put<std::uint64_t>(&out[24], h.payload_bytes);
  return out;
}

Decoded<FrameHeader> decode_header(std::span<const std::byte> bytes,
                                   std::uint64_t max_frame_bytes, WireFormat wire) {
  if (bytes.size() < kHeaderBytes)
    return {{}, cat("truncated frame: ", bytes.size(), " of ", kHeaderBytes, " header bytes")};
  const std::byte* p = bytes.data();
  if (const auto magic = get<std::uint32_t>(p); magic != kMagic)
    return {{}, cat("bad magic ", hex(magic), " (expected ", hex(kMagic), ")")};
  if (const auto version = get<std::uint16_t>(p + 4); version != kVersion)
    return {{}, cat("unsupported frame version ", version, " (ours is ", kVersion, ")")};
  const auto type = get<std::uint16_t>(p + 6);
  if (type < 1 || type > kLastFrameType) return {{}, cat("unknown frame type ", type)};

  FrameHeader h;
  h.type = static_cast<FrameType>(type);
  h.sender = get<std::uint32_t>(p + 8);
  h.payload_crc = get<std::uint32_t>(p + 12);
  h.round = static_cast<std::int64_t>(get<std::uint64_t>(p + 16));
  h.payload_bytes = get<std::uint64_t>(p + 24);

  const std::uint64_t limit = max_frame_bytes > kHeaderBytes ? max_frame_bytes - kHeaderBytes : 0;
  if (h.payload_bytes > limit)
    return {{}, cat("oversize frame: ", frame_type_name(type), " payload of ", h.payload_bytes,
                    " bytes exceeds the maximum frame of ", max_frame_bytes, " bytes")};
  if (is_control(h.type) && h.payload_bytes > kMaxControlPayload)
    return {{}, cat("oversize frame: ", frame_type_name(type), " payload of ", h.payload_bytes,
                    " bytes exceeds the control limit of ", kMaxControlPayload, " bytes")};
  if (h.type == FrameType::kParams &&
      (h.payload_bytes < kWeightBytes ||
       (h.payload_bytes - kWeightBytes) % wire_value_bytes(wire) != 0))
    return {{}, cat("malformed params frame: payload of ", h.payload_bytes,
                    " bytes is not an f64 weight plus whole ",
                    wire == WireFormat::kFp32 ? "f32s" : wire_format_name(wire), " values")};
  if ((h.type == FrameType::kBye || h.type == FrameType::kShmReady ||
       h.type == FrameType::kReady) &&
      h.payload_bytes != 0)
    return {{}, cat("malformed ", frame_type_name(type), " frame: payload of ", h.payload_bytes,
                    " bytes")};
  if (h.type == FrameType::kReady && (h.round < 1 || h.round > kMaxReadyRound))
    return {{}, cat("malformed ready frame: round ", h.round, " (expected 1 to ", kMaxReadyRound,
                    ")")};
  if (h.type == FrameType::kShmParams && h.payload_bytes != kShmNoteBytes)
    return {{}, cat("malformed shm-params frame: payload of ", h.payload_bytes, " bytes, expected ",
                    kShmNoteBytes)};
  return {h, {}};
}

RecordHeader encode_record_header(std::uint32_t length) {
  RecordHeader out{};
  put<std::uint32_t>(&out[0], length);
  return out;
}

Decoded<std::uint32_t> decode_record_length(std::span<const std::byte> header) {
  if (header.size() < kRecordHeaderBytes)
    return {{}, cat("truncated record: ", header.size(), " of ", kRecordHeaderBytes,
                    " header bytes")};
  const auto length = get<std::uint32_t>(header.data());
  if (length == 0 || length > kMaxRecordBytes)
    return {{}, cat("bad record: length ", length, " (expected 1 to ", kMaxRecordBytes,
                    " bytes; is the remote an older gossip, or not speaking our records?)")};
  return {length, {}};
}

std::string check_payload(const FrameHeader& header, std::span<const std::byte> payload) {
  if (payload.size() != header.payload_bytes)
    return cat("truncated frame: ", payload.size(), " of ", header.payload_bytes,
               " payload bytes");
  return check_crc(header, crc32c(payload));
}

std::string check_param_values(std::span<const float> params, double weight,
                               std::int64_t round) {
  if (!(std::isfinite(weight) && weight > 0.0))
    return cat("push-sum weight ", weight, " in round ", round,
               " is not a positive finite number");
  if (floats_finite(reinterpret_cast<const std::byte*>(params.data()), params.size_bytes()))
    return {};
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!std::isfinite(params[i]))
      return cat("parameter ", i, " of round ", round, " is ", params[i],
                 " (a peer must send finite values)");
  return {};
}

std::string check_crc(const FrameHeader& header, std::uint32_t computed) {
  if (computed == header.payload_crc) return {};
  return cat("bad CRC32C on ", frame_type_name(static_cast<std::uint16_t>(header.type)),
             " payload (round ", header.round, "): computed ", hex(computed), ", header says ",
             hex(header.payload_crc));
}

// Layout: slot u32 | reserved u32 (zero) | seq u64 | weight f64 | reserved u64 (zero).
std::vector<std::byte> encode_shm_note(const ShmNote& note) {
  std::vector<std::byte> out(kShmNoteBytes);
  put<std::uint32_t>(&out[0], note.slot);
  put<std::uint64_t>(&out[8], note.seq);
  put<std::uint64_t>(&out[16], std::bit_cast<std::uint64_t>(note.weight));
  return out;
}

Decoded<ShmNote> decode_shm_note(std::span<const std::byte> bytes) {
  if (bytes.size() != kShmNoteBytes)
    return {{}, cat("shm-params payload of ", bytes.size(), " bytes, expected ", kShmNoteBytes)};
  ShmNote n;
  n.slot = get<std::uint32_t>(&bytes[0]);
  n.seq = get<std::uint64_t>(&bytes[8]);
  n.weight = std::bit_cast<double>(get<std::uint64_t>(&bytes[16]));
  if (get<std::uint32_t>(&bytes[4]) != 0 || get<std::uint64_t>(&bytes[24]) != 0)
    return {{}, "shm-params: reserved bytes are not zero"};
  if (n.seq == 0 || n.seq % 2 != 0)
    return {{}, cat("shm-params: sequence ", n.seq, " is not that of a finished write")};
  return {n, {}};
}

std::vector<std::byte> encode_frame(FrameType type, std::uint32_t sender, std::int64_t round,
                                    std::span<const std::byte> payload) {
  FrameHeader h{type, sender, round, payload.size(), crc32c(payload)};
  const HeaderBytes head = encode_header(h);
  std::vector<std::byte> out(kHeaderBytes + payload.size());
  std::copy(head.begin(), head.end(), out.begin());
  std::copy(payload.begin(), payload.end(), out.begin() + kHeaderBytes);
  return out;
}

Decoded<Frame> decode_frame(std::span<const std::byte> bytes, std::uint64_t max_frame_bytes,
                            WireFormat wire) {
  auto head = decode_header(bytes, max_frame_bytes, wire);
  if (!head) return {{}, head.error};
  const std::span<const std::byte> rest = bytes.subspan(kHeaderBytes);
  if (rest.size() < head.value->payload_bytes)
    return {{}, cat("truncated frame: ", rest.size(), " of ", head.value->payload_bytes,
                    " payload bytes")};
  if (rest.size() > head.value->payload_bytes)
    return {{}, cat(rest.size() - head.value->payload_bytes, " trailing bytes after the frame")};
  if (auto why = check_payload(*head.value, rest); !why.empty()) return {{}, why};
  return {Frame{*head.value, rest}, {}};
}

// ---- params payloads ------------------------------------------------------------------------

std::uint64_t params_payload_bytes(std::uint64_t param_count, WireFormat wire) {
  return kWeightBytes + param_count * wire_value_bytes(wire);
}

std::vector<std::byte> encode_params(std::span<const float> params, double weight,
                                     WireFormat wire) {
  std::vector<std::byte> out(params_payload_bytes(params.size(), wire));
  std::memcpy(out.data(), &weight, kWeightBytes);
  if (wire == WireFormat::kFp32) {
    if (!params.empty()) std::memcpy(out.data() + kWeightBytes, params.data(), params.size_bytes());
    return out;
  }
  std::vector<std::uint16_t> values(params.size());
  narrow_to_wire(params, wire, values);
  if (!values.empty())
    std::memcpy(out.data() + kWeightBytes, values.data(), values.size() * sizeof(std::uint16_t));
  return out;
}

std::uint32_t crc32c_widen(std::span<const std::uint16_t> values, WireFormat wire,
                           std::span<float> out, std::uint32_t crc, bool* all_finite) {
  crc = crc32c(std::as_bytes(values), crc);
  *all_finite = widen_from_wire(values, wire, out);
  return crc;
}

Decoded<double> decode_params(std::span<const std::byte> payload, WireFormat wire,
                              std::span<float> out, std::int64_t round) {
  const std::uint64_t want = params_payload_bytes(out.size(), wire);
  if (payload.size() != want)
    return {{}, cat("params payload of ", payload.size(), " bytes, expected ", want, " (",
                    out.size(),
                    wire == WireFormat::kFp32 ? std::string(" floats")
                                              : cat(" ", wire_format_name(wire), " values"),
                    ")")};
  double weight;
  std::memcpy(&weight, payload.data(), kWeightBytes);
  const auto values = payload.subspan(kWeightBytes);
  bool finite = true;
  if (wire == WireFormat::kFp32) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), values.size());
    finite = floats_finite(values.data(), values.size());
  } else {
    // Copied out first: the payload need not be aligned for 16-bit reads.
    std::vector<std::uint16_t> halves(out.size());
    if (!halves.empty()) std::memcpy(halves.data(), values.data(), values.size());
    finite = widen_from_wire(halves, wire, out);
  }
  if (!finite || !(std::isfinite(weight) && weight > 0.0))
    return {{}, check_param_values(out, weight, round)};
  return {weight, {}};
}

}  // namespace gossip::wire

namespace gossip::wire {

std::vector<std::byte> encode_view(std::span<const Member> view, std::span<const Probe> probes) {
  GOSSIP_CHECK_MSG(probes.size() <= kMaxProbes, "view with ", probes.size(), " probes, at most ",
                   kMaxProbes);
  const std::size_t members = 4 + 5 * view.size();
  std::vector<std::byte> out(members + (probes.empty() ? 0 : 2 + kProbeBytes * probes.size()));
  put<std::uint32_t>(&out[0], static_cast<std::uint32_t>(view.size()));
  for (std::size_t i = 0; i < view.size(); ++i) {
    put<std::uint32_t>(&out[4 + 5 * i], view[i].incarnation);
    put<std::uint8_t>(&out[8 + 5 * i], static_cast<std::uint8_t>(view[i].state));
  }
  if (probes.empty()) return out;
  put<std::uint16_t>(&out[members], static_cast<std::uint16_t>(probes.size()));
  for (std::size_t i = 0; i < probes.size(); ++i) {
    std::byte* at = &out[members + 2 + kProbeBytes * i];
    put<std::uint8_t>(at, static_cast<std::uint8_t>(probes[i].kind));
    put<std::uint8_t>(at + 1, probes[i].ttl);
    put<std::uint32_t>(at + 2, probes[i].origin);
    put<std::uint32_t>(at + 6, probes[i].target);
    put<std::uint32_t>(at + 10, probes[i].nonce);
  }
  return out;
}

std::vector<std::byte> encode_announcements(std::span<const Announcement> announcements) {
  GOSSIP_CHECK_MSG(!announcements.empty() && announcements.size() <= kMaxAnnouncements,
                   "announce frame of ", announcements.size(), " announcements");
  std::vector<std::byte> out(2 + kAnnouncementBytes * announcements.size());
  put<std::uint16_t>(&out[0], static_cast<std::uint16_t>(announcements.size()));
  for (std::size_t i = 0; i < announcements.size(); ++i) {
    std::byte* at = &out[2 + kAnnouncementBytes * i];
    put<std::uint32_t>(at, static_cast<std::uint32_t>(announcements[i].rank));
    put<std::uint8_t>(at + 4, static_cast<std::uint8_t>(announcements[i].kind));
    put<std::int64_t>(at + 5, announcements[i].round);
  }
  return out;
}

Decoded<std::vector<Announcement>> decode_announcements(std::span<const std::byte> bytes,
                                                        std::size_t max_peers) {
  Decoded<std::vector<Announcement>> d;
  if (bytes.size() < 2) {
    d.error = cat("announce frame of ", bytes.size(), " bytes is shorter than its count");
    return d;
  }
  const std::size_t count = get<std::uint16_t>(bytes.data());
  if (count == 0 || count > kMaxAnnouncements) {
    d.error = cat("announce frame with ", count, " announcements (1 to ", kMaxAnnouncements, ")");
    return d;
  }
  if (bytes.size() != 2 + kAnnouncementBytes * count) {
    d.error = cat("announce frame of ", count, " announcements must be ",
                  2 + kAnnouncementBytes * count, " bytes, not ", bytes.size());
    return d;
  }
  std::vector<Announcement> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* at = &bytes[2 + kAnnouncementBytes * i];
    const std::uint32_t rank = get<std::uint32_t>(at);
    const std::uint8_t kind = get<std::uint8_t>(at + 4);
    const std::int64_t round = get<std::int64_t>(at + 5);
    if (rank >= max_peers) {
      d.error = cat("announcement ", i, " names rank ", rank, " of a run of ", max_peers);
      return d;
    }
    if (kind >= change_table().size()) {
      d.error = cat("announcement ", i, " has unknown kind ", static_cast<int>(kind));
      return d;
    }
    if (round < 0 || round > kMaxReadyRound) {
      d.error = cat("announcement ", i, " has round ", round, " outside 0..2^53");
      return d;
    }
    out[i] = Announcement{static_cast<std::int32_t>(rank), static_cast<ChangeKind>(kind), round};
  }
  d.value = std::move(out);
  return d;
}

Decoded<PeerView> decode_view(std::span<const std::byte> bytes, std::size_t max_peers) {
  Decoded<PeerView> d;
  if (bytes.size() < 4) {
    d.error = cat("view of ", bytes.size(), " bytes is shorter than its count");
    return d;
  }
  const std::uint32_t n = get<std::uint32_t>(bytes.data());
  if (n > max_peers) {
    d.error = cat("view of ", n, " peers, but the run has ", max_peers);
    return d;
  }
  const std::size_t members = 4 + 5 * static_cast<std::size_t>(n);
  if (bytes.size() < members || bytes.size() == members + 1) {
    d.error = cat("view of ", n, " peers must be ", members, " bytes (and its probes), not ",
                  bytes.size());
    return d;
  }
  PeerView view;
  view.members.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto state = get<std::uint8_t>(&bytes[8 + 5 * i]);
    if (state > static_cast<std::uint8_t>(MemberState::kDead)) {
      d.error = cat("view entry ", i, " has unknown state ", static_cast<int>(state));
      return d;
    }
    view.members[i] = Member{get<std::uint32_t>(&bytes[4 + 5 * i]), static_cast<MemberState>(state)};
  }
  if (bytes.size() > members) {
    const std::size_t count = get<std::uint16_t>(&bytes[members]);
    if (count == 0 || count > kMaxProbes) {
      d.error = cat("view carries ", count, " probes (1 to ", kMaxProbes, " when present)");
      return d;
    }
    if (bytes.size() != members + 2 + kProbeBytes * count) {
      d.error = cat("view of ", n, " peers with ", count, " probes must be ",
                    members + 2 + kProbeBytes * count, " bytes, not ", bytes.size());
      return d;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::byte* at = &bytes[members + 2 + kProbeBytes * i];
      Probe p{static_cast<ProbeKind>(get<std::uint8_t>(at)), get<std::uint8_t>(at + 1),
              get<std::uint32_t>(at + 2), get<std::uint32_t>(at + 6), get<std::uint32_t>(at + 10)};
      const auto kind = get<std::uint8_t>(at);
      if (kind > static_cast<std::uint8_t>(ProbeKind::kAck) || p.ttl == 0 ||
          p.ttl > kMaxProbeTtl || p.origin >= n || p.target >= n || p.origin == p.target) {
        d.error = cat("view probe ", i, " is malformed (kind ", static_cast<int>(kind), ", ttl ",
                      static_cast<int>(p.ttl), ", origin ", p.origin, ", target ", p.target,
                      ", of ", n, " peers)");
        return d;
      }
      view.probes.push_back(p);
    }
  }
  d.value = std::move(view);
  return d;
}

}  // namespace gossip::wire
