// cli/compare.cpp: `gossip compare CONFIG --out DIR` — a sweep of simulations over topologies
// (and optionally algorithms, periods, shards, seeds) on the same data, summarised as a table
// (compare.csv, report.md) and gnuplot plots. Each setting's own metrics.csv and summary.json go
// to DIR/runs/<n>-<label>/.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "src/cli/args.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/progress.hpp"
#include "gossip/sim.hpp"
#include "gossip/topology.hpp"

namespace gossip::cli {

namespace {

const char* kCompareHelp =
    "usage: gossip compare CONFIG [--out DIR] [--epochs N] [--workers N] [--quiet]\n"
    "\n"
    "Runs `gossip sim` once per setting of the sweep in CONFIG's compare section: every\n"
    "compare.topologies file, times compare.algorithms, compare.periods, compare.shards and\n"
    "compare.seeds when given (else the gossip/data/train values). All settings with the same\n"
    "shard and seed train on the same shards. See docs/sim.md.\n"
    "\n"
    "Writes DIR/compare.csv and DIR/report.md (one row per setting: spectral gap, rounds, epochs\n"
    "and simulated seconds until every peer reaches compare.target_accuracy, rounds until the\n"
    "average model does, final accuracy of the average model,\n"
    "final lowest peer accuracy, final consensus distance, bytes per peer), DIR/curves.dat,\n"
    "plots drawn by gnuplot (accuracy vs round, bytes and simulated seconds; consensus distance\n"
    "vs round, log scale; PNG and SVG) and DIR/runs/<n>-<label>/{metrics.csv,summary.json}.\n"
    "\n"
    "options:\n"
    "  --out DIR      where to write results (default: runs/ and the config's name)\n"
    "  --epochs N     override train.epochs for every setting\n"
    "  --workers N    override sim.workers (0 = number of cores)\n"
    "  --quiet        no progress bar\n"
    "\n"
    "exit codes: 0 done, 1 runtime failure (e.g. a setting diverged), 2 bad config, topology,\n"
    "data file or option\n";

std::string slug(std::size_t index, const std::string& label) {
  std::string s = cat(index + 1, "-");
  for (char c : label) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')
                                ? c : '_';
  return s;
}

}  // namespace

int run_compare(int argc, char** argv) {
  Args args(argc, argv, {"out", "epochs", "workers"}, {"quiet"});
  if (args.help()) {
    std::printf("%s", kCompareHelp);
    return kExitOk;
  }
  const std::string out =
      args.get_or("out", "runs/" + std::filesystem::path(args.config_path()).stem().string());

  RunConfig base = load_config(args.config_path());
  base.train.epochs = args.get_double("epochs", base.train.epochs);
  base.sim.workers = static_cast<int>(args.get_int("workers", base.sim.workers));
  if (base.train.epochs <= 0) throw InputError("--epochs must be positive");
  if (base.sim.consensus_only)
    throw InputError(cat(base.path, ": sim.consensus_only: compare sweeps train (use gossip sim "
                                    "--consensus for mixing rates)"));
  const auto settings = compare_settings(base);
  // Load and analyse every topology first, so a bad file fails before hours of simulation.
  std::map<std::string, Topology> topologies;
  std::map<std::string, TopologyReport> analyses;
  for (const auto& s : settings) {
    const std::string& path = s.config.gossip.topology;
    if (topologies.count(path)) continue;
    topologies.emplace(path, load_topology(path));
    analyses.emplace(path, analyze(topologies.at(path)));
  }
  std::printf("gossip compare: %s, %zu settings, %.3g epochs each, target accuracy %.3g\n",
              base.path.c_str(), settings.size(), base.train.epochs,
              base.compare.target_accuracy);
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::uint64_t, DataSets> data;  // by seed (synthetic sets depend on it)
  std::vector<CompareRow> rows;
  std::vector<SimResult> results;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const CompareSetting& s = settings[i];
    const std::uint64_t data_key = base.data.synthetic ? s.config.train.seed : 0;
    if (!data.count(data_key)) data.emplace(data_key, load_datasets(s.config));
    const auto& path = s.config.gossip.topology;
    Progress progress;
    progress.enable(!args.has("quiet"));
    progress.note(cat("[", i + 1, "/", settings.size(), "] ", s.label, ": ",
                      topologies.at(path).n(), " peers, ", s.config.gossip.algorithm, ", period ",
                      s.config.gossip.period, ", shard ", s.config.data.shard, ", seed ",
                      s.config.train.seed, ", spectral gap ",
                      fixed(analyses.at(path).spectral_gap, 4)));
    std::string last = "evaluating...";
    SimHooks hooks;
    hooks.on_eval = [&](const EvalPoint& e) {
      last = cat("acc ", fixed(e.average_accuracy, 4), "  consensus ", sci(e.consensus_distance));
    };
    hooks.on_round = [&](std::int64_t done, std::int64_t total) {
      progress.update(done, total, last);
    };
    SimResult result = simulate(s.config, topologies.at(path), data.at(data_key), hooks);
    progress.finish();
    SimRunInfo info;
    info.config = base.path;
    info.topology = path;
    info.algorithm = s.config.gossip.algorithm;
    info.connected = analyses.at(path).connected;
    info.spectral_gap = analyses.at(path).spectral_gap;
    write_sim_outputs(out + "/runs/" + slug(i, s.label), result, info);
    rows.push_back(compare_row(s, analyses.at(path), result, base.compare.target_accuracy));
    const CompareRow& r = rows.back();
    std::printf("    final accuracy %.4f (lowest peer %.4f), rounds until every peer reaches "
                "%.3g: %s (average model: %s), consensus %.3g, %.1f s wall\n",
                r.final_accuracy, r.final_min_peer_accuracy, base.compare.target_accuracy,
                r.rounds_to_target < 0 ? "never" : std::to_string(r.rounds_to_target).c_str(),
                r.average_rounds_to_target < 0
                    ? "never" : std::to_string(r.average_rounds_to_target).c_str(),
                r.final_consensus_distance, r.wall_seconds);
    results.push_back(std::move(result));
    results.back().params.clear();  // only the curves are needed from here on
    write_compare(out, rows, results, base.compare.target_accuracy);  // partial results survive
  }

  std::string why;
  const bool plotted = draw_compare_plots(out, rows, &why);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n%-28s %8s %14s %14s %10s %10s %12s\n", "setting", "gap", "rounds (peers)",
              "rounds (avg)", "final acc", "min peer", "consensus");
  for (const auto& r : rows)
    std::printf("%-28s %8.4f %14s %14s %10.4f %10.4f %12.3g\n", r.label.c_str(),
                r.spectral_gap,
                r.rounds_to_target < 0 ? "-" : std::to_string(r.rounds_to_target).c_str(),
                r.average_rounds_to_target < 0
                    ? "-" : std::to_string(r.average_rounds_to_target).c_str(),
                r.final_accuracy, r.final_min_peer_accuracy, r.final_consensus_distance);
  std::printf("done in %s: wrote %s/report.md, compare.csv%s\n", duration_text(wall).c_str(),
              out.c_str(), plotted ? " and plots" : "");
  if (!plotted) std::fprintf(stderr, "gossip compare: warning: no plots: %s\n", why.c_str());
  return kExitOk;
}

}  // namespace gossip::cli
