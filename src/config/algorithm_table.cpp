// config/algorithm_table.cpp: the rows of GOSSIP_ALGORITHMS as data, and the one parser of an
// algorithm's name (gossip.algorithm, compare.algorithms, --algorithm).
#include "gossip/algorithm_table.hpp"

#include "gossip/core.hpp"

namespace gossip {

namespace {

// A row's traits with its id and name stamped in (the row names only its traits).
AlgorithmTraits named_row(AlgorithmKind kind, const char* name, AlgorithmTraits traits) {
  traits.kind = kind;
  traits.name = name;
  return traits;
}

}  // namespace

const std::vector<AlgorithmTraits>& algorithm_table() {
  static const std::vector<AlgorithmTraits> rows{
#define GOSSIP_ALGORITHM_ROW(id, name, make, ...) \
  named_row(AlgorithmKind::id, name, AlgorithmTraits __VA_ARGS__),
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
