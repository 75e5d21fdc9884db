// config/algorithm_table.cpp: the rows of GOSSIP_ALGORITHMS as data, and the one parser of an
// algorithm's name (gossip.algorithm, compare.algorithms, --algorithm).
#include "gossip/algorithm_table.hpp"

#include "gossip/core.hpp"

namespace gossip {

const std::vector<AlgorithmTraits>& algorithm_table() {
  static const std::vector<AlgorithmTraits> rows{
#define GOSSIP_ALGORITHM_ROW(id, name, make, weights, compresses, overlaps, every, stale, ring, \
                             elastic, outer, partial, not_robust, summary)                     \
  {AlgorithmKind::id, name,  WeightsNeed::weights, compresses, overlaps, every, stale, ring,     \
   elastic, outer, partial, not_robust, summary},
      GOSSIP_ALGORITHMS(GOSSIP_ALGORITHM_ROW)
#undef GOSSIP_ALGORITHM_ROW
  };
  return rows;
}

const AlgorithmTraits& traits(AlgorithmKind kind) {
  return algorithm_table().at(static_cast<std::size_t>(kind));
}

const char* algorithm_name(AlgorithmKind kind) { return traits(kind).name; }

std::string algorithm_choices() {
  const auto& rows = algorithm_table();
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i)
    list += cat(i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ", rows[i].name);
  return list;
}

AlgorithmKind parse_algorithm(const std::string& text, const std::string& what) {
  for (const auto& row : algorithm_table())
    if (text == row.name) return row.kind;
  throw InputError(cat(what, ": unknown algorithm '", text, "' (expected ", algorithm_choices(),
                       ")"));
}

}  // namespace gossip
