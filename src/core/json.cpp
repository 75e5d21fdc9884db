// core/json.cpp: the one JSON writer (escaping, the number format, objects and arrays).
#include "gossip/json.hpp"

#include <cmath>
#include <cstdio>

namespace gossip {

std::string json_string(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

JsonObject& JsonObject::raw(std::string_view key, std::string json) {
  fields_.emplace_back(std::string(key), std::move(json));
  return *this;
}

std::string JsonObject::str() const {
  std::string o = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i)
    o += (i ? ", " : "") + json_string(fields_[i].first) + ": " + fields_[i].second;
  return o + "}";
}

std::string JsonObject::pretty() const {
  if (fields_.empty()) return "{}";
  std::string o = "{\n";
  for (std::size_t i = 0; i < fields_.size(); ++i)
    o += (i ? ",\n  " : "  ") + json_string(fields_[i].first) + ": " + fields_[i].second;
  return o + "\n}";
}

JsonArray& JsonArray::raw(std::string json) {
  items_.push_back(std::move(json));
  return *this;
}

std::string JsonArray::str() const {
  std::string o = "[";
  for (std::size_t i = 0; i < items_.size(); ++i) o += (i ? ", " : "") + items_[i];
  return o + "]";
}

}  // namespace gossip
