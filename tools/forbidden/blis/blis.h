// Found ahead of the real <blis.h> by every room that does not declare BLIS.
#error "BLIS belongs to src/compute only (DESIGN.md idea 4); this room does not declare it in meson.build"
