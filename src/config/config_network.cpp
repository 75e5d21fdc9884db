// config/config_network.cpp: the monitor:, sim: and net: sections.
#include "src/config/sections.hpp"

#include <cstdlib>

namespace gossip {

std::string address_problem(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return "expected host:port";
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos)
    return "write an IPv6 host in brackets: [::1]:port";
  if (host.empty()) return "empty host in host:port";
  for (char c : host)
    if (c == ' ' || c == '\t' || c == '/') return "host may not contain spaces or '/'";
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos)
    return cat("port '", port, "' is not a number");
  const long p = port.size() > 5 ? 0 : std::strtol(port.c_str(), nullptr, 10);
  if (p < 1 || p > 65535) return cat("port ", port, " is outside 1..65535");
  return "";
}

}  // namespace gossip

namespace gossip::sections {

/// sim.peer_eval_limit governs real peers too now: refused there with its new place.
const Moved kMovedFromSim = {{"peer_eval_limit", "train.peer_eval_limit"}};

/// monitor: the preset's timing first (wherever `preset` stands in the map), then each key set
/// beside it over the preset's value.
void read_monitor(const Reader& r, const Node& n, MonitorConfig& m) {
  auto preset = [&](const Node& v, const std::string& f) {
    return r.named(v, f, monitor_preset_table());
  };
  if (n.is_map() && n["preset"].defined())
    m = monitor_preset(preset(n["preset"], "monitor.preset"));
  r.each(n, "monitor", Handlers{
      {"preset", [&](auto& v, auto& f) { m.preset = preset(v, f); }},
      {"round_timeout_s", [&](auto& v, auto& f) { m.round_timeout_s = r.positive(v, f, false); }},
      {"round_timeout_floor_s", [&](auto& v, auto& f) { m.round_timeout_floor_s = r.positive(v, f, true); }},
      {"suspect_after_s", [&](auto& v, auto& f) { m.suspect_after_s = r.positive(v, f, false); }},
      {"dead_after_rounds", [&](auto& v, auto& f) { m.dead_after_rounds = r.positive_int(v, f, false); }},
      {"dead_after_s", [&](auto& v, auto& f) { m.dead_after_s = r.positive(v, f, true); }},
      {"remove_dead_after_rounds", [&](auto& v, auto& f) { m.remove_dead_after_rounds = r.positive_int(v, f, true); }},
      {"on_partition", [&](auto& v, auto& f) { m.on_partition = r.named(v, f, partition_policy_table()); }},
  });
}

void read_sim(const Reader& r, const Node& n, SimConfig& s) {
  r.each(n, "sim", Handlers{
      {"workers", [&](auto& v, auto& f) { s.workers = r.integer_in(v, f, 0, kMaxWorkers); }},
      {"latency_ms", [&](auto& v, auto& f) { s.latency_ms = r.positive(v, f, true); }},
      {"bandwidth_mbps", [&](auto& v, auto& f) { s.bandwidth_mbps = r.positive(v, f, false); }},
      {"step_ms", [&](auto& v, auto& f) { s.step_ms = r.positive(v, f, true); }},
      {"stragglers", [&](auto& v, auto& f) { s.stragglers = r.ints(v, f); }},
      {"straggler_factor", [&](auto& v, auto& f) { s.straggler_factor = r.positive(v, f, false); }},
      {"message_loss", [&](auto& v, auto& f) {
         s.message_loss = r.positive(v, f, true);
         if (s.message_loss >= 1) r.fail(v, f, "must be below 1");
       }},
      {"consensus_only", [&](auto& v, auto& f) { s.consensus_only = r.boolean(v, f); }},
      {"consensus_dim", [&](auto& v, auto& f) { s.consensus_dim = r.positive_int(v, f, false); }},
      {"consensus_rounds", [&](auto& v, auto& f) { s.consensus_rounds = r.positive_int(v, f, false); }},
      {"eval_peers", [&](auto& v, auto& f) { s.eval_peers = r.positive_int(v, f, true); }},
      {"trace_peers", [&](auto& v, auto& f) { s.trace_peers = r.positive_int(v, f, true); }},
      {"cores", [&](auto& v, auto& f) { s.cores = r.positive_int(v, f, true); }},
      {"byte_cpu_ns", [&](auto& v, auto& f) { s.byte_cpu_ns = r.positive(v, f, true); }},
      {"message_cpu_us", [&](auto& v, auto& f) { s.message_cpu_us = r.positive(v, f, true); }},
      {"exchange_cpu", [&](auto& v, auto& f) { s.exchange_cpu = r.boolean(v, f); }},
  }, kMovedFromSim);
}

/// net.tls: `off` (or `on`), or {ca, cert, key}, all three, paths relative to the config.
void read_tls(const Reader& r, const Node& v, const std::string& f, NetworkConfig& c) {
  if (v.is_scalar()) {
    const std::string s = r.choice(v, f, {"on", "off", "true", "false"});
    c.tls = s == "on" || s == "true";
    return;
  }
  if (!v.is_map())
    r.fail(v, f, cat("expected off, on, or {ca, cert, key}, got ", v.describe()));
  c.tls = true;
  r.each(v, f, Handlers{
      {"ca", [&](auto& x, auto& g) { c.tls_ca = r.path(x, g); }},
      {"cert", [&](auto& x, auto& g) { c.tls_cert = r.path(x, g); }},
      {"key", [&](auto& x, auto& g) { c.tls_key = r.path(x, g); }},
  });
  for (const auto& [value, key] : {std::pair{&c.tls_ca, "ca"}, std::pair{&c.tls_cert, "cert"},
                                   std::pair{&c.tls_key, "key"}})
    if (value->empty())
      r.fail(v, f, cat("names no ", key, " (give ca, cert and key together, e.g. from "
                       "`gossip keys init DIR`: {ca: DIR/ca.pem, cert: \"DIR/peer-{rank}.pem\", "
                       "key: \"DIR/peer-{rank}.key\"})"));
}

/// net.relays: auto, none, or a list of relays: a rank (a member) or "HOST:PORT".
void read_relays(const Reader& r, const Node& v, const std::string& f, NetworkConfig& c) {
  c.relays.clear();
  if (v.is_scalar()) {
    c.relays_auto = r.named(v, f, relay_mode_table()) == RelayMode::kAuto;
    return;
  }
  c.relays_auto = false;
  c.relays = r.list(v, f, [&](const Node& item, const std::string& g) {
    const std::string text = r.text(item, g);
    const bool rank = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    if (rank) return cat("peer ", r.integer_in(item, g, 0, 1'000'000));
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
      r.fail(item, g, cat("'", text, "' is neither a rank nor HOST:PORT"));
    return text;
  });
  if (c.relays.empty()) r.fail(v, f, "an empty list: give relays, or none, or auto");
}

void read_net(const Reader& r, const Node& n, NetworkConfig& c) {
  r.each(n, "net", Handlers{
      {"run_id", [&](auto& v, auto& f) {
         c.run_id = r.text(v, f);
         if (c.run_id.size() > NetworkConfig::kMaxRunIdBytes)
           r.fail(v, f, cat("at most ", NetworkConfig::kMaxRunIdBytes,
                            " bytes (the handshake's limit), got ", c.run_id.size()));
       }},
      {"host", [&](auto& v, auto& f) { c.host = r.text(v, f); }},
      {"bind", [&](auto& v, auto& f) {
         c.bind = r.text(v, f);
         if (c.bind.empty()) r.fail(v, f, "give an address to bind (HOST or HOST:PORT), or leave "
                                          "the key out");
       }},
      {"advertise", [&](auto& v, auto& f) {
         c.advertise = r.text(v, f);
         if (auto why = address_problem(c.advertise); !why.empty())
           r.fail(v, f, cat("'", c.advertise, "': ", why, " (the address others dial this peer at)"));
       }},
      {"reachable", [&](auto& v, auto& f) { c.reachable = r.named(v, f, reachable_setting_table()); }},
      {"relays", [&](auto& v, auto& f) { read_relays(r, v, f, c); }},
      {"base_port", [&](auto& v, auto& f) {
         c.base_port = r.positive_int(v, f, false);
         if (c.base_port > 65000) r.fail(v, f, cat("must be at most 65000, got ", c.base_port));
       }},
      {"metrics_port", [&](auto& v, auto& f) {
         c.metrics_port = r.positive_int(v, f, true);
         if (c.metrics_port > 65000)
           r.fail(v, f, cat("must be at most 65000, got ", c.metrics_port));
       }},
      {"metrics_host", [&](auto& v, auto& f) { c.metrics_host = r.text(v, f); }},
      {"connect_timeout_s", [&](auto& v, auto& f) { c.connect_timeout_s = r.positive(v, f, false); }},
      {"io_timeout_s", [&](auto& v, auto& f) { c.io_timeout_s = r.positive(v, f, false); }},
      {"handover_timeout_s", [&](auto& v, auto& f) { c.handover_timeout_s = r.positive(v, f, false); }},
      {"shared_memory", [&](auto& v, auto& f) { c.shared_memory = r.boolean(v, f); }},
      {"congestion", [&](auto& v, auto& f) {
         const std::string name = r.text(v, f);
         const bool ok = !name.empty() && name.size() <= 15 &&
                         std::all_of(name.begin(), name.end(), [](char ch) {
                           return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                                  ch == '_' || ch == '-';
                         });
         if (!ok)
           r.fail(v, f, cat("'", name, "' is not the name of a TCP congestion control (system, "
                            "or one the kernel lists in net.ipv4.tcp_available_congestion_control:"
                            " cubic, reno, bbr, ...)"));
         c.congestion = name == "system" ? "" : name;
       }},
      {"tls", [&](auto& v, auto& f) { read_tls(r, v, f, c); }},
      {"emulate", [&](auto& v, auto& f) {
         try {
           c.emulate = parse_link_emulation(r.text(v, f), "");
         } catch (const InputError& e) {
           r.fail(v, f, e.what());
         }
       }},
  });
}

}  // namespace gossip::sections
