/// json: the one JSON writer. Every file or line the project writes as JSON (summary.json,
/// `gossip topo --json`, `gossip bench --json`) is built here, so strings are escaped one way and
/// numbers have one format: up to 10 significant digits (%.10g), integers exactly, and null for
/// NaN and infinities. Depends on nothing of ours.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/json.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gossip {

/// `s` as a JSON string literal, quotes included; control characters become \n, \t or \u00XX.
std::string json_string(std::string_view s);
/// `v` as a JSON number: %.10g, or null when it is NaN or infinite.
std::string json_number(double v);
/// An integer as a JSON number, exactly.
template <std::integral T>
std::string json_integer(T v) {
  if constexpr (std::same_as<T, bool>) return v ? "true" : "false";
  else return std::to_string(v);
}

class JsonArray;

/// A JSON object built field by field, in the order the fields are added. Values are encoded
/// when added; str() and pretty() only join them.
class JsonObject {
 public:
  JsonObject& add(std::string_view key, double v) { return raw(key, json_number(v)); }
  JsonObject& add(std::string_view key, std::string_view v) { return raw(key, json_string(v)); }
  JsonObject& add(std::string_view key, const char* v) { return raw(key, json_string(v)); }
  JsonObject& add(std::string_view key, const std::string& v) { return raw(key, json_string(v)); }
  JsonObject& add(std::string_view key, const JsonObject& v) { return raw(key, v.str()); }
  JsonObject& add(std::string_view key, std::nullopt_t) { return raw(key, "null"); }
  JsonObject& add(std::string_view key, const JsonArray& v);
  template <std::integral T>
  JsonObject& add(std::string_view key, T v) { return raw(key, json_integer(v)); }
  /// Adds a value that is already JSON (e.g. "null").
  JsonObject& raw(std::string_view key, std::string json);

  /// {"a": 1, "b": "x"} on one line.
  std::string str() const;
  /// One field a line, indented by two spaces; no trailing newline.
  std::string pretty() const;
  /// The fields as (key, encoded value), in the order added.
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// A JSON array; str() gives [a, b, c].
class JsonArray {
 public:
  JsonArray& add(double v) { return raw(json_number(v)); }
  JsonArray& add(std::string_view v) { return raw(json_string(v)); }
  JsonArray& add(const char* v) { return raw(json_string(v)); }
  JsonArray& add(const std::string& v) { return raw(json_string(v)); }
  JsonArray& add(const JsonObject& v) { return raw(v.str()); }
  JsonArray& add(const JsonArray& v) { return raw(v.str()); }
  template <std::integral T>
  JsonArray& add(T v) { return raw(json_integer(v)); }
  /// Adds a value that is already JSON.
  JsonArray& raw(std::string json);
  std::string str() const;

  /// An array of every element of `items`.
  template <typename Range>
  static JsonArray of(const Range& items) {
    JsonArray a;
    for (const auto& x : items) a.add(x);
    return a;
  }

 private:
  std::vector<std::string> items_;
};

inline JsonObject& JsonObject::add(std::string_view key, const JsonArray& v) {
  return raw(key, v.str());
}

}  // namespace gossip
