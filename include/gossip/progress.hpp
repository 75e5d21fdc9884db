/// progress: one progress line for long work (round, bar, ETA, and what the caller adds). On a
/// terminal it redraws in place; otherwise (logs, CI) it prints a line at most every few seconds
/// and at the end, so logs stay short. Notes (alerts) are printed on their own line.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/progress.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <string>

namespace gossip {

class Progress {
 public:
  Progress();
  void enable(bool on) { enabled_ = on; }
  /// Shows progress at `done` of `total`, with `text` after the bar.
  void update(std::int64_t done, std::int64_t total, const std::string& text);
  /// Prints a message on its own line without losing the bar.
  void note(const std::string& message);
  /// Ends the bar (a newline on a terminal).
  void finish();

 private:
  bool enabled_ = true;
  bool tty_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

/// "0.8123" with `digits` decimals.
std::string fixed(double v, int digits);
/// "1.23e-04".
std::string sci(double v);
/// "1m23s" / "45s".
std::string duration_text(double seconds);

}  // namespace gossip
