// bench/bench.hpp: shared pieces of `gossip bench NAME`. Every benchmark measures its reference
// in the same run and prints a ratio (ours / reference); with --json, one JSON object.
#pragma once
#if !defined(GOSSIP_ROOM_BENCH)
#error "bench/bench.hpp belongs to room bench, which this room does not use (see the room table in meson.build)"
#endif

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gossip::bench {

/// Best (smallest) seconds per call of `fn` over `reps` repetitions of `iters` calls each.
double best_seconds_per_call(const std::function<void()>& fn, int iters, int reps);

/// Debian's python3 with torch importable, or nullopt (with a hint printed by the caller).
std::optional<std::string> torch_python();

/// Where the reference script bench/NAME is: $GOSSIP_BENCH_DIR, else beside the binary as
/// installed (PREFIX/share/gossip/bench for PREFIX/bin/gossip), else in the source tree of a
/// build (the binary's own, then the one it was built from). nullopt when in none of them; then
/// `looked` (when given) lists where it looked.
std::optional<std::string> bench_script(const std::string& name, std::string* looked = nullptr);

/// Runs a Python script from bench/ (bench_script) with arguments and returns its last stdout
/// line, or nullopt on failure; a script not found is said on stderr, never dropped silently.
std::optional<std::string> run_python(const std::string& python, const std::string& script,
                                      const std::vector<std::string>& args);

/// Reads a number field from a flat JSON object line; nullopt when absent.
std::optional<double> json_field(const std::string& json, const std::string& key);

/// Table cells for a reference time (times `scale`, `digits` decimals) and the ratio ours /
/// reference; both "-" when the reference was not measured (reference <= 0).
std::pair<std::string, std::string> reference_cells(double ours, double reference, double scale,
                                                    int digits);

/// A benchmark run's TLS credentials, as `gossip run` makes them (a fresh CA whose key is never
/// written, a key and certificate per rank) in a temporary folder named `prefix`-PID, removed
/// when this goes out of scope.
class RunCredentials {
 public:
  RunCredentials(const std::string& prefix, int peers);
  ~RunCredentials();
  RunCredentials(const RunCredentials&) = delete;
  RunCredentials& operator=(const RunCredentials&) = delete;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

/// One core's fp32 FMA rate (bench/fma_peak.cpp): the ceiling a GEMM's GFLOP/s is compared to.
struct FmaPeak {
  double gflops = 0.0;
  std::string isa;  // "AVX-512 FMA", "AVX2 FMA" or "SSE (mul + add)"
};
/// A loop of independent FMAs in the widest vectors the CPU has (a few tens of milliseconds).
FmaPeak measure_fma_peak();

/// The OpenBLAS kernel line every benchmark prints ("SkylakeX", and OPENBLAS_CORETYPE if set).
std::string blas_kernel_line();

// The benchmarks (one file each in bench/).
int run_step(int argc, char** argv);
int run_sim(int argc, char** argv);
int run_gossip(int argc, char** argv);
int run_wan(int argc, char** argv);
int run_session(int argc, char** argv);
int run_trace(int argc, char** argv);
int run_mix(int argc, char** argv);

}  // namespace gossip::bench
