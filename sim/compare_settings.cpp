// sim/compare_settings.cpp: the settings of a sweep. Each axis of the compare section (topologies,
// algorithms, choco's compressors, periods, shards, aggregates, attacks, seeds) is one row of a
// table: how many values it gives a setting and what its i-th value does to it. The sweep is
// their product, outermost first; labels name only what varies.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "gossip/core.hpp"
#include "gossip/gossip.hpp"
#include "gossip/sim.hpp"

namespace gossip {

namespace {

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

/// One axis of the sweep: its values for a setting (choco's compressors apply to choco alone),
/// and what the i-th does to the setting.
struct Axis {
  std::function<std::size_t(const CompareSetting&)> size;
  std::function<void(std::size_t i, CompareSetting&)> apply;
};

/// "clipped", "clipped tau=0.5", "clipped ratio=1", "trimmed_mean b=2": short, with no comma
/// (a CSV field).
std::string aggregate_label(const AggregateConfig& a) {
  const AggregateTraits& row = traits(a.kind);
  const AggregateConfig defaults;
  std::string s = row.name;
  if (row.tau && a.tau > 0) return cat(s, " tau=", a.tau);  // a fixed radius: b has no use
  if (row.tau && a.ratio != defaults.ratio) s += cat(" ratio=", a.ratio);
  if (row.byzantine && a.byzantine != defaults.byzantine) s += cat(" b=", a.byzantine);
  return s;
}

/// "sign_flip s=1", "alie z=4"; with the peers ("peers 3+5") and rounds ("rounds 50-99",
/// "from round 50") when the sweep's attacks differ in them. "none" for a cell without one.
std::string attack_label(const Fault& f, bool peers, bool rounds) {
  if (f.action != FaultAction::kAttack) return "none";
  const AttackTraits& t = attack_traits(f.attack);
  std::string s = t.name;
  if (*t.parameter) s += cat(" ", t.parameter, "=", f.parameter);
  if (peers) {
    s += " peers ";
    for (std::size_t i = 0; i < f.peers.size(); ++i) s += cat(i ? "+" : "", f.peers[i]);
  }
  if (rounds)
    s += f.to_round > 0 ? cat(" rounds ", f.round, "-", f.to_round - 1)
                        : cat(" from round ", f.round);
  return s;
}

/// The attack entries a config's own schedule holds, as one label ("none" when it has none).
std::string schedule_attacks(const std::vector<Fault>& faults) {
  std::string s;
  for (const Fault& f : faults)
    if (f.action == FaultAction::kAttack) s += (s.empty() ? "" : " + ") + attack_label(f, true, f.round > 1);
  return s.empty() ? "none" : s;
}

/// Refuses two values of one axis that would make the same setting (the same label).
void check_distinct(const RunConfig& base, const char* key, const std::vector<std::string>& labels) {
  for (std::size_t j = 0; j < labels.size(); ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (labels[i] == labels[j])
        throw InputError(cat(base.where(cat(key, "[", j, "]")), ": the same as ", key, "[", i,
                             "] (", labels[i], "): each value is a setting of its own"));
}

/// The lines of `from` ("compare.attacks[2]...") as those of `to` ("faults[0]..."), so a
/// refusal of what the sweep put in a setting names the line that asked for it.
void copy_lines(RunConfig& config, const std::string& from, const std::string& to) {
  std::map<std::string, int> moved;
  for (const auto& [field, line] : config.lines)
    if (field.rfind(from, 0) == 0 &&
        (field.size() == from.size() || field[from.size()] == '.' || field[from.size()] == '['))
      moved[to + field.substr(from.size())] = line;
  config.lines.insert(moved.begin(), moved.end());
}

/// The axes that make a setting's algorithm: the algorithm itself, then choco's compressor
/// (one value for the others), which also drops what only some algorithms take.
std::vector<Axis> algorithm_axes(const RunConfig& base) {
  const CompareConfig& c = base.compare;
  auto algorithms =
      c.algorithms.empty() ? std::vector<AlgorithmKind>{base.gossip.algorithm} : c.algorithms;
  auto compressors =
      c.compress.empty() ? std::vector<CompressConfig>{base.gossip.choco.compress} : c.compress;
  const bool several_choco =
      compressors.size() > 1 ||
      (algorithms.size() > 1 && std::any_of(algorithms.begin(), algorithms.end(),
                                            [](AlgorithmKind a) { return traits(a).compresses; }));
  Axis algorithm{[=](const CompareSetting&) { return algorithms.size(); },
                 [=, &base](std::size_t i, CompareSetting& s) {
                   s.config.gossip.algorithm = algorithms[i];
                   // A swept algorithm is where compare.algorithms lists it.
                   if (auto at = base.lines.find("compare.algorithms");
                       !c.algorithms.empty() && at != base.lines.end())
                     s.config.lines["gossip.algorithm"] = at->second;
                   if (algorithms.size() > 1) s.label += cat(" ", traits(algorithms[i]).name);
                 }};
  Axis compressor{[=](const CompareSetting& s) {
                    return traits(s.config.gossip.algorithm).compresses ? compressors.size() : 1;
                  },
                  [=](std::size_t i, CompareSetting& s) {
                    const AlgorithmTraits& row = traits(s.config.gossip.algorithm);
                    // What only some algorithms take stays with them.
                    s.config.gossip.choco.compress = row.compresses ? compressors[i]
                                                                    : CompressConfig{};
                    if (!row.compresses) s.config.gossip.choco = ChocoConfig{};
                    if (!row.overlaps) s.config.gossip.overlap = false;
                    if (row.compresses && !compressors[i].sparse())
                      s.config.gossip.wire = WireFormat::kFp32;
                    if (row.compresses && several_choco)
                      s.label += cat(" ", describe(compressors[i]));
                  }};
  return {algorithm, compressor};
}

/// The axes of robust aggregation: gossip.aggregate, then the attack cell (its entry added to
/// the setting's faults). Both set the setting's short names; the first fixes its scenario.
std::vector<Axis> attack_axes(const RunConfig& base) {
  const CompareConfig& c = base.compare;
  std::vector<std::string> aggregate_labels, attack_labels;
  for (const auto& a : c.aggregates) aggregate_labels.push_back(aggregate_label(a));
  std::vector<const Fault*> entries;
  for (const Fault& f : c.attacks)
    if (f.action == FaultAction::kAttack) entries.push_back(&f);
  auto differ = [&](auto field) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const Fault* f) { return field(*f) != field(*entries.front()); });
  };
  const bool peers = differ([](const Fault& f) { return f.peers; });
  const bool rounds = differ([](const Fault& f) { return std::pair{f.round, f.to_round}; });
  for (const Fault& f : c.attacks) attack_labels.push_back(attack_label(f, peers, rounds));
  check_distinct(base, "compare.aggregates", aggregate_labels);
  check_distinct(base, "compare.attacks", attack_labels);
  Axis aggregate{[=](const CompareSetting&) { return std::max<std::size_t>(1, c.aggregates.size()); },
                 [=](std::size_t i, CompareSetting& s) {
                   s.scenario = s.label;
                   if (c.aggregates.empty()) {
                     s.aggregate = aggregate_label(s.config.gossip.aggregate);
                     return;
                   }
                   s.config.gossip.aggregate = c.aggregates[i];
                   s.config.lines.erase("gossip.aggregate");
                   copy_lines(s.config, cat("compare.aggregates[", i, "]"), "gossip.aggregate");
                   s.aggregate = aggregate_labels[i];
                   if (c.aggregates.size() > 1) s.label += cat(" ", s.aggregate);
                 }};
  Axis attack{[=](const CompareSetting&) { return std::max<std::size_t>(1, c.attacks.size()); },
              [=](std::size_t i, CompareSetting& s) {
                if (c.attacks.empty() || c.attacks[i].action != FaultAction::kAttack) {
                  s.attack = c.attacks.empty() ? schedule_attacks(s.config.faults) : "none";
                } else {
                  copy_lines(s.config, cat("compare.attacks[", i, "]"),
                             cat("faults[", s.config.faults.size(), "]"));
                  s.config.faults.push_back(c.attacks[i]);
                  s.attack = attack_labels[i];
                }
                if (c.attacks.size() > 1) s.label += cat(" ", attack_labels[i]);
              }};
  return {aggregate, attack};
}

}  // namespace

std::vector<CompareSetting> compare_settings(const RunConfig& base) {
  const CompareConfig& c = base.compare;
  if (c.topologies.empty())
    throw InputError(cat(base.path, ": compare.topologies: list at least one topology file"));
  const auto periods = c.periods.empty() ? std::vector<int>{base.gossip.period} : c.periods;
  const auto shards = c.shards.empty() ? std::vector<std::string>{base.data.shard} : c.shards;
  const auto seeds = c.seeds.empty() ? std::vector<std::uint64_t>{base.train.seed} : c.seeds;
  for (int p : periods)
    if (p < 1) throw InputError(cat(base.path, ": compare.periods: ", p, " is not positive"));
  auto each = [](std::size_t n) { return [n](const CompareSetting&) { return n; }; };
  std::vector<Axis> axes{{each(c.topologies.size()), [&](std::size_t i, CompareSetting& s) {
                            s.config.gossip.topology = c.topologies[i];
                            s.label = stem(c.topologies[i]);
                          }}};
  for (Axis& a : algorithm_axes(base)) axes.push_back(std::move(a));
  axes.push_back({each(periods.size()), [&](std::size_t i, CompareSetting& s) {
                    s.config.gossip.period = periods[i];
                    if (periods.size() > 1) s.label += cat(" H=", periods[i]);
                  }});
  axes.push_back({each(shards.size()), [&](std::size_t i, CompareSetting& s) {
                    s.config.data.shard = shards[i];
                    if (shards.size() > 1) s.label += cat(" ", shards[i]);
                  }});
  for (Axis& a : attack_axes(base)) axes.push_back(std::move(a));
  std::vector<std::string> outer_names;
  for (const auto& o : c.outer) outer_names.push_back(o.name);
  check_distinct(base, "compare.outer", outer_names);
  axes.push_back({[&](const CompareSetting& s) {
                    return traits(s.config.gossip.algorithm).outer_step
                               ? std::max<std::size_t>(1, c.outer.size())
                               : 1;
                  },
                  [&](std::size_t i, CompareSetting& s) {
                    if (c.outer.empty() || !traits(s.config.gossip.algorithm).outer_step) return;
                    const auto& cell = c.outer[i];
                    s.config.gossip.outer = cell.outer;
                    if (cell.period > 0) s.config.gossip.period = cell.period;
                    s.config.gossip.overlap = cell.overlap;
                    s.label += cat(" ", cell.name);
                  }});
  std::vector<std::string> membership_names;
  for (const auto& m : c.memberships) membership_names.push_back(m.name);
  check_distinct(base, "compare.memberships", membership_names);
  axes.push_back({each(std::max<std::size_t>(1, c.memberships.size())),
                  [&](std::size_t i, CompareSetting& s) {
                    if (c.memberships.empty()) return;
                    const auto& cell = c.memberships[i];
                    for (std::size_t k = 0; k < cell.changes.size(); ++k) {
                      copy_lines(s.config, cat("compare.memberships[", i, "].changes[", k, "]"),
                                 cat("faults[", s.config.faults.size(), "]"));
                      s.config.faults.push_back(cell.changes[k]);
                    }
                    if (c.memberships.size() > 1) s.label += cat(" ", cell.name);
                  }});
  axes.push_back({each(seeds.size()), [&](std::size_t i, CompareSetting& s) {
                    s.group = s.label;
                    s.config.train.seed = seeds[i];
                    if (seeds.size() > 1) s.label += cat(" seed=", seeds[i]);
                  }});
  std::vector<CompareSetting> settings(1);
  settings.front().config = base;
  for (const Axis& axis : axes) {
    std::vector<CompareSetting> next;
    for (const CompareSetting& s : settings)
      for (std::size_t i = 0; i < axis.size(s); ++i) {
        next.push_back(s);
        axis.apply(i, next.back());
      }
    settings = std::move(next);
  }
  return settings;
}

}  // namespace gossip
