// net/session_handshake.cpp: a session's handshake — TLS (certificate checked against the rank),
// then hello (dialled) and hello-ack (accepted) inside it, the side path the hub attaches as the
// session becomes the link, and refusals either way (told to the remote in an error frame, or,
// with no channel to tell it on, the connection closed with a line in our log).
#include "src/net/session.hpp"

#include <algorithm>

#include "gossip/core.hpp"

namespace gossip::net {
namespace {

using wire::FrameType;

}  // namespace

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

void Session::attach_side_path(std::unique_ptr<SidePathReader> reader) {
  side_reader_ = std::move(reader);
  hub_.mailboxes().set_shared_memory(peer_, side_reader_ != nullptr);
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

}  // namespace gossip::net
