/// args: a small command-line parser shared by every subcommand. Options are `--name value`,
/// `--name=value` or boolean `--flag`; everything else is positional. Unknown options are errors.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/args.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace gossip {

class Args {
 public:
  /// Parses argv after the subcommand name. `value_options` take a value; `flags` do not.
  /// Throws InputError on an unknown option or a missing value.
  Args(int argc, char** argv, std::set<std::string> value_options, std::set<std::string> flags);
  /// Options given as values already (a caller that is not a command line: Python's
  /// gossip.Peer): each name must be one of `value_options` ("unknown option --x" otherwise).
  Args(std::map<std::string, std::string> values, const std::set<std::string>& value_options);

  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  long get_int(const std::string& name, long fallback) const;
  double get_double(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  /// The value options given, by name.
  const std::map<std::string, std::string>& values() const { return values_; }
  /// The single positional CONFIG argument; throws InputError unless there is exactly one.
  const std::string& config_path() const;
  /// The value of option --name, which the command cannot do without ("--out DIR is required").
  std::string required(const std::string& name, const std::string& what) const;
  bool help() const { return help_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_set_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

/// A named entry point: a subcommand of `gossip` or a benchmark of `gossip bench`.
struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

/// Prints "  NAME  summary" for each entry, names padded to `width`.
void print_subcommands(std::span<const Subcommand> table, int width);

/// Whether argv (after the program or command name) asks for the usage text: no arguments,
/// --help or -h.
bool wants_usage(int argc, char** argv);

}  // namespace gossip
