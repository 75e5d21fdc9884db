// fuzz/fuzz_handshake.cpp: libFuzzer target for the handshake decoder (src/wire/handshake.cpp):
// hostile lengths are refused before anything is allocated, a hello that is accepted re-encodes
// to exactly the input (every field of its gossip settings included), and comparing it with ours
// never crashes and refuses on both sides or neither.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gossip/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gossip::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  const auto hello = decode_hello(bytes);
  if (!hello) {
    if (hello.error.empty()) std::abort();  // every refusal says why
    return 0;
  }
  const auto again = encode_hello(*hello.value);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  static const gossip::GossipSettings dpsgd{"dpsgd", "", 0, 0, 0, 0};
  static const Hello ours{
      kVersion, 0,
      gossip::HandshakeInfo{"run", "784-128-10", 101770, 42, gossip::WireFormat::kFp32, dpsgd},
      std::nullopt};
  const auto refusal = refusal_of(ours, *hello.value);
  const auto back = refusal_of(*hello.value, ours);
  if (refusal.has_value() != back.has_value()) std::abort();  // symmetric
  if (refusal && (refusal->kind != back->kind || refusal->text.empty())) std::abort();
  return 0;
}
