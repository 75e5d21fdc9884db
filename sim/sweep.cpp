// sim/sweep.cpp: `gossip compare`'s sweep: one simulation per setting (topologies x algorithms x
// periods x shards x seeds), or with --run one real run of peer processes per setting, each
// setting's own outputs in DIR/runs/<n>-<label>/, the table (compare.csv, report.md) rewritten
// after every setting so partial results survive, then plots.
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <map>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/faults.hpp"
#include "gossip/gossip.hpp"
#include "gossip/progress.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"

namespace gossip {

namespace {

std::string slug(std::size_t index, const std::string& label) {
  std::string s = cat(index + 1, "-");
  for (char c : label) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')
                                ? c : '_';
  return s;
}

/// One setting simulated (gossip compare without --run), with a progress bar headed by `line`;
/// its metrics.csv and summary.json go to `dir`. Data sets are loaded once per seed into `data`.
SimResult simulate_setting(const CompareSetting& s, const Topology& topology,
                           const TopologyReport& analysis, std::map<std::uint64_t, DataSets>& data,
                           const RunConfig& base, bool progress_bar, const std::string& line,
                           const std::string& dir) {
  const std::uint64_t data_key = base.data.synthetic ? s.config.train.seed : 0;
  if (!data.count(data_key)) data.emplace(data_key, load_datasets(s.config));
  Progress progress;
  progress.enable(progress_bar);
  progress.note(line);
  std::string last = "evaluating...";
  SimHooks hooks;
  // Under attack, honest peers that diverge are the attack's result, not the run's failure.
  for (const Fault& f : s.config.faults)
    hooks.divergence_is_a_result = hooks.divergence_is_a_result || f.action == FaultAction::kAttack;
  hooks.on_eval = [&](const EvalPoint& e) {
    last = cat("acc ", fixed(e.average_accuracy, 4), "  consensus ", sci(e.consensus_distance));
  };
  hooks.on_round = [&](std::int64_t done, std::int64_t total) {
    progress.update(done, total, last);
  };
  SimResult result = simulate(s.config, topology, data.at(data_key), hooks);
  progress.finish();
  SimRunInfo info;
  info.config = base.path;
  info.topology = s.config.gossip.topology;
  info.algorithm = algorithm_name(s.config.gossip.algorithm);
  info.connected = analysis.connected;
  info.spectral_gap = 1.0 - analysis.rho_per_round;
  info.period_spectral_gap = analysis.spectral_gap;
  write_sim_outputs(dir, result, info);
  return result;
}

/// Every graph of a sweep, loaded and analysed once.
struct Graphs {
  std::map<std::string, Topology> topologies;
  std::map<std::string, TopologyReport> analyses;
};

/// Loads and analyses every topology of `settings` and checks each setting against its graph
/// (its algorithm, its faults and attack cell), so a bad file or cell fails before hours of
/// simulation.
Graphs load_graphs(const RunConfig& base, const std::vector<CompareSetting>& settings) {
  Graphs g;
  for (const auto& s : settings) {
    const std::string& path = s.config.gossip.topology;
    if (!g.topologies.count(path)) g.topologies.emplace(path, load_topology(path));
    check_algorithm(s.config, g.topologies.at(path));  // every algorithm on every graph
    try {
      check_faults(s.config, g.topologies.at(path));   // and every attack cell
    } catch (const InputError& e) {
      if (base.compare.attacks.empty()) throw;
      throw InputError(cat(e.what(), " (setting '", s.label, "': the config's faults: and "
                           "its compare.attacks cell)"));
    }
    if (!g.analyses.count(path)) g.analyses.emplace(path, analyze(g.topologies.at(path), kNeighboursGamma));
  }
  return g;
}

/// compare.averaging_rounds: the pure-averaging pass of every topology, each printed.
std::vector<AveragingCheck> averaging_pass(const RunConfig& base, const Graphs& graphs) {
  std::vector<AveragingCheck> averaging;
  if (base.compare.averaging_rounds <= 0) return averaging;
  for (const auto& t : base.compare.topologies) {
    averaging.push_back(averaging_check(base, t, graphs.topologies.at(t), graphs.analyses.at(t),
                                        base.compare.averaging_rounds));
    const AveragingCheck& a = averaging.back();
    if (a.exact_predicted)
      std::printf("pure averaging on %s: exact average after %s (predicted after %lld)\n",
                  a.label.c_str(),
                  a.exact_after >= 0
                      ? cat(a.exact_after, a.exact_after == 1 ? " round" : " rounds").c_str()
                      : "never",
                  static_cast<long long>(graphs.analyses.at(t).exact_after));
    else
      std::printf("pure averaging on %s: consensus distance x%.4f per round over rounds "
                  "%lld-%lld, predicted rho^2 = %.4f (%+.1f%%)%s\n",
                  a.label.c_str(), a.measured, static_cast<long long>(a.first),
                  static_cast<long long>(a.last), a.predicted,
                  100.0 * (a.measured - a.predicted) / a.predicted,
                  a.agrees() ? "" : "  DISAGREES");
    if (std::isfinite(a.predicted_rounds_1000x) && !a.exact_predicted)
      std::printf("  disagreement 1000x lower after %s (predicted by the gap: %.0f)\n",
                  a.measured_rounds_1000x >= 0
                      ? cat(a.measured_rounds_1000x, " rounds").c_str()
                      : cat("more than ", a.distance.size() - 1, " rounds").c_str(),
                  a.predicted_rounds_1000x);
    std::fflush(stdout);
  }
  return averaging;
}

/// One setting's result, under its line: accuracy, rounds to the target, consensus, cost.
void print_setting_result(const CompareRow& r, double target) {
  auto rounds = [](double v) { return v < 0 ? std::string("never") : fixed(v, 1); };
  std::printf("    final accuracy %.4f (lowest peer %.4f), rounds until every peer reaches "
              "%.3g: %s (average model: %s), consensus %.3g, %.1f s wall, %.3g MB sent per "
              "peer\n",
              r.final_accuracy, r.final_min_peer_accuracy, target,
              rounds(r.to_target.round).c_str(), rounds(r.average_to_target.round).c_str(),
              r.final_consensus_distance, r.wall_seconds, r.bytes_per_peer / 1e6);
  if (!r.attackers.empty())
    std::printf("    honest peers (all but %zu attacker%s): lowest %.4f, mean %.4f%s\n",
                r.attackers.size(), r.attackers.size() > 1 ? "s" : "", r.honest_accuracy_min,
                r.honest_accuracy_mean,
                r.honest_diverged ? cat(", ", r.honest_diverged, " diverged").c_str() : "");
  std::fflush(stdout);
}

/// The sweep's final table: one line per setting, the mean (and standard deviation over seeds)
/// of what the report says.
void print_sweep_table(const std::vector<CompareRow>& rows, bool real) {
  const auto groups = group_compare_rows(rows);
  auto shown = [](const Spread& sp, int digits) {
    if (sp.n == 0) return std::string("-");
    std::string t = fixed(sp.mean, digits);
    if (sp.n > 1) t += "+-" + fixed(sp.std, digits);
    if (sp.n < sp.of) t += cat(" (", sp.n, "/", sp.of, ")");
    return t;
  };
  std::printf("\n%s\n%-26s %7s %16s %14s %16s %16s %10s\n",
              compare_title(rows, groups).c_str(), "setting", "gap", "rounds (peers)",
              real ? "wall s (peers)" : "sim s (peers)", "final acc", "min peer", "consensus");
  for (const auto& g : groups)
    std::printf("%-26s %7.4f %16s %14s %16s %16s %10.3g\n", g.label.c_str(),
                rows[g.rows.front()].spectral_gap, shown(g.rounds_to_target, 1).c_str(),
                shown(g.seconds_to_target, 3).c_str(), shown(g.final_accuracy, 4).c_str(),
                shown(g.final_min_peer_accuracy, 4).c_str(), g.final_consensus_distance.mean);
}

/// The sweep's first line: the config, its settings, the target, real runs or simulations.
void print_sweep_start(const RunConfig& base, std::size_t settings, const RealRuns* real) {
  std::printf("gossip compare: %s, %zu settings, %.3g epochs each, target accuracy %.3g%s\n",
              base.path.c_str(), settings, base.train.epochs,
              base.compare.target_accuracy,
              real ? cat(", real runs (",
                         real->links == "loopback" ? "over loopback"
                                                   : "emulated links " + real->links,
                         ")").c_str()
                   : "");
  std::fflush(stdout);
}

/// Setting i's line, "[i/count] LABEL: ...": its graph, algorithm, period, shard, attack and
/// seed.
std::string setting_line(const CompareSetting& s, std::size_t i, std::size_t count,
                         const Graphs& graphs) {
  const auto& path = s.config.gossip.topology;
  const auto& topologies = graphs.topologies;
  const auto& analyses = graphs.analyses;
  return cat("[", i + 1, "/", count, "] ", s.label, ": ",
             topologies.at(path).n(), " peers, ", algorithm_name(s.config.gossip.algorithm),
             traits(s.config.gossip.algorithm).compresses
                 ? cat(" (", describe_choco(s.config.gossip.choco), ")")
                 : std::string(),
             ", period ",
             s.config.gossip.period, ", shard ", s.config.data.shard,
             s.config.gossip.aggregate.kind == Aggregate::kMean && s.attack == "none"
                 ? std::string()
                 : cat(", aggregate ", s.aggregate, ", attack ", s.attack),
             ", seed ", s.config.train.seed, ", spectral gap per round ",
             fixed(1.0 - analyses.at(path).rho_per_round, 4));
}

}  // namespace

int run_sweep(const RunConfig& base, const std::string& out, bool progress_bar,
              const RealRuns* real) {
  if (real) check_real_sweep(base);
  const auto settings = compare_settings(base);
  const Graphs graphs = load_graphs(base, settings);
  make_output_dir(out);  // once the settings are checked, and before the sweep, not after it
  const auto& topologies = graphs.topologies;
  const auto& analyses = graphs.analyses;
  print_sweep_start(base, settings.size(), real);

  const auto t0 = std::chrono::steady_clock::now();
  // The graphs against their spectra first: no data, seconds per graph.
  const std::vector<AveragingCheck> averaging = averaging_pass(base, graphs);
  std::map<std::uint64_t, DataSets> data;  // by seed (synthetic sets depend on it)
  std::vector<CompareRow> rows;
  std::vector<SimResult> results;
  int code = kExitOk;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const CompareSetting& s = settings[i];
    const auto& path = s.config.gossip.topology;
    const std::string line = setting_line(s, i, settings.size(), graphs);
    const std::string dir = out + "/runs/" + slug(i, s.label);
    SimResult result;
    if (real) {
      std::printf("%s, real run into %s\n", line.c_str(), dir.c_str());
      std::fflush(stdout);
      code = real->run(s, dir);
      if (code != kExitOk) {
        std::fprintf(stderr, "gossip compare: the run of %s ended with exit code %d; the sweep "
                     "stops there (%s holds its outputs)\n", s.label.c_str(), code, dir.c_str());
        break;
      }
      result = read_real_run(dir);
    } else {
      result = simulate_setting(s, topologies.at(path), analyses.at(path), data, base,
                                progress_bar, line, dir);
    }
    rows.push_back(compare_row(s, analyses.at(path), result, base.compare.target_accuracy, real));
    print_setting_result(rows.back(), base.compare.target_accuracy);
    results.push_back(std::move(result));
    results.back().params.clear();  // only the curves are needed from here on
    write_compare(out, rows, results, base.compare.target_accuracy);  // partial results survive
  }
  if (rows.empty()) return code;

  std::string why;
  const bool plotted = draw_compare_plots(out, rows, &why);
  std::string averaging_why;
  if (!averaging.empty() && !write_averaging(out, averaging, &averaging_why))
    std::fprintf(stderr, "gossip compare: warning: no averaging plot: %s\n",
                 averaging_why.c_str());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_sweep_table(rows, real != nullptr);
  std::printf("done in %s: wrote %s/report.md, compare.csv%s\n", duration_text(wall).c_str(),
              out.c_str(), plotted ? " and plots" : "");
  if (!plotted) std::fprintf(stderr, "gossip compare: warning: no plots: %s\n", why.c_str());
  return code;
}

}  // namespace gossip
