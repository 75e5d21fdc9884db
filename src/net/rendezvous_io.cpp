// net/rendezvous_io.cpp: registered timers and sockets, deadlines, rendezvous reads and writes.
#include "src/net/rendezvous_io.hpp"

#include <array>

#include "gossip/core.hpp"
#include "src/net/socket.hpp"

namespace gossip::net {
namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

RendezvousIo::RendezvousIo(asio::io_context& io, const NetConfig& config, Log log)
    : io_(io), config_(config), log_(std::move(log)),
      run_tag_(wire::rendezvous_tag(config.handshake.run_id)) {}

std::shared_ptr<asio::steady_timer> RendezvousIo::new_timer(std::chrono::milliseconds after) {
  auto t = std::make_shared<asio::steady_timer>(io_, after);
  std::erase_if(timers_, [](const auto& w) { return w.expired(); });
  timers_.push_back(t);
  return t;
}

std::shared_ptr<asio::steady_timer> RendezvousIo::new_timer(Clock::time_point at) {
  auto t = new_timer(std::chrono::milliseconds(0));
  t->expires_at(at);
  return t;
}

RendezvousIo::Socket RendezvousIo::new_socket() {
  auto s = std::make_shared<asio::ip::tcp::socket>(io_);
  watch(s);
  return s;
}

void RendezvousIo::watch(const Socket& socket) {
  std::erase_if(sockets_, [](const auto& w) { return w.expired(); });
  sockets_.push_back(socket);
}

void RendezvousIo::keep_open(const Socket& a, const Socket& b) {
  std::erase_if(kept_, [](const auto& w) { return w.expired(); });
  kept_.push_back(a);
  kept_.push_back(b);
}

bool RendezvousIo::kept_open(const asio::ip::tcp::socket& socket) const {
  for (const auto& w : kept_)
    if (auto s = w.lock(); s && s.get() == &socket) return true;
  return false;
}

RendezvousIo::Deadline RendezvousIo::close_after(Socket socket, std::chrono::milliseconds within) {
  Deadline d{new_timer(within), std::make_shared<bool>(false)};
  d.timer->async_wait([socket, late = d.late](std::error_code ec) {
    std::error_code ignored;
    if (ec) return;
    *late = true;
    socket->close(ignored);
  });
  return d;
}

wire::Rendezvous RendezvousIo::message(wire::RendezvousKind kind, std::uint32_t to) const {
  wire::Rendezvous m;
  m.kind = kind;
  m.run_tag = run_tag_;
  m.from = static_cast<std::uint32_t>(config_.rank);
  m.to = to;
  m.time_ns = now_ns();
  return m;
}

const asio::ip::tcp::resolver::results_type& RendezvousIo::endpoints_of(
    const std::string& address) {
  auto it = resolved_.find(address);
  if (it != resolved_.end()) return it->second;
  asio::ip::tcp::resolver::results_type results;
  try {
    results = resolve(io_, address);
  } catch (const InputError& e) {
    log_(e.what());
  }
  return resolved_.emplace(address, std::move(results)).first->second;
}

void RendezvousIo::send(Socket socket, const wire::Rendezvous& m,
                        std::function<void(std::error_code)> then) {
  auto bytes = std::make_shared<std::array<std::byte, wire::kRendezvousBytes>>(
      wire::encode_rendezvous(m));
  asio::async_write(*socket, asio::buffer(*bytes),
                    [socket, bytes, then = std::move(then)](std::error_code ec, std::size_t) {
                      then(ec);
                    });
}

void RendezvousIo::answer(Socket socket, const wire::Rendezvous& m) {
  send(socket, m, [socket](std::error_code) {
    std::error_code ignored;
    socket->close(ignored);
  });
}

void RendezvousIo::read(Socket socket, std::chrono::milliseconds within,
                        std::function<void(std::optional<wire::Rendezvous>, std::string)> then) {
  auto bytes = std::make_shared<std::array<std::byte, wire::kRendezvousBytes>>();
  auto [timer, late] = close_after(socket, within);
  asio::async_read(*socket, asio::buffer(*bytes),
                   [this, socket, bytes, timer, late, within,
                    then = std::move(then)](std::error_code ec, std::size_t) {
                     timer->cancel();
                     if (stopping_) return;
                     if (ec)
                       return then(std::nullopt,
                                   *late ? cat("no answer within ", within.count(), " ms")
                                         : cat("connection closed (", ec.message(), ")"));
                     auto m = wire::decode_rendezvous(*bytes);
                     if (!m) return then(std::nullopt, m.error);
                     if (m.value->run_tag != run_tag_)
                       return then(std::nullopt, "a rendezvous message of another run");
                     then(std::move(m.value), "");
                   });
}

void RendezvousIo::stop() {
  stopping_ = true;
  std::error_code ignored;
  for (auto& w : timers_)
    if (auto t = w.lock()) t->cancel();
  for (auto& w : sockets_)
    if (auto sock = w.lock(); sock && !kept_open(*sock)) sock->close(ignored);
}

}  // namespace gossip::net
