// launcher/network_record.cpp: merges the peers' evaluations into metrics.csv, with the consensus
// distance and the accuracy of the average model (from the peers' parameter snapshots, which no
// single peer can know), keeps events.jsonl, and ends with summary.json and the final table.
#include "src/launcher/network_record.hpp"

#include "gossip/faults.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>
#include <span>
#include <variant>

#include "gossip/core.hpp"
#include "gossip/timeline.hpp"
#include "src/launcher/children.hpp"
#include "gossip/gossip.hpp"
#include "gossip/json.hpp"
#include "gossip/monitor.hpp"
#include "gossip/progress.hpp"
#include "gossip/topology.hpp"

namespace gossip::launcher {
namespace {

std::vector<float> read_snapshot(const std::string& path, std::int64_t n) {
  if (n <= 0) {  // a model the launcher does not know (exec:): the file says its size
    std::error_code ec;
    n = static_cast<std::int64_t>(std::filesystem::file_size(path, ec) / sizeof(float));
    if (ec || n == 0) throw RuntimeError(cat(path, ": cannot read the parameter snapshot"));
  }
  std::vector<float> v(n);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw RuntimeError(cat(path, ": cannot open the parameter snapshot"));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (f.gcount() != static_cast<std::streamsize>(n * sizeof(float)))
    throw RuntimeError(cat(path, ": parameter snapshot is truncated"));
  return v;
}

/// The parameter files `paths` (n floats each; n <= 0: as the first file says), all of one size.
std::vector<std::vector<float>> read_snapshots(const std::vector<std::string>& paths,
                                               std::int64_t n) {
  std::vector<std::vector<float>> params;
  for (const auto& path : paths) params.push_back(read_snapshot(path, n));
  for (const auto& p : params)
    if (p.size() != params.front().size())
      throw RuntimeError(cat("the peers' parameter files differ in size (", p.size(), " and ",
                             params.front().size(), " floats)"));
  return params;
}

}  // namespace

std::vector<std::string> NetworkRecord::final_params(const std::vector<int>& ranks) const {
  std::vector<std::string> paths;
  for (int r : ranks)
    if (done_[r]) paths.push_back(cat(out_dir_, "/peers/", r, "/params.bin"));
  return paths;
}

std::vector<std::string> NetworkRecord::final_params() const {
  std::vector<int> all(static_cast<std::size_t>(n_));
  std::iota(all.begin(), all.end(), 0);
  if (members_) all = members_->epochs().back().members;  // those who left are not in it
  return final_params(all);
}

NetworkRecord::NetworkRecord(const RunConfig& config, const std::string& out_dir, int peers,
                             Clock clock, bool remove_snapshots, std::int64_t resume_round)
    : config_(config), out_dir_(out_dir), n_(peers), clock_(clock),
      remove_snapshots_(remove_snapshots),
      record_(resume_round >= 0 ? RunRecord::resume(out_dir, resume_round) : RunRecord(out_dir)),
      events_(out_dir + "/events.jsonl", resume_round >= 0 ? std::ios::app : std::ios::trunc),
      backend_(make_cpu_backend(1)),
      data_(load_datasets(config)), evaluator_(*backend_, config, data_.train, {0}, 0),
      done_(peers), latest_eval_(peers, -1), graph_(peers), held_dead_(peers) {
  merged_through_ = resume_round;
  if (config.train.tensorboard) record_.enable_tensorboard();
  // Peers on a CUDA device run cuBLAS whatever the CPU's choice (this CPU evaluator then
  // computes in fp32: a device's precision is the peers' own); peers on the CPU run the choice
  // made here, so a precision the CPU cannot run is refused before any of them starts.
  const bool on_device = config.train.backend != BackendChoice::kCpu && cuda_device_count() > 0;
  gemm_ = choose_gemm(*backend_,
                      gemm_request(config.train.gemm, config.train.threads,
                                   on_device ? Precision::kFp32 : config.train.precision),
                      evaluator_.model().gemm_shapes(config.train.batch));
  if (on_device)
    gemm_ = {cuda_gemm_name(config.train.precision), "the cuda backend's"};
  if (!events_) throw InputError(cat(out_dir, "/events.jsonl: cannot open for writing"));
}

void NetworkRecord::log_event(const std::string& json_line) {
  events_ << json_line << '\n' << std::flush;
  if (!events_) throw RuntimeError(cat(out_dir_, "/events.jsonl: write failed"));
}

void NetworkRecord::handle(int rank, const PeerEvent& event) {
  if (rank < 0 || rank >= n_) return;
  if (const auto* e = std::get_if<RoundEvent>(&event)) {  // progress only: nothing to merge
    total_rounds_ = e->rounds;
    return;
  }
  if (const auto* e = std::get_if<EvalEvent>(&event)) {
    total_rounds_ = e->rounds;
    // A restarted peer evaluates at round 0 (or wherever it was) before it catches up: rounds
    // already merged stay as they are.
    if (e->round <= merged_through_) return;
    latest_eval_[rank] = std::max(latest_eval_[rank], e->round);
    pending_[e->round][rank] = *e;
    return;
  }
  if (const auto* e = std::get_if<LinkEvent>(&event))
    link_reports_[{rank, e->neighbour}] = LinkReport{e->change, e->round, e->reason};
  if (const auto* e = std::get_if<AlertEvent>(&event)) held_dead_[rank] = e->dead;
  if (const auto* e = std::get_if<MemberEvent>(&event)) {
    if (e->event == MemberEventKind::kPartition || e->event == MemberEventKind::kHealed)
      graph_[rank] = *e;
    held_dead_[rank] = e->dead;
    if (e->event == MemberEventKind::kByzantineCut) cut_links_.emplace_back(rank, e->subject);
    const std::optional<ChangeKind> change = announced_change(e->event);
    if (members_ && change && e->subject >= 0 && e->subject < n_) {
      // An elastic run's change announced by a peer: the member timeline as every peer
      // derives it (the earliest round of each rank and kind).
      const Announcement a{e->subject, *change, e->round};
      merge_announcement(announced_, a);
      members_->set_epochs(elastic_timeline(*members_, scheduled_changes(config_.faults),
                                            announced_).epochs());
    }
    auto count = [&](auto& seen) {
      const std::pair<int, std::int64_t> key{e->subject, e->incarnation};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
      seen.push_back(key);
      membership_.add(JsonObject()
                          .add("event", event_name(e->event))
                          .add("peer", e->subject)
                          .add("incarnation", e->incarnation)
                          .add("time_s", now_s())
                          .add("round", e->round)
                          .add("reported_by", rank));
    };
    note_byzantine(byzantine_, *e);
    if (e->event == MemberEventKind::kDead) count(deaths_);
    if (e->event == MemberEventKind::kRejoin) count(rejoins_);
  }
  if (const auto* e = std::get_if<DoneEvent>(&event)) done_[rank] = *e;
  std::string line = event_json(event);
  if (std::holds_alternative<MemberEvent>(event) && clock_ == Clock::kLauncher && !line.empty()) {
    // When the launcher heard of it, on the clock its fault events use: detection times
    // compare with the faults without the peers' own clocks (which start later).
    line.pop_back();
    line += cat(", \"launcher_s\": ", json_number(now_s()), "}");
  }
  log_event(line);
}

std::vector<std::int64_t> NetworkRecord::drop_pending_through(std::int64_t round) {
  std::vector<std::int64_t> dropped;
  while (!pending_.empty() && pending_.begin()->first <= round) {
    dropped.push_back(pending_.begin()->first);
    pending_.erase(pending_.begin());
  }
  return dropped;
}

void NetworkRecord::log_fault(std::int64_t round, const std::string& action,
                              const std::vector<int>& peers, double seconds) {
  JsonObject o;
  o.add("event", "fault")
      .add("time_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count())
      .add("round", round)
      .add("action", action)
      .add("peers", JsonArray::of(peers));
  if (seconds > 0) o.add("seconds", seconds);  // a pause's length
  log_event(o.str());
}

void NetworkRecord::note_live_graph(const LiveGraph& initial, LiveGraphChange change) {
  if (!initial_graph_) initial_graph_ = initial;
  change.time_s = now_s();
  write_live_graphs(gossip::note_live_graph(live_graphs_, *initial_graph_, std::move(change)));
}

void NetworkRecord::write_live_graphs(std::size_t through) {
  for (; live_graphs_written_ < through; ++live_graphs_written_)
    log_event(live_graph_json(live_graphs_[live_graphs_written_]));
}

double NetworkRecord::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void NetworkRecord::peer_failed(int rank, const std::string& why) {
  if (std::find(dead_.begin(), dead_.end(), rank) != dead_.end()) return;
  dead_.push_back(rank);
  failures_.push_back(Failure{rank, now_s(), why});
  log_event(JsonObject()
                .add("event", "failed")
                .add("peer", rank)
                .add("message", why)
                .str());
}

void NetworkRecord::peer_back(int rank) {
  std::erase(dead_, rank);
  // A new process: a fresh view and fresh links (its neighbours report theirs coming back).
  held_dead_[rank].clear();
  graph_[rank].reset();
  std::erase_if(link_reports_, [&](const auto& r) { return r.first.first == rank; });
  std::erase_if(cut_links_, [&](const auto& c) { return c.first == rank; });
  for (auto f = failures_.rbegin(); f != failures_.rend(); ++f)
    if (f->peer == rank) {
      if (f->back_s < 0) f->back_s = now_s();
      break;
    }
}

std::vector<EvaluationFigures> NetworkRecord::merge_ready_rounds() {
  std::vector<int> expected;
  std::vector<EvaluationFigures> merged;
  while (!pending_.empty()) {
    auto& [round, evals] = *pending_.begin();
    // Those alive who ran the rounds before it: every rank, or an elastic run's members then.
    expected.clear();
    const std::vector<int> members = members_ ? members_->members(std::max<std::int64_t>(0, round - 1))
                                              : std::vector<int>{};
    for (int r = 0; r < n_; ++r)
      if (std::find(dead_.begin(), dead_.end(), r) == dead_.end() &&
          (!members_ || std::binary_search(members.begin(), members.end(), r)))
        expected.push_back(r);
    if (expected.empty()) break;
    std::vector<int> present;
    for (int r : expected) {
      if (evals.count(r)) present.push_back(r);
      else if (latest_eval_[r] <= round) return merged;  // wait for the slower peers
      // else: it evaluated a later round already (it caught up past this one): not in it
    }
    if (!present.empty()) {
      merge_round(round, evals, present);
      merged.push_back(record_.last());
    }
    merged_through_ = round;
    pending_.erase(pending_.begin());
  }
  return merged;
}

Evaluation NetworkRecord::evaluate_average(const std::vector<std::string>& paths,
                                           double* consensus) {
  const bool external = !config_.exec.empty();
  const auto params = read_snapshots(paths, external ? 0 : evaluator_.num_params());
  std::vector<std::span<const float>> views(params.begin(), params.end());
  if (consensus) *consensus = consensus_distance(views);
  Evaluation ev;
  ev.loss = ev.accuracy = NAN;
  if (external) return ev;  // a model only the script knows: it evaluates (hand_out_average)
  std::vector<float> avg(params.front().size());
  average_params(views, avg);
  evaluator_.upload_params(avg);
  return evaluator_.evaluate(data_.test, config_.train.eval_limit);
}

namespace {

/// Writes `text` to `path` whole or not at all (a reader polling for it never sees half).
void write_whole(const std::string& path, const char* data, std::size_t size) {
  {
    std::ofstream f(path + ".tmp", std::ios::binary | std::ios::trunc);
    f.write(data, static_cast<std::streamsize>(size));
    if (!f) throw RuntimeError(cat(path, ".tmp: write failed"));
  }
  std::filesystem::rename(path + ".tmp", path);
}

}  // namespace

void NetworkRecord::hand_out_average(const std::vector<int>& waiting) {
  const std::string request = cat(out_dir_, "/average-request.json");
  if (waiting.empty()) {
    average_missing_ = cat("no process of the script waited for it in finish(): pass evaluate= "
                           "to Peer.join() or DecentralizedOptimizer (docs/python.md)");
    return;
  }
  const std::vector<std::string> paths = final_params();
  std::string why;
  try {
    const auto params = read_snapshots(paths, 0);
    std::vector<std::span<const float>> views(params.begin(), params.end());
    std::vector<float> avg(params.front().size());
    average_params(views, avg);
    write_whole(cat(out_dir_, "/average.bin"), reinterpret_cast<const char*>(avg.data()),
                avg.size() * sizeof(float));
  } catch (const RuntimeError& e) {
    why = e.what();
  }
  // Every waiting process reads this; the one named evaluates, the others return at once.
  average_evaluator_ = why.empty() ? waiting.front() : -1;
  if (!why.empty()) average_missing_ = why;
  const std::string text =
      JsonObject()
          .add("evaluator", average_evaluator_)
          .add("average", cat(out_dir_, "/average.bin"))
          .add("result", cat(out_dir_, "/average-eval.json"))
          .add("peers", static_cast<std::int64_t>(paths.size()))
          .str();
  write_whole(request, text.data(), text.size());
}

void NetworkRecord::record_external_average(double consensus, const RunEnd& end) {
  if (average_evaluator_ < 0) {
    if (average_missing_.empty())
      average_missing_ = "no process of the script was asked to evaluate it: gossip run, which "
                         "starts them, does that; under mpirun, srun or torchrun nothing can";
    return;
  }
  std::ifstream in(cat(out_dir_, "/average-eval.json"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const auto number = [&](const std::string& key) {
    const auto at = json.find(cat("\"", key, "\": "));
    return at == std::string::npos ? NAN
                                   : std::strtod(json.c_str() + at + key.size() + 4, nullptr);
  };
  const double accuracy = number("accuracy");
  if (json.empty() || std::isnan(accuracy)) {
    average_missing_ = cat("peer ", average_evaluator_, "'s script did not evaluate it (",
                           json.empty() ? cat("no ", out_dir_, "/average-eval.json; see peers/",
                                              average_evaluator_, "/peer.log")
                                        : json,
                           ")");
    return;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  if (clock_ == Clock::kPeers) seconds = slowest_done_seconds();
  record_.write(MetricsRow{end.rounds, std::isnan(end.epochs) ? 0.0 : end.epochs, -1,
                           number("loss"), accuracy, consensus, end.bytes_sent, seconds});
  record_.flush();
}

/// Rows for every peer and for the average model, whose accuracy and the consensus distance
/// come from the peers' parameter snapshots.
void NetworkRecord::merge_round(std::int64_t round, std::map<int, EvalEvent>& evals,
                                const std::vector<int>& expected) {
  std::vector<std::string> paths;
  for (int r : expected) paths.push_back(evals[r].params);
  double cd = 0.0;
  // A model only the exec: script knows is evaluated by that script, once, from the final
  // parameters (hand_out_average); its rounds here have the consensus distance only.
  const bool external = !config_.exec.empty();
  const Evaluation ev = evaluate_average(paths, &cd);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  if (clock_ == Clock::kPeers) {
    seconds = 0.0;
    for (int r : expected) seconds = std::max(seconds, evals[r].seconds);
  }
  // The average model's row: its test loss and accuracy (as under gossip sim), all peers' bytes.
  MetricsRow avg_row{round, evals[expected.front()].epoch, -1, ev.loss, ev.accuracy, cd, 0,
                     seconds};
  for (int r : expected) {
    const EvalEvent& e = evals[r];
    record_.write(MetricsRow{round, e.epoch, r, e.loss, e.accuracy, cd, e.bytes_sent, e.seconds});
    avg_row.bytes_sent += e.bytes_sent;
    if (remove_snapshots_) {
      std::error_code ec;
      std::filesystem::remove(e.params, ec);
    }
  }
  if (!external) record_.write(avg_row);
  record_.flush();
}

int NetworkRecord::finished() const {
  return static_cast<int>(std::count_if(done_.begin(), done_.end(),
                                        [](const auto& d) { return d.has_value(); }));
}

double NetworkRecord::slowest_done_seconds() const {
  double s = 0.0;
  for (const auto& d : done_)
    if (d) s = std::max(s, d->seconds);
  return s;
}

std::vector<std::pair<std::string, PhaseSeconds>> NetworkRecord::add_phases(
    NetworkSummary& net) const {
  std::vector<std::pair<std::string, PhaseSeconds>> phase_rows;
  PhaseSeconds all_phases{};
  for (int r = 0; r < n_; ++r) {
    if (!done_[r] || done_[r]->phases.empty()) {
      net.phases_per_peer.raw("null");
      continue;
    }
    PhaseSeconds p{};
    try {
      p = parse_phase_seconds(done_[r]->phases);
    } catch (const InputError& e) {
      std::fprintf(stderr, "peer %d: its timeline summary is unreadable (%s)\n", r, e.what());
      net.phases_per_peer.raw("null");
      continue;
    }
    for (std::size_t i = 0; i < kPhaseCount; ++i) all_phases[i] += p[i];
    phase_rows.emplace_back(cat(r), p);
    net.phases_per_peer.add(phase_json(p));
  }
  if (!phase_rows.empty()) {
    phase_rows.emplace_back("all", all_phases);
    net.phases = all_phases;
  }
  return phase_rows;
}

void NetworkRecord::print_final_table(
    const Summary& s, const NetworkSummary& net, const std::vector<double>& peer_rss_mb,
    const std::vector<std::pair<std::string, PhaseSeconds>>& phase_rows,
    const std::vector<std::string>& missing_links) const {
  const bool rss = static_cast<int>(peer_rss_mb.size()) == n_;
  const double peer_max_rss_mb =
      rss ? *std::max_element(peer_rss_mb.begin(), peer_rss_mb.end()) : 0.0;
  const auto& split = net.components;
  std::printf("\n%5s  %9s  %12s  %8s%s\n", "peer", "test_acc", "bytes_sent", "seconds",
              rss ? "  max_rss_mb" : "");
  for (int r = 0; r < n_; ++r) {
    const std::string mem = rss ? cat("  ", fixed(peer_rss_mb[r], 1)) : std::string();
    // An elastic run: a rank never a member has no row; one that left says so.
    const bool member = net.member_rounds.empty() || net.member_rounds[r] > 0;
    if (!member) continue;
    if (!done_[r]) {
      std::printf("%5d  %9s  %12s  %8s%s\n", r, "dead", "-", "-", mem.c_str());
      continue;
    }
    const bool left = members_ && !std::binary_search(members_->epochs().back().members.begin(),
                                                      members_->epochs().back().members.end(), r);
    const std::string acc = std::isnan(done_[r]->accuracy) ? "-" : fixed(done_[r]->accuracy, 4);
    std::printf("%5d  %9s  %12llu  %8.1f%s%s\n", r, acc.c_str(),
                static_cast<unsigned long long>(done_[r]->bytes_sent), done_[r]->seconds,
                mem.c_str(), left ? cat("  left after round ", done_[r]->rounds - 1).c_str() : "");
  }
  if (rss) std::printf("peak RSS per peer %.1f MB\n", peer_max_rss_mb);
  if (!phase_rows.empty())
    std::printf("\nwhere the time went (%% of each peer's time; timelines in %s/peers/R/trace.json;"
                " encrypt: sealing and opening TLS records on the transport's thread, beside the"
                " other phases):\n%s",
                out_dir_.c_str(), phase_table(phase_rows).c_str());
  if (!missing_links.empty()) {
    std::printf("links not in the run's graph at the end (summary.json missing_links):\n");
    for (const std::string& line : missing_links) std::printf("  %s\n", line.c_str());
  }
  if (!split.empty()) {
    std::printf("PARTITIONED: the live graph ended split into %s; the components trained "
                "separate models, so the average below is not one model. Per component:",
                format_components(split).c_str());
    for (std::size_t i = 0; i < split.size(); ++i)
      std::printf(" {%s} %.4f", format_peers(split[i]).c_str(), net.component_accuracy[i]);
    std::printf("\n");
    if (config_.monitor.on_partition == PartitionPolicy::kStop)
      std::printf("the peers stopped when they saw the split (monitor.on_partition: stop), each "
                  "with a checkpoint\n");
  }
  const double epochs = std::isnan(s.end.epochs) ? s.last.epoch : s.end.epochs;
  if (s.end.average_missing.empty())
    std::printf("average model: test_accuracy %.4f, consensus distance %.3g, ", s.last.test_accuracy,
                s.last.consensus_distance);
  else
    std::printf("average model: none (%s); consensus distance %.3g, ",
                s.end.average_missing.c_str(), s.last.consensus_distance);
  std::printf("%lld rounds, %.2f epochs, %.1f s\nwrote %s/summary.json, %s/metrics.csv and "
              "%s/events.jsonl\n",
              static_cast<long long>(s.end.rounds), epochs, s.end.wall_seconds, out_dir_.c_str(),
              out_dir_.c_str(), out_dir_.c_str());
}

void NetworkRecord::add_membership(NetworkSummary& net, std::int64_t rounds) const {
  std::vector<MembershipRecord> changes = planned_membership(*members_);
  std::erase_if(changes, [&](const MembershipRecord& c) { return c.from >= rounds; });  // never came
  for (MembershipRecord& c : changes)  // a member taken out for its death is not a leaver
    for (const Announcement& a : announced_)
      if (a.kind == ChangeKind::kDead && std::erase(c.left, a.rank) > 0) c.dead.push_back(a.rank);
  const std::vector<int> initial = members_->members(0);
  MembershipTimeline t = membership_timeline(
      initial, members_spectral_gap(*members_->elastic(), initial), changes, n_, rounds);
  net.membership = std::move(t.entries);
  net.member_rounds = std::move(t.member_rounds);
}

RunEnd NetworkRecord::run_end(double wall_seconds) const {
  RunEnd end{.rounds = record_.last().round, .bytes_sent = 0, .wall_seconds = wall_seconds,
             .connected = true, .params_sha256 = {}, .gemm = gemm_.name,
             .epochs = NAN, .average_missing = {}, .extra = {}};
  // The rounds and epochs the peers ran (their done events), not the last evaluation's.
  std::int64_t rounds_run = -1;
  for (const auto& d : done_)
    if (d && d->rounds > rounds_run) {
      rounds_run = d->rounds;
      end.epochs = d->epoch;
    }
  if (rounds_run >= 0) end.rounds = rounds_run;
  for (int r = 0; r < n_; ++r) {
    end.params_sha256.push_back(done_[r] ? done_[r]->params_sha256 : "");
    end.bytes_sent += done_[r] ? done_[r]->bytes_sent : 0;
  }
  return end;
}

NetworkSummary NetworkRecord::network_summary(const RunEnd& end) const {
  // The fields gossip sim's summary also has, with the same meaning.
  NetworkSummary net{.peers = n_, .config = config_.path, .topology = config_.gossip.topology,
                     .algorithm = algorithm_name(config_.gossip.algorithm),
                     .spectral_gap = NAN, .bytes_sent = end.bytes_sent, .samples_per_peer = {},
                     .components = {}, .component_accuracy = {},
                     .deaths = std::ssize(deaths_), .rejoins = std::ssize(rejoins_),
                     .alive_at_end = {}, .phases = std::nullopt, .phases_per_peer = {},
                     .byzantine = byzantine_, .refused_params = {}, .membership = {},
                     .member_rounds = {}};
  for (int r = 0; r < n_; ++r) {
    const std::vector<int> pairs = done_[r] ? done_[r]->refused : std::vector<int>{};
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2)
      net.refused_params.add(
          JsonObject().add("peer", r).add("from", pairs[i]).add("count", pairs[i + 1]));
  }
  return net;
}

RunGraph NetworkRecord::final_graph(NetworkSummary& net, std::int64_t rounds) const {
  try {
    const Topology loaded = load_topology(config_.gossip.topology);
    net.spectral_gap = 1.0 - analyze(loaded).rho_per_round;
    return run_graph(members_ ? *members_ : loaded, rounds);
  } catch (const InputError&) {
    // The topology file is gone or changed since the run: the gap is left out (null), and the
    // graph is the newest word of a peer alive at the end.
    return monitors_graph();
  }
}

std::vector<double> NetworkRecord::evaluate_components(NetworkSummary& net) {
  // Split at the end: each component's own average model, from its peers' final parameters.
  std::vector<double> component_consensus;
  for (const auto& c : net.components) {
    const std::vector<std::string> paths = final_params(c);
    double consensus = NAN;
    net.component_accuracy.push_back(paths.empty() ? NAN
                                                   : evaluate_average(paths, &consensus).accuracy);
    component_consensus.push_back(consensus);
  }
  return component_consensus;
}

void NetworkRecord::evaluate_exec_average(RunEnd& end) {
  const std::vector<std::string> paths = final_params();
  double consensus = NAN;
  if (!paths.empty()) {
    try {
      evaluate_average(paths, &consensus);
    } catch (const RuntimeError& e) {
      log_line(cat("gossip run: the final consensus distance: ", e.what()));
    }
  }
  record_external_average(consensus, end);
  end.average_missing = average_missing_;
}

JsonArray NetworkRecord::failures_json() const {
  JsonArray failures;
  for (const Failure& f : failures_) {
    JsonObject o;
    o.add("peer", f.peer).add("time_s", f.time_s).add("why", f.why);
    if (f.back_s >= 0) o.add("back_s", f.back_s);
    else o.raw("back_s", "null");
    failures.add(o);
  }
  return failures;
}

Summary NetworkRecord::finish(double wall_seconds, const std::vector<double>& peer_rss_mb) {
  write_live_graphs(live_graphs_.size());
  RunEnd end = run_end(wall_seconds);
  NetworkSummary net = network_summary(end);
  const RunGraph graph = final_graph(net, std::max(end.rounds, total_rounds_));
  end.connected = graph.connected;
  net.components = graph.components;
  net.one_way = graph.one_way;
  for (const auto& shard : shard_for(config_, data_.train, n_))
    net.samples_per_peer.push_back(std::ssize(shard));
  // A finished process, and in an elastic run a member at the end (one that left finished too).
  const std::vector<int> last_members =
      members_ && !members_->epochs().empty() ? members_->epochs().back().members
                                              : std::vector<int>{};
  for (int r = 0; r < n_; ++r)
    net.alive_at_end.push_back(
        done_[r].has_value() &&
        (last_members.empty() || std::binary_search(last_members.begin(), last_members.end(), r)));
  const std::vector<double> component_consensus = evaluate_components(net);
  if (!config_.exec.empty()) evaluate_exec_average(end);
  if (members_) add_membership(net, std::max(end.rounds, total_rounds_));
  const auto phase_rows = add_phases(net);
  add_network_summary(end.extra, net);
  // The fields of gossip run alone.
  end.extra.add("missing_links", graph.missing_links)
      .add("disagreeing_views", graph.disagreeing_views);
  end.extra.add("dead_peers", JsonArray::of(dead_))
      .add("component_consensus_distance", JsonArray::of(component_consensus))
      .add("failures", failures_json())
      .add("membership", membership_);
  const bool rss = static_cast<int>(peer_rss_mb.size()) == n_;
  double peer_max_rss_mb = 0.0;
  if (rss) {
    peer_max_rss_mb = *std::max_element(peer_rss_mb.begin(), peer_rss_mb.end());
    end.extra.add("peer_max_rss_mb", peer_max_rss_mb);
  }
  const Summary s = record_.finish(std::move(end));
  print_final_table(s, net, peer_rss_mb, phase_rows, graph.missing_lines);
  std::fflush(stdout);
  return s;
}

}  // namespace gossip::launcher
