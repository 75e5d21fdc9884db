/// dashboard: the live state of a run as the dashboard page draws it (/state.json): each peer's
/// state from the peers' own events (their membership views, what the launcher saw of their
/// processes), the live graph's components, each link's traffic rate, the merged evaluations and
/// the event log. `gossip run --dashboard` feeds it from the peers' event lines as they come;
/// `gossip watch` from the run folder's files as they grow (docs/observe.md).
#pragma once
#if !defined(GOSSIP_ROOM_REPORT)
#error "gossip/dashboard.hpp belongs to room report, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gossip/choice.hpp"
#include "gossip/event_kind.hpp"
#include "gossip/events.hpp"
#include "gossip/json.hpp"
#include "gossip/report.hpp"

namespace gossip {

/// A peer's state on the dashboard, one row each: X(id, name in /state.json, summary).
#define GOSSIP_PEER_STATES(X)                                                                   \
  X(kStarting, "starting", "started, not ready yet")                                            \
  X(kAlive, "alive", "ready, and no live peer suspects it")                                     \
  X(kSuspect, "suspect", "a live peer suspects it of having died")                              \
  X(kDead, "dead", "its process exited, or a live peer's view holds it dead")                   \
  X(kFinished, "finished", "done with its rounds")

GOSSIP_NAMED_CHOICE(PeerState, GOSSIP_PEER_STATES, peer_state_table, peer_state_name)

struct DashboardSetup {
  std::string source;     // "gossip run" or "gossip watch"
  std::string out;        // the run folder
  std::string topology;   // its file
  std::string algorithm;
  int n = 0;
  struct Edge {
    int a = 0, b = 0;     // a < b
    double weight = 0.0;
  };
  std::vector<Edge> edges;  // the topology's, undirected
};

/// Thread-safe: the launcher's loop feeds it while the HTTP server's thread renders it. Times
/// are seconds on the caller's clock (since the run, or the watch, began).
class DashboardState {
 public:
  static constexpr std::size_t kMaxEvents = 200;     // the log's newest
  static constexpr double kRateWindowSeconds = 5.0;  // link rates over about this long

  explicit DashboardState(DashboardSetup setup);

  /// One event line of peer `rank`.
  void on_event(int rank, const PeerEvent& e, double now);
  /// A merged evaluation (metrics.csv's rows of one round).
  void on_figures(const EvaluationFigures& f, double now);
  /// Peer `rank`'s process ended without finishing (`why`: killed by the schedule, failed).
  void on_exit(int rank, const std::string& why, double now);
  /// Peer `rank` was started again.
  void on_back(int rank, double now);
  /// A line of the launcher's own (the fault schedule) for the event log.
  void on_note(const std::string& event, std::int64_t round, const std::string& text,
               double now);
  void set_finished(double now);
  /// The state as /state.json's JSON object.
  std::string json(double now) const;

 private:
  struct Peer {
    bool ready = false, finished = false, exited = false;
    std::int64_t round = 0, rounds = 0;
    double accuracy = -1.0, loss = -1.0;  // < 0: not known
    std::uint64_t bytes_sent = 0;
    std::string phases;  // format_phase_seconds
    // Bytes sent to each neighbour: the newest samples, (time, neighbour -> bytes).
    std::deque<std::pair<double, std::map<int, std::uint64_t>>> sent;
    std::map<int, MemberEventKind> view;  // subject -> kSuspect | kDead (alive: absent)
    std::vector<int> suspects, cut;   // byzantine_suspect / byzantine_cut by this peer
    std::map<int, LinkChange> links;  // neighbour -> kNeverFormed | kLost (formed, back: absent)
    std::map<int, std::string> paths;  // neighbour -> how the link formed last (a path event)
    std::string reachability;          // its reachability event's words ("" until then)
  };
  struct Point {
    EvaluationFigures f;
    double seconds = 0.0, loss = 0.0;
  };
  void log(double seconds, std::int64_t round, int peer, const std::string& event, int subject,
           std::string text);
  void traffic(Peer& p, const std::string& text, double now);
  /// Bytes a second from `from` to `to` over the window (0 when unknown).
  double rate(int from, int to) const;
  PeerState state_of(int r) const;
  bool link_up(int a, int b, const std::vector<PeerState>& states) const;
  /// What either end of a-b reported of the link itself (kNeverFormed first), if anything.
  std::optional<LinkChange> link_fact(int a, int b) const;
  /// How the link a-b formed last, as either end's path event said ("" when none did).
  std::string link_path(int a, int b) const;
  /// The live graph's components (in order of their smallest peer), and each peer's (-1: dead).
  std::vector<std::vector<int>> components(const std::vector<PeerState>& states,
                                           std::vector<int>& component_of) const;
  JsonArray peers_json(const std::vector<PeerState>& states,
                       const std::vector<int>& component_of) const;
  JsonArray series_json() const;

  DashboardSetup setup_;
  mutable std::mutex mutex_;
  std::vector<Peer> peers_;
  std::vector<Point> series_;
  std::deque<std::string> events_;  // JSON objects, newest first
  bool finished_ = false;
  double finished_at_ = 0.0;
};

}  // namespace gossip
