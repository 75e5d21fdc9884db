// net/mailbox_links.cpp: what the Mailboxes keep of each neighbour's link beside its queue: its
// state and how it changes, why it failed, the path it took, and when it was last heard from
// (the silences the training thread judges a neighbour by, excused while this process stalls).
#include "src/net/mailbox.hpp"

#include <utility>

namespace gossip::net {

namespace {
// The I/O thread ticks every 100 ms (Links' heartbeat timer): this long without a tick, this
// process was stopped or starved.
constexpr std::chrono::milliseconds kIoStall{500};
}  // namespace

void Mailboxes::set_left(int peer) {
  std::lock_guard lk(mu_);
  box(peer).left = true;
}

void Mailboxes::set_state(int peer, LinkState state) {
  {
    std::lock_guard lk(mu_);
    if (box(peer).state == LinkState::kUp && state != LinkState::kUp)
      box(peer).down_since = std::chrono::steady_clock::now();
    box(peer).state = state;
    if (state == LinkState::kUp) {
      box(peer).last_heard = std::chrono::steady_clock::now();
      box(peer).heard_since_up = false;
      if (!box(peer).first_up) box(peer).first_up = box(peer).last_heard;
    }
  }
  cv_.notify_all();
}

void Mailboxes::note_failure(int peer, LinkFailure failure) {
  std::lock_guard lk(mu_);
  box(peer).failure = std::move(failure);
}

void Mailboxes::note_never_formed(int peer, const LinkFailure& failure) {
  std::lock_guard lk(mu_);
  if (box(peer).failure.kind == LinkFailureKind::kNone) box(peer).failure = failure;
}

void Mailboxes::note_path(int peer, LinkPath path, int dialler, int relay,
                          std::string relay_address, double rtt_ms) {
  std::lock_guard lk(mu_);
  LinkStatus& l = box(peer).path;
  l.path = path;
  l.dialler = dialler;
  l.relay = relay;
  l.relay_address = std::move(relay_address);
  l.rtt_ms = rtt_ms;
}

std::vector<LinkStatus> Mailboxes::links() const {
  std::lock_guard lk(mu_);
  std::vector<LinkStatus> out;
  for (int p : neighbours_) {
    const Box& b = box(p);
    LinkStatus l;
    l.peer = p;
    l.formed = b.first_up.has_value();
    if (b.first_up) l.formed_s = std::chrono::duration<double>(*b.first_up - start_).count();
    l.up = b.state == LinkState::kUp;
    l.left = b.left;
    l.given_up = b.state == LinkState::kGone && !b.left;
    if (!l.up) {
      l.why = b.failure.why;
      l.failure = b.failure.kind;
    }
    l.path = b.path.path;
    l.dialler = b.path.dialler;
    l.relay = b.path.relay;
    l.relay_address = b.path.relay_address;
    l.rtt_ms = b.path.rtt_ms;
    if (!l.up && l.formed)
      l.down_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b.down_since)
                     .count();
    out.push_back(std::move(l));
  }
  return out;
}

void Mailboxes::heard(int peer, bool running) {
  std::lock_guard lk(mu_);
  box(peer).last_heard = box(peer).last_frame = std::chrono::steady_clock::now();
  if (running) box(peer).heard_since_up = true;
}

bool Mailboxes::io_stalled() const {
  return std::chrono::steady_clock::now() - io_tick_ >= kIoStall;
}

bool Mailboxes::silent(const Box& b, std::chrono::milliseconds after) const {
  return after.count() > 0 && b.heard_since_up && !io_stalled() && !in_grace() &&
         std::chrono::steady_clock::now() - b.last_heard >= after;
}

void Mailboxes::io_tick() {
  std::lock_guard lk(mu_);
  io_tick_ = std::chrono::steady_clock::now();
}

void Mailboxes::excuse_silence(std::chrono::milliseconds grace) {
  {
    std::lock_guard lk(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (Box& b : boxes_) b.last_heard = now;
    grace_until_ = now + grace;
  }
  cv_.notify_all();
}

bool Mailboxes::recovering() const {
  std::lock_guard lk(mu_);
  return io_stalled() || in_grace();
}

double Mailboxes::frame_silence(int peer) const {
  std::lock_guard lk(mu_);
  const Box& b = box(peer);
  if (!b.heard_since_up) return 0.0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - b.last_frame).count();
}

double Mailboxes::silent_for(int peer) const {
  std::lock_guard lk(mu_);
  const Box& b = box(peer);
  if (!b.heard_since_up || io_stalled() || in_grace()) return 0.0;  // starting, or we were stopped
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - b.last_heard).count();
}

std::vector<int> Mailboxes::heard_within(double seconds) const {
  std::lock_guard lk(mu_);
  const auto now = std::chrono::steady_clock::now();
  std::vector<int> out;
  for (int p : neighbours_) {
    const Box& b = box(p);
    const bool talking =
        b.state == LinkState::kUp &&
        (!b.heard_since_up || std::chrono::duration<double>(now - b.last_heard).count() < seconds);
    if (b.left || io_stalled() || in_grace() || talking) out.push_back(p);
  }
  return out;
}

}  // namespace gossip::net
