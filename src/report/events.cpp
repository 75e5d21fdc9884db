// report/events.cpp: the peer-to-launcher event lines. Each event lists its fields once (fields()
// below); the encoder and the parser both walk that list, so they cannot drift apart. Strings
// are percent-escaped (space, '%', control characters), doubles are written in their shortest
// exact form, so a parsed event equals the one encoded.
#include "gossip/events.hpp"

#include <charconv>
#include <cstdio>
#include <map>

#include "gossip/json.hpp"

namespace gossip {

namespace {

constexpr std::string_view kPrefix = "@gossip ";

/// Calls f(key, value) for each key, value pair in order.
template <typename F>
void each(F&) {}
template <typename F, typename V, typename... Rest>
void each(F& f, std::string_view key, V& value, Rest&... rest) {
  f(key, value);
  each(f, rest...);
}

// The fields of each event, in line order (the keys are the line format).
template <typename F> void fields(ReadyEvent& e, F f) {
  each(f, "peer", e.peer, "seconds", e.seconds, "peers", e.peers, "config", e.config, "start",
       e.start, "from", e.from, "restarts", e.restarts);
}
template <typename F> void fields(EvalEvent& e, F f) {
  each(f, "peer", e.peer, "round", e.round, "rounds", e.rounds, "epoch", e.epoch, "loss", e.loss,
       "acc", e.accuracy, "bytes", e.bytes_sent, "seconds", e.seconds, "params", e.params);
}
template <typename F> void fields(RoundEvent& e, F f) {
  each(f, "peer", e.peer, "round", e.round, "rounds", e.rounds, "seconds", e.seconds, "traffic",
       e.traffic, "phases", e.phases);
}
template <typename F> void fields(AlertEvent& e, F f) {
  each(f, "peer", e.peer, "round", e.round, "connected", e.connected, "dead", e.dead, "message",
       e.message);
}
template <typename F> void fields(MemberEvent& e, F f) {
  each(f, "peer", e.peer, "round", e.round, "time_s", e.seconds, "event", e.event, "subject",
       e.subject, "incarnation", e.incarnation, "dead", e.dead, "components", e.components,
       "my_component", e.my_component);
}
template <typename F> void fields(DoneEvent& e, F f) {
  each(f, "peer", e.peer, "acc", e.accuracy, "sha256", e.params_sha256, "bytes", e.bytes_sent,
       "seconds", e.seconds, "phases", e.phases, "refused", e.refused, "rounds", e.rounds,
       "epoch", e.epoch, "awaits_average", e.awaits_average);
}

template <typename F> void fields(LinkEvent& e, F f) {
  each(f, "peer", e.peer, "round", e.round, "time_s", e.seconds, "link", e.change, "neighbour",
       e.neighbour, "formed_s", e.formed_s, "reason", e.reason);
}

const char* type_name(const ReadyEvent&) { return "ready"; }
const char* type_name(const EvalEvent&) { return "eval"; }
const char* type_name(const RoundEvent&) { return "round"; }
const char* type_name(const AlertEvent&) { return "alert"; }
const char* type_name(const MemberEvent&) { return "member"; }
const char* type_name(const DoneEvent&) { return "done"; }
const char* type_name(const LinkEvent&) { return "link"; }

// --- values to text ---------------------------------------------------------------------------

std::string encode(const std::string& s) {
  std::string o;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ' ' || c == '%' || u < 0x20 || u == 0x7f) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}
std::string encode(bool v) { return v ? "1" : "0"; }
std::string encode(MemberEventKind kind) { return event_name(kind); }
std::string encode(LinkChange change) { return link_change_name(change); }
std::string encode(PeerStart start) { return peer_start_name(start); }
std::string encode(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
template <typename T>
  requires std::is_integral_v<T>
std::string encode(T v) { return std::to_string(v); }
std::string encode(const std::vector<int>& v) {
  std::string o;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) o += ',';
    o += std::to_string(v[i]);
  }
  return o;
}
std::string encode(const Components& c) {
  std::string o;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i) o += ';';
    o += encode(c[i]);
  }
  return o;
}

// --- text to values (false when malformed) ----------------------------------------------------

template <typename T>
bool decode_number(std::string_view s, T& v) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
bool decode(std::string_view s, int& v) { return decode_number(s, v); }
bool decode(std::string_view s, std::int64_t& v) { return decode_number(s, v); }
bool decode(std::string_view s, std::uint64_t& v) { return decode_number(s, v); }
bool decode(std::string_view s, double& v) { return decode_number(s, v); }
bool decode(std::string_view s, MemberEventKind& v) {
  const std::optional<MemberEventKind> kind = find_member_event(s);
  if (kind) v = *kind;
  return kind.has_value();
}
bool decode(std::string_view s, LinkChange& v) {
  const auto* row = find_choice(link_change_table(), s);
  if (row) v = row->kind;
  return row != nullptr;
}
bool decode(std::string_view s, PeerStart& v) {
  const auto* row = find_choice(peer_start_table(), s);
  if (row) v = row->kind;
  return row != nullptr;
}
bool decode(std::string_view s, bool& v) {
  if (s != "0" && s != "1") return false;
  v = s == "1";
  return true;
}
bool decode(std::string_view s, std::string& v) {
  v.clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u == 0x7f) return false;  // the encoder escapes these
    if (s[i] != '%') {
      v += s[i];
      continue;
    }
    unsigned byte = 0;
    if (i + 2 >= s.size()) return false;
    const auto r = std::from_chars(s.data() + i + 1, s.data() + i + 3, byte, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + i + 3) return false;
    v += static_cast<char>(byte);
    i += 2;
  }
  return true;
}
bool decode(std::string_view s, std::vector<int>& v) {
  v.clear();
  while (!s.empty()) {
    const auto comma = s.find(',');
    int x = 0;
    if (!decode_number(s.substr(0, comma), x)) return false;
    v.push_back(x);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
    if (s.empty()) return false;  // a trailing comma
  }
  return true;
}

bool decode(std::string_view s, Components& c) {
  c.clear();
  while (!s.empty()) {
    const auto semi = s.find(';');
    std::vector<int> part;
    if (!decode(s.substr(0, semi), part) || part.empty()) return false;
    c.push_back(std::move(part));
    if (semi == std::string_view::npos) break;
    s.remove_prefix(semi + 1);
    if (s.empty()) return false;
  }
  return true;
}

/// key -> value of "k1=v1 k2=v2"; nullopt when a token has no '=' or a key repeats.
std::optional<std::map<std::string_view, std::string_view>> split_fields(std::string_view s) {
  std::map<std::string_view, std::string_view> out;
  while (!s.empty()) {
    const auto sp = s.find(' ');
    const std::string_view token = s.substr(0, sp);
    const auto eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) return std::nullopt;
    if (!out.emplace(token.substr(0, eq), token.substr(eq + 1)).second) return std::nullopt;
    if (sp == std::string_view::npos) break;
    s.remove_prefix(sp + 1);
    if (s.empty()) return std::nullopt;  // a trailing space
  }
  return out;
}

template <typename E>
std::optional<PeerEvent> parse_as(const std::map<std::string_view, std::string_view>& values) {
  E event;
  bool ok = true;
  std::size_t used = 0;
  fields(event, [&](std::string_view key, auto& value) {
    const auto it = values.find(key);
    ok = ok && it != values.end() && decode(it->second, value);
    ++used;
  });
  if (!ok || used != values.size()) return std::nullopt;
  return PeerEvent(std::move(event));
}

}  // namespace

std::string encode_event(const PeerEvent& event) {
  PeerEvent copy = event;  // fields() hands out mutable references for the parser's sake
  return std::visit(
      [](auto& e) {
        std::string line = std::string(kPrefix) + type_name(e);
        fields(e, [&](std::string_view key, const auto& value) {
          line.append(" ").append(key).append("=").append(encode(value));
        });
        return line;
      },
      copy);
}

std::string event_json(const PeerEvent& event) {
  PeerEvent copy = event;
  return std::visit(
      [](auto& e) {
        JsonObject o;
        // A membership event's own "event" field ("dead", "partition", ...) names the line.
        if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(e)>, MemberEvent>)
          o.add("event", type_name(e));
        fields(e, [&](std::string_view key, const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::vector<int>>) {
            o.add(key, JsonArray::of(value));
          } else if constexpr (std::is_same_v<T, MemberEventKind>) {
            o.add(key, event_name(value));
          } else if constexpr (std::is_same_v<T, LinkChange>) {
            o.add(key, link_change_name(value));
          } else if constexpr (std::is_same_v<T, PeerStart>) {
            o.add(key, peer_start_name(value));
          } else if constexpr (std::is_same_v<T, Components>) {
            JsonArray a;
            for (const auto& part : value) a.add(JsonArray::of(part));
            o.add(key, a);
          } else {
            o.add(key, value);
          }
        });
        return o.str();
      },
      copy);
}

std::optional<PeerEvent> parse_event(std::string_view line) {
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  const auto sp = line.find(' ');
  const std::string_view type = line.substr(0, sp);
  const auto values =
      split_fields(sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1));
  if (!values) return std::nullopt;
  if (type == "ready") return parse_as<ReadyEvent>(*values);
  if (type == "eval") return parse_as<EvalEvent>(*values);
  if (type == "round") return parse_as<RoundEvent>(*values);
  if (type == "alert") return parse_as<AlertEvent>(*values);
  if (type == "member") return parse_as<MemberEvent>(*values);
  if (type == "done") return parse_as<DoneEvent>(*values);
  if (type == "link") return parse_as<LinkEvent>(*values);
  return std::nullopt;
}

}  // namespace gossip
