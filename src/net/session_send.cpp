// net/session_send.cpp: a session's write queue — params frames (under the receiver's round
// gate), side-path notes, ready, view and control frames; one write in flight, its deadline, and
// a failed write; the publishes handed over to the connection that replaces this one.
#include "src/net/session.hpp"

#include <array>

#include "gossip/core.hpp"

namespace gossip::net {
namespace {

using wire::FrameType;

}  // namespace

void Session::send_params(std::shared_ptr<const std::vector<std::byte>> head,
                          std::span<const std::byte> body, std::shared_ptr<const void> keep,
                          std::int64_t round, SendToken token) {
  if (closed_ || closing_ || !established_) return;  // dropped: the token ends the send
  OutFrame f{.head = std::move(head), .body = body, .keep = std::move(keep), .publish = true};
  f.round = round;
  f.token = std::move(token);
  queue_frame(std::move(f));
}

void Session::send_ready(std::int64_t round) {
  // A neighbour on this host hands its parameters over in its shared segment: nothing to gate.
  if (closed_ || closing_ || !established_ || side_reader_) return;
  const auto rank = static_cast<std::uint32_t>(hub_.our_hello().rank);
  queue_frame(OutFrame{std::make_shared<const std::vector<std::byte>>(
                           wire::encode_frame(FrameType::kReady, rank, round, {})),
                       {}, nullptr});
}

bool Session::held(std::size_t k) const {
  const OutFrame& f = out_[k];
  if (f.round < 0 || peer_waits_for_ < 0 || f.round - peer_waits_for_ != 1) return false;
  // A later params frame behind it: the neighbour is two rounds behind; let both go.
  for (std::size_t j = k + 1; j < out_.size(); ++j)
    if (out_[j].round >= 0) return false;
  return true;
}

std::size_t Session::detach_held() {
  std::size_t detached = 0;
  for (std::size_t k = writing_ ? 1 : 0; k < out_.size(); ++k) {
    OutFrame& f = out_[k];
    if (!f.token || !held(k)) continue;
    if (!f.keep) {  // the caller's buffer: copy it
      auto copy = std::make_shared<std::vector<std::byte>>(f.body.begin(), f.body.end());
      f.body = *copy;
      f.keep = std::move(copy);
    }
    f.token.release();
    ++detached;
  }
  return detached;
}

void Session::send_side_note(std::shared_ptr<const std::vector<std::byte>> frame,
                             std::uint64_t param_bytes, SendToken token) {
  if (closed_ || closing_ || !established_) return;  // dropped: the token ends the send
  OutFrame f{.head = std::move(frame), .body = {}, .keep = nullptr, .publish = true};
  f.side_bytes = param_bytes;
  f.token = std::move(token);
  queue_frame(std::move(f));
}

void Session::queue_control(FrameType type, std::span<const std::byte> payload,
                            bool close_after) {
  const auto rank = static_cast<std::uint32_t>(hub_.our_hello().rank);
  auto frame = std::make_shared<const std::vector<std::byte>>(
      wire::encode_frame(type, rank, 0, payload));
  if (close_after) closing_ = true;
  OutFrame f{.head = std::move(frame), .body = {}, .keep = nullptr, .publish = false,
             .close_after = close_after};
  f.records_after = type == FrameType::kHello || type == FrameType::kHelloAck;
  queue_frame(std::move(f));
}

void Session::send_view(std::shared_ptr<const std::vector<std::byte>> frame) {
  if (closed_ || closing_ || !established_) return;
  queue_frame(OutFrame{std::move(frame), {}, nullptr});
}

void Session::queue_frame(OutFrame frame) {
  if (!write_error_.empty()) return;  // the remote takes nothing more (write_failed): drop it
  if (retired_) return;               // the connection that replaced this one carries it
  out_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void Session::write_next() {
  // The first frame the gate does not hold goes next (a held params frame is the last params
  // frame queued, so only control frames pass it, and params keep their order).
  std::size_t k = 0;
  while (k < out_.size() && held(k)) ++k;
  if (k == out_.size()) {
    writing_ = false;
    return;
  }
  if (k != 0) {
    OutFrame next = std::move(out_[k]);
    out_.erase(out_.begin() + static_cast<std::ptrdiff_t>(k));
    out_.push_front(std::move(next));
  }
  writing_ = true;
  const OutFrame& f = out_.front();
  arm(write_timer_, hub_.config().timeouts.io, "writing a frame");
  const std::array<asio::const_buffer, 2> buffers{asio::buffer(*f.head),
                                                  asio::buffer(f.body.data(), f.body.size())};
  if (f.body.empty() || !stream_.batch()) {
    asio::async_write(stream_, buffers,
                      [self = shared_from_this()](std::error_code ec, std::size_t n) {
                        self->on_written(ec, n);
                      });
    return;
  }
  // A params frame over TLS: its records are gathered and sent in big batches, then flushed.
  asio::async_write(stream_, buffers,
                    [self = shared_from_this()](std::error_code ec, std::size_t n) {
                      if (ec) return self->on_written(ec, n);
                      self->stream_.async_flush([self, n](std::error_code e) {
                        self->on_written(e, e ? 0 : n);
                      });
                    });
}

void Session::on_written(std::error_code ec, std::size_t bytes) {
  arm(write_timer_, std::chrono::milliseconds(0), "");
  OutFrame f = std::move(out_.front());
  hub_.count_sent(peer_, bytes + (ec ? 0 : f.side_bytes));
  out_.pop_front();
  writing_ = false;
  f.token.release();  // written (or failed): the send has ended
  if (closed_) return;  // close() already dropped the rest of the queue
  if (retired_) return shut_sending();
  if (ec) return write_failed(ec);
  if (f.records_after) stream_.records_out();
  if (f.close_after) return close("", final_kind_);
  if (!out_.empty()) write_next();
}

void Session::write_failed(std::error_code ec) {
  write_error_ = ec.message();
  if (!established_ || closing_) return close(cat("write failed: ", write_error_), CloseKind::kError);
  // The remote takes nothing more (it closed, or reset the connection), but what it sent before
  // may still be in our socket: a peer that finished its rounds and left with our ready frames
  // unread resets the connection, and its last rounds and its bye are still ours to read. Stop
  // writing and read on; the read that ends the connection (or its deadline) closes it.
  out_.clear();  // their tokens end the sends
}

Session::Frames Session::take_publishes() {
  Frames taken;
  for (auto it = out_.begin(); it != out_.end();) {
    if (!it->publish || it->side_bytes != 0) {
      ++it;
      continue;
    }
    if (writing_ && it == out_.begin()) {
      // Its write still completes here; the copy carries the send (its token) on.
      OutFrame copy{it->head, it->body, it->keep, true, it->close_after, it->side_bytes,
                    it->round, it->records_after, std::move(it->token)};
      taken.push_back(std::move(copy));
      ++it;
    } else {
      taken.push_back(std::move(*it));
      it = out_.erase(it);
    }
  }
  return taken;
}

void Session::inherit(Frames frames) {
  for (auto& f : frames) inherited_.push_back(std::move(f));
}

void Session::send_inherited() {
  while (!inherited_.empty()) {
    queue_frame(std::move(inherited_.front()));
    inherited_.pop_front();
  }
}

}  // namespace gossip::net
