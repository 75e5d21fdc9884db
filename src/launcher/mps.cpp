// launcher/mps.cpp: starting and stopping CUDA MPS around a run (see mps.hpp).
#include "src/launcher/mps.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"

namespace gossip::launcher {
namespace {

/// nvidia-cuda-mps-control on PATH or where NVIDIA's driver installs put it; "" if none.
std::string find_control() {
  std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
  dirs += ":/usr/local/nvidia/bin:/usr/bin:/usr/local/bin";
  std::stringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    const std::string path = dir + "/nvidia-cuda-mps-control";
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return {};
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

MpsDaemon::MpsDaemon(std::string control, std::string pipe_dir)
    : control_(std::move(control)), pipe_dir_(std::move(pipe_dir)) {}

MpsDaemon::~MpsDaemon() {
  const std::string cmd = cat("echo quit | ", quoted(control_), " >/dev/null 2>&1");
  [[maybe_unused]] const int rc = std::system(cmd.c_str());
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  unsetenv("CUDA_MPS_LOG_DIRECTORY");
  std::error_code ec;
  std::filesystem::remove_all(pipe_dir_, ec);
}

std::unique_ptr<MpsDaemon> start_mps(const RunConfig& config, int processes,
                                     const std::string& log_dir, std::string& line) {
  line.clear();
  const int devices = config.train.backend == BackendChoice::kCpu ? 0 : cuda_device_count();
  if (config.train.mps == MpsMode::kOff || devices == 0) {
    if (config.train.mps == MpsMode::kOn)
      throw InputError(cat(config.where("train.mps"), ": on, but the peers run on the CPU "
                           "(no CUDA device here, or train.backend: cpu); no peer was started"));
    return nullptr;
  }
  if (config.train.mps == MpsMode::kAuto && processes <= devices) {
    line = cat(processes, " peer process(es) on ", devices, " GPU(s): one device each, no MPS");
    return nullptr;
  }
  if (const char* pipe = std::getenv("CUDA_MPS_PIPE_DIRECTORY"); pipe && *pipe) {
    line = cat("the peers are clients of the MPS daemon at CUDA_MPS_PIPE_DIRECTORY=", pipe);
    return nullptr;
  }
  const std::string control = find_control();
  if (control.empty()) {
    if (config.train.mps == MpsMode::kOn)
      throw InputError(cat(config.where("train.mps"), ": on, but nvidia-cuda-mps-control is not "
                           "on PATH or in /usr/local/nvidia/bin; no peer was started"));
    line = cat(processes, " peer processes share ", devices, " GPU(s) without MPS "
               "(nvidia-cuda-mps-control not found): their kernels take turns on each device");
    return nullptr;
  }
  // The control pipe is a Unix socket: its folder must be short, so not under the run's.
  const std::string pipe_dir = cat("/tmp/gossip-mps-", getpid());
  std::error_code ec;
  std::filesystem::create_directories(pipe_dir, ec);
  std::filesystem::create_directories(log_dir, ec);
  setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir.c_str(), 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", log_dir.c_str(), 1);
  const std::string cmd = cat(quoted(control), " -d >/dev/null 2>&1");
  if (std::system(cmd.c_str()) != 0) {
    unsetenv("CUDA_MPS_PIPE_DIRECTORY");
    unsetenv("CUDA_MPS_LOG_DIRECTORY");
    std::filesystem::remove_all(pipe_dir, ec);
    if (config.train.mps == MpsMode::kOn)
      throw InputError(cat(config.where("train.mps"), ": on, but ", control, " -d failed (see ",
                           log_dir, "); no peer was started"));
    line = cat(processes, " peer processes share ", devices, " GPU(s) without MPS (", control,
               " -d failed; see ", log_dir, ")");
    return nullptr;
  }
  line = cat(processes, " peer processes share ", devices, " GPU(s) through CUDA MPS (", control,
             ", pipe ", pipe_dir, ", log ", log_dir, ")");
  return std::make_unique<MpsDaemon>(control, pipe_dir);
}

}  // namespace gossip::launcher
