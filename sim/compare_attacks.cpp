// sim/compare_attacks.cpp: gossip compare under attack. A run's figure that matters is what the
// honest peers (every peer but the attackers) end with, their lowest and their mean final test
// accuracy; the report lays them out per scenario as attacks by aggregates, beside the run
// without attack, and a plot draws the lowest against the attack, one line per aggregate.
#include "sim/compare_attacks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "gossip/core.hpp"

namespace gossip {

namespace {

/// One scenario of the sweep (its settings but aggregate and attack): which group is each cell.
struct Pivot {
  std::string scenario;
  std::vector<std::string> aggregates, attacks;  // in order of first appearance
  std::vector<int> attackers;                    // every attacker of its runs, ascending
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> cell;  // (attack, aggregate) -> group

  const CompareGroup* at(const std::vector<CompareGroup>& groups, std::size_t attack,
                         std::size_t aggregate) const {
    const auto it = cell.find({attack, aggregate});
    return it == cell.end() ? nullptr : &groups[it->second];
  }
  /// The row of the attack "none", or attacks.size() when the scenario has none.
  std::size_t none() const {
    return static_cast<std::size_t>(std::find(attacks.begin(), attacks.end(), "none") -
                                    attacks.begin());
  }
};

std::size_t place(std::vector<std::string>& list, const std::string& value) {
  const auto it = std::find(list.begin(), list.end(), value);
  if (it != list.end()) return static_cast<std::size_t>(it - list.begin());
  list.push_back(value);
  return list.size() - 1;
}

std::vector<Pivot> pivots(const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups) {
  std::vector<Pivot> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const CompareRow& r = rows[groups[g].rows.front()];
    auto p = std::find_if(out.begin(), out.end(),
                          [&](const Pivot& x) { return x.scenario == r.scenario; });
    if (p == out.end()) {
      out.push_back(Pivot{r.scenario, {}, {}, {}, {}});
      p = out.end() - 1;
    }
    p->cell[{place(p->attacks, r.attack), place(p->aggregates, r.aggregate)}] = g;
    std::set<int> all(p->attackers.begin(), p->attackers.end());
    for (std::size_t i : groups[g].rows) all.insert(rows[i].attackers.begin(), rows[i].attackers.end());
    p->attackers.assign(all.begin(), all.end());
  }
  return out;
}

std::string peer_list(const std::vector<int>& peers) {
  std::string s;
  for (std::size_t i = 0; i < peers.size(); ++i)
    s += cat(i == 0 ? "" : i + 1 == peers.size() ? " and " : ", ", peers[i]);
  return s;
}

/// A gnuplot data string: quoted, with no quote inside.
std::string quoted(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return "\"" + s + "\"";
}

/// One cell of the section's first table: "lowest / mean", and the runs that diverged.
std::string cell_text(const CompareGroup& g) {
  std::string s = cat(plus_minus(g.honest_accuracy_min, "%.4f"), " / ",
                      plus_minus(g.honest_accuracy_mean, "%.4f"));
  if (g.honest_diverged > 0)
    s += cat(" (diverged in ", g.honest_diverged, " of ", g.rows.size(), " runs)");
  return s;
}

void write_table(std::ostream& md, const Pivot& p, const std::vector<CompareGroup>& groups,
                 bool against_none) {
  md << "| attack |";
  for (const auto& a : p.aggregates) md << " `" << a << "` |";
  md << "\n|---|";
  for (std::size_t k = 0; k < p.aggregates.size(); ++k) md << "---:|";
  md << "\n";
  for (std::size_t a = 0; a < p.attacks.size(); ++a) {
    if (against_none && a == p.none()) continue;
    md << "| " << p.attacks[a] << " |";
    for (std::size_t k = 0; k < p.aggregates.size(); ++k) {
      const CompareGroup* g = p.at(groups, a, k);
      const CompareGroup* none = p.at(groups, p.none(), k);
      if (!g) {
        md << " - |";
      } else if (!against_none) {
        md << " " << cell_text(*g) << " |";
      } else if (none && g->honest_accuracy_min.n > 0 && none->honest_accuracy_min.n > 0) {
        char points[32];
        std::snprintf(points, sizeof points, "%+.1f",
                      100.0 * (g->honest_accuracy_min.mean - none->honest_accuracy_min.mean));
        md << " " << points << " |";
      } else {
        md << " - |";
      }
    }
    md << "\n";
  }
}

}  // namespace

void set_honest_figures(const RunConfig& config, const SimResult& result, CompareRow& row) {
  std::set<int> attackers;
  for (const Fault& f : config.faults)
    if (f.action == FaultAction::kAttack) attackers.insert(f.peers.begin(), f.peers.end());
  row.attackers.assign(attackers.begin(), attackers.end());
  const EvalPoint& last = result.evals.back();
  double sum = 0.0, lowest = std::numeric_limits<double>::infinity();
  int evaluated = 0;
  row.honest_diverged = 0;
  for (std::size_t p = 0; p < last.peers.size(); ++p) {
    const bool dead = p < result.alive_at_end.size() && !result.alive_at_end[p];
    if (attackers.count(static_cast<int>(p)) || dead) continue;
    const PeerEval& e = last.peers[p];
    if (!std::isfinite(e.train_loss)) ++row.honest_diverged;
    if (std::isnan(e.test_accuracy)) continue;  // not evaluated (sim.eval_peers)
    sum += e.test_accuracy;
    lowest = std::min(lowest, e.test_accuracy);
    ++evaluated;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  row.honest_accuracy_min = evaluated ? lowest : nan;
  row.honest_accuracy_mean = evaluated ? sum / evaluated : nan;
}

bool has_attack_section(const std::vector<CompareRow>& rows) {
  for (const CompareRow& r : rows)
    if (!r.attackers.empty() || r.aggregate != rows.front().aggregate ||
        r.attack != rows.front().attack)
      return true;
  return false;
}

void write_attack_section(std::ostream& md, const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups) {
  md << "\n## Honest peers under attack\n\n"
        "Each cell: the honest peers' lowest / mean final test accuracy (every peer alive at the "
        "end but the attackers; a row without attack counts every peer), the mean ± standard "
        "deviation over the seeds of the setting. A run in which an honest peer's training loss "
        "became NaN or infinite is kept, and its peers' accuracies are what their models score. "
        "The second table gives the change of the lowest honest accuracy against the same "
        "aggregate with no attack, in points. honest_accuracy.png draws the lowest and the mean "
        "against the attack, one line per aggregate.\n";
  for (const Pivot& p : pivots(rows, groups)) {
    md << "\n### " << (p.scenario.empty() ? std::string("all settings") : p.scenario);
    if (!p.attackers.empty())
      md << " (attacker" << (p.attackers.size() > 1 ? "s: peers " : ": peer ")
         << peer_list(p.attackers) << ")";
    md << "\n\n";
    write_table(md, p, groups, false);
    if (p.none() < p.attacks.size() && p.attacks.size() > 1) {
      md << "\nLowest honest accuracy against no attack (points):\n\n";
      write_table(md, p, groups, true);
    }
  }
}

void write_attack_data(const std::string& dir, const std::vector<CompareRow>& rows,
                       const std::vector<CompareGroup>& groups) {
  std::ofstream dat(dir + "/attacks.dat", std::ios::trunc);
  if (!dat) throw InputError(cat(dir, "/attacks.dat: cannot open for writing"));
  for (const Pivot& p : pivots(rows, groups))
    for (std::size_t k = 0; k < p.aggregates.size(); ++k) {
      dat << "# " << p.scenario << ", aggregate " << p.aggregates[k]
          << "\n# place attack honest_min honest_min_std honest_mean honest_mean_std\n";
      for (std::size_t a = 0; a < p.attacks.size(); ++a)
        if (const CompareGroup* g = p.at(groups, a, k)) {
          char line[256];
          std::snprintf(line, sizeof line, " %.6g %.6g %.6g %.6g\n", g->honest_accuracy_min.mean,
                        g->honest_accuracy_min.std, g->honest_accuracy_mean.mean,
                        g->honest_accuracy_mean.std);
          dat << a << " " << quoted(p.attacks[a]) << line;
        }
      dat << "\n\n";
    }
}

Plot attack_plot(const std::vector<CompareRow>& rows, const std::vector<CompareGroup>& groups,
                 const std::string& title) {
  Plot plot;
  plot.name = "honest_accuracy";
  plot.title = title;
  plot.x_label = "attack";
  plot.y_label = "final test accuracy";
  plot.rotate_x_tics = true;
  plot.columns = 2;
  const bool spread = std::any_of(groups.begin(), groups.end(),
                                  [](const CompareGroup& g) { return g.rows.size() > 1; });
  int block = 0;
  for (const Pivot& p : pivots(rows, groups)) {
    PlotPanel lowest{cat(p.scenario, p.scenario.empty() ? "" : ": ", "lowest honest peer"), {}};
    PlotPanel mean{cat(p.scenario, p.scenario.empty() ? "" : ": ", "mean of the honest peers"), {}};
    for (const std::string& aggregate : p.aggregates) {
      PlotSeries s{"attacks.dat", block++, 1, 3, 1.0, aggregate, spread ? 4 : 0};
      s.x_tic_column = 2;
      s.points = true;
      lowest.series.push_back(s);
      s.y_column = 5;
      s.spread_column = spread ? 6 : 0;
      mean.series.push_back(s);
    }
    plot.panels.push_back(std::move(lowest));
    plot.panels.push_back(std::move(mean));
  }
  return plot;
}

}  // namespace gossip
