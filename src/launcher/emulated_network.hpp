// launcher/emulated_network.hpp: the links of `gossip run --netem` (net.emulate). Each peer gets its
// own network namespace, joined by a veth pair to a bridge in a "switch" namespace; the peer's
// end and the switch's end each carry a tbf rate limit (so the link is limited both ways), under a
// netem qdisc when delay, jitter or loss is asked for. Peers in separate namespaces reach each
// other over TCP on the bridge's addresses (198.18.0.0/15, reserved for network tests), as
// separate hosts would. Every interface and qdisc lives inside the namespaces, so removing the
// namespaces removes everything; the names carry the launcher's pid, and a later run removes
// the namespaces of a launcher that died without removing them (SIGKILL).
#pragma once
#if !defined(GOSSIP_ROOM_LAUNCHER)
#error "src/launcher/emulated_network.hpp belongs to room launcher, which this room does not use (see the room table in meson.build)"
#endif

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "gossip/config.hpp"

namespace gossip::launcher {

/// What a command printed and how it ended.
struct CommandResult {
  int code = 0;  // exit code; 128+signal when killed; 127 when it could not start
  std::string output;  // stdout and stderr
};

/// Runs argv[0] (a path) with argv, in its own process group (so a Ctrl-C meant for the launcher
/// does not cut a set-up or clean-up command short); waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

/// The path of `name` in PATH or the sbin folders (root's tools may be there when PATH lacks
/// them); "" when there is none.
std::string find_tool(const std::string& name);

/// The prefix of every namespace one launcher makes: "gsn<pid>".
std::string netns_prefix(pid_t launcher);

/// The names of the network namespaces there are (`ip netns list`).
std::vector<std::string> list_netns(const std::string& ip);

class EmulatedNetwork {
 public:
  /// Checks that it can be done (root, ip and tc; netem when asked for delay, jitter or loss),
  /// removes the namespaces of launchers that are gone, and builds the network of `peers` peers.
  /// Throws InputError when the emulation cannot be had here (no root, no iproute2, no netem),
  /// RuntimeError when a command fails or `interrupted()` turns true; what was made is removed
  /// first.
  EmulatedNetwork(const LinkEmulation& emulation, int peers, std::function<bool()> interrupted);
  ~EmulatedNetwork();
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  /// The namespace and address (numeric IPv4) of rank r: on the bridge (198.18.0.0/15), or
  /// behind NAT g on its own network (10.g+1.0.0/24), an address no one outside can dial.
  std::string peer_namespace(int r) const { return prefix_ + "p" + std::to_string(r); }
  std::string address(int r) const;
  /// The namespace of NAT g's router.
  std::string nat_namespace(std::size_t g) const { return prefix_ + "n" + std::to_string(g); }
  /// What runs a command in rank r's namespace: {ip, "netns", "exec", NS} + the command.
  std::vector<std::string> exec_prefix(int r) const;
  /// An MPI hostfile ("ADDRESS slots=1" a line) placing each rank at its address.
  std::string hostfile() const;

  /// Removes every namespace (and with them every link and qdisc); says on stderr which could
  /// not be removed. Safe to call twice.
  void remove();
  /// The namespaces of this network that are still there.
  std::vector<std::string> leftovers() const;

 private:
  /// Checks the ranks `emulation` names against the run's (InputError naming `what`), and
  /// places each NAT's peers; finds nft when NATs or firewalls are asked for.
  void place_ranks(const LinkEmulation& emulation, const std::string& what);
  /// Removes the namespaces of gossip runs that are gone.
  void remove_stale_namespaces() const;
  void build(const LinkEmulation& e);
  void add_namespace(const std::string& name);
  void must(const std::vector<std::string>& argv, const std::string& doing);
  void probe_netem();
  void shape(const std::string& ns, const std::string& dev, const LinkEmulation& e);
  /// Peer r's namespace, its eth0 the far end of `port` (a veth made in `from`, attached to
  /// `bridge` there), addressed `address`/`prefix`, its link shaped both ways.
  void add_peer(int r, const std::string& from, const std::string& bridge,
                const std::string& port, const std::string& address, const LinkEmulation& e);
  /// NAT g: its router on the bridge, masquerading what its peers send out.
  void build_nat(std::size_t g, const std::vector<int>& ranks, const LinkEmulation& e);
  /// Rank r's namespace drops every new connection coming in.
  void firewall(int r);
  std::string nft_;
  std::vector<int> nat_of_;  // per rank: its NAT group, -1 for none
  std::vector<int> nat_slot_;  // per rank: its place in its NAT group

  int peers_;
  std::function<bool()> interrupted_;
  std::string ip_, tc_;
  std::string prefix_;
  std::string switch_;
  std::vector<std::string> made_;  // namespaces made, in order
};

}  // namespace gossip::launcher
