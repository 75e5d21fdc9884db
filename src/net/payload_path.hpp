/// net/payload_path: how a publish's parameters travel to a neighbour — one small interface,
/// one implementation a file: the session's stream (stream_path.cpp: a params frame on the
/// link's TLS or plain TCP stream, direct or relayed alike) and a side path for a neighbour on
/// this host (shm_path.cpp: one copy into our shared segment, a small note frame each). Links
/// asks its paths in order which one carries a link's publishes (the first that does), and a
/// session that receives a note frame hands it to the SidePathReader attached at its handshake.
/// A new path (a GPU's device memory between the processes of one host) is one more
/// implementation and one more entry in Links' list; Session carries frames and knows no path.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/payload_path.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <span>
#include <utility>
#include <vector>

#include "gossip/host_memory.hpp"
#include "gossip/wire.hpp"
#include "src/net/mailbox.hpp"

namespace gossip::net {

class Session;

/// The sending end of a path (I/O thread).
class PayloadPath {
 public:
  virtual ~PayloadPath() = default;
  /// Whether this path carries our publishes to the neighbour at the other end of `session`.
  virtual bool carries(const Session& session) const = 0;
  /// Sends one publish — round, push-sum weight, the values in the link's wire format (`keep`
  /// owns them when they are not the caller's buffer) — to every session of `to`, each with its
  /// send's token.
  virtual void send(std::int64_t round, double weight, std::span<const std::byte> values,
                    std::shared_ptr<const void> keep,
                    std::vector<std::pair<Session*, SendToken>> to) = 0;
};

class SidePathReader;

/// A path beside the stream, for the neighbours it can reach (ShmPath: those on this host). It
/// carries a link's publishes once the neighbour has said it reads them (its shm-ready frame),
/// and it reads the neighbour's through the reader it gives at the handshake.
class SidePath : public PayloadPath {
 public:
  using Log = std::function<void(const std::string&)>;
  /// The reader of `peer`'s side of this path, when its hello offers one this peer can use
  /// (said in `log` either way); else nullptr.
  virtual std::unique_ptr<SidePathReader> reader_for(int peer, const wire::Hello& hello,
                                                     const Log& log) const = 0;
};

/// The receiving end of a side path: the values a neighbour's note frame points at.
class SidePathReader {
 public:
  virtual ~SidePathReader() = default;
  struct Taken {
    bool torn = false;   // the owner rewrote them before we had read them: drop the round
    double weight = 1.0;
    std::uint64_t where = 0;  // where they lay (a slot), for the log line of a torn read
  };
  /// Copies the values `note` names into `into` (param_count floats), noting in the same pass
  /// whether every value is finite. Throws InputError for a note this path cannot have sent
  /// (the session closes the link).
  virtual Taken read(std::span<const std::byte> note, std::span<float> into, bool* finite) = 0;
};

}  // namespace gossip::net
