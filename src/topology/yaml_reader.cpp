// topology/yaml_reader.cpp: typed, line-numbered reads from yaml-cpp nodes.
#include "src/topology/yaml_reader.hpp"

#include <algorithm>
#include <cmath>

#include "gossip/core.hpp"

namespace gossip::topo {

int YamlReader::line(const YAML::Node& node) { return std::max(1, node.Mark().line + 1); }

void YamlReader::fail(int line, const std::string& message) const {
  throw InputError(cat(name_, ":", line, ": ", message));
}

int YamlReader::integer(const YAML::Node& node, const std::string& what, long long lo,
                        long long hi) const {
  long long v = 0;
  try {
    if (!node.IsScalar()) throw YAML::BadConversion(node.Mark());
    v = node.as<long long>();
  } catch (const YAML::BadConversion&) {
    fail(node, cat(what, ": expected an integer",
                   node.IsScalar() ? cat(", got '", node.Scalar(), "'") : std::string()));
  }
  if (v < lo || v > hi) fail(node, cat(what, ": ", v, " is outside ", lo, "..", hi));
  return static_cast<int>(v);
}

double YamlReader::number(const YAML::Node& node, const std::string& what) const {
  double v = 0;
  try {
    if (!node.IsScalar()) throw YAML::BadConversion(node.Mark());
    v = node.as<double>();
  } catch (const YAML::BadConversion&) {
    fail(node, cat(what, ": expected a number",
                   node.IsScalar() ? cat(", got '", node.Scalar(), "'") : std::string()));
  }
  if (!std::isfinite(v)) fail(node, cat(what, ": expected a finite number"));
  return v;
}

bool YamlReader::boolean(const YAML::Node& node, const std::string& what) const {
  try {
    if (node.IsScalar()) return node.as<bool>();
  } catch (const YAML::BadConversion&) {
  }
  fail(node, cat(what, ": expected true or false"));
}

std::string YamlReader::text(const YAML::Node& node, const std::string& what) const {
  if (!node.IsScalar()) fail(node, cat(what, ": expected a string"));
  return node.Scalar();
}

void YamlReader::sequence(const YAML::Node& node, const std::string& what) const {
  if (!node.IsSequence()) fail(node, cat(what, ": expected a list"));
}

std::map<std::string, YAML::Node> YamlReader::keys(const YAML::Node& map,
                                                   const std::vector<std::string>& allowed,
                                                   const std::string& context) const {
  if (!map.IsMap()) fail(map, cat(context, ": expected a map of keys"));
  std::map<std::string, YAML::Node> found;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(it->first, cat("unknown key '", key, "' in ", context, " (expected one of: ", list,
                          ")"));
    }
    if (auto prev = found.find(key); prev != found.end())
      fail(it->first, cat("duplicate key '", key, "' (first at line ", line(prev->second), ")"));
    found.emplace(key, it->first);
  }
  return found;
}

}  // namespace gossip::topo
