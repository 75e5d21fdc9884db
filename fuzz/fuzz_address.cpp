// fuzz/fuzz_address.cpp: libFuzzer target for the address record decoder
// (src/wire/address_record.cpp): every refusal says why, and a record that is accepted re-encodes
// to exactly the input.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gossip/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gossip::wire;
  const auto bytes = std::as_bytes(std::span(data, size));
  const auto record = decode_address_record(bytes, 1u << 16);
  if (!record) {
    if (record.error.empty()) std::abort();
    return 0;
  }
  const auto again = encode_address_record(*record.value);
  if (size != again.size() || std::memcmp(again.data(), data, size) != 0) std::abort();
  (void)address_record_message("run", *record.value);
  return 0;
}
