// config/attack_table.cpp: the fault schedule's attack kinds (faults[].kind) as rows: name,
// parameter key and its default. The loader parses a kind once into AttackKind through this
// table; src/faults carries each out (docs/config.md#attacks has the formulas).
#include <cmath>
#include <limits>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

const std::vector<AttackTraits>& attack_table() {
  constexpr double kRequired = std::numeric_limits<double>::quiet_NaN();
  static const std::vector<AttackTraits> rows{
      {AttackKind::kSignFlip, "sign_flip", "s", 1.0},
      {AttackKind::kScale, "scale", "s", kRequired},
      {AttackKind::kNoise, "noise", "std", 1.0},
      {AttackKind::kAlie, "alie", "z", 1.0},
      {AttackKind::kIpm, "ipm", "epsilon", 0.5},
      {AttackKind::kDissensus, "dissensus", "epsilon", 1.0},
      {AttackKind::kNan, "nan", "", 0.0},
      {AttackKind::kInf, "inf", "", 0.0},
  };
  return rows;
}

const AttackTraits& attack_traits(AttackKind kind) {
  for (const AttackTraits& t : attack_table())
    if (t.kind == kind) return t;
  throw InputError("a fault that is not an attack has no attack kind");
}

std::string attack_choices() {
  const auto& rows = attack_table();
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i) list += cat(i == 0 ? "" : ", ", rows[i].name);
  return list;
}

std::string describe_attack(const Fault& fault) {
  const AttackTraits& t = attack_traits(fault.attack);
  return *t.parameter ? cat(t.name, " (", t.parameter, " = ", fault.parameter, ")")
                      : std::string(t.name);
}

}  // namespace gossip
