// core/log.cpp: timestamped log lines, so a peer's log says when each thing happened.
#include <time.h>

#include <chrono>
#include <cstdio>

#include "gossip/core.hpp"

namespace gossip {

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  const time_t seconds = static_cast<time_t>(ms.count() / 1000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(ms.count() % 1000));
  return buf;
}

void log_line(const std::string& line) {
  const std::string text = utc_timestamp() + " " + line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);  // one write: threads' lines stay whole
  std::fflush(stderr);
}

}  // namespace gossip
