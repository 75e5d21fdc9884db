/// net/refusal_log: the log lines about connections that have not authenticated, at a bounded
/// rate — a burst, then one a second; the rest are counted and said with the next line (and at
/// the end), so that a flood of strangers cannot flood the log.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/refusal_log.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace gossip::net {

class RefusalLog {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit RefusalLog(Log log);
  /// Logs `line` unless the rate is spent (then counts it).
  void operator()(const std::string& line);
  /// Says how many were not logged, if any (at shutdown).
  void flush();

 private:
  const Log log_;
  double tokens_;
  std::chrono::steady_clock::time_point refill_ = std::chrono::steady_clock::now();
  std::uint64_t unlogged_ = 0;
};

}  // namespace gossip::net
