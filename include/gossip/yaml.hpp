/// yaml: the project's one YAML reader (run configs, topology files). A Document is a parsed
/// file with its name; a Node is a read-only view of one value in it with its line. Typed reads
/// and key checks fail with InputError "FILE:LINE: message" (1-based lines), so every loader
/// reports problems the same way. yaml-cpp stays behind this header (src/config/yaml.cpp).
/// Nodes and Documents are immutable and cheap to copy; a Node keeps its document alive.
#pragma once
#if !defined(GOSSIP_ROOM_CONFIG)
#error "gossip/yaml.hpp belongs to room config, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gossip::yaml {

/// One value of a document: a scalar, a sequence, a map, null, or undefined (a key that is not
/// there). Lookups on the wrong kind of node give an undefined node, never an exception.
class Node {
 public:
  struct Impl;
  class Iterator;

  /// An undefined node.
  Node();
  explicit Node(std::shared_ptr<const Impl> impl);

  bool defined() const;
  bool is_null() const;  // `key:` with no value, `~`, `null` (false for an undefined node)
  bool is_scalar() const;
  bool is_sequence() const;
  bool is_map() const;
  /// 1-based line where the value starts (for an alias: where its anchor is); 1 when unknown.
  int line() const;
  /// The text of a scalar ("" for any other node).
  const std::string& scalar() const;
  /// Items of a sequence, entries of a map, 0 otherwise.
  std::size_t size() const;

  /// Value of `key` in a map (the first, if the key repeats; keys() refuses repeats).
  Node operator[](const std::string& key) const;
  /// Item `index` of a sequence (undefined when out of range).
  Node operator[](std::size_t index) const;
  Node operator[](int index) const {
    return index < 0 ? Node() : (*this)[static_cast<std::size_t>(index)];
  }

  /// Iterates the items of a sequence (nothing for other nodes).
  Iterator begin() const;
  Iterator end() const;
  /// The (key, value) pairs of a map in file order, repeats included (empty for other nodes).
  std::vector<std::pair<Node, Node>> entries() const;

  /// "a list", "a map", "nothing" or "'TEXT'": what a message says was found.
  std::string describe() const;

 private:
  friend class Document;  // typed reads convert the yaml-cpp value directly
  std::shared_ptr<const Impl> impl_;
};

class Node::Iterator {
 public:
  Iterator(const Node* sequence, std::size_t index) : sequence_(sequence), index_(index) {}
  Node operator*() const { return (*sequence_)[index_]; }
  Iterator& operator++() {
    ++index_;
    return *this;
  }
  bool operator!=(const Iterator& other) const { return index_ != other.index_; }

 private:
  const Node* sequence_;
  std::size_t index_;
};

/// A parsed YAML file (or text standing for one) and the reads that name it in errors.
class Document {
 public:
  /// Reads and parses `path`. Throws InputError "PATH: no such KIND" (KIND e.g. "config file"),
  /// "PATH: is a directory, not a YAML file", "PATH: cannot read: ..." or
  /// "PATH:LINE: not valid YAML: ...".
  static Document load_file(const std::string& path, const std::string& kind);
  /// Parses `text`; `name` stands for the file in messages.
  static Document parse(const std::string& text, const std::string& name);

  const std::string& name() const { return name_; }
  const Node& root() const { return root_; }
  /// True when the document holds no value (empty file, only comments, or `~`).
  bool empty() const { return !root_.defined() || root_.is_null(); }

  /// Throws InputError "NAME:LINE: message".
  [[noreturn]] void fail(int line, const std::string& message) const;
  [[noreturn]] void fail(const Node& at, const std::string& message) const {
    fail(at.line(), message);
  }

  /// Integer in [lo, hi]; `what` names the field in messages ("what: ...").
  std::int64_t integer(const Node& node, const std::string& what, std::int64_t lo,
                       std::int64_t hi) const;
  /// A finite number: NaN and infinities (.nan, .inf, -.inf) are refused.
  double number(const Node& node, const std::string& what) const;
  bool boolean(const Node& node, const std::string& what) const;
  std::string text(const Node& node, const std::string& what) const;
  /// The node must be a sequence.
  void list(const Node& node, const std::string& what) const;

  /// Key -> key node of a map, after checking every key is in `allowed` and none repeats
  /// (a repeat names both lines). `context` is the dotted field path of the map ("" at the
  /// top): messages name "context.key".
  std::map<std::string, Node> keys(const Node& map, const std::vector<std::string>& allowed,
                                   const std::string& context) const;

 private:
  Document(std::string name, Node root) : name_(std::move(name)), root_(std::move(root)) {}

  std::string name_;
  Node root_;
};

/// "context.key", or "key" when the context is empty.
std::string field(const std::string& context, const std::string& key);

}  // namespace gossip::yaml
