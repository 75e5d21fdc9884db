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
#include <map>
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
      << "gossip: {topology: topo.yaml, algorithm: dpsgd, period: 1, round_timeout_s: 5}\n"
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
