// Tests for the topology module: closed-form spectra (ring, complete, torus), exact averaging
// (one-peer exponential, Base-(k+1)), weight properties on random graphs, the loader's line
// numbers on every broken fixture, and `gossip topo` exit codes from the built binary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gossip/core.hpp"
#include "gossip/rng.hpp"
#include "gossip/topology.hpp"
#include "tests/helpers.hpp"

namespace fs = std::filesystem;
using gossip::GeneratorSpec;
using gossip::Topology;
using gossip::WeightKind;

namespace {

const double kPi = std::acos(-1.0);

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string source_dir() { return env_or("GOSSIP_SOURCE_DIR", "."); }
std::string data_dir() { return env_or("GOSSIP_TEST_DATA", source_dir() + "/tests/data"); }

using gossip::test::gossip_bin;
using gossip::test::Run;
using gossip::test::run_gossip;

Topology generate(const std::string& kind, int n, std::optional<WeightKind> w = std::nullopt) {
  GeneratorSpec s;
  s.kind = gossip::parse_generator(kind);
  s.n = n;
  s.weights = w;
  return gossip::make_topology(s);
}

// Runs `rounds` rounds of x <- W(t) x through the neighbour lists, as an algorithm would.
std::vector<double> mix(const Topology& t, std::vector<double> x, std::int64_t rounds) {
  for (std::int64_t r = 0; r < rounds; ++r) {
    std::vector<double> next(x.size());
    for (int i = 0; i < t.n(); ++i) {
      next[i] = t.self_weight(i, r) * x[i];
      for (const auto& nb : t.in_neighbours(i, r)) next[i] += nb.weight * x[nb.peer];
    }
    x = std::move(next);
  }
  return x;
}

std::vector<double> ramp(int n) {
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::sin(1.0 + 3.7 * i) * 10.0 + i;
  return x;
}

void require_exact_average(const Topology& t) {
  const auto x = ramp(t.n());
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / t.n();
  for (double v : mix(t, x, t.period())) REQUIRE(v == Approx(mean).margin(1e-10));
}

double column_sum(const gossip::Graph& g, int i) {
  double s = g.self_weight(i);
  for (const auto& nb : g.out_neighbours(i)) s += nb.weight;
  return s;
}

double row_sum(const gossip::Graph& g, int i) {
  double s = g.self_weight(i);
  for (const auto& nb : g.in_neighbours(i)) s += nb.weight;
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fixture's first line: "# expect: LINE fragment".
std::pair<int, std::string> expectation(const std::string& path) {
  std::ifstream f(path);
  std::string first;
  std::getline(f, first);
  const std::string tag = "# expect: ";
  REQUIRE(first.rfind(tag, 0) == 0);
  std::istringstream is(first.substr(tag.size()));
  int line = 0;
  is >> line;
  std::string fragment;
  std::getline(is >> std::ws, fragment);
  return {line, fragment};
}

std::vector<std::string> broken_fixtures() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(data_dir())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("topo_", 0) == 0 && e.path().extension() == ".yaml")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("ring with 1/3 weights has rho = 1/3 + 2/3 cos(2 pi / n)", "[topology]") {
  for (int n : {3, 4, 5, 8, 16, 31, 64}) {
    SECTION("n = " + std::to_string(n)) {
      const Topology t = generate("ring", n);
      for (int i = 0; i < n; ++i)
        for (const auto& nb : t.in_neighbours(i, 0)) REQUIRE(nb.weight == Approx(1.0 / 3));
      const auto r = gossip::analyze(t);
      const double expected = std::abs(1.0 / 3 + 2.0 / 3 * std::cos(2 * kPi / n));
      REQUIRE(r.connected);
      REQUIRE(std::abs(r.rho - expected) < 1e-9);
      REQUIRE(r.diameter == n / 2);
      REQUIRE(r.doubly_stochastic);
      REQUIRE(r.symmetric);
    }
  }
}

TEST_CASE("the effective number of neighbours has its closed forms", "[topology][neighbours]") {
  // A ring's W = sum_k lambda_k u_k u_k^T with lambda_k = 1/3 + 2/3 cos(2 pi k / n), so the
  // random walk's stationary covariance is sum_k lambda_k^2 / (1 - gamma lambda_k^2) u_k u_k^T
  // and n_eff = 1 / ((1 - gamma) (1/n) sum_k lambda_k^2 / (1 - gamma lambda_k^2)).
  for (int n : {4, 16, 64}) {
    for (double gamma : {0.0, 0.5, 0.95, 0.99}) {
      INFO("n = " << n << ", gamma = " << gamma);
      double trace = 0.0;
      for (int k = 0; k < n; ++k) {
        const double l = 1.0 / 3 + 2.0 / 3 * std::cos(2 * kPi * k / n);
        trace += l * l / (1 - gamma * l * l);
      }
      const double expected = 1.0 / ((1 - gamma) * trace / n);
      const auto r = gossip::analyze(generate("ring", n), gamma);
      CHECK(r.effective_neighbours == Approx(expected).epsilon(1e-9));
      CHECK(r.neighbours_gamma == gamma);
    }
  }
  // The complete graph averages everything at once: n neighbours, whatever the decay. Not asked
  // for: NaN.
  for (double gamma : {0.0, 0.9}) {
    CHECK(gossip::analyze(generate("complete", 10, WeightKind::kUniform), gamma)
              .effective_neighbours == Approx(10.0));
  }
  CHECK(std::isnan(gossip::analyze(generate("ring", 8)).effective_neighbours));
  // More decay (a longer memory) counts more of the graph: never fewer neighbours.
  const Topology ring = generate("ring", 32);
  CHECK(gossip::analyze(ring, 0.99).effective_neighbours >
        gossip::analyze(ring, 0.5).effective_neighbours);
  // The one-peer exponential graph (time-varying, period log2 n) averages exactly each period:
  // more effective neighbours than the static ring of the same degree.
  CHECK(gossip::analyze(generate("one-peer-exponential", 16), 0.95).effective_neighbours >
        gossip::analyze(generate("ring", 16), 0.95).effective_neighbours);
  CHECK_THROWS_AS(gossip::analyze(ring, 1.0), gossip::InputError);
}

TEST_CASE("complete graph with uniform weights has spectral gap 1", "[topology]") {
  const auto r = gossip::analyze(generate("complete", 10, WeightKind::kUniform));
  REQUIRE(std::abs(r.spectral_gap - 1.0) < 1e-9);
  REQUIRE(r.exact_averaging);
  REQUIRE(r.exact_after == 1);
  REQUIRE(r.rounds_to_1000x == 1.0);
}

TEST_CASE("torus 4x4 with 1/5 weights has spectral gap 0.4", "[topology]") {
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kTorus;
  s.rows = s.cols = 4;
  const Topology t = gossip::make_topology(s);
  REQUIRE(t.n() == 16);
  for (int i = 0; i < 16; ++i) {
    REQUIRE(t.in_neighbours(i, 0).size() == 4);
    REQUIRE(t.self_weight(i, 0) == Approx(0.2));
  }
  const auto r = gossip::analyze(t);
  REQUIRE(std::abs(r.spectral_gap - 0.4) < 1e-9);
  REQUIRE(r.diameter == 4);
}

TEST_CASE("one-peer exponential graph averages exactly after log2 n rounds", "[topology]") {
  for (int log_n = 1; log_n <= 7; ++log_n) {
    const int n = 1 << log_n;
    SECTION("n = " + std::to_string(n)) {
      const Topology t = generate("one-peer-exponential", n);
      REQUIRE(t.directed());
      REQUIRE(t.period() == log_n);
      for (std::int64_t r = 0; r < t.period(); ++r)
        for (int i = 0; i < n; ++i) {
          REQUIRE(t.out_neighbours(i, r).size() == 1);
          REQUIRE(t.out_neighbours(i, r)[0].peer == (i + (1 << r)) % n);
        }
      const auto report = gossip::analyze(t);
      REQUIRE(report.exact_averaging);
      REQUIRE(report.exact_after == log_n);
      REQUIRE(report.doubly_stochastic);
      require_exact_average(t);
    }
  }
  SECTION("not exact for n = 6, but still converging") {
    const auto r = gossip::analyze(generate("one-peer-exponential", 6));
    REQUIRE_FALSE(r.exact_averaging);
    REQUIRE(r.rho < 1.0);
  }
}

TEST_CASE("a peer's lead over its out-neighbours is the way back to it, times the period",
          "[topology]") {
  // Undirected: a neighbour one round behind holds us back at once.
  CHECK(gossip::max_round_lead(generate("ring", 8)) == 1);
  // Directed ring: i -> i+1, and i+1 reaches i again only after n - 1 hops.
  for (int n : {3, 8, 16}) {
    const Topology t = gossip::load_topology_from_string(
        gossip::cat("generator: ring\nn: ", n, "\ndirected: true\nweights: uniform\n"), "t.yaml");
    CHECK(gossip::max_round_lead(t) == n - 1);
  }
  // One-peer exponential on 8 (period 3, arcs +1, +2, +4): from i+1 back to i takes +4 +2 +1.
  CHECK(gossip::max_round_lead(generate("one-peer-exponential", 8)) == 3 * 3);
}

TEST_CASE("Base-(k+1) graphs average exactly in finite time with degree <= k", "[topology]") {
  for (int k = 1; k <= 4; ++k)
    for (int n : {2, 3, 5, 6, 7, 10, 12, 13, 22, 25, 31, 100}) {
      DYNAMIC_SECTION("k = " << k << ", n = " << n) {
        GeneratorSpec s;
        s.kind = gossip::GeneratorKind::kBase;
        s.n = n;
        s.k = k;
        const Topology t = gossip::make_topology(s);
        REQUIRE_FALSE(t.directed());
        const auto r = gossip::analyze(t);
        REQUIRE(r.exact_averaging);
        REQUIRE(r.exact_after == t.period());
        REQUIRE(r.in_degree_max <= k);
        REQUIRE(r.doubly_stochastic);
        REQUIRE(r.symmetric);
        require_exact_average(t);
      }
    }
  SECTION("Base-2 on 6, 12 and 25 peers takes 4, 5 and 9 rounds") {
    // One neighbour per round; a one-peer exponential graph is never exact on these n.
    for (auto [n, most] : {std::pair{6, 4}, {12, 5}, {25, 9}}) {
      GeneratorSpec s;
      s.kind = gossip::GeneratorKind::kBase;
      s.n = n;
      s.k = 1;
      INFO("n = " << n);
      REQUIRE(gossip::make_topology(s).period() <= most);
    }
  }
}

TEST_CASE("Metropolis-Hastings weights are symmetric and doubly stochastic on random graphs",
          "[topology]") {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    DYNAMIC_SECTION("seed " << seed) {
      std::vector<GeneratorSpec> specs(3);
      specs[0].kind = gossip::GeneratorKind::kErdosRenyi, specs[0].n = 30, specs[0].p = 0.2;
      specs[1].kind = gossip::GeneratorKind::kRandomRegular, specs[1].n = 30, specs[1].degree = 3;
      specs[2].kind = gossip::GeneratorKind::kWattsStrogatz, specs[2].n = 30, specs[2].k = 4, specs[2].beta = 0.3;
      for (auto& s : specs) {
        s.seed = seed;
        const Topology t = gossip::make_topology(s);
        const auto& g = t.at(0);
        REQUIRE(g.symmetric());
        REQUIRE(g.doubly_stochastic());
        for (int i = 0; i < g.n(); ++i) {
          REQUIRE(row_sum(g, i) == Approx(1.0).margin(1e-12));
          REQUIRE(column_sum(g, i) == Approx(1.0).margin(1e-12));
          REQUIRE(g.self_weight(i) >= 0.0);
          const double di = static_cast<double>(g.in_neighbours(i).size());
          for (const auto& nb : g.in_neighbours(i)) {
            const double dj = static_cast<double>(g.in_neighbours(nb.peer).size());
            REQUIRE(nb.weight == Approx(1.0 / (1.0 + std::max(di, dj))));
            REQUIRE(g.weight(nb.peer, i) == nb.weight);
          }
        }
      }
    }
  }
}

TEST_CASE("random generators are deterministic per seed and have the asked shape",
          "[topology]") {
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kRandomRegular;
  s.n = 50;
  s.degree = 4;
  s.seed = 7;
  const Topology a = gossip::make_topology(s), b = gossip::make_topology(s);
  REQUIRE(a.fingerprint() == b.fingerprint());
  for (int i = 0; i < 50; ++i) REQUIRE(a.in_neighbours(i, 0).size() == 4);
  s.seed = 8;
  REQUIRE(gossip::make_topology(s).fingerprint() != a.fingerprint());
  s.kind = gossip::GeneratorKind::kWattsStrogatz;
  s.k = 4;
  s.beta = 0.0;  // no rewiring: the ring lattice
  const Topology ws = gossip::make_topology(s);
  const auto& lattice = ws.at(0);
  for (int i = 0; i < 50; ++i) REQUIRE(lattice.in_neighbours(i).size() == 4);
}

TEST_CASE("push-sum weights are column stochastic", "[topology]") {
  SECTION("exponential graph") {
    const Topology t = generate("exponential", 12);
    REQUIRE(t.weights() == WeightKind::kPushSum);
    const auto& g = t.at(0);
    for (int i = 0; i < 12; ++i) {
      REQUIRE(g.out_neighbours(i).size() == 4);  // +1, +2, +4, +8
      REQUIRE(column_sum(g, i) == Approx(1.0).margin(1e-12));
      for (const auto& nb : g.out_neighbours(i)) REQUIRE(g.weight(nb.peer, i) == nb.weight);
    }
  }
  SECTION("irregular directed graph from a file") {
    const Topology t = gossip::load_topology_from_string(
        "n: 4\ndirected: true\nedges: [[0, 1], [0, 2], [0, 3], [1, 2], [2, 3], [3, 0]]\n",
        "dir.yaml");
    const auto& g = t.at(0);
    REQUIRE(g.column_stochastic());
    REQUIRE_FALSE(g.row_stochastic());
    for (int i = 0; i < 4; ++i) {
      REQUIRE(column_sum(g, i) == Approx(1.0).margin(1e-12));
      const double share = 1.0 / (1.0 + static_cast<double>(g.out_neighbours(i).size()));
      REQUIRE(g.self_weight(i) == Approx(share));
      for (const auto& nb : g.out_neighbours(i)) REQUIRE(nb.weight == Approx(share));
    }
    const auto r = gossip::analyze(t);
    REQUIRE(r.connected);
    REQUIRE(r.column_stochastic);
    REQUIRE(r.rho < 1.0);
  }
}

TEST_CASE("neighbour lists are ascending and in/out agree", "[topology]") {
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kErdosRenyi;
  s.n = 40;
  s.p = 0.15;
  s.seed = 3;
  for (auto w : {WeightKind::kMetropolis, WeightKind::kUniform, WeightKind::kMaxDegree}) {
    s.weights = w;
    const Topology t = gossip::make_topology(s);
    const auto& g = t.at(0);
    REQUIRE(g.row_stochastic());
    for (int i = 0; i < g.n(); ++i) {
      auto in = g.in_neighbours(i);
      for (std::size_t k = 1; k < in.size(); ++k) REQUIRE(in[k - 1].peer < in[k].peer);
      for (const auto& nb : g.out_neighbours(i)) REQUIRE(g.weight(nb.peer, i) == nb.weight);
    }
  }
}

TEST_CASE("disconnected graphs list their components", "[topology]") {
  SECTION("undirected") {
    const auto r = gossip::analyze(gossip::load_topology_from_string(
        "n: 5\nedges: [[0, 1], [1, 2], [3, 4]]\n", "two.yaml"));
    REQUIRE_FALSE(r.connected);
    REQUIRE(r.components == std::vector<std::vector<int>>{{0, 1, 2}, {3, 4}});
    REQUIRE_FALSE(r.diameter);
    REQUIRE(r.rho == 1.0);
    REQUIRE(std::isinf(r.rounds_to_1000x));
  }
  SECTION("directed: a path is not strongly connected") {
    const auto r = gossip::analyze(gossip::load_topology_from_string(
        "n: 3\ndirected: true\nedges: [[0, 1], [1, 2]]\n", "path.yaml"));
    REQUIRE_FALSE(r.connected);
    REQUIRE(r.components.size() == 3);
  }
}

TEST_CASE("generator form, edge form and written files agree", "[topology]") {
  const Topology ring = generate("ring", 5);
  const Topology listed = gossip::load_topology_from_string(
      "n: 5\nedges:\n  - [0, 1]\n  - {from: 2, to: 1}\n  - [2, 3]\n  - [4, 3]\n  - [0, 4]\n",
      "ring.yaml");
  REQUIRE(ring.fingerprint() == listed.fingerprint());

  std::vector<GeneratorSpec> specs(5);
  specs[0].kind = gossip::GeneratorKind::kTorus, specs[0].rows = 3, specs[0].cols = 4;
  specs[1].kind = gossip::GeneratorKind::kBase, specs[1].n = 11, specs[1].k = 2;
  specs[2].kind = gossip::GeneratorKind::kOnePeerExponential, specs[2].n = 8;
  specs[3].kind = gossip::GeneratorKind::kStar, specs[3].n = 6, specs[3].weights = WeightKind::kUniform;
  specs[4].kind = gossip::GeneratorKind::kRandomRegular, specs[4].n = 12, specs[4].degree = 3, specs[4].seed = 4;
  for (const auto& s : specs) {
    INFO(s.kind);
    const Topology t = gossip::make_topology(s);
    const Topology from_spec = gossip::load_topology_from_string(gossip::to_yaml(s), "spec");
    const Topology from_edges = gossip::load_topology_from_string(gossip::to_yaml(t), "edges");
    REQUIRE(from_spec.fingerprint() == t.fingerprint());
    REQUIRE(from_edges.fingerprint() == t.fingerprint());
    REQUIRE(from_edges.period() == t.period());
  }
  const Topology other = generate("ring", 5, WeightKind::kMaxDegree);
  REQUIRE(other.fingerprint() == ring.fingerprint());  // max-degree on a ring is also 1/3
  REQUIRE(generate("line", 5).fingerprint() != ring.fingerprint());
}

TEST_CASE("laziness: a makes W a I + (1 - a) W, moving every eigenvalue to a + (1 - a) lambda",
          "[topology]") {
  // The ring of 6 with weights 1/3 has eigenvalues 1/3 + 2/3 cos(2 pi k / 6): 1, 2/3, 0, -1/3.
  const Topology ring = generate("ring", 6);
  REQUIRE(gossip::smallest_eigenvalue(ring.at(0)).value() == Approx(-1.0 / 3));
  const Topology lazy = gossip::load_topology_from_string(
      "generator: ring\nn: 6\nlaziness: 0.25\npeers: [a:1, a:2, a:3, a:4, a:5, a:6]\n", "lazy");
  REQUIRE(lazy.self_weight(2, 0) == Approx(0.25 + 0.75 / 3));
  for (const auto& nb : lazy.in_neighbours(2, 0)) REQUIRE(nb.weight == Approx(0.75 / 3));
  REQUIRE(gossip::smallest_eigenvalue(lazy.at(0)).value() == Approx(0.25 - 0.75 / 3).margin(1e-12));
  const auto r = gossip::analyze(lazy);
  REQUIRE(r.doubly_stochastic);
  REQUIRE(r.symmetric);
  REQUIRE(r.rho == Approx(0.25 + 0.75 * 2.0 / 3));  // the second eigenvalue, 2/3, moved
  REQUIRE(lazy.address(5) == "a:6");
  // Written out it is an explicit edge list with the same weights.
  REQUIRE(gossip::load_topology_from_string(gossip::to_yaml(lazy), "w").fingerprint() ==
          lazy.fingerprint());
  // 0 changes nothing; a directed graph keeps its column sums.
  REQUIRE(gossip::load_topology_from_string("generator: ring\nn: 6\nlaziness: 0\n", "z")
              .fingerprint() == ring.fingerprint());
  const Topology exp = gossip::load_topology_from_string(
      "generator: exponential\nn: 8\nlaziness: 0.5\n", "exp");
  REQUIRE(gossip::analyze(exp).column_stochastic);
  REQUIRE_FALSE(gossip::smallest_eigenvalue(exp.at(0)).has_value());  // not symmetric
}

TEST_CASE("peers carry addresses", "[topology]") {
  const Topology t = gossip::load_topology_from_string(
      "generator: ring\npeers:\n  - 10.0.0.1:7000\n  - {id: 2, address: \"[::1]:7002\"}\n"
      "  - {id: 1, address: host-b:7001}\n",
      "peers.yaml");
  REQUIRE(t.n() == 3);
  REQUIRE(t.address(0) == "10.0.0.1:7000");
  REQUIRE(t.address(1) == "host-b:7001");
  REQUIRE(t.address(2) == "[::1]:7002");
  REQUIRE_FALSE(generate("ring", 3).address(0));
}

TEST_CASE("every broken fixture is rejected with its file and line", "[topology]") {
  const auto files = broken_fixtures();
  REQUIRE(files.size() >= 10);
  for (const auto& path : files) {
    DYNAMIC_SECTION(fs::path(path).filename().string()) {
      const auto [line, fragment] = expectation(path);
      const std::string where = path + ":" + std::to_string(line) + ":";
      try {
        gossip::load_topology(path);
        FAIL("loaded without error");
      } catch (const gossip::InputError& e) {
        const std::string msg = e.what();
        INFO(msg);
        REQUIRE(msg.rfind(where, 0) == 0);
        REQUIRE(msg.find(fragment) != std::string::npos);
      }
      const Run r = run_gossip("topo " + path);
      INFO(r.output);
      REQUIRE(r.code == gossip::kExitBadInput);
      REQUIRE(r.output.find(where) != std::string::npos);
    }
  }
}

TEST_CASE("gossip topo reports the ring-16 spectral gap as JSON", "[topology][cli]") {
  const Run r = run_gossip("topo " + source_dir() + "/topologies/ring-16.yaml --json");
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(r.output.find("\"connected\": true") != std::string::npos);
  const auto at = r.output.find("\"spectral_gap\": ");
  REQUIRE(at != std::string::npos);
  const double gap = std::strtod(r.output.c_str() + at + 16, nullptr);
  REQUIRE(std::abs(gap - (1.0 - (1.0 / 3 + 2.0 / 3 * std::cos(kPi / 8)))) < 1e-9);
}

TEST_CASE("shipped topologies load; the disconnected one exits 3", "[topology][cli]") {
  int files = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/topologies")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const std::string name = e.path().filename().string();
    INFO(name);
    const auto r = gossip::analyze(gossip::load_topology(e.path().string()));
    const bool disconnected = name.find("disconnected") != std::string::npos;
    REQUIRE(r.connected == !disconnected);
    const Run run = run_gossip("topo " + e.path().string());
    INFO(run.output);
    REQUIRE(run.code == (disconnected ? gossip::kExitDisconnected : gossip::kExitOk));
    if (disconnected) REQUIRE(run.output.find("components") != std::string::npos);
  }
  REQUIRE(files >= 10);
}

TEST_CASE("gossip topo --generate writes a file that checks out", "[topology][cli]") {
  const std::string out = (fs::temp_directory_path() /
                           ("gossip-topo-" + std::to_string(::getpid()) + ".yaml")).string();
  Run r = run_gossip("topo --generate torus --rows 3 --cols 5 -o " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(gossip::load_topology(out).n() == 15);
  r = run_gossip("topo --generate random-regular --n 10 --degree 3 --seed 2 --edges -o " + out);
  REQUIRE(r.code == 0);
  REQUIRE(read_text(out).find("edges:") != std::string::npos);
  REQUIRE(run_gossip("topo " + out + " --dot").output.find("graph topology") != std::string::npos);
  fs::remove(out);
  REQUIRE(run_gossip("topo --generate ring --n 2").code == gossip::kExitBadInput);
  REQUIRE(run_gossip("topo --generate moebius --n 8").code == gossip::kExitBadInput);
  REQUIRE(run_gossip("topo --generate ring --n 8 --rows 2").code == gossip::kExitBadInput);
  REQUIRE(run_gossip("topo --generate torus --rows 4").code == gossip::kExitBadInput);
  REQUIRE(run_gossip("topo --help").code == 0);
}

TEST_CASE("gossip topo --generate refuses a disconnected graph unless asked", "[topology][cli]") {
  const std::string out = (fs::temp_directory_path() /
                           ("gossip-topo-er-" + std::to_string(::getpid()) + ".yaml")).string();
  fs::remove(out);
  const std::string er = "topo --generate erdos-renyi --n 8 --p 0.2 --seed 3";
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kErdosRenyi;
  s.n = 8;
  s.p = 0.2;
  s.seed = 3;
  REQUIRE(gossip::connected_components(gossip::make_topology(s)).size() > 1);

  SECTION("refused: exit 3, the components named, no file") {
    const Run r = run_gossip(er + " -o " + out);
    INFO(r.output);
    REQUIRE(r.code == gossip::kExitDisconnected);
    REQUIRE(r.output.find("components: {0") != std::string::npos);
    REQUIRE(r.output.find("--resample") != std::string::npos);
    REQUIRE(!fs::exists(out));
    const Run printed = run_gossip(er);
    REQUIRE(printed.code == gossip::kExitDisconnected);
    REQUIRE(printed.output.find("generator:") == std::string::npos);
  }
  SECTION("--allow-disconnected writes it as drawn") {
    const Run r = run_gossip(er + " --allow-disconnected -o " + out);
    INFO(r.output);
    REQUIRE(r.code == gossip::kExitOk);
    REQUIRE(gossip::load_topology(out).fingerprint() == gossip::make_topology(s).fingerprint());
    REQUIRE(run_gossip("topo " + out).code == gossip::kExitDisconnected);
  }
  SECTION("--resample writes the first connected seed, and the file gives that graph again") {
    const gossip::Draw d = gossip::draw_connected(s, 100);
    REQUIRE(d.connected());
    REQUIRE(d.spec.seed > 3);
    REQUIRE(d.draws == static_cast<int>(d.spec.seed - 3 + 1));
    for (const char* edges : {"", " --edges"}) {
      const Run r = run_gossip(er + " --resample" + edges + " -o " + out);
      INFO(r.output);
      REQUIRE(r.code == gossip::kExitOk);
      const std::string text = read_text(out);
      REQUIRE(text.find("seed " + std::to_string(d.spec.seed)) != std::string::npos);
      const Topology loaded = gossip::load_topology(out);
      REQUIRE(loaded.fingerprint() == d.topology.fingerprint());
      REQUIRE(gossip::analyze(loaded).connected);
      REQUIRE(run_gossip("topo " + out).code == gossip::kExitOk);
    }
    REQUIRE(read_text(out).find("edges:") != std::string::npos);
  }
  SECTION("--resample gives up after 100 seeds, and applies only to random generators") {
    const Run r = run_gossip("topo --generate erdos-renyi --n 8 --p 0 --seed 3 --resample -o " +
                             out);
    INFO(r.output);
    REQUIRE(r.code == gossip::kExitDisconnected);
    REQUIRE(r.output.find("3..102 (100 draws)") != std::string::npos);
    REQUIRE(!fs::exists(out));
    REQUIRE(run_gossip("topo --generate ring --n 8 --resample").code == gossip::kExitBadInput);
    REQUIRE(run_gossip(er + " --resample --allow-disconnected").code == gossip::kExitBadInput);
    REQUIRE(run_gossip("topo --generate erdos-renyi --n 8 --p 0.5 --seed 2147483648").code ==
            gossip::kExitBadInput);
  }
  fs::remove(out);
}

TEST_CASE("analysis of a 1024-peer random regular graph takes under 5 s", "[topology][perf]") {
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kRandomRegular;
  s.n = 1024;
  s.degree = 4;
  s.seed = 1;
  const auto start = std::chrono::steady_clock::now();
  const auto r = gossip::analyze(gossip::make_topology(s));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("seconds: " << seconds << ", rho: " << r.rho);
  REQUIRE(r.connected);
  REQUIRE(r.rho > 0.5);
  REQUIRE(r.rho < 1.0);
  REQUIRE(seconds < 5.0);
}

TEST_CASE("topologies too big to build are refused at once, with file and line", "[topology]") {
  // The limit: 2^22 mixing weights over one period (n per round plus one per arc).
  const auto start = std::chrono::steady_clock::now();
  const auto refused = [](const std::string& text, const std::string& where,
                          const std::string& what) {
    REQUIRE_THROWS_WITH(gossip::load_topology_from_string(text, "big.yaml"),
                        Catch::StartsWith(where) && Catch::Contains(what));
  };
  SECTION("complete and erdos-renyi generators on 65536 peers") {
    refused("generator: complete\nn: 65536\n", "big.yaml:2: generator complete on 65536 peers",
            "more than the limit of 4194304");
    refused("generator: erdos-renyi\np: 0.5\nseed: 3\nn: 65536\n", "big.yaml:4:",
            "more than the limit of 4194304");
    const Run r = run_gossip("topo --generate complete --n 65536");
    INFO(r.output);
    REQUIRE(r.code == gossip::kExitBadInput);
    REQUIRE(r.output.find("more than the limit") != std::string::npos);
  }
  SECTION("a short file that repeats one round through YAML aliases") {
    // The complete graph on 64 peers as one anchored round, repeated by aliases to 5000 rounds:
    // 30 KB of YAML asking for 5000 * (64 + 2 * 2016) weights, some 20 million.
    std::ostringstream yaml;
    yaml << "n: 64\nsequence: [\n  &r {edges: [";
    for (int i = 0; i < 64; ++i)
      for (int j = i + 1; j < 64; ++j) yaml << (i + j > 1 ? "," : "") << "[" << i << "," << j << "]";
    yaml << "]},\n  *r";
    for (int i = 1; i < 5000; ++i) yaml << ",*r";
    const std::string text = yaml.str() + "]";
    REQUIRE(text.size() < 32 * 1024);
    refused(text + "\n", "big.yaml:3: sequence: rounds 0..1024 have",
            "more than the limit of 4194304");
  }
  SECTION("more rounds than the limit") {
    std::string text = "n: 2\nsequence: [&r {edges: [[0, 1]]}";
    for (int i = 0; i < 65536; ++i) text += ", *r";
    refused(text + "]\n", "big.yaml:2: sequence: 65537 rounds", "limit of 65536");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(seconds < 2.0);
}

TEST_CASE("a directory given as a topology says it is one", "[topology]") {
  REQUIRE_THROWS_WITH(gossip::load_topology(data_dir()),
                      data_dir() + ": is a directory, not a YAML file");
  const Run r = run_gossip("topo " + data_dir());
  INFO(r.output);
  REQUIRE(r.code == gossip::kExitBadInput);
  REQUIRE(r.output.find("is a directory") != std::string::npos);
}

TEST_CASE("EquiTopo: EquiStatic is the mean of k shift graphs and EquiDyn one shift a round; "
          "their contraction per round stays in a band as n grows, where the ring's does not",
          "[topology]") {
  // EquiStatic (Song et al., NeurIPS 2022): W = (1/k) sum_m ((1/n) I + ((n-1)/n) P_{a_m}) with
  // k shifts a_m drawn from 1..n-1 (U-: with each graph's transpose). Doubly stochastic, self
  // weight 1/n, every row's neighbours summing to (n-1)/n.
  for (const bool directed : {false, true}) {
    GeneratorSpec s;
    s.kind = gossip::GeneratorKind::kEquiStatic;
    s.n = 32;
    s.k = 6;
    s.seed = 3;
    s.directed = directed;
    const Topology t = gossip::make_topology(s);
    INFO("directed " << directed);
    REQUIRE(t.weights() == WeightKind::kGenerator);
    const auto& g = t.at(0);
    for (int i = 0; i < 32; ++i) {
      double row = 0.0;
      for (const auto& e : g.in_neighbours(i)) row += e.weight;
      CHECK(row == Approx(31.0 / 32.0));
      CHECK(g.self_weight(i) == Approx(1.0 / 32.0));
      CHECK(g.in_neighbours(i).size() <= (directed ? 6u : 12u));
    }
    const auto r = gossip::analyze(t);
    CHECK(r.doubly_stochastic);
    CHECK(r.symmetric == !directed);
    CHECK(gossip::load_topology_from_string(gossip::to_yaml(s), "e.yaml").fingerprint() ==
          t.fingerprint());
  }
  // EquiDyn: round t one shift a_t, W = (1/2) I + (1/2) W_{a_t}: each peer keeps (n+1)/(2n) and
  // takes (n-1)/(2n) from one peer (D-: i + a_t; U-: its partner in a matching along a_t).
  for (const bool directed : {false, true}) {
    GeneratorSpec s;
    s.kind = gossip::GeneratorKind::kEquiDyn;
    s.n = 20;
    s.seed = 5;
    s.directed = directed;
    const Topology t = gossip::make_topology(s);
    INFO("directed " << directed);
    for (std::int64_t r = 0; r < 30; ++r) {
      const auto& g = t.at(r);
      std::set<int> shifts;
      for (int i = 0; i < 20; ++i) {
        const auto in = g.in_neighbours(i);
        REQUIRE(in.size() <= 1);
        if (directed) REQUIRE(in.size() == 1);
        if (in.empty()) {
          CHECK(g.self_weight(i) == 1.0);
          continue;
        }
        CHECK(in[0].weight == Approx(19.0 / 40.0));
        CHECK(g.self_weight(i) == Approx(21.0 / 40.0));
        const int a = (in[0].peer - i + 20) % 20;
        shifts.insert(directed ? a : std::min(a, 20 - a));
        if (!directed) CHECK(g.in_neighbours(in[0].peer)[0].peer == i);  // a matching
      }
      CHECK(shifts.size() == 1u);  // one shift a round
    }
  }
  // Their rate per round over n = 16 .. 256: in a band (the claim of O(1) consensus rate), where
  // the ring's climbs towards 1.
  std::vector<double> dyn, stat, ring;
  for (const int n : {16, 64, 256}) {
    GeneratorSpec d;
    d.kind = gossip::GeneratorKind::kEquiDyn;
    d.n = n;
    d.seed = 1;
    dyn.push_back(gossip::analyze(gossip::make_topology(d)).rho_per_round);
    GeneratorSpec e = d;
    e.kind = gossip::GeneratorKind::kEquiStatic;
    e.k = 2 * static_cast<int>(std::ceil(std::log2(n)));
    stat.push_back(gossip::analyze(gossip::make_topology(e)).rho_per_round);
    GeneratorSpec g;
    g.kind = gossip::GeneratorKind::kRing;
    g.n = n;
    ring.push_back(gossip::analyze(gossip::make_topology(g)).rho_per_round);
  }
  INFO("equidyn " << dyn[0] << " " << dyn[1] << " " << dyn[2] << "; equistatic " << stat[0]
       << " " << stat[1] << " " << stat[2] << "; ring " << ring[0] << " " << ring[1] << " "
       << ring[2]);
  for (double v : dyn) CHECK((v > 0.5 && v < 0.85));
  for (double v : stat) CHECK((v > 0.2 && v < 0.7));
  CHECK(ring[2] > 0.999);
  CHECK(ring[0] < ring[1]);
}

TEST_CASE("random-matching: each round a matching drawn from the seed and round, both ends "
          "agreeing, weights 1/2 (NoLoCo's pairs)", "[topology]") {
  for (const int n : {12, 11}) {
    INFO("n " << n);
    GeneratorSpec s;
    s.kind = gossip::GeneratorKind::kRandomMatching;
    s.n = n;
    s.seed = 7;
    s.period = 40;
    const Topology t = gossip::make_topology(s);
    REQUIRE(t.period() == 40);
    REQUIRE_FALSE(t.directed());
    bool rounds_differ = false;
    for (std::int64_t r = 0; r < t.period(); ++r) {
      const auto& g = t.at(r);
      int alone = 0;
      for (int i = 0; i < n; ++i) {
        const auto in = g.in_neighbours(i);
        REQUIRE(in.size() <= 1);  // one partner at most
        if (in.empty()) {
          ++alone;
          REQUIRE(g.self_weight(i) == 1.0);
          continue;
        }
        const int j = in[0].peer;
        REQUIRE(j != i);
        // Both ends agree: j's partner is i, and each keeps half and takes half.
        REQUIRE(g.in_neighbours(j).size() == 1);
        REQUIRE(g.in_neighbours(j)[0].peer == i);
        REQUIRE(in[0].weight == 0.5);
        REQUIRE(g.self_weight(i) == 0.5);
        if (r > 0) {
          const auto before = t.at(r - 1).in_neighbours(i);
          rounds_differ = rounds_differ || before.empty() || before[0].peer != j;
        }
      }
      CHECK(alone == n % 2);  // everybody paired; n odd: one alone
    }
    CHECK(rounds_differ);
    CHECK(gossip::make_topology(s).fingerprint() == t.fingerprint());
    GeneratorSpec other = s;
    other.seed = 8;
    CHECK(gossip::make_topology(other).fingerprint() != t.fingerprint());
    CHECK(gossip::load_topology_from_string(gossip::to_yaml(s), "m.yaml").fingerprint() ==
          t.fingerprint());
  }
  CHECK_THROWS_AS(gossip::load_topology_from_string(
                      "generator: random-matching\nn: 8\nperiod: 0\n", "m.yaml"),
                  gossip::InputError);
  CHECK_THROWS_AS(gossip::load_topology_from_string("generator: random-matching\nn: 1\n", "m.yaml"),
                  gossip::InputError);
}

TEST_CASE("epidemic: each round each peer sends to s peers drawn from the seed, round and rank",
          "[topology]") {
  GeneratorSpec s;
  s.kind = gossip::GeneratorKind::kEpidemic;
  s.n = 12;
  s.s = 3;
  s.seed = 7;
  s.period = 50;
  const Topology t = gossip::make_topology(s);
  REQUIRE(t.period() == 50);
  REQUIRE(t.directed());
  REQUIRE(t.weights() == WeightKind::kUniform);
  bool rounds_differ = false;
  for (std::int64_t r = 0; r < t.period(); ++r) {
    const auto& g = t.at(r);
    std::vector<int> in_degree(12, 0);
    for (int i = 0; i < 12; ++i) {
      const auto out = g.out_neighbours(i);
      REQUIRE(out.size() == 3);  // exactly s others, no self-loop, none twice
      std::vector<int> to;
      for (const auto& o : out) {
        REQUIRE(o.peer != i);
        to.push_back(o.peer);
        ++in_degree[static_cast<std::size_t>(o.peer)];
      }
      std::sort(to.begin(), to.end());
      REQUIRE(std::adjacent_find(to.begin(), to.end()) == to.end());
      if (r > 0) {
        std::vector<int> before;
        for (const auto& o : t.at(r - 1).out_neighbours(i)) before.push_back(o.peer);
        std::sort(before.begin(), before.end());
        rounds_differ = rounds_differ || before != to;
      }
    }
    // Epidemic Learning's averaging: a peer takes the mean of its own model and those it
    // received, 1 / (received + 1) each (rows sum to 1; columns need not).
    for (int i = 0; i < 12; ++i) {
      const double w = 1.0 / (in_degree[static_cast<std::size_t>(i)] + 1);
      REQUIRE(g.self_weight(i) == Approx(w));
      for (const auto& e : g.in_neighbours(i)) REQUIRE(e.weight == Approx(w));
    }
  }
  CHECK(rounds_differ);
  // The same spec draws the same rounds anywhere; another seed others; the file forms agree.
  CHECK(gossip::make_topology(s).fingerprint() == t.fingerprint());
  GeneratorSpec other = s;
  other.seed = 8;
  CHECK(gossip::make_topology(other).fingerprint() != t.fingerprint());
  const std::string yaml = gossip::to_yaml(s);
  CHECK(yaml.find("s: 3") != std::string::npos);
  CHECK(gossip::load_topology_from_string(yaml, "epidemic.yaml").fingerprint() ==
        t.fingerprint());
  // Without a period: 1,000 rounds where they fit.
  GeneratorSpec open = s;
  open.period = 0;
  CHECK(gossip::make_topology(open).period() == 1000);
  CHECK(gossip::epidemic_default_period(2048, 2047) == 1);
  // s must leave someone to send to, and be given.
  for (const char* text : {"generator: epidemic\nn: 5\ns: 5\n", "generator: epidemic\nn: 5\n",
                           "generator: epidemic\nn: 5\ns: 0\n",
                           "generator: epidemic\nn: 5\ns: 2\nperiod: 0\n"}) {
    INFO(text);
    CHECK_THROWS_AS(gossip::load_topology_from_string(text, "e.yaml"), gossip::InputError);
  }
  // 50 rounds of fast mixing: the period's product is below rounding, so the rate per round
  // comes from a prefix's product; measured against mixing random vectors for 16 rounds.
  const auto report = gossip::analyze(t);
  CHECK(report.connected);
  CHECK(report.rate_rounds < report.period);
  REQUIRE(report.rho_per_round < 1.0);
  std::vector<double> x(12);
  for (int i = 0; i < 12; ++i) x[static_cast<std::size_t>(i)] = std::sin(1.0 + 7.0 * i);
  auto spread = [](const std::vector<double>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    double s2 = 0.0;
    for (double e : v) s2 += (e - mean) * (e - mean);
    return std::sqrt(s2);
  };
  const double before = spread(x);
  for (std::int64_t r = 0; r < 16; ++r) {
    const auto& g = t.at(r);
    std::vector<double> y(12);
    for (int i = 0; i < 12; ++i) {
      double v = g.self_weight(i) * x[static_cast<std::size_t>(i)];
      for (const auto& e : g.in_neighbours(i)) v += e.weight * x[static_cast<std::size_t>(e.peer)];
      y[static_cast<std::size_t>(i)] = v;
    }
    x = y;
  }
  // Within a factor of n of the predicted contraction, either way.
  const double predicted = std::pow(report.rho_per_round, 16.0);
  CHECK(spread(x) / before < 12.0 * predicted);
  CHECK(spread(x) / before > predicted / 12.0 / 1e3);
}

namespace {

gossip::ElasticSpec elastic_spec(gossip::GeneratorKind kind, int n, int max_peers) {
  gossip::ElasticSpec s;
  s.generator.kind = kind;
  s.generator.n = n;
  s.generator.degree = kind == gossip::GeneratorKind::kRandomRegular ? 3 : 0;
  s.generator.seed = 7;
  s.max_peers = max_peers;
  return s;
}

/// The generators whose row says elastic.
std::vector<gossip::GeneratorKind> elastic_kinds() {
  std::vector<gossip::GeneratorKind> kinds;
  for (const gossip::GeneratorTraits& row : gossip::generator_table())
    if (row.elastic) kinds.push_back(row.kind);
  return kinds;
}

}  // namespace

TEST_CASE("an elastic graph is a function of the member set: the same members give the same "
          "graph, symmetric, doubly stochastic and connected among them",
          "[topology][elastic]") {
  auto rng = gossip::make_rng(11, 0, gossip::Stream::kTopology);
  for (const gossip::GeneratorKind kind : elastic_kinds()) {
    DYNAMIC_SECTION(kind) {
      const gossip::ElasticSpec spec = elastic_spec(kind, 4, 40);
      for (int trial = 0; trial < 40; ++trial) {
        // A member set of 1 to 24 ranks drawn from 0..39.
        std::vector<int> all(40);
        std::iota(all.begin(), all.end(), 0);
        for (std::size_t i = all.size(); i > 1; --i)
          std::swap(all[i - 1], all[gossip::uniform_below(rng, i)]);
        const auto m = 1 + static_cast<std::size_t>(gossip::uniform_below(rng, 24));
        std::vector<int> members(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(m));
        INFO(m << " members");
        const Topology t = gossip::elastic_topology(spec, members);
        // Any order of the same members: the same graph, bit for bit.
        std::vector<int> reversed(members.rbegin(), members.rend());
        REQUIRE(gossip::elastic_topology(spec, reversed).fingerprint() == t.fingerprint());
        REQUIRE(t.n() == 40);
        REQUIRE(t.elastic().has_value());
        const auto r = gossip::analyze(t);
        REQUIRE(r.doubly_stochastic);
        REQUIRE(r.symmetric);
        REQUIRE_FALSE(r.directed);
        // The members form one component; every other rank is alone with self weight 1.
        std::vector<int> sorted = members;
        std::sort(sorted.begin(), sorted.end());
        bool found = false;
        for (const auto& c : r.components) {
          if (c.size() == 1 && !std::binary_search(sorted.begin(), sorted.end(), c[0])) {
            for (std::int64_t round = 0; round < t.period(); ++round) {
              REQUIRE(t.self_weight(c[0], round) == 1.0);
              REQUIRE(t.in_neighbours(c[0], round).empty());
            }
            continue;
          }
          REQUIRE(c == sorted);
          found = true;
        }
        REQUIRE(found);
      }
      // The exponential graph of 8 members is the shifts by 1, 2 and 4 made undirected.
      if (kind == gossip::GeneratorKind::kExponential) {
        const Topology e = gossip::elastic_topology(elastic_spec(kind, 8, 8),
                                                    std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
        REQUIRE(e.in_neighbours(0, 0).size() == 5);  // 1, 2, 4, 6, 7
        for (const auto& nb : e.in_neighbours(0, 0)) REQUIRE(nb.weight == Approx(1.0 / 6));
      }
    }
  }
  // random-regular draws anew for a new member set, and repeats for the same one.
  const auto spec = elastic_spec(gossip::GeneratorKind::kRandomRegular, 4, 64);
  std::vector<int> a(20), b(20);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 1);
  REQUIRE(gossip::elastic_topology(spec, a).fingerprint() ==
          gossip::elastic_topology(spec, a).fingerprint());
  REQUIRE(gossip::elastic_topology(spec, a).fingerprint() !=
          gossip::elastic_topology(spec, b).fingerprint());
  // Refused: another generator, a rank past max_peers, a repeated member, no member.
  using gossip::GeneratorKind;
  CHECK_THROWS_WITH(gossip::elastic_topology(elastic_spec(GeneratorKind::kTorus, 4, 8), a),
                    Catch::StartsWith("elastic: true is for ring, random-regular, exponential "
                                      "and one-peer-exponential"));
  CHECK_THROWS_WITH(gossip::elastic_topology(elastic_spec(GeneratorKind::kRing, 4, 8), std::vector<int>{1, 9}),
                    "member 9 is not among the elastic topology's ranks 0..7 (max_peers: 8)");
  CHECK_THROWS_WITH(gossip::elastic_topology(elastic_spec(GeneratorKind::kRing, 4, 8), std::vector<int>{1, 1}),
                    "an elastic topology's members must be distinct");
  CHECK_THROWS(gossip::elastic_topology(elastic_spec(GeneratorKind::kRing, 4, 8), std::vector<int>{}));
}

TEST_CASE("a membership change takes effect after every member can have heard of it, even with "
          "a view a round late on any one link", "[topology][elastic]") {
  for (const gossip::GeneratorKind kind : elastic_kinds()) {
    for (int m : {1, 2, 5, 8, 13}) {
      DYNAMIC_SECTION(kind << " with " << m << " members") {
        std::vector<int> members(static_cast<std::size_t>(m));
        std::iota(members.begin(), members.end(), 3);  // ranks 3..m+2 of 20
        const Topology t = gossip::elastic_topology(elastic_spec(kind, 4, 20), members);
        const std::int64_t lead = gossip::membership_lead(t);
        REQUIRE(lead >= 2);
        // Views spread one hop a round over the round's graph; `late` makes one link take a
        // round more, once. Every member must know strictly before announce + lead.
        std::vector<std::pair<int, int>> links{{-1, -1}};  // none late, then each link
        for (std::int64_t round = 0; round < t.period(); ++round)
          for (int i : members)
            for (const auto& nb : t.in_neighbours(i, round)) links.push_back({nb.peer, i});
        for (int announcer : members)
          for (const auto& late : links) {
            std::vector<std::int64_t> knows(20, -1);
            knows[static_cast<std::size_t>(announcer)] = 0;
            std::vector<std::pair<int, std::int64_t>> in_flight;  // (peer, round it arrives)
            for (std::int64_t round = 0; round < lead; ++round) {
              for (auto& [peer, at] : in_flight)
                if (at == round && knows[static_cast<std::size_t>(peer)] < 0)
                  knows[static_cast<std::size_t>(peer)] = round;
              for (int i : members) {
                if (knows[static_cast<std::size_t>(i)] < 0) continue;
                for (const auto& nb : t.out_neighbours(i, round)) {
                  const bool slow = late.first == i && late.second == nb.peer;
                  in_flight.push_back({nb.peer, round + 1 + (slow ? 1 : 0)});
                }
              }
            }
            for (int i : members) {
              INFO("announced by " << announcer << ", link " << late.first << "->" << late.second
                                   << " late, member " << i << ", lead " << lead);
              REQUIRE(knows[static_cast<std::size_t>(i)] >= 0);
              REQUIRE(knows[static_cast<std::size_t>(i)] < lead);
            }
          }
        // The ring's diameter is m / 2: the rule is that plus 2; a lone member's is 2.
        if (kind == gossip::GeneratorKind::kRing) REQUIRE(lead == m / 2 + 2);
      }
    }
  }
}

TEST_CASE("gossip topo lists how an elastic topology's spectral gap moves with its members",
          "[topology][elastic][cli]") {
  const fs::path f = fs::temp_directory_path() / ("elastic-ring-" + std::to_string(getpid()) +
                                                   ".yaml");
  std::ofstream(f) << "generator: ring\nn: 4\nelastic: true\nmax_peers: 16\n";
  const Run r = run_gossip("topo --json " + f.string());
  fs::remove(f);
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(r.output.find("\"elastic\": {\"max_peers\": 16, \"sizes\": [{\"members\": 2, "
                        "\"spectral_gap_per_round\": 1, \"lead_rounds\": 3}") !=
          std::string::npos);
  // A ring of m members with weights 1/3 has gap 1 - (1/3 + 2/3 cos(2 pi / m)): 16 members.
  const double gap16 = 1.0 - (1.0 / 3 + 2.0 / 3 * std::cos(2 * kPi / 16));
  gossip::ElasticSpec ring = elastic_spec(gossip::GeneratorKind::kRing, 4, 16);
  const auto sizes = gossip::elastic_sizes(ring);
  REQUIRE(sizes.back().members == 16);
  REQUIRE(sizes.back().spectral_gap == Approx(gap16).epsilon(1e-9));
  REQUIRE(sizes.back().lead == 8 + 2);
  const Run text = run_gossip("topo " + source_dir() + "/topologies/elastic-exp-16.yaml");
  INFO(text.output);
  REQUIRE(text.code == 0);
  REQUIRE(text.output.find("exponential, 8 peers") != std::string::npos);
  REQUIRE(text.output.find("elastic       up to 16 peers") != std::string::npos);
}

TEST_CASE("every peer derives the same member timeline from the same announcements, whatever "
          "their order, and one that has not heard a change yet agrees up to it",
          "[topology][elastic]") {
  using gossip::Announcement;
  using gossip::ChangeKind;
  gossip::ElasticSpec spec = elastic_spec(gossip::GeneratorKind::kExponential, 8, 16);
  std::vector<int> initial(8);
  std::iota(initial.begin(), initial.end(), 0);
  const Topology start = gossip::elastic_topology(spec, initial);
  // The schedule joins 8..11 at round 200; at run time 3 leaves (SIGTERM) at round 300, two
  // monitors confirm 5's death at rounds 402 and 400 (the earlier counts), 9 dies at 410, a
  // leave of a non-member (rank 14) and of a dead member come too and are skipped.
  const std::vector<gossip::MembershipChange> scheduled{{200, {8, 9, 10, 11}, {}}};
  std::vector<Announcement> announced{{3, ChangeKind::kLeave, 300}, {5, ChangeKind::kDead, 402},
                                      {5, ChangeKind::kDead, 400}, {9, ChangeKind::kDead, 410},
                                      {14, ChangeKind::kLeave, 305}, {5, ChangeKind::kLeave, 500}};
  const Topology t = gossip::elastic_timeline(start, scheduled, announced);
  const auto lead = [&](std::int64_t round) {  // the rule, on the members' graph then
    const auto m = t.members(round);
    return gossip::membership_lead(gossip::elastic_topology(spec, m));
  };
  REQUIRE(t.epochs().size() == 5);
  CHECK(t.epochs()[1].from == 200 + lead(199));
  CHECK(t.epochs()[2].from == 300 + lead(299));
  CHECK(t.epochs()[2].members == std::vector<int>{0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(t.epochs()[3].from == 400 + lead(399));  // the earliest confirmation of 5's death
  CHECK(t.epochs()[3].members == std::vector<int>{0, 1, 2, 4, 6, 7, 8, 9, 10, 11});
  CHECK(t.epochs()[4].from == 410 + lead(409));
  CHECK(t.epochs()[4].members == std::vector<int>{0, 1, 2, 4, 6, 7, 8, 10, 11});
  // Every order of arrival gives the same graphs, bit for bit.
  std::sort(announced.begin(), announced.end(), [](const Announcement& a, const Announcement& b) {
    return a.rank < b.rank || (a.rank == b.rank && a.round < b.round);
  });
  do {
    const Topology again = gossip::elastic_timeline(start, scheduled, announced);
    REQUIRE(again.epochs().size() == t.epochs().size());
    for (std::size_t e = 0; e < t.epochs().size(); ++e) {
      CHECK(again.epochs()[e].from == t.epochs()[e].from);
      CHECK(again.epochs()[e].members == t.epochs()[e].members);
    }
    for (std::int64_t r = 0; r < 600; r += 7)
      for (int p = 0; p < 16; ++p) {
        const auto a = again.in_neighbours(p, r), b = t.in_neighbours(p, r);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          CHECK(a[i].peer == b[i].peer);
          CHECK(a[i].weight == b[i].weight);
        }
        CHECK(again.self_weight(p, r) == t.self_weight(p, r));
      }
  } while (std::next_permutation(announced.begin(), announced.end(),
                                 [](const Announcement& a, const Announcement& b) {
                                   return a.rank < b.rank || (a.rank == b.rank && a.round < b.round);
                                 }));
  // A peer that has heard everything but 9's death (its view is late) has the same members at
  // every round before that death takes effect: hearing it within the lead changes nothing
  // already run.
  std::vector<Announcement> without9;
  for (const Announcement& a : announced)
    if (a.rank != 9) without9.push_back(a);
  const Topology before = gossip::elastic_timeline(start, scheduled, without9);
  for (std::int64_t r = 0; r < t.epochs()[4].from; ++r)
    REQUIRE(before.members(r) == t.members(r));
  CHECK(before.members(t.epochs()[4].from) != t.members(t.epochs()[4].from));
}

TEST_CASE("a death's announcement counts from the dead peer's last message with "
          "monitor.remove_dead_after_rounds, so confirmations at different rounds agree",
          "[topology][elastic]") {
  using gossip::dead_announcement_round;
  // Without it (0): the round the announcer confirmed the death.
  CHECK(dead_announcement_round(527, 499, 0) == 527);
  CHECK(dead_announcement_round(590, 499, 0) == 590);
  // With 150: 499 + 150 for a confirmation at any round up to 649 (the simulator's at 527 and a
  // real monitor's at 590 alike), the confirmation itself when it comes later.
  CHECK(dead_announcement_round(527, 499, 150) == 649);
  CHECK(dead_announcement_round(590, 499, 150) == 649);
  CHECK(dead_announcement_round(700, 499, 150) == 700);
  // A member that never had a message of it counts from its own confirmation, never earlier
  // than a neighbour's announcement (confirmed after the last message) would.
  CHECK(dead_announcement_round(560, -1, 150) == 710);
  CHECK(dead_announcement_round(560, -1, 150) >= dead_announcement_round(560, 499, 150));
  // In the timeline the earliest announcement wins: the neighbours' 649, whatever a
  // non-neighbour said.
  gossip::ElasticSpec spec = elastic_spec(gossip::GeneratorKind::kExponential, 8, 8);
  std::vector<int> initial(8);
  std::iota(initial.begin(), initial.end(), 0);
  const Topology start = gossip::elastic_topology(spec, initial);
  const std::vector<gossip::Announcement> announced{
      {5, gossip::ChangeKind::kDead, dead_announcement_round(560, -1, 150)},
      {5, gossip::ChangeKind::kDead, dead_announcement_round(590, 499, 150)}};
  const Topology t = gossip::elastic_timeline(start, {}, announced);
  REQUIRE(t.epochs().size() == 2);
  CHECK(t.epochs()[1].announced == 649);
  CHECK(t.epochs()[1].from == 649 + gossip::membership_lead(start));
  CHECK(t.epochs()[1].members == std::vector<int>{0, 1, 2, 3, 4, 6, 7});
}
