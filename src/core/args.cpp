// args.cpp: option parsing with errors that name the option; subcommand tables.
#include "gossip/args.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "gossip/core.hpp"

namespace gossip {

Args::Args(int argc, char** argv, std::set<std::string> value_options,
           std::set<std::string> flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      std::optional<std::string> inline_value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (value_options.count(name)) {
        if (inline_value) {
          values_[name] = *inline_value;
        } else {
          if (i + 1 >= argc) throw InputError(cat("option --", name, " needs a value"));
          values_[name] = argv[++i];
        }
      } else if (flags.count(name) && !inline_value) {
        flags_set_.insert(name);
      } else {
        throw InputError(cat("unknown option --", name, " (see --help)"));
      }
    } else if (a == "-o" && value_options.count("output")) {
      if (i + 1 >= argc) throw InputError("option -o needs a value");
      values_["output"] = argv[++i];
    } else {
      positional_.push_back(a);
    }
  }
}

Args::Args(std::map<std::string, std::string> values, const std::set<std::string>& value_options)
    : values_(std::move(values)) {
  for (const auto& [name, value] : values_)
    if (!value_options.count(name)) throw InputError(cat("unknown option --", name));
}

const std::string& Args::config_path() const {
  if (positional_.size() != 1) throw InputError("expected one CONFIG file (see --help)");
  return positional_.front();
}

std::string Args::required(const std::string& name, const std::string& what) const {
  auto v = get(name);
  if (!v) throw InputError(cat("--", name, " ", what, " is required"));
  return *v;
}

bool Args::has(const std::string& name) const {
  return flags_set_.count(name) > 0 || values_.count(name) > 0;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

long Args::get_int(const std::string& name, long fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0')
    throw InputError(cat("option --", name, " expects an integer, got '", *v, "'"));
  return x;
}

double Args::get_double(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0')
    throw InputError(cat("option --", name, " expects a number, got '", *v, "'"));
  return x;
}

void print_subcommands(std::span<const Subcommand> table, int width) {
  for (const auto& c : table) std::printf("  %-*s %s\n", width, c.name, c.summary);
}

bool wants_usage(int argc, char** argv) {
  return argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h");
}

}  // namespace gossip
