// Tests for real peer processes (gossip peer / gossip run / gossip collect) over loopback and
// across network namespaces: bit-identical results with the simulator, a peer that dies, a peer
// that fails, a disconnected topology refused, peers started one by one merged by gossip collect
// into what gossip run writes, a wrong world size refused, and a multi-host run through veth
// links; and the peer's reading of launchers (Slurm node lists, MPI hostfiles, rank, world size
// and job variables, ports, listening addresses). Real processes, small synthetic problems;
// every run is bounded by the peers' own timeouts.
#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/hash.hpp"
#include "gossip/timeline.hpp"
#include "gossip/monitor.hpp"
#include "gossip/faults.hpp"
#include "gossip/peer.hpp"
#include "gossip/net.hpp"
#include "gossip/wire.hpp"
#include "gossip/peer_setup.hpp"
#include "src/peer/net_setup.hpp"
#include "src/peer/trace.hpp"
#include "tests/device_like_backend.hpp"
#include "tests/tls_client.hpp"

namespace fs = std::filesystem;

namespace {

std::string bin() {
  const char* b = std::getenv("GOSSIP_BIN");
  REQUIRE(b != nullptr);
  return b;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("gossip-peer-test-" + std::to_string(getpid()) + "-" +
                                        std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() {
    if (std::getenv("GOSSIP_TEST_KEEP")) return;  // to look at a failed run's files
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

struct Result {
  int code = -1;
  std::string output;
};

/// Runs a shell command, capturing stdout and stderr together.
Result run(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> hashes(const fs::path& summary) {
  const std::string text = read_file(summary);
  std::vector<std::string> out;
  const std::regex hex("\"([0-9a-f]{64})\"");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), hex); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

double number(const fs::path& summary, const std::string& key) {
  const std::string text = read_file(summary);
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex("\"" + key + "\": ([-0-9.eE]+)")));
  return std::stod(m[1]);
}

/// "p3": a per-peer name (streams, not string +, which g++ 12 warns about wrongly).
std::string named(const char* prefix, int i) {
  std::ostringstream os;
  os << prefix << i;
  return os.str();
}

// Below the kernel's ephemeral ports (32768 and up): a listener cannot bind a port that an
// outgoing connection of another test holds, even in TIME_WAIT.
int test_port_base() { return 21000 + (getpid() * 37) % 11700; }

/// Adds `fields` ("overlap: true, ...") to the one-line map `section` that write_config writes
/// ("gossip: {", "monitor: {").
void add_fields(const fs::path& cfg, const std::string& section, const std::string& fields) {
  std::string text = read_file(cfg);
  const auto at = text.find(section);
  REQUIRE(at != std::string::npos);
  text.insert(at + section.size(), fields + ", ");
  std::ofstream(cfg, std::ios::trunc) << text;
}
/// Replaces the first `from` in the file `cfg` by `to` (it must be there).
void replace_once(const fs::path& cfg, const std::string& from, const std::string& to) {
  std::string text = read_file(cfg);
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  std::ofstream(cfg, std::ios::trunc) << text;
}
void set_gossip(const fs::path& cfg, const std::string& fields) {
  add_fields(cfg, "gossip: {", fields);
}
/// Adds `fields` ("dead_after_rounds: 1, ...") to the monitor map write_config writes.
void set_monitor(const fs::path& cfg, const std::string& fields) {
  add_fields(cfg, "monitor: {", fields);
}

/// A membership event of events.jsonl (gossip run or gossip sim).
struct Membership {
  int peer = -1;
  long round = -1;
  std::string event;
  int subject = -1;
  std::string components;    // "[[0, 1, 7], [3, 4, 5]]"
  std::string my_component;  // "[0, 1, 7]"
};

std::vector<Membership> membership_events(const fs::path& events_jsonl) {
  std::vector<Membership> out;
  std::ifstream in(events_jsonl);
  const std::regex re("^\\{\"peer\": (\\d+), \"round\": (\\d+), \"time_s\": [^,]+, \"event\": "
                      "\"(\\w+)\", \"subject\": (-?\\d+), \"incarnation\": \\d+, \"dead\": "
                      "\\[[^\\]]*\\], \"components\": (\\[.*\\]), \"my_component\": "
                      "(\\[[^\\]]*\\])(, \"launcher_s\": [0-9.e+-]+)?\\}$");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, re)) continue;
    out.push_back(Membership{std::stoi(m[1]), std::stol(m[2]), m[3], std::stoi(m[4]), m[5], m[6]});
  }
  return out;
}

/// How a test config sets up TLS.
enum class Tls {
  kRun,    // names no credentials: `gossip run` makes a fresh CA in its output folder
  kKeys,   // `gossip keys init DIR/keys --config` made them and net.tls names them
  kOff,    // net.tls: off
};

/// A small synthetic run: `n` peers on a ring, given algorithm and period.
fs::path write_config(const fs::path& dir, int n, const std::string& algorithm, int period,
                      double epochs = 2, const std::string& extra_topology = "",
                      bool shared_memory = true, Tls tls = Tls::kRun) {
  std::ofstream(dir / "topo.yaml") << "generator: ring\nn: " << n << "\n" << extra_topology;
  const std::string tls_line =
      tls == Tls::kOff ? ", tls: off"
      : tls == Tls::kKeys
          ? ", tls: {ca: keys/ca.pem, cert: 'keys/peer-{rank}.pem', key: 'keys/peer-{rank}.key'}"
          : "";
  std::ofstream(dir / "c.yaml")
      << "data:\n  synthetic: {train: 1536, test: 384, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 24, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: " << epochs << ", batch: 16, seed: 5, backend: cpu}\n"
      << "gossip: {topology: topo.yaml, algorithm: " << algorithm << ", period: " << period
      << "}\n"
      << "monitor: {round_timeout_s: 5}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20"
      << (shared_memory ? "" : ", shared_memory: false") << tls_line << "}\n";
  if (tls == Tls::kKeys) {
    const Result k = run(bin() + " keys init " + (dir / "keys").string() + " --config " +
                         (dir / "c.yaml").string());
    INFO(k.output);
    REQUIRE(k.code == 0);
  }
  return dir / "c.yaml";
}

/// Starts `gossip peer CONFIG --rank R --out OUT` with stderr in OUT.log; returns its pid.
pid_t start_peer(const fs::path& cfg, int rank, const fs::path& out) {
  const std::string exe = bin();
  std::fflush(stdout);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string log = out.string() + ".log";
    std::freopen(log.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    const std::string r = std::to_string(rank);
    execl(exe.c_str(), "gossip", "peer", cfg.c_str(), "--rank", r.c_str(), "--out",
          out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

/// `gossip run` into DIR/run and `gossip sim` into DIR/sim of one config: both succeed and end
/// with the same parameter hash for each of the `peers` peers.
void check_run_equals_sim(const fs::path& dir, const fs::path& cfg, int peers) {
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (dir / "run").string() +
                         " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (dir / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const auto a = hashes(dir / "run" / "summary.json");
  REQUIRE(a.size() == static_cast<std::size_t>(peers));
  CHECK(a == hashes(dir / "sim" / "summary.json"));
}

/// The lines of a run's final table that do not depend on timing: each peer's accuracy, and the
/// average model's line up to its duration.
std::vector<std::string> final_table(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream in(output);
  std::string line;
  const std::regex peer_row(R"(^\s*(\d+)\s+([0-9.]+|dead)\s+.*$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, peer_row)) out.push_back(m[1].str() + " " + m[2].str());
    if (line.rfind("average model:", 0) == 0) out.push_back(line.substr(0, line.rfind(',')));
  }
  return out;
}

/// The rows of metrics.csv after its header, cell by cell.
std::vector<std::vector<std::string>> metrics_rows(const fs::path& metrics) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(read_file(metrics));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    out.push_back(f);
  }
  return out;
}

/// The average model's rows of metrics.csv without their timing: round, epoch, accuracy, consensus.
std::vector<std::string> average_rows(const fs::path& metrics) {
  std::vector<std::string> out;
  for (const auto& f : metrics_rows(metrics))
    if (f.size() == 8 && f[2] == "-1") out.push_back(f[0] + "," + f[1] + "," + f[4] + "," + f[5]);
  return out;
}

/// Starts `gossip peer --rank r --out OUT(r)` for every rank and waits for them all.
Result start_peers(const fs::path& cfg, int n, const std::function<fs::path(int)>& out) {
  std::string cmd;
  for (int r = 0; r < n; ++r)
    cmd += bin() + " peer " + cfg.string() + " --rank " + std::to_string(r) + " --out " +
           out(r).string() + " > " + out(r).string() + named(".log", r) + " 2>&1 & ";
  return run("sh -c '" + cmd + "wait'");
}

gossip::Topology ring(int n) {
  gossip::GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kRing;
  s.n = n;
  return gossip::make_topology(s);
}

/// Sets environment variables for one scope, and clears every launcher variable first.
struct LauncherEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  explicit LauncherEnv(const std::vector<std::pair<const char*, const char*>>& vars) {
    for (const char* v : {"GOSSIP_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_MCA_ess_base_jobid", "SLURM_PROCID", "SLURM_STEP_ID",
                          "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_NODELIST",
                          "SLURM_JOB_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
                          "SLURM_TASKS_PER_NODE", "SLURMD_NODENAME", "PMI_RANK", "PMI_SIZE",
                          "JOB_COMPLETION_INDEX"}) {
      const char* old = std::getenv(v);
      saved.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
    for (const auto& [k, v] : vars) setenv(k, v, 1);
  }
  ~LauncherEnv() {
    for (const auto& [k, v] : saved) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }
};

}  // namespace

namespace {
/// A transport that records which of its calls, on either plane, reached it.
class RecordingTransport final : public gossip::Exchange, public gossip::MembershipChannel {
 public:
  std::set<std::string> reached;
  int rank() const override { return 0; }
  int size() const override { return 3; }
  void publish(std::int64_t, std::span<const float>, double, std::span<const int>) override {
    reached.insert("publish");
  }
  void publish_packet(std::int64_t, std::span<const std::byte>, std::span<const int>) override {
    reached.insert("publish_packet");
  }
  std::vector<gossip::Inbox> collect(std::int64_t, std::span<const int>,
                                     const gossip::CollectOptions&) override {
    reached.insert("collect");
    return {};
  }
  std::vector<int> dead_peers() const override { return {}; }
  std::uint64_t bytes_sent() const override {
    note("bytes_sent");
    return 42;
  }
  std::vector<int> excused_peers() const override {
    note("excused_peers");
    return {};
  }
  std::optional<gossip::Inbox> newest(std::span<const int>) override {
    reached.insert("newest");
    return std::nullopt;
  }
  void set_tags_per_round(int tags) override { reached.insert(cat("tags ", tags)); }
  void send_view(std::int64_t, std::span<const gossip::Member>, std::span<const int>,
                 std::span<const gossip::Probe>) override {
    reached.insert("send_view");
  }
  std::vector<gossip::PeerView> take_views() override {
    reached.insert("take_views");
    return {};
  }
  std::optional<std::vector<int>> heard_within(double) const override {
    note("heard_within");
    return std::nullopt;
  }
  void announce(std::span<const gossip::Announcement>, std::span<const int>) override {
    reached.insert("announce");
  }
  std::vector<gossip::Announcement> take_announcements() override {
    reached.insert("take_announcements");
    return {{2, gossip::ChangeKind::kLeave, 5}};
  }

 private:
  void note(const char* name) const { const_cast<RecordingTransport*>(this)->reached.insert(name); }
  static std::string cat(const char* a, int b) { return a + std::to_string(b); }
};

// The algorithm sees the data plane alone: membership traffic and link reports are no part of
// the decorators it is handed (DESIGN "Exchange by capability").
static_assert(!std::is_base_of_v<gossip::MembershipChannel, gossip::peer_parts::TracedExchange>);
static_assert(!std::is_base_of_v<gossip::MembershipChannel, gossip::MonitoredExchange>);
static_assert(!std::is_base_of_v<gossip::LinkReports, gossip::peer_parts::TracedExchange>);
static_assert(!std::is_base_of_v<gossip::LinkReports, gossip::MonitoredExchange>);
}  // namespace

TEST_CASE("every Exchange call, and every membership call, reaches the transport through the "
          "peer's whole decorator stack", "[peer]") {
  using gossip::Fault;
  using gossip::FaultAction;
  RecordingTransport transport;
  // A cut of a link of another peer and an attack by this one: both fault decorators are there.
  Fault cut;
  cut.action = FaultAction::kCut;
  cut.round = 100;
  cut.to_round = 101;
  cut.links = {{1, 2}};
  Fault attack;
  attack.action = FaultAction::kAttack;
  attack.round = 100;
  attack.peers = {0};
  attack.attack = gossip::AttackKind::kScale;
  attack.parameter = 2.0;
  gossip::FaultedExchange faulted(transport, transport, std::vector<Fault>{cut, attack}, 1);
  REQUIRE(&faulted.top() != static_cast<gossip::Exchange*>(&transport));
  REQUIRE(&faulted.membership() != static_cast<gossip::MembershipChannel*>(&transport));
  gossip::MonitorConfig monitor;
  monitor.suspect_after_s = 1.0;  // the monitor asks the transport what it heard
  gossip::MonitoredExchange monitored(faulted.top(), faulted.membership(), monitor);
  gossip::Timeline timeline(0, [] { return 0.0; });
  gossip::peer_parts::TracedExchange top(monitored, timeline);

  // The data plane, from the top, as the algorithm calls it; the monitor sends and takes its
  // views, and asks what was heard, through the membership stack on the way.
  const float params[4] = {1, 2, 3, 4};
  const std::byte packet[2] = {};
  const int to[] = {1, 2};
  top.set_tags_per_round(2);
  top.publish(0, params, 1.0, to);
  top.publish_packet(1, packet, to);
  (void)top.collect(0, to, {});
  (void)top.excused_peers();
  (void)top.newest(to);
  CHECK(top.rank() == 0);
  CHECK(top.size() == 3);
  CHECK(top.bytes_sent() == 42);
  for (const char* call : {"tags 2", "publish", "publish_packet", "collect", "excused_peers",
                           "newest", "bytes_sent", "send_view", "take_views", "heard_within"}) {
    INFO("the call that did not reach the transport: " << call);
    CHECK(transport.reached.count(call) == 1);
  }
  // The membership channel, from the top of its stack, as the monitor and the elastic unit
  // call it. (Link reports, alerts included, are read from the transport itself, through no
  // decorator: test_monitor.cpp's MembershipWatch cases.)
  transport.reached.clear();
  gossip::MembershipChannel& members = faulted.membership();
  const gossip::Member view[3] = {};
  const gossip::Announcement known[] = {{1, gossip::ChangeKind::kJoin, 3}};
  members.send_view(0, view, to);
  (void)members.take_views();
  (void)members.heard_within(1.0);
  members.announce(known, to);
  const auto announcements = members.take_announcements();
  REQUIRE(announcements.size() == 1);
  CHECK(announcements[0].rank == 2);
  for (const char* call :
       {"send_view", "take_views", "heard_within", "announce", "take_announcements"}) {
    INFO("the membership call that did not reach the transport: " << call);
    CHECK(transport.reached.count(call) == 1);
  }
}

TEST_CASE("the handshake carries the gossip settings that apply, 0 and '' where none do",
          "[peer]") {
  using gossip::peer_parts::gossip_settings;
  gossip::GossipConfig g;  // dpsgd: the algorithm alone, whatever choco's keys say
  g.choco.compress.kind = gossip::CompressKind::kTopK;
  g.choco.gossip_steps = 3;
  CHECK(gossip_settings(g) == gossip::GossipSettings{"dpsgd", "", 0.0, 0, 0.0, 0, 0});
  g.algorithm = gossip::AlgorithmKind::kChoco;  // choco: the default gamma halved for 3 steps
  CHECK(gossip_settings(g) == gossip::GossipSettings{"choco", "top_k", 0.01, 0, 0.05, 3, 0});
  g.choco.compress.kind = gossip::CompressKind::kQuantize;  // bits, not the fraction
  g.choco.compress.bits = 4;
  g.choco.consensus_step = 0.3;
  g.choco.gossip_steps = 1;
  CHECK(gossip_settings(g) == gossip::GossipSettings{"choco", "quantize", 0.0, 4, 0.3, 1, 0});
  g.choco.compress.kind = gossip::CompressKind::kNone;  // neither; CHOCO without compression
  g.choco.consensus_step = 0.0;
  CHECK(gossip_settings(g) == gossip::GossipSettings{"choco", "none", 0.0, 0, 1.0, 1, 0});
  // local_sgd's outer step: its compressor, and Streaming DiLoCo's fragments.
  gossip::GossipConfig outer;
  outer.algorithm = gossip::AlgorithmKind::kLocalSgd;
  outer.outer.enabled = true;
  outer.outer.fragments = 4;
  CHECK(gossip_settings(outer) == gossip::GossipSettings{"local_sgd", "", 0.0, 0, 0.0, 0, 4});
  outer.outer.compress.kind = gossip::CompressKind::kQuantize;
  outer.outer.compress.bits = 4;
  CHECK(gossip_settings(outer) ==
        gossip::GossipSettings{"local_sgd", "quantize", 0.0, 4, 0.0, 0, 4});
  for (const auto& row : gossip::algorithm_table()) {  // every name travels in a hello
    g.algorithm = row.kind;
    CHECK(gossip::wire::check_gossip_settings(gossip_settings(g)) == "");
  }
}

TEST_CASE("gossip run over TCP and gossip sim end with bit-identical parameters", "[peer]") {
  struct Case {
    const char* algorithm;
    int period;
    bool shared_memory;  // on one host peers read each other's parameters from shared memory
    const char* topology = "";
  };
  for (const Case c : {Case{"dpsgd", 1, true}, Case{"local_sgd", 3, true}, Case{"dpsgd", 1, false},
                       // D² on the ring of 6 made lazy (its own W has eigenvalue -1/3)
                       Case{"gradient_tracking", 2, false, "laziness: 0.1\n"},
                       Case{"dpsgd, overlap: true", 1, true},
                       Case{"choco, choco: {compress: {kind: top_k, fraction: 0.1}}", 1, true},
                       Case{"choco, choco: {compress: {kind: quantize, bits: 4}}", 2, false},
                       Case{"allreduce", 1, true},
                       // gossip.wire: every message rounded to 16 bits as it leaves, in both.
                       Case{"dpsgd, wire: bf16", 1, true}, Case{"local_sgd, wire: bf16", 2, false},
                       Case{"allreduce, wire: fp16", 1, true},
                       Case{"dpsgd, overlap: true, wire: bf16", 1, false},
                       // choco's top_k values at bf16, indices as varint gaps (kind 6).
                       Case{"choco, choco: {compress: {kind: top_k, fraction: 0.1}}, wire: bf16", 1,
                            false},
                       // three compressed exchanges a round (relay phases, tagged exchanges).
                       Case{"choco, choco: {compress: {kind: top_k, fraction: 0.05}, "
                            "gossip_steps: 3, consensus_step: 0.1}, wire: bf16",
                            1, true}}) {
    SECTION(gossip::cat(c.algorithm, " period ", c.period,
                        c.shared_memory ? ", shared memory" : ", TCP only")) {
      TempDir t;
      const auto cfg =
          write_config(t.path, 6, c.algorithm, c.period, 2, c.topology, c.shared_memory);
      check_run_equals_sim(t.path, cfg, 6);
      // Not a degenerate run: the peers learned something.
      CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
      // And the parameters went the way the config says.
      const std::string log = read_file(t.path / "run" / "peers" / "0" / "peer.log");
      INFO(log);
      const std::string needle = "its parameters come through shared memory";
      std::size_t shm_links = 0;
      for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
        ++shm_links;
      CHECK(shm_links == (c.shared_memory ? 2u : 0u));
      // A half-width run says so (and the simulator, bit-identical to it, rounded alike).
      const std::string wire = std::string(c.algorithm).find("wire: bf16") != std::string::npos
                                   ? "bf16"
                               : std::string(c.algorithm).find("wire: fp16") != std::string::npos
                                   ? "fp16"
                                   : "";
      const auto says = log.find(gossip::cat("parameters travel as ", wire, " (gossip.wire)"));
      CHECK((says != std::string::npos) == !wire.empty());
    }
  }
}

/// Replaces write_config's ring with an elastic exponential graph of `n` peers and `max_peers`
/// identities.
void write_elastic_topology(const fs::path& dir, int n, int max_peers) {
  std::ofstream(dir / "topo.yaml", std::ios::trunc)
      << "generator: exponential\nn: " << n << "\nelastic: true\nmax_peers: " << max_peers << "\n";
}

/// The line of a summary's field `key` (summary.json has one field a line).
std::string summary_field(const fs::path& summary, const std::string& key) {
  const std::string text = read_file(summary);
  const auto from = text.find("\"" + key + "\": ");
  REQUIRE(from != std::string::npos);
  return text.substr(from, text.find('\n', from) - from);
}

TEST_CASE("an elastic gossip run: peers join and leave at the rounds gossip sim says, with the same "
          "timeline and bit-identical parameters", "[peer][elastic]") {
  // An elastic exponential graph of 6 (ranks up to 9): ranks 6 and 7 join (announced at round
  // 8), rank 1 leaves (announced at 20). The launcher starts the joiners ahead of their round;
  // each takes the average of its donors' parameters after the round before; the leaver stops
  // after the round before its leave. gossip sim runs the same schedule in one process.
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1, 3);
  write_elastic_topology(t.path, 6, 10);
  std::ofstream(cfg, std::ios::app) << "faults:\n  - {round: 8, join: [6, 7]}\n"
                                    << "  - {round: 20, leave: [1]}\n";
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                         " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);  // the leaver is a success, not a failure
  CHECK_THAT(net.output, Catch::Contains("starting peers 6,7, which join at round"));
  CHECK_THAT(net.output, Catch::Contains("left after round"));
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const fs::path a = t.path / "run" / "summary.json", b = t.path / "sim" / "summary.json";
  // The same members at every round, each peer's rounds as a member, the donors.
  const std::string timeline = summary_field(a, "membership_timeline");
  CHECK(timeline == summary_field(b, "membership_timeline"));
  CHECK_THAT(timeline, Catch::Contains("\"joined\": [6, 7]"));
  CHECK_THAT(timeline, Catch::Contains("\"left\": [1]"));
  CHECK_THAT(read_file(a), Catch::Contains("\"member_rounds\": [29, 24, 29, 29, 29, 29, 17, 17, 0, 0]"));
  // 29 rounds (3 epochs of 153-154 samples in batches of 16): 6, 7 from round 12, 1 to 24.
  // Bit for bit: the 8 ranks that were members (the leaver's at its last round); none for the
  // two that never were.
  const auto run_hashes = hashes(a);
  CHECK(run_hashes.size() == 8u);
  CHECK(run_hashes == hashes(b));
  CHECK(number(a, "test_accuracy") > 0.8);
  // Each joiner started from at least two donors, soon after it was ready.
  for (int p : {6, 7}) {
    const fs::path s = t.path / "run" / "peers" / std::to_string(p) / "summary.json";
    const std::string join = summary_field(s, "join");
    INFO(join);
    CHECK(std::count(join.begin(), join.end(), ',') >= 5);  // donors: [a, b, ...] and 4 fields
    CHECK(number(s, "ready_to_mix_s") >= 0.0);
    CHECK(number(s, "member_from") > 8);
  }
  CHECK_THAT(read_file(t.path / "run" / "peers" / "1" / "summary.json"),
             Catch::Contains("\"left\": true"));
  const std::string events = read_file(t.path / "run" / "events.jsonl");
  for (const char* action : {"\"join\"", "\"joined\"", "\"leave\"", "\"left\""})
    CHECK_THAT(events, Catch::Contains(std::string("\"action\": ") + action));
  CHECK_THAT(events, !Catch::Contains("\"event\": \"dead\""));
}

TEST_CASE("gossip run and gossip peer refuse joins and leaves they cannot carry out",
          "[peer][elastic]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 1);
  const auto with = [&](const std::string& topo, const std::string& faults) {
    std::ofstream(t.path / "topo.yaml", std::ios::trunc) << topo;
    const std::string text = read_file(cfg);
    std::ofstream(t.path / "f.yaml", std::ios::trunc) << text << "faults:\n" << faults;
    return (t.path / "f.yaml").string();
  };
  const std::string elastic = "generator: exponential\nn: 4\nelastic: true\nmax_peers: 6\n";
  const struct {
    std::string topo, faults, command, says;
  } refused[] = {
      // a join to a run whose peers are fixed
      {"generator: ring\nn: 4\n", "  - {round: 5, join: [4]}\n", " run ",
       "peers join and leave only an elastic topology"},
      {"generator: ring\nn: 4\n", "  - {round: 5, join: [4]}\n", " peer ",
       "peers join and leave only an elastic topology"},
      // the last peer leaving
      {elastic, "  - {round: 5, leave: [0, 1, 2, 3]}\n", " run ", "leave"},
      // a rank the schedule never makes a member
      {elastic, "  - {round: 5, join: [4]}\n", " peer ", "rank 5 is never a member"},
      // a joiner started into its run with a flag of a fixed run's
      {elastic, "  - {round: 5, join: [4]}\n", " peer ", "--until-round: not for a run whose peers join"},
  };
  for (const auto& c : refused) {
    const std::string f = with(c.topo, c.faults);
    const std::string extra = c.command == " peer "
                                  ? (c.says.find("until") != std::string::npos
                                         ? " --rank 4 --until-round 3"
                                         : c.says.find("never") != std::string::npos ? " --rank 5"
                                                                                    : " --rank 0")
                                  : "";
    const Result r = run(bin() + c.command + f + extra + " --out " + (t.path / "o").string() +
                         (c.command == " run " ? " --no-progress" : ""));
    INFO(c.command << c.says << "\n" << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.says));
  }
  // A rank without a certificate: the joiner's credentials were never issued.
  const std::string f = with(elastic, "  - {round: 5, join: [4]}\n");
  const Result keys = run(bin() + " keys init " + (t.path / "keys").string() + " --config " + f);
  REQUIRE(keys.code == 0);
  fs::remove(t.path / "keys" / "peer-4.pem");
  const Result r = run(bin() + " peer " + f + " --rank 4 --tls-dir " + (t.path / "keys").string() +
                       " --out " + (t.path / "o").string());
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("peer-4.pem"));
}

TEST_CASE("an attacking peer's messages are the same over TCP as in the simulator, bit for bit",
          "[peer][faults]") {
  // Peer 2 of a ring of 6 attacks from round 3: the same Attack code under its monitor in a
  // real peer and in a simulated one. Dissensus sends each neighbour a message of its own (two
  // frames of one round; in the simulator two publishes of it).
  for (const char* attack : {"sign_flip", "dissensus, epsilon: 0.5"}) {
    SECTION(attack) {
      TempDir t;
      const auto cfg = write_config(t.path, 6, "dpsgd", 1, 1);
      std::ofstream(cfg, std::ios::app)
          << "faults:\n  - {round: 3, attack: [2], kind: " << attack << "}\n";
      check_run_equals_sim(t.path, cfg, 6);
      // The attack bit: the run is not the one without it.
      TempDir clean;
      const auto plain = write_config(clean.path, 6, "dpsgd", 1, 1);
      const Result sim = run(bin() + " sim " + plain.string() + " --out " +
                             (clean.path / "sim").string());
      REQUIRE(sim.code == 0);
      CHECK(hashes(clean.path / "sim" / "summary.json") !=
            hashes(t.path / "sim" / "summary.json"));
      CHECK_THAT(read_file(t.path / "run" / "events.jsonl"),
                 Catch::Contains("\"action\": \"attack " + std::string(attack).substr(0, 9)));
    }
  }
}

TEST_CASE("a lying peer is cut by its neighbours over TCP as in the simulator, and NaN senders "
          "are counted alike", "[peer][faults][byzantine]") {
  // Peer 2 of a ring of 6 attacks from round 2, clipped gossip with on_byzantine: cut. Real
  // peers and virtual ones run the same watch: the same cuts at the same rounds, the same
  // parameters bit for bit, and summary.json names them. A NaN sender is left out and counted
  // per sender, the same totals in both.
  struct Case {
    const char* kind;
    const char* event;  // what peers 1 and 3 say of peer 2 in summary.json
  };
  for (const Case c : {Case{"sign_flip", "byzantine_cut"}, Case{"nan", "byzantine_cut"}}) {
    SECTION(c.kind) {
      TempDir t;
      const auto cfg = write_config(t.path, 6, "dpsgd, aggregate: clipped, on_byzantine: cut", 1, 2);
      std::ofstream(cfg, std::ios::app)
          << "faults:\n  - {round: 2, attack: [2], kind: " << c.kind << "}\n";
      check_run_equals_sim(t.path, cfg, 6);
      for (const char* out : {"run", "sim"}) {
        INFO(out);
        const std::string summary = read_file(t.path / out / "summary.json");
        INFO(summary);
        for (int p : {1, 3})
          CHECK_THAT(summary, Catch::Contains(gossip::cat("{\"event\": \"", c.event,
                                                          "\", \"peer\": ", p,
                                                          ", \"subject\": 2, \"round\": ")));
        // Nobody but the attacker's neighbours cuts anybody.
        std::size_t cuts = 0;
        for (auto at = summary.find("byzantine_cut"); at != std::string::npos;
             at = summary.find("byzantine_cut", at + 1))
          ++cuts;
        CHECK(cuts == 2);
      }
      const std::string run_summary = read_file(t.path / "run" / "summary.json");
      const std::string sim_summary = read_file(t.path / "sim" / "summary.json");
      const auto refused = [](const std::string& s) {
        return s.substr(s.find("\"refused_params\""), s.find("]", s.find("\"refused_params\"")) -
                                                          s.find("\"refused_params\""));
      };
      // NaN: refused until cut, the same count in both; sign_flip sends finite values.
      CHECK(refused(run_summary) == refused(sim_summary));
      CHECK((refused(run_summary).find("\"from\": 2") != std::string::npos) ==
            (std::string(c.kind) == "nan"));
      // Each cutting peer's own summary says whom it cut.
      CHECK_THAT(read_file(t.path / "run" / "peers" / "1" / "summary.json"),
                 Catch::Contains("\"cut\": [2]"));
    }
  }
}

TEST_CASE("CHOCO's sparse packets larger than the parameters fit the frame limit over TCP",
          "[peer][choco]") {
  // 40,403 parameters; top_k of 90 % sends an index and a value for 36,363 of them: 290,920
  // bytes a packet, more than a parameters frame (161,612 bytes and 64 KiB of slack).
  TempDir t;
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 4\n";
  std::ofstream(t.path / "c.yaml")
      << "data:\n  synthetic: {train: 256, test: 64, dim: 400, classes: 3}\n"
      << "model: {layers: [400, 100, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: 1, batch: 16, seed: 5, backend: cpu}\n"
      << "gossip: {topology: topo.yaml, algorithm: choco, "
      << "choco: {compress: {kind: top_k, fraction: 0.9}}}\n"
      << "monitor: {round_timeout_s: 10}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20, "
      << "shared_memory: false}\n";
  check_run_equals_sim(t.path, t.path / "c.yaml", 4);
}

/// compare.csv's rows as maps from column name to value.
std::vector<std::map<std::string, std::string>> csv_table(const fs::path& csv) {
  std::vector<std::map<std::string, std::string>> out;
  const auto rows = metrics_rows(csv);  // cells of every line after the header
  std::istringstream in(read_file(csv));
  std::string header;
  std::getline(in, header);
  std::vector<std::string> names;
  std::stringstream cells(header);
  for (std::string c; std::getline(cells, c, ',');) names.push_back(c);
  for (auto f : rows) {
    f.resize(names.size());  // a trailing empty cell is not read as one
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < names.size(); ++i) row[names[i]] = f[i];
    out.push_back(row);
  }
  return out;
}

TEST_CASE("gossip compare --run runs every setting for real, each as gossip sim simulates it",
          "[peer][compare]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 1);
  std::ofstream(cfg, std::ios::app)
      << "compare:\n  topologies: [topo.yaml]\n  algorithms: [dpsgd, choco]\n"
      << "  compress: [{kind: top_k, fraction: 0.1}]\n";
  const fs::path out = t.path / "sweep";
  const Result sweep =
      run(bin() + " compare " + cfg.string() + " --run --quiet --out " + out.string());
  INFO(sweep.output);
  REQUIRE(sweep.code == 0);
  const auto rows = csv_table(out / "compare.csv");
  REQUIRE(rows.size() == 2);
  // Each row is its run: final accuracy, seconds and bytes measured by the real peers.
  const char* runs[] = {"1-topo_dpsgd", "2-topo_choco_top_k_0.1"};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& r = rows[i];
    const fs::path run_dir = out / "runs" / runs[i];
    INFO(run_dir);
    CHECK(r.at("mode") == "real");
    CHECK(r.at("links") == "loopback");
    CHECK(r.at("sim_seconds").empty());
    CHECK(std::stod(r.at("final_accuracy")) ==
          Approx(number(run_dir / "summary.json", "test_accuracy")).margin(1e-6));
    CHECK(std::stod(r.at("final_accuracy")) > 0.8);
    CHECK(std::stod(r.at("wall_seconds")) > 0);
    CHECK(std::stod(r.at("bytes_per_peer")) ==
          Approx(number(run_dir / "summary.json", "bytes_per_peer")).epsilon(1e-5));
    CHECK(std::stod(r.at("bytes_per_peer")) > 0);
    CHECK(fs::exists(run_dir / "peers" / "0"));
  }
  CHECK(rows[0].at("algorithm") == "dpsgd");
  CHECK(rows[1].at("algorithm") == "choco");
  CHECK(rows[1].at("compress") == "top_k 0.1");
  // CHOCO's top-10% sends less than D-PSGD's whole buffers.
  CHECK(std::stod(rows[1].at("bytes_per_peer")) < std::stod(rows[0].at("bytes_per_peer")) / 2);
  const std::string report = read_file(out / "report.md");
  CHECK(report.find("gossip compare --run") != std::string::npos);
  CHECK(report.find("wall s to target") != std::string::npos);
  CHECK(read_file(out / "curves.dat").find("wall_seconds") != std::string::npos);
  // Synchronous settings end bit-identical to gossip sim of the same setting (DESIGN idea 2).
  const std::string settings[] = {"--algorithm dpsgd", "--algorithm choco --compress top_k:0.1"};
  for (std::size_t i = 0; i < 2; ++i) {
    const fs::path sim_dir = t.path / named("sim", static_cast<int>(i));
    const Result sim =
        run(bin() + " sim " + cfg.string() + " " + settings[i] + " --out " + sim_dir.string());
    INFO(sim.output);
    REQUIRE(sim.code == 0);
    const auto a = hashes(out / "runs" / runs[i] / "summary.json");
    REQUIRE(a.size() == 4u);
    CHECK(a == hashes(sim_dir / "summary.json"));
  }
}

TEST_CASE("gossip compare --run refuses what a real run cannot do before anything runs",
          "[peer][compare]") {
  TempDir t;
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1);
  std::ofstream(cfg, std::ios::app)
      << "compare:\n  topologies: [topo.yaml]\n  algorithms: [dpsgd, allreduce]\n"
      << "  averaging_rounds: 20\n";
  const fs::path out = t.path / "sweep";
  const Result r = run(bin() + " compare " + cfg.string() + " --run --quiet --out " + out.string());
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("compare.averaging_rounds") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "runs"));
  // Without it the sweep could run, but not with the simulator's worker threads.
  const auto cfg2 = write_config(t.path, 3, "dpsgd", 1, 1);
  std::ofstream(cfg2, std::ios::app)
      << "compare:\n  topologies: [topo.yaml]\n  algorithms: [dpsgd, allreduce]\n";
  const Result w = run(bin() + " compare " + cfg2.string() + " --run --workers 2 --out " +
                       out.string());
  INFO(w.output);
  CHECK(w.code == 2);
  CHECK(w.output.find("--workers") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "runs"));
  // D-PSGD with overlap cannot be turned into all-reduce without it by the peers' overrides.
  set_gossip(cfg2, "overlap: true");
  const Result o = run(bin() + " compare " + cfg2.string() + " --run --out " + out.string());
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find("gossip.overlap") != std::string::npos);
  CHECK_FALSE(fs::exists(out / "runs"));
  // Attack cells are the simulator's; a swept aggregate goes to the peers as --aggregate NAME,
  // which cannot carry a fixed tau.
  const struct {
    const char* sweep;
    const char* named;
  } refused[] = {
      {"  attacks: [none, {round: 1, attack: [1], kind: sign_flip}]\n", "compare.attacks"},
      {"  aggregates: [mean, {kind: clipped, tau: 0.5}]\n", "gossip.aggregate"},
      {"  memberships: [none, {name: grow, changes: [{round: 2, join: [3]}]}]\n",
       "compare.memberships: real peers cannot yet join"},
  };
  for (const auto& c : refused) {
    const auto cfg3 = write_config(t.path, 3, "dpsgd", 1, 1);
    std::ofstream(cfg3, std::ios::app) << "compare:\n  topologies: [topo.yaml]\n" << c.sweep;
    const Result a = run(bin() + " compare " + cfg3.string() + " --run --out " + out.string());
    INFO(a.output);
    CHECK(a.code == 2);
    CHECK(a.output.find(c.named) != std::string::npos);
    CHECK_FALSE(fs::exists(out / "runs"));
  }
}

TEST_CASE("with train.gemm auto, gossip run measures once and gossip sim reads the same choice: "
          "one GEMM, bit-identical parameters", "[peer][gemm]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 1);
  // No pinned GEMM here (the test environment pins one for every other test), and a cache of
  // this test's own, empty at first.
  const std::string env = "env -u GOSSIP_GEMM XDG_CACHE_HOME=" + (t.path / "cache").string() + " ";
  const Result net = run(env + bin() + " run " + cfg.string() + " --out " +
                         (t.path / "run").string() + " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);
  const Result sim = run(env + bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const std::regex field("\"gemm\": \"([a-z]+)\"");
  std::smatch in_run, in_sim;
  const std::string run_summary = read_file(t.path / "run" / "summary.json");
  const std::string sim_summary = read_file(t.path / "sim" / "summary.json");
  REQUIRE(std::regex_search(run_summary, in_run, field));
  REQUIRE(std::regex_search(sim_summary, in_sim, field));
  const std::string gemm = in_run[1].str();
  CHECK((gemm == "openblas" || gemm == "onednn" || gemm == "blis"));
  CHECK(in_sim[1].str() == gemm);
  CHECK_THAT(net.output, Catch::Contains("the peers' matrix products: GEMM " + gemm + " (measured)"));
  CHECK_THAT(sim.output, Catch::Contains("GEMM " + gemm + " (cached)"));
  // Every peer ran the launcher's choice, handed down to it.
  for (int r = 0; r < 4; ++r)
    CHECK_THAT(read_file(t.path / "run" / "peers" / std::to_string(r) / "peer.log"),
               Catch::Contains("GEMM " + gemm + " (GOSSIP_GEMM)"));
  int cache_files = 0;
  for (const auto& e : fs::directory_iterator(t.path / "cache" / "gossip"))
    cache_files += e.path().filename().string().rfind("gemm-", 0) == 0 ? 1 : 0;
  CHECK(cache_files == 1);
  const auto a = hashes(t.path / "run" / "summary.json");
  REQUIRE(a.size() == 4u);
  CHECK(a == hashes(t.path / "sim" / "summary.json"));
}

TEST_CASE("all-reduce talks round the ring whatever the graph, bit-identical to the simulator",
          "[peer]") {
  // On a star most peers' only neighbour is the hub; all-reduce's ring needs links between
  // consecutive ranks, which each peer adds to the graph's own.
  TempDir t;
  const auto cfg = write_config(t.path, 5, "allreduce", 1, 1);
  std::ofstream(t.path / "topo.yaml") << "generator: star\nn: 5\n";
  check_run_equals_sim(t.path, cfg, 5);
  const auto a = hashes(t.path / "run" / "summary.json");
  for (const auto& h : a) CHECK(h == a.front());  // every peer holds the exact average
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
}

TEST_CASE("a CNN runs over TCP bit-identical to the simulator", "[peer]") {
  // Image-shaped synthetic data ([2, 6, 6] = 72 features) through conv, pooling, group norm and
  // dropout: every layer's arithmetic and dropout's mask stream must agree across transports.
  TempDir t;
  const fs::path cfg = write_config(t.path, 4, "dpsgd", 1);
  std::ofstream(cfg) << "data:\n  synthetic: {train: 768, test: 192, dim: 72, classes: 3}\n"
                     << "model:\n  input: [2, 6, 6]\n  layers:\n"
                     << "    - conv2d: {out_channels: 4, kernel: 3, padding: 1}\n"
                     << "    - relu\n    - maxpool2d: {kernel: 2}\n    - groupnorm: {groups: 2}\n"
                     << "    - flatten\n    - dropout: {p: 0.2}\n    - linear: {out: 3}\n"
                     << "optimizer: {lr: 0.05, momentum: 0.9}\n"
                     << "train: {epochs: 1, batch: 16, seed: 5, backend: cpu}\n"
                     << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1}\n"
                     << "monitor: {round_timeout_s: 5}\n"
                     << "net: {run_id: test-cnn, base_port: " << test_port_base()
                     << ", connect_timeout_s: 20}\n";
  check_run_equals_sim(t.path, cfg, 4);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
}

TEST_CASE("the peers of a host map one shared copy of the Fashion-MNIST training and test images",
          "[peer]") {
  const std::string images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (!fs::exists(images)) {
    WARN("no Fashion-MNIST at " << images << ", skipped");
    return;
  }
  TempDir t;
  const fs::path cfg = write_config(t.path, 3, "dpsgd", 1);
  auto config = [&](const std::string& cache_dir) {
    std::ofstream(cfg) << "data: {limit_train: 600, cache_dir: " << cache_dir << "}\n"
                       << "model: {layers: [784, 16, 10]}\n"
                       << "optimizer: {lr: 0.05, momentum: 0.9}\n"
                       << "train: {epochs: 1, batch: 32, seed: 5, backend: cpu, eval_limit: 500}\n"
                       << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1}\n"
                       << "monitor: {round_timeout_s: 5}\n"
                       << "net: {run_id: test-mapped, base_port: " << test_port_base()
                       << ", connect_timeout_s: 20}\n";
  };
  const fs::path cache = t.path / "cache";
  for (const bool shared : {true, false}) {
    config(shared ? cache.string() : "off");
    const fs::path out = t.path / (shared ? "run" : "run-off");
    const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() +
                         " --no-progress");
    INFO(r.output);
    REQUIRE(r.code == 0);
    std::set<std::string> files, train_files;
    for (int p = 0; p < 3; ++p) {
      const std::string log = read_file(out / "peers" / std::to_string(p) / "peer.log");
      INFO(log);
      std::smatch m;
      if (shared) {
        REQUIRE(std::regex_search(log, m, std::regex("test set mapped from (\\S+) \\(shared\\)")));
        files.insert(m[1]);
        REQUIRE(std::regex_search(log, m, std::regex("training images mapped from (\\S+) \\(shared\\)")));
        train_files.insert(m[1]);
      } else {
        CHECK(log.find("test set in this process's memory") != std::string::npos);
        CHECK(log.find("training images decoded in this process") != std::string::npos);
      }
    }
    if (!shared) continue;
    // One file for the three of them, in the cache folder: a 64-byte header and 10000 images;
    // and one of the 60000 training images (limit_train keeps 600 rows of the mapped file).
    REQUIRE(files.size() == 1);
    const fs::path file = *files.begin();
    CHECK(file.parent_path() == cache);
    CHECK(fs::file_size(file) == 64u + 10000u * 784u);
    REQUIRE(train_files.size() == 1);
    CHECK(fs::path(*train_files.begin()).parent_path() == cache);
    CHECK(fs::file_size(*train_files.begin()) == 64u + 60000u * 784u);
  }
}

TEST_CASE("directed rings run in step over TCP, bit-identical to the simulator", "[peer]") {
  // A peer of a directed ring can run up to n - 1 rounds ahead of the peer it sends to; the
  // receiver must hold all of them, or a round is lost and every peer waits out its timeout.
  struct Case {
    int n;
    const char* algorithm;
    bool shared_memory;
  };
  for (const Case c : {Case{8, "dpsgd", true}, Case{8, "push_sum", false}, Case{16, "dpsgd", false},
                       Case{16, "push_sum", true}}) {
    SECTION(gossip::cat(c.n, " peers, ", c.algorithm,
                        c.shared_memory ? ", shared memory" : ", TCP only")) {
      TempDir t;
      const auto cfg = write_config(t.path, c.n, c.algorithm, 1, 1,
                                    "directed: true\nweights: uniform\n", c.shared_memory);
      check_run_equals_sim(t.path, cfg, c.n);
      // No round waited for a timeout, and no round was dropped on the way.
      for (int r = 0; r < c.n; ++r) {
        const std::string log = read_file(t.path / "run" / "peers" / std::to_string(r) / "peer.log");
        INFO(log);
        CHECK(log.find("nothing from") == std::string::npos);
        CHECK(log.find("dropped") == std::string::npos);
      }
    }
  }
}

TEST_CASE("epidemic topologies run over TCP bit-identical to the simulator", "[peer]") {
  // Each round each peer sends to s = 2 peers drawn from (seed, round, rank), the same draw in
  // every process and in the simulator; a peer that hears from nobody in a round goes on alone.
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1, 1);
  std::ofstream(t.path / "topo.yaml") << "generator: epidemic\nn: 6\ns: 2\nseed: 3\nperiod: 16\n";
  check_run_equals_sim(t.path, cfg, 6);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
}

TEST_CASE("random-matching topologies (NoLoCo's pairs) run over TCP bit-identical to the "
          "simulator", "[peer]") {
  // Each round the 7 peers are paired from (seed, round), one alone: every process draws the
  // same pairs as the simulator, with no coordinator.
  TempDir t;
  const auto cfg = write_config(t.path, 7, "dpsgd", 1, 1);
  std::ofstream(t.path / "topo.yaml") << "generator: random-matching\nn: 7\nseed: 3\nperiod: 16\n";
  check_run_equals_sim(t.path, cfg, 7);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
}

TEST_CASE("DiLoCo with DeMo's compressed pseudo-gradients runs over TCP bit-identical to the "
          "simulator, in a fraction of the bytes", "[peer][demo]") {
  TempDir t;
  const auto cfg = write_config(
      t.path, 4, "local_sgd, outer: {compress: {kind: dct_top_k, fraction: 0.05}}", 4, 3);
  std::ofstream(t.path / "topo.yaml") << "generator: complete\nn: 4\n";
  check_run_equals_sim(t.path, cfg, 4);
  // The 147 parameters of 12-24-3 at 5%: 8 coefficients of 8 bytes a packet (and its header),
  // against 588 bytes of parameters.
  const double compressed = number(t.path / "sim" / "summary.json", "bytes_sent");
  CHECK(compressed > 0);
  std::string text = read_file(cfg);
  const std::string demo = "compress: {kind: dct_top_k, fraction: 0.05}";
  text.replace(text.find(demo), demo.size(), "lr: 0.7");
  std::ofstream(t.path / "plain.yaml") << text;
  const Result plain = run(bin() + " sim " + (t.path / "plain.yaml").string() + " --out " +
                           (t.path / "plain").string() + " --quiet");
  INFO(plain.output);
  REQUIRE(plain.code == 0);
  CHECK(compressed * 5 < number(t.path / "plain" / "summary.json", "bytes_sent"));
}

TEST_CASE("Streaming DiLoCo runs over TCP bit-identical to the simulator, a fragment a round: "
          "mixed on a ring, 4-bit on the complete graph", "[peer][streaming]") {
  {
    TempDir t;
    const auto cfg = write_config(t.path, 4, "local_sgd, overlap: true, outer: {fragments: 3}", 2, 2);
    check_run_equals_sim(t.path, cfg, 4);
  }
  TempDir t;
  const auto cfg = write_config(
      t.path, 4, "local_sgd, outer: {fragments: 3, compress: {kind: quantize, bits: 4}}", 2, 2);
  std::ofstream(t.path / "topo.yaml") << "generator: complete\nn: 4\n";
  check_run_equals_sim(t.path, cfg, 4);
  CHECK(number(t.path / "sim" / "summary.json", "test_accuracy") > 0.8);
}

/// metrics.csv as its header and, per round, the `loss` of the average model's row (peer = -1).
struct Metrics {
  std::string header;
  std::map<long, double> average_loss;
  int peer_rows = 0;
};

Metrics read_metrics(const fs::path& csv) {
  std::ifstream in(csv);
  Metrics m;
  REQUIRE(std::getline(in, m.header));
  std::string line;
  while (std::getline(in, line)) {
    long round = 0;
    double epoch = 0, loss = 0;
    int peer = 0;
    REQUIRE(std::sscanf(line.c_str(), "%ld,%lf,%d,%lf,", &round, &epoch, &peer, &loss) == 4);
    if (peer == -1)
      m.average_loss[round] = loss;
    else
      ++m.peer_rows;
  }
  return m;
}

TEST_CASE("gossip run and gossip sim write the same columns with the same meaning, with the "
          "same overrides", "[peer]") {
  TempDir t;
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 4\n";
  // 1536 samples / (4 peers x batch 16) = 24 rounds an epoch; 4 evaluations an epoch.
  std::ofstream(t.path / "c.yaml")
      << "data:\n  synthetic: {train: 1536, test: 384, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 24, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: 3, batch: 16, seed: 7, backend: cpu, evals_per_epoch: 4}\n"
      << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1}\n"
      << "monitor: {round_timeout_s: 5}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20}\n";
  const std::string cfg = (t.path / "c.yaml").string();
  // The same overrides on both: one epoch of local SGD with period 2 (12 rounds).
  const std::string overrides = " --epochs 1 --algorithm local_sgd --period 2";
  const Result net = run(bin() + " run " + cfg + overrides + " --out " +
                         (t.path / "run").string() + " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);
  const Result sim = run(bin() + " sim " + cfg + overrides + " --out " +
                         (t.path / "sim").string() + " --quiet");
  INFO(sim.output);
  REQUIRE(sim.code == 0);

  // The overrides reached every peer: the parameters are the simulator's, after 12 rounds.
  CHECK(hashes(t.path / "run" / "summary.json") == hashes(t.path / "sim" / "summary.json"));
  for (const char* dir : {"run", "sim"}) {
    INFO(dir);
    CHECK(number(t.path / dir / "summary.json", "rounds") == 12);
    CHECK(number(t.path / dir / "summary.json", "epochs") == Approx(1.0));
  }
  CHECK(number(t.path / "run" / "peers" / "3" / "summary.json", "rounds") == 12);
  // Neighbours that finish first and say bye are not lost peers: the graph stays connected, as
  // in the simulator.
  CHECK(net.output.find("neighbours lost") == std::string::npos);
  CHECK(read_file(t.path / "run" / "summary.json").find("\"connected\": true") !=
        std::string::npos);

  // Every line of a peer's log starts with the UTC time it was written.
  for (int r = 0; r < 4; ++r) {
    std::ifstream log(t.path / "run" / "peers" / std::to_string(r) / "peer.log");
    std::string line;
    int lines = 0;
    while (std::getline(log, line)) {
      INFO("peer " << r << ": " << line);
      CHECK(std::regex_search(line, std::regex(R"(^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z )")));
      ++lines;
    }
    CHECK(lines >= 4);  // rank, start, two neighbours connected, done
  }

  const Metrics a = read_metrics(t.path / "run" / "metrics.csv");
  const Metrics b = read_metrics(t.path / "sim" / "metrics.csv");
  CHECK(a.header == b.header);
  CHECK(a.peer_rows == b.peer_rows);
  // The average model's row: its test loss in both (same parameters, so the same loss).
  REQUIRE(a.average_loss.size() == 5);  // rounds 0, 3, 6, 9, 12
  REQUIRE(b.average_loss.size() == a.average_loss.size());
  for (const auto& [round, loss] : a.average_loss) {
    INFO("round " << round);
    REQUIRE(b.average_loss.count(round) == 1);
    CHECK(loss > 0.0);
    CHECK(loss == Approx(b.average_loss.at(round)).epsilon(1e-4));
  }
  CHECK(number(t.path / "run" / "summary.json", "test_loss") ==
        Approx(number(t.path / "sim" / "summary.json", "test_loss")).epsilon(1e-4));
  CHECK(number(t.path / "run" / "summary.json", "test_loss") ==
        Approx(a.average_loss.rbegin()->second).epsilon(1e-5));
}

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

/// Whether `path` is a non-empty PNG file.
bool is_png(const fs::path& path) {
  const std::string bytes = read_file(path);
  return bytes.size() > 100 && bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0;
}

TEST_CASE("gossip plot draws any run or sweep folder and names what an empty one lacks",
          "[peer][plot]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 1);
  std::ofstream(t.path / "complete.yaml") << "generator: complete\nn: 4\n";
  std::ofstream(cfg, std::ios::app)
      << "compare: {target_accuracy: 0.9, topologies: [topo.yaml, complete.yaml]}\n";
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                         " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);
  const Result sweep = run(bin() + " compare " + cfg.string() + " --quiet --out " +
                           (t.path / "sweep").string());
  INFO(sweep.output);
  REQUIRE(sweep.code == 0);
  for (const char* name : {"accuracy_vs_round.png", "consensus_vs_round.png"})
    fs::remove(t.path / "sweep" / name);  // gossip plot must draw them again

  struct Case {
    const char* dir;
    std::vector<const char*> plots;
  };
  for (const Case& c : {Case{"run", {"accuracy_vs_round", "loss_vs_round", "consensus_vs_round"}},
                        Case{"run/peers/2", {"accuracy_vs_round", "loss_vs_round"}},
                        Case{"sweep", {"accuracy_vs_round", "consensus_vs_round"}}}) {
    INFO(c.dir);
    const Result r = run(bin() + " plot " + (t.path / c.dir).string());
    INFO(r.output);
    if (!have_gnuplot()) {
      WARN("gnuplot is not installed: only the refusal is checked");
      CHECK(r.code == 1);
      CHECK(r.output.find("gnuplot is not installed") != std::string::npos);
      continue;
    }
    REQUIRE(r.code == 0);
    for (const char* plot : c.plots) {
      INFO(plot);
      CHECK(is_png(t.path / c.dir / (std::string(plot) + ".png")));
      CHECK(fs::file_size(t.path / c.dir / (std::string(plot) + ".svg")) > 100);
    }
  }
  // A lone peer's folder has no average model, so no consensus plot.
  CHECK_FALSE(fs::exists(t.path / "run" / "peers" / "2" / "consensus_vs_round.png"));

  fs::create_directories(t.path / "empty");
  const Result empty = run(bin() + " plot " + (t.path / "empty").string());
  INFO(empty.output);
  CHECK(empty.code == 2);
  CHECK(empty.output.find("nothing to plot: no metrics.csv") != std::string::npos);
  const Result missing = run(bin() + " plot " + (t.path / "nowhere").string());
  CHECK(missing.code == 2);
  CHECK(missing.output.find("no such folder") != std::string::npos);
}

TEST_CASE("the peers train on when one of them is killed", "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 5, "dpsgd", 1, 400, "", true, Tls::kKeys);
  // Declared dead once suspected for 2 of the survivors' rounds (not after 5 s, the default).
  set_monitor(cfg, "dead_after_rounds: 2, dead_after_s: 0");
  std::vector<pid_t> pids;
  const std::string exe = bin();
  std::fflush(stdout);
  for (int r = 0; r < 5; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string out = (t.path / "net").string();
      const std::string log = (t.path / named("p", r)).string() + ".log";
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      const std::string rank = std::to_string(r);
      execl(exe.c_str(), "gossip", "peer", cfg.c_str(), "--rank", rank.c_str(), "--out",
            out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  // Let them connect and train a little, then kill peer 2 for good.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(t.path / "net" / "peers" / "2" / "metrics.csv") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pids[2], SIGKILL);
  for (int r = 0; r < 5; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (r == 2) continue;
    const fs::path dir = t.path / "net" / "peers" / std::to_string(r);
    INFO("peer " << r << " log:\n" << read_file(t.path / (named("p", r) + ".log")));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(fs::exists(dir / "summary.json"));
  }
  // Peer 2's neighbours noticed, and their monitors say the ring is now a line: still connected.
  for (int r : {1, 3}) {
    const std::string log = read_file(t.path / (named("p", r) + ".log"));
    INFO(log);
    CHECK(log.find("peers dead: 2; live graph still connected") != std::string::npos);
  }
}

TEST_CASE("gossip run stops every peer and names the one that failed", "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  // Occupy peer 3's port so it cannot listen.
  const int port = test_port_base() + 3;
  const Result r = run("python3 -c \"import socket,subprocess,sys; s=socket.socket(); "
                       "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                       "s.bind(('127.0.0.1'," + std::to_string(port) + ")); s.listen(); "
                       "sys.exit(subprocess.call(sys.argv[1:]))\" " + bin() + " run " +
                       cfg.string() + " --out " + (t.path / "run").string() + " --no-progress");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("peer 3 failed") != std::string::npos);
  CHECK(r.output.find("stopped all peers") != std::string::npos);
}

TEST_CASE("gossip run refuses a disconnected topology and names its components", "[peer]") {
  TempDir t;
  std::ofstream(t.path / "topo.yaml") << "n: 4\nedges: [[0, 1], [2, 3]]\n";
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  std::ofstream(t.path / "topo.yaml") << "n: 4\nedges: [[0, 1], [2, 3]]\n";
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string());
  INFO(r.output);
  CHECK(r.code == 3);
  CHECK(r.output.find("not connected") != std::string::npos);
  CHECK(r.output.find("{0,1} {2,3}") != std::string::npos);
}

TEST_CASE("gossip run refuses weights that do not suit the algorithm before any peer starts",
          "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  // Push-sum weights on an irregular directed graph: columns sum to 1, rows do not.
  std::ofstream(t.path / "topo.yaml")
      << "n: 4\ndirected: true\nedges: [[0, 1], [0, 2], [0, 3], [1, 2], [2, 3], [3, 0]]\n";
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string());
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find(cfg.string() + ":6: gossip.algorithm: dpsgd needs row-stochastic") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
}

TEST_CASE("peers in separate network namespaces train together", "[peer][netns]") {
  if (geteuid() != 0 || run("ip netns list").code != 0) {
    WARN("not root or no `ip netns`: the multi-host test is skipped");
    return;
  }
  const std::string tag = "gsp" + std::to_string(getpid() % 100000);
  const int n = 3;
  struct Namespaces {
    std::string tag;
    int n;
    ~Namespaces() {
      for (int i = 0; i < n; ++i) std::system(("ip netns del " + tag + "h" + std::to_string(i) + " 2>/dev/null").c_str());
      std::system(("ip netns del " + tag + "sw 2>/dev/null").c_str());
    }
  } cleanup{tag, n};
  // A switch namespace with a bridge, and one host namespace per peer linked to it by veth.
  // Addresses are from 198.18.0.0/15 (reserved for network tests) and exist only in these
  // namespaces.
  std::string setup = "set -e; ip netns add " + tag + "sw; ip -n " + tag + "sw link add br0 type bridge; ip -n " + tag + "sw link set br0 up;";
  for (int i = 0; i < n; ++i) {
    const std::string h = tag + "h" + std::to_string(i);
    setup += "ip netns add " + h + "; ip link add v" + tag + std::to_string(i) + " type veth peer name eth0 netns " + h + ";" +
             "ip link set v" + tag + std::to_string(i) + " netns " + tag + "sw;" +
             "ip -n " + tag + "sw link set v" + tag + std::to_string(i) + " master br0 up;" +
             "ip -n " + h + " addr add 198.18.0." + std::to_string(i + 1) + "/24 dev eth0;" +
             "ip -n " + h + " link set eth0 up; ip -n " + h + " link set lo up;";
  }
  const Result s = run("sh -c '" + setup + "'");
  if (s.code != 0) {
    WARN("could not create network namespaces (" << s.output << "): the multi-host test is skipped");
    return;
  }
  TempDir t;
  std::string peers = "peers:\n";
  for (int i = 0; i < n; ++i) peers += "  - 198.18.0." + std::to_string(i + 1) + ":7400\n";
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 2, peers, true, Tls::kKeys);
  std::string cmd;
  for (int i = 0; i < n; ++i)
    cmd += "ip netns exec " + tag + named("h", i) + " " + bin() + " peer " + cfg.string() +
           " --rank " + std::to_string(i) + " --out " + (t.path / named("h", i)).string() +
           " > " + (t.path / (named("h", i) + ".log")).string() + " 2>&1 & ";
  cmd += "wait";
  const Result r = run("sh -c '" + cmd + "'");
  std::string folders;
  for (int i = 0; i < n; ++i) {
    const auto dir = t.path / named("h", i) / "peers" / std::to_string(i);
    INFO("host " << i << " log:\n" << read_file(t.path / (named("h", i) + ".log")));
    REQUIRE(fs::exists(dir / "summary.json"));
    CHECK(number(dir / "summary.json", "test_accuracy") > 0.8);
    CHECK(number(dir / "summary.json", "bytes_sent") > 0);
    folders += " " + (t.path / named("h", i)).string();
  }
  // One folder per machine, merged as after a run without a shared filesystem.
  const Result c = run(bin() + " collect" + folders);
  INFO(c.output);
  CHECK(c.code == 0);
  CHECK(number(t.path / "h0" / "summary.json", "test_accuracy") > 0.8);
  CHECK(hashes(t.path / "h0" / "summary.json").size() == static_cast<std::size_t>(n));
}

TEST_CASE("gossip collect merges peers started one by one into what gossip run writes", "[peer]") {
  TempDir t;
  const int n = 4;
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 2, "", true, Tls::kKeys);
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                         " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);

  SECTION("one run folder") {
    const Result peers = start_peers(cfg, n, [&](int) { return t.path / "out"; });
    INFO(peers.output);
    REQUIRE(peers.code == 0);
    // Every rank wrote its own files, its final parameters among them.
    const auto summary_hashes = [&](int r) {
      return hashes(t.path / "out" / "peers" / std::to_string(r) / "summary.json");
    };
    for (int r = 0; r < n; ++r) {
      const fs::path dir = t.path / "out" / "peers" / std::to_string(r);
      const std::string bytes = read_file(dir / "params.bin");
      REQUIRE(summary_hashes(r).size() == 1u);
      CHECK(gossip::sha256_hex(bytes.data(), bytes.size()) == summary_hashes(r).front());
      CHECK(fs::exists(dir / "events.txt"));
    }
    CHECK_FALSE(fs::exists(t.path / "out" / "summary.json"));

    const Result c = run(bin() + " collect " + (t.path / "out").string());
    INFO(c.output);
    REQUIRE(c.code == 0);
    // The same table, rows, average model and parameters as gossip run.
    CHECK(final_table(c.output).size() == static_cast<std::size_t>(n + 1));
    CHECK(final_table(c.output) == final_table(net.output));
    CHECK(average_rows(t.path / "out" / "metrics.csv") == average_rows(t.path / "run" / "metrics.csv"));
    CHECK(hashes(t.path / "out" / "summary.json") == hashes(t.path / "run" / "summary.json"));
    CHECK(number(t.path / "out" / "summary.json", "test_accuracy") ==
          number(t.path / "run" / "summary.json", "test_accuracy"));
    for (const char* f : {"metrics.csv", "summary.json", "events.jsonl"}) {
      INFO(f);
      CHECK(fs::exists(t.path / "out" / f));
      CHECK(fs::exists(t.path / "run" / f));
    }
    // events.jsonl: each peer's ready and done, as JSON lines.
    const std::string events = read_file(t.path / "out" / "events.jsonl");
    for (int r = 0; r < n; ++r) {
      CHECK(events.find(gossip::cat(R"({"event": "ready", "peer": )", r, ",")) != std::string::npos);
      CHECK(events.find(gossip::cat(R"({"event": "done", "peer": )", r, ",")) != std::string::npos);
    }
  }

  SECTION("a peer that did not finish is merged up to where it got") {
    const Result peers = start_peers(cfg, n, [&](int) { return t.path / "out"; });
    INFO(peers.output);
    REQUIRE(peers.code == 0);
    // Rank 3 as if it had died: its events stop at round 24 of 48, the last line cut short.
    const fs::path events = t.path / "out" / "peers" / "3" / "events.txt";
    std::istringstream in(read_file(events));
    std::string kept, line;
    int evals = 0;
    while (std::getline(in, line) && line.find(" round=24 ") == std::string::npos) {
      kept += line + "\n";
      evals += line.rfind("@gossip eval ", 0) == 0;
    }
    kept += line.substr(0, line.size() / 2);  // round 24's line, torn
    std::ofstream(events, std::ios::trunc) << kept;
    REQUIRE(evals > 0);

    const Result c = run(bin() + " collect " + (t.path / "out").string());
    INFO(c.output);
    CHECK(c.code == 1);
    CHECK(c.output.find("left out a line cut short") != std::string::npos);
    CHECK(c.output.find("peer 3 did not finish") != std::string::npos);
    CHECK(final_table(c.output).at(3) == "3 dead");
    CHECK(read_file(t.path / "out" / "summary.json").find("\"dead_peers\": [3]") != std::string::npos);
    CHECK(read_file(t.path / "out" / "events.jsonl").find(R"({"event": "failed", "peer": 3,)") !=
          std::string::npos);
    // Rank 3's rows are those of the evaluations it reported; the later rounds go on without it.
    int rank3 = 0;
    std::set<std::string> rounds;
    for (const auto& f : metrics_rows(t.path / "out" / "metrics.csv")) {
      REQUIRE(f.size() == 8u);
      rank3 += f[2] == "3";
      if (f[2] == "-1") rounds.insert(f[0]);
    }
    CHECK(rank3 == evals);
    CHECK(rounds.count("48") == 1);
  }

  SECTION("one folder per machine, and folders that do not add up") {
    const Result peers = start_peers(cfg, n, [&](int r) { return t.path / named("m", r / 2); });
    INFO(peers.output);
    REQUIRE(peers.code == 0);
    const std::string m0 = (t.path / "m0").string(), m1 = (t.path / "m1").string();
    const Result c = run(bin() + " collect " + m0 + " " + m1);
    INFO(c.output);
    REQUIRE(c.code == 0);
    CHECK(final_table(c.output) == final_table(net.output));
    CHECK(hashes(t.path / "m0" / "summary.json") == hashes(t.path / "run" / "summary.json"));

    const Result missing = run(bin() + " collect " + m0);
    INFO(missing.output);
    CHECK(missing.code == 2);
    CHECK(missing.output.find("rank(s) 2, 3 of 4 have no folder") != std::string::npos);

    fs::copy(t.path / "m0" / "peers" / "1", t.path / "m1" / "peers" / "1",
             fs::copy_options::recursive);
    const Result twice = run(bin() + " collect " + m0 + " " + m1);
    INFO(twice.output);
    CHECK(twice.code == 2);
    CHECK(twice.output.find("rank 1 is in both") != std::string::npos);
  }
}

TEST_CASE("a run stopped after a checkpoint and resumed ends bit-identical to one never stopped",
          "[peer][resume]") {
  struct Case {
    const char* algorithm;
    const char* topology;
  };
  for (const Case c : {Case{"dpsgd", ""}, Case{"push_sum", "directed: true\nweights: push-sum\n"},
                       Case{"choco, choco: {compress: {kind: top_k, fraction: 0.1}}", ""},
                       // exchanges tagged round * 3 + step: the resumed run's tags go on
                       Case{"choco, choco: {compress: {kind: top_k, fraction: 0.05}, "
                            "gossip_steps: 3, consensus_step: 0.1}, wire: bf16",
                            ""},
                       // at half width all-reduce keeps the last round's common model
                       Case{"allreduce, wire: bf16", ""},
                       // D² keeps its correction, the last mix's change beyond the local step
                       Case{"gradient_tracking", "laziness: 0.1\n"},
                       // DeMo's outer step keeps its anchor, velocity and residual (on the
                       // complete graph, the one it runs on)
                       Case{"local_sgd, outer: {compress: {kind: dct_top_k, fraction: 0.1}}",
                            nullptr},
                       // Streaming DiLoCo's fragment rounds go on where they stopped
                       Case{"local_sgd, overlap: true, outer: {fragments: 3}", ""}}) {
    SECTION(c.algorithm) {
      TempDir t;
      const auto cfg = write_config(t.path, 4, c.algorithm, 1, 2, c.topology ? c.topology : "");
      if (!c.topology) std::ofstream(t.path / "topo.yaml") << "generator: complete\nn: 4\n";
      {
        std::string text = read_file(cfg);
        text.replace(text.find("backend: cpu}"), 13, "backend: cpu, checkpoint_every: 4}");
        std::ofstream(cfg) << text;
      }
      const std::string out = (t.path / "stopped").string();
      const Result whole = run(bin() + " run " + cfg.string() + " --out " +
                               (t.path / "whole").string() + " --no-progress");
      INFO(whole.output);
      REQUIRE(whole.code == 0);
      // Stop every peer after round 22 (checkpoints at 12, 16, 20 and 22 are written and the
      // newest three kept), then damage peer 2's newest: the resume must fall back to 20.
      const Result first = run(bin() + " run " + cfg.string() + " --out " + out +
                               " --no-progress --until-round 22");
      INFO(first.output);
      REQUIRE(first.code == 0);
      CHECK_THAT(first.output, Catch::Contains("stopped after round 22"));
      CHECK_FALSE(fs::exists(fs::path(out) / "summary.json"));
      REQUIRE(fs::exists(fs::path(out) / "peers" / "2" / "checkpoint-22.ckpt"));
      CHECK_FALSE(fs::exists(fs::path(out) / "peers" / "2" / "checkpoint-12.ckpt"));
      fs::resize_file(fs::path(out) / "peers" / "2" / "checkpoint-22.ckpt", 100);
      const std::string ca = read_file(fs::path(out) / "tls" / "ca.pem");
      const std::string cert = read_file(fs::path(out) / "tls" / "peer-3.pem");
      REQUIRE_FALSE(ca.empty());
      const Result resumed = run(bin() + " run --resume " + out + " --no-progress");
      INFO(resumed.output);
      REQUIRE(resumed.code == 0);
      // The resumed run keeps the credentials it has, and says so.
      CHECK_THAT(resumed.output, Catch::Contains("TLS with the run's own CA, kept from " + out +
                                                 "/tls"));
      CHECK_THAT(resumed.output, !Catch::Contains("fresh CA"));
      CHECK(read_file(fs::path(out) / "tls" / "ca.pem") == ca);
      CHECK(read_file(fs::path(out) / "tls" / "peer-3.pem") == cert);
      CHECK_THAT(resumed.output, Catch::Contains("checkpoint-22.ckpt: truncated"));
      CHECK_THAT(resumed.output, Catch::Contains("resuming " + out + " from round 20"));
      CHECK(hashes(fs::path(out) / "summary.json") == hashes(t.path / "whole" / "summary.json"));
      CHECK(hashes(fs::path(out) / "summary.json").size() == 4);
      // The merged record is the unbroken run's: the same evaluation rounds and accuracies.
      auto average_rows = [](const fs::path& csv) {
        std::ifstream in(csv);
        std::string line, rows;
        while (std::getline(in, line)) {
          std::vector<std::string> f;
          std::stringstream s(line);
          for (std::string x; std::getline(s, x, ',');) f.push_back(x);
          if (f.size() > 4 && f[2] == "-1") rows += f[0] + " " + f[4] + "\n";
        }
        return rows;
      };
      CHECK(average_rows(fs::path(out) / "metrics.csv") ==
            average_rows(t.path / "whole" / "metrics.csv"));
      // A finished run is not resumed again.
      const Result again = run(bin() + " run --resume " + out + " --no-progress");
      CHECK(again.code == 2);
      CHECK_THAT(again.output, Catch::Contains("has finished"));
    }
  }
}

TEST_CASE("a resume whose config changed is refused before any peer starts, naming the key",
          "[peer][resume]") {
  TempDir t;
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1, "", true, Tls::kOff);
  const std::string out = (t.path / "run").string();
  const Result first = run(bin() + " run " + cfg.string() + " --out " + out +
                           " --no-progress --until-round 4");
  INFO(first.output);
  REQUIRE(first.code == 0);
  const std::string text = read_file(cfg);
  struct Case {
    std::string from, to, key;
  };
  for (const Case& c : {Case{"layers: [12, 24, 3]", "layers: [12, 20, 3]", "model.layers"},
                        Case{"seed: 5", "seed: 6", "train.seed"}}) {
    INFO(c.key);
    std::string changed = text;
    changed.replace(changed.find(c.from), c.from.size(), c.to);
    std::ofstream(cfg) << changed;
    const Result r = run(bin() + " run --resume " + out + " --no-progress");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.key + " changed since the run started"));
    CHECK_THAT(r.output, Catch::Contains("put " + c.key + " back, or start a new run"));
    CHECK_THAT(r.output, !Catch::Contains("peers on"));  // refused before the run's first line
  }
  // Another graph of the same size: the topology's fingerprint changed.
  std::ofstream(cfg) << text;
  std::ofstream(t.path / "topo.yaml") << "n: 3\nedges: [[0, 1], [1, 2]]\n";
  const Result topo = run(bin() + " run --resume " + out + " --no-progress");
  INFO(topo.output);
  CHECK(topo.code == 2);
  CHECK_THAT(topo.output, Catch::Contains("gossip.topology changed since the run started"));
  // Put back, it resumes and finishes.
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 3\n";
  const Result back = run(bin() + " run --resume " + out + " --no-progress");
  INFO(back.output);
  CHECK(back.code == 0);
  // Every command that writes a folder checks it before its work, not after.
  for (const char* command : {" sim ", " train "}) {
    const Result bad = run(bin() + command + cfg.string() + " --out /proc/gossip-nowhere");
    INFO(command << bad.output);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--out /proc/gossip-nowhere: cannot create"));
    CHECK_THAT(bad.output, !Catch::Contains("spectral gap"));
    CHECK_THAT(bad.output, !Catch::Contains("epoch"));
  }
  // A bad entry of a --faults FILE is named by that file and its line, not the config's.
  std::ofstream(t.path / "bad-faults.yaml") << "faults:\n  - {round: 2, pause: [0], seconds: 1}\n"
                                            << "  - {round: 5, kill: [99]}\n";
  for (const char* command : {" sim ", " run "}) {
    const Result bad = run(bin() + command + cfg.string() + " --out " + (t.path / "f").string() +
                           " --faults " + (t.path / "bad-faults.yaml").string());
    INFO(command << bad.output);
    CHECK(bad.code == 2);
    CHECK_THAT(bad.output, Catch::Contains("bad-faults.yaml:3: faults[1].kill: peer 99 is not in"));
  }
}

namespace {

/// The pids of the processes whose command line names `needle` (not this test's own).
std::vector<pid_t> processes_naming(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    const pid_t pid = std::stoi(name);
    if (pid != getpid() && cmdline.find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

}  // namespace

TEST_CASE("gossip run refuses, at once, more peers than this machine holds; with --force a "
          "SIGTERM while they start ends every child", "[peer][launcher]") {
  TempDir t;
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1, "", true, Tls::kOff);
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 10000\n";
  const std::string out = (t.path / "huge").string();
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run(bin() + " run " + cfg.string() + " --out " + out + " --no-progress");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(took < 1.0);
  CHECK_THAT(r.output, Catch::Contains("refusing to start 10000 peers"));
  CHECK_THAT(r.output, Catch::Contains("10000 peer processes on"));
  CHECK_THAT(r.output, Catch::Contains("gossip sim"));
  CHECK_THAT(r.output, Catch::Contains("--peers-per-process N"));
  CHECK_THAT(r.output, Catch::Contains("--force"));
  CHECK_FALSE(fs::exists(fs::path(out) / "peers"));
  // --force on 2,000 peers (enough samples for each): SIGTERM once the start is under way.
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 2000\n";
  {
    std::string text = read_file(cfg);
    text.replace(text.find("train: 1536"), 11, "train: 4000");
    std::ofstream(cfg) << text;
  }
  const std::string forced = (t.path / "forced").string();
  std::fflush(stdout);
  const pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    std::freopen((t.path / "forced.log").c_str(), "w", stdout);
    std::freopen((t.path / "forced.log").c_str(), "a", stderr);
    execl(bin().c_str(), "gossip", "run", cfg.c_str(), "--out", forced.c_str(), "--no-progress",
          "--force", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait (bounded) until it has started some peers, then ask it to stop.
  for (int i = 0; i < 300 && processes_naming(forced + " --events-fd").size() < 20; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto started = processes_naming(forced + " --events-fd").size();
  CHECK(started >= 1);
  const auto signalled = std::chrono::steady_clock::now();
  REQUIRE(kill(launcher, SIGTERM) == 0);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(launcher, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - signalled < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (done == 0) {
    kill(launcher, SIGKILL);
    waitpid(launcher, &status, 0);
  }
  const double stop_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  INFO(read_file(t.path / "forced.log"));
  INFO("peers started before the signal: " << started << ", stopped in " << stop_s << " s");
  CHECK(done == launcher);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(stop_s < 5.0);
  CHECK(processes_naming(forced).empty());
  CHECK(fs::exists(fs::path(forced) / "peers" / "0"));
  CHECK_FALSE(fs::exists(fs::path(forced) / "peers" / "1999"));  // the start was cut short
  for (const pid_t p : processes_naming(forced)) kill(p, SIGKILL);
}

TEST_CASE("a peer started by mpirun or srun refuses a world size other than the topology's",
          "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1);
  struct Case {
    const char* env;
    const char* says;
  };
  for (const Case c : {Case{"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4",
                            "mpirun started 4 ranks (OMPI_COMM_WORLD_SIZE=4)"},
                       Case{"SLURM_PROCID=0 SLURM_STEP_ID=0 SLURM_NTASKS=8",
                            "srun started 8 ranks (SLURM_NTASKS=8)"},
                       Case{"PMI_RANK=2 PMI_SIZE=3", "the MPI launcher started 3 ranks (PMI_SIZE=3)"}}) {
    INFO(c.env);
    const Result r = run(std::string("env -u GOSSIP_RANK ") + c.env + " " + bin() + " peer " +
                         cfg.string() + " --out " + (t.path / "out").string());
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(gossip::cat(c.says, " but the topology ")) != std::string::npos);
    CHECK(r.output.find("has 6 peers: start 6 ranks") != std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "out" / "peers"));
  }
}

TEST_CASE("Slurm's node lists and tasks per node expand as srun places ranks", "[peer][launch]") {
  using gossip::expand_slurm_hostlist;
  using V = std::vector<std::string>;
  CHECK(expand_slurm_hostlist("vm", "L") == V{"vm"});
  CHECK(expand_slurm_hostlist("node[01-03,7],login1", "L") ==
        V{"node01", "node02", "node03", "node7", "login1"});
  CHECK(expand_slurm_hostlist("r[1-2]-n[8-9]", "L") == V{"r1-n8", "r1-n9", "r2-n8", "r2-n9"});
  CHECK(expand_slurm_hostlist("gpu[098-101]", "L") == V{"gpu098", "gpu099", "gpu100", "gpu101"});
  for (const char* bad : {"node[1-", "node1]", "a,,b", "node[3-1]", "node[x]", "node[1,]", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(expand_slurm_hostlist(bad, "SLURM_JOB_NODELIST"),
                      Catch::StartsWith("SLURM_JOB_NODELIST: "));
  }
  CHECK(gossip::expand_slurm_tasks_per_node("2(x3),1", "T") == std::vector<int>{2, 2, 2, 1});
  CHECK(gossip::expand_slurm_tasks_per_node("4", "T") == std::vector<int>{4});
  for (const char* bad : {"0", "2(x)", "x", "2(x3", "1,", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(gossip::expand_slurm_tasks_per_node(bad, "T"), gossip::InputError);
  }
}

TEST_CASE("an MPI hostfile places ranks by slot, as mpirun does", "[peer][launch]") {
  const auto hosts = gossip::parse_hostfile(
      "# two machines\nnode-a slots=2\n\nnode-b slots=1 max_slots=4  # small\nnode-c slots=2\n",
      "hosts");
  REQUIRE(hosts.size() == 3u);
  CHECK(gossip::hosts_by_slot(hosts, 4, "hosts") ==
        std::vector<std::string>{"node-a", "node-a", "node-b", "node-c"});
  CHECK_THROWS_WITH(gossip::hosts_by_slot(hosts, 6, "hosts"), "hosts has 5 slots for 6 ranks");
  CHECK_THROWS_WITH(gossip::parse_hostfile("a slots=1\nb\n", "hosts"),
                    Catch::StartsWith("hosts:2: host 'b' has no slots=N"));
  CHECK_THROWS_WITH(gossip::parse_hostfile("a slots=0\n", "hosts"),
                    Catch::StartsWith("hosts:1: slots=0"));
  CHECK_THROWS_WITH(gossip::parse_hostfile("a cpus=2\n", "hosts"),
                    Catch::StartsWith("hosts:1: unknown field 'cpus'"));
  CHECK_THROWS_WITH(gossip::parse_hostfile("# nothing\n", "hosts"), "hosts: no hosts");
}

TEST_CASE("rank, world size, job and hosts come from the launcher's variables", "[peer][launch]") {
  SECTION("mpirun, also inside a Slurm allocation") {
    LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                     {"OMPI_MCA_ess_base_jobid", "1902247937"}, {"SLURM_PROCID", "0"}});
    const auto l = gossip::detect_launch(std::nullopt);
    CHECK(l.rank == 3);
    CHECK(l.rank_source == "OMPI_COMM_WORLD_RANK");
    CHECK(l.world_size == 8);
    CHECK(l.job_id == 1902247937u);
    CHECK(l.hosts.empty());
  }
  SECTION("an srun task, two tasks on each of two nodes") {
    LauncherEnv env({{"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "4"},
                     {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_NODELIST", "n[1-2]"},
                     {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}, {"SLURMD_NODENAME", "n2"}});
    const auto l = gossip::detect_launch(std::nullopt);
    CHECK(l.rank == 2);
    CHECK(l.rank_source == "SLURM_PROCID");
    CHECK(l.world_size == 4);
    CHECK(l.job_id == 77u);
    CHECK(l.hosts == std::vector<std::string>{"n1", "n1", "n2", "n2"});
    CHECK(l.node == "n2");
  }
  SECTION("the batch script itself is no srun task") {
    LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"GOSSIP_RANK", "1"}});
    const auto l = gossip::detect_launch(std::nullopt);
    CHECK(l.rank == 1);
    CHECK_FALSE(l.world_size.has_value());
  }
  SECTION("an MPI launcher of its own inside a Slurm allocation") {
    LauncherEnv env({{"SLURM_PROCID", "0"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"},
                     {"PMI_RANK", "5"}, {"PMI_SIZE", "8"}});
    const auto l = gossip::detect_launch(std::nullopt);
    CHECK(l.rank == 5);
    CHECK(l.world_size == 8);
    CHECK(l.hosts.empty());
  }
  SECTION("a Kubernetes Indexed Job, and --rank over everything") {
    LauncherEnv env({{"JOB_COMPLETION_INDEX", "6"}, {"PMI_SIZE", "1"}});
    CHECK(gossip::detect_launch(std::nullopt).rank == 6);
    CHECK(gossip::detect_launch(2).rank == 2);
    CHECK(gossip::detect_launch(2).rank_source == "--rank");
  }
  SECTION("a malformed variable is an error that names it") {
    LauncherEnv env({{"OMPI_COMM_WORLD_RANK", "two"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    CHECK_THROWS_WITH(gossip::detect_launch(std::nullopt),
                      Catch::StartsWith("OMPI_COMM_WORLD_RANK: expected a rank"));
  }
}

TEST_CASE("a launch that does not fit the topology is refused on every rank", "[peer][launch]") {
  const gossip::Topology topo = ring(4);
  gossip::Launch l;
  l.rank = 1;
  l.world_size = 2;
  l.world_size_source = "OMPI_COMM_WORLD_SIZE=2";
  l.launcher = "mpirun";
  CHECK_THROWS_WITH(gossip::check_launch(l, topo, "ring.yaml"),
                    "mpirun started 2 ranks (OMPI_COMM_WORLD_SIZE=2) but the topology ring.yaml "
                    "has 4 peers: start 4 ranks, or give a topology of 2 peers (--topology FILE)");
  l.world_size = 4;
  CHECK_NOTHROW(gossip::check_launch(l, topo, "ring.yaml"));
  l.hosts = {"n1", "n1", "n2", "n2"};
  l.hosts_source = "SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE";
  l.node = "n1";
  CHECK_NOTHROW(gossip::check_launch(l, topo, "ring.yaml"));
  l.node = "n2";  // srun --distribution=cyclic would put rank 1 here
  CHECK_THROWS_WITH(gossip::check_launch(l, topo, "ring.yaml"),
                    Catch::StartsWith("rank 1 runs on node n2 but SLURM_STEP_NODELIST"));
}

TEST_CASE("ports move by the job, and peers listen on all interfaces for a host name",
          "[peer][launch]") {
  using gossip::job_base_port;
  CHECK(job_base_port(29500, 8, std::nullopt) == 29500);
  // Blocks of 8 ports from 29500 below 32768: (32768 - 29500) / 8 = 408 of them.
  CHECK(job_base_port(29500, 8, 5) == 29500 + 5 * 8);
  CHECK(job_base_port(29500, 8, 408) == 29500);
  CHECK(job_base_port(29500, 8, 409) == 29508);
  for (std::uint64_t job = 0; job < 2000; ++job) {
    const int p = job_base_port(29500, 8, job);
    CHECK((p >= 29500 && p + 8 <= 32768 && (p - 29500) % 8 == 0));
    const int q = job_base_port(60000, 100, job);  // no room below 32768: up to 65535
    CHECK((q >= 60000 && q + 100 <= 65536));
  }
  // Two consecutive jobs on one node never share a port.
  CHECK(job_base_port(29500, 8, 1234) + 8 <= job_base_port(29500, 8, 1235));

  gossip::RunConfig config;
  config.net.base_port = 30000;
  gossip::Launch l;
  l.job_id = 3;
  l.hosts = {"n1", "n1", "n2", "n2"};
  CHECK(gossip::peer_addresses(config, ring(4), l) ==
        std::vector<std::string>{"n1:30012", "n1:30013", "n2:30014", "n2:30015"});

  CHECK(gossip::listen_address("127.0.0.1:7100") == "127.0.0.1:7100");
  CHECK(gossip::listen_address("198.18.0.2:7100") == "198.18.0.2:7100");
  CHECK(gossip::listen_address("[::1]:7100") == "[::1]:7100");
  CHECK(gossip::listen_address("gossip-3.gossip:7100") == "0.0.0.0:7100");
  CHECK(gossip::listen_address("node07:29500") == "0.0.0.0:29500");
  // net.bind: behind a NAT or in a container, the address the neighbours dial is not bound.
  CHECK(gossip::listen_address("203.0.113.5:40000", "0.0.0.0") == "0.0.0.0:40000");
  CHECK(gossip::listen_address("203.0.113.5:40000", "10.0.0.7:29500") == "10.0.0.7:29500");
  CHECK(gossip::listen_address("gossip-3.gossip:7100", "[::]") == "[::]:7100");
  CHECK(gossip::listen_address("203.0.113.5:40000", "[::1]:29500") == "[::1]:29500");

}
TEST_CASE("without credentials a lone peer stops and says how to make them; off is a warning",
          "[peer][tls]") {
  TempDir t;
  const auto cfg = write_config(t.path, 3, "dpsgd", 1);
  const Result alone = run(bin() + " peer " + cfg.string() + " --rank 0 --out " +
                           (t.path / "alone").string());
  INFO(alone.output);
  CHECK(alone.code == 2);
  CHECK(alone.output.find("this peer has no TLS credentials") != std::string::npos);
  CHECK(alone.output.find("gossip keys init DIR --config") != std::string::npos);

  const auto off = write_config(t.path, 3, "dpsgd", 1, 2, "", true, Tls::kOff);
  const Result r = run(bin() + " run " + off.string() + " --out " + (t.path / "run").string() +
                       " --no-progress");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("TLS off (net.tls: off)") != std::string::npos);
  for (int p = 0; p < 3; ++p) {
    const std::string log = read_file(t.path / "run" / "peers" / std::to_string(p) / "peer.log");
    INFO(log);
    CHECK(log.find("WARNING: TLS is off (net.tls: off)") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(t.path / "run" / "tls"));
}

namespace {

/// A plain TCP connection to 127.0.0.1:port (-1 when refused), with 5 s read/write timeouts.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(gossip::cat("/proc/", pid, "/fd"), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

long status_kb(pid_t pid, const std::string& field) {
  std::ifstream f(gossip::cat("/proc/", pid, "/status"));
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

/// Waits (at most 30 s) until `log` contains `needle`.
bool wait_for_line(const fs::path& log, const std::string& needle) {
  for (int i = 0; i < 600; ++i) {
    if (read_file(log).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// One intruder: connects with `creds` over TLS; if its TLS handshake completes, says hello as
/// `claimed_rank` and sends a few params frames of 0.5 (what a forger would mix in). Returns
/// true when the peer closed on it without a hello-ack.
bool intrude(int port, const gossip::test::ClientCredentials& creds, int claimed_rank,
             const gossip::HandshakeInfo& info, std::size_t params) {
  using namespace gossip;
  const int fd = connect_to(port);
  REQUIRE(fd >= 0);
  bool refused = true;
  {
    test::TlsClient tls(fd, creds);
    if (tls.ok()) {
      const auto hello = wire::encode_frame(
          wire::FrameType::kHello, static_cast<std::uint32_t>(claimed_rank), 0,
          wire::encode_hello(wire::Hello{wire::kVersion, claimed_rank, info, std::nullopt}));
      tls.write(hello.data(), hello.size());
      std::vector<std::byte> payload(wire::kWeightBytes + params * sizeof(float));
      const std::vector<float> forged(params, 0.5f);
      const double w = 1.0;
      std::memcpy(payload.data(), &w, sizeof w);
      std::memcpy(payload.data() + wire::kWeightBytes, forged.data(), params * sizeof(float));
      for (int round = 0; round < 5; ++round) {  // bounded
        const auto frame = wire::encode_frame(wire::FrameType::kParams,
                                              static_cast<std::uint32_t>(claimed_rank), round,
                                              payload);
        if (!tls.write(frame.data(), frame.size())) break;
      }
      // Whatever comes back must not be a hello-ack (an error frame, an alert, or a close).
      std::vector<std::byte> head(wire::kHeaderBytes);
      long got = 0;
      while (got < static_cast<long>(head.size())) {
        const long k = tls.read(head.data() + got, head.size() - got);
        if (k <= 0) break;
        got += k;
      }
      if (got == static_cast<long>(head.size())) {
        const auto h = wire::decode_header(head, 1 << 20);
        refused = !h || h.value->type != wire::FrameType::kHelloAck;
      }
    }
  }
  ::close(fd);
  return refused;
}

}  // namespace

TEST_CASE("intruders and 500 idle connections are refused; the run ends as if none had come",
          "[peer][tls]") {
  using namespace gossip;
  TempDir t;
  const int n = 4;
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 4, "", false, Tls::kKeys);
  // The reference: the same run with nobody knocking.
  const Result ref = run(bin() + " run " + cfg.string() + " --out " + (t.path / "ref").string() +
                         " --no-progress");
  INFO(ref.output);
  REQUIRE(ref.code == 0);
  const auto want = hashes(t.path / "ref" / "summary.json");
  REQUIRE(want.size() == static_cast<std::size_t>(n));

  // Ranks 1..3 start; rank 1 waits for rank 0 (the lower rank dials), which the test starts
  // only once the intruders are done: they meet a live peer with rank 0's slot empty.
  std::vector<pid_t> pids(n, -1);
  for (int r = 1; r < n; ++r) pids[r] = start_peer(cfg, r, t.path / named("p", r));
  const fs::path log1 = t.path / "p1.log";
  REQUIRE(wait_for_line(log1, "peer 2 (127.0.0.1:"));  // rank 1 dialled rank 2: it is up
  const int port = test_port_base() + 1;
  const std::size_t fds_before = open_fds(pids[1]);
  const long rss_before = status_kb(pids[1], "VmRSS");

  // The intruders' credentials: another CA's certificate for rank 0, and an expired one from
  // the run's own CA; the run's real certificate of rank 2 is the third.
  const fs::path keys = t.path / "keys";
  const CertificateAuthority run_ca = CertificateAuthority::load((keys / "ca.pem").string(),
                                                                 (keys / "ca.key").string());
  const CertificateAuthority other_ca("test", 1);
  other_ca.issue("test", 0, (t.path / "other.pem").string(), (t.path / "other.key").string(),
                 -std::chrono::hours(1), std::chrono::hours(24));
  run_ca.issue("test", 0, (t.path / "old.pem").string(), (t.path / "old.key").string(),
               -std::chrono::hours(48), -std::chrono::hours(24));
  const std::string ca = (keys / "ca.pem").string();
  HandshakeInfo info;  // what rank 1 expects, but the fingerprints do not matter: all refused
  info.run_id = "test";
  struct Intruder {
    const char* what;
    test::ClientCredentials creds;
    int claims;
    const char* log_line;
  };
  const std::vector<Intruder> intruders{
      {"no certificate", {ca, "", ""}, 0, "TLS handshake failed: peer did not return a certificate"},
      {"another CA's certificate", {ca, (t.path / "other.pem").string(), (t.path / "other.key").string()},
       0, "certificate verify failed (unable to get local issuer certificate)"},
      {"rank 2's certificate claiming rank 0",
       {ca, (keys / "peer-2.pem").string(), (keys / "peer-2.key").string()}, 0,
       "refused: hello claims rank 0, but its certificate is for rank 2"},
      {"an expired certificate", {ca, (t.path / "old.pem").string(), (t.path / "old.key").string()},
       0, "certificate verify failed (certificate has expired)"},
  };
  for (const auto& i : intruders) {
    INFO(i.what);
    CHECK(intrude(port, i.creds, i.claims, info, 12 * 24 + 24 + 24 * 3 + 3));
    CHECK(wait_for_line(log1, i.log_line));
  }

  // 500 connections that open and send nothing.
  std::vector<int> idle;
  for (int k = 0; k < 500; ++k)
    if (const int fd = connect_to(port); fd >= 0) idle.push_back(fd);
  CHECK(idle.size() == 500u);
  CHECK(wait_for_line(log1, "connections have not finished their handshake (the limit)"));
  const long rss_during = status_kb(pids[1], "VmRSS");
  for (int fd : idle) ::close(fd);
  // Every descriptor the peer opened for them is closed again.
  std::size_t fds_after = 0;
  for (int i = 0; i < 200 && (fds_after = open_fds(pids[1])) != fds_before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(fds_after == fds_before);
  INFO("VmRSS " << rss_before << " kB before, " << rss_during << " kB with 500 idle connections");
  CHECK(rss_during - rss_before < 16 * 1024);

  pids[0] = start_peer(cfg, 0, t.path / named("p", 0));
  std::vector<std::string> got;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    INFO("peer " << r << " log:\n" << read_file(t.path / (named("p", r) + ".log")));
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    const auto h = hashes(t.path / named("p", r) / "peers" / std::to_string(r) / "summary.json");
    REQUIRE(h.size() == 1u);
    got.push_back(h[0]);
  }
  // Nothing any of them sent reached the mixing: every peer ends bit-identical to the reference.
  CHECK(got == want);
  // And the refusals did not flood the log: a burst, then about one a second.
  const std::string log = read_file(log1);
  std::size_t refusals = 0;
  for (auto at = log.find("refused"); at != std::string::npos; at = log.find("refused", at + 1))
    ++refusals;
  INFO(log);
  CHECK(refusals < 40);
  CHECK(log.find("more refusals") != std::string::npos);
}

TEST_CASE("gossip run carries out a fault schedule: a killed peer is not a failure",
          "[peer][faults]") {
  TempDir t;
  const auto cfg = write_config(t.path, 5, "dpsgd", 1, 3);
  set_monitor(cfg, "dead_after_rounds: 1, dead_after_s: 0");
  std::ofstream(cfg, std::ios::app) << "faults:\n"
                                    << "  - {round: 10, kill: [2]}\n"
                                    << "  - {round: 20, pause: [4], seconds: 1}\n";
  const std::string out = (t.path / "run").string();
  const Result r = run(bin() + " run " + cfg.string() + " --out " + out + " --no-progress");
  INFO(r.output);
  CHECK(r.code == 0);  // the schedule was carried out and the survivors finished
  CHECK_THAT(r.output, Catch::Contains("fault schedule at round 10: kill peer 2"));
  CHECK_THAT(r.output, Catch::Contains("fault schedule at round 20: pause peer 4 for 1 s"));
  CHECK_THAT(r.output, Catch::Contains("peer 4 resumed"));
  const std::string events = read_file(fs::path(out) / "events.jsonl");
  CHECK_THAT(events, Catch::Contains("\"event\": \"fault\""));
  CHECK_THAT(events, Catch::Contains("\"action\": \"kill\", \"peers\": [2]"));
  const std::string summary = read_file(fs::path(out) / "summary.json");
  CHECK_THAT(summary, Catch::Contains("\"dead_peers\": [2]"));
  // Peer 2's neighbours left it out of mixing; the ring without it is a line, still connected.
  for (int p : {1, 3}) {
    const std::string log = read_file(fs::path(out) / "peers" / std::to_string(p) / "peer.log");
    INFO(log);
    CHECK(log.find("peers dead: 2; live graph still connected") != std::string::npos);
  }
  // A schedule naming a peer the topology does not have is refused before anything starts.
  std::ofstream(cfg, std::ios::app) << "  - {round: 5, kill: [9]}\n";
  const Result bad = run(bin() + " run " + cfg.string() + " --out " + (t.path / "bad").string());
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("peer 9 is not in the topology's 0..4"));
}

namespace {

/// An 8-peer ring over a larger synthetic set (about 1 ms a round here, thousands of rounds), so
/// a restarted process has time to rejoin while the others train.
fs::path write_fault_config(const fs::path& dir, int n, double epochs, const std::string& monitor,
                            const std::string& faults) {
  std::ofstream(dir / "topo.yaml") << "generator: ring\nn: " << n << "\n";
  std::ofstream(dir / "c.yaml")
      << "data:\n  synthetic: {train: 16384, test: 384, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 24, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: " << epochs << ", batch: 16, seed: 5, backend: cpu}\n"
      << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1}\n"
      << "monitor: {round_timeout_s: 5, " << monitor << "}\n"
      << "sim: {step_ms: 1}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20}\n"
      << "faults:\n" << faults;
  return dir / "c.yaml";
}

/// `gossip sim` and `gossip run` of the config `cfg` into DIR/sim and DIR/run; both must end
/// with exit 0. Returns the run's result.
Result sim_and_run(const fs::path& cfg, const fs::path& dir) {
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (dir / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (dir / "run").string() +
                         " --no-progress");
  INFO(net.output);
  REQUIRE(net.code == 0);
  return net;
}

/// Round of the line "round N: nothing from peer P by the deadline" lines in a peer log.
std::vector<long> deadline_misses(const std::string& log) {
  std::vector<long> rounds;
  const std::regex re("round (\\d+): nothing from peer \\d+ by the deadline");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it)
    rounds.push_back(std::stol((*it)[1]));
  return rounds;
}

}  // namespace

TEST_CASE("every survivor sees the partition when peers 2 and 6 of a ring die, and its healing "
          "when 2 is restarted", "[peer][faults][membership]") {
  TempDir t;
  const int R = 100, R2 = 300;
  std::ostringstream faults;
  faults << "  - {round: " << R << ", kill: [2, 6]}\n  - {round: " << R2 << ", restart: [2]}\n";
  const auto cfg = write_fault_config(t.path, 8, 60, "dead_after_rounds: 1, dead_after_s: 0",
                                      faults.str());
  const fs::path out = t.path / "run";
  const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() + " --no-progress");
  INFO(r.output);
  REQUIRE(r.code == 0);  // the schedule was carried out and the survivors finished
  const auto events = membership_events(out / "events.jsonl");
  for (int p : {0, 1, 3, 4, 5, 7}) {
    INFO("peer " << p);
    const auto partition = std::find_if(events.begin(), events.end(), [&](const Membership& e) {
      return e.peer == p && e.event == "partition";
    });
    REQUIRE(partition != events.end());
    // A death a peer hears of is a suspicion until its own timer (one round here) confirms it:
    // a round or two for each hop from the dead peer's neighbours.
    CHECK(partition->round <= R + 10);
    CHECK(partition->components == "[[0, 1, 7], [3, 4, 5]]");
    CHECK(partition->my_component == (p == 0 || p == 1 || p == 7 ? "[0, 1, 7]" : "[3, 4, 5]"));
    const auto healed = std::find_if(partition, events.end(), [&](const Membership& e) {
      return e.peer == p && e.event == "healed";
    });
    REQUIRE(healed != events.end());
    CHECK(healed->components == "[[0, 1, 2, 3, 4, 5, 7]]");
    const auto rejoin = std::find_if(events.begin(), events.end(), [&](const Membership& e) {
      return e.peer == p && e.event == "rejoin" && e.subject == 2;
    });
    CHECK(rejoin != events.end());
    // Back to normal round time within a few rounds of the rejoin: at most one round waited
    // out its deadline (the one the restarted peer's catching up may cost).
    const std::string log = read_file(out / "peers" / std::to_string(p) / "peer.log");
    long late = 0;
    for (long round : deadline_misses(log)) late += rejoin != events.end() && round > rejoin->round;
    CHECK(late <= 1);
  }
  const std::string summary = read_file(out / "summary.json");
  CHECK_THAT(summary, Catch::Contains("\"partitioned\": false"));
  CHECK_THAT(summary, Catch::Contains("\"alive_at_end\": [true, true, true, true, true, true, false, true]"));
  CHECK(number(out / "summary.json", "deaths") == 2);
  CHECK(number(out / "summary.json", "rejoins") == 1);
  CHECK_THAT(r.output, Catch::Contains("fault schedule at round 300: restart peer 2"));
}

TEST_CASE("a peer started again with no live neighbour trains alone and finishes; the run ends "
          "with every fault in order", "[peer][faults]") {
  TempDir t;
  // Ring of 8: peer 1 dies, then both its neighbours; then 1 is started again with nobody to
  // take the network's round from. It must train alone from the round of its restart (its own
  // kill at round 30 is past) and finish; the others finish without waiting for it.
  const auto cfg = write_fault_config(
      t.path, 8, 4, "dead_after_rounds: 3, dead_after_s: 0",
      "  - {round: 30, kill: [1]}\n  - {round: 50, kill: [0, 2]}\n  - {round: 120, restart: [1]}\n");
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                       " --no-progress --keep-going");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(took < 20.0);  // no wait of net.connect_timeout_s (20 s) for the dead neighbours
  const std::string log = read_file(t.path / "run" / "peers" / "1" / "peer.log");
  CHECK_THAT(log, Catch::Contains("started again with no live neighbour: it trains alone from "
                                  "round 1"));
  const std::string summary = read_file(t.path / "run" / "summary.json");
  CHECK_THAT(summary, Catch::Contains(
                          "\"alive_at_end\": [false, true, false, true, true, true, true, true]"));
  CHECK_THAT(summary, Catch::Contains("\"components\": [[1], [3, 4, 5, 6, 7]]"));
  CHECK(number(t.path / "run" / "peers" / "1" / "summary.json", "rounds") == 512);
  std::vector<std::string> faults;
  std::ifstream events(t.path / "run" / "events.jsonl");
  for (std::string line; std::getline(events, line);)
    if (line.find("\"event\": \"fault\"") != std::string::npos)
      faults.push_back(line.substr(line.find("\"round\"")));
  CHECK(faults == std::vector<std::string>{"\"round\": 30, \"action\": \"kill\", \"peers\": [1]}",
                                           "\"round\": 50, \"action\": \"kill\", \"peers\": [0, 2]}",
                                           "\"round\": 120, \"action\": \"restart\", \"peers\": [1]}"});
}

TEST_CASE("chaos: 40 seeded random faults on 16 real peers; the run ends and its record is the "
          "schedule's truth", "[peer][faults][chaos]") {
  TempDir t;
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 16\n";
  std::ofstream(t.path / "c.yaml")
      << "data:\n  synthetic: {train: 16384, test: 256, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 16, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: 2, batch: 16, seed: 5, backend: cpu, evals_per_epoch: 1}\n"
      << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1}\n"
      << "monitor: {round_timeout_s: 5, dead_after_rounds: 3, dead_after_s: 0}\n"
      << "net: {run_id: chaos, base_port: " << test_port_base() << ", connect_timeout_s: 20, "
      << "tls: off}\n";
  const std::string cfg = (t.path / "c.yaml").string(), faults = (t.path / "f.yaml").string();
  const Result made = run(bin() + " chaos " + cfg + " --faults 40 --seed 11 --max-pause 0.5 " +
                          "--attacks 4 --out " + faults);
  INFO(made.output);
  REQUIRE(made.code == 0);
  {  // the same seed writes the same schedule
    const Result again = run(bin() + " chaos " + cfg + " --faults 40 --seed 11 --max-pause 0.5 --attacks 4");
    CHECK(again.output.find(read_file(faults).substr(0, 200)) != std::string::npos);  // seeded
  }
  const std::string out = (t.path / "run").string();
  const Result r = run(bin() + " run " + cfg + " --out " + out + " --faults " + faults +
                       " --keep-going --no-progress");
  INFO(read_file(faults));
  INFO(r.output);
  REQUIRE(r.code == 0);
  // The truth, from the schedule alone (gossip/faults.hpp reads the same file).
  std::ofstream(t.path / "both.yaml") << read_file(t.path / "c.yaml") + read_file(faults);
  const gossip::RunConfig both = gossip::load_config((t.path / "both.yaml").string());
  REQUIRE(both.faults.size() == 44u);
  CHECK(std::any_of(both.faults.begin(), both.faults.end(), [](const gossip::Fault& f) {
    return f.action == gossip::FaultAction::kAttack;
  }));
  const gossip::ScheduleOutcome truth = gossip::schedule_outcome(both.faults);
  std::string alive = "\"alive_at_end\": [";
  for (int p = 0; p < 16; ++p)
    alive += gossip::cat(p ? ", " : "", std::binary_search(truth.dead_at_end.begin(),
                                                           truth.dead_at_end.end(), p)
                                            ? "false" : "true");
  const std::string summary = read_file(fs::path(out) / "summary.json");
  CHECK_THAT(summary, Catch::Contains(alive + "]"));
  // The live graph at the end: what the schedule leaves. The run's record may split it further
  // only along links it lists as missing (a peer started again so late that a neighbour had
  // finished before it came back never mixes with it again): it never joins what the schedule
  // separates, and it names every link it leaves out.
  const gossip::LiveGraph end = gossip::live_graph(gossip::load_topology((t.path / "topo.yaml").string()),
                                                   truth.dead_at_end);
  std::vector<std::vector<int>> recorded_parts;
  {
    const auto from = summary.find("\"components\": [");
    REQUIRE(from != std::string::npos);
    const std::string rest = summary.substr(from + 15, summary.find("]]", from) + 2 - from - 15);
    const std::regex part("\\[([0-9, ]*)\\]");
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), part); it != std::sregex_iterator(); ++it) {
      std::vector<int> c;
      std::stringstream ss((*it)[1].str());
      for (std::string x; std::getline(ss, x, ',');) c.push_back(std::stoi(x));
      recorded_parts.push_back(c);
    }
  }
  const bool recorded_connected = summary.find("\n  \"connected\": true") != std::string::npos;
  CHECK((!recorded_connected || end.connected));
  if (recorded_connected) CHECK(recorded_parts.empty());
  for (const auto& c : recorded_parts) {
    INFO("recorded component " << gossip::format_peers(c));
    CHECK(std::any_of(end.components.begin(), end.components.end(), [&](const auto& whole) {
      return std::includes(whole.begin(), whole.end(), c.begin(), c.end());
    }));
  }
  if (recorded_parts.size() > std::max<std::size_t>(end.components.size(), 1))
    CHECK_THAT(summary, Catch::Contains("\"missing_links\": [{\"peers\": "));
  // Every fault, in the schedule's written order, at its round.
  std::vector<std::string> expected, recorded;
  for (const gossip::Fault& f : both.faults) {
    std::vector<int> peers = f.peers;
    std::string action = gossip::fault_action_name(f.action);
    if (f.action == gossip::FaultAction::kCut) {
      peers = {f.links[0].first, f.links[0].second};
      action = gossip::cat("cut until round ", f.to_round);
    }
    if (f.action == gossip::FaultAction::kAttack)
      action = gossip::cat("attack ", gossip::describe_attack(f), " until round ", f.to_round);
    std::string line = gossip::cat("\"round\": ", f.round, ", \"action\": \"", action,
                                   "\", \"peers\": [");
    for (std::size_t i = 0; i < peers.size(); ++i) line += gossip::cat(i ? ", " : "", peers[i]);
    expected.push_back(line + "]");
  }
  std::ifstream events(fs::path(out) / "events.jsonl");
  for (std::string line; std::getline(events, line);)
    if (line.find("\"event\": \"fault\"") != std::string::npos) {
      const auto from = line.find("\"round\"");
      recorded.push_back(line.substr(from, line.find(']', from) + 1 - from));
    }
  CHECK(recorded == expected);
  // The live graph as the launcher carried the schedule out (the processes running or finished,
  // without those it killed; the links cut then): each change at its round, as the schedule
  // alone gives it.
  const auto rounds = static_cast<std::int64_t>(number(fs::path(out) / "summary.json", "rounds"));
  const auto untimed = [](std::string line) {  // without "time_s": when it was noted
    return std::regex_replace(line, std::regex("\"time_s\": [^,]*, "), "");
  };
  std::vector<std::string> graphs, truth_graphs;
  for (const auto& c : gossip::schedule_live_graphs(
           gossip::load_topology((t.path / "topo.yaml").string()), both.faults, rounds))
    truth_graphs.push_back(untimed(gossip::live_graph_json(c)));
  std::ifstream again(fs::path(out) / "events.jsonl");
  for (std::string line; std::getline(again, line);)
    if (line.find("\"event\": \"live_graph\"") != std::string::npos) graphs.push_back(untimed(line));
  CHECK(truth_graphs.size() >= 10);
  CHECK(graphs == truth_graphs);
  CHECK(processes_naming(out).empty());
}

TEST_CASE("chaos on an elastic graph: seeded random joins and leaves in gossip run follow the "
          "member timeline of the schedule, bit-identical to gossip sim", "[peer][elastic][chaos]") {
  TempDir t;
  std::ofstream(t.path / "e.yaml") << "generator: exponential\nn: 8\nelastic: true\nmax_peers: 16\n";
  std::ofstream(t.path / "c.yaml")
      << "data:\n  synthetic: {train: 8192, test: 256, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 16, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: 2, batch: 16, seed: 5, backend: cpu, evals_per_epoch: 1}\n"
      << "gossip: {topology: e.yaml, algorithm: dpsgd, period: 1}\n"
      << "net: {run_id: elastic-chaos, base_port: " << test_port_base() << ", "
      << "connect_timeout_s: 20, tls: off}\n";
  const std::string cfg = (t.path / "c.yaml").string(), faults = (t.path / "f.yaml").string();
  const Result made = run(bin() + " chaos " + cfg + " --faults 6 --seed 4 --out " + faults);
  INFO(made.output);
  REQUIRE(made.code == 0);
  INFO(read_file(faults));
  const std::string out = (t.path / "run").string(), sim = (t.path / "sim").string();
  const Result r = run(bin() + " run " + cfg + " --out " + out + " --faults " + faults +
                       " --no-progress");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const Result s = run(bin() + " sim " + cfg + " --out " + sim + " --faults " + faults);
  REQUIRE(s.code == 0);
  // The truth: the member timeline the schedule alone gives.
  std::ofstream(t.path / "both.yaml") << read_file(t.path / "c.yaml") + read_file(faults);
  const gossip::RunConfig both = gossip::load_config((t.path / "both.yaml").string());
  REQUIRE(both.faults.size() == 6u);
  const gossip::Topology planned =
      gossip::run_topology(both, gossip::load_topology((t.path / "e.yaml").string()));
  const std::string timeline = summary_field(fs::path(out) / "summary.json", "membership_timeline");
  for (const auto& e : planned.epochs()) {
    std::string members;
    for (int p : e.members) members += gossip::cat(members.empty() ? "" : ", ", p);
    CHECK_THAT(timeline, Catch::Contains(gossip::cat("{\"round\": ", e.from, e.from ? ", \"announced\": " : "",
                                                     e.from ? std::to_string(e.announced) : "",
                                                     ", \"members\": [", members, "]")));
  }
  CHECK(timeline == summary_field(fs::path(sim) / "summary.json", "membership_timeline"));
  std::string alive = "\"alive_at_end\": [";
  const auto& last = planned.epochs().back().members;
  for (int p = 0; p < 16; ++p)
    alive += gossip::cat(p ? ", " : "", std::binary_search(last.begin(), last.end(), p) ? "true" : "false");
  CHECK_THAT(read_file(fs::path(out) / "summary.json"), Catch::Contains(alive + "]"));
  CHECK(summary_field(fs::path(out) / "summary.json", "missing_links") == "\"missing_links\": [],");
  CHECK(summary_field(fs::path(out) / "summary.json", "params_sha256") ==
        summary_field(fs::path(sim) / "summary.json", "params_sha256"));
  CHECK(processes_naming(out).empty());
}

TEST_CASE("the same fault schedule gives the same membership events in gossip sim and gossip run",
          "[peer][faults][membership]") {
  TempDir t;
  // Ring of 6: peer 2 dies (a line remains), then 5 (the ring falls into {0, 1} and {3, 4}, both
  // training at the same pace), then 2 comes back and joins them again.
  const auto cfg = write_fault_config(
      t.path, 6, 40, "dead_after_rounds: 3, dead_after_s: 0",
      "  - {round: 60, kill: [2]}\n  - {round: 160, kill: [5]}\n  - {round: 260, restart: [2]}\n");
  sim_and_run(cfg, t.path);
  const auto in_sim = membership_events(t.path / "sim" / "events.jsonl");
  const auto in_run = membership_events(t.path / "run" / "events.jsonl");
  REQUIRE(!in_sim.empty());
  for (int p = 0; p < 6; ++p) {
    if (p == 5) continue;  // dead at the end
    auto sequence = [&](const std::vector<Membership>& events) {
      std::vector<std::string> seq;
      for (const auto& e : events)
        if (e.peer == p) seq.push_back(e.event + " " + std::to_string(e.subject));
      return seq;
    };
    INFO("peer " << p);
    CHECK(sequence(in_run) == sequence(in_sim));
  }
  // What that sequence is, for peer 3: suspicion and death of its neighbour 2, the same of 5
  // (heard through 4), the split, then 2's return and the healing.
  std::vector<std::string> three;
  for (const auto& e : in_sim)
    if (e.peer == 3) three.push_back(e.event + " " + std::to_string(e.subject));
  CHECK(three == std::vector<std::string>{"suspect 2", "dead 2", "suspect 5", "dead 5",
                                          "partition -1", "rejoin 2", "healed -1"});
}

TEST_CASE("gossip run and gossip sim cut a link alike: its ends find each other silent in the cut's "
          "rounds only, nobody dies, and they take each other back after it",
          "[peer][faults][membership]") {
  TempDir t;
  // Ring of 4 without 0-1 for rounds 100..299 of 768: the peers' CutLinks (under their monitors)
  // pass nothing over the link, so each end suspects the other; 0 - 3 - 2 - 1 is still a path
  // (the probes find it) and the cut ends long before dead_after_s.
  const auto cfg = write_fault_config(t.path, 4, 3, "dead_after_s: 5",
                                      "  - {from_round: 100, to_round: 300, cut: [[0, 1]]}\n");
  const Result net = sim_and_run(cfg, t.path);
  CHECK_THAT(net.output, Catch::Contains("fault schedule at round 100: links cut until round 300"));
  for (const char* how : {"sim", "run"}) {
    INFO(how);
    const auto events = membership_events(t.path / how / "events.jsonl");
    for (const auto& [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
      INFO("peer " << a << " about " << b);
      std::vector<const Membership*> about;
      for (const auto& e : events)
        if (e.peer == a && e.subject == b) about.push_back(&e);
      REQUIRE(!about.empty());
      CHECK(about.front()->event == "suspect");
      CHECK(about.front()->round > 100);  // a round's events carry the rounds done
      CHECK(about.front()->round <= 300);
      CHECK(about.back()->event == "alive");
    }
    CHECK(std::none_of(events.begin(), events.end(),
                       [](const Membership& e) { return e.event == "dead"; }));
  }
  CHECK(number(t.path / "run" / "summary.json", "deaths") == 0);
  CHECK_THAT(read_file(t.path / "run" / "summary.json"),
             Catch::Contains("\"alive_at_end\": [true, true, true, true]"));
}

TEST_CASE("a peer paused past the timeout is suspected, refutes it when it wakes, and is taken "
          "back without a restart", "[peer][faults][membership]") {
  TempDir t;
  // The neighbours wait one round_timeout_s (1 s) for it, suspect it and stop waiting; a death
  // would take 20 s more, and the pause ends before that.
  // 150 epochs (about 10 s here): the others are still running when it wakes.
  const auto cfg = write_fault_config(t.path, 4, 150, "dead_after_s: 20",
                                      "  - {round: 50, pause: [1], seconds: 3}\n");
  {
    std::string text = read_file(cfg);
    text.replace(text.find("round_timeout_s: 5,"), 19, "round_timeout_s: 1,");
    std::ofstream(cfg, std::ios::trunc) << text;
  }
  const fs::path out = t.path / "run";
  const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() + " --no-progress");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto events = membership_events(out / "events.jsonl");
  for (int p : {0, 2}) {
    INFO("peer " << p);
    std::vector<std::string> about_1;
    for (const auto& e : events)
      if (e.peer == p && e.subject == 1) about_1.push_back(e.event);
    // Suspected, then alive again by its refutation; while it catches up (these neighbours
    // wait round_timeout_s = 1 s for its rounds) it may be left out once more, and is back after.
    REQUIRE(about_1.size() >= 2);
    CHECK(about_1[0] == "suspect");
    CHECK(about_1[1] == "alive");
    CHECK(about_1.back() == "alive");
    CHECK(std::count(about_1.begin(), about_1.end(), "dead") == 0);
    CHECK(about_1.size() <= 4);
    // While it was suspected they did not wait for it: one deadline waited out, not one a round.
    const std::string log = read_file(out / "peers" / std::to_string(p) / "peer.log");
    CHECK(deadline_misses(log).size() <= 1);
  }
  const auto refuted = std::find_if(events.begin(), events.end(), [](const Membership& e) {
    return e.peer == 1 && e.subject == 1 && e.event == "alive";
  });
  CHECK(refuted != events.end());
  CHECK(number(out / "summary.json", "deaths") == 0);
  CHECK_THAT(read_file(out / "summary.json"), Catch::Contains("\"alive_at_end\": [true, true, true, true]"));
}

// --- gossip run --netem: peers on emulated links ------------------------------------------------

namespace {

/// The network namespaces whose names start with `prefix`.
std::vector<std::string> netns_with(const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(run("ip netns list").output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(0, line.find(' ')));
  return out;
}

bool can_emulate_links() {
  if (geteuid() == 0 && run("ip netns list").code == 0 && run("tc -V").code == 0) return true;
  WARN("not root, or no ip/tc: the emulated-link test is skipped");
  return false;
}

/// Whether this kernel has the netem qdisc, tried in a namespace of the test's own.
bool kernel_has_netem() {
  const std::string ns = named("gst", getpid());
  REQUIRE(run("ip netns add " + ns).code == 0);
  const bool has = run("tc -n " + ns + " qdisc add dev lo root netem delay 1ms").code == 0;
  run("ip netns del " + ns);
  return has;
}

/// A `gossip run` started in the background, its output in a file; on destruction it is killed
/// if it still runs and any namespace of its prefix is removed, so a failing test leaves nothing.
struct BackgroundRun {
  pid_t pid = -1;
  fs::path log;
  std::string prefix;  // of its namespaces: "gsn<pid>"
  BackgroundRun(const std::vector<std::string>& argv, const fs::path& log_path) : log(log_path) {
    std::fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stdout);
      dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    prefix = named("gsn", pid);
  }
  int wait() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  ~BackgroundRun() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    for (const auto& ns : netns_with(prefix)) {
      std::istringstream in(run("ip netns pids " + ns).output);
      for (pid_t p; in >> p;) kill(p, SIGKILL);
      run("ip netns del " + ns);
    }
  }
};

}  // namespace

TEST_CASE("gossip run --netem: 4 peers on 100 Mbit/s links train over TCP and leave nothing",
          "[peer][netem]") {
  if (!can_emulate_links()) return;
  TempDir t;
  // The topology places the peers on this machine's loopback (as the quickstart's does): under
  // --netem they take their namespaces' addresses instead.
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 2,
                                "peers: [127.0.0.1:7100, 127.0.0.1:7101, 127.0.0.1:7102, "
                                "127.0.0.1:7103]\n");
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                       " --no-progress --netem rate=100mbit");
  INFO(r.output);
  CHECK(r.output.find("the loopback addresses of") != std::string::npos);
  CHECK(fs::exists(t.path / "run" / "netem-topology.yaml"));
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex("own network namespace \\((gsn\\d+)p0")));
  const std::string prefix = m[1];
  CHECK(netns_with(prefix).empty());
  CHECK(run("ip -o link show").output.find(prefix) == std::string::npos);
  REQUIRE(r.code == 0);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
  CHECK(number(t.path / "run" / "summary.json", "bytes_sent") > 0);
  for (int p = 0; p < 4; ++p) {
    const std::string log = read_file(t.path / "run" / "peers" / std::to_string(p) / "peer.log");
    INFO(log);
    // Each at its own address on the bridge, its neighbours over TCP, not shared memory.
    CHECK(log.find("hosts from --hosts") != std::string::npos);
    CHECK(log.find("through shared memory") == std::string::npos);
  }
  CHECK(read_file(t.path / "run" / "netem-hosts") ==
        "198.18.0.1 slots=1\n198.18.0.2 slots=1\n198.18.0.3 slots=1\n198.18.0.4 slots=1\n");
}

TEST_CASE("gossip run --netem removes its namespaces after Ctrl-C and after a peer failure",
          "[peer][netem]") {
  if (!can_emulate_links()) return;
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 2000);
  BackgroundRun launcher({bin(), "run", cfg.string(), "--out", (t.path / "run").string(),
                          "--no-progress", "--netem", "rate=100mbit"},
                         t.path / "run.log");
  // Wait (bounded) until every peer trains in its namespace.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const auto training = [&] {
    for (int p = 0; p < 4; ++p)
      if (!fs::exists(t.path / "run" / "peers" / std::to_string(p) / "metrics.csv")) return false;
    return true;
  };
  while (!training() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO(read_file(t.path / "run.log"));
  REQUIRE(training());
  REQUIRE(netns_with(launcher.prefix).size() == 5u);  // a switch and 4 peers
  // Both ends of each peer's link are limited to the rate asked for.
  const std::string own = run("tc -n " + launcher.prefix + "p2 qdisc show dev eth0").output;
  const std::string bridge = run("tc -n " + launcher.prefix + "s qdisc show dev p2").output;
  CHECK(own.find("qdisc tbf") != std::string::npos);
  CHECK(own.find("rate 100Mbit") != std::string::npos);
  CHECK(bridge.find("qdisc tbf") != std::string::npos);
  CHECK(bridge.find("rate 100Mbit") != std::string::npos);

  SECTION("Ctrl-C") {
    kill(launcher.pid, SIGINT);
    const int code = launcher.wait();
    INFO(read_file(t.path / "run.log"));
    CHECK(code == 130);
  }
  SECTION("a peer killed") {
    const std::string pids = run("ip netns pids " + launcher.prefix + "p2").output;
    REQUIRE_FALSE(pids.empty());
    std::istringstream in(pids);
    for (pid_t p; in >> p;) kill(p, SIGKILL);
    const int code = launcher.wait();
    const std::string out = read_file(t.path / "run.log");
    INFO(out);
    CHECK(code == 1);
    CHECK(out.find("peer 2 failed") != std::string::npos);
  }
  CHECK(netns_with(launcher.prefix).empty());
  CHECK(run("ip -o link show").output.find(launcher.prefix) == std::string::npos);
}

TEST_CASE("gossip run --netem refuses what it cannot emulate, clearly, leaving nothing",
          "[peer][netem]") {
  if (!can_emulate_links()) return;
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  const auto before = netns_with("gsn");
  const std::string out = (t.path / "run").string();
  const auto gossip_run = [&](const std::string& prefix, const std::string& netem) {
    return run(prefix + bin() + " run " + cfg.string() + " --out " + out + " --no-progress " +
               "--netem " + netem);
  };

  SECTION("an unparsable --netem") {
    const Result r = gossip_run("", "rate=fast");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("--netem: 'rate=fast': rate: 'fast' is not a non-negative number") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "run"));
  }
  SECTION("a delay") {
    const Result r = gossip_run("", "rate=100mbit,delay=5ms");
    INFO(r.output);
    if (kernel_has_netem()) {
      CHECK(r.code == 0);
    } else {
      CHECK(r.code == 2);
      CHECK(r.output.find("need the kernel's netem qdisc (sch_netem), which this kernel does "
                          "not have") != std::string::npos);
      CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
    }
  }
  SECTION("a topology placing the peers on other hosts") {
    std::ofstream(t.path / "topo.yaml", std::ios::app)
        << "peers: [10.1.2.3:7000, 10.1.2.4:7000, 10.1.2.5:7000, 10.1.2.6:7000]\n";
    const Result r = gossip_run("", "rate=100mbit");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("places the peers on other hosts (peers:)") != std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
  }
  SECTION("not root") {
    fs::create_directories(out);
    fs::permissions(out, fs::perms::all);
    const Result r = gossip_run("setpriv --reuid=65534 --regid=65534 --clear-groups ",
                                "rate=100mbit");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("emulating links needs root") != std::string::npos);
  }
  CHECK(netns_with("gsn") == before);
}

// --- the monitor with its shipped defaults: faults by hand, as an operator meets them ----------

namespace {

/// The pid of the `gossip peer` process of `rank` writing into `out` (0 when there is none).
pid_t peer_pid(const fs::path& out, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_file(entry.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(" peer ") != std::string::npos &&
        cmd.find(" --rank " + std::to_string(rank) + " ") != std::string::npos &&
        cmd.find(" --out " + out.string() + " ") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

/// Seconds until every peer of `peers` has a membership event `event` in `events_jsonl` (after
/// the first `skip` events of each), polling for at most `limit` seconds; -1 if they do not.
double seconds_until_all(const fs::path& events_jsonl, const std::vector<int>& peers,
                         const std::string& event, double limit) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto events = membership_events(events_jsonl);
    const bool all = std::all_of(peers.begin(), peers.end(), [&](int p) {
      return std::any_of(events.begin(), events.end(),
                         [&](const Membership& e) { return e.peer == p && e.event == event; });
    });
    if (all) return s;
    if (s > limit) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TEST_CASE("shipped defaults: kill -9 of two ring peers is a partition within seconds, a restart "
          "by hand heals it, and --keep-going ends with exit 0 and the record of both",
          "[peer][faults][membership]") {
  TempDir t;
  // Only the data, the ports and the length are the test's: the membership settings are the
  // defaults. The run must outlast the kill (2 s in), the partition (~1 s) and the restart's
  // start-up (~1.3 s) with room to spare: 400 epochs are about 12 s here (120 were 3.6 s, and
  // the restarted peer came back with 0.2 s of the run left, too late to heal in some runs).
  const auto cfg = write_fault_config(t.path, 8, 400, "on_partition: continue", "  []\n");
  const fs::path out = t.path / "run";
  BackgroundRun launcher({bin(), "run", cfg.string(), "--out", out.string(), "--no-progress",
                          "--keep-going"},
                         t.path / "run.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto training = [&] {
    for (int p = 0; p < 8; ++p)
      if (!fs::exists(out / "peers" / std::to_string(p) / "metrics.csv")) return false;
    return true;
  };
  while (!training() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  INFO(read_file(t.path / "run.log"));
  const pid_t two = peer_pid(out, 2), six = peer_pid(out, 6);
  REQUIRE(two > 0);
  REQUIRE(six > 0);
  kill(two, SIGKILL);
  kill(six, SIGKILL);
  const std::vector<int> survivors{0, 1, 3, 4, 5, 7};
  const double split = seconds_until_all(out / "events.jsonl", survivors, "partition", 20);
  INFO("partition at every survivor after " << split << " s");
  REQUIRE(split >= 0);
  CHECK(split <= 3.5);  // the issue's 3 s, and the polling's slack
  const auto events = membership_events(out / "events.jsonl");
  for (int p : survivors) {
    const auto e = std::find_if(events.begin(), events.end(), [&](const Membership& m) {
      return m.peer == p && m.event == "partition";
    });
    REQUIRE(e != events.end());
    CHECK(e->components == "[[0, 1, 7], [3, 4, 5]]");
  }
  // Peer 2 started again by hand, as an operator would: it rejoins the running network.
  std::fflush(stdout);
  const pid_t again = fork();
  REQUIRE(again >= 0);
  if (again == 0) {
    std::freopen((t.path / "peer-2-again.log").c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    const std::string exe = bin();
    execl(exe.c_str(), "gossip", "peer", cfg.c_str(), "--rank", "2", "--out", out.c_str(),
          "--tls-dir", (out / "tls").c_str(), "--rejoin", static_cast<char*>(nullptr));
    _exit(127);
  }
  const double healed = seconds_until_all(out / "events.jsonl", survivors, "healed", 30);
  INFO("healed at every survivor " << healed << " s after the restart began");
  CHECK(healed >= 0);
  const int code = launcher.wait();
  int status = 0;
  waitpid(again, &status, 0);
  INFO(read_file(t.path / "run.log"));
  INFO(read_file(t.path / "peer-2-again.log"));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(code == 0);  // --keep-going: every peer still alive finished
  const std::string summary = read_file(out / "summary.json");
  INFO(summary);
  CHECK_THAT(summary, Catch::Contains("\"alive_at_end\": [true, true, true, true, true, true, false, true]"));
  CHECK_THAT(summary, Catch::Contains("\"dead_peers\": [6]"));
  CHECK(number(out / "summary.json", "deaths") == 2);
  CHECK(number(out / "summary.json", "rejoins") == 1);
  // Who died, when, and who came back: peer 2 with the time it was back, peer 6 without.
  CHECK(std::regex_search(summary, std::regex("\"peer\": 2, \"time_s\": [0-9.]+, \"why\": \"[^\"]*\", \"back_s\": [0-9.]+")));
  CHECK(std::regex_search(summary, std::regex("\"peer\": 6, \"time_s\": [0-9.]+, \"why\": \"[^\"]*\", \"back_s\": null")));
  CHECK_THAT(read_file(t.path / "run.log"), Catch::Contains("peer 2 is back (started outside gossip run)"));
}

TEST_CASE("an insider holding a live peer's certificate is refused as identity_conflict; its "
          "forged membership frame and its duplicate link change nothing", "[peer][tls][membership]") {
  using namespace gossip;
  TempDir t;
  const int n = 8;
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 150, "", false, Tls::kKeys);
  // The reference: gossip sim of the same config (a synchronous run ends bit-identical to it).
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const fs::path out = t.path / "run";
  BackgroundRun launcher({bin(), "run", cfg.string(), "--out", out.string(), "--no-progress"},
                         t.path / "run.log");
  const fs::path log3 = out / "peers" / "3" / "peer.log";
  REQUIRE(wait_for_line(log3, "peer 2 (127.0.0.1:"));  // rank 2 dialled rank 3: its link is up
  const fs::path keys = t.path / "keys";
  const test::ClientCredentials rank2{(keys / "ca.pem").string(), (keys / "peer-2.pem").string(),
                                      (keys / "peer-2.key").string()};
  const int port3 = test_port_base() + 3;
  // What the insider sends after its hello, and what comes back.
  auto insider = [&](const std::vector<std::byte>& after_hello) {
    const int fd = connect_to(port3);
    REQUIRE(fd >= 0);
    std::string answer;
    {
      test::TlsClient tls(fd, rank2);
      REQUIRE(tls.ok());
      HandshakeInfo info;
      info.run_id = "test";
      const auto hello = wire::encode_frame(
          wire::FrameType::kHello, 2, 0,
          wire::encode_hello(wire::Hello{wire::kVersion, 2, info, std::nullopt}));
      tls.write(hello.data(), hello.size());
      tls.write(after_hello.data(), after_hello.size());
      std::vector<char> buf(4096);
      for (int i = 0; i < 8; ++i) {  // bounded: until the peer closes
        const long k = tls.read(buf.data(), buf.size());
        if (k <= 0) break;
        answer.append(buf.data(), static_cast<std::size_t>(k));
      }
    }
    ::close(fd);
    return answer;
  };
  // 1. The forged frame of the issue: every other peer dead at the highest incarnation.
  std::vector<Member> forged(n, Member{std::numeric_limits<std::uint32_t>::max(), MemberState::kDead});
  forged[2] = Member{0, MemberState::kAlive};
  const auto view = wire::encode_frame(wire::FrameType::kView, 2, 0, wire::encode_view(forged));
  CHECK_THAT(insider(view), Catch::Contains("identity_conflict"));
  // 2. A second holder of rank 2's identity that would carry its parameters.
  const std::vector<float> half(12 * 24 + 24 + 24 * 3 + 3, 0.5f);
  std::vector<std::byte> payload(wire::kWeightBytes + half.size() * sizeof(float));
  const double w = 1.0;
  std::memcpy(payload.data(), &w, sizeof w);
  std::memcpy(payload.data() + wire::kWeightBytes, half.data(), half.size() * sizeof(float));
  CHECK_THAT(insider(wire::encode_frame(wire::FrameType::kParams, 2, 1, payload)),
             Catch::Contains("identity_conflict"));
  const int code = launcher.wait();
  const std::string output = read_file(t.path / "run.log");
  INFO(output);
  REQUIRE(code == 0);
  // The alert, on the terminal and in the record, names the identity.
  CHECK_THAT(output, Catch::Contains("identity_conflict: a second connection presented the "
                                     "identity of peer 2"));
  const auto events = membership_events(out / "events.jsonl");
  CHECK(std::any_of(events.begin(), events.end(), [](const auto& e) {
    return e.peer == 3 && e.event == "identity_conflict" && e.subject == 2;
  }));
  // No false death, no suspicion: the run is the undisturbed one, bit for bit.
  CHECK(number(out / "summary.json", "deaths") == 0);
  CHECK(std::none_of(events.begin(), events.end(),
                     [](const auto& e) { return e.event == "suspect" || e.event == "dead"; }));
  CHECK(hashes(out / "summary.json") == hashes(t.path / "sim" / "summary.json"));
  CHECK(std::abs(number(out / "summary.json", "test_accuracy") -
                 number(t.path / "sim" / "summary.json", "test_accuracy")) <= 0.002);
}

TEST_CASE("gossip keys add issues one more rank's credentials with the run's CA, which the "
          "other peers accept", "[peer][tls]") {
  TempDir t;
  const int n = 4;
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 1, "", true, Tls::kKeys);
  const fs::path keys = t.path / "keys";
  // Rank 3 has no credentials yet: whoever holds ca.key admits it.
  fs::remove(keys / "peer-3.pem");
  fs::remove(keys / "peer-3.key");
  const Result add = run(bin() + " keys add " + keys.string() + " --rank 3 --config " +
                         cfg.string());
  INFO(add.output);
  REQUIRE(add.code == 0);
  CHECK_THAT(add.output, Catch::Contains("for rank 3 of run 'test'"));
  for (const char* f : {"peer-3.pem", "peer-3.key"}) {
    INFO(f);
    REQUIRE(fs::exists(keys / f));
    CHECK((fs::status(keys / f).permissions() & fs::perms::group_all) == fs::perms::none);
  }
  const Result net = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                         " --no-progress");
  INFO(net.output);
  CHECK(net.code == 0);
  // Refused: a rank already issued (without --force), one the topology can never have, no rank.
  const struct {
    std::string args;
    const char* says;
  } refused[] = {
      {" --rank 3 --config " + cfg.string(), "peer-3.pem already exists"},
      {" --rank 4 --config " + cfg.string(), "has ranks 0..3 (not elastic: its peers are fixed)"},
      {" --config " + cfg.string(), "which rank? give --rank R"},
  };
  for (const auto& c : refused) {
    const Result r = run(bin() + " keys add " + keys.string() + c.args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(c.says));
  }
}

TEST_CASE("an elastic run over the network takes a dead member out at the round every peer "
          "derives from the earliest announcement of its death", "[peer][elastic][faults]") {
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1, 4);
  write_elastic_topology(t.path, 6, 6);
  set_monitor(cfg, "dead_after_rounds: 1, dead_after_s: 0");
  std::ofstream(cfg, std::ios::app) << "faults:\n  - {round: 10, kill: [2]}\n";
  const fs::path out = t.path / "run";
  const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() + " --no-progress");
  INFO(r.output);
  REQUIRE(r.code == 0);
  // Each survivor says when the member set lost peer 2: the same round for all five.
  std::set<long> from;
  const std::regex re("5 members from round (\\d+)");
  for (int p : {0, 1, 3, 4, 5}) {
    const std::string log = read_file(out / "peers" / std::to_string(p) / "peer.log");
    std::smatch m;
    INFO(log);
    REQUIRE(std::regex_search(log, m, re));
    from.insert(std::stol(m[1]));
  }
  REQUIRE(from.size() == 1u);
  const long removed = *from.begin();
  CHECK(removed > 10);
  // The run's record has it so: a change with peer 2 dead, taking effect at that round, a
  // lead after the earliest announcement of the death.
  const std::string timeline = summary_field(out / "summary.json", "membership_timeline");
  CHECK_THAT(timeline, Catch::Contains(gossip::cat("{\"round\": ", removed, ", \"announced\": ")));
  CHECK_THAT(timeline, Catch::Contains("\"dead\": [2]"));
  CHECK_THAT(read_file(out / "events.jsonl"), Catch::Contains("\"event\": \"announce_dead\""));
  CHECK(number(out / "summary.json", "test_accuracy") > 0.8);
}

TEST_CASE("monitor.remove_dead_after_rounds: a dead member leaves at a round counted from its "
          "last message, so gossip run and gossip sim agree bit for bit, crash and all",
          "[peer][elastic][faults]") {
  // Peer 2 is killed at round 10: its last message is of round 9 (the launcher's peers stop
  // themselves at a scheduled kill's round, as the simulator's do), so with
  // remove_dead_after_rounds 12 every peer's announcement carries round 9 + 12 = 21 and the
  // member set loses it a lead later, in the simulator too, however long the real monitors took
  // (on the wall clock) to confirm the death.
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1, 4);
  write_elastic_topology(t.path, 6, 6);
  set_monitor(cfg, "dead_after_rounds: 1, dead_after_s: 0, remove_dead_after_rounds: 12");
  std::ofstream(cfg, std::ios::app) << "faults:\n  - {round: 10, kill: [2]}\n";
  INFO(sim_and_run(cfg, t.path).output);
  const fs::path a = t.path / "run" / "summary.json", b = t.path / "sim" / "summary.json";
  const std::string timeline = summary_field(a, "membership_timeline");
  CHECK(timeline == summary_field(b, "membership_timeline"));
  CHECK_THAT(timeline, Catch::Contains("\"announced\": 21, \"members\": [0, 1, 3, 4, 5]"));
  CHECK_THAT(timeline, Catch::Contains("\"dead\": [2]"));
  // The five survivors' parameters, bit for bit (the dead peer's differ: the simulator's stops
  // at round 10, the real one's process was killed without writing any).
  const auto run_hashes = hashes(a);
  const auto sim_hashes = hashes(b);
  REQUIRE(sim_hashes.size() == 6u);
  std::vector<std::string> survivors = sim_hashes;
  survivors.erase(survivors.begin() + 2);
  CHECK(run_hashes == survivors);
  CHECK(number(a, "test_accuracy") > 0.8);
}

TEST_CASE("a peer that leaves at run time (--leave-at-round, SIGTERM) exits 0; the first leaves "
          "as the same leave in the schedule would, bit for bit", "[peer][elastic]") {
  TempDir t;
  const auto cfg = write_config(t.path, 5, "dpsgd", 1, 3, "", true, Tls::kOff);
  write_elastic_topology(t.path, 5, 6);
  // Room for one more member (max_peers 6): the run follows a member timeline, so its peers
  // may leave (and identities join) while it runs.
  const auto start = [&](const fs::path& out, const std::vector<std::string>& extra, int rank) {
    std::vector<std::string> argv{bin(), "peer", cfg.string(), "--rank", std::to_string(rank),
                                  "--out", out.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    fs::create_directories(out);
    std::fflush(stdout);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string log = (out / gossip::cat("peer-", rank, ".log")).string();
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    return pid;
  };
  const auto wait_all = [](const std::vector<pid_t>& pids) {
    std::vector<int> codes;
    for (pid_t pid : pids) {
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    return codes;
  };
  // Rank 3 announces its leave at round 12.
  const fs::path out = t.path / "run";
  std::vector<pid_t> pids;
  for (int r = 0; r < 5; ++r)
    pids.push_back(start(out, r == 3 ? std::vector<std::string>{"--leave-at-round", "12"}
                                     : std::vector<std::string>{}, r));
  CHECK(wait_all(pids) == std::vector<int>(5, 0));
  const fs::path leaver = out / "peers" / "3" / "summary.json";
  CHECK_THAT(read_file(leaver), Catch::Contains("\"left\": true"));
  // The same leave in the schedule, in the simulator: the same parameters, bit for bit.
  std::ofstream(cfg, std::ios::app) << "faults:\n  - {round: 12, leave: [3]}\n";
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const auto sim_hashes = hashes(t.path / "sim" / "summary.json");
  REQUIRE(sim_hashes.size() == 5u);
  for (int r = 0; r < 5; ++r) {
    INFO("rank " << r << "\n" << read_file(out / gossip::cat("peer-", r, ".log")));
    const auto h = hashes(out / "peers" / std::to_string(r) / "summary.json");
    REQUIRE(h.size() == 1u);
    CHECK(h.front() == sim_hashes[static_cast<std::size_t>(r)]);
  }
  CHECK_THAT(summary_field(t.path / "sim" / "summary.json", "membership_timeline"),
             Catch::Contains("\"left\": [3]"));
  // SIGTERM: rank 4 announces its leave at the round it comes, leaves and exits 0 (a longer
  // run, without the scheduled leave).
  const fs::path out2 = t.path / "run2";
  std::string text = read_file(cfg);
  text = text.substr(0, text.find("faults:"));
  text.replace(text.find("epochs: 3,"), 10, "epochs: 150,");
  std::ofstream(cfg, std::ios::trunc) << text;
  pids.clear();
  for (int r = 0; r < 5; ++r) pids.push_back(start(out2, {}, r));
  const fs::path metrics = out2 / "peers" / "4" / "metrics.csv";
  for (int i = 0; i < 400 && metrics_rows(metrics).size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(metrics_rows(metrics).size() >= 2);  // it has trained a while
  kill(pids[4], SIGTERM);
  CHECK(wait_all(pids) == std::vector<int>(5, 0));
  const std::string log4 = read_file(out2 / "peer-4.log");
  INFO(log4);
  CHECK_THAT(log4, Catch::Contains("SIGTERM: announcing its leave at round"));
  CHECK_THAT(read_file(out2 / "peers" / "4" / "summary.json"), Catch::Contains("\"left\": true"));
  CHECK(number(out2 / "peers" / "4" / "summary.json", "rounds") <
        number(out2 / "peers" / "0" / "summary.json", "rounds"));
}

namespace {

/// `gossip run CONFIG --out OUT` in the background, its output in `log`; returns once peer 0
/// has written three metrics rows (the network trains), its pid for waitpid.
pid_t start_training_run(const fs::path& cfg, const fs::path& out, const fs::path& log) {
  std::fflush(stdout);
  const pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    execl(bin().c_str(), "gossip", "run", cfg.c_str(), "--out", out.c_str(), "--no-progress",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const fs::path metrics = out / "peers" / "0" / "metrics.csv";
  for (int i = 0; i < 400 && metrics_rows(metrics).size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  REQUIRE(metrics_rows(metrics).size() >= 3);
  return launcher;
}

/// The end of a run started by start_training_run (its output in `log`) that a joiner
/// (`join`, gossip peer --join) joined: both exited 0. Returns the run's output.
std::string joined_run_output(pid_t launcher, const fs::path& log, const Result& join) {
  int status = 0;
  REQUIRE(waitpid(launcher, &status, 0) == launcher);
  const std::string output = read_file(log);
  INFO(output << "\n" << join.output);
  CHECK(join.code == 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return output;
}

}  // namespace

TEST_CASE("gossip peer --join: a new identity asks a live member of a running elastic network "
          "to announce it, takes its new neighbours' average and mixes", "[peer][elastic]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 200);
  write_elastic_topology(t.path, 4, 6);
  // Room for two more members: the run follows a member timeline, so identities may come.
  const fs::path out = t.path / "run";
  const pid_t launcher = start_training_run(cfg, out, t.path / "run.txt");
  // Once the network trains, rank 4 (its certificate among the run's: gossip run issues one
  // per rank up to max_peers) contacts rank 0.
  const int port0 = test_port_base();
  const Result join = run(gossip::cat(bin(), " peer ", cfg.string(), " --rank 4 --join 127.0.0.1:",
                                      port0, " --tls-dir ", (out / "tls").string(), " --out ",
                                      out.string()));
  const std::string output = joined_run_output(launcher, t.path / "run.txt", join);
  INFO(output << "\n" << join.output);
  CHECK_THAT(join.output, Catch::Contains("the members announced its join at round"));
  CHECK_THAT(output, Catch::Contains("peer 4 asked to join (gossip peer --join)"));
  // It mixed from the round the timeline gave it, from all four members' average.
  const fs::path s4 = out / "peers" / "4" / "summary.json";
  CHECK_THAT(summary_field(s4, "join"), Catch::Contains("\"donors\": [0, 1, 2, 3]"));
  const double from = number(s4, "member_from");
  CHECK(from > 0);
  CHECK(number(s4, "rounds") == number(out / "peers" / "0" / "summary.json", "rounds"));
  // The run's record has the join where the peers took it.
  const std::string timeline = summary_field(out / "summary.json", "membership_timeline");
  CHECK_THAT(timeline, Catch::Contains(gossip::cat("{\"round\": ", from, ", \"announced\": ")));
  CHECK_THAT(timeline, Catch::Contains("\"joined\": [4]"));
  CHECK(std::abs(number(s4, "test_accuracy") - number(out / "summary.json", "test_accuracy")) <
        0.01);
  // Refused: --join to a run whose peers are fixed, an address no rank has.
  const auto fixed = write_config(t.path, 4, "dpsgd", 1, 1);
  const Result refused = run(bin() + " peer " + fixed.string() +
                             " --rank 3 --join 127.0.0.1:1 --out " + (t.path / "o").string());
  CHECK(refused.code == 2);
  CHECK_THAT(refused.output, Catch::Contains("--join: this run's peers are fixed"));
}

// --- links that never formed ---------------------------------------------------------------------

namespace {

/// The issue's network: the 8-peer ring whose links 0-1, 0-7, 4-5 and 5-6 cannot form, 32 rounds
/// an epoch (4096 samples, batch 16, 8 peers), everything over TCP, a 4 s start.
fs::path unreachable_config(const fs::path& dir, double epochs, const std::string& peers,
                            Tls tls) {
  const fs::path cfg = write_config(dir, 8, "dpsgd", 1, epochs, peers, false, tls);
  replace_once(cfg, "train: 1536", "train: 4096");
  replace_once(cfg, "connect_timeout_s: 20", "connect_timeout_s: 4");
  // Links that cannot form: no peer dials a neighbour that would dial it, nor relays (the
  // reachability check would find the ends of those links unreachable, and relay them).
  replace_once(cfg, "connect_timeout_s: 4", "connect_timeout_s: 4, reachable: yes");
  return cfg;
}

const char* const kSplitComponents = "\"components\": [[0], [1, 2, 3, 4], [5], [6, 7]]";

/// Checks a run's summary.json against the split the unreachable links make: not connected, the
/// four components, each missing link with what both ends recorded (`dialled`: the dialling
/// end's words, as "no route dialling" or "refused dialling").
void check_split_summary(const fs::path& summary, const std::string& dialled) {
  const std::string s = read_file(summary);
  INFO(s);
  CHECK_THAT(s, Catch::Contains("\"connected\": false"));
  CHECK_THAT(s, Catch::Contains("\"partitioned\": true"));
  CHECK_THAT(s, Catch::Contains(kSplitComponents));
  // The lower rank of a pair dials: it says why it could not; the other that it never came.
  for (const auto& [a, b] : {std::pair{0, 1}, {0, 7}, {4, 5}, {5, 6}}) {
    INFO(a << "-" << b);
    const std::regex link(gossip::cat(R"re(\{"peers": \[)re", a, ", ", b,
                                      R"re(\], "state": "never_formed", "round": 0, "why": \{")re",
                                      a, R"re(": "([^"]*)", ")re", b, R"re(": "([^"]*)"\}\})re"));
    std::smatch m;
    REQUIRE(std::regex_search(s, m, link));
    CHECK_THAT(m[1].str(), Catch::Contains(dialled));
    CHECK_THAT(m[2].str(), Catch::Contains(gossip::cat("peer ", a, " never dialled in")));
  }
}

/// The neighbours each peer's own summary says its link formed with.
std::map<int, std::set<int>> formed_links(const fs::path& run) {
  std::map<int, std::set<int>> formed;
  const std::regex entry(R"re(\{"peer": (\d+), "formed": (true|false))re");
  for (int r = 0; r < 8; ++r) {
    const std::string s = read_file(run / "peers" / std::to_string(r) / "summary.json");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), entry); it != std::sregex_iterator();
         ++it)
      if ((*it)[2] == "true") formed[r].insert(std::stoi((*it)[1]));
  }
  return formed;
}

/// No component holds two peers that never exchanged a message, directly or through others in
/// it: within each, the links both ends formed connect all of it.
void check_components_exchanged(const std::map<int, std::set<int>>& formed) {
  for (const std::vector<int>& c : std::vector<std::vector<int>>{{0}, {1, 2, 3, 4}, {5}, {6, 7}}) {
    std::set<int> seen{c.front()};
    std::vector<int> todo{c.front()};
    while (!todo.empty()) {
      const int p = todo.back();
      todo.pop_back();
      const auto it = formed.find(p);
      if (it == formed.end()) continue;
      for (int q : it->second)
        if (formed.count(q) && formed.at(q).count(p) && seen.insert(q).second) todo.push_back(q);
    }
    CHECK(seen == std::set<int>(c.begin(), c.end()));
  }
}

}  // namespace

TEST_CASE("gossip run: links that never formed split the run's graph, short run or long, each "
          "named with its reason", "[peer][netem][links]") {
  if (!can_emulate_links()) return;
  for (const double epochs : {1.0, 20.0}) {
    INFO(epochs << " epochs");
    TempDir t;
    const auto cfg = unreachable_config(t.path, epochs, "", Tls::kRun);
    const fs::path out = t.path / "run";
    const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() +
                         " --no-progress --netem rate=1gbit,unreachable=0-1+0-7+4-5+5-6");
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(number(out / "summary.json", "rounds") == 32 * epochs);
    check_split_summary(out / "summary.json", "no route dialling");
    check_components_exchanged(formed_links(out));
    // The final table names the split and each missing link; the dashboard's words are the
    // events': never_formed, not suspect.
    CHECK_THAT(r.output, Catch::Contains("PARTITIONED: the live graph ended split into {0} "
                                         "{1,2,3,4} {5} {6,7}"));
    CHECK_THAT(r.output, Catch::Contains("  0-1 never_formed: peer 0: no route dialling"));
    CHECK_THAT(r.output, Catch::Contains("  5-6 never_formed: peer 5: no route dialling"));
    const std::string events = read_file(out / "events.jsonl");
    CHECK_THAT(events, Catch::Contains(R"({"event": "link", "peer": 0, "round": 0, )"));
    // Peers 0 and 5 saw their own isolation at once (round 1), without waiting for deaths.
    CHECK(events.find(R"("peer": 0, "round": 1, )") != std::string::npos);
    CHECK_THAT(events, Catch::Contains(R"("event": "partition", "subject": -1)"));
  }
}

namespace {

/// A port on 127.0.0.1 that refuses connections: bound, never listening (closed with the object).
struct RefusingPort {
  int fd = -1;
  int port = 0;
  RefusingPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~RefusingPort() { close(fd); }
};

}  // namespace

TEST_CASE("gossip collect: peers started one by one whose links never formed give the same split",
          "[peer][links]") {
  TempDir t;
  // Ports that refuse (one per rank some peer is told is there).
  const RefusingPort refusing[4];
  std::map<int, std::string> nowhere;
  for (int i = 0; const int r : {1, 5, 6, 7})
    nowhere[r] = gossip::cat("127.0.0.1:", refusing[i++].port);
  const int base = test_port_base();
  const auto peers_list = [&](const std::set<int>& unreachable) {
    std::string s = "peers:\n";
    for (int r = 0; r < 8; ++r)
      s += gossip::cat("  - ", unreachable.count(r) ? nowhere[r] : gossip::cat("127.0.0.1:", base + r),
                       "\n");
    return s;
  };
  for (const double epochs : {1.0, 20.0}) {
    INFO(epochs << " epochs");
    const fs::path run_dir = t.path / named("e", static_cast<int>(epochs));
    fs::create_directories(run_dir);
    const auto cfg = unreachable_config(run_dir, epochs, peers_list({}), Tls::kKeys);
    // The lower rank of a pair dials: 0 is told 1 and 7 are where nobody listens, 4 that 5 is,
    // 5 that 6 is. (Addresses are not part of the topology's fingerprint.)
    const std::map<int, std::set<int>> wrong{{0, {1, 7}}, {4, {5}}, {5, {6}}};
    std::string cmd;
    const fs::path out = run_dir / "out";
    for (int r = 0; r < 8; ++r) {
      fs::path topo = run_dir / "topo.yaml";
      if (wrong.count(r)) {
        topo = run_dir / named("topo-", r);
        std::ofstream(topo) << "generator: ring\nn: 8\n" << peers_list(wrong.at(r));
      }
      cmd += bin() + " peer " + cfg.string() + " --rank " + std::to_string(r) + " --topology " +
             topo.string() + " --out " + out.string() + " > " + (run_dir / named("log", r)).string() +
             " 2>&1 & ";
    }
    const Result peers = run("sh -c '" + cmd + "wait'");
    std::string logs;
    for (int r = 0; r < 8; ++r)
      logs += gossip::cat("peer ", r, ":\n", read_file(run_dir / named("log", r)), "\n");
    INFO(logs);
    REQUIRE(peers.code == 0);
    const Result c = run(bin() + " collect " + out.string());
    INFO(c.output);
    REQUIRE(c.code == 0);
    check_split_summary(out / "summary.json", "refused dialling 127.0.0.1:");
    check_components_exchanged(formed_links(out));
    CHECK_THAT(c.output, Catch::Contains("PARTITIONED: the live graph ended split into {0} "
                                         "{1,2,3,4} {5} {6,7}"));
    // Peer 1's monitor believed otherwise (after 1 epoch: the graph whole, as it lacks only
    // its link to 0): the record says so.
    const std::string summary = read_file(out / "summary.json");
    CHECK_THAT(summary, Catch::Contains(R"({"peer": 1, "connected": )"));
    if (epochs == 1.0)
      CHECK_THAT(summary, Catch::Contains(R"({"peer": 1, "connected": true, "components": []})"));
  }
}

TEST_CASE("gossip run refuses train.backend: cuda where no device is, before any peer starts",
          "[peer]") {
  if (gossip::cuda_device_count() > 0) {
    WARN("a CUDA device is present: the refusal has nothing to refuse here");
    return;
  }
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  replace_once(cfg, "backend: cpu", "backend: cuda");
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                       " --no-progress");
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains(cfg.string() + ":5: train.backend: cuda was asked for but "));
  CHECK_THAT(r.output, Catch::Contains("no peer was started"));
  CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
}

TEST_CASE("a residual network with batch norm: gossip run equals gossip sim bit for bit, running "
          "statistics mixed with the parameters", "[peer][model]") {
  TempDir t;
  std::ofstream(t.path / "topo.yaml") << "generator: ring\nn: 4\n";
  std::ofstream(t.path / "c.yaml")
      << "data:\n  synthetic: {train: 512, test: 128, dim: 36, classes: 3}\n"
      << "model:\n  input: [1, 6, 6]\n  layers:\n"
      << "    - conv2d: {out_channels: 4, kernel: 3, padding: 1}\n    - batchnorm\n    - relu\n"
      << "    - residual: {out_channels: 4}\n    - residual: {out_channels: 8, stride: 2}\n"
      << "    - globalavgpool\n    - linear: {out: 3}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n"
      << "train: {epochs: 2, batch: 16, seed: 5, backend: cpu}\n"
      << "gossip: {topology: topo.yaml, algorithm: dpsgd}\n"
      << "monitor: {round_timeout_s: 10}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20}\n";
  check_run_equals_sim(t.path, t.path / "c.yaml", 4);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.6);
  // The running statistics were mixed: every peer's final buffer ends with them, and the four
  // peers' running means are close (they average), not each its own shard's.
  std::vector<std::vector<float>> finals;
  for (int p = 0; p < 4; ++p) {
    const std::string bytes = read_file(t.path / "run" / "peers" / std::to_string(p) / "params.bin");
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    finals.push_back(std::move(v));
  }
  REQUIRE(finals[0].size() == finals[3].size());
  // The last 2 * 4 values: the projection's batch norm's running mean and variance (8 channels).
  const std::size_t n = finals[0].size();
  for (std::size_t i = n - 16; i < n; ++i) {
    INFO("value " << i << " of " << n);
    CHECK(std::isfinite(finals[0][i]));
    CHECK(std::abs(finals[0][i] - finals[3][i]) <= 0.05f * (1.0f + std::abs(finals[0][i])));
  }
}

TEST_CASE("ResNet-20 as shipped learns on the CPU: a shortened gossip train's loss falls",
          "[peer][model]") {
  const char* root = std::getenv("GOSSIP_SOURCE_DIR");
  REQUIRE(root != nullptr);
  TempDir t;
  // configs/resnet20.yaml with 512 images, batch 32, one epoch (16 steps), on the CPU.
  std::string text = read_file(fs::path(root) / "configs" / "resnet20.yaml");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"  normalize: true", "  normalize: true\n  limit_train: 512"},
           {"epochs: 15", "epochs: 1"}, {"batch: 128", "batch: 32"},
           {"warmup_epochs: 0.5", "warmup_epochs: 0.25"},
           {"  backend: auto", "  backend: cpu\n  eval_limit: 500\n  evals_per_epoch: 4"}}) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  std::ofstream(t.path / "r20.yaml") << text;
  const Result r = run(bin() + " train " + (t.path / "r20.yaml").string() + " --out " +
                       (t.path / "out").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("272970") || Catch::Contains("274538"));
  const auto rows = metrics_rows(t.path / "out" / "metrics.csv");
  REQUIRE(rows.size() == 4u);
  const double first = std::stod(rows.front().at(3)), last = std::stod(rows.back().at(3));
  INFO("training loss " << first << " -> " << last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.75 * first);
}

TEST_CASE("gossip run refuses train.precision: tf32 for peers on the CPU before any starts",
          "[peer]") {
  if (gossip::cuda_device_count() > 0) {
    WARN("a CUDA device is present: tf32 would run on it");
    return;
  }
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  replace_once(cfg, "backend: cpu", "backend: cpu, precision: tf32");
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                       " --no-progress");
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("train.precision: tf32 runs on a GPU's tensor cores"));
  CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
}

TEST_CASE("train.conv: cudnn and train.graphs: step where the peers would run on the CPU are "
          "refused before any starts, by gossip run, train and sim alike", "[peer]") {
  if (gossip::cuda_device_count() > 0) {
    WARN("a CUDA device is present: cudnn and graphs may run on it");
    return;
  }
  const std::pair<std::string, std::string> cases[] = {
      {"conv: cudnn", "train.conv: cudnn runs on the CUDA backend with cuDNN 9"},
      {"graphs: step", "train.graphs: step replays the training step as a CUDA graph"}};
  for (const auto& [setting, why] : cases) {
    TempDir t;
    const auto cfg = write_config(t.path, 4, "dpsgd", 1);
    replace_once(cfg, "backend: cpu", "backend: auto, " + setting);
    for (const std::string verb : {"run", "train", "sim"}) {
      INFO(setting << ", " << verb);
      const Result r = run(bin() + " " + verb + " " + cfg.string() + " --out " +
                           (t.path / verb).string() + (verb == "run" ? " --no-progress" : ""));
      INFO(r.output);
      CHECK(r.code == 2);
      CHECK_THAT(r.output, Catch::Contains(why));
      CHECK_FALSE(fs::exists(t.path / verb / "summary.json"));
    }
    CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
  }
}

TEST_CASE("train.mps: on is refused before any peer starts where the peers run on the CPU",
          "[peer]") {
  if (gossip::cuda_device_count() > 0) {
    WARN("a CUDA device is present: MPS may start on it");
    return;
  }
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  replace_once(cfg, "backend: cpu", "backend: auto, mps: on");
  const Result r = run(bin() + " run " + cfg.string() + " --out " + (t.path / "run").string() +
                       " --no-progress");
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("train.mps: on, but the peers run on the CPU"));
  CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
  // auto (the default) on the CPU starts nothing and says nothing of MPS.
  replace_once(cfg, "mps: on", "mps: auto");
  const Result ok = run(bin() + " run " + cfg.string() + " --out " + (t.path / "ok").string() +
                        " --no-progress");
  INFO(ok.output);
  CHECK(ok.code == 0);
  CHECK(ok.output.find("MPS") == std::string::npos);
}

TEST_CASE("net.bind: a peer listens where it is told, not at the address its neighbours dial",
          "[peer][links]") {
  for (const std::string bind : {"0.0.0.0", "127.0.0.2"}) {
    INFO("net.bind " << bind);
    TempDir t;
    const std::string peers = gossip::cat("peers: [127.0.0.1:", test_port_base(), ", 127.0.0.1:",
                                          test_port_base() + 1, ", 127.0.0.1:",
                                          test_port_base() + 2, "]\n");
    const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1, peers, false);
    replace_once(cfg, "connect_timeout_s: 20", "connect_timeout_s: 3, bind: '" + bind + "'");
    const fs::path out = t.path / "run";
    const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() +
                         " --no-progress");
    INFO(r.output);
    REQUIRE(r.code == 0);
    const std::string log = read_file(out / "peers" / "1" / "peer.log");
    INFO(log);
    CHECK_THAT(log, Catch::Contains(gossip::cat("(listening on ", bind, ":", test_port_base() + 1,
                                                ", net.bind)")));
    const std::string summary = read_file(out / "summary.json");
    if (bind == "0.0.0.0") {
      // Every interface: the neighbours' dials to 127.0.0.1 reach it.
      CHECK_THAT(summary, Catch::Contains("\"connected\": true"));
      CHECK_THAT(summary, Catch::Contains("\"missing_links\": []"));
    } else {
      // Listening on 127.0.0.2 while the neighbours dial 127.0.0.1: no link forms, and each
      // is named with the refusal its dialler met.
      CHECK_THAT(summary, Catch::Contains("\"connected\": false"));
      CHECK_THAT(summary, Catch::Contains("\"components\": [[0], [1], [2]]"));
      CHECK_THAT(summary, Catch::Contains(gossip::cat("refused dialling 127.0.0.1:",
                                                      test_port_base() + 1)));
    }
  }
}

// --- peers that cannot be dialled: NATs, firewalls, relays ---------------------------------------

namespace {

bool can_emulate_nats() {
  if (!can_emulate_links()) return false;
  if (run("nft --version").code == 0) return true;
  WARN("no nft (nftables): the NAT and firewall tests are skipped");
  return false;
}

/// Each peer's summary.json `links` entries as "A-B PATH [relay R]" lines (path: direct,
/// relayed), and each peer's reachability state.
struct Paths {
  std::map<std::pair<int, int>, std::string> links;  // (peer, neighbour) -> path
  std::map<std::pair<int, int>, int> relay;           // (peer, neighbour) -> relay's rank
  std::map<int, std::string> reach;                   // peer -> reachable, unreachable, unknown
  std::map<int, std::string> reach_how;
  std::map<int, double> relayed_bytes;
};

Paths read_paths(const fs::path& run_dir, int n) {
  Paths p;
  const std::regex link(R"re(\{"peer": (\d+), "formed": true[^{}]*"path": "(\w+)"(, "dialled_by": \d+)?(, "relay": (\d+))?)re");
  const std::regex reach(R"re("reachability": \{"state": "(\w+)", "settled": (true|false), "how": "([^"]*)")re");
  for (int r = 0; r < n; ++r) {
    const fs::path s = run_dir / "peers" / std::to_string(r) / "summary.json";
    const std::string text = read_file(s);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link);
         it != std::sregex_iterator(); ++it) {
      const int q = std::stoi((*it)[1]);
      p.links[{r, q}] = (*it)[2];
      if ((*it)[5].matched) p.relay[{r, q}] = std::stoi((*it)[5]);
    }
    std::smatch m;
    if (std::regex_search(text, m, reach)) {
      p.reach[r] = m[1];
      p.reach_how[r] = m[3];
    }
    p.relayed_bytes[r] = number(s, "bytes_relayed");
  }
  return p;
}

}  // namespace

TEST_CASE("gossip run behind NATs and a firewall: unreachable peers dial out, a link neither end "
          "can dial is relayed, and the run equals the one with every peer reachable",
          "[peer][netem][reach]") {
  if (!can_emulate_nats()) return;
  for (const std::string graph : {"ring", "exponential"}) {
    INFO(graph);
    TempDir t;
    const auto cfg = write_config(t.path, 8, "dpsgd", 1, 1);
    replace_once(cfg, "train: 1536", "train: 2048");
    std::ofstream(t.path / "topo.yaml") << "generator: " << graph << "\nn: 8\n";
    const auto gossip_run = [&](const std::string& name, const std::string& netem) {
      const fs::path out = t.path / name;
      const Result r = run(bin() + " run " + cfg.string() + " --out " + out.string() +
                           " --no-progress --netem " + netem);
      INFO(r.output);
      REQUIRE(r.code == 0);
      return out;
    };
    const fs::path open = gossip_run("open", "rate=1gbit");
    // 1, 2, 3 behind one NAT, 4 and 5 behind another: 3-4 (and on the exponential graph 2-4,
    // 3-5 and 1-5) join two NATs, so no end can dial the other.
    const fs::path nat = gossip_run("nat", "rate=1gbit,nat=1+2+3/4+5");
    CHECK(hashes(nat / "summary.json") == hashes(open / "summary.json"));
    CHECK_THAT(read_file(nat / "summary.json"), Catch::Contains("\"connected\": true"));
    const Paths p = read_paths(nat, 8);
    for (int r = 0; r < 8; ++r) {
      INFO("peer " << r << ": " << p.reach_how.at(r));
      const bool natted = r >= 1 && r <= 5;
      CHECK(p.reach.at(r) == (natted ? "unreachable" : "reachable"));
      if (natted) CHECK_THAT(p.reach_how.at(r), Catch::Contains("no route"));
    }
    const auto nat_of = [](int r) { return r >= 1 && r <= 3 ? 1 : r >= 4 && r <= 5 ? 2 : 0; };
    int relayed = 0;
    for (const auto& [link, path] : p.links) {
      const auto [a, b] = link;
      INFO(a << "-" << b << " " << path);
      const bool across = nat_of(a) != 0 && nat_of(b) != 0 && nat_of(a) != nat_of(b);
      CHECK(path == (across ? "relayed" : "direct"));
      if (!across) continue;
      ++relayed;
      // Both ends went to the same relay: the lowest-ranked member that can be dialled.
      CHECK(p.relay.at(link) == 0);
    }
    CHECK(relayed >= 2);  // each relayed link, from both ends
    CHECK(p.relayed_bytes.at(0) > 0);
    for (int r = 1; r < 8; ++r) CHECK(p.relayed_bytes.at(r) == 0);
    const std::string events = read_file(nat / "events.jsonl");
    CHECK_THAT(events, Catch::Contains(R"("link": "reachability")"));
    CHECK_THAT(events, Catch::Contains(R"("link": "path")"));
    CHECK_THAT(events, Catch::Contains("relayed through peer 0"));
    if (graph != "ring") continue;
    // A firewall that drops what comes in (no NAT): peer 6 finds out from the dial backs that
    // time out, and dials its neighbours itself.
    const fs::path wall = gossip_run("wall", "rate=1gbit,firewall=6");
    CHECK(hashes(wall / "summary.json") == hashes(open / "summary.json"));
    const Paths w = read_paths(wall, 8);
    CHECK(w.reach.at(6) == "unreachable");
    CHECK_THAT(w.reach_how.at(6), Catch::Contains("timed out"));
    CHECK(w.links.at({5, 6}) == "direct");
    CHECK(w.links.at({7, 6}) == "direct");
    CHECK(w.reach.at(5) == "reachable");
  }
}

namespace {


/// Starts `gossip peer CFG --rank R --topology TOPO --out OUT` for each rank in the background,
/// logs in DIR/logR; waits for all; returns the logs.
std::string run_peers(const fs::path& dir, const std::vector<fs::path>& configs,
                      const fs::path& topo, const fs::path& out) {
  std::string cmd;
  for (std::size_t r = 0; r < configs.size(); ++r)
    cmd += bin() + " peer " + configs[r].string() + " --rank " + std::to_string(r) +
           " --topology " + topo.string() + " --out " + out.string() + " > " +
           (dir / named("log", static_cast<int>(r))).string() + " 2>&1 & ";
  const Result peers = run("sh -c '" + cmd + "wait'");
  std::string logs;
  for (std::size_t r = 0; r < configs.size(); ++r)
    logs += gossip::cat("peer ", r, ":\n", read_file(dir / named("log", static_cast<int>(r))), "\n");
  return logs;
}

}  // namespace

TEST_CASE("a peer whose announced address is wrong: gossip doctor says so before the run; in the "
          "run it is reported unreachable with the reason, early, and dials its neighbours",
          "[peer][reach]") {
  TempDir t;
  const RefusingPort wrong;
  const int base = test_port_base();
  std::string peers = "peers:\n";
  for (int r = 0; r < 4; ++r)
    peers += gossip::cat("  - 127.0.0.1:", r == 2 ? wrong.port : base + r, "\n");
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 1, peers, true, Tls::kKeys);
  // Peer 2 listens where no one is told it is (behind a port mapping that is not there).
  const fs::path cfg2 = t.path / "c2.yaml";
  std::string text = read_file(cfg);
  const auto at = text.find("connect_timeout_s: 20");
  REQUIRE(at != std::string::npos);
  text.insert(at, gossip::cat("bind: \"127.0.0.1:", base + 2, "\", "));
  std::ofstream(cfg2) << text;
  const fs::path out = t.path / "out";
  // Peers 0, 1 and 3 start; before peer 2 does, `gossip doctor` checks from its place.
  std::string cmd;
  const auto peer = [&](int r, const fs::path& c) {
    return bin() + " peer " + c.string() + " --rank " + std::to_string(r) + " --out " +
           out.string() + " > " + (t.path / named("log", r)).string() + " 2>&1";
  };
  for (int r : {0, 1, 3}) cmd += peer(r, cfg) + " & ";
  const fs::path doc = t.path / "doctor.txt";
  cmd += "sleep 1; " + bin() + " doctor " + cfg2.string() + " --rank 2 > " + doc.string() +
         " 2>&1; echo $? > " + (t.path / "doctor.code").string() + "; " + peer(2, cfg2) + "; wait";
  run("sh -c '" + cmd + "'");
  std::string logs;
  for (int r = 0; r < 4; ++r)
    logs += gossip::cat("peer ", r, ":\n", read_file(t.path / named("log", r)), "\n");
  INFO(logs);
  const std::string doctor = read_file(doc);
  INFO(doctor);
  CHECK(read_file(t.path / "doctor.code") == "0\n");  // its links form: it dials them
  for (int q : {1, 3}) {
    CHECK_THAT(doctor, Catch::Contains(gossip::cat("peer ", q, " at 127.0.0.1:", base + q,
                                                   ": dialled in ")));
    CHECK_THAT(doctor, Catch::Contains(gossip::cat("TLS identity peer ", q, " of run 'test'")));
  }
  CHECK_THAT(doctor, Catch::Contains(gossip::cat("it could not dial this peer back: 127.0.0.1:",
                                                 wrong.port, ": refused")));
  CHECK_THAT(doctor, Catch::Contains(gossip::cat("cannot dial this peer at 127.0.0.1:",
                                                 wrong.port, ": open port ")));
  const Result c = run(bin() + " collect " + out.string());
  INFO(c.output);
  REQUIRE(c.code == 0);
  const Paths p = read_paths(out, 4);
  CHECK(p.reach.at(2) == "unreachable");
  CHECK_THAT(p.reach_how.at(2), Catch::Contains(gossip::cat("could not dial 127.0.0.1:", wrong.port,
                                                            ": refused")));
  for (int r : {0, 1, 3}) CHECK(p.reach.at(r) != "unreachable");  // (or not known yet)
  // It dialled its neighbours: both its links formed (direct), and the run is whole.
  CHECK(p.links.at({1, 2}) == "direct");
  CHECK(p.links.at({3, 2}) == "direct");
  CHECK_THAT(read_file(out / "peers" / "2" / "summary.json"),
             Catch::Matches(R"re([\s\S]*"peer": 1, "formed": true[^}]*"dialled_by": 2[\s\S]*)re"));
  CHECK_THAT(read_file(out / "summary.json"), Catch::Contains("\"connected\": true"));
  // The event says so at round 0, seconds after the start (connect_timeout_s is 20).
  const std::string events = read_file(out / "events.jsonl");
  const std::regex said(R"re("peer": 2, "round": 0, "time_s": ([0-9.e-]+), "link": "reachability", "neighbour": 2[^\n]*unreachable)re");
  std::smatch m;
  REQUIRE(std::regex_search(events, m, said));
  CHECK(std::stod(m[1]) < 20.0);
}

namespace {

/// A relay of the rendezvous protocol on 127.0.0.1, standing in for a member: it pairs the two
/// ends of a link, then passes their bytes, flipping one bit at byte `flip_at` of what the
/// lower rank of `tampered` sends. Every socket and thread ends with the object (bounded waits).
class TestRelay {
 public:
  TestRelay(std::pair<int, int> tampered, std::size_t flip_at)
      : tampered_(tampered), flip_at_(flip_at) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    accepting_ = std::thread([this] { accept_loop(); });
  }
  ~TestRelay() {
    stop_ = true;
    accepting_.join();
    for (auto& t : pipes_) t.join();
    for (int fd : fds_) close(fd);
    close(fd_);
  }
  int port() const { return port_; }
  int flipped() const { return flipped_.load(); }
  int paired() const { return paired_.load(); }

 private:
  void accept_loop() {
    using namespace gossip::wire;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<int, Rendezvous>> waiting;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      fds_.push_back(c);
      timeval tv{5, 0};
      setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::array<std::byte, kRendezvousBytes> ask{};
      if (recv(c, ask.data(), ask.size(), MSG_WAITALL) != static_cast<ssize_t>(ask.size())) continue;
      const auto m = decode_rendezvous(ask);
      if (!m || m.value->kind != RendezvousKind::kRelayAsk) continue;
      const std::pair<std::uint32_t, std::uint32_t> key = std::minmax(m.value->from, m.value->to);
      const auto it = waiting.find(key);
      if (it == waiting.end() || it->second.second.from == m.value->from) {
        waiting[key] = {c, *m.value};
        continue;
      }
      const auto [other, other_ask] = it->second;
      waiting.erase(it);
      for (const auto& [fd, a] : {std::pair{other, other_ask}, std::pair{c, *m.value}}) {
        Rendezvous ok;
        ok.kind = RendezvousKind::kRelayAnswer;
        ok.run_tag = a.run_tag;
        ok.to = a.from;
        const auto bytes = encode_rendezvous(ok);
        send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      }
      ++paired_;
      const bool tamper = key == std::pair<std::uint32_t, std::uint32_t>(tampered_);
      const int lower = other_ask.from < m.value->from ? other : c;
      const int higher = lower == c ? other : c;
      pipes_.emplace_back([this, lower, higher, tamper] { pass(lower, higher, tamper); });
    }
  }
  void pass(int lower, int higher, bool tamper) {
    std::size_t from_lower = 0;
    std::vector<char> buf(64 * 1024);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      pollfd p[2] = {{lower, POLLIN, 0}, {higher, POLLIN, 0}};
      if (poll(p, 2, 100) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = recv(p[i].fd, buf.data(), buf.size(), 0);
        if (n <= 0) {
          shutdown(lower, SHUT_RDWR);
          shutdown(higher, SHUT_RDWR);
          return;
        }
        if (i == 0 && tamper && from_lower <= flip_at_ &&
            flip_at_ < from_lower + static_cast<std::size_t>(n)) {
          buf[flip_at_ - from_lower] ^= 0x10;
          ++flipped_;
        }
        if (i == 0) from_lower += static_cast<std::size_t>(n);
        send(i == 0 ? higher : lower, buf.data(), static_cast<std::size_t>(n), MSG_NOSIGNAL);
      }
    }
  }

  std::pair<int, int> tampered_;
  std::size_t flip_at_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> flipped_{0};
  std::atomic<int> paired_{0};
  std::vector<int> fds_;  // accept loop's only, closed at the end
  std::vector<std::thread> pipes_;
  std::thread accepting_;
};

}  // namespace

TEST_CASE("links through a relay run TLS end to end: a relay that flips a bit is detected, named "
          "and not used again; the links it passed intact train", "[peer][reach]") {
  TempDir t;
  // Three peers that cannot be dialled (net.reachable: no; the addresses they are given refuse)
  // and one relay named by address: every link goes through it; it alters 0-1 after its
  // handshakes (byte 30000 of what 0 sends: a few rounds in).
  const TestRelay relay({0, 1}, 30000);
  const RefusingPort nowhere[3];
  std::string peers = "peers:\n";
  for (int r = 0; r < 3; ++r) peers += gossip::cat("  - 127.0.0.1:", nowhere[r].port, "\n");
  // (Not through shared memory: the parameters pass the relay.)
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1, peers, false, Tls::kKeys);
  replace_once(cfg, "connect_timeout_s: 20",
               gossip::cat("connect_timeout_s: 10, reachable: no, relays: [\"127.0.0.1:",
                           relay.port(), "\"]"));
  std::vector<fs::path> configs;
  const int base = test_port_base();
  for (int r = 0; r < 3; ++r) {  // each listens somewhere of its own, where no one dials
    const fs::path c = t.path / named("c", r);
    std::string text = read_file(cfg);
    text.replace(text.find("reachable: no"), 0, gossip::cat("bind: \"127.0.0.1:", base + r, "\", "));
    std::ofstream(c) << text;
    configs.push_back(c);
  }
  const fs::path out = t.path / "out";
  const std::string logs = run_peers(t.path, configs, t.path / "topo.yaml", out);
  INFO(logs);
  const Result c = run(bin() + " collect " + out.string());
  INFO(c.output);
  REQUIRE(c.code == 0);
  CHECK(relay.paired() >= 3);
  CHECK(relay.flipped() == 1);
  const std::string relay_name = gossip::cat("127.0.0.1:", relay.port());
  // The end that opened the altered record names the relay, and the event says which link.
  CHECK_THAT(logs, Catch::Contains(gossip::cat("the relay ", relay_name, " altered the link to peer ")));
  CHECK_THAT(logs, Catch::Contains("a record failed authentication"));
  const std::string events = read_file(out / "events.jsonl");
  CHECK_THAT(events, Catch::Matches(R"re([\s\S]*"event": "relay_altered", "subject": [01][\s\S]*)re"));
  // Not used again: 0-1 did not come back; 0-2 and 1-2 carried the run to its end.
  const Paths p = read_paths(out, 3);
  CHECK(p.links.at({0, 2}) == "relayed");
  CHECK(p.links.at({1, 2}) == "relayed");
  CHECK(number(out / "summary.json", "rounds") == 32);
  CHECK_THAT(read_file(out / "summary.json"), Catch::Contains("\"connected\": true"));
  for (const auto& [r, q] : {std::pair{0, 1}, std::pair{1, 0}})
    CHECK_THAT(read_file(out / "peers" / std::to_string(r) / "summary.json"),
               Catch::Matches(gossip::cat(R"re([\s\S]*\{"peer": )re", q,
                                          R"re(, "formed": true[^}]*"state": "down"[\s\S]*)re")));
}

TEST_CASE("gossip doctor: a neighbour that is not running, or an address that does not resolve, "
          "means the run cannot start (exit 1), saying what to change; bad input is exit 2",
          "[peer][reach]") {
  TempDir t;
  const RefusingPort nowhere;
  const int base = test_port_base();
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1,
                                gossip::cat("peers:\n  - 127.0.0.1:", base, "\n  - 127.0.0.1:",
                                            nowhere.port, "\n  - no-such-host.invalid:", base + 2,
                                            "\n"),
                                true, Tls::kKeys);
  const Result r = run(bin() + " doctor " + cfg.string() + " --rank 0");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(gossip::cat("peer 1 at 127.0.0.1:", nowhere.port,
                                                   ": not dialled: refused")));
  CHECK_THAT(r.output, Catch::Contains(gossip::cat("nothing listens at 127.0.0.1:", nowhere.port,
                                                   ": start peer 1")));
  CHECK_THAT(r.output, Catch::Contains("no-such-host.invalid"));
  CHECK_THAT(r.output, Catch::Contains("does not resolve: fix its entry in the topology's peers:"));
  CHECK_THAT(r.output, Catch::Contains("the run cannot start as things are"));
  // It speaks as the doctor, from the rank it checks; no peer's line, no folder it never writes.
  CHECK_THAT(r.output, Catch::Contains("gossip doctor: checking the links of rank 0 (from --rank)"));
  CHECK_THAT(r.output, !Catch::Contains("gossip peer:"));
  CHECK_THAT(r.output, !Catch::Contains("files in"));
  const Result j = run(bin() + " doctor " + cfg.string() + " --rank 0 --json 2>/dev/null");
  CHECK(j.code == 1);
  CHECK_THAT(j.output, Catch::Contains(R"("can_start": false)"));
  CHECK_THAT(j.output, Catch::Contains(R"("peer": 1, "address": "127.0.0.1:)"));
  const Result bad = run(bin() + " doctor " + cfg.string() + " --rank 7");
  CHECK(bad.code == 2);
}

namespace {

/// A loopback port that takes no more connections: its listen queue (backlog 0) is full, so a
/// SYN to it is dropped and a dial times out, as at a firewall that drops connections.
struct DroppingPort {
  RefusingPort bound;
  int filler = -1;
  DroppingPort() {
    REQUIRE(listen(bound.fd, 0) == 0);
    filler = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(bound.port));
    REQUIRE(connect(filler, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~DroppingPort() { close(filler); }
};

}  // namespace

TEST_CASE("gossip doctor: a link neither end can dial will go through a relay that answers "
          "(exit 0); with no relay to ask, the run cannot start (exit 1)", "[peer][reach]") {
  TempDir t;
  RefusingPort member;  // peer 0: a member that takes connections (and so may relay)
  REQUIRE(listen(member.fd, 16) == 0);
  const DroppingPort firewalled;  // peer 2: its dials time out
  const int base = test_port_base();
  const auto cfg = write_config(t.path, 3, "dpsgd", 1, 1,
                                gossip::cat("peers:\n  - 127.0.0.1:", member.port,
                                            "\n  - 127.0.0.1:", base + 1, "\n  - 127.0.0.1:",
                                            firewalled.bound.port, "\n"),
                                true, Tls::kOff);
  const Result r = run(bin() + " doctor " + cfg.string() + " --rank 1");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains(gossip::cat("peer 2 at 127.0.0.1:", firewalled.bound.port,
                                                   ": not dialled: timed out")));
  CHECK_THAT(r.output, Catch::Contains(gossip::cat("the link to peer 2 will go through a relay: "
                                                   "peer 0 at 127.0.0.1:", member.port,
                                                   " answers here")));
  CHECK_THAT(r.output, Catch::Contains("the run can start"));
  replace_once(cfg, "tls: off", "tls: off, relays: none");
  const Result none = run(bin() + " doctor " + cfg.string() + " --rank 1 --json 2>/dev/null");
  INFO(none.output);
  CHECK(none.code == 1);
  CHECK_THAT(none.output, Catch::Contains("forms only through a relay, and none answers here"));
  CHECK_THAT(none.output, Catch::Contains(R"("link_forms": false, "relay": "")"));
}

// --- addresses learned, not all listed -------------------------------------------------------------

namespace {

/// The address sources of peer `r`'s summary.json: peer -> (address, source).
std::map<int, std::pair<std::string, std::string>> address_sources(const fs::path& run_dir, int r) {
  const std::string text =
      read_file(run_dir / "peers" / std::to_string(r) / "summary.json");
  const std::regex entry(R"re(\{"peer": (\d+), "address": "([^"]*)", "source": "(\w+)"\})re");
  std::map<int, std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry);
       it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = {(*it)[2], (*it)[3]};
  return out;
}

}  // namespace

TEST_CASE("addresses learned, not listed: peers whose topology lists only rank 0 learn each "
          "other's signed addresses through it, link up and train bit for bit as gossip sim",
          "[peer][reach][learned]") {
  TempDir t;
  const int n = 6, base = test_port_base();
  std::string peers = gossip::cat("peers:\n  - 127.0.0.1:", base, "\n");
  for (int r = 1; r < n; ++r) peers += "  - learned\n";
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 1, peers, true, Tls::kKeys);
  const fs::path out = t.path / "out";
  // Each starts on its own, announcing where it listens; none is told another's address but 0's.
  std::string cmd;
  for (int r = 0; r < n; ++r)
    cmd += gossip::cat(bin(), " peer ", cfg.string(), " --rank ", r, " --advertise 127.0.0.1:",
                       base + r, " --out ", out.string(), " > ", (t.path / named("log", r)).string(),
                       " 2>&1 & ");
  run("sh -c '" + cmd + "wait'");
  std::string logs;
  for (int r = 0; r < n; ++r)
    logs += gossip::cat("peer ", r, ":\n", read_file(t.path / named("log", r)), "\n");
  INFO(logs);
  const Result c = run(bin() + " collect " + out.string());
  INFO(c.output);
  REQUIRE(c.code == 0);
  CHECK_THAT(read_file(out / "summary.json"), Catch::Contains("\"connected\": true"));
  CHECK_THAT(read_file(out / "summary.json"), Catch::Contains("\"missing_links\": []"));
  for (int r = 0; r < n; ++r) {
    INFO("peer " << r);
    const auto known = address_sources(out, r);
    REQUIRE(known.size() == static_cast<std::size_t>(n));
    for (int q = 0; q < n; ++q) {
      CHECK(known.at(q).first == gossip::cat("127.0.0.1:", base + q));
      // Its own; every other learned from the signed records (rank 0's too: its record came).
      CHECK(known.at(q).second == (q == r ? "own" : "learned"));
    }
  }
  CHECK_THAT(logs, Catch::Contains("is not in the run's configuration: its signed record tells "
                                   "the members where it is"));
  // Each link was made once: the lower rank dialled (it learned the address) or the higher
  // (it waited for that), never both at once.
  CHECK_THAT(logs, !Catch::Contains("replaced by a new connection"));
  // The algorithm did not change: the same parameters as the simulator's, peer by peer.
  const Result sim = run(bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
  INFO(sim.output);
  REQUIRE(sim.code == 0);
  const auto a = hashes(out / "summary.json");
  REQUIRE(a.size() == static_cast<std::size_t>(n));
  CHECK(a == hashes(t.path / "sim" / "summary.json"));
  // Without TLS nothing can be learned: refused at the start, naming what to do.
  fs::create_directories(t.path / "plain");
  const auto plain = write_config(t.path / "plain", n, "dpsgd", 1, 1, peers, true, Tls::kOff);
  const Result refused = run(bin() + " peer " + plain.string() + " --rank 2 --out " +
                             (t.path / "o").string());
  CHECK(refused.code == 2);
  CHECK_THAT(refused.output, Catch::Contains("peer 1's address is learned: members learn an "
                                             "address only from a record signed by the peer's "
                                             "TLS certificate, and TLS is off"));
}

TEST_CASE("gossip peer --join with an address no member was given: the joiner announces it "
          "signed, the members learn it through their contact and mix with it",
          "[peer][elastic][learned]") {
  TempDir t;
  const int base = test_port_base();
  const auto cfg = write_config(t.path, 4, "dpsgd", 1, 200);
  std::ofstream(t.path / "topo.yaml", std::ios::trunc)
      << "generator: exponential\nn: 4\nelastic: true\nmax_peers: 6\npeers:\n"
      << "  - 127.0.0.1:" << base << "\n  - 127.0.0.1:" << base + 1 << "\n  - 127.0.0.1:"
      << base + 2 << "\n  - 127.0.0.1:" << base + 3 << "\n  - learned\n  - learned\n";
  const fs::path out = t.path / "run";
  const pid_t launcher = start_training_run(cfg, out, t.path / "run.txt");
  // Rank 4 listens on a port nobody was told of (the default would be base + 4; this test's
  // ports are base..base + 7, another test process's start 37 ports apart).
  const int port4 = base + 7;
  const Result join = run(gossip::cat(bin(), " peer ", cfg.string(), " --rank 4 --join 127.0.0.1:",
                                      base, " --advertise 127.0.0.1:", port4, " --tls-dir ",
                                      (out / "tls").string(), " --out ", out.string()));
  const std::string output = joined_run_output(launcher, t.path / "run.txt", join);
  INFO(output << "\n" << join.output);
  const fs::path s4 = out / "peers" / "4" / "summary.json";
  CHECK_THAT(summary_field(s4, "join"), Catch::Contains("\"donors\": [0, 1, 2, 3]"));
  CHECK(number(s4, "rounds") == number(out / "peers" / "0" / "summary.json", "rounds"));
  // Every member learned where it is from its signed record.
  for (int r = 0; r < 4; ++r) {
    INFO("peer " << r);
    const auto known = address_sources(out, r);
    CHECK(known.at(4) == std::pair<std::string, std::string>{gossip::cat("127.0.0.1:", port4),
                                                             "learned"});
  }
  CHECK(address_sources(out, 4).at(4).second == "own");
}

TEST_CASE("train.peers_per_process: several peers in one process, one thread each, end "
          "bit-identical to gossip sim", "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 6, "dpsgd", 1);
  replace_once(cfg, "backend: cpu", "backend: cpu, peers_per_process: 4");
  // Ranks 0-3 in one process, 4-5 in another (the last group is what is left).
  check_run_equals_sim(t.path, cfg, 6);
  const fs::path peers = t.path / "run" / "peers";
  const std::string first = read_file(peers / "0" / "peer.log");
  INFO(first);
  CHECK(first.find("gossip peer: rank 0 (from --ranks 0-3)") != std::string::npos);
  // Each peer's own lines (its first names its address) are in its process's log.
  for (int r : {1, 2, 3}) CHECK(first.find(gossip::cat("Z peer ", r, ": ")) != std::string::npos);
  CHECK(first.find("Z peer 4: ") == std::string::npos);
  const std::string second = read_file(peers / "4" / "peer.log");
  CHECK(second.find("gossip peer: rank 4 (from --ranks 4-5)") != std::string::npos);
  // A follower's log is its process's.
  CHECK(fs::is_symlink(peers / "2" / "peer.log"));
  CHECK(fs::read_symlink(peers / "5" / "peer.log") == fs::path("../4/peer.log"));
  // Each peer wrote its own files.
  for (int r = 0; r < 6; ++r) CHECK(fs::exists(peers / std::to_string(r) / "summary.json"));
}

TEST_CASE("peers over TCP on a backend whose tensors are its own (as a GPU's), with BatchNorm, "
          "with and without gossip.overlap, end bit-identical to gossip sim on the CPU; their "
          "sends during a step count as send", "[peer]") {
  // The backend poses as a GPU's: batches go up and messages come down; with overlap D-PSGD's
  // message comes down on a side stream that runs late, while the first step's kernels (its
  // BatchNorm writing running statistics into the flat buffer) run, and leaves from inside
  // that step.
  for (const bool overlap : {false, true}) {
    INFO("gossip.overlap: " << overlap);
    TempDir t;
    const auto cfg = write_config(t.path, 4, overlap ? "dpsgd, overlap: true" : "dpsgd", 1, 1,
                                  "", false, Tls::kOff);
    replace_once(cfg, "dim: 12", "dim: 16");
    replace_once(cfg, "model: {layers: [12, 24, 3]}",
                 "model: {input: [1, 4, 4], layers: [{conv2d: {out_channels: 4, kernel: 3, "
                 "padding: 1}}, batchnorm, relu, {residual: {out_channels: 4}}, globalavgpool, "
                 "{linear: {out: 3}}]}");
    const Result sim =
        run(bin() + " sim " + cfg.string() + " --out " + (t.path / "sim").string());
    INFO(sim.output);
    REQUIRE(sim.code == 0);
    const fs::path out = t.path / "run";
    gossip::PeerSetup setup = gossip::peer_setup(*gossip::parse_peer_arguments(
        {cfg.string(), "--ranks", "0-3", "--out", out.string()}));
    REQUIRE(setup.group.size() == 4);
    gossip::test::DeviceLikeBackend::async_downloads = 0;
    gossip::test::DeviceLikeBackend::overlapped_downloads = 0;
    gossip::test::DeviceLikeBackend::async_uploads = 0;
    std::vector<int> codes(4, -1);
    std::vector<std::string> errors(4);
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
      setup.group[r].backend = [] { return std::make_unique<gossip::test::DeviceLikeBackend>(); };
      threads.emplace_back([&, r] {
        try {
          codes[r] = gossip::run_peer(setup.config, *setup.topology, setup.group[r]);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    const auto want = hashes(t.path / "sim" / "summary.json");
    REQUIRE(want.size() == 4);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r << ": " << errors[r]);
      REQUIRE(codes[r] == 0);
      const fs::path summary = out / "peers" / std::to_string(r) / "summary.json";
      CHECK(hashes(summary) == std::vector<std::string>{want[r]});
      // The trace splits a step around a send inside it (else it would fold it into compute).
      if (overlap) CHECK(number(summary, "send") > 0.0);
    }
    const auto rounds =
        static_cast<std::int64_t>(number(out / "peers" / "0" / "summary.json", "rounds"));
    CHECK(rounds > 10);
    CHECK(gossip::test::DeviceLikeBackend::async_uploads >= 2 * 4 * rounds);  // x and y
    CHECK(gossip::test::DeviceLikeBackend::async_downloads == (overlap ? 4 * rounds : 0));
    CHECK(gossip::test::DeviceLikeBackend::overlapped_downloads == (overlap ? 4 * rounds : 0));
  }
}

TEST_CASE("train.peers_per_process: what acts on one peer's process is refused before any starts; "
          "a failing peer ends its process and the run names it", "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 4, "dpsgd", 1);
  replace_once(cfg, "backend: cpu", "backend: cpu, peers_per_process: 2");
  const std::string run_cmd = bin() + " run " + cfg.string() + " --out " +
                              (t.path / "run").string() + " --no-progress";
  std::ofstream(t.path / "kill.yaml") << "faults:\n  - {round: 3, kill: [1]}\n";
  for (const auto& [extra, says] :
       {std::pair<std::string, std::string>{" --faults " + (t.path / "kill.yaml").string(),
                                            "the fault schedule's kill at round 3 acts on one "
                                            "peer's process"},
        {" --restart on-failure", "--restart on-failure acts on one peer's process"}}) {
    const Result r = run(run_cmd + extra);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output,
               Catch::Contains("train.peers_per_process: 2 peers a process, but " + says));
    CHECK_FALSE(fs::exists(t.path / "run" / "peers"));
  }
  // gossip peer --ranks: a range of the topology's ranks, not with options that name one peer.
  for (const auto& [args, says] :
       {std::pair<std::string, std::string>{"--ranks 2-5", "the topology's ranks are 0-3"},
        {"--ranks 3-1", "give FIRST-LAST with FIRST <= LAST"},
        {"--ranks x", "expected FIRST-LAST"},
        {"--ranks 0-1 --rank 0", "--rank names one peer"}}) {
    const Result r = run(bin() + " peer " + cfg.string() + " " + args + " --out " +
                         (t.path / "p").string());
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(says));
  }
  // Peer 3 cannot listen (its port is taken): it ends the process of ranks 2-3, and gossip run
  // stops the others and says why.
  const int port = test_port_base() + 3;
  const Result r = run("python3 -c \"import socket,subprocess,sys; s=socket.socket(); "
                       "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                       "s.bind(('127.0.0.1'," + std::to_string(port) + ")); s.listen(); "
                       "sys.exit(subprocess.call(sys.argv[1:]))\" " + run_cmd);
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("peer 2 failed"));
  CHECK_THAT(r.output, Catch::Contains("rank 3 failed; ending its process and so the other 1 "
                                       "peer(s) in it"));
  CHECK_THAT(r.output, Catch::Contains("stopped all peers"));
}

TEST_CASE("gossip bench step --json names every figure it took, a peer's whole training step "
          "among them, and on the CPU why its step was not replayed as a CUDA graph", "[peer]") {
  // Figures only, no timing asserted: the benchmark's keys, as gpu_figures.py reads them.
  const Result r = run(bin() + " bench step --batch 8 --steps 2 --json");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (const char* key : {"\"b8_ours_us\": ", "\"b8_trainer_us\": ", "\"b8_graph_us\": null",
                          "\"b8_trainer_graph_us\": null"})
    CHECK_THAT(r.output, Catch::Contains(key));
  CHECK_THAT(r.output, Catch::Contains("\"graph_refusal\": \"cpu backend: no CUDA graphs here\""));
  const auto at = r.output.find("\"b8_trainer_us\": ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(r.output.substr(at + 17)) > 0.0);  // a step took some time
}
