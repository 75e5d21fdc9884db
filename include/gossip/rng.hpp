/// rng: every random stream is derived from (seed, peer id, purpose), so results do not depend on
/// which thread or process ran a peer (DESIGN idea 2). splitmix64 seeding; we use
/// std::mt19937_64 only through these helpers so the derivation stays in one place.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/rng.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <random>

namespace gossip {

/// Purposes of random streams; add new ones at the end (values are part of reproducibility).
enum class Stream : std::uint64_t {
  kInit = 1,      // parameter initialisation
  kShard = 2,     // data sharding across peers
  kBatch = 3,     // batch order within an epoch
  kTopology = 4,  // random graph generators
  kSynthetic = 5, // synthetic data sets
  kSim = 6,       // simulator: message loss, consensus vectors
  kDropout = 7,
  kCompress = 8,  // compressed gossip: random_k's coordinates, quantization's rounding
  kAttack = 9,    // the fault schedule's noise attack (one stream a round: see faults.hpp)
  kChaos = 10,    // random fault schedules (chaos_schedule)
};

/// splitmix64 step: a good 64-bit mix for deriving independent seeds.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Seed for the stream (seed, peer, purpose).
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t peer, Stream purpose) {
  return mix64(mix64(mix64(seed) ^ (peer + 0x632be59bd9b4e019ULL)) ^
               static_cast<std::uint64_t>(purpose));
}

/// A generator for (seed, peer, purpose).
inline std::mt19937_64 make_rng(std::uint64_t seed, std::uint64_t peer, Stream purpose) {
  return std::mt19937_64(derive_seed(seed, peer, purpose));
}

/// Uniform double in [0, 1) from a 64-bit generator, identical on every platform
/// (std::uniform_real_distribution is not specified bit-exactly across libraries).
inline double uniform01(std::mt19937_64& g) { return (g() >> 11) * 0x1.0p-53; }

/// Uniform integer in [0, n) (n > 0), platform-independent (Lemire's multiply, no bias fix needed
/// for our n << 2^32).
inline std::uint64_t uniform_below(std::mt19937_64& g, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(g()) * n) >> 64);
}

/// Standard normal via Box-Muller on uniform01 (platform-independent).
double normal01(std::mt19937_64& g);

}  // namespace gossip
