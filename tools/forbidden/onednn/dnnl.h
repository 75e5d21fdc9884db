// Found ahead of the real <dnnl.h> by every room that does not declare oneDNN.
#error "oneDNN belongs to src/compute only (DESIGN.md idea 4); this room does not declare it in meson.build"
