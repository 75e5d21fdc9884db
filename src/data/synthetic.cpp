// data/synthetic.cpp: Gaussian blobs with a known answer, for tests and quick runs without files.
//
// Class c has mean separation * e_c (orthogonal axes, so any two means are separation * sqrt(2)
// apart) when classes <= dim, otherwise a random direction of length `separation`; every point is
// its class mean plus N(0, I) noise. With orthogonal means the nearest-mean (a linear) classifier
// errs on a pair with probability Phi(-separation / sqrt(2)): 0.2% at the default 4.
#include <cmath>

#include "gossip/core.hpp"
#include "gossip/data.hpp"
#include "gossip/rng.hpp"

namespace gossip {
namespace {

std::vector<double> class_means(int dim, int classes, double separation, std::mt19937_64& g) {
  std::vector<double> means(static_cast<std::size_t>(classes) * dim, 0.0);
  for (int c = 0; c < classes; ++c) {
    double* mu = means.data() + static_cast<std::size_t>(c) * dim;
    if (classes <= dim) {
      mu[c] = separation;
      continue;
    }
    double norm2 = 0.0;
    for (int j = 0; j < dim; ++j) {
      mu[j] = normal01(g);
      norm2 += mu[j] * mu[j];
    }
    const double scale = norm2 > 0.0 ? separation / std::sqrt(norm2) : 0.0;
    for (int j = 0; j < dim; ++j) mu[j] *= scale;
  }
  return means;
}

}  // namespace

Dataset make_synthetic(std::int64_t n, int dim, int classes, std::uint64_t seed,
                       double separation) {
  if (n < 1 || dim < 1 || classes < 1) {
    throw InputError(cat("synthetic data: need n, dim and classes >= 1, got n=", n, " dim=", dim,
                         " classes=", classes));
  }
  if (!(separation >= 0.0) || !std::isfinite(separation)) {
    throw InputError(cat("synthetic data: separation must be finite and >= 0, got ", separation));
  }
  auto g = make_rng(seed, 0, Stream::kSynthetic);
  const std::vector<double> means = class_means(dim, classes, separation, g);

  Dataset d;
  d.n = n;
  d.dim = dim;
  d.classes = classes;
  d.x.resize(static_cast<std::size_t>(n) * dim);
  d.y.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % classes);  // balanced classes, interleaved
    d.y[i] = c;
    const double* mu = means.data() + static_cast<std::size_t>(c) * dim;
    float* row = d.x.data() + static_cast<std::size_t>(i) * dim;
    for (int j = 0; j < dim; ++j) row[j] = static_cast<float>(mu[j] + normal01(g));
  }
  return d;
}

}  // namespace gossip
