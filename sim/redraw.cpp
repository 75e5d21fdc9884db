// sim/redraw.cpp: gossip plot for a finished sweep — the settings' labels from compare.csv, then
// draw_compare_plots over the curves.dat the sweep wrote. Only glue: the plots are compare's.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/core.hpp"
#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

void redraw_compare(const std::string& dir) {
  const std::string path = dir + "/compare.csv";
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) throw InputError(cat(path, ": cannot read"));
  const auto header = split_csv_line(line);
  if (header.empty() || header.front() != "setting")
    throw InputError(cat(path, ":1: expected a header starting with 'setting'"));
  if (!std::filesystem::exists(dir + "/curves.dat"))
    throw InputError(cat(dir, "/curves.dat: missing (the sweep's curves)"));
  std::vector<CompareRow> rows;
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const auto fields = split_csv_line(line);
    if (fields.size() != header.size())
      throw InputError(cat(path, ":", n, ": expected ", header.size(), " values, got ",
                           fields.size()));
    // What the plots use: the setting and its group, and what the title says of the sweep.
    auto field = [&](const char* name) -> std::string {
      for (std::size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return fields[i];
      return {};
    };
    CompareRow row;
    row.label = fields.front();
    row.group = field("group").empty() ? row.label : field("group");
    row.topology = field("topology");
    row.algorithm = field("algorithm");
    row.shard = field("shard");
    row.compress = field("compress");
    row.measured = field("mode") == "real";  // gossip compare --run: wall-clock seconds
    row.links = field("links");
    // Sweeps under attack: what the plot of honest accuracies pivots on (attacks.dat).
    row.scenario = field("scenario");
    row.aggregate = field("aggregate");
    row.attack = field("attack");
    std::istringstream attackers(field("attackers"));
    for (int p; attackers >> p;) row.attackers.push_back(p);
    try {
      row.peers = std::stoi(field("peers"));
      row.seed = std::stoull(field("seed"));
      row.samples_min = std::stoll(field("samples_min"));
      row.samples_max = std::stoll(field("samples_max"));
    } catch (const std::exception&) {
      // An older compare.csv without these columns: the title says less.
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw InputError(cat(path, ": no settings"));
  std::string why;
  if (!draw_compare_plots(dir, rows, &why)) throw RuntimeError(why);
}

}  // namespace gossip
