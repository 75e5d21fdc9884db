// Found ahead of the real <asio/steady_timer.hpp> by every room that does not declare Asio.
#error "Asio belongs to src/net only (DESIGN.md idea 4); this room does not declare it in meson.build"
