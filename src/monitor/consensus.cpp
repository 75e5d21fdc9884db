// monitor/consensus.cpp: consensus distance and the average model, in double, in peer order.
#include <algorithm>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/monitor.hpp"

namespace gossip {

namespace {

constexpr std::size_t kBlock = 4096;  // elements per block: the mean of a block stays in cache

void check_sizes(std::span<const std::span<const float>> buffers, std::size_t n) {
  for (const auto& b : buffers) GOSSIP_CHECK_EQ(b.size(), n);
}

}  // namespace

double consensus_distance(std::span<const std::span<const float>> buffers) {
  const std::size_t peers = buffers.size();
  if (peers < 2) return 0.0;
  const std::size_t n = buffers[0].size();
  check_sizes(buffers, n);
  std::vector<double> mean(kBlock);
  double total = 0.0;
  for (std::size_t start = 0; start < n; start += kBlock) {
    const std::size_t len = std::min(kBlock, n - start);
    std::fill(mean.begin(), mean.begin() + len, 0.0);
    for (const auto& b : buffers)
      for (std::size_t i = 0; i < len; ++i) mean[i] += b[start + i];
    for (std::size_t i = 0; i < len; ++i) mean[i] /= static_cast<double>(peers);
    for (const auto& b : buffers) {
      double s = 0.0;
      for (std::size_t i = 0; i < len; ++i) {
        const double d = b[start + i] - mean[i];
        s += d * d;
      }
      total += s;
    }
  }
  return total / static_cast<double>(peers);
}

void average_params(std::span<const std::span<const float>> buffers, std::span<float> out) {
  GOSSIP_CHECK(!buffers.empty());
  check_sizes(buffers, out.size());
  std::vector<double> acc(kBlock);
  const double inv = 1.0 / static_cast<double>(buffers.size());
  for (std::size_t start = 0; start < out.size(); start += kBlock) {
    const std::size_t len = std::min(kBlock, out.size() - start);
    std::fill(acc.begin(), acc.begin() + len, 0.0);
    for (const auto& b : buffers)
      for (std::size_t i = 0; i < len; ++i) acc[i] += b[start + i];
    for (std::size_t i = 0; i < len; ++i) out[start + i] = static_cast<float>(acc[i] * inv);
  }
}

}  // namespace gossip
