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
#include <tuple>
#include <variant>

#include "src/launcher/network_record.hpp"
#include "gossip/config.hpp"
#include "gossip/core.hpp"
#include "gossip/events.hpp"
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

/// The order events are replayed in: ready, then each round's alerts and evaluations, then done;
/// peers in rank order within each.
std::int64_t order_key(const PeerEvent& e) {
  if (std::holds_alternative<ReadyEvent>(e)) return std::numeric_limits<std::int64_t>::min();
  if (const auto* v = std::get_if<EvalEvent>(&e)) return v->round;
  if (const auto* a = std::get_if<AlertEvent>(&e)) return a->round;
  return std::numeric_limits<std::int64_t>::max();
}

}  // namespace

int collect(const CollectRunOptions& options) {
  if (options.dirs.empty()) throw InputError("expected at least one run folder DIR (see --help)");
  std::vector<PeerFolder> peers = find_peers(options.dirs);

  // The network's size and config, from the peers' ready events.
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
    throw InputError(cat("no peer in ", options.dirs.front(), "/peers/ got as far as training ",
                         "(no ready line in any events.txt): nothing to collect"));
  const int n = first->peers;
  std::vector<int> missing;
  for (int r = 0, i = 0; r < n; ++r) {
    while (i < static_cast<int>(peers.size()) && peers[i].rank < r) ++i;
    if (i >= static_cast<int>(peers.size()) || peers[i].rank != r) missing.push_back(r);
  }
  for (const auto& p : peers)
    if (p.rank >= n)
      throw InputError(cat(p.dir.string(), ": rank ", p.rank, " in a network of ", n, " peers"));
  if (!missing.empty()) {
    std::string ranks, dirs;
    for (int r : missing) ranks += cat(ranks.empty() ? "" : ", ", r);
    for (const auto& d : options.dirs) dirs += cat(dirs.empty() ? "" : ", ", d);
    throw InputError(cat("rank(s) ", ranks, " of ", n, " have no folder peers/R/ in ", dirs,
                         ": give the run folder of every machine"));
  }

  const std::string config_path = options.config_path.empty() ? first->config : options.config_path;
  if (config_path.empty()) throw InputError("the peers recorded no config: give --config CONFIG");
  if (!fs::exists(config_path))
    throw InputError(cat("config ", config_path, " (recorded by the peers) does not exist here: ",
                         "give --config CONFIG"));
  const RunConfig config = load_config(config_path);
  std::printf("gossip collect: %d peers from %s, config %s\n", n,
              options.dirs.size() == 1 ? options.dirs.front().c_str()
                                       : cat(options.dirs.size(), " folders").c_str(),
              config_path.c_str());
  std::fflush(stdout);

  struct Replay {
    std::int64_t key;
    int rank;
    std::size_t seq;
    const PeerEvent* event;
  };
  std::vector<Replay> replay;
  for (auto& p : peers) {
    for (std::size_t i = 0; i < p.events.size(); ++i) {
      // Snapshots are read from the peer's folder as it is now, wherever it was written.
      if (auto* e = std::get_if<EvalEvent>(&p.events[i]))
        e->params = (p.dir / fs::path(e->params).filename()).string();
      replay.push_back({order_key(p.events[i]), p.rank, i, &p.events[i]});
    }
  }
  std::sort(replay.begin(), replay.end(), [](const Replay& a, const Replay& b) {
    return std::tie(a.key, a.rank, a.seq) < std::tie(b.key, b.rank, b.seq);
  });

  launcher::NetworkRecord record(config, options.dirs.front(), n,
                                 launcher::NetworkRecord::Clock::kPeers, false);
  for (const Replay& r : replay) record.handle(r.rank, *r.event);
  record.merge_ready_rounds();
  // As `gossip run --keep-going` does: a peer that never finished is merged up to where it got.
  for (int r = 0; r < n; ++r) {
    if (record.has_finished(r)) continue;
    const auto it = std::find_if(peers.begin(), peers.end(),
                                 [&](const PeerFolder& p) { return p.rank == r; });
    const std::string why = cat("peer ", r, " did not finish (no done line in ",
                                (it->dir / "events.txt").string(), ")");
    std::fprintf(stderr, "gossip collect: %s\n", why.c_str());
    record.peer_failed(r, why);
  }
  record.merge_ready_rounds();
  if (static_cast<int>(record.dead().size()) == n)
    throw RuntimeError("no peer finished: nothing to summarise");
  record.finish(record.slowest_done_seconds());
  return record.dead().empty() ? kExitOk : kExitFailure;
}

}  // namespace gossip
