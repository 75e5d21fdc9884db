// sim/compare.cpp: topology sweeps. Builds the settings of a sweep, turns each simulation into a
// table row (rounds and simulated seconds to a target accuracy, final figures) and writes
// compare.csv, curves.dat and report.md, and describes the plots that report draws.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

namespace {

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

std::string number_or_dash(double v, const char* format) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::vector<CompareSetting> compare_settings(const RunConfig& base) {
  const CompareConfig& c = base.compare;
  if (c.topologies.empty())
    throw InputError(cat(base.path, ": compare.topologies: list at least one topology file"));
  const auto algorithms = c.algorithms.empty() ? std::vector<std::string>{base.gossip.algorithm}
                                               : c.algorithms;
  const auto periods = c.periods.empty() ? std::vector<int>{base.gossip.period} : c.periods;
  const auto shards = c.shards.empty() ? std::vector<std::string>{base.data.shard} : c.shards;
  const auto seeds = c.seeds.empty() ? std::vector<std::uint64_t>{base.train.seed} : c.seeds;
  for (const auto& a : algorithms)
    if (a != "dpsgd" && a != "local_sgd" && a != "push_sum" && a != "async")
      throw InputError(cat(base.path, ": compare.algorithms: unknown '", a,
                           "' (expected dpsgd, local_sgd, push_sum or async)"));
  for (int p : periods)
    if (p < 1) throw InputError(cat(base.path, ": compare.periods: ", p, " is not positive"));
  std::vector<CompareSetting> out;
  for (const auto& t : c.topologies)
    for (const auto& a : algorithms)
      for (int p : periods)
        for (const auto& s : shards)
          for (auto seed : seeds) {
            CompareSetting setting;
            setting.config = base;
            setting.config.gossip.topology = t;
            setting.config.gossip.algorithm = a;
            // A swept algorithm is where compare.algorithms lists it.
            if (auto at = base.lines.find("compare.algorithms");
                !c.algorithms.empty() && at != base.lines.end())
              setting.config.lines["gossip.algorithm"] = at->second;
            setting.config.gossip.period = p;
            setting.config.data.shard = s;
            setting.config.train.seed = seed;
            setting.label = stem(t);
            if (algorithms.size() > 1) setting.label += " " + a;
            if (periods.size() > 1) setting.label += cat(" H=", p);
            if (shards.size() > 1) setting.label += " " + s;
            if (seeds.size() > 1) setting.label += cat(" seed=", seed);
            out.push_back(std::move(setting));
          }
  return out;
}

CompareRow compare_row(const CompareSetting& setting, const TopologyReport& analysis,
                       const SimResult& result, double target_accuracy) {
  const RunConfig& c = setting.config;
  CompareRow row;
  row.label = setting.label;
  row.topology = c.gossip.topology;
  row.algorithm = c.gossip.algorithm;
  row.shard = c.data.shard == "dirichlet" ? cat("dirichlet(", c.data.alpha, ")") : c.data.shard;
  row.period = c.gossip.period;
  row.seed = c.train.seed;
  row.peers = analysis.n;
  row.connected = analysis.connected;
  row.spectral_gap = analysis.spectral_gap;
  for (const EvalPoint& e : result.evals) {
    if (e.round == 0) continue;
    if (row.rounds_to_target < 0 && e.peer_accuracy_min >= target_accuracy) {
      row.rounds_to_target = e.round;
      row.epochs_to_target = e.epoch;
      row.sim_seconds_to_target = e.sim_seconds;
    }
    if (row.average_rounds_to_target < 0 && e.average_accuracy >= target_accuracy)
      row.average_rounds_to_target = e.round;
  }
  const EvalPoint& last = result.evals.back();
  row.final_accuracy = last.average_accuracy;
  row.final_min_peer_accuracy = last.peer_accuracy_min;
  row.final_consensus_distance = last.consensus_distance;
  row.bytes_per_peer = static_cast<double>(result.bytes_sent) / std::max(1, analysis.n);
  row.sim_seconds = result.sim_seconds;
  row.wall_seconds = result.wall_seconds;
  return row;
}

void write_compare(const std::string& dir, const std::vector<CompareRow>& rows,
                   const std::vector<SimResult>& results, double target_accuracy) {
  GOSSIP_CHECK_EQ(rows.size(), results.size());
  make_output_dir(dir);
  {
    std::ofstream csv(dir + "/compare.csv", std::ios::trunc);
    if (!csv) throw InputError(cat(dir, "/compare.csv: cannot open for writing"));
    csv << "setting,topology,algorithm,period,shard,seed,peers,connected,spectral_gap,"
           "target_accuracy,rounds_to_target,epochs_to_target,sim_seconds_to_target,"
           "average_rounds_to_target,final_accuracy,final_min_peer_accuracy,final_consensus_distance,bytes_per_peer,"
           "sim_seconds,wall_seconds\n";
    for (const auto& r : rows) {
      char line[1024];
      std::snprintf(line, sizeof line,
                    "%s,%s,%s,%d,%s,%llu,%d,%s,%.6g,%.4g,%lld,%.4g,%.6g,%lld,%.6g,%.6g,%.6g,"
                    "%.6g,%.6g,%.3f\n",
                    r.label.c_str(), r.topology.c_str(), r.algorithm.c_str(), r.period,
                    r.shard.c_str(), static_cast<unsigned long long>(r.seed), r.peers,
                    r.connected ? "true" : "false", r.spectral_gap, target_accuracy,
                    static_cast<long long>(r.rounds_to_target), r.epochs_to_target,
                    r.sim_seconds_to_target, static_cast<long long>(r.average_rounds_to_target),
                    r.final_accuracy, r.final_min_peer_accuracy,
                    r.final_consensus_distance, r.bytes_per_peer, r.sim_seconds, r.wall_seconds);
      csv << line;
    }
  }
  {
    // One block per setting, separated by two blank lines (gnuplot `index`).
    std::ofstream dat(dir + "/curves.dat", std::ios::trunc);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const double peers = std::max(1, rows[i].peers);
      dat << "# " << rows[i].label
          << "\n# round epoch sim_seconds bytes_per_peer accuracy min_peer_accuracy "
             "consensus_distance\n";
      for (const auto& e : results[i].evals) {
        char line[256];
        std::snprintf(line, sizeof line, "%lld %.5f %.6g %.6g %.6g %.6g %.6g\n",
                      static_cast<long long>(e.round), e.epoch, e.sim_seconds,
                      static_cast<double>(e.bytes_sent) / peers, e.average_accuracy,
                      e.peer_accuracy_min, e.consensus_distance);
        dat << line;
      }
      dat << "\n\n";
    }
  }
  std::ofstream md(dir + "/report.md", std::ios::trunc);
  if (!md) throw InputError(cat(dir, "/report.md: cannot open for writing"));
  md << "# Topology comparison\n\n"
     << "Target accuracy: " << target_accuracy << ". Rounds, epochs and simulated seconds "
     << "to target are those of the first evaluation at which every peer's own model reaches "
     << "it (the lowest peer accuracy; - = never): how long slow mixing holds the peers back. "
     << "The average model's rounds to target are given too. Final accuracy is the average "
     << "model's.\n\n"
     << "| setting | peers | connected | spectral gap | rounds to target | epochs to target | "
        "sim s to target | rounds to target (average model) | final accuracy | final lowest "
        "peer accuracy | final consensus distance | MB sent per peer |\n"
     << "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    char line[1024];
    std::snprintf(line, sizeof line,
                  "| %s | %d | %s | %.4f | %s | %s | %s | %s | %.4f | %.4f | %.3g | %.1f |\n",
                  r.label.c_str(), r.peers, r.connected ? "yes" : "no", r.spectral_gap,
                  number_or_dash(static_cast<double>(r.rounds_to_target), "%.0f").c_str(),
                  number_or_dash(r.epochs_to_target, "%.2f").c_str(),
                  number_or_dash(r.sim_seconds_to_target, "%.1f").c_str(),
                  number_or_dash(static_cast<double>(r.average_rounds_to_target), "%.0f").c_str(),
                  r.final_accuracy,
                  r.final_min_peer_accuracy, r.final_consensus_distance, r.bytes_per_peer / 1e6);
    md << line;
  }
  md << "\n![accuracy vs round](accuracy_vs_round.png)\n"
     << "![accuracy vs bytes](accuracy_vs_bytes.png)\n"
     << "![accuracy vs simulated seconds](accuracy_vs_seconds.png)\n"
     << "![consensus distance vs round](consensus_vs_round.png)\n\n"
     << "SVG versions sit beside the PNGs; the data is in curves.dat and compare.csv.\n";
}

bool draw_compare_plots(const std::string& dir, const std::vector<CompareRow>& rows,
                        std::string* why) {
  struct Axes {
    const char* name;
    const char* x_label;
    const char* y_label;
    int x, y;
    bool log_y;
  };
  const Axes axes[] = {
      {"accuracy_vs_round", "round", "test accuracy (average model)", 1, 5, false},
      {"accuracy_vs_bytes", "MB sent per peer", "test accuracy (average model)", 4, 5, false},
      {"accuracy_vs_seconds", "simulated seconds", "test accuracy (average model)", 3, 5, false},
      {"consensus_vs_round", "round", "consensus distance", 1, 7, true},
  };
  std::vector<Plot> plots;
  for (const Axes& a : axes) {
    Plot p{a.name, "", a.x_label, a.y_label, a.log_y, {}};
    for (std::size_t i = 0; i < rows.size(); ++i)
      p.series.push_back(PlotSeries{"curves.dat", static_cast<int>(i), a.x, a.y,
                                    a.x == 4 ? 1e6 : 1.0, rows[i].label});
    plots.push_back(std::move(p));
  }
  return draw_plots(dir, plots, why);
}

}  // namespace gossip
