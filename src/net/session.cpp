// net/session.cpp: one connection's protocol — handshake, then params/bye/error frames — with a
// deadline on every operation. Every way out goes through close(), which logs one line.
#include "src/net/session.hpp"

#include <cmath>
#include <cstring>

#include <openssl/err.h>

#include "gossip/core.hpp"
#include "gossip/half.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {

using wire::FrameType;

std::string type_name(FrameType t) { return wire::frame_type_name(static_cast<std::uint16_t>(t)); }

}  // namespace

Session::Session(asio::ip::tcp::socket socket, Hub& hub, Role role, int target)
    : hub_(hub), stream_(std::move(socket), hub.tls_context()), role_(role), peer_(target),
      remote_(remote_name(stream_.socket())), read_timer_(stream_.get_executor()),
      write_timer_(stream_.get_executor()) {}

std::string Session::who() const {
  if (peer_ >= 0 || role_ == Role::kDialled) return cat("peer ", peer_, " (", remote_, ")");
  return cat("connection from ", remote_);
}

void Session::start() {
  // One deadline for the whole handshake: TLS, then hello and hello-ack inside it.
  arm(read_timer_, hub_.config().timeouts.handshake,
      stream_.tls() ? "waiting for the TLS handshake" : "waiting for the handshake");
  auto* tls = stream_.tls();
  if (!tls) return begin_hello();
  tls->async_handshake(role_ == Role::kAccepted ? asio::ssl::stream_base::server
                                                : asio::ssl::stream_base::client,
                       [self = shared_from_this()](std::error_code ec) {
                         self->on_tls_handshake(ec);
                       });
}

void Session::on_tls_handshake(std::error_code ec) {
  if (closed_) return;
  if (ec) {
    check_altered(ec);
    // A certificate that does not verify will not verify next time either; a connection cut
    // short (e.g. the acceptor is at its limit of unfinished handshakes) may be retried.
    const bool cut = is_eof(ec) || ec.category() != asio::error::get_ssl_category();
    failure_ = cut ? LinkFailureKind::kHandshake : LinkFailureKind::kIdentity;
    return drop(cat("TLS handshake failed: ", tls_failure(ec, *stream_.tls())),
                cut ? CloseKind::kError : CloseKind::kRefused);
  }
  const Identity id = remote_identity(*stream_.tls(), hub_.our_hello().info.run_id);
  if (!id.refusal.empty() || (role_ == Role::kDialled && id.rank != peer_))
    failure_ = LinkFailureKind::kIdentity;
  if (!id.refusal.empty()) return drop(id.refusal, CloseKind::kRefused);
  if (role_ == Role::kDialled && id.rank != peer_)
    return drop(cat("its certificate is for rank ", id.rank, ", but we dialled peer ", peer_),
                CloseKind::kRefused);
  cert_rank_ = id.rank;
  peer_ = id.rank;  // proven: log lines name it from here on
  if (auto why = stream_.prepare_records(role_ == Role::kDialled, &hub_.crypto_log()); !why.empty())
    return drop(why, CloseKind::kRefused);
  tls_done_ = true;
  // The handshake deadline still runs; its message now says what is still awaited.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      read_timer_.expiry() - std::chrono::steady_clock::now());
  arm(read_timer_, std::max(left, std::chrono::milliseconds(1)), "waiting for the handshake");
  begin_hello();
}

void Session::begin_hello() {
  if (role_ == Role::kDialled)
    queue_control(FrameType::kHello, wire::encode_hello(hub_.our_hello()), false);
  read_header();
}

// Under TLS, what follows a hello (the dialler's bytes) or a hello-ack (the acceptor's) is our
// own records (tls.hpp, records.hpp): each side switches its writes after writing that frame and
// its reads after reading it. The dialler writes nothing past its hello before the hello-ack,
// and the engine never reads past a TLS record (GulpSocket), so neither side's TLS engine takes
// in a byte of the records.

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

// --- writing ---------------------------------------------------------------------------------

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

// --- reading ---------------------------------------------------------------------------------

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

double Session::rtt_ms() { return tcp_rtt_ms(stream_.socket()); }

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

void Session::on_hello(const wire::FrameHeader& h, const wire::Hello& hello) {
  if (cert_rank_ < 0) peer_ = hello.rank;  // without TLS, the hello's word is all there is
  if (auto refusal = hub_.on_hello(*this, hello, h.sender)) return refuse(*refusal);
  peer_ = hello.rank;
  established_ = true;
  stream_.records_in();
  queue_control(FrameType::kHelloAck, wire::encode_hello(hub_.our_hello()), false);
  if (side_reader_) queue_control(FrameType::kShmReady, {}, false);
  send_inherited();
  hub_.on_established(*this);
  read_header();
}

void Session::on_hello_ack(const wire::Hello& hello) {
  if (hello.rank != peer_)
    return refuse({wire::RefusalKind::kIdentity,
                   cat("hello-ack from rank ", hello.rank, ", but we dialled peer ", peer_)});
  if (auto refusal = wire::refusal_of(hub_.our_hello(), hello)) return refuse(*refusal);
  established_ = true;
  stream_.records_in();
  hub_.on_hello_ack(*this, hello);
  if (side_reader_) queue_control(FrameType::kShmReady, {}, false);
  send_inherited();
  hub_.on_established(*this);
  read_header();
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

void Session::attach_side_path(std::unique_ptr<SidePathReader> reader) {
  side_reader_ = std::move(reader);
  hub_.mailboxes().set_shared_memory(peer_, side_reader_ != nullptr);
}

void Session::note(const std::string& line) {
  if (role_ == Role::kAccepted && !established_) hub_.log_refusal(line);
  else hub_.log(line);
}

void Session::drop(const std::string& why, CloseKind kind) {
  note(cat(who(), " refused: ", why));
  close("", kind);
}

void Session::refuse(const wire::Refusal& refusal) {
  note(cat(who(), " refused: ", refusal.text));
  final_kind_ = CloseKind::kRefused;
  failure_ = failure_of(refusal.kind);
  refusal_text_ = refusal.text;
  const auto payload = wire::encode_refusal(
      {refusal.kind, cat("refused by peer ", hub_.our_hello().rank, ": ", refusal.text)});
  queue_control(FrameType::kError, payload, true);
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

// --- closing ---------------------------------------------------------------------------------

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
