// compute/backend.cpp: choosing a backend. CUDA only when built in and a device is present.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#if __has_include(<dlfcn.h>)
#include <dlfcn.h>
#endif

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip_config.h"

namespace gossip {

BackendChoice parse_backend_choice(const std::string& name) {
  return parse_choice(backend_table(), name, "backend");
}

#if GOSSIP_HAVE_CUDA
namespace {

/// The CUDA plugin, loaded once: null when there is no CUDA driver on this machine (then the
/// plugin, and the CUDA runtime and cuBLAS it links, are never mapped) or it cannot be loaded
/// (`why` says which).
struct CudaPlugin {
  int (*device_count)() = nullptr;
  Backend* (*make_backend)(int device) = nullptr;
  int (*cudnn)(char*, int) = nullptr;   // cuDNN's version or why not; 1 when it loads
  int (*capability)() = nullptr;        // device 0's compute capability (major * 10 + minor)
  std::string path;
  std::string why;
};

std::string plugin_path() {
  if (const char* env = std::getenv("GOSSIP_CUDA_PLUGIN")) return env;
  // The executable's own build tree first (a build run in place), then the installed one.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.string().rfind(std::filesystem::path(GOSSIP_CUDA_PLUGIN_BUILT)
                                    .parent_path().parent_path().parent_path().string(), 0) == 0 &&
      std::filesystem::exists(GOSSIP_CUDA_PLUGIN_BUILT))
    return GOSSIP_CUDA_PLUGIN_BUILT;
  if (std::filesystem::exists(GOSSIP_CUDA_PLUGIN_INSTALLED)) return GOSSIP_CUDA_PLUGIN_INSTALLED;
  return GOSSIP_CUDA_PLUGIN_BUILT;
}

CudaPlugin load_plugin(bool need_driver) {
  CudaPlugin p;
  if (need_driver) {
    // No driver, no device: do not map the CUDA libraries at all.
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) {
      p.why = "no CUDA driver (libcuda.so.1) on this machine";
      return p;
    }
    dlclose(driver);
  }
  p.path = plugin_path();
  void* h = dlopen(p.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    p.why = cat("cannot load the CUDA plugin ", p.path, ": ", dlerror());
    return p;
  }
  p.device_count = reinterpret_cast<int (*)()>(dlsym(h, "gossip_cuda_device_count"));
  p.make_backend = reinterpret_cast<Backend* (*)(int)>(dlsym(h, "gossip_cuda_make_backend"));
  p.cudnn = reinterpret_cast<int (*)(char*, int)>(dlsym(h, "gossip_cuda_cudnn"));
  p.capability = reinterpret_cast<int (*)()>(dlsym(h, "gossip_cuda_capability"));
  if (!p.device_count || !p.make_backend || !p.cudnn || !p.capability) {
    p.why = cat(p.path, " is not a gossip CUDA plugin (entry points missing)");
    p.device_count = nullptr;
    p.make_backend = nullptr;
    p.cudnn = nullptr;
    p.capability = nullptr;
  }
  return p;
}

const CudaPlugin& plugin() {
  static const CudaPlugin p = load_plugin(true);
  return p;
}

}  // namespace
#endif

int cuda_device_count() {
#if GOSSIP_HAVE_CUDA
  return plugin().device_count ? plugin().device_count() : 0;
#else
  return 0;
#endif
}

std::string cuda_plugin_check() {
#if GOSSIP_HAVE_CUDA
  const CudaPlugin p = load_plugin(false);
  if (!p.device_count) return cat("CUDA backend built, but ", p.why);
  return cat("CUDA backend built (plugin ", p.path, " loads; ", p.device_count(),
             " device(s) visible; ", plugin().why.empty() ? "a CUDA driver is present"
                                                          : plugin().why, ")");
#else
  return "CUDA backend not built";
#endif
}

std::string backend_refusal(BackendChoice choice) {
  if (choice != BackendChoice::kCuda) return {};
#if GOSSIP_HAVE_CUDA
  if (cuda_device_count() > 0) return {};
  return cat("cuda was asked for but no CUDA device is present",
             plugin().why.empty() ? std::string() : cat(" (", plugin().why, ")"));
#else
  return "cuda was asked for, but this build has no CUDA backend (rebuild with -Dcuda=enabled)";
#endif
}

std::string cuda_gemm_name(Precision precision) {
  switch (precision) {
    case Precision::kTf32: return "cublas_tf32";
    case Precision::kBf16: return "cublas_bf16";
    default: return "cublas";
  }
}

void use_conv(LayerKernels& kernels, ConvEngine engine) {
  if (const std::string why = kernels.use_conv(engine); !why.empty()) throw InputError(why);
}

std::string conv_name(const LayerKernels& kernels) {
  const std::string library = kernels.conv_library();
  return library.empty() ? "im2col" : library;
}

namespace {

/// True when `choice` resolves to the CUDA backend here.
bool on_device(BackendChoice choice) {
  return choice != BackendChoice::kCpu && cuda_device_count() > 0;
}

}  // namespace

std::string graphs_refusal(BackendChoice choice, GraphMode mode) {
  if (mode != GraphMode::kStep || on_device(choice)) return {};
  return "step replays the training step as a CUDA graph, and the peers would run on the CPU, "
         "which has none (train.graphs: off)";
}

std::string conv_refusal(BackendChoice choice, ConvEngine engine) {
  if (engine != ConvEngine::kCudnn) return {};
  if (!on_device(choice))
    return "cudnn runs on the CUDA backend with cuDNN 9, and the peers would run on the CPU "
           "(train.conv: auto or im2col)";
#if GOSSIP_HAVE_CUDA
  char why[512] = {0};
  if (plugin().cudnn(why, sizeof why) == 1) return {};
  return cat("cudnn, but ", why, " (put libcudnn.so.9 on the library path or name it in "
             "GOSSIP_CUDNN; or train.conv: auto or im2col)");
#else
  return {};
#endif
}

std::string precision_refusal(BackendChoice choice, Precision precision) {
  if (precision == Precision::kFp32 || !on_device(choice)) return {};
#if GOSSIP_HAVE_CUDA
  const int cc = plugin().capability();
  if (cc >= 80) return {};
  return cat(precision_name(precision), " needs tensor cores of compute capability 8.0 or later; "
             "this GPU has ", cc / 10, ".", cc % 10, " (precision: fp32)");
#else
  return {};
#endif
}

std::unique_ptr<Backend> make_backend(BackendChoice choice, int threads, bool log_choice,
                                      int device) {
  if (choice == BackendChoice::kCpu) return make_cpu_backend(threads);
  if (const std::string why = backend_refusal(choice); !why.empty())
    throw InputError(cat("backend: ", why));
#if GOSSIP_HAVE_CUDA
  const int devices = cuda_device_count();
  if (devices > 0) return std::unique_ptr<Backend>(plugin().make_backend(device));
  if (log_choice)
    std::fprintf(stderr, "gossip: backend auto: no CUDA device found, using the CPU\n");
#else
  if (log_choice)
    std::fprintf(stderr, "gossip: backend auto: this build has no CUDA backend, using the CPU\n");
#endif
  return make_cpu_backend(threads);
}

}  // namespace gossip
