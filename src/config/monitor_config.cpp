// config/monitor_config.cpp: the monitor's presets (monitor.preset: local | lan | wan), one row of
// membership timing each, in the manner of HashiCorp memberlist's DefaultLocalConfig,
// DefaultLANConfig and DefaultWANConfig: lan is what gossip did before the presets existed (every
// run that names none keeps its timing, bit for bit), and local and wan scale it by the ratios
// memberlist's own configs take from LAN to loopback and to a WAN, each key by the setting of
// memberlist's that plays its part (docs/config.md, "monitor", has the table, and why a value
// departs from them where it does):
//
//   round_timeout_s        the wait for a peer that is alive but slow: TCPTimeout (10 s LAN;
//                          x3 on a WAN; x0.1 on loopback, where we take a third: on one host a
//                          slow peer is slow for want of CPU, and the first rounds wait for peers
//                          still loading their data)
//   round_timeout_floor_s  the least a measured round deadline may be: ProbeTimeout (500 ms
//                          LAN; x6 on a WAN; x0.4 on loopback, rounded up to 1 s)
//   suspect_after_s        silence before a suspicion: ProbeInterval (1 s LAN and loopback; x5
//                          on a WAN)
//   dead_after_rounds      rounds of suspicion before a death: SuspicionMult (4 LAN; 6 on a WAN,
//                          x1.5: 4.5, rounded up to 5; 3 on loopback, x0.75: 2.25, to 2)
//   dead_after_s           seconds of suspicion before a death: memberlist's suspicion timeout,
//                          SuspicionMult x ProbeInterval (x log(N + 1)): 4 s LAN; 30 s on a WAN,
//                          x7.5; 3 s on loopback, x0.75
#include <cstdint>

#include "gossip/config.hpp"
#include "gossip/core.hpp"

namespace gossip {

MonitorConfig monitor_preset(MonitorPreset preset) {
  struct Row {
    MonitorPreset preset;
    double round_timeout_s, round_timeout_floor_s, suspect_after_s;
    std::int64_t dead_after_rounds;
    double dead_after_s;
  };
  // lan is MonitorConfig's defaults (a test holds them equal).
  static constexpr Row kRows[] = {
      {MonitorPreset::kLocal, 10.0, 1.0, 1.0, 2, 0.75},
      {MonitorPreset::kLan, 30.0, 2.0, 1.0, 3, 1.0},
      {MonitorPreset::kWan, 90.0, 12.0, 5.0, 5, 7.5},
  };
  MonitorConfig m;
  for (const Row& r : kRows) {
    if (r.preset != preset) continue;
    m.preset = preset;
    m.round_timeout_s = r.round_timeout_s;
    m.round_timeout_floor_s = r.round_timeout_floor_s;
    m.suspect_after_s = r.suspect_after_s;
    m.dead_after_rounds = r.dead_after_rounds;
    m.dead_after_s = r.dead_after_s;
  }
  return m;
}

std::chrono::milliseconds round_timeout(const MonitorConfig& monitor) {
  return seconds_to_ms(monitor.round_timeout_s);
}

std::chrono::milliseconds io_timeout(const NetworkConfig& net, const MonitorConfig& monitor) {
  return seconds_to_ms(net.io_timeout_s > 0 ? net.io_timeout_s : monitor.round_timeout_s);
}

std::chrono::milliseconds handover_timeout(const NetworkConfig& net,
                                           const MonitorConfig& monitor) {
  return seconds_to_ms(net.handover_timeout_s > 0
                           ? net.handover_timeout_s
                           : net.connect_timeout_s + monitor.round_timeout_s);
}

}  // namespace gossip
