/// faults: the fault schedule (`faults:`, gossip/config.hpp) checked against the graph, and its
/// cuts carried out by CutLinks, an Exchange decorator that sits between the membership monitor
/// (MonitoredExchange) and the transport (NetExchange, SimExchange). Kills, restarts and pauses
/// act on processes, not links: `gossip run`'s launcher signals the peer processes and the
/// simulator stops and starts its virtual peers. So no production class knows about faults
/// (STYLE: fault injection only in test seams): a peer whose schedule has no cut has no CutLinks.
#pragma once
#if !defined(GOSSIP_ROOM_FAULTS)
#error "gossip/faults.hpp belongs to room faults, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gossip/config.hpp"
#include "gossip/exchange.hpp"
#include "gossip/topology.hpp"

namespace gossip {

/// The peers whose link with `peer` the schedule cuts during `round` (a cut entry covers its
/// rounds from_round..to_round-1), ascending.
std::vector<int> cut_peers(std::span<const Fault> faults, int peer, std::int64_t round);

/// Whether the schedule cuts any link (then each peer's exchange needs a CutLinks).
bool has_cuts(std::span<const Fault> faults);

/// Checks the fault schedule against the topology before anything starts: every peer in
/// 0..n-1, every cut link an edge of the graph. Throws InputError naming the config's line.
void check_faults(const RunConfig& config, const Topology& topology);

/// The schedule's cuts for the peer of `inner`: while the link to a peer is cut (the rounds of
/// its cut entries), nothing crosses it either way. publish(), publish_packet() and send_view()
/// skip that peer; collect() and newest() neither wait for nor take anything from it;
/// take_views() drops the views it sent; heard_within() and excused_peers() leave it out. The
/// transport below still carries its heartbeats and views (the cut is above it); they are
/// dropped here, as a cut link would lose them.
///
/// The round is the tag of the last publish, send_view or collect divided by the tags per round
/// (an algorithm with relay phases tags them round * tags + step; see set_tags_per_round), so
/// take_views() and heard_within() go by the round of the exchange that came before them.
/// Calls come from one thread, as for every Exchange; `inner` must outlive this object.
class CutLinks final : public Exchange {
 public:
  CutLinks(Exchange& inner, std::span<const Fault> faults);

  /// Exchanges a round (relay steps + 1), as MonitoredExchange::set_tags_per_round.
  void set_tags_per_round(int tags) { tags_per_round_ = tags < 1 ? 1 : tags; }
  /// The peers cut off from this one in the round of the last call, ascending.
  const std::vector<int>& cut() const { return cut_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void publish(std::int64_t round, std::span<const float> params, double weight,
               std::span<const int> to) override;
  void publish_packet(std::int64_t round, std::span<const std::byte> packet,
                      std::span<const int> to) override;
  std::vector<Inbox> collect(std::int64_t round, std::span<const int> from,
                             const CollectOptions& options) override;
  std::vector<int> dead_peers() const override { return inner_->dead_peers(); }
  std::uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  void send_view(std::int64_t round, std::span<const Member> view, std::span<const int> to,
                 std::span<const Probe> probes = {}) override;
  std::vector<PeerView> take_views() override;
  std::vector<int> excused_peers() const override;
  std::optional<Inbox> newest(std::span<const int> from) override;
  std::optional<std::vector<int>> heard_within(double seconds) const override;
  std::vector<TransportAlert> take_alerts() override { return inner_->take_alerts(); }

 private:
  /// Moves to the round of `tag`: cut_ becomes the peers cut off in it.
  void at(std::int64_t tag);
  /// `peers` without the ones cut off now (order kept).
  std::vector<int> linked(std::span<const int> peers) const;
  bool is_cut(int peer) const;

  Exchange* inner_;
  std::vector<Fault> cuts_;  // the schedule's cut entries
  int tags_per_round_ = 1;
  std::int64_t round_ = -1;  // the round cut_ is for (-1: none yet)
  std::vector<int> cut_;
};

}  // namespace gossip
