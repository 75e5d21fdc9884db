// net/session_read.cpp: a session's reading — a header, then its body, each under a deadline —
// and dispatching what came: control frames (handshake, error, bye, ready, view, announce,
// address), params frames checked chunk by chunk, packets, and side-path notes; every way a read
// fails, named in one line.
#include "src/net/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <openssl/err.h>

#include "gossip/core.hpp"
#include "gossip/half.hpp"

namespace gossip::net {
namespace {

using wire::FrameType;

std::string type_name(FrameType t) { return wire::frame_type_name(static_cast<std::uint16_t>(t)); }

}  // namespace

void Session::read_header() {
  if (closed_ || closing_) return;
  if (established_) arm(read_timer_, hub_.config().timeouts.idle, "waiting for a frame");
  asio::async_read(stream_, asio::buffer(header_),
                   [self = shared_from_this()](std::error_code ec, std::size_t n) {
                     self->on_header(ec, n);
                   });
}

void Session::check_altered(const std::error_code& ec) {
  if (ec == make_error_code(RecordError::kForged) ||
      (ec.category() == asio::error::get_ssl_category() &&
       ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==
           SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC))
    altered_ = true;
}

void Session::read_failed(std::error_code ec, std::size_t got, std::size_t wanted,
                          const char* part) {
  if (closed_) return;  // we closed it (deadline, shutdown): already logged
  check_altered(ec);
  if (!write_error_.empty())  // read on after a failed write, to the end of what it sent
    return close(cat("write failed: ", write_error_), CloseKind::kError);
  if (retired_ && is_eof(ec) && got == 0 && std::strcmp(part, "header") == 0)
    return close("", CloseKind::kShutdown);  // read to its end: nothing was lost on it
  if (is_eof(ec) && got == 0 && std::strcmp(part, "header") == 0)
    return close(established_ ? "connection closed by the remote"
                              : "connection closed before the handshake finished",
                 CloseKind::kError);
  // A TLS alert before the hello-ack: the remote refused our certificate (in TLS 1.3 the
  // client's handshake completes before the server has checked its certificate).
  if (!established_ && stream_.tls() && ec.category() == asio::error::get_ssl_category()) {
    failure_ = LinkFailureKind::kIdentity;
    return drop(cat("it refused our TLS credentials: ", tls_failure(ec, *stream_.tls())),
                CloseKind::kRefused);
  }
  if (is_eof(ec))
    return close(cat("truncated frame: connection closed after ", got, " of ", wanted, " ",
                     part, " bytes"),
                 CloseKind::kError);
  close(cat("read failed: ", ec.message()), CloseKind::kError);
}

void Session::on_header(std::error_code ec, std::size_t bytes) {
  if (closed_) return;
  if (ec) return read_failed(ec, bytes, wire::kHeaderBytes, "header");
  const auto decoded =
      wire::decode_header(header_, hub_.max_frame_bytes(), hub_.config().handshake.wire);
  if (!decoded) return close(decoded.error, CloseKind::kError);
  const wire::FrameHeader& h = *decoded.value;
  hub_.count_received(peer_, wire::kHeaderBytes + h.payload_bytes);
  // Any frame: the neighbour is not silent. Only the frames of a peer that runs its rounds (its
  // view, parameters) start the silence clock: one still setting up says nothing for a while.
  if (established_)
    hub_.mailboxes().heard(peer_, h.type == FrameType::kView || h.type == FrameType::kParams ||
                                      h.type == FrameType::kShmParams ||
                                      h.type == FrameType::kPacket);
  if (!established_) {
    const FrameType want = role_ == Role::kAccepted ? FrameType::kHello : FrameType::kHelloAck;
    if (h.type != want && h.type != FrameType::kError)
      return close(cat("expected ", type_name(want), ", got ", type_name(h.type)),
                   CloseKind::kError);
  } else {
    if (h.type == FrameType::kHello || h.type == FrameType::kHelloAck)
      return close(cat("unexpected ", type_name(h.type), " after the handshake"),
                   CloseKind::kError);
    if (static_cast<std::int64_t>(h.sender) != peer_)
      return close(cat(type_name(h.type), " frame claims sender ", h.sender), CloseKind::kError);
  }
  if (h.type == FrameType::kParams) return read_params(h);
  if (h.type == FrameType::kPacket) {
    if (!established_) return close("packet frame before the handshake", CloseKind::kError);
    return read_packet(h);
  }
  read_control(h);
}

void Session::read_control(const wire::FrameHeader& h) {
  control_.resize(h.payload_bytes);  // decode_header capped it at kMaxControlPayload
  if (established_) arm(read_timer_, hub_.config().timeouts.io, "reading a frame body");
  asio::async_read(stream_, asio::buffer(control_),
                   [self = shared_from_this(), h](std::error_code ec, std::size_t n) {
                     if (self->closed_) return;
                     if (ec) return self->read_failed(ec, n, h.payload_bytes, "payload");
                     if (auto why = wire::check_payload(h, self->control_); !why.empty())
                       return self->close(why, CloseKind::kError);
                     self->on_control(h);
                   });
}

void Session::on_control(const wire::FrameHeader& h) {
  switch (h.type) {
    case FrameType::kHello:
    case FrameType::kHelloAck: {
      auto hello = wire::decode_hello(control_);
      if (!hello)
        return refuse({wire::RefusalKind::kMalformed, cat("bad handshake: ", hello.error)});
      if (h.type == FrameType::kHello) return on_hello(h, *hello.value);
      return on_hello_ack(*hello.value);
    }
    case FrameType::kError: {
      const wire::Refusal refusal = wire::decode_refusal(control_);
      if (established_) return close(cat("sent error: ", refusal.text), CloseKind::kError);
      failure_ = failure_of(refusal.kind);
      refusal_text_ = refusal.text;
      return close(cat("refused us: ", refusal.text), CloseKind::kRefused);
    }
    case FrameType::kBye:
      hub_.log(cat(who(), " left (bye)"));
      return close("", CloseKind::kBye);
    case FrameType::kShmReady:
      if (!hub_.offers_side_path())
        return close("shm-ready frame, but we offered no shared memory", CloseKind::kError);
      peer_reads_side_ = true;
      return read_header();
    case FrameType::kShmParams:
      return on_side_note(h);
    case FrameType::kView: {
      if (!established_) break;
      auto view = wire::decode_view(control_, static_cast<std::size_t>(hub_.config().size));
      if (!view) return close(cat("bad view frame: ", view.error), CloseKind::kError);
      hub_.mailboxes().deliver_view(peer_, std::move(*view.value));
      return read_header();
    }
    case FrameType::kAnnounce: {
      if (!established_) break;
      auto changes = wire::decode_announcements(control_, static_cast<std::size_t>(hub_.config().size));
      if (!changes) return close(cat("bad announce frame: ", changes.error), CloseKind::kError);
      hub_.mailboxes().deliver_announcements(std::move(*changes.value));
      return read_header();
    }
    case FrameType::kAddress: {
      if (!established_) break;
      auto record = wire::decode_address_record(control_, static_cast<std::size_t>(hub_.config().size));
      if (!record) return close(cat("bad address frame: ", record.error), CloseKind::kError);
      hub_.on_address(*this, *record.value);
      return read_header();
    }
    case FrameType::kReady:
      if (!established_) break;
      peer_waits_for_ = std::max(peer_waits_for_, h.round);  // decode_header bounds the round
      if (!writing_ && !out_.empty()) write_next();
      return read_header();
    case FrameType::kParams:
    case FrameType::kPacket:
      break;
  }
  close(cat("unexpected ", type_name(h.type), " frame"), CloseKind::kError);
}

void Session::read_params(const wire::FrameHeader& h) {
  const std::uint64_t count = hub_.config().handshake.param_count;
  const WireFormat format = hub_.config().handshake.wire;
  const std::uint64_t want = wire::params_payload_bytes(count, format);
  if (h.payload_bytes != want)
    return close(cat("params payload of ", h.payload_bytes, " bytes, expected ", want, " (",
                     count, format == WireFormat::kFp32
                                ? std::string(" floats")
                                : cat(" ", wire_format_name(format), " values"),
                     ")"),
                 CloseKind::kError);
  rx_ = hub_.mailboxes().take_buffer(peer_);
  arm(read_timer_, hub_.config().timeouts.io, "reading a params frame");
  asio::async_read(stream_, asio::buffer(weight_),
                   [self = shared_from_this(), h](std::error_code ec, std::size_t n) {
                     if (ec || self->closed_) {
                       self->hub_.mailboxes().return_buffer(self->peer_, std::move(self->rx_));
                       if (ec) self->read_failed(ec, n, h.payload_bytes, "payload");
                       return;
                     }
                     self->rx_done_ = 0;
                     self->rx_crc_ = wire::crc32c(self->weight_);
                     self->rx_finite_ = true;
                     self->read_params_chunk(h);
                   });
}

// The values arrive in chunks; each is checked (CRC, finite) as soon as it lands, while it is
// still in cache, instead of in a second pass over the whole buffer afterwards. Half-width
// values land in rx_half_ and are widened into rx_ in the same pass as their check.
void Session::read_params_chunk(const wire::FrameHeader& h) {
  constexpr std::size_t kChunkValues = 64 * 1024;
  const std::size_t count = std::min(kChunkValues, rx_.size() - rx_done_);
  const WireFormat format = hub_.config().handshake.wire;
  const std::size_t value_bytes = wire_value_bytes(format);
  if (format != WireFormat::kFp32) rx_half_.resize(kChunkValues);
  const auto into = format == WireFormat::kFp32
                        ? asio::buffer(rx_.data() + rx_done_, count * sizeof(float))
                        : asio::buffer(rx_half_.data(), count * sizeof(std::uint16_t));
  asio::async_read(stream_, into,
                   [self = shared_from_this(), h, count, format,
                    value_bytes](std::error_code ec, std::size_t n) {
                     if (ec || self->closed_) {
                       self->hub_.mailboxes().return_buffer(self->peer_, std::move(self->rx_));
                       const std::size_t got =
                           wire::kWeightBytes + self->rx_done_ * value_bytes + n;
                       if (ec) self->read_failed(ec, got, h.payload_bytes, "payload");
                       return;
                     }
                     bool finite = true;
                     const std::span<float> out(self->rx_.data() + self->rx_done_, count);
                     const std::span<const std::uint16_t> half(self->rx_half_.data(),
                                                               format == WireFormat::kFp32
                                                                   ? 0
                                                                   : count);
                     if (self->stream_.reads_records())  // authenticated already: no CRC
                       finite = format == WireFormat::kFp32 ? wire::all_finite(out)
                                                            : widen_from_wire(half, format, out);
                     else
                       self->rx_crc_ =
                           format == WireFormat::kFp32
                               ? wire::crc32c_floats(out, self->rx_crc_, &finite)
                               : wire::crc32c_widen(half, format, out, self->rx_crc_, &finite);
                     self->rx_finite_ = self->rx_finite_ && finite;
                     self->rx_done_ += count;
                     // A large frame takes a while on a slow link: its chunks are life too.
                     self->hub_.mailboxes().heard(self->peer_, true);
                     if (self->rx_done_ < self->rx_.size()) return self->read_params_chunk(h);
                     self->on_params(h);
                   });
}

void Session::on_params(const wire::FrameHeader& h) {
  const bool finite = rx_finite_;
  if (auto why = stream_.reads_records() ? std::string() : wire::check_crc(h, rx_crc_);
      !why.empty()) {
    hub_.mailboxes().return_buffer(peer_, std::move(rx_));
    return close(why, CloseKind::kError);
  }
  double weight;
  std::memcpy(&weight, weight_.data(), sizeof weight);  // little-endian host (wire.hpp)
  deliver_rx(h.round, weight, finite);
}

void Session::deliver_rx(std::int64_t round, double weight, bool all_finite) {
  if (!all_finite || !(std::isfinite(weight) && weight > 0.0))
    hub_.mailboxes().refused(peer_, wire::check_param_values(rx_, weight, round));
  Message m;
  m.round = round;
  m.weight = weight;
  m.finite = all_finite && std::isfinite(weight) && weight > 0.0;
  m.params = std::move(rx_);
  hub_.mailboxes().deliver(peer_, std::move(m));
  read_header();
}

void Session::read_packet(const wire::FrameHeader& h) {
  rx_packet_.resize(h.payload_bytes);  // decode_header capped it at the maximum frame size
  arm(read_timer_, hub_.config().timeouts.io, "reading a packet frame");
  asio::async_read(stream_, asio::buffer(rx_packet_),
                   [self = shared_from_this(), h](std::error_code ec, std::size_t n) {
                     if (self->closed_) return;
                     if (ec) return self->read_failed(ec, n, h.payload_bytes, "payload");
                     if (auto why = wire::check_payload(h, self->rx_packet_); !why.empty())
                       return self->close(why, CloseKind::kError);
                     Message m;
                     m.round = h.round;
                     m.packet = std::move(self->rx_packet_);
                     self->rx_packet_ = {};
                     self->hub_.mailboxes().deliver(self->peer_, std::move(m));
                     self->read_header();
                   });
}

// Same host: the frame only says which slot of the neighbour's segment holds the round; the
// floats are copied straight out of its memory and checked for NaN/Inf in the same pass.
void Session::on_side_note(const wire::FrameHeader& h) {
  if (!side_reader_)
    return close("shm-params frame, but we have not mapped this peer's shared memory",
                 CloseKind::kError);
  rx_ = hub_.mailboxes().take_buffer(peer_);
  bool finite = true;
  SidePathReader::Taken got;
  try {
    got = side_reader_->read(control_, rx_, &finite);
  } catch (const InputError& e) {
    hub_.mailboxes().return_buffer(peer_, std::move(rx_));
    return close(e.what(), CloseKind::kError);
  }
  if (got.torn) {
    hub_.mailboxes().return_buffer(peer_, std::move(rx_));
    hub_.log(cat(who(), ": round ", h.round, ": its shared slot ", got.where,
                 " was rewritten before we had read it; dropped that round"));
    return read_header();
  }
  // The parameters came by the side path: they count as received over this link, as the
  // sender counts them as sent.
  hub_.count_received(peer_, rx_.size() * wire_value_bytes(hub_.config().handshake.wire));
  deliver_rx(h.round, got.weight, finite);
}

}  // namespace gossip::net
