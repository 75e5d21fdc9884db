// Found ahead of the real <f77blas.h> by every room that does not declare OpenBLAS.
#error "OpenBLAS belongs to src/compute only (DESIGN.md idea 4); this room does not declare it in meson.build"
