// Found ahead of the real <omp.h> by every room that does not declare OpenMP.
#error "OpenMP belongs to src/compute only (oneDNN's runtime); this room does not declare it in meson.build"
