// Tests for real peer processes (gossip peer / gossip run) over loopback and across network
// namespaces: bit-identical results with the simulator, a peer that dies, a peer that fails,
// a disconnected topology refused, and a multi-host run through veth links. Real processes,
// small synthetic problems; every run is bounded by the peers' own timeouts.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gossip/core.hpp"

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

/// A small synthetic run: `n` peers on a ring, given algorithm and period.
fs::path write_config(const fs::path& dir, int n, const std::string& algorithm, int period,
                      double epochs = 2, const std::string& extra_topology = "",
                      bool shared_memory = true) {
  std::ofstream(dir / "topo.yaml") << "generator: ring\nn: " << n << "\n" << extra_topology;
  std::ofstream(dir / "c.yaml")
      << "data:\n  synthetic: {train: 1536, test: 384, dim: 12, classes: 3}\n"
      << "model: {layers: [12, 24, 3]}\n"
      << "optimizer: {lr: 0.05, momentum: 0.9}\n"
      << "train: {epochs: " << epochs << ", batch: 16, seed: 5, backend: cpu}\n"
      << "gossip: {topology: topo.yaml, algorithm: " << algorithm << ", period: " << period
      << ", round_timeout_s: 5}\n"
      << "net: {run_id: test, base_port: " << test_port_base() << ", connect_timeout_s: 20"
      << (shared_memory ? "" : ", shared_memory: false") << "}\n";
  return dir / "c.yaml";
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
                     << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1, "
                     << "round_timeout_s: 5}\n"
                     << "net: {run_id: test-cnn, base_port: " << test_port_base()
                     << ", connect_timeout_s: 20}\n";
  check_run_equals_sim(t.path, cfg, 4);
  CHECK(number(t.path / "run" / "summary.json", "test_accuracy") > 0.8);
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
  const auto cfg = write_config(t.path, 5, "dpsgd", 1, 400);
  const std::string exe = bin();
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < 5; ++r) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string out = (t.path / named("p", r)).string();
      const std::string log = out + ".log";
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
  const auto cfg = write_config(t.path, n, "dpsgd", 1, 2, peers);
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
