// peer/hosts.cpp: which host each rank runs on, as the launchers say it — Slurm's compressed node
// list and tasks per node, or an MPI hostfile — so that `peers:` need not be written by hand.
// Both launchers place ranks in blocks by default (srun --distribution=block, mpirun's by-slot
// mapping): the first host's slots take the first ranks, and so on.
#include <cctype>
#include <charconv>
#include <sstream>

#include "gossip/core.hpp"
#include "gossip/peer.hpp"

namespace gossip {
namespace {

bool parse_count(std::string_view s, long& v) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// "01-03,7" inside one pair of brackets -> "01", "02", "03", "7" (zero padding kept).
std::vector<std::string> expand_ranges(std::string_view ranges, const std::string& what) {
  std::vector<std::string> out;
  while (!ranges.empty()) {
    const auto comma = ranges.find(',');
    const std::string_view item = ranges.substr(0, comma);
    const auto dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    long a = 0, b = 0;
    if (!parse_count(lo, a) || !parse_count(hi, b) || a < 0 || b < a || b - a > 100'000)
      throw InputError(cat(what, ": '", item, "' is not a number or a range lo-hi"));
    for (long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(s);
    }
    if (comma == std::string_view::npos) break;
    ranges.remove_prefix(comma + 1);
    if (ranges.empty()) throw InputError(cat(what, ": a range list ends with ','"));
  }
  return out;
}

/// One name of a host list, brackets and all: "rack[1-2]-n[1-3]" -> rack1-n1 ... rack2-n3.
void expand_name(std::string_view name, const std::string& what, std::vector<std::string>& out) {
  const auto open = name.find('[');
  if (open == std::string_view::npos) {
    if (name.find(']') != std::string_view::npos)
      throw InputError(cat(what, ": ']' without '[' in '", name, "'"));
    out.emplace_back(name);
    return;
  }
  const auto close = name.find(']', open);
  if (close == std::string_view::npos)
    throw InputError(cat(what, ": '[' without ']' in '", name, "'"));
  const std::string prefix(name.substr(0, open));
  for (const auto& middle : expand_ranges(name.substr(open + 1, close - open - 1), what)) {
    std::vector<std::string> rest;
    expand_name(name.substr(close + 1), what, rest);
    for (const auto& r : rest) out.push_back(prefix + middle + r);
  }
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(std::string_view list, const std::string& what) {
  std::vector<std::string> out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw InputError(cat(what, ": ']' without '[' in '", list, "'"));
    if (c != ',' || depth > 0) continue;
    const std::string_view name = list.substr(start, i - start);
    if (name.empty()) throw InputError(cat(what, ": an empty host name in '", list, "'"));
    expand_name(name, what, out);
    start = i + 1;
  }
  if (depth != 0) throw InputError(cat(what, ": '[' without ']' in '", list, "'"));
  return out;
}

std::vector<int> expand_slurm_tasks_per_node(std::string_view text, const std::string& what) {
  std::vector<int> out;
  std::string_view s = text;
  while (true) {
    const auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    long count = 0, repeat = 1;
    if (const auto x = item.find("(x"); x != std::string_view::npos) {
      if (item.back() != ')' || !parse_count(item.substr(x + 2, item.size() - x - 3), repeat))
        throw InputError(cat(what, ": '", item, "' is not N or N(xM)"));
      item = item.substr(0, x);
    }
    if (!parse_count(item, count) || count < 1 || repeat < 1 || repeat > 100'000)
      throw InputError(cat(what, ": '", item, "' in '", text, "' is not a task count"));
    out.insert(out.end(), static_cast<std::size_t>(repeat), static_cast<int>(count));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& path) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    const std::string where = cat(path, ":", n);
    std::optional<long> slots;
    while (words >> word) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq);
      long v = 0;
      if (eq == std::string::npos || !parse_count(std::string_view(word).substr(eq + 1), v))
        throw InputError(cat(where, ": '", word, "' is not key=number"));
      if (key == "slots") {
        if (v < 1) throw InputError(cat(where, ": slots=", v, " must be at least 1"));
        slots = v;
      } else if (key != "max_slots" && key != "max-slots") {
        throw InputError(cat(where, ": unknown field '", key, "' (expected slots=N)"));
      }
    }
    if (!slots)
      throw InputError(cat(where, ": host '", host, "' has no slots=N: write how many ranks run ",
                           "on it (mpirun places ranks by slot, filling each host in order)"));
    out.push_back({host, static_cast<int>(*slots)});
  }
  if (out.empty()) throw InputError(cat(path, ": no hosts"));
  return out;
}

std::vector<std::string> hosts_by_slot(const std::vector<HostSlots>& hosts, int ranks,
                                       const std::string& what) {
  std::vector<std::string> out;
  for (const auto& h : hosts)
    for (int s = 0; s < h.slots && static_cast<int>(out.size()) < ranks; ++s) out.push_back(h.host);
  if (static_cast<int>(out.size()) < ranks)
    throw InputError(cat(what, " has ", out.size(), " slots for ", ranks, " ranks"));
  return out;
}

}  // namespace gossip
