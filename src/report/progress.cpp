// report/progress.cpp: the progress line shared by `gossip sim`, `gossip run` and sweeps.
#include "gossip/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace gossip {

Progress::Progress()
    : tty_(isatty(STDOUT_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_ - std::chrono::hours(1)) {}

void Progress::update(std::int64_t done, std::int64_t total, const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total;
  if (!tty_ && !last && now - last_print_ < std::chrono::seconds(5)) return;
  last_print_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double frac = total > 0 ? static_cast<double>(done) / total : 0.0;
  const double eta = frac > 0 ? elapsed * (1.0 - frac) / frac : 0.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::round(frac * kWidth));
  std::string bar(filled, '#');
  bar += std::string(kWidth - filled, '.');
  std::printf("%sround %lld/%lld [%s] %3.0f%%  ETA %s  %s%s", tty_ ? "\r\033[K" : "",
              static_cast<long long>(done), static_cast<long long>(total), bar.c_str(),
              100.0 * frac, duration_text(eta).c_str(), text.c_str(), tty_ ? "" : "\n");
  std::fflush(stdout);
  drawn_ = tty_;
}

void Progress::note(const std::string& message) {
  if (drawn_) std::printf("\n");
  drawn_ = false;
  std::printf("%s\n", message.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (drawn_) std::printf("\n");
  drawn_ = false;
  std::fflush(stdout);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string sci(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char buf[64];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace gossip
