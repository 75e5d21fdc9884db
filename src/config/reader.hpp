// config/reader.hpp: config-shaped reads on a YAML document, shared by the section readers
// (config_*.cpp): every key checked against the fields its section knows, every value against
// its type and range, each problem as "FILE:LINE: field: what is wrong". Private to the room.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "src/config/reader.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <utility>

#include "gossip/choice.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/yaml.hpp"

namespace gossip::sections {

using yaml::Node;
using Handlers = std::map<std::string, std::function<void(const Node&, const std::string&)>>;
/// Keys that moved out of a section: old key -> its new dotted place ("monitor.suspect_after_s").
using Moved = std::map<std::string, std::string>;

// Config-shaped reads on a document: "FILE:LINE: field: what is wrong".
class Reader {
 public:
  Reader(const yaml::Document& doc, std::string dir, std::map<std::string, int>& lines)
      : doc_(doc), dir_(std::move(dir)), lines_(lines) {}

  /// A Reader that reads no file but lists into `keys` every key the tables it is given name
  /// (config_keys): each() then calls each handler with `probes` (an empty map, a list of one)
  /// so that the tables of the maps under a key are listed too, whatever the reads make of them.
  Reader(const yaml::Document& doc, std::map<std::string, int>& lines,
         std::set<std::string>& keys, std::vector<Node> probes)
      : doc_(doc), dir_("."), lines_(lines), listing_(&keys), probes_(std::move(probes)) {}

  [[noreturn]] void fail(const Node& node, const std::string& field,
                         const std::string& what) const {
    doc_.fail(node, cat(field, ": ", what));
  }

  bool boolean(const Node& node, const std::string& field) const {
    return doc_.boolean(node, field);
  }
  std::string text(const Node& node, const std::string& field) const {
    return doc_.text(node, field);
  }
  int integer(const Node& node, const std::string& field) const {
    return static_cast<int>(doc_.integer(node, field, INT_MIN, INT_MAX));
  }
  std::uint64_t seed(const Node& node, const std::string& field) const {
    return static_cast<std::uint64_t>(doc_.integer(node, field, 0, INT64_MAX));
  }

  std::string path(const Node& node, const std::string& field) const {
    return resolve(text(node, field));
  }
  std::string resolve(const std::string& file) const {
    std::filesystem::path p = file;
    if (p.is_relative()) p = std::filesystem::path(dir_) / p;
    return p.lexically_normal().string();
  }

  double number(const Node& node, const std::string& field) const {
    return doc_.number(node, field);
  }

  double positive(const Node& node, const std::string& field, bool allow_zero) const {
    const double v = doc_.number(node, field);
    if (v < 0 || (!allow_zero && v == 0))
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    return v;
  }

  /// An integer in [lo, hi]: "field: 1000000 is outside 1..1024".
  int integer_in(const Node& node, const std::string& field, int lo, int hi) const {
    return static_cast<int>(doc_.integer(node, field, lo, hi));
  }

  int positive_int(const Node& node, const std::string& field, bool allow_zero) const {
    const std::int64_t v = doc_.integer(node, field, INT64_MIN, INT64_MAX);
    if (v < 0 || (!allow_zero && v == 0))
      fail(node, field, cat("must be ", allow_zero ? ">= 0" : "> 0", ", got ", v));
    if (v > 1'000'000'000) fail(node, field, cat("must be at most 1000000000, got ", v));
    return static_cast<int>(v);
  }

  std::string choice(const Node& node, const std::string& field,
                     std::initializer_list<const char*> allowed) const {
    const std::string v = text(node, field);
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", list, ")"));
  }

  /// An algorithm's name (gossip/algorithm_table.hpp): the node's text, or `named` when given.
  AlgorithmKind algorithm(const Node& node, const std::string& field,
                          const std::string& named = "") const {
    const std::string v = named.empty() ? text(node, field) : named;
    for (const auto& row : algorithm_table())
      if (v == row.name) return row.kind;
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", algorithm_choices(), ")"));
  }

  /// A value named by a row of `table` (gossip/choice.hpp): "field: unknown value 'x' (expected
  /// one of: ...)".
  template <ChoiceRow Row>
  auto named(const Node& node, const std::string& field, std::span<const Row> table) const {
    const std::string v = text(node, field);
    if (const Row* row = find_choice(table, v)) return row->kind;
    fail(node, field, cat("unknown value '", v, "' (expected one of: ", choice_names(table), ")"));
  }

  /// One value or a list of them, each read by `read(node, field)`.
  template <typename Read>
  auto list(const Node& node, const std::string& field, Read read) const {
    std::vector<decltype(read(node, field))> out;
    if (node.is_scalar()) {
      out.push_back(read(node, field));
      return out;
    }
    doc_.list(node, field);
    std::size_t i = 0;
    for (const Node& item : node) out.push_back(read(item, cat(field, "[", i++, "]")));
    return out;
  }
  std::vector<int> ints(const Node& node, const std::string& field) const {
    return list(node, field,
                [this](const Node& n, const std::string& f) { return integer(n, f); });
  }
  std::vector<std::string> texts(const Node& node, const std::string& field) const {
    return list(node, field, [this](const Node& n, const std::string& f) { return text(n, f); });
  }

  /// The node must be a list.
  void sequence(const Node& node, const std::string& field) const { doc_.list(node, field); }

  /// Fails at the line each() recorded for `field` (a field already read).
  [[noreturn]] void fail_at(const std::string& field, const std::string& what) const {
    throw InputError(cat(doc_.name(), ":", lines_.at(field), ": ", field, ": ", what));
  }

  /// Records the line of a field read without each() (list items).
  void mark(const std::string& field, int line) const { lines_[field] = line; }

  /// Calls the handler of each key in `section`, in file order, and records its line; unknown
  /// and repeated keys are errors, and a key of `moved` is refused with its new place
  /// ("gossip.compress: moved to gossip.choco.compress").
  void each(const Node& section, const std::string& prefix, const Handlers& handlers,
            const Moved& moved = {}) const {
    if (listing_) {
      list_keys(prefix, handlers);
      return;
    }
    for (const auto& [key, value] : section.entries()) {
      const auto to = moved.find(key.scalar());
      if (to != moved.end())
        doc_.fail(key, cat(yaml::field(prefix, key.scalar()), ": moved to ", to->second,
                           " (docs/config.md)"));
    }
    std::vector<std::string> allowed;
    for (const auto& [key, _] : handlers) allowed.push_back(key);
    doc_.keys(section, allowed, prefix);
    for (const auto& [key, value] : section.entries()) {
      const std::string field = yaml::field(prefix, key.scalar());
      lines_[field] = key.line();
      handlers.at(key.scalar())(value, field);
    }
  }

 private:
  const yaml::Document& doc_;
  std::string dir_;
  std::map<std::string, int>& lines_;
  std::set<std::string>* listing_ = nullptr;
  std::vector<Node> probes_;

  void list_keys(const std::string& prefix, const Handlers& handlers) const {
    for (const auto& [key, handler] : handlers) {
      const std::string field = yaml::field(prefix, key);
      listing_->insert(field);
      for (const Node& probe : probes_) {
        try {
          handler(probe, field);
        } catch (const std::exception&) {
          // A probe is no value of this key; only the keys its handler's tables name count.
        }
      }
    }
  }
};

}  // namespace gossip::sections
