/// progress: one progress line for long work (round, bar, ETA, and what the caller adds). On a
/// terminal it redraws in place (at most ten times a second); otherwise (logs, CI) it prints a
/// line at most every few seconds and at the end, so logs stay short. Notes (alerts) are printed
/// on their own line. The ETA comes from the measured rate of progress (EtaEstimate).
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/progress.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace gossip {

/// The time left, from the measured rate of progress. The first sample is the baseline, so what
/// came before it (loading data, connecting, the first evaluation) never counts as round time;
/// the rate is that of the last kWindowSeconds of samples (so it follows a run that speeds up or
/// slows down); and there is no estimate until kMinDone units and kMinSeconds have passed since
/// the baseline. Not thread-safe.
class EtaEstimate {
 public:
  static constexpr double kWindowSeconds = 30.0;
  static constexpr double kMinSeconds = 1.0;
  static constexpr std::int64_t kMinDone = 3;

  /// Records that `done` units were complete at `seconds` (any clock; non-decreasing).
  void add(double seconds, std::int64_t done);
  /// Seconds until `total` units are done at the measured rate; nullopt while too little has
  /// been seen (or nothing moved).
  std::optional<double> seconds_left(std::int64_t total) const;

 private:
  std::deque<std::pair<double, std::int64_t>> samples_;  // about one per kSampleGap, in order
  std::pair<double, std::int64_t> first_{0.0, 0};
  bool any_ = false;
};

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
  EtaEstimate eta_;
  std::string last_line_;  // the line printed last (not printed twice at the end)
  std::string last_text_;  // its text after the bar, and whether it showed the end
  bool last_was_end_ = false;
};

/// "0.8123" with `digits` decimals.
std::string fixed(double v, int digits);
/// "1.23e-04".
std::string sci(double v);
/// "1m23s" / "45s".
std::string duration_text(double seconds);

}  // namespace gossip
