// sim/compare_attacks.hpp: what gossip compare says of robust aggregation under attack — the
// honest peers' final accuracies of a run, report.md's section on them, attacks.dat and its
// plot. Private to sim/ (compare.cpp calls it; tests include it by this path).
#pragma once
#if !defined(GOSSIP_ROOM_SIM)
#error "sim/compare_attacks.hpp belongs to room sim, which this room does not use (see the room table in meson.build)"
#endif

#include <ostream>
#include <string>
#include <vector>

#include "gossip/report.hpp"
#include "gossip/sim.hpp"

namespace gossip {

/// "12.3 ± 0.4" (or "12.3" for one run, "-" when no run has it, "(2/3 reached)" when some).
std::string plus_minus(const Spread& s, const char* format);

/// Sets row.attackers (the peers of `config`'s attack entries), honest_accuracy_min and _mean
/// (the final evaluation's accuracies of every peer alive at the end but those; NaN when none
/// was evaluated) and honest_diverged (how many of them ended with a non-finite training loss).
void set_honest_figures(const RunConfig& config, const SimResult& result, CompareRow& row);

/// Whether the sweep's report has an attack section: its rows differ in aggregate or attack, or
/// one of them has attackers.
bool has_attack_section(const std::vector<CompareRow>& rows);

/// report.md's section: per scenario, a table of attacks (rows) by aggregates (columns), each
/// cell the honest peers' lowest / mean final accuracy over seeds, then the change of the
/// lowest against the same aggregate's run without attack.
void write_attack_section(std::ostream& md, const std::vector<CompareRow>& rows,
                          const std::vector<CompareGroup>& groups);

/// DIR/attacks.dat: one gnuplot block per scenario and aggregate, a line per attack (its place,
/// its name, the honest lowest and mean accuracies' means and deviations over seeds).
void write_attack_data(const std::string& dir, const std::vector<CompareRow>& rows,
                       const std::vector<CompareGroup>& groups);

/// The plot of attacks.dat (honest_accuracy.png): per scenario the honest peers' lowest and
/// mean accuracy against the attack, one line per aggregate.
Plot attack_plot(const std::vector<CompareRow>& rows, const std::vector<CompareGroup>& groups,
                 const std::string& title);

}  // namespace gossip
