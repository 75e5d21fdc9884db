/// choice: the one pattern of a named choice. Every enum-like knob (algorithm, compressor,
/// aggregate, fault action, policy, wire format, preset, change kind) is an enum whose values
/// are the rows of one table (src/config), each row with the value's `name` (as configs, flags
/// and records write it), its traits and a one-line `summary`. Parsing, the lists in messages
/// and --help, describe and the docs' tables go through these functions over the rows, so a new
/// row shows up in all of them and no string compare of a choice is written anywhere else.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/choice.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossip/core.hpp"

namespace gossip {

/// A choice's row when it has no traits: its value, its name in configs, flags and reports, and
/// a one-line summary.
template <typename K>
struct NamedRow {
  using Kind = K;
  Kind kind;
  const char* name;
  const char* summary;
};

/// One NamedRow of an X-macro table X(id, name, summary), for `Row` in scope: a table function
/// reads `using Row = NamedRow<E>; static constexpr std::array rows{TABLE(GOSSIP_NAMED_ROW)};`.
/// Columns after the summary are other tables' (the layer types' make_ function and spec).
#define GOSSIP_NAMED_ROW(id, name, summary, ...) Row{Row::Kind::id, name, summary},

/// An enum's values from an X-macro table whose rows start with the value's id:
/// `enum class E { TABLE(GOSSIP_CHOICE_ENUM) };`.
#define GOSSIP_CHOICE_ENUM(id, ...) id,

template <typename Row>
concept ChoiceRow = requires(const Row& row) {
  { row.name } -> std::convertible_to<const char*>;
  { row.summary } -> std::convertible_to<const char*>;
};

/// The row named `name`; nullptr when none is.
template <ChoiceRow Row>
const Row* find_choice(std::span<const Row> rows, std::string_view name) {
  for (const Row& row : rows)
    if (name == row.name) return &row;
  return nullptr;
}

/// The row of `kind` (every row has a `kind`, its enum value).
template <ChoiceRow Row, typename Kind>
const Row& choice_row(std::span<const Row> rows, Kind kind) {
  for (const Row& row : rows)
    if (row.kind == kind) return row;
  return rows.front();  // not reached: every value has its row (a test walks them)
}

/// The rows' names as messages list them: "a, b or c" ("a, b and c" with joiner "and").
template <ChoiceRow Row>
std::string choice_list(std::span<const Row> rows, const char* joiner = "or") {
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) list += i + 1 == rows.size() ? std::string(" ") + joiner + " " : ", ";
    list += rows[i].name;
  }
  return list;
}

/// The rows' names as "expected one of" lists them: "a, b, c".
template <ChoiceRow Row>
std::string choice_names(std::span<const Row> rows) {
  std::string list;
  for (const Row& row : rows) list += (list.empty() ? "" : ", ") + std::string(row.name);
  return list;
}

/// The value named `text` among `rows`. Throws InputError "WHAT: unknown value 'x' (expected one
/// of: a, b, c)".
template <ChoiceRow Row>
auto parse_choice(std::span<const Row> rows, const std::string& text, const std::string& what) {
  if (const Row* row = find_choice(rows, text)) return row->kind;
  throw InputError(what + ": unknown value '" + text + "' (expected one of: " +
                   choice_names(rows) + ")");
}

/// The rows that pass `keep`, as choice_list names them: "clipped and trimmed_mean".
template <ChoiceRow Row, typename Keep>
std::string choice_list_if(std::span<const Row> rows, Keep keep, const char* joiner = "or") {
  std::vector<Row> kept;
  for (const Row& row : rows)
    if (keep(row)) kept.push_back(row);
  return choice_list(std::span<const Row>(kept), joiner);
}

/// The rows as --help lists them: one line each, "<indent>name  summary", names aligned.
template <ChoiceRow Row>
std::string choice_help(std::span<const Row> rows, std::size_t indent = 4) {
  std::size_t width = 0;
  for (const Row& row : rows) width = std::max(width, std::string_view(row.name).size());
  std::string out;
  for (const Row& row : rows) {
    out += std::string(indent, ' ') + row.name;
    out += std::string(width - std::string_view(row.name).size() + 2, ' ');
    out += std::string(row.summary) + "\n";
  }
  return out;
}

/// The rows of an enum made from the X-macro table TABLE(X) (rows X(id, name, summary)):
/// `table_fn()` giving them and `name_fn(value)` a value's name.
#define GOSSIP_CHOICE_TABLE(Enum, TABLE, table_fn, name_fn)                    \
  inline std::span<const NamedRow<Enum>> table_fn() {                          \
    using Row = NamedRow<Enum>;                                                \
    static constexpr Row rows[] = {TABLE(GOSSIP_NAMED_ROW)};                   \
    return rows;                                                               \
  }                                                                            \
  inline const char* name_fn(Enum value) { return choice_row(table_fn(), value).name; }

/// A named choice whose rows have no traits, whole: the enum `Enum` with a value per row of
/// TABLE and its GOSSIP_CHOICE_TABLE functions.
#define GOSSIP_NAMED_CHOICE(Enum, TABLE, table_fn, name_fn) \
  enum class Enum { TABLE(GOSSIP_CHOICE_ENUM) };            \
  GOSSIP_CHOICE_TABLE(Enum, TABLE, table_fn, name_fn)

/// data.shard: how the training set is split among the peers, one row each (the data room
/// splits, the config room reads the name: both go by this table).
#define GOSSIP_SHARD_KINDS(X)                                                                  \
  X(kIid, "iid", "a uniform random split")                                                    \
  X(kDirichlet, "dirichlet", "label skew: each class split by Dirichlet(alpha) proportions")  \
  X(kShards, "shards", "sorted by label, cut into shards, shards_per_peer to each peer")

GOSSIP_NAMED_CHOICE(ShardKind, GOSSIP_SHARD_KINDS, shard_kind_table, shard_kind_name)

/// net.reachable: whether a peer's neighbours can dial it, one row each: X(id, name, summary)
/// (the config room reads the name, the net room goes by it).
#define GOSSIP_REACHABLE_SETTINGS(X)                                                            \
  X(kAuto, "auto", "found at the start: other members are asked to dial this peer back at the " \
    "address the run gives it")                                                                 \
  X(kYes, "yes", "taken as reachable, unasked: its neighbours dial it as usual")               \
  X(kNo, "no", "taken as unreachable, unasked: it dials every neighbour itself, and a link "     \
    "whose other end cannot be dialled either goes through a relay")

GOSSIP_NAMED_CHOICE(ReachableSetting, GOSSIP_REACHABLE_SETTINGS, reachable_setting_table,
                    reachable_setting_name)

/// net.relays when it is not a list, one row each: X(id, name, summary).
#define GOSSIP_RELAY_MODES(X)                                                                   \
  X(kAuto, "auto", "any member that found itself reachable, lowest rank first")                \
  X(kNone, "none", "no relay: a link neither end can dial never forms")

GOSSIP_NAMED_CHOICE(RelayMode, GOSSIP_RELAY_MODES, relay_mode_table, relay_mode_name)

}  // namespace gossip
