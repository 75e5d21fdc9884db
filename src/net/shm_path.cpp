// net/shm_path.cpp: our segment written once a publish, the neighbours' segments read.
#include "src/net/shm_path.hpp"

#include <algorithm>

#include "gossip/core.hpp"
#include "src/net/session.hpp"

namespace gossip::net {
namespace {

/// A same-host neighbour's segment, mapped read-only.
class ShmReader final : public SidePathReader {
 public:
  explicit ShmReader(std::unique_ptr<ShmView> view) : view_(std::move(view)) {}
  Taken read(std::span<const std::byte> note, std::span<float> into, bool* finite) override {
    const auto decoded = wire::decode_shm_note(note);
    if (!decoded) throw InputError(decoded.error);
    const ShmView::Read got = view_->read(*decoded.value, into, finite);
    return {got == ShmView::Read::kTorn, decoded.value->weight, decoded.value->slot};
  }

 private:
  std::unique_ptr<ShmView> view_;
};

}  // namespace

std::unique_ptr<ShmPath> ShmPath::create(const NetConfig& config, const Log& log) {
  if (!config.shared_memory) return nullptr;
  // Slots in our segment, reused round-robin: a same-host neighbour must copy a round out before
  // we have published this many more (else it sees a torn read and drops that round), and it
  // may hold up to max_queued_rounds of ours.
  const std::size_t slots = std::max<std::size_t>(4, config.max_queued_rounds + 1);
  if (slots > kMaxShmSlots) {
    log(cat("shared memory off: neighbours may hold ", config.max_queued_rounds,
            " of our rounds, more than ", kMaxShmSlots - 1, " slots; parameters go over TCP"));
    return nullptr;
  }
  std::string why;
  auto segment = ShmSegment::create(config.handshake.param_count, config.handshake.wire,
                                    static_cast<std::uint32_t>(slots), &why);
  if (!segment) {
    log(cat("shared memory unavailable (", why, "); every link carries parameters over TCP"));
    return nullptr;
  }
  return std::unique_ptr<ShmPath>(new ShmPath(config, std::move(segment)));
}

std::unique_ptr<SidePathReader> ShmPath::reader_for(int peer, const wire::Hello& hello,
                                                    const Log& log) const {
  if (!hello.shm || hello.shm->host_key != host_key()) return nullptr;  // another host
  std::string why;
  auto view = ShmView::open(*hello.shm, config_.handshake.param_count, config_.handshake.wire,
                            &why);
  if (!view) {
    log(cat("peer ", peer, " is on this host, but its shared memory cannot be used (", why,
            "); its parameters come over TCP"));
    return nullptr;
  }
  log(cat("peer ", peer, " is on this host: its parameters come through shared memory"));
  return std::make_unique<ShmReader>(std::move(view));
}

bool ShmPath::carries(const Session& session) const { return session.peer_reads_side_path(); }

void ShmPath::send(std::int64_t round, double weight, std::span<const std::byte> values,
                   std::shared_ptr<const void>, std::vector<std::pair<Session*, SendToken>> to) {
  if (to.empty()) return;
  // One copy into our segment, then a small frame each.
  const wire::ShmNote note = segment_->write(weight, values);
  auto frame = std::make_shared<const std::vector<std::byte>>(wire::encode_frame(
      wire::FrameType::kShmParams, static_cast<std::uint32_t>(config_.rank), round,
      wire::encode_shm_note(note)));
  for (auto& [s, token] : to)
    s->send_side_note(frame, wire::kWeightBytes + values.size(), std::move(token));
}

}  // namespace gossip::net
