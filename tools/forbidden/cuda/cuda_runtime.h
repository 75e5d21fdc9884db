// Found ahead of the real <cuda_runtime.h> by every room that does not declare CUDA.
#error "CUDA belongs to src/compute/cuda only (DESIGN.md idea 4); this room does not declare it in meson.build"
