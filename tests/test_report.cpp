// Tests for report: the peer-to-launcher event codec (round trips, refusal of bad lines) and the
// run record's summary (figures of the last evaluation, field names and order).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gossip/dashboard.hpp"
#include "gossip/events.hpp"
#include "gossip/prometheus.hpp"
#include "gossip/timeline.hpp"
#include "gossip/progress.hpp"
#include "gossip/report.hpp"
#include "gossip/tensorboard.hpp"

using namespace gossip;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <typename E>
E round_trip(const E& e) {
  const std::string line = encode_event(e);
  INFO(line);
  REQUIRE(line.rfind("@gossip ", 0) == 0);
  REQUIRE(line.find('\n') == std::string::npos);
  const auto parsed = parse_event(line);
  REQUIRE(parsed.has_value());
  REQUIRE(std::holds_alternative<E>(*parsed));
  return std::get<E>(*parsed);
}

}  // namespace

TEST_CASE("every event survives encoding and parsing unchanged", "[report][events]") {
  SECTION("ready") {
    const auto r = round_trip(ReadyEvent{3, 0.125, 8, "/home/me/my runs/c.yaml"});
    CHECK(r.peer == 3);
    CHECK(r.seconds == 0.125);
    CHECK(r.peers == 8);
    CHECK(r.config == "/home/me/my runs/c.yaml");
  }
  SECTION("eval, with a path that has spaces and a percent sign") {
    const EvalEvent e{2, 10, 48, 1.0 / 3.0, 0.224137, 0.9921875, 78082, 1234.5678,
                      "/tmp/my run/100%/params-10.bin"};
    const auto r = round_trip(e);
    CHECK(r.peer == 2);
    CHECK(r.round == 10);
    CHECK(r.rounds == 48);
    CHECK(r.epoch == e.epoch);  // exact, not 6 digits
    CHECK(r.loss == e.loss);
    CHECK(r.accuracy == e.accuracy);
    CHECK(r.bytes_sent == 78082);
    CHECK(r.seconds == e.seconds);
    CHECK(r.params == e.params);
    CHECK(round_trip(EvalEvent{}).params.empty());
  }
  SECTION("round") {
    const auto r =
        round_trip(RoundEvent{5, 1234, 5000, 61.0625, "4:1000:2000;6:0:5", "compute:1.5,send:0.25"});
    CHECK(r.peer == 5);
    CHECK(r.round == 1234);
    CHECK(r.rounds == 5000);
    CHECK(r.seconds == 61.0625);
    CHECK(r.traffic == "4:1000:2000;6:0:5");
    CHECK(r.phases == "compute:1.5,send:0.25");
    CHECK(round_trip(RoundEvent{}).traffic.empty());
  }
  SECTION("alert") {
    const AlertEvent e{1, 7, false, {2, 6}, "neighbours lost: 2,6; live graph DISCONNECTED"};
    const auto r = round_trip(e);
    CHECK(r.peer == 1);
    CHECK(r.round == 7);
    CHECK_FALSE(r.connected);
    CHECK(r.dead == std::vector<int>{2, 6});
    CHECK(r.message == e.message);
    const auto back = round_trip(AlertEvent{1, 9, true, {}, "all neighbours are back\nnext"});
    CHECK(back.dead.empty());
    CHECK(back.message == "all neighbours are back\nnext");
  }
  SECTION("done") {
    const DoneEvent e{0, 0.5, std::string(64, 'a'), 155810, 12.25,
                      format_phase_seconds(PhaseSeconds{0.5, 3.25}), {3, 40, 5, 1}, 234, 0.9975,
                      true};
    const auto r = round_trip(e);
    CHECK(r.refused == std::vector<int>{3, 40, 5, 1});
    CHECK(r.rounds == 234);
    CHECK(r.epoch == 0.9975);
    CHECK(r.awaits_average);
    CHECK(r.peer == 0);
    CHECK(r.accuracy == 0.5);
    CHECK(r.params_sha256 == e.params_sha256);
    CHECK(r.bytes_sent == 155810);
    CHECK(r.seconds == 12.25);
  }
}

TEST_CASE("membership events survive the event line and become events.jsonl lines",
          "[report][events][membership]") {
  MemberEvent e{4, 104, 2.5, gossip::MemberEventKind::kPartition, -1, 0, {2, 6}, {{0, 1, 7}, {3, 4, 5}}, {3, 4, 5}};
  const auto r = round_trip(e);
  CHECK(r.peer == 4);
  CHECK(r.round == 104);
  CHECK(r.event == gossip::MemberEventKind::kPartition);
  CHECK(r.dead == std::vector<int>{2, 6});
  CHECK(r.components == gossip::Components{{0, 1, 7}, {3, 4, 5}});
  CHECK(r.my_component == std::vector<int>{3, 4, 5});
  CHECK(event_json(e) ==
        "{\"peer\": 4, \"round\": 104, \"time_s\": 2.5, \"event\": \"partition\", \"subject\": -1, "
        "\"incarnation\": 0, \"dead\": [2, 6], \"components\": [[0, 1, 7], [3, 4, 5]], "
        "\"my_component\": [3, 4, 5]}");
  const auto d = round_trip(MemberEvent{1, 9, 0.0, gossip::MemberEventKind::kDead, 2, 3, {2}, {}, {}});
  CHECK(d.subject == 2);
  CHECK(d.incarnation == 3);
  CHECK(d.components.empty());
  // A components field with an empty part is refused.
  CHECK_FALSE(parse_event("@gossip member peer=1 round=9 time_s=0 event=x subject=1 "
                          "incarnation=0 dead= components=0,1;;2 my_component=").has_value());
}

TEST_CASE("link events survive the event line; an unknown link change is refused",
          "[report][events]") {
  const LinkEvent e{5, 0, 4.25, gossip::LinkChange::kNeverFormed, 6, -1.0,
                    "no route dialling 198.18.0.7:29506 (No route to host)"};
  const auto r = round_trip(e);
  CHECK(r.peer == 5);
  CHECK(r.round == 0);
  CHECK(r.seconds == 4.25);
  CHECK(r.change == gossip::LinkChange::kNeverFormed);
  CHECK(r.neighbour == 6);
  CHECK(r.formed_s == -1.0);
  CHECK(r.reason == e.reason);
  CHECK(event_json(e) ==
        R"({"event": "link", "peer": 5, "round": 0, "time_s": 4.25, "link": "never_formed", )"
        R"x("neighbour": 6, "formed_s": -1, "reason": "no route dialling 198.18.0.7:29506 (No )x"
        R"x(route to host)"})x");
  for (const auto& row : gossip::link_change_table())
    CHECK(round_trip(LinkEvent{1, 7, 1.0, row.kind, 2, 0.5, ""}).change == row.kind);
  CHECK_FALSE(parse_event("@gossip link peer=1 round=0 time_s=1 link=vanished neighbour=2 "
                          "formed_s=-1 reason=").has_value());
}

TEST_CASE("events.jsonl lines carry every field of the event as JSON", "[report][events]") {
  CHECK(event_json(ReadyEvent{3, 0.5, 4, "/a \"b\".yaml"}) ==
        R"({"event": "ready", "peer": 3, "seconds": 0.5, "peers": 4, "config": "/a \"b\".yaml", "start": "fresh", "from": 0, "restarts": 0})");
  CHECK(event_json(AlertEvent{1, 7, false, {2, 6}, "lost\n2"}) ==
        R"({"event": "alert", "peer": 1, "round": 7, "connected": false, "dead": [2, 6], )"
        R"("message": "lost\n2"})");
  CHECK(event_json(DoneEvent{0, 0.25, "ab", 155810, 12.5, "compute:1.5", {}, 40, 1.5, true}) ==
        R"({"event": "done", "peer": 0, "acc": 0.25, "sha256": "ab", "bytes": 155810, )"
        R"("seconds": 12.5, "phases": "compute:1.5", "refused": [], "rounds": 40, "epoch": 1.5, )"
        R"("awaits_average": true})");
}

TEST_CASE("malformed event lines are refused, not guessed at", "[report][events]") {
  const std::string good = encode_event(ReadyEvent{3, 0.5, 4, "c.yaml"});
  REQUIRE(parse_event(good).has_value());
  for (const std::string& line : {
           std::string(""), std::string("@gossip"), std::string("@gossip "),
           std::string("hello world"), std::string("gossip ready peer=1 seconds=2"),
           std::string("@gossip bogus peer=1"), std::string("@gossip ready"),
           std::string("@gossip ready peer=1"),                        // missing field
           std::string("@gossip ready peer=1 seconds=2 extra=3"),      // unknown field
           std::string("@gossip ready peer=1 peer=2 seconds=2"),       // repeated field
           std::string("@gossip ready peer=x seconds=2"),              // not a number
           std::string("@gossip ready peer=1 seconds=2.5abc"),         // trailing garbage
           std::string("@gossip ready peer=99999999999 seconds=2"),    // out of range
           std::string("@gossip ready peer=1  seconds=2"),             // empty token
           std::string("@gossip ready peer=1 seconds"),                // no '='
           std::string("@gossip ready peer=1 =2 seconds=2"),           // no key
           std::string("@gossip round peer=1 round=2 rounds=3"),       // missing seconds
           std::string("@gossip round peer=1 round=2.5 rounds=3 seconds=1"),
           std::string("@gossip alert peer=1 round=2 connected=2 dead= message=x"),
           std::string("@gossip alert peer=1 round=2 connected=1 dead=1,,2 message=x"),
           std::string("@gossip alert peer=1 round=2 connected=1 dead=1, message=x"),
           std::string("@gossip done peer=1 acc=0.5 sha256=ab%2 bytes=3 seconds=1"),
           std::string("@gossip done peer=1 acc=0.5 sha256=ab%zz bytes=3 seconds=1"),
           std::string("@gossip done peer=1 acc=0.5 sha256=ab bytes=-3 seconds=1"),
           good + " ", good.substr(0, good.size() - 1) + "\x01"}) {
    INFO(line);
    CHECK_FALSE(parse_event(line).has_value());
  }
}

TEST_CASE("the run record's summary comes from the last evaluation", "[report]") {
  const auto dir = (std::filesystem::temp_directory_path() / "gossip_test_report").string();
  std::filesystem::remove_all(dir);
  {
    RunRecord record(dir);
    record.write(MetricsRow{0, 0.0, 0, 0.0, 0.25, 0.5, 10, 0.1});
    record.write(MetricsRow{0, 0.0, 1, 0.0, 0.75, 0.5, 10, 0.1});
    record.write(MetricsRow{8, 1.0, 0, 0.3, 0.875, 0.125, 20, 0.2});
    record.write(MetricsRow{8, 1.0, 1, 0.4, 0.625, 0.125, 20, 0.2});
    record.write(MetricsRow{8, 1.0, -1, 0.35, 0.9, 0.125, 40, 0.3});
    CHECK(record.last().peer_rows == 2);
    RunEnd end;
    end.rounds = 8;
    end.bytes_sent = 40;
    end.wall_seconds = 1.5;
    end.params_sha256 = {"aa", "bb"};
    end.gemm = "onednn";
    end.extra.add("zeta", 1).add("alpha", "x");
    const Summary s = record.finish(std::move(end));
    CHECK(s.last.test_accuracy == 0.9);
    CHECK(s.last.test_loss == 0.35);  // the average model's row
    CHECK(s.last.peer_accuracy_min == 0.625);
    CHECK(s.last.peer_accuracy_max == 0.875);
  }
  CHECK(read_text(dir + "/summary.json") ==
        "{\n  \"test_accuracy\": 0.9,\n  \"test_loss\": 0.35,\n  \"peer_accuracy_min\": 0.625,\n"
        "  \"peer_accuracy_max\": 0.875,\n  \"consensus_distance\": 0.125,\n"
        "  \"peak_consensus_distance\": 0.5,\n  \"rounds\": 8,\n"
        "  \"epochs\": 1,\n  \"bytes_sent\": 40,\n  \"wall_seconds\": 1.5,\n"
        "  \"connected\": true,\n  \"gemm\": \"onednn\",\n  \"alpha\": \"x\",\n"
        "  \"zeta\": 1,\n"
        "  \"params_sha256\": [\"aa\", \"bb\"]\n}\n");
  const std::string csv = read_text(dir + "/metrics.csv");
  CHECK(csv.rfind(std::string(kMetricsHeader) + "\n0,0.0000,0,0,0.25,0.5,10,0.100\n", 0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a metrics file left empty or cut short by a stop before the first evaluation is "
          "resumed as it is; one that is not a metrics file is refused", "[report]") {
  const auto dir = (std::filesystem::temp_directory_path() / "gossip_test_report_resume").string();
  const std::string header = kMetricsHeader;
  for (const std::string& left : {std::string(), header.substr(0, 17)}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/metrics.csv") << left;
    {
      RunRecord record = RunRecord::resume(dir, 40);
      CHECK(record.last().peer_rows == 0);
      record.write(MetricsRow{48, 2.0, 0, 0.3, 0.5, 0.25, 20, 0.2});
      record.flush();
    }
    CHECK(read_text(dir + "/metrics.csv") == header + "\n48,2.0000,0,0.3,0.5,0.25,20,0.200\n");
  }
  std::ofstream(dir + "/metrics.csv") << "round,epoch,colour\n1,2,3\n";
  CHECK_THROWS_WITH(RunRecord::resume(dir, 40),
                    Catch::Contains("the header is not metrics.csv's"));
  // A record that evaluated nothing has no figures: null, not 0.
  std::filesystem::remove_all(dir);
  {
    RunRecord record(dir);
    const Summary s = record.finish(RunEnd{});
    CHECK(std::isnan(s.last.test_accuracy));
  }
  CHECK_THAT(read_text(dir + "/summary.json"),
             Catch::Contains("\"test_accuracy\": null,\n  \"peer_accuracy_min\": null"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a record without an average model leaves its fields to the command", "[report]") {
  // gossip train and a lone gossip peer: no peer = -1 rows, so no test_loss of an average model
  // (gossip train adds its own model's test loss itself).
  const auto dir = (std::filesystem::temp_directory_path() / "gossip_test_report_one").string();
  std::filesystem::remove_all(dir);
  {
    RunRecord record(dir);
    record.write(MetricsRow{0, 0.0, 0, 0.0, 0.25, 0.0, 0, 0.1});
    record.write(MetricsRow{8, 1.0, 0, 0.3, 0.875, 0.0, 0, 0.2});
    const Summary s = record.finish(RunEnd{});
    CHECK(s.last.test_accuracy == 0.875);
    CHECK_FALSE(s.last.has_average);
  }
  const std::string summary = read_text(dir + "/summary.json");
  CHECK(summary.find("\"test_accuracy\": 0.875") != std::string::npos);
  CHECK(summary.find("test_loss") == std::string::npos);
  CHECK(summary.find("peak_consensus_distance") == std::string::npos);
  std::filesystem::remove_all(dir);
}

namespace {

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

/// Whether `path` is a non-empty PNG file (its 8-byte signature and more).
bool is_png(const std::string& path) {
  const std::string bytes = read_text(path);
  return bytes.size() > 100 && bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0;
}

}  // namespace

TEST_CASE("a run folder's plots come from its metrics.csv, zeros at the bottom of the log axis",
          "[report][plot]") {
  const auto dir = (std::filesystem::temp_directory_path() / "gossip_test_plot").string();
  std::filesystem::remove_all(dir);
  {
    RunRecord record(dir);
    // Three peers that start equal (consensus 0), then disagree: 0.0123, then 0.00045.
    for (int round : {0, 10, 20}) {
      const double cd = round == 0 ? 0.0 : round == 10 ? 0.0123 : 0.00045;
      for (int p = 0; p < 3; ++p)
        record.write(MetricsRow{round, round / 10.0, p, round ? 0.5 - 0.1 * p : 0.0,
                                0.5 + 0.01 * round + 0.02 * p, cd, 100u * round, 0.1 * round});
      record.write(MetricsRow{round, round / 10.0, -1, 0.4, 0.6 + 0.01 * round, cd, 300u * round,
                              0.1 * round});
    }
    record.finish(RunEnd{});
  }
  const auto rows = read_metrics(dir + "/metrics.csv");
  REQUIRE(rows.size() == 12);
  CHECK(rows[5].peer == 1);
  CHECK(rows[5].round == 10);
  CHECK(rows[5].test_accuracy == Approx(0.62));
  CHECK(rows[7].consensus_distance == Approx(0.0123));

  if (have_gnuplot()) {
    plot_metrics(dir);
    for (const char* name : {"accuracy_vs_round", "loss_vs_round", "consensus_vs_round"}) {
      INFO(name);
      CHECK(is_png(dir + "/" + name + ".png"));
      CHECK(read_text(dir + "/" + name + ".svg").find("<svg") != std::string::npos);
    }
  } else {
    WARN("gnuplot is not installed: only the refusal is checked");
    CHECK_THROWS_WITH(plot_metrics(dir), Catch::Contains("gnuplot is not installed"));
  }
  // The data: the lowest peer per round, and the round-0 consensus (exactly 0) drawn a decade
  // below the smallest positive value, 0.00045 -> 1e-05.
  const std::string data = read_text(dir + "/plots.dat");
  CHECK(data.find("# lowest peer accuracy\n0 0.5\n10 0.6\n20 0.7\n") != std::string::npos);
  CHECK(data.find("0 1e-05\n10 0.0123\n20 0.00045\n") != std::string::npos);
  CHECK(read_text(dir + "/plots.gp").find("consensus distance (0 drawn at 1e-05)") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a metrics.csv that is not one is refused with file and line", "[report][plot]") {
  const auto dir = (std::filesystem::temp_directory_path() / "gossip_test_plot_bad").string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/metrics.csv";
  std::ofstream(path) << "round,loss\n1,2\n";
  CHECK_THROWS_WITH(read_metrics(path), Catch::Contains("metrics.csv:1: expected the header"));
  std::ofstream(path) << kMetricsHeader << "\n0,0.0000,0,0,0.25,0.5,10,0.100\n1,0.5,0,x,1,0,0,1\n";
  CHECK_THROWS_WITH(read_metrics(path), Catch::Contains("metrics.csv:3: loss: expected a number"));
  std::ofstream(path) << kMetricsHeader << "\n0,0.0000,0,0,0.25\n";
  CHECK_THROWS_WITH(read_metrics(path), Catch::Contains("metrics.csv:2: expected 8"));
  std::ofstream(path) << kMetricsHeader << "\n";
  CHECK_THROWS_WITH(plot_metrics(dir), Catch::Contains("no rows to plot"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the ETA comes from the measured round rate, not from the start-up", "[report][progress]") {
  EtaEstimate eta;
  CHECK_FALSE(eta.seconds_left(100).has_value());
  // 20 s of start-up (data, connections, the first evaluation) before round 0 is seen; then one
  // round a second. Counting the start-up would say 20 s a round (33 min) at round 1.
  eta.add(20.0, 0);
  eta.add(21.0, 1);
  CHECK_FALSE(eta.seconds_left(100).has_value());  // one round is too little to go on
  eta.add(22.0, 2);
  CHECK_FALSE(eta.seconds_left(100).has_value());
  eta.add(23.0, 3);
  REQUIRE(eta.seconds_left(100).has_value());
  CHECK(*eta.seconds_left(100) == Approx(97.0));
  // Three rounds in a few milliseconds are not a rate yet either.
  EtaEstimate quick;
  for (int r = 0; r <= 5; ++r) quick.add(0.001 * r, r);
  CHECK_FALSE(quick.seconds_left(100).has_value());
}

TEST_CASE("the ETA follows a change of pace within its window", "[report][progress]") {
  EtaEstimate eta;
  // 100 s at one round a second, sampled ten times a second...
  std::int64_t done = 0;
  double t = 0.0;
  for (; t < 100.0 - 1e-9; t += 0.1) eta.add(t, static_cast<std::int64_t>(t));
  done = 100;
  CHECK(*eta.seconds_left(1000) == Approx(1000 - 99).epsilon(0.02));
  // ...then 60 s at four rounds a second: the window (30 s) sees only the new pace.
  for (double s = 0.0; s < 60.0 + 1e-9; s += 0.1)
    eta.add(t + s, done + static_cast<std::int64_t>(4 * s));
  const std::int64_t now_done = done + 240;
  CHECK(*eta.seconds_left(2000) == Approx((2000.0 - now_done) / 4.0).epsilon(0.02));
  CHECK(*eta.seconds_left(now_done) == 0.0);
  CHECK(*eta.seconds_left(now_done - 5) == 0.0);  // past the total: nothing left, not negative
}

TEST_CASE("a timeline's round phases add up to the round, its spans nest, and its trace is "
          "Chrome's format", "[report][timeline]") {
  double clock = 0.0;
  Timeline t(3, [&] { return clock; });
  t.add(Phase::kSetup, 0.0, 1.0);
  clock = 1.0;
  t.begin_round(0);
  t.add(Phase::kCompute, 1.0, 1.5);
  t.add(Phase::kSend, 1.6, 1.7);   // 1.5..1.6 and 1.7..1.8 are left: compress
  clock = 1.8;
  t.mixing();
  t.add(Phase::kWait, 1.9, 2.4);   // 1.8..1.9 and 2.4..2.5: mix
  clock = 2.5;
  t.end_round();
  t.add(Phase::kEvaluate, 2.5, 3.0);
  // Encryption on the transport's thread, beside the phases: it is summed apart and covers
  // nothing of the wall time (its spans overlap the round's).
  t.add(Phase::kEncrypt, 1.2, 1.45);
  t.add(Phase::kEncrypt, 1.95, 2.0);
  const PhaseSeconds& s = t.seconds();
  auto at = [&](Phase p) { return s[static_cast<std::size_t>(p)]; };
  CHECK(at(Phase::kSetup) == Approx(1.0));
  CHECK(at(Phase::kCompute) == Approx(0.5));
  CHECK(at(Phase::kCompress) == Approx(0.2));
  CHECK(at(Phase::kSend) == Approx(0.1));
  CHECK(at(Phase::kWait) == Approx(0.5));
  CHECK(at(Phase::kMix) == Approx(0.2));
  CHECK(at(Phase::kEvaluate) == Approx(0.5));
  CHECK(at(Phase::kEncrypt) == Approx(0.3));
  double total = 0.0;
  for (std::size_t i = 0; i < kWallPhaseCount; ++i) total += s[i];
  CHECK(total == Approx(3.0));  // the wall phases cover the whole time, once
  CHECK(t.covered() == Approx(3.0));
  const std::string shares = phase_share_json(s).str();
  CHECK_THAT(shares, Catch::Contains(R"("wait": 0.1666)"));     // 0.5 of 3 s
  CHECK_THAT(shares, Catch::Contains(R"("encrypt": 0.1)"));     // 0.3 of the same 3 s

  // A span that pokes out of its round is cut to it; one that overlaps the last is moved on.
  clock = 3.0;
  t.begin_round(1);
  t.add(Phase::kCompute, 2.9, 3.4);
  t.add(Phase::kSend, 3.3, 3.5);
  clock = 3.5;
  t.mixing();
  t.end_round();
  CHECK(at(Phase::kCompute) == Approx(0.9));
  CHECK(at(Phase::kSend) == Approx(0.2));
  // Spans within another (D-PSGD's messages sent during a GPU's first step) split it: each
  // second counts once.
  t.begin_round(2);
  t.add(Phase::kSend, 3.6, 3.7);
  t.add(Phase::kSend, 3.8, 3.9);
  t.add(Phase::kCompute, 3.5, 4.5);
  clock = 4.5;
  t.mixing();
  t.end_round();
  CHECK(at(Phase::kCompute) == Approx(0.9 + 0.8));
  CHECK(at(Phase::kSend) == Approx(0.2 + 0.2));
  CHECK(at(Phase::kCompress) == Approx(0.2));
  total = 0.0;
  for (std::size_t i = 0; i < kWallPhaseCount; ++i) total += s[i];
  CHECK(total == Approx(4.5));

  const auto dir = std::filesystem::temp_directory_path() / "gossip_test_report_timeline";
  std::filesystem::create_directories(dir);
  t.write((dir / "trace.json").string());
  std::ifstream in(dir / "trace.json");
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(json.find(R"({"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "peer 3"}})") != std::string::npos);
  CHECK(json.find(R"({"name": "round 0", "cat": "round", "ph": "X", "ts": 1000000, "dur": 1500000, "pid": 3)") != std::string::npos);
  CHECK(json.find(R"({"name": "wait", "cat": "wait", "ph": "X", "ts": 1900000, "dur": 500000, "pid": 3, "tid": 0, "args": {"round": 0}})") != std::string::npos);
  CHECK(json.find(R"({"name": "encrypt", "cat": "encrypt", "ph": "X", "ts": 1200000, "dur": 250000, "pid": 3, "tid": 1, "args": {"round": -1}})") != std::string::npos);
  CHECK(json.find(R"({"name": "thread_name", "ph": "M", "pid": 3, "tid": 1, "args": {"name": "transport: TLS records"}})") != std::string::npos);
  std::filesystem::remove_all(dir);

  CHECK(parse_phase_seconds(format_phase_seconds(s)) == s);
  CHECK_THROWS_WITH(parse_phase_seconds("compute:1"), Catch::Contains("expected all 11 phases"));
  CHECK_THROWS_WITH(parse_phase_seconds("think:1"), Catch::Contains("got 'think:1'"));
  const std::string table = phase_table({{"0", s}, {"all", s}});
  CHECK(table.find("compute") != std::string::npos);
  CHECK(table.find("   all") != std::string::npos);
  CHECK(table.find("  encrypt") != std::string::npos);
  CHECK(table.find("6.7%") != std::string::npos);  // encrypt: 0.3 s of the 4.5 s wall time
}

TEST_CASE("a timeline's overlap parts lie beside its phases: summed apart per part, counted per "
          "round, on thread 2 of the trace", "[report][trace]") {
  double clock = 0.0;
  Timeline t(1, [&] { return clock; });
  t.add(Phase::kSetup, 0.0, 1.0);
  clock = 1.0;
  t.begin_round(0);
  clock = 2.0;
  t.mixing();
  t.end_round();
  // The caller's parts of round 1, overlapping the phases above and each other.
  t.add_overlap(OverlapPart::kCopy, 0.5, 0.6, 1);
  t.add_overlap(OverlapPart::kCopyWait, 1.2, 1.5, 1);
  t.add_overlap(OverlapPart::kExposed, 1.9, 2.0, 1);
  t.add_overlap(OverlapPart::kExposed, 2.0, 2.25, 2);
  CHECK(t.overlap_rounds() == 2);
  CHECK(t.overlap_seconds()[0] == Approx(0.1));
  CHECK(t.overlap_seconds()[1] == Approx(0.3));
  CHECK(t.overlap_seconds()[2] == Approx(0.35));
  double total = 0.0;  // the wall phases are what they were
  for (std::size_t i = 0; i < kWallPhaseCount; ++i) total += t.seconds()[i];
  CHECK(total == Approx(2.0));
  CHECK(t.covered() == Approx(2.0));
  CHECK(parse_overlap_part("copy_wait") == OverlapPart::kCopyWait);
  CHECK(std::string(overlap_part_name(2)) == "exposed");
  CHECK_THROWS_WITH(parse_overlap_part("mix"),
                    Catch::Contains("expected copy, copy_wait or exposed"));
  const auto dir = std::filesystem::temp_directory_path() / "gossip_test_report_overlap";
  std::filesystem::create_directories(dir);
  t.write((dir / "trace.json").string());
  std::ifstream in(dir / "trace.json");
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(json.find(R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "caller: overlapped rounds"}})") != std::string::npos);
  CHECK(json.find(R"({"name": "copy_wait", "cat": "overlap", "ph": "X", "ts": 1200000, "dur": 300000, "pid": 1, "tid": 2, "args": {"round": 1}})") != std::string::npos);
  CHECK(json.find(R"({"name": "exposed", "cat": "overlap", "ph": "X", "ts": 2000000, "dur": 250000, "pid": 1, "tid": 2, "args": {"round": 2}})") != std::string::npos);
  std::filesystem::remove_all(dir);
  // A timeline without them names no thread 2.
  Timeline plain(1, [&] { return clock; });
  plain.add(Phase::kSetup, 0.0, 1.0);
  plain.write((dir.string() + "-plain.json"));
  std::ifstream in2(dir.string() + "-plain.json");
  const std::string json2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  CHECK(json2.find(R"("tid": 2)") == std::string::npos);
  std::filesystem::remove(dir.string() + "-plain.json");
}

TEST_CASE("TensorBoard records: CRC-32C's check value, the masked CRC and the framing",
          "[report][tensorboard]") {
  // CRC-32C's standard check value (RFC 3720 B.4's polynomial): "123456789" -> 0xE3069283.
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(crc32c("6789", crc32c("12345")) == 0xE3069283u);  // continued over pieces
  const std::uint32_t c = crc32c("abc");
  CHECK(masked_crc32c("abc") == ((c >> 15) | (c << 17)) + 0xa282ead8u);
  // A record: length (8 bytes), its masked CRC (4), the event, its masked CRC (4).
  const std::string e = scalar_event(1.5, 7, "loss", 0.25f);
  const std::string r = tf_record(e);
  REQUIRE(r.size() == 8 + 4 + e.size() + 4);
  std::uint64_t length = 0;
  std::memcpy(&length, r.data(), 8);
  CHECK(length == e.size());
  std::uint32_t crc = 0;
  std::memcpy(&crc, r.data() + 8, 4);
  CHECK(crc == masked_crc32c(r.substr(0, 8)));
  CHECK(r.substr(12, e.size()) == e);
  std::memcpy(&crc, r.data() + 12 + e.size(), 4);
  CHECK(crc == masked_crc32c(e));
  // The event's bytes, field by field: wall_time (1, double), step (2, varint), summary (5):
  // value (1): tag (1) "loss", simple_value (2, float).
  std::string want = "\x09";
  const double wall = 1.5;
  want.append(reinterpret_cast<const char*>(&wall), 8);
  want += "\x10\x07";
  want += "\x2a\x0d\x0a\x0b\x0a\x04loss\x15";
  const float v = 0.25f;
  want.append(reinterpret_cast<const char*>(&v), 4);
  CHECK(e == want);
}

// --- Prometheus text (gossip/prometheus.hpp) ---------------------------------------------------


TEST_CASE("the metrics registry writes the Prometheus text format", "[report][prometheus]") {
  gossip::MetricsRegistry r;
  r.define("x_total", gossip::MetricType::kCounter, "Things\\counted.\nTwo lines.");
  r.define("g", gossip::MetricType::kGauge, "A gauge.");
  r.define("d_seconds", gossip::MetricType::kHistogram, "Durations.", {0.1, 1.0});
  r.set("x_total", {{"neighbour", "3"}}, 5);
  r.add("x_total", {{"neighbour", "3"}}, 2);
  r.set("g", {{"why", "a \"quoted\" \\ value\n"}}, 0.25);
  for (double v : {0.05, 0.5, 0.7, 3.0}) r.observe("d_seconds", {}, v);
  const std::string text = r.text();
  CHECK(text ==
        "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"
        "d_seconds_bucket{le=\"0.1\"} 1\nd_seconds_bucket{le=\"1\"} 3\n"
        "d_seconds_bucket{le=\"+Inf\"} 4\nd_seconds_sum 4.25\nd_seconds_count 4\n"
        "# HELP g A gauge.\n# TYPE g gauge\n"
        "g{why=\"a \\\"quoted\\\" \\\\ value\\n\"} 0.25\n"
        "# HELP x_total Things\\\\counted.\\nTwo lines.\n# TYPE x_total counter\n"
        "x_total{neighbour=\"3\"} 7\n");
  r.clear("x_total");
  CHECK(r.text().find("x_total{") == std::string::npos);
  CHECK_THROWS(r.set("undefined", {}, 1.0));
  CHECK(gossip::metric_value(std::nan("")) == "NaN");
  CHECK(gossip::metric_value(-INFINITY) == "-Inf");
}

TEST_CASE("merged expositions list each family once with every source's series labelled",
          "[report][prometheus]") {
  gossip::MetricsRegistry a, b;
  for (auto* r : {&a, &b}) {
    r->define("rounds_total", gossip::MetricType::kCounter, "Rounds.");
    r->define("d_seconds", gossip::MetricType::kHistogram, "D.", {1.0});
  }
  a.set("rounds_total", {}, 10);
  b.set("rounds_total", {}, 12);
  b.observe("d_seconds", {{"k", "v"}}, 0.5);
  const std::string merged =
      gossip::merge_expositions({{"0", a.text()}, {"1", b.text()}}, "peer");
  CHECK(merged ==
        "# HELP d_seconds D.\n# TYPE d_seconds histogram\n"
        "d_seconds_bucket{peer=\"1\",k=\"v\",le=\"1\"} 1\n"
        "d_seconds_bucket{peer=\"1\",k=\"v\",le=\"+Inf\"} 1\n"
        "d_seconds_sum{peer=\"1\",k=\"v\"} 0.5\nd_seconds_count{peer=\"1\",k=\"v\"} 1\n"
        "# HELP rounds_total Rounds.\n# TYPE rounds_total counter\n"
        "rounds_total{peer=\"0\"} 10\nrounds_total{peer=\"1\"} 12\n");
}

// --- the dashboard's state (gossip/dashboard.hpp) ----------------------------------------------


namespace {
std::string ring_state_after(const std::function<void(gossip::DashboardState&)>& what) {
  gossip::DashboardSetup s;
  s.source = "gossip run";
  s.n = 8;
  for (int i = 0; i < 8; ++i) s.edges.push_back({std::min(i, (i + 1) % 8),
                                                 std::max(i, (i + 1) % 8), 1.0 / 3});
  gossip::DashboardState state(s);
  for (int r = 0; r < 8; ++r) state.on_event(r, gossip::ReadyEvent{r, 0.1, 8, "c.yaml"}, 0.1);
  what(state);
  return state.json(10.0);
}
}  // namespace

TEST_CASE("the dashboard shows dead peers and the live graph's components",
          "[report][dashboard]") {
  const std::string all = ring_state_after([](gossip::DashboardState&) {});
  CHECK(all.find("\"connected\": true") != std::string::npos);
  CHECK(all.find("\"components\": [[0, 1, 2, 3, 4, 5, 6, 7]]") != std::string::npos);
  CHECK(all.find("\"state\": \"dead\"") == std::string::npos);
  // Peers 1 and 5 killed: the launcher saw one process end, a neighbour's view holds the other
  // dead; the ring falls into {0, 6, 7} and {2, 3, 4}.
  const std::string split = ring_state_after([](gossip::DashboardState& s) {
    s.on_exit(1, "killed by the fault schedule", 5.0);
    gossip::MemberEvent dead;
    dead.peer = 4;
    dead.event = gossip::MemberEventKind::kDead;
    dead.subject = 5;
    s.on_event(4, dead, 5.5);
  });
  CHECK(split.find("\"connected\": false") != std::string::npos);
  CHECK(split.find("\"components\": [[0, 6, 7], [2, 3, 4]]") != std::string::npos);
  CHECK(split.find("{\"id\": 1, \"state\": \"dead\", \"component\": null") != std::string::npos);
  CHECK(split.find("{\"id\": 5, \"state\": \"dead\", \"component\": null") != std::string::npos);
  CHECK(split.find("\"text\": \"peer 4 holds peer 5 dead\"") != std::string::npos);
  // A suspicion refuted: alive again; a cut for lying takes the link out of the live graph.
  const std::string cut = ring_state_after([](gossip::DashboardState& s) {
    gossip::MemberEvent e;
    e.peer = 2;
    e.subject = 3;
    for (const char* what : {"suspect", "alive", "byzantine_suspect", "byzantine_cut"}) {
      e.event = *gossip::find_member_event(what);
      s.on_event(2, e, 3.0);
    }
    e.peer = 4;
    s.on_event(4, e, 3.0);
  });
  CHECK(cut.find("{\"id\": 3, \"state\": \"alive\", \"component\": 1, \"byzantine\": true, "
                 "\"cut\": true") != std::string::npos);
  CHECK(cut.find("\"components\": [[0, 1, 2, 4, 5, 6, 7], [3]]") != std::string::npos);
}

TEST_CASE("the dashboard's link rates come from the peers' byte counts",
          "[report][dashboard]") {
  const std::string j = ring_state_after([](gossip::DashboardState& s) {
    gossip::RoundEvent e;
    e.peer = 0;
    e.traffic = "1:1000:0;7:0:0";
    s.on_event(0, e, 1.0);
    e.traffic = "1:5000:0;7:0:0";
    s.on_event(0, e, 3.0);
  });
  // 4000 bytes in 2 s from 0 to 1; nothing on 7-0.
  CHECK(j.find("{\"a\": 0, \"b\": 1, \"weight\": 0.3333333333, \"bytes_per_s\": 2000, \"up\": "
               "true, \"state\": \"up\", \"path\": \"\"}") != std::string::npos);
  CHECK(j.find("{\"a\": 0, \"b\": 7, \"weight\": 0.3333333333, \"bytes_per_s\": 0, \"up\": "
               "true, \"state\": \"up\", \"path\": \"\"}") != std::string::npos);
}

TEST_CASE("the dashboard shows links that never formed as such, not their peers as suspects",
          "[report][dashboard]") {
  // Peer 0's links to 1 and 7 never formed; 1 and 7 also suspect it (it is silent to them).
  const std::string j = ring_state_after([](gossip::DashboardState& s) {
    for (const int r : {1, 7}) {
      s.on_event(r, gossip::LinkEvent{r, 0, 4.0, gossip::LinkChange::kNeverFormed, 0, -1.0,
                                      "peer 0 never dialled in"}, 4.0);
      gossip::MemberEvent suspect;
      suspect.peer = r;
      suspect.event = gossip::MemberEventKind::kSuspect;
      suspect.subject = 0;
      s.on_event(r, suspect, 4.5);
    }
    s.on_event(0, gossip::LinkEvent{0, 0, 4.0, gossip::LinkChange::kNeverFormed, 1, -1.0,
                                    "no route dialling 198.18.0.2:29501"}, 4.0);
  });
  CHECK(j.find("{\"id\": 0, \"state\": \"alive\", \"component\": 0") != std::string::npos);
  CHECK(j.find("{\"a\": 0, \"b\": 1, \"weight\": 0.3333333333, \"bytes_per_s\": 0, \"up\": "
               "false, \"state\": \"never_formed\", \"path\": \"\"}") != std::string::npos);
  CHECK(j.find("{\"a\": 0, \"b\": 7, \"weight\": 0.3333333333, \"bytes_per_s\": 0, \"up\": "
               "false, \"state\": \"never_formed\", \"path\": \"\"}") != std::string::npos);
  CHECK(j.find("\"components\": [[0], [1, 2, 3, 4, 5, 6, 7]]") != std::string::npos);
  CHECK(j.find("link to peer 1 never_formed (no route dialling 198.18.0.2:29501)") !=
        std::string::npos);
}

TEST_CASE("the dashboard shows how each link formed and each peer's reachability",
          "[report][dashboard]") {
  const std::string j = ring_state_after([](gossip::DashboardState& s) {
    s.on_event(3, gossip::LinkEvent{3, 0, 1.0, gossip::LinkChange::kPath, 4, 0.5,
                                    "relayed through peer 0 (198.18.0.1:29500)"}, 1.0);
    s.on_event(3, gossip::LinkEvent{3, 0, 1.0, gossip::LinkChange::kReachability, 3, -1.0,
                                    "unreachable: peer 0 could not dial 10.1.0.4:29503"}, 1.0);
  });
  // The relayed link is up and says through whom; the peer's reachability is beside its state.
  CHECK(j.find("{\"a\": 3, \"b\": 4, \"weight\": 0.3333333333, \"bytes_per_s\": 0, \"up\": "
               "true, \"state\": \"up\", \"path\": \"relayed through peer 0 (198.18.0.1:29500)\"}") !=
        std::string::npos);
  CHECK(j.find("\"reachability\": \"unreachable: peer 0 could not dial 10.1.0.4:29503\"") !=
        std::string::npos);
  CHECK(j.find("{\"id\": 3, \"state\": \"alive\"") != std::string::npos);
}
