// core/errors.cpp: the one place check failures are formatted, so every message has file:line.
#include "gossip/core.hpp"

namespace gossip::detail {

void throw_check(const char* file, int line, const std::string& what) {
  std::string f = file;
  if (auto pos = f.rfind("src/"); pos != std::string::npos) f = f.substr(pos);
  throw RuntimeError(cat(f, ":", line, ": ", what));
}

}  // namespace gossip::detail
