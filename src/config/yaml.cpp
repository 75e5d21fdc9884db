// config/yaml.cpp: gossip::yaml over yaml-cpp, the only file of the project that parses YAML.
// Every yaml-cpp call that could throw on a missing node is guarded here, so callers see
// undefined Nodes and InputErrors with file and line, never a yaml-cpp exception.
#include "gossip/yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/core.hpp"

namespace gossip::yaml {

struct Node::Impl {
  YAML::Node node;
};

namespace {

// yaml-cpp gives invalid ("zombie") nodes for missing keys; those become undefined Nodes.
Node wrap(const YAML::Node& n) {
  if (!n.IsDefined()) return Node();
  return Node(std::make_shared<const Node::Impl>(Node::Impl{n}));
}

const std::string kEmpty;

}  // namespace

Node::Node() = default;
Node::Node(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

bool Node::defined() const { return impl_ != nullptr; }
bool Node::is_null() const { return impl_ && impl_->node.IsNull(); }
bool Node::is_scalar() const { return impl_ && impl_->node.IsScalar(); }
bool Node::is_sequence() const { return impl_ && impl_->node.IsSequence(); }
bool Node::is_map() const { return impl_ && impl_->node.IsMap(); }

int Node::line() const { return impl_ ? std::max(1, impl_->node.Mark().line + 1) : 1; }

const std::string& Node::scalar() const { return is_scalar() ? impl_->node.Scalar() : kEmpty; }

std::size_t Node::size() const { return is_sequence() || is_map() ? impl_->node.size() : 0; }

Node Node::operator[](const std::string& key) const {
  if (!is_map()) return Node();
  const YAML::Node& map = impl_->node;
  return wrap(map[key]);
}

Node Node::operator[](std::size_t index) const {
  if (!is_sequence() || index >= impl_->node.size()) return Node();
  const YAML::Node& seq = impl_->node;
  return wrap(seq[index]);
}

Node::Iterator Node::begin() const { return Iterator(this, 0); }
Node::Iterator Node::end() const { return Iterator(this, is_sequence() ? size() : 0); }

std::vector<std::pair<Node, Node>> Node::entries() const {
  std::vector<std::pair<Node, Node>> out;
  if (!is_map()) return out;
  for (auto it = impl_->node.begin(); it != impl_->node.end(); ++it)
    out.emplace_back(wrap(it->first), wrap(it->second));
  return out;
}

std::string Node::describe() const {
  if (is_sequence()) return "a list";
  if (is_map()) return "a map";
  if (is_scalar()) return cat("'", scalar(), "'");
  return "nothing";
}

std::string field(const std::string& context, const std::string& key) {
  return context.empty() ? key : context + "." + key;
}

Document Document::parse(const std::string& text, const std::string& name) {
  try {
    return Document(name, wrap(YAML::Load(text)));
  } catch (const YAML::Exception& e) {
    throw InputError(cat(name, ":", std::max(1, e.mark.line + 1), ": not valid YAML: ", e.msg));
  }
}

Document Document::load_file(const std::string& path, const std::string& kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) throw InputError(cat(path, ": no such ", kind));
  if (ec) throw InputError(cat(path, ": cannot read: ", ec.message()));
  if (fs::is_directory(status)) throw InputError(cat(path, ": is a directory, not a YAML file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(cat(path, ": cannot read: ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(cat(path, ": cannot read: ", std::strerror(errno)));
  return parse(text.str(), path);
}

void Document::fail(int line, const std::string& message) const {
  throw InputError(cat(name_, ":", line, ": ", message));
}

std::int64_t Document::integer(const Node& node, const std::string& what, std::int64_t lo,
                               std::int64_t hi) const {
  if (!node.is_scalar()) fail(node, cat(what, ": expected an integer, got ", node.describe()));
  long long v = 0;
  if (!YAML::convert<long long>::decode(node.impl_->node, v))
    fail(node, cat(what, ": cannot read ", node.describe(), ": expected an integer"));
  if (v < lo || v > hi) fail(node, cat(what, ": ", v, " is outside ", lo, "..", hi));
  return v;
}

double Document::number(const Node& node, const std::string& what) const {
  if (!node.is_scalar()) fail(node, cat(what, ": expected a number, got ", node.describe()));
  double v = 0;
  if (!YAML::convert<double>::decode(node.impl_->node, v))
    fail(node, cat(what, ": cannot read ", node.describe(), ": expected a number"));
  if (!std::isfinite(v))
    fail(node, cat(what, ": expected a finite number, got ", node.describe()));
  return v;
}

bool Document::boolean(const Node& node, const std::string& what) const {
  bool v = false;
  if (!node.is_scalar() || !YAML::convert<bool>::decode(node.impl_->node, v))
    fail(node, cat(what, ": cannot read ", node.describe(), ": expected true or false"));
  return v;
}

std::string Document::text(const Node& node, const std::string& what) const {
  if (!node.is_scalar()) fail(node, cat(what, ": expected text, got ", node.describe()));
  return node.scalar();
}

void Document::list(const Node& node, const std::string& what) const {
  if (!node.is_sequence()) fail(node, cat(what, ": expected a list, got ", node.describe()));
}

std::map<std::string, Node> Document::keys(const Node& map,
                                           const std::vector<std::string>& allowed,
                                           const std::string& context) const {
  if (!map.is_map())
    fail(map, cat(context.empty() ? "" : context + ": ", "expected a map of keys, got ",
                  map.describe()));
  std::map<std::string, Node> found;
  for (const auto& [key_node, value] : map.entries()) {
    const std::string key = key_node.is_scalar() ? key_node.scalar() : key_node.describe();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(key_node, cat(field(context, key), ": unknown key '", key, "' (expected one of: ",
                         list, ")"));
    }
    if (auto prev = found.find(key); prev != found.end())
      fail(key_node, cat(field(context, key), ": duplicate key '", key, "' (first at line ",
                         prev->second.line(), ")"));
    found.emplace(key, key_node);
  }
  return found;
}

}  // namespace gossip::yaml
