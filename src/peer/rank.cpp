// peer/rank.cpp: where a peer's rank and its neighbours' addresses come from.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "gossip/core.hpp"
#include "gossip/peer.hpp"

namespace gossip {
namespace {

std::optional<int> parse_rank(const std::string& text, const std::string& from) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0 || v > 1'000'000)
    throw InputError(cat(from, ": expected a rank (a whole number >= 0), got '", text, "'"));
  return static_cast<int>(v);
}

}  // namespace

std::optional<int> resolve_rank(std::optional<int> cli, std::string* source) {
  auto said = [&](const char* s) {
    if (source) *source = s;
  };
  if (cli) {
    said("--rank");
    return cli;
  }
  for (const char* var : {"GOSSIP_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(var); v && *v) {
      said(var);
      return parse_rank(v, var);
    }
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    std::string h = host;
    std::size_t end = h.size();
    std::size_t start = end;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(h[start - 1]))) --start;
    // Only "name-3" style names (StatefulSet pods), not hosts that merely end in a digit.
    if (start < end && start > 0 && h[start - 1] == '-') {
      said("host name");
      return parse_rank(h.substr(start), "host name '" + h + "'");
    }
  }
  return std::nullopt;
}

std::vector<std::string> peer_addresses(const RunConfig& config, const Topology& topology) {
  std::vector<std::string> out;
  for (int r = 0; r < topology.n(); ++r) {
    if (auto a = topology.address(r)) {
      out.push_back(*a);
    } else {
      const int port = config.net.base_port + r;
      if (port > 65535)
        throw InputError(cat("net.base_port ", config.net.base_port, " + rank ", r,
                             " is beyond port 65535"));
      out.push_back(cat(config.net.host, ":", port));
    }
  }
  return out;
}

}  // namespace gossip
