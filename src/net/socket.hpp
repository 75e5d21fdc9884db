/// net/socket: the Asio side of listening and addressing — NetListener's insides, "host:port"
/// parsing, name resolution, socket options. Internal to src/net (includes Asio).
#pragma once
#if !defined(GOSSIP_ROOM_NET)
#error "src/net/socket.hpp belongs to room net, which this room does not use (see the room table in meson.build)"
#endif

#include <cstdint>
#include <string>
#include <utility>

#include <asio.hpp>

#include "gossip/net.hpp"

namespace gossip {

/// The listener owns the io_context that the NetExchange built on it will run.
struct NetListener::Impl {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  std::string host;
};

namespace net {

/// "host:port" or "[v6]:port" -> (host, port). Throws InputError naming the address.
std::pair<std::string, std::uint16_t> split_address(const std::string& address);

/// Resolves "host:port" synchronously. Throws InputError when the name does not resolve.
asio::ip::tcp::resolver::results_type resolve(asio::io_context& io, const std::string& address);

/// TCP_NODELAY, keep-alive, big send/receive buffers (failures are ignored: they are hints),
/// and the TCP congestion control named `congestion` (net.congestion; empty: the system's).
/// Returns why the kernel refused that one ("" when it took it), naming the one in use.
std::string set_socket_options(asio::ip::tcp::socket& socket, int buffer_bytes,
                               const std::string& congestion);

/// TCP's smoothed round-trip time of the connection (TCP_INFO), in ms; -1 when unknown.
double tcp_rtt_ms(asio::ip::tcp::socket& socket);

/// "127.0.0.1:41234", or "?" when the socket has no peer any more.
std::string remote_name(const asio::ip::tcp::socket& socket);

}  // namespace net
}  // namespace gossip
