// topology/spectral.cpp: the second-largest eigenvalue modulus of W (or of the product of one
// period's matrices) and exact-averaging detection. The only file that uses Eigen.
//
// Deflation: for a row or column stochastic W, M = Pi W Pi with Pi = I - (1/n) 11^T has the
// eigenvalues of W with one eigenvalue 1 replaced by 0, so rho = spectral radius of M, and M is
// symmetric whenever W is (then the fast symmetric solver applies: ~1 s for n = 1024). A
// general non-symmetric W goes to Eigen's EigenSolver: several seconds for n = 1024.
// GCC 12 warns about Eigen's own products (-Wmaybe-uninitialized false positives, reported
// after inlining, so the pragma has to cover the whole file).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>

#include "gossip/core.hpp"
#include "src/topology/internal.hpp"

namespace gossip::topo {

namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kExactTolerance = 1e-9;

Matrix dense(const Graph& g) {
  Matrix w = Matrix::Zero(g.n(), g.n());
  for (int i = 0; i < g.n(); ++i) {
    w(i, i) = g.self_weight(i);
    for (const Neighbour& nb : g.in_neighbours(i)) w(i, nb.peer) = nb.weight;
  }
  return w;
}

// W * P for sparse W, dense P (rows combined in ascending id).
Matrix multiply(const Graph& g, const Matrix& p) {
  Matrix out(p.rows(), p.cols());
  for (int i = 0; i < g.n(); ++i) {
    out.row(i) = g.self_weight(i) * p.row(i);
    for (const Neighbour& nb : g.in_neighbours(i)) out.row(i) += nb.weight * p.row(nb.peer);
  }
  return out;
}

/// The largest entry of |p - (1/n) 11^T|.
double distance_to_average(const Matrix& p) {
  const double j = 1.0 / static_cast<double>(p.rows());
  return (p.array() - j).abs().maxCoeff();
}

bool is_average(const Matrix& p) { return distance_to_average(p) < kExactTolerance; }

bool is_symmetric(const Matrix& p) { return (p - p.transpose()).cwiseAbs().maxCoeff() < 1e-12; }

double spectral_radius_deflated(Matrix m) {
  Eigen::VectorXd row_means = m.rowwise().mean();
  m.colwise() -= row_means;  // W Pi
  Eigen::RowVectorXd col_means = m.colwise().mean();
  m.rowwise() -= col_means;  // Pi W Pi
  if (is_symmetric(m)) {
    Eigen::MatrixXd sym = m;  // column-major for the solver
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(sym, Eigen::EigenvaluesOnly);
    GOSSIP_CHECK_MSG(solver.info() == Eigen::Success, "symmetric eigen solver failed");
    return solver.eigenvalues().cwiseAbs().maxCoeff();
  }
  // A normal M (every circulant: exponential graphs, directed rings) has rho = ||M||_2, the
  // root of the largest eigenvalue of the symmetric M^T M: much faster than the general solver.
  Eigen::MatrixXd general = m;
  Eigen::MatrixXd mtm = general.transpose() * general;
  Eigen::MatrixXd mmt = general * general.transpose();
  if ((mtm - mmt).cwiseAbs().maxCoeff() < 1e-12) {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(mtm, Eigen::EigenvaluesOnly);
    GOSSIP_CHECK_MSG(solver.info() == Eigen::Success, "symmetric eigen solver failed");
    return std::sqrt(std::max(0.0, solver.eigenvalues().maxCoeff()));
  }
  Eigen::EigenSolver<Eigen::MatrixXd> solver(general, /*computeEigenvectors=*/false);
  GOSSIP_CHECK_MSG(solver.info() == Eigen::Success, "eigen solver failed");
  return solver.eigenvalues().cwiseAbs().maxCoeff();
}

}  // namespace

Spectrum spectrum(const Topology& topology) {
  Spectrum s;
  const int n = topology.n();
  if (n == 1) return {0.0, true, 1};
  constexpr double kResolved = 1e-9;  // below this a product's rho is rounding, not mixing
  Matrix product;
  std::int64_t first_average = 0;  // first t whose prefix product W(t-1)...W(0) is (1/n) 11^T
  double prefix_rho = 1.0;         // rho of the longest 2^j-round prefix still resolved
  std::int64_t prefix_rounds = 0;
  bool resolved = true;
  const std::int64_t period = topology.period();
  double before = 1.0;  // the distance of the product one round earlier from the average
  for (std::int64_t t = 0; t < period; ++t) {
    product = t == 0 ? dense(topology.at(0)) : multiply(topology.at(t), product);
    const double distance = distance_to_average(product);
    // Exact averaging: the average reached from a product still far from it a round before
    // (Base graphs). A product that closes in geometrically (random graphs) crosses the
    // tolerance from just above it: that is mixing below rounding, measured as a rate below.
    if (first_average == 0 && distance < kExactTolerance && before > 1e-6) first_average = t + 1;
    before = distance;
    const std::int64_t rounds = t + 1;
    if (resolved && first_average == 0 && rounds < period && (rounds & (rounds - 1)) == 0) {
      const double rho = std::min(1.0, spectral_radius_deflated(product));
      if (rho >= kResolved) prefix_rho = rho, prefix_rounds = rounds;
      else resolved = false;
    }
  }
  if (first_average > 0 && is_average(product))
    return {0.0, true, first_average, 0.0, first_average};
  s.rho = std::min(1.0, spectral_radius_deflated(std::move(product)));
  s.rate_rho = s.rho;
  s.rate_rounds = period;
  if (s.rho < kResolved && prefix_rounds > 0) {
    s.rate_rho = prefix_rho;
    s.rate_rounds = prefix_rounds;
  }
  return s;
}

double effective_neighbours(const Topology& topology, double gamma) {
  GOSSIP_CHECK_MSG(gamma >= 0.0 && gamma < 1.0, cat("gamma ", gamma, " is not in [0, 1)"));
  const int n = topology.n();
  const std::int64_t period = topology.period();
  if (period == 1) {
    // A normal W (symmetric, or circulant as the exponential graphs) has W W^T's eigenvectors:
    // Sigma = sum_k mu_k / (1 - gamma mu_k) u_k u_k^*, mu_k the eigenvalues of W W^T, so
    // mean diag Sigma = (1/n) sum_k mu_k / (1 - gamma mu_k). About a second at n = 1024.
    const Eigen::MatrixXd w = dense(topology.at(0));
    const Eigen::MatrixXd wwt = w * w.transpose();
    if ((wwt - w.transpose() * w).cwiseAbs().maxCoeff() < 1e-12) {
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(wwt, Eigen::EigenvaluesOnly);
      GOSSIP_CHECK_MSG(solver.info() == Eigen::Success, "symmetric eigen solver failed");
      double trace = 0.0;
      for (double mu : solver.eigenvalues()) {
        mu = std::clamp(mu, 0.0, 1.0);
        trace += mu / (1.0 - gamma * mu);
      }
      return 1.0 / ((1.0 - gamma) * trace / static_cast<double>(n));
    }
  }
  // Else Sigma_{t+1} = W_t (gamma Sigma_t + I) W_t^T from Sigma = 0: the terms shrink by gamma (and
  // W_t's squares) a round, so whole periods run until a period changes no entry by more than
  // 1e-12 of the largest. The mean variance is averaged over the period's phases.
  Matrix sigma = Matrix::Zero(n, n);
  const std::int64_t max_rounds = 100000;
  double mean_variance = 0.0;
  for (std::int64_t done = 0; done < max_rounds; done += period) {
    const Matrix before = sigma;
    double phase_sum = 0.0;
    for (std::int64_t t = 0; t < period; ++t) {
      Matrix a = gamma * sigma;
      a.diagonal().array() += 1.0;
      const Matrix b = multiply(topology.at(t), a);            // W A
      sigma = multiply(topology.at(t), b.transpose()).transpose();  // W A W^T (A symmetric)
      phase_sum += sigma.diagonal().mean();
    }
    mean_variance = phase_sum / static_cast<double>(period);
    if ((sigma - before).cwiseAbs().maxCoeff() <= 1e-12 * sigma.cwiseAbs().maxCoeff()) break;
  }
  return 1.0 / ((1.0 - gamma) * mean_variance);
}

}  // namespace gossip::topo

namespace gossip {

std::optional<double> smallest_eigenvalue(const Graph& graph) {
  if (graph.n() > 2048 || !graph.symmetric()) return std::nullopt;
  const Eigen::MatrixXd w = topo::dense(graph);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(w, Eigen::EigenvaluesOnly);
  GOSSIP_CHECK_MSG(solver.info() == Eigen::Success, "symmetric eigen solver failed");
  return solver.eigenvalues().minCoeff();
}

}  // namespace gossip
