// sim/averaging.cpp: gossip compare's pure-averaging pass — does each graph mix at the rate its
// spectrum predicts? Learning rate 0, peers from different random vectors: the consensus
// distance d(t) (mean squared distance to the average) falls by rho^2 per round once the slowest
// mode dominates; the pass measures it and draws it beside the prediction.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "gossip/core.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

namespace {
constexpr double kFloatFloor = 1e-9;   // d / d(0) below this is float32 rounding, not mixing
constexpr double kExact = 1e-12;       // d / d(0) at or below this: the average is reached
constexpr std::int64_t kFirst = 20, kLast = 100;
}  // namespace

bool AveragingCheck::agrees() const {
  if (exact_predicted) return exact_after >= 0;
  return std::abs(measured - predicted) <= 0.10 * predicted;
}

AveragingCheck averaging_check(const RunConfig& base, const std::string& topology_path,
                               const Topology& topology, const TopologyReport& analysis,
                               std::int64_t rounds) {
  RunConfig c = base;
  c.gossip.algorithm = topology.directed() ? "push_sum" : "dpsgd";
  c.gossip.period = 1;
  c.gossip.overlap = false;
  c.gossip.compress = CompressConfig{};
  c.gossip.consensus_step = 0.0;
  c.sim.consensus_only = true;
  c.sim.consensus_rounds = rounds;
  c.sim.message_loss = 0.0;
  const SimResult r = simulate_consensus(c, topology);
  AveragingCheck a;
  a.label = std::filesystem::path(topology_path).stem().string();
  a.topology = topology_path;
  a.rho = analysis.rho_per_round;
  a.predicted = a.rho * a.rho;
  a.exact_predicted = analysis.exact_averaging;
  for (const auto& e : r.evals) a.distance.push_back(e.consensus_distance);
  const double d0 = a.distance.front();
  for (std::size_t t = 0; a.exact_predicted && t < a.distance.size(); ++t)
    if (a.distance[t] <= kExact * d0) {
      a.exact_after = static_cast<std::int64_t>(t);
      break;
    }
  std::int64_t last = std::min<std::int64_t>(kLast, std::ssize(a.distance) - 1);
  while (last > 1 && a.distance[last] < kFloatFloor * d0) --last;
  const std::int64_t first = std::min(kFirst, last / 2);
  a.first = first;
  a.last = last;
  if (last > first && a.distance[first] > 0)
    a.measured = std::pow(a.distance[last] / a.distance[first], 1.0 / static_cast<double>(last - first));
  return a;
}

bool write_averaging(const std::string& dir, const std::vector<AveragingCheck>& checks,
                     std::string* why) {
  make_output_dir(dir);
  {
    std::ofstream csv(dir + "/averaging.csv", std::ios::trunc);
    if (!csv) throw InputError(cat(dir, "/averaging.csv: cannot open for writing"));
    csv << "topology,file,rho,predicted_contraction,measured_contraction,first_round,last_round,"
           "exact_after,agrees\n";
    for (const auto& a : checks)
      csv << a.label << ',' << a.topology << ',' << a.rho << ',' << a.predicted << ','
          << a.measured << ',' << a.first << ',' << a.last << ','
          << (a.exact_after >= 0 ? cat(a.exact_after) : "") << ','
          << (a.agrees() ? "true" : "false") << '\n';
  }
  {
    std::ofstream dat(dir + "/averaging.dat", std::ios::trunc);
    for (std::size_t i = 0; i < checks.size(); ++i) {
      const auto& a = checks[i];
      dat << "# " << a.label << ": round, d/d(0), d(first)/d(0) * rho^(2 (round - first))\n";
      const double d0 = a.distance.front();
      for (std::size_t t = 0; t < a.distance.size(); ++t) {
        const double predicted =
            a.distance[a.first] / d0 * std::pow(a.predicted, static_cast<double>(t) - a.first);
        dat << t << ' ' << a.distance[t] / d0 << ' ' << predicted << '\n';
      }
      dat << "\n\n";
    }
  }
  {
    std::ofstream md(dir + "/report.md", std::ios::app);
    md << "\n## Pure averaging against the spectrum\n\n"
       << "Learning rate 0, peers from different random vectors: the consensus distance should "
          "shrink by rho^2 per round. Measured over the rounds shown (20 to 100, or up to where "
          "float32 rounding takes over).\n\n"
       << "| topology | rho | predicted rho^2 | measured per round | rounds | exact average after "
          "| agrees (10%) |\n|---|---|---|---|---|---|---|\n";
    for (const auto& a : checks)
      md << "| " << a.label << " | " << fixed(a.rho, 4) << " | " << fixed(a.predicted, 4)
         << " | " << fixed(a.measured, 4) << " | " << a.first << "-" << a.last << " | "
         << (a.exact_after >= 0 ? cat(a.exact_after, " rounds") : "-") << " | "
         << (a.agrees() ? "yes" : "no") << " |\n";
    md << "\n![pure averaging](averaging.png)\n";
  }
  Plot p;
  p.name = "averaging";
  p.title = "pure averaging: measured (solid) against rho^2 per round (dashed)";
  p.x_label = "round";
  p.y_label = "consensus distance / start (0 drawn at the bottom)";
  p.log_y = true;
  p.y_floor = 1e-16;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto& a = checks[i];
    PlotSeries m{"averaging.dat", static_cast<int>(i), 1, 2, 1.0, a.label, 0,
                 static_cast<int>(i), false};
    PlotSeries e{"averaging.dat", static_cast<int>(i), 1, 3, 1.0,
                 cat(a.label, " predicted ", fixed(a.predicted, 3)), 0, static_cast<int>(i), true};
    p.series.push_back(m);
    if (!a.exact_predicted) p.series.push_back(e);
  }
  return draw_plots(dir, {p}, why);
}

}  // namespace gossip
