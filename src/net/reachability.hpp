/// net/reachability: whether the other members can dial this peer (net.reachable: auto). Up to
/// kMaxDialBackHelpers members with known addresses are asked at the start to dial this peer
/// back at the address the run gives it — the helper dials its own copy of the run's addresses,
/// never one the asker names — and to send a probe carrying the asker's nonce. The peer is
/// reachable when every helper that answered reached it (and its probe arrived), unreachable as
/// soon as one could not: it then dials every neighbour itself. This part also serves the
/// dial-back asks of the other members.
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/reachability.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/net/address_gossip.hpp"
#include "src/net/rendezvous_io.hpp"

namespace gossip::net {

class ReachabilityCheck {
 public:
  using Clock = std::chrono::steady_clock;
  using Socket = RendezvousIo::Socket;

  /// `on_unreachable` runs (I/O thread) once this peer has found it cannot be dialled.
  ReachabilityCheck(const NetConfig& config, RendezvousIo& io, const AddressGossip& addresses,
                    std::function<void(const std::string&)> log,
                    std::function<void()> on_unreachable);

  /// What was found so far (any thread).
  ReachabilityReport report() const;
  /// Found (or told) that it cannot be dialled (I/O thread).
  bool unreachable() const { return report().state == Reachability::kUnreachable; }

  // --- I/O thread ----------------------------------------------------------------------------
  /// Asks the helpers; the check settles by `deadline` at the latest.
  void start(Clock::time_point deadline);
  /// Another member's ask: dial it back at its address in the run, send it a probe, answer.
  void serve_dial_back(Socket asker, const wire::Rendezvous& ask);
  /// A probe came to our port: a helper that dialled us back.
  void probe_came(const wire::Rendezvous& probe);

 private:
  void ask(int helper, Clock::time_point deadline);
  void ask_after(int helper, Clock::time_point deadline);
  void read_answer(Socket socket, int helper, Clock::time_point deadline);
  void answered(int helper, bool ok, const std::string& text);
  /// Helper `helper` said it dialled us back: its probe must arrive by `until`.
  void wait_for_probe(int helper, const std::string& text, Clock::time_point until);
  void settle(Reachability state, std::string how);
  /// The members' deadline passed: settled with what came.
  void deadline_passed();

  const NetConfig& config_;
  RendezvousIo& io_;
  const AddressGossip& addresses_;
  const std::function<void(const std::string&)> log_;
  const std::function<void()> on_unreachable_;
  mutable std::mutex mu_;  // guards report_
  ReachabilityReport report_;
  std::uint64_t nonce_ = 0;
  std::vector<int> probes_from_;    // helpers whose dial back reached us
  std::vector<int> helpers_;        // members asked to dial us back
  std::vector<int> helpers_ok_;     // ... that did
  std::size_t helpers_done_ = 0;    // ... that answered, or will not
  std::optional<Clock::time_point> first_ok_;  // when the first dialled us back
};

}  // namespace gossip::net
