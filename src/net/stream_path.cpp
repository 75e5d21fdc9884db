// net/stream_path.cpp: one header (and its CRC) for every target, then the caller's bytes.
#include "src/net/stream_path.hpp"

#include <algorithm>
#include <cstring>

#include "src/net/session.hpp"

namespace gossip::net {

void StreamPath::send(std::int64_t round, double weight, std::span<const std::byte> values,
                      std::shared_ptr<const void> keep,
                      std::vector<std::pair<Session*, SendToken>> to) {
  if (to.empty()) return;
  // The header is the same for every target: compute the CRC (weight, then values) once. Under
  // TLS the frame travels in our records, whose AEAD tag authenticates every byte: no CRC, 0.
  auto head = std::make_shared<std::vector<std::byte>>(wire::kHeaderBytes + wire::kWeightBytes);
  std::memcpy(head->data() + wire::kHeaderBytes, &weight, sizeof weight);
  const auto weight_bytes = std::span(*head).subspan(wire::kHeaderBytes);
  wire::FrameHeader h;
  h.type = wire::FrameType::kParams;
  h.sender = static_cast<std::uint32_t>(rank_);
  h.round = round;
  h.payload_bytes = wire::kWeightBytes + values.size();
  h.payload_crc = tls_ ? 0 : wire::crc32c(values, wire::crc32c(weight_bytes));
  const auto header = wire::encode_header(h);
  std::copy(header.begin(), header.end(), head->begin());
  for (auto& [s, token] : to) s->send_params(head, values, keep, round, std::move(token));
}

}  // namespace gossip::net
