// fuzz/fuzz_checkpoint.cpp: libFuzzer target for the checkpoint decoder (src/wire/checkpoint.cpp):
// a truncated, corrupt or hostile file is refused with a reason and never allocates from a length
// it has not checked; a checkpoint that is accepted re-encodes to exactly the input (a version-1
// or version-2 file re-encodes as version 3, which must then decode and re-encode to itself).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "gossip/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  std::string why;
  const auto c = gossip::decode_checkpoint(bytes, &why);
  if (!c) {
    if (why.empty()) std::abort();  // every refusal says why
    return 0;
  }
  const auto again = gossip::encode_checkpoint(*c);
  std::uint32_t version = 0;
  std::memcpy(&version, data + 8, 4);  // accepted: the header is there
  if (version < 3) {
    const auto c2 = gossip::decode_checkpoint(again, &why);
    if (!c2 || !c2->caller_state.empty() || (version == 1 && !c2->algorithm_state.empty()) ||
        gossip::encode_checkpoint(*c2) != again)
      std::abort();
    return 0;
  }
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  return 0;
}
