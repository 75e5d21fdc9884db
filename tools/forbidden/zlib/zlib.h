// Found ahead of the real <zlib.h> by every room that does not declare zlib.
#error "zlib belongs to src/data only (DESIGN.md idea 4); this room does not declare it in meson.build"
