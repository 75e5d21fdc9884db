// net/fanout.cpp: what Links sends on the sessions — a publish fanned out (one copy into our
// shared segment for same-host neighbours and a note each, one header and the caller's bytes for
// the rest), ready, view and announce frames, and the heartbeat that keeps idle links talking.
#include "src/net/links.hpp"

#include <algorithm>

#include "gossip/core.hpp"

namespace gossip::net {
namespace {
// Heartbeats: a link with nothing else to carry gets our view every kIdle, so that silence
// means a stopped or cut-off peer (NetTimeouts::silent is a few of these), never a busy one.
constexpr std::chrono::milliseconds kHeartbeatCheck{100};  // how often idle links are checked
constexpr std::chrono::milliseconds kIdle{250};            // a link this quiet gets the view
// Our own heartbeat timer firing this late means this process was stopped (SIGSTOP) or starved:
// the neighbours' silence meanwhile is ours (Lifeguard's local health), so it is forgiven.
constexpr std::chrono::milliseconds kOwnStall{750};
}  // namespace

void Links::publish(std::int64_t round, std::span<const std::byte> values,
                    std::shared_ptr<const void> keep, double weight, const std::vector<int>& to,
                    std::vector<SendToken> tokens) {
  // Each link's publish goes by the first path that carries it; a link that is down takes
  // nothing (its loss was logged): its token ends the send here.
  std::vector<std::vector<std::pair<Session*, SendToken>>> by_path(paths_.size());
  for (std::size_t i = 0; i < to.size(); ++i) {
    Link& l = links_[to[i]];
    if (l.live()) {
      const auto path = std::find_if(paths_.begin(), paths_.end(),
                                     [&](const PayloadPath* p) { return p->carries(*l.session); });
      by_path[path - paths_.begin()].emplace_back(l.session.get(), std::move(tokens[i]));
    }
    if (l.session) sent_to(to[i]);
  }
  for (std::size_t k = 0; k < paths_.size(); ++k)
    paths_[k]->send(round, weight, values, keep, std::move(by_path[k]));
}

void Links::send_ready(std::int64_t round) {
  for (int p : mail_.neighbours())
    if (Link& l = links_[p]; l.live())
      l.session->send_ready(round);
}

void Links::detach_held() {
  for (auto& w : sessions_)
    if (auto s = w.lock()) s->detach_held();
}

void Links::publish_packet(std::int64_t round, std::span<const std::byte> packet,
                           const std::vector<int>& to, std::vector<SendToken> tokens) {
  wire::FrameHeader h;
  h.type = wire::FrameType::kPacket;
  h.sender = static_cast<std::uint32_t>(config_.rank);
  h.round = round;
  h.payload_bytes = packet.size();
  h.payload_crc = wire::crc32c(packet);
  const auto header = wire::encode_header(h);
  auto head = std::make_shared<const std::vector<std::byte>>(header.begin(), header.end());
  for (std::size_t i = 0; i < to.size(); ++i) {
    Link& l = links_[to[i]];
    // A link that is down takes nothing (its loss was logged): its token ends the send here.
    if (l.live())
      l.session->send_params(head, packet, nullptr, -1, std::move(tokens[i]));
    if (l.session) sent_to(to[i]);
  }
}

void Links::send_view(std::shared_ptr<const std::vector<std::byte>> frame,
                      std::shared_ptr<const std::vector<std::byte>> heartbeat,
                      const std::vector<int>& to) {
  last_view_ = std::move(heartbeat);
  for (int p : to)
    if (Link& l = links_[p]; l.live()) {
      l.session->send_view(frame);
      sent_to(p);
    }
}

void Links::send_announce(std::shared_ptr<const std::vector<std::byte>> frame,
                          const std::vector<int>& to) {
  last_announce_ = frame;
  for (int p : to)
    if (Link& l = links_[p]; l.live())
      l.session->send_view(frame);  // a control frame, queued as a view is
}

void Links::heartbeat() {
  heartbeat_.expires_after(kHeartbeatCheck);
  const auto due = heartbeat_.expiry();
  heartbeat_.async_wait([this, due](std::error_code ec) {
    if (ec || rv_.stopping()) return;
    const auto now = Clock::now();
    if (now - due >= kOwnStall) {
      // Before the tick: silence is judged again only after this; and the links closed on us
      // meanwhile get the time a redial takes before anyone is suspected for them.
      mail_.excuse_silence(std::max(std::chrono::milliseconds(3000), 3 * config_.timeouts.silent));
      log(cat("this peer was stopped or starved for ",
              std::chrono::duration_cast<std::chrono::milliseconds>(now - due).count(),
              " ms: its neighbours' silence meanwhile is not held against them"));
    }
    mail_.io_tick();
    abandon_stalled_writes();
    if (last_view_)
      for (int p : mail_.neighbours())
        if (Link& l = links_[p]; l.live() && now - l.last_sent >= kIdle) {
          l.session->send_view(last_view_);
          l.last_sent = now;
        }
    heartbeat();
  });
}

void Links::abandon_stalled_writes() {
  if (config_.timeouts.silent.count() <= 0) return;
  // Twice the silence bound: a peer back on a new connection before then takes the round in
  // flight over (adopt()).
  const double stuck_s = 2.0 * static_cast<double>(config_.timeouts.silent.count()) / 1000.0;
  for (int p : mail_.neighbours())
    if (Link& l = links_[p]; l.live() &&
                              l.session->writing() && mail_.silent_for(p) >= stuck_s)
      // A stopped peer reads nothing: our write to it would hold the caller's buffer (and its
      // collect) until the write deadline. Closing frees both; the peer reconnects when it wakes.
      l.session->close(cat("silent for ", static_cast<int>(mail_.silent_for(p) * 1000),
                           " ms with a write to it stalled; closing the link (it reconnects if "
                           "it comes back)"),
                       CloseKind::kError);
}

}  // namespace gossip::net
