/// net/shm: the same-host fast path. A peer publishes its parameters into a sealed memfd of its
/// own (ShmSegment); a neighbour on the same host maps that memfd read-only (ShmView) and copies
/// the round's parameters out of it, so the megabyte of values never crosses the kernel's TCP
/// stack. The TCP connection stays: it carries the handshake, the byes, and per round a 64-byte
/// shm-params frame saying which slot to read. docs/wire.md has the protocol.
///
/// Slots are reused round-robin and guarded by a sequence number (a seqlock): odd while the
/// owner writes, even when done. A reader that finds the sequence changed under it reports a
/// torn read instead of delivering a mix of two rounds. The slots hold what a params frame would
/// carry: float32, or the 16-bit values of gossip.wire bf16 / fp16. No Asio here.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/shm.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gossip/wire.hpp"

namespace gossip::net {

/// The most parameter slots a segment may have (an offer of more is refused).
inline constexpr std::uint32_t kMaxShmSlots = 64;

/// What two processes must share for one to open the other's segment as /proc/PID/fd/FD: the
/// boot, and the pid, mount, network and IPC namespaces. Peers in different network namespaces
/// (containers, pods, the netns tests) count as different hosts and talk TCP.
std::uint64_t host_key();

/// Our segment. Written by the I/O thread only.
class ShmSegment {
 public:
  /// A segment of `slots` slots of `param_count` values in format `wire` (4 or 2 bytes each).
  /// nullptr (and `why`) when the kernel has no sealed memfds or the memory cannot be had.
  static std::unique_ptr<ShmSegment> create(std::uint64_t param_count, WireFormat wire,
                                            std::uint32_t slots, std::string* why);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  /// What goes into our hello.
  const wire::ShmOffer& offer() const { return offer_; }

  /// Copies `values` (param_count values in the segment's format, as a params frame carries
  /// them) into the next slot and returns the note that announces it.
  wire::ShmNote write(double weight, std::span<const std::byte> values);

 private:
  ShmSegment() = default;
  int fd_ = -1;
  std::byte* base_ = nullptr;
  wire::ShmOffer offer_;
  std::uint64_t param_count_ = 0;
  std::uint64_t value_bytes_ = 4;
  std::uint64_t stride_ = 0;
  std::uint64_t writes_ = 0;
};

/// A neighbour's segment, mapped read-only.
class ShmView {
 public:
  /// Opens and checks the segment `offer` describes: the right kind of file (a memfd sealed
  /// against shrinking, so it can never vanish under our reads), the size, the token, the
  /// parameter count and their format. nullptr and `why` when any of that fails.
  static std::unique_ptr<ShmView> open(const wire::ShmOffer& offer, std::uint64_t param_count,
                                       WireFormat wire, std::string* why);
  ~ShmView();
  ShmView(const ShmView&) = delete;
  ShmView& operator=(const ShmView&) = delete;

  enum class Read { kOk, kTorn };
  /// Copies the slot `note` names into `out` (param_count floats; half-width values widened),
  /// noting in the same pass whether every value is finite. kTorn when the owner rewrote the
  /// slot before or while we read it: `out` is then garbage. Throws InputError for a slot
  /// number out of range (the caller closes the link).
  Read read(const wire::ShmNote& note, std::span<float> out, bool* all_finite) const;

 private:
  ShmView() = default;
  const std::byte* base_ = nullptr;
  std::uint64_t bytes_ = 0;
  std::uint64_t stride_ = 0;
  std::uint32_t slots_ = 0;
  WireFormat wire_ = WireFormat::kFp32;
};

}  // namespace gossip::net
