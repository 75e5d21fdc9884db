/// compute_choices: the compute knobs of `train:` as named choices, one row each (the config
/// reads them, the compute room acts on them, peers and summaries name them): which backend
/// (train.backend), at what precision its products run (train.precision), how convolutions
/// run (train.conv), MPS (train.mps) and CUDA graphs (train.graphs).
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/compute_choices.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

// The CUDA plugin's sources include this (through gossip/backend.hpp) and compile as C++17:
// they see the enums alone; the tables, which need C++20, are for everything else.
#if __cplusplus >= 202002L
#include <span>

#include "gossip/choice.hpp"
#else
#define GOSSIP_CHOICE_ENUM(id, ...) id,
#endif

namespace gossip {

/// train.backend: X(id, name, summary).
#define GOSSIP_BACKENDS(X)                                                                      \
  X(kAuto, "auto", "the CUDA backend where it is built in and a device is present, else the CPU") \
  X(kCpu, "cpu", "the CPU: OpenBLAS or oneDNN GEMMs, train.threads threads per peer")            \
  X(kCuda, "cuda", "an NVIDIA GPU: cuBLAS GEMMs and CUDA kernels (a device is required)")

/// What the user asked for in `backend:`.
enum class BackendChoice { GOSSIP_BACKENDS(GOSSIP_CHOICE_ENUM) };

/// train.precision: X(id, name, summary). Master weights, optimizer state and gossip messages
/// stay fp32 whatever the row.
#define GOSSIP_PRECISIONS(X)                                                                    \
  X(kFp32, "fp32", "fp32 operands and products (strict)")                                       \
  X(kBf16, "bf16",                                                                              \
    "bf16 products with fp32 accumulation (CUDA: tensor cores, compute capability 8.0 or later; " \
    "CPU: oneDNN's matmul, AVX512-BF16 or AMX only)")                                            \
  X(kTf32, "tf32",                                                                              \
    "fp32 storage, TF32 tensor-core products (CUDA only; PyTorch's default for convolutions)")

enum class Precision { GOSSIP_PRECISIONS(GOSSIP_CHOICE_ENUM) };

/// train.conv: X(id, name, summary). How conv2d layers (and the convolutions of residual
/// blocks) run.
#define GOSSIP_CONV_ENGINES(X)                                                                  \
  X(kAuto, "auto", "cuDNN where the CUDA backend loads it, else im2col + GEMM")                  \
  X(kCudnn, "cudnn", "cuDNN's convolutions (the CUDA backend with cuDNN 9; refused elsewhere)")   \
  X(kIm2col, "im2col", "im2col + the backend's GEMM + col2im (every backend)")

enum class ConvEngine { GOSSIP_CONV_ENGINES(GOSSIP_CHOICE_ENUM) };

/// train.mps: X(id, name, summary). Whether gossip run starts CUDA's Multi-Process Service for
/// peers that share a GPU.
#define GOSSIP_MPS_MODES(X)                                                                      \
  X(kAuto, "auto", "start it when peers on CUDA outnumber the GPUs and nvidia-cuda-mps-control " \
                   "is found")                                                                    \
  X(kOn, "on", "start it whenever the peers run on CUDA (refused where it cannot start)")        \
  X(kOff, "off", "never: peers sharing a GPU take turns on it")

enum class MpsMode { GOSSIP_MPS_MODES(GOSSIP_CHOICE_ENUM) };

/// train.graphs: X(id, name, summary). Whether a peer's training step is launched kernel by
/// kernel or replayed as a CUDA graph.
#define GOSSIP_GRAPH_MODES(X)                                                                    \
  X(kOff, "off", "every call of the step launched one by one (the default)")                    \
  X(kStep, "step",                                                                              \
    "the step's forward and backward captured once as a CUDA graph and replayed every step "   \
    "(CUDA backend only; a model with dropout, or a step the capture refuses, runs eagerly "   \
    "and the peer's first line says why)")

enum class GraphMode { GOSSIP_GRAPH_MODES(GOSSIP_CHOICE_ENUM) };

#if __cplusplus >= 202002L
GOSSIP_CHOICE_TABLE(BackendChoice, GOSSIP_BACKENDS, backend_table, backend_choice_name)
GOSSIP_CHOICE_TABLE(Precision, GOSSIP_PRECISIONS, precision_table, precision_name)
GOSSIP_CHOICE_TABLE(ConvEngine, GOSSIP_CONV_ENGINES, conv_engine_table, conv_engine_name)
GOSSIP_CHOICE_TABLE(MpsMode, GOSSIP_MPS_MODES, mps_mode_table, mps_mode_name)
GOSSIP_CHOICE_TABLE(GraphMode, GOSSIP_GRAPH_MODES, graph_mode_table, graph_mode_name)
#endif

}  // namespace gossip
