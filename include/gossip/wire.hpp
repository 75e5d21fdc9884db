/// wire: the pure wire codec — CRC32C, frame headers, the handshake. No Asio and no I/O, so
/// tests and the fuzz targets (fuzz/) call these directly. docs/wire.md describes the layout.
/// Decoders never throw on bad input: they return why the bytes were refused.
#pragma once
#if !defined(GOSSIP_ROOM_WIRE)
#error "gossip/wire.hpp belongs to room wire, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossip/exchange.hpp"
#include "gossip/half.hpp"

namespace gossip {

/// What the peers' frames mean and how many exchanges make a round: gossip.algorithm and, for an
/// algorithm that compresses (choco), gossip.compress, consensus_step and gossip_steps. Every
/// field must be equal on both sides; a field the algorithm does not take is 0 or "" on every
/// peer (all but the algorithm for dpsgd; fraction unless top_k or random_k, bits unless
/// quantize), so it compares equal. The names are the config's own tokens ("choco", "top_k"),
/// not codes: the wire room does not know the algorithm table, a code would change meaning when
/// a row is added, and a refusal can print them as they are; they are compared, never parsed.
struct GossipSettings {
  std::string algorithm;           // gossip.algorithm, e.g. "dpsgd", "choco"
  std::string compressor;          // gossip.compress.kind: "none", "top_k", "random_k", "quantize"
  double fraction = 0.0;           // gossip.compress.fraction (top_k, random_k)
  std::uint32_t bits = 0;          // gossip.compress.bits (quantize: 4 or 8)
  double consensus_step = 0.0;     // choco's gamma, its default filled in when not given
  std::uint32_t gossip_steps = 0;  // gossip.gossip_steps: compressed exchanges a round
  std::uint32_t fragments = 0;     // gossip.outer.fragments when above 1 (Streaming DiLoCo)
  bool operator==(const GossipSettings&) const = default;
};

/// What two peers must agree on before they talk (the rank and protocol version are added by
/// NetExchange).
struct HandshakeInfo {
  std::string run_id;                       // same for every peer of one run
  std::string model;                        // model fingerprint: the layer list, e.g. "784-128-10"
  std::uint64_t param_count = 0;            // floats in the flat parameter buffer
  std::uint64_t topology_fingerprint = 0;   // hash of the graph, computed by the topology module
  WireFormat wire = WireFormat::kFp32;      // how params frames carry the values (gossip.wire)
  GossipSettings gossip;                    // what the frames mean (gossip.algorithm, ...)
  bool operator==(const HandshakeInfo&) const = default;
};

}  // namespace gossip

namespace gossip::wire {

inline constexpr std::uint32_t kMagic = 0x50495347;  // bytes "GSIP" on the wire
inline constexpr std::uint16_t kVersion = 15;        // frame layout and handshake version
inline constexpr std::size_t kHeaderBytes = 32;
inline constexpr std::size_t kWeightBytes = 8;       // params payload starts with an f64 weight
inline constexpr std::uint64_t kMaxControlPayload = 64 * 1024;  // hello, ack, error, bye
inline constexpr std::size_t kMaxRunIdBytes = 256;
inline constexpr std::size_t kMaxModelBytes = 16 * 1024;  // the model fingerprint's length
inline constexpr std::size_t kMaxNameBytes = 32;  // gossip.algorithm's and compressor's names

enum class FrameType : std::uint16_t {
  kHello = 1,     // dialler -> acceptor: Hello
  kHelloAck = 2,  // acceptor -> dialler: Hello (the acceptor's own)
  kParams = 3,    // f64 push-sum weight, then param_count values (f32, or bf16 / fp16)
  kBye = 4,       // empty: the sender is leaving on purpose
  kError = 5,     // UTF-8 reason; the sender closes after it
  kShmReady = 6,  // empty: "I have mapped your shared segment; announce params, do not send them"
  kShmParams = 7, // ShmNote: your params for this round are in your segment's slot (same host)
  kView = 8,      // the sender's membership view (encode_view), ahead of its round's params
  kPacket = 9,    // an algorithm's packet (gossip/packet.hpp): compressed params, a chunk
  kReady = 10,    // empty: the sender has collected round `round - 1` and now waits for `round`
  kAnnounce = 11, // the membership changes the sender knows (encode_announcements)
  kAddress = 12,  // a member's signed address record (encode_address_record), passed on
};
inline constexpr std::uint16_t kLastFrameType = 12;
/// The largest round a ready frame may name (a peer one round ahead holds round + 1 for it).
inline constexpr std::int64_t kMaxReadyRound = std::int64_t{1} << 53;

/// Name for log lines ("hello", "params", ...; "type 9" for unknown ones).
std::string frame_type_name(std::uint16_t type);

struct FrameHeader {
  FrameType type = FrameType::kBye;
  std::uint32_t sender = 0;
  std::int64_t round = 0;
  std::uint64_t payload_bytes = 0;
  std::uint32_t payload_crc = 0;
};

/// CRC32C (Castagnoli, reflected 0x82F63B78). Chains: crc32c(b, crc32c(a)) is the
/// CRC of a followed by b. crc32c("123456789") == 0xE3069283.
/// Uses the SSE4.2 crc32 instruction where the processor has it, else crc32c_portable.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);
/// crc32c over floats that also says whether every one is finite (no NaN or Inf), in the same
/// pass over memory: what a receiver needs to know about a params payload.
std::uint32_t crc32c_floats(std::span<const float> floats, std::uint32_t crc, bool* all_finite);
/// Whether every float is finite (no NaN or Inf): crc32c_floats' check alone, for a payload
/// whose bytes an AEAD record already authenticated (no CRC to compute).
bool all_finite(std::span<const float> floats);
/// The table (slicing-by-8) version, for processors without SSE4.2.
std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0);
/// The same, bit by bit: the plain reference the tests compare the fast path against.
std::uint32_t crc32c_reference(std::span<const std::byte> data, std::uint32_t crc = 0);

using HeaderBytes = std::array<std::byte, kHeaderBytes>;

HeaderBytes encode_header(const FrameHeader& header);

template <typename T>
struct Decoded {
  std::optional<T> value;
  std::string error;  // why the input was refused, when !value
  explicit operator bool() const { return value.has_value(); }
};

/// Checks magic, version, type, and size (the whole frame at most `max_frame_bytes`; control
/// frames at most kMaxControlPayload; params the weight plus whole values of the link's format
/// `wire`) before anything is allocated.
Decoded<FrameHeader> decode_header(std::span<const std::byte> bytes,
                                   std::uint64_t max_frame_bytes,
                                   WireFormat wire = WireFormat::kFp32);

/// Empty when `computed` (the payload's CRC32C) matches the header, else the reason.
/// "" when a params payload holds a model: every float finite and the push-sum weight a positive
/// finite number; else why not. A peer whose frames pass the CRC can still send NaN or Inf
/// (a bug, or a lie about its model); mixing that in would poison every model downstream.
std::string check_param_values(std::span<const float> params, double weight, std::int64_t round);
std::string check_crc(const FrameHeader& header, std::uint32_t computed);
/// Empty when the payload has the header's length and CRC, else the reason.
std::string check_payload(const FrameHeader& header, std::span<const std::byte> payload);

/// One whole frame: header plus payload, e.g. for control frames and tests.
std::vector<std::byte> encode_frame(FrameType type, std::uint32_t sender, std::int64_t round,
                                    std::span<const std::byte> payload);

struct Frame {
  FrameHeader header;
  std::span<const std::byte> payload;  // points into the decoded input
};

/// Decodes exactly one frame from `bytes` (trailing bytes are an error); params in format `wire`.
Decoded<Frame> decode_frame(std::span<const std::byte> bytes, std::uint64_t max_frame_bytes,
                            WireFormat wire = WireFormat::kFp32);

/// Records (docs/wire.md, "Records"): past its hello (the dialler's bytes) or hello-ack (the
/// acceptor's), a TLS connection carries records that the peers seal themselves with keys
/// exported from the TLS session: plaintext length u32 | AEAD tag (16 bytes) | ciphertext of that
/// length. A frame's bytes may span records; a record holds at most kMaxRecordBytes.
inline constexpr std::size_t kRecordHeaderBytes = 20;
inline constexpr std::size_t kRecordTagBytes = 16;
inline constexpr std::uint32_t kMaxRecordBytes = 256 * 1024;
using RecordHeader = std::array<std::byte, kRecordHeaderBytes>;
/// The header of a record of `length` plaintext bytes, its tag left zero (the sealer's to fill).
RecordHeader encode_record_header(std::uint32_t length);
/// The plaintext length a record header announces: refused when 0 or over kMaxRecordBytes,
/// before anything is allocated or read for it. (The tag is checked when the record is opened.)
Decoded<std::uint32_t> decode_record_length(std::span<const std::byte> header);

/// Bytes of a params payload of `param_count` values in format `wire`: the weight, then 4 or 2
/// bytes a value.
std::uint64_t params_payload_bytes(std::uint64_t param_count, WireFormat wire);
/// A params payload: the weight, then `params` in format `wire` (narrowed to 16 bits for bf16
/// and fp16). Peers write the same bytes straight from their buffers; this is for tests and the
/// fuzz target.
std::vector<std::byte> encode_params(std::span<const float> params, double weight,
                                     WireFormat wire);
/// A received run of half-width values (bf16 or fp16): their CRC32C continued from `crc`, and
/// the values widened into `out` (as many), noting whether every one is finite; crc32c_floats'
/// counterpart for a link whose gossip.wire is bf16 or fp16.
std::uint32_t crc32c_widen(std::span<const std::uint16_t> values, WireFormat wire,
                           std::span<float> out, std::uint32_t crc, bool* all_finite);
/// A whole params payload of out.size() values in format `wire`: the push-sum weight, and the
/// values (widened) in `out`. Refuses a payload of another length, a NaN or Inf value and a
/// weight that is not a positive finite number, saying which (check_param_values). `round` is
/// for the message.
Decoded<double> decode_params(std::span<const std::byte> payload, WireFormat wire,
                              std::span<float> out, std::int64_t round);

/// A peer's offer, in its handshake, to let same-host neighbours read its published parameters
/// straight from its memory: a sealed memfd that a process in the same boot, pid, mount and
/// network namespaces opens as /proc/PID/fd/FD. `token` is random and repeated in the segment's
/// own header, so a reader knows it opened the segment that was offered.
struct ShmOffer {
  std::uint64_t host_key = 0;  // net::host_key() of the offering process
  std::uint32_t pid = 0;
  std::uint32_t fd = 0;
  std::uint64_t token = 0;
  std::uint64_t bytes = 0;     // size of the whole segment
  std::uint32_t slots = 0;     // parameter slots, reused round-robin
  bool operator==(const ShmOffer&) const = default;
};

/// The handshake payload of hello and hello-ack frames.
struct Hello {
  std::uint32_t protocol_version = kVersion;
  std::int32_t rank = -1;
  HandshakeInfo info;
  std::optional<ShmOffer> shm;  // absent when the peer offers no shared memory
};

/// The payload of a shm-params frame: the sender wrote its parameters for the frame's round into
/// slot `slot` of its segment and finished the write with sequence number `seq` (even). The
/// floats carry no CRC: they never leave the host's memory, and a torn read is caught by `seq`.
struct ShmNote {
  std::uint32_t slot = 0;
  std::uint64_t seq = 0;
  double weight = 1.0;  // push-sum weight
};
inline constexpr std::size_t kShmNoteBytes = 32;
std::vector<std::byte> encode_shm_note(const ShmNote& note);
/// Refuses a payload that is not exactly kShmNoteBytes long, or an odd (unfinished) sequence.
Decoded<ShmNote> decode_shm_note(std::span<const std::byte> bytes);

/// A membership view on the wire: u32 peer count, then per peer a u32 incarnation and a u8 state
/// (0 alive, 1 suspected, 2 dead), little-endian; then, only when it carries probes (indirect
/// ping-req and their acks, see Probe), a u16 count (1 to kMaxProbes) and per probe a u8 kind
/// (0 request, 1 ack), a u8 ttl (1 to kMaxProbeTtl), u32 origin, u32 target and u32 nonce.
inline constexpr std::size_t kMaxProbes = gossip::kMaxProbesPerView;
inline constexpr std::size_t kProbeBytes = 14;
using gossip::kMaxProbeTtl;
std::vector<std::byte> encode_view(std::span<const Member> view, std::span<const Probe> probes = {});
/// Refuses a payload whose length does not match its counts, a count above `max_peers`, an
/// unknown state, or a probe naming a peer outside the view (PeerView::peer is left -1).
Decoded<PeerView> decode_view(std::span<const std::byte> bytes, std::size_t max_peers);

/// An elastic run's membership announcements on the wire: a u16 count (1 to kMaxAnnouncements),
/// then per announcement a u32 rank, a u8 kind (0 join, 1 leave, 2 dead, 3 join request) and an
/// i64 round,
/// little-endian.
inline constexpr std::size_t kAnnouncementBytes = 13;
std::vector<std::byte> encode_announcements(std::span<const Announcement> announcements);
/// Refuses a payload whose length does not match its count, a count of 0 or above
/// kMaxAnnouncements, an unknown kind, a rank at or above `max_peers`, or a round outside
/// 0..2^53.
Decoded<std::vector<Announcement>> decode_announcements(std::span<const std::byte> bytes,
                                                        std::size_t max_peers);

/// "" when `s` can travel in a hello: names of at most kMaxNameBytes bytes of a-z, 0-9 and _,
/// fraction and consensus step finite; else what is wrong, naming the field. decode_hello
/// refuses what this refuses; encode_hello and NetExchange check it of our own.
std::string check_gossip_settings(const GossipSettings& s);

std::vector<std::byte> encode_hello(const Hello& hello);
/// Refuses truncated input, trailing bytes, over-long run ids, layer lists or names, an unknown
/// wire format and gossip settings that check_gossip_settings refuses.
Decoded<Hello> decode_hello(std::span<const std::byte> bytes);

/// "784-128-10 (101770 params)"
std::string describe_model(const HandshakeInfo& info);

/// Why one end of a handshake refused the other, one row each: X(id, name, summary). The kind
/// travels in the error frame that says so (encode_refusal), so the refused end knows it
/// without reading the words.
#define GOSSIP_REFUSALS(X)                                                                      \
  X(kOther, "other", "a refusal of a kind this build does not know")                          \
  X(kMalformed, "malformed", "the handshake could not be decoded")                            \
  X(kVersion, "protocol version", "the two ends speak different protocol versions")           \
  X(kRunId, "run id", "the two ends belong to different runs")                                \
  X(kModel, "model fingerprint", "the two ends train models of another shape or size")         \
  X(kTopology, "topology fingerprint", "the two ends were given different topologies")         \
  X(kWire, "wire format", "gossip.wire differs")                                               \
  X(kSettings, "gossip settings", "a gossip setting every peer must share differs")            \
  X(kIdentity, "identity", "the rank claimed is not the certificate's or the one dialled, or "  \
    "that identity is connected already")                                                       \
  X(kMembership, "membership", "the rank is not in the run, is the refuser's own, or is not "   \
    "its neighbour")                                                                            \
  X(kDuplicate, "duplicate", "the link is up already (the lower rank's dial is the link)")

GOSSIP_NAMED_CHOICE(RefusalKind, GOSSIP_REFUSALS, refusal_table, refusal_name)

/// A handshake's refusal: its kind, and the words that name the field and both values.
struct Refusal {
  RefusalKind kind = RefusalKind::kOther;
  std::string text;
};

/// nullopt when a peer saying `theirs` may join a run where we say `ours`; else why not, naming
/// the field and both values, e.g.
/// {kModel, "model fingerprint 784-256-128-10 (235146 params) != ours 784-128-10 (101770
/// params)"} or {kSettings, "gossip.choco.consensus_step 0.05 != ours 0.1 (must be the same on
/// every peer of a run)"}. Checks protocol version, run id, model fingerprint, topology
/// fingerprint, wire format and each field of the gossip settings (ranks are the caller's
/// business: it knows who it expects).
std::optional<Refusal> refusal_of(const Hello& ours, const Hello& theirs);

/// An error frame's payload: the refusal's kind (one byte), then its text.
std::vector<std::byte> encode_refusal(const Refusal& refusal);
/// The refusal an error frame carries: a kind this build does not know is kOther, and the text
/// is made printable (at most `max_text` characters: a one-line log's).
Refusal decode_refusal(std::span<const std::byte> payload, std::size_t max_text = 300);

}  // namespace gossip::wire

namespace gossip::wire {

/// Rendezvous messages: what a connection to a peer's listening port says instead of TLS or a
/// hello when it asks the peer for a service rather than a link (docs/wire.md): to dial the
/// asker back at the address the run's configuration gives it (its reachability), or to relay
/// its link to another peer. Every message is kRendezvousBytes long, little-endian: the magic
/// (its first byte, 0xC7, is neither a TLS record's nor a frame's), u8 version, u8 kind, u8
/// status, u8 text length, u64 run tag (rendezvous_tag of the run id: a relay pairs only ends of
/// one run), u32 from, u32 to, u64 nonce, i64 time (ns since the epoch, the sender's clock),
/// then the text (UTF-8, up to kMaxRendezvousText bytes, zero-padded).
inline constexpr std::array<std::uint8_t, 4> kRendezvousMagic = {0xC7, 'R', 'D', 'V'};
inline constexpr std::uint8_t kRendezvousVersion = 1;
inline constexpr std::size_t kRendezvousBytes = 128;
inline constexpr std::size_t kMaxRendezvousText = kRendezvousBytes - 40;

enum class RendezvousKind : std::uint8_t {
  kDialBackAsk = 1,    // from: the asker's rank; nonce: what the dial back must carry
  kDialBackProbe = 2,  // the helper's dial back: nonce as asked (from: the helper's rank)
  kDialBackAnswer = 3, // to the asker: status ok (it dialled back) or failed; text: the address
                       // it dialled and, when failed, why
  kRelayAsk = 4,       // from, to: the ranks of the link to relay (from is the asker)
  kRelayAnswer = 5,    // status ok: the other end came and the bytes now pass through; else
                       // why not in text
  kAddressAsk = 6,     // "the members' addresses, please": nonce address frames follow (the
                       // asker's own signed record among them)
  kAddressAnswer = 7,  // status ok: nonce address frames follow (every record the member
                       // holds); else why not in text
};
inline constexpr std::uint8_t kLastRendezvousKind = 7;

/// kNotYet: the relay does not know yet whether it is reachable (ask it again); kAbsent: the
/// other end of the link did not ask for it in time.
enum class RendezvousStatus : std::uint8_t { kOk = 0, kFailed = 1, kNotYet = 2, kAbsent = 3 };
inline constexpr std::uint8_t kLastRendezvousStatus = 3;

struct Rendezvous {
  RendezvousKind kind = RendezvousKind::kDialBackAsk;
  RendezvousStatus status = RendezvousStatus::kOk;
  std::uint64_t run_tag = 0;
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  std::uint64_t nonce = 0;
  std::int64_t time_ns = 0;
  std::string text;  // cut to kMaxRendezvousText bytes by the encoder
  bool operator==(const Rendezvous&) const = default;
};

/// The run tag of `run_id` (the first 8 bytes of its SHA-256, little-endian).
std::uint64_t rendezvous_tag(const std::string& run_id);
/// Whether a connection's first byte is a rendezvous message's.
inline bool is_rendezvous_start(std::byte first) {
  return std::to_integer<std::uint8_t>(first) == kRendezvousMagic[0];
}
std::array<std::byte, kRendezvousBytes> encode_rendezvous(const Rendezvous& message);
/// Refuses a message that is not kRendezvousBytes long, a wrong magic or version, an unknown kind
/// or status, a text length beyond kMaxRendezvousText or padding that is not zero.
Decoded<Rendezvous> decode_rendezvous(std::span<const std::byte> bytes);

}  // namespace gossip::wire

namespace gossip::wire {

/// A signed address record, an address frame's payload: the address at which a member can be
/// dialled, as the member itself announces it, signed with the private key of its TLS
/// certificate; the certificate travels with it, so any member checks the record against the
/// run's CA and the identity the certificate names (src/net/address_book.cpp), whoever passed
/// it on. Layout, little-endian: the magic "GADR", u8 version (1), u8 zero, u16 address length,
/// u32 rank, u64 sequence (the signer's start, ns since the epoch: a newer record replaces an
/// older one), u16 certificate length, u16 signature length, then the address (host:port,
/// printable ASCII without spaces), the certificate (DER) and the signature.
inline constexpr std::array<std::uint8_t, 4> kAddressMagic = {'G', 'A', 'D', 'R'};
inline constexpr std::uint8_t kAddressVersion = 1;
inline constexpr std::size_t kAddressFixedBytes = 24;
inline constexpr std::size_t kMaxAddressBytes = 262;     // "[" 253-byte host "]:" 5 digits
inline constexpr std::size_t kMaxAddressCertBytes = 8192;
inline constexpr std::size_t kMaxAddressSignatureBytes = 512;

struct AddressRecord {
  std::uint32_t rank = 0;
  std::uint64_t sequence = 0;
  std::string address;
  std::vector<std::byte> certificate;  // DER
  std::vector<std::byte> signature;    // over address_record_message
  bool operator==(const AddressRecord&) const = default;
};

std::vector<std::byte> encode_address_record(const AddressRecord& record);
/// Refuses a wrong magic or version, lengths that do not add up to the input's or exceed the
/// limits above, an empty or non-printable address, an empty certificate or signature, and a
/// rank at or above `max_peers`. It checks no signature (that needs the CA: src/net).
Decoded<AddressRecord> decode_address_record(std::span<const std::byte> bytes,
                                             std::size_t max_peers);
/// What a record's signature covers: a context string, the run id, the rank, the sequence and
/// the address (so a record of one run, rank or address is no record of another).
std::vector<std::byte> address_record_message(const std::string& run_id,
                                              const AddressRecord& record);

}  // namespace gossip::wire
