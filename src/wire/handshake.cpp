// wire/handshake.cpp: the hello payload, written with Cereal's binary archive (the only place in
// src/net that uses Cereal), and the checks that decide whether a peer may join.
//
// Every field is fixed-width (integers, f64) or a u32 length and that many bytes; lengths are
// checked against their limit and the bytes left before anything is allocated, so hostile input
// cannot make us reserve gigabytes. The archive writes host byte order: the codec asserts a
// little-endian host, which docs/wire.md requires.
#include <bit>
#include <charconv>
#include <cmath>
#include <istream>
#include <sstream>
#include <streambuf>

#include <cereal/archives/binary.hpp>

#include "gossip/core.hpp"
#include "src/wire/span_buf.hpp"
#include "gossip/wire.hpp"

namespace gossip::wire {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; big-endian hosts are not supported");

/// Thrown inside decode_hello only, and turned into a Decoded error there.
struct Refused {
  std::string why;
};

std::uint32_t read_length(cereal::BinaryInputArchive& ar, const SpanBuf& buf, std::size_t limit,
                          std::size_t elem_bytes, const char* what) {
  std::uint32_t n = 0;
  ar(n);
  if (n > limit) throw Refused{cat(what, " of ", n, " exceeds the limit of ", limit)};
  if (static_cast<std::uint64_t>(n) * elem_bytes > buf.left())
    throw Refused{cat("truncated handshake: ", what, " of ", n, " needs ",
                      static_cast<std::uint64_t>(n) * elem_bytes, " bytes, ", buf.left(),
                      " left")};
  return n;
}

/// A name's bytes after its u32 length (at most kMaxNameBytes, checked before allocating).
std::string read_name(cereal::BinaryInputArchive& ar, const SpanBuf& buf, const char* what) {
  std::string name(read_length(ar, buf, kMaxNameBytes, 1, what), '\0');
  ar(cereal::binary_data(name.data(), name.size()));
  return name;
}

void write_name(cereal::BinaryOutputArchive& ar, const std::string& name) {
  ar(static_cast<std::uint32_t>(name.size()));
  ar(cereal::binary_data(name.data(), name.size()));
}

void write_settings(cereal::BinaryOutputArchive& ar, const GossipSettings& s) {
  write_name(ar, s.algorithm);
  write_name(ar, s.compressor);
  ar(s.fraction, s.bits, s.consensus_step, s.gossip_steps, s.fragments);
}

GossipSettings read_settings(cereal::BinaryInputArchive& ar, const SpanBuf& buf) {
  GossipSettings s;
  s.algorithm = read_name(ar, buf, "gossip.algorithm length");
  s.compressor = read_name(ar, buf, "gossip.choco.compress.kind length");
  ar(s.fraction, s.bits, s.consensus_step, s.gossip_steps, s.fragments);
  if (auto why = check_gossip_settings(s); !why.empty()) throw Refused{std::move(why)};
  return s;
}

std::string check_name(const std::string& name, const char* field) {
  if (name.size() > kMaxNameBytes)
    return cat(field, " of ", name.size(), " bytes exceeds the limit of ", kMaxNameBytes);
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if ((c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_')
      return cat(field, " has byte ", int{static_cast<unsigned char>(c)}, " at offset ", i,
                 ", outside a-z, 0-9 and _");
  }
  return {};
}

/// The shortest text that reads back as `v` (0.1, not 0.10000000000000001), so two values that
/// differ never print alike.
std::string number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return {buf, r.ptr};
}

std::string differ(const char* field, const std::string& theirs, const std::string& ours) {
  return cat(field, " ", theirs, " != ours ", ours, " (must be the same on every peer of a run)");
}

std::string quoted(const std::string& s) { return cat("'", s, "'"); }

/// The first field of the gossip settings that differs, with both values; "" when none does.
std::string settings_refusal(const GossipSettings& ours, const GossipSettings& theirs) {
  if (theirs.algorithm != ours.algorithm)
    return differ("gossip.algorithm", quoted(theirs.algorithm), quoted(ours.algorithm));
  if (theirs.compressor != ours.compressor)
    return differ("the compressor (gossip.choco.compress or gossip.outer.compress)",
                  quoted(theirs.compressor), quoted(ours.compressor));
  if (theirs.fraction != ours.fraction)
    return differ("the compressor's fraction", number(theirs.fraction), number(ours.fraction));
  if (theirs.bits != ours.bits)
    return differ("the compressor's bits", cat(theirs.bits), cat(ours.bits));
  if (theirs.consensus_step != ours.consensus_step)
    return differ("gossip.choco.consensus_step", number(theirs.consensus_step),
                  number(ours.consensus_step));
  if (theirs.gossip_steps != ours.gossip_steps)
    return differ("gossip.choco.gossip_steps", cat(theirs.gossip_steps), cat(ours.gossip_steps));
  if (theirs.fragments != ours.fragments)
    return differ("gossip.outer.fragments", cat(theirs.fragments), cat(ours.fragments));
  return {};
}

}  // namespace

std::string check_gossip_settings(const GossipSettings& s) {
  if (auto why = check_name(s.algorithm, "gossip.algorithm"); !why.empty()) return why;
  if (auto why = check_name(s.compressor, "gossip.choco.compress.kind"); !why.empty()) return why;
  if (!std::isfinite(s.fraction))
    return cat("gossip.choco.compress.fraction ", s.fraction, " is not a finite number");
  if (!std::isfinite(s.consensus_step))
    return cat("gossip.choco.consensus_step ", s.consensus_step, " is not a finite number");
  return {};
}

std::vector<std::byte> encode_hello(const Hello& hello) {
  GOSSIP_CHECK_LE(hello.info.run_id.size(), kMaxRunIdBytes);
  GOSSIP_CHECK_LE(hello.info.model.size(), kMaxModelBytes);
  GOSSIP_CHECK_EQ(check_gossip_settings(hello.info.gossip), "");
  std::ostringstream os;
  {
    cereal::BinaryOutputArchive ar(os);
    ar(hello.protocol_version, hello.rank);
    ar(static_cast<std::uint32_t>(hello.info.run_id.size()));
    ar(cereal::binary_data(hello.info.run_id.data(), hello.info.run_id.size()));
    ar(static_cast<std::uint32_t>(hello.info.model.size()));
    ar(cereal::binary_data(hello.info.model.data(), hello.info.model.size()));
    ar(hello.info.param_count, hello.info.topology_fingerprint);
    ar(static_cast<std::uint8_t>(hello.info.wire));
    write_settings(ar, hello.info.gossip);
    ar(static_cast<std::uint8_t>(hello.shm.has_value()));
    if (const auto& o = hello.shm) ar(o->host_key, o->pid, o->fd, o->token, o->bytes, o->slots);
  }
  const std::string s = os.str();
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

Decoded<Hello> decode_hello(std::span<const std::byte> bytes) {
  SpanBuf buf(bytes);
  std::istream is(&buf);
  Hello h;
  try {
    cereal::BinaryInputArchive ar(is);
    ar(h.protocol_version, h.rank);
    const std::uint32_t id_len = read_length(ar, buf, kMaxRunIdBytes, 1, "run id length");
    h.info.run_id.resize(id_len);
    ar(cereal::binary_data(h.info.run_id.data(), id_len));
    const std::uint32_t model_len = read_length(ar, buf, kMaxModelBytes, 1, "model fingerprint length");
    h.info.model.resize(model_len);
    ar(cereal::binary_data(h.info.model.data(), model_len));
    ar(h.info.param_count, h.info.topology_fingerprint);
    std::uint8_t wire = 0;
    ar(wire);
    if (wire > static_cast<std::uint8_t>(WireFormat::kFp16))
      throw Refused{cat("wire format ", int{wire}, " is not 0 (fp32), 1 (bf16) or 2 (fp16)")};
    h.info.wire = static_cast<WireFormat>(wire);
    h.info.gossip = read_settings(ar, buf);
    std::uint8_t has_shm = 0;
    ar(has_shm);
    if (has_shm > 1) throw Refused{cat("shared-memory flag ", int{has_shm}, " is not 0 or 1")};
    if (has_shm) {
      ShmOffer o;
      ar(o.host_key, o.pid, o.fd, o.token, o.bytes, o.slots);
      h.shm = o;
    }
  } catch (const Refused& r) {
    return {{}, r.why};
  } catch (const cereal::Exception&) {
    return {{}, cat("truncated handshake: ", bytes.size(), " bytes")};
  }
  if (buf.left() != 0) return {{}, cat("handshake has ", buf.left(), " trailing bytes")};
  return {std::move(h), {}};
}

std::string describe_model(const HandshakeInfo& info) {
  return cat(info.model.empty() ? std::string("(no layers)") : info.model, " (", info.param_count,
             " params)");
}

std::optional<Refusal> refusal_of(const Hello& ours, const Hello& theirs) {
  if (theirs.protocol_version != ours.protocol_version)
    return Refusal{RefusalKind::kVersion, cat("protocol version ", theirs.protocol_version,
                                              " != ours ", ours.protocol_version)};
  if (theirs.info.run_id != ours.info.run_id)
    return Refusal{RefusalKind::kRunId,
                   cat("run id '", theirs.info.run_id, "' != ours '", ours.info.run_id, "'")};
  if (theirs.info.model != ours.info.model ||
      theirs.info.param_count != ours.info.param_count)
    return Refusal{RefusalKind::kModel, cat("model fingerprint ", describe_model(theirs.info),
                                            " != ours ", describe_model(ours.info))};
  if (theirs.info.topology_fingerprint != ours.info.topology_fingerprint)
    return Refusal{RefusalKind::kTopology,
                   cat("topology fingerprint ", theirs.info.topology_fingerprint, " != ours ",
                       ours.info.topology_fingerprint)};
  if (theirs.info.wire != ours.info.wire)
    return Refusal{RefusalKind::kWire,
                   cat("wire format ", wire_format_name(theirs.info.wire), " != ours ",
                       wire_format_name(ours.info.wire),
                       " (gossip.wire must be the same on every peer of a run)")};
  if (auto why = settings_refusal(ours.info.gossip, theirs.info.gossip); !why.empty())
    return Refusal{RefusalKind::kSettings, std::move(why)};
  return std::nullopt;
}

std::vector<std::byte> encode_refusal(const Refusal& refusal) {
  std::vector<std::byte> out;
  out.reserve(1 + refusal.text.size());
  out.push_back(static_cast<std::byte>(refusal.kind));
  const auto text = std::as_bytes(std::span(refusal.text));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

Refusal decode_refusal(std::span<const std::byte> payload, std::size_t max_text) {
  Refusal out;
  if (payload.empty()) return out;
  const auto kind = std::to_integer<std::size_t>(payload[0]);
  if (kind < refusal_table().size()) out.kind = static_cast<RefusalKind>(kind);
  for (std::byte b : payload.subspan(1, std::min(payload.size() - 1, max_text))) {
    const auto c = std::to_integer<unsigned char>(b);
    out.text += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
  }
  return out;
}

}  // namespace gossip::wire
