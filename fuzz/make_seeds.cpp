// fuzz/make_seeds.cpp: writes the frame and handshake seeds of fuzz/corpus/ through the codec
// itself (src/wire), so a protocol version or a hello field changes the seeds by rerunning
// `scripts/fuzz.sh --seeds`, not by editing bytes. The packet and checkpoint seeds carry no
// protocol version and are not written here (the packet frame's payload is the sparse_top_k seed).
// tests/test_net.cpp checks that every seed decodes at this version.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gossip/wire.hpp"

namespace {

using namespace gossip;
using namespace gossip::wire;
using Bytes = std::vector<std::byte>;

void write(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error(path + ": cannot write");
}

Bytes read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

Hello hello(std::int32_t rank, WireFormat wire, GossipSettings gossip) {
  return Hello{kVersion, rank, HandshakeInfo{"run", "784-128-10", 101770, 42, wire, gossip},
               std::nullopt};
}

GossipSettings choco(std::string compressor, double fraction, std::uint32_t bits, double gamma,
                     std::uint32_t steps) {
  return GossipSettings{"choco", std::move(compressor), fraction, bits, gamma, steps};
}

Bytes frame(FrameType type, std::uint32_t sender, std::int64_t round, const Bytes& payload) {
  return encode_frame(type, sender, round, payload);
}

void handshake_seeds(const std::string& dir) {
  const GossipSettings dpsgd{"dpsgd", "", 0, 0, 0, 0};
  auto shm = hello(0, WireFormat::kFp32, dpsgd);
  shm.shm = ShmOffer{0x1234567890ABCDEF, 4242, 17, 0xFEEDFACE, 0x191000, 4};
  write(dir + "/hello", encode_hello(hello(0, WireFormat::kFp32, dpsgd)));
  write(dir + "/hello_bf16", encode_hello(hello(0, WireFormat::kBf16, dpsgd)));
  write(dir + "/hello_shm", encode_hello(shm));
  write(dir + "/hello_choco_top_k",
        encode_hello(hello(0, WireFormat::kBf16, choco("top_k", 0.01, 0, 0.05, 5))));
  write(dir + "/hello_choco_quantize",
        encode_hello(hello(0, WireFormat::kFp32, choco("quantize", 0, 4, 0.3, 1))));
}

void frame_seeds(const std::string& dir, const std::string& packet_seed) {
  std::vector<float> values(16);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  auto shm = hello(0, WireFormat::kFp32, GossipSettings{"dpsgd", "", 0, 0, 0, 0});
  shm.shm = ShmOffer{0x1234567890ABCDEF, 4242, 17, 0xFEEDFACE, 0x191000, 4};
  const std::vector<Member> view{{3, MemberState::kAlive}, {1, MemberState::kSuspect},
                                 {2, MemberState::kDead}, {0, MemberState::kAlive}};
  const Bytes error = encode_refusal({RefusalKind::kRunId, "refused by peer 1: run id"});
  write(dir + "/hello", frame(FrameType::kHello, 0, 0, encode_hello(shm)));
  write(dir + "/hello_ack",
        frame(FrameType::kHelloAck, 1, 0,
              encode_hello(hello(1, WireFormat::kFp32, choco("random_k", 0.05, 0, 0.1, 2)))));
  write(dir + "/bye", frame(FrameType::kBye, 0, 0, {}));
  write(dir + "/error", frame(FrameType::kError, 0, 0, error));
  write(dir + "/params",
        frame(FrameType::kParams, 0, 7, encode_params(values, 1.0, WireFormat::kFp32)));
  write(dir + "/params_bf16",
        frame(FrameType::kParams, 0, 7, encode_params(values, 1.0, WireFormat::kBf16)));
  write(dir + "/params_fp16",
        frame(FrameType::kParams, 0, 7, encode_params(values, 1.0, WireFormat::kFp16)));
  write(dir + "/shm_ready", frame(FrameType::kShmReady, 0, 0, {}));
  write(dir + "/shm_params", frame(FrameType::kShmParams, 0, 7, encode_shm_note({2, 10, 0.5})));
  write(dir + "/view", frame(FrameType::kView, 1, 0, encode_view(view)));
  const std::vector<Announcement> changes{{5, ChangeKind::kJoin, 200}, {2, ChangeKind::kLeave, 500},
                                          {3, ChangeKind::kDead, 581}};
  write(dir + "/announce", frame(FrameType::kAnnounce, 1, 0, encode_announcements(changes)));
  write(dir + "/packet", frame(FrameType::kPacket, 2, 7, read(packet_seed)));
  write(dir + "/ready", frame(FrameType::kReady, 3, 42, {}));
  const AddressRecord record{3, 1, "198.18.0.4:29503", Bytes(420, std::byte{0x30}),
                             Bytes(71, std::byte{0x30})};
  write(dir + "/address", frame(FrameType::kAddress, 1, 0, encode_address_record(record)));
}

/// One seed per rendezvous kind, as peers send them.
void rendezvous_seeds(const std::string& dir) {
  const std::uint64_t tag = rendezvous_tag("run");
  const Rendezvous messages[] = {
      {RendezvousKind::kDialBackAsk, RendezvousStatus::kOk, tag, 3, 0, 0x1234, 0, ""},
      {RendezvousKind::kDialBackProbe, RendezvousStatus::kOk, tag, 1, 3, 0x1234, 0, ""},
      {RendezvousKind::kDialBackAnswer, RendezvousStatus::kFailed, tag, 1, 3, 0x1234, 0,
       "198.18.0.4:29500: no route (No route to host)"},
      {RendezvousKind::kRelayAsk, RendezvousStatus::kOk, tag, 0, 4, 0, 0, ""},
      {RendezvousKind::kRelayAnswer, RendezvousStatus::kNotYet, tag, 2, 0, 0, 0,
       "this peer's reachability is not known yet"},
      {RendezvousKind::kAddressAsk, RendezvousStatus::kOk, tag, 5, 0, 1, 0, ""},
      {RendezvousKind::kAddressAnswer, RendezvousStatus::kOk, tag, 0, 5, 3, 0, ""},
  };
  int i = 0;
  for (const Rendezvous& m : messages) {
    const auto bytes = encode_rendezvous(m);
    write(dir + "/kind" + std::to_string(++i), Bytes(bytes.begin(), bytes.end()));
  }
}

/// Address records as peers send them (the certificate and signature stand-ins: the decoder
/// checks their lengths, src/net their contents).
void address_seeds(const std::string& dir) {
  const auto bytes = [](std::size_t n, std::uint8_t v) { return Bytes(n, std::byte{v}); };
  const AddressRecord records[] = {
      {3, 1'790'000'000'000'000'000ull, "198.18.0.4:29503", bytes(420, 0x30), bytes(71, 0x30)},
      {0, 1, "[::1]:7100", bytes(1, 1), bytes(1, 2)},
      {12, 2, "peer-12.gossip.svc:29500", bytes(900, 0x82), bytes(256, 0x11)},
  };
  int i = 0;
  for (const AddressRecord& r : records)
    write(dir + "/record" + std::to_string(++i), encode_address_record(r));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string corpus = argc > 1 ? argv[1] : "fuzz/corpus";
  try {
    handshake_seeds(corpus + "/handshake");
    frame_seeds(corpus + "/frame", corpus + "/packet/sparse_top_k");
    rendezvous_seeds(corpus + "/rendezvous");
    address_seeds(corpus + "/address");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  std::printf("make_seeds: frame, handshake, rendezvous and address seeds of protocol version %u in %s\n",
              unsigned{kVersion}, corpus.c_str());
  return 0;
}
