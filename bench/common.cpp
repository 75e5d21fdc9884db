// bench/common.cpp: timing, the PyTorch reference runner and small JSON reading for benchmarks.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "bench/bench.hpp"
#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/net.hpp"
#include "gossip_config.h"

namespace gossip::bench {

double best_seconds_per_call(const std::function<void()>& fn, int iters, int reps) {
  for (int i = 0; i < std::max(1, iters / 10); ++i) fn();  // warm-up
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    best = std::min(best, s);
  }
  return best;
}

std::optional<std::string> bench_script(const std::string& name, std::string* looked) {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("GOSSIP_BENCH_DIR"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path bin = exe.parent_path();
    dirs.push_back(bin / ".." / "share" / "gossip" / "bench");  // PREFIX/bin/gossip
    dirs.push_back(bin / ".." / ".." / ".." / "bench");          // a build's src/cli/gossip
  }
  dirs.push_back(std::filesystem::path(GOSSIP_SOURCE_DIR) / "bench");
  std::string where;
  for (const auto& d : dirs) {
    const std::filesystem::path p = (d / name).lexically_normal();
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
    where += (where.empty() ? "" : ", ") + p.string();
  }
  if (looked) *looked = where;
  return std::nullopt;
}

std::optional<std::string> run_python(const std::string& python, const std::string& script,
                                      const std::vector<std::string>& args) {
  std::string looked;
  const auto path = bench_script(script, &looked);
  if (!path) {
    std::fprintf(stderr, "gossip bench: the PyTorch reference %s was not found (looked in %s; "
                 "set GOSSIP_BENCH_DIR to the folder that has it); no reference column\n",
                 script.c_str(), looked.c_str());
    return std::nullopt;
  }
  std::string cmd = python + " '" + *path + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return std::nullopt;
  std::array<char, 4096> buf{};
  std::string last;
  while (std::fgets(buf.data(), buf.size(), pipe.get())) {
    std::string line = buf.data();
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) last = line;
  }
  if (pclose(pipe.release()) != 0 || last.empty()) return std::nullopt;
  return last;
}

std::optional<std::string> torch_python() {
  // Debian's python3-torch lives under /usr/bin/python3 (not a virtual environment's python).
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    std::string cmd = std::string(py) + " -c 'import torch' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return std::string(py);
  }
  return std::nullopt;
}

std::optional<double> json_field(const std::string& json, const std::string& key) {
  const std::string pat = "\"" + key + "\":";
  auto pos = json.find(pat);
  if (pos == std::string::npos) return std::nullopt;
  return std::strtod(json.c_str() + pos + pat.size(), nullptr);
}

std::pair<std::string, std::string> reference_cells(double ours, double reference, double scale,
                                                    int digits) {
  if (reference <= 0) return {"-", "-"};
  char ref[32], ratio[32];
  std::snprintf(ref, sizeof ref, "%.*f", digits, reference * scale);
  std::snprintf(ratio, sizeof ratio, "%.3f", ours / reference);
  return {ref, ratio};
}

std::string blas_kernel_line() {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  std::string line = "OpenBLAS kernel: " + blas_core_name();
  if (forced && *forced) line += std::string(" (forced by OPENBLAS_CORETYPE=") + forced + ")";
  return line;
}

RunCredentials::RunCredentials(const std::string& prefix, int peers)
    : dir_(std::filesystem::temp_directory_path() / cat(prefix, "-", getpid())) {
  KeySetOptions keys;
  keys.run_id = "bench";
  keys.peers = peers;
  keys.write_ca_key = false;
  keys.overwrite = true;
  create_key_set(dir_, keys);
}

RunCredentials::~RunCredentials() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace gossip::bench
