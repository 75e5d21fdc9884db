// config/link_emulation.cpp: the text of `net.emulate` and `gossip run --netem`, in tc's own units
// ("rate=100mbit,delay=5ms,jitter=1ms,loss=0.1%"), read into numbers once for the launcher (which
// sets the qdiscs) and the simulator (which models the same links).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {
namespace {

/// "12.5mbit" -> (12.5, "mbit"); false when there is no number in front.
bool split_number(std::string_view s, double& number, std::string_view& unit) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), number);
  if (r.ec != std::errc() || r.ptr == s.data() || !std::isfinite(number)) return false;
  unit = s.substr(static_cast<std::size_t>(r.ptr - s.data()));
  return true;
}

double scale(std::string_view unit, std::initializer_list<std::pair<const char*, double>> units) {
  for (const auto& [name, factor] : units)
    if (unit == name) return factor;
  return 0.0;
}

/// "0-1+4-5" -> {{0, 1}, {4, 5}}; `bad(why)` makes the error thrown.
template <typename Bad>
std::vector<std::pair<int, int>> parse_rank_pairs(std::string_view value, const Bad& bad) {
  std::vector<std::pair<int, int>> pairs;
  while (true) {
    const auto plus = value.find('+');
    const std::string_view item = value.substr(0, plus);
    const auto dash = item.find('-');
    int a = -1, b = -1;
    const auto read = [](std::string_view s, int& v) {
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= 0;
    };
    if (dash == std::string_view::npos || !read(item.substr(0, dash), a) ||
        !read(item.substr(dash + 1), b) || a == b)
      throw bad(cat("unreachable: '", item, "' is not a pair of two ranks A-B (unreachable=0-1+4-5)"));
    pairs.emplace_back(std::min(a, b), std::max(a, b));
    if (plus == std::string_view::npos) break;
    value.remove_prefix(plus + 1);
  }
  return pairs;
}

/// "1+2+3" -> {1, 2, 3} (distinct ranks); `bad(why)` makes the error thrown.
template <typename Bad>
std::vector<int> parse_rank_set(std::string_view key, std::string_view value, const Bad& bad) {
  std::vector<int> ranks;
  while (true) {
    const auto plus = value.find('+');
    const std::string_view item = value.substr(0, plus);
    int r = -1;
    const auto res = std::from_chars(item.data(), item.data() + item.size(), r);
    if (item.empty() || res.ec != std::errc() || res.ptr != item.data() + item.size() || r < 0)
      throw bad(cat(key, ": '", item, "' is not a rank"));
    if (std::find(ranks.begin(), ranks.end(), r) != ranks.end())
      throw bad(cat(key, ": rank ", r, " is given twice"));
    ranks.push_back(r);
    if (plus == std::string_view::npos) break;
    value.remove_prefix(plus + 1);
  }
  return ranks;
}

/// One `net.emulate` text read item by item (KEY=VALUE, comma-separated); every error names the
/// whole text and what is expected.
class EmulationReader {
 public:
  EmulationReader(const std::string& text, const std::string& what)
      : text_(text), prefix_(what.empty() ? std::string() : what + ": ") {
    e_.text = text;
  }

  LinkEmulation read() {
    std::string_view rest = text_;
    while (!rest.empty() || text_.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (comma != std::string_view::npos && rest.empty()) throw bad("ends with ','");
      const auto eq = item.find('=');
      if (eq == std::string_view::npos) throw bad(cat("'", item, "' is not KEY=VALUE"));
      const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
      if (key == "nat" || key == "firewall") {
        read_behind(key, value);
      } else if (key == "unreachable") {
        if (!e_.unreachable.empty()) throw bad("unreachable is given twice");
        e_.unreachable = parse_rank_pairs(value, [&](const std::string& why) { return bad(why); });
      } else {
        read_measure(key, value);
      }
      if (text_.empty()) break;
    }
    if (!seen_rate_) throw bad("no rate= (every emulated link has a rate)");
    if (e_.jitter_ms > 0.0 && e_.delay_ms == 0.0) throw bad("jitter without delay");
    return e_;
  }

 private:
  InputError bad(const std::string& why) const {
    return InputError(cat(prefix_, "'", text_, "': ", why, " (expected rate=RATE[,delay=TIME]",
                          "[,jitter=TIME][,loss=PERCENT%][,unreachable=A-B+C-D...][,nat=A+B/C+D...]",
                          "[,firewall=A+B...], e.g. rate=100mbit,delay=5ms)"));
  }

  /// nat=1+2+3/4+5 (one NAT per group) or firewall=1+2: no rank behind two of them.
  void read_behind(std::string_view key, std::string_view value) {
    if (!(key == "nat" ? e_.nats.empty() : e_.firewalled.empty()))
      throw bad(cat(key, " is given twice"));
    const auto set = [&](std::string_view v) {
      return parse_rank_set(key, v, [&](const std::string& why) { return bad(why); });
    };
    if (key == "firewall") {
      e_.firewalled = set(value);
    } else {
      for (std::string_view groups = value;;) {  // nat=1+2+3/4+5: one NAT per group
        const auto slash = groups.find('/');
        e_.nats.push_back(set(groups.substr(0, slash)));
        if (slash == std::string_view::npos) break;
        groups.remove_prefix(slash + 1);
      }
    }
    std::vector<int> all = e_.firewalled;
    for (const auto& g : e_.nats) all.insert(all.end(), g.begin(), g.end());
    std::sort(all.begin(), all.end());
    if (std::adjacent_find(all.begin(), all.end()) != all.end())
      throw bad(cat("rank ", *std::adjacent_find(all.begin(), all.end()),
                    " is behind two NATs, or behind a NAT and a firewall"));
  }

  /// rate, delay, jitter or loss: a number with its unit, each key once.
  void read_measure(std::string_view key, std::string_view value) {
    double number = 0.0;
    std::string_view unit;
    if (!split_number(value, number, unit) || number < 0.0)
      throw bad(cat(key, ": '", value, "' is not a non-negative number with a unit"));
    const auto once = [&](bool& seen) {
      if (seen) throw bad(cat(key, " is given twice"));
      seen = true;
    };
    if (key == "rate") {
      once(seen_rate_);
      const double f = scale(unit, {{"bit", 1.0}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}});
      if (f == 0.0) throw bad(cat("rate: unit '", unit, "' (use bit, kbit, mbit or gbit)"));
      e_.rate_bits_per_s = number * f;
      if (e_.rate_bits_per_s < 8000.0 || e_.rate_bits_per_s > 1e11)
        throw bad(cat("rate: must be between 8kbit and 100gbit, got ", value));
    } else if (key == "delay" || key == "jitter") {
      once(key == "delay" ? seen_delay_ : seen_jitter_);
      const double f = scale(unit, {{"us", 1e-3}, {"ms", 1.0}, {"s", 1e3}});
      if (f == 0.0) throw bad(cat(key, ": unit '", unit, "' (use us, ms or s)"));
      (key == "delay" ? e_.delay_ms : e_.jitter_ms) = number * f;
    } else if (key == "loss") {
      once(seen_loss_);
      if (unit != "%") throw bad(cat("loss: '", value, "' needs a % sign (loss=0.1%)"));
      if (number > 100.0) throw bad(cat("loss: at most 100%, got ", value));
      e_.loss_percent = number;
    } else {
      throw bad(cat("unknown key '", key, "' (rate, delay, jitter, loss, unreachable, nat, "
                    "firewall)"));
    }
  }

  const std::string& text_;
  std::string prefix_;
  LinkEmulation e_;
  bool seen_rate_ = false, seen_delay_ = false, seen_jitter_ = false, seen_loss_ = false;
};

}  // namespace

LinkEmulation parse_link_emulation(const std::string& text, const std::string& what) {
  return EmulationReader(text, what).read();
}

void simulate_links(SimConfig& sim, const LinkEmulation& e) {
  if (!e.enabled()) return;
  sim.bandwidth_mbps = e.rate_bits_per_s / 1e6;
  sim.latency_ms = 2.0 * e.delay_ms;
}

}  // namespace gossip
