// net/session.cpp: one connection's lifecycle — its construction, the deadline every operation
// arms, and the ways out: bye, retire (replaced by another connection), close. Every way out goes
// through close(), which logs one line. The handshake is in session_handshake.cpp, reading in
// session_read.cpp, the write queue in session_send.cpp.
#include "src/net/session.hpp"

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {

using wire::FrameType;

}  // namespace

Session::Session(asio::ip::tcp::socket socket, Hub& hub, Role role, int target)
    : hub_(hub), stream_(std::move(socket), hub.tls_context()), role_(role), peer_(target),
      remote_(remote_name(stream_.socket())), read_timer_(stream_.get_executor()),
      write_timer_(stream_.get_executor()) {}

std::string Session::who() const {
  if (peer_ >= 0 || role_ == Role::kDialled) return cat("peer ", peer_, " (", remote_, ")");
  return cat("connection from ", remote_);
}

double Session::rtt_ms() { return tcp_rtt_ms(stream_.socket()); }

void Session::arm(asio::steady_timer& timer, std::chrono::milliseconds after, const char* what) {
  if (after.count() <= 0) {
    timer.expires_at(asio::steady_timer::time_point::max());  // cancels the pending wait
    return;
  }
  timer.expires_after(after);
  timer.async_wait([self = shared_from_this(), &timer, what, after](std::error_code ec) {
    if (ec || self->closed_) return;
    if (timer.expiry() > std::chrono::steady_clock::now()) return;  // re-armed meanwhile
    self->close(cat("timed out ", what, " (", after.count(), " ms)"), CloseKind::kError);
  });
}

void Session::note(const std::string& line) {
  if (role_ == Role::kAccepted && !established_) hub_.log_refusal(line);
  else hub_.log(line);
}

void Session::say_bye() {
  if (closed_ || closing_) return;
  if (!established_) {
    close("", CloseKind::kShutdown);
    return;
  }
  final_kind_ = CloseKind::kShutdown;
  peer_waits_for_ = -1;  // a params frame the gate holds goes before the bye
  queue_control(FrameType::kBye, {}, true);
}

void Session::retire(std::chrono::milliseconds within) {
  if (closed_ || retired_) return;
  retired_ = true;
  // What is queued here was taken over (publishes) or does not matter any more (control
  // frames): only the write under way ends here.
  while (out_.size() > (writing_ ? 1u : 0u)) out_.pop_back();
  inherited_.clear();
  retire_within_ = within;
  if (!writing_) shut_sending();
}

void Session::shut_sending() {
  std::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  // (No write follows: the write deadline bounds how long the remote may take to shut its side.)
  arm(write_timer_, retire_within_, "reading a replaced connection to its end");
}

void Session::close(const std::string& why, CloseKind kind) {
  if (closed_) return;
  closed_ = true;
  if (!why.empty()) note(cat(who(), " closed: ", why));
  read_timer_.cancel();
  write_timer_.cancel();
  std::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  // The frame being written completes (with an error) through on_written; drop the rest (their
  // tokens end their sends).
  while (out_.size() > (writing_ ? 1u : 0u)) out_.pop_back();
  inherited_.clear();
  hub_.on_closed(*this, kind, why);
}

}  // namespace gossip::net
