// Tests for real peer processes (gossip peer / gossip run) over loopback and across network
// namespaces: bit-identical results with the simulator, a peer that dies, a peer that fails,
// a disconnected topology refused, and a multi-host run through veth links. Real processes,
// small synthetic problems; every run is bounded by the peers' own timeouts.
#include <catch2/catch.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "gossip/wire.hpp"
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

int test_port_base() { return 21000 + (getpid() * 37) % 20000; }

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
      << ", round_timeout_s: 5}\n"
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

}  // namespace

TEST_CASE("gossip run over TCP and gossip sim end with bit-identical parameters", "[peer]") {
  struct Case {
    const char* algorithm;
    int period;
    bool shared_memory;  // on one host peers read each other's parameters from shared memory
  };
  for (const Case c : {Case{"dpsgd", 1, true}, Case{"local_sgd", 3, true}, Case{"dpsgd", 1, false}}) {
    SECTION(gossip::cat(c.algorithm, " period ", c.period,
                        c.shared_memory ? ", shared memory" : ", TCP only")) {
      TempDir t;
      const auto cfg = write_config(t.path, 6, c.algorithm, c.period, 2, "", c.shared_memory);
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
    }
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

TEST_CASE("the peers train on when one of them is killed", "[peer]") {
  TempDir t;
  const auto cfg = write_config(t.path, 5, "dpsgd", 1, 400, "", true, Tls::kKeys);
  std::vector<pid_t> pids;
  for (int r = 0; r < 5; ++r) pids.push_back(start_peer(cfg, r, t.path / named("p", r)));
  // Let them connect and train a little, then kill peer 2 for good.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(t.path / "p2" / "metrics.csv") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pids[2], SIGKILL);
  for (int r = 0; r < 5; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (r == 2) continue;
    const fs::path dir = t.path / named("p", r);
    INFO("peer " << r << " log:\n" << read_file(dir.string() + ".log"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(fs::exists(dir / "summary.json"));
  }
  // Peer 2's neighbours noticed, and their monitors say the ring is now a line: still connected.
  for (int r : {1, 3}) {
    const std::string log = read_file(t.path / (named("p", r) + ".log"));
    INFO(log);
    CHECK(log.find("neighbours lost: 2; live graph still connected") != std::string::npos);
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
  for (int i = 0; i < n; ++i) {
    const auto dir = t.path / named("h", i);
    INFO("host " << i << " log:\n" << read_file(t.path / (named("h", i) + ".log")));
    REQUIRE(fs::exists(dir / "summary.json"));
    CHECK(number(dir / "summary.json", "test_accuracy") > 0.8);
    CHECK(number(dir / "summary.json", "bytes_sent") > 0);
  }
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
    const auto h = hashes(t.path / named("p", r) / "summary.json");
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
