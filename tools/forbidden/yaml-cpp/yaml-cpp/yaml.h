// Found ahead of the real <yaml-cpp/yaml.h> by every room that does not declare yaml-cpp.
#error "yaml-cpp belongs to src/config only (DESIGN.md idea 4); this room does not declare it in meson.build"
