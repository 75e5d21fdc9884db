// net/socket.cpp: NetListener (bind first, learn the port, hand over), address parsing and the
// socket options every connection gets.
#include "src/net/socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "gossip/core.hpp"
#include "gossip/wire.hpp"

namespace gossip {
namespace net {

std::pair<std::string, std::uint16_t> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw InputError(cat("address '", address, "' is not host:port"));
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port_text = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    throw InputError(cat("address '", address, "': port '", port_text,
                         "' is not a number in 0..65535"));
  return {host, static_cast<std::uint16_t>(port)};
}

asio::ip::tcp::resolver::results_type resolve(asio::io_context& io, const std::string& address) {
  const auto [host, port] = split_address(address);
  asio::ip::tcp::resolver resolver(io);
  std::error_code ec;
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty())
    throw InputError(cat("address '", address, "' does not resolve: ", ec.message()));
  return results;
}

namespace {
constexpr int kNotSentLowWaterBytes = 64 * 1024;
}  // namespace

std::string set_socket_options(asio::ip::tcp::socket& socket, int buffer_bytes,
                               const std::string& congestion) {
  std::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  socket.set_option(asio::socket_base::send_buffer_size(buffer_bytes), ignored);
  socket.set_option(asio::socket_base::receive_buffer_size(buffer_bytes), ignored);
  // At most 64 KB of a frame waits unsent in the kernel: a write completes only once the rest
  // is on its way, so a peer's next message (collect waits for the last publish's writes) does
  // not start on another connection while its last one is still being sent. Otherwise the two
  // share the link and the one a neighbour waits for takes twice as long (the one-peer
  // exponential graph at 100 Mbit/s: 194 ms a round, 142 ms with this).
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_NOTSENT_LOWAT>(
                        kNotSentLowWaterBytes),
                    ignored);
  if (congestion.empty()) return {};
  const int fd = socket.native_handle();
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(),
                   static_cast<socklen_t>(congestion.size())) == 0)
    return {};
  const int err = errno;
  char in_use[32] = {};
  socklen_t len = sizeof in_use - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, in_use, &len) != 0) in_use[0] = '\0';
  return cat("net.congestion ", congestion, ": the kernel refused it (", std::strerror(err),
             err == ENOENT ? ": it has no such algorithm"
             : err == EPERM ? ": not in net.ipv4.tcp_allowed_congestion_control for this user"
                            : "",
             "); connections use the system's ", in_use[0] ? in_use : "default");
}

double tcp_rtt_ms(asio::ip::tcp::socket& socket) {
  tcp_info info{};
  socklen_t size = sizeof info;
  if (getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return -1.0;
  return info.tcpi_rtt / 1000.0;  // microseconds
}

std::string remote_name(const asio::ip::tcp::socket& socket) {
  std::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  const auto a = ep.address();
  return a.is_v6() ? cat("[", a.to_string(), "]:", ep.port()) : cat(a.to_string(), ":", ep.port());
}

}  // namespace net

std::uint64_t default_max_frame_bytes(std::uint64_t param_count) {
  return wire::kHeaderBytes + wire::kWeightBytes + param_count * sizeof(float) +
         wire::kMaxControlPayload;
}

NetListener::NetListener(const std::string& address) : impl_(std::make_unique<Impl>()) {
  const auto [host, port] = net::split_address(address);
  impl_->host = host;
  std::error_code ec;
  const auto endpoint = *net::resolve(impl_->io, address).begin();
  auto& acc = impl_->acceptor;
  acc.open(endpoint.endpoint().protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  // A big receive buffer must be set before listen() to be inherited with window scaling.
  if (!ec) acc.set_option(asio::socket_base::receive_buffer_size(4 << 20), ec);
  if (!ec) acc.bind(endpoint.endpoint(), ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw RuntimeError(cat("cannot listen on ", address, ": ", ec.message()));
}

NetListener::~NetListener() = default;
NetListener::NetListener(NetListener&&) noexcept = default;
NetListener& NetListener::operator=(NetListener&&) noexcept = default;

int NetListener::port() const {
  GOSSIP_CHECK_MSG(impl_, "NetListener was moved from");
  return impl_->acceptor.local_endpoint().port();
}

std::string NetListener::address() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return v6 ? cat("[", impl_->host, "]:", port()) : cat(impl_->host, ":", port());
}

}  // namespace gossip
