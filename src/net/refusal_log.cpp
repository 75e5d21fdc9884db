// net/refusal_log.cpp: a token bucket for refusal lines.
#include "src/net/refusal_log.hpp"

#include <algorithm>

#include "gossip/core.hpp"

namespace gossip::net {
namespace {
constexpr double kRefusalBurst = 20;      // refusal lines logged at once
constexpr double kRefusalsPerSecond = 1;  // and then at most this many a second
}  // namespace

RefusalLog::RefusalLog(Log log) : log_(std::move(log)), tokens_(kRefusalBurst) {}

void RefusalLog::operator()(const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min(kRefusalBurst,
                     tokens_ + kRefusalsPerSecond *
                                   std::chrono::duration<double>(now - refill_).count());
  refill_ = now;
  if (tokens_ < 1) {
    ++unlogged_;
    return;
  }
  tokens_ -= 1;
  if (unlogged_ == 0) return log_(line);
  log_(cat(line, " (", unlogged_, " more refusals since the last one not logged)"));
  unlogged_ = 0;
}

void RefusalLog::flush() {
  if (unlogged_ > 0)
    log_(cat(unlogged_, " more refusals of unauthenticated connections not logged"));
  unlogged_ = 0;
}

}  // namespace gossip::net
