// core/rng.cpp: platform-independent normal sampling (std::normal_distribution is not).
#include "gossip/rng.hpp"

#include <cmath>

namespace gossip {

double normal01(std::mt19937_64& g) {
  double u1 = uniform01(g);
  double u2 = uniform01(g);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace gossip
