// Found ahead of the real <cereal/types/vector.hpp> by every room that does not declare Cereal.
#error "Cereal belongs to src/wire only (DESIGN.md idea 4); this room does not declare it in meson.build"
