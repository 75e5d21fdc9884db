/// topology/yaml_reader: typed reads from yaml-cpp nodes that fail with "FILE:LINE: message"
/// (1-based lines). Internal to src/topology; the only place besides the loaders that includes
/// yaml-cpp.
#pragma once
#if !defined(GOSSIP_ROOM_TOPOLOGY)
#error "src/topology/yaml_reader.hpp belongs to room topology, which this room does not use (see the room table in meson.build)"
#endif

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace gossip::topo {

class YamlReader {
 public:
  explicit YamlReader(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  static int line(const YAML::Node& node);

  [[noreturn]] void fail(int line, const std::string& message) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& message) const {
    fail(line(at), message);
  }

  /// Integer in [lo, hi]; `what` names the field in messages.
  int integer(const YAML::Node& node, const std::string& what, long long lo, long long hi) const;
  /// Finite number.
  double number(const YAML::Node& node, const std::string& what) const;
  bool boolean(const YAML::Node& node, const std::string& what) const;
  std::string text(const YAML::Node& node, const std::string& what) const;
  /// The node must be a sequence.
  void sequence(const YAML::Node& node, const std::string& what) const;

  /// Key -> key node of a map, after checking every key is in `allowed` and none repeats.
  /// `context` says where the map is ("topology file", "edge", ...).
  std::map<std::string, YAML::Node> keys(const YAML::Node& map,
                                         const std::vector<std::string>& allowed,
                                         const std::string& context) const;

 private:
  std::string name_;
};

}  // namespace gossip::topo
