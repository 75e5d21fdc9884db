// compute/cpu_robust.cpp: ClippedGossip's distances on the CPU (one of its gossip kernels,
// cpu_gossip.hpp): ||m_j - r||^2 for several messages in passes over r, each element's square
// math::squared_difference (gossip/math.hpp), which the CUDA backend's kernel squares with too.
//
// Float squares summed in 16 lanes (each lane a sixteenth of the vector, so its rounding stays
// far below what a clipping radius needs), the lanes then in double in one fixed order: the same
// bits on every run, and the same for a message whatever others share its pass. A pass reads r
// once for two messages (the mix is memory-bound); more accumulators than two would not fit
// SSE's sixteen registers.
#include "src/compute/cpu_gossip.hpp"

#include <cstddef>
#include <cstring>

// math::squared_difference of 16 float lanes: an inline function, so the vector ABI GCC warns
// about (-Wpsabi: returning a 64-byte vector without AVX-512) is never crossed.
#pragma GCC diagnostic ignored "-Wpsabi"
#include "gossip/math.hpp"

namespace gossip::cpu {
namespace {

/// Sixteen float lanes; GCC and Clang lower it to whatever vector width the target has.
using Lanes = float __attribute__((vector_size(64)));

/// The G messages m[0..G) (null: r alone) against r, into d[0..G).
template <std::size_t G>
void pass(const float* const* m, const float* r, std::int64_t count, double* d) {
  Lanes acc[G] = {};
  const auto n = static_cast<std::size_t>(count);
  const Lanes zero = {};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Lanes x;
    std::memcpy(&x, r + i, sizeof x);
    for (std::size_t g = 0; g < G; ++g) {
      if (m[g] == nullptr) {
        acc[g] += math::squared_difference(x, zero);
        continue;
      }
      Lanes v;
      std::memcpy(&v, m[g] + i, sizeof v);
      acc[g] += math::squared_difference(v, x);
    }
  }
  double sum[G] = {};
  for (; i < n; ++i)
    for (std::size_t g = 0; g < G; ++g) {
      const double v = static_cast<double>(m[g] ? m[g][i] : 0.0f) - static_cast<double>(r[i]);
      sum[g] += v * v;
    }
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t k = 0; k < 16; ++k) sum[g] += static_cast<double>(acc[g][k]);
    d[g] = sum[g];
  }
}

}  // namespace

void GossipLoops::squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                                    double* out) {
  for (int j = 0; j < k; j += 2) {
    if (j + 1 < k) pass<2>(m + j, r, n, out + j);
    else pass<1>(m + j, r, n, out + j);
  }
}

}  // namespace gossip::cpu
