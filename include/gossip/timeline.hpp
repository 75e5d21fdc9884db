/// timeline: where a peer's time goes, round by round (DESIGN: every peer and the simulator write
/// the same per-round timeline). Spans of named phases on the peer's clock (wall time for a real
/// peer, the simulated clock in the simulator), written as Chrome trace events to
/// DIR/peers/R/trace.json (one process per peer: opens in Perfetto or chrome://tracing) and
/// summed per phase for summary.json and the final table. Not thread-safe: one per peer.
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/timeline.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gossip/json.hpp"

namespace gossip {

/// The phases, in the order tables list them. Within a round: compute (local steps),
/// compress (the rest of the local phase: copying or compressing what is sent), send (handing
/// it to the transport: framing, and on shared memory the copy), wait (for the neighbours'
/// messages), mix (the rest of the mix phase). Between rounds: evaluate, checkpoint, monitor
/// (membership and catching up). setup is start-up to the first round, finish what follows
/// the last. These ten tile the peer's wall time. encrypt is apart: sealing and opening TLS
/// records on the transport's own thread, beside the others (its spans on a track of their own,
/// its seconds not part of the wall time's sum; README, "Where a round's time goes").
enum class Phase : std::uint8_t {
  kSetup, kCompute, kCompress, kSend, kWait, kMix, kEvaluate, kCheckpoint, kMonitor, kFinish,
  kEncrypt
};
inline constexpr std::size_t kPhaseCount = 11;
/// The phases that tile the wall time: all but encrypt.
inline constexpr std::size_t kWallPhaseCount = 10;

/// Seconds per phase.
using PhaseSeconds = std::array<double, kPhaseCount>;

/// What a caller that overlaps its rounds with its steps (the Python wrapper's overlap=True)
/// measures beside them, per round, on a track of its own: `copy` (starting the snapshot's
/// copies to the host), `copy_wait` (the mixing thread waiting for them), `exposed` (what the
/// steps still waited for the round when they took its change).
enum class OverlapPart : std::uint8_t { kCopy, kCopyWait, kExposed };
inline constexpr std::size_t kOverlapPartCount = 3;
using OverlapSeconds = std::array<double, kOverlapPartCount>;
/// "copy", "copy_wait", "exposed"; throws InputError for another name.
const char* overlap_part_name(std::size_t index);
OverlapPart parse_overlap_part(const std::string& name);

/// The name of phase `index` ("setup", "compute", ...) as trace.json and summary.json write it.
const char* phase_name(std::size_t index);

/// "compute:1.25,send:0.031,..." (every phase, shortest exact doubles), and back; parse throws
/// InputError naming what is wrong.
std::string format_phase_seconds(const PhaseSeconds& s);
PhaseSeconds parse_phase_seconds(const std::string& text);

/// {"setup": seconds, "compute": seconds, ...} for summary.json.
JsonObject phase_json(const PhaseSeconds& s);
/// Each phase's share of the wall time (the sum of the ten wall phases), {"compute": 0.41, ...}
/// (zeros when it is empty); the wall phases' shares add up to 1, encrypt's is beside them.
JsonObject phase_share_json(const PhaseSeconds& s);
/// The final table's "where the time went" lines: a row per labelled PhaseSeconds (a peer, or
/// "all"), each phase's share of that row's wall time in percent, and the wall time in seconds
/// (the sum of the wall phases; encrypt's share is of the same time, beside them).
std::string phase_table(const std::vector<std::pair<std::string, PhaseSeconds>>& rows);

class Timeline {
 public:
  /// `peer` names the trace's process; `clock` gives this peer's time in seconds.
  Timeline(int peer, std::function<double()> clock);

  double now() const { return clock_(); }
  /// A span of `phase` over [start, end], in the open round if there is one. An encrypt span
  /// goes on its own track, outside the rounds.
  void add(Phase phase, double start, double end);
  /// Round `round` starts now; mixing() marks the end of its local phase, end_round() its end.
  /// The spans added inside it stay; what they leave uncovered before mixing() is compress,
  /// after it mix, so a round's phases add up to its length.
  void begin_round(std::int64_t round);
  void mixing();
  void end_round();
  /// Runs `f` and records it as `phase`.
  template <typename F>
  auto time(Phase phase, F&& f) {
    struct Closer {
      Timeline* t;
      Phase p;
      double start;
      ~Closer() { t->add(p, start, t->now()); }
    } closer{this, phase, now()};
    return f();
  }

  /// An overlapped round's `part` (above), on thread 2 of the trace, apart from the phases
  /// (it happens beside them) and summed apart.
  void add_overlap(OverlapPart part, double start, double end, std::int64_t round);

  /// Seconds per phase so far (round spans are containers, not a phase).
  const PhaseSeconds& seconds() const { return seconds_; }
  /// Seconds per overlap part so far, and the rounds that recorded any.
  const OverlapSeconds& overlap_seconds() const { return overlap_seconds_; }
  std::int64_t overlap_rounds() const { return overlap_rounds_; }
  /// The time from the first span's start to the last one's end (encrypt spans aside).
  double covered() const { return first_ < 0 ? 0.0 : last_ - first_; }
  /// Writes the Chrome trace (JSON object format: traceEvents of complete events "X" in
  /// microseconds, pid = peer, a process_name metadata event; rounds and their phases on thread
  /// 0, encrypt on thread 1, overlap parts on thread 2 (named only when there are any), each
  /// named by a thread_name event). Keeps at most kMaxEvents spans
  /// (the earliest); the sums cover all of them.
  void write(const std::string& path) const;

  static constexpr std::size_t kMaxEvents = 200000;

 private:
  struct Span {
    double start, end;
    std::int64_t round;
    std::uint8_t phase;  // kPhaseCount: a round; kPhaseCount + 1 + k: overlap part k
  };
  void keep(const Span& s);

  int peer_;
  std::function<double()> clock_;
  std::vector<Span> spans_;
  std::vector<Span> inner_;      // the open round's spans, until it ends
  std::int64_t round_ = -1;      // the open round (-1: none)
  double round_start_ = 0.0, mixing_from_ = -1.0;
  std::size_t dropped_ = 0;
  PhaseSeconds seconds_{};
  OverlapSeconds overlap_seconds_{};
  std::int64_t overlap_rounds_ = 0, last_overlap_round_ = -1;
  double first_ = -1.0, last_ = -1.0;
};

}  // namespace gossip
