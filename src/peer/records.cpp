// peer/records.cpp: what a peer writes as it goes: its event lines (DIR/events.txt, the launcher's
// descriptor), parameter snapshots, and the membership watch's log lines and events (records.hpp).
#include "src/peer/records.hpp"


#include "gossip/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "gossip/compress.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"

namespace gossip::peer_parts {

Events::Events(const std::string& dir, int fd, bool append)
    : path_(dir + "/events.txt"), file_(path_, append ? std::ios::app : std::ios::trunc),
      fd_(fd) {
  if (!file_) throw InputError(cat(path_, ": cannot open for writing"));
}

void Events::write_line(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  std::lock_guard lock(mutex_);
  if (fd_ == STDOUT_FILENO) std::fflush(stdout);  // after what was printed before it
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher has gone: the files still have every event
    done += static_cast<std::size_t>(n);
  }
}

void Events::progress(const PeerEvent& event) { write_line(encode_event(event)); }

void Events::emit(const PeerEvent& event) {
  if (listener_) listener_(event);
  const std::string line = encode_event(event);
  file_ << line << '\n' << std::flush;
  if (!file_) throw RuntimeError(cat(path_, ": write failed"));
  write_line(line);
}

void write_params(const std::string& path, std::span<const float> params) {
  std::ofstream f(path + ".tmp", std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(params.data()),
          static_cast<std::streamsize>(params.size() * sizeof(float)));
  f.close();
  if (!f) throw RuntimeError(cat(path, ".tmp: write failed"));
  std::filesystem::rename(path + ".tmp", path);
}

Watch::Watch(const Topology& topology, int rank, MonitoredExchange& exchange,
             LinkReports& links, Events& events, Clock::time_point t0,
             ByzantinePolicy on_byzantine)
    : rank_(rank), exchange_(&exchange), events_(&events), t0_(t0), watch_(topology, rank) {
  watch_.set_on_byzantine(on_byzantine);
  watch_.set_link_reports(&links);
}

void Watch::operator()(std::int64_t round) {
  std::vector<std::string> lines;
  for (const PeerEvent& e : watch_(*exchange_, round, since(t0_), &lines)) events_->emit(e);
  for (const std::string& l : lines) log_line(cat("peer ", rank_, " round ", round, ": ", l));
}

void Watch::end_links(std::int64_t round) {
  std::vector<std::string> lines;
  for (const PeerEvent& e : watch_.end_links(round, since(t0_), &lines))
    events_->emit(e);
  for (const std::string& l : lines) log_line(cat("peer ", rank_, " at the end: ", l));
}

}  // namespace gossip::peer_parts
