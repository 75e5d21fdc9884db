// launcher/emulated_network.cpp: builds and removes the namespaces, veth pairs, bridge and qdiscs
// of `gossip run --netem` with iproute2's ip and tc (the kernel's own tools for exactly this;
// every command is argv, never a shell line).
#include "src/launcher/emulated_network.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/core.hpp"

namespace gossip::launcher {
namespace {

/// tc's number of bits per second, whole.
std::string tc_rate(double bits_per_s) { return cat(std::llround(bits_per_s), "bit"); }

/// The tbf bucket: a few milliseconds of the rate (what the kernel's timer granularity needs,
/// rate/HZ at HZ=250), and never less than a few full frames.
std::string tc_burst(double bits_per_s) {
  const double bytes = std::max(16384.0, bits_per_s / 8.0 * 0.004);
  return cat(std::llround(bytes), "b");
}

std::string tc_ms(double ms) { return cat(std::llround(ms * 1000.0), "us"); }

/// Does a process with this pid exist (in our pid namespace) and run (a zombie is gone)?
bool alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream stat(cat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');  // "PID (NAME) STATE ..."
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw RuntimeError(cat("pipe: ", std::strerror(errno)));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw RuntimeError(cat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  CommandResult r;
  char buf[4096];
  for (;;) {
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got > 0) r.output.append(buf, static_cast<std::size_t>(got));
    else if (got == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!r.output.empty() && r.output.back() == '\n') r.output.pop_back();
  return r;
}

std::string find_tool(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string p = dir + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::string netns_prefix(pid_t launcher) { return cat("gsn", launcher); }

std::vector<std::string> list_netns(const std::string& ip) {
  const CommandResult r = run_command({ip, "netns", "list"});
  std::vector<std::string> out;
  std::stringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.find(' ');  // "NAME (id: 3)"
    if (!line.empty()) out.push_back(line.substr(0, space));
  }
  return out;
}

EmulatedNetwork::EmulatedNetwork(const LinkEmulation& emulation, int peers,
                                 std::function<bool()> interrupted)
    : peers_(peers), interrupted_(std::move(interrupted)), prefix_(netns_prefix(getpid())),
      switch_(prefix_ + "s") {
  const std::string what = cat("--netem '", emulation.text, "'");
  if (geteuid() != 0)
    throw InputError(cat(what, ": emulating links needs root (it makes a network namespace per "
                         "peer and sets qdiscs on their links); run as root, or without --netem "
                         "(and without net.emulate)"));
  ip_ = find_tool("ip");
  tc_ = find_tool("tc");
  if (ip_.empty() || tc_.empty())
    throw InputError(cat(what, ": emulating links needs iproute2's `ip` and `tc`, and ",
                         ip_.empty() ? "`ip`" : "`tc`", " is not installed (apt-get install "
                         "iproute2)"));
  place_ranks(emulation, what);
  remove_stale_namespaces();
  try {
    build(emulation);
  } catch (...) {
    remove();
    throw;
  }
}

void EmulatedNetwork::place_ranks(const LinkEmulation& emulation, const std::string& what) {
  const int peers = peers_;
  if (peers > 65000)
    throw InputError(cat(what, ": at most 65000 peers on emulated links, got ", peers));
  for (const auto& [a, b] : emulation.unreachable)
    if (b >= peers)
      throw InputError(cat(what, ": unreachable=", a, "-", b, ": rank ", b, " is not in this run "
                           "of ", peers, " peers"));
  nat_of_.assign(static_cast<std::size_t>(peers), -1);
  nat_slot_.assign(static_cast<std::size_t>(peers), -1);
  for (std::size_t g = 0; g < emulation.nats.size(); ++g)
    for (std::size_t k = 0; k < emulation.nats[g].size(); ++k) {
      const int r = emulation.nats[g][k];
      if (r >= peers)
        throw InputError(cat(what, ": nat: rank ", r, " is not in this run of ", peers, " peers"));
      nat_of_[r] = static_cast<int>(g);
      nat_slot_[r] = static_cast<int>(k);
    }
  for (int r : emulation.firewalled)
    if (r >= peers)
      throw InputError(cat(what, ": firewall: rank ", r, " is not in this run of ", peers,
                           " peers"));
  if (emulation.nats.size() > 200 || std::any_of(emulation.nats.begin(), emulation.nats.end(),
                                                 [](const auto& g) { return g.size() > 250; }))
    throw InputError(cat(what, ": at most 200 NATs of at most 250 peers each"));
  if (!emulation.nats.empty() || !emulation.firewalled.empty()) {
    nft_ = find_tool("nft");
    if (nft_.empty())
      throw InputError(cat(what, ": nat= and firewall= need nftables' `nft`, which is not "
                           "installed (apt-get install nftables)"));
  }
}

void EmulatedNetwork::remove_stale_namespaces() const {
  // Namespaces of launchers that are gone (killed before they could remove them) and that no
  // process is in any more.
  for (const auto& name : list_netns(ip_)) {
    if (name.rfind("gsn", 0) != 0) continue;
    std::size_t end = 3;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end == 3 || end == name.size() ||
        (name[end] != 's' && name[end] != 'p' && name[end] != 'n'))
      continue;
    const pid_t owner = static_cast<pid_t>(std::atol(name.substr(3, end - 3).c_str()));
    if (owner == getpid() || alive(owner)) continue;
    if (!run_command({ip_, "netns", "pids", name}).output.empty()) continue;
    if (run_command({ip_, "netns", "del", name}).code == 0)
      std::fprintf(stderr, "gossip run: removed network namespace %s, left by a gossip run "
                   "(pid %d) that is gone\n", name.c_str(), static_cast<int>(owner));
  }
}

EmulatedNetwork::~EmulatedNetwork() { remove(); }

std::string EmulatedNetwork::address(int r) const {
  if (r < static_cast<int>(nat_of_.size()) && nat_of_[r] >= 0)  // .1 is the router's
    return cat(10, ".", nat_of_[r] + 1, ".0.", nat_slot_[r] + 2);
  const int host = r + 1;  // 198.18.0.0 is the network's own address
  return cat(198, ".", 18 + (host >> 16), ".", (host >> 8) & 255, ".", host & 255);
}

std::vector<std::string> EmulatedNetwork::exec_prefix(int r) const {
  return {ip_, "netns", "exec", peer_namespace(r)};
}

std::string EmulatedNetwork::hostfile() const {
  std::string out;
  for (int r = 0; r < peers_; ++r) out += cat(address(r), " slots=1\n");
  return out;
}

void EmulatedNetwork::must(const std::vector<std::string>& argv, const std::string& doing) {
  if (interrupted_ && interrupted_()) throw RuntimeError(cat("interrupted while ", doing));
  const CommandResult r = run_command(argv);
  if (r.code == 0) return;
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  throw RuntimeError(cat("emulated links: ", doing, ": `", line, "` failed (exit code ", r.code,
                         "): ", r.output));
}

void EmulatedNetwork::add_namespace(const std::string& name) {
  must({ip_, "netns", "add", name}, cat("making network namespace ", name));
  made_.push_back(name);
  must({ip_, "-n", name, "link", "set", "lo", "up"}, cat("bringing up lo in ", name));
}

/// netem is a module of its own (sch_netem) that some kernels lack: try it on the switch's lo
/// before anything depends on it, and say so plainly when it is not there.
void EmulatedNetwork::probe_netem() {
  const CommandResult r =
      run_command({tc_, "-n", switch_, "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                   "1ms"});
  if (r.code != 0)
    throw InputError(cat("--netem: delay, jitter and loss need the kernel's netem qdisc "
                         "(sch_netem), which this kernel does not have (tc: ", r.output,
                         "); emulate the rate alone (rate=... uses tbf), or use a kernel with "
                         "sch_netem"));
  must({tc_, "-n", switch_, "qdisc", "del", "dev", "lo", "root"}, "removing the netem probe");
}

/// The qdiscs on one end of a link: netem (delay, jitter, loss) when asked, and tbf (the rate)
/// under it, or at the root when there is no netem.
void EmulatedNetwork::shape(const std::string& ns, const std::string& dev, const LinkEmulation& e) {
  std::vector<std::string> tbf = {tc_, "-n", ns, "qdisc", "add", "dev", dev};
  if (e.needs_netem()) {
    std::vector<std::string> netem = {tc_, "-n", ns, "qdisc", "add", "dev", dev, "root",
                                      "handle", "1:", "netem"};
    if (e.delay_ms > 0.0) netem.insert(netem.end(), {"delay", tc_ms(e.delay_ms)});
    if (e.jitter_ms > 0.0) netem.push_back(tc_ms(e.jitter_ms));
    if (e.loss_percent > 0.0) netem.insert(netem.end(), {"loss", cat(e.loss_percent, "%")});
    must(netem, cat("netem on ", dev, " in ", ns));
    tbf.insert(tbf.end(), {"parent", "1:", "handle", "2:"});
  } else {
    tbf.push_back("root");
  }
  tbf.insert(tbf.end(), {"tbf", "rate", tc_rate(e.rate_bits_per_s), "burst",
                         tc_burst(e.rate_bits_per_s), "latency", "100ms"});
  must(tbf, cat("tbf on ", dev, " in ", ns));
}

void EmulatedNetwork::build(const LinkEmulation& e) {
  add_namespace(switch_);
  if (e.needs_netem()) probe_netem();
  must({ip_, "-n", switch_, "link", "add", "br0", "type", "bridge"}, "making the bridge");
  must({ip_, "-n", switch_, "link", "set", "br0", "up"}, "bringing up the bridge");
  for (int r = 0; r < peers_; ++r)
    if (nat_of_[r] < 0) add_peer(r, switch_, "br0", cat("p", r), address(r) + "/15", e);
  for (std::size_t g = 0; g < e.nats.size(); ++g) build_nat(g, e.nats[g], e);
  for (int r : e.firewalled) firewall(r);
  for (const auto& [a, b] : e.unreachable) {  // firewalled pairs: no route either way
    for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}})
      must({ip_, "-n", peer_namespace(from), "route", "add", "unreachable", address(to) + "/32"},
           cat("making peer ", to, " unreachable from peer ", from));
  }
}

void EmulatedNetwork::add_peer(int r, const std::string& from, const std::string& bridge,
                               const std::string& port, const std::string& address,
                               const LinkEmulation& e) {
  const std::string ns = peer_namespace(r);
  add_namespace(ns);
  must({ip_, "-n", from, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
        ns}, cat("linking ", ns, " to ", bridge));
  must({ip_, "-n", from, "link", "set", port, "master", bridge, "up"},
       cat("attaching ", port, " to ", bridge));
  must({ip_, "-n", ns, "addr", "add", address, "dev", "eth0"}, cat("addressing ", ns));
  must({ip_, "-n", ns, "link", "set", "eth0", "up"}, cat("bringing up eth0 in ", ns));
  shape(ns, "eth0", e);  // what peer r sends
  shape(from, port, e);  // what peer r receives
}

void EmulatedNetwork::build_nat(std::size_t g, const std::vector<int>& ranks,
                                const LinkEmulation& e) {
  const std::string router = nat_namespace(g), port = cat("n", g);
  const std::string lan = cat("10.", g + 1, ".0.1");
  add_namespace(router);
  // Its outside: one more host on the bridge, at the top of 198.19.255.0/24 (no peer's).
  must({ip_, "-n", switch_, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
        router}, cat("linking ", router, " to the bridge"));
  must({ip_, "-n", switch_, "link", "set", port, "master", "br0", "up"},
       cat("attaching ", port, " to the bridge"));
  must({ip_, "-n", router, "addr", "add", cat("198.19.255.", g + 1, "/15"), "dev", "eth0"},
       cat("addressing ", router));
  must({ip_, "-n", router, "link", "set", "eth0", "up"}, cat("bringing up eth0 in ", router));
  // Its inside: a bridge of its own, which its peers' veths join.
  must({ip_, "-n", router, "link", "add", "lan", "type", "bridge"}, cat("the NAT's network in ", router));
  must({ip_, "-n", router, "addr", "add", lan + "/24", "dev", "lan"}, cat("addressing lan in ", router));
  must({ip_, "-n", router, "link", "set", "lan", "up"}, cat("bringing up lan in ", router));
  for (int r : ranks) {
    add_peer(r, router, "lan", cat("p", r), address(r) + "/24", e);
    must({ip_, "-n", peer_namespace(r), "route", "add", "default", "via", lan},
         cat("routing peer ", r, " through its NAT"));
  }
  must({ip_, "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
       cat("forwarding in ", router));
  must({ip_, "netns", "exec", router, nft_, "add", "table", "ip", "nat"}, "the NAT's table");
  must({ip_, "netns", "exec", router, nft_, "add", "chain", "ip", "nat", "out", "{", "type", "nat",
        "hook", "postrouting", "priority", "100", ";", "}"}, "the NAT's chain");
  must({ip_, "netns", "exec", router, nft_, "add", "rule", "ip", "nat", "out", "oifname", "eth0",
        "masquerade"}, "masquerading");
}

void EmulatedNetwork::firewall(int r) {
  const std::string ns = peer_namespace(r);
  must({ip_, "netns", "exec", ns, nft_, "add", "table", "inet", "fw"}, cat("a firewall in ", ns));
  must({ip_, "netns", "exec", ns, nft_, "add", "chain", "inet", "fw", "in", "{", "type", "filter",
        "hook", "input", "priority", "0", ";", "}"}, cat("the firewall's chain in ", ns));
  must({ip_, "netns", "exec", ns, nft_, "add", "rule", "inet", "fw", "in", "iifname", "lo",
        "accept"}, cat("the firewall's loopback rule in ", ns));
  must({ip_, "netns", "exec", ns, nft_, "add", "rule", "inet", "fw", "in", "ct", "state", "new",
        "drop"}, cat("the firewall's drop rule in ", ns));
}

void EmulatedNetwork::remove() {
  while (!made_.empty()) {
    const std::string name = made_.back();
    made_.pop_back();
    const CommandResult r = run_command({ip_, "netns", "del", name});
    if (r.code != 0)
      std::fprintf(stderr, "gossip run: could not remove network namespace %s (%s); remove it "
                   "with: ip netns del %s\n", name.c_str(), r.output.c_str(), name.c_str());
  }
}

std::vector<std::string> EmulatedNetwork::leftovers() const {
  std::vector<std::string> out;
  for (const auto& name : list_netns(ip_))
    if (name == switch_ || ((name.rfind(prefix_ + "p", 0) == 0 ||
                             name.rfind(prefix_ + "n", 0) == 0) &&
                            name.find_first_not_of("0123456789", prefix_.size() + 1) ==
                                std::string::npos))
      out.push_back(name);
  return out;
}

}  // namespace gossip::launcher
