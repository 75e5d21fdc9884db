// compute/gemm_choice.cpp: which GEMM the CPU backend runs. An explicit choice (train.gemm, else
// GOSSIP_GEMM) is taken as it is; `auto` reads the choice measured before on this machine (a
// small file under the user's cache directory, keyed by the CPU's model and feature flags, the
// thread count, the candidates and the model's GEMM shapes), or times every candidate on those
// shapes (a few milliseconds) and keeps the fastest. A cache file that does not read as one is
// ignored with a warning and measured again: it never stops a run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip/hash.hpp"
#include "src/compute/gemm_provider.hpp"

namespace gossip {
namespace {

constexpr const char* kCacheHeader = "gossip gemm cache 1";

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

/// The GEMM names `backend` can run: the CPU's providers, or the device backend's own.
std::vector<std::string> names_of(const Backend& backend) {
  return backend.host_memory() ? cpu_gemm_names() : std::vector<std::string>{backend.gemm_name()};
}

/// Throws InputError naming `what` and the choices when `name` is neither auto nor one of them.
void check_name(const std::string& what, const std::string& name,
                const std::vector<std::string>& names) {
  if (name == "auto" || std::find(names.begin(), names.end(), name) != names.end()) return;
  throw InputError(cat(what, ": unknown GEMM '", name, "' (expected auto, ", names_text(names),
                       ")"));
}

/// The first processor's model name and feature flags (Linux), or "" elsewhere.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, id;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the end of the first processor's block
    if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0 ||
        line.rfind("cpu family", 0) == 0 || line.rfind("model\t", 0) == 0)
      id += line + "\n";
  }
  return id;
}

std::string cpu_model_name() {
  std::istringstream in(cpu_identity());
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 1);
  return " unknown";
}

std::string cache_path(const GemmRequest& r, const std::vector<std::string>& names,
                       const std::vector<RowMajorGemm>& shapes) {
  std::string key = cat(cpu_identity(), "threads ", r.threads, "\ncandidates ", names_text(names));
  for (const RowMajorGemm& g : shapes)
    key += cat("\n", g.trans_a, g.trans_b, " ", g.m, " ", g.n, " ", g.k, " ", g.lda, " ", g.ldb,
               " ", g.ldc, " ", g.beta != 0.0f);
  return (std::filesystem::path(r.cache_dir) /
          cat("gemm-", sha256_hex(key.data(), key.size()).substr(0, 16), ".txt"))
      .string();
}

/// The choice a cache file holds; nothing when there is no file; a warning and nothing when it
/// does not read as a cache file naming one of `names`.
std::string read_cache(const std::string& path, const std::vector<std::string>& names) {
  std::ifstream in(path);
  if (!in) return {};
  std::string header, line, choice;
  std::getline(in, header);
  while (std::getline(in, line))
    if (line.rfind("choice: ", 0) == 0) choice = line.substr(8);
  std::string why;
  if (header != kCacheHeader) why = cat("its first line is not '", kCacheHeader, "'");
  else if (choice.empty()) why = "it has no 'choice:' line";
  else if (std::find(names.begin(), names.end(), choice) == names.end())
    why = cat("it names '", choice, "', which is not one of ", names_text(names));
  if (why.empty()) return choice;
  std::fprintf(stderr, "gossip: warning: ignoring the GEMM cache file %s (%s); measuring again\n",
               path.c_str(), why.c_str());
  return {};
}

/// Writes the cache file through a temporary and a rename, so that peers starting together
/// never read half a file; a cache that cannot be written is only a warning.
void write_cache(const std::string& path, const std::string& choice,
                 const std::vector<GemmTiming>& timings) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = cat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kCacheHeader << "\ncpu:" << cpu_model_name() << "\n";
    for (const GemmTiming& t : timings)
      out << "measured: " << t.name << " " << t.seconds * 1e6 << " us\n";
    out << "choice: " << choice << "\n";
    if (!out) {
      std::fprintf(stderr, "gossip: warning: cannot write the GEMM cache file %s\n", tmp.c_str());
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::fprintf(stderr, "gossip: warning: cannot write the GEMM cache file %s: %s\n",
                 path.c_str(), ec.message().c_str());
    std::filesystem::remove(tmp, ec);
  }
}

/// One pass of every shape, on buffers made for them in the backend's memory.
struct Workload {
  Workload(Backend& backend, const std::vector<RowMajorGemm>& shapes) : shapes(shapes) {
    const auto make = [&](int rows, int ld, float value) {
      const auto n = static_cast<std::size_t>(rows) * ld;
      DeviceArray<float> m(backend, n);
      backend.fill(m.data(), value, static_cast<std::int64_t>(n));
      return m;
    };
    for (const RowMajorGemm& g : shapes) {
      a.push_back(make(g.trans_a ? g.k : g.m, g.lda, 0.5f));
      b.push_back(make(g.trans_b ? g.n : g.k, g.ldb, 0.25f));
      c.push_back(make(g.m, g.ldc, 0.0f));
      flops += 2.0 * g.m * g.n * g.k;
    }
  }
  void run(Backend& backend) {
    for (std::size_t i = 0; i < shapes.size(); ++i)
      backend.gemm(shapes[i], a[i].data(), b[i].data(), c[i].data());
  }
  std::vector<RowMajorGemm> shapes;
  std::vector<DeviceArray<float>> a, b, c;
  double flops = 0.0;
};

}  // namespace

std::string GemmChoice::line() const { return cat("GEMM ", name, " (", source, ")"); }

std::string gemm_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return (std::filesystem::path(x) / "gossip").string();
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return (std::filesystem::path(h) / ".cache" / "gossip").string();
  return {};
}

GemmRequest gemm_request(const std::string& train_gemm, int threads, Precision precision) {
  GemmRequest r;
  r.requested = train_gemm;
  r.precision = precision;
  if (const char* e = std::getenv("GOSSIP_GEMM")) r.env = e;
  r.cache_dir = gemm_cache_dir();
  r.threads = threads;
  return r;
}

std::vector<GemmTiming> time_gemms(Backend& backend, const std::vector<RowMajorGemm>& shapes,
                                   int reps) {
  using Clock = std::chrono::steady_clock;
  Workload work(backend, shapes);
  const std::string was = backend.gemm_name();
  std::vector<GemmTiming> out;
  for (const std::string& name : names_of(backend)) {
    backend.use_gemm(name);
    work.run(backend);  // warm-up: first-touch pages, JIT-compiled kernels, thread start
    backend.synchronize();
    double best = 1e300;
    for (int r = 0; r < std::max(reps, 1); ++r) {
      const auto t0 = Clock::now();
      work.run(backend);
      backend.synchronize();
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    out.push_back({name, best, work.flops});
  }
  backend.use_gemm(was);
  return out;
}

namespace {

/// train.precision: bf16, where it can run.
GemmChoice choose_bf16(Backend& backend, const GemmRequest& r) {
  if (!backend.host_memory()) {  // a GPU's tensor cores (use_gemm refuses where it has none)
    backend.use_gemm(cuda_gemm_name(Precision::kBf16));
    return {backend.gemm_name(), "train.precision"};
  }
  if (r.requested != "auto" && r.requested != "onednn")
    throw InputError(cat("train.precision: bf16 runs oneDNN's bf16 matmul, not ", r.requested_by,
                         " ", r.requested, " (leave it auto, or set onednn)"));
  if (const std::string why = cpu::onednn_bf16_refusal(); !why.empty())
    throw InputError(cat("train.precision: bf16: ", why, "; use precision: fp32"));
  backend.use_gemm("onednn_bf16");
  return {"onednn_bf16", "train.precision"};
}

/// train.precision: tf32, on a device's tensor cores.
GemmChoice choose_tf32(Backend& backend) {
  if (backend.host_memory())
    throw InputError(cat("train.precision: tf32 runs on a GPU's tensor cores; the ", backend.name(),
                         " backend computes in fp32 (precision: fp32) or bf16 (precision: bf16, "
                         "where the CPU has it)"));
  backend.use_gemm(cuda_gemm_name(Precision::kTf32));
  return {backend.gemm_name(), "train.precision"};
}

}  // namespace

GemmChoice choose_gemm(Backend& backend, const GemmRequest& r,
                       const std::vector<RowMajorGemm>& shapes) {
  const std::vector<std::string> names = names_of(backend);
  check_name(r.requested_by, r.requested, names);
  if (r.precision == Precision::kBf16) return choose_bf16(backend, r);
  if (r.precision == Precision::kTf32) return choose_tf32(backend);
  if (!backend.host_memory()) return {backend.gemm_name(), cat("the ", backend.name(), " backend's")};
  GemmChoice choice;
  if (r.requested != "auto") {
    choice = {r.requested, r.requested_by};
  } else if (!r.env.empty() && r.env != "auto") {
    check_name("GOSSIP_GEMM", r.env, names);
    choice = {r.env, "GOSSIP_GEMM"};
  } else if (names.size() == 1 || shapes.empty()) {
    choice = {names.front(), "the only candidate"};
  } else {
    const std::string path = r.cache_dir.empty() ? std::string() : cache_path(r, names, shapes);
    if (const std::string cached = path.empty() ? std::string() : read_cache(path, names);
        !cached.empty()) {
      choice = {cached, "cached"};
    } else {
      const std::vector<GemmTiming> t = time_gemms(backend, shapes, 3);
      const auto fastest = std::min_element(t.begin(), t.end(), [](const auto& x, const auto& y) {
        return x.seconds < y.seconds;
      });
      choice = {fastest->name, "measured"};
      if (!path.empty()) write_cache(path, choice.name, t);
    }
  }
  backend.use_gemm(choice.name);
  return choice;
}

}  // namespace gossip
