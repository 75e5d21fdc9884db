/// hash: SHA-256 (FIPS 180-4) for parameter fingerprints (params_sha256 in summary.json).
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/hash.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <span>
#include <string>

namespace gossip {

/// SHA-256 of `bytes` bytes at `data`, as 64 lowercase hex digits.
std::string sha256_hex(const void* data, std::size_t bytes);

/// SHA-256 of a float buffer's bytes (little-endian, as in memory).
inline std::string sha256_hex(std::span<const float> data) {
  return sha256_hex(data.data(), data.size_bytes());
}

}  // namespace gossip
