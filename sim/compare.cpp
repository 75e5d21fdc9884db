// sim/compare.cpp: topology sweeps. Builds the settings of a sweep, turns each simulation into a
// table row (rounds and simulated seconds to a target accuracy, final figures) and writes
// compare.csv, curves.dat and report.md, and describes the plots that report draws.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"
#include "sim/compare_attacks.hpp"

namespace gossip {

TargetCrossing first_crossing(const std::vector<EvalPoint>& evals, double target,
                              double EvalPoint::*accuracy, double EvalPoint::*seconds) {
  TargetCrossing c;
  for (std::size_t i = 1; i < evals.size(); ++i) {
    const EvalPoint& b = evals[i];
    if (b.*accuracy < target) continue;
    const EvalPoint& a = evals[i - 1];
    // Linear between the evaluation below the target and this one; exact when a evaluation
    // lands on it. Round 0 is the start (before any training), a valid lower end.
    const double f = (a.*accuracy >= target || b.*accuracy == a.*accuracy)
                         ? 1.0
                         : (target - a.*accuracy) / (b.*accuracy - a.*accuracy);
    auto lerp = [f](double x0, double x1) { return x0 + f * (x1 - x0); };
    c.round = lerp(static_cast<double>(a.round), static_cast<double>(b.round));
    c.epoch = lerp(a.epoch, b.epoch);
    c.seconds = lerp(a.*seconds, b.*seconds);
    return c;
  }
  return c;
}

CompareRow compare_row(const CompareSetting& setting, const TopologyReport& analysis,
                       const SimResult& result, double target_accuracy, const RealRuns* real) {
  const RunConfig& c = setting.config;
  CompareRow row;
  row.label = setting.label;
  row.group = setting.group.empty() ? setting.label : setting.group;
  row.scenario = setting.scenario;
  row.aggregate = setting.aggregate;
  row.attack = setting.attack;
  if (!result.membership.empty()) {
    row.membership = cat(result.initial_members.size(), " members (gap ",
                         fixed(result.initial_spectral_gap, 3), ")");
    for (const MembershipRecord& m : result.membership)
      row.membership += cat("; from round ", m.from, " (announced ", m.announced, ") ",
                            m.members.size(), " members (gap ", fixed(m.spectral_gap, 3), ")");
  }
  row.topology = c.gossip.topology;
  row.algorithm = algorithm_name(c.gossip.algorithm);
  if (traits(c.gossip.algorithm).compresses) {
    row.compress = describe(c.gossip.choco.compress);
    row.consensus_step = consensus_step(c.gossip.choco);
  }
  row.shard = parse_shard_kind(c.data.shard) == ShardKind::kDirichlet
                  ? cat("dirichlet(", c.data.alpha, ")")
                  : c.data.shard;
  row.period = c.gossip.period;
  row.seed = c.train.seed;
  row.peers = analysis.n;
  row.connected = analysis.connected;
  row.graph_period = analysis.period;
  row.spectral_gap = 1.0 - analysis.rho_per_round;
  row.period_spectral_gap = analysis.spectral_gap;
  row.effective_neighbours = analysis.effective_neighbours;
  const auto seconds = real ? &EvalPoint::wall_seconds : &EvalPoint::sim_seconds;
  row.to_target =
      first_crossing(result.evals, target_accuracy, &EvalPoint::peer_accuracy_min, seconds);
  row.average_to_target =
      first_crossing(result.evals, target_accuracy, &EvalPoint::average_accuracy, seconds);
  if (real) {
    row.measured = true;
    row.links = real->links;
  }
  const EvalPoint& last = result.evals.back();
  row.final_accuracy = last.average_accuracy;
  row.final_min_peer_accuracy = last.peer_accuracy_min;
  row.final_consensus_distance = last.consensus_distance;
  set_honest_figures(c, result, row);
  row.bytes_per_peer = static_cast<double>(result.bytes_sent) / std::max(1, analysis.n);
  row.sim_seconds = result.sim_seconds;
  row.wall_seconds = result.wall_seconds;
  if (!result.samples_per_peer.empty()) {
    const auto [lo, hi] = std::minmax_element(result.samples_per_peer.begin(),
                                              result.samples_per_peer.end());
    row.samples_min = *lo;
    row.samples_max = *hi;
  }
  return row;
}

Spread spread_of(const std::vector<double>& values, bool skip_negative) {
  Spread s;
  s.of = static_cast<int>(values.size());
  double sum = 0.0;
  for (double v : values)
    if (!(skip_negative && v < 0)) {
      sum += v;
      ++s.n;
    }
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  double squares = 0.0;
  for (double v : values)
    if (!(skip_negative && v < 0)) squares += (v - s.mean) * (v - s.mean);
  s.std = s.n > 1 ? std::sqrt(squares / (s.n - 1)) : 0.0;
  return s;
}

std::vector<CompareGroup> group_compare_rows(const std::vector<CompareRow>& rows) {
  std::vector<CompareGroup> groups;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const CompareGroup& x) { return x.label == rows[i].group; });
    if (g == groups.end()) {
      groups.push_back(CompareGroup{});
      groups.back().label = rows[i].group;
      g = groups.end() - 1;
    }
    g->rows.push_back(i);
  }
  for (CompareGroup& g : groups) {
    auto over = [&](auto field, bool skip_negative) {
      std::vector<double> v;
      for (std::size_t i : g.rows) v.push_back(field(rows[i]));
      return spread_of(v, skip_negative);
    };
    g.rounds_to_target = over([](const CompareRow& r) { return r.to_target.round; }, true);
    g.epochs_to_target = over([](const CompareRow& r) { return r.to_target.epoch; }, true);
    g.seconds_to_target = over([](const CompareRow& r) { return r.to_target.seconds; }, true);
    g.average_rounds_to_target =
        over([](const CompareRow& r) { return r.average_to_target.round; }, true);
    g.final_accuracy = over([](const CompareRow& r) { return r.final_accuracy; }, false);
    g.final_min_peer_accuracy =
        over([](const CompareRow& r) { return r.final_min_peer_accuracy; }, false);
    g.final_consensus_distance =
        over([](const CompareRow& r) { return r.final_consensus_distance; }, false);
    g.bytes_per_peer = over([](const CompareRow& r) { return r.bytes_per_peer; }, false);
    g.sim_seconds = over([](const CompareRow& r) { return r.sim_seconds; }, false);
    g.wall_seconds = over([](const CompareRow& r) { return r.wall_seconds; }, false);
    g.honest_accuracy_min = over([](const CompareRow& r) { return r.honest_accuracy_min; }, false);
    g.honest_accuracy_mean =
        over([](const CompareRow& r) { return r.honest_accuracy_mean; }, false);
    g.honest_diverged = static_cast<int>(std::count_if(
        g.rows.begin(), g.rows.end(), [&](std::size_t i) { return rows[i].honest_diverged > 0; }));
  }
  return groups;
}

std::string compare_title(const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups) {
  if (rows.empty()) return "";
  auto shared = [&](auto field) {
    for (const auto& r : rows)
      if (field(r) != field(rows.front())) return false;
    return true;
  };
  std::vector<std::string> parts;
  if (shared([](const CompareRow& r) { return r.peers; }))
    parts.push_back(cat(rows.front().peers, " peers"));
  if (shared([](const CompareRow& r) { return r.shard; }))
    parts.push_back(cat(rows.front().shard, " data split"));
  if (shared([](const CompareRow& r) { return r.algorithm; }))
    parts.push_back(rows.front().algorithm);
  if (shared([](const CompareRow& r) { return r.period; }) && rows.front().period > 1)
    parts.push_back(cat("period ", rows.front().period));
  std::size_t most = 0;
  for (const auto& g : groups) most = std::max(most, g.rows.size());
  parts.push_back(most > 1 ? cat(most, " seeds, mean +- std") : cat("seed ", rows.front().seed));
  std::string title;
  for (const auto& p : parts) title += (title.empty() ? "" : ", ") + p;
  return title;
}

std::string plus_minus(const Spread& s, const char* format) {
  if (s.n == 0) return "-";
  char mean[64], std[64];
  std::snprintf(mean, sizeof mean, format, s.mean);
  std::snprintf(std, sizeof std, format, s.std);
  std::string out = mean;
  if (s.n > 1) out += cat(" ± ", std);
  if (s.n < s.of) out += cat(" (", s.n, "/", s.of, " reached)");
  return out;
}

namespace {

std::string csv_number(double v) { return v < 0 ? std::string() : cat(v); }

/// "3", "3 5": peers in a CSV field.
std::string join_peers(const std::vector<int>& peers) {
  std::string s;
  for (int p : peers) s += cat(s.empty() ? "" : " ", p);
  return s;
}

/// Per-evaluation mean and standard deviation over a group's runs; runs are aligned by
/// evaluation index (the seeds of one setting evaluate at the same rounds).
void write_curves(std::ostream& dat, const CompareGroup& g, const std::vector<CompareRow>& rows,
                  const std::vector<SimResult>& results) {
  std::size_t evals = SIZE_MAX;
  for (std::size_t i : g.rows) evals = std::min(evals, results[i].evals.size());
  dat << "# " << g.label << " (" << g.rows.size()
      << (g.rows.size() == 1 ? " run" : " runs: mean and standard deviation") << ")\n"
      << "# round epoch " << (rows[g.rows.front()].measured ? "wall_seconds" : "sim_seconds")
      << " bytes_per_peer accuracy accuracy_std min_peer_accuracy "
         "min_peer_accuracy_std consensus_distance consensus_distance_std\n";
  for (std::size_t k = 0; k < evals; ++k) {
    auto over = [&](auto field) {
      std::vector<double> v;
      for (std::size_t i : g.rows) v.push_back(field(results[i].evals[k], rows[i]));
      return spread_of(v, false);
    };
    const EvalPoint& first = results[g.rows.front()].evals[k];
    const Spread secs = over([](const EvalPoint& e, const CompareRow& r) {
      return r.measured ? e.wall_seconds : e.sim_seconds;
    });
    const Spread bytes = over([](const EvalPoint& e, const CompareRow& r) {
      return static_cast<double>(e.bytes_sent) / std::max(1, r.peers);
    });
    const Spread acc = over([](const EvalPoint& e, const CompareRow&) { return e.average_accuracy; });
    const Spread low = over([](const EvalPoint& e, const CompareRow&) { return e.peer_accuracy_min; });
    const Spread cons =
        over([](const EvalPoint& e, const CompareRow&) { return e.consensus_distance; });
    char line[512];
    std::snprintf(line, sizeof line, "%lld %.5f %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g\n",
                  static_cast<long long>(first.round), first.epoch, secs.mean, bytes.mean,
                  acc.mean, acc.std, low.mean, low.std, cons.mean, cons.std);
    dat << line;
  }
  dat << "\n\n";
}

}  // namespace

namespace {

/// compare.csv: one row per run.
void write_compare_rows(const std::string& dir, const std::vector<CompareRow>& rows,
                        const char* to_target_seconds, double target_accuracy) {
  std::ofstream csv(dir + "/compare.csv", std::ios::trunc);
  if (!csv) throw InputError(cat(dir, "/compare.csv: cannot open for writing"));
  csv << "setting,group,topology,algorithm,period,shard,seed,peers,connected,spectral_gap,"
         "graph_period,period_spectral_gap,target_accuracy,rounds_to_target,epochs_to_target,"
      << to_target_seconds
      << ",average_rounds_to_target,final_accuracy,"
         "final_min_peer_accuracy,final_consensus_distance,bytes_per_peer,sim_seconds,"
         "wall_seconds,samples_min,samples_max,compress,consensus_step,mode,links,scenario,"
         "aggregate,attack,attackers,honest_accuracy_min,honest_accuracy_mean,honest_diverged,"
         "effective_neighbours\n";
  for (const auto& r : rows)
    csv << r.label << ',' << r.group << ',' << r.topology << ',' << r.algorithm << ','
        << r.period << ',' << r.shard << ',' << r.seed << ',' << r.peers << ','
        << (r.connected ? "true" : "false") << ',' << r.spectral_gap << ',' << r.graph_period
        << ',' << r.period_spectral_gap << ',' << target_accuracy << ','
        << csv_number(r.to_target.round) << ',' << csv_number(r.to_target.epoch) << ','
        << csv_number(r.to_target.seconds) << ',' << csv_number(r.average_to_target.round)
        << ',' << r.final_accuracy << ',' << r.final_min_peer_accuracy << ','
        << r.final_consensus_distance << ',' << r.bytes_per_peer << ','
        << (r.measured ? std::string() : cat(r.sim_seconds)) << ',' << r.wall_seconds << ','
        << r.samples_min << ',' << r.samples_max << ',' << r.compress << ','
        << (r.consensus_step > 0 ? cat(r.consensus_step) : "") << ','
        << (r.measured ? "real" : "simulated") << ',' << r.links << ',' << r.scenario << ','
        << r.aggregate << ','
        << r.attack << ',' << join_peers(r.attackers) << ',' << r.honest_accuracy_min << ','
        << r.honest_accuracy_mean << ',' << r.honest_diverged << ','
        << (std::isfinite(r.effective_neighbours) ? cat(r.effective_neighbours) : "") << '\n';
}

/// compare_summary.csv: one row per setting, each figure's mean and standard deviation.
void write_compare_summary(const std::string& dir, const std::vector<CompareRow>& rows,
                           const std::vector<CompareGroup>& groups, const char* to_target_seconds,
                           double target_accuracy) {
  std::ofstream csv(dir + "/compare_summary.csv", std::ios::trunc);
  if (!csv) throw InputError(cat(dir, "/compare_summary.csv: cannot open for writing"));
  csv << "setting,runs,spectral_gap,graph_period,period_spectral_gap,target_accuracy";
  const char* spreads[] = {"rounds_to_target", to_target_seconds,
                           "average_rounds_to_target", "final_accuracy",
                           "final_min_peer_accuracy", "final_consensus_distance",
                           "bytes_per_peer", "honest_accuracy_min", "honest_accuracy_mean"};
  for (const char* s : spreads) csv << ',' << s << "_mean," << s << "_std";
  csv << ",runs_reaching_target,effective_neighbours\n";
  for (const auto& g : groups) {
    const CompareRow& r = rows[g.rows.front()];
    csv << g.label << ',' << g.rows.size() << ',' << r.spectral_gap << ',' << r.graph_period
        << ',' << r.period_spectral_gap << ',' << target_accuracy;
    for (const Spread* s : {&g.rounds_to_target, &g.seconds_to_target,
                            &g.average_rounds_to_target, &g.final_accuracy,
                            &g.final_min_peer_accuracy, &g.final_consensus_distance,
                            &g.bytes_per_peer, &g.honest_accuracy_min, &g.honest_accuracy_mean})
      csv << ',' << (s->n ? cat(s->mean) : "") << ',' << (s->n ? cat(s->std) : "");
    csv << ',' << g.rounds_to_target.n << ','
        << (std::isfinite(r.effective_neighbours) ? cat(r.effective_neighbours) : "") << '\n';
  }
}

/// Spearman's rank correlation of x and y (ties take their mean rank); NaN with fewer than 3
/// pairs or when either has one value only.
double rank_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n < 3) return std::numeric_limits<double>::quiet_NaN();
  const auto ranks = [n](const std::vector<double>& v) {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> r(n);
    for (std::size_t i = 0; i < n;) {
      std::size_t j = i;
      while (j + 1 < n && v[order[j + 1]] == v[order[i]]) ++j;
      for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
      i = j + 1;
    }
    return r;
  };
  const auto rx = ranks(x), ry = ranks(y);
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / static_cast<double>(n);
  const double my = std::accumulate(ry.begin(), ry.end(), 0.0) / static_cast<double>(n);
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx == 0.0 || syy == 0.0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

/// report.md: how well the spectral gap and the effective number of neighbours rank the sweep's
/// settings by what they reached (the final accuracy of the average model and of the lowest
/// peer), when there are at least three settings with both figures.
void write_predictor_section(std::ostream& md, const std::vector<CompareRow>& rows,
                             const std::vector<CompareGroup>& groups) {
  std::vector<double> gap, neighbours, accuracy, lowest;
  for (const auto& g : groups) {
    const CompareRow& r = rows[g.rows.front()];
    if (!std::isfinite(r.effective_neighbours) || g.final_accuracy.n == 0) continue;
    gap.push_back(r.spectral_gap);
    neighbours.push_back(r.effective_neighbours);
    accuracy.push_back(g.final_accuracy.mean);
    lowest.push_back(g.final_min_peer_accuracy.mean);
  }
  if (gap.size() < 3) return;
  const auto shown = [](double v) { return std::isfinite(v) ? fixed(v, 2) : std::string("-"); };
  md << "\n## Which predictor ranks the settings\n\nSpearman's rank correlation, over the "
     << gap.size() << " settings, of each predictor with what the runs reached (+1: the "
        "predictor orders the settings exactly as their results; -: a predictor that is the "
        "same for every setting ranks nothing). The effective number of neighbours is Vogels, "
        "Hendrikx and Jaggi's (NeurIPS 2022) for decay gamma = "
     << kNeighboursGamma
     << " (`gossip topo FILE --gamma G` gives it for others).\n\n"
        "| predictor | final accuracy (average model) | final lowest peer accuracy |\n"
        "|---|---:|---:|\n"
     << "| spectral gap per round | " << shown(rank_correlation(gap, accuracy)) << " | "
     << shown(rank_correlation(gap, lowest)) << " |\n"
     << "| effective neighbours | " << shown(rank_correlation(neighbours, accuracy)) << " | "
     << shown(rank_correlation(neighbours, lowest)) << " |\n";
}

/// report.md's table: one row per setting (the mean ± standard deviation over its seeds).
void write_report_table(std::ostream& md, const std::vector<CompareRow>& rows,
                        const std::vector<CompareGroup>& groups, bool measured,
                        bool time_varying) {
  md << "\n\n| setting | runs | peers | spectral gap per round |"
     << (time_varying ? " gap per period (rounds) |" : "") << " effective neighbours |"
     << " rounds to target | epochs to target | " << (measured ? "wall s" : "sim s")
     << " to target | rounds to target (average "
        "model) | final accuracy | final lowest peer accuracy | final consensus distance | MB "
        "sent per peer |"
     << (measured ? " wall s (run) |" : "") << "\n"
     << "|---|---:|---:|---:|" << (time_varying ? "---:|" : "") << "---:|"
     << "---:|---:|---:|---:|---:|---:|---:|---:|" << (measured ? "---:|" : "") << "\n";
  for (const auto& g : groups) {
    const CompareRow& r = rows[g.rows.front()];
    Spread mb = g.bytes_per_peer;
    mb.mean /= 1e6;
    mb.std /= 1e6;
    md << "| " << g.label << " | " << g.rows.size() << " | " << r.peers << " | "
       << plus_minus(Spread{r.spectral_gap, 0.0, 1, 1}, "%.4f") << " | ";
    if (time_varying)
      md << (r.graph_period > 1
                 ? cat(plus_minus(Spread{r.period_spectral_gap, 0.0, 1, 1}, "%.4f"), " (",
                       r.graph_period, ")")
                 : std::string("-"))
         << " | ";
    md << (std::isfinite(r.effective_neighbours) ? fixed(r.effective_neighbours, 2)
                                                 : std::string("-"))
       << " | ";
    md << plus_minus(g.rounds_to_target, "%.1f") << " | "
       << plus_minus(g.epochs_to_target, "%.2f") << " | "
       << plus_minus(g.seconds_to_target, "%.3g") << " | "
       << plus_minus(g.average_rounds_to_target, "%.1f") << " | "
       << plus_minus(g.final_accuracy, "%.4f") << " | "
       << plus_minus(g.final_min_peer_accuracy, "%.4f") << " | "
       << plus_minus(g.final_consensus_distance, "%.3g") << " | " << plus_minus(mb, "%.1f")
       << " |";
    if (measured) md << " " << plus_minus(g.wall_seconds, "%.1f") << " |";
    md << "\n";
  }
}

/// report.md's membership section (compare.memberships): who was a member when, with the
/// graph's spectral gap at each size. Nothing when no setting's members changed.
void write_membership_section(std::ostream& md, const std::vector<CompareRow>& rows,
                              const std::vector<CompareGroup>& groups) {
  bool membership = false;
  for (const auto& r : rows) membership = membership || !r.membership.empty();
  if (!membership) return;
  md << "\n## Membership\n\nThe settings whose members changed (compare.memberships), each "
        "change in effect from its round (docs/membership.md#elastic-membership):\n\n"
     << "| setting | members, spectral gap per round |\n|---|---|\n";
  for (const auto& g : groups) {
    const CompareRow& first = rows[g.rows.front()];
    md << "| " << g.label << " | "
       << (first.membership.empty() ? std::string("fixed") : first.membership) << " |\n";
  }
}

/// report.md: what the figures mean, one table row per setting, the plots.
void write_compare_report(const std::string& dir, const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups, double target_accuracy) {
  const bool measured = !rows.empty() && rows.front().measured;
  bool time_varying = false, several = false;
  std::int64_t samples_min = INT64_MAX, samples_max = 0;
  for (const auto& r : rows) {
    time_varying = time_varying || r.graph_period > 1;
    samples_min = std::min(samples_min, r.samples_min);
    samples_max = std::max(samples_max, r.samples_max);
  }
  for (const auto& g : groups) several = several || g.rows.size() > 1;
  std::ofstream md(dir + "/report.md", std::ios::trunc);
  if (!md) throw InputError(cat(dir, "/report.md: cannot open for writing"));
  md << "# Topology comparison\n\n"
     << compare_title(rows, groups) << ". Target accuracy: " << target_accuracy << ".\n\n";
  if (measured)
    md << "Made by `gossip compare --run` from real runs: every setting ran as peer processes "
          "talking TCP (as `gossip run`), one setting after another, "
       << (rows.front().links == "loopback"
               ? std::string("over loopback")
               : cat("each peer in its own network namespace on emulated links (", 
                     rows.front().links, ")"))
       << ". Seconds are measured wall-clock seconds since the start of each run (the average "
          "model's rows of its metrics.csv), bytes what the peers sent; both depend on this "
          "machine and its load.\n\n";
  else
    md << "Made by `gossip compare` from simulations: seconds are simulated (the network model "
          "of the sim section), not measured.\n\n";
  md << "Rounds, epochs and " << (measured ? "wall-clock" : "simulated")
     << " seconds to target are those at which every peer's own "
        "model reaches it (the lowest peer accuracy; - = never): how long slow mixing holds "
        "the peers back. They are interpolated linearly between the two evaluations around the "
        "crossing (evaluations come every few rounds; see curves.dat), so they are fractional. "
        "The average model's rounds to target are given too. Final accuracy is the average "
        "model's. The spectral gap is per round (1 - rho^(1/period))";
  if (time_varying)
    md << "; for time-varying graphs the gap of one period's product is in its own column";
  md << ".";
  if (several)
    md << " Figures are the mean ± standard deviation over the seeds of each setting; runs "
          "that never reach the target are left out of its mean and counted.";
  if (samples_max > 0)
    md << cat(" Training samples per peer: ", samples_min, " to ", samples_max,
              samples_min == samples_max ? " (equal shards)" : " (unequal shards)", ".");
  write_report_table(md, rows, groups, measured, time_varying);
  md << "\n![accuracy vs round](accuracy_vs_round.png)\n"
     << "![accuracy vs bytes](accuracy_vs_bytes.png)\n"
     << "![accuracy vs " << (measured ? "wall-clock" : "simulated")
     << " seconds](accuracy_vs_seconds.png)\n"
     << "![consensus distance vs round](consensus_vs_round.png)\n\n"
     << "Each plot shows the average model (left) beside the lowest peer (right)"
     << (several ? ", shaded one standard deviation either side of the mean over seeds" : "")
     << "; more than " << kPlotColours << " settings are split into rows of panels. "
     << "Bytes are on a log axis. SVG versions sit beside the PNGs; the data is in "
        "curves.dat, compare.csv (one row per run) and compare_summary.csv (one per setting).\n";
  write_predictor_section(md, rows, groups);
  if (has_attack_section(rows)) write_attack_section(md, rows, groups);
  write_membership_section(md, rows, groups);
}

}  // namespace

void write_compare(const std::string& dir, const std::vector<CompareRow>& rows,
                   const std::vector<SimResult>& results, double target_accuracy) {
  GOSSIP_CHECK_EQ(rows.size(), results.size());
  make_output_dir(dir);
  const auto groups = group_compare_rows(rows);
  // A real sweep (gossip compare --run) measured wall-clock seconds; a simulated one has both.
  const bool measured = !rows.empty() && rows.front().measured;
  const char* to_target_seconds = measured ? "wall_seconds_to_target" : "sim_seconds_to_target";
  write_compare_rows(dir, rows, to_target_seconds, target_accuracy);
  write_compare_summary(dir, rows, groups, to_target_seconds, target_accuracy);
  {
    // One block per setting, separated by two blank lines (gnuplot `index`).
    std::ofstream dat(dir + "/curves.dat", std::ios::trunc);
    for (const auto& g : groups) write_curves(dat, g, rows, results);
  }
  write_compare_report(dir, rows, groups, target_accuracy);
  if (has_attack_section(rows)) write_attack_data(dir, rows, groups);
}

namespace {

/// The bottom of the consensus axis: a decade under the smallest positive value drawn.
double consensus_floor(const std::string& dir) {
  double floor = 0.0;
  {
    std::ifstream dat(dir + "/curves.dat");
    std::string line;
    while (std::getline(dat, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      double v[10] = {};
      for (double& x : v) in >> x;
      if (in && v[8] > 0 && (floor == 0 || v[8] < floor)) floor = v[8];
    }
  }
  return floor > 0 ? floor / 10 : 1e-12;
}

/// The compare plots' curves from curves.dat, a series a setting (shaded by its spread over
/// seeds when some setting has several), the settings in chunks of at most kPlotColours, one
/// row of panels each.
class CompareCurves {
 public:
  explicit CompareCurves(const std::vector<CompareGroup>& groups) : groups_(groups) {
    for (const auto& g : groups) spread_ = spread_ || g.rows.size() > 1;
    for (std::size_t i = 0; i < groups.size(); i += kPlotColours)
      chunks_.emplace_back(i, std::min(groups.size(), i + kPlotColours));
  }

  std::size_t chunks() const { return chunks_.size(); }

  /// Chunk c's settings: column y against column x (divided by `divisor`).
  std::vector<PlotSeries> series(std::size_t c, int x, int y, double divisor) const {
    std::vector<PlotSeries> out;
    for (std::size_t i = chunks_[c].first; i < chunks_[c].second; ++i)
      out.push_back(PlotSeries{"curves.dat", static_cast<int>(i), x, y, divisor,
                               groups_[i].label, spread_ ? y + 1 : 0});
    return out;
  }

  /// " (2/3)" after a panel's title when there are several chunks.
  std::string part(std::size_t c) const {
    return chunks_.size() > 1 ? cat(" (", c + 1, "/", chunks_.size(), ")") : std::string();
  }

 private:
  const std::vector<CompareGroup>& groups_;
  bool spread_ = false;
  std::vector<std::pair<std::size_t, std::size_t>> chunks_;
};

/// Accuracy against rounds, bytes and seconds: the average model beside the lowest peer.
void add_accuracy_plots(std::vector<Plot>& plots, const CompareCurves& curves,
                        const std::vector<CompareRow>& rows, const std::string& title) {
  struct Axes {
    const char* name;
    const char* x_label;
    int x;
    double divisor;
    bool log_x;
  };
  const Axes accuracy_axes[] = {
      {"accuracy_vs_round", "round", 1, 1.0, false},
      {"accuracy_vs_bytes", "MB sent per peer (log scale)", 4, 1e6, true},
      {"accuracy_vs_seconds",
       !rows.empty() && rows.front().measured ? "wall-clock seconds (measured)" : "simulated seconds",
       3, 1.0, false},
  };
  for (const Axes& a : accuracy_axes) {
    Plot p;
    p.name = a.name;
    p.title = title;
    p.x_label = a.x_label;
    p.y_label = "test accuracy";
    p.log_x = a.log_x;
    p.columns = 2;
    for (std::size_t c = 0; c < curves.chunks(); ++c) {
      p.panels.push_back(PlotPanel{cat("average model", curves.part(c)),
                                   curves.series(c, a.x, 5, a.divisor)});
      p.panels.push_back(PlotPanel{cat("lowest peer", curves.part(c)),
                                   curves.series(c, a.x, 7, a.divisor)});
    }
    plots.push_back(std::move(p));
  }
}

Plot consensus_plot(const CompareCurves& curves, const std::string& title, double floor) {
  Plot consensus;
  consensus.name = "consensus_vs_round";
  consensus.title = title;
  consensus.x_label = "round";
  consensus.y_label = "consensus distance (0 drawn at the bottom)";
  consensus.log_y = true;
  consensus.y_floor = floor;
  consensus.columns = 1;
  for (std::size_t c = 0; c < curves.chunks(); ++c)
    consensus.panels.push_back(PlotPanel{cat("consensus distance", curves.part(c)),
                                         curves.series(c, 1, 9, 1.0)});
  if (consensus.panels.size() == 1) {
    consensus.series = consensus.panels.front().series;
    consensus.panels.clear();
  }
  return consensus;
}

}  // namespace

bool draw_compare_plots(const std::string& dir, const std::vector<CompareRow>& rows,
                        std::string* why) {
  const auto groups = group_compare_rows(rows);
  const std::string title = compare_title(rows, groups);
  const double floor = consensus_floor(dir);
  const CompareCurves curves(groups);
  std::vector<Plot> plots;
  add_accuracy_plots(plots, curves, rows, title);
  plots.push_back(consensus_plot(curves, title, floor));
  if (has_attack_section(rows)) plots.push_back(attack_plot(rows, groups, title));
  return draw_plots(dir, plots, why);
}

}  // namespace gossip
