// peer/trace.cpp: the timeline's side of a peer: its exchange decorator (TracedExchange), traced
// learners and rounds, the TLS records' spans (trace.hpp).
#include "src/peer/trace.hpp"


#include "gossip/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"

namespace gossip::peer_parts {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void trace_crypto(Transport& transport, Timeline& timeline, Clock::time_point t0) {
  const auto seconds = [t0](Clock::time_point t) {
    return std::chrono::duration<double>(t - t0).count();
  };
  for (const auto& [start, end] : transport.take_crypto_spans())
    timeline.add(Phase::kEncrypt, seconds(start), seconds(end));
}

}  // namespace gossip::peer_parts
