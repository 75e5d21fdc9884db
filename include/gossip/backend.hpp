/// backend: where tensors live and the few operations training needs (DESIGN idea 3), in parts:
/// the device (gossip/backend_device.hpp: memory, copies, page-locked memory, graphs) and the
/// operation groups that run on it: GEMM (gossip/gemm_ops.hpp), layer kernels
/// (gossip/layer_kernels.hpp) and the flat-buffer math of training and gossip
/// (gossip/gossip_kernels.hpp). The CPU backend runs a GEMM chosen by measuring (OpenBLAS or
/// oneDNN) and loops over gossip::math; the CUDA backend runs cuBLAS and the same math in
/// kernels. This header names the whole and makes one.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/backend.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>
#include <string>
#include <vector>

#include "gossip/backend_device.hpp"
#include "gossip/compute_choices.hpp"
#include "gossip/gemm.hpp"
#include "gossip/gemm_ops.hpp"
#include "gossip/gossip_kernels.hpp"
#include "gossip/layer_kernels.hpp"

namespace gossip {

/// A backend: one device (memory, copies, graphs) with its three operation groups, each a
/// virtual base so that an implementation may supply a part from a class of its own (the CPU
/// backend's layer and gossip loops, src/compute/cpu_layers.hpp, cpu_gossip.hpp). Code that
/// needs only a part takes that part (a Device, GemmOps, LayerKernels or GossipKernels); a
/// Backend is each of them.
class Backend : public virtual GemmOps, public virtual LayerKernels, public virtual GossipKernels {
 public:
  /// "cpu" or "cuda".
  virtual std::string name() const = 0;
  /// A line for logs: BLAS kernel, threads or device name.
  virtual std::string describe() const = 0;
};

/// The backend named `name` (a row of backend_table, gossip/compute_choices.hpp); throws
/// InputError "backend: unknown value 'x' (expected one of: auto, cpu, cuda)" otherwise.
BackendChoice parse_backend_choice(const std::string& name);

/// Makes a backend. kAuto picks CUDA only when this build has it and a device is present, else
/// the CPU (logging one line saying why); kCuda without a device or without CUDA in the build
/// throws InputError. `threads` is the CPU BLAS thread count (0 = leave OpenBLAS's default).
/// `device`: the CUDA backend runs on visible device `device` modulo their count (a peer passes
/// its rank: one peer per device, round robin; CUDA_VISIBLE_DEVICES says which are visible).
std::unique_ptr<Backend> make_backend(BackendChoice choice, int threads = 1,
                                      bool log_choice = true, int device = 0);

/// The CUDA backend's GEMM for train.precision: cublas (fp32), cublas_tf32 or cublas_bf16 (the
/// plugin's own table, src/compute/cuda/cuda_backend.cu, holds the same names).
std::string cuda_gemm_name(Precision precision);

/// The CPU backend directly (tests, references).
std::unique_ptr<Backend> make_cpu_backend(int threads = 1);

/// Number of CUDA devices usable by this build (0 when built without CUDA or none present).
int cuda_device_count();
/// Why `choice` cannot run here ("" when it can): "cuda was asked for but ..." with no device,
/// or in a build without the CUDA backend. What make_backend throws, asked before anything
/// starts (gossip run).
std::string backend_refusal(BackendChoice choice);
/// Why train.conv `engine` cannot run where `choice` puts the peers ("" when it can): cudnn on
/// the CPU or where cuDNN does not load. Asked before anything starts (gossip run).
std::string conv_refusal(BackendChoice choice, ConvEngine engine);
/// Why train.graphs `mode` cannot run where `choice` puts the peers ("" when it can): step
/// anywhere but the CUDA backend. Asked before anything starts (gossip run).
std::string graphs_refusal(BackendChoice choice, GraphMode mode);
/// Why train.precision cannot run on the GPU `choice` puts the peers on ("" when it can, and
/// for the CPU, whose GEMM choice refuses what it cannot run): tf32 and bf16 need compute
/// capability 8.0.
std::string precision_refusal(BackendChoice choice, Precision precision);
/// One line on the CUDA backend for `gossip --version`: not built; or built, and whether its
/// plugin loads (it is loaded here even without a driver, to check it) and what it sees.
std::string cuda_plugin_check();

/// OpenBLAS's kernel name (openblas_get_corename()), for benchmark and log lines.
std::string blas_core_name();

// ---- which GEMM the CPU backend runs (docs/config.md, train.gemm) ------------------------------

/// The CPU backend's GEMMs in this build, in the order they are timed: "openblas" (OpenBLAS, its
/// kernel from a table of CPU models) and "onednn" (oneDNN, JIT code for the CPU's ISA features).
/// make_cpu_backend starts with "openblas".
std::vector<std::string> cpu_gemm_names();

/// What decides the GEMM: `requested` is train.gemm (auto or a name; `requested_by` says where it
/// came from otherwise, e.g. a benchmark's --gemm); `env` is GOSSIP_GEMM's
/// value (empty: unset), used when `requested` is auto; `cache_dir` holds the choices measured
/// on this machine ("" for no cache); `threads` is the backend's thread count (part of the key).
struct GemmRequest {
  std::string requested = "auto";
  std::string env;
  std::string cache_dir;
  int threads = 1;
  std::string requested_by = "train.gemm";  // where `requested` came from, for messages
  // train.precision: bf16 runs oneDNN's bf16 matmul (onednn_bf16) whatever train.gemm says
  // (auto or onednn), on a CPU with AVX512-BF16 or AMX; fp32 chooses as above.
  Precision precision = Precision::kFp32;
};

/// The request of a run: train.gemm, this process's GOSSIP_GEMM, gemm_cache_dir() and
/// train.precision.
GemmRequest gemm_request(const std::string& train_gemm, int threads,
                         Precision precision = Precision::kFp32);
/// $XDG_CACHE_HOME/gossip, else $HOME/.cache/gossip, else "" (none).
std::string gemm_cache_dir();

/// The GEMM chosen and why: `source` is "train.gemm", "GOSSIP_GEMM", "cached", "measured", "the
/// only candidate", or the device backend's own.
struct GemmChoice {
  std::string name;
  std::string source;
  /// "GEMM onednn (measured)", for a peer's first line.
  std::string line() const;
};

/// Chooses `backend`'s GEMM and makes it run. An explicit train.gemm wins, then GOSSIP_GEMM;
/// for auto, the cache file for this CPU (model and feature flags), thread count, candidates and
/// `shapes`, else every candidate is timed over `shapes` (the model's step: a few milliseconds)
/// and the fastest is kept and cached. A cache file that does not read as one is ignored with a
/// warning on stderr. Throws InputError naming train.gemm or GOSSIP_GEMM and the choices for an
/// unknown name. A device backend keeps its one GEMM. With request.precision bf16 the CPU runs
/// onednn_bf16; InputError when the backend is a device's, train.gemm names another GEMM, or the
/// CPU has no bf16 instructions.
GemmChoice choose_gemm(Backend& backend, const GemmRequest& request,
                       const std::vector<RowMajorGemm>& shapes);

/// Seconds of the best of `reps` passes over `shapes` (after a warm-up pass) and the flops of a
/// pass.
struct GemmTiming {
  std::string name;
  double seconds = 0.0;
  double flops = 0.0;
};
/// Times every GEMM of `backend` over `shapes`; leaves its GEMM as it was.
std::vector<GemmTiming> time_gemms(Backend& backend, const std::vector<RowMajorGemm>& shapes,
                                   int reps);

}  // namespace gossip
