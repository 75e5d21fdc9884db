// launcher/collect.cpp: `gossip collect DIR [DIR...]`. Finds DIR/peers/R/ of every rank, reads
// the event lines each peer saved (events.txt, the lines `gossip run` reads from its children)
// and replays them, in round order, through the NetworkRecord that `gossip run` uses: the same
// rows, the same average model, the same table.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <variant>

#include "src/launcher/network_record.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
#include "gossip/faults.hpp"
#include "gossip/topology.hpp"
#include "gossip/launcher.hpp"

namespace gossip {
namespace {

namespace fs = std::filesystem;

struct PeerFolder {
  int rank = 0;
  fs::path dir;
  std::vector<PeerEvent> events;
};

/// The events of one peer's events.txt. A last line without its newline was cut short by the
/// peer's end and is left out; any other line that is not an event is an error.
std::vector<PeerEvent> read_events(const fs::path& path) {
  std::vector<PeerEvent> out;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const bool complete = !in.eof();
    if (line.empty()) continue;
    if (auto e = parse_event(line)) {
      out.push_back(std::move(*e));
    } else if (!complete) {
      std::fprintf(stderr, "gossip collect: %s:%d: left out a line cut short\n", path.c_str(), n);
    } else {
      throw InputError(cat(path.string(), ":", n, ": not a gossip event line"));
    }
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 8 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::vector<PeerFolder> find_peers(const std::vector<std::string>& dirs) {
  std::map<int, PeerFolder> found;
  for (const auto& d : dirs) {
    const fs::path peers = fs::path(d) / "peers";
    std::error_code ec;
    if (!fs::is_directory(peers, ec))
      throw InputError(cat(d, ": no peers/ folder (gossip peer --out ", d,
                           " writes each rank's files into ", d, "/peers/R/)"));
    for (const auto& entry : fs::directory_iterator(peers)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory() || !all_digits(name)) continue;
      const int rank = std::stoi(name);
      if (found.count(rank))
        throw InputError(cat("rank ", rank, " is in both ", found[rank].dir.string(), " and ",
                             entry.path().string()));
      found[rank] = PeerFolder{rank, entry.path(), read_events(entry.path() / "events.txt")};
    }
  }
  std::vector<PeerFolder> out;
  for (auto& [rank, folder] : found) out.push_back(std::move(folder));
  return out;
}

/// The order events are replayed in: ready, then each round's alerts, membership events and
/// evaluations, then done;
/// peers in rank order within each.
std::int64_t order_key(const PeerEvent& e) {
  if (std::holds_alternative<ReadyEvent>(e)) return std::numeric_limits<std::int64_t>::min();
  if (const auto* v = std::get_if<EvalEvent>(&e)) return v->round;
  if (const auto* a = std::get_if<AlertEvent>(&e)) return a->round;
  if (const auto* m = std::get_if<MemberEvent>(&e)) return m->round;
  if (const auto* l = std::get_if<LinkEvent>(&e)) return l->round;
  return std::numeric_limits<std::int64_t>::max();
}

/// The ready event of the lowest rank, after checking that every peer ran a network of its size.
const ReadyEvent& network_of(const std::vector<PeerFolder>& peers, const std::string& dir) {
  const ReadyEvent* first = nullptr;
  for (const auto& p : peers)
    for (const auto& e : p.events)
      if (const auto* r = std::get_if<ReadyEvent>(&e)) {
        if (first && r->peers != first->peers)
          throw InputError(cat(p.dir.string(), ": rank ", p.rank, " ran a network of ", r->peers,
                               " peers, rank ", first->peer, " one of ", first->peers));
        if (!first) first = r;
      }
  if (!first)
    throw InputError(cat("no peer in ", dir, "/peers/ got as far as training (no ready line in ",
                         "any events.txt): nothing to collect"));
  return *first;
}

/// Refuses folders that do not hold ranks 0..n-1 between them (of an elastic run, its first
/// members: the others may never have joined).
void check_ranks(const std::vector<PeerFolder>& peers, int n, const std::vector<std::string>& dirs,
                 const std::vector<int>& required) {
  std::string missing;
  for (int r : required)
    if (std::none_of(peers.begin(), peers.end(), [&](const PeerFolder& p) { return p.rank == r; }))
      missing += cat(missing.empty() ? "" : ", ", r);
  for (const auto& p : peers)
    if (p.rank >= n)
      throw InputError(cat(p.dir.string(), ": rank ", p.rank, " in a network of ", n, " peers"));
  if (missing.empty()) return;
  std::string where;
  for (const auto& d : dirs) where += cat(where.empty() ? "" : ", ", d);
  throw InputError(cat("rank(s) ", missing, " of ", n, " have no folder peers/R/ in ", where,
                       ": give the run folder of every machine"));
}

std::string config_to_use(const CollectRunOptions& options, const ReadyEvent& ready) {
  const std::string path = options.config_path.empty() ? ready.config : options.config_path;
  if (path.empty()) throw InputError("the peers recorded no config: give --config CONFIG");
  if (!fs::exists(path))
    throw InputError(cat("config ", path, " (recorded by the peers) does not exist here: ",
                         "give --config CONFIG"));
  return path;
}

struct Replay {
  std::int64_t key;
  int rank;
  std::size_t seq;
  const PeerEvent* event;
};

/// Every peer's events in replay order; evaluations point at the snapshots in the peer's folder
/// as it is now, wherever they were written.
std::vector<Replay> replay_order(std::vector<PeerFolder>& peers) {
  std::vector<Replay> replay;
  for (auto& p : peers) {
    for (std::size_t i = 0; i < p.events.size(); ++i) {
      if (auto* e = std::get_if<EvalEvent>(&p.events[i]))
        e->params = (p.dir / fs::path(e->params).filename()).string();
      replay.push_back({order_key(p.events[i]), p.rank, i, &p.events[i]});
    }
  }
  std::sort(replay.begin(), replay.end(), [](const Replay& a, const Replay& b) {
    return std::tie(a.key, a.rank, a.seq) < std::tie(b.key, b.rank, b.seq);
  });
  return replay;
}

}  // namespace

int collect(const CollectRunOptions& options) {
  if (options.dirs.empty()) throw InputError("expected at least one run folder DIR (see --help)");
  std::vector<PeerFolder> peers = find_peers(options.dirs);
  const ReadyEvent& ready = network_of(peers, options.dirs.front());
  const int n = ready.peers;
  const std::string config_path = config_to_use(options, ready);
  const RunConfig config = load_config(config_path);
  // An elastic run: its member timeline, as the peers followed it.
  std::optional<Topology> members;
  if (!config.gossip.topology.empty() && fs::exists(config.gossip.topology)) {
    Topology t = run_topology(config, load_topology(config.gossip.topology));
    if (!t.epochs().empty() && t.n() == n) members = std::move(t);
  }
  std::vector<int> required(static_cast<std::size_t>(n));
  std::iota(required.begin(), required.end(), 0);
  if (members) required = members->members(0);
  check_ranks(peers, n, options.dirs, required);
  const std::string from = options.dirs.size() == 1 ? options.dirs.front()
                                                    : cat(options.dirs.size(), " folders");
  std::printf("gossip collect: %d peers from %s, config %s\n", n, from.c_str(),
              config_path.c_str());
  std::fflush(stdout);

  // The starts after the first: torchrun's restarts, and how each restarted peer went on.
  for (const auto& p : peers)
    for (const auto& e : p.events)
      if (const auto* r = std::get_if<ReadyEvent>(&e); r && r->restarts > 0)
        std::printf("gossip collect: rank %d restarted by torchrun (restart %d): %s\n", p.rank,
                    r->restarts,
                    r->start == PeerStart::kResumed
                        ? cat("resumed from its checkpoint of round ", r->from).c_str()
                        : choice_row(peer_start_table(), r->start).summary);
  launcher::NetworkRecord record(config, options.dirs.front(), n,
                                 launcher::NetworkRecord::Clock::kPeers, false);
  if (members) record.follow_members(*members);
  for (const Replay& r : replay_order(peers)) record.handle(r.rank, *r.event);
  record.merge_ready_rounds();
  // As `gossip run --keep-going` does: a peer that never finished is merged up to where it got.
  for (const auto& p : peers) {
    if (record.has_finished(p.rank)) continue;
    const std::string why = cat("peer ", p.rank, " did not finish (no done line in ",
                                (p.dir / "events.txt").string(), ")");
    std::fprintf(stderr, "gossip collect: %s\n", why.c_str());
    record.peer_failed(p.rank, why);
  }
  record.merge_ready_rounds();
  if (static_cast<int>(record.dead().size()) == n)
    throw RuntimeError("no peer finished: nothing to summarise");
  record.finish(record.slowest_done_seconds());
  return record.dead().empty() ? kExitOk : kExitFailure;
}

}  // namespace gossip
