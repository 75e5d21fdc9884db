/// net/stream_path: a publish as a params frame on each link's stream (TLS records or plain TCP,
/// direct or through a relay: the session's stream cannot tell). It carries every link that no
/// other path does.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/stream_path.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include "src/net/payload_path.hpp"

namespace gossip::net {

class StreamPath final : public PayloadPath {
 public:
  /// `rank` is ours (the frames' sender); `tls`: the frames travel in authenticated records.
  StreamPath(int rank, bool tls) : rank_(rank), tls_(tls) {}
  bool carries(const Session&) const override { return true; }
  void send(std::int64_t round, double weight, std::span<const std::byte> values,
            std::shared_ptr<const void> keep,
            std::vector<std::pair<Session*, SendToken>> to) override;

 private:
  const int rank_;
  const bool tls_;
};

}  // namespace gossip::net
