/// net/shm_path: the side path between peers of one host. Our publish is copied once into our
/// shared segment (shm.hpp: a sealed memfd of slots reused round-robin) and each same-host
/// neighbour gets a small note frame naming the slot; a neighbour whose segment we mapped at
/// the handshake (it offered one and is on this host) is read from through its ShmReader.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/shm_path.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gossip/net.hpp"
#include "src/net/payload_path.hpp"
#include "src/net/shm.hpp"

namespace gossip::net {

class ShmPath final : public SidePath {
 public:
  /// Our segment, when shared memory is on and one can be had; else nullptr, said in `log`.
  static std::unique_ptr<ShmPath> create(const NetConfig& config, const Log& log);

  /// What our hello offers the neighbours.
  const wire::ShmOffer& offer() const { return segment_->offer(); }
  /// The reader of `peer`'s segment, when its hello offered one and it is on this host (said in
  /// `log` either way); else nullptr (its parameters come over the stream).
  std::unique_ptr<SidePathReader> reader_for(int peer, const wire::Hello& hello,
                                             const Log& log) const override;

  bool carries(const Session& session) const override;
  void send(std::int64_t round, double weight, std::span<const std::byte> values,
            std::shared_ptr<const void> keep,
            std::vector<std::pair<Session*, SendToken>> to) override;

 private:
  ShmPath(const NetConfig& config, std::unique_ptr<ShmSegment> segment)
      : config_(config), segment_(std::move(segment)) {}
  const NetConfig& config_;
  std::unique_ptr<ShmSegment> segment_;
};

}  // namespace gossip::net
