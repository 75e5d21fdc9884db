// fuzz/fuzz_rendezvous.cpp: libFuzzer target for the rendezvous decoder (src/wire/rendezvous.cpp):
// every refusal says why, and a message that is accepted re-encodes to exactly the input.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gossip/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gossip::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  const auto message = decode_rendezvous(bytes);
  if (!message) {
    if (message.error.empty()) std::abort();
    return 0;
  }
  const auto again = encode_rendezvous(*message.value);
  if (size != again.size() || std::memcmp(again.data(), data, size) != 0) std::abort();
  return 0;
}
