// report/progress.cpp: the progress line shared by `gossip sim`, `gossip run` and sweeps, and the
// ETA it shows.
#include "gossip/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gossip {

namespace {

constexpr double kSampleGap = 0.2;  // seconds between the samples an EtaEstimate keeps

}  // namespace

void EtaEstimate::add(double seconds, std::int64_t done) {
  if (!any_) {
    any_ = true;
    first_ = {seconds, done};
    samples_.emplace_back(seconds, done);
    return;
  }
  // The newest sample is always the latest; older ones stay about kSampleGap apart.
  if (samples_.size() >= 2 && samples_.back().first - samples_[samples_.size() - 2].first < kSampleGap)
    samples_.back() = {seconds, done};
  else
    samples_.emplace_back(seconds, done);
  // Keep one sample at least kWindowSeconds old, so the window spans the whole window.
  while (samples_.size() > 2 && samples_[1].first <= seconds - kWindowSeconds)
    samples_.pop_front();
}

std::optional<double> EtaEstimate::seconds_left(std::int64_t total) const {
  if (!any_) return std::nullopt;
  const auto& [now, done] = samples_.back();
  if (done - first_.second < kMinDone || now - first_.first < kMinSeconds) return std::nullopt;
  const double span = now - samples_.front().first;
  const auto moved = done - samples_.front().second;
  if (span <= 0.0 || moved <= 0) return std::nullopt;
  return std::max<double>(0.0, static_cast<double>(total - done)) * span / moved;
}

Progress::Progress()
    : tty_(isatty(STDOUT_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_ - std::chrono::hours(1)) {}

void Progress::update(std::int64_t done, std::int64_t total, const std::string& text) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  eta_.add(elapsed, done);
  const bool last = done >= total;
  if (last && last_was_end_ && text == last_text_) return;  // the end, already shown
  if (!last && now - last_print_ < (tty_ ? std::chrono::milliseconds(100)
                                         : std::chrono::milliseconds(5000)))
    return;
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / total) : 0.0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(std::round(frac * kWidth));
  std::string bar(filled, '#');
  bar += std::string(kWidth - filled, '.');
  std::string eta;
  if (last) {
    eta = "took " + duration_text(elapsed);
  } else {
    const auto left = eta_.seconds_left(total);
    eta = "ETA " + (left ? duration_text(*left) : std::string("-"));
  }
  char head[160];
  std::snprintf(head, sizeof head, "round %lld/%lld [%s] %3.0f%%  %s  ",
                static_cast<long long>(done), static_cast<long long>(total), bar.c_str(),
                100.0 * frac, eta.c_str());
  std::string line = head + text;
  if (last && line == last_line_) return;  // the end, already shown
  last_print_ = now;
  std::printf("%s%s%s", tty_ ? "\r\033[K" : "", line.c_str(), tty_ ? "" : "\n");
  std::fflush(stdout);
  last_line_ = std::move(line);
  last_text_ = text;
  last_was_end_ = last;
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
