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
constexpr std::int64_t kTail = 50;     // rounds a long pass runs on at float32's floor
constexpr double k1000x = 1e-6;        // d / d(0) where disagreement (its root) is 1000x lower
}  // namespace

bool AveragingCheck::agrees() const {
  if (exact_predicted) return exact_after >= 0;
  return std::abs(measured - predicted) <= 0.10 * predicted;
}

AveragingCheck averaging_check(const RunConfig& base, const std::string& topology_path,
                               const Topology& topology, const TopologyReport& analysis,
                               std::int64_t rounds) {
  RunConfig c = base;
  c.gossip.algorithm = topology.directed() ? AlgorithmKind::kPushSum : AlgorithmKind::kDpsgd;
  c.gossip.period = 1;
  c.gossip.overlap = false;
  c.gossip.choco = ChocoConfig{};
  c.sim.consensus_only = true;
  c.sim.consensus_rounds = rounds;
  c.sim.message_loss = 0.0;
  // A long pass (the slow graphs of hundreds of peers) ends once float32's rounding has ruled
  // for kTail rounds: the fast graphs get there in tens of rounds, the ring in tens of
  // thousands.
  SimHooks hooks;
  double d0 = -1.0;
  std::int64_t floor_since = -1;
  if (rounds > kLast) {
    hooks.on_eval = [&](const EvalPoint& e) {
      if (e.round == 0) d0 = e.consensus_distance;
    };
    hooks.stop_after = [&](const EvalPoint& e) {
      if (e.consensus_distance > kFloatFloor * d0) return false;
      if (floor_since < 0) floor_since = e.round;
      return e.consensus_distance <= kExact * d0 || e.round - floor_since >= kTail;
    };
  }
  const SimResult r = simulate_consensus(c, topology, hooks);
  AveragingCheck a;
  a.label = std::filesystem::path(topology_path).stem().string();
  a.topology = topology_path;
  a.rho = analysis.rho_per_round;
  a.predicted = a.rho * a.rho;
  a.exact_predicted = analysis.exact_averaging;
  for (const auto& e : r.evals) a.distance.push_back(e.consensus_distance);
  d0 = a.distance.front();
  for (std::size_t t = 0; a.exact_predicted && t < a.distance.size(); ++t)
    if (a.distance[t] <= kExact * d0) {
      a.exact_after = static_cast<std::int64_t>(t);
      break;
    }
  const bool long_pass = rounds > kLast;
  std::int64_t last = std::min<std::int64_t>(long_pass ? rounds : kLast, std::ssize(a.distance) - 1);
  while (last > 1 && a.distance[last] < kFloatFloor * d0) --last;
  const std::int64_t first = long_pass ? std::max<std::int64_t>(1, last / 2) : std::min(kFirst, last / 2);
  a.predicted_rounds_1000x = analysis.rounds_to_1000x;
  for (std::size_t t = 0; t < a.distance.size(); ++t)
    if (a.distance[t] <= k1000x * d0) {
      a.measured_rounds_1000x = static_cast<std::int64_t>(t);
      break;
    }
  a.first = first;
  a.last = last;
  if (last > first && a.distance[first] > 0)
    a.measured = std::pow(a.distance[last] / a.distance[first], 1.0 / static_cast<double>(last - first));
  return a;
}

namespace {

/// averaging.csv: a row a graph, its predicted and measured contraction.
void write_averaging_csv(const std::string& dir, const std::vector<AveragingCheck>& checks) {
  std::ofstream csv(dir + "/averaging.csv", std::ios::trunc);
  if (!csv) throw InputError(cat(dir, "/averaging.csv: cannot open for writing"));
  csv << "topology,file,rho,predicted_contraction,measured_contraction,first_round,last_round,"
         "exact_after,agrees,predicted_rounds_1000x,measured_rounds_1000x\n";
  for (const auto& a : checks)
    csv << a.label << ',' << a.topology << ',' << a.rho << ',' << a.predicted << ','
        << a.measured << ',' << a.first << ',' << a.last << ','
        << (a.exact_after >= 0 ? cat(a.exact_after) : "") << ','
        << (a.agrees() ? "true" : "false") << ',' << a.predicted_rounds_1000x << ','
        << (a.measured_rounds_1000x >= 0 ? cat(a.measured_rounds_1000x) : "") << '\n';
}

/// averaging.dat: each graph's measured and predicted d/d(0), round by round, a block each.
void write_averaging_dat(const std::string& dir, const std::vector<AveragingCheck>& checks) {
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

/// report.md's section: the contraction per round and the rounds to 1000x, each graph a row.
void append_averaging_report(const std::string& dir, const std::vector<AveragingCheck>& checks) {
  std::ofstream md(dir + "/report.md", std::ios::app);
  md << "\n## Pure averaging against the spectrum\n\n"
     << "Learning rate 0, peers from different random vectors: the consensus distance should "
        "shrink by rho^2 per round. Measured over the rounds shown (20 to 100, or up to where "
        "float32 rounding takes over; a pass of more than 100 rounds takes its second half, and "
        "ends once rounding has ruled for 50 rounds).\n\n"
     << "| topology | rho | predicted rho^2 | measured per round | rounds | exact average after "
        "| agrees (10%) |\n|---|---|---|---|---|---|---|\n";
  for (const auto& a : checks)
    md << "| " << a.label << " | " << fixed(a.rho, 4) << " | " << fixed(a.predicted, 4)
       << " | " << fixed(a.measured, 4) << " | " << a.first << "-" << a.last << " | "
       << (a.exact_after >= 0 ? cat(a.exact_after, " rounds") : "-") << " | "
       << (a.agrees() ? "yes" : "no") << " |\n";
  md << "\nRounds to cut disagreement (the root of the consensus distance) 1000x. Predicted: "
        "ln(1000) / -ln(rho) per period, a bound that a start lying along the slowest mode "
        "reaches; the random start here spreads over every mode and gets there sooner. On a "
        "ring both grow as n^2 (the gap is about 4 pi^2 / (3 n^2)), on a torus as n, on the "
        "exponential and random regular graphs hardly at all.\n\n"
     << "| topology | spectral gap | predicted rounds to 1000x | measured | measured / "
        "predicted |\n|---|---|---|---|---|\n";
  for (const auto& a : checks) {
    const bool reached = a.measured_rounds_1000x >= 0;
    const bool finite = std::isfinite(a.predicted_rounds_1000x);
    md << "| " << a.label << " | " << cat(1.0 - a.rho) << " | "
       << (finite ? fixed(a.predicted_rounds_1000x, 1) : std::string("never")) << " | "
       << (reached ? cat(a.measured_rounds_1000x)
                   : cat("not within ", a.distance.size() - 1, " rounds"))
       << " | "
       << (reached && finite && a.predicted_rounds_1000x > 0
               ? fixed(static_cast<double>(a.measured_rounds_1000x) / a.predicted_rounds_1000x, 2)
               : std::string("-"))
       << " |\n";
  }
  md << "\n![pure averaging](averaging.png)\n";
}

Plot averaging_plot(const std::vector<AveragingCheck>& checks) {
  // One panel a graph, each on its own round axis: the graphs need from ten rounds (one-peer
  // exponential) to tens of thousands (a large ring) to reach float32's floor, and on one shared
  // axis every graph but the slowest was a vertical line at x = 0.
  Plot p;
  p.name = "averaging";
  p.title = "pure averaging: measured (solid) against rho^2 per round (dashed), one panel a graph";
  p.x_label = "round";
  p.y_label = "consensus distance / start (0 at the bottom)";
  p.log_y = true;
  p.y_floor = 1e-16;
  p.columns = checks.size() > 4 ? 3 : 2;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const auto& a = checks[i];
    PlotPanel panel{a.label, {}};
    panel.series.push_back(PlotSeries{"averaging.dat", static_cast<int>(i), 1, 2, 1.0, "measured",
                                      0, 0, false, 0, false});
    if (!a.exact_predicted)
      panel.series.push_back(PlotSeries{"averaging.dat", static_cast<int>(i), 1, 3, 1.0,
                                        cat("rho^2 = ", fixed(a.predicted, 4)), 0, 1, true, 0, false});
    p.panels.push_back(std::move(panel));
  }
  return p;
}

}  // namespace

bool write_averaging(const std::string& dir, const std::vector<AveragingCheck>& checks,
                     std::string* why) {
  make_output_dir(dir);
  write_averaging_csv(dir, checks);
  write_averaging_dat(dir, checks);
  append_averaging_report(dir, checks);
  return draw_plots(dir, {averaging_plot(checks)}, why);
}

}  // namespace gossip
